/*
 * policy.c -- what happens at a layer boundary under each policy: the demand
 * path (driver emulation), the late path (prefetch policy, what the plan did not
 * bring), and the plan: its building, host homing and issue points.
 */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* ------------------------------------------------------------------ the plan */
static int residency_matches(const uvmrt_context_t *ctx, const uint8_t *r)
{
    for (int t = 0; t < ctx->tensors.n; t++)
        if ((ctx->tensors.by_id[t]->resident != 0) != (r[t] != 0)) return 0;
    return 1;
}

/* Applies the plan's host homing: newly homed tensors get their range advised
 * (once) and their pages populated on the host; resident ones are written back
 * by the plan's point 0. Advice is not stream ordered: the copy streams are
 * drained first (only when the homed set changes). */
static uvmrt_status_t adopt_homing(uvmrt_context_t *ctx)
{
    int changed = 0;
    for (int t = 0; t < ctx->tensors.n; t++)
        changed |= (ctx->sched.plan.host_homed[t] != 0) != (ctx->tensors.by_id[t]->host_homed != 0);
    if (!changed) return UVMRT_OK;
    uvmrt_status_t st = uvmrt__be_stream_sync(ctx, ctx->ev.h2d_stream);
    if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->ev.d2h_stream);
    uint64_t homed_bytes = 0;
    /* Each tensor is homed once its own calls succeeded; one that failed stays
     * as it was, and the next step tries again. */
    for (int id = 0; id < ctx->tensors.n && st == UVMRT_OK; id++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (!ctx->sched.plan.host_homed[id] && !t->placed_host) {
            t->host_homed = 0; /* its advice stays: explicit prefetches still migrate it */
            continue;
        }
        homed_bytes += t->footprint;
        if (t->host_homed) continue;
        uvmrt_range_t r = {t->ptr, t->footprint};
        if (!t->advised_remote && (st = uvmrt__be_advise_remote(ctx, &r, 1)) == UVMRT_OK) t->advised_remote = 1;
        if (st == UVMRT_OK && !t->resident) {
            uvmrt_evref_t leaving = 0;
            st = uvmrt__be_move(ctx, &r, 1, UVMRT_LOC_HOST, ctx->ev.d2h_stream); /* populates host pages */
            if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, ctx->ev.d2h_stream, &leaving);
            if (st == UVMRT_OK) t->leaving = leaving;
        }
        if (st == UVMRT_OK) t->host_homed = 1;
    }
    if (st == UVMRT_OK)
        LOG_INFO(&ctx->log, "plan keeps %.1f MiB of tensors in host memory (remote access over the link)",
                 homed_bytes / 1048576.0);
    return st;
}

static uvmrt_status_t plan_host_check(uvmrt_context_t *ctx, const uint64_t *fp);

/* Builds (or rebuilds) the plan from the record when residency left its path. */
uvmrt_status_t uvmrt__ensure_plan(uvmrt_context_t *ctx)
{
    int n = ctx->tensors.n;
    if (ctx->sched.have_plan && residency_matches(ctx, ctx->sched.plan.start_resident)) return UVMRT_OK;
    /* Re-planning the same record (the resident state drifted from the plan's,
     * usually because the plan's end differs from its start): keep its homing. */
    int replan = ctx->sched.have_plan;
    if (ctx->sched.have_plan) {
        uvmrt__plan_free(&ctx->sched.plan);
        ctx->sched.have_plan = 0;
    }
    const uvmrt_sequence_t *r = &ctx->sched.record;
    int m = (int)r->n_calls;
    uvmrt_plan_event_t *ev = calloc((size_t)m, sizeof *ev);
    uint64_t *fp = calloc((size_t)n + 1, sizeof *fp);
    uint8_t *res0 = calloc((size_t)n + 1, 1);
    uint8_t *remote_ok = calloc((size_t)n + 1, 1);
    uint8_t *homed = calloc((size_t)n + 1, 1);
    uint8_t *forced = calloc((size_t)n + 1, 1);
    uvmrt_status_t st = UVMRT_ERR_NOMEM;
    if (ev && fp && res0 && remote_ok && homed && forced) {
        for (int t = 0; t < n; t++) homed[t] = (uint8_t)ctx->tensors.by_id[t]->host_homed;
        for (int t = 0; t < n; t++) forced[t] = (uint8_t)ctx->tensors.by_id[t]->placed_host;
        /* A tensor may be host-homed when every use of it in the step streams. */
        if (ctx->cfg.remote) {
            for (size_t u = 0; u < r->n_uses; u++) remote_ok[r->use_tensor[u]] = 1;
            for (size_t u = 0; u < r->n_uses; u++)
                if (!(r->use_access[u] & UVMRT_USE_STREAM)) remote_ok[r->use_tensor[u]] = 0;
        }
        for (int e = 0; e < m; e++)
            ev[e] = (uvmrt_plan_event_t){(int)r->calls[e].n_uses, &r->use_tensor[r->calls[e].use_first],
                                         &r->use_access[r->calls[e].use_first]};
        for (int t = 0; t < n; t++) {
            fp[t] = ctx->tensors.by_id[t]->magic == UVMRT_TENSOR_MAGIC ? ctx->tensors.by_id[t]->footprint : 0;
            res0[t] = (uint8_t)ctx->tensors.by_id[t]->resident;
        }
        const uvmrt_profile_t *pr = ctx->profile;
        uvmrt_plan_input_t in = {m, ev, n, fp, uvmrt__plan_budget(ctx), res0, ctx->cfg.discard_dead, remote_ok,
                                 replan ? homed : NULL, forced, pr->prefetch_h2d_bps, pr->evict_d2h_bps,
                                 pr->remote_read_bps, pr->remote_write_bps};
        int bad = -1;
        st = uvmrt__plan_build(&in, &ctx->sched.plan, &bad);
        if (st == UVMRT_OK) {
            ctx->sched.have_plan = 1;
            st = plan_host_check(ctx, fp);
            if (st != UVMRT_OK) uvmrt__plan_drop(ctx);
        }
        if (st == UVMRT_OK) {
            ctx->sched.have_plan = 1;
            ctx->sched.plans_built++;
            LOG_DEBUG(&ctx->log, "plan %llu: %d events, %zu actions", (unsigned long long)ctx->sched.plans_built, m,
                      ctx->sched.plan.n_actions);
        } else {
            /* not an error of the call: without a plan the step runs like demand */
            LOG_WARN(&ctx->log, "no plan (%s): this step runs like demand", uvmrt_status_str(st));
            if (st != UVMRT_ERR_NOMEM) st = UVMRT_OK;
        }
    }
    free(ev);
    free(fp);
    free(res0);
    free(remote_ok);
    free(homed);
    free(forced);
    if (st == UVMRT_OK && ctx->sched.have_plan) st = adopt_homing(ctx);
    return st;
}

/* Executes the plan's issue point p, one batch per target event. */
uvmrt_status_t uvmrt__run_point(uvmrt_context_t *ctx, int p)
{
    const uvmrt_plan_t *pl = &ctx->sched.plan;
    size_t a = pl->point_first[p], end = pl->point_first[p + 1];
    uvmrt_batch_t b;
    if (uvmrt__batch_init(&b, ctx->tensors.n) != 0) return UVMRT_ERR_NOMEM;
    uvmrt_status_t st = UVMRT_OK;
    uint64_t planned = ctx->res.bytes;
    while (a < end && st == UVMRT_OK) {
        int target = pl->actions[a].target;
        b.n_evict = b.n_discard = b.n_fetch = 0;
        for (; a < end && pl->actions[a].target == target; a++) {
            uvmrt_tensor_t *t = ctx->tensors.by_id[pl->actions[a].tensor];
            if (t->magic != UVMRT_TENSOR_MAGIC) continue;
            if (pl->actions[a].kind == UVMRT_ACT_PREFETCH) {
                /* Skip what is already there, or what would break the budget
                 * because the real state drifted from the plan's. */
                if (t->resident || planned + t->footprint > uvmrt__plan_budget(ctx)) continue;
                b.fetch[b.n_fetch++] = t;
                planned += t->footprint;
            } else if (t->resident) {
                if (pl->actions[a].kind == UVMRT_ACT_DISCARD) b.discard[b.n_discard++] = t;
                else b.evict[b.n_evict++] = t;
                planned -= t->footprint;
            }
        }
        const uvmrt_call_t *c = &ctx->sched.record.calls[target % pl->m];
        st = uvmrt__issue_batch(ctx, &b, c->layer, c->phase);
    }
    uvmrt__batch_free(&b);
    return st;
}

int uvmrt__plan_active(const uvmrt_context_t *ctx)
{
    return ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->sched.have_plan && !ctx->sched.deviated;
}

/* ------------------------------------------------------------------ layer calls */
/* Bytes a call needs resident: tensors placed in host memory by the user do not count. */
uint64_t uvmrt__working_set(const uvmrt_context_t *ctx, size_t first, size_t n)
{
    uint64_t ws = 0;
    for (size_t i = 0; i < n; i++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[first + i]];
        if (!t->placed_host) ws += t->footprint;
    }
    return ws;
}

int uvmrt__call_matches_record(const uvmrt_context_t *ctx, size_t i)
{
    if (i >= ctx->sched.record.n_calls) return 0;
    const uvmrt_call_t *a = &ctx->sched.cur.calls[i], *b = &ctx->sched.record.calls[i];
    if (a->layer != b->layer || a->phase != b->phase || a->n_uses != b->n_uses) return 0;
    for (size_t k = 0; k < a->n_uses; k++)
        if (ctx->sched.cur.use_tensor[a->use_first + k] != ctx->sched.record.use_tensor[b->use_first + k] ||
            ctx->sched.cur.use_access[a->use_first + k] != ctx->sched.record.use_access[b->use_first + k])
            return 0;
    return 1;
}

static int used_by(const uvmrt_context_t *ctx, const uvmrt_call_t *c, int tensor)
{
    for (size_t k = 0; k < c->n_uses; k++)
        if (ctx->sched.cur.use_tensor[c->use_first + k] == tensor) return 1;
    return 0;
}

/* Runtime's own fault estimate (real GPUs until CUPTI counts arrive). */
static void estimate_fault(uvmrt_context_t *ctx, const uvmrt_call_t *c, const uvmrt_tensor_t *t)
{
    if (uvmrt__be_has_touch(ctx)) return; /* the model counts real faults */
    uint64_t group = ctx->profile->fault_group_bytes;
    uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_BYTES, t->footprint);
    uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_COUNT, (t->footprint + group - 1) / group);
}

/* Demand: missing tensors will fault in; first write back, in allocation order,
 * what must leave for them to fit (on the layer's stream, as the driver would).
 * The write-back is accounted once it and its event are enqueued; the missing
 * tensors count as resident only after every wait for them succeeded. */
uvmrt_status_t uvmrt__demand_path(uvmrt_context_t *ctx, const uvmrt_call_t *c)
{
    uint64_t need = 0;
    for (size_t k = 0; k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) need += t->footprint;
    }
    if (need == 0) return UVMRT_OK;
    uvmrt_status_t st = UVMRT_OK;
    if (ctx->cfg.policy != UVMRT_POLICY_NONE && ctx->res.bytes + need > uvmrt__plan_budget(ctx)) {
        uvmrt_tensor_t **victims = malloc((size_t)ctx->tensors.n * sizeof *victims);
        uvmrt_range_t *ranges = malloc((size_t)ctx->tensors.n * sizeof *ranges);
        size_t nv = 0;
        uint64_t freed = 0, budget = uvmrt__plan_budget(ctx);
        if (victims == NULL || ranges == NULL) st = UVMRT_ERR_NOMEM;
        /* the resident ones in id order (the bitmap skips the others) */
        for (int id = uvmrt__resident_next(ctx, 0); st == UVMRT_OK && id >= 0 && ctx->res.bytes - freed + need > budget;
             id = uvmrt__resident_next(ctx, id + 1)) {
            uvmrt_tensor_t *t = ctx->tensors.by_id[id];
            if (t->magic != UVMRT_TENSOR_MAGIC || !t->resident || used_by(ctx, c, id)) continue;
            st = uvmrt__ring_wait(ctx, c->stream, t->ready);
            if (st == UVMRT_OK) st = uvmrt__ring_wait(ctx, c->stream, t->last_use); /* other streams' work */
            victims[nv++] = t;
            freed += t->footprint;
        }
        if (st == UVMRT_OK)
            st = uvmrt__be_move(ctx, ranges, uvmrt__merge_ranges(victims, nv, ranges), UVMRT_LOC_HOST, c->stream);
        uvmrt_evref_t ev = 0;
        if (st == UVMRT_OK && nv > 0) st = uvmrt__ring_record(ctx, c->stream, &ev);
        for (size_t i = 0; st == UVMRT_OK && i < nv; i++) {
            uvmrt__tensor_set_resident(ctx, victims[i], 0);
            victims[i]->ready = 0;
            victims[i]->leaving = ev;
            uvmrt__resident_add(ctx, -(int64_t)victims[i]->footprint);
            uvmrt__stat_add(ctx, c->layer, c->phase, STAT_EVICT, victims[i]->footprint);
        }
        free(victims);
        free(ranges);
    }
    for (size_t k = 0; st == UVMRT_OK && k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) st = uvmrt__ring_wait(ctx, c->stream, t->leaving); /* its write-back first */
    }
    for (size_t k = 0; st == UVMRT_OK && k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        if (t->resident || t->host_homed) continue;
        uvmrt__tensor_set_resident(ctx, t, 1);
        t->ready = 0;
        uvmrt__resident_add(ctx, (int64_t)t->footprint);
        estimate_fault(ctx, c, t);
    }
    return st;
}

/* Prefetch policy, a tensor the plan did not bring: fetch it now, making room by
 * farthest next use (never the layer's own tensors); the stream will wait. */
uvmrt_status_t uvmrt__late_path(uvmrt_context_t *ctx, const uvmrt_call_t *c, int event)
{
    uvmrt_batch_t b;
    if (uvmrt__batch_init(&b, ctx->tensors.n) != 0) return UVMRT_ERR_NOMEM;
    uint64_t need = 0;
    for (size_t k = 0; k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) {
            b.fetch[b.n_fetch++] = t;
            need += t->footprint;
        }
    }
    uint64_t resident = ctx->res.bytes;
    while (resident + need > uvmrt__plan_budget(ctx)) {
        uvmrt_tensor_t *victim = NULL;
        int32_t far = -1;
        for (int id = uvmrt__resident_next(ctx, 0); id >= 0; id = uvmrt__resident_next(ctx, id + 1)) {
            uvmrt_tensor_t *t = ctx->tensors.by_id[id];
            if (t->magic != UVMRT_TENSOR_MAGIC || !t->resident || used_by(ctx, c, id)) continue;
            int dup = 0;
            for (size_t i = 0; i < b.n_evict; i++) dup |= b.evict[i] == t;
            for (size_t i = 0; i < b.n_discard; i++) dup |= b.discard[i] == t;
            if (dup) continue;
            int32_t nu = uvmrt__plan_next_use(&ctx->sched.plan, event, id);
            if (nu > far) {
                far = nu;
                victim = t;
            }
        }
        if (victim == NULL) break; /* cannot happen: the working set fits the budget */
        unsigned acc = 0;
        if (far != UVMRT_NEVER) {
            const uvmrt_call_t *nc = &ctx->sched.record.calls[(event + far) % ctx->sched.plan.m];
            for (size_t k = 0; k < nc->n_uses; k++)
                if (ctx->sched.record.use_tensor[nc->use_first + k] == victim->id) acc = ctx->sched.record.use_access[nc->use_first + k];
        }
        if (ctx->cfg.discard_dead && far != UVMRT_NEVER && !(acc & UVMRT_USE_READ)) b.discard[b.n_discard++] = victim;
        else b.evict[b.n_evict++] = victim;
        resident -= victim->footprint;
    }
    uvmrt_status_t st = uvmrt__issue_batch(ctx, &b, c->layer, c->phase);
    uvmrt__batch_free(&b);
    return st;
}

/* The plan just built needs host memory within the host budget; over it, the plan is
 * refused (UVMRT_ERR_BUDGET) with what it needs where and what would make it fit. */
static uvmrt_status_t plan_host_check(uvmrt_context_t *ctx, const uint64_t *fp)
{
    free(ctx->sched.plan_off_gpu);
    ctx->sched.plan_off_gpu = malloc((size_t)ctx->tensors.n + 1);
    if (ctx->sched.plan_off_gpu == NULL) return UVMRT_ERR_NOMEM;
    uint64_t host = uvmrt__tier_plan_host_peak(ctx, &ctx->sched.plan, fp, ctx->sched.plan_off_gpu);
    uint64_t need = host + ctx->choice.host_external_bytes;
    ctx->sched.plan_host_bytes = host;
    if (ctx->host_budget == 0 || need <= ctx->host_budget) return UVMRT_OK; /* 0: no limit */
    double g = 1073741824.0;
    /* every step tries again (the same record gives the same plan): said once at error level */
    uvmrt_log_level_t level = ctx->sched.host_refused++ == 0 ? UVMRT_LOG_ERROR : UVMRT_LOG_DEBUG;
    UVMRT_LOG(&ctx->log, level, "plan refused: it needs %.2f GiB on the GPU (budget %.2f GiB) and %.2f GiB of host memory "
                         "(%.2f GiB of tensors, %.2f GiB declared outside uvmrt), over the host budget of %.2f GiB: "
                         "raise UVMRT_HOST_BUDGET (--host-budget) to %.2f GiB, or the GPU budget by %.2f GiB",
              uvmrt__plan_budget(ctx) / g, ctx->budget / g, need / g, host / g, ctx->choice.host_external_bytes / g,
              ctx->host_budget / g, need / g, (need - ctx->host_budget) / g);
    return UVMRT_ERR_BUDGET;
}
