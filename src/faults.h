/*
 * faults.h -- where unified-memory records come from: CUPTI's
 * UNIFIED_MEMORY_COUNTER activity on the cuda backend, the model on sim, or
 * nothing ("none": fault statistics off, CUPTI missing, not permitted, or held
 * by another subscriber such as Nsight). Records land in ctx->pend on the
 * context's host clock; the executor attributes them at each step end.
 */
#ifndef UVMRT_FAULTS_H
#define UVMRT_FAULTS_H

#include "internal.h"

/* A source of unified-memory records: the model (sim), CUPTI, or none (NULL). */
struct uvmrt_fault_source {
    const char *name;                                     /* "sim", "cupti" */
    void (*sw)(uvmrt_context_t *ctx, int on);             /* start / stop recording */
    void (*anchor)(uvmrt_context_t *ctx, uint64_t host_ns);
    void (*collect)(uvmrt_context_t *ctx);                /* records so far into ctx->pend */
    void (*close)(uvmrt_context_t *ctx);
};

/* Chooses the source and starts it; sets ctx->fault_src (NULL: none). Never fails: a
 * source that cannot start logs one warning naming the reason and gives "none". */
void uvmrt__faults_open(uvmrt_context_t *ctx);
/* The source's name, never NULL: "cupti", "sim" or "none" (also before the
 * source was chosen, when context creation failed early). */
const char *uvmrt__faults_source(const uvmrt_context_t *ctx);
/* 1 when a source (CUPTI or the model) delivers records. */
int uvmrt__faults_active(const uvmrt_context_t *ctx);
/* Starts (on = 1) or stops the source's recording between steps (sampling);
 * stopping flushes what was recorded so far for the next collect. The source
 * starts on. No-op for "none". */
void uvmrt__faults_switch(uvmrt_context_t *ctx, int on);
/* Called right after an anchor: host_ns is be_now at the anchor event (CUPTI:
 * measures its clock's offset from the host clock). */
void uvmrt__faults_anchor(uvmrt_context_t *ctx, uint64_t host_ns);
/* Flushes the source and appends its records so far to ctx->pend. */
void uvmrt__faults_collect(uvmrt_context_t *ctx);
/* Stops the source (after a last collect). */
void uvmrt__faults_close(uvmrt_context_t *ctx);

#endif
