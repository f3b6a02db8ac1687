/*
 * gpt_auto.c -- uvmrt-gpt's automatic choice (see gpt.h): --cpu-layers auto and
 * --recompute auto rehearse the step on uvmrt's model of the machine
 * (uvmrt_choose(3)), and the review after 3 planned steps may choose again.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

/* ----------------------------------------------------------------------------
 * auto: uvmrt chooses --cpu-layers and --recompute by rehearsing the step on its
 * model of the machine (uvmrt_choose(3)), and reviews the choice after 3 planned steps */

/* {0, nl/8, 2 nl/8, ..., nl}, rounded, distinct; returns the count (<= 9). */
static size_t cpu_candidates(int nl, int *v) {
    size_t n = 0;
    for (int k = 0; k <= 8; k++) {
        int x = (k * nl + 4) / 8;
        if (n == 0 || v[n - 1] != x)
            v[n++] = x;
    }
    return n;
}

/* {0, L/2, L}, distinct. */
static size_t recompute_candidates(int L, int *v) {
    int c[3] = {0, L / 2, L};
    size_t n = 0;
    for (int k = 0; k < 3; k++)
        if (n == 0 || v[n - 1] != c[k])
            v[n++] = c[k];
    return n;
}

/* The recompute candidates; on cuda only those whose tensors fit the GPU's free memory
 * (real oversubscription can hang it: run_open_gpu refuses them), at least L. */
static size_t recompute_room(gpt_run_t *run, int *v) {
    size_t n = recompute_candidates(run->L, v);
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    if (run->backend != UVMRT_BACKEND_CUDA || gpt_gpu_mem_info(&free_b, &total_b, &dev) != NULL)
        return n;
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    int keep = run->recompute;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        run->recompute = v[i];
        if (gpt_planned_managed_bytes(run) + (64ull << 20) <= room || i + 1 == n)
            v[m++] = v[i];
        else if (!run->opt->c.quiet)
            printf("  auto: recompute %d left out: its tensors would not fit GPU %d's free "
                   "memory\n", v[i], dev);
    }
    run->recompute = keep;
    return m;
}

/* The knob values of one candidate, or the explicit flags' for a knob not chosen. */
void gpt_knob_values(const gpt_run_t *run, const int *values, int *k, int *n) {
    *k = run->knob_cpu >= 0 ? values[run->knob_cpu] : run->opt->cpu_layers;
    *n = run->knob_rec >= 0 ? values[run->knob_rec] : run->opt->recompute;
}

/* uvmrt_rehearse_fn: the trainer's steps with these values on `model`, compute off: a
 * second run struct (no GPU, no CPU thread, no data, no host memory behind the tensors)
 * declaring the same layers, tensors and calls as the real run; freed before return. */
static uvmrt_status_t rehearse(uvmrt_context_t *model, const int *values, int steps, void *user) {
    const gpt_run_t *real = user;
    jmp_buf jb;
    gpt_run_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return UVMRT_ERR_NOMEM;
    *r = (gpt_run_t){.opt = real->opt, .rehearsal = &jb, .ctx = model,
                     .backend = uvmrt_context_backend(model),
                     .policy = uvmrt_context_policy(model), .profile = uvmrt_context_profile(model),
                     .cpu_stream = (uvmrt_stream_t)&gpt_sim_cpu_stream, .cpu_last = -1,
                     .stream = (uvmrt_stream_t)&gpt_sim_gpu_stream,
                     .knob_cpu = -1, .knob_rec = -1, .fail_st = UVMRT_OK};
    gpt_shape_init(r);
    gpt_knob_values(real, values, &r->cpu_layers, &r->recompute);
    uvmrt_status_t st = UVMRT_OK;
    if (setjmp(jb) == 0) {
        gpt_net_alloc(r);
        for (int s = 0; s < steps; s++)
            gpt_step_calls(r, s, gpt_lr_at(real->opt, s));
    } else {
        st = r->fail_st != UVMRT_OK ? r->fail_st : UVMRT_ERR_INVALID;
    }
    free(r->lp);
    free(r->out);
    free(r->acts);
    free(r);
    return st;
}

static void choice_values_print(const gpt_run_t *run, const int *values) {
    int k, n;
    gpt_knob_values(run, values, &k, &n);
    if (run->knob_cpu >= 0)
        printf("cpu_layers %d%s", k, run->knob_rec >= 0 ? ", " : "");
    if (run->knob_rec >= 0)
        printf("recompute %d", n);
}

/* Before the tensors: the values of the knobs given as auto (the explicit ones as
 * given); prints the one line that says what was chosen. */
void gpt_choose_auto(gpt_run_t *run) {
    const gpt_options_t *o = run->opt;
    uvmrt_knob_t knobs[2];
    int cv[9], rv[3];
    size_t n = 0;
    run->knob_cpu = run->knob_rec = -1;
    run->cpu_layers = o->cpu_layers == GPT_AUTO ? 0 : o->cpu_layers;
    run->recompute = o->recompute == GPT_AUTO ? 0 : o->recompute;
    if (o->cpu_layers == GPT_AUTO) {
        run->knob_cpu = (int)n;
        knobs[n++] = (uvmrt_knob_t){"cpu_layers", cpu_candidates(run->nl, cv), cv};
    }
    if (o->recompute == GPT_AUTO) {
        run->knob_rec = (int)n;
        knobs[n++] = (uvmrt_knob_t){"recompute", recompute_room(run, rv), rv};
    }
    if (n == 0)
        return;
    run->choice.struct_size = sizeof run->choice;
    uvmrt_status_t st = uvmrt_choose(run->ctx, knobs, n, rehearse, run, &run->choice);
    if (st != UVMRT_OK)
        gpt_run_fail(run, "uvmrt_choose (%s auto) failed: %s (%s); give explicit values",
                 n == 2 ? "--cpu-layers and --recompute" : run->knob_cpu >= 0 ? "--cpu-layers"
                                                                            : "--recompute",
                 uvmrt_status_str(st), uvmrt_status_name(st));
    run->auto_knobs = (int)n;
    gpt_knob_values(run, run->choice.values, &run->cpu_layers, &run->recompute);
    if (!o->c.quiet) {
        size_t nc = uvmrt_choice_count(run->ctx);
        for (size_t i = 0; i < nc; i++) {
            int vals[UVMRT_KNOBS_MAX];
            double ns = 0;
            if (uvmrt_choice_candidate(run->ctx, i, vals, &ns) != UVMRT_OK)
                continue;
            printf("  auto candidate ");
            choice_values_print(run, vals);
            if (ns > 0)
                printf(": predicted %.1f ms/step\n", ns / 1e6);
            else
                printf(": does not fit the budget (predicted)\n");
        }
    }
    printf("auto: ");
    choice_values_print(run, run->choice.values);
    printf(" (predicted %.1f ms/step at a plan budget of %.2f GiB; %zu rehearsals)%s\n",
           run->choice.predicted_step_ns / 1e6, (double)run->choice.plan_budget_bytes / GIB,
           run->choice.rehearsals,
           run->choice.fits ? "" : "; no candidate fits the budget in the model's prediction");
    fflush(stdout);
}

void gpt_cpu_opt_open(gpt_run_t *run);

void gpt_cpu_opt_close(gpt_run_t *run) {
    gpt_cpu_drain(run);
    run->cpu_busy_s += gpt_cpuopt_busy_s(run->cpu);
    gpt_cpuopt_stop(run->cpu);
    run->cpu = NULL;
}

/* After training step s: once 3 planned steps ran since the choice (or at the last
 * step with at least 2), uvmrt compares measured with predicted and may choose again;
 * new values apply from the next step on. */
/* Applies a changed choice from the next step on: cpu_layers k, recompute n. */
static void choice_apply(gpt_run_t *run, int k, int n) {
    if (n < run->recompute && run->backend == UVMRT_BACKEND_CUDA) {
        int keep = run->recompute;
        run->recompute = n;
        uint64_t need = gpt_planned_managed_bytes(run) + (64ull << 20);
        run->recompute = keep;
        if (need > run->gpu_room) {
            printf("auto: keeping recompute %d: recompute %d needs %.2f GiB of managed memory, "
                   "more than the GPU has room for (%.2f GiB)\n", keep, n, (double)need / GIB,
                   (double)run->gpu_room / GIB);
            n = keep;
        }
    }
    gpt_cpu_opt_close(run); /* the thread's layers change: its last update first */
    gpt_run_reconfigure(run, k, n);
    if (run->compute)
        gpt_cpu_opt_open(run);
    run->side_step = 1; /* other layer calls: the runtime records the next step again */
}

/* The second review, 3 planned steps after a re-plan was applied: the measurements
 * decide between the re-planned values and the first ones. */
static void choice_review_again(gpt_run_t *run, int changed, int last) {
    const uvmrt_choice_t *c = &run->choice;
    printf("auto: the re-planned values measured %.1f ms/step, the first ones %.1f: %s\n",
           c->replanned_measured_step_ns / 1e6, c->measured_step_ns / 1e6,
           c->reverted ? (last ? "the first ones were faster (the run ends here)"
                               : "back to the first ones, from the next step on")
                       : "kept");
    fflush(stdout);
    if (!changed || last)
        return;
    int k, n;
    gpt_knob_values(run, c->values, &k, &n);
    choice_apply(run, k, n);
}

void gpt_choice_review(gpt_run_t *run, int s) {
    if (!run->auto_knobs || (run->reviewed && !run->review_again))
        return;
    if (!run->recording[s])
        run->planned++;
    int last = s + 1 == run->stop;
    if (run->planned < 3 && !(last && run->planned >= 2))
        return;
    int second = run->reviewed; /* the look at a re-plan's values */
    run->reviewed = 1;
    run->review_again = 0;
    int changed = 0;
    run->choice.struct_size = sizeof run->choice;
    uvmrt_status_t st = uvmrt_choice_review(run->ctx, &run->choice, &changed);
    if (st != UVMRT_OK) {
        fprintf(stderr, PROG ": note: uvmrt_choice_review failed: %s (%s); keeping the "
                        "choice\n", uvmrt_status_str(st), uvmrt_status_name(st));
        return;
    }
    if (second) {
        choice_review_again(run, changed, last);
        return;
    }
    const uvmrt_choice_t *c = &run->choice;
    double pred = c->first_predicted_step_ns, meas = c->measured_step_ns;
    printf("auto: predicted %.1f ms/step, measured %.1f ms/step (error %+.1f%%)\n", pred / 1e6,
           meas / 1e6, pred > 0 ? 100.0 * (meas - pred) / pred : 0.0);
    if (!c->replanned && c->predicted_step_ns != pred)
        printf("auto: the values stay; predicted with the measured work: %.1f ms/step\n",
               c->predicted_step_ns / 1e6);
    if (c->replanned) {
        printf("auto: re-planned: ");
        choice_values_print(run, c->values);
        printf(" (predicted %.1f ms/step at a plan budget of %.2f GiB)%s\n",
               c->predicted_step_ns / 1e6, (double)c->plan_budget_bytes / GIB,
               !changed ? "; the same values" : last ? "; the run ends here" : "");
    }
    fflush(stdout);
    int k, n;
    gpt_knob_values(run, c->values, &k, &n);
    /* a test hook (tests/test_gpt_trainer.c, examples/gpt/gpu-check.sh): the review on
     * sim never re-plans (the prediction is the model), so apply these as if it had */
    const char *hook = getenv("UVMRT_GPT_TEST_REPLAN");
    int hooked = hook && *hook;
    char extra;
    if (hooked) {
        if (sscanf(hook, "%d,%d%c", &k, &n, &extra) != 2 || k < 0 || k > run->nl || n < 0 ||
            n > run->L)
            gpt_run_fail(run, "UVMRT_GPT_TEST_REPLAN '%s': expected K,N with K in 0..%d and N in "
                          "0..%d", hook, run->nl, run->L);
        printf("auto: UVMRT_GPT_TEST_REPLAN (a test hook): applying cpu_layers %d, recompute "
               "%d\n", k, n);
        changed = 1;
    }
    if (!changed || last)
        return;
    run->review_again = !hooked; /* the measurements then decide between the two */
    run->planned = 0;
    choice_apply(run, k, n);
}

