/*
 * mlp_kernels.cu -- uvmrt-mlp's elementwise GPU kernels: GELU forward and backward,
 * MSE loss and its gradient, AdamW, the inf/NaN check, initialisation and copies.
 *
 * The math is train_math.h's (shared with the CPU optimizer and the CPU reference):
 * AdamW here and on the CPU give the same bits. 16-bit data is moved as uint4 (8
 * values) and converted with train_math.h's round-to-nearest-even helpers. Grid-stride
 * loops; launchers at the end.
 */
#include <cuda_runtime.h>

#include "mlp_kernels.h"

/* ----------------------------------------------------------------------------
 * helpers */

static const int BLOCK = 256;        /* threads per block */
static const size_t MAX_GRID = 8192; /* blocks; grid-stride loops cover the rest */

static unsigned int grid_for(size_t items) {
    size_t blocks = (items + BLOCK - 1) / BLOCK;
    return (unsigned int)(blocks < MAX_GRID ? (blocks > 0 ? blocks : 1) : MAX_GRID);
}

static int aligned16(const void *p) {
    return ((size_t)p & 15u) == 0;
}

__device__ __forceinline__ void unpack8(uint4 q, mlp_half_kind_t kind, float f[8]) {
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    for (int k = 0; k < 4; k++) {
        f[2 * k] = mlp_half_to_f32((uint16_t)(w[k] & 0xffffu), kind);
        f[2 * k + 1] = mlp_half_to_f32((uint16_t)(w[k] >> 16), kind);
    }
}

__device__ __forceinline__ uint4 pack8(const float f[8], mlp_half_kind_t kind) {
    uint32_t w[4];
    for (int k = 0; k < 4; k++)
        w[k] = (uint32_t)mlp_f32_to_half(f[2 * k], kind) |
               ((uint32_t)mlp_f32_to_half(f[2 * k + 1], kind) << 16);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

#define GRID_STRIDE(i, count)                                                                \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count);              \
         i += (size_t)gridDim.x * blockDim.x)

/* ----------------------------------------------------------------------------
 * kernels */

__global__ void fill_uniform_kernel(uint4 *out, size_t n8, uint64_t seed, uint64_t id,
                                    float scale, mlp_half_kind_t kind) {
    GRID_STRIDE(i, n8) {
        float f[8];
        for (int k = 0; k < 8; k++)
            f[k] = mlp_uniform(seed, id, 8 * i + (size_t)k) * scale;
        out[i] = pack8(f, kind);
    }
}

__global__ void gelu_forward_kernel(uint4 *a, const uint4 *z, size_t n8, mlp_half_kind_t kind) {
    GRID_STRIDE(i, n8) {
        float f[8];
        unpack8(z[i], kind, f);
        for (int k = 0; k < 8; k++)
            f[k] = mlp_gelu(f[k]);
        a[i] = pack8(f, kind);
    }
}

__global__ void gelu_backward_kernel(uint4 *dz, const uint4 *da, const uint4 *z, size_t n8,
                                     mlp_half_kind_t kind) {
    GRID_STRIDE(i, n8) {
        float d[8], x[8];
        unpack8(da[i], kind, d);
        unpack8(z[i], kind, x);
        for (int k = 0; k < 8; k++)
            d[k] = d[k] * mlp_gelu_grad(x[k]);
        dz[i] = pack8(d, kind);
    }
}

/* One partial per block: each thread sums its elements in a fixed order, then a
 * fixed tree in shared memory. Needs exactly MLP_MSE_BLOCKS x BLOCK threads. */
__global__ void mse_kernel(const uint4 *a, const uint4 *y, uint4 *da, size_t n8, float grad_mul,
                           double *partials, mlp_half_kind_t kind) {
    __shared__ double sum[256];
    double acc = 0.0;
    GRID_STRIDE(i, n8) {
        float p[8], t[8];
        unpack8(a[i], kind, p);
        unpack8(y[i], kind, t);
        for (int k = 0; k < 8; k++) {
            float d = p[k] - t[k];
            acc += (double)d * (double)d;
            p[k] = d * grad_mul;
        }
        da[i] = pack8(p, kind);
    }
    sum[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            sum[threadIdx.x] += sum[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = sum[0];
}

__global__ void mse_finish_kernel(const double *partials, double inv_n, double *loss) {
    __shared__ double sum[256];
    double acc = 0.0;
    for (int b = threadIdx.x; b < MLP_MSE_BLOCKS; b += blockDim.x)
        acc += partials[b];
    sum[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            sum[threadIdx.x] += sum[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *loss = sum[0] * inv_n;
}

__global__ void adamw_kernel(float4 *w, float4 *m, float4 *v, const float4 *g, uint2 *half,
                             mlp_half_kind_t kind, size_t n4, mlp_adamw_coef_t c,
                             const int *skip) {
    if (skip && *skip)
        return;
    GRID_STRIDE(i, n4) {
        float4 pw = w[i], pm = m[i], pv = v[i], pg = g[i];
        mlp_adamw_elem(&pw.x, &pm.x, &pv.x, pg.x, &c);
        mlp_adamw_elem(&pw.y, &pm.y, &pv.y, pg.y, &c);
        mlp_adamw_elem(&pw.z, &pm.z, &pv.z, pg.z, &c);
        mlp_adamw_elem(&pw.w, &pm.w, &pv.w, pg.w, &c);
        w[i] = pw;
        m[i] = pm;
        v[i] = pv;
        if (half)
            half[i] = make_uint2((uint32_t)mlp_f32_to_half(pw.x, kind) |
                                     ((uint32_t)mlp_f32_to_half(pw.y, kind) << 16),
                                 (uint32_t)mlp_f32_to_half(pw.z, kind) |
                                     ((uint32_t)mlp_f32_to_half(pw.w, kind) << 16));
    }
}

__global__ void nonfinite_kernel(const float4 *g, size_t n4, int *flag) {
    int bad = 0;
    GRID_STRIDE(i, n4) {
        float4 q = g[i];
        bad |= !isfinite(q.x) | !isfinite(q.y) | !isfinite(q.z) | !isfinite(q.w);
    }
    if (__syncthreads_or(bad) && threadIdx.x == 0)
        atomicOr(flag, 1);
}

/* out = half(in), rounded as adamw_kernel rounds its copy: the same bits */
__global__ void to_half_kernel(uint2 *out, const float4 *in, size_t n4, mlp_half_kind_t kind) {
    GRID_STRIDE(i, n4) {
        float4 p = in[i];
        out[i] = make_uint2((uint32_t)mlp_f32_to_half(p.x, kind) | ((uint32_t)mlp_f32_to_half(p.y, kind) << 16),
                            (uint32_t)mlp_f32_to_half(p.z, kind) | ((uint32_t)mlp_f32_to_half(p.w, kind) << 16));
    }
}

__global__ void copy_kernel(uint4 *dst, const uint4 *src, size_t n16) {
    GRID_STRIDE(i, n16) dst[i] = src[i];
}

/* ----------------------------------------------------------------------------
 * launchers */

static int launched(void) {
    return (int)cudaGetLastError();
}

extern "C" int mlp_fill_uniform_launch(uint16_t *out, size_t n, uint64_t seed, uint64_t id,
                                       float scale, mlp_half_kind_t kind, uvmrt_stream_t stream) {
    if (!out || n % 8 || !aligned16(out))
        return (int)cudaErrorInvalidValue;
    fill_uniform_kernel<<<grid_for(n / 8), BLOCK, 0, (cudaStream_t)stream>>>(
        (uint4 *)out, n / 8, seed, id, scale, kind);
    return launched();
}

extern "C" int mlp_gelu_forward_launch(uint16_t *a, const uint16_t *z, size_t n,
                                       mlp_half_kind_t kind, uvmrt_stream_t stream) {
    if (!a || !z || n % 8 || !aligned16(a) || !aligned16(z))
        return (int)cudaErrorInvalidValue;
    gelu_forward_kernel<<<grid_for(n / 8), BLOCK, 0, (cudaStream_t)stream>>>(
        (uint4 *)a, (const uint4 *)z, n / 8, kind);
    return launched();
}

extern "C" int mlp_gelu_backward_launch(uint16_t *dz, const uint16_t *da, const uint16_t *z,
                                        size_t n, mlp_half_kind_t kind, uvmrt_stream_t stream) {
    if (!dz || !da || !z || n % 8 || !aligned16(dz) || !aligned16(da) || !aligned16(z))
        return (int)cudaErrorInvalidValue;
    gelu_backward_kernel<<<grid_for(n / 8), BLOCK, 0, (cudaStream_t)stream>>>(
        (uint4 *)dz, (const uint4 *)da, (const uint4 *)z, n / 8, kind);
    return launched();
}

extern "C" int mlp_mse_launch(const uint16_t *a, const uint16_t *y, uint16_t *da, size_t n,
                              float grad_mul, double *partials, mlp_half_kind_t kind,
                              uvmrt_stream_t stream) {
    if (!a || !y || !da || !partials || n % 8 || !aligned16(a) || !aligned16(y) ||
        !aligned16(da))
        return (int)cudaErrorInvalidValue;
    mse_kernel<<<MLP_MSE_BLOCKS, BLOCK, 0, (cudaStream_t)stream>>>(
        (const uint4 *)a, (const uint4 *)y, (uint4 *)da, n / 8, grad_mul, partials, kind);
    return launched();
}

extern "C" int mlp_mse_finish_launch(const double *partials, double inv_n, double *loss,
                                     uvmrt_stream_t stream) {
    if (!partials || !loss)
        return (int)cudaErrorInvalidValue;
    mse_finish_kernel<<<1, BLOCK, 0, (cudaStream_t)stream>>>(partials, inv_n, loss);
    return launched();
}

extern "C" int mlp_adamw_launch(float *w, float *m, float *v, const float *g, uint16_t *half,
                                mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef,
                                const int *skip, uvmrt_stream_t stream) {
    if (!w || !m || !v || !g || !coef || n % 4 || !aligned16(w) || !aligned16(m) ||
        !aligned16(v) || !aligned16(g) || (half && ((size_t)half & 7u)))
        return (int)cudaErrorInvalidValue;
    adamw_kernel<<<grid_for(n / 4), BLOCK, 0, (cudaStream_t)stream>>>(
        (float4 *)w, (float4 *)m, (float4 *)v, (const float4 *)g, (uint2 *)half, kind, n / 4,
        *coef, skip);
    return launched();
}

extern "C" int mlp_nonfinite_launch(const float *g, size_t n, int *flag, uvmrt_stream_t stream) {
    if (!g || !flag || n % 4 || !aligned16(g))
        return (int)cudaErrorInvalidValue;
    nonfinite_kernel<<<grid_for(n / 4), BLOCK, 0, (cudaStream_t)stream>>>((const float4 *)g,
                                                                           n / 4, flag);
    return launched();
}

extern "C" int mlp_to_half_launch(uint16_t *out, const float *in, size_t n, mlp_half_kind_t kind,
                                   uvmrt_stream_t stream) {
    if (!out || !in || n % 4 || !aligned16(in) || ((uintptr_t)out & 7))
        return (int)cudaErrorInvalidValue;
    to_half_kernel<<<grid_for(n / 4), BLOCK, 0, (cudaStream_t)stream>>>((uint2 *)out, (const float4 *)in,
                                                                         n / 4, kind);
    return launched();
}

/* The same conversion on at most max_blocks blocks: a copy that reads host memory
 * over the link needs few SMs to keep the link busy, and beside the GEMMs of another
 * stream it should take as few of theirs as it can. */
extern "C" int mlp_to_half_narrow_launch(uint16_t *out, const float *in, size_t n, mlp_half_kind_t kind,
                                          unsigned max_blocks, uvmrt_stream_t stream) {
    if (!out || !in || n % 4 || !aligned16(in) || ((uintptr_t)out & 7) || max_blocks == 0)
        return (int)cudaErrorInvalidValue;
    unsigned grid = grid_for(n / 4);
    to_half_kernel<<<grid < max_blocks ? grid : max_blocks, BLOCK, 0, (cudaStream_t)stream>>>(
        (uint2 *)out, (const float4 *)in, n / 4, kind);
    return launched();
}

extern "C" int mlp_copy_launch(void *dst, const void *src, size_t bytes, uvmrt_stream_t stream) {
    if (!dst || !src || bytes % 16 || !aligned16(dst) || !aligned16(src))
        return (int)cudaErrorInvalidValue;
    copy_kernel<<<grid_for(bytes / 16), BLOCK, 0, (cudaStream_t)stream>>>(
        (uint4 *)dst, (const uint4 *)src, bytes / 16);
    return launched();
}
