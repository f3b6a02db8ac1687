/*
 * test_plan.c -- the pure planner (plan.h) against a brute-force oracle.
 *
 * A plan is replayed from its start_resident through issue points 0..m: point
 * p's actions happen after event p-1 (cyclic) and before event p, and event e
 * needs its tensors resident when it starts. At every action the replay checks
 * that it is valid, that the budget holds, that no tensor of the event just
 * before the point is evicted, and that every eviction takes the resident
 * tensor whose next use is farthest (Belady), found by scanning the events.
 */
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

/* ------------------------------------------------------------------ oracle */
static int uses(const rsched_t *s, int e, int t, unsigned *access)
{
    for (int i = 0; i < s->count[e]; i++)
        if (s->tensor[s->first[e] + i] == t) {
            if (access) *access = s->access[s->first[e] + i];
            return 1;
        }
    return 0;
}

/* Next use of t after event prev: the smallest d in 1..m with t used by event
 * (prev + d) mod m, or UVMRT_NEVER. */
static int32_t brute_next_use(const rsched_t *s, int prev, int t)
{
    for (int d = 1; d <= s->m; d++)
        if (uses(s, (prev + d) % s->m, t, NULL)) return d;
    return UVMRT_NEVER;
}

static uvmrt_plan_input_t plan_input(const rsched_t *s, uint64_t budget, const uint8_t *res0, int discard)
{
    uvmrt_plan_input_t in;
    memset(&in, 0, sizeof in); /* fields added later (e.g. homing) stay off */
    in.m = s->m;
    in.events = s->events;
    in.n_tensors = s->n;
    in.footprint = s->footprint;
    in.budget = budget;
    in.resident0 = res0;
    in.discard = discard;
    return in;
}

typedef struct replay {
    int misses;          /* tensors not resident when their event started */
    int evictions, discards, prefetches;
    uint8_t *end;        /* residency after point m (caller frees) */
} replay_t;

/* Replays plan p over schedule s; asserts every property; returns counts. */
static replay_t replay(const rsched_t *s, const uvmrt_plan_t *p, uint64_t budget, int discard, const uint8_t *res0,
                       const char *what)
{
    replay_t r;
    memset(&r, 0, sizeof r);
    int m = s->m, n = s->n;
    cr_assert_eq(p->m, m, "%s", what);
    cr_assert_eq(p->n_tensors, n, "%s", what);
    cr_assert_eq(memcmp(p->start_resident, res0, (size_t)n), 0, "%s: start_resident is not resident0", what);
    uint8_t *res = malloc((size_t)n + 1);
    cr_assert_not_null(res);
    memcpy(res, res0, (size_t)n);
    uint64_t used = 0;
    for (int t = 0; t < n; t++)
        if (res[t]) used += s->footprint[t];
    cr_assert_eq(p->point_first[0], 0, "%s", what);
    for (int pt = 0; pt <= m; pt++) {
        int prev = (pt - 1 + m) % m;
        cr_assert_leq(p->point_first[pt], p->point_first[pt + 1], "%s", what);
        for (size_t a = p->point_first[pt]; a < p->point_first[pt + 1]; a++) {
            const uvmrt_action_t *act = &p->actions[a];
            int t = act->tensor;
            cr_assert(t >= 0 && t < n, "%s: action %zu names tensor %d", what, a, t);
            cr_assert(act->target >= 0 && act->target < 2 * m, "%s: action %zu target %d", what, a, act->target);
            if (act->kind == UVMRT_ACT_PREFETCH) {
                cr_assert(!res[t], "%s: point %d prefetches tensor %d, already resident", what, pt, t);
                cr_assert(act->target >= pt && act->target <= pt + m - 1,
                          "%s: point %d prefetch of %d for event %d: outside one cycle", what, pt, t, act->target);
                cr_assert(uses(s, act->target % m, t, NULL), "%s: point %d prefetches %d for event %d, which does not use it",
                          what, pt, t, act->target);
                res[t] = 1;
                used += s->footprint[t];
                cr_assert_leq(used, budget, "%s: point %d, prefetch of %d: %llu bytes resident > budget %llu", what, pt,
                              t, (unsigned long long)used, (unsigned long long)budget);
                r.prefetches++;
                continue;
            }
            cr_assert(act->kind == UVMRT_ACT_EVICT || act->kind == UVMRT_ACT_DISCARD, "%s: action kind %d", what,
                      act->kind);
            cr_assert(res[t], "%s: point %d evicts tensor %d, not resident", what, pt, t);
            cr_assert(!uses(s, prev, t, NULL), "%s: point %d evicts tensor %d, used by the event just before (%d)",
                      what, pt, t, prev);
            int32_t nu = brute_next_use(s, prev, t);
            for (int u = 0; u < n; u++) {
                if (u == t || !res[u] || uses(s, prev, u, NULL)) continue;
                int32_t nu_u = brute_next_use(s, prev, u);
                cr_assert_geq(nu, nu_u,
                              "%s: point %d evicts %d (next use +%d) while %d (next use +%d) is resident and eligible",
                              what, pt, t, nu, u, nu_u);
            }
            unsigned acc = 0;
            int dead_next = nu != UVMRT_NEVER && uses(s, (prev + nu) % m, t, &acc) && !(acc & UVMRT_USE_READ);
            if (act->kind == UVMRT_ACT_DISCARD) {
                cr_assert(discard, "%s: point %d discards %d with discard = 0", what, pt, t);
                cr_assert(dead_next, "%s: point %d discards %d whose next use (+%d, access %u) reads it", what, pt, t,
                          nu, acc);
                r.discards++;
            } else {
                cr_assert(!(discard && dead_next), "%s: point %d writes back %d, whose next use only writes it", what,
                          pt, t);
                r.evictions++;
            }
            res[t] = 0;
            used -= s->footprint[t];
        }
        cr_assert_leq(used, budget, "%s: after point %d, %llu bytes resident > budget %llu", what, pt,
                      (unsigned long long)used, (unsigned long long)budget);
        if (pt < m)
            for (int i = 0; i < s->count[pt]; i++)
                if (!res[s->tensor[s->first[pt] + i]]) r.misses++;
    }
    cr_assert_eq(memcmp(p->end_resident, res, (size_t)n), 0, "%s: end_resident differs from the replay", what);
    r.end = res;
    return r;
}

static void random_res0(const rsched_t *s, uint64_t *rng, uint64_t budget, uint8_t *res0)
{
    uint64_t used = 0;
    for (int t = 0; t < s->n; t++) {
        res0[t] = 0;
        if (xorshift64(rng) % 2 && used + s->footprint[t] <= budget) {
            res0[t] = 1;
            used += s->footprint[t];
        }
    }
}

/* ------------------------------------------------------------------ random schedules */
Test(plan, random_schedules_oracle)
{
    int total_evictions = 0, total_discards = 0, plans = 0;
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t rng = seed * 7919 + 1;
        int n = (int)rand_between(&rng, 2, 20);
        int m = (int)rand_between(&rng, 1, 14);
        int max_uses = (int)rand_between(&rng, 1, 6);
        rsched_t s;
        rsched_make(&s, seed, n, m, max_uses);
        uint64_t ws = rsched_max_ws(&s), total = rsched_total(&s);
        uint64_t budget = ws + (total > ws ? rand_between(&rng, 0, total - ws) : 0);
        if (seed % 5 == 0) budget = ws; /* the tightest legal budget */
        uint8_t *res0 = calloc((size_t)n + 1, 1);
        random_res0(&s, &rng, budget, res0);
        for (int discard = 0; discard <= 1; discard++) {
            char what[128];
            snprintf(what, sizeof what, "seed %llu (n %d, m %d, budget %llu, discard %d)", (unsigned long long)seed, n,
                     m, (unsigned long long)budget, discard);
            uvmrt_plan_input_t in = plan_input(&s, budget, res0, discard);
            uvmrt_plan_t p;
            int bad = -1;
            uvmrt_status_t st = uvmrt__plan_build(&in, &p, &bad);
            cr_assert_eq(st, UVMRT_OK, "%s: %s (bad event %d)", what, uvmrt_status_name(st), bad);
            replay_t r = replay(&s, &p, budget, discard, res0, what);
            if (!discard) cr_assert_eq(r.discards, 0, "%s", what);
            total_evictions += r.evictions;
            total_discards += r.discards;
            plans++;
            free(r.end);
            uvmrt__plan_free(&p);
        }
        free(res0);
        rsched_free(&s);
    }
    /* the oracle was exercised, not vacuously satisfied */
    cr_expect_gt(total_evictions, 50, "only %d evictions over %d plans", total_evictions, plans);
    cr_expect_gt(total_discards, 10, "only %d discards over %d plans", total_discards, plans);
}

/* A start over the budget (e.g. the budget shrank) is shed at point 0 by the same rule. */
Test(plan, start_over_budget_is_shed)
{
    int shed = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rsched_t s;
        rsched_make(&s, 1000 + seed, 12, 8, 3);
        uint64_t budget = rsched_max_ws(&s);
        uint8_t *res0 = calloc((size_t)s.n + 1, 1);
        uint64_t used = 0;
        for (int t = 0; t < s.n; t++) {
            res0[t] = 1;
            used += s.footprint[t];
        }
        if (used <= budget) {
            free(res0);
            rsched_free(&s);
            continue;
        }
        uvmrt_plan_input_t in = plan_input(&s, budget, res0, 1);
        uvmrt_plan_t p;
        cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
        /* replay: evictions at point 0 until under budget; then the usual checks */
        uint8_t *res = malloc((size_t)s.n);
        memcpy(res, res0, (size_t)s.n);
        size_t a = 0;
        for (; a < p.point_first[1] && used > budget; a++) {
            cr_assert_neq(p.actions[a].kind, UVMRT_ACT_PREFETCH, "seed %llu: prefetch while over budget",
                          (unsigned long long)seed);
            cr_assert(res[p.actions[a].tensor]);
            res[p.actions[a].tensor] = 0;
            used -= s.footprint[p.actions[a].tensor];
            shed++;
        }
        cr_assert_leq(used, budget, "seed %llu: point 0 did not get under budget", (unsigned long long)seed);
        free(res);
        uvmrt__plan_free(&p);
        free(res0);
        rsched_free(&s);
    }
    cr_expect_gt(shed, 0);
}

/* discard = 0: write-backs only. */
Test(plan, no_discard_when_disabled)
{
    for (uint64_t seed = 1; seed <= 100; seed++) {
        rsched_t s;
        rsched_make(&s, 5000 + seed, 10, 10, 4);
        uint8_t *res0 = calloc((size_t)s.n + 1, 1);
        uvmrt_plan_input_t in = plan_input(&s, rsched_max_ws(&s), res0, 0);
        uvmrt_plan_t p;
        cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
        for (size_t a = 0; a < p.n_actions; a++)
            cr_assert_neq(p.actions[a].kind, UVMRT_ACT_DISCARD, "seed %llu: discard with discard = 0",
                          (unsigned long long)seed);
        uvmrt__plan_free(&p);
        free(res0);
        rsched_free(&s);
    }
}

Test(plan, budget_covers_everything_no_evictions)
{
    for (uint64_t seed = 1; seed <= 100; seed++) {
        rsched_t s;
        rsched_make(&s, 9000 + seed, 16, 12, 5);
        uint64_t rng = seed;
        uint64_t budget = rsched_total(&s) + rand_between(&rng, 0, 1) * MIB;
        uint8_t *res0 = calloc((size_t)s.n + 1, 1);
        random_res0(&s, &rng, budget, res0);
        uvmrt_plan_input_t in = plan_input(&s, budget, res0, 1);
        uvmrt_plan_t p;
        cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
        replay_t r = replay(&s, &p, budget, 1, res0, "budget >= total");
        cr_expect_eq(r.evictions + r.discards, 0, "seed %llu: %d evictions, %d discards with everything fitting",
                     (unsigned long long)seed, r.evictions, r.discards);
        cr_expect_eq(r.misses, 0, "seed %llu: %d misses with everything fitting", (unsigned long long)seed, r.misses);
        free(r.end);
        uvmrt__plan_free(&p);
        free(res0);
        rsched_free(&s);
    }
}

Test(plan, event_over_budget)
{
    for (uint64_t seed = 1; seed <= 50; seed++) {
        rsched_t s;
        rsched_make(&s, 300 + seed, 10, 9, 4);
        uint64_t ws = rsched_max_ws(&s);
        uint64_t budget = ws - 1;
        int first_bad = -1;
        for (int e = 0; e < s.m && first_bad < 0; e++)
            if (rsched_event_ws(&s, e) > budget) first_bad = e;
        uint8_t *res0 = calloc((size_t)s.n + 1, 1);
        uvmrt_plan_input_t in = plan_input(&s, budget, res0, 1);
        uvmrt_plan_t p;
        memset(&p, 0x5a, sizeof p);
        int bad = -1;
        cr_assert_eq(uvmrt__plan_build(&in, &p, &bad), UVMRT_ERR_BUDGET, "seed %llu", (unsigned long long)seed);
        cr_expect_eq(bad, first_bad, "seed %llu: bad event %d, want %d", (unsigned long long)seed, bad, first_bad);
        cr_expect_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_ERR_BUDGET); /* NULL bad_event is fine */
        uvmrt__plan_free(&p); /* safe after a failure */
        free(res0);
        rsched_free(&s);
    }
}

Test(plan, invalid_input)
{
    uvmrt_plan_t p;
    cr_expect_eq(uvmrt__plan_build(NULL, &p, NULL), UVMRT_ERR_INVALID);
    uvmrt_plan_input_t in;
    memset(&in, 0, sizeof in);
    in.m = 0;
    cr_expect_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_ERR_INVALID);
    uvmrt__plan_free(&p);
    uvmrt__plan_free(NULL);
}

/* Budget >= 2x the largest working set: in steady state (the second run starts
 * from the first's end) every event finds its tensors resident. */
Test(plan, steady_state_all_resident_at_2x)
{
    int with_evictions = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint64_t rng = seed * 31 + 7;
        int n = (int)rand_between(&rng, 4, 24);
        int m = (int)rand_between(&rng, 2, 16);
        rsched_t s;
        rsched_make(&s, 7000 + seed, n, m, (int)rand_between(&rng, 1, 5));
        uint64_t budget = 2 * rsched_max_ws(&s) + rand_between(&rng, 0, 2) * 64 * KIB;
        uint8_t *res0 = calloc((size_t)n + 1, 1);
        char what[96];
        snprintf(what, sizeof what, "seed %llu, first run", (unsigned long long)seed);
        uvmrt_plan_input_t in = plan_input(&s, budget, res0, 1);
        uvmrt_plan_t p1, p2;
        cr_assert_eq(uvmrt__plan_build(&in, &p1, NULL), UVMRT_OK);
        replay_t r1 = replay(&s, &p1, budget, 1, res0, what);
        in.resident0 = r1.end;
        cr_assert_eq(uvmrt__plan_build(&in, &p2, NULL), UVMRT_OK);
        snprintf(what, sizeof what, "seed %llu, steady state", (unsigned long long)seed);
        replay_t r2 = replay(&s, &p2, budget, 1, r1.end, what);
        cr_expect_eq(r2.misses, 0, "%s: %d tensors missing at their event (budget %llu, max ws %llu)", what,
                     r2.misses, (unsigned long long)budget, (unsigned long long)rsched_max_ws(&s));
        with_evictions += r2.evictions + r2.discards > 0;
        free(r1.end);
        free(r2.end);
        uvmrt__plan_free(&p1);
        uvmrt__plan_free(&p2);
        free(res0);
        rsched_free(&s);
    }
    cr_expect_gt(with_evictions, 20, "only %d steady-state plans had to evict: the test is too easy", with_evictions);
}

/* next_use (used by the executor's late path) agrees with a scan. */
Test(plan, next_use_table)
{
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rsched_t s;
        rsched_make(&s, 400 + seed, 9, 1 + (int)(seed % 11), 3);
        uint8_t *res0 = calloc((size_t)s.n + 1, 1);
        uvmrt_plan_input_t in = plan_input(&s, rsched_total(&s), res0, 1);
        uvmrt_plan_t p;
        cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
        for (int e = 0; e < s.m; e++)
            for (int t = 0; t < s.n; t++)
                cr_assert_eq(uvmrt__plan_next_use(&p, e, t), brute_next_use(&s, e, t),
                             "seed %llu: next use of %d after %d", (unsigned long long)seed, t, e);
        uvmrt__plan_free(&p);
        free(res0);
        rsched_free(&s);
    }
}

Test(plan, deterministic)
{
    rsched_t s;
    rsched_make(&s, 77, 18, 14, 5);
    uint8_t *res0 = calloc((size_t)s.n + 1, 1);
    uvmrt_plan_input_t in = plan_input(&s, rsched_max_ws(&s) * 3 / 2, res0, 1);
    uvmrt_plan_t a, b;
    cr_assert_eq(uvmrt__plan_build(&in, &a, NULL), UVMRT_OK);
    cr_assert_eq(uvmrt__plan_build(&in, &b, NULL), UVMRT_OK);
    cr_assert_eq(a.n_actions, b.n_actions);
    cr_assert_gt(a.n_actions, 0);
    cr_expect_eq(memcmp(a.actions, b.actions, a.n_actions * sizeof *a.actions), 0);
    cr_expect_eq(memcmp(a.point_first, b.point_first, ((size_t)s.m + 2) * sizeof *a.point_first), 0);
    uvmrt__plan_free(&a);
    uvmrt__plan_free(&b);
    free(res0);
    rsched_free(&s);
}

/* ------------------------------------------------------------------ host homing */
/* The plan may keep remote_ok tensors in host memory. Whatever it picks: only
 * remote_ok tensors are homed, none is ever prefetched or left resident, the
 * rest of the plan is a valid Belady plan of the schedule without the homed
 * tensors, and the link-time estimate is no worse than migrating everything. */
static double plan_cost(const uvmrt_plan_t *p) { return p->est_h2d_s > p->est_d2h_s ? p->est_h2d_s : p->est_d2h_s; }

/* s without the homed tensors (same ids, footprints). */
static void rsched_without(const rsched_t *s, const uint8_t *homed, rsched_t *out)
{
    memset(out, 0, sizeof *out);
    out->n = s->n;
    out->m = s->m;
    out->size = s->size;
    out->footprint = s->footprint;
    out->first = calloc((size_t)s->m, sizeof *out->first);
    out->count = calloc((size_t)s->m, sizeof *out->count);
    size_t total = 0;
    for (int e = 0; e < s->m; e++) total += (size_t)s->count[e];
    out->tensor = calloc(total + 1, sizeof *out->tensor);
    out->access = calloc(total + 1, sizeof *out->access);
    out->events = calloc((size_t)s->m, sizeof *out->events);
    int k = 0;
    for (int e = 0; e < s->m; e++) {
        out->first[e] = k;
        for (int i = 0; i < s->count[e]; i++) {
            int t = s->tensor[s->first[e] + i];
            if (homed[t]) continue;
            out->tensor[k] = t;
            out->access[k++] = s->access[s->first[e] + i];
        }
        out->count[e] = k - out->first[e];
        out->events[e] = (uvmrt_plan_event_t){out->count[e], &out->tensor[out->first[e]], &out->access[out->first[e]]};
    }
}

static void rsched_without_free(rsched_t *r)
{
    free(r->first);
    free(r->count);
    free(r->tensor);
    free(r->access);
    free(r->events);
}

Test(plan, host_homing_invariants)
{
    const uvmrt_profile_t *prof = uvmrt_profile_find("consumer-8g");
    cr_assert_not_null(prof);
    int homed_plans = 0;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        uint64_t rng = seed * 104729 + 3;
        int n = (int)rand_between(&rng, 3, 16), m = (int)rand_between(&rng, 2, 12);
        rsched_t s;
        rsched_make(&s, 20000 + seed, n, m, (int)rand_between(&rng, 1, 5));
        uint64_t ws = rsched_max_ws(&s), total = rsched_total(&s);
        uint64_t budget = ws + (total > ws ? rand_between(&rng, 0, (total - ws) / 2) : 0);
        uint8_t *res0 = calloc((size_t)n + 1, 1), *ok = calloc((size_t)n + 1, 1);
        for (int t = 0; t < n; t++) ok[t] = (uint8_t)(xorshift64(&rng) % 3 != 0);
        uvmrt_plan_input_t in = plan_input(&s, budget, res0, 1);
        in.prefetch_bps = prof->prefetch_h2d_bps;
        in.evict_bps = prof->evict_d2h_bps;
        in.remote_read_bps = prof->remote_read_bps;
        in.remote_write_bps = prof->remote_write_bps;
        uvmrt_plan_t base, p;
        cr_assert_eq(uvmrt__plan_build(&in, &base, NULL), UVMRT_OK); /* remote_ok NULL: no homing */
        for (int t = 0; t < n; t++) cr_assert_eq(base.host_homed[t], 0, "seed %llu: homed without remote_ok", (unsigned long long)seed);
        in.remote_ok = ok;
        cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
        int any = 0;
        for (int t = 0; t < n; t++) {
            if (!p.host_homed[t]) continue;
            any = 1;
            cr_assert(ok[t], "seed %llu: tensor %d homed but not remote_ok", (unsigned long long)seed, t);
            cr_assert_eq(p.end_resident[t], 0, "seed %llu: homed tensor %d left resident", (unsigned long long)seed, t);
        }
        for (size_t a = 0; a < p.n_actions; a++)
            cr_assert(!(p.actions[a].kind == UVMRT_ACT_PREFETCH && p.host_homed[p.actions[a].tensor]),
                      "seed %llu: homed tensor %d prefetched", (unsigned long long)seed, p.actions[a].tensor);
        cr_expect_leq(plan_cost(&p), plan_cost(&base) * 1.000001,
                      "seed %llu: homing made the estimate worse (%g s > %g s)", (unsigned long long)seed, plan_cost(&p),
                      plan_cost(&base));
        /* the rest is a valid plan of the schedule without the homed tensors
         * (res0 is empty, so no homed tensor needs writing back first) */
        rsched_t rest;
        rsched_without(&s, p.host_homed, &rest);
        char what[96];
        snprintf(what, sizeof what, "seed %llu, homing", (unsigned long long)seed);
        replay_t r = replay(&rest, &p, budget, 1, res0, what);
        free(r.end);
        rsched_without_free(&rest);
        homed_plans += any;
        uvmrt__plan_free(&base);
        uvmrt__plan_free(&p);
        free(res0);
        free(ok);
        rsched_free(&s);
    }
    cr_log_info("%d of 150 plans homed tensors", homed_plans);
}

/* ------------------------------------------------------------------ hand-made cases */
static uvmrt_plan_input_t small_input(int m, const uvmrt_plan_event_t *ev, int n, const uint64_t *fp,
                                      uint64_t budget, const uint8_t *res0, int discard)
{
    uvmrt_plan_input_t in;
    memset(&in, 0, sizeof in);
    in.m = m;
    in.events = ev;
    in.n_tensors = n;
    in.footprint = fp;
    in.budget = budget;
    in.resident0 = res0;
    in.discard = discard;
    return in;
}

/* Three 2 MiB tensors, budget 4 MiB, events 0, 1, 2 use tensor 0, 1, 2 (READ),
 * start {0, 1}. Point 0: everything needed first is there; making room for 2
 * would evict 1 (next use +2 <= +3): stop. Point 1: 1 is needed at +1, 0 was
 * just used: stop. Point 2: evict 0 (next use +2, farther than 2's +1), fetch
 * 2. Point 3: evict 1 (next +2), fetch 0 for the next step's event 0. */
Test(plan, hand_made_belady)
{
    static int tensors[3] = {0, 1, 2};
    static unsigned acc[3] = {UVMRT_USE_READ, UVMRT_USE_READ, UVMRT_USE_READ};
    uvmrt_plan_event_t ev[3] = {{1, &tensors[0], &acc[0]}, {1, &tensors[1], &acc[1]}, {1, &tensors[2], &acc[2]}};
    uint64_t fp[3] = {2 * MIB, 2 * MIB, 2 * MIB};
    uint8_t res0[3] = {1, 1, 0};
    uvmrt_plan_input_t in = small_input(3, ev, 3, fp, 4 * MIB, res0, 1);
    uvmrt_plan_t p;
    cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
    cr_expect_eq(p.point_first[1] - p.point_first[0], 0, "point 0 acted");
    cr_expect_eq(p.point_first[2] - p.point_first[1], 0, "point 1 acted");
    cr_assert_eq(p.point_first[3] - p.point_first[2], 2, "point 2: %zu actions", p.point_first[3] - p.point_first[2]);
    const uvmrt_action_t *a = &p.actions[p.point_first[2]];
    cr_expect_eq(a[0].kind, UVMRT_ACT_EVICT);
    cr_expect_eq(a[0].tensor, 0);
    cr_expect_eq(a[1].kind, UVMRT_ACT_PREFETCH);
    cr_expect_eq(a[1].tensor, 2);
    cr_expect_eq(a[1].target, 2);
    cr_assert_eq(p.point_first[4] - p.point_first[3], 2, "point 3: %zu actions", p.point_first[4] - p.point_first[3]);
    a = &p.actions[p.point_first[3]];
    cr_expect_eq(a[0].kind, UVMRT_ACT_EVICT);
    cr_expect_eq(a[0].tensor, 1);
    cr_expect_eq(a[1].kind, UVMRT_ACT_PREFETCH);
    cr_expect_eq(a[1].tensor, 0);
    cr_expect_eq(a[1].target, 3);
    cr_expect_eq(p.end_resident[0], 1);
    cr_expect_eq(p.end_resident[1], 0);
    cr_expect_eq(p.end_resident[2], 1);
    uvmrt__plan_free(&p);
}

/* Tensors A, B, C (2 MiB), budget 4 MiB; events: A W, B ?, C R, A R. At point
 * 3 (after C) B leaves to make room for A; B's next use is event 1: when that
 * use only writes B, B is discarded (discard = 1) instead of written back. */
static int count_kind(const uvmrt_plan_t *p, int kind, int tensor)
{
    int n = 0;
    for (size_t a = 0; a < p->n_actions; a++) n += p->actions[a].kind == kind && p->actions[a].tensor == tensor;
    return n;
}

Test(plan, hand_made_discard)
{
    static int tA[1] = {0}, tB[1] = {1}, tC[1] = {2};
    static unsigned W[1] = {UVMRT_USE_WRITE}, R[1] = {UVMRT_USE_READ}, RW[1] = {UVMRT_USE_READWRITE};
    uint64_t fp[3] = {2 * MIB, 2 * MIB, 2 * MIB};
    uint8_t res0[3] = {0, 0, 0};
    uvmrt_plan_t p;

    uvmrt_plan_event_t dead[4] = {{1, tA, W}, {1, tB, W}, {1, tC, R}, {1, tA, R}};
    uvmrt_plan_input_t in = small_input(4, dead, 3, fp, 4 * MIB, res0, 1);
    cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
    cr_expect_gt(count_kind(&p, UVMRT_ACT_DISCARD, 1), 0, "B (overwritten next) was not discarded");
    cr_expect_eq(count_kind(&p, UVMRT_ACT_EVICT, 1), 0, "B (overwritten next) was written back");
    cr_expect_eq(count_kind(&p, UVMRT_ACT_DISCARD, 0), 0, "A (read next) was discarded");
    uvmrt__plan_free(&p);

    in.discard = 0;
    cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
    cr_expect_eq(count_kind(&p, UVMRT_ACT_DISCARD, 1), 0, "discard = 0 but B was discarded");
    cr_expect_gt(count_kind(&p, UVMRT_ACT_EVICT, 1), 0, "discard = 0: B should be written back");
    uvmrt__plan_free(&p);

    /* READWRITE reads: never discarded */
    uvmrt_plan_event_t live[4] = {{1, tA, W}, {1, tB, RW}, {1, tC, R}, {1, tA, R}};
    in = small_input(4, live, 3, fp, 4 * MIB, res0, 1);
    cr_assert_eq(uvmrt__plan_build(&in, &p, NULL), UVMRT_OK);
    cr_expect_eq(count_kind(&p, UVMRT_ACT_DISCARD, 1), 0, "B (read-write next) was discarded");
    cr_expect_gt(count_kind(&p, UVMRT_ACT_EVICT, 1), 0);
    uvmrt__plan_free(&p);
}
