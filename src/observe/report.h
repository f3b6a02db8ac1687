/*
 * report.h -- between the report builders (report.c) and the file writer
 * (report_file.c). Internal.
 */
#ifndef UVMRT_REPORT_H
#define UVMRT_REPORT_H

#include <stdio.h>

#include "internal.h"

enum { UVMRT__FMT_TEXT, UVMRT__FMT_JSON, UVMRT__FMT_CSV, UVMRT__FMT_TRACE };

/* UVMRT__FMT_* of "text", "json", "csv" or "trace"; -1 for anything else. */
int uvmrt__report_format(const char *name);

/* Writes the report in format fmt to f and flushes it. UVMRT_ERR_NOMEM when it could
 * not be built (jansson's allocations included), UVMRT_ERR_IO when f refused the
 * bytes; either is logged, naming `where` ("to stdout", "'PATH'"). */
uvmrt_status_t uvmrt__report_to_stream(const uvmrt_context_t *ctx, FILE *f, int fmt, const char *where);

/* A user's name for a text table: valid UTF-8 (bad bytes as U+FFFD), control
 * characters as '?', cut to `cols` characters on a character boundary and padded to
 * them. Caller frees; NULL on no memory. */
char *uvmrt__report_text_name(const char *s, size_t cols);

#endif
