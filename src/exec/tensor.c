/*
 * tensor.c -- tensors and the arenas they are packed into.
 *
 * One uvmrt_tensors_alloc() call makes one arena per owning layer, so a layer's
 * tensors sit side by side and the scheduler can move several with one call.
 * Tensors of 1 MiB or more start on 2 MiB boundaries (the driver's large page);
 * smaller ones on 64 KiB. A tensor's footprint (its size rounded up to its
 * alignment) is what residency accounting counts.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define GIB_D 1073741824.0

/* Sizes the layout arithmetic (size_t) holds with room to spare: a tensor of
 * at most 2^50 bytes (1 PiB), an arena of at most 2^52. */
#define UVMRT_TENSOR_MAX_BYTES ((size_t)1 << 50)
#define UVMRT_ARENA_MAX_BYTES ((size_t)1 << 52)

static size_t align_of(size_t size) { return size >= (1u << 20) ? UVMRT_BLOCK : UVMRT_SMALL_ALIGN; }
static size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

void uvmrt__layer_host_done(uvmrt_context_t *ctx, int layer, uvmrt_evref_t done, uvmrt_stream_t stream)
{
    if (layer < 0 || layer >= ctx->tensors.n_layers) return;
    ctx->tensors.layers[layer].host_done = done;
    ctx->tensors.layers[layer].host_done_stream = stream;
}

/* ------------------------------------------------------------------ handle index */
static size_t index_slot(uintptr_t p, size_t cap)
{
    uint64_t h = (uint64_t)p * 0x9e3779b97f4a7c15ull; /* Fibonacci hashing: the high bits */
    return (size_t)(h >> 32) & (cap - 1);
}

static int index_has(const uvmrt_tensor_table_t *tt, const void *t)
{
    if (tt->index_cap == 0) return 0;
    uintptr_t p = (uintptr_t)t;
    for (size_t i = index_slot(p, tt->index_cap);; i = (i + 1) & (tt->index_cap - 1)) {
        if (tt->index[i] == p) return 1;
        if (tt->index[i] == 0) return 0;
    }
}

static void index_put(uintptr_t *index, size_t cap, uintptr_t p)
{
    size_t i = index_slot(p, cap);
    while (index[i] != 0 && index[i] != p) i = (i + 1) & (cap - 1);
    index[i] = p;
}

/* Room for need pointers (at most half full), rehashed; -1 out of memory (unchanged). */
static int index_reserve(uvmrt_tensor_table_t *tt, size_t need)
{
    if (2 * need <= tt->index_cap) return 0;
    size_t cap = tt->index_cap ? tt->index_cap : 64;
    while (cap < 2 * need) cap *= 2;
    uintptr_t *index = calloc(cap, sizeof *index);
    if (index == NULL) return -1;
    for (size_t i = 0; i < tt->index_cap; i++)
        if (tt->index[i] != 0) index_put(index, cap, tt->index[i]);
    free(tt->index);
    tt->index = index;
    tt->index_cap = cap;
    return 0;
}

/* ------------------------------------------------------------------ resident bitmap */
/* Room for n tensors' bits (both levels), zeroed; -1 out of memory (unchanged). */
static int bits_reserve(uvmrt_tensor_table_t *tt, size_t n)
{
    size_t words = (n + 63) / 64 + 1, sums = (words + 63) / 64 + 1;
    if (words <= tt->res_words) return 0;
    size_t cap = tt->res_words ? tt->res_words : 16;
    while (cap < words) cap *= 2;
    sums = (cap + 63) / 64 + 1;
    uint64_t *b = calloc(cap, sizeof *b), *sum = calloc(sums, sizeof *sum);
    if (b == NULL || sum == NULL) {
        free(b);
        free(sum);
        return -1;
    }
    if (tt->res_words) {
        memcpy(b, tt->res_bits, tt->res_words * sizeof *b);
        memcpy(sum, tt->res_sum, ((tt->res_words + 63) / 64 + 1) * sizeof *sum);
    }
    free(tt->res_bits);
    free(tt->res_sum);
    tt->res_bits = b;
    tt->res_sum = sum;
    tt->res_words = cap;
    return 0;
}

void uvmrt__tensor_set_resident(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int on)
{
    uvmrt_tensor_table_t *tt = &ctx->tensors;
    size_t w = (size_t)t->id / 64;
    uint64_t bit = 1ull << (t->id % 64);
    t->resident = on;
    if (on) tt->res_bits[w] |= bit;
    else tt->res_bits[w] &= ~bit;
    if (tt->res_bits[w]) tt->res_sum[w / 64] |= 1ull << (w % 64);
    else tt->res_sum[w / 64] &= ~(1ull << (w % 64));
}

int uvmrt__resident_next(const uvmrt_context_t *ctx, int from)
{
    const uvmrt_tensor_table_t *tt = &ctx->tensors;
    if (from < 0) from = 0;
    if (from >= tt->n) return -1;
    size_t w = (size_t)from / 64;
    uint64_t word = tt->res_bits[w] & (~0ull << (from % 64));
    if (word) return (int)(w * 64 + (size_t)__builtin_ctzll(word));
    /* the next word with a bit: by the summary, 64 words at a time */
    size_t s = (w + 1) / 64, n_sum = (tt->res_words + 63) / 64;
    uint64_t sw = s < n_sum ? tt->res_sum[s] & (~0ull << ((w + 1) % 64)) : 0;
    while (sw == 0) {
        if (++s >= n_sum) return -1;
        sw = tt->res_sum[s];
    }
    w = s * 64 + (size_t)__builtin_ctzll(sw);
    int id = (int)(w * 64 + (size_t)__builtin_ctzll(tt->res_bits[w]));
    return id < tt->n ? id : -1;
}

uvmrt_tensor_t *uvmrt__tensor_checked(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t)
{
    /* looked up before it is read: a handle this context never made (another
     * context's, a destroyed one's, garbage) is never dereferenced */
    if (ctx == NULL || t == NULL || !index_has(&ctx->tensors, t) || t->ctx != ctx || t->id < 0 || t->id >= ctx->tensors.n ||
        ctx->tensors.by_id[t->id] != t || t->magic != UVMRT_TENSOR_MAGIC)
        return NULL;
    return (uvmrt_tensor_t *)t;
}

static int grow(void **arr, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 0;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *p = realloc(*arr, (size_t)c * elem);
    if (p == NULL) return -1;
    *arr = p;
    *cap = c;
    return 0;
}

static uvmrt_status_t check_desc(const uvmrt_context_t *ctx, const uvmrt_tensor_desc_t *d, size_t i)
{
    const char *name = d->name ? d->name : "(unnamed)";
    if (d->size_bytes == 0) {
        LOG_ERROR(&ctx->log, "tensor %zu '%s': size_bytes is 0: expected a size > 0", i, name);
        return UVMRT_ERR_INVALID;
    }
    if (d->size_bytes > UVMRT_TENSOR_MAX_BYTES) {
        LOG_ERROR(&ctx->log, "tensor %zu '%s': size_bytes %zu: expected at most %zu (1 PiB)", i, name, d->size_bytes,
                  UVMRT_TENSOR_MAX_BYTES);
        return UVMRT_ERR_INVALID;
    }
    if (d->layer < -1 || d->layer >= ctx->tensors.n_layers) {
        LOG_ERROR(&ctx->log, "tensor %zu '%s': layer %d does not exist: expected -1 or 0..%d", i, name,
                  d->layer, ctx->tensors.n_layers - 1);
        return UVMRT_ERR_INVALID;
    }
    if ((unsigned)d->role >= UVMRT_ROLE_COUNT) {
        LOG_ERROR(&ctx->log, "tensor %zu '%s': role %d: expected a uvmrt_role_t value", i, name, (int)d->role);
        return UVMRT_ERR_INVALID;
    }
    return UVMRT_OK;
}

/* The host bytes the tensors need at least, with `more` bytes more and `except` back
 * from the disk tier: what the device budget cannot hold of those in memory, the
 * window of the disk tier's copies, and the declared host bytes. */
static uint64_t need_min(const uvmrt_context_t *ctx, uint64_t more, uint64_t host_external,
                         const uvmrt_tensor_t *except)
{
    uint64_t off, window;
    uvmrt__tier_host(ctx, except, &off, &window);
    uint64_t a = ctx->tensors.allocated_bytes + more - off, b = uvmrt__plan_budget(ctx);
    if (ctx->cfg.policy == UVMRT_POLICY_NONE) b = ctx->budget;
    return (a > b ? a - b : 0) + window + host_external;
}

uint64_t uvmrt__host_need_min(const uvmrt_context_t *ctx, uint64_t more, uint64_t host_external)
{
    return need_min(ctx, more, host_external, NULL);
}

uint64_t uvmrt__host_need_except(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t)
{
    return need_min(ctx, 0, ctx->choice.host_external_bytes, t);
}

/* The new arenas (n of them, bytes[]) keep the host need within the host budget, or
 * UVMRT_ERR_BUDGET with what is needed where and what would make it fit. */
static uvmrt_status_t host_fits(uvmrt_context_t *ctx, const size_t *bytes, size_t n)
{
    uint64_t more = 0;
    for (size_t i = 0; i < n; i++) more += bytes[i];
    uint64_t need = uvmrt__host_need_min(ctx, more, ctx->choice.host_external_bytes);
    if (ctx->host_budget == 0 || need <= ctx->host_budget) return UVMRT_OK; /* 0: no limit */
    uint64_t total = ctx->tensors.allocated_bytes + more, gpu = uvmrt__plan_budget(ctx);
    uint64_t over = need - ctx->host_budget;
    LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc: %.2f GiB of tensors (%.2f GiB in this call) with a GPU budget of "
                         "%.2f GiB need %.2f GiB of host memory (%.2f GiB declared outside uvmrt), over the host "
                         "budget of %.2f GiB: it fits with a host budget of at least %.2f GiB (UVMRT_HOST_BUDGET, "
                         "--host-budget), a GPU budget of %.2f GiB, or %.2f GiB less of tensors",
              total / GIB_D, more / GIB_D, gpu / GIB_D, need / GIB_D, ctx->choice.host_external_bytes / GIB_D,
              ctx->host_budget / GIB_D, need / GIB_D, (gpu + over) / GIB_D, over / GIB_D);
    return UVMRT_ERR_BUDGET;
}

uvmrt_status_t uvmrt_tensors_alloc(uvmrt_context_t *ctx, size_t n, const uvmrt_tensor_desc_t *descs,
                                   uvmrt_tensor_t **out)
{
    if (ctx == NULL || descs == NULL || out == NULL || n == 0) {
        if (ctx) LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc: n = %zu, descs %s, out %s: expected n > 0 "
                                      "and both arrays", n, descs ? "set" : "NULL", out ? "set" : "NULL");
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc inside a step: allocate before uvmrt_step_begin");
        return UVMRT_ERR_STATE;
    }
    if (n > (size_t)(INT_MAX - ctx->tensors.n)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc: n = %zu: expected at most %d more tensors in this context", n,
                  INT_MAX - ctx->tensors.n);
        return UVMRT_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        uvmrt_status_t st = check_desc(ctx, &descs[i], i);
        if (st != UVMRT_OK) return st;
    }
    /* Lay out: one arena per distinct layer, in order of first appearance. */
    size_t *offset = calloc(n, sizeof *offset);
    int *arena_of = calloc(n, sizeof *arena_of);
    size_t *arena_bytes = calloc(n, sizeof *arena_bytes);
    int *arena_layer = calloc(n, sizeof *arena_layer);
    void **arena_base = calloc(n, sizeof *arena_base);
    uvmrt_tensor_t **made = calloc(n, sizeof *made);
    int n_new = 0;
    uvmrt_status_t st = UVMRT_ERR_NOMEM;
    /* the call's arena of each layer (layer + 1: -1 is one too), + 1; 0: none yet */
    int *arena_by_layer = calloc((size_t)ctx->tensors.n_layers + 2, sizeof *arena_by_layer);
    if (!offset || !arena_of || !arena_bytes || !arena_layer || !arena_base || !made || !arena_by_layer) {
        free(arena_by_layer);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        int a = arena_by_layer[descs[i].layer + 1] - 1;
        if (a < 0) {
            a = n_new;
            arena_layer[n_new++] = descs[i].layer;
            arena_by_layer[descs[i].layer + 1] = n_new;
        }
        size_t al = align_of(descs[i].size_bytes);
        offset[i] = round_up(arena_bytes[a], al);
        arena_bytes[a] = offset[i] + round_up(descs[i].size_bytes, al); /* each term <= 2^52 + 2^50: no wrap */
        arena_of[i] = a;
        if (arena_bytes[a] > UVMRT_ARENA_MAX_BYTES) {
            LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc: the tensors of layer %d add up to more than %zu bytes "
                                 "(at tensor %zu '%s'): expected at most 4 PiB per layer and call",
                      descs[i].layer, UVMRT_ARENA_MAX_BYTES, i, descs[i].name ? descs[i].name : "(unnamed)");
            st = UVMRT_ERR_INVALID;
            free(arena_by_layer);
            goto fail;
        }
    }
    free(arena_by_layer);
    if ((st = host_fits(ctx, arena_bytes, (size_t)n_new)) != UVMRT_OK) goto fail;
    st = UVMRT_ERR_NOMEM;
    uvmrt_tensor_table_t *tt = &ctx->tensors;
    if (grow((void **)&tt->arenas, &tt->cap_arenas, tt->n_arenas + n_new, sizeof *tt->arenas) ||
        grow((void **)&tt->by_id, &tt->cap, tt->n + (int)n, sizeof *tt->by_id) ||
        index_reserve(tt, (size_t)tt->n + n) != 0 || bits_reserve(tt, (size_t)tt->n + n) != 0)
        goto fail;
    for (int a = 0; a < n_new; a++) {
        arena_bytes[a] = round_up(arena_bytes[a], UVMRT_BLOCK);
        st = uvmrt__be_alloc(ctx, arena_bytes[a], &arena_base[a]);
        if (st != UVMRT_OK) {
            LOG_ERROR(&ctx->log, "allocating an arena of %zu bytes for layer %d failed: %s", arena_bytes[a],
                      arena_layer[a], uvmrt_status_str(st));
            goto fail;
        }
    }
    st = UVMRT_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        uvmrt_tensor_t *t = calloc(1, sizeof *t);
        char fallback[32];
        snprintf(fallback, sizeof fallback, "tensor%d", ctx->tensors.n + (int)i);
        if (t == NULL || (t->name = strdup(descs[i].name ? descs[i].name : fallback)) == NULL) {
            free(t);
            goto fail;
        }
        made[i] = t;
    }
    for (size_t i = 0; i < n; i++) {
        int layer = descs[i].layer;
        if (layer >= 0) {
            uvmrt_layer_t *L = &ctx->tensors.layers[layer];
            /* room for every tensor of this call in its layer (n at most), not one more */
            if (grow((void **)&L->owned, &L->cap_owned, L->n_owned + (int)n, sizeof *L->owned)) goto fail;
        }
    }
    /* Nothing can fail from here on: commit. */
    for (int a = 0; a < n_new; a++)
        ctx->tensors.arenas[ctx->tensors.n_arenas + a] = (uvmrt_arena_t){arena_base[a], arena_bytes[a], 0};
    for (size_t i = 0; i < n; i++) {
        uvmrt_tensor_t *t = made[i];
        int a = ctx->tensors.n_arenas + arena_of[i];
        t->magic = UVMRT_TENSOR_MAGIC;
        t->ctx = ctx;
        t->id = ctx->tensors.n++;
        t->layer = descs[i].layer;
        t->role = descs[i].role;
        t->size = descs[i].size_bytes;
        t->footprint = round_up(t->size, align_of(t->size));
        t->arena = a;
        t->offset = offset[i];
        t->ptr = (char *)ctx->tensors.arenas[a].base + offset[i];
        t->dead = 1;
        ctx->tensors.arenas[a].live_tensors++;
        ctx->tensors.by_id[t->id] = t;
        index_put(ctx->tensors.index, ctx->tensors.index_cap, (uintptr_t)t);
        ctx->tensors.allocated_bytes += t->footprint;
        if (t->layer >= 0) {
            uvmrt_layer_t *L = &ctx->tensors.layers[t->layer];
            L->owned[L->n_owned++] = t->id;
        }
        out[i] = t;
    }
    ctx->tensors.n_arenas += n_new;
    uvmrt__host_note(ctx);
    uvmrt__sched_tensors_added(ctx);
    st = UVMRT_OK;
    goto done;
fail:
    for (int a = 0; a < n_new; a++)
        if (arena_base[a]) uvmrt__be_free(ctx, arena_base[a], arena_bytes[a]);
    for (size_t i = 0; made && i < n; i++)
        if (made[i]) {
            free(made[i]->name);
            free(made[i]);
        }
    if (st == UVMRT_ERR_NOMEM) LOG_ERROR(&ctx->log, "uvmrt_tensors_alloc: out of memory");
done:
    free(offset);
    free(arena_of);
    free(arena_bytes);
    free(arena_layer);
    free(arena_base);
    free(made);
    return st;
}

uvmrt_status_t uvmrt_tensor_alloc(uvmrt_context_t *ctx, const uvmrt_tensor_desc_t *desc, uvmrt_tensor_t **out)
{
    return uvmrt_tensors_alloc(ctx, 1, desc, out);
}

uvmrt_status_t uvmrt_tensor_free(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor)
{
    if (tensor == NULL) return UVMRT_OK;
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, tensor);
    if (t == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_free(%p): not a live tensor of this context (freed twice?)",
                  (void *)tensor);
        return UVMRT_ERR_NOT_FOUND;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_free('%s') inside a step: free after uvmrt_step_end", t->name);
        return UVMRT_ERR_STATE;
    }
    uvmrt_arena_t *a = &ctx->tensors.arenas[t->arena];
    if (t->resident) {
        /* Its pages must leave the device too when the arena stays (contents are
         * dead: discard, after the last work that used them). */
        if (a->live_tensors > 1) {
            uvmrt_status_t st = uvmrt__exec_release(ctx, t);
            if (st != UVMRT_OK) {
                LOG_ERROR(&ctx->log, "uvmrt_tensor_free('%s'): not freed: dropping its pages from the device "
                                     "failed (%s); it is still allocated", t->name, uvmrt_status_str(st));
                return st;
            }
        }
        ctx->tensors.allocated_bytes -= t->footprint; /* first: the host bytes never rise here */
        uvmrt__resident_add(ctx, -(int64_t)t->footprint);
    } else {
        ctx->tensors.allocated_bytes -= t->footprint;
    }
    uvmrt__tier_forget(ctx, t); /* its file goes with it */
    if (t->pinned != NULL) uvmrt__be_host_free(ctx, t->pinned, t->footprint);
    t->pinned = NULL;
    if (t->layer >= 0) {
        uvmrt_layer_t *L = &ctx->tensors.layers[t->layer];
        for (int i = 0; i < L->n_owned; i++)
            if (L->owned[i] == t->id) {
                memmove(&L->owned[i], &L->owned[i + 1], (size_t)(L->n_owned - i - 1) * sizeof *L->owned);
                L->n_owned--;
                break;
            }
    }
    if (--a->live_tensors == 0) {
        uvmrt__be_free(ctx, a->base, a->bytes);
        a->base = NULL;
    }
    t->magic = 0; /* kept until the context goes, so a second free is caught */
    uvmrt__tensor_set_resident(ctx, t, 0);
    uvmrt__sched_tensor_freed(ctx); /* the record and plan name this tensor: start over */
    return UVMRT_OK;
}

void uvmrt__tensors_release_all(uvmrt_context_t *ctx)
{
    for (int i = 0; i < ctx->tensors.n_arenas; i++)
        if (ctx->tensors.arenas[i].base) uvmrt__be_free(ctx, ctx->tensors.arenas[i].base, ctx->tensors.arenas[i].bytes);
    for (int i = 0; i < ctx->tensors.n; i++) {
        if (ctx->tensors.by_id[i]->pinned != NULL)
            uvmrt__be_host_free(ctx, ctx->tensors.by_id[i]->pinned, ctx->tensors.by_id[i]->footprint);
        free(ctx->tensors.by_id[i]->name);
        free(ctx->tensors.by_id[i]);
    }
    free(ctx->tensors.by_id);
    free(ctx->tensors.arenas);
    free(ctx->tensors.index);
    free(ctx->tensors.res_bits);
    free(ctx->tensors.res_sum);
    ctx->tensors.res_bits = ctx->tensors.res_sum = NULL;
    ctx->tensors.res_words = 0;
    ctx->tensors.index = NULL;
    ctx->tensors.index_cap = 0;
    ctx->tensors.by_id = NULL;
    ctx->tensors.arenas = NULL;
    ctx->tensors.n = ctx->tensors.n_arenas = 0;
}

void uvmrt__describe_ptr(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len)
{
    for (int i = 0; i < ctx->tensors.n_arenas; i++) {
        const char *b = ctx->tensors.arenas[i].base;
        if (b && (const char *)ptr >= b && (const char *)ptr < b + ctx->tensors.arenas[i].bytes) {
            snprintf(buf, len, "a%d+0x%zx", i, (size_t)((const char *)ptr - b));
            return;
        }
    }
    snprintf(buf, len, "%p", ptr);
}

void *uvmrt_tensor_ptr(const uvmrt_tensor_t *t)
{
    if (t == NULL || t->magic != UVMRT_TENSOR_MAGIC) return NULL;
    return t->pinned ? t->pinned : t->ptr;
}
size_t uvmrt_tensor_size(const uvmrt_tensor_t *t) { return t && t->magic == UVMRT_TENSOR_MAGIC ? t->size : 0; }
const char *uvmrt_tensor_name(const uvmrt_tensor_t *t) { return t ? t->name : NULL; }
int uvmrt_tensor_layer(const uvmrt_tensor_t *t) { return t ? t->layer : -1; }
uvmrt_role_t uvmrt_tensor_role(const uvmrt_tensor_t *t) { return t ? t->role : UVMRT_ROLE_WORKSPACE; }
int uvmrt_tensor_is_resident(const uvmrt_tensor_t *t) { return t && t->magic == UVMRT_TENSOR_MAGIC && t->resident; }
/* The managed slot's pages on the host, after its last use, before the CPU copies out
 * of or into it. Without it the copy faults each 4 KiB page in on its own: a discarded
 * slot, 2.47 M CPU faults and about 90 s for 9.4 GB (session 30, the binding's 16 GiB
 * row unpinning 19 layers' state). */
static uvmrt_status_t slot_to_host(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_status_t st = uvmrt__ring_wait(ctx, ctx->ev.d2h_stream, t->last_use);
    return st == UVMRT_OK ? uvmrt__be_move_wait(ctx, &r, 1, UVMRT_LOC_HOST, ctx->ev.d2h_stream) : st;
}

/* To page-locked memory of its own (UVMRT_PLACE_PINNED): allocated first, then the
 * contents made host-readable (a resident tensor moved out as any host-homing moves it,
 * another's slot brought over in bulk) and copied, the address switched, and the
 * managed slot's pages dropped (discard: on CUDA 12, which cannot, they go to the host
 * and stay; a failure there is counted, the tensor is pinned all the same). */
static uvmrt_status_t pin(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    void *p = NULL;
    uvmrt_status_t st = t->resident ? UVMRT_OK : slot_to_host(ctx, t);
    if (st == UVMRT_OK) st = uvmrt__be_host_alloc(ctx, t->footprint, &p);
    if (st == UVMRT_OK) st = uvmrt__exec_host_now(ctx, t);
    if (st != UVMRT_OK) {
        if (p != NULL) uvmrt__be_host_free(ctx, p, t->footprint);
        return st;
    }
    memcpy(p, t->ptr, t->size); /* host writes through the pointer are not seen: always */
    t->pinned = p;
    t->placed_host = 1;
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt__be_absorb(ctx, "discard (pinned tensor's managed slot)", uvmrt__be_discard(ctx, &r, 1, ctx->ev.d2h_stream));
    return UVMRT_OK;
}

/* From page-locked memory back to its managed address, placed host or auto: the
 * slot's pages brought to the host in bulk (its discard undone by a prefetch, stream
 * ordered after it), the contents copied back, then the placement; on failure still
 * pinned. */
static uvmrt_status_t unpin(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int host)
{
    uvmrt_status_t sync = slot_to_host(ctx, t);
    if (sync != UVMRT_OK) return sync;
    memcpy(t->ptr, t->pinned, t->size);
    uvmrt_status_t st = host ? uvmrt__exec_place(ctx, t, 1) : UVMRT_OK;
    if (st != UVMRT_OK) return st;
    if (!host) (void)uvmrt__exec_place(ctx, t, 0); /* cannot fail: accounting only */
    uvmrt__be_host_free(ctx, t->pinned, t->footprint);
    t->pinned = NULL;
    return UVMRT_OK;
}

static const char *const PLACE_NAMES[] = {"auto", "host", "pinned"};

uvmrt_status_t uvmrt_tensor_set_placement(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor,
                                          uvmrt_placement_t placement)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, tensor);
    if (t == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_placement(%p): not a live tensor of this context", (void *)tensor);
        return UVMRT_ERR_NOT_FOUND;
    }
    if ((unsigned)placement > UVMRT_PLACE_PINNED) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_placement('%s'): placement %d: expected UVMRT_PLACE_AUTO, "
                             "UVMRT_PLACE_HOST or UVMRT_PLACE_PINNED", t->name, (int)placement);
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_placement('%s') inside a step: place tensors between steps", t->name);
        return UVMRT_ERR_STATE;
    }
    /* a rehearsal's model: page-locked memory is modelled as the host placement (the sim
     * times both alike), without allocating or copying the tensor: nobody reads it, and
     * a real copy per rehearsal cost a 1.56B model's start minutes and gigabytes */
    if (ctx->model && placement == UVMRT_PLACE_PINNED) placement = UVMRT_PLACE_HOST;
    uvmrt_placement_t now = uvmrt_tensor_placement(t);
    if (now == placement) return UVMRT_OK;
    if (t->on_disk) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_placement('%s', %s): the tensor is on the disk tier: expected "
                             "uvmrt_tensor_set_tier(UVMRT_TIER_MEMORY) first", t->name, PLACE_NAMES[placement]);
        return UVMRT_ERR_STATE;
    }
    uvmrt_status_t st;
    if (placement == UVMRT_PLACE_PINNED) st = pin(ctx, t);
    else if (now == UVMRT_PLACE_PINNED) st = unpin(ctx, t, placement == UVMRT_PLACE_HOST);
    else st = uvmrt__exec_place(ctx, t, placement == UVMRT_PLACE_HOST);
    if (st != UVMRT_OK)
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_placement('%s', %s): placement unchanged: %s", t->name,
                  PLACE_NAMES[placement], uvmrt_status_str(st));
    if (st == UVMRT_OK) { /* the plan assumed the old placement */
        uvmrt__plan_drop(ctx);
    }
    return st;
}

uvmrt_placement_t uvmrt_tensor_placement(const uvmrt_tensor_t *t)
{
    if (t == NULL || t->magic != UVMRT_TENSOR_MAGIC || !t->placed_host) return UVMRT_PLACE_AUTO;
    return t->pinned ? UVMRT_PLACE_PINNED : UVMRT_PLACE_HOST;
}

int uvmrt_tensor_is_host_homed(const uvmrt_tensor_t *t)
{
    return t && t->magic == UVMRT_TENSOR_MAGIC && t->host_homed;
}

/* ------------------------------------------------------------------ recompute */
uvmrt_status_t uvmrt_tensor_set_recompute(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor, double flops)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, tensor);
    if (t == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_recompute(%p): not a live tensor of this context", (void *)tensor);
        return UVMRT_ERR_NOT_FOUND;
    }
    if (!(flops >= 0) || isinf(flops)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_recompute('%s'): flops %g: expected a finite number >= 0 (0: not "
                             "recomputable)", t->name, flops);
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_recompute('%s') inside a step: declare it between steps", t->name);
        return UVMRT_ERR_STATE;
    }
    t->recompute_flops = flops;
    return UVMRT_OK;
}

double uvmrt_tensor_recompute_flops(const uvmrt_tensor_t *t)
{
    return t && t->magic == UVMRT_TENSOR_MAGIC ? t->recompute_flops : 0.0;
}

/* a before b in the recompute order */
static int recompute_before(const uvmrt_tensor_t *a, const uvmrt_tensor_t *b)
{
    double ra = (double)a->footprint / a->recompute_flops, rb = (double)b->footprint / b->recompute_flops;
    if (ra != rb) return ra > rb;
    unsigned la = (unsigned)a->layer, lb = (unsigned)b->layer; /* -1: last */
    if (la != lb) return la < lb;
    return a->id < b->id;
}

static int recomputable(const uvmrt_tensor_t *t) { return t->magic == UVMRT_TENSOR_MAGIC && t->recompute_flops > 0; }

int uvmrt__recomputable_count(const uvmrt_context_t *ctx)
{
    int n = 0;
    for (int id = 0; id < ctx->tensors.n; id++) n += recomputable(ctx->tensors.by_id[id]);
    return n;
}

int uvmrt__recompute_rank(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t)
{
    if (!recomputable(t)) return -1;
    int rank = 0;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *o = ctx->tensors.by_id[id];
        rank += o != t && recomputable(o) && recompute_before(o, t);
    }
    return rank;
}

/* ------------------------------------------------------------------ layers */
uvmrt_status_t uvmrt_layer_add(uvmrt_context_t *ctx, const char *name, int *out_layer)
{
    if (ctx == NULL || name == NULL || out_layer == NULL) {
        if (ctx) LOG_ERROR(&ctx->log, "uvmrt_layer_add: name and out_layer must not be NULL");
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_layer_add('%s') inside a step: declare layers before uvmrt_step_begin", name);
        return UVMRT_ERR_STATE;
    }
    if (ctx->tensors.n_layers == ctx->tensors.cap_layers) {
        int cap = ctx->tensors.cap_layers ? 2 * ctx->tensors.cap_layers : 16;
        uvmrt_layer_t *l = realloc(ctx->tensors.layers, (size_t)cap * sizeof *l);
        if (l == NULL) return UVMRT_ERR_NOMEM;
        ctx->tensors.layers = l;
        ctx->tensors.cap_layers = cap;
    }
    uvmrt_layer_t *L = &ctx->tensors.layers[ctx->tensors.n_layers];
    memset(L, 0, sizeof *L);
    if ((L->name = strdup(name)) == NULL) return UVMRT_ERR_NOMEM;
    *out_layer = ctx->tensors.n_layers++;
    return UVMRT_OK;
}

int uvmrt_layer_count(const uvmrt_context_t *ctx) { return ctx ? ctx->tensors.n_layers : 0; }

uvmrt_status_t uvmrt_host_work_measured(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t ns)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (layer < 0 || layer >= ctx->tensors.n_layers) {
        LOG_ERROR(&ctx->log, "uvmrt_host_work_measured: layer %d: expected a declared layer, 0 to %d", layer,
                  ctx->tensors.n_layers - 1);
        return UVMRT_ERR_INVALID;
    }
    if ((int)phase < 0 || phase >= UVMRT_PHASE_COUNT) {
        LOG_ERROR(&ctx->log, "uvmrt_host_work_measured: layer '%s': phase %d: expected forward, backward or optimizer",
                  ctx->tensors.layers[layer].name, (int)phase);
        return UVMRT_ERR_INVALID;
    }
    if (ns == 0 || (double)ns > 1e18) {
        LOG_ERROR(&ctx->log, "uvmrt_host_work_measured: layer '%s' %s: ns %llu: expected 1 to 1e18",
                  ctx->tensors.layers[layer].name, uvmrt_phase_name(phase), (unsigned long long)ns);
        return UVMRT_ERR_INVALID;
    }
    ctx->tensors.layers[layer].host_measured_ns[phase] = ns;
    return UVMRT_OK;
}

void uvmrt__layers_free(uvmrt_context_t *ctx)
{
    uvmrt_tensor_table_t *tt = &ctx->tensors;
    for (int i = 0; i < tt->n_layers; i++) {
        free(tt->layers[i].name);
        free(tt->layers[i].owned);
    }
    free(tt->layers);
    tt->layers = NULL;
    tt->n_layers = tt->cap_layers = 0;
}
