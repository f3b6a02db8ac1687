/*
 * plan.h -- the planner: a pure function from a recorded step to the prefetches
 * and evictions that keep each layer's tensors resident under a budget.
 *
 * A step is a cyclic sequence of m events (layer calls). Each event uses a set of
 * tensors. Issue point 0 is the step's start; issue point k+1 is just after event
 * k's work has been enqueued. At each issue point the planner looks ahead (up to
 * one full cycle) and prefetches the tensors of upcoming events in order, making
 * room by evicting the resident tensor whose next use is farthest (Belady),
 * never one used by the event just enqueued, and stopping as soon as the only
 * possible victims are needed no later than the tensor it would fetch.
 * A victim whose next use overwrites it (WRITE without READ) is discarded rather
 * than written back, when discard is enabled.
 *
 * Host homing: a tensor whose every use streams (UVMRT_USE_STREAM) may instead
 * stay in host memory for the whole step, read and written by the GPU over the
 * link. The planner estimates each plan's link time per direction (prefetch and
 * remote reads host->device; write-backs and remote writes device->host) and
 * homes the tensors whose traffic is cheaper remote than migrated, keeping the
 * homed set only when the whole plan's estimate improves.
 */
#ifndef UVMRT_PLAN_H
#define UVMRT_PLAN_H

#include <stdint.h>

#include "uvmrt.h"

#define UVMRT_NEVER INT32_MAX /* next use: not in the cycle */

typedef enum uvmrt_action_kind {
    UVMRT_ACT_PREFETCH = 0,
    UVMRT_ACT_EVICT = 1,   /* write back to host */
    UVMRT_ACT_DISCARD = 2  /* drop: contents are dead */
} uvmrt_action_kind_t;

typedef struct uvmrt_action {
    int tensor;      /* tensor id */
    int kind;        /* uvmrt_action_kind_t */
    int target;      /* the event (0..2m-1; >= m is the next step) this action serves */
} uvmrt_action_t;

/* One event of the recorded step. */
typedef struct uvmrt_plan_event {
    int n;
    const int *tensors;      /* tensor ids, no duplicates */
    const unsigned *access;  /* UVMRT_USE_* per tensor */
} uvmrt_plan_event_t;

typedef struct uvmrt_plan_input {
    int m;                           /* events per step, >= 1 */
    const uvmrt_plan_event_t *events;
    int n_tensors;
    const uint64_t *footprint;       /* bytes per tensor id */
    uint64_t budget;
    const uint8_t *resident0;        /* residency at the step's start, per tensor id */
    int discard;                     /* 1: discard dead victims */
    const uint8_t *remote_ok;        /* per tensor: may be host-homed; NULL = none may */
    const uint8_t *homed_fixed;      /* non-NULL: home exactly these, no search (keeps a
                                        re-plan of the same record stable) */
    const uint8_t *homed_forced;     /* NULL or per tensor: always homed (user placement) */
    /* link rates for the cost model, bytes/s (0 disables homing) */
    double prefetch_bps, evict_bps, remote_read_bps, remote_write_bps;
} uvmrt_plan_input_t;

typedef struct uvmrt_plan {
    int m;
    int n_tensors;
    uint8_t *start_resident;         /* the residency the plan assumes at step start */
    uint8_t *end_resident;           /* and leaves at step end */
    uint8_t *host_homed;             /* tensors kept in host memory (never resident) */
    double est_h2d_s, est_d2h_s;     /* the cost model's link time per direction, per step */
    size_t *point_first;             /* m+2 entries: actions of point p are [first[p], first[p+1]) */
    uvmrt_action_t *actions;
    size_t n_actions;
    /* The events using each tensor, ascending: tensor t's are use_event[use_first[t]
     * .. use_first[t + 1]) (n_tensors + 1 offsets; homed tensors have none). Sized by
     * the step's uses, not events x tensors; uvmrt__plan_next_use searches them. */
    size_t *use_first;
    int32_t *use_event;
} uvmrt_plan_t;

/* Builds a plan (choosing host-homed tensors when remote_ok allows).
 * UVMRT_ERR_BUDGET when one event's working set exceeds the budget
 * (*bad_event receives it when not NULL); UVMRT_ERR_NOMEM. */
uvmrt_status_t uvmrt__plan_build(const uvmrt_plan_input_t *in, uvmrt_plan_t *out, int *bad_event);
void uvmrt__plan_free(uvmrt_plan_t *plan);

/* The host bytes plan p needs at its peak: the footprints of the tensors it does not
 * hold on the GPU at its point of least residency (each point's evictions before its
 * prefetches). off_gpu (NULL or n_tensors bytes) receives 1 for each tensor the plan
 * keeps in host memory at some point of the step (homed, evicted or not resident at
 * the start). */
uint64_t uvmrt__plan_host_peak(const uvmrt_plan_t *p, const uint64_t *footprint, uint8_t *off_gpu);

/* Next use of tensor t after event e: the smallest d in 1..m with t used by event
 * (e + d) mod m, or UVMRT_NEVER. A binary search of t's events: O(log uses of t). */
int32_t uvmrt__plan_next_use(const uvmrt_plan_t *p, int e, int t);

#endif
