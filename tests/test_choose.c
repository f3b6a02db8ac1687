/*
 * test_choose.c -- uvmrt_choose and uvmrt_choice_review on the sim backend: the
 * choice is the candidate with the least predicted time, each prediction equals the
 * sim's own step time for the same schedule, budget and profile, a larger budget
 * never predicts slower than the half budget its ladder covers, a failed choice
 * changes nothing, and the review re-plans (once) only when the measurement is off.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>
#include <sys/resource.h>

#include "helpers.h"

#define NL 6
#define WEIGHT (256 * MIB)
#define ACT (128 * MIB)

/* A toy trainer with two knobs: how many of its layers keep their activation (the
 * others recompute it: the backward declares the forward's flops again), and a
 * flops factor a test can use to make the real run differ from the model. */
typedef struct toy {
    double flops_scale; /* declared work of the real run over the model's */
    int fail_at;        /* rehearsal number that fails (1-based; 0: none) */
    int calls;          /* rehearsals so far */
} toy_t;

typedef struct toy_net {
    uvmrt_tensor_t *w[NL], *g[NL], *a[NL], *shared;
} toy_net_t;

static uvmrt_status_t toy_build(uvmrt_context_t *ctx, int keep, toy_net_t *n)
{
    uvmrt_status_t st = layers_add(ctx, NL);
    for (int l = 0; l < NL && st == UVMRT_OK; l++) {
        uvmrt_tensor_desc_t d[3] = {{"w", l, UVMRT_ROLE_WEIGHT, WEIGHT},
                                    {"g", l, UVMRT_ROLE_GRADIENT, WEIGHT},
                                    {"a", l, UVMRT_ROLE_ACTIVATION, ACT}};
        uvmrt_tensor_t *t[3] = {0};
        st = uvmrt_tensors_alloc(ctx, l < keep ? 3 : 2, d, t);
        n->w[l] = t[0], n->g[l] = t[1], n->a[l] = l < keep ? t[2] : NULL;
    }
    if (st == UVMRT_OK) {
        uvmrt_tensor_desc_t d = {"shared act", -1, UVMRT_ROLE_WORKSPACE, ACT};
        st = uvmrt_tensor_alloc(ctx, &d, &n->shared);
    }
    return st;
}

/* One call: the layer's own tensors by default uses, plus extra (the shared
 * activation of a recomputing layer) when not NULL. */
static double g_real_scale = 1.0; /* the real run's GPU time over its declared work */

static uvmrt_status_t toy_call(uvmrt_context_t *ctx, int l, uvmrt_phase_t ph, uvmrt_tensor_t *extra,
                               unsigned extra_use, double flops)
{
    uvmrt_use_t u = {extra, extra_use};
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, l, ph, NULL);
    c.uses = extra ? &u : NULL;
    c.n_uses = extra ? 1 : 0;
    c.flops = flops;
    /* the sim runs an explicit duration; the review compares it with the flops */
    if (g_real_scale != 1.0) c.sim_duration_ns = (uint64_t)(flops / uvmrt_context_profile(ctx)->flops * 1e9 * g_real_scale);
    uvmrt_status_t st = uvmrt_layer_begin(ctx, &c);
    return st == UVMRT_OK ? uvmrt_layer_end(ctx) : st;
}

static uvmrt_status_t toy_steps(uvmrt_context_t *ctx, const toy_net_t *n, int keep, int steps, double scale)
{
    const double f = 2e12; /* ~ 2 ms per layer at the h200 profile */
    g_real_scale = scale;
    uvmrt_status_t st = UVMRT_OK;
    for (int s = 0; s < steps && st == UVMRT_OK; s++) {
        st = uvmrt_step_begin(ctx);
        for (int l = 0; l < NL && st == UVMRT_OK; l++)
            st = toy_call(ctx, l, UVMRT_PHASE_FORWARD, l < keep ? NULL : n->shared, UVMRT_USE_WRITE, f);
        for (int l = NL - 1; l >= 0 && st == UVMRT_OK; l--)
            st = toy_call(ctx, l, UVMRT_PHASE_BACKWARD, l < keep ? NULL : n->shared, UVMRT_USE_READWRITE,
                          (l < keep ? 2 : 3) * f);
        for (int l = 0; l < NL && st == UVMRT_OK; l++)
            st = toy_call(ctx, l, UVMRT_PHASE_OPTIMIZER, NULL, 0, 0.1 * f);
        if (st == UVMRT_OK) st = uvmrt_step_end(ctx);
    }
    return st;
}

static uvmrt_status_t toy_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    toy_t *t = user;
    t->calls++;
    if (t->fail_at && t->calls == t->fail_at) return UVMRT_ERR_NOMEM;
    toy_net_t n;
    uvmrt_status_t st = toy_build(model, values[0], &n);
    return st == UVMRT_OK ? toy_steps(model, &n, values[0], steps, 1.0) : st;
}

/* The sim's own step time for keep at a budget: mean of steps 3 and 4. */
static double direct_ns(int keep, uint64_t budget)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, "h200");
    toy_net_t n;
    uvmrt_status_t st = toy_build(ctx, keep, &n);
    if (st == UVMRT_OK) st = toy_steps(ctx, &n, keep, 4, 1.0);
    double ns = st == UVMRT_OK ? rehearsed_step_ns(ctx) : 0;
    uvmrt_context_destroy(ctx);
    return ns;
}

static const int keep_values[] = {0, 2, 4, 6};

Test(choose, picks_the_least_predicted_and_predictions_equal_the_sim)
{
    uint64_t budget = 3 * GIB;
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, "h200");
    toy_t t = {1.0, 0, 0};
    uvmrt_knob_t k = {"keep", 4, keep_values};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_OK, "%s", log_text());
    cr_assert(c.fits);
    cr_assert_eq(uvmrt_choice_count(ctx), 4);
    double best = 0;
    for (size_t i = 0; i < 4; i++) {
        int v;
        double ns;
        cr_assert_eq(uvmrt_choice_candidate(ctx, i, &v, &ns), UVMRT_OK);
        cr_assert_eq(v, keep_values[i]);
        double d = direct_ns(v, budget);
        cr_assert_eq(ns, d, "keep %d: predicted %.0f ns, the sim ran %.0f", v, ns, d);
        if (ns > 0 && (best == 0 || ns < best)) best = ns;
    }
    cr_assert(c.predicted_step_ns <= best, "predicted %.0f, best candidate %.0f", c.predicted_step_ns, best);
    cr_assert(c.plan_budget_bytes <= budget);
    cr_assert_eq(uvmrt_choice_candidate(ctx, 4, NULL, NULL), UVMRT_ERR_INVALID);
    /* the chosen value's prediction at the plan budget is the sim's own time there */
    cr_assert_eq(c.predicted_step_ns, direct_ns(c.values[0], c.plan_budget_bytes));
    uvmrt_context_destroy(ctx);
}

Test(choose, more_budget_never_predicts_slower_than_half)
{
    uint64_t budgets[] = {2 * GIB, 4 * GIB, 8 * GIB};
    double prev = 0;
    for (int i = 0; i < 3; i++) {
        uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budgets[i], "h200");
        toy_t t = {1.0, 0, 0};
        uvmrt_knob_t k = {"keep", 4, keep_values};
        uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
        cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_OK);
        cr_assert(c.fits);
        if (prev > 0)
            cr_assert(c.predicted_step_ns <= prev, "budget %llu predicts %.0f ns, half of it %.0f",
                      (unsigned long long)budgets[i], c.predicted_step_ns, prev);
        prev = c.predicted_step_ns;
        uvmrt_context_destroy(ctx);
    }
}

Test(choose, none_fits)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 512 * MIB, "h200"); /* one weight + act + grad > */
    toy_t t = {1.0, 0, 0};
    uvmrt_knob_t k = {"keep", 4, keep_values};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c.fits, 0);
    cr_assert_eq(c.values[0], 0);
    cr_assert_eq(c.predicted_step_ns, 0);
    cr_assert(log_contains("no combination"));
    uvmrt_context_destroy(ctx);
}

Test(choose, bad_arguments_and_failures_change_nothing)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 3 * GIB, "h200");
    toy_t t = {1.0, 0, 0};
    uvmrt_knob_t k = {"keep", 4, keep_values}, empty = {"empty", 0, keep_values};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(NULL, &k, 1, toy_rehearse, &t, &c), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, NULL, &t, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("rehearse is NULL"));
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, NULL), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_choose(ctx, NULL, 1, toy_rehearse, &t, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("knobs is NULL"));
    cr_assert_eq(uvmrt_choose(ctx, &k, UVMRT_KNOBS_MAX + 1, toy_rehearse, &t, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("n_knobs 9: expected 0 to 8"));
    cr_assert_eq(uvmrt_choose(ctx, &empty, 1, toy_rehearse, &t, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("'empty' has no values"));
    int many[100];
    for (int i = 0; i < 100; i++) many[i] = i;
    uvmrt_knob_t big[2] = {{"a", 100, many}, {"b", 100, many}};
    cr_assert_eq(uvmrt_choose(ctx, big, 2, toy_rehearse, &t, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("expected at most 4096"));
    cr_assert_eq(t.calls, 0, "no rehearsal for bad arguments");
    cr_assert_eq(uvmrt_choice_get(ctx, &c), UVMRT_ERR_INVALID);
    /* a first choice, then one whose third rehearsal fails: the first stays */
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_OK);
    uvmrt_choice_t before = UVMRT_STRUCT_INIT(uvmrt_choice_t), after = before;
    cr_assert_eq(uvmrt_choice_get(ctx, &before), UVMRT_OK);
    uint64_t pb = uvmrt__plan_budget(ctx);
    t.calls = 0;
    t.fail_at = 3;
    uvmrt_knob_t ks[1] = {{"keep", 4, (const int[]){6, 4, 2, 0}}};
    cr_assert_eq(uvmrt_choose(ctx, ks, 1, toy_rehearse, &t, &c), UVMRT_ERR_NOMEM);
    cr_assert(log_contains("rehearsal failed"));
    cr_assert_eq(uvmrt_choice_get(ctx, &after), UVMRT_OK);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    cr_assert_eq(uvmrt__plan_budget(ctx), pb);
    cr_assert_eq(uvmrt_choice_count(ctx), 4);
    int v;
    cr_assert_eq(uvmrt_choice_candidate(ctx, 0, &v, NULL), UVMRT_OK);
    cr_assert_eq(v, 0, "the first choice's candidates stay");
    /* inside a step */
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_ERR_STATE);
    cr_assert_eq(uvmrt_choice_review(ctx, &c, NULL), UVMRT_ERR_STATE);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* The real run on the choice: n steps with the declared work scaled. */
static void run_real(uvmrt_context_t *ctx, toy_net_t *n, int keep, int steps, double scale)
{
    cr_assert_eq(toy_steps(ctx, n, keep, steps, scale), UVMRT_OK, "%s", log_text());
}

Test(choose, review_on_sim_agrees_and_does_not_replan)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 3 * GIB, "h200");
    toy_t t = {1.0, 0, 0};
    uvmrt_knob_t k = {"keep", 4, keep_values};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    int changed = -1;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_ERR_INVALID);
    cr_assert(log_contains("no choice to review"));
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, &c), UVMRT_OK);
    toy_net_t n;
    cr_assert_eq(toy_build(ctx, c.values[0], &n), UVMRT_OK);
    run_real(ctx, &n, c.values[0], 2, 1.0); /* recording + 1 planned */
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_ERR_INVALID);
    cr_assert(log_contains("expected at least 2"));
    run_real(ctx, &n, c.values[0], 3, 1.0);
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK);
    cr_assert_eq(changed, 0);
    cr_assert_eq(c.replanned, 0);
    double err = c.measured_step_ns / c.predicted_step_ns - 1.0;
    cr_assert(err < 0.01 && err > -0.01, "measured %.0f predicted %.0f", c.measured_step_ns, c.predicted_step_ns);
    uvmrt_context_destroy(ctx);
}

/* The toy's choice at 3 GiB on the h200 profile and its net built with the chosen
 * values (the rehearsal's toy is static: the review rehearses with it later). */
static uvmrt_context_t *toy_chosen(uvmrt_choice_t *c, toy_net_t *n)
{
    static toy_t t = {1.0, 0, 0};
    static const uvmrt_knob_t k = {"keep", 4, keep_values};
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 3 * GIB, "h200");
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, toy_rehearse, &t, c), UVMRT_OK);
    cr_assert_eq(toy_build(ctx, c->values[0], n), UVMRT_OK);
    return ctx;
}

/* Measured within 10% of the prediction: the values stay, and the choice's prediction
 * is made again with the measured work (the first stays in first_predicted_step_ns). */
Test(choose, review_within_ten_percent_predicts_again_with_the_measured_work)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    toy_net_t n;
    uvmrt_context_t *ctx = toy_chosen(&c, &n);
    double first = c.predicted_step_ns;
    size_t rehearsals = c.rehearsals;
    int keep = c.values[0];
    /* the GPU is 6% slower than the profile says */
    run_real(ctx, &n, keep, 4, 1.06);
    int changed = -1;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(changed, 0);
    cr_assert_eq(c.replanned, 0);
    cr_assert_eq(c.values[0], keep);
    cr_assert_eq(c.first_predicted_step_ns, first);
    cr_assert_eq(c.rehearsals, rehearsals + 1);
    double err_first = c.measured_step_ns / first - 1.0, err = c.measured_step_ns / c.predicted_step_ns - 1.0;
    cr_assert(err_first > 0.02 && err_first < 0.10, "measured %.0f, first predicted %.0f", c.measured_step_ns, first);
    cr_assert(fabs(err) < 0.01, "measured %.0f, predicted again %.0f (first %.0f)", c.measured_step_ns,
              c.predicted_step_ns, first);
    uvmrt_choice_t got = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choice_get(ctx, &got), UVMRT_OK);
    cr_assert_eq(got.predicted_step_ns, c.predicted_step_ns);
    uvmrt_context_destroy(ctx);
}

Test(choose, review_replans_once_with_the_measured_work)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    toy_net_t n;
    uvmrt_context_t *ctx = toy_chosen(&c, &n);
    double first = c.predicted_step_ns;
    int first_keep = c.values[0];
    /* the GPU is 3x slower than the profile says: every call's work takes 3x its flops */
    run_real(ctx, &n, c.values[0], 4, 3.0);
    int changed = -1;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c.replanned, 1);
    cr_assert_eq(c.first_predicted_step_ns, first);
    cr_assert(c.measured_step_ns > 1.1 * first);
    /* the new prediction of the values that ran models the measured work: within 10% */
    int keep = c.values[0];
    double again = candidate_ns(ctx, first_keep);
    double err = c.measured_step_ns / again - 1.0;
    cr_assert(err < 0.10 && err > -0.10, "keep %d: measured %.0f, predicted again %.0f (now keep %d)", first_keep,
              c.measured_step_ns, again, keep);
    cr_assert(changed == (keep != first_keep));
    /* once per context: the next review compares, never re-plans */
    if (changed) {
        uvmrt_context_destroy(ctx);
        return;
    }
    run_real(ctx, &n, c.values[0], 3, 3.0);
    uvmrt_choice_t c2 = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choice_review(ctx, &c2, &changed), UVMRT_OK);
    cr_assert_eq(c2.replanned, 1);
    cr_assert_eq(c2.predicted_step_ns, c.predicted_step_ns);
    cr_assert_eq(changed, 0);
    uvmrt_context_destroy(ctx);
}

/* uvmrt_layer_call_t.after: a CPU call on its own stream follows the GPU work
 * enqueued so far on the compute stream (the gradient it updates), so the model
 * adds the two; without it the two overlap. */
static uint64_t two_streams_step(int with_after)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_stream_t gpu = (uvmrt_stream_t)0x10, cpu = (uvmrt_stream_t)0x20;
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, l, UVMRT_PHASE_BACKWARD, gpu);
    c.sim_duration_ns = 10000000; /* 10 ms */
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    uvmrt_layer_call_init(&c, l, UVMRT_PHASE_OPTIMIZER, cpu);
    c.no_default_uses = 1;
    c.host_bytes = 1000000000; /* 1 GB: ~15 ms at the h200 profile's host memory */
    c.after = with_after ? gpu : NULL;
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 0, &st), UVMRT_OK);
    uvmrt_context_destroy(ctx);
    return st.step_ns;
}

Test(choose, after_orders_calls_across_streams)
{
    double cpu_ns = 1e9 / uvmrt_profile_find("h200")->host_mem_bps * 1e9;
    uint64_t apart = two_streams_step(0), ordered = two_streams_step(1);
    cr_assert(apart < 10000000 + cpu_ns / 2, "apart %llu", (unsigned long long)apart);
    cr_assert(ordered >= 10000000 + cpu_ns * 0.99, "ordered %llu, expected 10 ms + %.0f", (unsigned long long)ordered,
              cpu_ns);
}

/* A model wrong twice: the first choice runs slower than predicted (its backward),
 * the review's re-plan picks the other value, which runs slower still (its forward):
 * the second review measures both and brings the first back. */
#define LIAR_F 4e12
static uvmrt_status_t liar_steps(uvmrt_context_t *ctx, int v, int steps, double fwd_real, double bwd_real)
{
    uvmrt_status_t st = UVMRT_OK;
    double pf = uvmrt_context_profile(ctx)->flops;
    for (int s = 0; s < steps && st == UVMRT_OK; s++) {
        st = uvmrt_step_begin(ctx);
        for (int ph = 0; ph < 2 && st == UVMRT_OK; ph++) {
            uvmrt_layer_call_t c;
            uvmrt_layer_call_init(&c, 0, ph == 0 ? UVMRT_PHASE_FORWARD : UVMRT_PHASE_BACKWARD, NULL);
            c.flops = ph == 0 ? 1e12 + (v == 0 ? 1.2 * LIAR_F : 0) : 1e12 + (v == 1 ? LIAR_F : 0);
            double real = ph == 0 ? fwd_real : bwd_real;
            if (real != 1.0) c.sim_duration_ns = (uint64_t)(c.flops / pf * 1e9 * real);
            st = uvmrt_layer_begin(ctx, &c);
            if (st == UVMRT_OK) st = uvmrt_layer_end(ctx);
        }
        if (st == UVMRT_OK) st = uvmrt_step_end(ctx);
    }
    return st;
}

static uvmrt_status_t liar_build(uvmrt_context_t *ctx)
{
    int l;
    uvmrt_status_t st = uvmrt_layer_add(ctx, "L", &l);
    uvmrt_tensor_desc_t d = {"w", 0, UVMRT_ROLE_WEIGHT, 64 * MIB};
    uvmrt_tensor_t *t = NULL;
    return st == UVMRT_OK ? uvmrt_tensor_alloc(ctx, &d, &t) : st;
}

static uvmrt_status_t liar_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)user;
    uvmrt_status_t st = liar_build(model);
    return st == UVMRT_OK ? liar_steps(model, values[0], steps, 1.0, 1.0) : st;
}

/* The liar's choice (v = 1, whose backward the model thinks cheap), 4 steps of it
 * with the backward 3x slower, and the review that re-plans to v = 0. */
static uvmrt_context_t *liar_replanned(uvmrt_choice_t *c, int *changed)
{
    static const int vals[] = {0, 1};
    static const uvmrt_knob_t k = {"v", 2, vals};
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, liar_rehearse, NULL, c), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c->values[0], 1, "the model prefers v = 1");
    cr_assert_eq(liar_build(ctx), UVMRT_OK);
    cr_assert_eq(liar_steps(ctx, 1, 4, 1.0, 3.0), UVMRT_OK); /* its backward is 3x slower */
    cr_assert_eq(uvmrt_choice_review(ctx, c, changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c->replanned, 1);
    cr_assert_eq(*changed, 1);
    cr_assert_eq(c->values[0], 0, "with the backward measured, v = 0 predicts faster");
    return ctx;
}

Test(choose, review_after_a_replan_keeps_the_faster_measured)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    int changed = -1;
    uvmrt_context_t *ctx = liar_replanned(&c, &changed);
    double first = c.measured_step_ns;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_ERR_INVALID, "no planned step of v = 0 yet");
    cr_assert_eq(liar_steps(ctx, 0, 3, 5.0, 3.0), UVMRT_OK); /* ... and its forward 5x */
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert(c.replanned_measured_step_ns > first, "v = 0 measured %.0f, v = 1 %.0f", c.replanned_measured_step_ns,
              first);
    cr_assert_eq(c.reverted, 1);
    cr_assert_eq(changed, 1);
    cr_assert_eq(c.values[0], 1, "back to the first values");
    /* their prediction is the re-plan's (with the backward measured 3x), which the
     * measurement of them agrees with, not the first model's */
    double replan_v1 = candidate_ns(ctx, 1);
    cr_assert_gt(replan_v1, 0);
    cr_assert_eq(c.predicted_step_ns, replan_v1);
    cr_assert_gt(c.predicted_step_ns, 1.2 * c.first_predicted_step_ns);
    double err = c.predicted_step_ns / first - 1.0;
    cr_assert(err < 0.1 && err > -0.1, "v = 1 predicted %.0f after the revert, measured %.0f", c.predicted_step_ns, first);
    /* once decided, later reviews only compare */
    cr_assert_eq(liar_steps(ctx, 1, 3, 1.0, 3.0), UVMRT_OK);
    uvmrt_choice_t again = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choice_review(ctx, &again, &changed), UVMRT_OK);
    cr_assert_eq(changed, 0);
    cr_assert_eq(again.values[0], 1);
    uvmrt_context_destroy(ctx);
}

/* The re-planned values measured faster than the first ones: kept, and predicted again
 * with their own measured work (their first prediction came from the first values'). */
Test(choose, review_predicts_kept_replanned_values_with_their_own_measured_work)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    int changed = -1;
    uvmrt_context_t *ctx = liar_replanned(&c, &changed);
    double replanned = c.predicted_step_ns;
    size_t rehearsals = c.rehearsals;
    /* v = 0 runs its forward 15% slower than the re-plan thought: still faster than v = 1 */
    cr_assert_eq(liar_steps(ctx, 0, 3, 1.15, 3.0), UVMRT_OK);
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c.reverted, 0);
    cr_assert_eq(changed, 0);
    cr_assert_eq(c.values[0], 0);
    cr_assert_eq(c.rehearsals, rehearsals + 1);
    double before = c.replanned_measured_step_ns / replanned - 1.0, after = c.replanned_measured_step_ns / c.predicted_step_ns - 1.0;
    cr_assert(before > 0.03, "measured %.0f, the re-plan predicted %.0f", c.replanned_measured_step_ns, replanned);
    cr_assert(fabs(after) < 0.01, "measured %.0f, predicted again %.0f", c.replanned_measured_step_ns, c.predicted_step_ns);
    uvmrt_context_destroy(ctx);
}

/* Device memory held outside uvmrt (the PyTorch binding's activations): the plan keeps
 * uvmrt's resident bytes at or below the budget less it; a call that cannot be taken
 * (inside a step, not below the budget) fails and changes nothing. */
Test(choose, external_bytes_lower_what_the_plan_keeps_resident)
{
    const uint64_t budget = 3 * GIB;
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, "h200");
    toy_net_t n;
    cr_assert_eq(toy_build(ctx, NL, &n), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_set_external_bytes(ctx, budget), UVMRT_ERR_BUDGET);
    cr_expect_eq(uvmrt_context_set_external_bytes(NULL, 1), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_context_external_bytes(ctx), 0);
    const uint64_t external = budget / 2;
    cr_assert_eq(uvmrt_context_set_external_bytes(ctx, external), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_external_bytes(ctx), external);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_context_set_external_bytes(ctx, 1), UVMRT_ERR_STATE);
    cr_expect_eq(uvmrt_context_external_bytes(ctx), external);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_assert_eq(toy_steps(ctx, &n, NL, 3, 1.0), UVMRT_OK, "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_leq(s.peak_resident_bytes, budget - external, "peak %llu over %llu",
                  (unsigned long long)s.peak_resident_bytes, (unsigned long long)(budget - external));
    cr_expect_gt(s.allocated_bytes, budget - external, "the net must not fit beside the external bytes");
    uvmrt_context_destroy(ctx);
}

/* A rehearsal that places its tensors in page-locked memory: the model context takes it
 * as the host placement (the sim times both alike) and neither allocates nor copies
 * them: the process's peak RSS grows by far less than the 4 GiB the pinned copies would
 * take, and the prediction equals a rehearsal that places them on the host. */
static uvmrt_placement_t g_place;

static uvmrt_status_t pinning_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)user;
    toy_net_t n;
    uvmrt_status_t st = toy_build(model, values[0], &n);
    for (int l = 0; l < NL && st == UVMRT_OK; l++) /* 6 x 2 x 256 MiB = 3 GiB of w and g */
        if ((st = uvmrt_tensor_set_placement(model, n.w[l], g_place)) == UVMRT_OK)
            st = uvmrt_tensor_set_placement(model, n.g[l], g_place);
    if (st == UVMRT_OK && uvmrt_tensor_placement(n.w[0]) != UVMRT_PLACE_HOST) return UVMRT_ERR_STATE;
    return st == UVMRT_OK ? toy_steps(model, &n, values[0], steps, 1.0) : st;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

Test(choose, a_rehearsal_pins_nothing)
{
    uvmrt_knob_t k = {"keep", 4, keep_values};
    double ns[2][4];
    for (int pass = 0; pass < 2; pass++) {
        g_place = pass == 0 ? UVMRT_PLACE_PINNED : UVMRT_PLACE_HOST;
        uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 3 * GIB, "h200");
        uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
        long before = peak_rss_kib();
        cr_assert_eq(uvmrt_choose(ctx, &k, 1, pinning_rehearse, NULL, &c), UVMRT_OK, "%s", log_text());
        if (pass == 0)
            cr_expect_lt(peak_rss_kib() - before, 512 * 1024, "the rehearsals' pinned copies took %ld KiB",
                         peak_rss_kib() - before);
        for (size_t i = 0; i < 4; i++) cr_assert_eq(uvmrt_choice_candidate(ctx, i, NULL, &ns[pass][i]), UVMRT_OK);
        uvmrt_context_destroy(ctx);
    }
    for (size_t i = 0; i < 4; i++) cr_expect_eq(ns[0][i], ns[1][i], "candidate %zu: pinned %.0f, host %.0f", i, ns[0][i], ns[1][i]);
}
