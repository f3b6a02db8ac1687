/*
 * sampling.c -- which steps collect the driver's counters (see sampling.h).
 */
#include <stdlib.h>
#include <string.h>

#include "sampling.h"

void uvmrt__sampler_init(uvmrt_sampler_t *s, unsigned every, double cap)
{
    memset(s, 0, sizeof *s);
    s->every = every;
    s->cap = cap > 0 ? cap : UVMRT_SAMPLER_CAP;
    s->period = every > 0 ? every : 2;
    s->overhead = -1.0;
    s->last = UINT64_MAX;
}

int uvmrt__sampler_want(const uvmrt_sampler_t *s, uint64_t step)
{
    if (s->every > 0) return step % s->every == 0;
    if (step == 0) return 1;  /* the recorded step: first touches, first faults */
    if (step == 1) return 0;  /* warm-up: the first planned step is not typical */
    if (s->n_on == 0) return 1;
    if (s->n_off == 0) return 0;
    return s->last == UINT64_MAX || step - s->last >= s->period;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double median(const uint64_t *v, unsigned n)
{
    uint64_t t[UVMRT_SAMPLER_WINDOW];
    if (n > UVMRT_SAMPLER_WINDOW) n = UVMRT_SAMPLER_WINDOW;
    memcpy(t, v, n * sizeof *t);
    qsort(t, n, sizeof *t, cmp_u64);
    return n % 2 ? (double)t[n / 2] : ((double)t[n / 2 - 1] + (double)t[n / 2]) / 2.0;
}

void uvmrt__sampler_done(uvmrt_sampler_t *s, uint64_t step, int collected, uint64_t step_ns)
{
    if (collected) {
        s->sampled++;
        s->last = step;
    }
    if (s->every > 0 || step < 2) return; /* steps 0 and 1 are not typical */
    if (collected) s->on_ns[s->n_on++ % UVMRT_SAMPLER_WINDOW] = step_ns;
    else s->off_ns[s->n_off++ % UVMRT_SAMPLER_WINDOW] = step_ns;
    if (s->n_on == 0 || s->n_off == 0) return;
    double off = median(s->off_ns, s->n_off);
    double x = off > 0 ? median(s->on_ns, s->n_on) / off - 1.0 : 0.0;
    if (x < 0) x = 0;
    s->overhead = x;
    double q = x / s->cap; /* the period that brings the average down to cap, rounded up */
    unsigned p = q >= UVMRT_SAMPLER_MAX_PERIOD ? UVMRT_SAMPLER_MAX_PERIOD : (unsigned)q;
    if ((double)p < q && p < UVMRT_SAMPLER_MAX_PERIOD) p++;
    s->period = p < 2 ? 2 : p;
}
