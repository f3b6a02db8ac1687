/*
 * report_trace.c -- the trace report: trace-event JSON (Perfetto, chrome://tracing;
 * doc/uvmrt-report.5) of the kept steps' layer calls, copies, waits, faults and
 * resident bytes. report.c writes it to a stream with the other formats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "internal.h"
#include "report_json.h"

/* ------------------------------------------------------------------ trace */
/* Trace-event JSON: pid 1; tid 1 compute, 2 prefetch (h2d copy stream), 3 evict
 * (d2h copy stream); times in microseconds since the context was created. */
static json_t *trace_event(jb_t *b, const char *name, const char *ph, int tid, double ts_us)
{
    json_t *e = jb_obj(b);
    jb_set(b, e, "name", jb_str(b, name));
    jb_set(b, e, "ph", jb_str(b, ph));
    jb_set(b, e, "pid", json_integer(1));
    jb_set(b, e, "tid", json_integer(tid));
    jb_set(b, e, "ts", json_real(ts_us));
    return e;
}

static json_t *thread_name(jb_t *b, int tid, const char *name)
{
    json_t *e = trace_event(b, "thread_name", "M", tid, 0);
    json_t *a = jb_obj(b);
    jb_set(b, a, "name", jb_str(b, name));
    jb_set(b, e, "args", a);
    return e;
}

/* The "gpu faults" counter event: the fault groups of the call starting at ts. */
static json_t *fault_counter(jb_t *b, double ts_us, uint64_t groups)
{
    json_t *c = trace_event(b, "gpu faults", "C", 1, ts_us);
    json_t *ca = jb_obj(b);
    jb_set(b, ca, "fault groups", json_u64(groups));
    jb_set(b, c, "args", ca);
    return c;
}

static void trace_timeline(jb_t *b, const uvmrt_context_t *ctx, json_t *ev);

json_t *uvmrt__report_trace(const uvmrt_context_t *ctx)
{
    jb_t jb = {0}, *b = &jb;
    json_t *root = jb_obj(b), *ev = jb_arr(b);
    jb_append(b, ev, thread_name(b, 1, "compute (layer calls)"));
    jb_append(b, ev, thread_name(b, 2, "copy: prefetch to GPU"));
    jb_append(b, ev, thread_name(b, 3, "copy: evict to host"));
    for (size_t i = 0; i < ctx->hist.n_spans && !b->failed; i++) {
        const uvmrt_span_t *sp = &ctx->hist.spans[i];
        const char *layer = ctx->tensors.layers[sp->layer].name, *phase = uvmrt_phase_name(sp->phase);
        size_t n = strlen(layer) + strlen(phase) + 2;
        char *name = malloc(n); /* whole: a cut could split a character */
        if (name == NULL) {
            b->failed = 1;
            break;
        }
        snprintf(name, n, "%s %s", layer, phase);
        json_t *e = trace_event(b, name, "X", 1, sp->start_ns / 1e3);
        free(name);
        jb_set(b, e, "dur", json_real((sp->end_ns - sp->start_ns) / 1e3));
        json_t *a = jb_obj(b);
        jb_set(b, a, "step", json_u64(sp->step + 1)); /* steps from 1 */
        jb_set(b, a, "wait_us", json_real((sp->wait_end_ns - sp->start_ns) / 1e3));
        const uvmrt_step_stats_t *st = uvmrt__report_kept_step(ctx, sp->step);
        jb_set(b, a, "fault_sampled", json_boolean(st != NULL && st->fault_sampled));
        jb_set(b, a, "gpu_faults", json_u64(sp->gpu_faults));
        jb_set(b, a, "fault_htod_bytes", json_u64(sp->fault_htod_bytes));
        jb_set(b, e, "args", a);
        jb_append(b, ev, e);
        /* fault bursts: a counter, up at the call's start, back to 0 at its end */
        if (sp->gpu_faults > 0 || (i > 0 && ctx->hist.spans[i - 1].gpu_faults > 0))
            jb_append(b, ev, fault_counter(b, sp->start_ns / 1e3, sp->gpu_faults));
    }
    if (ctx->hist.n_spans > 0 && ctx->hist.spans[ctx->hist.n_spans - 1].gpu_faults > 0)
        jb_append(b, ev, fault_counter(b, ctx->hist.spans[ctx->hist.n_spans - 1].end_ns / 1e3, 0));
    for (size_t i = 0; i < ctx->hist.n_copies && !b->failed; i++) {
        const uvmrt_copy_span_t *cp = &ctx->hist.copies[i];
        json_t *e = trace_event(b, cp->d2h ? "evict" : "prefetch", "X", cp->d2h ? 3 : 2, cp->start_ns / 1e3);
        jb_set(b, e, "dur", json_real((cp->end_ns - cp->start_ns) / 1e3));
        json_t *a = jb_obj(b);
        jb_set(b, a, "step", json_u64(cp->step + 1));
        jb_set(b, a, "bytes", json_u64(cp->bytes));
        jb_set(b, e, "args", a);
        jb_append(b, ev, e);
    }
    trace_timeline(b, ctx, ev); /* step markers, waits, resident bytes (below) */
    jb_set(b, root, "traceEvents", ev);
    jb_set(b, root, "displayTimeUnit", jb_str(b, "ms"));
    json_t *meta = jb_obj(b);
    jb_set(b, meta, "uvmrt_version", jb_str(b, uvmrt_version_string()));
    jb_set(b, meta, "policy", jb_str(b, uvmrt_policy_name(ctx->cfg.policy)));
    jb_set(b, meta, "backend", jb_str(b, ctx->be.ops->name));
    jb_set(b, meta, "fault_stats_source", jb_str(b, uvmrt__faults_source(ctx)));
    jb_set(b, root, "otherData", meta);
    if (b->failed) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------ trace: a clearer timeline */
/* Added to the trace's events: the process's name; an instant marker at the
 * start of each step ("step N", from 1, across every track); each layer call's
 * wait for its prefetches as a slice of its own ("wait for prefetches", B/E
 * nested at the start of the call's slice on tid 1); and a "resident bytes"
 * counter sampled when each call opened (uvmrt's accounting). */
static void trace_timeline(jb_t *b, const uvmrt_context_t *ctx, json_t *ev)
{
    char pname[160];
    snprintf(pname, sizeof pname, "uvmrt: %s (policy %s, backend %s)", uvmrt__program_name(),
             uvmrt_policy_name(ctx->cfg.policy), ctx->be.ops->name);
    json_t *pn = trace_event(b, "process_name", "M", 1, 0), *pa = jb_obj(b);
    jb_set(b, pa, "name", jb_str(b, pname));
    jb_set(b, pn, "args", pa);
    jb_append(b, ev, pn);
    uint64_t marked = UINT64_MAX;
    for (size_t i = 0; i < ctx->hist.n_spans && !b->failed; i++) {
        const uvmrt_span_t *sp = &ctx->hist.spans[i];
        if (sp->step != marked) { /* spans are kept in step order */
            char name[48];
            snprintf(name, sizeof name, "step %llu", (unsigned long long)sp->step + 1);
            json_t *m = trace_event(b, name, "i", 1, sp->start_ns / 1e3), *ma = jb_obj(b);
            jb_set(b, m, "s", jb_str(b, "g"));
            jb_set(b, ma, "step", json_integer((json_int_t)sp->step + 1));
            jb_set(b, m, "args", ma);
            jb_append(b, ev, m);
            marked = sp->step;
        }
        if (sp->wait_end_ns > sp->start_ns) {
            jb_append(b, ev, trace_event(b, "wait for prefetches", "B", 1, sp->start_ns / 1e3));
            jb_append(b, ev, trace_event(b, "wait for prefetches", "E", 1, sp->wait_end_ns / 1e3));
        }
        json_t *c = trace_event(b, "resident bytes", "C", 1, sp->start_ns / 1e3), *ca = jb_obj(b);
        jb_set(b, ca, "bytes", json_integer((json_int_t)sp->resident_bytes));
        jb_set(b, c, "args", ca);
        jb_append(b, ev, c);
    }
}
