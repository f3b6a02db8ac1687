/*
 * gpt_simref.c -- uvmrt-gpt on the sim backend: the CPU reference (gpt_ref.c) does each
 * layer call's arithmetic, inside the same uvmrt layer calls as the GPU's kernels, on
 * the uvmrt tensors' host memory. See gpt.h.
 *
 * What crosses calls lives where the GPU keeps it: fp32 master weights, gradients and
 * moments, the bf16 working copies, the saved activations (bf16, rounded as the GPU
 * rounds them; the LayerNorms' statistics, the attention's lse and the residual stream
 * fp32), the residual gradient dres (fp32) and the head's dlnf (in dln, bf16). Inside a
 * call the reference works in fp32 on host scratch: the weights' bf16 copies and the
 * saved activations widened, and the call's own temporaries. AdamW is the library's
 * uvmrt_adamw_cpu (the GPU kernel's bitwise partner), clipped by the global gradient
 * norm as on the GPU. Single-threaded and plain: tiny shapes only (GPT_SIM_MATH_MAX).
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "../common/train_math.h"
#include "gpt.h"

/* fp32 scratch of one call: weights and activations widened, temporaries */
struct gpt_simref {
    float *w, *wte;                           /* a layer's weights; the head's wte */
    float *ln1, *qkv, *atty, *ln2, *fch, *fchg; /* a block's activations */
    float *d4a, *d4b, *dnc, *dnc2, *dqkv;     /* its backward's gradients */
    float *logits, *dlogits;                  /* (chunk, Vp) */
    float *row;                               /* (Vp) one row's logits (sampling) */
};

double gpt_simref_work(const gpt_run_t *run) {
    gpt_shape_t shape = {run->model.V, run->model.Vp, run->model.maxT,
                         run->model.L, run->model.C,  run->model.NH};
    return (double)gpt_num_params(&shape) * (double)run->model.N;
}

int gpt_simref_fits(const gpt_run_t *run) {
    return gpt_simref_work(run) <= GPT_SIM_MATH_MAX;
}

static float *floats(gpt_run_t *run, size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    if (p == NULL)
        gpt_run_fail(run, "out of host memory (the CPU reference's scratch)");
    return p;
}

void gpt_simref_open(gpt_run_t *run) {
    struct gpt_simref *r = calloc(1, sizeof *r);
    if (r == NULL)
        gpt_run_fail(run, "out of host memory");
    run->ref = r;
    size_t N = (size_t)run->model.N, C = (size_t)run->model.C, Vp = (size_t)run->model.Vp;
    size_t wmax = 0, NC = N * C;
    for (int l = 0; l < run->model.nl; l++)
        wmax = run->model.lp[l].n > wmax ? run->model.lp[l].n : wmax;
    r->w = floats(run, wmax), r->wte = floats(run, Vp * C);
    r->ln1 = floats(run, NC), r->qkv = floats(run, 3 * NC), r->atty = floats(run, NC);
    r->ln2 = floats(run, NC), r->fch = floats(run, 4 * NC), r->fchg = floats(run, 4 * NC);
    r->d4a = floats(run, 4 * NC), r->d4b = floats(run, 4 * NC), r->dnc = floats(run, NC);
    r->dnc2 = floats(run, NC), r->dqkv = floats(run, 3 * NC);
    r->logits = floats(run, (size_t)run->model.chunk * Vp);
    r->dlogits = floats(run, (size_t)run->model.chunk * Vp);
    r->row = floats(run, Vp);
    /* what the GPU path keeps in mapped host memory */
    run->loss_host = calloc((size_t)run->set.opt->c.steps + (size_t)run->val_n + 1, sizeof(double));
    run->clip_host = calloc(4, sizeof(float));
    run->logits_host = calloc(Vp, sizeof(uint16_t));
    if (!run->loss_host || !run->clip_host || !run->logits_host)
        gpt_run_fail(run, "out of host memory");
}

void gpt_simref_close(gpt_run_t *run) {
    struct gpt_simref *r = run->ref;
    if (r == NULL)
        return;
    float *all[] = {r->w,   r->wte, r->ln1, r->qkv, r->atty, r->ln2,    r->fch,    r->fchg,
                    r->d4a, r->d4b, r->dnc, r->dnc2, r->dqkv, r->logits, r->dlogits, r->row};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        free(all[k]);
    free(r);
    run->ref = NULL;
}

/* ----------------------------------------------------------------------------
 * bf16 <-> fp32 */

static void widen(float *dst, const uint16_t *src, size_t n) {
    for (size_t k = 0; k < n; k++)
        dst[k] = mlp_bf16_to_f32(src[k]);
}

/* The tensor gets src rounded to bf16, and src the rounded values: what the next
 * step of the GPU's arithmetic reads. */
static void store(uint16_t *dst, float *src, size_t n) {
    for (size_t k = 0; k < n; k++) {
        dst[k] = mlp_f32_to_bf16(src[k]);
        src[k] = mlp_bf16_to_f32(dst[k]);
    }
}

static void zero(float *p, size_t n) { memset(p, 0, n * sizeof *p); }

/* Layer l's bf16 weights, widened into r->w. */
static const float *weights(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->model.lp[l];
    widen(run->ref->w, b16(p->wh), p->n);
    return run->ref->w;
}

/* Layer l's share of the gradient norm: its sum of squares in its first partial. */
static void sumsq(gpt_run_t *run, int l, const float *g, size_t n) {
    double s = 0.0, *parts = (double *)ptr(run->model.gnorm) + (size_t)l * GPT_SUMSQ_BLOCKS;
    for (size_t k = 0; k < n; k++)
        s += (double)g[k] * g[k];
    memset(parts, 0, GPT_SUMSQ_BLOCKS * sizeof *parts);
    parts[0] = s;
}

/* ----------------------------------------------------------------------------
 * the layers */

void gpt_simref_embed_forward(gpt_run_t *run) {
    int N = run->model.N, C = run->model.C;
    memcpy(ptr(run->model.tokens), run->tok_host, 2 * (size_t)N * sizeof(int)); /* inputs, targets */
    const float *wte = weights(run, 0), *wpe = wte + (size_t)run->model.Vp * C;
    gref_encoder_forward(f32(run->model.out[0]), ptr(run->model.tokens), wte, wpe, run->model.B,
                         run->model.T, C);
}

/* with_out 0: the recompute in a backward, which stops before the block's output */
void gpt_simref_block_forward(gpt_run_t *run, int l, int with_out) {
    struct gpt_simref *r = run->ref;
    const block_acts_t *a = &run->model.acts[l - 1];
    int N = run->model.N, C = run->model.C;
    size_t NC = (size_t)N * C;
    const size_t *o = run->model.boff;
    const float *w = weights(run, l), *x = f32(run->model.out[l - 1]);
    float *ms1 = f32(a->ln1_ms), *ms2 = f32(a->ln2_ms), *res2 = f32(a->res2);
    gref_layernorm_forward(r->ln1, ms1, ms1 + N, x, w + o[P_LN1W], w + o[P_LN1B], N, C);
    store(b16(a->ln1), r->ln1, NC);
    gref_matmul_forward(r->qkv, r->ln1, w + o[P_QKVW], w + o[P_QKVB], N, C, 3 * C);
    store(b16(a->qkv), r->qkv, 3 * NC);
    gref_attention_forward(r->atty, f32(a->lse), r->qkv, run->model.B, run->model.T, C,
                           run->model.NH);
    store(b16(a->atty), r->atty, NC);
    gref_matmul_forward(res2, r->atty, w + o[P_ATTPROJW], w + o[P_ATTPROJB], N, C, C);
    for (size_t k = 0; k < NC; k++)
        res2[k] += x[k];
    gref_layernorm_forward(r->ln2, ms2, ms2 + N, res2, w + o[P_LN2W], w + o[P_LN2B], N, C);
    store(b16(a->ln2), r->ln2, NC);
    gref_matmul_forward(r->fch, r->ln2, w + o[P_FCW], w + o[P_FCB], N, C, 4 * C);
    store(b16(a->fch), r->fch, 4 * NC);
    gref_gelu_forward(r->fchg, r->fch, 4 * NC);
    store(b16(a->fchg), r->fchg, 4 * NC);
    if (!with_out)
        return;
    float *out = f32(run->model.out[l]);
    gref_matmul_forward(out, r->fchg, w + o[P_FCPROJW], w + o[P_FCPROJB], N, 4 * C, C);
    for (size_t k = 0; k < NC; k++)
        out[k] += res2[k];
}

/* A block's backward: dres holds d(out) and leaves with d(x); g is overwritten. A CPU
 * layer's gradient goes straight to g (host memory here: no gdev). */
void gpt_simref_block_backward(gpt_run_t *run, int l, int recompute) {
    struct gpt_simref *r = run->ref;
    const layer_params_t *p = &run->model.lp[l];
    const block_acts_t *a = &run->model.acts[l - 1];
    int N = run->model.N, C = run->model.C;
    size_t NC = (size_t)N * C;
    const size_t *o = run->model.boff;
    if (recompute) {
        gpt_simref_block_forward(run, l, 0); /* fills the scratch as it saves */
    } else {
        widen(r->ln1, b16(a->ln1), NC), widen(r->qkv, b16(a->qkv), 3 * NC);
        widen(r->atty, b16(a->atty), NC), widen(r->ln2, b16(a->ln2), NC);
        widen(r->fch, b16(a->fch), 4 * NC), widen(r->fchg, b16(a->fchg), 4 * NC);
    }
    const float *w = weights(run, l), *x = f32(run->model.out[l - 1]);
    const float *ms1 = f32(a->ln1_ms), *ms2 = f32(a->ln2_ms);
    float *g = f32(p->g), *dres = f32(run->model.dres);
    zero(g, p->n);
    /* out = res2 + fcproj(gelu(fc(ln2(res2)))) */
    zero(r->d4a, 4 * NC), zero(r->d4b, 4 * NC), zero(r->dnc, NC);
    gref_matmul_backward(r->d4a, g + o[P_FCPROJW], g + o[P_FCPROJB], dres, r->fchg,
                         w + o[P_FCPROJW], N, 4 * C, C);
    gref_gelu_backward(r->d4b, r->fch, r->d4a, 4 * NC);
    gref_matmul_backward(r->dnc, g + o[P_FCW], g + o[P_FCB], r->d4b, r->ln2, w + o[P_FCW], N, C,
                         4 * C);
    gref_layernorm_backward(dres, g + o[P_LN2W], g + o[P_LN2B], r->dnc, f32(a->res2),
                            w + o[P_LN2W], ms2, ms2 + N, N, C);
    /* res2 = x + attproj(attention(qkv(ln1(x)))): dres is d(res2) */
    zero(r->dnc2, NC), zero(r->dqkv, 3 * NC), zero(r->dnc, NC);
    gref_matmul_backward(r->dnc2, g + o[P_ATTPROJW], g + o[P_ATTPROJB], dres, r->atty,
                         w + o[P_ATTPROJW], N, C, C);
    gref_attention_backward(r->dqkv, r->dnc2, r->qkv, run->model.B, run->model.T, C,
                            run->model.NH);
    gref_matmul_backward(r->dnc, g + o[P_QKVW], g + o[P_QKVB], r->dqkv, r->ln1, w + o[P_QKVW], N,
                         C, 3 * C);
    gref_layernorm_backward(dres, g + o[P_LN1W], g + o[P_LN1B], r->dnc, x, w + o[P_LN1W], ms1,
                            ms1 + N, N, C);
    sumsq(run, l, g, p->n);
}

/* The final LayerNorm into lnf (and r->ln1, fp32): the head's forward and sampling. */
static const float *head_lnf(gpt_run_t *run) {
    int hl = run->model.nl - 1, N = run->model.N, C = run->model.C;
    const float *w = weights(run, hl);
    float *ms = f32(run->model.lnf_ms);
    gref_layernorm_forward(run->ref->ln1, ms, ms + N, f32(run->model.out[hl - 1]), w, w + C, N, C);
    store(b16(run->model.lnf), run->ref->ln1, (size_t)N * C);
    widen(run->ref->wte, b16(run->model.lp[0].wh), (size_t)run->model.Vp * C);
    return run->ref->ln1;
}

/* lnf, then per chunk of rows: logits, cross-entropy, the chunk's dlnf (into dln) and
 * its share of dwte (the embedding's gradient, overwritten); the mean loss. */
void gpt_simref_head_forward(gpt_run_t *run, double *loss_dst) {
    struct gpt_simref *r = run->ref;
    int N = run->model.N, C = run->model.C, Vp = run->model.Vp;
    const float *lnf = head_lnf(run);
    const int *tgt = (const int *)ptr(run->model.tokens) + N;
    float *losses = f32(run->model.losses), *dwte = f32(run->model.lp[0].g);
    zero(dwte, (size_t)Vp * C), zero(r->dnc, (size_t)N * C);
    for (int r0 = 0; r0 < N; r0 += run->model.chunk) {
        int R = N - r0 < run->model.chunk ? N - r0 : run->model.chunk;
        gref_matmul_forward(r->logits, lnf + (size_t)r0 * C, r->wte, NULL, R, C, Vp);
        gref_crossentropy(losses + r0, r->dlogits, r->logits, tgt + r0, R, run->model.V, Vp,
                          1.0f / (float)N);
        gref_matmul_backward(r->dnc + (size_t)r0 * C, dwte, NULL, r->dlogits,
                             lnf + (size_t)r0 * C, r->wte, R, C, Vp);
    }
    double sum = 0.0;
    for (int i = 0; i < N; i++)
        sum += losses[i];
    if (loss_dst)
        *loss_dst = sum / N;
    store(b16(run->model.dln), r->dnc, (size_t)N * C);
}

void gpt_simref_head_backward(gpt_run_t *run) {
    int hl = run->model.nl - 1, N = run->model.N, C = run->model.C;
    const layer_params_t *p = &run->model.lp[hl];
    const float *w = weights(run, hl), *ms = f32(run->model.lnf_ms);
    float *g = f32(p->g), *dres = f32(run->model.dres);
    widen(run->ref->dnc, b16(run->model.dln), (size_t)N * C);
    zero(g, p->n), zero(dres, (size_t)N * C);
    gref_layernorm_backward(dres, g, g + C, run->ref->dnc, f32(run->model.out[hl - 1]), w, ms,
                            ms + N, N, C);
    sumsq(run, hl, g, p->n);
}

/* The encoder's backward into dwte (the head's share already there) and dwpe, then
 * the global gradient norm and the clip factor, as gpt_clip_finish_launch makes them. */
void gpt_simref_embed_backward(gpt_run_t *run) {
    const layer_params_t *p = &run->model.lp[0];
    int C = run->model.C, nl = run->model.nl;
    float *dwte = f32(p->g), *dwpe = dwte + (size_t)run->model.Vp * C;
    zero(dwpe, (size_t)run->model.maxT * C);
    gref_encoder_backward(dwte, dwpe, f32(run->model.dres), ptr(run->model.tokens), run->model.B,
                          run->model.T, C);
    sumsq(run, 0, dwte, p->n);
    const double *parts = ptr(run->model.gnorm);
    double s = 0.0;
    for (size_t k = 0; k < (size_t)nl * GPT_SUMSQ_BLOCKS; k++)
        s += parts[k];
    float norm = (float)sqrt(s), max_norm = (float)run->set.opt->grad_clip;
    float clip = norm > max_norm ? max_norm / (norm + 1e-6f) : 1.0f;
    *(float *)(ptr(run->model.gnorm) + (size_t)nl * GPT_SUMSQ_BLOCKS * sizeof(double)) = clip;
    run->clip_host[0] = norm, run->clip_host[1] = clip;
}

/* Layer l's AdamW (hp: the step's, weight decay on the 2-D part), clipped; on the
 * GPU's call the new bf16 working copy too (a CPU layer's is made in its forward, as
 * its uses declare). */
void gpt_simref_adamw(gpt_run_t *run, int l, const uvmrt_adamw_t *hp) {
    const layer_params_t *p = &run->model.lp[l];
    uvmrt_adamw_t hd = *hp, hn;
    hd.grad_scale = run->clip_host[1];
    hn = hd;
    hn.weight_decay = 0.0;
    float *w = f32(p->w), *m = f32(p->m), *v = f32(p->v), *g = f32(p->g);
    size_t nd = p->n_decay;
    uint16_t *wh = on_cpu(run, l) ? NULL : b16(p->wh);
    uvmrt_status_t st = uvmrt_adamw_cpu(&hd, w, m, v, g, nd, wh);
    if (st == UVMRT_OK)
        st = uvmrt_adamw_cpu(&hn, w + nd, m + nd, v + nd, g + nd, p->n - nd, wh ? wh + nd : NULL);
    if (st != UVMRT_OK)
        gpt_run_fail(run, "layer %d: uvmrt_adamw_cpu failed: %s (%s)", l, uvmrt_status_str(st),
                     uvmrt_status_name(st));
}

/* Sampling: the logits of one row into logits_host (bf16, as the GPU copies them). */
void gpt_simref_head_sample(gpt_run_t *run, int row) {
    int C = run->model.C, Vp = run->model.Vp;
    const float *lnf = head_lnf(run);
    gref_matmul_forward(run->ref->row, lnf + (size_t)row * C, run->ref->wte, NULL, 1, C, Vp);
    for (int k = 0; k < Vp; k++)
        run->logits_host[k] = mlp_f32_to_bf16(run->ref->row[k]);
}
