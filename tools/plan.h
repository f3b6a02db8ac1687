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

typedef struct rtensor {
    char *name;
    int layer, role, arena, host; /* arena: tensors of one arena were allocated together */
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

/* The training step of m at batch samples per step, as a record (profile "", budget 0):
 * forward of every layer, backward in reverse, then the GPU optimizer calls. 0 on
 * success; -2 when a tensor would be larger than the library allows (with a message
 * unless quiet: the batch finder takes it for "does not fit"); -1 after a message
 * (out of memory). */
int model_build(const model_t *m, uint64_t batch, int quiet, record_t *out);

#endif
