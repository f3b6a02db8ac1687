/*
 * test_sim.c -- the sim backend's host-memory model: CPU work (a layer call's
 * host_bytes) and link transfers that overlap in model time share host memory.
 *
 * A small profile with round numbers makes every time predictable: migrations
 * to the GPU at 40 GB/s, remote reads at 40, the CPU alone at 60 GB/s of host
 * memory, 80 GB/s in all when both run (and no per-call costs).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "helpers.h"
#include "profile_file.h"
#include "work.h"

#define LINK 40e9
#define CPU 60e9
#define SHARED 80e9

static uvmrt_profile_t test_profile(int shared)
{
    uvmrt_profile_t p = {
        .struct_size = sizeof(uvmrt_profile_t), .name = "hm-test", .description = "host-memory test (estimate)", .memory_bytes = 64 * GIB,
        .prefetch_h2d_bps = LINK, .evict_d2h_bps = LINK, .pinned_h2d_bps = 50e9, .pinned_d2h_bps = 50e9,
        .fault_bps = 5e9, .fault_group_bytes = 716u << 10, .remote_read_bps = LINK, .remote_write_bps = LINK,
        .flops = 1e14, .hbm_bps = 1e12, .pinned_bidir_bps = 100e9, .host_mem_bps = CPU,
        .host_mem_shared_bps = shared ? SHARED : 0, .cpu_adamw_params_per_s = CPU / 28,
    };
    return p;
}

/* ------------------------------------------------------------------ the backend alone */
typedef struct model {
    uvmrt_profile_t prof;
    uvmrt_log_t log;
    void *be;
    void *buf;    /* (bytes,) on the host, holding data */
    size_t bytes;
} model_t;

static const uvmrt_stream_t H2D = (uvmrt_stream_t)0x1000, CPU_S = (uvmrt_stream_t)0x2000,
                            GPU_S = (uvmrt_stream_t)0x3000;

/* A model with one host-resident buffer of `bytes`, its clock past the setup. */
static void model_open(model_t *m, size_t bytes, int shared)
{
    memset(m, 0, sizeof *m);
    m->prof = test_profile(shared);
    m->log = (uvmrt_log_t){UVMRT_LOG_WARN, log_capture, NULL};
    uvmrt_backend_config_t cfg = {0, &m->prof, &m->log};
    cr_assert_eq(uvmrt__backend_sim.open(&cfg, &m->be), UVMRT_OK);
    m->bytes = bytes;
    cr_assert_eq(uvmrt__backend_sim.alloc(m->be, bytes, &m->buf), UVMRT_OK);
    /* empty pages move for free; to the device and back gives them data on the host */
    uvmrt_range_t r = {m->buf, bytes};
    cr_assert_eq(uvmrt__backend_sim.move(m->be, &r, 1, UVMRT_LOC_DEVICE, H2D), UVMRT_OK);
    cr_assert_eq(uvmrt__backend_sim.move(m->be, &r, 1, UVMRT_LOC_HOST, H2D), UVMRT_OK);
    cr_assert_eq(uvmrt__backend_sim.stream_sync(m->be, H2D), UVMRT_OK);
}

static void model_close(model_t *m)
{
    uvmrt__backend_sim.free(m->be, m->buf, m->bytes);
    uvmrt__backend_sim.close(m->be);
}

/* Model time (ns since the setup) at which the work so far on stream ends. */
static double end_of(model_t *m, uvmrt_stream_t stream, uint64_t t0)
{
    uvmrt_event_t e;
    cr_assert_eq(uvmrt__backend_sim.event_create(m->be, 1, &e), UVMRT_OK);
    cr_assert_eq(uvmrt__backend_sim.event_record(m->be, e, stream), UVMRT_OK);
    uvmrt_event_t start;
    cr_assert_eq(uvmrt__backend_sim.event_create(m->be, 1, &start), UVMRT_OK);
    uint64_t ns = 0;
    /* a sim event never recorded reads time 0: elapsed from it is e's time */
    cr_assert_eq(uvmrt__backend_sim.event_elapsed_ns(m->be, start, e, &ns), UVMRT_OK);
    uvmrt__backend_sim.event_destroy(m->be, start);
    uvmrt__backend_sim.event_destroy(m->be, e);
    return (double)(ns - t0);
}

static void prefetch_all(model_t *m)
{
    uvmrt_range_t r = {m->buf, m->bytes};
    cr_assert_eq(uvmrt__backend_sim.move(m->be, &r, 1, UVMRT_LOC_DEVICE, H2D), UVMRT_OK);
}

static void cpu_work(model_t *m, uint64_t host_bytes)
{
    uvmrt_touch_t w = {.host_bytes = host_bytes};
    uvmrt_touch_result_t res;
    cr_assert_eq(uvmrt__backend_sim.touch(m->be, CPU_S, &w, &res), UVMRT_OK);
}

#define B (4 * GIB)                 /* the transfer: 107 ms alone */
#define H ((uint64_t)3000000000ull) /* the CPU work: 50 ms alone */

static void assert_ns_near(double got, double want)
{
    cr_assert(fabs(got - want) <= 2.0, "%.0f ns, predicted %.0f ns", got, want);
}

Test(sim_hostmem, alone_each_takes_its_own_bandwidth)
{
    model_t m;
    model_open(&m, B, 1);
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    prefetch_all(&m);
    assert_ns_near(end_of(&m, H2D, t0), (double)B / LINK * 1e9);
    model_close(&m);

    model_open(&m, B, 1);
    t0 = uvmrt__backend_sim.now_ns(m.be);
    cpu_work(&m, H);
    assert_ns_near(end_of(&m, CPU_S, t0), (double)H / CPU * 1e9);
    model_close(&m);
}

/* With the profile's CPU-beside-one-direction figure, a direction in use lowers the
 * CPU's ceiling in proportion even below the shared total: 60 - (60 - 30) x 40/50. */
Test(sim_hostmem, cpu_work_beside_one_direction_takes_the_measured_share)
{
    model_t m;
    model_open(&m, B, 1);
    m.prof.host_mem_cpu_beside_h2d_bps = 30e9; /* the model reads the profile it was given */
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    prefetch_all(&m); /* 40 GB/s to the GPU for 107 ms, booked first */
    cpu_work(&m, H);
    double ceiling = CPU - (CPU - 30e9) * (LINK / m.prof.pinned_h2d_bps);
    cr_assert_lt(ceiling, SHARED - LINK, "below what the shared total alone leaves");
    assert_ns_near(end_of(&m, CPU_S, t0), (double)H / ceiling * 1e9);
    model_close(&m);
}

Test(sim_hostmem, transfer_beside_cpu_work_takes_the_predicted_longer)
{
    model_t m;
    model_open(&m, B, 1);
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    cpu_work(&m, H);  /* booked first: 60 GB/s for 50 ms */
    prefetch_all(&m); /* gets 80 - 60 = 20 GB/s while the CPU runs, then 40 */
    double cpu_s = (double)H / CPU;
    double predicted = cpu_s + ((double)B - (SHARED - CPU) * cpu_s) / LINK;
    double got = end_of(&m, H2D, t0);
    assert_ns_near(got, predicted * 1e9);
    cr_assert_gt(got, (double)B / LINK * 1e9 + 20e6, "slower than alone by 25 ms");
    assert_ns_near(end_of(&m, CPU_S, t0), cpu_s * 1e9); /* booked before: unchanged */
    /* never faster than host memory allows for both */
    cr_assert_geq(got, (double)(B + H) / SHARED * 1e9);
    model_close(&m);
}

Test(sim_hostmem, cpu_work_beside_a_transfer_takes_the_predicted_longer)
{
    model_t m;
    model_open(&m, B, 1);
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    prefetch_all(&m); /* booked first: 40 GB/s for 107 ms */
    cpu_work(&m, H);  /* gets min(60, 80 - 40) = 40 GB/s: 75 ms instead of 50 */
    assert_ns_near(end_of(&m, CPU_S, t0), (double)H / (SHARED - LINK) * 1e9);
    assert_ns_near(end_of(&m, H2D, t0), (double)B / LINK * 1e9);
    model_close(&m);
}

Test(sim_hostmem, without_the_shared_figure_nothing_contends)
{
    model_t m;
    model_open(&m, B, 0);
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    cpu_work(&m, H);
    prefetch_all(&m);
    assert_ns_near(end_of(&m, H2D, t0), (double)B / LINK * 1e9);
    assert_ns_near(end_of(&m, CPU_S, t0), (double)H / CPU * 1e9);
    model_close(&m);
}

/* Random mixes: every piece of work is at most as fast as its own bandwidth, and
 * all of it together at most as fast as shared host memory (here the two link
 * directions together, 80, do not exceed it, so the bound holds everywhere). */
Test(sim_hostmem, random_mixes_never_beat_the_bandwidth_limits)
{
    srand(12345);
    for (int trial = 0; trial < 40; trial++) {
        model_t m;
        size_t chunk = 256 * MIB;
        int n = 8;
        model_open(&m, (size_t)n * chunk, 1);
        uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
        double total = 0, latest = 0;
        uvmrt_stream_t cpu_streams[3] = {(uvmrt_stream_t)0x2000, (uvmrt_stream_t)0x2010, (uvmrt_stream_t)0x2020};
        for (int k = 0; k < 12; k++) {
            int kind = rand() % 3;
            if (kind == 0 && n > 0) { /* a chunk to the GPU */
                n--;
                uvmrt_range_t r = {(char *)m.buf + (size_t)n * chunk, chunk};
                double before = end_of(&m, H2D, t0);
                cr_assert_eq(uvmrt__backend_sim.move(m.be, &r, 1, UVMRT_LOC_DEVICE, H2D), UVMRT_OK);
                double after = end_of(&m, H2D, t0);
                cr_assert_geq(after - before + 2, (double)chunk / LINK * 1e9);
                total += (double)chunk;
                latest = fmax(latest, after);
            } else { /* CPU work on one of three CPU timelines */
                uvmrt_stream_t cs = cpu_streams[rand() % 3];
                uint64_t hb = (uint64_t)(rand() % 1000 + 1) * 1000000ull;
                double before = end_of(&m, cs, t0);
                uvmrt_touch_t w = {.host_bytes = hb};
                uvmrt_touch_result_t res;
                cr_assert_eq(uvmrt__backend_sim.touch(m.be, cs, &w, &res), UVMRT_OK);
                double after = end_of(&m, cs, t0);
                cr_assert_geq(after - before + 2, (double)hb / CPU * 1e9);
                total += (double)hb;
                latest = fmax(latest, after);
            }
        }
        cr_assert_geq(latest + 2, total / SHARED * 1e9, "trial %d: %.0f bytes in %.0f ns", trial, total, latest);
        model_close(&m);
    }
}

/* ------------------------------------------------------------------ through the public API */
/* A prefetch-policy context with an 8 GiB budget on the test profile (through a
 * profile file, as a user would give it). */
static uvmrt_context_t *ctx_on_test_profile(int shared)
{
    char dir[] = "/tmp/uvmrt-sim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/hm.json", dir);
    uvmrt_profile_t prof = test_profile(shared);
    uvmrt_log_t log = {UVMRT_LOG_WARN, log_capture, NULL};
    cr_assert_eq(uvmrt__profile_file_save(&prof, NULL, path, &log), UVMRT_OK);
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 8 * GIB, path);
    unlink(path);
    rmdir(dir);
    return ctx;
}

/* A host-placed activation of `bytes` (read over the link by the GPU's calls). */
static uvmrt_tensor_t *host_placed(uvmrt_context_t *ctx, uint64_t bytes)
{
    uvmrt_tensor_desc_t d = {"X", -1, UVMRT_ROLE_ACTIVATION, bytes};
    uvmrt_tensor_t *x;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &x), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, x, UVMRT_PLACE_HOST), UVMRT_OK);
    return x;
}

/* A step with a GPU call reading a host-placed tensor over the link and a CPU
 * call (host_bytes, its own stream): the CPU call's duration as the model says. */
static uint64_t cpu_call_ns(int with_gpu_call, int gpu_first)
{
    uvmrt_context_t *ctx = ctx_on_test_profile(1);
    int gpu, cpu;
    cr_assert_eq(uvmrt_layer_add(ctx, "gpu", &gpu), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "cpu", &cpu), UVMRT_OK);
    uvmrt_tensor_t *x = host_placed(ctx, 4 * GIB);
    uvmrt_use_t use = {x, UVMRT_USE_READ | UVMRT_USE_STREAM};
    uvmrt_layer_call_t g = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = gpu, .phase = UVMRT_PHASE_FORWARD, .stream = GPU_S, .uses = &use, .n_uses = 1,
                            .no_default_uses = 1};
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = cpu, .phase = UVMRT_PHASE_OPTIMIZER, .stream = CPU_S, .no_default_uses = 1,
                            .host_bytes = H};
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    for (int k = 0; k < 2; k++) {
        int is_gpu = (k == 0) == gpu_first;
        if (is_gpu && !with_gpu_call) continue;
        cr_assert_eq(uvmrt_layer_begin(ctx, is_gpu ? &g : &c), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
    }
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_layer_stats_t st = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    cr_assert_eq(uvmrt_layer_stats_get(ctx, cpu, UVMRT_PHASE_OPTIMIZER, &st), UVMRT_OK);
    cr_assert_eq(st.calls, 1);
    uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 0, &ss), UVMRT_OK);
    cr_assert_geq(ss.step_ns + 2, st.duration_ns, "the step waits for its CPU call");
    uvmrt_context_destroy(ctx);
    return st.duration_ns;
}

Test(sim_hostmem, cpu_layer_call_slows_beside_remote_reads)
{
    double alone = (double)cpu_call_ns(0, 0);
    cr_assert(fabs(alone - (double)H / CPU * 1e9) <= 2, "alone %.0f ns", alone);
    /* the GPU's remote read (4 GiB at 40 GB/s) booked first: the CPU gets 80 - 40 */
    double beside = (double)cpu_call_ns(1, 1);
    cr_assert(fabs(beside - (double)H / (SHARED - LINK) * 1e9) <= 2, "beside %.0f ns", beside);
    /* the CPU call first: it keeps its rate (the reads slow instead) */
    double first = (double)cpu_call_ns(1, 0);
    cr_assert(fabs(first - (double)H / CPU * 1e9) <= 2, "first %.0f ns", first);
}

Test(sim_hostmem, host_bytes_too_long_is_invalid)
{
    /* a very slow CPU (10 bytes/s): UINT64_MAX bytes would take 1.8e27 ns */
    char dir[] = "/tmp/uvmrt-sim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/slow.json", dir);
    uvmrt_profile_t prof = test_profile(1);
    prof.host_mem_bps = 10;
    uvmrt_log_t log = {UVMRT_LOG_WARN, log_capture, NULL};
    cr_assert_eq(uvmrt__profile_file_save(&prof, NULL, path, &log), UVMRT_OK);
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 1 * GIB, path);
    unlink(path);
    rmdir(dir);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "cpu", &l), UVMRT_OK);
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_OPTIMIZER, .stream = CPU_S, .no_default_uses = 1,
                            .host_bytes = UINT64_MAX};
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    log_reset();
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_ERR_INVALID);
    cr_assert(log_contains("host_bytes"), "%s", log_text());
    c.host_bytes = 28; /* one parameter of AdamW: 2.8 s at 10 bytes/s */
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* A layer's remote traffic adds to its own work (the H200 measured a layer's
 * conversion kernel over the link before its GEMM, and a GEMM's epilogue over the
 * link after it, in series): reads and writes run at once, the work after them. */
Test(sim_remote, a_calls_link_traffic_adds_to_its_work)
{
    model_t m;
    model_open(&m, B, 0);
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    uvmrt_range_t all = {m.buf, B}, half = {m.buf, B / 2};
    const uint64_t work = 10000000; /* 10 ms */
    uvmrt_touch_t w = {.remote_read = &all, .n_remote_read = 1, .duration_ns = work};
    uvmrt_touch_result_t res;
    cr_assert_eq(uvmrt__backend_sim.touch(m.be, GPU_S, &w, &res), UVMRT_OK);
    double read_ns = (double)B / LINK * 1e9;
    assert_ns_near(end_of(&m, GPU_S, t0), read_ns + (double)work);
    /* reads of B and writes of B/2 at once: the longer of the two, then the work */
    uvmrt_touch_t w2 = {.remote_read = &all, .n_remote_read = 1, .remote_write = &half, .n_remote_write = 1,
                        .duration_ns = work};
    cr_assert_eq(uvmrt__backend_sim.touch(m.be, GPU_S, &w2, &res), UVMRT_OK);
    assert_ns_near(end_of(&m, GPU_S, t0), 2 * (read_ns + (double)work));
    cr_assert_eq(res.fault_bytes, 0, "remote traffic is not faults");
    model_close(&m);
}

/* An eviction runs at what the host's page population allows, below the link's rate:
 * a call's remote writes do not queue behind it but share the link with it, at half
 * the pinned rate while it runs, at their own rate after. */
Test(sim_remote, remote_writes_share_the_link_with_an_eviction)
{
    model_t m;
    model_open(&m, B, 0);
    m.prof.evict_d2h_bps = 20e9; /* the stores beside it: half of 50 GB/s */
    prefetch_all(&m);
    cr_assert_eq(uvmrt__backend_sim.stream_sync(m.be, H2D), UVMRT_OK);
    void *dst = NULL;
    const size_t D = 6 * GIB;
    cr_assert_eq(uvmrt__backend_sim.alloc(m.be, D, &dst), UVMRT_OK);
    const uvmrt_stream_t D2H = (uvmrt_stream_t)0x4000;
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    uvmrt_range_t ev = {m.buf, B};
    cr_assert_eq(uvmrt__backend_sim.move(m.be, &ev, 1, UVMRT_LOC_HOST, D2H), UVMRT_OK);
    double evict_ns = (double)m.prof.prefetch_call_ns + (double)B / 20e9 * 1e9;
    assert_ns_near(end_of(&m, D2H, t0), evict_ns);
    /* 1.5 GiB: all of it beside the eviction */
    const double W1 = 1.5 * GIB, W2 = 4.5 * GIB;
    uvmrt_range_t w1 = {dst, (size_t)W1};
    uvmrt_touch_t a = {.remote_write = &w1, .n_remote_write = 1};
    uvmrt_touch_result_t res;
    double g0 = (double)(uvmrt__backend_sim.now_ns(m.be) - t0); /* the call starts after the host's calls */
    cr_assert_eq(uvmrt__backend_sim.touch(m.be, GPU_S, &a, &res), UVMRT_OK);
    double t1 = g0 + W1 / 25e9 * 1e9;
    assert_ns_near(end_of(&m, GPU_S, t0), t1);
    /* 4.5 GiB more: beside the eviction until it ends, then at remote_write_bps */
    uvmrt_range_t w2 = {(char *)dst + (size_t)W1, (size_t)W2};
    uvmrt_touch_t b = {.remote_write = &w2, .n_remote_write = 1};
    cr_assert_eq(uvmrt__backend_sim.touch(m.be, GPU_S, &b, &res), UVMRT_OK);
    double beside = 25e9 * (evict_ns - t1) * 1e-9;
    assert_ns_near(end_of(&m, GPU_S, t0), evict_ns + (W2 - beside) / LINK * 1e9);
    uvmrt__backend_sim.free(m.be, dst, D);
    model_close(&m);
}

/* A recording step, then two planned ones, each of the n calls in order. */
static void three_steps(uvmrt_context_t *ctx, const uvmrt_layer_call_t *calls, int n)
{
    for (int step = 0; step < 3; step++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        for (int i = 0; i < n; i++) {
            cr_assert_eq(uvmrt_layer_begin(ctx, &calls[i]), UVMRT_OK, "%s", log_text());
            cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
        }
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
}

/* What the review and UVMRT_RECORD take as a call's own work: its measured time less
 * its traffic to host-homed tensors at the remote rates (the model adds that traffic
 * back), so that a re-play does not count the link twice. */
Test(sim_remote, a_calls_own_work_leaves_its_link_traffic_out)
{
    uvmrt_context_t *ctx = ctx_on_test_profile(0);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "gpu", &l), UVMRT_OK);
    uvmrt_tensor_t *x = host_placed(ctx, 1 * GIB);
    uvmrt_use_t use = {x, UVMRT_USE_READ | UVMRT_USE_STREAM};
    const uint64_t own_ns = 5000000; /* 5 ms */
    uvmrt_layer_call_t g = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .stream = GPU_S, .uses = &use, .n_uses = 1,
                            .no_default_uses = 1, .sim_duration_ns = own_ns};
    three_steps(ctx, &g, 1);
    cr_assert(x->host_homed, "the host-placed tensor is host-homed");
    uint64_t work[2] = {0, 0};
    cr_assert_eq(uvmrt__step_work(ctx, &ctx->sched.cur, work, work + 1), UVMRT_OK);
    uint64_t own = work[0], raw = work[1];
    double link_ns = (double)GIB / LINK * 1e9;
    cr_assert(fabs((double)raw - (link_ns + (double)own_ns)) <= 2, "measured %llu ns", (unsigned long long)raw);
    cr_assert(fabs((double)own - (double)own_ns) <= 2, "own work %llu ns, expected %llu", (unsigned long long)own,
              (unsigned long long)own_ns);
    uvmrt_context_destroy(ctx);
}

/* A call's declared work is its matmuls' flops at the profile's FLOP/s plus its
 * memory-bound kernels' bytes at its HBM rate, one after the other: that is the
 * step's time on sim, and what a review takes as the call's declared work. */
Test(sim_remote, a_calls_work_is_its_flops_plus_its_hbm_bytes)
{
    uvmrt_context_t *ctx = ctx_on_test_profile(0);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    /* 1 ms at 1e14 FLOP/s, then 2 ms at 1e12 bytes/s */
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .stream = GPU_S, .no_default_uses = 1,
                            .flops = 1e11, .hbm_bytes = 2000000000ull};
    three_steps(ctx, &c, 1);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 2, &st), UVMRT_OK);
    cr_assert(fabs((double)st.step_ns - 3e6) <= 2, "step %llu ns, expected 3 ms", (unsigned long long)st.step_ns);
    cr_assert_eq(ctx->sched.cur.calls[0].work.declared_ns, 3000000, "declared %llu ns",
                 (unsigned long long)ctx->sched.cur.calls[0].work.declared_ns);
    /* bytes alone time a call without matmuls (an optimizer) */
    c.flops = 0;
    c.hbm_bytes = 5000000000ull;
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 3, &st), UVMRT_OK);
    cr_assert(fabs((double)st.step_ns - 5e6) <= 2, "step %llu ns, expected 5 ms", (unsigned long long)st.step_ns);
    uvmrt_context_destroy(ctx);
}

/* A call with link traffic in a phase whose calls all have some (e.g. a copy over
 * the link) measured more than its traffic at the remote rates: what is left over is
 * the link shared with other work, not the call's own, so its work is capped at its
 * declared work times the efficiency the step's clean calls measured (here 1: on sim
 * a call's work is its declared flops), not taken as measured less the traffic. */
Test(sim_remote, a_link_bound_calls_leftover_is_capped_by_the_steps_efficiency)
{
    uvmrt_context_t *ctx = ctx_on_test_profile(0);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_t *x = host_placed(ctx, 1 * GIB);
    uvmrt_use_t use = {x, UVMRT_USE_READ | UVMRT_USE_STREAM};
    const double flops = 1e11; /* 1 ms at the test profile's 1e14 FLOP/s */
    uvmrt_layer_call_t clean = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .stream = GPU_S, .flops = flops};
    /* declared 1 ms, but it runs 6 ms beyond its traffic (as if it waited for the link) */
    uvmrt_layer_call_t copy = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_OPTIMIZER, .stream = GPU_S, .uses = &use,
                               .n_uses = 1, .no_default_uses = 1, .flops = flops, .sim_duration_ns = 6000000};
    uvmrt_layer_call_t calls[2] = {clean, copy};
    three_steps(ctx, calls, 2);
    uint64_t work[4] = {0};
    cr_assert_eq(uvmrt__step_work(ctx, &ctx->sched.cur, work, work + 2), UVMRT_OK);
    double link_ns = (double)GIB / LINK * 1e9;
    cr_assert(fabs((double)work[3] - (link_ns + 6e6)) <= 2, "measured %llu ns", (unsigned long long)work[3]);
    cr_assert(fabs((double)work[0] - 1e6) <= 2, "the clean call's work %llu ns", (unsigned long long)work[0]);
    cr_assert(fabs((double)work[1] - 1e6) <= 2, "the copy's work %llu ns: expected its declared 1 ms, not 6",
              (unsigned long long)work[1]);
    uvmrt_context_destroy(ctx);
}

/* With the profile's CPU-beside-a-direction figure, CPU work enqueued before a
 * transfer gives way to it down to that ceiling (60 - (60 - 30) x 40/50 = 36 GB/s),
 * whichever came first: the transfer keeps its full rate and the CPU work ends as if
 * it had run at its ceiling under the transfer throughout. */
Test(sim_hostmem, cpu_work_gives_way_to_a_later_transfer_down_to_its_ceiling)
{
    model_t m;
    model_open(&m, B, 1);
    m.prof.host_mem_cpu_beside_h2d_bps = 30e9;
    uint64_t t0 = uvmrt__backend_sim.now_ns(m.be);
    cpu_work(&m, H);  /* booked first: 50 ms alone */
    prefetch_all(&m); /* 107 ms at 40 GB/s, all of it beside the CPU work */
    double ceiling = CPU - (CPU - 30e9) * (LINK / m.prof.pinned_h2d_bps);
    assert_ns_near(end_of(&m, H2D, t0), (double)B / LINK * 1e9);
    double cpu_end = end_of(&m, CPU_S, t0), want = (double)H / ceiling * 1e9;
    cr_assert(fabs(cpu_end - want) < 1e5, "CPU work ends at %.0f ns, predicted %.0f", cpu_end, want);
    model_close(&m);
}

/* work.c: the declared work's counts and times at a profile's rates; an explicit sim
 * duration is what runs and, with no count, what a review compares with; a bad value
 * is refused with its name. */
Test(sim_work, counts_and_times_at_the_profiles_rates)
{
    uvmrt_profile_t prof = {0};
    prof.flops = 1e14;
    prof.hbm_bps = 1e12;
    prof.host_mem_bps = 1e10;
    uvmrt_layer_call_t c = {.struct_size = sizeof c, .flops = 1e11, .hbm_bytes = 2000000000ull, .host_bytes = 1000};
    uvmrt_work_t w;
    char why[256] = "";
    cr_assert_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), 0, "%s", why);
    cr_expect_eq(w.flop_count, 1e11);
    cr_expect_eq(w.hbm_byte_count, 2000000000ull);
    cr_expect_eq(w.host_byte_count, 1000);
    cr_expect_eq(w.declared_ns, 3000000, "1 ms of flops and 2 ms of bytes: %llu", (unsigned long long)w.declared_ns);
    cr_expect_eq(w.modelled_ns, 3000000);
    cr_expect_eq(w.host_ns, 0);
    c.sim_duration_ns = 5000;
    c.host_ns = 7;
    cr_assert_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), 0, "%s", why);
    cr_expect_eq(w.modelled_ns, 5000, "an explicit duration runs");
    cr_expect_eq(w.declared_ns, 3000000, "the counts stay what a review compares with");
    cr_expect_eq(w.host_ns, 7);
    c.flops = 0;
    c.hbm_bytes = 0;
    cr_assert_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), 0, "%s", why);
    cr_expect_eq(w.declared_ns, 5000, "no counts: the explicit duration plays the GPU's time");
    c.flops = NAN;
    cr_expect_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), -1);
    cr_expect(strstr(why, "flops nan: expected a finite number >= 0") != NULL, "%s", why);
    c.flops = 1e40;
    cr_expect_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), -1);
    cr_expect(strstr(why, "expected at most 1e18 ns") != NULL, "%s", why);
    c.flops = 0;
    c.host_ns = 2000000000000000000ull;
    cr_expect_eq(uvmrt__work_declare(&w, &c, &prof, why, sizeof why), -1);
    cr_expect(strstr(why, "host_ns 2000000000000000000: expected at most 1e18 ns") != NULL, "%s", why);
}
