/*
 * stats.h -- the counters of the step in progress and uvmrt's residency
 * accounting (internal; stats.c owns both). Every counter goes through
 * uvmrt__stat_add / uvmrt__stat_add_fc, and residency through
 * uvmrt__resident_add, so the peaks are kept in one place. Other modules read
 * ctx->stats and ctx->res.
 */
#ifndef UVMRT_STATS_H
#define UVMRT_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "attrib.h"
#include "counters.h"
#include "uvmrt.h"

/* Bytes uvmrt counts resident on the device (cudaMemGetInfo does not see
 * managed pages): the sum of the footprints of the tensors marked resident. */
typedef struct uvmrt_residency {
    uint64_t bytes, peak_bytes;
    uint64_t host_peak_bytes;       /* the peak of uvmrt__host_bytes */
} uvmrt_residency_t;

/* The step in progress: cleared by each step end. */
typedef struct uvmrt_stats_state {
    uvmrt_step_stats_t cur;         /* the step's totals */
    /* per (layer, phase) counters of the step: n_cur_rows = layers * UVMRT_PHASE_COUNT */
    uvmrt_layer_stats_t *cur_rows;
    int n_cur_rows;
} uvmrt_stats_state_t;

/* Adds to the counters of the call's layer and phase and to the current step.
 * kind: STAT_CALL or a STAT_<tag>, generated from UVMRT_COUNTERS (counters.h). */
void uvmrt__stat_add(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, int kind, uint64_t bytes);
/* Adds the driver's counters to (layer, phase): its totals, step s (NULL: the step
 * in progress) and row (NULL: the step in progress's row). */
void uvmrt__stat_add_fc(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, const uvmrt_fcount_t *fc,
                        uvmrt_step_stats_t *s, uvmrt_layer_stats_t *row);
/* Fills a stats struct's driver counters from fc (adds). */
void uvmrt__fc_into_layer(uvmrt_layer_stats_t *l, const uvmrt_fcount_t *fc);
/* Residency changed by delta bytes; the peaks (context and step) follow. */
void uvmrt__resident_add(uvmrt_context_t *ctx, int64_t delta);
/* The peak starts over from the resident bytes now (uvmrt_memory_peak_reset); the
 * host peak too. */
void uvmrt__resident_peak_reset(uvmrt_context_t *ctx);
/* Host bytes now: footprints of the live tensors not resident on the GPU, less the disk
 * tier's whose host copy is dropped (ctx->tier.off_host), plus the bytes declared by
 * uvmrt_context_set_host_external_bytes. */
uint64_t uvmrt__host_bytes(const uvmrt_context_t *ctx);
/* The host bytes may have grown (an allocation, a declaration): the peak follows. */
void uvmrt__host_note(uvmrt_context_t *ctx);
/* Step begin: one (layer, phase) row per layer and phase (zeroed when new);
 * UVMRT_ERR_NOMEM (logged) changes nothing. */
uvmrt_status_t uvmrt__stats_rows_reserve(uvmrt_context_t *ctx, int nrows);
/* Step begin: whether the step collects the driver's counters; the step's
 * peak starts at what is resident now. */
void uvmrt__stats_step_begin(uvmrt_context_t *ctx, int collect);
/* A copy batch of the step in progress took ns on its copy stream. */
void uvmrt__stats_copy_busy(uvmrt_context_t *ctx, int d2h, uint64_t ns);
/* Step end: the step's wall time. */
void uvmrt__stats_step_time(uvmrt_context_t *ctx, uint64_t step_ns);
/* Step end, after the step was folded into the history: cleared for the next. */
void uvmrt__stats_step_clear(uvmrt_context_t *ctx);
/* Frees the rows (at destroy). */
void uvmrt__stats_free(uvmrt_context_t *ctx);
/* Appends to a growable array; -1 on no memory. */
int uvmrt__grow(void **arr, size_t *cap, size_t need, size_t elem);

#endif
