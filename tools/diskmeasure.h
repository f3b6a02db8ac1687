/*
 * diskmeasure.h -- the disk tier's bandwidth in a directory, measured through the
 * tier's own spill module (src/host/spill.h): for uvmrt-calibrate --spill-dir.
 */
#ifndef UVMRT_DISKMEASURE_H
#define UVMRT_DISKMEASURE_H

#include <stddef.h>
#include <stdint.h>

typedef struct disk_rates {
    double read_bps, write_bps;           /* medians of the timed repetitions */
    double *read_samples, *write_samples; /* reps each, bytes/s (caller frees) */
    int io_uring;                         /* 1: the io_uring engine ran */
    int direct;                           /* 1: O_DIRECT (0: the filesystem refused it, buffered) */
    char why[160];                        /* why that engine */
    uint64_t bytes;                       /* bytes per transfer */
} disk_rates_t;

/* Writes then reads a file of bytes (rounded to 4 KiB; less when the disk has less than
 * four times that free) in dir, reps times each after one warm-up, and removes it.
 * 0, or -1 with the reason in err (the directory, the free space). */
int disk_measure(const char *dir, uint64_t bytes, int reps, disk_rates_t *out, char *err, size_t errlen);

#endif
