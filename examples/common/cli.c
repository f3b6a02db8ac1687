/* cli.c -- see cli.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "uvmrt.h"

const char *cli_program = "uvmrt";

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cli_program);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help' for more information.\n", cli_program);
    exit(2);
}

long long cli_parse_int(const char *flag, const char *text, long long lo, long long hi)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        cli_usage_error("%s '%s': expected an integer from %lld to %lld", flag, text, lo, hi);
    return v;
}

uint64_t cli_parse_size(const char *flag, const char *text, int allow_auto)
{
    uint64_t bytes = 0;
    if (allow_auto && strcmp(text, "auto") == 0) return 0;
    if (uvmrt_size_parse(text, &bytes) != UVMRT_OK || (allow_auto && bytes == 0))
        cli_usage_error("%s '%s': expected a size such as 8G, 512MiB or 1048576%s", flag, text,
                        allow_auto ? " (not 0), or auto" : "");
    return bytes;
}

uint64_t cli_parse_u64(const char *flag, const char *text)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text || *end != '\0' || strchr(text, '-'))
        cli_usage_error("%s '%s': expected an unsigned 64-bit integer", flag, text);
    return (uint64_t)v;
}

const char *cli_parse_path(const char *flag, const char *text)
{
    if (text[0] == '\0') cli_usage_error("%s '': expected a file path", flag);
    return text;
}

void cli_parse_report(const char *flag, const char *text, const char **format, const char **path)
{
    static const char *const formats[] = {"text", "json", "csv", "trace"};
    const char *colon = strchr(text, ':');
    for (size_t k = 0; colon && colon[1] != '\0' && k < sizeof formats / sizeof formats[0]; k++)
        if ((size_t)(colon - text) == strlen(formats[k]) && strncmp(text, formats[k], strlen(formats[k])) == 0) {
            *format = formats[k];
            *path = colon + 1;
            return;
        }
    cli_usage_error("%s '%s': expected FORMAT:PATH, FORMAT text, json, csv or trace", flag, text);
}

void cli_note_env_overrides(void)
{
    static const char *const vars[][2] = {
        {"UVMRT_BACKEND", "--backend"}, {"UVMRT_PROFILE", "--profile"},
        {"UVMRT_POLICY", "--policy"},   {"UVMRT_BUDGET", "--budget"},
    };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i][0]);
        if (v && *v) fprintf(stderr, "%s: note: %s=%s is set and overrides %s\n", cli_program, vars[i][0], v, vars[i][1]);
    }
}

double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_fail(void (*cleanup)(void *), void *arg, const char *fmt, ...)
{
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "%s: ", cli_program);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (cleanup != NULL) cleanup(arg);
    exit(1);
}

uvmrt_context_t *cli_context_open(uvmrt_params_t *params, const cli_backend_choice_t *choice)
{
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = UVMRT_ERR_NO_DEVICE;
    const char *why = choice->no_gpu_build;
    if (choice->gpu_built || params->backend != UVMRT_BACKEND_CUDA) {
        st = uvmrt_context_create(params, &ctx);
        why = uvmrt_status_str(st);
    }
    if ((st == UVMRT_ERR_NO_DEVICE || st == UVMRT_ERR_UNSUPPORTED) &&
        params->backend == UVMRT_BACKEND_CUDA && !choice->explicit_backend) {
        if (params->profile == NULL) params->profile = choice->fallback_profile;
        const uvmrt_profile_t *p = uvmrt_profile_find(params->profile);
        printf("no usable GPU (%s): running on the sim backend with profile %s (%s)\n", why,
               params->profile, p ? p->description : "unknown profile");
        params->backend = UVMRT_BACKEND_SIM;
        if (choice->on_fallback != NULL) choice->on_fallback(params, choice->user);
        st = uvmrt_context_create(params, &ctx);
        why = uvmrt_status_str(st);
    }
    if (st != UVMRT_OK) {
        fprintf(stderr, "%s: cannot create a uvmrt context (backend %s, policy %s): %s\n", cli_program,
                uvmrt_backend_name(params->backend), uvmrt_policy_name(params->policy), why);
        if (st == UVMRT_ERR_NO_DEVICE && choice->explicit_backend)
            fprintf(stderr, "%s: --backend cuda was asked for; use --backend sim to run without a GPU\n",
                    cli_program);
        uvmrt_context_destroy(ctx);
        exit(1);
    }
    return ctx;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, size_t n)
{
    if (n == 0) return 0.0;
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
