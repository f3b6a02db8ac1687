/*
 * report_json.h -- what the JSON report (report.c) and the trace (report_trace.c)
 * build with: jansson calls that remember their first failure. Internal.
 */
#ifndef UVMRT_REPORT_JSON_H
#define UVMRT_REPORT_JSON_H

#include <jansson.h>

#include "internal.h"

/* jansson answers NULL or -1 when it cannot allocate (or is handed a NULL); a report
 * with a key silently missing must not pass as written, so every call goes through
 * these, which remember the first failure. The *_new calls take the value even when
 * they fail (jansson frees it), so nothing leaks either way. */
typedef struct jb {
    int failed;
} jb_t;

static inline json_t *jb_obj(jb_t *b)
{
    json_t *o = json_object();
    if (o == NULL) b->failed = 1;
    return o;
}

static inline json_t *jb_arr(jb_t *b)
{
    json_t *a = json_array();
    if (a == NULL) b->failed = 1;
    return a;
}

static inline void jb_set(jb_t *b, json_t *o, const char *key, json_t *v)
{
    if (json_object_set_new(o, key, v) != 0) b->failed = 1;
}

static inline void jb_append(jb_t *b, json_t *a, json_t *v)
{
    if (json_array_append_new(a, v) != 0) b->failed = 1;
}

static inline json_t *json_u64(uint64_t v) { return json_integer((json_int_t)v); }

/* A JSON string of s made valid UTF-8 (the report's own cleaning); NULL (and
 * b->failed) on no memory. */
json_t *uvmrt__jb_str(jb_t *b, const char *s);
static inline json_t *jb_str(jb_t *b, const char *s) { return uvmrt__jb_str(b, s); }

/* The stats of step number `step` (absolute, from 0) while the history keeps them,
 * else NULL. Rows and spans carry absolute step numbers; this is the one place that
 * maps them to the kept steps (a bounded history adds its offset here). */
const uvmrt_step_stats_t *uvmrt__report_kept_step(const uvmrt_context_t *ctx, uint64_t step);

/* The trace-event JSON (report_trace.c), or NULL when out of memory. */
json_t *uvmrt__report_trace(const uvmrt_context_t *ctx);

#endif
