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

#include "internal.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

/* ------------------------------------------------------------------ text */
static void text_row(FILE *f, const char *name, const char *phase, const uvmrt_layer_stats_t *s)
{
    fprintf(f, "%-16.16s %-9s %6llu %11.1f %9.1f %11.1f %9.1f %9.1f %8llu %9.1f %9.2f %9.2f\n", name, phase,
            (unsigned long long)s->calls, s->prefetch_bytes / MIB, s->evict_bytes / MIB, s->discard_bytes / MIB,
            s->remote_read_bytes / MIB, s->remote_write_bytes / MIB, (unsigned long long)s->fault_count,
            s->fault_bytes / MIB, s->wait_ns / 1e6, s->duration_ns / 1e6);
}

static void write_text(const uvmrt_context_t *ctx, FILE *f)
{
    fprintf(f, "uvmrt %s report: policy %s, backend %s", uvmrt_version_string(), uvmrt_policy_name(ctx->cfg.policy),
            ctx->ops->name);
    if (ctx->cfg.backend == UVMRT_BACKEND_SIM) fprintf(f, " (profile %s)", ctx->profile->name);
    uvmrt_summary_t sum;
    uvmrt_summary_get(ctx, &sum);
    fprintf(f, ", budget %.2f GiB, tensors %.2f GiB, peak resident %.2f GiB, kept in host memory %.2f GiB, "
               "steps %llu\n",
            ctx->budget / GIB, ctx->allocated_bytes / GIB, ctx->peak_resident_bytes / GIB,
            sum.host_homed_bytes / GIB, (unsigned long long)ctx->n_steps);
    fprintf(f, "%-16s %-9s %6s %11s %9s %11s %9s %9s %8s %9s %9s %9s\n", "layer", "phase", "calls",
            "prefetch MiB", "evict MiB", "discard MiB", "rd MiB", "wr MiB", "faults", "fault MiB", "wait ms",
            "time ms");
    uvmrt_layer_stats_t total;
    memset(&total, 0, sizeof total);
    for (int l = 0; l < ctx->n_layers; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            const uvmrt_layer_stats_t *s = &ctx->layers[l].stats[p];
            if (s->calls == 0) continue;
            text_row(f, ctx->layers[l].name, uvmrt_phase_name((uvmrt_phase_t)p), s);
            total.calls += s->calls;
            total.prefetch_bytes += s->prefetch_bytes;
            total.evict_bytes += s->evict_bytes;
            total.discard_bytes += s->discard_bytes;
            total.fault_count += s->fault_count;
            total.fault_bytes += s->fault_bytes;
            total.remote_read_bytes += s->remote_read_bytes;
            total.remote_write_bytes += s->remote_write_bytes;
            total.wait_ns += s->wait_ns;
            total.duration_ns += s->duration_ns;
        }
    text_row(f, "total", "", &total);
    fprintf(f, "(rd/wr MiB: read/written over the link from host-homed tensors)\nstep ms:");
    for (uint64_t i = 0; i < ctx->n_steps; i++) fprintf(f, " %.2f", ctx->steps[i].step_ns / 1e6);
    fprintf(f, "\n");
}

/* ------------------------------------------------------------------ json */
static json_t *json_u64(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *phase_json(const uvmrt_layer_stats_t *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "calls", json_u64(s->calls));
    json_object_set_new(o, "prefetch_bytes", json_u64(s->prefetch_bytes));
    json_object_set_new(o, "evict_bytes", json_u64(s->evict_bytes));
    json_object_set_new(o, "discard_bytes", json_u64(s->discard_bytes));
    json_object_set_new(o, "fault_count", json_u64(s->fault_count));
    json_object_set_new(o, "fault_bytes", json_u64(s->fault_bytes));
    json_object_set_new(o, "remote_read_bytes", json_u64(s->remote_read_bytes));
    json_object_set_new(o, "remote_write_bytes", json_u64(s->remote_write_bytes));
    json_object_set_new(o, "wait_ns", json_u64(s->wait_ns));
    json_object_set_new(o, "duration_ns", json_u64(s->duration_ns));
    return o;
}

static json_t *step_json(const uvmrt_step_stats_t *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "step_ns", json_u64(s->step_ns));
    json_object_set_new(o, "prefetch_bytes", json_u64(s->prefetch_bytes));
    json_object_set_new(o, "evict_bytes", json_u64(s->evict_bytes));
    json_object_set_new(o, "discard_bytes", json_u64(s->discard_bytes));
    json_object_set_new(o, "fault_count", json_u64(s->fault_count));
    json_object_set_new(o, "fault_bytes", json_u64(s->fault_bytes));
    json_object_set_new(o, "remote_read_bytes", json_u64(s->remote_read_bytes));
    json_object_set_new(o, "remote_write_bytes", json_u64(s->remote_write_bytes));
    json_object_set_new(o, "wait_ns", json_u64(s->wait_ns));
    json_object_set_new(o, "peak_resident_bytes", json_u64(s->peak_resident_bytes));
    json_object_set_new(o, "h2d_busy_ns", json_u64(s->h2d_busy_ns));
    json_object_set_new(o, "d2h_busy_ns", json_u64(s->d2h_busy_ns));
    return o;
}

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
    return root;
}

/* ------------------------------------------------------------------ writing */
static uvmrt_status_t write_atomically(const uvmrt_context_t *ctx, const char *path, int json)
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
    int bad = 0;
    if (json) {
        json_t *root = build_json(ctx);
        bad = root == NULL || json_dumpf(root, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0;
        json_decref(root);
        fputc('\n', f);
    } else {
        write_text(ctx, f);
    }
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
    int json = strcmp(format, "json") == 0;
    if (!json && strcmp(format, "text") != 0) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format '%s': expected text or json", format);
        return UVMRT_ERR_INVALID;
    }
    if (path == NULL || strcmp(path, "-") == 0) {
        if (json) {
            json_t *root = build_json(ctx);
            int bad = json_dumpf(root, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER) != 0;
            json_decref(root);
            fputc('\n', stdout);
            return bad ? UVMRT_ERR_IO : UVMRT_OK;
        }
        write_text(ctx, stdout);
        fflush(stdout);
        return UVMRT_OK;
    }
    return write_atomically(ctx, path, json);
}

uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx)
{
    const char *r = ctx->cfg.report;
    if (strcmp(r, "none") == 0 || r[0] == '\0') return UVMRT_OK;
    if (strcmp(r, "stderr") == 0) {
        write_text(ctx, stderr);
        return UVMRT_OK;
    }
    return write_atomically(ctx, r + 5, strncmp(r, "json:", 5) == 0);
}
