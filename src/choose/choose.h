/*
 * choose.h -- the trainer's choices (internal; choose.c owns this state): the knobs
 * of the last uvmrt_choose, its rehearsed candidates, the plan budget it chose, the
 * planned steps measured since, and, in a model context, the duration scale a
 * review found. Other modules read it through the accessors below.
 */
#ifndef UVMRT_CHOOSE_H
#define UVMRT_CHOOSE_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

#define UVMRT_CHOICE_STEPS_KEPT 64

/* The trainer's knobs, then (has_rc) the runtime's own: how many of the recomputable
 * tensors recompute. choice.recompute_tensors is what uvmrt_tensor_recomputes reads
 * (in a model context: the rehearsal's value). */
typedef struct uvmrt_choice_state {
    int have;                       /* a choice was made */
    size_t n_knobs;                 /* the trainer's */
    int has_rc;                     /* knob n_knobs is the recompute count */
    char *names[UVMRT_KNOBS_MAX + 1];
    int *values[UVMRT_KNOBS_MAX + 1];
    size_t n_values[UVMRT_KNOBS_MAX + 1];
    uvmrt_rehearse_fn fn;
    void *user;
    uvmrt_choice_t choice;
    size_t n_cand;                  /* candidates at the context's budget */
    int *cand_values;               /* n_cand x (n_knobs + has_rc) */
    double *cand_ns;                /* 0: did not fit */
    uint64_t host_external_bytes;   /* uvmrt_context_set_host_external_bytes: host, outside uvmrt */
    double planned_ns[UVMRT_CHOICE_STEPS_KEPT]; /* planned steps since the choice (the first ones) */
    size_t n_planned;
    /* a re-plan that changed the values: the first ones, their measurement and budget,
     * until the review after it compares (confirmed) */
    int first_values[UVMRT_KNOBS_MAX];
    int first_recompute;
    double first_measured_ns;
    uint64_t first_plan_budget;
    int confirmed;
    /* a model context only: each (layer, phase)'s duration factor from a review, and
     * its CPU work's measured ns (0: none; host_slowdown > 0 times the others') */
    double *scale;
    size_t n_scale;
    uint64_t *host_ns;
    double host_slowdown;
} uvmrt_choice_state_t;

/* A modelled duration as the model context scales it (1.0 outside a review's model). */
uint64_t uvmrt__choice_scaled(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t ns);
/* The time a model context gives a call's CPU work: its layer's measurement from a
 * review, or the model's time alone times the measured calls' median slowdown; 0
 * (the model's own, with contention) otherwise. */
uint64_t uvmrt__choice_host_ns(const uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, uint64_t host_bytes);
void uvmrt__choice_free(uvmrt_context_t *ctx);

#endif
