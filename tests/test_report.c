/*
 * test_report.c -- the report writers: JSON and trace files parse with jansson
 * and carry the documented keys; CSV has one row per (step, layer, phase) that
 * ran; the text table has units, a totals row and marked offenders; UVMRT_TRACE
 * and UVMRT_REPORT=csv:PATH write at destroy.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/uvmrt-report-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void rm_file(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

/* A 6-layer net on sim, run for `steps` steps. */
static net_t *run(uvmrt_policy_t policy, int steps, const char *report, const char *trace)
{
    uvmrt_params_t p;
    sim_params(&p, policy, 16 * MIB, NULL);
    p.report = report;
    p.trace = trace;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, steps, NULL, NULL);
    return net;
}

static const char *const PHASE_KEYS[] = {"calls", "sampled_calls", "prefetch_bytes", "evict_bytes", "fault_count", "wait_ns",
                                         "gpu_faults", "fault_htod_bytes", "prefetch_htod_bytes",
                                         "driver_prefetch_htod_bytes", "evict_dtoh_bytes", "thrashing",
                                         "cpu_faults"};

Test(report, json_has_fault_keys)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_DEMAND, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s: %s", path, err.text);
    cr_expect_str_eq(json_string_value(json_object_get(root, "fault_stats_source")), "sim");
    json_t *un = json_object_get(root, "unattributed");
    cr_assert(json_is_object(un));
    cr_expect(json_is_integer(json_object_get(un, "records")));
    cr_expect(json_is_integer(json_object_get(un, "gpu_faults")));
    cr_expect(json_is_integer(json_object_get(root, "fault_records_lost")));
    cr_expect_eq(json_integer_value(json_object_get(root, "fault_records_lost")), 0);
    cr_expect(json_is_object(json_object_get(root, "fault_sampling")));
    json_t *layers = json_object_get(root, "layers");
    cr_assert_eq(json_array_size(layers), 6);
    uint64_t faults = 0;
    for (size_t l = 0; l < json_array_size(layers); l++) {
        json_t *fw = json_object_get(json_array_get(layers, l), "forward");
        cr_assert(json_is_object(fw));
        for (size_t k = 0; k < sizeof PHASE_KEYS / sizeof PHASE_KEYS[0]; k++)
            cr_expect(json_is_integer(json_object_get(fw, PHASE_KEYS[k])), "forward lacks %s", PHASE_KEYS[k]);
        faults += (uint64_t)json_integer_value(json_object_get(fw, "gpu_faults"));
    }
    cr_expect_gt(faults, 0);
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 3);
    cr_expect(json_is_integer(json_object_get(json_array_get(steps, 0), "gpu_faults")));
    json_decref(root);
    net_destroy(net);
    rm_file("r.json");
    rmdir(dir);
}

Test(report, csv_rows_are_steps_layers_phases)
{
    mkdir_tmp();
    const int steps = 4;
    net_t *net = run(UVMRT_POLICY_PREFETCH, steps, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.csv", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "csv", path), UVMRT_OK);
    char *text = file_slurp(path);
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    /* header + steps x layers x 3 phases (each phase runs in this net) */
    cr_expect_eq(lines, 1 + steps * 6 * 3, "%d lines:\n%s", lines, text);
    cr_expect_eq(strncmp(text, "policy,backend,fault_stats_source,step,layer,name,phase,", 56), 0);
    cr_expect_not_null(strstr(text, "\nprefetch,sim,sim,4,5,\"layer5\",optimizer,1,"), "%s", text);
    /* every row has as many fields as the header */
    int header_fields = 1;
    for (char *c = text; *c != '\n'; c++) header_fields += *c == ',';
    for (char *line = strchr(text, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        int f = 1;
        for (char *c = line; *c != '\n'; c++) f += *c == ',';
        cr_expect_eq(f, header_fields);
    }
    free(text);
    net_destroy(net);
    rm_file("r.csv");
    rmdir(dir);
}

Test(report, trace_parses_with_spans_copies_and_faults)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_PREFETCH, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "trace", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(ev));
    int layer_spans = 0, copies = 0, counters = 0;
    double last_end = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        cr_assert_not_null(ph);
        cr_assert_not_null(name);
        cr_expect(json_is_number(json_object_get(e, "ts")));
        cr_expect(json_is_integer(json_object_get(e, "pid")));
        cr_expect(json_is_integer(json_object_get(e, "tid")));
        if (strcmp(ph, "X") == 0) {
            cr_expect(json_number_value(json_object_get(e, "dur")) >= 0);
            int tid = (int)json_integer_value(json_object_get(e, "tid"));
            if (tid == 1) {
                layer_spans++;
                double ts = json_number_value(json_object_get(e, "ts"));
                cr_expect(ts + 1e-3 >= last_end, "spans in order: %f < %f", ts, last_end);
                last_end = ts + json_number_value(json_object_get(e, "dur"));
            } else {
                copies++;
                cr_expect(json_is_integer(json_object_get(json_object_get(e, "args"), "bytes")));
            }
        }
        if (strcmp(ph, "C") == 0) counters++;
    }
    cr_expect_eq(layer_spans, 3 * 6 * 3);
    cr_expect_gt(copies, 0);
    cr_expect_gt(counters, 0); /* step 1 runs like demand: faults */
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(ev, 3), "name")), "layer0 forward"));
    json_decref(root);
    net_destroy(net);
    rm_file("t.json");
    rmdir(dir);
}

Test(report, text_table_units_totals_offenders)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 2, NULL, NULL);
    mkdir_tmp();
    char path[256];
    snprintf(path, sizeof path, "%s/r.txt", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", path), UVMRT_OK);
    char *text = file_slurp(path);
    cr_expect_not_null(strstr(text, "MiB"), "%s", text);
    cr_expect_not_null(strstr(text, "\ntotal "), "%s", text);
    cr_expect_not_null(strstr(text, " *"), "%s", text);
    cr_expect_not_null(strstr(text, "* most faults"), "%s", text);
    cr_expect_not_null(strstr(text, "fault statistics: sim"), "%s", text);
    free(text);
    net_destroy(net);
    rm_file("r.txt");
    rmdir(dir);
}

Test(report, csv_and_trace_at_destroy)
{
    mkdir_tmp();
    char rep[300], trace[256], csv[256];
    snprintf(csv, sizeof csv, "%s/d.csv", dir);
    snprintf(rep, sizeof rep, "csv:%s", csv);
    snprintf(trace, sizeof trace, "%s/d.trace.json", dir);
    net_destroy(run(UVMRT_POLICY_PREFETCH, 2, rep, trace));
    char *text = file_slurp(csv);
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    cr_expect_eq(lines, 1 + 2 * 6 * 3);
    free(text);
    json_error_t err;
    json_t *root = json_load_file(trace, 0, &err);
    cr_expect_not_null(root, "%s", err.text);
    json_decref(root);
    rm_file("d.csv");
    rm_file("d.trace.json");
    rmdir(dir);
}

Test(report, env_trace_and_bad_format)
{
    env_clear_uvmrt();
    mkdir_tmp();
    char trace[256];
    snprintf(trace, sizeof trace, "%s/e.json", dir);
    setenv("UVMRT_TRACE", trace, 1);
    setenv("UVMRT_FAULT_STATS", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    uvmrt_summary_t s;
    uvmrt_summary_get(ctx, &s);
    cr_expect_str_eq(s.fault_stats_source, "none");
    cr_expect_eq(uvmrt_report_write(ctx, "xml", "-"), UVMRT_ERR_INVALID);
    cr_expect(log_contains("expected text, json, csv or trace"), "%s", log_text());
    uvmrt_context_destroy(ctx);
    cr_expect_eq(access(trace, R_OK), 0);
    setenv("UVMRT_FAULT_STATS", "2", 1);
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_expect(log_contains("UVMRT_FAULT_STATS='2'"), "%s", log_text());
    rm_file("e.json");
    rmdir(dir);
}

/* The clearer timeline (issue 10): the process's name, a global marker at each
 * step's start (numbered from 1), waits as slices of their own (B/E), and a
 * resident-bytes counter at each layer call. */
Test(report, trace_has_step_markers_waits_and_resident_bytes)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_PREFETCH, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "trace", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    const uvmrt_context_t *ctx = net->ctx;
    size_t waits = 0;
    for (size_t i = 0; i < ctx->n_spans; i++) waits += ctx->spans[i].wait_end_ns > ctx->spans[i].start_ns;
    int pname = 0, markers = 0, begins = 0, ends = 0, resident = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *args = json_object_get(e, "args");
        if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
            pname++;
            cr_expect_not_null(strstr(json_string_value(json_object_get(args, "name")), "policy prefetch"));
        } else if (strcmp(ph, "i") == 0) {
            markers++;
            char want[32];
            snprintf(want, sizeof want, "step %d", markers);
            cr_expect_str_eq(name, want, "steps numbered from 1, in order");
            cr_expect_str_eq(json_string_value(json_object_get(e, "s")), "g");
            /* at the start of the step's first layer call */
            const uvmrt_span_t *first = NULL;
            for (size_t k = 0; k < ctx->n_spans && first == NULL; k++)
                if (ctx->spans[k].step + 1 == (uint64_t)markers) first = &ctx->spans[k];
            cr_assert_not_null(first);
            cr_expect_float_eq(json_number_value(json_object_get(e, "ts")), first->start_ns / 1e3, 1e-6);
        } else if (strcmp(ph, "B") == 0 || strcmp(ph, "E") == 0) {
            cr_expect_str_eq(name, "wait for prefetches");
            if (ph[0] == 'B') begins++;
            else ends++;
        } else if (strcmp(ph, "C") == 0 && strcmp(name, "resident bytes") == 0) {
            resident++;
            cr_expect_leq(json_integer_value(json_object_get(args, "bytes")), (json_int_t)uvmrt_context_budget(ctx));
        }
    }
    cr_expect_eq(pname, 1);
    cr_expect_eq(markers, 3);
    cr_expect_eq(begins, (int)waits, "one wait slice per call that waited");
    cr_expect_eq(ends, begins);
    cr_expect_eq(resident, (int)ctx->n_spans, "one sample per layer call");
    json_decref(root);
    net_destroy(net);
    rm_file("t.json");
    rmdir(dir);
}
