/*
 * collective_nccl.c -- the seam of collective.h over NCCL (what users get).
 *
 * The communicator is non-blocking (ncclConfig_t.blocking = 0) so that no call can hang
 * past the timeout: init, every enqueue and coll_wait() poll NCCL's asynchronous error
 * and the stream until done, failed or out of time. On a failure the caller aborts the
 * communicator (coll_abort -> ncclCommAbort), which makes the collectives the other
 * ranks are in fail, and they report it in turn.
 */
#define _POSIX_C_SOURCE 200809L

#include "collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

typedef struct {
    ncclComm_t comm;
    int device;
    cudaStream_t stream; /* for the host-side calls: barrier, broadcast */
    void *scratch;       /* device bytes for them */
    size_t scratch_bytes;
    char comm_id[LAUNCH_COMM_ID_MAX];
} nccl_t;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void nap(void) {
    struct timespec t = {0, 100 * 1000};
    nanosleep(&t, NULL);
}

static int nccl_fail(coll_t *c, const char *op, ncclResult_t r) {
    nccl_t *n = c->impl;
    const char *last = n->comm != NULL ? ncclGetLastError(n->comm) : NULL;
    return coll_fail(c, "%s: NCCL error %d (%s)%s%s", op, (int)r, ncclGetErrorString(r),
                     last && *last ? ": " : "", last ? last : "");
}

/* Polls the communicator until it is no longer in progress. */
static int settle(coll_t *c, const char *op, ncclResult_t r) {
    nccl_t *n = c->impl;
    double deadline = now_s() + c->timeout_s;
    while (r == ncclInProgress) {
        if (now_s() > deadline)
            return coll_fail(c, "%s: not done within %g s (a rank died or did not call it?)", op,
                             c->timeout_s);
        nap();
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess)
            return coll_fail(c, "%s: ncclCommGetAsyncError failed", op);
    }
    return r == ncclSuccess ? 0 : nccl_fail(c, op, r);
}

static ncclRedOp_t red_op(coll_op_t op) {
    return op == COLL_AVG ? ncclAvg : op == COLL_MAX ? ncclMax : ncclSum;
}

static int n_all_reduce(coll_t *c, const float *send, float *recv, size_t count, coll_op_t op,
                        void *stream) {
    nccl_t *n = c->impl;
    return settle(c, "all-reduce", ncclAllReduce(send, recv, count, ncclFloat, red_op(op),
                                                 n->comm, (cudaStream_t)stream));
}

static int n_reduce_scatter(coll_t *c, const float *send, float *recv, size_t recvcount,
                            coll_op_t op, void *stream) {
    nccl_t *n = c->impl;
    return settle(c, "reduce-scatter", ncclReduceScatter(send, recv, recvcount, ncclFloat,
                                                         red_op(op), n->comm,
                                                         (cudaStream_t)stream));
}

static int n_all_gather(coll_t *c, const float *send, float *recv, size_t sendcount,
                        void *stream) {
    nccl_t *n = c->impl;
    return settle(c, "all-gather", ncclAllGather(send, recv, sendcount, ncclFloat, n->comm,
                                                 (cudaStream_t)stream));
}

static int n_wait(coll_t *c, void *stream) {
    nccl_t *n = c->impl;
    double deadline = now_s() + c->timeout_s;
    for (;;) {
        cudaError_t q = cudaStreamQuery((cudaStream_t)stream);
        if (q == cudaSuccess)
            return 0;
        if (q != cudaErrorNotReady)
            return coll_fail(c, "wait: CUDA error %s (%s)", cudaGetErrorName(q),
                             cudaGetErrorString(q));
        ncclResult_t r;
        if (ncclCommGetAsyncError(n->comm, &r) != ncclSuccess)
            return coll_fail(c, "wait: ncclCommGetAsyncError failed");
        if (r != ncclSuccess && r != ncclInProgress)
            return nccl_fail(c, "wait", r);
        if (now_s() > deadline)
            return coll_fail(c, "wait: the collectives were not done within %g s (a rank died "
                             "or did not call them?)", c->timeout_s);
        nap();
    }
}

static int need_scratch(coll_t *c, size_t bytes) {
    nccl_t *n = c->impl;
    if (bytes <= n->scratch_bytes)
        return 0;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess)
        return coll_fail(c, "cudaMalloc of %zu bytes for a host-side collective: %s", bytes,
                         cudaGetErrorString(e));
    cudaFree(n->scratch);
    n->scratch = p;
    n->scratch_bytes = bytes;
    return 0;
}

static int n_barrier(coll_t *c) {
    nccl_t *n = c->impl;
    if (need_scratch(c, sizeof(float)) != 0)
        return -1;
    if (n_all_reduce(c, n->scratch, n->scratch, 1, COLL_SUM, n->stream) != 0)
        return -1;
    return n_wait(c, n->stream);
}

static int n_broadcast_host(coll_t *c, void *buf, size_t bytes, int root) {
    nccl_t *n = c->impl;
    if (root < 0 || root >= c->world)
        return coll_fail(c, "broadcast: root %d, expected 0..%d", root, c->world - 1);
    if (need_scratch(c, bytes ? bytes : 1) != 0)
        return -1;
    cudaError_t e = cudaMemcpyAsync(n->scratch, buf, bytes, cudaMemcpyHostToDevice, n->stream);
    if (e != cudaSuccess)
        return coll_fail(c, "broadcast: copy to the GPU: %s", cudaGetErrorString(e));
    if (settle(c, "broadcast", ncclBroadcast(n->scratch, n->scratch, bytes, ncclUint8, root,
                                             n->comm, n->stream)) != 0)
        return -1;
    if (n_wait(c, n->stream) != 0)
        return -1;
    e = cudaMemcpy(buf, n->scratch, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        return coll_fail(c, "broadcast: copy from the GPU: %s", cudaGetErrorString(e));
    return 0;
}

static void n_abort(coll_t *c) {
    nccl_t *n = c->impl;
    if (n->comm != NULL)
        ncclCommAbort(n->comm);
    n->comm = NULL;
}

static void release(nccl_t *n) {
    if (n->scratch != NULL)
        cudaFree(n->scratch);
    if (n->stream != NULL)
        cudaStreamDestroy(n->stream);
    free(n);
}

static void n_destroy(coll_t *c) {
    nccl_t *n = c->impl;
    if (n->comm != NULL) {
        /* a clean finish when every rank gets here, an abort when one does not */
        if (settle(c, "finalize", ncclCommFinalize(n->comm)) == 0)
            ncclCommDestroy(n->comm);
        else
            ncclCommAbort(n->comm);
    }
    release(n);
    free(c);
}

static const coll_ops_t nccl_ops = {
    .name = "nccl",
    .all_reduce = n_all_reduce,
    .reduce_scatter = n_reduce_scatter,
    .all_gather = n_all_gather,
    .wait = n_wait,
    .barrier = n_barrier,
    .broadcast_host = n_broadcast_host,
    .abort = n_abort,
    .destroy = n_destroy,
};

/* The GPU of this rank: local_rank, or 0 when only one is visible (a launcher that
 * narrows CUDA_VISIBLE_DEVICES per process). */
static int pick_device(coll_t *c, const launch_t *l, int *dev) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess)
        return coll_fail(c, "no CUDA device: %s", cudaGetErrorString(e));
    if (count == 1) {
        *dev = 0;
    } else if (l->local_rank < count) {
        *dev = l->local_rank;
    } else {
        return coll_fail(c, "local rank %d (%s) but %d GPUs are visible: expected one process "
                         "per GPU", l->local_rank, l->launcher, count);
    }
    e = cudaSetDevice(*dev);
    if (e != cudaSuccess)
        return coll_fail(c, "cudaSetDevice(%d): %s", *dev, cudaGetErrorString(e));
    return 0;
}

static int join(coll_t *c, const launch_t *l) {
    nccl_t *n = c->impl;
    if (pick_device(c, l, &n->device) != 0)
        return -1;
    cudaError_t e = cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking);
    if (e != cudaSuccess)
        return coll_fail(c, "cudaStreamCreate: %s", cudaGetErrorString(e));
    /* every rank's ncclGetUniqueId then returns the same id, and rank 0 listens there */
    if (l->world > 1 && setenv("NCCL_COMM_ID", l->comm_id, 1) != 0)
        return coll_fail(c, "setenv NCCL_COMM_ID failed");
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
        return nccl_fail(c, "ncclGetUniqueId", r);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    r = ncclCommInitRankConfig(&n->comm, l->world, id, l->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        int rc = nccl_fail(c, "ncclCommInitRank", r);
        n->comm = NULL;
        return rc;
    }
    if (settle(c, "ncclCommInitRank", r) != 0) {
        char why[sizeof c->err - LAUNCH_COMM_ID_MAX / 2];
        snprintf(why, sizeof why, "%.300s", c->err);
        ncclCommAbort(n->comm);
        n->comm = NULL;
        snprintf(c->err, sizeof c->err, "%s (bootstrap at %.100s, launched by %s)", why,
                 l->world > 1 ? l->comm_id : "-", l->launcher);
        return -1;
    }
    return 0;
}

int coll_nccl_create(coll_t **out, const launch_t *launch, double timeout_s, char *err,
                     size_t errlen) {
    *out = NULL;
    coll_t *c = calloc(1, sizeof *c);
    nccl_t *n = calloc(1, sizeof *n);
    if (c == NULL || n == NULL) {
        free(c);
        free(n);
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "rank %d of %d: out of memory", launch->rank, launch->world);
        return -1;
    }
    *c = (coll_t){.ops = &nccl_ops, .rank = launch->rank, .world = launch->world,
                  .local_rank = launch->local_rank, .timeout_s = timeout_s, .impl = n};
    snprintf(n->comm_id, sizeof n->comm_id, "%s", launch->comm_id);
    if (join(c, launch) != 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "%s", c->err);
        release(n);
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}
