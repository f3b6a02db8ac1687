/*
 * top.c -- uvmrt-top: a live view of the running uvmrt programs of this user,
 * refreshed every second like `nvidia-smi -l 1`. Each program publishes a
 * snapshot at every step end (src/observe/monitor.c); this reads them (monread.c).
 * See uvmrt-top(1).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "monread.h"
#include "uvmrt.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)

typedef struct opts {
    int once, json;
    pid_t pid;       /* 0: every process */
    double delay_s;
} opts_t;

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: uvmrt-top [--once] [--json] [-p PID] [-d SECONDS]\n"
            "A live view of the running uvmrt programs of this user: per process the budget,\n"
            "resident bytes and peak, link throughput each way over the last step, step time\n"
            "and ETA; per layer the last step's time, wait, bytes in and out, faults and the\n"
            "mechanism the plan chose. Programs publish with UVMRT_MONITOR=1 (the default).\n"
            "\n"
            "  -1, --once          print one frame and exit\n"
            "  -j, --json          print frames as JSON (one object per line: {\"processes\": [...]})\n"
            "  -p, --pid PID       only this process\n"
            "  -d, --delay SECONDS refresh interval (default 1; 0.1 to 3600)\n"
            "  -h, --help          this help\n"
            "  -V, --version       the version\n"
            "\n"
            "Snapshots of programs that died without cleaning up (kill -9) are removed.\n");
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {{"once", no_argument, NULL, '1'},   {"json", no_argument, NULL, 'j'},
                                          {"pid", required_argument, NULL, 'p'}, {"delay", required_argument, NULL, 'd'},
                                          {"help", no_argument, NULL, 'h'},   {"version", no_argument, NULL, 'V'},
                                          {NULL, 0, NULL, 0}};
    *o = (opts_t){0, 0, 0, 1.0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":1jp:d:hV", longs, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case '1': o->once = 1; break;
        case 'j': o->json = 1; break;
        case 'p': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            if (errno != 0 || end == optarg || *end != '\0' || v <= 0 || v > INT_MAX) {
                fprintf(stderr, "uvmrt-top: -p '%s': expected a process id (a positive integer)\n", optarg);
                return 2;
            }
            o->pid = (pid_t)v;
            break;
        }
        case 'd': {
            errno = 0;
            double v = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(v >= 0.1 && v <= 3600)) {
                fprintf(stderr, "uvmrt-top: -d '%s': expected seconds from 0.1 to 3600\n", optarg);
                return 2;
            }
            o->delay_s = v;
            break;
        }
        case 'h': usage(stdout); return -1;
        case 'V': printf("uvmrt-top (uvmrt) %s\n", uvmrt_version_string()); return -1;
        case ':':
            fprintf(stderr, "uvmrt-top: option '%s' needs a value (see uvmrt-top --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "uvmrt-top: unknown option '%s' (see uvmrt-top --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "uvmrt-top: unexpected argument '%s' (see uvmrt-top --help)\n", argv[optind]);
        return 2;
    }
    return 0;
}

static uint64_t now_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "1h02m", "3m05s", "12.3s" */
static void fmt_duration(double s, char *b, size_t n)
{
    if (s < 0) snprintf(b, n, "-");
    else if (s < 60) snprintf(b, n, "%.1fs", s);
    else if (s < 3600) snprintf(b, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(b, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
}

static void print_proc(FILE *f, const uvmrt_mon_proc_t *p, uint64_t now)
{
    const uvmrt_mon_snap_t *s = &p->snap;
    char eta[32], age[32], steps[48];
    fmt_duration(uvmrt__monread_eta_s(s), eta, sizeof eta);
    fmt_duration(now > s->publish_unix_ns ? (now - s->publish_unix_ns) / 1e9 : 0, age, sizeof age);
    if (s->total_steps) snprintf(steps, sizeof steps, "%llu/%llu", (unsigned long long)s->step,
                                 (unsigned long long)s->total_steps);
    else snprintf(steps, sizeof steps, "%llu", (unsigned long long)s->step);
    double sec = s->step_ns / 1e9;
    fprintf(f, "PID %d %.64s  %s/%s%s%s%s  step %s  %.2f ms/step  ETA %s  (updated %s ago)\n", (int)s->pid,
            s->program, s->backend, s->policy, strcmp(s->backend, "sim") == 0 ? " (" : "",
            strcmp(s->backend, "sim") == 0 ? s->profile : "", strcmp(s->backend, "sim") == 0 ? ")" : "", steps,
            s->step_ns / 1e6, eta, age);
    if (s->context_index) fprintf(f, "  context %u of this process\n", s->context_index + 1);
    fprintf(f, "  budget %.2f GiB  resident %.2f GiB  peak %.2f GiB  tensors %.2f GiB  host-homed %.2f GiB\n",
            s->budget_bytes / GIB, s->resident_bytes / GIB, s->peak_resident_bytes / GIB, s->allocated_bytes / GIB,
            s->host_homed_bytes / GIB);
    char hb[32] = "none";
    if (s->host_budget_bytes) snprintf(hb, sizeof hb, "%.2f GiB", s->host_budget_bytes / GIB);
    fprintf(f, "  host %.2f GiB  peak %.2f GiB  plan needs %.2f GiB  declared %.2f GiB  host budget %s\n",
            s->host_bytes / GIB, s->peak_host_bytes / GIB, s->plan_host_bytes / GIB, s->host_external_bytes / GIB, hb);
    fprintf(f, "  link, last step: to GPU %.1f MiB (%.2f GB/s)  to host %.1f MiB (%.2f GB/s)  wait %.2f ms  "
               "faults %llu\n",
            s->to_device_bytes / MIB, sec > 0 ? s->to_device_bytes / sec / 1e9 : 0.0, s->to_host_bytes / MIB,
            sec > 0 ? s->to_host_bytes / sec / 1e9 : 0.0, s->wait_ns / 1e6, (unsigned long long)s->fault_count);
    fprintf(f, "  %-4s %-20s %-32s %9s %9s %9s %9s %8s %9s\n", "#", "layer", "mechanism", "time ms", "wait ms",
            "in MiB", "out MiB", "faults", "host MiB");
    for (uint32_t i = 0; i < s->n_layers; i++) {
        const uvmrt_mon_layer_t *r = &p->layers[i];
        fprintf(f, "  %-4u %-20.20s %-32.32s %9.2f %9.2f %9.1f %9.1f %8llu %9.1f\n", i, r->name, r->mechanism,
                r->duration_ns / 1e6, r->wait_ns / 1e6, (r->prefetch_bytes + r->fault_bytes + r->remote_read_bytes) / MIB,
                (r->evict_bytes + r->remote_write_bytes) / MIB, (unsigned long long)r->fault_count,
                r->host_bytes / MIB);
    }
}

/* One frame; 0, 1 when -p found nothing, 3 when the snapshots cannot be listed. */
static int frame(const opts_t *o, int clear)
{
    uvmrt_mon_proc_t *procs = NULL;
    size_t n = 0;
    int cleaned = 0;
    int st = uvmrt__monread_list(o->pid, &procs, &n, &cleaned);
    if (st != MONREAD_OK) {
        fprintf(stderr, "uvmrt-top: cannot list the snapshots in /dev/shm: %s\n", uvmrt__monread_str(st));
        return 3;
    }
    uint64_t now = now_unix_ns();
    if (o->json) {
        json_t *root = uvmrt__monread_json(procs, n, now);
        json_object_set_new(root, "cleaned_stale", json_integer(cleaned));
        char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (text) puts(text);
        free(text);
        json_decref(root);
    } else {
        if (clear) fputs("\033[H\033[2J", stdout);
        time_t t = time(NULL);
        char when[64];
        strftime(when, sizeof when, "%a %b %e %H:%M:%S %Y", localtime(&t));
        printf("uvmrt-top %s  %s  %zu program%s\n", uvmrt_version_string(), when, n, n == 1 ? "" : "s");
        if (cleaned) printf("(removed %d snapshot%s of programs that are gone)\n", cleaned, cleaned == 1 ? "" : "s");
        if (n == 0) {
            if (o->pid) printf("no uvmrt snapshot for pid %d (not a uvmrt program, ended, or UVMRT_MONITOR=0)\n",
                               (int)o->pid);
            else printf("no running uvmrt programs of this user (they publish with UVMRT_MONITOR=1, the default)\n");
        }
        for (size_t i = 0; i < n; i++) {
            printf("\n");
            print_proc(stdout, &procs[i], now);
        }
    }
    fflush(stdout);
    uvmrt__monread_free_all(procs, n);
    return (o->pid && n == 0) ? 1 : 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    int r = parse_args(argc, argv, &o);
    if (r != 0) return r < 0 ? 0 : r;
    if (o.once) return frame(&o, 0);
    int clear = !o.json && isatty(STDOUT_FILENO);
    for (;;) {
        r = frame(&o, clear);
        if (r == 3) return r;
        struct timespec ts = {(time_t)o.delay_s, (long)((o.delay_s - (double)(time_t)o.delay_s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}
