/*
 * steady.h -- the recording step kept apart from the steady state (internal).
 *
 * Step 1 is recorded and runs like demand, so its faults and waits say nothing
 * about the plan; the per-layer tables and their "most faults / most wait"
 * marks use steps 2..N. Layer stats in the context sum every step, so step 1's
 * rows are copied when it ends and subtracted for the tables.
 */
#ifndef UVMRT_STEADY_H
#define UVMRT_STEADY_H

#include "internal.h"

/* Called by uvmrt_step_end after the fold: at the end of step 1, keeps its
 * (layer, phase) rows. A failed allocation is a warning: the tables then sum
 * every step and say so. */
void uvmrt__steady_note(uvmrt_context_t *ctx);
void uvmrt__steady_free(uvmrt_context_t *ctx);
/* 1 when the tables show steps 2..N: at least two steps and step 1 was kept. */
int uvmrt__steady_split(const uvmrt_context_t *ctx);
/* Layer l, phase p over steps 2..N (uvmrt__steady_split) or over every step. */
void uvmrt__steady_layer(const uvmrt_context_t *ctx, int l, int p, uvmrt_layer_stats_t *out);
/* Layer l, phase p in step 1 (zeros when not kept). */
void uvmrt__steady_recording(const uvmrt_context_t *ctx, int l, int p, uvmrt_layer_stats_t *out);

#endif
