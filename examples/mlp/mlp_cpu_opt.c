/* mlp_cpu_opt.c -- see mlp_cpu_opt.h. */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "mlp_cpu_opt.h"

#define RING 4

struct mlp_cpu_opt {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started;
    int L, steps;
    int *K;                /* (steps,) step s updates blocks L-K[s]..L-1 here */
    int k_set;             /* the last step whose K (and scale) is set */
    int *recorded;         /* (L,) last step whose backward i has its event recorded */
    int *done;             /* (L,) last step whose update of block i has finished */
    float *scale;          /* (steps,) loss scale of each step (fp16) */
    cudaEvent_t *ev;       /* (L,) recorded after backward i */
    void *(*data)[5];      /* (L, 5) W, m, v, dW, Wh of each block */
    volatile int *found_inf; /* (steps,) mapped host memory: inf/NaN gradients in step s */
    unsigned *stage_flag;  /* (L,) mapped host memory or NULL: s + 1 once block i's update of
                              step s is done (the GPU's staged half copy waits for it) */
    int device;            /* the context's GPU: made current on the thread */
    int numa_node;
    int quit;              /* 1: stop; 2: the thread failed */
    double *adamw_s;       /* (steps,) step s's time in AdamW */
    double *wait_s;        /* (steps,) step s's time waiting for its backward's events */
    /* (RING, L): block i's AdamW seconds in step s at [s % RING][i], and that s (-1:
     * none), so the main thread reads a finished step while the thread runs the next */
    double *block_s;
    int *block_step;
    /* copied from the run: the thread reads nothing else of it */
    mlp_half_kind_t precision;
    double lr;
    size_t hh;
    int quiet;
};

static int wait_recorded(mlp_cpu_opt_t *c, int i, int s) {
    pthread_mutex_lock(&c->mu);
    while (c->recorded[i] < s && !c->quit)
        pthread_cond_wait(&c->cv, &c->mu);
    int quit = c->quit;
    pthread_mutex_unlock(&c->mu);
    return !quit;
}

/* The step's K, once the main thread has set it (1), or 0 to stop. */
static int wait_step(mlp_cpu_opt_t *c, int s, int *K) {
    pthread_mutex_lock(&c->mu);
    while (c->k_set < s && !c->quit)
        pthread_cond_wait(&c->cv, &c->mu);
    int quit = c->quit;
    *K = c->K[s];
    pthread_mutex_unlock(&c->mu);
    return !quit;
}

/* Lets every staged copy's wait pass (the thread stops or failed): the GPU must not
 * wait for updates that will never come. */
static void release_flags(mlp_cpu_opt_t *c) {
    for (int i = 0; c->stage_flag != NULL && i < c->L; i++)
        __atomic_store_n(&c->stage_flag[i], 1u << 30, __ATOMIC_RELEASE);
}

static void *cpu_opt_main(void *arg) {
    mlp_cpu_opt_t *c = arg;
    int fp16 = c->precision == MLP_FP16;
    long t = 0;
    const char *why = NULL;
    if (cudaSetDevice(c->device) != cudaSuccess)
        goto fail;
    if (mlp_cpu_pin_node(c->numa_node, &why) != 0 && !c->quiet)
        printf("  cpu optimizer: not pinned (%s)\n", why);
    for (int s = 0; s < c->steps; s++) {
        int skip = 0, K = 0;
        if (!wait_step(c, s, &K))
            return NULL;
        if (fp16) { /* the whole backward decides whether the step counts */
            if (!wait_recorded(c, 0, s))
                return NULL;
            if (cudaEventSynchronize(c->ev[0]) != cudaSuccess)
                goto fail;
            skip = c->found_inf[s] != 0;
        }
        pthread_mutex_lock(&c->mu);
        double scale = fp16 ? (double)c->scale[s] : 1.0;
        pthread_mutex_unlock(&c->mu);
        uvmrt_adamw_t hp = mlp_adamw_hp(c->lr, MLP_ADAMW_WD, t + 1, scale);
        for (int i = c->L - 1; i >= c->L - K; i--) {
            double w0 = cli_now_s();
            if (!wait_recorded(c, i, s))
                return NULL;
            if (cudaEventSynchronize(c->ev[i]) != cudaSuccess)
                goto fail;
            double t0 = cli_now_s(), busy = 0.0;
            c->wait_s[s] += t0 - w0;
            if (!skip) {
                void **d = c->data[i];
                /* W only: the block's forward makes Wh from it on the GPU (mlp_gpu_forward) */
                uvmrt_status_t st = uvmrt_adamw_cpu(&hp, d[0], d[1], d[2], d[3], c->hh, NULL);
                if (st != UVMRT_OK) {
                    fprintf(stderr, PROG ": cpu optimizer: uvmrt_adamw_cpu: %s\n",
                            uvmrt_status_str(st));
                    goto stop;
                }
                busy = cli_now_s() - t0;
                c->adamw_s[s] += busy;
            }
            if (c->stage_flag != NULL) { /* every store of the update first (streaming ones too) */
                __atomic_thread_fence(__ATOMIC_SEQ_CST);
                __atomic_store_n(&c->stage_flag[i], (unsigned)s + 1, __ATOMIC_RELEASE);
            }
            pthread_mutex_lock(&c->mu);
            c->done[i] = s;
            c->block_s[(s % RING) * c->L + i] = busy;
            c->block_step[(s % RING) * c->L + i] = s;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
        if (!skip)
            t++;
    }
    return NULL;
fail:
    fprintf(stderr, PROG ": cpu optimizer: a CUDA call failed: %s\n",
            cudaGetErrorString(cudaGetLastError()));
stop:
    release_flags(c);
    pthread_mutex_lock(&c->mu);
    c->quit = 2;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

mlp_cpu_opt_t *mlp_cpu_opt_start(mlp_run_t *run, volatile int *found_inf, unsigned *stage_flag) {
    const mlp_options_t *opt = run->opt;
    int L = run->net.L, S = opt->c.steps;
    mlp_cpu_opt_t *c = calloc(1, sizeof *c);
    if (c == NULL)
        run_fail(run, "out of host memory for the CPU optimizer");
    *c = (mlp_cpu_opt_t){.L = L, .steps = S, .k_set = -1, .found_inf = found_inf, .stage_flag = stage_flag,
                         .numa_node = -1, .precision = opt->precision,
                         .lr = opt->lr, .hh = run->net.hh, .quiet = opt->c.quiet};
    c->recorded = malloc((size_t)L * sizeof(int));
    c->done = malloc((size_t)L * sizeof(int));
    c->scale = calloc((size_t)S, sizeof(float));
    c->K = calloc((size_t)S, sizeof(int));
    c->adamw_s = calloc((size_t)S, sizeof(double));
    c->wait_s = calloc((size_t)S, sizeof(double));
    c->block_s = calloc((size_t)RING * L, sizeof(double));
    c->block_step = malloc((size_t)RING * L * sizeof(int));
    c->ev = calloc((size_t)L, sizeof(cudaEvent_t));
    c->data = calloc((size_t)L, sizeof *c->data);
    /* failures below stop c through the run's cleanup: hand it over first */
    if (!c->recorded || !c->done || !c->scale || !c->K || !c->adamw_s || !c->wait_s || !c->block_s ||
        !c->block_step || !c->ev || !c->data) {
        mlp_cpu_opt_stop(c);
        run_fail(run, "out of host memory for the CPU optimizer");
    }
    for (int i = 0; i < L; i++) {
        const mlp_block_t *b = &run->net.blocks[i];
        void *d[5] = {mlp_ptr(b->W), mlp_ptr(b->m), mlp_ptr(b->v), mlp_ptr(b->dW), mlp_ptr(b->Wh)};
        memcpy(c->data[i], d, sizeof d);
        c->recorded[i] = c->done[i] = -1;
    }
    for (int k = 0; k < RING * L; k++)
        c->block_step[k] = -1;
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < L && e == cudaSuccess; i++)
        e = cudaEventCreateWithFlags(&c->ev[i], cudaEventDisableTiming | cudaEventBlockingSync);
    if (e == cudaSuccess)
        e = cudaGetDevice(&c->device);
    if (e != cudaSuccess) {
        mlp_cpu_opt_stop(c);
        run_fail(run, "CPU optimizer: CUDA events: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    }
#if CUDART_VERSION >= 12020 /* cudaDevAttrHostNumaId is CUDA 12.2+; before it: no NUMA hint */
    if (cudaDeviceGetAttribute(&c->numa_node, cudaDevAttrHostNumaId, c->device) != cudaSuccess)
        c->numa_node = -1;
#endif
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->started = 1;
    if (pthread_create(&c->thread, NULL, cpu_opt_main, c) != 0) {
        c->started = 0;
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        mlp_cpu_opt_stop(c);
        run_fail(run, "cannot start the CPU optimizer thread");
    }
    if (!opt->c.quiet)
        printf("  cpu optimizer: AdamW path %s, host NUMA node of the GPU %d\n",
               mlp_isa_name(run->isa), c->numa_node);
    return c;
}

void mlp_cpu_opt_step(mlp_cpu_opt_t *c, int s, double scale, int K) {
    pthread_mutex_lock(&c->mu);
    c->scale[s] = (float)scale;
    c->K[s] = K;
    c->k_set = s;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void mlp_cpu_opt_recorded(mlp_run_t *run, mlp_cpu_opt_t *c, int i, int s, uvmrt_stream_t stream) {
    CUDA_CHECK(run, cudaEventRecord(c->ev[i], (cudaStream_t)stream));
    pthread_mutex_lock(&c->mu);
    c->recorded[i] = s;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void mlp_cpu_opt_wait_done(mlp_run_t *run, mlp_cpu_opt_t *c, int i, int s) {
    pthread_mutex_lock(&c->mu);
    /* a block step s does not update here (not in its top K, or a step not given to
     * the thread): nothing to wait for, or the wait would never end */
    int K = s >= 0 && s <= c->k_set ? c->K[s] : 0;
    if (i < c->L - K) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    while (c->done[i] < s && !c->quit)
        pthread_cond_wait(&c->cv, &c->mu);
    int quit = c->quit;
    pthread_mutex_unlock(&c->mu);
    if (quit)
        run_fail(run, "the CPU optimizer thread failed");
}

double mlp_cpu_opt_busy_s(const mlp_cpu_opt_t *c) {
    double sum = 0.0;
    for (int s = 0; s < c->steps; s++)
        sum += c->adamw_s[s];
    return sum;
}

int mlp_cpu_opt_block_time(mlp_cpu_opt_t *c, int s, int i, double *sec) {
    pthread_mutex_lock(&c->mu);
    int k = (s % RING) * c->L + i;
    int ok = s >= 0 && c->block_step[k] == s && c->done[i] >= s && c->block_s[k] > 0;
    *sec = ok ? c->block_s[k] : 0.0;
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void mlp_cpu_opt_step_times(const mlp_cpu_opt_t *c, int s, double *adamw_s, double *wait_s) {
    *adamw_s = c->adamw_s[s];
    *wait_s = c->wait_s[s];
}

void mlp_cpu_opt_stop(mlp_cpu_opt_t *c) {
    if (c == NULL)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        if (!c->quit)
            c->quit = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        release_flags(c);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
    }
    if (c->ev)
        for (int i = 0; i < c->L; i++)
            if (c->ev[i])
                cudaEventDestroy(c->ev[i]);
    free(c->recorded);
    free(c->done);
    free(c->scale);
    free(c->K);
    free(c->adamw_s);
    free(c->wait_s);
    free(c->block_s);
    free(c->block_step);
    free(c->ev);
    free(c->data);
    free(c);
}
