/*
 * report_file.c -- how a report reaches its path (uvmrt-report(5), FILES): "-" is
 * stdout; a regular file (or one to create) is replaced through a temporary file
 * and a rename, so a reader never sees half a report; a link to a regular file
 * has its target replaced; a FIFO or a character device is written in place;
 * anything else is refused. The umask is never read or set.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "outfile.h"
#include "report.h"

/* What happens depends on what is at path: src/base/outfile.h has the rules (stdout for
 * "-"; a new or regular file, or a link's target, replaced through a temporary file
 * and a rename; a FIFO or character device written in place; anything else refused). */
static uvmrt_status_t write_to(const uvmrt_context_t *ctx, const char *path, int fmt)
{
    if (strcmp(path, "-") == 0) return uvmrt__report_to_stream(ctx, stdout, fmt, "to stdout");
    uvmrt__outfile_t o;
    char why[512];
    if (uvmrt__outfile_open(&o, path, 0, why, sizeof why) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, why);
        return UVMRT_ERR_IO;
    }
    char where[64 + 4096];
    snprintf(where, sizeof where, "'%s'", path);
    uvmrt_status_t st = uvmrt__report_to_stream(ctx, o.f, fmt, where);
    if (st != UVMRT_OK) {
        uvmrt__outfile_abandon(&o);
        return st;
    }
    if (uvmrt__outfile_close(&o, why, sizeof why) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, why);
        return UVMRT_ERR_IO;
    }
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_report_write(const uvmrt_context_t *ctx, const char *format, const char *path)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (format == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format is NULL: expected text, json, csv or trace");
        return UVMRT_ERR_INVALID;
    }
    int fmt = uvmrt__report_format(format);
    if (fmt < 0) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format '%s': expected text, json, csv or trace", format);
        return UVMRT_ERR_INVALID;
    }
    if (path != NULL && path[0] == '\0') {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: path is empty: expected a file path, - or NULL (stdout)");
        return UVMRT_ERR_INVALID;
    }
    return write_to(ctx, path == NULL ? "-" : path, fmt);
}

/* One output setting's path: 0 when it can be written (or names no file). */
static int output_ok(const uvmrt_context_t *ctx, const char *var, const char *path)
{
    char why[512];
    if (path[0] == '\0' || strcmp(path, "-") == 0) return 1;
    if (uvmrt__outfile_check(path, 0, why, sizeof why) == 0) return 1;
    LOG_ERROR(&ctx->log, "%s: cannot write '%s': %s; expected a path that can be written", var, path, why);
    return 0;
}

/* UVMRT_SPILL_DIR names an existing directory this user may write (the disk tier makes
 * its subdirectory there only when a tensor is put on it: a run learns it now). */
static int spill_dir_ok(const uvmrt_context_t *ctx)
{
    const char *d = ctx->cfg.spill_dir;
    if (strcmp(d, "none") == 0) return 1;
    struct stat st;
    const char *why = NULL;
    if (stat(d, &st) != 0) why = strerror(errno);
    else if (!S_ISDIR(st.st_mode)) why = "not a directory";
    else if (access(d, W_OK | X_OK) != 0) why = strerror(errno);
    if (why == NULL) return 1;
    LOG_ERROR(&ctx->log, "UVMRT_SPILL_DIR: '%s': %s; expected an existing directory this user may write", d, why);
    return 0;
}

uvmrt_status_t uvmrt__outputs_check(const uvmrt_context_t *ctx)
{
    const char *t = ctx->cfg.trace, *r = ctx->cfg.report, *rec = ctx->cfg.record;
    int ok = 1;
    if (strcmp(t, "stderr") != 0 && strcmp(t, "none") != 0)
        ok &= output_ok(ctx, "UVMRT_TRACE (or params.trace)", t);
    const char *colon = strchr(r, ':'); /* settings.c accepted only stderr, none or FORMAT:PATH */
    if (strcmp(r, "stderr") != 0 && strcmp(r, "none") != 0 && colon != NULL)
        ok &= output_ok(ctx, "UVMRT_REPORT (or params.report)", colon + 1);
    if (strcmp(rec, "none") != 0) ok &= output_ok(ctx, "UVMRT_RECORD", rec);
    ok &= spill_dir_ok(ctx);
    return ok ? UVMRT_OK : UVMRT_ERR_CONFIG;
}

uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx)
{
    uvmrt_status_t st = UVMRT_OK;
    const char *t = ctx->cfg.trace;
    if (strcmp(t, "stderr") == 0) st = uvmrt__report_to_stream(ctx, stderr, UVMRT__FMT_TRACE, "to stderr");
    else if (strcmp(t, "none") != 0 && t[0] != '\0') st = write_to(ctx, t, UVMRT__FMT_TRACE);
    const char *r = ctx->cfg.report;
    if (strcmp(r, "none") == 0 || r[0] == '\0') return st;
    uvmrt_status_t st2;
    if (strcmp(r, "stderr") == 0) {
        st2 = uvmrt__report_to_stream(ctx, stderr, UVMRT__FMT_TEXT, "to stderr");
    } else {
        const char *colon = strchr(r, ':'); /* settings.c accepted only FORMAT:PATH here */
        char fmt[8];
        snprintf(fmt, sizeof fmt, "%.*s", (int)(colon - r), r);
        st2 = write_to(ctx, colon + 1, uvmrt__report_format(fmt));
    }
    return st != UVMRT_OK ? st : st2;
}
