/*
 * diskmeasure.c -- the disk tier's bandwidth (diskmeasure.h).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "diskmeasure.h"
#include "spill.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_of(const double *v, int n)
{
    double *s = malloc((size_t)n * sizeof *s);
    if (s == NULL) return 0;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    free(s);
    return m;
}

/* One timed transfer each way per repetition (the first of each untimed). */
static int timed(uvmrt_spill_t *sp, int f, void *buf, uint64_t bytes, int reps, disk_rates_t *out)
{
    for (int r = -1; r < reps; r++) {
        double t0 = now_s();
        if (uvmrt__spill_transfer(sp, f, 1, buf, bytes) != UVMRT_OK) return -1;
        double t1 = now_s();
        if (uvmrt__spill_transfer(sp, f, 0, buf, bytes) != UVMRT_OK) return -1;
        double t2 = now_s();
        if (r < 0) continue;
        out->write_samples[r] = (double)bytes / (t1 - t0);
        out->read_samples[r] = (double)bytes / (t2 - t1);
    }
    return 0;
}

int disk_measure(const char *dir, uint64_t bytes, int reps, disk_rates_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    struct statvfs v;
    if (statvfs(dir, &v) != 0) {
        snprintf(err, errlen, "%s: cannot read its filesystem's free space", dir);
        return -1;
    }
    uint64_t free_bytes = (uint64_t)v.f_bavail * v.f_frsize;
    if (bytes > free_bytes / 4) bytes = free_bytes / 4;
    bytes = bytes / UVMRT_SPILL_ALIGN * UVMRT_SPILL_ALIGN;
    if (bytes < (1u << 20) || reps < 1) {
        snprintf(err, errlen, "%s: %llu bytes free: too little to measure (at least 4 MiB)", dir,
                 (unsigned long long)free_bytes);
        return -1;
    }
    uvmrt_log_t log = {UVMRT_LOG_WARN, NULL, NULL};
    uvmrt_spill_t *sp = NULL;
    if (uvmrt__spill_open(dir, NULL, &log, &sp) != UVMRT_OK) {
        snprintf(err, errlen, "%s: cannot use it as the disk tier's directory (see above)", dir);
        return -1;
    }
    void *buf = NULL;
    int f = -1, rc = -1;
    out->read_samples = calloc((size_t)reps, sizeof(double));
    out->write_samples = calloc((size_t)reps, sizeof(double));
    if (out->read_samples && out->write_samples && posix_memalign(&buf, UVMRT_SPILL_ALIGN, bytes) == 0 &&
        uvmrt__spill_file_create(sp, "uvmrt-calibrate", bytes, &f) == UVMRT_OK) {
        memset(buf, 0x5a, bytes); /* touched: no first-touch page faults in the timing */
        rc = timed(sp, f, buf, bytes, reps, out);
    }
    if (rc == 0) {
        out->read_bps = median_of(out->read_samples, reps);
        out->write_bps = median_of(out->write_samples, reps);
        out->io_uring = strcmp(uvmrt__spill_engine(sp), "io_uring") == 0;
        out->direct = uvmrt__spill_direct(sp);
        snprintf(out->why, sizeof out->why, "%s", uvmrt__spill_engine_why(sp));
        out->bytes = bytes;
    } else {
        snprintf(err, errlen, "%s: the timed transfers failed (see above)", dir);
        free(out->read_samples);
        free(out->write_samples);
        out->read_samples = out->write_samples = NULL;
    }
    free(buf);
    uvmrt__spill_close(sp);
    return rc;
}
