/*
 * gpt_gpu.h -- uvmrt-gpt's GPU setup: the stream, cuBLAS and its matmuls, pinned
 * host memory, and the CPU optimizer thread (--optimizer-on cpu).
 *
 * The model code in gpt.c calls these and the kernel launchers without #ifdef:
 * in a build without CUDA and cuBLAS they exist and fail (gpt_gpu_built() is 0),
 * and gpt.c never calls them then (it runs the schedule on the sim backend).
 * Functions returning const char * return NULL on success, else a static message.
 */
#ifndef UVMRT_GPT_GPU_H
#define UVMRT_GPT_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

#include "../mlp/adamw_cpu.h"
#include "../mlp/mlp_math.h"

typedef struct gpt_gpu gpt_gpu_t;

/* 1 when this build has CUDA and cuBLAS. */
int gpt_gpu_built(void);
/* The stream, a cuBLAS handle on it with a fixed workspace (cuBLAS then picks the
 * same kernels every run: reproducible). NULL with a message in err on failure. */
gpt_gpu_t *gpt_gpu_open(char *err, size_t errlen);
void gpt_gpu_close(gpt_gpu_t *g);
uvmrt_stream_t gpt_gpu_stream(const gpt_gpu_t *g);
/* Bytes cudaMalloc'd beside uvmrt's tensors (the cuBLAS workspace). */
uint64_t gpt_gpu_device_bytes(const gpt_gpu_t *g);
/* Free and total device memory and the device ordinal. */
const char *gpt_gpu_mem_info(uint64_t *free_bytes, uint64_t *total_bytes, int *device);
/* "cudaErrorX: text" for a launcher's return value. */
const char *gpt_gpu_error_text(int err);

/* Row-major matmuls, bf16 inputs, fp32 accumulation (CUBLAS_COMPUTE_32F):
 * forward:  out (N,OC) = beta*out + inp (N,K) . w^T, w (OC,K); out bf16, or fp32
 *           when out_f32 (beta 1 adds to a bias or residual already in out);
 * dinp:     dinp (N,K) bf16 = dout (N,OC) . w;
 * dweight:  dw (OC,K) fp32 = beta*dw + dout^T . inp. */
const char *gpt_mm_forward(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp,
                           const uint16_t *w, int N, int K, int OC, float beta);
const char *gpt_mm_dinp(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w,
                        int N, int K, int OC);
const char *gpt_mm_dweight(gpt_gpu_t *g, float *dw, const uint16_t *dout, const uint16_t *inp,
                           int N, int K, int OC, float beta);

/* Asynchronous copy on the stream (host memory should be pinned). */
const char *gpt_gpu_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes);
/* Waits for the stream. */
const char *gpt_gpu_sync(gpt_gpu_t *g);
/* Pinned, mapped host memory (the GPU writes losses and norms into it); NULL on failure. */
void *gpt_gpu_host_alloc(size_t bytes);
void gpt_gpu_host_free(void *p);

/* ----------------------------------------------------------------------------
 * the CPU optimizer: one thread updating every layer with adamw_cpu.c's AdamW once
 * a step's backward has finished (global-norm clipping needs every gradient), in
 * forward order, so forward i of the next step can start as soon as layer i is done. */

typedef struct gpt_cpuopt gpt_cpuopt_t;

typedef struct gpt_cpuopt_layer {
    float *w, *m, *v, *g; /* (n,) fp32: master, moments, gradient (host memory) */
    uint16_t *wh;         /* (n,) bf16 working copy (managed) */
    size_t n, n_decay;    /* elements [0, n_decay) get weight decay */
} gpt_cpuopt_layer_t;

/* clip_host: mapped host memory where the GPU writes {norm, clip factor}. */
gpt_cpuopt_t *gpt_cpuopt_start(int nlayers, const gpt_cpuopt_layer_t *layers, mlp_isa_t isa,
                               const float *clip_host, char *err, size_t errlen);
/* After step s's last backward call: records an event on the stream; the thread
 * waits for it, then updates every layer with these coefficients (inv_scale is
 * replaced by the clip factor). */
const char *gpt_cpuopt_submit(gpt_cpuopt_t *c, gpt_gpu_t *g, int step,
                              const mlp_adamw_coef_t *decay, const mlp_adamw_coef_t *no_decay);
/* Waits until layer i's update of step s is done; -1 when the thread failed. */
int gpt_cpuopt_wait(gpt_cpuopt_t *c, int layer, int step);
/* Seconds the thread spent in AdamW. */
double gpt_cpuopt_busy_s(const gpt_cpuopt_t *c);
void gpt_cpuopt_stop(gpt_cpuopt_t *c);

#endif
