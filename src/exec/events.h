/*
 * events.h -- the executor's streams and events (internal; events.c owns them):
 * the sync-event ring, the layer calls' timing events, copy-batch timings and
 * the clock anchor every event time is read against. Other modules read this
 * state through ctx->ev and change it only through the functions below.
 */
#ifndef UVMRT_EVENTS_H
#define UVMRT_EVENTS_H

#include <stdint.h>

#include "backend.h"
#include "uvmrt.h"

#define UVMRT_EVENT_RING 4096 /* sync events in flight; see uvmrt__ring_* in events.c */

/* A reference to a recorded sync event in the ring: its sequence number (0 = none). */
typedef uint64_t uvmrt_evref_t;

/* A timing pair on a copy stream, harvested when complete. */
typedef struct uvmrt_copy_timing {
    uvmrt_event_t start, end;
    uint64_t step;
    uint64_t bytes;
    int d2h;
    int pending;
} uvmrt_copy_timing_t;

typedef struct uvmrt_events {
    uvmrt_stream_t h2d_stream, d2h_stream; /* the copy streams */

    /* sync events: a ring, referenced by sequence number */
    uvmrt_event_t ring[UVMRT_EVENT_RING];
    uint64_t ring_next;             /* next sequence number (starts at 1) */

    /* timing events for layer calls, reused every step (uvmrt_call_t.ev_* index them) */
    uvmrt_event_t *timing;
    int n_timing, cap_timing;
    uvmrt_copy_timing_t *copy_timing;
    int n_copy_timing, cap_copy_timing;
    int copy_cursor;                /* where the search for a free slot starts */
    int n_copy_pending;             /* slots with pending set */

    /* clocks: every event time is read against an anchor event recorded on an idle
     * stream right after a sync, whose host time (be_now) is anchor_ns */
    uint64_t t0_ns;                 /* be_now at context creation: trace time 0 */
    uvmrt_stream_t clock_stream;
    uvmrt_event_t anchor_ev;
    uint64_t anchor_ns;
    uint64_t anchors;               /* anchors taken so far: an observer that needs each new
                                       one (faults.c) compares it with the last it saw */
} uvmrt_events_t;

/* uvmrt__exec_init (internal.h) creates the streams and the anchor; these two
 * destroy them at the end. */
/* Destroys the events and the clock stream (after the last harvest). */
void uvmrt__events_free(uvmrt_context_t *ctx);
/* Destroys the copy streams (after the tensors' memory was freed). */
void uvmrt__events_close_streams(uvmrt_context_t *ctx);
/* Records a sync event on stream; *out is its sequence number. The number is
 * taken only when the record happened. */
uvmrt_status_t uvmrt__ring_record(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t *out);
/* 1 when ref names a record still in the ring: one a wait would wait for. */
int uvmrt__ring_pending(const uvmrt_context_t *ctx, uvmrt_evref_t ref);
/* Makes stream wait for a recorded event (0: none; older than the ring: complete). */
uvmrt_status_t uvmrt__ring_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t ref);
/* Re-anchors the event clock (a failure is counted and the old anchor kept; a new
 * one counts in ctx->ev.anchors). */
void uvmrt__clock_anchor(uvmrt_context_t *ctx);
/* Time between two timing events; a failure reads 0 and is counted. */
uint64_t uvmrt__elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b);
/* A completed event's time on the host clock, ns since t0. */
uint64_t uvmrt__time_of(uvmrt_context_t *ctx, uvmrt_event_t ev);
/* Records a timing event; 1 when recorded (a failure is counted, never returned). */
int uvmrt__timing_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream);
/* Makes sure timing events 0..i exist. */
uvmrt_status_t uvmrt__timing_event(uvmrt_context_t *ctx, int i);
/* Copy-batch timing: start (NULL: untimed), end (marks it pending), harvest: each
 * finished batch (every pending one when wait_all) to done with its busy time, once;
 * a time that cannot be read is counted and the batch dropped. The observer that
 * keeps the copies (history.c) harvests at step end. */
uvmrt_copy_timing_t *uvmrt__timed_start(uvmrt_context_t *ctx, uvmrt_stream_t s);
void uvmrt__timed_end(uvmrt_context_t *ctx, uvmrt_stream_t s, uvmrt_copy_timing_t *c, uvmrt_tensor_t **ts,
                      size_t n);
void uvmrt__harvest_copy_timings(uvmrt_context_t *ctx, int wait_all,
                                 void (*done)(uvmrt_context_t *ctx, const uvmrt_copy_timing_t *c, uint64_t ns));

#endif
