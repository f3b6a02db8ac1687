/*
 * test_gpu.c -- tests on a real GPU, run by `make check-gpu`.
 *
 * Every test first creates a cuda context in its body and skips itself when
 * there is no usable GPU (UVMRT_ERR_NO_DEVICE, or UVMRT_ERR_UNSUPPORTED without
 * concurrent managed access). Nothing touches CUDA in the runner's parent
 * process: Criterion forks each test, and CUDA must not be initialised before
 * a fork. This file makes no CUDA call itself: it links CUDA only through
 * libuvmrt. Total managed memory per test stays well under 1 GiB.
 *
 * The tests run one at a time (see main): they time copies and must not share
 * the GPU with each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../helpers.h"
#include "backend_select.h"
#include "internal.h"
#include "profile_file.h"

/* ------------------------------------------------------------------ contexts */
static uvmrt_context_t *cuda_ctx_or_skip(uvmrt_policy_t policy, uint64_t budget)
{
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_CUDA;
    p.policy = policy;
    p.budget_bytes = budget;
    p.ignore_env = 1;
    p.log_fn = log_capture;
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    if (st == UVMRT_ERR_NO_DEVICE || st == UVMRT_ERR_UNSUPPORTED)
        cr_skip_test("no usable GPU (%s): %s", uvmrt_status_name(st), log_text());
    cr_assert_eq(st, UVMRT_OK, "cuda context: %s; log:\n%s", uvmrt_status_name(st), log_text());
    cr_assert_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_CUDA);
    return ctx;
}

static void skip_without_gpu(void)
{
    uvmrt_context_destroy(cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, 64 * MIB));
}

/* Runs a shell command; appends its output to out; returns pclose's status. */
static int run_command(const char *cmd, strbuf_t *out)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f, "popen(%s)", cmd);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf - 1, f)) > 0) {
        buf[n] = '\0';
        sb_append(out, buf);
    }
    return pclose(f);
}

/* ------------------------------------------------------------------ 1. the demo */
/* Runs the demo (UVMRT_DEMO names it; make check-gpu sets it) with the given
 * arguments; returns its exit status and output (caller frees). */
static int run_demo(const char *args, strbuf_t *out)
{
    const char *demo = getenv("UVMRT_DEMO");
    if (demo == NULL || demo[0] == '\0') cr_skip_test("UVMRT_DEMO is not set");
    env_clear_uvmrt(); /* the demo must see the flags, not a leftover UVMRT_POLICY */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", demo, args);
    int status = run_command(cmd, out);
    cr_assert(WIFEXITED(status), "the demo did not exit normally (status %#x):\n%s", status,
              out->s ? out->s : "");
    return WEXITSTATUS(status);
}

/* The demo under every policy on the GPU, checksums verified against a run
 * with everything resident. */
Test(gpu, demo_all_policies_checksums_match, .timeout = 600)
{
    skip_without_gpu();
    strbuf_t out = {0};
    int status = run_demo("--backend cuda --policy all --layers 8 --layer-mib 64 --budget 192M --steps 3", &out);
    const char *text = out.s ? out.s : "";
    cr_expect_eq(status, 0, "the demo exited with %d:\n%s", status, text);
    cr_expect_not_null(strstr(text, "checksums: match"), "no 'checksums: match' in:\n%s", text);
    cr_expect_null(strstr(text, "MISMATCH"), "%s", text);
    cr_expect_not_null(strstr(text, "policy demand"), "the demand policy did not run:\n%s", text);
    cr_expect_not_null(strstr(text, "policy prefetch"), "the prefetch policy did not run:\n%s", text);
    sb_free(&out);
}

/* Copies overlap real GPU compute: the demo's kernels made 768x heavier (--work
 * 768: not streamed, so every tensor migrates), 1 GiB of tensors under a 640 MiB
 * budget, so each step moves about a GB each way while its kernels run for
 * longer than those copies take. In steady state the copy streams are busy
 * (prefetching and writing back) while the layers' stream waits less than a
 * quarter of that time, faults are 0, and the data is right. Read from the
 * demo's JSON report. (At --work 96 and a 320 MiB budget the step is bound by
 * write-back instead, and the layers do wait: that is not what this tests.) */
Test(gpu, demo_prefetch_overlaps_compute, .timeout = 600)
{
    skip_without_gpu();
    char dir[] = "/tmp/uvmrt-gpu-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[512], path[256];
    snprintf(path, sizeof path, "%s/prefetch.json", dir);
    snprintf(args, sizeof args, "--backend cuda --policy prefetch --layers 8 --layer-mib 128 --budget 640M "
                                "--work 768 --steps 4 --quiet --report-json %s", path);
    strbuf_t out = {0};
    int status = run_demo(args, &out);
    const char *text = out.s ? out.s : "";
    cr_assert_eq(status, 0, "the demo exited with %d:\n%s", status, text);
    cr_expect_not_null(strstr(text, "checksums: match"), "%s", text);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s: %s", path, err.text);
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 4);
    for (size_t s = 2; s < 4; s++) { /* after the recording step and the first planned one */
        json_t *st = json_array_get(steps, s);
        double prefetch = (double)json_integer_value(json_object_get(st, "prefetch_bytes"));
        double busy = (double)json_integer_value(json_object_get(st, "h2d_busy_ns")) +
                      (double)json_integer_value(json_object_get(st, "d2h_busy_ns"));
        double wait = (double)json_integer_value(json_object_get(st, "wait_ns"));
        double step = (double)json_integer_value(json_object_get(st, "step_ns"));
        json_int_t faults = json_integer_value(json_object_get(st, "fault_count"));
        cr_log_info("step %zu: %.1f ms, prefetch %.0f MiB, copies busy %.2f ms, wait %.2f ms, faults %lld", s + 1,
                    step / 1e6, prefetch / MIB, busy / 1e6, wait / 1e6, (long long)faults);
        cr_expect_gt(prefetch, 0, "step %zu prefetched nothing", s + 1);
        cr_expect_gt(busy, 0, "step %zu: no copy time measured", s + 1);
        cr_expect_lt(wait, 0.25 * busy, "step %zu: layers waited %.2f ms of %.2f ms of copying: no overlap",
                     s + 1, wait / 1e6, busy / 1e6);
        cr_expect_eq(faults, 0, "step %zu: tensors used while not resident", s + 1);
    }
    json_decref(root);
    unlink(path);
    rmdir(dir);
    sb_free(&out);
}

/* ------------------------------------------------------------------ 2. prefetch overlaps other work */
static void sleep_ns(long ns)
{
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The layers' "work" is host time between begin and end (this file launches no
 * kernels). The plan issues each layer's prefetches at earlier layer ends, so
 * they run on the copy stream while the host is busy: in steady state the
 * layers' streams wait for less time than the copy stream spent prefetching. */
Test(gpu, prefetch_overlaps_other_work, .timeout = 300)
{
    /* 8 layers of W 16, A 8, G 16, O 32 MiB (576 MiB in all); largest working
     * set 64 MiB (optimizer: W + G + O); budget 3x that */
    net_spec_t spec = {.layers = 8, .w_bytes = 16 * MIB, .a_bytes = 8 * MIB, .g_bytes = 16 * MIB,
                       .o_bytes = 32 * MIB, .x_bytes = 8 * MIB};
    uvmrt_context_t *ctx = cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, 192 * MIB);
    net_t *net = net_create(ctx, &spec);
    cr_assert_eq(net_max_working_set(net), 64 * MIB);
    cr_assert_lt(net_total_footprint(net), 1 * GIB);
    const int steps = 4;
    const long work_ns = 8 * 1000 * 1000; /* per layer call, on the host */
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK, "%s", log_text());
        for (int phase = 0; phase < UVMRT_PHASE_COUNT; phase++)
            for (int k = 0; k < net->L; k++) {
                int i = phase == UVMRT_PHASE_BACKWARD ? net->L - 1 - k : k;
                uvmrt_use_t extra = {NULL, UVMRT_USE_READ};
                size_t n_extra = 0;
                if (phase == UVMRT_PHASE_FORWARD) {
                    extra.tensor = i > 0 ? net->a[i - 1] : net->x;
                    n_extra = 1;
                }
                if (phase == UVMRT_PHASE_BACKWARD && i < net->L - 1) {
                    extra.tensor = net->g[i + 1];
                    n_extra = 1;
                }
                uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[i], .phase = (uvmrt_phase_t)phase, .stream = NULL,
                                        .uses = n_extra ? &extra : NULL, .n_uses = n_extra};
                cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
                sleep_ns(work_ns);
                cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
                uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
                cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
                cr_assert_leq(sum.resident_bytes, sum.budget_bytes);
            }
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK, "%s", log_text());
    }
    for (uint64_t s = 2; s < (uint64_t)steps; s++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, s, &st), UVMRT_OK);
        cr_log_info("step %llu: %.1f ms, prefetch %.0f MiB, h2d busy %.2f ms, wait %.2f ms, faults %llu",
                    (unsigned long long)s + 1, st.step_ns / 1e6, st.prefetch_bytes / (double)MIB, st.h2d_busy_ns / 1e6,
                    st.wait_ns / 1e6, (unsigned long long)st.fault_count);
        cr_expect_gt(st.prefetch_bytes, 0, "step %llu prefetched nothing", (unsigned long long)s + 1);
        cr_expect_gt(st.h2d_busy_ns, 0, "step %llu: no time measured on the copy stream", (unsigned long long)s + 1);
        cr_expect_lt(st.wait_ns, st.h2d_busy_ns,
                     "step %llu: the layers waited %llu ns, the copy stream prefetched for %llu ns: no overlap",
                     (unsigned long long)s + 1, (unsigned long long)st.wait_ns, (unsigned long long)st.h2d_busy_ns);
        cr_expect_eq(st.fault_count, 0, "step %llu: tensors used while not resident", (unsigned long long)s + 1);
        cr_expect_leq(st.peak_resident_bytes, 192 * MIB);
    }
    net_free(net);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ 3. same decisions on sim and cuda */
typedef struct scenario_result {
    strbuf_t trace;
    uint64_t steps;
} scenario_result_t;

/* Runs the default network (optionally with streamed activations) for `steps`
 * steps under prefetch with a budget that makes the plan evict. */
static void run_traced(uvmrt_context_t *ctx, int stream_acts, int steps, strbuf_t *trace)
{
    uvmrt__set_trace(ctx, trace_to_strbuf, trace);
    net_spec_t spec = net_spec_default();
    spec.stream_acts = stream_acts;
    net_t *net = net_create(ctx, &spec);
    for (int s = 0; s < steps; s++) {
        sb_appendf(trace, "== step %d\n", s + 1);
        run_step(net, NULL, NULL);
    }
    net_free(net);
}

static void same_trace_sim_and_cuda(int stream_acts)
{
    const uint64_t budget = 16 * MIB; /* 2x the largest working set; total 62 MiB */
    const int steps = 4;
    strbuf_t t_cuda = {0}, t_sim = {0};
    uvmrt_context_t *cu = cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, budget);
    run_traced(cu, stream_acts, steps, &t_cuda);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(cu, &s), UVMRT_OK);
    cr_assert_gt(s.evict_bytes + s.discard_bytes, 0, "the plan never evicted: the comparison proves little");
    uvmrt_context_destroy(cu);
    /* the sim with the profile the cuda context plans with (h200) */
    uvmrt_context_t *sim = make_ctx(UVMRT_POLICY_PREFETCH, budget, "h200");
    run_traced(sim, stream_acts, steps, &t_sim);
    uvmrt_context_destroy(sim);
    cr_assert_not_null(t_cuda.s);
    cr_assert_not_null(t_sim.s);
    /* from the first planned step (step 2) on */
    const char *a = strstr(t_cuda.s, "== step 2\n"), *b = strstr(t_sim.s, "== step 2\n");
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_expect_not_null(strstr(a, "prefetch on h2d:"), "no planned prefetch:\n%s", a);
    cr_expect_str_eq(a, b, "sim and cuda decided differently (stream_acts %d)", stream_acts);
    sb_free(&t_cuda);
    sb_free(&t_sim);
}

Test(gpu, same_trace_on_sim_and_cuda, .timeout = 300) { same_trace_sim_and_cuda(0); }
Test(gpu, same_trace_on_sim_and_cuda_streamed, .timeout = 300) { same_trace_sim_and_cuda(1); }

/* ------------------------------------------------------------------ 5. fault statistics (CUPTI) */
/* The demo (kernels really touch the data) with env settings before it; the JSON
 * report is written at destroy (UVMRT_REPORT), after the last records are
 * attributed. --work 2: no UVMRT_USE_STREAM, so nothing is host-homed and every
 * planned tensor migrates. 8 x 64 MiB layers = 512 MiB managed. Returns the report. */
static json_t *demo_fault_report(const char *policy, const char *env, const char *tag)
{
    skip_without_gpu();
    const char *demo = getenv("UVMRT_DEMO");
    if (demo == NULL || demo[0] == '\0') cr_skip_test("UVMRT_DEMO is not set");
    env_clear_uvmrt();
    char path[256], cmd[4096];
    snprintf(path, sizeof path, "/tmp/uvmrt-gpu-faults-%s-%d.json", tag, (int)getpid());
    snprintf(cmd, sizeof cmd,
             "env UVMRT_REPORT=json:%s %s '%s' --backend cuda --policy %s --layers 8 --layer-mib 64 "
             "--budget 192M --steps 4 --work 2 --no-verify -q 2>&1",
             path, env, demo, policy);
    strbuf_t out = {0};
    int status = run_command(cmd, &out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s:\n%s", cmd, out.s ? out.s : "");
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "report %s: %s\n%s", path, err.text, out.s ? out.s : "");
    unlink(path);
    const char *src = json_string_value(json_object_get(root, "fault_stats_source"));
    cr_assert_not_null(src);
    cr_assert_str_eq(src, "cupti", "CUPTI did not start (fault_stats_source %s); demo output:\n%s", src,
                     out.s ? out.s : "");
    sb_free(&out);
    return root;
}

static uint64_t jget(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return v ? (uint64_t)json_integer_value(v) : 0;
}

/* Under demand the layers that touch evicted data fault them in: the driver's
 * counts show GPU faults and fault-driven bytes. */
Test(gpu, cupti_demand_layers_fault, .timeout = 300)
{
    json_t *root = demo_fault_report("demand", "", "demand");
    json_t *layers = json_object_get(root, "layers");
    uint64_t faulting_layers = 0, faults = 0, fault_bytes = 0;
    for (size_t l = 0; l < json_array_size(layers); l++) {
        const char *phases[] = {"forward", "backward", "optimizer"};
        uint64_t lf = 0;
        for (int p = 0; p < 3; p++) {
            json_t *ph = json_object_get(json_array_get(layers, l), phases[p]);
            if (ph == NULL) continue;
            lf += jget(ph, "gpu_faults");
            faults += jget(ph, "gpu_faults");
            fault_bytes += jget(ph, "fault_htod_bytes");
        }
        faulting_layers += lf > 0;
    }
    cr_expect_gt(faults, 0);
    cr_expect_gt(fault_bytes, 0);
    /* 8 x 64 MiB under a 192 MiB budget: every layer's data was evicted in between */
    cr_expect_geq(faulting_layers, 6, "only %llu of 8 layers faulted", (unsigned long long)faulting_layers);
    json_decref(root);
}

/* Under prefetch, planned tensors never fault once the plan runs: the last
 * step's GPU faults are 0. */
Test(gpu, cupti_prefetch_steady_state_no_faults, .timeout = 300)
{
    json_t *root = demo_fault_report("prefetch", "UVMRT_REMOTE=0 UVMRT_FAULT_SAMPLE=1", "prefetch");
    json_t *steps = json_object_get(root, "steps");
    size_t n = json_array_size(steps);
    cr_assert_geq(n, 3);
    json_t *last = json_array_get(steps, n - 1);
    cr_expect_eq(jget(last, "gpu_faults"), 0, "last step: %llu GPU faults, %llu fault bytes",
                 (unsigned long long)jget(last, "gpu_faults"), (unsigned long long)jget(last, "fault_htod_bytes"));
    cr_expect_gt(jget(last, "prefetch_htod_bytes"), 0);
    json_decref(root);
}

/* CUPTI's bytes of user prefetch to the GPU agree with uvmrt's own count within
 * 1% (migration only: no remote homing, no discard, so every prefetched byte moves). */
Test(gpu, cupti_prefetch_bytes_match_runtime, .timeout = 300)
{
    json_t *root = demo_fault_report("prefetch", "UVMRT_REMOTE=0 UVMRT_DISCARD=0 UVMRT_FAULT_SAMPLE=1", "bytes");
    json_t *layers = json_object_get(root, "layers");
    uint64_t mine = 0, cupti = jget(json_object_get(root, "unattributed"), "prefetch_htod_bytes");
    for (size_t l = 0; l < json_array_size(layers); l++) {
        const char *phases[] = {"forward", "backward", "optimizer"};
        for (int p = 0; p < 3; p++) {
            json_t *ph = json_object_get(json_array_get(layers, l), phases[p]);
            if (ph == NULL) continue;
            mine += jget(ph, "prefetch_bytes");
            cupti += jget(ph, "prefetch_htod_bytes");
        }
    }
    cr_assert_gt(mine, 0);
    double diff = (double)(cupti > mine ? cupti - mine : mine - cupti) / (double)mine;
    cr_expect_leq(diff, 0.01, "CUPTI user prefetch %llu bytes vs uvmrt %llu bytes (%.2f%%)",
                  (unsigned long long)cupti, (unsigned long long)mine, 100 * diff);
    json_decref(root);
}

/* Sampling switches the driver's tracing off and on between steps: with every
 * other step collecting, steps 0 and 2 see demand faults, steps 1 and 3 (which
 * fault just as much) report none, so CUPTI really stopped and restarted. The
 * auto default collects the same steps in a 4-step run (0 and 2). */
static void expect_alternating(const char *env, const char *tag)
{
    json_t *root = demo_fault_report("demand", env, tag);
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *st = json_array_get(steps, i);
        int sampled = json_is_true(json_object_get(st, "fault_sampled"));
        cr_expect_eq(sampled, i % 2 == 0, "%s: step %zu fault_sampled %d", tag, i, sampled);
        cr_expect_gt(jget(st, "fault_count"), 0, "%s: step %zu: demand faults every step", tag, i);
        if (i % 2 == 0) cr_expect_gt(jget(st, "gpu_faults"), 0, "%s: collected step %zu saw no faults", tag, i);
        else
            cr_expect_eq(jget(st, "gpu_faults") + jget(st, "fault_htod_bytes"), 0,
                         "%s: step %zu did not collect, yet CUPTI reported %llu faults", tag, i,
                         (unsigned long long)jget(st, "gpu_faults"));
    }
    cr_expect_eq(jget(json_object_get(root, "fault_sampling"), "sampled_steps"), 2, "%s", tag);
    json_decref(root);
}

Test(gpu, cupti_sampling_every_other_step, .timeout = 300) { expect_alternating("UVMRT_FAULT_SAMPLE=2", "every2"); }
Test(gpu, cupti_sampling_auto_probe, .timeout = 300) { expect_alternating("", "auto"); }

/* With fault statistics off the run goes on and says so. */
Test(gpu, cupti_off_says_none, .timeout = 120)
{
    skip_without_gpu();
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_CUDA;
    p.budget_bytes = 64 * MIB;
    p.ignore_env = 1;
    p.log_fn = log_capture;
    p.fault_stats = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    uvmrt_summary_get(ctx, &s);
    cr_expect_str_eq(s.fault_stats_source, "none");
    uvmrt_context_destroy(ctx);
    /* and a second context while one holds CUPTI falls back to none with one warning */
    p.fault_stats = 1;
    uvmrt_context_t *a = NULL, *b = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &a), UVMRT_OK, "%s", log_text());
    log_reset();
    cr_assert_eq(uvmrt_context_create(&p, &b), UVMRT_OK, "%s", log_text());
    uvmrt_summary_get(a, &s);
    const char *sa = s.fault_stats_source;
    uvmrt_summary_get(b, &s);
    if (strcmp(sa, "cupti") == 0) {
        cr_expect_str_eq(s.fault_stats_source, "none");
        cr_expect(log_contains("holds CUPTI"), "%s", log_text());
    }
    uvmrt_context_destroy(b);
    uvmrt_context_destroy(a);
}

/* ------------------------------------------------------------------ runner */
/* One test at a time: they time transfers on one GPU. Arguments (e.g. --tap,
 * -j) still override. */
int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    criterion_options.jobs = 1;
    int result = 0;
    if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result;
}

/* ------------------------------------------------------------------ uvmrt-mlp (issue 4) */
/* The trainer's loss sequence does not depend on where memory lives: with
 * everything resident (policy none) and under prefetch and demand at a small
 * budget, for each optimizer placement, the losses (printed with %a) are
 * bitwise identical. UVMRT_MLP names the program; without it, it is looked for
 * beside the demo (UVMRT_DEMO: .../examples/demo/uvmrt-demo). */
/* The program env names, else examples/<rel> beside the demo (UVMRT_DEMO). */
static const char *example_program(const char *env, const char *rel, char *buf, size_t cap)
{
    const char *prog = getenv(env);
    if (prog && *prog) return prog;
    const char *demo = getenv("UVMRT_DEMO");
    if (demo == NULL || demo[0] == '\0') cr_skip_test("neither %s nor UVMRT_DEMO is set", env);
    const char *cut = strstr(demo, "demo/uvmrt-demo");
    cr_assert_not_null(cut, "UVMRT_DEMO=%s: cannot find %s beside it", demo, rel);
    snprintf(buf, cap, "%.*s%s", (int)(cut - demo), demo, rel);
    return buf;
}

static const char *mlp_program(char *buf, size_t cap) { return example_program("UVMRT_MLP", "mlp/uvmrt-mlp", buf, cap); }

/* Runs uvmrt-mlp; returns the loss log's text (caller frees). */
static char *mlp_losses(const char *args, const char *tag)
{
    char prog[4096], log[256], cmd[8192];
    const char *mlp = mlp_program(prog, sizeof prog);
    snprintf(log, sizeof log, "/tmp/uvmrt-gpu-mlp-%d-%s.losses", (int)getpid(), tag);
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "'%s' --backend cuda --quiet --layers 4 --hidden 1024 --rows 1024 "
             "--steps 5 --loss-log %s %s 2>&1", mlp, log, args);
    strbuf_t out = {0};
    int status = run_command(cmd, &out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x:\n%s", cmd, status,
              out.s ? out.s : "");
    cr_assert(out.s && strstr(out.s, "sim backend") == NULL, "ran on sim:\n%s", out.s);
    FILE *l = fopen(log, "r");
    cr_assert_not_null(l, "%s: no loss log:\n%s", log, out.s ? out.s : "");
    char *text = calloc(1, 1 << 16);
    cr_assert_not_null(text);
    size_t got = fread(text, 1, (1 << 16) - 1, l);
    text[got] = '\0';
    fclose(l);
    unlink(log);
    free(out.s);
    return text;
}

static void mlp_losses_independent_of_placement_in_memory(const char *extra, const char *name)
{
    skip_without_gpu();
    char args[512];
    snprintf(args, sizeof args, "--policy none %s", extra);
    char *ref = mlp_losses(args, "none");
    cr_assert(strlen(ref) > 0);
    static const char *const runs[][2] = {
        {"--policy prefetch --budget 24M", "prefetch"},
        {"--policy demand --budget 24M", "demand"},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        snprintf(args, sizeof args, "%s %s", runs[k][0], extra);
        char *got = mlp_losses(args, runs[k][1]);
        cr_expect_str_eq(got, ref, "%s: losses under %s differ from the resident run", name,
                         runs[k][1]);
        free(got);
    }
    free(ref);
}

Test(gpu, mlp_losses_bitwise_resident_vs_budget_gpu_optimizer, .timeout = 600)
{
    mlp_losses_independent_of_placement_in_memory("--optimizer-on gpu", "gpu optimizer");
}

Test(gpu, mlp_losses_bitwise_resident_vs_budget_cpu_optimizer, .timeout = 600)
{
    mlp_losses_independent_of_placement_in_memory("--optimizer-on cpu", "cpu optimizer");
}

Test(gpu, mlp_losses_bitwise_resident_vs_budget_fp16, .timeout = 600)
{
    mlp_losses_independent_of_placement_in_memory("--optimizer-on gpu --precision fp16",
                                                  "fp16");
}

/* The CPU and GPU AdamW round every operation alike (train_math.h), so the two
 * placements train to the same bits too. */
Test(gpu, mlp_losses_bitwise_gpu_vs_cpu_optimizer, .timeout = 600)
{
    skip_without_gpu();
    char *gpu = mlp_losses("--policy none --optimizer-on gpu", "gpu");
    char *cpu = mlp_losses("--policy none --optimizer-on cpu", "cpu");
    char *mixed = mlp_losses("--policy none --cpu-layers 2", "mixed");
    cr_expect_str_eq(cpu, gpu, "losses with the CPU optimizer differ from the GPU optimizer's");
    cr_expect_str_eq(mixed, gpu, "losses with half the blocks on the CPU optimizer differ");
    free(gpu);
    free(cpu);
    free(mixed);
}

/* A recomputing block runs its forward GEMM again (same cuBLAS call, workspace and
 * inputs) in backward: the losses do not depend on --recompute (none, the first 2
 * blocks, all, auto), with the optimizer on the GPU and split, resident and under a
 * small budget. */
Test(gpu, mlp_losses_bitwise_across_recompute, .timeout = 600)
{
    skip_without_gpu();
    static const char *const where[] = {"--policy none --cpu-layers 0",
                                        "--policy prefetch --budget 24M --cpu-layers 2"};
    static const char *const rc[] = {"none", "2", "all", "auto"};
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        char args[512], tag[32];
        char *ref = NULL;
        for (size_t k = 0; k < sizeof rc / sizeof rc[0]; k++) {
            snprintf(args, sizeof args, "%s --recompute %s", where[w], rc[k]);
            snprintf(tag, sizeof tag, "rc%zu-%zu", w, k);
            char *got = mlp_losses(args, tag);
            cr_assert(strlen(got) > 0, "%s: no losses", args);
            if (ref == NULL) {
                ref = got;
                continue;
            }
            cr_expect_str_eq(got, ref, "%s: losses differ from --recompute none", args);
            free(got);
        }
        free(ref);
    }
}

Test(gpu, mlp_losses_bitwise_resident_vs_budget_mixed_optimizer, .timeout = 600)
{
    mlp_losses_independent_of_placement_in_memory("--cpu-layers 2", "mixed optimizer");
}

/* The CPU optimizer's own times: per step in the result JSON, and per block in the
 * recorded step (host_ns, from uvmrt_host_work_measured), so that the re-play and a
 * review time that CPU work as it ran. */
Test(gpu, mlp_cpu_times_reach_the_result_and_the_record, .timeout = 600)
{
    skip_without_gpu();
    char prog[4096], res[256], rec[256], cmd[8192];
    const char *mlp = mlp_program(prog, sizeof prog);
    snprintf(res, sizeof res, "/tmp/uvmrt-gpu-mlp-%d-cpu.json", (int)getpid());
    snprintf(rec, sizeof rec, "/tmp/uvmrt-gpu-mlp-%d-cpu.rec.json", (int)getpid());
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "UVMRT_RECORD=%s '%s' --backend cuda --quiet --layers 4 --hidden 1024 --rows 1024 "
             "--steps 5 --policy prefetch --budget 24M --cpu-layers 2 --result-json %s 2>&1", rec, mlp, res);
    strbuf_t out = {0};
    int status = run_command(cmd, &out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x:\n%s", cmd, status, out.s ? out.s : "");
    json_t *r = json_load_file(res, 0, NULL);
    cr_assert_not_null(r, "%s: no result JSON:\n%s", res, out.s ? out.s : "");
    json_t *adamw = json_object_get(json_object_get(r, "cpu_optimizer"), "adamw_ms");
    cr_assert_eq(json_array_size(adamw), 5, "cpu_optimizer.adamw_ms: %s", json_dumps(r, 0));
    for (size_t s = 0; s < 5; s++) cr_expect(json_number_value(json_array_get(adamw, s)) > 0, "step %zu", s + 1);
    json_decref(r);
    json_t *q = json_load_file(rec, 0, NULL);
    cr_assert_not_null(q, "%s: no record", rec);
    json_t *calls = json_object_get(q, "calls");
    int cpu_calls = 0, timed = 0;
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *c = json_array_get(calls, i);
        if (json_integer_value(json_object_get(c, "host_bytes")) == 0) continue;
        cpu_calls++;
        timed += json_integer_value(json_object_get(c, "host_ns")) > 0;
    }
    cr_expect_eq(cpu_calls, 2);
    cr_expect_eq(timed, 2, "the record's CPU calls carry the measured host_ns");
    json_decref(q);
    unlink(res);
    unlink(rec);
    free(out.s);
}

/* A deep net's loss is far below 1 (the signal shrinks through the GELU blocks):
 * the step lines and the summary must still show it, with significant digits,
 * where "%.6f" printed "loss 0.000000 -> 0.000000". Also: a --trace is written. */
Test(gpu, mlp_deep_net_loss_is_visible, .timeout = 600)
{
    skip_without_gpu();
    char prog[4096], cmd[8192], trace[256];
    const char *mlp = mlp_program(prog, sizeof prog);
    snprintf(trace, sizeof trace, "/tmp/uvmrt-gpu-mlp-%d.trace.json", (int)getpid());
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "'%s' --backend cuda --quiet --policy none --layers 48 --hidden 1024 "
             "--rows 1024 --steps 3 --trace %s 2>&1", mlp, trace);
    strbuf_t out = {0};
    int status = run_command(cmd, &out);
    const char *text = out.s ? out.s : "";
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x:\n%s", cmd, status, text);
    const char *l = strstr(text, "; loss ");
    cr_assert_not_null(l, "no loss in the summary:\n%s", text);
    double first = 0, last = 0;
    cr_assert_eq(sscanf(l, "; loss %lf -> %lf", &first, &last), 2, "%s", l);
    cr_expect(first > 0 && last > 0, "losses %g -> %g print as zero:\n%s", first, last, text);
    cr_expect_null(strstr(text, "loss 0.000000"), "%s", text);
    json_error_t err;
    json_t *t = json_load_file(trace, 0, &err);
    cr_expect_not_null(t, "--trace %s: %s\n%s", trace, err.text, text);
    json_decref(t);
    unlink(trace);
    sb_free(&out);
}

/* ------------------------------------------------------------------ the planner's model of this GPU */
/* Without UVMRT_PROFILE (auto), a cuda context's profile is this GPU's built-in one
 * (or the nearest estimate), the model uvmrt_choose rehearses on: not the sim's
 * consumer-8g, which made an H200 put a resident GPT's optimizer on the CPU. */
Test(gpu, profile_auto_models_the_device_found, .timeout = 120)
{
    uvmrt_context_t *ctx = cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, 64 * MIB);
    char name[256], why[256];
    uint64_t memory = 0;
    int matched = 0;
    cr_assert_eq(uvmrt__gpu_identity(0, name, sizeof name, &memory, why, sizeof why), 0, "%s", why);
    const uvmrt_profile_t *want = uvmrt__profile_for_device(name, memory, &matched);
    cr_expect_str_eq(uvmrt_context_profile(ctx)->name, want->name, "device '%s'", name);
    if (strstr(name, "NVIDIA H200") != NULL) cr_expect_str_eq(uvmrt_context_profile(ctx)->name, "h200");
    uvmrt_context_destroy(ctx);
}

/* uvmrt-gpt: UVMRT_GPT, else beside the demo. */
static const char *gpt_program(char *buf, size_t cap) { return example_program("UVMRT_GPT", "gpt/uvmrt-gpt", buf, cap); }

/* A GPT-2 350M (--depth 24: 13.4 GiB of tensors) with everything resident (policy
 * none) on a GPU with room for it: the automatic choice keeps every AdamW on the GPU
 * and recomputes nothing (rehearsed on the 8 GB consumer-8g model, it put 26 of the
 * 26 layers' AdamW on the CPU). */
Test(gpu, gpt_resident_auto_keeps_the_optimizer_on_a_roomy_gpu, .timeout = 600)
{
    uvmrt_context_t *ctx = cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, 0);
    uint64_t room = uvmrt_context_budget(ctx); /* free memory less the reserve */
    uvmrt_context_destroy(ctx);
    if (room < 24ull * GIB) cr_skip_test("%.1f GiB free: the test needs 24", (double)room / GIB);
    char prog[4096], res[256], cmd[8192];
    const char *gpt = gpt_program(prog, sizeof prog);
    snprintf(res, sizeof res, "/tmp/uvmrt-gpu-gpt-%d.json", (int)getpid());
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "'%s' --backend cuda --quiet --depth 24 --policy none --steps 2 --result-json %s 2>&1",
             gpt, res);
    strbuf_t out = {0};
    int status = run_command(cmd, &out);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: status %#x:\n%s", cmd, status, out.s ? out.s : "");
    json_t *r = json_load_file(res, 0, NULL);
    cr_assert_not_null(r, "%s: no result JSON:\n%s", res, out.s ? out.s : "");
    cr_expect_eq(json_integer_value(json_object_get(r, "cpu_layers")), 0, "%s", out.s);
    cr_expect_eq(json_integer_value(json_object_get(r, "recompute_blocks")), 0, "%s", out.s);
    json_decref(r);
    unlink(res);
    sb_free(&out);
}

/* ------------------------------------------------------------------ uvmrt_adamw_gpu */
/* Declared here so that this file needs no CUDA header (cudaError_t is an int enum). */
extern int cudaDeviceSynchronize(void);

/* One array per AdamW operand in one host-placed uvmrt tensor (so the kernel reads
 * and writes host memory over the link, as the PyTorch binding's layers do), and the
 * same values in malloc'd copies for uvmrt_adamw_cpu. pinned: the tensor in page-locked
 * memory of its own (UVMRT_PLACE_PINNED), and back to its managed address after. */
static void adamw_gpu_against_cpu_in(int order, int with_scale, size_t offset, int pinned)
{
    uvmrt_context_t *ctx = cuda_ctx_or_skip(UVMRT_POLICY_PREFETCH, 256 * MIB);
    const size_t n = 3 * 65536 + 7; /* a tail the vector kernel leaves to the scalar one */
    const size_t stride = (n + 3) / 4 * 4 + 4; /* each array 16-byte aligned when offset is 0 */
    size_t bytes = 5 * stride * sizeof(float) + stride * 2 + 64;
    uvmrt_tensor_desc_t d = {"adamw", -1, UVMRT_ROLE_OPTIMIZER_STATE, bytes};
    uvmrt_tensor_t *t = NULL;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK, "%s", log_text());
    void *managed = uvmrt_tensor_ptr(t);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, t, pinned ? UVMRT_PLACE_PINNED : UVMRT_PLACE_HOST), UVMRT_OK,
                 "%s", log_text());
    float *base = uvmrt_tensor_ptr(t);
    cr_assert(pinned ? (void *)base != managed : (void *)base == managed);
    float *w = base + offset, *m = w + stride, *v = m + stride, *g = v + stride;
    float *scale = base + 4 * stride;
    uint16_t *half = (uint16_t *)(base + 5 * stride) + offset;
    float *cw = malloc(n * 4), *cm = malloc(n * 4), *cv = malloc(n * 4), *cg = malloc(n * 4);
    uint16_t *chalf = malloc(n * 2);
    cr_assert(cw && cm && cv && cg && chalf);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float u = (float)(x >> 40) / (float)(1u << 24) - 0.5f;
        cw[i] = w[i] = u;
        cm[i] = m[i] = u * 0.01f;
        cv[i] = v[i] = u * u * 1e-4f;
        cg[i] = g[i] = u * 3.0f - 0.25f;
    }
    *scale = 0.37109375f;
    for (uint64_t step = 1; step <= 3; step++) {
        uvmrt_adamw_t hp;
        uvmrt_adamw_init(&hp);
        hp.lr = 3e-4, hp.weight_decay = 0.1, hp.step = step, hp.order = order;
        hp.grad_scale = with_scale ? *scale : 0.5;
        uvmrt_adamw_t hg = hp;
        hg.grad_scale = 1e30; /* replaced by *scale when with_scale */
        if (!with_scale) hg.grad_scale = hp.grad_scale;
        cr_assert_eq(uvmrt_adamw_gpu(&hg, w, m, v, g, n, half, with_scale ? scale : NULL, NULL), UVMRT_OK);
        cr_assert_eq(uvmrt_adamw_cpu(&hp, cw, cm, cv, cg, n, chalf), UVMRT_OK);
        cr_assert_eq(cudaDeviceSynchronize(), 0);
    }
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += memcmp(&w[i], &cw[i], 4) != 0 || memcmp(&m[i], &cm[i], 4) != 0 ||
               memcmp(&v[i], &cv[i], 4) != 0 || half[i] != chalf[i];
    cr_expect_eq(bad, 0, "%zu of %zu elements differ between the GPU's and the CPU's AdamW (order %d)", bad, n,
                 order);
    if (pinned) { /* back at the managed address, with what the kernel wrote */
        cr_assert_eq(uvmrt_tensor_set_placement(ctx, t, UVMRT_PLACE_AUTO), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_tensor_ptr(t), managed);
        const float *mw = (const float *)managed + offset;
        cr_expect_eq(memcmp(mw, cw, n * 4), 0, "the weights did not come back to the managed address");
    }
    free(cw), free(cm), free(cv), free(cg), free(chalf);
    cr_assert_eq(uvmrt_tensor_free(ctx, t), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

static void adamw_gpu_against_cpu(int order, int with_scale, size_t offset)
{
    adamw_gpu_against_cpu_in(order, with_scale, offset, 0);
}

Test(gpu, adamw_gpu_equals_cpu_uvmrt_order, .timeout = 120) { adamw_gpu_against_cpu(UVMRT_ADAMW_ORDER_UVMRT, 0, 0); }
Test(gpu, adamw_gpu_equals_cpu_torch_order, .timeout = 120) { adamw_gpu_against_cpu(UVMRT_ADAMW_ORDER_TORCH, 0, 0); }
Test(gpu, adamw_gpu_device_scale_equals_cpu, .timeout = 120) { adamw_gpu_against_cpu(UVMRT_ADAMW_ORDER_TORCH, 1, 0); }
Test(gpu, adamw_gpu_unaligned_equals_cpu, .timeout = 120) { adamw_gpu_against_cpu(UVMRT_ADAMW_ORDER_TORCH, 0, 1); }
/* the link's update on state in page-locked memory (UVMRT_PLACE_PINNED) */
Test(gpu, adamw_gpu_on_pinned_state_equals_cpu, .timeout = 120)
{
    adamw_gpu_against_cpu_in(UVMRT_ADAMW_ORDER_TORCH, 0, 0, 1);
}

/* Over host memory the kernel takes UVMRT_ADAMW_LINK_BLOCKS blocks: one block strides over
 * every element, and the bits are the CPU's still. */
Test(gpu, adamw_gpu_on_pinned_state_in_one_block_equals_cpu, .timeout = 120)
{
    cr_assert_eq(setenv("UVMRT_ADAMW_LINK_BLOCKS", "1", 1), 0);
    adamw_gpu_against_cpu_in(UVMRT_ADAMW_ORDER_TORCH, 1, 0, 1);
    cr_assert_eq(setenv("UVMRT_ADAMW_LINK_BLOCKS", "3", 1), 0);
    adamw_gpu_against_cpu_in(UVMRT_ADAMW_ORDER_UVMRT, 0, 1, 0);
    unsetenv("UVMRT_ADAMW_LINK_BLOCKS");
}

/* ------------------------------------------------------------------ the disk tier */
extern int cudaStreamCreate(void **stream);
extern int cudaStreamDestroy(void *stream);

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

/* The disk tier on cuda: a 256 MiB moment that only a CPU call uses is read back from
 * its file before the call, updated there, written back after it, and its host pages
 * are given back (CUDA 13's discard): the process's resident set falls by most of it
 * once the write-back is waited for, and the next step reads the contents back bit for
 * bit. On CUDA 12 (no discard) the copy stays in host memory, and only the contents are
 * checked. */
Test(gpu, disk_tier_gives_a_written_tensors_host_pages_back, .timeout = 300)
{
    skip_without_gpu();
    char dir[256];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/uvmrt-gpu-tier.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_CUDA;
    p.policy = UVMRT_POLICY_PREFETCH;
    p.budget_bytes = 64 * MIB;
    p.ignore_env = 1;
    p.log_fn = log_capture;
    p.spill_dir = dir;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    int layer;
    cr_assert_eq(uvmrt_layer_add(ctx, "block0", &layer), UVMRT_OK);
    const size_t bytes = 256 * MIB, n = bytes / sizeof(float);
    uvmrt_tensor_desc_t d[2] = {{"w", layer, UVMRT_ROLE_WEIGHT, 2 * MIB},
                                {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, bytes}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, t[1], UVMRT_PLACE_HOST), UVMRT_OK, "%s", log_text());
    float *m = uvmrt_tensor_ptr(t[1]);
    for (size_t i = 0; i < n; i++) m[i] = (float)(i & 0xffff);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, t[1], UVMRT_TIER_DISK), UVMRT_OK, "%s", log_text());
    void *cpu_stream = NULL; /* nothing runs on it: it names the CPU's calls */
    cr_assert_eq(cudaStreamCreate(&cpu_stream), 0);
    uvmrt_use_t use_m = {t[1], UVMRT_USE_READWRITE};
    int discards = uvmrt__be_has_discard(ctx);
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK, "%s", log_text());
        uvmrt_layer_call_t c;
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_FORWARD, NULL);
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_OPTIMIZER, (uvmrt_stream_t)cpu_stream);
        c.no_default_uses = 1;
        c.host_bytes = 7 * (uint64_t)bytes;
        c.uses = &use_m;
        c.n_uses = 1;
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
        for (size_t i = 0; i < n; i++) { /* read back from its file for this call */
            if (m[i] != (float)(i & 0xffff) + (float)s)
                cr_assert_fail("step %d: m[%zu] = %g, expected %g", s, i, m[i], (float)(i & 0xffff) + (float)s);
            m[i] += 1.0f; /* the CPU's update */
        }
        uint64_t held = rss_bytes();
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt__tier_poll(ctx, 1), UVMRT_OK, "%s", log_text()); /* the write-back done */
        uint64_t after = rss_bytes();
        cr_log_info("step %d: RSS %.1f MiB with the copy, %.1f MiB after its write-back (discard %s)", s,
                    (double)held / MIB, (double)after / MIB, discards ? "yes" : "no");
        if (discards)
            cr_expect_lt(after + bytes / 2, held, "step %d: RSS %llu -> %llu: the host pages were not given back", s,
                         (unsigned long long)held, (unsigned long long)after);
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)s, &ss), UVMRT_OK);
        cr_expect_eq(ss.spill_write_bytes, bytes, "step %d", s);
    }
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_expect_eq(sum.backend_errors, 0, "%s", log_text());
    uvmrt_context_destroy(ctx);
    cudaStreamDestroy(cpu_stream);
    cr_expect_eq(rmdir(dir), 0, "the tier's files are removed at destroy");
}
