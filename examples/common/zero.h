/*
 * zero.h -- ZeRO-1 shard arithmetic: which elements of a layer's optimizer state each
 * rank owns.
 *
 * A layer's parameters (and gradients) are one flat buffer of n floats. NCCL's
 * reduce-scatter and all-gather give every rank the same count, so the buffer is padded
 * to world * chunk elements, chunk = ceil(n / world) rounded up to a multiple of align
 * (elements; e.g. 4 for 16-byte vector loads in AdamW). Rank r owns [r*chunk,
 * r*chunk + chunk) of the padded buffer: it keeps the fp32 master weights and moments of
 * the `len` real elements there (the rest is padding, never updated), and after AdamW
 * the updated slices are all-gathered. Every rank owns exactly chunk real elements
 * except the last ones, which own fewer (or none); the padding is below world * align
 * elements, so the work is balanced to within one chunk.
 *
 * Plain C11.
 */
#ifndef UVMRT_EXAMPLES_ZERO_H
#define UVMRT_EXAMPLES_ZERO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    size_t chunk;  /* elements per rank in the padded buffer (a multiple of align) */
    size_t padded; /* world * chunk >= n */
    size_t offset; /* this rank's first element: rank * chunk */
    size_t len;    /* real elements this rank owns: min(chunk, n - offset), or 0 */
} zero_shard_t;

/* The shard of rank of world for a layer of n elements. Returns 0, or -1 with one line
 * in err (errlen bytes; stderr when err is NULL) naming the bad value; *out is then
 * unchanged. */
int zero_shard(size_t n, int world, int rank, size_t align, zero_shard_t *out, char *err,
               size_t errlen);

/* The part of a tensor at [start, start + count) of the layer that the shard owns, as
 * [*lo, *hi) in layer elements (*lo == *hi: none). */
void zero_overlap(const zero_shard_t *s, size_t start, size_t count, size_t *lo, size_t *hi);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_EXAMPLES_ZERO_H */
