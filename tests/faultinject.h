/*
 * faultinject.h -- a backend that wraps another (sim in the tests) and fails
 * the k-th call of one chosen operation, once, with UVMRT_ERR_BACKEND and the
 * error name "fiInjectedFailure". It counts every fallible call per operation,
 * and after every data movement (move, discard, touch) checks the inner
 * backend's device occupancy against a budget, so a test sees the budget
 * broken at the event that broke it, not later. It also keeps the set of live
 * events and counts every use of an event that is not live (destroyed, or never
 * created): on cuda such a use can crash, while sim would not notice. It claims
 * the event-query capability so that the library's queries reach it.
 *
 * State is static (one wrapped context at a time), which is what the sweep
 * needs: it runs scenarios one after another in one process.
 */
#ifndef UVMRT_TESTS_FAULTINJECT_H
#define UVMRT_TESTS_FAULTINJECT_H

#include <stdint.h>

#include "backend.h"

/* Every fallible operation of the backend table. */
#define FI_OPS(X)                                                                 \
    X(FI_OPEN, "open") X(FI_MEM_INFO, "mem_info") X(FI_ALLOC, "alloc")            \
    X(FI_STREAM_CREATE, "stream_create") X(FI_EVENT_CREATE, "event_create")       \
    X(FI_EVENT_RECORD, "event_record") X(FI_STREAM_WAIT, "stream_wait")           \
    X(FI_EVENT_ELAPSED, "event_elapsed_ns") X(FI_STREAM_SYNC, "stream_sync")      \
    X(FI_MOVE, "move") X(FI_DISCARD, "discard") X(FI_ADVISE_REMOTE, "advise_remote") \
    X(FI_TOUCH, "touch") X(FI_HOST_ALLOC, "host_alloc")

typedef enum fi_op {
#define FI_X_ENUM(e, name) e,
    FI_OPS(FI_X_ENUM)
#undef FI_X_ENUM
    FI_N_OPS
} fi_op_t;

extern const char *const fi_op_names[FI_N_OPS];

typedef struct fi_state {
    int fail_op;               /* an fi_op_t, or -1: never fail */
    uint64_t fail_at;          /* 1-based index of the call of fail_op that fails */
    uint64_t calls[FI_N_OPS];  /* fallible calls so far, per op */
    int fired;                 /* the failure was injected */
    int last_failed;           /* the most recent call was the injected failure */
    uint64_t budget;           /* device bytes allowed (checked when check_budget) */
    int check_budget;
    uint64_t over_budget;      /* movements after which the device held more than budget */
    uint64_t max_device;       /* the most the device held after any movement */
    uint64_t dead_event_uses;  /* record/wait/query/elapsed calls on an event not created, or destroyed */
} fi_state_t;

extern fi_state_t fi;

/* Arms the injector: fail the k-th call of op (op -1: none), check the device
 * against budget after every movement when check_budget. Clears the counts. */
void fi_arm(int op, uint64_t k, uint64_t budget, int check_budget);
/* The wrapping table around inner (copied: every entry, its caps, plus
 * advise_remote as a capability so that it is an injection point too). */
uvmrt_backend_ops_t fi_wrap(const uvmrt_backend_ops_t *inner);
/* Bytes the inner backend holds on its device, without counting a call. */
uint64_t fi_device_bytes(void *state);

#endif
