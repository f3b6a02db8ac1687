/*
 * adamw_kernel.cu -- the GPU kernel of uvmrt_adamw_gpu(3) (src/api/adamw.c checks the
 * arguments and calls uvmrt__adamw_gpu_launch).
 *
 * One pass over the arrays: each element is read once (w, m, v, g) and written once (w,
 * m, v and the bf16 copy), so arrays that live in host memory (host-homed managed memory
 * or mapped pinned memory) cross the link once each way; 16-byte loads and stores where
 * every array allows them, because remote accesses over the link need many large
 * requests in flight. The element update is adamw_math.h's, the same bits as
 * uvmrt_adamw_cpu.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "adamw_math.h" /* defines: uvmrt__adamw_coef_t, uvmrt__adamw_elem(_torch), uvmrt__f32_to_bf16 */

extern "C" int uvmrt__adamw_gpu_launch(int torch_order, const uvmrt__adamw_coef_t *coef, float *w,
                                       float *m, float *v, const float *g, size_t n,
                                       uint16_t *half_out, const float *scale_dev, void *stream);

namespace {

template <bool TORCH>
__device__ __forceinline__ void elem(float *w, float *m, float *v, float g, const uvmrt__adamw_coef_t &c) {
    if (TORCH)
        uvmrt__adamw_elem_torch(w, m, v, g, &c);
    else
        uvmrt__adamw_elem(w, m, v, g, &c);
}

/* The gradient's factor: hp->grad_scale, or the float the caller's device pointer holds
 * (a clip coefficient computed on the GPU: no synchronisation to read it). */
__device__ __forceinline__ uvmrt__adamw_coef_t with_scale(uvmrt__adamw_coef_t c, const float *scale_dev) {
    if (scale_dev != nullptr)
        c.inv_scale = *scale_dev;
    return c;
}

template <bool TORCH>
__global__ void adamw_vec4(float4 *w, float4 *m, float4 *v, const float4 *g, uint2 *half, size_t n4,
                           uvmrt__adamw_coef_t c0, const float *scale_dev) {
    const uvmrt__adamw_coef_t c = with_scale(c0, scale_dev);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        float4 wv = w[i], mv = m[i], vv = v[i], gv = g[i];
        elem<TORCH>(&wv.x, &mv.x, &vv.x, gv.x, c);
        elem<TORCH>(&wv.y, &mv.y, &vv.y, gv.y, c);
        elem<TORCH>(&wv.z, &mv.z, &vv.z, gv.z, c);
        elem<TORCH>(&wv.w, &mv.w, &vv.w, gv.w, c);
        w[i] = wv;
        m[i] = mv;
        v[i] = vv;
        if (half != nullptr) {
            uint2 h;
            h.x = (uint32_t)uvmrt__f32_to_bf16(wv.x) | ((uint32_t)uvmrt__f32_to_bf16(wv.y) << 16);
            h.y = (uint32_t)uvmrt__f32_to_bf16(wv.z) | ((uint32_t)uvmrt__f32_to_bf16(wv.w) << 16);
            half[i] = h;
        }
    }
}

template <bool TORCH>
__global__ void adamw_scalar(float *w, float *m, float *v, const float *g, uint16_t *half, size_t n,
                             uvmrt__adamw_coef_t c0, const float *scale_dev) {
    const uvmrt__adamw_coef_t c = with_scale(c0, scale_dev);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float wi = w[i], mi = m[i], vi = v[i];
        elem<TORCH>(&wi, &mi, &vi, g[i], c);
        w[i] = wi;
        m[i] = mi;
        v[i] = vi;
        if (half != nullptr)
            half[i] = uvmrt__f32_to_bf16(wi);
    }
}

bool aligned(const void *p, uintptr_t a) { return p == nullptr || ((uintptr_t)p % a) == 0; }

/* Whether p lives in host memory: mapped pinned memory, or managed memory whose preferred
 * location is the CPU (a host-homed uvmrt tensor). A failed query: no (and not this
 * call's error). */
bool in_host_memory(const void *p) {
    if (p == nullptr)
        return false;
    cudaPointerAttributes a;
    bool host = false;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess) {
        if (a.type == cudaMemoryTypeHost) {
            host = true;
        } else if (a.type == cudaMemoryTypeManaged) {
            int loc = 0;
            host = cudaMemRangeGetAttribute(&loc, sizeof loc, cudaMemRangeAttributePreferredLocation, p, 1) ==
                       cudaSuccess &&
                   loc == cudaCpuDeviceId;
        }
    }
    cudaGetLastError();
    return host;
}

/* How many blocks a pass over host memory may take (UVMRT_ADAMW_LINK_BLOCKS, read at each
 * call; default an eighth of the SMs, 4 to 16: 16 on the H200). A kernel whose loads
 * wait on the link holds its SMs for as long as they wait: with a full grid, every SM,
 * so that the kernels queued on other streams (the backward, the next forward) wait
 * behind it (bench/probes/copy_contention.py: a chain of small kernels 4.57x slower
 * beside the full grid, 1.49x beside 16 blocks, which still move 2.97 Gparam/s against
 * the full grid's 2.61). Each block keeps 16 KiB in flight: 4 fill a PCIe 4 link. */
unsigned link_blocks(int sms) {
    const char *e = getenv("UVMRT_ADAMW_LINK_BLOCKS");
    char *end = nullptr;
    long b = e != nullptr ? strtol(e, &end, 10) : 0;
    if (e != nullptr && end != e && *end == '\0' && b > 0 && b <= 65535)
        return (unsigned)b;
    int d = sms / 8;
    return (unsigned)(d < 4 ? 4 : d > 16 ? 16 : d);
}

unsigned grid_for(size_t items, int threads, bool remote) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 32;
    cudaGetLastError(); /* an attribute query's failure is not this call's error */
    size_t want = (items + (size_t)threads - 1) / (size_t)threads;
    size_t cap = remote ? (size_t)link_blocks(sms) : (size_t)sms * 8;
    return (unsigned)(want < cap ? (want > 0 ? want : 1) : cap);
}

template <bool TORCH>
cudaError_t launch(const uvmrt__adamw_coef_t &c, float *w, float *m, float *v, const float *g, size_t n,
                   uint16_t *half, const float *scale_dev, cudaStream_t s) {
    const int threads = 256;
    size_t n4 = n / 4, tail = n - n4 * 4;
    bool remote = in_host_memory(w) || in_host_memory(m) || in_host_memory(v) || in_host_memory(g) ||
                  in_host_memory(half);
    bool vec = aligned(w, 16) && aligned(m, 16) && aligned(v, 16) && aligned(g, 16) && aligned(half, 8);
    if (vec && n4 > 0) {
        adamw_vec4<TORCH><<<grid_for(n4, threads, remote), threads, 0, s>>>(
            (float4 *)w, (float4 *)m, (float4 *)v, (const float4 *)g, (uint2 *)half, n4, c, scale_dev);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess || tail == 0)
            return e;
        size_t o = n4 * 4;
        adamw_scalar<TORCH><<<1, threads, 0, s>>>(w + o, m + o, v + o, g + o, half ? half + o : nullptr, tail, c,
                                                   scale_dev);
        return cudaGetLastError();
    }
    adamw_scalar<TORCH><<<grid_for(n, threads, remote), threads, 0, s>>>(w, m, v, g, half, n, c, scale_dev);
    return cudaGetLastError();
}

} // namespace

/* Returns the cudaError_t of the launch (0: queued). */
extern "C" int uvmrt__adamw_gpu_launch(int torch_order, const uvmrt__adamw_coef_t *coef, float *w,
                                       float *m, float *v, const float *g, size_t n,
                                       uint16_t *half_out, const float *scale_dev, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = torch_order ? launch<true>(*coef, w, m, v, g, n, half_out, scale_dev, s)
                                : launch<false>(*coef, w, m, v, g, n, half_out, scale_dev, s);
    return (int)e;
}

extern "C" const char *uvmrt__adamw_gpu_error_string(int err) {
    return cudaGetErrorString((cudaError_t)err);
}
