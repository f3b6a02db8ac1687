/*
 * report.c -- the per-layer text table and the JSON report (format documented
 * in doc/uvmrt-report.5). Files are written to a temporary file beside the
 * target, then renamed, so a reader never sees half a report.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "faults.h"
#include "internal.h"
#include "memsum.h"
#include "monitor.h"
#include "steady.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ------------------------------------------------------------------ text */
/* Like torch.cuda.memory_summary(): one row per (layer, phase), units in the
 * header, a totals row, the top offenders marked. */
#define TOP_N 3

static void add_layer(uvmrt_layer_stats_t *t, const uvmrt_layer_stats_t *s)
{
    uint64_t *a = (uint64_t *)t;
    const uint64_t *b = (const uint64_t *)s;
    for (size_t i = 0; i < sizeof *t / sizeof(uint64_t); i++) a[i] += b[i];
}

/* Faults that count for ranking: the driver's when there is a source and they
 * cover the row's calls, else uvmrt's estimate (the steady-state rows may hold
 * no sampled step: UVMRT_FAULT_SAMPLE). */
static uint64_t faults_of(const uvmrt_context_t *ctx, const uvmrt_layer_stats_t *s)
{
    return uvmrt__faults_active(ctx) && s->sampled_calls > 0 ? s->gpu_faults : s->fault_count;
}

/* 1 when row (l, p) is among the TOP_N by key (ties: earlier rows first), key > 0. */
static int is_top(const uvmrt_context_t *ctx, int l, int p, int by_wait)
{
    uvmrt_layer_stats_t me_s, o_s; /* the steady state (steady.c) */
    uvmrt__steady_layer(ctx, l, p, &me_s);
    const uvmrt_layer_stats_t *me = &me_s;
    uint64_t mine = by_wait ? me->wait_ns : faults_of(ctx, me);
    if (mine == 0) return 0;
    int better = 0;
    for (int i = 0; i < ctx->n_layers; i++)
        for (int q = 0; q < UVMRT_PHASE_COUNT; q++) {
            uvmrt__steady_layer(ctx, i, q, &o_s);
            const uvmrt_layer_stats_t *o = &o_s;
            if (o->calls == 0) continue;
            uint64_t v = by_wait ? o->wait_ns : faults_of(ctx, o);
            if (v > mine || (v == mine && (i * UVMRT_PHASE_COUNT + q) < (l * UVMRT_PHASE_COUNT + p))) better++;
        }
    return better < TOP_N;
}

static void text_row(FILE *f, const char *name, const char *phase, const uvmrt_layer_stats_t *s, const char *mark)
{
    fprintf(f,
            "%-16.16s %-9s %6llu %10.1f %9.1f %9.1f %8.1f %8.1f %8llu %9.1f %9llu %9.1f %9.1f %9.1f %9.1f "
            "%9.2f %9.2f %s\n",
            name, phase, (unsigned long long)s->calls, s->prefetch_bytes / MIB, s->evict_bytes / MIB,
            s->discard_bytes / MIB, s->remote_read_bytes / MIB, s->remote_write_bytes / MIB,
            (unsigned long long)s->fault_count, s->fault_bytes / MIB, (unsigned long long)s->gpu_faults,
            s->fault_htod_bytes / MIB, s->prefetch_htod_bytes / MIB, s->driver_prefetch_htod_bytes / MIB,
            s->evict_dtoh_bytes / MIB, s->wait_ns / 1e6, s->duration_ns / 1e6, mark);
}

static void text_steps_shown(const uvmrt_context_t *ctx, FILE *f);
static void text_recording_step(const uvmrt_context_t *ctx, FILE *f);

static void write_text(const uvmrt_context_t *ctx, FILE *f)
{
    fprintf(f, "uvmrt %s report: policy %s, backend %s", uvmrt_version_string(), uvmrt_policy_name(ctx->cfg.policy),
            ctx->ops->name);
    if (ctx->cfg.backend == UVMRT_BACKEND_SIM) fprintf(f, " (profile %s)", ctx->profile->name);
    uvmrt_summary_t sum;
    uvmrt_summary_get(ctx, &sum);
    fprintf(f, ", budget %.2f GiB, tensors %.2f GiB, peak resident %.2f GiB, kept in host memory %.2f GiB, "
               "steps %llu, fault statistics: %s\n",
            ctx->budget / GIB, ctx->allocated_bytes / GIB, ctx->peak_resident_bytes / GIB,
            sum.host_homed_bytes / GIB, (unsigned long long)ctx->n_steps, sum.fault_stats_source);
    if (uvmrt__faults_active(ctx) && ctx->n_steps > 0) {
        fprintf(f, "driver's counters from %llu of %llu steps (", (unsigned long long)sum.fault_sampled_steps,
                (unsigned long long)ctx->n_steps);
        if (sum.fault_sample_every > 0) fprintf(f, "every %d", sum.fault_sample_every);
        else fprintf(f, "auto, every %u now", sum.fault_sample_period);
        if (sum.fault_sample_overhead >= 0)
            fprintf(f, "; a collecting step took %+.1f%% longer than one that did not", 100.0 * sum.fault_sample_overhead);
        fprintf(f, "): the driver columns cover those steps only\n");
    }
    text_steps_shown(ctx, f); /* which steps the table sums (steady.c) */
    /* group labels over the first column of each group (offsets follow text_row's widths) */
    fprintf(f, "%34s%-68s%s\n", "", "|-- uvmrt's own", "|-- the driver's");
    fprintf(f, "%-16s %-9s %6s %10s %9s %9s %8s %8s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "layer", "phase",
            "calls", "prefetch", "evict", "discard", "rd", "wr", "faults", "fault", "gpu", "fault-in", "prefetch",
            "drv-pf", "to-host", "wait", "time");
    fprintf(f, "%-16s %-9s %6s %10s %9s %9s %8s %8s %8s %9s %9s %9s %9s %9s %9s %9s %9s\n", "", "", "", "MiB",
            "MiB", "MiB", "MiB", "MiB", "groups", "MiB", "faults", "MiB", "MiB", "MiB", "MiB", "ms", "ms");
    uvmrt_layer_stats_t total;
    memset(&total, 0, sizeof total);
    for (int l = 0; l < ctx->n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t steady;
            uvmrt__steady_layer(ctx, l, p, &steady);
            const uvmrt_layer_stats_t *s = &steady;
            if (s->calls == 0) continue;
            char mark[4] = "";
            if (is_top(ctx, l, p, 0)) strcat(mark, "*");
            if (is_top(ctx, l, p, 1)) strcat(mark, "!");
            text_row(f, ctx->layers[l].name, uvmrt_phase_name((uvmrt_phase_t)p), s, mark);
            add_layer(&total, s);
        }
    text_row(f, "total", "", &total, "");
    fprintf(f, "* most faults, ! most wait (top %d each); rd/wr: over the link from host-homed tensors;\n"
               "driver columns: %s (gpu faults = fault groups; fault-in, prefetch, drv-pf = host to device by "
               "cause: fault, uvmrt's prefetch, driver's prefetch; to-host = device to host, any cause)\n",
            TOP_N,
            strcmp(sum.fault_stats_source, "cupti") == 0 ? "CUPTI unified-memory counters"
            : strcmp(sum.fault_stats_source, "sim") == 0 ? "the sim model's counters"
                                                          : "none collected (0)");
    if (sum.fault_records_lost > 0)
        fprintf(f, "lost: %llu records (CUPTI's queue full or no memory): the driver columns are short by these\n",
                (unsigned long long)sum.fault_records_lost);
    if (sum.unattributed_records > 0)
        fprintf(f, "unattributed: %llu records, %llu gpu faults, %.1f MiB to device, %.1f MiB to host, %llu cpu faults\n",
                (unsigned long long)sum.unattributed_records, (unsigned long long)sum.unattributed_gpu_faults,
                sum.unattributed_htod_bytes / MIB, sum.unattributed_dtoh_bytes / MIB,
                (unsigned long long)sum.unattributed_cpu_faults);
    text_recording_step(ctx, f);
    fprintf(f, "step ms:");
    for (uint64_t i = 0; i < ctx->n_steps; i++) fprintf(f, " %.2f", ctx->steps[i].step_ns / 1e6);
    fprintf(f, "\n");
    uvmrt__memsum_text(ctx, f); /* the memory summary section (memsum.c) */
}

/* ------------------------------------------------------------------ json */
static json_t *json_u64(uint64_t v) { return json_integer((json_int_t)v); }

/* The counters layer and step stats share, under the same names. */
#define SET_SHARED_COUNTERS(o, s)                                                               \
    do {                                                                                        \
        json_object_set_new(o, "prefetch_bytes", json_u64((s)->prefetch_bytes));               \
        json_object_set_new(o, "evict_bytes", json_u64((s)->evict_bytes));                     \
        json_object_set_new(o, "discard_bytes", json_u64((s)->discard_bytes));                 \
        json_object_set_new(o, "fault_count", json_u64((s)->fault_count));                     \
        json_object_set_new(o, "fault_bytes", json_u64((s)->fault_bytes));                     \
        json_object_set_new(o, "remote_read_bytes", json_u64((s)->remote_read_bytes));         \
        json_object_set_new(o, "remote_write_bytes", json_u64((s)->remote_write_bytes));       \
        json_object_set_new(o, "wait_ns", json_u64((s)->wait_ns));                             \
    } while (0)

/* The driver's counters (CUPTI or the sim model), same names in both. */
#define SET_DRIVER_COUNTERS(o, s)                                                               \
    do {                                                                                        \
        json_object_set_new(o, "gpu_faults", json_u64((s)->gpu_faults));                       \
        json_object_set_new(o, "fault_htod_bytes", json_u64((s)->fault_htod_bytes));           \
        json_object_set_new(o, "prefetch_htod_bytes", json_u64((s)->prefetch_htod_bytes));     \
        json_object_set_new(o, "driver_prefetch_htod_bytes",                                   \
                            json_u64((s)->driver_prefetch_htod_bytes));                        \
        json_object_set_new(o, "evict_dtoh_bytes", json_u64((s)->evict_dtoh_bytes));           \
        json_object_set_new(o, "thrashing", json_u64((s)->thrashing));                         \
        json_object_set_new(o, "throttling", json_u64((s)->throttling));                       \
        json_object_set_new(o, "remote_map", json_u64((s)->remote_map));                       \
        json_object_set_new(o, "cpu_faults", json_u64((s)->cpu_faults));                       \
    } while (0)

static json_t *phase_json(const uvmrt_layer_stats_t *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "calls", json_u64(s->calls));
    json_object_set_new(o, "sampled_calls", json_u64(s->sampled_calls));
    SET_SHARED_COUNTERS(o, s);
    json_object_set_new(o, "duration_ns", json_u64(s->duration_ns));
    SET_DRIVER_COUNTERS(o, s);
    return o;
}

static json_t *step_json(const uvmrt_step_stats_t *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "step_ns", json_u64(s->step_ns));
    SET_SHARED_COUNTERS(o, s);
    json_object_set_new(o, "peak_resident_bytes", json_u64(s->peak_resident_bytes));
    json_object_set_new(o, "h2d_busy_ns", json_u64(s->h2d_busy_ns));
    json_object_set_new(o, "d2h_busy_ns", json_u64(s->d2h_busy_ns));
    json_object_set_new(o, "fault_sampled", json_boolean(s->fault_sampled));
    SET_DRIVER_COUNTERS(o, s);
    return o;
}

static json_t *json_recording_step(const uvmrt_context_t *ctx);

static json_t *build_json(const uvmrt_context_t *ctx)
{
    json_t *root = json_object();
    json_object_set_new(root, "uvmrt_version", json_string(uvmrt_version_string()));
    json_object_set_new(root, "policy", json_string(uvmrt_policy_name(ctx->cfg.policy)));
    json_object_set_new(root, "backend", json_string(ctx->ops->name));
    json_object_set_new(root, "profile", json_string(ctx->profile->name));
    json_object_set_new(root, "budget_bytes", json_u64(ctx->budget));
    json_object_set_new(root, "allocated_bytes", json_u64(ctx->allocated_bytes));
    json_object_set_new(root, "peak_resident_bytes", json_u64(ctx->peak_resident_bytes));
    uvmrt_summary_t sum;
    uvmrt_summary_get(ctx, &sum);
    json_object_set_new(root, "host_homed_bytes", json_u64(sum.host_homed_bytes));
    json_object_set_new(root, "plans_built", json_u64(ctx->plans_built));
    json_object_set_new(root, "fault_stats_source", json_string(sum.fault_stats_source));
    json_t *fsam = json_object();
    json_object_set_new(fsam, "every", sum.fault_sample_every > 0 ? json_integer(sum.fault_sample_every)
                                                                 : json_string("auto"));
    json_object_set_new(fsam, "period", json_integer(sum.fault_sample_period));
    json_object_set_new(fsam, "sampled_steps", json_u64(sum.fault_sampled_steps));
    json_object_set_new(fsam, "overhead", sum.fault_sample_overhead >= 0 ? json_real(sum.fault_sample_overhead)
                                                                        : json_null());
    json_object_set_new(root, "fault_sampling", fsam);
    json_object_set_new(root, "fault_records_lost", json_u64(sum.fault_records_lost));
    json_t *un = json_object();
    json_object_set_new(un, "records", json_u64(ctx->unattr.records));
    static const char *const fc_names[FC_COUNT] = {
        [FC_GPU_FAULTS] = "gpu_faults", [FC_FAULT_HTOD] = "fault_htod_bytes",
        [FC_PREFETCH_HTOD] = "prefetch_htod_bytes", [FC_DRIVER_PREFETCH_HTOD] = "driver_prefetch_htod_bytes",
        [FC_EVICT_DTOH] = "evict_dtoh_bytes", [FC_THRASHING] = "thrashing", [FC_THROTTLING] = "throttling",
        [FC_REMOTE_MAP] = "remote_map", [FC_CPU_FAULTS] = "cpu_faults"};
    for (int i = 0; i < FC_COUNT; i++) json_object_set_new(un, fc_names[i], json_u64(ctx->unattr.c.v[i]));
    json_object_set_new(root, "unattributed", un);
    json_t *step_ns = json_array(), *steps = json_array();
    for (uint64_t i = 0; i < ctx->n_steps; i++) {
        json_array_append_new(step_ns, json_u64(ctx->steps[i].step_ns));
        json_array_append_new(steps, step_json(&ctx->steps[i]));
    }
    json_object_set_new(root, "step_ns", step_ns);
    json_object_set_new(root, "steps", steps);
    json_t *layers = json_array();
    for (int l = 0; l < ctx->n_layers; l++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(ctx->layers[l].name));
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++)
            if (ctx->layers[l].stats[p].calls > 0)
                json_object_set_new(o, uvmrt_phase_name((uvmrt_phase_t)p), phase_json(&ctx->layers[l].stats[p]));
        json_array_append_new(layers, o);
    }
    json_object_set_new(root, "layers", layers);
    json_object_set_new(root, "memory", uvmrt__memsum_json(ctx)); /* memsum.c */
    json_object_set_new(root, "recording_step", json_recording_step(ctx));
    return root;
}

/* ------------------------------------------------------------------ csv */
static void write_csv(const uvmrt_context_t *ctx, FILE *f)
{
    fprintf(f, "policy,backend,fault_stats_source,step,layer,name,phase,calls,prefetch_bytes,evict_bytes,"
               "discard_bytes,fault_count,fault_bytes,remote_read_bytes,remote_write_bytes,wait_ns,duration_ns,"
               "gpu_faults,fault_htod_bytes,prefetch_htod_bytes,driver_prefetch_htod_bytes,evict_dtoh_bytes,"
               "thrashing,throttling,remote_map,cpu_faults,step_ns,fault_sampled\n");
    for (size_t i = 0; i < ctx->n_rows; i++) {
        const uvmrt_step_row_t *r = &ctx->rows[i];
        const uvmrt_layer_stats_t *s = &r->s;
        /* layer names are the user's: quote them (CSV doubles inner quotes) */
        fprintf(f, "%s,%s,%s,%llu,%d,\"", uvmrt_policy_name(ctx->cfg.policy), ctx->ops->name,
                uvmrt__faults_source(ctx), (unsigned long long)r->step + 1, r->layer); /* steps from 1 */
        for (const char *c = ctx->layers[r->layer].name; *c; c++) {
            if (*c == '"') fputc('"', f);
            fputc(*c, f);
        }
        fprintf(f, "\",%s,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
                   "%llu,%llu,%llu,%d\n",
                uvmrt_phase_name(r->phase), (unsigned long long)s->calls, (unsigned long long)s->prefetch_bytes,
                (unsigned long long)s->evict_bytes, (unsigned long long)s->discard_bytes,
                (unsigned long long)s->fault_count, (unsigned long long)s->fault_bytes,
                (unsigned long long)s->remote_read_bytes, (unsigned long long)s->remote_write_bytes,
                (unsigned long long)s->wait_ns, (unsigned long long)s->duration_ns,
                (unsigned long long)s->gpu_faults, (unsigned long long)s->fault_htod_bytes,
                (unsigned long long)s->prefetch_htod_bytes, (unsigned long long)s->driver_prefetch_htod_bytes,
                (unsigned long long)s->evict_dtoh_bytes, (unsigned long long)s->thrashing,
                (unsigned long long)s->throttling, (unsigned long long)s->remote_map,
                (unsigned long long)s->cpu_faults,
                (unsigned long long)(r->step < ctx->n_steps ? ctx->steps[r->step].step_ns : 0),
                r->step < ctx->n_steps ? ctx->steps[r->step].fault_sampled : 0);
    }
}

/* ------------------------------------------------------------------ trace */
/* Trace-event JSON: pid 1; tid 1 compute, 2 prefetch (h2d copy stream), 3 evict
 * (d2h copy stream); times in microseconds since the context was created. */
static json_t *trace_event(const char *name, const char *ph, int tid, double ts_us)
{
    json_t *e = json_object();
    json_object_set_new(e, "name", json_string(name));
    json_object_set_new(e, "ph", json_string(ph));
    json_object_set_new(e, "pid", json_integer(1));
    json_object_set_new(e, "tid", json_integer(tid));
    json_object_set_new(e, "ts", json_real(ts_us));
    return e;
}

static json_t *thread_name(int tid, const char *name)
{
    json_t *e = trace_event("thread_name", "M", tid, 0);
    json_t *a = json_object();
    json_object_set_new(a, "name", json_string(name));
    json_object_set_new(e, "args", a);
    return e;
}

static void trace_timeline(const uvmrt_context_t *ctx, json_t *ev);

static json_t *build_trace(const uvmrt_context_t *ctx)
{
    json_t *root = json_object(), *ev = json_array();
    json_array_append_new(ev, thread_name(1, "compute (layer calls)"));
    json_array_append_new(ev, thread_name(2, "copy: prefetch to GPU"));
    json_array_append_new(ev, thread_name(3, "copy: evict to host"));
    for (size_t i = 0; i < ctx->n_spans; i++) {
        const uvmrt_span_t *sp = &ctx->spans[i];
        char name[300];
        snprintf(name, sizeof name, "%s %s", ctx->layers[sp->layer].name, uvmrt_phase_name(sp->phase));
        json_t *e = trace_event(name, "X", 1, sp->start_ns / 1e3);
        json_object_set_new(e, "dur", json_real((sp->end_ns - sp->start_ns) / 1e3));
        json_t *a = json_object();
        json_object_set_new(a, "step", json_u64(sp->step + 1)); /* steps from 1 */
        json_object_set_new(a, "wait_us", json_real((sp->wait_end_ns - sp->start_ns) / 1e3));
        json_object_set_new(a, "fault_sampled",
                            json_boolean(sp->step < ctx->n_steps && ctx->steps[sp->step].fault_sampled));
        json_object_set_new(a, "gpu_faults", json_u64(sp->gpu_faults));
        json_object_set_new(a, "fault_htod_bytes", json_u64(sp->fault_htod_bytes));
        json_object_set_new(e, "args", a);
        json_array_append_new(ev, e);
        /* fault bursts: a counter, up at the call's start, back to 0 at its end */
        if (sp->gpu_faults > 0 || (i > 0 && ctx->spans[i - 1].gpu_faults > 0)) {
            json_t *c = trace_event("gpu faults", "C", 1, sp->start_ns / 1e3);
            json_t *ca = json_object();
            json_object_set_new(ca, "fault groups", json_u64(sp->gpu_faults));
            json_object_set_new(c, "args", ca);
            json_array_append_new(ev, c);
        }
    }
    if (ctx->n_spans > 0 && ctx->spans[ctx->n_spans - 1].gpu_faults > 0) {
        json_t *c = trace_event("gpu faults", "C", 1, ctx->spans[ctx->n_spans - 1].end_ns / 1e3);
        json_t *ca = json_object();
        json_object_set_new(ca, "fault groups", json_integer(0));
        json_object_set_new(c, "args", ca);
        json_array_append_new(ev, c);
    }
    for (size_t i = 0; i < ctx->n_copies; i++) {
        const uvmrt_copy_span_t *cp = &ctx->copies[i];
        json_t *e = trace_event(cp->d2h ? "evict" : "prefetch", "X", cp->d2h ? 3 : 2, cp->start_ns / 1e3);
        json_object_set_new(e, "dur", json_real((cp->end_ns - cp->start_ns) / 1e3));
        json_t *a = json_object();
        json_object_set_new(a, "step", json_u64(cp->step + 1));
        json_object_set_new(a, "bytes", json_u64(cp->bytes));
        json_object_set_new(e, "args", a);
        json_array_append_new(ev, e);
    }
    trace_timeline(ctx, ev); /* step markers, waits, resident bytes (appended below) */
    json_object_set_new(root, "traceEvents", ev);
    json_object_set_new(root, "displayTimeUnit", json_string("ms"));
    json_t *meta = json_object();
    json_object_set_new(meta, "uvmrt_version", json_string(uvmrt_version_string()));
    json_object_set_new(meta, "policy", json_string(uvmrt_policy_name(ctx->cfg.policy)));
    json_object_set_new(meta, "backend", json_string(ctx->ops->name));
    json_object_set_new(meta, "fault_stats_source", json_string(uvmrt__faults_source(ctx)));
    json_object_set_new(root, "otherData", meta);
    return root;
}

/* ------------------------------------------------------------------ writing */
enum { FMT_TEXT, FMT_JSON, FMT_CSV, FMT_TRACE };

static int format_of(const char *name)
{
    static const char *const names[] = {"text", "json", "csv", "trace"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

static int write_format(const uvmrt_context_t *ctx, FILE *f, int fmt)
{
    int bad = 0;
    if (fmt == FMT_JSON || fmt == FMT_TRACE) {
        json_t *root = fmt == FMT_JSON ? build_json(ctx) : build_trace(ctx);
        bad = root == NULL || json_dumpf(root, f, fmt == FMT_JSON ? JSON_INDENT(1) | JSON_PRESERVE_ORDER
                                                                  : JSON_COMPACT | JSON_PRESERVE_ORDER) != 0;
        json_decref(root);
        fputc('\n', f);
    } else if (fmt == FMT_CSV) {
        write_csv(ctx, f);
    } else {
        write_text(ctx, f);
    }
    return bad;
}

static uvmrt_status_t write_atomically(const uvmrt_context_t *ctx, const char *path, int fmt)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (tmp == NULL) return UVMRT_ERR_NOMEM;
    snprintf(tmp, n, "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd >= 0) {
        /* mkstemp makes it 0600; a report is an ordinary file (0666 less the umask). */
        mode_t mask = umask(0);
        umask(mask);
        fchmod(fd, 0666 & ~mask);
    }
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        return UVMRT_ERR_IO;
    }
    int bad = write_format(ctx, f, fmt);
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        unlink(tmp);
        free(tmp);
        return UVMRT_ERR_IO;
    }
    free(tmp);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_report_write(const uvmrt_context_t *ctx, const char *format, const char *path)
{
    if (ctx == NULL || format == NULL) return UVMRT_ERR_INVALID;
    int fmt = format_of(format);
    if (fmt < 0) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format '%s': expected text, json, csv or trace", format);
        return UVMRT_ERR_INVALID;
    }
    if (path == NULL || strcmp(path, "-") == 0) {
        int bad = write_format(ctx, stdout, fmt);
        bad |= fflush(stdout) != 0;
        return bad ? UVMRT_ERR_IO : UVMRT_OK;
    }
    return write_atomically(ctx, path, fmt);
}

uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx)
{
    uvmrt_status_t st = UVMRT_OK;
    if (strcmp(ctx->cfg.trace, "none") != 0 && ctx->cfg.trace[0] != '\0')
        st = write_atomically(ctx, ctx->cfg.trace, FMT_TRACE);
    const char *r = ctx->cfg.report;
    if (strcmp(r, "none") == 0 || r[0] == '\0') return st;
    if (strcmp(r, "stderr") == 0) {
        write_text(ctx, stderr);
        return st;
    }
    const char *colon = strchr(r, ':');
    char fmt[8];
    snprintf(fmt, sizeof fmt, "%.*s", (int)(colon - r), r);
    uvmrt_status_t st2 = write_atomically(ctx, colon + 1, format_of(fmt));
    return st != UVMRT_OK ? st : st2;
}

/* ------------------------------------------------------------------ steady state and the recording step */
/* Step 1 is recorded and runs like demand: the per-layer table and its marks
 * show steps 2..N, and step 1 gets its own table (steady.c keeps its rows). */
static void text_steps_shown(const uvmrt_context_t *ctx, FILE *f)
{
    uint64_t n = uvmrt__steps_done(ctx);
    if (uvmrt__steady_split(ctx))
        fprintf(f, "per layer and phase, steps 2..%llu (the steady state; step 1, the recording step, is below):\n",
                (unsigned long long)n);
    else if (n >= 2)
        fprintf(f, "per layer and phase, steps 1..%llu (step 1's rows were not kept: no memory)\n",
                (unsigned long long)n);
    else
        fprintf(f, "per layer and phase, step %s (the recording step only: no steady state yet):\n",
                n == 1 ? "1" : "none");
}

static void text_recording_step(const uvmrt_context_t *ctx, FILE *f)
{
    if (!uvmrt__steady_split(ctx)) return;
    fprintf(f, "recording step (step 1, runs like demand while the sequence is recorded):\n");
    uvmrt_layer_stats_t total;
    memset(&total, 0, sizeof total);
    for (int l = 0; l < ctx->n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t s;
            uvmrt__steady_recording(ctx, l, p, &s);
            if (s.calls == 0) continue;
            text_row(f, ctx->layers[l].name, uvmrt_phase_name((uvmrt_phase_t)p), &s, "");
            add_layer(&total, &s);
        }
    text_row(f, "total", "", &total, "");
}

/* {"step": 1, "layers": [{"name", "forward": {...}, ...}]}: step 1's rows, in the
 * same form as the report's "layers" (which sum every step). null when not kept. */
static json_t *json_recording_step(const uvmrt_context_t *ctx)
{
    if (ctx->rec_rows == NULL) return json_null();
    json_t *o = json_object(), *layers = json_array();
    json_object_set_new(o, "step", json_integer(1));
    for (int l = 0; l < ctx->n_layers; l++) {
        json_t *lo = json_object();
        json_object_set_new(lo, "name", json_string(ctx->layers[l].name));
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t s;
            uvmrt__steady_recording(ctx, l, p, &s);
            if (s.calls > 0) json_object_set_new(lo, uvmrt_phase_name((uvmrt_phase_t)p), phase_json(&s));
        }
        json_array_append_new(layers, lo);
    }
    json_object_set_new(o, "layers", layers);
    return o;
}

/* ------------------------------------------------------------------ trace: a clearer timeline */
/* Added to the trace's events: the process's name; an instant marker at the
 * start of each step ("step N", from 1, across every track); each layer call's
 * wait for its prefetches as a slice of its own ("wait for prefetches", B/E
 * nested at the start of the call's slice on tid 1); and a "resident bytes"
 * counter sampled when each call opened (uvmrt's accounting). */
static void trace_timeline(const uvmrt_context_t *ctx, json_t *ev)
{
    char pname[160];
    snprintf(pname, sizeof pname, "uvmrt: %s (policy %s, backend %s)", uvmrt__program_name(),
             uvmrt_policy_name(ctx->cfg.policy), ctx->ops->name);
    json_t *pn = trace_event("process_name", "M", 1, 0), *pa = json_object();
    json_object_set_new(pa, "name", json_string(pname));
    json_object_set_new(pn, "args", pa);
    json_array_append_new(ev, pn);
    uint64_t marked = UINT64_MAX;
    for (size_t i = 0; i < ctx->n_spans; i++) {
        const uvmrt_span_t *sp = &ctx->spans[i];
        if (sp->step != marked) { /* spans are kept in step order */
            char name[48];
            snprintf(name, sizeof name, "step %llu", (unsigned long long)sp->step + 1);
            json_t *m = trace_event(name, "i", 1, sp->start_ns / 1e3), *ma = json_object();
            json_object_set_new(m, "s", json_string("g"));
            json_object_set_new(ma, "step", json_integer((json_int_t)sp->step + 1));
            json_object_set_new(m, "args", ma);
            json_array_append_new(ev, m);
            marked = sp->step;
        }
        if (sp->wait_end_ns > sp->start_ns) {
            json_array_append_new(ev, trace_event("wait for prefetches", "B", 1, sp->start_ns / 1e3));
            json_array_append_new(ev, trace_event("wait for prefetches", "E", 1, sp->wait_end_ns / 1e3));
        }
        json_t *c = trace_event("resident bytes", "C", 1, sp->start_ns / 1e3), *ca = json_object();
        json_object_set_new(ca, "bytes", json_integer((json_int_t)sp->resident_bytes));
        json_object_set_new(c, "args", ca);
        json_array_append_new(ev, c);
    }
}
