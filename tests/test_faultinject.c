/*
 * test_faultinject.c -- the fault-injection sweep: every fallible backend
 * operation, failed at every one of its calls (the k-th, once), over a full
 * scenario per policy (create, allocate, steps with a deviation, host homing and
 * placement, page-locked placement, reports, a free, destroy), on the sim backend wrapped by
 * faultinject.c.
 *
 * For every injection it checks that
 *  - the failure reaches the caller: a public call returns UVMRT_ERR_BACKEND, or
 *    the library counted it (backend_errors, a call that completes without a
 *    timing), or it came during destroy and was logged by name;
 *  - a failed call changed nothing a caller can see (open step and call, the
 *    step's calls, completed steps, tensors, placement, allocated bytes), and
 *    the same call then succeeds (the context stays usable);
 *  - residency never exceeds the budget: uvmrt's accounting after every call,
 *    the model's device after every movement (checked in the wrapper), and the
 *    device never holds more than uvmrt counts as resident;
 *  - the stats balance: each step's prefetch, evict and discard bytes sum to the
 *    summary's; the resident bytes are the footprints of the resident tensors;
 *  - nothing leaks (the ASan build's leak check covers the whole sweep).
 * The sweep runs in one process (no fork per case); it prints the number of
 * injection points it covered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "faultinject.h"
#include "helpers.h"

#define L 3
#define BUDGET (10 * MIB)

typedef struct scen {
    uvmrt_policy_t policy;
    int steps;
    int homing;     /* activations streamed (plan may host-home them) and a placement */
    /* the choice's model: its calls' duration (0: 25 us, 40x too fast, so the review
     * chooses again; 1 ms: the run's own, so it keeps the values and predicts them
     * again with the measured work) */
    uint64_t model_call_ns;
    int pinning; /* a tensor to page-locked memory of its own and back (UVMRT_PLACE_PINNED) */
} scen_t;

static const scen_t scenarios[] = {
    {UVMRT_POLICY_NONE, 2, 0, 0, 0},
    {UVMRT_POLICY_DEMAND, 3, 0, 0, 0},
    {UVMRT_POLICY_PREFETCH, 5, 1, 0, 0},
    {UVMRT_POLICY_PREFETCH, 5, 1, 1000000, 0},
    {UVMRT_POLICY_PREFETCH, 5, 0, 0, 1},
};

/* ------------------------------------------------------------------ one run */
typedef struct run {
    const scen_t *sc;
    uvmrt_backend_ops_t ops;
    uvmrt_context_t *ctx;
    int layer[L];
    uvmrt_tensor_t *t[4 * L + 3]; /* x, then w, a, g, o per layer, then ws1, ws2 */
    int n_t;
    int seen;          /* the injected failure reached the caller or was counted */
    int failures;      /* public calls that failed */
    char report_path[64];
    int rehearsal;     /* on uvmrt_choose's model: calls only record their status in st */
    uint64_t call_ns;  /* each GPU call's sim duration (0: 100 us) */
    uvmrt_status_t st;
    uvmrt_choice_t reviewed; /* what the review answered */
} run_t;

/* What a caller can see of a context, for "a failed call changes nothing". */
typedef struct snap {
    int in_step, open_call, have_record;
    size_t n_calls, n_uses;
    uint64_t steps_done, step_index, allocated;
    int n_tensors, n_layers;
    int live[4 * L + 3], placed[4 * L + 3];
    void *ptr[4 * L + 3]; /* where uvmrt_tensor_ptr says its contents are (pinned: moved) */
    uvmrt_choice_t choice; /* the choice as uvmrt_choice_get answers it (zero: none) */
    size_t n_planned;
} snap_t;

static void snap_take(const run_t *r, snap_t *s)
{
    memset(s, 0, sizeof *s);
    const uvmrt_context_t *c = r->ctx;
    if (c == NULL) return;
    s->in_step = c->sched.in_step;
    s->open_call = c->sched.open_call;
    s->have_record = c->sched.have_record;
    s->n_calls = c->sched.cur.n_calls;
    s->n_uses = c->sched.cur.n_uses;
    s->steps_done = uvmrt__steps_done(c);
    s->step_index = c->sched.step_index;
    s->allocated = c->tensors.allocated_bytes;
    s->n_tensors = c->tensors.n;
    s->n_layers = c->tensors.n_layers;
    s->choice.struct_size = sizeof s->choice;
    (void)uvmrt_choice_get(c, &s->choice);
    s->n_planned = c->choice.n_planned;
    for (int i = 0; i < r->n_t; i++) {
        s->live[i] = r->t[i] != NULL && uvmrt_tensor_ptr(r->t[i]) != NULL;
        s->placed[i] = r->t[i] != NULL ? (int)uvmrt_tensor_placement(r->t[i]) : -1;
        s->ptr[i] = r->t[i] != NULL ? uvmrt_tensor_ptr(r->t[i]) : NULL;
    }
}

static void check_invariants(run_t *r, const char *where)
{
    uvmrt_context_t *c = r->ctx;
    if (c == NULL) return;
    if (r->sc->policy != UVMRT_POLICY_NONE)
        cr_assert_leq(c->res.bytes, c->budget, "%s: resident %llu > budget %llu", where,
                      (unsigned long long)c->res.bytes, (unsigned long long)c->budget);
    uint64_t sum = 0;
    for (int i = 0; i < c->tensors.n; i++)
        if (c->tensors.by_id[i]->magic == UVMRT_TENSOR_MAGIC && c->tensors.by_id[i]->resident)
            sum += c->tensors.by_id[i]->footprint;
    cr_assert_eq(sum, c->res.bytes, "%s: resident tensors sum to %llu, accounting says %llu", where,
                 (unsigned long long)sum, (unsigned long long)c->res.bytes);
    uint64_t dev = fi_device_bytes(c->be.state);
    cr_assert_leq(dev, c->res.bytes, "%s: the device holds %llu bytes, uvmrt counts %llu resident", where,
                  (unsigned long long)dev, (unsigned long long)c->res.bytes);
    if (fi.fired && !r->seen && c->be.errors > 0) r->seen = 1;
}

/* Runs a public call; when it fails, it must be the injected failure, must
 * have changed nothing, and the same call must then succeed. */
#define CALL(r, expr)                                                                               \
    do {                                                                                            \
        if ((r)->rehearsal) { /* a model's "does not fit" is an answer, not a failure */           \
            if ((r)->st == UVMRT_OK) (r)->st = (expr);                                              \
            break;                                                                                  \
        }                                                                                           \
        snap_t b_, a_;                                                                              \
        snap_take((r), &b_);                                                                        \
        int fired_ = fi.fired;                                                                      \
        uvmrt_status_t st_ = (expr);                                                                \
        if (st_ != UVMRT_OK) {                                                                      \
            cr_assert(fi.fired && !fired_, "%s failed (%s) without an injected failure; log:\n%s", #expr, \
                      uvmrt_status_name(st_), log_text());                                          \
            cr_assert_eq(st_, UVMRT_ERR_BACKEND, "%s: %s, expected the injected UVMRT_ERR_BACKEND", #expr, \
                         uvmrt_status_name(st_));                                                   \
            snap_take((r), &a_);                                                                    \
            cr_assert(memcmp(&a_, &b_, sizeof a_) == 0, "%s failed but changed the context", #expr);  \
            check_invariants((r), #expr " (failed)");                                               \
            (r)->seen = 1;                                                                          \
            (r)->failures++;                                                                        \
            st_ = (expr);                                                                           \
            cr_assert_eq(st_, UVMRT_OK, "%s retried: %s; log:\n%s", #expr, uvmrt_status_name(st_), log_text()); \
        }                                                                                           \
        check_invariants((r), #expr);                                                               \
    } while (0)

static void create(run_t *r)
{
    uvmrt_params_t p;
    sim_params(&p, r->sc->policy, BUDGET, NULL);
    p.fault_sample_every = 1;
    /* the baseline run also writes the report at destroy (the memory summary asks
     * the event ring there, after the events are gone) */
    char at_destroy[80];
    snprintf(at_destroy, sizeof at_destroy, "json:/tmp/uvmrt-fi-%d-destroy.json", (int)getpid());
    if (fi.fail_op < 0) p.report = at_destroy;
    uvmrt_status_t st = uvmrt__context_create_with(&p, &r->ops, &r->ctx);
    if (st != UVMRT_OK) {
        cr_assert(fi.fired, "create failed without an injected failure: %s", uvmrt_status_name(st));
        cr_assert_null(r->ctx);
        r->seen = 1;
        st = uvmrt__context_create_with(&p, &r->ops, &r->ctx);
    }
    cr_assert_eq(st, UVMRT_OK, "create retried: %s\n%s", uvmrt_status_name(st), log_text());
}

static void allocate(run_t *r)
{
    for (int i = 0; i < L; i++) {
        char name[16];
        snprintf(name, sizeof name, "layer%d", i);
        cr_assert_eq(uvmrt_layer_add(r->ctx, name, &r->layer[i]), UVMRT_OK);
    }
    uvmrt_tensor_desc_t d[4 * L + 1];
    int n = 0;
    d[n++] = (uvmrt_tensor_desc_t){"x", -1, UVMRT_ROLE_ACTIVATION, 1 * MIB};
    for (int i = 0; i < L; i++) {
        d[n++] = (uvmrt_tensor_desc_t){"w", r->layer[i], UVMRT_ROLE_WEIGHT, 2 * MIB};
        d[n++] = (uvmrt_tensor_desc_t){"a", r->layer[i], UVMRT_ROLE_ACTIVATION, 3 * MIB / 2};
        d[n++] = (uvmrt_tensor_desc_t){"g", r->layer[i], UVMRT_ROLE_GRADIENT, 2 * MIB};
        d[n++] = (uvmrt_tensor_desc_t){"o", r->layer[i], UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB};
    }
    r->n_t = n + 2;
    CALL(r, uvmrt_tensors_alloc(r->ctx, (size_t)n, d, r->t));
    /* two small workspaces sharing an arena: freeing one discards its pages */
    uvmrt_tensor_desc_t ws[2] = {{"ws1", r->layer[0], UVMRT_ROLE_WORKSPACE, 256 * KIB},
                                 {"ws2", r->layer[0], UVMRT_ROLE_WORKSPACE, 256 * KIB}};
    CALL(r, uvmrt_tensors_alloc(r->ctx, 2, ws, &r->t[n]));
    /* the choice's scenario: the activations are recomputable, so uvmrt_choose adds
     * its recompute count and the backward follows what it chose */
    for (int i = 0; r->sc->homing && i < L; i++) CALL(r, uvmrt_tensor_set_recompute(r->ctx, r->t[1 + 4 * i + 1], 1e9));
}

static uvmrt_tensor_t *T(run_t *r, int kind, int layer) { return r->t[1 + 4 * layer + kind]; }

static void layer_after(run_t *r, int i, uvmrt_phase_t ph, uvmrt_use_t *uses, size_t n, uvmrt_stream_t after)
{
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = r->layer[i], .phase = ph, .uses = uses, .n_uses = n,
                            .sim_duration_ns = r->call_ns ? r->call_ns : 100000, .after = after};
    CALL(r, uvmrt_layer_begin(r->ctx, &c));
    CALL(r, uvmrt_layer_end(r->ctx));
}

static void layer(run_t *r, int i, uvmrt_phase_t ph, uvmrt_use_t *uses, size_t n)
{
    layer_after(r, i, ph, uses, n, NULL);
}

/* A CPU call (its own stream, host bytes, no uses) after the compute stream's work
 * (uvmrt_layer_call_t.after: an event recorded there, waited for on its stream). */
#define CPU_STREAM ((uvmrt_stream_t)(uintptr_t)0x20)
static void cpu_layer(run_t *r, int i)
{
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = r->layer[i], .phase = UVMRT_PHASE_OPTIMIZER, .stream = CPU_STREAM,
                            .no_default_uses = 1, .host_bytes = 1 << 20, .after = NULL};
    /* the layers' calls run on the legacy stream (NULL): a real stream for after */
    c.after = (uvmrt_stream_t)(uintptr_t)0x10;
    CALL(r, uvmrt_layer_begin(r->ctx, &c));
    CALL(r, uvmrt_layer_end(r->ctx));
}

/* forward (input: previous activation), backward (next gradient), optimizer;
 * skip: a forward left out (the step leaves the record). */
static void step(run_t *r, int skip)
{
    unsigned stream = r->sc->homing ? UVMRT_USE_STREAM : 0;
    CALL(r, uvmrt_step_begin(r->ctx));
    for (int i = 0; i < L; i++) {
        if (i == skip) continue;
        uvmrt_use_t u[2] = {{i ? T(r, 1, i - 1) : r->t[0], UVMRT_USE_READ | stream},
                            {T(r, 1, i), UVMRT_USE_WRITE | stream}};
        layer(r, i, UVMRT_PHASE_FORWARD, u, 2);
    }
    for (int i = L - 1; i >= 0; i--) {
        unsigned act = uvmrt_tensor_recomputes(r->ctx, T(r, 1, i)) ? UVMRT_USE_WRITE : UVMRT_USE_READ | stream;
        uvmrt_use_t u[2] = {{T(r, 2, i + 1 < L ? i + 1 : i), UVMRT_USE_READ}, {T(r, 1, i), act}};
        layer(r, i, UVMRT_PHASE_BACKWARD, u, 2);
    }
    for (int i = 0; i < L; i++) layer(r, i, UVMRT_PHASE_OPTIMIZER, NULL, 0);
    if (r->sc->homing) cpu_layer(r, L - 1); /* the after path under every injection */
    CALL(r, uvmrt_step_end(r->ctx));
}

/* uvmrt_choose's rehearsal: the scenario's own layers, tensors and steps on the
 * model (a plain sim context: nothing is injected there). The knob changes nothing:
 * the choice and its review run their paths, which is what the sweep is after. */
static uvmrt_status_t rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)values;
    run_t m;
    memset(&m, 0, sizeof m);
    m.sc = ((const run_t *)user)->sc;
    m.ctx = model;
    m.rehearsal = 1;
    m.call_ns = m.sc->model_call_ns ? m.sc->model_call_ns : 25000;
    allocate(&m);
    for (int s = 0; s < steps && m.st == UVMRT_OK; s++) step(&m, -1);
    return m.st;
}

/* The choice before the first step and its review after the planned ones (the
 * prefetch scenario, whose calls take 1 ms): the model's calls are 40x shorter, so
 * the review chooses again with each call's measured work (the last step's timing
 * events). */
static void choose(run_t *r)
{
    static const int both[2] = {0, 1};
    const uvmrt_knob_t knob = {"unused", 2, both};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    CALL(r, uvmrt_choose(r->ctx, &knob, 1, rehearse, r, &c));
}

static void review(run_t *r)
{
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    int changed = 0;
    CALL(r, uvmrt_choice_review(r->ctx, &c, &changed));
    r->reviewed = c;
}

static void check_stats(run_t *r)
{
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(r->ctx, &sum), UVMRT_OK);
    uint64_t pre = r->ctx->stats.cur.prefetch_bytes, ev = r->ctx->stats.cur.evict_bytes,
             dis = r->ctx->stats.cur.discard_bytes;
    for (uint64_t k = 0; k < sum.steps; k++) {
        uvmrt_step_stats_t s = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(r->ctx, k, &s), UVMRT_OK);
        pre += s.prefetch_bytes;
        ev += s.evict_bytes;
        dis += s.discard_bytes;
    }
    cr_assert_eq(pre, sum.prefetch_bytes, "steps' prefetch bytes %llu != summary %llu", (unsigned long long)pre,
                 (unsigned long long)sum.prefetch_bytes);
    cr_assert_eq(ev, sum.evict_bytes, "steps' evict bytes != summary");
    cr_assert_eq(dis, sum.discard_bytes, "steps' discard bytes != summary");
    cr_assert_eq(sum.steps, (uint64_t)r->sc->steps + 1);
}

/* The whole scenario under one injection; returns 1 when the failure fired. */
static int run_once(const scen_t *sc, int op, uint64_t k)
{
    run_t r;
    memset(&r, 0, sizeof r);
    r.sc = sc;
    r.ops = fi_wrap(&uvmrt__backend_sim);
    fi_arm(op, k, BUDGET, sc->policy != UVMRT_POLICY_NONE);
    log_reset();
    create(&r);
    allocate(&r);
    if (sc->homing) {
        r.call_ns = 1000000;
        choose(&r);
    }
    for (int s = 0; s < sc->steps; s++) {
        if (sc->homing && s == 2) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 2, L - 1), UVMRT_PLACE_HOST));
        if (sc->homing && s == 4) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 2, L - 1), UVMRT_PLACE_AUTO));
        /* page-locked memory of its own, and back (the optimizer state of the first layer) */
        if (sc->pinning && s == 1) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 3, 0), UVMRT_PLACE_PINNED));
        if (sc->pinning && s == 2) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 2, 1), UVMRT_PLACE_PINNED));
        if (sc->pinning && s == 3) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 3, 0), UVMRT_PLACE_HOST));
        if (sc->pinning && s == 4) CALL(&r, uvmrt_tensor_set_placement(r.ctx, T(&r, 3, 0), UVMRT_PLACE_AUTO));
        step(&r, sc->policy == UVMRT_POLICY_PREFETCH && s == 3 ? 1 : -1);
        if (sc->homing && s == 2) { /* after steps 2 and 3, the planned ones */
            /* the CPU call's measured time, which the review's re-plan takes (3 ms: the
             * model's is ~15 us) */
            CALL(&r, uvmrt_host_work_measured(r.ctx, r.layer[L - 1], UVMRT_PHASE_OPTIMIZER, 3000000));
            review(&r);
        }
    }
    if (sc->homing && op < 0) { /* the review took the path the scenario is for (an injected
                                 * failure may cost a timing, and so the measurement) */
        cr_assert_eq(r.reviewed.replanned, sc->model_call_ns == 0, "replanned %d", r.reviewed.replanned);
        if (sc->model_call_ns)
            cr_assert(r.reviewed.predicted_step_ns != r.reviewed.first_predicted_step_ns,
                      "the review kept the values but did not predict them again with the measured work");
    }
    CALL(&r, uvmrt_tensor_free(r.ctx, r.t[r.n_t - 2])); /* ws1: resident, its arena stays */
    r.t[r.n_t - 2] = NULL;
    step(&r, -1);
    check_stats(&r);
    /* Reports make no backend calls: every format after the baseline run (they
     * also fsync, which is slow), json after every injected run. */
    static const char *const formats[] = {"json", "text", "csv", "trace"};
    for (size_t f = 0; f < (op < 0 ? sizeof formats / sizeof formats[0] : 1); f++) {
        snprintf(r.report_path, sizeof r.report_path, "/tmp/uvmrt-fi-%d.%s", (int)getpid(), formats[f]);
        CALL(&r, uvmrt_report_write(r.ctx, formats[f], r.report_path));
        unlink(r.report_path);
    }
    int before_destroy = r.seen || !fi.fired;
    uvmrt_context_destroy(r.ctx);
    if (fi.fired && !before_destroy)
        cr_assert(log_contains("fiInjectedFailure"),
                  "the %s failure at call %llu was swallowed (not returned, counted or logged); log:\n%s",
                  op >= 0 ? fi_op_names[op] : "-", (unsigned long long)k, log_text());
    cr_assert_eq(fi.over_budget, 0, "%s at call %llu: the device exceeded the budget after %llu movements",
                 op >= 0 ? fi_op_names[op] : "-", (unsigned long long)k, (unsigned long long)fi.over_budget);
    cr_assert_eq(fi.dead_event_uses, 0, "%s at call %llu: %llu uses of an event that was destroyed or never created",
                 op >= 0 ? fi_op_names[op] : "-", (unsigned long long)k, (unsigned long long)fi.dead_event_uses);
    if (op < 0) {
        char path[80];
        snprintf(path, sizeof path, "/tmp/uvmrt-fi-%d-destroy.json", (int)getpid());
        cr_assert_eq(access(path, F_OK), 0, "the report at destroy was not written");
        unlink(path);
    }
    return fi.fired;
}

Test(faultinject, sweep_every_op_every_call, .timeout = 300)
{
    uint64_t points = 0, returned = 0;
    for (size_t s = 0; s < sizeof scenarios / sizeof scenarios[0]; s++) {
        const scen_t *sc = &scenarios[s];
        run_once(sc, -1, 0); /* the baseline: how many calls of each op */
        uint64_t n[FI_N_OPS];
        memcpy(n, fi.calls, sizeof n);
        for (int op = 0; op < FI_N_OPS; op++) {
            for (uint64_t k = 1; k <= n[op]; k++) {
                cr_assert(run_once(sc, op, k), "%s call %llu did not happen: the scenario is not deterministic",
                          fi_op_names[op], (unsigned long long)k);
                points++;
            }
        }
        (void)returned;
        fprintf(stderr, "faultinject: policy %s:", uvmrt_policy_name(sc->policy));
        for (int op = 0; op < FI_N_OPS; op++) fprintf(stderr, " %s %llu", fi_op_names[op], (unsigned long long)n[op]);
        fprintf(stderr, "\n");
    }
    fprintf(stderr, "faultinject: %llu injection points covered\n", (unsigned long long)points);
    cr_assert_gt(points, 1000);
}

/* A timing failure does not fail the call: it is counted in backend_errors and
 * logged once, with the backend's error name; the step's other numbers stand. */
Test(faultinject, timing_failure_counted_and_named)
{
    run_t r;
    memset(&r, 0, sizeof r);
    r.sc = &scenarios[2];
    r.ops = fi_wrap(&uvmrt__backend_sim);
    fi_arm(-1, 0, BUDGET, 1);
    log_reset();
    create(&r);
    allocate(&r);
    step(&r, -1);
    uvmrt_summary_t before = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(r.ctx, &before), UVMRT_OK);
    cr_expect_eq(before.backend_errors, 0);
    fi.fail_op = FI_EVENT_ELAPSED;
    fi.fail_at = fi.calls[FI_EVENT_ELAPSED] + 1;
    step(&r, -1);
    cr_assert(fi.fired);
    uvmrt_summary_t after = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(r.ctx, &after), UVMRT_OK);
    cr_expect_eq(after.backend_errors, 1);
    cr_expect_eq(after.steps, 2);
    cr_expect(log_contains("event_elapsed_ns failed: fiInjectedFailure"), "%s", log_text());
    uvmrt_context_destroy(r.ctx);
}

/* Timing events cost the stream time on a GPU: a resident step (policy none: no call
 * waits for anything) records one timing event per call (its end; the next call starts
 * there) and one to start the step, not three per call, beside each call's ring event
 * (its tensors' last use); its per-call times still come out, and wait nothing. */
Test(faultinject, a_resident_step_records_one_timing_event_a_call)
{
    run_t r;
    memset(&r, 0, sizeof r);
    r.sc = &scenarios[0]; /* policy none */
    r.ops = fi_wrap(&uvmrt__backend_sim);
    fi_arm(-1, 0, BUDGET, 0);
    log_reset();
    create(&r);
    allocate(&r);
    step(&r, -1);
    uint64_t before = fi.calls[FI_EVENT_RECORD];
    step(&r, -1);
    uint64_t records = fi.calls[FI_EVENT_RECORD] - before, calls = 3 * L; /* forward, backward, optimizer */
    cr_expect_leq(records, 2 * calls + 2, "%llu event records for %llu calls (the clock anchor is one more)",
                  (unsigned long long)records, (unsigned long long)calls);
    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(r.ctx, 1, &st), UVMRT_OK);
    cr_expect_eq(st.wait_ns, 0, "nothing waited");
    for (int i = 0; i < L; i++) {
        uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
        cr_assert_eq(uvmrt_layer_stats_get(r.ctx, r.layer[i], UVMRT_PHASE_BACKWARD, &ls), UVMRT_OK);
        cr_expect_gt(ls.duration_ns, 0, "layer %d's backward is timed", i);
    }
    uvmrt_context_destroy(r.ctx);
}
