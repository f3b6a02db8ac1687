/*
 * test_recompute.c -- tensors the trainer declares recomputable
 * (uvmrt_tensor_set_recompute): bad declarations change nothing; the order in
 * which they recompute; uvmrt_choose rehearses every count of them, each prediction
 * equal to the sim's own step time with that many recomputing, keeps none at a
 * roomy budget and some at a tight one; the plan then discards them (no write-back)
 * within the budget, and the memory summary names the mechanism.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "helpers.h"

#define NL 8
#define WEIGHT (256 * MIB)
#define ACT (256 * MIB)
#define FLOPS 2e12 /* ~ 2.5 ms per call at the h200 profile */

typedef struct toy_net {
    uvmrt_tensor_t *w[NL], *a[NL];
} toy_net_t;

/* Layers l = 0..NL-1, each a weight and the activation its forward writes and its
 * backward reads, declared recomputable at the forward's flops. */
static uvmrt_status_t toy_build(uvmrt_context_t *ctx, toy_net_t *n)
{
    uvmrt_status_t st = layers_add(ctx, NL);
    for (int l = 0; l < NL && st == UVMRT_OK; l++) {
        uvmrt_tensor_desc_t d[2] = {{"w", l, UVMRT_ROLE_WEIGHT, WEIGHT}, {"a", l, UVMRT_ROLE_ACTIVATION, ACT}};
        uvmrt_tensor_t *t[2] = {0};
        st = uvmrt_tensors_alloc(ctx, 2, d, t);
        n->w[l] = t[0], n->a[l] = t[1];
        if (st == UVMRT_OK) st = uvmrt_tensor_set_recompute(ctx, n->a[l], FLOPS);
    }
    return st;
}

/* given NULL: ask the runtime which activations recompute (the trainer's way); else
 * given[l] (the direct run, which does not go through the choice). */
static uvmrt_status_t toy_steps(uvmrt_context_t *ctx, const toy_net_t *n, const int *given, int steps)
{
    uvmrt_status_t st = UVMRT_OK;
    for (int s = 0; s < steps && st == UVMRT_OK; s++) {
        st = uvmrt_step_begin(ctx);
        for (int l = 0; l < NL && st == UVMRT_OK; l++) {
            uvmrt_use_t u[2] = {{n->w[l], UVMRT_USE_READ}, {n->a[l], UVMRT_USE_WRITE}};
            uvmrt_layer_call_t c;
            uvmrt_layer_call_init(&c, l, UVMRT_PHASE_FORWARD, NULL);
            c.no_default_uses = 1, c.uses = u, c.n_uses = 2, c.flops = FLOPS;
            st = uvmrt_layer_begin(ctx, &c);
            if (st == UVMRT_OK) st = uvmrt_layer_end(ctx);
        }
        for (int l = NL - 1; l >= 0 && st == UVMRT_OK; l--) {
            int rc = given ? given[l] : uvmrt_tensor_recomputes(ctx, n->a[l]);
            uvmrt_use_t u[2] = {{n->w[l], UVMRT_USE_READ}, {n->a[l], rc ? UVMRT_USE_WRITE : UVMRT_USE_READ}};
            uvmrt_layer_call_t c;
            uvmrt_layer_call_init(&c, l, UVMRT_PHASE_BACKWARD, NULL);
            c.no_default_uses = 1, c.uses = u, c.n_uses = 2, c.flops = (rc ? 3 : 2) * FLOPS;
            st = uvmrt_layer_begin(ctx, &c);
            if (st == UVMRT_OK) st = uvmrt_layer_end(ctx);
        }
        if (st == UVMRT_OK) st = uvmrt_step_end(ctx);
    }
    return st;
}

static uvmrt_status_t toy_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)values;
    int *calls = user;
    (*calls)++;
    toy_net_t n;
    uvmrt_status_t st = toy_build(model, &n);
    return st == UVMRT_OK ? toy_steps(model, &n, NULL, steps) : st;
}

/* The sim's own step time with layers 0..k-1 recomputing: mean of steps 3 and 4. */
static double direct_ns(int k, uint64_t budget)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, "h200");
    toy_net_t n;
    int given[NL];
    for (int l = 0; l < NL; l++) given[l] = l < k;
    uvmrt_status_t st = toy_build(ctx, &n);
    if (st == UVMRT_OK) st = toy_steps(ctx, &n, given, 4);
    double ns = st == UVMRT_OK ? rehearsed_step_ns(ctx) : 0;
    uvmrt_context_destroy(ctx);
    return ns;
}

Test(recompute, bad_declarations_change_nothing)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 4 * GIB, "h200");
    uvmrt_tensor_desc_t d[2] = {{"a", -1, UVMRT_ROLE_ACTIVATION, ACT}, {"b", -1, UVMRT_ROLE_ACTIVATION, ACT}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_recompute_flops(t[0]), 0.0);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[0], 5e9), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_recompute_flops(t[0]), 5e9);
    const double bad[] = {-1.0, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        log_reset();
        cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[0], bad[i]), UVMRT_ERR_INVALID);
        cr_assert(log_contains("expected a finite number >= 0"), "%s", log_text());
        cr_assert_eq(uvmrt_tensor_recompute_flops(t[0]), 5e9, "flops %g changed the declaration", bad[i]);
    }
    cr_assert_eq(uvmrt_tensor_set_recompute(NULL, t[0], 1.0), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, NULL, 1.0), UVMRT_ERR_NOT_FOUND);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[1], 1.0), UVMRT_ERR_STATE);
    cr_assert(log_contains("inside a step"));
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_recompute_flops(t[1]), 0.0);
    /* no choice: nothing recomputes */
    cr_assert_eq(uvmrt_tensor_recomputes(ctx, t[0]), 0);
    cr_assert_eq(uvmrt_tensor_recomputes(NULL, t[0]), 0);
    cr_assert_eq(uvmrt__recomputable_count(ctx), 1);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[0], 0.0), UVMRT_OK); /* withdrawn */
    cr_assert_eq(uvmrt__recomputable_count(ctx), 0);
    cr_assert_eq(uvmrt_tensor_free(ctx, t[1]), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[1], 1.0), UVMRT_ERR_NOT_FOUND);
    cr_assert(log_contains("not a live tensor"));
    cr_assert_eq(uvmrt_tensor_recompute_flops(NULL), 0.0);
    uvmrt_context_destroy(ctx);
}

Test(recompute, order_is_memory_per_flop_then_layer_then_allocation)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 4 * GIB, "h200");
    int l0, l1;
    cr_assert_eq(uvmrt_layer_add(ctx, "L0", &l0), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "L1", &l1), UVMRT_OK);
    /* allocation order: c (layer 1), b (layer 0), a (layer 0), d (no layer), e (layer 0, cheap) */
    uvmrt_tensor_desc_t d[5] = {{"c", l1, UVMRT_ROLE_ACTIVATION, 4 * MIB}, {"b", l0, UVMRT_ROLE_ACTIVATION, 4 * MIB},
                                {"a", l0, UVMRT_ROLE_ACTIVATION, 4 * MIB}, {"d", -1, UVMRT_ROLE_ACTIVATION, 4 * MIB},
                                {"e", l0, UVMRT_ROLE_ACTIVATION, 4 * MIB}};
    uvmrt_tensor_t *t[5];
    for (int i = 0; i < 5; i++) cr_assert_eq(uvmrt_tensor_alloc(ctx, &d[i], &t[i]), UVMRT_OK);
    for (int i = 0; i < 4; i++) cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[i], 1e9), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_recompute(ctx, t[4], 1e8), UVMRT_OK); /* 10x the bytes per flop */
    /* expected order: e (most bytes per flop), b, a (layer 0, allocation order), c (layer 1), d (none) */
    const int want[5] = {3, 1, 2, 4, 0}; /* rank of t[i] */
    for (int i = 0; i < 5; i++)
        cr_assert_eq(uvmrt__recompute_rank(ctx, t[i]), want[i], "%s: rank %d, expected %d", d[i].name,
                     uvmrt__recompute_rank(ctx, t[i]), want[i]);
    for (int n = 0; n <= 5; n++) {
        ctx->choice.choice.recompute_tensors = n; /* as a choice of n would set it */
        for (int i = 0; i < 5; i++)
            cr_assert_eq(uvmrt_tensor_recomputes(ctx, t[i]), want[i] < n, "%d recomputing: %s", n, d[i].name);
    }
    ctx->choice.choice.recompute_tensors = 0;
    uvmrt_context_destroy(ctx);
}

/* Every count rehearsed, predictions equal to the sim, the least one kept; the
 * trainer's answers follow it. */
static uvmrt_choice_t choose_at(uvmrt_context_t *ctx, uint64_t budget)
{
    int calls = 0;
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, NULL, 0, toy_rehearse, &calls, &c), UVMRT_OK, "%s", log_text());
    cr_assert(c.fits);
    cr_assert_eq(c.recomputable_tensors, NL);
    cr_assert_eq(uvmrt_choice_count(ctx), NL + 1, "counts 0, 1, ..., %d", NL);
    cr_assert_eq(calls, (int)c.rehearsals, "one call per rehearsal, the first one counting the tensors");
    double best = 0;
    int best_k = -1;
    for (size_t i = 0; i <= NL; i++) {
        double ns = 0;
        cr_assert_eq(uvmrt_choice_candidate(ctx, i, NULL, &ns), UVMRT_OK);
        int k = uvmrt_choice_candidate_recompute(ctx, i);
        cr_assert_eq(k, (int)i);
        double want = direct_ns(k, budget);
        cr_assert_eq(ns, want, "%d recomputing at %llu: predicted %.0f ns, the sim ran %.0f", k,
                     (unsigned long long)budget, ns, want);
        if (ns > 0 && (best_k < 0 || ns < best)) best = ns, best_k = k;
    }
    cr_assert_eq(uvmrt_choice_candidate_recompute(ctx, NL + 1), -1);
    cr_assert(c.predicted_step_ns <= best);
    if (c.plan_budget_bytes == budget) cr_assert_eq(c.recompute_tensors, best_k);
    return c;
}

Test(recompute, choose_keeps_none_when_roomy_and_recomputes_when_tight)
{
    /* roomy: everything fits, recomputing only adds work */
    uint64_t roomy = 8 * GIB;
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, roomy, "h200");
    uvmrt_choice_t c = choose_at(ctx, roomy);
    cr_assert_eq(c.recompute_tensors, 0);
    uvmrt_context_destroy(ctx);

    /* tight: 4 weights and 2 activations; keeping an activation costs its write-back
     * and prefetch, recomputing it one more forward */
    uint64_t tight = 6 * ACT;
    ctx = make_ctx(UVMRT_POLICY_PREFETCH, tight, "h200");
    c = choose_at(ctx, tight);
    cr_assert(c.recompute_tensors > 0, "recompute %d at a tight budget", c.recompute_tensors);
    toy_net_t n;
    cr_assert_eq(toy_build(ctx, &n), UVMRT_OK);
    for (int l = 0; l < NL; l++)
        cr_assert_eq(uvmrt_tensor_recomputes(ctx, n.a[l]), l < c.recompute_tensors, "layer %d", l);
    cr_assert_eq(toy_steps(ctx, &n, NULL, 4), UVMRT_OK, "%s", log_text());
    uvmrt_step_stats_t s = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 3, &s), UVMRT_OK);
    cr_assert(s.peak_resident_bytes <= tight, "peak %llu over the budget", (unsigned long long)s.peak_resident_bytes);
    cr_assert(s.discard_bytes >= (uint64_t)c.recompute_tensors * ACT - ACT,
              "%d recomputing, %llu bytes discarded", c.recompute_tensors, (unsigned long long)s.discard_bytes);
    cr_assert_eq(s.gpu_faults, 0);
    /* the memory summary names the mechanism of the recomputing ones only */
    uvmrt_tensor_info_t info[2 * NL];
    info[0].struct_size = sizeof info[0];
    size_t k = 0;
    cr_assert_eq(uvmrt_memory_summary(ctx, info, 2 * NL, &k), UVMRT_OK);
    cr_assert_eq(k, 2 * NL);
    for (size_t i = 0; i < k; i++) {
        int l = info[i].layer, is_act = info[i].role == UVMRT_ROLE_ACTIVATION;
        int want = is_act && l < c.recompute_tensors;
        cr_assert_eq((info[i].mechanism & UVMRT_MECH_RECOMPUTE) != 0, want, "%s of layer %d: mechanism %#x",
                     info[i].name, l, info[i].mechanism);
        if (want) cr_assert(info[i].mechanism & UVMRT_MECH_DISCARD, "layer %d's a is dropped, not written back", l);
    }
    char name[64];
    uvmrt_mechanism_name(UVMRT_MECH_PREFETCH | UVMRT_MECH_DISCARD | UVMRT_MECH_RECOMPUTE, name, sizeof name);
    cr_assert_str_eq(name, "prefetch+discard+recompute");
    /* a later choice with none declared: nothing recomputes */
    for (int l = 0; l < NL; l++) cr_assert_eq(uvmrt_tensor_set_recompute(ctx, n.a[l], 0), UVMRT_OK);
    int calls = 0;
    uvmrt_choice_t c2 = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, NULL, 0, toy_rehearse, &calls, &c2), UVMRT_OK);
    for (int l = 0; l < NL; l++) cr_assert_eq(uvmrt_tensor_recomputes(ctx, n.a[l]), 0, "layer %d withdrawn", l);
    uvmrt_context_destroy(ctx);
}

/* A trainer knob beside the recompute count: the combinations multiply, the trainer's
 * values stay in their place. */
static uvmrt_status_t knob_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    int *seen = user;
    seen[values[0]] = 1;
    toy_net_t n;
    uvmrt_status_t st = toy_build(model, &n);
    return st == UVMRT_OK ? toy_steps(model, &n, NULL, steps) : st;
}

Test(recompute, a_trainer_knob_and_the_count_combine)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 6 * ACT, "h200");
    static const int v[2] = {0, 1};
    uvmrt_knob_t k = {"dummy", 2, v};
    int seen[2] = {0, 0};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, knob_rehearse, seen, &c), UVMRT_OK, "%s", log_text());
    cr_assert(seen[0] && seen[1]);
    cr_assert_eq(uvmrt_choice_count(ctx), 2 * (NL + 1));
    for (size_t i = 0; i < 2 * (NL + 1); i++) {
        int val = -1;
        cr_assert_eq(uvmrt_choice_candidate(ctx, i, &val, NULL), UVMRT_OK);
        cr_assert_eq(val, (int)(i % 2), "the trainer's knob varies fastest");
        cr_assert_eq(uvmrt_choice_candidate_recompute(ctx, i), (int)(i / 2));
    }
    cr_assert(c.recompute_tensors > 0, "the tight budget recomputes");
    uvmrt_context_destroy(ctx);
}
