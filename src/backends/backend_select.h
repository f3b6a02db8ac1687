/*
 * backend_select.h -- which backend a context opens: UVMRT_BACKEND=auto (the
 * default) becomes cuda when a usable GPU is found and sim otherwise, with one
 * notice saying why; an explicit cuda without a GPU is an error that says how
 * to get sim.
 */
#ifndef UVMRT_BACKEND_SELECT_H
#define UVMRT_BACKEND_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "log.h"
#include "settings.h"
#include "uvmrt.h"

/* What a look for a usable GPU found (the reasons auto falls back to sim). */
typedef enum uvmrt_gpu_probe {
    UVMRT_GPU_USABLE = 0,
    UVMRT_GPU_NO_CUDA_BUILD,   /* this build of uvmrt has no CUDA backend */
    UVMRT_GPU_NO_DRIVER,       /* the CUDA runtime finds no (new enough) driver */
    UVMRT_GPU_NO_DEVICE,       /* a driver, but no CUDA device, or another runtime error */
    UVMRT_GPU_NO_CONCURRENT    /* the device lacks concurrent managed access */
} uvmrt_gpu_probe_t;

/* Looks for device `device`; why (n bytes) says what was found, e.g.
 * "cudaGetDeviceCount: cudaErrorInsufficientDriver (...)". A device ordinal
 * beyond the device count counts as usable here: opening it then fails with
 * its own error (UVMRT_ERR_INVALID), not a silent fallback. */
uvmrt_gpu_probe_t uvmrt__gpu_probe(int device, char *why, size_t n);

/* The name (as cudaGetDeviceProperties gives it, n bytes) and memory of device
 * `device`: 0, or -1 with why (why_n bytes) naming the failed call. */
int uvmrt__gpu_identity(int device, char *name, size_t n, uint64_t *memory_bytes, char *why, size_t why_n);

/* Resolves cfg->backend (AUTO -> CUDA or SIM, and then cfg->backend_auto = 1)
 * for device cfg->device and, when *ops is NULL, sets *ops to that backend's
 * table. *ops given (tests wrapping a backend): only AUTO is resolved, to SIM,
 * and no GPU is looked for. UVMRT_ERR_NO_DEVICE, with an error-level message,
 * for an explicit cuda that cannot be had. Nothing is changed on failure. */
uvmrt_status_t uvmrt__backend_select(uvmrt_config_t *cfg, const uvmrt_log_t *log,
                                     const uvmrt_backend_ops_t **ops);

#endif
