/* cli.c -- see cli.h. */
#define _GNU_SOURCE /* getopt_long */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "cli.h"
#include "outfile.h"
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

int cli_parse_choice(const char *flag, const char *text, const char *const *names, int n)
{
    char list[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(text, names[i]) == 0) return i;
        int w = snprintf(list + len, sizeof list - len, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", names[i]);
        if (w > 0 && (size_t)w < sizeof list - len) len += (size_t)w;
    }
    cli_usage_error("%s '%s': expected %s", flag, text, list);
}

long long cli_parse_int(const char *flag, const char *text, long long lo, long long hi)
{
    char *end = NULL;
    errno = 0;
    /* digits, with a sign only before them: strtoll alone would also take " 5" and "+5" */
    int digits = isdigit((unsigned char)text[0]) || (text[0] == '-' && isdigit((unsigned char)text[1]));
    long long v = digits ? strtoll(text, &end, 10) : 0;
    if (!digits || errno || *end != '\0' || v < lo || v > hi)
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
    /* digits only: strtoull alone would take "010" as octal, " 7", "+7" and "-1" */
    char *end = NULL;
    errno = 0;
    unsigned long long v = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
    if (!isdigit((unsigned char)text[0]) || errno || *end != '\0')
        cli_usage_error("%s '%s': expected a decimal integer from 0 to 18446744073709551615", flag, text);
    return (uint64_t)v;
}

/* Why text cannot be a path to write a file at, or NULL when it can. */
static const char *path_problem(const char *text)
{
    struct stat sb;
    size_t n = strlen(text);
    if (n == 0) return "expected a file path";
    if (strcmp(text, "-") == 0) return NULL;
    if (text[n - 1] == '/' || (stat(text, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return "is a directory; expected a file path (e.g. DIR/out.json)";
    return NULL;
}

const char *cli_parse_path(const char *flag, const char *text)
{
    const char *why = path_problem(text);
    if (why) cli_usage_error("%s '%s': %s", flag, text, why);
    return text;
}

void cli_parse_report(const char *flag, const char *text, const char **format, const char **path)
{
    static const char *const formats[] = {"text", "json", "csv", "trace"};
    const char *colon = strchr(text, ':');
    for (size_t k = 0; colon && colon[1] != '\0' && k < sizeof formats / sizeof formats[0]; k++)
        if ((size_t)(colon - text) == strlen(formats[k]) && strncmp(text, formats[k], strlen(formats[k])) == 0) {
            const char *why = path_problem(colon + 1);
            if (why) cli_usage_error("%s '%s': %s %s", flag, text, colon + 1, why);
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
        {"UVMRT_LOG_LEVEL", "--log-level"}, {"UVMRT_HOST_BUDGET", "--host-budget"},
        {"UVMRT_SPILL_DIR", "--spill-dir"},
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

/* The library's last error message, for cli_report_write. A context is driven by
 * one thread and log functions run on it (uvmrt.h), so one buffer per process. */
static struct {
    int hold;            /* 1: keep errors for the caller instead of printing them */
    char last[512];      /* the last error message held */
    unsigned long errors; /* error messages printed (not held) */
} cli_log_state;

int cli_stdout_close(int status)
{
    /* a full disk or a closed pipe: the output the user asked for is not there */
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    int e = errno;
    fprintf(stderr, "%s: cannot write to standard output: %s\n", cli_program, e ? strerror(e) : "write error");
    return status == 0 ? 1 : status;
}

unsigned long cli_library_errors(void) { return cli_log_state.errors; }

static void cli_log(uvmrt_log_level_t level, const char *message, void *user)
{
    (void)user;
    if (level == UVMRT_LOG_ERROR && cli_log_state.hold) {
        snprintf(cli_log_state.last, sizeof cli_log_state.last, "%s", message);
        return;
    }
    if (level == UVMRT_LOG_ERROR) cli_log_state.errors++;
    fflush(stdout);
    fprintf(stderr, "uvmrt %s: %s\n", uvmrt_log_level_name(level), message);
}

int cli_context_outputs_failed(unsigned long errors_before, const uvmrt_summary_t *sum)
{
    unsigned long n = cli_log_state.errors - errors_before;
    if (n == 0 && (sum == NULL || sum->output_errors == 0)) return 0;
    fflush(stdout);
    fprintf(stderr, "%s: %s (see above): exit status 1\n", cli_program,
            sum != NULL && sum->output_errors > 0 ? "an output file (UVMRT_RECORD) was not written"
                                                   : "uvmrt reported an error while closing the context "
                                                     "(UVMRT_REPORT or UVMRT_TRACE not written)");
    return 1;
}

uvmrt_context_t *cli_context_open(uvmrt_params_t *params, const cli_backend_choice_t *choice)
{
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = UVMRT_ERR_NO_DEVICE;
    const char *why = choice->no_gpu_build;
    if (params->log_fn == NULL) params->log_fn = cli_log;
    /* Without --backend the library chooses (UVMRT_BACKEND=auto): cuda with a usable
     * GPU, else sim with one notice naming why. */
    int fell_back = 0;
    if (params->backend == UVMRT_BACKEND_CUDA && !choice->explicit_backend) params->backend = UVMRT_BACKEND_AUTO;
    if (choice->gpu_built || params->backend == UVMRT_BACKEND_SIM) {
        st = uvmrt_context_create(params, &ctx);
        why = uvmrt_status_str(st);
        if (st == UVMRT_OK && params->backend == UVMRT_BACKEND_AUTO &&
            uvmrt_context_backend(ctx) == UVMRT_BACKEND_SIM) {
            /* the library fell back: redo it with the program's own sim settings */
            uvmrt_context_destroy(ctx);
            ctx = NULL;
            fell_back = 1;
            why = "see the notice above";
        }
    } else {
        fell_back = params->backend != UVMRT_BACKEND_SIM && !choice->explicit_backend;
    }
    if (fell_back) {
        if (params->profile == NULL) params->profile = choice->fallback_profile;
        const uvmrt_profile_t *p = uvmrt_profile_find(params->profile);
        printf("no usable GPU (%s): running on the sim backend with profile %s (%s)\n", why,
               params->profile, p ? p->description : "unknown profile");
        params->backend = UVMRT_BACKEND_SIM;
        if (choice->on_fallback != NULL) choice->on_fallback(params, choice->user);
        st = uvmrt_context_create(params, &ctx);
        why = uvmrt_status_str(st);
    } else if (ctx != NULL) {
        params->backend = uvmrt_context_backend(ctx); /* what auto chose */
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

/* ----------------------------------------------------------------------------
 * the shared flags */

typedef struct cli_common_flag {
    unsigned bit;
    const char *name;
    const char *arg; /* NULL: no argument */
    int short_name;  /* 0: none */
    const char *help;
} cli_common_flag_t;

/* One row per shared flag, in --help order; bit i is row i. */
static const cli_common_flag_t CLI_COMMON[CLI_F_COUNT] = {
    {CLI_F_BACKEND, "backend", "cuda|sim", 0,
     "backend (default cuda; without a usable GPU: sim, unless\n--backend was given)"},
    {CLI_F_PROFILE, "profile", "NAME|FILE|list", 0,
     "device profile: the sim's model, and on cuda the model of the automatic choices\n"
     "(default: the GPU's own built-in profile, else the nearest estimate; a file from\n"
     "uvmrt-calibrate describes this machine); 'list' prints the built-in ones"},
    {CLI_F_POLICY, "policy", "none|demand|prefetch", 0, "uvmrt's policy (default prefetch)"},
    {CLI_F_BUDGET, "budget", "SIZE|auto", 0,
     "device bytes uvmrt may keep resident (default auto: free\ndevice memory less a reserve; "
     "not applied to policy none)"},
    {CLI_F_STEPS, "steps", "N", 0, "training steps; step 1 records the schedule"},
    {CLI_F_SEED, "seed", "S", 0, "seed of the initial data, a decimal integer (default 1)"},
    {CLI_F_REPORT, "report", "FORMAT:PATH", 0,
     "write uvmrt's report as text, json, csv or trace\n('-': stdout; see uvmrt-report(5))"},
    {CLI_F_TRACE, "trace", "PATH", 0,
     "write the trace-event timeline (Perfetto, chrome://tracing):\nthe same as --report trace:PATH"},
    {CLI_F_LOSS_LOG, "loss-log", "PATH", 0,
     "one line per step: step, loss (%a, exact), loss scale\n(at PATH when the run ends; uvmrt-report(5), FILES)"},
    {CLI_F_RESULT_JSON, "result-json", "PATH", 0, "medians and totals of the run as JSON"},
    {CLI_F_LOG_LEVEL, "log-level", "LEVEL", 0,
     "uvmrt's messages: error, warn, info or debug (default warn)"},
    {CLI_F_QUIET, "quiet", NULL, 'q', "no configuration or per-layer report"},
    {CLI_F_HOST_BUDGET, "host-budget", "SIZE|auto|none", 0,
     "host memory the plan may need: tensors off the GPU, staging, the CPU\n"
     "optimizer's state (default auto: the machine's memory, or its cgroup's\n"
     "limit, less 10%, at least 2 GiB; no limit on sim); none: no limit"},
    {CLI_F_SPILL_DIR, "spill-dir", "DIR|none", 0,
     "the disk tier's directory (UVMRT_SPILL_DIR): an existing directory on a\n"
     "fast local disk, where tensors put on the tier live in files of a private\n"
     "subdirectory (default none: no disk tier)"},
};

const char *cli_common_help(unsigned bit)
{
    for (size_t i = 0; i < CLI_F_COUNT; i++)
        if (CLI_COMMON[i].bit == bit) return CLI_COMMON[i].help;
    return "";
}

static void profiles_list(FILE *out)
{
    static const double GB = 1e9, GIB = 1024.0 * 1024.0 * 1024.0;
    const uvmrt_profile_t *p;
    /* bandwidths in GB/s: prefetch to GPU, eviction to host, demand faults, HBM */
    fprintf(out, "%-16s %-8s %10s %8s %8s %8s %8s  %s\n", "profile", "source", "memory", "prefetch",
            "evict", "fault", "HBM", "description");
    for (size_t i = 0; (p = uvmrt_profile_builtin(i)) != NULL; i++)
        fprintf(out, "%-16s %-8s %6.1f GiB %8.1f %8.1f %8.1f %8.0f  %s\n", p->name,
                p->measured ? "measured" : "estimate", (double)p->memory_bytes / GIB,
                p->prefetch_h2d_bps / GB, p->evict_d2h_bps / GB, p->fault_bps / GB,
                p->hbm_bps / GB, p->description);
    fprintf(out, "(bandwidths in GB/s)\n");
}

/* "  --name ARG" in a 24-column field, then the help, continued lines indented. */
static void help_flag(FILE *out, int short_name, const char *name, const char *arg, const char *help)
{
    char head[96];
    if (short_name)
        snprintf(head, sizeof head, "  -%c, --%s%s%s", short_name, name, arg ? " " : "", arg ? arg : "");
    else
        snprintf(head, sizeof head, "  --%s%s%s", name, arg ? " " : "", arg ? arg : "");
    fprintf(out, "%-24s", head);
    if (strlen(head) >= 24) fprintf(out, "\n%24s", "");
    for (const char *h = help; *h; h++) {
        fputc(*h, out);
        if (*h == '\n') fprintf(out, "%24s", "");
    }
    fputc('\n', out);
}

static void help_print(const cli_spec_t *spec, FILE *out)
{
    fprintf(out, "Usage: %s [OPTION]...\n%s\n", cli_program, spec->summary ? spec->summary : "");
    if (spec->n_flags) fprintf(out, "\n");
    for (size_t i = 0; i < spec->n_flags; i++)
        help_flag(out, 0, spec->flags[i].name, spec->flags[i].arg, spec->flags[i].help);
    fprintf(out, "\nShared by the uvmrt example programs:\n");
    for (size_t i = 0; i < CLI_F_COUNT; i++) {
        const cli_common_flag_t *c = &CLI_COMMON[i];
        if (!(spec->common & c->bit)) continue;
        const char *help = spec->common_help[i] ? spec->common_help[i] : c->help;
        const char *arg = c->bit == CLI_F_POLICY && spec->policy_all_ok ? "none|demand|prefetch|all" : c->arg;
        help_flag(out, c->short_name, c->name, arg, help);
    }
    help_flag(out, 'h', "help", NULL, "this help");
    help_flag(out, 'V', "version", NULL, "the version");
    fprintf(out, "\nSIZE: an integer with an optional K, M, G or T suffix (powers of 1024).\n"
                 "UVMRT_* environment variables override the flags they match (see %s(1)).\n",
            cli_program);
    if (spec->epilog) fprintf(out, "%s", spec->epilog);
}

static int log_level_parse(const char *text)
{
    for (int k = UVMRT_LOG_ERROR; k <= UVMRT_LOG_DEBUG; k++)
        if (strcmp(text, uvmrt_log_level_name((uvmrt_log_level_t)k)) == 0) return k;
    return -1;
}

static void common_flag(const cli_spec_t *spec, cli_common_t *c, unsigned bit, const char *arg, int *list)
{
    switch (bit) {
    case CLI_F_BACKEND:
        if (uvmrt_backend_parse(arg, &c->backend) != UVMRT_OK)
            cli_usage_error("--backend '%s': expected cuda or sim", arg);
        c->backend_explicit = 1;
        break;
    case CLI_F_PROFILE:
        if (strcmp(arg, "list") == 0) {
            *list = 1;
            break;
        }
        if (strchr(arg, '/') != NULL || (strlen(arg) > 5 && strcmp(arg + strlen(arg) - 5, ".json") == 0)) {
            /* a profile file (uvmrt-calibrate): read now, so a bad one is a usage error */
            uvmrt_profile_t *f = NULL;
            if (uvmrt_profile_load(arg, &f) != UVMRT_OK)
                cli_usage_error("--profile '%s': not a readable profile file (uvmrt-profile(5))", arg);
            uvmrt_profile_free(f);
        } else if (strcmp(arg, "auto") != 0 && uvmrt_profile_find(arg) == NULL) {
            char names[512] = "";
            size_t used = 0;
            const uvmrt_profile_t *p;
            for (size_t i = 0; (p = uvmrt_profile_builtin(i)) != NULL && used < sizeof names; i++) {
                int k = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", p->name);
                if (k < 0) break;
                used += (size_t)k;
            }
            cli_usage_error("--profile '%s': expected auto, one of %s (or list), or a profile file", arg, names);
        }
        c->profile = arg;
        break;
    case CLI_F_POLICY:
        if (spec->policy_all_ok && strcmp(arg, "all") == 0) {
            c->policy_all = 1;
        } else if (uvmrt_policy_parse(arg, &c->policy) == UVMRT_OK) {
            c->policy_all = 0;
        } else {
            cli_usage_error("--policy '%s': expected none, demand, prefetch%s", arg,
                            spec->policy_all_ok ? " or all" : "");
        }
        break;
    case CLI_F_BUDGET:
        c->budget_bytes = cli_parse_size("--budget", arg, 1);
        c->budget_given = 1;
        break;
    case CLI_F_HOST_BUDGET:
        c->host_budget_bytes = strcmp(arg, "none") == 0 ? UINT64_MAX : cli_parse_size("--host-budget", arg, 1);
        if (c->host_budget_bytes != 0 && c->host_budget_bytes < (1ull << 20))
            cli_usage_error("--host-budget '%s': expected auto, none or a size of at least 1M such as 48G", arg);
        break;
    case CLI_F_SPILL_DIR: {
        struct stat sb;
        if (strcmp(arg, "none") != 0 && (arg[0] == '\0' || stat(arg, &sb) != 0 || !S_ISDIR(sb.st_mode)))
            cli_usage_error("--spill-dir '%s': expected none or an existing directory", arg);
        c->spill_dir = arg;
        break;
    }
    case CLI_F_STEPS: c->steps = (int)cli_parse_int("--steps", arg, spec->steps_min, spec->steps_max); break;
    case CLI_F_SEED: c->seed = cli_parse_u64("--seed", arg); break;
    case CLI_F_REPORT: cli_parse_report("--report", arg, &c->report_format, &c->report_path); break;
    case CLI_F_TRACE: c->trace_path = cli_parse_path("--trace", arg); break;
    case CLI_F_LOSS_LOG: c->loss_log = cli_parse_path("--loss-log", arg); break;
    case CLI_F_RESULT_JSON: c->result_json = cli_parse_path("--result-json", arg); break;
    case CLI_F_LOG_LEVEL:
        if ((c->log_level = log_level_parse(arg)) < 0)
            cli_usage_error("--log-level '%s': expected error, warn, info or debug", arg);
        break;
    case CLI_F_QUIET: c->quiet = 1; break;
    }
}

enum { KEY_HELP = 'h', KEY_VERSION = 'V', KEY_QUIET = 'q', KEY_COMMON = 0x100, KEY_OWN = 0x200 };

void cli_parse(int argc, char **argv, const cli_spec_t *spec, cli_common_t *common)
{
    /* on the stack: --help, --version and usage errors exit from inside the loop */
    struct option longopts[CLI_F_COUNT + CLI_MAX_FLAGS + 3];
    size_t n = 0;
    if (spec->n_flags > CLI_MAX_FLAGS)
        cli_fail(NULL, NULL, "%zu program flags: at most %d (CLI_MAX_FLAGS)", spec->n_flags, CLI_MAX_FLAGS);
    memset(longopts, 0, sizeof longopts);
    for (size_t i = 0; i < CLI_F_COUNT; i++)
        if (spec->common & CLI_COMMON[i].bit)
            longopts[n++] = (struct option){CLI_COMMON[i].name, CLI_COMMON[i].arg ? required_argument : no_argument,
                                            NULL, CLI_COMMON[i].bit == CLI_F_QUIET ? KEY_QUIET : KEY_COMMON + (int)i};
    for (size_t i = 0; i < spec->n_flags; i++)
        longopts[n++] = (struct option){spec->flags[i].name, spec->flags[i].arg ? required_argument : no_argument,
                                        NULL, KEY_OWN + (int)i};
    longopts[n++] = (struct option){"help", no_argument, NULL, KEY_HELP};
    longopts[n++] = (struct option){"version", no_argument, NULL, KEY_VERSION};
    const char *shorts = spec->common & CLI_F_QUIET ? "qhV" : "hV";
    int c, list = 0;
    opterr = 1;
    while ((c = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (c == KEY_HELP) {
            help_print(spec, stdout);
            exit(0);
        } else if (c == KEY_VERSION) {
            printf("%s (uvmrt) %s\n", cli_program, uvmrt_version_string());
            exit(0);
        } else if (c == KEY_QUIET) {
            common->quiet = 1;
        } else if (c >= KEY_OWN && c < KEY_OWN + (int)spec->n_flags) {
            spec->flag(spec->flags[c - KEY_OWN].key, optarg, spec->user);
        } else if (c >= KEY_COMMON && c < KEY_COMMON + CLI_F_COUNT) {
            common_flag(spec, common, CLI_COMMON[c - KEY_COMMON].bit, optarg, &list);
        } else { /* getopt_long said what was wrong */
            fprintf(stderr, "Try '%s --help' for more information.\n", cli_program);
            exit(2);
        }
    }
    if (optind < argc)
        cli_usage_error("unexpected argument '%s': this program takes options only", argv[optind]);
    if (list) {
        profiles_list(stdout);
        exit(0);
    }
}

uint64_t cli_process_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    int n = f ? fscanf(f, "%llu %llu", &size, &resident) : 0;
    if (f) fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

uint64_t cli_host_need(const uvmrt_context_t *ctx, uint64_t planned_bytes, uint64_t host_homed_bytes,
                       uint64_t tier_off_bytes)
{
    uint64_t gpu = uvmrt_context_budget(ctx);
    uint64_t others = planned_bytes > host_homed_bytes ? planned_bytes - host_homed_bytes : 0;
    uint64_t need = (others > gpu ? others - gpu : 0) + host_homed_bytes;
    return (need > tier_off_bytes ? need - tier_off_bytes : 0) + uvmrt_context_host_external_bytes(ctx);
}

int cli_host_fits(const uvmrt_context_t *ctx, uint64_t planned_bytes, uint64_t host_homed_bytes,
                  uint64_t tier_off_bytes)
{
    const double gib = 1073741824.0;
    uint64_t host = uvmrt_context_host_budget(ctx), gpu = uvmrt_context_budget(ctx);
    uint64_t ext = uvmrt_context_host_external_bytes(ctx);
    uint64_t others = planned_bytes > host_homed_bytes ? planned_bytes - host_homed_bytes : 0;
    uint64_t need = cli_host_need(ctx, planned_bytes, host_homed_bytes, tier_off_bytes);
    if (host == 0 || need <= host) return 0;
    char tier[96] = "", more_gpu[96] = "";
    if (tier_off_bytes > 0) snprintf(tier, sizeof tier, " (%.2f GiB more on the disk tier)", tier_off_bytes / gib);
    /* a larger GPU budget helps only with what the GPU could hold: not the host-homed state */
    if (others > gpu && need - host <= others - gpu)
        snprintf(more_gpu, sizeof more_gpu, ", a GPU budget of %.2f GiB", (gpu + need - host) / gib);
    fprintf(stderr,
            "%s: does not fit: %.2f GiB of tensors with a GPU budget of %.2f GiB need %.2f GiB of host memory%s "
            "(%.2f GiB declared outside uvmrt), host budget %.2f GiB; it fits with --host-budget %.2fG (if the "
            "machine has it)%s, %sor a smaller model or batch\n",
            cli_program, planned_bytes / gib, gpu / gib, need / gib, tier, ext / gib, host / gib, need / gib + 0.005,
            more_gpu, host_homed_bytes > 0 ? "less optimizer state in host memory (fewer CPU layers, the disk tier) " : "");
    return -1;
}

void cli_params_apply(const cli_common_t *common, uvmrt_params_t *params)
{
    params->backend = common->backend;
    params->profile = common->profile;
    params->policy = common->policy;
    params->budget_bytes = common->policy == UVMRT_POLICY_NONE ? 0 : common->budget_bytes;
    params->host_budget_bytes = common->host_budget_bytes;
    if (common->spill_dir != NULL) params->spill_dir = common->spill_dir;
    if (common->log_level >= 0) params->log_level = (uvmrt_log_level_t)common->log_level;
}

/* ----------------------------------------------------------------------------
 * outputs */

int cli_report_write(const uvmrt_context_t *ctx, const char *flag, const char *format, const char *path)
{
    cli_log_state.hold = 1;
    cli_log_state.last[0] = '\0';
    if (strcmp(path, "-") == 0) fflush(stdout);
    uvmrt_status_t st = uvmrt_report_write(ctx, format, path);
    cli_log_state.hold = 0;
    if (strcmp(path, "-") == 0) fflush(stdout);
    if (st == UVMRT_OK) return 0;
    fflush(stdout);
    fprintf(stderr, "%s: %s %s: the %s report was not written: %s (%s)\n", cli_program, flag, path, format,
            cli_log_state.last[0] ? cli_log_state.last : uvmrt_status_str(st), uvmrt_status_name(st));
    return -1;
}

/* The files cli_output_open has open: their FILE and how each reaches its path
 * (src/base/outfile.h). A program writes a few at once. */
static uvmrt__outfile_t cli_open_files[8];

void cli_output_check(const char *flag, const char *path)
{
    char why[600];
    if (path == NULL || uvmrt__outfile_check(path, UVMRT__OUTFILE_DASH_STDOUT, why, sizeof why) == 0) return;
    fflush(stdout);
    fprintf(stderr, "%s: %s %s: cannot write it: %s (nothing was run)\n", cli_program, flag, path, why);
    exit(1);
}

void cli_outputs_check(const cli_common_t *c)
{
    cli_output_check("--loss-log", c->loss_log);
    cli_output_check("--result-json", c->result_json);
    cli_output_check("--report", c->report_path);
    cli_output_check("--trace", c->trace_path);
}

/* At exit (a failure's exit(1) in the middle of a run): what a file still open holds
 * goes to its path, as a plain fopen'd file would keep it, and no temporary file is
 * left behind. */
static void cli_outputs_at_exit(void)
{
    char why[600];
    for (size_t i = 0; i < sizeof cli_open_files / sizeof cli_open_files[0]; i++)
        if (cli_open_files[i].f != NULL) uvmrt__outfile_close(&cli_open_files[i], why, sizeof why);
}

FILE *cli_output_open(const char *flag, const char *path)
{
    static int at_exit;
    if (!at_exit) at_exit = atexit(cli_outputs_at_exit) == 0;
    char why[600];
    size_t i = 0;
    while (i < sizeof cli_open_files / sizeof cli_open_files[0] && cli_open_files[i].f != NULL) i++;
    if (i == sizeof cli_open_files / sizeof cli_open_files[0]) {
        fprintf(stderr, "%s: %s %s: cannot open it: too many output files open at once\n", cli_program, flag, path);
        return NULL;
    }
    if (uvmrt__outfile_open(&cli_open_files[i], path, UVMRT__OUTFILE_DASH_STDOUT, why, sizeof why) != 0) {
        fflush(stdout);
        fprintf(stderr, "%s: %s %s: cannot open for writing: %s\n", cli_program, flag, path, why);
        return NULL;
    }
    return cli_open_files[i].f;
}

static uvmrt__outfile_t *cli_open_file(FILE *f)
{
    for (size_t i = 0; f != NULL && i < sizeof cli_open_files / sizeof cli_open_files[0]; i++)
        if (cli_open_files[i].f == f) return &cli_open_files[i];
    return NULL;
}

int cli_output_close(const char *flag, const char *path, FILE *f)
{
    uvmrt__outfile_t *o = cli_open_file(f);
    char why[600];
    if (o == NULL) return -1;
    if (uvmrt__outfile_close(o, why, sizeof why) == 0) return 0;
    fflush(stdout);
    fprintf(stderr, "%s: %s %s: %s\n", cli_program, flag, path, why);
    return -1;
}

void cli_output_abandon(FILE *f)
{
    uvmrt__outfile_t *o = cli_open_file(f);
    if (o != NULL) uvmrt__outfile_abandon(o);
}

int cli_json_write(const char *flag, const char *path, struct json_t *root)
{
    if (root == NULL) {
        fflush(stdout);
        fprintf(stderr, "%s: %s %s: out of memory building the JSON\n", cli_program, flag, path);
        return -1;
    }
    FILE *f = cli_output_open(flag, path);
    int rc = -1;
    if (f != NULL) {
        int dumped = json_dumpf(root, f, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        if (dumped == 0) fputc('\n', f);
        if (dumped != 0) { /* what was at the path stays as it was */
            cli_output_abandon(f);
            fflush(stdout);
            fprintf(stderr, "%s: %s %s: the JSON could not be written\n", cli_program, flag, path);
        } else {
            rc = cli_output_close(flag, path, f);
        }
    }
    json_decref(root);
    return rc;
}

void cli_json_final_steps(struct json_t *root, const unsigned char *recording, const uvmrt_step_stats_t *stats,
                          int first, int stop)
{
    if (root == NULL) return;
    json_t *recorded = json_array();
    int last = first;
    for (int s = first; s < stop; s++)
        if (s == first || recording[s]) {
            json_array_append_new(recorded, json_integer(s + 1));
            last = s;
        }
    double *tail = malloc((size_t)(stop > first ? stop - first : 1) * sizeof *tail);
    size_t n = 0;
    for (int s = last + 1; tail && s < stop; s++) tail[n++] = (double)stats[s].step_ns / 1e6;
    json_object_set_new(root, "recorded_steps", recorded);
    json_object_set_new(root, "final_ms_per_step_median", n > 0 ? json_real(cli_median(tail, n)) : json_null());
    free(tail);
}

int cli_reports_write(const uvmrt_context_t *ctx, const cli_common_t *c)
{
    int bad = 0;
    if (!c->quiet) {
        fflush(stdout);
        bad |= cli_report_write(ctx, "the per-layer report", "text", "-");
    }
    if (c->report_path) {
        int rc = cli_report_write(ctx, "--report", c->report_format, c->report_path);
        if (rc == 0 && strcmp(c->report_path, "-") != 0) printf("report: %s\n", c->report_path);
        bad |= rc;
    }
    if (c->trace_path) {
        int rc = cli_report_write(ctx, "--trace", "trace", c->trace_path);
        if (rc == 0 && strcmp(c->trace_path, "-") != 0) printf("trace: %s\n", c->trace_path);
        bad |= rc;
    }
    return bad ? -1 : 0;
}
