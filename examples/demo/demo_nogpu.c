/*
 * demo_nogpu.c -- uvmrt-demo's GPU side in a build without CUDA (see demo_gpu.h):
 * there is no GPU, opening it fails the run with the reason, and the kernels are
 * never reached (a run without a GPU side does its arithmetic on the CPU).
 */
#include "../common/cli.h"
#include "demo_gpu.h"

const char *const demo_gpu_missing = "uvmrt-demo was built without CUDA";

int demo_gpu_mem_info(int *device, uint64_t *free_bytes, uint64_t *total_bytes) {
    (void)device, (void)free_bytes, (void)total_bytes;
    return -1;
}

void demo_gpu_open(demo_gpu_t **out, size_t checksums, void (*cleanup)(void *), void *arg) {
    (void)checksums;
    *out = NULL;
    cli_fail(cleanup, arg, "the cuda backend was selected (UVMRT_BACKEND?), but %s",
             demo_gpu_missing);
}

uvmrt_stream_t demo_gpu_stream(const demo_gpu_t *g) { (void)g; return NULL; }

void demo_gpu_forward(demo_gpu_t *g, int layer, float *a, const float *a_prev, const float *w,
                      size_t n, int work) {
    (void)g, (void)layer, (void)a, (void)a_prev, (void)w, (void)n, (void)work;
}

void demo_gpu_backward(demo_gpu_t *g, int layer, float *grad, const float *g_next,
                       const float *a, const float *w, size_t n, int work) {
    (void)g, (void)layer, (void)grad, (void)g_next, (void)a, (void)w, (void)n, (void)work;
}

void demo_gpu_optimizer(demo_gpu_t *g, int layer, float *w, float *o, const float *grad,
                        size_t n, int work) {
    (void)g, (void)layer, (void)w, (void)o, (void)grad, (void)n, (void)work;
}

void demo_gpu_checksums(demo_gpu_t *g, size_t count, void *const *data, size_t bytes,
                        uint64_t *sums) {
    (void)g, (void)count, (void)data, (void)bytes, (void)sums;
}

void demo_gpu_close(demo_gpu_t *g) { (void)g; }
