/*
 * choose.h -- the trainer's choices (internal; choose.c owns this state): the knobs
 * of the last uvmrt_choose, its rehearsed candidates, the plan budget it chose, the
 * planned steps measured since. (A review's measured durations are the model
 * context's own: schedule.h, uvmrt_review_model_t.)
 */
#ifndef UVMRT_CHOOSE_H
#define UVMRT_CHOOSE_H

#include <stddef.h>
#include <stdint.h>

#include "uvmrt.h"

#define UVMRT_CHOICE_STEPS_KEPT 64

/* How a rehearsal's model context is made and destroyed: api/context.c installs
 * its functions (uvmrt__choice_set_model_seam), so the choice calls nothing of the
 * api part (src/README.md). create: a sim context modelling parent at budget (see
 * uvmrt__context_create_model, internal.h). */
typedef struct uvmrt_model_seam {
    uvmrt_status_t (*create)(const uvmrt_context_t *parent, uint64_t budget, uvmrt_log_fn log_fn, void *log_user,
                             uvmrt_context_t **out);
    void (*destroy)(uvmrt_context_t *model);
} uvmrt_model_seam_t;

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
    const uvmrt_model_seam_t *model_seam; /* NULL: uvmrt_choose cannot rehearse */
} uvmrt_choice_state_t;

void uvmrt__choice_free(uvmrt_context_t *ctx);
/* At creation (api/context.c): how the rehearsals' model contexts are made. */
void uvmrt__choice_set_model_seam(uvmrt_context_t *ctx, const uvmrt_model_seam_t *seam);

#endif
