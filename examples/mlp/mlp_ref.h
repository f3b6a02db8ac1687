/*
 * mlp_ref.h -- a plain-C fp32 reference of uvmrt-mlp's training math, for tests.
 *
 * The same model (L blocks of Linear(H, H, no bias) + GELU, MSE against a fixed
 * random teacher of the same shape), the same initialisation hash, GELU and loss
 * as the GPU trainer, and the optimizer step through uvmrt_adamw_cpu() (the code the
 * trainer's --optimizer-on cpu runs). Everything fp32, no 16-bit rounding: it
 * checks the math, not the GPU's precision. Row-major, y = x W^T as in PyTorch.
 */
#ifndef UVMRT_MLP_REF_H
#define UVMRT_MLP_REF_H

#include <stddef.h>
#include <stdint.h>

#include "../common/adamw_cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mlp_ref {
    int L, H, N;
    float *W;  /* (L, H, H) master weights, W[i][out][in] */
    float *m;  /* (L, H, H) AdamW first moment */
    float *v;  /* (L, H, H) AdamW second moment */
    float *dW; /* (L, H, H) gradients of the last backward */
    float *X;  /* (N, H) input */
    float *Y;  /* (N, H) targets: the teacher's output for X */
    float *A;  /* (L+1, N, H) A[0] = X, A[i+1] = gelu(Z[i]) */
    float *Z;  /* (L, N, H) pre-activations */
    float *dA; /* (N, H) scratch */
    float *dZ; /* (N, H) scratch */
    long t;    /* AdamW updates done */
} mlp_ref_t;

/* Initialises like uvmrt-mlp --seed seed. 0, or -1 when out of memory. */
int mlp_ref_init(mlp_ref_t *r, int L, int H, int N, uint64_t seed);
void mlp_ref_free(mlp_ref_t *r);

/* Forward with the current W: fills A and Z, returns the loss mean((A[L]-Y)^2). */
float mlp_ref_forward(mlp_ref_t *r);
/* Forward, then backward: fills dW; returns the loss. */
float mlp_ref_forward_backward(mlp_ref_t *r);
/* One AdamW step on every layer (lr, weight decay 0.01), through uvmrt_adamw_cpu. */
void mlp_ref_adamw(mlp_ref_t *r, double lr);

/* The block's three products (row-major, W (H, H) [out][in]), which uvmrt-mlp's sim
 * run computes with too: out (N, H) = in . W^T; dW (H, H) = dZ^T . in (overwritten);
 * dA (N, H) = dZ . W (overwritten). */
void mlp_ref_linear(float *out, const float *in, const float *W, int N, int H);
void mlp_ref_weight_grad(float *dW, const float *dZ, const float *in, int N, int H);
void mlp_ref_input_grad(float *dA, const float *dZ, const float *W, int N, int H);

/* A loss as text with six significant digits (%.6g): a deep net's MSE starts far
 * below 1 (about 1e-9 at 48 x 4096), where a fixed "%.6f" shows 0.000000. */
void mlp_loss_text(char *buf, size_t cap, double loss);

/* The initial values (shared with the trainer's host initialisation). */
float mlp_init_weight_bound(int H);      /* b: weights are U(-b, b) */
float mlp_init_input_scale(void);        /* inputs are U(-s, s) */

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_MLP_REF_H */
