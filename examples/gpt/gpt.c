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
 * Without a GPU it runs the same schedule on uvmrt's sim backend (durations from the
 * declared work) and says so; there the CPU reference computes a small shape inside
 * the same layer calls (gpt_simref.c), and a larger one computes nothing.
 *
 * This file is the model's layer calls, the optimizer, the training loop and main; the
 * tensors (shape, allocation, a changed choice) are in gpt_tensors.c, the weights'
 * initialisation and files in gpt_weights.c, validation and sampling in gpt_side.c,
 * opening and closing a run in gpt_open.c, the automatic choice in gpt_auto.c, a
 * run's checkpoints in gpt_ckpt.c, the medians and the result JSON in gpt_results.c,
 * and what they share in gpt.h.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
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
#include "../common/launch.h"

#include <jansson.h>

#include "../common/adamw_cpu.h"
#include "checkpoint.h"
#include "data.h"
#include "gpt_cpuopt.h"
#include "gpt_flags.h"
#include "gpt_gpu.h"
#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "gpt_tokens.h"
#include "../common/train_math.h"

static const double ADAM_B1 = 0.9, ADAM_B2 = 0.95, ADAM_EPS = 1e-8, ADAM_WD = 0.1;

#include "gpt.h"


void gpt_run_fail(gpt_run_t *run, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (run->uv.rehearsal) { /* a layer over budget: the candidate does not fit (quietly) */
        if (run->uv.fail_st != UVMRT_ERR_BUDGET) {
            fflush(stdout);
            fprintf(stderr, "%s: rehearsal on uvmrt's model: %s\n", PROG, msg);
        }
        longjmp(*run->uv.rehearsal, 1);
    }
    cli_fail(gpt_run_close_cb, run, "%s", msg);
}

const char gpt_sim_cpu_stream = 0, gpt_sim_gpu_stream = 0;

/* ----------------------------------------------------------------------------
 * tokens: the batch of a step, and the rows of each token for dwte (sorted by
 * token, rows in order: the encoder's backward sums them without atomics) */

/* The rows of each input token, for the embedding's backward (inputs in tok_host), after
 * tok_host's first 2N: made while the GPU runs the forward (gpt_step_calls), copied by
 * the embedding's backward. */
void gpt_tokens_index(gpt_run_t *run) {
    int N = run->model.N, V = run->model.V;
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
    int N = run->model.N, V = run->model.V;
    int *inp = run->tok_host, *tgt = inp + N;
    char err[512];
    if (run->train) {
        if (gpt_data_next(run->train, (int32_t *)inp, (int32_t *)tgt, err, sizeof err) != 0)
            gpt_run_fail(run, "training data, step %d: %s", step + 1, err);
    } else if (run->set.opt->source == GPT_SRC_CYCLE) {
        gpt_tokens_cycle(inp, tgt, run->model.B, run->model.T, V, run->set.opt->c.seed, step);
    } else {
        gpt_tokens_random(inp, tgt, run->model.B, run->model.T, V, run->set.opt->c.seed, step);
    }
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
        .layer = layer,
        .phase = phase,
        .stream = run->uv.stream,
        .uses = uses->u,
        .n_uses = uses->n,
        .no_default_uses = 1,
        .flops = flops,
    };
    /* the memory-bound kernels' bytes, at HBM speed after the matmuls' flops (on sim
     * and in uvmrt_choose's rehearsals; on cuda only declared, for the review) */
    call.hbm_bytes = bytes;
    /* a CPU layer's forward waits for the CPU's update of it (cpu_wait) and writes its
     * bf16 weights (weights_ready: 2 bytes per parameter) */
    if (phase == UVMRT_PHASE_FORWARD && on_cpu(run, layer)) {
        call.after = run->uv.cpu_stream;
        call.hbm_bytes += 2 * run->model.lp[layer].n;
    }
    uvmrt_status_t st = uvmrt_layer_begin(run->uv.ctx, &call);
    if (st != UVMRT_OK) {
        run->uv.fail_st = st;
        gpt_run_fail(run, "uvmrt_layer_begin(layer %d, %s) failed: %s (%s)", layer,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
    }
}

static void layer_close(gpt_run_t *run, int layer, uvmrt_phase_t phase) {
    uvmrt_status_t st = uvmrt_layer_end(run->uv.ctx);
    if (st != UVMRT_OK && (run->uv.fail_st = st) != UVMRT_OK)
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
    for (int l = 0; run->cpu && l < run->model.nl; l++)
        cpu_wait(run, l);
}

static void uses_block_acts(use_list_t *u, const block_acts_t *a, unsigned access) {
    uvmrt_tensor_t *t[ACTS_COUNT] = {a->ln1, a->ln1_ms, a->qkv, a->atty, a->lse,
                                     a->res2, a->ln2, a->ln2_ms, a->fch, a->fchg};
    for (int k = 0; k < ACTS_COUNT; k++)
        use_add(u, t[k], access);
}

static double block_forward_flops(const gpt_run_t *run) {
    double N = run->model.N, C = run->model.C, T = run->model.T;
    return 24.0 * N * C * C + 2.0 * N * T * C; /* matmuls + causal attention */
}

/* The work a block's calls declare to uvmrt's model (uvmrt_layer_call_t: flops at the
 * profile's GEMM rate, then hbm_bytes at its HBM rate). The attention kernels run at a
 * fraction of the GEMM rate, declared as such (the fraction is assumed to carry over to
 * other GPUs), counting the backward's 5 matmuls as 2.5 times the forward's flops,
 * against 675 TFLOP/s for the block's cuBLAS GEMMs on the H200 at d48's shapes (B=8,
 * T=1024, 25 heads): the trainer's mma.sync kernels 164 forward and 158 backward (ncu,
 * 2026-12-01); cuDNN's fused attention 275-287 forward and 200-204 backward
 * (gpt-gpu-check --attn, bench/results/2026-12-03-s34). */
double gpt_attention_rate(int kind, int backward) {
    if (kind == GPT_ATTN_CUDNN)
        return backward ? 0.30 : 0.42;
    return 0.24;
}

static double block_work_flops(const gpt_run_t *run, int backward) {
    double N = run->model.N, C = run->model.C, T = run->model.T, attn = 2.0 * N * T * C;
    return backward ? 48.0 * N * C * C + 2.5 * attn / gpt_attention_rate(run->attn_kind, 1)
                    : 24.0 * N * C * C + attn / gpt_attention_rate(run->attn_kind, 0);
}

/* Device-memory bytes of a block's memory-bound kernels as they read and write them,
 * in N x C units, with the matmuls' bias, GELU and residual in cuBLASLt's epilogues
 * (gpt_mm_forward_ep; the plain path moves more). Forward: ln1 6 (one pass over the fp32
 * input, bf16 out), attention 8 (q, k, v in, y out), the attention projection's fp32
 * residual read 4, ln2 6, the fc layer's pre-GELU values written beside its output 8,
 * and with the block's output the last residual read 4. Backward: to bf16 6 twice, the
 * fp32 bias sums 4 twice, the GELU derivative's read of the pre-GELU values 8, the fc
 * bias sum 8, the two LayerNorms 20 each (with their weight sums), attention 20 (delta,
 * dq, dk, dv), the qkv bias sum 6; then the gradient's sum of squares (4 bytes per
 * parameter; a CPU block's copy out of gdev is a DMA on a stream of its own, not the
 * block's work). */
static uint64_t block_forward_bytes(const gpt_run_t *run, int with_out) {
    return (uint64_t)run->model.N * run->model.C * (with_out ? 36 : 32);
}

static uint64_t block_backward_bytes(const gpt_run_t *run, int l, int recompute) {
    uint64_t nc = (uint64_t)run->model.N * run->model.C, params = run->model.lp[l].n;
    return 102 * nc + 4 * params +
           (recompute ? block_forward_bytes(run, 0) : 0);
}

static double head_flops(const gpt_run_t *run) {
    return 6.0 * run->model.N * (double)run->model.C * run->model.Vp;
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
        use_add(u, run->model.lp[l].w, R | S);
    use_add(u, run->model.lp[l].wh, on_cpu(run, l) ? W : R);
}

static void weights_ready(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->model.lp[l];
    if (run->set.compute && on_cpu(run, l))
        kcheck(run, gpt_f32_to_bf16_launch(b16(p->wh), f32(p->w), p->n, run->uv.stream),
               "weights to bf16", l);
    else if (run->ref && on_cpu(run, l))
        gpt_wh_from_master_host(run, l);
}

void gpt_embed_forward(gpt_run_t *run, int side) {
    const layer_params_t *p = &run->model.lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, 0);
    use_add(&u, run->model.tokens, side ? W | S : W);
    use_add(&u, run->model.out[0], W | S);
    cpu_wait(run, 0);
    /* the encoder: wte and wpe rows in (bf16), fp32 out */
    layer_open(run, 0, UVMRT_PHASE_FORWARD, &u, 0, (uint64_t)run->model.N * run->model.C * 8);
    weights_ready(run, 0);
    if (run->set.compute) {
        gcheck(run, gpt_gpu_copy(run->gpu, ptr(run->model.tokens), run->tok_host, 2 * (size_t)run->model.N * sizeof(int)),
               0); /* inputs and targets; the backward's index follows (embed_backward) */
        const uint16_t *wte = b16(p->wh), *wpe = wte + (size_t)run->model.Vp * run->model.C;
        kcheck(run,
               gpt_encoder_forward_launch(f32(run->model.out[0]), ptr(run->model.tokens), wte, wpe,
                                          run->model.B, run->model.T, run->model.C, run->uv.stream),
               "encoder forward", 0);
    } else if (run->ref) {
        gpt_simref_embed_forward(run);
    }
    layer_close(run, 0, UVMRT_PHASE_FORWARD);
}

static void embed_backward(gpt_run_t *run) {
    const layer_params_t *p = &run->model.lp[0];
    use_list_t u = {.n = 0};
    use_add(&u, run->model.tokens, RW); /* the index of the token rows arrives */
    use_add(&u, run->model.dres, R);
    use_add(&u, p->g, RW); /* the head wrote dwte; the embedding adds its rows */
    use_add(&u, run->model.gnorm, RW);
    /* the encoder's backward, then the sum of squares of all of dwte (fp32) */
    layer_open(run, 0, UVMRT_PHASE_BACKWARD, &u, 0,
               (uint64_t)run->model.N * run->model.C * 8 + 4 * p->n);
    if (run->set.compute) {
        int N = run->model.N;
        const int *tk = ptr(run->model.tokens);
        const int *rows = tk + 2 * N, *start = rows + N, *tok = start + N + 1;
        gcheck(run, gpt_gpu_copy(run->gpu, (int *)rows, run->tok_host + 2 * N, (3 * (size_t)N + 1) * sizeof(int)), 0);
        float *dwte = f32(p->g), *dwpe = dwte + (size_t)run->model.Vp * run->model.C;
        kcheck(run,
               gpt_encoder_backward_launch(dwte, dwpe, f32(run->model.dres), rows, start, tok,
                                           run->nbuckets, run->model.B, run->model.T, run->model.C,
                                           run->uv.stream),
               "encoder backward", 0);
        double *parts = ptr(run->model.gnorm);
        /* dwpe rows beyond T stay 0 (zeroed at initialisation) */
        kcheck(run, gpt_sumsq_launch(dwte, p->n, parts, run->uv.stream), "grad norm", 0);
        float *clip = (float *)(parts + (size_t)run->model.nl * GPT_SUMSQ_BLOCKS);
        kcheck(run,
               gpt_clip_finish_launch(parts, run->model.nl * GPT_SUMSQ_BLOCKS,
                                      (float)run->set.opt->grad_clip, clip, run->clip_host,
                                      run->uv.stream),
               "clip", 0);
    } else if (run->ref) {
        gpt_simref_embed_backward(run);
    }
    layer_close(run, 0, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the model: a block */

/* The block's forward arithmetic; the recompute inside its backward (with_out 0)
 * stops before the block's output, which the backward does not need. */
static void block_forward_math(gpt_run_t *run, int l, int with_out) {
    const layer_params_t *p = &run->model.lp[l];
    const block_acts_t *a = &run->model.acts[l - 1];
    int N = run->model.N, C = run->model.C;
    uvmrt_stream_t s = run->uv.stream;
    const uint16_t *wh = b16(p->wh);
    const size_t *o = run->model.boff;
    const float *x = f32(run->model.out[l - 1]);
    float *ln1ms = f32(a->ln1_ms), *ln2ms = f32(a->ln2_ms);
    kcheck(run, gpt_layernorm_forward_launch(b16(a->ln1), ln1ms, ln1ms + N, x, wh + o[P_LN1W],
                                             wh + o[P_LN1B], N, C, s), "ln1", l);
    gcheck(run, gpt_mm_forward_ep(run->gpu, ptr(a->qkv), 0, b16(a->ln1), wh + o[P_QKVW], N, C, 3 * C,
                                  wh + o[P_QKVB], NULL, NULL), l);
    gcheck(run,
           gpt_gpu_attention_forward(run->gpu, b16(a->atty), f32(a->lse), b16(a->qkv), run->model.B,
                                     run->model.T, C, run->model.NH),
           l);
    gcheck(run, gpt_mm_forward_ep(run->gpu, ptr(a->res2), 1, b16(a->atty), wh + o[P_ATTPROJW], N, C, C,
                                  wh + o[P_ATTPROJB], x, NULL), l);
    kcheck(run, gpt_layernorm_forward_launch(b16(a->ln2), ln2ms, ln2ms + N, f32(a->res2),
                                             wh + o[P_LN2W], wh + o[P_LN2B], N, C, s), "ln2", l);
    gcheck(run, gpt_mm_forward_ep(run->gpu, ptr(a->fchg), 0, b16(a->ln2), wh + o[P_FCW], N, C, 4 * C,
                                  wh + o[P_FCB], NULL, b16(a->fch)), l);
    if (!with_out)
        return;
    gcheck(run, gpt_mm_forward_ep(run->gpu, ptr(run->model.out[l]), 1, b16(a->fchg), wh + o[P_FCPROJW], N,
                                  4 * C, C, wh + o[P_FCPROJB], f32(a->res2), NULL), l);
}

void gpt_block_forward(gpt_run_t *run, int l) {
    use_list_t u = {.n = 0};
    uses_weights(run, &u, l);
    use_add(&u, run->model.out[l - 1], R);
    uses_block_acts(&u, &run->model.acts[l - 1], W);
    use_add(&u, run->model.out[l], W);
    cpu_wait(run, l);
    layer_open(run, l, UVMRT_PHASE_FORWARD, &u, block_work_flops(run, 0),
               block_forward_bytes(run, 1));
    weights_ready(run, l);
    if (run->set.compute)
        block_forward_math(run, l, 1);
    else if (run->ref)
        gpt_simref_block_forward(run, l, 1);
    layer_close(run, l, UVMRT_PHASE_FORWARD);
}

static void block_backward(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->model.lp[l];
    const block_acts_t *a = &run->model.acts[l - 1];
    int recompute = recomputes(run, l);
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->model.out[l - 1], R);
    uses_block_acts(&u, a, recompute ? W : R); /* recompute: written, then read */
    uvmrt_tensor_t *ws[] = {run->model.dres, run->model.dbf,   run->model.d4,    run->model.dln,
                            run->model.dqkv, run->model.delta, run->model.colsum};
    for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
        use_add(&u, ws[k], RW);
    /* A CPU block's g lives in host memory. Its matmuls would write it over the link
     * from their epilogues (slowly) and the grad norm would read it back: the block
     * makes its gradient in gdev on the GPU and copies it to g (page-locked) once, at the
     * end, by DMA on a stream of its own, beside the next block's backward: two gdev
     * buffers take turns (block l uses l % 2), so a block waits only for the copy of the
     * block two before it. */
    int to_host = on_cpu(run, l); /* gdev exists: the run has blocks (has_gdev) */
    uvmrt_tensor_t *gdev = run->model.gdev[l % 2];
    if (to_host)
        use_add(&u, gdev, W);
    use_add(&u, p->g, to_host ? W | S : W);
    use_add(&u, run->model.gnorm, RW);
    double flops = block_work_flops(run, 1) + (recompute ? block_work_flops(run, 0) : 0.0);
    layer_open(run, l, UVMRT_PHASE_BACKWARD, &u, flops, block_backward_bytes(run, l, recompute));
    if (run->set.compute) {
        int N = run->model.N, C = run->model.C;
        uvmrt_stream_t s = run->uv.stream;
        const uint16_t *wh = b16(p->wh);
        if (to_host) /* block l + 2's gradient has left this buffer */
            gcheck(run, gpt_gpu_side_wait(run->gpu, l % 2), l);
        float *g = f32(to_host ? gdev : p->g), *dres = f32(run->model.dres),
              *cs = f32(run->model.colsum);
        uint16_t *dbf = b16(run->model.dbf), *d4 = b16(run->model.d4), *dln = b16(run->model.dln);
        uint16_t *dqkv = b16(run->model.dqkv);
        const size_t *o = run->model.boff;
        const float *x = f32(run->model.out[l - 1]), *ln1ms = f32(a->ln1_ms),
                    *ln2ms = f32(a->ln2_ms);
        if (recompute)
            block_forward_math(run, l, 0);
        /* out = res2 + fcproj(gelu(fc(ln2(res2)))): dres is d out, dbf its bf16 copy (made
         * by the LayerNorm backward above: lnf's or block l + 1's ln1) */
        kcheck(run, gpt_bias_grad_f32_launch(g + o[P_FCPROJB], cs, dres, N, C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_FCPROJW], dbf, b16(a->fchg), N, 4 * C, C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp_dgelu(run->gpu, d4, dbf, wh + o[P_FCPROJW], N, 4 * C, C, b16(a->fch)), l);
        kcheck(run, gpt_bias_grad_launch(g + o[P_FCB], cs, d4, N, 4 * C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_FCW], d4, b16(a->ln2), N, C, 4 * C, 0.0f), l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, d4, wh + o[P_FCW], N, C, 4 * C), l);
        kcheck(run, gpt_layernorm_backward_launch(dres, dbf, g + o[P_LN2W], g + o[P_LN2B], cs, dln,
                                                  f32(a->res2), wh + o[P_LN2W], ln2ms, ln2ms + N,
                                                  N, C, 1, s), "ln2 backward", l);
        /* res2 = x + attproj(attention(qkv(ln1(x)))): dres is now d res2, dbf its copy */
        kcheck(run, gpt_bias_grad_f32_launch(g + o[P_ATTPROJB], cs, dres, N, C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_ATTPROJW], dbf, b16(a->atty), N, C, C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, dbf, wh + o[P_ATTPROJW], N, C, C), l);
        gcheck(run,
               gpt_gpu_attention_backward(run->gpu, dqkv, f32(run->model.delta), dln, b16(a->atty),
                                          b16(a->qkv), f32(a->lse), run->model.B, run->model.T, C,
                                          run->model.NH),
               l);
        kcheck(run, gpt_bias_grad_launch(g + o[P_QKVB], cs, dqkv, N, 3 * C, s), "bias grad", l);
        gcheck(run, gpt_mm_dweight(run->gpu, g + o[P_QKVW], dqkv, b16(a->ln1), N, C, 3 * C, 0.0f),
               l);
        gcheck(run, gpt_mm_dinp(run->gpu, dln, dqkv, wh + o[P_QKVW], N, C, 3 * C), l);
        /* dbf for block l - 1 (the embedding's backward reads dres only) */
        kcheck(run, gpt_layernorm_backward_launch(dres, l > 1 ? dbf : NULL, g + o[P_LN1W], g + o[P_LN1B],
                                                  cs, dln, x, wh + o[P_LN1W], ln1ms, ln1ms + N, N, C,
                                                  1, s),
               "ln1 backward", l);
        kcheck(run,
               gpt_sumsq_launch(g, p->n,
                                (double *)ptr(run->model.gnorm) + (size_t)l * GPT_SUMSQ_BLOCKS, s),
               "grad norm", l);
        if (to_host) /* by DMA beside the next block's backward (the optimizer waits for it) */
            gcheck(run, gpt_gpu_side_copy(run->gpu, f32(p->g), g, p->n * sizeof(float), l % 2), l);
        if (to_host && gpt_state_on_disk(run, l)) /* the tier writes g back after the call's stream */
            gcheck(run, gpt_gpu_side_wait(run->gpu, l % 2), l);
    } else if (run->ref) {
        gpt_simref_block_backward(run, l, recompute);
    }
    layer_close(run, l, UVMRT_PHASE_BACKWARD);
}

/* ----------------------------------------------------------------------------
 * the model: the head (final LayerNorm, tied classifier, loss) */

/* forward: lnf, then per chunk of rows: logits, cross-entropy (dlogits in place),
 * the chunk's dlnf and its share of dwte; the mean loss into *loss_dst (mapped) */
static void head_forward(gpt_run_t *run, double *loss_dst) {
    int hl = run->model.nl - 1;
    const layer_params_t *p = &run->model.lp[hl], *pe = &run->model.lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, hl);
    use_add(&u, pe->wh, R);
    use_add(&u, run->model.out[hl - 1], R);
    use_add(&u, run->model.lnf, W);
    use_add(&u, run->model.lnf_ms, W);
    use_add(&u, run->model.tokens, R);
    use_add(&u, run->model.logits, RW);
    use_add(&u, run->model.losses, W);
    use_add(&u, run->model.dln, W);
    use_add(&u, pe->g, W); /* dwte, written here first */
    cpu_wait(run, hl);
    /* lnf (6 N x C: one pass), then the cross-entropy reads and rewrites each chunk's bf16 logits */
    layer_open(run, hl, UVMRT_PHASE_FORWARD, &u, head_flops(run),
               (uint64_t)run->model.N * run->model.C * 6 +
                   (uint64_t)run->model.N * run->model.Vp * 4);
    weights_ready(run, hl);
    if (run->set.compute) {
        int N = run->model.N, C = run->model.C, Vp = run->model.Vp;
        uvmrt_stream_t s = run->uv.stream;
        const uint16_t *wh = b16(p->wh), *wte = b16(pe->wh);
        float *ms = f32(run->model.lnf_ms);
        uint16_t *lnf = b16(run->model.lnf), *logits = b16(run->model.logits),
                 *dlnf = b16(run->model.dln);
        const int *tgt = (const int *)ptr(run->model.tokens) + N;
        kcheck(run,
               gpt_layernorm_forward_launch(lnf, ms, ms + N, f32(run->model.out[hl - 1]), wh,
                                            wh + C, N, C, s),
               "lnf", hl);
        for (int r0 = 0; r0 < N; r0 += run->model.chunk) {
            int R = N - r0 < run->model.chunk ? N - r0 : run->model.chunk;
            gcheck(run, gpt_mm_forward(run->gpu, logits, 0, lnf + (size_t)r0 * C, wte, R, C, Vp,
                                       0.0f), hl);
            kcheck(run,
                   gpt_crossentropy_launch(logits, f32(run->model.losses) + r0, tgt + r0, R,
                                           run->model.V, Vp, 1.0f / (float)N, s),
                   "cross-entropy", hl);
            gcheck(run, gpt_mm_dinp(run->gpu, dlnf + (size_t)r0 * C, logits, wte, R, C, Vp), hl);
            gcheck(run, gpt_mm_dweight(run->gpu, f32(pe->g), logits, lnf + (size_t)r0 * C, R, C,
                                       Vp, r0 == 0 ? 0.0f : 1.0f), hl);
        }
        kcheck(run, gpt_loss_finish_launch(f32(run->model.losses), N, loss_dst, s), "loss", hl);
    } else if (run->ref) {
        gpt_simref_head_forward(run, loss_dst);
    }
    layer_close(run, hl, UVMRT_PHASE_FORWARD);
}

static void head_backward(gpt_run_t *run) {
    int hl = run->model.nl - 1;
    const layer_params_t *p = &run->model.lp[hl];
    use_list_t u = {.n = 0};
    use_add(&u, p->wh, R);
    use_add(&u, run->model.out[hl - 1], R);
    use_add(&u, run->model.lnf_ms, R);
    use_add(&u, run->model.dln, R);
    use_add(&u, run->model.dres, W | S);
    use_add(&u, run->model.dbf, W); /* dres in bf16, for block L's first matmuls */
    use_add(&u, run->model.colsum, RW);
    use_add(&u, p->g, W);
    use_add(&u, run->model.gnorm, RW);
    layer_open(run, hl, UVMRT_PHASE_BACKWARD, &u, 0, (uint64_t)run->model.N * run->model.C * 20);
    if (run->set.compute) {
        int N = run->model.N, C = run->model.C;
        const float *ms = f32(run->model.lnf_ms);
        float *g = f32(p->g);
        kcheck(run,
               gpt_layernorm_backward_launch(f32(run->model.dres), b16(run->model.dbf), g, g + C,
                                             f32(run->model.colsum),
                                             b16(run->model.dln), f32(run->model.out[hl - 1]),
                                             b16(p->wh), ms, ms + N, N, C, 0, run->uv.stream),
               "lnf backward", hl);
        kcheck(run,
               gpt_sumsq_launch(g, p->n,
                                (double *)ptr(run->model.gnorm) + (size_t)hl * GPT_SUMSQ_BLOCKS,
                                run->uv.stream),
               "grad norm", hl);
    } else if (run->ref) {
        gpt_simref_head_backward(run);
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
                      const mlp_adamw_coef_t *cn, const uvmrt_adamw_t *hp) {
    const layer_params_t *p = &run->model.lp[l];
    use_list_t u = {.n = 0};
    use_add(&u, p->w, RW | S);
    use_add(&u, p->m, RW | S);
    use_add(&u, p->v, RW | S);
    use_add(&u, p->g, R | S);
    use_add(&u, p->wh, W | S);
    use_add(&u, run->model.gnorm, R);
    layer_open(run, l, UVMRT_PHASE_OPTIMIZER, &u, 0, (uint64_t)p->n * 30);
    if (run->set.compute) {
        const float *clip = (const float *)((double *)ptr(run->model.gnorm) +
                                            (size_t)run->model.nl * GPT_SUMSQ_BLOCKS);
        size_t nd = p->n_decay;
        if (nd > 0)
            kcheck(run,
                   gpt_adamw_launch(f32(p->w), f32(p->m), f32(p->v), f32(p->g), b16(p->wh), nd, cd,
                                    clip, run->uv.stream),
                   "adamw", l);
        if (p->n > nd)
            kcheck(run,
                   gpt_adamw_launch(f32(p->w) + nd, f32(p->m) + nd, f32(p->v) + nd, f32(p->g) + nd,
                                    b16(p->wh) + nd, p->n - nd, cn, clip, run->uv.stream),
                   "adamw", l);
    } else if (run->ref) {
        gpt_simref_adamw(run, l, hp);
    }
    layer_close(run, l, UVMRT_PHASE_OPTIMIZER);
}

/* Layer l's AdamW with the library's CPU AdamW, on this thread (w, m, v with g; wh is
 * made from w on the GPU in the next forward), once the backward has finished: the clip
 * factor is in clip_host then. */
static void cpu_adamw_here(gpt_run_t *run, int l, const uvmrt_adamw_t *hp) {
    const layer_params_t *p = &run->model.lp[l];
    gcheck(run, gpt_gpu_sync(run->gpu), l);
    gpt_cpuopt_layer_t cl = {l, f32(p->w), f32(p->m), f32(p->v), f32(p->g), b16(p->wh), p->n, p->n_decay};
    double t0 = cli_now_s();
    uvmrt_status_t st = gpt_cpuopt_update(&cl, hp, run->clip_host[1]);
    run->cpu_busy_s += cli_now_s() - t0;
    if (st != UVMRT_OK)
        gpt_run_fail(run, "layer %d: uvmrt_adamw_cpu failed: %s", l, uvmrt_status_str(st));
}

/* Layer l's AdamW on the CPU, declared: its own stream, 28 bytes of host memory per
 * parameter (w, m, v read and written, g read), and no uses (the thread reads host
 * memory, not the GPU's) but those on the disk tier (the moments; --spill state: w and
 * g too): the tier reads them back before the call and writes them after it, so the
 * update runs in the call, on this thread, not on the CPU thread (which leaves such
 * layers out). sim: it takes that at the profile's host memory rate, sharing host
 * memory with the link's transfers; cuda: declared only, or the update itself for
 * moments on the disk. */
static void cpu_optimizer_declare(gpt_run_t *run, int l, const uvmrt_adamw_t *hp) {
    const layer_params_t *p = &run->model.lp[l];
    uvmrt_use_t state[4] = {{p->m, UVMRT_USE_READWRITE}, {p->v, UVMRT_USE_READWRITE},
                            {p->w, UVMRT_USE_READWRITE}, {p->g, UVMRT_USE_READ}};
    int on_disk = gpt_moments_on_disk(run, l);
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = l,
        .phase = UVMRT_PHASE_OPTIMIZER,
        .stream = run->uv.cpu_stream,
        .no_default_uses = 1,
        .uses = on_disk ? state : NULL,
        .n_uses = !on_disk ? 0 : gpt_state_on_disk(run, l) ? 4 : 2,
        .host_bytes = cli_adamw_host_bytes(run->uv.profile, p->n),
        .after = run->uv.stream, /* the thread starts once the backward is done */
    };
    uvmrt_status_t st = uvmrt_layer_begin(run->uv.ctx, &call);
    if (st != UVMRT_OK && (run->uv.fail_st = st) != UVMRT_OK)
        gpt_run_fail(run, "uvmrt_layer_begin(layer %d, optimizer on the CPU) failed: %s (%s)", l,
                 uvmrt_status_str(st), uvmrt_status_name(st));
    if (run->ref) /* sim: the update is this call's work */
        gpt_simref_adamw(run, l, hp);
    else if (run->set.compute && on_disk)
        cpu_adamw_here(run, l, hp);
    layer_close(run, l, UVMRT_PHASE_OPTIMIZER);
}

/* ----------------------------------------------------------------------------
 * inference: the head for sampling (logits of one row, no loss) */

void gpt_head_sample(gpt_run_t *run, int row) {
    int hl = run->model.nl - 1;
    const layer_params_t *p = &run->model.lp[hl], *pe = &run->model.lp[0];
    use_list_t u = {.n = 0};
    uses_weights(run, &u, hl);
    use_add(&u, pe->wh, R);
    use_add(&u, run->model.out[hl - 1], R);
    use_add(&u, run->model.lnf, W);
    use_add(&u, run->model.lnf_ms, W);
    use_add(&u, run->model.logits, W);
    cpu_wait(run, hl);
    layer_open(run, hl, UVMRT_PHASE_FORWARD, &u, 2.0 * run->model.C * (double)run->model.Vp, 0);
    weights_ready(run, hl);
    if (run->set.compute) {
        int N = run->model.N, C = run->model.C;
        const uint16_t *wh = b16(p->wh), *wte = b16(pe->wh);
        float *ms = f32(run->model.lnf_ms);
        uint16_t *lnf = b16(run->model.lnf);
        kcheck(run,
               gpt_layernorm_forward_launch(lnf, ms, ms + N, f32(run->model.out[hl - 1]), wh,
                                            wh + C, N, C, run->uv.stream),
               "lnf", hl);
        gcheck(run,
               gpt_mm_forward(run->gpu, ptr(run->model.logits), 0, lnf + (size_t)row * C, wte, 1, C,
                              run->model.Vp, 0.0f),
               hl);
        /* copied out inside the call: the plan may drop the logits tensor after it (its
         * next use overwrites it), so the host must not read the managed memory later */
        gcheck(run,
               gpt_gpu_copy(run->gpu, run->logits_host, ptr(run->model.logits),
                            (size_t)run->model.Vp * sizeof(uint16_t)),
               hl);
    } else if (run->ref) {
        gpt_simref_head_sample(run, row);
    }
    layer_close(run, hl, UVMRT_PHASE_FORWARD);
}

/* ----------------------------------------------------------------------------
 * the steps: training, validation, sampling; each one uvmrt step. A validation or
 * sampling step is a different sequence of layer calls: uvmrt runs it like demand
 * and records again, and the next training step records the training sequence
 * again (both marked as recording steps, left out of the medians). */

double gpt_step_flops(const gpt_run_t *run) { /* forward + backward, no recompute */
    return 3.0 * (run->model.L * block_forward_flops(run)) + head_flops(run);
}

void gpt_uv_step_begin(gpt_run_t *run) { UV_CHECK(run, uvmrt_step_begin(run->uv.ctx)); }

/* After a step: each CPU layer's AdamW time of the thread's previous step (done: this
 * step's forwards waited for it) goes to the runtime, which times that work by it in
 * the record and in a review's re-plan. */
static void host_work_report(gpt_run_t *run) {
    double sec;
    for (int l = 0; run->cpu && l < run->model.nl; l++)
        if (gpt_cpuopt_layer_time(run->cpu, l, run->cpu_last - 1, &sec)) {
            uvmrt_status_t st = uvmrt_host_work_measured(run->uv.ctx, l, UVMRT_PHASE_OPTIMIZER,
                                                         (uint64_t)(sec * 1e9) + 1);
            if (st != UVMRT_OK && (run->uv.fail_st = st) != UVMRT_OK)
                gpt_run_fail(run, "uvmrt_host_work_measured(layer %d) failed: %s (%s)", l,
                             uvmrt_status_str(st), uvmrt_status_name(st));
        }
}

void gpt_uv_step_end(gpt_run_t *run) {
    UV_CHECK(run, uvmrt_step_end(run->uv.ctx));
    run->uv.uv_steps++;
}

void gpt_forward(gpt_run_t *run, double *loss_dst, int side) {
    gpt_embed_forward(run, side);
    for (int l = 1; l <= run->model.L; l++)
        gpt_block_forward(run, l);
    head_forward(run, loss_dst);
}

/* A training step's layer calls (and, with compute, its work): forward, backward,
 * AdamW; the batch is in place. A rehearsal runs these on uvmrt's model. */
void gpt_step_calls(gpt_run_t *run, int s, double lr) {
    const gpt_options_t *opt = run->set.opt;
    gpt_uv_step_begin(run);
    gpt_forward(run, run->loss_host ? &run->loss_host[s] : NULL, 0);
    if (run->tok_host) /* on the host while the GPU runs the forward (a rehearsal has no tokens) */
        gpt_tokens_index(run);
    head_backward(run);
    for (int l = run->model.L; l >= 1; l--)
        block_backward(run, l);
    embed_backward(run);
    if (run->set.compute) /* the CPU blocks' gradients are on the host before anyone reads them */
        gcheck(run, gpt_gpu_side_wait(run->gpu, -1), -1);
    mlp_adamw_coef_t cd = adamw_coef(lr, ADAM_WD, run->adam_t + 1);
    mlp_adamw_coef_t cn = adamw_coef(lr, 0.0, run->adam_t + 1);
    if (s == run->set.first && opt->dump_grads && gpt_computes(run)) {
        if (run->set.compute)
            gcheck(run, gpt_gpu_sync(run->gpu), -1);
        gpt_weights_dump(run, opt->dump_grads, 1);
    }
    uvmrt_adamw_t hp = adamw_hp(lr, run->adam_t + 1);
    if (run->cpu) { /* first: the thread starts on it while the GPU updates its layers */
        gcheck(run, gpt_cpuopt_submit(run->cpu, run->gpu, run->cpu_last + 1, &hp), -1);
        run->cpu_last++;
    }
    for (int l = 0; l < run->model.nl; l++)
        if (on_cpu(run, l))
            cpu_optimizer_declare(run, l, &hp);
    for (int l = 0; l < run->model.nl; l++)
        if (!on_cpu(run, l))
            optimizer(run, l, &cd, &cn, &hp);
    gpt_uv_step_end(run);
    run->adam_t++;
    host_work_report(run);
}

/* One training step: batch, then its calls. */
static void train_step(gpt_run_t *run, int s, double lr) {
    tokens_prepare(run, s);
    gpt_step_calls(run, s, lr);
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
    const gpt_options_t *opt = run->set.opt;
    double flops = gpt_step_flops(run), peak = run->uv.profile ? run->uv.profile->flops : 0.0;
    if (!(peak > 0))
        peak = 790e12;
    double t_start = cli_now_s();
    int saved = -1;
    for (int s = run->set.first; s < run->set.stop; s++) {
        double lr = gpt_lr_at(opt, s);
        run->uv.recording[s] = s == run->set.first || run->uv.side_step;
        run->uv.side_step = 0;
        train_step(run, s, lr);
        run->end_s[s] = cli_now_s();

        if (gpt_computes(run)) {
            run->losses_out[s] = run->loss_host[s]; /* step_end waited for the stream */
            run->norms[s] = run->clip_host[0];
        }
        uvmrt_step_stats_t *st = &run->uv.stats[s];
        st->struct_size = sizeof *st;
        UV_CHECK(run, uvmrt_step_stats_get(run->uv.ctx, run->uv.uv_steps - 1, st));
        double ms = (double)st->step_ns / 1e6;
        double in = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
        double out = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
        double tflops = ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0;
        int done = s + 1 - run->set.first;
        double elapsed = cli_now_s() - t_start, eta = elapsed / done * (run->set.stop - s - 1);
        char loss_text[48] = "-";
        if (gpt_computes(run))
            snprintf(loss_text, sizeof loss_text, "%.6f  norm %.3f", run->losses_out[s],
                     run->norms[s]);
        printf("step %d/%d  loss %s  lr %.3g  %.1f ms  %.0f tokens/s  %.1f TFLOP/s  MFU %.1f%%  "
               "in %.2f GB  out %.2f GB  faults %" PRIu64 "  ETA %.0f s%s\n",
               s + 1, opt->c.steps, loss_text, lr, ms, ms > 0 ? run->model.N / (ms * 1e-3) : 0.0,
               tflops, 100.0 * tflops * 1e12 / peak, in, out, st->fault_count, eta,
               run->uv.recording[s] ? "  (recording step)" : "");
        fflush(stdout);
        if (loss_log && gpt_computes(run))
            fprintf(loss_log, "%d %a\n", s + 1, run->losses_out[s]);
        else if (loss_log) /* nothing computed: no number, not a zero */
            fprintf(loss_log, "%d null\n", s + 1);
        gpt_choice_review(run, s);

        int last = s + 1 == run->set.stop;
        if (gpt_validates_after(run, s))
            gpt_validate(run, s);
        if (gpt_samples_after(run, s))
            gpt_sample_run(run, s);
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
            run->set.stop = s + 1;
            break;
        }
    }
    gpt_cpu_drain(run); /* the last step's updates */
}

/* ----------------------------------------------------------------------------
 * setup, results, main */

/* On sim: whether the CPU reference computes (gpt_simref.c), and why not. */
static void sim_math_note(const gpt_run_t *run) {
    if (gpt_simref_fits(run)) {
        printf("sim: computing on the CPU with the reference implementation (slow): %.3g "
               "parameters x tokens per step (at most %.3g)\n",
               gpt_simref_work(run), GPT_SIM_MATH_MAX);
        return;
    }
    printf("sim backend: the schedule only, no arithmetic (no losses); times and traffic are "
           "the model's\n");
    printf("sim: no arithmetic: %.3g parameters x tokens per step is over the CPU "
           "reference's %.3g (about a second a step on one core); a small shape computes, "
           "e.g. --layers 2 --channels 64 --heads 4 --batch 4 --seq 64\n",
           gpt_simref_work(run), GPT_SIM_MATH_MAX);
}

/* The one line that says what the disk tier holds, and why (--spill). */
static void tier_plan_print(const gpt_run_t *run) {
    int ml, sl;
    uint64_t b = gpt_tier_bytes(run, &ml, &sl), host = uvmrt_context_host_budget(run->uv.ctx);
    if (run->set.opt->spill != GPT_SPILL_AUTO)
        printf("disk tier: %d CPU layers' %s (%.2f GiB; --spill %s)\n", ml + sl, sl > 0 ? "state" : "moments",
               (double)b / GIB, sl > 0 ? "state" : "moments");
    else if (ml + sl == 0)
        printf("disk tier: nothing on it (--spill auto): %s\n",
               run->set.cpu_layers == 0 ? "no layer's AdamW runs on the CPU"
               : host == 0             ? "no host budget to make room in"
                                       : "the host budget holds every layer's state");
    else
        printf("disk tier: %d CPU layers' moments and %d layers' state, %.2f GiB (--spill auto: the least "
               "that brings the host memory within the host budget of %.2f GiB)\n",
               ml, sl, (double)b / GIB, (double)host / GIB);
}

/* Training on several GPUs is not built yet (README: Several GPUs (in progress)): N
 * processes would each train the whole model on the same data. A launcher's variables
 * that say so, or that contradict themselves, end the run before any work. */
static void refuse_several_processes(void) {
    launch_t l;
    char err[1024];
    if (launch_from_env(&l, NULL, NULL, err, sizeof err) != 0) {
        fprintf(stderr, PROG ": the launch environment: %s\n", err);
        exit(2);
    }
    if (l.world > 1) {
        fprintf(stderr, PROG ": launched as rank %d of %d (%s): training on several GPUs is not "
                "built yet (README: Several GPUs (in progress)); run one process\n", l.rank,
                l.world, l.launcher);
        exit(2);
    }
}

int main(int argc, char **argv) {
    cli_program = PROG;
    /* a line at a time, also into a file or pipe: a long start or a killed run still
     * shows how far it got */
    setvbuf(stdout, NULL, _IOLBF, 0);
    gpt_options_t opt;
    gpt_options_parse(argc, argv, &opt);
    cli_outputs_check(&opt.c); /* an output that cannot be written fails now, not after the steps */
    cli_output_check("--dump-weights", opt.dump_weights);
    cli_output_check("--dump-grads", opt.dump_grads);
    cli_note_env_overrides();
    refuse_several_processes();

    gpt_run_t run = {.set = {.opt = &opt, .knob_cpu = -1, .knob_rec = -1},
                     .cpu_last = -1,
                     .uv = {.cpu_stream = (uvmrt_stream_t)&gpt_sim_cpu_stream,
                            .stream = (uvmrt_stream_t)&gpt_sim_gpu_stream}};
    gpt_shape_init(&run);
    size_t S = (size_t)opt.c.steps;
    run.losses_out = calloc(S, sizeof *run.losses_out);
    run.end_s = calloc(S, sizeof *run.end_s);
    run.norms = calloc(S, sizeof *run.norms);
    run.uv.stats = calloc(S, sizeof *run.uv.stats);
    run.uv.recording = calloc(S, 1);
    run.val_step = calloc(S, sizeof *run.val_step);
    run.val_loss = calloc(S, sizeof *run.val_loss);
    if (!run.losses_out || !run.end_s || !run.norms || !run.uv.stats || !run.uv.recording || !run.val_step ||
        !run.val_loss) {
        fprintf(stderr, PROG ": out of host memory\n");
        gpt_steps_free(&run);
        return 1;
    }
    run.isa = mlp_isa_best();
    run.rng = mlp_splitmix64(opt.c.seed ^ 0x5a3d1e0full);
    run.set.stop = opt.stop_at;
    gpt_shape_t shape = {run.model.V, run.model.Vp, run.model.maxT,
                         run.model.L, run.model.C,  run.model.NH};
    double params = (double)gpt_num_params(&shape);
    char cpu_text[32] = "auto", rec_text[32] = "auto";
    if (opt.cpu_layers != GPT_AUTO)
        snprintf(cpu_text, sizeof cpu_text, "%d", opt.cpu_layers);
    if (opt.recompute != GPT_AUTO)
        snprintf(rec_text, sizeof rec_text, "%d", opt.recompute);
    printf(PROG ": GPT-2 %d layers, %d channels, %d heads, vocab %d (padded %d), %.1f M "
                "parameters; batch %d x %d tokens; AdamW on the CPU: top %s of %d layers; "
                "recompute: %s of %d blocks; %d steps, lr %g, seed %" PRIu64 "; tokens: %s\n",
           run.model.L, run.model.C, run.model.NH, run.model.V, run.model.Vp, params / 1e6,
           run.model.B, run.model.T, cpu_text, run.model.nl, rec_text, run.model.L, opt.c.steps,
           opt.lr, opt.c.seed, gpt_source_name(opt.source));

    gpt_run_ckpt_start(&run); /* --checkpoint DIR usable, and this run's to write */
    gpt_run_data_open(&run); /* before the context: a bad file costs no GPU setup */
    run.uv.ctx = gpt_context_open(&opt);
    run.uv.backend = uvmrt_context_backend(run.uv.ctx);
    run.uv.policy = uvmrt_context_policy(run.uv.ctx);
    run.uv.profile = uvmrt_context_profile(run.uv.ctx);
    /* the attention's declared rate: cuDNN's where a GPU run will try it (gpt_run_open_gpu
     * corrects it when cuDNN cannot run there), or where asked for on sim */
    run.attn_kind = opt.attention == GPT_ATTN_CUDNN || (opt.attention == GPT_ATTN_AUTO &&
                                                              run.uv.backend == UVMRT_BACKEND_CUDA &&
                                                              gpt_gpu_cudnn_built())
                         ? GPT_ATTN_CUDNN
                         : GPT_ATTN_MMA;
    gpt_choose_auto(&run); /* before the tensors: they depend on the values */
    gpt_tier_plan(&run);
    printf("policy %s on %s%s%s, budget %.2f GiB, tensors %.2f GiB\n",
           uvmrt_policy_name(run.uv.policy), uvmrt_backend_name(run.uv.backend),
           run.uv.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.uv.backend == UVMRT_BACKEND_SIM && run.uv.profile ? run.uv.profile->name : "",
           (double)uvmrt_context_budget(run.uv.ctx) / GIB,
           (double)gpt_planned_managed_bytes(&run) / GIB);
    if (!opt.c.quiet) {
        uvmrt_context_print_config(run.uv.ctx, stdout);
        fflush(stdout);
    }
    if (uvmrt_context_has_disk_tier(run.uv.ctx))
        tier_plan_print(&run);
    if (cli_host_fits(run.uv.ctx, gpt_planned_managed_bytes(&run), gpt_host_homed_bytes(&run),
                      gpt_tier_off_bytes(&run)) != 0)
        gpt_run_fail(&run, "nothing allocated: the tensors do not fit the host budget");
    if (run.uv.backend == UVMRT_BACKEND_CUDA) {
        if (!gpt_gpu_built())
            gpt_run_fail(&run, "UVMRT_BACKEND selected the cuda backend, but " PROG
                           " was built without CUDA and cuBLAS");
        gpt_run_open_gpu(&run);
        run.set.compute = 1;
        /* the process's own host memory before its tensors (the CUDA context, cuBLAS, the
         * program's buffers) is in its resident set too: declared outside uvmrt, so that
         * the host need uvmrt reports is what the process holds */
        uint64_t base = cli_process_rss();
        if (base > 0)
            UV_CHECK(&run, uvmrt_context_set_host_external_bytes(run.uv.ctx, base));
        uint64_t need = cli_host_need(run.uv.ctx, gpt_planned_managed_bytes(&run), gpt_host_homed_bytes(&run),
                                      gpt_tier_off_bytes(&run));
        uint64_t host = uvmrt_context_host_budget(run.uv.ctx);
        if (host != 0 && need > host)
            fprintf(stderr, PROG ": note: with the process's own %.2f GiB (CUDA, cuBLAS, the program) the host "
                            "need is %.2f GiB, over the host budget of %.2f GiB\n",
                    (double)base / GIB, (double)need / GIB, (double)host / GIB);
    } else {
        sim_math_note(&run);
        if (!gpt_simref_fits(&run) && (opt.dump_weights || opt.dump_grads || opt.init_weights))
            fprintf(stderr, PROG ": note: --dump-weights, --dump-grads and --init-weights need "
                            "the arithmetic; ignored on sim for this shape\n");
        /* the batches are still read (bad data fails the same way) */
        run.tok_host = calloc(5 * (size_t)run.model.N + 1, sizeof *run.tok_host);
        if (run.tok_host == NULL)
            gpt_run_fail(&run, "out of host memory");
    }
    double t_alloc = cli_now_s();
    gpt_net_alloc(&run);
    if (!opt.c.quiet)
        printf("  allocated and placed the tensors in %.1f s\n", cli_now_s() - t_alloc);
    int moments_layers, state_layers;
    gpt_tier_bytes(&run, &moments_layers, &state_layers);
    if (state_layers > 0 && (opt.dump_weights || opt.dump_grads || opt.init_weights))
        gpt_run_fail(&run, "--dump-weights, --dump-grads and --init-weights read or write every layer's master "
                           "weights or gradients at once: not with CPU layers' state on the disk tier (--spill "
                           "state, or auto's plan: use --spill moments, or a larger --host-budget)");
    if (run.uv.backend != UVMRT_BACKEND_CUDA && gpt_simref_fits(&run))
        gpt_simref_open(&run);
    if (gpt_computes(&run)) {
        if (opt.init_weights)
            gpt_weights_load(&run, opt.init_weights);
        else
            gpt_weights_init(&run);
        if (opt.dump_weights)
            gpt_weights_dump(&run, opt.dump_weights, 0);
    }
    if (opt.resume)
        gpt_run_ckpt_resume(&run); /* after the initialisation, which it overwrites */
    if (run.set.compute)
        gpt_cpu_opt_open(&run);
    if (run.set.first >= run.set.stop) {
        printf("nothing to train: the checkpoint is at step %d and the run ends at step %d\n",
               run.set.first, run.set.stop);
        unsigned long errors = cli_library_errors();
        gpt_run_close(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
        gpt_steps_free(&run);
        return cli_stdout_close(cli_context_outputs_failed(errors, NULL));
    }

    FILE *loss_log = NULL;
    if (opt.c.loss_log && (loss_log = cli_output_open("--loss-log", opt.c.loss_log)) == NULL)
        gpt_run_fail(&run, "no step was run: --loss-log must be writable");
    if (opt.ckpt_dir)
        stop_signals_install();
    /* uvmrt-top's ETA: the uvmrt steps so far and those the loop will make */
    UV_CHECK(&run, uvmrt_context_set_total_steps(run.uv.ctx,
                                                 run.uv.uv_steps + gpt_uv_steps_planned(&run)));
    run_steps(&run, loss_log);
    int status = stop_signal ? 128 + (int)stop_signal : 0; /* the shell's code for it */
    if (loss_log && cli_output_close("--loss-log", opt.c.loss_log, loss_log) != 0)
        status = 1;

    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    UV_CHECK(&run, uvmrt_summary_get(run.uv.ctx, &sum));
    medians_t m = gpt_run_medians(&run);
    if (gpt_outputs_write(&run, &m, &sum) != 0)
        status = 1;
    double tflops = m.ms > 0 ? gpt_step_flops(&run) / (m.ms * 1e-3) / 1e12 : 0.0;
    printf("summary: %.1f ms/step, %.0f tokens/s, %.1f TFLOP/s, in %.2f GB, out %.2f GB, faults "
           "%.0f per step (medians of %d steps of %d..%d, recording steps left out); peak "
           "resident %.2f GiB + %.2f GiB device workspace; budget %.2f GiB",
           m.ms, m.ms > 0 ? run.model.N / (m.ms * 1e-3) : 0.0, tflops, m.in_gb, m.out_gb, m.faults,
           m.n, run.set.first + 1, run.set.stop, (double)sum.peak_resident_bytes / GIB,
           (double)run.model.device_bytes / GIB, (double)sum.budget_bytes / GIB);
    printf("; AdamW of %d of %d layers on the CPU, %d of %d blocks recompute", run.set.cpu_layers,
           run.model.nl, run.set.recompute, run.model.L);
    if (gpt_computes(&run))
        printf("; loss %.6f -> %.6f", run.losses_out[run.set.first],
               run.losses_out[run.set.stop - 1]);
    if (run.n_val && gpt_computes(&run))
        printf("; val loss %.6f", run.val_loss[run.n_val - 1]);
    printf("\n");
    if (run.set.compute && (run.cpu || run.cpu_busy_s > 0))
        printf("cpu optimizer: %.1f ms of AdamW per step (path %s)\n",
               (run.cpu_busy_s + gpt_cpuopt_busy_s(run.cpu)) * 1e3 / (run.set.stop - run.set.first),
               mlp_isa_name(run.isa));
    if (gpt_computes(&run))
        for (int s = run.set.first; s < run.set.stop; s++)
            if (!isfinite(run.losses_out[s])) {
                fprintf(stderr, PROG ": loss of step %d is not finite\n", s + 1);
                status = 1;
                break;
            }
    unsigned long errors = cli_library_errors();
    gpt_run_close(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
    if (cli_context_outputs_failed(errors, &sum))
        status = 1;
    gpt_steps_free(&run);
    return cli_stdout_close(status);
}
