/*
 * plan.c -- farthest-next-use planning over a recorded, cyclic step (see plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void uvmrt__plan_free(uvmrt_plan_t *p)
{
    if (p == NULL) return;
    free(p->start_resident);
    free(p->end_resident);
    free(p->host_homed);
    free(p->point_first);
    free(p->actions);
    free(p->use_first);
    free(p->use_event);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------ next use */
/* Each tensor's events, ascending (a counting sort of the uses by tensor): O(uses + n). */
static int use_lists(const uvmrt_plan_input_t *in, uvmrt_plan_t *out)
{
    size_t nt = (size_t)in->n_tensors, total = 0;
    for (int e = 0; e < in->m; e++) total += (size_t)in->events[e].n;
    out->use_first = calloc(nt + 2, sizeof *out->use_first);
    out->use_event = malloc((total + 1) * sizeof *out->use_event);
    if (out->use_first == NULL || out->use_event == NULL) return -1;
    for (int e = 0; e < in->m; e++)
        for (int i = 0; i < in->events[e].n; i++) out->use_first[in->events[e].tensors[i] + 2]++;
    for (size_t t = 0; t < nt; t++) out->use_first[t + 2] += out->use_first[t + 1];
    /* use_first[t + 1] is now t's start: fill, moving it to t's end = (t+1)'s start */
    for (int e = 0; e < in->m; e++)
        for (int i = 0; i < in->events[e].n; i++) out->use_event[out->use_first[in->events[e].tensors[i] + 1]++] = e;
    return 0;
}

int32_t uvmrt__plan_next_use(const uvmrt_plan_t *p, int e, int t)
{
    size_t lo = p->use_first[t], hi = p->use_first[t + 1], first = lo;
    if (lo == hi) return UVMRT_NEVER;
    while (lo < hi) { /* the first of t's events after e */
        size_t mid = lo + (hi - lo) / 2;
        if (p->use_event[mid] <= e) lo = mid + 1;
        else hi = mid;
    }
    if (lo < p->use_first[t + 1]) return p->use_event[lo] - e;
    return p->use_event[first] + p->m - e; /* the next step's first use (its only one: m) */
}

static unsigned access_of(const uvmrt_plan_event_t *ev, int t)
{
    for (int i = 0; i < ev->n; i++)
        if (ev->tensors[i] == t) return ev->access[i];
    return 0;
}

static int in_event(const uvmrt_plan_event_t *ev, int t)
{
    for (int i = 0; i < ev->n; i++)
        if (ev->tensors[i] == t) return 1;
    return 0;
}

/* ------------------------------------------------------------------ the builder */
/* Belady in O(uses log tensors): the resident tensors sit in a heap keyed by their
 * next use (farthest first), which changes only for the tensors of the event just
 * passed; and each point's look-ahead starts where the last one stopped (every
 * tensor of the events in between is resident: see plan_point). */
typedef struct builder {
    const uvmrt_plan_input_t *in;
    uvmrt_plan_t *plan;
    uint8_t *resident;
    uint64_t used;
    size_t cap;
    int64_t prev;     /* the event just passed, absolute (-1: the previous step's last) */
    int64_t *next;    /* per tensor: its first use after prev, absolute (INT64_MAX: none) */
    size_t *cursor;   /* per tensor: the index of next in its use list */
    int *heap, *pos;  /* the resident tensors; pos[t]: t's index in heap, -1 when not there */
    int n_heap;
    int64_t scan;     /* the first absolute event a look-ahead has not yet seen all resident */
    int *skipped;     /* pick_victim's scratch: room for the largest event */
} builder_t;

/* a before b in the heap: the farther next use, then the larger footprint, then the lower id */
static int heap_before(const builder_t *b, int x, int y)
{
    if (b->next[x] != b->next[y]) return b->next[x] > b->next[y];
    if (b->in->footprint[x] != b->in->footprint[y]) return b->in->footprint[x] > b->in->footprint[y];
    return x < y;
}

static void heap_set(builder_t *b, int i, int t)
{
    b->heap[i] = t;
    b->pos[t] = i;
}

static void heap_fix(builder_t *b, int i)
{
    int t = b->heap[i];
    while (i > 0 && heap_before(b, t, b->heap[(i - 1) / 2])) { /* up */
        heap_set(b, i, b->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) { /* down */
        int c = 2 * i + 1;
        if (c >= b->n_heap) break;
        if (c + 1 < b->n_heap && heap_before(b, b->heap[c + 1], b->heap[c])) c++;
        if (!heap_before(b, b->heap[c], t)) break;
        heap_set(b, i, b->heap[c]);
        i = c;
    }
    heap_set(b, i, t);
}

static void heap_push(builder_t *b, int t)
{
    b->heap[b->n_heap] = t;
    b->pos[t] = b->n_heap++;
    heap_fix(b, b->n_heap - 1);
}

static void heap_remove(builder_t *b, int t)
{
    int i = b->pos[t], last = b->heap[--b->n_heap];
    b->pos[t] = -1;
    if (i == b->n_heap) return;
    heap_set(b, i, last);
    heap_fix(b, i);
}

static void set_resident(builder_t *b, int t, int on)
{
    if (b->resident[t] == on) return;
    b->resident[t] = (uint8_t)on;
    if (on) {
        b->used += b->in->footprint[t];
        heap_push(b, t);
    } else {
        b->used -= b->in->footprint[t];
        heap_remove(b, t);
    }
}

/* Moves prev to the next event: its tensors' next uses move to their following one. */
static void advance(builder_t *b)
{
    const uvmrt_plan_t *p = b->plan;
    int64_t e = ++b->prev, m = b->in->m;
    const uvmrt_plan_event_t *ev = &b->in->events[e % m];
    for (int i = 0; i < ev->n; i++) {
        int t = ev->tensors[i];
        size_t first = p->use_first[t], n = p->use_first[t + 1] - first;
        b->cursor[t] = (b->cursor[t] + 1) % n;
        int64_t at = p->use_event[first + b->cursor[t]];
        b->next[t] = (e / m) * m + at + (b->cursor[t] == 0 ? m : 0);
        if (b->pos[t] >= 0) heap_fix(b, b->pos[t]);
    }
}

static int push(builder_t *b, int tensor, int kind, int target)
{
    uvmrt_plan_t *p = b->plan;
    if (p->n_actions == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        uvmrt_action_t *a = realloc(p->actions, cap * sizeof *a);
        if (a == NULL) return -1;
        p->actions = a;
        b->cap = cap;
    }
    p->actions[p->n_actions++] = (uvmrt_action_t){tensor, kind, target};
    return 0;
}

/* The resident tensor, not used by the event prev, whose next use after prev is the
 * farthest (ties: larger footprint, then lower id). -1 when there is none. */
static int pick_victim(builder_t *b, int32_t *victim_nu)
{
    const uvmrt_plan_event_t *ev = &b->in->events[(b->prev + b->in->m) % b->in->m];
    int *skipped = b->skipped, n_skipped = 0, best = -1;
    while (b->n_heap > 0) { /* the top, unless prev's event uses it: set aside, then back */
        int t = b->heap[0];
        if (!in_event(ev, t)) {
            best = t;
            break;
        }
        skipped[n_skipped++] = t;
        heap_remove(b, t);
    }
    for (int i = 0; i < n_skipped; i++) heap_push(b, skipped[i]);
    *victim_nu = best < 0 ? 0 : b->next[best] == INT64_MAX ? UVMRT_NEVER : (int32_t)(b->next[best] - b->prev);
    return best;
}

static int evict(builder_t *b, int victim, int32_t victim_nu, int target)
{
    const uvmrt_plan_input_t *in = b->in;
    int kind = UVMRT_ACT_EVICT;
    int prev = (int)((b->prev + in->m) % in->m);
    if (in->discard && victim_nu != UVMRT_NEVER) {
        unsigned acc = access_of(&in->events[(prev + victim_nu) % in->m], victim);
        if (!(acc & UVMRT_USE_READ)) kind = UVMRT_ACT_DISCARD;
    }
    set_resident(b, victim, 0);
    return push(b, victim, kind, target);
}

/* Issue point p (0..m): after event prev = p-1 (cyclic), look ahead one cycle.
 * The look-ahead starts at b->scan, not at p: the last point's look-ahead made or
 * found every tensor of the events before b->scan resident, and none of them can
 * have left since (a victim's next use is past the event being fetched for, and
 * theirs are before it), so looking at them again would change nothing. */
static int plan_point(builder_t *b, int p)
{
    const uvmrt_plan_input_t *in = b->in;
    int m = in->m;
    int64_t j0 = b->scan > p ? b->scan : p;
    for (int64_t j = j0; j <= (int64_t)p - 1 + m; j++) { /* absolute event index, this step's numbering */
        int d = (int)(j - (p - 1));
        const uvmrt_plan_event_t *ev = &in->events[j % m];
        for (int i = 0; i < ev->n; i++) {
            int t = ev->tensors[i];
            if (b->resident[t]) continue;
            while (b->used + in->footprint[t] > in->budget) {
                int32_t vnu;
                int v = pick_victim(b, &vnu);
                if (v < 0 || vnu <= d) { /* no beneficial room: stop looking ahead */
                    b->scan = j;
                    return 0;
                }
                if (evict(b, v, vnu, (int)j) != 0) return -1;
            }
            if (push(b, t, UVMRT_ACT_PREFETCH, (int)j) != 0) return -1;
            set_resident(b, t, 1);
        }
    }
    b->scan = (int64_t)p + m;
    return 0;
}

/* One Belady plan with the homed tensors left out of every event. */
static uvmrt_status_t build_once(const uvmrt_plan_input_t *full, const uint8_t *homed, uvmrt_plan_t *out,
                                 int *bad_event)
{
    memset(out, 0, sizeof *out);
    builder_t b;
    memset(&b, 0, sizeof b);
    size_t nt = (size_t)full->n_tensors, m = (size_t)full->m, total_uses = 0;
    for (size_t e = 0; e < m; e++) total_uses += (size_t)full->events[e].n;
    uvmrt_plan_event_t *ev = malloc(m * sizeof *ev);
    int *ts = malloc((total_uses + 1) * sizeof *ts);
    unsigned *acc = malloc((total_uses + 1) * sizeof *acc);
    uvmrt_status_t st = UVMRT_ERR_NOMEM;
    if (ev == NULL || ts == NULL || acc == NULL) goto done;
    size_t k = 0;
    for (size_t e = 0; e < m; e++) {
        ev[e] = (uvmrt_plan_event_t){0, ts + k, acc + k};
        for (int i = 0; i < full->events[e].n; i++) {
            int t = full->events[e].tensors[i];
            if (homed[t]) continue;
            ts[k] = t;
            acc[k++] = full->events[e].access[i];
            ev[e].n++;
        }
    }
    uvmrt_plan_input_t in_copy = *full;
    in_copy.events = ev;
    const uvmrt_plan_input_t *in = &in_copy;
    for (size_t e = 0; e < m; e++) {
        uint64_t ws = 0;
        for (int i = 0; i < ev[e].n; i++) ws += in->footprint[ev[e].tensors[i]];
        if (ws > in->budget) {
            if (bad_event) *bad_event = (int)e;
            st = UVMRT_ERR_BUDGET;
            goto done;
        }
    }
    out->m = in->m;
    out->n_tensors = in->n_tensors;
    out->start_resident = malloc(nt + 1);
    out->end_resident = malloc(nt + 1);
    out->host_homed = malloc(nt + 1);
    out->point_first = calloc(m + 2, sizeof *out->point_first);
    int max_n = 0;
    for (size_t e = 0; e < m; e++) max_n = ev[e].n > max_n ? ev[e].n : max_n;
    b.in = in;
    b.plan = out;
    b.resident = out->end_resident;
    b.prev = -1;
    b.skipped = malloc(((size_t)max_n + 1) * sizeof *b.skipped);
    b.next = malloc((nt + 1) * sizeof *b.next);
    b.cursor = calloc(nt + 1, sizeof *b.cursor);
    b.heap = malloc((nt + 1) * sizeof *b.heap);
    b.pos = malloc((nt + 1) * sizeof *b.pos);
    if (!out->start_resident || !out->end_resident || !out->host_homed || !out->point_first || use_lists(in, out) != 0 ||
        !b.next || !b.cursor || !b.heap || !b.pos || !b.skipped)
        goto nomem;
    memcpy(out->start_resident, in->resident0, nt);
    memset(b.resident, 0, nt);
    memcpy(out->host_homed, homed, nt);
    for (size_t t = 0; t < nt; t++) { /* next uses after the previous step's last event */
        b.pos[t] = -1;
        b.next[t] = out->use_first[t] == out->use_first[t + 1] ? INT64_MAX : out->use_event[out->use_first[t]];
    }
    for (size_t t = 0; t < nt; t++)
        if (in->resident0[t]) set_resident(&b, (int)t, 1);

    /* Newly homed tensors leave the device first (written back, so that their host
     * pages hold the data the GPU will then reach over the link). */
    for (size_t t = 0; t < nt; t++)
        if (homed[t] && b.resident[t]) {
            set_resident(&b, (int)t, 0);
            if (push(&b, (int)t, UVMRT_ACT_EVICT, 0) != 0) goto nomem;
        }
    /* A start over budget (e.g. a smaller budget than the record's): shed the
     * farthest tensors first, at point 0. */
    while (b.used > in->budget) {
        int32_t vnu;
        int v = pick_victim(&b, &vnu);
        if (v < 0 || evict(&b, v, vnu, 0) != 0) goto nomem;
    }
    for (int p = 0; p <= in->m; p++) {
        if (p > 0) {
            out->point_first[p] = out->n_actions;
            advance(&b); /* prev = p - 1 */
        }
        if (plan_point(&b, p) != 0) goto nomem;
    }
    out->point_first[in->m + 1] = out->n_actions;

    /* The cost model: link seconds per direction for one step. */
    for (size_t a = 0; a < out->n_actions; a++) {
        double bytes = (double)in->footprint[out->actions[a].tensor];
        if (out->actions[a].kind == UVMRT_ACT_PREFETCH && in->prefetch_bps > 0) out->est_h2d_s += bytes / in->prefetch_bps;
        if (out->actions[a].kind == UVMRT_ACT_EVICT && in->evict_bps > 0) out->est_d2h_s += bytes / in->evict_bps;
    }
    for (size_t e = 0; e < m; e++)
        for (int i = 0; i < full->events[e].n; i++) {
            int t = full->events[e].tensors[i];
            double bytes = (double)in->footprint[t];
            if (!homed[t]) continue;
            if ((full->events[e].access[i] & UVMRT_USE_READ) && in->remote_read_bps > 0)
                out->est_h2d_s += bytes / in->remote_read_bps;
            if ((full->events[e].access[i] & UVMRT_USE_WRITE) && in->remote_write_bps > 0)
                out->est_d2h_s += bytes / in->remote_write_bps;
        }
    st = UVMRT_OK;
    goto done;
nomem:
    uvmrt__plan_free(out);
    st = UVMRT_ERR_NOMEM;
done:
    free(b.skipped);
    free(b.next);
    free(b.cursor);
    free(b.heap);
    free(b.pos);
    free(ev);
    free(ts);
    free(acc);
    return st;
}

static double plan_cost(const uvmrt_plan_t *p) { return p->est_h2d_s > p->est_d2h_s ? p->est_h2d_s : p->est_d2h_s; }

typedef struct candidate {
    int tensor;
    double saving; /* seconds of link time saved by homing it, alone */
} candidate_t;

static int by_saving(const void *a, const void *b)
{
    const candidate_t *x = a, *y = b;
    if (x->saving != y->saving) return x->saving > y->saving ? -1 : 1;
    return x->tensor - y->tensor;
}

/* Tensors whose traffic in plan p would be cheaper over the link, best first. */
static size_t homing_candidates(const uvmrt_plan_input_t *in, const uvmrt_plan_t *p, const uint8_t *homed,
                                candidate_t *out)
{
    size_t nt = (size_t)in->n_tensors, n = 0;
    double *migrate = calloc(nt + 1, sizeof *migrate), *remote = calloc(nt + 1, sizeof *remote);
    if (migrate == NULL || remote == NULL) goto done;
    for (size_t a = 0; a < p->n_actions; a++) {
        int t = p->actions[a].tensor;
        double bytes = (double)in->footprint[t];
        if (p->actions[a].kind == UVMRT_ACT_PREFETCH) migrate[t] += bytes / in->prefetch_bps;
        if (p->actions[a].kind == UVMRT_ACT_EVICT) migrate[t] += bytes / in->evict_bps;
    }
    for (int e = 0; e < in->m; e++)
        for (int i = 0; i < in->events[e].n; i++) {
            int t = in->events[e].tensors[i];
            double bytes = (double)in->footprint[t];
            if (in->events[e].access[i] & UVMRT_USE_READ) remote[t] += bytes / in->remote_read_bps;
            if (in->events[e].access[i] & UVMRT_USE_WRITE) remote[t] += bytes / in->remote_write_bps;
        }
    for (size_t t = 0; t < nt; t++)
        if (in->remote_ok[t] && !homed[t] && remote[t] > 0 && remote[t] < migrate[t])
            out[n++] = (candidate_t){(int)t, migrate[t] - remote[t]};
    qsort(out, n, sizeof *out, by_saving);
done:
    free(migrate);
    free(remote);
    return n;
}

/* Plans with the trial homed set; keeps it (in homed and out) when the plan's
 * link time improves. */
static int try_homing(const uvmrt_plan_input_t *in, const uint8_t *trial, uint8_t *homed, uvmrt_plan_t *out,
                      int *trials)
{
    uvmrt_plan_t p;
    ++*trials;
    if (build_once(in, trial, &p, NULL) != UVMRT_OK) return 0;
    if (plan_cost(&p) < plan_cost(out) * 0.999) {
        uvmrt__plan_free(out);
        *out = p;
        memcpy(homed, trial, (size_t)in->n_tensors);
        return 1;
    }
    uvmrt__plan_free(&p);
    return 0;
}

uvmrt_status_t uvmrt__plan_build(const uvmrt_plan_input_t *in, uvmrt_plan_t *out, int *bad_event)
{
    memset(out, 0, sizeof *out);
    if (in == NULL || in->m < 1 || in->n_tensors < 0) return UVMRT_ERR_INVALID;
    size_t nt = (size_t)in->n_tensors;
    uint8_t *homed = calloc(nt + 1, 1), *trial = calloc(nt + 1, 1);
    candidate_t *cand = calloc(nt + 1, sizeof *cand);
    uvmrt_status_t st = UVMRT_ERR_NOMEM;
    if (homed == NULL || trial == NULL || cand == NULL) goto done;
    if (in->homed_fixed != NULL)
        for (size_t t = 0; t < nt; t++) homed[t] = in->homed_fixed[t] && in->remote_ok && in->remote_ok[t];
    if (in->homed_forced != NULL)
        for (size_t t = 0; t < nt; t++) homed[t] |= in->homed_forced[t];
    if ((st = build_once(in, homed, out, bad_event)) != UVMRT_OK) goto done;
    int homing = in->homed_fixed == NULL && in->remote_ok != NULL && in->prefetch_bps > 0 && in->evict_bps > 0 && in->remote_read_bps > 0 &&
                 in->remote_write_bps > 0;
    /* Home the best candidates; if the plan as a whole does not improve, try the
     * better half of them, and so on. Then give back to migration the homed
     * tensors whose homing no longer pays (homing frees budget, so others may
     * now fit). Every trial re-plans once: their number is capped. */
    int trials = 0;
    const int max_trials = 48;
    for (int round = 0; homing && round < 8 && trials < max_trials; round++) {
        size_t n = homing_candidates(in, out, homed, cand);
        int improved = 0;
        for (size_t k = n; k >= 1 && !improved && trials < max_trials; k /= 2) {
            memcpy(trial, homed, nt);
            for (size_t i = 0; i < k; i++) trial[cand[i].tensor] = 1;
            improved = try_homing(in, trial, homed, out, &trials);
        }
        if (!improved) break;
    }
    for (size_t t = 0; homing && t < nt && trials < max_trials; t++) {
        if (!homed[t] || (in->homed_forced && in->homed_forced[t])) continue;
        memcpy(trial, homed, nt);
        trial[t] = 0;
        try_homing(in, trial, homed, out, &trials);
    }
    st = UVMRT_OK;
done:
    free(homed);
    free(trial);
    free(cand);
    return st;
}

uint64_t uvmrt__plan_host_peak(const uvmrt_plan_t *p, const uint64_t *footprint, uint8_t *off_gpu)
{
    size_t nt = (size_t)p->n_tensors;
    uint8_t *res = malloc(nt + 1);
    uint64_t total = 0, cur = 0;
    for (size_t t = 0; t < nt; t++) {
        total += footprint[t];
        int r = p->start_resident[t] && !p->host_homed[t];
        if (res) res[t] = (uint8_t)r;
        if (off_gpu) off_gpu[t] = (uint8_t)!r;
        if (r) cur += footprint[t];
    }
    if (res == NULL) return total; /* no memory to walk the plan: the most it could need */
    uint64_t least = cur;
    /* each point's evictions first (the least resident), then its prefetches */
    for (int q = 0; q <= p->m; q++) {
        for (int pass = 0; pass < 2; pass++)
            for (size_t a = p->point_first[q]; a < p->point_first[q + 1]; a++) {
                const uvmrt_action_t *x = &p->actions[a];
                int in = x->kind == UVMRT_ACT_PREFETCH;
                if (in != pass || res[x->tensor] == in) continue;
                res[x->tensor] = (uint8_t)in;
                cur = in ? cur + footprint[x->tensor] : cur - footprint[x->tensor];
                if (!in && off_gpu) off_gpu[x->tensor] = 1;
            }
        if (cur < least) least = cur;
    }
    free(res);
    return total - least;
}
