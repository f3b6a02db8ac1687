/*
 * gpu_check_attention.h -- the earlier attention kernels (gpu_check_attention.cu),
 * for gpt-gpu-check only: the same interface as gpt_attention_forward_launch and
 * gpt_attention_backward_launch (gpt_kernels.h).
 */
#ifndef UVMRT_GPU_CHECK_ATTENTION_H
#define UVMRT_GPU_CHECK_ATTENTION_H

#include "gpt_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The earlier WMMA kernels (score tiles through shared memory),
 * kept for gpt-gpu-check's comparison and timings. */
int gpt_attention_forward_wmma_launch(uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                      int T, int C, int NH, uvmrt_stream_t stream);
int gpt_attention_backward_wmma_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                       const uint16_t *out, const uint16_t *qkv,
                                       const float *lse, int B, int T, int C, int NH,
                                       uvmrt_stream_t stream);
/* The same with scalar fp32 kernels (no tensor cores): the first, simpler version,
 * kept as a second implementation for gpt-gpu-check. */
int gpt_attention_forward_simple_launch(uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                        int T, int C, int NH, uvmrt_stream_t stream);
int gpt_attention_backward_simple_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                         const uint16_t *out, const uint16_t *qkv,
                                         const float *lse, int B, int T, int C, int NH,
                                         uvmrt_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_GPU_CHECK_ATTENTION_H */
