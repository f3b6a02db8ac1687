/*
 * demo.c -- uvmrt-demo: a synthetic deep network trained on uvmrt.
 *
 * L layers, each with four float32 tensors of E = layer_mib/4 MiB: weight W_i, saved
 * activation A_i, gradient G_i and optimizer state O_i, plus one input X. A step is
 * forward 0..L-1, backward L-1..0, optimizer 0..L-1 (formulas in demo.h), every layer
 * call bracketed by uvmrt_layer_begin/uvmrt_layer_end on one compute stream. The
 * whole network (24 GiB at the defaults) is far larger than the budget (8 GiB in the
 * benchmark), so uvmrt has to move every layer in and out of the GPU each step.
 *
 * The demo runs the same training under the policies none (plain managed memory,
 * everything resident), demand (the driver's behaviour under oversubscription) and
 * prefetch (uvmrt's scheduler), prints per-step traffic and a side-by-side table, and
 * checks that the trained weights and optimizer state are bit-identical to the
 * reference run (policy none): moving data around must not change the result.
 *
 * Without a GPU it runs on uvmrt's sim backend: the schedule and its timing are the
 * model's; the arithmetic runs on the CPU when the data is small enough to check.
 *
 * UVMRT_* environment variables override the corresponding flags (the library gives
 * them precedence), so a run can be steered without changing its command line.
 */
#define _POSIX_C_SOURCE 200809L

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "uvmrt.h"
#include "../common/cli.h"

#include "demo.h"
#include "demo_gpu.h"

/* kept free on the GPU beyond the tensors: real oversubscription can hang the GPU */
static const uint64_t GPU_SAFETY_BYTES = 4ull << 30;

#define PROG "uvmrt-demo"

static const double GIB = 1024.0 * 1024.0 * 1024.0; /* sizes: GiB */
static const double GB = 1e9;                        /* traffic: GB, as in FACTS.md */
static const uint64_t MIB = 1024u * 1024u;
#define FALLBACK_PROFILE CLI_SIM_PROFILE

/* ----------------------------------------------------------------------------
 * options */

typedef struct demo_options {
    cli_common_t c;           /* the shared flags (examples/common); without --budget
                                 the budget is default_budget()'s; never applied to
                                 policy none */
    int layers_explicit;      /* 1: --layers given (never shrunk to fit the GPU) */
    int layers;               /* L */
    uint64_t layer_mib;       /* MiB per layer: four tensors of layer_mib/4 MiB */
    int work;                 /* passes per layer kernel */
    const char *report_json;  /* NULL: none */
    uint64_t sim_data_limit;  /* bytes: above it the sim backend does no arithmetic */
    int verify;
    int said_schedule_only;   /* the sim "schedule only" note is printed once */
    int detail;               /* --detail: configuration and per-layer, per-tensor tables */
    FILE *detail_out;         /* where they go until the comparison table is out (NULL: none) */
} demo_options_t;

enum { F_LAYERS, F_LAYER_MIB, F_WORK, F_REPORT_JSON, F_SIM_LIMIT, F_NO_VERIFY, F_DETAIL };

static const cli_flag_t DEMO_FLAGS[] = {
    {"layers", "N", "layers (default 24; on a GPU without room for them,\nas many as fit)", F_LAYERS},
    {"layer-mib", "M", "MiB per layer, 4 tensors of M/4 MiB; a multiple of 8\n(default 1024)",
     F_LAYER_MIB},
    {"work", "N", "passes of each layer kernel over its data (default 1)", F_WORK},
    {"report-json", "PATH", "write uvmrt's JSON report; with --policy all the policy\n"
                            "goes before the extension (out.json -> out.demand.json)", F_REPORT_JSON},
    {"sim-data-limit", "SIZE", "on sim, do the arithmetic on the CPU (and verify) only\n"
                               "up to this many tensor bytes (default 1G)", F_SIM_LIMIT},
    {"no-verify", NULL, "skip the checksums (and the reference run)", F_NO_VERIFY},
    {"detail", NULL, "after the comparison table and the verdict, each run's\n"
                     "configuration, per-layer table and per-tensor memory\n"
                     "summary (left out by default and by --quiet)", F_DETAIL},
};

static void demo_flag(int key, const char *arg, void *user) {
    demo_options_t *opt = user;
    switch (key) {
    case F_LAYERS:
        opt->layers = (int)cli_parse_int("--layers", arg, 1, 65536);
        opt->layers_explicit = 1;
        break;
    case F_LAYER_MIB:
        opt->layer_mib = (uint64_t)cli_parse_int("--layer-mib", arg, 8, 1 << 20);
        if (opt->layer_mib % 8)
            cli_usage_error("--layer-mib '%s': expected a multiple of 8 (each of the 4 "
                            "tensors a whole number of 2 MiB blocks)", arg);
        break;
    case F_WORK: opt->work = (int)cli_parse_int("--work", arg, 1, 1000000); break;
    case F_REPORT_JSON: opt->report_json = cli_parse_path("--report-json", arg); break;
    case F_SIM_LIMIT: opt->sim_data_limit = cli_parse_size("--sim-data-limit", arg, 0); break;
    case F_NO_VERIFY: opt->verify = 0; break;
    case F_DETAIL: opt->detail = 1; break;
    }
}

static void options_parse(int argc, char **argv, demo_options_t *opt) {
    *opt = (demo_options_t){
        .c = {.backend = UVMRT_BACKEND_CUDA, .policy_all = 1, .policy = UVMRT_POLICY_PREFETCH,
              .steps = 5, .seed = 1, .log_level = -1},
        .layers = 24,
        .layer_mib = 1024,
        .work = 1,
        .sim_data_limit = 1ull << 30,
        .verify = 1,
    };
    cli_spec_t spec = {
        .summary = "Train a synthetic deep network on uvmrt under the policies none, demand and\n"
                   "prefetch, and compare their step times, traffic and results.",
        .common = CLI_F_BACKEND | CLI_F_PROFILE | CLI_F_POLICY | CLI_F_BUDGET | CLI_F_STEPS |
                  CLI_F_SEED | CLI_F_REPORT | CLI_F_TRACE | CLI_F_RESULT_JSON | CLI_F_LOG_LEVEL |
                  CLI_F_QUIET | CLI_F_HOST_BUDGET | CLI_F_SPILL_DIR,
        .common_help = {
            [0] = "backend (default cuda; without a usable GPU: sim, profile\n"
                  FALLBACK_PROFILE ", unless --backend was given)",
            [2] = "uvmrt's policy, or all: none, demand and prefetch in\nturn (default all)",
            [3] = "device bytes uvmrt may keep resident (default: a third of\n"
                  "the tensors, 3x oversubscription, but at least the largest\n"
                  "layer call's working set; auto: free device memory less a\n"
                  "reserve; not applied to policy none)",
            [4] = "training steps, >= 2 (default 5); step 1 is recorded and\n"
                  "left out of the medians",
            [5] = "seed of the initial weights and input, decimal (default 1)",
            [6] = "write uvmrt's report as text, json, csv or trace ('-':\n"
                  "stdout); with --policy all the policy goes before the\n"
                  "extension (out.csv -> out.none.csv, out.demand.csv, ...)",
            [7] = "write the trace-event timeline (Perfetto, chrome://tracing),\n"
                  "named per policy as --report",
            [9] = "per-policy medians, budgets and the checksum verdict as JSON",
        },
        .steps_min = 2, .steps_max = 1000000,
        .policy_all_ok = 1,
        .flags = DEMO_FLAGS, .n_flags = sizeof DEMO_FLAGS / sizeof DEMO_FLAGS[0],
        .flag = demo_flag, .user = opt,
        .epilog = "Exit status: 0 success; 1 runtime error, checksum mismatch or an output that\n"
                  "could not be written; 2 bad usage.\n",
    };
    cli_parse(argc, argv, &spec, &opt->c);
}

/* UVMRT_* variables win over the flags (the library's precedence): say so up front. */
static void env_overrides_note(const demo_options_t *opt) {
    cli_note_env_overrides();
    const char *report = getenv("UVMRT_REPORT");
    if (report && *report && opt->c.policy_all)
        fprintf(stderr, PROG ": note: UVMRT_REPORT=%s is written by each of the runs in "
                        "turn (use --report-json for one report per policy)\n", report);
}

/* ----------------------------------------------------------------------------
 * the network */

enum { SLOT_W, SLOT_A, SLOT_G, SLOT_O, SLOTS };
static const uvmrt_role_t SLOT_ROLE[SLOTS] = {
    UVMRT_ROLE_WEIGHT, UVMRT_ROLE_ACTIVATION, UVMRT_ROLE_GRADIENT, UVMRT_ROLE_OPTIMIZER_STATE,
};
static const char SLOT_NAME[SLOTS] = {'W', 'A', 'G', 'O'};

/* All tensors have E bytes and come from one uvmrt_tensors_alloc. */
typedef struct demo_net {
    int layers;                /* L */
    size_t tensor_bytes;       /* E = layer_mib/4 MiB, a multiple of 2 MiB */
    size_t n;                  /* E/4 floats per tensor */
    uvmrt_tensor_t **tensors;  /* (1 + SLOTS*L,): X, then W_i, A_i, G_i, O_i per layer */
} demo_net_t;

static size_t net_count(int layers) {
    return 1 + (size_t)SLOTS * (size_t)layers;
}

/* Tensor of (layer, slot); layer -1 is the input X (which stands in for A_{-1}).
 * The index doubles as the tensor's id in the initialisation hash. */
static size_t net_index(int layer, int slot) {
    return layer < 0 ? 0 : 1 + (size_t)SLOTS * (size_t)layer + (size_t)slot;
}

static uvmrt_tensor_t *net_tensor(const demo_net_t *net, int layer, int slot) {
    return net->tensors[net_index(layer, slot)];
}

static float *net_data(const demo_net_t *net, int layer, int slot) {
    return (float *)uvmrt_tensor_ptr(net_tensor(net, layer, slot));
}

/* ----------------------------------------------------------------------------
 * results */

typedef struct demo_result {
    int done;
    uvmrt_policy_t policy;          /* effective (UVMRT_POLICY may override) */
    uvmrt_backend_kind_t backend;   /* effective */
    uint64_t budget_bytes;          /* resolved */
    uint64_t peak_resident_bytes;
    int steps;
    uvmrt_step_stats_t *step_stats; /* (steps,) */
    int have_checksums;
    uint64_t *checksums;            /* (L, 2): W_i, O_i after the last step */
    int write_failed;               /* 1: a report of this run could not be written */
} demo_result_t;

/* Medians over steps 2..K (step 1 records the schedule). */
typedef struct demo_medians {
    double ms, in_gb, out_gb, discard_gb, rd_gb, wr_gb, faults, wait_ms;
} demo_medians_t;

static char *report_path_for(const char *path, const char *policy);

static demo_medians_t result_medians(const demo_result_t *res) {
    size_t n = res->steps > 1 ? (size_t)res->steps - 1 : 0;
    double *v = malloc((n ? n : 1) * sizeof *v);
    demo_medians_t m = {0};
    if (v == NULL)
        return m;
    const uvmrt_step_stats_t *s = res->step_stats + 1;
#define DEMO_MEDIAN(field, expr)                                                               \
    do {                                                                                       \
        for (size_t i = 0; i < n; i++)                                                         \
            v[i] = (expr);                                                                     \
        m.field = cli_median(v, n);                                                                \
    } while (0)
    DEMO_MEDIAN(ms, (double)s[i].step_ns / 1e6);
    DEMO_MEDIAN(in_gb, (double)s[i].prefetch_bytes / GB);
    DEMO_MEDIAN(out_gb, (double)s[i].evict_bytes / GB);
    DEMO_MEDIAN(discard_gb, (double)s[i].discard_bytes / GB);
    DEMO_MEDIAN(rd_gb, (double)s[i].remote_read_bytes / GB);
    DEMO_MEDIAN(wr_gb, (double)s[i].remote_write_bytes / GB);
    DEMO_MEDIAN(faults, (double)s[i].fault_count);
    DEMO_MEDIAN(wait_ms, (double)s[i].wait_ns / 1e6);
#undef DEMO_MEDIAN
    free(v);
    return m;
}

static void result_free(demo_result_t *res) {
    free(res->step_stats);
    free(res->checksums);
    *res = (demo_result_t){0};
}

/* ----------------------------------------------------------------------------
 * one run: a context, the network, K steps */

typedef struct demo_run {
    demo_options_t *opt;
    uvmrt_context_t *ctx;
    uvmrt_backend_kind_t backend;      /* effective */
    uvmrt_policy_t policy;             /* effective */
    const uvmrt_profile_t *profile;    /* sim: the model; cuda: reference figures */
    uvmrt_stream_t stream;             /* compute stream; NULL on sim */
    demo_gpu_t *gpu;                   /* the GPU side (cuda backend); NULL on sim */
    int touch_data;                    /* 1: layer calls really compute */
    unsigned stream_flag;              /* UVMRT_USE_STREAM at --work 1, else 0 */
    demo_net_t net;
    demo_result_t *res;
} demo_run_t;

static void run_close(demo_run_t *run) {
    /* the context first: it may still refer to our stream */
    uvmrt_context_destroy(run->ctx);
    run->ctx = NULL;
    demo_gpu_close(run->gpu);
    run->gpu = NULL;
    run->stream = NULL;
    free(run->net.tensors);
    run->net.tensors = NULL;
}

/* Fails the run: the message, then the run's resources released, then exit 1. */
static void run_close_cb(void *run) { run_close(run); }
#define run_fail(run, ...) cli_fail(run_close_cb, (run), __VA_ARGS__)

static uint64_t total_tensor_bytes(const demo_options_t *opt) {
    return (uint64_t)net_count(opt->layers) * (opt->layer_mib / 4 * MIB);
}

/* The largest working set of one layer call: forward and the optimizer use 3
 * tensors, backward 4 (its own W, A, G and the layer above's G; 3 at the top). */
static uint64_t largest_working_set(const demo_options_t *opt) {
    return (opt->layers > 1 ? 4 : 3) * (opt->layer_mib / 4 * MIB);
}

/* The default budget: a third of the tensors (3x oversubscription), but never
 * less than the largest layer call's working set (which a budget must hold: a
 * third of a 1- or 2-layer network does not) and, on sim, no more than the
 * modelled device holds (less the library's default reserve). */
static uint64_t default_budget(const demo_options_t *opt, uvmrt_backend_kind_t backend,
                               const char *profile) {
    uint64_t b = total_tensor_bytes(opt) / 3, ws = largest_working_set(opt);
    if (b < ws)
        b = ws;
    /* auto is consumer-8g on sim (UVMRT_PROFILE) */
    const uvmrt_profile_t *p =
        uvmrt_profile_find(profile && strcmp(profile, "auto") != 0 ? profile : FALLBACK_PROFILE);
    if (backend == UVMRT_BACKEND_SIM && p != NULL && b > p->memory_bytes - (512ull << 20))
        b = p->memory_bytes - (512ull << 20);
    return b;
}

/* On falling back to sim, the default budget must fit the modelled device. */
static void budget_for_sim(uvmrt_params_t *params, void *arg) {
    const demo_options_t *opt = arg;
    if (params->policy != UVMRT_POLICY_NONE && !opt->c.budget_given)
        params->budget_bytes = default_budget(opt, UVMRT_BACKEND_SIM, params->profile);
}

/* Creates the context; on "no GPU" falls back to sim unless --backend cuda was
 * explicit. Exits on failure. */
static uvmrt_context_t *context_open(demo_options_t *opt, uvmrt_policy_t policy) {
    uvmrt_params_t params;
    uvmrt_params_init(&params);
    cli_common_t c = opt->c;
    c.policy = policy;
    if (!c.budget_given)
        c.budget_bytes = default_budget(opt, c.backend, c.profile);
    cli_params_apply(&c, &params);
    /* ignore_env stays 0: UVMRT_* variables steer the run and win over the flags */
    cli_backend_choice_t choice = {demo_gpu_missing == NULL, demo_gpu_missing,
                                   opt->c.backend_explicit, FALLBACK_PROFILE, budget_for_sim, opt};
    uvmrt_context_t *ctx = cli_context_open(&params, &choice);
    uvmrt_context_set_total_steps(ctx, (uint64_t)opt->c.steps); /* uvmrt-top's ETA */
    opt->c.backend = params.backend;
    opt->c.profile = params.profile;
    return ctx;
}

/* The default network (24 GiB) may not fit a smaller GPU: unless --layers was
 * given, use as many layers as fit its free memory less the safety margin. */
static void fit_layers_to_gpu(demo_options_t *opt) {
    uint64_t free_b = 0, total_b = 0;
    int dev = -1;
    if (opt->layers_explicit || opt->c.backend != UVMRT_BACKEND_CUDA ||
        demo_gpu_mem_info(&dev, &free_b, &total_b) != 0)
        return; /* no GPU: the sim fallback needs no fitting */
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    uint64_t e = opt->layer_mib / 4 * MIB;
    if (total_tensor_bytes(opt) <= room || room / e < 1 + 2 * SLOTS)
        return;
    int fit = (int)((room / e - 1) / SLOTS);
    printf(PROG ": %d layers would not fit the GPU's free memory (%.2f GiB); using %d\n",
           opt->layers, (double)free_b / GIB, fit);
    opt->layers = fit;
}

/* The GPU side: the safety check, the compute stream, the checksum buffer. */
static void run_open_gpu(demo_run_t *run) {
    uint64_t need = total_tensor_bytes(run->opt), free_b = 0, total_b = 0;
    int dev = -1;
    if (demo_gpu_missing != NULL)
        run_fail(run, "the cuda backend was selected (UVMRT_BACKEND?), but %s", demo_gpu_missing);
    if (demo_gpu_mem_info(&dev, &free_b, &total_b) != 0)
        run_fail(run, "the cuda backend is in use but the GPU's memory cannot be read");
    /* never allocate more managed memory than the GPU has free: real oversubscription
     * can hang the GPU; a smaller GPU is emulated with the budget instead */
    uint64_t room = free_b > GPU_SAFETY_BYTES ? free_b - GPU_SAFETY_BYTES : 0;
    if (need > room) {
        uint64_t e = run->opt->layer_mib / 4 * MIB, fit = room / e; /* tensors that fit */
        run_fail(run, "refusing to allocate %.2f GiB of tensors on GPU %d: it has %.2f GiB "
                      "free and %.0f GiB must stay free; use fewer --layers (%d would fit) "
                      "or a smaller --layer-mib; --budget emulates a smaller GPU",
                 (double)need / GIB, dev, (double)free_b / GIB, (double)GPU_SAFETY_BYTES / GIB,
                 fit > 1 ? (int)((fit - 1) / SLOTS) : 0);
    }
    if (!run->opt->c.quiet)
        printf("  GPU %d: %.2f GiB free of %.2f GiB; tensors %.2f GiB\n", dev,
               (double)free_b / GIB, (double)total_b / GIB, (double)need / GIB);
    demo_gpu_open(&run->gpu, run->opt->verify ? 2 * (size_t)run->opt->layers : 0, run_close_cb, run);
    run->stream = demo_gpu_stream(run->gpu);
}

static void net_alloc(demo_run_t *run) {
    const demo_options_t *opt = run->opt;
    if (cli_host_fits(run->ctx, total_tensor_bytes(opt), 0, 0) != 0)
        run_fail(run, "nothing allocated: the tensors do not fit the host budget");
    demo_net_t *net = &run->net;
    net->layers = opt->layers;
    net->tensor_bytes = (size_t)(opt->layer_mib / 4 * MIB);
    net->n = net->tensor_bytes / sizeof(float);
    size_t count = net_count(opt->layers);

    for (int i = 0; i < opt->layers; i++) {
        char name[32];
        int id = -1;
        snprintf(name, sizeof name, "layer%d", i);
        UV_CHECK(run, uvmrt_layer_add(run->ctx, name, &id));
        if (id != i)
            run_fail(run, "uvmrt_layer_add(%s) numbered it %d, expected %d", name, id, i);
    }

    uvmrt_tensor_desc_t *descs = calloc(count, sizeof *descs);
    char(*names)[24] = calloc(count, sizeof *names);
    net->tensors = calloc(count, sizeof *net->tensors);
    if (!descs || !names || !net->tensors) {
        free(descs);
        free(names);
        run_fail(run, "out of host memory for %zu tensor descriptors", count);
    }
    descs[0] = (uvmrt_tensor_desc_t){.name = "X", .layer = -1, .role = UVMRT_ROLE_ACTIVATION,
                                     .size_bytes = net->tensor_bytes};
    for (int i = 0; i < opt->layers; i++) {
        for (int k = 0; k < SLOTS; k++) {
            size_t j = net_index(i, k);
            snprintf(names[j], sizeof names[j], "%c%d", SLOT_NAME[k], i);
            descs[j] = (uvmrt_tensor_desc_t){.name = names[j], .layer = i,
                                             .role = SLOT_ROLE[k],
                                             .size_bytes = net->tensor_bytes};
        }
    }
    uvmrt_status_t st = uvmrt_tensors_alloc(run->ctx, count, descs, net->tensors);
    free(descs);
    free(names);
    UV_CHECK(run, st);
}

/* On the host, so the pages start where uvmrt's accounting says they are. A and G
 * are written before they are read, so they are left alone. */
static void net_init(demo_run_t *run) {
    const demo_net_t *net = &run->net;
    double t0 = cli_now_s();
    demo_cpu_fill_hash(net_data(net, -1, SLOT_A), net->n, run->opt->c.seed, net_index(-1, 0));
    for (int i = 0; i < net->layers; i++) {
        demo_cpu_fill_hash(net_data(net, i, SLOT_W), net->n, run->opt->c.seed,
                           net_index(i, SLOT_W));
        demo_cpu_fill_zero(net_data(net, i, SLOT_O), net->n);
    }
    if (!run->opt->c.quiet)
        printf("  initialised X, W and O (%.2f GiB) on the host in %.1f s\n",
               (double)(1 + 2 * (uint64_t)net->layers) * (double)net->tensor_bytes / GIB,
               cli_now_s() - t0);
}

/* The layer's arithmetic: a kernel on cuda, the CPU on sim with small data,
 * nothing on sim with large data. */
static void layer_work(demo_run_t *run, int i, uvmrt_phase_t phase) {
    const demo_net_t *net = &run->net;
    int top = i == net->layers - 1;
    float *w = net_data(net, i, SLOT_W), *a = net_data(net, i, SLOT_A);
    float *g = net_data(net, i, SLOT_G), *o = net_data(net, i, SLOT_O);
    const float *a_prev = net_data(net, i - 1, SLOT_A);                   /* X for i = 0 */
    const float *g_next = top ? a : net_data(net, i + 1, SLOT_G);          /* G_L := A_{L-1} */
    if (run->gpu) {
        int work = run->opt->work;
        switch (phase) {
        case UVMRT_PHASE_FORWARD: demo_gpu_forward(run->gpu, i, a, a_prev, w, net->n, work); break;
        case UVMRT_PHASE_BACKWARD:
            demo_gpu_backward(run->gpu, i, g, g_next, a, w, net->n, work);
            break;
        case UVMRT_PHASE_OPTIMIZER: demo_gpu_optimizer(run->gpu, i, w, o, g, net->n, work); break;
        }
        return;
    }
    if (!run->touch_data)
        return;
    switch (phase) {
    case UVMRT_PHASE_FORWARD: demo_cpu_forward(a, a_prev, w, net->n); break;
    case UVMRT_PHASE_BACKWARD: demo_cpu_backward(g, g_next, a, w, net->n); break;
    case UVMRT_PHASE_OPTIMIZER: demo_cpu_optimizer(w, o, g, net->n); break;
    }
}

/* One layer call: its uses, begin, the work, end. Every use is named (not left
 * to the defaults) so that each can carry UVMRT_USE_STREAM: the kernels touch
 * each byte once (at --work 1), so uvmrt may keep a tensor in host memory. */
static void layer_call(demo_run_t *run, int i, uvmrt_phase_t phase) {
    const demo_net_t *net = &run->net;
    uint64_t e = net->tensor_bytes;
    const unsigned R = UVMRT_USE_READ | run->stream_flag, W = UVMRT_USE_WRITE | run->stream_flag,
                   RW = UVMRT_USE_READWRITE | run->stream_flag;
    uvmrt_use_t uses[4];
    size_t n_uses = 0;
    uint64_t bytes = 0; /* moved through device memory: reads plus writes */
    switch (phase) {
    case UVMRT_PHASE_FORWARD: /* reads A_{i-1} (or X), W_i; writes A_i */
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_W), R};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_A), W};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i - 1, SLOT_A), R};
        bytes = 3 * e;
        break;
    case UVMRT_PHASE_BACKWARD: /* reads G_{i+1} (A_i at the top), A_i, W_i; writes G_i */
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_W), R};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_A), R};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_G), W};
        if (i < net->layers - 1) {
            uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i + 1, SLOT_G), R};
            bytes = 4 * e;
        } else {
            bytes = 3 * e;
        }
        break;
    case UVMRT_PHASE_OPTIMIZER: /* reads G_i; reads and writes O_i, W_i */
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_W), RW};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_G), R};
        uses[n_uses++] = (uvmrt_use_t){net_tensor(net, i, SLOT_O), RW};
        bytes = 5 * e;
        break;
    }
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = i,
        .phase = phase,
        .stream = run->stream,
        .uses = uses,
        .n_uses = n_uses,
        .no_default_uses = 1,
    };
    if (run->backend == UVMRT_BACKEND_SIM && run->profile && run->profile->hbm_bps > 0)
        call.sim_duration_ns = (uint64_t)((double)bytes / run->profile->hbm_bps * 1e9 *
                                          (double)run->opt->work);

    uvmrt_status_t st = uvmrt_layer_begin(run->ctx, &call);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_begin(layer%d, %s) failed: %s (%s)", i,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
    layer_work(run, i, phase);
    st = uvmrt_layer_end(run->ctx);
    if (st != UVMRT_OK)
        run_fail(run, "uvmrt_layer_end(layer%d, %s) failed: %s (%s)", i,
                 uvmrt_phase_name(phase), uvmrt_status_str(st), uvmrt_status_name(st));
}

static void run_steps(demo_run_t *run) {
    int layers = run->net.layers, steps = run->opt->c.steps;
    for (int s = 0; s < steps; s++) {
        UV_CHECK(run, uvmrt_step_begin(run->ctx));
        for (int i = 0; i < layers; i++)
            layer_call(run, i, UVMRT_PHASE_FORWARD);
        for (int i = layers - 1; i >= 0; i--)
            layer_call(run, i, UVMRT_PHASE_BACKWARD);
        for (int i = 0; i < layers; i++)
            layer_call(run, i, UVMRT_PHASE_OPTIMIZER);
        UV_CHECK(run, uvmrt_step_end(run->ctx));

        uvmrt_step_stats_t *st = &run->res->step_stats[s];
        st->struct_size = sizeof *st;
        UV_CHECK(run, uvmrt_step_stats_get(run->ctx, (uint64_t)s, st));
        printf("  step %d/%d  %.1f ms  in %.2f GB  out %.2f GB  discard %.2f GB  rd %.2f GB  "
               "wr %.2f GB  faults %" PRIu64 "  wait %.1f ms%s\n",
               s + 1, steps, (double)st->step_ns / 1e6, (double)st->prefetch_bytes / GB,
               (double)st->evict_bytes / GB, (double)st->discard_bytes / GB,
               (double)st->remote_read_bytes / GB, (double)st->remote_write_bytes / GB,
               st->fault_count,
               (double)st->wait_ns / 1e6, s == 0 ? "  (recording step)" : "");
        fflush(stdout);
    }
    run->res->steps = steps;
}

/* Checksums of W_i and O_i, the training state (A and G hold dead data that uvmrt
 * may have discarded). Outside a step. */
static void run_checksums(demo_run_t *run) {
    const demo_net_t *net = &run->net;
    uint64_t *sums = run->res->checksums; /* (L, 2) */
    if (run->gpu) {
        void **data = malloc(2 * (size_t)net->layers * sizeof *data);
        if (data == NULL)
            run_fail(run, "out of host memory for checksums");
        for (int i = 0; i < net->layers; i++) {
            data[2 * i] = net_data(net, i, SLOT_W);
            data[2 * i + 1] = net_data(net, i, SLOT_O);
        }
        demo_gpu_checksums(run->gpu, 2 * (size_t)net->layers, data, net->tensor_bytes, sums);
        free(data);
        run->res->have_checksums = 1;
        return;
    }
    for (int i = 0; i < net->layers; i++) {
        sums[2 * i] = demo_cpu_checksum(net_data(net, i, SLOT_W), net->tensor_bytes);
        sums[2 * i + 1] = demo_cpu_checksum(net_data(net, i, SLOT_O), net->tensor_bytes);
    }
    run->res->have_checksums = 1;
}

static void summary_print(const demo_result_t *res, int layers) {
    demo_medians_t m = result_medians(res);
    printf("policy %s: %.1f ms/step, in %.2f GB, out %.2f GB, discard %.2f GB, remote read "
           "%.2f GB, remote write %.2f GB, faults %.0f, wait %.1f ms per step (medians of steps "
           "2..%d); peak resident %.2f GiB, budget %.2f GiB\n",
           uvmrt_policy_name(res->policy), m.ms, m.in_gb, m.out_gb, m.discard_gb, m.rd_gb,
           m.wr_gb, m.faults, m.wait_ms, res->steps, (double)res->peak_resident_bytes / GIB,
           (double)res->budget_bytes / GIB);
    if (res->have_checksums) {
        /* one number for the whole training state, to compare runs by eye */
        uint64_t digest = 0;
        for (size_t j = 0; j < 2 * (size_t)layers; j++)
            digest = digest * 0x100000001b3ull + res->checksums[j];
        printf("  state digest 0x%016" PRIx64 " (of the W and O checksums)\n", digest);
    }
}

/* --detail: the run's per-layer report (with the per-tensor memory summary) goes
 * to opt->detail_out through a temporary file (the library writes reports by path),
 * so that main prints it after the comparison table. 0, or -1 when it could not be
 * written (said on stderr). */
static int detail_report(demo_run_t *run) {
    const char *dir = getenv("TMPDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/uvmrt-demo-detail.XXXXXX", dir && *dir ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, PROG ": --detail: cannot create a temporary file in %s: %s\n",
                dir && *dir ? dir : "/tmp", strerror(errno));
        return -1;
    }
    close(fd);
    int bad = cli_report_write(run->ctx, "the per-layer report", "text", path) != 0;
    FILE *f = bad ? NULL : fopen(path, "r");
    if (f) {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            fwrite(buf, 1, n, run->opt->detail_out);
        fclose(f);
    }
    unlink(path);
    return bad ? -1 : 0;
}

/* Prints what --detail collected (after the table and the verdict) and closes it. */
static void detail_print(demo_options_t *opt) {
    if (opt->detail_out == NULL)
        return;
    fflush(stdout);
    rewind(opt->detail_out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, opt->detail_out)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(opt->detail_out);
    opt->detail_out = NULL;
    fflush(stdout);
}

/* Runs the whole training under one policy. label: "reference" or NULL. */
static void run_policy(demo_options_t *opt, uvmrt_policy_t policy, const char *label,
                       const char *report_path, int show_tables, demo_result_t *res) {
    demo_run_t run = {.opt = opt, .res = res,
                      .stream_flag = opt->work == 1 ? UVMRT_USE_STREAM : 0};
    *res = (demo_result_t){0};
    res->step_stats = calloc((size_t)opt->c.steps, sizeof *res->step_stats);
    res->checksums = calloc(2 * (size_t)opt->layers, sizeof *res->checksums);
    if (!res->step_stats || !res->checksums) {
        fprintf(stderr, PROG ": out of host memory\n");
        exit(1);
    }

    run.ctx = context_open(opt, policy);
    run.backend = uvmrt_context_backend(run.ctx);
    run.policy = uvmrt_context_policy(run.ctx);
    run.profile = uvmrt_context_profile(run.ctx);
    res->policy = run.policy;
    res->backend = run.backend;
    res->budget_bytes = uvmrt_context_budget(run.ctx);

    uint64_t total = total_tensor_bytes(opt);
    printf("\n== %s%spolicy %s on %s%s%s: budget %.2f GiB ==\n", label ? label : "",
           label ? ": " : "", uvmrt_policy_name(run.policy), uvmrt_backend_name(run.backend),
           run.backend == UVMRT_BACKEND_SIM ? ", profile " : "",
           run.backend == UVMRT_BACKEND_SIM && run.profile ? run.profile->name : "",
           (double)res->budget_bytes / GIB);
    if (run.policy != policy)
        fprintf(stderr, PROG ": warning: UVMRT_POLICY overrides the policy asked for (%s): "
                        "this run uses %s\n",
                uvmrt_policy_name(policy), uvmrt_policy_name(run.policy));
    if (opt->detail_out) {
        fprintf(opt->detail_out, "\n== detail: %s%spolicy %s ==\n", label ? label : "",
                label ? ": " : "", uvmrt_policy_name(run.policy));
        uvmrt_context_print_config(run.ctx, opt->detail_out);
    }

    if (run.backend == UVMRT_BACKEND_CUDA) {
        run_open_gpu(&run);
        run.touch_data = 1;
    } else {
        run.touch_data = total <= opt->sim_data_limit;
        if (!run.touch_data && !opt->said_schedule_only) {
            printf("sim backend: schedule only, tensor data not touched (%.2f GiB > "
                   "--sim-data-limit %.2f GiB)\n",
                   (double)total / GIB, (double)opt->sim_data_limit / GIB);
            opt->said_schedule_only = 1;
        }
    }

    if (label && !run.touch_data) { /* a reference without data has nothing to compare */
        printf("reference run skipped: no checksums on the sim backend in schedule-only mode\n");
        run_close(&run);
        return;
    }

    net_alloc(&run);
    if (run.touch_data)
        net_init(&run);
    run_steps(&run);

    /* the reports: one that cannot be written is said and counted, the rest still written */
    if (show_tables && opt->detail_out)
        res->write_failed |= detail_report(&run) != 0;
    if (report_path) {
        int bad = cli_report_write(run.ctx, "--report-json", "json", report_path) != 0;
        if (!bad && strcmp(report_path, "-") != 0)
            printf("  report: %s\n", report_path);
        res->write_failed |= bad;
    }
    for (int k = 0; k < 2 && show_tables; k++) {
        const char *fmt = k == 0 ? opt->c.report_format : "trace";
        const char *file = k == 0 ? opt->c.report_path : opt->c.trace_path;
        if (fmt == NULL || file == NULL)
            continue;
        char *path = opt->c.policy_all ? report_path_for(file, uvmrt_policy_name(policy)) : strdup(file);
        if (path == NULL)
            run_fail(&run, "out of host memory");
        int bad = cli_report_write(run.ctx, k == 0 ? "--report" : "--trace", fmt, path) != 0;
        if (!bad && strcmp(path, "-") != 0)
            printf("  %s: %s\n", fmt, path);
        res->write_failed |= bad;
        free(path);
    }
    if (opt->verify && run.touch_data)
        run_checksums(&run);

    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    UV_CHECK(&run, uvmrt_summary_get(run.ctx, &sum));
    res->peak_resident_bytes = sum.peak_resident_bytes;
    res->done = 1;
    summary_print(res, opt->layers);
    fflush(stdout);
    unsigned long errors = cli_library_errors();
    run_close(&run); /* writes UVMRT_REPORT and UVMRT_TRACE */
    res->write_failed |= cli_context_outputs_failed(errors, &sum);
}

/* ----------------------------------------------------------------------------
 * verification and the final table */

/* out.json -> out.prefetch.json; a name without an extension gets ".prefetch";
 * "-" (stdout) stays "-". (cli_parse_path has refused directories.) */
static char *report_path_for(const char *path, const char *policy) {
    if (strcmp(path, "-") == 0)
        return strdup(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    if (dot == NULL || dot == base)
        dot = path + strlen(path);
    size_t head = (size_t)(dot - path), len = strlen(path) + strlen(policy) + 2;
    char *out = malloc(len);
    if (out == NULL) {
        fprintf(stderr, PROG ": out of host memory\n");
        exit(1);
    }
    snprintf(out, len, "%.*s.%s%s", (int)head, path, policy, dot);
    return out;
}

/* 0: match; 1: mismatch (printed). */
static int checksums_compare(const demo_result_t *ref, const demo_result_t *res, int layers) {
    int bad = 0;
    for (int i = 0; i < layers; i++) {
        for (int k = 0; k < 2; k++) {
            uint64_t want = ref->checksums[2 * i + k], got = res->checksums[2 * i + k];
            if (want == got)
                continue;
            if (bad == 0)
                printf("checksums: MISMATCH (layer %d %c: policy %s 0x%016" PRIx64
                       ", reference 0x%016" PRIx64 ")\n",
                       i, k ? 'O' : 'W', uvmrt_policy_name(res->policy), got, want);
            bad++;
        }
    }
    if (bad > 1)
        printf("checksums: %d of %d tensors differ under policy %s\n", bad, 2 * layers,
               uvmrt_policy_name(res->policy));
    return bad != 0;
}

/* Returns the exit status: 0, or 1 on a mismatch. *verdict: "match", "mismatch",
 * "not verified" or "not compared". */
static int verify(const demo_options_t *opt, const demo_result_t *ref, const demo_result_t *runs,
                  int n_runs, const char **verdict) {
    *verdict = "not verified";
    if (!opt->verify) {
        printf("checksums: not verified (--no-verify)\n");
        return 0;
    }
    int have = ref != NULL && ref->have_checksums;
    for (int r = 0; r < n_runs; r++)
        have = have && runs[r].have_checksums;
    if (!have) {
        if (ref == NULL)
            *verdict = "not compared";
        if (ref == NULL)
            printf("checksums: not compared (policy none is the reference)\n");
        else
            printf("checksums: not verified (sim backend: schedule only, tensor data not "
                   "touched)\n");
        return 0;
    }
    int bad = 0, compared = 0;
    for (int r = 0; r < n_runs; r++) {
        if (&runs[r] == ref)
            continue;
        bad |= checksums_compare(ref, &runs[r], opt->layers);
        compared++;
    }
    *verdict = bad ? "mismatch" : "match";
    if (!bad)
        printf("checksums: match (W and O of %d layers, %d run%s against the reference, "
               "policy %s)\n",
               opt->layers, compared, compared == 1 ? "" : "s", uvmrt_policy_name(ref->policy));
    return bad;
}

/* --result-json: each run's medians and budget, and the checksum verdict. 0, or -1
 * (said why). */
static int result_write(const demo_options_t *opt, const demo_result_t *runs, int n_runs,
                        const char *verdict) {
    const char *path = opt->c.result_json;
    json_t *list = json_array();
    for (int r = 0; r < n_runs; r++) {
        demo_medians_t m = result_medians(&runs[r]);
        json_array_append_new(list, json_pack(
            "{s:s, s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}",
            "policy", uvmrt_policy_name(runs[r].policy),
            "backend", uvmrt_backend_name(runs[r].backend),
            "budget_bytes", (json_int_t)runs[r].budget_bytes,
            "peak_resident_bytes", (json_int_t)runs[r].peak_resident_bytes,
            "ms_per_step_median", m.ms, "gb_in_per_step", m.in_gb, "gb_out_per_step", m.out_gb,
            "gb_discard_per_step", m.discard_gb, "gb_remote_read_per_step", m.rd_gb,
            "gb_remote_write_per_step", m.wr_gb, "faults_per_step", m.faults,
            "wait_ms_per_step", m.wait_ms));
    }
    json_t *root = json_pack("{s:s, s:s, s:i, s:I, s:I, s:i, s:I, s:i, s:s, s:o}",
                             "program", PROG, "version", uvmrt_version_string(),
                             "layers", opt->layers, "layer_bytes", (json_int_t)(opt->layer_mib * MIB),
                             "tensor_bytes", (json_int_t)total_tensor_bytes(opt),
                             "steps", opt->c.steps, "seed", (json_int_t)opt->c.seed,
                             "work", opt->work, "checksums", verdict, "runs", list);
    return cli_json_write("--result-json", path, root);
}

static void final_table(const demo_result_t *runs, int n_runs, int steps) {
    demo_medians_t m[3] = {{0}};
    printf("\n%-10s %10s %11s %12s %16s %10s %10s %12s %13s\n", "policy", "ms/step",
           "GB in/step", "GB out/step", "GB discard/step", "GB rd/step", "GB wr/step",
           "faults/step", "wait ms/step");
    for (int r = 0; r < n_runs && r < 3; r++) {
        m[r] = result_medians(&runs[r]);
        printf("%-10s %10.1f %11.2f %12.2f %16.2f %10.2f %10.2f %12.0f %13.1f\n",
               uvmrt_policy_name(runs[r].policy), m[r].ms, m[r].in_gb, m[r].out_gb,
               m[r].discard_gb, m[r].rd_gb, m[r].wr_gb, m[r].faults, m[r].wait_ms);
    }
    printf("(in: prefetched to the GPU; out: written back; discard: dropped, dead data; "
           "rd/wr: read/written over the link from tensors kept in host memory)\n");
    printf("(medians over steps 2..%d; step 1 records the schedule)\n", steps);
    if (n_runs == 3 && m[2].ms > 0 && m[0].ms > 0)
        printf("demand/prefetch %.2fx   prefetch/none %.2fx\n", m[1].ms / m[2].ms,
               m[2].ms / m[0].ms);
}

/* ----------------------------------------------------------------------------
 * main */

int main(int argc, char **argv) {
    cli_program = PROG;
    demo_options_t opt;
    options_parse(argc, argv, &opt);
    cli_outputs_check(&opt.c); /* an output that cannot be written fails now, not after the runs */
    cli_output_check("--report-json", opt.report_json);
    env_overrides_note(&opt);

    if (opt.detail && !opt.c.quiet) {
        opt.detail_out = tmpfile();
        if (opt.detail_out == NULL) {
            fprintf(stderr, PROG ": --detail: cannot create a temporary file: %s\n", strerror(errno));
            return 1;
        }
    }

    fit_layers_to_gpu(&opt);
    uint64_t e = opt.layer_mib / 4 * MIB;
    printf(PROG ": %d layers x 4 tensors of %.0f MiB + input = %zu tensors, %.2f GiB; "
           "%d steps, work %d, seed %" PRIu64 "\n",
           opt.layers, (double)e / (double)MIB, net_count(opt.layers),
           (double)total_tensor_bytes(&opt) / GIB, opt.c.steps, opt.work, opt.c.seed);

    static const uvmrt_policy_t ALL[3] = {UVMRT_POLICY_NONE, UVMRT_POLICY_DEMAND,
                                          UVMRT_POLICY_PREFETCH};
    demo_result_t runs[3] = {{0}}, reference = {0};
    const demo_result_t *ref = NULL;
    int n_runs = 0;

    if (opt.c.policy_all) {
        for (int r = 0; r < 3; r++) {
            char *path = opt.report_json ? report_path_for(opt.report_json,
                                                           uvmrt_policy_name(ALL[r]))
                                         : NULL;
            run_policy(&opt, ALL[r], NULL, path, 1, &runs[r]);
            free(path);
        }
        n_runs = 3;
        ref = &runs[0];
    } else {
        if (opt.c.policy != UVMRT_POLICY_NONE && opt.verify) {
            printf("reference run first: policy none, no budget, same seed and steps "
                   "(for the checksums; --no-verify skips it)\n");
            run_policy(&opt, UVMRT_POLICY_NONE, "reference", NULL, 0, &reference);
            ref = &reference;
        }
        run_policy(&opt, opt.c.policy, NULL, opt.report_json, 1, &runs[0]);
        n_runs = 1;
    }

    if (opt.c.policy_all)
        final_table(runs, n_runs, opt.c.steps);
    const char *verdict = NULL;
    int status = verify(&opt, ref, runs, n_runs, &verdict);
    for (int r = 0; r < n_runs; r++)
        if (runs[r].write_failed)
            status = 1;
    if (opt.c.result_json && result_write(&opt, runs, n_runs, verdict) != 0)
        status = 1;
    detail_print(&opt);

    for (int r = 0; r < n_runs; r++)
        result_free(&runs[r]);
    result_free(&reference);
    return cli_stdout_close(status);
}
