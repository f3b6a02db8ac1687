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


typedef struct gpt_gpu gpt_gpu_t;

/* 1 when this build has CUDA and cuBLAS. */
int gpt_gpu_built(void);

/* The classifier's rows per chunk (its logits buffer's rows) for N rows of C channels:
 * powers of two from GPT_CHUNK_ROWS while rows x C <= GPT_CHUNK_ELEMS (8192 at C 768, 2048
 * at C 1600; tools/plan_hf.c follows the same rule) */
enum { GPT_CHUNK_ROWS = 2048, GPT_CHUNK_ELEMS = 8192 * 768 };
int gpt_chunk_rows(int N, int C);
/* The stream, a cuBLAS handle on it with a fixed workspace (cuBLAS then picks the
 * same kernels every run: reproducible). NULL with a message in err on failure. */
gpt_gpu_t *gpt_gpu_open(char *err, size_t errlen);
void gpt_gpu_close(gpt_gpu_t *g);
uvmrt_stream_t gpt_gpu_stream(const gpt_gpu_t *g);
/* A second stream on which nothing is launched: the CPU optimizer's layer calls name
 * it, so uvmrt times them beside the GPU's stream (their events complete at once). */
uvmrt_stream_t gpt_gpu_cpu_stream(const gpt_gpu_t *g);
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

/* The attention: cuDNN's fused flash attention (gpt_attn_cudnn.h; a build with cuDNN and
 * cudnn-frontend, and libcudnn.so.9 found at run time) or the trainer's mma kernels
 * (gpt_kernels.h). gpt_gpu_attention_open sets it up for one shape after gpt_gpu_open:
 * want GPT_ATTN_AUTO takes cuDNN when it can (note then says why not, when it cannot),
 * GPT_ATTN_CUDNN fails with err when it cannot, GPT_ATTN_MMA never tries it. cuDNN's
 * workspace is cudaMalloc'd here (gpt_gpu_device_bytes counts it). */
typedef enum gpt_attn_kind { GPT_ATTN_AUTO = 0, GPT_ATTN_CUDNN = 1, GPT_ATTN_MMA = 2 } gpt_attn_kind_t;
const char *gpt_gpu_attention_open(gpt_gpu_t *g, gpt_attn_kind_t want, int B, int T, int C, int NH,
                                   char *note, size_t note_len);
/* 1 when this build has cuDNN's attention (it may still fail to open: no libcudnn.so.9). */
int gpt_gpu_cudnn_built(void);
/* GPT_ATTN_CUDNN or GPT_ATTN_MMA: what the calls below run (MMA before an open). */
gpt_attn_kind_t gpt_gpu_attention_kind(const gpt_gpu_t *g);
/* "cudnn 9.19.0" or "mma" */
const char *gpt_gpu_attention_name(const gpt_gpu_t *g);
/* gpt_attention_forward_launch's and gpt_attention_backward_launch's arguments, on the
 * stream, for the shape given to the open (the mma kernels take any shape). */
const char *gpt_gpu_attention_forward(gpt_gpu_t *g, uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                      int T, int C, int NH);
const char *gpt_gpu_attention_backward(gpt_gpu_t *g, uint16_t *dqkv, float *delta, const uint16_t *dout,
                                       const uint16_t *out, const uint16_t *qkv, const float *lse, int B,
                                       int T, int C, int NH);

/* The forward matmul with its bias (bias (OC,) bf16) in one call: cuBLASLt's epilogues
 * where its heuristic has an algorithm for the shape, else the plain path (the bias
 * broadcast into the output, a matmul adding to it, the GELU kernel), chosen once per
 * shape (UVMRT_GPT_PLAIN_EPILOGUES=1: always plain):
 *   out_f32 0:  out (N,OC) bf16 = inp . w^T + bias; with gelu_pre, gelu_pre = that and out
 *               = GELU(that) (tanh form);
 *   out_f32 1:  out (N,OC) fp32 = residual (N,OC) fp32 + inp . w^T + bias (residual may be
 *               out). */
const char *gpt_mm_forward_ep(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp, const uint16_t *w,
                              int N, int K, int OC, const uint16_t *bias, const float *residual,
                              uint16_t *gelu_pre);
/* gpt_mm_dinp, then times GELU's derivative at gelu_pre (N,K) bf16 (the forward's
 * pre-GELU values): cuBLASLt's DGELU epilogue where it has an algorithm, else the matmul
 * and the GELU backward kernel (as gpt_mm_forward_ep chooses). */
const char *gpt_mm_dinp_dgelu(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w, int N, int K,
                              int OC, const uint16_t *gelu_pre);

/* Asynchronous copy on the stream (host memory should be pinned). */
const char *gpt_gpu_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes);
/* A copy off the stream, for a CPU block's gradient into its page-locked host memory
 * (the copy engine's DMA: the stream's next kernels run beside it). Slot 0 or 1 names
 * the source buffer: the copy starts once the stream's work so far is done, and
 * gpt_gpu_side_wait(g, slot) makes the stream's later work wait for it (before the
 * buffer is written again); slot -1 waits for both (before the CPU reads what they
 * copied). */
const char *gpt_gpu_side_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes, int slot);
const char *gpt_gpu_side_wait(gpt_gpu_t *g, int slot);
/* Waits for the stream. */
const char *gpt_gpu_sync(gpt_gpu_t *g);
/* Pinned, mapped host memory (the GPU writes losses and norms into it); NULL on failure. */
void *gpt_gpu_host_alloc(size_t bytes);
void gpt_gpu_host_free(void *p);

#endif
