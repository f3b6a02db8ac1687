/*
 * gpt_gpu.c -- uvmrt-gpt's GPU setup (see gpt_gpu.h): with gpt_cpuopt.c, the only
 * files of the trainer with CUDA runtime and cuBLAS calls; without them every call
 * fails cleanly.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_attn_cudnn.h"
#include "gpt_gpu.h"
#include "gpt_kernels.h"

#if defined(UVMRT_HAVE_CUDA) && defined(UVMRT_HAVE_CUBLAS)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

static const size_t CUBLAS_WORKSPACE_BYTES = 32u << 20;

struct gpt_gpu {
    cudaStream_t stream;
    cudaStream_t cpu_stream; /* nothing runs on it: it names the CPU optimizer's calls */
    cublasHandle_t cublas;
    void *workspace;
    cudaStream_t side;         /* gpt_gpu_side_copy's copies */
    cudaEvent_t ready[2];      /* per slot: the stream's work before the copy */
    cudaEvent_t copied[2];     /* per slot: the copy done */
    gpt_attn_kind_t attn_kind; /* GPT_ATTN_MMA until gpt_gpu_attention_open chose cuDNN */
    gpt_cudnn_attn_t *attn;    /* cuDNN's graphs for attn_shape */
    int attn_shape[4];         /* B, T, C, NH */
    void *attn_ws;             /* cuDNN's workspace */
    size_t attn_ws_bytes;
    char attn_name[32];
    cublasLtHandle_t lt;       /* gpt_mm_forward_ep's matmuls */
    float *bias32;             /* an fp32 copy of the residual projections' bias (cuBLASLt's
                                * bias for an fp32 output is fp32) */
    size_t bias32_n;
    struct lt_plan *plans;     /* per shape and epilogue: cuBLASLt's or the plain path */
    int n_plans;
};

/* One forward matmul shape with a fused epilogue: cuBLASLt's descriptors and the algorithm
 * its heuristic chose once (the same every call: reproducible), or ok 0: the plain path
 * (cublasGemmEx beside the bias and GELU kernels), chosen once too. */
typedef struct lt_plan {
    int N, K, OC, kind; /* kind: LT_BIAS, LT_GELU, LT_RESID, LT_DGELU */
    int ok;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
} lt_plan_t;

enum { LT_BIAS, LT_GELU, LT_RESID, LT_DGELU };

int gpt_gpu_built(void) { return 1; }

#ifndef UVMRT_HAVE_CUDNN_FRONTEND /* no cuDNN attention in this build (gpt_attn_cudnn.cpp not built) */
int gpt_cudnn_built(void) { return 0; }
gpt_cudnn_attn_t *gpt_cudnn_attn_open(int B, int T, int C, int NH, char *why, size_t why_len) {
    (void)B, (void)T, (void)C, (void)NH;
    snprintf(why, why_len, "built without cuDNN attention");
    return NULL;
}
size_t gpt_cudnn_attn_workspace_bytes(const gpt_cudnn_attn_t *a) { (void)a; return 0; }
long gpt_cudnn_attn_version(const gpt_cudnn_attn_t *a) { (void)a; return 0; }
int gpt_cudnn_attn_forward(gpt_cudnn_attn_t *a, uint16_t *out, float *lse, const uint16_t *qkv, void *ws,
                           void *stream) {
    (void)a, (void)out, (void)lse, (void)qkv, (void)ws, (void)stream;
    return -1;
}
int gpt_cudnn_attn_backward(gpt_cudnn_attn_t *a, uint16_t *dqkv, const uint16_t *dout, const uint16_t *out,
                            const uint16_t *qkv, const float *lse, void *ws, void *stream) {
    (void)a, (void)dqkv, (void)dout, (void)out, (void)qkv, (void)lse, (void)ws, (void)stream;
    return -1;
}
const char *gpt_cudnn_attn_error(const gpt_cudnn_attn_t *a) { (void)a; return "built without cuDNN attention"; }
void gpt_cudnn_attn_close(gpt_cudnn_attn_t *a) { (void)a; }
#endif

const char *gpt_gpu_error_text(int err) {
    static __thread char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", cudaGetErrorName((cudaError_t)err),
             cudaGetErrorString((cudaError_t)err));
    return buf;
}

static const char *cuda_text(cudaError_t e, const char *what) {
    static __thread char buf[256];
    if (e == cudaSuccess)
        return NULL;
    snprintf(buf, sizeof buf, "%s failed: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return buf;
}

static const char *cublas_text(cublasStatus_t s, const char *what) {
    static __thread char buf[256];
    if (s == CUBLAS_STATUS_SUCCESS)
        return NULL;
    snprintf(buf, sizeof buf, "%s failed: cuBLAS status %d (%s)", what, (int)s,
             cublasGetStatusName(s));
    return buf;
}

gpt_gpu_t *gpt_gpu_open(char *err, size_t errlen) {
    gpt_gpu_t *g = calloc(1, sizeof *g);
    const char *why = NULL;
    if (g == NULL) {
        snprintf(err, errlen, "out of host memory");
        return NULL;
    }
    g->attn_kind = GPT_ATTN_MMA;
    snprintf(g->attn_name, sizeof g->attn_name, "mma");
    if ((why = cuda_text(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags")) ||
        (why = cuda_text(cudaStreamCreateWithFlags(&g->cpu_stream, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags")) ||
        (why = cublas_text(cublasCreate(&g->cublas), "cublasCreate")) ||
        (why = cublas_text(cublasSetStream(g->cublas, g->stream), "cublasSetStream")) ||
        (why = cuda_text(cudaMalloc(&g->workspace, CUBLAS_WORKSPACE_BYTES), "cudaMalloc")) ||
        (why = cublas_text(cublasSetWorkspace(g->cublas, g->workspace, CUBLAS_WORKSPACE_BYTES),
                           "cublasSetWorkspace")) ||
        (why = cuda_text(cudaStreamCreateWithFlags(&g->side, cudaStreamNonBlocking),
                         "cudaStreamCreateWithFlags")) ||
        (why = cuda_text(cudaEventCreateWithFlags(&g->ready[0], cudaEventDisableTiming), "cudaEventCreate")) ||
        (why = cuda_text(cudaEventCreateWithFlags(&g->ready[1], cudaEventDisableTiming), "cudaEventCreate")) ||
        (why = cuda_text(cudaEventCreateWithFlags(&g->copied[0], cudaEventDisableTiming), "cudaEventCreate")) ||
        (why = cuda_text(cudaEventCreateWithFlags(&g->copied[1], cudaEventDisableTiming), "cudaEventCreate")) ||
        (why = cublas_text(cublasLtCreate(&g->lt), "cublasLtCreate"))) {
        snprintf(err, errlen, "%s", why);
        gpt_gpu_close(g);
        return NULL;
    }
    return g;
}

void gpt_gpu_close(gpt_gpu_t *g) {
    if (g == NULL)
        return;
    for (int i = 0; i < g->n_plans; i++) {
        lt_plan_t *p = &g->plans[i];
        if (p->desc)
            cublasLtMatmulDescDestroy(p->desc);
        if (p->a)
            cublasLtMatrixLayoutDestroy(p->a);
        if (p->b)
            cublasLtMatrixLayoutDestroy(p->b);
        if (p->c)
            cublasLtMatrixLayoutDestroy(p->c);
        if (p->d)
            cublasLtMatrixLayoutDestroy(p->d);
    }
    free(g->plans);
    if (g->bias32)
        cudaFree(g->bias32);
    if (g->lt)
        cublasLtDestroy(g->lt);
    gpt_cudnn_attn_close(g->attn);
    if (g->attn_ws)
        cudaFree(g->attn_ws);
    if (g->cublas)
        cublasDestroy(g->cublas);
    if (g->workspace)
        cudaFree(g->workspace);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->cpu_stream)
        cudaStreamDestroy(g->cpu_stream);
    if (g->side)
        cudaStreamDestroy(g->side);
    for (int s = 0; s < 2; s++) {
        if (g->ready[s])
            cudaEventDestroy(g->ready[s]);
        if (g->copied[s])
            cudaEventDestroy(g->copied[s]);
    }
    free(g);
}

uvmrt_stream_t gpt_gpu_stream(const gpt_gpu_t *g) { return (uvmrt_stream_t)g->stream; }
uvmrt_stream_t gpt_gpu_cpu_stream(const gpt_gpu_t *g) { return (uvmrt_stream_t)g->cpu_stream; }

uint64_t gpt_gpu_device_bytes(const gpt_gpu_t *g) {
    return CUBLAS_WORKSPACE_BYTES + g->attn_ws_bytes + g->bias32_n * sizeof(float);
}

const char *gpt_gpu_attention_open(gpt_gpu_t *g, gpt_attn_kind_t want, int B, int T, int C, int NH,
                                   char *note, size_t note_len) {
    static __thread char buf[512];
    char why[400] = "";
    if (note && note_len)
        note[0] = '\0';
    if (want == GPT_ATTN_MMA)
        return NULL;
    if (!gpt_cudnn_built()) {
        snprintf(why, sizeof why, "this build has no cuDNN attention (configure found no cuDNN 9 with "
                                  "cudnn-frontend: --with-cudnn, --with-cudnn-frontend)");
    } else {
        gpt_cudnn_attn_t *a = gpt_cudnn_attn_open(B, T, C, NH, why, sizeof why);
        void *ws = NULL;
        size_t wsb = a ? gpt_cudnn_attn_workspace_bytes(a) : 0;
        if (a && wsb > 0) {
            const char *e = cuda_text(cudaMalloc(&ws, wsb), "cudaMalloc (cuDNN's workspace)");
            if (e) {
                snprintf(why, sizeof why, "%s", e);
                gpt_cudnn_attn_close(a);
                a = NULL;
            }
        }
        if (a) {
            long v = gpt_cudnn_attn_version(a);
            g->attn = a, g->attn_ws = ws, g->attn_ws_bytes = wsb, g->attn_kind = GPT_ATTN_CUDNN;
            g->attn_shape[0] = B, g->attn_shape[1] = T, g->attn_shape[2] = C, g->attn_shape[3] = NH;
            snprintf(g->attn_name, sizeof g->attn_name, "cudnn %ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
            return NULL;
        }
    }
    if (want == GPT_ATTN_CUDNN) {
        snprintf(buf, sizeof buf, "--attention cudnn: %s", why);
        return buf;
    }
    if (note && note_len)
        snprintf(note, note_len, "%s", why);
    return NULL;
}

int gpt_gpu_cudnn_built(void) { return gpt_cudnn_built(); }
gpt_attn_kind_t gpt_gpu_attention_kind(const gpt_gpu_t *g) { return g ? g->attn_kind : GPT_ATTN_MMA; }
const char *gpt_gpu_attention_name(const gpt_gpu_t *g) { return g ? g->attn_name : "mma"; }

static const char *attn_shape_text(const gpt_gpu_t *g, int B, int T, int C, int NH) {
    static __thread char buf[200];
    if (B == g->attn_shape[0] && T == g->attn_shape[1] && C == g->attn_shape[2] && NH == g->attn_shape[3])
        return NULL;
    snprintf(buf, sizeof buf, "cuDNN attention built for B %d T %d C %d NH %d, called with B %d T %d C %d NH %d",
             g->attn_shape[0], g->attn_shape[1], g->attn_shape[2], g->attn_shape[3], B, T, C, NH);
    return buf;
}

static const char *cudnn_text(const gpt_gpu_t *g, int rc) {
    static __thread char buf[512];
    if (rc == 0)
        return NULL;
    snprintf(buf, sizeof buf, "%s", gpt_cudnn_attn_error(g->attn));
    return buf;
}

const char *gpt_gpu_attention_forward(gpt_gpu_t *g, uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                      int T, int C, int NH) {
    const char *why;
    if (g->attn_kind != GPT_ATTN_CUDNN)
        return cuda_text((cudaError_t)gpt_attention_forward_launch(out, lse, qkv, B, T, C, NH, g->stream),
                         "attention forward");
    if ((why = attn_shape_text(g, B, T, C, NH)))
        return why;
    return cudnn_text(g, gpt_cudnn_attn_forward(g->attn, out, lse, qkv, g->attn_ws, g->stream));
}

const char *gpt_gpu_attention_backward(gpt_gpu_t *g, uint16_t *dqkv, float *delta, const uint16_t *dout,
                                       const uint16_t *out, const uint16_t *qkv, const float *lse, int B,
                                       int T, int C, int NH) {
    const char *why;
    if (g->attn_kind != GPT_ATTN_CUDNN)
        return cuda_text((cudaError_t)gpt_attention_backward_launch(dqkv, delta, dout, out, qkv, lse, B, T, C,
                                                                   NH, g->stream),
                         "attention backward");
    if ((why = attn_shape_text(g, B, T, C, NH)))
        return why;
    return cudnn_text(g, gpt_cudnn_attn_backward(g->attn, dqkv, dout, out, qkv, lse, g->attn_ws, g->stream));
}

const char *gpt_gpu_mem_info(uint64_t *free_bytes, uint64_t *total_bytes, int *device) {
    size_t f = 0, t = 0;
    const char *why = cuda_text(cudaGetDevice(device), "cudaGetDevice");
    if (why == NULL)
        why = cuda_text(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
    *free_bytes = f;
    *total_bytes = t;
    return why;
}

const char *gpt_mm_forward(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp,
                           const uint16_t *w, int N, int K, int OC, float beta) {
    const float one = 1.0f;
    return cublas_text(cublasGemmEx(g->cublas, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, K, &one, w,
                                    CUDA_R_16BF, K, inp, CUDA_R_16BF, K, &beta, out,
                                    out_f32 ? CUDA_R_32F : CUDA_R_16BF, OC, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx (forward)");
}

/* cuBLASLt's descriptors for one shape and epilogue, and its heuristic's first algorithm
 * within the cuBLAS workspace; 0 when it has none (the caller then takes the plain path) */
static int lt_build(gpt_gpu_t *g, lt_plan_t *p, int out_f32) {
    int dg = p->kind == LT_DGELU;
    cublasOperation_t ta = dg ? CUBLAS_OP_N : CUBLAS_OP_T, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t ep = dg                  ? CUBLASLT_EPILOGUE_DGELU
                            : p->kind == LT_GELU ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                 : CUBLASLT_EPILOGUE_BIAS;
    cudaDataType_t dt = out_f32 ? CUDA_R_32F : CUDA_R_16BF, bias_t = dt;
    /* the output's rows in column-major terms: OC forward; K for the input gradient */
    int64_t rows = dg ? p->K : p->OC, inner = dg ? p->OC : p->K, aux_ld = rows;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t h;
    int found = 0;
    size_t ws = CUBLAS_WORKSPACE_BYTES;
    if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep) ||
        (!dg && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_t,
                                               sizeof bias_t)) ||
        ((p->kind == LT_GELU || dg) &&
         cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld)) ||
        /* column-major: forward D (OC x N) = W^T (OC x K) . inp (K x N); input gradient
         * D (K x N) = W (K x OC) . dout (OC x N) */
        cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, p->K, p->OC, p->K) ||
        cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, inner, p->N, inner) ||
        cublasLtMatrixLayoutCreate(&p->c, dt, rows, p->N, rows) ||
        cublasLtMatrixLayoutCreate(&p->d, dt, rows, p->N, rows) ||
        cublasLtMatmulPreferenceCreate(&pref) ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws) ||
        cublasLtMatmulAlgoGetHeuristic(g->lt, p->desc, p->a, p->b, p->c, p->d, pref, 1, &h, &found) ||
        found < 1) {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        return 0;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    p->algo = h.algo;
    return 1;
}

static lt_plan_t *lt_plan(gpt_gpu_t *g, int N, int K, int OC, int kind, int out_f32) {
    for (int i = 0; i < g->n_plans; i++) {
        lt_plan_t *p = &g->plans[i];
        if (p->N == N && p->K == K && p->OC == OC && p->kind == kind)
            return p;
    }
    lt_plan_t *more = realloc(g->plans, (size_t)(g->n_plans + 1) * sizeof *more);
    if (more == NULL)
        return NULL;
    g->plans = more;
    lt_plan_t *p = &g->plans[g->n_plans++];
    memset(p, 0, sizeof *p);
    p->N = N, p->K = K, p->OC = OC, p->kind = kind;
    /* UVMRT_GPT_PLAIN_EPILOGUES=1: never cuBLASLt (the plain path, for comparison) */
    const char *e = getenv("UVMRT_GPT_PLAIN_EPILOGUES");
    p->ok = !(e && strcmp(e, "1") == 0) && lt_build(g, p, out_f32);
    return p;
}

const char *gpt_mm_forward_ep(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp, const uint16_t *w,
                              int N, int K, int OC, const uint16_t *bias, const float *residual,
                              uint16_t *gelu_pre) {
    const char *why;
    int kind = out_f32 ? LT_RESID : gelu_pre ? LT_GELU : LT_BIAS;
    if ((out_f32 && (residual == NULL || gelu_pre)) || (!out_f32 && residual))
        return "gpt_mm_forward_ep: an fp32 output takes a residual and no GELU, a bf16 one no residual";
    lt_plan_t *p = lt_plan(g, N, K, OC, kind, out_f32);
    if (p == NULL)
        return "gpt_mm_forward_ep: out of host memory";
    if (p->ok) {
        const float one = 1.0f, zero = 0.0f;
        const void *b = bias;
        if (out_f32) { /* the bias in fp32, as cuBLASLt takes it beside an fp32 output */
            if (g->bias32_n < (size_t)OC) {
                float *nb = NULL;
                if ((why = cuda_text(cudaMalloc((void **)&nb, (size_t)OC * sizeof(float)), "cudaMalloc (bias)")))
                    return why;
                if (g->bias32)
                    cudaFree(g->bias32);
                g->bias32 = nb, g->bias32_n = (size_t)OC;
            }
            if ((why = cuda_text((cudaError_t)gpt_bf16_to_f32_launch(g->bias32, bias, (size_t)OC, g->stream),
                                 "bias to fp32")))
                return why;
            b = g->bias32;
        }
        if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b) ||
            (gelu_pre && cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                                        &gelu_pre, sizeof gelu_pre)))
            return "cublasLtMatmulDescSetAttribute (bias, aux) failed";
        return cublas_text(cublasLtMatmul(g->lt, p->desc, &one, w, p->a, inp, p->b, out_f32 ? &one : &zero,
                                          out_f32 ? (const void *)residual : out, p->c, out, p->d, &p->algo,
                                          g->workspace, CUBLAS_WORKSPACE_BYTES, g->stream),
                           "cublasLtMatmul");
    }
    /* the plain path: the bias (and the residual) into the output first, a matmul that
     * adds to it, then GELU */
    if (out_f32) {
        if ((why = cuda_text((cudaError_t)gpt_residual_bias_launch(out, residual, bias, N, OC, g->stream),
                             "residual + bias")))
            return why;
        return gpt_mm_forward(g, out, 1, inp, w, N, K, OC, 1.0f);
    }
    uint16_t *pre = gelu_pre ? gelu_pre : out;
    if ((why = cuda_text((cudaError_t)gpt_bias_broadcast_launch(pre, bias, N, OC, g->stream), "bias broadcast")) ||
        (why = gpt_mm_forward(g, pre, 0, inp, w, N, K, OC, 1.0f)))
        return why;
    if (gelu_pre)
        return cuda_text((cudaError_t)gpt_gelu_forward_launch(out, pre, (size_t)N * OC, g->stream), "GELU");
    return NULL;
}

const char *gpt_mm_dinp_dgelu(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w, int N, int K,
                              int OC, const uint16_t *gelu_pre) {
    lt_plan_t *p = lt_plan(g, N, K, OC, LT_DGELU, 0);
    if (p == NULL)
        return "gpt_mm_dinp_dgelu: out of host memory";
    if (p->ok) {
        const float one = 1.0f, zero = 0.0f;
        if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &gelu_pre,
                                           sizeof gelu_pre))
            return "cublasLtMatmulDescSetAttribute (aux) failed";
        return cublas_text(cublasLtMatmul(g->lt, p->desc, &one, w, p->a, dout, p->b, &zero, dinp, p->c, dinp, p->d,
                                          &p->algo, g->workspace, CUBLAS_WORKSPACE_BYTES, g->stream),
                           "cublasLtMatmul (input gradient, GELU)");
    }
    const char *why = gpt_mm_dinp(g, dinp, dout, w, N, K, OC);
    if (why)
        return why;
    return cuda_text((cudaError_t)gpt_gelu_backward_launch(dinp, gelu_pre, (size_t)N * K, g->stream),
                     "GELU backward");
}

const char *gpt_mm_dinp(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w,
                        int N, int K, int OC) {
    const float one = 1.0f, zero = 0.0f;
    return cublas_text(cublasGemmEx(g->cublas, CUBLAS_OP_N, CUBLAS_OP_N, K, N, OC, &one, w,
                                    CUDA_R_16BF, K, dout, CUDA_R_16BF, OC, &zero, dinp,
                                    CUDA_R_16BF, K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx (input gradient)");
}

const char *gpt_mm_dweight(gpt_gpu_t *g, float *dw, const uint16_t *dout, const uint16_t *inp,
                           int N, int K, int OC, float beta) {
    const float one = 1.0f;
    return cublas_text(cublasGemmEx(g->cublas, CUBLAS_OP_N, CUBLAS_OP_T, K, OC, N, &one, inp,
                                    CUDA_R_16BF, K, dout, CUDA_R_16BF, OC, &beta, dw, CUDA_R_32F,
                                    K, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx (weight gradient)");
}

const char *gpt_gpu_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes) {
    return cuda_text(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g->stream),
                     "cudaMemcpyAsync");
}

const char *gpt_gpu_side_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes, int slot) {
    const char *why;
    if ((why = cuda_text(cudaEventRecord(g->ready[slot], g->stream), "cudaEventRecord")) ||
        (why = cuda_text(cudaStreamWaitEvent(g->side, g->ready[slot], 0), "cudaStreamWaitEvent")) ||
        (why = cuda_text(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g->side), "cudaMemcpyAsync")))
        return why;
    return cuda_text(cudaEventRecord(g->copied[slot], g->side), "cudaEventRecord");
}

const char *gpt_gpu_side_wait(gpt_gpu_t *g, int slot) {
    for (int s = 0; s < 2; s++) {
        if (slot >= 0 && s != slot)
            continue;
        const char *why = cuda_text(cudaStreamWaitEvent(g->stream, g->copied[s], 0), "cudaStreamWaitEvent");
        if (why)
            return why;
    }
    return NULL;
}

const char *gpt_gpu_sync(gpt_gpu_t *g) {
    return cuda_text(cudaStreamSynchronize(g->stream), "cudaStreamSynchronize");
}

void *gpt_gpu_host_alloc(size_t bytes) {
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocMapped) != cudaSuccess)
        return NULL;
    memset(p, 0, bytes);
    return p;
}

void gpt_gpu_host_free(void *p) {
    if (p)
        cudaFreeHost(p);
}

#else /* no CUDA + cuBLAS: every call fails; gpt.c runs on sim and never calls them */

static const char *NO_GPU = "built without CUDA and cuBLAS";

int gpt_gpu_built(void) { return 0; }
gpt_gpu_t *gpt_gpu_open(char *err, size_t errlen) {
    snprintf(err, errlen, "%s", NO_GPU);
    return NULL;
}
void gpt_gpu_close(gpt_gpu_t *g) { (void)g; }
uvmrt_stream_t gpt_gpu_stream(const gpt_gpu_t *g) { (void)g; return NULL; }
uvmrt_stream_t gpt_gpu_cpu_stream(const gpt_gpu_t *g) { (void)g; return NULL; }
uint64_t gpt_gpu_device_bytes(const gpt_gpu_t *g) { (void)g; return 0; }
const char *gpt_gpu_attention_open(gpt_gpu_t *g, gpt_attn_kind_t want, int B, int T, int C, int NH,
                                   char *note, size_t note_len) {
    (void)g, (void)want, (void)B, (void)T, (void)C, (void)NH;
    if (note && note_len)
        note[0] = '\0';
    return NO_GPU;
}
int gpt_gpu_cudnn_built(void) { return 0; }
const char *gpt_mm_forward_ep(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp, const uint16_t *w,
                              int N, int K, int OC, const uint16_t *bias, const float *residual,
                              uint16_t *gelu_pre) {
    (void)g, (void)out, (void)out_f32, (void)inp, (void)w, (void)N, (void)K, (void)OC, (void)bias;
    (void)residual, (void)gelu_pre;
    return NO_GPU;
}
const char *gpt_mm_dinp_dgelu(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w, int N, int K,
                              int OC, const uint16_t *gelu_pre) {
    (void)g, (void)dinp, (void)dout, (void)w, (void)N, (void)K, (void)OC, (void)gelu_pre;
    return NO_GPU;
}
gpt_attn_kind_t gpt_gpu_attention_kind(const gpt_gpu_t *g) { (void)g; return GPT_ATTN_MMA; }
const char *gpt_gpu_attention_name(const gpt_gpu_t *g) { (void)g; return "mma"; }
const char *gpt_gpu_attention_forward(gpt_gpu_t *g, uint16_t *out, float *lse, const uint16_t *qkv, int B,
                                      int T, int C, int NH) {
    (void)g, (void)out, (void)lse, (void)qkv, (void)B, (void)T, (void)C, (void)NH;
    return NO_GPU;
}
const char *gpt_gpu_attention_backward(gpt_gpu_t *g, uint16_t *dqkv, float *delta, const uint16_t *dout,
                                       const uint16_t *out, const uint16_t *qkv, const float *lse, int B,
                                       int T, int C, int NH) {
    (void)g, (void)dqkv, (void)delta, (void)dout, (void)out, (void)qkv, (void)lse, (void)B, (void)T, (void)C;
    (void)NH;
    return NO_GPU;
}
const char *gpt_gpu_error_text(int err) { (void)err; return NO_GPU; }
const char *gpt_gpu_mem_info(uint64_t *f, uint64_t *t, int *d) {
    *f = *t = 0;
    *d = -1;
    return NO_GPU;
}
const char *gpt_mm_forward(gpt_gpu_t *g, void *out, int out_f32, const uint16_t *inp,
                           const uint16_t *w, int N, int K, int OC, float beta) {
    (void)g, (void)out, (void)out_f32, (void)inp, (void)w, (void)N, (void)K, (void)OC, (void)beta;
    return NO_GPU;
}
const char *gpt_mm_dinp(gpt_gpu_t *g, uint16_t *dinp, const uint16_t *dout, const uint16_t *w,
                        int N, int K, int OC) {
    (void)g, (void)dinp, (void)dout, (void)w, (void)N, (void)K, (void)OC;
    return NO_GPU;
}
const char *gpt_mm_dweight(gpt_gpu_t *g, float *dw, const uint16_t *dout, const uint16_t *inp,
                           int N, int K, int OC, float beta) {
    (void)g, (void)dw, (void)dout, (void)inp, (void)N, (void)K, (void)OC, (void)beta;
    return NO_GPU;
}
const char *gpt_gpu_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes) {
    (void)g, (void)dst, (void)src, (void)bytes;
    return NO_GPU;
}
const char *gpt_gpu_side_copy(gpt_gpu_t *g, void *dst, const void *src, size_t bytes, int slot) {
    (void)g, (void)dst, (void)src, (void)bytes, (void)slot;
    return NO_GPU;
}
const char *gpt_gpu_side_wait(gpt_gpu_t *g, int slot) { (void)g, (void)slot; return NO_GPU; }
const char *gpt_gpu_sync(gpt_gpu_t *g) { (void)g; return NO_GPU; }
void *gpt_gpu_host_alloc(size_t bytes) { (void)bytes; return NULL; }
void gpt_gpu_host_free(void *p) { (void)p; }

/* The kernel launchers (gpt_kernels.cu is not built): each fails. */
#include "gpt_kernels.h"
#define NOGPU_FAIL return 35 /* cudaErrorInsufficientDriver */
size_t gpt_colsum_scratch_floats(int N, int OC) {
    return (size_t)((N + GPT_COLSUM_ROWS - 1) / GPT_COLSUM_ROWS) * (size_t)OC;
}
int gpt_encoder_forward_launch(float *a, const int *b, const uint16_t *c, const uint16_t *d,
                               int e, int f, int g, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)s; NOGPU_FAIL;
}
int gpt_encoder_backward_launch(float *a, float *b, const float *c, const int *d, const int *e,
                                const int *f, int g, int h, int i, int j, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)i, (void)j;
    (void)s; NOGPU_FAIL;
}
int gpt_layernorm_forward_launch(uint16_t *a, float *b, float *c, const float *d,
                                 const uint16_t *e, const uint16_t *f, int g, int h,
                                 uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)s; NOGPU_FAIL;
}
int gpt_layernorm_backward_launch(float *a, uint16_t *a2, float *b, float *c, float *d, const uint16_t *e,
                                  const float *f, const uint16_t *g, const float *h,
                                  const float *i, int j, int k, int l, uvmrt_stream_t s) {
    (void)a, (void)a2, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)i, (void)j;
    (void)k, (void)l, (void)s; NOGPU_FAIL;
}
int gpt_bias_broadcast_launch(uint16_t *a, const uint16_t *b, int c, int d, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)s; NOGPU_FAIL;
}
int gpt_residual_bias_launch(float *a, const float *b, const uint16_t *c, int d, int e,
                             uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)s; NOGPU_FAIL;
}
int gpt_gelu_forward_launch(uint16_t *a, const uint16_t *b, size_t c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_gelu_backward_launch(uint16_t *a, const uint16_t *b, size_t c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_f32_to_bf16_launch(uint16_t *a, const float *b, size_t c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_bf16_to_f32_launch(float *a, const uint16_t *b, size_t c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_copy_f32_launch(float *a, const float *b, size_t c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_bias_grad_launch(float *a, float *b, const uint16_t *c, int d, int e, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)s; NOGPU_FAIL;
}
int gpt_bias_grad_f32_launch(float *a, float *b, const float *c, int d, int e,
                             uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)s; NOGPU_FAIL;
}
int gpt_attention_forward_launch(uint16_t *a, float *b, const uint16_t *c, int d, int e, int f,
                                 int g, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)s; NOGPU_FAIL;
}
int gpt_attention_backward_launch(uint16_t *a, float *b, const uint16_t *c, const uint16_t *d,
                                  const uint16_t *e, const float *f, int g, int h, int i, int j,
                                  uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)i, (void)j;
    (void)s; NOGPU_FAIL;
}
int gpt_crossentropy_launch(uint16_t *a, float *b, const int *c, int d, int e, int f, float g,
                            uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)s; NOGPU_FAIL;
}
int gpt_loss_finish_launch(const float *a, int b, double *c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_sumsq_launch(const float *a, size_t b, double *c, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)s; NOGPU_FAIL;
}
int gpt_clip_finish_launch(const double *a, int b, float c, float *d, float *e,
                           uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)s; NOGPU_FAIL;
}
int gpt_adamw_launch(float *a, float *b, float *c, const float *d, uint16_t *e, size_t f,
                     const mlp_adamw_coef_t *g, const float *h, uvmrt_stream_t s) {
    (void)a, (void)b, (void)c, (void)d, (void)e, (void)f, (void)g, (void)h, (void)s; NOGPU_FAIL;
}
#endif

/* Classifier rows per chunk: the most rows, a power of two from GPT_CHUNK_ROWS, with rows
 * x C at most GPT_CHUNK_ELEMS, and at most N. Larger chunks make fewer, fuller matmuls: on
 * the H200 (bench/README.md, session 35) C 768 takes 3.02 ms a step in one chunk of 8192
 * rows against 3.42 in four of 2048; at C 1600 the 2048-row chunks cost 0.94 ms a step
 * (0.5%) against one of 8192 and keep the logits buffer 618 MB smaller under a budget. It depends on the shape only,
 * never on the budget, so the losses stay bitwise equal across budgets.
 * UVMRT_GPT_CHUNK_ROWS=R sets R instead (for measurement). */
int gpt_chunk_rows(int N, int C) {
    long rows = GPT_CHUNK_ROWS;
    while (C > 0 && rows * 2 * C <= GPT_CHUNK_ELEMS)
        rows *= 2;
    const char *e = getenv("UVMRT_GPT_CHUNK_ROWS");
    if (e != NULL && *e) {
        char *end = NULL;
        long v = strtol(e, &end, 10);
        if (*end != '\0' || v < 1 || v > (1L << 20))
            fprintf(stderr, "uvmrt-gpt: UVMRT_GPT_CHUNK_ROWS=%s: expected rows 1-1048576; using %ld\n",
                    e, rows);
        else
            rows = v;
    }
    return N < rows ? N : (int)rows;
}
