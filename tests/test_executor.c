/*
 * test_executor.c -- the executor (src/exec/step.c, policy.c, migrate.c, history.c) on
 * the sim backend under each policy: the budget at every layer boundary, residency
 * when a layer starts, no faults in steady state, deviations from the record,
 * budget errors, host homing, placement, data surviving evictions, and step_end's
 * cost and history. (It was test_scheduler.c.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#include "helpers.h"

static uvmrt_summary_t summary(uvmrt_context_t *ctx)
{
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    return s;
}

static uvmrt_step_stats_t step_stats(uvmrt_context_t *ctx, uint64_t step)
{
    uvmrt_step_stats_t s = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, step, &s), UVMRT_OK, "step %llu", (unsigned long long)step);
    return s;
}

/* A network on a fresh context; the budget is a multiple of the largest
 * working set (ws_mult > 0), or the given bytes (ws_mult == 0). */
static net_t *setup(uvmrt_policy_t policy, double ws_mult, uint64_t bytes)
{
    /* measure the network's working set on a throwaway context first */
    net_spec_t spec = net_spec_default();
    uvmrt_context_t *probe = make_ctx(policy, 1 * GIB, NULL);
    net_t *pn = net_create(probe, &spec);
    uint64_t ws = net_max_working_set(pn);
    net_free(pn);
    uvmrt_context_destroy(probe);
    uint64_t budget = ws_mult > 0 ? (uint64_t)(ws * ws_mult) : bytes;
    uvmrt_context_t *ctx = make_ctx(policy, budget, NULL);
    return net_create(ctx, &spec);
}

/* ------------------------------------------------------------------ prefetch */
Test(executor, default_net_shape)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 0, 1 * GIB);
    cr_expect_eq(net_max_working_set(net), 8 * MIB);
    cr_expect_eq(net_total_footprint(net), 62 * MIB);
    cr_expect_eq(net_calls_per_step(net), 18);
    net_destroy(net);
}

/* Budgets from 2x the largest working set to the total: the budget holds at
 * every layer boundary, every used tensor is resident at begin, and after the
 * recorded step there are no demand faults. */
Test(executor, prefetch_budget_and_no_faults)
{
    net_t *probe = setup(UVMRT_POLICY_PREFETCH, 0, 1 * GIB);
    uint64_t ws = net_max_working_set(probe), total = net_total_footprint(probe);
    net_destroy(probe);
    const uint64_t budgets[] = {2 * ws, 2 * ws + 2 * MIB, 3 * ws, 4 * ws + 64 * KIB, total / 2, total - 2 * MIB, total};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        net_t *net = setup(UVMRT_POLICY_PREFETCH, 0, budgets[b]);
        invariant_count_t count = {0, 0};
        const int steps = 5;
        run_steps(net, steps, observe_invariants, &count);
        cr_expect_eq(count.events, steps * 2 * net_calls_per_step(net));
        uvmrt_summary_t s = summary(net->ctx);
        cr_expect_leq(s.peak_resident_bytes, budgets[b], "budget %llu: peak %llu", (unsigned long long)budgets[b],
                      (unsigned long long)s.peak_resident_bytes);
        cr_expect_eq(s.steps, steps);
        for (int i = 0; i < steps; i++) {
            uvmrt_step_stats_t st = step_stats(net->ctx, (uint64_t)i);
            cr_expect_leq(st.peak_resident_bytes, budgets[b], "budget %llu step %d: peak %llu",
                          (unsigned long long)budgets[b], i, (unsigned long long)st.peak_resident_bytes);
            if (i == 0) cr_expect_gt(st.fault_count, 0, "step 1 runs on demand: it must fault");
            else
                cr_expect_eq(st.fault_count, 0, "budget %llu (%.2fx ws): step %d has %llu faults (%llu bytes)",
                             (unsigned long long)budgets[b], (double)budgets[b] / (double)ws, i + 1,
                             (unsigned long long)st.fault_count, (unsigned long long)st.fault_bytes);
            if (i >= 1 && budgets[b] < total)
                cr_expect_gt(st.prefetch_bytes, 0, "budget %llu step %d: no prefetches", (unsigned long long)budgets[b],
                             i + 1);
        }
        if (budgets[b] < total) cr_expect_gt(s.evict_bytes + s.discard_bytes, 0, "budget below total, nothing left");
        net_destroy(net);
    }
}

/* With everything fitting, the steady state moves nothing at all. */
Test(executor, prefetch_everything_fits_no_traffic)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 0, 1 * GIB);
    run_steps(net, 4, observe_invariants, NULL);
    for (uint64_t i = 1; i < 4; i++) {
        uvmrt_step_stats_t st = step_stats(net->ctx, i);
        cr_expect_eq(st.prefetch_bytes + st.evict_bytes + st.discard_bytes + st.fault_bytes, 0, "step %llu moved data",
                     (unsigned long long)i + 1);
    }
    cr_expect_eq(summary(net->ctx).resident_bytes, net_total_footprint(net));
    net_destroy(net);
}

/* At the tightest legal budget (one working set) the scheduler still keeps the
 * budget and every layer's tensors resident at its begin (late fetches). */
Test(executor, prefetch_tight_budget_invariants)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 1.0, 0);
    invariant_count_t count = {0, 0};
    run_steps(net, 4, observe_invariants, &count);
    cr_expect_gt(count.events, 0);
    cr_expect_leq(summary(net->ctx).peak_resident_bytes, net_max_working_set(net));
    net_destroy(net);
}

/* ------------------------------------------------------------------ demand and none */
Test(executor, demand_keeps_budget_and_faults)
{
    net_t *net = setup(UVMRT_POLICY_DEMAND, 3.0, 0);
    uint64_t budget = uvmrt_context_budget(net->ctx);
    cr_assert_lt(budget, net_total_footprint(net));
    invariant_count_t count = {0, 0};
    run_steps(net, 4, observe_invariants, &count);
    cr_expect_eq(count.events, 4 * 2 * net_calls_per_step(net));
    cr_expect_leq(summary(net->ctx).peak_resident_bytes, budget);
    for (uint64_t i = 1; i < 4; i++) {
        uvmrt_step_stats_t st = step_stats(net->ctx, i);
        cr_expect_gt(st.fault_count, 0, "demand, step %llu: total > budget but no faults", (unsigned long long)i + 1);
        cr_expect_eq(st.prefetch_bytes, 0, "demand prefetched");
        cr_expect_gt(st.evict_bytes, 0);
    }
    cr_expect_eq(summary(net->ctx).plans_built, 0, "demand built a plan");
    net_destroy(net);
}

Test(executor, none_does_not_enforce_budget)
{
    net_t *net = setup(UVMRT_POLICY_NONE, 1.0, 0);
    uint64_t budget = uvmrt_context_budget(net->ctx);
    run_steps(net, 2, observe_invariants, NULL); /* the observer skips the budget check for none */
    uvmrt_summary_t s = summary(net->ctx);
    cr_expect_gt(s.peak_resident_bytes, budget, "none kept under the budget: it should not enforce it");
    cr_expect_eq(s.resident_bytes, net_total_footprint(net));
    cr_expect_eq(s.evict_bytes + s.discard_bytes + s.prefetch_bytes, 0);
    net_destroy(net);
}

/* Under none a layer larger than the budget is not an error. */
Test(executor, none_accepts_layer_over_budget)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_NONE, 4 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "big", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d = {"w", l, UVMRT_ROLE_WEIGHT, 8 * MIB};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD};
    cr_expect_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ speed on sim */
static uint64_t steady_step_ns(uvmrt_policy_t policy, double ws_mult)
{
    net_t *net = setup(policy, ws_mult, 0);
    run_steps(net, 4, NULL, NULL);
    uint64_t ns = step_stats(net->ctx, 3).step_ns;
    cr_expect_gt(ns, 0);
    net_destroy(net);
    return ns;
}

Test(executor, prefetch_faster_than_demand_on_sim)
{
    for (double mult = 2.0; mult <= 4.0; mult += 1.0) {
        uint64_t pf = steady_step_ns(UVMRT_POLICY_PREFETCH, mult);
        uint64_t dm = steady_step_ns(UVMRT_POLICY_DEMAND, mult);
        cr_expect_lt(pf, dm, "budget %.0fx ws: prefetch step %llu ns, demand %llu ns", mult, (unsigned long long)pf,
                     (unsigned long long)dm);
    }
}

/* ------------------------------------------------------------------ deviations */
Test(executor, deviation_rerecords_then_no_faults)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 3, observe_invariants, NULL);
    uint64_t plans_before = summary(ctx).plans_built;
    cr_assert_gt(plans_before, 0, "no plan after 3 steps");
    cr_assert_eq(step_stats(ctx, 2).fault_count, 0);
    /* step 4 leaves the record (layer 2's forward is skipped) */
    run_step_ex(net, 2, observe_invariants, NULL);
    /* step 5 is the usual sequence again: it differs from step 4's record */
    run_step(net, observe_invariants, NULL);
    /* steps 6, 7: the usual sequence was re-recorded; a new plan, and no faults */
    run_steps(net, 2, observe_invariants, NULL);
    cr_expect_gt(summary(ctx).plans_built, plans_before, "no new plan after the deviation");
    for (uint64_t i = 5; i < 7; i++) {
        uvmrt_step_stats_t st = step_stats(ctx, i);
        cr_expect_eq(st.fault_count, 0, "step %llu after a deviation: %llu faults", (unsigned long long)i + 1,
                     (unsigned long long)st.fault_count);
        cr_expect_leq(st.peak_resident_bytes, uvmrt_context_budget(ctx));
    }
    net_destroy(net);
}

/* A new step shape of the same length (optimizer in reverse order): it is
 * re-recorded, and from then on that shape runs without faults. */
Test(executor, same_length_deviation_rerecords)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 3, observe_invariants, NULL);
    for (int k = 0; k < 4; k++) run_step_reversed_optimizer(net, observe_invariants, NULL);
    for (uint64_t i = 5; i < 7; i++)
        cr_expect_eq(step_stats(ctx, i).fault_count, 0, "step %llu: the new shape was not re-recorded",
                     (unsigned long long)i + 1);
    net_destroy(net);
}

/* A step cut short (a prefix of the record) also re-records. */
Test(executor, short_step_then_full_steps)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 2, observe_invariants, NULL);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_use_t x = {net->x, UVMRT_USE_READ};
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[0], .phase = UVMRT_PHASE_FORWARD, .uses = &x, .n_uses = 1,
                            .sim_duration_ns = 1000};
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    run_steps(net, 3, observe_invariants, NULL);
    cr_expect_eq(step_stats(ctx, 5).fault_count, 0);
    net_destroy(net);
}

/* A step with an extra call at the end (longer than the record). */
Test(executor, longer_step_then_full_steps)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 2, observe_invariants, NULL);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    for (int i = 0; i < 2; i++) { /* forward of layer 0, twice */
        uvmrt_use_t x = {net->x, UVMRT_USE_READ};
        uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[0], .phase = UVMRT_PHASE_FORWARD, .uses = &x, .n_uses = 1};
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    }
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    run_steps(net, 3, observe_invariants, NULL);
    cr_expect_eq(step_stats(ctx, 5).fault_count, 0);
    net_destroy(net);
}

/* Tensors allocated and freed between steps: the scheduler adapts. */
Test(executor, alloc_and_free_between_steps)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 2, observe_invariants, NULL);
    uvmrt_tensor_desc_t d = {"extra", net->layer[1], UVMRT_ROLE_WORKSPACE, 1 * MIB};
    uvmrt_tensor_t *extra;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &extra), UVMRT_OK);
    run_steps(net, 2, NULL, NULL); /* the workspace joins layer 1's calls: not in the observer's list */
    cr_assert_eq(uvmrt_tensor_free(ctx, extra), UVMRT_OK);
    run_steps(net, 3, observe_invariants, NULL);
    cr_expect_eq(step_stats(ctx, 6).fault_count, 0);
    cr_expect_leq(summary(ctx).peak_resident_bytes, uvmrt_context_budget(ctx));
    net_destroy(net);
}

/* ------------------------------------------------------------------ accounting vs the model */
/* uvmrt keeps its own residency accounting; at every layer end it must agree
 * with what the sim device actually holds. */
static void accounting_observer(net_t *net, const net_event_t *ev, void *user)
{
    (void)user;
    observe_invariants(net, ev, NULL);
    if (!ev->is_end) return;
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    uint64_t dev = sim_device_bytes(net->ctx);
    cr_assert_eq(dev, s.resident_bytes, "after layer %d %s (call %d): the sim device holds %llu bytes, uvmrt counts %llu",
                 ev->layer, uvmrt_phase_name(ev->phase), ev->index, (unsigned long long)dev,
                 (unsigned long long)s.resident_bytes);
}

Test(executor, accounting_matches_device)
{
    const uvmrt_policy_t pols[] = {UVMRT_POLICY_DEMAND, UVMRT_POLICY_PREFETCH};
    const double mults[] = {1.0, 2.0, 3.5};
    for (size_t p = 0; p < 2; p++)
        for (size_t m = 0; m < 3; m++) {
            net_t *net = setup(pols[p], mults[m], 0);
            run_steps(net, 4, accounting_observer, NULL);
            net_destroy(net);
        }
}

/* Freeing a resident tensor whose arena lives on (its layer's other tensors
 * remain) must give its device memory back: otherwise the device holds more
 * than uvmrt counts, and later steps exceed the budget on the device. */
Test(executor, free_resident_tensor_releases_device_memory)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 3, accounting_observer, NULL);
    uvmrt_tensor_t *victim = NULL;
    for (int i = 0; i < net->L && victim == NULL; i++)
        if (uvmrt_tensor_is_resident(net->o[i])) victim = net->o[i];
    cr_assert_not_null(victim, "no resident optimizer state after 3 steps");
    cr_assert_eq(uvmrt_tensor_free(ctx, victim), UVMRT_OK);
    uvmrt_summary_t s = summary(ctx);
    cr_expect_eq(sim_device_bytes(ctx), s.resident_bytes,
                 "after freeing resident '%s': the sim device holds %llu bytes, uvmrt counts %llu",
                 uvmrt_tensor_name(victim), (unsigned long long)sim_device_bytes(ctx),
                 (unsigned long long)s.resident_bytes);
    /* the network without that tensor: the observer checks the device against the budget */
    for (int i = 0; i < net->L; i++)
        if (net->o[i] == victim) {
            uvmrt_tensor_desc_t d = {"O-again", net->layer[i], UVMRT_ROLE_OPTIMIZER_STATE, net->spec.o_bytes};
            /* a new arena for it; the old one still holds the layer's W, A, G */
            cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &net->o[i]), UVMRT_OK);
        }
    run_steps(net, 4, observe_invariants, NULL);
    net_destroy(net);
}

/* ------------------------------------------------------------------ budget errors */
Test(executor, layer_over_budget_error)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    int small, big;
    cr_assert_eq(uvmrt_layer_add(ctx, "small", &small), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "hugelayer", &big), UVMRT_OK);
    uvmrt_tensor_desc_t d[4] = {{"ws", small, UVMRT_ROLE_WEIGHT, 2 * MIB}, {"as", small, UVMRT_ROLE_ACTIVATION, 2 * MIB},
                                {"wb", big, UVMRT_ROLE_WEIGHT, 14 * MIB}, {"ab", big, UVMRT_ROLE_ACTIVATION, 4 * MIB}};
    uvmrt_tensor_t *t[4];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 4, d, t), UVMRT_OK);
    for (int step = 0; step < 3; step++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        uvmrt_layer_call_t cs = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = small, .phase = UVMRT_PHASE_FORWARD, .sim_duration_ns = 1000};
        cr_assert_eq(uvmrt_layer_begin(ctx, &cs), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        uint64_t resident = summary(ctx).resident_bytes;
        log_reset();
        uvmrt_layer_call_t cb = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = big, .phase = UVMRT_PHASE_FORWARD};
        cr_expect_eq(uvmrt_layer_begin(ctx, &cb), UVMRT_ERR_BUDGET);
        cr_expect(log_contains("hugelayer"), "message does not name the layer:\n%s", log_text());
        cr_expect(log_contains("18874368"), "message does not give the working set (18874368 bytes):\n%s", log_text());
        cr_expect(log_contains("16777216"), "message does not give the budget (16777216 bytes):\n%s", log_text());
        cr_expect_eq(summary(ctx).resident_bytes, resident, "a failed begin changed residency");
        cr_expect_eq(uvmrt_tensor_is_resident(t[2]), 0);
        cr_expect_eq(uvmrt_layer_end(ctx), UVMRT_ERR_STATE, "no layer is open after a failed begin");
        /* the step goes on */
        uvmrt_layer_call_t cs2 = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = small, .phase = UVMRT_PHASE_BACKWARD, .sim_duration_ns = 1000};
        cr_assert_eq(uvmrt_layer_begin(ctx, &cs2), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
    uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    cr_assert_eq(uvmrt_layer_stats_get(ctx, big, UVMRT_PHASE_FORWARD, &ls), UVMRT_OK);
    cr_expect_eq(ls.calls, 0, "the rejected call was counted");
    cr_assert_eq(uvmrt_layer_stats_get(ctx, small, UVMRT_PHASE_FORWARD, &ls), UVMRT_OK);
    cr_expect_eq(ls.calls, 3);
    cr_expect_eq(step_stats(ctx, 2).fault_count, 0);
    uvmrt_context_destroy(ctx);
}

/* Extra uses count towards the working set, and a tensor named twice only once. */
Test(executor, working_set_counts_extra_uses_once)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 6 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d[3] = {{"w", l, UVMRT_ROLE_WEIGHT, 2 * MIB}, {"a", l, UVMRT_ROLE_ACTIVATION, 2 * MIB},
                                {"x", -1, UVMRT_ROLE_ACTIVATION, 4 * MIB}};
    uvmrt_tensor_t *t[3];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 3, d, t), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_use_t u[2] = {{t[0], UVMRT_USE_READWRITE}, {t[1], UVMRT_USE_READ}}; /* replace the defaults' access */
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .uses = u, .n_uses = 2};
    cr_expect_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "w and a named twice were counted twice: %s", log_text());
    cr_expect_eq(summary(ctx).resident_bytes, 4 * MIB);
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    uvmrt_use_t ux = {t[2], UVMRT_USE_READ};
    uvmrt_layer_call_t cx = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .uses = &ux, .n_uses = 1};
    cr_expect_eq(uvmrt_layer_begin(ctx, &cx), UVMRT_ERR_BUDGET, "8 MiB working set in a 6 MiB budget");
    /* no_default_uses: only x */
    cx.no_default_uses = 1;
    cr_expect_eq(uvmrt_layer_begin(ctx, &cx), UVMRT_OK, "%s", log_text());
    cr_expect(uvmrt_tensor_is_resident(t[2]));
    cr_expect_leq(summary(ctx).resident_bytes, 6 * MIB);
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ random schedules on the executor */
typedef struct rnet {
    uvmrt_context_t *ctx;
    rsched_t s;
    uvmrt_tensor_t **t;
    int *layer;
} rnet_t;

static void rnet_make(rnet_t *r, uint64_t seed, uvmrt_policy_t policy, double ws_mult)
{
    uint64_t rng = seed * 2654435761u + 1;
    int n = (int)rand_between(&rng, 4, 16), m = (int)rand_between(&rng, 2, 12);
    rsched_make(&r->s, seed, n, m, (int)rand_between(&rng, 1, 4));
    r->ctx = make_ctx(policy, (uint64_t)((double)rsched_max_ws(&r->s) * ws_mult), NULL);
    r->layer = calloc((size_t)m, sizeof *r->layer);
    r->t = calloc((size_t)n, sizeof *r->t);
    uvmrt_tensor_desc_t *d = calloc((size_t)n, sizeof *d);
    for (int e = 0; e < m; e++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", e);
        cr_assert_eq(uvmrt_layer_add(r->ctx, name, &r->layer[e]), UVMRT_OK);
    }
    for (int i = 0; i < n; i++) d[i] = (uvmrt_tensor_desc_t){NULL, -1, UVMRT_ROLE_WORKSPACE, r->s.size[i]};
    cr_assert_eq(uvmrt_tensors_alloc(r->ctx, (size_t)n, d, r->t), UVMRT_OK);
    free(d);
}

static void rnet_free(rnet_t *r)
{
    uvmrt_context_destroy(r->ctx);
    free(r->t);
    free(r->layer);
    rsched_free(&r->s);
}

static void rnet_step(rnet_t *r, int check_resident)
{
    uvmrt_context_t *ctx = r->ctx;
    uint64_t budget = uvmrt_context_budget(ctx);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    for (int e = 0; e < r->s.m; e++) {
        uvmrt_use_t u[8];
        for (int i = 0; i < r->s.count[e]; i++)
            u[i] = (uvmrt_use_t){r->t[r->s.tensor[r->s.first[e] + i]], r->s.access[r->s.first[e] + i]};
        uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = r->layer[e], .phase = UVMRT_PHASE_FORWARD, .uses = u,
                                .n_uses = (size_t)r->s.count[e], .no_default_uses = 1, .sim_duration_ns = 50000};
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "event %d: %s", e, log_text());
        uvmrt_summary_t s = summary(ctx);
        cr_assert_leq(s.resident_bytes, budget, "event %d begin: resident %llu > budget %llu", e,
                      (unsigned long long)s.resident_bytes, (unsigned long long)budget);
        if (check_resident)
            for (int i = 0; i < r->s.count[e]; i++) cr_assert(uvmrt_tensor_is_resident(u[i].tensor), "event %d", e);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        cr_assert_leq(summary(ctx).resident_bytes, budget, "event %d end", e);
    }
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
}

Test(executor, random_schedules_prefetch)
{
    for (uint64_t seed = 1; seed <= 40; seed++) {
        const double mults[] = {1.0, 1.5, 2.0, 3.0};
        for (size_t k = 0; k < 4; k++) {
            rnet_t r;
            rnet_make(&r, seed, UVMRT_POLICY_PREFETCH, mults[k]);
            for (int step = 0; step < 4; step++) rnet_step(&r, 1);
            if (mults[k] >= 2.0)
                for (uint64_t i = 2; i < 4; i++)
                    cr_expect_eq(step_stats(r.ctx, i).fault_count, 0, "seed %llu, %.1fx ws: step %llu faults",
                                 (unsigned long long)seed, mults[k], (unsigned long long)i + 1);
            rnet_free(&r);
        }
    }
}

Test(executor, random_schedules_demand)
{
    for (uint64_t seed = 1; seed <= 30; seed++) {
        rnet_t r;
        rnet_make(&r, seed, UVMRT_POLICY_DEMAND, 1.3);
        for (int step = 0; step < 3; step++) rnet_step(&r, 1);
        rnet_free(&r);
    }
}

/* ------------------------------------------------------------------ host homing */
/* Activations streamed (every use | UVMRT_USE_STREAM): the plan may keep them
 * in host memory. Whatever it decides, the invariants hold: the budget on the
 * accounting and on the model's device, every used tensor resident or homed at
 * begin, no faults in steady state, remote traffic exactly when homed. */
static net_t *setup_streamed(uvmrt_policy_t policy, uint64_t budget, int remote, const char *profile)
{
    uvmrt_params_t p;
    sim_params(&p, policy, budget, profile);
    p.remote = remote;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    spec.stream_acts = 1;
    return net_create(ctx, &spec);
}

Test(executor, host_homing_invariants)
{
    const uint64_t budgets[] = {8 * MIB, 12 * MIB, 16 * MIB, 24 * MIB, 40 * MIB};
    const char *profiles[] = {"consumer-8g", "h200"};
    int homed_any = 0;
    for (size_t pr = 0; pr < 2; pr++)
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            net_t *net = setup_streamed(UVMRT_POLICY_PREFETCH, budgets[b], 1, profiles[pr]);
            uvmrt_context_t *ctx = net->ctx;
            run_steps(net, 5, accounting_observer, NULL);
            uvmrt_summary_t s = summary(ctx);
            homed_any |= s.host_homed_bytes > 0;
            uint64_t homed = 0;
            for (int i = 0; i < net->n_all; i++) {
                uvmrt_tensor_t *t = net->all[i];
                if (!uvmrt_tensor_is_host_homed(t)) continue;
                homed += footprint_of(uvmrt_tensor_size(t));
                int is_act = t == net->x;
                for (int l = 0; l < net->L; l++) is_act |= t == net->a[l];
                cr_expect(is_act, "%s homed, but not all its uses stream", uvmrt_tensor_name(t));
                cr_expect_eq(uvmrt_tensor_is_resident(t), 0);
            }
            cr_expect_eq(s.host_homed_bytes, homed);
            for (uint64_t i = 2; i < 5; i++) {
                uvmrt_step_stats_t st = step_stats(ctx, i);
                cr_expect_eq(st.fault_count, 0, "%s budget %llu MiB step %llu: %llu faults", profiles[pr],
                             (unsigned long long)(budgets[b] >> 20), (unsigned long long)i + 1,
                             (unsigned long long)st.fault_count);
                if (s.host_homed_bytes > 0)
                    cr_expect_gt(st.remote_read_bytes + st.remote_write_bytes, 0, "homed but no remote traffic");
                else
                    cr_expect_eq(st.remote_read_bytes + st.remote_write_bytes, 0, "remote traffic, nothing homed");
            }
            net_destroy(net);
        }
    cr_log_info("homing used: %d", homed_any);
}

/* remote = 0: nothing is homed, even when every use streams. */
Test(executor, host_homing_disabled)
{
    net_t *net = setup_streamed(UVMRT_POLICY_PREFETCH, 12 * MIB, 0, NULL);
    run_steps(net, 4, accounting_observer, NULL);
    uvmrt_summary_t s = summary(net->ctx);
    cr_expect_eq(s.host_homed_bytes, 0);
    cr_expect_eq(s.remote_read_bytes + s.remote_write_bytes, 0);
    net_destroy(net);
}

/* STREAM on a demand or none context changes nothing but is accepted. */
Test(executor, stream_flag_under_demand)
{
    net_t *net = setup_streamed(UVMRT_POLICY_DEMAND, 16 * MIB, 1, NULL);
    run_steps(net, 3, accounting_observer, NULL);
    uvmrt_summary_t s = summary(net->ctx);
    cr_expect_eq(s.host_homed_bytes, 0);
    cr_expect_eq(s.remote_read_bytes + s.remote_write_bytes, 0);
    net_destroy(net);
}

/* ------------------------------------------------------------------ data survives */
static uint32_t pattern(int tensor, size_t word) { return (uint32_t)(tensor * 2654435761u) ^ (uint32_t)(word * 40503u); }

static void fill(uvmrt_tensor_t *t, int id)
{
    uint32_t *p = uvmrt_tensor_ptr(t);
    size_t words = uvmrt_tensor_size(t) / sizeof *p;
    for (size_t i = 0; i < words; i++) p[i] = pattern(id, i);
}

static void check(uvmrt_tensor_t *t, int id)
{
    const uint32_t *p = uvmrt_tensor_ptr(t);
    size_t words = uvmrt_tensor_size(t) / sizeof *p;
    for (size_t i = 0; i < words; i++)
        cr_assert_eq(p[i], pattern(id, i), "tensor %s word %zu changed", uvmrt_tensor_name(t), i);
}

static void data_survives(uvmrt_policy_t policy)
{
    net_t *net = setup(policy, 2.0, 0);
    for (int i = 0; i < net->L; i++) {
        fill(net->w[i], 2 * i);
        fill(net->o[i], 2 * i + 1);
    }
    run_steps(net, 4, observe_invariants, NULL);
    uvmrt_summary_t s = summary(net->ctx);
    cr_assert_gt(s.evict_bytes, 0, "nothing was evicted: the test proves nothing");
    for (int i = 0; i < net->L; i++) {
        check(net->w[i], 2 * i);
        check(net->o[i], 2 * i + 1);
    }
    net_destroy(net);
}

Test(executor, data_survives_prefetch) { data_survives(UVMRT_POLICY_PREFETCH); }
Test(executor, data_survives_demand) { data_survives(UVMRT_POLICY_DEMAND); }

/* W and O are read before written in every phase: never discarded. */
Test(executor, weights_never_discarded)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 2.0, 0);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 4, NULL, NULL);
    uint64_t discard = 0;
    for (int i = 0; i < net->L; i++) {
        uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            cr_assert_eq(uvmrt_layer_stats_get(ctx, net->layer[i], (uvmrt_phase_t)p, &ls), UVMRT_OK);
            discard += ls.discard_bytes;
        }
    }
    /* activations and gradients are overwritten before being read: some discards */
    cr_expect_gt(discard, 0, "no discards at all with discard_dead = 1");
    net_destroy(net);
}

Test(executor, discard_disabled_writes_back)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.discard_dead = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 4, observe_invariants, NULL);
    uvmrt_summary_t s = summary(ctx);
    cr_expect_eq(s.discard_bytes, 0, "discard_dead = 0 but %llu bytes discarded", (unsigned long long)s.discard_bytes);
    cr_expect_gt(s.evict_bytes, 0);
    net_destroy(net);
}

/* ------------------------------------------------------------------ user placement */
/* Gradients placed in host memory (as a CPU optimizer wants them): never resident,
 * never prefetched or evicted, read and written over the link, not counted in a
 * layer's working set, under prefetch and demand alike; back to AUTO, the policy
 * moves them again. */
static void placement_host(uvmrt_policy_t policy)
{
    net_spec_t spec = net_spec_default();
    /* footprints W 2, A 2, G 2, O 4 MiB: the largest working set is 8 MiB with the
     * gradients (backward, optimizer) and 6 MiB without them */
    uint64_t budget = 7 * MIB;
    uvmrt_context_t *ctx = make_ctx(policy, budget, NULL);
    net_t *net = net_create(ctx, &spec);
    cr_assert_eq(net_max_working_set(net), 8 * MIB);
    for (int i = 0; i < net->L; i++)
        cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[i], UVMRT_PLACE_HOST), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_tensor_placement(net->g[0]), UVMRT_PLACE_HOST);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[0], (uvmrt_placement_t)7), UVMRT_ERR_INVALID);
    cr_assert_not_null(strstr(log_text(), "placement 7"), "%s", log_text());
    run_steps(net, 4, NULL, NULL);
    for (int i = 0; i < net->L; i++) {
        cr_expect(uvmrt_tensor_is_host_homed(net->g[i]), "g%d left the host", i);
        cr_expect(!uvmrt_tensor_is_resident(net->g[i]), "g%d counted resident", i);
    }
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_expect_leq(sum.peak_resident_bytes, budget);
    cr_expect_gt(sum.remote_write_bytes, 0, "gradients were not written over the link");
    cr_expect_gt(sum.remote_read_bytes, 0, "gradients were not read over the link");
    for (uint64_t s = 1; s < 4; s++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, s, &st), UVMRT_OK);
        if (policy == UVMRT_POLICY_PREFETCH) cr_expect_eq(st.fault_count, 0, "step %llu faulted", (unsigned long long)s);
    }
    /* back to the policy: the gradients move again */
    for (int i = 0; i < net->L; i++)
        cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[i], UVMRT_PLACE_AUTO), UVMRT_OK);
    net_destroy(net);
    ctx = make_ctx(policy, 4 * budget, NULL);
    net = net_create(ctx, &spec);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[0], UVMRT_PLACE_HOST), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[0], UVMRT_PLACE_AUTO), UVMRT_OK);
    run_steps(net, 3, NULL, NULL);
    cr_expect(!uvmrt_tensor_is_host_homed(net->g[0]), "g0 still host-homed after AUTO");
    net_destroy(net);
}

Test(executor, placement_host_prefetch) { placement_host(UVMRT_POLICY_PREFETCH); }
Test(executor, placement_host_demand) { placement_host(UVMRT_POLICY_DEMAND); }

/* UVMRT_PLACE_PINNED: the gradients' contents move to page-locked memory of their own
 * (uvmrt_tensor_ptr gives the new address), they train there host-homed as HOST places
 * them (never resident, read and written over the link, no faults planned), and back to
 * HOST or AUTO the contents return to the managed address. */
Test(executor, placement_pinned_moves_the_contents_and_back)
{
    net_spec_t spec = net_spec_default();
    uint64_t budget = 7 * MIB;
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, NULL);
    net_t *net = net_create(ctx, &spec);
    void *managed[16];
    cr_assert_leq(net->L, 16);
    for (int i = 0; i < net->L; i++) {
        managed[i] = uvmrt_tensor_ptr(net->g[i]);
        float *g = managed[i];
        for (int k = 0; k < 64; k++) g[k] = (float)(100 * i + k);
        cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[i], UVMRT_PLACE_PINNED), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_tensor_placement(net->g[i]), UVMRT_PLACE_PINNED);
        float *p = uvmrt_tensor_ptr(net->g[i]);
        cr_assert(p != NULL && (void *)p != managed[i], "g%d: a new address", i);
        for (int k = 0; k < 64; k++) cr_assert_eq(p[k], (float)(100 * i + k), "g%d[%d] moved", i, k);
        cr_assert(uvmrt_tensor_is_host_homed(net->g[i]) && !uvmrt_tensor_is_resident(net->g[i]));
    }
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[0], UVMRT_PLACE_PINNED), UVMRT_OK, "again: no change");
    run_steps(net, 4, NULL, NULL);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_expect_leq(sum.peak_resident_bytes, budget);
    cr_expect_gt(sum.remote_write_bytes, 0, "gradients were not written over the link");
    for (uint64_t s = 1; s < 4; s++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, s, &st), UVMRT_OK);
        cr_expect_eq(st.fault_count, 0, "step %llu faulted", (unsigned long long)s);
    }
    for (int i = 0; i < net->L; i++) {
        cr_expect(!uvmrt_tensor_is_resident(net->g[i]), "g%d counted resident", i);
        float *p = uvmrt_tensor_ptr(net->g[i]);
        p[0] = -1.0f - (float)i; /* written in page-locked memory: must come back */
    }
    /* back: g0 to HOST, the others to AUTO; the contents return to the managed address */
    for (int i = 0; i < net->L; i++) {
        uvmrt_placement_t to = i == 0 ? UVMRT_PLACE_HOST : UVMRT_PLACE_AUTO;
        cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[i], to), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_tensor_placement(net->g[i]), to);
        float *g = uvmrt_tensor_ptr(net->g[i]);
        cr_assert_eq((void *)g, managed[i], "g%d: back at its managed address", i);
        cr_assert_eq(g[0], -1.0f - (float)i);
        cr_assert_eq(g[1], (float)(100 * i + 1));
    }
    /* refused inside a step, and then nothing changed */
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    log_reset();
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[1], UVMRT_PLACE_PINNED), UVMRT_ERR_STATE);
    cr_assert_eq(uvmrt_tensor_placement(net->g[1]), UVMRT_PLACE_AUTO);
    cr_assert_eq(uvmrt_tensor_ptr(net->g[1]), managed[1]);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    /* freed and destroyed while pinned: the page-locked memory goes with them (ASan) */
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[1], UVMRT_PLACE_PINNED), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, net->g[2], UVMRT_PLACE_PINNED), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_free(ctx, net->g[1]), UVMRT_OK);
    net->g[1] = NULL;
    net_destroy(net);
}

Test(executor, placement_inside_step_rejected)
{
    net_spec_t spec = net_spec_default();
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 0, NULL);
    net_t *net = net_create(ctx, &spec);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_set_placement(ctx, net->g[0], UVMRT_PLACE_HOST), UVMRT_ERR_STATE);
    cr_expect_eq(uvmrt_tensor_placement(net->g[0]), UVMRT_PLACE_AUTO, "a rejected call changed the placement");
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    net_destroy(net);
}

/* ------------------------------------------------------------------ step_end cost and history */
static int syncs_of[4];
static uvmrt_status_t counting_sync(void *state, uvmrt_stream_t s)
{
    uintptr_t k = (uintptr_t)s;
    if (k >= 1 && k <= 3) syncs_of[k]++;
    return uvmrt__backend_sim.stream_sync(state, s);
}

/* step_end waits for each compute stream once, and its cost is linear in the
 * step's calls (it was quadratic: 32 000 calls took 1.35 s). */
Test(executor, step_end_syncs_each_stream_once_linear_in_calls)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_NONE, 64 * MIB, NULL);
    p.fault_stats = 0;
    uvmrt_backend_ops_t ops = uvmrt__backend_sim;
    ops.stream_sync = counting_sync;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt__context_create_with(&p, &ops, &ctx), UVMRT_OK, "%s", log_text());
    int layer;
    cr_assert_eq(uvmrt_layer_add(ctx, "l", &layer), UVMRT_OK);
    const int n = 40000;
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    for (int i = 0; i < n; i++) {
        uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = layer, .stream = (uvmrt_stream_t)(uintptr_t)(1 + i % 3), .sim_duration_ns = 10};
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    }
    memset(syncs_of, 0, sizeof syncs_of);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    for (int k = 1; k <= 3; k++) cr_expect_eq(syncs_of[k], 1, "stream %d synced %d times", k, syncs_of[k]);
    /* a quadratic scan of 40 000 calls takes seconds; linear work takes milliseconds */
    cr_expect_lt(s, 0.5, "step_end of %d calls took %.3f s", n, s);
    uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    cr_assert_eq(uvmrt_layer_stats_get(ctx, layer, UVMRT_PHASE_FORWARD, &ls), UVMRT_OK);
    cr_expect_eq(ls.calls, (uint64_t)n);
    uvmrt_context_destroy(ctx);
}

#ifdef __SANITIZE_ADDRESS__
#define UNDER_ASAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static long rss_pages(void)
{
    long size = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f == NULL) return 0;
    if (fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    fclose(f);
    return resident;
}

/* 10^6 steps of a tiny model: the history keeps the last UVMRT_HISTORY steps
 * (memory flat), older steps are summed, and asking for a dropped step names
 * the oldest kept one. */
Test(executor, history_bounded_over_a_million_steps, .timeout = 120)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 8 * MIB, NULL);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_eq(ctx->cfg.history, 1000, "UVMRT_HISTORY defaults to 1000");
    ctx->cfg.history = 100; /* as UVMRT_HISTORY=100 would */
    int layer;
    cr_assert_eq(uvmrt_layer_add(ctx, "l", &layer), UVMRT_OK);
    uvmrt_tensor_desc_t d = {"w", layer, UVMRT_ROLE_WEIGHT, 64 * KIB};
    uvmrt_tensor_t *w;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &w), UVMRT_OK);
    const uint64_t steps = 1000000;
    long rss0 = 0;
    size_t cap_rows = 0, cap_spans = 0;
    uint64_t cap_steps = 0, total_ns = 0;
    for (uint64_t s = 0; s < steps; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = layer, .sim_duration_ns = 1000};
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
        total_ns += step_stats(ctx, s).step_ns;
        if (s == 10000) {
            rss0 = rss_pages();
            cap_rows = ctx->hist.cap_rows;
            cap_spans = ctx->hist.cap_spans;
            cap_steps = ctx->hist.cap_steps;
        }
    }
    /* flat: no array grew after the first 10 000 steps, nor did the process */
    cr_expect_eq(ctx->hist.cap_rows, cap_rows);
    cr_expect_eq(ctx->hist.cap_spans, cap_spans);
    cr_expect_eq(ctx->hist.cap_steps, cap_steps);
    cr_expect_leq(ctx->hist.n_steps, 125);
    cr_expect_geq(ctx->hist.n_steps, 100);
    long rss1 = rss_pages();
#ifndef UNDER_ASAN
    /* (AddressSanitizer keeps freed blocks in quarantine, so RSS says nothing there) */
    cr_expect_lt(rss1 - rss0, 256, "RSS grew by %ld pages over 990 000 steps", rss1 - rss0);
#else
    (void)rss0;
    (void)rss1;
#endif
    uvmrt_summary_t sum = summary(ctx);
    cr_expect_eq(sum.steps, steps);
    /* the last step is kept; the first is not, and the error names the oldest kept */
    uvmrt_step_stats_t st = step_stats(ctx, steps - 1);
    cr_expect_gt(st.step_ns, 0);
    log_reset();
    cr_expect_eq(uvmrt_step_stats_get(ctx, 0, &st), UVMRT_ERR_NOT_FOUND);
    char oldest[64];
    snprintf(oldest, sizeof oldest, "oldest kept step is %llu", (unsigned long long)ctx->hist.steps_before);
    cr_expect(log_contains(oldest), "%s", log_text());
    cr_expect_eq(uvmrt_step_stats_get(ctx, ctx->hist.steps_before, &st), UVMRT_OK);
    /* the dropped steps are summed, not lost */
    uint64_t ns = ctx->hist.steps_dropped.step_ns;
    for (uint64_t k = ctx->hist.steps_before; k < steps; k++) ns += step_stats(ctx, k).step_ns;
    cr_expect_eq(ns, total_ns, "kept + dropped step times %llu != their sum as run %llu", (unsigned long long)ns,
                 (unsigned long long)total_ns);
    /* the kept rows and spans are the kept steps' */
    cr_expect_geq(ctx->hist.rows[0].step, ctx->hist.steps_before);
    cr_expect_geq(ctx->hist.spans[0].step, ctx->hist.steps_before);
    cr_expect_eq(ctx->hist.rows[ctx->hist.n_rows - 1].step, steps - 1);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ the step's tail */
static struct {
    int fail_next, ends;
    uint64_t steps_seen, step_ns_seen;
} tail;

static uvmrt_status_t tail_reserve(uvmrt_context_t *ctx)
{
    (void)ctx;
    if (!tail.fail_next) return UVMRT_OK;
    tail.fail_next = 0;
    return UVMRT_ERR_NOMEM;
}

static void tail_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    (void)e;
    tail.ends++;
    tail.steps_seen = uvmrt__steps_done(ctx);
    tail.step_ns_seen = ctx->stats.cur.step_ns;
}

static const uvmrt_observer_t tail_observer = {"test", NULL, tail_reserve, NULL, tail_end, NULL};
static const uvmrt_observer_t noop_observer = {"noop", NULL, NULL, NULL, NULL, NULL};

/* The context registers the observers in the step tail's order; one added last sees
 * the step kept by the history and its time taken; one whose reserve fails leaves the
 * step open (nothing of the tail ran), and the step ends when called again. */
Test(executor, observers_in_order_and_a_failed_reserve_leaves_the_step_open)
{
    net_t *net = setup(UVMRT_POLICY_PREFETCH, 0, 1 * GIB);
    uvmrt_context_t *ctx = net->ctx;
    static const char *const want[] = {"choice", "faults", "record", "history", "monitor"};
    cr_assert_eq(ctx->sched.observers.n, 5);
    for (int k = 0; k < 5; k++) cr_expect_str_eq(ctx->sched.observers.at[k]->name, want[k]);
    cr_assert_eq(uvmrt__observer_add(ctx, &tail_observer), UVMRT_OK);
    run_steps(net, 2, NULL, NULL);
    cr_expect_eq(tail.ends, 2);
    cr_expect_eq(tail.steps_seen, 2, "the history kept the step before the last observer");
    cr_expect_gt(tail.step_ns_seen, 0, "the step's time is taken before the end hooks");
    cr_expect_eq(ctx->ev.anchors, 2, "one clock anchor per step end");
    cr_expect_eq(ctx->faults.anchors_seen, 2, "the faults' observer took each anchor");
    tail.fail_next = 1;
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_step_end(ctx), UVMRT_ERR_NOMEM);
    cr_expect(uvmrt__in_step(ctx), "a failed reserve leaves the step open");
    cr_expect_eq(uvmrt__steps_done(ctx), 2);
    cr_expect_eq(tail.ends, 2);
    cr_expect(log_contains("step 3 is still open"), "%s", log_text());
    cr_expect_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt__steps_done(ctx), 3);
    cr_expect_eq(tail.ends, 3);
    while (ctx->sched.observers.n < UVMRT_OBSERVERS_MAX)
        cr_assert_eq(uvmrt__observer_add(ctx, &noop_observer), UVMRT_OK);
    cr_expect_eq(uvmrt__observer_add(ctx, &tail_observer), UVMRT_ERR_INVALID, "the list is full");
    cr_expect_eq(ctx->sched.observers.n, UVMRT_OBSERVERS_MAX);
    net_destroy(net);
}
