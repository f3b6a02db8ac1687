/*
 * log.h -- leveled logging to a callback or stderr. The level is tested before
 * formatting, so disabled messages cost one comparison.
 */
#ifndef UVMRT_LOG_H
#define UVMRT_LOG_H

#include "uvmrt.h"

typedef struct uvmrt_log {
    uvmrt_log_level_t level;
    uvmrt_log_fn fn; /* NULL: stderr */
    void *user;
} uvmrt_log_t;

void uvmrt__log_write(const uvmrt_log_t *log, uvmrt_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The program's short name (program_invocation_short_name), never NULL: the monitor
 * and the trace name the process with it. */
const char *uvmrt__program_name(void);

#define UVMRT_LOG(log, lvl, ...)                                                  \
    do {                                                                          \
        const uvmrt_log_t *log_ = (log);                                          \
        if (log_ == NULL || (lvl) <= log_->level) uvmrt__log_write(log_, (lvl), __VA_ARGS__); \
    } while (0)
#define LOG_ERROR(log, ...) UVMRT_LOG(log, UVMRT_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(log, ...) UVMRT_LOG(log, UVMRT_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(log, ...) UVMRT_LOG(log, UVMRT_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(log, ...) UVMRT_LOG(log, UVMRT_LOG_DEBUG, __VA_ARGS__)

#endif
