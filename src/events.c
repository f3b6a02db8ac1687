/*
 * events.c -- the executor's events: a ring of sync events referenced by sequence
 * number (so a tensor can remember "the prefetch that brought me" without owning
 * an event), the timing events of layer calls and copy batches, and the clock
 * anchor every event time is read against.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec.h"
#include "faults.h"

/* ------------------------------------------------------------------ event ring */
uvmrt_status_t uvmrt__ring_record(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t *out)
{
    uint64_t seq = ctx->ring_next;
    uvmrt_event_t *slot = &ctx->ring[seq % UVMRT_EVENT_RING];
    uvmrt_status_t st;
    if (*slot == NULL) {
        if ((st = uvmrt__be_event_create(ctx, 0, slot)) != UVMRT_OK) {
            *slot = NULL;
            return st;
        }
    } else {
        /* Reusing a slot drops its old record: it must have completed (4096
         * records later it always has; wait rather than assume). */
        while (!uvmrt__be_event_done(ctx, *slot)) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    if ((st = uvmrt__be_record(ctx, *slot, stream)) != UVMRT_OK) return st;
    /* the sequence number is taken only by a record that happened */
    ctx->ring_next++;
    *out = seq;
    return UVMRT_OK;
}

/* Makes stream wait for a recorded event; records older than the ring are complete. */
uvmrt_status_t uvmrt__ring_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t ref)
{
    if (ref == 0 || ctx->ring_next - ref > UVMRT_EVENT_RING) return UVMRT_OK;
    return uvmrt__be_wait(ctx, stream, ctx->ring[ref % UVMRT_EVENT_RING]);
}

uvmrt_status_t uvmrt__exec_init(uvmrt_context_t *ctx)
{
    ctx->ring_next = 1;
    ctx->t0_ns = uvmrt__be_now(ctx);
    ctx->anchor_ns = ctx->t0_ns;
    /* The clock: an idle stream of our own, so recording the anchor waits for
     * nothing. Without it no time could be read: creation fails. */
    uvmrt_status_t st = uvmrt__be_stream_create(ctx, &ctx->clock_stream);
    if (st != UVMRT_OK) {
        ctx->clock_stream = NULL;
        return st;
    }
    if ((st = uvmrt__be_event_create(ctx, 1, &ctx->anchor_ev)) != UVMRT_OK) ctx->anchor_ev = NULL;
    return st;
}

/* ------------------------------------------------------------------ clock */
/* Records the anchor on the idle clock stream and reads the host clock: from now
 * on an event's time is anchor_ns plus its distance from the anchor. A failure
 * keeps the previous anchor (times drift, nothing else) and is counted. */
void uvmrt__clock_anchor(uvmrt_context_t *ctx)
{
    if (ctx->anchor_ev == NULL) return;
    uvmrt_status_t st = uvmrt__be_record(ctx, ctx->anchor_ev, ctx->clock_stream);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_record (clock anchor)", st);
        return;
    }
    if ((st = uvmrt__be_stream_sync(ctx, ctx->clock_stream)) != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "stream_sync (clock anchor)", st);
        return;
    }
    ctx->anchor_ns = uvmrt__be_now(ctx);
    uvmrt__faults_anchor(ctx, ctx->anchor_ns);
}

/* Time between two timing events; a failure reads 0 and is counted. */
uint64_t uvmrt__elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b)
{
    uint64_t ns = 0;
    uvmrt_status_t st = uvmrt__be_elapsed(ctx, a, b, &ns);
    if (st != UVMRT_OK) uvmrt__be_absorb(ctx, "event_elapsed_ns", st);
    return ns;
}

/* A completed event's time on the host clock (ns since t0). */
uint64_t uvmrt__time_of(uvmrt_context_t *ctx, uvmrt_event_t ev)
{
    if (ctx->anchor_ev == NULL) return 0;
    uint64_t before = uvmrt__elapsed(ctx, ev, ctx->anchor_ev);
    uint64_t after = uvmrt__elapsed(ctx, ctx->anchor_ev, ev);
    if (before > ctx->anchor_ns) before = ctx->anchor_ns;
    uint64_t t = ctx->anchor_ns - before + after;
    return t > ctx->t0_ns ? t - ctx->t0_ns : 0;
}

/* A timing event: its failure costs a measurement, never the call. */
int uvmrt__timing_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream)
{
    uvmrt_status_t st = uvmrt__be_record(ctx, ev, stream);
    if (st != UVMRT_OK) uvmrt__be_absorb(ctx, "event_record (timing)", st);
    return st == UVMRT_OK;
}

/* ------------------------------------------------------------------ timing events */
/* The i-th timing event of the step (created once, reused every step). */
uvmrt_status_t uvmrt__timing_event(uvmrt_context_t *ctx, int i)
{
    if (i < ctx->n_timing) return UVMRT_OK;
    if (i >= ctx->cap_timing) {
        int cap = ctx->cap_timing ? 2 * ctx->cap_timing : 64;
        while (cap <= i) cap *= 2;
        uvmrt_event_t *t = realloc(ctx->timing, (size_t)cap * sizeof *t);
        if (t == NULL) return UVMRT_ERR_NOMEM;
        ctx->timing = t;
        ctx->cap_timing = cap;
    }
    while (ctx->n_timing <= i) {
        uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &ctx->timing[ctx->n_timing]);
        if (st != UVMRT_OK) return st;
        ctx->n_timing++;
    }
    return UVMRT_OK;
}

/* A free start/end pair for timing one copy batch, or NULL (the batch goes
 * untimed: the failure is counted). */
static uvmrt_copy_timing_t *copy_timing_slot(uvmrt_context_t *ctx)
{
    /* A rotating cursor over the slots, and a count of those pending, keep this
     * O(1) amortized: slots are taken in order and harvested in bulk. */
    int n = ctx->n_copy_timing;
    for (int k = 0; ctx->n_copy_pending < n && k < n; k++) {
        int i = (ctx->copy_cursor + k) % n;
        if (ctx->copy_timing[i].pending) continue;
        ctx->copy_cursor = (i + 1) % n;
        return &ctx->copy_timing[i];
    }
    if (n == ctx->cap_copy_timing) {
        int cap = n ? 2 * n : 64;
        uvmrt_copy_timing_t *arr = realloc(ctx->copy_timing, (size_t)cap * sizeof *arr);
        if (arr == NULL) return NULL;
        ctx->copy_timing = arr;
        ctx->cap_copy_timing = cap;
    }
    uvmrt_copy_timing_t *arr = ctx->copy_timing;
    uvmrt_copy_timing_t *c = &arr[ctx->n_copy_timing];
    memset(c, 0, sizeof *c);
    uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &c->start);
    if (st == UVMRT_OK && (st = uvmrt__be_event_create(ctx, 1, &c->end)) != UVMRT_OK)
        uvmrt__be_event_destroy(ctx, c->start);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_create (copy timing)", st);
        return NULL;
    }
    ctx->n_copy_timing++;
    return c;
}

/* Adds finished copy batches' busy time to the step that issued them. */
void uvmrt__harvest_copy_timings(uvmrt_context_t *ctx, int wait_all)
{
    for (int i = 0; i < ctx->n_copy_timing; i++) {
        uvmrt_copy_timing_t *c = &ctx->copy_timing[i];
        if (!c->pending || (!wait_all && !uvmrt__be_event_done(ctx, c->end))) continue;
        uint64_t ns = 0;
        uvmrt_status_t st = uvmrt__be_elapsed(ctx, c->start, c->end, &ns);
        if (st != UVMRT_OK) {
            uvmrt__be_absorb(ctx, "event_elapsed_ns (copy timing)", st);
        } else {
            uvmrt_step_stats_t *s = uvmrt__stats_of_step(ctx, c->step);
            if (c->d2h) s->d2h_busy_ns += ns;
            else s->h2d_busy_ns += ns;
            if (c->step >= ctx->steps_before && ctx->anchor_ev != NULL &&
                uvmrt__grow((void **)&ctx->copies, &ctx->cap_copies, ctx->n_copies + 1, sizeof *ctx->copies) == 0) {
                uint64_t t = uvmrt__time_of(ctx, c->start);
                ctx->copies[ctx->n_copies++] = (uvmrt_copy_span_t){c->step, t, t + ns, c->bytes, c->d2h};
            }
        }
        c->pending = 0;
        ctx->n_copy_pending--;
    }
}

/* Timing of a copy batch: optional, so a failure only leaves the batch untimed. */
uvmrt_copy_timing_t *uvmrt__timed_start(uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    uvmrt_copy_timing_t *c = copy_timing_slot(ctx);
    if (c == NULL) return NULL;
    c->d2h = s == ctx->d2h_stream;
    c->step = ctx->step_index;
    return uvmrt__timing_record(ctx, c->start, s) ? c : NULL;
}

void uvmrt__timed_end(uvmrt_context_t *ctx, uvmrt_stream_t s, uvmrt_copy_timing_t *c, uvmrt_tensor_t **ts,
                      size_t n)
{
    if (c == NULL) return;
    c->bytes = 0;
    for (size_t i = 0; i < n; i++) c->bytes += ts[i]->footprint;
    c->pending = uvmrt__timing_record(ctx, c->end, s);
    ctx->n_copy_pending += c->pending;
}
