/*
 * history.c -- per-step history (rows for csv, spans and copies for the trace),
 * kept for the last UVMRT_HISTORY steps with older ones summed, and the
 * attribution of unified-memory records to layer calls.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "faults.h"

/* The stats of an absolute step number: kept, dropped (the aggregate), or the
 * step in progress. */
uvmrt_step_stats_t *uvmrt__stats_of_step(uvmrt_context_t *ctx, uint64_t step)
{
    if (step < ctx->steps_before) return &ctx->steps_dropped;
    if (step < uvmrt__steps_done(ctx)) return &ctx->steps[step - ctx->steps_before];
    return &ctx->cur_stats;
}

/* ------------------------------------------------------------------ spans and fault records */
/* Rebuilds the address index when tensors came or went. */
static int refresh_index(uvmrt_context_t *ctx)
{
    if (ctx->index_tensors == ctx->n_tensors && ctx->index_bytes == ctx->allocated_bytes && ctx->index.n > 0)
        return 0;
    uvmrt_attrib_index_clear(&ctx->index);
    for (int id = 0; id < ctx->n_tensors; id++) {
        const uvmrt_tensor_t *t = ctx->tensors[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (uvmrt_attrib_index_add(&ctx->index, (uint64_t)(uintptr_t)t->ptr,
                                   (uint64_t)(uintptr_t)t->ptr + t->footprint, id) != 0)
            return -1;
    }
    uvmrt_attrib_index_sort(&ctx->index);
    ctx->index_tensors = ctx->n_tensors;
    ctx->index_bytes = ctx->allocated_bytes;
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
void uvmrt__step_spans_and_faults(uvmrt_context_t *ctx)
{
    size_t n = ctx->cur.n_calls;
    int keep = ctx->anchor_ev != NULL;
    size_t first_span = ctx->n_spans;
    uvmrt_span_sort_t *ss = ctx->scratch_ss;
    uvmrt_attrib_span_t *sp = ctx->scratch_sp;
    uvmrt_fcount_t *fc = ctx->scratch_fc;
    memset(fc, 0, (n ? n : 1) * sizeof *fc);
    uint64_t step = uvmrt__steps_done(ctx);
    for (size_t i = 0; i < n; i++) {
        const uvmrt_call_t *c = &ctx->cur.calls[i];
        uint64_t t0 = 0, tw = 0, t1 = 0;
        if (c->timed) {
            t0 = uvmrt__time_of(ctx, ctx->timing[c->ev_wait_start]);
            tw = uvmrt__time_of(ctx, ctx->timing[c->ev_wait_end]);
            t1 = uvmrt__time_of(ctx, ctx->timing[c->ev_end]);
        }
        ss[i] = (uvmrt_span_sort_t){{t0 + ctx->t0_ns, t1 + ctx->t0_ns}, i};
        if (keep) ctx->spans[ctx->n_spans++] = (uvmrt_span_t){step, c->layer, c->phase, t0, tw, t1, 0, 0, c->resident_bytes};
    }
    if (uvmrt__faults_active(ctx)) {
        uvmrt__faults_collect(ctx);
        if (refresh_index(ctx) != 0) return; /* no memory for the index: the records wait for the next step */
    }
    if (ctx->n_pend > 0) {
        if (n > 1) qsort(ss, n, sizeof *ss, cmp_span);
        for (size_t i = 0; i < n; i++) sp[i] = ss[i].span;
        ctx->n_pend = uvmrt_attrib_run(&ctx->index, sp, n, ctx->pend, ctx->n_pend, ctx->anchor_ns, fc, &ctx->unattr);
        for (size_t i = 0; i < n; i++) {
            const uvmrt_call_t *c = &ctx->cur.calls[ss[i].call];
            uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc[i], NULL, NULL);
            if (keep) {
                ctx->spans[first_span + ss[i].call].gpu_faults = fc[i].v[FC_GPU_FAULTS];
                ctx->spans[first_span + ss[i].call].fault_htod_bytes = fc[i].v[FC_FAULT_HTOD];
            }
        }
    }
}

/* The step's (layer, phase) rows that ran, for csv (room reserved by step_reserve). */
void uvmrt__keep_rows(uvmrt_context_t *ctx)
{
    uint64_t step = uvmrt__steps_done(ctx);
    for (int r = 0; r < ctx->n_cur_rows; r++) {
        if (ctx->cur_rows[r].calls == 0) continue;
        ctx->rows[ctx->n_rows++] = (uvmrt_step_row_t){step, r / UVMRT_PHASE_COUNT,
                                                       (uvmrt_phase_t)(r % UVMRT_PHASE_COUNT), ctx->cur_rows[r]};
    }
}

/* At the end, or before a step that does not collect: records still pending
 * (the last step's tail, copies after it) go to the last call of the last step;
 * without any step they are unattributed. */
void uvmrt__attribute_rest(uvmrt_context_t *ctx)
{
    if (!uvmrt__faults_active(ctx)) return;
    uvmrt__faults_collect(ctx);
    if (ctx->n_pend == 0 || refresh_index(ctx) != 0) return;
    uvmrt_fcount_t fc;
    memset(&fc, 0, sizeof fc);
    int last = ctx->n_steps > 0 && ctx->cur.n_calls > 0 && !ctx->in_step;
    uvmrt_attrib_span_t all = {0, UINT64_MAX};
    ctx->n_pend = uvmrt_attrib_run(&ctx->index, &all, last ? 1 : 0, ctx->pend, ctx->n_pend, UINT64_MAX, &fc,
                                   &ctx->unattr);
    if (!last) return;
    const uvmrt_call_t *c = &ctx->cur.calls[ctx->cur.n_calls - 1];
    uint64_t step = uvmrt__steps_done(ctx) - 1;
    uvmrt_layer_stats_t *row = NULL;
    for (size_t i = ctx->n_rows; i > 0; i--)
        if (ctx->rows[i - 1].step == step && ctx->rows[i - 1].layer == c->layer && ctx->rows[i - 1].phase == c->phase) {
            row = &ctx->rows[i - 1].s;
            break;
        }
    uvmrt_layer_stats_t scratch;
    memset(&scratch, 0, sizeof scratch);
    uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc, &ctx->steps[ctx->n_steps - 1], row ? row : &scratch);
}

/* ------------------------------------------------------------------ history */

/* Keeps the history to the last UVMRT_HISTORY steps: once it holds a quarter
 * more than that, the oldest are summed into steps_dropped and their rows,
 * spans and copies dropped, in one pass (so a step costs O(1) amortized). */
void uvmrt__history_trim(uvmrt_context_t *ctx)
{
    uint64_t keep = (uint64_t)ctx->cfg.history;
    if (ctx->n_steps < keep + (keep + 3) / 4) return;
    uint64_t drop = ctx->n_steps - keep;
    for (uint64_t i = 0; i < drop; i++) uvmrt__step_stats_add(&ctx->steps_dropped, &ctx->steps[i]);
    memmove(ctx->steps, ctx->steps + drop, (size_t)keep * sizeof *ctx->steps);
    ctx->n_steps = keep;
    ctx->steps_before += drop;
    uint64_t first = ctx->steps_before;
    size_t k = 0;
    for (size_t i = 0; i < ctx->n_rows; i++)
        if (ctx->rows[i].step >= first) ctx->rows[k++] = ctx->rows[i];
    ctx->n_rows = k;
    k = 0;
    for (size_t i = 0; i < ctx->n_spans; i++)
        if (ctx->spans[i].step >= first) ctx->spans[k++] = ctx->spans[i];
    ctx->n_spans = k;
    k = 0;
    for (size_t i = 0; i < ctx->n_copies; i++)
        if (ctx->copies[i].step >= first) ctx->copies[k++] = ctx->copies[i];
    ctx->n_copies = k;
}
