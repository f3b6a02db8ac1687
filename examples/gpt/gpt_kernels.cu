/*
 * gpt_kernels.cu -- uvmrt-gpt's GPU kernels (see gpt_kernels.h), llm.c style: one
 * kernel per job, tiny launchers at the end of each section.
 *
 * Numerics: bf16 storage, fp32 arithmetic; the residual stream and its gradient
 * are fp32. Reductions are warp shuffles and shared-memory trees in a fixed order,
 * or per-column sums over fixed row chunks, never atomics: results are
 * bit-reproducible.
 *
 * Attention (head size 64) is FlashAttention-2 style, mma.sync from registers; the
 * earlier scalar fp32 and WMMA implementations, which round-trip every score tile
 * through shared memory, live in gpu_check_attention.cu, where gpt-gpu-check checks
 * and times this one against them.
 */
#include <stdlib.h>
#include <string.h>

#include "gpt_kernels_common.cuh"

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
 * LayerNorm: one warp per row, fp32 statistics (two passes: mean, then variance).
 * Where C is a multiple of 4 and at most 32 * 4 * LN_VEC_MAX, the row is read once
 * from memory into registers (each lane 4 consecutive columns at a time, 16-byte
 * loads) and both statistics and the output come from there; else the scalar
 * kernels, which read it three times. */

#define LN_VEC_MAX 16 /* float4 per lane: C up to 2048 */

template <int NV>
__global__ void layernorm_forward_vec_kernel(uint16_t *out, float *mean, float *rstd, const float *inp,
                                             const uint16_t *w, const uint16_t *b, int N, int C) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float4 *x = (const float4 *)(inp + (size_t)row * C);
    int C4 = C / 4;
    float4 v[NV];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int c4 = lane + 32 * k;
        v[k] = c4 < C4 ? x[c4] : make_float4(0.f, 0.f, 0.f, 0.f);
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    float m = warp_sum(s) / C, q = 0.0f;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        if (lane + 32 * k < C4) {
            float a = v[k].x - m, bb = v[k].y - m, c = v[k].z - m, d = v[k].w - m;
            q += (a * a + bb * bb) + (c * c + d * d);
        }
    }
    float r = rsqrtf(warp_sum(q) / C + 1e-5f);
    const __nv_bfloat162 *w2 = (const __nv_bfloat162 *)w, *b2 = (const __nv_bfloat162 *)b;
    __nv_bfloat162 *o2 = (__nv_bfloat162 *)(out + (size_t)row * C);
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int c4 = lane + 32 * k;
        if (c4 < C4) {
            float2 wa = __bfloat1622float2(w2[2 * c4]), wb = __bfloat1622float2(w2[2 * c4 + 1]);
            float2 ba = __bfloat1622float2(b2[2 * c4]), bb = __bfloat1622float2(b2[2 * c4 + 1]);
            __nv_bfloat162 lo = __floats2bfloat162_rn((v[k].x - m) * r * wa.x + ba.x, (v[k].y - m) * r * wa.y + ba.y);
            __nv_bfloat162 hi = __floats2bfloat162_rn((v[k].z - m) * r * wb.x + bb.x, (v[k].w - m) * r * wb.y + bb.y);
            uint2 pk;
            pk.x = *(unsigned *)&lo;
            pk.y = *(unsigned *)&hi;
            ((uint2 *)o2)[c4] = pk;
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

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

/* LayerNorm backward, 4 columns at c4 of a row (the vector kernels' layout): the
 * normalized input nv and dn = w * dout; their sums into a and an; the input gradient
 * stored (added to dinp's when accumulate). Shared by the two input-gradient kernels,
 * which so do the same arithmetic in the same order. */
__device__ __forceinline__ void ln_bwd_elem(const float4 *x, const uint2 *dy, const uint2 *w4, int c4, float m,
                                            float r, float4 *nv, float4 *dn) {
    float4 xv = x[c4];
    uint2 dq = dy[c4], wq = w4[c4];
    float2 d0 = __bfloat1622float2(*(__nv_bfloat162 *)&dq.x), d1 = __bfloat1622float2(*(__nv_bfloat162 *)&dq.y);
    float2 w0 = __bfloat1622float2(*(__nv_bfloat162 *)&wq.x), w1 = __bfloat1622float2(*(__nv_bfloat162 *)&wq.y);
    *nv = make_float4((xv.x - m) * r, (xv.y - m) * r, (xv.z - m) * r, (xv.w - m) * r);
    *dn = make_float4(w0.x * d0.x, w0.y * d0.y, w1.x * d1.x, w1.y * d1.y);
}

__device__ __forceinline__ void ln_bwd_add(float4 nv, float4 dn, float *a, float *an) {
    *a += (dn.x + dn.y) + (dn.z + dn.w);
    *an += (dn.x * nv.x + dn.y * nv.y) + (dn.z * nv.z + dn.w * nv.w);
}

/* dbf (or NULL): the stored gradient in bf16 as well (round to nearest, as
 * f32_to_bf16_kernel), for the next matmul, which so needs no conversion pass */
__device__ __forceinline__ void ln_bwd_store(float4 *di, uint2 *dbf, int c4, float4 nv, float4 dn, float a, float an,
                                             float r, int accumulate) {
    float4 d = make_float4((dn.x - a - nv.x * an) * r, (dn.y - a - nv.y * an) * r, (dn.z - a - nv.z * an) * r,
                           (dn.w - a - nv.w * an) * r);
    if (accumulate) {
        float4 o = di[c4];
        d = make_float4(o.x + d.x, o.y + d.y, o.z + d.z, o.w + d.w);
    }
    di[c4] = d;
    if (dbf != NULL) {
        __nv_bfloat162 lo = __floats2bfloat162_rn(d.x, d.y), hi = __floats2bfloat162_rn(d.z, d.w);
        dbf[c4] = make_uint2(*(unsigned *)&lo, *(unsigned *)&hi);
    }
}

/* the input gradient, the row's x, dout and w read once into registers (as above) */
template <int NV>
__global__ void layernorm_backward_dinp_vec_kernel(float *dinp, uint16_t *dinp_bf16, const uint16_t *dout,
                                                   const float *inp, const uint16_t *w, const float *mean,
                                                   const float *rstd, int N, int C, int accumulate) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float4 *x = (const float4 *)(inp + (size_t)row * C);
    const uint2 *dy = (const uint2 *)(dout + (size_t)row * C);
    const uint2 *w4 = (const uint2 *)w;
    int C4 = C / 4;
    float m = mean[row], r = rstd[row], a = 0.0f, an = 0.0f;
    float4 nv[NV], dn[NV];
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int c4 = lane + 32 * k;
        if (c4 < C4) {
            ln_bwd_elem(x, dy, w4, c4, m, r, &nv[k], &dn[k]);
            ln_bwd_add(nv[k], dn[k], &a, &an);
        } else {
            nv[k] = dn[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    }
    a = warp_sum(a) / C;
    an = warp_sum(an) / C;
    float4 *di = (float4 *)(dinp + (size_t)row * C);
    uint2 *db = dinp_bf16 != NULL ? (uint2 *)(dinp_bf16 + (size_t)row * C) : NULL;
#pragma unroll
    for (int k = 0; k < NV; k++) {
        int c4 = lane + 32 * k;
        if (c4 < C4) {
            ln_bwd_store(di, db, c4, nv[k], dn[k], a, an, r, accumulate);
        }
    }
}

/* The same input gradient reading the row twice (16-byte loads, the second pass from the
 * caches) instead of keeping it in registers: fewer registers, more warps per SM, and
 * faster on the H200 (d48: 0.088 ms against 0.108 with the colsum, bench/README.md
 * session 34): the default. */
__global__ void layernorm_backward_dinp_reread_kernel(float *dinp, uint16_t *dinp_bf16, const uint16_t *dout,
                                                      const float *inp, const uint16_t *w, const float *mean,
                                                      const float *rstd, int N, int C, int accumulate) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= N)
        return;
    const float4 *x = (const float4 *)(inp + (size_t)row * C);
    const uint2 *dy = (const uint2 *)(dout + (size_t)row * C);
    const uint2 *w4 = (const uint2 *)w;
    int C4 = C / 4;
    float m = mean[row], r = rstd[row], a = 0.0f, an = 0.0f;
    for (int c4 = lane; c4 < C4; c4 += 32) {
        float4 nv, dn;
        ln_bwd_elem(x, dy, w4, c4, m, r, &nv, &dn);
        ln_bwd_add(nv, dn, &a, &an);
    }
    a = warp_sum(a) / C;
    an = warp_sum(an) / C;
    float4 *di = (float4 *)(dinp + (size_t)row * C);
    uint2 *db = dinp_bf16 != NULL ? (uint2 *)(dinp_bf16 + (size_t)row * C) : NULL;
    for (int c4 = lane; c4 < C4; c4 += 32) {
        float4 nv, dn;
        ln_bwd_elem(x, dy, w4, c4, m, r, &nv, &dn);
        ln_bwd_store(di, db, c4, nv, dn, a, an, r, accumulate);
    }
}

/* UVMRT_GPT_LN_BWD=registers: LayerNorm's input gradient keeps each row in registers
 * (for comparison; default: it reads the row twice). Read once per process. */
static int ln_bwd_reread(void) {
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("UVMRT_GPT_LN_BWD");
        v = !(e != NULL && strcmp(e, "registers") == 0);
    }
    return v;
}

__global__ void layernorm_backward_dinp_kernel(float *dinp, uint16_t *dinp_bf16, const uint16_t *dout,
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
        if (dinp_bf16 != NULL)
            bf_store(dinp_bf16, i, dinp[i]);
    }
}

/* The float4 per lane the vector kernels keep for C (0: they do not take it). a16: the
 * pointers read 16 bytes at a time, or'd; a8: those read or written 8 at a time. */
static int ln_vec(int C, uintptr_t a16, uintptr_t a8) {
    if (C % 4 || C > 128 * LN_VEC_MAX || (a16 & 15) || (a8 & 7))
        return 0;
    int nv = (C / 4 + 31) / 32;
    return nv <= 4 ? 4 : nv <= 8 ? 8 : nv <= 12 ? 12 : 16;
}

/* Column sums: partial[chunk][c] over GPT_COLSUM_ROWS rows (32 column groups x 8 row
 * lanes per block, then the 8 lanes in order), then the chunks in order by the last
 * block of each column group (colsum_last_block).
 * Each thread sums VEC adjacent columns (16-byte loads where the width and alignment
 * allow: 8 bf16 or 4 fp32); every column's sum runs in the same order for any VEC, so
 * the vector and scalar kernels give the same bits. */
__device__ __forceinline__ void colsum_last_block(float *out, float *out2, const float *part, const float *part2,
                                                  int nchunks, int OC, int group_cols, int mode2);

template <int MODE, int VEC> /* MODE 0: bf16 dout; 1: fp32 dout; 2: LayerNorm dw (dout*norm) and db */
__global__ void colsum_partial_kernel(float *part, float *part2, const void *dout_,
                                      const float *inp, const float *mean, const float *rstd,
                                      int N, int OC, float *out, float *out2) {
    __shared__ float sh[8][32 * VEC], sh2[MODE == 2 ? 8 : 1][MODE == 2 ? 32 * VEC : 1];
    int c0 = (blockIdx.x * 32 + threadIdx.x) * VEC, chunk = blockIdx.y;
    int r0 = chunk * GPT_COLSUM_ROWS, r1 = min(N, r0 + GPT_COLSUM_ROWS);
    float acc[VEC], acc2[VEC];
#pragma unroll
    for (int k = 0; k < VEC; k++)
        acc[k] = acc2[k] = 0.0f;
    if (c0 < OC)
        for (int r = r0 + threadIdx.y; r < r1; r += 8) {
            size_t i = (size_t)r * OC + c0;
            float d[VEC];
            if (MODE == 1) {
                if (VEC == 4) {
                    float4 q = *(const float4 *)((const float *)dout_ + i);
                    d[0] = q.x, d[1] = q.y, d[2 % VEC] = q.z, d[3 % VEC] = q.w;
                } else {
                    d[0] = ((const float *)dout_)[i];
                }
            } else if (VEC == 8) {
                uint4 q = *(const uint4 *)((const uint16_t *)dout_ + i);
                const bf16 *h = (const bf16 *)&q;
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    d[k] = __bfloat162float(h[k % 8]);
            } else if (VEC == 4) {
                uint2 q = *(const uint2 *)((const uint16_t *)dout_ + i);
                const bf16 *h = (const bf16 *)&q;
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    d[k] = __bfloat162float(h[k % 4]);
            } else {
                d[0] = bf((const uint16_t *)dout_, i);
            }
            if (MODE == 2) {
                float m = mean[r], rs = rstd[r];
                float x[VEC];
                if (VEC == 4) {
                    float4 q = *(const float4 *)(inp + i);
                    x[0] = q.x, x[1 % VEC] = q.y, x[2 % VEC] = q.z, x[3 % VEC] = q.w;
                } else {
                    x[0] = inp[i];
                }
#pragma unroll
                for (int k = 0; k < VEC; k++) {
                    acc[k] += d[k] * ((x[k] - m) * rs);
                    acc2[k] += d[k];
                }
            } else {
#pragma unroll
                for (int k = 0; k < VEC; k++)
                    acc[k] += d[k];
            }
        }
#pragma unroll
    for (int k = 0; k < VEC; k++) {
        sh[threadIdx.y][threadIdx.x * VEC + k] = acc[k];
        if (MODE == 2)
            sh2[threadIdx.y % (MODE == 2 ? 8 : 1)][(threadIdx.x * VEC + k) % (MODE == 2 ? 32 * VEC : 1)] = acc2[k];
    }
    __syncthreads();
    /* the 8 row lanes in order, one column per thread of the block */
    for (int j = threadIdx.y * 32 + threadIdx.x; j < 32 * VEC; j += 256) {
        int c = blockIdx.x * 32 * VEC + j;
        if (c >= OC)
            continue;
        float t = 0.0f, t2 = 0.0f;
        for (int k = 0; k < 8; k++) {
            t += sh[k][j];
            if (MODE == 2)
                t2 += sh2[k % (MODE == 2 ? 8 : 1)][j % (MODE == 2 ? 32 * VEC : 1)];
        }
        part[(size_t)chunk * OC + c] = t;
        if (MODE == 2)
            part2[(size_t)chunk * OC + c] = t2;
    }
    colsum_last_block(out, out2, part, part2, (int)gridDim.y, OC, 32 * VEC, MODE == 2);
}

/* Per column group of colsum_partial_kernel's grid: how many of its chunks' blocks have
 * written their partial sums. The block that finds itself last sums the chunks in order
 * (as a second kernel over the chunks did before: the same bits) and sets its counter back to 0,
 * so that a column sum is one launch. Calls on one stream run one after another, so one
 * set of counters serves them all (gpt_kernels.h: one stream at a time). */
#define COLSUM_GROUPS_MAX 4096
__device__ unsigned colsum_done[COLSUM_GROUPS_MAX];

__device__ __forceinline__ void colsum_last_block(float *out, float *out2, const float *part, const float *part2,
                                                  int nchunks, int OC, int group_cols, int mode2) {
    __shared__ unsigned last;
    __threadfence(); /* this block's partials are visible before it counts itself done */
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
        last = atomicAdd(&colsum_done[blockIdx.x], 1u) == (unsigned)nchunks - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    for (int j = threadIdx.y * blockDim.x + threadIdx.x; j < group_cols; j += blockDim.x * blockDim.y) {
        int c = blockIdx.x * group_cols + j;
        if (c >= OC)
            continue;
        float t = 0.0f, t2 = 0.0f;
        for (int k = 0; k < nchunks; k++) {
            t += ((volatile const float *)part)[(size_t)k * OC + c];
            if (mode2)
                t2 += ((volatile const float *)part2)[(size_t)k * OC + c];
        }
        out[c] = t;
        if (mode2)
            out2[c] = t2;
    }
    if (threadIdx.x == 0 && threadIdx.y == 0)
        colsum_done[blockIdx.x] = 0;
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
    dim3 block(32, 8);
    /* columns per thread: 16 bytes of dout (and of inp) where the rows allow it */
    const int vec = MODE == 0 ? 8 : 4;
    bool wide = OC % vec == 0 && ((uintptr_t)dout & 15) == 0 && (MODE != 2 || ((uintptr_t)inp & 15) == 0);
    if (MODE == 2)
        wide = wide && ((uintptr_t)dout & 7) == 0;
    unsigned groups = ceil_div((size_t)OC, 32 * (wide ? vec : 1));
    if (groups > COLSUM_GROUPS_MAX)
        return (int)cudaErrorInvalidValue;
    if (wide) {
        dim3 grid(groups, (unsigned)nchunks);
        colsum_partial_kernel<MODE, MODE == 0 ? 8 : 4><<<grid, block, 0, s>>>(scratch, part2, dout, inp, mean,
                                                                            rstd, N, OC, out, out2);
    } else {
        dim3 grid(groups, (unsigned)nchunks);
        colsum_partial_kernel<MODE, 1><<<grid, block, 0, s>>>(scratch, part2, dout, inp, mean, rstd, N, OC, out,
                                                             out2);
    }
    return last_error();
}

extern "C" int gpt_layernorm_forward_launch(uint16_t *out, float *mean, float *rstd,
                                            const float *inp, const uint16_t *w,
                                            const uint16_t *b, int N, int C,
                                            uvmrt_stream_t stream) {
    if (N <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned grid = ceil_div((size_t)N, BLOCK / 32);
    switch (ln_vec(C, (uintptr_t)inp, (uintptr_t)out | (uintptr_t)w | (uintptr_t)b)) {
    case 4: layernorm_forward_vec_kernel<4><<<grid, BLOCK, 0, s>>>(out, mean, rstd, inp, w, b, N, C); break;
    case 8: layernorm_forward_vec_kernel<8><<<grid, BLOCK, 0, s>>>(out, mean, rstd, inp, w, b, N, C); break;
    case 12: layernorm_forward_vec_kernel<12><<<grid, BLOCK, 0, s>>>(out, mean, rstd, inp, w, b, N, C); break;
    case 16: layernorm_forward_vec_kernel<16><<<grid, BLOCK, 0, s>>>(out, mean, rstd, inp, w, b, N, C); break;
    default: layernorm_forward_kernel<<<grid, BLOCK, 0, s>>>(out, mean, rstd, inp, w, b, N, C); break;
    }
    return last_error();
}

extern "C" int gpt_layernorm_backward_launch(float *dinp, uint16_t *dinp_bf16, float *dw, float *db, float *scratch,
                                             const uint16_t *dout, const float *inp,
                                             const uint16_t *w, const float *mean,
                                             const float *rstd, int N, int C, int accumulate,
                                             uvmrt_stream_t stream) {
    if (N <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned grid = ceil_div((size_t)N, BLOCK / 32);
    int nv = ln_vec(C, (uintptr_t)inp | (uintptr_t)dinp, (uintptr_t)dout | (uintptr_t)w | (uintptr_t)dinp_bf16);
    if (nv > 0 && ln_bwd_reread()) {
        layernorm_backward_dinp_reread_kernel<<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate);
        return colsum<2>(dw, db, scratch, dout, inp, mean, rstd, N, C, s);
    }
    switch (nv) {
    case 4: layernorm_backward_dinp_vec_kernel<4><<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate); break;
    case 8: layernorm_backward_dinp_vec_kernel<8><<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate); break;
    case 12: layernorm_backward_dinp_vec_kernel<12><<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate); break;
    case 16: layernorm_backward_dinp_vec_kernel<16><<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate); break;
    default:
        layernorm_backward_dinp_kernel<<<grid, BLOCK, 0, s>>>(dinp, dinp_bf16, dout, inp, w, mean, rstd, N, C, accumulate);
        break;
    }
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

/* one thread per 4 columns, looping over rows (no division per element) */
__global__ void residual_bias_vec_kernel(float4 *out, const float4 *inp, const uint2 *bias, int N, int C4) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= C4)
        return;
    uint2 q = bias[j];
    float2 b0 = __bfloat1622float2(*(__nv_bfloat162 *)&q.x), b1 = __bfloat1622float2(*(__nv_bfloat162 *)&q.y);
    for (int row = blockIdx.y; row < N; row += gridDim.y) {
        float4 x = inp[(size_t)row * C4 + j];
        out[(size_t)row * C4 + j] = make_float4(x.x + b0.x, x.y + b0.y, x.z + b1.x, x.w + b1.y);
    }
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
    if (N <= 0 || C <= 0)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    if (C % 4 == 0 && (((uintptr_t)out | (uintptr_t)inp) & 15) == 0 && ((uintptr_t)bias & 7) == 0) {
        unsigned rows = (unsigned)(N < 2048 ? N : 2048);
        residual_bias_vec_kernel<<<dim3(ceil_div((size_t)C / 4, BLOCK), rows), BLOCK, 0, s>>>(
            (float4 *)out, (const float4 *)inp, (const uint2 *)bias, N, C / 4);
    } else {
        residual_bias_kernel<<<grid_for((size_t)N * C), BLOCK, 0, s>>>(out, inp, bias, N, C);
    }
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

__global__ void bf16_to_f32_kernel(float *out, const uint16_t *in, size_t n) {
    GRID_STRIDE(i, n)
        out[i] = bf(in, i);
}

extern "C" int gpt_bf16_to_f32_launch(float *out, const uint16_t *in, size_t n, uvmrt_stream_t stream) {
    if (n == 0)
        return (int)cudaErrorInvalidValue;
    bf16_to_f32_kernel<<<grid_for(n), BLOCK, 0, (cudaStream_t)stream>>>(out, in, n);
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
 * attention, head size 64 (HS, LOG2E, LN2: gpt_kernels_common.cuh) */

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

/* The trainer's attention: the mma.sync kernels (they passed gpt-gpu-check --attn
 * on the H200, 2026-12-01: forward 165-190, backward 156-184 TFLOP/s at T = 1024-2048,
 * against 15 and 13 for WMMA). */
extern "C" int gpt_attention_forward_launch(uint16_t *out, float *lse, const uint16_t *qkv,
                                            int B, int T, int C, int NH, uvmrt_stream_t stream) {
    return gpt_attention_forward_mma_launch(out, lse, qkv, B, T, C, NH, stream);
}

extern "C" int gpt_attention_backward_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                             const uint16_t *out, const uint16_t *qkv,
                                             const float *lse, int B, int T, int C, int NH,
                                             uvmrt_stream_t stream) {
    return gpt_attention_backward_mma_launch(dqkv, delta, dout, out, qkv, lse, B, T, C, NH,
                                             stream);
}

/* ----------------------------------------------------------------------------
 * classifier: cross-entropy of a chunk of rows, dlogits in place */

#define CE_THREADS 512

/* A row's max M and sum S of exp(x - M) from each thread's online (m, s): the lanes of a
 * warp, then the warps in order (the same order for every row: the same bits). */
__device__ __forceinline__ void ce_row_max_sum(float m, float s, float *M_out, float *S_out) {
    __shared__ float shm[CE_THREADS / 32], shs[CE_THREADS / 32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        float mn = fmaxf(m, m2);
        s = (m == -INFINITY ? 0.0f : s * __expf(m - mn)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mn));
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
    *M_out = M;
    *S_out = S;
}

__global__ __launch_bounds__(CE_THREADS) void crossentropy_scalar_kernel(uint16_t *logits,
                                                                  float *losses,
                                                                  const int *targets, int V,
                                                                  int Vp, float dscale) {
    int row = blockIdx.x;
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
    float M, S;
    ce_row_max_sum(m, s, &M, &S);
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

/* The same row job with 16-byte loads and stores (8 logits a thread at a time; Vp % 8 ==
 * 0 and 16-byte aligned rows): each thread's online max and sum take 8 logits a step.
 * The second pass runs from the row's end, whose lines were read last (likelier still in
 * L2). A block a row: fewer blocks walking the rows (2-4 an SM, so that the rows read
 * twice fit L2) were 5-15% slower on the H200 (bench/README.md, session 35). */
__global__ __launch_bounds__(CE_THREADS) void crossentropy_kernel(uint16_t *logits, float *losses,
                                                                  const int *targets, int V, int Vp,
                                                                  float dscale) {
    int row = blockIdx.x, V8 = Vp / 8;
    uint4 *l8 = (uint4 *)(logits + (size_t)row * Vp);
    float m = -INFINITY, s = 0.0f;
    for (int j = threadIdx.x; j < V8; j += CE_THREADS) {
        uint4 q = l8[j];
        const bf16 *h = (const bf16 *)&q;
        float x[8], mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            x[k] = 8 * j + k < V ? __bfloat162float(h[k]) : -INFINITY;
            mx = fmaxf(mx, x[k]);
        }
        if (mx > m) {
            s = m == -INFINITY ? 0.0f : s * __expf(m - mx);
            m = mx;
        }
        if (m != -INFINITY) {
#pragma unroll
            for (int k = 0; k < 8; k++)
                s += __expf(x[k] - m);
        }
    }
    float M, S;
    ce_row_max_sum(m, s, &M, &S);
    int tgt = targets[row];
    float lt = __bfloat162float(((const bf16 *)l8)[tgt]);
    __syncthreads(); /* everyone has read l[tgt] before it is overwritten */
    if (threadIdx.x == 0)
        losses[row] = logf(S) + M - lt;
    float inv = 1.0f / S;
    for (int j = V8 - 1 - threadIdx.x; j >= 0; j -= CE_THREADS) {
        uint4 q = l8[j];
        bf16 *h = (bf16 *)&q;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            int c = 8 * j + k;
            float p = c < V ? __expf(__bfloat162float(h[k]) - M) * inv : 0.0f;
            h[k] = __float2bfloat16_rn((p - (c == tgt ? 1.0f : 0.0f)) * dscale);
        }
        l8[j] = q;
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
    if (((uintptr_t)logits & 15) == 0)
        crossentropy_kernel<<<R, CE_THREADS, 0, (cudaStream_t)stream>>>(logits, losses, targets, V, Vp, dscale);
    else
        crossentropy_scalar_kernel<<<R, CE_THREADS, 0, (cudaStream_t)stream>>>(logits, losses, targets, V, Vp,
                                                                               dscale);
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
    if (((uintptr_t)g & 15) == 0) { /* 16-byte loads, then the last n % 4 */
        const float4 *g4 = (const float4 *)g;
        GRID_STRIDE(i, n / 4) {
            float4 q = g4[i];
            double a = q.x, b = q.y, c = q.z, d = q.w;
            s += a * a;
            s += b * b;
            s += c * c;
            s += d * d;
        }
        size_t i = (n / 4) * 4 + (size_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            double x = g[i];
            s += x * x;
        }
    } else {
        GRID_STRIDE(i, n) {
            double x = g[i];
            s += x * x;
        }
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
