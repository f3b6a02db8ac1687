/*
 * test_collective.c -- the collective seam (examples/common/collective.c) over the test
 * transport (tests/coll_threads.c): ranks are threads of this process.
 *
 *  - all-reduce (sum, average, max), reduce-scatter and all-gather give every rank the
 *    expected values, bit for bit the same on every rank, in place too (llm.c's ZeRO-1
 *    reduce-scatter into its own slice), for 1 to 4 ranks;
 *  - broadcast of a host blob from any root; a bad root is refused;
 *  - coll_check_same: equal settings pass; ranks started with other settings make
 *    every rank fail with one message naming them;
 *  - a rank that never arrives: the others fail within the timeout naming it, no hang;
 *  - coll_abort: every waiting rank fails naming the aborting rank;
 *  - UVMRT_COLL_TIMEOUT_S parsing.
 */
#define _DEFAULT_SOURCE /* usleep */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "coll_threads.h"
#include "collective.h"

#define MAXW 4

typedef struct {
    coll_threads_group_t *g;
    int rank, world;
    int rc;
    char err[512];
    float out[64];
    void *arg;
} rank_t;

typedef void (*body_fn)(coll_t *c, rank_t *r);

static body_fn body;

static void *thread_main(void *p) {
    rank_t *r = p;
    coll_t *c = coll_threads_join(r->g, r->rank);
    if (c == NULL) {
        r->rc = -2;
        return NULL;
    }
    body(c, r);
    snprintf(r->err, sizeof r->err, "%s", coll_error(c));
    coll_destroy(c);
    return NULL;
}

/* Runs fn on world threads; ranks[] holds each one's result. */
static void run_ranks(int world, double timeout_s, body_fn fn, rank_t *ranks, void *arg) {
    pthread_t t[MAXW];
    coll_threads_group_t *g = coll_threads_group_new(world, timeout_s);
    cr_assert_not_null(g);
    body = fn;
    for (int i = 0; i < world; i++) {
        ranks[i] = (rank_t){.g = g, .rank = i, .world = world, .arg = arg};
        cr_assert_eq(pthread_create(&t[i], NULL, thread_main, &ranks[i]), 0);
    }
    for (int i = 0; i < world; i++)
        pthread_join(t[i], NULL);
    coll_threads_group_free(g);
}

/* rank r's input: distinct per rank and index, not exactly representable sums */
static float input(int r, int i) { return 0.1f * (float)(r + 1) + 0.37f * (float)i; }

static void do_all_reduce(coll_t *c, rank_t *r) {
    float send[12];
    for (int i = 0; i < 12; i++)
        send[i] = input(r->rank, i);
    r->rc = coll_all_reduce(c, send, r->out, 12, COLL_SUM, NULL);
    r->rc |= coll_all_reduce(c, send, r->out + 12, 12, COLL_AVG, NULL);
    r->rc |= coll_all_reduce(c, send, r->out + 24, 12, COLL_MAX, NULL);
    /* in place */
    memcpy(r->out + 36, send, sizeof send);
    r->rc |= coll_all_reduce(c, r->out + 36, r->out + 36, 12, COLL_SUM, NULL);
    r->rc |= coll_wait(c, NULL);
}

Test(collective, all_reduce_is_the_same_on_every_rank) {
    alarm(60);
    for (int w = 1; w <= MAXW; w++) {
        rank_t ranks[MAXW];
        run_ranks(w, 30, do_all_reduce, ranks, NULL);
        for (int k = 0; k < w; k++) {
            cr_assert_eq(ranks[k].rc, 0, "world %d rank %d: %s", w, k, ranks[k].err);
            for (int i = 0; i < 12; i++) {
                float sum = input(0, i), max = input(0, i);
                for (int r = 1; r < w; r++) {
                    sum += input(r, i);
                    max = input(r, i) > max ? input(r, i) : max;
                }
                cr_assert_eq(ranks[k].out[i], sum, "world %d rank %d [%d]", w, k, i);
                cr_assert_eq(ranks[k].out[12 + i], sum / (float)w);
                cr_assert_eq(ranks[k].out[24 + i], max);
                cr_assert_eq(ranks[k].out[36 + i], sum, "in place");
            }
            cr_assert_eq(memcmp(ranks[k].out, ranks[0].out, 48 * sizeof(float)), 0);
        }
    }
}

static void do_scatter_gather(coll_t *c, rank_t *r) {
    enum { N = 3 };
    float send[MAXW * N], part[N], whole[MAXW * N];
    for (int i = 0; i < r->world * N; i++)
        send[i] = input(r->rank, i);
    r->rc = coll_reduce_scatter(c, send, part, N, COLL_AVG, NULL);
    r->rc |= coll_all_gather(c, part, whole, N, NULL);
    memcpy(r->out, whole, (size_t)r->world * N * sizeof(float));
    /* llm.c's in-place ZeRO-1: reduce-scatter into this rank's own slice, gather back */
    r->rc |= coll_reduce_scatter(c, send, send + r->rank * N, N, COLL_AVG, NULL);
    r->rc |= coll_all_gather(c, send + r->rank * N, send, N, NULL);
    memcpy(r->out + 32, send, (size_t)r->world * N * sizeof(float));
}

Test(collective, reduce_scatter_then_all_gather_is_all_reduce) {
    alarm(60);
    for (int w = 1; w <= MAXW; w++) {
        rank_t ranks[MAXW];
        run_ranks(w, 30, do_scatter_gather, ranks, NULL);
        for (int k = 0; k < w; k++) {
            cr_assert_eq(ranks[k].rc, 0, "world %d rank %d: %s", w, k, ranks[k].err);
            for (int i = 0; i < w * 3; i++) {
                float sum = input(0, i);
                for (int r = 1; r < w; r++)
                    sum += input(r, i);
                cr_assert_eq(ranks[k].out[i], sum / (float)w, "world %d rank %d [%d]", w, k, i);
                cr_assert_eq(ranks[k].out[32 + i], sum / (float)w, "in place [%d]", i);
            }
        }
    }
}

static void do_broadcast(coll_t *c, rank_t *r) {
    char blob[32];
    r->rc = 0;
    for (int root = 0; root < r->world; root++) {
        snprintf(blob, sizeof blob, "from %d/%d", c->rank, root);
        r->rc |= coll_broadcast_host(c, blob, sizeof blob, root);
        char want[32];
        snprintf(want, sizeof want, "from %d/%d", root, root);
        if (strcmp(blob, want) != 0)
            r->rc |= 4;
    }
    r->rc |= coll_barrier(c) ? 8 : 0;
    if (r->rc == 0 && coll_broadcast_host(c, blob, 1, r->world) == 0)
        r->rc = 16; /* a root outside the group must be refused */
}

Test(collective, broadcast_from_every_root) {
    alarm(60);
    rank_t ranks[MAXW];
    run_ranks(3, 30, do_broadcast, ranks, NULL);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(ranks[k].rc, 0, "rank %d: %d %s", k, ranks[k].rc, ranks[k].err);
        cr_assert(strstr(ranks[k].err, "root 3, expected 0..2") != NULL, "%s", ranks[k].err);
    }
}

static void do_check_same(coll_t *c, rank_t *r) {
    const int *differs = r->arg; /* per rank: 1 = started with other flags */
    char flags[32];
    snprintf(flags, sizeof flags, "--batch %d", differs[c->rank] ? 16 : 8);
    r->rc = coll_check_same(c, flags, strlen(flags), "the flags");
}

Test(collective, mismatched_flags_are_named_on_every_rank) {
    alarm(60);
    rank_t ranks[MAXW];
    int same[MAXW] = {0};
    run_ranks(4, 30, do_check_same, ranks, same);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(ranks[k].rc, 0, "%s", ranks[k].err);
    int two[MAXW] = {0, 1, 0, 1};
    run_ranks(4, 30, do_check_same, ranks, two);
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(ranks[k].rc, -1);
        char want[128];
        snprintf(want, sizeof want, "rank %d of 4: the flags differ between ranks: ranks 1, 3 "
                 "(of 4) differ from rank 0's", k);
        cr_assert_str_eq(ranks[k].err, want);
    }
    int one[MAXW] = {0, 0, 1, 0};
    run_ranks(3, 30, do_check_same, ranks, one);
    cr_assert_str_eq(ranks[0].err, "rank 0 of 3: the flags differ between ranks: rank 2 (of 3) "
                     "differs from rank 0's");
}

static void do_one_missing(coll_t *c, rank_t *r) {
    float x[2] = {1, 2};
    if (c->rank == 2) { /* this rank died: it never calls */
        r->rc = 0;
        return;
    }
    r->rc = coll_all_reduce(c, x, x, 2, COLL_SUM, NULL);
}

Test(collective, a_rank_that_never_arrives_is_named_not_waited_for) {
    alarm(60);
    rank_t ranks[MAXW];
    run_ranks(4, 0.3, do_one_missing, ranks, NULL);
    for (int k = 0; k < 4; k++) {
        if (k == 2)
            continue;
        cr_assert_eq(ranks[k].rc, -1, "rank %d", k);
        cr_assert(strstr(ranks[k].err, "all-reduce: not done within 0.3 s: rank(s) 2 did not "
                         "arrive") != NULL, "%s", ranks[k].err);
        char who[32];
        snprintf(who, sizeof who, "rank %d of 4: ", k);
        cr_assert(strncmp(ranks[k].err, who, strlen(who)) == 0, "%s", ranks[k].err);
    }
}

static void do_abort(coll_t *c, rank_t *r) {
    if (c->rank == 1) {
        usleep(50 * 1000); /* the others are waiting by now (if not, they fail on entry) */
        coll_abort(c);
        r->rc = 0;
        return;
    }
    r->rc = coll_barrier(c);
    if (r->rc != 0 && coll_wait(c, NULL) == 0)
        r->rc = 99; /* the group stays aborted */
}

Test(collective, abort_ends_every_wait_naming_the_rank) {
    alarm(60);
    rank_t ranks[MAXW];
    run_ranks(3, 30, do_abort, ranks, NULL);
    for (int k = 0; k < 3; k += 2) {
        cr_assert_eq(ranks[k].rc, -1, "rank %d: %d", k, ranks[k].rc);
        cr_assert(strstr(ranks[k].err, "rank 1 aborted the group") != NULL, "%s", ranks[k].err);
    }
}

Test(collective, timeout_from_the_environment) {
    double t = 0;
    char e[256];
    unsetenv("UVMRT_COLL_TIMEOUT_S");
    cr_assert_eq(coll_timeout_from_env(&t, e, sizeof e), 0);
    cr_assert_eq(t, 600);
    setenv("UVMRT_COLL_TIMEOUT_S", "2.5", 1);
    cr_assert_eq(coll_timeout_from_env(&t, e, sizeof e), 0);
    cr_assert_eq(t, 2.5);
    const char *bad[] = {"0", "-1", "x", "", "inf", "1s"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("UVMRT_COLL_TIMEOUT_S", bad[i], 1);
        t = 7;
        cr_assert_eq(coll_timeout_from_env(&t, e, sizeof e), -1, "%s", bad[i]);
        cr_assert_eq(t, 7);
        cr_assert(strstr(e, "UVMRT_COLL_TIMEOUT_S") != NULL, "%s", e);
    }
    unsetenv("UVMRT_COLL_TIMEOUT_S");
}
