/*
 * uvmrt.h -- the public API of uvmrt, a unified-memory oversubscription runtime.
 *
 * uvmrt keeps every large tensor of a training program in CUDA managed memory and,
 * because a training step repeats, plans ahead: it records the first step's sequence
 * of layer calls, then prefetches what upcoming layers need and evicts what is
 * needed last, so that the bytes resident on the GPU never exceed a budget.
 *
 * Contract, in short:
 *  - Handles are opaque. Every create has a destroy; destroying NULL is a no-op.
 *  - Every call returns a uvmrt_status_t: UVMRT_OK (0) or a negative error. On error
 *    nothing was changed, and a message naming the bad value was logged.
 *    The library never calls exit() or abort().
 *  - Failed backend (CUDA) calls: a public call either succeeds or fails with the
 *    context as before: no step or layer call is left open or half-recorded, the
 *    step's calls, the record and plan, tensors, placements and the completed
 *    steps are unchanged, and the same call may simply be made again (a failed
 *    uvmrt_layer_end leaves the call open; ending it again does not redo the
 *    layer's work). Data movement is the one thing a failed call cannot take
 *    back once the GPU has it: evictions it had already enqueued stay done and
 *    are counted (in the stats of the step that runs next, for a failed
 *    uvmrt_step_begin); a prefetch whose enqueue failed is moved back to the
 *    host, and when even that fails its tensors are counted as resident (they
 *    may be partly there). So uvmrt's residency accounting is never below what
 *    the GPU holds, and never above the budget. Backend errors a call can
 *    complete without (timing events, the clock anchor, syncs at destroy) do not
 *    fail it: their timings read 0, each kind (operation and CUDA error name) is
 *    logged once as a warning, and uvmrt_summary_t.backend_errors counts them.
 *  - Thread safety: a context and its tensors are driven by one thread at a time.
 *    Different contexts are independent. uvmrt_status_str() and
 *    uvmrt_version_string() may be called from any thread.
 *  - Stream ordering: uvmrt_layer_begin() makes the layer's stream wait (with
 *    events, never a device-wide sync) for the prefetches that layer needs;
 *    work the caller enqueues on that stream between begin and end is the layer's
 *    work; uvmrt_layer_end() records an event after it, and data the layer used is
 *    evicted only after that event. uvmrt_step_end() waits for the compute streams
 *    used in the step (not for copy streams), so step times are real.
 *  - Units: sizes in bytes, times in nanoseconds, bandwidths in bytes per second.
 */
#ifndef UVMRT_H
#define UVMRT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ version */
#define UVMRT_VERSION_MAJOR 0
#define UVMRT_VERSION_MINOR 1
#define UVMRT_VERSION_PATCH 0
#define UVMRT_VERSION_NUMBER \
    (UVMRT_VERSION_MAJOR * 10000 + UVMRT_VERSION_MINOR * 100 + UVMRT_VERSION_PATCH)

/* "MAJOR.MINOR.PATCH" of the library actually linked (may differ from the header). */
const char *uvmrt_version_string(void);
/* UVMRT_VERSION_NUMBER of the library actually linked. */
int uvmrt_version_number(void);

/* ------------------------------------------------------------------ status */
/* One list yields the enum and the strings (uvmrt_status_str). */
#define UVMRT_STATUS_LIST(X)                                                     \
    X(UVMRT_OK, 0, "success")                                                    \
    X(UVMRT_ERR_INVALID, -1, "invalid argument")                                 \
    X(UVMRT_ERR_CONFIG, -2, "invalid configuration value")                       \
    X(UVMRT_ERR_NOMEM, -3, "out of memory")                                      \
    X(UVMRT_ERR_BUDGET, -4, "a layer's working set exceeds the device budget")   \
    X(UVMRT_ERR_STATE, -5, "call not allowed in this state")                     \
    X(UVMRT_ERR_NOT_FOUND, -6, "no such object (already freed, or not ours)")    \
    X(UVMRT_ERR_NO_DEVICE, -7, "no usable GPU")                                  \
    X(UVMRT_ERR_UNSUPPORTED, -8, "not supported by this build or device")        \
    X(UVMRT_ERR_BACKEND, -9, "backend (CUDA) call failed")                       \
    X(UVMRT_ERR_IO, -10, "input/output error")

typedef enum uvmrt_status {
#define UVMRT_X_ENUM(name, value, text) name = value,
    UVMRT_STATUS_LIST(UVMRT_X_ENUM)
#undef UVMRT_X_ENUM
} uvmrt_status_t;

/* A static string for any value; "unknown status" for values not in the list. */
const char *uvmrt_status_str(uvmrt_status_t status);
/* The enum name ("UVMRT_ERR_BUDGET"), or "UVMRT_UNKNOWN". */
const char *uvmrt_status_name(uvmrt_status_t status);

/* ------------------------------------------------------------------ enums */
typedef enum uvmrt_policy {
    UVMRT_POLICY_NONE = 0,     /* plain managed memory: no hints, no budget enforcement */
    UVMRT_POLICY_DEMAND = 1,   /* driver emulation: fault in, evict in allocation order */
    UVMRT_POLICY_PREFETCH = 2  /* uvmrt's scheduler: record step 1, plan, prefetch */
} uvmrt_policy_t;

typedef enum uvmrt_backend_kind {
    UVMRT_BACKEND_CUDA = 0, /* real GPU through the CUDA runtime */
    UVMRT_BACKEND_SIM = 1   /* deterministic model of a GPU (no GPU needed) */
} uvmrt_backend_kind_t;

typedef enum uvmrt_role {
    UVMRT_ROLE_WEIGHT = 0,
    UVMRT_ROLE_GRADIENT = 1,
    UVMRT_ROLE_ACTIVATION = 2,
    UVMRT_ROLE_OPTIMIZER_STATE = 3,
    UVMRT_ROLE_WORKSPACE = 4
} uvmrt_role_t;
#define UVMRT_ROLE_COUNT 5

typedef enum uvmrt_phase {
    UVMRT_PHASE_FORWARD = 0,
    UVMRT_PHASE_BACKWARD = 1,
    UVMRT_PHASE_OPTIMIZER = 2
} uvmrt_phase_t;
#define UVMRT_PHASE_COUNT 3

typedef enum uvmrt_log_level {
    UVMRT_LOG_ERROR = 0,
    UVMRT_LOG_WARN = 1,
    UVMRT_LOG_INFO = 2,
    UVMRT_LOG_DEBUG = 3
} uvmrt_log_level_t;

/* Lower-case names ("prefetch", "sim", "weight", "forward", "warn"), or "?". */
const char *uvmrt_policy_name(uvmrt_policy_t policy);
const char *uvmrt_backend_name(uvmrt_backend_kind_t backend);
const char *uvmrt_role_name(uvmrt_role_t role);
const char *uvmrt_phase_name(uvmrt_phase_t phase);
const char *uvmrt_log_level_name(uvmrt_log_level_t level);

/* Parse those names; UVMRT_ERR_INVALID for anything else (out is untouched). */
uvmrt_status_t uvmrt_policy_parse(const char *text, uvmrt_policy_t *out);
uvmrt_status_t uvmrt_backend_parse(const char *text, uvmrt_backend_kind_t *out);

/* Parse a size: an integer with an optional K, M, G or T suffix (powers of 1024,
 * optionally followed by "iB" or "B"), e.g. "8G", "512MiB", "1048576". */
uvmrt_status_t uvmrt_size_parse(const char *text, uint64_t *out_bytes);

/* ------------------------------------------------------------------ handles */
typedef struct uvmrt_context uvmrt_context_t;
typedef struct uvmrt_tensor uvmrt_tensor_t;
/* Binary-compatible with cudaStream_t, without including CUDA headers.
 * NULL is the legacy default stream. Ignored by the sim backend except as a name. */
typedef struct CUstream_st *uvmrt_stream_t;

/* ------------------------------------------------------------------ logging */
/* Called for every message at or below the context's log level. The message has
 * no trailing newline. May be called from the thread that drives the context only. */
typedef void (*uvmrt_log_fn)(uvmrt_log_level_t level, const char *message, void *user);

/* ------------------------------------------------------------------ device profiles */
/* The numbers that describe a GPU and its link, for the sim backend. */
typedef struct uvmrt_profile {
    const char *name;             /* "h200", "consumer-8g", ... */
    const char *description;      /* one line; says "estimate" when not measured */
    int measured;                 /* 1: measured on real hardware (FACTS.md) */
    uint64_t memory_bytes;        /* device memory capacity */
    double prefetch_h2d_bps;      /* managed prefetch to GPU, one large call */
    double evict_d2h_bps;         /* managed prefetch to host (write-back eviction) */
    double pinned_h2d_bps;        /* pinned cudaMemcpy, the link's ceiling */
    double pinned_d2h_bps;
    double fault_bps;             /* kernel streaming over host-resident data (demand faults) */
    uint64_t fault_group_bytes;   /* bytes per GPU fault group, for fault counts */
    uint64_t prefetch_call_ns;    /* fixed cost of one prefetch/evict call */
    double remote_read_bps;       /* kernel reading host memory over the link (remote mapping) */
    double remote_write_bps;      /* kernel writing host memory over the link */
    double flops;                 /* sustained dense bf16 FLOP/s, for declared FLOPs */
    double hbm_bps;               /* device memory bandwidth, for declared bytes */
    uint64_t fault_trace_ns;      /* the driver's time to trace one fault group for CUPTI */
} uvmrt_profile_t;

/* The built-in profiles; *count receives their number. Never NULL. */
const uvmrt_profile_t *uvmrt_profiles(size_t *count);
/* A built-in profile by name, or NULL. */
const uvmrt_profile_t *uvmrt_profile_find(const char *name);

/* ------------------------------------------------------------------ params */
/* Context parameters. Always start from uvmrt_params_init(). Unless ignore_env is
 * set, the UVMRT_* environment variables below override these fields at context
 * creation, so a built program can be steered without recompiling:
 *
 *   UVMRT_DEVICE          device ordinal                         (default 0)
 *   UVMRT_BACKEND         cuda | sim                              (default cuda)
 *   UVMRT_PROFILE         sim device profile name                 (default consumer-8g)
 *   UVMRT_POLICY          none | demand | prefetch                (default prefetch)
 *   UVMRT_BUDGET          SIZE | auto                             (default auto)
 *   UVMRT_BUDGET_RESERVE  SIZE kept free when the budget is auto  (default 512M)
 *   UVMRT_DISCARD         1 | 0: drop dead data instead of writing it back (default 1)
 *   UVMRT_REMOTE          1 | 0: let streamed tensors stay in host memory, accessed over
 *                         the link, when that moves fewer bytes (default 1)
 *   UVMRT_LOG_LEVEL       error | warn | info | debug              (default warn)
 *   UVMRT_REPORT          none | stderr | json:PATH | text:PATH | csv:PATH | trace:PATH
 *                         report written at destroy                (default none)
 *   UVMRT_TRACE           none | PATH: trace-event timeline written at destroy (default none)
 *   UVMRT_HISTORY         N: per-step statistics, CSV rows and trace spans are kept for
 *                         the last N steps (up to N + N/4, trimmed in batches); older
 *                         steps are summed into the totals, so memory stays flat over
 *                         any number of steps                      (default 1000)
 *   UVMRT_FAULT_STATS     1 | 0: collect the driver's unified-memory counters through
 *                         CUPTI (cuda backend) or the model (sim)  (default 1)
 *   UVMRT_FAULT_SAMPLE    auto | N: which steps collect them. The driver's tracing
 *                         costs time per fault (20-55% of a demand-paged step on
 *                         the H200), so auto measures that cost and spaces the
 *                         collecting steps so that it averages ~1% of step time
 *                         (at least every other step); N: every Nth step, 1 = all
 *                                                                  (default auto)
 *   UVMRT_MONITOR         1 | 0: publish a snapshot of every step for uvmrt-top(1) in a
 *                         shared-memory segment /uvmrt.<uid>.<pid> (mode 0600, removed
 *                         at destroy; a context that cannot create it warns and runs
 *                         on unmonitored)                          (default 1)
 *
 * An invalid value makes uvmrt_context_create() fail with UVMRT_ERR_CONFIG and a
 * message naming the variable and what was expected.
 */
typedef struct uvmrt_params {
    size_t struct_size;            /* sizeof(uvmrt_params_t); set by uvmrt_params_init */
    int device;                    /* CUDA device ordinal, >= 0 */
    uvmrt_backend_kind_t backend;
    const char *profile;           /* sim profile name; copied */
    uvmrt_policy_t policy;
    uint64_t budget_bytes;         /* device bytes uvmrt may keep resident; 0 = auto */
    uint64_t budget_reserve_bytes; /* auto budget = free device memory - this */
    int discard_dead;              /* 1: evict dead data by discarding (no write-back) */
    int remote;                    /* 1: host-home streamed tensors when cheaper (UVMRT_USE_STREAM) */
    uvmrt_log_level_t log_level;
    uvmrt_log_fn log_fn;           /* NULL: messages go to stderr */
    void *log_user;
    const char *report;            /* report written at destroy; copied; NULL = "none" */
    int ignore_env;                /* 1: do not read UVMRT_* variables */
    int fault_stats;               /* 1: unified-memory counters (CUPTI on cuda, the model on sim) */
    int fault_sample_every;        /* steps that collect them: 0 = auto, N = every Nth step */
    const char *trace;             /* trace-event JSON written at destroy; copied; NULL = none */
} uvmrt_params_t;

void uvmrt_params_init(uvmrt_params_t *params);

/* ------------------------------------------------------------------ context */
/* Creates a context: one GPU (or sim model), one budget, one policy.
 * params may be NULL (defaults). On failure *out is NULL and the status says why.
 * With backend cuda and no usable GPU: UVMRT_ERR_NO_DEVICE (the caller may retry
 * with the sim backend). */
uvmrt_status_t uvmrt_context_create(const uvmrt_params_t *params, uvmrt_context_t **out);

/* Frees every tensor still allocated, writes the report named by UVMRT_REPORT /
 * params.report, and releases the context. NULL is a no-op. */
void uvmrt_context_destroy(uvmrt_context_t *ctx);

/* Writes the effective configuration, one "UVMRT_NAME=value  (source)" line per
 * setting, plus the backend and the resolved budget. */
void uvmrt_context_print_config(const uvmrt_context_t *ctx, FILE *out);

/* The resolved settings. */
uvmrt_policy_t uvmrt_context_policy(const uvmrt_context_t *ctx);
uvmrt_backend_kind_t uvmrt_context_backend(const uvmrt_context_t *ctx);
uint64_t uvmrt_context_budget(const uvmrt_context_t *ctx);
/* The device profile in use: the sim profile, or for cuda the measured H200 figures
 * only as reference (never NULL). */
const uvmrt_profile_t *uvmrt_context_profile(const uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ layers */
/* Declares a layer (a unit of work the trainer brackets with begin/end). Layers
 * are numbered 0, 1, 2... in declaration order; *out_layer receives the number.
 * The name is copied and appears in reports. */
uvmrt_status_t uvmrt_layer_add(uvmrt_context_t *ctx, const char *name, int *out_layer);
/* Number of declared layers. */
int uvmrt_layer_count(const uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ tensors */
typedef struct uvmrt_tensor_desc {
    const char *name;   /* for reports; copied; NULL gives "tensor<N>" */
    int layer;          /* owning layer, or -1 for none (then no default uses) */
    uvmrt_role_t role;
    size_t size_bytes;  /* > 0 and at most 2^50 (1 PiB); one call's tensors of one layer
                         * at most 2^52 bytes in all (UVMRT_ERR_INVALID otherwise) */
} uvmrt_tensor_desc_t;

/* Allocates n tensors in managed memory. Tensors of the same layer are packed, in
 * the order given, into one contiguous arena per layer whose base is 2 MiB aligned;
 * each tensor of 1 MiB or more starts on a 2 MiB boundary (the driver's block), so
 * tensors used together move with one prefetch call. On failure nothing is
 * allocated and out[] is untouched. Not allowed inside a step. */
uvmrt_status_t uvmrt_tensors_alloc(uvmrt_context_t *ctx, size_t n,
                                   const uvmrt_tensor_desc_t *descs,
                                   uvmrt_tensor_t **out);
/* One tensor (its own arena). */
uvmrt_status_t uvmrt_tensor_alloc(uvmrt_context_t *ctx, const uvmrt_tensor_desc_t *desc,
                                  uvmrt_tensor_t **out);
/* Frees a tensor; its arena is released when its last tensor is freed. Freeing a
 * tensor twice, or one of another context, gives UVMRT_ERR_NOT_FOUND. NULL: no-op.
 * Not allowed inside a step. */
uvmrt_status_t uvmrt_tensor_free(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor);

/* The managed pointer (valid on host and device), size, name, layer and role. */
void *uvmrt_tensor_ptr(const uvmrt_tensor_t *tensor);
size_t uvmrt_tensor_size(const uvmrt_tensor_t *tensor);
const char *uvmrt_tensor_name(const uvmrt_tensor_t *tensor);
int uvmrt_tensor_layer(const uvmrt_tensor_t *tensor);
uvmrt_role_t uvmrt_tensor_role(const uvmrt_tensor_t *tensor);
/* 1 when uvmrt's own accounting says the tensor is resident on the GPU. */
int uvmrt_tensor_is_resident(const uvmrt_tensor_t *tensor);
/* 1 when the tensor is kept in host memory, accessed by the GPU over the link
 * (by the plan, see UVMRT_USE_STREAM, or by uvmrt_tensor_set_placement). */
int uvmrt_tensor_is_host_homed(const uvmrt_tensor_t *tensor);

typedef enum uvmrt_placement {
    UVMRT_PLACE_AUTO = 0, /* uvmrt moves it as the policy plans (the default) */
    UVMRT_PLACE_HOST = 1  /* it lives in host memory; the GPU reads and writes it over the link */
} uvmrt_placement_t;

/* Places a tensor. UVMRT_PLACE_HOST: preferred location host, mapped for the GPU
 * (cudaMemAdvise), moved to the host now (stream ordered after its last use);
 * uvmrt never migrates it again and its uses never count toward the budget.
 * For data whose next consumer is the CPU (gradients for a CPU optimizer: the
 * GPU writes them at ~52 GB/s on the H200, against ~13 GB/s for migrating them
 * back) or that only the CPU touches. Back to UVMRT_PLACE_AUTO: the policy moves
 * it again. Not allowed inside a step. */
uvmrt_status_t uvmrt_tensor_set_placement(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor,
                                          uvmrt_placement_t placement);
uvmrt_placement_t uvmrt_tensor_placement(const uvmrt_tensor_t *tensor);

/* ------------------------------------------------------------------ steps and layer calls */
/* How a layer call uses a tensor. READ: reads the previous contents.
 * WRITE without READ: overwrites every byte before reading any, so the previous
 * contents are dead and need not be kept (uvmrt may discard them). */
#define UVMRT_USE_READ 1u
#define UVMRT_USE_WRITE 2u
#define UVMRT_USE_READWRITE 3u
/* STREAM (or-ed with the above): the call touches each byte at most once per
 * access kind (elementwise kernels, a GEMM's output), so reading or writing it
 * over the link is as fast as moving it. When every use of a tensor in the step
 * is STREAM, the prefetch plan may keep it in host memory (preferred location
 * host, mapped for the GPU: ~50 GB/s each way on the H200, against ~13 GB/s for
 * writing back a migrated tensor) instead of moving it. */
#define UVMRT_USE_STREAM 4u

typedef struct uvmrt_use {
    uvmrt_tensor_t *tensor;
    unsigned access; /* UVMRT_USE_* */
} uvmrt_use_t;

/* One layer call. Default uses follow from the tensors the layer owns:
 *   forward:   weight R,  activation W,                       workspace RW
 *   backward:  weight R,  activation R,  gradient W,           workspace RW
 *   optimizer: weight RW, gradient R,    optimizer state RW,   workspace RW
 * uses[] adds to them (e.g. the previous layer's activation as input) or, for a
 * tensor the defaults already name, replaces its access. */
typedef struct uvmrt_layer_call {
    int layer;
    uvmrt_phase_t phase;
    uvmrt_stream_t stream;     /* the stream the layer's work runs on */
    const uvmrt_use_t *uses;   /* extra uses; may be NULL when n_uses is 0 */
    size_t n_uses;
    int no_default_uses;       /* 1: only uses[] */
    double flops;              /* sim: work of this call, timed at the profile's FLOP/s */
    uint64_t sim_duration_ns;  /* sim: explicit duration; overrides flops when > 0 */
} uvmrt_layer_call_t;

/* Starts a step. The first step is recorded; later steps follow the plan. */
uvmrt_status_t uvmrt_step_begin(uvmrt_context_t *ctx);
/* Ends a step: waits for the step's compute streams and records its time. */
uvmrt_status_t uvmrt_step_end(uvmrt_context_t *ctx);

/* Opens a layer call: makes every tensor it uses resident (by plan, or now) and
 * makes call->stream wait for them. Only inside a step, one layer open at a time.
 * UVMRT_ERR_BUDGET (naming the layer, its working set and the budget) when the
 * call's tensors cannot fit in the budget. UVMRT_ERR_INVALID for a NULL call,
 * flops that are negative, NaN or infinite, or a modelled duration (flops at the
 * profile's rate, or sim_duration_ns) over 1e18 ns. */
uvmrt_status_t uvmrt_layer_begin(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call);
/* Closes the open layer call: records its end on its stream, and issues the
 * prefetches (and the evictions that make room) planned for the layers ahead. */
uvmrt_status_t uvmrt_layer_end(uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ statistics */
/* Counters of one (layer, phase), summed over all steps. Bytes are logical bytes
 * of the tensors concerned. Faults come from the sim model on sim, and from the
 * runtime's own estimate on cuda (tensors used while not resident). */
typedef struct uvmrt_layer_stats {
    uint64_t calls;
    uint64_t prefetch_bytes;   /* moved to the GPU for this call, ahead or on demand */
    uint64_t evict_bytes;      /* written back to host to make room for this call */
    uint64_t discard_bytes;    /* dropped without write-back (dead data) for this call */
    uint64_t fault_count;      /* demand-fault groups */
    uint64_t fault_bytes;
    uint64_t remote_read_bytes;  /* read over the link from host-homed tensors */
    uint64_t remote_write_bytes; /* written over the link to host-homed tensors */
    uint64_t wait_ns;          /* time the layer's stream waited for its prefetches */
    uint64_t duration_ns;      /* from the end of the wait to the end of the layer's work */
    /* What the driver reported (CUPTI unified-memory counters on cuda, the model on
     * sim; all 0 when fault_stats_source is "none"), for records whose address is in a
     * uvmrt tensor and whose start time falls in this call's span (see uvmrt-report(5)). */
    uint64_t gpu_faults;                 /* GPU page-fault groups */
    uint64_t fault_htod_bytes;           /* host to device, cause: fault (coherence) or unknown */
    uint64_t prefetch_htod_bytes;        /* host to device, cause: user prefetch (uvmrt's own) */
    uint64_t driver_prefetch_htod_bytes; /* host to device, cause: driver prefetch / access counters */
    uint64_t evict_dtoh_bytes;           /* device to host, any cause (write-backs, driver evictions) */
    uint64_t thrashing;                  /* thrashing records */
    uint64_t throttling;                 /* throttling records */
    uint64_t remote_map;                 /* remote-map records */
    uint64_t cpu_faults;                 /* CPU page faults (records counted) */
    uint64_t sampled_calls;              /* calls in steps that collected the driver's counters
                                          * (UVMRT_FAULT_SAMPLE): the counters above cover these */
} uvmrt_layer_stats_t;

/* One step. */
typedef struct uvmrt_step_stats {
    uint64_t step_ns;
    uint64_t prefetch_bytes, evict_bytes, discard_bytes;
    uint64_t fault_count, fault_bytes;
    uint64_t remote_read_bytes, remote_write_bytes;
    uint64_t wait_ns;
    uint64_t peak_resident_bytes;
    uint64_t h2d_busy_ns;      /* time the copy stream spent prefetching to the GPU */
    uint64_t d2h_busy_ns;      /* time the copy stream spent evicting */
    /* the driver's counters attributed to this step (see uvmrt_layer_stats_t) */
    uint64_t gpu_faults, fault_htod_bytes, prefetch_htod_bytes, driver_prefetch_htod_bytes;
    uint64_t evict_dtoh_bytes, thrashing, throttling, remote_map, cpu_faults;
    int fault_sampled;         /* 1: this step collected the driver's counters; 0: they read 0 */
} uvmrt_step_stats_t;

/* The whole run. */
typedef struct uvmrt_summary {
    uint64_t steps;            /* completed steps */
    uint64_t budget_bytes;
    uint64_t resident_bytes;   /* now, by uvmrt's accounting */
    uint64_t peak_resident_bytes;
    uint64_t allocated_bytes;  /* sum of tensor sizes */
    uint64_t prefetch_bytes, evict_bytes, discard_bytes, fault_count, fault_bytes;
    uint64_t remote_read_bytes, remote_write_bytes;
    uint64_t host_homed_bytes;   /* footprints of the tensors the plan keeps in host memory */
    uint64_t plans_built;      /* prefetch policy: times a plan was (re)built */
    /* the driver's counters attributed to layer calls, summed */
    uint64_t gpu_faults, fault_htod_bytes, prefetch_htod_bytes, driver_prefetch_htod_bytes;
    uint64_t evict_dtoh_bytes, thrashing, throttling, remote_map, cpu_faults;
    /* records whose address is in no uvmrt tensor, or that came outside every step */
    uint64_t unattributed_records;
    uint64_t unattributed_gpu_faults, unattributed_htod_bytes, unattributed_dtoh_bytes;
    uint64_t unattributed_cpu_faults;
    const char *fault_stats_source; /* "cupti", "sim" or "none" (static string) */
    /* which steps collected the driver's counters (UVMRT_FAULT_SAMPLE) */
    uint64_t fault_sampled_steps;   /* steps that collected */
    int fault_sample_every;         /* as configured: 0 = auto, N = every Nth step */
    unsigned fault_sample_period;   /* the period in use (auto: the latest choice) */
    double fault_sample_overhead;   /* auto: measured cost of collecting, as a fraction of the
                                     * step time of steps that do not; < 0 until measured */
    uint64_t fault_records_lost;    /* records CUPTI dropped (its queue full) or uvmrt could not
                                     * keep (no memory): the driver's counters are short by these */
    uint64_t backend_errors;        /* backend (CUDA) failures that no call returned because the call
                                     * could complete without them (timing events, the clock anchor,
                                     * syncs at destroy): their timings read 0. Each kind (operation and
                                     * CUDA error name) is logged once, as a warning */
} uvmrt_summary_t;

uvmrt_status_t uvmrt_layer_stats_get(const uvmrt_context_t *ctx, int layer,
                                     uvmrt_phase_t phase, uvmrt_layer_stats_t *out);
/* step is 0-based; UVMRT_ERR_INVALID past the completed steps; UVMRT_ERR_NOT_FOUND
 * for a step older than the kept history (UVMRT_HISTORY), with a message naming
 * the oldest kept step (the summary still counts every step). */
uvmrt_status_t uvmrt_step_stats_get(const uvmrt_context_t *ctx, uint64_t step,
                                    uvmrt_step_stats_t *out);
uvmrt_status_t uvmrt_summary_get(const uvmrt_context_t *ctx, uvmrt_summary_t *out);

/* Writes a report: format "text" (a per-layer table), "json", "csv" (one row per
 * step, layer and phase) or "trace" (trace-event JSON for Perfetto / chrome://tracing);
 * see uvmrt-report(5). path "-" or NULL means stdout; files are written to a temporary file in
 * the same folder, then renamed, so a reader never sees half a report. */
uvmrt_status_t uvmrt_report_write(const uvmrt_context_t *ctx, const char *format,
                                  const char *path);

/* ------------------------------------------------------------------ memory summary */
/* Where a tensor's pages are now, by uvmrt's accounting. SPLIT: a move is in
 * flight (a prefetch or an eviction enqueued and not yet complete), so its
 * pages are partly on each side. */
typedef enum uvmrt_where {
    UVMRT_WHERE_DEVICE = 0,
    UVMRT_WHERE_HOST = 1,
    UVMRT_WHERE_SPLIT = 2
} uvmrt_where_t;
/* "device", "host", "split", or "?". */
const char *uvmrt_where_name(uvmrt_where_t where);

/* The mechanism the policy and plan give a tensor (bits; a layer's is the union
 * of its tensors'):
 *   MANAGED     policy none: plain managed memory, no hints
 *   DEMAND      faulted in on use (policy demand, or the prefetch policy's recording
 *               step and any step without a plan)
 *   RESIDENT    planned: stays on the GPU for the whole step, never moved
 *   PREFETCH    planned: prefetched ahead of its use
 *   WRITEBACK   planned: evicted by writing it back to the host
 *   DISCARD     planned: dropped when evicted (its contents are dead), no write-back
 *   HOST_HOMED  kept in host memory, read and written by the GPU over the link
 *   UNUSED      the plan's step never uses it */
#define UVMRT_MECH_MANAGED 0x01u
#define UVMRT_MECH_DEMAND 0x02u
#define UVMRT_MECH_RESIDENT 0x04u
#define UVMRT_MECH_PREFETCH 0x08u
#define UVMRT_MECH_WRITEBACK 0x10u
#define UVMRT_MECH_DISCARD 0x20u
#define UVMRT_MECH_HOST_HOMED 0x40u
#define UVMRT_MECH_UNUSED 0x80u
/* Writes the names of the set bits joined by '+' ("prefetch+discard"; "none" for
 * 0) into buf (len bytes, NUL-terminated, cut if too small); returns the length
 * of the whole text (like snprintf). buf may be NULL when len is 0. */
size_t uvmrt_mechanism_name(unsigned mechanism, char *buf, size_t len);

/* One live tensor, as uvmrt_memory_summary() sees it. */
typedef struct uvmrt_tensor_info {
    char name[128];            /* the tensor's name, cut at 127 bytes on a UTF-8 boundary */
    int id;                    /* allocation order (0, 1, ...; freed tensors keep their number) */
    int layer;                 /* owning layer, or -1 */
    uvmrt_role_t role;
    size_t size_bytes;         /* as requested */
    size_t footprint_bytes;    /* size rounded up to its alignment: what residency counts */
    uvmrt_where_t where;
    unsigned mechanism;        /* UVMRT_MECH_* bits */
} uvmrt_tensor_info_t;

/* Memory of the whole context, like torch.cuda.memory_stats(). Resident bytes
 * count footprints (uvmrt's own accounting; cudaMemGetInfo does not see managed
 * pages leave the GPU). */
typedef struct uvmrt_memory_stats {
    uint64_t budget_bytes;
    uint64_t resident_bytes;        /* now */
    uint64_t peak_resident_bytes;   /* since creation or the last uvmrt_memory_peak_reset() */
    uint64_t allocated_bytes;       /* footprints of the live tensors */
    uint64_t host_homed_bytes;      /* footprints of the tensors kept in host memory */
    uint64_t tensors;               /* live tensors */
    /* per role (uvmrt_role_t index) */
    uint64_t role_tensors[UVMRT_ROLE_COUNT];
    uint64_t role_size_bytes[UVMRT_ROLE_COUNT];      /* sizes as requested */
    uint64_t role_footprint_bytes[UVMRT_ROLE_COUNT];
    uint64_t role_resident_bytes[UVMRT_ROLE_COUNT];  /* footprints counted resident now */
} uvmrt_memory_stats_t;

/* Fills out[0..*n) with every live tensor in allocation order, like
 * torch.cuda.memory_summary(). *n receives the number of live tensors. out may
 * be NULL with cap 0 to ask for that number. When cap is smaller than it, the
 * call fails with UVMRT_ERR_INVALID, writes nothing to out and still sets *n.
 * UVMRT_ERR_INVALID (logged) for a NULL n, or a NULL out with cap > 0. */
uvmrt_status_t uvmrt_memory_summary(const uvmrt_context_t *ctx, uvmrt_tensor_info_t *out, size_t cap,
                                    size_t *n);
/* Current and peak resident bytes, with totals per role. */
uvmrt_status_t uvmrt_memory_stats_get(const uvmrt_context_t *ctx, uvmrt_memory_stats_t *out);
/* Starts the peak over from the bytes resident now (like
 * torch.cuda.reset_peak_memory_stats()): peak_resident_bytes of the summary, the
 * memory stats, the reports and the live monitor. The per-step peaks
 * (uvmrt_step_stats_t) are not changed. */
uvmrt_status_t uvmrt_memory_peak_reset(uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ live monitor */
/* Declares how many steps the program will run, so that uvmrt-top(1) can show an
 * ETA (0: unknown, the default). Any time; the last call counts. */
uvmrt_status_t uvmrt_context_set_total_steps(uvmrt_context_t *ctx, uint64_t steps);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_H */
