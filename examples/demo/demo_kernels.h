/*
 * demo_kernels.h -- launchers for uvmrt-demo's GPU kernels (demo_kernels.cu).
 *
 * Includable from C: no CUDA headers here. Streams are uvmrt_stream_t, which is
 * binary-compatible with cudaStream_t. Each launcher enqueues one kernel on the
 * stream and returns the launch's status: 0 (cudaSuccess) or a cudaError_t value
 * (cudaErrorInvalidValue for bad arguments), for the caller to name with
 * cudaGetErrorString().
 *
 * Arrays are float32 managed memory of n elements, n a multiple of 4 and every
 * pointer 16-byte aligned (kernels use 16-byte vector loads). Every element of every
 * array is read (and, for outputs, written) by each of the `work` passes; the result
 * is the same for any work >= 1.
 */
#ifndef UVMRT_DEMO_KERNELS_H
#define UVMRT_DEMO_KERNELS_H

#include <stddef.h>

#include "uvmrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A = 0.5*A_prev + 0.5*W */
int demo_forward_launch(float *a, const float *a_prev, const float *w, size_t n, int work,
                        uvmrt_stream_t stream);
/* G = 0.5*G_next + 0.25*A*W   (top layer: G_next = A) */
int demo_backward_launch(float *g, const float *g_next, const float *a, const float *w,
                         size_t n, int work, uvmrt_stream_t stream);
/* O = 0.9*O + 0.1*G;  W = W - 0.01*O   (applied once; passes before the last one
 * compute the update and rewrite the values they read) */
int demo_optimizer_launch(float *w, float *o, const float *g, size_t n, int work,
                          uvmrt_stream_t stream);
/* *sum += sum of the 32-bit words of data[0..bytes), bytes a multiple of 16;
 * sum is device (or managed) memory. */
int demo_checksum_launch(const void *data, size_t bytes, unsigned long long *sum,
                         uvmrt_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_DEMO_KERNELS_H */
