/*
 * gpt_kernels.cu -- uvmrt-gpt's GPU kernels (see gpt_kernels.h), llm.c style: one
 * kernel per job, tiny launchers at the end of each section.
 *
 * Numerics: bf16 storage, fp32 arithmetic; the residual stream and its gradient
 * are fp32. Reductions are warp shuffles and shared-memory trees in a fixed order,
 * or per-column sums over fixed row chunks, never atomics: results are
 * bit-reproducible.
 *
 * Attention (head size 64) is flash-style, in two implementations checked against
 * the same reference (gpt-gpu-check). The first, scalar fp32 FMAs: the forward keeps
 * one query row per thread with its running max, sum and output in registers and
 * streams K/V tiles through shared memory; it saves the log-sum-exp. The backward
 * recomputes the probabilities from it, in two kernels so that nothing is
 * accumulated across blocks: one block per key tile makes dK and dV, one block per
 * query tile dQ. The second runs the same algorithm with the products on the tensor
 * cores (WMMA). Measured on the H200 at B=8, T=1024, 25 heads: forward 2.6 ms scalar,
 * 1.8 ms WMMA; backward 4.7 ms scalar, 5.2 ms WMMA: both are bound by the round trip
 * of every score tile through shared memory, not by the arithmetic. The third
 * (FlashAttention-2 style, mma.sync from registers) removes that round trip; which
 * one the trainer uses is GPT_ATTENTION_MMA, at the end of the attention section.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

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

/* ----------------------------------------------------------------------------
 * embeddings */

__global__ void encoder_forward_kernel(float *out, const int *inp, const uint16_t *wte,
                                       const uint16_t *wpe, int B, int T, int C) {
    size_t n = (size_t)B * T * C;
    GRID_STRIDE(i, n) {
        size_t row = i / C;
        int c = (int)(i % C), t = (int)(row % T);
        out[i] = bf(wte, (size_t)inp[row] * C + c) + bf(wpe, (size_t)t * C + c);
    }
}

/* one block per (bucket, 256 columns): the rows of one token summed in order */
__global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int *rows,
                                            const int *start, const int *token, int C) {
    int k = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    float acc = 0.0f;
    for (int s = start[k]; s < start[k + 1]; s++)
        acc += dout[(size_t)rows[s] * C + c];
    dwte[(size_t)token[k] * C + c] += acc;
}

__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C) {
    size_t n = (size_t)T * C;
    GRID_STRIDE(i, n) {
        float acc = 0.0f;
        for (int b = 0; b < B; b++)
            acc += dout[(size_t)b * n + i];
        dwpe[i] = acc;
    }
}

extern "C" int gpt_encoder_forward_launch(float *out, const int *inp, const uint16_t *wte,
                                          const uint16_t *wpe, int B, int T, int C,
                                          uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    encoder_forward_kernel<<<grid_for((size_t)B * T * C), BLOCK, 0, (cudaStream_t)stream>>>(
        out, inp, wte, wpe, B, T, C);
    return last_error();
}

extern "C" int gpt_encoder_backward_launch(float *dwte, float *dwpe, const float *dout,
                                           const int *bucket_rows, const int *bucket_start,
                                           const int *bucket_token, int nbuckets, int B, int T,
                                           int C, uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0 || nbuckets < 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    if (nbuckets > 0) {
        dim3 grid((unsigned)nbuckets, ceil_div((size_t)C, BLOCK));
        encoder_backward_wte_kernel<<<grid, BLOCK, 0, s>>>(dwte, dout, bucket_rows, bucket_start,
                                                           bucket_token, C);
    }
    encoder_backward_wpe_kernel<<<grid_for((size_t)T * C), BLOCK, 0, s>>>(dwpe, dout, B, T, C);
    return last_error();
}

/* ----------------------------------------------------------------------------
 * LayerNorm: one warp per row, fp32 statistics (two passes: mean, then variance) */

__global__ void layernorm_forward_kernel(uint16_t *out, float *mean, float *rstd,
                                         const float *inp, const uint16_t *w, const uint16_t *b,
                                         int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *x = inp + (size_t)row * C;
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    float m = warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    float r = rsqrtf(warp_sum(v) / C + 1e-5f);
    for (int c = lane; c < C; c += 32)
        bf_store(out, (size_t)row * C + c, (x[c] - m) * r * bf(w, c) + bf(b, c));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

__global__ void layernorm_backward_dinp_kernel(float *dinp, const uint16_t *dout,
                                               const float *inp, const uint16_t *w,
                                               const float *mean, const float *rstd, int N,
                                               int C, int accumulate) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float *x = inp + (size_t)row * C;
    float m = mean[row], r = rstd[row], a = 0.0f, an = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * r, dn = bf(w, c) * bf(dout, (size_t)row * C + c);
        a += dn;
        an += dn * norm;
    }
    a = warp_sum(a) / C;
    an = warp_sum(an) / C;
    for (int c = lane; c < C; c += 32) {
        float norm = (x[c] - m) * r, dn = bf(w, c) * bf(dout, (size_t)row * C + c);
        float d = (dn - a - norm * an) * r;
        size_t i = (size_t)row * C + c;
        dinp[i] = accumulate ? dinp[i] + d : d;
    }
}

/* Column sums in two passes: partial[chunk][c] over GPT_COLSUM_ROWS rows (32 columns
 * x 8 row lanes per block, then the 8 lanes in order), then the chunks in order. */
template <int MODE> /* 0: bf16 dout; 1: fp32 dout; 2: LayerNorm dw (dout*norm) and db */
__global__ void colsum_partial_kernel(float *part, float *part2, const void *dout_,
                                      const float *inp, const float *mean, const float *rstd,
                                      int N, int OC) {
    __shared__ float sh[8][32], sh2[8][32];
    int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y;
    int r0 = chunk * GPT_COLSUM_ROWS, r1 = min(N, r0 + GPT_COLSUM_ROWS);
    float acc = 0.0f, acc2 = 0.0f;
    if (c < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            size_t i = (size_t)r * OC + c;
            float d = MODE == 1 ? ((const float *)dout_)[i] : bf((const uint16_t *)dout_, i);
            if (MODE == 2) {
                acc += d * ((inp[i] - mean[r]) * rstd[r]);
                acc2 += d;
            } else {
                acc += d;
            }
        }
    sh[threadIdx.y][threadIdx.x] = acc;
    sh2[threadIdx.y][threadIdx.x] = acc2;
    __syncthreads();
    if (threadIdx.y == 0 && c < OC) {
        float s = 0.0f, s2 = 0.0f;
        for (int k = 0; k < 8; k++) {
            s += sh[k][threadIdx.x];
            s2 += sh2[k][threadIdx.x];
        }
        part[(size_t)chunk * OC + c] = s;
        if (MODE == 2)
            part2[(size_t)chunk * OC + c] = s2;
    }
}

__global__ void colsum_finish_kernel(float *out, const float *part, int nchunks, int OC) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= OC)
        return;
    float s = 0.0f;
    for (int k = 0; k < nchunks; k++)
        s += part[(size_t)k * OC + c];
    out[c] = s;
}

extern "C" size_t gpt_colsum_scratch_floats(int N, int OC) {
    return (size_t)ceil_div((size_t)N, GPT_COLSUM_ROWS) * (size_t)OC;
}

template <int MODE>
static int colsum(float *out, float *out2, float *scratch, const void *dout, const float *inp,
                  const float *mean, const float *rstd, int N, int OC, cudaStream_t s) {
    if (N <= 0 || OC <= 0)
        return (int)cudaErrorInvalidValue;
    int nchunks = (int)ceil_div((size_t)N, GPT_COLSUM_ROWS);
    float *part2 = scratch + gpt_colsum_scratch_floats(N, OC);
    dim3 grid(ceil_div((size_t)OC, 32), (unsigned)nchunks), block(32, 8);
    colsum_partial_kernel<MODE><<<grid, block, 0, s>>>(scratch, part2, dout, inp, mean, rstd, N,
                                                       OC);
    colsum_finish_kernel<<<ceil_div((size_t)OC, BLOCK), BLOCK, 0, s>>>(out, scratch, nchunks, OC);
    if (MODE == 2)
        colsum_finish_kernel<<<ceil_div((size_t)OC, BLOCK), BLOCK, 0, s>>>(out2, part2, nchunks,
                                                                           OC);
    return last_error();
}

extern "C" int gpt_layernorm_forward_launch(uint16_t *out, float *mean, float *rstd,
                                            const float *inp, const uint16_t *w,
                                            const uint16_t *b, int N, int C,
                                            uvmrt_stream_t stream) {
    if (N <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    layernorm_forward_kernel<<<ceil_div((size_t)N, BLOCK / 32), BLOCK, 0, (cudaStream_t)stream>>>(
        out, mean, rstd, inp, w, b, N, C);
    return last_error();
}

extern "C" int gpt_layernorm_backward_launch(float *dinp, float *dw, float *db, float *scratch,
                                             const uint16_t *dout, const float *inp,
                                             const uint16_t *w, const float *mean,
                                             const float *rstd, int N, int C, int accumulate,
                                             uvmrt_stream_t stream) {
    if (N <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    layernorm_backward_dinp_kernel<<<ceil_div((size_t)N, BLOCK / 32), BLOCK, 0, s>>>(
        dinp, dout, inp, w, mean, rstd, N, C, accumulate);
    return colsum<2>(dw, db, scratch, dout, inp, mean, rstd, N, C, s);
}

extern "C" int gpt_bias_grad_launch(float *dbias, float *scratch, const uint16_t *dout, int N,
                                    int OC, uvmrt_stream_t stream) {
    return colsum<0>(dbias, NULL, scratch, dout, NULL, NULL, NULL, N, OC, (cudaStream_t)stream);
}

extern "C" int gpt_bias_grad_f32_launch(float *dbias, float *scratch, const float *dout, int N,
                                        int OC, uvmrt_stream_t stream) {
    return colsum<1>(dbias, NULL, scratch, dout, NULL, NULL, NULL, N, OC, (cudaStream_t)stream);
}

/* ----------------------------------------------------------------------------
 * elementwise: bias, residual, GELU (tanh), fp32 -> bf16 */

/* One thread per column (of 8 bf16 when aligned), looping over rows: no division per
 * element (a 64-bit i % OC held the flat version to a third of HBM speed). */
template <typename V>
__global__ void bias_broadcast_kernel(V *out, const V *bias, int N, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    V b = bias[j];
    for (int row = blockIdx.y; row < N; row += gridDim.y)
        out[(size_t)row * cols + j] = b;
}

__global__ void residual_bias_kernel(float *out, const float *inp, const uint16_t *bias, int N,
                                     int C) {
    size_t n = (size_t)N * C;
    GRID_STRIDE(i, n)
        out[i] = inp[i] + bf(bias, i % C);
}

#define GELU_K 0.7978845608028654f

__device__ __forceinline__ float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

__device__ __forceinline__ float gelu_tanh_grad(float x) {
    float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 0.134145f * x * x);
}

__global__ void gelu_forward_kernel(uint4 *out, const uint4 *inp, size_t n8) {
    GRID_STRIDE(i, n8) {
        uint4 q = inp[i];
        bf16 *h = (bf16 *)&q;
        for (int k = 0; k < 8; k++)
            h[k] = __float2bfloat16_rn(gelu_tanh(__bfloat162float(h[k])));
        out[i] = q;
    }
}

__global__ void gelu_backward_kernel(uint4 *d, const uint4 *inp, size_t n8) {
    GRID_STRIDE(i, n8) {
        uint4 q = inp[i], g = d[i];
        bf16 *x = (bf16 *)&q, *dg = (bf16 *)&g;
        for (int k = 0; k < 8; k++)
            dg[k] = __float2bfloat16_rn(__bfloat162float(dg[k]) *
                                        gelu_tanh_grad(__bfloat162float(x[k])));
        d[i] = g;
    }
}

__global__ void f32_to_bf16_kernel(uint16_t *out, const float4 *in, size_t n4) {
    GRID_STRIDE(i, n4) {
        float4 f = in[i];
        __nv_bfloat162 a = __floats2bfloat162_rn(f.x, f.y), b = __floats2bfloat162_rn(f.z, f.w);
        ((__nv_bfloat162 *)out)[2 * i] = a;
        ((__nv_bfloat162 *)out)[2 * i + 1] = b;
    }
}

__global__ void copy_f32_kernel(float4 *out, const float4 *in, size_t n4) {
    GRID_STRIDE(i, n4)
        out[i] = in[i];
}

extern "C" int gpt_bias_broadcast_launch(uint16_t *out, const uint16_t *bias, int N, int OC,
                                         uvmrt_stream_t stream) {
    if (N <= 0 || OC <= 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned rows = (unsigned)(N < 2048 ? N : 2048);
    if (OC % 8 == 0 && (uintptr_t)out % 16 == 0 && (uintptr_t)bias % 16 == 0)
        bias_broadcast_kernel<<<dim3(ceil_div((size_t)OC / 8, BLOCK), rows), BLOCK, 0, s>>>(
            (uint4 *)out, (const uint4 *)bias, N, OC / 8);
    else
        bias_broadcast_kernel<<<dim3(ceil_div((size_t)OC, BLOCK), rows), BLOCK, 0, s>>>(
            (bf16 *)out, (const bf16 *)bias, N, OC);
    return last_error();
}

extern "C" int gpt_residual_bias_launch(float *out, const float *inp, const uint16_t *bias, int N,
                                        int C, uvmrt_stream_t stream) {
    residual_bias_kernel<<<grid_for((size_t)N * C), BLOCK, 0, (cudaStream_t)stream>>>(out, inp,
                                                                                     bias, N, C);
    return last_error();
}

extern "C" int gpt_gelu_forward_launch(uint16_t *out, const uint16_t *inp, size_t n,
                                       uvmrt_stream_t stream) {
    if (n % 8 || ((size_t)out | (size_t)inp) & 15)
        return (int)cudaErrorInvalidValue;
    gelu_forward_kernel<<<grid_for(n / 8), BLOCK, 0, (cudaStream_t)stream>>>((uint4 *)out,
                                                                            (const uint4 *)inp,
                                                                            n / 8);
    return last_error();
}

extern "C" int gpt_gelu_backward_launch(uint16_t *d, const uint16_t *inp, size_t n,
                                        uvmrt_stream_t stream) {
    if (n % 8 || ((size_t)d | (size_t)inp) & 15)
        return (int)cudaErrorInvalidValue;
    gelu_backward_kernel<<<grid_for(n / 8), BLOCK, 0, (cudaStream_t)stream>>>(
        (uint4 *)d, (const uint4 *)inp, n / 8);
    return last_error();
}

extern "C" int gpt_f32_to_bf16_launch(uint16_t *out, const float *in, size_t n,
                                      uvmrt_stream_t stream) {
    if (n % 4 || ((size_t)in & 15) || ((size_t)out & 7))
        return (int)cudaErrorInvalidValue;
    f32_to_bf16_kernel<<<grid_for(n / 4), BLOCK, 0, (cudaStream_t)stream>>>(out,
                                                                           (const float4 *)in,
                                                                           n / 4);
    return last_error();
}

extern "C" int gpt_copy_f32_launch(float *out, const float *in, size_t n,
                                   uvmrt_stream_t stream) {
    if (n % 4 || ((size_t)in | (size_t)out) & 15)
        return (int)cudaErrorInvalidValue;
    copy_f32_kernel<<<grid_for(n / 4), BLOCK, 0, (cudaStream_t)stream>>>((float4 *)out,
                                                                        (const float4 *)in,
                                                                        n / 4);
    return last_error();
}

/* ----------------------------------------------------------------------------
 * attention, head size 64 */

#define HS 64
#define FWD_BR 64 /* queries per block (one per thread) */
#define FWD_BC 32 /* keys per shared-memory tile */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

__global__ __launch_bounds__(FWD_BR) void attention_forward_kernel(uint16_t *out, float *lse,
                                                                   const uint16_t *qkv, int T,
                                                                   int C, int NH) {
    __shared__ __align__(16) float Ks[FWD_BC][HS], Vs[FWD_BC][HS];
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int t = qt * FWD_BR + threadIdx.x;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const float sl = 0.125f * LOG2E; /* 1/sqrt(64), in log2 units */
    float q[HS], o[HS];
#pragma unroll
    for (int d = 0; d < HS; d++) {
        q[d] = t < T ? __bfloat162float(base[(size_t)t * C3 + d]) * sl : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int t_last = min(T, qt * FWD_BR + FWD_BR) - 1;
    for (int k0 = 0; k0 <= t_last; k0 += FWD_BC) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < FWD_BC * HS / 2; idx += FWD_BR) {
            int j = idx / (HS / 2), d2 = idx % (HS / 2), key = k0 + j;
            float2 kf = make_float2(0.0f, 0.0f), vf = kf;
            if (key < T) {
                kf = __bfloat1622float2(
                    ((const __nv_bfloat162 *)(base + (size_t)key * C3 + C))[d2]);
                vf = __bfloat1622float2(
                    ((const __nv_bfloat162 *)(base + (size_t)key * C3 + 2 * C))[d2]);
            }
            Ks[j][2 * d2] = kf.x;
            Ks[j][2 * d2 + 1] = kf.y;
            Vs[j][2 * d2] = vf.x;
            Vs[j][2 * d2 + 1] = vf.y;
        }
        __syncthreads();
        if (t >= T || k0 > t)
            continue;
        float s[FWD_BC], mt = -INFINITY;
#pragma unroll
        for (int j = 0; j < FWD_BC; j++) {
            float acc = 0.0f;
#pragma unroll
            for (int d = 0; d < HS; d += 4) {
                float4 k4 = *(const float4 *)&Ks[j][d];
                acc += q[d] * k4.x + q[d + 1] * k4.y + q[d + 2] * k4.z + q[d + 3] * k4.w;
            }
            s[j] = k0 + j <= t ? acc : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        float mn = fmaxf(m, mt), alpha = exp2f(m - mn);
        l *= alpha;
#pragma unroll
        for (int d = 0; d < HS; d++)
            o[d] *= alpha;
#pragma unroll
        for (int j = 0; j < FWD_BC; j++) {
            float p = exp2f(s[j] - mn);
            l += p;
#pragma unroll
            for (int d = 0; d < HS; d += 4) {
                float4 v4 = *(const float4 *)&Vs[j][d];
                o[d] += p * v4.x;
                o[d + 1] += p * v4.y;
                o[d + 2] += p * v4.z;
                o[d + 3] += p * v4.w;
            }
        }
        m = mn;
    }
    if (t < T) {
        float inv = 1.0f / l;
        bf16 *op = (bf16 *)out + ((size_t)b * T + t) * C + h * HS;
#pragma unroll
        for (int d = 0; d < HS; d += 2)
            *(__nv_bfloat162 *)(op + d) = __floats2bfloat162_rn(o[d] * inv, o[d + 1] * inv);
        lse[((size_t)b * NH + h) * T + t] = (m + log2f(l)) * LN2;
    }
}

/* delta[b,h,t] = sum_d dout * out over the head's 64 columns */
__global__ void attention_delta_kernel(float *delta, const uint16_t *dout, const uint16_t *out,
                                       int B, int T, int C, int NH) {
    size_t n = (size_t)B * NH * T;
    GRID_STRIDE(i, n) {
        int t = (int)(i % T);
        size_t bh = i / T;
        int h = (int)(bh % NH), b = (int)(bh / NH);
        size_t off = ((size_t)b * T + t) * C + h * HS;
        float s = 0.0f;
        for (int d = 0; d < HS; d++)
            s += bf(dout, off + d) * bf(out, off + d);
        delta[i] = s;
    }
}

/* Two threads per row (key or query), each with 32 of the 64 dimensions; a dot
 * product is two halves and one shuffle. Shared rows are [2][36] floats: the two
 * halves 36 floats apart fall in different banks. */
#define BWD_TILE 64 /* keys (dK/dV kernel) or queries (dQ kernel) per block */
#define BWD_SUB 32  /* rows of the other kind per shared-memory tile */
#define HALF 32
#define ROWF 72

__global__ __launch_bounds__(2 * BWD_TILE) void attention_backward_dkv_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(16) float Qs[BWD_SUB * ROWF], Ds[BWD_SUB * ROWF], Ls[BWD_SUB], Es[BWD_SUB];
    int kt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int key = kt * BWD_TILE + threadIdx.x / 2, half = threadIdx.x % 2;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float *lseb = lse + ((size_t)b * NH + h) * T, *delb = delta + ((size_t)b * NH + h) * T;
    const float sl = 0.125f * LOG2E;
    float k[HALF], v[HALF], dk[HALF], dv[HALF];
#pragma unroll
    for (int d = 0; d < HALF; d++) {
        size_t off = (size_t)key * C3 + half * HALF + d;
        k[d] = key < T ? __bfloat162float(base[off + C]) : 0.0f;
        v[d] = key < T ? __bfloat162float(base[off + 2 * C]) : 0.0f;
        dk[d] = dv[d] = 0.0f;
    }
    for (int q0 = kt * BWD_TILE; q0 < T; q0 += BWD_SUB) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < BWD_SUB * HS; idx += 2 * BWD_TILE) {
            int i = idx / HS, d = idx % HS, qr = q0 + i;
            int at = i * ROWF + (d / HALF) * 36 + d % HALF;
            Qs[at] = qr < T ? __bfloat162float(base[(size_t)qr * C3 + d]) : 0.0f;
            Ds[at] = qr < T ? __bfloat162float(dbase[(size_t)qr * C + d]) : 0.0f;
        }
        if (threadIdx.x < BWD_SUB) {
            int qr = q0 + threadIdx.x;
            Ls[threadIdx.x] = qr < T ? lseb[qr] * LOG2E : 0.0f;
            Es[threadIdx.x] = qr < T ? delb[qr] : 0.0f;
        }
        __syncthreads();
        for (int i = 0; i < BWD_SUB; i++) {
            int qr = q0 + i;
            const float *qi = Qs + i * ROWF + half * 36, *di = Ds + i * ROWF + half * 36;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HALF; d += 4) {
                float4 q4 = *(const float4 *)(qi + d), d4 = *(const float4 *)(di + d);
                s += q4.x * k[d] + q4.y * k[d + 1] + q4.z * k[d + 2] + q4.w * k[d + 3];
                dp += d4.x * v[d] + d4.y * v[d + 1] + d4.z * v[d + 2] + d4.w * v[d + 3];
            }
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            dp += __shfl_xor_sync(0xffffffffu, dp, 1);
            int valid = qr < T && key < T && qr >= key;
            float p = valid ? exp2f(s * sl - Ls[i]) : 0.0f;
            float ds = p * (dp - Es[i]);
#pragma unroll
            for (int d = 0; d < HALF; d++) {
                dv[d] += p * di[d];
                dk[d] += ds * qi[d];
            }
        }
    }
    if (key < T) {
        bf16 *o = (bf16 *)dqkv + ((size_t)b * T + key) * C3 + h * HS + half * HALF;
#pragma unroll
        for (int d = 0; d < HALF; d++) {
            o[C + d] = __float2bfloat16_rn(dk[d] * 0.125f);
            o[2 * C + d] = __float2bfloat16_rn(dv[d]);
        }
    }
}

__global__ __launch_bounds__(2 * BWD_TILE) void attention_backward_dq_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(16) float Ks[BWD_SUB * ROWF], __align__(16) Vs[BWD_SUB * ROWF];
    int qt = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    int qr = qt * BWD_TILE + threadIdx.x / 2, half = threadIdx.x % 2;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float sl = 0.125f * LOG2E;
    float q[HALF], dO[HALF], dq[HALF];
#pragma unroll
    for (int d = 0; d < HALF; d++) {
        q[d] = qr < T ? __bfloat162float(base[(size_t)qr * C3 + half * HALF + d]) : 0.0f;
        dO[d] = qr < T ? __bfloat162float(dbase[(size_t)qr * C + half * HALF + d]) : 0.0f;
        dq[d] = 0.0f;
    }
    float L2 = qr < T ? lse[((size_t)b * NH + h) * T + qr] * LOG2E : 0.0f;
    float E = qr < T ? delta[((size_t)b * NH + h) * T + qr] : 0.0f;
    int q_last = min(T, qt * BWD_TILE + BWD_TILE) - 1;
    for (int k0 = 0; k0 <= q_last; k0 += BWD_SUB) {
        __syncthreads();
        for (int idx = threadIdx.x; idx < BWD_SUB * HS; idx += 2 * BWD_TILE) {
            int j = idx / HS, d = idx % HS, key = k0 + j;
            int at = j * ROWF + (d / HALF) * 36 + d % HALF;
            Ks[at] = key < T ? __bfloat162float(base[(size_t)key * C3 + C + d]) : 0.0f;
            Vs[at] = key < T ? __bfloat162float(base[(size_t)key * C3 + 2 * C + d]) : 0.0f;
        }
        __syncthreads();
        for (int j = 0; j < BWD_SUB; j++) {
            int key = k0 + j;
            const float *kj = Ks + j * ROWF + half * 36, *vj = Vs + j * ROWF + half * 36;
            float s = 0.0f, dp = 0.0f;
#pragma unroll
            for (int d = 0; d < HALF; d += 4) {
                float4 k4 = *(const float4 *)(kj + d), v4 = *(const float4 *)(vj + d);
                s += q[d] * k4.x + q[d + 1] * k4.y + q[d + 2] * k4.z + q[d + 3] * k4.w;
                dp += dO[d] * v4.x + dO[d + 1] * v4.y + dO[d + 2] * v4.z + dO[d + 3] * v4.w;
            }
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            dp += __shfl_xor_sync(0xffffffffu, dp, 1);
            int valid = qr < T && key <= qr;
            float p = valid ? exp2f(s * sl - L2) : 0.0f;
            float ds = p * (dp - E);
#pragma unroll
            for (int d = 0; d < HALF; d++)
                dq[d] += ds * kj[d];
        }
    }
    if (qr < T) {
        bf16 *o = (bf16 *)dqkv + ((size_t)b * T + qr) * C3 + h * HS + half * HALF;
#pragma unroll
        for (int d = 0; d < HALF; d++)
            o[d] = __float2bfloat16_rn(dq[d] * 0.125f);
    }
}

extern "C" int gpt_attention_forward_simple_launch(uint16_t *out, float *lse, const uint16_t *qkv,
                                            int B, int T, int C, int NH, uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || NH <= 0 || C != NH * HS)
        return (int)cudaErrorInvalidValue;
    dim3 grid(ceil_div((size_t)T, FWD_BR), (unsigned)NH, (unsigned)B);
    attention_forward_kernel<<<grid, FWD_BR, 0, (cudaStream_t)stream>>>(out, lse, qkv, T, C, NH);
    return last_error();
}

extern "C" int gpt_attention_backward_simple_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                             const uint16_t *out, const uint16_t *qkv,
                                             const float *lse, int B, int T, int C, int NH,
                                             uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || NH <= 0 || C != NH * HS)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    attention_delta_kernel<<<grid_for((size_t)B * NH * T), BLOCK, 0, s>>>(delta, dout, out, B, T,
                                                                        C, NH);
    dim3 grid(ceil_div((size_t)T, BWD_TILE), (unsigned)NH, (unsigned)B);
    attention_backward_dkv_kernel<<<grid, 2 * BWD_TILE, 0, s>>>(dqkv, dout, qkv, lse, delta, T, C,
                                                               NH);
    attention_backward_dq_kernel<<<grid, 2 * BWD_TILE, 0, s>>>(dqkv, dout, qkv, lse, delta, T, C,
                                                              NH);
    return last_error();
}


/* ----------------------------------------------------------------------------
 * attention on the tensor cores (WMMA bf16 16x16x16, fp32 accumulate): the same
 * algorithm, each warp owning 16 rows. Score tiles go through a per-warp
 * shared-memory buffer, where each pair of lanes applies the mask and the softmax
 * to one row (32 columns each) and writes the bf16 probabilities back for the next
 * product. */

using namespace nvcuda;
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> frag_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> frag_b_row;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> frag_b_col;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> frag_c;

#define TC_TILE 64 /* keys (forward, dQ) or queries (dK/dV) per shared-memory tile */

/* rows [r0, r0+rows) of one head's q, k or v (col 0, C or 2C) into dst (rows, 64),
 * zeros past T; 16-byte copies by all threads of the block */
__device__ __forceinline__ void load_rows(bf16 *dst, const bf16 *base, size_t stride, int r0,
                                          int rows, int T) {
    for (int idx = threadIdx.x; idx < rows * (HS / 8); idx += blockDim.x) {
        int r = idx / (HS / 8), c8 = idx % (HS / 8);
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (r0 + r < T)
            v = *(const uint4 *)(base + (size_t)(r0 + r) * stride + c8 * 8);
        *(uint4 *)(dst + r * HS + c8 * 8) = v;
    }
}

__global__ __launch_bounds__(128) void attention_forward_tc_kernel(uint16_t *out, float *lse,
                                                                   const uint16_t *qkv, int T,
                                                                   int C, int NH) {
    __shared__ __align__(32) bf16 Qs[64 * HS], Ks[TC_TILE * HS], Vs[TC_TILE * HS];
    __shared__ __align__(32) float Sw[4][16 * TC_TILE];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    int q0 = blockIdx.x * 64, h = blockIdx.y, b = blockIdx.z;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const float sl = 0.125f * LOG2E;
    float *S = Sw[warp];
    bf16 *P = (bf16 *)S; /* the probabilities overwrite the scores they came from */
    load_rows(Qs, base, C3, q0, 64, T);
    __syncthreads();
    frag_a qa[4];
    for (int k = 0; k < 4; k++)
        wmma::load_matrix_sync(qa[k], Qs + warp * 16 * HS + k * 16, HS);
    int tq = q0 + warp * 16 + r, wq_last = q0 + warp * 16 + 15;
    float o[32], m = -INFINITY, l = 0.0f;
#pragma unroll
    for (int j = 0; j < 32; j++)
        o[j] = 0.0f;
    int q_last = min(T, q0 + 64) - 1;
    for (int k0 = 0; k0 <= q_last; k0 += TC_TILE) {
        __syncthreads();
        load_rows(Ks, base + C, C3, k0, TC_TILE, T);
        load_rows(Vs, base + 2 * C, C3, k0, TC_TILE, T);
        __syncthreads();
        if (k0 > wq_last)
            continue;
        for (int n = 0; n < 4; n++) {
            frag_c acc;
            wmma::fill_fragment(acc, 0.0f);
            for (int k = 0; k < 4; k++) {
                frag_b_col kb;
                wmma::load_matrix_sync(kb, Ks + n * 16 * HS + k * 16, HS);
                wmma::mma_sync(acc, qa[k], kb, acc);
            }
            wmma::store_matrix_sync(S + n * 16, acc, TC_TILE, wmma::mem_row_major);
        }
        __syncwarp();
        float s[32], mt = -INFINITY;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int key = k0 + half * 32 + j;
            s[j] = key <= tq && key < T ? S[r * TC_TILE + half * 32 + j] * sl : -INFINITY;
            mt = fmaxf(mt, s[j]);
        }
        mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, 1));
        float mn = fmaxf(m, mt);
        float alpha = m == -INFINITY ? 0.0f : exp2f(m - mn), ps = 0.0f;
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 32; j++) {
            float p = s[j] == -INFINITY ? 0.0f : exp2f(s[j] - mn);
            ps += p;
            P[r * TC_TILE + half * 32 + j] = __float2bfloat16_rn(p);
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        l = l * alpha + ps;
        m = mn;
        __syncwarp();
        frag_c pv[4];
        for (int n = 0; n < 4; n++) {
            wmma::fill_fragment(pv[n], 0.0f);
            for (int k = 0; k < 4; k++) {
                frag_a pa;
                frag_b_row vb;
                wmma::load_matrix_sync(pa, P + k * 16, TC_TILE);
                wmma::load_matrix_sync(vb, Vs + k * 16 * HS + n * 16, HS);
                wmma::mma_sync(pv[n], pa, vb, pv[n]);
            }
        }
        __syncwarp();
        for (int n = 0; n < 4; n++)
            wmma::store_matrix_sync(S + n * 16, pv[n], TC_TILE, wmma::mem_row_major);
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 32; j++)
            o[j] = o[j] * alpha + S[r * TC_TILE + half * 32 + j];
    }
    if (tq < T) {
        float inv = 1.0f / l;
        bf16 *op = (bf16 *)out + ((size_t)b * T + tq) * C + h * HS + half * 32;
#pragma unroll
        for (int j = 0; j < 32; j += 2)
            *(__nv_bfloat162 *)(op + j) = __floats2bfloat162_rn(o[j] * inv, o[j + 1] * inv);
        if (half == 0)
            lse[((size_t)b * NH + h) * T + tq] = (m + log2f(l)) * LN2;
    }
}

/* dK, dV: 2 warps, 16 keys each; query tiles of 64 */
__global__ __launch_bounds__(64) void attention_backward_dkv_tc_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(32) bf16 Kown[32 * HS], Vown[32 * HS], Qs[TC_TILE * HS], Ds[TC_TILE * HS];
    __shared__ __align__(32) float Sw[2][16 * TC_TILE], Pw[2][16 * TC_TILE];
    __shared__ float L2s[TC_TILE], Es[TC_TILE];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    int k0b = blockIdx.x * 32, h = blockIdx.y, b = blockIdx.z;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float *lseb = lse + ((size_t)b * NH + h) * T, *delb = delta + ((size_t)b * NH + h) * T;
    const float sl = 0.125f * LOG2E;
    float *S = Sw[warp], *DP = Pw[warp];
    bf16 *P = (bf16 *)S, *DS = (bf16 *)DP;
    load_rows(Kown, base + C, C3, k0b, 32, T);
    load_rows(Vown, base + 2 * C, C3, k0b, 32, T);
    __syncthreads();
    frag_a ka[4], va[4];
    for (int k = 0; k < 4; k++) {
        wmma::load_matrix_sync(ka[k], Kown + warp * 16 * HS + k * 16, HS);
        wmma::load_matrix_sync(va[k], Vown + warp * 16 * HS + k * 16, HS);
    }
    frag_c dk[4], dv[4];
    for (int n = 0; n < 4; n++) {
        wmma::fill_fragment(dk[n], 0.0f);
        wmma::fill_fragment(dv[n], 0.0f);
    }
    int key = k0b + warp * 16 + r;
    for (int q0 = k0b / TC_TILE * TC_TILE; q0 < T; q0 += TC_TILE) {
        __syncthreads();
        load_rows(Qs, base, C3, q0, TC_TILE, T);
        load_rows(Ds, dbase, C, q0, TC_TILE, T);
        for (int i = threadIdx.x; i < TC_TILE; i += blockDim.x) {
            L2s[i] = q0 + i < T ? lseb[q0 + i] * LOG2E : 0.0f;
            Es[i] = q0 + i < T ? delb[q0 + i] : 0.0f;
        }
        __syncthreads();
        for (int n = 0; n < 4; n++) { /* S^T = K Q^T, dP^T = V dO^T: (16 keys, 64 queries) */
            frag_c acc, acc2;
            wmma::fill_fragment(acc, 0.0f);
            wmma::fill_fragment(acc2, 0.0f);
            for (int k = 0; k < 4; k++) {
                frag_b_col qb, db;
                wmma::load_matrix_sync(qb, Qs + n * 16 * HS + k * 16, HS);
                wmma::load_matrix_sync(db, Ds + n * 16 * HS + k * 16, HS);
                wmma::mma_sync(acc, ka[k], qb, acc);
                wmma::mma_sync(acc2, va[k], db, acc2);
            }
            wmma::store_matrix_sync(S + n * 16, acc, TC_TILE, wmma::mem_row_major);
            wmma::store_matrix_sync(DP + n * 16, acc2, TC_TILE, wmma::mem_row_major);
        }
        __syncwarp();
        float p[32], ds[32];
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int qi = half * 32 + j, q = q0 + qi;
            int valid = q < T && key < T && q >= key;
            p[j] = valid ? exp2f(S[r * TC_TILE + qi] * sl - L2s[qi]) : 0.0f;
            ds[j] = p[j] * (DP[r * TC_TILE + qi] - Es[qi]);
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 32; j++) {
            P[r * TC_TILE + half * 32 + j] = __float2bfloat16_rn(p[j]);
            DS[r * TC_TILE + half * 32 + j] = __float2bfloat16_rn(ds[j]);
        }
        __syncwarp();
        for (int n = 0; n < 4; n++) /* dV += P^T dO, dK += dS^T Q */
            for (int k = 0; k < 4; k++) {
                frag_a pa, sa;
                frag_b_row db, qb;
                wmma::load_matrix_sync(pa, P + k * 16, TC_TILE);
                wmma::load_matrix_sync(sa, DS + k * 16, TC_TILE);
                wmma::load_matrix_sync(db, Ds + k * 16 * HS + n * 16, HS);
                wmma::load_matrix_sync(qb, Qs + k * 16 * HS + n * 16, HS);
                wmma::mma_sync(dv[n], pa, db, dv[n]);
                wmma::mma_sync(dk[n], sa, qb, dk[n]);
            }
    }
    __syncwarp();
    for (int n = 0; n < 4; n++) {
        wmma::store_matrix_sync(S + n * 16, dk[n], TC_TILE, wmma::mem_row_major);
        wmma::store_matrix_sync(DP + n * 16, dv[n], TC_TILE, wmma::mem_row_major);
    }
    __syncwarp();
    if (key < T) {
        bf16 *o = (bf16 *)dqkv + ((size_t)b * T + key) * C3 + h * HS + half * 32;
#pragma unroll
        for (int j = 0; j < 32; j++) {
            o[C + j] = __float2bfloat16_rn(S[r * TC_TILE + half * 32 + j] * 0.125f);
            o[2 * C + j] = __float2bfloat16_rn(DP[r * TC_TILE + half * 32 + j]);
        }
    }
}

/* dQ: 2 warps, 16 queries each; key tiles of 64 */
__global__ __launch_bounds__(64) void attention_backward_dq_tc_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(32) bf16 Qown[32 * HS], Down[32 * HS], Ks[TC_TILE * HS], Vs[TC_TILE * HS];
    __shared__ __align__(32) float Sw[2][16 * TC_TILE], Pw[2][16 * TC_TILE];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = lane / 2, half = lane % 2;
    int q0b = blockIdx.x * 32, h = blockIdx.y, b = blockIdx.z;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float sl = 0.125f * LOG2E;
    float *S = Sw[warp], *DP = Pw[warp];
    bf16 *DS = (bf16 *)S;
    load_rows(Qown, base, C3, q0b, 32, T);
    load_rows(Down, dbase, C, q0b, 32, T);
    __syncthreads();
    frag_a qa[4], da[4];
    for (int k = 0; k < 4; k++) {
        wmma::load_matrix_sync(qa[k], Qown + warp * 16 * HS + k * 16, HS);
        wmma::load_matrix_sync(da[k], Down + warp * 16 * HS + k * 16, HS);
    }
    frag_c dq[4];
    for (int n = 0; n < 4; n++)
        wmma::fill_fragment(dq[n], 0.0f);
    int q = q0b + warp * 16 + r, wq_last = q0b + warp * 16 + 15;
    float L2 = q < T ? lse[((size_t)b * NH + h) * T + q] * LOG2E : 0.0f;
    float E = q < T ? delta[((size_t)b * NH + h) * T + q] : 0.0f;
    int q_last = min(T, q0b + 32) - 1;
    for (int k0 = 0; k0 <= q_last; k0 += TC_TILE) {
        __syncthreads();
        load_rows(Ks, base + C, C3, k0, TC_TILE, T);
        load_rows(Vs, base + 2 * C, C3, k0, TC_TILE, T);
        __syncthreads();
        if (k0 > wq_last)
            continue;
        for (int n = 0; n < 4; n++) { /* S = Q K^T, dP = dO V^T: (16 queries, 64 keys) */
            frag_c acc, acc2;
            wmma::fill_fragment(acc, 0.0f);
            wmma::fill_fragment(acc2, 0.0f);
            for (int k = 0; k < 4; k++) {
                frag_b_col kb, vb;
                wmma::load_matrix_sync(kb, Ks + n * 16 * HS + k * 16, HS);
                wmma::load_matrix_sync(vb, Vs + n * 16 * HS + k * 16, HS);
                wmma::mma_sync(acc, qa[k], kb, acc);
                wmma::mma_sync(acc2, da[k], vb, acc2);
            }
            wmma::store_matrix_sync(S + n * 16, acc, TC_TILE, wmma::mem_row_major);
            wmma::store_matrix_sync(DP + n * 16, acc2, TC_TILE, wmma::mem_row_major);
        }
        __syncwarp();
        float ds[32];
#pragma unroll
        for (int j = 0; j < 32; j++) {
            int ki = half * 32 + j, key = k0 + ki;
            int valid = q < T && key <= q;
            float p = valid ? exp2f(S[r * TC_TILE + ki] * sl - L2) : 0.0f;
            ds[j] = p * (DP[r * TC_TILE + ki] - E);
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 32; j++)
            DS[r * TC_TILE + half * 32 + j] = __float2bfloat16_rn(ds[j]);
        __syncwarp();
        for (int n = 0; n < 4; n++) /* dQ += dS K */
            for (int k = 0; k < 4; k++) {
                frag_a sa;
                frag_b_row kb;
                wmma::load_matrix_sync(sa, DS + k * 16, TC_TILE);
                wmma::load_matrix_sync(kb, Ks + k * 16 * HS + n * 16, HS);
                wmma::mma_sync(dq[n], sa, kb, dq[n]);
            }
    }
    __syncwarp();
    for (int n = 0; n < 4; n++)
        wmma::store_matrix_sync(S + n * 16, dq[n], TC_TILE, wmma::mem_row_major);
    __syncwarp();
    if (q < T) {
        bf16 *o = (bf16 *)dqkv + ((size_t)b * T + q) * C3 + h * HS + half * 32;
#pragma unroll
        for (int j = 0; j < 32; j++)
            o[j] = __float2bfloat16_rn(S[r * TC_TILE + half * 32 + j] * 0.125f);
    }
}

extern "C" int gpt_attention_forward_wmma_launch(uint16_t *out, float *lse, const uint16_t *qkv,
                                            int B, int T, int C, int NH, uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || NH <= 0 || C != NH * HS)
        return (int)cudaErrorInvalidValue;
    dim3 grid(ceil_div((size_t)T, 64), (unsigned)NH, (unsigned)B);
    attention_forward_tc_kernel<<<grid, 128, 0, (cudaStream_t)stream>>>(out, lse, qkv, T, C, NH);
    return last_error();
}

extern "C" int gpt_attention_backward_wmma_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                             const uint16_t *out, const uint16_t *qkv,
                                             const float *lse, int B, int T, int C, int NH,
                                             uvmrt_stream_t stream) {
    if (B <= 0 || T <= 0 || NH <= 0 || C != NH * HS)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    attention_delta_kernel<<<grid_for((size_t)B * NH * T), BLOCK, 0, s>>>(delta, dout, out, B, T,
                                                                        C, NH);
    dim3 grid(ceil_div((size_t)T, 32), (unsigned)NH, (unsigned)B);
    attention_backward_dkv_tc_kernel<<<grid, 64, 0, s>>>(dqkv, dout, qkv, lse, delta, T, C, NH);
    attention_backward_dq_tc_kernel<<<grid, 64, 0, s>>>(dqkv, dout, qkv, lse, delta, T, C, NH);
    return last_error();
}

/* ----------------------------------------------------------------------------
 * attention on the tensor cores, FlashAttention-2 style (the trainer's): each warp
 * owns 16 rows and issues mma.sync m16n8k16 (bf16 in, fp32 accumulate) itself, so
 * the score tile stays in the accumulator registers. The accumulator layout of one
 * product is the operand layout of the next (a thread holds rows g and g+8, columns
 * 2t and 2t+1 of each 8-wide tile, g = lane / 4, t = lane % 4), so the scores become
 * the probabilities and then the A operand of P V without leaving the thread; the
 * row max and sum need only the 4 lanes of a quad. K/V (or Q/dO) tiles of 64 rows
 * are double-buffered in shared memory with cp.async: tile j+1 loads while tile j
 * is used. Rows are padded to 72 bf16 (144 bytes) so the 8 row addresses of an
 * ldmatrix fall in 8 different 16-byte bank groups. Tiles above the diagonal are
 * never visited; only the diagonal tile and the ragged last tile are masked.
 * Blocks run the longest rows first (blockIdx.y reversed) so that the short ones
 * fill the tail of the grid. Backward: delta = rowsum(dO * O) first, then one kernel
 * per key tile for dK, dV (4 products per query tile) and one per query tile for dQ
 * (3 products per key tile): no atomics, every sum in a fixed order, so the
 * gradients are the same bits on every run. */

#define FA_T 64   /* rows per tile: queries per block, keys per shared tile (and back) */
#define FA_LD 72  /* padded shared row, bf16 */
#define FA_THREADS 128

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit(void) {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void cp_async_wait_all(void) {
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

__device__ __forceinline__ void ldsm4(unsigned *r, const bf16 *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}

__device__ __forceinline__ void ldsm4t(unsigned *r, const bf16 *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a)
                 : "memory");
}

/* d (16x8 fp32) += a (16x16 bf16, row) * b (16x8 bf16, col) */
__device__ __forceinline__ void mma16816(float *d, const unsigned *a, unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(unsigned *)&v;
}

/* rows [r0, r0+64) of one head's q, k, v or dout (row stride `stride`) into dst
 * (64 x FA_LD), zeros past T; 4 16-byte copies per thread, not waited for */
__device__ __forceinline__ void fa_load_tile(bf16 *dst, const bf16 *src, size_t stride, int r0,
                                             int T) {
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int idx = threadIdx.x + k * FA_THREADS, r = idx >> 3, c = idx & 7;
        int ok = r0 + r < T;
        /* a zero-byte copy still names a valid address: row 0 */
        cp_async16(dst + r * FA_LD + c * 8, src + (size_t)(ok ? r0 + r : 0) * stride + c * 8,
                   ok ? 16 : 0);
    }
}

/* the warp's 16 rows of a tile as 4 A operands (k = 16 columns each) */
__device__ __forceinline__ void fa_load_a(unsigned (*a)[4], const bf16 *tile, int warp,
                                          int lane) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        ldsm4(a[kk], tile + (warp * 16 + (lane & 15)) * FA_LD + kk * 16 + (lane >> 4) * 8);
}

/* acc (16 x 64) = a (16 x 64) * tile^T: tile rows are the 64 output columns */
__device__ __forceinline__ void fa_mm_abt(float (*acc)[4], unsigned (*a)[4], const bf16 *tile,
                                          int lane) {
#pragma unroll
    for (int n = 0; n < 8; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int np = 0; np < 4; np++) {
            unsigned b[4];
            ldsm4(b, tile + (np * 16 + (lane & 7) + (lane >> 4) * 8) * FA_LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
            mma16816(acc[2 * np], a[kk], b[0], b[1]);
            mma16816(acc[2 * np + 1], a[kk], b[2], b[3]);
        }
}

/* acc (16 x 64) += p (16 x 64, accumulator layout, rounded to bf16) * tile (64 x 64) */
__device__ __forceinline__ void fa_mm_pb(float (*acc)[4], float (*p)[4], const bf16 *tile,
                                         int lane) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        unsigned a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]),
                         pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                         pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                         pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < 4; dp++) {
            unsigned b[4];
            ldsm4t(b, tile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * FA_LD + dp * 16 +
                          (lane >> 4) * 8);
            mma16816(acc[2 * dp], a, b[0], b[1]);
            mma16816(acc[2 * dp + 1], a, b[2], b[3]);
        }
    }
}

/* MT m-tiles (16 rows each) per warp: a block of 4 warps takes MT * 64 queries, row
 * r of the block in warp (r % 64) / 16, m-tile r / 64, so every warp meets the
 * diagonal equally. Each K or V fragment read from shared memory feeds MT products,
 * which halves the shared-memory traffic per product at MT = 2 (at MT = 1 each
 * 512-byte ldmatrix.x4 feeds two mma, which by our estimate, not yet measured, keeps
 * shared memory about as busy as the tensor cores). An m-tile whose rows all
 * lie above a key tile skips it (act[] is the same across the warp). */
template <int MT>
__device__ __forceinline__ void fa_mm_abt_m(float (*acc)[8][4], unsigned (*a)[4][4],
                                            const bf16 *tile, const int *act, int lane) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int n = 0; n < 8; n++)
            acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int np = 0; np < 4; np++) {
            unsigned b[4];
            ldsm4(b, tile + (np * 16 + (lane & 7) + (lane >> 4) * 8) * FA_LD + kk * 16 +
                         ((lane >> 3) & 1) * 8);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (act[mt]) {
                    mma16816(acc[mt][2 * np], a[mt][kk], b[0], b[1]);
                    mma16816(acc[mt][2 * np + 1], a[mt][kk], b[2], b[3]);
                }
        }
}

template <int MT>
__device__ __forceinline__ void fa_mm_pb_m(float (*acc)[8][4], float (*p)[8][4],
                                           const bf16 *tile, const int *act, int lane) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        unsigned a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            a[mt][0] = pack_bf16(p[mt][2 * kk][0], p[mt][2 * kk][1]);
            a[mt][1] = pack_bf16(p[mt][2 * kk][2], p[mt][2 * kk][3]);
            a[mt][2] = pack_bf16(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
            a[mt][3] = pack_bf16(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < 4; dp++) {
            unsigned b[4];
            ldsm4t(b, tile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * FA_LD + dp * 16 +
                          (lane >> 4) * 8);
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                if (act[mt]) {
                    mma16816(acc[mt][2 * dp], a[mt], b[0], b[1]);
                    mma16816(acc[mt][2 * dp + 1], a[mt], b[2], b[3]);
                }
        }
    }
}

/* shared memory: 4 tiles, K0 V0 K1 V1; the block's Q (MT tiles) first sits in K1 V1 */
template <int MT>
__global__ __launch_bounds__(FA_THREADS) void attention_forward_mma_kernel(
    uint16_t *out, float *lse, const uint16_t *qkv, int T, int C, int NH) {
    __shared__ __align__(16) bf16 sm[4][FA_T * FA_LD];
    int h = blockIdx.x % NH, b = blockIdx.x / NH;
    int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * MT * FA_T;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const float sl = 0.125f * LOG2E;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
        fa_load_tile(sm[2 + mt], base, C3, q0 + mt * FA_T, T);
    fa_load_tile(sm[0], base + C, C3, 0, T);
    fa_load_tile(sm[1], base + 2 * C, C3, 0, T);
    cp_async_commit();
    unsigned qf[MT][4][4];
    float o[MT][8][4], s[MT][8][4], m[MT][2], l[MT][2];
    int row0[MT]; /* the warp's first row in each m-tile; the thread's are +g, +g+8 */
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int n = 0; n < 8; n++)
            o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
        m[mt][0] = m[mt][1] = -INFINITY;
        l[mt][0] = l[mt][1] = 0.0f;
        row0[mt] = q0 + mt * FA_T + warp * 16;
    }
    /* key tiles up to the block's last row, and none past T */
    int jlast = min(qt * MT + MT - 1, (T - 1) / FA_T);
    for (int j = 0; j <= jlast; j++) {
        cp_async_wait_all();
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
                fa_load_a(qf[mt], sm[2 + mt], warp, lane);
            __syncthreads();
        }
        if (j < jlast) {
            int nb = 2 * ((j + 1) & 1);
            fa_load_tile(sm[nb], base + C, C3, (j + 1) * FA_T, T);
            fa_load_tile(sm[nb + 1], base + 2 * C, C3, (j + 1) * FA_T, T);
            cp_async_commit();
        }
        const bf16 *Kt = sm[2 * (j & 1)], *Vt = sm[2 * (j & 1) + 1];
        int k0 = j * FA_T, act[MT];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
            act[mt] = k0 <= row0[mt] + 15;
        fa_mm_abt_m<MT>(s, qf, Kt, act, lane);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            if (!act[mt])
                continue;
            int row[2] = {row0[mt] + g, row0[mt] + g + 8};
            if (k0 + FA_T - 1 > row0[mt] || k0 + FA_T > T) {
#pragma unroll
                for (int n = 0; n < 8; n++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int key = k0 + n * 8 + 2 * t4 + (e & 1);
                        if (key > row[e >> 1] || key >= T)
                            s[mt][n][e] = -INFINITY;
                    }
            }
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < 8; n++) {
                mx[0] = fmaxf(mx[0], fmaxf(s[mt][n][0], s[mt][n][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[mt][n][2], s[mt][n][3]));
            }
            float alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                float mn = fmaxf(m[mt][r], mx[r] * sl);
                /* every row has key 0, so mn is finite from tile 0 on; kept safe anyway */
                if (mn == -INFINITY)
                    mn = 0.0f;
                alpha[r] = exp2f(m[mt][r] - mn);
                m[mt][r] = mn;
                l[mt][r] *= alpha[r];
            }
#pragma unroll
            for (int n = 0; n < 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float p = exp2f(fmaf(s[mt][n][e], sl, -m[mt][e >> 1]));
                    s[mt][n][e] = p;
                    l[mt][e >> 1] += p;
                    o[mt][n][e] *= alpha[e >> 1];
                }
        }
        fa_mm_pb_m<MT>(o, s, Vt, act, lane);
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
            l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
            int rw = row0[mt] + g + 8 * r;
            if (rw >= T)
                continue;
            float inv = 1.0f / l[mt][r];
            bf16 *op = (bf16 *)out + ((size_t)b * T + rw) * C + h * HS + 2 * t4;
#pragma unroll
            for (int n = 0; n < 8; n++)
                *(__nv_bfloat162 *)(op + n * 8) =
                    __floats2bfloat162_rn(o[mt][n][2 * r] * inv, o[mt][n][2 * r + 1] * inv);
            if (t4 == 0)
                lse[((size_t)b * NH + h) * T + rw] = (m[mt][r] + log2f(l[mt][r])) * LN2;
        }
}

/* delta[b,h,t] = sum_d dout * out: 8 lanes per row, one 16-byte load of each, a
 * fixed shuffle tree */
__global__ void attention_delta_vec_kernel(float *delta, const uint16_t *dout,
                                           const uint16_t *out, int B, int T, int C, int NH) {
    size_t rows = (size_t)B * NH * T;
    size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 8;
    int c8 = threadIdx.x & 7;
    float s = 0.0f;
    if (i < rows) {
        int t = (int)(i % T);
        size_t bh = i / T;
        int h = (int)(bh % NH), b = (int)(bh / NH);
        size_t off = ((size_t)b * T + t) * C + h * HS + c8 * 8;
        uint4 dv = *(const uint4 *)((const bf16 *)dout + off);
        uint4 ov = *(const uint4 *)((const bf16 *)out + off);
        const __nv_bfloat162 *d2 = (const __nv_bfloat162 *)&dv, *o2 = (const __nv_bfloat162 *)&ov;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            float2 a = __bfloat1622float2(d2[k]), c = __bfloat1622float2(o2[k]);
            s += a.x * c.x + a.y * c.y;
        }
    }
    s += __shfl_xor_sync(0xffffffffu, s, 1);
    s += __shfl_xor_sync(0xffffffffu, s, 2);
    s += __shfl_xor_sync(0xffffffffu, s, 4);
    if (i < rows && c8 == 0)
        delta[i] = s;
}

/* dK, dV for one tile of 64 keys (16 per warp), over the query tiles from the
 * diagonal on: S^T = K Q^T, dP^T = V dO^T, P^T = exp(S^T - lse), dS^T = P^T (dP^T -
 * delta), dV += P^T dO, dK += dS^T Q */
__global__ __launch_bounds__(FA_THREADS) void attention_backward_dkv_mma_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(16) bf16 Qs[2][FA_T * FA_LD], Ds[2][FA_T * FA_LD];
    __shared__ float Ls[2][FA_T], Es[2][FA_T];
    int h = blockIdx.x % NH, b = blockIdx.x / NH;
    int kt = blockIdx.y, k0 = kt * FA_T, nq = (T + FA_T - 1) / FA_T;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    int tid = threadIdx.x;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float *lseb = lse + ((size_t)b * NH + h) * T, *delb = delta + ((size_t)b * NH + h) * T;
    const float sl = 0.125f * LOG2E;
    /* the block's own K and V go through the second buffers, free until tile kt+1 */
    fa_load_tile(Qs[1], base + C, C3, k0, T);
    fa_load_tile(Ds[1], base + 2 * C, C3, k0, T);
    fa_load_tile(Qs[0], base, C3, k0, T);
    fa_load_tile(Ds[0], dbase, C, k0, T);
    cp_async_commit();
    {
        int q = k0 + (tid & 63);
        float v = q < T ? (tid < 64 ? lseb[q] * LOG2E : delb[q]) : 0.0f;
        (tid < 64 ? Ls[0] : Es[0])[tid & 63] = v;
    }
    unsigned kf[4][4], vf[4][4];
    float dk[8][4], dv[8][4], st[8][4], dpt[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            dk[n][e] = dv[n][e] = 0.0f;
    int key[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
    for (int i = kt; i < nq; i++) {
        int buf = (i - kt) & 1, q0 = i * FA_T;
        cp_async_wait_all();
        __syncthreads();
        if (i == kt) {
            fa_load_a(kf, Qs[1], warp, lane);
            fa_load_a(vf, Ds[1], warp, lane);
            __syncthreads();
        }
        float nextv = 0.0f;
        if (i + 1 < nq) {
            fa_load_tile(Qs[buf ^ 1], base, C3, q0 + FA_T, T);
            fa_load_tile(Ds[buf ^ 1], dbase, C, q0 + FA_T, T);
            cp_async_commit();
            /* the next tile's lse / delta: loaded now, stored after this tile's work */
            int q = q0 + FA_T + (tid & 63);
            nextv = q < T ? (tid < 64 ? lseb[q] * LOG2E : delb[q]) : 0.0f;
        }
        fa_mm_abt(st, kf, Qs[buf], lane);
        fa_mm_abt(dpt, vf, Ds[buf], lane);
        int masked = i == kt || q0 + FA_T > T;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int qi = n * 8 + 2 * t4 + (e & 1);
                float p = exp2f(fmaf(st[n][e], sl, -Ls[buf][qi]));
                if (masked && (q0 + qi < key[e >> 1] || q0 + qi >= T))
                    p = 0.0f;
                st[n][e] = p;
                dpt[n][e] = p * (dpt[n][e] - Es[buf][qi]);
            }
        fa_mm_pb(dv, st, Ds[buf], lane);
        fa_mm_pb(dk, dpt, Qs[buf], lane);
        if (i + 1 < nq)
            (tid < 64 ? Ls[buf ^ 1] : Es[buf ^ 1])[tid & 63] = nextv;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (key[r] >= T)
            continue;
        bf16 *op = (bf16 *)dqkv + ((size_t)b * T + key[r]) * C3 + h * HS + 2 * t4;
#pragma unroll
        for (int n = 0; n < 8; n++) {
            *(__nv_bfloat162 *)(op + C + n * 8) =
                __floats2bfloat162_rn(dk[n][2 * r] * 0.125f, dk[n][2 * r + 1] * 0.125f);
            *(__nv_bfloat162 *)(op + 2 * C + n * 8) =
                __floats2bfloat162_rn(dv[n][2 * r], dv[n][2 * r + 1]);
        }
    }
}

/* dQ for one tile of 64 queries (16 per warp), over the key tiles up to the
 * diagonal: S = Q K^T, dP = dO V^T, dS = P (dP - delta), dQ += dS K */
__global__ __launch_bounds__(FA_THREADS) void attention_backward_dq_mma_kernel(
    uint16_t *dqkv, const uint16_t *dout, const uint16_t *qkv, const float *lse,
    const float *delta, int T, int C, int NH) {
    __shared__ __align__(16) bf16 Ks[2][FA_T * FA_LD], Vs[2][FA_T * FA_LD];
    int h = blockIdx.x % NH, b = blockIdx.x / NH;
    int qt = gridDim.y - 1 - blockIdx.y, q0 = qt * FA_T;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    size_t C3 = 3 * (size_t)C;
    const bf16 *base = (const bf16 *)qkv + (size_t)b * T * C3 + h * HS;
    const bf16 *dbase = (const bf16 *)dout + (size_t)b * T * C + h * HS;
    const float sl = 0.125f * LOG2E;
    fa_load_tile(Ks[1], base, C3, q0, T);
    fa_load_tile(Vs[1], dbase, C, q0, T);
    fa_load_tile(Ks[0], base + C, C3, 0, T);
    fa_load_tile(Vs[0], base + 2 * C, C3, 0, T);
    cp_async_commit();
    int row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    float L2[2], E[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        size_t at = ((size_t)b * NH + h) * T + row[r];
        L2[r] = row[r] < T ? lse[at] * LOG2E : 0.0f;
        E[r] = row[r] < T ? delta[at] : 0.0f;
    }
    unsigned qf[4][4], df[4][4];
    float dq[8][4], s[8][4], dp[8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
        dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;
    for (int j = 0; j <= qt; j++) {
        cp_async_wait_all();
        __syncthreads();
        if (j == 0) {
            fa_load_a(qf, Ks[1], warp, lane);
            fa_load_a(df, Vs[1], warp, lane);
            __syncthreads();
        }
        if (j < qt) {
            fa_load_tile(Ks[(j + 1) & 1], base + C, C3, (j + 1) * FA_T, T);
            fa_load_tile(Vs[(j + 1) & 1], base + 2 * C, C3, (j + 1) * FA_T, T);
            cp_async_commit();
        }
        fa_mm_abt(s, qf, Ks[j & 1], lane);
        fa_mm_abt(dp, df, Vs[j & 1], lane);
        int k0 = j * FA_T, masked = j == qt || k0 + FA_T > T;
#pragma unroll
        for (int n = 0; n < 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int key = k0 + n * 8 + 2 * t4 + (e & 1);
                float p = exp2f(fmaf(s[n][e], sl, -L2[e >> 1]));
                if (masked && (key > row[e >> 1] || key >= T))
                    p = 0.0f;
                s[n][e] = p * (dp[n][e] - E[e >> 1]);
            }
        fa_mm_pb(dq, s, Ks[j & 1], lane);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        if (row[r] >= T)
            continue;
        bf16 *op = (bf16 *)dqkv + ((size_t)b * T + row[r]) * C3 + h * HS + 2 * t4;
#pragma unroll
        for (int n = 0; n < 8; n++)
            *(__nv_bfloat162 *)(op + n * 8) =
                __floats2bfloat162_rn(dq[n][2 * r] * 0.125f, dq[n][2 * r + 1] * 0.125f);
    }
}

/* m-tiles per warp of the trainer's mma forward (1 or 2) */
#ifndef GPT_ATTENTION_MTILES
#define GPT_ATTENTION_MTILES 2
#endif

static int fa_shape_ok(int B, int T, int C, int NH) {
    /* gridDim.y holds the tiles of T (at most 65535) */
    return B > 0 && T > 0 && NH > 0 && C == NH * HS && (T + FA_T - 1) / FA_T <= 65535;
}

extern "C" int gpt_attention_forward_mma_tiles_launch(uint16_t *out, float *lse,
                                                      const uint16_t *qkv, int B, int T, int C,
                                                      int NH, int mtiles, uvmrt_stream_t stream) {
    if (!fa_shape_ok(B, T, C, NH) || (mtiles != 1 && mtiles != 2))
        return (int)cudaErrorInvalidValue;
    dim3 grid((unsigned)(B * NH), ceil_div((size_t)T, (size_t)mtiles * FA_T));
    cudaStream_t s = (cudaStream_t)stream;
    if (mtiles == 2)
        attention_forward_mma_kernel<2><<<grid, FA_THREADS, 0, s>>>(out, lse, qkv, T, C, NH);
    else
        attention_forward_mma_kernel<1><<<grid, FA_THREADS, 0, s>>>(out, lse, qkv, T, C, NH);
    return last_error();
}

extern "C" int gpt_attention_forward_mma_launch(uint16_t *out, float *lse, const uint16_t *qkv,
                                                int B, int T, int C, int NH,
                                                uvmrt_stream_t stream) {
    return gpt_attention_forward_mma_tiles_launch(out, lse, qkv, B, T, C, NH, GPT_ATTENTION_MTILES,
                                                  stream);
}

extern "C" int gpt_attention_backward_mma_launch(uint16_t *dqkv, float *delta,
                                                 const uint16_t *dout, const uint16_t *out,
                                                 const uint16_t *qkv, const float *lse, int B,
                                                 int T, int C, int NH, uvmrt_stream_t stream) {
    if (!fa_shape_ok(B, T, C, NH))
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    size_t rows = (size_t)B * NH * T;
    attention_delta_vec_kernel<<<ceil_div(rows * 8, BLOCK), BLOCK, 0, s>>>(delta, dout, out, B, T,
                                                                          C, NH);
    dim3 grid((unsigned)(B * NH), ceil_div((size_t)T, FA_T));
    attention_backward_dkv_mma_kernel<<<grid, FA_THREADS, 0, s>>>(dqkv, dout, qkv, lse, delta, T,
                                                                 C, NH);
    attention_backward_dq_mma_kernel<<<grid, FA_THREADS, 0, s>>>(dqkv, dout, qkv, lse, delta, T,
                                                                C, NH);
    return last_error();
}

/* The trainer's attention: the mma.sync kernels (GPT_ATTENTION_MMA=1, the default
 * since they passed gpt-gpu-check --attn on the H200, 2026-12-01: forward 165-190,
 * backward 156-184 TFLOP/s at T = 1024-2048, against 15 and 13 for WMMA);
 * ./configure NVCC_FLAGS=-DGPT_ATTENTION_MMA=0 selects the WMMA ones. */
#ifndef GPT_ATTENTION_MMA
#define GPT_ATTENTION_MMA 1
#endif

extern "C" int gpt_attention_forward_launch(uint16_t *out, float *lse, const uint16_t *qkv,
                                            int B, int T, int C, int NH, uvmrt_stream_t stream) {
    return GPT_ATTENTION_MMA
               ? gpt_attention_forward_mma_launch(out, lse, qkv, B, T, C, NH, stream)
               : gpt_attention_forward_wmma_launch(out, lse, qkv, B, T, C, NH, stream);
}

extern "C" int gpt_attention_backward_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                             const uint16_t *out, const uint16_t *qkv,
                                             const float *lse, int B, int T, int C, int NH,
                                             uvmrt_stream_t stream) {
    return GPT_ATTENTION_MMA ? gpt_attention_backward_mma_launch(dqkv, delta, dout, out, qkv, lse,
                                                                 B, T, C, NH, stream)
                             : gpt_attention_backward_wmma_launch(dqkv, delta, dout, out, qkv,
                                                                  lse, B, T, C, NH, stream);
}

extern "C" const char *gpt_attention_kind(void) {
    return GPT_ATTENTION_MMA ? "mma" : "wmma";
}

/* ----------------------------------------------------------------------------
 * classifier: cross-entropy of a chunk of rows, dlogits in place */

#define CE_THREADS 512

__global__ __launch_bounds__(CE_THREADS) void crossentropy_kernel(uint16_t *logits,
                                                                  float *losses,
                                                                  const int *targets, int V,
                                                                  int Vp, float dscale) {
    __shared__ float shm[CE_THREADS / 32], shs[CE_THREADS / 32];
    int row = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    bf16 *l = (bf16 *)logits + (size_t)row * Vp;
    /* online max and sum per thread, then combined: warps, then the warps in order */
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V; j += CE_THREADS) {
        float x = __bfloat162float(l[j]);
        if (x > m) {
            s = s * __expf(m - x) + 1.0f;
            m = x;
        } else {
            s += __expf(x - m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) +
            (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
        m = mn;
    }
    if (lane == 0) {
        shm[warp] = m;
        shs[warp] = s;
    }
    __syncthreads();
    float M = -INFINITY, S = 0.0f;
    for (int w = 0; w < CE_THREADS / 32; w++)
        M = fmaxf(M, shm[w]);
    for (int w = 0; w < CE_THREADS / 32; w++)
        S += shm[w] == -INFINITY ? 0.0f : shs[w] * __expf(shm[w] - M);
    int tgt = targets[row];
    float lt = __bfloat162float(l[tgt]);
    __syncthreads(); /* everyone has read l[tgt] before it is overwritten */
    if (threadIdx.x == 0)
        losses[row] = logf(S) + M - lt;
    float inv = 1.0f / S;
    for (int j = threadIdx.x; j < Vp; j += CE_THREADS) {
        float p = j < V ? __expf(__bfloat162float(l[j]) - M) * inv : 0.0f;
        l[j] = __float2bfloat16_rn((p - (j == tgt ? 1.0f : 0.0f)) * dscale);
    }
}

__global__ void loss_finish_kernel(const float *losses, int n, double *out) {
    __shared__ double sh[1024];
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += losses[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = sh[0] / n;
}

extern "C" int gpt_crossentropy_launch(uint16_t *logits, float *losses, const int *targets, int R,
                                       int V, int Vp, float dscale, uvmrt_stream_t stream) {
    if (R <= 0 || V <= 0 || V > Vp || Vp % 8)
        return (int)cudaErrorInvalidValue;
    crossentropy_kernel<<<R, CE_THREADS, 0, (cudaStream_t)stream>>>(logits, losses, targets, V,
                                                                    Vp, dscale);
    return last_error();
}

extern "C" int gpt_loss_finish_launch(const float *losses, int n, double *out,
                                      uvmrt_stream_t stream) {
    if (n <= 0)
        return (int)cudaErrorInvalidValue;
    loss_finish_kernel<<<1, 1024, 0, (cudaStream_t)stream>>>(losses, n, out);
    return last_error();
}

/* ----------------------------------------------------------------------------
 * gradient norm and AdamW */

__global__ void sumsq_kernel(const float *g, size_t n, double *partials) {
    __shared__ double sh[BLOCK];
    double s = 0.0;
    GRID_STRIDE(i, n) {
        double x = g[i];
        s += x * x;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = BLOCK / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partials[blockIdx.x] = sh[0];
}

__global__ void clip_finish_kernel(const double *partials, int nparts, float max_norm,
                                   float *clip, float *host_out) {
    __shared__ double sh[1024];
    double s = 0.0;
    for (int i = threadIdx.x; i < nparts; i += blockDim.x)
        s += partials[i];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            sh[threadIdx.x] += sh[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        float norm = (float)sqrt(sh[0]);
        float c = norm > max_norm ? max_norm / (norm + 1e-6f) : 1.0f;
        *clip = c;
        if (host_out) {
            host_out[0] = norm;
            host_out[1] = c;
        }
    }
}

__global__ void adamw_kernel(float *w, float *m, float *v, const float *g, uint16_t *wh, size_t n,
                             mlp_adamw_coef_t coef, const float *clip) {
    coef.inv_scale = *clip;
    GRID_STRIDE(i, n) {
        float wi = w[i], mi = m[i], vi = v[i];
        mlp_adamw_elem(&wi, &mi, &vi, g[i], &coef);
        w[i] = wi;
        m[i] = mi;
        v[i] = vi;
        if (wh)
            wh[i] = mlp_f32_to_bf16(wi);
    }
}

extern "C" int gpt_sumsq_launch(const float *g, size_t n, double *partials,
                                uvmrt_stream_t stream) {
    sumsq_kernel<<<GPT_SUMSQ_BLOCKS, BLOCK, 0, (cudaStream_t)stream>>>(g, n, partials);
    return last_error();
}

extern "C" int gpt_clip_finish_launch(const double *partials, int nparts, float max_norm,
                                      float *clip, float *host_out, uvmrt_stream_t stream) {
    if (nparts <= 0)
        return (int)cudaErrorInvalidValue;
    clip_finish_kernel<<<1, 1024, 0, (cudaStream_t)stream>>>(partials, nparts, max_norm, clip,
                                                            host_out);
    return last_error();
}

extern "C" int gpt_adamw_launch(float *w, float *m, float *v, const float *g, uint16_t *wh,
                                size_t n, const mlp_adamw_coef_t *coef, const float *clip,
                                uvmrt_stream_t stream) {
    if (coef == NULL || clip == NULL)
        return (int)cudaErrorInvalidValue;
    adamw_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(w, m, v, g, wh, n, *coef, clip);
    return last_error();
}
