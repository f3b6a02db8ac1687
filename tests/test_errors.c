/*
 * test_errors.c -- misuse of the API: NULL handles, calls in the wrong state,
 * bad arguments. Each error returns a status, logs a message, changes nothing,
 * and leaves the context usable: a normal step afterwards succeeds.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

/* The context still runs normal steps, and they keep the invariants. */
static void still_usable(net_t *net)
{
    uvmrt_summary_t before = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &before), UVMRT_OK);
    run_steps(net, 2, observe_invariants, NULL);
    uvmrt_summary_t after = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &after), UVMRT_OK);
    cr_expect_eq(after.steps, before.steps + 2);
}

static uvmrt_layer_call_t call_of(const net_t *net, int i, uvmrt_phase_t phase)
{
    return (uvmrt_layer_call_t){.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[i], .phase = phase, .sim_duration_ns = 1000};
}

/* ------------------------------------------------------------------ NULL handles */
Test(errors, null_handles)
{
    uvmrt_layer_call_t c = {0};
    cr_expect_eq(uvmrt_step_begin(NULL), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_step_end(NULL), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_begin(NULL, &c), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_end(NULL), UVMRT_ERR_INVALID);
    int l;
    cr_expect_eq(uvmrt_layer_add(NULL, "x", &l), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_count(NULL), 0);
    cr_expect_null(uvmrt_tensor_ptr(NULL));
    cr_expect_eq(uvmrt_tensor_size(NULL), 0);
    cr_expect_null(uvmrt_tensor_name(NULL));
    cr_expect_eq(uvmrt_tensor_is_resident(NULL), 0);
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, 4096};
    uvmrt_tensor_t *t = NULL;
    cr_expect_eq(uvmrt_tensor_alloc(NULL, &d, &t), UVMRT_ERR_INVALID);
    cr_expect_null(t);
    cr_expect_eq(uvmrt_tensor_free(NULL, NULL), UVMRT_OK);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_expect_eq(uvmrt_summary_get(NULL, &s), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_report_write(NULL, "text", NULL), UVMRT_ERR_INVALID);
    uvmrt_context_destroy(NULL);
    uvmrt_context_print_config(NULL, stderr);

    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, NULL), UVMRT_ERR_INVALID);
    cr_expect(log_contains("call is NULL"), "layer_begin(NULL call) must log; log:\n%s", log_text());
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    int out;
    cr_expect_eq(uvmrt_layer_add(net->ctx, NULL, &out), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_add(net->ctx, "x", NULL), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_count(net->ctx), net->L);
    still_usable(net);
    net_destroy(net);
}

/* The context accessors must not crash on NULL either (as the tensor
 * accessors do not): a policy/backend/budget query of a failed create is an
 * easy mistake. */
Test(errors, null_context_accessors)
{
    cr_expect_eq(uvmrt_context_budget(NULL), 0);
    (void)uvmrt_context_policy(NULL);
    (void)uvmrt_context_backend(NULL);
    (void)uvmrt_context_profile(NULL);
}

/* ------------------------------------------------------------------ state errors */
Test(errors, layer_begin_outside_step)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    uvmrt_layer_call_t c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_STATE);
    cr_expect(log_contains("outside a step"), "%s", log_text());
    cr_expect(log_contains("uvmrt_layer_begin"), "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    cr_expect_eq(s.resident_bytes, 0, "a rejected begin made tensors resident");
    still_usable(net);
    net_destroy(net);
}

Test(errors, step_end_without_begin)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    log_reset();
    cr_expect_eq(uvmrt_step_end(net->ctx), UVMRT_ERR_STATE);
    cr_expect(log_contains("uvmrt_step_end"), "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    cr_expect_eq(s.steps, 0, "a rejected step_end counted a step");
    still_usable(net);
    cr_expect_eq(uvmrt_step_end(net->ctx), UVMRT_ERR_STATE, "after steps, too");
    still_usable(net);
    net_destroy(net);
}

Test(errors, step_begin_twice)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_step_begin(net->ctx), UVMRT_ERR_STATE);
    cr_expect(log_contains("still open"), "%s", log_text());
    cr_expect(log_contains("step 3"), "message does not name the open step:\n%s", log_text());
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    still_usable(net);
    net_destroy(net);
}

Test(errors, layer_begin_while_open)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    uvmrt_layer_call_t a = call_of(net, 0, UVMRT_PHASE_FORWARD), b = call_of(net, 1, UVMRT_PHASE_FORWARD);
    cr_assert_eq(uvmrt_layer_begin(net->ctx, &a), UVMRT_OK);
    uvmrt_summary_t s0 = UVMRT_STRUCT_INIT(uvmrt_summary_t), s1 = s0;
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s0), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &b), UVMRT_ERR_STATE);
    cr_expect(log_contains("layer0"), "message does not name the open layer:\n%s", log_text());
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s1), UVMRT_OK);
    cr_expect_eq(s1.resident_bytes, s0.resident_bytes);
    cr_expect_eq(uvmrt_tensor_is_resident(net->w[1]), 0, "the rejected layer's tensors were brought in");
    cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    still_usable(net);
    net_destroy(net);
}

Test(errors, layer_end_without_begin)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    log_reset();
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE, "outside a step");
    cr_expect(log_contains("uvmrt_layer_end"), "%s", log_text());
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE, "inside a step, no layer open");
    uvmrt_layer_call_t a = call_of(net, 0, UVMRT_PHASE_FORWARD);
    cr_assert_eq(uvmrt_layer_begin(net->ctx, &a), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE, "ended twice");
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    cr_assert_eq(uvmrt_layer_stats_get(net->ctx, net->layer[0], UVMRT_PHASE_FORWARD, &ls), UVMRT_OK);
    cr_expect_eq(ls.calls, 1, "the extra end was counted as a call");
    still_usable(net);
    net_destroy(net);
}

Test(errors, step_end_with_open_layer)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    uvmrt_layer_call_t a = call_of(net, 0, UVMRT_PHASE_FORWARD);
    cr_assert_eq(uvmrt_layer_begin(net->ctx, &a), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_step_end(net->ctx), UVMRT_ERR_STATE);
    cr_expect(log_contains("layer0"), "message does not name the open layer:\n%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    cr_expect_eq(s.steps, 2, "a rejected step_end counted the step");
    cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    still_usable(net);
    net_destroy(net);
}

/* ------------------------------------------------------------------ bad arguments */
Test(errors, bad_layer_and_phase)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    uvmrt_layer_call_t c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    c.layer = net->L;
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    cr_expect(log_contains("layer 6"), "message does not name the bad layer:\n%s", log_text());
    c.layer = -1;
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    c.phase = (uvmrt_phase_t)3;
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    cr_expect(log_contains("phase 3"), "message does not name the bad phase:\n%s", log_text());
    c.phase = (uvmrt_phase_t)-1;
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    c.n_uses = 2; /* uses NULL */
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    cr_expect(log_contains("n_uses"), "%s", log_text());
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE, "a rejected begin opened a layer");
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    /* the rejected calls left the record alone: steady state, no faults */
    still_usable(net);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(net->ctx, 4, &st), UVMRT_OK);
    cr_expect_eq(st.fault_count, 0);
    net_destroy(net);
}

static void expect_use_rejected(net_t *net, uvmrt_use_t use, const char *needle)
{
    uvmrt_layer_call_t c = call_of(net, 1, UVMRT_PHASE_FORWARD);
    uvmrt_use_t u[2] = {{net->a[0], UVMRT_USE_READ}, use};
    c.uses = u;
    c.n_uses = 2;
    uvmrt_summary_t s0 = UVMRT_STRUCT_INIT(uvmrt_summary_t), s1 = s0;
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s0), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID, "%s", needle);
    cr_expect(log_contains(needle), "message lacks '%s':\n%s", needle, log_text());
    cr_expect(log_contains("layer1"), "message does not name the layer:\n%s", log_text());
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s1), UVMRT_OK);
    cr_expect_eq(s1.resident_bytes, s0.resident_bytes);
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE, "a rejected begin opened a layer");
}

Test(errors, bad_uses)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    uvmrt_tensor_desc_t d = {"gone", -1, UVMRT_ROLE_WORKSPACE, MIB};
    uvmrt_tensor_t *gone;
    cr_assert_eq(uvmrt_tensor_alloc(net->ctx, &d, &gone), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_free(net->ctx, gone), UVMRT_OK);
    uvmrt_context_t *other = make_ctx(UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    uvmrt_tensor_t *foreign;
    d.name = "foreign";
    cr_assert_eq(uvmrt_tensor_alloc(other, &d, &foreign), UVMRT_OK);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    expect_use_rejected(net, (uvmrt_use_t){gone, UVMRT_USE_READ}, "uses[1]");
    expect_use_rejected(net, (uvmrt_use_t){NULL, UVMRT_USE_READ}, "uses[1]");
    expect_use_rejected(net, (uvmrt_use_t){foreign, UVMRT_USE_READ}, "uses[1]");
    expect_use_rejected(net, (uvmrt_use_t){net->x, 0}, "access 0");
    expect_use_rejected(net, (uvmrt_use_t){net->x, 8}, "access 8");
    expect_use_rejected(net, (uvmrt_use_t){net->x, UVMRT_USE_STREAM}, "access 4"); /* STREAM alone */
    expect_use_rejected(net, (uvmrt_use_t){net->x, ~0u}, "access");
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    still_usable(net);
    uvmrt_context_destroy(other);
    net_destroy(net);
}

/* Failures in the middle of a planned step leave the plan in force. */
Test(errors, errors_mid_step_keep_plan)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    run_steps(net, 3, NULL, NULL);
    uvmrt_summary_t s0 = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s0), UVMRT_OK);
    /* a full step, with rejected calls sprinkled between its calls */
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    for (int i = 0; i < net->L; i++) {
        uvmrt_layer_call_t bad = call_of(net, 0, (uvmrt_phase_t)7);
        cr_expect_eq(uvmrt_layer_begin(net->ctx, &bad), UVMRT_ERR_INVALID);
        cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_ERR_STATE);
        cr_expect_eq(uvmrt_step_begin(net->ctx), UVMRT_ERR_STATE);
        uvmrt_use_t x = {i > 0 ? net->a[i - 1] : net->x, UVMRT_USE_READ};
        uvmrt_layer_call_t c = call_of(net, i, UVMRT_PHASE_FORWARD);
        c.uses = &x;
        c.n_uses = 1;
        c.sim_duration_ns = net->spec.sim_ns;
        cr_assert_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_OK);
        cr_expect_eq(uvmrt_step_end(net->ctx), UVMRT_ERR_STATE);
        cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    }
    for (int i = net->L - 1; i >= 0; i--) {
        uvmrt_use_t g = {i < net->L - 1 ? net->g[i + 1] : NULL, UVMRT_USE_READ};
        uvmrt_layer_call_t c = call_of(net, i, UVMRT_PHASE_BACKWARD);
        c.uses = &g;
        c.n_uses = i < net->L - 1;
        c.sim_duration_ns = net->spec.sim_ns;
        cr_assert_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    }
    for (int i = 0; i < net->L; i++) {
        uvmrt_layer_call_t c = call_of(net, i, UVMRT_PHASE_OPTIMIZER);
        c.sim_duration_ns = net->spec.sim_ns;
        cr_assert_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    }
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(net->ctx, 3, &st), UVMRT_OK);
    cr_expect_eq(st.fault_count, 0, "the step with rejected calls faulted: the plan was dropped");
    uvmrt_summary_t s1 = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s1), UVMRT_OK);
    cr_expect_eq(s1.plans_built, s0.plans_built, "rejected calls caused a re-plan");
    still_usable(net);
    net_destroy(net);
}

/* The library reports misuse; it never exits or aborts (the test would crash). */
Test(errors, no_abort_on_any_misuse)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    uvmrt_layer_call_t c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    for (int round = 0; round < 3; round++) {
        (void)uvmrt_layer_end(ctx);
        (void)uvmrt_step_end(ctx);
        (void)uvmrt_layer_begin(ctx, &c);
        (void)uvmrt_step_begin(ctx);
        (void)uvmrt_step_begin(ctx);
        (void)uvmrt_layer_begin(ctx, &c);
        (void)uvmrt_layer_begin(ctx, &c);
        (void)uvmrt_step_end(ctx);
        (void)uvmrt_layer_end(ctx);
        (void)uvmrt_layer_end(ctx);
        (void)uvmrt_step_end(ctx);
    }
    still_usable(net);
    net_destroy(net);
}

/* ------------------------------------------------------------------ bounds */
/* flops that no duration can hold are refused by name, never converted
 * (float-cast-overflow); the step goes on. */
Test(errors, bad_flops_and_durations_rejected)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    cr_assert_eq(uvmrt_step_begin(net->ctx), UVMRT_OK);
    const double bad[] = {1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, -1.0, 1e300};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uvmrt_layer_call_t c = call_of(net, 0, UVMRT_PHASE_FORWARD);
        c.sim_duration_ns = 0;
        c.flops = bad[i];
        log_reset();
        cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID, "flops %g", bad[i]);
        cr_expect(log_contains("flops"), "flops %g: log names it:\n%s", bad[i], log_text());
        cr_expect_eq(net->ctx->sched.open_call, -1);
        cr_expect_eq(net->ctx->sched.cur.n_calls, 0);
    }
    uvmrt_layer_call_t c = call_of(net, 0, UVMRT_PHASE_FORWARD);
    c.sim_duration_ns = UINT64_MAX;
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    cr_expect(log_contains("sim_duration_ns"), "%s", log_text());
    c.sim_duration_ns = 0;
    /* flops that take 0.99e18 ns are fine alone; with 1.8e19 bytes at the profile's
     * HBM rate (under 300 GB/s here: over 1e16 ns) the call is over 1e18 ns */
    const uvmrt_profile_t *pr = uvmrt_context_profile(net->ctx);
    cr_assert(pr->hbm_bps > 0 && pr->hbm_bps < 1e12);
    c.flops = 0.99e18 * pr->flops / 1e9;
    c.hbm_bytes = UINT64_MAX;
    log_reset();
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_ERR_INVALID);
    cr_expect(log_contains("hbm_bytes"), "%s", log_text());
    cr_expect_eq(net->ctx->sched.open_call, -1);
    c.hbm_bytes = 1000000000ull;
    c.flops = 1e12; /* fine: a finite, representable duration */
    cr_expect_eq(uvmrt_layer_begin(net->ctx, &c), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_layer_end(net->ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(net->ctx), UVMRT_OK);
    still_usable(net);
    net_destroy(net);
}
