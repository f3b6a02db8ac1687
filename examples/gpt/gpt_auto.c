/*
 * gpt_auto.c -- uvmrt-gpt's automatic choice (see gpt.h): --cpu-layers auto and
 * --recompute auto rehearse the step on uvmrt's model of the machine
 * (uvmrt_choose(3)), and the review after 3 planned steps may choose again.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt.h"

/* ----------------------------------------------------------------------------
 * auto: uvmrt chooses --cpu-layers and --recompute by rehearsing the step on its
 * model of the machine (uvmrt_choose(3)), and reviews the choice after 3 planned steps */

/* {0, nl/8, 2 nl/8, ..., nl}, rounded, distinct; returns the count (<= 9). */
static size_t cpu_candidates(int nl, int *v) {
    size_t n = 0;
    for (int k = 0; k <= 8; k++) {
        int x = (k * nl + 4) / 8;
        if (n == 0 || v[n - 1] != x)
            v[n++] = x;
    }
    return n;
}

/* {0, L/2, L}, distinct. */
static size_t recompute_candidates(int L, int *v) {
    int c[3] = {0, L / 2, L};
    size_t n = 0;
    for (int k = 0; k < 3; k++)
        if (n == 0 || v[n - 1] != c[k])
            v[n++] = c[k];
    return n;
}

/* The recompute candidates; on cuda only those whose tensors fit the GPU's free memory
 * (real oversubscription can hang it: run_open_gpu refuses them), at least L. */
static size_t recompute_room(gpt_run_t *run, int *v) {
    size_t n = recompute_candidates(run->model.L, v);
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    if (run->uv.backend != UVMRT_BACKEND_CUDA || gpt_gpu_mem_info(&free_b, &total_b, &dev) != NULL)
        return n;
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    int keep = run->set.recompute;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        run->set.recompute = v[i];
        if (gpt_planned_managed_bytes(run) + (64ull << 20) <= room || i + 1 == n)
            v[m++] = v[i];
        else if (!run->set.opt->c.quiet)
            printf("  auto: recompute %d left out: its tensors would not fit GPU %d's free "
                   "memory\n", v[i], dev);
    }
    run->set.recompute = keep;
    return m;
}

/* The knob values of one candidate, or the explicit flags' for a knob not chosen. */
void gpt_knob_values(const gpt_run_t *run, const int *values, int *k, int *n) {
    *k = run->set.knob_cpu >= 0 ? values[run->set.knob_cpu] : run->set.opt->cpu_layers;
    *n = run->set.knob_rec >= 0 ? values[run->set.knob_rec] : run->set.opt->recompute;
}

/* uvmrt_rehearse_fn: the trainer's steps with these values on `model`, compute off: a
 * second run struct (no GPU, no CPU thread, no data, no host memory behind the tensors)
 * declaring the same layers, tensors and calls as the real run; freed before return. */
static uvmrt_status_t rehearse(uvmrt_context_t *model, const int *values, int steps, void *user) {
    const gpt_run_t *real = user;
    jmp_buf jb;
    gpt_run_t *r = calloc(1, sizeof *r);
    if (r == NULL)
        return UVMRT_ERR_NOMEM;
    *r = (gpt_run_t){.set = {.opt = real->set.opt, .knob_cpu = -1, .knob_rec = -1},
                     .uv = {.rehearsal = &jb,
                            .ctx = model,
                            .backend = uvmrt_context_backend(model),
                            .policy = uvmrt_context_policy(model),
                            .profile = uvmrt_context_profile(model),
                            .cpu_stream = (uvmrt_stream_t)&gpt_sim_cpu_stream,
                            .stream = (uvmrt_stream_t)&gpt_sim_gpu_stream,
                            .fail_st = UVMRT_OK},
                     .attn_kind = real->attn_kind,
                     .cpu_last = -1};
    gpt_shape_init(r);
    gpt_knob_values(real, values, &r->set.cpu_layers, &r->set.recompute);
    gpt_tier_plan(r); /* what this candidate puts on the disk tier, as the real run would */
    uvmrt_status_t st = UVMRT_OK;
    if (setjmp(jb) == 0) {
        gpt_net_alloc(r);
        for (int s = 0; s < steps; s++)
            gpt_step_calls(r, s, gpt_lr_at(real->set.opt, s));
    } else {
        st = r->uv.fail_st != UVMRT_OK ? r->uv.fail_st : UVMRT_ERR_INVALID;
    }
    free(r->model.lp);
    free(r->model.out);
    free(r->model.acts);
    free(r);
    return st;
}

/* autochoice_ops_t.text: "cpu_layers 3, recompute 2" (the auto knobs only). */
static void values_text(void *user, const int *values, int rc, char *buf, size_t cap) {
    const gpt_run_t *run = user;
    int k, n;
    (void)rc; /* recompute is a knob of the trainer's own here */
    gpt_knob_values(run, values, &k, &n);
    buf[0] = '\0';
    if (run->set.knob_cpu >= 0)
        snprintf(buf, cap, "cpu_layers %d%s", k, run->set.knob_rec >= 0 ? ", " : "");
    if (run->set.knob_rec >= 0) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "recompute %d", n);
    }
}

/* autochoice_ops_t.hook: K, N into the auto knobs' values. */
static int hook_values(void *user, uvmrt_choice_t *c, int k, int n, char *why, size_t cap) {
    const gpt_run_t *run = user;
    if (k < 0 || k > run->model.nl || n < 0 || n > run->model.L) {
        snprintf(why, cap, "K in 0..%d and N in 0..%d", run->model.nl, run->model.L);
        return -1;
    }
    if (run->set.knob_cpu >= 0)
        c->values[run->set.knob_cpu] = k;
    if (run->set.knob_rec >= 0)
        c->values[run->set.knob_rec] = n;
    return 0;
}

static void choice_apply(void *user, const uvmrt_choice_t *c, int s);

static void run_cleanup(void *user) {
    gpt_run_close_cb(user);
}

static const autochoice_ops_t auto_ops = {values_text, hook_values, choice_apply, run_cleanup};

/* Before the tensors: the values of the knobs given as auto (the explicit ones as
 * given); prints the one line that says what was chosen. */
void gpt_choose_auto(gpt_run_t *run) {
    const gpt_options_t *o = run->set.opt;
    uvmrt_knob_t knobs[2];
    int cv[9], rv[3];
    size_t n = 0;
    run->set.knob_cpu = run->set.knob_rec = -1;
    run->set.cpu_layers = o->cpu_layers == GPT_AUTO ? 0 : o->cpu_layers;
    run->set.recompute = o->recompute == GPT_AUTO ? 0 : o->recompute;
    if (o->cpu_layers == GPT_AUTO) {
        run->set.knob_cpu = (int)n;
        knobs[n++] = (uvmrt_knob_t){"cpu_layers", cpu_candidates(run->model.nl, cv), cv};
    }
    if (o->recompute == GPT_AUTO) {
        run->set.knob_rec = (int)n;
        knobs[n++] = (uvmrt_knob_t){"recompute", recompute_room(run, rv), rv};
    }
    if (n == 0)
        return;
    run->uv.ac =
        (autochoice_t){.ctx = run->uv.ctx, .ops = &auto_ops, .user = run, .quiet = o->c.quiet};
    autochoice_choose(&run->uv.ac, knobs, n, rehearse, run,
                      n == 2                   ? "--cpu-layers auto, --recompute auto"
                      : run->set.knob_cpu >= 0 ? "--cpu-layers auto"
                                               : "--recompute auto");
    gpt_knob_values(run, run->uv.ac.choice.values, &run->set.cpu_layers, &run->set.recompute);
}

void gpt_cpu_opt_open(gpt_run_t *run);

void gpt_cpu_opt_close(gpt_run_t *run) {
    gpt_cpu_drain(run);
    run->cpu_busy_s += gpt_cpuopt_busy_s(run->cpu);
    gpt_cpuopt_stop(run->cpu);
    run->cpu = NULL;
}

/* autochoice_ops_t.apply: the choice's values (cpu_layers k, recompute n) from the
 * next step on. */
static void choice_apply(void *user, const uvmrt_choice_t *c, int s) {
    gpt_run_t *run = user;
    int k, n;
    (void)s;
    gpt_knob_values(run, c->values, &k, &n);
    if (n < run->set.recompute && run->uv.backend == UVMRT_BACKEND_CUDA) {
        int keep = run->set.recompute;
        run->set.recompute = n;
        uint64_t need = gpt_planned_managed_bytes(run) + (64ull << 20);
        run->set.recompute = keep;
        if (need > run->uv.gpu_room) {
            printf("auto: keeping recompute %d: recompute %d needs %.2f GiB of managed memory, "
                   "more than the GPU has room for (%.2f GiB)\n",
                   keep, n, (double)need / GIB, (double)run->uv.gpu_room / GIB);
            n = keep;
        }
    }
    gpt_cpu_opt_close(run); /* the thread's layers change: its last update first */
    gpt_run_reconfigure(run, k, n);
    if (run->set.compute)
        gpt_cpu_opt_open(run);
    run->uv.side_step = 1; /* other layer calls: the runtime records the next step again */
}

/* After training step s: the review of the choice when it is time (autochoice.h). */
void gpt_choice_review(gpt_run_t *run, int s) {
    autochoice_after_step(&run->uv.ac, s, run->uv.recording[s], s + 1 == run->set.stop);
}
