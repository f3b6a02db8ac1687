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
 * a CPU thread (mlp_cpu_opt.c) runs AdamW for layer i as soon as backward i has
 * finished. The GPU then makes the new working copy Wh_i from W_i (reading it over
 * the link) on a stream of its own that waits, on the GPU, for the CPU's flag of
 * block i ("staged", when the driver has stream memory operations): those copies
 * run while the CPU updates the next blocks, and the first CPU block's next forward
 * waits for them all. Without stream memory operations the copy is part of forward
 * i, which waits on the host for the CPU's update.
 *
 * --cpu-layers K|auto, --recompute none|all|N|auto (both auto by default): each
 * block's pre-activation Z is declared recomputable (uvmrt_tensor_set_recompute, at
 * its GEMM's flops); before the tensors exist, uvmrt_choose rehearses the run's
 * schedule on a model of the machine (the same layer calls with no arithmetic, on a
 * sim context) for each K and each number of recomputing Z, and picks the least
 * predicted step time; each block then asks uvmrt_tensor_recomputes for its Z. A
 * recomputing block leaves its Z unused (it holds no device memory) and computes its
 * pre-activation into Zr, one workspace that all of them share, in its forward and
 * again in its backward: the same GEMM on the same inputs, so the losses do not
 * depend on --recompute. After 3 planned steps uvmrt_choice_review compares the
 * prediction with the measured step, and when it re-plans, the new values apply
 * from the next step on (the CPU optimizer's blocks and placements; the blocks that
 * recompute).
 *
 * This file is the model and the training loop; the flags are in mlp_flags.c and
 * the GPU's work (cuBLAS, kernels, initialisation) behind mlp_gpu.h, so nothing
 * here depends on how the program was built. Without a GPU it runs the same
 * schedule on uvmrt's sim backend and says so; there the CPU reference computes a
 * small bf16 network inside the same layer calls (mlp_simref.c), a larger one nothing.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "mlp.h"
#include "mlp_gpu.h"
#include "mlp_ref.h"

static const double GIB = 1024.0 * 1024.0 * 1024.0; /* sizes: GiB */
static const double GB = 1e9;                        /* traffic: GB */
static const double FP16_INIT_SCALE = 65536.0;       /* PyTorch GradScaler's default */
static const int FP16_GROWTH_INTERVAL = 1000;

static const char *placement_name(const mlp_run_t *run) {
    return run->cpu_layers == 0 ? "gpu" : run->cpu_layers == run->opt->layers ? "cpu" : "mixed";
}

/* A sim stream handle for the CPU optimizer's calls (never dereferenced): the same
 * in the rehearsals and a real sim run, so both run the same schedule. */
static char sim_cpu_timeline;
/* the GPU's stream on sim: a name of its own, so that a call can be ordered after it
 * (uvmrt_layer_call_t.after: NULL means none) */
static char sim_gpu_timeline;
/* the staged copies' stream on sim */
static char sim_half_timeline;

static uint64_t footprint(uint64_t bytes) {
    uint64_t blk = 2ull << 20;
    return bytes >= (1ull << 20) ? (bytes + blk - 1) / blk * blk : bytes;
}

/* Zr exists when a block may recompute: --recompute auto (a review may change the
 * count) or N > 0. */
static int has_zr(const mlp_options_t *opt) { return opt->recompute == MLP_AUTO || opt->recompute > 0; }

uint64_t mlp_planned_managed_bytes(const mlp_options_t *opt) {
    uint64_t hh = (uint64_t)opt->hidden * (uint64_t)opt->hidden;
    uint64_t nh = (uint64_t)opt->rows * (uint64_t)opt->hidden;
    uint64_t block = 4 * footprint(4 * hh) + footprint(2 * hh) + 2 * footprint(2 * nh); /* + Z, A */
    return (uint64_t)opt->layers * block + (has_zr(opt) ? 6 : 5) * footprint(2 * nh);
}

/* ----------------------------------------------------------------------------
 * the run: open and close */

void mlp_run_close_cb(void *arg) {
    mlp_run_t *run = arg;
    mlp_gpu_close(run); /* with a GPU: the CPU optimizer, the context, then the GPU's */
    mlp_simref_close(run);
    uvmrt_context_destroy(run->ctx);
    run->ctx = NULL;
    free(run->net.blocks);
    run->net.blocks = NULL;
}

static uvmrt_context_t *context_open(mlp_options_t *opt) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    cli_params_apply(&opt->c, &params);
    cli_backend_choice_t choice = {mlp_gpu_missing == NULL, mlp_gpu_missing, opt->c.backend_explicit,
                                   MLP_FALLBACK_PROFILE, NULL, NULL};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    uvmrt_context_set_total_steps(ctx, (uint64_t)opt->c.steps); /* uvmrt-top's ETA */
    opt->c.backend = params.backend;
    opt->c.profile = params.profile;
    return ctx;
}

/* A uvmrt call of the schedule (allocation, steps, layer calls): on the real run a
 * failure fails the run (message, cleanup, exit 1); in a rehearsal it returns the
 * status to uvmrt_choose (the library has logged what failed). */
#define SCHED_CHECK(run, expr)                                                                 \
    do {                                                                                       \
        uvmrt_status_t st_ = (expr);                                                           \
        if (st_ != UVMRT_OK) {                                                                 \
            if ((run)->rehearsal)                                                              \
                return st_;                                                                    \
            run_fail((run), "%s failed: %s (%s)", #expr, uvmrt_status_str(st_),                \
                     uvmrt_status_name(st_));                                                  \
        }                                                                                      \
    } while (0)

/* Passes a failed status on (the call that failed has said why). */
#define TRY(expr)                                                                              \
    do {                                                                                       \
        uvmrt_status_t st_ = (expr);                                                           \
        if (st_ != UVMRT_OK)                                                                   \
            return st_;                                                                        \
    } while (0)

/* ----------------------------------------------------------------------------
 * allocation: one uvmrt_tensors_alloc per block, one for the shared tensors */

enum { T_W, T_WH, T_DW, T_M, T_V, T_Z, T_A, T_PER_BLOCK };

/* Where blocks [from, to)'s master weights, moments and gradient live: host memory
 * for a CPU optimizer block (the GPU writes dW there), else where uvmrt plans. */
static uvmrt_status_t blocks_place(mlp_run_t *run, int from, int to, uvmrt_placement_t where) {
    for (int i = from; i < to; i++) {
        mlp_block_t *b = &run->net.blocks[i];
        uvmrt_tensor_t *host[4] = {b->W, b->m, b->v, b->dW};
        for (int k = 0; k < 4; k++)
            SCHED_CHECK(run, uvmrt_tensor_set_placement(run->ctx, host[k], where));
    }
    return UVMRT_OK;
}

static uvmrt_status_t net_alloc(mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    mlp_net_t *net = &run->net;
    net->L = opt->layers, net->H = opt->hidden, net->N = opt->rows;
    net->hh = (size_t)net->H * (size_t)net->H;
    net->nh = (size_t)net->N * (size_t)net->H;
    size_t w32 = net->hh * 4, w16 = net->hh * 2, a16 = net->nh * 2;
    net->blocks = calloc((size_t)net->L, sizeof *net->blocks);
    if (net->blocks == NULL) {
        if (run->rehearsal)
            return UVMRT_ERR_NOMEM;
        run_fail(run, "out of host memory");
    }

    for (int i = 0; i < net->L; i++) {
        char lname[32];
        int id = -1;
        snprintf(lname, sizeof lname, "block%d", i);
        SCHED_CHECK(run, uvmrt_layer_add(run->ctx, lname, &id));
        if (id != i) {
            if (run->rehearsal)
                return UVMRT_ERR_INVALID;
            run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", lname, id, i);
        }
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
        uvmrt_tensor_t *t[T_PER_BLOCK] = {0};
        SCHED_CHECK(run, uvmrt_tensors_alloc(run->ctx, T_PER_BLOCK, d, t));
        mlp_block_t *b = &net->blocks[i];
        *b = (mlp_block_t){.W = t[0], .Wh = t[1], .dW = t[2], .m = t[3], .v = t[4], .A = t[5],
                           .Z = t[6]};
        for (size_t k = 0; k < T_PER_BLOCK; k++)
            net->managed_bytes += footprint(d[k].size_bytes);
        /* recomputing Z is its forward GEMM again: the runtime chooses which */
        if (run->rc_auto)
            SCHED_CHECK(run, uvmrt_tensor_set_recompute(run->ctx, b->Z, 2.0 * net->N * (double)net->hh));
    }
    uvmrt_tensor_desc_t s[6] = {
        {"X", -1, UVMRT_ROLE_ACTIVATION, a16},
        {"Y", -1, UVMRT_ROLE_ACTIVATION, a16},
        {"dA0", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"dA1", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"dZ", -1, UVMRT_ROLE_WORKSPACE, a16},
        {"Zr", -1, UVMRT_ROLE_WORKSPACE, a16},
    };
    size_t n = has_zr(opt) ? 6 : 5;
    uvmrt_tensor_t *t[6] = {0};
    SCHED_CHECK(run, uvmrt_tensors_alloc(run->ctx, n, s, t));
    net->X = t[0], net->Y = t[1], net->dA[0] = t[2], net->dA[1] = t[3], net->dZ = t[4];
    net->Zr = t[5];
    for (size_t k = 0; k < n; k++)
        net->managed_bytes += footprint(s[k].size_bytes);
    /* the CPU's data lives on the host; the GPU writes dW there */
    return blocks_place(run, net->L - run->cpu_layers, net->L, UVMRT_PLACE_HOST);
}

/* ----------------------------------------------------------------------------
 * a re-plan, applied between steps s-1 and s (the real run only) */

/* How many blocks recompute now (with --recompute auto: the runtime's answers). */
static int recompute_count(const mlp_run_t *run) {
    int n = 0;
    for (int i = 0; i < run->net.L; i++)
        n += mlp_block_recomputes(run, i);
    return n;
}

/* The top K blocks' AdamW runs on the CPU from step s on: first the CPU's updates of
 * step s-1 finish (a block may change sides), then the blocks that change sides move
 * their W, m, v, dW (host memory for the CPU, planned for the GPU). */
static void cpu_layers_apply(mlp_run_t *run, int K, int s) {
    int L = run->net.L, old = run->cpu_layers;
    if (run->gpu)
        mlp_gpu_cpu_wait(run, s - 1);
    if (K > old)
        (void)blocks_place(run, L - K, L - old, UVMRT_PLACE_HOST); /* fails the run */
    else
        (void)blocks_place(run, L - old, L - K, UVMRT_PLACE_AUTO);
    /* blocks back on the GPU: their Wh was last made by a forward from an older W */
    for (int i = L - old; run->gpu && i < L - K; i++)
        mlp_gpu_half_from_master(run, i);
    for (int i = L - old; run->ref && i < L - K; i++)
        mlp_simref_half(run, i);
    run->cpu_layers = K;
    run->cpu_since_step = s;
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

/* uvmrt_layer_begin(call): on the real run a failure fails the run, naming the
 * block and what the call is; in a rehearsal the status goes back to uvmrt_choose. */
static uvmrt_status_t call_begin(mlp_run_t *run, const uvmrt_layer_call_t *call, const char *what) {
    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, call);
    if (st != UVMRT_OK && !run->rehearsal)
        run_fail(run, "uvmrt_layer_begin(block%d, %s) failed: %s (%s)", call->layer, what,
                 uvmrt_status_str(st), uvmrt_status_name(st));
    return st;
}

/* Opens a call on the GPU's stream; gpu_bytes times a GEMM-free call on sim. */
static uvmrt_status_t layer_open(mlp_run_t *run, int i, uvmrt_phase_t phase,
                                 const use_list_t *uses, double flops, uint64_t gpu_bytes) {
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = i, .phase = phase, .stream = run->stream, .uses = uses->u,
        .n_uses = uses->n, .no_default_uses = 1, .flops = flops,
    };
    /* a CPU block's forward waits for the CPU's update of it: on the host
     * (mlp_gpu_forward_wait) or, staged, the first one for every staged copy */
    if (phase == UVMRT_PHASE_FORWARD && i >= run->net.L - run->cpu_layers)
        call.after = !run->staged ? run->cpu_stream : i == run->net.L - run->cpu_layers ? run->half_stream : NULL;
    /* a GEMM-free call (the optimizer) is its bytes at HBM speed (on sim and in
     * uvmrt_choose's rehearsals; on cuda only declared, for the review) */
    call.hbm_bytes = gpu_bytes;
    return call_begin(run, &call, uvmrt_phase_name(phase));
}

static uvmrt_status_t layer_close(mlp_run_t *run, int i, uvmrt_phase_t phase) {
    uvmrt_status_t st = uvmrt_layer_end(run->ctx);
    if (st != UVMRT_OK && !run->rehearsal)
        run_fail(run, "uvmrt_layer_end(block%d, %s) failed: %s (%s)", i, uvmrt_phase_name(phase),
                 uvmrt_status_str(st), uvmrt_status_name(st));
    return st;
}

static const unsigned R = UVMRT_USE_READ, W = UVMRT_USE_WRITE, RW = UVMRT_USE_READWRITE,
                      S = UVMRT_USE_STREAM;

/* forward i: Z = in . Wh^T (GEMM), A = gelu(Z); the last block also takes the loss
 * against Y and writes dL/dA into dA[(L-1) & 1]. */
static uvmrt_status_t forward(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    int last = i == net->L - 1;
    uvmrt_tensor_t *z = mlp_block_z(run, i);
    use_list_t u = {.n = 0};
    /* Not staged, a CPU block's Wh is made here from its W (host memory, read once
     * over the link): the CPU thread writes only W, so Wh is never written by the CPU
     * while it is on the GPU (CPU faults) nor faulted back in by the GEMM. Staged, it
     * was made after the CPU's update (stage_half). */
    int cpu_block = i >= net->L - run->cpu_layers && !run->staged;
    if (cpu_block)
        use_add(&u, b->W, R | S);
    use_add(&u, b->Wh, cpu_block ? W : R);     /* GEMM input (a CPU block: made first) */
    use_add(&u, mlp_block_input(net, i), R);   /* GEMM input */
    use_add(&u, z, W | S);                     /* GEMM output, then read once by GELU */
    use_add(&u, b->A, W | S);                  /* GELU output (read once by the loss) */
    if (last) {
        use_add(&u, net->Y, R | S);
        use_add(&u, net->dA[i & 1], W | S);
    }
    if (run->gpu && !run->staged)
        mlp_gpu_forward_wait(run, i, step); /* the CPU's update of block i, last step */
    TRY(layer_open(run, i, UVMRT_PHASE_FORWARD, &u, 2.0 * net->N * (double)net->hh, 0));
    if (run->gpu)
        mlp_gpu_forward(run, i, step);
    else if (run->ref)
        mlp_simref_forward(run, i, step);
    return layer_close(run, i, UVMRT_PHASE_FORWARD);
}

/* backward i: [Z = in . Wh^T again when block i recomputes: one more GEMM, declared
 * in its flops]; dZ = dA_i * gelu'(Z); dW = dZ^T . in (fp32); dA_{i-1} = dZ . Wh
 * (not for block 0). */
static uvmrt_status_t backward(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    int recompute = mlp_block_recomputes(run, i);
    uvmrt_tensor_t *z = mlp_block_z(run, i);
    use_list_t u = {.n = 0};
    use_add(&u, b->Wh, R);                      /* GEMM input (twice) */
    use_add(&u, mlp_block_input(net, i), R);    /* GEMM input */
    use_add(&u, z, recompute ? W | S : R | S);  /* read once by GELU backward */
    use_add(&u, net->dA[i & 1], R | S);         /* read once by GELU backward */
    use_add(&u, net->dZ, W);                    /* written once, then a GEMM input twice */
    use_add(&u, b->dW, W | S);                  /* GEMM output (then read once by the inf check) */
    if (i > 0)
        use_add(&u, net->dA[(i - 1) & 1], W | S); /* GEMM output */
    double flops = (i > 0 ? 4.0 : 2.0) * net->N * (double)net->hh;
    if (recompute)
        flops += 2.0 * net->N * (double)net->hh;
    TRY(layer_open(run, i, UVMRT_PHASE_BACKWARD, &u, flops, 0));
    if (run->gpu)
        mlp_gpu_backward(run, i, step);
    else if (run->ref)
        mlp_simref_backward(run, i);
    return layer_close(run, i, UVMRT_PHASE_BACKWARD);
}

/* optimizer i (GPU): AdamW on W, m, v from dW; writes the new working copy Wh. */
static uvmrt_status_t optimizer(mlp_run_t *run, int i, int step) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    use_list_t u = {.n = 0};
    use_add(&u, b->W, RW | S);
    use_add(&u, b->m, RW | S);
    use_add(&u, b->v, RW | S);
    use_add(&u, b->dW, R | S);
    use_add(&u, b->Wh, W | S);
    TRY(layer_open(run, i, UVMRT_PHASE_OPTIMIZER, &u, 0, (uint64_t)net->hh * (4 * 7 + 2)));
    if (run->gpu)
        mlp_gpu_optimizer(run, i, step);
    else if (run->ref)
        mlp_simref_adamw(run, i);
    return layer_close(run, i, UVMRT_PHASE_OPTIMIZER);
}

/* optimizer i on the CPU (mlp_cpu_opt.c runs it once backward i is done): declared
 * to uvmrt as CPU work on a stream of its own, with the host-memory bytes its AdamW
 * reads and writes (W, m, v read and written, dW read: 28 per parameter, and the
 * new Wh: 2), and no uses (its tensors live in host memory), so the model times it
 * beside the GPU's work, sharing host memory with the link. */
static uvmrt_status_t optimizer_cpu(mlp_run_t *run, int i) {
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = i, .phase = UVMRT_PHASE_OPTIMIZER, .stream = run->cpu_stream,
        .no_default_uses = 1, .host_bytes = cli_adamw_host_bytes(run->profile, (uint64_t)run->net.hh),
        .after = run->stream, /* the thread starts once backward i is done */
    };
    TRY(call_begin(run, &call, "optimizer on the CPU"));
    if (run->ref) /* sim: the update is this call's work (and the new Wh) */
        mlp_simref_adamw(run, i);
    return layer_close(run, i, UVMRT_PHASE_OPTIMIZER);
}

/* staged, after block i's CPU update of step s: Wh = half(W) on the GPU, on a stream
 * of its own that waits (on the GPU) for the CPU thread's flag of block i; W read
 * once over the link, Wh written once. On sim and in the rehearsals the call follows
 * block i's update on the CPU stream (its layer's CPU work there: uvmrt_layer_call_t.after). */
static uvmrt_status_t stage_half(mlp_run_t *run, int i, int s) {
    mlp_net_t *net = &run->net;
    const mlp_block_t *b = &net->blocks[i];
    uvmrt_use_t u[2] = {{b->W, R | S}, {b->Wh, W | S}};
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = i, .phase = UVMRT_PHASE_OPTIMIZER, .stream = run->half_stream, .uses = u,
        .n_uses = 2, .no_default_uses = 1, .after = run->cpu_stream,
        .hbm_bytes = (uint64_t)net->hh * 2, /* the GPU side: 2 bytes written per weight */
    };
    if (run->gpu)
        mlp_gpu_stage_wait(run, i, s); /* before the call's own events: its wait is not its work */
    TRY(call_begin(run, &call, "the half copy of the CPU's update"));
    if (run->gpu)
        mlp_gpu_stage_half(run, i);
    else if (run->ref)
        mlp_simref_half(run, i);
    return layer_close(run, i, UVMRT_PHASE_OPTIMIZER);
}

/* ----------------------------------------------------------------------------
 * the step loop */

/* The GEMM work of a step: 6 N H^2 per block, and 2 more per recomputing block. */
static double step_flops(const mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    double nhh = (double)opt->rows * (double)opt->hidden * (double)opt->hidden;
    return (6.0 * (double)opt->layers + 2.0 * (double)recompute_count(run)) * nhh;
}

/* One training step's layer calls (with the GPU's work when run->gpu): forwards,
 * backwards from the top (each CPU block's optimizer call right after its backward),
 * then the GPU blocks' optimizers. The real run and the rehearsals run this. */
static uvmrt_status_t train_step(mlp_run_t *run, int s) {
    int L = run->net.L;
    if (run->gpu)
        mlp_gpu_step_begin(run, s);
    SCHED_CHECK(run, uvmrt_step_begin(run->ctx));
    for (int i = 0; i < L; i++)
        TRY(forward(run, i, s));
    for (int i = L - 1; i >= 0; i--) {
        TRY(backward(run, i, s));
        if (mlp_block_on_cpu(run, i))
            TRY(optimizer_cpu(run, i));
        if (mlp_block_on_cpu(run, i) && run->staged)
            TRY(stage_half(run, i, s));
    }
    for (int i = 0; i < L; i++)
        if (!mlp_block_on_cpu(run, i))
            TRY(optimizer(run, i, s));
    SCHED_CHECK(run, uvmrt_step_end(run->ctx));
    return UVMRT_OK;
}

/* fp16: after step s, lower the scale on inf/NaN (the step was skipped), raise it
 * after a run of good steps. */
static void loss_scale_update(mlp_run_t *run, int s) {
    if (run->opt->precision != MLP_FP16) {
        run->adam_t++;
        return;
    }
    run->skipped[s] = run->gpu != NULL && mlp_gpu_found_inf(run, s);
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

/* ----------------------------------------------------------------------------
 * --cpu-layers auto, --recompute auto: uvmrt_choose and its rehearsal */

/* The run's schedule with these knob values on uvmrt_choose's model: the same
 * layers, tensors and layer calls as the real run (train_step), with no GPU side,
 * so no arithmetic and no data touched; quiet; failures return their status. */
static uvmrt_status_t mlp_rehearse(uvmrt_context_t *model, const int *values, int steps,
                                   void *user) {
    const mlp_run_t *real = user;
    mlp_run_t r = {
        .opt = real->opt, .ctx = model, .backend = uvmrt_context_backend(model),
        .policy = uvmrt_context_policy(model), .profile = uvmrt_context_profile(model),
        .cpu_stream = (uvmrt_stream_t)(void *)&sim_cpu_timeline, .rehearsal = 1,
        .stream = (uvmrt_stream_t)(void *)&sim_gpu_timeline,
        .half_stream = (uvmrt_stream_t)(void *)&sim_half_timeline, .staged = real->staged,
        .cpu_layers = real->knob_cpu >= 0 ? values[real->knob_cpu] : real->cpu_layers,
        .recompute = real->recompute, .rc_auto = real->rc_auto, /* auto: the model answers */
    };
    uvmrt_status_t st = net_alloc(&r);
    for (int s = 0; s < steps && st == UVMRT_OK; s++)
        st = train_step(&r, s);
    free(r.net.blocks); /* the tensors go with the model */
    return st;
}

/* autochoice_ops_t.text: "cpu_layers 12, recompute 0" (the auto ones only; rc: the
 * number of recomputing blocks). */
static void knob_text(void *user, const int *values, int rc, char *buf, size_t cap) {
    const mlp_run_t *run = user;
    int n = 0;
    buf[0] = '\0';
    if (run->knob_cpu >= 0)
        n = snprintf(buf, cap, "cpu_layers %d", values[run->knob_cpu]);
    if (run->opt->recompute == MLP_AUTO && n >= 0 && (size_t)n < cap) /* also after the hook */
        snprintf(buf + n, cap - (size_t)n, "%srecompute %d", n ? ", " : "", rc);
}

/* autochoice_ops_t.hook: K and N for the auto flags (N: blocks 0..N-1 from now on, as
 * if given, since the runtime's answers follow its own choice). */
static int hook_values(void *user, uvmrt_choice_t *c, int k, int n, char *why, size_t cap) {
    mlp_run_t *run = user;
    if (k < 0 || k > run->net.L || n < 0 || n > run->net.L) {
        snprintf(why, cap, "each 0 to --layers (%d)", run->net.L);
        return -1;
    }
    if (run->knob_cpu >= 0)
        c->values[run->knob_cpu] = k;
    if (run->rc_auto) {
        c->recompute_tensors = n;
        run->rc_auto = 0;
        run->recompute = n;
    }
    return 0;
}

static void choice_apply(void *user, const uvmrt_choice_t *c, int s);

static const autochoice_ops_t auto_ops = {knob_text, hook_values, choice_apply,
                                          mlp_run_close_cb};

static int add_distinct(int *v, int n, int x) {
    for (int k = 0; k < n; k++)
        if (v[k] == x)
            return n;
    v[n] = x;
    return n + 1;
}

/* Before the tensors exist: the auto knobs' values from uvmrt_choose; prints one
 * line (and, unless --quiet, each candidate's predicted time). */
static void choose_auto(mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    int L = opt->layers;
    int cpu_v[9], n_cpu = 0;
    for (int k = 0; k <= 8; k++) /* 0, L/8, 2L/8, ..., L */
        n_cpu = add_distinct(cpu_v, n_cpu, k * L / 8);
    uvmrt_knob_t knobs[1];
    size_t n = 0;
    run->knob_cpu = -1;
    if (opt->cpu_layers == MLP_AUTO) {
        run->knob_cpu = (int)n;
        knobs[n++] = (uvmrt_knob_t){"cpu_layers", (size_t)n_cpu, cpu_v};
    }
    if (n == 0 && !run->rc_auto)
        return;
    /* with --recompute auto the rehearsal declares each Z recomputable, and the
     * runtime rehearses each number of them recomputing: 0, L/8, ..., L */
    run->ac = (autochoice_t){.ctx = run->ctx, .ops = &auto_ops, .user = run,
                             .quiet = opt->c.quiet};
    autochoice_choose(&run->ac, knobs, n, mlp_rehearse, run,
                      n && run->rc_auto       ? "--cpu-layers auto, --recompute auto"
                      : run->knob_cpu >= 0 ? "--cpu-layers auto"
                                           : "--recompute auto");
    if (run->knob_cpu >= 0)
        run->cpu_layers = run->ac.choice.values[run->knob_cpu];
}

/* The choice's values from step s + 1 on (uvmrt records that step again). */
static void choice_apply(void *user, const uvmrt_choice_t *c, int s) {
    mlp_run_t *run = user;
    run->recording[s + 1] = 1;
    if (run->knob_cpu >= 0 && c->values[run->knob_cpu] != run->cpu_layers)
        cpu_layers_apply(run, c->values[run->knob_cpu], s + 1);
    run->recompute = recompute_count(run); /* the runtime's new answers, if auto */
}

/* After step s: the CPU optimizer's AdamW time of each block in step s - 1 (done by
 * now: step s's forwards waited for those updates) goes to the runtime, which times
 * that work by it in the record and in a review's re-plan. */
static void host_work_report(mlp_run_t *run, int s) {
    uint64_t ns;
    for (int i = 0; s >= 1 && i < run->net.L; i++)
        if (mlp_gpu_cpu_block_ns(run, s - 1, i, &ns))
            UV_CHECK(run, uvmrt_host_work_measured(run->ctx, i, UVMRT_PHASE_OPTIMIZER, ns)); /* layer i: block i */
}

static void run_steps(mlp_run_t *run, FILE *loss_log) {
    const mlp_options_t *opt = run->opt;
    int S = opt->c.steps;
    double t_start = cli_now_s();
    for (int s = 0; s < S; s++) {
        double flops = step_flops(run); /* before a re-plan changes it */
        (void)train_step(run, s); /* the real run: a failure has failed the run */

        if (run->gpu)
            run->losses[s] = mlp_gpu_step_loss(run, s);
        double scale_used = run->loss_scale;
        loss_scale_update(run, s);
        uvmrt_step_stats_t *st = &run->stats[s];
        st->struct_size = sizeof *st;
        UV_CHECK(run, uvmrt_step_stats_get(run->ctx, (uint64_t)s, st));
        double ms = (double)st->step_ns / 1e6;
        double in = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
        double out = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
        double elapsed = cli_now_s() - t_start, eta = elapsed / (s + 1) * (S - s - 1);
        char loss_text[32] = "-";
        if (mlp_computes(run))
            mlp_loss_text(loss_text, sizeof loss_text, run->losses[s]);
        printf("step %d/%d  loss %s  %.1f ms  %.1f TFLOP/s  in %.2f GB  out %.2f GB  faults %"
               PRIu64 "  ETA %.0f s%s%s\n",
               s + 1, S, loss_text, ms, ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0, in, out,
               st->fault_count, eta, run->skipped[s] ? "  (skipped: inf/NaN gradients)" : "",
               s == 0 ? "  (recording step)" : "");
        fflush(stdout);
        if (loss_log && mlp_computes(run))
            fprintf(loss_log, "%d %a %a%s\n", s + 1, run->losses[s], scale_used,
                    run->skipped[s] ? " skipped" : "");
        else if (loss_log) /* nothing computed: no number, not a zero */
            fprintf(loss_log, "%d null %a\n", s + 1, scale_used);
        host_work_report(run, s);
        autochoice_after_step(&run->ac, s, s == 0 || run->recording[s], s + 1 == S);
    }
    if (run->gpu)
        mlp_gpu_finish(run);
}

/* ----------------------------------------------------------------------------
 * results */

typedef struct mlp_medians {
    double ms, in_gb, out_gb, faults;
} mlp_medians_t;

/* Medians over steps 2..S (step 1 records the schedule), leaving out the steps that
 * recorded it again after a changed choice; step 1 when S == 1. */
static mlp_medians_t run_medians(const mlp_run_t *run) {
    int nsteps = run->opt->c.steps, first = nsteps > 1 ? 1 : 0;
    size_t n = 0;
    double *v = malloc((size_t)nsteps * sizeof *v);
    uvmrt_step_stats_t *st = malloc((size_t)nsteps * sizeof *st);
    mlp_medians_t m = {0};
    if (v == NULL || st == NULL) {
        free(v);
        free(st);
        return m;
    }
    for (int s = first; s < nsteps; s++)
        if (!run->recording[s] || s == 0)
            st[n++] = run->stats[s];
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
    free(st);
    return m;
}

/* The choice in the result JSON: "predicted_step_ms" and "choice" (with each
 * rehearsed candidate at the run's budget). */
static void choice_json(const mlp_run_t *run, json_t *root) {
    const uvmrt_choice_t *c = &run->ac.choice;
    json_t *values = json_object(), *cands = json_array();
    if (run->knob_cpu >= 0)
        json_object_set_new(values, "cpu_layers", json_integer(c->values[run->knob_cpu]));
    if (run->opt->recompute == MLP_AUTO)
        json_object_set_new(values, "recompute", json_integer(c->recompute_tensors));
    size_t nc = uvmrt_choice_count(run->ctx);
    for (size_t k = 0; k < nc; k++) {
        int v[UVMRT_KNOBS_MAX] = {0};
        double ns = 0;
        if (uvmrt_choice_candidate(run->ctx, k, v, &ns) != UVMRT_OK)
            continue;
        json_t *o = json_object();
        if (run->knob_cpu >= 0)
            json_object_set_new(o, "cpu_layers", json_integer(v[run->knob_cpu]));
        if (run->opt->recompute == MLP_AUTO)
            json_object_set_new(o, "recompute", json_integer(uvmrt_choice_candidate_recompute(run->ctx, k)));
        json_object_set_new(o, "predicted_ms", ns > 0 ? json_real(ns / 1e6) : json_null());
        json_array_append_new(cands, o);
    }
    json_object_set_new(root, "predicted_step_ms", json_real(c->predicted_step_ns / 1e6));
    json_object_set_new(
        root, "choice",
        json_pack("{s:f, s:o, s:f, s:b, s:b, s:I, s:I, s:o, s:o, s:o, s:b}", "predicted_ms",
                  c->predicted_step_ns / 1e6, "measured_ms",
                  run->ac.reviewed ? json_real(c->measured_step_ns / 1e6) : json_null(),
                  "first_predicted_ms", c->first_predicted_step_ns / 1e6, "replanned", c->replanned,
                  "fits", c->fits, "plan_budget_bytes", (json_int_t)c->plan_budget_bytes,
                  "rehearsals", (json_int_t)c->rehearsals, "values", values, "candidates", cands,
                  "replanned_measured_ms",
                  c->replanned_measured_step_ns > 0 ? json_real(c->replanned_measured_step_ns / 1e6)
                                                    : json_null(),
                  "reverted", c->reverted));
}

/* --result-json: the run's figures for bench/mlp_table.py. 0, or -1 (said why). */
static int result_write(const mlp_run_t *run, const char *path, const mlp_medians_t *m,
                        const uvmrt_summary_t *sum) {
    const mlp_options_t *opt = run->opt;
    int S = opt->c.steps;
    uint64_t late_faults = 0; /* steps 2..S: a planned tensor should never fault */
    for (int s = 1; s < S; s++)
        late_faults += run->stats[s].fault_count;
    json_t *losses = json_array(), *step_ms = json_array();
    for (int s = 0; s < S; s++) {
        json_array_append_new(losses, mlp_computes(run) ? json_real(run->losses[s]) : json_null());
        json_array_append_new(step_ms, json_real((double)run->stats[s].step_ns / 1e6));
    }
    double tflops = m->ms > 0 ? step_flops(run) / (m->ms * 1e-3) / 1e12 : 0.0;
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:s, s:s, s:i, s:b, s:i, s:b, s:b, s:f, "
        "s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:o, s:o}",
        "program", PROG, "version", uvmrt_version_string(),
        "backend", uvmrt_backend_name(run->backend), "policy", uvmrt_policy_name(run->policy),
        "budget_bytes", (json_int_t)sum->budget_bytes,
        "layers", opt->layers, "hidden", opt->hidden, "rows", opt->rows, "steps", S,
        "precision", opt->precision == MLP_BF16 ? "bf16" : "fp16",
        "optimizer_on", placement_name(run), "recompute", run->recompute,
        "recompute_auto", opt->recompute == MLP_AUTO, "cpu_layers", run->cpu_layers,
        "cpu_layers_auto", opt->cpu_layers == MLP_AUTO, "arithmetic", mlp_computes(run),
        "ms_per_step_median", m->ms, "tflops", tflops,
        "gb_in_per_step", m->in_gb, "gb_out_per_step", m->out_gb, "faults_per_step", m->faults,
        "managed_bytes", (json_int_t)run->net.managed_bytes,
        "peak_resident_bytes", (json_int_t)sum->peak_resident_bytes,
        "device_workspace_bytes", (json_int_t)run->device_workspace_bytes,
        "faults_after_step1", (json_int_t)late_faults,
        "losses", losses, "step_ms", step_ms);
    if (root && run->ac.made) /* every time in it but measured_ms is predicted */
        choice_json(run, root);
    double adamw_ms, wait_ms;
    if (root && mlp_gpu_cpu_times(run, 0, &adamw_ms, &wait_ms)) { /* the CPU optimizer's own times */
        json_t *a = json_array(), *w = json_array();
        for (int s = 0; s < S && mlp_gpu_cpu_times(run, s, &adamw_ms, &wait_ms); s++) {
            json_array_append_new(a, json_real(adamw_ms));
            json_array_append_new(w, json_real(wait_ms));
        }
        json_object_set_new(root, "cpu_optimizer", json_pack("{s:o, s:o}", "adamw_ms", a, "wait_ms", w));
    }
    cli_json_final_steps(root, run->recording, run->stats, 0, S);
    return cli_json_write("--result-json", path, root);
}

/* The outputs the flags asked for, after the steps: each that fails is reported
 * and the others are still written. 0, or -1 when any failed. */
static int outputs_write(mlp_run_t *run, const mlp_medians_t *m, const uvmrt_summary_t *sum) {
    const cli_common_t *c = &run->opt->c;
    int bad = cli_reports_write(run->ctx, c) != 0;
    if (c->result_json)
        bad |= result_write(run, c->result_json, m, sum);
    return bad ? -1 : 0;
}

/* ----------------------------------------------------------------------------
 * main */

/* On sim: whether the CPU reference computes (mlp_simref.c), and why not. */
static void sim_math_note(const mlp_options_t *opt) {
    if (mlp_simref_fits(opt)) {
        printf("sim: computing on the CPU with the reference implementation (slow): %.3g "
               "parameters x rows per step (at most %.3g)\n", mlp_simref_work(opt),
               MLP_SIM_MATH_MAX);
        return;
    }
    printf("sim backend: the schedule only, no arithmetic (no losses); times and traffic are "
           "the model's\n");
    if (opt->precision != MLP_BF16)
        printf("sim: no arithmetic: the CPU reference computes --precision bf16 only (fp16's "
               "loss scaling is the GPU's)\n");
    else
        printf("sim: no arithmetic: %.3g parameters x rows per step is over the CPU "
               "reference's %.3g (about a second a step on one core); a small shape computes, "
               "e.g. --layers 4 --hidden 128 --rows 256\n", mlp_simref_work(opt),
               MLP_SIM_MATH_MAX);
}

/* The configuration, with the knob values in use and how each was set. */
static void header_print(const mlp_run_t *run) {
    const mlp_options_t *opt = run->opt;
    double params = (double)opt->layers * (double)opt->hidden * (double)opt->hidden;
    printf(PROG ": %d x [Linear(%d, %d) + GELU], %d rows, %.2f %s parameters, %s, optimizer on "
           "%s (%d of %d blocks on the CPU, %s), recompute %d of %d blocks (%s); %d steps, lr %g, "
           "seed %" PRIu64 "; tensors %.2f GiB\n",
           opt->layers, opt->hidden, opt->hidden, opt->rows,
           params >= 1e9 ? params / 1e9 : params / 1e6, params >= 1e9 ? "B" : "M",
           opt->precision == MLP_BF16 ? "bf16" : "fp16", placement_name(run), run->cpu_layers,
           opt->layers, opt->cpu_layers == MLP_AUTO ? "auto" : "given", run->recompute,
           opt->layers, opt->recompute == MLP_AUTO ? "auto" : "given", opt->c.steps, opt->lr,
           opt->c.seed, (double)mlp_planned_managed_bytes(opt) / GIB);
    fflush(stdout);
}

int main(int argc, char **argv) {
    cli_program = PROG;
    mlp_options_t opt;
    mlp_options_parse(argc, argv, &opt);
    cli_outputs_check(&opt.c); /* an output that cannot be written fails now, not after the steps */
    cli_note_env_overrides();
    int S = opt.c.steps;

    mlp_run_t run = {.opt = &opt, .loss_scale = opt.precision == MLP_FP16 ? FP16_INIT_SCALE : 1.0};
    run.losses = calloc((size_t)S, sizeof *run.losses);
    run.skipped = calloc((size_t)S, sizeof *run.skipped);
    run.stats = calloc((size_t)S, sizeof *run.stats);
    run.recording = calloc((size_t)S + 1, 1);
    if (!run.losses || !run.skipped || !run.stats || !run.recording) {
        fprintf(stderr, PROG ": out of host memory\n");
        return 1;
    }
    run.isa = mlp_isa_best();

    run.cpu_layers = opt.cpu_layers == MLP_AUTO ? 0 : opt.cpu_layers;
    run.recompute = opt.recompute == MLP_AUTO ? 0 : opt.recompute;
    run.rc_auto = opt.recompute == MLP_AUTO;
    run.knob_cpu = -1;

    run.ctx = context_open(&opt);
    run.backend = uvmrt_context_backend(run.ctx);
    run.policy = uvmrt_context_policy(run.ctx);
    run.profile = uvmrt_context_profile(run.ctx);
    printf("policy %s on %s%s%s, budget %.2f GiB\n", uvmrt_policy_name(run.policy),
           uvmrt_backend_name(run.backend), run.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.backend == UVMRT_BACKEND_SIM && run.profile ? run.profile->name : "",
           (double)uvmrt_context_budget(run.ctx) / GIB);
    if (!opt.c.quiet) {
        uvmrt_context_print_config(run.ctx, stdout);
        fflush(stdout);
    }
    if (run.backend == UVMRT_BACKEND_SIM) {
        run.cpu_stream = (uvmrt_stream_t)(void *)&sim_cpu_timeline;
        run.stream = (uvmrt_stream_t)(void *)&sim_gpu_timeline;
        run.half_stream = (uvmrt_stream_t)(void *)&sim_half_timeline;
        const char *stage = getenv("MLP_STAGE"); /* the model of either path, as on cuda */
        run.staged = stage == NULL || strcmp(stage, "0") != 0;
    }
    if (run.backend == UVMRT_BACKEND_CUDA)
        run.staged = mlp_gpu_can_stage(); /* the rehearsals model the same path */
    choose_auto(&run);
    if (run.rc_auto) /* the first ones in the runtime's order: blocks 0..N-1 (equal Z's) */
        run.recompute = run.ac.choice.recompute_tensors;
    header_print(&run);

    if (run.backend == UVMRT_BACKEND_CUDA)
        run.gpu = mlp_gpu_open(&run);
    else
        sim_math_note(&opt);
    if (cli_host_fits(run.ctx, mlp_planned_managed_bytes(&opt), 0, 0) != 0)
        run_fail(&run, "nothing allocated: the tensors do not fit the host budget");
    net_alloc(&run);
    run.recompute = recompute_count(&run); /* the runtime's answers, block by block */
    if (run.gpu)
        mlp_gpu_init(&run);
    else if (mlp_simref_fits(&opt))
        mlp_simref_open(&run);

    FILE *loss_log = NULL;
    if (opt.c.loss_log && (loss_log = cli_output_open("--loss-log", opt.c.loss_log)) == NULL)
        run_fail(&run, "no step was run: --loss-log must be writable");
    run_steps(&run, loss_log);
    int status = 0;
    if (loss_log && cli_output_close("--loss-log", opt.c.loss_log, loss_log) != 0)
        status = 1;

    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    UV_CHECK(&run, uvmrt_summary_get(run.ctx, &sum));
    mlp_medians_t m = run_medians(&run);
    if (outputs_write(&run, &m, &sum) != 0)
        status = 1;
    double tflops = m.ms > 0 ? step_flops(&run) / (m.ms * 1e-3) / 1e12 : 0.0;
    int rerecorded = 0;
    for (int s = 1; s < S; s++)
        rerecorded += run.recording[s];
    printf("summary: %.1f ms/step, %.1f TFLOP/s, in %.2f GB, out %.2f GB, faults %.0f per step "
           "(medians of steps %d..%d%s); peak resident %.2f GiB + %.2f GiB device workspace; "
           "budget %.2f GiB",
           m.ms, tflops, m.in_gb, m.out_gb, m.faults, S > 1 ? 2 : 1, S,
           rerecorded ? ", steps recorded again left out" : "",
           (double)sum.peak_resident_bytes / GIB, (double)run.device_workspace_bytes / GIB,
           (double)sum.budget_bytes / GIB);
    if (mlp_computes(&run)) {
        char first[32], last[32];
        mlp_loss_text(first, sizeof first, run.losses[0]);
        mlp_loss_text(last, sizeof last, run.losses[S - 1]);
        printf("; loss %s -> %s", first, last);
        if (run.losses[0] > 0 && isfinite(run.losses[S - 1]))
            printf(" (%.4g of step 1's)", run.losses[S - 1] / run.losses[0]);
    }
    printf("\n");
    if (run.gpu)
        mlp_gpu_summary(&run, stdout);
    if (mlp_computes(&run))
        for (int s = 0; s < S; s++)
            if (!isfinite(run.losses[s])) {
                fprintf(stderr, PROG ": loss of step %d is not finite\n", s + 1);
                status = 1;
                break;
            }
    unsigned long errors = cli_library_errors();
    mlp_run_close_cb(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
    if (cli_context_outputs_failed(errors, &sum))
        status = 1;
    free(run.losses);
    free(run.skipped);
    free(run.stats);
    free(run.recording);
    return cli_stdout_close(status);
}
