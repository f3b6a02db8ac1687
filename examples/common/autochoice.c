/* autochoice.c -- see autochoice.h. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>

#include "autochoice.h"
#include "cli.h"

#define TEST_HOOK "UVMRT_TEST_REPLAN"

static const double GIB = 1024.0 * 1024.0 * 1024.0;

double autochoice_error_pct(const uvmrt_choice_t *c) {
    double pred = c->first_predicted_step_ns, meas = c->measured_step_ns;
    return meas > 0 ? 100.0 * (pred - meas) / meas : 0.0;
}

static void candidates_print(const autochoice_t *a) {
    size_t nc = uvmrt_choice_count(a->ctx);
    for (size_t i = 0; i < nc; i++) {
        int vals[UVMRT_KNOBS_MAX] = {0};
        double ns = 0;
        char text[128];
        if (uvmrt_choice_candidate(a->ctx, i, vals, &ns) != UVMRT_OK)
            continue;
        a->ops->text(a->user, vals, uvmrt_choice_candidate_recompute(a->ctx, i), text, sizeof text);
        if (ns > 0)
            printf("  auto candidate %s: predicted %.1f ms/step\n", text, ns / 1e6);
        else
            printf("  auto candidate %s: does not fit the budget (predicted)\n", text);
    }
}

void autochoice_choose(autochoice_t *a, const uvmrt_knob_t *knobs, size_t n,
                       uvmrt_rehearse_fn rehearse, void *rehearse_user, const char *flags) {
    a->choice.struct_size = sizeof a->choice;
    uvmrt_status_t st = uvmrt_choose(a->ctx, knobs, n, rehearse, rehearse_user, &a->choice);
    if (st != UVMRT_OK)
        cli_fail(a->ops->cleanup, a->user,
                 "uvmrt_choose (%s) failed: %s (%s); give explicit values", flags,
                 uvmrt_status_str(st), uvmrt_status_name(st));
    a->made = 1;
    if (!a->quiet)
        candidates_print(a);
    const uvmrt_choice_t *c = &a->choice;
    char text[128];
    a->ops->text(a->user, c->values, c->recompute_tensors, text, sizeof text);
    printf("auto: %s (predicted %.1f ms/step at a plan budget of %.2f GiB; %zu rehearsals)%s\n",
           text, c->predicted_step_ns / 1e6, (double)c->plan_budget_bytes / GIB, c->rehearsals,
           c->fits ? "" : "; no candidate fits the budget in the model's prediction");
    fflush(stdout);
}

/* UVMRT_TEST_REPLAN=K,N: the review acts as if it had re-planned to these values (on
 * sim it never re-plans), so that applying new values between steps is tested. 1 when
 * set. */
static int test_hook(autochoice_t *a) {
    const char *hook = getenv(TEST_HOOK);
    int k, n;
    char extra, why[128] = "";
    if (hook == NULL || *hook == '\0')
        return 0;
    if (sscanf(hook, "%d,%d%c", &k, &n, &extra) != 2 ||
        a->ops->hook(a->user, &a->choice, k, n, why, sizeof why) != 0)
        cli_fail(a->ops->cleanup, a->user, TEST_HOOK " '%s': expected K,N%s%s", hook,
                 *why ? " with " : "", why);
    a->choice.replanned = 1;
    char text[128]; /* the auto knobs' new values only: the hook changes no given one */
    a->ops->text(a->user, a->choice.values, a->choice.recompute_tensors, text, sizeof text);
    printf("auto: " TEST_HOOK " (a test hook): applying %s\n", text);
    return 1;
}

/* The second review, 3 planned steps after a re-plan was applied: the measurements
 * decide between the re-planned values and the first ones. */
static void review_again(autochoice_t *a, int s, int changed, int last) {
    const uvmrt_choice_t *c = &a->choice;
    printf("auto: the re-planned values measured %.1f ms/step, the first ones %.1f: %s\n",
           c->replanned_measured_step_ns / 1e6, c->measured_step_ns / 1e6,
           c->reverted ? (last ? "the first ones were faster (the run ends here)"
                               : "back to the first ones, from the next step on")
                       : "kept");
    fflush(stdout);
    if (changed && !last)
        a->ops->apply(a->user, c, s);
}

/* The first review's lines: the prediction against the measurement, and what a
 * re-plan chose. */
static void review_print(const autochoice_t *a, int changed, int last) {
    const uvmrt_choice_t *c = &a->choice;
    printf("auto: predicted %.1f ms/step, measured %.1f ms/step (error %+.1f%%)\n",
           c->first_predicted_step_ns / 1e6, c->measured_step_ns / 1e6, autochoice_error_pct(c));
    if (!c->replanned && c->predicted_step_ns != c->first_predicted_step_ns)
        printf("auto: the values stay; predicted with the measured work: %.1f ms/step\n",
               c->predicted_step_ns / 1e6);
    if (c->replanned) {
        char text[128];
        a->ops->text(a->user, c->values, c->recompute_tensors, text, sizeof text);
        printf("auto: re-planned: %s (predicted %.1f ms/step at a plan budget of %.2f GiB)%s\n",
               text, c->predicted_step_ns / 1e6, (double)c->plan_budget_bytes / GIB,
               !changed ? "; the same values"
               : last   ? "; the run ends here"
                        : "");
    }
    fflush(stdout);
}

void autochoice_after_step(autochoice_t *a, int s, int recorded, int last) {
    if (!a->made || (a->reviewed && !a->review_again))
        return;
    if (!recorded)
        a->planned++;
    if (a->planned < 3 && !(last && a->planned >= 2))
        return;
    int second = a->reviewed; /* the look at a re-plan's values */
    a->reviewed = 1;
    a->review_again = 0;
    int changed = 0;
    a->choice.struct_size = sizeof a->choice;
    uvmrt_status_t st = uvmrt_choice_review(a->ctx, &a->choice, &changed);
    if (st != UVMRT_OK) {
        fprintf(stderr, "%s: note: uvmrt_choice_review failed: %s (%s); keeping the choice\n",
                cli_program, uvmrt_status_str(st), uvmrt_status_name(st));
        return;
    }
    if (second) {
        review_again(a, s, changed, last);
        return;
    }
    int hooked = test_hook(a);
    changed |= hooked;
    review_print(a, changed, last);
    if (!changed || last)
        return;
    a->review_again = !hooked; /* the measurements then decide between the two */
    a->planned = 0;
    a->ops->apply(a->user, &a->choice, s);
}
