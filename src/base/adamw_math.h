/*
 * adamw_math.h -- the one definition of an AdamW element update, for the library's
 * CPU AdamW (src/api/adamw.c, uvmrt_adamw_cpu(3)) and the trainers' GPU kernels (through
 * examples/mlp/mlp_math.h), so a weight updated on the CPU is bit-identical to one
 * updated on the GPU.
 *
 * Header-only, includable from C and CUDA. Two orders of the same operations:
 *  - uvmrt's (uvmrt__adamw_elem, the default, the GPU kernels'): no fused multiply-add,
 *    every product and sum rounded on its own (__fmul_rn/__fadd_rn on the GPU; C files
 *    that include this header are compiled with -ffp-contract=off);
 *  - torch's (uvmrt__adamw_elem_torch): what torch.optim.AdamW(foreach=False) computes
 *    on CUDA, with its three fused multiply-adds (lerp, addcmul, addcdiv), each
 *    correctly rounded (fmaf / __fmaf_rn).
 * sqrt and division are correctly rounded everywhere. The SIMD paths of src/api/adamw.c
 * repeat exactly these orders of operations.
 *
 * AdamW (PyTorch's torch.optim.AdamW, foreach=False, amsgrad=False):
 *   w <- w * (1 - lr*wd)
 *   m <- b1*m + (1-b1)*g          v <- b2*v + (1-b2)*g*g
 *   w <- w - (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps)
 * g is the stored gradient times inv_scale (1/loss scale, times a clip factor).
 */
#ifndef UVMRT_ADAMW_MATH_H
#define UVMRT_ADAMW_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define UVMRT__HD __host__ __device__ __forceinline__
#else
#define UVMRT__HD static inline
#endif

#if defined(__CUDA_ARCH__)
#define UVMRT__FMUL(a, b) __fmul_rn((a), (b))
#define UVMRT__FADD(a, b) __fadd_rn((a), (b))
#define UVMRT__FSUB(a, b) __fsub_rn((a), (b))
#define UVMRT__FDIV(a, b) __fdiv_rn((a), (b))
#define UVMRT__FSQRT(a) __fsqrt_rn(a)
#define UVMRT__FMA(a, b, c) __fmaf_rn((a), (b), (c))
#else
#define UVMRT__FMUL(a, b) ((a) * (b))
#define UVMRT__FADD(a, b) ((a) + (b))
#define UVMRT__FSUB(a, b) ((a) - (b))
#define UVMRT__FDIV(a, b) ((a) / (b))
#define UVMRT__FSQRT(a) sqrtf(a)
#define UVMRT__FMA(a, b, c) fmaf((a), (b), (c))
#endif

/* The update's coefficients, rounded to float once per call. */
typedef struct uvmrt__adamw_coef {
    float decay;        /* 1 - lr*wd */
    float b1, omb1;     /* beta1, 1 - beta1 */
    float b2, omb2;     /* beta2, 1 - beta2 */
    float step_size;    /* lr / (1 - beta1^t) */
    float inv_sqrt_bc2; /* 1 / sqrt(1 - beta2^t) */
    float eps;
    float inv_scale;    /* the gradient's factor (1 / loss scale, times a clip factor) */
    /* torch's order only */
    float lerp_omw;  /* 1 - (1 - beta1) in float: the complement of lerp's weight */
    float torch_isb; /* 1 / sqrt(1 - beta2^t) as torch's division by a scalar makes it */
} uvmrt__adamw_coef_t;

/* From the hyperparameters, in double, then rounded: t >= 1 is the number of the
 * update (skipped steps do not count). */
static inline uvmrt__adamw_coef_t uvmrt__adamw_coef_make(double lr, double b1, double b2,
                                                         double eps, double wd, uint64_t t,
                                                         double grad_scale) {
    uvmrt__adamw_coef_t c;
    c.decay = (float)(1.0 - lr * wd);
    c.b1 = (float)b1;
    c.omb1 = (float)(1.0 - b1);
    c.b2 = (float)b2;
    c.omb2 = (float)(1.0 - b2);
    c.step_size = (float)(lr / (1.0 - pow(b1, (double)t)));
    c.inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(b2, (double)t)));
    c.eps = (float)eps;
    c.inv_scale = (float)grad_scale;
    c.lerp_omw = 1.0f - c.omb1; /* exact: omb1 in [0.5, 1] where lerp uses it (Sterbenz) */
    /* torch: x / bias_correction2_sqrt (bias_correction2**0.5, a double) on CUDA is
     * x * (float)(1.0 / bias_correction2_sqrt): the reciprocal taken in double and rounded
     * once (measured on the H200: bench/adamw_torch_bits.py, 0 of 20000 steps differ) */
    c.torch_isb = (float)(1.0 / pow(1.0 - pow(b2, (double)t), 0.5));
    return c;
}

/* One element. */
UVMRT__HD void uvmrt__adamw_elem(float *w, float *m, float *v, float grad,
                                 const uvmrt__adamw_coef_t *c) {
    float g = UVMRT__FMUL(grad, c->inv_scale);
    float m2 = UVMRT__FADD(UVMRT__FMUL(c->b1, *m), UVMRT__FMUL(c->omb1, g));
    float v2 = UVMRT__FADD(UVMRT__FMUL(c->b2, *v), UVMRT__FMUL(UVMRT__FMUL(c->omb2, g), g));
    float denom = UVMRT__FADD(UVMRT__FMUL(UVMRT__FSQRT(v2), c->inv_sqrt_bc2), c->eps);
    float upd = UVMRT__FMUL(c->step_size, UVMRT__FDIV(m2, denom));
    *w = UVMRT__FSUB(UVMRT__FMUL(*w, c->decay), upd);
    *m = m2;
    *v = v2;
}

/* One element in torch's order: torch.optim.AdamW(foreach=False) on CUDA, one kernel
 * per line (param.mul_, exp_avg.lerp_, exp_avg_sq.mul_.addcmul_, sqrt / scalar + eps,
 * param.addcdiv_). lerp(m, g', w) is m + w*(g'-m) for a weight under 0.5, else
 * g' - (g'-m)*(1-w); the weight is the same for every element of a call. */
UVMRT__HD void uvmrt__adamw_elem_torch(float *w, float *m, float *v, float grad,
                                       const uvmrt__adamw_coef_t *c) {
    float g = UVMRT__FMUL(grad, c->inv_scale);
    float w1 = UVMRT__FMUL(*w, c->decay);
    float diff = UVMRT__FSUB(g, *m);
    float m2 = c->omb1 < 0.5f ? UVMRT__FMA(c->omb1, diff, *m) : UVMRT__FMA(-diff, c->lerp_omw, g);
    float v2 = UVMRT__FMA(c->omb2, UVMRT__FMUL(g, g), UVMRT__FMUL(*v, c->b2));
    float denom = UVMRT__FADD(UVMRT__FMUL(UVMRT__FSQRT(v2), c->torch_isb), c->eps);
    *w = UVMRT__FMA(-c->step_size, UVMRT__FDIV(m2, denom), w1);
    *m = m2;
    *v = v2;
}

/* fp32 -> bf16 bit pattern, round to nearest even; a NaN stays a (quiet) NaN. */
UVMRT__HD uint16_t uvmrt__f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#endif /* UVMRT_ADAMW_MATH_H */
