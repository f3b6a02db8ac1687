/*
 * train_math.h -- the training math that the CPU and the GPU share (uvmrt-mlp and uvmrt-gpt).
 *
 * Header-only and includable from C and CUDA: the counter-based initialisation
 * hash, fp32 -> bf16/fp16 rounding, GELU and its derivative, and one AdamW
 * element update (the library's, src/base/adamw_math.h). The GPU kernels
 * (mlp_kernels.cu), the library's CPU AdamW (uvmrt_adamw_cpu) and the CPU reference
 * trainer (mlp_ref.c) all use these, so a weight updated on the CPU is
 * bit-identical to one updated on the GPU.
 *
 * No fused multiply-add: every product and sum is rounded on its own (the
 * MLP_MUL/MLP_ADD macros are __fmul_rn/__fadd_rn on the GPU; C files that use
 * this header are compiled with -ffp-contract=off), and the SIMD paths of
 * src/api/adamw.c repeat exactly the AdamW's order of operations.
 */
#ifndef UVMRT_TRAIN_MATH_H
#define UVMRT_TRAIN_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "adamw_math.h" /* defines: uvmrt__adamw_coef_t, uvmrt__adamw_elem, uvmrt__f32_to_bf16 */

#if defined(__CUDACC__)
#define MLP_HD __host__ __device__ __forceinline__
#else
#define MLP_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define MLP_MUL(a, b) __fmul_rn((a), (b))
#define MLP_ADD(a, b) __fadd_rn((a), (b))
#define MLP_SUB(a, b) __fsub_rn((a), (b))
#define MLP_DIV(a, b) __fdiv_rn((a), (b))
#define MLP_SQRT(a) __fsqrt_rn(a)
#else
#define MLP_MUL(a, b) ((a) * (b))
#define MLP_ADD(a, b) ((a) + (b))
#define MLP_SUB(a, b) ((a) - (b))
#define MLP_DIV(a, b) ((a) / (b))
#define MLP_SQRT(a) sqrtf(a)
#endif

/* Working precision of weights' copies, activations and their gradients. */
typedef enum mlp_half_kind { MLP_BF16 = 0, MLP_FP16 = 1 } mlp_half_kind_t;

/* ----------------------------------------------------------------------------
 * initialisation: uniform in [-1, 1) from (seed, tensor id, index) */

MLP_HD uint64_t mlp_splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Exact in float: a multiple of 2^-23 in [-1, 1). */
MLP_HD float mlp_uniform(uint64_t seed, uint64_t id, uint64_t index) {
    uint64_t h = mlp_splitmix64(mlp_splitmix64(seed * 0x100000001b3ull + id) + index);
    return (float)(int64_t)(h >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

/* Tensor ids of the hash: the same numbers on every device. */
#define MLP_ID_INPUT 1u
#define MLP_ID_STUDENT(i) (1000u + (unsigned)(i))
#define MLP_ID_TEACHER(i) (100000u + (unsigned)(i))
/* Weights are U(-b, b) with b = sqrt(6/H) (He-uniform: GELU keeps the scale), the
 * input U(-sqrt 3, sqrt 3) (unit variance); the teacher uses its own seed. */
#define MLP_TEACHER_SEED_XOR 0x7eac4e5ull

/* ----------------------------------------------------------------------------
 * fp32 -> bf16 / fp16, round to nearest even, as 16-bit patterns */

MLP_HD uint32_t mlp_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

MLP_HD float mlp_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

MLP_HD uint16_t mlp_f32_to_bf16(float f) { return uvmrt__f32_to_bf16(f); }

MLP_HD float mlp_bf16_to_f32(uint16_t h) {
    return mlp_bits_f32((uint32_t)h << 16);
}

MLP_HD uint16_t mlp_f32_to_fp16(float f) {
    uint32_t u = mlp_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    if (u >= 0x7f800000u) /* inf, NaN */
        return (uint16_t)(sign | 0x7c00u | (u > 0x7f800000u ? 0x200u | ((u & 0x7fffffu) >> 13) : 0u));
    if (u >= 0x477ff000u) /* >= 65520: rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (u < 0x38800000u) { /* below 2^-14: subnormal half or zero */
        if (u <= 0x33000000u) /* <= 2^-25: to zero (2^-25 is a tie, to even) */
            return (uint16_t)sign;
        uint32_t e = u >> 23, mant = (u & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e; /* 14..24 */
        uint32_t r = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (r & 1u)))
            r++;
        return (uint16_t)(sign | r);
    }
    uint32_t h = ((((u >> 23) - 127u + 15u) << 10) | ((u & 0x7fffffu) >> 13));
    uint32_t rem = u & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++;
    return (uint16_t)(sign | h);
}

MLP_HD float mlp_fp16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16, e = ((uint32_t)h >> 10) & 0x1fu,
             m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu)
        return mlp_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return mlp_bits_f32(sign | ((e - 15u + 127u) << 23) | (m << 13));
}

MLP_HD uint16_t mlp_f32_to_half(float f, mlp_half_kind_t kind) {
    return kind == MLP_BF16 ? mlp_f32_to_bf16(f) : mlp_f32_to_fp16(f);
}

MLP_HD float mlp_half_to_f32(uint16_t h, mlp_half_kind_t kind) {
    return kind == MLP_BF16 ? mlp_bf16_to_f32(h) : mlp_fp16_to_f32(h);
}

/* ----------------------------------------------------------------------------
 * GELU (exact, erf form: PyTorch's nn.GELU default) */

MLP_HD float mlp_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}

MLP_HD float mlp_gelu_grad(float x) {
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    float pdf = 0.39894228040143268f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

/* ----------------------------------------------------------------------------
 * AdamW (PyTorch's torch.optim.AdamW, foreach=False, amsgrad=False): the library's
 * element update (src/base/adamw_math.h), the one definition the GPU kernels and
 * uvmrt_adamw_cpu(3) share. */

typedef uvmrt__adamw_coef_t mlp_adamw_coef_t;

#define MLP_ADAMW_BETA1 0.9
#define MLP_ADAMW_BETA2 0.999
#define MLP_ADAMW_EPS 1e-8
#define MLP_ADAMW_WD 0.01

/* t >= 1: the number of the update (skipped steps do not count). */
static inline mlp_adamw_coef_t mlp_adamw_coef_make(double lr, double wd, long t,
                                                   double loss_scale) {
    return uvmrt__adamw_coef_make(lr, MLP_ADAMW_BETA1, MLP_ADAMW_BETA2, MLP_ADAMW_EPS, wd,
                                  (uint64_t)t, 1.0 / loss_scale);
}

/* One element (uvmrt__adamw_elem). */
MLP_HD void mlp_adamw_elem(float *w, float *m, float *v, float grad, const mlp_adamw_coef_t *c) {
    uvmrt__adamw_elem(w, m, v, grad, c);
}

#endif /* UVMRT_TRAIN_MATH_H */
