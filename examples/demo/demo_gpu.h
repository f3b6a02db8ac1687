/*
 * demo_gpu.h -- uvmrt-demo's GPU side behind one interface, so that demo.c's model
 * path has no #ifdef: demo_gpu.c (built with CUDA) or demo_nogpu.c (without).
 *
 * A failure after demo_gpu_open fails the run through the cleanup it was given
 * (cli_fail: message, cleanup, exit 1).
 */
#ifndef UVMRT_DEMO_GPU_H
#define UVMRT_DEMO_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

typedef struct demo_gpu demo_gpu_t;

/* NULL when this build has the GPU side; otherwise why not (for messages). */
extern const char *const demo_gpu_missing;

/* The current GPU's number and its free and total memory: 0, or -1 when there is
 * no usable GPU (or no GPU side in this build). */
int demo_gpu_mem_info(int *device, uint64_t *free_bytes, uint64_t *total_bytes);

/* Opens the GPU side into *out (set first, so the cleanup sees it): a compute stream
 * and, when checksums is not 0, a device buffer of that many 64-bit sums. Fails
 * through cleanup(arg). */
void demo_gpu_open(demo_gpu_t **out, size_t checksums, void (*cleanup)(void *), void *arg);
uvmrt_stream_t demo_gpu_stream(const demo_gpu_t *g);

/* The kernel of one layer call on the stream (demo.h has the formulas); pointers
 * as demo_cpu_forward / _backward / _optimizer take them. */
void demo_gpu_forward(demo_gpu_t *g, int layer, float *a, const float *a_prev, const float *w,
                      size_t n, int work);
void demo_gpu_backward(demo_gpu_t *g, int layer, float *grad, const float *g_next,
                       const float *a, const float *w, size_t n, int work);
void demo_gpu_optimizer(demo_gpu_t *g, int layer, float *w, float *o, const float *grad,
                        size_t n, int work);

/* sums[k] = demo_cpu_checksum(data[k], bytes) for k < count (<= the count given to
 * demo_gpu_open), computed on the GPU; outside a step (it syncs the device). */
void demo_gpu_checksums(demo_gpu_t *g, size_t count, void *const *data, size_t bytes,
                        uint64_t *sums);

/* Frees the stream and buffers; call after the context that used the stream is
 * destroyed. NULL: no-op. */
void demo_gpu_close(demo_gpu_t *g);

#endif /* UVMRT_DEMO_GPU_H */
