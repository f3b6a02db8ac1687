/*
 * monitor.h -- the live snapshot a uvmrt program publishes for uvmrt-top
 * (internal; the layout is shared by the publisher in monitor.c and the reader
 * in tools/monread.c, which is compiled into uvmrt-top and the tests).
 *
 * Each context owns one POSIX shared-memory segment, mode 0600, named
 * /uvmrt.<uid>.<pid> (the process's first context) or /uvmrt.<uid>.<pid>.<n>
 * (its n-th further one), created when the context is and unlinked when it is
 * destroyed. The segment is a header then cap_layers rows:
 *
 *   [uvmrt_mon_header_t][uvmrt_mon_layer_t x cap_layers]
 *
 * At every step end the library rewrites the snapshot under a seqlock: seq is
 * odd while the writer is inside, and bumped twice per publish, so a reader
 * that copies the header and rows and sees the same even seq before and after
 * has a consistent snapshot (never a torn one). The segment only grows (when
 * the layer count passes cap_layers): a reader whose mapping is too small for
 * n_layers re-maps it.
 *
 * Layout rules: fixed-size fields only, no pointers; version bumps on any
 * change, and readers refuse other versions.
 */
#ifndef UVMRT_MONITOR_H
#define UVMRT_MONITOR_H

#include <stdint.h>

#define UVMRT_MON_MAGIC 0x314e4f4d544d5655ull /* "UVMTMON1" read as little-endian bytes */
#define UVMRT_MON_VERSION 2u /* 2: host memory (snap host_*, row host_bytes) */
#define UVMRT_MON_PREFIX "uvmrt." /* segment names: "/" UVMRT_MON_PREFIX "<uid>.<pid>[.<n>]" */
#define UVMRT_MON_NAME_MAX 64
#define UVMRT_MON_LAYERS0 64      /* rows in a new segment; doubled as layers are added */

/* One layer's counters over the last completed step (all its phases summed). */
typedef struct uvmrt_mon_layer {
    char name[64];               /* the layer's name, cut at 63 bytes (a UTF-8 boundary) */
    char mechanism[48];          /* what the plan gives its tensors: "prefetch+discard", "host-homed"... */
    uint64_t calls;
    uint64_t duration_ns;        /* end of the wait to the end of the work */
    uint64_t wait_ns;            /* the stream waited for its prefetches */
    uint64_t prefetch_bytes, evict_bytes, discard_bytes;
    uint64_t fault_count, fault_bytes; /* uvmrt's own: tensors used while not resident */
    uint64_t remote_read_bytes, remote_write_bytes;
    uint64_t gpu_faults;         /* the driver's (CUPTI or the sim model), when collected */
    uint64_t host_bytes;         /* its tensors not resident on the GPU now */
    uint64_t plan_host_bytes;    /* its tensors the plan keeps in host memory at some point */
} uvmrt_mon_layer_t;

/* The process-level part, copied whole by readers. Steps are numbered from 1. */
typedef struct uvmrt_mon_snap {
    int32_t pid;
    uint32_t n_layers;           /* valid rows (<= cap_layers) */
    uint32_t cap_layers;         /* rows the segment has room for */
    uint32_t context_index;      /* 0: the process's first context, n: its n-th further one */
    char program[64];            /* program_invocation_short_name */
    char backend[16], policy[16], profile[32], fault_source[8];
    uint64_t start_unix_ns;      /* when the context was created (CLOCK_REALTIME) */
    uint64_t publish_unix_ns;    /* when this snapshot was written */
    uint64_t budget_bytes, allocated_bytes, host_homed_bytes;
    uint64_t resident_bytes;     /* now, by uvmrt's accounting */
    uint64_t peak_resident_bytes;/* since creation or uvmrt_memory_peak_reset */
    uint64_t step;               /* the last completed step (1 = the first); 0 = none yet */
    uint64_t total_steps;        /* as declared by uvmrt_context_set_total_steps; 0 = unknown */
    uint64_t in_step;            /* 1 while a step is open (not published mid-step; kept for readers) */
    /* the last completed step */
    uint64_t step_ns, wait_ns;
    uint64_t to_device_bytes;    /* over the link to the GPU: prefetch + fault + remote read */
    uint64_t to_host_bytes;      /* to the host: write-back + remote write */
    uint64_t prefetch_bytes, evict_bytes, discard_bytes, fault_count, fault_bytes;
    uint64_t remote_read_bytes, remote_write_bytes, gpu_faults;
    uint64_t step_peak_resident_bytes;
    /* the steady state (steps 2..step), for the ETA */
    uint64_t steady_steps, steady_ns;
    uint64_t plans_built;
    /* host memory (uvmrt_memory_stats_t's fields of the same names) */
    uint64_t host_bytes, peak_host_bytes, plan_host_bytes, host_external_bytes, host_budget_bytes;
} uvmrt_mon_snap_t;

typedef struct uvmrt_mon_header {
    uint64_t magic;              /* UVMRT_MON_MAGIC once the segment is initialised */
    uint32_t version;            /* UVMRT_MON_VERSION */
    uint32_t header_bytes;       /* offset of row 0 */
    uint32_t row_bytes;          /* sizeof(uvmrt_mon_layer_t) */
    uint32_t reserved;
    uint64_t seq;                /* seqlock: odd while the writer is inside (__atomic builtins) */
    uvmrt_mon_snap_t snap;
} uvmrt_mon_header_t;

/* Rows start on a 64-byte boundary after the header. */
#define UVMRT_MON_HEADER_BYTES ((sizeof(uvmrt_mon_header_t) + 63u) & ~(size_t)63u)
#define UVMRT_MON_BYTES(cap) (UVMRT_MON_HEADER_BYTES + (size_t)(cap) * sizeof(uvmrt_mon_layer_t))

#ifdef UVMRT_INTERNAL_H
/* ------------------------------------------------------------------ the publisher (monitor.c) */
/* Creates the context's segment (UVMRT_MONITOR=1) and publishes step 0. A
 * failure is a warning: the run goes on unmonitored. */
void uvmrt__monitor_open(uvmrt_context_t *ctx);
/* Publishes the step that just ended (called by uvmrt_step_end before it clears
 * the step's counters). No allocation and no system call, except growing the
 * segment when the layer count passed its room. */
void uvmrt__monitor_publish(uvmrt_context_t *ctx);
/* Each layer's host_bytes and plan_host_bytes (rows[0..n_layers)): its tensors off the GPU
 * now and in the plan, a disk-tier tensor as the plan's total counts it
 * (uvmrt__tier_host_share). */
void uvmrt__monitor_layer_host(const uvmrt_context_t *ctx, uvmrt_mon_layer_t *rows, uint32_t n_layers);
/* Unmaps and unlinks the segment (only in the process that created it). */
void uvmrt__monitor_close(uvmrt_context_t *ctx);
/* The segment's name ("/uvmrt.<uid>.<pid>..."), or NULL when not publishing. */
const char *uvmrt__monitor_name(const uvmrt_context_t *ctx);
#endif

#endif
