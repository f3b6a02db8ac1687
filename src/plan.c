/*
 * plan.c -- farthest-next-use planning over a recorded, cyclic step (see plan.h).
 */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void uvmrt_plan_free(uvmrt_plan_t *p)
{
    if (p == NULL) return;
    free(p->start_resident);
    free(p->end_resident);
    free(p->host_homed);
    free(p->point_first);
    free(p->actions);
    free(p->next_use);
    memset(p, 0, sizeof *p);
}

/* next_use[e][t] = smallest d in 1..m with t used by event (e+d) mod m. */
static int32_t *next_use_table(const uvmrt_plan_input_t *in)
{
    size_t m = (size_t)in->m, nt = (size_t)in->n_tensors;
    int32_t *nu = malloc(m * nt * sizeof *nu + 1);
    uint8_t *used = calloc(m * nt + 1, 1);
    if (nu == NULL || used == NULL) {
        free(nu);
        free(used);
        return NULL;
    }
    for (size_t e = 0; e < m; e++)
        for (int i = 0; i < in->events[e].n; i++) used[e * nt + (size_t)in->events[e].tensors[i]] = 1;
    for (size_t t = 0; t < nt; t++) {
        size_t next = SIZE_MAX; /* position of the next use in the doubled sequence */
        for (size_t e2 = 2 * m; e2-- > 0;) {
            if (e2 < m) nu[e2 * nt + t] = next == SIZE_MAX ? UVMRT_NEVER : (int32_t)(next - e2);
            if (used[(e2 % m) * nt + t]) next = e2;
        }
    }
    free(used);
    return nu;
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

typedef struct builder {
    const uvmrt_plan_input_t *in;
    uvmrt_plan_t *plan;
    uint8_t *resident;
    uint64_t used;
    size_t cap;
} builder_t;

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

/* The resident tensor, not used by event `prev`, whose next use after prev is the
 * farthest (ties: larger footprint, then lower id). -1 when there is none. */
static int pick_victim(const builder_t *b, int prev, int32_t *victim_nu)
{
    const uvmrt_plan_input_t *in = b->in;
    int best = -1;
    int32_t best_nu = 0;
    for (int t = 0; t < in->n_tensors; t++) {
        if (!b->resident[t] || in_event(&in->events[prev], t)) continue;
        int32_t nu = uvmrt_plan_next_use(b->plan, prev, t);
        if (best < 0 || nu > best_nu || (nu == best_nu && in->footprint[t] > in->footprint[best])) {
            best = t;
            best_nu = nu;
        }
    }
    *victim_nu = best_nu;
    return best;
}

static int evict(builder_t *b, int prev, int victim, int32_t victim_nu, int target)
{
    const uvmrt_plan_input_t *in = b->in;
    int kind = UVMRT_ACT_EVICT;
    if (in->discard && victim_nu != UVMRT_NEVER) {
        unsigned acc = access_of(&in->events[(prev + victim_nu) % in->m], victim);
        if (!(acc & UVMRT_USE_READ)) kind = UVMRT_ACT_DISCARD;
    }
    b->resident[victim] = 0;
    b->used -= in->footprint[victim];
    return push(b, victim, kind, target);
}

/* Issue point p (0..m): after event prev = p-1 (cyclic), look ahead one cycle. */
static int plan_point(builder_t *b, int p)
{
    const uvmrt_plan_input_t *in = b->in;
    int m = in->m;
    int prev = (p - 1 + m) % m;
    for (int d = 1; d <= m; d++) {
        int j = p - 1 + d; /* absolute event index, this step's numbering */
        const uvmrt_plan_event_t *ev = &in->events[j % m];
        for (int i = 0; i < ev->n; i++) {
            int t = ev->tensors[i];
            if (b->resident[t]) continue;
            while (b->used + in->footprint[t] > in->budget) {
                int32_t vnu;
                int v = pick_victim(b, prev, &vnu);
                if (v < 0 || vnu <= d) return 0; /* no beneficial room: stop looking ahead */
                if (evict(b, prev, v, vnu, j) != 0) return -1;
            }
            if (push(b, t, UVMRT_ACT_PREFETCH, j) != 0) return -1;
            b->resident[t] = 1;
            b->used += in->footprint[t];
        }
    }
    return 0;
}

/* One Belady plan with the homed tensors left out of every event. */
static uvmrt_status_t build_once(const uvmrt_plan_input_t *full, const uint8_t *homed, uvmrt_plan_t *out,
                                 int *bad_event)
{
    memset(out, 0, sizeof *out);
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
    out->next_use = next_use_table(in);
    builder_t b = {in, out, out->end_resident, 0, 0};
    if (!out->start_resident || !out->end_resident || !out->host_homed || !out->point_first || !out->next_use)
        goto nomem;
    memcpy(out->start_resident, in->resident0, nt);
    memcpy(b.resident, in->resident0, nt);
    memcpy(out->host_homed, homed, nt);
    for (size_t t = 0; t < nt; t++)
        if (b.resident[t]) b.used += in->footprint[t];

    /* Newly homed tensors leave the device first (written back, so that their host
     * pages hold the data the GPU will then reach over the link). */
    for (size_t t = 0; t < nt; t++)
        if (homed[t] && b.resident[t]) {
            b.resident[t] = 0;
            b.used -= in->footprint[t];
            if (push(&b, (int)t, UVMRT_ACT_EVICT, 0) != 0) goto nomem;
        }
    /* A start over budget (e.g. a smaller budget than the record's): shed the
     * farthest tensors first, at point 0. */
    while (b.used > in->budget) {
        int32_t vnu;
        int v = pick_victim(&b, in->m - 1, &vnu);
        if (v < 0 || evict(&b, in->m - 1, v, vnu, 0) != 0) goto nomem;
    }
    for (int p = 0; p <= in->m; p++) {
        if (p > 0) out->point_first[p] = out->n_actions;
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
    uvmrt_plan_free(out);
    st = UVMRT_ERR_NOMEM;
done:
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
        uvmrt_plan_free(out);
        *out = p;
        memcpy(homed, trial, (size_t)in->n_tensors);
        return 1;
    }
    uvmrt_plan_free(&p);
    return 0;
}

uvmrt_status_t uvmrt_plan_build(const uvmrt_plan_input_t *in, uvmrt_plan_t *out, int *bad_event)
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
