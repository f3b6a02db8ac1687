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
 *  - Tensor handles: a call that takes a context and a tensor looks the tensor up in
 *    that context's own table of the handles it made (a hash set of pointers, kept
 *    until the context is destroyed) before reading it, so a tensor freed twice, one
 *    of another context or of a destroyed context, or any other pointer gives
 *    UVMRT_ERR_NOT_FOUND (or the call's documented error) without touching the
 *    memory it points to. One limit of pointer handles: once a context is destroyed
 *    its tensors' memory may be reused, and a stale handle equal to a tensor the
 *    context made since is that tensor. The getters without a context
 *    (uvmrt_tensor_ptr, _size, _name...) read the handle: give them tensors of live
 *    contexts only.
 *  - Return values, by kind of function; every function below is of one kind:
 *    1. Calls that can fail (create, allocate, free a tensor, set, begin/end,
 *       write, load, save, choose, query into caller's structs) return a
 *       uvmrt_status_t: UVMRT_OK (0) or a negative error. On error nothing was
 *       changed, and a message naming the bad value was logged. Every function
 *       declared to return uvmrt_status_t is of this kind, and only those fail.
 *    2. Initialisers return void and cannot fail; a NULL struct: nothing happens.
 *       uvmrt_params_init, uvmrt_params_init_size, uvmrt_layer_call_init, uvmrt_adamw_init.
 *    3. Releasers that cannot fail return void; NULL is a no-op.
 *       uvmrt_context_destroy, uvmrt_profile_free. (uvmrt_tensor_free can fail,
 *       so it is of kind 1; a NULL tensor is a no-op there too.)
 *    4. Accessors of a handle return the value itself, never a status; they do
 *       not fail and log nothing. For a NULL handle they return a neutral value:
 *         uvmrt_context_policy       UVMRT_POLICY_PREFETCH
 *         uvmrt_context_backend      UVMRT_BACKEND_CUDA
 *         uvmrt_context_budget, uvmrt_context_external_bytes, uvmrt_layer_count,
 *         uvmrt_context_host_budget, uvmrt_context_host_external_bytes,
 *         uvmrt_choice_count, uvmrt_tensor_recomputes          0
 *         uvmrt_context_profile      the built-in "consumer-8g" (never NULL)
 *         uvmrt_choice_candidate_recompute   -1 (also for i out of range)
 *         uvmrt_tensor_ptr, uvmrt_tensor_name                  NULL
 *         uvmrt_tensor_size, uvmrt_tensor_is_resident, uvmrt_tensor_is_host_homed,
 *         uvmrt_tensor_recompute_flops                         0
 *         uvmrt_tensor_layer         -1
 *         uvmrt_tensor_role          UVMRT_ROLE_WORKSPACE
 *         uvmrt_tensor_placement     UVMRT_PLACE_AUTO
 *         uvmrt_tensor_tier          UVMRT_TIER_MEMORY
 *         uvmrt_context_has_disk_tier                          0
 *    5. Names return a static string, never NULL (not to be freed; "?",
 *       "unknown status" or "UVMRT_UNKNOWN" for a value outside the enum):
 *       uvmrt_status_str, uvmrt_status_name, uvmrt_policy_name, uvmrt_backend_name,
 *       uvmrt_role_name, uvmrt_phase_name, uvmrt_log_level_name, uvmrt_where_name,
 *       uvmrt_version_string, uvmrt_adamw_isa.
 *    6. Lookups in the library's own tables return the entry, which belongs to
 *       the library: uvmrt_profile_builtin (NULL past the last one),
 *       uvmrt_profile_find (NULL for an unknown or NULL name),
 *       uvmrt_version_number, uvmrt_abi_struct_size (0 for an unknown or NULL name).
 *    7. Formatters that cannot fail: uvmrt_context_print_config returns void
 *       (a NULL context or stream writes nothing); uvmrt_mechanism_name returns
 *       the length of the whole text, like snprintf.
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
/* sizeof the public struct named ("uvmrt_layer_call_t", ...) in the library actually
 * linked, or 0 for a name it does not know: a binding that mirrors the structs (the
 * Python package) checks its copies against the library it loaded. */
size_t uvmrt_abi_struct_size(const char *name);

/* ------------------------------------------------------------------ structs that grow */
/* Every public struct that may gain fields in a later version starts with
 * `size_t struct_size`: sizeof the struct as the caller's uvmrt.h declares it. New
 * fields are only ever appended, so a program built against an older header keeps
 * working with a newer library (the SONAME policy: uvmrt(3), README "Versions and ABI"):
 *  - a struct the program gives the library (uvmrt_params_t, uvmrt_layer_call_t,
 *    uvmrt_adamw_t, uvmrt_profile_t and uvmrt_profile_meta_t to uvmrt_profile_save) is
 *    read up to its struct_size; the fields past it take their defaults (those of the
 *    struct's init function, or 0);
 *  - a struct the library fills (uvmrt_summary_t, uvmrt_step_stats_t,
 *    uvmrt_layer_stats_t, uvmrt_memory_stats_t, uvmrt_tensor_info_t, uvmrt_choice_t)
 *    is written up to its struct_size only, which the library leaves as it was;
 *  - a struct_size of 0 (not set), one smaller than the field itself, or one larger
 *    than the library's own sizeof (a program built against a newer header than the
 *    library it runs with) fails with UVMRT_ERR_INVALID and a message naming the struct
 *    and both sizes; nothing is read or written.
 * Set struct_size with the struct's init function (uvmrt_params_init,
 * uvmrt_layer_call_init, uvmrt_adamw_init) or, for the others, UVMRT_STRUCT_INIT:
 *     uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
 *     uvmrt_summary_get(ctx, &sum);
 * In C a designated initialiser names it first:
 *     uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l0};
 * Profiles the library hands out (uvmrt_profile_find, uvmrt_profile_builtin,
 * uvmrt_context_profile, uvmrt_profile_load) carry the library's struct_size: a program
 * built against a newer header reads a field only when UVMRT_HAS_FIELD says it is there.
 * uvmrt_tensor_desc_t, uvmrt_use_t and uvmrt_knob_t are small array elements that stay
 * as they are: what a tensor or a call may need later comes with functions of its own
 * (uvmrt_tensor_set_placement, uvmrt_tensor_set_recompute). */
#ifdef __cplusplus /* C++11: every other field value-initialised, without a warning */
#define UVMRT_STRUCT_INIT(type) ([] { type v_{}; v_.struct_size = sizeof(type); return v_; }())
#else
#define UVMRT_STRUCT_INIT(type) {.struct_size = sizeof(type)}
#endif
/* 1 when *ptr (of the given type, e.g. from the library) holds field. */
#define UVMRT_HAS_FIELD(type, ptr, field) \
    ((ptr)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

/* ------------------------------------------------------------------ status */
/* One list yields the enum and the strings (uvmrt_status_str). */
#define UVMRT_STATUS_LIST(X)                                                     \
    X(UVMRT_OK, 0, "success")                                                    \
    X(UVMRT_ERR_INVALID, -1, "invalid argument")                                 \
    X(UVMRT_ERR_CONFIG, -2, "invalid configuration value")                       \
    X(UVMRT_ERR_NOMEM, -3, "out of memory")                                      \
    X(UVMRT_ERR_BUDGET, -4, "over the device or host budget")                   \
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
    UVMRT_BACKEND_SIM = 1,  /* deterministic model of a GPU (no GPU needed) */
    /* The default: cuda when a usable GPU is found (a driver, the device, and
     * concurrent managed access), otherwise sim, with one warn-level notice
     * saying why. uvmrt_context_backend() then returns the one chosen. */
    UVMRT_BACKEND_AUTO = 2
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

/* Lower-case names ("prefetch", "sim", "auto", "weight", "forward", "warn"), or "?". */
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
/* The numbers that describe a GPU, its link, and the host's memory and CPU, for the
 * sim backend and as the planner's reference (uvmrt-profile(5) documents each one,
 * and the sources of the built-in estimates). */
typedef struct uvmrt_profile {
    size_t struct_size;           /* sizeof(uvmrt_profile_t): see "structs that grow" */
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
    /* Host memory as a resource shared by the CPU and the link's DMA (0: not modelled,
     * e.g. an estimated profile with no measurement; see uvmrt-profile(5)). */
    double pinned_bidir_bps;      /* pinned copies both ways at once, total of the two */
    double host_mem_bps;          /* host memory bytes/s the CPU alone reaches (STREAM-like triad) */
    double host_mem_shared_bps;   /* host memory bytes/s in all (CPU plus link DMA) while both run */
    double cpu_adamw_params_per_s; /* fp32 AdamW on the CPU (28 bytes/param), link idle */
    double gpu_bf16_flops;        /* bf16 GEMM FLOP/s measured by uvmrt-calibrate (cuBLAS 8192^3) */
    /* Host memory bytes/s the CPU's work reaches while the link copies one way at its
     * full (pinned) rate, the other way idle, in host_mem_bps's units (0: not measured;
     * then only host_mem_shared_bps limits the CPU beside the link). */
    double host_mem_cpu_beside_h2d_bps;
    double host_mem_cpu_beside_d2h_bps;
    /* The disk tier's directory (UVMRT_SPILL_DIR), measured by uvmrt-calibrate --spill-dir
     * (0: not measured): large aligned transfers between host memory and a file, O_DIRECT
     * where the filesystem allows it, through the engine the tier uses there. */
    double disk_read_bps;         /* file to host memory */
    double disk_write_bps;        /* host memory to file */
    int disk_io_uring;            /* 1: io_uring worked (0: blocked, or not measured) */
} uvmrt_profile_t;

/* Built-in profile i (0, 1, ... in a fixed order), or NULL past the last one:
 *     for (size_t i = 0; (p = uvmrt_profile_builtin(i)) != NULL; i++) ...
 * (one at a time, not as an array, because uvmrt_profile_t may grow). */
const uvmrt_profile_t *uvmrt_profile_builtin(size_t i);
/* A built-in profile by name, or NULL. */
const uvmrt_profile_t *uvmrt_profile_find(const char *name);
/* Profile files (JSON, uvmrt-profile(5)) are read with uvmrt_profile_load and
 * written with uvmrt_profile_save, declared at the end of this header. */

/* ------------------------------------------------------------------ params */
/* Context parameters. Always start from uvmrt_params_init(). Unless ignore_env is
 * set, the UVMRT_* environment variables below override these fields at context
 * creation, so a built program can be steered without recompiling:
 *
 *   UVMRT_DEVICE          device ordinal                         (default 0)
 *   UVMRT_BACKEND         auto | cuda | sim                       (default auto)
 *   UVMRT_PROFILE         auto | NAME | FILE: the device profile, a built-in name or a
 *                         profile file (a value containing '/' or ending in .json,
 *                         uvmrt-profile(5), e.g. written by uvmrt-calibrate): the sim
 *                         backend's model, and on cuda the planner's model of the GPU
 *                         (uvmrt_choose's rehearsals, records). auto: consumer-8g on
 *                         sim; on cuda the GPU's own built-in profile (matched by
 *                         name: h200, rtx4090, ...), else the consumer estimate of its
 *                         memory size (h200 above 28 GiB), with a warning that says so
 *                                                                  (default auto)
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
 *   UVMRT_SPILL_DIR       none | DIR: an existing directory (checked at creation) where
 *                         tensors put on the disk tier (uvmrt_tensor_set_tier) live in
 *                         files of a private subdirectory   (default none)
 *   UVMRT_RECORD          none | FILE: the prefetch policy's recorded step written as JSON
 *                         whenever it is (re)recorded and, on cuda, again after each of
 *                         the first three planned steps, with their measured call times,
 *                         for uvmrt-plan(1) (which documents the format); a failed write
 *                         only warns                               (default none)
 *   UVMRT_HOST_BUDGET     SIZE | auto | none: host memory the plan may need (tensors not on the
 *                         GPU, staging, those on the disk tier as its window of copies,
 *                         and uvmrt_context_set_host_external_bytes);
 *                         allocations and plans that need more fail with
 *                         UVMRT_ERR_BUDGET. auto: the machine's memory (the cgroup's
 *                         limit when one is set: memory.max, v1 memory.limit_in_bytes;
 *                         else /proc/meminfo MemTotal) less a reserve of 10% of it,
 *                         at least 2 GiB (half of it on a machine of 4 GiB or less);
 *                         on the sim backend, auto sets no limit (the modelled machine
 *                         is not this one): give a size to model one; none: no
 *                         limit                                    (default auto)
 *
 * An invalid value makes uvmrt_context_create() fail with UVMRT_ERR_CONFIG and a
 * message naming the variable and what was expected.
 */
typedef struct uvmrt_params {
    size_t struct_size;            /* sizeof(uvmrt_params_t); set by uvmrt_params_init */
    int device;                    /* CUDA device ordinal, >= 0 */
    uvmrt_backend_kind_t backend;
    const char *profile;           /* sim profile name or profile file path (UVMRT_PROFILE); copied */
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
    uint64_t host_budget_bytes;    /* host bytes the plan may need (UVMRT_HOST_BUDGET); 0 = auto,
                                      UINT64_MAX = none (no limit) */
    const char *spill_dir;         /* the disk tier's directory (UVMRT_SPILL_DIR); copied;
                                      NULL = "none" */
} uvmrt_params_t;

void uvmrt_params_init(uvmrt_params_t *params);
/* The same for a struct of size bytes (the caller's sizeof): every field the library
 * knows set to its default, bytes past them zeroed, struct_size = size. uvmrt_params_init
 * is this with the caller's sizeof, through the macro below; the function of that name
 * (for programs built before the macro) fills the struct as libuvmrt.so.1's first
 * header declared it. */
void uvmrt_params_init_size(uvmrt_params_t *params, size_t size);
#define uvmrt_params_init(params) uvmrt_params_init_size((params), sizeof *(params))

/* ------------------------------------------------------------------ context */
/* Creates a context: one GPU (or sim model), one budget, one policy.
 * params may be NULL (defaults). On failure *out is NULL and the status says why.
 * Backend auto (the default) runs on sim, with one warn-level notice naming why,
 * when no usable GPU is found. An explicit backend cuda with no GPU (no CUDA in
 * this build, no driver, no device): UVMRT_ERR_NO_DEVICE with an error-level
 * message naming what was found (the caller may retry with the sim backend);
 * a device without concurrent managed access: UVMRT_ERR_UNSUPPORTED. */
uvmrt_status_t uvmrt_context_create(const uvmrt_params_t *params, uvmrt_context_t **out);

/* Frees every tensor still allocated, writes the report named by UVMRT_REPORT /
 * params.report, and releases the context. NULL is a no-op. */
void uvmrt_context_destroy(uvmrt_context_t *ctx);

/* Writes the effective configuration, one "UVMRT_NAME=value  (source)" line per
 * setting, plus the backend and the resolved budget. */
void uvmrt_context_print_config(const uvmrt_context_t *ctx, FILE *out);

/* The resolved settings; the backend is the one opened (cuda or sim, never auto). */
uvmrt_policy_t uvmrt_context_policy(const uvmrt_context_t *ctx);
uvmrt_backend_kind_t uvmrt_context_backend(const uvmrt_context_t *ctx);
uint64_t uvmrt_context_budget(const uvmrt_context_t *ctx);
/* The resolved host budget (UVMRT_HOST_BUDGET / params.host_budget_bytes; auto: the
 * machine's memory less the reserve, see UVMRT_HOST_BUDGET); 0: no limit (auto on sim). */
uint64_t uvmrt_context_host_budget(const uvmrt_context_t *ctx);
/* This machine's host memory as UVMRT_HOST_BUDGET=auto reads it, without a context (for
 * a planner, uvmrt-plan(1)): *total_bytes, the smallest of /proc/meminfo's MemTotal and
 * the limits of this process's cgroups (v2 memory.max, v1 memory.limit_in_bytes, its own
 * and its parents'); *budget_bytes, that less the reserve (10%, at least 2 GiB, at most
 * half). Either pointer may be NULL. UVMRT_ERR_IO when /proc/meminfo has no MemTotal
 * (nothing is written). Any thread. */
uvmrt_status_t uvmrt_host_memory(uint64_t *total_bytes, uint64_t *budget_bytes);
/* The device profile in use: the sim backend's model, or on cuda the planner's model of
 * the GPU (the profile UVMRT_PROFILE names; auto: the GPU's built-in profile, by name,
 * else the estimate nearest its memory size). Never NULL. A profile file's copy
 * belongs to the context: valid until uvmrt_context_destroy. */
const uvmrt_profile_t *uvmrt_context_profile(const uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ layers */
/* Declares a layer (a unit of work the trainer brackets with begin/end). Layers
 * are numbered 0, 1, 2... in declaration order; *out_layer receives the number.
 * The name is copied and appears in reports (bytes that are not valid UTF-8 shown
 * as U+FFFD; see uvmrt-report(5)). */
uvmrt_status_t uvmrt_layer_add(uvmrt_context_t *ctx, const char *name, int *out_layer);
/* Number of declared layers. */
int uvmrt_layer_count(const uvmrt_context_t *ctx);
/* The trainer's own measurement of the CPU work (uvmrt_layer_call_t.host_bytes) of
 * layer's phase in a recent step: ns the CPU took for it, as it ran beside the GPU and
 * the link (the runtime cannot time a CPU thread it does not drive). The context keeps
 * the latest per (layer, phase): the recorded step (UVMRT_RECORD) carries it as the
 * call's host_ns, and a review's re-plan (uvmrt_choice_review) times that work by it,
 * and the CPU work of layers without a measurement by the measured calls' median
 * slowdown over the model's time alone. Any time, from the thread that drives the
 * context. UVMRT_ERR_INVALID for a layer not declared, a bad phase, or ns 0 or over
 * 1e18; the context is then as before. */
uvmrt_status_t uvmrt_host_work_measured(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t ns);

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
 * allocated and out[] is untouched. Not allowed inside a step. UVMRT_ERR_BUDGET,
 * logged with the bytes needed on the GPU and the host and what would fit, when the
 * live tensors with these would need more host memory than the host budget
 * (UVMRT_HOST_BUDGET): their footprints beyond the device budget (the choice's plan
 * budget), plus uvmrt_context_set_host_external_bytes. */
uvmrt_status_t uvmrt_tensors_alloc(uvmrt_context_t *ctx, size_t n,
                                   const uvmrt_tensor_desc_t *descs,
                                   uvmrt_tensor_t **out);
/* One tensor (its own arena). */
uvmrt_status_t uvmrt_tensor_alloc(uvmrt_context_t *ctx, const uvmrt_tensor_desc_t *desc,
                                  uvmrt_tensor_t **out);
/* Frees a tensor; its arena is released when its last tensor is freed. Freeing a
 * tensor twice, one of another context or of a destroyed context gives
 * UVMRT_ERR_NOT_FOUND (the handle is looked up before it is read). NULL: no-op.
 * Not allowed inside a step. */
uvmrt_status_t uvmrt_tensor_free(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor);

/* The managed pointer (valid on host and device; while the tensor is placed
 * UVMRT_PLACE_PINNED, its page-locked copy's address, valid on both too), size, name,
 * layer and role. */
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
    UVMRT_PLACE_AUTO = 0,  /* uvmrt moves it as the policy plans (the default) */
    UVMRT_PLACE_HOST = 1,  /* it lives in host memory; the GPU reads and writes it over the link */
    UVMRT_PLACE_PINNED = 2 /* as HOST, in page-locked host memory of its own (a new address) */
} uvmrt_placement_t;

/* Places a tensor. UVMRT_PLACE_HOST: preferred location host, mapped for the GPU
 * (cudaMemAdvise), moved to the host now (stream ordered after its last use);
 * uvmrt never migrates it again and its uses never count toward the budget.
 * For data whose next consumer is the CPU (gradients for a CPU optimizer: the
 * GPU writes them at ~52 GB/s on the H200, against ~13 GB/s for migrating them
 * back) or that only the CPU touches. Back to UVMRT_PLACE_AUTO: the policy moves
 * it again. UVMRT_PLACE_PINNED: as HOST, but its contents move to page-locked host
 * memory of its own (cudaHostAlloc, mapped), and uvmrt_tensor_ptr returns that new
 * address (valid on the host and the GPU) until it is placed back, when they move back
 * to its managed address: on the H200 a GPU write into host-resident managed memory holds
 * the work queued after it on every stream, a write into page-locked memory does not
 * (bench/probes/copy_contention.py). Its managed slot's pages are dropped once the
 * contents are copied (on CUDA 12, which cannot drop them, they stay on the host). Not
 * on the disk tier. Not allowed inside a step; on failure the tensor is as it was. */
uvmrt_status_t uvmrt_tensor_set_placement(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor,
                                          uvmrt_placement_t placement);
uvmrt_placement_t uvmrt_tensor_placement(const uvmrt_tensor_t *tensor);

typedef enum uvmrt_tier {
    UVMRT_TIER_MEMORY = 0, /* its contents live in memory (the default) */
    UVMRT_TIER_DISK = 1,   /* they live in a file of UVMRT_SPILL_DIR, in host memory only around its uses */
    /* uvmrt_tensor_set_tier only: on the disk tier with every byte zero, its contents
     * now dropped (a new AdamW moment): the file's reserved space reads as zeros, so
     * nothing is written */
    UVMRT_TIER_DISK_ZERO = 2
} uvmrt_tier_t;

/* Puts a host-placed tensor (uvmrt_tensor_set_placement(UVMRT_PLACE_HOST) first) on the
 * disk tier, e.g. the fp32 master weights and AdamW moments of a CPU optimizer: its
 * contents are written now to a file (0600, space reserved with fallocate) in a private
 * subdirectory of UVMRT_SPILL_DIR, and from then on read back into its host memory
 * when a layer call that uses it begins (not for a use that only writes it: it
 * overwrites every byte) and written back when the call ends (after
 * the call's stream; CPU work on it must be done by uvmrt_layer_end), on CPU threads
 * (io_uring, or a pool of pread/pwrite threads where io_uring is blocked; O_DIRECT,
 * or buffered where the filesystem refuses it; the choice is logged at info). Once a
 * write-back has completed its host pages are given back (discarded: on sim, and on
 * cuda from CUDA 13; a read of them outside its calls gives indeterminate values); on
 * CUDA 12, which cannot discard, the managed pages stay and no host memory is saved.
 * Where they go back, the host budget counts the tier's tensors (at allocation and in the
 * plan) as the copies it holds at once: the two largest layers' tier bytes, a window
 * that uvmrt_layer_begin keeps by waiting for the oldest write-backs (so allocate a
 * layer at a time and put its state on the tier before the next). In a rehearsal
 * (uvmrt_choose) it makes no files and the model takes its bytes at the profile's
 * disk rates (disk_read_bps, disk_write_bps; one drive, through host memory). The
 * counters spill_read_bytes and spill_write_bytes count the bytes per (layer, phase)
 * and step. Back to UVMRT_TIER_MEMORY: the contents are read
 * back and the file removed (UVMRT_ERR_BUDGET, nothing changed, when that would pass
 * the host budget). Files are removed at uvmrt_tensor_free and destroy, and a
 * later run removes those of a run that was killed. Not allowed inside a step
 * (UVMRT_ERR_STATE, also for a tensor not placed on the host); UVMRT_ERR_CONFIG without
 * UVMRT_SPILL_DIR; UVMRT_ERR_IO (logged, naming the file, the bytes needed and free)
 * when the disk lacks the space or the write fails; nothing changed then. A read or
 * write that fails inside a step is UVMRT_ERR_IO from uvmrt_layer_begin (the call is
 * not opened; its file is unchanged) or, for a write-back, from a later
 * uvmrt_layer_begin or uvmrt_step_end (the contents stay in host memory and are
 * written again after the next use), logged with the tensor, its layer and the file:
 * nothing is lost. */
uvmrt_status_t uvmrt_tensor_set_tier(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor, uvmrt_tier_t tier);
uvmrt_tier_t uvmrt_tensor_tier(const uvmrt_tensor_t *tensor);
/* 1 when the context has a disk tier (a spill directory: UVMRT_SPILL_DIR or
 * params.spill_dir, not "none"; for a rehearsal's model context, when the context it
 * models has one), so that uvmrt_tensor_set_tier(UVMRT_TIER_DISK) can be asked; 0
 * otherwise (also for NULL). */
int uvmrt_context_has_disk_tier(const uvmrt_context_t *ctx);

/* Declares that the trainer can recompute the tensor (an activation its forward writes
 * and its backward reads) instead of keeping it, at `flops` of GPU work (for an
 * activation: its producer's forward again); 0 withdraws the declaration. Then
 * uvmrt_choose(3) also chooses which of the declared tensors recompute, by rehearsing
 * them in the order of the device memory each frees per flop of recompute (the most
 * first; ties: the earliest layer first, whose activations wait longest for their
 * backward, then allocation order), and uvmrt_tensor_recomputes() answers for each.
 * The trainer carries a recompute out in the backward call that needs the contents,
 * adding `flops` to that call's: either into the tensor itself, declaring that use
 * WRITE without READ (the contents are then dead from the forward on, so the plan
 * drops it instead of writing it back), or into a workspace the recomputing tensors
 * share, leaving the tensor unused (it then holds no device memory; keep it
 * allocated, so that the order stays the same). Not allowed inside a step. UVMRT_ERR_INVALID for flops negative or not
 * finite, UVMRT_ERR_NOT_FOUND for a tensor that is not a live one of ctx. */
uvmrt_status_t uvmrt_tensor_set_recompute(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor, double flops);
/* The flops declared by uvmrt_tensor_set_recompute (0: not recomputable). */
double uvmrt_tensor_recompute_flops(const uvmrt_tensor_t *tensor);
/* 1 when the last choice (uvmrt_choose, or a review's) has the trainer recompute this
 * tensor; 0 for a tensor not declared recomputable, without a choice, or when the
 * choice keeps it. The same answer for every call until the next choice, as long as
 * the declared tensors stay the same. */
int uvmrt_tensor_recomputes(const uvmrt_context_t *ctx, const uvmrt_tensor_t *tensor);

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
    size_t struct_size;        /* sizeof(uvmrt_layer_call_t); set by uvmrt_layer_call_init */
    int layer;
    uvmrt_phase_t phase;
    uvmrt_stream_t stream;     /* the stream the layer's work runs on */
    const uvmrt_use_t *uses;   /* extra uses; may be NULL when n_uses is 0 */
    size_t n_uses;
    int no_default_uses;       /* 1: only uses[] */
    double flops;              /* sim: work of this call, timed at the profile's FLOP/s */
    uint64_t sim_duration_ns;  /* sim: explicit duration; overrides flops when > 0 */
    /* CPU work of this call: host-memory bytes the CPU reads plus writes for it (an
     * fp32 AdamW: 28 per parameter). For a call whose work runs on the CPU (e.g. an
     * optimizer step on host-placed tensors) give it no_default_uses, as uses the
     * host-placed tensors it reads and writes (or none), and a stream of its own (any
     * handle: on sim a stream is a timeline) so that it runs beside the GPU's streams.
     * Its uses of host-placed tensors are host memory, not link traffic (host_bytes counts
     * them); they let the disk tier read a tensor back before the call and write it
     * after. sim: the work takes host_bytes at the profile's
     * host_mem_bps, and while it overlaps link transfers in model time the two share
     * host memory (host_mem_shared_bps in all; uvmrt-profile(5)); with a profile
     * without those figures it adds no time. cuda: only declared (the CPU's real work
     * takes the real time). UVMRT_ERR_INVALID when it would take over 1e18 ns. */
    uint64_t host_bytes;
    /* A stream whose work so far this call must follow (NULL: none, the default): uvmrt
     * records an event on it and makes call->stream wait for it, so the model (sim, and
     * uvmrt_choose's rehearsals) orders the call after that work, e.g. a CPU call after
     * the GPU backward that wrote its gradient (after = the compute stream), or a forward
     * after the CPU's update of its weights (after = the CPU call's stream). On cuda it
     * is a real event wait; the trainer still synchronises its own CPU thread. When this
     * call's layer has CPU work (host_bytes) on that stream, it follows the latest of
     * that instead (its own update, not the CPU's later layers'); and CPU work on a
     * stream that calls follow does not hold uvmrt_step_end: it goes on into the next
     * step, where those calls wait for it. */
    uvmrt_stream_t after;
    /* The CPU work's measured time (host_bytes > 0), e.g. from a record: sim: when > 0,
     * the work takes exactly host_ns (it was measured beside the GPU and the link, so
     * no contention is added) and books host_bytes / host_ns of host memory, which link
     * transfers beside it share; cuda: ignored (uvmrt_host_work_measured tells the
     * runtime what the real CPU took). UVMRT_ERR_INVALID over 1e18 ns. */
    uint64_t host_ns;
    /* Device-memory bytes the call's memory-bound kernels read plus write (layer norms,
     * elementwise, reductions, copies; not the matmuls that flops counts). sim: the
     * call's work is flops at the profile's FLOP/s plus hbm_bytes at its hbm_bps (the
     * kernels of one stream run one after another), unless sim_duration_ns is given;
     * cuda: declared only, as the work a review compares with the measured time.
     * UVMRT_ERR_INVALID when flops and hbm_bytes together take over 1e18 ns. */
    uint64_t hbm_bytes;
} uvmrt_layer_call_t;

/* Fills *call for one layer call: layer, phase and stream as given, struct_size, every
 * other field zero (no extra uses, default uses on, no sim timing). For C++ (and C89),
 * where the compound literal `&(uvmrt_layer_call_t){.struct_size = sizeof(uvmrt_layer_call_t),
 * .layer = l, ...}` used in the examples does not compile:
 *     uvmrt_layer_call_t call;
 *     uvmrt_layer_call_init(&call, l0, UVMRT_PHASE_FORWARD, stream);
 *     call.flops = 2.0 * rows * in * out;   // optional fields afterwards
 *     uvmrt_layer_begin(ctx, &call);
 * NULL call: nothing happens. */
void uvmrt_layer_call_init(uvmrt_layer_call_t *call, int layer, uvmrt_phase_t phase,
                           uvmrt_stream_t stream);

/* Starts a step. The first step is recorded; later steps follow the plan. */
uvmrt_status_t uvmrt_step_begin(uvmrt_context_t *ctx);
/* Ends a step: waits for the step's compute streams and records its time. */
uvmrt_status_t uvmrt_step_end(uvmrt_context_t *ctx);

/* Opens a layer call: makes every tensor it uses resident (by plan, or now) and
 * makes call->stream wait for them. Only inside a step, one layer open at a time.
 * UVMRT_ERR_BUDGET (naming the layer, its working set and the budget) when the
 * call's tensors cannot fit in the budget. UVMRT_ERR_INVALID for a NULL call,
 * flops that are negative, NaN or infinite, or a modelled duration (flops and
 * hbm_bytes at the profile's rates, or sim_duration_ns) over 1e18 ns. */
uvmrt_status_t uvmrt_layer_begin(uvmrt_context_t *ctx, const uvmrt_layer_call_t *call);
/* Closes the open layer call: records its end on its stream, and issues the
 * prefetches (and the evictions that make room) planned for the layers ahead. */
uvmrt_status_t uvmrt_layer_end(uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ statistics */
/* The counters, one line each. This list generates the fields of the three stats
 * structs below (in this order), the library's adding and summing of them, and
 * their columns in the text, JSON and CSV reports (uvmrt-report(5)): a counter
 * added here appears everywhere. Programs may expand it too, e.g. to print every
 * counter of a uvmrt_layer_stats_t by name:
 *     #define SHOW(name, ...) printf("%s %llu\n", #name, (unsigned long long)s.name);
 *     UVMRT_COUNTERS(SHOW)
 *
 * X(name, tag, source, step, summary, csv, text_rank, text_label, text_unit, text_width, text_scale)
 *   name     a uint64_t field of uvmrt_layer_stats_t (per layer and phase, summed over
 *            all steps) and its key in the JSON and CSV reports
 *   tag      the library's internal name for it (STAT_<tag> or FC_<tag>)
 *   source   CALL: counted once per layer call; OWN: uvmrt's own accounting;
 *            DRIVER: what the driver reported (CUPTI unified-memory counters on cuda,
 *            the model on sim; all 0 when fault_stats_source is "none"), for records
 *            whose address is in a uvmrt tensor and whose start time falls in the
 *            call's span
 *   step     1: also a field of uvmrt_step_stats_t (that step's sum over its calls)
 *   summary  1: also a field of uvmrt_summary_t (the sum over every layer and phase)
 *   csv      1: a column of the CSV report
 *   text_*   its column in the text table: rank (columns go left to right by rank;
 *            0: not shown), header, unit line, width, and scale (COUNT: as is; MIB:
 *            bytes shown in MiB; MS: nanoseconds shown in milliseconds)
 * Bytes are logical bytes of the tensors concerned. */
#define UVMRT_COUNTERS(X)                                                                                      \
    /* layer calls */                                                                                          \
    X(calls,                      CALLS,                CALL,   0, 0, 1,  10, "calls",    "",       6, COUNT)  \
    /* moved to the GPU for this call, ahead or on demand */                                                   \
    X(prefetch_bytes,             PREFETCH,             OWN,    1, 1, 1,  20, "prefetch", "MiB",   10, MIB)    \
    /* written back to host to make room for this call */                                                      \
    X(evict_bytes,                EVICT,                OWN,    1, 1, 1,  30, "evict",    "MiB",    9, MIB)    \
    /* dropped without write-back (dead data) for this call */                                                 \
    X(discard_bytes,              DISCARD,              OWN,    1, 1, 1,  40, "discard",  "MiB",    9, MIB)    \
    /* demand-fault groups: the sim model's on sim, uvmrt's estimate on cuda */                                \
    X(fault_count,                FAULT_COUNT,          OWN,    1, 1, 1,  70, "faults",   "groups", 8, COUNT)  \
    /* bytes of those faults */                                                                                \
    X(fault_bytes,                FAULT_BYTES,          OWN,    1, 1, 1,  80, "fault",    "MiB",    9, MIB)    \
    /* read over the link from host-homed tensors */                                                           \
    X(remote_read_bytes,          REMOTE_READ,          OWN,    1, 1, 1,  50, "rd",       "MiB",    8, MIB)    \
    /* written over the link to host-homed tensors */                                                          \
    X(remote_write_bytes,         REMOTE_WRITE,         OWN,    1, 1, 1,  60, "wr",       "MiB",    8, MIB)    \
    /* time the layer's stream waited for its prefetches */                                                    \
    X(wait_ns,                    WAIT_NS,              OWN,    1, 0, 1, 140, "wait",     "ms",     9, MS)     \
    /* from the end of the wait to the end of the layer's work */                                              \
    X(duration_ns,                DURATION_NS,          OWN,    0, 0, 1, 150, "time",     "ms",     9, MS)     \
    /* GPU page-fault groups */                                                                                \
    X(gpu_faults,                 GPU_FAULTS,           DRIVER, 1, 1, 1,  90, "gpu",      "faults", 9, COUNT)  \
    /* host to device, cause: fault (coherence) or unknown */                                                  \
    X(fault_htod_bytes,           FAULT_HTOD,           DRIVER, 1, 1, 1, 100, "fault-in", "MiB",    9, MIB)    \
    /* host to device, cause: user prefetch (uvmrt's own) */                                                   \
    X(prefetch_htod_bytes,        PREFETCH_HTOD,        DRIVER, 1, 1, 1, 110, "prefetch", "MiB",    9, MIB)    \
    /* host to device, cause: driver prefetch / access counters */                                             \
    X(driver_prefetch_htod_bytes, DRIVER_PREFETCH_HTOD, DRIVER, 1, 1, 1, 120, "drv-pf",   "MiB",    9, MIB)    \
    /* device to host, any cause (write-backs, driver evictions) */                                            \
    X(evict_dtoh_bytes,           EVICT_DTOH,           DRIVER, 1, 1, 1, 130, "to-host",  "MiB",    9, MIB)    \
    /* thrashing records */                                                                                    \
    X(thrashing,                  THRASHING,            DRIVER, 1, 1, 1,   0, "",         "",       0, COUNT)  \
    /* throttling records */                                                                                   \
    X(throttling,                 THROTTLING,           DRIVER, 1, 1, 1,   0, "",         "",       0, COUNT)  \
    /* remote-map records */                                                                                   \
    X(remote_map,                 REMOTE_MAP,           DRIVER, 1, 1, 1,   0, "",         "",       0, COUNT)  \
    /* CPU page faults (records counted) */                                                                    \
    X(cpu_faults,                 CPU_FAULTS,           DRIVER, 1, 1, 1,   0, "",         "",       0, COUNT)  \
    /* calls in steps that collected the driver's counters (UVMRT_FAULT_SAMPLE): the                         \
     * DRIVER counters cover these */                                                                          \
    X(sampled_calls,              SAMPLED_CALLS,        CALL,   0, 0, 0,   0, "",         "",       0, COUNT)  \
    /* read from the disk tier into host memory for this call (uvmrt_tensor_set_tier) */                      \
    X(spill_read_bytes,           SPILL_READ,           LATE,    1, 1, 1,   0, "",         "",       0, MIB)    \
    /* written back to the disk tier after this call */                                                        \
    X(spill_write_bytes,          SPILL_WRITE,          LATE,    1, 1, 1,   0, "",         "",       0, MIB)

/* Helpers for expanding UVMRT_COUNTERS: UVMRT__IF_<0|1>(code) keeps code when 1;
 * UVMRT__<SOURCE>_<source>(code) keeps code when source is SOURCE. */
#define UVMRT__IF_0(...)
#define UVMRT__IF_1(...) __VA_ARGS__
#define UVMRT__OWN_CALL(...)
#define UVMRT__OWN_OWN(...) __VA_ARGS__
#define UVMRT__OWN_DRIVER(...)
#define UVMRT__DRIVER_CALL(...)
#define UVMRT__DRIVER_OWN(...)
#define UVMRT__DRIVER_DRIVER(...) __VA_ARGS__
/* LATE: uvmrt's own counters added after the first ABI (libuvmrt.so.1): they come at
 * the end of uvmrt_step_stats_t and uvmrt_summary_t, so those structs only grow */
#define UVMRT__OWN_LATE(...)
#define UVMRT__DRIVER_LATE(...)
#define UVMRT__LATE_CALL(...)
#define UVMRT__LATE_OWN(...)
#define UVMRT__LATE_DRIVER(...)
#define UVMRT__LATE_LATE(...) __VA_ARGS__
#define UVMRT__FIELD(name, tag, src, step, sum, ...) uint64_t name;
#define UVMRT__STEP_FIELD_OF(want, name, tag, src, step) UVMRT__IF_##step(UVMRT__##want##_##src(uint64_t name;))
#define UVMRT__STEP_OWN_FIELD(name, tag, src, step, sum, ...) UVMRT__STEP_FIELD_OF(OWN, name, tag, src, step)
#define UVMRT__STEP_DRIVER_FIELD(name, tag, src, step, sum, ...) UVMRT__STEP_FIELD_OF(DRIVER, name, tag, src, step)
#define UVMRT__SUM_FIELD_OF(want, name, tag, src, sum) UVMRT__IF_##sum(UVMRT__##want##_##src(uint64_t name;))
#define UVMRT__SUM_OWN_FIELD(name, tag, src, step, sum, ...) UVMRT__SUM_FIELD_OF(OWN, name, tag, src, sum)
#define UVMRT__SUM_DRIVER_FIELD(name, tag, src, step, sum, ...) UVMRT__SUM_FIELD_OF(DRIVER, name, tag, src, sum)
#define UVMRT__STEP_LATE_FIELD(name, tag, src, step, sum, ...) UVMRT__STEP_FIELD_OF(LATE, name, tag, src, step)
#define UVMRT__SUM_LATE_FIELD(name, tag, src, step, sum, ...) UVMRT__SUM_FIELD_OF(LATE, name, tag, src, sum)

/* Counters of one (layer, phase), summed over all steps: every UVMRT_COUNTERS entry.
 * Prefetches and the evictions that made room for them count for the call that
 * needs the data, even when issued earlier; the DRIVER counters are per time span
 * and cover the calls in sampled_calls (see uvmrt-report(5)). */
typedef struct uvmrt_layer_stats {
    size_t struct_size;        /* sizeof(uvmrt_layer_stats_t): set it, see "structs that grow" */
    UVMRT_COUNTERS(UVMRT__FIELD)
} uvmrt_layer_stats_t;

/* One step: the entries of UVMRT_COUNTERS with step = 1, summed over the step's
 * calls, and what only a step has. */
typedef struct uvmrt_step_stats {
    size_t struct_size;        /* sizeof(uvmrt_step_stats_t): set it, see "structs that grow" */
    uint64_t step_ns;
    UVMRT_COUNTERS(UVMRT__STEP_OWN_FIELD)      /* prefetch_bytes ... wait_ns */
    uint64_t peak_resident_bytes;
    uint64_t h2d_busy_ns;      /* time the copy stream spent prefetching to the GPU */
    uint64_t d2h_busy_ns;      /* time the copy stream spent evicting */
    UVMRT_COUNTERS(UVMRT__STEP_DRIVER_FIELD)   /* gpu_faults ... cpu_faults */
    int fault_sampled;         /* 1: this step collected the driver's counters; 0: they read 0 */
    UVMRT_COUNTERS(UVMRT__STEP_LATE_FIELD)     /* spill_read_bytes, spill_write_bytes */
} uvmrt_step_stats_t;

/* The whole run: the entries of UVMRT_COUNTERS with summary = 1, summed over every
 * layer and phase, and what only the run has. */
typedef struct uvmrt_summary {
    size_t struct_size;        /* sizeof(uvmrt_summary_t): set it, see "structs that grow" */
    uint64_t steps;            /* completed steps */
    uint64_t budget_bytes;
    uint64_t resident_bytes;   /* now, by uvmrt's accounting */
    uint64_t peak_resident_bytes;
    uint64_t allocated_bytes;  /* sum of tensor sizes */
    UVMRT_COUNTERS(UVMRT__SUM_OWN_FIELD)       /* prefetch_bytes ... remote_write_bytes */
    uint64_t host_homed_bytes;   /* footprints of the tensors the plan keeps in host memory */
    uint64_t plans_built;      /* prefetch policy: times a plan was (re)built */
    UVMRT_COUNTERS(UVMRT__SUM_DRIVER_FIELD)    /* the driver's counters attributed to layer calls */
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
    uint64_t output_errors;         /* files the context was to write during the run and could not
                                     * (UVMRT_RECORD's recorded step), each logged as an error: a
                                     * program that exits 0 only when its outputs are written checks it.
                                     * (UVMRT_REPORT and UVMRT_TRACE are written at destroy; their
                                     * failures are logged as errors.) */
    /* host memory (uvmrt_memory_stats_t's fields of the same names) */
    uint64_t host_bytes, peak_host_bytes, host_budget_bytes, host_external_bytes, plan_host_bytes;
    UVMRT_COUNTERS(UVMRT__SUM_LATE_FIELD)      /* spill_read_bytes, spill_write_bytes */
} uvmrt_summary_t;

/* The three calls copy into *out (caller-owned, its struct_size set); UVMRT_ERR_INVALID,
 * logged, for a NULL out, a bad out->struct_size or an index out of range. */
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
 * see uvmrt-report(5). path "-" or NULL means stdout (as "-" does in UVMRT_REPORT and
 * UVMRT_TRACE). What is at path decides the rest:
 *  - nothing, or a regular file: written to a temporary file in the same folder, then
 *    renamed onto path, so a reader never sees half a report; a replaced file keeps
 *    its permission bits, a new one gets 0666 less the umask (never changed);
 *  - a symbolic link to a regular file: its target is replaced that way (the temporary
 *    file goes in the target's folder) and the link stays;
 *  - a FIFO or a character device (or a link to one): written in place, never replaced
 *    (UVMRT_ERR_IO at once when a FIFO has no reader);
 *  - anything else (a directory, block device, socket, dangling link): UVMRT_ERR_IO,
 *    nothing written.
 * UVMRT_ERR_INVALID for a NULL or unknown format or an empty path, UVMRT_ERR_NOMEM
 * when the report could not be built, UVMRT_ERR_IO when it could not be written; each
 * logs what was wrong, naming the path. */
uvmrt_status_t uvmrt_report_write(const uvmrt_context_t *ctx, const char *format,
                                  const char *path);

/* ------------------------------------------------------------------ profile files */
/* A device profile as a JSON file (uvmrt-profile(5)), e.g. written by
 * uvmrt-calibrate on the user's machine. UVMRT_PROFILE=FILE (a value containing
 * '/' or ending in .json) loads one: the sim backend models it, and on cuda it is
 * the reference uvmrt_context_profile returns. */

/* What a file says about where and how it was measured, besides the profile. */
typedef struct uvmrt_profile_meta {
    size_t struct_size;         /* sizeof(uvmrt_profile_meta_t): UVMRT_STRUCT_INIT */
    const char *date;           /* ISO 8601 UTC, e.g. "2026-12-01T09:30:00Z"; NULL: left out */
    const char *gpu_name;       /* cudaDeviceProp.name; NULL: left out */
    int driver_version;         /* cudaDriverGetVersion (13000 = 13.0); 0: left out */
    int cuda_runtime_version;   /* cudaRuntimeGetVersion; 0: left out */
    const char *tool;           /* "uvmrt-calibrate 0.1.0"; NULL: left out */
    const char *raw_json;       /* a JSON object of raw measurements, stored as "raw"; NULL: none */
} uvmrt_profile_meta_t;

/* Reads a profile file. Unknown keys are warned about by name (stderr); a missing
 * required key or a bad value (not a number, negative, a zero bandwidth) fails
 * with UVMRT_ERR_CONFIG and a message naming the file, the key and the value;
 * UVMRT_ERR_IO when the file cannot be read. On success *out (its strings
 * included) belongs to the caller: release it with uvmrt_profile_free. */
uvmrt_status_t uvmrt_profile_load(const char *path, uvmrt_profile_t **out);
/* Releases a profile from uvmrt_profile_load. NULL is a no-op. */
void uvmrt_profile_free(uvmrt_profile_t *profile);
/* Writes a profile file that uvmrt_profile_load reads back equal. meta may be NULL.
 * What is at path decides how, by uvmrt_report_write's rules: a new or regular file
 * (or a link's target) is written to a temporary file beside it, then renamed; a
 * FIFO or character device is written in place; anything else is refused
 * (UVMRT_ERR_IO). Zero optional fields are left out. */
uvmrt_status_t uvmrt_profile_save(const uvmrt_profile_t *profile, const uvmrt_profile_meta_t *meta,
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
/*   RECOMPUTE   the choice has the trainer recompute it (uvmrt_tensor_recomputes) */
#define UVMRT_MECH_RECOMPUTE 0x100u
/* Writes the names of the set bits joined by '+' ("prefetch+discard"; "none" for
 * 0) into buf (len bytes, NUL-terminated, cut if too small); returns the length
 * of the whole text (like snprintf). buf may be NULL when len is 0. */
size_t uvmrt_mechanism_name(unsigned mechanism, char *buf, size_t len);

/* One live tensor, as uvmrt_memory_summary() sees it. */
typedef struct uvmrt_tensor_info {
    size_t struct_size;        /* sizeof(uvmrt_tensor_info_t): set it in out[0], see below */
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
    size_t struct_size;             /* sizeof(uvmrt_memory_stats_t): UVMRT_STRUCT_INIT */
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
    /* host memory: footprints of the live tensors not resident on the GPU (host-homed,
     * evicted, never moved; on the disk tier only while their host copy is there) plus
     * uvmrt_context_set_host_external_bytes */
    uint64_t host_bytes;            /* now */
    uint64_t peak_host_bytes;       /* since creation or the last uvmrt_memory_peak_reset() */
    uint64_t host_budget_bytes;     /* uvmrt_context_host_budget (0: no limit) */
    uint64_t host_external_bytes;   /* declared by uvmrt_context_set_host_external_bytes */
    uint64_t plan_host_bytes;       /* the current plan's peak host need (with the external
                                       bytes); 0 without a plan */
} uvmrt_memory_stats_t;

/* Fills out[0..*n) with every live tensor in allocation order, like
 * torch.cuda.memory_summary(). *n receives the number of live tensors. out may
 * be NULL with cap 0 to ask for that number. out[0].struct_size is the size of
 * every element of the array (the caller's sizeof(uvmrt_tensor_info_t)): set it in
 * out[0] at least; each element written gets it. When cap is smaller than the number
 * of live tensors, the call fails with UVMRT_ERR_INVALID, writes nothing to out and
 * still sets *n. UVMRT_ERR_INVALID (logged) for a NULL n, a NULL out with cap > 0, or a
 * bad out[0].struct_size. */
uvmrt_status_t uvmrt_memory_summary(const uvmrt_context_t *ctx, uvmrt_tensor_info_t *out, size_t cap,
                                    size_t *n);
/* Current and peak resident bytes, with totals per role. */
uvmrt_status_t uvmrt_memory_stats_get(const uvmrt_context_t *ctx, uvmrt_memory_stats_t *out);
/* Starts the peak over from the bytes resident now (like
 * torch.cuda.reset_peak_memory_stats()): peak_resident_bytes (and peak_host_bytes,
 * from the host bytes now) of the summary, the memory stats, the reports and the
 * live monitor. The per-step peaks
 * (uvmrt_step_stats_t) are not changed. */
uvmrt_status_t uvmrt_memory_peak_reset(uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ live monitor */
/* Declares how many steps the program will run, so that uvmrt-top(1) can show an
 * ETA (0: unknown, the default). Any time; the last call counts. */
uvmrt_status_t uvmrt_context_set_total_steps(uvmrt_context_t *ctx, uint64_t steps);

/* ------------------------------------------------------------------ memory held outside uvmrt */
/* Declares the device memory the program holds outside uvmrt (e.g. a framework's own
 * allocator for activations: the PyTorch binding measures it in the recorded step), so
 * that the plan keeps uvmrt's resident bytes at or below the budget (or the choice's plan
 * budget) less these bytes. A changed value re-plans at the next step. Outside a step
 * (UVMRT_ERR_STATE inside one); UVMRT_ERR_BUDGET, logged, when bytes is not below the
 * budget. On failure nothing changes. 0 (the default) withdraws it. */
uvmrt_status_t uvmrt_context_set_external_bytes(uvmrt_context_t *ctx, uint64_t bytes);
/* The bytes declared by uvmrt_context_set_external_bytes (0: none). */
uint64_t uvmrt_context_external_bytes(const uvmrt_context_t *ctx);
/* The same for host memory: declares the host bytes the program keeps outside uvmrt
 * (a CPU optimizer's state, pinned staging, a framework's host tensors), which count
 * against the host budget (UVMRT_HOST_BUDGET) beside the tensors the plan keeps off the
 * GPU. Outside a step (UVMRT_ERR_STATE inside one); UVMRT_ERR_BUDGET, logged with what
 * is needed and what the budget is, when these bytes and the host bytes the tensors
 * need at least (their footprints less the device budget) exceed the host budget. On
 * failure nothing changes. A changed value re-plans at the next step; 0 withdraws it. */
uvmrt_status_t uvmrt_context_set_host_external_bytes(uvmrt_context_t *ctx, uint64_t bytes);
/* The bytes declared by uvmrt_context_set_host_external_bytes (0: none). */
uint64_t uvmrt_context_host_external_bytes(const uvmrt_context_t *ctx);


/* ------------------------------------------------------------------ choices (uvmrt_choose(3)) */
/* Options of the trainer's own that the runtime chooses from its model of the machine
 * (e.g. on which side each block's optimizer runs; which tensors recompute is the
 * runtime's own choice, see uvmrt_tensor_set_recompute). A knob is one option and the values it may take, e.g. the number of
 * top blocks whose AdamW runs on the CPU: {"cpu_layers", 5, (const int[]){0, 6, 12, 18, 24}}. */
#define UVMRT_KNOBS_MAX 8
#define UVMRT_CHOICES_MAX 4096 /* combinations of knob values rehearsed at most */
typedef struct uvmrt_knob {
    const char *name;   /* for messages; copied */
    size_t n_values;    /* >= 1 */
    const int *values;  /* copied */
} uvmrt_knob_t;

/* Runs the trainer's step on a model of the machine: declares its layers and tensors on
 * `model` (a sim context uvmrt_choose made with the context's profile, budget, policy,
 * discard and remote settings; its tensors are address space only, never touched), then
 * runs `steps` steps (uvmrt_step_begin .. uvmrt_step_end) of the layer calls the trainer
 * would run for real with these knob values (values[k] is knob k's), with their flops and
 * host_bytes and no arithmetic. The model is destroyed after the call, tensors and all.
 * Return UVMRT_ERR_BUDGET (what uvmrt_layer_begin returns when a call's working set is
 * over the model's budget) for "these values do not fit": the choice skips them. Any
 * other error return stops the choice, which then fails with that status. Never exit. */
typedef uvmrt_status_t (*uvmrt_rehearse_fn)(uvmrt_context_t *model, const int *values, int steps,
                                            void *user);

/* What uvmrt_choose chose, and what the review found. Every time here is the model's
 * prediction except measured_step_ns. */
typedef struct uvmrt_choice {
    size_t struct_size;             /* sizeof(uvmrt_choice_t): UVMRT_STRUCT_INIT */
    int values[UVMRT_KNOBS_MAX];    /* the chosen value of each knob */
    double predicted_step_ns;       /* predicted step time of the choice at plan_budget_bytes */
    uint64_t plan_budget_bytes;     /* the budget the plan uses: the context's, or a smaller
                                       one the model predicts faster (more budget never
                                       predicts slower) */
    int fits;                       /* 0: no combination fits the budget (values: the first) */
    size_t rehearsals;              /* model runs made (combinations and budgets) */
    /* uvmrt_choice_review */
    double measured_step_ns;        /* median measured step time of the planned steps since
                                       the choice; 0 before a review */
    double first_predicted_step_ns; /* the first prediction (declared work); after a review
                                       predicted_step_ns is made with the measured work */
    int replanned;                  /* 1: the review found an error over 10% and chose again */
    /* the review after a re-plan: the re-planned values measured against the first ones */
    double replanned_measured_step_ns; /* their median measured step time; 0 before */
    int reverted;                   /* 1: they ran slower than the first, which are back
                                       (predicted_step_ns: the re-plan's prediction of them) */
    /* the tensors the trainer declared recomputable (uvmrt_tensor_set_recompute) */
    int recomputable_tensors;       /* declared in the rehearsal */
    int recompute_tensors;          /* how many of them recompute (the first in their order) */
} uvmrt_choice_t;

/* Chooses the knob values with the least predicted step time: rehearses every combination
 * (at most UVMRT_CHOICES_MAX; each is one call of rehearse on a fresh model) at the
 * context's budget (when the rehearsal declares recomputable tensors, uvmrt_tensor_set_recompute,
 * each combination also with 0, 1/8, 2/8, ..., all of them recomputing, in their order:
 * the first rehearsal counts them), then the best one at smaller budgets (7/8, 6/8, 5/8, 4/8 of it) and
 * keeps the fastest; the context then plans with out->plan_budget_bytes. On the cuda
 * backend the model is the context's profile (UVMRT_PROFILE: a file from
 * uvmrt-calibrate(1) describes the machine; a built-in name is an estimate). Outside a
 * step, before or after the trainer's tensors exist. UVMRT_ERR_INVALID for bad
 * arguments (NULL ctx, rehearse or out, knobs NULL with n_knobs > 0, n_knobs over
 * UVMRT_KNOBS_MAX, a knob without values, too many combinations; n_knobs 0 chooses only
 * the recomputing tensors and the plan budget); a failed rehearsal's status otherwise. On failure the
 * context is as before. uvmrt_choice_get reads the last choice later. */
uvmrt_status_t uvmrt_choose(uvmrt_context_t *ctx, const uvmrt_knob_t *knobs, size_t n_knobs,
                            uvmrt_rehearse_fn rehearse, void *user, uvmrt_choice_t *out);

/* After some planned steps (at least 2 since the choice): compares the median measured
 * step time of those after the first (which starts from where the steps before it left
 * the tensors) with the prediction. When they differ by more than 10% and the context has not
 * re-planned yet, rehearses again with each (layer, phase)'s GPU work scaled by what the last
 * step measured against what the model gave it, and chooses again (once per context);
 * within 10% (and over 1%), the values stay and are rehearsed once more with the measured
 * work, which gives predicted_step_ns (first_predicted_step_ns keeps the first prediction).
 * Called again after a re-plan whose values changed (at least 2 planned steps of them): when
 * they measured slower than the first values did, the first values come back (reverted) --
 * the model was wrong twice, the measurements decide; kept, they are predicted again with
 * their own measured work when it differs by over 1%. *changed (may be NULL) is 1 when the
 * knob values changed: the trainer applies them to its next steps. out receives the choice
 * with the measurements. UVMRT_ERR_INVALID without a choice, inside a step or with fewer
 * than 2 planned steps since the choice (or the re-plan). */
uvmrt_status_t uvmrt_choice_review(uvmrt_context_t *ctx, uvmrt_choice_t *out, int *changed);

/* The last choice (after uvmrt_choose or a review); UVMRT_ERR_INVALID without one. */
uvmrt_status_t uvmrt_choice_get(const uvmrt_context_t *ctx, uvmrt_choice_t *out);

/* Rehearsed combination i (0 .. uvmrt_choice_count(ctx) - 1) of the last choice, at the
 * context's budget: its knob values and predicted step time (0 when it did not fit).
 * UVMRT_ERR_INVALID when i is out of range. */
size_t uvmrt_choice_count(const uvmrt_context_t *ctx);
uvmrt_status_t uvmrt_choice_candidate(const uvmrt_context_t *ctx, size_t i, int *values,
                                      double *predicted_step_ns);
/* How many recomputable tensors recompute in candidate i (0 when the rehearsal declared
 * none); -1 when i is out of range. */
int uvmrt_choice_candidate_recompute(const uvmrt_context_t *ctx, size_t i);

/* ------------------------------------------------------------------ AdamW on the CPU or the GPU (uvmrt_adamw_cpu(3)) */
/* Hyperparameters of one AdamW update (torch.optim.AdamW's, amsgrad off). Start from
 * uvmrt_adamw_init(); struct_size lets the struct grow without breaking programs (see
 * "structs that grow"). */
typedef struct uvmrt_adamw {
    size_t struct_size;   /* sizeof(uvmrt_adamw_t); set by uvmrt_adamw_init */
    double lr;            /* default 1e-3 */
    double beta1, beta2;  /* default 0.9, 0.999 */
    double eps;           /* default 1e-8 */
    double weight_decay;  /* decoupled, default 1e-2 */
    uint64_t step;        /* the update's number t >= 1, for the bias corrections; default 1 */
    double grad_scale;    /* the gradient is multiplied by this first (1/loss scale, times a clip factor); default 1 */
    int threads;          /* CPU threads; 0 (default): the CPUs the calling thread may run on */
    int order;            /* uvmrt_adamw_order_t: the order of the float operations; default
                           * UVMRT_ADAMW_ORDER_UVMRT. Added in what was the struct's tail
                           * padding (sizeof unchanged, and uvmrt_adamw_init zeroes it); a
                           * struct_size of offsetof(uvmrt_adamw_t, order), from a copy of
                           * the struct without it, means UVMRT_ADAMW_ORDER_UVMRT too */
} uvmrt_adamw_t;

/* uvmrt_adamw_t.order: which rounding of AdamW's formula uvmrt_adamw_cpu computes. */
typedef enum uvmrt_adamw_order {
    UVMRT_ADAMW_ORDER_UVMRT = 0, /* no FMA: the example trainers' GPU kernels' bits */
    UVMRT_ADAMW_ORDER_TORCH = 1  /* torch.optim.AdamW(foreach=False) on CUDA's bits */
} uvmrt_adamw_order_t;

/* The defaults above, and struct_size. A NULL hp: nothing happens. */
void uvmrt_adamw_init(uvmrt_adamw_t *hp);

/* One AdamW update of n fp32 elements in place: w (weights), m, v (moments) from g
 * (gradient), in one of two orders of float operations, with the coefficients computed
 * in double from hp and rounded to float once. UVMRT_ADAMW_ORDER_UVMRT (each operation
 * rounded on its own, no FMA):
 *   g' = g * grad_scale;  m = b1*m + (1-b1)*g';  v = b2*v + ((1-b2)*g')*g'
 *   w  = w*(1 - lr*wd) - (lr/(1-b1^t)) * (m / (sqrt(v) * (1/sqrt(1-b2^t)) + eps))
 * UVMRT_ADAMW_ORDER_TORCH (torch.optim.AdamW(foreach=False) on CUDA; fma(a, b, c) =
 * a*b + c rounded once; c1 = 1-b1 rounded to float):
 *   g' = g * grad_scale;  w1 = w * (1 - lr*wd)
 *   m  = c1 < 0.5 ? fma(c1, g' - m, m) : fma(-(g' - m), 1 - c1, g')
 *   v  = fma(1-b2, g'*g', v*b2)
 *   w  = fma(-(lr/(1-b1^t)), m / (sqrt(v) * r + eps), w1),
 *        r = (float)(1.0 / sqrt(1-b2^t)) (the reciprocal taken in double, rounded once)
 * half_out, when not NULL, receives the new w rounded to bf16 (n 16-bit patterns, round
 * to nearest even). Bit-for-bit the same result for any thread count and instruction
 * set. Any thread; the arrays are the caller's (host memory, e.g. host-homed uvmrt
 * tensors), must not overlap, and are not touched by the library after the call.
 * n 0: nothing happens (UVMRT_OK).
 * UVMRT_ERR_INVALID (logged; nothing changed) for a NULL hp, a NULL w, m, v or g with
 * n > 0, a bad struct_size (0, or over this library's sizeof), step 0, lr/eps/weight_decay negative or not finite, beta
 * outside [0, 1), grad_scale not finite, threads negative, an unknown order. */
uvmrt_status_t uvmrt_adamw_cpu(const uvmrt_adamw_t *hp, float *w, float *m, float *v, const float *g,
                               size_t n, uint16_t *half_out);

/* The same update as uvmrt_adamw_cpu (the same hp, orders and bits, half_out included;
 * hp->threads is ignored), queued as CUDA kernels on stream (NULL: the legacy default
 * stream) of the calling thread's current device; it returns once they are queued. The
 * arrays must be device-accessible: device memory, managed memory (a host-homed uvmrt
 * tensor is read and written over the link in one pass, each element crossing once each
 * way: the GPU's update of state that lives in host memory) or mapped pinned memory.
 * Over host memory the kernels take few blocks (UVMRT_ADAMW_LINK_BLOCKS, default an eighth
 * of the SMs, 4 to 16; read at each call), so that the kernels of other streams are not
 * held behind their loads.
 * grad_scale_dev, when not NULL, is a device-accessible float that replaces
 * hp->grad_scale (a clip coefficient computed on the GPU, read without a
 * synchronisation); it must hold its value until the kernels ran. n 0: nothing happens.
 * UVMRT_ERR_INVALID as uvmrt_adamw_cpu's (nothing queued); UVMRT_ERR_UNSUPPORTED from a
 * library built without CUDA; UVMRT_ERR_NO_DEVICE when there is no GPU or driver;
 * UVMRT_ERR_BACKEND when the launch fails otherwise (each logged with CUDA's message).
 * Errors of the kernels themselves (a bad pointer) surface at the stream's next
 * synchronisation, as CUDA's do. */
uvmrt_status_t uvmrt_adamw_gpu(const uvmrt_adamw_t *hp, float *w, float *m, float *v, const float *g,
                               size_t n, uint16_t *half_out, const float *grad_scale_dev,
                               uvmrt_stream_t stream);

/* The instruction set uvmrt_adamw_cpu uses on this machine: "avx512", "avx2" or "scalar"
 * (UVMRT_ADAMW_ISA=scalar|avx2|avx512, read at each call, may force a narrower one, for
 * tests; a wider one than the CPU has gives the CPU's). UVMRT_ADAMW_ORDER_TORCH takes
 * avx2 only on a CPU with FMA as well (scalar otherwise). A static string; any thread. */
const char *uvmrt_adamw_isa(void);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_H */
