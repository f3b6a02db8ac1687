/*
 * gpt.c -- uvmrt-gpt: GPT-2 trained on uvmrt, in the style of llm.c.
 *
 * Model (gpt_ref.h has the reference): token + position embedding, L pre-LN
 * blocks (LN -> qkv -> causal multi-head attention -> proj, residual; LN -> fc 4C
 * -> GELU(tanh) -> proj, residual), final LN, head tied to wte (vocab padded to a
 * multiple of 128), cross-entropy averaged over the B*T positions.
 *
 * Numerics: fp32 master weights with bf16 working copies; bf16 activations for the
 * matmuls (cuBLAS, fp32 accumulation), an fp32 residual stream and residual
 * gradient; AdamW (beta .9/.95, eps 1e-8, weight decay .1 on 2-D weights) with
 * fp32 moments; global gradient-norm clipping at 1.0; cosine schedule with linear
 * warmup, down to lr/10.
 *
 * Memory: every tensor is a uvmrt tensor. Layer 0 is the embedding, layers 1..L the
 * blocks, layer L+1 the head. Each layer's parameters, gradients and optimizer
 * state are one fp32 array each (master, gradient, m, v) plus the bf16 working
 * copy, in that layer's arena, so one prefetch moves one layer; inside a block the
 * 2-D weights come first (weight decay applies to a prefix). Activations saved per
 * block; --recompute N: the first N blocks (their activations would live longest)
 * keep only their output and recompute their forward inside their backward, sharing
 * one activation set. Every layer's forward, backward and GPU optimizer work is one
 * uvmrt layer call naming each tensor it uses.
 *
 * --cpu-layers K: the top K layers (the head, then the top blocks: their update has
 * the most time before the next forward needs it) run AdamW on a CPU thread
 * (gpt_cpuopt.c) on host-placed w, m, v, g, pipelined with the next step's forward
 * (per-layer waits); the GPU updates the others meanwhile. The CPU's work is declared
 * to uvmrt as one call per layer on a stream of its own, with its host-memory bytes,
 * so that the sim and uvmrt's model see its time and its share of host memory.
 * auto (--cpu-layers, --recompute): uvmrt_choose(3) rehearses the step on the model
 * of the machine (this file's layer calls on a second, compute-less run) for each
 * candidate and the run takes the fastest predicted; after 3 planned steps
 * uvmrt_choice_review compares with the measured time and may choose again, applied
 * between steps.
 *
 * The classifier never holds B*T*V logits: rows go through in chunks (bf16 logits
 * of one chunk; the cross-entropy kernel turns them into dlogits in place, then
 * the chunk's dlnf and dwte are made), inside the head's forward call.
 *
 * Without a GPU it runs the same schedule on uvmrt's sim backend (no arithmetic,
 * durations from the declared FLOPs) and says so.
 *
 * This file is the model's tensors and layer calls, the training loop and main; the
 * automatic choice is in gpt_auto.c, a run's checkpoints in gpt_ckpt.c, the medians
 * and the result JSON in gpt_results.c, and what they share in gpt.h.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <glob.h>
#include <setjmp.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvmrt.h"
#include "../common/cli.h"
#include "../common/input_file.h"

#include <jansson.h>

#include "../mlp/adamw_cpu.h"
#include "checkpoint.h"
#include "data.h"
#include "gpt_cpuopt.h"
#include "gpt_flags.h"
#include "gpt_gpu.h"
#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "gpt_tokens.h"
#include "../mlp/mlp_math.h"


static const char *FALLBACK_PROFILE = "h200";
static const int DUMP_MAGIC = 20241201;
static const double ADAM_B1 = 0.9, ADAM_B2 = 0.95, ADAM_EPS = 1e-8, ADAM_WD = 0.1;
static const int CHUNK_ROWS = 2048; /* classifier rows per chunk */

/* gpt.h comes after the constants: the struct sizes its arrays by none of them */
#include "gpt.h"

static void run_close(gpt_run_t *run);
static void run_close_cb(void *run) { run_close(run); }

void gpt_run_fail(gpt_run_t *run, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (run->rehearsal) { /* a layer over budget: the candidate does not fit (quietly) */
        if (run->fail_st != UVMRT_ERR_BUDGET) {
            fflush(stdout);
            fprintf(stderr, "%s: rehearsal on uvmrt's model: %s\n", PROG, msg);
        }
        longjmp(*run->rehearsal, 1);
    }
    cli_fail(run_close_cb, run, "%s", msg);
}

const char gpt_sim_cpu_stream = 0, gpt_sim_gpu_stream = 0;

/* ----------------------------------------------------------------------------
 * shapes and allocation: descriptors first (planned bytes), then one
 * uvmrt_tensors_alloc per layer and one for the shared workspace */

void gpt_shape_init(gpt_run_t *run) {
    const gpt_options_t *o = run->opt;
    run->L = o->layers, run->C = o->channels, run->NH = o->heads, run->V = o->vocab;
    run->Vp = o->padded_vocab, run->maxT = o->max_seq, run->B = o->batch, run->T = o->seq;
    run->N = run->B * run->T;
    run->nl = run->L + 2;
    size_t C = (size_t)run->C;
    size_t sz[P_BLOCK] = {3 * C * C, C * C, 4 * C * C, 4 * C * C, C, C, 3 * C, C, C, C, 4 * C, C};
    size_t off = 0;
    for (int k = 0; k < P_BLOCK; k++) {
        run->bsize[k] = sz[k];
        run->boff[k] = off;
        off += sz[k];
    }
    run->chunk = run->N < CHUNK_ROWS ? run->N : CHUNK_ROWS;
}

static size_t layer_nparams(const gpt_run_t *run, int layer, size_t *n_decay) {
    size_t C = (size_t)run->C, n;
    if (layer == 0)
        *n_decay = n = ((size_t)run->Vp + (size_t)run->maxT) * C;
    else if (layer == run->nl - 1)
        *n_decay = 0, n = 2 * C;
    else
        n = run->boff[P_BLOCK - 1] + run->bsize[P_BLOCK - 1], *n_decay = 12 * C * C;
    return n;
}

#define MAX_DESCS 20

typedef struct desc_set {
    uvmrt_tensor_desc_t d[MAX_DESCS];
    char names[MAX_DESCS][40];
    size_t n;
} desc_set_t;

static void desc_add(desc_set_t *s, int layer, uvmrt_role_t role, size_t bytes,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void desc_add(desc_set_t *s, int layer, uvmrt_role_t role, size_t bytes,
                     const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->names[s->n], sizeof s->names[0], fmt, ap);
    va_end(ap);
    s->d[s->n] = (uvmrt_tensor_desc_t){s->names[s->n], layer, role, bytes};
    s->n++;
}

static void block_acts_descs(const gpt_run_t *run, desc_set_t *s, int layer, int idx) {
    size_t N = (size_t)run->N, NC = N * (size_t)run->C;
    size_t lse = (size_t)run->B * run->NH * run->T * 4;
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 2, "ln1_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 2 * N * 4, "ln1ms_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 3 * NC * 2, "qkv_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 2, "atty_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, lse, "lse_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 4, "res2_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 2, "ln2_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 2 * N * 4, "ln2ms_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 4 * NC * 2, "fch_%d", idx);
    desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 4 * NC * 2, "fchg_%d", idx);
}

/* Layer `layer`'s tensors: 5 parameter arrays, then its activations. */
static void layer_descs(const gpt_run_t *run, int layer, desc_set_t *s) {
    size_t nd, n = layer_nparams(run, layer, &nd), N = (size_t)run->N;
    size_t NC = N * (size_t)run->C;
    s->n = 0;
    desc_add(s, layer, UVMRT_ROLE_WEIGHT, n * 4, "w_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_WEIGHT, n * 2, "wh_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_GRADIENT, n * 4, "g_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_OPTIMIZER_STATE, n * 4, "m_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_OPTIMIZER_STATE, n * 4, "v_%d", layer);
    if (layer == 0) {
        desc_add(s, layer, UVMRT_ROLE_WORKSPACE, (5 * N + 1) * 4, "tokens");
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 4, "out_%d", layer);
    } else if (layer == run->nl - 1) {
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 2, "lnf");
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, 2 * N * 4, "lnfms");
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, N * 4, "losses");
    } else {
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 4, "out_%d", layer);
        if (!recomputes(run, layer))
            block_acts_descs(run, s, layer, layer);
    }
}

/* A CPU block's backward makes its gradient in gdev (block_backward). Every run with
 * blocks has it, so that where AdamW runs changes no allocation (a GPU-only run never
 * touches it: it takes no device memory). */
static int has_gdev(const gpt_run_t *run) { return run->L > 0; }

static void workspace_descs(const gpt_run_t *run, desc_set_t *s) {
    size_t N = (size_t)run->N, NC = N * (size_t)run->C;
    size_t bnt = (size_t)run->B * run->NH * run->T;
    s->n = 0;
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 4, "dres");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 2, "dbf");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, 4 * NC * 2, "d4");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 2, "dln");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, 3 * NC * 2, "dqkv");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, bnt * 4, "delta");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE,
             2 * gpt_colsum_scratch_floats(run->N, 4 * run->C) * 4, "colsum");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, (size_t)run->chunk * run->Vp * 2, "logits");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, (size_t)run->nl * GPT_SUMSQ_BLOCKS * 8 + 16,
             "gnorm");
    if (has_gdev(run)) {
        size_t nd;
        desc_add(s, -1, UVMRT_ROLE_WORKSPACE, layer_nparams(run, 1, &nd) * 4, "gdev");
    }
    if (run->recompute > 0)
        block_acts_descs(run, s, -1, 0);
}

uint64_t gpt_planned_managed_bytes(const gpt_run_t *run) {
    desc_set_t s;
    uint64_t total = 0;
    for (int l = 0; l < run->nl; l++) {
        layer_descs(run, l, &s);
        for (size_t k = 0; k < s.n; k++)
            total += footprint(s.d[k].size_bytes);
    }
    workspace_descs(run, &s);
    for (size_t k = 0; k < s.n; k++)
        total += footprint(s.d[k].size_bytes);
    return total;
}

static void placement_set(gpt_run_t *run, int l, uvmrt_placement_t where);

static void acts_from(block_acts_t *a, uvmrt_tensor_t **t) {
    *a = (block_acts_t){t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
}

void gpt_net_alloc(gpt_run_t *run) {
    static const char *const fixed[] = {"embed", "head"};
    for (int l = 0; l < run->nl; l++) {
        char name[32];
        int id = -1;
        if (l == 0 || l == run->nl - 1)
            snprintf(name, sizeof name, "%s", fixed[l == 0 ? 0 : 1]);
        else
            snprintf(name, sizeof name, "block%d", l - 1);
        UV_CHECK(run, uvmrt_layer_add(run->ctx, name, &id));
        if (id != l)
            gpt_run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", name, id, l);
    }
    run->lp = calloc((size_t)run->nl, sizeof *run->lp);
    run->out = calloc((size_t)run->nl, sizeof *run->out);
    run->acts = calloc((size_t)run->L + 1, sizeof *run->acts);
    if (!run->lp || !run->out || !run->acts)
        gpt_run_fail(run, "out of host memory");
    desc_set_t s;
    uvmrt_tensor_t *t[MAX_DESCS];
    for (int l = 0; l < run->nl; l++) {
        layer_descs(run, l, &s);
        memset(t, 0, sizeof t);
        UV_CHECK(run, uvmrt_tensors_alloc(run->ctx, s.n, s.d, t));
        for (size_t k = 0; k < s.n; k++)
            run->managed_bytes += footprint(s.d[k].size_bytes);
        layer_params_t *p = &run->lp[l];
        p->w = t[0], p->wh = t[1], p->g = t[2], p->m = t[3], p->v = t[4];
        p->n = layer_nparams(run, l, &p->n_decay);
        if (l == 0) {
            run->tokens = t[5];
            run->out[0] = t[6];
        } else if (l == run->nl - 1) {
            run->lnf = t[5], run->lnf_ms = t[6], run->losses = t[7];
        } else {
            run->out[l] = t[5];
            if (!recomputes(run, l))
                acts_from(&run->acts[l - 1], t + 6);
        }
    }
    workspace_descs(run, &s);
    memset(t, 0, sizeof t);
    UV_CHECK(run, uvmrt_tensors_alloc(run->ctx, s.n, s.d, t));
    for (size_t k = 0; k < s.n; k++)
        run->managed_bytes += footprint(s.d[k].size_bytes);
    run->dres = t[0], run->dbf = t[1], run->d4 = t[2], run->dln = t[3], run->dqkv = t[4];
    run->delta = t[5], run->colsum = t[6], run->logits = t[7], run->gnorm = t[8];
    size_t next = 9;
    if (has_gdev(run))
        run->gdev = t[next++];
    if (run->recompute > 0) {
        acts_from(&run->shared_acts, t + next);
        for (int l = 1; l <= run->recompute; l++)
            run->acts[l - 1] = run->shared_acts;
    }
    for (int l = run->nl - run->cpu_layers; l < run->nl; l++)
        placement_set(run, l, UVMRT_PLACE_HOST);
}

/* ----------------------------------------------------------------------------
 * a changed choice, between steps: where AdamW runs, which blocks recompute */

/* The CPU's layers' data lives on the host (the GPU writes g there); a GPU layer's is
 * moved by the policy. */
static void placement_set(gpt_run_t *run, int l, uvmrt_placement_t where) {
    uvmrt_tensor_t *h[4] = {run->lp[l].w, run->lp[l].m, run->lp[l].v, run->lp[l].g};
    for (int k = 0; k < 4; k++)
        UV_CHECK(run, uvmrt_tensor_set_placement(run->ctx, h[k], where));
}

static void acts_free(gpt_run_t *run, block_acts_t *a) {
    uvmrt_tensor_t *t[ACTS_COUNT] = {a->ln1, a->ln1_ms, a->qkv, a->atty, a->lse,
                                     a->res2, a->ln2, a->ln2_ms, a->fch, a->fchg};
    for (int k = 0; k < ACTS_COUNT; k++) {
        run->managed_bytes -= footprint(uvmrt_tensor_size(t[k]));
        UV_CHECK(run, uvmrt_tensor_free(run->ctx, t[k]));
    }
    memset(a, 0, sizeof *a);
}

/* Block layer l's own activation set (layer -1: the shared one). */
static void acts_alloc(gpt_run_t *run, int l, block_acts_t *a) {
    desc_set_t s = {.n = 0};
    block_acts_descs(run, &s, l, l < 0 ? 0 : l);
    uvmrt_tensor_t *t[MAX_DESCS] = {0};
    UV_CHECK(run, uvmrt_tensors_alloc(run->ctx, s.n, s.d, t));
    for (size_t k = 0; k < s.n; k++)
        run->managed_bytes += footprint(s.d[k].size_bytes);
    acts_from(a, t);
}

/* From the next step on: the top k layers' AdamW on the CPU, blocks 1..n recompute.
 * The runtime sees other layer calls and records the step again. */
void gpt_run_reconfigure(gpt_run_t *run, int k, int n) {
    for (int l = 0; l < run->nl; l++) {
        int was = on_cpu(run, l), now = l >= run->nl - k;
        if (was != now)
            placement_set(run, l, now ? UVMRT_PLACE_HOST : UVMRT_PLACE_AUTO);
        /* back on the GPU: its wh was last made in a forward from an older w */
        if (was && !now && run->compute) {
            const layer_params_t *p = &run->lp[l];
            kcheck(run, gpt_f32_to_bf16_launch(b16(p->wh), f32(p->w), p->n, run->stream), "weights to bf16", l);
            gcheck(run, gpt_gpu_sync(run->gpu), l);
        }
    }
    int old_n = run->recompute;
    for (int l = 1; l <= run->L; l++) {
        int was = l - 1 < old_n, now = l - 1 < n;
        if (was && !now)
            acts_alloc(run, l, &run->acts[l - 1]);
        else if (!was && now)
            acts_free(run, &run->acts[l - 1]);
    }
    if (old_n > 0 && n == 0)
        acts_free(run, &run->shared_acts);
    if (old_n == 0 && n > 0)
        acts_alloc(run, -1, &run->shared_acts);
    for (int l = 1; l <= n; l++)
        run->acts[l - 1] = run->shared_acts;
    run->cpu_layers = k, run->recompute = n;
}

/* ----------------------------------------------------------------------------
 * weights: GPT-2's initialisation, and the llm.c-order weight files */

/* Element k of the standard normal stream (seed, id): Box-Muller on the hash. */
static float normal_at(uint64_t seed, uint64_t id, uint64_t k) {
    double u1 = (mlp_uniform(seed, id, 2 * k) + 1.0) * 0.5, u2 = (mlp_uniform(seed, id, 2 * k + 1) + 1.0) * 0.5;
    return (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(6.283185307179586 * u2));
}

/* The 16 tensors of gpt_ref.h's order as pieces of the layers' arrays: tensor t,
 * block l (0 for the unrepeated ones) lives at layer *layer, element *off, *count. */
static int piece(const gpt_run_t *run, int t, int l, int *layer, size_t *off, size_t *count) {
    static const int block_of[GPT_NUM_PARAM_TENSORS] = {
        -1, -1, P_LN1W, P_LN1B, P_QKVW, P_QKVB, P_ATTPROJW, P_ATTPROJB,
        P_LN2W, P_LN2B, P_FCW, P_FCB, P_FCPROJW, P_FCPROJB, -1, -1};
    size_t C = (size_t)run->C;
    if (t == 0)
        *layer = 0, *off = 0, *count = (size_t)run->Vp * C;
    else if (t == 1)
        *layer = 0, *off = (size_t)run->Vp * C, *count = (size_t)run->maxT * C;
    else if (t >= 14)
        *layer = run->nl - 1, *off = (size_t)(t - 14) * C, *count = C;
    else {
        *layer = 1 + l, *off = run->boff[block_of[t]], *count = run->bsize[block_of[t]];
        return 1;
    }
    return 0;
}

static int piece_repeats(const gpt_run_t *run, int t) { return t >= 2 && t < 14 ? run->L : 1; }

/* Layer l's bf16 copy from its fp32 master weights, on the host. */
void gpt_wh_from_master_host(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->lp[l];
    const float *w = f32(p->w);
    uint16_t *wh = b16(p->wh);
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < p->n; k++)
        wh[k] = mlp_f32_to_bf16(w[k]);
}

/* Every layer from its master weights as step 1 needs it: the bf16 copy made, the
 * moments and gradients zero (wpe rows beyond T never get a gradient). */
static void layers_start_from_weights(gpt_run_t *run) {
    for (int l = 0; l < run->nl; l++) {
        const layer_params_t *p = &run->lp[l];
        float *m = f32(p->m), *v = f32(p->v), *g = f32(p->g);
        gpt_wh_from_master_host(run, l);
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < p->n; k++)
            m[k] = v[k] = g[k] = 0.0f;
    }
}

static void weights_init(gpt_run_t *run) {
    uint64_t seed = run->opt->c.seed;
    float std_res = 0.02f / sqrtf(2.0f * (float)run->L);
    double t0 = cli_now_s();
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++)
        for (int l = 0; l < piece_repeats(run, t); l++) {
            int layer;
            size_t off, count;
            piece(run, t, l, &layer, &off, &count);
            float *w = f32(run->lp[layer].w) + off;
            uint64_t id = (uint64_t)t * 4096 + (uint64_t)l;
            int is_lnw = t == 2 || t == 8 || t == 14;
            int is_bias = t == 3 || t == 5 || t == 7 || t == 9 || t == 11 || t == 13 || t == 15;
            float std = (t == 6 || t == 12) ? std_res : 0.02f;
            size_t real = t == 0 ? (size_t)run->V * run->C : count; /* padded rows stay 0 */
#pragma omp parallel for schedule(static)
            for (size_t k = 0; k < count; k++)
                w[k] = is_lnw ? 1.0f
                       : is_bias || k >= real ? 0.0f
                                              : std * normal_at(seed, id, k);
        }
    layers_start_from_weights(run);
    if (!run->opt->c.quiet)
        printf("  initialised the weights on the host in %.1f s\n", cli_now_s() - t0);
}

static void header_make(const gpt_run_t *run, int32_t h[256]) {
    memset(h, 0, 256 * sizeof *h);
    h[0] = DUMP_MAGIC, h[1] = 1, h[2] = run->maxT, h[3] = run->V, h[4] = run->L;
    h[5] = run->C, h[6] = run->NH, h[7] = run->Vp;
}

/* Writes the 16 tensors of each layer's `which` array (0: master weights, 1:
 * gradients) in the --dump-weights format. */
static void weights_dump(gpt_run_t *run, const char *path, int which) {
    const char *flag = which ? "--dump-grads" : "--dump-weights";
    FILE *f = cli_output_open(flag, path); /* the report rules: a link, a FIFO, a device kept */
    if (f == NULL)
        gpt_run_fail(run, "%s %s was not written (see above)", flag, path);
    int32_t h[256];
    header_make(run, h);
    int ok = fwrite(h, sizeof h, 1, f) == 1;
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS && ok; t++)
        for (int l = 0; l < piece_repeats(run, t) && ok; l++) {
            int layer;
            size_t off, count;
            piece(run, t, l, &layer, &off, &count);
            const float *src = f32(which ? run->lp[layer].g : run->lp[layer].w) + off;
            ok = fwrite(src, sizeof(float), count, f) == count;
        }
    if (!ok) {
        int e = errno;
        cli_output_abandon(f);
        gpt_run_fail(run, "%s %s: write failed: %s", flag, path, strerror(e));
    }
    if (cli_output_close(flag, path, f) != 0)
        gpt_run_fail(run, "%s %s was not written (see above)", flag, path);
    if (!run->opt->c.quiet)
        printf("  wrote %s to %s\n", which ? "step 1's gradients" : "the weights", path);
}

static void weights_load(gpt_run_t *run, const char *path) {
    const char *why = NULL;
    FILE *f = input_file_fopen(path, NULL, &why); /* a FIFO must not hang the run */
    if (f == NULL)
        gpt_run_fail(run, "cannot read --init-weights %s: %s", path, why);
    int32_t h[256], want[256];
    header_make(run, want);
    if (fread(h, sizeof h, 1, f) != 1) {
        fclose(f);
        gpt_run_fail(run, "--init-weights %s: shorter than its 1024-byte header", path);
    }
    static const char *const field[8] = {"magic", "version", "maxT", "V", "L", "C", "NH", "Vp"};
    for (int k = 0; k < 8; k++)
        if (h[k] != want[k]) {
            fclose(f);
            gpt_run_fail(run, "--init-weights %s: header %s is %d, expected %d (this model: "
                          "--seq/maxT %d, vocab %d, %d layers, %d channels, %d heads)",
                     path, field[k], h[k], want[k], run->maxT, run->V, run->L, run->C, run->NH);
        }
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++)
        for (int l = 0; l < piece_repeats(run, t); l++) {
            int layer;
            size_t off, count;
            piece(run, t, l, &layer, &off, &count);
            if (fread(f32(run->lp[layer].w) + off, sizeof(float), count, f) != count) {
                fclose(f);
                gpt_run_fail(run, "--init-weights %s: truncated in tensor %s (block %d)", path,
                         gpt_param_names[t], l);
            }
        }
    fclose(f);
    layers_start_from_weights(run);
    if (!run->opt->c.quiet)
        printf("  loaded the weights from %s\n", path);
}

/* ----------------------------------------------------------------------------
 * tokens: the batch of a step, and the rows of each token for dwte (sorted by
 * token, rows in order: the encoder's backward sums them without atomics) */

/* The rows of each input token, for the embedding's backward (inputs in tok_host). */
static void tokens_index(gpt_run_t *run) {
    int N = run->N, V = run->V;
    int *inp = run->tok_host, *tgt = inp + N, *rows = tgt + N, *start = rows + N;
    int *tok = start + N + 1;
    int *count = calloc((size_t)V + 1, sizeof *count);
    if (count == NULL)
        gpt_run_fail(run, "out of host memory");
    for (int i = 0; i < N; i++)
        count[inp[i] + 1]++;
    for (int v = 0; v < V; v++)
        count[v + 1] += count[v];
    int nb = 0;
    for (int v = 0; v < V; v++)
        if (count[v + 1] > count[v]) {
            start[nb] = count[v];
            tok[nb] = v;
            nb++;
        }
    start[nb] = N;
    for (int i = 0; i < N; i++)
        rows[count[inp[i]]++] = i;
    free(count);
    run->nbuckets = nb;
}

/* The batch of training step `step` (from the data, or the synthetic stream). */
static void tokens_prepare(gpt_run_t *run, int step) {
    int N = run->N, V = run->V;
    int *inp = run->tok_host, *tgt = inp + N;
    char err[512];
    if (run->train) {
        if (gpt_data_next(run->train, (int32_t *)inp, (int32_t *)tgt, err, sizeof err) != 0)
            gpt_run_fail(run, "training data, step %d: %s", step + 1, err);
    } else if (run->opt->source == GPT_SRC_CYCLE) {
        gpt_tokens_cycle(inp, tgt, run->B, run->T, V, run->opt->c.seed, step);
    } else {
        gpt_tokens_random(inp, tgt, run->B, run->T, V, run->opt->c.seed, step);
    }
    tokens_index(run);
}

/* ----------------------------------------------------------------------------
 * layer calls: every use named; STREAM only where each byte is touched once */

#define MAX_USES 40

typedef struct use_list {
    uvmrt_use_t u[MAX_USES];
    size_t n;
} use_list_t;

static void use_add(use_list_t *l, uvmrt_tensor_t *t, unsigned access) {
    if (t == NULL)
        return;
    for (size_t k = 0; k < l->n; k++) /* the same tensor twice: one use, both accesses */
        if (l->u[k].tensor == t) {
            unsigned a = l->u[k].access; /* STREAM only when both uses stream */
            l->u[k].access = ((a | access) & UVMRT_USE_READWRITE) | (a & access & UVMRT_USE_STREAM);
            return;
        }
    if (l->n < MAX_USES)
        l->u[l->n++] = (uvmrt_use_t){t, access};
}

static const unsigned R = UVMRT_USE_READ, W = UVMRT_USE_WRITE, RW = UVMRT_USE_READWRITE,
                      S = UVMRT_USE_STREAM;

static void layer_open(gpt_run_t *run, int layer, uvmrt_phase_t phase, const use_list_t *uses,
                       double flops, uint64_t bytes) {
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = layer, .phase = phase, .stream = run->stream, .uses = uses->u,
        .n_uses = uses->n, .no_default_uses = 1, .flops = flops,
    };
    /* the memory-bound kernels' bytes, at HBM speed after the matmuls' flops (on sim
     * and in uvmrt_choose's rehearsals; on cuda only declared, for the review) */
    call.hbm_bytes = bytes;
    /* a CPU layer's forward waits for the CPU's update of it (cpu_wait) and writes its
     * bf16 weights (weights_ready: 2 bytes per parameter) */
    if (phase == UVMRT_PHASE_FORWARD && on_cpu(run, layer)) {
        call.after = run->cpu_stream;
        call.hbm_bytes += 2 * run->lp[layer].n;
    }
    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, &call);
    if (st != UVMRT_OK) {
        run->fail_st = st;
        gpt_run_fail(run, "uvmrt_layer_begin(layer %d, %s) failed: %s (%s)", layer,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
    }
}

static void layer_close(gpt_run_t *run, int layer, uvmrt_phase_t phase) {
    uvmrt_status_t st = uvmrt_layer_end(run->ctx);
    if (st != UVMRT_OK && (run->fail_st = st) != UVMRT_OK)
        gpt_run_fail(run, "uvmrt_layer_end(layer %d, %s) failed: %s (%s)", layer,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
}

/* forward order: before layer l's forward, its CPU update of the last step given to
 * the thread (its steps are counted from 0 in each process: cpu_last) */
static void cpu_wait(gpt_run_t *run, int layer) {
    if (run->cpu && run->cpu_last >= 0 && gpt_cpuopt_wait(run->cpu, layer, run->cpu_last) != 0)
        gpt_run_fail(run, "the CPU optimizer thread failed");
}

/* Every layer's update done (before the host reads the weights). */
void gpt_cpu_drain(gpt_run_t *run) {
    for (int l = 0; run->cpu && l < run->nl; l++)
        cpu_wait(run, l);
}

static void uses_block_acts(use_list_t *u, const block_acts_t *a, unsigned access) {
    uvmrt_tensor_t *t[ACTS_COUNT] = {a->ln1, a->ln1_ms, a->qkv, a->atty, a->lse,
                                     a->res2, a->ln2, a->ln2_ms, a->fch, a->fchg};
    for (int k = 0; k < ACTS_COUNT; k++)
        use_add(u, t[k], access);
}

static double block_forward_flops(const gpt_run_t *run) {
    double N = run->N, C = run->C, T = run->T;
    return 24.0 * N * C * C + 2.0 * N * T * C; /* matmuls + causal attention */
}

/* The work a block's calls declare to uvmrt's model (uvmrt_layer_call_t: flops at the
 * profile's GEMM rate, then hbm_bytes at its HBM rate). The attention kernels (mma.sync,
 * not cuBLAS) run at a fraction of the GEMM rate: on the H200 (ncu, 2026-12-01, d48
 * shapes) 164 TFLOP/s forward and 158 backward (counting the backward's 5 matmuls as 2.5
 * times the forward's flops) against 675 for the block's cuBLAS GEMMs. Their flops are
 * declared at that rate; the fraction is assumed to carry over to other GPUs. */
#define GPT_ATTENTION_RATE 0.24

static double block_work_flops(const gpt_run_t *run, int backward) {
    double N = run->N, C = run->C, T = run->T, attn = 2.0 * N * T * C / GPT_ATTENTION_RATE;
    return backward ? 48.0 * N * C * C + 2.5 * attn : 24.0 * N * C * C + attn;
}

/* Device-memory bytes of a block's memory-bound kernels as they read and write them,
 * in N x C units. Forward: ln1 14 (three passes over the fp32 input, bf16 out), qkv
 * bias 6, attention 8 (q, k, v in, y out), residual 8, ln2 14, fc bias 8, GELU 16, and
 * with the block's output the last residual 8. Backward: to bf16 6 twice, the fp32 bias
 * sums 4 twice, GELU 24, its bias sum 8, the two LayerNorms 20 each (with their weight
 * sums), attention 20 (delta, dq, dk, dv), the qkv bias sum 6; then the gradient's sum
 * of squares and, for a CPU block, its copy out of gdev (4 bytes per parameter each). */
static uint64_t block_forward_bytes(const gpt_run_t *run, int with_out) {
    return (uint64_t)run->N * run->C * (with_out ? 82 : 74);
}

static uint64_t block_backward_bytes(const gpt_run_t *run, int l, int recompute) {
    uint64_t nc = (uint64_t)run->N * run->C, params = run->lp[l].n;
    return 118 * nc + 4 * params * (on_cpu(run, l) ? 2 : 1) +
           (recompute ? block_forward_bytes(run, 0) : 0);
}

static double head_flops(const gpt_run_t *run) {
    return 6.0 * run->N * (double)run->C * run->Vp;
}

/* ----------------------------------------------------------------------------
 * the model: embedding */

/* side: a validation or sampling step. Its calls begin like a training step's, and
 * uvmrt follows the recorded plan for as long as the calls match it: a training
 * step run on a validation step's plan would have the activations its backward
 * reads dropped (their next use in that plan is a write). So a side step declares
 * the tokens as streamed (true: the copy writes each byte once; the training step
 * leaves that bit off because the head and the embedding's backward read the
 * tokens again), which makes its first call, and a training step's first call
 * after it, differ from the other's record: uvmrt then runs the step like demand
 * and records it again. */
/* A layer's bf16 weights in its forward: a CPU layer's are made there from the fp32
 * master weights its AdamW wrote in host memory (read once over the link), so the CPU
 * thread never writes wh: it would fault pages the GPU holds back to the host and the
 * GPU would then fault them in again. */
static void uses_weights(const gpt_run_t *run, use_list_t *u, int l) {
    if (on_cpu(run, l))
        use_add(u, run->lp[l].w, R | S);
    use_add(u, run->lp[l].wh, on_cpu(run, l) ? W : R);
}

static void weights_ready(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->lp[l];
    if (run->compute && on_cpu(run, l))
        kcheck(run, gpt_f32_to_bf16_launch(b16(p->wh), f32(p->w), p->n, run->stream), "weights to bf16", l);
}

static void embed_forward(gpt_run_t *run, int side) {
    const layer_params_t *p = &run->lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, 0);
    use_add(&u, run->tokens, side ? W | S : W);
    use_add(&u, run->out[0], W | S);
    cpu_wait(run, 0);
    /* the encoder: wte and wpe rows in (bf16), fp32 out */
    layer_open(run, 0, UVMRT_PHASE_FORWARD, &u, 0, (uint64_t)run->N * run->C * 8);
    weights_ready(run, 0);
    if (run->compute) {
        gcheck(run, gpt_gpu_copy(run->gpu, ptr(run->tokens), run->tok_host,
                                 (5 * (size_t)run->N + 1) * sizeof(int)), 0);
        const uint16_t *wte = b16(p->wh), *wpe = wte + (size_t)run->Vp * run->C;
        kcheck(run, gpt_encoder_forward_launch(f32(run->out[0]), ptr(run->tokens), wte, wpe,
                                               run->B, run->T, run->C, run->stream),
               "encoder forward", 0);
    }
    layer_close(run, 0, UVMRT_PHASE_FORWARD);
}

static void embed_backward(gpt_run_t *run) {
    const layer_params_t *p = &run->lp[0];
    use_list_t u = {.n = 0};
    use_add(&u, run->tokens, R);
    use_add(&u, run->dres, R);
    use_add(&u, p->g, RW); /* the head wrote dwte; the embedding adds its rows */
    use_add(&u, run->gnorm, RW);
    /* the encoder's backward, then the sum of squares of all of dwte (fp32) */
    layer_open(run, 0, UVMRT_PHASE_BACKWARD, &u, 0, (uint64_t)run->N * run->C * 8 + 4 * p->n);
    if (run->compute) {
        int N = run->N;
        const int *tk = ptr(run->tokens);
        const int *rows = tk + 2 * N, *start = rows + N, *tok = start + N + 1;
        float *dwte = f32(p->g), *dwpe = dwte + (size_t)run->Vp * run->C;
        kcheck(run, gpt_encoder_backward_launch(dwte, dwpe, f32(run->dres), rows, start, tok,
                                                run->nbuckets, run->B, run->T, run->C,
                                                run->stream),
               "encoder backward", 0);
        double *parts = ptr(run->gnorm);
        /* dwpe rows beyond T stay 0 (zeroed at initialisation) */
        kcheck(run, gpt_sumsq_launch(dwte, p->n, parts, run->stream), "grad norm", 0);
        float *clip = (float *)(parts + (size_t)run->nl * GPT_SUMSQ_BLOCKS);
        kcheck(run, gpt_clip_finish_launch(parts, run->nl * GPT_SUMSQ_BLOCKS,
                                           (float)run->opt->grad_clip, clip, run->clip_host,
                                           run->stream),
               "clip", 0);
    }
    layer_close(run, 0, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the model: a block */

/* The block's forward arithmetic; the recompute inside its backward (with_out 0)
 * stops before the block's output, which the backward does not need. */
static void block_forward_math(gpt_run_t *run, int l, int with_out) {
    const layer_params_t *p = &run->lp[l];
    const block_acts_t *a = &run->acts[l - 1];
    int N = run->N, C = run->C;
    uvmrt_stream_t s = run->stream;
    const uint16_t *wh = b16(p->wh);
    const size_t *o = run->boff;
    const float *x = f32(run->out[l - 1]);
    float *ln1ms = f32(a->ln1_ms), *ln2ms = f32(a->ln2_ms);
    kcheck(run, gpt_layernorm_forward_launch(b16(a->ln1), ln1ms, ln1ms + N, x, wh + o[P_LN1W],
                                             wh + o[P_LN1B], N, C, s), "ln1", l);
    kcheck(run, gpt_bias_broadcast_launch(b16(a->qkv), wh + o[P_QKVB], N, 3 * C, s), "qkv bias", l);
    gcheck(run, gpt_mm_forward(run->gpu, ptr(a->qkv), 0, b16(a->ln1), wh + o[P_QKVW], N, C, 3 * C,
                               1.0f), l);
    kcheck(run, gpt_attention_forward_launch(b16(a->atty), f32(a->lse), b16(a->qkv), run->B,
                                             run->T, C, run->NH, s), "attention", l);
    kcheck(run, gpt_residual_bias_launch(f32(a->res2), x, wh + o[P_ATTPROJB], N, C, s),
           "residual", l);
    gcheck(run, gpt_mm_forward(run->gpu, ptr(a->res2), 1, b16(a->atty), wh + o[P_ATTPROJW], N, C,
                               C, 1.0f), l);
    kcheck(run, gpt_layernorm_forward_launch(b16(a->ln2), ln2ms, ln2ms + N, f32(a->res2),
                                             wh + o[P_LN2W], wh + o[P_LN2B], N, C, s), "ln2", l);
    kcheck(run, gpt_bias_broadcast_launch(b16(a->fch), wh + o[P_FCB], N, 4 * C, s), "fc bias", l);
    gcheck(run, gpt_mm_forward(run->gpu, ptr(a->fch), 0, b16(a->ln2), wh + o[P_FCW], N, C, 4 * C,
                               1.0f), l);
    kcheck(run, gpt_gelu_forward_launch(b16(a->fchg), b16(a->fch), (size_t)N * 4 * C, s), "gelu",
           l);
    if (!with_out)
        return;
    kcheck(run, gpt_residual_bias_launch(f32(run->out[l]), f32(a->res2), wh + o[P_FCPROJB], N, C,
                                         s), "residual", l);
    gcheck(run, gpt_mm_forward(run->gpu, ptr(run->out[l]), 1, b16(a->fchg), wh + o[P_FCPROJW], N,
                               4 * C, C, 1.0f), l);
}

static void block_forward(gpt_run_t *run, int l) {
    use_list_t u = {.n = 0};
    uses_weights(run, &u, l);
    use_add(&u, run->out[l - 1], R);
    uses_block_acts(&u, &run->acts[l - 1], W);
    use_add(&u, run->out[l], W);
    cpu_wait(run, l);
    layer_open(run, l, UVMRT_PHASE_FORWARD, &u, block_work_flops(run, 0),
               block_forward_bytes(run, 1));
    weights_ready(run, l);
    if (run->compute)
        block_forward_math(run, l, 1);
    layer_close(run, l, UVMRT_PHASE_FORWARD);
}

static void block_backward(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->lp[l];
    const block_acts_t *a = &run->acts[l - 1];
    int recompute = recomputes(run, l);
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->out[l - 1], R);
    uses_block_acts(&u, a, recompute ? W : R); /* recompute: written, then read */
    uvmrt_tensor_t *ws[] = {run->dres, run->dbf, run->d4, run->dln, run->dqkv, run->delta,
                            run->colsum};
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
        use_add(&u, ws[k], RW);
    /* A CPU block's g lives in host memory. Its matmuls would write it over the link
     * from their epilogues (slowly) and the grad norm would read it back: the block
     * makes its gradient in gdev on the GPU and streams it to g once, at the end. */
    int to_host = on_cpu(run, l); /* gdev exists: the run has blocks (has_gdev) */
    if (to_host)
        use_add(&u, run->gdev, W);
    use_add(&u, p->g, to_host ? W | S : W);
    use_add(&u, run->gnorm, RW);
    double flops = block_work_flops(run, 1) + (recompute ? block_work_flops(run, 0) : 0.0);
    layer_open(run, l, UVMRT_PHASE_BACKWARD, &u, flops, block_backward_bytes(run, l, recompute));
    if (run->compute) {
        int N = run->N, C = run->C;
        uvmrt_stream_t s = run->stream;
        const uint16_t *wh = b16(p->wh);
        float *g = f32(to_host ? run->gdev : p->g), *dres = f32(run->dres), *cs = f32(run->colsum);
        uint16_t *dbf = b16(run->dbf), *d4 = b16(run->d4), *dln = b16(run->dln);
        uint16_t *dqkv = b16(run->dqkv);
        const size_t *o = run->boff;
        const float *x = f32(run->out[l - 1]), *ln1ms = f32(a->ln1_ms), *ln2ms = f32(a->ln2_ms);
        if (recompute)
            block_forward_math(run, l, 0);
        /* out = res2 + fcproj(gelu(fc(ln2(res2)))): dres is d out */
        kcheck(run, gpt_f32_to_bf16_launch(dbf, dres, (size_t)N * C, s), "to bf16", l);
        kcheck(run, gpt_bias_grad_f32_launch(g + o[P_FCPROJB], cs, dres, N, C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_FCPROJW], dbf, b16(a->fchg), N, 4 * C, C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp(run->gpu, d4, dbf, wh + o[P_FCPROJW], N, 4 * C, C), l);
        kcheck(run, gpt_gelu_backward_launch(d4, b16(a->fch), (size_t)N * 4 * C, s), "gelu", l);
        kcheck(run, gpt_bias_grad_launch(g + o[P_FCB], cs, d4, N, 4 * C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_FCW], d4, b16(a->ln2), N, C, 4 * C, 0.0f), l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, d4, wh + o[P_FCW], N, C, 4 * C), l);
        kcheck(run, gpt_layernorm_backward_launch(dres, g + o[P_LN2W], g + o[P_LN2B], cs, dln,
                                                  f32(a->res2), wh + o[P_LN2W], ln2ms, ln2ms + N,
                                                  N, C, 1, s), "ln2 backward", l);
        /* res2 = x + attproj(attention(qkv(ln1(x)))): dres is now d res2 */
        kcheck(run, gpt_f32_to_bf16_launch(dbf, dres, (size_t)N * C, s), "to bf16", l);
        kcheck(run, gpt_bias_grad_f32_launch(g + o[P_ATTPROJB], cs, dres, N, C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_ATTPROJW], dbf, b16(a->atty), N, C, C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, dbf, wh + o[P_ATTPROJW], N, C, C), l);
        kcheck(run, gpt_attention_backward_launch(dqkv, f32(run->delta), dln, b16(a->atty),
                                                  b16(a->qkv), f32(a->lse), run->B, run->T, C,
                                                  run->NH, s), "attention backward", l);
        kcheck(run, gpt_bias_grad_launch(g + o[P_QKVB], cs, dqkv, N, 3 * C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_QKVW], dqkv, b16(a->ln1), N, C, 3 * C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, dqkv, wh + o[P_QKVW], N, C, 3 * C), l);
        kcheck(run, gpt_layernorm_backward_launch(dres, g + o[P_LN1W], g + o[P_LN1B], cs, dln, x,
                                                  wh + o[P_LN1W], ln1ms, ln1ms + N, N, C, 1, s),
               "ln1 backward", l);
        kcheck(run, gpt_sumsq_launch(g, p->n, (double *)ptr(run->gnorm) +
                                                  (size_t)l * GPT_SUMSQ_BLOCKS, s),
               "grad norm", l);
        if (to_host)
            kcheck(run, gpt_copy_f32_launch(f32(p->g), g, p->n, s), "gradient to the host", l);
    }
    layer_close(run, l, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the model: the head (final LayerNorm, tied classifier, loss) */

/* forward: lnf, then per chunk of rows: logits, cross-entropy (dlogits in place),
 * the chunk's dlnf and its share of dwte; the mean loss into *loss_dst (mapped) */
static void head_forward(gpt_run_t *run, double *loss_dst) {
    int hl = run->nl - 1;
    const layer_params_t *p = &run->lp[hl], *pe = &run->lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, hl);
    use_add(&u, pe->wh, R);
    use_add(&u, run->out[hl - 1], R);
    use_add(&u, run->lnf, W);
    use_add(&u, run->lnf_ms, W);
    use_add(&u, run->tokens, R);
    use_add(&u, run->logits, RW);
    use_add(&u, run->losses, W);
    use_add(&u, run->dln, W);
    use_add(&u, pe->g, W); /* dwte, written here first */
    cpu_wait(run, hl);
    /* lnf (14 N x C), then the cross-entropy reads and rewrites each chunk's bf16 logits */
    layer_open(run, hl, UVMRT_PHASE_FORWARD, &u, head_flops(run),
               (uint64_t)run->N * run->C * 14 + (uint64_t)run->N * run->Vp * 4);
    weights_ready(run, hl);
    if (run->compute) {
        int N = run->N, C = run->C, Vp = run->Vp;
        uvmrt_stream_t s = run->stream;
        const uint16_t *wh = b16(p->wh), *wte = b16(pe->wh);
        float *ms = f32(run->lnf_ms);
        uint16_t *lnf = b16(run->lnf), *logits = b16(run->logits), *dlnf = b16(run->dln);
        const int *tgt = (const int *)ptr(run->tokens) + N;
        kcheck(run, gpt_layernorm_forward_launch(lnf, ms, ms + N, f32(run->out[hl - 1]), wh,
                                                 wh + C, N, C, s), "lnf", hl);
        for (int r0 = 0; r0 < N; r0 += run->chunk) {
            int R = N - r0 < run->chunk ? N - r0 : run->chunk;
            gcheck(run, gpt_mm_forward(run->gpu, logits, 0, lnf + (size_t)r0 * C, wte, R, C, Vp,
                                       0.0f), hl);
            kcheck(run, gpt_crossentropy_launch(logits, f32(run->losses) + r0, tgt + r0, R, run->V,
                                                Vp, 1.0f / (float)N, s), "cross-entropy", hl);
            gcheck(run, gpt_mm_dinp(run->gpu, dlnf + (size_t)r0 * C, logits, wte, R, C, Vp), hl);
            gcheck(run, gpt_mm_dweight(run->gpu, f32(pe->g), logits, lnf + (size_t)r0 * C, R, C,
                                       Vp, r0 == 0 ? 0.0f : 1.0f), hl);
        }
        kcheck(run, gpt_loss_finish_launch(f32(run->losses), N, loss_dst, s), "loss",
               hl);
    }
    layer_close(run, hl, UVMRT_PHASE_FORWARD);
}

static void head_backward(gpt_run_t *run) {
    int hl = run->nl - 1;
    const layer_params_t *p = &run->lp[hl];
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->out[hl - 1], R);
    use_add(&u, run->lnf_ms, R);
    use_add(&u, run->dln, R);
    use_add(&u, run->dres, W | S);
    use_add(&u, run->colsum, RW);
    use_add(&u, p->g, W);
    use_add(&u, run->gnorm, RW);
    layer_open(run, hl, UVMRT_PHASE_BACKWARD, &u, 0, (uint64_t)run->N * run->C * 20);
    if (run->compute) {
        int N = run->N, C = run->C;
        const float *ms = f32(run->lnf_ms);
        float *g = f32(p->g);
        kcheck(run, gpt_layernorm_backward_launch(f32(run->dres), g, g + C, f32(run->colsum),
                                                  b16(run->dln), f32(run->out[hl - 1]), b16(p->wh),
                                                  ms, ms + N, N, C, 0, run->stream),
               "lnf backward", hl);
        kcheck(run, gpt_sumsq_launch(g, p->n, (double *)ptr(run->gnorm) +
                                                  (size_t)hl * GPT_SUMSQ_BLOCKS, run->stream),
               "grad norm", hl);
    }
    layer_close(run, hl, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the optimizer */

double gpt_lr_at(const gpt_options_t *o, int step) {
    if (step < o->warmup)
        return o->lr * (step + 1) / o->warmup;
    int span = o->c.steps - o->warmup;
    double frac = span > 1 ? (double)(step - o->warmup) / (span - 1) : 0.0;
    double lo = o->lr * o->lr_final_frac;
    return lo + 0.5 * (1.0 + cos(3.141592653589793 * frac)) * (o->lr - lo);
}

/* PyTorch's AdamW with GPT-2's betas (mlp_adamw_coef_make has the MLP's), for the GPU
 * kernel: the coefficients uvmrt_adamw_cpu derives from adamw_hp's, so both give the
 * same bits. */
static mlp_adamw_coef_t adamw_coef(double lr, double wd, long t) {
    /* grad_scale 1: the kernel replaces it by the clip factor */
    return uvmrt__adamw_coef_make(lr, ADAM_B1, ADAM_B2, ADAM_EPS, wd, (uint64_t)t, 1.0);
}

/* The same for the CPU optimizer thread (uvmrt_adamw_cpu): weight decay ADAM_WD on a
 * layer's decayed part, 0 on the rest; grad_scale is replaced by the clip factor. */
static uvmrt_adamw_t adamw_hp(double lr, long t) {
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    hp.lr = lr;
    hp.beta1 = ADAM_B1;
    hp.beta2 = ADAM_B2;
    hp.eps = ADAM_EPS;
    hp.weight_decay = ADAM_WD;
    hp.step = (uint64_t)t;
    hp.threads = mlp_cpu_threads();
    return hp;
}

static void optimizer(gpt_run_t *run, int l, const mlp_adamw_coef_t *cd,
                      const mlp_adamw_coef_t *cn) {
    const layer_params_t *p = &run->lp[l];
    use_list_t u = {.n = 0};
    use_add(&u, p->w, RW | S);
    use_add(&u, p->m, RW | S);
    use_add(&u, p->v, RW | S);
    use_add(&u, p->g, R | S);
    use_add(&u, p->wh, W | S);
    use_add(&u, run->gnorm, R);
    layer_open(run, l, UVMRT_PHASE_OPTIMIZER, &u, 0, (uint64_t)p->n * 30);
    if (run->compute) {
        const float *clip = (const float *)((double *)ptr(run->gnorm) +
                                            (size_t)run->nl * GPT_SUMSQ_BLOCKS);
        size_t nd = p->n_decay;
        if (nd > 0)
            kcheck(run, gpt_adamw_launch(f32(p->w), f32(p->m), f32(p->v), f32(p->g), b16(p->wh),
                                         nd, cd, clip, run->stream), "adamw", l);
        if (p->n > nd)
            kcheck(run, gpt_adamw_launch(f32(p->w) + nd, f32(p->m) + nd, f32(p->v) + nd,
                                         f32(p->g) + nd, b16(p->wh) + nd, p->n - nd, cn, clip,
                                         run->stream), "adamw", l);
    }
    layer_close(run, l, UVMRT_PHASE_OPTIMIZER);
}

/* Layer l's AdamW on the CPU thread, declared: no uses (the thread reads host memory,
 * not the GPU's), its own stream, 28 bytes of host memory per parameter (w, m, v read
 * and written, g read). sim: it takes that at the profile's host memory rate, sharing
 * host memory with the link's transfers; cuda: declared only (the thread does it). */
static void cpu_optimizer_declare(gpt_run_t *run, int l) {
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = l, .phase = UVMRT_PHASE_OPTIMIZER, .stream = run->cpu_stream,
        .no_default_uses = 1, .host_bytes = cli_adamw_host_bytes(run->profile, run->lp[l].n),
        .after = run->stream, /* the thread starts once the backward is done */
    };
    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, &call);
    if (st != UVMRT_OK && (run->fail_st = st) != UVMRT_OK)
        gpt_run_fail(run, "uvmrt_layer_begin(layer %d, optimizer on the CPU) failed: %s (%s)", l,
                 uvmrt_status_str(st), uvmrt_status_name(st));
    layer_close(run, l, UVMRT_PHASE_OPTIMIZER);
}

/* ----------------------------------------------------------------------------
 * inference: the head for sampling (logits of one row, no loss) */

static void head_sample(gpt_run_t *run, int row) {
    int hl = run->nl - 1;
    const layer_params_t *p = &run->lp[hl], *pe = &run->lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, hl);
    use_add(&u, pe->wh, R);
    use_add(&u, run->out[hl - 1], R);
    use_add(&u, run->lnf, W);
    use_add(&u, run->lnf_ms, W);
    use_add(&u, run->logits, W);
    cpu_wait(run, hl);
    layer_open(run, hl, UVMRT_PHASE_FORWARD, &u, 2.0 * run->C * (double)run->Vp, 0);
    weights_ready(run, hl);
    if (run->compute) {
        int N = run->N, C = run->C;
        const uint16_t *wh = b16(p->wh), *wte = b16(pe->wh);
        float *ms = f32(run->lnf_ms);
        uint16_t *lnf = b16(run->lnf);
        kcheck(run, gpt_layernorm_forward_launch(lnf, ms, ms + N, f32(run->out[hl - 1]), wh,
                                                 wh + C, N, C, run->stream), "lnf", hl);
        gcheck(run, gpt_mm_forward(run->gpu, ptr(run->logits), 0, lnf + (size_t)row * C, wte, 1,
                                   C, run->Vp, 0.0f), hl);
        /* copied out inside the call: the plan may drop the logits tensor after it (its
         * next use overwrites it), so the host must not read the managed memory later */
        gcheck(run, gpt_gpu_copy(run->gpu, run->logits_host, ptr(run->logits),
                                 (size_t)run->Vp * sizeof(uint16_t)), hl);
    }
    layer_close(run, hl, UVMRT_PHASE_FORWARD);
}

/* ----------------------------------------------------------------------------
 * the steps: training, validation, sampling; each one uvmrt step. A validation or
 * sampling step is a different sequence of layer calls: uvmrt runs it like demand
 * and records again, and the next training step records the training sequence
 * again (both marked as recording steps, left out of the medians). */

double gpt_step_flops(const gpt_run_t *run) { /* forward + backward, no recompute */
    return 3.0 * (run->L * block_forward_flops(run)) + head_flops(run);
}

static void uv_step_begin(gpt_run_t *run) { UV_CHECK(run, uvmrt_step_begin(run->ctx)); }

/* After a step: each CPU layer's AdamW time of the thread's previous step (done: this
 * step's forwards waited for it) goes to the runtime, which times that work by it in
 * the record and in a review's re-plan. */
static void host_work_report(gpt_run_t *run) {
    double sec;
    for (int l = 0; run->cpu && l < run->nl; l++)
        if (gpt_cpuopt_layer_time(run->cpu, l, run->cpu_last - 1, &sec)) {
            uvmrt_status_t st = uvmrt_host_work_measured(run->ctx, l, UVMRT_PHASE_OPTIMIZER,
                                                         (uint64_t)(sec * 1e9) + 1);
            if (st != UVMRT_OK && (run->fail_st = st) != UVMRT_OK)
                gpt_run_fail(run, "uvmrt_host_work_measured(layer %d) failed: %s (%s)", l,
                             uvmrt_status_str(st), uvmrt_status_name(st));
        }
}

static void uv_step_end(gpt_run_t *run) {
    UV_CHECK(run, uvmrt_step_end(run->ctx));
    run->uv_steps++;
}

static void forward(gpt_run_t *run, double *loss_dst, int side) {
    embed_forward(run, side);
    for (int l = 1; l <= run->L; l++)
        block_forward(run, l);
    head_forward(run, loss_dst);
}

/* A training step's layer calls (and, with compute, its work): forward, backward,
 * AdamW; the batch is in place. A rehearsal runs these on uvmrt's model. */
void gpt_step_calls(gpt_run_t *run, int s, double lr) {
    const gpt_options_t *opt = run->opt;
    uv_step_begin(run);
    forward(run, run->loss_host ? &run->loss_host[s] : NULL, 0);
    head_backward(run);
    for (int l = run->L; l >= 1; l--)
        block_backward(run, l);
    embed_backward(run);
    mlp_adamw_coef_t cd = adamw_coef(lr, ADAM_WD, run->adam_t + 1);
    mlp_adamw_coef_t cn = adamw_coef(lr, 0.0, run->adam_t + 1);
    if (s == run->first && opt->dump_grads && run->compute) {
        gcheck(run, gpt_gpu_sync(run->gpu), -1);
        weights_dump(run, opt->dump_grads, 1);
    }
    if (run->cpu) { /* first: the thread starts on it while the GPU updates its layers */
        uvmrt_adamw_t hp = adamw_hp(lr, run->adam_t + 1);
        gcheck(run, gpt_cpuopt_submit(run->cpu, run->gpu, run->cpu_last + 1, &hp), -1);
        run->cpu_last++;
    }
    for (int l = 0; l < run->nl; l++)
        if (on_cpu(run, l))
            cpu_optimizer_declare(run, l);
    for (int l = 0; l < run->nl; l++)
        if (!on_cpu(run, l))
            optimizer(run, l, &cd, &cn);
    uv_step_end(run);
    run->adam_t++;
    host_work_report(run);
}

/* One training step: batch, then its calls. */
static void train_step(gpt_run_t *run, int s, double lr) {
    tokens_prepare(run, s);
    gpt_step_calls(run, s, lr);
}

/* The validation loss after training step s: val_n batches from the start of the
 * validation data, forward only (the gradients it writes are rewritten by the next
 * step's head before anything reads them). */
static void validate(gpt_run_t *run, int s) {
    char err[512];
    if (gpt_data_rewind(run->val, err, sizeof err) != 0)
        gpt_run_fail(run, "validation data: %s", err);
    double sum = 0.0;
    double t0 = cli_now_s();
    for (int k = 0; k < run->val_n; k++) {
        int *inp = run->tok_host, *tgt = inp + run->N;
        if (gpt_data_next(run->val, (int32_t *)inp, (int32_t *)tgt, err, sizeof err) != 0)
            gpt_run_fail(run, "validation data, batch %d: %s", k + 1, err);
        tokens_index(run);
        double *dst = run->loss_host ? &run->loss_host[run->opt->c.steps + k] : NULL;
        uv_step_begin(run);
        forward(run, dst, 1);
        uv_step_end(run); /* waits for the stream: *dst is written */
        if (dst)
            sum += *dst;
    }
    run->side_step = 1;
    double loss = sum / run->val_n;
    run->val_step[run->n_val] = s + 1;
    run->val_loss[run->n_val] = loss;
    run->n_val++;
    if (run->compute)
        printf("val step %d: loss %.6f (%d batches of %d x %d, %.1f s)\n", s + 1, loss,
               run->val_n, run->B, run->T, cli_now_s() - t0);
    else
        printf("val step %d: loss - (sim: %d forward-only batches, no arithmetic)\n", s + 1,
               run->val_n);
    fflush(stdout);
}

/* The next token from the logits of one row (V of them): the largest (greedy), or
 * one of the top_k drawn by their softmax. */
static int sample_pick(gpt_run_t *run, const uint16_t *logits) {
    int V = run->V, k = run->opt->top_k;
    if (k <= 1) {
        int best = 0;
        for (int v = 1; v < V; v++)
            if (mlp_bf16_to_f32(logits[v]) > mlp_bf16_to_f32(logits[best]))
                best = v;
        return best;
    }
    /* the k largest by insertion into a sorted list (k is small next to V) */
    int *top = malloc((size_t)k * sizeof *top);
    float *val = malloc((size_t)k * sizeof *val);
    double *p = malloc((size_t)k * sizeof *p);
    if (!top || !val || !p)
        gpt_run_fail(run, "out of host memory");
    int n = 0;
    for (int v = 0; v < V; v++) {
        float x = mlp_bf16_to_f32(logits[v]);
        if (n == k && !(x > val[n - 1]))
            continue;
        int i = n < k ? n++ : k - 1;
        while (i > 0 && val[i - 1] < x) {
            val[i] = val[i - 1], top[i] = top[i - 1];
            i--;
        }
        val[i] = x, top[i] = v;
    }
    double z = 0.0;
    for (int i = 0; i < n; i++)
        z += p[i] = exp((double)val[i] - (double)val[0]);
    run->rng = mlp_splitmix64(run->rng);
    double u = (double)(run->rng >> 11) * (1.0 / 9007199254740992.0) * z;
    int pick = top[n - 1];
    for (int i = 0; i < n; i++)
        if ((u -= p[i]) < 0) {
            pick = top[i];
            break;
        }
    free(top), free(val), free(p);
    return pick;
}

static void sample_print(const gpt_run_t *run, const int *seq, int n, int from) {
    for (int i = 0; i < n; i++) {
        if (i == from)
            fputs(run->opt->source == GPT_SRC_TEXT ? "" : "| ", stdout);
        if (run->opt->source == GPT_SRC_TEXT) {
            int c = seq[i];
            putchar(c == '\n' || c == '\t' || (c >= 32 && c != 127) ? c : '?');
        } else {
            printf("%d ", seq[i]);
        }
    }
    putchar('\n');
}

/* --sample N after training step s: each token one forward of the context window
 * (its last T tokens in row 0 of the batch; the causal mask keeps the padding after
 * it out of the row's logits), the next token chosen on the host. */
static void sample_run(gpt_run_t *run, int s) {
    const gpt_options_t *opt = run->opt;
    if (!run->compute) {
        printf("sample after step %d: sampling needs a GPU (the sim backend does no "
               "arithmetic); skipped\n", s + 1);
        return;
    }
    int n = opt->sample, len = run->prompt_len, T = run->T;
    int *seq = malloc((size_t)(len + n) * sizeof *seq);
    if (seq == NULL)
        gpt_run_fail(run, "out of host memory");
    memcpy(seq, run->prompt, (size_t)len * sizeof *seq);
    double t0 = cli_now_s();
    for (int i = 0; i < n; i++, len++) {
        int w0 = len > T ? len - T : 0, wl = len - w0;
        memset(run->tok_host, 0, (5 * (size_t)run->N + 1) * sizeof(int));
        memcpy(run->tok_host, seq + w0, (size_t)wl * sizeof *seq);
        tokens_index(run);
        uv_step_begin(run);
        /* after a validation pass this follows its plan up to the head, which reads a
         * subset of what validation's head reads: nothing it needs was dropped */
        embed_forward(run, 1);
        for (int l = 1; l <= run->L; l++)
            block_forward(run, l);
        head_sample(run, wl - 1);
        uv_step_end(run); /* waits for the stream: logits_host is written */
        seq[len] = sample_pick(run, run->logits_host);
    }
    run->side_step = 1;
    printf("sample after step %d (%s, %d tokens, %.1f s):\n", s + 1,
           opt->top_k > 1 ? "top-k" : "greedy", n, cli_now_s() - t0);
    sample_print(run, seq, len, run->prompt_len);
    fflush(stdout);
    free(seq);
}

/* ----------------------------------------------------------------------------
 * the training loop */

/* SIGTERM or SIGINT with --checkpoint: the signal number. The step under way
 * finishes, is saved and the run stops; a second signal kills (SA_RESETHAND). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void stop_signals_install(void) {
    static const int sigs[] = {SIGTERM, SIGINT};
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_stop_signal;
        sa.sa_flags = SA_RESETHAND | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        /* one ignored at start (nohup, a shell's background job) stays ignored */
        if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(sigs[k], &sa, NULL);
    }
}

static void run_steps(gpt_run_t *run, FILE *loss_log) {
    const gpt_options_t *opt = run->opt;
    double flops = gpt_step_flops(run), peak = run->profile ? run->profile->flops : 0.0;
    if (!(peak > 0))
        peak = 790e12;
    double t_start = cli_now_s();
    int saved = -1;
    for (int s = run->first; s < run->stop; s++) {
        double lr = gpt_lr_at(opt, s);
        run->recording[s] = s == run->first || run->side_step;
        run->side_step = 0;
        train_step(run, s, lr);

        if (run->compute) {
            run->losses_out[s] = run->loss_host[s]; /* step_end waited for the stream */
            run->norms[s] = run->clip_host[0];
        }
        uvmrt_step_stats_t *st = &run->stats[s];
        st->struct_size = sizeof *st;
        UV_CHECK(run, uvmrt_step_stats_get(run->ctx, run->uv_steps - 1, st));
        double ms = (double)st->step_ns / 1e6;
        double in = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
        double out = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
        double tflops = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
        int done = s + 1 - run->first;
        double elapsed = cli_now_s() - t_start, eta = elapsed / done * (run->stop - s - 1);
        char loss_text[48] = "-";
        if (run->compute)
            snprintf(loss_text, sizeof loss_text, "%.6f  norm %.3f", run->losses_out[s],
                     run->norms[s]);
        printf("step %d/%d  loss %s  lr %.3g  %.1f ms  %.0f tokens/s  %.1f TFLOP/s  MFU %.1f%%  "
               "in %.2f GB  out %.2f GB  faults %" PRIu64 "  ETA %.0f s%s\n",
               s + 1, opt->c.steps, loss_text, lr, ms, ms > 0 ? run->N / (ms * 1e-3) : 0.0,
               tflops, 100.0 * tflops * 1e12 / peak, in, out, st->fault_count, eta,
               run->recording[s] ? "  (recording step)" : "");
        fflush(stdout);
        if (loss_log)
            fprintf(loss_log, "%d %a\n", s + 1, run->compute ? run->losses_out[s] : 0.0);
        gpt_choice_review(run, s);

        int last = s + 1 == run->stop;
        if (run->val && ((opt->val_every && (s + 1) % opt->val_every == 0) || last))
            validate(run, s);
        if (opt->sample && ((opt->sample_every && (s + 1) % opt->sample_every == 0) || last))
            sample_run(run, s);
        if (opt->ckpt_dir && ((opt->ckpt_every && (s + 1) % opt->ckpt_every == 0) || last) &&
            saved != s) {
            gpt_run_ckpt_save(run, s);
            saved = s;
        }
        if (stop_signal) { /* a preempted job: what is done is saved, --resume goes on */
            if (saved != s)
                gpt_run_ckpt_save(run, s);
            printf("stopped by signal %d after step %d of %d: --resume continues from %s\n",
                   (int)stop_signal, s + 1, opt->c.steps, run->ckpt_last);
            run->stop = s + 1;
            break;
        }
    }
    gpt_cpu_drain(run); /* the last step's updates */
}

/* ----------------------------------------------------------------------------
 * setup, results, main */

static uvmrt_context_t *context_open(gpt_options_t *opt) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    cli_params_apply(&opt->c, &params);
    cli_backend_choice_t choice = {gpt_gpu_built(), PROG " was built without CUDA and cuBLAS",
                                   opt->c.backend_explicit, FALLBACK_PROFILE, NULL, NULL};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    opt->c.backend = params.backend;
    opt->c.profile = params.profile;
    return ctx;
}

/* The training data and the validation data, and the sampling prompt. */
static void data_open(gpt_run_t *run) {
    const gpt_options_t *o = run->opt;
    char err[1024];
    if (o->source == GPT_SRC_DATA || o->source == GPT_SRC_TEXT) {
        int text = o->source == GPT_SRC_TEXT;
        gpt_data_config_t cfg = {text ? NULL : o->data_pattern, text ? o->text_path : NULL,
                                 text ? GPT_DATA_TRAIN : GPT_DATA_ALL, run->B, run->T,
                                 o->c.seed, 1, run->V};
        if (gpt_data_open(&run->train, &cfg, err, sizeof err) != 0)
            gpt_run_fail(run, "training data: %s", err);
        if (text || o->val_pattern) {
            cfg.pattern = text ? NULL : o->val_pattern;
            cfg.split = text ? GPT_DATA_VAL : GPT_DATA_ALL;
            cfg.shuffle = 0;
            glob_t g; /* data.h names the pattern's flag --data: say --val here */
            if (!text && glob(o->val_pattern, 0, NULL, &g) != 0)
                gpt_run_fail(run, "validation data: --val %s: no file matches", o->val_pattern);
            if (!text)
                globfree(&g);
            if (gpt_data_open(&run->val, &cfg, err, sizeof err) != 0)
                gpt_run_fail(run, "validation data (%s): %s",
                         text ? "--text, the last 10%" : "--val", err);
            uint64_t nb = gpt_data_batches_per_epoch(run->val);
            run->val_n = (uint64_t)o->val_batches < nb ? o->val_batches : (int)nb;
        }
        printf("data: %s %s: %d shard(s), %" PRIu64 " training tokens, %" PRIu64
               " batches per epoch",
               text ? "text" : "token shards", text ? o->text_path : o->data_pattern,
               gpt_data_shards(run->train), gpt_data_tokens(run->train),
               gpt_data_batches_per_epoch(run->train));
        if (run->val)
            printf("; validation %" PRIu64 " tokens, %d batches per pass",
                   gpt_data_tokens(run->val), run->val_n);
        printf("\n");
    }
    /* the prompt: --prompt's bytes, else the first tokens of the validation data (or
     * the training data, or the synthetic stream) */
    if (o->sample == 0)
        return;
    int want = run->T < 16 ? run->T : 16;
    if (o->prompt)
        want = (int)strlen(o->prompt);
    run->prompt = calloc((size_t)want + (size_t)run->N, sizeof *run->prompt);
    int *inp = calloc(2 * (size_t)run->N, sizeof *inp);
    if (!run->prompt || !inp)
        gpt_run_fail(run, "out of host memory");
    if (o->prompt) {
        for (int i = 0; i < want; i++)
            run->prompt[i] = (unsigned char)o->prompt[i];
    } else {
        gpt_data_t *d = run->val ? run->val : run->train;
        if (d) {
            gpt_data_pos_t pos;
            gpt_data_tell(d, &pos);
            if (gpt_data_rewind(d, err, sizeof err) != 0 ||
                gpt_data_next(d, (int32_t *)inp, (int32_t *)inp + run->N, err, sizeof err) != 0 ||
                gpt_data_seek(d, &pos, err, sizeof err) != 0)
                gpt_run_fail(run, "the sampling prompt: %s", err);
        } else if (o->source == GPT_SRC_CYCLE) {
            gpt_tokens_cycle(inp, inp + run->N, run->B, run->T, run->V, o->c.seed, 0);
        } else {
            gpt_tokens_random(inp, inp + run->N, run->B, run->T, run->V, o->c.seed, 0);
        }
        memcpy(run->prompt, inp, (size_t)want * sizeof *inp);
    }
    free(inp);
    run->prompt_len = want;
}

static void run_open_gpu(gpt_run_t *run) {
    char err[256];
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    gcheck(run, gpt_gpu_mem_info(&free_b, &total_b, &dev), -1);
    uint64_t need = gpt_planned_managed_bytes(run) + (64ull << 20);
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    run->gpu_room = room;
    if (need > room)
        gpt_run_fail(run, "refusing to allocate %.2f GiB on GPU %d: it has %.2f GiB free and %.0f GiB "
                      "must stay free; use a smaller --depth, --batch or --seq, or --recompute "
                      "all; --budget emulates a smaller GPU",
                 (double)need / GIB, dev, (double)free_b / GIB, (double)GPU_SAFETY_BYTES / GIB);
    if (run->C != run->NH * GPT_HEAD_SIZE)
        gpt_run_fail(run, "the GPU kernels take head size %d: --channels %d / --heads %d is %d",
                 GPT_HEAD_SIZE, run->C, run->NH, run->C / run->NH);
    if (!run->opt->c.quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB, (double)need / GIB);
    run->gpu = gpt_gpu_open(err, sizeof err);
    if (run->gpu == NULL)
        gpt_run_fail(run, "GPU setup: %s", err);
    run->stream = gpt_gpu_stream(run->gpu);
    run->cpu_stream = gpt_gpu_cpu_stream(run->gpu);
    run->device_bytes = gpt_gpu_device_bytes(run->gpu);
    run->tok_host = gpt_gpu_host_alloc((5 * (size_t)run->N + 1) * sizeof(int));
    /* steps' losses, then one per validation batch */
    run->loss_host = gpt_gpu_host_alloc(((size_t)run->opt->c.steps + (size_t)run->val_n + 1) *
                                        sizeof(double));
    run->clip_host = gpt_gpu_host_alloc(4 * sizeof(float));
    if (run->opt->sample)
        run->logits_host = gpt_gpu_host_alloc((size_t)run->Vp * sizeof(uint16_t));
    if (!run->tok_host || !run->loss_host || !run->clip_host ||
        (run->opt->sample && !run->logits_host))
        gpt_run_fail(run, "cannot allocate pinned host memory");
}

/* The CPU optimizer thread for the top cpu_layers layers (none when 0). */
void gpt_cpu_opt_open(gpt_run_t *run) {
    char err[256];
    if (run->cpu_layers == 0)
        return;
    gpt_cpuopt_layer_t *ls = calloc((size_t)run->nl, sizeof *ls);
    if (ls == NULL)
        gpt_run_fail(run, "out of host memory");
    int n = 0;
    for (int l = run->nl - run->cpu_layers; l < run->nl; l++) {
        const layer_params_t *p = &run->lp[l];
        ls[n++] = (gpt_cpuopt_layer_t){l, f32(p->w), f32(p->m), f32(p->v), f32(p->g),
                                       b16(p->wh), p->n, p->n_decay};
    }
    run->cpu = gpt_cpuopt_start(run->nl, n, ls, run->clip_host, err, sizeof err);
    run->cpu_last = -1; /* a new thread counts its steps from 0 */
    free(ls);
    if (run->cpu == NULL)
        gpt_run_fail(run, "CPU optimizer: %s", err);
    if (!run->opt->c.quiet)
        printf("  cpu optimizer: AdamW of %d of %d layers, path %s\n", n, run->nl,
               mlp_isa_name(run->isa));
}

static void run_close(gpt_run_t *run) {
    run->cpu_busy_s += gpt_cpuopt_busy_s(run->cpu);
    gpt_cpuopt_stop(run->cpu);
    run->cpu = NULL;
    uvmrt_context_destroy(run->ctx); /* first: it may still refer to our stream */
    run->ctx = NULL;
    if (run->gpu) {
        gpt_gpu_host_free(run->tok_host);
        gpt_gpu_host_free(run->loss_host);
        gpt_gpu_host_free(run->clip_host);
        gpt_gpu_host_free(run->logits_host);
    } else {
        free(run->tok_host);
    }
    run->tok_host = NULL, run->loss_host = NULL, run->clip_host = NULL, run->logits_host = NULL;
    gpt_gpu_close(run->gpu);
    run->gpu = NULL;
    gpt_data_close(run->train);
    gpt_data_close(run->val);
    run->train = run->val = NULL;
    free(run->lp);
    free(run->out);
    free(run->acts);
    free(run->prompt);
    run->lp = NULL, run->out = NULL, run->acts = NULL, run->prompt = NULL;
}

int main(int argc, char **argv) {
    cli_program = PROG;
    gpt_options_t opt;
    gpt_options_parse(argc, argv, &opt);
    cli_outputs_check(&opt.c); /* an output that cannot be written fails now, not after the steps */
    cli_output_check("--dump-weights", opt.dump_weights);
    cli_output_check("--dump-grads", opt.dump_grads);
    cli_note_env_overrides();

    gpt_run_t run = {.opt = &opt, .cpu_last = -1, .knob_cpu = -1, .knob_rec = -1,
                     .cpu_stream = (uvmrt_stream_t)&gpt_sim_cpu_stream,
                     .stream = (uvmrt_stream_t)&gpt_sim_gpu_stream};
    gpt_shape_init(&run);
    size_t S = (size_t)opt.c.steps;
    run.losses_out = calloc(S, sizeof *run.losses_out);
    run.norms = calloc(S, sizeof *run.norms);
    run.stats = calloc(S, sizeof *run.stats);
    run.recording = calloc(S, 1);
    run.val_step = calloc(S, sizeof *run.val_step);
    run.val_loss = calloc(S, sizeof *run.val_loss);
    if (!run.losses_out || !run.norms || !run.stats || !run.recording || !run.val_step ||
        !run.val_loss) {
        fprintf(stderr, PROG ": out of host memory\n");
        gpt_steps_free(&run);
        return 1;
    }
    run.isa = mlp_isa_best();
    run.rng = mlp_splitmix64(opt.c.seed ^ 0x5a3d1e0full);
    run.stop = opt.stop_at;
    gpt_shape_t shape = {run.V, run.Vp, run.maxT, run.L, run.C, run.NH};
    double params = (double)gpt_num_params(&shape);
    char cpu_text[32] = "auto", rec_text[32] = "auto";
    if (opt.cpu_layers != GPT_AUTO)
        snprintf(cpu_text, sizeof cpu_text, "%d", opt.cpu_layers);
    if (opt.recompute != GPT_AUTO)
        snprintf(rec_text, sizeof rec_text, "%d", opt.recompute);
    printf(PROG ": GPT-2 %d layers, %d channels, %d heads, vocab %d (padded %d), %.1f M "
           "parameters; batch %d x %d tokens; AdamW on the CPU: top %s of %d layers; "
           "recompute: %s of %d blocks; %d steps, lr %g, seed %" PRIu64 "; tokens: %s\n",
           run.L, run.C, run.NH, run.V, run.Vp, params / 1e6, run.B, run.T, cpu_text, run.nl,
           rec_text, run.L, opt.c.steps, opt.lr, opt.c.seed, gpt_source_name(opt.source));

    gpt_run_ckpt_start(&run); /* --checkpoint DIR usable, and this run's to write */
    data_open(&run); /* before the context: a bad file costs no GPU setup */
    run.ctx = context_open(&opt);
    run.backend = uvmrt_context_backend(run.ctx);
    run.policy = uvmrt_context_policy(run.ctx);
    run.profile = uvmrt_context_profile(run.ctx);
    gpt_choose_auto(&run); /* before the tensors: they depend on the values */
    printf("policy %s on %s%s%s, budget %.2f GiB, tensors %.2f GiB\n",
           uvmrt_policy_name(run.policy), uvmrt_backend_name(run.backend),
           run.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.backend == UVMRT_BACKEND_SIM && run.profile ? run.profile->name : "",
           (double)uvmrt_context_budget(run.ctx) / GIB, (double)gpt_planned_managed_bytes(&run) / GIB);
    if (!opt.c.quiet) {
        uvmrt_context_print_config(run.ctx, stdout);
        fflush(stdout);
    }
    if (run.backend == UVMRT_BACKEND_CUDA) {
        if (!gpt_gpu_built())
            gpt_run_fail(&run, "UVMRT_BACKEND selected the cuda backend, but " PROG
                           " was built without CUDA and cuBLAS");
        run_open_gpu(&run);
        run.compute = 1;
    } else {
        printf("sim backend: the schedule only, no arithmetic (no losses); times and traffic "
               "are the model's\n");
        if (opt.dump_weights || opt.dump_grads || opt.init_weights)
            fprintf(stderr, PROG ": note: --dump-weights, --dump-grads and --init-weights need "
                            "the GPU; ignored on sim\n");
        /* the batches are still read (bad data fails the same way) */
        run.tok_host = calloc(5 * (size_t)run.N + 1, sizeof *run.tok_host);
        if (run.tok_host == NULL)
            gpt_run_fail(&run, "out of host memory");
    }
    gpt_net_alloc(&run);
    if (run.compute) {
        if (opt.init_weights)
            weights_load(&run, opt.init_weights);
        else
            weights_init(&run);
        if (opt.dump_weights)
            weights_dump(&run, opt.dump_weights, 0);
    }
    if (opt.resume)
        gpt_run_ckpt_resume(&run); /* after the initialisation, which it overwrites */
    if (run.compute)
        gpt_cpu_opt_open(&run);
    if (run.first >= run.stop) {
        printf("nothing to train: the checkpoint is at step %d and the run ends at step %d\n",
               run.first, run.stop);
        unsigned long errors = cli_library_errors();
        run_close(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
        gpt_steps_free(&run);
        return cli_stdout_close(cli_context_outputs_failed(errors, NULL));
    }

    FILE *loss_log = NULL;
    if (opt.c.loss_log && (loss_log = cli_output_open("--loss-log", opt.c.loss_log)) == NULL)
        gpt_run_fail(&run, "no step was run: --loss-log must be writable");
    if (opt.ckpt_dir)
        stop_signals_install();
    run_steps(&run, loss_log);
    int status = stop_signal ? 128 + (int)stop_signal : 0; /* the shell's code for it */
    if (loss_log && cli_output_close("--loss-log", opt.c.loss_log, loss_log) != 0)
        status = 1;

    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    UV_CHECK(&run, uvmrt_summary_get(run.ctx, &sum));
    medians_t m = gpt_run_medians(&run);
    if (gpt_outputs_write(&run, &m, &sum) != 0)
        status = 1;
    double tflops = m.ms > 0 ? gpt_step_flops(&run) / (m.ms * 1e-3) / 1e12 : 0.0;
    printf("summary: %.1f ms/step, %.0f tokens/s, %.1f TFLOP/s, in %.2f GB, out %.2f GB, faults "
           "%.0f per step (medians of %d steps of %d..%d, recording steps left out); peak "
           "resident %.2f GiB + %.2f GiB device workspace; budget %.2f GiB",
           m.ms, m.ms > 0 ? run.N / (m.ms * 1e-3) : 0.0, tflops, m.in_gb, m.out_gb, m.faults,
           m.n, run.first + 1, run.stop, (double)sum.peak_resident_bytes / GIB,
           (double)run.device_bytes / GIB, (double)sum.budget_bytes / GIB);
    printf("; AdamW of %d of %d layers on the CPU, %d of %d blocks recompute", run.cpu_layers,
           run.nl, run.recompute, run.L);
    if (run.compute)
        printf("; loss %.6f -> %.6f", run.losses_out[run.first], run.losses_out[run.stop - 1]);
    if (run.n_val && run.compute)
        printf("; val loss %.6f", run.val_loss[run.n_val - 1]);
    printf("\n");
    if (run.compute && (run.cpu || run.cpu_busy_s > 0))
        printf("cpu optimizer: %.1f ms of AdamW per step (path %s)\n",
               (run.cpu_busy_s + gpt_cpuopt_busy_s(run.cpu)) * 1e3 / (run.stop - run.first),
               mlp_isa_name(run.isa));
    if (run.compute)
        for (int s = run.first; s < run.stop; s++)
            if (!isfinite(run.losses_out[s])) {
                fprintf(stderr, PROG ": loss of step %d is not finite\n", s + 1);
                status = 1;
                break;
            }
    unsigned long errors = cli_library_errors();
    run_close(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
    if (cli_context_outputs_failed(errors, &sum))
        status = 1;
    gpt_steps_free(&run);
    return cli_stdout_close(status);
}
