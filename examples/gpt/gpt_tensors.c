/*
 * gpt_tensors.c -- uvmrt-gpt: the model's tensors: the shape, the descriptors and their
 * planned bytes, the allocation, and a changed choice applied between steps. See gpt.h.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_kernels.h"
#include "gpt.h"

/* ----------------------------------------------------------------------------
 * shapes and allocation: descriptors first (planned bytes), then one
 * uvmrt_tensors_alloc per layer and one for the shared workspace */

void gpt_shape_init(gpt_run_t *run) {
    const gpt_options_t *o = run->set.opt;
    gpt_model_t *m = &run->model;
    m->L = o->layers, m->C = o->channels, m->NH = o->heads, m->V = o->vocab;
    m->Vp = o->padded_vocab, m->maxT = o->max_seq, m->B = o->batch, m->T = o->seq;
    m->N = m->B * m->T;
    m->nl = m->L + 2;
    size_t C = (size_t)m->C;
    size_t sz[P_BLOCK] = {3 * C * C, C * C, 4 * C * C, 4 * C * C, C, C, 3 * C, C, C, C, 4 * C, C};
    size_t off = 0;
    for (int k = 0; k < P_BLOCK; k++) {
        m->bsize[k] = sz[k];
        m->boff[k] = off;
        off += sz[k];
    }
    m->chunk = gpt_chunk_rows(m->N, m->C);
}


static size_t layer_nparams(const gpt_run_t *run, int layer, size_t *n_decay) {
    size_t C = (size_t)run->model.C, n;
    if (layer == 0)
        *n_decay = n = ((size_t)run->model.Vp + (size_t)run->model.maxT) * C;
    else if (layer == run->model.nl - 1)
        *n_decay = 0, n = 2 * C;
    else
        n = run->model.boff[P_BLOCK - 1] + run->model.bsize[P_BLOCK - 1], *n_decay = 12 * C * C;
    return n;
}

#define MAX_DESCS 24

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
    size_t N = (size_t)run->model.N, NC = N * (size_t)run->model.C;
    size_t lse = (size_t)run->model.B * run->model.NH * run->model.T * 4;
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
    size_t nd, n = layer_nparams(run, layer, &nd), N = (size_t)run->model.N;
    size_t NC = N * (size_t)run->model.C;
    s->n = 0;
    desc_add(s, layer, UVMRT_ROLE_WEIGHT, n * 4, "w_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_WEIGHT, n * 2, "wh_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_GRADIENT, n * 4, "g_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_OPTIMIZER_STATE, n * 4, "m_%d", layer);
    desc_add(s, layer, UVMRT_ROLE_OPTIMIZER_STATE, n * 4, "v_%d", layer);
    if (layer == 0) {
        desc_add(s, layer, UVMRT_ROLE_WORKSPACE, (5 * N + 1) * 4, "tokens");
        desc_add(s, layer, UVMRT_ROLE_ACTIVATION, NC * 4, "out_%d", layer);
    } else if (layer == run->model.nl - 1) {
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
static int has_gdev(const gpt_run_t *run) { return run->model.L > 0; }

static void workspace_descs(const gpt_run_t *run, desc_set_t *s) {
    size_t N = (size_t)run->model.N, NC = N * (size_t)run->model.C;
    size_t bnt = (size_t)run->model.B * run->model.NH * run->model.T;
    s->n = 0;
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 4, "dres");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 2, "dbf");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, 4 * NC * 2, "d4");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, NC * 2, "dln");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, 3 * NC * 2, "dqkv");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, bnt * 4, "delta");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE,
             2 * gpt_colsum_scratch_floats(run->model.N, 4 * run->model.C) * 4, "colsum");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, (size_t)run->model.chunk * run->model.Vp * 2, "logits");
    desc_add(s, -1, UVMRT_ROLE_WORKSPACE, (size_t)run->model.nl * GPT_SUMSQ_BLOCKS * 8 + 16,
             "gnorm");
    if (has_gdev(run)) {
        size_t nd;
        desc_add(s, -1, UVMRT_ROLE_WORKSPACE, layer_nparams(run, 1, &nd) * 4, "gdev0");
        desc_add(s, -1, UVMRT_ROLE_WORKSPACE, layer_nparams(run, 1, &nd) * 4, "gdev1");
    }
    if (run->set.recompute > 0)
        block_acts_descs(run, s, -1, 0);
}

uint64_t gpt_planned_managed_bytes(const gpt_run_t *run) {
    desc_set_t s;
    uint64_t total = 0;
    for (int l = 0; l < run->model.nl; l++) {
        layer_descs(run, l, &s);
        for (size_t k = 0; k < s.n; k++)
            total += footprint(s.d[k].size_bytes);
    }
    workspace_descs(run, &s);
    for (size_t k = 0; k < s.n; k++)
        total += footprint(s.d[k].size_bytes);
    return total;
}

static void placement_set(gpt_run_t *run, int l, uvmrt_placement_t where, int fresh);
static int on_tier_kind(const gpt_run_t *run, int l, int k);

/* The CPU layers' w, m, v, g: placed in host memory whatever the GPU's budget. */
uint64_t gpt_host_homed_bytes(const gpt_run_t *run) {
    uint64_t b = 0;
    for (int l = run->model.nl - run->set.cpu_layers; l < run->model.nl; l++) {
        size_t nd, n = layer_nparams(run, l, &nd);
        b += 4 * footprint(n * 4);
    }
    return b;
}

/* Layer l's bytes on the disk tier (set.tier: its moments, or all four of w, m, v, g). */
static uint64_t layer_tier_bytes(const gpt_run_t *run, int l) {
    size_t nd, n = layer_nparams(run, l, &nd);
    uint64_t b = 0;
    for (int k = 0; k < 4; k++)
        b += on_tier_kind(run, l, k) ? footprint(n * 4) : 0;
    return b;
}

/* The host bytes the disk tier keeps out of host memory: the CPU layers' tensors on it
 * (the moments; --spill state: w and g too) less its window, the two largest layers'
 * (read back around their use while the one before is written); 0 without a tier. */
uint64_t gpt_tier_off_bytes(const gpt_run_t *run) {
    uint64_t all = 0, big[2] = {0, 0};
    for (int l = run->model.nl - run->set.cpu_layers; l < run->model.nl; l++) {
        uint64_t b = layer_tier_bytes(run, l);
        all += b;
        if (b > big[0])
            big[1] = big[0], big[0] = b;
        else if (b > big[1])
            big[1] = b;
    }
    return all > big[0] + big[1] ? all - big[0] - big[1] : 0;
}

uint64_t gpt_tier_bytes(const gpt_run_t *run, int *moments_layers, int *state_layers) {
    uint64_t b = 0;
    *moments_layers = *state_layers = 0;
    for (int l = 0; l < run->model.nl; l++) {
        b += layer_tier_bytes(run, l);
        *moments_layers += run->set.tier[l] == GPT_SPILL_MOMENTS;
        *state_layers += run->set.tier[l] == GPT_SPILL_STATE;
    }
    return b;
}

/* The order --spill auto takes the CPU layers in: the blocks from the top down, then the
 * head and the embedding (the largest: the tier's host window is its two largest
 * layers'). */
static int tier_order(const gpt_run_t *run, int i) {
    int nl = run->model.nl, k = run->set.cpu_layers, blocks = k - 1 - (k == nl);
    if (i < blocks)
        return nl - 2 - i;
    return i == blocks ? nl - 1 : 0;
}

void gpt_tier_plan(gpt_run_t *run) {
    gpt_spill_t mode = run->set.opt->spill;
    int nl = run->model.nl, k = run->set.cpu_layers;
    memset(run->set.tier, GPT_SPILL_NONE, sizeof run->set.tier);
    if (!uvmrt_context_has_disk_tier(run->uv.ctx) || k == 0)
        return;
    if (mode != GPT_SPILL_AUTO) {
        for (int l = nl - k; l < nl; l++)
            run->set.tier[l] = (unsigned char)mode;
        return;
    }
    uint64_t host = uvmrt_context_host_budget(run->uv.ctx);
    if (host == 0)
        return; /* no host budget: nothing to make room for */
    host -= host / 16; /* a margin: the estimate counts no copies in flight, the run's peak does */
    /* what the tier changes is only what it keeps off host memory */
    uint64_t planned = gpt_planned_managed_bytes(run), homed = gpt_host_homed_bytes(run);
    for (int level = GPT_SPILL_MOMENTS; level <= GPT_SPILL_STATE; level++)
        for (int i = 0; i < k; i++) {
            if (cli_host_need(run->uv.ctx, planned, homed, gpt_tier_off_bytes(run)) <= host)
                return;
            run->set.tier[tier_order(run, i)] = (unsigned char)level;
        }
    /* every CPU layer's state on the tier: cli_host_fits says whether that is enough */
}

static void acts_from(block_acts_t *a, uvmrt_tensor_t **t) {
    *a = (block_acts_t){t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9]};
}

void gpt_net_alloc(gpt_run_t *run) {
    static const char *const fixed[] = {"embed", "head"};
    for (int l = 0; l < run->model.nl; l++) {
        char name[32];
        int id = -1;
        if (l == 0 || l == run->model.nl - 1)
            snprintf(name, sizeof name, "%s", fixed[l == 0 ? 0 : 1]);
        else
            snprintf(name, sizeof name, "block%d", l - 1);
        UV_CHECK(run, uvmrt_layer_add(run->uv.ctx, name, &id));
        if (id != l)
            gpt_run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", name, id, l);
    }
    run->model.lp = calloc((size_t)run->model.nl, sizeof *run->model.lp);
    run->model.out = calloc((size_t)run->model.nl, sizeof *run->model.out);
    run->model.acts = calloc((size_t)run->model.L + 1, sizeof *run->model.acts);
    if (!run->model.lp || !run->model.out || !run->model.acts)
        gpt_run_fail(run, "out of host memory");
    desc_set_t s;
    uvmrt_tensor_t *t[MAX_DESCS];
    for (int l = 0; l < run->model.nl; l++) {
        layer_descs(run, l, &s);
        memset(t, 0, sizeof t);
        UV_CHECK(run, uvmrt_tensors_alloc(run->uv.ctx, s.n, s.d, t));
        for (size_t k = 0; k < s.n; k++)
            run->model.managed_bytes += footprint(s.d[k].size_bytes);
        layer_params_t *p = &run->model.lp[l];
        p->w = t[0], p->wh = t[1], p->g = t[2], p->m = t[3], p->v = t[4];
        p->n = layer_nparams(run, l, &p->n_decay);
        if (l == 0) {
            run->model.tokens = t[5];
            run->model.out[0] = t[6];
        } else if (l == run->model.nl - 1) {
            run->model.lnf = t[5], run->model.lnf_ms = t[6], run->model.losses = t[7];
        } else {
            run->model.out[l] = t[5];
            if (!recomputes(run, l))
                acts_from(&run->model.acts[l - 1], t + 6);
        }
        if (on_cpu(run, l)) /* before the next layer's: on the disk tier, its state leaves host memory */
            placement_set(run, l, UVMRT_PLACE_HOST, 1);
    }
    workspace_descs(run, &s);
    memset(t, 0, sizeof t);
    UV_CHECK(run, uvmrt_tensors_alloc(run->uv.ctx, s.n, s.d, t));
    for (size_t k = 0; k < s.n; k++)
        run->model.managed_bytes += footprint(s.d[k].size_bytes);
    gpt_model_t *m = &run->model;
    m->dres = t[0], m->dbf = t[1], m->d4 = t[2], m->dln = t[3], m->dqkv = t[4];
    m->delta = t[5], m->colsum = t[6], m->logits = t[7], m->gnorm = t[8];
    size_t next = 9;
    if (has_gdev(run)) {
        run->model.gdev[0] = t[next++];
        run->model.gdev[1] = t[next++];
    }
    if (run->set.recompute > 0) {
        acts_from(&run->model.shared_acts, t + next);
        for (int l = 1; l <= run->set.recompute; l++)
            run->model.acts[l - 1] = run->model.shared_acts;
    }
}

/* ----------------------------------------------------------------------------
 * a changed choice, between steps: where AdamW runs, which blocks recompute */

/* Which of CPU layer l's w, m, v, g (k = 0..3) live on the disk tier: none without one
 * (no spill directory), or as set.tier says: the moments, or all four. */
static int on_tier_kind(const gpt_run_t *run, int l, int k) {
    if (!uvmrt_context_has_disk_tier(run->uv.ctx))
        return 0;
    return run->set.tier[l] == GPT_SPILL_STATE || (run->set.tier[l] == GPT_SPILL_MOMENTS && (k == 1 || k == 2));
}

/* The CPU's layers' data lives on the host (the GPU writes g there), in page-locked
 * memory of its own (UVMRT_PLACE_PINNED): the GPU then reaches it by DMA (the gradient's
 * copy) that holds no SMs, where a copy into host-resident managed memory holds the
 * kernels of every stream (bench/probes/copy_contention.py); where no page-locked
 * memory is to be had, managed memory placed on the host, with a notice. With a disk
 * tier (a spill directory) their AdamW moments (--spill state: all four) live in files
 * instead, read back for the calls that read them and written after those that write
 * them (uvmrt_tensor(3)): managed memory placed on the host (the tier takes no
 * page-locked memory); their update runs in its declared call on the training thread
 * (gpt.c, cpu_optimizer_declare). A GPU layer's data is moved by the policy, off the
 * tier first. fresh: the tensors were just allocated (their contents are to be made:
 * the moments zero, w by the initialisation): they go on the tier as zeros, with
 * nothing written. */
static void placement_set(gpt_run_t *run, int l, uvmrt_placement_t where, int fresh) {
    static int refused;
    uvmrt_tensor_t *h[4] = {run->model.lp[l].w, run->model.lp[l].m, run->model.lp[l].v,
                            run->model.lp[l].g};
    for (int k = 0; k < 4; k++) {
        int tier = on_tier_kind(run, l, k);
        if ((where != UVMRT_PLACE_HOST || !tier) && uvmrt_tensor_tier(h[k]) == UVMRT_TIER_DISK)
            UV_CHECK(run, uvmrt_tensor_set_tier(run->uv.ctx, h[k], UVMRT_TIER_MEMORY));
        if (where == UVMRT_PLACE_HOST && !tier && !refused && !run->set.opt->no_page_lock) {
            uvmrt_status_t st = uvmrt_tensor_set_placement(run->uv.ctx, h[k], UVMRT_PLACE_PINNED);
            if (st == UVMRT_OK)
                continue;
            refused = 1;
            fprintf(stderr, "uvmrt-gpt: the CPU layers' state stays in managed memory: page-locked memory "
                            "refused (%s)\n", uvmrt_status_str(st));
        }
        UV_CHECK(run, uvmrt_tensor_set_placement(run->uv.ctx, h[k], where));
        if (where == UVMRT_PLACE_HOST && tier)
            UV_CHECK(run, uvmrt_tensor_set_tier(run->uv.ctx, h[k], fresh ? UVMRT_TIER_DISK_ZERO : UVMRT_TIER_DISK));
    }
}

/* A tensor on the disk tier back in host memory, to be read or written outside its
 * calls (the initialisation, a checkpoint's save or load: host writes through the
 * pointer are not seen by the tier, and between calls the host copy is not there);
 * 1 when it was on the tier, for gpt_tier_release, which puts it back. */
int gpt_tier_hold(gpt_run_t *run, uvmrt_tensor_t *t) {
    if (uvmrt_tensor_tier(t) != UVMRT_TIER_DISK)
        return 0;
    UV_CHECK(run, uvmrt_tensor_set_tier(run->uv.ctx, t, UVMRT_TIER_MEMORY));
    return 1;
}

void gpt_tier_release(gpt_run_t *run, uvmrt_tensor_t *t, int held) {
    if (held)
        UV_CHECK(run, uvmrt_tensor_set_tier(run->uv.ctx, t, UVMRT_TIER_DISK));
}

/* Layer l's AdamW moments are on the disk tier (a CPU layer of a run with a spill
 * directory): its update reads them back in its declared call. */
int gpt_moments_on_disk(const gpt_run_t *run, int l) {
    return uvmrt_tensor_tier(run->model.lp[l].m) == UVMRT_TIER_DISK;
}

/* Layer l's master weights and gradient are on the disk tier too (--spill state). */
int gpt_state_on_disk(const gpt_run_t *run, int l) {
    return uvmrt_tensor_tier(run->model.lp[l].w) == UVMRT_TIER_DISK;
}

static void acts_free(gpt_run_t *run, block_acts_t *a) {
    uvmrt_tensor_t *t[ACTS_COUNT] = {a->ln1, a->ln1_ms, a->qkv, a->atty, a->lse,
                                     a->res2, a->ln2, a->ln2_ms, a->fch, a->fchg};
    for (int k = 0; k < ACTS_COUNT; k++) {
        run->model.managed_bytes -= footprint(uvmrt_tensor_size(t[k]));
        UV_CHECK(run, uvmrt_tensor_free(run->uv.ctx, t[k]));
    }
    memset(a, 0, sizeof *a);
}

/* Block layer l's own activation set (layer -1: the shared one). */
static void acts_alloc(gpt_run_t *run, int l, block_acts_t *a) {
    desc_set_t s = {.n = 0};
    block_acts_descs(run, &s, l, l < 0 ? 0 : l);
    uvmrt_tensor_t *t[MAX_DESCS] = {0};
    UV_CHECK(run, uvmrt_tensors_alloc(run->uv.ctx, s.n, s.d, t));
    for (size_t k = 0; k < s.n; k++)
        run->model.managed_bytes += footprint(s.d[k].size_bytes);
    acts_from(a, t);
}

/* From the next step on: the top k layers' AdamW on the CPU, blocks 1..n recompute.
 * The runtime sees other layer calls and records the step again. */
void gpt_run_reconfigure(gpt_run_t *run, int k, int n) {
    /* the tier's plan for the new values: a CPU layer whose share of it changes moves too */
    unsigned char was_tier[sizeof run->set.tier];
    memcpy(was_tier, run->set.tier, sizeof was_tier);
    int keep_k = run->set.cpu_layers, keep_n = run->set.recompute;
    run->set.cpu_layers = k, run->set.recompute = n;
    gpt_tier_plan(run);
    run->set.cpu_layers = keep_k, run->set.recompute = keep_n;
    for (int l = 0; l < run->model.nl; l++) {
        int was = on_cpu(run, l), now = l >= run->model.nl - k;
        if (was != now || (now && was_tier[l] != run->set.tier[l]))
            placement_set(run, l, now ? UVMRT_PLACE_HOST : UVMRT_PLACE_AUTO, 0);
        /* back on the GPU: its wh was last made in a forward from an older w */
        if (was && !now && run->set.compute) {
            const layer_params_t *p = &run->model.lp[l];
            kcheck(run, gpt_f32_to_bf16_launch(b16(p->wh), f32(p->w), p->n, run->uv.stream),
                   "weights to bf16", l);
            gcheck(run, gpt_gpu_sync(run->gpu), l);
        } else if (was && !now && run->ref) {
            gpt_wh_from_master_host(run, l);
        }
    }
    int old_n = run->set.recompute;
    for (int l = 1; l <= run->model.L; l++) {
        int was = l - 1 < old_n, now = l - 1 < n;
        if (was && !now)
            acts_alloc(run, l, &run->model.acts[l - 1]);
        else if (!was && now)
            acts_free(run, &run->model.acts[l - 1]);
    }
    if (old_n > 0 && n == 0)
        acts_free(run, &run->model.shared_acts);
    if (old_n == 0 && n > 0)
        acts_alloc(run, -1, &run->model.shared_acts);
    for (int l = 1; l <= n; l++)
        run->model.acts[l - 1] = run->model.shared_acts;
    run->set.cpu_layers = k, run->set.recompute = n;
}
