/*
 * gpt_weights.c -- uvmrt-gpt: the weights: GPT-2's initialisation, and the llm.c-order
 * weight files (--init-weights, --dump-weights, --dump-grads). See gpt.h.
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

#include "../common/input_file.h"
#include "gpt_kernels.h"
#include "gpt_ref.h"
#include "../common/train_math.h"
#include "gpt.h"

static const int DUMP_MAGIC = 20241201;


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
    size_t C = (size_t)run->model.C;
    if (t == 0)
        *layer = 0, *off = 0, *count = (size_t)run->model.Vp * C;
    else if (t == 1)
        *layer = 0, *off = (size_t)run->model.Vp * C, *count = (size_t)run->model.maxT * C;
    else if (t >= 14)
        *layer = run->model.nl - 1, *off = (size_t)(t - 14) * C, *count = C;
    else {
        *layer = 1 + l, *off = run->model.boff[block_of[t]], *count = run->model.bsize[block_of[t]];
        return 1;
    }
    return 0;
}

static int piece_repeats(const gpt_run_t *run, int t) {
    return t >= 2 && t < 14 ? run->model.L : 1;
}

/* Layer l's bf16 copy from its fp32 master weights, on the host. */
void gpt_wh_from_master_host(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->model.lp[l];
    const float *w = f32(p->w);
    uint16_t *wh = b16(p->wh);
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < p->n; k++)
        wh[k] = mlp_f32_to_bf16(w[k]);
}

/* Layer l from its master weights as step 1 needs it: the bf16 copy made, the moments
 * zero, and the embedding's gradient (wpe rows beyond T never get one); those on the
 * disk tier are zero in their files already (put there as zeros when new). The
 * other layers' gradients are written whole by each backward before anything reads
 * them, and a CPU layer's bf16 copy by each forward from w (gpt.c, weights_ready):
 * made here they would only fill host pages the plan does not count (the start's
 * resident set over the plan's host need). */
static void layer_start_from_weights(gpt_run_t *run, int l) {
    const layer_params_t *p = &run->model.lp[l];
    if (!on_cpu(run, l))
        gpt_wh_from_master_host(run, l);
    uvmrt_tensor_t *z[3] = {p->m, p->v, l == 0 ? p->g : NULL};
    for (int i = 0; i < 3; i++) {
        if (z[i] == NULL || uvmrt_tensor_tier(z[i]) == UVMRT_TIER_DISK)
            continue;
        float *x = f32(z[i]);
#pragma omp parallel for schedule(static)
        for (size_t k = 0; k < p->n; k++)
            x[k] = 0.0f;
    }
}

static void layers_start_from_weights(gpt_run_t *run) {
    for (int l = 0; l < run->model.nl; l++)
        layer_start_from_weights(run, l);
}

void gpt_weights_init(gpt_run_t *run) {
    uint64_t seed = run->set.opt->c.seed;
    float std_res = 0.02f / sqrtf(2.0f * (float)run->model.L);
    double t0 = cli_now_s();
    /* a layer at a time: master weights on the disk tier come to host memory one layer
     * at a time (the host budget holds the tier's window, not every layer) */
    for (int at = 0; at < run->model.nl; at++) {
        int held = gpt_tier_hold(run, run->model.lp[at].w);
        for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++)
            for (int l = 0; l < piece_repeats(run, t); l++) {
                int layer;
                size_t off, count;
                piece(run, t, l, &layer, &off, &count);
                if (layer != at)
                    continue;
                float *w = f32(run->model.lp[layer].w) + off;
                uint64_t id = (uint64_t)t * 4096 + (uint64_t)l;
                int is_lnw = t == 2 || t == 8 || t == 14;
                int is_bias = t == 3 || t == 5 || t == 7 || t == 9 || t == 11 || t == 13 || t == 15;
                float std = (t == 6 || t == 12) ? std_res : 0.02f;
                size_t real =
                    t == 0 ? (size_t)run->model.V * run->model.C : count; /* padded rows stay 0 */
#pragma omp parallel for schedule(static)
                for (size_t k = 0; k < count; k++)
                    w[k] = is_lnw ? 1.0f
                           : is_bias || k >= real ? 0.0f
                                                  : std * normal_at(seed, id, k);
            }
        layer_start_from_weights(run, at);
        gpt_tier_release(run, run->model.lp[at].w, held);
    }
    if (!run->set.opt->c.quiet)
        printf("  initialised the weights on the host in %.1f s\n", cli_now_s() - t0);
}

static void header_make(const gpt_run_t *run, int32_t h[256]) {
    memset(h, 0, 256 * sizeof *h);
    h[0] = DUMP_MAGIC, h[1] = 1, h[2] = run->model.maxT, h[3] = run->model.V, h[4] = run->model.L;
    h[5] = run->model.C, h[6] = run->model.NH, h[7] = run->model.Vp;
}

/* Writes the 16 tensors of each layer's `which` array (0: master weights, 1:
 * gradients) in the --dump-weights format. */
void gpt_weights_dump(gpt_run_t *run, const char *path, int which) {
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
            const float *src = f32(which ? run->model.lp[layer].g : run->model.lp[layer].w) + off;
            ok = fwrite(src, sizeof(float), count, f) == count;
        }
    if (!ok) {
        int e = errno;
        cli_output_abandon(f);
        gpt_run_fail(run, "%s %s: write failed: %s", flag, path, strerror(e));
    }
    if (cli_output_close(flag, path, f) != 0)
        gpt_run_fail(run, "%s %s was not written (see above)", flag, path);
    if (!run->set.opt->c.quiet)
        printf("  wrote %s to %s\n", which ? "step 1's gradients" : "the weights", path);
}

void gpt_weights_load(gpt_run_t *run, const char *path) {
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
            gpt_run_fail(run,
                         "--init-weights %s: header %s is %d, expected %d (this model: "
                         "--seq/maxT %d, vocab %d, %d layers, %d channels, %d heads)",
                         path, field[k], h[k], want[k], run->model.maxT, run->model.V, run->model.L,
                         run->model.C, run->model.NH);
        }
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++)
        for (int l = 0; l < piece_repeats(run, t); l++) {
            int layer;
            size_t off, count;
            piece(run, t, l, &layer, &off, &count);
            if (fread(f32(run->model.lp[layer].w) + off, sizeof(float), count, f) != count) {
                fclose(f);
                gpt_run_fail(run, "--init-weights %s: truncated in tensor %s (block %d)", path,
                         gpt_param_names[t], l);
            }
        }
    fclose(f);
    layers_start_from_weights(run);
    if (!run->set.opt->c.quiet)
        printf("  loaded the weights from %s\n", path);
}
