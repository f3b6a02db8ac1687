/*
 * exec.h -- the executor's modules and what each offers the others (internal).
 *
 * The policies at work:
 *  none      no hints; tensors are counted resident once used (no budget).
 *  demand    the driver under oversubscription, emulated: a layer's missing
 *            tensors fault in; when over budget, resident tensors are written
 *            back in allocation order first, on the layer's stream.
 *  prefetch  step 1 is recorded (and runs like demand); from step 2 on the plan
 *            (plan.c) is followed: at each issue point evictions go on the d2h
 *            copy stream (after the last use of each victim), prefetches on the
 *            h2d copy stream (after the evictions that make room), and a layer's
 *            stream waits only for the prefetches of its own tensors. A tensor the
 *            plan did not bring in time is prefetched late (the stream waits);
 *            a step that leaves the record runs like demand and is re-recorded.
 *
 * The modules, data flowing down:
 *  step.c     the public step and layer calls: argument checks, staging, commit
 *  policy.c   none / demand / late paths and the plan's issue points, homing
 *  migrate.c  tensors into contiguous ranges, eviction/prefetch batches, placement
 *  events.c   the sync-event ring, timing events, the clock anchor, copy timings
 *  history.c  per-step rows, spans and copies (bounded), fault attribution
 *
 * Transactions: every function here that returns a status either did what it
 * says, or failed leaving uvmrt's accounting no lower than what the device may
 * hold (see issue_batch and demand_path); the public calls in step.c turn that
 * into "a failed call changes nothing" for the caller (uvmrt.h).
 */
#ifndef UVMRT_EXEC_H
#define UVMRT_EXEC_H

#include "internal.h"

/* events.c: events.h; history.c: history.h; the state: schedule.h */

/* ------------------------------------------------------------------ migrate.c */
/* Tensors sorted by address, merged into contiguous ranges (ranges: n entries). */
size_t uvmrt__merge_ranges(uvmrt_tensor_t **ts, size_t n, uvmrt_range_t *ranges);
/* One issue: evictions, discards and prefetches, each list room for n tensors. */
typedef struct uvmrt_batch {
    uvmrt_tensor_t **evict, **discard, **fetch;
    size_t n_evict, n_discard, n_fetch;
} uvmrt_batch_t;
int uvmrt__batch_init(uvmrt_batch_t *b, int n);
void uvmrt__batch_free(uvmrt_batch_t *b);
/* Evictions then prefetches on the copy streams; counters to (layer, phase). */
uvmrt_status_t uvmrt__issue_batch(uvmrt_context_t *ctx, uvmrt_batch_t *b, int layer, uvmrt_phase_t phase);

/* ------------------------------------------------------------------ policy.c */
/* Builds (or rebuilds) the plan when residency left its path, and adopts its
 * host homing; a plan that cannot be built is not an error (demand instead). */
uvmrt_status_t uvmrt__ensure_plan(uvmrt_context_t *ctx);
/* Issues the plan's point p. */
uvmrt_status_t uvmrt__run_point(uvmrt_context_t *ctx, int p);
/* The step follows a plan. */
int uvmrt__plan_active(const uvmrt_context_t *ctx);
/* Bytes the staged uses [first, first + n) of cur need resident. */
uint64_t uvmrt__working_set(const uvmrt_context_t *ctx, size_t first, size_t n);
/* Call i of cur is call i of the record. */
int uvmrt__call_matches_record(const uvmrt_context_t *ctx, size_t i);
/* Demand: make room in allocation order, count the missing tensors resident. */
uvmrt_status_t uvmrt__demand_path(uvmrt_context_t *ctx, const uvmrt_call_t *c);
/* Prefetch policy, tensors the plan did not bring: fetch them now. */
uvmrt_status_t uvmrt__late_path(uvmrt_context_t *ctx, const uvmrt_call_t *c, int event);

#endif
