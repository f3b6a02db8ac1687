/*
 * gpt_attn_cudnn.h -- cuDNN's fused flash attention for uvmrt-gpt (gpt_attn_cudnn.cpp),
 * reached through cudnn-frontend's graph API (the header-only C++ library over cuDNN's
 * C backend API) when configure found both; libcudnn.so.9 is opened at run time, so a
 * machine without it still runs the trainer (on the mma kernels: gpt_attn.c).
 *
 * Includable from C. The layouts are gpt_attention_forward_launch's: qkv (B,T,3C) bf16,
 * out (B,T,C) bf16, lse (B,NH,T) fp32 natural log-sum-exp of the scaled scores (cuDNN's
 * softmax statistics are the same quantity), head size C / NH.
 */
#ifndef UVMRT_GPT_ATTN_CUDNN_H
#define UVMRT_GPT_ATTN_CUDNN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpt_cudnn_attn gpt_cudnn_attn_t;

/* 1 when this build has the cuDNN path (configure found cuDNN and cudnn-frontend). */
int gpt_cudnn_built(void);

/* Builds the forward and the deterministic backward graphs for one shape on the current
 * device (cuDNN's heuristics choose the engines). NULL with a sentence in why when cuDNN
 * is not there, is too old, or supports no engine for this shape. */
gpt_cudnn_attn_t *gpt_cudnn_attn_open(int B, int T, int C, int NH, char *why, size_t why_len);
/* The device workspace its calls need (bytes; the larger of the two graphs'). */
size_t gpt_cudnn_attn_workspace_bytes(const gpt_cudnn_attn_t *a);
/* cuDNN's version (e.g. 91900), as the loaded library reports it. */
long gpt_cudnn_attn_version(const gpt_cudnn_attn_t *a);
/* The forward: out and lse from qkv, queued on stream. 0, or -1 with the reason in
 * gpt_cudnn_attn_error. workspace: gpt_cudnn_attn_workspace_bytes of device memory. */
int gpt_cudnn_attn_forward(gpt_cudnn_attn_t *a, uint16_t *out, float *lse, const uint16_t *qkv,
                           void *workspace, void *stream);
/* The backward: dqkv (overwritten) from dout, the forward's out and lse, and qkv. */
int gpt_cudnn_attn_backward(gpt_cudnn_attn_t *a, uint16_t *dqkv, const uint16_t *dout,
                            const uint16_t *out, const uint16_t *qkv, const float *lse,
                            void *workspace, void *stream);
/* The last failure's sentence ("" when none). */
const char *gpt_cudnn_attn_error(const gpt_cudnn_attn_t *a);
void gpt_cudnn_attn_close(gpt_cudnn_attn_t *a);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_GPT_ATTN_CUDNN_H */
