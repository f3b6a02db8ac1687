/*
 * choose.c -- the trainer's choices: uvmrt_choose rehearses each combination of the
 * trainer's knob values on a sim model of the machine (the context's profile and
 * budget: the same cost model the sim backend and uvmrt-plan use) and keeps the one
 * with the least predicted step time; then the best one at smaller budgets, so that
 * a larger budget never predicts slower than a smaller one it covers. When the
 * rehearsal declares recomputable tensors, how many of them recompute is one more
 * knob, the runtime's own (the first rehearsal counts them). After planned steps,
 * uvmrt_choice_review compares the measurement with the prediction and, once,
 * chooses again with each (layer, phase)'s work scaled by what the GPU measured.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "internal.h"
#include "profile_file.h"

/* Step 1 records, step 2 is the first planned step (its start residency is the
 * recording step's leftovers), 3 and 4 are steady: the prediction is their mean. */
#define REHEARSAL_STEPS 4
#define GRAIN (2ull << 20) /* ladder budgets: whole 2 MiB blocks */
#define REPLAN_ERROR 0.10
#define AGREE_ERROR 0.01 /* a review within this keeps the prediction as it is */
#define RC_LEVELS 8 /* recompute 0, 1/8, ..., 8/8 of the recomputable tensors */

/* The knobs being searched (the trainer's n_user, then the recompute count when
 * n_knobs > n_user), the model's duration scale, and the results. */
typedef struct search {
    size_t n_knobs, n_user;
    char **names;
    int **values;
    size_t *n_values;
    int probe;           /* count the recomputable tensors first, then add their knob */
    int n_recomputable;  /* as the last rehearsal declared them */
    uvmrt_rehearse_fn fn;
    void *user;
    const double *scale;
    size_t n_scale;
    const uint64_t *host_ns; /* n_scale entries, or NULL */
    double host_slowdown;
    /* results */
    size_t n_cand;
    int *cand_values; /* n_cand x n_knobs */
    double *cand_ns;  /* 0: did not fit */
    size_t best;      /* index, or n_cand when none fits */
    double best_ns;
    uint64_t plan_budget;
    size_t rehearsals;
} search_t;

uvmrt_status_t uvmrt_context_set_external_bytes(uvmrt_context_t *ctx, uint64_t bytes)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (ctx->sched.in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_context_set_external_bytes: not allowed inside a step");
        return UVMRT_ERR_STATE;
    }
    if (bytes >= ctx->budget) {
        LOG_ERROR(&ctx->log, "uvmrt_context_set_external_bytes: %llu bytes held outside uvmrt leave "
                             "nothing of the budget (%llu bytes): expected less than the budget",
                  (unsigned long long)bytes, (unsigned long long)ctx->budget);
        return UVMRT_ERR_BUDGET;
    }
    uvmrt__sched_set_external_bytes(ctx, bytes);
    return UVMRT_OK;
}

uint64_t uvmrt_context_external_bytes(const uvmrt_context_t *ctx)
{
    return ctx ? ctx->sched.external_bytes : 0;
}

uvmrt_status_t uvmrt_context_set_host_external_bytes(uvmrt_context_t *ctx, uint64_t bytes)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (ctx->sched.in_step) {
        LOG_ERROR(&ctx->log, "uvmrt_context_set_host_external_bytes: not allowed inside a step");
        return UVMRT_ERR_STATE;
    }
    uint64_t need = uvmrt__host_need_min(ctx, 0, bytes);
    if (need < bytes || (ctx->host_budget != 0 && need > ctx->host_budget)) { /* need < bytes: the sum wrapped */
        double g = 1073741824.0;
        uint64_t tensors = uvmrt__host_need_min(ctx, 0, 0);
        LOG_ERROR(&ctx->log, "uvmrt_context_set_host_external_bytes: %.2f GiB held in host memory outside uvmrt "
                             "and %.2f GiB of tensors the GPU budget cannot hold exceed the host budget of %.2f GiB: "
                             "expected at most %.2f GiB (or raise UVMRT_HOST_BUDGET, --host-budget)",
                  bytes / g, tensors / g, ctx->host_budget / g,
                  (ctx->host_budget > tensors ? ctx->host_budget - tensors : 0) / g);
        return UVMRT_ERR_BUDGET;
    }
    if (bytes != ctx->choice.host_external_bytes) {
        ctx->choice.host_external_bytes = bytes;
        uvmrt__host_note(ctx);
        uvmrt__plan_drop(ctx); /* the next step checks the plan against the budget again */
    }
    return UVMRT_OK;
}

uint64_t uvmrt_context_host_external_bytes(const uvmrt_context_t *ctx)
{
    return ctx ? ctx->choice.host_external_bytes : 0;
}

/* Step end: a planned step's time, for uvmrt_choice_review. */
static void observe_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    uvmrt_choice_state_t *c = &ctx->choice;
    if (c->have && e->planned && c->n_planned < UVMRT_CHOICE_STEPS_KEPT)
        c->planned_ns[c->n_planned++] = (double)ctx->stats.cur.step_ns;
}

const uvmrt_observer_t uvmrt__choice_observer = {"choice", NULL, NULL, NULL, observe_end, NULL};

static void knobs_free(uvmrt_choice_state_t *c)
{
    for (size_t k = 0; k < UVMRT_KNOBS_MAX + 1; k++) {
        free(c->names[k]);
        free(c->values[k]);
        c->names[k] = NULL;
        c->values[k] = NULL;
    }
    c->n_knobs = 0;
    c->has_rc = 0;
}

void uvmrt__choice_free(uvmrt_context_t *ctx)
{
    uvmrt_choice_state_t *c = &ctx->choice;
    knobs_free(c);
    free(c->cand_values);
    free(c->cand_ns);
    memset(c, 0, sizeof *c);
}

void uvmrt__choice_set_model_seam(uvmrt_context_t *ctx, const uvmrt_model_seam_t *seam)
{
    ctx->choice.model_seam = seam;
}

/* Knob values of combination i (mixed radix, the first knob fastest). */
static void combination(const search_t *s, size_t i, int *out)
{
    for (size_t k = 0; k < s->n_knobs; k++) {
        out[k] = s->values[k][i % s->n_values[k]];
        i /= s->n_values[k];
    }
}

/* The model's last error message: shown only when the rehearsal fails for another
 * reason than the budget (a combination that does not fit is no error). */
typedef struct model_log {
    char last[512];
} model_log_t;

static void model_log_fn(uvmrt_log_level_t level, const char *message, void *user)
{
    model_log_t *m = user;
    if (level == UVMRT_LOG_ERROR) snprintf(m->last, sizeof m->last, "%s", message);
}

/* One rehearsal at budget: *ns the predicted step time, 0 when it does not fit. */
static uvmrt_status_t rehearse(uvmrt_context_t *ctx, search_t *s, const int *values, uint64_t budget, double *ns)
{
    *ns = 0.0;
    uvmrt_context_t *model = NULL;
    model_log_t mlog = {""};
    const uvmrt_model_seam_t *seam = ctx->choice.model_seam;
    if (seam == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_choose: this context cannot make model contexts (no model seam installed)");
        return UVMRT_ERR_STATE;
    }
    uvmrt_status_t st = seam->create(ctx, budget, model_log_fn, &mlog, &model);
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_choose: the model context (sim, profile %s) could not be made: %s%s%s",
                  uvmrt__profile_label(&ctx->cfg, ctx->profile), uvmrt_status_str(st), mlog.last[0] ? ": " : "",
                  mlog.last);
        return st;
    }
    /* a review's measurements: the model context runs with them */
    if ((s->scale != NULL || s->host_ns != NULL || s->host_slowdown > 0) &&
        (st = uvmrt__sched_set_review_model(model, s->scale, s->host_ns, s->n_scale, s->host_slowdown)) != UVMRT_OK) {
        seam->destroy(model);
        return st;
    }
    model->choice.host_external_bytes = ctx->choice.host_external_bytes; /* the trainer's host state */
    uvmrt__tier_model(model, ctx); /* the disk tier without files, its cost modelled */
    s->rehearsals++;
    model->choice.choice.recompute_tensors = s->n_knobs > s->n_user ? values[s->n_user] : 0;
    st = s->fn(model, values, REHEARSAL_STEPS, s->user);
    s->n_recomputable = uvmrt__recomputable_count(model);
    if (st == UVMRT_ERR_BUDGET || (st == UVMRT_OK && model->sched.host_refused > 0)) {
        st = UVMRT_OK; /* a layer's working set is over this budget, or the plan over the host's: does not fit */
    } else if (st == UVMRT_OK) {
        uint64_t done = uvmrt__steps_done(model);
        uvmrt_step_stats_t a = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), b = a;
        if (done < REHEARSAL_STEPS) {
            LOG_ERROR(&ctx->log, "uvmrt_choose: the rehearsal ran %llu steps: expected %d",
                      (unsigned long long)done, REHEARSAL_STEPS);
            st = UVMRT_ERR_INVALID;
        } else if (uvmrt_step_stats_get(model, done - 2, &a) == UVMRT_OK &&
                   uvmrt_step_stats_get(model, done - 1, &b) == UVMRT_OK) {
            *ns = 0.5 * ((double)a.step_ns + (double)b.step_ns);
            if (*ns <= 0) *ns = 1; /* fits, takes no modelled time */
        }
    } else {
        LOG_ERROR(&ctx->log, "uvmrt_choose: the trainer's rehearsal failed: %s%s%s", uvmrt_status_str(st),
                  mlog.last[0] ? "; the model said: " : "", mlog.last);
    }
    seam->destroy(model);
    return st;
}

static void search_free(search_t *s)
{
    free(s->cand_values);
    free(s->cand_ns);
    s->cand_values = NULL;
    s->cand_ns = NULL;
}

static size_t combinations(const search_t *s)
{
    size_t n = 1;
    for (size_t k = 0; k < s->n_knobs; k++) n *= s->n_values[k];
    return n;
}

/* The recompute knob after the trainer's: 0, n/8, 2n/8, ..., n of the n recomputable
 * tensors (distinct counts; fewer when the combinations would pass UVMRT_CHOICES_MAX). */
static uvmrt_status_t add_recompute_knob(search_t *s)
{
    size_t user = combinations(s), levels = RC_LEVELS;
    while (levels > 1 && user * (levels + 1) > UVMRT_CHOICES_MAX) levels /= 2;
    int *v = malloc((levels + 1) * sizeof *v);
    char *name = strdup("recompute");
    if (v == NULL || name == NULL) {
        free(v);
        free(name);
        return UVMRT_ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t j = 0; j <= levels; j++) {
        int c = (int)(((long long)j * s->n_recomputable + (long long)levels / 2) / (long long)levels);
        if (n == 0 || v[n - 1] != c) v[n++] = c;
    }
    s->names[s->n_user] = name;
    s->values[s->n_user] = v;
    s->n_values[s->n_user] = n;
    s->n_knobs = s->n_user + 1;
    return UVMRT_OK;
}

/* Every combination at the context's budget, then the best one down the ladder. */
static uvmrt_status_t search_run(uvmrt_context_t *ctx, search_t *s)
{
    s->best_ns = 0;
    s->plan_budget = ctx->budget;
    s->rehearsals = 0;
    uvmrt_status_t st = UVMRT_OK;
    double first_ns = 0; /* combination 0 (nothing recomputing), when the probe ran it */
    int probed = 0;
    if (s->probe && s->n_knobs == s->n_user) {
        int v[UVMRT_KNOBS_MAX + 1] = {0};
        combination(s, 0, v);
        st = rehearse(ctx, s, v, ctx->budget, &first_ns);
        if (st != UVMRT_OK) return st;
        probed = 1;
        if (s->n_recomputable > 0 && (st = add_recompute_knob(s)) != UVMRT_OK) return st;
    }
    s->n_cand = combinations(s);
    s->cand_values = malloc(s->n_cand * (s->n_knobs ? s->n_knobs : 1) * sizeof *s->cand_values);
    s->cand_ns = calloc(s->n_cand, sizeof *s->cand_ns);
    if (s->cand_values == NULL || s->cand_ns == NULL) {
        search_free(s);
        return UVMRT_ERR_NOMEM;
    }
    s->best = s->n_cand;
    for (size_t i = 0; i < s->n_cand && st == UVMRT_OK; i++) {
        int *v = &s->cand_values[i * s->n_knobs];
        combination(s, i, v);
        if (i == 0 && probed) s->cand_ns[0] = first_ns;
        else st = rehearse(ctx, s, v, ctx->budget, &s->cand_ns[i]);
        if (st == UVMRT_OK && s->cand_ns[i] > 0 && (s->best == s->n_cand || s->cand_ns[i] < s->best_ns)) {
            s->best = i;
            s->best_ns = s->cand_ns[i];
        }
    }
    /* A plan made for a smaller budget also runs within this one. */
    for (int k = 7; st == UVMRT_OK && s->best < s->n_cand && k >= 4; k--) {
        uint64_t b = ctx->budget / 8 * (uint64_t)k / GRAIN * GRAIN;
        double ns = 0;
        if (b == 0) break;
        st = rehearse(ctx, s, &s->cand_values[s->best * s->n_knobs], b, &ns);
        if (st == UVMRT_OK && ns > 0 && ns < s->best_ns) {
            s->best_ns = ns;
            s->plan_budget = b;
        }
    }
    if (st != UVMRT_OK) search_free(s);
    return st;
}

/* Fills the public result from a finished search. */
static void result_of(const search_t *s, uvmrt_choice_t *c)
{
    memset(c, 0, sizeof *c);
    size_t i = s->best < s->n_cand ? s->best : 0;
    for (size_t k = 0; k < s->n_user; k++) c->values[k] = s->cand_values[i * s->n_knobs + k];
    c->recompute_tensors = s->n_knobs > s->n_user ? s->cand_values[i * s->n_knobs + s->n_user] : 0;
    c->recomputable_tensors = s->n_recomputable;
    c->fits = s->best < s->n_cand;
    c->predicted_step_ns = c->fits ? s->best_ns : 0;
    c->first_predicted_step_ns = c->predicted_step_ns;
    c->plan_budget_bytes = s->plan_budget;
    c->rehearsals = s->rehearsals;
}

static void log_choice(uvmrt_context_t *ctx, const uvmrt_choice_state_t *c, const char *what)
{
    char buf[512];
    size_t n = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < c->n_knobs && n < sizeof buf; k++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s %d", k ? ", " : "", c->names[k], c->choice.values[k]);
    if (c->has_rc && n < sizeof buf)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%srecompute %d of %d tensors", n ? ", " : "",
                              c->choice.recompute_tensors, c->choice.recomputable_tensors);
    if (c->choice.fits)
        LOG_INFO(&ctx->log, "%s: %s: predicted %.1f ms/step at a %.2f GiB plan budget (%zu rehearsals)", what, buf,
                 c->choice.predicted_step_ns / 1e6, (double)c->choice.plan_budget_bytes / (1u << 30),
                 c->choice.rehearsals);
    else
        LOG_WARN(&ctx->log, "%s: no combination of the knobs fits the budget of %llu bytes (%zu rehearsals)", what,
                 (unsigned long long)ctx->budget, c->choice.rehearsals);
}

static const char *knob_name(const uvmrt_knob_t *k) { return k->name ? k->name : "(unnamed)"; }

uvmrt_status_t uvmrt_choose(uvmrt_context_t *ctx, const uvmrt_knob_t *knobs, size_t n_knobs,
                            uvmrt_rehearse_fn fn, void *user, uvmrt_choice_t *out)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (fn == NULL || out == NULL || (knobs == NULL && n_knobs > 0)) {
        LOG_ERROR(&ctx->log, "uvmrt_choose: %s is NULL: expected %s", fn == NULL ? "rehearse" : out == NULL ? "out" : "knobs",
                  fn == NULL ? "the trainer's rehearsal function" : out == NULL ? "a uvmrt_choice_t to fill" : "an array of knobs");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_choose", uvmrt_choice_t, out) != UVMRT_OK) return UVMRT_ERR_INVALID;
    if (n_knobs > UVMRT_KNOBS_MAX) {
        LOG_ERROR(&ctx->log, "uvmrt_choose: n_knobs %zu: expected 0 to %d", n_knobs, UVMRT_KNOBS_MAX);
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_choose inside a step: call it between steps");
        return UVMRT_ERR_STATE;
    }
    size_t combos = 1;
    for (size_t k = 0; k < n_knobs; k++) {
        const char *name = knob_name(&knobs[k]);
        if (knobs[k].n_values == 0 || knobs[k].values == NULL) {
            LOG_ERROR(&ctx->log, "uvmrt_choose: knob %zu '%s' has no values: expected n_values >= 1 and values", k, name);
            return UVMRT_ERR_INVALID;
        }
        if (knobs[k].n_values > UVMRT_CHOICES_MAX || combos * knobs[k].n_values > UVMRT_CHOICES_MAX) {
            LOG_ERROR(&ctx->log, "uvmrt_choose: %zu or more combinations of knob values (at knob '%s'): expected at most %d",
                      combos * knobs[k].n_values, name, UVMRT_CHOICES_MAX);
            return UVMRT_ERR_INVALID;
        }
        combos *= knobs[k].n_values;
    }
    /* Copies of the knobs, then the search; the context changes only at the end. */
    uvmrt_choice_state_t copy = {0};
    uvmrt_status_t st = UVMRT_OK;
    for (size_t k = 0; k < n_knobs && st == UVMRT_OK; k++) {
        copy.names[k] = strdup(knob_name(&knobs[k]));
        copy.values[k] = malloc(knobs[k].n_values * sizeof(int));
        copy.n_values[k] = knobs[k].n_values;
        copy.n_knobs = k + 1;
        if (copy.names[k] == NULL || copy.values[k] == NULL) st = UVMRT_ERR_NOMEM;
        else memcpy(copy.values[k], knobs[k].values, knobs[k].n_values * sizeof(int));
    }
    search_t s = {.n_knobs = n_knobs, .n_user = n_knobs, .names = copy.names, .values = copy.values,
                  .n_values = copy.n_values, .probe = 1, .fn = fn, .user = user};
    if (st == UVMRT_OK) st = search_run(ctx, &s);
    if (st != UVMRT_OK) {
        knobs_free(&copy); /* with the recompute knob the probe may have added */
        return st;
    }
    /* Commit. */
    uvmrt_choice_state_t *c = &ctx->choice;
    knobs_free(c);
    free(c->cand_values);
    free(c->cand_ns);
    for (size_t k = 0; k < s.n_knobs; k++) {
        c->names[k] = copy.names[k];
        c->values[k] = copy.values[k];
        c->n_values[k] = copy.n_values[k];
    }
    c->n_knobs = n_knobs;
    c->has_rc = s.n_knobs > n_knobs;
    c->fn = fn;
    c->user = user;
    c->n_cand = s.n_cand;
    c->cand_values = s.cand_values;
    c->cand_ns = s.cand_ns;
    c->n_planned = 0;
    c->confirmed = 0;
    c->have = 1;
    result_of(&s, &c->choice);
    uvmrt__sched_set_plan_budget(ctx, c->choice.fits ? s.plan_budget : 0);
    log_choice(ctx, c, "uvmrt_choose");
    uvmrt_choice_t r = c->choice;
    UVMRT__ABI_WRITE(out, &r);
    return UVMRT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0 (v is sorted in place). */
static double median_of(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Each (layer, phase)'s measured GPU work in the last step over its modelled time:
 * calls with a modelled duration and no CPU work (a CPU call's stream times nothing);
 * the work less its link traffic, which the model adds itself (uvmrt__step_work). */
static uvmrt_status_t measured_scale(uvmrt_context_t *ctx, double **out, size_t *n_out)
{
    size_t n = (size_t)ctx->tensors.n_layers * UVMRT_PHASE_COUNT;
    const uvmrt_sequence_t *q = &ctx->sched.cur;
    double *meas = calloc(n ? n : 1, sizeof *meas), *model = calloc(n ? n : 1, sizeof *model);
    uint64_t *work = malloc(2 * (q->n_calls ? q->n_calls : 1) * sizeof *work);
    uvmrt_status_t st = meas && model && work ? uvmrt__step_work(ctx, q, work, work + q->n_calls) : UVMRT_ERR_NOMEM;
    if (st != UVMRT_OK) {
        free(meas);
        free(model);
        free(work);
        return st;
    }
    for (size_t i = 0; i < q->n_calls; i++) {
        const uvmrt_call_t *c = &q->calls[i];
        if (!c->timed || c->work.declared_ns == 0 || c->work.host_byte_count > 0 || c->layer < 0) continue;
        size_t j = (size_t)c->layer * UVMRT_PHASE_COUNT + (size_t)c->phase;
        if (j >= n) continue;
        meas[j] += (double)work[i];
        model[j] += (double)c->work.declared_ns;
    }
    for (size_t j = 0; j < n; j++) meas[j] = model[j] > 0 && meas[j] > 0 ? meas[j] / model[j] : 1.0;
    free(model);
    free(work);
    *out = meas;
    *n_out = n;
    return UVMRT_OK;
}

/* The CPU work the trainer measured (uvmrt_host_work_measured), per (layer, phase):
 * *out (n entries, 0: none) or NULL when there is none, and *slowdown, the median over
 * the last step's measured CPU calls of measured / the model's time alone (0: none). */
static uvmrt_status_t measured_host(uvmrt_context_t *ctx, size_t n, uint64_t **out, double *slowdown)
{
    const uvmrt_sequence_t *q = &ctx->sched.cur;
    *out = NULL;
    *slowdown = 0;
    uint64_t *h = calloc(n ? n : 1, sizeof *h);
    double *ratio = malloc((q->n_calls ? q->n_calls : 1) * sizeof *ratio);
    if (h == NULL || ratio == NULL) {
        free(h);
        free(ratio);
        return UVMRT_ERR_NOMEM;
    }
    size_t have = 0;
    for (int l = 0; l < ctx->tensors.n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT && (size_t)l * UVMRT_PHASE_COUNT + (size_t)p < n; p++)
            have += (h[(size_t)l * UVMRT_PHASE_COUNT + (size_t)p] = ctx->tensors.layers[l].host_measured_ns[p]) > 0;
    if (have == 0) {
        free(h);
        free(ratio);
        return UVMRT_OK;
    }
    size_t n_ratio = 0;
    for (size_t i = 0; i < q->n_calls && ctx->profile->host_mem_bps > 0; i++) {
        const uvmrt_call_t *c = &q->calls[i];
        if (c->work.host_byte_count == 0 || c->layer < 0 || c->layer >= ctx->tensors.n_layers) continue;
        uint64_t m = ctx->tensors.layers[c->layer].host_measured_ns[c->phase];
        if (m > 0) ratio[n_ratio++] = (double)m / ((double)c->work.host_byte_count / ctx->profile->host_mem_bps * 1e9);
    }
    if (n_ratio > 0) *slowdown = median_of(ratio, n_ratio);
    free(ratio);
    *out = h;
    return UVMRT_OK;
}

/* A search over the choice's knobs with the last step's measured GPU and CPU work
 * (measured_scale, measured_host); measured_search_free releases what it holds. */
static uvmrt_status_t measured_search(uvmrt_context_t *ctx, search_t *s)
{
    uvmrt_choice_state_t *c = &ctx->choice;
    double *scale = NULL, slowdown = 0;
    uint64_t *host = NULL;
    size_t n_scale = 0;
    uvmrt_status_t st = measured_scale(ctx, &scale, &n_scale);
    if (st == UVMRT_OK) st = measured_host(ctx, n_scale, &host, &slowdown);
    *s = (search_t){.n_knobs = c->n_knobs + (size_t)c->has_rc, .n_user = c->n_knobs, .names = c->names,
                    .values = c->values, .n_values = c->n_values, .fn = c->fn, .user = c->user,
                    .scale = scale, .n_scale = n_scale, .host_ns = host, .host_slowdown = slowdown};
    return st;
}

static void measured_search_free(search_t *s)
{
    free((void *)s->scale);
    free((void *)s->host_ns);
    s->scale = NULL;
    s->host_ns = NULL;
}

/* The choice r's values rehearsed once more, at the plan budget in use, with the last
 * step's measured GPU and CPU work: r's prediction becomes that (unless they do not
 * fit) and counts the rehearsal. On failure r is as before and the error logged (what:
 * which values). */
static uvmrt_status_t predict_measured(uvmrt_context_t *ctx, uvmrt_choice_t *r, const char *what)
{
    const uvmrt_choice_state_t *c = &ctx->choice;
    search_t s;
    double ns = 0;
    uvmrt_status_t st = measured_search(ctx, &s);
    int v[UVMRT_KNOBS_MAX + 1] = {0};
    memcpy(v, r->values, c->n_knobs * sizeof *v);
    if (c->has_rc) v[c->n_knobs] = r->recompute_tensors;
    if (st == UVMRT_OK) st = rehearse(ctx, &s, v, uvmrt__plan_budget(ctx), &ns);
    measured_search_free(&s);
    if (st != UVMRT_OK) {
        LOG_ERROR(&ctx->log, "uvmrt_choice_review: predicting %s again with the measured work failed (%s): the "
                             "choice is as before", what, uvmrt_status_str(st));
        return st;
    }
    if (ns > 0) r->predicted_step_ns = ns;
    r->rehearsals++;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_choice_review(uvmrt_context_t *ctx, uvmrt_choice_t *out, int *changed)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt_choice_state_t *c = &ctx->choice;
    if (out == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_choice_review: out is NULL: expected a uvmrt_choice_t to fill");
        return UVMRT_ERR_INVALID;
    }
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_choice_review", uvmrt_choice_t, out) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    if (!c->have) {
        LOG_ERROR(&ctx->log, "uvmrt_choice_review: no choice to review (call uvmrt_choose first)");
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_choice_review inside a step: call it between steps");
        return UVMRT_ERR_STATE;
    }
    if (c->n_planned < 2) {
        LOG_ERROR(&ctx->log, "uvmrt_choice_review: %zu planned steps since the choice: expected at least 2",
                  c->n_planned);
        return UVMRT_ERR_INVALID;
    }
    /* The first planned step since the choice starts from where the steps before it
     * left the tensors (a recording step, or other values): the steps after it are the
     * plan's own. */
    size_t n_kept = c->n_planned - 1;
    double sorted[UVMRT_CHOICE_STEPS_KEPT];
    memcpy(sorted, c->planned_ns + 1, n_kept * sizeof *sorted);
    double measured = median_of(sorted, n_kept);
    uvmrt_choice_t r = c->choice;
    int differ = 0;
    if (r.replanned && !c->confirmed) {
        /* The re-planned values have run: the measurements decide between them and the
         * first ones (a model wrong once may be wrong again). Kept, and more than 1%
         * from their prediction (made with the first values' measured work), they are
         * predicted again with their own. */
        int revert = measured > c->first_measured_ns;
        double kept_err = r.predicted_step_ns > 0 ? measured / r.predicted_step_ns - 1.0 : 0.0;
        uvmrt_status_t st;
        if (!revert && r.fits && fabs(kept_err) > AGREE_ERROR &&
            (st = predict_measured(ctx, &r, "the re-planned values")) != UVMRT_OK)
            return st;
        r.replanned_measured_step_ns = measured;
        c->confirmed = 1;
        if (revert) {
            memcpy(r.values, c->first_values, sizeof r.values);
            r.recompute_tensors = c->first_recompute;
            /* the re-plan's prediction of the first values (its model has the measured
             * work), else the first prediction */
            r.predicted_step_ns = r.first_predicted_step_ns;
            size_t nk = c->n_knobs + (size_t)c->has_rc;
            for (size_t i = 0; i < c->n_cand && c->cand_values != NULL; i++) {
                const int *v = c->cand_values + i * nk;
                int same = !c->has_rc || v[c->n_knobs] == c->first_recompute;
                for (size_t k = 0; k < c->n_knobs; k++) same &= v[k] == c->first_values[k];
                if (same && c->cand_ns[i] > 0) r.predicted_step_ns = c->cand_ns[i];
            }
            r.plan_budget_bytes = c->first_plan_budget;
            r.reverted = 1;
            differ = 1;
            uvmrt__sched_set_plan_budget(ctx, c->first_plan_budget);
            c->n_planned = 0;
            LOG_INFO(&ctx->log, "uvmrt_choice_review: the re-planned values measured %.1f ms/step against %.1f for "
                                "the first ones: back to the first", measured / 1e6, c->first_measured_ns / 1e6);
        }
        c->choice = r;
        if (changed) *changed = differ;
        UVMRT__ABI_WRITE(out, &r);
        return UVMRT_OK;
    }
    if (!r.replanned) r.measured_step_ns = measured;
    double err = r.predicted_step_ns > 0 ? measured / r.predicted_step_ns - 1.0 : 0.0;
    if (fabs(err) > REPLAN_ERROR && !r.replanned && r.fits) {
        search_t s;
        uvmrt_status_t st = measured_search(ctx, &s);
        if (st == UVMRT_OK) st = search_run(ctx, &s);
        measured_search_free(&s);
        if (st != UVMRT_OK) {
            LOG_ERROR(&ctx->log, "uvmrt_choice_review: choosing again failed (%s): the choice is as before",
                      uvmrt_status_str(st));
            return st;
        }
        LOG_INFO(&ctx->log, "uvmrt_choice_review: measured %.1f ms/step against %.1f predicted (%+.0f%%): choosing "
                            "again with the measured work", measured / 1e6, r.predicted_step_ns / 1e6, 100 * err);
        uvmrt_choice_t n;
        result_of(&s, &n);
        for (size_t k = 0; k < c->n_knobs; k++) differ |= n.values[k] != r.values[k];
        differ |= n.recompute_tensors != r.recompute_tensors;
        memcpy(c->first_values, r.values, sizeof c->first_values);
        c->first_recompute = r.recompute_tensors;
        c->first_measured_ns = measured;
        c->first_plan_budget = r.plan_budget_bytes;
        n.measured_step_ns = measured;
        n.first_predicted_step_ns = r.predicted_step_ns;
        n.replanned = 1;
        n.rehearsals += r.rehearsals;
        if (!n.fits) { /* the measured work cannot make the budget smaller: keep the values */
            memcpy(n.values, r.values, sizeof n.values);
            n.recompute_tensors = r.recompute_tensors;
            n.plan_budget_bytes = r.plan_budget_bytes;
            differ = 0;
        }
        free(c->cand_values);
        free(c->cand_ns);
        c->cand_values = s.cand_values;
        c->cand_ns = s.cand_ns;
        c->n_cand = s.n_cand;
        r = n;
        uvmrt__sched_set_plan_budget(ctx, r.plan_budget_bytes);
        c->n_planned = 0;
        c->confirmed = !differ; /* the same values: nothing to compare later */
        c->choice = r;
        log_choice(ctx, c, "uvmrt_choice_review");
    } else if (!r.replanned && r.fits && fabs(err) > AGREE_ERROR) {
        /* Within 10%: the values stay, and their prediction for the steps to come is
         * made again with the measured work (the first one stays in
         * first_predicted_step_ns). Within 1% it stands (on sim it is exact). */
        double before = r.predicted_step_ns;
        uvmrt_status_t st = predict_measured(ctx, &r, "the values");
        if (st != UVMRT_OK) return st;
        if (r.predicted_step_ns != before)
            LOG_INFO(&ctx->log, "uvmrt_choice_review: measured %.1f ms/step against %.1f predicted (%+.0f%%): the "
                                "values stay; predicted with the measured work: %.1f", measured / 1e6, before / 1e6,
                     100 * err, r.predicted_step_ns / 1e6);
        c->choice = r;
    } else {
        c->choice = r;
    }
    if (changed) *changed = differ;
    UVMRT__ABI_WRITE(out, &r);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_choice_get(const uvmrt_context_t *ctx, uvmrt_choice_t *out)
{
    if (ctx == NULL || out == NULL || !ctx->choice.have) return UVMRT_ERR_INVALID;
    if (UVMRT__ABI_CHECK(&ctx->log, "uvmrt_choice_get", uvmrt_choice_t, out) != UVMRT_OK) return UVMRT_ERR_INVALID;
    uvmrt_choice_t r = ctx->choice.choice;
    UVMRT__ABI_WRITE(out, &r);
    return UVMRT_OK;
}

size_t uvmrt_choice_count(const uvmrt_context_t *ctx) { return ctx && ctx->choice.have ? ctx->choice.n_cand : 0; }

uvmrt_status_t uvmrt_choice_candidate(const uvmrt_context_t *ctx, size_t i, int *values, double *predicted_step_ns)
{
    if (ctx == NULL || !ctx->choice.have || i >= ctx->choice.n_cand) return UVMRT_ERR_INVALID;
    const uvmrt_choice_state_t *c = &ctx->choice;
    if (values) memcpy(values, &c->cand_values[i * (c->n_knobs + (size_t)c->has_rc)], c->n_knobs * sizeof *values);
    if (predicted_step_ns) *predicted_step_ns = c->cand_ns[i];
    return UVMRT_OK;
}

int uvmrt_choice_candidate_recompute(const uvmrt_context_t *ctx, size_t i)
{
    if (ctx == NULL || !ctx->choice.have || i >= ctx->choice.n_cand) return -1;
    const uvmrt_choice_state_t *c = &ctx->choice;
    return c->has_rc ? c->cand_values[i * (c->n_knobs + 1) + c->n_knobs] : 0;
}

int uvmrt_tensor_recomputes(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t)
{
    if (ctx == NULL || uvmrt__tensor_checked(ctx, t) == NULL) return 0;
    int n = ctx->choice.choice.recompute_tensors, rank = n > 0 ? uvmrt__recompute_rank(ctx, t) : -1;
    return rank >= 0 && rank < n;
}
