/*
 * mlp_simref.c -- uvmrt-mlp on the sim backend: the CPU reference's math (mlp_ref.c)
 * does each layer call's arithmetic, inside the same uvmrt layer calls as the GPU's
 * kernels, on the uvmrt tensors' host memory. See mlp.h.
 *
 * As on the GPU: fp32 master weights, moments and gradients; bf16 working copies,
 * activations and activation gradients (each rounded where the GPU rounds it); the
 * products in fp32 on host scratch (the tensors' bf16 values widened); AdamW through
 * uvmrt_adamw_cpu (the GPU kernel's bitwise partner), which also writes the new bf16
 * working copy. The initial weights, input and teacher targets are mlp_ref_init's.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"
#include "mlp_ref.h"

struct mlp_simref {
    float *in, *w, *z, *a, *d; /* (N, H), (H, H), (N, H) x 3 */
};

double mlp_simref_work(const mlp_options_t *opt) {
    return (double)opt->layers * (double)opt->hidden * (double)opt->hidden * (double)opt->rows;
}

int mlp_simref_fits(const mlp_options_t *opt) {
    return opt->precision == MLP_BF16 && mlp_simref_work(opt) <= MLP_SIM_MATH_MAX;
}

static void widen(float *dst, const uvmrt_tensor_t *t, size_t n) {
    const uint16_t *src = uvmrt_tensor_ptr((uvmrt_tensor_t *)t);
    for (size_t k = 0; k < n; k++)
        dst[k] = mlp_bf16_to_f32(src[k]);
}

/* The tensor gets src rounded to bf16, and src the rounded values. */
static void store(uvmrt_tensor_t *t, float *src, size_t n) {
    uint16_t *dst = uvmrt_tensor_ptr(t);
    for (size_t k = 0; k < n; k++) {
        dst[k] = mlp_f32_to_bf16(src[k]);
        src[k] = mlp_bf16_to_f32(dst[k]);
    }
}

static void widen_f32(float *dst, const float *src, size_t n) {
    for (size_t k = 0; k < n; k++)
        dst[k] = mlp_bf16_to_f32(mlp_f32_to_bf16(src[k]));
}

/* After the tensors: the scratch, and mlp_ref_init's weights, input and targets. */
void mlp_simref_open(mlp_run_t *run) {
    mlp_net_t *net = &run->net;
    struct mlp_simref *r = calloc(1, sizeof *r);
    if (r == NULL)
        run_fail(run, "out of host memory");
    run->ref = r;
    r->in = calloc(net->nh, sizeof(float)), r->w = calloc(net->hh, sizeof(float));
    r->z = calloc(net->nh, sizeof(float)), r->a = calloc(net->nh, sizeof(float));
    r->d = calloc(net->nh, sizeof(float));
    mlp_ref_t init;
    if (!r->in || !r->w || !r->z || !r->a || !r->d ||
        mlp_ref_init(&init, net->L, net->H, net->N, run->opt->c.seed) != 0)
        run_fail(run, "out of host memory (the CPU reference)");
    for (int i = 0; i < net->L; i++) {
        const mlp_block_t *b = &net->blocks[i];
        memcpy(uvmrt_tensor_ptr(b->W), init.W + (size_t)i * net->hh, net->hh * sizeof(float));
        memset(uvmrt_tensor_ptr(b->m), 0, net->hh * sizeof(float));
        memset(uvmrt_tensor_ptr(b->v), 0, net->hh * sizeof(float));
        widen_f32(r->w, init.W + (size_t)i * net->hh, net->hh);
        store(b->Wh, r->w, net->hh);
    }
    widen_f32(r->in, init.X, net->nh);
    store(net->X, r->in, net->nh);
    widen_f32(r->in, init.Y, net->nh);
    store(net->Y, r->in, net->nh);
    mlp_ref_free(&init);
}

void mlp_simref_close(mlp_run_t *run) {
    struct mlp_simref *r = run->ref;
    if (r == NULL)
        return;
    free(r->in), free(r->w), free(r->z), free(r->a), free(r->d);
    free(r);
    run->ref = NULL;
}

/* Z = in . Wh^T into z (bf16), the widened values in r->z. */
static void pre_activation(mlp_run_t *run, int i, uvmrt_tensor_t *z) {
    mlp_net_t *net = &run->net;
    struct mlp_simref *r = run->ref;
    widen(r->in, mlp_block_input(net, i), net->nh);
    widen(r->w, net->blocks[i].Wh, net->hh);
    mlp_ref_linear(r->z, r->in, r->w, net->N, net->H);
    store(z, r->z, net->nh);
}

/* forward i: Z, A = gelu(Z); the last block: the loss of step s and dA (times
 * 2 / (N H), as the GPU's loss kernel). */
void mlp_simref_forward(mlp_run_t *run, int i, int s) {
    mlp_net_t *net = &run->net;
    struct mlp_simref *r = run->ref;
    if (mlp_block_on_cpu(run, i) && !run->staged) /* a CPU block: Wh from the W its AdamW wrote */
        mlp_simref_half(run, i);
    pre_activation(run, i, mlp_block_z(run, i));
    for (size_t k = 0; k < net->nh; k++)
        r->a[k] = mlp_gelu(r->z[k]);
    store(net->blocks[i].A, r->a, net->nh);
    if (i != net->L - 1)
        return;
    widen(r->d, net->Y, net->nh);
    float grad_mul = (float)(2.0 * run->loss_scale / (double)net->nh);
    double sum = 0.0;
    for (size_t k = 0; k < net->nh; k++) {
        float diff = r->a[k] - r->d[k];
        sum += (double)diff * diff;
        r->d[k] = diff * grad_mul;
    }
    run->losses[s] = sum / (double)net->nh;
    store(net->dA[i & 1], r->d, net->nh);
}

/* backward i: [Z again when block i recomputes]; dZ = dA * gelu'(Z); dW = dZ^T . in;
 * dA_{i-1} = dZ . Wh (not for block 0). */
void mlp_simref_backward(mlp_run_t *run, int i) {
    mlp_net_t *net = &run->net;
    struct mlp_simref *r = run->ref;
    uvmrt_tensor_t *z = mlp_block_z(run, i);
    if (mlp_block_recomputes(run, i)) {
        pre_activation(run, i, z);
    } else {
        widen(r->in, mlp_block_input(net, i), net->nh);
        widen(r->w, net->blocks[i].Wh, net->hh);
        widen(r->z, z, net->nh);
    }
    widen(r->d, net->dA[i & 1], net->nh);
    for (size_t k = 0; k < net->nh; k++)
        r->a[k] = r->d[k] * mlp_gelu_grad(r->z[k]);
    store(net->dZ, r->a, net->nh);
    mlp_ref_weight_grad(uvmrt_tensor_ptr(net->blocks[i].dW), r->a, r->in, net->N, net->H);
    if (i == 0)
        return;
    mlp_ref_input_grad(r->d, r->a, r->w, net->N, net->H);
    store(net->dA[(i - 1) & 1], r->d, net->nh);
}

/* Wh = bf16(W) of block i: a CPU block's, in its forward or its staged copy. */
void mlp_simref_half(mlp_run_t *run, int i) {
    const mlp_block_t *b = &run->net.blocks[i];
    const float *w = uvmrt_tensor_ptr(b->W);
    uint16_t *wh = uvmrt_tensor_ptr(b->Wh);
    for (size_t k = 0; k < run->net.hh; k++)
        wh[k] = mlp_f32_to_bf16(w[k]);
}

/* Block i's AdamW; on the GPU's call its new bf16 working copy too (a CPU block's is
 * made by the call that declares it: its forward or its staged copy). */
void mlp_simref_adamw(mlp_run_t *run, int i) {
    const mlp_block_t *b = &run->net.blocks[i];
    uvmrt_adamw_t hp = mlp_adamw_hp(run->opt->lr, MLP_ADAMW_WD, run->adam_t + 1, run->loss_scale);
    uvmrt_status_t st = uvmrt_adamw_cpu(&hp, uvmrt_tensor_ptr(b->W), uvmrt_tensor_ptr(b->m),
                                        uvmrt_tensor_ptr(b->v), uvmrt_tensor_ptr(b->dW),
                                        run->net.hh,
                                        mlp_block_on_cpu(run, i) ? NULL : uvmrt_tensor_ptr(b->Wh));
    if (st != UVMRT_OK)
        run_fail(run, "block %d: uvmrt_adamw_cpu failed: %s (%s)", i, uvmrt_status_str(st),
                 uvmrt_status_name(st));
}
