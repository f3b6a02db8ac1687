/*
 * settings.c -- the configuration table, environment overrides and the printout.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "profile_file.h"
#include "settings.h"

/* ------------------------------------------------------------------ parsers */
/* ------------------------------------------------------------------ the one rule */
/* Every value, of a variable or a params string, is taken exactly as written: not
 * empty, no leading or trailing whitespace, no control character (a newline, a
 * tab). NULL when t follows the rule, else why not (uvmrt(3), ENVIRONMENT). */
static const char *value_rule_broken(const char *t)
{
    size_t n = strlen(t);
    if (n == 0) return "it is empty";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f) return "it holds a control character (a newline, a tab...)";
    if (t[0] == ' ' || t[n - 1] == ' ') return "it starts or ends with a space";
    return NULL;
}

/* The words a path value may not be, in any case: a user who wrote UVMRT_TRACE=1 or
 * AUTO meant a switch or a keyword, not a file named so (./AUTO names such a file). */
static const char *const path_words[] = {"auto", "none", "stderr", "stdout", "0", "1", "on", "off", "yes", "no",
                                         "true", "false"};

/* The keyword t is a case variant of (AUTO, None), or NULL. */
static const char *keyword_variant(const char *t)
{
    for (size_t i = 0; i < sizeof path_words / sizeof path_words[0]; i++)
        if (strcasecmp(t, path_words[i]) == 0 && strcmp(t, path_words[i]) != 0) return path_words[i];
    return NULL;
}

/* ------------------------------------------------------------------ parsers */
/* A whole decimal integer in [lo, hi]: digits only (no sign, no spaces). */
static uvmrt_status_t parse_int_in(const char *t, long lo, long hi, int *out)
{
    if (!isdigit((unsigned char)t[0])) return UVMRT_ERR_CONFIG;
    char *end = NULL;
    errno = 0;
    long v = strtol(t, &end, 10);
    if (errno != 0 || end == t || *end != '\0' || v < lo || v > hi) return UVMRT_ERR_CONFIG;
    *out = (int)v;
    return UVMRT_OK;
}

static uvmrt_status_t parse_device(uvmrt_config_t *c, const char *t) { return parse_int_in(t, 0, 1023, &c->device); }
static void format_device(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->device); }

static uvmrt_status_t parse_backend(uvmrt_config_t *c, const char *t)
{
    return uvmrt_backend_parse(t, &c->backend) == UVMRT_OK ? UVMRT_OK : UVMRT_ERR_CONFIG;
}
static void format_backend(const uvmrt_config_t *c, char *b, size_t n)
{
    /* Once auto has chosen, the setting still reads auto; the context's
     * "backend ..." line says which one it became. */
    snprintf(b, n, "%s", c->backend_auto ? "auto" : uvmrt_backend_name(c->backend));
}

/* A built-in name, or a profile file's path (read when the context is created,
 * where its errors can name the key and value). */
static uvmrt_status_t parse_profile(uvmrt_config_t *c, const char *t)
{
    if (strlen(t) >= sizeof c->profile || value_rule_broken(t) != NULL) return UVMRT_ERR_CONFIG;
    if (strcmp(t, "auto") != 0 && !uvmrt__profile_is_path(t) && uvmrt_profile_find(t) == NULL)
        return UVMRT_ERR_CONFIG;
    snprintf(c->profile, sizeof c->profile, "%s", t);
    return UVMRT_OK;
}
static void format_profile(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%s", c->profile); }

static uvmrt_status_t parse_policy(uvmrt_config_t *c, const char *t)
{
    return uvmrt_policy_parse(t, &c->policy) == UVMRT_OK ? UVMRT_OK : UVMRT_ERR_CONFIG;
}
static void format_policy(const uvmrt_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", uvmrt_policy_name(c->policy));
}

static uvmrt_status_t parse_budget(uvmrt_config_t *c, const char *t)
{
    if (strcmp(t, "auto") == 0) {
        c->budget_bytes = 0;
        return UVMRT_OK;
    }
    uint64_t v;
    if (uvmrt_size_parse(t, &v) != UVMRT_OK || v == 0) return UVMRT_ERR_CONFIG;
    c->budget_bytes = v;
    return UVMRT_OK;
}
static void format_size(uint64_t v, char *b, size_t n)
{
    if (v != 0 && v % (1ull << 30) == 0) snprintf(b, n, "%" PRIu64 "G", v >> 30);
    else if (v != 0 && v % (1ull << 20) == 0) snprintf(b, n, "%" PRIu64 "M", v >> 20);
    else snprintf(b, n, "%" PRIu64, v);
}
static void format_budget(const uvmrt_config_t *c, char *b, size_t n)
{
    if (c->budget_bytes == 0) snprintf(b, n, "auto");
    else format_size(c->budget_bytes, b, n);
}

/* auto (0), none (UINT64_MAX: no limit), or a size of at least 1 MiB: a smaller host
 * budget is a typo (8 for 8G) */
static uvmrt_status_t parse_host_budget(uvmrt_config_t *c, const char *t)
{
    if (strcmp(t, "auto") == 0 || strcmp(t, "none") == 0) {
        c->host_budget_bytes = t[0] == 'a' ? 0 : UINT64_MAX;
        return UVMRT_OK;
    }
    uint64_t v;
    if (uvmrt_size_parse(t, &v) != UVMRT_OK || v < (1ull << 20)) return UVMRT_ERR_CONFIG;
    c->host_budget_bytes = v;
    return UVMRT_OK;
}
static void format_host_budget(const uvmrt_config_t *c, char *b, size_t n)
{
    if (c->host_budget_bytes == 0) snprintf(b, n, "auto");
    else if (c->host_budget_bytes == UINT64_MAX) snprintf(b, n, "none");
    else format_size(c->host_budget_bytes, b, n);
}

static uvmrt_status_t parse_reserve(uvmrt_config_t *c, const char *t)
{
    return uvmrt_size_parse(t, &c->budget_reserve_bytes) == UVMRT_OK ? UVMRT_OK : UVMRT_ERR_CONFIG;
}
static void format_reserve(const uvmrt_config_t *c, char *b, size_t n)
{
    format_size(c->budget_reserve_bytes, b, n);
}

/* "1" or "0" into a flag. */
static uvmrt_status_t parse_01(const char *t, int *flag)
{
    if (strcmp(t, "1") != 0 && strcmp(t, "0") != 0) return UVMRT_ERR_CONFIG;
    *flag = t[0] == '1';
    return UVMRT_OK;
}

static uvmrt_status_t parse_discard(uvmrt_config_t *c, const char *t) { return parse_01(t, &c->discard_dead); }
static void format_discard(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->discard_dead); }

static uvmrt_status_t parse_remote(uvmrt_config_t *c, const char *t) { return parse_01(t, &c->remote); }
static void format_remote(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->remote); }

static uvmrt_status_t parse_log_level(uvmrt_config_t *c, const char *t)
{
    for (int l = UVMRT_LOG_ERROR; l <= UVMRT_LOG_DEBUG; l++)
        if (strcmp(t, uvmrt_log_level_name((uvmrt_log_level_t)l)) == 0) {
            c->log_level = (uvmrt_log_level_t)l;
            return UVMRT_OK;
        }
    return UVMRT_ERR_CONFIG;
}
static void format_log_level(const uvmrt_config_t *c, char *b, size_t n)
{
    snprintf(b, n, "%s", uvmrt_log_level_name(c->log_level));
}

/* A path for a report or trace file: "-" (stdout) or a file path that follows the
 * one rule (no blanks or newlines around it) and is no keyword or switch in any case
 * ("auto", "AUTO", "1", "on"...: path_words). */
static int report_path_ok(const char *t)
{
    if (value_rule_broken(t) != NULL) return 0;
    for (size_t i = 0; i < sizeof path_words / sizeof path_words[0]; i++)
        if (strcasecmp(t, path_words[i]) == 0) return 0;
    return 1;
}

static uvmrt_status_t parse_report(uvmrt_config_t *c, const char *t)
{
    static const char *const formats[] = {"json:", "text:", "csv:", "trace:"};
    int ok = strcmp(t, "none") == 0 || strcmp(t, "stderr") == 0;
    for (size_t i = 0; !ok && i < sizeof formats / sizeof formats[0]; i++)
        ok = strncmp(t, formats[i], strlen(formats[i])) == 0 && report_path_ok(t + strlen(formats[i]));
    if (!ok || strlen(t) >= sizeof c->report) return UVMRT_ERR_CONFIG;
    snprintf(c->report, sizeof c->report, "%s", t);
    return UVMRT_OK;
}
static void format_report(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%s", c->report); }

static uvmrt_status_t parse_fault_stats(uvmrt_config_t *c, const char *t) { return parse_01(t, &c->fault_stats); }
static void format_fault_stats(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->fault_stats); }

/* auto, or a period N: every Nth step collects (1 = every step) */
static uvmrt_status_t parse_fault_sample(uvmrt_config_t *c, const char *t)
{
    if (strcmp(t, "auto") == 0) {
        c->fault_sample_every = 0;
        return UVMRT_OK;
    }
    return parse_int_in(t, 1, UVMRT_FAULT_SAMPLE_MAX, &c->fault_sample_every);
}
static void format_fault_sample(const uvmrt_config_t *c, char *b, size_t n)
{
    if (c->fault_sample_every == 0) snprintf(b, n, "auto");
    else snprintf(b, n, "%d", c->fault_sample_every);
}

/* none, stderr, or a path as for REPORT ("-": stdout) */
static uvmrt_status_t parse_trace(uvmrt_config_t *c, const char *t)
{
    int ok = strcmp(t, "none") == 0 || strcmp(t, "stderr") == 0 || report_path_ok(t);
    if (!ok || strlen(t) >= sizeof c->trace) return UVMRT_ERR_CONFIG;
    snprintf(c->trace, sizeof c->trace, "%s", t);
    return UVMRT_OK;
}
static void format_trace(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%s", c->trace); }

static uvmrt_status_t parse_history(uvmrt_config_t *c, const char *t)
{
    return parse_int_in(t, 1, 100000000, &c->history);
}
static void format_history(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->history); }

/* none, or a file path as for TRACE (no stdout: the file is replaced by rename) */
static uvmrt_status_t parse_record(uvmrt_config_t *c, const char *t)
{
    int ok = strcmp(t, "none") == 0 || (strcmp(t, "-") != 0 && strcmp(t, "stderr") != 0 && report_path_ok(t));
    if (!ok || strlen(t) >= sizeof c->record) return UVMRT_ERR_CONFIG;
    snprintf(c->record, sizeof c->record, "%s", t);
    return UVMRT_OK;
}
static void format_record(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%s", c->record); }

/* none, or a directory: checked when the context is created (context.c) */
static uvmrt_status_t parse_spill_dir(uvmrt_config_t *c, const char *t)
{
    int ok = strcmp(t, "none") == 0 || (strcmp(t, "-") != 0 && report_path_ok(t));
    if (!ok || strlen(t) >= sizeof c->spill_dir) return UVMRT_ERR_CONFIG;
    snprintf(c->spill_dir, sizeof c->spill_dir, "%s", t);
    return UVMRT_OK;
}
static void format_spill_dir(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%s", c->spill_dir); }

static uvmrt_status_t parse_monitor(uvmrt_config_t *c, const char *t) { return parse_01(t, &c->monitor); }
static void format_monitor(const uvmrt_config_t *c, char *b, size_t n) { snprintf(b, n, "%d", c->monitor); }

/* ------------------------------------------------------------------ the table */
/* LOG_LEVEL comes first so that messages about later entries honour it. */
static const uvmrt_config_entry_t table[] = {
    {"LOG_LEVEL", "warn", "error, warn, info or debug", "messages at or above this level are logged",
     parse_log_level, format_log_level},
    {"BACKEND", "auto", "auto, cuda or sim",
     "auto: cuda when a usable GPU is found, else sim with a notice; cuda: a real GPU; sim: a "
     "deterministic model of one",
     parse_backend, format_backend},
    {"DEVICE", "0", "a device ordinal from 0 to 1023", "the CUDA device to use", parse_device,
     format_device},
    {"PROFILE", "auto",
     "auto, a profile name (uvmrt-demo --profile list prints them) or a profile file (a path containing '/' "
     "or ending in .json, uvmrt-profile(5))",
     "the device profile: the sim backend's model, and on cuda the planner's model of the GPU; auto: "
     "consumer-8g on sim, on cuda the built-in profile of the GPU found (by name, else by memory size)",
     parse_profile, format_profile},
    {"POLICY", "prefetch", "none, demand or prefetch",
     "none: plain managed memory; demand: driver emulation; prefetch: the scheduler",
     parse_policy, format_policy},
    {"BUDGET", "auto", "a size such as 8G or 512M (K, M, G, T suffixes), or auto",
     "device bytes uvmrt may keep resident; auto = free memory minus the reserve",
     parse_budget, format_budget},
    {"BUDGET_RESERVE", "512M", "a size such as 512M", "memory left free when the budget is auto",
     parse_reserve, format_reserve},
    {"DISCARD", "1", "1 or 0", "evict dead data (next use overwrites it) without write-back",
     parse_discard, format_discard},
    {"REMOTE", "1", "1 or 0",
     "let tensors whose every use is UVMRT_USE_STREAM stay in host memory when that moves fewer bytes",
     parse_remote, format_remote},
    {"REPORT", "none",
     "none, stderr, or FORMAT:PATH with FORMAT json, text, csv or trace and PATH a file path that is not "
     "blank, or - for stdout",
     "the report written when the context is destroyed", parse_report, format_report},
    {"FAULT_STATS", "1", "1 or 0",
     "collect the driver's unified-memory counters (CUPTI on cuda, the model on sim)", parse_fault_stats,
     format_fault_stats},
    {"FAULT_SAMPLE", "auto", "auto or a step period from 1 to 1000000",
     "which steps collect those counters: every Nth step, or auto (spaced so that their cost stays near 1% "
     "of step time)",
     parse_fault_sample, format_fault_sample},
    {"TRACE", "none", "none, stderr, - (stdout) or a file path, as written (no blanks around it; not auto, 0, 1, on, off... in any case)",
     "trace-event JSON timeline (Perfetto, chrome://tracing) written when the context is destroyed",
     parse_trace, format_trace},
    {"HISTORY", "1000", "a step count from 1 to 100000000",
     "per-step statistics, csv rows and trace spans are kept for the last N steps (older ones are summed)",
     parse_history, format_history},
    {"MONITOR", "1", "1 or 0",
     "publish a snapshot of every step in shared memory /uvmrt.<uid>.<pid> for uvmrt-top",
     parse_monitor, format_monitor},
    {"RECORD", "none", "none or a file path, as written (no blanks around it; not -, stderr, auto, 0, 1, on, off... in any case)",
     "the prefetch policy's recorded step, written as JSON for uvmrt-plan(1) whenever it is (re)recorded",
     parse_record, format_record},
    {"HOST_BUDGET", "auto", "a size of at least 1M such as 48G (K, M, G, T suffixes), auto or none",
     "host bytes the plan may need (tensors off the GPU, staging, declared host bytes); auto = the "
     "machine's memory (a cgroup's limit when set, else MemTotal) less 10%, at least 2 GiB (none on sim); "
     "none: no limit",
     parse_host_budget, format_host_budget},
    {"SPILL_DIR", "none", "none or an existing directory this user may write, as written (no blanks around it)",
     "the disk tier: tensors put there (uvmrt_tensor_set_tier) live in files of a private subdirectory of it",
     parse_spill_dir, format_spill_dir},
};
#define TABLE_LEN (sizeof table / sizeof table[0])
_Static_assert(TABLE_LEN <= UVMRT_CONFIG_ENTRIES_MAX, "uvmrt_context_t.sources holds every entry");

const uvmrt_config_entry_t *uvmrt__config_table(size_t *count)
{
    if (count) *count = TABLE_LEN;
    return table;
}

/* ------------------------------------------------------------------ resolve */
/* t for a message: control characters as \n, \t or \xNN, cut to fit. */
static void escape_value(const char *t, char *b, size_t n)
{
    size_t o = 0;
    for (; *t && o + 5 < n; t++) {
        unsigned char ch = (unsigned char)*t;
        if (ch == '\n') o += (size_t)snprintf(b + o, n - o, "\\n");
        else if (ch == '\t') o += (size_t)snprintf(b + o, n - o, "\\t");
        else if (ch < 0x20 || ch == 0x7f) o += (size_t)snprintf(b + o, n - o, "\\x%02x", ch);
        else b[o++] = (char)ch;
    }
    b[o] = '\0';
}

static const char *expected_of(const char *name)
{
    for (size_t i = 0; i < TABLE_LEN; i++)
        if (strcmp(table[i].name, name) == 0) return table[i].expected;
    return "?";
}

/* Copies params (the library's whole struct: context.c reads the caller's) into cfg,
 * checking each field; bad fields are named. */
static uvmrt_status_t apply_params(uvmrt_config_t *c, const uvmrt_params_t *p, const uvmrt_log_t *log)
{
#define BAD_PARAM(field, fmt, value, expected)                                          \
    do {                                                                                \
        LOG_ERROR(log, "params." field " = " fmt ": expected %s", value, expected);     \
        return UVMRT_ERR_INVALID;                                                       \
    } while (0)
    if (p->device < 0 || p->device > 1023) BAD_PARAM("device", "%d", p->device, expected_of("DEVICE"));
    if ((unsigned)p->backend > UVMRT_BACKEND_AUTO)
        BAD_PARAM("backend", "%d", (int)p->backend,
                  "UVMRT_BACKEND_AUTO, UVMRT_BACKEND_CUDA or UVMRT_BACKEND_SIM");
    if ((unsigned)p->policy > UVMRT_POLICY_PREFETCH)
        BAD_PARAM("policy", "%d", (int)p->policy, "a uvmrt_policy_t value");
    if ((unsigned)p->log_level > UVMRT_LOG_DEBUG)
        BAD_PARAM("log_level", "%d", (int)p->log_level, "a uvmrt_log_level_t value");
    if (p->discard_dead != 0 && p->discard_dead != 1)
        BAD_PARAM("discard_dead", "%d", p->discard_dead, "0 or 1");
    if (p->remote != 0 && p->remote != 1) BAD_PARAM("remote", "%d", p->remote, "0 or 1");
    if (p->fault_stats != 0 && p->fault_stats != 1) BAD_PARAM("fault_stats", "%d", p->fault_stats, "0 or 1");
    if (p->fault_sample_every < 0 || p->fault_sample_every > UVMRT_FAULT_SAMPLE_MAX)
        BAD_PARAM("fault_sample_every", "%d", p->fault_sample_every, "0 (auto) or a step period from 1 to 1000000");
    if (p->host_budget_bytes != 0 && p->host_budget_bytes < (1ull << 20))
        BAD_PARAM("host_budget_bytes", "%llu", (unsigned long long)p->host_budget_bytes,
                  "0 (auto), UINT64_MAX (none) or at least 1 MiB");
    if (p->trace != NULL && parse_trace(c, p->trace) != UVMRT_OK)
        BAD_PARAM("trace", "'%s'", p->trace, expected_of("TRACE"));
    if (p->profile != NULL && parse_profile(c, p->profile) != UVMRT_OK)
        BAD_PARAM("profile", "'%s'", p->profile, expected_of("PROFILE"));
    if (p->report != NULL && parse_report(c, p->report) != UVMRT_OK)
        BAD_PARAM("report", "'%s'", p->report, expected_of("REPORT"));
    if (p->spill_dir != NULL && parse_spill_dir(c, p->spill_dir) != UVMRT_OK)
        BAD_PARAM("spill_dir", "'%s'", p->spill_dir, expected_of("SPILL_DIR"));
#undef BAD_PARAM
    c->device = p->device;
    c->backend = p->backend;
    c->policy = p->policy;
    c->budget_bytes = p->budget_bytes;
    c->budget_reserve_bytes = p->budget_reserve_bytes;
    c->host_budget_bytes = p->host_budget_bytes;
    c->discard_dead = p->discard_dead;
    c->remote = p->remote;
    c->fault_stats = p->fault_stats;
    c->fault_sample_every = p->fault_sample_every;
    c->log_level = p->log_level;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt__config_resolve(uvmrt_config_t *cfg, uvmrt_config_source_t *sources,
                                    const uvmrt_params_t *params, const uvmrt_log_t *log)
{
    uvmrt_config_t c;
    memset(&c, 0, sizeof c);
    char defaults[TABLE_LEN][128];
    for (size_t i = 0; i < TABLE_LEN; i++) {
        if (table[i].parse(&c, table[i].default_value) != UVMRT_OK) return UVMRT_ERR_CONFIG;
        table[i].format(&c, defaults[i], sizeof defaults[i]);
        sources[i] = UVMRT_SRC_DEFAULT;
    }
    if (params != NULL) {
        uvmrt_status_t st = apply_params(&c, params, log);
        if (st != UVMRT_OK) return st;
        for (size_t i = 0; i < TABLE_LEN; i++) {
            char now[UVMRT_REPORT_MAX];
            table[i].format(&c, now, sizeof now);
            if (strcmp(now, defaults[i]) != 0) sources[i] = UVMRT_SRC_PARAM;
        }
    }
    uvmrt_log_t env_log = log ? *log : (uvmrt_log_t){UVMRT_LOG_WARN, NULL, NULL};
    if (params == NULL || !params->ignore_env) {
        for (size_t i = 0; i < TABLE_LEN; i++) {
            char var[64];
            snprintf(var, sizeof var, "UVMRT_%s", table[i].name);
            const char *value = getenv(var);
            if (value == NULL) continue;
            const char *why = value_rule_broken(value);
            if (why != NULL || table[i].parse(&c, value) != UVMRT_OK) {
                /* a path's words: the value, or a report's PATH after FORMAT: */
                const char *colon = strchr(value, ':'), *kw = keyword_variant(value);
                if (kw == NULL && colon != NULL) kw = keyword_variant(colon + 1);
                char esc[UVMRT_REPORT_MAX * 4 + 1];
                escape_value(value, esc, sizeof esc);
                if (why != NULL)
                    LOG_ERROR(&env_log, "%s='%s' is not valid: %s, and a value is taken exactly as written "
                                        "(uvmrt(3), ENVIRONMENT): expected %s", var, esc, why, table[i].expected);
                else if (kw != NULL)
                    LOG_ERROR(&env_log, "%s='%s' is not valid: it reads as the keyword '%s' in another case "
                                        "(keywords are lower case; ./%s names a file of that name): expected %s",
                              var, esc, kw, colon && keyword_variant(colon + 1) ? colon + 1 : esc, table[i].expected);
                else LOG_ERROR(&env_log, "%s='%s' is not valid: expected %s", var, esc, table[i].expected);
                return UVMRT_ERR_CONFIG;
            }
            sources[i] = UVMRT_SRC_ENV;
            if (i == 0) env_log.level = c.log_level;
        }
    }
    *cfg = c;
    return UVMRT_OK;
}

void uvmrt__config_print(const uvmrt_config_t *cfg, const uvmrt_config_source_t *sources, FILE *out)
{
    static const char *const src_names[] = {"default", "params", "environment"};
    for (size_t i = 0; i < TABLE_LEN; i++) {
        char value[UVMRT_REPORT_MAX];
        table[i].format(cfg, value, sizeof value);
        char left[UVMRT_REPORT_MAX + 64];
        snprintf(left, sizeof left, "UVMRT_%s=%s", table[i].name, value);
        fprintf(out, "  %-32s (%s)\n", left, src_names[sources[i]]);
    }
}
