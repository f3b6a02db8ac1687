/*
 * abi.h -- the rule for the public structs that grow (uvmrt.h, "structs that grow"):
 * the caller's struct_size says how much of a struct the library may read or write.
 */
#ifndef UVMRT_ABI_H
#define UVMRT_ABI_H

#include "log.h"

/* UVMRT_OK when size is one a caller may give for a struct of which this library knows
 * lib_size bytes (at least the struct_size field, at most lib_size); otherwise logs, for
 * the function fn, why not, naming the struct and both sizes, and returns UVMRT_ERR_INVALID. */
uvmrt_status_t uvmrt__abi_size_check(const uvmrt_log_t *log, const char *fn, const char *type, size_t size,
                                     size_t lib_size);

/* An input struct: *full holds the defaults of every field; the caller's first
 * in->struct_size bytes replace them (full's struct_size becomes the library's). */
uvmrt_status_t uvmrt__abi_read(const uvmrt_log_t *log, const char *fn, const char *type, const void *in, void *full,
                               size_t lib_size);

/* An output struct: writes the first `size` bytes of the library's *full (size checked
 * by uvmrt__abi_size_check) to out, struct_size included, which is set to size. */
void uvmrt__abi_write(void *out, void *full, size_t size);

/* The struct_size of any public struct that has one (its first field). */
#define UVMRT__SIZE_OF(ptr) (*(const size_t *)(const void *)(ptr))

#define UVMRT__ABI_CHECK(log, fn, type, ptr) \
    uvmrt__abi_size_check((log), (fn), #type, UVMRT__SIZE_OF(ptr), sizeof(type))
#define UVMRT__ABI_READ(log, fn, type, in, full) uvmrt__abi_read((log), (fn), #type, (in), (full), sizeof(type))
/* out (checked) = *full, up to out's own struct_size */
#define UVMRT__ABI_WRITE(out, full) uvmrt__abi_write((out), (full), UVMRT__SIZE_OF(out))

#endif
