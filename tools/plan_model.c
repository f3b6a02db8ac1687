/*
 * plan_model.c -- uvmrt-plan --model FILE: a model description (JSON, uvmrt-plan(1),
 * MODEL FILES) turned into the training step a uvmrt trainer would run for it, as a
 * record_t that plan.c re-plays like a recorded one.
 *
 * The step follows the example trainers (examples/mlp/mlp.c, examples/gpt/gpt.c):
 * per layer a fp32 master copy, the working copy the GPU computes with, the gradient,
 * the optimizer's states, the layer's output and the rest of what its backward needs;
 * shared: the model's input and targets, two gradient buffers the backward passes
 * ping-pong through, the backward's scratch and, for recomputing layers, one buffer
 * for the activations they do not keep. Forward reads the weights and the input and
 * writes the activations; backward reads them and writes the gradient; the optimizer
 * updates master, states and working copy from the gradient. Streamed bits sit where
 * uvmrt-mlp sets them. Activation sizes and flops scale with the batch.
 *
 * The input is untrusted: every key is checked for type and range, and a bad one is
 * reported with the file, the key, its value and what was expected; nothing asserts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "input_file.h"
#include "plan.h"
#include "uvmrt.h"

#define MAX_LAYERS 10000    /* layers after repeats: a record that size replays in seconds */
#define MAX_STATES 8        /* optimizer state tensors per layer */
#define MAX_BATCH 10000000  /* samples per step */
#define MAX_TENSOR (1ull << 50) /* the library's largest tensor (src/exec/tensor.c) */
#define CPU_STREAM 1        /* the CPU optimizer's calls: a timeline of their own */
#define HALF_STREAM 2       /* staged_half_copy: the GPU's copies of the CPU's updates */

enum { OPT_GPU, OPT_CPU, OPT_NONE };

typedef struct mlayer {
    char *name;
    int repeat, n_states, optimizer, recompute, streamed, grad_streamed, bwd_given, ws_rw, opt_given, bwd_hbm_given;
    double params, param_bytes, master_bytes, grad_bytes, state_bytes, opt_bytes;
    double act_ps, out_ps, ws_ps, flops_ps, bwd_flops_ps; /* per sample */
    double hbm_ps, bwd_hbm_ps; /* memory-bound kernels' device-memory bytes per sample */
    double bwd_hbm_pp;         /* and per parameter in the backward (e.g. a gradient norm) */
    double fws_bytes;  /* forward_workspace_bytes: fixed */
    char *tied;        /* tied_to: the entry whose weights this one's forward uses too */
    size_t tied_li;    /* that entry's layer (after repeats) */
} mlayer_t;

struct model {
    char *path, *name;
    char note[256]; /* how it was read: "" for a model file, the config and its seq for a Hugging Face one */
    double params;  /* every layer's parameters, with the repeats */
    uint64_t batch;
    double input_ps, target_ps;
    double tokens_ps; /* tokens_per_sample (0: not given) */
    int staged; /* staged_half_copy */
    int keeps;  /* recompute_keeps_tensors */
    size_t n_layers, n_expanded;
    mlayer_t *layers;
};

const char *model_name(const model_t *m) { return m->name; }
uint64_t model_batch(const model_t *m) { return m->batch; }
const char *model_note(const model_t *m) { return m->note; }
double model_params(const model_t *m) { return m->params; }
double model_tokens_per_sample(const model_t *m) { return m->tokens_ps; }

/* A layer whose optimizer the search may place: it trains and has parameters. */
static int placeable(const mlayer_t *l) { return l->optimizer != OPT_NONE && l->params > 0; }
/* A layer that can recompute: it keeps more than its output for the backward. */
static int recomputable(const mlayer_t *l) { return l->act_ps > l->out_ps; }

static size_t count_layers(const model_t *m, int (*is)(const mlayer_t *))
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (is(&m->layers[i])) n += (size_t)m->layers[i].repeat;
    return n;
}
size_t model_placeable_layers(const model_t *m) { return count_layers(m, placeable); }
size_t model_recomputable_layers(const model_t *m) { return count_layers(m, recomputable); }

uint64_t plan_footprint(uint64_t size)
{
    uint64_t a = size >= (1ull << 20) ? (2ull << 20) : (64ull << 10);
    return (size + a - 1) / a * a;
}

void model_free(model_t *m)
{
    if (m == NULL) return;
    for (size_t i = 0; i < m->n_layers; i++) {
        free(m->layers[i].name);
        free(m->layers[i].tied);
    }
    free(m->layers);
    free(m->name);
    free(m->path);
    free(m);
}

/* ------------------------------------------------------------------ checked keys */
/* A JSON value as text for a message, cut to fit. */
static void value_text(const json_t *v, char *buf, size_t n)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, n, "%s", s ? s : "?");
    if (s && strlen(s) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    free(s);
}

#define BADKEY(where, key, v, ...)                                                                                   \
    do {                                                                                                             \
        char vt_[80];                                                                                                \
        value_text(v, vt_, sizeof vt_);                                                                              \
        fprintf(stderr, "uvmrt-plan: %s: %s'%s' is %s: expected ", path, where, key, vt_);                           \
        fprintf(stderr, __VA_ARGS__);                                                                                \
        fputc('\n', stderr);                                                                                         \
    } while (0)

/* obj[key] as a number in [lo, hi] (integral when integral is set); def when absent
 * and not required. 0 on success. */
static int num_key(const char *path, const char *where, const json_t *obj, const char *key, int required,
                   double def, double lo, double hi, int integral, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        if (required) {
            fprintf(stderr, "uvmrt-plan: %s: %skey '%s' is missing: expected a number from %g to %g\n", path, where,
                    key, lo, hi);
            return -1;
        }
        *out = def;
        return 0;
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!json_is_number(v) || !(x >= lo && x <= hi) || (integral && x != floor(x))) {
        BADKEY(where, key, v, "%s from %g to %g", integral ? "an integer" : "a number", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int bool_key(const char *path, const char *where, const json_t *obj, const char *key, int def, int *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) {
        BADKEY(where, key, v, "true or false");
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static int str_key(const char *path, const char *where, const json_t *obj, const char *key, int required,
                   size_t maxlen, const char **out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL && !required) return 0;
    if (v == NULL) {
        fprintf(stderr, "uvmrt-plan: %s: %skey '%s' is missing: expected a string\n", path, where, key);
        return -1;
    }
    const char *s = json_string_value(v);
    if (s == NULL || s[0] == '\0' || strlen(s) > maxlen) {
        BADKEY(where, key, v, "a string of 1 to %zu characters", maxlen);
        return -1;
    }
    *out = s;
    return 0;
}

/* Every key of obj is one of allowed (a typo must not silently mean a default). */
static int known_keys(const char *path, const char *where, const json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (ok) continue;
        char list[1024] = "";
        for (size_t i = 0; allowed[i]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
        char kt[64];
        snprintf(kt, sizeof kt, "%s", key);
        fprintf(stderr, "uvmrt-plan: %s: %sunknown key '%s': expected one of %s\n", path, where, kt, list);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ reading */
static const char *const model_keys[] = {"format", "name", "description", "batch", "input_bytes_per_sample",
                                         "target_bytes_per_sample", "tokens_per_sample", "staged_half_copy",
                                         "recompute_keeps_tensors", "layers", NULL};
static const char *const layer_keys[] = {"name", "description", "repeat", "params", "param_bytes", "master_bytes",
                                         "grad_bytes", "optimizer_state_bytes", "optimizer_states", "optimizer",
                                         "optimizer_bytes_per_param", "activation_bytes_per_sample",
                                         "output_bytes_per_sample", "workspace_bytes_per_sample", "workspace_readwrite", "flops_per_sample",
                                         "backward_flops_per_sample", "hbm_bytes_per_sample",
                                         "backward_hbm_bytes_per_sample", "backward_hbm_bytes_per_param", "recompute", "activations_streamed",
                                         "gradients_streamed", "tied_to", "forward_workspace_bytes", NULL};

static int layer_load(const char *path, const json_t *o, size_t i, mlayer_t *l)
{
    char where[160];
    snprintf(where, sizeof where, "layers[%zu]: ", i);
    if (!json_is_object(o)) {
        char vt[80];
        value_text(o, vt, sizeof vt);
        fprintf(stderr, "uvmrt-plan: %s: layers[%zu] is %s: expected an object {\"name\": ..., ...}\n", path, i, vt);
        return -1;
    }
    const char *name = NULL, *opt = "gpu", *desc = NULL, *tied = NULL;
    if (str_key(path, where, o, "name", 1, 100, &name) != 0) return -1;
    snprintf(where, sizeof where, "layers[%zu] ('%s'): ", i, name);
    double rep, states;
    if (known_keys(path, where, o, layer_keys) != 0 || str_key(path, where, o, "description", 0, 2000, &desc) != 0)
        return -1;
    if (num_key(path, where, o, "repeat", 0, 1, 1, MAX_LAYERS, 1, &rep) ||
        num_key(path, where, o, "params", 1, 0, 0, 1e13, 1, &l->params) ||
        num_key(path, where, o, "param_bytes", 0, 2, 0.5, 64, 0, &l->param_bytes) ||
        num_key(path, where, o, "master_bytes", 0, 4, 0, 64, 0, &l->master_bytes) ||
        num_key(path, where, o, "grad_bytes", 0, 4, 0.5, 64, 0, &l->grad_bytes) ||
        num_key(path, where, o, "optimizer_state_bytes", 0, 8, 0, 64, 0, &l->state_bytes) ||
        num_key(path, where, o, "optimizer_states", 0, 2, 0, MAX_STATES, 1, &states) ||
        str_key(path, where, o, "optimizer", 0, 100, &opt) ||
        num_key(path, where, o, "activation_bytes_per_sample", 1, 0, 1, 1e13, 0, &l->act_ps) ||
        num_key(path, where, o, "workspace_bytes_per_sample", 0, 0, 0, 1e13, 0, &l->ws_ps) ||
        num_key(path, where, o, "flops_per_sample", 0, 0, 0, 1e18, 0, &l->flops_ps) ||
        num_key(path, where, o, "hbm_bytes_per_sample", 0, 0, 0, 1e15, 0, &l->hbm_ps) ||
        num_key(path, where, o, "backward_hbm_bytes_per_param", 0, 0, 0, 1024, 0, &l->bwd_hbm_pp) ||
        bool_key(path, where, o, "recompute", 0, &l->recompute) ||
        bool_key(path, where, o, "workspace_readwrite", 0, &l->ws_rw) ||
        bool_key(path, where, o, "activations_streamed", 1, &l->streamed) ||
        bool_key(path, where, o, "gradients_streamed", 1, &l->grad_streamed) ||
        num_key(path, where, o, "forward_workspace_bytes", 0, 0, 0, 1e15, 0, &l->fws_bytes) ||
        str_key(path, where, o, "tied_to", 0, 100, &tied))
        return -1;
    l->repeat = (int)rep;
    l->n_states = (int)states;
    if (strcmp(opt, "gpu") == 0) l->optimizer = OPT_GPU;
    else if (strcmp(opt, "cpu") == 0) l->optimizer = OPT_CPU;
    else if (strcmp(opt, "none") == 0) l->optimizer = OPT_NONE;
    else {
        BADKEY(where, "optimizer", json_object_get(o, "optimizer"), "\"gpu\", \"cpu\" or \"none\"");
        return -1;
    }
    if (l->n_states == 0 && l->state_bytes > 0 && json_object_get(o, "optimizer_state_bytes") != NULL) {
        BADKEY(where, "optimizer_states", json_object_get(o, "optimizer_states"),
               "at least 1 when optimizer_state_bytes is above 0");
        return -1;
    }
    if (l->n_states == 0) l->state_bytes = 0;
    /* the update's memory traffic: master and states read and written, the gradient
     * read, the working copy written (30 bytes per parameter for bf16 + fp32 AdamW) */
    double def_opt = 2 * l->master_bytes + 2 * l->state_bytes + l->grad_bytes + l->param_bytes;
    if (num_key(path, where, o, "optimizer_bytes_per_param", 0, def_opt, 0, 1024, 0, &l->opt_bytes) ||
        num_key(path, where, o, "output_bytes_per_sample", 0, l->act_ps, 1, l->act_ps, 0, &l->out_ps))
        return -1;
    l->opt_given = json_object_get(o, "optimizer_bytes_per_param") != NULL;
    l->bwd_given = json_object_get(o, "backward_flops_per_sample") != NULL;
    l->bwd_hbm_given = json_object_get(o, "backward_hbm_bytes_per_sample") != NULL;
    if (num_key(path, where, o, "backward_flops_per_sample", 0, 0, 0, 1e18, 0, &l->bwd_flops_ps) ||
        num_key(path, where, o, "backward_hbm_bytes_per_sample", 0, 0, 0, 1e15, 0, &l->bwd_hbm_ps))
        return -1;
    l->name = strdup(name);
    l->tied = tied ? strdup(tied) : NULL;
    return l->name == NULL || (tied && l->tied == NULL) ? -1 : 0;
}

model_t *model_load(const char *path, uint64_t seq)
{
    char note[256] = "";
    json_error_t err;
    const char *why = NULL;
    FILE *f = input_file_fopen(path, NULL, &why); /* a FIFO must not hang the tool */
    if (f == NULL) {
        fprintf(stderr, "uvmrt-plan: --model %s: cannot read it: %s\n", path, why);
        return NULL;
    }
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &err);
    fclose(f);
    model_t *m = NULL;
    if (root == NULL) {
        fprintf(stderr, "uvmrt-plan: %s: not a readable JSON file: %s (line %d, column %d)\n", path, err.text,
                err.line, err.column);
        return NULL;
    }
    if (json_is_object(root) && json_object_get(root, "model_type") != NULL) { /* a Hugging Face config.json */
        json_t *built = hf_model_json(path, root, seq, note, sizeof note);
        json_decref(root);
        if ((root = built) == NULL) return NULL;
    } else if (seq != 0) {
        fprintf(stderr, "uvmrt-plan: --seq %llu is for a Hugging Face config.json: %s is a model description, whose "
                        "sizes are per sample as written\n",
                (unsigned long long)seq, path);
        json_decref(root);
        return NULL;
    }
    const char *fmt = "uvmrt-model", *name = NULL, *desc = NULL;
    double batch, in_ps, tgt_ps, tok_ps;
    int staged = 0, keeps = 0;
    json_t *layers = json_object_get(root, "layers");
    if (!json_is_object(root)) {
        fprintf(stderr, "uvmrt-plan: %s: not a model description: expected a JSON object (uvmrt-plan(1), MODEL "
                        "FILES)\n", path);
        goto fail;
    }
    if (known_keys(path, "", root, model_keys) || str_key(path, "", root, "format", 0, 100, &fmt) ||
        str_key(path, "", root, "name", 1, 100, &name) || str_key(path, "", root, "description", 0, 2000, &desc) ||
        num_key(path, "", root, "batch", 1, 0, 1, MAX_BATCH, 1, &batch) ||
        num_key(path, "", root, "target_bytes_per_sample", 0, 0, 0, 1e13, 0, &tgt_ps) ||
        num_key(path, "", root, "tokens_per_sample", 0, 0, 0, 1e9, 1, &tok_ps) ||
        bool_key(path, "", root, "staged_half_copy", 0, &staged) ||
        bool_key(path, "", root, "recompute_keeps_tensors", 0, &keeps))
        goto fail;
    if (strcmp(fmt, "uvmrt-model") != 0) {
        BADKEY("", "format", json_object_get(root, "format"), "\"uvmrt-model\"");
        goto fail;
    }
    if (!json_is_array(layers) || json_array_size(layers) == 0 || json_array_size(layers) > MAX_LAYERS) {
        if (layers == NULL)
            fprintf(stderr, "uvmrt-plan: %s: key 'layers' is missing: expected an array of layer objects\n", path);
        else BADKEY("", "layers", layers, "an array of 1 to %d layer objects", MAX_LAYERS);
        goto fail;
    }
    m = calloc(1, sizeof *m);
    if (m == NULL || (m->layers = calloc(json_array_size(layers), sizeof *m->layers)) == NULL) goto oom;
    for (size_t i = 0; i < json_array_size(layers); i++) {
        if (layer_load(path, json_array_get(layers, i), i, &m->layers[i]) != 0) goto fail;
        m->n_layers++;
        m->n_expanded += (size_t)m->layers[i].repeat;
        if (m->n_expanded > MAX_LAYERS) {
            fprintf(stderr, "uvmrt-plan: %s: layers[%zu] ('%s'): %zu layers with the repeats: expected at most %d\n",
                    path, i, m->layers[i].name, m->n_expanded, MAX_LAYERS);
            goto fail;
        }
    }
    /* tied_to names one earlier layer: an entry of that name, alone, with repeat 1 */
    for (size_t i = 0, li = 0; i < m->n_layers; li += (size_t)m->layers[i].repeat, i++) {
        mlayer_t *l = &m->layers[i];
        if (l->tied == NULL) continue;
        size_t found = 0, count = 0, at = 0;
        for (size_t e = 0, le = 0; e < m->n_layers; le += (size_t)m->layers[e].repeat, e++)
            if (strcmp(m->layers[e].name, l->tied) == 0) {
                count += (size_t)m->layers[e].repeat;
                if (e < i) found = 1, at = le;
            }
        if (!found || count != 1 || m->layers[i].repeat != 1) {
            char where[160];
            snprintf(where, sizeof where, "layers[%zu] ('%s'): ", i, l->name);
            BADKEY(where, "tied_to", json_object_get(json_array_get(layers, i), "tied_to"),
                   "the name of one earlier layer (an entry with repeat 1, the only one of that name), and "
                   "repeat 1 here");
            goto fail;
        }
        l->tied_li = at;
    }
    /* the model's input defaults to the width of the first layer's output (an MLP) */
    if (num_key(path, "", root, "input_bytes_per_sample", 0, m->layers[0].out_ps, 0, 1e13, 0, &in_ps)) goto fail;
    m->batch = (uint64_t)batch;
    m->input_ps = in_ps;
    m->target_ps = tgt_ps;
    m->tokens_ps = tok_ps;
    m->staged = staged;
    m->keeps = keeps;
    snprintf(m->note, sizeof m->note, "%s", note);
    for (size_t i = 0; i < m->n_layers; i++) m->params += m->layers[i].params * m->layers[i].repeat;
    m->name = strdup(name);
    m->path = strdup(path);
    if (m->name == NULL || m->path == NULL) goto oom;
    json_decref(root);
    return m;
oom:
    fprintf(stderr, "uvmrt-plan: %s: out of memory\n", path);
fail:
    model_free(m);
    json_decref(root);
    return NULL;
}

/* ------------------------------------------------------------------ the step */
typedef struct builder {
    const model_t *m;
    uint64_t batch;
    record_t *r;
    size_t cap_tensors, cap_calls;
    int quiet, too_large;
} builder_t;

/* A tensor of per * mult bytes (rounded up); -1 for none (0 bytes); -2 on error. */
static int tensor_add(builder_t *b, const char *lname, const char *what, const char *key, double per, double mult,
                      int layer, int role, int arena)
{
    double bytes = ceil(per * mult);
    if (!(bytes >= 0)) bytes = 0;
    if (bytes == 0) return -1;
    if (bytes > (double)MAX_TENSOR) {
        b->too_large = 1;
        if (!b->quiet)
            fprintf(stderr, "uvmrt-plan: %s: layer '%s': tensor %s (from %s) at batch %llu is %.4g bytes: expected "
                            "at most 2^50 (the library's largest tensor)\n",
                    b->m->path, lname, what, key, (unsigned long long)b->batch, bytes);
        return -2;
    }
    record_t *r = b->r;
    if (r->n_tensors == b->cap_tensors) return -2; /* sized in advance: cannot happen */
    rtensor_t *t = &r->tensors[r->n_tensors];
    char name[160];
    snprintf(name, sizeof name, "%s.%s", lname, what);
    t->name = strdup(name);
    if (t->name == NULL) return -2;
    t->layer = layer;
    t->role = role;
    t->arena = arena;
    t->size = (uint64_t)bytes;
    t->footprint = plan_footprint(t->size);
    return (int)r->n_tensors++;
}

typedef struct ltensors {
    const mlayer_t *ml;
    int tie_target; /* a later layer's forward writes this layer's gradient first */
    int opt, rc;    /* the layer's optimizer (OPT_*) and recompute, as built (mechanisms_of) */
    int master, wh, grad, out, saved, states[MAX_STATES];
} ltensors_t;

static rcall_t *call_add(builder_t *b, int layer, int phase, int stream, size_t max_uses)
{
    record_t *r = b->r;
    if (r->n_calls == b->cap_calls) return NULL;
    rcall_t *c = &r->calls[r->n_calls];
    c->use_t = calloc(max_uses + 1, sizeof *c->use_t);
    c->use_a = calloc(max_uses + 1, sizeof *c->use_a);
    if (c->use_t == NULL || c->use_a == NULL) {
        free(c->use_t);
        free(c->use_a);
        c->use_t = NULL;
        c->use_a = NULL;
        return NULL;
    }
    c->layer = layer;
    c->phase = phase;
    c->stream = stream;
    c->after = -1;
    r->n_calls++;
    return c;
}

static void use(rcall_t *c, int t, unsigned access)
{
    if (t < 0) return;
    c->use_t[c->n_uses] = t;
    c->use_a[c->n_uses++] = access;
}

/* Each layer's optimizer and recompute: the file's, or mech's (the top cpu_layers of
 * the placeable layers on the CPU, the others on the GPU; the first recompute of the
 * recomputable ones recomputing), as the trainers choose them. */
static void mechanisms_of(const model_t *m, const mech_t *mech, uint8_t *opt, uint8_t *rc)
{
    size_t n_place = model_placeable_layers(m), place_i = 0, rc_i = 0;
    for (size_t j = 0, li = 0; j < m->n_layers; j++) {
        const mlayer_t *ml = &m->layers[j];
        for (int k = 0; k < ml->repeat; k++, li++) {
            opt[li] = (uint8_t)ml->optimizer;
            rc[li] = (uint8_t)ml->recompute;
            if (mech == NULL || !mech->given) continue;
            if (placeable(ml)) opt[li] = place_i++ + (size_t)mech->cpu_layers >= n_place ? OPT_CPU : OPT_GPU;
            rc[li] = recomputable(ml) && rc_i++ < (size_t)mech->recompute;
        }
    }
}

int model_build(const model_t *m, uint64_t batch, const mech_t *mech, int quiet, record_t *r)
{
    const unsigned R = UVMRT_USE_READ, W = UVMRT_USE_WRITE, RW = UVMRT_USE_READWRITE, S = UVMRT_USE_STREAM;
    memset(r, 0, sizeof *r);
    size_t L = m->n_expanded;
    builder_t b = {m, batch, r, L * (5 + MAX_STATES) + 8, 4 * L, quiet, 0};
    ltensors_t *lt = calloc(L + 1, sizeof *lt);
    r->profile = strdup("");
    r->source = strdup(m->path);
    r->discard = r->remote = 1;
    r->layers = calloc(L + 1, sizeof *r->layers);
    r->tensors = calloc(b.cap_tensors, sizeof *r->tensors);
    r->calls = calloc(b.cap_calls, sizeof *r->calls);
    r->cpu_opt = calloc(L + 1, 1);
    r->recomputes = calloc(L + 1, 1);
    uint8_t *opts = calloc(L + 1, 1), *rcs = r->recomputes;
    if (lt == NULL || r->profile == NULL || r->source == NULL || r->layers == NULL || r->tensors == NULL ||
        r->calls == NULL || r->cpu_opt == NULL || rcs == NULL || opts == NULL)
        goto oom;
    mechanisms_of(m, mech, opts, rcs);
    for (size_t li = 0; li < L; li++) r->cpu_opt[li] = opts[li] == OPT_CPU;
    double bs = (double)batch, max_out = 0, max_ws = 0, max_rc = 0, max_fws = 0;
    /* layers: names, then each layer's tensors (one arena per layer, as the trainers
     * allocate them: master, working copy, gradient, states, output, saved) */
    for (size_t j = 0, li = 0; j < m->n_layers; j++) {
        const mlayer_t *ml = &m->layers[j];
        /* copies are numbered on from the entries of the same name before this one, so
         * that "block" x 12 on the GPU and "block" x 12 on the CPU are block0..block23 */
        size_t first = 0, total = 0;
        for (size_t e = 0; e < m->n_layers; e++)
            if (strcmp(m->layers[e].name, ml->name) == 0) {
                if (e < j) first += (size_t)m->layers[e].repeat;
                total += (size_t)m->layers[e].repeat;
            }
        for (int k = 0; k < ml->repeat; k++, li++) {
            char name[128];
            if (total > 1) snprintf(name, sizeof name, "%s%zu", ml->name, first + (size_t)k);
            else snprintf(name, sizeof name, "%s", ml->name);
            if ((r->layers[li] = strdup(name)) == NULL) goto oom;
            r->n_layers++;
            ltensors_t *t = &lt[li];
            int trains = ml->optimizer != OPT_NONE, a = (int)li;
            t->ml = ml;
            t->opt = opts[li];
            t->rc = rcs[li];
            t->master = t->grad = t->saved = -1;
            for (int s = 0; s < MAX_STATES; s++) t->states[s] = -1;
            if ((t->master = tensor_add(&b, name, "w", "params", ml->params, trains ? ml->master_bytes : 0, (int)li,
                                        UVMRT_ROLE_WEIGHT, a)) < -1 ||
                (t->wh = tensor_add(&b, name, "wh", "params", ml->params, ml->param_bytes, (int)li, UVMRT_ROLE_WEIGHT,
                                    a)) < -1 ||
                (t->grad = tensor_add(&b, name, "g", "params", ml->params, trains ? ml->grad_bytes : 0, (int)li,
                                      UVMRT_ROLE_GRADIENT, a)) < -1)
                goto fail;
            for (int s = 0; s < ml->n_states; s++) {
                static const char *const sn[] = {"m", "v"};
                char what[16];
                snprintf(what, sizeof what, "%s", ml->n_states == 2 ? sn[s] : "s");
                if (ml->n_states != 2) snprintf(what, sizeof what, "s%d", s);
                if ((t->states[s] = tensor_add(&b, name, what, "params", ml->params,
                                               trains ? ml->state_bytes / ml->n_states : 0, (int)li,
                                               UVMRT_ROLE_OPTIMIZER_STATE, a)) < -1)
                    goto fail;
            }
            if ((t->out = tensor_add(&b, name, "out", "output_bytes_per_sample", ml->out_ps, bs, (int)li,
                                     UVMRT_ROLE_ACTIVATION, a)) < -1 ||
                (t->saved = tensor_add(&b, name, "saved", "activation_bytes_per_sample", ml->act_ps - ml->out_ps,
                                       rcs[li] && !m->keeps ? 0 : bs, (int)li, UVMRT_ROLE_ACTIVATION, a)) < -1)
                goto fail;
            if (ml->out_ps > max_out) max_out = ml->out_ps;
            if (ml->fws_bytes > max_fws) max_fws = ml->fws_bytes;
            if (ml->ws_ps > max_ws) max_ws = ml->ws_ps;
            /* a trainer that allocates before its choice (recompute_keeps_tensors, searched)
             * has the shared buffer whenever a layer may recompute (uvmrt-mlp's Zr under
             * --recompute auto): the library counts it in the host need */
            int may = m->keeps && mech != NULL && mech->given && recomputable(ml);
            if ((rcs[li] || may) && ml->act_ps - ml->out_ps > max_rc) max_rc = ml->act_ps - ml->out_ps;
        }
    }
    /* shared tensors, one arena (uvmrt-mlp's X, Y, dA0, dA1, dZ, Zr) */
    int sa = (int)L, x, y, dout[2], ws, rc, fws;
    if ((x = tensor_add(&b, "model", "input", "input_bytes_per_sample", m->input_ps, bs, -1, UVMRT_ROLE_ACTIVATION,
                        sa)) < -1 ||
        (y = tensor_add(&b, "model", "target", "target_bytes_per_sample", m->target_ps, bs, -1, UVMRT_ROLE_ACTIVATION,
                        sa)) < -1 ||
        (dout[0] = tensor_add(&b, "model", "dout0", "output_bytes_per_sample", max_out, bs, -1, UVMRT_ROLE_WORKSPACE,
                              sa)) < -1 ||
        (dout[1] = tensor_add(&b, "model", "dout1", "output_bytes_per_sample", max_out, bs, -1, UVMRT_ROLE_WORKSPACE,
                              sa)) < -1 ||
        (ws = tensor_add(&b, "model", "workspace", "workspace_bytes_per_sample", max_ws, bs, -1, UVMRT_ROLE_WORKSPACE,
                         sa)) < -1 ||
        (rc = tensor_add(&b, "model", "recompute", "activation_bytes_per_sample", max_rc, bs, -1,
                         UVMRT_ROLE_WORKSPACE, sa)) < -1 ||
        (fws = tensor_add(&b, "model", "fwd_workspace", "forward_workspace_bytes", max_fws, 1, -1,
                          UVMRT_ROLE_WORKSPACE, sa)) < -1)
        goto fail;
    for (size_t li = 0; li < L; li++)
        if (lt[li].ml->tied != NULL) lt[lt[li].ml->tied_li].tie_target = 1;
    /* the CPU's data lives on the host; the GPU writes the gradient there */
    for (size_t li = 0; li < L; li++) {
        if (lt[li].opt != OPT_CPU) continue;
        int host[3 + MAX_STATES] = {lt[li].master, lt[li].grad};
        for (int s = 0; s < MAX_STATES; s++) host[2 + s] = lt[li].states[s];
        for (int k = 0; k < 2 + MAX_STATES; k++)
            if (host[k] >= 0) r->tensors[host[k]].host = 1;
    }
    /* forward; staged, the first CPU layer with a master waits for every staged copy */
    size_t first_staged = L;
    for (size_t li = 0; m->staged && li < L && first_staged == L; li++)
        if (lt[li].opt == OPT_CPU && lt[li].master >= 0) first_staged = li;
    for (size_t li = 0; li < L; li++) {
        const ltensors_t *t = &lt[li];
        unsigned as = t->ml->streamed ? S : 0;
        rcall_t *c = call_add(&b, (int)li, UVMRT_PHASE_FORWARD, 0, 7);
        if (c == NULL) goto oom;
        /* a CPU layer's bf16 weights are made here from the master its AdamW wrote in
         * host memory (read once over the link), as the trainers do; staged, after the
         * update on a stream of their own (uvmrt-mlp) */
        int cpu_made = t->opt == OPT_CPU && t->master >= 0 && !m->staged;
        if (cpu_made) use(c, t->master, R | S);
        use(c, t->wh, cpu_made ? W : R);
        use(c, li == 0 ? x : lt[li - 1].out, R);
        use(c, t->rc ? (t->ml->act_ps > t->ml->out_ps ? rc : -1) : t->saved, W | as);
        use(c, t->out, W | as);
        if (li == L - 1) { /* the loss, and its gradient for the backward */
            use(c, y, R | S);
            use(c, dout[li & 1], W | (t->ml->grad_streamed ? S : 0));
        }
        if (t->ml->fws_bytes > 0) use(c, fws, RW);
        if (t->ml->tied != NULL) { /* shared weights: read here, their gradient begun here */
            use(c, lt[t->ml->tied_li].wh, R);
            use(c, lt[t->ml->tied_li].grad, W);
        }
        c->flops = t->ml->flops_ps * bs;
        c->hbm_bytes = (uint64_t)ceil(t->ml->hbm_ps * bs);
        if (t->opt == OPT_CPU && !m->staged) c->after = CPU_STREAM; /* after the CPU's update of it */
        if (li == first_staged) c->after = HALF_STREAM;
    }
    /* backward, in reverse; a CPU layer's update starts as soon as its gradient exists */
    for (size_t li = L; li-- > 0;) {
        const ltensors_t *t = &lt[li];
        const mlayer_t *ml = t->ml;
        unsigned as = ml->streamed ? S : 0, gs = ml->grad_streamed ? S : 0;
        rcall_t *c = call_add(&b, (int)li, UVMRT_PHASE_BACKWARD, 0, 7);
        if (c == NULL) goto oom;
        use(c, t->wh, R);
        use(c, li == 0 ? x : lt[li - 1].out, R);
        use(c, t->rc ? (ml->act_ps > ml->out_ps ? rc : -1) : t->saved, t->rc ? W | as : R | as);
        use(c, dout[li & 1], R | gs);
        if (ml->ws_ps > 0) use(c, ws, ml->ws_rw ? RW : W);
        use(c, t->grad, t->tie_target ? RW : W | gs); /* a tied gradient adds to what is there */
        if (li > 0) use(c, dout[(li - 1) & 1], W | gs);
        /* no gradient for the model's input: the first layer's backward does half */
        double bwd = ml->bwd_given ? ml->bwd_flops_ps : (li == 0 ? 1.0 : 2.0) * ml->flops_ps;
        c->flops = (bwd + (t->rc ? ml->flops_ps : 0)) * bs;
        /* bytes default like flops: twice the forward's, once in the first layer */
        double bwd_hbm = ml->bwd_hbm_given ? ml->bwd_hbm_ps : (li == 0 ? 1.0 : 2.0) * ml->hbm_ps;
        c->hbm_bytes = (uint64_t)ceil((bwd_hbm + (t->rc ? ml->hbm_ps : 0)) * bs + ml->bwd_hbm_pp * ml->params);
        if (t->opt == OPT_CPU && ml->opt_bytes * ml->params > 0) {
            rcall_t *o = call_add(&b, (int)li, UVMRT_PHASE_OPTIMIZER, CPU_STREAM, 0);
            if (o == NULL) goto oom;
            if (ml->opt_given) o->host_bytes = (uint64_t)ceil(ml->opt_bytes * ml->params);
            else o->adamw_params = (uint64_t)ml->params; /* at the profile's AdamW rate */
            o->after = 0; /* the update starts once the backward wrote the gradient */
        }
        if (t->opt == OPT_CPU && m->staged && t->master >= 0) { /* the working copy, once updated */
            rcall_t *h = call_add(&b, (int)li, UVMRT_PHASE_OPTIMIZER, HALF_STREAM, 2);
            if (h == NULL) goto oom;
            use(h, t->master, R | S);
            use(h, t->wh, W | S);
            h->hbm_bytes = (uint64_t)ceil(ml->param_bytes * ml->params);
            h->after = CPU_STREAM;
        }
    }
    /* the GPU's optimizer calls */
    for (size_t li = 0; li < L; li++) {
        const ltensors_t *t = &lt[li];
        if (t->opt != OPT_GPU || t->wh < 0) continue;
        rcall_t *c = call_add(&b, (int)li, UVMRT_PHASE_OPTIMIZER, 0, 3 + MAX_STATES);
        if (c == NULL) goto oom;
        use(c, t->master >= 0 ? t->master : t->wh, RW | S);
        for (int s = 0; s < t->ml->n_states; s++) use(c, t->states[s], RW | S);
        use(c, t->grad, R | S);
        if (t->master >= 0) use(c, t->wh, W | S);
        c->hbm_bytes = (uint64_t)ceil(t->ml->opt_bytes * t->ml->params);
    }
    free(lt);
    free(opts);
    return 0;
oom:
    fprintf(stderr, "uvmrt-plan: %s: out of memory building the step at batch %llu\n", m->path,
            (unsigned long long)batch);
fail:
    free(lt);
    free(opts);
    record_free(r);
    return b.too_large ? -2 : -1;
}
