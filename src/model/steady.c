/*
 * steady.c -- step 1's per-layer rows kept apart, so reports can show the
 * steady state (steps 2..N) and the recording step separately (steady.h).
 */
#include <stdlib.h>
#include <string.h>

#include "steady.h"

void uvmrt__steady_note(uvmrt_context_t *ctx)
{
    if (uvmrt__steps_done(ctx) != 1 || ctx->rec_rows != NULL) return;
    size_t n = ctx->stats.n_cur_rows > 0 ? (size_t)ctx->stats.n_cur_rows : 1;
    ctx->rec_rows = malloc(n * sizeof *ctx->rec_rows);
    if (ctx->rec_rows == NULL) {
        LOG_WARN(&ctx->log, "out of memory keeping step 1's rows: the per-layer tables include the recording step");
        return;
    }
    if (ctx->stats.n_cur_rows > 0) memcpy(ctx->rec_rows, ctx->stats.cur_rows, n * sizeof *ctx->rec_rows);
    ctx->n_rec_rows = ctx->stats.n_cur_rows;
}

void uvmrt__steady_free(uvmrt_context_t *ctx)
{
    free(ctx->rec_rows);
    ctx->rec_rows = NULL;
    ctx->n_rec_rows = 0;
}

int uvmrt__steady_split(const uvmrt_context_t *ctx)
{
    return ctx->rec_rows != NULL && uvmrt__steps_done(ctx) >= 2;
}

void uvmrt__steady_recording(const uvmrt_context_t *ctx, int l, int p, uvmrt_layer_stats_t *out)
{
    int r = l * UVMRT_PHASE_COUNT + p;
    if (ctx->rec_rows != NULL && r < ctx->n_rec_rows) *out = ctx->rec_rows[r];
    else memset(out, 0, sizeof *out);
}

void uvmrt__steady_layer(const uvmrt_context_t *ctx, int l, int p, uvmrt_layer_stats_t *out)
{
    *out = ctx->tensors.layers[l].stats[p];
    if (!uvmrt__steady_split(ctx)) return;
    uvmrt_layer_stats_t rec;
    uvmrt__steady_recording(ctx, l, p, &rec);
    /* every field is a uint64_t counter (uvmrt.h); the totals include step 1's
     * rows, so the difference never goes below 0 (guarded anyway: records the
     * driver attributes late may land elsewhere) */
    uint64_t *a = (uint64_t *)out;
    const uint64_t *b = (const uint64_t *)&rec;
    for (size_t i = 0; i < sizeof *out / sizeof(uint64_t); i++) a[i] = a[i] >= b[i] ? a[i] - b[i] : 0;
}
