/*
 * gpt_kernels.h -- launchers for uvmrt-gpt's GPU kernels (gpt_kernels.cu).
 *
 * Includable from C: no CUDA headers. 16-bit arrays are bf16 patterns (uint16_t);
 * streams are uvmrt_stream_t (binary-compatible with cudaStream_t). Each launcher
 * enqueues its kernels on the stream and returns 0 (cudaSuccess) or the
 * cudaError_t of the launch (cudaErrorInvalidValue for shapes it does not take).
 * N = B*T rows; every array row-major. Shapes are beside each argument.
 *
 * Determinism: no reduction uses atomics; every sum runs in a fixed order that
 * depends only on the shapes, so a run gives the same bits every time (the loss
 * logs of uvmrt-gpt are compared bitwise across budgets and policies). (The column
 * sums count their finished blocks with an atomic, to know which one sums the chunks
 * last; the sums themselves keep their order. Those counters are shared: column sums
 * run on one stream at a time.)
 * The matmuls are cuBLAS calls in gpt_gpu.c; these are the rest.
 */
#ifndef UVMRT_GPT_KERNELS_H
#define UVMRT_GPT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

#include "../common/train_math.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attention kernels take this head size only. */
#define GPT_HEAD_SIZE 64
/* Blocks of the sum-of-squares kernel: partial sums per call (1024 x 256 threads keep
 * the H200's HBM busy: 256 blocks read a block's gradient at 0.67 TB/s) */
#define GPT_SUMSQ_BLOCKS 1024
/* Rows per partial sum of the column reductions (bias and LayerNorm gradients). */
#define GPT_COLSUM_ROWS 256

/* Floats of scratch that gpt_bias_grad_launch (1 * ...) and
 * gpt_layernorm_backward_launch (2 * ...) need for N rows and OC columns. */
size_t gpt_colsum_scratch_floats(int N, int OC);

/* out (B,T,C) fp32 = wte[inp] + wpe[t]; wte (Vp,C), wpe (maxT,C) bf16 */
int gpt_encoder_forward_launch(float *out, const int *inp, const uint16_t *wte,
                               const uint16_t *wpe, int B, int T, int C, uvmrt_stream_t stream);
/* dwte[bucket_token[k]] += sum of dout's rows bucket_rows[bucket_start[k] ..
 * bucket_start[k+1]) in that order, for k < nbuckets (each token once); dwpe (T,C)
 * = sum over b of dout[b,t] (overwritten). dout (B,T,C) fp32. */
int gpt_encoder_backward_launch(float *dwte, float *dwpe, const float *dout,
                                const int *bucket_rows, const int *bucket_start,
                                const int *bucket_token, int nbuckets, int B, int T, int C,
                                uvmrt_stream_t stream);
/* out (N,C) bf16 = LayerNorm(inp (N,C) fp32) * w + b (eps 1e-5); mean, rstd (N,) */
int gpt_layernorm_forward_launch(uint16_t *out, float *mean, float *rstd, const float *inp,
                                 const uint16_t *w, const uint16_t *b, int N, int C,
                                 uvmrt_stream_t stream);
/* dinp (N,C) fp32 += (accumulate) or = the input gradient from dout (N,C) bf16, and
 * dinp_bf16 (N,C) bf16 (unless NULL) = the result rounded to bf16 (as
 * gpt_f32_to_bf16_launch would); dw, db (C,) fp32 overwritten; scratch: 2 *
 * gpt_colsum_scratch_floats(N, C) floats. */
int gpt_layernorm_backward_launch(float *dinp, uint16_t *dinp_bf16, float *dw, float *db, float *scratch,
                                  const uint16_t *dout, const float *inp, const uint16_t *w,
                                  const float *mean, const float *rstd, int N, int C,
                                  int accumulate, uvmrt_stream_t stream);
/* out (N,OC) bf16 = bias (OC,) on every row (a GEMM with beta 1 then adds to it) */
int gpt_bias_broadcast_launch(uint16_t *out, const uint16_t *bias, int N, int OC,
                              uvmrt_stream_t stream);
/* out (N,C) fp32 = inp (N,C) fp32 + bias (C,) bf16 */
int gpt_residual_bias_launch(float *out, const float *inp, const uint16_t *bias, int N, int C,
                             uvmrt_stream_t stream);
/* out = gelu_tanh(inp), n elements bf16, n % 8 == 0 */
int gpt_gelu_forward_launch(uint16_t *out, const uint16_t *inp, size_t n, uvmrt_stream_t stream);
/* d = d * gelu_tanh'(inp) in place, n % 8 == 0 */
int gpt_gelu_backward_launch(uint16_t *d, const uint16_t *inp, size_t n, uvmrt_stream_t stream);
/* out (n,) bf16 = in (n,) fp32 rounded to nearest even, n % 4 == 0 */
int gpt_f32_to_bf16_launch(uint16_t *out, const float *in, size_t n, uvmrt_stream_t stream);
/* out (n,) fp32 = in (n,) bf16 */
int gpt_bf16_to_f32_launch(float *out, const uint16_t *in, size_t n, uvmrt_stream_t stream);
/* out (n,) fp32 = in, n % 4 == 0, both 16-byte aligned: one streaming pass (out may be
 * host memory the GPU writes over the link) */
int gpt_copy_f32_launch(float *out, const float *in, size_t n, uvmrt_stream_t stream);
/* dbias (OC,) fp32 = column sums of dout (N,OC), bf16 or fp32 (overwritten);
 * scratch: gpt_colsum_scratch_floats(N, OC) floats */
int gpt_bias_grad_launch(float *dbias, float *scratch, const uint16_t *dout, int N, int OC,
                         uvmrt_stream_t stream);
int gpt_bias_grad_f32_launch(float *dbias, float *scratch, const float *dout, int N, int OC,
                             uvmrt_stream_t stream);
/* Fused causal attention (flash-style online softmax; no T x T matrix) on the tensor
 * cores (bf16, fp32 accumulate): qkv (B,T,3C) bf16, out (B,T,C) bf16, lse (B,NH,T)
 * fp32 natural log-sum-exp of the scaled scores. C / NH == GPT_HEAD_SIZE. The
 * trainer's: the mma kernels below (gpu_check_attention.h has the earlier ones). */
int gpt_attention_forward_launch(uint16_t *out, float *lse, const uint16_t *qkv, int B, int T,
                                 int C, int NH, uvmrt_stream_t stream);
/* dqkv (B,T,3C) bf16 (overwritten) from dout (B,T,C) bf16, recomputing the
 * probabilities from qkv and lse; out is the forward's output; delta (B,NH,T) fp32
 * scratch. Deterministic: dq and dk/dv come from separate kernels, no atomics. */
int gpt_attention_backward_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                  const uint16_t *out, const uint16_t *qkv, const float *lse,
                                  int B, int T, int C, int NH, uvmrt_stream_t stream);
/* FlashAttention-2 style: mma.sync m16n8k16 issued per warp, scores and
 * probabilities kept in registers, K/V tiles double-buffered with cp.async;
 * T up to 64 * 65535. */
int gpt_attention_forward_mma_launch(uint16_t *out, float *lse, const uint16_t *qkv, int B, int T,
                                     int C, int NH, uvmrt_stream_t stream);
/* the forward with mtiles (1 or 2) m-tiles of 16 rows per warp, 64 * mtiles queries
 * per block (gpt_attention_forward_mma_launch takes the faster, 2) */
int gpt_attention_forward_mma_tiles_launch(uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                           int T, int C, int NH, int mtiles,
                                           uvmrt_stream_t stream);
int gpt_attention_backward_mma_launch(uint16_t *dqkv, float *delta, const uint16_t *dout,
                                      const uint16_t *out, const uint16_t *qkv, const float *lse,
                                      int B, int T, int C, int NH, uvmrt_stream_t stream);
/* Cross-entropy of R rows of logits (R,Vp) bf16, the first V columns real, Vp % 8 == 0:
 * losses (R,) fp32; logits replaced in place by dlogits = (softmax - onehot) * dscale
 * (0 in the padded columns). */
int gpt_crossentropy_launch(uint16_t *logits, float *losses, const int *targets, int R, int V,
                            int Vp, float dscale, uvmrt_stream_t stream);
/* *out = (sum of losses[0..n) in double, fixed order) / n; out may be mapped host memory */
int gpt_loss_finish_launch(const float *losses, int n, double *out, uvmrt_stream_t stream);
/* partials[0..GPT_SUMSQ_BLOCKS) = partial sums of g[i]^2 over n floats (double) */
int gpt_sumsq_launch(const float *g, size_t n, double *partials, uvmrt_stream_t stream);
/* norm = sqrt(sum of partials[0..nparts)); *clip = max_norm / (norm + 1e-6) when norm
 * > max_norm, else 1 (device float); host_out[0] = norm, host_out[1] = clip
 * (host_out may be NULL or mapped host memory). */
int gpt_clip_finish_launch(const double *partials, int nparts, float max_norm, float *clip,
                           float *host_out, uvmrt_stream_t stream);
/* AdamW (mlp_adamw_elem, the MLP trainer's bits) over n elements, with the gradient
 * multiplied by *clip (device) in place of coef's inv_scale; wh (n,) receives the
 * new weights in bf16 (may be NULL). */
int gpt_adamw_launch(float *w, float *m, float *v, const float *g, uint16_t *wh, size_t n,
                     const mlp_adamw_coef_t *coef, const float *clip, uvmrt_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_GPT_KERNELS_H */
