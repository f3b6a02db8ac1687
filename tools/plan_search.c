/*
 * plan_search.c -- uvmrt-plan's search of a model's mechanisms: where each layer's
 * AdamW runs (the top K layers on the CPU, as uvmrt-gpt's --cpu-layers and
 * uvmrt.torch choose it) and how many layers recompute (the first N, as uvmrt-gpt's
 * --recompute), through uvmrt_choose(3) -- the library's own rehearsal of each
 * combination on a sim model of the machine, the way the trainers and the PyTorch
 * binding call it. Host-homing is the planner's, in every rehearsal (and the CPU
 * layers' tensors are host-homed by placement). The candidates are the trainers':
 * K in {0, n/8, ..., n} of the n placeable layers ({0, n/4, ..., n} when quick), N in
 * {0, m/4, m/2, 3m/4, m} of the m recomputable ones ({0, m/2, m} when quick).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "uvmrt.h"

/* {0, n/parts, 2n/parts, ..., n}, rounded, distinct, into v (parts + 1 entries at
 * most); the count. */
static size_t levels(size_t n, int parts, int *v)
{
    size_t c = 0;
    for (int k = 0; k <= parts; k++) {
        int x = (int)(((size_t)k * n + (size_t)parts / 2) / (size_t)parts);
        if (c == 0 || v[c - 1] != x) v[c++] = x;
    }
    return c;
}

/* The mechanisms of knob values (values[s->knob_cpu], values[s->knob_rc]; a knob not
 * searched is 0). */
static mech_t mech_of(const search_t *s, const int *values)
{
    return (mech_t){1, s->knob_cpu >= 0 ? values[s->knob_cpu] : 0, s->knob_rc >= 0 ? values[s->knob_rc] : 0};
}

/* uvmrt_rehearse_fn: the model's step with these mechanisms, replayed on the model
 * context as uvmrt-plan replays it. */
static uvmrt_status_t rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    const search_t *s = user;
    mech_t mech = mech_of(s, values);
    record_t r;
    int rc = model_build(s->m, s->batch, &mech, 1, &r);
    if (rc == -2) return UVMRT_ERR_BUDGET; /* a tensor over the library's limit: does not fit */
    if (rc != 0) return UVMRT_ERR_NOMEM;
    uvmrt_status_t st = plan_replay(model, &r, steps);
    record_free(&r);
    return st;
}

mech_t search_lightest(const model_t *m)
{
    return (mech_t){1, (int)model_placeable_layers(m), (int)model_recomputable_layers(m)};
}

void search_free(search_t *s)
{
    free(s->cand);
    free(s->cand_ns);
    s->cand = NULL;
    s->cand_ns = NULL;
    s->n_cand = 0;
}

uvmrt_status_t plan_search(uvmrt_context_t *ctx, search_t *s)
{
    int cpu_v[9], rc_v[9];
    uvmrt_knob_t knobs[2];
    size_t n = 0;
    s->n_placeable = model_placeable_layers(s->m);
    s->n_recomputable = model_recomputable_layers(s->m);
    s->knob_cpu = s->knob_rc = -1;
    s->cand = NULL;
    s->cand_ns = NULL;
    s->n_cand = 0;
    if (s->n_placeable > 0) {
        s->knob_cpu = (int)n;
        knobs[n++] = (uvmrt_knob_t){"cpu_layers", levels(s->n_placeable, s->quick ? 4 : 8, cpu_v), cpu_v};
    }
    if (s->n_recomputable > 0) {
        s->knob_rc = (int)n;
        knobs[n++] = (uvmrt_knob_t){"recompute", levels(s->n_recomputable, s->quick ? 2 : 4, rc_v), rc_v};
    }
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    uvmrt_status_t st = uvmrt_choose(ctx, knobs, n, rehearse, s, &c);
    if (st != UVMRT_OK) return st;
    s->fits = c.fits;
    s->mech = c.fits ? mech_of(s, c.values) : search_lightest(s->m);
    s->predicted_ns = c.predicted_step_ns;
    s->plan_budget = c.plan_budget_bytes;
    s->rehearsals = c.rehearsals;
    size_t nc = uvmrt_choice_count(ctx);
    s->cand = calloc(nc + 1, sizeof *s->cand);
    s->cand_ns = calloc(nc + 1, sizeof *s->cand_ns);
    if (s->cand == NULL || s->cand_ns == NULL) {
        search_free(s);
        return UVMRT_ERR_NOMEM;
    }
    for (size_t i = 0; i < nc; i++) {
        int v[UVMRT_KNOBS_MAX] = {0};
        if (uvmrt_choice_candidate(ctx, i, v, &s->cand_ns[i]) != UVMRT_OK) continue;
        s->cand[s->n_cand] = mech_of(s, v);
        s->cand_ns[s->n_cand++] = s->cand_ns[i];
    }
    return UVMRT_OK;
}
