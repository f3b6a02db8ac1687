/*
 * pin_cost.c -- what a tensor's move into page-locked memory costs on this machine,
 * part by part (uvmrt_tensor_set_placement(PINNED) does them in this order): page-locked
 * allocation (cudaMallocHost), a fresh managed slot brought to the host by a prefetch,
 * the copy out of it (memcpy), and the slot's discard; beside a copy from a slot never
 * prefetched (the CPU's first-touch faults) and cudaHostRegister of malloc'd memory.
 *
 *   nvcc -O2 -o pin_cost bench/probes/pin_cost.c -lcuda     (or gcc with -lcudart)
 *   ./pin_cost [GiB per buffer, default 1] [buffers, default 4]
 *
 * Prints one line per part: seconds and GB/s per buffer. Allocates 3 x GiB x buffers of
 * managed memory at most; run it only where that much GPU memory is free.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        puts("usage: pin_cost [GiB per buffer] [buffers]");
        return 0;
    }
    double gib = argc > 1 ? atof(argv[1]) : 1.0;
    int n = argc > 2 ? atoi(argv[2]) : 4;
    size_t bytes = (size_t)(gib * 1073741824.0);
    cudaStream_t s;
    CK(cudaSetDevice(0));
    CK(cudaStreamCreate(&s));
    struct cudaMemLocation host = {.type = cudaMemLocationTypeHost, .id = 0};
    for (int i = 0; i < n; i++) {
        char *p, *m, *m2, *h;
        double t = now();
        CK(cudaMallocHost((void **)&p, bytes));
        line("cudaMallocHost", now() - t, bytes);
        t = now();
        memset(p, 0, bytes);
        line("  memset of it (first touch of pinned pages)", now() - t, bytes);
        CK(cudaMallocManaged((void **)&m, bytes, cudaMemAttachGlobal));
        t = now();
        CK(cudaMemPrefetchAsync(m, bytes, host, 0, s));
        CK(cudaStreamSynchronize(s));
        line("fresh managed slot: prefetch to the host", now() - t, bytes);
        t = now();
        memcpy(p, m, bytes);
        line("  memcpy out of it into the pinned buffer", now() - t, bytes);
        CK(cudaMallocManaged((void **)&m2, bytes, cudaMemAttachGlobal));
        t = now();
        memcpy(p, m2, bytes);
        line("fresh managed slot, no prefetch: memcpy out of it", now() - t, bytes);
        t = now();
        CK(cudaMemcpyAsync(p, m2 + 0, bytes, cudaMemcpyDefault, s));
        CK(cudaStreamSynchronize(s));
        line("  cudaMemcpyAsync of it (now host pages)", now() - t, bytes);
        h = malloc(bytes);
        t = now();
        memset(h, 1, bytes);
        line("malloc + memset", now() - t, bytes);
        t = now();
        CK(cudaHostRegister(h, bytes, cudaHostRegisterDefault));
        line("  cudaHostRegister of it", now() - t, bytes);
        t = now();
        CK(cudaHostUnregister(h));
        free(h);
        CK(cudaFree(m));
        CK(cudaFree(m2));
        CK(cudaFreeHost(p));
        line("unregister and frees", now() - t, bytes);
    }
    return 0;
}
