/*
 * test_hostwork.c -- the CPU work's measured time: uvmrt_layer_call_t.host_ns on sim
 * (the work takes exactly that long, contention or not), uvmrt_host_work_measured
 * (bad arguments change nothing), and a review that re-plans with what the CPU
 * measured: the model thought the CPU fast, the trainer measured it slow, and the
 * re-plan moves the optimizer back to the GPU and predicts the measured step.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "helpers.h"

#define NL 4
#define MS 1000000ull
#define HOST_BYTES 1000000000ull /* 1 GB of CPU work: ~12 ms alone at the h200 profile */

static const uvmrt_stream_t GPU = (uvmrt_stream_t)0x10, CPU = (uvmrt_stream_t)0x20;

/* One call of duration ns on the GPU stream, or CPU work of HOST_BYTES (host_ns: its
 * given time, 0: the model's) on the CPU stream after the GPU's work. */
static uvmrt_status_t call(uvmrt_context_t *ctx, int l, uvmrt_phase_t ph, uint64_t ns, int on_cpu, uint64_t host_ns)
{
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, l, ph, on_cpu ? CPU : GPU);
    if (on_cpu) {
        c.no_default_uses = 1;
        c.host_bytes = HOST_BYTES;
        c.host_ns = host_ns;
        c.after = GPU;
    } else {
        c.sim_duration_ns = ns;
    }
    uvmrt_status_t st = uvmrt_layer_begin(ctx, &c);
    return st == UVMRT_OK ? uvmrt_layer_end(ctx) : st;
}

static uint64_t one_step_ns(uint64_t host_ns)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(layers_add(ctx, 1), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(call(ctx, 0, UVMRT_PHASE_BACKWARD, 1 * MS, 0, 0), UVMRT_OK);
    cr_assert_eq(call(ctx, 0, UVMRT_PHASE_OPTIMIZER, 0, 1, host_ns), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 0, &st), UVMRT_OK);
    uvmrt_context_destroy(ctx);
    return st.step_ns;
}

Test(hostwork, sim_takes_a_given_host_ns_as_is)
{
    const uvmrt_profile_t *h200 = uvmrt_profile_find("h200");
    cr_assert_not_null(h200);
    uint64_t model = one_step_ns(0), given = one_step_ns(50 * MS);
    double alone = (double)HOST_BYTES / h200->host_mem_bps * 1e9;
    /* after the 1 ms backward: the model's time alone, or exactly the given 50 ms */
    cr_assert(model >= 1 * MS + (uint64_t)alone && model < 1 * MS + (uint64_t)alone + MS / 10, "model %llu",
              (unsigned long long)model);
    cr_assert(given >= 51 * MS && given < 51 * MS + MS / 10, "given %llu", (unsigned long long)given);
    /* a bad host_ns is refused, naming it */
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(layers_add(ctx, 1), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(call(ctx, 0, UVMRT_PHASE_OPTIMIZER, 0, 1, (uint64_t)2e18), UVMRT_ERR_INVALID);
    cr_assert(log_contains("host_ns 2000000000000000000"), "%s", log_text());
    cr_assert_eq(call(ctx, 0, UVMRT_PHASE_OPTIMIZER, 0, 1, 5 * MS), UVMRT_OK); /* nothing was left open */
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

Test(hostwork, bad_measurements_are_refused_naming_the_value)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(uvmrt_host_work_measured(NULL, 0, UVMRT_PHASE_OPTIMIZER, MS), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_host_work_measured(ctx, 0, UVMRT_PHASE_OPTIMIZER, MS), UVMRT_ERR_INVALID);
    cr_assert(log_contains("layer 0: expected a declared layer"), "%s", log_text());
    cr_assert_eq(layers_add(ctx, 2), UVMRT_OK);
    cr_assert_eq(uvmrt_host_work_measured(ctx, 2, UVMRT_PHASE_OPTIMIZER, MS), UVMRT_ERR_INVALID);
    cr_assert(log_contains("layer 2: expected a declared layer, 0 to 1"));
    cr_assert_eq(uvmrt_host_work_measured(ctx, -1, UVMRT_PHASE_OPTIMIZER, MS), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_host_work_measured(ctx, 1, (uvmrt_phase_t)7, MS), UVMRT_ERR_INVALID);
    cr_assert(log_contains("phase 7"));
    cr_assert_eq(uvmrt_host_work_measured(ctx, 1, UVMRT_PHASE_OPTIMIZER, 0), UVMRT_ERR_INVALID);
    cr_assert(log_contains("ns 0: expected 1 to 1e18"));
    cr_assert_eq(uvmrt_host_work_measured(ctx, 1, UVMRT_PHASE_OPTIMIZER, (uint64_t)2e18), UVMRT_ERR_INVALID);
    /* none of those set anything; a good one does */
    for (int l = 0; l < 2; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) cr_assert_eq(ctx->tensors.layers[l].host_measured_ns[p], 0);
    cr_assert_eq(uvmrt_host_work_measured(ctx, 1, UVMRT_PHASE_OPTIMIZER, 7 * MS), UVMRT_OK);
    cr_assert_eq(ctx->tensors.layers[1].host_measured_ns[UVMRT_PHASE_OPTIMIZER], 7 * MS);
    uvmrt_context_destroy(ctx);
}

/* A trainer with one knob: where the optimizer runs (0: the GPU, 20 ms per layer;
 * 1: the CPU, beside the GPU's next backward). real_host_ns > 0: the real run's CPU
 * takes that long per layer (declared as host_ns on sim, as a real CPU would), and
 * with report the trainer tells the runtime after each step. */
typedef struct placement {
    uint64_t real_host_ns;
} placement_t;

static uvmrt_status_t placement_steps(uvmrt_context_t *ctx, int on_cpu, int steps, uint64_t real_host_ns, int report)
{
    uvmrt_status_t st = UVMRT_OK;
    for (int s = 0; s < steps && st == UVMRT_OK; s++) {
        st = uvmrt_step_begin(ctx);
        for (int l = 0; l < NL && st == UVMRT_OK; l++) st = call(ctx, l, UVMRT_PHASE_FORWARD, 2 * MS, 0, 0);
        for (int l = NL - 1; l >= 0 && st == UVMRT_OK; l--) {
            st = call(ctx, l, UVMRT_PHASE_BACKWARD, 4 * MS, 0, 0);
            if (st == UVMRT_OK) st = call(ctx, l, UVMRT_PHASE_OPTIMIZER, 20 * MS, on_cpu, real_host_ns);
        }
        if (st == UVMRT_OK) st = uvmrt_step_end(ctx);
        for (int l = 0; l < NL && st == UVMRT_OK && on_cpu && real_host_ns > 0 && report; l++)
            st = uvmrt_host_work_measured(ctx, l, UVMRT_PHASE_OPTIMIZER, real_host_ns);
    }
    return st;
}

static uvmrt_status_t placement_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)user;
    uvmrt_status_t st = layers_add(model, NL);
    return st == UVMRT_OK ? placement_steps(model, values[0], steps, 0, 0) : st;
}

/* A context that chose where the optimizer runs, its layers declared for the real run. */
static uvmrt_context_t *placement_chosen(uvmrt_choice_t *c)
{
    static const int where[] = {0, 1};
    uvmrt_knob_t k = {"optimizer_on_cpu", 2, where};
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, placement_rehearse, NULL, c), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c->values[0], 1, "the model's CPU (~12 ms per layer beside the GPU) beats 20 ms on the GPU");
    cr_assert_eq(layers_add(ctx, NL), UVMRT_OK);
    return ctx;
}

Test(hostwork, review_replans_with_the_measured_cpu_time)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    uvmrt_context_t *ctx = placement_chosen(&c);
    /* the real CPU takes 60 ms per layer: the step is its chain of four */
    cr_assert_eq(placement_steps(ctx, 1, 4, 60 * MS, 1), UVMRT_OK, "%s", log_text());
    int changed = -1;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c.replanned, 1);
    cr_assert(c.measured_step_ns > 1.5 * c.first_predicted_step_ns, "measured %.0f, predicted %.0f",
              c.measured_step_ns, c.first_predicted_step_ns);
    cr_assert_eq(changed, 1);
    cr_assert_eq(c.values[0], 0, "with the CPU measured at 60 ms per layer the GPU's 20 ms wins");
    /* the re-plan's prediction of the values that ran is the measured step */
    double again = candidate_ns(ctx, 1);
    double err = again / c.measured_step_ns - 1.0;
    cr_assert(err < 0.02 && err > -0.02, "CPU placement: predicted again %.0f, measured %.0f", again,
              c.measured_step_ns);
    uvmrt_context_destroy(ctx);
}

Test(hostwork, review_without_measurements_keeps_the_models_cpu)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    uvmrt_context_t *ctx = placement_chosen(&c);
    /* the same slow CPU, but the trainer reports nothing: the review sees the step
     * slower than predicted, yet its re-plan has only the GPU's measurements, which
     * match the model, so the choice stays */
    cr_assert_eq(placement_steps(ctx, 1, 4, 60 * MS, 0), UVMRT_OK, "%s", log_text());
    int changed = -1;
    cr_assert_eq(uvmrt_choice_review(ctx, &c, &changed), UVMRT_OK, "%s", log_text());
    cr_assert_eq(c.replanned, 1);
    cr_assert_eq(changed, 0);
    cr_assert_eq(c.values[0], 1);
    uvmrt_context_destroy(ctx);
}

/* A trainer's CPU thread updates layer by layer while the GPU goes on: a forward
 * ordered after the CPU stream waits for its own layer's update (the layer's latest CPU
 * call there), not for the CPU's later layers, and CPU work that later calls wait for
 * does not hold the step's end. Two layers, 1 ms per GPU call, 10 ms per CPU update:
 * step 1 ends with the GPU (4 ms); in step 2 layer 0's forward waits for its update
 * (10 ms after step 1's GPU work), layer 1's for its own (10 ms more), then the
 * backward: 23 ms. Waiting for all the CPU's work would make it 24 ms. */
Test(hostwork, a_forward_waits_for_its_own_layers_cpu_update_only)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 2 * GIB, "h200");
    cr_assert_eq(layers_add(ctx, 2), UVMRT_OK);
    for (int step = 0; step < 2; step++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        for (int l = 0; l < 2; l++) {
            uvmrt_layer_call_t c;
            uvmrt_layer_call_init(&c, l, UVMRT_PHASE_FORWARD, GPU);
            c.sim_duration_ns = 1 * MS;
            c.after = CPU;
            cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
            cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        }
        for (int l = 1; l >= 0; l--) cr_assert_eq(call(ctx, l, UVMRT_PHASE_BACKWARD, 1 * MS, 0, 0), UVMRT_OK);
        for (int l = 0; l < 2; l++)
            cr_assert_eq(call(ctx, l, UVMRT_PHASE_OPTIMIZER, 0, 1, 10 * MS), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
    uvmrt_step_stats_t s1 = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), s2 = s1;
    cr_assert_eq(uvmrt_step_stats_get(ctx, 0, &s1), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 1, &s2), UVMRT_OK);
    cr_expect(s1.step_ns > 4 * MS - MS / 10 && s1.step_ns < 4 * MS + MS / 10, "step 1: %llu ns, expected 4 ms",
              (unsigned long long)s1.step_ns);
    cr_expect(s2.step_ns > 23 * MS - MS / 10 && s2.step_ns < 23 * MS + MS / 10, "step 2: %llu ns, expected 23 ms",
              (unsigned long long)s2.step_ns);
    uvmrt_context_destroy(ctx);
}
