/*
 * test_stats.c -- counters and reports (stats.c, report.c): bytes balance
 * against residency, per-layer counters sum to the step totals, bad queries,
 * and the JSON report (parsed back with jansson) agrees with the API.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "helpers.h"

static uvmrt_summary_t summary(uvmrt_context_t *ctx)
{
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    return s;
}

/* ------------------------------------------------------------------ balance */
/* Bytes in (prefetched or faulted) minus bytes out (evicted or discarded),
 * summed over the steps, is what is resident at the end (starting from 0). */
static void check_balance(uvmrt_policy_t policy, uint64_t budget, int steps)
{
    net_t *net = net_default_on_sim(policy, budget);
    uvmrt_context_t *ctx = net->ctx;
    cr_assert_eq(summary(ctx).resident_bytes, 0);
    for (int k = 0; k < steps; k++) {
        run_step(net, NULL, NULL);
        int64_t in = 0, out = 0;
        for (uint64_t i = 0; i <= (uint64_t)k; i++) {
            uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
            cr_assert_eq(uvmrt_step_stats_get(ctx, i, &st), UVMRT_OK);
            in += (int64_t)(st.prefetch_bytes + st.fault_bytes);
            out += (int64_t)(st.evict_bytes + st.discard_bytes);
        }
        uvmrt_summary_t s = summary(ctx);
        cr_expect_eq(in - out, (int64_t)s.resident_bytes,
                     "%s, budget %llu, after step %d: in %lld - out %lld != resident %llu", uvmrt_policy_name(policy),
                     (unsigned long long)budget, k + 1, (long long)in, (long long)out,
                     (unsigned long long)s.resident_bytes);
        /* the summary's totals are the same sums */
        uint64_t pf = 0, ev = 0, dc = 0, fc = 0, fb = 0;
        for (uint64_t i = 0; i <= (uint64_t)k; i++) {
            uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
            cr_assert_eq(uvmrt_step_stats_get(ctx, i, &st), UVMRT_OK);
            pf += st.prefetch_bytes;
            ev += st.evict_bytes;
            dc += st.discard_bytes;
            fc += st.fault_count;
            fb += st.fault_bytes;
        }
        cr_expect_eq(s.prefetch_bytes, pf);
        cr_expect_eq(s.evict_bytes, ev);
        cr_expect_eq(s.discard_bytes, dc);
        cr_expect_eq(s.fault_count, fc);
        cr_expect_eq(s.fault_bytes, fb);
    }
    uvmrt_summary_t s = summary(ctx);
    cr_expect_eq(s.steps, (uint64_t)steps);
    cr_expect_gt(s.evict_bytes + s.discard_bytes, 0, "%s budget %llu: nothing left the device",
                 uvmrt_policy_name(policy), (unsigned long long)budget);
    net_destroy(net);
}

Test(stats, balance_demand) { check_balance(UVMRT_POLICY_DEMAND, 16 * MIB, 5); }
Test(stats, balance_demand_tight) { check_balance(UVMRT_POLICY_DEMAND, 8 * MIB, 3); }
Test(stats, balance_prefetch) { check_balance(UVMRT_POLICY_PREFETCH, 16 * MIB, 5); }
Test(stats, balance_prefetch_tight) { check_balance(UVMRT_POLICY_PREFETCH, 8 * MIB, 4); }
Test(stats, balance_prefetch_roomy) { check_balance(UVMRT_POLICY_PREFETCH, 40 * MIB, 4); }

/* With streamed activations (host homing possible) the balance still holds:
 * remote traffic moves no tensor in or out. */
Test(stats, balance_with_streamed_activations)
{
    for (uint64_t budget = 8 * MIB; budget <= 24 * MIB; budget += 4 * MIB) {
        uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, budget, NULL);
        net_spec_t spec = net_spec_default();
        spec.stream_acts = 1;
        net_t *net = net_create(ctx, &spec);
        run_steps(net, 5, NULL, NULL);
        int64_t in = 0, out = 0;
        uint64_t rr = 0, rw = 0;
        for (uint64_t i = 0; i < 5; i++) {
            uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
            cr_assert_eq(uvmrt_step_stats_get(ctx, i, &st), UVMRT_OK);
            in += (int64_t)(st.prefetch_bytes + st.fault_bytes);
            out += (int64_t)(st.evict_bytes + st.discard_bytes);
            rr += st.remote_read_bytes;
            rw += st.remote_write_bytes;
        }
        uvmrt_summary_t s = summary(ctx);
        cr_expect_eq(in - out, (int64_t)s.resident_bytes, "budget %llu MiB: in %lld - out %lld != resident %llu",
                     (unsigned long long)(budget >> 20), (long long)in, (long long)out,
                     (unsigned long long)s.resident_bytes);
        cr_expect_eq(s.remote_read_bytes, rr);
        cr_expect_eq(s.remote_write_bytes, rw);
        net_destroy(net);
    }
}

/* ------------------------------------------------------------------ per layer vs per step */
static void check_layers_sum_to_steps(uvmrt_policy_t policy, uint64_t budget)
{
    net_t *net = net_default_on_sim(policy, budget);
    uvmrt_context_t *ctx = net->ctx;
    const int steps = 4;
    run_steps(net, steps, NULL, NULL);
    uvmrt_layer_stats_t sum = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < net->L; i++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
            cr_assert_eq(uvmrt_layer_stats_get(ctx, net->layer[i], (uvmrt_phase_t)p, &ls), UVMRT_OK);
            cr_expect_eq(ls.calls, (uint64_t)steps, "layer %d %s: %llu calls", i, uvmrt_phase_name((uvmrt_phase_t)p),
                         (unsigned long long)ls.calls);
            cr_expect_gt(ls.duration_ns, 0, "layer %d %s: no duration", i, uvmrt_phase_name((uvmrt_phase_t)p));
            sum.prefetch_bytes += ls.prefetch_bytes;
            sum.evict_bytes += ls.evict_bytes;
            sum.discard_bytes += ls.discard_bytes;
            sum.fault_count += ls.fault_count;
            sum.fault_bytes += ls.fault_bytes;
            sum.wait_ns += ls.wait_ns;
            sum.duration_ns += ls.duration_ns;
        }
    uvmrt_step_stats_t tot = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    memset(&tot, 0, sizeof tot);
    uint64_t step_ns = 0;
    for (uint64_t i = 0; i < (uint64_t)steps; i++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, i, &st), UVMRT_OK);
        tot.prefetch_bytes += st.prefetch_bytes;
        tot.evict_bytes += st.evict_bytes;
        tot.discard_bytes += st.discard_bytes;
        tot.fault_count += st.fault_count;
        tot.fault_bytes += st.fault_bytes;
        tot.wait_ns += st.wait_ns;
        step_ns += st.step_ns;
        cr_expect_gt(st.step_ns, 0);
    }
    cr_expect_eq(sum.prefetch_bytes, tot.prefetch_bytes);
    cr_expect_eq(sum.evict_bytes, tot.evict_bytes);
    cr_expect_eq(sum.discard_bytes, tot.discard_bytes);
    cr_expect_eq(sum.fault_count, tot.fault_count);
    cr_expect_eq(sum.fault_bytes, tot.fault_bytes);
    cr_expect_eq(sum.wait_ns, tot.wait_ns);
    /* each layer's work (200 us on sim) is inside its duration; durations fit in the steps */
    cr_expect_geq(sum.duration_ns, (uint64_t)steps * (uint64_t)net_calls_per_step(net) * net->spec.sim_ns);
    cr_expect_leq(sum.duration_ns + sum.wait_ns, step_ns);
    net_destroy(net);
}

Test(stats, layers_sum_to_steps_prefetch) { check_layers_sum_to_steps(UVMRT_POLICY_PREFETCH, 16 * MIB); }
Test(stats, layers_sum_to_steps_demand) { check_layers_sum_to_steps(UVMRT_POLICY_DEMAND, 16 * MIB); }

/* ------------------------------------------------------------------ bad queries */
Test(stats, bad_queries)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    log_reset();
    cr_expect_eq(uvmrt_layer_stats_get(ctx, net->L, UVMRT_PHASE_FORWARD, &ls), UVMRT_ERR_INVALID);
    cr_expect(log_contains("layer 6"), "%s", log_text());
    cr_expect_eq(uvmrt_layer_stats_get(ctx, -1, UVMRT_PHASE_FORWARD, &ls), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_stats_get(ctx, 0, (uvmrt_phase_t)3, &ls), UVMRT_ERR_INVALID);
    log_reset();
    cr_expect_eq(uvmrt_layer_stats_get(ctx, 0, UVMRT_PHASE_FORWARD, NULL), UVMRT_ERR_INVALID);
    cr_expect(log_contains("uvmrt_layer_stats_get: out is NULL"), "%s", log_text());
    cr_expect_eq(uvmrt_layer_stats_get(NULL, 0, UVMRT_PHASE_FORWARD, &ls), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_layer_stats_get(ctx, 0, UVMRT_PHASE_FORWARD, &ls), UVMRT_OK);
    cr_expect_eq(ls.calls, 0);
    cr_expect_eq(uvmrt_step_stats_get(ctx, 0, &st), UVMRT_ERR_INVALID, "no step completed yet");
    run_steps(net, 2, NULL, NULL);
    cr_expect_eq(uvmrt_step_stats_get(ctx, 1, &st), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_step_stats_get(ctx, 2, &st), UVMRT_ERR_INVALID);
    cr_expect(log_contains("step 2"), "%s", log_text());
    cr_expect_eq(uvmrt_step_stats_get(ctx, UINT64_MAX, &st), UVMRT_ERR_INVALID);
    log_reset();
    cr_expect_eq(uvmrt_step_stats_get(ctx, 0, NULL), UVMRT_ERR_INVALID);
    cr_expect(log_contains("uvmrt_step_stats_get: out is NULL"), "%s", log_text());
    cr_expect_eq(uvmrt_step_stats_get(NULL, 0, &st), UVMRT_ERR_INVALID);
    log_reset();
    cr_expect_eq(uvmrt_summary_get(ctx, NULL), UVMRT_ERR_INVALID);
    cr_expect(log_contains("uvmrt_summary_get: out is NULL"), "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_expect_eq(uvmrt_summary_get(NULL, &s), UVMRT_ERR_INVALID);
    /* the step in progress is not yet visible */
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_step_stats_get(ctx, 2, &st), UVMRT_ERR_INVALID);
    cr_expect_eq(summary(ctx).steps, 2);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_expect_eq(summary(ctx).steps, 3);
    net_destroy(net);
}

Test(stats, summary_fields)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    uvmrt_summary_t s = summary(ctx);
    cr_expect_eq(s.budget_bytes, 16 * MIB);
    cr_expect_eq(s.allocated_bytes, net_total_footprint(net));
    cr_expect_eq(s.steps, 0);
    cr_expect_eq(s.peak_resident_bytes, 0);
    run_steps(net, 3, NULL, NULL);
    s = summary(ctx);
    cr_expect_eq(s.steps, 3);
    cr_expect_gt(s.peak_resident_bytes, 0);
    cr_expect_leq(s.peak_resident_bytes, 16 * MIB);
    cr_expect_geq(s.plans_built, 1);
    uint64_t peak = 0;
    for (uint64_t i = 0; i < 3; i++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, i, &st), UVMRT_OK);
        if (st.peak_resident_bytes > peak) peak = st.peak_resident_bytes;
    }
    cr_expect_eq(s.peak_resident_bytes, peak, "summary peak is not the largest step peak");
    net_destroy(net);
}

/* ------------------------------------------------------------------ JSON report */
static char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/uvmrt-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert_not_null(d);
    return strdup(d);
}

/* Number of entries in dir other than . and ..; *other receives 1 when one of
 * them is not `only`. */
static int dir_entries(const char *dir, const char *only, int *other)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    *other = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        if (only == NULL || strcmp(e->d_name, only) != 0) *other = 1;
    }
    closedir(d);
    return n;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static uint64_t ju(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "key '%s' missing or not an integer", key);
    return (uint64_t)json_integer_value(v);
}

static void check_json(uvmrt_context_t *ctx, const net_t *net, const char *path, const char *policy, int steps)
{
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s: %s (line %d)", path, err.text, err.line);
    cr_assert(json_is_object(root));
    cr_expect_str_eq(json_string_value(json_object_get(root, "policy")), policy);
    cr_expect_str_eq(json_string_value(json_object_get(root, "backend")), "sim");
    uvmrt_summary_t s = summary(ctx);
    cr_expect_eq(ju(root, "budget_bytes"), s.budget_bytes);
    cr_expect_eq(ju(root, "peak_resident_bytes"), s.peak_resident_bytes);
    json_t *step_ns = json_object_get(root, "step_ns");
    cr_assert(json_is_array(step_ns));
    cr_assert_eq(json_array_size(step_ns), (size_t)steps);
    json_t *jsteps = json_object_get(root, "steps");
    cr_assert(json_is_array(jsteps), "no 'steps' array");
    cr_assert_eq(json_array_size(jsteps), (size_t)steps);
    for (int i = 0; i < steps; i++) {
        uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)i, &st), UVMRT_OK);
        json_t *v = json_array_get(step_ns, (size_t)i);
        cr_assert(json_is_integer(v));
        cr_expect_eq((uint64_t)json_integer_value(v), st.step_ns, "step_ns[%d]", i);
        json_t *o = json_array_get(jsteps, (size_t)i);
        cr_assert(json_is_object(o));
        cr_expect_eq(ju(o, "step_ns"), st.step_ns);
        cr_expect_eq(ju(o, "prefetch_bytes"), st.prefetch_bytes);
        cr_expect_eq(ju(o, "evict_bytes"), st.evict_bytes);
        cr_expect_eq(ju(o, "fault_count"), st.fault_count);
        cr_expect_eq(ju(o, "peak_resident_bytes"), st.peak_resident_bytes);
    }
    json_t *layers = json_object_get(root, "layers");
    cr_assert(json_is_array(layers));
    cr_assert_eq(json_array_size(layers), (size_t)net->L);
    static const char *const keys[] = {"prefetch_bytes", "evict_bytes", "fault_count", "fault_bytes", "wait_ns",
                                       "duration_ns"};
    for (int i = 0; i < net->L; i++) {
        json_t *lo = json_array_get(layers, (size_t)i);
        cr_assert(json_is_object(lo));
        char name[32];
        snprintf(name, sizeof name, "layer%d", i);
        cr_expect_str_eq(json_string_value(json_object_get(lo, "name")), name);
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            json_t *po = json_object_get(lo, uvmrt_phase_name((uvmrt_phase_t)p));
            cr_assert(json_is_object(po), "layer %d has no '%s' object", i, uvmrt_phase_name((uvmrt_phase_t)p));
            uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
            cr_assert_eq(uvmrt_layer_stats_get(ctx, net->layer[i], (uvmrt_phase_t)p, &ls), UVMRT_OK);
            const uint64_t want[] = {ls.prefetch_bytes, ls.evict_bytes, ls.fault_count, ls.fault_bytes, ls.wait_ns,
                                     ls.duration_ns};
            for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
                cr_expect_eq(ju(po, keys[k]), want[k], "layer %d %s %s", i, uvmrt_phase_name((uvmrt_phase_t)p), keys[k]);
        }
    }
    json_decref(root);
}

Test(stats, json_report_matches_api)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    run_steps(net, 3, NULL, NULL);
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/report.json", dir);
    cr_assert_eq(uvmrt_report_write(ctx, "json", path), UVMRT_OK, "%s", log_text());
    int other;
    cr_expect_eq(dir_entries(dir, "report.json", &other), 1);
    cr_expect_eq(other, 0, "leftover files beside the report");
    check_json(ctx, net, path, "prefetch", 3);
    /* overwriting an existing report works the same way */
    run_step(net, NULL, NULL);
    cr_assert_eq(uvmrt_report_write(ctx, "json", path), UVMRT_OK);
    cr_expect_eq(dir_entries(dir, "report.json", &other), 1);
    cr_expect_eq(other, 0);
    check_json(ctx, net, path, "prefetch", 4);
    rm_dir(dir);
    free(dir);
    net_destroy(net);
}

Test(stats, json_report_demand_no_steps)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, 16 * MIB);
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    cr_expect_str_eq(json_string_value(json_object_get(root, "policy")), "demand");
    cr_expect_eq(json_array_size(json_object_get(root, "step_ns")), 0);
    json_decref(root);
    rm_dir(dir);
    free(dir);
    net_destroy(net);
}

Test(stats, text_report)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    run_steps(net, 2, NULL, NULL);
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/r.txt", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", path), UVMRT_OK);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    cr_expect_not_null(strstr(buf, "policy prefetch"), "%s", buf);
    cr_expect_not_null(strstr(buf, "layer5"), "%s", buf);
    cr_expect_not_null(strstr(buf, "optimizer"), "%s", buf);
    cr_expect_not_null(strstr(buf, "step ms (steps 1.."), "%s", buf);
    rm_dir(dir);
    free(dir);
    net_destroy(net);
}

Test(stats, report_at_destroy_from_env)
{
    env_clear_uvmrt();
    char *dir = make_tmpdir();
    char path[512], var[600];
    snprintf(path, sizeof path, "%s/at-destroy.json", dir);
    snprintf(var, sizeof var, "json:%s", path);
    setenv("UVMRT_REPORT", var, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 2, NULL, NULL);
    struct stat sb;
    cr_expect_neq(stat(path, &sb), 0, "the report exists before destroy");
    net_destroy(net);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "no report at destroy: %s", err.text);
    cr_expect_str_eq(json_string_value(json_object_get(root, "policy")), "demand");
    cr_expect_eq(json_array_size(json_object_get(root, "step_ns")), 2);
    json_decref(root);
    int other;
    cr_expect_eq(dir_entries(dir, "at-destroy.json", &other), 1);
    cr_expect_eq(other, 0);
    rm_dir(dir);
    free(dir);
}

Test(stats, report_at_destroy_from_params)
{
    char *dir = make_tmpdir();
    char path[512], rep[600];
    snprintf(path, sizeof path, "%s/p.txt", dir);
    snprintf(rep, sizeof rep, "text:%s", path);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.report = rep;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    memset(rep, 0, sizeof rep); /* params.report is copied */
    uvmrt_context_destroy(ctx);
    struct stat sb;
    cr_expect_eq(stat(path, &sb), 0, "no text report at destroy");
    rm_dir(dir);
    free(dir);
}

/* A report is an ordinary file: its mode follows the umask like any file the
 * program writes (0644 under umask 022), not the 0600 of a temporary file. */
Test(stats, report_file_mode_follows_umask)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    umask(022);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", path), UVMRT_OK);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0644, "report mode %o, want 644 (umask 022)", (unsigned)(sb.st_mode & 0777));
    rm_dir(dir);
    free(dir);
    net_destroy(net);
}

Test(stats, report_bad_format_and_io)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 16 * MIB);
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/r.xml", dir);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "xml", path), UVMRT_ERR_INVALID);
    cr_expect(log_contains("'xml'"), "%s", log_text());
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, NULL, path), UVMRT_ERR_INVALID);
    cr_expect(log_contains("format is NULL: expected text, json, csv or trace"), "%s", log_text());
    cr_expect_eq(uvmrt_report_write(NULL, "json", path), UVMRT_ERR_INVALID);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "json", ""), UVMRT_ERR_INVALID);
    cr_expect(log_contains("path is empty"), "%s", log_text());
    int other;
    cr_expect_eq(dir_entries(dir, NULL, &other), 0, "a rejected report left a file");
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "json", "/nonexistent-uvmrt-dir/r.json"), UVMRT_ERR_IO);
    cr_expect(log_contains("/nonexistent-uvmrt-dir/r.json"), "message does not name the path:\n%s", log_text());
    /* a directory at the path is refused, not replaced */
    char sub[600];
    snprintf(sub, sizeof sub, "%s/adir", dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "json", sub), UVMRT_ERR_IO);
    cr_expect(log_contains("it is a directory"), "%s", log_text());
    cr_expect_eq(dir_entries(dir, "adir", &other), 1, "a failed report left its temporary file");
    cr_expect_eq(other, 0);
    rmdir(sub);
    rm_dir(dir);
    free(dir);
    net_destroy(net);
}

/* ------------------------------------------------------------------ one counter list */
/* uvmrt__stat_add adds to exactly the counter it names: the (layer, phase) totals and,
 * when the list gives it a step field, the step in progress. */
Test(stats, stat_add_each_own_counter)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    uint64_t v = 0;
#define ONE(name, tag, src, step, ...)                                                                           \
    UVMRT__OWN_##src({                                                                                           \
        uvmrt_layer_stats_t before = ctx->tensors.layers[1].stats[UVMRT_PHASE_BACKWARD];                         \
        uvmrt_step_stats_t sbefore = ctx->stats.cur;                                                             \
        v += 7;                                                                                                  \
        uvmrt__stat_add(ctx, 1, UVMRT_PHASE_BACKWARD, STAT_##tag, v);                                            \
        uvmrt_layer_stats_t after = ctx->tensors.layers[1].stats[UVMRT_PHASE_BACKWARD];                          \
        cr_expect_eq(after.name, before.name + v, "%s", #name);                                                  \
        after.name = before.name;                                                                                \
        cr_expect_eq(memcmp(&after, &before, sizeof after), 0, "STAT_%s changed another counter", #tag);         \
        UVMRT__IF_##step(cr_expect_eq(ctx->stats.cur.name, sbefore.name + v, "step %s", #name);                  \
                         ctx->stats.cur.name = sbefore.name;)                                                    \
        cr_expect_eq(memcmp(&ctx->stats.cur, &sbefore, sizeof sbefore), 0, "STAT_%s changed the step", #tag);    \
    })
    UVMRT_COUNTERS(ONE)
#undef ONE
    cr_expect_gt(v, 0);
    net_destroy(net);
}

/* The summary sums exactly the summary = 1 counters of every (layer, phase), and the
 * driver counters of a counter set reach the layer and step fields of their names. */
Test(stats, summary_and_fold_follow_the_list)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, 16 * MIB);
    uvmrt_context_t *ctx = net->ctx;
    uint64_t k = 0;
#define SET(name, ...)                                                                                           \
    k++;                                                                                                         \
    ctx->tensors.layers[0].stats[UVMRT_PHASE_FORWARD].name = k;                                                  \
    ctx->tensors.layers[2].stats[UVMRT_PHASE_OPTIMIZER].name = 100 * k;
    UVMRT_COUNTERS(SET)
#undef SET
    uvmrt_summary_t s = summary(ctx);
    k = 0;
#define CHECK(name, tag, src, step, sum, ...) \
    k++;                                      \
    UVMRT__IF_##sum(cr_expect_eq(s.name, 101 * k, "summary %s", #name);)
    UVMRT_COUNTERS(CHECK)
#undef CHECK
    uvmrt_fcount_t fc;
    for (int i = 0; i < FC_COUNT; i++) fc.v[i] = 1000u + (uint64_t)i;
    uvmrt_layer_stats_t l = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    memset(&l, 0, sizeof l);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    memset(&st, 0, sizeof st);
    uvmrt__stat_add_fc(ctx, 3, UVMRT_PHASE_FORWARD, &fc, &st, &l);
#define FOLD(name, tag, src, step, ...)                                                                          \
    UVMRT__DRIVER_##src(cr_expect_eq(l.name, fc.v[FC_##tag], "row %s", #name);                                   \
                        cr_expect_eq(ctx->tensors.layers[3].stats[UVMRT_PHASE_FORWARD].name, fc.v[FC_##tag]);    \
                        UVMRT__IF_##step(cr_expect_eq(st.name, fc.v[FC_##tag], "step %s", #name);))
    UVMRT_COUNTERS(FOLD)
#undef FOLD
    net_destroy(net);
}

/* Summing steps covers every step counter of the list and the step-only fields. */
Test(stats, step_stats_add_follows_the_list)
{
    uvmrt_step_stats_t a = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), b = a;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    uint64_t k = 0;
#define SET(name, tag, src, step, ...) UVMRT__IF_##step(k++; a.name = k; b.name = 10 * k;)
    UVMRT_COUNTERS(SET)
#undef SET
    cr_assert_gt(k, 0);
    a.step_ns = 5, b.step_ns = 7;
    a.peak_resident_bytes = 9, b.peak_resident_bytes = 4;
    a.h2d_busy_ns = 1, b.h2d_busy_ns = 2;
    a.d2h_busy_ns = 3, b.d2h_busy_ns = 4;
    a.fault_sampled = 1, b.fault_sampled = 1;
    uvmrt__step_stats_add(&a, &b);
    k = 0;
#define CHECK(name, tag, src, step, ...) UVMRT__IF_##step(k++; cr_expect_eq(a.name, 11 * k, "%s", #name);)
    UVMRT_COUNTERS(CHECK)
#undef CHECK
    cr_expect_eq(a.step_ns, 12);
    cr_expect_eq(a.peak_resident_bytes, 9);
    cr_expect_eq(a.h2d_busy_ns, 3);
    cr_expect_eq(a.d2h_busy_ns, 7);
    cr_expect_eq(a.fault_sampled, 2);
}
