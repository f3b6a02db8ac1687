/*
 * gpt_side.c -- uvmrt-gpt: the side steps between training steps: validation and
 * sampling. See gpt.h.
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
#include "gpt_tokens.h"
#include "gpt.h"

/* The validation loss after training step s: val_n batches from the start of the
 * validation data, forward only (the gradients it writes are rewritten by the next
 * step's head before anything reads them). */
void gpt_validate(gpt_run_t *run, int s) {
    char err[512];
    if (gpt_data_rewind(run->val, err, sizeof err) != 0)
        gpt_run_fail(run, "validation data: %s", err);
    double sum = 0.0;
    double t0 = cli_now_s();
    for (int k = 0; k < run->val_n; k++) {
        int *inp = run->tok_host, *tgt = inp + run->model.N;
        if (gpt_data_next(run->val, (int32_t *)inp, (int32_t *)tgt, err, sizeof err) != 0)
            gpt_run_fail(run, "validation data, batch %d: %s", k + 1, err);
        double *dst = run->loss_host ? &run->loss_host[run->set.opt->c.steps + k] : NULL;
        gpt_uv_step_begin(run);
        gpt_forward(run, dst, 1);
        gpt_uv_step_end(run); /* waits for the stream: *dst is written */
        if (dst)
            sum += *dst;
    }
    run->uv.side_step = 1;
    double loss = sum / run->val_n;
    run->val_step[run->n_val] = s + 1;
    run->val_loss[run->n_val] = loss;
    run->n_val++;
    if (gpt_computes(run))
        printf("val step %d: loss %.6f (%d batches of %d x %d, %.1f s)\n", s + 1, loss, run->val_n,
               run->model.B, run->model.T, cli_now_s() - t0);
    else
        printf("val step %d: loss - (sim: %d forward-only batches, no arithmetic)\n", s + 1,
               run->val_n);
    fflush(stdout);
}

/* The next token from the logits of one row (V of them): the largest (greedy), or
 * one of the top_k drawn by their softmax. */
static int sample_pick(gpt_run_t *run, const uint16_t *logits) {
    int V = run->model.V, k = run->set.opt->top_k;
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
            fputs(run->set.opt->source == GPT_SRC_TEXT ? "" : "| ", stdout);
        if (run->set.opt->source == GPT_SRC_TEXT) {
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
void gpt_sample_run(gpt_run_t *run, int s) {
    const gpt_options_t *opt = run->set.opt;
    if (!gpt_computes(run)) {
        printf("sample after step %d: sampling needs the arithmetic (on sim only a small "
               "shape computes, on the CPU); skipped\n", s + 1);
        return;
    }
    int n = opt->sample, len = run->prompt_len, T = run->model.T;
    int *seq = malloc((size_t)(len + n) * sizeof *seq);
    if (seq == NULL)
        gpt_run_fail(run, "out of host memory");
    memcpy(seq, run->prompt, (size_t)len * sizeof *seq);
    double t0 = cli_now_s();
    for (int i = 0; i < n; i++, len++) {
        int w0 = len > T ? len - T : 0, wl = len - w0;
        memset(run->tok_host, 0, (5 * (size_t)run->model.N + 1) * sizeof(int));
        memcpy(run->tok_host, seq + w0, (size_t)wl * sizeof *seq);
        gpt_uv_step_begin(run);
        /* after a validation pass this follows its plan up to the head, which reads a
         * subset of what validation's head reads: nothing it needs was dropped */
        gpt_embed_forward(run, 1);
        for (int l = 1; l <= run->model.L; l++)
            gpt_block_forward(run, l);
        gpt_head_sample(run, wl - 1);
        gpt_uv_step_end(run); /* waits for the stream: logits_host is written */
        seq[len] = sample_pick(run, run->logits_host);
    }
    run->uv.side_step = 1;
    printf("sample after step %d (%s, %d tokens, %.1f s):\n", s + 1,
           opt->top_k > 1 ? "top-k" : "greedy", n, cli_now_s() - t0);
    sample_print(run, seq, len, run->prompt_len);
    fflush(stdout);
    free(seq);
}

int gpt_validates_after(const gpt_run_t *run, int s) {
    const gpt_options_t *o = run->set.opt;
    int last = s + 1 == run->set.stop;
    return run->val && ((o->val_every && (s + 1) % o->val_every == 0) || last);
}

int gpt_samples_after(const gpt_run_t *run, int s) {
    const gpt_options_t *o = run->set.opt;
    int last = s + 1 == run->set.stop;
    return o->sample && ((o->sample_every && (s + 1) % o->sample_every == 0) || last);
}

uint64_t gpt_uv_steps_planned(const gpt_run_t *run) {
    uint64_t n = 0;
    for (int s = run->set.first; s < run->set.stop; s++) {
        n++;
        if (gpt_validates_after(run, s))
            n += (uint64_t)run->val_n;
        if (gpt_samples_after(run, s) && gpt_computes(run)) /* else skipped */
            n += (uint64_t)run->set.opt->sample;
    }
    return n;
}
