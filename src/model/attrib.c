/*
 * attrib.c -- unified-memory records to tensors (by address) and to layer calls
 * (by start time). See attrib.h for the rules.
 */
#include <stdlib.h>
#include <string.h>

#include "attrib.h"

void uvmrt__attrib_classify(const uvmrt_um_record_t *r, uvmrt_fcount_t *out)
{
    switch (r->kind) {
    case UVMRT_UM_HTOD:
        switch (r->cause) {
        case UVMRT_UM_CAUSE_USER: out->v[FC_PREFETCH_HTOD] += r->value; break;
        case UVMRT_UM_CAUSE_PREFETCH:
        case UVMRT_UM_CAUSE_ACCESS_COUNTERS: out->v[FC_DRIVER_PREFETCH_HTOD] += r->value; break;
        default: out->v[FC_FAULT_HTOD] += r->value; break; /* coherence (fault), eviction, unknown */
        }
        break;
    case UVMRT_UM_DTOH: out->v[FC_EVICT_DTOH] += r->value; break;
    case UVMRT_UM_CPU_FAULT: out->v[FC_CPU_FAULTS] += 1; break; /* value is a PC */
    case UVMRT_UM_GPU_FAULT: out->v[FC_GPU_FAULTS] += r->value; break;
    case UVMRT_UM_THRASHING: out->v[FC_THRASHING] += 1; break;
    case UVMRT_UM_THROTTLING: out->v[FC_THROTTLING] += 1; break;
    case UVMRT_UM_REMOTE_MAP: out->v[FC_REMOTE_MAP] += 1; break;
    default: break;
    }
}

/* ------------------------------------------------------------------ address index */
void uvmrt__attrib_index_clear(uvmrt_attrib_index_t *ix) { ix->n = 0; }

int uvmrt__attrib_index_add(uvmrt_attrib_index_t *ix, uint64_t lo, uint64_t hi, int tensor)
{
    if (ix->n == ix->cap) {
        size_t cap = ix->cap ? 2 * ix->cap : 64;
        uvmrt_attrib_range_t *r = realloc(ix->r, cap * sizeof *r);
        if (r == NULL) return -1;
        ix->r = r;
        ix->cap = cap;
    }
    ix->r[ix->n++] = (uvmrt_attrib_range_t){lo, hi, tensor};
    return 0;
}

static int cmp_range(const void *a, const void *b)
{
    const uvmrt_attrib_range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void uvmrt__attrib_index_sort(uvmrt_attrib_index_t *ix)
{
    if (ix->n > 1) qsort(ix->r, ix->n, sizeof *ix->r, cmp_range);
}

void uvmrt__attrib_index_free(uvmrt_attrib_index_t *ix)
{
    free(ix->r);
    memset(ix, 0, sizeof *ix);
}

int uvmrt__attrib_find(const uvmrt_attrib_index_t *ix, uint64_t addr)
{
    size_t lo = 0, hi = ix->n; /* first range with r.lo > addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ix->r[mid].lo <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == 0) return -1;
    const uvmrt_attrib_range_t *r = &ix->r[lo - 1];
    return addr < r->hi ? r->tensor : -1;
}

/* ------------------------------------------------------------------ time */
size_t uvmrt__attrib_span_of(const uvmrt_attrib_span_t *spans, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n; /* first span with start > t */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (spans[mid].start <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo == 0 ? 0 : lo - 1;
}

static int cmp_record(const void *a, const void *b)
{
    const uvmrt_um_record_t *x = a, *y = b;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->address != y->address) return x->address < y->address ? -1 : 1;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return 0;
}

size_t uvmrt__attrib_run(const uvmrt_attrib_index_t *ix, const uvmrt_attrib_span_t *spans, size_t n_spans,
                        uvmrt_um_record_t *recs, size_t n, uint64_t horizon, uvmrt_fcount_t *per_span,
                        uvmrt_attrib_unattributed_t *un)
{
    if (n > 1) qsort(recs, n, sizeof *recs, cmp_record);
    size_t i = 0;
    for (; i < n && recs[i].start < horizon; i++) {
        const uvmrt_um_record_t *r = &recs[i];
        if (n_spans == 0 || uvmrt__attrib_find(ix, r->address) < 0) {
            un->records++;
            uvmrt__attrib_classify(r, &un->c);
            continue;
        }
        uvmrt__attrib_classify(r, &per_span[uvmrt__attrib_span_of(spans, n_spans, r->start)]);
    }
    size_t left = n - i;
    if (left > 0 && i > 0) memmove(recs, recs + i, left * sizeof *recs);
    return left;
}
