/*
 * monitor.c -- the snapshot publisher behind uvmrt-top: one shared-memory
 * segment per context, rewritten under a seqlock at every step end (layout and
 * rules in monitor.h).
 *
 * Cost: the segment is created and mapped once; a publish is plain stores into
 * the mapping (two atomic stores of the sequence counter, a loop over the
 * step's (layer, phase) rows) with no allocation and no system call.
 * clock_gettime(CLOCK_REALTIME) is served by the vDSO. Only when the layer
 * count outgrows the segment is it grown (ftruncate + mmap), and the layers'
 * mechanisms are recomputed only when the plan or the tensors changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"
#include "internal.h"
#include "memsum.h"
#include "monitor.h"
#include "tier.h"

struct uvmrt_monitor {
    char name[UVMRT_MON_NAME_MAX];
    pid_t owner;                  /* the process that created it (a fork's child must not unlink it) */
    int fd;
    uvmrt_mon_header_t *hdr;
    size_t bytes;
    uint32_t cap;                 /* rows mapped */
    int named_layers;             /* rows whose name is written */
    uint16_t *tbits;              /* per tensor mechanism scratch, grown only when tensors are added */
    int cap_tbits;
    uint64_t mech_sig;            /* what the mechanisms were computed from */
    int mech_valid;
    int warned_grow;
};

/* Contexts created by this process so far: names the n-th further one. The one
 * piece of process-wide state here; the platform forces it (names are per pid). */
static unsigned monitor_count;

static uint64_t unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uvmrt_mon_layer_t *rows_of(const struct uvmrt_monitor *m)
{
    return (uvmrt_mon_layer_t *)((char *)m->hdr + UVMRT_MON_HEADER_BYTES);
}

/* Makes room for cap rows (ftruncate and a new mapping); 0 on success. The old
 * mapping stays valid until the new one is in place. */
static int monitor_map(uvmrt_context_t *ctx, struct uvmrt_monitor *m, uint32_t cap)
{
    size_t bytes = UVMRT_MON_BYTES(cap);
    if (ftruncate(m->fd, (off_t)bytes) != 0) {
        LOG_WARN(&ctx->log, "monitor: cannot size shared memory %s to %zu bytes: %s", m->name, bytes, strerror(errno));
        return -1;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED) {
        LOG_WARN(&ctx->log, "monitor: cannot map shared memory %s (%zu bytes): %s", m->name, bytes, strerror(errno));
        return -1;
    }
    if (m->hdr != NULL) munmap(m->hdr, m->bytes);
    m->hdr = p;
    m->bytes = bytes;
    m->cap = cap;
    return 0;
}

static void monitor_free(struct uvmrt_monitor *m)
{
    if (m->hdr != NULL) munmap(m->hdr, m->bytes);
    if (m->fd >= 0) close(m->fd);
    free(m->tbits);
    free(m);
}

void uvmrt__monitor_open(uvmrt_context_t *ctx)
{
    if (!ctx->cfg.monitor || ctx->monitor != NULL) return;
    struct uvmrt_monitor *m = calloc(1, sizeof *m);
    if (m == NULL) {
        LOG_WARN(&ctx->log, "monitor: out of memory: this run is not published for uvmrt-top");
        return;
    }
    m->fd = -1;
    m->owner = getpid();
    unsigned n = __atomic_fetch_add(&monitor_count, 1, __ATOMIC_RELAXED);
    if (n == 0) snprintf(m->name, sizeof m->name, "/" UVMRT_MON_PREFIX "%u.%d", (unsigned)getuid(), (int)m->owner);
    else snprintf(m->name, sizeof m->name, "/" UVMRT_MON_PREFIX "%u.%d.%u", (unsigned)getuid(), (int)m->owner, n);
    /* A segment of that name can only be a dead process's whose pid we reuse:
     * replace it (O_EXCL after the unlink: never share one by accident). */
    shm_unlink(m->name);
    m->fd = shm_open(m->name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (m->fd < 0) {
        LOG_WARN(&ctx->log, "monitor: cannot create shared memory %s: %s: this run is not published for "
                            "uvmrt-top (UVMRT_MONITOR=0 turns publishing off)",
                 m->name, strerror(errno));
        monitor_free(m);
        return;
    }
    /* shm_open's mode is filtered by the umask; set 0600 exactly */
    fchmod(m->fd, 0600);
    uint32_t cap = UVMRT_MON_LAYERS0;
    while (cap < (uint32_t)ctx->tensors.n_layers) cap *= 2;
    if (monitor_map(ctx, m, cap) != 0) {
        shm_unlink(m->name);
        monitor_free(m);
        return;
    }
    uvmrt_mon_header_t *h = m->hdr; /* zero-filled by ftruncate */
    h->version = UVMRT_MON_VERSION;
    h->header_bytes = (uint32_t)UVMRT_MON_HEADER_BYTES;
    h->row_bytes = sizeof(uvmrt_mon_layer_t);
    uvmrt_mon_snap_t *s = &h->snap;
    s->pid = (int32_t)m->owner;
    s->cap_layers = cap;
    s->context_index = n;
    uvmrt__copy_utf8(s->program, sizeof s->program, uvmrt__program_name());
    uvmrt__copy_utf8(s->backend, sizeof s->backend, ctx->be.ops->name);
    uvmrt__copy_utf8(s->policy, sizeof s->policy, uvmrt_policy_name(ctx->cfg.policy));
    uvmrt__copy_utf8(s->profile, sizeof s->profile, ctx->profile->name);
    s->start_unix_ns = unix_ns();
    /* the magic last: a reader that sees it sees an initialised header */
    __atomic_store_n(&h->magic, UVMRT_MON_MAGIC, __ATOMIC_RELEASE);
    ctx->monitor = m;
    uvmrt__monitor_publish(ctx);
    LOG_INFO(&ctx->log, "monitor: publishing to shared memory %s (uvmrt-top shows it)", m->name);
}

void uvmrt__monitor_close(uvmrt_context_t *ctx)
{
    struct uvmrt_monitor *m = ctx->monitor;
    if (m == NULL) return;
    if (getpid() == m->owner) shm_unlink(m->name);
    monitor_free(m);
    ctx->monitor = NULL;
}

const char *uvmrt__monitor_name(const uvmrt_context_t *ctx)
{
    return ctx && ctx->monitor ? ctx->monitor->name : NULL;
}

uvmrt_status_t uvmrt_context_set_total_steps(uvmrt_context_t *ctx, uint64_t steps)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    ctx->total_steps = steps;
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ publishing */
/* The layers' mechanisms, recomputed only when what they follow from changed
 * (the plan, the tensors, a placement). The scratch grows only after tensors
 * were added, never on a step that only repeats. */
static void refresh_mechanisms(uvmrt_context_t *ctx, struct uvmrt_monitor *m, uint32_t n_layers,
                               uint64_t host_homed_sig)
{
    uint64_t sig = ctx->sched.plans_built * 0x9e3779b97f4a7c15ull ^ (uint64_t)ctx->sched.have_plan << 1 ^
                   (uint64_t)ctx->tensors.n << 20 ^ ctx->tensors.allocated_bytes * 31 ^ host_homed_sig * 0x100000001b3ull ^
                   (uint64_t)n_layers << 40;
    if (m->mech_valid && sig == m->mech_sig) return;
    if (ctx->tensors.n > m->cap_tbits) {
        uint16_t *p = realloc(m->tbits, (size_t)ctx->tensors.n * sizeof *p);
        if (p == NULL) return; /* keep the old strings; try again next step */
        m->tbits = p;
        m->cap_tbits = ctx->tensors.n;
    }
    uvmrt_mon_layer_t *rows = rows_of(m);
    /* per layer union of its tensors' bits: one pass over the tensors */
    unsigned *lb = calloc((size_t)n_layers + 1, sizeof *lb);
    if (lb == NULL) return; /* keep the old strings; try again next step */
    if (ctx->tensors.n > 0) uvmrt__mechanisms(ctx, m->tbits);
    for (int id = 0; id < ctx->tensors.n; id++) {
        int l = ctx->tensors.by_id[id]->layer;
        if (ctx->tensors.by_id[id]->magic != UVMRT_TENSOR_MAGIC || l < 0 || l >= (int)n_layers) continue;
        lb[l] |= m->tbits[id];
    }
    for (uint32_t l = 0; l < n_layers; l++) uvmrt_mechanism_name(lb[l], rows[l].mechanism, sizeof rows[l].mechanism);
    free(lb);
    m->mech_sig = sig;
    m->mech_valid = 1;
}

/* Each layer's host bytes now and the plan's (rows[0..n_layers)). */
void uvmrt__monitor_layer_host(const uvmrt_context_t *ctx, uvmrt_mon_layer_t *rows, uint32_t n_layers)
{
    for (uint32_t l = 0; l < n_layers; l++) rows[l].host_bytes = rows[l].plan_host_bytes = 0;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC || t->layer < 0 || t->layer >= (int)n_layers) continue;
        /* a disk-tier tensor counts as the plan's total does (uvmrt__tier_plan_host_peak):
         * not its footprint where its pages go back, its copies in flight being the
         * context's window, not a layer's */
        if (!t->resident) rows[t->layer].host_bytes += uvmrt__tier_host_share(ctx, t, 0);
        if (ctx->sched.have_plan && ctx->sched.plan_off_gpu && id < ctx->sched.plan.n_tensors &&
            ctx->sched.plan_off_gpu[id])
            rows[t->layer].plan_host_bytes += uvmrt__tier_host_share(ctx, t, 1);
    }
}

void uvmrt__monitor_publish(uvmrt_context_t *ctx)
{
    struct uvmrt_monitor *m = ctx->monitor;
    if (m == NULL) return;
    uint32_t n_layers = (uint32_t)ctx->tensors.n_layers;
    if (n_layers > m->cap) {
        uint32_t cap = m->cap;
        while (cap < n_layers) cap *= 2;
        /* Growing is done between publishes (seq even): readers either keep the
         * old, smaller mapping (still valid) or re-map. */
        if (monitor_map(ctx, m, cap) != 0) {
            if (!m->warned_grow)
                LOG_WARN(&ctx->log, "monitor: %s shows only the first %u of %u layers", m->name, m->cap, n_layers);
            m->warned_grow = 1;
            n_layers = m->cap;
        }
    }
    uvmrt_mon_header_t *h = m->hdr;
    uvmrt_mon_snap_t *s = &h->snap;
    uvmrt_mon_layer_t *rows = rows_of(m);
    uint64_t host_homed = 0;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic == UVMRT_TENSOR_MAGIC && t->host_homed) host_homed += t->footprint;
    }

    /* seqlock: odd while writing; the release fence keeps the data stores after it */
    uint64_t seq = h->seq;
    __atomic_store_n(&h->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    s->cap_layers = m->cap;
    for (int l = m->named_layers; l < (int)n_layers; l++) {
        memset(&rows[l], 0, sizeof rows[l]);
        uvmrt__copy_utf8(rows[l].name, sizeof rows[l].name, ctx->tensors.layers[l].name);
    }
    if ((int)n_layers > m->named_layers) m->named_layers = (int)n_layers;
    refresh_mechanisms(ctx, m, n_layers, host_homed);
    s->n_layers = n_layers;
    s->publish_unix_ns = unix_ns();
    s->budget_bytes = ctx->budget;
    s->allocated_bytes = ctx->tensors.allocated_bytes;
    s->host_homed_bytes = host_homed;
    s->resident_bytes = ctx->res.bytes;
    s->peak_resident_bytes = ctx->res.peak_bytes;
    s->step = uvmrt__steps_done(ctx);
    s->total_steps = ctx->total_steps;
    s->in_step = (uint64_t)ctx->sched.in_step;
    s->plans_built = ctx->sched.plans_built;
    s->host_bytes = uvmrt__host_bytes(ctx);
    s->peak_host_bytes = ctx->res.host_peak_bytes;
    s->plan_host_bytes = uvmrt__plan_host_bytes(ctx);
    s->host_external_bytes = ctx->choice.host_external_bytes;
    s->host_budget_bytes = ctx->host_budget;
    uvmrt__monitor_layer_host(ctx, rows, n_layers);
    uvmrt__copy_utf8(s->fault_source, sizeof s->fault_source, uvmrt__faults_source(ctx));
    if (s->step > 0) {
        /* called by step_end after the fold, before the step's counters are cleared */
        const uvmrt_step_stats_t *st = &ctx->stats.cur;
        s->step_ns = st->step_ns;
        s->wait_ns = st->wait_ns;
        s->prefetch_bytes = st->prefetch_bytes;
        s->evict_bytes = st->evict_bytes;
        s->discard_bytes = st->discard_bytes;
        s->fault_count = st->fault_count;
        s->fault_bytes = st->fault_bytes;
        s->remote_read_bytes = st->remote_read_bytes;
        s->remote_write_bytes = st->remote_write_bytes;
        s->gpu_faults = st->gpu_faults;
        s->to_device_bytes = st->prefetch_bytes + st->fault_bytes + st->remote_read_bytes;
        s->to_host_bytes = st->evict_bytes + st->remote_write_bytes;
        s->step_peak_resident_bytes = st->peak_resident_bytes;
        if (s->step >= 2) {
            s->steady_steps++;
            s->steady_ns += st->step_ns;
        }
        for (uint32_t l = 0; l < n_layers; l++) {
            uvmrt_mon_layer_t *r = &rows[l];
            r->calls = r->duration_ns = r->wait_ns = r->prefetch_bytes = r->evict_bytes = r->discard_bytes = 0;
            r->fault_count = r->fault_bytes = r->remote_read_bytes = r->remote_write_bytes = r->gpu_faults = 0;
            for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
                int k = (int)l * UVMRT_PHASE_COUNT + p;
                if (k >= ctx->stats.n_cur_rows) break;
                const uvmrt_layer_stats_t *c = &ctx->stats.cur_rows[k];
                r->calls += c->calls;
                r->duration_ns += c->duration_ns;
                r->wait_ns += c->wait_ns;
                r->prefetch_bytes += c->prefetch_bytes;
                r->evict_bytes += c->evict_bytes;
                r->discard_bytes += c->discard_bytes;
                r->fault_count += c->fault_count;
                r->fault_bytes += c->fault_bytes;
                r->remote_read_bytes += c->remote_read_bytes;
                r->remote_write_bytes += c->remote_write_bytes;
                r->gpu_faults += c->gpu_faults;
            }
        }
    }
    __atomic_store_n(&h->seq, seq + 2, __ATOMIC_RELEASE);
}

static void observe_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    (void)e;
    uvmrt__monitor_publish(ctx);
}

const uvmrt_observer_t uvmrt__monitor_observer = {"monitor", NULL, NULL, NULL, observe_end, NULL};
