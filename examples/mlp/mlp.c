/*
 * mlp.c -- uvmrt-mlp: a deep MLP trained on uvmrt, in the style of llm.c.
 *
 * Model: L blocks of Linear(H, H, no bias) + GELU on N rows per step; the loss is
 * the MSE against targets made by a fixed random teacher network of the same shape,
 * so the loss really falls. Numerics as PyTorch autocast: fp32 master weights,
 * bf16 (default) or fp16 working copies, activations and activation gradients;
 * GEMMs through cublasGemmEx with fp32 accumulation; fp32 weight gradients; AdamW
 * (beta1 .9, beta2 .999, eps 1e-8, decoupled weight decay .01) with fp32 moments.
 * fp16 uses dynamic loss scaling (skip the step and halve the scale on inf/NaN,
 * double it after 1000 good steps).
 *
 * Every tensor is a uvmrt tensor with its role, allocated per layer, and every
 * layer's work (forward i, backward i, optimizer i) is bracketed by
 * uvmrt_layer_begin/end naming each tensor it uses, so uvmrt plans all of it.
 * UVMRT_USE_STREAM marks only uses that touch each byte once (elementwise kernels,
 * GEMM outputs), never a GEMM input (cuBLAS rereads those).
 *
 * --optimizer-on gpu: AdamW kernels per layer in the optimizer phase.
 * --optimizer-on cpu: master weights, moments and gradients live in host memory
 * (uvmrt_tensor_set_placement); the GPU writes dW_i straight into host memory;
 * a CPU thread runs AdamW for layer i (AVX-512/AVX2, OpenMP, pinned near the GPU)
 * as soon as backward i has finished, and writes the new working copy Wh_i into
 * its managed memory, which the next forward prefetches; forward i of the next
 * step waits (on the host) for that update.
 *
 * Without a GPU it runs the same schedule on uvmrt's sim backend, with no
 * arithmetic, and says so.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uvmrt.h"
#include "../common/cli.h"

#include "adamw_cpu.h"
#include "mlp_math.h"
#include "mlp_ref.h"

#if defined(UVMRT_HAVE_CUDA) && defined(UVMRT_HAVE_CUBLAS)
#define MLP_GPU 1
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "mlp_kernels.h"

/* kept free on the GPU beyond our allocations: real oversubscription can hang the GPU */
static const uint64_t GPU_SAFETY_BYTES = 4ull << 30;
static const size_t CUBLAS_WORKSPACE_BYTES = 32u << 20;
#endif

#define PROG "uvmrt-mlp"

static const double GIB = 1024.0 * 1024.0 * 1024.0; /* sizes: GiB */
static const double GB = 1e9;                        /* traffic: GB */
static const char *FALLBACK_PROFILE = "consumer-8g";
static const double FP16_INIT_SCALE = 65536.0;       /* PyTorch GradScaler's default */
static const int FP16_GROWTH_INTERVAL = 1000;

/* ----------------------------------------------------------------------------
 * options */

typedef struct mlp_options {
    int layers, hidden, rows, steps; /* L, H, N, S */
    double lr;
    uint64_t seed;
    uint64_t budget_bytes;           /* 0 = auto */
    uvmrt_policy_t policy;
    uvmrt_backend_kind_t backend;
    int backend_explicit;
    const char *profile;             /* sim profile; NULL: the library's default */
    mlp_half_kind_t precision;
    int optimizer_cpu;               /* 1: some blocks' AdamW runs on the CPU */
    int cpu_layers;                  /* K: blocks L-K..L-1 update on the CPU; -1: from
                                        --optimizer-on (0 for gpu, L for cpu) */
    int recompute;
    const char *report_format, *report_path; /* --report FORMAT:PATH */
    const char *trace_path;
    const char *loss_log;            /* --loss-log PATH: one line per step, %a */
    const char *result_json;         /* --result-json PATH: figures for bench tables */
    int quiet;
} mlp_options_t;

static void usage(FILE *out) {
    fprintf(out,
        "Usage: " PROG " [OPTION]...\n"
        "Train a deep MLP (L x [Linear(H,H) + GELU], MSE against a random teacher) on\n"
        "uvmrt, with tensors that may exceed the GPU's memory.\n"
        "\n"
        "  --layers L            blocks (default 24)\n"
        "  --hidden H            width, a multiple of 8 (default 8192)\n"
        "  --rows N              rows per step, a multiple of 8 (default 8192)\n"
        "  --steps S             training steps (default 6); step 1 records the schedule\n"
        "  --lr LR               AdamW learning rate (default 1e-4)\n"
        "  --seed SEED           seed of weights, input and teacher (default 1)\n"
        "  --budget SIZE|auto    device bytes uvmrt may keep resident (default auto;\n"
        "                        not applied to policy none)\n"
        "  --policy none|demand|prefetch   (default prefetch)\n"
        "  --backend cuda|sim    (default cuda; without a GPU: sim, profile %s)\n"
        "  --profile NAME        sim device profile (see uvmrt-demo --profile list)\n"
        "  --precision bf16|fp16 working precision (default bf16; fp16 scales the loss)\n"
        "  --optimizer-on gpu|cpu  where AdamW runs (default gpu)\n"
        "  --cpu-layers K        AdamW of the top K blocks on the CPU, the rest on the GPU\n"
        "                        (0: gpu, L: cpu)\n"
        "  --recompute           keep only each block's input; recompute in backward\n"
        "  --report FORMAT:PATH  write uvmrt's report as text, json, csv or trace ('-': stdout)\n"
        "  --loss-log PATH       one line per step: step, loss (%%a, exact), loss scale\n"
        "  --result-json PATH    medians and totals of the run, for benchmark tables\n"
        "  --trace PATH          trace-event timeline (Perfetto), where the library writes\n"
        "                        them (fault statistics, issue 3); otherwise a note\n"
        "  -q, --quiet           no configuration or per-layer report\n"
        "  -h, --help            this help\n"
        "  -V, --version         version\n"
        "\n"
        "SIZE: an integer with an optional K, M, G or T suffix (powers of 1024).\n"
        "UVMRT_* environment variables override the uvmrt flags (see uvmrt-mlp(1)).\n"
        "Exit status: 0 success, 1 runtime error, 2 bad usage.\n",
        FALLBACK_PROFILE);
}

static void options_parse(int argc, char **argv, mlp_options_t *opt) {
    enum { O_LAYERS = 256, O_HIDDEN, O_ROWS, O_STEPS, O_LR, O_SEED, O_BUDGET, O_POLICY,
           O_BACKEND, O_PROFILE, O_PRECISION, O_OPTIMIZER_ON, O_RECOMPUTE, O_REPORT, O_TRACE,
           O_LOSS_LOG, O_RESULT_JSON, O_CPU_LAYERS };
    static const struct option longopts[] = {
        {"layers", required_argument, NULL, O_LAYERS},
        {"hidden", required_argument, NULL, O_HIDDEN},
        {"rows", required_argument, NULL, O_ROWS},
        {"steps", required_argument, NULL, O_STEPS},
        {"lr", required_argument, NULL, O_LR},
        {"seed", required_argument, NULL, O_SEED},
        {"budget", required_argument, NULL, O_BUDGET},
        {"policy", required_argument, NULL, O_POLICY},
        {"backend", required_argument, NULL, O_BACKEND},
        {"profile", required_argument, NULL, O_PROFILE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"optimizer-on", required_argument, NULL, O_OPTIMIZER_ON},
        {"cpu-layers", required_argument, NULL, O_CPU_LAYERS},
        {"recompute", no_argument, NULL, O_RECOMPUTE},
        {"report", required_argument, NULL, O_REPORT},
        {"trace", required_argument, NULL, O_TRACE},
        {"loss-log", required_argument, NULL, O_LOSS_LOG},
        {"result-json", required_argument, NULL, O_RESULT_JSON},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *opt = (mlp_options_t){
        .layers = 24, .hidden = 8192, .rows = 8192, .steps = 6, .lr = 1e-4, .seed = 1,
        .policy = UVMRT_POLICY_PREFETCH, .backend = UVMRT_BACKEND_CUDA, .precision = MLP_BF16,
        .cpu_layers = -1,
    };
    int c;
    while ((c = getopt_long(argc, argv, "qhV", longopts, NULL)) != -1) {
        switch (c) {
        case O_LAYERS: opt->layers = (int)cli_parse_int("--layers", optarg, 1, 4096); break;
        case O_HIDDEN:
            opt->hidden = (int)cli_parse_int("--hidden", optarg, 8, 1 << 17);
            if (opt->hidden % 8)
                cli_usage_error("--hidden '%s': expected a multiple of 8", optarg);
            break;
        case O_ROWS:
            opt->rows = (int)cli_parse_int("--rows", optarg, 8, 1 << 24);
            if (opt->rows % 8)
                cli_usage_error("--rows '%s': expected a multiple of 8", optarg);
            break;
        case O_STEPS: opt->steps = (int)cli_parse_int("--steps", optarg, 1, 10000000); break;
        case O_LR: {
            char *end = NULL;
            errno = 0;
            opt->lr = strtod(optarg, &end);
            if (errno || end == optarg || *end != '\0' || !(opt->lr > 0.0) || !isfinite(opt->lr))
                cli_usage_error("--lr '%s': expected a positive number such as 1e-4", optarg);
            break;
        }
        case O_SEED: opt->seed = cli_parse_u64("--seed", optarg); break;
        case O_BUDGET: opt->budget_bytes = cli_parse_size("--budget", optarg, 1); break;
        case O_POLICY:
            if (uvmrt_policy_parse(optarg, &opt->policy) != UVMRT_OK)
                cli_usage_error("--policy '%s': expected none, demand or prefetch", optarg);
            break;
        case O_BACKEND:
            if (uvmrt_backend_parse(optarg, &opt->backend) != UVMRT_OK)
                cli_usage_error("--backend '%s': expected cuda or sim", optarg);
            opt->backend_explicit = 1;
            break;
        case O_PROFILE:
            if (uvmrt_profile_find(optarg) == NULL)
                cli_usage_error("--profile '%s': expected a sim profile name such as h200 or "
                            "consumer-8g (uvmrt-demo --profile list)", optarg);
            opt->profile = optarg;
            break;
        case O_PRECISION:
            if (strcmp(optarg, "bf16") == 0)
                opt->precision = MLP_BF16;
            else if (strcmp(optarg, "fp16") == 0)
                opt->precision = MLP_FP16;
            else
                cli_usage_error("--precision '%s': expected bf16 or fp16", optarg);
            break;
        case O_OPTIMIZER_ON:
            if (strcmp(optarg, "gpu") == 0)
                opt->optimizer_cpu = 0;
            else if (strcmp(optarg, "cpu") == 0)
                opt->optimizer_cpu = 1;
            else
                cli_usage_error("--optimizer-on '%s': expected gpu or cpu", optarg);
            opt->cpu_layers = -1;
            break;
        case O_CPU_LAYERS:
            opt->cpu_layers = (int)cli_parse_int("--cpu-layers", optarg, 0, 4096);
            break;
        case O_RECOMPUTE: opt->recompute = 1; break;
        case O_REPORT: cli_parse_report("--report", optarg, &opt->report_format, &opt->report_path); break;
        case O_TRACE: opt->trace_path = cli_parse_path("--trace", optarg); break;
        case O_LOSS_LOG: opt->loss_log = cli_parse_path("--loss-log", optarg); break;
        case O_RESULT_JSON: opt->result_json = cli_parse_path("--result-json", optarg); break;
        case 'q': opt->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf(PROG " (uvmrt) %s\n", uvmrt_version_string()); exit(0);
        default:
            fprintf(stderr, "Try '" PROG " --help' for more information.\n");
            exit(2);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s': this program takes options only", argv[optind]);
    if (opt->cpu_layers > opt->layers)
        cli_usage_error("--cpu-layers '%d': expected at most --layers (%d)", opt->cpu_layers,
                    opt->layers);
    if (opt->cpu_layers < 0)
        opt->cpu_layers = opt->optimizer_cpu ? opt->layers : 0;
    opt->optimizer_cpu = opt->cpu_layers > 0;
}

/* Block i's AdamW runs on the CPU: the top K blocks, whose backward ends first. */
static int block_on_cpu(const mlp_options_t *opt, int i) {
    return i >= opt->layers - opt->cpu_layers;
}

static const char *placement_name(const mlp_options_t *opt) {
    return opt->cpu_layers == 0 ? "gpu" : opt->cpu_layers == opt->layers ? "cpu" : "mixed";
}

/* ----------------------------------------------------------------------------
 * the model's tensors */

/* One block: y = gelu(x W^T). Shapes beside the pointers; "half" is bf16 or fp16. */
typedef struct mlp_block {
    uvmrt_tensor_t *W;  /* (H, H) fp32 master weights                 weight */
    uvmrt_tensor_t *Wh; /* (H, H) half working copy, GEMM input        weight */
    uvmrt_tensor_t *dW; /* (H, H) fp32 gradient                        gradient */
    uvmrt_tensor_t *m;  /* (H, H) fp32 AdamW first moment              optimizer state */
    uvmrt_tensor_t *v;  /* (H, H) fp32 AdamW second moment             optimizer state */
    uvmrt_tensor_t *Z;  /* (N, H) half pre-activation, saved (NULL with --recompute) */
    uvmrt_tensor_t *A;  /* (N, H) half output gelu(Z): the next block's input   activation */
} mlp_block_t;

typedef struct mlp_net {
    int L, H, N;
    size_t hh, nh;          /* H*H, N*H elements */
    mlp_block_t *blocks;    /* (L,) */
    uvmrt_tensor_t *X;      /* (N, H) half input (the input of block 0), no layer */
    uvmrt_tensor_t *Y;      /* (N, H) half targets (the teacher's output) */
    uvmrt_tensor_t *dA[2];  /* (N, H) half gradient w.r.t. a block's output, ping-pong:
                               dA[i & 1] holds dL/dA_i */
    uvmrt_tensor_t *dZ;     /* (N, H) half gradient w.r.t. Z_i, GEMM input */
    uvmrt_tensor_t *Zr;     /* (N, H) half recomputed pre-activation (--recompute) */
    uint64_t managed_bytes; /* sum of the tensors' footprints (2 MiB blocks) */
} mlp_net_t;

static uint64_t footprint(uint64_t bytes) {
    uint64_t blk = 2ull << 20;
    return bytes >= (1ull << 20) ? (bytes + blk - 1) / blk * blk : bytes;
}

/* A block's input: A_{i-1}, or X for block 0. */
static uvmrt_tensor_t *block_input(const mlp_net_t *net, int i) {
    return i == 0 ? net->X : net->blocks[i - 1].A;
}

/* ----------------------------------------------------------------------------
 * a run: the context, the GPU handles, the CPU optimizer */

#ifdef MLP_GPU
/* The CPU optimizer thread and what it shares with the main thread. */
typedef struct cpu_opt {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;
    int L, steps;
    int *recorded;         /* (L,) last step whose backward i has its event recorded */
    int *done;             /* (L,) last step whose update of block i has finished */
    float *scale;          /* (steps,) loss scale of each step (fp16) */
    cudaEvent_t *ev;       /* (L,) recorded after backward i */
    /* (L, 5) W, m, v, dW, Wh of each block, read once on the main thread: the worker
     * makes no uvmrt calls (a context is driven by one thread) */
    void *(*data)[5];
    volatile int *found_inf; /* (steps,) mapped host memory: inf/NaN gradients in step s */
    int device;            /* the context's GPU: made current on the thread */
    int numa_node;
    int quit;
    double busy_s;         /* time spent in AdamW */
    struct mlp_run *run;
} cpu_opt_t;
#endif

typedef struct mlp_run {
    const mlp_options_t *opt;
    uvmrt_context_t *ctx;
    uvmrt_backend_kind_t backend;
    uvmrt_policy_t policy;
    const uvmrt_profile_t *profile;
    mlp_net_t net;
    int compute;                 /* 1: the GPU does the arithmetic (cuda backend) */
    uvmrt_stream_t stream;
    double loss_scale;           /* fp16: current scale; bf16: 1 */
    int good_steps;              /* fp16: steps since the scale last changed */
    long adam_t;                 /* AdamW updates done (GPU optimizer) */
    double *losses;              /* (S,) */
    int *skipped;                /* (S,) 1: step skipped (fp16 inf/NaN) */
    uvmrt_step_stats_t *stats;   /* (S,) */
    uint64_t device_workspace_bytes; /* cudaMalloc'd beside uvmrt's tensors */
    mlp_isa_t isa;
#ifdef MLP_GPU
    cublasHandle_t cublas;
    void *cublas_ws;             /* (32 MiB) device */
    double *partials;            /* (MLP_MSE_BLOCKS,) device */
    double *loss_host;           /* (S,) mapped host memory, written by the GPU */
    int *found_inf;              /* (S,) mapped host memory */
    cpu_opt_t cpu;
#endif
} mlp_run_t;

static void run_close(mlp_run_t *run);

/* Fails the run: the message, then the run's resources released, then exit 1. */
static void run_close_cb(void *run) { run_close(run); }
#define run_fail(run, ...) cli_fail(run_close_cb, (run), __VA_ARGS__)

#ifdef MLP_GPU
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
#endif

static inline void *ptr(uvmrt_tensor_t *t) {
    return t ? uvmrt_tensor_ptr(t) : NULL;
}

/* ----------------------------------------------------------------------------
 * context */

static uvmrt_context_t *context_open(mlp_options_t *opt) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    params.backend = opt->backend;
    params.profile = opt->profile;
    params.policy = opt->policy;
    params.budget_bytes = opt->policy == UVMRT_POLICY_NONE ? 0 : opt->budget_bytes;

#ifdef MLP_GPU
    const int gpu_built = 1;
#else
    const int gpu_built = 0;
#endif
    cli_backend_choice_t choice = {gpu_built, PROG " was built without CUDA and cuBLAS",
                                   opt->backend_explicit, FALLBACK_PROFILE, NULL, NULL};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    uvmrt_context_set_total_steps(ctx, (uint64_t)opt->steps); /* uvmrt-top's ETA */
    opt->backend = params.backend;
    opt->profile = params.profile;
    return ctx;
}

/* ----------------------------------------------------------------------------
 * allocation: one uvmrt_tensors_alloc per block, one for the shared tensors */

enum { T_W, T_WH, T_DW, T_M, T_V, T_Z, T_A, T_PER_BLOCK };

static void net_alloc(mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    mlp_net_t *net = &run->net;
    net->L = opt->layers, net->H = opt->hidden, net->N = opt->rows;
    net->hh = (size_t)net->H * (size_t)net->H;
    net->nh = (size_t)net->N * (size_t)net->H;
    size_t w32 = net->hh * 4, w16 = net->hh * 2, a16 = net->nh * 2;
    net->blocks = calloc((size_t)net->L, sizeof *net->blocks);
    if (net->blocks == NULL)
        run_fail(run, "out of host memory");

    for (int i = 0; i < net->L; i++) {
        char lname[32];
        int id = -1;
        snprintf(lname, sizeof lname, "block%d", i);
        UV_CHECK(run, uvmrt_layer_add(run->ctx, lname, &id));
        if (id != i)
            run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", lname, id, i);
    }
    for (int i = 0; i < net->L; i++) {
        char names[T_PER_BLOCK][32];
        static const char *const fmt[T_PER_BLOCK] = {"W%d", "Wh%d", "dW%d", "m%d", "v%d",
                                                     "Z%d", "A%d"};
        for (int k = 0; k < T_PER_BLOCK; k++)
            snprintf(names[k], sizeof names[k], fmt[k], i);
        uvmrt_tensor_desc_t d[T_PER_BLOCK] = {
            {names[T_W], i, UVMRT_ROLE_WEIGHT, w32},
            {names[T_WH], i, UVMRT_ROLE_WEIGHT, w16},
            {names[T_DW], i, UVMRT_ROLE_GRADIENT, w32},
            {names[T_M], i, UVMRT_ROLE_OPTIMIZER_STATE, w32},
            {names[T_V], i, UVMRT_ROLE_OPTIMIZER_STATE, w32},
            {names[T_A], i, UVMRT_ROLE_ACTIVATION, a16},
            {names[T_Z], i, UVMRT_ROLE_ACTIVATION, a16},
        };
        size_t n = opt->recompute ? T_PER_BLOCK - 1 : T_PER_BLOCK; /* Z last: dropped */
        uvmrt_tensor_t *t[T_PER_BLOCK] = {0};
        UV_CHECK(run, uvmrt_tensors_alloc(run->ctx, n, d, t));
        mlp_block_t *b = &net->blocks[i];
        *b = (mlp_block_t){.W = t[0], .Wh = t[1], .dW = t[2], .m = t[3], .v = t[4], .A = t[5],
                           .Z = opt->recompute ? NULL : t[6]};
        for (size_t k = 0; k < n; k++)
            net->managed_bytes += footprint(d[k].size_bytes);
    }
    uvmrt_tensor_desc_t s[6] = {
        {"X", -1, UVMRT_ROLE_ACTIVATION, a16},
        {"Y", -1, UVMRT_ROLE_ACTIVATION, a16},
        {"dA0", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"dA1", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"dZ", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"Zr", -1, UVMRT_ROLE_WORKSPACE, a16},
    };
    size_t n = opt->recompute ? 6 : 5;
    uvmrt_tensor_t *t[6] = {0};
    UV_CHECK(run, uvmrt_tensors_alloc(run->ctx, n, s, t));
    net->X = t[0], net->Y = t[1], net->dA[0] = t[2], net->dA[1] = t[3], net->dZ = t[4];
    net->Zr = opt->recompute ? t[5] : NULL;
    for (size_t k = 0; k < n; k++)
        net->managed_bytes += footprint(s[k].size_bytes);

    if (opt->optimizer_cpu) /* the CPU's data lives on the host; the GPU writes dW there */
        for (int i = net->L - opt->cpu_layers; i < net->L; i++) {
            mlp_block_t *b = &net->blocks[i];
            uvmrt_tensor_t *host[4] = {b->W, b->m, b->v, b->dW};
            for (int k = 0; k < 4; k++)
                UV_CHECK(run, uvmrt_tensor_set_placement(run->ctx, host[k], UVMRT_PLACE_HOST));
        }
}

/* Bytes the trainer will allocate: uvmrt's tensors, before allocating them. */
static uint64_t planned_managed_bytes(const mlp_options_t *opt) {
    uint64_t hh = (uint64_t)opt->hidden * (uint64_t)opt->hidden;
    uint64_t nh = (uint64_t)opt->rows * (uint64_t)opt->hidden;
    uint64_t block = 4 * footprint(4 * hh) + footprint(2 * hh) +
                     (opt->recompute ? 1 : 2) * footprint(2 * nh);
    return (uint64_t)opt->layers * block + (opt->recompute ? 6 : 5) * footprint(2 * nh);
}

/* ----------------------------------------------------------------------------
 * initialisation (GPU runs only): on the host, so the pages start where uvmrt's
 * accounting says they are; the teacher's targets on the GPU from device buffers */

#ifdef MLP_GPU
static void net_init(mlp_run_t *run) {
    const mlp_net_t *net = &run->net;
    mlp_half_kind_t kind = run->opt->precision;
    uint64_t seed = run->opt->seed;
    float b = mlp_init_weight_bound(net->H), s = mlp_init_input_scale();
    double t0 = cli_now_s();
    uint16_t *x = ptr(net->X);
#pragma omp parallel for schedule(static)
    for (size_t j = 0; j < net->nh; j++)
        x[j] = mlp_f32_to_half(mlp_uniform(seed, MLP_ID_INPUT, j) * s, kind);
    for (int i = 0; i < net->L; i++) {
        const mlp_block_t *blk = &net->blocks[i];
        float *w = ptr(blk->W), *m = ptr(blk->m), *v = ptr(blk->v);
        uint16_t *wh = ptr(blk->Wh);
#pragma omp parallel for schedule(static)
        for (size_t j = 0; j < net->hh; j++) {
            w[j] = mlp_uniform(seed, MLP_ID_STUDENT(i), j) * b;
            wh[j] = mlp_f32_to_half(w[j], kind);
            m[j] = 0.0f;
            v[j] = 0.0f;
        }
    }
    if (!run->opt->quiet)
        printf("  initialised X, W, Wh, m, v (%.2f GiB) on the host in %.1f s\n",
               ((double)net->nh * 2 + (double)net->L * (double)net->hh * 14) / GIB,
               cli_now_s() - t0);
}

/* out (rows, H) = in (rows, H) . W^T, W (H, H) row-major; half in, out_type out. */
static void gemm_forward(mlp_run_t *run, void *out, const void *in, const void *w, int rows,
                         int H) {
    cudaDataType_t t = run->opt->precision == MLP_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->cublas, CUBLAS_OP_T, CUBLAS_OP_N, H, rows, H, &one, w, t,
                                   H, in, t, H, &zero, out, t, H, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

/* dW (H, H) fp32 = dZ^T (H, rows) . in (rows, H) */
static void gemm_weight_grad(mlp_run_t *run, float *dw, const void *dz, const void *in, int rows,
                             int H) {
    cudaDataType_t t = run->opt->precision == MLP_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->cublas, CUBLAS_OP_N, CUBLAS_OP_T, H, H, rows, &one, in, t,
                                   H, dz, t, H, &zero, dw, CUDA_R_32F, H, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

/* dIn (rows, H) half = dZ (rows, H) . W (H, H) */
static void gemm_input_grad(mlp_run_t *run, void *din, const void *dz, const void *w, int rows,
                            int H) {
    cudaDataType_t t = run->opt->precision == MLP_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(run, cublasGemmEx(run->cublas, CUBLAS_OP_N, CUBLAS_OP_N, H, rows, H, &one, w, t,
                                   H, dz, t, H, &zero, din, t, H, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT));
}

/* Y = teacher(X): teacher weights made one block at a time on the GPU, in device
 * buffers outside uvmrt (counted in the safety check); X and Y cross through host
 * buffers, so their managed pages stay on the host. */
static void teacher_targets(mlp_run_t *run) {
    const mlp_net_t *net = &run->net;
    mlp_half_kind_t kind = run->opt->precision;
    cudaStream_t s = (cudaStream_t)run->stream;
    size_t a16 = net->nh * 2, w16 = net->hh * 2;
    void *T = NULL, *P[2] = {NULL, NULL};
    double t0 = cli_now_s();
    CUDA_CHECK(run, cudaMalloc(&T, w16));
    CUDA_CHECK(run, cudaMalloc(&P[0], a16));
    CUDA_CHECK(run, cudaMalloc(&P[1], a16));
    uint16_t *buf = malloc(a16);
    if (buf == NULL)
        run_fail(run, "out of host memory for the teacher's targets");
    memcpy(buf, ptr(net->X), a16);
    CUDA_CHECK(run, cudaMemcpyAsync(P[0], buf, a16, cudaMemcpyHostToDevice, s));
    float b = mlp_init_weight_bound(net->H);
    for (int i = 0; i < net->L; i++) {
        launch_check(run, mlp_fill_uniform_launch(T, net->hh, run->opt->seed ^ MLP_TEACHER_SEED_XOR,
                                                  MLP_ID_TEACHER(i), b, kind, run->stream),
                     "teacher init", i);
        gemm_forward(run, P[1], P[0], T, net->N, net->H);
        launch_check(run, mlp_gelu_forward_launch(P[0], P[1], net->nh, kind, run->stream),
                     "teacher gelu", i);
    }
    CUDA_CHECK(run, cudaMemcpyAsync(buf, P[0], a16, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(run, cudaStreamSynchronize(s));
    memcpy(ptr(net->Y), buf, a16);
    free(buf);
    cudaFree(T);
    cudaFree(P[0]);
    cudaFree(P[1]);
    if (!run->opt->quiet)
        printf("  teacher targets Y computed on the GPU in %.1f s\n", cli_now_s() - t0);
}
#endif /* MLP_GPU */

/* ----------------------------------------------------------------------------
 * the CPU optimizer thread (--optimizer-on cpu, GPU runs) */

#ifdef MLP_GPU
static void cpu_update_block(mlp_run_t *run, int i, const mlp_adamw_coef_t *c) {
    void **d = run->cpu.data[i];
    mlp_adamw_cpu(run->isa, d[0], d[1], d[2], d[3], d[4], run->opt->precision, run->net.hh, c);
}

static int cpu_wait_recorded(cpu_opt_t *c, int i, int s) {
    pthread_mutex_lock(&c->mu);
    while (c->recorded[i] < s && !c->quit)
        pthread_cond_wait(&c->cv, &c->mu);
    int quit = c->quit;
    pthread_mutex_unlock(&c->mu);
    return !quit;
}

static void *cpu_opt_main(void *arg) {
    cpu_opt_t *c = arg;
    mlp_run_t *run = c->run;
    int fp16 = run->opt->precision == MLP_FP16;
    long t = 0;
    const char *why = NULL;
    if (cudaSetDevice(c->device) != cudaSuccess)
        goto fail;
    if (mlp_cpu_pin_node(c->numa_node, &why) != 0 && !run->opt->quiet)
        printf("  cpu optimizer: not pinned (%s)\n", why);
    for (int s = 0; s < c->steps; s++) {
        int skip = 0;
        if (fp16) { /* the whole backward decides whether the step counts */
            if (!cpu_wait_recorded(c, 0, s))
                return NULL;
            if (cudaEventSynchronize(c->ev[0]) != cudaSuccess)
                goto fail;
            skip = c->found_inf[s] != 0;
        }
        pthread_mutex_lock(&c->mu);
        double scale = fp16 ? (double)c->scale[s] : 1.0;
        pthread_mutex_unlock(&c->mu);
        mlp_adamw_coef_t coef = mlp_adamw_coef_make(run->opt->lr, MLP_ADAMW_WD, t + 1, scale);
        for (int i = c->L - 1; i >= c->L - run->opt->cpu_layers; i--) {
            if (!cpu_wait_recorded(c, i, s))
                return NULL;
            if (cudaEventSynchronize(c->ev[i]) != cudaSuccess)
                goto fail;
            if (!skip) {
                double t0 = cli_now_s();
                cpu_update_block(run, i, &coef);
                c->busy_s += cli_now_s() - t0;
            }
            pthread_mutex_lock(&c->mu);
            c->done[i] = s;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
        if (!skip)
            t++;
    }
    return NULL;
fail:
    fprintf(stderr, PROG ": cpu optimizer: a CUDA call failed: %s\n",
            cudaGetErrorString(cudaGetLastError()));
    pthread_mutex_lock(&c->mu);
    c->quit = 2;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

static void cpu_opt_start(mlp_run_t *run) {
    cpu_opt_t *c = &run->cpu;
    int L = run->net.L, S = run->opt->steps;
    c->run = run;
    c->L = L, c->steps = S;
    c->recorded = malloc((size_t)L * sizeof(int));
    c->done = malloc((size_t)L * sizeof(int));
    c->scale = calloc((size_t)S, sizeof(float));
    c->ev = calloc((size_t)L, sizeof(cudaEvent_t));
    c->data = calloc((size_t)L, sizeof *c->data);
    if (!c->recorded || !c->done || !c->scale || !c->ev || !c->data)
        run_fail(run, "out of host memory");
    for (int i = 0; i < L; i++) {
        const mlp_block_t *b = &run->net.blocks[i];
        void *d[5] = {ptr(b->W), ptr(b->m), ptr(b->v), ptr(b->dW), ptr(b->Wh)};
        memcpy(c->data[i], d, sizeof d);
    }
    for (int i = 0; i < L; i++) {
        c->recorded[i] = c->done[i] = -1;
        CUDA_CHECK(run, cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming |
                                                                cudaEventBlockingSync));
    }
    c->found_inf = run->found_inf;
    c->numa_node = -1;
    CUDA_CHECK(run, cudaGetDevice(&c->device));
    if (cudaDeviceGetAttribute(&c->numa_node, cudaDevAttrHostNumaId, c->device) != cudaSuccess)
        c->numa_node = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, cpu_opt_main, c) != 0)
        run_fail(run, "cannot start the CPU optimizer thread");
    c->started = 1;
    if (!run->opt->quiet)
        printf("  cpu optimizer: AdamW path %s, host NUMA node of the GPU %d\n",
               mlp_isa_name(run->isa), c->numa_node);
}

/* Before forward i of step s: the update of step s-1 must have finished. */
static void cpu_opt_wait_done(mlp_run_t *run, int i, int s) {
    cpu_opt_t *c = &run->cpu;
    pthread_mutex_lock(&c->mu);
    while (c->done[i] < s && !c->quit)
        pthread_cond_wait(&c->cv, &c->mu);
    int quit = c->quit;
    pthread_mutex_unlock(&c->mu);
    if (quit)
        run_fail(run, "the CPU optimizer thread failed");
}

static void cpu_opt_recorded(mlp_run_t *run, int i, int s) {
    cpu_opt_t *c = &run->cpu;
    pthread_mutex_lock(&c->mu);
    c->recorded[i] = s;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void cpu_opt_stop(mlp_run_t *run) {
    cpu_opt_t *c = &run->cpu;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        if (!c->quit)
            c->quit = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        c->started = 0;
    }
    if (c->ev)
        for (int i = 0; i < c->L; i++)
            if (c->ev[i])
                cudaEventDestroy(c->ev[i]);
    free(c->recorded);
    free(c->done);
    free(c->scale);
    free(c->ev);
    free(c->data);
    c->data = NULL;
    c->recorded = c->done = NULL;
    c->scale = NULL;
    c->ev = NULL;
}
#endif /* MLP_GPU */

/* ----------------------------------------------------------------------------
 * GPU setup and teardown */

static void run_open_gpu(mlp_run_t *run) {
#ifdef MLP_GPU
    const mlp_options_t *opt = run->opt;
    uint64_t nh = (uint64_t)opt->rows * (uint64_t)opt->hidden;
    uint64_t hh = (uint64_t)opt->hidden * (uint64_t)opt->hidden;
    /* device buffers: cuBLAS workspace, loss partials, and (during init) the teacher */
    run->device_workspace_bytes = CUBLAS_WORKSPACE_BYTES + MLP_MSE_BLOCKS * sizeof(double);
    uint64_t need = planned_managed_bytes(opt) + run->device_workspace_bytes + 2 * hh +
                    4 * nh;
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
    if (!opt->quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB,
               (double)planned_managed_bytes(opt) / GIB);
    cudaStream_t s = NULL;
    CUDA_CHECK(run, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    run->stream = (uvmrt_stream_t)s;
    CUBLAS_CHECK(run, cublasCreate(&run->cublas));
    CUBLAS_CHECK(run, cublasSetStream(run->cublas, s));
    CUDA_CHECK(run, cudaMalloc(&run->cublas_ws, CUBLAS_WORKSPACE_BYTES));
    /* a fixed workspace: cuBLAS then picks the same kernels every run (reproducible) */
    CUBLAS_CHECK(run, cublasSetWorkspace(run->cublas, run->cublas_ws, CUBLAS_WORKSPACE_BYTES));
    CUDA_CHECK(run, cudaMalloc((void **)&run->partials, MLP_MSE_BLOCKS * sizeof(double)));
    CUDA_CHECK(run, cudaHostAlloc((void **)&run->loss_host, (size_t)opt->steps * sizeof(double),
                                  cudaHostAllocMapped));
    CUDA_CHECK(run, cudaHostAlloc((void **)&run->found_inf, (size_t)opt->steps * sizeof(int),
                                  cudaHostAllocMapped));
    memset(run->loss_host, 0, (size_t)opt->steps * sizeof(double));
    memset(run->found_inf, 0, (size_t)opt->steps * sizeof(int));
#else
    run_fail(run, "UVMRT_BACKEND selected the cuda backend, but " PROG
                  " was built without CUDA and cuBLAS");
#endif
}

static void run_close(mlp_run_t *run) {
#ifdef MLP_GPU
    cpu_opt_stop(run);
#endif
    uvmrt_context_destroy(run->ctx); /* first: it may still refer to our stream */
    run->ctx = NULL;
#ifdef MLP_GPU
    if (run->cublas)
        cublasDestroy(run->cublas);
    if (run->cublas_ws)
        cudaFree(run->cublas_ws);
    if (run->partials)
        cudaFree(run->partials);
    if (run->loss_host)
        cudaFreeHost(run->loss_host);
    if (run->found_inf)
        cudaFreeHost(run->found_inf);
    if (run->stream)
        cudaStreamDestroy((cudaStream_t)run->stream);
    run->cublas = NULL;
    run->cublas_ws = run->partials = NULL;
    run->loss_host = NULL;
    run->found_inf = NULL;
#endif
    run->stream = NULL;
    free(run->net.blocks);
    run->net.blocks = NULL;
}

/* ----------------------------------------------------------------------------
 * layer calls: every use named; STREAM only where each byte is touched once */

#define MAX_USES 12

typedef struct use_list {
    uvmrt_use_t u[MAX_USES];
    size_t n;
} use_list_t;

static void use_add(use_list_t *l, uvmrt_tensor_t *t, unsigned access) {
    if (t != NULL && l->n < MAX_USES)
        l->u[l->n++] = (uvmrt_use_t){t, access};
}

static void layer_open(mlp_run_t *run, int i, uvmrt_phase_t phase, const use_list_t *uses,
                       double flops, uint64_t bytes) {
    uvmrt_layer_call_t call = {
        .layer = i, .phase = phase, .stream = run->stream, .uses = uses->u,
        .n_uses = uses->n, .no_default_uses = 1, .flops = flops,
    };
    /* sim: a GEMM-free call (the optimizer) is timed by its bytes at HBM speed */
    if (run->backend == UVMRT_BACKEND_SIM && flops == 0 && run->profile &&
        run->profile->hbm_bps > 0)
        call.sim_duration_ns = (uint64_t)((double)bytes / run->profile->hbm_bps * 1e9);
    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, &call);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_begin(block%d, %s) failed: %s (%s)", i,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
}

static void layer_close(mlp_run_t *run, int i, uvmrt_phase_t phase) {
    uvmrt_status_t st = uvmrt_layer_end(run->ctx);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_end(block%d, %s) failed: %s (%s)", i, uvmrt_phase_name(phase),
                 uvmrt_status_str(st), uvmrt_status_name(st));
}

static const unsigned R = UVMRT_USE_READ, W = UVMRT_USE_WRITE, RW = UVMRT_USE_READWRITE,
                      S = UVMRT_USE_STREAM;

/* forward i: Z = in . Wh^T (GEMM), A = gelu(Z); the last block also takes the loss
 * against Y and writes dL/dA into dA[(L-1) & 1]. */
static void forward(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    int last = i == net->L - 1;
    uvmrt_tensor_t *z = run->opt->recompute ? net->Zr : b->Z;
    use_list_t u = {.n = 0};
    use_add(&u, b->Wh, R);                 /* GEMM input */
    use_add(&u, block_input(net, i), R);   /* GEMM input */
    use_add(&u, z, W | S);                 /* GEMM output, then read once by GELU */
    use_add(&u, b->A, W | S);              /* GELU output (read once by the loss) */
    if (last) {
        use_add(&u, net->Y, R | S);
        use_add(&u, net->dA[i & 1], W | S);
    }
#ifdef MLP_GPU
    if (block_on_cpu(run->opt, i) && run->compute && step > 0)
        cpu_opt_wait_done(run, i, step - 1);
#endif
    layer_open(run, i, UVMRT_PHASE_FORWARD, &u, 2.0 * net->N * (double)net->hh, 0);
#ifdef MLP_GPU
    if (run->compute) {
        mlp_half_kind_t kind = run->opt->precision;
        gemm_forward(run, ptr(z), ptr(block_input(net, i)), ptr(b->Wh), net->N, net->H);
        launch_check(run, mlp_gelu_forward_launch(ptr(b->A), ptr(z), net->nh, kind, run->stream),
                     "gelu forward", i);
        if (last) {
            float grad_mul = (float)(2.0 * run->loss_scale / (double)net->nh);
            launch_check(run, mlp_mse_launch(ptr(b->A), ptr(net->Y), ptr(net->dA[i & 1]), net->nh,
                                             grad_mul, run->partials, kind, run->stream),
                         "mse", i);
            launch_check(run, mlp_mse_finish_launch(run->partials, 1.0 / (double)net->nh,
                                                    &run->loss_host[step], run->stream),
                         "mse finish", i);
        }
    }
#else
    (void)step;
#endif
    layer_close(run, i, UVMRT_PHASE_FORWARD);
}

/* backward i: [Z = in . Wh^T again with --recompute]; dZ = dA_i * gelu'(Z);
 * dW = dZ^T . in (fp32); dA_{i-1} = dZ . Wh (not for block 0). */
static void backward(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    int recompute = run->opt->recompute;
    uvmrt_tensor_t *z = recompute ? net->Zr : b->Z;
    use_list_t u = {.n = 0};
    use_add(&u, b->Wh, R);                  /* GEMM input (twice) */
    use_add(&u, block_input(net, i), R);    /* GEMM input */
    use_add(&u, z, recompute ? W | S : R | S); /* read once by GELU backward */
    use_add(&u, net->dA[i & 1], R | S);     /* read once by GELU backward */
    use_add(&u, net->dZ, W);                /* written once, then a GEMM input twice */
    use_add(&u, b->dW, W | S);              /* GEMM output (then read once by the inf check) */
    if (i > 0)
        use_add(&u, net->dA[(i - 1) & 1], W | S); /* GEMM output */
    double flops = (i > 0 ? 4.0 : 2.0) * net->N * (double)net->hh;
    if (recompute)
        flops += 2.0 * net->N * (double)net->hh;
    layer_open(run, i, UVMRT_PHASE_BACKWARD, &u, flops, 0);
#ifdef MLP_GPU
    if (run->compute) {
        mlp_half_kind_t kind = run->opt->precision;
        void *in = ptr(block_input(net, i));
        if (recompute)
            gemm_forward(run, ptr(z), in, ptr(b->Wh), net->N, net->H);
        launch_check(run, mlp_gelu_backward_launch(ptr(net->dZ), ptr(net->dA[i & 1]), ptr(z),
                                                   net->nh, kind, run->stream),
                     "gelu backward", i);
        gemm_weight_grad(run, ptr(b->dW), ptr(net->dZ), in, net->N, net->H);
        if (kind == MLP_FP16)
            launch_check(run, mlp_nonfinite_launch(ptr(b->dW), net->hh, &run->found_inf[step],
                                                   run->stream),
                         "inf check", i);
        if (i > 0)
            gemm_input_grad(run, ptr(net->dA[(i - 1) & 1]), ptr(net->dZ), ptr(b->Wh), net->N,
                            net->H);
        if (run->opt->optimizer_cpu) { /* every block: fp16 waits for block 0 */
            CUDA_CHECK(run, cudaEventRecord(run->cpu.ev[i], (cudaStream_t)run->stream));
            cpu_opt_recorded(run, i, step);
        }
    }
#else
    (void)step;
#endif
    layer_close(run, i, UVMRT_PHASE_BACKWARD);
}

/* optimizer i (GPU): AdamW on W, m, v from dW; writes the new working copy Wh. */
static void optimizer(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    use_list_t u = {.n = 0};
    use_add(&u, b->W, RW | S);
    use_add(&u, b->m, RW | S);
    use_add(&u, b->v, RW | S);
    use_add(&u, b->dW, R | S);
    use_add(&u, b->Wh, W | S);
    layer_open(run, i, UVMRT_PHASE_OPTIMIZER, &u, 0, (uint64_t)net->hh * (4 * 7 + 2));
#ifdef MLP_GPU
    if (run->compute) {
        mlp_adamw_coef_t c = mlp_adamw_coef_make(run->opt->lr, MLP_ADAMW_WD, run->adam_t + 1,
                                                 run->loss_scale);
        const int *skip = run->opt->precision == MLP_FP16 ? &run->found_inf[step] : NULL;
        launch_check(run, mlp_adamw_launch(ptr(b->W), ptr(b->m), ptr(b->v), ptr(b->dW),
                                           ptr(b->Wh), run->opt->precision, net->hh, &c, skip,
                                           run->stream),
                     "adamw", i);
    }
#else
    (void)step;
#endif
    layer_close(run, i, UVMRT_PHASE_OPTIMIZER);
}

/* ----------------------------------------------------------------------------
 * the step loop */

static double step_flops(const mlp_options_t *opt) {
    double nhh = (double)opt->rows * (double)opt->hidden * (double)opt->hidden;
    return (opt->recompute ? 8.0 : 6.0) * nhh * (double)opt->layers;
}

/* fp16: after step s, lower the scale on inf/NaN (the step was skipped), raise it
 * after a run of good steps. */
static void loss_scale_update(mlp_run_t *run, int s) {
    if (run->opt->precision != MLP_FP16) {
        run->adam_t++;
        return;
    }
#ifdef MLP_GPU
    run->skipped[s] = run->compute && run->found_inf[s] != 0;
#endif
    if (run->skipped[s]) {
        run->loss_scale *= 0.5;
        run->good_steps = 0;
        return;
    }
    run->adam_t++;
    if (++run->good_steps == FP16_GROWTH_INTERVAL) {
        run->loss_scale *= 2.0;
        run->good_steps = 0;
    }
}

static void run_steps(mlp_run_t *run, FILE *loss_log) {
    const mlp_options_t *opt = run->opt;
    mlp_net_t *net = &run->net;
    int L = net->L;
    double flops = step_flops(opt), t_start = cli_now_s();
    for (int s = 0; s < opt->steps; s++) {
#ifdef MLP_GPU
        if (run->compute && opt->optimizer_cpu) {
            pthread_mutex_lock(&run->cpu.mu);
            run->cpu.scale[s] = (float)run->loss_scale;
            pthread_mutex_unlock(&run->cpu.mu);
        }
#endif
        UV_CHECK(run, uvmrt_step_begin(run->ctx));
        for (int i = 0; i < L; i++)
            forward(run, i, s);
        for (int i = L - 1; i >= 0; i--)
            backward(run, i, s);
        for (int i = 0; i < L; i++)
            if (!block_on_cpu(opt, i))
                optimizer(run, i, s);
        UV_CHECK(run, uvmrt_step_end(run->ctx));

#ifdef MLP_GPU
        if (run->compute)
            run->losses[s] = run->loss_host[s]; /* the stream is done: step_end waited */
#endif
        double scale_used = run->loss_scale;
        loss_scale_update(run, s);
        uvmrt_step_stats_t *st = &run->stats[s];
        UV_CHECK(run, uvmrt_step_stats_get(run->ctx, (uint64_t)s, st));
        double ms = (double)st->step_ns / 1e6;
        double in = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
        double out = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
        double elapsed = cli_now_s() - t_start, eta = elapsed / (s + 1) * (opt->steps - s - 1);
        char loss_text[32] = "-";
        if (run->compute)
            snprintf(loss_text, sizeof loss_text, "%.6f", run->losses[s]);
        printf("step %d/%d  loss %s  %.1f ms  %.1f TFLOP/s  in %.2f GB  out %.2f GB  faults %"
               PRIu64 "  ETA %.0f s%s%s\n",
               s + 1, opt->steps, loss_text, ms, ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0, in,
               out, st->fault_count, eta, run->skipped[s] ? "  (skipped: inf/NaN gradients)" : "",
               s == 0 ? "  (recording step)" : "");
        fflush(stdout);
        if (loss_log)
            fprintf(loss_log, "%d %a %a%s\n", s + 1, run->losses[s], scale_used,
                    run->skipped[s] ? " skipped" : "");
    }
#ifdef MLP_GPU
    if (run->compute && opt->optimizer_cpu) /* the last step's updates */
        for (int i = L - opt->cpu_layers; i < L; i++)
            cpu_opt_wait_done(run, i, opt->steps - 1);
#endif
}

/* ----------------------------------------------------------------------------
 * results */

typedef struct mlp_medians {
    double ms, in_gb, out_gb, faults;
} mlp_medians_t;

/* Medians over steps 2..S (step 1 records the schedule); step 1 when S == 1. */
static mlp_medians_t run_medians(const mlp_run_t *run) {
    int nsteps = run->opt->steps, first = nsteps > 1 ? 1 : 0;
    size_t n = (size_t)(nsteps - first);
    double *v = malloc(n * sizeof *v);
    mlp_medians_t m = {0};
    if (v == NULL)
        return m;
    const uvmrt_step_stats_t *st = run->stats + first;
#define MLP_MEDIAN(field, expr)                                                                \
    do {                                                                                       \
        for (size_t k = 0; k < n; k++)                                                         \
            v[k] = (expr);                                                                     \
        m.field = cli_median(v, n);                                                                \
    } while (0)
    MLP_MEDIAN(ms, (double)st[k].step_ns / 1e6);
    MLP_MEDIAN(in_gb, (double)(st[k].prefetch_bytes + st[k].remote_read_bytes) / GB);
    MLP_MEDIAN(out_gb, (double)(st[k].evict_bytes + st[k].remote_write_bytes) / GB);
    MLP_MEDIAN(faults, (double)st[k].fault_count);
#undef MLP_MEDIAN
    free(v);
    return m;
}

static void result_write(const mlp_run_t *run, const char *path, const mlp_medians_t *m,
                         const uvmrt_summary_t *sum) {
    const mlp_options_t *opt = run->opt;
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", path, strerror(errno));
        return;
    }
    double tflops = m->ms > 0 ? step_flops(opt) / (m->ms * 1e-3) / 1e12 : 0.0;
    fprintf(f, "{\n  \"program\": \"" PROG "\", \"version\": \"%s\",\n", uvmrt_version_string());
    fprintf(f, "  \"backend\": \"%s\", \"policy\": \"%s\", \"budget_bytes\": %" PRIu64 ",\n",
            uvmrt_backend_name(run->backend), uvmrt_policy_name(run->policy), sum->budget_bytes);
    fprintf(f, "  \"layers\": %d, \"hidden\": %d, \"rows\": %d, \"steps\": %d,\n", opt->layers,
            opt->hidden, opt->rows, opt->steps);
    fprintf(f, "  \"precision\": \"%s\", \"optimizer_on\": \"%s\", \"recompute\": %s,\n",
            opt->precision == MLP_BF16 ? "bf16" : "fp16", placement_name(opt),
            opt->recompute ? "true" : "false");
    fprintf(f, "  \"cpu_layers\": %d, \"arithmetic\": %s,\n", opt->cpu_layers,
            run->compute ? "true" : "false");
    fprintf(f, "  \"ms_per_step_median\": %.3f, \"tflops\": %.2f,\n", m->ms, tflops);
    fprintf(f, "  \"gb_in_per_step\": %.4f, \"gb_out_per_step\": %.4f, "
               "\"faults_per_step\": %.1f,\n", m->in_gb, m->out_gb, m->faults);
    fprintf(f, "  \"managed_bytes\": %" PRIu64 ", \"peak_resident_bytes\": %" PRIu64
               ", \"device_workspace_bytes\": %" PRIu64 ",\n",
            run->net.managed_bytes, sum->peak_resident_bytes, run->device_workspace_bytes);
    uint64_t late_faults = 0; /* steps 2..S: a planned tensor should never fault */
    for (int s = 1; s < opt->steps; s++)
        late_faults += run->stats[s].fault_count;
    fprintf(f, "  \"faults_after_step1\": %" PRIu64 ",\n", late_faults);
    fprintf(f, "  \"losses\": [");
    for (int s = 0; s < opt->steps; s++)
        fprintf(f, "%s%.9g", s ? ", " : "", run->compute ? run->losses[s] : 0.0);
    fprintf(f, "],\n  \"step_ms\": [");
    for (int s = 0; s < opt->steps; s++)
        fprintf(f, "%s%.3f", s ? ", " : "", (double)run->stats[s].step_ns / 1e6);
    fprintf(f, "]\n}\n");
    fclose(f);
}

/* ----------------------------------------------------------------------------
 * main */

int main(int argc, char **argv) {
    cli_program = PROG;
    mlp_options_t opt;
    options_parse(argc, argv, &opt);
    cli_note_env_overrides();

    mlp_run_t run = {.opt = &opt, .loss_scale = opt.precision == MLP_FP16 ? FP16_INIT_SCALE : 1.0};
    run.losses = calloc((size_t)opt.steps, sizeof *run.losses);
    run.skipped = calloc((size_t)opt.steps, sizeof *run.skipped);
    run.stats = calloc((size_t)opt.steps, sizeof *run.stats);
    if (!run.losses || !run.skipped || !run.stats) {
        fprintf(stderr, PROG ": out of host memory\n");
        return 1;
    }
    run.isa = mlp_isa_best();

    double params = (double)opt.layers * (double)opt.hidden * (double)opt.hidden;
    printf(PROG ": %d x [Linear(%d, %d) + GELU], %d rows, %.2f %s parameters, %s, optimizer on "
           "%s (%d of %d blocks on the CPU)%s; %d steps, lr %g, seed %" PRIu64
           "; tensors %.2f GiB\n",
           opt.layers, opt.hidden, opt.hidden, opt.rows,
           params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M",
           opt.precision == MLP_BF16 ? "bf16" : "fp16", placement_name(&opt), opt.cpu_layers,
           opt.layers, opt.recompute ? ", recompute" : "", opt.steps, opt.lr, opt.seed,
           (double)planned_managed_bytes(&opt) / GIB);

    run.ctx = context_open(&opt);
    run.backend = uvmrt_context_backend(run.ctx);
    run.policy = uvmrt_context_policy(run.ctx);
    run.profile = uvmrt_context_profile(run.ctx);
    printf("policy %s on %s%s%s, budget %.2f GiB\n", uvmrt_policy_name(run.policy),
           uvmrt_backend_name(run.backend), run.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.backend == UVMRT_BACKEND_SIM && run.profile ? run.profile->name : "",
           (double)uvmrt_context_budget(run.ctx) / GIB);
    if (!opt.quiet) {
        uvmrt_context_print_config(run.ctx, stdout);
        fflush(stdout);
    }

    if (run.backend == UVMRT_BACKEND_CUDA) {
        run_open_gpu(&run);
        run.compute = 1;
    } else {
        printf("sim backend: the schedule only, no arithmetic (no losses); times and traffic "
               "are the model's\n");
    }
    net_alloc(&run);
#ifdef MLP_GPU
    if (run.compute) {
        net_init(&run);
        teacher_targets(&run);
        if (opt.optimizer_cpu)
            cpu_opt_start(&run);
    }
#endif

    FILE *loss_log = NULL;
    if (opt.loss_log && (loss_log = fopen(opt.loss_log, "w")) == NULL)
        run_fail(&run, "cannot write --loss-log %s: %s", opt.loss_log, strerror(errno));
    run_steps(&run, loss_log);
    if (loss_log)
        fclose(loss_log);

    if (!opt.quiet) {
        fflush(stdout);
        UV_CHECK(&run, uvmrt_report_write(run.ctx, "text", "-"));
        fflush(stdout);
    }
    if (opt.report_path) {
        UV_CHECK(&run, uvmrt_report_write(run.ctx, opt.report_format, opt.report_path));
        if (strcmp(opt.report_path, "-") != 0)
            printf("report: %s\n", opt.report_path);
    }
    if (opt.trace_path) {
        /* a trace-event timeline, where the library writes them (issue 3) */
        uvmrt_status_t st = uvmrt_report_write(run.ctx, "trace", opt.trace_path);
        if (st == UVMRT_OK)
            printf("trace: %s\n", opt.trace_path);
        else
            fprintf(stderr, PROG ": --trace %s: not available in this uvmrt (%s): traces come "
                            "with fault statistics (issue 3); no trace written\n",
                    opt.trace_path, uvmrt_status_str(st));
    }
    uvmrt_summary_t sum;
    UV_CHECK(&run, uvmrt_summary_get(run.ctx, &sum));
    mlp_medians_t m = run_medians(&run);
    double tflops = m.ms > 0 ? step_flops(&opt) / (m.ms * 1e-3) / 1e12 : 0.0;
    printf("summary: %.1f ms/step, %.1f TFLOP/s, in %.2f GB, out %.2f GB, faults %.0f per step "
           "(medians of steps %d..%d); peak resident %.2f GiB + %.2f GiB device workspace; "
           "budget %.2f GiB",
           m.ms, tflops, m.in_gb, m.out_gb, m.faults, opt.steps > 1 ? 2 : 1, opt.steps,
           (double)sum.peak_resident_bytes / GIB, (double)run.device_workspace_bytes / GIB,
           (double)sum.budget_bytes / GIB);
    if (run.compute)
        printf("; loss %.6f -> %.6f", run.losses[0], run.losses[opt.steps - 1]);
    printf("\n");
#ifdef MLP_GPU
    if (run.compute && opt.optimizer_cpu)
        printf("cpu optimizer: %.1f ms of AdamW per step (path %s)\n",
               run.cpu.busy_s * 1e3 / opt.steps, mlp_isa_name(run.isa));
#endif
    if (opt.result_json)
        result_write(&run, opt.result_json, &m, &sum);
    int status = 0;
    if (run.compute)
        for (int s = 0; s < opt.steps; s++)
            if (!isfinite(run.losses[s])) {
                fprintf(stderr, PROG ": loss of step %d is not finite\n", s + 1);
                status = 1;
                break;
            }
    run_close(&run);
    free(run.losses);
    free(run.skipped);
    free(run.stats);
    return status;
}
