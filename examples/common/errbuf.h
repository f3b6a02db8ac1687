/*
 * errbuf.h -- the example programs' error reporting into a caller's buffer: a
 * function that can fail says why in err (errlen bytes) when the caller gives one,
 * else on stderr, and returns -1.
 */
#ifndef UVMRT_EXAMPLES_ERRBUF_H
#define UVMRT_EXAMPLES_ERRBUF_H

#include <stddef.h>

/* Formats the message into err when err is not NULL and errlen > 0, else prints
 * "prefix: message" on stderr; returns -1, for "return errbuf_fail(...)". */
int errbuf_fail(char *err, size_t errlen, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
