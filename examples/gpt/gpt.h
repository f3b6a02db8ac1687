/*
 * gpt.h -- uvmrt-gpt's own (private) header: the run (its shape, tensors, CPU
 * optimizer, data and choice), and what its files share. gpt.c holds the model's
 * layer calls and the training loop; gpt_tensors.c the tensors; gpt_weights.c the
 * weights' initialisation and files; gpt_side.c validation and sampling; gpt_open.c
 * opening and closing a run; gpt_auto.c the automatic choice (uvmrt_choose(3) and
 * its review, through examples/common/autochoice.c); gpt_ckpt.c the checkpoints of a
 * run; gpt_results.c the medians and the result JSON; gpt_simref.c the arithmetic
 * on sim (the CPU reference, a small shape only).
 */
#ifndef UVMRT_GPT_H
#define UVMRT_GPT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "uvmrt.h"
#include "../common/autochoice.h"
#include "../common/cli.h"
#include "../common/adamw_cpu.h"
#include "data.h"
#include "gpt_cpuopt.h"
#include "gpt_flags.h"
#include "gpt_gpu.h"

#define PROG GPT_PROG

#define GIB (1024.0 * 1024.0 * 1024.0) /* sizes: GiB */
#define GB 1e9                          /* traffic: GB */
/* kept free on the GPU beyond our allocations: real oversubscription can hang it */
#define GPU_SAFETY_BYTES (4ull << 30)

/* ----------------------------------------------------------------------------
 * parameters: one fp32 array per layer; a block's tensors in this order */

enum { P_QKVW, P_ATTPROJW, P_FCW, P_FCPROJW, /* 2-D: weight decay */
       P_LN1W, P_LN1B, P_QKVB, P_ATTPROJB, P_LN2W, P_LN2B, P_FCB, P_FCPROJB, P_BLOCK };

typedef struct layer_params {
    uvmrt_tensor_t *w;  /* (n,) fp32 master weights            weight */
    uvmrt_tensor_t *wh; /* (n,) bf16 working copy              weight */
    uvmrt_tensor_t *g;  /* (n,) fp32 gradient                  gradient */
    uvmrt_tensor_t *m;  /* (n,) fp32 AdamW first moment        optimizer state */
    uvmrt_tensor_t *v;  /* (n,) fp32 AdamW second moment       optimizer state */
    size_t n, n_decay;  /* elements; [0, n_decay) are 2-D weights */
} layer_params_t;

/* A block's saved activations (the recomputing blocks share one set). */
typedef struct block_acts {
    uvmrt_tensor_t *ln1;    /* (N,C) bf16 */
    uvmrt_tensor_t *ln1_ms; /* (2,N) fp32 mean, rstd */
    uvmrt_tensor_t *qkv;    /* (N,3C) bf16 */
    uvmrt_tensor_t *atty;   /* (N,C) bf16 attention output */
    uvmrt_tensor_t *lse;    /* (B,NH,T) fp32 */
    uvmrt_tensor_t *res2;   /* (N,C) fp32 residual after attention */
    uvmrt_tensor_t *ln2;    /* (N,C) bf16 */
    uvmrt_tensor_t *ln2_ms; /* (2,N) fp32 */
    uvmrt_tensor_t *fch;    /* (N,4C) bf16 pre-GELU */
    uvmrt_tensor_t *fchg;   /* (N,4C) bf16 post-GELU */
} block_acts_t;
#define ACTS_COUNT 10

/* The model: its shape and its uvmrt tensors (parameters, saved activations, the
 * workspace all layers share). */
typedef struct gpt_model {
    int L, C, NH, V, Vp, maxT, B, T, N, nl; /* nl = L + 2 layers */
    size_t boff[P_BLOCK], bsize[P_BLOCK];   /* a block's tensors in its array */
    layer_params_t *lp;       /* (nl) */
    uvmrt_tensor_t **out;     /* (nl - 1) fp32 (N,C): embedding output, block outputs */
    block_acts_t *acts;       /* (L) */
    uvmrt_tensor_t *tokens;   /* embed: int inp (N), tgt (N), rows (N), start (N+1), tok (N) */
    uvmrt_tensor_t *lnf, *lnf_ms, *losses; /* head: (N,C) bf16, (2,N), (N) fp32 */
    /* workspace shared by all layers */
    uvmrt_tensor_t *dres;     /* (N,C) fp32 gradient of the residual stream */
    uvmrt_tensor_t *dbf;      /* (N,C) bf16 copy of dres (a matmul input) */
    uvmrt_tensor_t *d4;       /* (N,4C) bf16 dfch */
    uvmrt_tensor_t *dln;      /* (N,C) bf16 gradient of a LayerNorm output / datty */
    uvmrt_tensor_t *dqkv;     /* (N,3C) bf16 */
    uvmrt_tensor_t *delta;    /* (B,NH,T) fp32 attention backward scratch */
    uvmrt_tensor_t *colsum;   /* 2 * colsum scratch of 4C columns */
    uvmrt_tensor_t *logits;   /* (chunk, Vp) bf16 */
    uvmrt_tensor_t *gnorm;    /* (nl, GPT_SUMSQ_BLOCKS) double partials, then float clip */
    uvmrt_tensor_t *gdev[2];  /* a block's fp32 gradient on the GPU, for a CPU block (NULL
                               * without blocks), one per slot (block l uses l % 2): while
                               * one is copied to the host, the next block writes the
                               * other; see block_backward */
    block_acts_t shared_acts; /* the recomputing blocks' (recompute > 0) */
    int chunk;                /* classifier rows per chunk */
    uint64_t managed_bytes;
    uint64_t device_bytes;
} gpt_model_t;

/* The run's settings: the flags, and the knob values in use (given, or chosen by
 * uvmrt; a review may change them between steps). */
typedef struct gpt_settings {
    const gpt_options_t *opt;
    int compute;            /* 1: the GPU does the arithmetic */
    int cpu_layers;         /* K: the top K layers' AdamW on the CPU */
    int recompute;          /* N: blocks 1..N recompute in their backward */
    int knob_cpu, knob_rec; /* their index in uv.ac.choice.values; -1: explicit */
    int first, stop;        /* training steps [first, stop) run in this process */
    /* per layer, what of its state the disk tier holds (a gpt_spill_t less AUTO): the
     * plan for these cpu_layers and recompute (gpt_tier_plan) */
    unsigned char tier[GPT_MAX_LAYERS + 2];
} gpt_settings_t;

/* What the run holds of uvmrt: the context, its streams, its steps and the choice. */
typedef struct gpt_uvmrt {
    jmp_buf *rehearsal; /* a rehearsal (compute-less run on uvmrt's model): run_fail
                                 jumps here instead of exiting */
    uvmrt_context_t *ctx;
    uvmrt_backend_kind_t backend;
    uvmrt_policy_t policy;
    const uvmrt_profile_t *profile;
    uvmrt_stream_t stream;
    uvmrt_stream_t cpu_stream; /* names the CPU optimizer's layer calls (nothing runs on it) */
    uint64_t gpu_room;        /* cuda: managed bytes the GPU can take (free less the safety) */
    uint64_t uv_steps;        /* uvmrt steps so far: training, validation, sampling */
    int side_step; /* 1: a validation or sampling step ran since the last training step */
    uvmrt_step_stats_t *stats; /* (steps) training steps only */
    unsigned char *recording;  /* (steps) 1: the step recorded uvmrt's schedule */
    autochoice_t ac;           /* the choice and its review (ac.made: uvmrt chose) */
    uvmrt_status_t fail_st;    /* the uvmrt status a rehearsal failed with */
} gpt_uvmrt_t;

/* A run: the model, its settings, its uvmrt state, and the training's own state (the
 * GPU side, host buffers, CPU optimizer, data, sampler, checkpoints). */
typedef struct gpt_run {
    gpt_model_t model;
    gpt_settings_t set;
    gpt_uvmrt_t uv;
    gpt_gpu_t *gpu;
    int attn_kind;            /* GPT_ATTN_CUDNN or GPT_ATTN_MMA: whose rates the calls declare */
    int *tok_host;            /* pinned (5N+1) */
    int nbuckets;
    double *loss_host;        /* mapped (steps + validation batches + 1) */
    uint16_t *logits_host;    /* pinned (Vp) bf16: the sampled row's logits (--sample) */
    float *clip_host;         /* mapped {norm, clip} */
    gpt_cpuopt_t *cpu;
    mlp_isa_t isa;
    double *losses_out;       /* (steps) */
    double *end_s;            /* (steps): the host clock after each step's calls (cli_now_s) */
    float *norms;             /* (steps) */
    long adam_t;              /* AdamW updates done (its bias correction's t) */
    int cpu_last;             /* last step (local count) given to the CPU optimizer; -1 */
    gpt_data_t *train, *val;  /* --data / --text; NULL: synthetic tokens */
    int val_n;                /* batches per validation pass */
    int n_val;                /* validation passes done */
    int *val_step;            /* (passes) the training step each followed */
    double *val_loss;         /* (passes) mean loss; 0 on sim */
    uint64_t rng;             /* the sampler's state (splitmix64), saved in checkpoints */
    int *prompt;              /* sampling prompt tokens */
    int prompt_len;
    char ckpt_last[4096];     /* the last checkpoint written or loaded */
    uint64_t run_id;          /* written into its checkpoints; a resumed run keeps its own */
    int ckpt_replace;         /* 1: remove the checkpoints of another run after the first save */
    double cpu_busy_s;        /* AdamW seconds of CPU threads already stopped */
    struct gpt_simref *ref;   /* sim: the CPU reference's scratch when it computes (NULL:
                               * the schedule only); gpt_simref.c */
} gpt_run_t;

/* The attention's declared rate, as a share of the profile's GEMM rate, for the kernels a
 * GPU run uses (kind: gpt_gpu.h's gpt_attn_kind_t, GPT_ATTN_CUDNN or GPT_ATTN_MMA), in
 * the forward (backward 0) or the backward. */
double gpt_attention_rate(int kind, int backward);

/* The sim's stream handles for the CPU optimizer's calls and the GPU's (distinct
 * names; the same in a rehearsal and a sim run, so both run the same schedule). */
extern const char gpt_sim_cpu_stream, gpt_sim_gpu_stream;

/* A failure: the message and exit 1, or, in a rehearsal, the message and a jump
 * back to the rehearsal (gpt_auto.c), which frees what it made and fails the choice. */
/* Releases everything the run holds (cli_fail's cleanup). */
void gpt_run_close_cb(void *run);
void gpt_run_fail(gpt_run_t *run, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* cli.h's check, keeping the status for a rehearsal's return. */
#undef UV_CHECK
#define UV_CHECK(run, expr)                                                         \
    do {                                                                            \
        uvmrt_status_t st_ = (expr);                                                \
        if (st_ != UVMRT_OK) {                                                      \
            (run)->uv.fail_st = st_;                                                \
            gpt_run_fail((run), "%s failed: %s (%s)", #expr, uvmrt_status_str(st_), \
                         uvmrt_status_name(st_));                                   \
        }                                                                           \
    } while (0)

/* Layer l's AdamW runs on the CPU: the top cpu_layers of the nl layers. */
static inline int on_cpu(const gpt_run_t *run, int l) {
    return l >= run->model.nl - run->set.cpu_layers;
}

/* The run computes losses: on the GPU, or on sim with the CPU reference. */
static inline int gpt_computes(const gpt_run_t *run) { return run->set.compute || run->ref; }

/* Block layer l (1..L) recomputes its activations in its backward. */
static inline int recomputes(const gpt_run_t *run, int l) { return l - 1 < run->set.recompute; }

static inline void *ptr(uvmrt_tensor_t *t) { return t ? uvmrt_tensor_ptr(t) : NULL; }
static inline float *f32(uvmrt_tensor_t *t) { return (float *)ptr(t); }
static inline uint16_t *b16(uvmrt_tensor_t *t) { return (uint16_t *)ptr(t); }

static inline void kcheck(gpt_run_t *run, int err, const char *what, int layer) {
    if (err != 0)
        gpt_run_fail(run, "%s kernel of layer %d: launch failed: %s", what, layer, gpt_gpu_error_text(err));
}

static inline void gcheck(gpt_run_t *run, const char *why, int layer) {
    if (why != NULL)
        gpt_run_fail(run, "layer %d: %s", layer, why);
}

static inline uint64_t footprint(uint64_t bytes) {
    uint64_t blk = 2ull << 20;
    return bytes >= (1ull << 20) ? (bytes + blk - 1) / blk * blk : bytes;
}

/* gpt.c: the shape, the tensors, the step's layer calls, the CPU optimizer */
void gpt_shape_init(gpt_run_t *run);
void gpt_net_alloc(gpt_run_t *run);
uint64_t gpt_planned_managed_bytes(const gpt_run_t *run);
void gpt_run_reconfigure(gpt_run_t *run, int k, int n);
/* 1: layer l's AdamW moments are on the disk tier (a CPU layer, a run with a spill
 * directory); the CPU thread leaves it to its declared call. */
int gpt_moments_on_disk(const gpt_run_t *run, int l);
/* 1: its master weights and gradient too (--spill state). */
int gpt_state_on_disk(const gpt_run_t *run, int l);
/* The CPU layers' state placed in host memory, and what of it the disk tier keeps out
 * of host memory (cli_host_fits). */
uint64_t gpt_host_homed_bytes(const gpt_run_t *run);
uint64_t gpt_tier_off_bytes(const gpt_run_t *run);
/* set.tier for set.cpu_layers and set.recompute: with a disk tier and --spill auto, the
 * fewest CPU layers' moments, then state, that bring the host memory the run needs
 * within the host budget (none when it fits without); --spill moments or state: every
 * CPU layer's; without a tier, none. */
void gpt_tier_plan(gpt_run_t *run);
/* The bytes set.tier puts on the disk tier, and its layers at each level. */
uint64_t gpt_tier_bytes(const gpt_run_t *run, int *moments_layers, int *state_layers);
/* A tensor on the disk tier back in host memory around what reads or writes it between
 * calls (1: it was on the tier), and onto the tier again (held: what hold returned). */
int gpt_tier_hold(gpt_run_t *run, uvmrt_tensor_t *t);
void gpt_tier_release(gpt_run_t *run, uvmrt_tensor_t *t, int held);
void gpt_step_calls(gpt_run_t *run, int s, double lr);
double gpt_lr_at(const gpt_options_t *o, int step);
void gpt_cpu_drain(gpt_run_t *run);
void gpt_cpu_opt_open(gpt_run_t *run);
void gpt_wh_from_master_host(gpt_run_t *run, int l);
double gpt_step_flops(const gpt_run_t *run);

/* the pieces of a step that the side steps (gpt_side.c) use too: the batch's token
 * index, uvmrt's step bounds, the forward (side: a validation or sampling step's) and
 * the layers of one */
void gpt_tokens_index(gpt_run_t *run);
void gpt_uv_step_begin(gpt_run_t *run);
void gpt_uv_step_end(gpt_run_t *run);
void gpt_forward(gpt_run_t *run, double *loss_dst, int side);
void gpt_embed_forward(gpt_run_t *run, int side);
void gpt_block_forward(gpt_run_t *run, int l);
void gpt_head_sample(gpt_run_t *run, int row);

/* gpt_weights.c: GPT-2's initialisation and the llm.c-order weight files (which: 0 the
 * weights, 1 the gradients) */
void gpt_weights_init(gpt_run_t *run);
void gpt_weights_dump(gpt_run_t *run, const char *path, int which);
void gpt_weights_load(gpt_run_t *run, const char *path);

/* gpt_side.c: the side steps after training step s */
void gpt_validate(gpt_run_t *run, int s);
void gpt_sample_run(gpt_run_t *run, int s);
/* 1 when a validation pass (sampling) follows training step s */
int gpt_validates_after(const gpt_run_t *run, int s);
int gpt_samples_after(const gpt_run_t *run, int s);
/* The uvmrt steps the loop makes: one per training step, val_n per validation pass,
 * one per sampled token (none on sim, which does not sample). */
uint64_t gpt_uv_steps_planned(const gpt_run_t *run);

/* gpt_open.c: opening and closing a run */
uvmrt_context_t *gpt_context_open(gpt_options_t *opt);
void gpt_run_data_open(gpt_run_t *run);
void gpt_run_open_gpu(gpt_run_t *run);
void gpt_run_close(gpt_run_t *run);

/* gpt_auto.c: --cpu-layers auto, --recompute auto */
void gpt_choose_auto(gpt_run_t *run);
void gpt_choice_review(gpt_run_t *run, int s);
void gpt_knob_values(const gpt_run_t *run, const int *values, int *k, int *n);
void gpt_cpu_opt_close(gpt_run_t *run);

/* gpt_ckpt.c: --checkpoint, --resume */
void gpt_run_ckpt_start(gpt_run_t *run);
void gpt_run_ckpt_save(gpt_run_t *run, int s);
void gpt_run_ckpt_resume(gpt_run_t *run);

/* gpt_simref.c: on sim, the CPU reference (gpt_ref.c) computes inside the same layer
 * calls, on the tensors' host memory, when the shape is small enough: parameters x
 * tokens per step (gpt_simref_work) at most GPT_SIM_MATH_MAX, about a second a step on
 * one core. Above it sim runs the schedule only. */
#define GPT_SIM_MATH_MAX 2e8
double gpt_simref_work(const gpt_run_t *run);
int gpt_simref_fits(const gpt_run_t *run);
void gpt_simref_open(gpt_run_t *run); /* after gpt_net_alloc; the host buffers too */
void gpt_simref_close(gpt_run_t *run);
void gpt_simref_embed_forward(gpt_run_t *run);
void gpt_simref_block_forward(gpt_run_t *run, int l, int with_out);
void gpt_simref_block_backward(gpt_run_t *run, int l, int recompute);
void gpt_simref_head_forward(gpt_run_t *run, double *loss_dst);
void gpt_simref_head_backward(gpt_run_t *run);
void gpt_simref_embed_backward(gpt_run_t *run);
void gpt_simref_adamw(gpt_run_t *run, int l, const uvmrt_adamw_t *hp);
void gpt_simref_head_sample(gpt_run_t *run, int row);

/* gpt_results.c */
typedef struct medians {
    double ms, in_gb, out_gb, faults;
    int n;        /* steps they are medians of: the run's, less the recording ones */
    double wall_ms; /* from one step's end to the next's (all the host does between,
                     * the runtime's bookkeeping and printing too), after non-recording
                     * steps; 0 when no two such steps follow each other */
} medians_t;
medians_t gpt_run_medians(const gpt_run_t *run);
const char *gpt_source_name(gpt_source_t s);
int gpt_outputs_write(gpt_run_t *run, const medians_t *m, const uvmrt_summary_t *sum);
void gpt_steps_free(gpt_run_t *run);

#endif /* UVMRT_GPT_H */
