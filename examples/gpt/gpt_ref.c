/*
 * gpt_ref.c -- GPT-2 forward and backward in plain C (see gpt_ref.h).
 *
 * Written for reading, in llm.c's train_gpt2.c layer-by-layer form; transcendental
 * functions are the double ones (a reference needs no fast paths).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_ref.h"

const char *const gpt_param_names[GPT_NUM_PARAM_TENSORS] = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
};

void gpt_param_sizes(const gpt_shape_t *s, size_t sz[GPT_NUM_PARAM_TENSORS]) {
    size_t C = (size_t)s->C, L = (size_t)s->L;
    sz[0] = (size_t)s->Vp * C;
    sz[1] = (size_t)s->maxT * C;
    sz[2] = L * C;
    sz[3] = L * C;
    sz[4] = L * 3 * C * C;
    sz[5] = L * 3 * C;
    sz[6] = L * C * C;
    sz[7] = L * C;
    sz[8] = L * C;
    sz[9] = L * C;
    sz[10] = L * 4 * C * C;
    sz[11] = L * 4 * C;
    sz[12] = L * C * 4 * C;
    sz[13] = L * C;
    sz[14] = C;
    sz[15] = C;
}

size_t gpt_num_params(const gpt_shape_t *s) {
    size_t sz[GPT_NUM_PARAM_TENSORS], n = 0;
    gpt_param_sizes(s, sz);
    for (int i = 0; i < GPT_NUM_PARAM_TENSORS; i++)
        n += sz[i];
    return n;
}

/* ----------------------------------------------------------------------------
 * layers */

void gref_encoder_forward(gref_t *out, const int *inp, const gref_t *wte, const gref_t *wpe,
                          int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            gref_t *o = out + ((size_t)b * T + t) * C;
            const gref_t *we = wte + (size_t)inp[b * T + t] * C, *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = we[c] + pe[c];
        }
}

void gref_encoder_backward(gref_t *dwte, gref_t *dwpe, const gref_t *dout, const int *inp,
                           int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const gref_t *d = dout + ((size_t)b * T + t) * C;
            gref_t *we = dwte + (size_t)inp[b * T + t] * C, *pe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                we[c] += d[c];
                pe[c] += d[c];
            }
        }
}

void gref_layernorm_forward(gref_t *out, gref_t *mean, gref_t *rstd, const gref_t *inp,
                            const gref_t *w, const gref_t *b, int N, int C) {
    for (int i = 0; i < N; i++) {
        const gref_t *x = inp + (size_t)i * C;
        gref_t m = 0, v = 0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m);
        v /= C;
        gref_t r = (gref_t)(1.0 / sqrt((double)v + 1e-5));
        for (int c = 0; c < C; c++)
            out[(size_t)i * C + c] = (x[c] - m) * r * w[c] + b[c];
        mean[i] = m;
        rstd[i] = r;
    }
}

void gref_layernorm_backward(gref_t *dinp, gref_t *dw, gref_t *db, const gref_t *dout,
                             const gref_t *inp, const gref_t *w, const gref_t *mean,
                             const gref_t *rstd, int N, int C) {
    for (int i = 0; i < N; i++) {
        const gref_t *x = inp + (size_t)i * C, *d = dout + (size_t)i * C;
        gref_t m = mean[i], r = rstd[i], dnorm_mean = 0, dnorm_norm_mean = 0;
        for (int c = 0; c < C; c++) {
            gref_t norm = (x[c] - m) * r, dnorm = w[c] * d[c];
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            gref_t norm = (x[c] - m) * r, dnorm = w[c] * d[c];
            db[c] += d[c];
            dw[c] += norm * d[c];
            dinp[(size_t)i * C + c] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
        }
    }
}

void gref_matmul_forward(gref_t *out, const gref_t *inp, const gref_t *w, const gref_t *bias,
                         int N, int K, int OC) {
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            gref_t acc = bias ? bias[o] : 0;
            for (int k = 0; k < K; k++)
                acc += inp[(size_t)i * K + k] * w[(size_t)o * K + k];
            out[(size_t)i * OC + o] = acc;
        }
}

void gref_matmul_backward(gref_t *dinp, gref_t *dw, gref_t *dbias, const gref_t *dout,
                          const gref_t *inp, const gref_t *w, int N, int K, int OC) {
    for (int i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            gref_t d = dout[(size_t)i * OC + o];
            if (dbias)
                dbias[o] += d;
            for (int k = 0; k < K; k++) {
                if (dinp)
                    dinp[(size_t)i * K + k] += d * w[(size_t)o * K + k];
                dw[(size_t)o * K + k] += d * inp[(size_t)i * K + k];
            }
        }
}

void gref_attention_forward(gref_t *out, gref_t *lse, const gref_t *qkv, int B, int T, int C,
                            int NH) {
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    gref_t *p = malloc((size_t)T * sizeof *p);
    if (p == NULL)
        return;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                const gref_t *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                gref_t mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const gref_t *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    gref_t s = 0;
                    for (int d = 0; d < hs; d++)
                        s += q[d] * k[d];
                    p[u] = (gref_t)(s * scale);
                    if (p[u] > mx)
                        mx = p[u];
                }
                gref_t sum = 0;
                for (int u = 0; u <= t; u++) {
                    p[u] = (gref_t)exp((double)(p[u] - mx));
                    sum += p[u];
                }
                gref_t *o = out + ((size_t)b * T + t) * C + h * hs;
                for (int d = 0; d < hs; d++)
                    o[d] = 0;
                for (int u = 0; u <= t; u++) {
                    const gref_t *v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hs;
                    for (int d = 0; d < hs; d++)
                        o[d] += p[u] / sum * v[d];
                }
                if (lse)
                    lse[((size_t)b * NH + h) * T + t] = mx + (gref_t)log((double)sum);
            }
    free(p);
}

void gref_attention_backward(gref_t *dqkv, const gref_t *dout, const gref_t *qkv, int B, int T,
                             int C, int NH) {
    int hs = C / NH;
    double scale = 1.0 / sqrt((double)hs);
    gref_t *p = malloc((size_t)T * sizeof *p), *dp = malloc((size_t)T * sizeof *dp);
    if (p == NULL || dp == NULL) {
        free(p);
        free(dp);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                size_t row = (size_t)b * T + t;
                const gref_t *q = qkv + row * 3 * C + h * hs;
                const gref_t *d = dout + row * C + h * hs;
                gref_t *dq = dqkv + row * 3 * C + h * hs;
                /* recompute the probabilities */
                gref_t mx = -INFINITY, sum = 0;
                for (int u = 0; u <= t; u++) {
                    const gref_t *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    gref_t s = 0;
                    for (int e = 0; e < hs; e++)
                        s += q[e] * k[e];
                    p[u] = (gref_t)(s * scale);
                    if (p[u] > mx)
                        mx = p[u];
                }
                for (int u = 0; u <= t; u++) {
                    p[u] = (gref_t)exp((double)(p[u] - mx));
                    sum += p[u];
                }
                for (int u = 0; u <= t; u++)
                    p[u] /= sum;
                /* dv += p * dout; dp = dout . v; ds = p * (dp - sum(p * dp)) */
                gref_t pdp = 0;
                for (int u = 0; u <= t; u++) {
                    size_t ru = (size_t)b * T + u;
                    const gref_t *v = qkv + ru * 3 * C + 2 * C + h * hs;
                    gref_t *dv = dqkv + ru * 3 * C + 2 * C + h * hs;
                    gref_t acc = 0;
                    for (int e = 0; e < hs; e++) {
                        dv[e] += p[u] * d[e];
                        acc += d[e] * v[e];
                    }
                    dp[u] = acc;
                    pdp += p[u] * acc;
                }
                for (int u = 0; u <= t; u++) {
                    size_t ru = (size_t)b * T + u;
                    const gref_t *k = qkv + ru * 3 * C + C + h * hs;
                    gref_t *dk = dqkv + ru * 3 * C + C + h * hs;
                    gref_t ds = (gref_t)(p[u] * (dp[u] - pdp) * scale);
                    for (int e = 0; e < hs; e++) {
                        dq[e] += ds * k[e];
                        dk[e] += ds * q[e];
                    }
                }
            }
    free(p);
    free(dp);
}

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void gref_gelu_forward(gref_t *out, const gref_t *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (gref_t)(0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x))));
    }
}

void gref_gelu_backward(gref_t *dinp, const gref_t *inp, const gref_t *dout, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i], u = GELU_K * (x + 0.044715 * x * x * x), th = tanh(u);
        double sech2 = 1.0 - th * th;
        double g = 0.5 * (1.0 + th) + 0.5 * x * sech2 * GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
        dinp[i] += (gref_t)(g * dout[i]);
    }
}

void gref_crossentropy(gref_t *losses, gref_t *dlogits, const gref_t *logits, const int *targets,
                       int N, int V, int Vp, gref_t dscale) {
    for (int i = 0; i < N; i++) {
        const gref_t *l = logits + (size_t)i * Vp;
        gref_t mx = -INFINITY, sum = 0;
        for (int j = 0; j < V; j++)
            if (l[j] > mx)
                mx = l[j];
        for (int j = 0; j < V; j++)
            sum += (gref_t)exp((double)(l[j] - mx));
        losses[i] = mx + (gref_t)log((double)sum) - l[targets[i]];
        if (dlogits == NULL)
            continue;
        gref_t *d = dlogits + (size_t)i * Vp;
        for (int j = 0; j < Vp; j++) {
            gref_t pj = j < V ? (gref_t)exp((double)(l[j] - mx)) / sum : 0;
            d[j] = (pj - (j == targets[i] ? 1 : 0)) * dscale;
        }
    }
}

/* ----------------------------------------------------------------------------
 * the model */

/* Pointers to the 16 tensors of a parameter (or gradient) array. */
static void carve(const gpt_shape_t *s, gref_t *base, gref_t *t[GPT_NUM_PARAM_TENSORS]) {
    size_t sz[GPT_NUM_PARAM_TENSORS];
    gpt_param_sizes(s, sz);
    for (int i = 0; i < GPT_NUM_PARAM_TENSORS; i++) {
        t[i] = base;
        base += sz[i];
    }
}

enum { WTE, WPE, LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB, LN2W, LN2B, FCW, FCB, FCPROJW,
       FCPROJB, LNFW, LNFB };

/* The activations of one forward pass; one allocation carved into these. */
typedef struct acts {
    gref_t *encoded;                 /* (N,C) */
    gref_t *ln1, *ln1_mean, *ln1_rstd; /* (L,N,C), (L,N), (L,N) */
    gref_t *qkv;                     /* (L,N,3C) */
    gref_t *atty;                    /* (L,N,C) */
    gref_t *attproj;                 /* (L,N,C) */
    gref_t *res2;                    /* (L,N,C) */
    gref_t *ln2, *ln2_mean, *ln2_rstd;
    gref_t *fch, *fch_gelu;          /* (L,N,4C) */
    gref_t *fcproj;                  /* (L,N,C) */
    gref_t *res3;                    /* (L,N,C) */
    gref_t *lnf, *lnf_mean, *lnf_rstd; /* (N,C), (N), (N) */
    gref_t *logits;                  /* (N,Vp) */
    gref_t *losses;                  /* (N) */
} acts_t;

static gref_t *acts_alloc(acts_t *a, size_t L, size_t N, size_t C, size_t Vp) {
    size_t sizes[] = {N * C, L * N * C, L * N, L * N, L * N * 3 * C, L * N * C, L * N * C,
                      L * N * C, L * N * C, L * N, L * N, L * N * 4 * C, L * N * 4 * C,
                      L * N * C, L * N * C, N * C, N, N, N * Vp, N};
    gref_t **ptrs[] = {&a->encoded, &a->ln1, &a->ln1_mean, &a->ln1_rstd, &a->qkv, &a->atty,
                       &a->attproj, &a->res2, &a->ln2, &a->ln2_mean, &a->ln2_rstd, &a->fch,
                       &a->fch_gelu, &a->fcproj, &a->res3, &a->lnf, &a->lnf_mean, &a->lnf_rstd,
                       &a->logits, &a->losses};
    size_t n = 0, k = sizeof sizes / sizeof sizes[0];
    for (size_t i = 0; i < k; i++)
        n += sizes[i];
    gref_t *mem = calloc(n, sizeof *mem);
    if (mem == NULL)
        return NULL;
    gref_t *p = mem;
    for (size_t i = 0; i < k; i++) {
        *ptrs[i] = p;
        p += sizes[i];
    }
    return mem;
}

double gpt_ref_loss(const gpt_shape_t *s, const gref_t *params, const int *inp,
                    const int *targets, int B, int T, gref_t *grads) {
    int L = s->L, C = s->C, NH = s->NH, V = s->V, Vp = s->Vp, N = B * T;
    size_t NC = (size_t)N * C, NC3 = 3 * NC, NC4 = 4 * NC;
    gref_t *p[GPT_NUM_PARAM_TENSORS];
    carve(s, (gref_t *)params, p);
    acts_t a;
    gref_t *mem = acts_alloc(&a, (size_t)L, (size_t)N, (size_t)C, (size_t)Vp);
    if (mem == NULL)
        return NAN;

    /* forward */
    gref_encoder_forward(a.encoded, inp, p[WTE], p[WPE], B, T, C);
    for (int l = 0; l < L; l++) {
        const gref_t *x = l == 0 ? a.encoded : a.res3 + (size_t)(l - 1) * NC;
        gref_t *ln1 = a.ln1 + l * NC, *qkv = a.qkv + l * NC3, *atty = a.atty + l * NC;
        gref_t *attproj = a.attproj + l * NC, *res2 = a.res2 + l * NC, *ln2 = a.ln2 + l * NC;
        gref_t *fch = a.fch + l * NC4, *fchg = a.fch_gelu + l * NC4;
        gref_t *fcproj = a.fcproj + l * NC, *res3 = a.res3 + l * NC;
        gref_layernorm_forward(ln1, a.ln1_mean + (size_t)l * N, a.ln1_rstd + (size_t)l * N, x,
                               p[LN1W] + l * C, p[LN1B] + l * C, N, C);
        gref_matmul_forward(qkv, ln1, p[QKVW] + (size_t)l * 3 * C * C, p[QKVB] + l * 3 * C, N, C,
                            3 * C);
        gref_attention_forward(atty, NULL, qkv, B, T, C, NH);
        gref_matmul_forward(attproj, atty, p[ATTPROJW] + (size_t)l * C * C, p[ATTPROJB] + l * C,
                            N, C, C);
        for (size_t i = 0; i < NC; i++)
            res2[i] = x[i] + attproj[i];
        gref_layernorm_forward(ln2, a.ln2_mean + (size_t)l * N, a.ln2_rstd + (size_t)l * N, res2,
                               p[LN2W] + l * C, p[LN2B] + l * C, N, C);
        gref_matmul_forward(fch, ln2, p[FCW] + (size_t)l * 4 * C * C, p[FCB] + l * 4 * C, N, C,
                            4 * C);
        gref_gelu_forward(fchg, fch, NC4);
        gref_matmul_forward(fcproj, fchg, p[FCPROJW] + (size_t)l * 4 * C * C, p[FCPROJB] + l * C,
                            N, 4 * C, C);
        for (size_t i = 0; i < NC; i++)
            res3[i] = res2[i] + fcproj[i];
    }
    const gref_t *xL = L > 0 ? a.res3 + (size_t)(L - 1) * NC : a.encoded;
    gref_layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, xL, p[LNFW], p[LNFB], N, C);
    gref_matmul_forward(a.logits, a.lnf, p[WTE], NULL, N, C, Vp);
    gref_t *dlogits = NULL, *dbuf = NULL;
    if (grads) {
        /* gradients of activations: one scratch set of the largest block shapes */
        dbuf = calloc((size_t)N * Vp + 2 * NC4 + NC3 + 6 * NC, sizeof *dbuf);
        if (dbuf == NULL) {
            free(mem);
            return NAN;
        }
        dlogits = dbuf;
    }
    gref_crossentropy(a.losses, dlogits, a.logits, targets, N, V, Vp, (gref_t)(1.0 / N));
    double loss = 0;
    for (int i = 0; i < N; i++)
        loss += a.losses[i];
    loss /= N;
    if (grads == NULL) {
        free(mem);
        return loss;
    }

    /* backward */
    memset(grads, 0, gpt_num_params(s) * sizeof *grads);
    gref_t *g[GPT_NUM_PARAM_TENSORS];
    carve(s, grads, g);
    gref_t *dres = dlogits + (size_t)N * Vp;       /* (N,C) d loss / d residual stream */
    gref_t *dlnf = dres + NC;                     /* (N,C) */
    gref_t *dfchg = dlnf + NC, *dfch = dfchg + NC4; /* (N,4C) */
    gref_t *dqkv = dfch + NC4;                    /* (N,3C) */
    gref_t *datty = dqkv + NC3, *dln = datty + NC, *dres2 = dln + NC, *dx = dres2 + NC;
    gref_matmul_backward(dlnf, g[WTE], NULL, dlogits, a.lnf, p[WTE], N, C, Vp);
    gref_layernorm_backward(dres, g[LNFW], g[LNFB], dlnf, xL, p[LNFW], a.lnf_mean, a.lnf_rstd, N,
                            C);
    for (int l = L - 1; l >= 0; l--) {
        const gref_t *x = l == 0 ? a.encoded : a.res3 + (size_t)(l - 1) * NC;
        gref_t *ln1 = a.ln1 + l * NC, *qkv = a.qkv + l * NC3, *atty = a.atty + l * NC;
        gref_t *res2 = a.res2 + l * NC, *ln2 = a.ln2 + l * NC;
        gref_t *fch = a.fch + l * NC4, *fchg = a.fch_gelu + l * NC4;
        memset(dfchg, 0, NC4 * sizeof *dfchg);
        memset(dfch, 0, NC4 * sizeof *dfch);
        memset(dqkv, 0, NC3 * sizeof *dqkv);
        memset(datty, 0, NC * sizeof *datty);
        memset(dln, 0, NC * sizeof *dln);
        /* res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
        memcpy(dres2, dres, NC * sizeof *dres2);
        gref_matmul_backward(dfchg, g[FCPROJW] + (size_t)l * 4 * C * C, g[FCPROJB] + l * C, dres,
                             fchg, p[FCPROJW] + (size_t)l * 4 * C * C, N, 4 * C, C);
        gref_gelu_backward(dfch, fch, dfchg, NC4);
        gref_matmul_backward(dln, g[FCW] + (size_t)l * 4 * C * C, g[FCB] + l * 4 * C, dfch, ln2,
                             p[FCW] + (size_t)l * 4 * C * C, N, C, 4 * C);
        gref_layernorm_backward(dres2, g[LN2W] + l * C, g[LN2B] + l * C, dln, res2,
                                p[LN2W] + l * C, a.ln2_mean + (size_t)l * N,
                                a.ln2_rstd + (size_t)l * N, N, C);
        /* res2 = x + attproj(attention(qkv(ln1(x)))) */
        memcpy(dx, dres2, NC * sizeof *dx);
        gref_matmul_backward(datty, g[ATTPROJW] + (size_t)l * C * C, g[ATTPROJB] + l * C, dres2,
                             atty, p[ATTPROJW] + (size_t)l * C * C, N, C, C);
        gref_attention_backward(dqkv, datty, qkv, B, T, C, NH);
        memset(dln, 0, NC * sizeof *dln);
        gref_matmul_backward(dln, g[QKVW] + (size_t)l * 3 * C * C, g[QKVB] + l * 3 * C, dqkv, ln1,
                             p[QKVW] + (size_t)l * 3 * C * C, N, C, 3 * C);
        gref_layernorm_backward(dx, g[LN1W] + l * C, g[LN1B] + l * C, dln, x, p[LN1W] + l * C,
                                a.ln1_mean + (size_t)l * N, a.ln1_rstd + (size_t)l * N, N, C);
        memcpy(dres, dx, NC * sizeof *dres);
    }
    gref_encoder_backward(g[WTE], g[WPE], dres, inp, B, T, C);
    free(dbuf);
    free(mem);
    return loss;
}
