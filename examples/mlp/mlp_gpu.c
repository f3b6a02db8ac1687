/*
 * mlp_gpu.c -- uvmrt-mlp's GPU side (see mlp_gpu.h): the safety check, cuBLAS, the
 * host initialisation, the teacher's targets and the kernels of each layer call.
 * Built only with CUDA and cuBLAS; mlp_nogpu.c stands in otherwise.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda.h> /* the type of cuStreamWaitValue32 only: it is reached through the runtime */
#include <cuda_runtime_api.h>

#include "mlp_cpu_opt.h"
#include "mlp_gpu.h"
#include "mlp_kernels.h"
#include "mlp_ref.h"

const char *const mlp_gpu_missing = NULL;

/* kept free on the GPU beyond our allocations: real oversubscription can hang the GPU */
static const uint64_t GPU_SAFETY_BYTES = 4ull << 30;
static const size_t CUBLAS_WORKSPACE_BYTES = 32u << 20;
static const double GIB = 1024.0 * 1024.0 * 1024.0;

struct mlp_gpu {
    cudaStream_t stream;
    cudaStream_t cpu_stream;     /* only for the CPU optimizer's layer calls (no kernels) */
    cublasHandle_t cublas;
    void *cublas_ws;             /* (32 MiB) device */
    double *partials;            /* (MLP_MSE_BLOCKS,) device */
    double *loss_host;           /* (S,) mapped host memory, written by the GPU */
    int *found_inf;              /* (S,) mapped host memory */
    mlp_cpu_opt_t *cpu;          /* NULL: every block's AdamW runs on the GPU */
    /* staged half copies (run->staged) */
    cudaStream_t half_stream;
    unsigned *stage_flag;        /* (L,) mapped host memory: the CPU thread writes s + 1 once
                                    block i's update of step s is done */
    CUdeviceptr stage_flag_dev;
    unsigned stage_blocks;       /* the copy's grid at most (0: the kernels' full grid) */
};

typedef CUresult (*wait_value32_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

/* cuStreamWaitValue32 from the driver, through the runtime (no link to libcuda). */
static wait_value32_fn stage_wait_fn(void) {
    static int looked;
    static wait_value32_fn fn;
    if (!looked) {
        looked = 1;
#if CUDART_VERSION >= 12050
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &p, 12000, cudaEnableDefault, &q) ==
                cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (wait_value32_fn)p;
        else
            (void)cudaGetLastError();
#endif
    }
    return fn;
}

/* The staged copy's blocks: 64 x 256 threads keep ~256 KiB of reads in flight, enough
 * for the link, and leave the other SMs to the backward's GEMMs beside it
 * (MLP_STAGE_BLOCKS=N for comparisons; 0: as many as the other kernels). */
static unsigned stage_blocks_of_env(void) {
    const char *e = getenv("MLP_STAGE_BLOCKS");
    long v = e && *e ? strtol(e, NULL, 10) : 64;
    return v > 0 && v <= (1 << 20) ? (unsigned)v : 0;
}

int mlp_gpu_can_stage(void) {
    const char *e = getenv("MLP_STAGE");
    if (e != NULL && strcmp(e, "0") == 0)
        return 0;
    return stage_wait_fn() != NULL;
}

#define CUBLAS_CHECK(run, expr)                                                                \
    do {                                                                                       \
        cublasStatus_t s_ = (expr);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                       \
            run_fail((run), "%s failed: cuBLAS status %d (%s)", #expr, (int)s_,                \
                     cublasGetStatusName(s_));                                                 \
    } while (0)

static void launch_check(mlp_run_t *run, int err, const char *kernel, int layer) {
    if (err != 0)
        run_fail(run, "%s kernel of block %d: launch failed: %s (%s)", kernel, layer,
                 cudaGetErrorString((cudaError_t)err), cudaGetErrorName((cudaError_t)err));
}

/* ----------------------------------------------------------------------------
 * open and close */

mlp_gpu_t *mlp_gpu_open(mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    uint64_t nh = (uint64_t)opt->rows * (uint64_t)opt->hidden;
    uint64_t hh = (uint64_t)opt->hidden * (uint64_t)opt->hidden;
    /* device buffers: cuBLAS workspace, loss partials, and (during init) the teacher */
    run->device_workspace_bytes = CUBLAS_WORKSPACE_BYTES + MLP_MSE_BLOCKS * sizeof(double);
    uint64_t tensors = mlp_planned_managed_bytes(opt);
    uint64_t need = tensors + run->device_workspace_bytes + 2 * hh + 4 * nh;
    size_t free_b = 0, total_b = 0;
    int dev = -1;
    CUDA_CHECK(run, cudaGetDevice(&dev));
    CUDA_CHECK(run, cudaMemGetInfo(&free_b, &total_b));
    /* never allocate more managed memory than the GPU has free: real oversubscription
     * can hang the GPU; a smaller GPU is emulated with the budget instead */
    uint64_t room = free_b > GPU_SAFETY_BYTES ? (uint64_t)free_b - GPU_SAFETY_BYTES : 0;
    if (need > room)
        run_fail(run, "refusing to allocate %.2f GiB on GPU %d: it has %.2f GiB free and "
                      "%.0f GiB must stay free; use fewer --layers, a smaller --hidden or "
                      "--rows; --budget emulates a smaller GPU",
                 (double)need / GIB, dev, (double)free_b / GIB, (double)GPU_SAFETY_BYTES / GIB);
    if (!opt->c.quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB, (double)tensors / GIB);
    mlp_gpu_t *g = calloc(1, sizeof *g);
    if (g == NULL)
        run_fail(run, "out of host memory");
    run->gpu = g; /* from here a failure releases g through the run */
    CUDA_CHECK(run, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
    run->stream = (uvmrt_stream_t)g->stream;
    CUDA_CHECK(run, cudaStreamCreateWithFlags(&g->cpu_stream, cudaStreamNonBlocking));
    run->cpu_stream = (uvmrt_stream_t)g->cpu_stream;
    if (run->staged) {
        size_t L = (size_t)opt->layers;
        CUDA_CHECK(run, cudaStreamCreateWithFlags(&g->half_stream, cudaStreamNonBlocking));
        run->half_stream = (uvmrt_stream_t)g->half_stream;
        CUDA_CHECK(run, cudaHostAlloc((void **)&g->stage_flag, L * sizeof(unsigned), cudaHostAllocMapped));
        memset(g->stage_flag, 0, L * sizeof(unsigned));
        void *dev = NULL;
        CUDA_CHECK(run, cudaHostGetDevicePointer(&dev, g->stage_flag, 0));
        g->stage_flag_dev = (CUdeviceptr)(uintptr_t)dev;
        g->stage_blocks = stage_blocks_of_env();
    }
    CUBLAS_CHECK(run, cublasCreate(&g->cublas));
    CUBLAS_CHECK(run, cublasSetStream(g->cublas, g->stream));
    CUDA_CHECK(run, cudaMalloc(&g->cublas_ws, CUBLAS_WORKSPACE_BYTES));
    /* a fixed workspace: cuBLAS then picks the same kernels every run (reproducible) */
    CUBLAS_CHECK(run, cublasSetWorkspace(g->cublas, g->cublas_ws, CUBLAS_WORKSPACE_BYTES));
    CUDA_CHECK(run, cudaMalloc((void **)&g->partials, MLP_MSE_BLOCKS * sizeof(double)));
    size_t S = (size_t)opt->c.steps;
    CUDA_CHECK(run, cudaHostAlloc((void **)&g->loss_host, S * sizeof(double), cudaHostAllocMapped));
    CUDA_CHECK(run, cudaHostAlloc((void **)&g->found_inf, S * sizeof(int), cudaHostAllocMapped));
    memset(g->loss_host, 0, S * sizeof(double));
    memset(g->found_inf, 0, S * sizeof(int));
    return g;
}

void mlp_gpu_close(mlp_run_t *run) {
    mlp_gpu_t *g = run->gpu;
    if (g == NULL)
        return;
    mlp_cpu_opt_stop(g->cpu);
    g->cpu = NULL;
    /* the context first: it may still refer to our stream */
    uvmrt_context_destroy(run->ctx);
    run->ctx = NULL;
    if (g->cublas)
        cublasDestroy(g->cublas);
    if (g->cublas_ws)
        cudaFree(g->cublas_ws);
    if (g->partials)
        cudaFree(g->partials);
    if (g->loss_host)
        cudaFreeHost(g->loss_host);
    if (g->found_inf)
        cudaFreeHost(g->found_inf);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    if (g->cpu_stream)
        cudaStreamDestroy(g->cpu_stream);
    if (g->half_stream)
        cudaStreamDestroy(g->half_stream);
    if (g->stage_flag)
        cudaFreeHost(g->stage_flag);
    free(g);
    run->gpu = NULL;
    run->stream = NULL;
    run->cpu_stream = NULL;
    run->half_stream = NULL;
}

/* ----------------------------------------------------------------------------
 * GEMMs: row-major tensors as cuBLAS's column-major transposes */

static cudaDataType_t half_type(const mlp_run_t *run) {
    return run->opt->precision == MLP_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

/* out (rows, H) = in (rows, H) . W^T, W (H, H) row-major; half in, half out. */
static void gemm_forward(mlp_run_t *run, void *out, const void *in, const void *w, int rows, int H) {
    cudaDataType_t t = half_type(run);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->gpu->cublas, CUBLAS_OP_T, CUBLAS_OP_N, H, rows, H, &one, w,
                                   t, H, in, t, H, &zero, out, t, H, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

/* dW (H, H) fp32 = dZ^T (H, rows) . in (rows, H) */
static void gemm_weight_grad(mlp_run_t *run, float *dw, const void *dz, const void *in, int rows,
                             int H) {
    cudaDataType_t t = half_type(run);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->gpu->cublas, CUBLAS_OP_N, CUBLAS_OP_T, H, H, rows, &one,
                                   in, t, H, dz, t, H, &zero, dw, CUDA_R_32F, H,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* dIn (rows, H) half = dZ (rows, H) . W (H, H) */
static void gemm_input_grad(mlp_run_t *run, void *din, const void *dz, const void *w, int rows,
                            int H) {
    cudaDataType_t t = half_type(run);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->gpu->cublas, CUBLAS_OP_N, CUBLAS_OP_N, H, rows, H, &one, w,
                                   t, H, dz, t, H, &zero, din, t, H, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

/* ----------------------------------------------------------------------------
 * initialisation: on the host, so the pages start where uvmrt's accounting says
 * they are; the teacher's targets on the GPU from device buffers */

static void net_init(mlp_run_t *run) {
    const mlp_net_t *net = &run->net;
    mlp_half_kind_t kind = run->opt->precision;
    uint64_t seed = run->opt->c.seed;
    float b = mlp_init_weight_bound(net->H), s = mlp_init_input_scale();
    double t0 = cli_now_s();
    uint16_t *x = mlp_ptr(net->X);
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < net->nh; j++)
        x[j] = mlp_f32_to_half(mlp_uniform(seed, MLP_ID_INPUT, j) * s, kind);
    for (int i = 0; i < net->L; i++) {
        const mlp_block_t *blk = &net->blocks[i];
        float *w = mlp_ptr(blk->W), *m = mlp_ptr(blk->m), *v = mlp_ptr(blk->v);
        uint16_t *wh = mlp_ptr(blk->Wh);
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < net->hh; j++) {
            w[j] = mlp_uniform(seed, MLP_ID_STUDENT(i), j) * b;
            wh[j] = mlp_f32_to_half(w[j], kind);
            m[j] = 0.0f;
            v[j] = 0.0f;
        }
    }
    if (!run->opt->c.quiet)
        printf("  initialised X, W, Wh, m, v (%.2f GiB) on the host in %.1f s\n",
               ((double)net->nh * 2 + (double)net->L * (double)net->hh * 14) / GIB,
               cli_now_s() - t0);
}

/* Y = teacher(X): teacher weights made one block at a time on the GPU, in device
 * buffers outside uvmrt (counted in the safety check); X and Y cross through host
 * buffers, so their managed pages stay on the host. */
static void teacher_targets(mlp_run_t *run) {
    const mlp_net_t *net = &run->net;
    mlp_half_kind_t kind = run->opt->precision;
    cudaStream_t s = run->gpu->stream;
    size_t a16 = net->nh * 2;
    void *T = NULL, *P[2] = {NULL, NULL};
    double t0 = cli_now_s();
    uint16_t *buf = malloc(a16);
    cudaError_t e = buf ? cudaMalloc(&T, net->hh * 2) : cudaErrorMemoryAllocation;
    if (e == cudaSuccess)
        e = cudaMalloc(&P[0], a16);
    if (e == cudaSuccess)
        e = cudaMalloc(&P[1], a16);
    if (e == cudaSuccess) {
        memcpy(buf, mlp_ptr(net->X), a16);
        e = cudaMemcpyAsync(P[0], buf, a16, cudaMemcpyHostToDevice, s);
    }
    float b = mlp_init_weight_bound(net->H);
    int err = 0, block = 0;
    const char *what = NULL;
    /* buffers freed below on every path, then the first error fails the run */
    for (int i = 0; i < net->L && e == cudaSuccess && !err; i++) {
        block = i;
        err = mlp_fill_uniform_launch(T, net->hh, run->opt->c.seed ^ MLP_TEACHER_SEED_XOR,
                                      MLP_ID_TEACHER(i), b, kind, run->stream);
        what = "teacher init";
        if (!err) {
            gemm_forward(run, P[1], P[0], T, net->N, net->H);
            err = mlp_gelu_forward_launch(P[0], P[1], net->nh, kind, run->stream);
            what = "teacher gelu";
        }
    }
    if (e == cudaSuccess && !err)
        e = cudaMemcpyAsync(buf, P[0], a16, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess && !err)
        e = cudaStreamSynchronize(s);
    if (e == cudaSuccess && !err)
        memcpy(mlp_ptr(net->Y), buf, a16);
    free(buf);
    cudaFree(T);
    cudaFree(P[0]);
    cudaFree(P[1]);
    if (err)
        launch_check(run, err, what, block);
    if (e != cudaSuccess)
        run_fail(run, "the teacher's targets: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    if (!run->opt->c.quiet)
        printf("  teacher targets Y computed on the GPU in %.1f s\n", cli_now_s() - t0);
}

void mlp_gpu_init(mlp_run_t *run) {
    net_init(run);
    teacher_targets(run);
    /* --cpu-layers auto: a review may move blocks to the CPU later */
    if (run->cpu_layers > 0 || run->opt->cpu_layers == MLP_AUTO)
        run->gpu->cpu = mlp_cpu_opt_start(run, run->gpu->found_inf, run->gpu->stage_flag);
}

/* ----------------------------------------------------------------------------
 * the layer calls' kernels */

void mlp_gpu_step_begin(mlp_run_t *run, int s) {
    if (run->gpu->cpu)
        mlp_cpu_opt_step(run->gpu->cpu, s, run->loss_scale, run->cpu_layers);
}

void mlp_gpu_forward_wait(mlp_run_t *run, int i, int s) {
    if (run->gpu->cpu && mlp_block_on_cpu(run, i) && s > run->cpu_since_step)
        mlp_cpu_opt_wait_done(run, run->gpu->cpu, i, s - 1);
}

/* forward i: Z = in . Wh^T (GEMM), A = gelu(Z); the last block also takes the loss
 * against Y and writes dL/dA into dA[(L-1) & 1]. */
void mlp_gpu_stage_wait(mlp_run_t *run, int i, int s) {
    mlp_gpu_t *g = run->gpu;
    CUresult r = stage_wait_fn()((CUstream)g->half_stream, g->stage_flag_dev + (CUdeviceptr)i * sizeof(unsigned),
                                 (cuuint32_t)(s + 1), CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS)
        run_fail(run, "block %d: cuStreamWaitValue32 (the GPU's wait for the CPU's update) failed: CUresult "
                      "%d; MLP_STAGE=0 makes the half copies in the forward instead", i, (int)r);
}

void mlp_gpu_stage_half(mlp_run_t *run, int i) {
    const mlp_block_t *b = &run->net.blocks[i];
    unsigned blocks = run->gpu->stage_blocks;
    int err = blocks ? mlp_to_half_narrow_launch(mlp_ptr(b->Wh), mlp_ptr(b->W), run->net.hh, run->opt->precision,
                                                 blocks, run->gpu->half_stream)
                     : mlp_to_half_launch(mlp_ptr(b->Wh), mlp_ptr(b->W), run->net.hh, run->opt->precision,
                                          run->gpu->half_stream);
    launch_check(run, err, "staged weights to half", i);
}

void mlp_gpu_half_from_master(mlp_run_t *run, int i) {
    const mlp_block_t *b = &run->net.blocks[i];
    launch_check(run, mlp_to_half_launch(mlp_ptr(b->Wh), mlp_ptr(b->W), run->net.hh, run->opt->precision,
                                         run->stream),
                 "weights to half", i);
    CUDA_CHECK(run, cudaStreamSynchronize((cudaStream_t)run->stream));
}

void mlp_gpu_forward(mlp_run_t *run, int i, int s) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    mlp_half_kind_t kind = run->opt->precision;
    uvmrt_tensor_t *z = mlp_block_z(run, i);
    if (i >= net->L - run->cpu_layers && !run->staged) /* a CPU block: Wh from the W its AdamW wrote */
        launch_check(run, mlp_to_half_launch(mlp_ptr(b->Wh), mlp_ptr(b->W), net->hh, kind, run->stream),
                     "weights to half", i);
    gemm_forward(run, mlp_ptr(z), mlp_ptr(mlp_block_input(net, i)), mlp_ptr(b->Wh), net->N, net->H);
    launch_check(run, mlp_gelu_forward_launch(mlp_ptr(b->A), mlp_ptr(z), net->nh, kind, run->stream),
                 "gelu forward", i);
    if (i == net->L - 1) {
        float grad_mul = (float)(2.0 * run->loss_scale / (double)net->nh);
        launch_check(run, mlp_mse_launch(mlp_ptr(b->A), mlp_ptr(net->Y), mlp_ptr(net->dA[i & 1]),
                                         net->nh, grad_mul, run->gpu->partials, kind, run->stream),
                     "mse", i);
        launch_check(run, mlp_mse_finish_launch(run->gpu->partials, 1.0 / (double)net->nh,
                                                &run->gpu->loss_host[s], run->stream),
                     "mse finish", i);
    }
}

/* backward i: [Z = in . Wh^T again when block i recomputes: the same GEMM on the same
 * inputs as its forward, so the same bits]; dZ = dA_i * gelu'(Z);
 * dW = dZ^T . in (fp32); dA_{i-1} = dZ . Wh (not for block 0). */
void mlp_gpu_backward(mlp_run_t *run, int i, int s) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    mlp_half_kind_t kind = run->opt->precision;
    int recompute = mlp_block_recomputes(run, i);
    uvmrt_tensor_t *z = mlp_block_z(run, i);
    void *in = mlp_ptr(mlp_block_input(net, i));
    if (recompute)
        gemm_forward(run, mlp_ptr(z), in, mlp_ptr(b->Wh), net->N, net->H);
    launch_check(run, mlp_gelu_backward_launch(mlp_ptr(net->dZ), mlp_ptr(net->dA[i & 1]), mlp_ptr(z),
                                               net->nh, kind, run->stream),
                 "gelu backward", i);
    gemm_weight_grad(run, mlp_ptr(b->dW), mlp_ptr(net->dZ), in, net->N, net->H);
    if (kind == MLP_FP16)
        launch_check(run, mlp_nonfinite_launch(mlp_ptr(b->dW), net->hh, &run->gpu->found_inf[s],
                                               run->stream),
                     "inf check", i);
    if (i > 0)
        gemm_input_grad(run, mlp_ptr(net->dA[(i - 1) & 1]), mlp_ptr(net->dZ), mlp_ptr(b->Wh), net->N,
                        net->H);
    if (run->gpu->cpu) /* every block: fp16 waits for block 0 */
        mlp_cpu_opt_recorded(run, run->gpu->cpu, i, s, run->stream);
}

/* optimizer i (GPU): AdamW on W, m, v from dW; writes the new working copy Wh. */
void mlp_gpu_optimizer(mlp_run_t *run, int i, int s) {
    const mlp_block_t *b = &run->net.blocks[i];
    mlp_adamw_coef_t c = mlp_adamw_coef_make(run->opt->lr, MLP_ADAMW_WD, run->adam_t + 1,
                                             run->loss_scale);
    const int *skip = run->opt->precision == MLP_FP16 ? &run->gpu->found_inf[s] : NULL;
    launch_check(run, mlp_adamw_launch(mlp_ptr(b->W), mlp_ptr(b->m), mlp_ptr(b->v), mlp_ptr(b->dW),
                                       mlp_ptr(b->Wh), run->opt->precision, run->net.hh, &c, skip,
                                       run->stream),
                 "adamw", i);
}

/* ----------------------------------------------------------------------------
 * after the steps */

double mlp_gpu_step_loss(const mlp_run_t *run, int s) {
    return run->gpu->loss_host[s]; /* the stream is done: step_end waited */
}

int mlp_gpu_found_inf(const mlp_run_t *run, int s) {
    return run->gpu->found_inf[s] != 0;
}

void mlp_gpu_cpu_wait(mlp_run_t *run, int s) {
    if (run->gpu->cpu && s >= 0)
        for (int i = run->net.L - run->cpu_layers; i < run->net.L; i++)
            mlp_cpu_opt_wait_done(run, run->gpu->cpu, i, s);
    if (run->gpu->half_stream) /* and the half copies of those updates */
        CUDA_CHECK(run, cudaStreamSynchronize(run->gpu->half_stream));
}

void mlp_gpu_finish(mlp_run_t *run) {
    mlp_gpu_cpu_wait(run, run->opt->c.steps - 1); /* the last step's updates */
}

int mlp_gpu_cpu_times(const mlp_run_t *run, int s, double *adamw_ms, double *wait_ms) {
    if (run->gpu == NULL || run->gpu->cpu == NULL)
        return 0;
    mlp_cpu_opt_step_times(run->gpu->cpu, s, adamw_ms, wait_ms);
    *adamw_ms *= 1e3;
    *wait_ms *= 1e3;
    return 1;
}

int mlp_gpu_cpu_block_ns(const mlp_run_t *run, int s, int i, uint64_t *ns) {
    double sec = 0;
    *ns = 0;
    if (run->gpu == NULL || run->gpu->cpu == NULL || !mlp_cpu_opt_block_time(run->gpu->cpu, s, i, &sec))
        return 0;
    *ns = (uint64_t)(sec * 1e9) + 1;
    return 1;
}

void mlp_gpu_summary(const mlp_run_t *run, FILE *out) {
    if (run->gpu->cpu && mlp_cpu_opt_busy_s(run->gpu->cpu) > 0) /* auto may have chosen K 0 */
        fprintf(out, "cpu optimizer: %.1f ms of AdamW per step (path %s)\n",
                mlp_cpu_opt_busy_s(run->gpu->cpu) * 1e3 / run->opt->c.steps, mlp_isa_name(run->isa));
}
