/*
 * faultinject.c -- see faultinject.h.
 */
#include <stdlib.h>
#include <string.h>

#include "faultinject.h"

const char *const fi_op_names[FI_N_OPS] = {
#define FI_X_NAME(e, name) name,
    FI_OPS(FI_X_NAME)
#undef FI_X_NAME
};

fi_state_t fi;
static const uvmrt_backend_ops_t *inner;

/* ------------------------------------------------------------------ live events */
/* An open-addressing set of the live events' pointers (linear probing, deletion by
 * backward shift), so that a use of a destroyed event is seen at once. */
static uvmrt_event_t *live;
static size_t live_cap, live_n;

static size_t live_slot(uvmrt_event_t e) { return (size_t)(((uintptr_t)e >> 4) * 0x9E3779B97F4A7C15ull) & (live_cap - 1); }

static int live_has(uvmrt_event_t e)
{
    if (live_cap == 0 || e == NULL) return 0;
    for (size_t i = live_slot(e); live[i] != NULL; i = (i + 1) & (live_cap - 1))
        if (live[i] == e) return 1;
    return 0;
}

static void live_add(uvmrt_event_t e)
{
    if (e == NULL || live_has(e)) return;
    if (2 * (live_n + 1) > live_cap) {
        size_t old_cap = live_cap;
        uvmrt_event_t *old = live;
        live_cap = old_cap ? 2 * old_cap : 1024;
        live = calloc(live_cap, sizeof *live);
        if (live == NULL) abort(); /* a test helper: no memory ends the test */
        live_n = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i] != NULL) live_add(old[i]);
        free(old);
    }
    size_t i = live_slot(e);
    while (live[i] != NULL) i = (i + 1) & (live_cap - 1);
    live[i] = e;
    live_n++;
}

static void live_remove(uvmrt_event_t e)
{
    if (live_cap == 0 || e == NULL) return;
    size_t i = live_slot(e);
    while (live[i] != NULL && live[i] != e) i = (i + 1) & (live_cap - 1);
    if (live[i] == NULL) return;
    live[i] = NULL;
    live_n--;
    for (size_t j = (i + 1) & (live_cap - 1); live[j] != NULL; j = (j + 1) & (live_cap - 1)) {
        uvmrt_event_t m = live[j];
        live[j] = NULL;
        live_n--;
        live_add(m);
    }
}

static void live_use(uvmrt_event_t e)
{
    if (!live_has(e)) fi.dead_event_uses++;
}

void fi_arm(int op, uint64_t k, uint64_t budget, int check_budget)
{
    memset(&fi, 0, sizeof fi);
    fi.fail_op = op;
    fi.fail_at = k;
    fi.budget = budget;
    fi.check_budget = check_budget;
}

/* Counts the call; 1 when it is the one to fail. */
static int inject(fi_op_t op)
{
    fi.calls[op]++;
    fi.last_failed = (int)op == fi.fail_op && fi.calls[op] == fi.fail_at;
    if (fi.last_failed) fi.fired = 1;
    return fi.last_failed;
}

uint64_t fi_device_bytes(void *state)
{
    uint64_t free_b = 0, total_b = 0;
    if (inner->mem_info(state, &free_b, &total_b) != UVMRT_OK) return 0;
    return total_b - free_b;
}

static void after_move(void *state)
{
    uint64_t dev = fi_device_bytes(state);
    if (dev > fi.max_device) fi.max_device = dev;
    if (fi.check_budget && dev > fi.budget) fi.over_budget++;
}

#define FAIL_IF(op)                                   \
    do {                                              \
        if (inject(op)) return UVMRT_ERR_BACKEND;     \
    } while (0)

static uvmrt_status_t w_open(const uvmrt_backend_config_t *cfg, void **state)
{
    FAIL_IF(FI_OPEN);
    return inner->open(cfg, state);
}
static void w_close(void *state) { inner->close(state); }
static const char *w_error_name(void *state)
{
    if (fi.last_failed) return "fiInjectedFailure";
    return inner->error_name ? inner->error_name(state) : NULL;
}
static uvmrt_status_t w_mem_info(void *state, uint64_t *f, uint64_t *t)
{
    FAIL_IF(FI_MEM_INFO);
    return inner->mem_info(state, f, t);
}
static uvmrt_status_t w_alloc(void *state, size_t bytes, void **ptr)
{
    FAIL_IF(FI_ALLOC);
    return inner->alloc(state, bytes, ptr);
}
static void w_free(void *state, void *ptr, size_t bytes) { inner->free(state, ptr, bytes); }
static uvmrt_status_t w_host_alloc(void *state, size_t bytes, void **ptr)
{
    FAIL_IF(FI_HOST_ALLOC);
    return inner->host_alloc(state, bytes, ptr);
}
static void w_host_free(void *state, void *ptr, size_t bytes) { inner->host_free(state, ptr, bytes); }
static uvmrt_status_t w_stream_create(void *state, uvmrt_stream_t *out)
{
    FAIL_IF(FI_STREAM_CREATE);
    return inner->stream_create(state, out);
}
static void w_stream_destroy(void *state, uvmrt_stream_t s) { inner->stream_destroy(state, s); }
static uvmrt_status_t w_event_create(void *state, int timing, uvmrt_event_t *out)
{
    FAIL_IF(FI_EVENT_CREATE);
    uvmrt_status_t st = inner->event_create(state, timing, out);
    if (st == UVMRT_OK) live_add(*out);
    return st;
}
static void w_event_destroy(void *state, uvmrt_event_t e)
{
    if (e != NULL) {
        live_use(e);
        live_remove(e);
    }
    inner->event_destroy(state, e);
}
static uvmrt_status_t w_event_record(void *state, uvmrt_event_t e, uvmrt_stream_t s)
{
    live_use(e);
    FAIL_IF(FI_EVENT_RECORD);
    return inner->event_record(state, e, s);
}
static uvmrt_status_t w_stream_wait(void *state, uvmrt_stream_t s, uvmrt_event_t e)
{
    live_use(e);
    FAIL_IF(FI_STREAM_WAIT);
    return inner->stream_wait(state, s, e);
}
static int w_event_done(void *state, uvmrt_event_t e)
{
    live_use(e);
    return inner->caps.event_query && inner->event_done ? inner->event_done(state, e) : 1;
}
static uvmrt_status_t w_elapsed(void *state, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns)
{
    live_use(a);
    live_use(b);
    FAIL_IF(FI_EVENT_ELAPSED);
    return inner->event_elapsed_ns(state, a, b, ns);
}
static uvmrt_status_t w_stream_sync(void *state, uvmrt_stream_t s)
{
    FAIL_IF(FI_STREAM_SYNC);
    return inner->stream_sync(state, s);
}
static uvmrt_status_t w_move(void *state, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                             uvmrt_stream_t s)
{
    FAIL_IF(FI_MOVE);
    uvmrt_status_t st = inner->move(state, r, n, to, s);
    after_move(state);
    return st;
}
static uvmrt_status_t w_discard(void *state, const uvmrt_range_t *r, size_t n, uvmrt_stream_t s)
{
    FAIL_IF(FI_DISCARD);
    uvmrt_status_t st = inner->discard(state, r, n, s);
    after_move(state);
    return st;
}
static uvmrt_status_t w_advise_remote(void *state, const uvmrt_range_t *r, size_t n)
{
    FAIL_IF(FI_ADVISE_REMOTE);
    return inner->caps.remote_advice && inner->advise_remote ? inner->advise_remote(state, r, n) : UVMRT_OK;
}
static uvmrt_status_t w_touch(void *state, uvmrt_stream_t s, const uvmrt_touch_t *w, uvmrt_touch_result_t *res)
{
    FAIL_IF(FI_TOUCH);
    uvmrt_status_t st = inner->touch(state, s, w, res);
    after_move(state);
    return st;
}
static uint64_t w_now(void *state) { return inner->now_ns(state); }
static void w_um_enable(void *state) { inner->um_enable(state); }
static void w_um_disable(void *state) { inner->um_disable(state); }
static void w_um_drain(void *state, void (*sink)(void *, const uvmrt_um_record_t *, size_t), void *user)
{
    inner->um_drain(state, sink, user);
}

uvmrt_backend_ops_t fi_wrap(const uvmrt_backend_ops_t *in)
{
    inner = in;
    uvmrt_backend_ops_t o = *in;
    o.name = "faultinject";
    o.caps.remote_advice = 1;
    o.caps.event_query = 1; /* the library's queries reach w_event_done, which checks the event */
    o.error_name = w_error_name;
    o.open = w_open;
    o.close = w_close;
    o.mem_info = w_mem_info;
    o.alloc = w_alloc;
    o.free = w_free;
    o.host_alloc = w_host_alloc;
    o.host_free = w_host_free;
    o.stream_create = w_stream_create;
    o.stream_destroy = w_stream_destroy;
    o.event_create = w_event_create;
    o.event_destroy = w_event_destroy;
    o.event_record = w_event_record;
    o.stream_wait = w_stream_wait;
    o.event_done = w_event_done;
    o.event_elapsed_ns = in->event_elapsed_ns ? w_elapsed : NULL;
    o.stream_sync = w_stream_sync;
    o.move = w_move;
    o.discard = in->discard ? w_discard : NULL;
    o.advise_remote = w_advise_remote;
    o.touch = in->touch ? w_touch : NULL;
    o.now_ns = w_now;
    o.um_enable = in->um_enable ? w_um_enable : NULL;
    o.um_disable = in->um_disable ? w_um_disable : NULL;
    o.um_drain = in->um_drain ? w_um_drain : NULL;
    return o;
}
