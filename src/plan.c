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

uvmrt_status_t uvmrt_plan_build(const uvmrt_plan_input_t *in, uvmrt_plan_t *out, int *bad_event)
{
    memset(out, 0, sizeof *out);
    if (in == NULL || in->m < 1 || in->n_tensors < 0) return UVMRT_ERR_INVALID;
    for (int e = 0; e < in->m; e++) {
        uint64_t ws = 0;
        for (int i = 0; i < in->events[e].n; i++) ws += in->footprint[in->events[e].tensors[i]];
        if (ws > in->budget) {
            if (bad_event) *bad_event = e;
            return UVMRT_ERR_BUDGET;
        }
    }
    size_t nt = (size_t)in->n_tensors;
    out->m = in->m;
    out->n_tensors = in->n_tensors;
    out->start_resident = malloc(nt + 1);
    out->end_resident = malloc(nt + 1);
    out->point_first = calloc((size_t)in->m + 2, sizeof *out->point_first);
    out->next_use = next_use_table(in);
    builder_t b = {in, out, out->end_resident, 0, 0};
    if (!out->start_resident || !out->end_resident || !out->point_first || !out->next_use) goto nomem;
    memcpy(out->start_resident, in->resident0, nt);
    memcpy(b.resident, in->resident0, nt);
    for (size_t t = 0; t < nt; t++)
        if (b.resident[t]) b.used += in->footprint[t];

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
    return UVMRT_OK;
nomem:
    uvmrt_plan_free(out);
    return UVMRT_ERR_NOMEM;
}
