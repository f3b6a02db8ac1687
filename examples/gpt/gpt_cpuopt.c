/*
 * gpt_cpuopt.c -- uvmrt-gpt's CPU optimizer thread (--cpu-layers K; see gpt_cpuopt.h):
 * the library's AVX-512/AVX2 AdamW (uvmrt_adamw_cpu) on its layers once a step's backward has
 * finished on the GPU.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_cpuopt.h"

uvmrt_status_t gpt_cpuopt_update(const gpt_cpuopt_layer_t *l, const uvmrt_adamw_t *hp, float clip) {
    uvmrt_adamw_t hd = *hp;
    hd.grad_scale = clip;
    uvmrt_adamw_t hn = hd;
    hn.weight_decay = 0.0;
    /* w only: the layer's forward makes wh from it on the GPU (gpt.c, weights_ready) */
    uvmrt_status_t st = uvmrt_adamw_cpu(&hd, l->w, l->m, l->v, l->g, l->n_decay, NULL);
    if (st == UVMRT_OK)
        st = uvmrt_adamw_cpu(&hn, l->w + l->n_decay, l->m + l->n_decay, l->v + l->n_decay,
                             l->g + l->n_decay, l->n - l->n_decay, NULL);
    return st;
}

#if defined(UVMRT_HAVE_CUDA) && defined(UVMRT_HAVE_CUBLAS)
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "../common/cli.h"

static const char *cuda_text(cudaError_t e, const char *what) {
    static __thread char buf[256];
    if (e == cudaSuccess)
        return NULL;
    snprintf(buf, sizeof buf, "%s failed: %s (%s)", what, cudaGetErrorString(e),
             cudaGetErrorName(e));
    return buf;
}

struct gpt_cpuopt {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, quit, failed;
    int nlayers, nl;
    gpt_cpuopt_layer_t *layers; /* (nlayers,) in forward order */
    int *done;          /* (nl,) last step whose update of layer i is done; INT_MAX for a
                           layer the GPU updates */
    int submitted;      /* last step submitted */
    uvmrt_adamw_t hp;   /* the last step submitted's */
    cudaEvent_t ev;
    int device;
    const volatile float *clip_host;
    double busy_s;
    /* (RING, nl): layer i's AdamW seconds in step s at [s % RING][i], and that s (-1:
     * none), so the main thread reads a finished step while the thread runs the next */
    double *layer_s;
    int *layer_step;
};

#define RING 4

static void *cpuopt_main(void *arg) {
    gpt_cpuopt_t *c = arg;
    if (cudaSetDevice(c->device) != cudaSuccess)
        goto fail;
    for (int s = 0;; s++) {
        pthread_mutex_lock(&c->mu);
        while (c->submitted < s && !c->quit)
            pthread_cond_wait(&c->cv, &c->mu);
        int quit = c->quit && c->submitted < s;
        uvmrt_adamw_t hd = c->hp;
        pthread_mutex_unlock(&c->mu);
        if (quit)
            return NULL;
        if (cudaEventSynchronize(c->ev) != cudaSuccess)
            goto fail;
        float clip = c->clip_host[1];
        double t0 = cli_now_s();
        for (int i = 0; i < c->nlayers; i++) {
            const gpt_cpuopt_layer_t *l = &c->layers[i];
            double tl = cli_now_s();
            uvmrt_status_t st = gpt_cpuopt_update(l, &hd, clip);
            if (st != UVMRT_OK) {
                fprintf(stderr, "uvmrt-gpt: cpu optimizer: uvmrt_adamw_cpu: %s\n",
                        uvmrt_status_str(st));
                goto stop;
            }
            pthread_mutex_lock(&c->mu);
            c->done[l->layer] = s;
            c->layer_s[(s % RING) * c->nl + l->layer] = cli_now_s() - tl;
            c->layer_step[(s % RING) * c->nl + l->layer] = s;
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
        }
        c->busy_s += cli_now_s() - t0;
    }
fail:
    fprintf(stderr, "uvmrt-gpt: cpu optimizer: a CUDA call failed: %s\n",
            cudaGetErrorString(cudaGetLastError()));
stop:
    pthread_mutex_lock(&c->mu);
    c->failed = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

gpt_cpuopt_t *gpt_cpuopt_start(int nl, int nlayers, const gpt_cpuopt_layer_t *layers,
                               const float *clip_host, char *err, size_t errlen) {
    for (int i = 0; i < nlayers; i++)
        if (layers[i].layer < 0 || layers[i].layer >= nl) {
            snprintf(err, errlen, "layer %d: expected 0..%d", layers[i].layer, nl - 1);
            return NULL;
        }
    gpt_cpuopt_t *c = calloc(1, sizeof *c);
    if (c == NULL || (c->layers = malloc((size_t)nlayers * sizeof *layers)) == NULL ||
        (c->done = malloc((size_t)nl * sizeof(int))) == NULL ||
        (c->layer_s = calloc((size_t)RING * nl, sizeof(double))) == NULL ||
        (c->layer_step = malloc((size_t)RING * nl * sizeof(int))) == NULL) {
        snprintf(err, errlen, "out of host memory");
        gpt_cpuopt_stop(c);
        return NULL;
    }
    memcpy(c->layers, layers, (size_t)nlayers * sizeof *layers);
    for (int i = 0; i < nl; i++)
        c->done[i] = INT_MAX; /* the GPU's: never waited for */
    for (int i = 0; i < nlayers; i++)
        c->done[layers[i].layer] = -1;
    for (int i = 0; i < RING * nl; i++)
        c->layer_step[i] = -1;
    c->nlayers = nlayers;
    c->nl = nl;
    c->submitted = -1;
    c->clip_host = clip_host;
    const char *why = cuda_text(cudaGetDevice(&c->device), "cudaGetDevice");
    if (why == NULL)
        why = cuda_text(cudaEventCreateWithFlags(&c->ev, cudaEventDisableTiming |
                                                             cudaEventBlockingSync),
                        "cudaEventCreateWithFlags");
    if (why) {
        snprintf(err, errlen, "%s", why);
        gpt_cpuopt_stop(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, cpuopt_main, c) != 0) {
        snprintf(err, errlen, "cannot start the CPU optimizer thread");
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
        gpt_cpuopt_stop(c);
        return NULL;
    }
    c->started = 1;
    return c;
}

const char *gpt_cpuopt_submit(gpt_cpuopt_t *c, gpt_gpu_t *g, int step, const uvmrt_adamw_t *hp) {
    const char *why = cuda_text(cudaEventRecord(c->ev, (cudaStream_t)gpt_gpu_stream(g)),
                                "cudaEventRecord");
    if (why)
        return why;
    pthread_mutex_lock(&c->mu);
    c->hp = *hp;
    c->submitted = step;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int gpt_cpuopt_wait(gpt_cpuopt_t *c, int layer, int step) {
    if (layer < 0 || layer >= c->nl)
        return -1;
    pthread_mutex_lock(&c->mu);
    while (c->done[layer] < step && !c->failed)
        pthread_cond_wait(&c->cv, &c->mu);
    int failed = c->failed;
    pthread_mutex_unlock(&c->mu);
    return failed ? -1 : 0;
}

double gpt_cpuopt_busy_s(const gpt_cpuopt_t *c) { return c ? c->busy_s : 0.0; }

int gpt_cpuopt_layer_time(gpt_cpuopt_t *c, int layer, int step, double *sec) {
    *sec = 0.0;
    if (c == NULL || layer < 0 || layer >= c->nl || step < 0)
        return 0;
    pthread_mutex_lock(&c->mu);
    int k = (step % RING) * c->nl + layer;
    int ok = c->layer_step[k] == step && c->done[layer] >= step && c->layer_s[k] > 0;
    if (ok)
        *sec = c->layer_s[k];
    pthread_mutex_unlock(&c->mu);
    return ok;
}

void gpt_cpuopt_stop(gpt_cpuopt_t *c) {
    if (c == NULL)
        return;
    if (c->started) {
        pthread_mutex_lock(&c->mu);
        c->quit = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        pthread_join(c->thread, NULL);
        pthread_mutex_destroy(&c->mu);
        pthread_cond_destroy(&c->cv);
    }
    if (c->ev)
        cudaEventDestroy(c->ev);
    free(c->layers);
    free(c->done);
    free(c->layer_s);
    free(c->layer_step);
    free(c);
}

#else /* no CUDA + cuBLAS: never started (gpt.c runs on sim) */

static const char *NO_GPU = "built without CUDA and cuBLAS";

gpt_cpuopt_t *gpt_cpuopt_start(int nl, int nlayers, const gpt_cpuopt_layer_t *layers,
                               const float *clip_host, char *err, size_t errlen) {
    (void)nl, (void)nlayers, (void)layers, (void)clip_host;
    snprintf(err, errlen, "%s", NO_GPU);
    return NULL;
}
const char *gpt_cpuopt_submit(gpt_cpuopt_t *c, gpt_gpu_t *g, int step, const uvmrt_adamw_t *hp) {
    (void)c, (void)g, (void)step, (void)hp;
    return NO_GPU;
}
int gpt_cpuopt_wait(gpt_cpuopt_t *c, int layer, int step) {
    (void)c, (void)layer, (void)step;
    return -1;
}
double gpt_cpuopt_busy_s(const gpt_cpuopt_t *c) { (void)c; return 0.0; }
int gpt_cpuopt_layer_time(gpt_cpuopt_t *c, int layer, int step, double *sec) {
    (void)c, (void)layer, (void)step;
    *sec = 0.0;
    return 0;
}
void gpt_cpuopt_stop(gpt_cpuopt_t *c) { (void)c; }
#endif
