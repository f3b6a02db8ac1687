/*
 * mlp.h -- what the files of uvmrt-mlp share: its options, the model's tensors and
 * one training run.
 *
 *   mlp.c          the model and the training loop, top to bottom (no #ifdef)
 *   mlp_flags.c    the flags: the shared ones (examples/common) and the trainer's
 *   mlp_gpu.c      the GPU side: safety check, cuBLAS, initialisation, the kernels
 *                  of each layer call (built with CUDA and cuBLAS)
 *   mlp_cpu_opt.c  the CPU optimizer thread (--optimizer-on cpu, with the GPU side)
 *   mlp_nogpu.c    stands in for the two above in a build without CUDA or cuBLAS
 *   mlp_simref.c   the arithmetic on sim: the CPU reference's, a small network only
 */
#ifndef UVMRT_MLP_H
#define UVMRT_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"
#include "../common/autochoice.h"
#include "../common/cli.h"

#include "../common/adamw_cpu.h"
#include "../common/train_math.h"

#define PROG "uvmrt-mlp"

/* the sim profile when falling back without a GPU */
#define MLP_FALLBACK_PROFILE CLI_SIM_PROFILE

/* ----------------------------------------------------------------------------
 * options */

typedef struct mlp_options {
    cli_common_t c;                  /* the shared flags: backend, policy, budget, steps,
                                        seed, report, trace, loss log, result JSON... */
    int layers, hidden, rows;        /* L, H, N */
    double lr;
    mlp_half_kind_t precision;
    int cpu_layers;                  /* K given: blocks L-K..L-1 update on the CPU;
                                        MLP_AUTO: uvmrt_choose picks it (the default) */
    int recompute;                   /* N given: blocks 0..N-1 recompute their pre-activation
                                        in backward; MLP_AUTO: the runtime chooses which (the
                                        default: uvmrt_tensor_set_recompute) */
} mlp_options_t;

#define MLP_AUTO (-1)

/* Parses the command line (exits 2 on bad usage, 0 after --help or --version). */
void mlp_options_parse(int argc, char **argv, mlp_options_t *opt);


/* ----------------------------------------------------------------------------
 * the model's tensors */

/* One block: y = gelu(x W^T). Shapes beside the pointers; "half" is bf16 or fp16. */
typedef struct mlp_block {
    uvmrt_tensor_t *W;  /* (H, H) fp32 master weights                 weight */
    uvmrt_tensor_t *Wh; /* (H, H) half working copy, GEMM input        weight */
    uvmrt_tensor_t *dW; /* (H, H) fp32 gradient                        gradient */
    uvmrt_tensor_t *m;  /* (H, H) fp32 AdamW first moment              optimizer state */
    uvmrt_tensor_t *v;  /* (H, H) fp32 AdamW second moment             optimizer state */
    uvmrt_tensor_t *Z;  /* (N, H) half pre-activation, saved (unused when block i
                           recomputes: it then uses the shared Zr) */
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
    uvmrt_tensor_t *Zr;     /* (N, H) half pre-activation of the recomputing blocks, one
                               workspace for all of them (NULL when none may recompute) */
    uint64_t managed_bytes; /* sum of the tensors' footprints (2 MiB blocks) */
} mlp_net_t;

static inline void *mlp_ptr(uvmrt_tensor_t *t) {
    return t ? uvmrt_tensor_ptr(t) : NULL;
}

/* A block's input: A_{i-1}, or X for block 0. */
static inline uvmrt_tensor_t *mlp_block_input(const mlp_net_t *net, int i) {
    return i == 0 ? net->X : net->blocks[i - 1].A;
}

/* Bytes of uvmrt tensors the trainer allocates for opt's shape (before allocating
 * them): every block's Z, and Zr when a block may recompute. */
uint64_t mlp_planned_managed_bytes(const mlp_options_t *opt);

/* ----------------------------------------------------------------------------
 * a run */

typedef struct mlp_gpu mlp_gpu_t; /* the GPU side (mlp_gpu.h) */

typedef struct mlp_run {
    const mlp_options_t *opt;
    uvmrt_context_t *ctx;
    uvmrt_backend_kind_t backend;
    uvmrt_policy_t policy;
    const uvmrt_profile_t *profile;
    mlp_net_t net;
    mlp_gpu_t *gpu;              /* NULL: no arithmetic (sim backend) */
    uvmrt_stream_t stream;       /* the compute stream (NULL on sim) */
    uvmrt_stream_t half_stream;  /* staged: the GPU's copies of the CPU's new weights to
                                    half, each after its block's CPU update (mlp.c) */
    int staged;                  /* 1: those copies run as soon as the CPU's update is done
                                    (a GPU-side wait); 0: in the block's next forward */
    uvmrt_stream_t cpu_stream;   /* the CPU optimizer's layer calls (their host_bytes): a
                                    stream of their own, beside the GPU's */
    int rehearsal;               /* 1: a rehearsal on uvmrt_choose's model (no GPU, quiet;
                                    failures return their status instead of exiting) */
    /* the knob values in use (from the flags, or chosen; a review may change them
     * between steps) */
    int cpu_layers;              /* K: blocks L-K..L-1 update on the CPU */
    int recompute;               /* how many blocks recompute (given: blocks 0..N-1) */
    int rc_auto;                 /* 1: the runtime chooses which Z recompute (each Z declared
                                    recomputable; mlp_block_recomputes asks it) */
    int cpu_since_step;          /* the step the current K took effect (its forwards need
                                    not wait for the CPU: applying K waited) */
    /* --cpu-layers auto / --recompute auto */
    int knob_cpu;                /* the cpu_layers knob's index in the choice; -1: given */
    autochoice_t ac;             /* the choice and its review (ac.made: uvmrt_choose ran) */
    double loss_scale;           /* fp16: current scale; bf16: 1 */
    int good_steps;              /* fp16: steps since the scale last changed */
    long adam_t;                 /* AdamW updates done (GPU optimizer) */
    double *losses;              /* (S,) */
    int *skipped;                /* (S,) 1: step skipped (fp16 inf/NaN) */
    uvmrt_step_stats_t *stats;   /* (S,) */
    uint8_t *recording;          /* (S + 1,) 1: uvmrt recorded that step again (a changed choice) */
    uint64_t device_workspace_bytes; /* cudaMalloc'd beside uvmrt's tensors */
    mlp_isa_t isa;
    struct mlp_simref *ref;      /* sim: the CPU reference's scratch when it computes (NULL:
                                    the schedule only); mlp_simref.c */
} mlp_run_t;

/* Block i's AdamW runs on the CPU: the top K blocks, whose backward ends first. */
static inline int mlp_block_on_cpu(const mlp_run_t *run, int i) {
    return i >= run->net.L - run->cpu_layers;
}

/* Block i keeps no pre-activation: it recomputes it in backward, into Zr (the
 * runtime's choice for its Z with --recompute auto, else blocks 0..N-1). */
static inline int mlp_block_recomputes(const mlp_run_t *run, int i) {
    return run->rc_auto ? uvmrt_tensor_recomputes(run->ctx, run->net.blocks[i].Z) : i < run->recompute;
}

/* The tensor holding block i's pre-activation: Z_i, or Zr when it recomputes. */
static inline uvmrt_tensor_t *mlp_block_z(const mlp_run_t *run, int i) {
    return mlp_block_recomputes(run, i) ? run->net.Zr : run->net.blocks[i].Z;
}

/* mlp_simref.c: on sim, the CPU reference's math (mlp_ref.c) computes inside the same
 * layer calls, on the tensors' host memory, when the shape is small enough: bf16 and
 * layers x hidden^2 x rows (parameters x rows, mlp_simref_work) at most
 * MLP_SIM_MATH_MAX, about a second a step on one core. Otherwise sim runs the
 * schedule only. */
#define MLP_SIM_MATH_MAX 1e8
double mlp_simref_work(const mlp_options_t *opt);
int mlp_simref_fits(const mlp_options_t *opt);
void mlp_simref_open(mlp_run_t *run); /* after the tensors: their initial values too */
void mlp_simref_close(mlp_run_t *run);
void mlp_simref_forward(mlp_run_t *run, int i, int s);
void mlp_simref_backward(mlp_run_t *run, int i);
void mlp_simref_adamw(mlp_run_t *run, int i);
void mlp_simref_half(mlp_run_t *run, int i);

/* The run computes losses: on the GPU, or on sim with the CPU reference. */
static inline int mlp_computes(const mlp_run_t *run) { return run->gpu || run->ref; }

/* Releases everything the run holds (GPU side, context, host buffers); safe to
 * call on a partly opened run. As a void * callback for cli_fail. */
void mlp_run_close_cb(void *run);

/* Fails the run: the message, then the run's resources released, then exit 1.
 * (UV_CHECK and CUDA_CHECK of cli.h call it.) */
#define run_fail(run, ...) cli_fail(mlp_run_close_cb, (run), __VA_ARGS__)

#endif /* UVMRT_MLP_H */
