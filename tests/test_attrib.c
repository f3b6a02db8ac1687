/*
 * test_attrib.c -- attribution of unified-memory records (attrib.c) from
 * synthetic record streams: addresses inside, between and outside arenas;
 * records straddling a layer boundary; out-of-order buffers; the unattributed
 * bucket; and the sim backend end to end (same report shape as CUPTI).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "attrib.h"
#include "helpers.h"

/* Two arenas: [0x10000, 0x30000) with tensors 0 [0x10000,0x20000) and 1
 * [0x24000,0x30000) (a gap between them), and [0x100000, 0x140000) = tensor 2. */
static uvmrt_attrib_index_t index_fixture(void)
{
    uvmrt_attrib_index_t ix;
    memset(&ix, 0, sizeof ix);
    /* added out of order on purpose */
    cr_assert_eq(uvmrt__attrib_index_add(&ix, 0x100000, 0x140000, 2), 0);
    cr_assert_eq(uvmrt__attrib_index_add(&ix, 0x24000, 0x30000, 1), 0);
    cr_assert_eq(uvmrt__attrib_index_add(&ix, 0x10000, 0x20000, 0), 0);
    uvmrt__attrib_index_sort(&ix);
    return ix;
}

static uvmrt_um_record_t rec(uint32_t kind, uint32_t cause, uint64_t addr, uint64_t value, uint64_t t0, uint64_t t1)
{
    return (uvmrt_um_record_t){t0, t1, addr, value, kind, cause};
}

Test(attrib, address_inside_between_outside)
{
    uvmrt_attrib_index_t ix = index_fixture();
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x10000), 0);      /* first byte */
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x1ffff), 0);      /* last byte */
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x20000), -1);     /* between tensors of one arena */
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x23fff), -1);
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x24000), 1);
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x30000), -1);     /* between arenas */
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x120000), 2);
    cr_expect_eq(uvmrt__attrib_find(&ix, 0xffff), -1);      /* below everything */
    cr_expect_eq(uvmrt__attrib_find(&ix, 0x140000), -1);    /* past the end */
    cr_expect_eq(uvmrt__attrib_find(&ix, UINT64_MAX), -1);
    uvmrt__attrib_index_free(&ix);
}

Test(attrib, classify_by_kind_and_cause)
{
    uvmrt_fcount_t c;
    memset(&c, 0, sizeof c);
    uvmrt_um_record_t r[] = {
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_USER, 0, 100, 0, 0),
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_COHERENCE, 0, 10, 0, 0),
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_PREFETCH, 0, 7, 0, 0),
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_ACCESS_COUNTERS, 0, 1, 0, 0),
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_UNKNOWN, 0, 2, 0, 0),
        rec(UVMRT_UM_DTOH, UVMRT_UM_CAUSE_EVICTION, 0, 30, 0, 0),
        rec(UVMRT_UM_DTOH, UVMRT_UM_CAUSE_USER, 0, 40, 0, 0),
        rec(UVMRT_UM_GPU_FAULT, 0, 0, 5, 0, 0),
        rec(UVMRT_UM_CPU_FAULT, 0, 0, 0x7f001234, 0, 0), /* a PC, not a count */
        rec(UVMRT_UM_CPU_FAULT, 0, 0, 0x7f005678, 0, 0),
        rec(UVMRT_UM_THRASHING, 0, 0, 1, 0, 0),
        rec(UVMRT_UM_THROTTLING, 0, 0, 1, 0, 0),
        rec(UVMRT_UM_REMOTE_MAP, 0, 0, 1, 0, 0),
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) uvmrt__attrib_classify(&r[i], &c);
    cr_expect_eq(c.v[FC_PREFETCH_HTOD], 100);
    cr_expect_eq(c.v[FC_FAULT_HTOD], 12);
    cr_expect_eq(c.v[FC_DRIVER_PREFETCH_HTOD], 8);
    cr_expect_eq(c.v[FC_EVICT_DTOH], 70);
    cr_expect_eq(c.v[FC_GPU_FAULTS], 5);
    cr_expect_eq(c.v[FC_CPU_FAULTS], 2);
    cr_expect_eq(c.v[FC_THRASHING], 1);
    cr_expect_eq(c.v[FC_THROTTLING], 1);
    cr_expect_eq(c.v[FC_REMOTE_MAP], 1);
}

/* Spans: call 0 [100, 200), call 1 [200, 300), call 2 [350, 400). */
static const uvmrt_attrib_span_t SPANS[3] = {{100, 200}, {200, 300}, {350, 400}};

Test(attrib, time_to_span)
{
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 0), 0);   /* before the first: first */
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 100), 0);
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 199), 0);
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 200), 1); /* a boundary belongs to the next call */
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 320), 1); /* in a gap: the call that began last */
    cr_expect_eq(uvmrt__attrib_span_of(SPANS, 3, 999), 2);
}

Test(attrib, straddling_record_goes_whole_to_its_start)
{
    uvmrt_attrib_index_t ix = index_fixture();
    uvmrt_um_record_t r[] = {rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_COHERENCE, 0x10000, 4096, 190, 260)};
    uvmrt_fcount_t per[3];
    memset(per, 0, sizeof per);
    uvmrt_attrib_unattributed_t un;
    memset(&un, 0, sizeof un);
    cr_expect_eq(uvmrt__attrib_run(&ix, SPANS, 3, r, 1, UINT64_MAX, per, &un), 0);
    cr_expect_eq(per[0].v[FC_FAULT_HTOD], 4096);
    cr_expect_eq(per[1].v[FC_FAULT_HTOD], 0);
    cr_expect_eq(un.records, 0);
    uvmrt__attrib_index_free(&ix);
}

Test(attrib, out_of_order_buffers_and_horizon)
{
    uvmrt_attrib_index_t ix = index_fixture();
    /* two "buffers" concatenated, the second holding earlier records */
    uvmrt_um_record_t r[] = {
        rec(UVMRT_UM_GPU_FAULT, 0, 0x24000, 3, 360, 360),  /* call 2 */
        rec(UVMRT_UM_GPU_FAULT, 0, 0x100000, 1, 450, 450), /* past the horizon: kept */
        rec(UVMRT_UM_GPU_FAULT, 0, 0x10000, 2, 150, 150),  /* call 0 */
        rec(UVMRT_UM_GPU_FAULT, 0, 0x10000, 4, 210, 210),  /* call 1 */
    };
    uvmrt_fcount_t per[3];
    memset(per, 0, sizeof per);
    uvmrt_attrib_unattributed_t un;
    memset(&un, 0, sizeof un);
    size_t left = uvmrt__attrib_run(&ix, SPANS, 3, r, 4, 420, per, &un);
    cr_expect_eq(per[0].v[FC_GPU_FAULTS], 2);
    cr_expect_eq(per[1].v[FC_GPU_FAULTS], 4);
    cr_expect_eq(per[2].v[FC_GPU_FAULTS], 3);
    cr_assert_eq(left, 1);
    cr_expect_eq(r[0].start, 450);
    cr_expect_eq(r[0].value, 1);
    /* next round: the kept record goes to the first span of the next step */
    const uvmrt_attrib_span_t next[1] = {{500, 600}};
    uvmrt_fcount_t per2[1];
    memset(per2, 0, sizeof per2);
    cr_expect_eq(uvmrt__attrib_run(&ix, next, 1, r, left, UINT64_MAX, per2, &un), 0);
    cr_expect_eq(per2[0].v[FC_GPU_FAULTS], 1);
    uvmrt__attrib_index_free(&ix);
}

Test(attrib, unattributed_bucket)
{
    uvmrt_attrib_index_t ix = index_fixture();
    uvmrt_um_record_t r[] = {
        rec(UVMRT_UM_HTOD, UVMRT_UM_CAUSE_COHERENCE, 0x20000, 100, 150, 160), /* gap inside an arena */
        rec(UVMRT_UM_DTOH, UVMRT_UM_CAUSE_EVICTION, 0x90000000, 200, 150, 160), /* not ours */
        rec(UVMRT_UM_CPU_FAULT, 0, 0x5000, 0x400000, 210, 210),
        rec(UVMRT_UM_GPU_FAULT, 0, 0x10000, 9, 150, 150), /* ours */
    };
    uvmrt_fcount_t per[3];
    memset(per, 0, sizeof per);
    uvmrt_attrib_unattributed_t un;
    memset(&un, 0, sizeof un);
    cr_expect_eq(uvmrt__attrib_run(&ix, SPANS, 3, r, 4, UINT64_MAX, per, &un), 0);
    cr_expect_eq(un.records, 3);
    cr_expect_eq(un.c.v[FC_FAULT_HTOD], 100);
    cr_expect_eq(un.c.v[FC_EVICT_DTOH], 200);
    cr_expect_eq(un.c.v[FC_CPU_FAULTS], 1);
    cr_expect_eq(per[0].v[FC_GPU_FAULTS], 9);
    /* with no spans at all (outside any step) even our records are unattributed */
    uvmrt_um_record_t r2[] = {rec(UVMRT_UM_GPU_FAULT, 0, 0x10000, 9, 150, 150)};
    cr_expect_eq(uvmrt__attrib_run(&ix, SPANS, 0, r2, 1, UINT64_MAX, per, &un), 0);
    cr_expect_eq(un.records, 4);
    cr_expect_eq(un.c.v[FC_GPU_FAULTS], 9);
    uvmrt__attrib_index_free(&ix);
}

/* ------------------------------------------------------------------ the sim source end to end */
static uvmrt_summary_t run_net(uvmrt_policy_t policy, uint64_t budget, int fault_stats, int steps)
{
    uvmrt_params_t p;
    sim_params(&p, policy, budget, NULL);
    p.fault_stats = fault_stats;
    p.fault_sample_every = 1; /* every step: the model's counts against the runtime's */
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, steps, NULL, NULL);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    /* per layer stats sum to the summary; per step stats sum to the layers */
    uint64_t gpu = 0, steps_gpu = 0;
    for (int l = 0; l < uvmrt_layer_count(ctx); l++)
        for (int ph = 0; ph < UVMRT_PHASE_COUNT; ph++) {
            uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
            cr_assert_eq(uvmrt_layer_stats_get(ctx, l, (uvmrt_phase_t)ph, &ls), UVMRT_OK);
            gpu += ls.gpu_faults;
        }
    for (int i = 0; i < steps; i++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)i, &st), UVMRT_OK);
        steps_gpu += st.gpu_faults;
    }
    cr_expect_eq(gpu, s.gpu_faults);
    cr_expect_eq(steps_gpu, s.gpu_faults);
    net_destroy(net);
    return s;
}

Test(attrib, sim_source_demand_faults)
{
    uvmrt_summary_t s = run_net(UVMRT_POLICY_DEMAND, 16 * MIB, 1, 3);
    cr_expect_str_eq(s.fault_stats_source, "sim");
    cr_expect_gt(s.gpu_faults, 0);
    cr_expect_gt(s.fault_htod_bytes, 0);
    /* the model's fault groups are the runtime's fault count */
    cr_expect_eq(s.gpu_faults, s.fault_count);
    cr_expect_eq(s.unattributed_records, 0);
}

Test(attrib, sim_source_prefetch_steady_state)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.fault_sample_every = 1;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 4, NULL, NULL);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 3, &st), UVMRT_OK);
    cr_expect_eq(st.gpu_faults, 0, "steady state faults: %llu", (unsigned long long)st.gpu_faults);
    cr_expect_gt(st.prefetch_htod_bytes, 0);
    net_destroy(net);
}

Test(attrib, fault_stats_off_says_none)
{
    uvmrt_summary_t s = run_net(UVMRT_POLICY_DEMAND, 16 * MIB, 0, 2);
    cr_expect_str_eq(s.fault_stats_source, "none");
    cr_expect_eq(s.gpu_faults, 0);
    cr_expect_eq(s.unattributed_records, 0);
    cr_expect_gt(s.fault_count, 0); /* the runtime's own statistics go on */
}
