/*
 * backend.h -- the seam between the scheduler and a GPU (real or simulated).
 *
 * A backend is a static const table of function pointers plus an opaque state
 * pointer. The scheduler is the same code over every backend and reaches it only
 * through the front end (backend.c: uvmrt__be_*), never through the table. What a
 * backend can do beyond the common core is declared in .caps; an optional entry is
 * called only when its capability is declared, and the front end supplies the
 * default otherwise. Streams and events are opaque pointers owned by the backend.
 *
 * Errors: an entry returns UVMRT_OK or a negative status and changes nothing it
 * did not report, except where noted (move and discard over several ranges may
 * have enqueued the ranges before the failing one: the front end compensates).
 */
#ifndef UVMRT_BACKEND_H
#define UVMRT_BACKEND_H

#include "attrib.h"
#include "uvmrt.h"

typedef struct uvmrt_event_st *uvmrt_event_t;

typedef enum uvmrt_location {
    UVMRT_LOC_DEVICE = 0,
    UVMRT_LOC_HOST = 1
} uvmrt_location_t;

/* A contiguous managed range. */
typedef struct uvmrt_range {
    void *ptr;
    size_t bytes;
} uvmrt_range_t;

/* What a backend needs to open. */
typedef struct uvmrt_backend_config {
    int device;
    const uvmrt_profile_t *profile; /* sim: the model; cuda: unused */
    struct uvmrt_log *log;
} uvmrt_backend_config_t;

/* What one layer's work touches: ranges used on the device, and ranges of
 * host-homed tensors read or written over the link. */
typedef struct uvmrt_touch {
    const uvmrt_range_t *local;
    size_t n_local;
    const uvmrt_range_t *remote_read;
    size_t n_remote_read;
    const uvmrt_range_t *remote_write;
    size_t n_remote_write;
    uint64_t duration_ns;
    uint64_t host_bytes; /* CPU work on host memory, beside the GPU's (sim: shares host memory with the link) */
    uint64_t host_ns;    /* > 0: that work's measured time (sim: taken as is, booking host_bytes / host_ns) */
    /* the disk tier's bytes of this call (sim: at the profile's disk rates on one drive,
     * through host memory): read before its work, written back after it */
    uint64_t disk_read_bytes;
    uint64_t disk_write_bytes;
} uvmrt_touch_t;

/* What the GPU did while running one layer's work (sim only: the model's view). */
typedef struct uvmrt_touch_result {
    uint64_t fault_count;
    uint64_t fault_bytes;
} uvmrt_touch_result_t;

/* What a backend can do beyond the core (open/close, memory, streams, events,
 * move, now). Probed by nobody: declared by the table, read by the front end. */
typedef struct uvmrt_backend_caps {
    unsigned discard : 1;       /* discard(): dead ranges dropped without write-back;
                                 * else the front end moves them to the host */
    unsigned remote_advice : 1; /* advise_remote(); else nothing to do */
    unsigned touch : 1;         /* touch(): the backend runs the layer's work (a model) */
    unsigned um_records : 1;    /* um_enable / um_disable / um_drain (a model's records) */
    unsigned timing : 1;        /* event_elapsed_ns(); else every duration reads 0 */
    unsigned event_query : 1;   /* event_done(); else every event counts as complete */
} uvmrt_backend_caps_t;

typedef struct uvmrt_backend_ops {
    const char *name;
    uvmrt_backend_caps_t caps;
    /* The backend's own name for its last failure (e.g. "cudaErrorLaunchFailure"),
     * for messages and the per-kind error counts; NULL entry or NULL result: the
     * front end names the status instead. */
    const char *(*error_name)(void *state);
    uvmrt_status_t (*open)(const uvmrt_backend_config_t *cfg, void **state);
    void (*close)(void *state);
    /* Free and total device memory (for the auto budget). */
    uvmrt_status_t (*mem_info)(void *state, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Managed memory, 2 MiB aligned. */
    uvmrt_status_t (*alloc)(void *state, size_t bytes, void **ptr);
    void (*free)(void *state, void *ptr, size_t bytes);
    /* Page-locked host memory the device reads and writes over the link at the same
     * address (cuda: cudaHostAlloc, mapped and portable; sim: host pages), page aligned:
     * a tensor placed UVMRT_PLACE_PINNED lives there. */
    uvmrt_status_t (*host_alloc)(void *state, size_t bytes, void **ptr);
    void (*host_free)(void *state, void *ptr, size_t bytes);
    uvmrt_status_t (*stream_create)(void *state, uvmrt_stream_t *out);
    void (*stream_destroy)(void *state, uvmrt_stream_t stream);
    /* timing = 1: usable with event_elapsed_ns. */
    uvmrt_status_t (*event_create)(void *state, int timing, uvmrt_event_t *out);
    void (*event_destroy)(void *state, uvmrt_event_t event);
    uvmrt_status_t (*event_record)(void *state, uvmrt_event_t event, uvmrt_stream_t stream);
    uvmrt_status_t (*stream_wait)(void *state, uvmrt_stream_t stream, uvmrt_event_t event);
    /* 1 when all work before the event's record has completed. */
    int (*event_done)(void *state, uvmrt_event_t event);
    /* Time between two completed timing events. */
    uvmrt_status_t (*event_elapsed_ns)(void *state, uvmrt_event_t start, uvmrt_event_t end,
                                       uint64_t *ns);
    uvmrt_status_t (*stream_sync)(void *state, uvmrt_stream_t stream);
    /* Migrate ranges (prefetch) to a location, ordered on the stream. */
    uvmrt_status_t (*move)(void *state, const uvmrt_range_t *ranges, size_t n,
                           uvmrt_location_t to, uvmrt_stream_t stream);
    /* Declare ranges' contents dead: the GPU may drop them without write-back.
     * caps.discard = 0: the front end falls back to move(HOST). */
    uvmrt_status_t (*discard)(void *state, const uvmrt_range_t *ranges, size_t n,
                              uvmrt_stream_t stream);
    /* Keep ranges in host memory, mapped for the GPU (preferred location host,
     * accessed by the device). Not stream ordered: call when no queued work uses
     * them. caps.remote_advice = 0: nothing to do (the model takes remote ranges
     * from touch). */
    uvmrt_status_t (*advise_remote)(void *state, const uvmrt_range_t *ranges, size_t n);
    /* The layer's work runs on the stream (sim only: advances the model, counts
     * faults and link traffic). caps.touch = 0 for real GPUs. */
    uvmrt_status_t (*touch)(void *state, uvmrt_stream_t stream, const uvmrt_touch_t *work,
                            uvmrt_touch_result_t *result);
    /* Host-side clock, in ns (sim: the model's host time). */
    uint64_t (*now_ns)(void *state);
    /* Unified-memory records of the model (caps.um_records; real GPUs' records
     * come from CUPTI, faults.c): um_enable starts recording them, um_disable
     * stops (records so far are kept), um_drain hands every record so far to sink
     * (times on the now_ns clock) and forgets them. */
    void (*um_enable)(void *state);
    void (*um_disable)(void *state);
    void (*um_drain)(void *state, void (*sink)(void *user, const uvmrt_um_record_t *r, size_t n), void *user);
} uvmrt_backend_ops_t;

#define UVMRT_BE_KINDS 16 /* distinct kinds of absorbed backend errors kept by name */
typedef struct uvmrt_be_kind {
    const char *op;  /* static */
    char name[48];   /* the backend's error name, e.g. cudaErrorNotReady */
    uint64_t count;
} uvmrt_be_kind_t;

/* The front end's state (backend.c owns it; others read ctx->be, and reach the
 * backend only through uvmrt__be_*, internal.h). */
typedef struct uvmrt_be_front {
    const uvmrt_backend_ops_t *ops; /* reached only through uvmrt__be_* */
    void *state;                    /* the backend's, from open */
    /* backend errors the library completed its calls without (timings), by kind */
    uint64_t errors;
    uvmrt_be_kind_t kinds[UVMRT_BE_KINDS];
    int n_kinds;
    uint64_t compensated;           /* failed prefetches moved back (uvmrt__be_move) */
    /* trace hook: the calls the scheduler makes to the backend, backend-neutral */
    void (*trace_fn)(void *user, const char *line);
    void *trace_user;
    /* names an address in a trace line (the tensors' arenas, set from above by
     * uvmrt__be_set_describer so the seam does not call up); NULL: the address */
    void (*describe_fn)(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len);
} uvmrt_be_front_t;

extern const uvmrt_backend_ops_t uvmrt__backend_sim;
/* NULL when the library was built without CUDA. */
extern const uvmrt_backend_ops_t *const uvmrt__backend_cuda_ptr;

#endif
