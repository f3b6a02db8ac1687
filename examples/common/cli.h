/*
 * cli.h -- what the example programs share: usage errors, flag values, a clock
 * and medians. Messages start with the program's name (cli_program).
 */
#ifndef UVMRT_EXAMPLES_CLI_H
#define UVMRT_EXAMPLES_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

/* The name messages start with; set once at the start of main. */
extern const char *cli_program;

/* "PROG: message" and a hint to --help on stderr, then exit(2). */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* A decimal integer in [lo, hi], or a usage error naming the flag and the range. */
long long cli_parse_int(const char *flag, const char *text, long long lo, long long hi);
/* A size (uvmrt_size_parse: 8G, 512MiB, 1048576), or "auto" as 0 when allowed
 * (then a size of 0, which would read as auto, is an error). */
uint64_t cli_parse_size(const char *flag, const char *text, int allow_auto);
/* An unsigned 64-bit integer (decimal, or 0x hex), or a usage error. */
uint64_t cli_parse_u64(const char *flag, const char *text);
/* A non-empty file path, or a usage error. */
const char *cli_parse_path(const char *flag, const char *text);
/* FORMAT:PATH for uvmrt_report_write (FORMAT text, json, csv or trace; PATH not
 * empty), or a usage error. *format points to a static name, *path into text. */
void cli_parse_report(const char *flag, const char *text, const char **format, const char **path);
/* A note on stderr for each of UVMRT_BACKEND, _PROFILE, _POLICY and _BUDGET that
 * is set: it overrides the matching flag (the library's precedence). */
void cli_note_env_overrides(void);
/* Monotonic seconds. */
double cli_now_s(void);
/* The median of v[0..n) (sorts v in place); 0 for n == 0. */
double cli_median(double *v, size_t n);

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
 * On failure: a message naming backend, policy and reason, then exit(1). */
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
