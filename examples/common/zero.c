/*
 * zero.c -- ZeRO-1 shard arithmetic (see zero.h).
 */
#include "zero.h"

#include <stdint.h>
#include <stdio.h>

#include "errbuf.h"

#define ERR_PREFIX "uvmrt" /* errbuf_fail's messages on stderr start with it */

int zero_shard(size_t n, int world, int rank, size_t align, zero_shard_t *out, char *err,
               size_t errlen) {
    if (world < 1)
        return errbuf_fail(err, errlen, ERR_PREFIX, "ZeRO shard: world %d: expected at least 1",
                           world);
    if (rank < 0 || rank >= world)
        return errbuf_fail(err, errlen, ERR_PREFIX, "ZeRO shard: rank %d: expected 0..%d", rank,
                           world - 1);
    if (align < 1)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "ZeRO shard: alignment %zu elements: expected at least 1", align);
    size_t w = (size_t)world;
    size_t per = n / w + (n % w != 0);
    if (per > SIZE_MAX - (align - 1) || (per + align - 1) / align * align > SIZE_MAX / w)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "ZeRO shard: %zu elements over %zu ranks: the padded size "
                           "does not fit in size_t",
                           n, w);
    size_t chunk = (per + align - 1) / align * align;
    size_t offset = (size_t)rank * chunk;
    *out = (zero_shard_t){.chunk = chunk, .padded = w * chunk, .offset = offset,
                          .len = offset >= n ? 0 : (n - offset < chunk ? n - offset : chunk)};
    return 0;
}

void zero_overlap(const zero_shard_t *s, size_t start, size_t count, size_t *lo, size_t *hi) {
    size_t a = start > s->offset ? start : s->offset;
    size_t end = start + count, mine = s->offset + s->len;
    size_t b = end < mine ? end : mine;
    *lo = a;
    *hi = b > a ? b : a;
}
