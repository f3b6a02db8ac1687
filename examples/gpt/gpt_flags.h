/*
 * gpt_flags.h -- uvmrt-gpt's command line: the options and their parser.
 */
#ifndef UVMRT_GPT_FLAGS_H
#define UVMRT_GPT_FLAGS_H

#include <stdint.h>

#include "uvmrt.h"

#define GPT_PROG "uvmrt-gpt"

typedef struct gpt_options {
    int depth;                  /* preset that chose layers/channels/heads (0: explicit) */
    int layers, channels, heads;
    int vocab, padded_vocab;    /* V, and Vp = V rounded up to a multiple of 128 */
    int max_seq;                /* rows of wpe: max(1024, seq) */
    int batch, seq;             /* B, T */
    int steps;
    double lr;                  /* peak learning rate */
    int warmup;                 /* linear warmup steps */
    double lr_final_frac;       /* cosine decays to lr * this at the last step */
    double grad_clip;           /* global gradient-norm clipping threshold */
    uint64_t seed;
    uint64_t budget_bytes;      /* 0 = auto */
    uvmrt_policy_t policy;
    uvmrt_backend_kind_t backend;
    int backend_explicit;
    const char *profile;
    int optimizer_cpu;          /* 1: AdamW of every layer on the CPU */
    int recompute;              /* 1: keep only each block's output; recompute in backward */
    const char *report_format, *report_path;
    const char *trace_path;
    const char *loss_log;
    const char *result_json;
    const char *dump_weights, *dump_grads, *init_weights;
    int tokens_cycle;           /* --tokens cycle: the learnable synthetic stream */
    int quiet;
} gpt_options_t;

/* Parses argv into opt (usage errors exit 2; --help and --version exit 0). */
void gpt_options_parse(int argc, char **argv, gpt_options_t *opt);

#endif
