/*
 * plan.c -- uvmrt-plan: the what-if tool. Re-plays a recorded step (UVMRT_RECORD)
 * on a sim context -- the same planner and the same sim model the library uses --
 * at a budget and a profile, and reports the predicted step time, what bounds it,
 * the bytes each way and each layer's mechanisms. See uvmrt-plan(1).
 * Every number it prints about a run is a prediction of the model, never a measurement.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "adamw_bytes.h"
#include "input_file.h"
#include "outfile.h"
#include "plan.h"
#include "uvmrt.h"

#define MIB (1024.0 * 1024.0)
#define GIB_D (1024.0 * MIB)
#define GRAIN (2ull << 20) /* --fit's granularity: the driver's 2 MiB block */
#define REPLAY_STEPS 3

/* ------------------------------------------------------------------ the record */
void record_free(record_t *r)
{
    for (size_t i = 0; i < r->n_layers; i++) free(r->layers[i]);
    for (size_t i = 0; i < r->n_tensors; i++) free(r->tensors[i].name);
    for (size_t i = 0; i < r->n_calls; i++) {
        free(r->calls[i].use_t);
        free(r->calls[i].use_a);
    }
    free(r->layers);
    free(r->tensors);
    free(r->calls);
    free(r->profile);
    free(r->source);
    free(r->cpu_opt);
    free(r->recomputes);
    memset(r, 0, sizeof *r);
}

static int parse_enum(const char *s, int count, const char *(*name)(int))
{
    for (int i = 0; i < count; i++)
        if (strcmp(s, name(i)) == 0) return i;
    return -1;
}
static const char *role_name(int i) { return uvmrt_role_name((uvmrt_role_t)i); }
static const char *phase_name(int i) { return uvmrt_phase_name((uvmrt_phase_t)i); }

#define BAD(...)                                                                                                      \
    do {                                                                                                              \
        fprintf(stderr, "uvmrt-plan: %s: ", path);                                                                    \
        fprintf(stderr, __VA_ARGS__);                                                                                 \
        fputc('\n', stderr);                                                                                          \
        goto fail;                                                                                                    \
    } while (0)

/* The ranges a record's fields are checked against (uvmrt-plan(1), RECORD FILES). */
#define REC_MAX_ID (1 << 30)           /* tensor ids, and so tensors */
#define REC_MAX_LAYERS (1 << 24)
#define REC_MAX_CALLS (1 << 28)
#define REC_MAX_SIZE (1ull << 50)      /* a tensor's size_bytes: the library's limit (1 PiB) */
#define REC_MAX_TOTAL (1ull << 62)     /* every footprint added up, and budget_bytes */
#define REC_MAX_NS 1000000000000000000ll /* 1e18 ns: any duration, host_ns */
#define REC_MAX_FILE (4ull << 30)      /* bytes of JSON read */
#define REC_BLOCK (2ull << 20)         /* footprints round up to at most the 2 MiB block */

/* A JSON value as text for a message, cut to fit. */
static void json_text(const json_t *v, char *buf, size_t n)
{
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, n, "%s", s ? s : "(missing)");
    if (s && strlen(s) >= n && n > 4) memcpy(buf + n - 4, "...", 4);
    free(s);
}

/* o[key] as an integer in lo..hi (def when absent and !required); 0, or -1 after a
 * message naming the file, where, the key, its value and the range. */
static int rec_int(const char *path, const char *where, const json_t *o, const char *key, int required,
                   json_int_t lo, json_int_t hi, json_int_t def, json_int_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (v == NULL && !required) {
        *out = def;
        return 0;
    }
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
        *out = json_integer_value(v);
        return 0;
    }
    char t[80];
    json_text(v, t, sizeof t);
    fprintf(stderr, "uvmrt-plan: %s: %s%s %s: expected an integer from %lld to %lld\n", path, where, key, t,
            (long long)lo, (long long)hi);
    return -1;
}

/* o[key] as a string (def when absent and !required), or -1 after a message. */
static int rec_str(const char *path, const char *where, const json_t *o, const char *key, int required,
                   const char *def, const char **out)
{
    const json_t *v = json_object_get(o, key);
    if (v == NULL && !required) {
        *out = def;
        return 0;
    }
    if (json_is_string(v)) {
        *out = json_string_value(v);
        return 0;
    }
    char t[80];
    json_text(v, t, sizeof t);
    fprintf(stderr, "uvmrt-plan: %s: %s%s %s: expected a string\n", path, where, key, t);
    return -1;
}

/* o[key] as a boolean (def when absent), or -1 after a message. */
static int rec_bool(const char *path, const json_t *o, const char *key, int def, int *out)
{
    const json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_boolean(v)) {
        *out = v ? json_is_true(v) : def;
        return 0;
    }
    char t[80];
    json_text(v, t, sizeof t);
    fprintf(stderr, "uvmrt-plan: %s: %s %s: expected true or false\n", path, key, t);
    return -1;
}

/* A record's tensor ids, sorted, with their indices: ids may have gaps (freed
 * tensors) and go up to 2^30, so the map is sized by the tensors present. */
typedef struct id_index {
    int id, index;
} id_index_t;

static int by_id(const void *a, const void *b)
{
    const id_index_t *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The index of tensor id in map[0..n), or -1. */
static int index_of_id(const id_index_t *map, size_t n, json_int_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (map[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && map[lo].id == id ? map[lo].index : -1;
}

/* Opens the record: a regular file only (O_NONBLOCK first: a FIFO must not hang
 * the tool), at most REC_MAX_FILE bytes. */
static json_t *record_json_load(const char *path)
{
    const char *why = NULL;
    struct stat st;
    int fd = input_file_open(path, &st, &why);
    if (fd < 0) {
        fprintf(stderr, "uvmrt-plan: --record %s: cannot read it: %s\n", path, why);
        return NULL;
    }
    if ((uint64_t)st.st_size > REC_MAX_FILE) {
        fprintf(stderr, "uvmrt-plan: --record %s: %lld bytes: expected a record of at most %llu GiB\n", path,
                (long long)st.st_size, REC_MAX_FILE >> 30);
        close(fd);
        return NULL;
    }
    json_error_t err;
    FILE *f = fdopen(fd, "rb"); /* buffered: jansson's json_loadfd reads a byte per read(2) */
    json_t *root = f ? json_loadf(f, 0, &err) : NULL;
    if (f == NULL) {
        snprintf(err.text, sizeof err.text, "%s", strerror(errno));
        err.line = 0;
        close(fd);
    } else fclose(f);
    if (root == NULL)
        fprintf(stderr, "uvmrt-plan: %s: not a readable JSON file: %s (line %d)\n", path, err.text, err.line);
    return root;
}

/* Reads a record file; 0 on success, else a message naming the file, the field,
 * its value and what was expected. Every field is checked against its range, and
 * the tensors' footprints must add up to at most REC_MAX_TOTAL, so that no sum
 * the tool makes of them can wrap. */
static int record_load(const char *path, record_t *r)
{
    memset(r, 0, sizeof *r);
    json_t *root = record_json_load(path), *layers, *tensors, *calls;
    const char *fmt = NULL, *profile = "", *ignored;
    json_int_t budget = 0, version = 1, host_ext = 0, unused = 0;
    int discard = 1, remote = 1;
    id_index_t *ids = NULL;
    unsigned *seen = NULL;
    uint8_t *stream_used = NULL;
    char where[96];
    uint64_t total = 0;
    if (root == NULL) return -1;
    if (!json_is_object(root)) BAD("not a uvmrt record (UVMRT_RECORD): the top level is not a JSON object");
    if (rec_str(path, "", root, "format", 1, NULL, &fmt)) goto fail;
    if (strcmp(fmt, "uvmrt-record") != 0) BAD("format is '%s', expected 'uvmrt-record'", fmt);
    if (rec_int(path, "", root, "version", 0, 1, 1, 1, &version) || /* absent: 1, as hand-written ones are */
        rec_str(path, "", root, "uvmrt_version", 0, "", &ignored) || rec_str(path, "", root, "backend", 0, "", &ignored) ||
        rec_str(path, "", root, "profile", 0, "", &profile) ||
        rec_int(path, "", root, "budget_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &budget) ||
        rec_int(path, "", root, "host_external_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &host_ext) ||
        rec_int(path, "", root, "host_budget_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &unused) ||
        rec_int(path, "", root, "peak_host_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &unused) ||
        rec_int(path, "", root, "plan_host_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &unused) ||
        rec_bool(path, root, "discard", 1, &discard) || rec_bool(path, root, "remote", 1, &remote))
        goto fail;
    layers = json_object_get(root, "layers");
    tensors = json_object_get(root, "tensors");
    calls = json_object_get(root, "calls");
    if (!json_is_array(layers) || !json_is_array(tensors) || !json_is_array(calls) || json_array_size(calls) == 0)
        BAD("layers, tensors and calls must be arrays, with at least one call");
    if (json_array_size(layers) > REC_MAX_LAYERS || json_array_size(tensors) > REC_MAX_ID ||
        json_array_size(calls) > REC_MAX_CALLS)
        BAD("%zu layers, %zu tensors, %zu calls: expected at most %d, %d and %d", json_array_size(layers),
            json_array_size(tensors), json_array_size(calls), REC_MAX_LAYERS, REC_MAX_ID, REC_MAX_CALLS);
    r->profile = strdup(profile);
    r->source = strdup(path);
    r->budget = (uint64_t)budget;
    r->host_external = (uint64_t)host_ext;
    r->discard = discard;
    r->remote = remote;
    r->n_layers = json_array_size(layers);
    r->layers = calloc(r->n_layers + 1, sizeof *r->layers);
    r->n_tensors = json_array_size(tensors);
    r->tensors = calloc(r->n_tensors + 1, sizeof *r->tensors);
    r->n_calls = json_array_size(calls);
    r->calls = calloc(r->n_calls, sizeof *r->calls);
    ids = malloc((r->n_tensors + 1) * sizeof *ids);
    seen = calloc(r->n_tensors + 1, sizeof *seen);
    stream_used = calloc(r->n_calls, 1);
    if (!r->profile || !r->source || !r->layers || !r->tensors || !r->calls || !ids || !seen || !stream_used)
        BAD("out of memory for %zu tensors and %zu calls", r->n_tensors, r->n_calls);
    for (size_t i = 0; i < r->n_layers; i++) {
        const char *s = json_string_value(json_array_get(layers, i));
        if (s == NULL) BAD("layers[%zu] is not a string", i);
        if ((r->layers[i] = strdup(s)) == NULL) BAD("out of memory");
    }
    for (size_t i = 0; i < r->n_tensors; i++) {
        const json_t *o = json_array_get(tensors, i);
        json_int_t id, layer, size, fp, arena;
        const char *name, *role, *place, *tier;
        if (!json_is_object(o)) BAD("tensors[%zu] is not an object", i);
        snprintf(where, sizeof where, "tensors[%zu]: ", i);
        if (rec_int(path, where, o, "id", 1, 0, REC_MAX_ID, 0, &id) || rec_str(path, where, o, "name", 1, NULL, &name))
            goto fail;
        snprintf(where, sizeof where, "tensors[%zu] ('%.40s'): ", i, name);
        if (rec_int(path, where, o, "layer", 1, -1, (json_int_t)r->n_layers - 1, 0, &layer) ||
            rec_str(path, where, o, "role", 1, NULL, &role) ||
            rec_int(path, where, o, "size_bytes", 1, 1, (json_int_t)REC_MAX_SIZE, 0, &size))
            goto fail;
        /* what residency counts: the size rounded up to its alignment (64 KiB or the
         * 2 MiB block), never more than the block above it */
        uint64_t fp_max = ((uint64_t)size + REC_BLOCK - 1) / REC_BLOCK * REC_BLOCK;
        if (rec_int(path, where, o, "footprint_bytes", 1, size, (json_int_t)fp_max, 0, &fp) ||
            rec_int(path, where, o, "arena", 0, -1, id, -1, &arena) || /* arenas are numbered as made: <= the id */
            rec_str(path, where, o, "placement", 0, "auto", &place) ||
            rec_str(path, where, o, "tier", 0, "memory", &tier))
            goto fail;
        rtensor_t *t = &r->tensors[i];
        t->role = parse_enum(role, UVMRT_ROLE_COUNT, role_name);
        if (t->role < 0) BAD("%srole '%s': expected weight, gradient, optimizer, activation or workspace", where, role);
        if (strcmp(place, "auto") != 0 && strcmp(place, "host") != 0)
            BAD("%splacement '%s': expected \"auto\" or \"host\"", where, place);
        if (strcmp(tier, "memory") != 0 && strcmp(tier, "disk") != 0)
            BAD("%stier '%s': expected \"memory\" or \"disk\"", where, tier);
        t->disk = strcmp(tier, "disk") == 0;
        if ((t->name = strdup(name)) == NULL) BAD("out of memory");
        t->layer = (int)layer;
        t->size = (uint64_t)size;
        t->footprint = (uint64_t)fp;
        t->host = strcmp(place, "host") == 0;
        t->arena = arena < 0 ? (int)i : (int)arena;
        total += t->footprint; /* each <= 2^50 + 2 MiB: checked below before it can wrap */
        if (total > REC_MAX_TOTAL)
            BAD("%sthe tensors' footprint_bytes add up to more than 2^62 bytes by here: expected less", where);
        ids[i] = (id_index_t){(int)id, (int)i};
    }
    /* recorded ids (with gaps where tensors were freed) -> indices */
    qsort(ids, r->n_tensors, sizeof *ids, by_id);
    for (size_t i = 1; i < r->n_tensors; i++)
        if (ids[i].id == ids[i - 1].id)
            BAD("tensors[%d]: id %d appears twice (also tensors[%d])", ids[i].index, ids[i].id, ids[i - 1].index);
    for (size_t i = 0; i < r->n_calls; i++) {
        const json_t *o = json_array_get(calls, i), *uses;
        json_int_t layer, stream, dur, hb, after, host_ns;
        const char *phase;
        if (!json_is_object(o)) BAD("calls[%zu] is not an object", i);
        snprintf(where, sizeof where, "calls[%zu]: ", i);
        json_int_t max_stream = (json_int_t)r->n_calls - 1; /* numbered by first appearance */
        if (rec_int(path, where, o, "layer", 1, 0, (json_int_t)r->n_layers - 1, 0, &layer) ||
            rec_str(path, where, o, "phase", 1, NULL, &phase) ||
            rec_int(path, where, o, "stream", 0, 0, max_stream, 0, &stream) ||
            rec_int(path, where, o, "after", 0, -1, max_stream, -1, &after) ||
            rec_int(path, where, o, "duration_ns", 1, 0, REC_MAX_NS, 0, &dur) ||
            rec_int(path, where, o, "host_bytes", 0, 0, (json_int_t)REC_MAX_TOTAL, 0, &hb) ||
            rec_int(path, where, o, "host_ns", 0, 0, REC_MAX_NS, 0, &host_ns))
            goto fail;
        rcall_t *c = &r->calls[i];
        c->phase = parse_enum(phase, UVMRT_PHASE_COUNT, phase_name);
        if (c->phase < 0) BAD("%sphase '%s': expected forward, backward or optimizer", where, phase);
        uses = json_object_get(o, "uses");
        if (!json_is_array(uses)) BAD("%suses: expected an array of [tensor id, access bits]", where);
        c->layer = (int)layer;
        c->stream = (int)stream;
        c->duration_ns = (uint64_t)dur;
        c->host_bytes = (uint64_t)hb;
        c->host_ns = (uint64_t)host_ns;
        c->after = (int)after;
        stream_used[stream] = 1;
        c->n_uses = json_array_size(uses);
        c->use_t = calloc(c->n_uses + 1, sizeof *c->use_t);
        c->use_a = calloc(c->n_uses + 1, sizeof *c->use_a);
        if (c->use_t == NULL || c->use_a == NULL) BAD("out of memory");
        for (size_t k = 0; k < c->n_uses; k++) {
            json_int_t tid, acc;
            json_error_t err;
            if (json_unpack_ex(json_array_get(uses, k), &err, 0, "[I, I]", &tid, &acc) != 0)
                BAD("calls[%zu].uses[%zu]: expected [tensor id, access bits]: %s", i, k, err.text);
            int idx = tid < 0 || tid > REC_MAX_ID ? -1 : index_of_id(ids, r->n_tensors, tid);
            if (idx < 0) BAD("calls[%zu].uses[%zu]: tensor id %lld is not in tensors", i, k, (long long)tid);
            if (acc < 1 || acc > 7) BAD("calls[%zu].uses[%zu]: access %lld: expected 1 to 7 (UVMRT_USE_* bits)", i, k,
                                       (long long)acc);
            if (seen[idx] == i + 1)
                BAD("calls[%zu].uses[%zu]: tensor id %lld appears twice in the call: expected each once", i, k,
                    (long long)tid);
            seen[idx] = (unsigned)(i + 1);
            c->use_t[k] = idx;
            c->use_a[k] = (unsigned)acc;
        }
    }
    for (size_t i = 0; i < r->n_calls; i++)
        if (r->calls[i].after >= 0 && !stream_used[r->calls[i].after])
            BAD("calls[%zu]: after %d: expected -1 (none) or the stream of a call of the record", i,
                r->calls[i].after);
    free(ids);
    free(seen);
    free(stream_used);
    json_decref(root);
    return 0;
fail:
    free(ids);
    free(seen);
    free(stream_used);
    json_decref(root);
    record_free(r);
    return -1;
}

/* ------------------------------------------------------------------ the replay */
enum { N_BOUNDS = 6 }; /* bound_names */
typedef struct prediction {
    int fits;
    uvmrt_status_t status;
    uint64_t budget, step_ns;
    uint64_t prefetch_bytes, evict_bytes, discard_bytes, remote_read_bytes, remote_write_bytes, host_bytes;
    uint64_t compute_ns;
    uint64_t device_bytes; /* the profile's device memory */
    double floor_ns[N_BOUNDS]; /* bound_names */
    int bound;
    unsigned *layer_mech; /* per layer, UVMRT_MECH_* */
    uint64_t tensor_bytes;        /* footprints of every tensor */
    uint64_t gpu_bytes;           /* fits: the peak resident bytes of the planned steps */
    uint64_t host_bytes_needed;   /* fits: the plan's host need; else at least what the GPU budget cannot hold */
    int host_limited;             /* 1: it does not fit because of the host budget */
    uint64_t host_homed_bytes;    /* fits: the tensors the plan keeps in host memory */
    double disk_read_bps, disk_write_bps; /* the profile's disk figures (0: not measured) */
    double host_mem_shared_bps;           /* the profile's, for the disk's share of host memory */
    /* the disk tier (tier_apply): the CPU layers whose AdamW moments (and, of
     * disk_state_layers of them, master weights and gradients too) live in files of the
     * spill directory, read before their use, written after */
    size_t disk_layers, disk_state_layers;
    char disk_first[128], disk_last[128];
    uint64_t disk_bytes;          /* their footprints on the disk */
    uint64_t disk_read_bytes;     /* per step: disk_bytes, and the state layers' weights again (their forward) */
    uint64_t disk_write_bytes;    /* per step: disk_bytes (a record's tier: what its calls write) */
    uint64_t host_without_disk;   /* the plan's host need without the tier */
    double disk_read_ns, disk_write_ns; /* per step, at the profile's disk rates */
} prediction_t;

/* The host budget every replay has (--host-budget, UVMRT_HOST_BUDGET, else this machine's
 * memory less the reserve); 0: none. host_note says where it came from. */
static uint64_t g_host_budget;
static char host_note[160];
/* The disk tier's directory (--spill-dir, UVMRT_SPILL_DIR; NULL: none) and its free bytes. */
static const char *g_spill_dir;
static uint64_t g_spill_free;
static char g_tier_why[600]; /* a searched model's: why even the disk tier does not make it fit ("": none) */

/* The floor's terms: the resources a step's time is bounded by (uvmrt-plan(1)). */
static const char *const bound_names[N_BOUNDS] = {"gpu_compute", "link_h2d", "link_d2h", "host_memory", "cpu", "disk"};

/* The call's CPU work on host memory: a model's CPU AdamW at the profile's AdamW rate
 * (as uvmrt-mlp declares it), 30 bytes per parameter without one. */
static uint64_t host_bytes_of(const rcall_t *c, const uvmrt_profile_t *pr)
{
    if (c->host_bytes > 0 || c->adamw_params == 0) return c->host_bytes;
    return cli_adamw_host_bytes(pr, c->adamw_params); /* as the trainers declare it */
}

/* A call the CPU runs: declared work on host memory and no tensors (uvmrt.h). */
static int cpu_call(const rcall_t *c) { return (c->host_bytes > 0 || c->adamw_params > 0) && c->n_uses == 0; }

/* The modelled time of a call's own work, as the library and the sim compute it. */
static double call_ns(const rcall_t *c, const uvmrt_profile_t *pr)
{
    if (c->duration_ns > 0) return (double)c->duration_ns;
    double ns = 0;
    if (c->flops > 0 && pr->flops > 0) ns += (double)(uint64_t)(c->flops / pr->flops * 1e9);
    if (c->hbm_bytes > 0 && pr->hbm_bps > 0) ns += (double)(uint64_t)((double)c->hbm_bytes / pr->hbm_bps * 1e9);
    return ns;
}

/* a + b, or UINT64_MAX where it would wrap */
static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* Stream k of the record as a sim handle: never NULL, so that "after stream 0" is one. */
static uvmrt_stream_t stream_of(int k) { return (uvmrt_stream_t)(uintptr_t)(0x1000u + (unsigned)k); }

/* The replay's own messages (a call over budget while --fit searches) are expected. */
static char last_error[1024]; /* the replay's error messages, for when it fails for another reason */
static void log_none(uvmrt_log_level_t l, const char *m, void *u)
{
    (void)u;
    size_t n = strlen(last_error);
    if (l == UVMRT_LOG_ERROR && n + 3 < sizeof last_error) /* all of them: a later one may say "see above" */
        snprintf(last_error + n, sizeof last_error - n, "%s%s", n ? "; " : "", m);
}

/* Allocates the record's tensors as they were: one uvmrt_tensors_alloc call per
 * run of tensors that shared allocation calls (a new call starts when a tensor
 * opens a new arena for a layer the current call already has one for), so the
 * arenas, their packing and the tensor ids equal the recorded run's. */
static uvmrt_status_t alloc_all(uvmrt_context_t *ctx, const record_t *r, uvmrt_tensor_t **out)
{
    size_t n = r->n_tensors, start = 0;
    uvmrt_tensor_desc_t *d = calloc(n + 1, sizeof *d);
    if (d == NULL) return UVMRT_ERR_NOMEM;
    uvmrt_status_t st = UVMRT_OK;
    for (size_t i = 0; i < n; i++)
        d[i] = (uvmrt_tensor_desc_t){r->tensors[i].name, r->tensors[i].layer, (uvmrt_role_t)r->tensors[i].role,
                                     (size_t)r->tensors[i].size};
    /* the arena the current call gave each layer (layer + 1: -1 is a layer too), and
     * in which call (run: 1, 2, ...): one look per tensor, not a scan of the call */
    int *arena_of = calloc(r->n_layers + 2, sizeof *arena_of), run = 1;
    size_t *run_of = calloc(r->n_layers + 2, sizeof *run_of);
    if (arena_of == NULL || run_of == NULL) st = UVMRT_ERR_NOMEM;
    for (size_t i = 0; i < n && st == UVMRT_OK; i++) {
        size_t l = (size_t)(r->tensors[i].layer + 1);
        if (run_of[l] == (size_t)run && arena_of[l] != r->tensors[i].arena) { /* a second arena: a new call */
            st = uvmrt_tensors_alloc(ctx, i - start, d + start, out + start);
            start = i;
            run++;
        }
        run_of[l] = (size_t)run;
        arena_of[l] = r->tensors[i].arena;
    }
    if (st == UVMRT_OK && n > start) st = uvmrt_tensors_alloc(ctx, n - start, d + start, out + start);
    free(arena_of);
    free(run_of);
    free(d);
    for (size_t i = 0; i < n && st == UVMRT_OK; i++)
        if (r->tensors[i].host) st = uvmrt_tensor_set_placement(ctx, out[i], UVMRT_PLACE_HOST);
    return st;
}

static uvmrt_status_t replay_step(uvmrt_context_t *ctx, const record_t *r, uvmrt_tensor_t **ts, uvmrt_use_t *uses)
{
    const uvmrt_profile_t *prof = uvmrt_context_profile(ctx);
    uvmrt_status_t st = uvmrt_step_begin(ctx);
    for (size_t i = 0; i < r->n_calls && st == UVMRT_OK; i++) {
        const rcall_t *c = &r->calls[i];
        for (size_t k = 0; k < c->n_uses; k++) uses[k] = (uvmrt_use_t){ts[c->use_t[k]], c->use_a[k]};
        uvmrt_layer_call_t call;
        uvmrt_layer_call_init(&call, c->layer, (uvmrt_phase_t)c->phase, stream_of(c->stream));
        call.uses = uses;
        call.n_uses = c->n_uses;
        call.no_default_uses = 1;
        call.sim_duration_ns = c->duration_ns;
        call.flops = c->duration_ns > 0 ? 0 : c->flops;
        call.hbm_bytes = c->duration_ns > 0 ? 0 : c->hbm_bytes; /* as the trainers declare it */
        call.host_bytes = host_bytes_of(c, prof);
        call.host_ns = call.host_bytes > 0 ? c->host_ns : 0; /* measured by the trainer */
        call.after = c->after >= 0 ? stream_of(c->after) : NULL; /* a CPU update follows its backward */
        st = uvmrt_layer_begin(ctx, &call);
        if (st == UVMRT_OK) st = uvmrt_layer_end(ctx);
    }
    if (st == UVMRT_OK) st = uvmrt_step_end(ctx);
    return st;
}

/* --trace PATH: the re-play's timeline, by the report rules (uvmrt_report_write). */
static int trace_write(const uvmrt_context_t *ctx, const char *path)
{
    last_error[0] = '\0';
    uvmrt_status_t st = uvmrt_report_write(ctx, "trace", path);
    if (st == UVMRT_OK) return 0;
    fprintf(stderr, "uvmrt-plan: --trace %s: the trace was not written: %s\n", path,
            last_error[0] ? last_error : uvmrt_status_str(st));
    return -1;
}

/* A sim context at budget with the profile, as every prediction makes it; NULL after
 * a message. */
static uvmrt_context_t *sim_context(const char *profile, uint64_t budget, int discard, int remote)
{
    last_error[0] = '\0'; /* this context's messages only */
    uvmrt_params_t prm;
    uvmrt_params_init(&prm);
    prm.ignore_env = 1; /* the user's UVMRT_* (UVMRT_RECORD...) must not steer the model */
    prm.backend = UVMRT_BACKEND_SIM;
    prm.profile = profile;
    prm.policy = UVMRT_POLICY_PREFETCH;
    prm.budget_bytes = budget;
    prm.discard_dead = discard;
    prm.remote = remote;
    prm.log_level = UVMRT_LOG_ERROR;
    prm.log_fn = log_none;
    prm.host_budget_bytes = g_host_budget ? g_host_budget : UINT64_MAX; /* auto on sim is none */
    /* --trace is written with uvmrt_report_write, not by prm.trace at destroy: a
     * failure there would be logged to log_none and lost */
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&prm, &ctx);
    if (st == UVMRT_OK) return ctx;
    fprintf(stderr,
            "uvmrt-plan: --profile '%s': cannot make a sim context with it (%s): expected a built-in "
            "profile name (uvmrt-plan --profile list) or a profile file (uvmrt-profile(5)); %s\n",
            profile, uvmrt_status_str(st), last_error);
    return NULL;
}

uvmrt_status_t plan_replay(uvmrt_context_t *ctx, const record_t *r, int steps)
{
    size_t max_uses = 1;
    for (size_t i = 0; i < r->n_calls; i++) max_uses = r->calls[i].n_uses > max_uses ? r->calls[i].n_uses : max_uses;
    uvmrt_tensor_t **ts = calloc(r->n_tensors + 1, sizeof *ts);
    uvmrt_use_t *uses = calloc(max_uses, sizeof *uses);
    uvmrt_status_t st = ts && uses ? UVMRT_OK : UVMRT_ERR_NOMEM;
    for (size_t l = 0; l < r->n_layers && st == UVMRT_OK; l++) {
        int id = -1;
        st = uvmrt_layer_add(ctx, r->layers[l], &id);
    }
    if (st == UVMRT_OK && r->host_external > 0) st = uvmrt_context_set_host_external_bytes(ctx, r->host_external);
    if (st == UVMRT_OK) st = alloc_all(ctx, r, ts);
    for (int s = 0; s < steps && st == UVMRT_OK; s++) st = replay_step(ctx, r, ts, uses);
    free(ts);
    free(uses);
    return st;
}

/* Re-plays r at budget on ctx (sim_context's, maybe after a search chose with it),
 * then destroys ctx; fills *p. */
static int predict_on(uvmrt_context_t *ctx, const record_t *r, uint64_t budget, const char *trace, prediction_t *p)
{
    memset(p, 0, sizeof *p);
    p->budget = budget;
    p->layer_mech = calloc(r->n_layers + 1, sizeof *p->layer_mech);
    if (p->layer_mech == NULL) {
        fprintf(stderr, "uvmrt-plan: out of memory for the replay at budget %.1f MiB\n", budget / MIB);
        uvmrt_context_destroy(ctx);
        return -1;
    }
    last_error[0] = '\0'; /* this replay's messages only */
    uvmrt_status_t st = plan_replay(ctx, r, REPLAY_STEPS);
    p->status = st;
    p->fits = st == UVMRT_OK;
    if (st != UVMRT_OK && st != UVMRT_ERR_BUDGET) {
        uint64_t total = 0;
        for (size_t i = 0; i < r->n_tensors; i++) total = sat_add(total, r->tensors[i].footprint);
        fprintf(stderr, "uvmrt-plan: %s: the replay failed at budget %.1f MiB (%.1f GiB of tensors in all): %s: %s\n",
                r->source ? r->source : "?", budget / MIB, total / (MIB * 1024), uvmrt_status_str(st), last_error);
        uvmrt_context_destroy(ctx);
        free(p->layer_mech);
        p->layer_mech = NULL;
        return -1;
    }
    for (size_t i = 0; i < r->n_tensors; i++) p->tensor_bytes = sat_add(p->tensor_bytes, r->tensors[i].footprint);
    p->host_bytes_needed = p->tensor_bytes > budget ? p->tensor_bytes - budget : 0;
    p->disk_read_bps = uvmrt_context_profile(ctx)->disk_read_bps;
    p->disk_write_bps = uvmrt_context_profile(ctx)->disk_write_bps;
    if (p->fits) {
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
        if (uvmrt_step_stats_get(ctx, REPLAY_STEPS - 1, &ss) == UVMRT_OK && uvmrt_summary_get(ctx, &sum) == UVMRT_OK) {
            p->fits = sum.plans_built > 0;
            p->gpu_bytes = sum.peak_resident_bytes;
            p->host_homed_bytes = sum.host_homed_bytes;
            if (p->fits) p->host_bytes_needed = sum.plan_host_bytes;
            p->step_ns = ss.step_ns;
            p->prefetch_bytes = ss.prefetch_bytes;
            p->evict_bytes = ss.evict_bytes;
            p->discard_bytes = ss.discard_bytes;
            p->remote_read_bytes = ss.remote_read_bytes;
            p->remote_write_bytes = ss.remote_write_bytes;
        } else p->fits = 0;
        const uvmrt_profile_t *pr = uvmrt_context_profile(ctx);
        p->device_bytes = pr->memory_bytes;
        p->host_mem_shared_bps = pr->host_mem_shared_bps;
        double cpu_ns = 0;
        for (size_t i = 0; i < r->n_calls; i++) {
            const rcall_t *c = &r->calls[i];
            uint64_t hb = host_bytes_of(c, pr);
            double ns = call_ns(c, pr), host_ns = pr->host_mem_bps > 0 ? (double)hb / pr->host_mem_bps * 1e9 : 0;
            if (hb > 0 && c->host_ns > 0) host_ns = (double)c->host_ns; /* the trainer's measurement */
            if (cpu_call(c)) cpu_ns += ns > host_ns ? ns : host_ns; /* the sim runs both at once */
            else p->compute_ns += (uint64_t)ns;
            p->host_bytes += hb;
        }
        double h2d = (double)p->prefetch_bytes / pr->prefetch_h2d_bps +
                     (pr->remote_read_bps > 0 ? (double)p->remote_read_bytes / pr->remote_read_bps : 0);
        double d2h = (double)p->evict_bytes / pr->evict_d2h_bps +
                     (pr->remote_write_bps > 0 ? (double)p->remote_write_bytes / pr->remote_write_bps : 0);
        double link_bytes = (double)(p->prefetch_bytes + p->evict_bytes + p->remote_read_bytes + p->remote_write_bytes);
        p->floor_ns[0] = (double)p->compute_ns;
        p->floor_ns[1] = h2d * 1e9;
        p->floor_ns[2] = d2h * 1e9;
        p->floor_ns[3] = pr->host_mem_shared_bps > 0 ? ((double)p->host_bytes + link_bytes) / pr->host_mem_shared_bps * 1e9 : 0;
        p->floor_ns[4] = cpu_ns;
        for (int b = 1; b < N_BOUNDS; b++)
            if (p->floor_ns[b] > p->floor_ns[p->bound]) p->bound = b;
        size_t n = 0;
        uvmrt_memory_summary(ctx, NULL, 0, &n);
        uvmrt_tensor_info_t *info = calloc(n + 1, sizeof *info);
        if (info) info[0].struct_size = sizeof *info;
        if (info && uvmrt_memory_summary(ctx, info, n, &n) == UVMRT_OK)
            for (size_t i = 0; i < n; i++)
                if (info[i].layer >= 0 && (size_t)info[i].layer < r->n_layers) p->layer_mech[info[i].layer] |= info[i].mechanism;
        free(info);
    }
    if (!p->fits && g_host_budget > 0) {
        /* the library's refusal says what the plan needed (src/exec/policy.c's message) */
        const char *refused = strstr(last_error, "plan refused: it needs ");
        double gpu_gib, budget_gib, host_gib;
        if (refused && sscanf(refused, "plan refused: it needs %lf GiB on the GPU (budget %lf GiB) and %lf GiB of host",
                              &gpu_gib, &budget_gib, &host_gib) == 3)
            p->host_bytes_needed = (uint64_t)(host_gib * GIB_D);
        p->host_limited = refused != NULL || p->host_bytes_needed > g_host_budget;
    }
    int rc = trace != NULL ? trace_write(ctx, trace) : 0;
    uvmrt_context_destroy(ctx);
    if (rc != 0) {
        free(p->layer_mech);
        p->layer_mech = NULL;
    }
    return rc;
}

/* Re-plays the record at budget on a sim context with the profile; fills *p. */
static int predict(const record_t *r, const char *profile, uint64_t budget, const char *trace, prediction_t *p)
{
    memset(p, 0, sizeof *p);
    uvmrt_context_t *ctx = sim_context(profile, budget, r->discard, r->remote);
    return ctx != NULL ? predict_on(ctx, r, budget, trace, p) : -1;
}

/* ------------------------------------------------------------------ the disk tier */
/* The host bytes of a layer's host-placed tensors of the disk tier's kind: its optimizer
 * states (a CPU layer's AdamW moments: uvmrt-gpt's --spill moments), or its others
 * (the fp32 master weights and the gradient: with them, --spill state); *weights: the
 * weights' share of the others (read back for the forward too). */
static uint64_t tier_bytes_of(const record_t *r, size_t layer, int others, uint64_t *weights)
{
    uint64_t b = 0;
    if (weights) *weights = 0;
    for (size_t i = 0; i < r->n_tensors; i++) {
        const rtensor_t *t = &r->tensors[i];
        if (t->layer != (int)layer || !t->host) continue;
        if ((t->role == UVMRT_ROLE_OPTIMIZER_STATE) == !others) b = sat_add(b, t->footprint);
        if (others && weights && t->role == UVMRT_ROLE_WEIGHT) *weights = sat_add(*weights, t->footprint);
    }
    return b;
}

/* The sum of the two largest of share[0..n): the tier's window, the copies it holds at
 * once (one layer's read back while the one before is written). */
static uint64_t two_largest(const uint64_t *share, size_t n)
{
    uint64_t big[2] = {0, 0};
    for (size_t j = 0; j < n; j++)
        if (share[j] > big[0]) big[1] = big[0], big[0] = share[j];
        else if (share[j] > big[1]) big[1] = share[j];
    return big[0] + big[1];
}

/* p's disk traffic (disk_read_bytes, disk_write_bytes) timed at the profile's rates: one
 * drive, both ways, in the disk's floor; through host memory too; the step waits for
 * the reads and is never under the drive's time; its bound again. */
static void tier_time(prediction_t *p)
{
    p->disk_read_ns = (double)p->disk_read_bytes / p->disk_read_bps * 1e9;
    p->disk_write_ns = (double)p->disk_write_bytes / p->disk_write_bps * 1e9;
    p->floor_ns[5] = p->disk_read_ns + p->disk_write_ns;
    if (p->host_mem_shared_bps > 0)
        p->floor_ns[3] += (double)(p->disk_read_bytes + p->disk_write_bytes) / p->host_mem_shared_bps * 1e9;
    p->step_ns += (uint64_t)p->disk_read_ns;
    if ((double)p->step_ns < p->floor_ns[5]) p->step_ns = (uint64_t)p->floor_ns[5];
    p->bound = 0;
    for (int b = 1; b < N_BOUNDS; b++)
        if (p->floor_ns[b] > p->floor_ns[p->bound]) p->bound = b;
    p->host_limited = 0;
}

/* p (r's plan, made without a host budget) over the host budget: puts CPU layers'
 * state on the disk tier as uvmrt-gpt's --spill auto does, until the host need fits:
 * the AdamW moments of one CPU layer after another, the last layers first, then,
 * where that is not enough, their master weights and gradients too, in the same order.
 * Each layer's share leaves host memory but for the two largest layers' (read back
 * around their use while the one before is written: the tier's copies in flight);
 * the step waits for the reads (the tier reads before the CPU's update opens) and the
 * disk moves the bytes both ways once per step (a state layer's weights are read twice:
 * for its forward and its update), which host memory carries too.
 * 0: it fits (p says how); -1: even every CPU layer's state is not enough (p: with all
 * of it); -2: the spill directory has less free space than the tier needs. */
/* A disk tier of n layers (n_state of them with more than their moments) in p: moved
 * bytes on the drive, reads and writes a step, the host need from host (the need without
 * it) to need. */
static void tier_set(prediction_t *p, uint64_t host, size_t n, size_t n_state, uint64_t moved, uint64_t reads,
                     uint64_t writes, uint64_t need)
{
    p->host_without_disk = host;
    p->disk_layers = n;
    p->disk_state_layers = n_state;
    p->disk_bytes = moved;
    p->disk_read_bytes = reads;
    p->disk_write_bytes = writes;
    p->host_bytes_needed = need;
}

/* After tier_set and the host budget's check: -2 when the spill directory holds less than
 * the tier's files, else 0 with the tier timed. */
static int tier_fits_disk(prediction_t *p)
{
    if (g_spill_dir != NULL && p->disk_bytes > g_spill_free) return -2;
    tier_time(p);
    return 0;
}

static int tier_apply(const record_t *r, prediction_t *p)
{
    uint64_t host = p->host_bytes_needed, moved = 0, reads = 0, need = host;
    size_t n = 0, n_state = 0;
    uint64_t *share = calloc(r->n_layers ? r->n_layers : 1, sizeof *share);
    if (share == NULL) return -1;
    for (int others = 0; others <= 1 && need > g_host_budget; others++)
        for (size_t k = r->n_layers; k-- > 0 && need > g_host_budget;) {
            if (r->cpu_opt == NULL || !r->cpu_opt[k]) continue;
            uint64_t w = 0, b = tier_bytes_of(r, k, others, &w);
            if (b == 0) continue;
            if (!others) {
                if (n++ == 0) snprintf(p->disk_last, sizeof p->disk_last, "%s", r->layers[k]);
                snprintf(p->disk_first, sizeof p->disk_first, "%s", r->layers[k]);
            } else {
                n_state++;
            }
            moved += b;
            reads += b + w;
            share[k] += b;
            uint64_t staging = two_largest(share, r->n_layers);
            need = host - moved + (staging < moved ? staging : moved);
        }
    free(share);
    tier_set(p, host, n, n_state, moved, reads, moved, need);
    if (n == 0 || need > g_host_budget) return -1;
    return tier_fits_disk(p);
}

/* Whether the plan may use the disk tier: a spill directory and the profile's disk rates. */
static int tier_available(const prediction_t *p)
{
    return g_spill_dir != NULL && p->disk_read_bps > 0 && p->disk_write_bps > 0;
}

/* A record of a run with tensors on the disk tier (rtensor_t.disk), p its replay made
 * without a host budget: those tensors as the run had them, out of host memory but for
 * the two layers with the most on the tier (its window), read for each call that reads
 * them and written after each call that writes them (what the runtime does), on one
 * drive, the step waiting for the reads as tier_apply has it. 0: it fits the host
 * budget; -1: not (p->host_bytes_needed says what it needs); -2: the spill directory
 * has less free space than the tier's files. */
static int record_tier_apply(const record_t *r, prediction_t *p)
{
    uint64_t *share = calloc(r->n_layers + 1, sizeof *share); /* layer + 1: -1 is one too */
    uint8_t *state = calloc(r->n_layers + 1, 1);
    if (share == NULL || state == NULL) {
        free(share);
        free(state);
        return -1;
    }
    uint64_t moved = 0, reads = 0, writes = 0;
    for (size_t i = 0; i < r->n_tensors; i++) {
        const rtensor_t *t = &r->tensors[i];
        if (!t->disk) continue;
        moved = sat_add(moved, t->footprint);
        share[t->layer + 1] = sat_add(share[t->layer + 1], t->footprint);
        state[t->layer + 1] |= t->role != UVMRT_ROLE_OPTIMIZER_STATE;
    }
    for (size_t i = 0; i < r->n_calls; i++)
        for (size_t k = 0; k < r->calls[i].n_uses; k++) {
            const rtensor_t *t = &r->tensors[r->calls[i].use_t[k]];
            if (!t->disk) continue;
            if (r->calls[i].use_a[k] & UVMRT_USE_READ) reads = sat_add(reads, t->footprint);
            if (r->calls[i].use_a[k] & UVMRT_USE_WRITE) writes = sat_add(writes, t->footprint);
        }
    size_t n = 0, n_state = 0;
    for (size_t l = 0; l <= r->n_layers; l++) {
        if (share[l] == 0) continue;
        const char *name = l == 0 ? "-" : r->layers[l - 1];
        if (n++ == 0) snprintf(p->disk_first, sizeof p->disk_first, "%s", name);
        snprintf(p->disk_last, sizeof p->disk_last, "%s", name);
        n_state += state[l] != 0;
    }
    uint64_t host = p->host_bytes_needed, window = two_largest(share, r->n_layers + 1);
    free(share);
    free(state);
    tier_set(p, host, n, n_state, moved, reads, writes,
             (host > moved ? host - moved : 0) + (window < moved ? window : moved));
    if (g_host_budget != 0 && p->host_bytes_needed > g_host_budget) return -1;
    return tier_fits_disk(p);
}

/* Whether record r had tensors on the disk tier. */
static int record_has_disk(const record_t *r)
{
    for (size_t i = 0; i < r->n_tensors; i++)
        if (r->tensors[i].disk) return 1;
    return 0;
}

/* The largest working set of one call (host-placed tensors do not count), and its call. */
static uint64_t largest_working_set(const record_t *r, size_t *call)
{
    uint64_t best = 0;
    *call = 0;
    for (size_t i = 0; i < r->n_calls; i++) {
        uint64_t ws = 0;
        for (size_t k = 0; k < r->calls[i].n_uses; k++)
            if (!r->tensors[r->calls[i].use_t[k]].host) ws = sat_add(ws, r->tensors[r->calls[i].use_t[k]].footprint);
        if (ws > best) {
            best = ws;
            *call = i;
        }
    }
    return best;
}

/* The smallest budget, a multiple of 2 MiB, at which the replay fits: binary search
 * (feasibility grows with the budget: a call fits once its working set does). */
static int fit_budget(const record_t *r, const char *profile, uint64_t *out)
{
    uint64_t total = 0;
    for (size_t i = 0; i < r->n_tensors; i++) total = sat_add(total, r->tensors[i].footprint);
    if (total > UINT64_MAX / 2) { /* a record's total is at most 2^62 (record_load); a model's is checked too */
        fprintf(stderr, "uvmrt-plan: %s: the tensors add up to more than 2^63 bytes: no budget can hold them\n",
                r->source ? r->source : "?");
        return -1;
    }
    uint64_t lo = 0, hi = (total + GRAIN - 1) / GRAIN; /* in grains: lo fails (0 bytes), hi fits */
    prediction_t p;
    if (predict(r, profile, hi * GRAIN, NULL, &p) != 0) return -1;
    free(p.layer_mech);
    if (!p.fits) return 1;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (predict(r, profile, mid * GRAIN, NULL, &p) != 0) return -1;
        free(p.layer_mech);
        if (p.fits) hi = mid;
        else lo = mid;
    }
    *out = hi * GRAIN;
    return 0;
}

/* ------------------------------------------------------------------ output */
static json_t *prediction_json(const record_t *r, const prediction_t *p)
{
    json_t *o = json_pack("{s:b, s:I}", "fits", p->fits, "budget_bytes", (json_int_t)p->budget);
    json_object_set_new(o, "host_budget_bytes", g_host_budget ? json_integer((json_int_t)g_host_budget) : json_null());
    json_object_set_new(o, "host_budget_source", json_string(host_note));
    json_object_set_new(o, "tensor_bytes", json_integer((json_int_t)p->tensor_bytes));
    json_object_set_new(o, "host_bytes_needed", json_integer((json_int_t)p->host_bytes_needed));
    json_object_set_new(o, "gpu_bytes_needed", p->fits ? json_integer((json_int_t)p->gpu_bytes) : json_null());
    json_object_set_new(o, "disk_bytes_needed", json_integer((json_int_t)p->disk_bytes));
    json_object_set_new(o, "host_limited", json_boolean(p->host_limited));
    if (!p->fits) { /* the keys are always there: no step, no bound, no plan */
        json_object_set_new(o, "label", json_string("predicted"));
        json_object_set_new(o, "predicted_step_ns", json_null());
        json_object_set_new(o, "bound", json_null());
        json_object_set_new(o, "layers", json_array());
        return o;
    }
    json_t *layers = json_array(), *floor = json_object();
    for (size_t l = 0; l < r->n_layers; l++) {
        char mech[128];
        uvmrt_mechanism_name(p->layer_mech[l], mech, sizeof mech);
        json_t *lo = json_pack("{s:s, s:s}", "name", r->layers[l], "mechanisms", mech);
        if (r->cpu_opt != NULL) { /* a model's: where its AdamW runs, whether it recomputes */
            json_object_set_new(lo, "adamw", json_string(r->cpu_opt[l] ? "cpu" : "gpu"));
            json_object_set_new(lo, "recompute", json_boolean(r->recomputes[l]));
        }
        json_array_append_new(layers, lo);
    }
    for (int b = 0; b < N_BOUNDS; b++) json_object_set_new(floor, bound_names[b], json_integer((json_int_t)p->floor_ns[b]));
    json_t *more = json_pack("{s:s, s:I, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "label", "predicted", "predicted_step_ns",
                     (json_int_t)p->step_ns, "bound", bound_names[p->bound], "floor_ns", floor, "h2d_bytes",
                     (json_int_t)(p->prefetch_bytes + p->remote_read_bytes), "d2h_bytes",
                     (json_int_t)(p->evict_bytes + p->remote_write_bytes), "prefetch_bytes", (json_int_t)p->prefetch_bytes,
                     "evict_bytes", (json_int_t)p->evict_bytes, "discard_bytes", (json_int_t)p->discard_bytes,
                     "remote_bytes", (json_int_t)(p->remote_read_bytes + p->remote_write_bytes), "layers", layers);
    json_object_update_missing(o, more); /* copies the references: more is released below */
    json_decref(more);
    return o;
}

static void print_text(const record_t *r, const prediction_t *p, const char *profile, uint64_t min_budget, int need,
                       const char *chose)
{
    printf("uvmrt-plan: predicted by the sim model (profile %s); nothing here is measured\n", profile);
    printf("budget %.1f MiB: %s (predicted)\n", p->budget / MIB, p->fits ? "fits" : "does not fit");
    if (chose != NULL) printf("%s\n", chose);
    printf("predicted smallest budget that fits: %.1f MiB%s\n", min_budget / MIB,
           p->disk_layers > 0 && p->fits ? " (without the disk tier)" : "");
    printf("host budget: %s\n", host_note);
    if (p->host_limited && !need) /* need: the search's own sentence says it */
        printf("does not fit: needs %.2f GiB host, budget %.2f GiB (%.2f GiB of tensors, %.2f GiB of GPU budget); "
               "a GPU budget of %.1f MiB, or a host budget of %.2f GiB (--host-budget), would fit\n",
               p->host_bytes_needed / GIB_D, g_host_budget / GIB_D, p->tensor_bytes / GIB_D, p->budget / GIB_D,
               min_budget / MIB, p->host_bytes_needed / GIB_D + 0.005);
    if (!p->fits) return;
    printf("predicted memory: GPU %.2f GiB (peak resident), host %.2f GiB (the plan's need; %.2f GiB of tensors), "
           "disk %.2f GiB\n",
           p->gpu_bytes / GIB_D, p->host_bytes_needed / GIB_D, p->tensor_bytes / GIB_D, p->disk_bytes / GIB_D);
    printf("predicted step time: %.3f ms, bound by %s\n", p->step_ns / 1e6, bound_names[p->bound]);
    printf("predicted floor terms (ms):");
    for (int b = 0; b < N_BOUNDS; b++) printf("%s %s %.3f", b ? "," : "", bound_names[b], p->floor_ns[b] / 1e6);
    putchar('\n');
    printf("predicted bytes per step: %.1f MiB to the GPU, %.1f MiB back, %.1f MiB discarded\n",
           (p->prefetch_bytes + p->remote_read_bytes) / MIB, (p->evict_bytes + p->remote_write_bytes) / MIB,
           p->discard_bytes / MIB);
    if (r->cpu_opt != NULL) printf("%-24s %-6s %-10s %s\n", "layer", "adamw", "recompute", "planned mechanisms");
    else printf("%-24s %s\n", "layer", "planned mechanisms");
    for (size_t l = 0; l < r->n_layers; l++) {
        char mech[128];
        uvmrt_mechanism_name(p->layer_mech[l], mech, sizeof mech);
        if (r->cpu_opt != NULL)
            printf("%-24.24s %-6s %-10s %s\n", r->layers[l], r->cpu_opt[l] ? "cpu" : "gpu",
                   r->recomputes[l] ? "yes" : "no", mech);
        else printf("%-24.24s %s\n", r->layers[l], mech);
    }
}

/* ------------------------------------------------------------------ sweep */
/* Whether an executable gnuplot is on PATH (as the shell would find it). */
static int gnuplot_found(void)
{
    const char *path = getenv("PATH");
    if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *d = path;; d++) {
        const char *end = strchr(d, ':');
        size_t n = end ? (size_t)(end - d) : strlen(d);
        char exe[4096];
        if (snprintf(exe, sizeof exe, "%.*s/gnuplot", n ? (int)n : 1, n ? d : ".") < (int)sizeof exe) {
            struct stat sb;
            if (stat(exe, &sb) == 0 && S_ISREG(sb.st_mode) && access(exe, X_OK) == 0) return 1;
        }
        if (end == NULL) return 0;
        d = end;
    }
}

/* The sweep's chart: gnuplot draws it into a temporary file of ours (so the user's
 * path never enters the script, where a quote would end the string and the rest
 * would run as gnuplot commands), which is then written to plot by the report rules
 * (src/base/outfile.h). 0, or -1 after saying why. */
static int plot_write(const char *plot, const char *profile, const char *datpath)
{
    char gp[] = "/tmp/uvmrt-plan-gp.XXXXXX", png[] = "/tmp/uvmrt-plan-png.XXXXXX", cmd[128], title[256];
    int pfd = mkstemp(png), fd = mkstemp(gp), rc = -1;
    FILE *g = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (pfd >= 0) close(pfd);
    if (pfd < 0 || g == NULL) {
        fprintf(stderr, "uvmrt-plan: --plot %s: cannot write a gnuplot script in /tmp: %s: no chart written\n", plot,
                strerror(errno));
        if (g != NULL) fclose(g);
        else if (fd >= 0) close(fd);
        goto out;
    }
    /* the profile names the chart: printable characters other than quotes and backslashes */
    size_t n = 0;
    for (const char *c = profile; *c && n + 1 < sizeof title; c++)
        title[n++] = (*c >= 0x20 && *c < 0x7f && *c != '\'' && *c != '"' && *c != '\\') ? *c : '_';
    title[n] = '\0';
    fprintf(g,
            "set terminal png size 900,500\nset output '%s'\nset xlabel 'budget (GiB)'\n"
            "set ylabel 'predicted ms/step'\nset title 'uvmrt-plan: predicted step time (%s)'\n"
            "plot '%s' using 1:2 with linespoints title 'predicted'\n",
            png, title, datpath);
    if (fclose(g) != 0) {
        fprintf(stderr, "uvmrt-plan: --plot %s: cannot write a gnuplot script in /tmp: %s: no chart written\n", plot,
                strerror(errno));
        goto out;
    }
    snprintf(cmd, sizeof cmd, "gnuplot %s", gp);
    fflush(stdout);
    int st = system(cmd);
    if (st != 0) {
        fprintf(stderr, "uvmrt-plan: --plot %s: gnuplot failed (%s %d): no chart written\n", plot,
                st > 0 && WIFEXITED(st) ? "exit status" : "status", st > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : st);
        goto out;
    }
    FILE *in = fopen(png, "rb");
    uvmrt__outfile_t o;
    char why[600], buf[65536];
    size_t got, total = 0;
    if (in == NULL) {
        fprintf(stderr, "uvmrt-plan: --plot %s: cannot read gnuplot's chart: %s\n", plot, strerror(errno));
        goto out;
    }
    if (uvmrt__outfile_open(&o, plot, 0, why, sizeof why) != 0) {
        fprintf(stderr, "uvmrt-plan: --plot %s: cannot write it: %s\n", plot, why);
        fclose(in);
        goto out;
    }
    while ((got = fread(buf, 1, sizeof buf, in)) > 0 && fwrite(buf, 1, got, o.f) == got) total += got;
    int bad = ferror(in) || ferror(o.f) || total == 0;
    fclose(in);
    if (bad) {
        uvmrt__outfile_abandon(&o);
        fprintf(stderr, "uvmrt-plan: --plot %s: %s: no chart written\n", plot,
                total == 0 ? "gnuplot wrote an empty chart" : "copying gnuplot's chart failed");
        goto out;
    }
    if (uvmrt__outfile_close(&o, why, sizeof why) != 0) {
        fprintf(stderr, "uvmrt-plan: --plot %s: %s\n", plot, why);
        goto out;
    }
    rc = 0;
out:
    if (fd >= 0) unlink(gp);
    if (pfd >= 0) unlink(png);
    return rc;
}

static int predict_model(const model_t *m, uint64_t batch, const char *profile, uint64_t budget, const char *trace,
                         search_t *s, int quiet, record_t *r, prediction_t *p);
static json_t *choice_json(const model_t *m, const record_t *r, const prediction_t *p, const search_t *s);

/* The sweep's rows over budgets a..b: r's predictions, or (m non-NULL) m's at batch
 * with its mechanisms searched at each budget. */
static int sweep(const record_t *r, const model_t *m, uint64_t batch, const char *profile, uint64_t a, uint64_t b,
                 uint64_t step, int json, const char *plot)
{
    json_t *rows = json_array();
    FILE *dat = NULL;
    char datpath[] = "/tmp/uvmrt-plan.XXXXXX";
    if (plot != NULL) {
        int fd = mkstemp(datpath);
        dat = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (dat == NULL && fd >= 0) close(fd), unlink(datpath);
    }
    if (!json)
        printf("%-12s %-18s %-12s %-14s %-14s %s(all predicted, profile %s)\n", "budget_MiB", "predicted_ms/step",
               "bound", "predicted_GB_in", "predicted_GB_out", m ? "cpu_layers recompute " : "", profile);
    for (uint64_t budget = a; budget <= b; budget += step) {
        prediction_t p;
        record_t mr;
        search_t srch = {0};
        int bad = m ? predict_model(m, batch, profile, budget, NULL, &srch, 0, &mr, &p) != 0
                    : predict(r, profile, budget, NULL, &p) != 0;
        if (bad) {
            json_decref(rows);
            if (dat) fclose(dat);
            if (plot != NULL) unlink(datpath);
            return 1;
        }
        double in = (p.prefetch_bytes + p.remote_read_bytes) / 1e9, out = (p.evict_bytes + p.remote_write_bytes) / 1e9;
        const record_t *rr = m ? &mr : r;
        if (json) {
            json_t *row = prediction_json(rr, &p);
            if (m) json_object_set_new(row, "choice", choice_json(m, rr, &p, &srch));
            json_array_append_new(rows, row);
        } else if (p.fits) {
            printf("%-12.1f %-18.3f %-12s %-14.3f %-14.3f", budget / MIB, p.step_ns / 1e6, bound_names[p.bound], in,
                   out);
            if (m) printf(" %-10d %d", srch.mech.cpu_layers, srch.mech.recompute);
            putchar('\n');
        } else printf("%-12.1f %-18s\n", budget / MIB, "does not fit");
        if (m) {
            record_free(&mr);
            search_free(&srch);
        }
        if (dat && p.fits) fprintf(dat, "%.3f %.6f\n", budget / MIB / 1024.0, p.step_ns / 1e6);
        free(p.layer_mech);
        if (step == 0) break;
    }
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:o}", "label", "predicted", "profile", profile, "sweep", rows);
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
    } else json_decref(rows);
    if (plot == NULL) return 0;
    if (dat == NULL || fclose(dat) != 0) {
        fprintf(stderr, "uvmrt-plan: --plot %s: cannot write the chart's data in /tmp: %s: no chart written\n", plot,
                strerror(errno));
        if (dat != NULL) unlink(datpath);
        return 1;
    }
    int rc = plot_write(plot, profile, datpath);
    unlink(datpath);
    return rc != 0 ? 1 : 0;
}

/* ------------------------------------------------------------------ the model's inputs */
/* What the tool chose for a model on its own (no --budget: the profile's memory), for
 * the output; "" when the user gave it all. */
static char budget_note[256];

/* A model's lines (o NULL: text) or keys (JSON): how it was read, its parameters, and
 * where the budget came from. */
static void model_facts(const model_t *m, uint64_t batch, int batch_given, json_t *o)
{
    const char *note = model_note(m);
    if (o != NULL) {
        json_object_set_new(o, "params", json_real(model_params(m)));
        if (note[0]) json_object_set_new(o, "source", json_string(note));
        if (note[0] && batch) json_object_set_new(o, "batch_source", json_string(batch_given ? "--batch" : "the default"));
        if (budget_note[0]) json_object_set_new(o, "budget_source", json_string(budget_note));
        return;
    }
    if (note[0] && batch)
        printf("%s, batch %llu (%s)\n", note, (unsigned long long)batch, batch_given ? "--batch" : "the default");
    else if (note[0]) printf("%s\n", note);
    printf("parameters: %.0f (%.3g)\n", model_params(m), model_params(m));
    if (budget_note[0]) printf("budget: %s\n", budget_note);
}

/* For a built-in profile that estimates (not measured) and leaves out the host's
 * figures: what the prediction does not know, and how to measure it; NULL otherwise. */
static const char *profile_estimate_note(const char *profile)
{
    static char note[512];
    const uvmrt_profile_t *p = uvmrt_profile_find(profile);
    if (p == NULL || p->measured || (p->host_mem_bps > 0 && p->cpu_adamw_params_per_s > 0)) return NULL;
    snprintf(note, sizeof note,
             "profile %s is an estimate: it has no measured CPU AdamW rate or host memory bandwidth, so the CPU "
             "optimizer and host memory take no time in this prediction; run uvmrt-calibrate on the machine "
             "(uvmrt-calibrate --output FILE) and pass its file with --profile FILE", profile);
    return note;
}

/* The warning of profile_estimate_note: on stderr (o NULL), or in o's "warnings". */
static void profile_warn(const char *profile, json_t *o)
{
    const char *note = profile_estimate_note(profile);
    if (note == NULL) return;
    if (o == NULL) fprintf(stderr, "uvmrt-plan: warning: %s\n", note);
    else json_object_set_new(o, "warnings", json_pack("[s]", note));
}

/* Resolves the host budget (g_host_budget, host_note) from --host-budget (arg, may be
 * NULL), else UVMRT_HOST_BUDGET, else this machine's memory less the reserve. -1 after
 * a message on a bad value. */
static int host_budget_resolve(const char *arg)
{
    const char *from = "--host-budget", *v = arg;
    if (v == NULL && (v = getenv("UVMRT_HOST_BUDGET")) != NULL) from = "UVMRT_HOST_BUDGET";
    if (v != NULL && strcmp(v, "none") == 0) {
        g_host_budget = 0;
        snprintf(host_note, sizeof host_note, "none (%s none)", from);
        return 0;
    }
    if (v != NULL && strcmp(v, "auto") != 0) {
        uint64_t b = 0;
        if (uvmrt_size_parse(v, &b) != UVMRT_OK || b < (1u << 20)) {
            fprintf(stderr, "uvmrt-plan: %s '%s': expected auto, none or a size of at least 1M such as 48G\n", from, v);
            return -1;
        }
        g_host_budget = b;
        snprintf(host_note, sizeof host_note, "%.2f GiB (%s)", b / GIB_D, from);
        return 0;
    }
    uint64_t total = 0, b = 0;
    if (uvmrt_host_memory(&total, &b) != UVMRT_OK) {
        g_host_budget = 0;
        snprintf(host_note, sizeof host_note, "none (this machine's memory could not be read: give --host-budget)");
        return 0;
    }
    g_host_budget = b;
    snprintf(host_note, sizeof host_note, "%.2f GiB, this machine's memory (%.2f GiB) less 10%%, at least 2 GiB", b / GIB_D,
             total / GIB_D);
    return 0;
}

/* --profile list: the built-in profiles, their memory and whether they were measured. */
static int profile_list(void)
{
    const uvmrt_profile_t *p;
    printf("%-16s %-12s %-10s %s\n", "profile", "memory_GiB", "measured", "description");
    for (size_t i = 0; (p = uvmrt_profile_builtin(i)) != NULL; i++)
        printf("%-16s %-12.1f %-10s %s\n", p->name, p->memory_bytes / (MIB * 1024), p->measured ? "yes" : "no",
               p->description ? p->description : "");
    printf("(or a profile file from uvmrt-calibrate(1), uvmrt-profile(5))\n");
    return 0;
}

/* The GPU memory of profile (a built-in name or a profile file), for a model without
 * --budget; 0 after a message. */
static uint64_t profile_memory(const char *profile)
{
    const uvmrt_profile_t *p = uvmrt_profile_find(profile);
    if (p != NULL) return p->memory_bytes;
    uvmrt_profile_t *f = NULL;
    if (uvmrt_profile_load(profile, &f) == UVMRT_OK && f != NULL) {
        uint64_t b = f->memory_bytes;
        uvmrt_profile_free(f);
        if (b > 0) return b;
    }
    fprintf(stderr, "uvmrt-plan: --profile '%s': expected a built-in profile (uvmrt-plan --profile list) or a "
                    "profile file (uvmrt-profile(5)) with its memory_bytes, to take the budget from; or give --budget\n",
            profile);
    return 0;
}

/* The reserve a run's budget auto keeps free (the budget is the free device memory less
 * it): UVMRT_BUDGET_RESERVE when set and valid, else the library's default. A model
 * without --budget is planned at the profile's memory less it, the budget a run on
 * that card gets (on sim exactly; on cuda the driver's own memory comes off too), so
 * that the plan's host need is the run's. */
static uint64_t auto_reserve(void)
{
    uvmrt_params_t prm;
    uvmrt_params_init(&prm);
    uint64_t r = prm.budget_reserve_bytes;
    const char *v = getenv("UVMRT_BUDGET_RESERVE");
    if (v != NULL && *v != '\0' && uvmrt_size_parse(v, &r) != UVMRT_OK) r = prm.budget_reserve_bytes;
    return r;
}

/* ------------------------------------------------------------------ the mechanisms */
/* m at batch and budget with the mechanisms the search chooses (s non-NULL: s->quick
 * set by the caller; uvmrt_choose runs on the context the prediction then replays on,
 * so that its plan budget holds) or the file's (s NULL): the step built into *r and
 * predicted into *p. 0; 1 when a tensor of the step is over the library's limit
 * (said unless quiet; p->fits 0, nothing held); -1 after a message (nothing held). */
static int predict_model(const model_t *m, uint64_t batch, const char *profile, uint64_t budget, const char *trace,
                         search_t *s, int quiet, record_t *r, prediction_t *p)
{
    memset(p, 0, sizeof *p);
    memset(r, 0, sizeof *r);
    p->budget = budget;
    if (s == NULL) {
        int rc = model_build(m, batch, NULL, quiet, r);
        if (rc != 0) return rc == -2 ? 1 : -1;
        if (predict(r, profile, budget, trace, p) == 0) return 0;
        record_free(r);
        return -1;
    }
    uvmrt_context_t *ctx = sim_context(profile, budget, 1, 1);
    if (ctx == NULL) return -1;
    s->m = m;
    s->batch = batch;
    uvmrt_status_t st = plan_search(ctx, s);
    if (st != UVMRT_OK) {
        fprintf(stderr,
                "uvmrt-plan: %s: the search of the mechanisms (uvmrt_choose) failed at batch %llu, budget "
                "%.1f MiB: %s: %s\n",
                model_name(m), (unsigned long long)batch, budget / MIB, uvmrt_status_str(st), last_error);
        uvmrt_context_destroy(ctx);
        return -1;
    }
    int rc = model_build(m, batch, &s->mech, quiet, r);
    if (rc != 0) {
        uvmrt_context_destroy(ctx);
        search_free(s);
        return rc == -2 ? 1 : -1;
    }
    if (predict_on(ctx, r, budget, trace, p) == 0) return 0;
    record_free(r);
    search_free(s);
    return -1;
}

/* What a model that fits no way needs, where (search mode). */
typedef struct need {
    uint64_t gpu_min;   /* the least GPU budget a plan needs, host budget aside (the lightest mechanisms) */
    uint64_t at_budget; /* the GPU budget host_min is for: the budget, or gpu_min when more */
    uint64_t host_min;  /* the least host memory a plan needs there (0: none fits) */
    mech_t host_mech;   /* the mechanisms of host_min */
    uint64_t ws;        /* the lightest mechanisms' largest working set, and its call */
    char ws_layer[128];
    const char *ws_phase;
} need_t;

/* The least of the smallest budgets that fit (fit_budget) of records a and b; 0 when
 * neither fits at any budget; -1 after a message. */
static int fit_least(const record_t *a, const record_t *b, const char *profile, uint64_t *out)
{
    uint64_t x = 0, y = 0;
    int fa = fit_budget(a, profile, &x), fb = fa < 0 ? -1 : fit_budget(b, profile, &y);
    if (fa < 0 || fb < 0) return -1;
    *out = fa == 0 && (fb != 0 || x <= y) ? x : fb == 0 ? y : 0;
    return 0;
}

/* The two ends of the search that need the least memory: every layer recomputing,
 * with every AdamW on the CPU (the least GPU memory) and on the GPU (the least host
 * memory, often). 0, or -1 after a message. */
static int lightest_records(const model_t *m, uint64_t batch, record_t *cpu, record_t *gpu)
{
    mech_t lc = search_lightest(m), lg = lc;
    lg.cpu_layers = 0;
    if (model_build(m, batch, &lc, 0, cpu) != 0) return -1;
    if (model_build(m, batch, &lg, 0, gpu) == 0) return 0;
    record_free(cpu);
    return -1;
}

/* The smallest GPU budget at which some mechanisms fit within the host budget: the
 * least of the two lightest ends' (0: none). 0, or -1 after a message. */
static int search_min_budget(const model_t *m, uint64_t batch, const char *profile, uint64_t *out)
{
    record_t rc, rg;
    if (lightest_records(m, batch, &rc, &rg) != 0) return -1;
    int st = fit_least(&rc, &rg, profile, out);
    record_free(&rc);
    record_free(&rg);
    return st;
}

/* What m at batch needs where, when no mechanisms fit budget: the least GPU budget
 * (host budget aside) and, at that budget or the given one, the least host memory of
 * the lightest ends. 0, or -1 after a message. */
static int need_of(const model_t *m, uint64_t batch, const char *profile, uint64_t budget, need_t *n)
{
    memset(n, 0, sizeof *n);
    record_t r[2];
    if (lightest_records(m, batch, &r[0], &r[1]) != 0) return -1;
    uint64_t saved = g_host_budget;
    g_host_budget = 0; /* what each needs, not whether it fits */
    int rc = fit_least(&r[0], &r[1], profile, &n->gpu_min);
    n->at_budget = n->gpu_min > budget ? n->gpu_min : budget;
    for (int i = 0; i < 2 && rc == 0; i++) {
        prediction_t p;
        g_host_budget = 0;
        if ((rc = predict(&r[i], profile, n->at_budget, NULL, &p)) != 0) break;
        free(p.layer_mech);
        uint64_t h = p.host_bytes_needed;
        /* The last plan's need (what the prediction reports) can be less than an earlier
         * plan of the same run needed, which the host budget refuses: with h as the
         * budget, the refusal says what was needed; again, until it fits (a few times). */
        for (int k = 0; k < 4 && p.fits && rc == 0; k++) {
            g_host_budget = h;
            if ((rc = predict(&r[i], profile, n->at_budget, NULL, &p)) != 0) break;
            free(p.layer_mech);
            if (p.fits || p.host_bytes_needed <= h) break;
            h = p.host_bytes_needed + (8u << 20); /* the refusal says GiB to 0.01: up to 5 MiB short */
        }
        if (rc == 0 && p.fits && (n->host_min == 0 || h < n->host_min)) {
            n->host_min = h;
            n->host_mech = i == 0 ? search_lightest(m) : (mech_t){1, 0, search_lightest(m).recompute};
        }
    }
    g_host_budget = saved;
    size_t call;
    n->ws = largest_working_set(&r[0], &call);
    snprintf(n->ws_layer, sizeof n->ws_layer, "%s", r[0].layers[r[0].calls[call].layer]);
    n->ws_phase = uvmrt_phase_name((uvmrt_phase_t)r[0].calls[call].phase);
    record_free(&r[0]);
    record_free(&r[1]);
    return rc;
}

/* How many layers of r have flag set, and the first and last of them. */
static size_t flagged(const record_t *r, const uint8_t *flag, const char **first, const char **last)
{
    size_t n = 0;
    *first = *last = "";
    for (size_t l = 0; flag != NULL && l < r->n_layers; l++)
        if (flag[l]) {
            if (n++ == 0) *first = r->layers[l];
            *last = r->layers[l];
        }
    return n;
}

/* "AdamW on the CPU for ... ; ... recompute (...)": a model's mechanisms as built into r. */
static void mech_text(const model_t *m, const record_t *r, char *buf, size_t cap)
{
    const char *f, *l, *rf, *rl;
    size_t nc = flagged(r, r->cpu_opt, &f, &l), nr = flagged(r, r->recomputes, &rf, &rl);
    size_t np = model_placeable_layers(m), nrc = model_recomputable_layers(m);
    int k = snprintf(buf, cap, "AdamW on the CPU for %zu of %zu layers", nc, np);
    if (nc > 0 && k > 0 && (size_t)k < cap)
        k += snprintf(buf + k, cap - (size_t)k, " (%s%s%s)", f, nc > 1 ? " to " : "", nc > 1 ? l : "");
    if (k > 0 && (size_t)k < cap) k += snprintf(buf + k, cap - (size_t)k, ", %zu of %zu layers recompute", nr, nrc);
    if (nr > 0 && k > 0 && (size_t)k < cap)
        snprintf(buf + k, cap - (size_t)k, " (%s%s%s)", rf, nr > 1 ? " to " : "", nr > 1 ? rl : "");
}

/* The "choice" key of a model's JSON: the mechanisms, searched (s) or the file's. */
static json_t *choice_json(const model_t *m, const record_t *r, const prediction_t *p, const search_t *s)
{
    const char *f, *l, *rf, *rl;
    size_t nc = flagged(r, r->cpu_opt, &f, &l), nr = flagged(r, r->recomputes, &rf, &rl);
    json_t *cpu = json_array(), *rec = json_array();
    for (size_t i = 0; i < r->n_layers; i++) {
        if (r->cpu_opt && r->cpu_opt[i]) json_array_append_new(cpu, json_string(r->layers[i]));
        if (r->recomputes && r->recomputes[i]) json_array_append_new(rec, json_string(r->layers[i]));
    }
    json_t *o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:o, s:o}", "searched", s != NULL, "cpu_layers", (json_int_t)nc,
                          "placeable_layers", (json_int_t)model_placeable_layers(m), "recompute_layers", (json_int_t)nr,
                          "recomputable_layers", (json_int_t)model_recomputable_layers(m), "cpu_layer_names", cpu,
                          "recompute_layer_names", rec);
    json_object_set_new(o, "host_homed_bytes", p->fits ? json_integer((json_int_t)p->host_homed_bytes) : json_null());
    if (s == NULL) return o;
    json_t *cands = json_array();
    for (size_t i = 0; i < s->n_cand; i++)
        json_array_append_new(cands,
                              json_pack("{s:i, s:i, s:o}", "cpu_layers", s->cand[i].cpu_layers, "recompute_layers",
                                        s->cand[i].recompute, "predicted_step_ns",
                                        s->cand_ns[i] > 0 ? json_integer((json_int_t)s->cand_ns[i]) : json_null()));
    json_object_set_new(o, "fits", json_boolean(s->fits));
    json_object_set_new(o, "plan_budget_bytes", s->fits ? json_integer((json_int_t)s->plan_budget) : json_null());
    json_object_set_new(o, "rehearsals", json_integer((json_int_t)s->rehearsals));
    json_object_set_new(o, "candidates", cands);
    return o;
}

/* The disk tier's line: what the plan puts there, or why nothing (no spill directory,
 * no measured disk, or the host budget needs none). */
static void disk_note(const prediction_t *p, json_t *o)
{
    if (p->disk_read_bps <= 0 && p->disk_write_bps <= 0 && g_spill_dir == NULL) return;
    double wear = p->fits && p->step_ns > 0 ? (double)p->disk_bytes * (86400e9 / (double)p->step_ns) / 1e12 : 0;
    if (o != NULL) {
        json_t *d = json_pack("{s:b, s:f, s:f}", "modelled", tier_available(p), "read_bps", p->disk_read_bps,
                              "write_bps", p->disk_write_bps);
        json_object_set_new(d, "spill_dir", g_spill_dir ? json_string(g_spill_dir) : json_null());
        json_object_set_new(d, "free_bytes", g_spill_dir ? json_integer((json_int_t)g_spill_free) : json_null());
        json_object_set_new(d, "bytes", json_integer((json_int_t)p->disk_bytes));
        json_object_set_new(d, "layers", json_integer((json_int_t)p->disk_layers));
        if (p->disk_layers > 0) {
            json_object_set_new(d, "first_layer", json_string(p->disk_first));
            json_object_set_new(d, "last_layer", json_string(p->disk_last));
            json_object_set_new(d, "host_bytes_without", json_integer((json_int_t)p->host_without_disk));
        }
        json_object_set_new(d, "state_layers", json_integer((json_int_t)p->disk_state_layers));
        json_object_set_new(d, "read_bytes_per_step", json_integer(p->fits ? (json_int_t)p->disk_read_bytes : 0));
        json_object_set_new(d, "write_bytes_per_step", json_integer(p->fits ? (json_int_t)p->disk_write_bytes : 0));
        json_object_set_new(d, "read_ns", json_integer((json_int_t)p->disk_read_ns));
        json_object_set_new(d, "write_ns", json_integer((json_int_t)p->disk_write_ns));
        json_object_set_new(d, "tb_written_per_day", json_real(wear));
        json_object_set_new(o, "disk", d);
        return;
    }
    char dir[600] = "";
    if (g_spill_dir != NULL)
        snprintf(dir, sizeof dir, "; spill directory %s, %.2f GiB free", g_spill_dir, g_spill_free / GIB_D);
    if (!tier_available(p)) {
        printf("disk: not planned (%s%s)\n",
               g_spill_dir == NULL ? "no --spill-dir"
                                   : "the profile has no disk figures: uvmrt-calibrate --spill-dir measures them",
               dir);
        return;
    }
    if (!p->fits || p->disk_layers == 0) {
        printf("disk: reads %.2f GB/s, writes %.2f GB/s%s; nothing planned on it\n", p->disk_read_bps / 1e9,
               p->disk_write_bps / 1e9, dir);
        return;
    }
    char state[96] = "";
    if (p->disk_state_layers > 0)
        snprintf(state, sizeof state, " and the master weights and gradients of %zu of them", p->disk_state_layers);
    printf("disk: the AdamW moments of %zu CPU layers (%s to %s)%s, %.2f GiB, on the tier "
           "(host %.2f GiB without it)%s\n",
           p->disk_layers, p->disk_first, p->disk_last, state, p->disk_bytes / GIB_D, p->host_without_disk / GIB_D,
           dir);
    printf("predicted disk traffic per step: %.2f GiB read (%.3f ms at %.2f GB/s, waited for), %.2f GiB written "
           "(%.3f ms at %.2f GB/s); drive wear at this rate: %.3g TB written per day\n",
           p->disk_read_bytes / GIB_D, p->disk_read_ns / 1e6, p->disk_read_bps / 1e9, p->disk_write_bytes / GIB_D,
           p->disk_write_ns / 1e6, p->disk_write_bps / 1e9, wear);
}

/* Resolves the spill directory (g_spill_dir, g_spill_free) from --spill-dir (arg, may be
 * NULL), else UVMRT_SPILL_DIR; "none": none. -1 after a message when it is not an
 * existing directory. */
static int spill_dir_resolve(const char *arg)
{
    const char *from = "--spill-dir", *v = arg;
    if (v == NULL && (v = getenv("UVMRT_SPILL_DIR")) != NULL) from = "UVMRT_SPILL_DIR";
    if (v == NULL || strcmp(v, "none") == 0) return 0;
    struct stat sb;
    struct statvfs fs;
    if (v[0] == '\0' || stat(v, &sb) != 0 || !S_ISDIR(sb.st_mode) || statvfs(v, &fs) != 0) {
        fprintf(stderr, "uvmrt-plan: %s '%s': expected none or an existing directory\n", from, v);
        return -1;
    }
    g_spill_dir = v;
    g_spill_free = (uint64_t)fs.f_bavail * fs.f_frsize;
    return 0;
}

/* The tokens a step of m at batch trains (0: the model does not say). */
static double tokens_of(const model_t *m, uint64_t batch) { return model_tokens_per_sample(m) * (double)batch; }

/* The sentence of what a model that fits no way needs where (nd), for the budget
 * and the smallest GPU budget that fits the host budget (0: none). */
static void need_text(const need_t *nd, uint64_t budget, uint64_t min_budget, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "does not fit any way (predicted)");
    if (nd->gpu_min > budget && k < cap)
        k += (size_t)snprintf(buf + k, cap - k,
                              ": a plan needs a GPU budget of at least %.1f MiB (budget %.1f MiB): "
                              "even with every AdamW on the CPU and every layer recomputing, layer '%s' %s needs %.1f "
                              "MiB resident at once",
                              nd->gpu_min / MIB, budget / MIB, nd->ws_layer, nd->ws_phase, nd->ws / MIB);
    if (g_host_budget > 0 && nd->host_min > g_host_budget && k < cap)
        k += (size_t)snprintf(buf + k, cap - k,
                              "%s at a GPU budget of %.1f MiB the plans that need the least memory "
                              "(every layer recomputing, AdamW on the %s) need %.2f GiB of host memory, over the host "
                              "budget of %.2f GiB: a host budget of %.2f GiB would fit",
                              nd->gpu_min > budget ? ";" : ":", nd->at_budget / MIB,
                              nd->host_mech.cpu_layers ? "CPU" : "GPU", nd->host_min / GIB_D, g_host_budget / GIB_D,
                              nd->host_min / GIB_D + 0.005);
    if (k >= cap) return;
    if (min_budget > 0) snprintf(buf + k, cap - k, "; the smallest GPU budget that fits is %.1f MiB", min_budget / MIB);
    else if (g_host_budget > 0)
        snprintf(buf + k, cap - k, "; no GPU budget fits the host budget of %.2f GiB", g_host_budget / GIB_D);
}

/* ------------------------------------------------------------------ one budget */
/* Prints the prediction p of r (read from src: a record, or a model m at batch, its
 * mechanisms searched (s) or the file's); nd: what a model that fits no way needs. */
static void report_out(const record_t *r, const char *src, const model_t *m, uint64_t batch, int batch_given,
                       const char *profile, const prediction_t *p, uint64_t min_budget, const search_t *s,
                       const need_t *nd, int json)
{
    uint64_t budget = p->budget;
    if (p->fits && p->device_bytes > 0 && budget > p->device_bytes)
        fprintf(stderr,
                "uvmrt-plan: warning: budget %.1f MiB is more than the device memory of profile %s (%.1f MiB)\n",
                budget / MIB, profile, p->device_bytes / MIB);
    size_t wcall;
    uint64_t ws = largest_working_set(r, &wcall);
    const char *wlayer = r->layers[r->calls[wcall].layer];
    const char *wphase = uvmrt_phase_name((uvmrt_phase_t)r->calls[wcall].phase);
    double sps = p->fits && p->step_ns > 0 ? (double)batch * 1e9 / (double)p->step_ns : 0;
    double tps = m != NULL ? tokens_of(m, batch) * (sps / (double)batch) : 0;
    char why[768] = "";
    if (nd != NULL) need_text(nd, budget, min_budget, why, sizeof why);
    else if (!p->fits && p->host_limited)
        snprintf(why, sizeof why,
                 "does not fit: needs %.2f GiB host, budget %.2f GiB; the smallest GPU budget "
                 "that fits is %.1f MiB",
                 p->host_bytes_needed / GIB_D, g_host_budget / GIB_D, min_budget / MIB);
    else if (!p->fits)
        snprintf(why, sizeof why,
                 "layer '%s' %s needs %.1f MiB resident at once; the smallest budget that fits is %.1f MiB", wlayer,
                 wphase, ws / MIB, min_budget / MIB);
    if (json) {
        json_t *o = prediction_json(r, p);
        json_object_set_new(o, "min_budget_bytes", json_integer((json_int_t)min_budget));
        json_object_set_new(o, "profile", json_string(profile));
        if (m != NULL) {
            model_facts(m, batch, batch_given, o);
            json_object_set_new(o, "model", json_string(model_name(m)));
            json_object_set_new(o, "batch", json_integer((json_int_t)batch));
            json_object_set_new(o, "predicted_samples_per_s", p->fits ? json_real(sps) : json_null());
            json_object_set_new(o, "predicted_tokens_per_s", p->fits && tps > 0 ? json_real(tps) : json_null());
            json_object_set_new(o, "choice", choice_json(m, r, p, s));
        }
        if (p->fits) json_object_set_new(o, "device_memory_bytes", json_integer((json_int_t)p->device_bytes));
        profile_warn(profile, o);
        disk_note(p, o);
        json_object_set_new(o, "largest_working_set", json_pack("{s:I, s:s, s:s}", "bytes", (json_int_t)ws, "layer",
                                                                 wlayer, "phase", wphase));
        if (nd != NULL)
            json_object_set_new(o, "needed",
                                json_pack("{s:I, s:I, s:o, s:b, s:b}", "gpu_budget_bytes", (json_int_t)nd->gpu_min,
                                          "at_budget_bytes", (json_int_t)nd->at_budget, "host_bytes",
                                          nd->host_min ? json_integer((json_int_t)nd->host_min) : json_null(),
                                          "gpu_limited", nd->gpu_min > budget, "host_limited",
                                          g_host_budget > 0 && nd->host_min > g_host_budget));
        if (!p->fits) json_object_set_new(o, "why", json_string(why));
        if (g_tier_why[0]) json_object_set_new(o, "disk_why", json_string(g_tier_why));
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
        return;
    }
    profile_warn(profile, NULL);
    if (m != NULL) printf("model %s (%s), batch %llu\n", model_name(m), src, (unsigned long long)batch);
    if (m != NULL) model_facts(m, batch, batch_given, NULL);
    char chose[768] = "";
    if (m != NULL) {
        char mt[512];
        mech_text(m, r, mt, sizeof mt);
        if (s != NULL && s->fits)
            snprintf(chose, sizeof chose,
                     "chose (uvmrt_choose, %zu combinations, %zu rehearsals on the sim model): %s; "
                     "plan budget %.1f MiB",
                     s->n_cand, s->rehearsals, mt, s->plan_budget / MIB);
        else if (s != NULL)
            snprintf(chose, sizeof chose,
                     "searched (uvmrt_choose, %zu combinations, %zu rehearsals on the sim model): "
                     "none fits; shown: %s",
                     s->n_cand, s->rehearsals, mt);
        else snprintf(chose, sizeof chose, "mechanisms as the model file says (--no-search): %s", mt);
    }
    print_text(r, p, profile, min_budget, nd != NULL, m != NULL ? chose : NULL);
    if (m != NULL && p->fits) {
        printf("predicted throughput: %.2f samples/s", sps);
        if (tps > 0) printf(", %.0f tokens/s", tps);
        putchar('\n');
        if (p->host_homed_bytes > 0) printf("host-homed by the plan: %.2f GiB\n", p->host_homed_bytes / GIB_D);
    }
    disk_note(p, NULL);
    if (g_tier_why[0]) printf("%s\n", g_tier_why);
    printf("largest working set: %.1f MiB, layer '%s' %s\n", ws / MIB, wlayer, wphase);
    if (nd != NULL) printf("%s\n", why);
    else if (!p->fits && !p->host_limited)
        printf("does not fit because layer '%s' %s needs %.1f MiB resident at once (budget %.1f MiB); "
               "the predicted smallest budget that fits is %.1f MiB\n",
               wlayer, wphase, ws / MIB, budget / MIB, min_budget / MIB);
}

/* Predicts r (read from src: a record or a model's step at batch, its mechanisms as
 * written) at budget, or at the smallest that fits (fit), and prints it. Returns the
 * exit status. */
static int report_one(const record_t *r, const char *src, const model_t *m, uint64_t batch, int batch_given,
                      const char *profile, uint64_t budget, int fit, int json, const char *trace)
{
    uint64_t min_budget = 0;
    /* a record of a run with the disk tier, replayed with a spill directory: planned
     * without the host budget, then with its tensors on the tier as recorded, which the
     * host budget then checks (record_tier_apply) */
    int tiered = record_has_disk(r) && g_spill_dir != NULL;
    uint64_t saved = g_host_budget;
    if (tiered) g_host_budget = 0;
    int fr = fit_budget(r, profile, &min_budget);
    if (fr < 0) {
        g_host_budget = saved;
        return 1;
    }
    if (fr > 0) {
        g_host_budget = saved;
        fprintf(stderr, "uvmrt-plan: %s: the replay does not fit even with every tensor resident\n", src);
        return 1;
    }
    if (fit) budget = min_budget;
    if (budget == 0) {
        g_host_budget = saved;
        fprintf(stderr, "uvmrt-plan: %s has no budget_bytes: give --budget SIZE or --fit\n", src);
        return 2;
    }
    prediction_t p;
    int rc = predict(r, profile, budget, trace, &p); /* the trace is of this one, not of --fit's search */
    g_host_budget = saved;
    if (rc != 0) return 1;
    if (tiered && p.fits && tier_available(&p)) {
        int t = record_tier_apply(r, &p);
        if (t == -1) p.fits = 0, p.host_limited = 1;
        if (t == -2) {
            fprintf(stderr, "uvmrt-plan: %s: the recorded tier needs %.2f GiB in %s, which has %.2f GiB free\n", src,
                    p.disk_bytes / GIB_D, g_spill_dir, g_spill_free / GIB_D);
            free(p.layer_mech);
            return 1;
        }
    }
    report_out(r, src, m, batch, batch_given, profile, &p, min_budget, NULL, NULL, json);
    free(p.layer_mech);
    return 0;
}

/* The host budget is what is short and the disk tier may be used: the search again
 * without the host budget, and its plan with the CPU layers' state on the tier
 * (tier_apply). When that fits, it replaces *s, *r, *p; when not, *p stays, and why
 * says what the plan needs on the GPU, in host memory and on the disk. 0, or -1 after
 * a message. */
static int tier_search(const model_t *m, uint64_t batch, const char *profile, uint64_t budget, const char *trace,
                       search_t *s, record_t *r, prediction_t *p, char *why, size_t cap)
{
    search_t s2 = {0};
    record_t r2;
    prediction_t p2;
    uint64_t saved = g_host_budget;
    g_host_budget = 0; /* the plan the GPU budget allows; the host's share goes to the disk */
    int rc = predict_model(m, batch, profile, budget, trace, &s2, 1, &r2, &p2);
    g_host_budget = saved;
    if (rc != 0) return -1;
    int t = p2.fits ? tier_apply(&r2, &p2) : -3;
    if (t == 0) {
        free(p->layer_mech);
        record_free(r);
        search_free(s);
        *s = s2, *r = r2, *p = p2;
        return 0;
    }
    if (t == -1)
        snprintf(why, cap,
                 "with the disk tier: does not fit: needs %.2f GiB on the GPU, %.2f GiB of host memory (budget %.2f "
                 "GiB) with the AdamW moments of all %zu CPU layers and the master weights and gradients of %zu, "
                 "%.2f GiB, on the disk",
                 p2.gpu_bytes / GIB_D, p2.host_bytes_needed / GIB_D, g_host_budget / GIB_D, p2.disk_layers,
                 p2.disk_state_layers, p2.disk_bytes / GIB_D);
    else if (t == -2)
        snprintf(why, cap,
                 "with the disk tier: does not fit: needs %.2f GiB on the GPU, %.2f GiB of host memory and %.2f GiB "
                 "on the disk, and %s has %.2f GiB free",
                 p2.gpu_bytes / GIB_D, p2.host_bytes_needed / GIB_D, p2.disk_bytes / GIB_D, g_spill_dir,
                 g_spill_free / GIB_D);
    else
        snprintf(why, cap, "with the disk tier: does not fit: the GPU budget is short even without a host budget");
    free(p2.layer_mech);
    record_free(&r2);
    search_free(&s2);
    return 0;
}

/* A model at batch with its mechanisms searched: at budget, or at the smallest budget
 * some mechanisms fit (fit); prints the best plan, or what a plan needs where when
 * none fits. Returns the exit status. */
static int report_search(const model_t *m, const char *src, uint64_t batch, int batch_given, const char *profile,
                         uint64_t budget, int fit, int json, const char *trace)
{
    uint64_t min_budget = 0;
    if (search_min_budget(m, batch, profile, &min_budget) != 0) return 1;
    if (fit && min_budget == 0) {
        fprintf(stderr,
                "uvmrt-plan: %s: no mechanisms fit the host budget (%s) at any GPU budget: give a larger "
                "--host-budget\n",
                src, host_note);
        return 1;
    }
    if (fit) budget = min_budget;
    search_t s = {0};
    record_t r;
    prediction_t p;
    int rc = predict_model(m, batch, profile, budget, trace, &s, 0, &r, &p);
    if (rc != 0) return 1;
    g_tier_why[0] = '\0';
    if (!p.fits && p.host_limited && tier_available(&p) && tier_search(m, batch, profile, budget, trace, &s, &r, &p,
                                                                       g_tier_why, sizeof g_tier_why) != 0) {
        free(p.layer_mech);
        record_free(&r);
        search_free(&s);
        return 1;
    }
    need_t nd;
    if (!p.fits && need_of(m, batch, profile, budget, &nd) != 0) rc = 1;
    else report_out(&r, src, m, batch, batch_given, profile, &p, min_budget, &s, p.fits ? NULL : &nd, json);
    free(p.layer_mech);
    record_free(&r);
    search_free(&s);
    return rc;
}

/* ------------------------------------------------------------------ batch finder */
/* m at batch b and budget: *p (fits 0, nothing else, when b cannot fit: a call's
 * working set over the budget, or a tensor over the library's limit, needs no replay),
 * with the mechanisms searched (search; *chose: what the search chose) or the file's;
 * searched, a host budget that is short puts CPU layers' state on the disk tier as a
 * single prediction does (tier_search), within the spill directory's free space. */
static int predict_batch(const model_t *m, uint64_t b, const char *profile, uint64_t budget, int search,
                         prediction_t *p, mech_t *chose)
{
    record_t r;
    memset(p, 0, sizeof *p);
    memset(chose, 0, sizeof *chose);
    p->budget = budget;
    mech_t light = search_lightest(m);
    int rc = model_build(m, b, search ? &light : NULL, 1, &r);
    if (rc == -2) return 0;
    if (rc != 0) return -1;
    size_t call;
    int over = largest_working_set(&r, &call) > budget; /* search: even the lightest mechanisms' */
    if (over || !search) {
        rc = over ? 0 : predict(&r, profile, budget, NULL, p);
        record_free(&r);
        return rc;
    }
    record_free(&r);
    search_t s = {.quick = 1};
    rc = predict_model(m, b, profile, budget, NULL, &s, 1, &r, p);
    if (rc != 0) return rc == 1 ? 0 : -1;
    char why[600];
    if (!p->fits && p->host_limited && tier_available(p) &&
        tier_search(m, b, profile, budget, NULL, &s, &r, p, why, sizeof why) != 0) {
        free(p->layer_mech);
        p->layer_mech = NULL;
        record_free(&r);
        search_free(&s);
        return -1;
    }
    *chose = s.mech;
    record_free(&r);
    search_free(&s);
    return 0;
}

typedef struct batch_row {
    uint64_t batch;
    int fits, bound;
    uint64_t step_ns;
    uint64_t host_bytes; /* fits: the plan's host need */
    uint64_t disk_bytes; /* fits: on the disk tier */
    mech_t chose;        /* the search's choice */
} batch_row_t;

/* The batches whose throughput is predicted: every one up to dense (64; 8 when each
 * is a search), then powers of two and their midpoints, then the largest that fits;
 * ascending. */
static size_t batch_candidates(uint64_t largest, uint64_t dense, uint64_t *out, size_t cap)
{
    size_t n = 0;
    for (uint64_t b = 1; b <= largest && b <= dense && n < cap; b++) out[n++] = b;
    for (uint64_t p = dense; p < largest && n + 2 < cap; p *= 2) {
        if (p + p / 2 < largest) out[n++] = p + p / 2;
        if (2 * p < largest) out[n++] = 2 * p;
    }
    if (largest > dense && n < cap) out[n++] = largest;
    return n;
}

/* --batch-max: the largest batch in 1..nmax that fits at budget (a binary search:
 * a larger batch only adds bytes to every call's working set), and the batch with the
 * best predicted samples per second among the candidates. */
static int batch_finder(const model_t *m, const char *src, const char *profile, uint64_t budget, uint64_t nmax,
                        int search, int json)
{
    prediction_t p;
    mech_t chose;
    uint64_t lo = 0, hi = nmax + 1; /* lo fits (0: none known), hi does not */
    if (predict_batch(m, nmax, profile, budget, search, &p, &chose) != 0) return 1;
    free(p.layer_mech);
    if (p.fits) lo = nmax;
    else hi = nmax;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (predict_batch(m, mid, profile, budget, search, &p, &chose) != 0) return 1;
        free(p.layer_mech);
        if (p.fits) lo = mid;
        else hi = mid;
    }
    uint64_t largest = lo, cand[200];
    size_t nc = batch_candidates(largest, search ? 8 : 64, cand, sizeof cand / sizeof cand[0]);
    batch_row_t rows[201];
    size_t nr = 0, best = 0;
    double best_sps = 0;
    for (size_t i = 0; i < nc; i++) {
        if (predict_batch(m, cand[i], profile, budget, search, &p, &chose) != 0) return 1;
        free(p.layer_mech);
        rows[nr] = (batch_row_t){cand[i], p.fits, p.bound, p.step_ns, p.host_bytes_needed, p.disk_bytes, chose};
        double sps = p.fits && p.step_ns > 0 ? (double)cand[i] * 1e9 / (double)p.step_ns : 0;
        if (sps > best_sps) best_sps = sps, best = cand[i];
        nr++;
    }
    if (largest < nmax) rows[nr++] = (batch_row_t){largest + 1, 0, 0, 0, 0, 0, {0, 0, 0}}; /* where it stops fitting */
    uint64_t min1 = 0;
    if (largest == 0 && search && search_min_budget(m, 1, profile, &min1) != 0) return 1;
    if (largest == 0 && !search) { /* what batch 1 would need */
        record_t r;
        if (model_build(m, 1, NULL, 0, &r) != 0) return 1;
        int fr = fit_budget(&r, profile, &min1);
        record_free(&r);
        if (fr < 0) return 1;
    }
    if (json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < nr; i++) {
            const batch_row_t *b = &rows[i];
            json_t *row = json_pack(
                "{s:I, s:b, s:o, s:o, s:o, s:o}", "batch", (json_int_t)b->batch, "fits", b->fits, "predicted_step_ns",
                b->fits ? json_integer((json_int_t)b->step_ns) : json_null(), "predicted_samples_per_s",
                b->fits && b->step_ns ? json_real((double)b->batch * 1e9 / (double)b->step_ns) : json_null(), "bound",
                b->fits ? json_string(bound_names[b->bound]) : json_null(), "host_bytes_needed",
                b->fits ? json_integer((json_int_t)b->host_bytes) : json_null());
            json_object_set_new(row, "disk_bytes_needed", b->fits ? json_integer((json_int_t)b->disk_bytes) : json_null());
            if (search)
                json_object_set_new(row, "choice",
                                    b->fits ? json_pack("{s:i, s:i}", "cpu_layers", b->chose.cpu_layers,
                                                        "recompute_layers", b->chose.recompute)
                                            : json_null());
            json_array_append_new(arr, row);
        }
        json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "label", "predicted", "model", model_name(m),
                              "profile", profile, "budget_bytes", (json_int_t)budget, "batch_max", (json_int_t)nmax,
                              "largest_fitting_batch", (json_int_t)largest, "best_batch", (json_int_t)best, "batches",
                              arr);
        if (largest == 0) json_object_set_new(o, "batch1_min_budget_bytes", json_integer((json_int_t)min1));
        json_object_set_new(o, "host_budget_bytes", g_host_budget ? json_integer((json_int_t)g_host_budget) : json_null());
        json_object_set_new(o, "host_budget_source", json_string(host_note));
        json_object_set_new(o, "spill_dir", g_spill_dir ? json_string(g_spill_dir) : json_null());
        json_object_set_new(o, "spill_free_bytes", g_spill_dir ? json_integer((json_int_t)g_spill_free) : json_null());
        json_object_set_new(o, "searched", json_boolean(search));
        profile_warn(profile, o);
        model_facts(m, 0, 0, o);
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        putchar('\n');
        json_decref(o);
        return 0;
    }
    printf("uvmrt-plan: model %s (%s) at budget %.1f MiB, batches 1 to %llu: predicted by the sim model (profile %s); "
           "nothing here is measured\n",
           model_name(m), src, budget / MIB, (unsigned long long)nmax, profile);
    model_facts(m, 0, 0, NULL);
    printf("host budget: %s\n", host_note);
    if (g_spill_dir != NULL)
        printf("disk tier: %s, %.2f GiB free (the disk's budget; used only where the host budget is short)\n",
               g_spill_dir, g_spill_free / GIB_D);
    profile_warn(profile, NULL);
    if (search)
        printf("mechanisms: searched for each batch (uvmrt_choose): cpu_layers of %zu, recompute of %zu layers\n",
               model_placeable_layers(m), model_recomputable_layers(m));
    else printf("mechanisms: as the model file says (--no-search)\n");
    printf("%-10s %-6s %-18s %-22s %-12s %-9s %-9s%s\n", "batch", "fits", "predicted_ms/step", "predicted_samples/s",
           "bound", "host_GiB", "disk_GiB", search ? " cpu_layers recompute" : "");
    for (size_t i = 0; i < nr; i++) {
        const batch_row_t *b = &rows[i];
        if (b->fits) {
            printf("%-10llu %-6s %-18.3f %-22.2f %-12s %-9.2f %-9.2f", (unsigned long long)b->batch, "yes",
                   b->step_ns / 1e6, b->step_ns ? (double)b->batch * 1e9 / (double)b->step_ns : 0.0,
                   bound_names[b->bound], b->host_bytes / GIB_D, b->disk_bytes / GIB_D);
            if (search) printf(" %-10d %d", b->chose.cpu_layers, b->chose.recompute);
            putchar('\n');
        } else printf("%-10llu %-6s\n", (unsigned long long)b->batch, "no");
    }
    if (largest == 0)
        printf("no batch fits (predicted): batch 1 needs a budget of %.1f MiB (predicted smallest)\n", min1 / MIB);
    else {
        printf("largest batch that fits (predicted): %llu\nbest predicted throughput: batch %llu, %.2f samples/s",
               (unsigned long long)largest, (unsigned long long)best, best_sps);
        if (model_tokens_per_sample(m) > 0) printf(", %.0f tokens/s", best_sps * model_tokens_per_sample(m));
        putchar('\n');
    }
    return 0;
}

/* ------------------------------------------------------------------ outputs */
/* 0 when path (NULL: none) can be written by the report rules (src/base/outfile.h), else
 * -1 after saying why. */
static int output_check(const char *flag, const char *path)
{
    char why[600];
    if (path == NULL || uvmrt__outfile_check(path, 0, why, sizeof why) == 0) return 0;
    fprintf(stderr, "uvmrt-plan: %s %s: cannot write it: %s (nothing was run)\n", flag, path, why);
    return -1;
}

/* ------------------------------------------------------------------ main */
static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: uvmrt-plan (--record FILE | --model FILE [--batch N] [--seq T] [--no-search])\n"
        "                  [--profile NAME|FILE] [--budget SIZE | --fit | --sweep A:B[:STEP]]\n"
        "                  [--host-budget SIZE|auto|none] [--spill-dir DIR|none] [--json]\n"
        "                  [--plot FILE.png] [--trace FILE]\n"
        "       uvmrt-plan --model FILE [--budget SIZE] --batch-max N [--no-search] [--profile NAME|FILE] [--json]\n"
        "       uvmrt-plan --profile list\n"
        "What if: re-plays a recorded step (written by a run with UVMRT_RECORD=FILE), or the\n"
        "training step of a model description, on the sim model with the planner the library\n"
        "uses, and predicts whether it fits, the step time, what bounds it, the bytes each way\n"
        "and each layer's mechanisms. For a model it first searches the mechanisms the trainers\n"
        "choose (how many top layers run AdamW on the CPU, how many layers recompute) with\n"
        "uvmrt_choose, and predicts the best plan. Every number is a prediction, not a measurement.\n"
        "\n"
        "  --record FILE       the recorded step (uvmrt-plan(1) documents the format)\n"
        "  --model FILE        a model description (uvmrt-plan(1), MODEL FILES), or a Hugging\n"
        "                      Face config.json of a GPT-2, Llama, Mistral or Qwen2 model\n"
        "  --batch N           with --model: samples per step (default: the file's batch; 1\n"
        "                      for a config.json)\n"
        "  --seq T             with a config.json: tokens per sample (default: the config's\n"
        "                      positions, at most 2048)\n"
        "  --batch-max N       with --model: the largest batch in 1..N that fits the budget\n"
        "                      and the one with the best predicted samples/s\n"
        "  --no-search         with --model: the mechanisms as the file says (each layer's\n"
        "                      optimizer and recompute keys), not searched\n"
        "  --profile NAME|FILE a built-in profile or a profile file (default: the record's;\n"
        "                      consumer-8g for a model); --profile list prints the built-in ones\n"
        "  --budget SIZE       device budget, e.g. 8G, 512M (default: the record's; for a model,\n"
        "                      the profile's GPU memory less the reserve a run's auto budget\n"
        "                      keeps, 512 MiB by default)\n"
        "  --host-budget SIZE|auto|none\n"
        "                      host memory the plan may need: a plan or batch needing more does\n"
        "                      not fit (default: UVMRT_HOST_BUDGET, else auto: this machine's\n"
        "                      memory, or its cgroup's limit, less 10%%, at least 2 GiB)\n"
        "  --spill-dir DIR|none the disk tier's directory (default: UVMRT_SPILL_DIR, else none):\n"
        "                      an existing directory; with a profile's disk rates, a model whose\n"
        "                      host budget is short puts CPU layers' AdamW moments there, then\n"
        "                      their master weights and gradients (its free space is the\n"
        "                      disk's budget)\n"
        "  --fit               predict at the smallest budget that fits (2 MiB steps)\n"
        "  --sweep A:B[:STEP]  a table over budgets A to B (STEP default (B-A)/8)\n"
        "  --plot FILE.png     with --sweep: a chart, when gnuplot is on PATH\n"
        "  --trace FILE        with --budget (or a record's own): the re-play's model timeline as\n"
        "                      trace-event JSON (chrome://tracing, Perfetto): its %d steps, the\n"
        "                      last the predicted one\n"
        "  --json              JSON output\n"
        "  -h, --help          this help\n"
        "  -V, --version       the version\n"
        "Exit status: 0 done (fits or not), 1 a bad record, model or profile, 2 a usage error.\n",
        REPLAY_STEPS);
}

static int parse_size(const char *flag, const char *v, uint64_t *out)
{
    if (uvmrt_size_parse(v, out) != UVMRT_OK) {
        fprintf(stderr, "uvmrt-plan: %s '%s': expected a size such as 8G or 512M\n", flag, v);
        return -1;
    }
    return 0;
}

static int parse_count(const char *flag, const char *v, uint64_t max, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || errno != 0 || x < 1 || x > max) {
        fprintf(stderr, "uvmrt-plan: %s '%s': expected a whole number from 1 to %llu\n", flag, v,
                (unsigned long long)max);
        return -1;
    }
    *out = x;
    return 0;
}

static int plan_main(int argc, char **argv);

/* A prediction on a full disk or a closed pipe is not a prediction made: exit 1. */
/* A record of a run with tensors on the disk tier: the replay plans them there with a
 * spill directory (record_tier_apply), else keeps them in host memory and times no
 * disk, which the user is told rather than left to compare a disk-bound run with a
 * prediction without it. */
static void record_disk_note(const record_t *r)
{
    size_t n = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < r->n_tensors; i++)
        if (r->tensors[i].disk) n++, bytes += r->tensors[i].footprint;
    if (n > 0 && g_spill_dir != NULL)
        fprintf(stderr, "uvmrt-plan: note: %zu tensors (%.2f GiB) were on the disk tier in the recorded run: planned "
                        "there as recorded\n",
                n, bytes / 1073741824.0);
    else if (n > 0)
        fprintf(stderr,
                "uvmrt-plan: note: %zu tensors (%.2f GiB) were on the disk tier in the recorded run; without "
                "--spill-dir the replay keeps them in host memory and times no disk\n",
                n, bytes / 1073741824.0);
}

int main(int argc, char **argv)
{
    int rc = plan_main(argc, argv);
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    fprintf(stderr, "uvmrt-plan: cannot write to standard output: %s\n", errno ? strerror(errno) : "write error");
    return rc == 0 ? 1 : rc;
}

static int plan_main(int argc, char **argv)
{
    const char *record_path = NULL, *model_path = NULL, *profile = NULL, *plot = NULL, *sweep_arg = NULL,
               *trace_path = NULL;
    uint64_t budget = 0, batch = 0, batch_max = 0, seq = 0;
    const char *host_arg = NULL, *spill_arg = NULL;
    int fit = 0, json = 0, have_budget = 0, batch_given = 0, search = 1;
    static const struct option longopts[] = {{"record", required_argument, NULL, 'r'},
                                             {"model", required_argument, NULL, 'm'},
                                             {"batch", required_argument, NULL, 'B'},
                                             {"batch-max", required_argument, NULL, 'M'},
                                             {"profile", required_argument, NULL, 'p'},
                                             {"budget", required_argument, NULL, 'b'},
                                             {"fit", no_argument, NULL, 'f'},
                                             {"sweep", required_argument, NULL, 's'},
                                             {"plot", required_argument, NULL, 'P'},
                                             {"json", no_argument, NULL, 'j'},
                                             {"trace", required_argument, NULL, 't'},
                                             {"seq", required_argument, NULL, 'T'},
                                             {"host-budget", required_argument, NULL, 'H'},
                                             {"spill-dir", required_argument, NULL, 'S'},
                                             {"no-search", no_argument, NULL, 'N'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"version", no_argument, NULL, 'V'},
                                             {NULL, 0, NULL, 0}};
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'r': record_path = optarg; break;
        case 'm': model_path = optarg; break;
        case 'B':
            if (parse_count("--batch", optarg, 10000000, &batch) != 0) return 2;
            batch_given = 1;
            break;
        case 'T':
            if (parse_count("--seq", optarg, 1u << 20, &seq) != 0) return 2;
            break;
        case 'M':
            if (parse_count("--batch-max", optarg, 1000000, &batch_max) != 0) return 2;
            break;
        case 'p': profile = optarg; break;
        case 'H': host_arg = optarg; break;
        case 'S': spill_arg = optarg; break;
        case 'b':
            if (parse_size("--budget", optarg, &budget) != 0) return 2;
            if (budget == 0) {
                fprintf(stderr, "uvmrt-plan: --budget '%s': expected a size above 0\n", optarg);
                return 2;
            }
            have_budget = 1;
            break;
        case 'f': fit = 1; break;
        case 'N': search = 0; break;
        case 's': sweep_arg = optarg; break;
        case 'P': plot = optarg; break;
        case 't':
            if (optarg[0] == '\0') {
                fprintf(stderr, "uvmrt-plan: --trace '': expected a file path\n");
                return 2;
            }
            trace_path = optarg;
            break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("uvmrt-plan (uvmrt) %s\n", uvmrt_version_string()); return 0;
        case ':':
            fprintf(stderr, "uvmrt-plan: option '%s' needs a value (see uvmrt-plan --help)\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "uvmrt-plan: unknown option '%s' (see uvmrt-plan --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "uvmrt-plan: unexpected argument '%s' (see uvmrt-plan --help)\n", argv[optind]);
        return 2;
    }
    if (profile != NULL && strcmp(profile, "list") == 0) return profile_list();
    if (host_budget_resolve(host_arg) != 0 || spill_dir_resolve(spill_arg) != 0) return 2;
    if ((record_path == NULL) == (model_path == NULL)) {
        fprintf(stderr, "uvmrt-plan: give one of --record FILE (a run with UVMRT_RECORD=FILE writes one) and "
                        "--model FILE (a model description, uvmrt-plan(1))\n");
        return 2;
    }
    if (have_budget + fit + (sweep_arg != NULL) > 1) {
        fprintf(stderr, "uvmrt-plan: --budget, --fit and --sweep exclude each other\n");
        return 2;
    }
    if (trace_path != NULL && (fit || sweep_arg != NULL || batch_max)) {
        fprintf(stderr, "uvmrt-plan: --trace %s is for one prediction: it excludes --fit, --sweep and --batch-max\n",
                trace_path);
        return 2;
    }
    if (plot != NULL && sweep_arg == NULL) {
        fprintf(stderr, "uvmrt-plan: --plot %s needs --sweep\n", plot);
        return 2;
    }
    /* say now, not after the replay, that an output cannot be written */
    if (output_check("--trace", trace_path) != 0 || output_check("--plot", plot) != 0) return 1;
    if (plot != NULL && !gnuplot_found()) {
        fprintf(stderr, "uvmrt-plan: --plot %s: gnuplot is not on PATH: install it (Debian, Ubuntu: apt-get install "
                        "gnuplot-nox; Fedora: dnf install gnuplot), or leave --plot out\n", plot);
        return 1;
    }
    if ((batch || batch_max) && model_path == NULL) {
        fprintf(stderr, "uvmrt-plan: %s needs --model FILE (a record's batch is fixed)\n",
                batch ? "--batch" : "--batch-max");
        return 2;
    }
    if (batch_max && (fit || sweep_arg != NULL || batch)) {
        fprintf(stderr, "uvmrt-plan: --batch-max %llu excludes --batch, --fit and --sweep\n",
                (unsigned long long)batch_max);
        return 2;
    }
    if (seq && model_path == NULL) {
        fprintf(stderr, "uvmrt-plan: --seq needs --model FILE (a Hugging Face config.json)\n");
        return 2;
    }
    uint64_t sa = 0, sb = 0, sstep = 0;
    if (sweep_arg != NULL) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", sweep_arg);
        char *b = strchr(buf, ':'), *c = b ? strchr(b + 1, ':') : NULL;
        if (b == NULL || strlen(sweep_arg) >= sizeof buf) {
            fprintf(stderr, "uvmrt-plan: --sweep '%s': expected A:B[:STEP], e.g. 1G:8G:512M\n", sweep_arg);
            return 2;
        }
        *b++ = '\0';
        if (c) *c++ = '\0';
        if (parse_size("--sweep", buf, &sa) || parse_size("--sweep", b, &sb) || (c && parse_size("--sweep", c, &sstep)))
            return 2;
        if (sa == 0 || sb < sa || (c && sstep == 0)) {
            fprintf(stderr, "uvmrt-plan: --sweep '%s': expected 0 < A <= B and STEP > 0\n", sweep_arg);
            return 2;
        }
        if (!c) sstep = (sb - sa) / 8;
        if (sstep == 0) sstep = sb - sa ? sb - sa : 1;
        if ((sb - sa) / sstep > 10000) {
            fprintf(stderr, "uvmrt-plan: --sweep '%s': more than 10000 budgets; take a larger STEP\n", sweep_arg);
            return 2;
        }
    }
    record_t rec;
    model_t *model = NULL;
    const char *src = record_path;
    if (model_path != NULL) {
        src = model_path;
        if ((model = model_load(model_path, seq)) == NULL) return 1;
        if (profile == NULL) profile = "consumer-8g";
        if (batch == 0) batch = model_batch(model);
        if (!have_budget && !fit && sweep_arg == NULL) { /* the card's memory, as a run's auto budget */
            uint64_t mem = profile_memory(profile), reserve = auto_reserve();
            if (mem == 0) {
                model_free(model);
                return 1;
            }
            if (mem <= reserve) {
                fprintf(stderr, "uvmrt-plan: profile %s: its GPU memory (%.1f MiB) is not above the budget's reserve "
                                "(%.1f MiB, UVMRT_BUDGET_RESERVE): give --budget\n", profile, mem / MIB, reserve / MIB);
                model_free(model);
                return 1;
            }
            budget = mem - reserve;
            snprintf(budget_note, sizeof budget_note,
                     "%.1f MiB, the GPU memory of profile %s less the %.1f MiB a run's auto budget keeps free "
                     "(no --budget given)",
                     budget / MIB, profile, reserve / MIB);
        }
        if (batch_max) {
            int rc = batch_finder(model, model_path, profile, budget, batch_max, search, json);
            model_free(model);
            return rc;
        }
        if (search) { /* the mechanisms the trainers would choose */
            int rc = sweep_arg != NULL
                         ? sweep(NULL, model, batch, profile, sa, sb, sstep, json, plot)
                         : report_search(model, model_path, batch, batch_given, profile, budget, fit, json, trace_path);
            model_free(model);
            return rc;
        }
        if (model_build(model, batch, NULL, 0, &rec) != 0) {
            model_free(model);
            return 1;
        }
    } else {
        if (record_load(record_path, &rec) != 0) return 1;
        record_disk_note(&rec);
        if (profile == NULL) profile = rec.profile[0] ? rec.profile : "consumer-8g";
        if (!have_budget) budget = rec.budget;
    }
    int rc = sweep_arg != NULL
                 ? sweep(&rec, NULL, 0, profile, sa, sb, sstep, json, plot)
                 : report_one(&rec, src, model, batch, batch_given, profile, budget, fit, json, trace_path);
    record_free(&rec);
    model_free(model);
    return rc;
}
