/*
 * test_steady.c -- the recording step kept apart (src/steady.c): the text
 * report's per-layer table and its marks sum steps 2..N, step 1 has its own
 * table and JSON object, and steps are numbered from 1 in the CSV and trace.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "steady.h"

#define BUDGET (16 * MIB)

static char *report_of(uvmrt_context_t *ctx, const char *fmt)
{
    char path[] = "/tmp/uvmrt-steady-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(uvmrt_report_write(ctx, fmt, path), UVMRT_OK, "%s", log_text());
    char *text = file_slurp(path);
    unlink(path);
    return text;
}

/* The calls column of the first row "name phase" at or after from. */
static unsigned long long calls_after(const char *from, const char *name, const char *phase, const char **at)
{
    char key[64];
    snprintf(key, sizeof key, "\n%-16s %-9s", name, phase);
    const char *p = strstr(from, key);
    cr_assert_not_null(p, "no row %s %s in:\n%s", name, phase, from);
    unsigned long long calls = 0;
    cr_assert_eq(sscanf(p + strlen(key), "%llu", &calls), 1);
    *at = p + strlen(key);
    return calls;
}

Test(steady, text_table_excludes_the_recording_step)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, BUDGET);
    run_steps(net, 4, NULL, NULL);
    char *t = report_of(net->ctx, "text");
    const char *head = strstr(t, "per layer and phase, steps 2..4 (the steady state");
    cr_assert_not_null(head, "%s", t);
    const char *at = head;
    cr_assert_eq(calls_after(head, "layer0", "forward", &at), 3, "steps 2, 3 and 4");
    const char *rec = strstr(at, "recording step (step 1");
    cr_assert_not_null(rec, "%s", t);
    cr_assert_eq(calls_after(rec, "layer0", "forward", &at), 1, "step 1 alone");
    free(t);
    net_destroy(net);
}

Test(steady, steady_rows_are_the_totals_less_step_1)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 3, NULL, NULL);
    uvmrt_context_t *ctx = net->ctx;
    cr_assert(uvmrt__steady_split(ctx));
    for (int l = 0; l < net->L; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t all = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t), st = all, rec = all, want = all;
            cr_assert_eq(uvmrt_layer_stats_get(ctx, l, (uvmrt_phase_t)p, &all), UVMRT_OK);
            uvmrt__steady_layer(ctx, l, p, &st);
            uvmrt__steady_recording(ctx, l, p, &rec);
            /* step 1 from the history rows (step 0 internally), independently */
            memset(&want, 0, sizeof want);
            for (size_t i = 0; i < ctx->hist.n_rows; i++)
                if (ctx->hist.rows[i].step == 0 && ctx->hist.rows[i].layer == l && ctx->hist.rows[i].phase == (uvmrt_phase_t)p)
                    want = ctx->hist.rows[i].s;
            cr_assert_eq(rec.calls, 1);
            cr_assert_eq(rec.prefetch_bytes, want.prefetch_bytes);
            cr_assert_eq(rec.fault_count, want.fault_count);
            cr_assert_eq(rec.wait_ns, want.wait_ns);
            cr_assert_eq(st.calls, all.calls - 1);
            cr_assert_eq(st.prefetch_bytes, all.prefetch_bytes - rec.prefetch_bytes);
            cr_assert_eq(st.fault_count, all.fault_count - rec.fault_count);
            cr_assert_eq(st.duration_ns, all.duration_ns - rec.duration_ns);
        }
    /* the plan brings everything in time: no steady-state faults, while step 1 faulted */
    uvmrt_layer_stats_t st = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t), rec = st;
    uint64_t steady_faults = 0, rec_faults = 0;
    for (int l = 0; l < net->L; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt__steady_layer(ctx, l, p, &st);
            uvmrt__steady_recording(ctx, l, p, &rec);
            steady_faults += st.fault_count;
            rec_faults += rec.fault_count;
        }
    cr_assert_eq(steady_faults, 0);
    cr_assert_gt(rec_faults, 0);
    net_destroy(net);
}

Test(steady, one_step_shows_the_recording_step)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 1, NULL, NULL);
    cr_assert_not(uvmrt__steady_split(net->ctx));
    char *t = report_of(net->ctx, "text");
    cr_assert_not_null(strstr(t, "per layer and phase, step 1 (the recording step only"), "%s", t);
    cr_assert_null(strstr(t, "recording step (step 1"), "no second table");
    const char *at;
    cr_assert_eq(calls_after(t, "layer0", "forward", &at), 1);
    free(t);
    net_destroy(net);
}

Test(steady, json_has_the_recording_step_apart)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 3, NULL, NULL);
    char *t = report_of(net->ctx, "json");
    json_error_t err;
    json_t *root = json_loads(t, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *rs = json_object_get(root, "recording_step");
    cr_assert_eq(json_integer_value(json_object_get(rs, "step")), 1);
    json_t *l0 = json_array_get(json_object_get(rs, "layers"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(l0, "name")), "layer0");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(l0, "forward"), "calls")), 1);
    json_t *all0 = json_array_get(json_object_get(root, "layers"), 0);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(all0, "forward"), "calls")), 3,
                 "layers sums every step");
    json_decref(root);
    free(t);
    net_destroy(net);
}

Test(steady, csv_and_trace_number_steps_from_1)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 2, NULL, NULL);
    char *csv = report_of(net->ctx, "csv");
    cr_assert_not_null(strstr(csv, "\nprefetch,sim,sim,1,0,\"layer0\",forward,"), "%s", csv);
    cr_assert_not_null(strstr(csv, "\nprefetch,sim,sim,2,0,\"layer0\",forward,"), "%s", csv);
    cr_assert_null(strstr(csv, "\nprefetch,sim,sim,0,"), "no step 0: %s", csv);
    free(csv);
    char *tr = report_of(net->ctx, "trace");
    json_error_t err;
    json_t *root = json_loads(tr, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    json_int_t lo = 1000, hi = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *s = json_object_get(json_object_get(json_array_get(ev, i), "args"), "step");
        if (!json_is_integer(s)) continue;
        if (json_integer_value(s) < lo) lo = json_integer_value(s);
        if (json_integer_value(s) > hi) hi = json_integer_value(s);
    }
    cr_assert_eq(lo, 1);
    cr_assert_eq(hi, 2);
    json_decref(root);
    free(tr);
    net_destroy(net);
}
