/*
 * tool_args.h -- command-line values shared by uvmrt-calibrate and uvmrt-linkbench
 * (which links no libuvmrt, so this is a header of its own).
 */
#ifndef UVMRT_TOOL_ARGS_H
#define UVMRT_TOOL_ARGS_H

#include <errno.h>
#include <stdlib.h>

/* *out = text as a decimal integer in lo..hi; 0, or -1 (nothing written) otherwise. */
static inline int tool_int_parse(const char *text, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

#endif /* UVMRT_TOOL_ARGS_H */
