/*
 * summary.c -- uvmrt_summary_get: the run in one struct, read from every part's
 * state (counters, tensors, the schedule, the history, the fault records, the
 * choice). An observer: it sits above the parts it reads (src/README.md).
 */
#include <string.h>

#include "abi.h"
#include "faults.h"
#include "internal.h"

uvmrt_status_t uvmrt_summary_get(const uvmrt_context_t *ctx, uvmrt_summary_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_summary_get: out is NULL: expected a uvmrt_summary_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_summary_get", uvmrt_summary_t, out) != UVMRT_OK) return UVMRT_ERR_INVALID;
    uvmrt_summary_t *caller = out, full;
    out = &full; /* filled whole, then written up to the caller's struct_size */
    memset(out, 0, sizeof *out);
    out->steps = uvmrt__steps_done(ctx);
    out->budget_bytes = ctx->budget;
    out->resident_bytes = ctx->res.bytes;
    out->peak_resident_bytes = ctx->res.peak_bytes;
    out->allocated_bytes = ctx->tensors.allocated_bytes;
    out->plans_built = ctx->sched.plans_built;
    for (int l = 0; l < ctx->tensors.n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            const uvmrt_layer_stats_t *s = &ctx->tensors.layers[l].stats[p];
#define SUM(name, tag, src, step, sum, ...) UVMRT__IF_##sum(out->name += s->name;)
            UVMRT_COUNTERS(SUM)
#undef SUM
        }
    const uvmrt_attrib_unattributed_t *u = &ctx->hist.unattr;
    out->unattributed_records = u->records;
    out->unattributed_gpu_faults = u->c.v[FC_GPU_FAULTS];
    out->unattributed_htod_bytes =
        u->c.v[FC_FAULT_HTOD] + u->c.v[FC_PREFETCH_HTOD] + u->c.v[FC_DRIVER_PREFETCH_HTOD];
    out->unattributed_dtoh_bytes = u->c.v[FC_EVICT_DTOH];
    out->unattributed_cpu_faults = u->c.v[FC_CPU_FAULTS];
    out->fault_stats_source = uvmrt__faults_source(ctx);
    out->backend_errors = ctx->be.errors;
    out->output_errors = ctx->output_errors;
    if (uvmrt__faults_active(ctx)) {
        out->fault_sampled_steps = ctx->faults.sampler.sampled;
        out->fault_sample_every = ctx->cfg.fault_sample_every;
        out->fault_sample_period = ctx->faults.sampler.period;
        out->fault_sample_overhead = ctx->faults.sampler.overhead;
        out->fault_records_lost = ctx->faults.records_lost;
    } else {
        out->fault_sample_overhead = -1.0;
    }
    for (int t = 0; t < ctx->tensors.n; t++)
        if (ctx->tensors.by_id[t]->magic == UVMRT_TENSOR_MAGIC && ctx->tensors.by_id[t]->host_homed)
            out->host_homed_bytes += ctx->tensors.by_id[t]->footprint;
    out->host_bytes = uvmrt__host_bytes(ctx);
    out->peak_host_bytes = ctx->res.host_peak_bytes;
    out->host_budget_bytes = ctx->host_budget;
    out->host_external_bytes = ctx->choice.host_external_bytes;
    out->plan_host_bytes = uvmrt__plan_host_bytes(ctx);
    UVMRT__ABI_WRITE(caller, out);
    return UVMRT_OK;
}
