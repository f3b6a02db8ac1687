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

/* ------------------------------------------------------------------ event ring */
uvmrt_status_t uvmrt__ring_record(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t *out)
{
    uint64_t seq = ctx->ev.ring_next;
    uvmrt_event_t *slot = &ctx->ev.ring[seq % UVMRT_EVENT_RING];
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
    ctx->ev.ring_next++;
    *out = seq;
    return UVMRT_OK;
}

/* 1 when waiting for ref means something: it names a record still in the ring (0 names
 * none; records older than the ring are complete). */
int uvmrt__ring_pending(const uvmrt_context_t *ctx, uvmrt_evref_t ref)
{
    return ref != 0 && ctx->ev.ring_next - ref <= UVMRT_EVENT_RING;
}

/* Makes stream wait for a recorded event; records older than the ring are complete. */
uvmrt_status_t uvmrt__ring_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t ref)
{
    if (!uvmrt__ring_pending(ctx, ref)) return UVMRT_OK;
    return uvmrt__be_wait(ctx, stream, ctx->ev.ring[ref % UVMRT_EVENT_RING]);
}

uvmrt_status_t uvmrt__exec_init(uvmrt_context_t *ctx)
{
    uvmrt_status_t st;
    if ((st = uvmrt__be_stream_create(ctx, &ctx->ev.h2d_stream)) != UVMRT_OK) return st;
    if ((st = uvmrt__be_stream_create(ctx, &ctx->ev.d2h_stream)) != UVMRT_OK) return st;
    ctx->ev.ring_next = 1;
    ctx->ev.t0_ns = uvmrt__be_now(ctx);
    ctx->ev.anchor_ns = ctx->ev.t0_ns;
    /* The clock: an idle stream of our own, so recording the anchor waits for
     * nothing. Without it no time could be read: creation fails. */
    st = uvmrt__be_stream_create(ctx, &ctx->ev.clock_stream);
    if (st != UVMRT_OK) {
        ctx->ev.clock_stream = NULL;
        return st;
    }
    if ((st = uvmrt__be_event_create(ctx, 1, &ctx->ev.anchor_ev)) != UVMRT_OK) ctx->ev.anchor_ev = NULL;
    return st;
}

/* The events (after the last harvest) and the clock stream; the copy streams
 * stay until the tensors are freed (uvmrt__events_close_streams). */
void uvmrt__events_free(uvmrt_context_t *ctx)
{
    uvmrt_events_t *e = &ctx->ev;
    uvmrt__be_event_destroy(ctx, e->anchor_ev);
    uvmrt__be_stream_destroy(ctx, e->clock_stream);
    e->anchor_ev = NULL;
    e->clock_stream = NULL;
    /* NULL what is gone: the report at destroy still asks the ring whether a
     * tensor's last move completed (memsum.c), and must not query a destroyed
     * event (on cuda that can crash) */
    for (int i = 0; i < UVMRT_EVENT_RING; i++) {
        uvmrt__be_event_destroy(ctx, e->ring[i]);
        e->ring[i] = NULL;
    }
    for (int i = 0; i < e->n_timing; i++) uvmrt__be_event_destroy(ctx, e->timing[i]);
    for (int i = 0; i < e->n_copy_timing; i++) {
        uvmrt__be_event_destroy(ctx, e->copy_timing[i].start);
        uvmrt__be_event_destroy(ctx, e->copy_timing[i].end);
    }
    free(e->timing);
    free(e->copy_timing);
    e->timing = NULL;
    e->copy_timing = NULL;
    e->n_timing = e->cap_timing = e->n_copy_timing = e->cap_copy_timing = 0;
    e->n_copy_pending = e->copy_cursor = 0;
}

void uvmrt__events_close_streams(uvmrt_context_t *ctx)
{
    uvmrt__be_stream_destroy(ctx, ctx->ev.h2d_stream);
    uvmrt__be_stream_destroy(ctx, ctx->ev.d2h_stream);
}

/* ------------------------------------------------------------------ clock */
/* Records the anchor on the idle clock stream and reads the host clock: from now
 * on an event's time is anchor_ns plus its distance from the anchor. A failure
 * keeps the previous anchor (times drift, nothing else) and is counted. */
void uvmrt__clock_anchor(uvmrt_context_t *ctx)
{
    if (ctx->ev.anchor_ev == NULL) return;
    uvmrt_status_t st = uvmrt__be_record(ctx, ctx->ev.anchor_ev, ctx->ev.clock_stream);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_record (clock anchor)", st);
        return;
    }
    if ((st = uvmrt__be_stream_sync(ctx, ctx->ev.clock_stream)) != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "stream_sync (clock anchor)", st);
        return;
    }
    ctx->ev.anchor_ns = uvmrt__be_now(ctx);
    ctx->ev.anchors++;
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
    if (ctx->ev.anchor_ev == NULL) return 0;
    /* events end before the anchor but for copies that ran on past it: one reading each
     * (the elapsed time of a pair in the wrong order reads 0) */
    uint64_t before = uvmrt__elapsed(ctx, ev, ctx->ev.anchor_ev);
    uint64_t after = before > 0 ? 0 : uvmrt__elapsed(ctx, ctx->ev.anchor_ev, ev);
    if (before > ctx->ev.anchor_ns) before = ctx->ev.anchor_ns;
    uint64_t t = ctx->ev.anchor_ns - before + after;
    return t > ctx->ev.t0_ns ? t - ctx->ev.t0_ns : 0;
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
    if (i < ctx->ev.n_timing) return UVMRT_OK;
    if (i >= ctx->ev.cap_timing) {
        int cap = ctx->ev.cap_timing ? 2 * ctx->ev.cap_timing : 64;
        while (cap <= i) cap *= 2;
        uvmrt_event_t *t = realloc(ctx->ev.timing, (size_t)cap * sizeof *t);
        if (t == NULL) return UVMRT_ERR_NOMEM;
        ctx->ev.timing = t;
        ctx->ev.cap_timing = cap;
    }
    while (ctx->ev.n_timing <= i) {
        uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &ctx->ev.timing[ctx->ev.n_timing]);
        if (st != UVMRT_OK) return st;
        ctx->ev.n_timing++;
    }
    return UVMRT_OK;
}

/* A free start/end pair for timing one copy batch, or NULL (the batch goes
 * untimed: the failure is counted). */
static uvmrt_copy_timing_t *copy_timing_slot(uvmrt_context_t *ctx)
{
    /* A rotating cursor over the slots, and a count of those pending, keep this
     * O(1) amortized: slots are taken in order and harvested in bulk. */
    int n = ctx->ev.n_copy_timing;
    for (int k = 0; ctx->ev.n_copy_pending < n && k < n; k++) {
        int i = (ctx->ev.copy_cursor + k) % n;
        if (ctx->ev.copy_timing[i].pending) continue;
        ctx->ev.copy_cursor = (i + 1) % n;
        return &ctx->ev.copy_timing[i];
    }
    if (n == ctx->ev.cap_copy_timing) {
        int cap = n ? 2 * n : 64;
        uvmrt_copy_timing_t *arr = realloc(ctx->ev.copy_timing, (size_t)cap * sizeof *arr);
        if (arr == NULL) return NULL;
        ctx->ev.copy_timing = arr;
        ctx->ev.cap_copy_timing = cap;
    }
    uvmrt_copy_timing_t *arr = ctx->ev.copy_timing;
    uvmrt_copy_timing_t *c = &arr[ctx->ev.n_copy_timing];
    memset(c, 0, sizeof *c);
    uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &c->start);
    if (st == UVMRT_OK && (st = uvmrt__be_event_create(ctx, 1, &c->end)) != UVMRT_OK)
        uvmrt__be_event_destroy(ctx, c->start);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_create (copy timing)", st);
        return NULL;
    }
    ctx->ev.n_copy_timing++;
    return c;
}

/* Finished copy batches' busy time, to done (history.c adds it to the step that issued them). */
void uvmrt__harvest_copy_timings(uvmrt_context_t *ctx, int wait_all,
                                 void (*done)(uvmrt_context_t *ctx, const uvmrt_copy_timing_t *c, uint64_t ns))
{
    for (int i = 0; i < ctx->ev.n_copy_timing; i++) {
        uvmrt_copy_timing_t *c = &ctx->ev.copy_timing[i];
        if (!c->pending || (!wait_all && !uvmrt__be_event_done(ctx, c->end))) continue;
        uint64_t ns = 0;
        uvmrt_status_t st = uvmrt__be_elapsed(ctx, c->start, c->end, &ns);
        if (st != UVMRT_OK) {
            uvmrt__be_absorb(ctx, "event_elapsed_ns (copy timing)", st);
        } else {
            done(ctx, c, ns);
        }
        c->pending = 0;
        ctx->ev.n_copy_pending--;
    }
}

/* Timing of a copy batch: optional, so a failure only leaves the batch untimed. */
uvmrt_copy_timing_t *uvmrt__timed_start(uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    uvmrt_copy_timing_t *c = copy_timing_slot(ctx);
    if (c == NULL) return NULL;
    c->d2h = s == ctx->ev.d2h_stream;
    c->step = ctx->sched.step_index;
    return uvmrt__timing_record(ctx, c->start, s) ? c : NULL;
}

void uvmrt__timed_end(uvmrt_context_t *ctx, uvmrt_stream_t s, uvmrt_copy_timing_t *c, uvmrt_tensor_t **ts,
                      size_t n)
{
    if (c == NULL) return;
    c->bytes = 0;
    for (size_t i = 0; i < n; i++) c->bytes += ts[i]->footprint;
    c->pending = uvmrt__timing_record(ctx, c->end, s);
    ctx->ev.n_copy_pending += c->pending;
}
