/*
 * profile_file.c -- device profiles as JSON files: one table of keys drives both
 * the strict reader and the writer, so the two cannot drift apart.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "abi.h"
#include "backend_select.h"
#include "outfile.h"
#include "profile_file.h"

/* ------------------------------------------------------------------ the keys */
typedef enum key_kind {
    K_STRING,  /* const char * */
    K_FLAG,    /* int, 0 or 1 */
    K_FLAG1,   /* int, 0 or 1, written only when 1 (absent: 0) */
    K_BYTES,   /* uint64_t, an integer > 0 */
    K_NS,      /* uint64_t, an integer >= 0 */
    K_RATE     /* double, a number > 0 (bytes/s, FLOP/s, params/s) */
} key_kind_t;

typedef struct key {
    const char *name;
    key_kind_t kind;
    size_t offset;
    int required; /* optional K_RATE keys: absent reads 0 (not modelled) */
} pkey_t;

#define KEY(field, kind, required) {#field, kind, offsetof(uvmrt_profile_t, field), required}
static const pkey_t keys[] = {
    KEY(name, K_STRING, 1),
    KEY(description, K_STRING, 0),
    KEY(measured, K_FLAG, 0),
    KEY(memory_bytes, K_BYTES, 1),
    KEY(prefetch_h2d_bps, K_RATE, 1),
    KEY(evict_d2h_bps, K_RATE, 1),
    KEY(pinned_h2d_bps, K_RATE, 1),
    KEY(pinned_d2h_bps, K_RATE, 1),
    KEY(fault_bps, K_RATE, 1),
    KEY(fault_group_bytes, K_BYTES, 0),
    KEY(prefetch_call_ns, K_NS, 0),
    KEY(remote_read_bps, K_RATE, 1),
    KEY(remote_write_bps, K_RATE, 1),
    KEY(flops, K_RATE, 1),
    KEY(hbm_bps, K_RATE, 1),
    KEY(fault_trace_ns, K_NS, 0),
    KEY(pinned_bidir_bps, K_RATE, 0),
    KEY(host_mem_bps, K_RATE, 0),
    KEY(host_mem_shared_bps, K_RATE, 0),
    KEY(cpu_adamw_params_per_s, K_RATE, 0),
    KEY(gpu_bf16_flops, K_RATE, 0),
    KEY(host_mem_cpu_beside_h2d_bps, K_RATE, 0),
    KEY(host_mem_cpu_beside_d2h_bps, K_RATE, 0),
    KEY(disk_read_bps, K_RATE, 0),
    KEY(disk_write_bps, K_RATE, 0),
    KEY(disk_io_uring, K_FLAG1, 0),
};
#undef KEY
#define N_KEYS (sizeof keys / sizeof keys[0])

/* Keys that describe the measurement, not the device: accepted, not modelled. */
static const char *const meta_keys[] = {"format_version", "date", "gpu_name", "driver_version",
                                        "cuda_runtime_version", "tool", "raw"};
#define N_META (sizeof meta_keys / sizeof meta_keys[0])
#define FORMAT_VERSION 1

/* Unset optional keys take these (the driver's 2 MiB-block fault groups as on the H200). */
#define DEFAULT_FAULT_GROUP_BYTES (716u << 10)

int uvmrt__profile_is_path(const char *t)
{
    if (t == NULL) return 0;
    size_t n = strlen(t);
    return strchr(t, '/') != NULL || (n >= 5 && strcmp(t + n - 5, ".json") == 0);
}

/* ------------------------------------------------------------------ reading */
/* A value as text for messages (numbers as written, others by type). */
static void value_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, len, "%.17g", json_real_value(v));
    else if (json_is_string(v)) snprintf(buf, len, "\"%.200s\"", json_string_value(v));
    else if (json_is_true(v) || json_is_false(v)) snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_null(v)) snprintf(buf, len, "null");
    else snprintf(buf, len, "%s", json_is_object(v) ? "an object" : "an array");
}

static const char *expected_of(key_kind_t k)
{
    switch (k) {
    case K_STRING: return "a non-empty string";
    case K_FLAG:
    case K_FLAG1: return "0 or 1";
    case K_BYTES: return "an integer > 0 (bytes)";
    case K_NS: return "an integer >= 0 (nanoseconds)";
    case K_RATE: return "a number > 0 (per second)";
    }
    return "?";
}

/* One key's value into tmp (strings: pointers into the JSON for now). */
static int read_key(const pkey_t *k, const json_t *v, uvmrt_profile_t *p)
{
    char *field = (char *)p + k->offset;
    switch (k->kind) {
    case K_STRING:
        if (!json_is_string(v) || json_string_length(v) == 0 || strlen(json_string_value(v)) != json_string_length(v))
            return -1; /* embedded NUL: the C string would differ from the file's */
        *(const char **)field = json_string_value(v);
        return 0;
    case K_FLAG:
    case K_FLAG1:
        if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1)) return -1;
        *(int *)field = (int)json_integer_value(v);
        return 0;
    case K_BYTES:
    case K_NS:
        if (!json_is_integer(v) || json_integer_value(v) < (k->kind == K_BYTES ? 1 : 0)) return -1;
        *(uint64_t *)field = (uint64_t)json_integer_value(v);
        return 0;
    case K_RATE:
        if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > 1e30) return -1;
        *(double *)field = json_number_value(v);
        return 0;
    }
    return -1;
}

/* Metadata keys have a type too: a file with "date": 5 is not what we wrote. */
static int meta_ok(const char *name, const json_t *v)
{
    if (strcmp(name, "raw") == 0) return json_is_object(v);
    if (strcmp(name, "format_version") == 0) return json_is_integer(v) && json_integer_value(v) == FORMAT_VERSION;
    if (strstr(name, "_version") != NULL) return json_is_integer(v) && json_integer_value(v) >= 0;
    return json_is_string(v);
}

static const pkey_t *key_named(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, name) == 0) return &keys[i];
    return NULL;
}

static int is_meta(const char *name)
{
    for (size_t i = 0; i < N_META; i++)
        if (strcmp(meta_keys[i], name) == 0) return 1;
    return 0;
}

/* The profile with its strings copied into the same allocation. */
static uvmrt_profile_t *profile_own(const uvmrt_profile_t *p)
{
    size_t nn = strlen(p->name) + 1, nd = strlen(p->description) + 1;
    uvmrt_profile_t *o = malloc(sizeof *o + nn + nd);
    if (o == NULL) return NULL;
    *o = *p;
    o->struct_size = sizeof *o;
    char *s = (char *)(o + 1);
    memcpy(s, p->name, nn);
    memcpy(s + nn, p->description, nd);
    o->name = s;
    o->description = s + nn;
    return o;
}

uvmrt_status_t uvmrt__profile_file_load(const char *path, const uvmrt_log_t *log, uvmrt_profile_t **out)
{
    if (path == NULL || out == NULL) {
        LOG_ERROR(log, "profile file: path and out must not be NULL");
        return UVMRT_ERR_INVALID;
    }
    /* O_NONBLOCK, then fstat: a FIFO (or a device) under the path must not hang the
     * context's creation; only a regular file is read */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat fst;
    const char *why = NULL;
    if (fd < 0 || fstat(fd, &fst) != 0) why = strerror(errno);
    else if (S_ISDIR(fst.st_mode)) why = "a directory, not a regular file";
    else if (S_ISFIFO(fst.st_mode)) why = "a FIFO, not a regular file";
    else if (!S_ISREG(fst.st_mode)) why = "a device or a socket, not a regular file";
    else if (fcntl(fd, F_SETFL, O_RDONLY) != 0) why = strerror(errno); /* blocking reads again */
    if (why != NULL) {
        LOG_ERROR(log, "profile file '%s': cannot read it: %s (uvmrt-profile(5))", path, why);
        if (fd >= 0) close(fd);
        return UVMRT_ERR_IO;
    }
    json_error_t jerr;
    FILE *f = fdopen(fd, "rb"); /* buffered: json_loadfd reads a byte per read(2) */
    json_t *root = NULL;
    if (f == NULL) {
        LOG_ERROR(log, "profile file '%s': cannot read it: %s", path, strerror(errno));
        close(fd);
        return UVMRT_ERR_IO;
    }
    root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (root == NULL) {
        int io = json_error_code(&jerr) == json_error_cannot_open_file;
        if (io) LOG_ERROR(log, "profile file '%s': cannot read it: %s", path, jerr.text);
        else LOG_ERROR(log, "profile file '%s': line %d column %d: %s: expected a JSON object (uvmrt-profile(5))",
                       path, jerr.line, jerr.column, jerr.text);
        return io ? UVMRT_ERR_IO : UVMRT_ERR_CONFIG;
    }
    uvmrt_status_t st = UVMRT_OK;
    if (!json_is_object(root)) {
        LOG_ERROR(log, "profile file '%s': the top level is not a JSON object: expected {\"name\": ..., ...}", path);
        json_decref(root);
        return UVMRT_ERR_CONFIG;
    }
    uvmrt_profile_t p;
    memset(&p, 0, sizeof p);
    p.fault_group_bytes = DEFAULT_FAULT_GROUP_BYTES;
    char text[256];
    const char *name;
    json_t *v;
    json_object_foreach(root, name, v) {
        const pkey_t *k = key_named(name);
        if (k == NULL && is_meta(name)) {
            if (!meta_ok(name, v)) {
                value_text(v, text, sizeof text);
                LOG_ERROR(log, "profile file '%s': key '%s' = %s: expected %s", path, name, text,
                          strcmp(name, "raw") == 0              ? "an object"
                          : strcmp(name, "format_version") == 0 ? "1"
                          : strstr(name, "_version")            ? "an integer >= 0"
                                                                : "a string");
                st = UVMRT_ERR_CONFIG;
            }
            continue;
        }
        if (k == NULL) {
            LOG_WARN(log, "profile file '%s': unknown key '%s' ignored (uvmrt-profile(5) lists the keys)", path, name);
            continue;
        }
        if (read_key(k, v, &p) != 0) {
            value_text(v, text, sizeof text);
            LOG_ERROR(log, "profile file '%s': key '%s' = %s: expected %s", path, name, text, expected_of(k->kind));
            st = UVMRT_ERR_CONFIG;
        }
    }
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].required && json_object_get(root, keys[i].name) == NULL) {
            LOG_ERROR(log, "profile file '%s': required key '%s' is missing: expected %s", path, keys[i].name,
                      expected_of(keys[i].kind));
            st = UVMRT_ERR_CONFIG;
        }
    if (st == UVMRT_OK) {
        char desc[512];
        if (p.description == NULL) {
            snprintf(desc, sizeof desc, "profile file %s%s", path, p.measured ? "" : " (estimate)");
            p.description = desc;
        }
        if ((*out = profile_own(&p)) == NULL) {
            LOG_ERROR(log, "profile file '%s': out of memory for its copy", path);
            st = UVMRT_ERR_NOMEM;
        }
    }
    json_decref(root);
    return st;
}

/* ------------------------------------------------------------------ writing */
static json_t *key_value(const pkey_t *k, const uvmrt_profile_t *p)
{
    const char *field = (const char *)p + k->offset;
    switch (k->kind) {
    case K_STRING: {
        const char *s = *(const char *const *)field;
        return s && s[0] ? json_string(s) : NULL;
    }
    case K_FLAG: return json_integer(*(const int *)field);
    case K_FLAG1: return *(const int *)field ? json_integer(1) : NULL;
    case K_BYTES:
    case K_NS: return json_integer((json_int_t)*(const uint64_t *)field);
    case K_RATE: {
        double d = *(const double *)field;
        return d > 0 || k->required ? json_real(d) : NULL; /* 0: not measured */
    }
    }
    return NULL;
}

/* The JSON document, or NULL with the reason logged. */
static json_t *profile_json(const uvmrt_profile_t *p, const uvmrt_profile_meta_t *m, const char *path,
                            const uvmrt_log_t *log)
{
    json_t *o = json_object();
    if (o == NULL) {
        LOG_ERROR(log, "profile file '%s': out of memory for the JSON", path);
        return NULL;
    }
    int bad = json_object_set_new(o, "format_version", json_integer(FORMAT_VERSION));
    for (size_t i = 0; i < N_KEYS && !bad; i++) {
        json_t *v = key_value(&keys[i], p);
        if (v == NULL && keys[i].kind == K_STRING && keys[i].required) {
            LOG_ERROR(log, "profile file '%s': the profile's name is empty: expected a name", path);
            json_decref(o);
            return NULL;
        }
        if (v != NULL) bad |= json_object_set_new(o, keys[i].name, v);
    }
    if (m != NULL && !bad) {
        if (m->date) bad |= json_object_set_new(o, "date", json_string(m->date));
        if (m->gpu_name) bad |= json_object_set_new(o, "gpu_name", json_string(m->gpu_name));
        if (m->driver_version > 0) bad |= json_object_set_new(o, "driver_version", json_integer(m->driver_version));
        if (m->cuda_runtime_version > 0)
            bad |= json_object_set_new(o, "cuda_runtime_version", json_integer(m->cuda_runtime_version));
        if (m->tool) bad |= json_object_set_new(o, "tool", json_string(m->tool));
        if (m->raw_json) {
            json_error_t jerr;
            json_t *raw = json_loads(m->raw_json, 0, &jerr);
            if (raw == NULL || !json_is_object(raw)) {
                LOG_ERROR(log, "profile file '%s': meta.raw_json is not a JSON object (%s): expected {...}", path,
                          raw ? "another type" : jerr.text);
                json_decref(raw);
                json_decref(o);
                return NULL;
            }
            bad |= json_object_set_new(o, "raw", raw);
        }
    }
    if (bad) { /* json_string(NULL-free but invalid UTF-8) and out of memory end here */
        LOG_ERROR(log, "profile file '%s': cannot build the JSON (a string that is not UTF-8, or out of memory)", path);
        json_decref(o);
        return NULL;
    }
    return o;
}

uvmrt_status_t uvmrt__profile_file_save(const uvmrt_profile_t *p, const uvmrt_profile_meta_t *m, const char *path,
                                        const uvmrt_log_t *log)
{
    if (p == NULL || path == NULL || path[0] == '\0') {
        LOG_ERROR(log, "profile file: profile and a non-empty path are required");
        return UVMRT_ERR_INVALID;
    }
    /* The caller's structs up to their struct_size; the fields past it are 0 (left out). */
    uvmrt_profile_t pf = {0};
    uvmrt_profile_meta_t mf = {0};
    if (UVMRT__ABI_READ(log, "uvmrt_profile_save", uvmrt_profile_t, p, &pf) != UVMRT_OK) return UVMRT_ERR_INVALID;
    if (m != NULL && UVMRT__ABI_READ(log, "uvmrt_profile_save", uvmrt_profile_meta_t, m, &mf) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    p = &pf;
    if (m != NULL) m = &mf;
    json_t *o = profile_json(p, m, path, log);
    if (o == NULL) return UVMRT_ERR_INVALID;
    /* the report rules (src/outfile.h): a new or regular file (or a link's target)
     * replaced through a temporary file, a FIFO or a device written in place */
    uvmrt__outfile_t out;
    char why[512];
    uvmrt_status_t st = UVMRT_OK;
    if (uvmrt__outfile_open(&out, path, 0, why, sizeof why) != 0) {
        LOG_ERROR(log, "profile file '%s': cannot write it: %s", path, why);
        st = UVMRT_ERR_IO;
    } else if (json_dumpf(o, out.f, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0 || fputc('\n', out.f) == EOF) {
        /* 17 digits above: every double reads back as the same double */
        LOG_ERROR(log, "profile file '%s': cannot write it: %s", path, strerror(errno ? errno : EIO));
        uvmrt__outfile_abandon(&out);
        st = UVMRT_ERR_IO;
    } else if (uvmrt__outfile_close(&out, why, sizeof why) != 0) {
        LOG_ERROR(log, "profile file '%s': cannot write it: %s", path, why);
        st = UVMRT_ERR_IO;
    }
    json_decref(o);
    return st;
}

/* ------------------------------------------------------------------ the public calls */
/* Messages of the calls without a context go to stderr from the warn level. */
static const uvmrt_log_t stderr_log = {UVMRT_LOG_WARN, NULL, NULL};

uvmrt_status_t uvmrt_profile_load(const char *path, uvmrt_profile_t **out)
{
    return uvmrt__profile_file_load(path, &stderr_log, out);
}

void uvmrt_profile_free(uvmrt_profile_t *profile) { free(profile); }

uvmrt_status_t uvmrt_profile_save(const uvmrt_profile_t *profile, const uvmrt_profile_meta_t *meta, const char *path)
{
    return uvmrt__profile_file_save(profile, meta, path, &stderr_log);
}

/* ------------------------------------------------------------------ a context's profile */
uvmrt_status_t uvmrt__profile_resolve(const uvmrt_config_t *cfg, const uvmrt_log_t *log,
                                      const uvmrt_profile_t **use, uvmrt_profile_t **owned)
{
    *owned = NULL;
    if (uvmrt__profile_is_path(cfg->profile)) {
        uvmrt_status_t st = uvmrt__profile_file_load(cfg->profile, log, owned);
        if (st != UVMRT_OK) {
            LOG_ERROR(log, "UVMRT_PROFILE='%s': the profile file could not be loaded (see above)", cfg->profile);
            return st == UVMRT_ERR_NOMEM ? st : UVMRT_ERR_CONFIG;
        }
        *use = *owned;
        return UVMRT_OK;
    }
    if (strcmp(cfg->profile, "auto") != 0) {
        *use = uvmrt_profile_find(cfg->profile);
        return *use ? UVMRT_OK : UVMRT_ERR_CONFIG; /* settings.c accepts only known names */
    }
    if (cfg->backend != UVMRT_BACKEND_CUDA) {
        *use = uvmrt_profile_find("consumer-8g");
        return UVMRT_OK;
    }
    /* the GPU at hand: its own built-in profile, else the nearest estimate, said once */
    char name[256], why[256];
    uint64_t memory = 0;
    int matched = 0;
    if (uvmrt__gpu_identity(cfg->device, name, sizeof name, &memory, why, sizeof why) != 0) {
        *use = uvmrt_profile_find("h200");
        LOG_WARN(log, "UVMRT_PROFILE=auto: the GPU could not be identified (%s): the planner models it with "
                      "the profile h200; run uvmrt-calibrate and set UVMRT_PROFILE=FILE for a model of this machine",
                 why);
        return UVMRT_OK;
    }
    *use = uvmrt__profile_for_device(name, memory, &matched);
    if (matched)
        LOG_INFO(log, "UVMRT_PROFILE=auto: device %d is '%s': the planner models it with the profile %s (%s)",
                 cfg->device, name, (*use)->name, (*use)->description);
    else
        LOG_WARN(log, "UVMRT_PROFILE=auto: no built-in profile for device %d, '%s' (%.1f GiB): the planner models "
                      "it with the profile %s (%s); run uvmrt-calibrate and set UVMRT_PROFILE=FILE for a model of "
                      "this machine",
                 cfg->device, name, (double)memory / (1024.0 * 1024.0 * 1024.0), (*use)->name, (*use)->description);
    return UVMRT_OK;
}

/* Cards with a profile of their own: a part of the name cudaGetDeviceProperties gives,
 * and the least memory of the variant the profile describes. */
static const struct {
    const char *name_part, *profile;
    uint64_t min_memory;
} device_profiles[] = {
    {"NVIDIA H200", "h200", 0}, /* not GH200: its link to the CPU is another */
    {"RTX 4060 Ti", "rtx4060ti-16g", 12ull << 30}, /* the 8 GB card is a consumer-8g */
    {"RTX 4080", "rtx4080", 0},
    {"RTX 4090", "rtx4090", 0},
    {"RTX 3090", "rtx3090", 0},
};

const uvmrt_profile_t *uvmrt__profile_for_device(const char *device_name, uint64_t memory_bytes, int *matched)
{
    *matched = 0;
    for (size_t i = 0; device_name && i < sizeof device_profiles / sizeof device_profiles[0]; i++)
        if (strstr(device_name, device_profiles[i].name_part) != NULL && memory_bytes >= device_profiles[i].min_memory) {
            *matched = 1;
            return uvmrt_profile_find(device_profiles[i].profile);
        }
    /* cards report a little less than their nominal size: round to the nearest GiB */
    uint64_t gib = (memory_bytes + (512ull << 20)) >> 30;
    const char *by_size = gib > 28 ? "h200" : gib >= 24 ? "consumer-24g" : gib >= 16 ? "consumer-16g"
                                              : gib >= 12 ? "consumer-12g" : "consumer-8g";
    return uvmrt_profile_find(by_size);
}

const char *uvmrt__profile_label(const uvmrt_config_t *cfg, const uvmrt_profile_t *profile)
{
    return uvmrt__profile_is_path(cfg->profile) || profile == NULL ? cfg->profile : profile->name;
}
