/*
 * gpt_results.c -- uvmrt-gpt's results (see gpt.h): the medians of the run's steps and
 * the outputs after the steps (--result-json, with the choice).
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
#include "gpt_gpu.h"

medians_t gpt_run_medians(const gpt_run_t *run) {
    medians_t m = {0};
    size_t n = 0;
    double *v = malloc((size_t)(run->set.stop - run->set.first) * 4 * sizeof *v + sizeof *v);
    if (v == NULL)
        return m;
    double *ms = v, *in = ms + (run->set.stop - run->set.first),
           *out = in + (run->set.stop - run->set.first);
    double *faults = out + (run->set.stop - run->set.first);
    for (int pass = 0; pass < 2 && n == 0; pass++) /* only recording steps: use them */
        for (int s = run->set.first; s < run->set.stop; s++) {
            if (pass == 0 && run->uv.recording[s])
                continue;
            const uvmrt_step_stats_t *st = &run->uv.stats[s];
            ms[n] = (double)st->step_ns / 1e6;
            in[n] = (double)(st->prefetch_bytes + st->remote_read_bytes) / GB;
            out[n] = (double)(st->evict_bytes + st->remote_write_bytes) / GB;
            faults[n] = (double)st->fault_count;
            n++;
        }
    m.ms = cli_median(ms, n), m.in_gb = cli_median(in, n), m.out_gb = cli_median(out, n);
    m.faults = cli_median(faults, n), m.n = (int)n;
    n = 0; /* wall: steps whose predecessor is not a recording step */
    for (int s = run->set.first + 1; s < run->set.stop; s++)
        if (!run->uv.recording[s] && !run->uv.recording[s - 1] && run->end_s[s] > 0 && run->end_s[s - 1] > 0)
            ms[n++] = (run->end_s[s] - run->end_s[s - 1]) * 1e3;
    m.wall_ms = n > 0 ? cli_median(ms, n) : 0.0;
    free(v);
    return m;
}

const char *gpt_source_name(gpt_source_t s) {
    static const char *const names[] = {"random", "cycle", "data", "text"};
    return names[s];
}

/* "choice": what auto chose and what the review found (null without auto). */
static json_t *choice_json(const gpt_run_t *run) {
    if (!run->uv.ac.made)
        return json_null();
    const uvmrt_choice_t *c = &run->uv.ac.choice;
    int k, n;
    gpt_knob_values(run, c->values, &k, &n);
    json_t *values = json_object();
    if (run->set.knob_cpu >= 0)
        json_object_set_new(values, "cpu_layers", json_integer(k));
    if (run->set.knob_rec >= 0)
        json_object_set_new(values, "recompute", json_integer(n));
    return json_pack(
        "{s:f, s:o, s:f, s:b, s:I, s:b, s:I, s:o, s:o, s:b}", "predicted_ms",
        c->predicted_step_ns / 1e6, "measured_ms",
        run->uv.ac.reviewed ? json_real(c->measured_step_ns / 1e6) : json_null(),
        "first_predicted_ms",
        (run->uv.ac.reviewed ? c->first_predicted_step_ns : c->predicted_step_ns) / 1e6,
        "replanned", c->replanned, "plan_budget_bytes", (json_int_t)c->plan_budget_bytes, "fits",
        c->fits, "rehearsals", (json_int_t)c->rehearsals, "values", values, "replanned_measured_ms",
        c->replanned_measured_step_ns > 0 ? json_real(c->replanned_measured_step_ns / 1e6)
                                          : json_null(),
        "reverted", c->reverted);
}

/* --result-json: medians, totals, the per-step losses and times of this process's
 * steps, validation losses, the data position and the checkpoint. 0, or -1. */
static int result_write(gpt_run_t *run, const char *path, const medians_t *m,
                        const uvmrt_summary_t *sum) {
    const gpt_options_t *o = run->set.opt;
    double tflops = m->ms > 0 ? gpt_step_flops(run) / (m->ms * 1e-3) / 1e12 : 0.0;
    uint64_t late = 0;
    json_t *losses = json_array(), *step_ms = json_array(), *val = json_array();
    for (int s = run->set.first; s < run->set.stop; s++) {
        if (!run->uv.recording[s])
            late += run->uv.stats[s].fault_count;
        json_array_append_new(losses, gpt_computes(run) ? json_real(run->losses_out[s]) : json_null());
        json_array_append_new(step_ms, json_real((double)run->uv.stats[s].step_ns / 1e6));
    }
    for (int k = 0; k < run->n_val; k++)
        json_array_append_new(
            val, json_pack("{s:i, s:o}", "step", run->val_step[k], "loss",
                           gpt_computes(run) ? json_real(run->val_loss[k]) : json_null()));
    json_t *data = json_pack("{s:s}", "source", gpt_source_name(o->source));
    if (run->train && data) {
        gpt_data_pos_t pos;
        gpt_data_tell(run->train, &pos);
        json_object_set_new(data, "epoch", json_integer((json_int_t)pos.epoch));
        json_object_set_new(data, "shard", json_integer((json_int_t)pos.shard));
        json_object_set_new(data, "offset", json_integer((json_int_t)pos.offset));
    }
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s, s:s, s:b,"
        " s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:s?}",
        "program", PROG, "version", uvmrt_version_string(), "backend",
        uvmrt_backend_name(run->uv.backend), "policy", uvmrt_policy_name(run->uv.policy),
        "budget_bytes", (json_int_t)sum->budget_bytes, "layers", run->model.L, "channels",
        run->model.C, "heads", run->model.NH, "vocab", run->model.V, "batch", run->model.B, "seq",
        run->model.T, "steps", o->c.steps, "first_step", run->set.first + 1, "last_step",
        run->set.stop, "optimizer_on",
        run->set.cpu_layers == 0               ? "gpu"
        : run->set.cpu_layers == run->model.nl ? "cpu"
                                               : "mixed",
        "recompute",
        run->set.recompute == 0              ? "none"
        : run->set.recompute == run->model.L ? "all"
                                             : "partial",
        "arithmetic", gpt_computes(run), "ms_per_step_median", m->ms, "tokens_per_s",
        m->ms > 0 ? run->model.N / (m->ms * 1e-3) : 0.0, "tflops", tflops, "gb_in_per_step",
        m->in_gb, "gb_out_per_step", m->out_gb, "faults_per_step", m->faults, "managed_bytes",
        (json_int_t)run->model.managed_bytes, "peak_resident_bytes",
        (json_int_t)sum->peak_resident_bytes, "device_workspace_bytes",
        (json_int_t)run->model.device_bytes, "faults_after_step1", (json_int_t)late, "losses",
        losses, "step_ms", step_ms, "val", val, "data", data, "checkpoint",
        run->ckpt_last[0] ? run->ckpt_last : NULL);
    if (root) {
        /* who did the arithmetic: the GPU, the CPU reference on sim, or no one (null) */
        json_object_set_new(root, "arithmetic_on",
                            run->set.compute ? json_string("gpu")
                            : run->ref       ? json_string("cpu-reference")
                                             : json_null());
        json_object_set_new(root, "cpu_layers", json_integer(run->set.cpu_layers));
        /* the step as the host sees it, end to end (ms_per_step_median is the runtime's
         * step: from uvmrt_step_begin to uvmrt_step_end's return) */
        json_object_set_new(root, "wall_ms_per_step_median", m->wall_ms > 0 ? json_real(m->wall_ms) : json_null());
        /* the attention that ran (on sim: whose rate the calls declared) */
        json_object_set_new(root, "attention",
                            json_string(run->gpu                            ? gpt_gpu_attention_name(run->gpu)
                                        : run->attn_kind == GPT_ATTN_CUDNN ? "cudnn"
                                                                           : "mma"));
        /* the parameters the CPU's AdamW updates: its host-memory traffic, for a floor */
        uint64_t cpu_params = 0;
        for (int l = run->model.nl - run->set.cpu_layers; l < run->model.nl; l++)
            cpu_params += run->model.lp[l].n;
        json_object_set_new(root, "cpu_params", json_integer((json_int_t)cpu_params));
        json_object_set_new(root, "recompute_blocks", json_integer(run->set.recompute));
        json_object_set_new(root, "choice", choice_json(run));
        json_object_set_new(root, "predicted_step_ms",
                            run->uv.ac.made ? json_real(run->uv.ac.choice.predicted_step_ns / 1e6)
                                            : json_null());
    }
    cli_json_final_steps(root, run->uv.recording, run->uv.stats, run->set.first, run->set.stop);
    return cli_json_write("--result-json", path, root);
}

/* The outputs the flags asked for, after the steps: each that fails is reported
 * and the others are still written. 0, or -1 when any failed. */
int gpt_outputs_write(gpt_run_t *run, const medians_t *m, const uvmrt_summary_t *sum) {
    const cli_common_t *c = &run->set.opt->c;
    int bad = cli_reports_write(run->uv.ctx, c) != 0;
    if (c->result_json)
        bad |= result_write(run, c->result_json, m, sum);
    return bad ? -1 : 0;
}

/* The per-step arrays main allocates. */
void gpt_steps_free(gpt_run_t *run) {
    free(run->losses_out);
    free(run->end_s);
    free(run->norms);
    free(run->uv.stats);
    free(run->uv.recording);
    free(run->val_step);
    free(run->val_loss);
}

