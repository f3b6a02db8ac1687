/*
 * stats.c -- counters per (layer, phase), per step and in total, and the
 * residency accounting they balance against (bytes in - bytes out = change in
 * resident bytes). What is added, folded and summed per counter is generated
 * from UVMRT_COUNTERS (uvmrt.h).
 */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "internal.h"

/* ------------------------------------------------------------------ adding */
/* Each OWN counter of UVMRT_COUNTERS: to the (layer, phase) totals, the row of the
 * step in progress (when kept) and, when it has a step field, the step. */
#define ADD_OWN(name, tag, src, step, ...)                                                 \
    UVMRT__MINE_##src(case STAT_##tag: l->name += v; if (r) r->name += v;                  \
                      UVMRT__IF_##step(s->name += v;) break;)

void uvmrt__stat_add(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, int kind, uint64_t v)
{
    uvmrt_layer_stats_t *l = &ctx->tensors.layers[layer].stats[phase];
    uvmrt_step_stats_t *s = &ctx->stats.cur;
    int row = layer * UVMRT_PHASE_COUNT + (int)phase;
    uvmrt_layer_stats_t *r = row < ctx->stats.n_cur_rows ? &ctx->stats.cur_rows[row] : NULL; /* kept for csv */
    switch (kind) {
    case STAT_CALL:
        l->calls++;
        l->sampled_calls += s->fault_sampled ? 1 : 0;
        if (r) {
            r->calls++;
            r->sampled_calls += s->fault_sampled ? 1 : 0;
        }
        break;
    UVMRT_COUNTERS(ADD_OWN)
    default: break;
    }
}
#undef ADD_OWN

/* Each DRIVER counter from a counter set (fc->v[FC_<tag>]). */
#define FC_INTO(name, tag, src, ...) UVMRT__DRIVER_##src(l->name += fc->v[FC_##tag];)
#define FC_INTO_STEP(name, tag, src, step, ...) UVMRT__IF_##step(UVMRT__DRIVER_##src(s->name += fc->v[FC_##tag];))

void uvmrt__fc_into_layer(uvmrt_layer_stats_t *l, const uvmrt_fcount_t *fc) { UVMRT_COUNTERS(FC_INTO) }

static void fc_into_step(uvmrt_step_stats_t *s, const uvmrt_fcount_t *fc) { UVMRT_COUNTERS(FC_INTO_STEP) }
#undef FC_INTO
#undef FC_INTO_STEP

void uvmrt__step_stats_add(uvmrt_step_stats_t *a, const uvmrt_step_stats_t *b)
{
#define ADD_STEP(name, tag, src, step, ...) UVMRT__IF_##step(a->name += b->name;)
    UVMRT_COUNTERS(ADD_STEP)
#undef ADD_STEP
    a->step_ns += b->step_ns;
    if (b->peak_resident_bytes > a->peak_resident_bytes) a->peak_resident_bytes = b->peak_resident_bytes;
    a->h2d_busy_ns += b->h2d_busy_ns;
    a->d2h_busy_ns += b->d2h_busy_ns;
    a->fault_sampled += b->fault_sampled; /* in a sum of steps: how many of them collected */
}

void uvmrt__stat_add_fc(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, const uvmrt_fcount_t *fc,
                        uvmrt_step_stats_t *s, uvmrt_layer_stats_t *row)
{
    int r = layer * UVMRT_PHASE_COUNT + (int)phase;
    uvmrt__fc_into_layer(&ctx->tensors.layers[layer].stats[phase], fc);
    fc_into_step(s ? s : &ctx->stats.cur, fc);
    if (row == NULL && r < ctx->stats.n_cur_rows) row = &ctx->stats.cur_rows[r];
    if (row != NULL) uvmrt__fc_into_layer(row, fc);
}

int uvmrt__grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * elem);
    if (p == NULL) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

void uvmrt__resident_peak_reset(uvmrt_context_t *ctx)
{
    ctx->res.peak_bytes = ctx->res.bytes;
    ctx->res.host_peak_bytes = uvmrt__host_bytes(ctx);
}

uint64_t uvmrt__host_bytes(const uvmrt_context_t *ctx)
{
    uint64_t a = ctx->tensors.allocated_bytes - ctx->tier.off_host, r = ctx->res.bytes; /* dropped tier copies: not in host memory */
    return (a > r ? a - r : 0) + ctx->choice.host_external_bytes;
}

void uvmrt__host_note(uvmrt_context_t *ctx)
{
    uint64_t h = uvmrt__host_bytes(ctx);
    if (h > ctx->res.host_peak_bytes) ctx->res.host_peak_bytes = h;
}

void uvmrt__resident_add(uvmrt_context_t *ctx, int64_t delta)
{
    ctx->res.bytes = (uint64_t)((int64_t)ctx->res.bytes + delta);
    uvmrt__host_note(ctx);
    if (ctx->res.bytes > ctx->res.peak_bytes) ctx->res.peak_bytes = ctx->res.bytes;
    if (ctx->res.bytes > ctx->stats.cur.peak_resident_bytes)
        ctx->stats.cur.peak_resident_bytes = ctx->res.bytes;
}

uvmrt_status_t uvmrt__stats_rows_reserve(uvmrt_context_t *ctx, int nrows)
{
    uvmrt_stats_state_t *st = &ctx->stats;
    if (nrows == st->n_cur_rows) return UVMRT_OK;
    uvmrt_layer_stats_t *r = realloc(st->cur_rows, (size_t)(nrows ? nrows : 1) * sizeof *r);
    if (r == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_step_begin: out of memory for %d (layer, phase) rows", nrows);
        return UVMRT_ERR_NOMEM;
    }
    if (nrows > st->n_cur_rows) memset(r + st->n_cur_rows, 0, (size_t)(nrows - st->n_cur_rows) * sizeof *r);
    st->cur_rows = r;
    st->n_cur_rows = nrows;
    return UVMRT_OK;
}

/* cur and cur_rows were cleared by the last step end: what a failed step begin
 * moved stays counted there, for the step that runs next. */
void uvmrt__stats_step_begin(uvmrt_context_t *ctx, int collect)
{
    ctx->stats.cur.fault_sampled = collect;
    if (ctx->res.bytes > ctx->stats.cur.peak_resident_bytes) ctx->stats.cur.peak_resident_bytes = ctx->res.bytes;
}

void uvmrt__stats_copy_busy(uvmrt_context_t *ctx, int d2h, uint64_t ns)
{
    if (d2h) ctx->stats.cur.d2h_busy_ns += ns;
    else ctx->stats.cur.h2d_busy_ns += ns;
}

void uvmrt__stats_step_time(uvmrt_context_t *ctx, uint64_t step_ns) { ctx->stats.cur.step_ns = step_ns; }

void uvmrt__stats_step_clear(uvmrt_context_t *ctx)
{
    uvmrt_stats_state_t *st = &ctx->stats;
    memset(&st->cur, 0, sizeof st->cur);
    if (st->n_cur_rows > 0) memset(st->cur_rows, 0, (size_t)st->n_cur_rows * sizeof *st->cur_rows);
}

void uvmrt__stats_free(uvmrt_context_t *ctx)
{
    free(ctx->stats.cur_rows);
    ctx->stats.cur_rows = NULL;
    ctx->stats.n_cur_rows = 0;
}

uvmrt_status_t uvmrt_layer_stats_get(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase,
                                     uvmrt_layer_stats_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_stats_get: out is NULL: expected a uvmrt_layer_stats_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_layer_stats_get", uvmrt_layer_stats_t, out) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    if (layer < 0 || layer >= ctx->tensors.n_layers || (unsigned)phase >= UVMRT_PHASE_COUNT) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_stats_get: layer %d phase %d: expected layer 0..%d and a phase", layer,
                  (int)phase, ctx->tensors.n_layers - 1);
        return UVMRT_ERR_INVALID;
    }
    uvmrt_layer_stats_t s = ctx->tensors.layers[layer].stats[phase];
    UVMRT__ABI_WRITE(out, &s);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_step_stats_get(const uvmrt_context_t *ctx, uint64_t step, uvmrt_step_stats_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_step_stats_get: out is NULL: expected a uvmrt_step_stats_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_step_stats_get", uvmrt_step_stats_t, out) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    if (step >= uvmrt__steps_done(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_step_stats_get: step %llu: expected 0..%lld (completed steps)",
                  (unsigned long long)step, (long long)uvmrt__steps_done(ctx) - 1);
        return UVMRT_ERR_INVALID;
    }
    if (step < ctx->hist.steps_before) { /* history: the last UVMRT_HISTORY steps are kept */
        LOG_ERROR(&ctx->log, "uvmrt_step_stats_get: step %llu is no longer kept: the oldest kept step is %llu "
                             "(UVMRT_HISTORY=%d keeps the last steps; totals are in uvmrt_summary_get)",
                  (unsigned long long)step, (unsigned long long)ctx->hist.steps_before, ctx->cfg.history);
        return UVMRT_ERR_NOT_FOUND;
    }
    uvmrt_step_stats_t s = ctx->hist.steps[step - ctx->hist.steps_before];
    UVMRT__ABI_WRITE(out, &s);
    return UVMRT_OK;
}
