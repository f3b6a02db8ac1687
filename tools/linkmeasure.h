/*
 * linkmeasure.h -- timed host<->GPU transfers, shared by uvmrt-linkbench and
 * uvmrt-calibrate so that both measure the link the same way.
 *
 * Every function returns the CUDA error of the first call that failed (the
 * caller decides whether that ends the program) and times with CUDA events on
 * the timer's streams. Plain C over the CUDA runtime API; the CUDA 13 change of
 * cudaMemPrefetchAsync/cudaMemAdvise (a cudaMemLocation; _v2 in 12.2-12.9; an
 * int device before) is handled here once.
 */
#ifndef UVMRT_LINKMEASURE_H
#define UVMRT_LINKMEASURE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

typedef struct lm_timer {
    cudaStream_t s1, s2;               /* s2: the second direction */
    cudaEvent_t start, stop, joined;   /* joined: s2's end, for s1 to wait on */
} lm_timer_t;

cudaError_t lm_timer_init(lm_timer_t *t);
void lm_timer_fini(lm_timer_t *t);

/* Waits for t->stop and gives the time since t->start. */
cudaError_t lm_elapsed_ns(lm_timer_t *t, double *ns);

/* One copy of n bytes on s1. */
cudaError_t lm_time_copy(lm_timer_t *t, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                         double *ns);
/* Enqueues host->device on s1 and device->host on s2, started together, and
 * t->stop after both (not waited for): for overlapping other work with them. */
cudaError_t lm_enqueue_bidir(lm_timer_t *t, void *d1, const void *h1, void *h2, const void *d2, size_t n);
/* The same, timed until both are done. */
cudaError_t lm_time_bidir(lm_timer_t *t, void *d1, const void *h1, void *h2, const void *d2, size_t n,
                          double *ns);

/* cudaMemPrefetchAsync of a managed range: device < 0 means the host. */
cudaError_t lm_prefetch(const void *p, size_t n, int device, cudaStream_t s);
/* One prefetch on s1, timed. */
cudaError_t lm_time_prefetch(lm_timer_t *t, void *p, size_t n, int device, double *ns);
/* Preferred location host, accessed by `device`: the GPU then reads and writes
 * the range over the link without migrating it (remote mapping). */
cudaError_t lm_advise_remote(void *p, size_t n, int device);

#endif
