/*
 * linkbench.c -- uvmrt-linkbench: the host<->GPU link, measured the ways uvmrt uses it.
 *
 * In one run, on one GPU, timed with CUDA events:
 *   pinned cudaMemcpyAsync host->device, device->host, and both at once (two streams):
 *     the link's ceiling, what a perfect scheduler could reach;
 *   managed cudaMemPrefetchAsync of one range to the GPU, and back to the host
 *     (eviction): what uvmrt's prefetch policy actually drives.
 * Each is run once to warm up, then --reps times; the table gives the mean and the
 * best. Host pages are touched before any timing, so first-touch cost is excluded.
 * GB/s = 1e9 bytes/s. The JSON (--json) uses the names of uvmrt_profile_t's fields
 * (pinned_h2d_bps, prefetch_h2d_bps, ...), so a result can seed a device profile,
 * and bench/core_table.py reads it for the pinned-link ceiling.
 *
 * Safety: at most 2 x size of device memory (and 2 x size of pinned host memory) at
 * once, checked against free memory first; the managed range (1 x size) is allocated
 * only after the pinned buffers are freed. Plain C over the CUDA runtime API; the
 * timed transfers are tools/linkmeasure.c's, shared with uvmrt-calibrate.
 */
#define _POSIX_C_SOURCE 200809L

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "outfile.h"     /* src/: the report rules for --json */
#include "linkmeasure.h" /* tools/: the measurements uvmrt-calibrate makes too */
#include "tool_args.h"
#include "uvmrt.h"       /* version macros only: this tool does not link libuvmrt */

#define PROG "uvmrt-linkbench"
#define STR_(x) #x
#define STR(x) STR_(x)
#define VERSION STR(UVMRT_VERSION_MAJOR) "." STR(UVMRT_VERSION_MINOR) "." STR(UVMRT_VERSION_PATCH)

static const double GIB = 1024.0 * 1024.0 * 1024.0;
static const double GB = 1e9;
static const uint64_t DEVICE_MARGIN_BYTES = 1ull << 30; /* left free on the GPU */

/* ----------------------------------------------------------------------------
 * errors */

#define CUDA_CHECK(expr)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (expr);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, PROG ": %s failed: %s (%s) at %s:%d\n", #expr,                     \
                    cudaGetErrorString(e_), cudaGetErrorName(e_), __FILE__, __LINE__);         \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* ----------------------------------------------------------------------------
 * options */

typedef struct bench_options {
    uint64_t size;     /* bytes per transfer */
    int reps;          /* timed repetitions after one warm-up */
    int device;
    const char *json;  /* NULL: no JSON */
} bench_options_t;

static void usage(FILE *out) {
    fprintf(out,
        "Usage: " PROG " [OPTION]...\n"
        "Measure the host<->GPU link: pinned copies (each way and both at once) and\n"
        "managed-memory prefetch to the GPU and back to the host (eviction).\n"
        "\n"
        "  --size SIZE     bytes per transfer, K/M/G/T suffixes (default 1G)\n"
        "  --reps N        timed repetitions after one warm-up (default 5)\n"
        "  --device N      CUDA device ordinal (default 0)\n"
        "  --json PATH     also write the results as JSON\n"
        "  -h, --help      this help\n"
        "  -V, --version   version\n"
        "\n"
        "Needs 2 x SIZE of free device memory and 2 x SIZE of pinned host memory.\n"
        "GB/s = 1e9 bytes per second.\n");
}

static void usage_error(const char *flag, const char *text, const char *expected) {
    fprintf(stderr, PROG ": %s '%s': expected %s\nTry '" PROG " --help' for more information.\n",
            flag, text, expected);
    exit(2);
}

/* An integer with an optional K, M, G or T suffix (powers of 1024), then "iB" or "B". */
static int size_parse(const char *text, uint64_t *out) {
    char *end = NULL;
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
    if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (!shift && strcmp(end, "B") == 0)
        end++;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static void options_parse(int argc, char **argv, bench_options_t *opt) {
    enum { O_SIZE = 256, O_REPS, O_DEVICE, O_JSON };
    static const struct option longopts[] = {
        {"size", required_argument, NULL, O_SIZE},
        {"reps", required_argument, NULL, O_REPS},
        {"device", required_argument, NULL, O_DEVICE},
        {"json", required_argument, NULL, O_JSON},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *opt = (bench_options_t){.size = 1ull << 30, .reps = 5, .device = 0};
    int c;
    while ((c = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
        switch (c) {
        case O_SIZE:
            /* >= 2 MiB and a multiple of it: the driver migrates 2 MiB blocks */
            if (size_parse(optarg, &opt->size) || opt->size < (2u << 20) ||
                opt->size % (2u << 20))
                usage_error("--size", optarg, "a multiple of 2 MiB such as 1G or 512M");
            break;
        case O_REPS:
            if (tool_int_parse(optarg, 1, 1000, &opt->reps))
                usage_error("--reps", optarg, "an integer from 1 to 1000");
            break;
        case O_DEVICE:
            if (tool_int_parse(optarg, 0, 1023, &opt->device))
                usage_error("--device", optarg, "a device ordinal from 0");
            break;
        case O_JSON:
            if (optarg[0] == '\0')
                usage_error("--json", optarg, "a file path");
            opt->json = optarg;
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf(PROG " (uvmrt) " VERSION "\n"); exit(0);
        default:
            fprintf(stderr, "Try '" PROG " --help' for more information.\n");
            exit(2);
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\nTry '" PROG " --help' for more "
                        "information.\n", argv[optind]);
        exit(2);
    }
}

/* ----------------------------------------------------------------------------
 * timing */

typedef struct bench_result {
    const char *key;    /* JSON name, uvmrt_profile_t field without _bps */
    const char *what;   /* table label */
    uint64_t bytes;     /* moved per repetition (both directions: 2 x size) */
    double mean_ns, min_ns;
    int done;
} bench_result_t;

enum { R_PINNED_H2D, R_PINNED_D2H, R_PINNED_BIDIR, R_PREFETCH_H2D, R_EVICT_D2H, R_COUNT };

typedef struct bench {
    int device;
    lm_timer_t t;              /* streams and events of the shared measurements */
    bench_result_t r[R_COUNT];
} bench_t;

static void result_add(bench_result_t *r, double ns, int rep) {
    r->mean_ns += ns;
    if (rep == 0 || ns < r->min_ns)
        r->min_ns = ns;
}

/* The shared measurements (tools/linkmeasure.c), ending the program on a CUDA error. */
static double time_copy(bench_t *b, void *dst, const void *src, size_t n, enum cudaMemcpyKind k) {
    double ns = 0;
    CUDA_CHECK(lm_time_copy(&b->t, dst, src, n, k, &ns));
    return ns;
}

static double time_bidir(bench_t *b, void *d1, const void *h1, void *h2, const void *d2,
                         size_t n) {
    double ns = 0;
    CUDA_CHECK(lm_time_bidir(&b->t, d1, h1, h2, d2, n, &ns));
    return ns;
}

static double time_prefetch(bench_t *b, void *p, size_t n, int device) {
    double ns = 0;
    CUDA_CHECK(lm_time_prefetch(&b->t, p, n, device, &ns));
    return ns;
}

/* ----------------------------------------------------------------------------
 * the measurements */

static void bench_pinned(bench_t *b, size_t n, int reps) {
    void *h1 = NULL, *h2 = NULL, *d1 = NULL, *d2 = NULL; /* (n,) bytes each */
    CUDA_CHECK(cudaMallocHost(&h1, n));
    CUDA_CHECK(cudaMallocHost(&h2, n));
    CUDA_CHECK(cudaMalloc(&d1, n));
    CUDA_CHECK(cudaMalloc(&d2, n));
    memset(h1, 1, n); /* touch every host page before timing */
    memset(h2, 2, n);
    CUDA_CHECK(cudaMemset(d1, 3, n));
    CUDA_CHECK(cudaMemset(d2, 4, n));
    CUDA_CHECK(cudaDeviceSynchronize());

    for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
        double h2d = time_copy(b, d1, h1, n, cudaMemcpyHostToDevice);
        double d2h = time_copy(b, h2, d2, n, cudaMemcpyDeviceToHost);
        double both = time_bidir(b, d1, h1, h2, d2, n);
        if (rep >= 0) {
            result_add(&b->r[R_PINNED_H2D], h2d, rep);
            result_add(&b->r[R_PINNED_D2H], d2h, rep);
            result_add(&b->r[R_PINNED_BIDIR], both, rep);
        }
    }
    b->r[R_PINNED_H2D].done = b->r[R_PINNED_D2H].done = b->r[R_PINNED_BIDIR].done = 1;

    CUDA_CHECK(cudaFree(d2));
    CUDA_CHECK(cudaFree(d1));
    CUDA_CHECK(cudaFreeHost(h2));
    CUDA_CHECK(cudaFreeHost(h1));
}

static void bench_managed(bench_t *b, size_t n, int reps) {
    int concurrent = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, b->device));
    if (!concurrent) {
        fprintf(stderr, PROG ": device %d has no concurrent managed access (Windows, WSL2 or "
                        "Jetson?): managed prefetch not measured\n", b->device);
        return;
    }
    void *m = NULL; /* (n,) bytes of managed memory */
    CUDA_CHECK(cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    memset(m, 1, n); /* fresh host pages: first touch is not what we measure */

    for (int rep = -1; rep < reps; rep++) { /* rep -1: warm-up */
        double in = time_prefetch(b, m, n, b->device);
        double out = time_prefetch(b, m, n, -1);
        if (rep >= 0) {
            result_add(&b->r[R_PREFETCH_H2D], in, rep);
            result_add(&b->r[R_EVICT_D2H], out, rep);
        }
    }
    b->r[R_PREFETCH_H2D].done = b->r[R_EVICT_D2H].done = 1;
    CUDA_CHECK(cudaFree(m));
}

/* ----------------------------------------------------------------------------
 * output */

static double bps(const bench_result_t *r, double ns) {
    return ns > 0 ? (double)r->bytes / (ns * 1e-9) : 0.0;
}

static void table_print(const bench_t *b, const char *device_name, const bench_options_t *opt) {
    printf(PROG ": device %d (%s), %.2f GiB per transfer, %d reps after 1 warm-up\n",
           opt->device, device_name, (double)opt->size / GIB, opt->reps);
    printf("%-40s %10s %10s %10s %10s\n", "what", "mean ms", "best ms", "GB/s", "best GB/s");
    for (int i = 0; i < R_COUNT; i++) {
        const bench_result_t *r = &b->r[i];
        if (!r->done)
            continue;
        printf("%-40s %10.2f %10.2f %10.2f %10.2f\n", r->what, r->mean_ns / 1e6,
               r->min_ns / 1e6, bps(r, r->mean_ns) / GB, bps(r, r->min_ns) / GB);
    }
    const bench_result_t *p = &b->r[R_PREFETCH_H2D], *h = &b->r[R_PINNED_H2D];
    if (p->done && h->done && h->mean_ns > 0)
        printf("managed prefetch reaches %.0f%% of pinned host->device\n",
               100.0 * bps(p, p->mean_ns) / bps(h, h->mean_ns));
}

/* By the report rules (src/base/outfile.h): a new or regular file through a temporary file
 * and a rename, so a reader never sees half a file; a FIFO or a device in place. */
static int json_write(const bench_t *b, const char *device_name, const bench_options_t *opt) {
    uvmrt__outfile_t o;
    char why[600];
    if (uvmrt__outfile_open(&o, opt->json, 0, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": --json %s: cannot write it: %s\n", opt->json, why);
        return -1;
    }
    FILE *f = o.f;
    fprintf(f, "{\n  \"tool\": \"" PROG "\",\n  \"version\": \"" VERSION "\",\n");
    fprintf(f, "  \"device\": %d,\n  \"device_name\": \"", opt->device);
    for (const char *c = device_name; *c; c++) /* escape for JSON */
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if ((unsigned char)*c >= 0x20)
            fputc(*c, f);
    fprintf(f, "\",\n  \"cuda_runtime\": %d,\n  \"size_bytes\": %llu,\n  \"reps\": %d,\n",
            CUDART_VERSION, (unsigned long long)opt->size, opt->reps);
    for (int i = 0; i < R_COUNT; i++)
        if (b->r[i].done)
            fprintf(f, "  \"%s_bps\": %.6e,\n", b->r[i].key, bps(&b->r[i], b->r[i].mean_ns));
    fprintf(f, "  \"results\": [");
    int first = 1;
    for (int i = 0; i < R_COUNT; i++) {
        const bench_result_t *r = &b->r[i];
        if (!r->done)
            continue;
        fprintf(f, "%s\n    {\"name\": \"%s\", \"what\": \"%s\", \"bytes\": %llu, "
                   "\"mean_ns\": %.0f, \"min_ns\": %.0f, \"bps\": %.6e, \"best_bps\": %.6e}",
                first ? "" : ",", r->key, r->what, (unsigned long long)r->bytes, r->mean_ns,
                r->min_ns, bps(r, r->mean_ns), bps(r, r->min_ns));
        first = 0;
    }
    fprintf(f, "\n  ]\n}\n");
    if (uvmrt__outfile_close(&o, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": --json %s: %s\n", opt->json, why);
        return -1;
    }
    return 0;
}

/* ----------------------------------------------------------------------------
 * main */

int main(int argc, char **argv) {
    bench_options_t opt;
    options_parse(argc, argv, &opt);
    size_t n = (size_t)opt.size;
    char why[600]; /* --json is checked before the measurements, not after them */
    if (opt.json != NULL && uvmrt__outfile_check(opt.json, 0, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": --json %s: cannot write it: %s (nothing was measured)\n", opt.json, why);
        return 1;
    }

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        fprintf(stderr, PROG ": no usable GPU (%s)\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return 1;
    }
    if (opt.device >= count) {
        fprintf(stderr, PROG ": --device %d: this machine has %d device(s)\n", opt.device, count);
        return 1;
    }
    CUDA_CHECK(cudaSetDevice(opt.device));
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));

    /* safety: everything must fit in free memory, with room to spare */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if ((uint64_t)free_b < DEVICE_MARGIN_BYTES || 2 * opt.size > free_b - DEVICE_MARGIN_BYTES) {
        fprintf(stderr, PROG ": --size %.2f GiB needs 2 x that on the GPU plus %.0f GiB to "
                        "spare, but only %.2f GiB is free\n",
                (double)opt.size / GIB, (double)DEVICE_MARGIN_BYTES / GIB, (double)free_b / GIB);
        return 1;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && 2 * opt.size > (uint64_t)pages * (uint64_t)page / 2) {
        fprintf(stderr, PROG ": --size %.2f GiB needs 2 x that of pinned host memory, more "
                        "than half of this machine's %.2f GiB\n",
                (double)opt.size / GIB, (double)pages * (double)page / GIB);
        return 1;
    }

    bench_t b = {.device = opt.device};
#define RESULT(k, w, n) ((bench_result_t){.key = (k), .what = (w), .bytes = (n)})
    b.r[R_PINNED_H2D] = RESULT("pinned_h2d", "pinned cudaMemcpyAsync host->device", opt.size);
    b.r[R_PINNED_D2H] = RESULT("pinned_d2h", "pinned cudaMemcpyAsync device->host", opt.size);
    b.r[R_PINNED_BIDIR] =
        RESULT("pinned_bidir", "pinned, both directions at once (total)", 2 * opt.size);
    b.r[R_PREFETCH_H2D] = RESULT("prefetch_h2d", "managed prefetch to GPU", opt.size);
    b.r[R_EVICT_D2H] = RESULT("evict_d2h", "managed prefetch to host (eviction)", opt.size);
#undef RESULT
    CUDA_CHECK(lm_timer_init(&b.t));

    bench_pinned(&b, n, opt.reps);
    bench_managed(&b, n, opt.reps);
    for (int i = 0; i < R_COUNT; i++)
        b.r[i].mean_ns /= opt.reps;

    table_print(&b, prop.name, &opt);
    int status = 0;
    if (opt.json) {
        status = json_write(&b, prop.name, &opt) ? 1 : 0;
        if (status == 0)
            printf("json: %s\n", opt.json);
    }

    lm_timer_fini(&b.t);
    return status;
}
