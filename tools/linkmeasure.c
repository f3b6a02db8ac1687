/*
 * linkmeasure.c -- timed host<->GPU transfers (see linkmeasure.h).
 */
#include <string.h>

#include "linkmeasure.h"

#define TRY(expr)                            \
    do {                                     \
        cudaError_t e_ = (expr);             \
        if (e_ != cudaSuccess) return e_;    \
    } while (0)

cudaError_t lm_timer_init(lm_timer_t *t)
{
    memset(t, 0, sizeof *t);
    TRY(cudaStreamCreateWithFlags(&t->s1, cudaStreamNonBlocking));
    TRY(cudaStreamCreateWithFlags(&t->s2, cudaStreamNonBlocking));
    TRY(cudaEventCreate(&t->start));
    TRY(cudaEventCreate(&t->stop));
    return cudaEventCreateWithFlags(&t->joined, cudaEventDisableTiming);
}

void lm_timer_fini(lm_timer_t *t)
{
    /* teardown: errors here change no result, and each handle is released once */
    if (t->joined) cudaEventDestroy(t->joined);
    if (t->stop) cudaEventDestroy(t->stop);
    if (t->start) cudaEventDestroy(t->start);
    if (t->s2) cudaStreamDestroy(t->s2);
    if (t->s1) cudaStreamDestroy(t->s1);
    memset(t, 0, sizeof *t);
}

cudaError_t lm_elapsed_ns(lm_timer_t *t, double *ns)
{
    float ms = 0.0f;
    TRY(cudaEventSynchronize(t->stop));
    TRY(cudaEventElapsedTime(&ms, t->start, t->stop));
    *ns = (double)ms * 1e6;
    return cudaSuccess;
}

cudaError_t lm_time_copy(lm_timer_t *t, void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                         double *ns)
{
    TRY(cudaEventRecord(t->start, t->s1));
    TRY(cudaMemcpyAsync(dst, src, n, kind, t->s1));
    TRY(cudaEventRecord(t->stop, t->s1));
    return lm_elapsed_ns(t, ns);
}

cudaError_t lm_enqueue_bidir(lm_timer_t *t, void *d1, const void *h1, void *h2, const void *d2, size_t n)
{
    TRY(cudaEventRecord(t->start, t->s1));
    TRY(cudaStreamWaitEvent(t->s2, t->start, 0));
    TRY(cudaMemcpyAsync(d1, h1, n, cudaMemcpyHostToDevice, t->s1));
    TRY(cudaMemcpyAsync(h2, d2, n, cudaMemcpyDeviceToHost, t->s2));
    TRY(cudaEventRecord(t->joined, t->s2));
    TRY(cudaStreamWaitEvent(t->s1, t->joined, 0));
    return cudaEventRecord(t->stop, t->s1);
}

cudaError_t lm_time_bidir(lm_timer_t *t, void *d1, const void *h1, void *h2, const void *d2, size_t n,
                          double *ns)
{
    TRY(lm_enqueue_bidir(t, d1, h1, h2, d2, n));
    return lm_elapsed_ns(t, ns);
}

#if CUDART_VERSION >= 12020
static struct cudaMemLocation location(int device)
{
    struct cudaMemLocation loc;
    memset(&loc, 0, sizeof loc);
    loc.type = device < 0 ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device < 0 ? 0 : device;
    return loc;
}
#endif

cudaError_t lm_prefetch(const void *p, size_t n, int device, cudaStream_t s)
{
#if CUDART_VERSION >= 13000
    return cudaMemPrefetchAsync(p, n, location(device), 0, s);
#elif CUDART_VERSION >= 12020
    return cudaMemPrefetchAsync_v2(p, n, location(device), 0, s);
#else
    return cudaMemPrefetchAsync(p, n, device < 0 ? cudaCpuDeviceId : device, s);
#endif
}

cudaError_t lm_time_prefetch(lm_timer_t *t, void *p, size_t n, int device, double *ns)
{
    TRY(cudaEventRecord(t->start, t->s1));
    TRY(lm_prefetch(p, n, device, t->s1));
    TRY(cudaEventRecord(t->stop, t->s1));
    return lm_elapsed_ns(t, ns);
}

static cudaError_t advise(void *p, size_t n, enum cudaMemoryAdvise advice, int device)
{
#if CUDART_VERSION >= 13000
    return cudaMemAdvise(p, n, advice, location(device));
#elif CUDART_VERSION >= 12020
    return cudaMemAdvise_v2(p, n, advice, location(device));
#else
    return cudaMemAdvise(p, n, advice, device < 0 ? cudaCpuDeviceId : device);
#endif
}

cudaError_t lm_advise_remote(void *p, size_t n, int device)
{
    TRY(advise(p, n, cudaMemAdviseSetPreferredLocation, -1));
    return advise(p, n, cudaMemAdviseSetAccessedBy, device);
}
