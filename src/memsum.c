/*
 * memsum.c -- the memory summary (like torch.cuda.memory_summary()): every live
 * tensor with its bytes, where its pages are and the mechanism the plan gives
 * it; totals per role; current and peak resident bytes and the peak's reset;
 * the report sections that print them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "abi.h"
#include "exec.h"
#include "memsum.h"
#include "report.h"

#define MIB (1024.0 * 1024.0)

/* ------------------------------------------------------------------ names */
const char *uvmrt_where_name(uvmrt_where_t where)
{
    switch (where) {
    case UVMRT_WHERE_DEVICE: return "device";
    case UVMRT_WHERE_HOST: return "host";
    case UVMRT_WHERE_SPLIT: return "split";
    }
    return "?";
}

static const char *const mech_names[] = {"managed", "demand", "resident", "prefetch",
                                         "write-back", "discard", "host-homed", "unused", "recompute"};

size_t uvmrt_mechanism_name(unsigned mech, char *buf, size_t len)
{
    size_t total = 0;
    if (buf != NULL && len > 0) buf[0] = '\0';
    for (unsigned b = 0; b < sizeof mech_names / sizeof mech_names[0]; b++) {
        if (!(mech & (1u << b))) continue;
        const char *sep = total ? "+" : "";
        int k = snprintf(buf && total < len ? buf + total : NULL, buf && total < len ? len - total : 0, "%s%s", sep,
                         mech_names[b]);
        total += (size_t)k;
    }
    if (total == 0) total = (size_t)snprintf(buf, buf ? len : 0, "none");
    return total;
}

void uvmrt__copy_utf8(char *dst, size_t cap, const char *src)
{
    if (cap == 0) return;
    size_t n = strlen(src);
    if (n >= cap) {
        n = cap - 1;
        /* back up over continuation bytes so no character is cut in half */
        while (n > 0 && ((unsigned char)src[n] & 0xC0) == 0x80) n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------------------ mechanisms */
static unsigned action_bit(int kind)
{
    switch (kind) {
    case UVMRT_ACT_PREFETCH: return UVMRT_MECH_PREFETCH;
    case UVMRT_ACT_EVICT: return UVMRT_MECH_WRITEBACK;
    case UVMRT_ACT_DISCARD: return UVMRT_MECH_DISCARD;
    }
    return 0;
}

void uvmrt__mechanisms(const uvmrt_context_t *ctx, uint16_t *bits)
{
    int n = ctx->tensors.n;
    if (n <= 0) return;
    memset(bits, 0, (size_t)n * sizeof *bits);
    int planned = ctx->cfg.policy == UVMRT_POLICY_PREFETCH && ctx->sched.have_plan;
    if (planned) {
        for (size_t i = 0; i < ctx->sched.plan.n_actions; i++) {
            int id = ctx->sched.plan.actions[i].tensor;
            if (id >= 0 && id < n) bits[id] |= (uint16_t)action_bit(ctx->sched.plan.actions[i].kind);
        }
        for (size_t u = 0; u < ctx->sched.record.n_uses; u++) {
            int id = ctx->sched.record.use_tensor[u];
            if (id >= 0 && id < n) bits[id] |= UVMRT__MECH_USED;
        }
    }
    for (int id = 0; id < n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        unsigned b = bits[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) b = 0;
        else if (ctx->cfg.policy == UVMRT_POLICY_NONE) b = UVMRT_MECH_MANAGED;
        else if (t->host_homed) b = UVMRT_MECH_HOST_HOMED;
        else if (!planned) b = UVMRT_MECH_DEMAND;
        else if (b & (UVMRT_MECH_PREFETCH | UVMRT_MECH_WRITEBACK | UVMRT_MECH_DISCARD)) b &= ~UVMRT__MECH_USED;
        else if (id < ctx->sched.plan.n_tensors && ctx->sched.plan.start_resident[id]) b = UVMRT_MECH_RESIDENT;
        else if (b & UVMRT__MECH_USED) b = UVMRT_MECH_DEMAND; /* the plan never brings it: the late path does */
        else b = UVMRT_MECH_UNUSED;
        if (b != 0 && uvmrt_tensor_recomputes(ctx, t)) b |= UVMRT_MECH_RECOMPUTE;
        bits[id] = (uint16_t)b;
    }
}

uvmrt_where_t uvmrt__tensor_where(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t)
{
    if (t->host_homed) return UVMRT_WHERE_HOST;
    uvmrt_evref_t ref = t->resident ? t->ready : t->leaving;
    /* An event older than the ring is complete (events.c). Querying one changes
     * nothing in the context: the cast only satisfies the front end's signature. */
    if (ref != 0 && ctx->ev.ring_next - ref <= UVMRT_EVENT_RING && ctx->ev.ring[ref % UVMRT_EVENT_RING] != NULL &&
        !uvmrt__be_event_done((uvmrt_context_t *)ctx, ctx->ev.ring[ref % UVMRT_EVENT_RING]))
        return UVMRT_WHERE_SPLIT;
    return t->resident ? UVMRT_WHERE_DEVICE : UVMRT_WHERE_HOST;
}

/* ------------------------------------------------------------------ the public calls */
static size_t live_tensors(const uvmrt_context_t *ctx)
{
    size_t k = 0;
    for (int id = 0; id < ctx->tensors.n; id++) k += ctx->tensors.by_id[id]->magic == UVMRT_TENSOR_MAGIC;
    return k;
}

static void info_of(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t, unsigned mech, uvmrt_tensor_info_t *o)
{
    memset(o, 0, sizeof *o);
    uvmrt__copy_utf8(o->name, sizeof o->name, t->name ? t->name : "");
    o->id = t->id;
    o->layer = t->layer;
    o->role = t->role;
    o->size_bytes = t->size;
    o->footprint_bytes = t->footprint;
    o->where = uvmrt__tensor_where(ctx, t);
    o->mechanism = mech;
}

uvmrt_status_t uvmrt_memory_summary(const uvmrt_context_t *ctx, uvmrt_tensor_info_t *out, size_t cap, size_t *n)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (n == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_memory_summary: n is NULL: expected a size_t to receive the tensor count");
        return UVMRT_ERR_INVALID;
    }
    if (out == NULL && cap > 0) {
        LOG_ERROR(&ctx->log, "uvmrt_memory_summary: out is NULL with cap %zu: expected an array of cap "
                             "uvmrt_tensor_info_t (or cap 0 to ask for the count)",
                  cap);
        return UVMRT_ERR_INVALID;
    }
    /* out[0].struct_size: the caller's sizeof(uvmrt_tensor_info_t), the array's stride */
    if (cap > 0 && UVMRT__ABI_CHECK(&ctx->log, "uvmrt_memory_summary", uvmrt_tensor_info_t, &out[0]) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    size_t live = live_tensors(ctx);
    if (out == NULL) {
        *n = live;
        return UVMRT_OK;
    }
    if (cap < live) {
        LOG_ERROR(&ctx->log, "uvmrt_memory_summary: cap %zu is less than the %zu live tensors: expected at "
                             "least %zu (*n says how many)",
                  cap, live, live);
        *n = live;
        return UVMRT_ERR_INVALID;
    }
    uint16_t *bits = malloc((ctx->tensors.n > 0 ? (size_t)ctx->tensors.n : 1) * sizeof *bits);
    if (bits == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_memory_summary: out of memory for %d tensors' mechanisms", ctx->tensors.n);
        return UVMRT_ERR_NOMEM;
    }
    uvmrt__mechanisms(ctx, bits);
    size_t k = 0, stride = cap > 0 ? UVMRT__SIZE_OF(&out[0]) : 0; /* cap 0: no live tensor to write */
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        uvmrt_tensor_info_t full;
        info_of(ctx, t, bits[id], &full);
        uvmrt__abi_write((char *)out + k++ * stride, &full, stride);
    }
    free(bits);
    *n = k;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_memory_stats_get(const uvmrt_context_t *ctx, uvmrt_memory_stats_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_memory_stats_get: out is NULL: expected a uvmrt_memory_stats_t");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_memory_stats_get", uvmrt_memory_stats_t, out) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    uvmrt_memory_stats_t m;
    memset(&m, 0, sizeof m);
    m.budget_bytes = ctx->budget;
    m.resident_bytes = ctx->res.bytes;
    m.peak_resident_bytes = ctx->res.peak_bytes;
    m.allocated_bytes = ctx->tensors.allocated_bytes;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        unsigned r = (unsigned)t->role < UVMRT_ROLE_COUNT ? (unsigned)t->role : 0;
        m.tensors++;
        m.role_tensors[r]++;
        m.role_size_bytes[r] += t->size;
        m.role_footprint_bytes[r] += t->footprint;
        if (t->resident) m.role_resident_bytes[r] += t->footprint;
        if (t->host_homed) m.host_homed_bytes += t->footprint;
    }
    m.host_bytes = uvmrt__host_bytes(ctx);
    m.peak_host_bytes = ctx->res.host_peak_bytes;
    m.host_budget_bytes = ctx->host_budget;
    m.host_external_bytes = ctx->choice.host_external_bytes;
    m.plan_host_bytes = uvmrt__plan_host_bytes(ctx);
    UVMRT__ABI_WRITE(out, &m);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_memory_peak_reset(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt__resident_peak_reset(ctx);
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ report sections */
void uvmrt__memsum_layer_host(const uvmrt_context_t *ctx, int l, uint64_t *now, uint64_t *plan)
{
    *now = *plan = 0;
    const uvmrt_layer_t *L = &ctx->tensors.layers[l];
    for (int i = 0; i < L->n_owned; i++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[L->owned[i]];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (!t->resident) *now += t->footprint;
        if (ctx->sched.have_plan && ctx->sched.plan_off_gpu && t->id < ctx->sched.plan.n_tensors &&
            ctx->sched.plan_off_gpu[t->id])
            *plan += t->footprint;
    }
}

static void host_text(const uvmrt_context_t *ctx, const uvmrt_memory_stats_t *m, FILE *f)
{
    char hb[32] = "none";
    if (m->host_budget_bytes) snprintf(hb, sizeof hb, "%.1f MiB", m->host_budget_bytes / MIB);
    fprintf(f, "host memory: now %.1f MiB, peak %.1f MiB, the plan's need %.1f MiB, declared outside uvmrt %.1f MiB, "
               "host budget %s\n",
            m->host_bytes / MIB, m->peak_host_bytes / MIB, m->plan_host_bytes / MIB, m->host_external_bytes / MIB, hb);
    if (ctx->tensors.n_layers == 0) return;
    fprintf(f, "%-16s %12s %12s\n", "layer", "host MiB", "plan host");
    for (int l = 0; l < ctx->tensors.n_layers; l++) {
        uint64_t now, plan;
        uvmrt__memsum_layer_host(ctx, l, &now, &plan);
        char *lname = uvmrt__report_text_name(ctx->tensors.layers[l].name, 16);
        if (lname != NULL) fprintf(f, "%s %12.1f %12.1f\n", lname, now / MIB, plan / MIB);
        free(lname);
    }
}

void uvmrt__memsum_text(const uvmrt_context_t *ctx, FILE *f)
{
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    if (uvmrt_memory_stats_get(ctx, &m) != UVMRT_OK) return;
    fprintf(f, "\nmemory: budget %.1f MiB, resident now %.1f MiB, peak %.1f MiB, tensors %.1f MiB (%llu), "
               "kept in host memory %.1f MiB\n",
            m.budget_bytes / MIB, m.resident_bytes / MIB, m.peak_resident_bytes / MIB, m.allocated_bytes / MIB,
            (unsigned long long)m.tensors, m.host_homed_bytes / MIB);
    fprintf(f, "%-16s %8s %12s %12s %12s\n", "role", "tensors", "size MiB", "footprint", "resident");
    for (int r = 0; r < UVMRT_ROLE_COUNT; r++) {
        if (m.role_tensors[r] == 0) continue;
        fprintf(f, "%-16s %8llu %12.1f %12.1f %12.1f\n", uvmrt_role_name((uvmrt_role_t)r),
                (unsigned long long)m.role_tensors[r], m.role_size_bytes[r] / MIB, m.role_footprint_bytes[r] / MIB,
                m.role_resident_bytes[r] / MIB);
    }
    host_text(ctx, &m, f);
    size_t n = 0;
    if (uvmrt_memory_summary(ctx, NULL, 0, &n) != UVMRT_OK || n == 0) return;
    uvmrt_tensor_info_t *ti = malloc(n * sizeof *ti);
    if (ti != NULL) ti[0].struct_size = sizeof *ti;
    if (ti == NULL || uvmrt_memory_summary(ctx, ti, n, &n) != UVMRT_OK) {
        fprintf(f, "(no memory for the per-tensor table)\n");
        free(ti);
        return;
    }
    fprintf(f, "%-24s %-16s %-15s %12s %-7s %s\n", "tensor", "layer", "role", "MiB", "where", "mechanism");
    for (size_t i = 0; i < n; i++) {
        char mech[96];
        uvmrt_mechanism_name(ti[i].mechanism, mech, sizeof mech);
        const char *layer = ti[i].layer >= 0 && ti[i].layer < ctx->tensors.n_layers ? ctx->tensors.layers[ti[i].layer].name : "-";
        /* names are the user's bytes: valid UTF-8, cut on a character boundary */
        char *tname = uvmrt__report_text_name(ti[i].name, 24), *lname = uvmrt__report_text_name(layer, 16);
        if (tname != NULL && lname != NULL)
            fprintf(f, "%s %s %-15s %12.2f %-7s %s\n", tname, lname, uvmrt_role_name(ti[i].role),
                    ti[i].size_bytes / MIB, uvmrt_where_name(ti[i].where), mech);
        else
            fprintf(f, "(no memory for a name)\n");
        free(tname);
        free(lname);
    }
    free(ti);
}

/* Length of the well-formed UTF-8 sequence at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    if (s[0] < 0x80) return 1;
    size_t n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (size_t k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] > 0x9F))) return 0; /* overlong, surrogate */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] > 0x8F))) return 0;
    return n;
}

/* A tensor name as a JSON string: names are the user's bytes, so a byte outside
 * a well-formed UTF-8 sequence becomes U+FFFD rather than losing the name
 * (json_string refuses invalid UTF-8). */
static json_t *json_name(const char *name)
{
    char buf[sizeof ((uvmrt_tensor_info_t *)0)->name * 3 + 1]; /* every byte may become 3 */
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            memcpy(buf + k, "\xEF\xBF\xBD", 3);
            k += 3;
            p++;
        } else {
            memcpy(buf + k, p, n);
            k += n;
            p += n;
        }
    }
    buf[k] = '\0';
    return json_string(buf);
}

/* Sets o[key] = v, consuming v; counts a failure (v NULL: no memory) in *bad. */
static void jset(json_t *o, const char *key, json_t *v, int *bad)
{
    if (o == NULL || v == NULL) {
        json_decref(v); /* json_decref(NULL) is a no-op */
        *bad = 1;
    } else if (json_object_set_new(o, key, v) != 0) { /* which consumed v */
        *bad = 1;
    }
}

static json_t *ju64(uint64_t v) { return json_integer((json_int_t)v); }

/* Every jansson call is checked: NULL when any allocation failed, so the caller
 * can fail the report with UVMRT_ERR_NOMEM rather than write it short. */
json_t *uvmrt__memsum_json(const uvmrt_context_t *ctx)
{
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    size_t n = 0;
    if (uvmrt_memory_stats_get(ctx, &m) != UVMRT_OK || uvmrt_memory_summary(ctx, NULL, 0, &n) != UVMRT_OK)
        return NULL;
    uvmrt_tensor_info_t *ti = malloc((n ? n : 1) * sizeof *ti);
    if (ti != NULL) ti[0].struct_size = sizeof *ti;
    if (ti == NULL || uvmrt_memory_summary(ctx, ti, n, &n) != UVMRT_OK) {
        free(ti);
        return NULL;
    }
    int bad = 0;
    json_t *o = json_object(), *roles = json_object(), *tensors = json_array();
    jset(o, "budget_bytes", ju64(m.budget_bytes), &bad);
    jset(o, "resident_bytes", ju64(m.resident_bytes), &bad);
    jset(o, "peak_resident_bytes", ju64(m.peak_resident_bytes), &bad);
    jset(o, "allocated_bytes", ju64(m.allocated_bytes), &bad);
    jset(o, "host_homed_bytes", ju64(m.host_homed_bytes), &bad);
    json_t *host = json_object(), *hl = json_array();
    jset(host, "bytes", ju64(m.host_bytes), &bad);
    jset(host, "peak_bytes", ju64(m.peak_host_bytes), &bad);
    jset(host, "plan_bytes", ju64(m.plan_host_bytes), &bad);
    jset(host, "external_bytes", ju64(m.host_external_bytes), &bad);
    jset(host, "budget_bytes", ju64(m.host_budget_bytes), &bad);
    for (int l = 0; l < ctx->tensors.n_layers && !bad; l++) {
        uint64_t now, plan;
        uvmrt__memsum_layer_host(ctx, l, &now, &plan);
        json_t *lo = json_object();
        char cut[sizeof ((uvmrt_tensor_info_t *)0)->name]; /* json_name's room; a cut character becomes U+FFFD */
        snprintf(cut, sizeof cut, "%s", ctx->tensors.layers[l].name);
        jset(lo, "layer", json_name(cut), &bad);
        jset(lo, "bytes", ju64(now), &bad);
        jset(lo, "plan_bytes", ju64(plan), &bad);
        if (hl == NULL) json_decref(lo);
        if (lo == NULL || hl == NULL || json_array_append_new(hl, lo) != 0) bad = 1;
    }
    jset(host, "layers", hl, &bad);
    jset(o, "host", host, &bad);
    for (int r = 0; r < UVMRT_ROLE_COUNT; r++) {
        json_t *ro = json_object();
        jset(ro, "tensors", ju64(m.role_tensors[r]), &bad);
        jset(ro, "size_bytes", ju64(m.role_size_bytes[r]), &bad);
        jset(ro, "footprint_bytes", ju64(m.role_footprint_bytes[r]), &bad);
        jset(ro, "resident_bytes", ju64(m.role_resident_bytes[r]), &bad);
        jset(roles, uvmrt_role_name((uvmrt_role_t)r), ro, &bad);
    }
    jset(o, "roles", roles, &bad);
    for (size_t i = 0; i < n && !bad; i++) {
        char mech[96];
        uvmrt_mechanism_name(ti[i].mechanism, mech, sizeof mech);
        json_t *t = json_object();
        jset(t, "name", json_name(ti[i].name), &bad);
        jset(t, "id", json_integer(ti[i].id), &bad);
        jset(t, "layer", json_integer(ti[i].layer), &bad);
        jset(t, "role", json_string(uvmrt_role_name(ti[i].role)), &bad);
        jset(t, "size_bytes", ju64(ti[i].size_bytes), &bad);
        jset(t, "footprint_bytes", ju64(ti[i].footprint_bytes), &bad);
        jset(t, "where", json_string(uvmrt_where_name(ti[i].where)), &bad);
        jset(t, "mechanism", json_string(mech), &bad);
        if (tensors == NULL) json_decref(t);
        if (t == NULL || tensors == NULL || json_array_append_new(tensors, t) != 0) bad = 1;
    }
    jset(o, "tensors", tensors, &bad);
    free(ti);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}
