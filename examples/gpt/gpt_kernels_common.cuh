/*
 * gpt_kernels_common.cuh -- what uvmrt-gpt's kernel files share: gpt_kernels.cu (the
 * trainer's kernels) and gpu_check_attention.cu (gpt-gpu-check's reference attention
 * kernels). Launch helpers, bf16 loads and stores, warp reductions, and the attention's
 * head size and constants.
 */
#ifndef UVMRT_GPT_KERNELS_COMMON_CUH
#define UVMRT_GPT_KERNELS_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpt_kernels.h"

typedef __nv_bfloat16 bf16;

static const int BLOCK = 256;

static unsigned int ceil_div(size_t a, size_t b) {
    return (unsigned int)((a + b - 1) / b);
}

static unsigned int grid_for(size_t items) {
    size_t g = (items + BLOCK - 1) / BLOCK;
    return (unsigned int)(g < 16384 ? (g > 0 ? g : 1) : 16384);
}

static int last_error(void) {
    return (int)cudaGetLastError();
}

#define GRID_STRIDE(i, count)                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count);              \
         i += (size_t)gridDim.x * blockDim.x)

__device__ __forceinline__ float bf(const uint16_t *p, size_t i) {
    return __bfloat162float(((const bf16 *)p)[i]);
}

__device__ __forceinline__ void bf_store(uint16_t *p, size_t i, float v) {
    ((bf16 *)p)[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#define HS 64 /* the attention's head size (GPT_HEAD_SIZE) */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

#endif /* UVMRT_GPT_KERNELS_COMMON_CUH */
