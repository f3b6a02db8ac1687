/*
 * gpt_cpuopt.h -- uvmrt-gpt's CPU optimizer thread (--cpu-layers K, --optimizer-on cpu).
 */
#ifndef UVMRT_GPT_CPUOPT_H
#define UVMRT_GPT_CPUOPT_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"
#include "gpt_gpu.h"

/* One thread updating its layers (a subset of the model's: the top K) with the library's
 * AdamW (uvmrt_adamw_cpu) once a step's backward has finished (global-norm clipping needs every gradient),
 * in forward order, so forward i of the next step can start as soon as layer i is done;
 * the GPU updates the other layers meanwhile. */

typedef struct gpt_cpuopt gpt_cpuopt_t;

typedef struct gpt_cpuopt_layer {
    int layer;            /* the model's layer index, 0 .. nl - 1 */
    float *w, *m, *v, *g; /* (n,) fp32: master, moments, gradient (host memory) */
    uint16_t *wh;         /* (n,) bf16 working copy (managed) */
    size_t n, n_decay;    /* elements [0, n_decay) get weight decay */
} gpt_cpuopt_layer_t;

/* Layer l's AdamW (uvmrt_adamw_cpu) with hp, its grad_scale replaced by the clip
 * factor: hp's weight decay on elements [0, n_decay), none on the rest; wh is not
 * written. The thread's update, and a caller's own for a layer the thread leaves out. */
uvmrt_status_t gpt_cpuopt_update(const gpt_cpuopt_layer_t *l, const uvmrt_adamw_t *hp, float clip);

/* nl: the model's layers; layers: the n (>= 1) the thread updates, in forward order.
 * clip_host: mapped host memory where the GPU writes {norm, clip factor}. */
gpt_cpuopt_t *gpt_cpuopt_start(int nl, int n, const gpt_cpuopt_layer_t *layers,
                               const float *clip_host, char *err, size_t errlen);
/* After step s's last backward call: records an event on the stream; the thread
 * waits for it, then updates its layers with these hyperparameters: hp's weight decay
 * on elements [0, n_decay) of a layer, none on the rest, and grad_scale replaced by the
 * clip factor. Steps are numbered from 0 for each thread. */
const char *gpt_cpuopt_submit(gpt_cpuopt_t *c, gpt_gpu_t *g, int step, const uvmrt_adamw_t *hp);
/* Waits until layer i's update of step s is done (at once for a layer the thread does
 * not update); -1 when the thread failed. */
int gpt_cpuopt_wait(gpt_cpuopt_t *c, int layer, int step);
/* Layer i's AdamW seconds in step s (one of the last 4, done): 1 and *sec, else 0. */
int gpt_cpuopt_layer_time(gpt_cpuopt_t *c, int layer, int step, double *sec);
/* Seconds the thread spent in AdamW. */
double gpt_cpuopt_busy_s(const gpt_cpuopt_t *c);
void gpt_cpuopt_stop(gpt_cpuopt_t *c);

#endif
