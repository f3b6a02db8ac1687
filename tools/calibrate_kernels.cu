/*
 * calibrate_kernels.cu -- streaming read/write and random fill for uvmrt-calibrate.
 *
 * Grid-stride loops over 16-byte vectors with enough blocks in flight (16 per SM,
 * 512 threads) that a read over the link (remote mapping, demand faults) keeps
 * many requests outstanding, as a real layer's kernel does.
 */
#include "calibrate_kernels.h"

static const int THREADS = 512;
static const int BLOCKS_PER_SM = 16;

__global__ void read_kernel(const uint4 *p, size_t n, unsigned long long *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = acc; /* keeps the loads; practically never true */
}

__global__ void write_kernel(uint4 *p, size_t n, unsigned value) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = make_uint4(value, value ^ (unsigned)i, value, value);
}

/* A 32-bit integer hash (lowbias32): good enough to decorrelate GEMM inputs. */
__device__ unsigned hash32(unsigned x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

__global__ void fill_bf16_kernel(uint16_t *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float u = (float)(hash32((unsigned)i ^ hash32(seed + (unsigned)(i >> 32))) >> 8) * (1.0f / 8388608.0f) - 1.0f;
        unsigned bits = __float_as_uint(u);
        p[i] = (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16); /* round to nearest even */
    }
}

static int grid_of(size_t n, int sms) {
    size_t want = (n + THREADS - 1) / THREADS, cap = (size_t)(sms > 0 ? sms : 1) * BLOCKS_PER_SM;
    return (int)(want < cap ? (want > 0 ? want : 1) : cap);
}

extern "C" cudaError_t calib_read(const void *p, size_t bytes, unsigned long long *sink, int sms, cudaStream_t s) {
    if (bytes % 16 != 0) return cudaErrorInvalidValue;
    size_t n = bytes / 16;
    read_kernel<<<grid_of(n, sms), THREADS, 0, s>>>((const uint4 *)p, n, sink);
    return cudaGetLastError();
}

extern "C" cudaError_t calib_write(void *p, size_t bytes, unsigned value, int sms, cudaStream_t s) {
    if (bytes % 16 != 0) return cudaErrorInvalidValue;
    size_t n = bytes / 16;
    write_kernel<<<grid_of(n, sms), THREADS, 0, s>>>((uint4 *)p, n, value);
    return cudaGetLastError();
}

extern "C" cudaError_t calib_fill_bf16(uint16_t *p, size_t n, unsigned seed, int sms, cudaStream_t s) {
    fill_bf16_kernel<<<grid_of(n, sms), THREADS, 0, s>>>(p, n, seed);
    return cudaGetLastError();
}
