/*
 * plan.h -- uvmrt-plan's step description, shared by its two inputs: a recorded step
 * (plan.c reads UVMRT_RECORD files) and a model description file (plan_model.c builds
 * the step a trainer would run from it). Both become a record_t, which plan.c re-plays
 * on a sim context. See uvmrt-plan(1).
 */
#ifndef UVMRT_TOOLS_PLAN_H
#define UVMRT_TOOLS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "uvmrt.h"

typedef struct rtensor {
    char *name;
    int layer, role, arena, host; /* arena: tensors of one arena were allocated together */
    int disk;                     /* a record's: on the disk tier in the recorded run */
    uint64_t size, footprint;     /* bytes; footprint: what residency counts */
} rtensor_t;

typedef struct rcall {
    int layer, phase, stream;
    /* the call's time: duration_ns when > 0 (a record's), else flops at the profile's
     * FLOP/s plus hbm_bytes at its HBM rate (uvmrt_layer_call_t's declared work) */
    uint64_t duration_ns, host_bytes, hbm_bytes;
    double flops;
    /* a CPU optimizer call of a model: its parameters, when host_bytes is 0 and the
     * profile's AdamW rate times it (host_bytes = params x host_mem_bps / AdamW rate) */
    uint64_t adamw_params;
    /* a record's host_ns: the CPU work as the trainer measured it (0: the model's) */
    uint64_t host_ns;
    /* the stream index whose work so far this call follows, -1: none (a record's
     * "after"; uvmrt_layer_call_t.after, which the library has from 19ebc47 on) */
    int after;
    size_t n_uses;
    int *use_t; /* index into record_t.tensors */
    unsigned *use_a;
} rcall_t;

typedef struct record {
    char *source; /* the file it came from, for messages */
    char *profile;
    uint64_t budget;
    uint64_t host_external; /* a record's host_external_bytes: the trainer's host memory outside uvmrt */
    int discard, remote;
    size_t n_layers, n_tensors, n_calls;
    char **layers;
    rtensor_t *tensors;
    rcall_t *calls;
    /* a model's step: per layer, 1 when its AdamW runs on the CPU, and 1 when it
     * recomputes its activations in its backward (NULL for a record file) */
    uint8_t *cpu_opt, *recomputes;
} record_t;

void record_free(record_t *r);

/* What the library counts resident for a tensor of size bytes: the size rounded up to
 * 2 MiB from 1 MiB on, to 64 KiB below (src/exec/tensor.c packs tensors so). */
uint64_t plan_footprint(uint64_t size);

/* ------------------------------------------------------------------ model files */
typedef struct model model_t;

/* Reads a model description file (uvmrt-plan(1), MODEL FILES), or a Hugging Face
 * config.json (a "model_type" key; HUGGING FACE CONFIGS) at seq tokens per sample (0: the
 * config's positions, at most 2048; a model file takes none). NULL on error, after a
 * message naming the file, the key, its value and what was expected. */
model_t *model_load(const char *path, uint64_t seq);
void model_free(model_t *m);
const char *model_name(const model_t *m);
uint64_t model_batch(const model_t *m); /* the file's batch (a config's: 1) */
const char *model_note(const model_t *m); /* "" for a model file, else the config's kind and seq */
double model_params(const model_t *m);    /* every layer's parameters, repeats included */

/* The model description a Hugging Face config cfg (read from path) stands for, at seq
 * tokens per sample (0: the default); note receives the config's kind and the seq and
 * where it came from. NULL after a message naming the file, the key and its value. */
json_t *hf_model_json(const char *path, const json_t *cfg, uint64_t seq, char *note, size_t note_n);

double model_tokens_per_sample(const model_t *m); /* tokens_per_sample (a config's seq); 0: not given */

/* The mechanisms a trainer chooses for a model (uvmrt-gpt's --cpu-layers and
 * --recompute, uvmrt.torch's choice): the top cpu_layers of the placeable layers
 * (those that train and have parameters; the last in forward order first) run AdamW
 * on the CPU, their master weights, gradient and states host-homed, the others on the
 * GPU; the first `recompute` of the recomputable layers (those that keep more than
 * their output for the backward) recompute in their backward. given 0: as the model
 * file says, layer by layer. */
typedef struct mech {
    int given;
    int cpu_layers, recompute;
} mech_t;
size_t model_placeable_layers(const model_t *m);
size_t model_recomputable_layers(const model_t *m);

/* The training step of m at batch samples per step with the mechanisms mech (NULL:
 * the file's), as a record (profile "", budget 0): forward of every layer, backward
 * in reverse, then the GPU optimizer calls. 0 on success; -2 when a tensor would be
 * larger than the library allows (with a message unless quiet: the batch finder takes
 * it for "does not fit"); -1 after a message (out of memory). */
int model_build(const model_t *m, uint64_t batch, const mech_t *mech, int quiet, record_t *out);

/* ------------------------------------------------------------------ the replay */
/* Declares r's layers, its host bytes outside uvmrt and its tensors on ctx (a sim
 * context), then runs steps steps of its calls: what the tool's predictions and the
 * search's rehearsals run. The first failing call's status (UVMRT_ERR_BUDGET: over
 * the device or host budget). */
uvmrt_status_t plan_replay(uvmrt_context_t *ctx, const record_t *r, int steps);

/* ------------------------------------------------------------------ the search */
/* A search of m's mechanisms at batch (plan_search.c): the inputs, then what
 * uvmrt_choose found. */
typedef struct search {
    const model_t *m;
    uint64_t batch;
    int quick; /* fewer recompute candidates (the batch finder searches many batches) */
    /* results */
    int fits;            /* 0: no combination fits (mech: the lightest) */
    mech_t mech;         /* the chosen mechanisms */
    double predicted_ns; /* uvmrt_choose's prediction of them */
    uint64_t plan_budget;
    size_t rehearsals, n_placeable, n_recomputable;
    int knob_cpu, knob_rc; /* the knobs' indices in uvmrt_choose's, -1: not searched */
    size_t n_cand;         /* the combinations rehearsed at the budget */
    mech_t *cand;
    double *cand_ns; /* 0: did not fit */
} search_t;

/* uvmrt_choose on ctx (a sim context at the budget, before any tensor) over m's
 * mechanisms; fills s's results. UVMRT_OK, or the failed rehearsal's status (the
 * library logged why on ctx's log function). */
uvmrt_status_t plan_search(uvmrt_context_t *ctx, search_t *s);
void search_free(search_t *s);
/* The mechanisms that need the least GPU memory: every placeable layer's AdamW on
 * the CPU, every recomputable layer recomputing. */
mech_t search_lightest(const model_t *m);

#endif
