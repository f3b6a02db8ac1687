/*
 * test_zero.c -- ZeRO-1 shard arithmetic (examples/common/zero.c) and one ZeRO-1 step
 * over the test transport (tests/coll_threads.c).
 *
 *  - for 1..8 ranks, many sizes and alignments: chunks aligned, equal and padded by
 *    less than world*align, the ranks' owned ranges disjoint and exactly [0, n),
 *    every rank but the last ones owning a full chunk;
 *  - zero_overlap: a tensor's part of a shard, over tensor and shard ends;
 *  - bad world, rank, alignment and sizes that overflow: refused naming the value,
 *    the output unchanged;
 *  - a ZeRO-1 step (reduce-scatter of a layer's gradients, an update of this rank's
 *    slice only, all-gather of the weights) gives every rank, bit for bit, the weights
 *    of the one-rank update with the averaged gradient, for 1..4 ranks and a layer
 *    whose size does not divide.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "coll_threads.h"
#include "collective.h"
#include "zero.h"

static char err[512];

Test(zero, shards_are_aligned_disjoint_and_cover_the_layer) {
    const size_t sizes[] = {0, 1, 2, 7, 8, 9, 63, 64, 65, 1000, 4099, (1u << 20) + 3};
    const size_t aligns[] = {1, 4, 16, 64};
    for (int w = 1; w <= 8; w++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            for (size_t a = 0; a < sizeof aligns / sizeof aligns[0]; a++) {
                size_t n = sizes[i], al = aligns[a], next = 0;
                int short_seen = 0;
                for (int r = 0; r < w; r++) {
                    zero_shard_t s;
                    cr_assert_eq(zero_shard(n, w, r, al, &s, err, sizeof err), 0, "%s", err);
                    cr_assert_eq(s.chunk % al, 0);
                    cr_assert_eq(s.padded, (size_t)w * s.chunk);
                    cr_assert_geq(s.padded, n);
                    cr_assert_lt(s.padded - n, (size_t)w * al, "n %zu w %d al %zu", n, w, al);
                    cr_assert_eq(s.offset, (size_t)r * s.chunk);
                    cr_assert_leq(s.len, s.chunk);
                    if (s.len > 0) {
                        cr_assert_eq(s.offset, next, "contiguous and disjoint");
                        next = s.offset + s.len;
                    }
                    if (s.len < s.chunk)
                        short_seen = 1;
                    else
                        cr_assert_not(short_seen, "only the last ranks own less than a chunk");
                }
                cr_assert_eq(next, n, "the ranks own exactly [0, n): n %zu w %d al %zu", n, w,
                             al);
            }
}

Test(zero, overlap_of_a_tensor_and_a_shard) {
    zero_shard_t s;
    cr_assert_eq(zero_shard(100, 4, 1, 4, &s, err, sizeof err), 0); /* chunk 28: [28, 56) */
    size_t lo, hi;
    zero_overlap(&s, 0, 30, &lo, &hi);
    cr_assert(lo == 28 && hi == 30);
    zero_overlap(&s, 30, 10, &lo, &hi);
    cr_assert(lo == 30 && hi == 40);
    zero_overlap(&s, 50, 40, &lo, &hi);
    cr_assert(lo == 50 && hi == 56);
    zero_overlap(&s, 60, 40, &lo, &hi);
    cr_assert_eq(lo, hi, "no part");
    zero_overlap(&s, 0, 10, &lo, &hi);
    cr_assert_eq(lo, hi, "no part");
    cr_assert_eq(zero_shard(100, 4, 3, 4, &s, err, sizeof err), 0); /* [84, 100) of [84, 112) */
    cr_assert_eq(s.len, 16);
    zero_overlap(&s, 90, 10, &lo, &hi);
    cr_assert(lo == 90 && hi == 100);
}

Test(zero, bad_values_are_refused_by_name) {
    zero_shard_t s = {.chunk = 77};
    struct { size_t n; int w, r; size_t a; const char *want; } bad[] = {
        {10, 0, 0, 1, "world 0"},
        {10, 2, 2, 1, "rank 2: expected 0..1"},
        {10, 2, -1, 1, "rank -1"},
        {10, 2, 0, 0, "alignment 0"},
        {SIZE_MAX, 2, 0, 64, "does not fit"},
        {SIZE_MAX - 3, 1, 0, 8, "does not fit"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        cr_assert_eq(zero_shard(bad[i].n, bad[i].w, bad[i].r, bad[i].a, &s, err, sizeof err), -1);
        cr_assert_not_null(strstr(err, bad[i].want), "'%s' not in: %s", bad[i].want, err);
        cr_assert_eq(s.chunk, 77);
    }
}

/* ---------------------------------------------------------------------------------
 * one ZeRO-1 step over the thread transport */

#define LAYER 1003 /* not a multiple of any world size tried */
#define ALIGN 4
#define LR 0.01f

typedef struct {
    coll_threads_group_t *g;
    int rank, world, rc;
    char err[512];
    float w[LAYER + 4 * ALIGN * 4]; /* this rank's copy of the weights, padded */
} step_rank_t;

static float weight0(size_t i) { return 0.5f - 0.001f * (float)i; }
static float grad(int r, size_t i) { return 0.01f * (float)((r * 7 + (int)i) % 13) - 0.05f; }

static void *step_main(void *p) {
    step_rank_t *s = p;
    coll_t *c = coll_threads_join(s->g, s->rank);
    zero_shard_t z;
    s->rc = c == NULL || zero_shard(LAYER, s->world, s->rank, ALIGN, &z, s->err, sizeof s->err);
    if (s->rc != 0)
        return NULL;
    float *g = calloc(z.padded, sizeof *g), *mine = malloc(z.chunk * sizeof *mine);
    for (size_t i = 0; i < LAYER; i++) {
        s->w[i] = weight0(i);
        g[i] = grad(s->rank, i);
    }
    /* the gradients averaged, this rank's slice only; its update; the slices gathered */
    s->rc = coll_reduce_scatter(c, g, mine, z.chunk, COLL_AVG, NULL);
    for (size_t i = 0; i < z.len; i++)
        mine[i] = s->w[z.offset + i] - LR * mine[i];
    for (size_t i = z.len; i < z.chunk; i++)
        mine[i] = 0; /* padding */
    s->rc |= coll_all_gather(c, mine, s->w, z.chunk, NULL);
    snprintf(s->err, sizeof s->err, "%s", coll_error(c));
    free(g);
    free(mine);
    coll_destroy(c);
    return NULL;
}

Test(zero, a_zero1_step_equals_the_one_rank_update) {
    alarm(60);
    for (int w = 1; w <= 4; w++) {
        step_rank_t ranks[4];
        pthread_t t[4];
        coll_threads_group_t *g = coll_threads_group_new(w, 30);
        cr_assert_not_null(g);
        for (int r = 0; r < w; r++) {
            ranks[r] = (step_rank_t){.g = g, .rank = r, .world = w};
            cr_assert_eq(pthread_create(&t[r], NULL, step_main, &ranks[r]), 0);
        }
        for (int r = 0; r < w; r++)
            pthread_join(t[r], NULL);
        coll_threads_group_free(g);
        for (int r = 0; r < w; r++) {
            cr_assert_eq(ranks[r].rc, 0, "world %d rank %d: %s", w, r, ranks[r].err);
            for (size_t i = 0; i < LAYER; i++) {
                float sum = grad(0, i);
                for (int k = 1; k < w; k++)
                    sum += grad(k, i);
                float want = weight0(i) - LR * (sum / (float)w);
                cr_assert_eq(ranks[r].w[i], want, "world %d rank %d element %zu", w, r, i);
            }
        }
    }
}
