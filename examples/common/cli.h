/*
 * cli.h -- what the example programs share: usage errors, flag values, a clock
 * and medians. Messages start with the program's name (cli_program).
 */
#ifndef UVMRT_EXAMPLES_CLI_H
#define UVMRT_EXAMPLES_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "uvmrt.h"

/* The sim's profile when a program falls back without a usable GPU (and no --backend):
 * one for every program, and the library's own default on sim (UVMRT_PROFILE auto), so
 * a fallback and --backend sim model the same machine. --profile h200 models the H200. */
#define CLI_SIM_PROFILE "consumer-8g"

/* The name messages start with; set once at the start of main. */
extern const char *cli_program;

/* "PROG: message" and a hint to --help on stderr, then exit(2). */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The index of text among the n names, or a usage error naming the flag, the value and
 * the names ("--spill 'x': expected auto, moments or state"). */
int cli_parse_choice(const char *flag, const char *text, const char *const *names, int n);
/* A decimal integer in [lo, hi], or a usage error naming the flag and the range. */
long long cli_parse_int(const char *flag, const char *text, long long lo, long long hi);
/* A size (uvmrt_size_parse: 8G, 512MiB, 1048576), or "auto" as 0 when allowed
 * (then a size of 0, which would read as auto, is an error). */
uint64_t cli_parse_size(const char *flag, const char *text, int allow_auto);
/* An unsigned 64-bit integer in decimal digits only (so "010" is ten, never octal),
 * or a usage error naming the flag and the value. */
uint64_t cli_parse_u64(const char *flag, const char *text);
/* A path to write a file at: not empty, not ending in '/', not an existing
 * directory ("-" passes: stdout where the program allows it), or a usage error. */
const char *cli_parse_path(const char *flag, const char *text);
/* FORMAT:PATH for uvmrt_report_write (FORMAT text, json, csv or trace; PATH as
 * cli_parse_path takes it), or a usage error. *format points to a static name,
 * *path into text. */
void cli_parse_report(const char *flag, const char *text, const char **format, const char **path);
/* A note on stderr for each of UVMRT_BACKEND, _PROFILE, _POLICY, _BUDGET and
 * _LOG_LEVEL that is set: it overrides the matching flag (the library's precedence). */
void cli_note_env_overrides(void);
/* Monotonic seconds. */
double cli_now_s(void);

#include "adamw_bytes.h" /* cli_adamw_host_bytes: a CPU AdamW's declared host bytes */
/* The median of v[0..n) (sorts v in place); 0 for n == 0. */
double cli_median(double *v, size_t n);

/* ----------------------------------------------------------------------------
 * The shared flags: one table (in cli.c) parses the flags every example program
 * takes the same way; a program picks the ones it takes (CLI_F_* bits), sets its
 * defaults in a cli_common_t, and adds its own flags (cli_flag_t) with a callback.
 * cli_parse also prints --help (the program's flags, then the shared ones) and
 * --version, and exits on a bad value (status 2, naming the flag, the value and
 * what was expected).
 */
enum {
    CLI_F_BACKEND = 1u << 0,     /* --backend cuda|sim */
    CLI_F_PROFILE = 1u << 1,     /* --profile NAME|list ("list" prints them and exits 0) */
    CLI_F_POLICY = 1u << 2,      /* --policy none|demand|prefetch (|all: policy_all_ok) */
    CLI_F_BUDGET = 1u << 3,      /* --budget SIZE|auto */
    CLI_F_STEPS = 1u << 4,       /* --steps N in [steps_min, steps_max] */
    CLI_F_SEED = 1u << 5,        /* --seed S, decimal */
    CLI_F_REPORT = 1u << 6,      /* --report FORMAT:PATH */
    CLI_F_TRACE = 1u << 7,       /* --trace PATH (a "trace" report) */
    CLI_F_LOSS_LOG = 1u << 8,    /* --loss-log PATH */
    CLI_F_RESULT_JSON = 1u << 9, /* --result-json PATH */
    CLI_F_LOG_LEVEL = 1u << 10,  /* --log-level error|warn|info|debug */
    CLI_F_QUIET = 1u << 11,      /* -q, --quiet */
    CLI_F_HOST_BUDGET = 1u << 12, /* --host-budget SIZE|auto|none */
    CLI_F_SPILL_DIR = 1u << 13,   /* --spill-dir DIR|none */
    /* --help and --version are always taken */
};
#define CLI_F_COUNT 14

/* What the shared flags said. The program fills in its defaults before cli_parse. */
typedef struct cli_common {
    uvmrt_backend_kind_t backend;
    int backend_explicit;        /* 1: --backend given (cli_context_open never falls back) */
    const char *profile;         /* sim profile; NULL: the library's default */
    uvmrt_policy_t policy;
    int policy_all;              /* 1: --policy all (only where spec->policy_all_ok) */
    uint64_t budget_bytes;       /* 0: auto; the program's default until --budget is given */
    int budget_given;            /* 1: --budget given */
    int steps;
    uint64_t seed;
    const char *report_format;   /* --report FORMAT:PATH; NULL: none */
    const char *report_path;
    const char *trace_path;      /* NULL: none */
    const char *loss_log;        /* NULL: none */
    const char *result_json;     /* NULL: none */
    int log_level;               /* uvmrt_log_level_t; -1: not given (the library's default) */
    int quiet;
    uint64_t host_budget_bytes;  /* --host-budget; 0: auto (UVMRT_HOST_BUDGET's default), UINT64_MAX: none */
    const char *spill_dir;       /* --spill-dir: an existing directory, or "none"; NULL: not given */
} cli_common_t;

/* A program's own flag. key is the program's (passed back to cli_spec_t.flag). */
typedef struct cli_flag {
    const char *name;            /* long name without "--" */
    const char *arg;             /* the argument's name in --help; NULL: takes none */
    const char *help;            /* lines separated by '\n' */
    int key;
} cli_flag_t;

/* The most flags of its own a program may add. */
#define CLI_MAX_FLAGS 48

typedef struct cli_spec {
    const char *summary;         /* the lines after "Usage: PROG [OPTION]..." */
    unsigned common;             /* CLI_F_* the program takes */
    /* help text for a shared flag, replacing the standard one (e.g. to state the
     * program's default); indexed by the bit's position (CLI_F_BUDGET -> 3); NULL: standard */
    const char *common_help[CLI_F_COUNT];
    int steps_min, steps_max;    /* --steps range */
    int policy_all_ok;           /* 1: --policy all is accepted */
    const cli_flag_t *flags;     /* (n_flags <= CLI_MAX_FLAGS) the program's own, listed first
                                    in --help */
    size_t n_flags;
    /* called for each of the program's flags, in command-line order; arg NULL for a
     * flag without argument. Reports bad values with cli_usage_error. */
    void (*flag)(int key, const char *arg, void *user);
    void *user;
    const char *epilog;          /* printed after the flags in --help; may be NULL */
} cli_spec_t;

/* Parses argv (cli_program must be set): shared flags into *common (which holds the
 * defaults on entry), the program's through spec->flag. --help prints and exits 0,
 * --version too; a bad value or a stray argument exits 2. */
void cli_parse(int argc, char **argv, const cli_spec_t *spec, cli_common_t *common);
/* The host memory tensors of planned_bytes in all need under ctx's GPU budget:
 * host_homed_bytes of them placed in host memory (a CPU optimizer's state), less
 * tier_off_bytes that the disk tier keeps out of it, plus what the GPU budget cannot hold
 * of the others, plus the bytes declared with uvmrt_context_set_host_external_bytes. */
/* The process's resident set now (/proc/self/statm), bytes; 0 where it cannot be read. */
uint64_t cli_process_rss(void);
uint64_t cli_host_need(const uvmrt_context_t *ctx, uint64_t planned_bytes, uint64_t host_homed_bytes,
                       uint64_t tier_off_bytes);
/* Before allocating tensors of planned_bytes in all: whether the host memory they need
 * is within ctx's host budget: host_homed_bytes of them placed in host memory (a CPU
 * optimizer's state), less tier_off_bytes that the disk tier keeps out of it, plus what
 * ctx's device budget cannot hold of the others, plus the bytes declared with
 * uvmrt_context_set_host_external_bytes. When not, says on stderr what is needed where
 * and what would make it fit, and returns -1 (0: fits, or no host budget). */
int cli_host_fits(const uvmrt_context_t *ctx, uint64_t planned_bytes, uint64_t host_homed_bytes,
                  uint64_t tier_off_bytes);
/* Copies backend, profile, policy, budget, host budget, spill directory and log level from common into params
 * (budget 0 for policy none, which runs without one). */
void cli_params_apply(const cli_common_t *common, uvmrt_params_t *params);
/* The standard help line of a shared flag (CLI_F_* bit), for a program's man page
 * or its own help text; "" for an unknown bit. */
const char *cli_common_help(unsigned bit);

/* ----------------------------------------------------------------------------
 * Outputs: a failed write is an error the program reports and exits 1 for, after
 * writing what it still can. Each helper says on stderr what failed, naming the flag,
 * the path and the OS error (or the library's message), and returns -1 (0 when done).
 */
/* Writes ctx's report in format to path ("-": stdout) for flag. */
int cli_report_write(const uvmrt_context_t *ctx, const char *flag, const char *format,
                     const char *path);
/* Every output file follows uvmrt_report_write's rules (src/base/outfile.h): a new or
 * regular file (or a link's target) is written to a temporary file beside it and
 * renamed at close; a FIFO (with a reader) or a character device is written in place;
 * anything else is refused. */
/* Before any long work: exits 1, naming flag, path and why, when path (NULL: none)
 * cannot be written (a missing folder, a file for a folder, /proc, a directory, a
 * dangling link...). A FIFO or a device is checked, not opened. */
void cli_output_check(const char *flag, const char *path);
/* cli_output_check of the shared flags' outputs: --loss-log, --result-json, --report,
 * --trace. Programs call it after their own flags are checked. */
void cli_outputs_check(const cli_common_t *c);
/* Opens path ("-": stdout) for writing for flag; NULL after saying why (a FIFO
 * with no reader fails at once). */
FILE *cli_output_open(const char *flag, const char *path);
/* Closes what cli_output_open returned, checking that everything was written, and
 * puts the file at its path; stdout is flushed, not closed. */
int cli_output_close(const char *flag, const char *path, FILE *f);
/* Gives up what cli_output_open returned: what was at the path stays as it was. */
void cli_output_abandon(FILE *f);
/* At the end of main: status, or 1 (after saying so) when status is 0 and standard
 * output could not be written (a full disk, /dev/full). */
int cli_stdout_close(int status);
/* Error messages the library logged through cli_context_open's log function. */
unsigned long cli_library_errors(void);
/* After the context is destroyed: 1, and a line on stderr, when the library logged an
 * error since errors_before (cli_library_errors() taken before the destroy: UVMRT_REPORT
 * or UVMRT_TRACE could not be written) or sum (NULL: not checked) counts an output the
 * context could not write (UVMRT_RECORD); else 0. */
int cli_context_outputs_failed(unsigned long errors_before, const uvmrt_summary_t *sum);
/* Writes root (a jansson value: json_t) as indented JSON to path for flag, and
 * releases it; root NULL (jansson ran out of memory building it) is reported too. */
struct json_t;
int cli_json_write(const char *flag, const char *path, struct json_t *root);
/* Sets on root, for steps [first, stop) of a run: "recorded_steps", the 1-based steps
 * that recorded uvmrt's schedule (recording[s], and step first), and
 * "final_ms_per_step_median", the median of the steps after the last of them (the
 * final choice's own steady time; null when none ran). Nothing when root is NULL. */
void cli_json_final_steps(struct json_t *root, const unsigned char *recording, const uvmrt_step_stats_t *stats,
                          int first, int stop);
/* The reports a run's shared flags asked for, after its steps: the per-layer text
 * table on stdout unless --quiet, --report FORMAT:PATH and --trace PATH. Each that
 * fails is reported and the others are still written. */
int cli_reports_write(const uvmrt_context_t *ctx, const cli_common_t *c);

/* How a program asked for its backend, for cli_context_open. */
typedef struct cli_backend_choice {
    int gpu_built;                /* 1: the program has its GPU code */
    const char *no_gpu_build;     /* why not, when gpu_built is 0 */
    int explicit_backend;         /* 1: --backend was given: never fall back */
    const char *fallback_profile; /* sim profile when falling back and params has none */
    /* called when falling back to sim, before the retry (e.g. to cap a budget); may be NULL */
    void (*on_fallback)(uvmrt_params_t *params, void *user);
    void *user;
} cli_backend_choice_t;

/* Creates a context from params. Without a usable GPU (and no explicit --backend)
 * it says so and falls back to the sim backend, params then telling what was used.
 * On failure: a message naming backend, policy and reason, then exit(1).
 * When params->log_fn is NULL it installs one that prints as the library does
 * ("uvmrt LEVEL: message" on stderr) and keeps the last error for cli_report_write,
 * which then prints it once, after the flag, instead of twice. */
uvmrt_context_t *cli_context_open(uvmrt_params_t *params, const cli_backend_choice_t *choice);

/* "PROG: message" on stderr (stdout flushed first), then cleanup(arg) when cleanup
 * is not NULL, then exit(1). */
void cli_fail(void (*cleanup)(void *), void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

/* Status checks for the programs, failing through run_fail(run, fmt, ...), which
 * each program defines (cli_fail with its own cleanup). They name the expression
 * and the error. CUDA_CHECK needs cuda_runtime_api.h where it is used. */
#define UV_CHECK(run, expr)                                                                    \
    do {                                                                                       \
        uvmrt_status_t st_ = (expr);                                                           \
        if (st_ != UVMRT_OK)                                                                   \
            run_fail((run), "%s failed: %s (%s)", #expr, uvmrt_status_str(st_),                \
                     uvmrt_status_name(st_));                                                  \
    } while (0)

#define CUDA_CHECK(run, expr)                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (expr);                                                               \
        if (e_ != cudaSuccess)                                                                 \
            run_fail((run), "%s failed: %s (%s)", #expr, cudaGetErrorString(e_),               \
                     cudaGetErrorName(e_));                                                    \
    } while (0)

#endif
