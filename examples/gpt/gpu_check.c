/*
 * gpu_check.c -- gpt-gpu-check: uvmrt-gpt's GPU kernels against the C reference
 * (gpt_ref.c, fp32) on a GPU; run by examples/gpt/gpu-check.sh.
 *
 *   gpt-gpu-check             every kernel on small shapes with ragged edges; the
 *                             reference gets the same bf16-rounded inputs; the error
 *                             is the relative L2 norm ||got - want|| / ||want||
 *   gpt-gpu-check --attn      the attention kernels (mma) against the scalar fp32
 *                             ones at the trainer's sizes (T 64 to 2048, B*NH 1 to
 *                             400), rerun bitwise, and their times next to WMMA's
 *   gpt-gpu-check --bench B T C L
 *                             times one block's parts at the trainer's shapes (CUDA
 *                             events, the median of 20 after a warm-up): attention
 *                             forward and backward, the block's matmuls, the rest,
 *                             and one classifier chunk; what bounds a step
 *   gpt-gpu-check --model WEIGHTS GRADS LOSS B T SEED
 *                             the whole model: uvmrt-gpt's step-1 gradients
 *                             (--dump-grads) and loss against gpt_ref_loss on the
 *                             same weights (--dump-weights) and tokens
 *
 * Prints one line per check ("ok" or "FAIL", the error, the tolerance); exit 1 when
 * any check fails.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "../common/adamw_cpu.h"
#include "../common/train_math.h"
#include "gpt_attn_cudnn.h"
#include "gpt_gpu.h"
#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "gpt_tokens.h"
#include "gpu_check_attention.h"

static int failures;
static uint64_t rng = 88172645463325252ull;

static float urand(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * (1.0 / 9007199254740992.0));
}

static void check(const char *name, double err, double tol) {
    int ok = err <= tol && isfinite(err);
    printf("%-4s %-46s rel_l2 %.3e  (tolerance %.1e)\n", ok ? "ok" : "FAIL", name, err, tol);
    if (!ok)
        failures++;
}

static double rel_l2(const float *got, const float *want, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void cuda_ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "gpt-gpu-check: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void kernel_ok(int e, const char *what) {
    cuda_ok((cudaError_t)e, what);
    cuda_ok(cudaDeviceSynchronize(), what);
}

/* random floats rounded to bf16 values (the reference's input) and their patterns */
static float *rand_f(size_t n, float lo, float hi) {
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++)
        f[i] = urand(lo, hi);
    return f;
}

static float *rand_b(size_t n, float lo, float hi, uint16_t **bits) {
    float *f = rand_f(n, lo, hi);
    *bits = malloc(n * sizeof **bits);
    for (size_t i = 0; i < n; i++) {
        (*bits)[i] = mlp_f32_to_bf16(f[i]);
        f[i] = mlp_bf16_to_f32((*bits)[i]);
    }
    return f;
}

static void *dev_from(const void *h, size_t bytes) {
    void *d = NULL;
    cuda_ok(cudaMalloc(&d, bytes), "cudaMalloc");
    if (h)
        cuda_ok(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    else
        cuda_ok(cudaMemset(d, 0, bytes), "cudaMemset");
    return d;
}

static float *host_f32(const void *d, size_t n) {
    float *h = malloc(n * sizeof *h);
    cuda_ok(cudaMemcpy(h, d, n * sizeof *h, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return h;
}

static float *host_b16(const void *d, size_t n) {
    uint16_t *b = malloc(n * 2);
    cuda_ok(cudaMemcpy(b, d, n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    float *h = malloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++)
        h[i] = mlp_bf16_to_f32(b[i]);
    free(b);
    return h;
}

/* ---------------------------------------------------------------------------- */

static void check_encoder(void) {
    int B = 2, T = 100, C = 128, V = 300;
    size_t N = (size_t)B * T;
    uint16_t *wte_b, *wpe_b;
    float *wte = rand_b((size_t)V * C, -1, 1, &wte_b), *wpe = rand_b((size_t)T * C, -1, 1, &wpe_b);
    int *inp = malloc(N * sizeof *inp);
    for (size_t i = 0; i < N; i++)
        inp[i] = (int)urand(0, (float)V - 0.01f);
    float *want = calloc(N * C, sizeof *want);
    gref_encoder_forward(want, inp, wte, wpe, B, T, C);
    void *d_out = dev_from(NULL, N * C * 4), *d_inp = dev_from(inp, N * 4);
    void *d_wte = dev_from(wte_b, (size_t)V * C * 2), *d_wpe = dev_from(wpe_b, (size_t)T * C * 2);
    kernel_ok(gpt_encoder_forward_launch(d_out, d_inp, d_wte, d_wpe, B, T, C, NULL), "encoder");
    float *got = host_f32(d_out, N * C);
    check("encoder forward", rel_l2(got, want, N * C), 1e-6);
    /* backward: buckets as uvmrt-gpt builds them */
    float *dout = rand_f(N * C, -1, 1), *dwte = rand_f((size_t)V * C, -1, 1);
    float *dwpe = calloc((size_t)T * C, sizeof *dwpe);
    int *rows = malloc(N * 4), *start = malloc((N + 1) * 4), *tok = malloc(N * 4);
    int *count = calloc((size_t)V + 1, sizeof *count), nb = 0;
    for (size_t i = 0; i < N; i++)
        count[inp[i] + 1]++;
    for (int v = 0; v < V; v++)
        count[v + 1] += count[v];
    for (int v = 0; v < V; v++)
        if (count[v + 1] > count[v])
            start[nb] = count[v], tok[nb++] = v;
    start[nb] = (int)N;
    for (size_t i = 0; i < N; i++)
        rows[count[inp[i]]++] = (int)i;
    void *d_dout = dev_from(dout, N * C * 4), *d_dwte = dev_from(dwte, (size_t)V * C * 4);
    void *d_dwpe = dev_from(NULL, (size_t)T * C * 4), *d_rows = dev_from(rows, N * 4);
    void *d_start = dev_from(start, (N + 1) * 4), *d_tok = dev_from(tok, N * 4);
    gref_encoder_backward(dwte, dwpe, dout, inp, B, T, C);
    kernel_ok(gpt_encoder_backward_launch(d_dwte, d_dwpe, d_dout, d_rows, d_start, d_tok, nb, B,
                                          T, C, NULL), "encoder backward");
    float *g1 = host_f32(d_dwte, (size_t)V * C), *g2 = host_f32(d_dwpe, (size_t)T * C);
    check("encoder backward dwte", rel_l2(g1, dwte, (size_t)V * C), 1e-6);
    check("encoder backward dwpe", rel_l2(g2, dwpe, (size_t)T * C), 1e-6);
}

/* C 768 and 1600 take the vector kernels (the row in registers), 100 the vector ones
 * with lanes masked, 130 and 2500 the scalar ones */
static void check_layernorm(int N, int C) {
    char name[96];
    size_t n = (size_t)N * C;
    uint16_t *wb, *bb, *doutb;
    float *inp = rand_f(n, -2, 3), *w = rand_b(C, 0.5f, 1.5f, &wb), *b = rand_b(C, -1, 1, &bb);
    float *want = malloc(n * 4), *mean = malloc(N * 4), *rstd = malloc(N * 4);
    gref_layernorm_forward(want, mean, rstd, inp, w, b, N, C);
    void *d_inp = dev_from(inp, n * 4), *d_w = dev_from(wb, C * 2), *d_b = dev_from(bb, C * 2);
    void *d_out = dev_from(NULL, n * 2), *d_m = dev_from(NULL, N * 4), *d_r = dev_from(NULL, N * 4);
    kernel_ok(gpt_layernorm_forward_launch(d_out, d_m, d_r, d_inp, d_w, d_b, N, C, NULL), "ln");
    float *got = host_b16(d_out, n), *gm = host_f32(d_m, N), *gr = host_f32(d_r, N);
    snprintf(name, sizeof name, "layernorm forward out (bf16) C%d", C);
    check(name, rel_l2(got, want, n), 1e-2);
    snprintf(name, sizeof name, "layernorm forward mean C%d", C);
    check(name, rel_l2(gm, mean, N), 1e-5);
    snprintf(name, sizeof name, "layernorm forward rstd C%d", C);
    check(name, rel_l2(gr, rstd, N), 1e-5);
    float *dout = rand_b(n, -1, 1, &doutb), *dinp = rand_f(n, -1, 1);
    float *dw = calloc(C, 4), *db = calloc(C, 4);
    void *d_dout = dev_from(doutb, n * 2), *d_dinp = dev_from(dinp, n * 4);
    void *d_dw = dev_from(NULL, C * 4), *d_db = dev_from(NULL, C * 4);
    void *d_s = dev_from(NULL, 2 * gpt_colsum_scratch_floats(N, C) * 4);
    gref_layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
    void *d_dbf = dev_from(NULL, n * 2), *d_cvt = dev_from(NULL, n * 2);
    kernel_ok(gpt_layernorm_backward_launch(d_dinp, d_dbf, d_dw, d_db, d_s, d_dout, d_inp, d_w, d_m, d_r,
                                            N, C, 1, NULL), "ln backward");
    float *g1 = host_f32(d_dinp, n), *g2 = host_f32(d_dw, C), *g3 = host_f32(d_db, C);
    if (n % 4 == 0) { /* its bf16 copy: bitwise the conversion kernel's of its fp32 result */
        kernel_ok(gpt_f32_to_bf16_launch(d_cvt, d_dinp, n, NULL), "to bf16");
        float *b1 = host_b16(d_dbf, n), *b2 = host_b16(d_cvt, n); /* bf16 -> fp32 is exact */
        snprintf(name, sizeof name, "layernorm backward dinp's bf16 copy bitwise the conversion's C%d", C);
        check(name, memcmp(b1, b2, n * sizeof *b1) ? 1.0 : 0.0, 0.0);
        free(b1), free(b2);
    }
    snprintf(name, sizeof name, "layernorm backward dinp (accumulated) C%d", C);
    check(name, rel_l2(g1, dinp, n), 1e-4);
    snprintf(name, sizeof name, "layernorm backward dw C%d", C);
    check(name, rel_l2(g2, dw, C), 1e-4);
    snprintf(name, sizeof name, "layernorm backward db C%d", C);
    check(name, rel_l2(g3, db, C), 1e-4);
}

static void check_gelu_bias(void) {
    size_t n = 8192 * 8;
    uint16_t *xb, *db;
    float *x = rand_b(n, -4, 4, &xb), *d = rand_b(n, -1, 1, &db);
    float *want = malloc(n * 4), *dwant = calloc(n, 4);
    gref_gelu_forward(want, x, n);
    gref_gelu_backward(dwant, x, d, n);
    void *d_x = dev_from(xb, n * 2), *d_o = dev_from(NULL, n * 2), *d_d = dev_from(db, n * 2);
    kernel_ok(gpt_gelu_forward_launch(d_o, d_x, n, NULL), "gelu");
    kernel_ok(gpt_gelu_backward_launch(d_d, d_x, n, NULL), "gelu backward");
    float *g1 = host_b16(d_o, n), *g2 = host_b16(d_d, n);
    check("gelu forward (bf16)", rel_l2(g1, want, n), 1e-2);
    check("gelu backward (bf16)", rel_l2(g2, dwant, n), 1e-2);
    int N = 1000, OC = 384;
    size_t m = (size_t)N * OC;
    uint16_t *ob;
    float *dout = rand_b(m, -1, 1, &ob), *bw = calloc(OC, 4), *bw2 = calloc(OC, 4);
    for (size_t i = 0; i < m; i++)
        bw[i % OC] += dout[i];
    void *d_dout = dev_from(ob, m * 2), *d_dout32 = dev_from(dout, m * 4);
    void *d_bw = dev_from(NULL, OC * 4), *d_s = dev_from(NULL, gpt_colsum_scratch_floats(N, OC) * 4);
    kernel_ok(gpt_bias_grad_launch(d_bw, d_s, d_dout, N, OC, NULL), "bias grad");
    float *g3 = host_f32(d_bw, OC);
    check("bias gradient (bf16 dout)", rel_l2(g3, bw, OC), 1e-5);
    kernel_ok(gpt_bias_grad_f32_launch(d_bw, d_s, d_dout32, N, OC, NULL), "bias grad f32");
    float *g4 = host_f32(d_bw, OC);
    (void)bw2;
    check("bias gradient (fp32 dout)", rel_l2(g4, bw, OC), 1e-5);
    /* the same rows at an address the 16-byte loads cannot take: the scalar kernels,
     * whose per-column order is the vector ones': the same bits */
    uint16_t *ob1 = malloc((m + 8) * 2);
    float *d1 = malloc((m + 4) * 4);
    memcpy(ob1 + 1, ob, m * 2);
    memcpy(d1 + 1, dout, m * 4);
    char *d_odd = dev_from(ob1, (m + 8) * 2), *d_odd32 = dev_from(d1, (m + 4) * 4);
    void *d_bw2 = dev_from(NULL, OC * 4);
    kernel_ok(gpt_bias_grad_launch(d_bw2, d_s, (const uint16_t *)(d_odd + 2), N, OC, NULL), "bias grad (scalar)");
    float *g5 = host_f32(d_bw2, OC);
    check("bias gradient bf16: scalar kernel bitwise the vector one", memcmp(g5, g3, OC * 4) ? 1.0 : 0.0, 0.0);
    kernel_ok(gpt_bias_grad_f32_launch(d_bw2, d_s, (const float *)(d_odd32 + 4), N, OC, NULL), "bias grad f32 (scalar)");
    float *g6 = host_f32(d_bw2, OC);
    check("bias gradient fp32: scalar kernel bitwise the vector one", memcmp(g6, g4, OC * 4) ? 1.0 : 0.0, 0.0);
    /* a width that is not a multiple of 8 (bf16) or 4 (fp32) */
    int OC2 = 390;
    size_t m2 = (size_t)N * OC2;
    float *e = rand_b(m2, -1, 1, &ob), *ew = calloc(OC2, 4);
    for (size_t i = 0; i < m2; i++)
        ew[i % OC2] += e[i];
    void *d_e = dev_from(ob, m2 * 2), *d_e32 = dev_from(e, m2 * 4), *d_ew = dev_from(NULL, OC2 * 4);
    void *d_s2 = dev_from(NULL, gpt_colsum_scratch_floats(N, OC2) * 4);
    kernel_ok(gpt_bias_grad_launch(d_ew, d_s2, d_e, N, OC2, NULL), "bias grad 390");
    float *g7 = host_f32(d_ew, OC2);
    check("bias gradient (bf16 dout, 390 columns)", rel_l2(g7, ew, OC2), 1e-5);
    kernel_ok(gpt_bias_grad_f32_launch(d_ew, d_s2, d_e32, N, OC2, NULL), "bias grad f32 390");
    float *g8 = host_f32(d_ew, OC2);
    check("bias gradient (fp32 dout, 390 columns)", rel_l2(g8, ew, OC2), 1e-5);
}

/* out = inp + bias per row: the vector kernel (C % 4 == 0) and the scalar one */
static void check_residual_bias(void) {
    const int shapes[2][2] = {{300, 768}, {70, 130}};
    for (int k = 0; k < 2; k++) {
        int N = shapes[k][0], C = shapes[k][1];
        size_t n = (size_t)N * C;
        uint16_t *bb;
        float *x = rand_f(n, -2, 2), *b = rand_b(C, -1, 1, &bb), *want = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            want[i] = x[i] + b[i % C];
        void *d_x = dev_from(x, n * 4), *d_b = dev_from(bb, C * 2), *d_o = dev_from(NULL, n * 4);
        kernel_ok(gpt_residual_bias_launch(d_o, d_x, d_b, N, C, NULL), "residual");
        float *got = host_f32(d_o, n);
        char name[64];
        snprintf(name, sizeof name, "residual + bias C%d (exact)", C);
        check(name, memcmp(got, want, n * 4) ? 1.0 : 0.0, 0.0);
    }
}

typedef int (*attn_fwd_fn)(uint16_t *, float *, const uint16_t *, int, int, int, int,
                           uvmrt_stream_t);
typedef int (*attn_bwd_fn)(uint16_t *, float *, const uint16_t *, const uint16_t *,
                           const uint16_t *, const float *, int, int, int, int, uvmrt_stream_t);

static void check_attention_with(int B, int T, int NH, attn_fwd_fn fwd, attn_bwd_fn bwd,
                                 const char *kind) {
    int C = NH * GPT_HEAD_SIZE;
    size_t N = (size_t)B * T, nq = N * 3 * C, no = N * C, nl = (size_t)B * NH * T;
    char name[80];
    uint16_t *qb, *db;
    float *qkv = rand_b(nq, -1.5f, 1.5f, &qb), *dout = rand_b(no, -1, 1, &db);
    float *want = malloc(no * 4), *lse = malloc(nl * 4), *dwant = calloc(nq, 4);
    gref_attention_forward(want, lse, qkv, B, T, C, NH);
    gref_attention_backward(dwant, dout, qkv, B, T, C, NH);
    void *d_qkv = dev_from(qb, nq * 2), *d_out = dev_from(NULL, no * 2);
    void *d_lse = dev_from(NULL, nl * 4), *d_dout = dev_from(db, no * 2);
    void *d_dqkv = dev_from(NULL, nq * 2), *d_delta = dev_from(NULL, nl * 4);
    kernel_ok(fwd(d_out, d_lse, d_qkv, B, T, C, NH, NULL), "attention");
    float *got = host_b16(d_out, no), *gl = host_f32(d_lse, nl);
    snprintf(name, sizeof name, "%s attention forward B%d T%d NH%d", kind, B, T, NH);
    check(name, rel_l2(got, want, no), 2e-2);
    snprintf(name, sizeof name, "%s attention lse B%d T%d NH%d", kind, B, T, NH);
    check(name, rel_l2(gl, lse, nl), 1e-4);
    /* the backward takes the kernel's own output (bf16), as in training */
    kernel_ok(bwd(d_dqkv, d_delta, d_dout, d_out, d_qkv, d_lse, B, T, C, NH, NULL),
              "attention backward");
    float *gd = host_b16(d_dqkv, nq);
    snprintf(name, sizeof name, "%s attention backward B%d T%d NH%d", kind, B, T, NH);
    check(name, rel_l2(gd, dwant, nq), 2e-2);
    /* deterministic: a second run gives the same bits */
    uint16_t *a = malloc(nq * 2), *b2 = malloc(nq * 2);
    cuda_ok(cudaMemcpy(a, d_dqkv, nq * 2, cudaMemcpyDeviceToHost), "copy");
    kernel_ok(bwd(d_dqkv, d_delta, d_dout, d_out, d_qkv, d_lse, B, T, C, NH, NULL),
              "attention backward");
    cuda_ok(cudaMemcpy(b2, d_dqkv, nq * 2, cudaMemcpyDeviceToHost), "copy");
    snprintf(name, sizeof name, "%s attention backward rerun bitwise T%d", kind, T);
    check(name, memcmp(a, b2, nq * 2) == 0 ? 0.0 : 1.0, 0.0);
}

/* cuDNN's attention behind the launchers' signature: its graphs for the last shape asked
 * for (rebuilt when it changes) and their workspace. cudnn_open's failure (no cuDNN in this
 * build, or libcudnn.so.9 not found) skips the cuDNN checks with a line saying why; a
 * failure once it opened is a failure. */
static gpt_cudnn_attn_t *cd_attn;
static void *cd_ws;
static int cd_shape[4];

static int cudnn_open(int B, int T, int C, int NH, int quiet) {
    if (cd_attn && cd_shape[0] == B && cd_shape[1] == T && cd_shape[2] == C && cd_shape[3] == NH)
        return 1;
    gpt_cudnn_attn_close(cd_attn);
    cd_attn = NULL;
    if (cd_ws)
        cuda_ok(cudaFree(cd_ws), "cudaFree");
    cd_ws = NULL;
    char why[512];
    cd_attn = gpt_cudnn_attn_open(B, T, C, NH, why, sizeof why);
    if (cd_attn == NULL) {
        if (!quiet)
            printf("SKIP cuDNN attention B%d T%d NH%d: %s\n", B, T, NH, why);
        return 0;
    }
    size_t ws = gpt_cudnn_attn_workspace_bytes(cd_attn);
    if (ws)
        cuda_ok(cudaMalloc(&cd_ws, ws), "cudaMalloc (cuDNN workspace)");
    cd_shape[0] = B, cd_shape[1] = T, cd_shape[2] = C, cd_shape[3] = NH;
    return 1;
}

static int fwd_cudnn(uint16_t *out, float *lse, const uint16_t *qkv, int B, int T, int C, int NH,
                     uvmrt_stream_t s) {
    if (!cudnn_open(B, T, C, NH, 1))
        return (int)cudaErrorNotSupported;
    if (gpt_cudnn_attn_forward(cd_attn, out, lse, qkv, cd_ws, s) != 0) {
        fprintf(stderr, "%s\n", gpt_cudnn_attn_error(cd_attn));
        return (int)cudaErrorUnknown;
    }
    return 0;
}

static int bwd_cudnn(uint16_t *dqkv, float *delta, const uint16_t *dout, const uint16_t *out,
                     const uint16_t *qkv, const float *lse, int B, int T, int C, int NH,
                     uvmrt_stream_t s) {
    (void)delta;
    if (!cudnn_open(B, T, C, NH, 1))
        return (int)cudaErrorNotSupported;
    if (gpt_cudnn_attn_backward(cd_attn, dqkv, dout, out, qkv, lse, cd_ws, s) != 0) {
        fprintf(stderr, "%s\n", gpt_cudnn_attn_error(cd_attn));
        return (int)cudaErrorUnknown;
    }
    return 0;
}

static void check_attention(int B, int T, int NH) {
    if (cudnn_open(B, T, NH * GPT_HEAD_SIZE, NH, 0))
        check_attention_with(B, T, NH, fwd_cudnn, bwd_cudnn, "cudnn");
    check_attention_with(B, T, NH, gpt_attention_forward_mma_launch,
                         gpt_attention_backward_mma_launch, "flash(mma)");
    check_attention_with(B, T, NH, gpt_attention_forward_wmma_launch,
                         gpt_attention_backward_wmma_launch, "flash(wmma)");
    check_attention_with(B, T, NH, gpt_attention_forward_simple_launch,
                         gpt_attention_backward_simple_launch, "flash(fp32)");
}

static void check_crossentropy(void) {
    int R = 64, V = 1000, Vp = 1024;
    size_t n = (size_t)R * Vp;
    uint16_t *lb;
    float *logits = rand_b(n, -4, 4, &lb), *losses = malloc(R * 4), *dwant = malloc(n * 4);
    int *tgt = malloc(R * 4);
    for (int i = 0; i < R; i++)
        tgt[i] = (int)urand(0, (float)V - 0.01f);
    gref_crossentropy(losses, dwant, logits, tgt, R, V, Vp, 1.0f / R);
    void *d_l = dev_from(lb, n * 2), *d_loss = dev_from(NULL, R * 4), *d_t = dev_from(tgt, R * 4);
    kernel_ok(gpt_crossentropy_launch(d_l, d_loss, d_t, R, V, Vp, 1.0f / R, NULL), "ce");
    float *g1 = host_f32(d_loss, R), *g2 = host_b16(d_l, n);
    check("cross-entropy losses", rel_l2(g1, losses, R), 1e-4);
    check("cross-entropy dlogits (bf16, in place)", rel_l2(g2, dwant, n), 2e-2);
    /* logits at an address the 16-byte kernel cannot take: the scalar one */
    uint16_t *lb1 = malloc((n + 8) * 2);
    memcpy(lb1 + 1, lb, n * 2);
    char *d_l1 = dev_from(lb1, (n + 8) * 2);
    kernel_ok(gpt_crossentropy_launch((uint16_t *)(d_l1 + 2), d_loss, d_t, R, V, Vp, 1.0f / R, NULL), "ce scalar");
    float *g3 = host_f32(d_loss, R), *g4 = malloc(n * 4);
    uint16_t *raw = malloc((n + 8) * 2);
    cuda_ok(cudaMemcpy(raw, d_l1, (n + 8) * 2, cudaMemcpyDeviceToHost), "copy");
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)raw[i + 1] << 16;
        memcpy(&g4[i], &u, 4);
    }
    check("cross-entropy losses (scalar kernel)", rel_l2(g3, losses, R), 1e-4);
    check("cross-entropy dlogits (scalar kernel)", rel_l2(g4, dwant, n), 2e-2);
    double want = 0, *d_mean = dev_from(NULL, 8), got = 0;
    for (int i = 0; i < R; i++)
        want += losses[i];
    want /= R;
    kernel_ok(gpt_loss_finish_launch(d_loss, R, d_mean, NULL), "loss finish");
    cuda_ok(cudaMemcpy(&got, d_mean, 8, cudaMemcpyDeviceToHost), "copy");
    check("mean loss", fabs(got - want) / want, 1e-5);
}

static void check_adamw_norm(void) {
    size_t n = 100000;
    float *w = rand_f(n, -1, 1), *m = rand_f(n, -0.1f, 0.1f), *v = rand_f(n, 0, 0.01f);
    float *g = rand_f(n, -1, 1);
    void *d_w = dev_from(w, n * 4), *d_m = dev_from(m, n * 4), *d_v = dev_from(v, n * 4);
    void *d_g = dev_from(g, n * 4), *d_h = dev_from(NULL, n * 2), *d_clip = dev_from(NULL, 8);
    double *d_parts = dev_from(NULL, GPT_SUMSQ_BLOCKS * 8), want = 0;
    for (size_t i = 0; i < n; i++)
        want += (double)g[i] * g[i];
    want = sqrt(want);
    kernel_ok(gpt_sumsq_launch(d_g, n, d_parts, NULL), "sumsq");
    kernel_ok(gpt_clip_finish_launch(d_parts, GPT_SUMSQ_BLOCKS, 1.0f, d_clip, NULL, NULL), "clip");
    float clip = 0;
    cuda_ok(cudaMemcpy(&clip, d_clip, 4, cudaMemcpyDeviceToHost), "copy");
    check("gradient norm clip factor", fabs(clip - 1.0 / (want + 1e-6)) * want, 1e-5);
    /* the sum of squares itself, 16-byte loads (n % 4 == 0), then from an address they
     * cannot take with n % 4 == 3 (the scalar loop) */
    for (int k = 0; k < 2; k++) {
        size_t off = (size_t)k, cnt = n - 3 * (size_t)k;
        double ref = 0, got = 0, *parts = malloc(GPT_SUMSQ_BLOCKS * 8);
        for (size_t i = 0; i < cnt; i++)
            ref += (double)g[off + i] * g[off + i];
        kernel_ok(gpt_sumsq_launch((const float *)d_g + off, cnt, d_parts, NULL), "sumsq");
        cuda_ok(cudaMemcpy(parts, d_parts, GPT_SUMSQ_BLOCKS * 8, cudaMemcpyDeviceToHost), "copy");
        for (int b = 0; b < GPT_SUMSQ_BLOCKS; b++)
            got += parts[b];
        check(k ? "sum of squares (scalar: offset, n % 4 == 3)" : "sum of squares (16-byte loads)",
              fabs(got - ref) / ref, 1e-12);
        free(parts);
    }
    mlp_adamw_coef_t c = mlp_adamw_coef_make(1e-3, 0.1, 3, 1.0);
    kernel_ok(gpt_adamw_launch(d_w, d_m, d_v, d_g, d_h, n, &c, d_clip, NULL), "adamw");
    uvmrt_adamw_t hp = mlp_adamw_hp(1e-3, 0.1, 3, 1.0); /* c's hyperparameters */
    hp.grad_scale = clip;
    uint16_t *h = malloc(n * 2), *hg = malloc(n * 2);
    check("uvmrt_adamw_cpu status", uvmrt_adamw_cpu(&hp, w, m, v, g, n, h) == UVMRT_OK ? 0.0 : 1.0,
          0.0);
    float *gw = host_f32(d_w, n);
    cuda_ok(cudaMemcpy(hg, d_h, n * 2, cudaMemcpyDeviceToHost), "copy");
    int same = memcmp(gw, w, n * 4) == 0 && memcmp(hg, h, n * 2) == 0;
    check("adamw bitwise equal to uvmrt_adamw_cpu", same ? 0.0 : 1.0, 0.0);
}

/* ---------------------------------------------------------------------------- */

static float *read_dump(const char *path, int32_t h[256], size_t *n) {
    FILE *f = fopen(path, "rb");
    if (f == NULL || fread(h, 4, 256, f) != 256) {
        fprintf(stderr, "gpt-gpu-check: cannot read %s\n", path);
        exit(1);
    }
    gpt_shape_t s = {h[3], h[7], h[2], h[4], h[5], h[6]};
    *n = gpt_num_params(&s);
    float *p = malloc(*n * 4);
    if (fread(p, 4, *n, f) != *n) {
        fprintf(stderr, "gpt-gpu-check: %s is truncated\n", path);
        exit(1);
    }
    fclose(f);
    return p;
}

static int check_model(char **argv) {
    int32_t hw[256], hg[256];
    size_t n, n2;
    float *w = read_dump(argv[0], hw, &n), *gg = read_dump(argv[1], hg, &n2);
    double loss = strtod(argv[2], NULL);
    int B = atoi(argv[3]), T = atoi(argv[4]);
    uint64_t seed = strtoull(argv[5], NULL, 0);
    gpt_shape_t s = {hw[3], hw[7], hw[2], hw[4], hw[5], hw[6]};
    if (hw[0] != 20241201 || memcmp(hw, hg, sizeof hw) != 0 || n != n2) {
        fprintf(stderr, "gpt-gpu-check: bad or mismatched headers\n");
        return 1;
    }
    int *inp = malloc((size_t)B * T * 4), *tgt = malloc((size_t)B * T * 4);
    gpt_tokens_random(inp, tgt, B, T, s.V, seed, 0);
    float *g = malloc(n * 4);
    double ref = gpt_ref_loss(&s, w, inp, tgt, B, T, g);
    printf("model: V %d Vp %d maxT %d L %d C %d NH %d, B %d T %d: loss uvmrt-gpt %.6f, "
           "reference %.6f\n", s.V, s.Vp, s.maxT, s.L, s.C, s.NH, B, T, loss, ref);
    check("model loss (relative)", fabs(loss - ref) / ref, 1e-2);
    size_t sz[GPT_NUM_PARAM_TENSORS], off = 0;
    gpt_param_sizes(&s, sz);
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++) {
        char name[64];
        snprintf(name, sizeof name, "model gradient %s", gpt_param_names[t]);
        check(name, rel_l2(gg + off, g + off, sz[t]), 5e-2);
        off += sz[t];
    }
    return failures ? 1 : 0;
}

/* ---------------------------------------------------------------------------- */

#define TIME_REPS 20

/* the median of TIME_REPS timed calls (CUDA events) after a warm-up */
static double time_ms(void (*fn)(void *), void *arg) {
    cudaEvent_t a, b;
    cuda_ok(cudaEventCreate(&a), "event");
    cuda_ok(cudaEventCreate(&b), "event");
    fn(arg); /* warm-up */
    float v[TIME_REPS];
    for (int k = 0; k < TIME_REPS; k++) {
        cuda_ok(cudaEventRecord(a, NULL), "record");
        fn(arg);
        cuda_ok(cudaEventRecord(b, NULL), "record");
        cuda_ok(cudaEventSynchronize(b), "sync");
        cuda_ok(cudaEventElapsedTime(&v[k], a, b), "elapsed");
    }
    for (int i = 0; i < TIME_REPS; i++)
        for (int j = i + 1; j < TIME_REPS; j++)
            if (v[j] < v[i]) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
            }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 0.5 * (v[TIME_REPS / 2 - 1] + v[TIME_REPS / 2]);
}

typedef struct bench {
    int B, T, C, NH, N, Vp, R;
    gpt_gpu_t *g;
    void *qkv, *out, *lse, *dout, *dqkv, *delta, *w, *x4, *y4, *dw, *res, *ln, *ms, *cs;
    void *logits, *wte, *losses, *tgt, *dwte;
} bench_t;

static void mm_ok(const char *why) {
    if (why) {
        fprintf(stderr, "gpt-gpu-check: %s\n", why);
        exit(1);
    }
}

/* the trainer's attention (gpt_gpu_attention_open: cuDNN where it opens), on its stream */
static void b_attn_fwd(void *p) {
    bench_t *b = p;
    mm_ok(gpt_gpu_attention_forward(b->g, b->out, b->lse, b->qkv, b->B, b->T, b->C, b->NH));
    cuda_ok(cudaStreamSynchronize((cudaStream_t)gpt_gpu_stream(b->g)), "sync");
}

static void b_attn_bwd(void *p) {
    bench_t *b = p;
    mm_ok(gpt_gpu_attention_backward(b->g, b->dqkv, b->delta, b->dout, b->out, b->qkv, b->lse, b->B, b->T, b->C,
                                     b->NH));
    cuda_ok(cudaStreamSynchronize((cudaStream_t)gpt_gpu_stream(b->g)), "sync");
}

/* the block's 4 matmuls, forward (1x) and backward (dinp + dweight) */
static void b_gemms(void *p) {
    bench_t *b = p;
    int N = b->N, C = b->C;
    const int kin[4] = {C, C, C, 4 * C}, kout[4] = {3 * C, C, 4 * C, C};
    for (int k = 0; k < 4; k++) {
        mm_ok(gpt_mm_forward(b->g, b->y4, 0, b->x4, b->w, N, kin[k], kout[k], 1.0f));
        mm_ok(gpt_mm_dinp(b->g, b->x4, b->y4, b->w, N, kin[k], kout[k]));
        mm_ok(gpt_mm_dweight(b->g, b->dw, b->y4, b->x4, N, kin[k], kout[k], 0.0f));
    }
    cuda_ok(cudaStreamSynchronize((cudaStream_t)gpt_gpu_stream(b->g)), "sync");
}

/* the block's other kernels: 2 LN forward + backward, GELU both ways, biases */
static void b_rest(void *p) {
    bench_t *b = p;
    int N = b->N, C = b->C;
    float *ms = b->ms;
    for (int k = 0; k < 2; k++) {
        kernel_ok(gpt_layernorm_forward_launch(b->ln, ms, ms + N, b->res, b->w, b->w, N, C, NULL), "ln");
        /* the input gradient's bf16 copy for the next matmul (no conversion pass) */
        kernel_ok(gpt_layernorm_backward_launch(b->res, b->y4, b->dw, (float *)b->dw + C, b->cs, b->ln,
                                                b->res, b->w, ms, ms + N, N, C, 1, NULL), "lnb");
        kernel_ok(gpt_residual_bias_launch(b->res, b->res, b->w, N, C, NULL), "res");
        kernel_ok(gpt_bias_grad_f32_launch(b->dw, b->cs, b->res, N, C, NULL), "bias");
    }
    kernel_ok(gpt_bias_broadcast_launch(b->y4, b->w, N, 4 * C, NULL), "bias");
    kernel_ok(gpt_bias_broadcast_launch(b->y4, b->w, N, 3 * C, NULL), "bias");
    kernel_ok(gpt_gelu_forward_launch(b->x4, b->y4, (size_t)N * 4 * C, NULL), "gelu");
    kernel_ok(gpt_gelu_backward_launch(b->x4, b->y4, (size_t)N * 4 * C, NULL), "gelu");
    kernel_ok(gpt_bias_grad_launch(b->dw, b->cs, b->x4, N, 4 * C, NULL), "bias");
    kernel_ok(gpt_bias_grad_launch(b->dw, b->cs, b->x4, N, 3 * C, NULL), "bias");
}

static void b_head_chunk(void *p) {
    bench_t *b = p;
    mm_ok(gpt_mm_forward(b->g, b->logits, 0, b->ln, b->wte, b->R, b->C, b->Vp, 0.0f));
    cuda_ok(cudaStreamSynchronize((cudaStream_t)gpt_gpu_stream(b->g)), "sync");
    kernel_ok(gpt_crossentropy_launch(b->logits, b->losses, b->tgt, b->R, 50257, b->Vp,
                                      1.0f / b->N, NULL), "ce");
    mm_ok(gpt_mm_dinp(b->g, b->ln, b->logits, b->wte, b->R, b->C, b->Vp));
    mm_ok(gpt_mm_dweight(b->g, b->dwte, b->logits, b->ln, b->R, b->C, b->Vp, 1.0f));
    cuda_ok(cudaStreamSynchronize((cudaStream_t)gpt_gpu_stream(b->g)), "sync");
}

/* gpt-gpu-check --kernels B T C: each memory-bound kernel of a block and of the head at
 * the trainer's shapes, timed alone (median of TIME_REPS), against the bytes it must move
 * at least (each input read once, each output written once) over the HBM bandwidth a
 * device-to-device copy reaches in the same run: a markdown table (bench/README.md). */
typedef struct kcase {
    bench_t *b;
    int which;
} kcase_t;

enum { K_LN_F, K_LN_B, K_RESID, K_TO_BF16, K_BIASG_F32, K_BIAS_BC3, K_BIAS_BC4, K_GELU_F, K_GELU_B,
       K_BIASG4, K_BIASG3, K_CE, K_COPY, K_COUNT };

static void k_run(void *p) {
    const kcase_t *k = p;
    bench_t *b = k->b;
    int N = b->N, C = b->C;
    float *ms = b->ms;
    switch (k->which) {
    case K_LN_F:
        kernel_ok(gpt_layernorm_forward_launch(b->ln, ms, ms + N, b->res, b->w, b->w, N, C, NULL), "ln");
        break;
    case K_LN_B:
        kernel_ok(gpt_layernorm_backward_launch(b->res, b->y4, b->dw, (float *)b->dw + C, b->cs, b->ln, b->res,
                                                b->w, ms, ms + N, N, C, 1, NULL), "lnb");
        break;
    case K_RESID: kernel_ok(gpt_residual_bias_launch(b->dwte, b->res, b->w, N, C, NULL), "res"); break;
    case K_TO_BF16: kernel_ok(gpt_f32_to_bf16_launch(b->ln, b->res, (size_t)N * C, NULL), "cvt"); break;
    case K_BIASG_F32: kernel_ok(gpt_bias_grad_f32_launch(b->dw, b->cs, b->res, N, C, NULL), "bias"); break;
    case K_BIAS_BC3: kernel_ok(gpt_bias_broadcast_launch(b->y4, b->w, N, 3 * C, NULL), "bias"); break;
    case K_BIAS_BC4: kernel_ok(gpt_bias_broadcast_launch(b->y4, b->w, N, 4 * C, NULL), "bias"); break;
    case K_GELU_F: kernel_ok(gpt_gelu_forward_launch(b->x4, b->y4, (size_t)N * 4 * C, NULL), "gelu"); break;
    case K_GELU_B: kernel_ok(gpt_gelu_backward_launch(b->x4, b->y4, (size_t)N * 4 * C, NULL), "gelu"); break;
    case K_BIASG4: kernel_ok(gpt_bias_grad_launch(b->dw, b->cs, b->x4, N, 4 * C, NULL), "bias"); break;
    case K_BIASG3: kernel_ok(gpt_bias_grad_launch(b->dw, b->cs, b->x4, N, 3 * C, NULL), "bias"); break;
    case K_CE:
        kernel_ok(gpt_crossentropy_launch(b->logits, b->losses, b->tgt, b->R, 50257, b->Vp, 1.0f / b->N, NULL),
                  "ce");
        break;
    case K_COPY:
        cuda_ok(cudaMemcpyAsync(b->x4, b->y4, (size_t)N * 4 * C * 2, cudaMemcpyDeviceToDevice, NULL), "copy");
        break;
    }
}

static int kernels(char **argv) {
    bench_t b = {.B = atoi(argv[0]), .T = atoi(argv[1]), .C = atoi(argv[2])};
    if (b.B <= 0 || b.T <= 0 || b.C <= 0 || b.C % GPT_HEAD_SIZE) {
        fprintf(stderr, "gpt-gpu-check --kernels: B, T > 0 and C a multiple of %d expected\n", GPT_HEAD_SIZE);
        return 2;
    }
    b.NH = b.C / GPT_HEAD_SIZE, b.N = b.B * b.T, b.Vp = 50304, b.R = gpt_chunk_rows(b.N, b.C);
    size_t N = (size_t)b.N, C = (size_t)b.C;
    b.w = dev_from(NULL, 4 * C * C * 2), b.x4 = dev_from(NULL, N * 4 * C * 2);
    b.y4 = dev_from(NULL, N * 4 * C * 2), b.dw = dev_from(NULL, 4 * C * C * 4);
    b.res = dev_from(NULL, N * C * 4), b.ln = dev_from(NULL, N * C * 2);
    b.ms = dev_from(NULL, 2 * N * 4), b.cs = dev_from(NULL, 2 * gpt_colsum_scratch_floats(b.N, 4 * b.C) * 4);
    b.logits = dev_from(NULL, (size_t)b.R * b.Vp * 2), b.losses = dev_from(NULL, N * 4);
    b.tgt = dev_from(NULL, N * 4), b.dwte = dev_from(NULL, N * C * 4);
    cuda_ok(cudaMemset(b.res, 0, N * C * 4), "memset");
    cuda_ok(cudaMemset(b.x4, 0, N * 4 * C * 2), "memset");
    cuda_ok(cudaMemset(b.y4, 0, N * 4 * C * 2), "memset");
    cuda_ok(cudaMemset(b.ln, 0, N * C * 2), "memset");
    cuda_ok(cudaMemset(b.w, 0, 4 * C * C * 2), "memset");
    cuda_ok(cudaMemset(b.tgt, 0, N * 4), "memset");
    double nc = (double)N * C, rv = (double)b.R * b.Vp;
    static const char *names[K_COUNT] = {
        "layernorm forward (N,C) fp32 -> bf16", "layernorm backward (dinp +=, its bf16, dw, db)", "residual + bias (N,C) fp32",
        "fp32 -> bf16 (N,C)", "bias gradient, fp32 (N,C)", "bias broadcast (N,3C) bf16", "bias broadcast (N,4C) bf16",
        "GELU forward (N,4C)", "GELU backward in place (N,4C)", "bias gradient, bf16 (N,4C)",
        "bias gradient, bf16 (N,3C)", "cross-entropy chunk (R,Vp) bf16 in place", "device copy (N,4C) bf16"};
    /* the least bytes each must move: inputs read once, outputs written once */
    double bytes[K_COUNT] = {6 * nc + 8.0 * N, 16 * nc + 8.0 * N, 8 * nc, 6 * nc, 4 * nc, 6 * nc, 8 * nc,
                             16 * nc, 24 * nc, 8 * nc, 6 * nc, 4 * rv, 16 * nc};
    double t[K_COUNT];
    for (int k = 0; k < K_COUNT; k++) {
        kcase_t kc = {&b, k};
        t[k] = time_ms(k_run, &kc);
    }
    double hbm = bytes[K_COPY] / t[K_COPY] / 1e6; /* GB/s */
    printf("kernels B %d T %d C %d (N %d; head chunk R %d x Vp %d); HBM by a device copy: %.0f GB/s\n\n", b.B, b.T,
           b.C, b.N, b.R, b.Vp, hbm);
    printf("| kernel | ms | least MB | GB/s | of the copy's rate | ms at the copy's rate |\n|---|---:|---:|---:|---:|---:|\n");
    double sum = 0, ideal = 0;
    for (int k = 0; k < K_COUNT; k++) {
        double gbs = bytes[k] / t[k] / 1e6;
        printf("| %s | %.3f | %.1f | %.0f | %.2f | %.3f |\n", names[k], t[k], bytes[k] / 1e6, gbs, gbs / hbm,
               bytes[k] / hbm / 1e6);
        if (k != K_COPY && k != K_CE) sum += t[k], ideal += bytes[k] / hbm / 1e6;
    }
    printf("\nper block (each kernel once; the trainer runs the layernorm ones twice): %.3f ms, %.3f at the copy's "
           "rate\n", sum, ideal);
    return 0;
}

static int bench(char **argv) {
    bench_t b = {.B = atoi(argv[0]), .T = atoi(argv[1]), .C = atoi(argv[2])};
    int L = atoi(argv[3]);
    char err[256];
    b.NH = b.C / GPT_HEAD_SIZE, b.N = b.B * b.T, b.Vp = 50304, b.R = gpt_chunk_rows(b.N, b.C);
    b.g = gpt_gpu_open(err, sizeof err);
    if (b.g == NULL) {
        fprintf(stderr, "gpt-gpu-check: %s\n", err);
        return 1;
    }
    mm_ok(gpt_gpu_attention_open(b.g, GPT_ATTN_AUTO, b.B, b.T, b.C, b.NH, err, sizeof err));
    if (err[0])
        printf("attention: mma (%s)\n", err);
    size_t N = (size_t)b.N, C = (size_t)b.C, nl = (size_t)b.B * b.NH * b.T;
    uint16_t *qb, *db;
    rand_b(N * 3 * C, -1.5f, 1.5f, &qb);
    rand_b(N * C, -1, 1, &db);
    b.qkv = dev_from(qb, N * 3 * C * 2), b.out = dev_from(NULL, N * C * 2);
    b.lse = dev_from(NULL, nl * 4), b.dout = dev_from(db, N * C * 2);
    b.dqkv = dev_from(NULL, N * 3 * C * 2), b.delta = dev_from(NULL, nl * 4);
    b.w = dev_from(NULL, 4 * C * C * 2), b.x4 = dev_from(NULL, N * 4 * C * 2);
    b.y4 = dev_from(NULL, N * 4 * C * 2), b.dw = dev_from(NULL, 4 * C * C * 4);
    b.res = dev_from(NULL, N * C * 4), b.ln = dev_from(NULL, N * C * 2);
    b.ms = dev_from(NULL, 2 * N * 4), b.cs = dev_from(NULL, 2 * gpt_colsum_scratch_floats(b.N, 4 * b.C) * 4);
    b.logits = dev_from(NULL, (size_t)b.R * b.Vp * 2), b.wte = dev_from(NULL, (size_t)b.Vp * C * 2);
    b.losses = dev_from(NULL, N * 4), b.tgt = dev_from(NULL, N * 4);
    b.dwte = dev_from(NULL, (size_t)b.Vp * C * 4);
    double af = time_ms(b_attn_fwd, &b), ab = time_ms(b_attn_bwd, &b);
    double mm = time_ms(b_gemms, &b), rest = time_ms(b_rest, &b), head = time_ms(b_head_chunk, &b);
    double aflops = 2.0 * b.B * (double)b.T * b.T * C, mflops = 72.0 * N * C * C;
    double hflops = 6.0 * b.R * C * b.Vp, chunks = (double)N / b.R;
    printf("bench B %d T %d C %d NH %d (L %d), attention %s:\n", b.B, b.T, b.C, b.NH, L,
           gpt_gpu_attention_name(b.g));
    printf("  attention forward   %8.3f ms  %6.1f TFLOP/s\n", af, aflops / af / 1e9);
    printf("  attention backward  %8.3f ms  %6.1f TFLOP/s (2.5x forward's FLOPs)\n", ab,
           2.5 * aflops / ab / 1e9);
    printf("  block matmuls f+b   %8.3f ms  %6.1f TFLOP/s\n", mm, mflops / mm / 1e9);
    printf("  block other kernels %8.3f ms\n", rest);
    printf("  classifier chunk    %8.3f ms  %6.1f TFLOP/s (x %.1f chunks)\n", head,
           hflops / head / 1e9, chunks);
    double step = L * (af + ab + mm + rest) + chunks * head;
    printf("  step estimate       %8.1f ms = %d x %.2f ms per block + %.1f ms head: "
           "attention %.0f%%, matmuls %.0f%%, other %.0f%%, head %.0f%%\n", step, L,
           af + ab + mm + rest, chunks * head, 100 * L * (af + ab) / step, 100 * L * mm / step,
           100 * L * rest / step, 100 * chunks * head / step);
    gpt_gpu_close(b.g);
    return 0;
}

/* ---------------------------------------------------------------------------- */

/* gpt-gpu-check --attn: the attention kernels at the trainer's sizes, where the C
 * reference is too slow. The mma kernels against the scalar fp32 ones (the second
 * implementation, itself checked against the C reference by the default run) on
 * fresh random inputs, outputs poisoned with NaN first so an element not written
 * fails; the backward of both gets the same out and lse. Then the timings of the
 * mma and the WMMA kernels (medians of TIME_REPS), in causal FLOPs. */
typedef struct attn_case {
    int B, T, C, NH;
    attn_fwd_fn fwd;
    attn_bwd_fn bwd;
    void *qkv, *out, *lse, *dout, *dqkv, *delta;
} attn_case_t;

static void a_fwd(void *p) {
    attn_case_t *a = p;
    cuda_ok((cudaError_t)a->fwd(a->out, a->lse, a->qkv, a->B, a->T, a->C, a->NH, NULL), "fwd");
}

static void a_bwd(void *p) {
    attn_case_t *a = p;
    cuda_ok((cudaError_t)a->bwd(a->dqkv, a->delta, a->dout, a->out, a->qkv, a->lse, a->B, a->T,
                                a->C, a->NH, NULL), "bwd");
}

static int fwd_mma_1tile(uint16_t *out, float *lse, const uint16_t *qkv, int B, int T, int C,
                         int NH, uvmrt_stream_t s) {
    return gpt_attention_forward_mma_tiles_launch(out, lse, qkv, B, T, C, NH, 1, s);
}

/* fwd (outputs poisoned with NaN first, so an element not written fails) against the fp32
 * kernels' out and lse (want, wl); a->out and a->lse then hold fwd's. */
static void attn_fwd_vs_fp32(attn_case_t *a, attn_fwd_fn fwd, const char *kind, const float *want,
                             const float *wl) {
    size_t no = (size_t)a->B * a->T * a->C, nl = (size_t)a->B * a->NH * a->T;
    char name[96];
    cuda_ok(cudaMemset(a->out, 0xff, no * 2), "poison");
    cuda_ok(cudaMemset(a->lse, 0xff, nl * 4), "poison");
    kernel_ok(fwd(a->out, a->lse, a->qkv, a->B, a->T, a->C, a->NH, NULL), kind);
    float *got = host_b16(a->out, no), *gl = host_f32(a->lse, nl);
    snprintf(name, sizeof name, "%s vs fp32 forward B%d NH%d T%d", kind, a->B, a->NH, a->T);
    check(name, rel_l2(got, want, no), 1e-2);
    snprintf(name, sizeof name, "%s vs fp32 lse B%d NH%d T%d", kind, a->B, a->NH, a->T);
    check(name, rel_l2(gl, wl, nl), 1e-4);
    free(got), free(gl);
}

/* bwd from the fp32 kernels' out and lse (r_out, r_lse) against their dqkv (wd), then
 * again: the same bits (no atomics) */
static void attn_bwd_vs_fp32(attn_case_t *a, attn_bwd_fn bwd, const char *kind, void *r_out, void *r_lse,
                             const float *wd) {
    size_t nq = (size_t)a->B * a->T * 3 * a->C;
    char name[96];
    uint16_t *b1 = malloc(nq * 2), *b2 = malloc(nq * 2);
    cuda_ok(cudaMemset(a->dqkv, 0xff, nq * 2), "poison");
    kernel_ok(bwd(a->dqkv, a->delta, a->dout, r_out, a->qkv, r_lse, a->B, a->T, a->C, a->NH, NULL), kind);
    cuda_ok(cudaMemcpy(b1, a->dqkv, nq * 2, cudaMemcpyDeviceToHost), "copy");
    float *gd = host_b16(a->dqkv, nq);
    snprintf(name, sizeof name, "%s vs fp32 backward B%d NH%d T%d", kind, a->B, a->NH, a->T);
    check(name, rel_l2(gd, wd, nq), 2e-2);
    cuda_ok(cudaMemset(a->dqkv, 0xff, nq * 2), "poison");
    kernel_ok(bwd(a->dqkv, a->delta, a->dout, r_out, a->qkv, r_lse, a->B, a->T, a->C, a->NH, NULL), kind);
    cuda_ok(cudaMemcpy(b2, a->dqkv, nq * 2, cudaMemcpyDeviceToHost), "copy");
    snprintf(name, sizeof name, "%s backward rerun bitwise B%d NH%d T%d", kind, a->B, a->NH, a->T);
    check(name, memcmp(b1, b2, nq * 2) == 0 ? 0.0 : 1.0, 0.0);
    free(b1), free(b2), free(gd);
}

static void attn_shape(int B, int NH, int T, int timed) {
    int C = NH * GPT_HEAD_SIZE;
    size_t N = (size_t)B * T, nq = N * 3 * C, no = N * C, nl = (size_t)B * NH * T;
    char name[96];
    uint16_t *qb, *db;
    float *f1 = rand_b(nq, -1.5f, 1.5f, &qb), *f2 = rand_b(no, -1, 1, &db);
    free(f1);
    free(f2);
    attn_case_t a = {.B = B, .T = T, .C = C, .NH = NH};
    a.qkv = dev_from(qb, nq * 2), a.dout = dev_from(db, no * 2);
    a.out = dev_from(NULL, no * 2), a.lse = dev_from(NULL, nl * 4);
    a.dqkv = dev_from(NULL, nq * 2), a.delta = dev_from(NULL, nl * 4);
    void *r_out = dev_from(NULL, no * 2), *r_lse = dev_from(NULL, nl * 4);
    void *r_dqkv = dev_from(NULL, nq * 2);
    kernel_ok(gpt_attention_forward_simple_launch(r_out, r_lse, a.qkv, B, T, C, NH, NULL), "ref");
    kernel_ok(gpt_attention_backward_simple_launch(r_dqkv, a.delta, a.dout, r_out, a.qkv, r_lse,
                                                   B, T, C, NH, NULL), "ref bwd");
    float *want = host_b16(r_out, no), *wl = host_f32(r_lse, nl), *wd = host_b16(r_dqkv, nq);
    attn_fwd_vs_fp32(&a, gpt_attention_forward_mma_launch, "mma", want, wl);
    /* one m-tile per warp does each row's arithmetic in the same order: same bits */
    uint16_t *o2 = malloc(no * 2), *o1 = malloc(no * 2);
    cuda_ok(cudaMemcpy(o2, a.out, no * 2, cudaMemcpyDeviceToHost), "copy");
    cuda_ok(cudaMemset(a.out, 0xff, no * 2), "poison");
    kernel_ok(gpt_attention_forward_mma_tiles_launch(a.out, a.lse, a.qkv, B, T, C, NH, 1, NULL),
              "fwd 1 m-tile");
    cuda_ok(cudaMemcpy(o1, a.out, no * 2, cudaMemcpyDeviceToHost), "copy");
    snprintf(name, sizeof name, "mma forward 1 vs 2 m-tiles bitwise B%d NH%d T%d", B, NH, T);
    check(name, memcmp(o1, o2, no * 2) == 0 ? 0.0 : 1.0, 0.0);
    free(o1), free(o2);
    attn_bwd_vs_fp32(&a, gpt_attention_backward_mma_launch, "mma", r_out, r_lse, wd);
    int have_cudnn = cudnn_open(B, T, C, NH, 0);
    if (have_cudnn) {
        attn_fwd_vs_fp32(&a, fwd_cudnn, "cudnn", want, wl);
        attn_bwd_vs_fp32(&a, bwd_cudnn, "cudnn", r_out, r_lse, wd);
    }
    if (timed) {
        double fl = 2.0 * B * NH * (double)T * T * GPT_HEAD_SIZE; /* causal: half of 4BHT^2d */
        a.fwd = gpt_attention_forward_mma_launch, a.bwd = gpt_attention_backward_mma_launch;
        double mf = time_ms(a_fwd, &a), mb = time_ms(a_bwd, &a);
        a.fwd = gpt_attention_forward_wmma_launch, a.bwd = gpt_attention_backward_wmma_launch;
        double wf = time_ms(a_fwd, &a), wb = time_ms(a_bwd, &a);
        a.fwd = fwd_mma_1tile;
        double m1 = time_ms(a_fwd, &a);
        cuda_ok(cudaDeviceSynchronize(), "timing");
        printf("time B%-2d NH%-2d T%-5d forward mma %7.3f ms %6.1f TFLOP/s (1 m-tile %7.3f ms "
               "%6.1f; wmma %7.3f ms %6.1f)  backward mma %7.3f ms %6.1f TFLOP/s (wmma %7.3f ms "
               "%6.1f)\n",
               B, NH, T, mf, fl / mf / 1e9, m1, fl / m1 / 1e9, wf, fl / wf / 1e9, mb,
               2.5 * fl / mb / 1e9, wb, 2.5 * fl / wb / 1e9);
        if (have_cudnn) {
            a.fwd = fwd_cudnn, a.bwd = bwd_cudnn;
            double cf = time_ms(a_fwd, &a), cb = time_ms(a_bwd, &a);
            cuda_ok(cudaDeviceSynchronize(), "timing");
            printf("time B%-2d NH%-2d T%-5d forward cudnn %7.3f ms %6.1f TFLOP/s (%.2fx mma)  backward cudnn "
                   "%7.3f ms %6.1f TFLOP/s (%.2fx mma)\n",
                   B, NH, T, cf, fl / cf / 1e9, mf / cf, cb, 2.5 * fl / cb / 1e9, mb / cb);
        }
    }
    free(qb), free(db), free(want), free(wl), free(wd);
    void *devs[] = {a.qkv, a.dout, a.out, a.lse, a.dqkv, a.delta, r_out, r_lse, r_dqkv};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++)
        cuda_ok(cudaFree(devs[i]), "cudaFree");
}

static int attn_suite(void) {
    static const int shapes[][4] = {/* B, NH, T, timed */
                                    {1, 1, 64, 0},    {16, 25, 64, 1},  {1, 2, 256, 0},
                                    {8, 25, 256, 1},  {3, 5, 1000, 0},  {1, 1, 1024, 0},
                                    {8, 25, 1024, 1}, {1, 2, 2048, 0},  {4, 25, 2048, 1},
                                    {1, 3, 2047, 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        attn_shape(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3]);
    printf("the trainer's attention: --attention auto: cudnn where it opens, else mma (gpt_kernels.cu)\n");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--attn") == 0)
        return attn_suite();
    if (argc == 6 && strcmp(argv[1], "--bench") == 0)
        return bench(argv + 2);
    if (argc == 5 && strcmp(argv[1], "--kernels") == 0)
        return kernels(argv + 2);
    if (argc == 8 && strcmp(argv[1], "--model") == 0)
        return check_model(argv + 2);
    if (argc != 1) {
        fprintf(stderr, "usage: gpt-gpu-check [--attn | --bench B T C L | --kernels B T C | "
                        "--model WEIGHTS GRADS LOSS B T SEED]\n");
        return 2;
    }
    check_encoder();
    check_layernorm(200, 768);
    check_layernorm(64, 1600);
    check_layernorm(33, 100);
    check_layernorm(40, 130);
    check_layernorm(20, 2500);
    check_residual_bias();
    check_gelu_bias();
    check_attention(2, 200, 3);
    check_attention(1, 64, 1);
    check_attention(2, 1, 2);
    check_attention(1, 1000, 2);
    check_crossentropy();
    check_adamw_norm();
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
