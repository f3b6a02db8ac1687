/*
 * gpt_ref.h -- a plain-C reference of GPT-2's forward and backward pass, for tests.
 *
 * The model (as llm.c's train_gpt2.c and transformers' GPT2LMHeadModel):
 *   x = wte[token] + wpe[position]
 *   L pre-LN blocks:  x += attproj(causal_mha(qkv(ln1(x))))
 *                     x += fcproj(gelu_tanh(fc(ln2(x))))
 *   logits = lnf(x) . wte^T (tied head; only the first V of Vp columns are real),
 *   loss = mean over the B*T positions of cross-entropy against the targets.
 *
 * Every array is row-major; weight matrices are (out, in), like torch.nn.Linear.
 * The parameters are one array, tensor-major, in llm.c's order (the same order as
 * uvmrt-gpt's --dump-weights files): wte (Vp,C), wpe (maxT,C), ln1w (L,C),
 * ln1b (L,C), qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C), attprojb (L,C),
 * ln2w (L,C), ln2b (L,C), fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C),
 * fcprojb (L,C), lnfw (C), lnfb (C).
 *
 * The arithmetic type is gref_t: float by default (the reference the GPU kernels
 * are compared with); the finite-difference test builds the same source with
 * -DGPT_REF_REAL=double so that central differences are accurate to ~1e-9.
 * Single-threaded, straightforward loops: clarity over speed, tiny shapes only.
 */
#ifndef UVMRT_GPT_REF_H
#define UVMRT_GPT_REF_H

#include <stddef.h>

#ifndef GPT_REF_REAL
#define GPT_REF_REAL float
#endif
typedef GPT_REF_REAL gref_t;

#ifdef __cplusplus
extern "C" {
#endif

/* The shape of a model. C % NH == 0; V <= Vp. */
typedef struct gpt_shape {
    int V;    /* vocabulary */
    int Vp;   /* padded vocabulary: rows of wte (the head's extra rows give no logits) */
    int maxT; /* rows of wpe: the longest sequence */
    int L;    /* blocks */
    int C;    /* channels */
    int NH;   /* heads; head size C / NH */
} gpt_shape_t;

#define GPT_NUM_PARAM_TENSORS 16

/* The element count of each of the 16 parameter tensors, in the order above. */
void gpt_param_sizes(const gpt_shape_t *s, size_t sizes[GPT_NUM_PARAM_TENSORS]);
/* Their sum. */
size_t gpt_num_params(const gpt_shape_t *s);
/* The names of the 16 tensors ("wte", "wpe", "ln1w", ...). */
extern const char *const gpt_param_names[GPT_NUM_PARAM_TENSORS];

/* ----------------------------------------------------------------------------
 * the layers, one function each (N = B*T rows); *_backward ADD into their input
 * gradients (dinp, dw, db), as a graph's gradient accumulation does */

/* out (B,T,C) = wte[inp[b,t]] + wpe[t] */
void gref_encoder_forward(gref_t *out, const int *inp, const gref_t *wte, const gref_t *wpe,
                          int B, int T, int C);
void gref_encoder_backward(gref_t *dwte, gref_t *dwpe, const gref_t *dout, const int *inp,
                           int B, int T, int C);
/* out (N,C) = (inp - mean) * rstd * w + b, eps 1e-5, biased variance; mean, rstd (N,) */
void gref_layernorm_forward(gref_t *out, gref_t *mean, gref_t *rstd, const gref_t *inp,
                            const gref_t *w, const gref_t *b, int N, int C);
void gref_layernorm_backward(gref_t *dinp, gref_t *dw, gref_t *db, const gref_t *dout,
                             const gref_t *inp, const gref_t *w, const gref_t *mean,
                             const gref_t *rstd, int N, int C);
/* out (N,OC) = inp (N,K) . w^T (w: (OC,K)) + bias (OC,) (bias may be NULL) */
void gref_matmul_forward(gref_t *out, const gref_t *inp, const gref_t *w, const gref_t *bias,
                         int N, int K, int OC);
/* dinp (N,K) += dout . w; dw (OC,K) += dout^T . inp; dbias += column sums (dbias,
 * dinp may be NULL) */
void gref_matmul_backward(gref_t *dinp, gref_t *dw, gref_t *dbias, const gref_t *dout,
                          const gref_t *inp, const gref_t *w, int N, int K, int OC);
/* Causal multi-head attention. qkv (B,T,3C): q, k, v side by side, head h at
 * columns h*hs of each; out (B,T,C); lse (B,NH,T) the log-sum-exp of each query's
 * scaled scores (scale 1/sqrt(hs)), which the flash kernels save. */
void gref_attention_forward(gref_t *out, gref_t *lse, const gref_t *qkv, int B, int T, int C,
                            int NH);
/* dqkv (B,T,3C) += the gradient, from dout (B,T,C) */
void gref_attention_backward(gref_t *dqkv, const gref_t *dout, const gref_t *qkv, int B, int T,
                             int C, int NH);
/* GELU, tanh approximation (GPT-2's) */
void gref_gelu_forward(gref_t *out, const gref_t *inp, size_t n);
void gref_gelu_backward(gref_t *dinp, const gref_t *inp, const gref_t *dout, size_t n);
/* Cross-entropy of logits (N,Vp), first V columns real: losses (N,) per row;
 * dlogits (N,Vp) = (softmax - onehot) * dscale (0 in the padded columns; may be NULL). */
void gref_crossentropy(gref_t *losses, gref_t *dlogits, const gref_t *logits, const int *targets,
                       int N, int V, int Vp, gref_t dscale);

/* ----------------------------------------------------------------------------
 * the whole model */

/* The mean loss of params (gpt_num_params) on inp/targets (B,T) token ids in [0,V),
 * T <= maxT. When grads is not NULL it receives (overwritten) d loss / d params.
 * Returns NaN when out of memory. */
double gpt_ref_loss(const gpt_shape_t *s, const gref_t *params, const int *inp,
                    const int *targets, int B, int T, gref_t *grads);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_GPT_REF_H */
