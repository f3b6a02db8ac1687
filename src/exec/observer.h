/*
 * observer.h -- the step's tail (internal): the observers of the parts above the
 * executor (the choice, the driver's fault records, the record file, the history,
 * the live monitor) in one ordered list that api/context.c registers when it makes
 * the context. The executor calls them only through this list, so it calls nothing
 * of the parts above it (src/README.md); each hook is walked once per step begin,
 * step end or destroy, never per layer call.
 */
#ifndef UVMRT_OBSERVER_H
#define UVMRT_OBSERVER_H

#include "uvmrt.h"

struct uvmrt_sequence;

/* What the step's commit tells the observers. */
typedef struct uvmrt_step_end {
    int recorded;                       /* the step became the record (prefetch policy) */
    int planned;                        /* the step followed a plan: not a recording step, not step 1 */
    const struct uvmrt_sequence *timed; /* a planned step whose measured durations the
                                           record file carries (record_file.h), or NULL */
} uvmrt_step_end_t;

/* One observer: any hook may be NULL. Called in the list's order. */
typedef struct uvmrt_observer {
    const char *name;
    /* uvmrt_step_begin, before the plan's first moves: 1 when the step collects the
     * driver's counters (sampling.h); the step collects when any observer says so */
    int (*begin)(uvmrt_context_t *ctx);
    /* uvmrt_step_end, before anything changes: the memory its end hook will use. A
     * failure leaves the step open (uvmrt_step_end returns it); later observers are
     * not asked */
    uvmrt_status_t (*reserve)(uvmrt_context_t *ctx);
    /* the commit, right after the clock anchor and before the step's time is taken:
     * what the copy streams and the driver report about the step goes into its
     * counters. Cannot fail */
    void (*collect)(uvmrt_context_t *ctx);
    /* the commit, after the step's time: the step's counters are complete (cleared
     * after the last observer). Cannot fail */
    void (*end)(uvmrt_context_t *ctx, const uvmrt_step_end_t *e);
    /* context destroy, after the last clock anchor: what is still pending */
    void (*fini)(uvmrt_context_t *ctx);
} uvmrt_observer_t;

#define UVMRT_OBSERVERS_MAX 8

/* The list (in ctx->sched, step.c owns it). */
typedef struct uvmrt_observers {
    const uvmrt_observer_t *at[UVMRT_OBSERVERS_MAX];
    int n;
} uvmrt_observers_t;

/* step.c: appends o to the list (api/context.c, at creation); UVMRT_ERR_INVALID
 * when the list is full (UVMRT_OBSERVERS_MAX). */
uvmrt_status_t uvmrt__observer_add(uvmrt_context_t *ctx, const uvmrt_observer_t *o);

/* The observers, each defined next to what it observes (api/context.c lists them). */
extern const uvmrt_observer_t uvmrt__choice_observer;  /* choose.c: planned steps' times */
extern const uvmrt_observer_t uvmrt__faults_observer;  /* faults.c: the sampler */
extern const uvmrt_observer_t uvmrt__record_observer;  /* record_file.c: UVMRT_RECORD */
extern const uvmrt_observer_t uvmrt__history_observer; /* history.c: rows, spans, copies, fault attribution */
extern const uvmrt_observer_t uvmrt__monitor_observer; /* monitor.c: uvmrt-top's snapshot */

#endif
