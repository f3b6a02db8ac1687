/*
 * demo_gpu.c -- uvmrt-demo's GPU side (see demo_gpu.h): the stream, the kernels of
 * each layer call (demo_kernels.cu) and the checksums. Built only with CUDA;
 * demo_nogpu.c stands in otherwise.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "../common/cli.h"
#include "demo_gpu.h"
#include "demo_kernels.h"

const char *const demo_gpu_missing = NULL;

struct demo_gpu {
    cudaStream_t stream;
    unsigned long long *sums_dev; /* (count,) checksums on the GPU */
    size_t count;
    void (*cleanup)(void *);
    void *arg;
};

/* UV_CHECK / CUDA_CHECK (cli.h) fail through run_fail */
#define run_fail(g, ...) cli_fail((g)->cleanup, (g)->arg, __VA_ARGS__)

static void launch_check(demo_gpu_t *g, int err, const char *kernel, int layer) {
    if (err != 0)
        run_fail(g, "%s kernel of layer %d: launch failed: %s (%s)", kernel, layer,
                 cudaGetErrorString((cudaError_t)err), cudaGetErrorName((cudaError_t)err));
}

int demo_gpu_mem_info(int *device, uint64_t *free_bytes, uint64_t *total_bytes) {
    size_t f = 0, t = 0;
    if (cudaGetDevice(device) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess)
        return -1;
    *free_bytes = f;
    *total_bytes = t;
    return 0;
}

void demo_gpu_open(demo_gpu_t **out, size_t checksums, void (*cleanup)(void *), void *arg) {
    demo_gpu_t *g = calloc(1, sizeof *g);
    *out = g;
    if (g == NULL)
        cli_fail(cleanup, arg, "out of host memory");
    *g = (demo_gpu_t){.count = checksums, .cleanup = cleanup, .arg = arg};
    CUDA_CHECK(g, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    if (checksums)
        CUDA_CHECK(g, cudaMalloc((void **)&g->sums_dev, checksums * sizeof(unsigned long long)));
}

uvmrt_stream_t demo_gpu_stream(const demo_gpu_t *g) {
    return (uvmrt_stream_t)g->stream;
}

void demo_gpu_forward(demo_gpu_t *g, int layer, float *a, const float *a_prev, const float *w,
                      size_t n, int work) {
    launch_check(g, demo_forward_launch(a, a_prev, w, n, work, (uvmrt_stream_t)g->stream),
                 "forward", layer);
}

void demo_gpu_backward(demo_gpu_t *g, int layer, float *grad, const float *g_next,
                       const float *a, const float *w, size_t n, int work) {
    launch_check(g, demo_backward_launch(grad, g_next, a, w, n, work, (uvmrt_stream_t)g->stream),
                 "backward", layer);
}

void demo_gpu_optimizer(demo_gpu_t *g, int layer, float *w, float *o, const float *grad,
                        size_t n, int work) {
    launch_check(g, demo_optimizer_launch(w, o, grad, n, work, (uvmrt_stream_t)g->stream),
                 "optimizer", layer);
}

void demo_gpu_checksums(demo_gpu_t *g, size_t count, void *const *data, size_t bytes,
                        uint64_t *sums) {
    size_t sum_bytes = count * sizeof(unsigned long long);
    if (count > g->count)
        run_fail(g, "%zu checksums asked for, room for %zu", count, g->count);
    /* outside a step a device-wide sync is harmless: the last evictions finish */
    CUDA_CHECK(g, cudaDeviceSynchronize());
    CUDA_CHECK(g, cudaMemsetAsync(g->sums_dev, 0, sum_bytes, g->stream));
    for (size_t k = 0; k < count; k++)
        launch_check(g, demo_checksum_launch(data[k], bytes, g->sums_dev + k,
                                             (uvmrt_stream_t)g->stream),
                     "checksum", (int)(k / 2));
    unsigned long long *host = malloc(sum_bytes);
    if (host == NULL)
        run_fail(g, "out of host memory for checksums");
    cudaError_t e = cudaMemcpyAsync(host, g->sums_dev, sum_bytes, cudaMemcpyDeviceToHost, g->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        free(host);
        CUDA_CHECK(g, e);
    }
    for (size_t k = 0; k < count; k++)
        sums[k] = (uint64_t)host[k];
    free(host);
}

void demo_gpu_close(demo_gpu_t *g) {
    if (g == NULL)
        return;
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->sums_dev)
        cudaFree(g->sums_dev);
    free(g);
}
