/*
 * coll_threads.c -- threads in one process as ranks (see coll_threads.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "coll_threads.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct coll_threads_group {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int world;
    double timeout_s;
    unsigned long gen; /* meetings completed */
    int count;         /* ranks arrived at the current meeting */
    int *arrived;      /* per rank: arrived at the current meeting */
    const void **slots;
    int aborted_by;    /* -1: none */
};

/* Waits until every rank has arrived at this meeting. ptr (unless NULL) is published
 * in this rank's slot before. */
static int meet(coll_t *c, const void *ptr, const char *op) {
    coll_threads_group_t *g = c->impl;
    int status = 0;
    pthread_mutex_lock(&g->mu);
    if (g->aborted_by >= 0) {
        pthread_mutex_unlock(&g->mu);
        return coll_fail(c, "%s: rank %d aborted the group", op, g->aborted_by);
    }
    if (ptr != NULL)
        g->slots[c->rank] = ptr;
    unsigned long gen = g->gen;
    g->arrived[c->rank] = 1;
    if (++g->count == g->world) {
        g->gen++;
        g->count = 0;
        memset(g->arrived, 0, (size_t)g->world * sizeof *g->arrived);
        pthread_cond_broadcast(&g->cv);
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    double whole = floor(g->timeout_s);
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((g->timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    while (g->gen == gen && g->aborted_by < 0) {
        if (pthread_cond_timedwait(&g->cv, &g->mu, &deadline) == ETIMEDOUT && g->gen == gen &&
            g->aborted_by < 0) {
            char missing[256] = "";
            size_t used = 0;
            for (int r = 0; r < g->world; r++)
                if (!g->arrived[r]) {
                    int n = snprintf(missing + used, sizeof missing - used, "%s%d",
                                     used ? ", " : "", r);
                    if (n > 0 && (size_t)n < sizeof missing - used)
                        used += (size_t)n;
                }
            status = coll_fail(c, "%s: not done within %g s: rank(s) %s did not arrive", op,
                               g->timeout_s, missing);
            break;
        }
    }
    if (status == 0 && g->gen == gen)
        status = coll_fail(c, "%s: rank %d aborted the group", op, g->aborted_by);
    pthread_mutex_unlock(&g->mu);
    return status;
}

static float *scratch(coll_t *c, size_t count, const char *op) {
    float *t = malloc(count ? count * sizeof *t : 1);
    if (t == NULL)
        coll_fail(c, "%s: out of memory for %zu floats", op, count);
    return t;
}

/* out[i] := op over ranks, in rank order, of slots[r][base + i] */
static void reduce(const coll_threads_group_t *g, size_t base, size_t count, coll_op_t op,
                   float *out) {
    for (size_t i = 0; i < count; i++) {
        float acc = ((const float *)g->slots[0])[base + i];
        for (int r = 1; r < g->world; r++) {
            float v = ((const float *)g->slots[r])[base + i];
            acc = op == COLL_MAX ? (v > acc ? v : acc) : acc + v;
        }
        out[i] = op == COLL_AVG ? acc / (float)g->world : acc;
    }
}

/* The shape of every float collective: meet, compute into t, meet, copy t to recv. */
static int finish(coll_t *c, float *t, float *recv, size_t count, const char *op) {
    int status = meet(c, NULL, op);
    if (status == 0 && count > 0)
        memcpy(recv, t, count * sizeof *t);
    free(t);
    return status;
}

static int t_all_reduce(coll_t *c, const float *send, float *recv, size_t count, coll_op_t op,
                        void *stream) {
    (void)stream;
    float *t = scratch(c, count, "all-reduce");
    if (t == NULL)
        return -1;
    if (meet(c, send, "all-reduce") != 0) {
        free(t);
        return -1;
    }
    reduce(c->impl, 0, count, op, t);
    return finish(c, t, recv, count, "all-reduce");
}

static int t_reduce_scatter(coll_t *c, const float *send, float *recv, size_t recvcount,
                            coll_op_t op, void *stream) {
    (void)stream;
    float *t = scratch(c, recvcount, "reduce-scatter");
    if (t == NULL)
        return -1;
    if (meet(c, send, "reduce-scatter") != 0) {
        free(t);
        return -1;
    }
    reduce(c->impl, (size_t)c->rank * recvcount, recvcount, op, t);
    return finish(c, t, recv, recvcount, "reduce-scatter");
}

static int t_all_gather(coll_t *c, const float *send, float *recv, size_t sendcount,
                        void *stream) {
    (void)stream;
    coll_threads_group_t *g = c->impl;
    size_t total = (size_t)g->world * sendcount;
    float *t = scratch(c, total, "all-gather");
    if (t == NULL)
        return -1;
    if (meet(c, send, "all-gather") != 0) {
        free(t);
        return -1;
    }
    for (int r = 0; r < g->world && sendcount > 0; r++)
        memcpy(t + (size_t)r * sendcount, g->slots[r], sendcount * sizeof *t);
    return finish(c, t, recv, total, "all-gather");
}

static int t_wait(coll_t *c, void *stream) {
    (void)stream;
    coll_threads_group_t *g = c->impl;
    pthread_mutex_lock(&g->mu);
    int by = g->aborted_by;
    pthread_mutex_unlock(&g->mu);
    return by >= 0 ? coll_fail(c, "wait: rank %d aborted the group", by) : 0;
}

static int t_barrier(coll_t *c) { return meet(c, NULL, "barrier"); }

static int t_broadcast_host(coll_t *c, void *buf, size_t bytes, int root) {
    coll_threads_group_t *g = c->impl;
    if (root < 0 || root >= g->world)
        return coll_fail(c, "broadcast: root %d, expected 0..%d", root, g->world - 1);
    if (meet(c, buf, "broadcast") != 0)
        return -1;
    if (c->rank != root && bytes > 0)
        memcpy(buf, g->slots[root], bytes);
    return meet(c, NULL, "broadcast");
}

static void t_abort(coll_t *c) {
    coll_threads_group_t *g = c->impl;
    pthread_mutex_lock(&g->mu);
    if (g->aborted_by < 0)
        g->aborted_by = c->rank;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static void t_destroy(coll_t *c) { free(c); }

static const coll_ops_t threads_ops = {
    .name = "threads",
    .all_reduce = t_all_reduce,
    .reduce_scatter = t_reduce_scatter,
    .all_gather = t_all_gather,
    .wait = t_wait,
    .barrier = t_barrier,
    .broadcast_host = t_broadcast_host,
    .abort = t_abort,
    .destroy = t_destroy,
};

coll_threads_group_t *coll_threads_group_new(int world, double timeout_s) {
    if (world < 1)
        return NULL;
    coll_threads_group_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->arrived = calloc((size_t)world, sizeof *g->arrived);
    g->slots = calloc((size_t)world, sizeof *g->slots);
    if (g->arrived == NULL || g->slots == NULL) {
        coll_threads_group_free(g);
        return NULL;
    }
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->world = world;
    g->timeout_s = timeout_s;
    g->aborted_by = -1;
    return g;
}

coll_t *coll_threads_join(coll_threads_group_t *g, int rank) {
    if (rank < 0 || rank >= g->world)
        return NULL;
    coll_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    *c = (coll_t){.ops = &threads_ops, .rank = rank, .world = g->world, .local_rank = rank,
                  .timeout_s = g->timeout_s, .impl = g};
    return c;
}

void coll_threads_group_free(coll_threads_group_t *g) {
    if (g == NULL)
        return;
    if (g->arrived != NULL && g->slots != NULL) {
        pthread_mutex_destroy(&g->mu);
        pthread_cond_destroy(&g->cv);
    }
    free(g->arrived);
    free(g->slots);
    free(g);
}
