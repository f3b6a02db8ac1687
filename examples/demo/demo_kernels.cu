/*
 * demo_kernels.cu -- uvmrt-demo's layer kernels and checksum, for the GPU.
 *
 * Elementwise float32 over n elements, as float4 (16-byte loads and stores), in
 * grid-stride loops. `work` passes each sweep the whole of the layer's data again,
 * rereading the inputs and rewriting the outputs, to emulate a compute-heavier layer
 * while leaving the result as it is for one pass. The formulas are those of
 * demo_cpu.c (demo.h lists them); launchers are at the end.
 */
#include <cuda_runtime.h>

#include "demo_kernels.h"

/* ----------------------------------------------------------------------------
 * helpers */

static const int BLOCK = 256;       /* threads per block */
static const size_t MAX_GRID = 4096; /* blocks; grid-stride loops cover the rest */

static unsigned int grid_for(size_t n4) {
    size_t blocks = (n4 + BLOCK - 1) / BLOCK;
    return (unsigned int)(blocks < MAX_GRID ? (blocks > 0 ? blocks : 1) : MAX_GRID);
}

static int aligned16(const void *p) {
    return ((size_t)p & 15u) == 0;
}

/* Hides a value from the compiler: it must compute it, and cannot prove that a
 * store of it rewrites what was loaded (so the store really happens). */
__device__ __forceinline__ float opaque(float x) {
    asm volatile("" : "+f"(x));
    return x;
}
__device__ __forceinline__ float4 opaque4(float4 v) {
    return make_float4(opaque(v.x), opaque(v.y), opaque(v.z), opaque(v.w));
}

/* ----------------------------------------------------------------------------
 * kernels */

/* a = 0.5*a_prev + 0.5*w.  No __restrict__: every pass must reread its inputs. */
__global__ void forward_kernel(float4 *a, const float4 *a_prev, const float4 *w, size_t n4,
                               int work) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int pass = 0; pass < work; pass++) {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
            float4 x = a_prev[i], y = w[i];
            a[i] = make_float4(0.5f * x.x + 0.5f * y.x, 0.5f * x.y + 0.5f * y.y,
                               0.5f * x.z + 0.5f * y.z, 0.5f * x.w + 0.5f * y.w);
        }
    }
}

/* g = 0.5*g_next + 0.25*a*w */
__global__ void backward_kernel(float4 *g, const float4 *g_next, const float4 *a,
                                const float4 *w, size_t n4, int work) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int pass = 0; pass < work; pass++) {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
            float4 t = g_next[i], x = a[i], y = w[i];
            g[i] = make_float4(0.5f * t.x + 0.25f * x.x * y.x, 0.5f * t.y + 0.25f * x.y * y.y,
                               0.5f * t.z + 0.25f * x.z * y.z, 0.5f * t.w + 0.25f * x.w * y.w);
        }
    }
}

/* o = 0.9*o + 0.1*g; w = w - 0.01*o. The update is in place, so it may be applied
 * only once: passes before the last compute it, then write back what they read. A
 * thread visits the same elements in every pass, so no other thread sees a mix. */
__global__ void optimizer_kernel(float4 *w, float4 *o, const float4 *g, size_t n4, int work) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int pass = 0; pass < work; pass++) {
        int last = pass == work - 1;
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
            float4 m = o[i], d = g[i], p = w[i];
            float4 m2 = make_float4(0.9f * m.x + 0.1f * d.x, 0.9f * m.y + 0.1f * d.y,
                                    0.9f * m.z + 0.1f * d.z, 0.9f * m.w + 0.1f * d.w);
            float4 p2 = make_float4(p.x - 0.01f * m2.x, p.y - 0.01f * m2.y,
                                    p.z - 0.01f * m2.z, p.w - 0.01f * m2.w);
            if (last) {
                o[i] = m2;
                w[i] = p2;
            } else {
                opaque4(m2);
                opaque4(p2);
                o[i] = opaque4(m);
                w[i] = opaque4(p);
            }
        }
    }
}

/* *sum += sum of the 32-bit words: per-thread sums, a warp-shuffle and shared-memory
 * block reduction, one atomicAdd per block. Integer sums: the order does not matter. */
__global__ void checksum_kernel(const uint4 *data, size_t n4, unsigned long long *sum) {
    __shared__ unsigned long long warp_sums[32];
    size_t stride = (size_t)gridDim.x * blockDim.x;
    unsigned long long s = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        uint4 v = data[i];
        s += (unsigned long long)v.x + v.y + v.z + v.w;
    }
    for (int off = 16; off > 0; off /= 2)
        s += __shfl_down_sync(0xffffffffu, s, off);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
        warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < (int)(blockDim.x / 32) ? warp_sums[lane] : 0;
        for (int off = 16; off > 0; off /= 2)
            s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0)
            atomicAdd(sum, s);
    }
}

/* ----------------------------------------------------------------------------
 * launchers */

extern "C" int demo_forward_launch(float *a, const float *a_prev, const float *w, size_t n,
                                   int work, uvmrt_stream_t stream) {
    if (n % 4 || work < 1 || !aligned16(a) || !aligned16(a_prev) || !aligned16(w))
        return (int)cudaErrorInvalidValue;
    size_t n4 = n / 4;
    forward_kernel<<<grid_for(n4), BLOCK, 0, (cudaStream_t)stream>>>(
        (float4 *)a, (const float4 *)a_prev, (const float4 *)w, n4, work);
    return (int)cudaGetLastError();
}

extern "C" int demo_backward_launch(float *g, const float *g_next, const float *a,
                                    const float *w, size_t n, int work, uvmrt_stream_t stream) {
    if (n % 4 || work < 1 || !aligned16(g) || !aligned16(g_next) || !aligned16(a) ||
        !aligned16(w))
        return (int)cudaErrorInvalidValue;
    size_t n4 = n / 4;
    backward_kernel<<<grid_for(n4), BLOCK, 0, (cudaStream_t)stream>>>(
        (float4 *)g, (const float4 *)g_next, (const float4 *)a, (const float4 *)w, n4, work);
    return (int)cudaGetLastError();
}

extern "C" int demo_optimizer_launch(float *w, float *o, const float *g, size_t n, int work,
                                     uvmrt_stream_t stream) {
    if (n % 4 || work < 1 || !aligned16(w) || !aligned16(o) || !aligned16(g))
        return (int)cudaErrorInvalidValue;
    size_t n4 = n / 4;
    optimizer_kernel<<<grid_for(n4), BLOCK, 0, (cudaStream_t)stream>>>(
        (float4 *)w, (float4 *)o, (const float4 *)g, n4, work);
    return (int)cudaGetLastError();
}

extern "C" int demo_checksum_launch(const void *data, size_t bytes, unsigned long long *sum,
                                    uvmrt_stream_t stream) {
    if (bytes % 16 || !aligned16(data) || sum == NULL)
        return (int)cudaErrorInvalidValue;
    size_t n4 = bytes / 16;
    checksum_kernel<<<grid_for(n4), BLOCK, 0, (cudaStream_t)stream>>>(
        (const uint4 *)data, n4, sum);
    return (int)cudaGetLastError();
}
