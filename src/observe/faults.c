/*
 * faults.c -- unified-memory records from CUPTI (cuda) or the model (sim).
 *
 * CUPTI allows one subscriber per process and calls its buffer callbacks on its
 * own thread, so its state is process-wide (the only global state of the
 * library, forced by CUPTI): one context at a time owns it; others get "none"
 * with a warning. Buffers (UVMRT_CUPTI_BUFFER bytes each) are kept on a free
 * list and reused; a completed buffer is parsed on CUPTI's thread into a
 * mutex-protected queue of compact records, so the training thread only takes
 * the lock to swap the queue out at step end (after cuptiActivityFlushAll).
 * Between steps that do not collect (sampling.h) the activity is disabled, so
 * the driver does not trace their faults at all.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "internal.h"

static void pend_sink(void *user, const uvmrt_um_record_t *r, size_t n)
{
    uvmrt_context_t *ctx = user;
    if (uvmrt__grow((void **)&ctx->faults.pend, &ctx->faults.cap_pend, ctx->faults.n_pend + n, sizeof *r) != 0) {
        ctx->faults.records_lost += n;
        LOG_WARN(&ctx->log, "out of memory keeping unified-memory records: %zu dropped", n);
        return;
    }
    memcpy(ctx->faults.pend + ctx->faults.n_pend, r, n * sizeof *r);
    ctx->faults.n_pend += n;
}

#ifdef UVMRT_HAVE_CUPTI
#include <pthread.h>

#include <cupti.h>

/* CUPTI 13 (CUDA 13) delivers unified-memory counter records as Counter3, CUPTI
 * 12 as Counter2; the fields read here (start, end, address, value, counterKind,
 * flags) are in both. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityUnifiedMemoryCounter3 cu_um_record_t;
#else
typedef CUpti_ActivityUnifiedMemoryCounter2 cu_um_record_t;
#endif

#define UVMRT_CUPTI_BUFFER (8u << 20)
#define UVMRT_CUPTI_ALIGN 8

static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;
static int cu_owned;               /* a context holds the subscription */
static int cu_registered;          /* callbacks registered (once per process) */
static int cu_configured;          /* counters configured (once per process) */
static uint8_t *cu_free[16];       /* reusable buffers */
static int cu_n_free;
static uvmrt_um_record_t *cu_q;    /* parsed records, CUPTI clock */
static size_t cu_n_q, cu_cap_q;
static uint64_t cu_lost;           /* records that found no room */

static void CUPTIAPI cu_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    pthread_mutex_lock(&cu_lock);
    uint8_t *b = cu_n_free > 0 ? cu_free[--cu_n_free] : NULL;
    pthread_mutex_unlock(&cu_lock);
    if (b == NULL) b = aligned_alloc(UVMRT_CUPTI_ALIGN, UVMRT_CUPTI_BUFFER);
    *buffer = b;
    *size = b ? UVMRT_CUPTI_BUFFER : 0;
    *max_records = 0;
}

static void CUPTIAPI cu_buffer_completed(CUcontext context, uint32_t stream, uint8_t *buffer, size_t size,
                                         size_t valid)
{
    (void)size;
    if (buffer == NULL) return;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&cu_lock);
    while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind != CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER) continue;
        const cu_um_record_t *u = (const cu_um_record_t *)rec;
        if (cu_n_q == cu_cap_q) {
            size_t cap = cu_cap_q ? 2 * cu_cap_q : 4096;
            uvmrt_um_record_t *q = realloc(cu_q, cap * sizeof *q);
            if (q == NULL) {
                cu_lost++;
                continue;
            }
            cu_q = q;
            cu_cap_q = cap;
        }
        cu_q[cu_n_q++] = (uvmrt_um_record_t){u->start, u->end, u->address, u->value, (uint32_t)u->counterKind,
                                             u->flags};
    }
    /* records CUPTI itself dropped (its queue was full), counted, never silent */
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) cu_lost += dropped;
    if (cu_n_free < (int)(sizeof cu_free / sizeof cu_free[0])) cu_free[cu_n_free++] = buffer;
    else free(buffer);
    pthread_mutex_unlock(&cu_lock);
}

static const char *cu_err(CUptiResult r)
{
    const char *s = NULL;
    if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || s == NULL) s = "unknown CUPTI error";
    return s;
}

/* Why CUPTI cannot be used, in words a user can act on. */
static const char *cu_hint(CUptiResult r)
{
    switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return "another profiler (Nsight Systems/Compute, or another CUPTI user) holds CUPTI in this process";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        return "not permitted (profiling needs NVreg_RestrictProfilingToAdminUsers=0 or root)";
    case CUPTI_ERROR_NOT_INITIALIZED: return "CUPTI could not initialise (driver or library mismatch?)";
    case CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED:
    case CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE:
    case CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES:
    case CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS:
        return "unified-memory profiling is not supported here";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED: return "not supported on this virtualized GPU";
    default: return "CUPTI is unavailable";
    }
}

#define CU_KINDS 7
static CUptiResult cu_configure(uint32_t enable) /* the counters stay configured for the process */
{
    static const CUpti_ActivityUnifiedMemoryCounterKind kinds[CU_KINDS] = {
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_HTOD,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_BYTES_TRANSFER_DTOH,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_GPU_PAGE_FAULT,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_CPU_PAGE_FAULT_COUNT,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THRASHING,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_THROTTLING,
        CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_KIND_REMOTE_MAP,
    };
    CUpti_ActivityUnifiedMemoryCounterConfig cfg[CU_KINDS];
    memset(cfg, 0, sizeof cfg);
    for (int i = 0; i < CU_KINDS; i++) {
        cfg[i].scope = CUPTI_ACTIVITY_UNIFIED_MEMORY_COUNTER_SCOPE_PROCESS_SINGLE_DEVICE;
        cfg[i].kind = kinds[i];
        cfg[i].deviceId = 0;
        cfg[i].enable = enable;
    }
    return cuptiActivityConfigureUnifiedMemoryCounter(cfg, CU_KINDS);
}

/* 0 when this context now owns CUPTI; otherwise a warning was logged. */
static int cu_start(uvmrt_context_t *ctx)
{
    pthread_mutex_lock(&cu_lock);
    int busy = cu_owned;
    if (!busy) cu_owned = 1;
    pthread_mutex_unlock(&cu_lock);
    if (busy) {
        LOG_WARN(&ctx->log, "fault statistics off: another uvmrt context in this process holds CUPTI "
                            "(one subscriber per process); fault_stats_source is none");
        return -1;
    }
    CUptiResult r = CUPTI_SUCCESS;
    const char *what = "cuptiActivityRegisterCallbacks";
    if (!cu_registered) {
        r = cuptiActivityRegisterCallbacks(cu_buffer_requested, cu_buffer_completed);
        if (r == CUPTI_SUCCESS) cu_registered = 1;
    }
    if (r == CUPTI_SUCCESS && !cu_configured) {
        what = "cuptiActivityConfigureUnifiedMemoryCounter";
        r = cu_configure(1);
        if (r == CUPTI_SUCCESS) cu_configured = 1;
    }
    if (r == CUPTI_SUCCESS) {
        what = "cuptiActivityEnable(UNIFIED_MEMORY_COUNTER)";
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
    }
    if (r != CUPTI_SUCCESS) {
        LOG_WARN(&ctx->log, "fault statistics off: %s failed: %s (%s); the run continues with uvmrt's own "
                            "statistics, fault_stats_source is none (UVMRT_FAULT_STATS=0 silences this)",
                 what, cu_err(r), cu_hint(r));
        pthread_mutex_lock(&cu_lock);
        cu_owned = 0;
        pthread_mutex_unlock(&cu_lock);
        return -1;
    }
    return 0;
}

static void cu_collect(uvmrt_context_t *ctx)
{
    CUptiResult r = cuptiActivityFlushAll(0);
    if (r != CUPTI_SUCCESS) LOG_DEBUG(&ctx->log, "cuptiActivityFlushAll: %s", cu_err(r));
    pthread_mutex_lock(&cu_lock);
    uvmrt_um_record_t *q = cu_q;
    size_t n = cu_n_q;
    uint64_t lost = cu_lost;
    cu_q = NULL;
    cu_n_q = cu_cap_q = 0;
    cu_lost = 0;
    pthread_mutex_unlock(&cu_lock);
    if (lost > 0) {
        ctx->faults.records_lost += lost;
        LOG_WARN(&ctx->log, "%llu unified-memory records lost (CUPTI's queue was full, or no memory to keep them); "
                            "the driver's counters of this step are short",
                 (unsigned long long)lost);
    }
    /* CUPTI's clock to the host clock */
    for (size_t i = 0; i < n; i++) {
        q[i].start = (uint64_t)((int64_t)q[i].start - ctx->faults.cupti_offset_ns);
        q[i].end = (uint64_t)((int64_t)q[i].end - ctx->faults.cupti_offset_ns);
    }
    if (n > 0) pend_sink(ctx, q, n);
    free(q);
}

/* Sampling: the driver stops (or resumes) tracing between steps. Stopping
 * flushes first, so the records so far are queued for the next collect. */
static void cu_switch(uvmrt_context_t *ctx, int on)
{
    CUptiResult r;
    if (on) {
        r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
    } else {
        r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
        cuptiActivityFlushAll(1);
    }
    if (r != CUPTI_SUCCESS)
        LOG_WARN(&ctx->log, "cuptiActivity%s(UNIFIED_MEMORY_COUNTER): %s", on ? "Enable" : "Disable", cu_err(r));
}

static void cu_stop(uvmrt_context_t *ctx)
{
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_UNIFIED_MEMORY_COUNTER);
    pthread_mutex_lock(&cu_lock);
    free(cu_q);
    cu_q = NULL;
    cu_n_q = cu_cap_q = 0;
    while (cu_n_free > 0) free(cu_free[--cu_n_free]);
    cu_owned = 0;
    pthread_mutex_unlock(&cu_lock);
    ctx->faults.cupti = 0;
}
#endif /* UVMRT_HAVE_CUPTI */

/* ------------------------------------------------------------------ the sources */
static void sim_switch(uvmrt_context_t *ctx, int on) { uvmrt__be_um_switch(ctx, on); }
static void sim_anchor(uvmrt_context_t *ctx, uint64_t host_ns)
{
    (void)ctx;
    (void)host_ns; /* the model's records are on the host clock already */
}
static void sim_collect(uvmrt_context_t *ctx) { uvmrt__be_um_drain(ctx, pend_sink, ctx); }
static void sim_close(uvmrt_context_t *ctx) { (void)ctx; }

static const uvmrt_fault_source_t source_sim = {"sim", sim_switch, sim_anchor, sim_collect, sim_close};

#ifdef UVMRT_HAVE_CUPTI
static void cupti_anchor(uvmrt_context_t *ctx, uint64_t host_ns)
{
    uint64_t ts = 0;
    if (cuptiGetTimestamp(&ts) == CUPTI_SUCCESS) ctx->faults.cupti_offset_ns = (int64_t)ts - (int64_t)host_ns;
}
static const uvmrt_fault_source_t source_cupti = {"cupti", cu_switch, cupti_anchor, cu_collect, cu_stop};
#endif

void uvmrt__faults_open(uvmrt_context_t *ctx)
{
    uvmrt__sampler_init(&ctx->faults.sampler, (unsigned)ctx->cfg.fault_sample_every, UVMRT_SAMPLER_CAP);
    ctx->faults.src = NULL;
    if (!ctx->cfg.fault_stats) return;
    if (uvmrt__be_has_um(ctx)) {
        ctx->faults.src = &source_sim;
        uvmrt__be_um_switch(ctx, 1);
        ctx->faults.on = 1;
        return;
    }
    if (ctx->cfg.backend != UVMRT_BACKEND_CUDA) return;
#ifdef UVMRT_HAVE_CUPTI
    if (cu_start(ctx) == 0) {
        ctx->faults.cupti = 1;
        ctx->faults.src = &source_cupti;
        ctx->faults.on = 1;
    }
#else
    LOG_WARN(&ctx->log, "fault statistics off: this build of uvmrt has no CUPTI (configure --with-cupti); "
                        "fault_stats_source is none (UVMRT_FAULT_STATS=0 silences this)");
#endif
}

const char *uvmrt__faults_source(const uvmrt_context_t *ctx)
{
    return ctx->faults.src ? ctx->faults.src->name : "none";
}

int uvmrt__faults_active(const uvmrt_context_t *ctx) { return ctx->faults.src != NULL; }

void uvmrt__faults_switch(uvmrt_context_t *ctx, int on)
{
    if (ctx->faults.src == NULL || ctx->faults.on == on) return;
    ctx->faults.on = on;
    ctx->faults.src->sw(ctx, on);
}


void uvmrt__faults_collect(uvmrt_context_t *ctx)
{
    if (ctx->faults.src) ctx->faults.src->collect(ctx);
}

void uvmrt__faults_close(uvmrt_context_t *ctx)
{
    if (ctx->faults.src) ctx->faults.src->close(ctx);
    ctx->faults.src = NULL;
}

void uvmrt__faults_free(uvmrt_context_t *ctx)
{
    free(ctx->faults.pend);
    ctx->faults.pend = NULL;
    ctx->faults.n_pend = ctx->faults.cap_pend = 0;
}

void uvmrt__faults_attribute(uvmrt_context_t *ctx, const uvmrt_attrib_index_t *ix, const uvmrt_attrib_span_t *spans,
                             size_t n_spans, uint64_t horizon, uvmrt_fcount_t *per_span,
                             uvmrt_attrib_unattributed_t *un)
{
    ctx->faults.n_pend =
        uvmrt__attrib_run(ix, spans, n_spans, ctx->faults.pend, ctx->faults.n_pend, horizon, per_span, un);
}

/* A clock anchor taken since the last look (events.c) goes to the source: CUPTI
 * measures its clock's offset from the host clock at it, so this runs right after
 * the anchor (the first observer that collects at step end and at destroy). */
static void observe_anchor(uvmrt_context_t *ctx)
{
    if (ctx->faults.anchors_seen == ctx->ev.anchors) return;
    ctx->faults.anchors_seen = ctx->ev.anchors;
    if (ctx->faults.src) ctx->faults.src->anchor(ctx, ctx->ev.anchor_ns);
}

/* Step end: tells the sampler what the step collected and how long it took. */
static void observe_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    (void)e;
    if (uvmrt__faults_active(ctx))
        uvmrt__sampler_done(&ctx->faults.sampler, uvmrt__steps_done(ctx), ctx->stats.cur.fault_sampled,
                            ctx->stats.cur.step_ns);
}

const uvmrt_observer_t uvmrt__faults_observer = {"faults", NULL, NULL, observe_anchor, observe_end, observe_anchor};
