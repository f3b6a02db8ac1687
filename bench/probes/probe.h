/*
 * probe.h -- what the CUDA probes in bench/probes share: a clock, a CUDA call checked
 * (the probe stops on the first failure, naming the call), and one result line (a
 * step's seconds and its bytes' GB/s).
 */
#ifndef UVMRT_BENCH_PROBE_H
#define UVMRT_BENCH_PROBE_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

static void line(const char *what, double s, size_t bytes) {
    printf("%-60s %8.3f s  %8.2f GB/s\n", what, s, bytes / s / 1e9);
    fflush(stdout);
}

#endif
