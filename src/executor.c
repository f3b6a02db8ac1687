/*
 * executor.c -- steps and layer calls: the policies at work.
 *
 *  none      no hints; tensors are counted resident once used (no budget).
 *  demand    the driver under oversubscription, emulated: a layer's missing
 *            tensors fault in; when over budget, resident tensors are written
 *            back in allocation order first, on the layer's stream.
 *  prefetch  step 1 is recorded (and runs like demand); from step 2 on the plan
 *            (plan.c) is followed: at each issue point evictions go on the d2h
 *            copy stream (after the last use of each victim), prefetches on the
 *            h2d copy stream (after the evictions that make room), and a layer's
 *            stream waits only for the prefetches of its own tensors. A tensor the
 *            plan did not bring in time is prefetched late (the stream waits);
 *            a step that leaves the record runs like demand and is re-recorded.
 *
 * Sync events live in a ring and are referenced by sequence number, so a tensor
 * can remember "the prefetch that brought me" without owning an event.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "faults.h"
#include "internal.h"

/* ------------------------------------------------------------------ event ring */
static uvmrt_status_t ring_record(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t *out)
{
    uint64_t seq = ctx->ring_next;
    uvmrt_event_t *slot = &ctx->ring[seq % UVMRT_EVENT_RING];
    uvmrt_status_t st;
    if (*slot == NULL) {
        if ((st = uvmrt__be_event_create(ctx, 0, slot)) != UVMRT_OK) {
            *slot = NULL;
            return st;
        }
    } else {
        /* Reusing a slot drops its old record: it must have completed (4096
         * records later it always has; wait rather than assume). */
        while (!uvmrt__be_event_done(ctx, *slot)) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    if ((st = uvmrt__be_record(ctx, *slot, stream)) != UVMRT_OK) return st;
    /* the sequence number is taken only by a record that happened */
    ctx->ring_next++;
    *out = seq;
    return UVMRT_OK;
}

/* Makes stream wait for a recorded event; records older than the ring are complete. */
static uvmrt_status_t ring_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_evref_t ref)
{
    if (ref == 0 || ctx->ring_next - ref > UVMRT_EVENT_RING) return UVMRT_OK;
    return uvmrt__be_wait(ctx, stream, ctx->ring[ref % UVMRT_EVENT_RING]);
}

uvmrt_status_t uvmrt__exec_init(uvmrt_context_t *ctx)
{
    ctx->ring_next = 1;
    ctx->t0_ns = uvmrt__be_now(ctx);
    ctx->anchor_ns = ctx->t0_ns;
    /* The clock: an idle stream of our own, so recording the anchor waits for
     * nothing. Without it no time could be read: creation fails. */
    uvmrt_status_t st = uvmrt__be_stream_create(ctx, &ctx->clock_stream);
    if (st != UVMRT_OK) {
        ctx->clock_stream = NULL;
        return st;
    }
    if ((st = uvmrt__be_event_create(ctx, 1, &ctx->anchor_ev)) != UVMRT_OK) ctx->anchor_ev = NULL;
    return st;
}

/* ------------------------------------------------------------------ clock */
/* Records the anchor on the idle clock stream and reads the host clock: from now
 * on an event's time is anchor_ns plus its distance from the anchor. A failure
 * keeps the previous anchor (times drift, nothing else) and is counted. */
static void anchor(uvmrt_context_t *ctx)
{
    if (ctx->anchor_ev == NULL) return;
    uvmrt_status_t st = uvmrt__be_record(ctx, ctx->anchor_ev, ctx->clock_stream);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_record (clock anchor)", st);
        return;
    }
    if ((st = uvmrt__be_stream_sync(ctx, ctx->clock_stream)) != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "stream_sync (clock anchor)", st);
        return;
    }
    ctx->anchor_ns = uvmrt__be_now(ctx);
    uvmrt__faults_anchor(ctx, ctx->anchor_ns);
}

/* Time between two timing events; a failure reads 0 and is counted. */
static uint64_t elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b)
{
    uint64_t ns = 0;
    uvmrt_status_t st = uvmrt__be_elapsed(ctx, a, b, &ns);
    if (st != UVMRT_OK) uvmrt__be_absorb(ctx, "event_elapsed_ns", st);
    return ns;
}

/* A completed event's time on the host clock (ns since t0). */
static uint64_t time_of(uvmrt_context_t *ctx, uvmrt_event_t ev)
{
    if (ctx->anchor_ev == NULL) return 0;
    uint64_t before = elapsed(ctx, ev, ctx->anchor_ev);
    uint64_t after = elapsed(ctx, ctx->anchor_ev, ev);
    if (before > ctx->anchor_ns) before = ctx->anchor_ns;
    uint64_t t = ctx->anchor_ns - before + after;
    return t > ctx->t0_ns ? t - ctx->t0_ns : 0;
}

/* A timing event: its failure costs a measurement, never the call. */
static int timing_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream)
{
    uvmrt_status_t st = uvmrt__be_record(ctx, ev, stream);
    if (st != UVMRT_OK) uvmrt__be_absorb(ctx, "event_record (timing)", st);
    return st == UVMRT_OK;
}

static void harvest_copy_timings(uvmrt_context_t *ctx, int wait_all);
static void attribute_rest(uvmrt_context_t *ctx);

/* Every change is made only once the backend calls it needs have succeeded:
 * on failure the tensor's placement is as before (an advice that was applied
 * stays applied: it is idempotent and recorded in advised_remote). */
uvmrt_status_t uvmrt__exec_place(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int host)
{
    if (!host) {
        t->placed_host = 0;
        t->host_homed = 0; /* on the host, not resident: the policy moves it from now on */
        return UVMRT_OK;
    }
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_status_t st = UVMRT_OK;
    if (!t->advised_remote) {
        /* advice is not stream ordered: let queued copies of it finish first */
        st = uvmrt__be_stream_sync(ctx, ctx->h2d_stream);
        if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->d2h_stream);
        if (st == UVMRT_OK) st = uvmrt__be_advise_remote(ctx, &r, 1);
        if (st != UVMRT_OK) return st;
        t->advised_remote = 1;
    }
    if (!t->host_homed) {
        /* to the host after its last use; populates host pages when it held nothing.
         * Until the move's event is recorded it still counts as resident. */
        uvmrt_evref_t leaving = 0;
        st = ring_wait(ctx, ctx->d2h_stream, t->last_use);
        if (st == UVMRT_OK) st = ring_wait(ctx, ctx->d2h_stream, t->ready);
        if (st == UVMRT_OK) st = uvmrt__be_move(ctx, &r, 1, UVMRT_LOC_HOST, ctx->d2h_stream);
        if (st == UVMRT_OK) st = ring_record(ctx, ctx->d2h_stream, &leaving);
        if (st != UVMRT_OK) return st;
        if (t->resident) uvmrt__resident_add(ctx, -(int64_t)t->footprint);
        t->resident = 0;
        t->ready = 0;
        t->leaving = leaving;
        t->host_homed = 1;
    }
    t->placed_host = 1;
    return UVMRT_OK;
}

/* Discards a freed tensor's pages. On failure the tensor still counts as
 * resident (its pages may still be on the device). */
uvmrt_status_t uvmrt__exec_release(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_evref_t leaving = 0;
    uvmrt_status_t st = ring_wait(ctx, ctx->d2h_stream, t->last_use);
    if (st == UVMRT_OK) st = ring_wait(ctx, ctx->d2h_stream, t->ready);
    if (st == UVMRT_OK) st = uvmrt__be_discard(ctx, &r, 1, ctx->d2h_stream);
    if (st == UVMRT_OK) st = ring_record(ctx, ctx->d2h_stream, &leaving);
    if (st == UVMRT_OK) t->leaving = leaving;
    return st;
}

/* At destroy: nothing can fail any more, so backend errors are counted and logged. */
void uvmrt__exec_fini(uvmrt_context_t *ctx)
{
    uvmrt_status_t st;
    if (ctx->h2d_stream && (st = uvmrt__be_stream_sync(ctx, ctx->h2d_stream)) != UVMRT_OK)
        uvmrt__be_absorb(ctx, "stream_sync (destroy)", st);
    if (ctx->d2h_stream && (st = uvmrt__be_stream_sync(ctx, ctx->d2h_stream)) != UVMRT_OK)
        uvmrt__be_absorb(ctx, "stream_sync (destroy)", st);
    anchor(ctx);
    harvest_copy_timings(ctx, 1);
    attribute_rest(ctx);
    uvmrt__be_event_destroy(ctx, ctx->anchor_ev);
    uvmrt__be_stream_destroy(ctx, ctx->clock_stream);
    ctx->anchor_ev = NULL;
    ctx->clock_stream = NULL;
    for (int i = 0; i < UVMRT_EVENT_RING; i++) uvmrt__be_event_destroy(ctx, ctx->ring[i]);
    for (int i = 0; i < ctx->n_timing; i++) uvmrt__be_event_destroy(ctx, ctx->timing[i]);
    for (int i = 0; i < ctx->n_copy_timing; i++) {
        uvmrt__be_event_destroy(ctx, ctx->copy_timing[i].start);
        uvmrt__be_event_destroy(ctx, ctx->copy_timing[i].end);
    }
    free(ctx->timing);
    free(ctx->copy_timing);
    free(ctx->cur.calls);
    free(ctx->cur.use_tensor);
    free(ctx->cur.use_access);
    free(ctx->record.calls);
    free(ctx->record.use_tensor);
    free(ctx->record.use_access);
    free(ctx->scratch_resident);
    free(ctx->sync_slots);
    free(ctx->scratch_ss);
    free(ctx->scratch_sp);
    free(ctx->scratch_fc);
    uvmrt_plan_free(&ctx->plan);
}

/* ------------------------------------------------------------------ timing events */
/* The i-th timing event of the step (created once, reused every step). */
static uvmrt_status_t timing_event(uvmrt_context_t *ctx, int i)
{
    if (i < ctx->n_timing) return UVMRT_OK;
    if (i >= ctx->cap_timing) {
        int cap = ctx->cap_timing ? 2 * ctx->cap_timing : 64;
        while (cap <= i) cap *= 2;
        uvmrt_event_t *t = realloc(ctx->timing, (size_t)cap * sizeof *t);
        if (t == NULL) return UVMRT_ERR_NOMEM;
        ctx->timing = t;
        ctx->cap_timing = cap;
    }
    while (ctx->n_timing <= i) {
        uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &ctx->timing[ctx->n_timing]);
        if (st != UVMRT_OK) return st;
        ctx->n_timing++;
    }
    return UVMRT_OK;
}

/* A free start/end pair for timing one copy batch, or NULL (the batch goes
 * untimed: the failure is counted). */
static uvmrt_copy_timing_t *copy_timing_slot(uvmrt_context_t *ctx)
{
    for (int i = 0; i < ctx->n_copy_timing; i++)
        if (!ctx->copy_timing[i].pending) return &ctx->copy_timing[i];
    uvmrt_copy_timing_t *arr = realloc(ctx->copy_timing, (size_t)(ctx->n_copy_timing + 1) * sizeof *arr);
    if (arr == NULL) return NULL;
    ctx->copy_timing = arr;
    uvmrt_copy_timing_t *c = &arr[ctx->n_copy_timing];
    memset(c, 0, sizeof *c);
    uvmrt_status_t st = uvmrt__be_event_create(ctx, 1, &c->start);
    if (st == UVMRT_OK && (st = uvmrt__be_event_create(ctx, 1, &c->end)) != UVMRT_OK)
        uvmrt__be_event_destroy(ctx, c->start);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "event_create (copy timing)", st);
        return NULL;
    }
    ctx->n_copy_timing++;
    return c;
}

/* The stats of an absolute step number: kept, dropped (the aggregate), or the
 * step in progress. */
static uvmrt_step_stats_t *stats_of_step(uvmrt_context_t *ctx, uint64_t step)
{
    if (step < ctx->steps_before) return &ctx->steps_dropped;
    if (step < uvmrt__steps_done(ctx)) return &ctx->steps[step - ctx->steps_before];
    return &ctx->cur_stats;
}

/* Adds finished copy batches' busy time to the step that issued them. */
static void harvest_copy_timings(uvmrt_context_t *ctx, int wait_all)
{
    for (int i = 0; i < ctx->n_copy_timing; i++) {
        uvmrt_copy_timing_t *c = &ctx->copy_timing[i];
        if (!c->pending || (!wait_all && !uvmrt__be_event_done(ctx, c->end))) continue;
        uint64_t ns = 0;
        uvmrt_status_t st = uvmrt__be_elapsed(ctx, c->start, c->end, &ns);
        if (st != UVMRT_OK) {
            uvmrt__be_absorb(ctx, "event_elapsed_ns (copy timing)", st);
        } else {
            uvmrt_step_stats_t *s = stats_of_step(ctx, c->step);
            if (c->d2h) s->d2h_busy_ns += ns;
            else s->h2d_busy_ns += ns;
            if (c->step >= ctx->steps_before && ctx->anchor_ev != NULL &&
                uvmrt__grow((void **)&ctx->copies, &ctx->cap_copies, ctx->n_copies + 1, sizeof *ctx->copies) == 0) {
                uint64_t t = time_of(ctx, c->start);
                ctx->copies[ctx->n_copies++] = (uvmrt_copy_span_t){c->step, t, t + ns, c->bytes, c->d2h};
            }
        }
        c->pending = 0;
    }
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
    uvmrt_sequence_t *s = &ctx->cur;
    if (!call->no_default_uses) {
        const uvmrt_layer_t *L = &ctx->layers[call->layer];
        for (int i = 0; i < L->n_owned; i++) {
            const uvmrt_tensor_t *t = ctx->tensors[L->owned[i]];
            unsigned acc = default_access(t->role, call->phase);
            if (acc && seq_add_use(s, t->id, acc)) return UVMRT_ERR_NOMEM;
        }
    }
    for (size_t u = 0; u < call->n_uses; u++) {
        const uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, call->uses[u].tensor);
        unsigned acc = call->uses[u].access;
        if (t == NULL) {
            LOG_ERROR(&ctx->log, "layer '%s' %s: uses[%zu].tensor is not a live tensor of this context",
                      ctx->layers[call->layer].name, uvmrt_phase_name(call->phase), u);
            return UVMRT_ERR_INVALID;
        }
        if ((acc & UVMRT_USE_READWRITE) == 0 || acc > (UVMRT_USE_READWRITE | UVMRT_USE_STREAM)) {
            LOG_ERROR(&ctx->log, "layer '%s' %s: uses[%zu] ('%s') access %u: expected UVMRT_USE_READ, "
                                 "UVMRT_USE_WRITE or UVMRT_USE_READWRITE, optionally | UVMRT_USE_STREAM",
                      ctx->layers[call->layer].name, uvmrt_phase_name(call->phase), u, t->name, acc);
            return UVMRT_ERR_INVALID;
        }
        size_t k = first;
        while (k < s->n_uses && s->use_tensor[k] != t->id) k++;
        if (k < s->n_uses) s->use_access[k] = acc;
        else if (seq_add_use(s, t->id, acc)) return UVMRT_ERR_NOMEM;
    }
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ ranges */
static int cmp_tensor_addr(const void *a, const void *b)
{
    const uvmrt_tensor_t *x = *(uvmrt_tensor_t *const *)a, *y = *(uvmrt_tensor_t *const *)b;
    if (x->arena != y->arena) return x->arena < y->arena ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Sorts tensors by address and merges neighbours into contiguous ranges, so one
 * call moves what lies side by side. ranges must hold n entries. */
static size_t merge_ranges(uvmrt_tensor_t **ts, size_t n, uvmrt_range_t *ranges)
{
    qsort(ts, n, sizeof *ts, cmp_tensor_addr);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k > 0 && ts[i - 1]->arena == ts[i]->arena &&
            (char *)ranges[k - 1].ptr + ranges[k - 1].bytes == (char *)ts[i]->ptr) {
            ranges[k - 1].bytes += ts[i]->footprint;
        } else {
            ranges[k++] = (uvmrt_range_t){ts[i]->ptr, ts[i]->footprint};
        }
    }
    return k;
}

/* ------------------------------------------------------------------ batches */
typedef struct batch {
    uvmrt_tensor_t **evict, **discard, **fetch;
    size_t n_evict, n_discard, n_fetch;
} batch_t;

static int batch_init(batch_t *b, int n)
{
    memset(b, 0, sizeof *b);
    size_t sz = (size_t)(n > 0 ? n : 1) * sizeof(uvmrt_tensor_t *);
    b->evict = malloc(sz);
    b->discard = malloc(sz);
    b->fetch = malloc(sz);
    return b->evict && b->discard && b->fetch ? 0 : -1;
}

static void batch_free(batch_t *b)
{
    free(b->evict);
    free(b->discard);
    free(b->fetch);
}

/* Timing of a copy batch: optional, so a failure only leaves the batch untimed. */
static uvmrt_copy_timing_t *timed_start(uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    uvmrt_copy_timing_t *c = copy_timing_slot(ctx);
    if (c == NULL) return NULL;
    c->d2h = s == ctx->d2h_stream;
    c->step = ctx->step_index;
    return timing_record(ctx, c->start, s) ? c : NULL;
}

static void timed_end(uvmrt_context_t *ctx, uvmrt_stream_t s, uvmrt_copy_timing_t *c, uvmrt_tensor_t **ts,
                      size_t n)
{
    if (c == NULL) return;
    c->bytes = 0;
    for (size_t i = 0; i < n; i++) c->bytes += ts[i]->footprint;
    c->pending = timing_record(ctx, c->end, s);
}

/* Issues one batch on the copy streams: evictions (after each victim's last use),
 * then prefetches (after those evictions). Counters go to (layer, phase).
 *
 * Accounting follows what was enqueued: victims stop counting as resident only
 * once their eviction and its event are both enqueued (so the prefetches can
 * wait for it); fetched tensors count as resident once their move is enqueued
 * (or when a failed move could not be undone: they may be partly there). On an
 * error the evictions already enqueued stay done and counted. */
static uvmrt_status_t issue_batch(uvmrt_context_t *ctx, batch_t *b, int layer, uvmrt_phase_t phase)
{
    uvmrt_status_t st = UVMRT_OK;
    size_t n_victims = b->n_evict + b->n_discard;
    size_t n_max = n_victims > b->n_fetch ? n_victims : b->n_fetch;
    uvmrt_range_t *ranges = malloc((n_max ? n_max : 1) * sizeof *ranges);
    if (ranges == NULL) return UVMRT_ERR_NOMEM;
    uvmrt_evref_t evicted = 0;
    if (n_victims > 0) {
        uvmrt_stream_t s = ctx->d2h_stream;
        for (size_t i = 0; i < b->n_evict && st == UVMRT_OK; i++) st = ring_wait(ctx, s, b->evict[i]->last_use);
        for (size_t i = 0; i < b->n_evict && st == UVMRT_OK; i++) st = ring_wait(ctx, s, b->evict[i]->ready);
        for (size_t i = 0; i < b->n_discard && st == UVMRT_OK; i++) st = ring_wait(ctx, s, b->discard[i]->last_use);
        for (size_t i = 0; i < b->n_discard && st == UVMRT_OK; i++) st = ring_wait(ctx, s, b->discard[i]->ready);
        uvmrt_copy_timing_t *c = st == UVMRT_OK ? timed_start(ctx, s) : NULL;
        if (st == UVMRT_OK)
            st = uvmrt__be_move(ctx, ranges, merge_ranges(b->evict, b->n_evict, ranges), UVMRT_LOC_HOST, s);
        if (st == UVMRT_OK) st = uvmrt__be_discard(ctx, ranges, merge_ranges(b->discard, b->n_discard, ranges), s);
        if (st == UVMRT_OK) timed_end(ctx, s, c, b->evict, b->n_evict);
        if (st == UVMRT_OK) st = ring_record(ctx, s, &evicted);
        if (st != UVMRT_OK) goto out;
        for (size_t i = 0; i < n_victims; i++) {
            int discarded = i >= b->n_evict;
            uvmrt_tensor_t *t = discarded ? b->discard[i - b->n_evict] : b->evict[i];
            t->resident = 0;
            t->ready = 0;
            t->leaving = evicted;
            if (discarded) t->dead = 1;
            uvmrt__resident_add(ctx, -(int64_t)t->footprint);
            uvmrt__stat_add(ctx, layer, phase, discarded ? STAT_DISCARD : STAT_EVICT, t->footprint);
        }
    }
    if (b->n_fetch > 0) {
        uvmrt_stream_t s = ctx->h2d_stream;
        uvmrt_evref_t ready = 0;
        st = ring_wait(ctx, s, evicted);
        for (size_t i = 0; i < b->n_fetch && st == UVMRT_OK; i++) st = ring_wait(ctx, s, b->fetch[i]->leaving);
        if (st != UVMRT_OK) goto out;
        uvmrt_copy_timing_t *c = timed_start(ctx, s);
        uint64_t undone = ctx->be_compensated;
        st = uvmrt__be_move(ctx, ranges, merge_ranges(b->fetch, b->n_fetch, ranges), UVMRT_LOC_DEVICE, s);
        if (st != UVMRT_OK && uvmrt__be_move_undone(ctx, undone)) goto out;
        int moved = st == UVMRT_OK;
        if (moved) {
            timed_end(ctx, s, c, b->fetch, b->n_fetch);
            st = ring_record(ctx, s, &ready);
        }
        for (size_t i = 0; i < b->n_fetch; i++) {
            uvmrt_tensor_t *t = b->fetch[i];
            t->resident = 1;
            t->ready = ready; /* 0 when no event could be recorded: nothing waits for it */
            uvmrt__resident_add(ctx, (int64_t)t->footprint);
            if (moved) uvmrt__stat_add(ctx, layer, phase, STAT_PREFETCH, t->footprint);
        }
    }
out:
    free(ranges);
    return st;
}

/* ------------------------------------------------------------------ the plan */
static int residency_matches(const uvmrt_context_t *ctx, const uint8_t *r)
{
    for (int t = 0; t < ctx->n_tensors; t++)
        if ((ctx->tensors[t]->resident != 0) != (r[t] != 0)) return 0;
    return 1;
}

/* Applies the plan's host homing: newly homed tensors get their range advised
 * (once) and their pages populated on the host; resident ones are written back
 * by the plan's point 0. Advice is not stream ordered: the copy streams are
 * drained first (only when the homed set changes). */
static uvmrt_status_t adopt_homing(uvmrt_context_t *ctx)
{
    int changed = 0;
    for (int t = 0; t < ctx->n_tensors; t++)
        changed |= (ctx->plan.host_homed[t] != 0) != (ctx->tensors[t]->host_homed != 0);
    if (!changed) return UVMRT_OK;
    uvmrt_status_t st = uvmrt__be_stream_sync(ctx, ctx->h2d_stream);
    if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->d2h_stream);
    uint64_t homed_bytes = 0;
    /* Each tensor is homed once its own calls succeeded; one that failed stays
     * as it was, and the next step tries again. */
    for (int id = 0; id < ctx->n_tensors && st == UVMRT_OK; id++) {
        uvmrt_tensor_t *t = ctx->tensors[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (!ctx->plan.host_homed[id] && !t->placed_host) {
            t->host_homed = 0; /* its advice stays: explicit prefetches still migrate it */
            continue;
        }
        homed_bytes += t->footprint;
        if (t->host_homed) continue;
        uvmrt_range_t r = {t->ptr, t->footprint};
        if (!t->advised_remote && (st = uvmrt__be_advise_remote(ctx, &r, 1)) == UVMRT_OK) t->advised_remote = 1;
        if (st == UVMRT_OK && !t->resident) {
            uvmrt_evref_t leaving = 0;
            st = uvmrt__be_move(ctx, &r, 1, UVMRT_LOC_HOST, ctx->d2h_stream); /* populates host pages */
            if (st == UVMRT_OK) st = ring_record(ctx, ctx->d2h_stream, &leaving);
            if (st == UVMRT_OK) t->leaving = leaving;
        }
        if (st == UVMRT_OK) t->host_homed = 1;
    }
    if (st == UVMRT_OK)
        LOG_INFO(&ctx->log, "plan keeps %.1f MiB of tensors in host memory (remote access over the link)",
                 homed_bytes / 1048576.0);
    return st;
}

/* Builds (or rebuilds) the plan from the record when residency left its path. */
static uvmrt_status_t ensure_plan(uvmrt_context_t *ctx)
{
    int n = ctx->n_tensors;
    if (ctx->have_plan && residency_matches(ctx, ctx->plan.start_resident)) return UVMRT_OK;
    /* Re-planning the same record (the resident state drifted from the plan's,
     * usually because the plan's end differs from its start): keep its homing. */
    int replan = ctx->have_plan;
    if (ctx->have_plan) {
        uvmrt_plan_free(&ctx->plan);
        ctx->have_plan = 0;
    }
    const uvmrt_sequence_t *r = &ctx->record;
    int m = (int)r->n_calls;
    uvmrt_plan_event_t *ev = calloc((size_t)m, sizeof *ev);
    uint64_t *fp = calloc((size_t)n + 1, sizeof *fp);
    uint8_t *res0 = calloc((size_t)n + 1, 1);
    uint8_t *remote_ok = calloc((size_t)n + 1, 1);
    uint8_t *homed = calloc((size_t)n + 1, 1);
    uint8_t *forced = calloc((size_t)n + 1, 1);
    uvmrt_status_t st = UVMRT_ERR_NOMEM;
    if (ev && fp && res0 && remote_ok && homed && forced) {
        for (int t = 0; t < n; t++) homed[t] = (uint8_t)ctx->tensors[t]->host_homed;
        for (int t = 0; t < n; t++) forced[t] = (uint8_t)ctx->tensors[t]->placed_host;
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
            fp[t] = ctx->tensors[t]->magic == UVMRT_TENSOR_MAGIC ? ctx->tensors[t]->footprint : 0;
            res0[t] = (uint8_t)ctx->tensors[t]->resident;
        }
        const uvmrt_profile_t *pr = ctx->profile;
        uvmrt_plan_input_t in = {m, ev, n, fp, ctx->budget, res0, ctx->cfg.discard_dead, remote_ok,
                                 replan ? homed : NULL, forced, pr->prefetch_h2d_bps, pr->evict_d2h_bps,
                                 pr->remote_read_bps, pr->remote_write_bps};
        int bad = -1;
        st = uvmrt_plan_build(&in, &ctx->plan, &bad);
        if (st == UVMRT_OK) {
            ctx->have_plan = 1;
            ctx->plans_built++;
            LOG_DEBUG(&ctx->log, "plan %llu: %d events, %zu actions", (unsigned long long)ctx->plans_built, m,
                      ctx->plan.n_actions);
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
    if (st == UVMRT_OK && ctx->have_plan) st = adopt_homing(ctx);
    return st;
}

/* Executes the plan's issue point p, one batch per target event. */
static uvmrt_status_t run_point(uvmrt_context_t *ctx, int p)
{
    const uvmrt_plan_t *pl = &ctx->plan;
    size_t a = pl->point_first[p], end = pl->point_first[p + 1];
    batch_t b;
    if (batch_init(&b, ctx->n_tensors) != 0) return UVMRT_ERR_NOMEM;
    uvmrt_status_t st = UVMRT_OK;
    uint64_t planned = ctx->resident_bytes;
    while (a < end && st == UVMRT_OK) {
        int target = pl->actions[a].target;
        b.n_evict = b.n_discard = b.n_fetch = 0;
        for (; a < end && pl->actions[a].target == target; a++) {
            uvmrt_tensor_t *t = ctx->tensors[pl->actions[a].tensor];
            if (t->magic != UVMRT_TENSOR_MAGIC) continue;
            if (pl->actions[a].kind == UVMRT_ACT_PREFETCH) {
                /* Skip what is already there, or what would break the budget
                 * because the real state drifted from the plan's. */
                if (t->resident || planned + t->footprint > ctx->budget) continue;
                b.fetch[b.n_fetch++] = t;
                planned += t->footprint;
            } else if (t->resident) {
                if (pl->actions[a].kind == UVMRT_ACT_DISCARD) b.discard[b.n_discard++] = t;
                else b.evict[b.n_evict++] = t;
                planned -= t->footprint;
            }
        }
        const uvmrt_call_t *c = &ctx->record.calls[target % pl->m];
        st = issue_batch(ctx, &b, c->layer, c->phase);
    }
    batch_free(&b);
    return st;
}

static int plan_active(const uvmrt_context_t *ctx)
{
    return ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->have_plan && !ctx->deviated;
}

/* ------------------------------------------------------------------ spans and fault records */
/* Rebuilds the address index when tensors came or went. */
static int refresh_index(uvmrt_context_t *ctx)
{
    if (ctx->index_tensors == ctx->n_tensors && ctx->index_bytes == ctx->allocated_bytes && ctx->index.n > 0)
        return 0;
    uvmrt_attrib_index_clear(&ctx->index);
    for (int id = 0; id < ctx->n_tensors; id++) {
        const uvmrt_tensor_t *t = ctx->tensors[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (uvmrt_attrib_index_add(&ctx->index, (uint64_t)(uintptr_t)t->ptr,
                                   (uint64_t)(uintptr_t)t->ptr + t->footprint, id) != 0)
            return -1;
    }
    uvmrt_attrib_index_sort(&ctx->index);
    ctx->index_tensors = ctx->n_tensors;
    ctx->index_bytes = ctx->allocated_bytes;
    return 0;
}

typedef struct uvmrt_span_sort {
    uvmrt_attrib_span_t span;
    size_t call;
} span_sort_t;

static int cmp_span(const void *a, const void *b)
{
    const span_sort_t *x = a, *y = b;
    if (x->span.start != y->span.start) return x->span.start < y->span.start ? -1 : 1;
    return x->call < y->call ? -1 : x->call > y->call;
}

/* The step's layer-call spans on the host clock (kept for the trace), then its
 * unified-memory records attributed to them: records starting before the
 * anchor belong to this step, later ones wait for the next. Cannot fail: the
 * memory was reserved by step_reserve. */
static void step_spans_and_faults(uvmrt_context_t *ctx)
{
    size_t n = ctx->cur.n_calls;
    int keep = ctx->anchor_ev != NULL;
    size_t first_span = ctx->n_spans;
    span_sort_t *ss = ctx->scratch_ss;
    uvmrt_attrib_span_t *sp = ctx->scratch_sp;
    uvmrt_fcount_t *fc = ctx->scratch_fc;
    memset(fc, 0, (n ? n : 1) * sizeof *fc);
    uint64_t step = uvmrt__steps_done(ctx);
    for (size_t i = 0; i < n; i++) {
        const uvmrt_call_t *c = &ctx->cur.calls[i];
        uint64_t t0 = 0, tw = 0, t1 = 0;
        if (c->timed) {
            t0 = time_of(ctx, ctx->timing[c->ev_wait_start]);
            tw = time_of(ctx, ctx->timing[c->ev_wait_end]);
            t1 = time_of(ctx, ctx->timing[c->ev_end]);
        }
        ss[i] = (span_sort_t){{t0 + ctx->t0_ns, t1 + ctx->t0_ns}, i};
        if (keep) ctx->spans[ctx->n_spans++] = (uvmrt_span_t){step, c->layer, c->phase, t0, tw, t1, 0, 0};
    }
    if (uvmrt__faults_active(ctx)) {
        uvmrt__faults_collect(ctx);
        if (refresh_index(ctx) != 0) return; /* no memory for the index: the records wait for the next step */
    }
    if (ctx->n_pend > 0) {
        if (n > 1) qsort(ss, n, sizeof *ss, cmp_span);
        for (size_t i = 0; i < n; i++) sp[i] = ss[i].span;
        ctx->n_pend = uvmrt_attrib_run(&ctx->index, sp, n, ctx->pend, ctx->n_pend, ctx->anchor_ns, fc, &ctx->unattr);
        for (size_t i = 0; i < n; i++) {
            const uvmrt_call_t *c = &ctx->cur.calls[ss[i].call];
            uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc[i], NULL, NULL);
            if (keep) {
                ctx->spans[first_span + ss[i].call].gpu_faults = fc[i].v[FC_GPU_FAULTS];
                ctx->spans[first_span + ss[i].call].fault_htod_bytes = fc[i].v[FC_FAULT_HTOD];
            }
        }
    }
}

/* The step's (layer, phase) rows that ran, for csv (room reserved by step_reserve). */
static void keep_rows(uvmrt_context_t *ctx)
{
    uint64_t step = uvmrt__steps_done(ctx);
    for (int r = 0; r < ctx->n_cur_rows; r++) {
        if (ctx->cur_rows[r].calls == 0) continue;
        ctx->rows[ctx->n_rows++] = (uvmrt_step_row_t){step, r / UVMRT_PHASE_COUNT,
                                                       (uvmrt_phase_t)(r % UVMRT_PHASE_COUNT), ctx->cur_rows[r]};
    }
}

/* At the end, or before a step that does not collect: records still pending
 * (the last step's tail, copies after it) go to the last call of the last step;
 * without any step they are unattributed. */
static void attribute_rest(uvmrt_context_t *ctx)
{
    if (!uvmrt__faults_active(ctx)) return;
    uvmrt__faults_collect(ctx);
    if (ctx->n_pend == 0 || refresh_index(ctx) != 0) return;
    uvmrt_fcount_t fc;
    memset(&fc, 0, sizeof fc);
    int last = ctx->n_steps > 0 && ctx->cur.n_calls > 0 && !ctx->in_step;
    uvmrt_attrib_span_t all = {0, UINT64_MAX};
    ctx->n_pend = uvmrt_attrib_run(&ctx->index, &all, last ? 1 : 0, ctx->pend, ctx->n_pend, UINT64_MAX, &fc,
                                   &ctx->unattr);
    if (!last) return;
    const uvmrt_call_t *c = &ctx->cur.calls[ctx->cur.n_calls - 1];
    uint64_t step = uvmrt__steps_done(ctx) - 1;
    uvmrt_layer_stats_t *row = NULL;
    for (size_t i = ctx->n_rows; i > 0; i--)
        if (ctx->rows[i - 1].step == step && ctx->rows[i - 1].layer == c->layer && ctx->rows[i - 1].phase == c->phase) {
            row = &ctx->rows[i - 1].s;
            break;
        }
    uvmrt_layer_stats_t scratch;
    memset(&scratch, 0, sizeof scratch);
    uvmrt__stat_add_fc(ctx, c->layer, c->phase, &fc, &ctx->steps[ctx->n_steps - 1], row ? row : &scratch);
}

/* ------------------------------------------------------------------ history */
static void stats_sum(uvmrt_step_stats_t *a, const uvmrt_step_stats_t *b)
{
    a->step_ns += b->step_ns;
    a->prefetch_bytes += b->prefetch_bytes;
    a->evict_bytes += b->evict_bytes;
    a->discard_bytes += b->discard_bytes;
    a->fault_count += b->fault_count;
    a->fault_bytes += b->fault_bytes;
    a->remote_read_bytes += b->remote_read_bytes;
    a->remote_write_bytes += b->remote_write_bytes;
    a->wait_ns += b->wait_ns;
    if (b->peak_resident_bytes > a->peak_resident_bytes) a->peak_resident_bytes = b->peak_resident_bytes;
    a->h2d_busy_ns += b->h2d_busy_ns;
    a->d2h_busy_ns += b->d2h_busy_ns;
    a->gpu_faults += b->gpu_faults;
    a->fault_htod_bytes += b->fault_htod_bytes;
    a->prefetch_htod_bytes += b->prefetch_htod_bytes;
    a->driver_prefetch_htod_bytes += b->driver_prefetch_htod_bytes;
    a->evict_dtoh_bytes += b->evict_dtoh_bytes;
    a->thrashing += b->thrashing;
    a->throttling += b->throttling;
    a->remote_map += b->remote_map;
    a->cpu_faults += b->cpu_faults;
    a->fault_sampled += b->fault_sampled; /* in the aggregate: how many of its steps collected */
}

/* Keeps the history to the last UVMRT_HISTORY steps: once it holds a quarter
 * more than that, the oldest are summed into steps_dropped and their rows,
 * spans and copies dropped, in one pass (so a step costs O(1) amortized). */
static void history_trim(uvmrt_context_t *ctx)
{
    uint64_t keep = (uint64_t)ctx->cfg.history;
    if (ctx->n_steps < keep + (keep + 3) / 4) return;
    uint64_t drop = ctx->n_steps - keep;
    for (uint64_t i = 0; i < drop; i++) stats_sum(&ctx->steps_dropped, &ctx->steps[i]);
    memmove(ctx->steps, ctx->steps + drop, (size_t)keep * sizeof *ctx->steps);
    ctx->n_steps = keep;
    ctx->steps_before += drop;
    uint64_t first = ctx->steps_before;
    size_t k = 0;
    for (size_t i = 0; i < ctx->n_rows; i++)
        if (ctx->rows[i].step >= first) ctx->rows[k++] = ctx->rows[i];
    ctx->n_rows = k;
    k = 0;
    for (size_t i = 0; i < ctx->n_spans; i++)
        if (ctx->spans[i].step >= first) ctx->spans[k++] = ctx->spans[i];
    ctx->n_spans = k;
    k = 0;
    for (size_t i = 0; i < ctx->n_copies; i++)
        if (ctx->copies[i].step >= first) ctx->copies[k++] = ctx->copies[i];
    ctx->n_copies = k;
}

/* ------------------------------------------------------------------ steps */
uvmrt_status_t uvmrt_step_begin(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (ctx->in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_step_begin: step %llu is still open (call uvmrt_step_end first)",
                  (unsigned long long)ctx->step_index + 1);
        return UVMRT_ERR_STATE;
    }
    int nrows = ctx->n_layers * UVMRT_PHASE_COUNT;
    if (nrows != ctx->n_cur_rows) {
        uvmrt_layer_stats_t *r = realloc(ctx->cur_rows, (size_t)(nrows ? nrows : 1) * sizeof *r);
        if (r == NULL) {
            LOG_ERROR(&ctx->log, "uvmrt_step_begin: out of memory for %d (layer, phase) rows", nrows);
            return UVMRT_ERR_NOMEM;
        }
        if (nrows > ctx->n_cur_rows)
            memset(r + ctx->n_cur_rows, 0, (size_t)(nrows - ctx->n_cur_rows) * sizeof *r);
        ctx->cur_rows = r;
        ctx->n_cur_rows = nrows;
    }
    /* Sampling (sampling.h): does this step collect the driver's counters? A
     * step that does not stops the source first and gives what it still had
     * (the collecting step's tail) to that step. */
    int collect = uvmrt__faults_active(ctx) && uvmrt_sampler_want(&ctx->sampler, uvmrt__steps_done(ctx));
    if (!collect && ctx->fault_on) {
        uvmrt__faults_switch(ctx, 0);
        attribute_rest(ctx);
    } else if (collect && !ctx->fault_on) {
        uvmrt__faults_switch(ctx, 1);
    }
    /* cur_stats and cur_rows were cleared by the last step_end: what a failed
     * step_begin moved stays counted there, for the step that runs next. */
    ctx->cur_stats.fault_sampled = collect;
    if (ctx->resident_bytes > ctx->cur_stats.peak_resident_bytes)
        ctx->cur_stats.peak_resident_bytes = ctx->resident_bytes;
    ctx->step_start_ns = uvmrt__be_now(ctx);
    uvmrt_status_t st = UVMRT_OK;
    if (ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->have_record) {
        st = ensure_plan(ctx);
        if (st == UVMRT_OK && ctx->have_plan) st = run_point(ctx, 0);
        if (st != UVMRT_OK) {
            LOG_ERROR(&ctx->log, "uvmrt_step_begin: step %llu not begun: issuing the plan's first moves failed "
                                 "(%s); moves already issued stay counted",
                      (unsigned long long)ctx->step_index + 1, uvmrt_status_str(st));
            return st;
        }
    }
    ctx->in_step = 1;
    ctx->open_call = -1;
    ctx->deviated = 0;
    ctx->cur.n_calls = ctx->cur.n_uses = 0;
    return UVMRT_OK;
}

/* The distinct streams of the step's calls, by open addressing over call
 * indices (slot = index + 1, 0 = empty): linear in the calls. */
static uvmrt_status_t sync_compute_streams(uvmrt_context_t *ctx)
{
    size_t n = ctx->cur.n_calls, cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > ctx->cap_sync_slots) {
        size_t *p = realloc(ctx->sync_slots, cap * sizeof *p);
        if (p == NULL) return UVMRT_ERR_NOMEM;
        ctx->sync_slots = p;
        ctx->cap_sync_slots = cap;
    }
    memset(ctx->sync_slots, 0, cap * sizeof *ctx->sync_slots);
    uvmrt_status_t st = UVMRT_OK;
    for (size_t i = 0; i < n && st == UVMRT_OK; i++) {
        uvmrt_stream_t s = ctx->cur.calls[i].stream;
        size_t h = (size_t)(((uintptr_t)s >> 4) * 0x9e3779b97f4a7c15ull) & (cap - 1);
        while (ctx->sync_slots[h] != 0 && ctx->cur.calls[ctx->sync_slots[h] - 1].stream != s) h = (h + 1) & (cap - 1);
        if (ctx->sync_slots[h] != 0) continue;
        ctx->sync_slots[h] = i + 1;
        st = uvmrt__be_stream_sync(ctx, s);
    }
    return st;
}

/* Every allocation step_end's commit needs, made before anything changes. */
static uvmrt_status_t step_reserve(uvmrt_context_t *ctx)
{
    size_t n = ctx->cur.n_calls, m = n ? n : 1;
    if (uvmrt__grow((void **)&ctx->spans, &ctx->cap_spans, ctx->n_spans + n, sizeof *ctx->spans) ||
        uvmrt__grow((void **)&ctx->rows, &ctx->cap_rows, ctx->n_rows + (size_t)ctx->n_cur_rows, sizeof *ctx->rows) ||
        uvmrt__grow((void **)&ctx->scratch_ss, &ctx->cap_scratch_ss, m, sizeof(span_sort_t)) ||
        uvmrt__grow((void **)&ctx->scratch_sp, &ctx->cap_scratch_sp, m, sizeof *ctx->scratch_sp) ||
        uvmrt__grow((void **)&ctx->scratch_fc, &ctx->cap_scratch_fc, m, sizeof *ctx->scratch_fc))
        return UVMRT_ERR_NOMEM;
    if (ctx->n_steps == ctx->cap_steps) {
        uint64_t cap = ctx->cap_steps ? 2 * ctx->cap_steps : 16;
        uvmrt_step_stats_t *p = realloc(ctx->steps, (size_t)cap * sizeof *p);
        if (p == NULL) return UVMRT_ERR_NOMEM;
        ctx->steps = p;
        ctx->cap_steps = cap;
    }
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_step_end(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (!ctx->in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end outside a step (call uvmrt_step_begin first)");
        return UVMRT_ERR_STATE;
    }
    if (ctx->open_call >= 0) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end: layer '%s' is still open (call uvmrt_layer_end first)",
                  ctx->layers[ctx->cur.calls[ctx->open_call].layer].name);
        return UVMRT_ERR_STATE;
    }
    /* Fallible part: wait for each compute stream used in the step (not the copy
     * streams: their prefetches for the next step may still run), reserve memory,
     * copy the record. On failure the step is still open, as before the call. */
    uvmrt_status_t st = sync_compute_streams(ctx);
    if (st == UVMRT_OK) st = step_reserve(ctx);
    int rerecord = ctx->cfg.policy == UVMRT_POLICY_PREFETCH &&
                   (!ctx->have_record || ctx->deviated || ctx->cur.n_calls != ctx->record.n_calls);
    if (st == UVMRT_OK && rerecord && seq_copy(&ctx->record, &ctx->cur) != 0) st = UVMRT_ERR_NOMEM;
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_step_end: step %llu is still open: %s", (unsigned long long)ctx->step_index + 1,
                  uvmrt_status_str(st));
        return st;
    }
    /* Commit: nothing below fails (timings that cannot be read are counted). */
    for (size_t i = 0; i < ctx->cur.n_calls; i++) {
        const uvmrt_call_t *c = &ctx->cur.calls[i];
        if (!c->timed) continue;
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_WAIT_NS,
                        elapsed(ctx, ctx->timing[c->ev_wait_start], ctx->timing[c->ev_wait_end]));
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_DURATION_NS,
                        elapsed(ctx, ctx->timing[c->ev_wait_end], ctx->timing[c->ev_end]));
    }
    anchor(ctx);
    harvest_copy_timings(ctx, 0);
    history_trim(ctx); /* before this step's rows and spans go in */
    step_spans_and_faults(ctx);
    ctx->cur_stats.step_ns = uvmrt__be_now(ctx) - ctx->step_start_ns;
    if (uvmrt__faults_active(ctx))
        uvmrt_sampler_done(&ctx->sampler, uvmrt__steps_done(ctx), ctx->cur_stats.fault_sampled,
                           ctx->cur_stats.step_ns);
    if (rerecord) {
        ctx->have_record = ctx->record.n_calls > 0;
        if (ctx->have_plan) {
            uvmrt_plan_free(&ctx->plan);
            ctx->have_plan = 0;
        }
        LOG_INFO(&ctx->log, "step %llu recorded: %zu layer calls", (unsigned long long)uvmrt__steps_done(ctx) + 1,
                 ctx->record.n_calls);
    }
    keep_rows(ctx);
    uvmrt__stats_fold_step(ctx, &ctx->cur_stats); /* room reserved above */
    memset(&ctx->cur_stats, 0, sizeof ctx->cur_stats);
    if (ctx->n_cur_rows > 0) memset(ctx->cur_rows, 0, (size_t)ctx->n_cur_rows * sizeof *ctx->cur_rows);
    ctx->in_step = 0;
    ctx->step_index++;
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ layer calls */
/* Bytes a call needs resident: tensors placed in host memory by the user do not count. */
static uint64_t working_set(const uvmrt_context_t *ctx, size_t first, size_t n)
{
    uint64_t ws = 0;
    for (size_t i = 0; i < n; i++) {
        const uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[first + i]];
        if (!t->placed_host) ws += t->footprint;
    }
    return ws;
}

static int call_matches_record(const uvmrt_context_t *ctx, size_t i)
{
    if (i >= ctx->record.n_calls) return 0;
    const uvmrt_call_t *a = &ctx->cur.calls[i], *b = &ctx->record.calls[i];
    if (a->layer != b->layer || a->phase != b->phase || a->n_uses != b->n_uses) return 0;
    for (size_t k = 0; k < a->n_uses; k++)
        if (ctx->cur.use_tensor[a->use_first + k] != ctx->record.use_tensor[b->use_first + k] ||
            ctx->cur.use_access[a->use_first + k] != ctx->record.use_access[b->use_first + k])
            return 0;
    return 1;
}

static int used_by(const uvmrt_context_t *ctx, const uvmrt_call_t *c, int tensor)
{
    for (size_t k = 0; k < c->n_uses; k++)
        if (ctx->cur.use_tensor[c->use_first + k] == tensor) return 1;
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
static uvmrt_status_t demand_path(uvmrt_context_t *ctx, const uvmrt_call_t *c)
{
    uint64_t need = 0;
    for (size_t k = 0; k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) need += t->footprint;
    }
    if (need == 0) return UVMRT_OK;
    uvmrt_status_t st = UVMRT_OK;
    if (ctx->cfg.policy != UVMRT_POLICY_NONE && ctx->resident_bytes + need > ctx->budget) {
        uvmrt_tensor_t **victims = malloc((size_t)ctx->n_tensors * sizeof *victims);
        uvmrt_range_t *ranges = malloc((size_t)ctx->n_tensors * sizeof *ranges);
        size_t nv = 0;
        uint64_t freed = 0;
        if (victims == NULL || ranges == NULL) st = UVMRT_ERR_NOMEM;
        for (int id = 0; st == UVMRT_OK && id < ctx->n_tensors &&
                         ctx->resident_bytes - freed + need > ctx->budget; id++) {
            uvmrt_tensor_t *t = ctx->tensors[id];
            if (t->magic != UVMRT_TENSOR_MAGIC || !t->resident || used_by(ctx, c, id)) continue;
            st = ring_wait(ctx, c->stream, t->ready);
            if (st == UVMRT_OK) st = ring_wait(ctx, c->stream, t->last_use); /* other streams' work */
            victims[nv++] = t;
            freed += t->footprint;
        }
        if (st == UVMRT_OK)
            st = uvmrt__be_move(ctx, ranges, merge_ranges(victims, nv, ranges), UVMRT_LOC_HOST, c->stream);
        uvmrt_evref_t ev = 0;
        if (st == UVMRT_OK && nv > 0) st = ring_record(ctx, c->stream, &ev);
        for (size_t i = 0; st == UVMRT_OK && i < nv; i++) {
            victims[i]->resident = 0;
            victims[i]->ready = 0;
            victims[i]->leaving = ev;
            uvmrt__resident_add(ctx, -(int64_t)victims[i]->footprint);
            uvmrt__stat_add(ctx, c->layer, c->phase, STAT_EVICT, victims[i]->footprint);
        }
        free(victims);
        free(ranges);
    }
    for (size_t k = 0; st == UVMRT_OK && k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) st = ring_wait(ctx, c->stream, t->leaving); /* its write-back first */
    }
    for (size_t k = 0; st == UVMRT_OK && k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        if (t->resident || t->host_homed) continue;
        t->resident = 1;
        t->ready = 0;
        uvmrt__resident_add(ctx, (int64_t)t->footprint);
        estimate_fault(ctx, c, t);
    }
    return st;
}

/* Prefetch policy, a tensor the plan did not bring: fetch it now, making room by
 * farthest next use (never the layer's own tensors); the stream will wait. */
static uvmrt_status_t late_path(uvmrt_context_t *ctx, const uvmrt_call_t *c, int event)
{
    batch_t b;
    if (batch_init(&b, ctx->n_tensors) != 0) return UVMRT_ERR_NOMEM;
    uint64_t need = 0;
    for (size_t k = 0; k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        if (!t->resident && !t->host_homed) {
            b.fetch[b.n_fetch++] = t;
            need += t->footprint;
        }
    }
    uint64_t resident = ctx->resident_bytes;
    while (resident + need > ctx->budget) {
        uvmrt_tensor_t *victim = NULL;
        int32_t far = -1;
        for (int id = 0; id < ctx->n_tensors; id++) {
            uvmrt_tensor_t *t = ctx->tensors[id];
            if (t->magic != UVMRT_TENSOR_MAGIC || !t->resident || used_by(ctx, c, id)) continue;
            int dup = 0;
            for (size_t i = 0; i < b.n_evict; i++) dup |= b.evict[i] == t;
            for (size_t i = 0; i < b.n_discard; i++) dup |= b.discard[i] == t;
            if (dup) continue;
            int32_t nu = uvmrt_plan_next_use(&ctx->plan, event, id);
            if (nu > far) {
                far = nu;
                victim = t;
            }
        }
        if (victim == NULL) break; /* cannot happen: the working set fits the budget */
        unsigned acc = 0;
        if (far != UVMRT_NEVER) {
            const uvmrt_call_t *nc = &ctx->record.calls[(event + far) % ctx->plan.m];
            for (size_t k = 0; k < nc->n_uses; k++)
                if (ctx->record.use_tensor[nc->use_first + k] == victim->id) acc = ctx->record.use_access[nc->use_first + k];
        }
        if (ctx->cfg.discard_dead && far != UVMRT_NEVER && !(acc & UVMRT_USE_READ)) b.discard[b.n_discard++] = victim;
        else b.evict[b.n_evict++] = victim;
        resident -= victim->footprint;
    }
    uvmrt_status_t st = issue_batch(ctx, &b, c->layer, c->phase);
    batch_free(&b);
    return st;
}

/* Calls longer than this (about 31 years) are refused: the model's clocks are
 * uint64 nanoseconds and must not overflow. */
#define UVMRT_MAX_CALL_NS 1e18

/* The call's modelled duration, or an error naming the bad value. */
static uvmrt_status_t call_duration(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call, uint64_t *out)
{
    const char *name = ctx->layers[call->layer].name, *ph = uvmrt_phase_name(call->phase);
    if ((double)call->sim_duration_ns > UVMRT_MAX_CALL_NS) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s: sim_duration_ns %llu: expected at most 1e18 ns",
                  name, ph, (unsigned long long)call->sim_duration_ns);
        return UVMRT_ERR_INVALID;
    }
    if (!(call->flops >= 0) || isinf(call->flops)) { /* also NaN */
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s: flops %g: expected a finite number >= 0", name,
                  ph, call->flops);
        return UVMRT_ERR_INVALID;
    }
    uint64_t dur = call->sim_duration_ns;
    if (dur == 0 && call->flops > 0 && ctx->profile->flops > 0) {
        double ns = call->flops / ctx->profile->flops * 1e9;
        if (!(ns <= UVMRT_MAX_CALL_NS)) {
            LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s: flops %g take %g ns at the profile's %g FLOP/s: "
                                 "expected at most 1e18 ns",
                      name, ph, call->flops, ns, ctx->profile->flops);
            return UVMRT_ERR_INVALID;
        }
        dur = (uint64_t)ns;
    }
    *out = dur;
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
    if (!ctx->in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin outside a step (call uvmrt_step_begin first)");
        return UVMRT_ERR_STATE;
    }
    if (ctx->open_call >= 0) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' is still open (one layer call at a time)",
                  ctx->layers[ctx->cur.calls[ctx->open_call].layer].name);
        return UVMRT_ERR_STATE;
    }
    if (call->layer < 0 || call->layer >= ctx->n_layers) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer %d does not exist: expected 0..%d", call->layer,
                  ctx->n_layers - 1);
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
    uint64_t dur = 0;
    uvmrt_status_t st = call_duration(ctx, call, &dur);
    if (st != UVMRT_OK) return st;
    uvmrt_sequence_t *s = &ctx->cur;
    if (uvmrt__grow((void **)&s->calls, &s->cap_calls, s->n_calls + 1, sizeof *s->calls)) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: out of memory for call %zu", s->n_calls);
        return UVMRT_ERR_NOMEM;
    }
    size_t first = s->n_uses;
    st = resolve_uses(ctx, call, first);
    uint64_t ws = st == UVMRT_OK ? working_set(ctx, first, s->n_uses - first) : 0;
    if (st == UVMRT_OK && ctx->cfg.policy != UVMRT_POLICY_NONE && ws > ctx->budget) {
        LOG_ERROR(&ctx->log, "layer '%s' (%s) needs a working set of %llu bytes (%zu tensors) but the budget "
                             "is %llu bytes: raise UVMRT_BUDGET or split the layer",
                  ctx->layers[call->layer].name, uvmrt_phase_name(call->phase), (unsigned long long)ws,
                  s->n_uses - first, (unsigned long long)ctx->budget);
        st = UVMRT_ERR_BUDGET;
    }
    if (st == UVMRT_OK) st = timing_event(ctx, (int)(3 * s->n_calls + 2));
    if (st != UVMRT_OK) {
        s->n_uses = first; /* nothing changed */
        return st;
    }
    size_t i = s->n_calls; /* staged: counted in n_calls only once open */
    uvmrt_call_t *c = &s->calls[i];
    *c = (uvmrt_call_t){call->layer, call->phase, call->stream, first, s->n_uses - first, dur,
                        (int)(3 * i), (int)(3 * i + 1), (int)(3 * i + 2), 0, 0, {0, 0}};
    int deviated = ctx->deviated;
    if (ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->have_record && !deviated && !call_matches_record(ctx, i))
        ctx->deviated = 1; /* plan_active() reads it; restored on failure */
    int timed = timing_record(ctx, ctx->timing[c->ev_wait_start], c->stream);
    if (plan_active(ctx)) {
        int missing = 0;
        for (size_t k = 0; k < c->n_uses; k++) {
            const uvmrt_tensor_t *t = ctx->tensors[s->use_tensor[first + k]];
            missing |= !t->resident && !t->host_homed;
        }
        if (missing) st = late_path(ctx, c, (int)i);
    }
    /* Wait only for the prefetches of this layer's own tensors (for host-homed
     * ones: for their last move to the host). */
    for (size_t k = 0; k < c->n_uses && st == UVMRT_OK; k++) {
        const uvmrt_tensor_t *t = ctx->tensors[s->use_tensor[first + k]];
        st = ring_wait(ctx, c->stream, t->host_homed ? t->leaving : t->ready);
    }
    if (st == UVMRT_OK) timed &= timing_record(ctx, ctx->timing[c->ev_wait_end], c->stream);
    if (st == UVMRT_OK && !plan_active(ctx)) st = demand_path(ctx, c);
    if (st != UVMRT_OK) {
        ctx->deviated = deviated;
        s->n_uses = first;
        LOG_ERROR(&ctx->log, "uvmrt_layer_begin: layer '%s' %s not opened: %s", ctx->layers[call->layer].name,
                  uvmrt_phase_name(call->phase), uvmrt_status_str(st));
        return st;
    }
    c->timed = timed;
    s->n_calls++;
    ctx->open_call = (int)i;
    if (ctx->deviated && !deviated)
        LOG_INFO(&ctx->log, "step %llu left the recorded sequence at call %zu (layer '%s' %s): running like "
                            "demand, re-recording",
                 (unsigned long long)ctx->step_index + 1, i, ctx->layers[c->layer].name, uvmrt_phase_name(c->phase));
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
        uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        unsigned acc = ctx->cur.use_access[c->use_first + k];
        if (!t->host_homed) loc[n_loc++] = t;
        else if (acc & UVMRT_USE_READ) rd[n_rd++] = t;
        if (t->host_homed && (acc & UVMRT_USE_WRITE)) wr[n_wr++] = t;
    }
    if (st == UVMRT_OK) {
        uvmrt_touch_t work = {r_loc, merge_ranges(loc, n_loc, r_loc), r_rd, merge_ranges(rd, n_rd, r_rd),
                              r_wr, merge_ranges(wr, n_wr, r_wr), c->sim_duration_ns};
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
    if (!ctx->in_step || ctx->open_call < 0) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_end without an open layer (call uvmrt_layer_begin first)");
        return UVMRT_ERR_STATE;
    }
    int i = ctx->open_call;
    uvmrt_call_t *c = &ctx->cur.calls[i];
    uvmrt_status_t st = touch_call(ctx, c);
    uvmrt_evref_t done = 0;
    if (st == UVMRT_OK) c->timed &= timing_record(ctx, ctx->timing[c->ev_end], c->stream);
    if (st == UVMRT_OK) st = ring_record(ctx, c->stream, &done);
    if (st == UVMRT_OK)
        for (size_t k = 0; k < c->n_uses; k++) /* a later event than before: safe to keep even on failure */
            ctx->tensors[ctx->cur.use_tensor[c->use_first + k]]->last_use = done;
    if (st == UVMRT_OK && plan_active(ctx) && i < ctx->plan.m) st = run_point(ctx, i + 1);
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_end: layer '%s' %s is still open: %s", ctx->layers[c->layer].name,
                  uvmrt_phase_name(c->phase), uvmrt_status_str(st));
        return st;
    }
    for (size_t k = 0; k < c->n_uses; k++) {
        uvmrt_tensor_t *t = ctx->tensors[ctx->cur.use_tensor[c->use_first + k]];
        unsigned acc = ctx->cur.use_access[c->use_first + k];
        if (acc & UVMRT_USE_WRITE) t->dead = 0;
        if (!t->host_homed) continue;
        if (acc & UVMRT_USE_READ) uvmrt__stat_add(ctx, c->layer, c->phase, STAT_REMOTE_READ, t->footprint);
        if (acc & UVMRT_USE_WRITE) uvmrt__stat_add(ctx, c->layer, c->phase, STAT_REMOTE_WRITE, t->footprint);
    }
    if (c->touched) {
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_COUNT, c->touch_res.fault_count);
        uvmrt__stat_add(ctx, c->layer, c->phase, STAT_FAULT_BYTES, c->touch_res.fault_bytes);
    }
    uvmrt__stat_add(ctx, c->layer, c->phase, -1, 0); /* counts the call */
    ctx->open_call = -1;
    return UVMRT_OK;
}
