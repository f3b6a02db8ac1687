/*
 * sampling.h -- which steps collect the driver's unified-memory counters.
 *
 * The driver traces every fault group and migration for CUPTI, and that costs
 * time in proportion to the faults: ~1-5% of a step under the prefetch policy,
 * but 20-55% under demand paging on the H200 (bench/README.md). Training steps
 * repeat, so a sample of steps shows the same per-layer picture at a fraction
 * of the cost. The sampler decides, before each step, whether it collects:
 *
 *  every N  steps 0, N, 2N, ... (N = 1: every step);
 *  auto     step 0 (the recorded step) collects, step 1 does not (warm-up),
 *           steps 2 and 3 measure the cost (one with, one without); from then
 *           on collected steps are spaced ceil(overhead / cap) apart, at least
 *           every other step, where overhead = median time of recent collected
 *           steps / median of recent uncollected ones - 1. The average cost then
 *           stays near cap, whatever the fault rate.
 *
 * Pure bookkeeping over step indices and durations: no clock, no backend, so it
 * is tested directly (tests/test_sampling.c).
 */
#ifndef UVMRT_SAMPLING_H
#define UVMRT_SAMPLING_H

#include <stdint.h>

#define UVMRT_SAMPLER_WINDOW 5   /* durations kept per kind for the medians */
#define UVMRT_SAMPLER_MAX_PERIOD 1000
#define UVMRT_SAMPLER_CAP 0.01   /* auto: average overhead aimed at */

typedef struct uvmrt_sampler {
    unsigned every;       /* fixed period, or 0 for auto */
    double cap;           /* auto: the average overhead aimed at (fraction of step time) */
    unsigned period;      /* the period in use */
    double overhead;      /* auto: latest estimate (fraction); < 0 until measured */
    uint64_t last;        /* last collecting step (0-based); UINT64_MAX: none yet */
    uint64_t sampled;     /* steps that collected */
    uint64_t on_ns[UVMRT_SAMPLER_WINDOW], off_ns[UVMRT_SAMPLER_WINDOW];
    unsigned n_on, n_off; /* durations seen (the windows keep the latest) */
} uvmrt_sampler_t;

/* every: 0 = auto (with cap), N >= 1 = every Nth step. */
void uvmrt__sampler_init(uvmrt_sampler_t *s, unsigned every, double cap);
/* 1 when step (0-based) should collect. */
int uvmrt__sampler_want(const uvmrt_sampler_t *s, uint64_t step);
/* After the step: whether it collected and how long it took (ns). */
void uvmrt__sampler_done(uvmrt_sampler_t *s, uint64_t step, int collected, uint64_t step_ns);

#endif
