/*
 * step.c -- the public step and layer calls: argument checks, staging the call
 * (its uses, working set, timing events), running the policy, and committing only
 * when every backend call succeeded (see exec.h and uvmrt.h).
 */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "exec.h"
#include "steady.h"
#include "work.h"

/* At destroy: nothing can fail any more, so backend errors are counted and logged. */
void uvmrt__exec_fini(uvmrt_context_t *ctx)
{
    uvmrt_status_t st;
    if (ctx->ev.h2d_stream && (st = uvmrt__be_stream_sync(ctx, ctx->ev.h2d_stream)) != UVMRT_OK)
        uvmrt__be_absorb(ctx, "stream_sync (destroy)", st);
    if (ctx->ev.d2h_stream && (st = uvmrt__be_stream_sync(ctx, ctx->ev.d2h_stream)) != UVMRT_OK)
        uvmrt__be_absorb(ctx, "stream_sync (destroy)", st);
    uvmrt__clock_anchor(ctx);
    const uvmrt_observers_t *obs = &ctx->sched.observers;
    for (int k = 0; k < obs->n; k++)
        if (obs->at[k]->fini) obs->at[k]->fini(ctx); /* records and copy timings still pending */
    uvmrt__events_free(ctx);
}

/* After the report at destroy, which still reads the record and the plan (the
 * memory summary's mechanisms). */
void uvmrt__sched_free(uvmrt_context_t *ctx)
{
    free(ctx->sched.cur.calls);
    free(ctx->sched.cur.use_tensor);
    free(ctx->sched.cur.use_access);
    free(ctx->sched.record.calls);
    free(ctx->sched.record.use_tensor);
    free(ctx->sched.record.use_access);
    free(ctx->sched.scratch_resident);
    free(ctx->sched.sync_slots);
    free(ctx->sched.plan_off_gpu);
    ctx->sched.plan_off_gpu = NULL;
    free(ctx->sched.review.scale);
    free(ctx->sched.review.host_ns);
    memset(&ctx->sched.review, 0, sizeof ctx->sched.review);
    uvmrt__plan_free(&ctx->sched.plan);
    memset(&ctx->sched.cur, 0, sizeof ctx->sched.cur);
    memset(&ctx->sched.record, 0, sizeof ctx->sched.record);
    ctx->sched.scratch_resident = NULL;
    ctx->sched.sync_slots = NULL;
    ctx->sched.cap_sync_slots = 0;
    ctx->sched.have_plan = ctx->sched.have_record = 0;
}

void uvmrt__sched_init(uvmrt_context_t *ctx) { ctx->sched.open_call = -1; }

uvmrt_status_t uvmrt__sched_set_review_model(uvmrt_context_t *ctx, const double *scale, const uint64_t *host_ns,
                                             size_t n, double host_slowdown)
{
    double *sc = NULL;
    uint64_t *hn = NULL;
    size_t bytes_sc = (n ? n : 1) * sizeof *sc, bytes_hn = (n ? n : 1) * sizeof *hn;
    if ((scale != NULL && (sc = malloc(bytes_sc)) == NULL) || (host_ns != NULL && (hn = malloc(bytes_hn)) == NULL)) {
        free(sc);
        return UVMRT_ERR_NOMEM;
    }
    if (sc != NULL && n > 0) memcpy(sc, scale, n * sizeof *sc);
    if (hn != NULL && n > 0) memcpy(hn, host_ns, n * sizeof *hn);
    uvmrt_review_model_t *r = &ctx->sched.review;
    free(r->scale);
    free(r->host_ns);
    *r = (uvmrt_review_model_t){sc, hn, sc != NULL || hn != NULL ? n : 0, host_slowdown};
    return UVMRT_OK;
}

/* A modelled duration as the review's model scales it (as it is outside one). */
static uint64_t review_scaled(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t ns)
{
    const uvmrt_review_model_t *r = &ctx->sched.review;
    size_t i = (size_t)layer * UVMRT_PHASE_COUNT + (size_t)phase;
    if (r->scale == NULL || layer < 0 || i >= r->n) return ns;
    double v = (double)ns * r->scale[i];
    return v < 1e18 ? (uint64_t)v : (uint64_t)1e18;
}

/* The time a review's model gives a call's CPU work: its layer's measurement, or the
 * model's time alone times the measured calls' median slowdown; 0 (the model's own,
 * with contention) otherwise. */
static uint64_t review_host_ns(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t host_bytes)
{
    const uvmrt_review_model_t *r = &ctx->sched.review;
    size_t i = (size_t)layer * UVMRT_PHASE_COUNT + (size_t)phase;
    if (host_bytes == 0 || layer < 0) return 0;
    if (r->host_ns != NULL && i < r->n && r->host_ns[i] > 0) return r->host_ns[i];
    if (r->host_slowdown > 0 && ctx->profile->host_mem_bps > 0) {
        double v = (double)host_bytes / ctx->profile->host_mem_bps * 1e9 * r->host_slowdown;
        return v < 1e18 ? (uint64_t)v : (uint64_t)1e18;
    }
    return 0;
}

uvmrt_status_t uvmrt__observer_add(uvmrt_context_t *ctx, const uvmrt_observer_t *o)
{
    uvmrt_observers_t *obs = &ctx->sched.observers;
    if (o == NULL || obs->n == UVMRT_OBSERVERS_MAX) {
        LOG_ERROR(&ctx->log, "observer '%s': the list holds at most %d", o ? o->name : "(null)", UVMRT_OBSERVERS_MAX);
        return UVMRT_ERR_INVALID;
    }
    obs->at[obs->n++] = o;
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ sequences */
/* Room for `need` uses: the two use arrays always share one capacity. */
static int seq_reserve_uses(uvmrt_sequence_t *s, size_t need)
{
    if (need <= s->cap_uses) return 0;
    size_t c = s->cap_uses ? s->cap_uses : 64;
    while (c < need) c *= 2;
    int *t = realloc(s->use_tensor, c * sizeof *t);
    if (t == NULL) return -1;
    s->use_tensor = t;
    unsigned *a = realloc(s->use_access, c * sizeof *a);
    if (a == NULL) return -1;
    s->use_access = a;
    s->cap_uses = c;
    return 0;
}

static int seq_add_use(uvmrt_sequence_t *s, int tensor, unsigned access)
{
    if (seq_reserve_uses(s, s->n_uses + 1)) return -1;
    s->use_tensor[s->n_uses] = tensor;
    s->use_access[s->n_uses] = access;
    s->n_uses++;
    return 0;
}

static int seq_copy(uvmrt_sequence_t *dst, const uvmrt_sequence_t *src)
{
    if (uvmrt__grow((void **)&dst->calls, &dst->cap_calls, src->n_calls, sizeof *dst->calls)) return -1;
    if (seq_reserve_uses(dst, src->n_uses)) return -1;
    if (src->n_calls) memcpy(dst->calls, src->calls, src->n_calls * sizeof *dst->calls);
    if (src->n_uses) {
        memcpy(dst->use_tensor, src->use_tensor, src->n_uses * sizeof *dst->use_tensor);
        memcpy(dst->use_access, src->use_access, src->n_uses * sizeof *dst->use_access);
    }
    dst->n_calls = src->n_calls;
    dst->n_uses = src->n_uses;
    return 0;
}

/* ------------------------------------------------------------------ uses */
/* Access a layer's own tensor gets by default, by role and phase (0: not used). */
static unsigned default_access(uvmrt_role_t role, uvmrt_phase_t phase)
{
    static const unsigned table[UVMRT_ROLE_COUNT][UVMRT_PHASE_COUNT] = {
        [UVMRT_ROLE_WEIGHT] = {UVMRT_USE_READ, UVMRT_USE_READ, UVMRT_USE_READWRITE},
        [UVMRT_ROLE_GRADIENT] = {0, UVMRT_USE_WRITE, UVMRT_USE_READ},
        [UVMRT_ROLE_ACTIVATION] = {UVMRT_USE_WRITE, UVMRT_USE_READ, 0},
        [UVMRT_ROLE_OPTIMIZER_STATE] = {0, 0, UVMRT_USE_READWRITE},
        [UVMRT_ROLE_WORKSPACE] = {UVMRT_USE_READWRITE, UVMRT_USE_READWRITE, UVMRT_USE_READWRITE},
    };
    return table[role][phase];
}

/* Appends the call's uses (defaults, then extras replacing or adding) to cur. */
static uvmrt_status_t resolve_uses(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call, size_t first)
{
    uvmrt_sequence_t *s = &ctx->sched.cur;
    if (!call->no_default_uses) {
        const uvmrt_layer_t *L = &ctx->tensors.layers[call->layer];
        for (int i = 0; i < L->n_owned; i++) {
            const uvmrt_tensor_t *t = ctx->tensors.by_id[L->owned[i]];
            unsigned acc = default_access(t->role, call->phase);
            if (acc && seq_add_use(s, t->id, acc)) return UVMRT_ERR_NOMEM;
        }
    }
    for (size_t u = 0; u < call->n_uses; u++) {
        const uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, call->uses[u].tensor);
        unsigned acc = call->uses[u].access;
        if (t == NULL) {
            LOG_ERROR(&ctx->log, "layer '%s' %s: uses[%zu].tensor is not a live tensor of this context",
                      ctx->tensors.layers[call->layer].name, uvmrt_phase_name(call->phase), u);
            return UVMRT_ERR_INVALID;
        }
        if ((acc & UVMRT_USE_READWRITE) == 0 || acc > (UVMRT_USE_READWRITE | UVMRT_USE_STREAM)) {
            LOG_ERROR(&ctx->log, "layer '%s' %s: uses[%zu] ('%s') access %u: expected UVMRT_USE_READ, "
                                 "UVMRT_USE_WRITE or UVMRT_USE_READWRITE, optionally | UVMRT_USE_STREAM",
                      ctx->tensors.layers[call->layer].name, uvmrt_phase_name(call->phase), u, t->name, acc);
            return UVMRT_ERR_INVALID;
        }
        size_t k = first;
        while (k < s->n_uses && s->use_tensor[k] != t->id) k++;
        if (k < s->n_uses) s->use_access[k] = acc;
        else if (seq_add_use(s, t->id, acc)) return UVMRT_ERR_NOMEM;
    }
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ steps */
uvmrt_status_t uvmrt_step_begin(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (ctx->sched.in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_step_begin: step %llu is still open (call uvmrt_step_end first)",
                  (unsigned long long)ctx->sched.step_index + 1);
        return UVMRT_ERR_STATE;
    }
    uvmrt_status_t st = uvmrt__stats_rows_reserve(ctx, ctx->tensors.n_layers * UVMRT_PHASE_COUNT);
    if (st != UVMRT_OK) return st;
    /* Sampling (sampling.h): does this step collect the driver's counters? The
     * observers say (history.c's starts or stops the source). */
    int collect = 0;
    const uvmrt_observers_t *obs = &ctx->sched.observers;
    for (int k = 0; k < obs->n; k++)
        if (obs->at[k]->begin) collect |= obs->at[k]->begin(ctx);
    uvmrt__stats_step_begin(ctx, collect);
    ctx->sched.step_start_ns = uvmrt__be_now(ctx);
    if (ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->sched.have_record) {
        st = uvmrt__ensure_plan(ctx);
        if (st == UVMRT_OK && ctx->sched.have_plan) st = uvmrt__run_point(ctx, 0);
        if (st != UVMRT_OK) {
            LOG_ERROR(&ctx->log, "uvmrt_step_begin: step %llu not begun: issuing the plan's first moves failed "
                                 "(%s); moves already issued stay counted",
                      (unsigned long long)ctx->sched.step_index + 1, uvmrt_status_str(st));
            return st;
        }
    }
    ctx->sched.in_step = 1;
    ctx->sched.open_call = -1;
    ctx->sched.deviated = 0;
    ctx->sched.cur.n_calls = ctx->sched.cur.n_uses = 0;
    return UVMRT_OK;
}

/* 1 when a call of the step is ordered after stream (uvmrt_layer_call_t.after). */
static int awaited(const uvmrt_context_t *ctx, uvmrt_stream_t stream)
{
    for (size_t i = 0; i < ctx->sched.cur.n_calls; i++)
        if (ctx->sched.cur.calls[i].after == stream) return 1;
    return 0;
}

/* The distinct streams of the step's calls, by open addressing over call
 * indices (slot = index + 1, 0 = empty): linear in the calls. */
static uvmrt_status_t sync_compute_streams(uvmrt_context_t *ctx)
{
    size_t n = ctx->sched.cur.n_calls, cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > ctx->sched.cap_sync_slots) {
        size_t *p = realloc(ctx->sched.sync_slots, cap * sizeof *p);
        if (p == NULL) return UVMRT_ERR_NOMEM;
        ctx->sched.sync_slots = p;
        ctx->sched.cap_sync_slots = cap;
    }
    memset(ctx->sched.sync_slots, 0, cap * sizeof *ctx->sched.sync_slots);
    uvmrt_status_t st = UVMRT_OK;
    uvmrt_stream_t cpu_s = NULL; /* the last CPU call's stream and whether it is awaited: */
    int cpu_seen = 0, cpu_awaited = 0; /* one scan per CPU stream, not per CPU call */
    for (size_t i = 0; i < n && st == UVMRT_OK; i++) {
        /* CPU work (host_bytes) on a stream that calls wait for (after) goes on into
         * the next step, as a trainer's CPU thread does: the step ends when the GPU's
         * work is done, and the calls that need the CPU's results wait for them */
        if (ctx->sched.cur.calls[i].work.host_byte_count > 0) {
            if (!cpu_seen || ctx->sched.cur.calls[i].stream != cpu_s) {
                cpu_seen = 1;
                cpu_s = ctx->sched.cur.calls[i].stream;
                cpu_awaited = awaited(ctx, cpu_s);
            }
            if (cpu_awaited) continue;
        }
        uvmrt_stream_t s = ctx->sched.cur.calls[i].stream;
        size_t h = (size_t)(((uintptr_t)s >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
        while (ctx->sched.sync_slots[h] != 0 && ctx->sched.cur.calls[ctx->sched.sync_slots[h] - 1].stream != s)
            h = (h + 1) & (cap - 1);
        if (ctx->sched.sync_slots[h] != 0) continue;
        ctx->sched.sync_slots[h] = i + 1;
        st = uvmrt__be_stream_sync(ctx, s);
    }
    return st;
}

uvmrt_status_t uvmrt_step_end(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (!ctx->sched.in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end outside a step (call uvmrt_step_begin first)");
        return UVMRT_ERR_STATE;
    }
    if (ctx->sched.open_call >= 0) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end: layer '%s' is still open (call uvmrt_layer_end first)",
                  ctx->tensors.layers[ctx->sched.cur.calls[ctx->sched.open_call].layer].name);
        return UVMRT_ERR_STATE;
    }
    /* Fallible part: wait for each compute stream used in the step (not the copy
     * streams: their prefetches for the next step may still run), reserve memory,
     * copy the record. On failure the step is still open, as before the call. */
    const uvmrt_observers_t *obs = &ctx->sched.observers;
    uvmrt_status_t st = sync_compute_streams(ctx);
    if (st == UVMRT_OK) st = uvmrt__tier_poll(ctx, 0); /* a failed write-back surfaces (its data stays in host memory) */
    for (int k = 0; k < obs->n && st == UVMRT_OK; k++)
        if (obs->at[k]->reserve) st = obs->at[k]->reserve(ctx); /* the memory the tail needs */
    int rerecord = ctx->cfg.policy == UVMRT_POLICY_PREFETCH &&
                   (!ctx->sched.have_record || ctx->sched.deviated ||
                    ctx->sched.cur.n_calls != ctx->sched.record.n_calls);
    if (st == UVMRT_OK && rerecord && seq_copy(&ctx->sched.record, &ctx->sched.cur) != 0) st = UVMRT_ERR_NOMEM;
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end: step %llu is still open: %s",
                  (unsigned long long)ctx->sched.step_index + 1, uvmrt_status_str(st));
        return st;
    }
    /* Commit: nothing below fails (timings that cannot be read are counted). */
    for (size_t i = 0; i < ctx->sched.cur.n_calls; i++) {
        const uvmrt_call_t *c = &ctx->sched.cur.calls[i];
        if (!c->timed) continue;
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_WAIT_NS,
                        uvmrt__elapsed(ctx, ctx->ev.timing[c->ev_wait_start], ctx->ev.timing[c->ev_wait_end]));
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_DURATION_NS,
                        uvmrt__elapsed(ctx, ctx->ev.timing[c->ev_wait_end], ctx->ev.timing[c->ev_end]));
    }
    uvmrt__clock_anchor(ctx);
    /* The step's tail: the observers, in their order (observer.h, api/context.c). */
    for (int k = 0; k < obs->n; k++)
        if (obs->at[k]->collect) obs->at[k]->collect(ctx);
    /* the step's time includes the bookkeeping above (a collecting step's CUPTI flush
     * is most of its cost, which the fault sampler weighs by this time) */
    uvmrt__stats_step_time(ctx, uvmrt__be_now(ctx) - ctx->sched.step_start_ns);
    uvmrt_step_end_t e = {rerecord, !rerecord && uvmrt__steps_done(ctx) > 0, NULL};
    if (rerecord) {
        ctx->sched.have_record = ctx->sched.record.n_calls > 0;
        uvmrt__plan_drop(ctx);
        LOG_INFO(&ctx->log, "step %llu recorded: %zu layer calls", (unsigned long long)uvmrt__steps_done(ctx) + 1,
                 ctx->sched.record.n_calls);
        ctx->sched.planned_since_record = 0;
    } else if (ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->cfg.backend != UVMRT_BACKEND_SIM &&
               ctx->sched.planned_since_record < 3) {
        /* the first planned steps give the measured durations (the third is steady); on
         * sim the record file would come out the same as the recording step's */
        ctx->sched.planned_since_record++;
        e.timed = &ctx->sched.cur;
    }
    for (int k = 0; k < obs->n; k++)
        if (obs->at[k]->end) obs->at[k]->end(ctx, &e); /* read the step's counters: before they are cleared */
    uvmrt__steady_note(ctx);     /* keeps step 1's rows apart (steady.c) */
    uvmrt__stats_step_clear(ctx);
    ctx->sched.in_step = 0;
    ctx->sched.step_index++;
    return UVMRT_OK;
}

/* A timed call's time over the link for its host-homed tensors at the profile's
 * remote rates, the two directions at once. */
static double remote_ns_of(const uvmrt_context_t *ctx, const uvmrt_sequence_t *q, const uvmrt_call_t *c)
{
    double rd = 0, wr = 0;
    if (c->work.host_byte_count > 0) return 0; /* the CPU's work: host memory, not the link */
    for (size_t k = 0; k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[c->use_first + k]];
        unsigned acc = q->use_access[c->use_first + k];
        if (!t->host_homed) continue;
        if ((acc & UVMRT_USE_READ) && ctx->profile->remote_read_bps > 0)
            rd += (double)t->footprint / ctx->profile->remote_read_bps;
        if ((acc & UVMRT_USE_WRITE) && ctx->profile->remote_write_bps > 0)
            wr += (double)t->footprint / ctx->profile->remote_write_bps;
    }
    return (rd > wr ? rd : wr) * 1e9;
}

uvmrt_status_t uvmrt__step_work(uvmrt_context_t *ctx, const uvmrt_sequence_t *q, uint64_t *work, uint64_t *raw)
{
    double *link = malloc((q->n_calls ? q->n_calls : 1) * sizeof *link);
    if (link == NULL) return UVMRT_ERR_NOMEM;
    /* per phase: measured over declared for the calls without link traffic */
    double meas[UVMRT_PHASE_COUNT] = {0}, decl[UVMRT_PHASE_COUNT] = {0};
    for (size_t i = 0; i < q->n_calls; i++) {
        const uvmrt_call_t *c = &q->calls[i];
        raw[i] = c->timed ? uvmrt__elapsed(ctx, ctx->ev.timing[c->ev_wait_end], ctx->ev.timing[c->ev_end]) : 0;
        link[i] = c->timed ? remote_ns_of(ctx, q, c) : 0;
        if (c->timed && link[i] == 0 && c->work.host_byte_count == 0 && c->work.declared_ns > 0) {
            meas[c->phase] += (double)raw[i];
            decl[c->phase] += (double)c->work.declared_ns;
        }
    }
    double meas_all = 0, decl_all = 0; /* every phase's clean calls */
    for (int p = 0; p < UVMRT_PHASE_COUNT; p++) meas_all += meas[p], decl_all += decl[p];
    for (size_t i = 0; i < q->n_calls; i++) {
        const uvmrt_call_t *c = &q->calls[i];
        double w = (double)raw[i];
        if (link[i] > 0) {
            /* Its traffic shared the link with the step's other transfers, so its
             * measured time holds more than the traffic at the remote rates: no more
             * than the clean calls' efficiency (its phase's, else the step's) says its
             * declared work takes. The model adds the traffic and its queueing back. */
            w = w > link[i] ? w - link[i] : 0;
            double eff = decl[c->phase] > 0 ? meas[c->phase] / decl[c->phase] : decl_all > 0 ? meas_all / decl_all : 0;
            if (eff > 0 && c->work.declared_ns > 0 && (double)c->work.declared_ns * eff < w) w = (double)c->work.declared_ns * eff;
        }
        work[i] = (uint64_t)w;
    }
    free(link);
    return UVMRT_OK;
}

/* The call's declared work (work.h) as this context runs it: in a review's model, its
 * modelled time scaled and its CPU work's time measured; or an error naming the bad value. */
static uvmrt_status_t call_work(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call, uvmrt_work_t *w)
{
    char why[256];
    if (uvmrt__work_declare(w, call, ctx->profile, why, sizeof why) != 0) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s: %s", ctx->tensors.layers[call->layer].name,
                  uvmrt_phase_name(call->phase), why);
        return UVMRT_ERR_INVALID;
    }
    /* the CPU work's time: the trainer's, else a review's measurement (choose.c), else
     * the model's (0) */
    if (w->host_ns == 0) w->host_ns = review_host_ns(ctx, call->layer, call->phase, w->host_byte_count);
    w->modelled_ns = review_scaled(ctx, call->layer, call->phase, w->modelled_ns); /* measured/modelled */
    return UVMRT_OK;
}

/* Stages the call (uses, working set, timing events) and runs the policy; the
 * call is opened only when everything succeeded. On failure the call is not
 * open and the sequence is as before; moves already enqueued stay counted
 * (issue_batch, demand_path). */
uvmrt_status_t uvmrt_layer_begin(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (call == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: call is NULL: expected a uvmrt_layer_call_t");
        return UVMRT_ERR_INVALID;
    }
    /* The caller's struct up to its struct_size; the fields of a newer library than
     * the program's header take their defaults (0). */
    uvmrt_layer_call_t full = {0};
    if (UVMRT__ABI_READ(&ctx->log, "uvmrt_layer_begin", uvmrt_layer_call_t, call, &full) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    call = &full;
    if (!ctx->sched.in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin outside a step (call uvmrt_step_begin first)");
        return UVMRT_ERR_STATE;
    }
    if (ctx->sched.open_call >= 0) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' is still open (one layer call at a time)",
                  ctx->tensors.layers[ctx->sched.cur.calls[ctx->sched.open_call].layer].name);
        return UVMRT_ERR_STATE;
    }
    if (call->layer < 0 || call->layer >= ctx->tensors.n_layers) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer %d does not exist: expected 0..%d", call->layer,
                  ctx->tensors.n_layers - 1);
        return UVMRT_ERR_INVALID;
    }
    if ((unsigned)call->phase >= UVMRT_PHASE_COUNT) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: phase %d: expected forward, backward or optimizer", (int)call->phase);
        return UVMRT_ERR_INVALID;
    }
    if (call->n_uses > 0 && call->uses == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: n_uses = %zu but uses is NULL", call->n_uses);
        return UVMRT_ERR_INVALID;
    }
    uvmrt_work_t work;
    uvmrt_status_t st = call_work(ctx, call, &work);
    if (st != UVMRT_OK) return st;
    uvmrt_sequence_t *s = &ctx->sched.cur;
    if (uvmrt__grow((void **)&s->calls, &s->cap_calls, s->n_calls + 1, sizeof *s->calls)) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: out of memory for call %zu", s->n_calls);
        return UVMRT_ERR_NOMEM;
    }
    size_t first = s->n_uses;
    st = resolve_uses(ctx, call, first);
    uint64_t ws = st == UVMRT_OK ? uvmrt__working_set(ctx, first, s->n_uses - first) : 0;
    if (st == UVMRT_OK && ctx->cfg.policy != UVMRT_POLICY_NONE && ws > ctx->budget) {
        LOG_ERROR(&ctx->log, "layer '%s' (%s) needs a working set of %llu bytes (%zu tensors) but the budget "
                             "is %llu bytes: raise UVMRT_BUDGET or split the layer",
                  ctx->tensors.layers[call->layer].name, uvmrt_phase_name(call->phase), (unsigned long long)ws,
                  s->n_uses - first, (unsigned long long)ctx->budget);
        st = UVMRT_ERR_BUDGET;
    }
    if (st == UVMRT_OK) st = uvmrt__timing_event(ctx, (int)(3 * s->n_calls + 2));
    /* disk-tier tensors read back into host memory (nothing else changes) */
    if (st == UVMRT_OK) st = uvmrt__tier_before_call(ctx, call->layer, call->phase, first, s->n_uses - first);
    if (st != UVMRT_OK) {
        s->n_uses = first; /* nothing changed */
        return st;
    }
    size_t i = s->n_calls; /* staged: counted in n_calls only once open */
    uvmrt_call_t *c = &s->calls[i];
    *c = (uvmrt_call_t){.layer = call->layer,
                        .phase = call->phase,
                        .stream = call->stream,
                        .after = call->after,
                        .use_first = first,
                        .n_uses = s->n_uses - first,
                        .work = work,
                        .ev_wait_start = (int)(3 * i),
                        .ev_wait_end = (int)(3 * i + 1),
                        .ev_end = (int)(3 * i + 2)};
    int deviated = ctx->sched.deviated;
    if (ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->sched.have_record && !deviated &&
        !uvmrt__call_matches_record(ctx, i))
        ctx->sched.deviated = 1; /* uvmrt__plan_active() reads it; restored on failure */
    /* Timing events cost the stream about 1.4 us each on an H200 (session 35), three a
     * call: a call that waits for nothing records one event less (its wait is empty),
     * and one that follows the previous call on its stream starts at that call's end
     * (its time then includes what the stream ran between the two calls). */
    int missing = 0;
    if (uvmrt__plan_active(ctx))
        for (size_t k = 0; k < c->n_uses; k++) {
            const uvmrt_tensor_t *t = ctx->tensors.by_id[s->use_tensor[first + k]];
            missing |= !t->resident && !t->host_homed;
        }
    int waits = missing || (call->after != NULL && call->after != call->stream);
    for (size_t k = 0; k < c->n_uses && !waits; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[s->use_tensor[first + k]];
        waits = uvmrt__ring_pending(ctx, t->host_homed ? t->leaving : t->ready); /* as the waits below */
    }
    const uvmrt_call_t *prev = i > 0 ? &s->calls[i - 1] : NULL;
    int timed;
    if (!waits && prev != NULL && prev->stream == c->stream && prev->timed) {
        c->ev_wait_start = c->ev_wait_end = prev->ev_end;
        timed = 1;
    } else {
        timed = uvmrt__timing_record(ctx, ctx->ev.timing[c->ev_wait_start], c->stream);
        if (!waits) c->ev_wait_end = c->ev_wait_start;
    }
    if (missing) st = uvmrt__late_path(ctx, c, (int)i);
    /* The work the trainer orders this call after (call->after): everything enqueued
     * there so far, or, when the layer's latest CPU work ran there, that work (a
     * layer's forward waits for its own update, not for the CPU's later layers). */
    if (st == UVMRT_OK && call->after != NULL && call->after != call->stream) {
        const uvmrt_layer_t *lay = &ctx->tensors.layers[call->layer];
        uvmrt_evref_t r = lay->host_done_stream == call->after ? lay->host_done : 0;
        if (r == 0) st = uvmrt__ring_record(ctx, call->after, &r);
        if (st == UVMRT_OK) st = uvmrt__ring_wait(ctx, c->stream, r);
    }
    /* Wait only for the prefetches of this layer's own tensors (for host-homed
     * ones: for their last move to the host). */
    for (size_t k = 0; k < c->n_uses && st == UVMRT_OK; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[s->use_tensor[first + k]];
        st = uvmrt__ring_wait(ctx, c->stream, t->host_homed ? t->leaving : t->ready);
    }
    if (st == UVMRT_OK && waits) timed &= uvmrt__timing_record(ctx, ctx->ev.timing[c->ev_wait_end], c->stream);
    if (st == UVMRT_OK && !uvmrt__plan_active(ctx)) st = uvmrt__demand_path(ctx, c);
    if (st != UVMRT_OK) {
        ctx->sched.deviated = deviated;
        s->n_uses = first;
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s not opened: %s", ctx->tensors.layers[call->layer].name,
                  uvmrt_phase_name(call->phase), uvmrt_status_str(st));
        return st;
    }
    c->timed = timed;
    c->resident_bytes = ctx->res.bytes; /* for the trace's resident-bytes track */
    s->n_calls++;
    ctx->sched.open_call = (int)i;
    uvmrt__tier_read_ahead(ctx, i); /* the record's next call's disk tensors, beside this one's work */
    if (ctx->sched.deviated && !deviated)
        LOG_INFO(&ctx->log, "step %llu left the recorded sequence at call %zu (layer '%s' %s): running like "
                            "demand, re-recording",
                 (unsigned long long)ctx->sched.step_index + 1, i, ctx->tensors.layers[c->layer].name,
                 uvmrt_phase_name(c->phase));
    return UVMRT_OK;
}

/* The layer's work on the model (sim): ranges it touches locally, and over the
 * link for host-homed tensors. Done once per call, even when a later part of
 * uvmrt_layer_end fails and the call is ended again. */
static uvmrt_status_t touch_call(uvmrt_context_t *ctx, uvmrt_call_t *c)
{
    if (c->touched || !uvmrt__be_has_touch(ctx)) return UVMRT_OK;
    uvmrt_status_t st = UVMRT_OK;
    size_t nu = c->n_uses ? c->n_uses : 1;
    uvmrt_tensor_t **loc = malloc(nu * sizeof *loc), **rd = malloc(nu * sizeof *rd), **wr = malloc(nu * sizeof *wr);
    uvmrt_range_t *r_loc = malloc(nu * sizeof *r_loc), *r_rd = malloc(nu * sizeof *r_rd),
                  *r_wr = malloc(nu * sizeof *r_wr);
    if (!loc || !rd || !wr || !r_loc || !r_rd || !r_wr) st = UVMRT_ERR_NOMEM;
    size_t n_loc = 0, n_rd = 0, n_wr = 0;
    for (size_t k = 0; st == UVMRT_OK && k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        unsigned acc = ctx->sched.cur.use_access[c->use_first + k];
        if (!t->host_homed) loc[n_loc++] = t;
        else if (c->work.host_byte_count > 0) continue; /* the CPU's work: its host_bytes, not the link */
        else if (acc & UVMRT_USE_READ) rd[n_rd++] = t;
        if (t->host_homed && (acc & UVMRT_USE_WRITE)) wr[n_wr++] = t;
    }
    uint64_t disk_rd = 0, disk_wr = 0;
    uvmrt__tier_call_bytes(ctx, c, &disk_rd, &disk_wr);
    if (st == UVMRT_OK) {
        uvmrt_touch_t work = {.local = r_loc,
                              .n_local = uvmrt__merge_ranges(loc, n_loc, r_loc),
                              .remote_read = r_rd,
                              .n_remote_read = uvmrt__merge_ranges(rd, n_rd, r_rd),
                              .remote_write = r_wr,
                              .n_remote_write = uvmrt__merge_ranges(wr, n_wr, r_wr),
                              .duration_ns = c->work.modelled_ns,
                              .host_bytes = c->work.host_byte_count,
                              .host_ns = c->work.host_ns,
                              .disk_read_bytes = disk_rd,
                              .disk_write_bytes = disk_wr};
        st = uvmrt__be_touch(ctx, c->stream, &work, &c->touch_res);
        if (st == UVMRT_OK) c->touched = 1;
    }
    free(loc);
    free(rd);
    free(wr);
    free(r_loc);
    free(r_rd);
    free(r_wr);
    return st;
}

/* Closes the call once its end event is recorded and the plan's next point is
 * issued; on failure the call stays open (the caller may end it again: the
 * work already done is not redone, planned moves already issued are skipped). */
uvmrt_status_t uvmrt_layer_end(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (!ctx->sched.in_step || ctx->sched.open_call < 0) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_end without an open layer (call uvmrt_layer_begin first)");
        return UVMRT_ERR_STATE;
    }
    int i = ctx->sched.open_call;
    uvmrt_call_t *c = &ctx->sched.cur.calls[i];
    uvmrt_status_t st = touch_call(ctx, c);
    uvmrt_evref_t done = 0;
    if (st == UVMRT_OK) c->timed &= uvmrt__timing_record(ctx, ctx->ev.timing[c->ev_end], c->stream);
    if (st == UVMRT_OK) st = uvmrt__ring_record(ctx, c->stream, &done);
    if (st == UVMRT_OK)
        for (size_t k = 0; k < c->n_uses; k++) /* a later event than before: safe to keep even on failure */
            ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]]->last_use = done;
    if (st == UVMRT_OK && uvmrt__plan_active(ctx) && i < ctx->sched.plan.m) st = uvmrt__run_point(ctx, i + 1);
    if (st == UVMRT_OK) st = uvmrt__tier_after_call(ctx, c); /* disk-tier write-backs start */
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_end: layer '%s' %s is still open: %s", ctx->tensors.layers[c->layer].name,
                  uvmrt_phase_name(c->phase), uvmrt_status_str(st));
        return st;
    }
    for (size_t k = 0; k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[ctx->sched.cur.use_tensor[c->use_first + k]];
        unsigned acc = ctx->sched.cur.use_access[c->use_first + k];
        if (acc & UVMRT_USE_WRITE) t->dead = 0;
        if (!t->host_homed || c->work.host_byte_count > 0) continue; /* the CPU's: not over the link */
        if (acc & UVMRT_USE_READ) uvmrt__stat_add(ctx, c->layer, c->phase, STAT_REMOTE_READ, t->footprint);
        if (acc & UVMRT_USE_WRITE) uvmrt__stat_add(ctx, c->layer, c->phase, STAT_REMOTE_WRITE, t->footprint);
    }
    if (c->touched) {
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_COUNT, c->touch_res.fault_count);
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_BYTES, c->touch_res.fault_bytes);
    }
    uvmrt__stat_add(ctx, c->layer, c->phase, -1, 0); /* counts the call */
    if (c->work.host_byte_count > 0) uvmrt__layer_host_done(ctx, c->layer, done, c->stream);
    ctx->sched.open_call = -1;
    return UVMRT_OK;
}
