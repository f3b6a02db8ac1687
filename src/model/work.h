/*
 * work.h -- a layer call's declared work (internal; pure): what the trainer declares
 * in uvmrt_layer_call_t, as one struct whose names say what each value is: a count
 * (FLOPs, bytes) or a time (ns). The rates that turn counts into times are the
 * profile's (uvmrt_profile_t: flops is a rate there, FLOP/s; hbm_bps, host_mem_bps
 * bytes/s). Below the executor (step.c keeps it with each call, uvmrt_call_t.work) and
 * the choice (choose.c compares the measured calls with it).
 */
#ifndef UVMRT_WORK_H
#define UVMRT_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

/* Calls longer than this (about 31 years) are refused: the model's clocks are
 * uint64 nanoseconds and must not overflow. */
#define UVMRT_MAX_CALL_NS 1e18

typedef struct uvmrt_work {
    /* counts, as declared (uvmrt_layer_call_t's flops, hbm_bytes, host_bytes) */
    double flop_count;          /* the matmuls' floating-point operations */
    uint64_t hbm_byte_count;    /* the memory-bound kernels' device-memory bytes */
    uint64_t host_byte_count;   /* the CPU work's host-memory bytes (0: no CPU work) */
    /* times, ns */
    uint64_t declared_ns;       /* the counts at the profile's rates (kernels of one stream
                                   run one after another); an explicit sim duration when
                                   no count is declared: what a review compares with */
    uint64_t modelled_ns;       /* what the model runs: the trainer's sim_duration_ns, else
                                   declared_ns (step.c scales it in a review's model) */
    uint64_t host_ns;           /* the CPU work's time when the trainer gives it (0: the
                                   model's; step.c may take a review's measurement) */
} uvmrt_work_t;

/* The work call declares, at prof's rates. 0, or -1 with why (len bytes) naming the
 * bad value and what was expected: a negative or not finite flop count, a time over
 * UVMRT_MAX_CALL_NS. Never allocates. */
int uvmrt__work_declare(uvmrt_work_t *w, const uvmrt_layer_call_t *call, const uvmrt_profile_t *prof, char *why,
                        size_t len);

#endif
