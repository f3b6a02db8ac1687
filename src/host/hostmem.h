/*
 * hostmem.h -- how much host memory the machine gives this process: the smallest
 * of /proc/meminfo's MemTotal and the memory limits of the cgroups it runs in (v2
 * memory.max, v1 memory.limit_in_bytes, this cgroup's and its parents'), so that a
 * container's limit counts; and the auto host budget, that less a reserve.
 */
#ifndef UVMRT_HOSTMEM_H
#define UVMRT_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

/* The machine's memory as seen from root ("" or "/": this machine's /proc and
 * /sys/fs/cgroup; tests pass a directory holding copies). *bytes receives it and
 * source (n bytes) names where it came from ("cgroup v2 memory.max", "MemTotal").
 * -1 when MemTotal cannot be read. */
int uvmrt__host_memory(const char *root, uint64_t *bytes, char *source, size_t n);
/* The reserve kept free from total: 10%, at least 2 GiB, but at most half of total. */
uint64_t uvmrt__host_reserve(uint64_t total);

#endif
