/*
 * backend.c -- the front end of the backend seam: every call the library makes
 * to a backend goes through here (nothing else reads ctx->be.ops' functions). It
 *  - calls optional entries only when the table declares the capability, and
 *    supplies the default otherwise (discard -> move to host, no timing -> 0);
 *  - logs every failed call, naming the op, what it was given and the backend's
 *    own error name (cudaErrorXxx), so no backend error is silent;
 *  - counts the errors a caller absorbs (uvmrt__be_absorb: a timing event the
 *    call can complete without), per kind (op, error name), logging each kind
 *    once; the total is uvmrt_summary_t.backend_errors;
 *  - undoes what a failed multi-range move may have enqueued (compensation);
 *  - describes each data movement to the trace hook in backend-neutral terms
 *    (arena offsets, stream roles), so a scenario's traces compare equal across
 *    backends.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A capability is there when declared and its entry is set (a wrapper that
 * copies a table and clears an entry withdraws it). */
#define HAS(ctx, cap, fn) ((ctx)->be.ops->caps.cap && (ctx)->be.ops->fn != NULL)

static const char *stream_role(const uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    if (s == ctx->ev.h2d_stream) return "h2d";
    if (s == ctx->ev.d2h_stream) return "d2h";
    if (s == ctx->ev.clock_stream && s != NULL) return "clock";
    return "compute";
}

static void trace_ranges(uvmrt_context_t *ctx, const char *what, const uvmrt_range_t *r, size_t n,
                         const char *on)
{
    if (ctx->be.trace_fn == NULL) return;
    char line[4096];
    size_t len = on ? (size_t)snprintf(line, sizeof line, "%s on %s:", what, on)
                    : (size_t)snprintf(line, sizeof line, "%s:", what);
    for (size_t i = 0; i < n && len < sizeof line - 64; i++) {
        char where[64];
        if (ctx->be.describe_fn) ctx->be.describe_fn(ctx, r[i].ptr, where, sizeof where);
        else snprintf(where, sizeof where, "%p", r[i].ptr);
        len += (size_t)snprintf(line + len, sizeof line - len, " [%s %zu]", where, r[i].bytes);
    }
    ctx->be.trace_fn(ctx->be.trace_user, line);
}

/* ------------------------------------------------------------------ errors */
/* The backend's name for the failure it just reported, or the status's name. */
static const char *error_name(const uvmrt_context_t *ctx, uvmrt_status_t st)
{
    const char *n = ctx->be.ops->error_name && ctx->be.state ? ctx->be.ops->error_name(ctx->be.state) : NULL;
    return n ? n : uvmrt_status_name(st);
}

/* Logs a failed call (op and what it was given) and returns its status. */
static uvmrt_status_t failed(const uvmrt_context_t *ctx, const char *op, const char *what, uvmrt_status_t st)
{
    LOG_ERROR(&ctx->log, "backend %s: %s%s%s failed: %s (%s)", ctx->be.ops->name, op, what ? " " : "",
              what ? what : "", error_name(ctx, st), uvmrt_status_str(st));
    return st;
}

#define CHECKED(ctx, op, what, expr)                                            \
    do {                                                                        \
        uvmrt_status_t st_ = (expr);                                            \
        return st_ == UVMRT_OK ? UVMRT_OK : failed((ctx), (op), (what), st_);   \
    } while (0)

void uvmrt__be_absorb(uvmrt_context_t *ctx, const char *op, uvmrt_status_t st)
{
    if (st == UVMRT_OK) return;
    const char *name = error_name(ctx, st);
    ctx->be.errors++;
    for (int i = 0; i < ctx->be.n_kinds; i++)
        if (strcmp(ctx->be.kinds[i].op, op) == 0 && strcmp(ctx->be.kinds[i].name, name) == 0) {
            ctx->be.kinds[i].count++;
            return;
        }
    if (ctx->be.n_kinds < UVMRT_BE_KINDS) {
        uvmrt_be_kind_t *k = &ctx->be.kinds[ctx->be.n_kinds++];
        k->op = op;
        snprintf(k->name, sizeof k->name, "%s", name);
        k->count = 1;
    }
    /* once per kind: a failing timer on every call would flood the log */
    LOG_WARN(&ctx->log, "backend %s: %s failed: %s (%s); the call went on without it (timings of this "
                        "event read 0); further failures of this kind are counted in backend_errors",
             ctx->be.ops->name, op, name, uvmrt_status_str(st));
}

/* ------------------------------------------------------------------ lifecycle and memory */
uvmrt_status_t uvmrt__be_open(uvmrt_context_t *ctx, const uvmrt_backend_ops_t *ops, const uvmrt_backend_config_t *cfg)
{
    ctx->be.ops = ops; /* kept on failure too: messages name the backend */
    uvmrt_status_t st = ctx->be.ops->open(cfg, &ctx->be.state);
    if (st != UVMRT_OK) {
        ctx->be.state = NULL;
        LOG_ERROR(&ctx->log, "backend %s: open (device %d) failed: %s (%s)", ctx->be.ops->name, cfg->device,
                  uvmrt_status_name(st), uvmrt_status_str(st));
    }
    return st;
}

void uvmrt__be_close(uvmrt_context_t *ctx)
{
    if (ctx->be.state) ctx->be.ops->close(ctx->be.state);
    ctx->be.state = NULL;
}

uvmrt_status_t uvmrt__be_mem_info(uvmrt_context_t *ctx, uint64_t *free_bytes, uint64_t *total_bytes)
{
    CHECKED(ctx, "mem_info", NULL, ctx->be.ops->mem_info(ctx->be.state, free_bytes, total_bytes));
}

uvmrt_status_t uvmrt__be_alloc(uvmrt_context_t *ctx, size_t bytes, void **ptr)
{
    char what[48];
    snprintf(what, sizeof what, "(%zu bytes)", bytes);
    CHECKED(ctx, "alloc", what, ctx->be.ops->alloc(ctx->be.state, bytes, ptr));
}

void uvmrt__be_free(uvmrt_context_t *ctx, void *ptr, size_t bytes) { ctx->be.ops->free(ctx->be.state, ptr, bytes); }

uvmrt_status_t uvmrt__be_host_alloc(uvmrt_context_t *ctx, size_t bytes, void **ptr)
{
    char what[48];
    snprintf(what, sizeof what, "(%zu bytes)", bytes);
    CHECKED(ctx, "host_alloc", what, ctx->be.ops->host_alloc(ctx->be.state, bytes, ptr));
}

void uvmrt__be_host_free(uvmrt_context_t *ctx, void *ptr, size_t bytes)
{
    ctx->be.ops->host_free(ctx->be.state, ptr, bytes);
}

/* ------------------------------------------------------------------ streams and events */
uvmrt_status_t uvmrt__be_stream_create(uvmrt_context_t *ctx, uvmrt_stream_t *out)
{
    CHECKED(ctx, "stream_create", NULL, ctx->be.ops->stream_create(ctx->be.state, out));
}

void uvmrt__be_stream_destroy(uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    if (s) ctx->be.ops->stream_destroy(ctx->be.state, s);
}

uvmrt_status_t uvmrt__be_event_create(uvmrt_context_t *ctx, int timing, uvmrt_event_t *out)
{
    CHECKED(ctx, "event_create", timing ? "(timing)" : NULL, ctx->be.ops->event_create(ctx->be.state, timing, out));
}

void uvmrt__be_event_destroy(uvmrt_context_t *ctx, uvmrt_event_t ev)
{
    if (ev) ctx->be.ops->event_destroy(ctx->be.state, ev);
}

uvmrt_status_t uvmrt__be_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream)
{
    CHECKED(ctx, "event_record", stream_role(ctx, stream), ctx->be.ops->event_record(ctx->be.state, ev, stream));
}

uvmrt_status_t uvmrt__be_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_event_t ev)
{
    CHECKED(ctx, "stream_wait", stream_role(ctx, stream), ctx->be.ops->stream_wait(ctx->be.state, stream, ev));
}

int uvmrt__be_event_done(uvmrt_context_t *ctx, uvmrt_event_t ev)
{
    return HAS(ctx, event_query, event_done) ? ctx->be.ops->event_done(ctx->be.state, ev) : 1;
}

uvmrt_status_t uvmrt__be_elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns)
{
    *ns = 0;
    if (!HAS(ctx, timing, event_elapsed_ns)) return UVMRT_OK;
    uvmrt_status_t st = ctx->be.ops->event_elapsed_ns(ctx->be.state, a, b, ns);
    if (st != UVMRT_OK) *ns = 0;
    return st; /* callers absorb it (uvmrt__be_absorb): a timing is never worth failing a call */
}

uvmrt_status_t uvmrt__be_stream_sync(uvmrt_context_t *ctx, uvmrt_stream_t stream)
{
    CHECKED(ctx, "stream_sync", stream_role(ctx, stream), ctx->be.ops->stream_sync(ctx->be.state, stream));
}

uint64_t uvmrt__be_now(uvmrt_context_t *ctx) { return ctx->be.ops->now_ns(ctx->be.state); }

/* ------------------------------------------------------------------ data movement */
uvmrt_status_t uvmrt__be_move(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                              uvmrt_stream_t stream)
{
    if (n == 0) return UVMRT_OK;
    trace_ranges(ctx, to == UVMRT_LOC_DEVICE ? "prefetch" : "evict", r, n, stream_role(ctx, stream));
    uvmrt_status_t st = ctx->be.ops->move(ctx->be.state, r, n, to, stream);
    if (st == UVMRT_OK) return UVMRT_OK;
    char what[64];
    snprintf(what, sizeof what, "(%s, %zu ranges on %s)", to == UVMRT_LOC_DEVICE ? "to device" : "to host", n,
             stream_role(ctx, stream));
    failed(ctx, "move", what, st);
    if (to == UVMRT_LOC_DEVICE) {
        /* Ranges before the failing one may be on their way: send them back,
         * ordered after them on the same stream, so that what uvmrt does not
         * count as resident is not resident. */
        uvmrt_status_t back = ctx->be.ops->move(ctx->be.state, r, n, UVMRT_LOC_HOST, stream);
        if (back != UVMRT_OK) {
            failed(ctx, "move", "(compensating: back to host)", back);
            return st; /* not undone: the caller counts the ranges resident (uvmrt__be_move_undone) */
        }
        ctx->be.compensated++;
    }
    return st;
}

int uvmrt__be_move_undone(const uvmrt_context_t *ctx, uint64_t before) { return ctx->be.compensated != before; }

uvmrt_status_t uvmrt__be_discard(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_stream_t stream)
{
    if (n == 0) return UVMRT_OK;
    trace_ranges(ctx, "discard", r, n, stream_role(ctx, stream));
    int has = HAS(ctx, discard, discard);
    uvmrt_status_t st = has ? ctx->be.ops->discard(ctx->be.state, r, n, stream)
                            : ctx->be.ops->move(ctx->be.state, r, n, UVMRT_LOC_HOST, stream);
    if (st == UVMRT_OK) return UVMRT_OK;
    char what[48];
    snprintf(what, sizeof what, "(%zu ranges on %s)", n, stream_role(ctx, stream));
    return failed(ctx, has ? "discard" : "move (discard as write-back)", what, st);
}

uvmrt_status_t uvmrt__be_advise_remote(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n)
{
    if (n == 0) return UVMRT_OK;
    trace_ranges(ctx, "advise remote", r, n, NULL);
    if (!HAS(ctx, remote_advice, advise_remote)) return UVMRT_OK;
    char what[32];
    snprintf(what, sizeof what, "(%zu ranges)", n);
    CHECKED(ctx, "advise_remote", what, ctx->be.ops->advise_remote(ctx->be.state, r, n));
}

uvmrt_status_t uvmrt__be_move_wait(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                                   uvmrt_stream_t stream)
{
    uvmrt_status_t st = uvmrt__be_move(ctx, r, n, to, stream);
    return st == UVMRT_OK ? uvmrt__be_stream_sync(ctx, stream) : st;
}

int uvmrt__be_has_touch(const uvmrt_context_t *ctx) { return HAS(ctx, touch, touch); }
int uvmrt__be_has_discard(const uvmrt_context_t *ctx) { return HAS(ctx, discard, discard); }

uvmrt_status_t uvmrt__be_touch(uvmrt_context_t *ctx, uvmrt_stream_t stream, const uvmrt_touch_t *work,
                               uvmrt_touch_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (!HAS(ctx, touch, touch)) return UVMRT_OK;
    CHECKED(ctx, "touch", stream_role(ctx, stream), ctx->be.ops->touch(ctx->be.state, stream, work, res));
}

/* ------------------------------------------------------------------ the model's records */
int uvmrt__be_has_um(const uvmrt_context_t *ctx)
{
    return HAS(ctx, um_records, um_drain) && ctx->be.ops->um_enable && ctx->be.ops->um_disable;
}

void uvmrt__be_um_switch(uvmrt_context_t *ctx, int on)
{
    if (!uvmrt__be_has_um(ctx)) return;
    if (on) ctx->be.ops->um_enable(ctx->be.state);
    else ctx->be.ops->um_disable(ctx->be.state);
}

void uvmrt__be_um_drain(uvmrt_context_t *ctx, void (*sink)(void *user, const uvmrt_um_record_t *r, size_t n),
                        void *user)
{
    if (uvmrt__be_has_um(ctx)) ctx->be.ops->um_drain(ctx->be.state, sink, user);
}

void uvmrt__be_set_describer(uvmrt_context_t *ctx,
                             void (*fn)(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len))
{
    ctx->be.describe_fn = fn;
}

void uvmrt__set_trace(uvmrt_context_t *ctx, void (*fn)(void *user, const char *line), void *user)
{
    ctx->be.trace_fn = fn;
    ctx->be.trace_user = user;
}
