/*
 * report.c -- the text table, JSON and CSV reports (formats documented in
 * doc/uvmrt-report.5), their columns generated from UVMRT_COUNTERS, written to a
 * stream with the trace (report_trace.c). report_file.c decides how they reach a
 * path.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "faults.h"
#include "internal.h"
#include "memsum.h"
#include "report.h"
#include "report_json.h"
#include "steady.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ------------------------------------------------------------------ the counters */
/* UVMRT_COUNTERS as a table, for the columns of the text and CSV reports. */
enum { SRC_CALL, SRC_OWN, SRC_DRIVER, SRC_LATE }; /* LATE: own counters at the structs' ends */
enum { SCALE_COUNT, SCALE_MIB, SCALE_MS };
typedef struct counter_col {
    const char *name;
    int source;     /* SRC_* */
    int csv;
    int text_rank;  /* 0: not in the text table */
    const char *text_label, *text_unit;
    int text_width;
    int text_scale; /* SCALE_* */
    size_t off;     /* in uvmrt_layer_stats_t */
} counter_col_t;

#define COUNTER_COL(name, tag, src, step, sum, csv, rank, label, unit, width, scale) \
    {#name, SRC_##src, csv, rank, label, unit, width, SCALE_##scale, offsetof(uvmrt_layer_stats_t, name)},
static const counter_col_t counter_cols[] = {UVMRT_COUNTERS(COUNTER_COL)};
#undef COUNTER_COL
#define N_COUNTERS (sizeof counter_cols / sizeof counter_cols[0])

static uint64_t counter_of(const uvmrt_layer_stats_t *s, const counter_col_t *c)
{
    uint64_t v;
    memcpy(&v, (const char *)s + c->off, sizeof v);
    return v;
}

const uvmrt_step_stats_t *uvmrt__report_kept_step(const uvmrt_context_t *ctx, uint64_t step)
{
    const uvmrt_history_t *h = &ctx->hist;
    return step >= h->steps_before && step < uvmrt__steps_done(ctx) ? &h->steps[step - h->steps_before] : NULL;
}

/* ------------------------------------------------------------------ names */
/* Layer names (and a custom backend's name) are the user's bytes. jansson refuses
 * strings that are not valid UTF-8 (json_string returns NULL), so such a name once
 * vanished from the JSON and trace reports; now every report shows the same valid
 * UTF-8 text: each byte that does not belong to a well-formed UTF-8 sequence (a stray
 * byte, a character cut short, an overlong form, a surrogate, past U+10FFFF) becomes
 * U+FFFD. */
#define REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* Length of the well-formed UTF-8 sequence at s, or 0 when s[0] does not start one. */
static size_t utf8_seq(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    unsigned char lo = 0x80, hi = 0xBF;
    size_t n;
    if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0) lo = 0xA0;      /* no overlong forms */
        else if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
    } else {
        return 0;
    }
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0; /* also stops at the terminating NUL */
    return n;
}

/* A valid UTF-8 copy of s (caller frees), invalid bytes replaced; NULL on no memory. */
static char *utf8_clean(const char *s)
{
    size_t len = strlen(s);
    char *out = malloc(3 * len + 1); /* each byte becomes at most the 3 of U+FFFD */
    if (out == NULL) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    char *o = out;
    while (*p) {
        size_t n = utf8_seq(p);
        if (n == 0) {
            memcpy(o, REPLACEMENT, 3);
            o += 3;
            p++;
        } else {
            memcpy(o, p, n);
            o += n;
            p += n;
        }
    }
    *o = '\0';
    return out;
}

/* The name for the text table: valid UTF-8, control characters (a newline would
 * break the table) shown as '?', cut to `cols` characters at a character boundary and
 * padded with spaces to `cols` characters. NULL on no memory; caller frees. */
char *uvmrt__report_text_name(const char *s, size_t cols)
{
    char *clean = utf8_clean(s);
    if (clean == NULL) return NULL;
    char *out = malloc(strlen(clean) + cols + 1);
    if (out == NULL) {
        free(clean);
        return NULL;
    }
    const unsigned char *p = (const unsigned char *)clean;
    char *o = out;
    size_t chars = 0;
    while (*p && chars < cols) {
        size_t n = utf8_seq(p); /* clean: always > 0 */
        if (n == 1 && (*p < 0x20 || *p == 0x7F)) *o++ = '?';
        else {
            memcpy(o, p, n);
            o += n;
        }
        p += n;
        chars++;
    }
    while (chars++ < cols) *o++ = ' ';
    *o = '\0';
    free(clean);
    return out;
}

/* ------------------------------------------------------------------ text */
/* Like torch.cuda.memory_summary(): one row per (layer, phase), units in the
 * header, a totals row, the top offenders marked. */
#define TOP_N 3
#define TEXT_LEAD 27 /* "%-16.16s %-9s " before the counter columns */

static void add_layer(uvmrt_layer_stats_t *t, const uvmrt_layer_stats_t *s)
{
#define ADD(name, ...) t->name += s->name;
    UVMRT_COUNTERS(ADD)
#undef ADD
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
    for (int i = 0; i < ctx->tensors.n_layers; i++)
        for (int q = 0; q < UVMRT_PHASE_COUNT; q++) {
            uvmrt__steady_layer(ctx, i, q, &o_s);
            const uvmrt_layer_stats_t *o = &o_s;
            if (o->calls == 0) continue;
            uint64_t v = by_wait ? o->wait_ns : faults_of(ctx, o);
            if (v > mine || (v == mine && (i * UVMRT_PHASE_COUNT + q) < (l * UVMRT_PHASE_COUNT + p))) better++;
        }
    return better < TOP_N;
}

/* The text table's columns, left to right: the counters with a text rank, by rank. */
static size_t text_columns(const counter_col_t **cols)
{
    size_t n = 0;
    for (size_t i = 0; i < N_COUNTERS; i++)
        if (counter_cols[i].text_rank > 0) cols[n++] = &counter_cols[i];
    for (size_t i = 1; i < n; i++) /* insertion sort: a score of columns */
        for (size_t j = i; j > 0 && cols[j - 1]->text_rank > cols[j]->text_rank; j--) {
            const counter_col_t *t = cols[j];
            cols[j] = cols[j - 1];
            cols[j - 1] = t;
        }
    return n;
}

/* -1 when the name could not be made (no memory). */
static int text_row(FILE *f, const char *name, const char *phase, const uvmrt_layer_stats_t *s, const char *mark,
                    const counter_col_t *const *cols, size_t n)
{
    char *shown = uvmrt__report_text_name(name, 16);
    if (shown == NULL) return -1;
    fprintf(f, "%s %-9s", shown, phase);
    free(shown);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = counter_of(s, cols[i]);
        if (cols[i]->text_scale == SCALE_MIB) fprintf(f, " %*.1f", cols[i]->text_width, v / MIB);
        else if (cols[i]->text_scale == SCALE_MS) fprintf(f, " %*.2f", cols[i]->text_width, v / 1e6);
        else fprintf(f, " %*llu", cols[i]->text_width, (unsigned long long)v);
    }
    fprintf(f, " %s\n", mark);
    return 0;
}

/* The header: group labels ("|-- uvmrt's own" over uvmrt's counters, "|-- the
 * driver's" over the driver's) at the first column of each run of one source, then
 * the column names, then their units. */
static void text_header(FILE *f, const counter_col_t *const *cols, size_t n)
{
    char groups[1024];
    size_t pos = TEXT_LEAD, end = 0;
    memset(groups, ' ', sizeof groups);
    for (size_t i = 0; i < n && pos + (size_t)cols[i]->text_width < sizeof groups; i++) {
        const char *label = cols[i]->source != SRC_DRIVER ? "|-- uvmrt's own" : "|-- the driver's";
        if (cols[i]->source != SRC_CALL && (i == 0 || cols[i - 1]->source != cols[i]->source)) {
            size_t span = 0; /* up to the next run: the label must not run into it */
            for (size_t j = i; j < n && cols[j]->source == cols[i]->source; j++) span += cols[j]->text_width + 1u;
            size_t len = strlen(label) < span - 1 ? strlen(label) : span - 1;
            if (pos + len < sizeof groups) {
                memcpy(groups + pos, label, len);
                end = pos + len;
            }
        }
        pos += cols[i]->text_width + 1u;
    }
    fprintf(f, "%.*s\n", (int)end, groups);
    fprintf(f, "%-16s %-9s", "layer", "phase");
    for (size_t i = 0; i < n; i++) fprintf(f, " %*s", cols[i]->text_width, cols[i]->text_label);
    fprintf(f, "\n%-16s %-9s", "", "");
    for (size_t i = 0; i < n; i++) fprintf(f, " %*s", cols[i]->text_width, cols[i]->text_unit);
    fprintf(f, "\n");
}

static void text_steps_shown(const uvmrt_context_t *ctx, FILE *f);
static uvmrt_status_t text_recording_step(const uvmrt_context_t *ctx, FILE *f, const counter_col_t *const *cols,
                                          size_t n);

/* The disk tier's traffic over the kept steps: bytes per step each way and the writes
 * per day this rate projects (drive wear, TB of 1e12 bytes). 0 when the tier is unused. */
typedef struct spill_rates {
    double read_per_step, write_per_step, tb_written_per_day;
} spill_rates_t;
static int spill_rates(const uvmrt_context_t *ctx, spill_rates_t *r)
{
    double rd = 0, wr = 0, ns = 0;
    for (uint64_t i = 0; i < ctx->hist.n_steps; i++) {
        rd += (double)ctx->hist.steps[i].spill_read_bytes;
        wr += (double)ctx->hist.steps[i].spill_write_bytes;
        ns += (double)ctx->hist.steps[i].step_ns;
    }
    if (ctx->tier.sp == NULL || ctx->hist.n_steps == 0) return 0;
    r->read_per_step = rd / (double)ctx->hist.n_steps;
    r->write_per_step = wr / (double)ctx->hist.n_steps;
    r->tb_written_per_day = ns > 0 ? wr / (ns / 1e9) * 86400.0 / 1e12 : 0;
    return 1;
}

/* UVMRT_ERR_NOMEM when a name could not be made; write errors are left to ferror. */
static uvmrt_status_t write_text(const uvmrt_context_t *ctx, FILE *f)
{
    char *backend = utf8_clean(ctx->be.ops->name);
    if (backend == NULL) return UVMRT_ERR_NOMEM;
    fprintf(f, "uvmrt %s report: policy %s, backend %s", uvmrt_version_string(), uvmrt_policy_name(ctx->cfg.policy),
            backend);
    free(backend);
    if (ctx->cfg.backend == UVMRT_BACKEND_SIM) fprintf(f, " (profile %s)", ctx->profile->name);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    uvmrt_summary_get(ctx, &sum);
    fprintf(f, ", budget %.2f GiB, tensors %.2f GiB, peak resident %.2f GiB, kept in host memory %.2f GiB, "
               "steps %llu, fault statistics: %s\n",
            ctx->budget / GIB, ctx->tensors.allocated_bytes / GIB, ctx->res.peak_bytes / GIB,
            sum.host_homed_bytes / GIB, (unsigned long long)sum.steps, sum.fault_stats_source);
    char hb[32] = "none";
    if (sum.host_budget_bytes) snprintf(hb, sizeof hb, "%.2f GiB", sum.host_budget_bytes / GIB);
    fprintf(f, "host memory: peak %.2f GiB, the plan's need %.2f GiB (with %.2f GiB declared outside uvmrt), "
               "host budget %s\n",
            sum.peak_host_bytes / GIB, sum.plan_host_bytes / GIB, sum.host_external_bytes / GIB, hb);
    if (uvmrt__faults_active(ctx) && sum.steps > 0) {
        fprintf(f, "driver's counters from %llu of %llu steps (", (unsigned long long)sum.fault_sampled_steps,
                (unsigned long long)sum.steps);
        if (sum.fault_sample_every > 0) fprintf(f, "every %d", sum.fault_sample_every);
        else fprintf(f, "auto, every %u now", sum.fault_sample_period);
        if (sum.fault_sample_overhead >= 0)
            fprintf(f, "; a collecting step took %+.1f%% longer than one that did not", 100.0 * sum.fault_sample_overhead);
        fprintf(f, "): the driver columns cover those steps only\n");
    }
    spill_rates_t sr;
    if (spill_rates(ctx, &sr))
        fprintf(f, "disk tier (%s, engine %s, %s): %.1f MiB read and %.1f MiB written per step; at this rate "
                   "%.3g TB written per day\n",
                uvmrt__spill_path(ctx->tier.sp), uvmrt__spill_engine(ctx->tier.sp),
                uvmrt__spill_direct(ctx->tier.sp) ? "O_DIRECT" : "buffered", sr.read_per_step / MIB,
                sr.write_per_step / MIB, sr.tb_written_per_day);
    const counter_col_t *cols[N_COUNTERS];
    size_t n = text_columns(cols);
    text_steps_shown(ctx, f); /* which steps the table sums (steady.c) */
    text_header(f, cols, n);
    uvmrt_layer_stats_t total;
    memset(&total, 0, sizeof total);
    for (int l = 0; l < ctx->tensors.n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t steady;
            uvmrt__steady_layer(ctx, l, p, &steady);
            const uvmrt_layer_stats_t *s = &steady;
            if (s->calls == 0) continue;
            char mark[4] = "";
            if (is_top(ctx, l, p, 0)) strcat(mark, "*");
            if (is_top(ctx, l, p, 1)) strcat(mark, "!");
            if (text_row(f, ctx->tensors.layers[l].name, uvmrt_phase_name((uvmrt_phase_t)p), s, mark, cols, n) != 0)
                return UVMRT_ERR_NOMEM;
            add_layer(&total, s);
        }
    if (text_row(f, "total", "", &total, "", cols, n) != 0) return UVMRT_ERR_NOMEM;
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
    if (sum.backend_errors > 0)
        fprintf(f, "backend errors: %llu that calls completed without (each kind logged once; e.g. a timing "
                   "event: times read 0)\n",
                (unsigned long long)sum.backend_errors);
    if (sum.unattributed_records > 0)
        fprintf(f, "unattributed: %llu records, %llu gpu faults, %.1f MiB to device, %.1f MiB to host, %llu cpu faults\n",
                (unsigned long long)sum.unattributed_records, (unsigned long long)sum.unattributed_gpu_faults,
                sum.unattributed_htod_bytes / MIB, sum.unattributed_dtoh_bytes / MIB,
                (unsigned long long)sum.unattributed_cpu_faults);
    if (text_recording_step(ctx, f, cols, n) != UVMRT_OK) return UVMRT_ERR_NOMEM;
    fprintf(f, "step ms (steps %llu..%llu%s):", (unsigned long long)ctx->hist.steps_before + 1,
            (unsigned long long)uvmrt__steps_done(ctx), ctx->hist.steps_before ? ", older ones summed out of the history" : "");
    for (uint64_t i = 0; i < ctx->hist.n_steps; i++) fprintf(f, " %.2f", ctx->hist.steps[i].step_ns / 1e6);
    fprintf(f, "\n");
    uvmrt__memsum_text(ctx, f); /* the memory summary section (memsum.c) */
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ json */
json_t *uvmrt__jb_str(jb_t *b, const char *s)
{
    char *clean = utf8_clean(s);
    json_t *v = clean ? json_string(clean) : NULL;
    free(clean);
    if (v == NULL) b->failed = 1;
    return v;
}

/* Every counter of UVMRT_COUNTERS, under its name. */
static json_t *phase_json(jb_t *b, const uvmrt_layer_stats_t *s)
{
    json_t *o = jb_obj(b);
#define J_LAYER(name, ...) jb_set(b, o, #name, json_u64(s->name));
    UVMRT_COUNTERS(J_LAYER)
#undef J_LAYER
    return o;
}

/* The step's counters (step = 1 in UVMRT_COUNTERS), in the struct's order. */
static json_t *step_json(jb_t *b, const uvmrt_step_stats_t *s)
{
    json_t *o = jb_obj(b);
#define J_STEP_OF(want, name, src, step) UVMRT__IF_##step(UVMRT__##want##_##src(jb_set(b, o, #name, json_u64(s->name));))
#define J_STEP_OWN(name, tag, src, step, ...) J_STEP_OF(OWN, name, src, step)
#define J_STEP_DRIVER(name, tag, src, step, ...) J_STEP_OF(DRIVER, name, src, step)
#define J_STEP_LATE(name, tag, src, step, ...) J_STEP_OF(LATE, name, src, step)
    jb_set(b, o, "step_ns", json_u64(s->step_ns));
    UVMRT_COUNTERS(J_STEP_OWN)
    jb_set(b, o, "peak_resident_bytes", json_u64(s->peak_resident_bytes));
    jb_set(b, o, "h2d_busy_ns", json_u64(s->h2d_busy_ns));
    jb_set(b, o, "d2h_busy_ns", json_u64(s->d2h_busy_ns));
    jb_set(b, o, "fault_sampled", json_boolean(s->fault_sampled));
    UVMRT_COUNTERS(J_STEP_DRIVER)
    UVMRT_COUNTERS(J_STEP_LATE)
#undef J_STEP_LATE
#undef J_STEP_OF
#undef J_STEP_OWN
#undef J_STEP_DRIVER
    return o;
}

static json_t *json_recording_step(jb_t *b, const uvmrt_context_t *ctx);

static json_t *build_json(const uvmrt_context_t *ctx)
{
    jb_t jb = {0}, *b = &jb;
    json_t *root = jb_obj(b);
    jb_set(b, root, "uvmrt_version", jb_str(b, uvmrt_version_string()));
    jb_set(b, root, "policy", jb_str(b, uvmrt_policy_name(ctx->cfg.policy)));
    jb_set(b, root, "backend", jb_str(b, ctx->be.ops->name));
    jb_set(b, root, "profile", jb_str(b, ctx->profile->name));
    jb_set(b, root, "budget_bytes", json_u64(ctx->budget));
    jb_set(b, root, "allocated_bytes", json_u64(ctx->tensors.allocated_bytes));
    jb_set(b, root, "peak_resident_bytes", json_u64(ctx->res.peak_bytes));
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    uvmrt_summary_get(ctx, &sum);
    jb_set(b, root, "host_homed_bytes", json_u64(sum.host_homed_bytes));
    jb_set(b, root, "host_bytes", json_u64(sum.host_bytes));
    jb_set(b, root, "peak_host_bytes", json_u64(sum.peak_host_bytes));
    jb_set(b, root, "plan_host_bytes", json_u64(sum.plan_host_bytes));
    jb_set(b, root, "host_external_bytes", json_u64(sum.host_external_bytes));
    jb_set(b, root, "host_budget_bytes", json_u64(sum.host_budget_bytes));
    jb_set(b, root, "plans_built", json_u64(ctx->sched.plans_built));
    spill_rates_t sr;
    if (spill_rates(ctx, &sr)) {
        json_t *dt = jb_obj(b);
        jb_set(b, dt, "engine", jb_str(b, uvmrt__spill_engine(ctx->tier.sp)));
        jb_set(b, dt, "engine_why", jb_str(b, uvmrt__spill_engine_why(ctx->tier.sp)));
        jb_set(b, dt, "direct", json_boolean(uvmrt__spill_direct(ctx->tier.sp)));
        jb_set(b, dt, "read_bytes_per_step", json_real(sr.read_per_step));
        jb_set(b, dt, "write_bytes_per_step", json_real(sr.write_per_step));
        jb_set(b, dt, "tb_written_per_day", json_real(sr.tb_written_per_day));
        jb_set(b, root, "disk_tier", dt);
    }
    jb_set(b, root, "fault_stats_source", jb_str(b, sum.fault_stats_source));
    json_t *fsam = jb_obj(b);
    jb_set(b, fsam, "every", sum.fault_sample_every > 0 ? json_integer(sum.fault_sample_every) : jb_str(b, "auto"));
    jb_set(b, fsam, "period", json_integer(sum.fault_sample_period));
    jb_set(b, fsam, "sampled_steps", json_u64(sum.fault_sampled_steps));
    jb_set(b, fsam, "overhead", sum.fault_sample_overhead >= 0 ? json_real(sum.fault_sample_overhead) : json_null());
    jb_set(b, root, "fault_sampling", fsam);
    jb_set(b, root, "fault_records_lost", json_u64(sum.fault_records_lost));
    jb_set(b, root, "backend_errors", json_u64(sum.backend_errors));
    json_t *un = jb_obj(b);
    jb_set(b, un, "records", json_u64(ctx->hist.unattr.records));
#define J_UN(name, tag, src, ...) UVMRT__DRIVER_##src(jb_set(b, un, #name, json_u64(ctx->hist.unattr.c.v[FC_##tag]));)
    UVMRT_COUNTERS(J_UN)
#undef J_UN
    jb_set(b, root, "unattributed", un);
    json_t *step_ns = jb_arr(b), *steps = jb_arr(b);
    for (uint64_t i = 0; i < ctx->hist.n_steps && !b->failed; i++) {
        jb_append(b, step_ns, json_u64(ctx->hist.steps[i].step_ns));
        jb_append(b, steps, step_json(b, &ctx->hist.steps[i]));
    }
    jb_set(b, root, "steps_dropped", json_u64(ctx->hist.steps_before)); /* step_ns[0] is step steps_dropped + 1 */
    jb_set(b, root, "step_ns", step_ns);
    jb_set(b, root, "steps", steps);
    json_t *layers = jb_arr(b);
    for (int l = 0; l < ctx->tensors.n_layers && !b->failed; l++) {
        json_t *o = jb_obj(b);
        jb_set(b, o, "name", jb_str(b, ctx->tensors.layers[l].name));
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++)
            if (ctx->tensors.layers[l].stats[p].calls > 0)
                jb_set(b, o, uvmrt_phase_name((uvmrt_phase_t)p), phase_json(b, &ctx->tensors.layers[l].stats[p]));
        jb_append(b, layers, o);
    }
    jb_set(b, root, "layers", layers);
    json_t *mem = uvmrt__memsum_json(ctx); /* memsum.c: NULL on no memory */
    if (mem == NULL) b->failed = 1;
    jb_set(b, root, "memory", mem);
    jb_set(b, root, "recording_step", json_recording_step(b, ctx));
    if (b->failed) {
        json_decref(root);
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------ csv */
/* A CSV field: always quoted, inner quotes doubled (RFC 4180; commas and newlines
 * stay inside the quotes), valid UTF-8 as in the other reports. -1 on no memory. */
static int csv_quoted(FILE *f, const char *s)
{
    char *clean = utf8_clean(s);
    if (clean == NULL) return -1;
    fputc('"', f);
    for (const char *c = clean; *c; c++) {
        if (*c == '"') fputc('"', f);
        fputc(*c, f);
    }
    fputc('"', f);
    free(clean);
    return 0;
}

/* UVMRT_ERR_NOMEM when a name could not be made; write errors are left to ferror. */
static uvmrt_status_t write_csv(const uvmrt_context_t *ctx, FILE *f)
{
    fprintf(f, "policy,backend,fault_stats_source,step,layer,name,phase");
    for (size_t c = 0; c < N_COUNTERS; c++)
        if (counter_cols[c].csv) fprintf(f, ",%s", counter_cols[c].name);
    fprintf(f, ",step_ns,fault_sampled,plan_host_bytes\n");
    for (size_t i = 0; i < ctx->hist.n_rows; i++) {
        const uvmrt_step_row_t *r = &ctx->hist.rows[i];
        /* the backend's and the layer's names are the user's: quoted when they could need it */
        fprintf(f, "%s,", uvmrt_policy_name(ctx->cfg.policy));
        if (strspn(ctx->be.ops->name, "abcdefghijklmnopqrstuvwxyz0123456789_-") == strlen(ctx->be.ops->name))
            fputs(ctx->be.ops->name, f);
        else if (csv_quoted(f, ctx->be.ops->name) != 0)
            return UVMRT_ERR_NOMEM;
        fprintf(f, ",%s,%llu,%d,", uvmrt__faults_source(ctx), (unsigned long long)r->step + 1, r->layer); /* steps from 1 */
        if (csv_quoted(f, ctx->tensors.layers[r->layer].name) != 0) return UVMRT_ERR_NOMEM;
        fprintf(f, ",%s", uvmrt_phase_name(r->phase));
        for (size_t c = 0; c < N_COUNTERS; c++)
            if (counter_cols[c].csv) fprintf(f, ",%llu", (unsigned long long)counter_of(&r->s, &counter_cols[c]));
        const uvmrt_step_stats_t *st = uvmrt__report_kept_step(ctx, r->step);
        uint64_t host_now, host_plan;
        uvmrt__memsum_layer_host(ctx, r->layer, &host_now, &host_plan);
        fprintf(f, ",%llu,%d,%llu\n", (unsigned long long)(st ? st->step_ns : 0), st ? st->fault_sampled : 0,
                (unsigned long long)host_plan);
    }
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ to a stream */
int uvmrt__report_format(const char *name)
{
    static const char *const names[] = {"text", "json", "csv", "trace"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

uvmrt_status_t uvmrt__report_to_stream(const uvmrt_context_t *ctx, FILE *f, int fmt, const char *where)
{
    uvmrt_status_t st = UVMRT_OK;
    if (fmt == UVMRT__FMT_JSON || fmt == UVMRT__FMT_TRACE) {
        json_t *root = fmt == UVMRT__FMT_JSON ? build_json(ctx) : uvmrt__report_trace(ctx);
        if (root == NULL) st = UVMRT_ERR_NOMEM;
        else if (json_dumpf(root, f, fmt == UVMRT__FMT_JSON ? JSON_INDENT(1) | JSON_PRESERVE_ORDER
                                                            : JSON_COMPACT | JSON_PRESERVE_ORDER) != 0)
            st = ferror(f) ? UVMRT_ERR_IO : UVMRT_ERR_NOMEM; /* dumping allocates too */
        json_decref(root);
        if (st == UVMRT_OK) fputc('\n', f);
    } else if (fmt == UVMRT__FMT_CSV) {
        st = write_csv(ctx, f);
    } else {
        st = write_text(ctx, f);
    }
    if (st == UVMRT_OK && (ferror(f) || fflush(f) != 0)) st = UVMRT_ERR_IO;
    if (st == UVMRT_ERR_NOMEM)
        LOG_ERROR(&ctx->log, "cannot write report %s: out of memory building it", where);
    else if (st != UVMRT_OK)
        LOG_ERROR(&ctx->log, "cannot write report %s: %s", where, strerror(errno));
    return st;
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

static uvmrt_status_t text_recording_step(const uvmrt_context_t *ctx, FILE *f, const counter_col_t *const *cols,
                                          size_t n)
{
    if (!uvmrt__steady_split(ctx)) return UVMRT_OK;
    fprintf(f, "recording step (step 1, runs like demand while the sequence is recorded):\n");
    uvmrt_layer_stats_t total;
    memset(&total, 0, sizeof total);
    for (int l = 0; l < ctx->tensors.n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t s;
            uvmrt__steady_recording(ctx, l, p, &s);
            if (s.calls == 0) continue;
            if (text_row(f, ctx->tensors.layers[l].name, uvmrt_phase_name((uvmrt_phase_t)p), &s, "", cols, n) != 0)
                return UVMRT_ERR_NOMEM;
            add_layer(&total, &s);
        }
    return text_row(f, "total", "", &total, "", cols, n) != 0 ? UVMRT_ERR_NOMEM : UVMRT_OK;
}

/* {"step": 1, "layers": [{"name", "forward": {...}, ...}]}: step 1's rows, in the
 * same form as the report's "layers" (which sum every step). null when not kept. */
static json_t *json_recording_step(jb_t *b, const uvmrt_context_t *ctx)
{
    if (ctx->rec_rows == NULL) return json_null();
    json_t *o = jb_obj(b), *layers = jb_arr(b);
    jb_set(b, o, "step", json_integer(1));
    for (int l = 0; l < ctx->tensors.n_layers && !b->failed; l++) {
        json_t *lo = jb_obj(b);
        jb_set(b, lo, "name", jb_str(b, ctx->tensors.layers[l].name));
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_layer_stats_t s;
            uvmrt__steady_recording(ctx, l, p, &s);
            if (s.calls > 0) jb_set(b, lo, uvmrt_phase_name((uvmrt_phase_t)p), phase_json(b, &s));
        }
        jb_append(b, layers, lo);
    }
    jb_set(b, o, "layers", layers);
    return o;
}
