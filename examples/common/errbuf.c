/*
 * errbuf.c -- errors into a caller's buffer (errbuf.h).
 */
#include <stdarg.h>
#include <stdio.h>

#include "errbuf.h"

int errbuf_fail(char *err, size_t errlen, const char *prefix, const char *fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", buf);
    else
        fprintf(stderr, "%s: %s\n", prefix, buf);
    return -1;
}
