/*
 * settings.h -- the one configuration table: every setting has a name (UVMRT_ is
 * prepended for the environment), a default, a parser, a printer and a line of
 * documentation. Parsed once, when a context is created.
 */
#ifndef UVMRT_SETTINGS_H
#define UVMRT_SETTINGS_H

#include "log.h"
#include "uvmrt.h"

#define UVMRT_REPORT_MAX 4096
#define UVMRT_FAULT_SAMPLE_MAX 1000000
#define UVMRT_CONFIG_ENTRIES_MAX 24 /* the table's length at most (uvmrt_context_t.sources) */

typedef enum uvmrt_config_source {
    UVMRT_SRC_DEFAULT = 0,
    UVMRT_SRC_PARAM = 1,
    UVMRT_SRC_ENV = 2
} uvmrt_config_source_t;

/* The resolved settings of a context. */
typedef struct uvmrt_config {
    int device;
    uvmrt_backend_kind_t backend;
    int backend_auto; /* 1: backend was auto; backend_select.c made it cuda or sim */
    char profile[UVMRT_REPORT_MAX]; /* a built-in name or a profile file's path */
    uvmrt_policy_t policy;
    uint64_t budget_bytes; /* 0 = auto */
    uint64_t budget_reserve_bytes;
    int discard_dead;
    int remote;
    uvmrt_log_level_t log_level;
    char report[UVMRT_REPORT_MAX]; /* "none", "stderr", "json:PATH", "text:PATH", "csv:PATH", "trace:PATH" */
    int fault_stats;
    int fault_sample_every; /* 0 = auto */
    char trace[UVMRT_REPORT_MAX];  /* "none", "stderr", "-" (stdout) or a path */
    int history;                   /* steps kept in the per-step history (UVMRT_HISTORY) */
    int monitor;                   /* 1: publish a snapshot for uvmrt-top at every step end */
    char record[UVMRT_REPORT_MAX]; /* "none" or a path: the recorded step as JSON (UVMRT_RECORD) */
    uint64_t host_budget_bytes;    /* 0 = auto (UVMRT_HOST_BUDGET) */
    char spill_dir[UVMRT_REPORT_MAX]; /* "none" or the directory of the disk tier (UVMRT_SPILL_DIR) */
} uvmrt_config_t;

typedef struct uvmrt_config_entry {
    const char *name;          /* without the UVMRT_ prefix */
    const char *default_value; /* as text, parsed like a user's value */
    const char *expected;      /* what a valid value looks like, for messages */
    const char *doc;
    /* text -> field; UVMRT_ERR_CONFIG on a bad value */
    uvmrt_status_t (*parse)(uvmrt_config_t *cfg, const char *text);
    /* field -> text */
    void (*format)(const uvmrt_config_t *cfg, char *buf, size_t len);
} uvmrt_config_entry_t;

/* The table, and its length. */
const uvmrt_config_entry_t *uvmrt__config_table(size_t *count);

/* Fills cfg from params (NULL: defaults), then from the environment unless
 * params->ignore_env. sources[i] says where entry i came from. Bad values are
 * logged by name and return UVMRT_ERR_CONFIG or UVMRT_ERR_INVALID. */
uvmrt_status_t uvmrt__config_resolve(uvmrt_config_t *cfg, uvmrt_config_source_t *sources,
                                    const uvmrt_params_t *params, const uvmrt_log_t *log);

/* One "UVMRT_NAME=value  (source)" line per entry. */
void uvmrt__config_print(const uvmrt_config_t *cfg, const uvmrt_config_source_t *sources,
                        FILE *out);

#endif
