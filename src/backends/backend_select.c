/*
 * backend_select.c -- UVMRT_BACKEND=auto|cuda|sim into a backend table.
 *
 * Looking for a GPU before opening the cuda backend lets auto fall back with
 * exactly one notice (cuda_open would log its own failure first), and lets an
 * explicit cuda say what was found instead of only "no device".
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>

#include "backend_select.h"

#ifdef UVMRT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

uvmrt_gpu_probe_t uvmrt__gpu_probe(int device, char *why, size_t n)
{
#ifndef UVMRT_HAVE_CUDA
    (void)device;
    snprintf(why, n, "this build of uvmrt has no CUDA support (configured without CUDA)");
    return UVMRT_GPU_NO_CUDA_BUILD;
#else
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
        snprintf(why, n, "no usable NVIDIA driver: cudaGetDeviceCount gave %s (%s)", cudaGetErrorName(err),
                 cudaGetErrorString(err));
        return UVMRT_GPU_NO_DRIVER;
    }
    if (err != cudaSuccess || count <= 0) {
        if (err == cudaSuccess)
            snprintf(why, n, "no CUDA device: cudaGetDeviceCount found 0 devices");
        else
            snprintf(why, n, "no CUDA device: cudaGetDeviceCount gave %s (%s)", cudaGetErrorName(err),
                     cudaGetErrorString(err));
        return UVMRT_GPU_NO_DEVICE;
    }
    if (device >= count) {
        snprintf(why, n, "%d CUDA device(s)", count);
        return UVMRT_GPU_USABLE;
    }
    int concurrent = 0;
    err = cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device);
    if (err != cudaSuccess) {
        snprintf(why, n, "device %d: cudaDeviceGetAttribute(ConcurrentManagedAccess) gave %s (%s)", device,
                 cudaGetErrorName(err), cudaGetErrorString(err));
        return UVMRT_GPU_NO_DEVICE;
    }
    if (!concurrent) {
        snprintf(why, n, "device %d has no concurrent managed access (Windows, WSL2 and Jetson lack it), "
                         "which prefetch and oversubscription need", device);
        return UVMRT_GPU_NO_CONCURRENT;
    }
    snprintf(why, n, "device %d of %d", device, count);
    return UVMRT_GPU_USABLE;
#endif
}

int uvmrt__gpu_identity(int device, char *name, size_t n, uint64_t *memory_bytes, char *why, size_t why_n)
{
#ifndef UVMRT_HAVE_CUDA
    (void)device;
    (void)name;
    (void)n;
    (void)memory_bytes;
    snprintf(why, why_n, "this build of uvmrt has no CUDA support");
    return -1;
#else
    struct cudaDeviceProp prop;
    cudaError_t err = cudaGetDeviceProperties(&prop, device);
    if (err != cudaSuccess) {
        snprintf(why, why_n, "cudaGetDeviceProperties(%d) gave %s (%s)", device, cudaGetErrorName(err),
                 cudaGetErrorString(err));
        return -1;
    }
    snprintf(name, n, "%s", prop.name);
    *memory_bytes = (uint64_t)prop.totalGlobalMem;
    return 0;
#endif
}

uvmrt_status_t uvmrt__backend_select(uvmrt_config_t *cfg, const uvmrt_log_t *log,
                                     const uvmrt_backend_ops_t **ops)
{
    if (cfg->backend == UVMRT_BACKEND_AUTO && *ops != NULL) {
        cfg->backend = UVMRT_BACKEND_SIM;
        cfg->backend_auto = 1;
        return UVMRT_OK;
    }
    if (*ops != NULL) return UVMRT_OK;
    if (cfg->backend == UVMRT_BACKEND_SIM) {
        *ops = &uvmrt__backend_sim;
        return UVMRT_OK;
    }
    char why[256];
    uvmrt_gpu_probe_t found = uvmrt__gpu_probe(cfg->device, why, sizeof why);
    if (cfg->backend == UVMRT_BACKEND_CUDA) {
        /* No concurrent managed access: cuda_open says what that means
         * (UVMRT_ERR_UNSUPPORTED); only "no GPU at all" is decided here. */
        if (found == UVMRT_GPU_USABLE || found == UVMRT_GPU_NO_CONCURRENT) {
            *ops = uvmrt__backend_cuda_ptr;
            return UVMRT_OK;
        }
        LOG_ERROR(log, "backend cuda: no usable GPU: %s; set UVMRT_BACKEND=sim (or params.backend = "
                       "UVMRT_BACKEND_SIM) to run on the sim model of a GPU, or UVMRT_BACKEND=auto to "
                       "fall back to it when no GPU is found",
                  why);
        return UVMRT_ERR_NO_DEVICE;
    }
    cfg->backend_auto = 1;
    if (found == UVMRT_GPU_USABLE) {
        LOG_INFO(log, "backend auto: cuda (%s)", why);
        cfg->backend = UVMRT_BACKEND_CUDA;
        *ops = uvmrt__backend_cuda_ptr;
        return UVMRT_OK;
    }
    LOG_WARN(log, "backend auto: running on sim, a model of a GPU (no real GPU work is done): %s; "
                  "set UVMRT_BACKEND=sim to choose it without this notice",
             why);
    cfg->backend = UVMRT_BACKEND_SIM;
    *ops = &uvmrt__backend_sim;
    return UVMRT_OK;
}
