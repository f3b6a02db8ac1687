/*
 * backend.c -- the front end of the backend seam: every call the scheduler makes
 * goes through here, which supplies defaults for entries a backend leaves NULL
 * and describes each call to the trace hook in backend-neutral terms (arena
 * offsets, stream roles), so a scenario's traces compare equal across backends.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static const char *stream_role(const uvmrt_context_t *ctx, uvmrt_stream_t s)
{
    if (s == ctx->h2d_stream) return "h2d";
    if (s == ctx->d2h_stream) return "d2h";
    return "compute";
}

static void trace_ranges(uvmrt_context_t *ctx, const char *what, const uvmrt_range_t *r, size_t n,
                         uvmrt_stream_t stream)
{
    if (ctx->trace_fn == NULL) return;
    char line[4096];
    size_t len = (size_t)snprintf(line, sizeof line, "%s on %s:", what, stream_role(ctx, stream));
    for (size_t i = 0; i < n && len < sizeof line - 64; i++) {
        char where[64];
        uvmrt__describe_ptr(ctx, r[i].ptr, where, sizeof where);
        len += (size_t)snprintf(line + len, sizeof line - len, " [%s %zu]", where, r[i].bytes);
    }
    ctx->trace_fn(ctx->trace_user, line);
}

uvmrt_status_t be_move(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                       uvmrt_stream_t stream)
{
    if (n == 0) return UVMRT_OK;
    trace_ranges(ctx, to == UVMRT_LOC_DEVICE ? "prefetch" : "evict", r, n, stream);
    return ctx->ops->move(ctx->be, r, n, to, stream);
}

uvmrt_status_t be_discard(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n, uvmrt_stream_t stream)
{
    if (n == 0) return UVMRT_OK;
    trace_ranges(ctx, "discard", r, n, stream);
    if (ctx->ops->discard == NULL) return ctx->ops->move(ctx->be, r, n, UVMRT_LOC_HOST, stream);
    return ctx->ops->discard(ctx->be, r, n, stream);
}

uvmrt_status_t be_record(uvmrt_context_t *ctx, uvmrt_event_t ev, uvmrt_stream_t stream)
{
    return ctx->ops->event_record(ctx->be, ev, stream);
}

uvmrt_status_t be_wait(uvmrt_context_t *ctx, uvmrt_stream_t stream, uvmrt_event_t ev)
{
    return ctx->ops->stream_wait(ctx->be, stream, ev);
}

uvmrt_status_t be_touch(uvmrt_context_t *ctx, uvmrt_stream_t stream, const uvmrt_touch_t *work,
                        uvmrt_touch_result_t *res)
{
    memset(res, 0, sizeof *res);
    if (ctx->ops->touch == NULL) return UVMRT_OK;
    return ctx->ops->touch(ctx->be, stream, work, res);
}

uvmrt_status_t be_advise_remote(uvmrt_context_t *ctx, const uvmrt_range_t *r, size_t n)
{
    if (n == 0) return UVMRT_OK;
    if (ctx->trace_fn != NULL) {
        char line[512];
        size_t len = (size_t)snprintf(line, sizeof line, "advise remote:");
        for (size_t i = 0; i < n && len < sizeof line - 64; i++) {
            char where[64];
            uvmrt__describe_ptr(ctx, r[i].ptr, where, sizeof where);
            len += (size_t)snprintf(line + len, sizeof line - len, " [%s %zu]", where, r[i].bytes);
        }
        ctx->trace_fn(ctx->trace_user, line);
    }
    return ctx->ops->advise_remote == NULL ? UVMRT_OK : ctx->ops->advise_remote(ctx->be, r, n);
}

uvmrt_status_t be_stream_sync(uvmrt_context_t *ctx, uvmrt_stream_t stream)
{
    return ctx->ops->stream_sync(ctx->be, stream);
}

uvmrt_status_t be_elapsed(uvmrt_context_t *ctx, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns)
{
    if (ctx->ops->event_elapsed_ns == NULL) {
        *ns = 0;
        return UVMRT_OK;
    }
    return ctx->ops->event_elapsed_ns(ctx->be, a, b, ns);
}

int be_event_done(uvmrt_context_t *ctx, uvmrt_event_t ev)
{
    return ctx->ops->event_done == NULL ? 1 : ctx->ops->event_done(ctx->be, ev);
}

uint64_t be_now(uvmrt_context_t *ctx) { return ctx->ops->now_ns(ctx->be); }

void uvmrt__set_trace(uvmrt_context_t *ctx, void (*fn)(void *user, const char *line), void *user)
{
    ctx->trace_fn = fn;
    ctx->trace_user = user;
}
