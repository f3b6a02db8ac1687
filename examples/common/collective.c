/*
 * collective.c -- the transport-independent part of the seam (see collective.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "collective.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COLL_TIMEOUT_DEFAULT_S 600.0

int coll_timeout_from_env(double *out, char *err, size_t errlen) {
    const char *s = getenv("UVMRT_COLL_TIMEOUT_S");
    if (s == NULL) {
        *out = COLL_TIMEOUT_DEFAULT_S;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || errno != 0 || !isfinite(v) || v <= 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "UVMRT_COLL_TIMEOUT_S=\"%s\": expected a number of seconds "
                     "above 0", s);
        return -1;
    }
    *out = v;
    return 0;
}

int coll_fail(coll_t *c, const char *fmt, ...) {
    char msg[sizeof c->err - 40]; /* room for the "rank R of N: " prefix */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, sizeof c->err, "rank %d of %d: %s", c->rank, c->world, msg);
    return -1;
}

uint64_t coll_hash(const void *blob, size_t bytes) {
    const unsigned char *p = blob;
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 0x100000001B3ull;
    }
    return h;
}

int coll_check_same(coll_t *c, const void *blob, size_t bytes, const char *what) {
    uint64_t mine = coll_hash(blob, bytes), first = 0;
    char ranks[256] = "";
    size_t used = 0;
    int differ = 0;
    for (int root = 0; root < c->world; root++) {
        uint64_t h = mine;
        if (coll_broadcast_host(c, &h, sizeof h, root) != 0)
            return -1;
        if (root == 0)
            first = h;
        if (h != first) {
            differ++;
            int n = snprintf(ranks + used, sizeof ranks - used, "%s%d", differ > 1 ? ", " : "",
                             root);
            if (n > 0 && (size_t)n < sizeof ranks - used)
                used += (size_t)n;
        }
    }
    if (differ == 0)
        return 0;
    return coll_fail(c, "%s differ between ranks: rank%s %s (of %d) %s from rank 0's", what,
                     differ > 1 ? "s" : "", ranks, c->world, differ > 1 ? "differ" : "differs");
}
