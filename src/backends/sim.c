/*
 * sim.c -- a deterministic model of a GPU with managed memory, for machines
 * without one and for tests.
 *
 * Memory is real host memory (reserved lazily, so untouched tensors cost
 * nothing); the model tracks where each 64 KiB page lives (host, device, or
 * nowhere: never touched or discarded) and advances virtual clocks:
 *  - one timeline per stream; the host's own clock moves on stream syncs;
 *  - one copy engine per direction (transfers in one direction are serial);
 *  - a migration costs the profile's per-call time plus bytes / bandwidth;
 *  - a layer's work costs its declared duration, plus demand faults for pages
 *    not on the device (bytes / fault bandwidth), plus the driver's own
 *    evictions (allocation order) when the device is full, plus, while the
 *    unified-memory records are on, the driver's time to trace each fault group;
 *  - its reads and writes of host-homed ranges cross the link at the remote
 *    bandwidths, occupying that direction's engine, so they queue behind and
 *    delay migrations; its own work comes after that traffic (measured: they
 *    add, they do not overlap);
 *  - its CPU work (host_bytes) runs on its stream at the profile's host_mem_bps, or
 *    for exactly its measured time when the call gives one (host_ns);
 *  - host memory is shared (when the profile has host_mem_bps and
 *    host_mem_shared_bps): CPU work and link transfers (migrations, remote
 *    traffic) book their rates over model time, and work enqueued later takes
 *    what the booked work leaves, so that CPU plus link never exceed
 *    host_mem_shared_bps and the CPU never host_mem_bps; with the profile's
 *    figures for the CPU beside each link direction alone, each direction also
 *    takes from the CPU's ceiling in proportion to its use of the link, whichever
 *    was enqueued first: CPU work booked before a transfer gives way down to that
 *    ceiling and does the rest after (its stream's clock moves on). The two
 *    link directions alone are not limited by host memory (the profile measured
 *    them together);
 *  - the disk tier's transfers (with the profile's disk rates; none: free) run on one
 *    drive, one at a time, and through host memory (booked as fixed host-memory
 *    work beside the CPU's): a call's reads before its work (which waits for them),
 *    its write-backs after it (nobody waits, but the drive is busy: the next reads
 *    queue behind them), as uvmrt-plan's arithmetic has it.
 * Pages that hold no data move for free: nothing needs copying.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend.h"
#include "log.h"

#define PAGE (64u << 10)
#define MAX_STREAMS 64

enum { PG_NOWHERE = 0, PG_HOST = 1, PG_DEVICE = 2 };

typedef struct sim_alloc {
    char *base;
    size_t bytes;
    uint8_t *page; /* PG_* per page */
} sim_alloc_t;

typedef struct sim_timeline {
    const void *key; /* the stream handle */
    uint64_t t;
} sim_timeline_t;

struct uvmrt_event_st {
    uint64_t t;
    int timing;
};

/* A booking of host memory: [t0, t1) in model ns at bps bytes/s; CPU work the model
 * times itself names its stream's timeline (owner), so that link traffic booked later
 * can slow it (a measured time, and link transfers, have none). */
typedef struct hm_seg {
    double t0, t1, bps;
    sim_timeline_t *owner;
} hm_seg_t;

typedef struct hm_list {
    hm_seg_t *seg;
    size_t n, cap;
} hm_list_t;

/* An allocation's base and its index in allocs: the index sorted by base, so that
 * finding a range's allocation is a binary search, not a scan of every one. */
typedef struct sim_index {
    char *base;
    size_t i;
} sim_index_t;

typedef struct sim {
    const uvmrt_profile_t *prof;
    uvmrt_log_t *log;
    sim_alloc_t *allocs;          /* in allocation order (the eviction clock's); freed ones are
                                   * left as holes (base NULL) until they are half of them */
    size_t n_allocs, cap_allocs, n_holes;
    size_t total_pages;           /* of the live allocations */
    sim_index_t *index;           /* the live allocations by base (rebuilt when stale) */
    size_t n_index;
    int index_stale;
    uint64_t device_bytes;
    uint64_t host_t;
    uint64_t h2d_engine_t, d2h_engine_t; /* each direction's migrations (and reads: h2d) */
    uint64_t store_t;                     /* the GPU's remote writes (d2h) */
    uint64_t disk_t;                      /* the drive: the disk tier's reads and writes */
    sim_timeline_t lines[MAX_STREAMS];
    int n_lines;
    int n_created_streams;
    size_t hand_alloc, hand_page; /* the driver's eviction clock */
    int um_on;                    /* record unified-memory events (like CUPTI's) */
    uvmrt_um_record_t *um;
    size_t n_um, cap_um;
    int hm_on;                    /* host memory is modelled as shared (the profile has its figures) */
    hm_list_t hm_cpu, hm_h2d, hm_d2h; /* bookings of CPU work and of each link direction's transfers */
    int hm_lost;                  /* a booking could not be kept (no memory): warned once */
} sim_t;

/* One record, as CUPTI would give it; dropped silently when out of memory. */
static void um_add(sim_t *s, uint32_t kind, uint32_t cause, const void *addr, uint64_t value, uint64_t t0,
                   uint64_t t1)
{
    if (!s->um_on || value == 0) return;
    if (s->n_um == s->cap_um) {
        size_t cap = s->cap_um ? 2 * s->cap_um : 256;
        uvmrt_um_record_t *u = realloc(s->um, cap * sizeof *u);
        if (u == NULL) return;
        s->um = u;
        s->cap_um = cap;
    }
    s->um[s->n_um++] = (uvmrt_um_record_t){t0, t1, (uint64_t)(uintptr_t)addr, value, kind, cause};
}

static uvmrt_status_t sim_open(const uvmrt_backend_config_t *cfg, void **state)
{
    if (cfg->profile == NULL) return UVMRT_ERR_INVALID;
    sim_t *s = calloc(1, sizeof *s);
    if (s == NULL) return UVMRT_ERR_NOMEM;
    s->prof = cfg->profile;
    s->log = cfg->log;
    s->hm_on = s->prof->host_mem_bps > 0 && s->prof->host_mem_shared_bps > 0;
    *state = s;
    return UVMRT_OK;
}

static void sim_close(void *state)
{
    sim_t *s = state;
    if (s == NULL) return;
    for (size_t i = 0; i < s->n_allocs; i++) {
        munmap(s->allocs[i].base, s->allocs[i].bytes);
        free(s->allocs[i].page);
    }
    free(s->allocs);
    free(s->index);
    free(s->um);
    free(s->hm_cpu.seg);
    free(s->hm_h2d.seg);
    free(s->hm_d2h.seg);
    free(s);
}

static void sim_um_enable(void *state) { ((sim_t *)state)->um_on = 1; }
static void sim_um_disable(void *state) { ((sim_t *)state)->um_on = 0; }

static void sim_um_drain(void *state, void (*sink)(void *user, const uvmrt_um_record_t *r, size_t n), void *user)
{
    sim_t *s = state;
    if (s->n_um > 0) sink(user, s->um, s->n_um);
    s->n_um = 0;
}

static uvmrt_status_t sim_mem_info(void *state, uint64_t *free_bytes, uint64_t *total)
{
    sim_t *s = state;
    *total = s->prof->memory_bytes;
    *free_bytes = s->prof->memory_bytes - s->device_bytes;
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ memory */
static uvmrt_status_t sim_alloc(void *state, size_t bytes, void **ptr)
{
    sim_t *s = state;
    const size_t align = 2u << 20;
    bytes = (bytes + PAGE - 1) / PAGE * PAGE;
    if (s->n_allocs == s->cap_allocs) {
        size_t cap = s->cap_allocs ? 2 * s->cap_allocs : 16;
        sim_alloc_t *a = realloc(s->allocs, cap * sizeof *a);
        if (a == NULL) return UVMRT_ERR_NOMEM;
        s->allocs = a;
        s->cap_allocs = cap;
    }
    /* Reserve, then trim to a 2 MiB aligned range; pages are committed on touch. */
    size_t span = bytes + align;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (raw == MAP_FAILED) return UVMRT_ERR_NOMEM;
    char *base = (char *)(((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    size_t tail = (size_t)(raw + span - (base + bytes));
    if (tail > 0) munmap(base + bytes, tail);
    uint8_t *page = calloc(bytes / PAGE, 1);
    if (page == NULL) {
        munmap(base, bytes);
        return UVMRT_ERR_NOMEM;
    }
    s->allocs[s->n_allocs++] = (sim_alloc_t){base, bytes, page};
    s->total_pages += bytes / PAGE;
    s->index_stale = 1;
    *ptr = base;
    return UVMRT_OK;
}

static int by_base(const void *a, const void *b)
{
    const sim_index_t *x = a, *y = b;
    return (x->base > y->base) - (x->base < y->base);
}

/* Rebuilds the index of the live allocations; -1 when out of memory (then callers scan). */
static int index_rebuild(sim_t *s)
{
    sim_index_t *ix = realloc(s->index, (s->n_allocs + 1) * sizeof *ix);
    if (ix == NULL) return -1;
    s->index = ix;
    s->n_index = 0;
    for (size_t i = 0; i < s->n_allocs; i++)
        if (s->allocs[i].base != NULL) ix[s->n_index++] = (sim_index_t){s->allocs[i].base, i};
    qsort(ix, s->n_index, sizeof *ix, by_base);
    s->index_stale = 0;
    return 0;
}

/* The live allocation holding [lo, hi), or NULL. */
static sim_alloc_t *alloc_of(sim_t *s, const char *lo, const char *hi)
{
    if (s->index_stale && index_rebuild(s) != 0) {
        for (size_t i = 0; i < s->n_allocs; i++) {
            sim_alloc_t *a = &s->allocs[i];
            if (a->base != NULL && lo >= a->base && hi <= a->base + a->bytes) return a;
        }
        return NULL;
    }
    size_t l = 0, h = s->n_index; /* the last entry with base <= lo */
    while (l < h) {
        size_t mid = l + (h - l) / 2;
        if (s->index[mid].base <= lo) l = mid + 1;
        else h = mid;
    }
    if (l == 0) return NULL;
    sim_alloc_t *a = &s->allocs[s->index[l - 1].i];
    /* an entry of an allocation freed since (a hole) holds no range */
    return a->base == s->index[l - 1].base && lo >= a->base && hi <= a->base + a->bytes ? a : NULL;
}

/* Page-locked host memory: plain host pages here (the model does not see them: a
 * pinned tensor's uses are modelled on its managed slot, as host-homed). */
static uvmrt_status_t sim_host_alloc(void *state, size_t bytes, void **ptr)
{
    (void)state;
    void *p = NULL;
    if (posix_memalign(&p, PAGE, bytes ? bytes : 1) != 0) return UVMRT_ERR_NOMEM;
    *ptr = p;
    return UVMRT_OK;
}

static void sim_host_free(void *state, void *ptr, size_t bytes)
{
    (void)state;
    (void)bytes;
    free(ptr);
}

static void sim_free(void *state, void *ptr, size_t bytes)
{
    (void)bytes;
    sim_t *s = state;
    sim_alloc_t *a = ptr != NULL ? alloc_of(s, ptr, ptr) : NULL;
    if (a == NULL || a->base != ptr) return;
    for (size_t p = 0; p < a->bytes / PAGE; p++)
        if (a->page[p] == PG_DEVICE) s->device_bytes -= PAGE;
    munmap(a->base, a->bytes);
    free(a->page);
    s->total_pages -= a->bytes / PAGE;
    *a = (sim_alloc_t){NULL, 0, NULL}; /* a hole: the others keep their order and index */
    s->hand_alloc = s->hand_page = 0;
    if (++s->n_holes > s->n_allocs / 2) { /* compact, in order */
        size_t k = 0;
        for (size_t i = 0; i < s->n_allocs; i++)
            if (s->allocs[i].base != NULL) s->allocs[k++] = s->allocs[i];
        s->n_allocs = k;
        s->n_holes = 0;
        s->index_stale = 1;
    }
}

/* The allocation and page range [p0, p1) covering a range; NULL if not ours. */
static sim_alloc_t *locate(sim_t *s, const uvmrt_range_t *r, size_t *p0, size_t *p1)
{
    char *lo = r->ptr, *hi = (char *)r->ptr + r->bytes;
    sim_alloc_t *a = alloc_of(s, lo, hi);
    if (a == NULL) return NULL;
    *p0 = (size_t)(lo - a->base) / PAGE;
    *p1 = ((size_t)(hi - a->base) + PAGE - 1) / PAGE;
    return a;
}

/* ------------------------------------------------------------------ streams and events */
static sim_timeline_t *line_of(sim_t *s, uvmrt_stream_t stream)
{
    for (int i = 0; i < s->n_lines; i++)
        if (s->lines[i].key == (const void *)stream) return &s->lines[i];
    if (s->n_lines == MAX_STREAMS) return &s->lines[0]; /* more streams than modelled: share */
    s->lines[s->n_lines] = (sim_timeline_t){stream, s->host_t};
    return &s->lines[s->n_lines++];
}

/* When new work on this stream can start: after its earlier work and after the host enqueued it. */
static uint64_t ready_at(sim_t *s, sim_timeline_t *l) { return l->t > s->host_t ? l->t : s->host_t; }

static uvmrt_status_t sim_stream_create(void *state, uvmrt_stream_t *out)
{
    sim_t *s = state;
    /* Distinct non-NULL keys that are never dereferenced. */
    *out = (uvmrt_stream_t)(uintptr_t)(0x5100 + 16 * ++s->n_created_streams);
    return UVMRT_OK;
}
static void sim_stream_destroy(void *state, uvmrt_stream_t stream) { (void)state; (void)stream; }

static uvmrt_status_t sim_event_create(void *state, int timing, uvmrt_event_t *out)
{
    (void)state;
    uvmrt_event_t e = calloc(1, sizeof *e);
    if (e == NULL) return UVMRT_ERR_NOMEM;
    e->timing = timing;
    *out = e;
    return UVMRT_OK;
}
static void sim_event_destroy(void *state, uvmrt_event_t e) { (void)state; free(e); }

static uvmrt_status_t sim_event_record(void *state, uvmrt_event_t e, uvmrt_stream_t stream)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    e->t = ready_at(s, l);
    return UVMRT_OK;
}

static uvmrt_status_t sim_stream_wait(void *state, uvmrt_stream_t stream, uvmrt_event_t e)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    uint64_t r = ready_at(s, l);
    l->t = e->t > r ? e->t : r;
    return UVMRT_OK;
}

static int sim_event_done(void *state, uvmrt_event_t e) { (void)state; (void)e; return 1; }

static uvmrt_status_t sim_elapsed(void *state, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns)
{
    (void)state;
    *ns = b->t > a->t ? b->t - a->t : 0;
    return UVMRT_OK;
}

static uvmrt_status_t sim_stream_sync(void *state, uvmrt_stream_t stream)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    if (l->t > s->host_t) s->host_t = l->t;
    return UVMRT_OK;
}

static uint64_t sim_now(void *state) { return ((sim_t *)state)->host_t; }

static uint64_t ns_for(double bytes, double bps) { return bps > 0 ? (uint64_t)(bytes / bps * 1e9) : 0; }

/* ------------------------------------------------------------------ host memory */
/* Work never starts before the host's clock, so bookings that ended by then
 * cannot matter again: dropping them keeps the lists as short as a step. */
static void hm_prune(sim_t *s, hm_list_t *l)
{
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->seg[i].t1 > (double)s->host_t) l->seg[k++] = l->seg[i];
    l->n = k;
}

static void hm_book(sim_t *s, hm_list_t *l, double t0, double t1, double bps, sim_timeline_t *owner)
{
    if (t1 <= t0 || bps <= 0) return;
    if (l->n == l->cap) hm_prune(s, l);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        hm_seg_t *g = realloc(l->seg, cap * sizeof *g);
        if (g == NULL) { /* the model goes on without this booking, and says so once */
            if (!s->hm_lost) LOG_WARN(s->log, "sim: out of memory for the host-memory model: some overlapping "
                                              "transfers and CPU work are modelled without contention");
            s->hm_lost = 1;
            return;
        }
        l->seg = g;
        l->cap = cap;
    }
    l->seg[l->n++] = (hm_seg_t){t0, t1, bps, owner};
}

/* Bytes/s booked at time t, and the next time after t at which that changes. */
static double hm_usage(const hm_list_t *l, double t, double *next)
{
    double u = 0;
    for (size_t i = 0; i < l->n; i++) {
        const hm_seg_t *g = &l->seg[i];
        if (g->t0 <= t && t < g->t1) {
            u += g->bps;
            if (g->t1 < *next) *next = g->t1;
        } else if (g->t0 > t && g->t0 < *next) {
            *next = g->t0;
        }
    }
    return u;
}

static int hm_overlaps(const hm_list_t *l, double t0, double t1)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->seg[i].t0 < t1 && l->seg[i].t1 > t0) return 1;
    return 0;
}

enum { HM_CPU, HM_H2D, HM_D2H };

/* The most host-memory bytes/s CPU work gets beside link traffic of u_h2d and u_d2h:
 * where the profile measured the CPU beside each direction alone at that direction's
 * full rate, what each direction takes from it in proportion to its use of the link
 * (the CPU's work and the DMA meet in the memory controllers even when their total
 * is below host_mem_shared_bps); else host_mem_bps. */
static double cpu_ceiling(const sim_t *s, double u_h2d, double u_d2h)
{
    const uvmrt_profile_t *p = s->prof;
    double c = p->host_mem_bps;
    if (p->host_mem_cpu_beside_h2d_bps > 0 && p->pinned_h2d_bps > 0)
        c -= fmax(0.0, p->host_mem_bps - p->host_mem_cpu_beside_h2d_bps) * fmin(1.0, u_h2d / p->pinned_h2d_bps);
    if (p->host_mem_cpu_beside_d2h_bps > 0 && p->pinned_d2h_bps > 0)
        c -= fmax(0.0, p->host_mem_bps - p->host_mem_cpu_beside_d2h_bps) * fmin(1.0, u_d2h / p->pinned_d2h_bps);
    return c;
}

/* CPU bytes/s booked at t by work the model may slow (an owner). */
static double hm_cpu_yielding(const hm_list_t *l, double t)
{
    double y = 0;
    for (size_t i = 0; i < l->n; i++) {
        const hm_seg_t *g = &l->seg[i];
        if (g->owner != NULL && g->t0 <= t && t < g->t1) y += g->bps;
    }
    return y;
}

/* Link traffic booked over CPU work booked before it, in [t0, t1): the CPU's share of
 * host memory there falls by the factor f (its ceiling beside that traffic), each of
 * its bookings is split around [t0, t1), and what it could not do there it does after
 * its own work at the rate it kept, which moves its timeline on (the CPU gives way: measured on the H200,
 * the link beside AdamW kept most of its rate and the CPU lost up to a third). The
 * bookings are all cut first and booked again after, because booking may prune the
 * list. */
static void hm_cpu_yield(sim_t *s, double t0, double t1, double f)
{
    size_t n_hit = 0;
    for (size_t i = 0; i < s->hm_cpu.n; i++) {
        const hm_seg_t *g = &s->hm_cpu.seg[i];
        n_hit += g->owner != NULL && g->t0 <= t0 && t0 < g->t1;
    }
    if (n_hit == 0) return;
    hm_seg_t *hit = malloc(n_hit * sizeof *hit);
    if (hit == NULL) { /* the model goes on without this slowdown, and says so once */
        if (!s->hm_lost) LOG_WARN(s->log, "sim: out of memory for the host-memory model: some overlapping "
                                          "transfers and CPU work are modelled without contention");
        s->hm_lost = 1;
        return;
    }
    n_hit = 0;
    for (size_t i = 0; i < s->hm_cpu.n; i++) {
        hm_seg_t *g = &s->hm_cpu.seg[i];
        if (g->owner == NULL || !(g->t0 <= t0 && t0 < g->t1)) continue;
        hit[n_hit++] = *g;
        g->t1 = t0; /* what it did before t0 */
    }
    for (size_t k = 0; k < n_hit; k++) {
        const hm_seg_t *g = &hit[k];
        double end = t1 < g->t1 ? t1 : g->t1;
        double lost = g->bps * (1 - f) * (end - t0) * 1e-9; /* bytes */
        hm_book(s, &s->hm_cpu, t0, end, g->bps * f, g->owner);
        if (end < g->t1) hm_book(s, &s->hm_cpu, end, g->t1, g->bps, g->owner);
        /* the rest at the rate it kept beside the transfer, booked as fixed (later
         * transfers do not cut it again: that would multiply the bookings) */
        double rate = f > 0 ? g->bps * f : g->bps, more = lost / rate * 1e9;
        double from = (double)g->owner->t > g->t1 ? (double)g->owner->t : g->t1;
        hm_book(s, &s->hm_cpu, from, from + more, rate, NULL);
        g->owner->t = (uint64_t)ceil(from + more);
    }
    free(hit);
}

/* Work of `bytes` host-memory bytes from t at up to bps: CPU work (HM_CPU, of owner's
 * stream) or a link transfer in one direction (owner NULL). Returns when it ends and
 * books its rates. Alone (or with host memory not modelled) it takes bytes / bps
 * exactly as before; beside booked work it takes what host memory they leave, and CPU
 * work booked before a transfer gives way to it (hm_cpu_yield). */
static uint64_t hm_run(sim_t *s, uint64_t t, double bytes, double bps, int kind, sim_timeline_t *owner)
{
    uint64_t alone = t + ns_for(bytes, bps);
    if (!s->hm_on || bytes <= 0 || bps <= 0) return alone;
    int cpu = kind == HM_CPU;
    hm_list_t *own = cpu ? &s->hm_cpu : kind == HM_H2D ? &s->hm_h2d : &s->hm_d2h;
    double t0 = (double)t, t1 = (double)alone;
    int contended = cpu ? hm_overlaps(&s->hm_cpu, t0, t1) || hm_overlaps(&s->hm_h2d, t0, t1) ||
                              hm_overlaps(&s->hm_d2h, t0, t1)
                        : hm_overlaps(&s->hm_cpu, t0, t1);
    if (!contended) {
        hm_book(s, own, t0, t1, bps, owner);
        return alone;
    }
    const double shared = s->prof->host_mem_shared_bps;
    double cur = t0, left = bytes;
    for (;;) {
        double next = INFINITY;
        double u_cpu = hm_usage(&s->hm_cpu, cur, &next), u_h2d = hm_usage(&s->hm_h2d, cur, &next),
               u_d2h = hm_usage(&s->hm_d2h, cur, &next), u_link = u_h2d + u_d2h;
        double r, f = 1;
        if (cpu) {
            r = fmin(bps, fmin(cpu_ceiling(s, u_h2d, u_d2h) - u_cpu, shared - u_cpu - u_link));
        } else if (u_cpu > 0) {
            /* the CPU work the model times gives way down to its ceiling beside this
             * transfer too; the link takes what host memory that leaves */
            double y = hm_cpu_yielding(&s->hm_cpu, cur), fixed = u_cpu - y;
            double at_full = fmin(bps, shared - u_link - fixed);
            double cy = y;
            if (y > 0) {
                double ceil_cpu = cpu_ceiling(s, u_h2d + (kind == HM_H2D ? at_full : 0),
                                              u_d2h + (kind == HM_D2H ? at_full : 0)) - fixed;
                cy = fmax(0.0, fmin(y, ceil_cpu));
                f = cy / y;
            }
            r = fmin(bps, shared - u_link - fixed - cy);
        } else {
            r = bps;
        }
        if (r > 0) {
            double end = cur + left / r * 1e9;
            /* the CPU's part it gives way with goes after its work, at the rate it kept
             * (so a CPU call under a long transfer ends as if it had run at its ceiling
             * throughout) */
            if (f < 1) hm_cpu_yield(s, cur, end <= next ? end : next, f);
            if (end <= next) {
                hm_book(s, own, cur, end, r, owner);
                return (uint64_t)ceil(end);
            }
            hm_book(s, own, cur, next, r, owner);
            left -= r * (next - cur) * 1e-9;
        }
        cur = next; /* r == 0 only while something booked runs: next is finite */
    }
}

/* ------------------------------------------------------------------ migration */
static uvmrt_status_t sim_move(void *state, const uvmrt_range_t *ranges, size_t n, uvmrt_location_t to,
                               uvmrt_stream_t stream)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    uint64_t *engine = to == UVMRT_LOC_DEVICE ? &s->h2d_engine_t : &s->d2h_engine_t;
    double bps = to == UVMRT_LOC_DEVICE ? s->prof->prefetch_h2d_bps : s->prof->evict_d2h_bps;
    uint64_t t = ready_at(s, l);
    if (*engine > t) t = *engine;
    for (size_t i = 0; i < n; i++) {
        size_t p0, p1;
        sim_alloc_t *a = locate(s, &ranges[i], &p0, &p1);
        if (a == NULL) return UVMRT_ERR_INVALID;
        uint64_t copied = 0;
        for (size_t p = p0; p < p1; p++) {
            uint8_t from = a->page[p];
            if (to == UVMRT_LOC_DEVICE && from != PG_DEVICE) {
                if (from == PG_HOST) copied += PAGE;
                a->page[p] = PG_DEVICE;
                s->device_bytes += PAGE;
            } else if (to == UVMRT_LOC_HOST && from == PG_DEVICE) {
                copied += PAGE;
                a->page[p] = PG_HOST;
                s->device_bytes -= PAGE;
            }
        }
        uint64_t t1 = hm_run(s, t + s->prof->prefetch_call_ns, (double)copied, bps,
                             to == UVMRT_LOC_DEVICE ? HM_H2D : HM_D2H, NULL);
        um_add(s, to == UVMRT_LOC_DEVICE ? UVMRT_UM_HTOD : UVMRT_UM_DTOH, UVMRT_UM_CAUSE_USER, ranges[i].ptr,
               copied, t, t1);
        t = t1;
    }
    *engine = t;
    l->t = t;
    return UVMRT_OK;
}

static uvmrt_status_t sim_discard(void *state, const uvmrt_range_t *ranges, size_t n,
                                  uvmrt_stream_t stream)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    uint64_t t = ready_at(s, l);
    for (size_t i = 0; i < n; i++) {
        size_t p0, p1;
        sim_alloc_t *a = locate(s, &ranges[i], &p0, &p1);
        if (a == NULL) return UVMRT_ERR_INVALID;
        for (size_t p = p0; p < p1; p++) {
            if (a->page[p] == PG_DEVICE) s->device_bytes -= PAGE;
            a->page[p] = PG_NOWHERE;
        }
        t += s->prof->prefetch_call_ns;
    }
    l->t = t;
    return UVMRT_OK;
}

static int page_in(const sim_alloc_t *a, size_t p, const uvmrt_range_t *ranges, size_t n)
{
    const char *addr = a->base + p * PAGE;
    for (size_t i = 0; i < n; i++)
        if (addr >= (const char *)ranges[i].ptr && addr < (const char *)ranges[i].ptr + ranges[i].bytes)
            return 1;
    return 0;
}

/* The driver's eviction when the device is full: a clock hand sweeps the pages
 * in allocation order (so a sweep costs O(1) per evicted page, amortized),
 * never taking the pages the faulting work touches. Evicts in 2 MiB strides, as
 * the driver does. Returns the bytes written back. */
static uint64_t driver_evict(sim_t *s, uint64_t need, const uvmrt_range_t *ranges, size_t n, uint64_t t)
{
    const char *first = NULL;
    uint64_t written = 0, goal = need < (2u << 20) ? (2u << 20) : need;
    size_t total = s->total_pages;
    for (size_t seen = 0; seen < total && written < goal; seen++) {
        while (s->hand_alloc >= s->n_allocs || s->allocs[s->hand_alloc].base == NULL) { /* wrap; skip holes */
            if (s->hand_alloc >= s->n_allocs) s->hand_alloc = 0;
            else s->hand_alloc++;
            s->hand_page = 0;
        }
        sim_alloc_t *a = &s->allocs[s->hand_alloc];
        size_t p = s->hand_page++;
        if (s->hand_page >= a->bytes / PAGE) s->hand_alloc++, s->hand_page = 0;
        if (a->page[p] != PG_DEVICE || page_in(a, p, ranges, n)) continue;
        a->page[p] = PG_HOST;
        s->device_bytes -= PAGE;
        written += PAGE;
        if (first == NULL) first = a->base + p * PAGE;
    }
    um_add(s, UVMRT_UM_DTOH, UVMRT_UM_CAUSE_EVICTION, first, written, t, t + ns_for((double)written, s->prof->evict_d2h_bps));
    return written;
}

/* Remote access to host-homed ranges: pages stay on the host (populated there
 * when they held nothing). Returns the bytes that crossed the link. */
static uvmrt_status_t remote_bytes(sim_t *s, const uvmrt_range_t *r, size_t n, uint64_t *bytes)
{
    for (size_t i = 0; i < n; i++) {
        size_t p0, p1;
        sim_alloc_t *a = locate(s, &r[i], &p0, &p1);
        if (a == NULL) return UVMRT_ERR_INVALID;
        for (size_t p = p0; p < p1; p++) {
            if (a->page[p] == PG_DEVICE) continue; /* still on the device: a local access */
            a->page[p] = PG_HOST;
            *bytes += PAGE;
        }
    }
    return UVMRT_OK;
}

/* The disk tier's bytes from t on the drive (after what it has queued) at bps, through
 * host memory; returns when they are done (t when there are none, or no rate). */
static uint64_t disk_run(sim_t *s, uint64_t t, uint64_t bytes, double bps)
{
    if (bytes == 0 || !(bps > 0)) return t;
    uint64_t t0 = s->disk_t > t ? s->disk_t : t;
    s->disk_t = hm_run(s, t0, (double)bytes, bps, HM_CPU, NULL);
    return s->disk_t;
}

static uvmrt_status_t sim_touch(void *state, uvmrt_stream_t stream, const uvmrt_touch_t *w,
                                uvmrt_touch_result_t *res)
{
    sim_t *s = state;
    sim_timeline_t *l = line_of(s, stream);
    uint64_t t = ready_at(s, l);
    memset(res, 0, sizeof *res);
    t = disk_run(s, t, w->disk_read_bytes, s->prof->disk_read_bps); /* the work needs what it reads */
    uint64_t copied = 0, written = 0;
    for (size_t i = 0; i < w->n_local; i++) {
        size_t p0, p1;
        sim_alloc_t *a = locate(s, &w->local[i], &p0, &p1);
        if (a == NULL) return UVMRT_ERR_INVALID;
        uint64_t faulted = 0, here = 0;
        for (size_t p = p0; p < p1; p++) {
            if (a->page[p] == PG_DEVICE) continue;
            if (s->device_bytes + PAGE > s->prof->memory_bytes)
                written += driver_evict(s, PAGE, w->local, w->n_local, t);
            if (a->page[p] == PG_HOST) copied += PAGE, here += PAGE;
            a->page[p] = PG_DEVICE;
            s->device_bytes += PAGE;
            faulted += PAGE;
        }
        if (faulted > 0) {
            uint64_t groups = (faulted + s->prof->fault_group_bytes - 1) / s->prof->fault_group_bytes;
            res->fault_bytes += faulted;
            res->fault_count += groups;
            um_add(s, UVMRT_UM_GPU_FAULT, 0, w->local[i].ptr, groups, t, t);
            um_add(s, UVMRT_UM_HTOD, UVMRT_UM_CAUSE_COHERENCE, w->local[i].ptr, here, t,
                   t + ns_for((double)here, s->prof->fault_bps));
        }
    }
    /* Its reads and writes of host-homed ranges cross the link at the remote rates,
     * the two directions at once (reads queued behind the prefetches, writes beside
     * the evictions, below); the call's own work (and its demand faults) comes after them, not
     * under them: measured on the H200, a layer's remote traffic adds to its
     * compute (a conversion kernel before a GEMM, an epilogue after it). */
    uint64_t rd = 0, wr = 0;
    uvmrt_status_t st = remote_bytes(s, w->remote_read, w->n_remote_read, &rd);
    if (st == UVMRT_OK) st = remote_bytes(s, w->remote_write, w->n_remote_write, &wr);
    if (st != UVMRT_OK) return st;
    uint64_t c0 = t;
    if (rd > 0) {
        uint64_t r0 = s->h2d_engine_t > t ? s->h2d_engine_t : t;
        s->h2d_engine_t = hm_run(s, r0, (double)rd, s->prof->remote_read_bps, HM_H2D, NULL);
        c0 = s->h2d_engine_t;
    }
    if (wr > 0) {
        /* An eviction runs at what the host's page population allows (a fifth of the
         * link on the H200): the GPU's stores do not wait behind it but share the link
         * with its DMA, half each, while it runs. */
        uint64_t w0 = s->store_t > t ? s->store_t : t;
        double full = s->prof->remote_write_bps, left = (double)wr;
        if (s->d2h_engine_t > w0 && s->prof->pinned_d2h_bps > 0) {
            double beside = fmin(full, 0.5 * s->prof->pinned_d2h_bps);
            double fits = beside * (double)(s->d2h_engine_t - w0) * 1e-9, part = fmin(left, fits);
            w0 = hm_run(s, w0, part, beside, HM_D2H, NULL);
            left -= part;
        }
        s->store_t = left > 0 ? hm_run(s, w0, left, full, HM_D2H, NULL) : w0;
        if (s->store_t > c0) c0 = s->store_t;
    }
    uint64_t end = c0 + ns_for((double)copied, s->prof->fault_bps) + ns_for((double)written, s->prof->evict_d2h_bps) +
                   w->duration_ns;
    /* the driver tracing those faults for the counters, when they are on */
    if (s->um_on) end += res->fault_count * s->prof->fault_trace_ns;
    /* CPU work beside the GPU's: host memory, shared with the link; a measured time is
     * taken as is (it ran beside the link), and booked so that the link shares with it */
    if (w->host_bytes > 0 && w->host_ns > 0) {
        if (s->hm_on)
            hm_book(s, &s->hm_cpu, (double)t, (double)(t + w->host_ns), (double)w->host_bytes / (double)w->host_ns * 1e9,
                    NULL);
        if (t + w->host_ns > end) end = t + w->host_ns;
    } else if (w->host_bytes > 0 && s->prof->host_mem_bps > 0) {
        uint64_t cpu_end = hm_run(s, t, (double)w->host_bytes, s->prof->host_mem_bps, HM_CPU, l);
        if (cpu_end > end) end = cpu_end;
    }
    (void)disk_run(s, end, w->disk_write_bytes, s->prof->disk_write_bps); /* written back after it */
    l->t = end;
    return UVMRT_OK;
}

const uvmrt_backend_ops_t uvmrt__backend_sim = {
    .name = "sim",
    .caps = {.discard = 1, .remote_advice = 0, .touch = 1, .um_records = 1, .timing = 1, .event_query = 1},
    .open = sim_open,
    .close = sim_close,
    .mem_info = sim_mem_info,
    .alloc = sim_alloc,
    .free = sim_free,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .stream_create = sim_stream_create,
    .stream_destroy = sim_stream_destroy,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait = sim_stream_wait,
    .event_done = sim_event_done,
    .event_elapsed_ns = sim_elapsed,
    .stream_sync = sim_stream_sync,
    .move = sim_move,
    .discard = sim_discard,
    .touch = sim_touch,
    .now_ns = sim_now,
    .um_enable = sim_um_enable,
    .um_disable = sim_um_disable,
    .um_drain = sim_um_drain,
};
