/*
 * gpt_flags.h -- uvmrt-gpt's command line: the flags shared by the example programs
 * (examples/common/cli.h: --steps --seed --budget --policy --backend --profile
 * --report --trace --loss-log --result-json --log-level --quiet --help --version)
 * and the trainer's own (model shape, data, checkpoints, sampling).
 */
#ifndef UVMRT_GPT_FLAGS_H
#define UVMRT_GPT_FLAGS_H

#include <stdint.h>

#include "uvmrt.h"
#include "../common/cli.h"
#include "gpt_gpu.h" /* gpt_attn_kind_t: --attention's values */

#define GPT_PROG "uvmrt-gpt"
#define GPT_AUTO (-1) /* --cpu-layers auto, --recompute auto */
#define GPT_MAX_LAYERS 1024 /* --layers' largest */

/* Where the tokens come from. */
typedef enum {
    GPT_SRC_RANDOM = 0, /* --tokens random: synthetic, uniformly random */
    GPT_SRC_CYCLE,      /* --tokens cycle: synthetic, a repeated random block */
    GPT_SRC_DATA,       /* --data PATTERN: llm.c token shards */
    GPT_SRC_TEXT,       /* --text FILE: bytes, vocab 256, 90/10 train/validation */
} gpt_source_t;

/* What of a CPU layer's state lives on the disk tier (with --spill-dir): --spill's
 * value, and per layer the plan's (gpt_tier_plan). */
typedef enum {
    GPT_SPILL_NONE = 0, /* a layer: nothing */
    GPT_SPILL_MOMENTS,  /* AdamW's m and v */
    GPT_SPILL_STATE,    /* also the fp32 master weights and the gradient */
    GPT_SPILL_AUTO,     /* --spill auto (default): per layer, the least the host budget needs */
} gpt_spill_t;

typedef struct gpt_options {
    cli_common_t c;             /* the shared flags: steps, seed, budget, policy, backend, ... */
    int depth;                  /* preset that chose layers/channels/heads (0: explicit) */
    int layers, channels, heads;
    int vocab, padded_vocab;    /* V, and Vp = V rounded up to a multiple of 128 */
    int max_seq;                /* rows of wpe: max(1024, seq) */
    int batch, seq;             /* B, T */
    double lr;                  /* peak learning rate */
    int warmup;                 /* linear warmup steps */
    double lr_final_frac;       /* cosine decays to lr * this at the last step */
    double grad_clip;           /* global gradient-norm clipping threshold */
    /* where AdamW runs: the top cpu_layers of the L + 2 layers (embedding, blocks, head;
     * "top" = last in forward order) on the CPU thread, the others on the GPU;
     * GPT_AUTO: uvmrt chooses (uvmrt_choose(3)) */
    int cpu_layers;
    /* the first `recompute` blocks keep only their output and recompute their forward in
     * their backward (sharing one activation set); GPT_AUTO: uvmrt chooses */
    int recompute;
    /* with a disk tier: what of the CPU layers' state lives on it (every CPU layer's:
     * moments, state; auto: gpt_tier_plan chooses per layer) */
    gpt_spill_t spill;
    gpt_attn_kind_t attention; /* --attention: GPT_ATTN_AUTO (default), _CUDNN or _MMA */
    int no_page_lock; /* --page-locked off: the CPU layers' state in managed memory */
    const char *dump_weights, *dump_grads, *init_weights;
    /* data */
    gpt_source_t source;
    const char *data_pattern;   /* --data */
    const char *val_pattern;    /* --val (with --data) */
    const char *text_path;      /* --text */
    int val_every;              /* validate every N steps (0: only after the last step) */
    int val_batches;            /* batches per validation pass */
    /* checkpoints */
    const char *ckpt_dir;       /* --checkpoint DIR; NULL: none */
    int ckpt_every;             /* save every N steps (0: only after the last step) */
    int keep;                   /* keep this run's newest K checkpoints (0: all) */
    int resume;                 /* 1: continue from DIR's newest valid checkpoint */
    int ckpt_overwrite;         /* 1: --overwrite-checkpoints: may replace other runs' */
    int stop_at;                /* end after this step (0: --steps); the schedule spans --steps */
    /* sampling */
    int sample;                 /* tokens to generate after training (0: none) */
    int sample_every;           /* also every K steps (0: only at the end) */
    int top_k;                  /* 0: greedy; else sample among the K most likely */
    const char *prompt;         /* --prompt TEXT (with --text) */
} gpt_options_t;

/* Parses argv into opt (usage errors exit 2; --help and --version exit 0). */
void gpt_options_parse(int argc, char **argv, gpt_options_t *opt);

#endif
