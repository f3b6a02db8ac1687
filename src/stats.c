/*
 * stats.c -- counters per (layer, phase), per step and in total, and the
 * residency accounting they balance against (bytes in - bytes out = change in
 * resident bytes).
 */
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "internal.h"

void uvmrt__stat_add(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, int kind, uint64_t v)
{
    uvmrt_layer_stats_t *l = &ctx->layers[layer].stats[phase];
    uvmrt_step_stats_t *s = &ctx->cur_stats;
    int row = layer * UVMRT_PHASE_COUNT + (int)phase;
    if (row < ctx->n_cur_rows) {
        /* the step in progress's row of (layer, phase), kept for csv */
        uvmrt_layer_stats_t *r = &ctx->cur_rows[row];
        switch (kind) {
        case -1:
            r->calls++;
            r->sampled_calls += s->fault_sampled ? 1 : 0;
            break;
        case STAT_PREFETCH: r->prefetch_bytes += v; break;
        case STAT_EVICT: r->evict_bytes += v; break;
        case STAT_DISCARD: r->discard_bytes += v; break;
        case STAT_FAULT_BYTES: r->fault_bytes += v; break;
        case STAT_FAULT_COUNT: r->fault_count += v; break;
        case STAT_WAIT_NS: r->wait_ns += v; break;
        case STAT_DURATION_NS: r->duration_ns += v; break;
        case STAT_REMOTE_READ: r->remote_read_bytes += v; break;
        case STAT_REMOTE_WRITE: r->remote_write_bytes += v; break;
        default: break;
        }
    }
    switch (kind) {
    case -1:
        l->calls++;
        l->sampled_calls += s->fault_sampled ? 1 : 0;
        break;
    case STAT_PREFETCH: l->prefetch_bytes += v; s->prefetch_bytes += v; break;
    case STAT_EVICT: l->evict_bytes += v; s->evict_bytes += v; break;
    case STAT_DISCARD: l->discard_bytes += v; s->discard_bytes += v; break;
    case STAT_FAULT_BYTES: l->fault_bytes += v; s->fault_bytes += v; break;
    case STAT_FAULT_COUNT: l->fault_count += v; s->fault_count += v; break;
    case STAT_WAIT_NS: l->wait_ns += v; s->wait_ns += v; break;
    case STAT_DURATION_NS: l->duration_ns += v; break;
    case STAT_REMOTE_READ: l->remote_read_bytes += v; s->remote_read_bytes += v; break;
    case STAT_REMOTE_WRITE: l->remote_write_bytes += v; s->remote_write_bytes += v; break;
    default: break;
    }
}

void uvmrt__fc_into_layer(uvmrt_layer_stats_t *l, const uvmrt_fcount_t *fc)
{
    l->gpu_faults += fc->v[FC_GPU_FAULTS];
    l->fault_htod_bytes += fc->v[FC_FAULT_HTOD];
    l->prefetch_htod_bytes += fc->v[FC_PREFETCH_HTOD];
    l->driver_prefetch_htod_bytes += fc->v[FC_DRIVER_PREFETCH_HTOD];
    l->evict_dtoh_bytes += fc->v[FC_EVICT_DTOH];
    l->thrashing += fc->v[FC_THRASHING];
    l->throttling += fc->v[FC_THROTTLING];
    l->remote_map += fc->v[FC_REMOTE_MAP];
    l->cpu_faults += fc->v[FC_CPU_FAULTS];
}

static void fc_into_step(uvmrt_step_stats_t *s, const uvmrt_fcount_t *fc)
{
    s->gpu_faults += fc->v[FC_GPU_FAULTS];
    s->fault_htod_bytes += fc->v[FC_FAULT_HTOD];
    s->prefetch_htod_bytes += fc->v[FC_PREFETCH_HTOD];
    s->driver_prefetch_htod_bytes += fc->v[FC_DRIVER_PREFETCH_HTOD];
    s->evict_dtoh_bytes += fc->v[FC_EVICT_DTOH];
    s->thrashing += fc->v[FC_THRASHING];
    s->throttling += fc->v[FC_THROTTLING];
    s->remote_map += fc->v[FC_REMOTE_MAP];
    s->cpu_faults += fc->v[FC_CPU_FAULTS];
}

void uvmrt__stat_add_fc(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, const uvmrt_fcount_t *fc,
                        uvmrt_step_stats_t *s, uvmrt_layer_stats_t *row)
{
    int r = layer * UVMRT_PHASE_COUNT + (int)phase;
    uvmrt__fc_into_layer(&ctx->layers[layer].stats[phase], fc);
    fc_into_step(s ? s : &ctx->cur_stats, fc);
    if (row == NULL && r < ctx->n_cur_rows) row = &ctx->cur_rows[r];
    if (row != NULL) uvmrt__fc_into_layer(row, fc);
}

int uvmrt__grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *p = realloc(*arr, c * elem);
    if (p == NULL) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

void uvmrt__resident_add(uvmrt_context_t *ctx, int64_t delta)
{
    ctx->resident_bytes = (uint64_t)((int64_t)ctx->resident_bytes + delta);
    if (ctx->resident_bytes > ctx->peak_resident_bytes) ctx->peak_resident_bytes = ctx->resident_bytes;
    if (ctx->resident_bytes > ctx->cur_stats.peak_resident_bytes)
        ctx->cur_stats.peak_resident_bytes = ctx->resident_bytes;
}

void uvmrt__stats_fold_step(uvmrt_context_t *ctx, const uvmrt_step_stats_t *s)
{
    if (ctx->n_steps == ctx->cap_steps) {
        uint64_t cap = ctx->cap_steps ? 2 * ctx->cap_steps : 16;
        uvmrt_step_stats_t *p = realloc(ctx->steps, cap * sizeof *p);
        if (p == NULL) {
            LOG_WARN(&ctx->log, "out of memory keeping step statistics: step %llu dropped",
                     (unsigned long long)ctx->n_steps + 1);
            return;
        }
        ctx->steps = p;
        ctx->cap_steps = cap;
    }
    ctx->steps[ctx->n_steps++] = *s;
}

uvmrt_status_t uvmrt_layer_stats_get(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase,
                                     uvmrt_layer_stats_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_stats_get: out is NULL: expected a uvmrt_layer_stats_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (layer < 0 || layer >= ctx->n_layers || (unsigned)phase >= UVMRT_PHASE_COUNT) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_stats_get: layer %d phase %d: expected layer 0..%d and a phase", layer,
                  (int)phase, ctx->n_layers - 1);
        return UVMRT_ERR_INVALID;
    }
    *out = ctx->layers[layer].stats[phase];
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_step_stats_get(const uvmrt_context_t *ctx, uint64_t step, uvmrt_step_stats_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_step_stats_get: out is NULL: expected a uvmrt_step_stats_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (step >= ctx->n_steps) {
        LOG_ERROR(&ctx->log, "uvmrt_step_stats_get: step %llu: expected 0..%lld (completed steps)",
                  (unsigned long long)step, (long long)ctx->n_steps - 1);
        return UVMRT_ERR_INVALID;
    }
    *out = ctx->steps[step];
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_summary_get(const uvmrt_context_t *ctx, uvmrt_summary_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_summary_get: out is NULL: expected a uvmrt_summary_t to fill");
        return UVMRT_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    out->steps = ctx->n_steps;
    out->budget_bytes = ctx->budget;
    out->resident_bytes = ctx->resident_bytes;
    out->peak_resident_bytes = ctx->peak_resident_bytes;
    out->allocated_bytes = ctx->allocated_bytes;
    out->plans_built = ctx->plans_built;
    for (int l = 0; l < ctx->n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            const uvmrt_layer_stats_t *s = &ctx->layers[l].stats[p];
            out->prefetch_bytes += s->prefetch_bytes;
            out->evict_bytes += s->evict_bytes;
            out->discard_bytes += s->discard_bytes;
            out->fault_count += s->fault_count;
            out->fault_bytes += s->fault_bytes;
            out->remote_read_bytes += s->remote_read_bytes;
            out->remote_write_bytes += s->remote_write_bytes;
            out->gpu_faults += s->gpu_faults;
            out->fault_htod_bytes += s->fault_htod_bytes;
            out->prefetch_htod_bytes += s->prefetch_htod_bytes;
            out->driver_prefetch_htod_bytes += s->driver_prefetch_htod_bytes;
            out->evict_dtoh_bytes += s->evict_dtoh_bytes;
            out->thrashing += s->thrashing;
            out->throttling += s->throttling;
            out->remote_map += s->remote_map;
            out->cpu_faults += s->cpu_faults;
        }
    const uvmrt_attrib_unattributed_t *u = &ctx->unattr;
    out->unattributed_records = u->records;
    out->unattributed_gpu_faults = u->c.v[FC_GPU_FAULTS];
    out->unattributed_htod_bytes =
        u->c.v[FC_FAULT_HTOD] + u->c.v[FC_PREFETCH_HTOD] + u->c.v[FC_DRIVER_PREFETCH_HTOD];
    out->unattributed_dtoh_bytes = u->c.v[FC_EVICT_DTOH];
    out->unattributed_cpu_faults = u->c.v[FC_CPU_FAULTS];
    out->fault_stats_source = uvmrt__faults_source(ctx);
    if (uvmrt__faults_active(ctx)) {
        out->fault_sampled_steps = ctx->sampler.sampled;
        out->fault_sample_every = ctx->cfg.fault_sample_every;
        out->fault_sample_period = ctx->sampler.period;
        out->fault_sample_overhead = ctx->sampler.overhead;
        out->fault_records_lost = ctx->fault_records_lost;
    } else {
        out->fault_sample_overhead = -1.0;
    }
    for (int t = 0; t < ctx->n_tensors; t++)
        if (ctx->tensors[t]->magic == UVMRT_TENSOR_MAGIC && ctx->tensors[t]->host_homed)
            out->host_homed_bytes += ctx->tensors[t]->footprint;
    return UVMRT_OK;
}
