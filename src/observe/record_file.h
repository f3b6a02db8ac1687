/*
 * record_file.h -- UVMRT_RECORD=FILE: the prefetch policy's recorded step written
 * as JSON for uvmrt-plan(1) (the format is documented there). Reads the context
 * only; a failed write is a warning, never a failed step.
 */
#ifndef UVMRT_RECORD_FILE_H
#define UVMRT_RECORD_FILE_H

#include "uvmrt.h"

/* Writes ctx->sched.record to cfg.record (tmp file beside it, then rename) when
 * UVMRT_RECORD names a file; logs a warning naming the path on failure. timed: a
 * planned step of the same calls whose measured durations (cuda) the file carries,
 * or NULL (the modelled ones; written again after the planned steps). */
void uvmrt__record_write(uvmrt_context_t *ctx, const struct uvmrt_sequence *timed);

#endif
