/*
 * migrate.c -- tensors into contiguous ranges, and batches of evictions, discards
 * and prefetches through the backend; user placement (host) and the release of a
 * freed tensor's pages.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Every change is made only once the backend calls it needs have succeeded:
 * on failure the tensor's placement is as before (an advice that was applied
 * stays applied: it is idempotent and recorded in advised_remote). */
uvmrt_status_t uvmrt__exec_place(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int host)
{
    if (!host) {
        t->placed_host = 0;
        t->host_homed = 0; /* on the host, not resident: the policy moves it from now on */
        return UVMRT_OK;
    }
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_status_t st = UVMRT_OK;
    if (!t->advised_remote) {
        /* advice is not stream ordered: let queued copies of it finish first */
        st = uvmrt__be_stream_sync(ctx, ctx->ev.h2d_stream);
        if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->ev.d2h_stream);
        if (st == UVMRT_OK) st = uvmrt__be_advise_remote(ctx, &r, 1);
        if (st != UVMRT_OK) return st;
        t->advised_remote = 1;
    }
    if (!t->host_homed) {
        /* to the host after its last use; populates host pages when it held nothing.
         * Until the move's event is recorded it still counts as resident. */
        uvmrt_evref_t leaving = 0;
        st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->last_use);
        if (st == UVMRT_OK) st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->ready);
        if (st == UVMRT_OK) st = uvmrt__be_move(ctx, &r, 1, UVMRT_LOC_HOST, ctx->ev.d2h_stream);
        if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, ctx->ev.d2h_stream, &leaving);
        if (st != UVMRT_OK) return st;
        if (t->resident) uvmrt__resident_add(ctx, -(int64_t)t->footprint);
        uvmrt__tensor_set_resident(ctx, t, 0);
        t->ready = 0;
        t->leaving = leaving;
        t->host_homed = 1;
    }
    t->placed_host = 1;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt__exec_host_now(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_evref_t leaving = 0;
    uvmrt_status_t st = UVMRT_OK;
    if (t->resident) { /* its pages come to the host: moved, never dropped (host writes
                        * through its pointer are not seen, so "dead" cannot vouch) */
        uvmrt_range_t r = {t->ptr, t->footprint};
        st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->last_use);
        if (st == UVMRT_OK) st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->ready);
        if (st == UVMRT_OK) st = uvmrt__be_move(ctx, &r, 1, UVMRT_LOC_HOST, ctx->ev.d2h_stream);
        if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, ctx->ev.d2h_stream, &leaving);
    }
    /* the copies queued on it (a prefetch, this move) end before the host reads it */
    if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->ev.h2d_stream);
    if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->ev.d2h_stream);
    if (st != UVMRT_OK) return st;
    if (t->resident) {
        uvmrt__resident_add(ctx, -(int64_t)t->footprint);
        uvmrt__tensor_set_resident(ctx, t, 0);
        t->ready = 0;
        t->leaving = leaving;
    }
    t->host_homed = 1;
    return UVMRT_OK;
}

/* Discards a freed tensor's pages. On failure the tensor still counts as
 * resident (its pages may still be on the device). */
uvmrt_status_t uvmrt__exec_release(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_evref_t leaving = 0;
    uvmrt_status_t st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->last_use);
    if (st == UVMRT_OK) st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->ready);
    if (st == UVMRT_OK) st = uvmrt__be_discard(ctx, &r, 1, ctx->ev.d2h_stream);
    if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, ctx->ev.d2h_stream, &leaving);
    if (st == UVMRT_OK) t->leaving = leaving;
    return st;
}

/* ------------------------------------------------------------------ ranges */
static int cmp_tensor_addr(const void *a, const void *b)
{
    const uvmrt_tensor_t *x = *(uvmrt_tensor_t *const *)a, *y = *(uvmrt_tensor_t *const *)b;
    if (x->arena != y->arena) return x->arena < y->arena ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sorts tensors by address and merges neighbours into contiguous ranges, so one
 * call moves what lies side by side. ranges must hold n entries. */
size_t uvmrt__merge_ranges(uvmrt_tensor_t **ts, size_t n, uvmrt_range_t *ranges)
{
    qsort(ts, n, sizeof *ts, cmp_tensor_addr);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && ts[i - 1]->arena == ts[i]->arena &&
            (char *)ranges[k - 1].ptr + ranges[k - 1].bytes == (char *)ts[i]->ptr) {
            ranges[k - 1].bytes += ts[i]->footprint;
        } else {
            ranges[k++] = (uvmrt_range_t){ts[i]->ptr, ts[i]->footprint};
        }
    }
    return k;
}

int uvmrt__batch_init(uvmrt_batch_t *b, int n)
{
    memset(b, 0, sizeof *b);
    size_t sz = (size_t)(n > 0 ? n : 1) * sizeof(uvmrt_tensor_t *);
    b->evict = malloc(sz);
    b->discard = malloc(sz);
    b->fetch = malloc(sz);
    return b->evict && b->discard && b->fetch ? 0 : -1;
}

void uvmrt__batch_free(uvmrt_batch_t *b)
{
    free(b->evict);
    free(b->discard);
    free(b->fetch);
}

/* Issues one batch on the copy streams: evictions (after each victim's last use),
 * then prefetches (after those evictions). Counters go to (layer, phase).
 *
 * Accounting follows what was enqueued: victims stop counting as resident only
 * once their eviction and its event are both enqueued (so the prefetches can
 * wait for it); fetched tensors count as resident once their move is enqueued
 * (or when a failed move could not be undone: they may be partly there). On an
 * error the evictions already enqueued stay done and counted. */
uvmrt_status_t uvmrt__issue_batch(uvmrt_context_t *ctx, uvmrt_batch_t *b, int layer, uvmrt_phase_t phase)
{
    uvmrt_status_t st = UVMRT_OK;
    size_t n_victims = b->n_evict + b->n_discard;
    size_t n_max = n_victims > b->n_fetch ? n_victims : b->n_fetch;
    uvmrt_range_t *ranges = malloc((n_max ? n_max : 1) * sizeof *ranges);
    if (ranges == NULL) return UVMRT_ERR_NOMEM;
    uvmrt_evref_t evicted = 0;
    if (n_victims > 0) {
        uvmrt_stream_t s = ctx->ev.d2h_stream;
        for (size_t i = 0; i < b->n_evict && st == UVMRT_OK; i++) st = uvmrt__ring_wait(ctx, s, b->evict[i]->last_use);
        for (size_t i = 0; i < b->n_evict && st == UVMRT_OK; i++) st = uvmrt__ring_wait(ctx, s, b->evict[i]->ready);
        for (size_t i = 0; i < b->n_discard && st == UVMRT_OK; i++) st = uvmrt__ring_wait(ctx, s, b->discard[i]->last_use);
        for (size_t i = 0; i < b->n_discard && st == UVMRT_OK; i++) st = uvmrt__ring_wait(ctx, s, b->discard[i]->ready);
        uvmrt_copy_timing_t *c = st == UVMRT_OK ? uvmrt__timed_start(ctx, s) : NULL;
        if (st == UVMRT_OK)
            st = uvmrt__be_move(ctx, ranges, uvmrt__merge_ranges(b->evict, b->n_evict, ranges), UVMRT_LOC_HOST, s);
        if (st == UVMRT_OK) st = uvmrt__be_discard(ctx, ranges, uvmrt__merge_ranges(b->discard, b->n_discard, ranges), s);
        if (st == UVMRT_OK) uvmrt__timed_end(ctx, s, c, b->evict, b->n_evict);
        if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, s, &evicted);
        if (st != UVMRT_OK) goto out;
        for (size_t i = 0; i < n_victims; i++) {
            int discarded = i >= b->n_evict;
            uvmrt_tensor_t *t = discarded ? b->discard[i - b->n_evict] : b->evict[i];
            uvmrt__tensor_set_resident(ctx, t, 0);
            t->ready = 0;
            t->leaving = evicted;
            if (discarded) t->dead = 1;
            uvmrt__resident_add(ctx, -(int64_t)t->footprint);
            uvmrt__stat_add(ctx, layer, phase, discarded ? STAT_DISCARD : STAT_EVICT, t->footprint);
        }
    }
    if (b->n_fetch > 0) {
        uvmrt_stream_t s = ctx->ev.h2d_stream;
        uvmrt_evref_t ready = 0;
        st = uvmrt__ring_wait(ctx, s, evicted);
        for (size_t i = 0; i < b->n_fetch && st == UVMRT_OK; i++) st = uvmrt__ring_wait(ctx, s, b->fetch[i]->leaving);
        if (st != UVMRT_OK) goto out;
        uvmrt_copy_timing_t *c = uvmrt__timed_start(ctx, s);
        uint64_t undone = ctx->be.compensated;
        st = uvmrt__be_move(ctx, ranges, uvmrt__merge_ranges(b->fetch, b->n_fetch, ranges), UVMRT_LOC_DEVICE, s);
        if (st != UVMRT_OK && uvmrt__be_move_undone(ctx, undone)) goto out;
        int moved = st == UVMRT_OK;
        if (moved) {
            uvmrt__timed_end(ctx, s, c, b->fetch, b->n_fetch);
            st = uvmrt__ring_record(ctx, s, &ready);
        }
        for (size_t i = 0; i < b->n_fetch; i++) {
            uvmrt_tensor_t *t = b->fetch[i];
            uvmrt__tensor_set_resident(ctx, t, 1);
            t->ready = ready; /* 0 when no event could be recorded: nothing waits for it */
            uvmrt__resident_add(ctx, (int64_t)t->footprint);
            if (moved) uvmrt__stat_add(ctx, layer, phase, STAT_PREFETCH, t->footprint);
        }
    }
out:
    free(ranges);
    return st;
}
