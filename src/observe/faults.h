/*
 * faults.h -- where unified-memory records come from: CUPTI's
 * UNIFIED_MEMORY_COUNTER activity on the cuda backend, the model on sim, or
 * nothing ("none": fault statistics off, CUPTI missing, not permitted, or held
 * by another subscriber such as Nsight). Records land in ctx->faults.pend on the
 * context's host clock; the history's observer (history.c) attributes them at
 * each step end.
 */
#ifndef UVMRT_FAULTS_H
#define UVMRT_FAULTS_H

#include <stddef.h>
#include <stdint.h>

#include "attrib.h"
#include "sampling.h"
#include "uvmrt.h"

typedef struct uvmrt_fault_source uvmrt_fault_source_t;

/* The collection state (faults.c owns it; others read ctx->faults). */
typedef struct uvmrt_faults {
    const uvmrt_fault_source_t *src; /* NULL: none */
    int cupti;                      /* this context owns the process's CUPTI subscription */
    int on;                         /* the source is recording now (off between sampled steps) */
    uvmrt_sampler_t sampler;        /* which steps collect (sampling.h) */
    int64_t cupti_offset_ns;        /* CUPTI clock - host clock, at the last anchor */
    uint64_t anchors_seen;          /* ctx->ev.anchors when the source last saw one */
    uvmrt_um_record_t *pend;        /* records not attributed yet, host clock */
    size_t n_pend, cap_pend;
    uint64_t records_lost;          /* records dropped by CUPTI or for want of memory */
} uvmrt_faults_t;

/* A source of unified-memory records: the model (sim), CUPTI, or none (NULL). */
struct uvmrt_fault_source {
    const char *name;                                     /* "sim", "cupti" */
    void (*sw)(uvmrt_context_t *ctx, int on);             /* start / stop recording */
    void (*anchor)(uvmrt_context_t *ctx, uint64_t host_ns);
    void (*collect)(uvmrt_context_t *ctx);                /* records so far into ctx->faults.pend */
    void (*close)(uvmrt_context_t *ctx);
};

/* Sets up the sampler (UVMRT_FAULT_SAMPLE_EVERY), chooses the source and starts
 * it; sets ctx->faults.src (NULL: none). Never fails: a
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
/* Flushes the source and appends its records so far to ctx->faults.pend. */
void uvmrt__faults_collect(uvmrt_context_t *ctx);
/* Attributes the pending records (uvmrt__attrib_run, attrib.h: those after
 * horizon stay pending, the others leave). */
void uvmrt__faults_attribute(uvmrt_context_t *ctx, const uvmrt_attrib_index_t *ix, const uvmrt_attrib_span_t *spans,
                             size_t n_spans, uint64_t horizon, uvmrt_fcount_t *per_span,
                             uvmrt_attrib_unattributed_t *un);
/* Stops the source (after a last collect); idempotent. */
void uvmrt__faults_close(uvmrt_context_t *ctx);
/* Frees the pending records (at destroy, after close). */
void uvmrt__faults_free(uvmrt_context_t *ctx);

#endif
