/*
 * abi.c -- reading and writing the public structs that grow, up to the caller's
 * struct_size (abi.h).
 */
#include <stdio.h>
#include <string.h>

#include "abi.h"

/* How a caller sets struct_size: the struct's init function where it has one. */
static void how_to_set(const char *type, char *buf, size_t n)
{
    static const char *const with_init[] = {"uvmrt_params_t", "uvmrt_layer_call_t", "uvmrt_adamw_t"};
    for (size_t i = 0; i < sizeof with_init / sizeof with_init[0]; i++)
        if (strcmp(type, with_init[i]) == 0) {
            snprintf(buf, n, "call %.*s_init first", (int)(strlen(type) - 2), type);
            return;
        }
    snprintf(buf, n, "set it with UVMRT_STRUCT_INIT(%s)", type);
}

uvmrt_status_t uvmrt__abi_size_check(const uvmrt_log_t *log, const char *fn, const char *type, size_t size,
                                     size_t lib_size)
{
    if (size >= sizeof(size_t) && size <= lib_size) return UVMRT_OK;
    char how[96];
    how_to_set(type, how, sizeof how);
    if (size == 0)
        LOG_ERROR(log, "%s: %s.struct_size is 0: expected sizeof(%s) (%zu bytes in this library; %s)", fn, type, type,
                  lib_size, how);
    else if (size > lib_size)
        LOG_ERROR(log,
                  "%s: %s.struct_size is %zu bytes, larger than this library's %s (%zu bytes): the program "
                  "was built against a newer uvmrt.h than the library it runs with (%s); expected at most %zu",
                  fn, type, size, type, lib_size, uvmrt_version_string(), lib_size);
    else
        LOG_ERROR(log, "%s: %s.struct_size is %zu bytes: expected %zu to %zu (sizeof(%s) in this library; %s)", fn,
                  type, size, sizeof(size_t), lib_size, type, how);
    return UVMRT_ERR_INVALID;
}

uvmrt_status_t uvmrt__abi_read(const uvmrt_log_t *log, const char *fn, const char *type, const void *in, void *full,
                               size_t lib_size)
{
    size_t size = UVMRT__SIZE_OF(in);
    uvmrt_status_t st = uvmrt__abi_size_check(log, fn, type, size, lib_size);
    if (st != UVMRT_OK) return st;
    memcpy(full, in, size);
    memcpy(full, &lib_size, sizeof lib_size);
    return UVMRT_OK;
}

void uvmrt__abi_write(void *out, void *full, size_t size)
{
    memcpy(full, &size, sizeof size);
    memcpy(out, full, size);
}
