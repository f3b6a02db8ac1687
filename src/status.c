/*
 * status.c -- version, status strings and the names of the public enums.
 * Strings come from the same X-macro list as the enum, so they cannot drift.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "uvmrt.h"

#define STR_(x) #x
#define STR(x) STR_(x)

const char *uvmrt_version_string(void)
{
    return STR(UVMRT_VERSION_MAJOR) "." STR(UVMRT_VERSION_MINOR) "." STR(UVMRT_VERSION_PATCH);
}

int uvmrt_version_number(void) { return UVMRT_VERSION_NUMBER; }

/* Every public struct (python/uvmrt/_lib.py checks its copies against them). */
#define UVMRT_ABI_STRUCTS(X)                                                                  \
    X(uvmrt_params_t) X(uvmrt_tensor_desc_t) X(uvmrt_use_t) X(uvmrt_layer_call_t)             \
    X(uvmrt_layer_stats_t) X(uvmrt_step_stats_t) X(uvmrt_summary_t) X(uvmrt_memory_stats_t)   \
    X(uvmrt_tensor_info_t) X(uvmrt_knob_t) X(uvmrt_choice_t) X(uvmrt_profile_t)               \
    X(uvmrt_profile_meta_t) X(uvmrt_adamw_t)

size_t uvmrt_abi_struct_size(const char *name)
{
    if (name == NULL) return 0;
#define X_SIZE(type) if (strcmp(name, #type) == 0) return sizeof(type);
    UVMRT_ABI_STRUCTS(X_SIZE)
#undef X_SIZE
    return 0;
}

const char *uvmrt_status_str(uvmrt_status_t status)
{
    switch (status) {
#define X_STR(name, value, text) case name: return text;
        UVMRT_STATUS_LIST(X_STR)
#undef X_STR
    }
    return "unknown status";
}

const char *uvmrt_status_name(uvmrt_status_t status)
{
    switch (status) {
#define X_NAME(name, value, text) case name: return #name;
        UVMRT_STATUS_LIST(X_NAME)
#undef X_NAME
    }
    return "UVMRT_UNKNOWN";
}

/* ------------------------------------------------------------------ enum names */
static const char *const policy_names[] = {"none", "demand", "prefetch"};
static const char *const backend_names[] = {"cuda", "sim", "auto"};
static const char *const role_names[] = {"weight", "gradient", "activation", "optimizer_state",
                                         "workspace"};
static const char *const phase_names[] = {"forward", "backward", "optimizer"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};

#define NAME_OF(table, v) \
    ((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[(unsigned)(v)] : "?")

const char *uvmrt_policy_name(uvmrt_policy_t p) { return NAME_OF(policy_names, p); }
const char *uvmrt_backend_name(uvmrt_backend_kind_t b) { return NAME_OF(backend_names, b); }
const char *uvmrt_role_name(uvmrt_role_t r) { return NAME_OF(role_names, r); }
const char *uvmrt_phase_name(uvmrt_phase_t p) { return NAME_OF(phase_names, p); }
const char *uvmrt_log_level_name(uvmrt_log_level_t l) { return NAME_OF(level_names, l); }

static int name_index(const char *const *names, size_t n, const char *text)
{
    if (text == NULL) return -1;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], text) == 0) return (int)i;
    return -1;
}

uvmrt_status_t uvmrt_policy_parse(const char *text, uvmrt_policy_t *out)
{
    int i = name_index(policy_names, 3, text);
    if (i < 0 || out == NULL) return UVMRT_ERR_INVALID;
    *out = (uvmrt_policy_t)i;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_backend_parse(const char *text, uvmrt_backend_kind_t *out)
{
    int i = name_index(backend_names, 3, text);
    if (i < 0 || out == NULL) return UVMRT_ERR_INVALID;
    *out = (uvmrt_backend_kind_t)i;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_size_parse(const char *text, uint64_t *out_bytes)
{
    if (text == NULL || out_bytes == NULL || !isdigit((unsigned char)text[0]))
        return UVMRT_ERR_INVALID;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0) return UVMRT_ERR_INVALID;
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift > 0 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)) end += strlen(end);
    else if (shift == 0 && strcmp(end, "B") == 0) end++;
    if (*end != '\0') return UVMRT_ERR_INVALID;
    if (shift > 0 && v > (UINT64_MAX >> shift)) return UVMRT_ERR_INVALID;
    *out_bytes = (uint64_t)v << shift;
    return UVMRT_OK;
}
