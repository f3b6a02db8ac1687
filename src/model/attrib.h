/*
 * attrib.h -- attribution of unified-memory records (CUPTI's, or the sim model's)
 * to tensors by address and to layer calls by time. Pure C, no CUDA: unit tested
 * from synthetic record streams (tests/test_attrib.c).
 *
 * Rules (documented in uvmrt-report(5)):
 *  - a record belongs to the tensor whose range holds its start address; none:
 *    it is counted as unattributed (never dropped);
 *  - a record belongs to the span (layer call) that started last at or before the
 *    record's start time; a record that straddles a boundary goes whole to the span
 *    holding its start (counts stay integers); a record before the first span goes
 *    to the first span;
 *  - records are sorted by start time first (buffers arrive out of order);
 *  - records that start at or after the horizon are kept for the next round.
 */
#ifndef UVMRT_ATTRIB_H
#define UVMRT_ATTRIB_H

#include <stddef.h>
#include <stdint.h>

/* Kinds and causes use CUPTI's numbering (CUpti_ActivityUnifiedMemoryCounterKind,
 * CUpti_ActivityUnifiedMemoryMigrationCause), so faults.c copies them through. */
enum {
    UVMRT_UM_HTOD = 1,
    UVMRT_UM_DTOH = 2,
    UVMRT_UM_CPU_FAULT = 3, /* value is the faulting PC: count records */
    UVMRT_UM_GPU_FAULT = 4, /* value is the number of fault groups */
    UVMRT_UM_THRASHING = 5,
    UVMRT_UM_THROTTLING = 6,
    UVMRT_UM_REMOTE_MAP = 7
};
enum {
    UVMRT_UM_CAUSE_UNKNOWN = 0,
    UVMRT_UM_CAUSE_USER = 1,      /* cudaMemPrefetchAsync: uvmrt's own moves */
    UVMRT_UM_CAUSE_COHERENCE = 2, /* a page fault */
    UVMRT_UM_CAUSE_PREFETCH = 3,  /* the driver's speculative prefetch */
    UVMRT_UM_CAUSE_EVICTION = 4,
    UVMRT_UM_CAUSE_ACCESS_COUNTERS = 5
};

/* One record, backend-neutral. Times in the host clock of the context (ns). */
typedef struct uvmrt_um_record {
    uint64_t start, end;
    uint64_t address;
    uint64_t value;  /* bytes for HTOD/DTOH; fault groups for GPU_FAULT; else 1 */
    uint32_t kind;   /* UVMRT_UM_* */
    uint32_t cause;  /* UVMRT_UM_CAUSE_*, for HTOD/DTOH */
} uvmrt_um_record_t;

/* The counters a record adds to: FC_<tag> for each DRIVER entry of UVMRT_COUNTERS
 * (uvmrt.h), generated in counters.h. */
#include "counters.h"
typedef struct uvmrt_fcount {
    uint64_t v[FC_COUNT];
} uvmrt_fcount_t;

/* Adds one record to a counter set. */
void uvmrt__attrib_classify(const uvmrt_um_record_t *r, uvmrt_fcount_t *out);

/* The address index: sorted, non-overlapping [lo, hi) ranges, each a tensor. */
typedef struct uvmrt_attrib_range {
    uint64_t lo, hi;
    int tensor;
} uvmrt_attrib_range_t;
typedef struct uvmrt_attrib_index {
    uvmrt_attrib_range_t *r;
    size_t n, cap;
} uvmrt_attrib_index_t;

/* Empties the index (keeps its memory). */
void uvmrt__attrib_index_clear(uvmrt_attrib_index_t *ix);
/* Adds a range; call uvmrt__attrib_index_sort after the last. -1 on no memory. */
int uvmrt__attrib_index_add(uvmrt_attrib_index_t *ix, uint64_t lo, uint64_t hi, int tensor);
void uvmrt__attrib_index_sort(uvmrt_attrib_index_t *ix);
void uvmrt__attrib_index_free(uvmrt_attrib_index_t *ix);
/* The tensor holding addr, or -1. O(log n). */
int uvmrt__attrib_find(const uvmrt_attrib_index_t *ix, uint64_t addr);

/* A layer call's span on the host clock; spans are given in start order. */
typedef struct uvmrt_attrib_span {
    uint64_t start, end;
} uvmrt_attrib_span_t;

/* The span a time belongs to (the last one starting at or before t; 0 before the
 * first); n must be > 0. */
size_t uvmrt__attrib_span_of(const uvmrt_attrib_span_t *spans, size_t n, uint64_t t);

/* What did not go to a span. */
typedef struct uvmrt_attrib_unattributed {
    uint64_t records;
    uvmrt_fcount_t c;
} uvmrt_attrib_unattributed_t;

/* Sorts recs[0..n) by start time, attributes those starting before horizon
 * (UINT64_MAX: all) to per_span[n_spans] (zero spans: all unattributed), moves
 * the rest to the front of recs and returns their number. A record whose address
 * the index does not hold goes to un whatever its time. */
size_t uvmrt__attrib_run(const uvmrt_attrib_index_t *ix, const uvmrt_attrib_span_t *spans, size_t n_spans,
                        uvmrt_um_record_t *recs, size_t n, uint64_t horizon, uvmrt_fcount_t *per_span,
                        uvmrt_attrib_unattributed_t *un);

#endif
