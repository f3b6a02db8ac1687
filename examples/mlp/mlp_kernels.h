/*
 * mlp_kernels.h -- launchers for uvmrt-mlp's GPU kernels (mlp_kernels.cu).
 *
 * Includable from C: no CUDA headers. Streams are uvmrt_stream_t (binary-compatible
 * with cudaStream_t). Each launcher enqueues one kernel and returns 0 (cudaSuccess)
 * or the cudaError_t of the launch (cudaErrorInvalidValue for bad arguments).
 * 16-bit arrays hold bf16 or fp16 patterns (mlp_half_kind_t); element counts are
 * multiples of 8 and pointers 16-byte aligned (vector loads). The GEMMs are cuBLAS
 * calls in mlp.c; these are the elementwise parts.
 */
#ifndef UVMRT_MLP_KERNELS_H
#define UVMRT_MLP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

#include "../common/train_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks of the loss kernel: mlp_mse_launch writes this many partial sums. */
#define MLP_MSE_BLOCKS 1024

/* out[i] = half(mlp_uniform(seed, id, i) * scale), i < n */
int mlp_fill_uniform_launch(uint16_t *out, size_t n, uint64_t seed, uint64_t id, float scale,
                            mlp_half_kind_t kind, uvmrt_stream_t stream);
/* a = half(gelu(z)), n elements */
int mlp_gelu_forward_launch(uint16_t *a, const uint16_t *z, size_t n, mlp_half_kind_t kind,
                            uvmrt_stream_t stream);
/* dz = half(da * gelu'(z)) */
int mlp_gelu_backward_launch(uint16_t *dz, const uint16_t *da, const uint16_t *z, size_t n,
                             mlp_half_kind_t kind, uvmrt_stream_t stream);
/* MSE against y: partials[b] = sum over block b's elements of (a-y)^2 (double,
 * fixed order: deterministic); da = half((a-y) * grad_mul), grad_mul = 2*scale/n. */
int mlp_mse_launch(const uint16_t *a, const uint16_t *y, uint16_t *da, size_t n, float grad_mul,
                   double *partials, mlp_half_kind_t kind, uvmrt_stream_t stream);
/* *loss = (sum of partials[0..MLP_MSE_BLOCKS)) * inv_n, summed in a fixed order;
 * loss may be mapped host memory. */
int mlp_mse_finish_launch(const double *partials, double inv_n, double *loss,
                          uvmrt_stream_t stream);
/* AdamW (mlp_adamw_elem) over n elements, n a multiple of 4; when half is not NULL
 * it receives w's new value rounded to kind. When skip is not NULL and *skip is
 * non-zero (an inf/NaN gradient under fp16 loss scaling), nothing changes. */
int mlp_adamw_launch(float *w, float *m, float *v, const float *g, uint16_t *half,
                     mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef,
                     const int *skip, uvmrt_stream_t stream);
/* *flag = 1 when any of g[0..n) is inf or NaN (never cleared here); n % 4 == 0. */
int mlp_nonfinite_launch(const float *g, size_t n, int *flag, uvmrt_stream_t stream);
/* out[0..n) = half(in[0..n)) as the GPU AdamW rounds its copy; n % 4 == 0. */
int mlp_to_half_launch(uint16_t *out, const float *in, size_t n, mlp_half_kind_t kind,
                       uvmrt_stream_t stream);
/* The same on at most max_blocks blocks of 256 threads (the staged copies: they read
 * over the link beside another stream's GEMMs and should take few SMs). */
int mlp_to_half_narrow_launch(uint16_t *out, const float *in, size_t n, mlp_half_kind_t kind,
                              unsigned max_blocks, uvmrt_stream_t stream);
/* dst[0..bytes) = src[0..bytes), bytes % 16 == 0: reads and writes each byte once. */
int mlp_copy_launch(void *dst, const void *src, size_t bytes, uvmrt_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_MLP_KERNELS_H */
