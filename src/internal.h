/*
 * internal.h -- the context and tensor structures, shared by the library's
 * modules (never installed). Tests include it to reach the internal hooks.
 */
#ifndef UVMRT_INTERNAL_H
#define UVMRT_INTERNAL_H

#include <stdint.h>

#include "attrib.h"
#include "backend.h"
#include "settings.h"
#include "log.h"
#include "plan.h"
#include "sampling.h"
#include "uvmrt.h"

#define UVMRT_TENSOR_MAGIC 0x75766d74u /* "uvmt" while allocated */
#define UVMRT_BLOCK (2u << 20)         /* the driver's large page: arena and big-tensor alignment */
#define UVMRT_SMALL_ALIGN (64u << 10)  /* alignment of tensors under 1 MiB */
#define UVMRT_EVENT_RING 4096          /* sync events in flight; see uvmrt__ring_* in events.c */

/* A reference to a recorded sync event in the ring: its sequence number (0 = none). */
typedef uint64_t uvmrt_evref_t;

typedef struct uvmrt_arena {
    void *base;
    size_t bytes;
    int live_tensors;
} uvmrt_arena_t;

struct uvmrt_tensor {
    uint32_t magic;
    uvmrt_context_t *ctx;
    int id;              /* allocation order; index in ctx->tensors */
    char *name;
    int layer;
    uvmrt_role_t role;
    size_t size;         /* bytes requested */
    size_t footprint;    /* size rounded up to its alignment: what residency counts */
    int arena;
    size_t offset;
    void *ptr;
    /* uvmrt's own residency accounting (cudaMemGetInfo does not see managed pages) */
    int resident;
    int dead;                 /* contents dead: discarded, or never written */
    int host_homed;           /* kept in host memory, used over the link */
    int placed_host;          /* uvmrt_tensor_set_placement(HOST): homed whatever the plan */
    int advised_remote;       /* advise_remote was applied to its range */
    uvmrt_evref_t ready;      /* the prefetch that made it resident */
    uvmrt_evref_t leaving;    /* the eviction that made it non-resident */
    uvmrt_evref_t last_use;   /* end of the last layer call that used it */
};

typedef struct uvmrt_layer {
    char *name;
    uvmrt_layer_stats_t stats[UVMRT_PHASE_COUNT];
    int *owned;          /* tensor ids owned by this layer (default uses) */
    int n_owned, cap_owned;
} uvmrt_layer_t;

/* One layer call of a step, as recorded. */
typedef struct uvmrt_call {
    int layer;
    uvmrt_phase_t phase;
    uvmrt_stream_t stream;
    size_t use_first, n_uses; /* into the step's uses arrays */
    uint64_t sim_duration_ns;
    /* timing events on the call's stream (indices into ctx->timing) */
    int ev_wait_start, ev_wait_end, ev_end;
    int timed;                       /* all three were recorded (else its times read 0) */
    int touched;                     /* the model ran its work (once, even if layer_end is retried) */
    uvmrt_touch_result_t touch_res;  /* what that work faulted, counted when the call closes */
    uint64_t host_bytes;             /* the call's CPU work on host memory (uvmrt_layer_call_t) */
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

/* A timing pair on a copy stream, harvested when complete. */
typedef struct uvmrt_copy_timing {
    uvmrt_event_t start, end;
    uint64_t step;
    uint64_t bytes;
    int d2h;
    int pending;
} uvmrt_copy_timing_t;

/* History (UVMRT_HISTORY = N, cfg.history): ctx->steps[0..n_steps) holds the
 * last N to N + N/4 completed steps, in order; ctx->steps[k] is step
 * steps_before + k (0-based). Older steps are summed into steps_dropped. rows,
 * spans and copies hold only the kept steps (their .step is the absolute step
 * number). So memory stays flat however long the run; uvmrt__steps_done() is the
 * number of completed steps. */

/* One (step, layer, phase) of the history. */
typedef struct uvmrt_step_row {
    uint64_t step;
    int layer;
    uvmrt_phase_t phase;
    uvmrt_layer_stats_t s;
} uvmrt_step_row_t;

/* One layer call on its stream, times in ns since t0. */
typedef struct uvmrt_span {
    uint64_t step;
    int layer;
    uvmrt_phase_t phase;
    uint64_t start_ns, wait_end_ns, end_ns;
    uint64_t gpu_faults, fault_htod_bytes;
    uint64_t resident_bytes;    /* when the call opened (uvmrt_call_t) */
} uvmrt_span_t;

/* One copy batch on a copy stream, times in ns since t0. */
typedef struct uvmrt_copy_span {
    uint64_t step;
    uint64_t start_ns, end_ns, bytes;
    int d2h;
} uvmrt_copy_span_t;

typedef struct uvmrt_fault_source uvmrt_fault_source_t;

#define UVMRT_BE_KINDS 16 /* distinct kinds of absorbed backend errors kept by name */
typedef struct uvmrt_be_kind {
    const char *op;  /* static */
    char name[48];   /* the backend's error name, e.g. cudaErrorNotReady */
    uint64_t count;
} uvmrt_be_kind_t;

struct uvmrt_context {
    uvmrt_config_t cfg;
    uvmrt_config_source_t sources[16];
    uvmrt_log_t log;
    const uvmrt_profile_t *profile;
    uvmrt_profile_t *profile_owned; /* a loaded profile file (UVMRT_PROFILE=FILE), or NULL */
    uint64_t budget;
    int created;                    /* creation completed (a failed create writes no report) */

    const uvmrt_backend_ops_t *ops; /* reached only through uvmrt__be_* (backend.c) */
    void *be;                       /* backend state */
    /* backend errors the library completed its calls without (timings), by kind */
    uint64_t backend_errors;
    uvmrt_be_kind_t be_kinds[UVMRT_BE_KINDS];
    int n_be_kinds;
    uint64_t be_compensated;        /* failed prefetches moved back (uvmrt__be_move) */
    uvmrt_stream_t h2d_stream, d2h_stream;

    /* trace hook: the calls the scheduler makes to the backend, backend-neutral */
    void (*trace_fn)(void *user, const char *line);
    void *trace_user;

    uvmrt_tensor_t **tensors;       /* by id, freed ones kept (magic cleared) */
    int n_tensors, cap_tensors;
    uvmrt_arena_t *arenas;
    int n_arenas, cap_arenas;
    uvmrt_layer_t *layers;
    int n_layers, cap_layers;

    /* residency */
    uint64_t resident_bytes, peak_resident_bytes, allocated_bytes;

    /* sync events: a ring, referenced by sequence number */
    uvmrt_event_t ring[UVMRT_EVENT_RING];
    uint64_t ring_next;             /* next sequence number (starts at 1) */

    /* timing events for layer calls, reused every step */
    uvmrt_event_t *timing;
    int n_timing, cap_timing;
    uvmrt_copy_timing_t *copy_timing;
    int n_copy_timing, cap_copy_timing;
    int copy_cursor;                /* where the search for a free slot starts */
    int n_copy_pending;             /* slots with pending set */

    /* steps */
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
    uint8_t *scratch_resident;      /* n_tensors bytes */
    uint64_t plans_built;

    uvmrt_step_stats_t cur_stats;   /* the step in progress; cleared by step_end */
    uvmrt_step_stats_t *steps;      /* the kept window (see History above) */
    uint64_t n_steps, cap_steps;    /* n_steps: kept steps, not all completed steps */
    uint64_t steps_before;          /* completed steps dropped from the front of steps[] */
    uvmrt_step_stats_t steps_dropped; /* their sum (peak: max; fault_sampled: count) */
    /* step_end scratch, grown only: distinct-stream slots and attribution arrays */
    size_t *sync_slots;
    size_t cap_sync_slots;
    struct uvmrt_span_sort *scratch_ss;
    size_t cap_scratch_ss;
    uvmrt_attrib_span_t *scratch_sp;
    size_t cap_scratch_sp;
    uvmrt_fcount_t *scratch_fc;
    size_t cap_scratch_fc;

    /* clocks: every event time is read against an anchor event recorded on an idle
     * stream right after a sync, whose host time (be_now) is anchor_ns */
    uint64_t t0_ns;                 /* be_now at context creation: trace time 0 */
    uvmrt_stream_t clock_stream;
    uvmrt_event_t anchor_ev;
    uint64_t anchor_ns;

    /* per (layer, phase) counters of the step in progress: n_layers * UVMRT_PHASE_COUNT */
    uvmrt_layer_stats_t *cur_rows;
    int n_cur_rows;
    /* history for CSV and trace: the kept steps only */
    uvmrt_step_row_t *rows;
    size_t n_rows, cap_rows;
    uvmrt_span_t *spans;
    size_t n_spans, cap_spans;
    uvmrt_copy_span_t *copies;
    size_t n_copies, cap_copies;

    /* unified-memory records (faults.c): source, pending records, address index */
    const uvmrt_fault_source_t *fault_src; /* faults.h; NULL: none */
    int fault_cupti;                /* this context owns the process's CUPTI subscription */
    int fault_on;                   /* the source is recording now (off between sampled steps) */
    uvmrt_sampler_t sampler;        /* which steps collect (sampling.h) */
    int64_t cupti_offset_ns;        /* CUPTI clock - host clock, at the last anchor */
    uvmrt_um_record_t *pend;
    size_t n_pend, cap_pend;
    uvmrt_attrib_index_t index;
    int index_tensors;
    uint64_t index_bytes;
    uvmrt_attrib_unattributed_t unattr;
    uint64_t fault_records_lost;    /* records dropped by CUPTI or for want of memory */

    /* the live snapshot for uvmrt-top (monitor.c; NULL: not publishing) */
    struct uvmrt_monitor *monitor;
    uint64_t total_steps;           /* uvmrt_context_set_total_steps; 0 = unknown */
    /* step 1's (layer, phase) rows, for the steady-state tables (steady.c) */
    uvmrt_layer_stats_t *rec_rows;
    int n_rec_rows;
};

/* ------------------------------------------------------------------ internal API */
/* Completed steps, kept or not. */
static inline uint64_t uvmrt__steps_done(const uvmrt_context_t *ctx) { return ctx->steps_before + ctx->n_steps; }

/* Creates a context over a given backend (tests: recording or custom backends). */
uvmrt_status_t uvmrt__context_create_with(const uvmrt_params_t *params,
                                          const uvmrt_backend_ops_t *ops,
                                          uvmrt_context_t **out);
/* Every backend call the scheduler makes is described to fn, one line each, with
 * pointers as arena offsets, so traces from different backends compare equal. */
void uvmrt__set_trace(uvmrt_context_t *ctx, void (*fn)(void *user, const char *line), void *user);

/* tensor.c */
uvmrt_tensor_t *uvmrt__tensor_checked(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t);
void uvmrt__tensors_release_all(uvmrt_context_t *ctx);
void uvmrt__describe_ptr(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len);

/* backend.c: the front end. Every backend call goes through these; failures are
 * logged (op, arguments, the backend's error name) and returned. */
uvmrt_status_t uvmrt__be_open(uvmrt_context_t *ctx, const uvmrt_backend_config_t *cfg);
void uvmrt__be_close(uvmrt_context_t *ctx);
uvmrt_status_t uvmrt__be_mem_info(uvmrt_context_t *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
uvmrt_status_t uvmrt__be_alloc(uvmrt_context_t *ctx, size_t bytes, void **ptr);
void uvmrt__be_free(uvmrt_context_t *ctx, void *ptr, size_t bytes);
uvmrt_status_t uvmrt__be_stream_create(uvmrt_context_t *ctx, uvmrt_stream_t *out);
void uvmrt__be_stream_destroy(uvmrt_context_t *ctx, uvmrt_stream_t s);       /* NULL: no-op */
uvmrt_status_t uvmrt__be_event_create(uvmrt_context_t *ctx, int timing, uvmrt_event_t *out);
void uvmrt__be_event_destroy(uvmrt_context_t *ctx, uvmrt_event_t ev);          /* NULL: no-op */
uvmrt_status_t uvmrt__be_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream);
uvmrt_status_t uvmrt__be_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_event_t ev);
int uvmrt__be_event_done(uvmrt_context_t *ctx, uvmrt_event_t ev);
/* *ns = 0 on failure, and the failure is NOT logged: the caller absorbs it with
 * uvmrt__be_absorb (a missing timing never fails a call). */
uvmrt_status_t uvmrt__be_elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns);
uvmrt_status_t uvmrt__be_stream_sync(uvmrt_context_t *ctx, uvmrt_stream_t stream);
uint64_t uvmrt__be_now(uvmrt_context_t *ctx);
/* A failed move to the device is undone (moved back to the host on the same
 * stream) when the backend allows: then uvmrt__be_move_undone(ctx, n) is 1 for
 * n = ctx->be_compensated read before the call, and the ranges count as not
 * resident; when it is 0 they may be partly on the device and must be counted
 * resident (safe: the budget was checked for them). */
uvmrt_status_t uvmrt__be_move(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                              uvmrt_stream_t stream);
int uvmrt__be_move_undone(const uvmrt_context_t *ctx, uint64_t compensated_before);
uvmrt_status_t uvmrt__be_discard(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n,
                                 uvmrt_stream_t stream);
uvmrt_status_t uvmrt__be_advise_remote(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n);
int uvmrt__be_has_touch(const uvmrt_context_t *ctx);
uvmrt_status_t uvmrt__be_touch(uvmrt_context_t *ctx, uvmrt_stream_t stream, const uvmrt_touch_t *work,
                               uvmrt_touch_result_t *res);
int uvmrt__be_has_um(const uvmrt_context_t *ctx);
void uvmrt__be_um_switch(uvmrt_context_t *ctx, int on);
void uvmrt__be_um_drain(uvmrt_context_t *ctx, void (*sink)(void *user, const uvmrt_um_record_t *r, size_t n),
                        void *user);
/* Counts a failure the caller completes without (st != OK), per kind (op and the
 * backend's error name), and logs the first of each kind. */
void uvmrt__be_absorb(uvmrt_context_t *ctx, const char *op, uvmrt_status_t st);

/* the executor (exec.h: step.c, policy.c, migrate.c, events.c, history.c) */
uvmrt_status_t uvmrt__exec_init(uvmrt_context_t *ctx);
/* Keeps a tensor in host memory from now on (or gives it back to the policy). */
uvmrt_status_t uvmrt__exec_place(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int host);
/* Drops a resident tensor's pages from the device (after its last use). */
uvmrt_status_t uvmrt__exec_release(uvmrt_context_t *ctx, uvmrt_tensor_t *t);
void uvmrt__exec_fini(uvmrt_context_t *ctx);

/* stats.c / report.c */
void uvmrt__stats_fold_step(uvmrt_context_t *ctx, const uvmrt_step_stats_t *s);
uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx);
/* Adds to the counters of the call's layer and phase and to the current step. */
void uvmrt__stat_add(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, int kind, uint64_t bytes);

/* kind: STAT_CALL or a STAT_<tag>, generated from UVMRT_COUNTERS */
#include "counters.h"

void uvmrt__resident_add(uvmrt_context_t *ctx, int64_t delta);
/* Adds the driver's counters to (layer, phase): its totals, step s (NULL: the step
 * in progress) and row (NULL: the step in progress's row). */
void uvmrt__stat_add_fc(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, const uvmrt_fcount_t *fc,
                        uvmrt_step_stats_t *s, uvmrt_layer_stats_t *row);
/* Fills a stats struct's driver counters from fc (adds). */
void uvmrt__fc_into_layer(uvmrt_layer_stats_t *l, const uvmrt_fcount_t *fc);
/* Appends to a growable array; -1 on no memory. */
int uvmrt__grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
