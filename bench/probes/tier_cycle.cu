/*
 * tier_cycle.cu -- what each step of the disk tier's cycle costs on this machine, on
 * managed memory placed as the tier places it (preferred location host, accessed by the
 * GPU): the CPU's first touch, an O_DIRECT write out of it, its discard, an O_DIRECT read
 * back into the discarded range, the GPU reading it over the link, a discarded range
 * brought to the host by a prefetch, a DMA copy from the GPU into it (a gradient's copy
 * out), the CPU reading what the DMA wrote, and the same read and write on plain
 * page-locked memory for comparison.
 *
 *   nvcc -O2 -o tier_cycle bench/probes/tier_cycle.cu
 *   ./tier_cycle DIR [GiB, default 1] [rounds, default 2]
 *
 * DIR: a directory on the disk to measure (a file of GiB bytes is made there and
 * removed). One line per step: seconds and GB/s. Allocates 2 x GiB of GPU-visible memory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <cuda_runtime.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

/* O_DIRECT transfers by 4 threads in 8 MiB pieces, as the tier's thread pool moves them */
typedef struct { int fd, write; char *buf; size_t bytes, first, step; long bad; } io_job_t;
#define PIECE ((size_t)8 << 20)
static void *io_main(void *arg) {
    io_job_t *j = (io_job_t *)arg;
    for (size_t off = j->first; off < j->bytes; off += j->step) {
        size_t len = j->bytes - off < PIECE ? j->bytes - off : PIECE;
        ssize_t r = j->write ? pwrite(j->fd, j->buf + off, len, (off_t)off) : pread(j->fd, j->buf + off, len, (off_t)off);
        if (r != (ssize_t)len) j->bad++;
    }
    return NULL;
}
static double transfer(int fd, int write, char *buf, size_t bytes) {
    enum { T = 4 };
    pthread_t th[T];
    io_job_t j[T];
    double t0 = now();
    for (int i = 0; i < T; i++) {
        j[i] = (io_job_t){fd, write, buf, bytes, (size_t)i * PIECE, T * PIECE, 0};
        pthread_create(&th[i], NULL, io_main, &j[i]);
    }
    long bad = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        bad += j[i].bad;
    }
    if (bad) fprintf(stderr, "tier_cycle: %ld short or failed %s\n", bad, write ? "writes" : "reads");
    return now() - t0;
}

__global__ void sum_kernel(const float4 *p, size_t n, float *out) {
    float s = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float4 v = p[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.0f) *out = s; /* keeps the loads */
}

static cudaMemLocation loc_of(int host) {
    cudaMemLocation l;
    l.type = host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    l.id = 0;
    return l;
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        puts("usage: tier_cycle DIR [GiB, default 1] [rounds, default 2]");
        return argc < 2;
    }
    size_t bytes = (size_t)((argc > 2 ? atof(argv[2]) : 1.0) * (1 << 30)) & ~(PIECE - 1);
    int rounds = argc > 3 ? atoi(argv[3]) : 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/tier_cycle.%d", argv[1], (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT, 0600);
    if (fd < 0) { perror(path); return 1; }
    unlink(path);
    if (posix_fallocate(fd, 0, (off_t)bytes) != 0) { fprintf(stderr, "fallocate failed\n"); return 1; }
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char *m, *dev, *pin;
    float *out;
    CK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
    CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, loc_of(1)));
    CK(cudaMemAdvise(m, bytes, cudaMemAdviseSetAccessedBy, loc_of(0)));
    CK(cudaMalloc(&dev, bytes));
    CK(cudaMalloc(&out, sizeof(float)));
    CK(cudaMemset(dev, 1, bytes));
    CK(cudaMallocHost(&pin, bytes));
    memset(pin, 1, bytes);
    void *ptrs[1] = {m};
    size_t sizes[1] = {bytes};
    double t;
    for (int r = 0; r < rounds; r++) {
        printf("round %d, %.2f GiB\n", r + 1, bytes / 1073741824.0);
        t = now(); memset(m, 2, bytes); line("CPU writes managed (first touch in round 1)", now() - t, bytes);
        line("O_DIRECT write out of CPU-resident managed", transfer(fd, 1, m, bytes), bytes);
        t = now(); CK(cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s)); CK(cudaStreamSynchronize(s));
        line("discard (host-resident managed)", now() - t, bytes);
        line("O_DIRECT read into the discarded range", transfer(fd, 0, m, bytes), bytes);
        t = now(); sum_kernel<<<1024, 256, 0, s>>>((const float4 *)m, bytes / 16, out); CK(cudaStreamSynchronize(s));
        line("GPU reads it over the link (after the read)", now() - t, bytes);
        t = now(); sum_kernel<<<1024, 256, 0, s>>>((const float4 *)m, bytes / 16, out); CK(cudaStreamSynchronize(s));
        line("GPU reads it again", now() - t, bytes);
        t = now(); CK(cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s)); CK(cudaStreamSynchronize(s));
        line("discard again", now() - t, bytes);
        cudaMemLocation h = loc_of(1);
        t = now(); CK(cudaMemPrefetchAsync(m, bytes, h, 0, s)); CK(cudaStreamSynchronize(s));
        line("prefetch of the discarded range to the host", now() - t, bytes);
        t = now(); CK(cudaMemcpyAsync(m, dev, bytes, cudaMemcpyDeviceToHost, s)); CK(cudaStreamSynchronize(s));
        line("DMA copy GPU -> managed (host-resident)", now() - t, bytes);
        t = now(); {
            volatile double acc = 0; const double *d = (const double *)m;
            double a = 0; for (size_t i = 0; i < bytes / 8; i += 512) a += d[i]; acc = a; (void)acc;
        } line("CPU touches every 4 KiB page the DMA wrote", now() - t, bytes);
        line("O_DIRECT write out of it", transfer(fd, 1, m, bytes), bytes);
        t = now(); CK(cudaMemDiscardBatchAsync(ptrs, sizes, 1, 0, s)); CK(cudaStreamSynchronize(s));
        t = now(); CK(cudaMemcpyAsync(m, dev, bytes, cudaMemcpyDeviceToHost, s)); CK(cudaStreamSynchronize(s));
        line("DMA copy GPU -> discarded managed (no prefetch)", now() - t, bytes);
        line("O_DIRECT read into CPU-resident managed", transfer(fd, 0, m, bytes), bytes);
        line("O_DIRECT write out of page-locked", transfer(fd, 1, pin, bytes), bytes);
        line("O_DIRECT read into page-locked", transfer(fd, 0, pin, bytes), bytes);
    }
    close(fd);
    return 0;
}
