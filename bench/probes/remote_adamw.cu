/*
 * remote_adamw.cu -- the GPU's AdamW over host-homed state, alone and beside the CPU's
 * AdamW (issue 24: uvmrt-gpt's GPU layers whose state lives in host memory moved 12-17
 * GB/s of link traffic in the step, where uvmrt-calibrate measures 51 GB/s each way for a
 * kernel reading host memory alone).
 *
 *   nvcc -O2 -Iinclude -o remote_adamw bench/probes/remote_adamw.cu -LBUILD/src/.libs -luvmrt
 *   ./remote_adamw [MPARAMS [CPU_THREADS]]      (defaults 64 and 14: uvmrt-gpt's team)
 *
 * State: MPARAMS M fp32 w, m, v in managed memory preferring the host, mapped for the GPU
 * (uvmrt's host-homed tensors), first touched by the CPU; the gradient and the bf16 copy
 * in device memory. Each case runs uvmrt_adamw_gpu five times on its own stream and
 * prints its rate each way (12 bytes a parameter read, 12 written), by the number of
 * blocks the kernel may take (UVMRT_ADAMW_LINK_BLOCKS: 16 is uvmrt's default on the
 * H200), first alone, then while CPU_THREADS threads run uvmrt_adamw_cpu over other
 * arrays (2 x MPARAMS parameters in plain host memory) without a pause, whose rate
 * beside it is printed too. Needs a GPU and about 1.5 x MPARAMS x 28 bytes of host memory.
 */
#include <pthread.h>
#include <atomic>
#include <stdint.h>
#include <string.h>

#include "probe.h"
#include "uvmrt.h"

typedef struct cpu_side {
    size_t n;
    int threads;
    float *w, *m, *v, *g;
    std::atomic<int> stop;
    double params, seconds;
} cpu_side_t;

static void *cpu_loop(void *p) {
    cpu_side_t *c = (cpu_side_t *)p;
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    hp.threads = c->threads;
    double t0 = now();
    double done = 0;
    while (!c->stop.load()) {
        if (uvmrt_adamw_cpu(&hp, c->w, c->m, c->v, c->g, c->n, NULL) != UVMRT_OK) {
            fprintf(stderr, "uvmrt_adamw_cpu failed\n");
            exit(1);
        }
        done += (double)c->n;
        hp.step++;
    }
    c->params = done;
    c->seconds = now() - t0;
    return NULL;
}

static void advise_host(void *p, size_t bytes, int dev) {
#if CUDART_VERSION >= 13000
    cudaMemLocation host = {cudaMemLocationTypeHost, 0}, gpu = {cudaMemLocationTypeDevice, dev};
    CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, host));
    CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, gpu));
#else
    CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId));
    CK(cudaMemAdvise(p, bytes, cudaMemAdviseSetAccessedBy, dev));
#endif
}

/* five updates; seconds of the median one */
static double gpu_adamw(float *w, float *m, float *v, const float *g, uint16_t *half, size_t n,
                        cudaStream_t s) {
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    cudaEvent_t e[6];
    for (int i = 0; i < 6; i++) CK(cudaEventCreate(&e[i]));
    CK(cudaEventRecord(e[0], s));
    for (int r = 0; r < 5; r++) {
        hp.step = (uint64_t)r + 1;
        if (uvmrt_adamw_gpu(&hp, w, m, v, g, n, half, NULL, (uvmrt_stream_t)s) != UVMRT_OK) {
            fprintf(stderr, "uvmrt_adamw_gpu failed\n");
            exit(1);
        }
        CK(cudaEventRecord(e[r + 1], s));
    }
    CK(cudaStreamSynchronize(s));
    float ms[5];
    for (int r = 0; r < 5; r++) CK(cudaEventElapsedTime(&ms[r], e[r], e[r + 1]));
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (ms[j] < ms[i]) { float t = ms[i]; ms[i] = ms[j]; ms[j] = t; }
    for (int i = 0; i < 6; i++) CK(cudaEventDestroy(e[i]));
    return ms[2] * 1e-3;
}

int main(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: remote_adamw [MPARAMS [CPU_THREADS]]\n");
        return 0;
    }
    size_t mp = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
    int threads = argc > 2 ? atoi(argv[2]) : 14;
    if (mp == 0 || mp > 4096 || threads <= 0) {
        fprintf(stderr, "remote_adamw: MPARAMS in 1..4096 and CPU_THREADS > 0 expected\n");
        return 2;
    }
    size_t n = mp << 20, bytes = n * 4;
    int dev = 0;
    CK(cudaGetDevice(&dev));
    float *w, *m, *v, *g;
    uint16_t *half;
    CK(cudaMallocManaged(&w, bytes, cudaMemAttachGlobal));
    CK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
    CK(cudaMallocManaged(&v, bytes, cudaMemAttachGlobal));
    advise_host(w, bytes, dev), advise_host(m, bytes, dev), advise_host(v, bytes, dev);
    for (size_t i = 0; i < n; i++) w[i] = 0.01f, m[i] = 0.0f, v[i] = 0.0f; /* first touch: the host */
    CK(cudaMalloc(&g, bytes));
    CK(cudaMalloc(&half, n * 2));
    CK(cudaMemset(g, 0, bytes));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    cpu_side_t c;
    c.stop.store(0), c.params = 0, c.seconds = 0;
    c.n = 2 * n, c.threads = threads;
    c.w = (float *)calloc(c.n, 4), c.m = (float *)calloc(c.n, 4), c.v = (float *)calloc(c.n, 4);
    c.g = (float *)calloc(c.n, 4);
    if (!c.w || !c.m || !c.v || !c.g) {
        fprintf(stderr, "remote_adamw: out of host memory\n");
        return 1;
    }
    /* the CPU alone, 2 s */
    c.stop.store(0);
    pthread_t th;
    pthread_create(&th, NULL, cpu_loop, &c);
    double t0 = now();
    while (now() - t0 < 2.0) {}
    c.stop.store(1);
    pthread_join(th, NULL);
    printf("cpu adamw alone, %d threads: %.2f Gparam/s (%.1f GB/s of host memory)\n", threads,
           c.params / c.seconds / 1e9, c.params * 28 / c.seconds / 1e9);
    fflush(stdout);

    const char *blocks[] = {"16", "32", "64", "132", "264", "1056"};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        setenv("UVMRT_ADAMW_LINK_BLOCKS", blocks[b], 1);
        (void)gpu_adamw(w, m, v, g, half, n, s); /* warm: the mapping */
        double alone = gpu_adamw(w, m, v, g, half, n, s);
        c.stop.store(0);
        pthread_create(&th, NULL, cpu_loop, &c);
        t0 = now();
        while (now() - t0 < 0.3) {}
        double beside = gpu_adamw(w, m, v, g, half, n, s);
        c.stop.store(1);
        pthread_join(th, NULL);
        printf("gpu adamw over host state, %4s blocks: alone %6.2f GB/s each way (%.2f Gparam/s); beside the "
               "cpu's %6.2f GB/s each way (%.2f Gparam/s), the cpu then %.2f Gparam/s\n",
               blocks[b], 12.0 * n / alone / 1e9, n / alone / 1e9, 12.0 * n / beside / 1e9, n / beside / 1e9,
               c.params / c.seconds / 1e9);
        fflush(stdout);
    }
    return 0;
}
