/*
 * cuda.c -- the real backend: managed memory, prefetch and discard on copy
 * streams, events, through the CUDA runtime (plain C over cuda_runtime_api.h).
 *
 * The CUDA 12 -> 13 change of cudaMemPrefetchAsync is handled in one function,
 * prefetch_one(). Without CUDA in the build this file only says so.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include "backend.h"

#ifndef UVMRT_HAVE_CUDA
const uvmrt_backend_ops_t *const uvmrt__backend_cuda_ptr = NULL;
#else

#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "log.h"

typedef struct cuda_be {
    int device;
    uvmrt_log_t *log;
    cudaError_t last; /* the last failure, named by cuda_error_name */
} cuda_be_t;

/* Logs the failed expression with the CUDA error's name, file and line. */
#define CUDA_TRY(be, expr)                                                                   \
    do {                                                                                     \
        cudaError_t err_ = (expr);                                                           \
        if (err_ != cudaSuccess) {                                                           \
            (be)->last = err_;                                                               \
            LOG_ERROR((be)->log, "%s failed: %s (%s) at %s:%d", #expr, cudaGetErrorName(err_), \
                      cudaGetErrorString(err_), __FILE__, __LINE__);                         \
            return UVMRT_ERR_BACKEND;                                                        \
        }                                                                                    \
    } while (0)

static uvmrt_status_t cuda_open(const uvmrt_backend_config_t *cfg, void **state)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        LOG_WARN(cfg->log, "no usable GPU: cudaGetDeviceCount gave %d devices (%s)", count,
                 err == cudaSuccess ? "no devices" : cudaGetErrorName(err));
        return UVMRT_ERR_NO_DEVICE;
    }
    if (cfg->device >= count) {
        LOG_ERROR(cfg->log, "device %d does not exist: expected 0..%d", cfg->device, count - 1);
        return UVMRT_ERR_INVALID;
    }
    cuda_be_t tmp = {cfg->device, cfg->log, cudaSuccess};
    CUDA_TRY(&tmp, cudaSetDevice(cfg->device));
    int concurrent = 0;
    CUDA_TRY(&tmp, cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, cfg->device));
    if (!concurrent) {
        LOG_ERROR(cfg->log, "device %d has no concurrent managed access (Windows, WSL2 and Jetson lack "
                            "it): prefetch and oversubscription are unavailable; use policy none",
                  cfg->device);
        return UVMRT_ERR_UNSUPPORTED;
    }
    cuda_be_t *be = malloc(sizeof *be);
    if (be == NULL) return UVMRT_ERR_NOMEM;
    *be = tmp;
    *state = be;
    return UVMRT_OK;
}

static void cuda_close(void *state) { free(state); }

static const char *cuda_error_name(void *state)
{
    const cuda_be_t *be = state;
    return be->last == cudaSuccess ? NULL : cudaGetErrorName(be->last);
}

static uvmrt_status_t cuda_mem_info(void *state, uint64_t *free_bytes, uint64_t *total)
{
    cuda_be_t *be = state;
    size_t f = 0, t = 0;
    CUDA_TRY(be, cudaMemGetInfo(&f, &t));
    *free_bytes = f;
    *total = t;
    return UVMRT_OK;
}

/* An allocation's result: out of memory is UVMRT_ERR_NOMEM, another error the backend's. */
static uvmrt_status_t alloc_result(cuda_be_t *be, cudaError_t err, const char *call, size_t bytes)
{
    if (err == cudaErrorMemoryAllocation) {
        be->last = err;
        LOG_ERROR(be->log, "%s(%zu bytes) failed: out of memory", call, bytes);
        return UVMRT_ERR_NOMEM;
    }
    CUDA_TRY(be, err);
    return UVMRT_OK;
}

static uvmrt_status_t cuda_alloc(void *state, size_t bytes, void **ptr)
{
    return alloc_result(state, cudaMallocManaged(ptr, bytes, cudaMemAttachGlobal), "cudaMallocManaged", bytes);
}

static void cuda_free(void *state, void *ptr, size_t bytes)
{
    (void)state;
    (void)bytes;
    cudaFree(ptr);
}

static uvmrt_status_t cuda_host_alloc(void *state, size_t bytes, void **ptr)
{
    return alloc_result(state, cudaHostAlloc(ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                        "cudaHostAlloc", bytes);
}

static void cuda_host_free(void *state, void *ptr, size_t bytes)
{
    (void)state;
    (void)bytes;
    cudaFreeHost(ptr);
}

static uvmrt_status_t cuda_stream_create(void *state, uvmrt_stream_t *out)
{
    cuda_be_t *be = state;
    cudaStream_t s;
    CUDA_TRY(be, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = (uvmrt_stream_t)s;
    return UVMRT_OK;
}

static void cuda_stream_destroy(void *state, uvmrt_stream_t s)
{
    (void)state;
    cudaStreamDestroy((cudaStream_t)s);
}

static uvmrt_status_t cuda_event_create(void *state, int timing, uvmrt_event_t *out)
{
    cuda_be_t *be = state;
    cudaEvent_t e;
    CUDA_TRY(be, cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    *out = (uvmrt_event_t)e;
    return UVMRT_OK;
}

static void cuda_event_destroy(void *state, uvmrt_event_t e)
{
    (void)state;
    cudaEventDestroy((cudaEvent_t)e);
}

static uvmrt_status_t cuda_event_record(void *state, uvmrt_event_t e, uvmrt_stream_t s)
{
    cuda_be_t *be = state;
    CUDA_TRY(be, cudaEventRecord((cudaEvent_t)e, (cudaStream_t)s));
    return UVMRT_OK;
}

static uvmrt_status_t cuda_stream_wait(void *state, uvmrt_stream_t s, uvmrt_event_t e)
{
    cuda_be_t *be = state;
    CUDA_TRY(be, cudaStreamWaitEvent((cudaStream_t)s, (cudaEvent_t)e, 0));
    return UVMRT_OK;
}

/* An event that failed will never complete: it counts as done (so nothing
 * waits for it forever), and the failure is kept for error_name and logged. */
static int cuda_event_done(void *state, uvmrt_event_t e)
{
    cuda_be_t *be = state;
    cudaError_t err = cudaEventQuery((cudaEvent_t)e);
    if (err == cudaErrorNotReady) return 0;
    if (err != cudaSuccess) {
        be->last = err;
        LOG_ERROR(be->log, "cudaEventQuery failed: %s (%s): the event counts as complete", cudaGetErrorName(err),
                  cudaGetErrorString(err));
    }
    return 1;
}

static uvmrt_status_t cuda_elapsed(void *state, uvmrt_event_t a, uvmrt_event_t b, uint64_t *ns)
{
    cuda_be_t *be = state;
    float ms = 0;
    CUDA_TRY(be, cudaEventSynchronize((cudaEvent_t)b));
    CUDA_TRY(be, cudaEventElapsedTime(&ms, (cudaEvent_t)a, (cudaEvent_t)b));
    *ns = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
    return UVMRT_OK;
}

static uvmrt_status_t cuda_stream_sync(void *state, uvmrt_stream_t s)
{
    cuda_be_t *be = state;
    CUDA_TRY(be, cudaStreamSynchronize((cudaStream_t)s));
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ migration */
/* The one place that knows the prefetch signature of each CUDA version. */
static cudaError_t prefetch_one(void *ptr, size_t bytes, uvmrt_location_t to, int device, cudaStream_t s)
{
#if CUDART_VERSION >= 12020
    struct cudaMemLocation loc;
    loc.type = to == UVMRT_LOC_DEVICE ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = to == UVMRT_LOC_DEVICE ? device : 0;
#if CUDART_VERSION >= 13000
    return cudaMemPrefetchAsync(ptr, bytes, loc, 0, s);
#else
    return cudaMemPrefetchAsync_v2(ptr, bytes, loc, 0, s);
#endif
#else
    return cudaMemPrefetchAsync(ptr, bytes, to == UVMRT_LOC_DEVICE ? device : cudaCpuDeviceId, s);
#endif
}

static uvmrt_status_t cuda_move(void *state, const uvmrt_range_t *r, size_t n, uvmrt_location_t to,
                                uvmrt_stream_t stream)
{
    cuda_be_t *be = state;
    cudaStream_t s = (cudaStream_t)stream;
#if CUDART_VERSION >= 13000
    /* Several ranges: one batch call (it needs a real stream, not the legacy one). */
    if (n > 1 && s != NULL && n <= 256) {
        void *ptrs[256];
        size_t sizes[256];
        for (size_t i = 0; i < n; i++) {
            ptrs[i] = r[i].ptr;
            sizes[i] = r[i].bytes;
        }
        struct cudaMemLocation loc;
        loc.type = to == UVMRT_LOC_DEVICE ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
        loc.id = to == UVMRT_LOC_DEVICE ? be->device : 0;
        size_t first = 0;
        CUDA_TRY(be, cudaMemPrefetchBatchAsync(ptrs, sizes, n, &loc, &first, 1, 0, s));
        return UVMRT_OK;
    }
#endif
    for (size_t i = 0; i < n; i++) CUDA_TRY(be, prefetch_one(r[i].ptr, r[i].bytes, to, be->device, s));
    return UVMRT_OK;
}

/* The one place that knows the advise signature of each CUDA version. */
static cudaError_t advise_one(void *ptr, size_t bytes, enum cudaMemoryAdvise advice, uvmrt_location_t where,
                              int device)
{
#if CUDART_VERSION >= 12020
    struct cudaMemLocation loc;
    loc.type = where == UVMRT_LOC_DEVICE ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    loc.id = where == UVMRT_LOC_DEVICE ? device : 0;
#if CUDART_VERSION >= 13000
    return cudaMemAdvise(ptr, bytes, advice, loc);
#else
    return cudaMemAdvise_v2(ptr, bytes, advice, loc);
#endif
#else
    return cudaMemAdvise(ptr, bytes, advice, where == UVMRT_LOC_DEVICE ? device : cudaCpuDeviceId);
#endif
}

/* Host-homed: pages live in host memory and the GPU maps them (no migration on
 * access: ~50 GB/s reads and writes over the link on the H200). */
static uvmrt_status_t cuda_advise_remote(void *state, const uvmrt_range_t *r, size_t n)
{
    cuda_be_t *be = state;
    for (size_t i = 0; i < n; i++) {
        CUDA_TRY(be, advise_one(r[i].ptr, r[i].bytes, cudaMemAdviseSetPreferredLocation, UVMRT_LOC_HOST, be->device));
        CUDA_TRY(be, advise_one(r[i].ptr, r[i].bytes, cudaMemAdviseSetAccessedBy, UVMRT_LOC_DEVICE, be->device));
    }
    return UVMRT_OK;
}

#if CUDART_VERSION >= 13000
static uvmrt_status_t cuda_discard(void *state, const uvmrt_range_t *r, size_t n, uvmrt_stream_t stream)
{
    cuda_be_t *be = state;
    for (size_t i = 0; i < n; i += 256) {
        void *ptrs[256];
        size_t sizes[256];
        size_t k = n - i < 256 ? n - i : 256;
        for (size_t j = 0; j < k; j++) {
            ptrs[j] = r[i + j].ptr;
            sizes[j] = r[i + j].bytes;
        }
        CUDA_TRY(be, cudaMemDiscardBatchAsync(ptrs, sizes, k, 0, (cudaStream_t)stream));
    }
    return UVMRT_OK;
}
#endif

static uint64_t cuda_now(void *state)
{
    (void)state;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const uvmrt_backend_ops_t cuda_ops = {
    .name = "cuda",
#if CUDART_VERSION >= 13000
    .caps = {.discard = 1, .remote_advice = 1, .timing = 1, .event_query = 1},
#else
    .caps = {.discard = 0, .remote_advice = 1, .timing = 1, .event_query = 1}, /* CUDA 12: no discard */
#endif
    .error_name = cuda_error_name,
    .open = cuda_open,
    .close = cuda_close,
    .mem_info = cuda_mem_info,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait = cuda_stream_wait,
    .event_done = cuda_event_done,
    .event_elapsed_ns = cuda_elapsed,
    .stream_sync = cuda_stream_sync,
    .move = cuda_move,
#if CUDART_VERSION >= 13000
    .discard = cuda_discard, /* CUDA 12: NULL, the front end writes back instead */
#endif
    .advise_remote = cuda_advise_remote,
    .touch = NULL,           /* the real GPU runs the work itself (caps.touch = 0) */
    .now_ns = cuda_now,
};

const uvmrt_backend_ops_t *const uvmrt__backend_cuda_ptr = &cuda_ops;
#endif
