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
 * block; --recompute all keeps only each block's output and recomputes the block's
 * forward inside its backward. Every layer's forward, backward and optimizer work
 * is one uvmrt layer call naming each tensor it uses.
 *
 * The classifier never holds B*T*V logits: rows go through in chunks (bf16 logits
 * of one chunk; the cross-entropy kernel turns them into dlogits in place, then
 * the chunk's dlnf and dwte are made), inside the head's forward call.
 *
 * Without a GPU it runs the same schedule on uvmrt's sim backend (no arithmetic,
 * durations from the declared FLOPs) and says so.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uvmrt.h"
#include "../common/cli.h"

#include "../mlp/adamw_cpu.h"
#include "gpt_cpuopt.h"
#include "gpt_flags.h"
#include "gpt_gpu.h"
#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "gpt_tokens.h"
#include "../mlp/mlp_math.h"

#define PROG GPT_PROG

static const double GIB = 1024.0 * 1024.0 * 1024.0;
static const double GB = 1e9;
static const char *FALLBACK_PROFILE = "h200";
/* kept free on the GPU beyond our allocations: real oversubscription can hang it */
static const uint64_t GPU_SAFETY_BYTES = 4ull << 30;
static const int DUMP_MAGIC = 20241201;
static const double ADAM_B1 = 0.9, ADAM_B2 = 0.95, ADAM_EPS = 1e-8, ADAM_WD = 0.1;
static const int CHUNK_ROWS = 2048; /* classifier rows per chunk */

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

/* A block's saved activations (with --recompute all: one shared set). */
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

typedef struct gpt_run {
    const gpt_options_t *opt;
    uvmrt_context_t *ctx;
    uvmrt_backend_kind_t backend;
    uvmrt_policy_t policy;
    const uvmrt_profile_t *profile;
    int compute;              /* 1: the GPU does the arithmetic */
    gpt_gpu_t *gpu;
    uvmrt_stream_t stream;
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
    uvmrt_tensor_t *logits;   /* (CHUNK_ROWS, Vp) bf16 */
    uvmrt_tensor_t *gnorm;    /* (nl, GPT_SUMSQ_BLOCKS) double partials, then float clip */
    block_acts_t shared_acts; /* --recompute all */
    int chunk;                /* classifier rows per chunk */
    uint64_t managed_bytes;
    uint64_t device_bytes;
    int *tok_host;            /* pinned (5N+1) */
    int nbuckets;
    double *loss_host;        /* mapped (steps) */
    float *clip_host;         /* mapped {norm, clip} */
    gpt_cpuopt_t *cpu;
    mlp_isa_t isa;
    double *losses_out;       /* (steps) */
    float *norms;             /* (steps) */
    uvmrt_step_stats_t *stats;
    long adam_t;
} gpt_run_t;

static void run_close(gpt_run_t *run);
static void run_close_cb(void *run) { run_close(run); }
#define run_fail(run, ...) cli_fail(run_close_cb, (run), __VA_ARGS__)

static inline void *ptr(uvmrt_tensor_t *t) { return t ? uvmrt_tensor_ptr(t) : NULL; }
static inline float *f32(uvmrt_tensor_t *t) { return (float *)ptr(t); }
static inline uint16_t *b16(uvmrt_tensor_t *t) { return (uint16_t *)ptr(t); }

static void kcheck(gpt_run_t *run, int err, const char *what, int layer) {
    if (err != 0)
        run_fail(run, "%s kernel of layer %d: launch failed: %s", what, layer,
                 gpt_gpu_error_text(err));
}

static void gcheck(gpt_run_t *run, const char *why, int layer) {
    if (why != NULL)
        run_fail(run, "layer %d: %s", layer, why);
}

static uint64_t footprint(uint64_t bytes) {
    uint64_t blk = 2ull << 20;
    return bytes >= (1ull << 20) ? (bytes + blk - 1) / blk * blk : bytes;
}

/* ----------------------------------------------------------------------------
 * shapes and allocation: descriptors first (planned bytes), then one
 * uvmrt_tensors_alloc per layer and one for the shared workspace */

static void shape_init(gpt_run_t *run) {
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
        if (!run->opt->recompute)
            block_acts_descs(run, s, layer, layer);
    }
}

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
    if (run->opt->recompute)
        block_acts_descs(run, s, -1, 0);
}

static uint64_t planned_managed_bytes(const gpt_run_t *run) {
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

static void acts_from(block_acts_t *a, uvmrt_tensor_t **t) {
    *a = (block_acts_t){t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
}

static void net_alloc(gpt_run_t *run) {
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
            run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", name, id, l);
    }
    run->lp = calloc((size_t)run->nl, sizeof *run->lp);
    run->out = calloc((size_t)run->nl, sizeof *run->out);
    run->acts = calloc((size_t)run->L + 1, sizeof *run->acts);
    if (!run->lp || !run->out || !run->acts)
        run_fail(run, "out of host memory");
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
            if (!run->opt->recompute)
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
    if (run->opt->recompute) {
        acts_from(&run->shared_acts, t + 9);
        for (int l = 0; l < run->L; l++)
            run->acts[l] = run->shared_acts;
    }
    if (run->opt->optimizer_cpu) /* the CPU's data lives on the host; the GPU writes g there */
        for (int l = 0; l < run->nl; l++) {
            uvmrt_tensor_t *h[4] = {run->lp[l].w, run->lp[l].m, run->lp[l].v, run->lp[l].g};
            for (int k = 0; k < 4; k++)
                UV_CHECK(run, uvmrt_tensor_set_placement(run->ctx, h[k], UVMRT_PLACE_HOST));
        }
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

static void weights_init(gpt_run_t *run) {
    uint64_t seed = run->opt->seed;
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
    for (int l = 0; l < run->nl; l++) {
        const layer_params_t *p = &run->lp[l];
        float *w = f32(p->w), *m = f32(p->m), *v = f32(p->v), *g = f32(p->g);
        uint16_t *wh = b16(p->wh);
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < p->n; k++) {
            wh[k] = mlp_f32_to_bf16(w[k]);
            m[k] = v[k] = g[k] = 0.0f; /* g: wpe rows beyond T never get a gradient */
        }
    }
    if (!run->opt->quiet)
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
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        run_fail(run, "cannot write %s: %s", path, strerror(errno));
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
    if (fclose(f) != 0 || !ok)
        run_fail(run, "writing %s failed: %s", path, strerror(errno));
    if (!run->opt->quiet)
        printf("  wrote %s to %s\n", which ? "step 1's gradients" : "the weights", path);
}

static void weights_load(gpt_run_t *run, const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        run_fail(run, "cannot read --init-weights %s: %s", path, strerror(errno));
    int32_t h[256], want[256];
    header_make(run, want);
    if (fread(h, sizeof h, 1, f) != 1) {
        fclose(f);
        run_fail(run, "--init-weights %s: shorter than its 1024-byte header", path);
    }
    static const char *const field[8] = {"magic", "version", "maxT", "V", "L", "C", "NH", "Vp"};
    for (int k = 0; k < 8; k++)
        if (h[k] != want[k]) {
            fclose(f);
            run_fail(run, "--init-weights %s: header %s is %d, expected %d (this model: "
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
                run_fail(run, "--init-weights %s: truncated in tensor %s (block %d)", path,
                         gpt_param_names[t], l);
            }
        }
    fclose(f);
    for (int l = 0; l < run->nl; l++) {
        const layer_params_t *p = &run->lp[l];
        float *w = f32(p->w), *m = f32(p->m), *v = f32(p->v), *g = f32(p->g);
        uint16_t *wh = b16(p->wh);
        for (size_t k = 0; k < p->n; k++) {
            wh[k] = mlp_f32_to_bf16(w[k]);
            m[k] = v[k] = g[k] = 0.0f;
        }
    }
    if (!run->opt->quiet)
        printf("  loaded the weights from %s\n", path);
}

/* ----------------------------------------------------------------------------
 * tokens: the batch of a step, and the rows of each token for dwte (sorted by
 * token, rows in order: the encoder's backward sums them without atomics) */

static void tokens_prepare(gpt_run_t *run, int step) {
    int N = run->N, V = run->V;
    int *inp = run->tok_host, *tgt = inp + N, *rows = tgt + N, *start = rows + N;
    int *tok = start + N + 1;
    if (run->opt->tokens_cycle)
        gpt_tokens_cycle(inp, tgt, run->B, run->T, V, run->opt->seed, step);
    else
        gpt_tokens_random(inp, tgt, run->B, run->T, V, run->opt->seed, step);
    int *count = calloc((size_t)V + 1, sizeof *count);
    if (count == NULL)
        run_fail(run, "out of host memory");
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
        .layer = layer, .phase = phase, .stream = run->stream, .uses = uses->u,
        .n_uses = uses->n, .no_default_uses = 1, .flops = flops,
    };
    /* sim: a call without matmuls is timed by its bytes at HBM speed */
    if (run->backend == UVMRT_BACKEND_SIM && flops == 0 && run->profile &&
        run->profile->hbm_bps > 0)
        call.sim_duration_ns = (uint64_t)((double)bytes / run->profile->hbm_bps * 1e9) + 1;
    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, &call);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_begin(layer %d, %s) failed: %s (%s)", layer,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
}

static void layer_close(gpt_run_t *run, int layer, uvmrt_phase_t phase) {
    uvmrt_status_t st = uvmrt_layer_end(run->ctx);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_end(layer %d, %s) failed: %s (%s)", layer,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
}

/* forward order: before layer l's forward in step s, its CPU update of step s-1 */
static void cpu_wait(gpt_run_t *run, int layer, int step) {
    if (run->cpu && step > 0 && gpt_cpuopt_wait(run->cpu, layer, step - 1) != 0)
        run_fail(run, "the CPU optimizer thread failed");
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

static double head_flops(const gpt_run_t *run) {
    return 6.0 * run->N * (double)run->C * run->Vp;
}

/* ----------------------------------------------------------------------------
 * the model: embedding */

static void embed_forward(gpt_run_t *run, int step) {
    const layer_params_t *p = &run->lp[0];
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->tokens, W);
    use_add(&u, run->out[0], W | S);
    cpu_wait(run, 0, step);
    layer_open(run, 0, UVMRT_PHASE_FORWARD, &u, 0, (uint64_t)run->N * run->C * 8);
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
    layer_open(run, 0, UVMRT_PHASE_BACKWARD, &u, 0, (uint64_t)run->N * run->C * 8);
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

static void block_forward(gpt_run_t *run, int l, int step) {
    use_list_t u = {.n = 0};
    use_add(&u, run->lp[l].wh, R);
    use_add(&u, run->out[l - 1], R);
    uses_block_acts(&u, &run->acts[l - 1], W);
    use_add(&u, run->out[l], W);
    cpu_wait(run, l, step);
    layer_open(run, l, UVMRT_PHASE_FORWARD, &u, block_forward_flops(run), 0);
    if (run->compute)
        block_forward_math(run, l, 1);
    layer_close(run, l, UVMRT_PHASE_FORWARD);
}

static void block_backward(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->lp[l];
    const block_acts_t *a = &run->acts[l - 1];
    int recompute = run->opt->recompute;
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->out[l - 1], R);
    uses_block_acts(&u, a, recompute ? W : R); /* recompute: written, then read */
    uvmrt_tensor_t *ws[] = {run->dres, run->dbf, run->d4, run->dln, run->dqkv, run->delta,
                            run->colsum};
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
        use_add(&u, ws[k], RW);
    use_add(&u, p->g, W);
    use_add(&u, run->gnorm, RW);
    double flops = 2.0 * block_forward_flops(run) + (recompute ? block_forward_flops(run) : 0.0);
    layer_open(run, l, UVMRT_PHASE_BACKWARD, &u, flops, 0);
    if (run->compute) {
        int N = run->N, C = run->C;
        uvmrt_stream_t s = run->stream;
        const uint16_t *wh = b16(p->wh);
        float *g = f32(p->g), *dres = f32(run->dres), *cs = f32(run->colsum);
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
    }
    layer_close(run, l, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the model: the head (final LayerNorm, tied classifier, loss) */

/* forward: lnf, then per chunk of rows: logits, cross-entropy (dlogits in place),
 * the chunk's dlnf and its share of dwte */
static void head_forward(gpt_run_t *run, int step) {
    int hl = run->nl - 1;
    const layer_params_t *p = &run->lp[hl], *pe = &run->lp[0];
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, pe->wh, R);
    use_add(&u, run->out[hl - 1], R);
    use_add(&u, run->lnf, W);
    use_add(&u, run->lnf_ms, W);
    use_add(&u, run->tokens, R);
    use_add(&u, run->logits, RW);
    use_add(&u, run->losses, W);
    use_add(&u, run->dln, W);
    use_add(&u, pe->g, W); /* dwte, written here first */
    cpu_wait(run, hl, step);
    layer_open(run, hl, UVMRT_PHASE_FORWARD, &u, head_flops(run), 0);
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
        kcheck(run, gpt_loss_finish_launch(f32(run->losses), N, &run->loss_host[step], s), "loss",
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
    layer_open(run, hl, UVMRT_PHASE_BACKWARD, &u, 0, (uint64_t)run->N * run->C * 10);
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

static double lr_at(const gpt_options_t *o, int step) {
    if (step < o->warmup)
        return o->lr * (step + 1) / o->warmup;
    int span = o->steps - o->warmup;
    double frac = span > 1 ? (double)(step - o->warmup) / (span - 1) : 0.0;
    double lo = o->lr * o->lr_final_frac;
    return lo + 0.5 * (1.0 + cos(3.141592653589793 * frac)) * (o->lr - lo);
}

/* PyTorch's AdamW with GPT-2's betas (mlp_adamw_coef_make has the MLP's). */
static mlp_adamw_coef_t adamw_coef(double lr, double wd, long t) {
    mlp_adamw_coef_t c;
    c.decay = (float)(1.0 - lr * wd);
    c.b1 = (float)ADAM_B1;
    c.omb1 = (float)(1.0 - ADAM_B1);
    c.b2 = (float)ADAM_B2;
    c.omb2 = (float)(1.0 - ADAM_B2);
    c.step_size = (float)(lr / (1.0 - pow(ADAM_B1, (double)t)));
    c.inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(ADAM_B2, (double)t)));
    c.eps = (float)ADAM_EPS;
    c.inv_scale = 1.0f; /* replaced by the clip factor */
    return c;
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

/* ----------------------------------------------------------------------------
 * the step loop */

static double step_flops(const gpt_run_t *run) { /* forward + backward, no recompute */
    return 3.0 * (run->L * block_forward_flops(run)) + head_flops(run);
}

static void run_steps(gpt_run_t *run, FILE *loss_log) {
    const gpt_options_t *opt = run->opt;
    double flops = step_flops(run), peak = run->profile ? run->profile->flops : 0.0;
    if (!(peak > 0))
        peak = 790e12;
    double t_start = cli_now_s();
    for (int s = 0; s < opt->steps; s++) {
        if (run->compute)
            tokens_prepare(run, s);
        UV_CHECK(run, uvmrt_step_begin(run->ctx));
        embed_forward(run, s);
        for (int l = 1; l <= run->L; l++)
            block_forward(run, l, s);
        head_forward(run, s);
        head_backward(run);
        for (int l = run->L; l >= 1; l--)
            block_backward(run, l);
        embed_backward(run);
        double lr = lr_at(opt, s);
        mlp_adamw_coef_t cd = adamw_coef(lr, ADAM_WD, run->adam_t + 1);
        mlp_adamw_coef_t cn = adamw_coef(lr, 0.0, run->adam_t + 1);
        if (s == 0 && opt->dump_grads && run->compute) {
            gcheck(run, gpt_gpu_sync(run->gpu), -1);
            weights_dump(run, opt->dump_grads, 1);
        }
        if (run->cpu)
            gcheck(run, gpt_cpuopt_submit(run->cpu, run->gpu, s, &cd, &cn), -1);
        else
            for (int l = 0; l < run->nl; l++)
                optimizer(run, l, &cd, &cn);
        UV_CHECK(run, uvmrt_step_end(run->ctx));
        run->adam_t++;

        if (run->compute) {
            run->losses_out[s] = run->loss_host[s]; /* step_end waited for the stream */
            run->norms[s] = run->clip_host[0];
        }
        uvmrt_step_stats_t *st = &run->stats[s];
        UV_CHECK(run, uvmrt_step_stats_get(run->ctx, (uint64_t)s, st));
        double ms = (double)st->step_ns / 1e6;
        double in = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
        double out = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
        double tflops = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
        double elapsed = cli_now_s() - t_start, eta = elapsed / (s + 1) * (opt->steps - s - 1);
        char loss_text[48] = "-";
        if (run->compute)
            snprintf(loss_text, sizeof loss_text, "%.6f  norm %.3f", run->losses_out[s],
                     run->norms[s]);
        printf("step %d/%d  loss %s  lr %.3g  %.1f ms  %.0f tokens/s  %.1f TFLOP/s  MFU %.1f%%  "
               "in %.2f GB  out %.2f GB  faults %" PRIu64 "  ETA %.0f s%s\n",
               s + 1, opt->steps, loss_text, lr, ms, ms > 0 ? run->N / (ms * 1e-3) : 0.0, tflops,
               100.0 * tflops * 1e12 / peak, in, out, st->fault_count, eta,
               s == 0 ? "  (recording step)" : "");
        fflush(stdout);
        if (loss_log)
            fprintf(loss_log, "%d %a\n", s + 1, run->losses_out[s]);
    }
    if (run->cpu) /* the last step's updates */
        for (int l = 0; l < run->nl; l++)
            if (gpt_cpuopt_wait(run->cpu, l, opt->steps - 1) != 0)
                run_fail(run, "the CPU optimizer thread failed");
}

/* ----------------------------------------------------------------------------
 * setup, results, main */

static uvmrt_context_t *context_open(gpt_options_t *opt) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    params.backend = opt->backend;
    params.profile = opt->profile;
    params.policy = opt->policy;
    params.budget_bytes = opt->policy == UVMRT_POLICY_NONE ? 0 : opt->budget_bytes;
    cli_backend_choice_t choice = {gpt_gpu_built(), PROG " was built without CUDA and cuBLAS",
                                   opt->backend_explicit, FALLBACK_PROFILE, NULL, NULL};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    opt->backend = params.backend;
    opt->profile = params.profile;
    return ctx;
}

static void run_open_gpu(gpt_run_t *run) {
    char err[256];
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    gcheck(run, gpt_gpu_mem_info(&free_b, &total_b, &dev), -1);
    uint64_t need = planned_managed_bytes(run) + (64ull << 20);
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    if (need > room)
        run_fail(run, "refusing to allocate %.2f GiB on GPU %d: it has %.2f GiB free and %.0f GiB "
                      "must stay free; use a smaller --depth, --batch or --seq, or --recompute "
                      "all; --budget emulates a smaller GPU",
                 (double)need / GIB, dev, (double)free_b / GIB, (double)GPU_SAFETY_BYTES / GIB);
    if (run->C != run->NH * GPT_HEAD_SIZE)
        run_fail(run, "the GPU kernels take head size %d: --channels %d / --heads %d is %d",
                 GPT_HEAD_SIZE, run->C, run->NH, run->C / run->NH);
    if (!run->opt->quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB, (double)need / GIB);
    run->gpu = gpt_gpu_open(err, sizeof err);
    if (run->gpu == NULL)
        run_fail(run, "GPU setup: %s", err);
    run->stream = gpt_gpu_stream(run->gpu);
    run->device_bytes = gpt_gpu_device_bytes(run->gpu);
    run->tok_host = gpt_gpu_host_alloc((5 * (size_t)run->N + 1) * sizeof(int));
    run->loss_host = gpt_gpu_host_alloc((size_t)run->opt->steps * sizeof(double));
    run->clip_host = gpt_gpu_host_alloc(4 * sizeof(float));
    if (!run->tok_host || !run->loss_host || !run->clip_host)
        run_fail(run, "cannot allocate pinned host memory");
}

static void cpu_opt_open(gpt_run_t *run) {
    char err[256];
    gpt_cpuopt_layer_t *ls = calloc((size_t)run->nl, sizeof *ls);
    if (ls == NULL)
        run_fail(run, "out of host memory");
    for (int l = 0; l < run->nl; l++) {
        const layer_params_t *p = &run->lp[l];
        ls[l] = (gpt_cpuopt_layer_t){f32(p->w), f32(p->m), f32(p->v), f32(p->g), b16(p->wh),
                                     p->n, p->n_decay};
    }
    run->cpu = gpt_cpuopt_start(run->nl, ls, run->isa, run->clip_host, err, sizeof err);
    free(ls);
    if (run->cpu == NULL)
        run_fail(run, "CPU optimizer: %s", err);
    if (!run->opt->quiet)
        printf("  cpu optimizer: AdamW path %s\n", mlp_isa_name(run->isa));
}

static void run_close(gpt_run_t *run) {
    gpt_cpuopt_stop(run->cpu);
    run->cpu = NULL;
    uvmrt_context_destroy(run->ctx); /* first: it may still refer to our stream */
    run->ctx = NULL;
    gpt_gpu_host_free(run->tok_host);
    gpt_gpu_host_free(run->loss_host);
    gpt_gpu_host_free(run->clip_host);
    run->tok_host = NULL, run->loss_host = NULL, run->clip_host = NULL;
    gpt_gpu_close(run->gpu);
    run->gpu = NULL;
    free(run->lp);
    free(run->out);
    free(run->acts);
    run->lp = NULL, run->out = NULL, run->acts = NULL;
}

typedef struct medians {
    double ms, in_gb, out_gb, faults;
} medians_t;

static medians_t run_medians(const gpt_run_t *run) {
    int S = run->opt->steps, first = S > 1 ? 1 : 0;
    size_t n = (size_t)(S - first);
    double *v = malloc(n * sizeof *v);
    medians_t m = {0};
    if (v == NULL)
        return m;
    const uvmrt_step_stats_t *st = run->stats + first;
#define MEDIAN(field, expr)                                                                    \
    do {                                                                                       \
        for (size_t k = 0; k < n; k++)                                                         \
            v[k] = (expr);                                                                     \
        m.field = cli_median(v, n);                                                            \
    } while (0)
    MEDIAN(ms, (double)st[k].step_ns / 1e6);
    MEDIAN(in_gb, (double)(st[k].prefetch_bytes + st[k].remote_read_bytes) / GB);
    MEDIAN(out_gb, (double)(st[k].evict_bytes + st[k].remote_write_bytes) / GB);
    MEDIAN(faults, (double)st[k].fault_count);
#undef MEDIAN
    free(v);
    return m;
}

static void result_write(gpt_run_t *run, const char *path, const medians_t *m,
                         const uvmrt_summary_t *sum) {
    const gpt_options_t *o = run->opt;
    FILE *f = fopen(path, "w");
    if (f == NULL)
        run_fail(run, "cannot write --result-json %s: %s", path, strerror(errno));
    double tflops = m->ms > 0 ? step_flops(run) / (m->ms * 1e-3) / 1e12 : 0.0;
    fprintf(f, "{\n  \"program\": \"" PROG "\", \"version\": \"%s\",\n", uvmrt_version_string());
    fprintf(f, "  \"backend\": \"%s\", \"policy\": \"%s\", \"budget_bytes\": %" PRIu64 ",\n",
            uvmrt_backend_name(run->backend), uvmrt_policy_name(run->policy), sum->budget_bytes);
    fprintf(f, "  \"layers\": %d, \"channels\": %d, \"heads\": %d, \"vocab\": %d, "
               "\"batch\": %d, \"seq\": %d, \"steps\": %d,\n",
            run->L, run->C, run->NH, run->V, run->B, run->T, o->steps);
    fprintf(f, "  \"optimizer_on\": \"%s\", \"recompute\": \"%s\", \"arithmetic\": %s,\n",
            o->optimizer_cpu ? "cpu" : "gpu", o->recompute ? "all" : "none",
            run->compute ? "true" : "false");
    fprintf(f, "  \"ms_per_step_median\": %.3f, \"tokens_per_s\": %.1f, \"tflops\": %.2f,\n",
            m->ms, m->ms > 0 ? run->N / (m->ms * 1e-3) : 0.0, tflops);
    fprintf(f, "  \"gb_in_per_step\": %.4f, \"gb_out_per_step\": %.4f, \"faults_per_step\": %.1f,\n",
            m->in_gb, m->out_gb, m->faults);
    uint64_t late = 0;
    for (int s = 1; s < o->steps; s++)
        late += run->stats[s].fault_count;
    fprintf(f, "  \"managed_bytes\": %" PRIu64 ", \"peak_resident_bytes\": %" PRIu64
               ", \"device_workspace_bytes\": %" PRIu64 ", \"faults_after_step1\": %" PRIu64 ",\n",
            run->managed_bytes, sum->peak_resident_bytes, run->device_bytes, late);
    fprintf(f, "  \"losses\": [");
    for (int s = 0; s < o->steps; s++)
        fprintf(f, "%s%.9g", s ? ", " : "", run->compute ? run->losses_out[s] : 0.0);
    fprintf(f, "],\n  \"step_ms\": [");
    for (int s = 0; s < o->steps; s++)
        fprintf(f, "%s%.3f", s ? ", " : "", (double)run->stats[s].step_ns / 1e6);
    fprintf(f, "]\n}\n");
    if (fclose(f) != 0)
        run_fail(run, "writing --result-json %s failed: %s", path, strerror(errno));
}

int main(int argc, char **argv) {
    cli_program = PROG;
    gpt_options_t opt;
    gpt_options_parse(argc, argv, &opt);
    cli_note_env_overrides();

    gpt_run_t run = {.opt = &opt};
    shape_init(&run);
    run.losses_out = calloc((size_t)opt.steps, sizeof *run.losses_out);
    run.norms = calloc((size_t)opt.steps, sizeof *run.norms);
    run.stats = calloc((size_t)opt.steps, sizeof *run.stats);
    if (!run.losses_out || !run.norms || !run.stats) {
        fprintf(stderr, PROG ": out of host memory\n");
        return 1;
    }
    run.isa = mlp_isa_best();
    gpt_shape_t shape = {run.V, run.Vp, run.maxT, run.L, run.C, run.NH};
    double params = (double)gpt_num_params(&shape);
    printf(PROG ": GPT-2 %d layers, %d channels, %d heads, vocab %d (padded %d), %.1f M "
           "parameters; batch %d x %d tokens; optimizer on %s, recompute %s; %d steps, lr %g, "
           "seed %" PRIu64 "\n",
           run.L, run.C, run.NH, run.V, run.Vp, params / 1e6, run.B, run.T,
           opt.optimizer_cpu ? "cpu" : "gpu", opt.recompute ? "all" : "none", opt.steps, opt.lr,
           opt.seed);

    run.ctx = context_open(&opt);
    run.backend = uvmrt_context_backend(run.ctx);
    run.policy = uvmrt_context_policy(run.ctx);
    run.profile = uvmrt_context_profile(run.ctx);
    printf("policy %s on %s%s%s, budget %.2f GiB, tensors %.2f GiB\n",
           uvmrt_policy_name(run.policy), uvmrt_backend_name(run.backend),
           run.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.backend == UVMRT_BACKEND_SIM && run.profile ? run.profile->name : "",
           (double)uvmrt_context_budget(run.ctx) / GIB, (double)planned_managed_bytes(&run) / GIB);
    if (!opt.quiet) {
        uvmrt_context_print_config(run.ctx, stdout);
        fflush(stdout);
    }
    if (run.backend == UVMRT_BACKEND_CUDA) {
        if (!gpt_gpu_built())
            run_fail(&run, "UVMRT_BACKEND selected the cuda backend, but " PROG
                           " was built without CUDA and cuBLAS");
        run_open_gpu(&run);
        run.compute = 1;
    } else {
        printf("sim backend: the schedule only, no arithmetic (no losses); times and traffic "
               "are the model's\n");
        if (opt.dump_weights || opt.dump_grads || opt.init_weights)
            fprintf(stderr, PROG ": note: --dump-weights, --dump-grads and --init-weights need "
                            "the GPU; ignored on sim\n");
    }
    net_alloc(&run);
    if (run.compute) {
        if (opt.init_weights)
            weights_load(&run, opt.init_weights);
        else
            weights_init(&run);
        if (opt.dump_weights)
            weights_dump(&run, opt.dump_weights, 0);
        if (opt.optimizer_cpu)
            cpu_opt_open(&run);
    }

    FILE *loss_log = NULL;
    if (opt.loss_log && (loss_log = fopen(opt.loss_log, "w")) == NULL)
        run_fail(&run, "cannot write --loss-log %s: %s", opt.loss_log, strerror(errno));
    run_steps(&run, loss_log);
    if (loss_log && fclose(loss_log) != 0)
        run_fail(&run, "writing --loss-log %s failed: %s", opt.loss_log, strerror(errno));

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
        UV_CHECK(&run, uvmrt_report_write(run.ctx, "trace", opt.trace_path));
        printf("trace: %s\n", opt.trace_path);
    }
    uvmrt_summary_t sum;
    UV_CHECK(&run, uvmrt_summary_get(run.ctx, &sum));
    medians_t m = run_medians(&run);
    double tflops = m.ms > 0 ? step_flops(&run) / (m.ms * 1e-3) / 1e12 : 0.0;
    printf("summary: %.1f ms/step, %.0f tokens/s, %.1f TFLOP/s, in %.2f GB, out %.2f GB, faults "
           "%.0f per step (medians of steps %d..%d); peak resident %.2f GiB + %.2f GiB device "
           "workspace; budget %.2f GiB",
           m.ms, m.ms > 0 ? run.N / (m.ms * 1e-3) : 0.0, tflops, m.in_gb, m.out_gb, m.faults,
           opt.steps > 1 ? 2 : 1, opt.steps, (double)sum.peak_resident_bytes / GIB,
           (double)run.device_bytes / GIB, (double)sum.budget_bytes / GIB);
    if (run.compute)
        printf("; loss %.6f -> %.6f", run.losses_out[0], run.losses_out[opt.steps - 1]);
    printf("\n");
    if (run.cpu)
        printf("cpu optimizer: %.1f ms of AdamW per step (path %s)\n",
               gpt_cpuopt_busy_s(run.cpu) * 1e3 / opt.steps, mlp_isa_name(run.isa));
    if (opt.result_json)
        result_write(&run, opt.result_json, &m, &sum);
    int status = 0;
    if (run.compute)
        for (int s = 0; s < opt.steps; s++)
            if (!isfinite(run.losses_out[s])) {
                fprintf(stderr, PROG ": loss of step %d is not finite\n", s + 1);
                status = 1;
                break;
            }
    run_close(&run);
    free(run.losses_out);
    free(run.norms);
    free(run.stats);
    return status;
}
