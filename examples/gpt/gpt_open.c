/*
 * gpt_open.c -- uvmrt-gpt: opening a run (context, data, GPU side, CPU optimizer) and
 * closing it. See gpt.h.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_kernels.h"
#include "gpt_tokens.h"
#include "gpt.h"


uvmrt_context_t *gpt_context_open(gpt_options_t *opt) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    cli_params_apply(&opt->c, &params);
    cli_backend_choice_t choice = {gpt_gpu_built(), PROG " was built without CUDA and cuBLAS",
                                   opt->c.backend_explicit, CLI_SIM_PROFILE, NULL, NULL};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    opt->c.backend = params.backend;
    opt->c.profile = params.profile;
    return ctx;
}

/* The training data and the validation data, and the sampling prompt. */
void gpt_run_data_open(gpt_run_t *run) {
    const gpt_options_t *o = run->set.opt;
    char err[1024];
    if (o->source == GPT_SRC_DATA || o->source == GPT_SRC_TEXT) {
        int text = o->source == GPT_SRC_TEXT;
        gpt_data_config_t cfg = {text ? NULL : o->data_pattern,
                                 text ? o->text_path : NULL,
                                 text ? GPT_DATA_TRAIN : GPT_DATA_ALL,
                                 run->model.B,
                                 run->model.T,
                                 o->c.seed,
                                 1,
                                 run->model.V,
                                 0, /* rank 0 of one: several GPUs are not built yet */
                                 1};
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
    int want = run->model.T < 16 ? run->model.T : 16;
    if (o->prompt)
        want = (int)strlen(o->prompt);
    run->prompt = calloc((size_t)want + (size_t)run->model.N, sizeof *run->prompt);
    int *inp = calloc(2 * (size_t)run->model.N, sizeof *inp);
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
                gpt_data_next(d, (int32_t *)inp, (int32_t *)inp + run->model.N, err, sizeof err) !=
                    0 ||
                gpt_data_seek(d, &pos, err, sizeof err) != 0)
                gpt_run_fail(run, "the sampling prompt: %s", err);
        } else if (o->source == GPT_SRC_CYCLE) {
            gpt_tokens_cycle(inp, inp + run->model.N, run->model.B, run->model.T, run->model.V,
                             o->c.seed, 0);
        } else {
            gpt_tokens_random(inp, inp + run->model.N, run->model.B, run->model.T, run->model.V,
                              o->c.seed, 0);
        }
        memcpy(run->prompt, inp, (size_t)want * sizeof *inp);
    }
    free(inp);
    run->prompt_len = want;
}

void gpt_run_open_gpu(gpt_run_t *run) {
    char err[256];
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    gcheck(run, gpt_gpu_mem_info(&free_b, &total_b, &dev), -1);
    uint64_t need = gpt_planned_managed_bytes(run) + (64ull << 20);
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    run->uv.gpu_room = room;
    if (need > room)
        gpt_run_fail(run, "refusing to allocate %.2f GiB on GPU %d: it has %.2f GiB free and %.0f GiB "
                      "must stay free; use a smaller --depth, --batch or --seq, or --recompute "
                      "all; --budget emulates a smaller GPU",
                 (double)need / GIB, dev, (double)free_b / GIB, (double)GPU_SAFETY_BYTES / GIB);
    if (run->model.C != run->model.NH * GPT_HEAD_SIZE)
        gpt_run_fail(run, "the GPU kernels take head size %d: --channels %d / --heads %d is %d",
                     GPT_HEAD_SIZE, run->model.C, run->model.NH, run->model.C / run->model.NH);
    if (!run->set.opt->c.quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB, (double)need / GIB);
    run->gpu = gpt_gpu_open(err, sizeof err);
    if (run->gpu == NULL)
        gpt_run_fail(run, "GPU setup: %s", err);
    char note[512];
    const char *why = gpt_gpu_attention_open(run->gpu, run->set.opt->attention, run->model.B,
                                             run->model.T, run->model.C, run->model.NH, note, sizeof note);
    if (why)
        gpt_run_fail(run, "%s", why);
    int kind = (int)gpt_gpu_attention_kind(run->gpu);
    if (note[0])
        fprintf(stderr, PROG ": note: the attention runs on the trainer's own kernels: %s\n", note);
    if (!run->set.opt->c.quiet)
        printf("  attention: %s%s\n", gpt_gpu_attention_name(run->gpu),
               kind != run->attn_kind ? " (the layers' settings were chosen with cuDNN's declared rate)" : "");
    run->attn_kind = kind;
    run->uv.stream = gpt_gpu_stream(run->gpu);
    run->uv.cpu_stream = gpt_gpu_cpu_stream(run->gpu);
    run->model.device_bytes = gpt_gpu_device_bytes(run->gpu);
    run->tok_host = gpt_gpu_host_alloc((5 * (size_t)run->model.N + 1) * sizeof(int));
    /* steps' losses, then one per validation batch */
    run->loss_host = gpt_gpu_host_alloc(((size_t)run->set.opt->c.steps + (size_t)run->val_n + 1) *
                                        sizeof(double));
    run->clip_host = gpt_gpu_host_alloc(4 * sizeof(float));
    if (run->set.opt->sample)
        run->logits_host = gpt_gpu_host_alloc((size_t)run->model.Vp * sizeof(uint16_t));
    if (!run->tok_host || !run->loss_host || !run->clip_host ||
        (run->set.opt->sample && !run->logits_host))
        gpt_run_fail(run, "cannot allocate pinned host memory");
}

/* The CPU optimizer thread for the top cpu_layers layers (none when 0). */
void gpt_cpu_opt_open(gpt_run_t *run) {
    char err[256];
    if (run->set.cpu_layers == 0)
        return;
    gpt_cpuopt_layer_t *ls = calloc((size_t)run->model.nl, sizeof *ls);
    if (ls == NULL)
        gpt_run_fail(run, "out of host memory");
    int n = 0;
    for (int l = run->model.nl - run->set.cpu_layers; l < run->model.nl; l++) {
        const layer_params_t *p = &run->model.lp[l];
        if (gpt_moments_on_disk(run, l))
            continue; /* updated in its declared call (gpt.c, cpu_optimizer_declare) */
        ls[n++] = (gpt_cpuopt_layer_t){l, f32(p->w), f32(p->m), f32(p->v), f32(p->g),
                                       b16(p->wh), p->n, p->n_decay};
    }
    run->cpu_last = -1; /* a new thread counts its steps from 0 */
    if (n > 0)
        run->cpu = gpt_cpuopt_start(run->model.nl, n, ls, run->clip_host, err, sizeof err);
    free(ls);
    if (n > 0 && run->cpu == NULL)
        gpt_run_fail(run, "CPU optimizer: %s", err);
    if (!run->set.opt->c.quiet && n > 0)
        printf("  cpu optimizer: AdamW of %d of %d layers, path %s\n", n, run->model.nl,
               mlp_isa_name(run->isa));
    if (!run->set.opt->c.quiet && n < run->set.cpu_layers)
        printf("  cpu optimizer: AdamW of %d of %d layers on the training thread, their moments on the disk "
               "tier, path %s\n", run->set.cpu_layers - n, run->model.nl, mlp_isa_name(run->isa));
}

void gpt_run_close(gpt_run_t *run) {
    run->cpu_busy_s += gpt_cpuopt_busy_s(run->cpu);
    gpt_cpuopt_stop(run->cpu);
    run->cpu = NULL;
    uvmrt_context_destroy(run->uv.ctx); /* first: it may still refer to our stream */
    run->uv.ctx = NULL;
    if (run->gpu) {
        gpt_gpu_host_free(run->tok_host);
        gpt_gpu_host_free(run->loss_host);
        gpt_gpu_host_free(run->clip_host);
        gpt_gpu_host_free(run->logits_host);
    } else {
        free(run->tok_host);
        free(run->loss_host);
        free(run->clip_host);
        free(run->logits_host);
    }
    gpt_simref_close(run);
    run->tok_host = NULL, run->loss_host = NULL, run->clip_host = NULL, run->logits_host = NULL;
    gpt_gpu_close(run->gpu);
    run->gpu = NULL;
    gpt_data_close(run->train);
    gpt_data_close(run->val);
    run->train = run->val = NULL;
    free(run->model.lp);
    free(run->model.out);
    free(run->model.acts);
    free(run->prompt);
    run->model.lp = NULL, run->model.out = NULL, run->model.acts = NULL, run->prompt = NULL;
}

void gpt_run_close_cb(void *run) { gpt_run_close(run); }
