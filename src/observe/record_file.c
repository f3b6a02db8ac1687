/*
 * record_file.c -- the recorded step as a JSON file (UVMRT_RECORD, uvmrt-plan(1)).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "internal.h"
#include "outfile.h"
#include "profile_file.h"
#include "record_file.h"

static json_t *tensors_json(const uvmrt_context_t *ctx)
{
    json_t *a = json_array();
    for (int id = 0; a && id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue; /* freed: the record names none */
        json_t *o = json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:i, s:s}", "id", id, "name", t->name, "layer", t->layer,
                              "role", uvmrt_role_name(t->role), "size_bytes", (json_int_t)t->size, "footprint_bytes",
                              (json_int_t)t->footprint, "arena", t->arena, "placement",
                              t->placed_host ? "host" : "auto");
        if (o != NULL && t->on_disk) json_object_set_new(o, "tier", json_string("disk")); /* absent: memory */
        json_array_append_new(a, o);
    }
    return a;
}

/* Streams are numbered by first appearance (0 = the first one seen): the index of
 * stream in seen[0..*n), added when new (add) or -1 when not there. */
static int stream_number(uvmrt_stream_t *seen, size_t *n, uvmrt_stream_t stream, int add)
{
    for (size_t k = 0; k < *n; k++)
        if (seen[k] == stream) return (int)k;
    if (!add) return -1;
    seen[*n] = stream;
    return (int)(*n)++;
}

static json_t *calls_json(uvmrt_context_t *ctx, const uvmrt_sequence_t *timed)
{
    const uvmrt_sequence_t *r = &ctx->sched.record;
    /* On sim the modelled duration is the work itself. On cuda the timing events
     * measure it, in a planned step (timed): the recording step is demand-paged, so
     * its kernels' times are mostly their faults, which the plan removes. */
    int measure = ctx->cfg.backend != UVMRT_BACKEND_SIM && timed != NULL && timed->n_calls == r->n_calls;
    uvmrt_stream_t *seen = malloc((r->n_calls ? r->n_calls : 1) * sizeof *seen);
    uint64_t *work = measure ? malloc(2 * (r->n_calls ? r->n_calls : 1) * sizeof *work) : NULL;
    if (measure && (work == NULL || uvmrt__step_work(ctx, timed, work, work + r->n_calls) != UVMRT_OK)) {
        free(work);
        free(seen);
        return NULL;
    }
    size_t n_seen = 0;
    for (size_t i = 0; seen && i < r->n_calls; i++) (void)stream_number(seen, &n_seen, r->calls[i].stream, 1);
    json_t *a = seen ? json_array() : NULL;
    for (size_t i = 0; a && i < r->n_calls; i++) {
        const uvmrt_call_t *c = &r->calls[i];
        uint64_t dur = c->work.modelled_ns, raw = 0;
        const char *src = "modelled";
        if (measure && timed->calls[i].timed) {
            dur = work[i];
            raw = work[r->n_calls + i];
            src = "measured";
        }
        json_t *uses = json_array();
        for (size_t k = 0; uses && k < c->n_uses; k++)
            json_array_append_new(uses, json_pack("[i, i]", r->use_tensor[c->use_first + k],
                                                  (int)r->use_access[c->use_first + k]));
        /* after: that stream's number (-1: none, or a stream no call of the step runs on) */
        int after = c->after != NULL ? stream_number(seen, &n_seen, c->after, 0) : -1;
        json_t *o = json_pack("{s:i, s:s, s:i, s:i, s:I, s:s, s:I, s:I, s:o}", "layer", c->layer, "phase",
                              uvmrt_phase_name(c->phase), "stream", stream_number(seen, &n_seen, c->stream, 0),
                              "after", after, "duration_ns", (json_int_t)dur, "duration_source", src,
                              "modelled_ns", (json_int_t)c->work.modelled_ns, "host_bytes",
                              (json_int_t)c->work.host_byte_count, "uses", uses);
        /* measured: the events' time, of which duration_ns is the call's own work */
        if (o != NULL && raw > 0) json_object_set_new(o, "measured_ns", json_integer((json_int_t)raw));
        /* its CPU work as the trainer measured it (uvmrt_host_work_measured) */
        uint64_t host_ns = c->layer >= 0 && c->layer < ctx->tensors.n_layers && c->work.host_byte_count > 0
                               ? ctx->tensors.layers[c->layer].host_measured_ns[c->phase]
                               : 0;
        if (o != NULL && host_ns > 0) json_object_set_new(o, "host_ns", json_integer((json_int_t)host_ns));
        json_array_append_new(a, o);
    }
    free(work);
    free(seen);
    return a;
}

static json_t *record_json(uvmrt_context_t *ctx, const uvmrt_sequence_t *timed)
{
    json_t *layers = json_array();
    for (int l = 0; layers && l < ctx->tensors.n_layers; l++)
        json_array_append_new(layers, json_string(ctx->tensors.layers[l].name));
    /* host memory: the budget (0: none), the bytes declared outside uvmrt, the peak seen
     * so far and the current plan's need (0 before a plan) */
    return json_pack("{s:s, s:i, s:s, s:s, s:s, s:I, s:b, s:b, s:I, s:I, s:I, s:I, s:o, s:o, s:o}", "format",
                     "uvmrt-record", "version", 1, "uvmrt_version", uvmrt_version_string(), "backend",
                     uvmrt_backend_name(ctx->cfg.backend), "profile",
                     uvmrt__profile_label(&ctx->cfg, ctx->profile), /* name or file path: what uvmrt-plan --profile takes */
                     "budget_bytes", (json_int_t)ctx->budget, "discard", ctx->cfg.discard_dead, "remote", ctx->cfg.remote,
                     "host_budget_bytes", (json_int_t)ctx->host_budget, "host_external_bytes",
                     (json_int_t)ctx->choice.host_external_bytes, "peak_host_bytes", (json_int_t)ctx->res.host_peak_bytes,
                     "plan_host_bytes", (json_int_t)uvmrt__plan_host_bytes(ctx), "layers", layers, "tensors",
                     tensors_json(ctx), "calls", calls_json(ctx, timed));
}

void uvmrt__record_write(uvmrt_context_t *ctx, const uvmrt_sequence_t *timed)
{
    const char *path = ctx->cfg.record;
    if (path[0] == '\0' || strcmp(path, "none") == 0 || !ctx->sched.have_record) return;
    /* the report rules (src/base/outfile.h): a device, a FIFO or a link is never replaced */
    json_t *root = record_json(ctx, timed);
    uvmrt__outfile_t o;
    char why[512] = "out of memory";
    int ok = root != NULL && uvmrt__outfile_open(&o, path, 0, why, sizeof why) == 0;
    if (ok) {
        if (json_dumpf(root, o.f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0) {
            snprintf(why, sizeof why, "the JSON could not be written (out of memory, or a write failed)");
            uvmrt__outfile_abandon(&o);
            ok = 0;
        } else {
            ok = uvmrt__outfile_close(&o, why, sizeof why) == 0;
        }
    }
    json_decref(root);
    if (ok) {
        LOG_INFO(&ctx->log, "UVMRT_RECORD: recorded step written to '%s'", path);
        return;
    }
    ctx->output_errors++;
    LOG_ERROR(&ctx->log, "UVMRT_RECORD: cannot write the recorded step to '%s': %s (the run goes on; "
              "uvmrt_summary_t.output_errors counts it)", path, why);
}

/* Step end: a recorded step, or the first planned ones' measured durations. */
static void observe_end(uvmrt_context_t *ctx, const uvmrt_step_end_t *e)
{
    if (e->recorded) uvmrt__record_write(ctx, NULL); /* a failed write only warns */
    else if (e->timed) uvmrt__record_write(ctx, e->timed);
}

const uvmrt_observer_t uvmrt__record_observer = {"record", NULL, NULL, NULL, observe_end, NULL};
