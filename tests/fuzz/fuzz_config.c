/*
 * fuzz_config.c -- libFuzzer harness over uvmrt's configuration: params
 * fields and UVMRT_* environment values -> uvmrt_context_create (sim) -> one
 * small step -> uvmrt_context_destroy. Any crash, sanitizer report or leak is
 * a finding; a refused configuration (UVMRT_ERR_CONFIG/INVALID) is fine.
 *
 * Input: a 32-byte header of raw params fields (shorter inputs use the
 * defaults), then text lines:
 *   NAME=VALUE      setenv("UVMRT_NAME", VALUE) for a NAME of the
 *                   configuration table (other names are ignored, so the
 *                   process environment does not fill up)
 *   @profile=TEXT   params.profile (likewise @report, @trace)
 * Environment variables are process-global: every input starts by unsetting
 * all of them. Build (clang only):
 *   configure CC=clang CFLAGS='-g -O1 -fsanitize=fuzzer-no-link,address,undefined'
 *   make tests/fuzz/fuzz_config     (see `make fuzz` in Makefile.am)
 *
 * Give libFuzzer absolute corpus paths and -artifact_prefix: the harness
 * changes its working directory.
 *
 * Safety: reports and traces are written at destroy to paths taken from the
 * input, so the harness works in a private temporary directory and turns '/'
 * in report and trace values into '_': files only land there, and are removed
 * after each input. "stderr" destinations become "none" to keep the fuzzer's
 * output readable; stdout goes to /dev/null.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings.h"
#include "uvmrt.h"

#define HEADER_BYTES 32
#define TEXT_MAX 4096

static char workdir[256];
static FILE *devnull;

static void log_sink(uvmrt_log_level_t level, const char *message, void *user)
{
    (void)level;
    (void)user;
    /* read the whole message, so a bad string would show under ASan */
    volatile size_t n = strlen(message);
    (void)n;
}

static void sandbox_once(void)
{
    if (workdir[0] != '\0') return;
    snprintf(workdir, sizeof workdir, "%s/uvmrt-fuzz.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(workdir) == NULL || chdir(workdir) != 0) {
        perror("fuzz_config: cannot make or enter a private directory");
        abort();
    }
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
    }
    devnull = fopen("/dev/null", "w");
}

/* Removes what a report or trace left in the private directory. */
static void clean_workdir(void)
{
    DIR *d = opendir(".");
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlink(e->d_name);
    closedir(d);
}

static void env_clear(void)
{
    size_t n = 0;
    const uvmrt_config_entry_t *t = uvmrt__config_table(&n);
    for (size_t i = 0; i < n; i++) {
        char var[64];
        snprintf(var, sizeof var, "UVMRT_%s", t[i].name);
        unsetenv(var);
    }
}

static int table_has(const char *name)
{
    size_t n = 0;
    const uvmrt_config_entry_t *t = uvmrt__config_table(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(t[i].name, name) == 0) return 1;
    return 0;
}

/* Keeps report/trace destinations inside the private directory and quiet. */
static void tame_destination(char *v)
{
    for (char *c = v; *c; c++)
        if (*c == '/') *c = '_';
    if (strstr(v, "stderr") != NULL) strcpy(v, "none");
}

static uint64_t u64_at(const uint8_t *h, int i)
{
    uint64_t v = 0;
    memcpy(&v, h + i, sizeof v);
    return v;
}

static void params_from_header(uvmrt_params_t *p, const uint8_t *h)
{
    p->backend = (uvmrt_backend_kind_t)(h[0] % 4);   /* 3 is invalid on purpose */
    p->policy = (uvmrt_policy_t)(h[1] % 4);
    p->log_level = (uvmrt_log_level_t)(h[2] % 5);
    p->discard_dead = h[3] % 3;
    p->remote = h[4] % 3;
    p->fault_stats = h[5] % 3;
    p->ignore_env = h[6] & 1;
    p->device = (int8_t)h[7];
    p->budget_bytes = u64_at(h, 8);
    p->budget_reserve_bytes = u64_at(h, 16);
    int32_t every = 0;
    memcpy(&every, h + 24, sizeof every);
    p->fault_sample_every = every;
    /* h[28..31]: a tensor size for the step, in KiB */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sandbox_once();
    env_clear();

    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_SIM;
    p.budget_bytes = 64u << 20;
    p.log_fn = log_sink;
    size_t tensor_bytes = 1u << 20;
    if (size >= HEADER_BYTES) {
        params_from_header(&p, data);
        uint32_t kib = 0;
        memcpy(&kib, data + 28, sizeof kib);
        tensor_bytes = ((size_t)(kib % (1u << 20)) + 1) << 10; /* 1 KiB .. 1 GiB */
        data += HEADER_BYTES;
        size -= HEADER_BYTES;
    }

    static char text[TEXT_MAX + 1];
    size_t n = size < TEXT_MAX ? size : TEXT_MAX;
    memcpy(text, data, n);
    text[n] = '\0';
    for (char *line = text, *next; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        char *eq = strchr(line, '=');
        if (eq == NULL || eq == line) continue;
        *eq = '\0';
        char *value = eq + 1;
        if (strcmp(line, "@profile") == 0) {
            p.profile = value;
        } else if (strcmp(line, "@report") == 0) {
            tame_destination(value);
            p.report = value;
        } else if (strcmp(line, "@trace") == 0) {
            tame_destination(value);
            p.trace = value;
        } else if (table_has(line)) {
            if (strcmp(line, "REPORT") == 0 || strcmp(line, "TRACE") == 0) tame_destination(value);
            char var[80];
            snprintf(var, sizeof var, "UVMRT_%s", line);
            setenv(var, value, 1);
        }
    }

    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    if (st == UVMRT_OK) {
        if (ctx == NULL) abort(); /* success must hand out a context */
        uvmrt_context_print_config(ctx, devnull);
        int layer = -1;
        uvmrt_tensor_t *w = NULL;
        uvmrt_tensor_desc_t d = {"w", 0, UVMRT_ROLE_WEIGHT, tensor_bytes};
        if (uvmrt_layer_add(ctx, "l0", &layer) == UVMRT_OK && uvmrt_tensor_alloc(ctx, &d, &w) == UVMRT_OK &&
            uvmrt_step_begin(ctx) == UVMRT_OK) {
            uvmrt_layer_call_t call;
            uvmrt_layer_call_init(&call, layer, UVMRT_PHASE_FORWARD, NULL);
            call.sim_duration_ns = 1000;
            if (uvmrt_layer_begin(ctx, &call) == UVMRT_OK) uvmrt_layer_end(ctx);
            uvmrt_step_end(ctx);
        }
        uvmrt_context_destroy(ctx);
    } else if (ctx != NULL) {
        abort(); /* failure must leave *out NULL */
    }
    clean_workdir();
    env_clear();
    return 0;
}
