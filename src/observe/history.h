/*
 * history.h -- what completed steps leave behind (internal; history.c owns it):
 * per-step stats, (step, layer, phase) rows, layer-call spans and copy spans,
 * bounded by UVMRT_HISTORY, and the attribution of driver records to them.
 * Reports read ctx->hist; other modules change it only through the functions
 * below.
 *
 * Bounds (UVMRT_HISTORY = N, cfg.history): steps[0..n_steps) holds the last N
 * to N + N/4 completed steps, in order; steps[k] is step steps_before + k
 * (0-based). Older steps are summed into steps_dropped. rows, spans and copies
 * hold only the kept steps (their .step is the absolute step number). So memory
 * stays flat however long the run; uvmrt__steps_done() is the number of
 * completed steps.
 */
#ifndef UVMRT_HISTORY_H
#define UVMRT_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "attrib.h"
#include "events.h"
#include "uvmrt.h"

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

typedef struct uvmrt_span_sort {
    uvmrt_attrib_span_t span;
    size_t call;
} uvmrt_span_sort_t;

typedef struct uvmrt_history {
    uvmrt_step_stats_t *steps;      /* the kept window (see above) */
    uint64_t n_steps, cap_steps;    /* n_steps: kept steps, not all completed steps */
    uint64_t steps_before;          /* completed steps dropped from the front of steps[] */
    uvmrt_step_stats_t steps_dropped; /* their sum (peak: max; fault_sampled: count) */
    uvmrt_step_row_t *rows;
    size_t n_rows, cap_rows;
    uvmrt_span_t *spans;
    size_t n_spans, cap_spans;
    uvmrt_copy_span_t *copies;
    size_t n_copies, cap_copies;
    /* attribution: the address index over the tensors, and what matched none */
    uvmrt_attrib_index_t index;
    int index_tensors;              /* tensors.n when the index was built */
    uint64_t index_bytes;           /* tensors.allocated_bytes then */
    uvmrt_attrib_unattributed_t unattr;
    /* step_end scratch, grown only: attribution arrays */
    uvmrt_span_sort_t *scratch_ss;
    size_t cap_scratch_ss;
    uvmrt_attrib_span_t *scratch_sp;
    size_t cap_scratch_sp;
    uvmrt_fcount_t *scratch_fc;
    size_t cap_scratch_fc;
} uvmrt_history_t;

/* Frees everything (at destroy). */
void uvmrt__history_free(uvmrt_context_t *ctx);

#endif
