/*
 * autochoice.h -- the trainers' automatic choice and its review, one driver for
 * uvmrt-mlp and uvmrt-gpt.
 *
 * Before the tensors exist, autochoice_choose asks uvmrt_choose(3) for the values of
 * the knobs given as auto (the trainer rehearses its own steps on the model) and prints
 * what was chosen. After each training step, autochoice_after_step counts the planned
 * steps (those uvmrt did not record); after 3 of them (or at the last step of a shorter
 * run, with at least 2) uvmrt_choice_review(3) compares measured with predicted and may
 * choose again. New values apply from the next step on (the trainer's apply); 3 planned
 * steps later a second review measures them against the first ones.
 *
 * UVMRT_TEST_REPLAN=K,N (a test hook: on sim the review never re-plans) makes the
 * first review act as if it had re-planned to cpu_layers K and recompute N.
 */
#ifndef UVMRT_EXAMPLES_AUTOCHOICE_H
#define UVMRT_EXAMPLES_AUTOCHOICE_H

#include <stddef.h>

#include "uvmrt.h"

/* What the driver asks of the trainer. */
typedef struct autochoice_ops {
    /* The auto knobs' values in "cpu_layers 12, recompute 0" form; rc: how many
     * tensors the runtime recomputes with them (-1: unknown). */
    void (*text)(void *user, const int *values, int rc, char *buf, size_t cap);
    /* Writes the test hook's K, N into c as a re-plan to them would have. Returns 0,
     * or -1 with the expected range in why (the run then fails). */
    int (*hook)(void *user, uvmrt_choice_t *c, int k, int n, char *why, size_t cap);
    /* Applies c's values from step s + 1 on (s: the step that just ran). */
    void (*apply)(void *user, const uvmrt_choice_t *c, int s);
    /* Releases the run (cli_fail's cleanup). */
    void (*cleanup)(void *user);
} autochoice_ops_t;

typedef struct autochoice {
    uvmrt_context_t *ctx;
    const autochoice_ops_t *ops;
    void *user;
    int quiet;        /* 1: not each candidate's prediction */
    int made;         /* 1: uvmrt_choose ran (choice holds its answer) */
    int reviewed;     /* 1: uvmrt_choice_review ran */
    int review_again; /* 1: a re-plan was applied: a second review measures it */
    int planned;      /* planned training steps since the choice (or the re-plan) */
    uvmrt_choice_t choice;
} autochoice_t;

/* uvmrt_choose over the n knobs (n may be 0 when the runtime's own recompute knob is
 * the only one); `flags` names the auto flags for the failure message, which fails the
 * run. Prints each candidate (unless quiet), then one line with the choice. */
void autochoice_choose(autochoice_t *a, const uvmrt_knob_t *knobs, size_t n,
                       uvmrt_rehearse_fn rehearse, void *rehearse_user, const char *flags);

/* After training step s: recorded, when uvmrt recorded it (the first step, and the
 * one after a change); last, when no step follows. Reviews when it is time. */
void autochoice_after_step(autochoice_t *a, int s, int recorded, int last);

/* The review's error of the prediction X against the measurement Y, (X - Y) / Y in
 * percent (0 without a measurement). */
double autochoice_error_pct(const uvmrt_choice_t *c);

#endif /* UVMRT_EXAMPLES_AUTOCHOICE_H */
