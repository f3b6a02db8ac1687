/*
 * test_memsum.c -- the memory summary (src/memsum.c): every live tensor once
 * with its bytes, where it is and its mechanism; per-role totals that balance
 * with the residency accounting; the peak and its reset; failed calls change
 * nothing and say why; the report sections.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "memsum.h"

#define BUDGET (16 * MIB)

static uvmrt_tensor_info_t *summary(uvmrt_context_t *ctx, size_t *n)
{
    cr_assert_eq(uvmrt_memory_summary(ctx, NULL, 0, n), UVMRT_OK, "%s", log_text());
    uvmrt_tensor_info_t *ti = calloc(*n ? *n : 1, sizeof *ti);
    cr_assert_not_null(ti);
    ti[0].struct_size = sizeof *ti;
    size_t m = 0;
    cr_assert_eq(uvmrt_memory_summary(ctx, ti, *n, &m), UVMRT_OK, "%s", log_text());
    cr_assert_eq(m, *n);
    return ti;
}

Test(memsum, every_tensor_appears_once_with_its_bytes)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 3, NULL, NULL);
    size_t n = 0;
    uvmrt_tensor_info_t *ti = summary(net->ctx, &n);
    cr_assert_eq(n, (size_t)net->n_all);
    for (int i = 0; i < net->n_all; i++) {
        const uvmrt_tensor_t *t = net->all[i];
        int seen = 0;
        for (size_t k = 0; k < n; k++) {
            if (ti[k].id != t->id) continue;
            seen++;
            cr_assert_str_eq(ti[k].name, uvmrt_tensor_name(t));
            cr_assert_eq(ti[k].size_bytes, uvmrt_tensor_size(t));
            cr_assert_eq(ti[k].footprint_bytes, footprint_of(uvmrt_tensor_size(t)));
            cr_assert_eq(ti[k].layer, uvmrt_tensor_layer(t));
            cr_assert_eq(ti[k].role, uvmrt_tensor_role(t));
            if (ti[k].where != UVMRT_WHERE_SPLIT)
                cr_assert_eq(ti[k].where == UVMRT_WHERE_DEVICE, uvmrt_tensor_is_resident(t), "%s", ti[k].name);
            cr_assert_neq(ti[k].mechanism, 0, "%s has a mechanism", ti[k].name);
            cr_assert_eq(ti[k].mechanism & UVMRT_MECH_DEMAND, 0, "%s: the plan brings it", ti[k].name);
        }
        cr_assert_eq(seen, 1, "tensor %s seen %d times", uvmrt_tensor_name(t), seen);
    }
    for (size_t k = 1; k < n; k++) cr_assert_lt(ti[k - 1].id, ti[k].id, "allocation order");
    free(ti);
    net_destroy(net);
}

Test(memsum, role_totals_balance_with_the_accounting)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 2, NULL, NULL);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(net->ctx, &m), UVMRT_OK);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    cr_assert_eq(m.budget_bytes, uvmrt_context_budget(net->ctx));
    cr_assert_eq(m.resident_bytes, s.resident_bytes);
    cr_assert_eq(m.peak_resident_bytes, s.peak_resident_bytes);
    cr_assert_eq(m.allocated_bytes, s.allocated_bytes);
    cr_assert_eq(m.tensors, (uint64_t)net->n_all);
    uint64_t fp = 0, res = 0, sz = 0, nt = 0;
    for (int r = 0; r < UVMRT_ROLE_COUNT; r++) {
        fp += m.role_footprint_bytes[r];
        res += m.role_resident_bytes[r];
        sz += m.role_size_bytes[r];
        nt += m.role_tensors[r];
    }
    cr_assert_eq(fp, m.allocated_bytes);
    cr_assert_eq(res, m.resident_bytes, "resident bytes are the resident tensors' footprints");
    cr_assert_eq(nt, m.tensors);
    const net_spec_t *sp = &net->spec;
    cr_assert_eq(sz, sp->x_bytes + (uint64_t)net->L * (sp->w_bytes + sp->a_bytes + sp->g_bytes + sp->o_bytes));
    cr_assert_eq(m.role_size_bytes[UVMRT_ROLE_WEIGHT], (uint64_t)net->L * sp->w_bytes);
    cr_assert_eq(m.role_tensors[UVMRT_ROLE_ACTIVATION], (uint64_t)net->L + 1, "A0..A5 and X");
    cr_assert_eq(m.role_tensors[UVMRT_ROLE_WORKSPACE], 0);
    cr_assert_leq(m.resident_bytes, m.budget_bytes);
    net_destroy(net);
}

Test(memsum, peak_reset_starts_over_from_now)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 2, NULL, NULL);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(net->ctx, &m), UVMRT_OK);
    cr_assert_geq(m.peak_resident_bytes, m.resident_bytes);
    uvmrt_step_stats_t before = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(net->ctx, 1, &before), UVMRT_OK);
    /* free the resident state so that the peak really drops */
    for (int i = 0; i < net->n_all; i++) cr_assert_eq(uvmrt_tensor_free(net->ctx, net->all[i]), UVMRT_OK);
    uvmrt_memory_stats_t m2 = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(net->ctx, &m2), UVMRT_OK);
    cr_assert_eq(m2.resident_bytes, 0);
    cr_assert_eq(m2.peak_resident_bytes, m.peak_resident_bytes, "the peak stays until reset");
    cr_assert_gt(m2.peak_resident_bytes, 0);
    cr_assert_eq(uvmrt_memory_peak_reset(net->ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_memory_stats_get(net->ctx, &m2), UVMRT_OK);
    cr_assert_eq(m2.peak_resident_bytes, 0);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &s), UVMRT_OK);
    cr_assert_eq(s.peak_resident_bytes, 0);
    uvmrt_step_stats_t after = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(net->ctx, 1, &after), UVMRT_OK);
    cr_assert_eq(after.peak_resident_bytes, before.peak_resident_bytes, "per-step peaks are history");
    cr_assert_eq(uvmrt_memory_peak_reset(NULL), UVMRT_ERR_INVALID);
    uvmrt_context_t *ctx = net->ctx;
    net_free(net);
    uvmrt_context_destroy(ctx);
}

Test(memsum, a_too_small_buffer_changes_nothing_and_says_why)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, BUDGET);
    run_steps(net, 1, NULL, NULL);
    size_t n = 0;
    cr_assert_eq(uvmrt_memory_summary(net->ctx, NULL, 0, &n), UVMRT_OK);
    cr_assert_eq(n, (size_t)net->n_all);
    uvmrt_tensor_info_t *ti = malloc(n * sizeof *ti), *copy = malloc(n * sizeof *ti);
    memset(ti, 0xAB, n * sizeof *ti);
    ti[0].struct_size = sizeof *ti;
    memcpy(copy, ti, n * sizeof *ti);
    size_t got = 12345;
    log_reset();
    cr_assert_eq(uvmrt_memory_summary(net->ctx, ti, n - 1, &got), UVMRT_ERR_INVALID);
    cr_assert_eq(got, n, "*n says how many are needed");
    cr_assert_eq(memcmp(ti, copy, n * sizeof *ti), 0, "nothing written");
    char want[96];
    snprintf(want, sizeof want, "cap %zu is less than the %zu live tensors", n - 1, n);
    cr_assert(log_contains(want), "%s", log_text());
    free(ti);
    free(copy);
    net_destroy(net);
}

Test(memsum, null_arguments_are_named)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    uvmrt_tensor_info_t one = UVMRT_STRUCT_INIT(uvmrt_tensor_info_t);
    size_t n = 0;
    log_reset();
    cr_assert_eq(uvmrt_memory_summary(ctx, &one, 1, NULL), UVMRT_ERR_INVALID);
    cr_assert(log_contains("n is NULL"), "%s", log_text());
    log_reset();
    cr_assert_eq(uvmrt_memory_summary(ctx, NULL, 4, &n), UVMRT_ERR_INVALID);
    cr_assert(log_contains("out is NULL with cap 4"), "%s", log_text());
    log_reset();
    cr_assert_eq(uvmrt_memory_stats_get(ctx, NULL), UVMRT_ERR_INVALID);
    cr_assert(log_contains("uvmrt_memory_stats_get: out is NULL"), "%s", log_text());
    cr_assert_eq(uvmrt_memory_summary(NULL, &one, 1, &n), UVMRT_ERR_INVALID);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(NULL, &m), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_context_set_total_steps(NULL, 5), UVMRT_ERR_INVALID);
    /* no tensors: an empty summary */
    cr_assert_eq(uvmrt_memory_summary(ctx, &one, 1, &n), UVMRT_OK);
    cr_assert_eq(n, 0);
    uvmrt_context_destroy(ctx);
}

Test(memsum, freed_tensors_leave_the_summary)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    int gone = net->w[2]->id;
    cr_assert_eq(uvmrt_tensor_free(net->ctx, net->w[2]), UVMRT_OK);
    size_t n = 0;
    uvmrt_tensor_info_t *ti = summary(net->ctx, &n);
    cr_assert_eq(n, (size_t)net->n_all - 1);
    for (size_t k = 0; k < n; k++) cr_assert_neq(ti[k].id, gone);
    free(ti);
    net_destroy(net);
}

static unsigned mech_union(uvmrt_context_t *ctx, uvmrt_role_t *role_only)
{
    size_t n = 0;
    uvmrt_tensor_info_t *ti = summary(ctx, &n);
    unsigned u = 0;
    for (size_t k = 0; k < n; k++)
        if (role_only == NULL || ti[k].role == *role_only) u |= ti[k].mechanism;
    free(ti);
    return u;
}

Test(memsum, mechanisms_follow_the_policy_and_plan)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_NONE, BUDGET);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(mech_union(net->ctx, NULL), UVMRT_MECH_MANAGED);
    net_destroy(net);

    net = net_default_on_sim(UVMRT_POLICY_DEMAND, BUDGET);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(mech_union(net->ctx, NULL), UVMRT_MECH_DEMAND);
    net_destroy(net);

    /* prefetch: the recording step runs like demand; the plan then moves data in and out */
    net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 1, NULL, NULL);
    cr_assert_eq(mech_union(net->ctx, NULL), UVMRT_MECH_DEMAND);
    run_steps(net, 2, NULL, NULL);
    unsigned u = mech_union(net->ctx, NULL);
    cr_assert(u & UVMRT_MECH_PREFETCH, "0x%x", u);
    cr_assert(u & (UVMRT_MECH_WRITEBACK | UVMRT_MECH_DISCARD), "0x%x", u);
    cr_assert_eq(u & (UVMRT_MECH_DEMAND | UVMRT_MECH_MANAGED), 0, "0x%x", u);
    net_destroy(net);

    /* a budget that holds everything: nothing moves once it is in */
    net = net_default_on_sim(UVMRT_POLICY_PREFETCH, 256 * MIB);
    run_steps(net, 3, NULL, NULL);
    cr_assert_eq(mech_union(net->ctx, NULL), UVMRT_MECH_RESIDENT);
    /* a tensor placed in host memory */
    cr_assert_eq(uvmrt_tensor_set_placement(net->ctx, net->g[1], UVMRT_PLACE_HOST), UVMRT_OK);
    size_t n = 0;
    uvmrt_tensor_info_t *ti = summary(net->ctx, &n);
    for (size_t k = 0; k < n; k++)
        if (ti[k].id == net->g[1]->id) {
            cr_assert_eq(ti[k].mechanism, UVMRT_MECH_HOST_HOMED);
            cr_assert_eq(ti[k].where, UVMRT_WHERE_HOST);
        }
    free(ti);
    net_destroy(net);
}

Test(memsum, names)
{
    char b[64];
    cr_assert_eq(uvmrt_mechanism_name(UVMRT_MECH_PREFETCH | UVMRT_MECH_DISCARD, b, sizeof b), 16);
    cr_assert_str_eq(b, "prefetch+discard");
    cr_assert_eq(uvmrt_mechanism_name(0, b, sizeof b), 4);
    cr_assert_str_eq(b, "none");
    cr_assert_eq(uvmrt_mechanism_name(UVMRT_MECH_HOST_HOMED | UVMRT_MECH_RESIDENT, b, 5), 19, "the whole length");
    cr_assert_str_eq(b, "resi");
    cr_assert_eq(uvmrt_mechanism_name(UVMRT_MECH_UNUSED, NULL, 0), 6);
    cr_assert_str_eq(uvmrt_where_name(UVMRT_WHERE_SPLIT), "split");
    cr_assert_str_eq(uvmrt_where_name((uvmrt_where_t)9), "?");
}

Test(memsum, long_names_are_cut_on_a_character_boundary)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    char name[401];
    for (int i = 0; i < 200; i++) memcpy(name + 2 * i, "\xc3\xa9", 2); /* e-acute, 2 bytes each */
    name[400] = '\0';
    uvmrt_tensor_desc_t d = {name, -1, UVMRT_ROLE_WORKSPACE, 4096};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    size_t n = 0;
    uvmrt_tensor_info_t *ti = summary(ctx, &n);
    cr_assert_eq(n, 1);
    cr_assert_eq(strlen(ti[0].name), 126, "63 whole characters, not 127 bytes with half a character");
    cr_assert_eq(strncmp(ti[0].name, name, 126), 0);
    free(ti);
    uvmrt_context_destroy(ctx);
}

Test(memsum, text_and_json_reports_carry_the_summary)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 3, NULL, NULL);
    char dir[] = "/tmp/uvmrt-memsum-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char tp[128], jp[128];
    snprintf(tp, sizeof tp, "%s/r.txt", dir);
    snprintf(jp, sizeof jp, "%s/r.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", tp), UVMRT_OK);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", jp), UVMRT_OK);
    char *text = file_slurp(tp);
    cr_assert_not_null(strstr(text, "\nmemory: budget 16.0 MiB"), "%s", text);
    cr_assert_not_null(strstr(text, "optimizer_state"), "%s", text);
    for (int i = 0; i < net->n_all; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%-24s ", uvmrt_tensor_name(net->all[i]));
        cr_assert_not_null(strstr(text, line), "tensor %s has its line", uvmrt_tensor_name(net->all[i]));
    }
    free(text);
    json_error_t err;
    json_t *root = json_load_file(jp, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *mem = json_object_get(root, "memory");
    cr_assert(json_is_object(mem));
    json_t *ts = json_object_get(mem, "tensors");
    cr_assert_eq(json_array_size(ts), (size_t)net->n_all);
    for (int i = 0; i < net->n_all; i++) {
        json_t *t = json_array_get(ts, (size_t)i);
        cr_assert_str_eq(json_string_value(json_object_get(t, "name")), uvmrt_tensor_name(net->all[i]));
        cr_assert_eq(json_integer_value(json_object_get(t, "size_bytes")), (json_int_t)uvmrt_tensor_size(net->all[i]));
        cr_assert_not_null(json_string_value(json_object_get(t, "where")));
        cr_assert_not_null(json_string_value(json_object_get(t, "mechanism")));
    }
    json_t *w = json_object_get(json_object_get(mem, "roles"), "weight");
    cr_assert_eq(json_integer_value(json_object_get(w, "tensors")), net->L);
    cr_assert_eq(json_integer_value(json_object_get(mem, "resident_bytes")),
                 (json_int_t)net->ctx->res.bytes);
    json_decref(root);
    unlink(tp);
    unlink(jp);
    rmdir(dir);
    net_destroy(net);
}

/* ------------------------------------------------------------------ jansson out of memory */
static long allocs_left;
static void *failing_malloc(size_t n)
{
    if (allocs_left-- <= 0) return NULL;
    return malloc(n);
}

/* The JSON section is complete or NULL, never short: fail the k-th jansson
 * allocation for every k until one build succeeds. */
Test(memsum, json_section_is_whole_or_null_when_memory_runs_out)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 2, NULL, NULL);
    json_t *whole = uvmrt__memsum_json(net->ctx);
    cr_assert_not_null(whole);
    char *want = json_dumps(whole, JSON_SORT_KEYS);
    json_decref(whole);
    int nulls = 0;
    for (long k = 0;; k++) {
        allocs_left = k;
        json_set_alloc_funcs(failing_malloc, free);
        json_t *j = uvmrt__memsum_json(net->ctx);
        json_set_alloc_funcs(malloc, free);
        if (j == NULL) {
            nulls++;
            continue;
        }
        char *got = json_dumps(j, JSON_SORT_KEYS);
        cr_assert_str_eq(got, want, "after %ld allocations the section is whole", k);
        free(got);
        json_decref(j);
        break;
    }
    cr_assert_gt(nulls, 100, "every allocation is checked (%d points)", nulls);
    free(want);
    net_destroy(net);
}
