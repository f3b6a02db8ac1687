/* log.c -- message formatting and delivery; the program's name. */
#define _GNU_SOURCE /* program_invocation_short_name */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void uvmrt__log_write(const uvmrt_log_t *log, uvmrt_log_level_t level, const char *fmt, ...)
{
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    if (log != NULL && log->fn != NULL) {
        log->fn(level, message, log->user);
        return;
    }
    fprintf(stderr, "uvmrt %s: %s\n", uvmrt_log_level_name(level), message);
}

const char *uvmrt__program_name(void)
{
    return program_invocation_short_name ? program_invocation_short_name : "?";
}
