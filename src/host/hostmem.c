/*
 * hostmem.c -- the host memory this process may use (hostmem.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostmem.h"
#include "uvmrt.h"

#define PATH_LEN 4096

/* The first unsigned number in the file, or 0 (also for "max" and unreadable files). */
static uint64_t read_number(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    char line[64] = "";
    uint64_t v = 0;
    if (fgets(line, sizeof line, f) != NULL) {
        char *end = NULL;
        unsigned long long x = strtoull(line, &end, 10);
        if (end != line) v = (uint64_t)x;
    }
    fclose(f);
    return v;
}

static int read_memtotal(const char *root, uint64_t *bytes)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char line[256];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        unsigned long long kib;
        if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
            *bytes = (uint64_t)kib * 1024;
            found = 1;
        }
    }
    fclose(f);
    return found ? 0 : -1;
}

/* The smallest limit in file `name` of cgroup dir base/cg and its parents (0: none). */
static uint64_t limit_up(const char *root, const char *base, const char *cg, const char *name)
{
    char dir[PATH_LEN], path[PATH_LEN + 64];
    snprintf(dir, sizeof dir, "%s", cg);
    uint64_t best = 0;
    for (;;) {
        size_t len = strlen(dir);
        while (len > 0 && dir[len - 1] == '/') dir[--len] = '\0';
        snprintf(path, sizeof path, "%s%s%s/%s", root, base, dir, name);
        uint64_t v = read_number(path);
        if (v > 0 && (best == 0 || v < best)) best = v;
        char *slash = strrchr(dir, '/');
        if (len == 0 || slash == NULL) break;
        *slash = '\0';
    }
    return best;
}

/* The cgroup limits of this process (0: none), and which kind gave the smallest. */
static uint64_t cgroup_limit(const char *root, const char **kind)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    char line[PATH_LEN];
    uint64_t best = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) continue;
        *c1 = '\0';
        *c2 = '\0';
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        uint64_t v = 0;
        const char *k = NULL;
        if (strcmp(line, "0") == 0 && ctrls[0] == '\0') {
            v = limit_up(root, "/sys/fs/cgroup", cg, "memory.max");
            k = "cgroup v2 memory.max";
        } else {
            char list[PATH_LEN];
            snprintf(list, sizeof list, ",%s,", ctrls);
            if (strstr(list, ",memory,") == NULL) continue;
            v = limit_up(root, "/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes");
            k = "cgroup v1 memory.limit_in_bytes";
        }
        if (v > 0 && (best == 0 || v < best)) {
            best = v;
            *kind = k;
        }
    }
    fclose(f);
    return best;
}

int uvmrt__host_memory(const char *root, uint64_t *bytes, char *source, size_t n)
{
    if (root == NULL || strcmp(root, "/") == 0) root = "";
    uint64_t total = 0;
    if (read_memtotal(root, &total) != 0) return -1;
    const char *kind = "MemTotal";
    uint64_t lim = cgroup_limit(root, &kind);
    if (lim > 0 && lim < total) total = lim;
    else kind = "MemTotal";
    *bytes = total;
    if (source && n) snprintf(source, n, "%s", kind);
    return 0;
}

uint64_t uvmrt__host_reserve(uint64_t total)
{
    uint64_t r = total / 10, floor = 2ull << 30;
    if (r < floor) r = floor;
    if (r > total / 2) r = total / 2;
    return r;
}

uvmrt_status_t uvmrt_host_memory(uint64_t *total_bytes, uint64_t *budget_bytes)
{
    uint64_t total = 0;
    if (uvmrt__host_memory(NULL, &total, NULL, 0) != 0) return UVMRT_ERR_IO;
    if (total_bytes) *total_bytes = total;
    if (budget_bytes) *budget_bytes = total - uvmrt__host_reserve(total);
    return UVMRT_OK;
}
