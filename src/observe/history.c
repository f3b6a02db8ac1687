/*
 * history.c -- per-step history (rows for csv, spans and copies for the trace),
 * kept for the last UVMRT_HISTORY steps with older ones summed, and the
 * attribution of unified-memory records to layer calls.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "faults.h"

/* The stats of an absolute step number: kept, or dropped (the aggregate); NULL
 * for the step in progress (stats.c's). */
static uvmrt_step_stats_t *stats_of_step(uvmrt_context_t *ctx, uint64_t step)
{
    if (step < ctx->hist.steps_before) return &ctx->hist.steps_dropped;
    if (step < uvmrt__steps_done(ctx)) return &ctx->hist.steps[step - ctx->hist.steps_before];
    return NULL;
}

/* ------------------------------------------------------------------ spans and fault records */
/* Rebuilds the address index when tensors came or went. */
static int refresh_index(uvmrt_context_t *ctx)
{
    uvmrt_history_t *h = &ctx->hist;
    if (h->index_tensors == ctx->tensors.n && h->index_bytes == ctx->tensors.allocated_bytes && h->index.n > 0)
        return 0;
    uvmrt__attrib_index_clear(&ctx->hist.index);
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (uvmrt__attrib_index_add(&ctx->hist.index, (uint64_t)(uintptr_t)t->ptr,
                                   (uint64_t)(uintptr_t)t->ptr + t->footprint, id) != 0)
            return -1;
    }
    uvmrt__attrib_index_sort(&ctx->hist.index);
    ctx->hist.index_tensors = ctx->tensors.n;
    ctx->hist.index_bytes = ctx->tensors.allocated_bytes;
    return 0;
}

static int cmp_span(const void *a, const void *b)
{
    const uvmrt_span_sort_t *x = a, *y = b;
    if (x->span.start != y->span.start) return x->span.start < y->span.start ? -1 : 1;
    return x->call < y->call ? -1 : x->call > y->call;
}

/* The step's layer-call spans on the host clock (kept for the trace), then its
 * unified-memory records attributed to them: records starting before the
 * anchor belong to this step, later ones wait for the next. Cannot fail: the
 * memory was reserved by step_reserve. */
static void uvmrt__step_spans_and_faults(uvmrt_context_t *ctx)
{
    size_t n = ctx->sched.cur.n_calls;
    int keep = ctx->ev.anchor_ev != NULL;
    size_t first_span = ctx->hist.n_spans;
    uvmrt_span_sort_t *ss = ctx->hist.scratch_ss;
    uvmrt_attrib_span_t *sp = ctx->hist.scratch_sp;
    uvmrt_fcount_t *fc = ctx->hist.scratch_fc;
    memset(fc, 0, (n ? n : 1) * sizeof *fc);
    uint64_t step = uvmrt__steps_done(ctx);
    for (size_t i = 0; i < n; i++) {
        const uvmrt_call_t *c = &ctx->sched.cur.calls[i];
        uint64_t t0 = 0, tw = 0, t1 = 0;
        if (c->timed) {
            t0 = uvmrt__time_of(ctx, ctx->ev.timing[c->ev_wait_start]);
            tw = uvmrt__time_of(ctx, ctx->ev.timing[c->ev_wait_end]);
            t1 = uvmrt__time_of(ctx, ctx->ev.timing[c->ev_end]);
        }
        ss[i] = (uvmrt_span_sort_t){{t0 + ctx->ev.t0_ns, t1 + ctx->ev.t0_ns}, i};
        if (keep) ctx->hist.spans[ctx->hist.n_spans++] = (uvmrt_span_t){step, c->layer, c->phase, t0, tw, t1, 0, 0, c->resident_bytes};
    }
    /* only a step that collected has records to flush: CUPTI's flush costs the host
     * time between steps (observe_begin gave a collecting step's tail to it already) */
    if (uvmrt__faults_active(ctx) && ctx->faults.on) {
        uvmrt__faults_collect(ctx);
        if (refresh_index(ctx) != 0) return; /* no memory for the index: the records wait for the next step */
    }
    if (ctx->faults.n_pend > 0) {
        if (n > 1) qsort(ss, n, sizeof *ss, cmp_span);
        for (size_t i = 0; i < n; i++) sp[i] = ss[i].span;
        uvmrt__faults_attribute(ctx, &ctx->hist.index, sp, n, ctx->ev.anchor_ns, fc, &ctx->hist.unattr);
        for (size_t i = 0; i < n; i++) {
            const uvmrt_call_t *c = &ctx->sched.cur.calls[ss[i].call];
            uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc[i], NULL, NULL);
            if (keep) {
                ctx->hist.spans[first_span + ss[i].call].gpu_faults = fc[i].v[FC_GPU_FAULTS];
                ctx->hist.spans[first_span + ss[i].call].fault_htod_bytes = fc[i].v[FC_FAULT_HTOD];
            }
        }
    }
}

/* The step's (layer, phase) rows that ran, for csv (room reserved by step_reserve). */
static void uvmrt__keep_rows(uvmrt_context_t *ctx)
{
    uint64_t step = uvmrt__steps_done(ctx);
    for (int r = 0; r < ctx->stats.n_cur_rows; r++) {
        if (ctx->stats.cur_rows[r].calls == 0) continue;
        ctx->hist.rows[ctx->hist.n_rows++] = (uvmrt_step_row_t){step, r / UVMRT_PHASE_COUNT,
                                                       (uvmrt_phase_t)(r % UVMRT_PHASE_COUNT), ctx->stats.cur_rows[r]};
    }
}

/* At the end, or before a step that does not collect: records still pending
 * (the last step's tail, copies after it) go to the last call of the last step;
 * without any step they are unattributed. */
static void uvmrt__attribute_rest(uvmrt_context_t *ctx)
{
    if (!uvmrt__faults_active(ctx)) return;
    uvmrt__faults_collect(ctx);
    if (ctx->faults.n_pend == 0 || refresh_index(ctx) != 0) return;
    uvmrt_fcount_t fc;
    memset(&fc, 0, sizeof fc);
    int last = ctx->hist.n_steps > 0 && ctx->sched.cur.n_calls > 0 && !uvmrt__in_step(ctx);
    uvmrt_attrib_span_t all = {0, UINT64_MAX};
    uvmrt__faults_attribute(ctx, &ctx->hist.index, &all, last ? 1 : 0, UINT64_MAX, &fc, &ctx->hist.unattr);
    if (!last) return;
    const uvmrt_call_t *c = &ctx->sched.cur.calls[ctx->sched.cur.n_calls - 1];
    uint64_t step = uvmrt__steps_done(ctx) - 1;
    uvmrt_layer_stats_t *row = NULL;
    for (size_t i = ctx->hist.n_rows; i > 0; i--)
        if (ctx->hist.rows[i - 1].step == step && ctx->hist.rows[i - 1].layer == c->layer &&
            ctx->hist.rows[i - 1].phase == c->phase) {
            row = &ctx->hist.rows[i - 1].s;
            break;
        }
    uvmrt_layer_stats_t scratch;
    memset(&scratch, 0, sizeof scratch);
    uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc, &ctx->hist.steps[ctx->hist.n_steps - 1], row ? row : &scratch);
}

/* ------------------------------------------------------------------ history */

/* Keeps the history to the last UVMRT_HISTORY steps: once it holds a quarter
 * more than that, the oldest are summed into steps_dropped and their rows,
 * spans and copies dropped, in one pass (so a step costs O(1) amortized). */
static void uvmrt__history_trim(uvmrt_context_t *ctx)
{
    uint64_t keep = (uint64_t)ctx->cfg.history;
    if (ctx->hist.n_steps < keep + (keep + 3) / 4) return;
    uint64_t drop = ctx->hist.n_steps - keep;
    for (uint64_t i = 0; i < drop; i++) uvmrt__step_stats_add(&ctx->hist.steps_dropped, &ctx->hist.steps[i]);
    memmove(ctx->hist.steps, ctx->hist.steps + drop, (size_t)keep * sizeof *ctx->hist.steps);
    ctx->hist.n_steps = keep;
    ctx->hist.steps_before += drop;
    uint64_t first = ctx->hist.steps_before;
    size_t k = 0;
    for (size_t i = 0; i < ctx->hist.n_rows; i++)
        if (ctx->hist.rows[i].step >= first) ctx->hist.rows[k++] = ctx->hist.rows[i];
    ctx->hist.n_rows = k;
    k = 0;
    for (size_t i = 0; i < ctx->hist.n_spans; i++)
        if (ctx->hist.spans[i].step >= first) ctx->hist.spans[k++] = ctx->hist.spans[i];
    ctx->hist.n_spans = k;
    k = 0;
    for (size_t i = 0; i < ctx->hist.n_copies; i++)
        if (ctx->hist.copies[i].step >= first) ctx->hist.copies[k++] = ctx->hist.copies[i];
    ctx->hist.n_copies = k;
}

/* A harvested copy batch (events.c): its busy time goes to the step that issued it;
 * its span is kept while that step is (and when times can be read at all; dropped
 * when out of memory). */
static void add_copy(uvmrt_context_t *ctx, const uvmrt_copy_timing_t *c, uint64_t ns)
{
    uvmrt_step_stats_t *s = stats_of_step(ctx, c->step);
    if (s == NULL) uvmrt__stats_copy_busy(ctx, c->d2h, ns);
    else if (c->d2h) s->d2h_busy_ns += ns;
    else s->h2d_busy_ns += ns;
    uvmrt_history_t *h = &ctx->hist;
    if (c->step >= h->steps_before && ctx->ev.anchor_ev != NULL &&
        uvmrt__grow((void **)&h->copies, &h->cap_copies, h->n_copies + 1, sizeof *h->copies) == 0) {
        uint64_t t = uvmrt__time_of(ctx, c->start);
        h->copies[h->n_copies++] = (uvmrt_copy_span_t){c->step, t, t + ns, c->bytes, c->d2h};
    }
}

/* Every allocation step_end's commit needs, made before anything changes. */
static uvmrt_status_t uvmrt__history_reserve(uvmrt_context_t *ctx, size_t n_calls, size_t n_rows)
{
    uvmrt_history_t *h = &ctx->hist;
    size_t m = n_calls ? n_calls : 1;
    if (uvmrt__grow((void **)&h->spans, &h->cap_spans, h->n_spans + n_calls, sizeof *h->spans) ||
        uvmrt__grow((void **)&h->rows, &h->cap_rows, h->n_rows + n_rows, sizeof *h->rows) ||
        uvmrt__grow((void **)&h->scratch_ss, &h->cap_scratch_ss, m, sizeof *h->scratch_ss) ||
        uvmrt__grow((void **)&h->scratch_sp, &h->cap_scratch_sp, m, sizeof *h->scratch_sp) ||
        uvmrt__grow((void **)&h->scratch_fc, &h->cap_scratch_fc, m, sizeof *h->scratch_fc))
        return UVMRT_ERR_NOMEM;
    if (h->n_steps == h->cap_steps) {
        uint64_t cap = h->cap_steps ? 2 * h->cap_steps : 16;
        uvmrt_step_stats_t *p = realloc(h->steps, (size_t)cap * sizeof *p);
        if (p == NULL) return UVMRT_ERR_NOMEM;
        h->steps = p;
        h->cap_steps = cap;
    }
    return UVMRT_OK;
}

static void uvmrt__history_add_step(uvmrt_context_t *ctx, const uvmrt_step_stats_t *s)
{
    uvmrt_history_t *h = &ctx->hist;
    if (h->n_steps == h->cap_steps) {
        uint64_t cap = h->cap_steps ? 2 * h->cap_steps : 16;
        uvmrt_step_stats_t *p = realloc(h->steps, cap * sizeof *p);
        if (p == NULL) {
            LOG_WARN(&ctx->log, "out of memory keeping step statistics: step %llu dropped",
                     (unsigned long long)h->n_steps + 1);
            return;
        }
        h->steps = p;
        h->cap_steps = cap;
    }
    h->steps[h->n_steps++] = *s;
}

void uvmrt__history_free(uvmrt_context_t *ctx)
{
    uvmrt_history_t *h = &ctx->hist;
    free(h->steps);
    free(h->rows);
    free(h->spans);
    free(h->copies);
    free(h->scratch_ss);
    free(h->scratch_sp);
    free(h->scratch_fc);
    uvmrt__attrib_index_free(&h->index);
    memset(h, 0, sizeof *h);
}

/* ------------------------------------------------------------------ the observer */
/* Sampling (sampling.h): does this step collect the driver's counters? A step
 * that does not stops the source first and gives what it still had (the
 * collecting step's tail) to that step. */
static int observe_begin(uvmrt_context_t *ctx)
{
    int collect = uvmrt__faults_active(ctx) && uvmrt__sampler_want(&ctx->faults.sampler, uvmrt__steps_done(ctx));
    if (!collect && ctx->faults.on) {
        uvmrt__faults_switch(ctx, 0);
        uvmrt__attribute_rest(ctx);
    } else if (collect && !ctx->faults.on) {
        uvmrt__faults_switch(ctx, 1);
    }
    return collect;
}

static uvmrt_status_t observe_reserve(uvmrt_context_t *ctx)
{
    return uvmrt__history_reserve(ctx, ctx->sched.cur.n_calls, (size_t)ctx->stats.n_cur_rows);
}

/* The copy batches done so far, then the step's spans and driver records. */
static void observe_collect(uvmrt_context_t *ctx)
{
    uvmrt__harvest_copy_timings(ctx, 0, add_copy);
    uvmrt__history_trim(ctx); /* before this step's rows and spans go in */
    uvmrt__step_spans_and_faults(ctx);
}

static void observe_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    (void)e;
    uvmrt__keep_rows(ctx);
    uvmrt__history_add_step(ctx, &ctx->stats.cur); /* room reserved */
}

/* At destroy: every copy batch (the streams were waited for), the records left. */
static void observe_fini(uvmrt_context_t *ctx)
{
    uvmrt__harvest_copy_timings(ctx, 1, add_copy);
    uvmrt__attribute_rest(ctx);
}

const uvmrt_observer_t uvmrt__history_observer = {"history", observe_begin, observe_reserve, observe_collect,
                                                  observe_end, observe_fini};
