/*
 * calibrate.c -- uvmrt-calibrate: measures this machine's GPU, its link, the host
 * memory and the CPU the ways uvmrt uses them, and writes a device profile file
 * (uvmrt-profile(5)) that UVMRT_PROFILE=FILE loads.
 *
 * What it measures, in order (each warmed up once, then timed --reps times with
 * CUDA events or the monotonic clock; the profile takes the median, the file's
 * "raw" object keeps every sample):
 *   1. pinned cudaMemcpyAsync each way and both at once (tools/linkmeasure.c,
 *      shared with uvmrt-linkbench);
 *   2. managed prefetch of one range to the GPU and back to the host, and the
 *      fixed cost of one prefetch call (2 MiB calls);
 *   3. a kernel reading and writing managed memory kept on the host (preferred
 *      location host, accessed by the GPU: remote mapping), and reading it with
 *      demand faults (no advice);
 *   4. a kernel reading device-resident memory (HBM);
 *   5. host memory: a STREAM-like triad on the OpenMP threads, alone and while
 *      pinned copies run both ways (the CPU's and the link's rates under
 *      contention);
 *   6. the CPU's fp32 AdamW (the library's uvmrt_adamw_cpu, 28 bytes/param), alone (cold,
 *      raw only, then sustained: after 8 s of back-to-back passes, the profile's
 *      rate) and while the link runs both ways;
 *   7. bf16 GEMM through cuBLAS, 8192^3, random data, checked against the CPU: one
 *      at a time on a cold GPU (raw only), then, after two seconds of back-to-back
 *      GEMMs, the three kinds of a linear layer's training step, sustained (the
 *      profile's rate: what a step's GEMMs get once the clock has settled).
 *
 * Safety (the GPU may be shared): every CUDA call is checked; every device
 * allocation, managed ones included, is checked first against free memory minus
 * a margin (the larger of 1 GiB and 1/16 of the GPU), and sizes shrink to fit;
 * pinned and host buffers stay under half of the machine's memory. Progress goes
 * to stderr, the summary to stdout.
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
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "tool_args.h"
#include "uvmrt.h"

#define PROG "uvmrt-calibrate"
#define STR_(x) #x
#define STR(x) STR_(x)
#define VERSION STR(UVMRT_VERSION_MAJOR) "." STR(UVMRT_VERSION_MINOR) "." STR(UVMRT_VERSION_PATCH)

#if defined(UVMRT_HAVE_CUDA) && defined(UVMRT_HAVE_CUBLAS)
#define CALIB_GPU 1
#endif

/* ----------------------------------------------------------------------------
 * options */

typedef struct calib_options {
    const char *output; /* the profile file */
    const char *name;   /* the profile's name */
    int quick;          /* smaller sizes, fewer reps: < 30 s */
    int device;
    int reps;           /* 0: the mode's default */
    const char *spill_dir; /* the disk tier's directory to measure, or NULL */
} calib_options_t;

static void usage(FILE *out) {
    fprintf(out,
        "Usage: " PROG " [OPTION]...\n"
        "Measure this machine's GPU, host<->GPU link, host memory and CPU, and write a\n"
        "device profile for uvmrt (UVMRT_PROFILE=FILE; see uvmrt-profile(5)).\n"
        "\n"
        "  -o, --output FILE  the profile file to write (default uvmrt-profile.json)\n"
        "      --name NAME    the profile's name (default calibrated)\n"
        "      --quick        smaller transfers and fewer repetitions (under 30 s)\n"
        "      --reps N       timed repetitions per measurement (default 5; --quick 3)\n"
        "      --device N     CUDA device ordinal (default 0)\n"
        "      --spill-dir DIR  also measure the disk tier's directory (default\n"
        "                     $UVMRT_SPILL_DIR when set): O_DIRECT read and write\n"
        "                     bandwidth, and whether io_uring works there\n"
        "  -h, --help         this help\n"
        "  -V, --version      version\n"
        "\n"
        "Needs a GPU with concurrent managed access (not Windows, WSL2 or Jetson). The CPU\n"
        "measurements use OpenMP's threads (OMP_NUM_THREADS). Progress goes to stderr.\n"
        "A full run takes under 2 minutes. GB/s = 1e9 bytes per second.\n");
}

static void usage_error(const char *flag, const char *text, const char *expected) {
    fprintf(stderr, PROG ": %s '%s': expected %s\nTry '" PROG " --help' for more information.\n",
            flag, text, expected);
    exit(2);
}

static void options_parse(int argc, char **argv, calib_options_t *opt) {
    enum { O_NAME = 256, O_QUICK, O_REPS, O_DEVICE, O_SPILL };
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"name", required_argument, NULL, O_NAME},
        {"quick", no_argument, NULL, O_QUICK},
        {"reps", required_argument, NULL, O_REPS},
        {"device", required_argument, NULL, O_DEVICE},
        {"spill-dir", required_argument, NULL, O_SPILL},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *opt = (calib_options_t){.output = "uvmrt-profile.json", .name = "calibrated"};
    const char *env_spill = getenv("UVMRT_SPILL_DIR");
    if (env_spill != NULL && env_spill[0] != '\0' && strcmp(env_spill, "none") != 0) opt->spill_dir = env_spill;
    int c;
    while ((c = getopt_long(argc, argv, "o:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            if (optarg[0] == '\0')
                usage_error("--output", optarg, "a file path");
            opt->output = optarg;
            break;
        case O_NAME:
            if (optarg[0] == '\0' || strlen(optarg) > 63)
                usage_error("--name", optarg, "a name of 1 to 63 characters");
            opt->name = optarg;
            break;
        case O_QUICK: opt->quick = 1; break;
        case O_REPS:
            if (tool_int_parse(optarg, 1, 100, &opt->reps))
                usage_error("--reps", optarg, "an integer from 1 to 100");
            break;
        case O_DEVICE:
            if (tool_int_parse(optarg, 0, 1023, &opt->device))
                usage_error("--device", optarg, "a device ordinal from 0 to 1023");
            break;
        case O_SPILL:
            if (optarg[0] == '\0')
                usage_error("--spill-dir", optarg, "a directory");
            opt->spill_dir = optarg;
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
    char why[600]; /* the profile file's path, checked before minutes of measuring */
    if (uvmrt__outfile_check(opt->output, 0, why, sizeof why) != 0) {
        fprintf(stderr, PROG ": --output %s: cannot write it: %s (nothing was measured)\n", opt->output, why);
        exit(1);
    }
    struct stat sd;
    if (opt->spill_dir != NULL && (stat(opt->spill_dir, &sd) != 0 || !S_ISDIR(sd.st_mode))) {
        fprintf(stderr, PROG ": --spill-dir %s: not an existing directory (nothing was measured)\n", opt->spill_dir);
        exit(1);
    }
}

#ifndef CALIB_GPU
/* ----------------------------------------------------------------------------
 * a build without CUDA or cuBLAS: nothing to measure with */

int main(int argc, char **argv) {
    calib_options_t opt;
    options_parse(argc, argv, &opt);
    fprintf(stderr, PROG ": this build of uvmrt has no CUDA%s support, so there is no GPU to "
                    "measure: rebuild with CUDA, or use a built-in profile (uvmrt-profile(5))\n",
#ifdef UVMRT_HAVE_CUDA
            " cuBLAS"
#else
            ""
#endif
    );
    return 1;
}

#else /* CALIB_GPU */

#include <math.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <jansson.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "adamw_cpu.h"
#include "calibrate_kernels.h"
#include "diskmeasure.h"
#include "linkmeasure.h"

static const double GIB = 1024.0 * 1024.0 * 1024.0;
static const double GB = 1e9;
static const size_t MIB2 = 2u << 20;        /* the driver's migration block */
static const size_t MIN_LINK_BYTES = 64u << 20;
static const int GEMM_N = 8192;              /* M = N = K */
static const double ADAMW_BYTES_PER_PARAM = 28; /* w, m, v read and written, g read: fp32 */

/* ----------------------------------------------------------------------------
 * errors: a tool may end on the first failure (the library never does) */

#define CUDA_CHECK(expr)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (expr);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, PROG ": %s failed: %s (%s) at %s:%d\n", #expr,                     \
                    cudaGetErrorString(e_), cudaGetErrorName(e_), __FILE__, __LINE__);         \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#define CUBLAS_CHECK(expr)                                                                     \
    do {                                                                                       \
        cublasStatus_t s_ = (expr);                                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                     \
            fprintf(stderr, PROG ": %s failed: cuBLAS status %d at %s:%d\n", #expr, (int)s_,   \
                    __FILE__, __LINE__);                                                       \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void die(const char *fmt, const char *detail) {
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, detail);
    fputc('\n', stderr);
    exit(1);
}

static void *host_alloc(size_t n, const char *what) {
    void *p = NULL;
    if (posix_memalign(&p, 1u << 21, n) != 0 || p == NULL) {
        fprintf(stderr, PROG ": cannot allocate %.2f GiB of host memory for %s\n", (double)n / GIB, what);
        exit(1);
    }
    return p;
}

/* ----------------------------------------------------------------------------
 * state and helpers */

typedef struct calib {
    calib_options_t opt;
    int device, sms, reps;
    size_t link_bytes;        /* per transfer: a multiple of 2 MiB */
    size_t triad_elems;       /* doubles per triad array */
    size_t adamw_params;
    double overlap_s;         /* how long the contended phases run */
    uint64_t margin;          /* device memory always left free */
    lm_timer_t t;
    cudaEvent_t h2d_stop, d2h_stop; /* contended phases: each direction's end */
    unsigned long long *sink; /* (1,) device: the read kernel's output */
    json_t *raw;              /* every sample, for the file */
    int step, steps;
} calib_t;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[128];
    if (n > 128) n = 128;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void progress(calib_t *c, const char *what) {
    fprintf(stderr, PROG ": [%d/%d] %s\n", ++c->step, c->steps, what);
}

/* Stores the samples as raw[key] = {bytes, ns: [...], rate} and returns the rate
 * of the median sample (units per second: bytes, or what `units` names). */
static double record(calib_t *c, const char *key, double units, const char *unit_name, const double *ns, int n) {
    double med = median(ns, n), rate = med > 0 ? units / (med * 1e-9) : 0;
    json_t *o = json_object(), *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_real(ns[i]));
    json_object_set_new(o, unit_name, json_real(units));
    json_object_set_new(o, "ns", a);
    json_object_set_new(o, "median_ns", json_real(med));
    json_object_set_new(o, "per_s", json_real(rate));
    json_object_set_new(c->raw, key, o);
    int flop = strcmp(unit_name, "flop") == 0;
    fprintf(stderr, "    %-28s %10.2f %s/s  (median of %d)\n", key, rate / (flop ? 1e12 : 1e9),
            strcmp(unit_name, "bytes") == 0 ? "GB" : flop ? "TFLOP" : "G", n);
    return rate;
}

static void raw_note(calib_t *c, const char *key, double value) {
    json_object_set_new(c->raw, key, json_real(value));
}

/* Fails unless `need` bytes fit in free device memory minus the margin. */
static void device_room(calib_t *c, size_t need, const char *what) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if ((uint64_t)free_b < c->margin || (uint64_t)need > (uint64_t)free_b - c->margin) {
        fprintf(stderr, PROG ": %s needs %.2f GiB of device memory plus %.2f GiB to spare, but only "
                        "%.2f GiB is free (another process on this GPU?)\n",
                what, (double)need / GIB, (double)c->margin / GIB, (double)free_b / GIB);
        exit(1);
    }
}

/* ----------------------------------------------------------------------------
 * 1. pinned copies */

typedef struct link_bufs {
    void *h1, *h2, *d1, *d2; /* (link_bytes,) each: pinned host, device */
} link_bufs_t;

static void link_alloc(calib_t *c, link_bufs_t *b) {
    size_t n = c->link_bytes;
    device_room(c, 2 * n, "the pinned copies");
    CUDA_CHECK(cudaMallocHost(&b->h1, n));
    CUDA_CHECK(cudaMallocHost(&b->h2, n));
    CUDA_CHECK(cudaMalloc(&b->d1, n));
    CUDA_CHECK(cudaMalloc(&b->d2, n));
    memset(b->h1, 1, n); /* every host page touched before timing */
    memset(b->h2, 2, n);
    CUDA_CHECK(cudaMemset(b->d1, 3, n));
    CUDA_CHECK(cudaMemset(b->d2, 4, n));
    CUDA_CHECK(cudaDeviceSynchronize());
}

static void link_free(link_bufs_t *b) {
    CUDA_CHECK(cudaFree(b->d2));
    CUDA_CHECK(cudaFree(b->d1));
    CUDA_CHECK(cudaFreeHost(b->h2));
    CUDA_CHECK(cudaFreeHost(b->h1));
}

typedef struct link_rates {
    double h2d, d2h, bidir;
} link_rates_t;

static link_rates_t measure_pinned(calib_t *c, const link_bufs_t *b) {
    progress(c, "pinned copies: host->device, device->host, both at once");
    size_t n = c->link_bytes;
    double h2d[100], d2h[100], both[100];
    for (int rep = -1; rep < c->reps; rep++) { /* rep -1: warm-up */
        double x, y, z;
        CUDA_CHECK(lm_time_copy(&c->t, b->d1, b->h1, n, cudaMemcpyHostToDevice, &x));
        CUDA_CHECK(lm_time_copy(&c->t, b->h2, b->d2, n, cudaMemcpyDeviceToHost, &y));
        CUDA_CHECK(lm_time_bidir(&c->t, b->d1, b->h1, b->h2, b->d2, n, &z));
        if (rep >= 0)
            h2d[rep] = x, d2h[rep] = y, both[rep] = z;
    }
    /* self-check: the device got the host's bytes, the host the device's */
    unsigned char probe[4096];
    CUDA_CHECK(cudaMemcpy(probe, b->d1, sizeof probe, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof probe; i++)
        if (probe[i] != 1 || ((unsigned char *)b->h2)[i] != 4)
            die("pinned copies: the data did not arrive (%s): the measurement is not valid", "byte mismatch");
    link_rates_t r;
    r.h2d = record(c, "pinned_h2d", (double)n, "bytes", h2d, c->reps);
    r.d2h = record(c, "pinned_d2h", (double)n, "bytes", d2h, c->reps);
    r.bidir = record(c, "pinned_bidir", 2.0 * (double)n, "bytes", both, c->reps);
    return r;
}

/* ----------------------------------------------------------------------------
 * 2-4. managed memory: prefetch, eviction, per-call cost, remote mapping, faults, HBM */

/* A managed range of n bytes, its host pages touched (first-touch cost is not ours to measure). */
static void *managed_alloc(calib_t *c, size_t n, const char *what) {
    device_room(c, n, what);
    void *m = NULL;
    CUDA_CHECK(cudaMallocManaged(&m, n, cudaMemAttachGlobal));
    memset(m, 1, n);
    return m;
}

typedef struct managed_rates {
    double prefetch_h2d, evict_d2h, call_ns;
} managed_rates_t;

static managed_rates_t measure_prefetch(calib_t *c) {
    progress(c, "managed prefetch to the GPU and back to the host (eviction), per-call cost");
    size_t n = c->link_bytes;
    void *m = managed_alloc(c, n, "managed prefetch");
    double in[100], out[100];
    for (int rep = -1; rep < c->reps; rep++) {
        double x, y;
        CUDA_CHECK(lm_time_prefetch(&c->t, m, n, c->device, &x));
        CUDA_CHECK(lm_time_prefetch(&c->t, m, n, -1, &y));
        if (rep >= 0)
            in[rep] = x, out[rep] = y;
    }
    managed_rates_t r;
    r.prefetch_h2d = record(c, "prefetch_h2d", (double)n, "bytes", in, c->reps);
    r.evict_d2h = record(c, "evict_d2h", (double)n, "bytes", out, c->reps);
    /* the fixed cost of a call: the same bytes in 2 MiB calls, minus their transfer time */
    size_t calls = n / MIB2;
    double ns[100];
    for (int rep = -1; rep < c->reps; rep++) {
        CUDA_CHECK(cudaEventRecord(c->t.start, c->t.s1));
        for (size_t i = 0; i < calls; i++)
            CUDA_CHECK(lm_prefetch((char *)m + i * MIB2, MIB2, c->device, c->t.s1));
        CUDA_CHECK(cudaEventRecord(c->t.stop, c->t.s1));
        double x;
        CUDA_CHECK(lm_elapsed_ns(&c->t, &x));
        if (rep >= 0)
            ns[rep] = x;
        CUDA_CHECK(lm_prefetch(m, n, -1, c->t.s1));
        CUDA_CHECK(cudaStreamSynchronize(c->t.s1));
    }
    double per_call = median(ns, c->reps) / (double)calls - (double)MIB2 / r.prefetch_h2d * 1e9;
    r.call_ns = per_call > 0 ? per_call : 0;
    record(c, "prefetch_2mib_calls", (double)n, "bytes", ns, c->reps);
    raw_note(c, "prefetch_call_ns", r.call_ns);
    fprintf(stderr, "    %-28s %10.1f us\n", "prefetch call cost", r.call_ns / 1e3);
    CUDA_CHECK(cudaFree(m));
    return r;
}

typedef struct kernel_rates {
    double remote_read, remote_write, fault, hbm;
} kernel_rates_t;

/* One kernel over p, timed on s1. */
static double time_kernel(calib_t *c, void *p, size_t n, int write) {
    CUDA_CHECK(cudaEventRecord(c->t.start, c->t.s1));
    if (write)
        CUDA_CHECK(calib_write(p, n, 0x5a5a5a5au, c->sms, c->t.s1));
    else
        CUDA_CHECK(calib_read(p, n, c->sink, c->sms, c->t.s1));
    CUDA_CHECK(cudaEventRecord(c->t.stop, c->t.s1));
    double ns;
    CUDA_CHECK(lm_elapsed_ns(&c->t, &ns));
    return ns;
}

static kernel_rates_t measure_kernels(calib_t *c) {
    size_t n = c->link_bytes;
    kernel_rates_t r;
    double rd[100], wr[100];

    progress(c, "kernel reads and writes of host memory (remote mapping), demand faults, HBM");
    void *m = managed_alloc(c, n, "remote mapping");
    CUDA_CHECK(lm_advise_remote(m, n, c->device));
    CUDA_CHECK(lm_prefetch(m, n, -1, c->t.s1));
    CUDA_CHECK(cudaStreamSynchronize(c->t.s1));
    for (int rep = -1; rep < c->reps; rep++) {
        double x = time_kernel(c, m, n, 0), y = time_kernel(c, m, n, 1);
        if (rep >= 0)
            rd[rep] = x, wr[rep] = y;
    }
    /* self-check: the CPU sees what the GPU wrote over the link */
    if (((unsigned *)m)[0] != 0x5a5a5a5au)
        die("remote writes: the host does not see the GPU's data (%s)", "word mismatch");
    r.remote_read = record(c, "remote_read", (double)n, "bytes", rd, c->reps);
    r.remote_write = record(c, "remote_write", (double)n, "bytes", wr, c->reps);
    CUDA_CHECK(cudaFree(m));

    /* demand faults: no advice, the data back on the host before each read */
    m = managed_alloc(c, n, "demand faults");
    for (int rep = -1; rep < c->reps; rep++) {
        CUDA_CHECK(lm_prefetch(m, n, -1, c->t.s1));
        CUDA_CHECK(cudaStreamSynchronize(c->t.s1));
        double x = time_kernel(c, m, n, 0);
        if (rep >= 0)
            rd[rep] = x;
    }
    r.fault = record(c, "fault_read", (double)n, "bytes", rd, c->reps);
    CUDA_CHECK(cudaFree(m));

    device_room(c, n, "the HBM read");
    void *d = NULL;
    CUDA_CHECK(cudaMalloc(&d, n));
    CUDA_CHECK(calib_write(d, n, 7, c->sms, c->t.s1));
    for (int rep = -1; rep < c->reps; rep++) {
        double x = time_kernel(c, d, n, 0);
        if (rep >= 0)
            rd[rep] = x;
    }
    r.hbm = record(c, "hbm_read", (double)n, "bytes", rd, c->reps);
    CUDA_CHECK(cudaFree(d));
    return r;
}

/* ----------------------------------------------------------------------------
 * 5-6. host memory and the CPU, alone and beside the link */

typedef struct triad_arrays {
    double *a, *b, *c; /* (n,) each */
    size_t n;
} triad_arrays_t;

static void triad_pass(void *arg) {
    triad_arrays_t *t = arg;
    double *a = t->a;
    const double *b = t->b, *cc = t->c;
    const double s = 3.0;
    size_t n = t->n;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] + s * cc[i];
}

typedef struct adamw_arrays {
    float *w, *m, *v, *g; /* (n,) each, fp32 */
    size_t n;
    mlp_isa_t isa;      /* the path uvmrt_adamw_cpu takes, for the record */
    uvmrt_adamw_t hp;
} adamw_arrays_t;

static void adamw_pass(void *arg) {
    adamw_arrays_t *a = arg;
    (void)uvmrt_adamw_cpu(&a->hp, a->w, a->m, a->v, a->g, a->n, NULL); /* valid: cannot fail */
}

/* CPU passes alone: ns per pass, each rep. */
static void time_cpu(calib_t *c, void (*pass)(void *), void *arg, double *ns) {
    for (int rep = -1; rep < c->reps; rep++) {
        double t0 = now_s();
        pass(arg);
        double t1 = now_s();
        if (rep >= 0)
            ns[rep] = (t1 - t0) * 1e9;
    }
}

/* The CPU's AdamW rate a training run sees, after heat_s of passes back to back
 * (the rate of each second of them goes to raw). Measured on the H200's host: the
 * CPU optimizer's per-block times in uvmrt-mlp rose ~20% over a run's first seconds,
 * the CPU's clock settling under sustained load, as the GPU's does. */
static double adamw_sustained(calib_t *c, adamw_arrays_t *a, double *ns) {
    double heat_s = c->opt.quick ? 1.0 : 8.0, t_start = now_s(), win0 = t_start;
    long passes = 0;
    json_t *series = json_array();
    while (now_s() - t_start < heat_s) {
        adamw_pass(a);
        passes++;
        double t = now_s();
        if (t - win0 >= 1.0) {
            json_array_append_new(series, json_real((double)passes * (double)a->n / (t - win0)));
            win0 = t;
            passes = 0;
        }
    }
    json_object_set_new(c->raw, "cpu_adamw_heat_params_per_s", series);
    time_cpu(c, adamw_pass, a, ns);
    if (!isfinite(a->w[0]) || !isfinite(a->w[a->n - 1]))
        die("AdamW: the weights are not finite after %s: the measurement is not valid", "the sustained passes");
    return record(c, "cpu_adamw", (double)a->n, "params", ns, c->reps);
}

/* Status of an event, with any error but "not ready" ending the program. */
static int event_done(cudaEvent_t e) {
    cudaError_t st = cudaEventQuery(e);
    if (st == cudaErrorNotReady)
        return 0;
    CUDA_CHECK(st);
    return 1;
}

typedef struct shared_rates {
    double cpu_units_per_s, h2d, d2h;
    int passes;
} shared_rates_t;

enum { DIR_H2D = 1, DIR_D2H = 2, DIR_BOTH = 3 };

/* CPU passes while pinned copies run in the directions dirs (both: on two streams)
 * for about overlap_s: the CPU's rate over its passes and each direction's rate (0
 * for a direction not run). The passes run until the copies are done, so the link
 * never runs alone. */
static shared_rates_t contended(calib_t *c, const link_bufs_t *b, const link_rates_t *solo, int dirs,
                                void (*pass)(void *), void *arg, double units_per_pass) {
    size_t n = c->link_bytes;
    int rounds = (int)ceil(c->overlap_s * solo->h2d / (double)n);
    if (rounds < 2) rounds = 2;
    if (rounds > 256) rounds = 256;
    CUDA_CHECK(cudaEventRecord(c->t.start, c->t.s1));
    CUDA_CHECK(cudaStreamWaitEvent(c->t.s2, c->t.start, 0));
    for (int i = 0; i < rounds; i++) {
        if (dirs & DIR_H2D)
            CUDA_CHECK(cudaMemcpyAsync(b->d1, b->h1, n, cudaMemcpyHostToDevice, c->t.s1));
        if (dirs & DIR_D2H)
            CUDA_CHECK(cudaMemcpyAsync(b->h2, b->d2, n, cudaMemcpyDeviceToHost, c->t.s2));
    }
    CUDA_CHECK(cudaEventRecord(c->h2d_stop, c->t.s1));
    CUDA_CHECK(cudaEventRecord(c->d2h_stop, c->t.s2));
    shared_rates_t r = {0};
    double t0 = now_s();
    do {
        pass(arg);
        r.passes++;
    } while (!event_done(c->h2d_stop) || !event_done(c->d2h_stop));
    double t1 = now_s();
    float h2d_ms = 0, d2h_ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&h2d_ms, c->t.start, c->h2d_stop));
    CUDA_CHECK(cudaEventElapsedTime(&d2h_ms, c->t.start, c->d2h_stop));
    r.cpu_units_per_s = r.passes * units_per_pass / (t1 - t0);
    r.h2d = dirs & DIR_H2D ? (double)rounds * (double)n / (h2d_ms * 1e-3) : 0;
    r.d2h = dirs & DIR_D2H ? (double)rounds * (double)n / (d2h_ms * 1e-3) : 0;
    if (r.passes < 3)
        fprintf(stderr, PROG ": warning: only %d CPU passes overlapped the copies; the contended "
                        "rates are rough\n", r.passes);
    return r;
}

static void note_shared(calib_t *c, const char *key, const shared_rates_t *s, const char *cpu_unit) {
    json_t *o = json_object();
    json_object_set_new(o, cpu_unit, json_real(s->cpu_units_per_s));
    json_object_set_new(o, "h2d_bps", json_real(s->h2d));
    json_object_set_new(o, "d2h_bps", json_real(s->d2h));
    json_object_set_new(o, "cpu_passes", json_integer(s->passes));
    json_object_set_new(c->raw, key, o);
    fprintf(stderr, "    %-28s cpu %.2f G%s/s, link %.2f + %.2f GB/s\n", key, s->cpu_units_per_s / 1e9,
            strcmp(cpu_unit, "bps") == 0 ? "B" : "param", s->h2d / GB, s->d2h / GB);
}

typedef struct host_rates {
    double triad, triad_shared_total, adamw, adamw_shared_total;
    shared_rates_t triad_beside, adamw_beside; /* the CPU's and each link direction's rates */
    shared_rates_t adamw_beside_h2d, adamw_beside_d2h; /* beside one direction alone */
} host_rates_t;

static host_rates_t measure_host(calib_t *c, const link_bufs_t *b, const link_rates_t *solo) {
    host_rates_t r;
    double ns[100];
    triad_arrays_t t = {.n = c->triad_elems};
    t.a = host_alloc(t.n * sizeof(double), "the triad");
    t.b = host_alloc(t.n * sizeof(double), "the triad");
    t.c = host_alloc(t.n * sizeof(double), "the triad");
    /* first touch by the threads that use the pages (same static schedule) */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < t.n; i++)
        t.a[i] = 0.0, t.b[i] = 1.0, t.c[i] = 2.0;
    double triad_bytes = 3.0 * sizeof(double) * (double)t.n; /* STREAM's count */

    progress(c, "host memory: triad on the CPU alone, then beside pinned copies both ways");
    time_cpu(c, triad_pass, &t, ns);
    r.triad = record(c, "host_triad", triad_bytes, "bytes", ns, c->reps);
    if (t.a[t.n / 2] != 7.0)
        die("triad: wrong result (%s): the measurement is not valid", "a != b + 3c");
    shared_rates_t s = contended(c, b, solo, DIR_BOTH, triad_pass, &t, triad_bytes);
    note_shared(c, "host_triad_beside_link", &s, "bps");
    r.triad_shared_total = s.cpu_units_per_s + s.h2d + s.d2h;
    r.triad_beside = s;
    free(t.c);
    free(t.b);
    free(t.a);

    progress(c, "CPU AdamW (fp32, 28 bytes/param): alone (cold, then sustained after 8 s of it), then beside "
                "pinned copies both ways");
    adamw_arrays_t a = {.n = c->adamw_params, .isa = mlp_isa_best()};
    a.hp = mlp_adamw_hp(1e-4, MLP_ADAMW_WD, 1, 1.0);
    a.w = host_alloc(a.n * sizeof(float), "AdamW");
    a.m = host_alloc(a.n * sizeof(float), "AdamW");
    a.v = host_alloc(a.n * sizeof(float), "AdamW");
    a.g = host_alloc(a.n * sizeof(float), "AdamW");
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < a.n; i++)
        a.w[i] = 0.5f, a.m[i] = 0.0f, a.v[i] = 0.0f, a.g[i] = 1e-3f;
    time_cpu(c, adamw_pass, &a, ns);
    record(c, "cpu_adamw_cold", (double)a.n, "params", ns, c->reps);
    if (!(a.w[0] < 0.5f) || !isfinite(a.w[a.n - 1]))
        die("AdamW: the weights did not move (%s): the measurement is not valid", "w >= 0.5");
    r.adamw = adamw_sustained(c, &a, ns);
    s = contended(c, b, solo, DIR_BOTH, adamw_pass, &a, (double)a.n);
    note_shared(c, "cpu_adamw_beside_link", &s, "params_per_s");
    r.adamw_shared_total = s.cpu_units_per_s * ADAMW_BYTES_PER_PARAM + s.h2d + s.d2h;
    r.adamw_beside = s;
    /* each direction alone: the CPU loses host memory to either one (the model takes
     * each in proportion to its use of the link) */
    r.adamw_beside_h2d = contended(c, b, solo, DIR_H2D, adamw_pass, &a, (double)a.n);
    note_shared(c, "cpu_adamw_beside_h2d", &r.adamw_beside_h2d, "params_per_s");
    r.adamw_beside_d2h = contended(c, b, solo, DIR_D2H, adamw_pass, &a, (double)a.n);
    note_shared(c, "cpu_adamw_beside_d2h", &r.adamw_beside_d2h, "params_per_s");
    json_object_set_new(c->raw, "isa", json_string(mlp_isa_name(a.isa)));
    free(a.g);
    free(a.v);
    free(a.m);
    free(a.w);
    return r;
}

/* The profile's host_mem_cpu_beside_*_bps: the CPU's AdamW rate beside one link
 * direction as host-memory bytes/s in host_mem_bps's units, extrapolated linearly
 * (the model's own rule) to the direction at its full rate when it ran at less. */
static double beside_bps(double host_bps, double adamw_alone, double adamw_beside, double dir_bps,
                         double dir_full) {
    if (!(adamw_alone > 0) || !(host_bps > 0) || !(dir_bps > 0) || !(dir_full > 0))
        return 0;
    double loss = (adamw_alone - adamw_beside) / adamw_alone * host_bps; /* host bytes/s the CPU lost */
    if (loss < 0)
        loss = 0;
    double at_full = host_bps - loss * (dir_full / dir_bps > 1 ? dir_full / dir_bps : 1);
    return at_full > 0.05 * host_bps ? at_full : 0.05 * host_bps;
}

/* ----------------------------------------------------------------------------
 * 7. bf16 GEMM */

static float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The three GEMMs of a training step's linear layer, as uvmrt-mlp runs them
 * (row-major tensors as cuBLAS's column-major transposes): the forward (T, N), the
 * input gradient (N, N) and the weight gradient (N, T) into fp32. */
typedef struct gemm_bufs {
    cublasHandle_t h;
    cudaStream_t s;
    int n;
    uint16_t *A, *B, *C; /* (n, n) bf16 each */
    float *C32;          /* (n, n) fp32: the weight gradient's output */
} gemm_bufs_t;

enum { GEMM_FORWARD, GEMM_INPUT_GRAD, GEMM_WEIGHT_GRAD, GEMM_KINDS };

static void gemm_run(const gemm_bufs_t *g, int kind) {
    const float alpha = 1.0f, beta = 0.0f;
    int n = g->n;
    if (kind == GEMM_WEIGHT_GRAD) {
        CUBLAS_CHECK(cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &alpha, g->A, CUDA_R_16BF, n, g->B,
                                  CUDA_R_16BF, n, &beta, g->C32, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
        return;
    }
    cublasOperation_t ta = kind == GEMM_FORWARD ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasGemmEx(g->h, ta, CUBLAS_OP_N, n, n, n, &alpha, g->A, CUDA_R_16BF, n, g->B, CUDA_R_16BF, n,
                              &beta, g->C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* The ns of `rounds` back-to-back rounds of the kinds in [k0, k1), on the GPU's clock. */
static double gemm_batch_ns(calib_t *c, const gemm_bufs_t *g, int k0, int k1, int rounds) {
    CUDA_CHECK(cudaEventRecord(c->t.start, g->s));
    for (int r = 0; r < rounds; r++)
        for (int k = k0; k < k1; k++)
            gemm_run(g, k);
    CUDA_CHECK(cudaEventRecord(c->t.stop, g->s));
    double x;
    CUDA_CHECK(lm_elapsed_ns(&c->t, &x));
    return x;
}

/* The GEMM rate a training step sees. Measured on the H200: a few GEMMs on a cold
 * GPU run at ~790 TFLOP/s, but after a second of back-to-back GEMMs (as in a
 * step's compute) the clock settles lower, and W1's resident step ran its GEMMs at
 * ~700. So the GPU first runs the mix for a while (the heat), then each sample is a
 * batch of rounds of the three kinds, as long as a few layers of a step. The cold
 * rate and each kind's sustained rate go to the raw object only. */
static double measure_gemm(calib_t *c) {
    progress(c, "bf16 GEMM through cuBLAS, 8192 x 8192 x 8192, random data: the three kinds of a training "
                "step, sustained");
    const int N = GEMM_N;
    size_t elems = (size_t)N * N, bytes = elems * sizeof(uint16_t);
    device_room(c, 5 * bytes + (256u << 20),
                "the GEMM (three 8192^2 bf16 matrices, one fp32 matrix and cuBLAS's workspace)");
    gemm_bufs_t g = {.s = c->t.s1, .n = N};
    CUDA_CHECK(cudaMalloc((void **)&g.A, bytes));
    CUDA_CHECK(cudaMalloc((void **)&g.B, bytes));
    CUDA_CHECK(cudaMalloc((void **)&g.C, bytes));
    CUDA_CHECK(cudaMalloc((void **)&g.C32, 2 * bytes));
    CUDA_CHECK(calib_fill_bf16(g.A, elems, 1u, c->sms, g.s));
    CUDA_CHECK(calib_fill_bf16(g.B, elems, 2u, c->sms, g.s));
    CUBLAS_CHECK(cublasCreate(&g.h));
    CUBLAS_CHECK(cublasSetStream(g.h, g.s));
    double flop = 2.0 * N * (double)N * N;
    int reps = c->opt.quick ? 5 : 20;
    double ns[100];
    /* cold: one at a time after cuBLAS has picked its kernel (3 warm-ups) */
    for (int rep = -3; rep < reps; rep++) {
        double x = gemm_batch_ns(c, &g, GEMM_INPUT_GRAD, GEMM_INPUT_GRAD + 1, 1);
        if (rep >= 0)
            ns[rep] = x;
    }
    double cold = record(c, "gemm_bf16_cold", flop, "flop", ns, reps);
    /* the heat: the mix, back to back, for a while (each round takes ~5 ms) */
    double heat_s = c->opt.quick ? 0.3 : 2.0, done_ns = 0;
    while (done_ns < heat_s * 1e9)
        done_ns += gemm_batch_ns(c, &g, 0, GEMM_KINDS, 20);
    raw_note(c, "gemm_heat_s", done_ns / 1e9);
    /* sustained, each kind alone, then the mix the profile takes */
    static const char *const kind_key[GEMM_KINDS] = {"gemm_bf16_forward", "gemm_bf16_input_grad",
                                                     "gemm_bf16_weight_grad"};
    const int rounds = 8;
    for (int k = 0; k < GEMM_KINDS; k++) {
        for (int rep = 0; rep < reps; rep++)
            ns[rep] = gemm_batch_ns(c, &g, k, k + 1, 3 * rounds);
        record(c, kind_key[k], 3.0 * rounds * flop, "flop", ns, reps);
    }
    for (int rep = 0; rep < reps; rep++)
        ns[rep] = gemm_batch_ns(c, &g, 0, GEMM_KINDS, rounds);
    double flops = record(c, "gemm_bf16", (double)GEMM_KINDS * rounds * flop, "flop", ns, reps);
    raw_note(c, "gemm_sustained_over_cold", cold > 0 ? flops / cold : 0);
    /* self-check of the last input-gradient product: C[0,0] = row 0 of A . column 0
     * of B (column-major), on the CPU in double */
    gemm_run(&g, GEMM_INPUT_GRAD);
    CUDA_CHECK(cudaStreamSynchronize(g.s));
    uint16_t *row = host_alloc((size_t)N * sizeof *row, "the GEMM check"), *col = host_alloc((size_t)N * sizeof *col, "the GEMM check"), c00;
    CUDA_CHECK(cudaMemcpy2D(row, sizeof *row, g.A, (size_t)N * sizeof *g.A, sizeof *g.A, (size_t)N, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(col, g.B, (size_t)N * sizeof *col, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(&c00, g.C, sizeof c00, cudaMemcpyDeviceToHost));
    double ref = 0, mag = 0;
    for (int k = 0; k < N; k++) {
        double p = (double)bf16_to_f32(row[k]) * (double)bf16_to_f32(col[k]);
        ref += p;
        mag += fabs(p);
    }
    double got = (double)bf16_to_f32(c00);
    if (!(mag > 0) || !(fabs(got - ref) <= 0.01 * fabs(ref) + 1e-3 * mag)) {
        fprintf(stderr, PROG ": GEMM check failed: C[0,0] = %g, expected %g: the measurement is not valid\n",
                got, ref);
        exit(1);
    }
    free(col);
    free(row);
    CUBLAS_CHECK(cublasDestroy(g.h));
    CUDA_CHECK(cudaFree(g.C32));
    CUDA_CHECK(cudaFree(g.C));
    CUDA_CHECK(cudaFree(g.B));
    CUDA_CHECK(cudaFree(g.A));
    return flops;
}

/* ----------------------------------------------------------------------------
 * setup: the device, and sizes that fit it and this machine */

static void setup(calib_t *c, struct cudaDeviceProp *prop) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        fprintf(stderr, PROG ": no usable GPU (%s): calibration measures a real GPU; without one, "
                        "use a built-in profile (uvmrt-profile(5))\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        exit(1);
    }
    if (c->opt.device >= count) {
        fprintf(stderr, PROG ": --device %d: this machine has %d device(s)\n", c->opt.device, count);
        exit(1);
    }
    c->device = c->opt.device;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaGetDeviceProperties(prop, c->device));
    int concurrent = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, c->device));
    if (!concurrent)
        die("device has no concurrent managed access (%s): managed prefetch and oversubscription, "
            "which uvmrt drives, do not work on it", "Windows, WSL2 or Jetson?");
    CUDA_CHECK(cudaDeviceGetAttribute(&c->sms, cudaDevAttrMultiProcessorCount, c->device));

    c->reps = c->opt.reps ? c->opt.reps : c->opt.quick ? 3 : 5;
    c->link_bytes = c->opt.quick ? 256u << 20 : 1u << 30;
    c->triad_elems = (c->opt.quick ? 64u << 20 : 256u << 20) / sizeof(double);
    c->adamw_params = c->opt.quick ? 8u << 20 : 32u << 20;
    /* Host memory, not the caches, is what is measured: every host array set is at
     * least 8 times the last-level cache (the H200's host answered 10.5 Gparam/s of
     * AdamW, 293 GB/s, from 128 MiB arrays: they stayed in its cache). */
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t cache = llc > 0 ? (size_t)llc : (size_t)512 << 20; /* unknown: assume a large one */
    if (c->triad_elems < 8 * cache / (3 * sizeof(double))) c->triad_elems = 8 * cache / (3 * sizeof(double));
    if (c->adamw_params < 8 * cache / (4 * sizeof(float))) c->adamw_params = 8 * cache / (4 * sizeof(float));
    c->overlap_s = c->opt.quick ? 0.3 : 1.0;

    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    c->margin = total_b / 16 > (1ull << 30) ? total_b / 16 : 1ull << 30;
    /* the largest phase holds 2 x link_bytes on the device (pinned copies) */
    while (c->link_bytes > MIN_LINK_BYTES && ((uint64_t)free_b < c->margin ||
                                              2 * (uint64_t)c->link_bytes > (uint64_t)free_b - c->margin))
        c->link_bytes /= 2;
    /* host: pinned buffers plus the larger CPU working set under half of RAM */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    uint64_t cpu_set = 3 * c->triad_elems * sizeof(double);
    if (4 * c->adamw_params * sizeof(float) > cpu_set)
        cpu_set = 4 * c->adamw_params * sizeof(float);
    while (ram > 0 && c->link_bytes > MIN_LINK_BYTES && 2 * (uint64_t)c->link_bytes + cpu_set > ram / 2)
        c->link_bytes /= 2;
    if (ram > 0 && 2 * (uint64_t)c->link_bytes + cpu_set > ram / 2) {
        fprintf(stderr, PROG ": this machine's %.1f GiB of memory is too small for the measurements "
                        "(%.1f GiB needed, at most half of it)\n", (double)ram / GIB,
                (double)(2 * (uint64_t)c->link_bytes + cpu_set) / GIB);
        exit(1);
    }
    device_room(c, 2 * c->link_bytes, "the smallest transfer size");
    CUDA_CHECK(lm_timer_init(&c->t));
    CUDA_CHECK(cudaEventCreate(&c->h2d_stop));
    CUDA_CHECK(cudaEventCreate(&c->d2h_stop));
    CUDA_CHECK(cudaMalloc((void **)&c->sink, sizeof *c->sink));
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    fprintf(stderr, PROG ": device %d (%s, %d SMs, %.1f GiB, %.1f GiB free), %.2f GiB per transfer, "
                    "%d reps, %d CPU threads%s\n",
            c->device, prop->name, c->sms, (double)total_b / GIB, (double)free_b / GIB,
            (double)c->link_bytes / GIB, c->reps, threads, c->opt.quick ? ", quick" : "");
    json_object_set_new(c->raw, "transfer_bytes", json_integer((json_int_t)c->link_bytes));
    json_object_set_new(c->raw, "reps", json_integer(c->reps));
    json_object_set_new(c->raw, "cpu_threads", json_integer(threads));
    json_object_set_new(c->raw, "quick", json_boolean(c->opt.quick));
    json_object_set_new(c->raw, "sms", json_integer(c->sms));
}

/* ----------------------------------------------------------------------------
 * main */

int main(int argc, char **argv) {
    calib_t c = {.steps = 6};
    options_parse(argc, argv, &c.opt);
    double t_start = now_s();
    c.raw = json_object();
    if (c.raw == NULL)
        die("out of memory%s", "");
    struct cudaDeviceProp prop;
    setup(&c, &prop);

    link_bufs_t b;
    link_alloc(&c, &b);
    link_rates_t link = measure_pinned(&c, &b);
    host_rates_t host = measure_host(&c, &b, &link);
    link_free(&b);
    managed_rates_t man = measure_prefetch(&c);
    kernel_rates_t ker = measure_kernels(&c);
    double gemm = measure_gemm(&c);
    disk_rates_t disk = {0};
    if (c.opt.spill_dir != NULL) {
        char err[512];
        progress(&c, "the disk tier's directory: O_DIRECT write and read");
        if (disk_measure(c.opt.spill_dir, c.opt.quick ? 256u << 20 : 1u << 30, c.reps, &disk, err, sizeof err) != 0)
            fprintf(stderr, PROG ": --spill-dir %s: not measured: %s\n", c.opt.spill_dir, err);
        else {
            json_t *rd = json_array(), *wr = json_array();
            for (int i = 0; i < c.reps; i++) {
                json_array_append_new(rd, json_real(disk.read_samples[i]));
                json_array_append_new(wr, json_real(disk.write_samples[i]));
            }
            json_object_set_new(c.raw, "disk_read_bps", rd);
            json_object_set_new(c.raw, "disk_write_bps", wr);
            json_object_set_new(c.raw, "disk_transfer_bytes", json_integer((json_int_t)disk.bytes));
            json_object_set_new(c.raw, "disk_engine_why", json_string(disk.why));
            json_object_set_new(c.raw, "disk_direct", json_integer(disk.direct));
            free(disk.read_samples);
            free(disk.write_samples);
        }
    }

    /* the profile: measured fields, and the two this tool cannot measure taken from h200 */
    const uvmrt_profile_t *ref = uvmrt_profile_find("h200");
    char date[32], desc[512], tool[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(desc, sizeof desc, "%s, calibrated by " PROG " on %s (measured)", prop.name, date);
    snprintf(tool, sizeof tool, PROG " " VERSION);
    uvmrt_profile_t p = {
        .struct_size = sizeof(uvmrt_profile_t),
        .name = c.opt.name,
        .description = desc,
        .measured = 1,
        .memory_bytes = (uint64_t)prop.totalGlobalMem,
        .prefetch_h2d_bps = man.prefetch_h2d,
        .evict_d2h_bps = man.evict_d2h,
        .pinned_h2d_bps = link.h2d,
        .pinned_d2h_bps = link.d2h,
        .fault_bps = ker.fault,
        .fault_group_bytes = ref->fault_group_bytes, /* needs CUPTI: the H200's figure */
        .prefetch_call_ns = (uint64_t)man.call_ns,
        .remote_read_bps = ker.remote_read,
        .remote_write_bps = ker.remote_write,
        .flops = gemm,
        .hbm_bps = ker.hbm,
        .fault_trace_ns = ref->fault_trace_ns, /* needs CUPTI: the H200's figure */
        .pinned_bidir_bps = link.bidir,
        .host_mem_bps = host.triad,
        .host_mem_shared_bps = host.triad_shared_total,
        .cpu_adamw_params_per_s = host.adamw,
        .gpu_bf16_flops = gemm,
        /* the CPU's AdamW beside one direction, in host_mem_bps's units (a CPU AdamW is
         * declared as params x host_mem_bps / cpu_adamw_params_per_s host bytes), scaled
         * to that direction's full pinned rate when the copies ran slower beside it */
        .host_mem_cpu_beside_h2d_bps = beside_bps(host.triad, host.adamw, host.adamw_beside_h2d.cpu_units_per_s,
                                                  host.adamw_beside_h2d.h2d, link.h2d),
        .host_mem_cpu_beside_d2h_bps = beside_bps(host.triad, host.adamw, host.adamw_beside_d2h.cpu_units_per_s,
                                                  host.adamw_beside_d2h.d2h, link.d2h),
        .disk_read_bps = disk.read_bps,
        .disk_write_bps = disk.write_bps,
        .disk_io_uring = disk.io_uring,
    };
    json_object_set_new(c.raw, "not_measured", json_string("fault_group_bytes and fault_trace_ns need CUPTI: "
                                                           "taken from the built-in h200 profile"));
    json_object_set_new(c.raw, "adamw_beside_link_total_bps", json_real(host.adamw_shared_total));
    int driver = 0, runtime = 0;
    CUDA_CHECK(cudaDriverGetVersion(&driver));
    CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    char *raw = json_dumps(c.raw, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (raw == NULL)
        die("out of memory%s", "");
    uvmrt_profile_meta_t meta = {sizeof meta, date, prop.name, driver, runtime, tool, raw};
    if (uvmrt_profile_save(&p, &meta, c.opt.output) != UVMRT_OK)
        die("cannot write the profile file '%s' (see above)", c.opt.output);
    /* self-check: the file reads back as what was measured (a regular file: a FIFO's
     * reader or a device has it now) */
    uvmrt_profile_t *back = NULL;
    struct stat sb;
    if (stat(c.opt.output, &sb) == 0 && S_ISREG(sb.st_mode) &&
        (uvmrt_profile_load(c.opt.output, &back) != UVMRT_OK || back->pinned_h2d_bps != p.pinned_h2d_bps))
        die("the profile file '%s' does not read back (see above)", c.opt.output);
    uvmrt_profile_free(back);
    free(raw);

    printf(PROG ": %s, driver %d, runtime %d, %.0f s\n", prop.name, driver, runtime, now_s() - t_start);
    printf("  pinned link           %7.1f GB/s host->device, %7.1f device->host, %7.1f both at once\n",
           link.h2d / GB, link.d2h / GB, link.bidir / GB);
    printf("  managed prefetch      %7.1f GB/s to the GPU, %7.1f to the host; %.0f us per call\n",
           man.prefetch_h2d / GB, man.evict_d2h / GB, man.call_ns / 1e3);
    printf("  kernel over the link  %7.1f GB/s remote read, %7.1f remote write, %7.1f demand faults\n",
           ker.remote_read / GB, ker.remote_write / GB, ker.fault / GB);
    printf("  host memory           %7.1f GB/s CPU alone, %7.1f in all with the link both ways\n",
           host.triad / GB, host.triad_shared_total / GB);
    printf("    beside the link     %7.1f GB/s triad, link %.1f host->device + %.1f device->host\n",
           host.triad_beside.cpu_units_per_s / GB, host.triad_beside.h2d / GB, host.triad_beside.d2h / GB);
    printf("  CPU AdamW             %7.2f Gparam/s alone\n", host.adamw / 1e9);
    printf("    beside the link     %7.2f Gparam/s, link %.1f host->device + %.1f device->host\n",
           host.adamw_beside.cpu_units_per_s / 1e9, host.adamw_beside.h2d / GB, host.adamw_beside.d2h / GB);
    printf("    beside one way      %7.2f Gparam/s beside %.1f host->device, %.2f beside %.1f device->host\n",
           host.adamw_beside_h2d.cpu_units_per_s / 1e9, host.adamw_beside_h2d.h2d / GB,
           host.adamw_beside_d2h.cpu_units_per_s / 1e9, host.adamw_beside_d2h.d2h / GB);
    printf("  GPU                   %7.1f TFLOP/s bf16 GEMM, %7.0f GB/s HBM read\n", gemm / 1e12, ker.hbm / GB);
    if (disk.read_bps > 0)
        printf("  disk tier             %7.2f GB/s read, %7.2f write (%s, engine %s: %s)\n", disk.read_bps / GB,
               disk.write_bps / GB, disk.direct ? "O_DIRECT" : "buffered", disk.io_uring ? "io_uring" : "threads",
               disk.why);
    printf("profile '%s' written to %s; use it with UVMRT_PROFILE=%s%s\n", p.name, c.opt.output,
           strchr(c.opt.output, '/') ? "" : "./", c.opt.output);

    CUDA_CHECK(cudaFree(c.sink));
    CUDA_CHECK(cudaEventDestroy(c.d2h_stop));
    CUDA_CHECK(cudaEventDestroy(c.h2d_stop));
    lm_timer_fini(&c.t);
    json_decref(c.raw);
    return 0;
}

#endif /* CALIB_GPU */
