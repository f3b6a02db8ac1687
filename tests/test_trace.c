/*
 * test_trace.c -- the trace hook and the backend seam: the scheduler's
 * decisions (what moves where, when) must not depend on timings, so a scenario
 * gives the same trace on different sim profiles and on repeated runs; a custom
 * backend wrapping the sim sees the same calls.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

/* ------------------------------------------------------------------ a recording wrapper backend */
/* Forwards everything to the sim, and logs migrations and discards with
 * pointers as (allocation number, offset), so logs of two contexts compare. */
#define REC_MAX_ALLOCS 256
static struct {
    void *base[REC_MAX_ALLOCS];
    size_t bytes[REC_MAX_ALLOCS];
    int n;
    strbuf_t log;
    int moves, discards;
} rec;

static void rec_reset(void)
{
    sb_free(&rec.log);
    memset(&rec, 0, sizeof rec);
}

static uvmrt_status_t rec_alloc(void *state, size_t bytes, void **ptr)
{
    uvmrt_status_t st = uvmrt__backend_sim.alloc(state, bytes, ptr);
    if (st == UVMRT_OK && rec.n < REC_MAX_ALLOCS) {
        rec.base[rec.n] = *ptr;
        rec.bytes[rec.n] = bytes;
        rec.n++;
    }
    return st;
}

static void rec_ranges(const char *what, const uvmrt_range_t *r, size_t n, uvmrt_stream_t stream)
{
    sb_appendf(&rec.log, "%s stream %#lx:", what, (unsigned long)(uintptr_t)stream);
    for (size_t i = 0; i < n; i++) {
        int k = -1;
        for (int a = 0; a < rec.n; a++)
            if ((char *)r[i].ptr >= (char *)rec.base[a] && (char *)r[i].ptr < (char *)rec.base[a] + rec.bytes[a]) k = a;
        cr_assert_geq(k, 0, "%s of a range outside every allocation", what);
        sb_appendf(&rec.log, " [%d+%#zx %zu]", k, (size_t)((char *)r[i].ptr - (char *)rec.base[k]), r[i].bytes);
    }
    sb_append(&rec.log, "\n");
}

static uvmrt_status_t rec_move(void *state, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                               uvmrt_stream_t stream)
{
    rec.moves++;
    rec_ranges(to == UVMRT_LOC_DEVICE ? "to-device" : "to-host", r, n, stream);
    return uvmrt__backend_sim.move(state, r, n, to, stream);
}

static uvmrt_status_t rec_discard(void *state, const uvmrt_range_t *r, size_t n, uvmrt_stream_t stream)
{
    rec.discards++;
    rec_ranges("discard", r, n, stream);
    return uvmrt__backend_sim.discard(state, r, n, stream);
}

static uvmrt_backend_ops_t rec_ops(void)
{
    uvmrt_backend_ops_t ops = uvmrt__backend_sim; /* every entry, including ones added later */
    ops.name = "rec";
    ops.alloc = rec_alloc;
    ops.move = rec_move;
    ops.discard = rec_discard;
    return ops;
}

/* ------------------------------------------------------------------ the scenario */
typedef struct run_result {
    strbuf_t trace;        /* uvmrt__set_trace lines, with "== step N" markers */
    strbuf_t backend_log;  /* the wrapper's log (custom backend only) */
    int moves, discards;   /* wrapper calls */
    uint64_t last_step_ns;
} run_result_t;

static void run_result_free(run_result_t *r)
{
    sb_free(&r->trace);
    sb_free(&r->backend_log);
}

/* The default network under prefetch, 16 MiB budget (2x the largest working
 * set, total 62 MiB): the plan evicts and prefetches every step. */
static run_result_t run_scenario(const char *profile, int wrapped, int steps)
{
    run_result_t r;
    memset(&r, 0, sizeof r);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, profile);
    uvmrt_context_t *ctx = NULL;
    uvmrt_backend_ops_t ops = rec_ops();
    if (wrapped) {
        rec_reset();
        cr_assert_eq(uvmrt__context_create_with(&p, &ops, &ctx), UVMRT_OK, "%s", log_text());
    } else {
        cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    }
    uvmrt__set_trace(ctx, trace_to_strbuf, &r.trace);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    for (int s = 0; s < steps; s++) {
        sb_appendf(&r.trace, "== step %d\n", s + 1);
        if (wrapped) sb_appendf(&rec.log, "== step %d\n", s + 1);
        run_step(net, NULL, NULL);
    }
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)steps - 1, &st), UVMRT_OK);
    r.last_step_ns = st.step_ns;
    net_destroy(net);
    if (wrapped) {
        r.backend_log = rec.log; /* take it */
        memset(&rec.log, 0, sizeof rec.log);
        r.moves = rec.moves;
        r.discards = rec.discards;
    }
    return r;
}

/* The part of a trace from marker "== step N" on (the whole text if absent). */
static const char *from_step(const char *text, int n)
{
    char mark[32];
    snprintf(mark, sizeof mark, "== step %d\n", n);
    const char *p = strstr(text, mark);
    return p ? p : text;
}

/* Lines starting with prefix in text[begin, end). */
static int count_lines(const char *begin, const char *end, const char *prefix)
{
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *p = begin; p && p < end && *p;) {
        if (strncmp(p, prefix, len) == 0) n++;
        p = strchr(p, '\n');
        if (p) p++;
    }
    return n;
}

static const char *end_of(const char *s) { return s + strlen(s); }

/* ------------------------------------------------------------------ tests */
Test(trace, records_backend_calls)
{
    run_result_t r = run_scenario(NULL, 0, 4);
    const char *t = r.trace.s;
    cr_assert_not_null(t);
    const char *s2 = from_step(t, 2);
    cr_assert_neq(s2, t, "no step 2 marker");
    /* step 1 is recorded, running like demand: write-backs on the compute
     * stream, no prefetches */
    cr_expect_eq(count_lines(t, s2, "prefetch"), 0, "prefetch in step 1:\n%.*s", (int)(s2 - t), t);
    cr_expect_gt(count_lines(t, s2, "evict on compute"), 0, "step 1 should evict on the layer's stream");
    /* later steps follow the plan on the copy streams */
    cr_expect_gt(count_lines(s2, end_of(t), "prefetch on h2d:"), 0, "no prefetch on h2d after step 1");
    cr_expect_gt(count_lines(s2, end_of(t), "evict on d2h:"), 0, "no eviction on d2h after step 1");
    cr_expect_gt(count_lines(s2, end_of(t), "discard on d2h:"), 0, "no discard after step 1");
    cr_expect_eq(count_lines(s2, end_of(t), "prefetch on compute"), 0, "steady state fetched on the compute stream");
    cr_expect_eq(count_lines(s2, end_of(t), "prefetch on d2h"), 0);
    /* pointers appear as arena offsets, never raw addresses */
    cr_expect_null(strstr(t, "0x7"), "a raw pointer in the trace");
    cr_expect_not_null(strstr(t, "[a"), "%s", t);
    run_result_free(&r);
}

Test(trace, same_across_profiles)
{
    run_result_t a = run_scenario("consumer-8g", 0, 5);
    run_result_t b = run_scenario("h200", 0, 5);
    cr_assert_not_null(a.trace.s);
    cr_assert_not_null(b.trace.s);
    cr_expect_neq(a.last_step_ns, b.last_step_ns, "the profiles should time the steps differently");
    cr_expect_str_eq(a.trace.s, b.trace.s, "decisions differ between profiles");
    run_result_free(&a);
    run_result_free(&b);
}

Test(trace, same_across_runs)
{
    run_result_t a = run_scenario("consumer-12g", 0, 4);
    run_result_t b = run_scenario("consumer-12g", 0, 4);
    cr_assert_not_null(a.trace.s);
    cr_expect_str_eq(a.trace.s, b.trace.s);
    cr_expect_eq(a.last_step_ns, b.last_step_ns, "the sim is not deterministic");
    run_result_free(&a);
    run_result_free(&b);
}

Test(trace, custom_backend_wrapper)
{
    run_result_t a = run_scenario("consumer-8g", 1, 4);
    cr_assert_not_null(a.backend_log.s, "the wrapper saw no migrations");
    /* the wrapper sees exactly the calls the trace describes */
    const char *t = a.trace.s;
    int traced_moves = count_lines(t, end_of(t), "prefetch") + count_lines(t, end_of(t), "evict");
    int traced_discards = count_lines(t, end_of(t), "discard");
    cr_expect_eq(a.moves, traced_moves, "wrapper moves %d, traced %d", a.moves, traced_moves);
    cr_expect_eq(a.discards, traced_discards, "wrapper discards %d, traced %d", a.discards, traced_discards);
    const char *log = a.backend_log.s, *l2 = from_step(log, 2);
    cr_expect_eq(count_lines(log, l2, "to-device"), 0, "the wrapper saw a prefetch in step 1");
    cr_expect_gt(count_lines(l2, end_of(log), "to-device"), 0);
    /* the same decisions with another profile, and the same as the plain sim */
    run_result_t b = run_scenario("h200", 1, 4);
    cr_expect_str_eq(a.backend_log.s, b.backend_log.s, "wrapper logs differ between profiles");
    cr_expect_str_eq(a.trace.s, b.trace.s);
    run_result_t c = run_scenario("consumer-8g", 0, 4);
    cr_expect_str_eq(a.trace.s, c.trace.s, "a wrapped sim decided differently from the sim");
    run_result_free(&a);
    run_result_free(&b);
    run_result_free(&c);
}

/* A backend without discard: the front end falls back to write-back, and the
 * trace still says discard (the decision), while the backend only sees moves. */
Test(trace, backend_without_discard_falls_back)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    uvmrt_backend_ops_t ops = rec_ops();
    ops.discard = NULL;
    rec_reset();
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt__context_create_with(&p, &ops, &ctx), UVMRT_OK, "%s", log_text());
    strbuf_t trace = {0};
    uvmrt__set_trace(ctx, trace_to_strbuf, &trace);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 4, observe_invariants, NULL);
    cr_assert_not_null(trace.s);
    int traced_discards = count_lines(trace.s, end_of(trace.s), "discard");
    cr_expect_gt(traced_discards, 0);
    cr_expect_eq(rec.discards, 0);
    int traced_moves = count_lines(trace.s, end_of(trace.s), "prefetch") + count_lines(trace.s, end_of(trace.s), "evict");
    cr_expect_eq(rec.moves, traced_moves + traced_discards, "discards did not fall back to moves");
    net_destroy(net);
    sb_free(&trace);
    rec_reset();
}

/* Turning the trace off stops it; the trace does not change what happens. */
Test(trace, off_and_no_effect)
{
    uvmrt_context_t *a = make_ctx(UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    uvmrt_context_t *b = make_ctx(UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    strbuf_t trace = {0};
    uvmrt__set_trace(a, trace_to_strbuf, &trace);
    net_spec_t spec = net_spec_default();
    net_t *na = net_create(a, &spec), *nb = net_create(b, &spec);
    run_steps(na, 3, NULL, NULL);
    run_steps(nb, 3, NULL, NULL);
    cr_assert_not_null(trace.s);
    size_t len = trace.len;
    uvmrt__set_trace(a, NULL, NULL);
    run_step(na, NULL, NULL);
    run_step(nb, NULL, NULL);
    cr_expect_eq(trace.len, len, "lines after the trace was turned off");
    for (uint64_t i = 0; i < 4; i++) {
        uvmrt_step_stats_t sa = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), sb = sa;
        cr_assert_eq(uvmrt_step_stats_get(a, i, &sa), UVMRT_OK);
        cr_assert_eq(uvmrt_step_stats_get(b, i, &sb), UVMRT_OK);
        cr_expect_eq(memcmp(&sa, &sb, sizeof sa), 0, "step %llu differs with the trace on", (unsigned long long)i + 1);
    }
    net_free(na);
    net_free(nb);
    uvmrt_context_destroy(a);
    uvmrt_context_destroy(b);
    sb_free(&trace);
}
