/*
 * gpu_check_attention.cu -- the earlier attention kernels, kept for gpt-gpu-check
 * (gpu_check.c) to compare uvmrt-gpt's attention (the mma.sync kernels of
 * gpt_kernels.cu) against, and to time it next to; the trainer does not link them.
 *
 * Both are flash-style, head size 64, checked against the C reference. The first,
 * scalar fp32 FMAs: the forward keeps one query row per thread with its running max,
 * sum and output in registers and streams K/V tiles through shared memory; it saves
 * the log-sum-exp. The backward recomputes the probabilities from it, in two kernels
 * so that nothing is accumulated across blocks: one block per key tile makes dK and
 * dV, one block per query tile dQ. The second runs the same algorithm with the
 * products on the tensor cores (WMMA). Measured on the H200 at B=8, T=1024, 25 heads:
 * forward 2.6 ms scalar, 1.8 ms WMMA; backward 4.7 ms scalar, 5.2 ms WMMA: both are
 * bound by the round trip of every score tile through shared memory, not by the
 * arithmetic, which the trainer's mma kernels remove.
 */
#include <mma.h>

#include "gpt_kernels_common.cuh"
#include "gpu_check_attention.h"

/* ----------------------------------------------------------------------------
 * attention, head size 64 */

#define FWD_BR 64 /* queries per block (one per thread) */
#define FWD_BC 32 /* keys per shared-memory tile */

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
