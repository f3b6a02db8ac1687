/*
 * schedule.h -- the step in progress, the recorded step and the plan built from
 * it (internal; the executor owns this state: step.c stages and commits calls,
 * policy.c builds and follows the plan, schedule.c drops it when what it was built
 * for changed). Other modules read ctx->sched and change it only through the
 * functions below (tensor.c: a changed tensor set or
 * placement invalidates the record or the plan).
 */
#ifndef UVMRT_SCHEDULE_H
#define UVMRT_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "observer.h"
#include "plan.h"
#include "uvmrt.h"
#include "work.h"

/* One layer call of a step, as recorded. */
typedef struct uvmrt_call {
    int layer;
    uvmrt_phase_t phase;
    uvmrt_stream_t stream;
    uvmrt_stream_t after;            /* uvmrt_layer_call_t.after (NULL: none) */
    size_t use_first, n_uses; /* into the step's uses arrays */
    uvmrt_work_t work;               /* its declared work, as this context runs it (work.h) */
    /* timing events on the call's stream (indices into ctx->ev.timing) */
    int ev_wait_start, ev_wait_end, ev_end;
    int timed;                       /* all three were recorded (else its times read 0) */
    int touched;                     /* the model ran its work (once, even if layer_end is retried) */
    uvmrt_touch_result_t touch_res;  /* what that work faulted, counted when the call closes */
    uint64_t resident_bytes;         /* uvmrt's resident bytes once the call was open (trace counter) */
} uvmrt_call_t;

/* The calls of one step; uses are flattened (tensor id, access). */
typedef struct uvmrt_sequence {
    uvmrt_call_t *calls;
    size_t n_calls, cap_calls;
    int *use_tensor;
    unsigned *use_access;
    size_t n_uses, cap_uses;
} uvmrt_sequence_t;

/* In a model context of uvmrt_choice_review (choose.c sets it,
 * uvmrt__sched_set_review_model): each (layer, phase)'s duration factor, measured over
 * modelled, and its CPU work's measured ns (0: none; host_slowdown > 0 times the
 * model's time alone for the others). Empty elsewhere: calls take the model's times. */
typedef struct uvmrt_review_model {
    double *scale;                  /* n entries, or NULL */
    uint64_t *host_ns;              /* n entries, or NULL */
    size_t n;                       /* layer * UVMRT_PHASE_COUNT + phase indexes them */
    double host_slowdown;
} uvmrt_review_model_t;

typedef struct uvmrt_schedule {
    int in_step;
    int open_call;                  /* index of the open call in cur, or -1 */
    uint64_t step_index;            /* steps begun so far, minus one while in a step */
    uint64_t step_start_ns;
    uvmrt_sequence_t cur;           /* this step's calls */
    uvmrt_sequence_t record;        /* the recorded step (prefetch policy) */
    int have_record;
    int deviated;                   /* this step left the record */
    uvmrt_plan_t plan;
    int have_plan;
    uint64_t plan_host_bytes;       /* the plan's peak host need, tensors only (uvmrt__plan_host_peak) */
    uint8_t *plan_off_gpu;          /* per tensor: the plan keeps it in host memory at some point */
    uint64_t host_refused;          /* plans refused for needing more host memory than the budget */
    uint8_t *scratch_resident;      /* tensors.n bytes */
    uint64_t plans_built;
    int planned_since_record;       /* planned steps since the record was taken (UVMRT_RECORD rewrites) */
    uint64_t plan_budget;           /* the choice's budget (uvmrt__sched_set_plan_budget); 0: the context's */
    uint64_t external_bytes;        /* uvmrt_context_set_external_bytes: device memory held outside uvmrt */
    uvmrt_observers_t observers;    /* the step's tail (observer.h), in order */
    uvmrt_review_model_t review;    /* a review's model: the durations the calls take */
    /* step_end scratch, grown only: distinct-stream slots */
    size_t *sync_slots;
    size_t cap_sync_slots;
} uvmrt_schedule_t;

/* step.c: the initial state (no call open). */
void uvmrt__sched_init(uvmrt_context_t *ctx);
/* schedule.c. The plan no longer fits the tensors (a placement changed): it is
 * dropped and built again at the next step begin. */
void uvmrt__plan_drop(uvmrt_context_t *ctx);
/* The budget the policy plans with: the choice's, or the context's, less the device
 * memory the program holds outside uvmrt (uvmrt_context_set_external_bytes). */
uint64_t uvmrt__plan_budget(const uvmrt_context_t *ctx);
/* The choice's plan budget (0 or not below the context's budget: the context's). A
 * changed one drops the plan, built again at the next step. */
void uvmrt__sched_set_plan_budget(uvmrt_context_t *ctx, uint64_t bytes);
/* step.c: the context models the machine as a review measured it (copies of scale and
 * host_ns, n entries each, either NULL; host_slowdown: see uvmrt_review_model_t);
 * UVMRT_ERR_NOMEM changes nothing. Set between steps. */
uvmrt_status_t uvmrt__sched_set_review_model(uvmrt_context_t *ctx, const double *scale, const uint64_t *host_ns,
                                             size_t n, double host_slowdown);
/* The device bytes held outside uvmrt (checked by the caller). A change drops the plan. */
void uvmrt__sched_set_external_bytes(uvmrt_context_t *ctx, uint64_t bytes);
/* The current plan's peak host need with the declared host bytes; 0 without a plan. */
uint64_t uvmrt__plan_host_bytes(const uvmrt_context_t *ctx);
/* Tensors were added: the plan is dropped and the residency scratch resized. */
void uvmrt__sched_tensors_added(uvmrt_context_t *ctx);
/* A tensor was freed: the record and the plan name it, so both are dropped
 * (the next step is recorded again). */
void uvmrt__sched_tensor_freed(uvmrt_context_t *ctx);

#endif
