/*
 * test_sampling.c -- which steps collect the driver's counters (sampling.h):
 * the sampler on its own (fixed periods, the auto probe, the period it picks,
 * the average cost it keeps over long noisy runs), then end to end on the sim
 * backend, whose model charges the driver's tracing time per fault group
 * (profile fault_trace_ns) while its records are on, as CUPTI does on a GPU.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "sampling.h"

/* ------------------------------------------------------------------ the sampler alone */
Test(sampling, every_n_collects_multiples_of_n)
{
    uvmrt_sampler_t s;
    uvmrt__sampler_init(&s, 3, 0);
    for (uint64_t step = 0; step < 12; step++) {
        int want = uvmrt__sampler_want(&s, step);
        cr_expect_eq(want, step % 3 == 0, "step %llu", (unsigned long long)step);
        uvmrt__sampler_done(&s, step, want, 100);
    }
    cr_expect_eq(s.sampled, 4);
    cr_expect_eq(s.period, 3);
    cr_expect(s.overhead < 0, "a fixed period measures nothing");

    uvmrt__sampler_init(&s, 1, 0);
    for (uint64_t step = 0; step < 5; step++) cr_expect(uvmrt__sampler_want(&s, step));
}

/* Feeds steps whose duration is off_ns, or off_ns * (1 + cost) when collecting. */
static void feed(uvmrt_sampler_t *s, uint64_t first, uint64_t n, double cost, uint64_t off_ns, uint64_t *collected)
{
    for (uint64_t step = first; step < first + n; step++) {
        int want = uvmrt__sampler_want(s, step);
        if (want && collected) (*collected)++;
        uvmrt__sampler_done(s, step, want, want ? (uint64_t)((double)off_ns * (1.0 + cost)) : off_ns);
    }
}

Test(sampling, auto_probes_then_spaces_by_cost)
{
    uvmrt_sampler_t s;
    uvmrt__sampler_init(&s, 0, 0.01);
    /* step 0 (recorded) collects, 1 (warm-up) does not, 2 and 3 measure */
    int expect[4] = {1, 0, 1, 0};
    for (uint64_t step = 0; step < 4; step++) {
        int want = uvmrt__sampler_want(&s, step);
        cr_expect_eq(want, expect[step], "step %llu", (unsigned long long)step);
        uvmrt__sampler_done(&s, step, want, want ? 1400 : 1000);
    }
    /* 40% per collecting step at a 1% cap: every 40th step */
    cr_expect_float_eq(s.overhead, 0.40, 1e-9);
    cr_expect_eq(s.period, 40);
    for (uint64_t step = 4; step < 42; step++)
        cr_expect_not(uvmrt__sampler_want(&s, step), "step %llu", (unsigned long long)step);
    cr_expect(uvmrt__sampler_want(&s, 42));
}

Test(sampling, auto_cheap_counters_every_other_step)
{
    uvmrt_sampler_t s;
    uvmrt__sampler_init(&s, 0, 0.01);
    feed(&s, 0, 4, 0.004, 1000000, NULL);
    cr_expect_eq(s.period, 2);
    /* collecting steps that happen to be faster: no negative cost */
    uvmrt__sampler_init(&s, 0, 0.01);
    feed(&s, 0, 4, -0.05, 1000000, NULL);
    cr_expect_eq(s.period, 2);
    cr_expect_float_eq(s.overhead, 0.0, 1e-12);
}

Test(sampling, auto_period_is_capped)
{
    uvmrt_sampler_t s;
    uvmrt__sampler_init(&s, 0, 0.01);
    feed(&s, 0, 4, 99.0, 1000, NULL);
    cr_expect_eq(s.period, UVMRT_SAMPLER_MAX_PERIOD);
}

/* Long runs with noisy step times: the average cost of collecting stays near the
 * cap whatever the per-step cost, and steps keep being collected. */
Test(sampling, auto_average_cost_stays_near_cap)
{
    const double costs[] = {0.02, 0.1, 0.4, 1.5};
    for (size_t c = 0; c < sizeof costs / sizeof costs[0]; c++) {
        uvmrt_sampler_t s;
        uvmrt__sampler_init(&s, 0, 0.01);
        uint64_t rng = 0x9e3779b97f4a7c15ull + c;
        double paid = 0, base = 0;
        uint64_t collected = 0, steps = 4000;
        for (uint64_t step = 0; step < steps; step++) {
            /* +-10% noise on every step */
            double off = 1e6 * (0.9 + 0.2 * (double)(xorshift64(&rng) % 1000) / 1000.0);
            int want = uvmrt__sampler_want(&s, step);
            double t = want ? off * (1.0 + costs[c]) : off;
            uvmrt__sampler_done(&s, step, want, (uint64_t)t);
            collected += want;
            if (step >= 2) {
                paid += t;
                base += off;
            }
        }
        double overhead = paid / base - 1.0;
        cr_expect_leq(overhead, 0.015, "cost %.2f per step: average %.4f", costs[c], overhead);
        cr_expect_geq(collected, steps / (uint64_t)(costs[c] / 0.01 * 1.6 + 2), "cost %.2f: only %llu collected",
                      costs[c], (unsigned long long)collected);
    }
}

/* ------------------------------------------------------------------ end to end on sim */
typedef struct run {
    uvmrt_summary_t sum;
    uvmrt_step_stats_t steps[64];
    uint64_t calls, sampled_calls, layer_gpu_faults;
} run_t;

/* The default net at a budget under its footprint; fault_sample_every as given
 * (fault_stats 0: off). consumer-8g charges 40 us per traced fault group. */
static void run_net(run_t *r, uvmrt_policy_t policy, int fault_stats, int every, int steps)
{
    uvmrt_params_t p;
    sim_params(&p, policy, 16 * MIB, NULL);
    p.fault_stats = fault_stats;
    p.fault_sample_every = every;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, steps, NULL, NULL);
    memset(r, 0, sizeof *r);
    r->sum.struct_size = sizeof r->sum;
    cr_assert_eq(uvmrt_summary_get(ctx, &r->sum), UVMRT_OK);
    for (int i = 0; i < steps && i < 64; i++) {
        r->steps[i].struct_size = sizeof r->steps[i];
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)i, &r->steps[i]), UVMRT_OK);
    }
    for (int l = 0; l < uvmrt_layer_count(ctx); l++)
        for (int ph = 0; ph < UVMRT_PHASE_COUNT; ph++) {
            uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
            cr_assert_eq(uvmrt_layer_stats_get(ctx, l, (uvmrt_phase_t)ph, &ls), UVMRT_OK);
            r->calls += ls.calls;
            r->sampled_calls += ls.sampled_calls;
            r->layer_gpu_faults += ls.gpu_faults;
        }
    net_destroy(net);
}

static uint64_t mean_step_ns(const run_t *r, int from, int to)
{
    uint64_t sum = 0;
    for (int i = from; i < to; i++) sum += r->steps[i].step_ns;
    return sum / (uint64_t)(to - from);
}

Test(sampling, sim_demand_auto_collects_few_steps_and_only_those)
{
    run_t r;
    run_net(&r, UVMRT_POLICY_DEMAND, 1, 0, 60);
    cr_expect_str_eq(r.sum.fault_stats_source, "sim");
    cr_expect_eq(r.sum.fault_sample_every, 0);
    cr_expect_gt(r.sum.fault_sample_period, 2, "demand faults every step: collecting must be spaced out");
    cr_expect_gt(r.sum.fault_sample_overhead, 0.05, "the model charges fault tracing: %f", r.sum.fault_sample_overhead);
    uint64_t sampled = 0, sampled_calls = 0;
    int calls_per_step = 3 * net_spec_default().layers;
    for (int i = 0; i < 60; i++) {
        if (r.steps[i].fault_sampled) {
            sampled++;
            sampled_calls += (uint64_t)calls_per_step;
            cr_expect_gt(r.steps[i].gpu_faults, 0, "collected step %d saw no faults", i);
            cr_expect_eq(r.steps[i].gpu_faults, r.steps[i].fault_count, "step %d: model vs runtime", i);
        } else {
            cr_expect_eq(r.steps[i].gpu_faults, 0, "step %d did not collect, yet has %llu faults", i,
                         (unsigned long long)r.steps[i].gpu_faults);
            cr_expect_eq(r.steps[i].fault_htod_bytes, 0);
        }
    }
    cr_expect(r.steps[0].fault_sampled && !r.steps[1].fault_sampled && r.steps[2].fault_sampled);
    cr_expect_eq(sampled, r.sum.fault_sampled_steps);
    cr_expect_lt(sampled, 15, "%llu of 60 steps collected", (unsigned long long)sampled);
    cr_expect_eq(r.sampled_calls, sampled_calls);
    cr_expect_eq(r.layer_gpu_faults, r.sum.gpu_faults);

    /* what the user pays: steps 2..59 against the same run with counters off */
    run_t off;
    run_net(&off, UVMRT_POLICY_DEMAND, 0, 0, 60);
    cr_expect_eq(off.sum.fault_sampled_steps, 0);
    double with = (double)mean_step_ns(&r, 2, 60), without = (double)mean_step_ns(&off, 2, 60);
    run_t all;
    run_net(&all, UVMRT_POLICY_DEMAND, 1, 1, 60);
    double every = (double)mean_step_ns(&all, 2, 60);
    cr_expect_gt(every / without - 1.0, 0.05, "collecting every step costs %.3f", every / without - 1.0);
    cr_expect_leq(with / without - 1.0, 0.03, "auto costs %.4f (every step: %.4f)", with / without - 1.0,
                  every / without - 1.0);
    cr_expect_eq(all.sum.fault_sampled_steps, 60);
    cr_expect_eq(all.sum.gpu_faults, all.sum.fault_count);
}

Test(sampling, sim_prefetch_auto_every_other_step_no_steady_faults)
{
    run_t r;
    run_net(&r, UVMRT_POLICY_PREFETCH, 1, 0, 12);
    cr_expect_eq(r.sum.fault_sample_period, 2);
    for (int i = 2; i < 12; i++) {
        cr_expect_eq(r.steps[i].fault_sampled, i % 2 == 0, "step %d", i);
        cr_expect_eq(r.steps[i].gpu_faults, 0, "step %d: %llu faults", i, (unsigned long long)r.steps[i].gpu_faults);
        if (r.steps[i].fault_sampled) cr_expect_gt(r.steps[i].prefetch_htod_bytes, 0, "step %d", i);
        else cr_expect_eq(r.steps[i].prefetch_htod_bytes, 0, "step %d", i);
    }
}

Test(sampling, sim_collected_steps_report_what_every_step_collection_reports)
{
    /* A collected steady-state step reports the same driver counters whether
     * its neighbours collect or not: a step's tail (copies still running at its
     * end) is flushed and given to it when the next step does not collect, as
     * the next step's attribution would. (The last step's tail arrives only at
     * destroy, so it is left out.) */
    run_t some, all;
    run_net(&some, UVMRT_POLICY_PREFETCH, 1, 3, 13);
    run_net(&all, UVMRT_POLICY_PREFETCH, 1, 1, 13);
    int checked = 0;
    for (int i = 0; i < 13; i++) {
        cr_expect_eq(some.steps[i].fault_sampled, i % 3 == 0, "step %d", i);
        cr_expect(all.steps[i].fault_sampled);
        if (!some.steps[i].fault_sampled) {
            cr_expect_eq(some.steps[i].prefetch_htod_bytes, 0, "step %d", i);
            continue;
        }
        if (i < 3 || i == 12) continue;
        cr_expect_gt(some.steps[i].prefetch_htod_bytes, 0, "step %d", i);
        cr_expect_eq(some.steps[i].prefetch_htod_bytes, all.steps[i].prefetch_htod_bytes, "step %d: %llu vs %llu", i,
                     (unsigned long long)some.steps[i].prefetch_htod_bytes,
                     (unsigned long long)all.steps[i].prefetch_htod_bytes);
        cr_expect_eq(some.steps[i].gpu_faults, all.steps[i].gpu_faults, "step %d", i);
        cr_expect_eq(some.steps[i].evict_dtoh_bytes, all.steps[i].evict_dtoh_bytes, "step %d", i);
        checked++;
    }
    cr_expect_eq(checked, 3);
    cr_expect_eq(some.sum.unattributed_records, 0);
}

/* ------------------------------------------------------------------ settings and reports */
Test(sampling, env_values)
{
    env_clear_uvmrt();
    const char *good[] = {"auto", "1", "20", "1000000"};
    const int every[] = {0, 1, 20, 1000000};
    for (size_t i = 0; i < 4; i++) {
        setenv("UVMRT_FAULT_SAMPLE", good[i], 1);
        uvmrt_params_t p;
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.ignore_env = 0;
        uvmrt_context_t *ctx = NULL;
        cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "'%s': %s", good[i], log_text());
        uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
        uvmrt_summary_get(ctx, &s);
        cr_expect_eq(s.fault_sample_every, every[i], "'%s'", good[i]);
        uvmrt_context_destroy(ctx);
    }
    const char *bad[] = {"0", "-3", "x", "1000001", "", "5x", "every"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        log_reset();
        setenv("UVMRT_FAULT_SAMPLE", bad[i], 1);
        uvmrt_params_t p;
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.ignore_env = 0;
        uvmrt_context_t *ctx = NULL;
        cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG, "'%s' accepted", bad[i]);
        char want[64];
        snprintf(want, sizeof want, "UVMRT_FAULT_SAMPLE='%s'", bad[i]);
        cr_expect(log_contains(want), "%s", log_text());
        cr_expect(log_contains("auto or a step period"), "%s", log_text());
    }
    unsetenv("UVMRT_FAULT_SAMPLE");
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.fault_sample_every = -1;
    uvmrt_context_t *ctx = NULL;
    log_reset();
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_INVALID);
    cr_expect(log_contains("params.fault_sample_every = -1"), "%s", log_text());
}

Test(sampling, reports_say_which_steps_collected)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.fault_sample_every = 2;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 5, NULL, NULL);
    char json_path[] = "/tmp/uvmrt-sampling-XXXXXX", csv_path[] = "/tmp/uvmrt-sampling-XXXXXX",
         text_path[] = "/tmp/uvmrt-sampling-XXXXXX";
    cr_assert_neq(mkstemp(json_path), -1);
    cr_assert_neq(mkstemp(csv_path), -1);
    cr_assert_neq(mkstemp(text_path), -1);
    cr_assert_eq(uvmrt_report_write(ctx, "json", json_path), UVMRT_OK);
    cr_assert_eq(uvmrt_report_write(ctx, "csv", csv_path), UVMRT_OK);
    cr_assert_eq(uvmrt_report_write(ctx, "text", text_path), UVMRT_OK);

    json_error_t err;
    json_t *root = json_load_file(json_path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *fs = json_object_get(root, "fault_sampling");
    cr_assert(json_is_object(fs));
    cr_expect_eq(json_integer_value(json_object_get(fs, "every")), 2);
    cr_expect_eq(json_integer_value(json_object_get(fs, "sampled_steps")), 3);
    cr_expect(json_is_null(json_object_get(fs, "overhead")));
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 5);
    for (size_t i = 0; i < 5; i++)
        cr_expect_eq(json_is_true(json_object_get(json_array_get(steps, i), "fault_sampled")), i % 2 == 0, "step %zu", i);
    json_t *l0 = json_object_get(json_array_get(json_object_get(root, "layers"), 0), "forward");
    cr_expect_eq(json_integer_value(json_object_get(l0, "calls")), 5);
    cr_expect_eq(json_integer_value(json_object_get(l0, "sampled_calls")), 3);
    json_decref(root);

    /* csv: fault_sampled, 0/1 by step, before the last column (plan_host_bytes) */
    char *csv = file_slurp(csv_path);
    char *line = strtok(csv, "\n");
    cr_assert(strstr(line, ",step_ns,fault_sampled,plan_host_bytes") != NULL, "%s", line);
    int rows = 0;
    while ((line = strtok(NULL, "\n")) != NULL) {
        int step = atoi(strchr(strchr(strchr(line, ',') + 1, ',') + 1, ',') + 1);
        char *comma = strrchr(line, ',');
        *comma = '\0';
        const char *last = strrchr(line, ',') + 1;
        cr_expect_eq(atoi(last), (step - 1) % 2 == 0, "steps from 1: 1, 3, 5 collect: %s", line);
        rows++;
    }
    cr_expect_gt(rows, 0);
    free(csv);

    char *text = file_slurp(text_path);
    cr_expect(strstr(text, "driver's counters from 3 of 5 steps (every 2)") != NULL, "%s", text);
    free(text);
    unlink(json_path);
    unlink(csv_path);
    unlink(text_path);
    net_destroy(net);
}
