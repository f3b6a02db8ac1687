/*
 * collective.h -- the collectives a data-parallel trainer needs, behind a small seam.
 *
 * Two implementations: NCCL (collective_nccl.c, built when configure finds NCCL; what
 * users always get) and a test transport of threads in one process sharing memory
 * (tests/coll_threads.c, for `make check` only).
 *
 * Buffers are float arrays the transport can read and write: device or managed memory
 * for NCCL, any memory for the test transport. The float collectives are enqueued on
 * `stream` (a cudaStream_t; NULL: the default stream) and may return before they are
 * done; coll_wait() waits for the stream and reports a failed or timed-out collective.
 * coll_barrier() and coll_broadcast_host() are synchronous.
 *
 * Errors: every call returns 0 or -1; on -1, coll_error() holds one line that names this
 * rank ("rank 2 of 4: ...") and, where known, the rank that failed or did not arrive. A
 * collective that is not done within the timeout (UVMRT_COLL_TIMEOUT_S, default 600 s)
 * fails instead of hanging. After a failure the group is unusable: call coll_abort(),
 * which also ends the other ranks' waits with a message naming this rank.
 *
 * Plain C11; no CUDA in this header.
 */
#ifndef UVMRT_EXAMPLES_COLLECTIVE_H
#define UVMRT_EXAMPLES_COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "launch.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { COLL_SUM = 0, COLL_AVG, COLL_MAX } coll_op_t;

typedef struct coll coll_t;

typedef struct {
    const char *name; /* "nccl", "threads" */
    int (*all_reduce)(coll_t *c, const float *send, float *recv, size_t count, coll_op_t op,
                      void *stream);
    /* recv (recvcount floats) := rank's slice of the reduction of send (world*recvcount) */
    int (*reduce_scatter)(coll_t *c, const float *send, float *recv, size_t recvcount,
                          coll_op_t op, void *stream);
    /* recv (world*sendcount floats) := every rank's send, in rank order */
    int (*all_gather)(coll_t *c, const float *send, float *recv, size_t sendcount, void *stream);
    int (*wait)(coll_t *c, void *stream);
    int (*barrier)(coll_t *c);
    /* buf (host memory, bytes) := root's buf on every rank */
    int (*broadcast_host)(coll_t *c, void *buf, size_t bytes, int root);
    void (*abort)(coll_t *c);
    void (*destroy)(coll_t *c);
} coll_ops_t;

struct coll {
    const coll_ops_t *ops;
    int rank, world, local_rank;
    double timeout_s;
    char err[512];
    void *impl;
};

/* The timeout in seconds from UVMRT_COLL_TIMEOUT_S (default 600); -1 and a message
 * naming the value when it is not a positive number. */
int coll_timeout_from_env(double *out, char *err, size_t errlen);

/* Creates this process's NCCL communicator from a launch (launch.h): selects the GPU
 * (local_rank, or device 0 when CUDA_VISIBLE_DEVICES leaves one), sets NCCL_COMM_ID and
 * joins the group. Without NCCL in the build: -1 and a message saying so. */
int coll_nccl_create(coll_t **out, const launch_t *launch, double timeout_s, char *err,
                     size_t errlen);

static inline const char *coll_error(const coll_t *c) { return c->err; }

static inline int coll_all_reduce(coll_t *c, const float *send, float *recv, size_t count,
                                  coll_op_t op, void *stream) {
    return c->ops->all_reduce(c, send, recv, count, op, stream);
}
static inline int coll_reduce_scatter(coll_t *c, const float *send, float *recv,
                                      size_t recvcount, coll_op_t op, void *stream) {
    return c->ops->reduce_scatter(c, send, recv, recvcount, op, stream);
}
static inline int coll_all_gather(coll_t *c, const float *send, float *recv, size_t sendcount,
                                  void *stream) {
    return c->ops->all_gather(c, send, recv, sendcount, stream);
}
static inline int coll_wait(coll_t *c, void *stream) { return c->ops->wait(c, stream); }
static inline int coll_barrier(coll_t *c) { return c->ops->barrier(c); }
static inline int coll_broadcast_host(coll_t *c, void *buf, size_t bytes, int root) {
    return c->ops->broadcast_host(c, buf, bytes, root);
}
static inline void coll_abort(coll_t *c) { c->ops->abort(c); }
static inline void coll_destroy(coll_t *c) {
    if (c != NULL)
        c->ops->destroy(c);
}

/* Sets c->err to "rank R of N: <message>" and returns -1. */
int coll_fail(coll_t *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Checks that every rank was started with the same settings: blob (bytes) is hashed,
 * every rank's hash is broadcast to all (coll_broadcast_host, world times), and every
 * rank fails with the same message naming the ranks whose hash differs from rank 0's
 * ("rank 1 of 2: <what> differ between ranks: rank 1 (of 2) differ from rank 0's"). */
int coll_check_same(coll_t *c, const void *blob, size_t bytes, const char *what);

/* FNV-1a over bytes (the hash coll_check_same compares). */
uint64_t coll_hash(const void *blob, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_EXAMPLES_COLLECTIVE_H */
