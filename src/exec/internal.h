/*
 * internal.h -- the context, composed of the state each module owns, and the
 * internal calls between modules (never installed). Tests include it to reach the internal hooks.
 */
#ifndef UVMRT_INTERNAL_H
#define UVMRT_INTERNAL_H

#include <stdint.h>

#include "attrib.h"
#include "backend.h"
#include "choose.h"
#include "events.h"
#include "faults.h"
#include "history.h"
#include "log.h"
#include "plan.h"
#include "sampling.h"
#include "schedule.h"
#include "settings.h"
#include "stats.h"
#include "tensor.h"
#include "tier.h"
#include "uvmrt.h"

/* The context: configuration, logging and the budget here; everything else in
 * the struct of the module that owns it, declared in that module's header next
 * to the functions that change it. A module reads another's state directly (or
 * through the accessors below) and changes it only through the owner's
 * functions; tests/check-ownership.sh fails on a write outside the owner (a new
 * part goes into its list too). */
struct uvmrt_context {
    uvmrt_config_t cfg;
    uvmrt_config_source_t sources[UVMRT_CONFIG_ENTRIES_MAX];
    uvmrt_log_t log;
    const uvmrt_profile_t *profile;
    uvmrt_profile_t *profile_owned; /* a loaded profile file (UVMRT_PROFILE=FILE), or NULL */
    uint64_t budget;
    uint64_t host_budget;           /* resolved UVMRT_HOST_BUDGET */
    int created;                    /* creation completed (a failed create writes no report) */
    int model;                      /* a rehearsal's model context (uvmrt_choose): its tensors carry no data */

    uvmrt_be_front_t be;            /* backend.h, backend.c: the ops table, state, absorbed errors */
    uvmrt_tensor_table_t tensors;   /* tensor.h, tensor.c: tensors, arenas, layers */
    uvmrt_residency_t res;          /* stats.h, stats.c: resident bytes and peak */
    uvmrt_events_t ev;              /* events.h, events.c: streams, event ring, timings, clock */
    uvmrt_schedule_t sched;         /* schedule.h, step.c + policy.c: this step, the record, the plan */
    uvmrt_stats_state_t stats;      /* stats.h, stats.c: the step in progress's counters */
    uvmrt_history_t hist;           /* history.h, history.c: completed steps, rows, spans, attribution */
    uvmrt_faults_t faults;          /* faults.h, faults.c: the record source, sampler, pending records */
    uvmrt_choice_state_t choice;    /* choose.h, choose.c: the trainer's choices, the plan budget */
    uvmrt_tier_state_t tier;        /* tier.h, tier.c: the disk tier's spill and write-backs in flight */

    /* the live snapshot for uvmrt-top (monitor.c; NULL: not publishing) */
    struct uvmrt_monitor *monitor;
    uint64_t total_steps;           /* uvmrt_context_set_total_steps; 0 = unknown */
    uint64_t output_errors;         /* files the context could not write (record_file.c): the summary's */
    /* step 1's (layer, phase) rows, for the steady-state tables (steady.c) */
    uvmrt_layer_stats_t *rec_rows;
    int n_rec_rows;
};

/* ------------------------------------------------------------------ internal API */
/* Completed steps, kept or not. */
static inline uint64_t uvmrt__steps_done(const uvmrt_context_t *ctx)
{
    return ctx->hist.steps_before + ctx->hist.n_steps;
}
/* Inside uvmrt_step_begin .. uvmrt_step_end. */
static inline int uvmrt__in_step(const uvmrt_context_t *ctx) { return ctx->sched.in_step; }

/* Creates a context over a given backend (tests: recording or custom backends). */
uvmrt_status_t uvmrt__context_create_with(const uvmrt_params_t *params,
                                          const uvmrt_backend_ops_t *ops,
                                          uvmrt_context_t **out);
/* A sim context modelling parent (its profile, policy, discard and remote settings) at
 * budget, for uvmrt_choose's rehearsals: no monitor, reports, record, trace or driver
 * counters, and only errors logged, to log_fn. */
uvmrt_status_t uvmrt__context_create_model(const uvmrt_context_t *parent, uint64_t budget, uvmrt_log_fn log_fn,
                                           void *log_user, uvmrt_context_t **out);
/* Every backend call the scheduler makes is described to fn, one line each, with
 * pointers as arena offsets, so traces from different backends compare equal. */
void uvmrt__set_trace(uvmrt_context_t *ctx, void (*fn)(void *user, const char *line), void *user);
/* How trace lines name an address (context.c gives tensor.c's uvmrt__describe_ptr). */
void uvmrt__be_set_describer(uvmrt_context_t *ctx,
                             void (*fn)(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len));

/* backend.c: the front end. Every backend call goes through these; failures are
 * logged (op, arguments, the backend's error name) and returned. */
/* Opens ops (ctx->be.ops from now on, whatever the result). */
uvmrt_status_t uvmrt__be_open(uvmrt_context_t *ctx, const uvmrt_backend_ops_t *ops, const uvmrt_backend_config_t *cfg);
void uvmrt__be_close(uvmrt_context_t *ctx);
uvmrt_status_t uvmrt__be_mem_info(uvmrt_context_t *ctx, uint64_t *free_bytes, uint64_t *total_bytes);
uvmrt_status_t uvmrt__be_alloc(uvmrt_context_t *ctx, size_t bytes, void **ptr);
void uvmrt__be_free(uvmrt_context_t *ctx, void *ptr, size_t bytes);
uvmrt_status_t uvmrt__be_host_alloc(uvmrt_context_t *ctx, size_t bytes, void **ptr);
void uvmrt__be_host_free(uvmrt_context_t *ctx, void *ptr, size_t bytes);
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
 * n = ctx->be.compensated read before the call, and the ranges count as not
 * resident; when it is 0 they may be partly on the device and must be counted
 * resident (safe: the budget was checked for them). */
uvmrt_status_t uvmrt__be_move(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                              uvmrt_stream_t stream);
int uvmrt__be_move_undone(const uvmrt_context_t *ctx, uint64_t compensated_before);
uvmrt_status_t uvmrt__be_discard(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n,
                                 uvmrt_stream_t stream);
uvmrt_status_t uvmrt__be_advise_remote(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n);
/* move, then the host waits for stream: n ranges' pages brought to (or made on) to's
 * side in one stream-ordered batch before the host, or a GPU write over the link,
 * touches them (never touched or discarded pages would fault in 4 KiB at a time). */
uvmrt_status_t uvmrt__be_move_wait(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                                   uvmrt_stream_t stream);
int uvmrt__be_has_touch(const uvmrt_context_t *ctx);
int uvmrt__be_has_discard(const uvmrt_context_t *ctx);
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
/* events.c: the copy streams, the clock stream and its anchor event (t0 = now);
 * what a failed call created is destroyed with the context. */
uvmrt_status_t uvmrt__exec_init(uvmrt_context_t *ctx);
/* Keeps a tensor in host memory from now on (or gives it back to the policy). */
uvmrt_status_t uvmrt__exec_place(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int host);
/* Between steps: t's contents readable and writable by the host now at t->ptr (a
 * resident tensor moved to the host and waited for; the copy streams' queued work on it
 * done), and t host-homed, not resident, in uvmrt's accounting. On failure its
 * accounting is unchanged. For a placement to page-locked memory (tensor.c). */
uvmrt_status_t uvmrt__exec_host_now(uvmrt_context_t *ctx, uvmrt_tensor_t *t);
/* Drops a resident tensor's pages from the device (after its last use). */
uvmrt_status_t uvmrt__exec_release(uvmrt_context_t *ctx, uvmrt_tensor_t *t);
/* At destroy: waits for the copy streams, harvests timings, frees the events. */
void uvmrt__exec_fini(uvmrt_context_t *ctx);
/* At destroy, after the report: frees the step's sequences, the record and the plan. */
void uvmrt__sched_free(uvmrt_context_t *ctx);
/* The timed calls of q (a step that ran on the backend; between steps, with the
 * placements it ran with): raw[i], what the timing events measured (0: not timed),
 * and work[i], the call's own work: a call with traffic to host-homed tensors less
 * that traffic at the profile's remote rates (it adds to a call's work, it does not
 * hide under it: the model, sim.c, adds it back), and no more than its declared work
 * at the efficiency its phase's calls without such traffic measured (the traffic
 * shared the link with the migrations). UVMRT_ERR_NOMEM. */
uvmrt_status_t uvmrt__step_work(uvmrt_context_t *ctx, const uvmrt_sequence_t *q, uint64_t *work, uint64_t *raw);

/* report.c */
/* report_file.c: whether the files UVMRT_TRACE, UVMRT_REPORT and UVMRT_RECORD name
 * can be written (src/base/outfile.h), checked when the context is created so that a run
 * does not learn it at its end; UVMRT_ERR_CONFIG, each problem logged, when not. */
uvmrt_status_t uvmrt__outputs_check(const uvmrt_context_t *ctx);
uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx);

#endif
