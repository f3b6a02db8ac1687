/*
 * helpers.c -- see helpers.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <criterion/criterion.h>

#include "helpers.h"

/* ------------------------------------------------------------------ log capture */
#define LOG_CAP (64u << 10)
static char log_buf[LOG_CAP];
static size_t log_len;

void log_capture(uvmrt_log_level_t level, const char *message, void *user)
{
    (void)user;
    if (log_len >= LOG_CAP - 1) return;
    int n = snprintf(log_buf + log_len, LOG_CAP - log_len, "%s: %s\n", uvmrt_log_level_name(level), message);
    if (n > 0) log_len += (size_t)n < LOG_CAP - log_len ? (size_t)n : LOG_CAP - 1 - log_len;
}

const char *log_text(void) { return log_buf; }

void log_reset(void)
{
    log_len = 0;
    log_buf[0] = '\0';
}

int log_contains(const char *needle) { return strstr(log_buf, needle) != NULL; }

void env_clear_uvmrt(void)
{
    size_t n = 0;
    const uvmrt_config_entry_t *t = uvmrt__config_table(&n);
    for (size_t i = 0; i < n; i++) {
        char var[64];
        snprintf(var, sizeof var, "UVMRT_%s", t[i].name);
        unsetenv(var);
    }
}

/* ------------------------------------------------------------------ contexts */
void sim_params(uvmrt_params_t *p, uvmrt_policy_t policy, uint64_t budget_bytes, const char *profile)
{
    uvmrt_params_init(p);
    p->backend = UVMRT_BACKEND_SIM;
    p->policy = policy;
    p->budget_bytes = budget_bytes;
    p->profile = profile;
    p->ignore_env = 1;
    p->log_fn = log_capture;
}

uvmrt_context_t *make_ctx(uvmrt_policy_t policy, uint64_t budget_bytes, const char *profile)
{
    uvmrt_params_t p;
    sim_params(&p, policy, budget_bytes, profile);
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_context_create (sim, policy %s): %s; log:\n%s",
                 uvmrt_policy_name(policy), uvmrt_status_name(st), log_text());
    cr_assert_not_null(ctx);
    return ctx;
}

uint64_t sim_device_bytes(uvmrt_context_t *ctx)
{
    uint64_t free_b = 0, total_b = 0;
    cr_assert_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_assert_eq(ctx->be.ops->mem_info(ctx->be.state, &free_b, &total_b), UVMRT_OK);
    return total_b - free_b;
}

uint64_t footprint_of(uint64_t size)
{
    uint64_t a = size >= MIB ? 2 * MIB : 64 * KIB;
    return (size + a - 1) / a * a;
}

/* ------------------------------------------------------------------ synthetic network */
net_spec_t net_spec_default(void)
{
    return (net_spec_t){
        .layers = 6,
        .w_bytes = 2 * MIB,
        .a_bytes = 3 * MIB / 2,
        .g_bytes = 2 * MIB,
        .o_bytes = 4 * MIB,
        .x_bytes = 1 * MIB,
        .sim_ns = 200000,
    };
}

net_t *net_create(uvmrt_context_t *ctx, const net_spec_t *spec)
{
    net_t *net = calloc(1, sizeof *net);
    cr_assert_not_null(net);
    int L = spec->layers;
    net->ctx = ctx;
    net->spec = *spec;
    net->L = L;
    net->layer = calloc((size_t)L, sizeof *net->layer);
    net->w = calloc((size_t)L, sizeof *net->w);
    net->a = calloc((size_t)L, sizeof *net->a);
    net->g = calloc((size_t)L, sizeof *net->g);
    net->o = calloc((size_t)L, sizeof *net->o);
    net->n_all = 1 + 4 * L;
    net->all = calloc((size_t)net->n_all, sizeof *net->all);
    uvmrt_tensor_desc_t *d = calloc((size_t)net->n_all, sizeof *d);
    char (*names)[32] = calloc((size_t)net->n_all, sizeof *names);
    cr_assert(net->layer && net->w && net->a && net->g && net->o && net->all && d && names);
    for (int i = 0; i < L; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", i);
        uvmrt_status_t st = uvmrt_layer_add(ctx, name, &net->layer[i]);
        cr_assert_eq(st, UVMRT_OK, "uvmrt_layer_add(%s): %s", name, uvmrt_status_name(st));
    }
    snprintf(names[0], sizeof names[0], "X");
    d[0] = (uvmrt_tensor_desc_t){names[0], -1, UVMRT_ROLE_ACTIVATION, spec->x_bytes};
    static const char tag[4] = {'W', 'A', 'G', 'O'};
    static const uvmrt_role_t role[4] = {UVMRT_ROLE_WEIGHT, UVMRT_ROLE_ACTIVATION, UVMRT_ROLE_GRADIENT,
                                         UVMRT_ROLE_OPTIMIZER_STATE};
    size_t bytes[4] = {spec->w_bytes, spec->a_bytes, spec->g_bytes, spec->o_bytes};
    for (int i = 0; i < L; i++)
        for (int k = 0; k < 4; k++) {
            int j = 1 + 4 * i + k;
            snprintf(names[j], sizeof names[j], "%c%d", tag[k], i);
            d[j] = (uvmrt_tensor_desc_t){names[j], net->layer[i], role[k], bytes[k]};
        }
    uvmrt_status_t st = uvmrt_tensors_alloc(ctx, (size_t)net->n_all, d, net->all);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_tensors_alloc: %s; log:\n%s", uvmrt_status_name(st), log_text());
    net->x = net->all[0];
    for (int i = 0; i < L; i++) {
        net->w[i] = net->all[1 + 4 * i];
        net->a[i] = net->all[2 + 4 * i];
        net->g[i] = net->all[3 + 4 * i];
        net->o[i] = net->all[4 + 4 * i];
    }
    free(d);
    free(names);
    return net;
}

void net_free(net_t *net)
{
    if (net == NULL) return;
    free(net->layer);
    free(net->w);
    free(net->a);
    free(net->g);
    free(net->o);
    free(net->all);
    free(net);
}

net_t *net_default_on_sim(uvmrt_policy_t policy, uint64_t budget_bytes)
{
    uvmrt_context_t *ctx = make_ctx(policy, budget_bytes, NULL);
    net_spec_t spec = net_spec_default();
    return net_create(ctx, &spec);
}

void net_destroy(net_t *net)
{
    uvmrt_context_t *ctx = net->ctx;
    net_free(net);
    uvmrt_context_destroy(ctx);
}

static int add_use(uvmrt_tensor_t **uses, unsigned *access, int n, uvmrt_tensor_t *t, unsigned acc)
{
    uses[n] = t;
    access[n] = acc;
    return n + 1;
}

int net_call_uses(const net_t *net, int i, uvmrt_phase_t phase, uvmrt_tensor_t **uses, unsigned *access)
{
    int n = 0;
    unsigned st = net->spec.stream_acts ? UVMRT_USE_STREAM : 0; /* for A and X */
    switch (phase) {
    case UVMRT_PHASE_FORWARD:
        n = add_use(uses, access, n, net->w[i], UVMRT_USE_READ);
        n = add_use(uses, access, n, net->a[i], UVMRT_USE_WRITE | st);
        n = add_use(uses, access, n, i > 0 ? net->a[i - 1] : net->x, UVMRT_USE_READ | st);
        break;
    case UVMRT_PHASE_BACKWARD:
        n = add_use(uses, access, n, net->w[i], UVMRT_USE_READ);
        n = add_use(uses, access, n, net->a[i], UVMRT_USE_READ | st);
        n = add_use(uses, access, n, net->g[i], UVMRT_USE_WRITE);
        if (i < net->L - 1) n = add_use(uses, access, n, net->g[i + 1], UVMRT_USE_READ);
        break;
    case UVMRT_PHASE_OPTIMIZER:
        n = add_use(uses, access, n, net->w[i], UVMRT_USE_READWRITE);
        n = add_use(uses, access, n, net->g[i], UVMRT_USE_READ);
        n = add_use(uses, access, n, net->o[i], UVMRT_USE_READWRITE);
        break;
    }
    return n;
}

static uint64_t fp(const uvmrt_tensor_t *t) { return t->footprint; }

uint64_t net_max_working_set(const net_t *net)
{
    uint64_t best = 0;
    for (int i = 0; i < net->L; i++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            uvmrt_tensor_t *uses[NET_MAX_USES];
            unsigned acc[NET_MAX_USES];
            int n = net_call_uses(net, i, (uvmrt_phase_t)p, uses, acc);
            uint64_t ws = 0;
            for (int k = 0; k < n; k++) ws += fp(uses[k]);
            if (ws > best) best = ws;
        }
    return best;
}

uint64_t net_total_footprint(const net_t *net)
{
    uint64_t total = 0;
    for (int i = 0; i < net->n_all; i++) total += fp(net->all[i]);
    return total;
}

int net_calls_per_step(const net_t *net) { return 3 * net->L; }

static void one_call(net_t *net, int index, int i, uvmrt_phase_t phase, net_observer_fn obs, void *user)
{
    net_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.index = index;
    ev.layer = net->layer[i];
    ev.phase = phase;
    ev.n_uses = net_call_uses(net, i, phase, ev.uses, ev.access);
    /* the uses beyond the defaults, and A's access when streamed (replacing the default) */
    uvmrt_use_t extra[2];
    size_t n_extra = 0;
    unsigned sf = net->spec.stream_acts ? UVMRT_USE_STREAM : 0;
    if (phase == UVMRT_PHASE_FORWARD) {
        extra[n_extra++] = (uvmrt_use_t){i > 0 ? net->a[i - 1] : net->x, UVMRT_USE_READ | sf};
        if (sf) extra[n_extra++] = (uvmrt_use_t){net->a[i], UVMRT_USE_WRITE | sf};
    }
    if (phase == UVMRT_PHASE_BACKWARD) {
        if (i < net->L - 1) extra[n_extra++] = (uvmrt_use_t){net->g[i + 1], UVMRT_USE_READ};
        if (sf) extra[n_extra++] = (uvmrt_use_t){net->a[i], UVMRT_USE_READ | sf};
    }
    uvmrt_layer_call_t call = {
        .struct_size = sizeof(uvmrt_layer_call_t),
        .layer = net->layer[i],
        .phase = phase,
        .stream = net->stream,
        .uses = n_extra ? extra : NULL,
        .n_uses = n_extra,
        .sim_duration_ns = net->spec.sim_ns,
    };
    uvmrt_status_t st = uvmrt_layer_begin(net->ctx, &call);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_layer_begin(layer%d %s): %s; log:\n%s", i, uvmrt_phase_name(phase),
                 uvmrt_status_name(st), log_text());
    if (obs) obs(net, &ev, user);
    st = uvmrt_layer_end(net->ctx);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_layer_end(layer%d %s): %s; log:\n%s", i, uvmrt_phase_name(phase),
                 uvmrt_status_name(st), log_text());
    ev.is_end = 1;
    if (obs) obs(net, &ev, user);
}

static void run_step_impl(net_t *net, int skip_forward, int reverse_opt, net_observer_fn obs, void *user)
{
    uvmrt_status_t st = uvmrt_step_begin(net->ctx);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_step_begin: %s; log:\n%s", uvmrt_status_name(st), log_text());
    int index = 0;
    for (int i = 0; i < net->L; i++)
        if (i != skip_forward) one_call(net, index++, i, UVMRT_PHASE_FORWARD, obs, user);
    for (int i = net->L - 1; i >= 0; i--) one_call(net, index++, i, UVMRT_PHASE_BACKWARD, obs, user);
    for (int k = 0; k < net->L; k++)
        one_call(net, index++, reverse_opt ? net->L - 1 - k : k, UVMRT_PHASE_OPTIMIZER, obs, user);
    st = uvmrt_step_end(net->ctx);
    cr_assert_eq(st, UVMRT_OK, "uvmrt_step_end: %s; log:\n%s", uvmrt_status_name(st), log_text());
}

void run_step_ex(net_t *net, int skip_forward, net_observer_fn obs, void *user)
{
    run_step_impl(net, skip_forward, 0, obs, user);
}

void run_step_reversed_optimizer(net_t *net, net_observer_fn obs, void *user) { run_step_impl(net, -1, 1, obs, user); }

void run_step(net_t *net, net_observer_fn obs, void *user) { run_step_ex(net, -1, obs, user); }

void run_steps(net_t *net, int n, net_observer_fn obs, void *user)
{
    for (int s = 0; s < n; s++) run_step(net, obs, user);
}

void observe_invariants(net_t *net, const net_event_t *ev, void *user)
{
    invariant_count_t *count = user;
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(net->ctx, &sum), UVMRT_OK);
    if (uvmrt_context_policy(net->ctx) != UVMRT_POLICY_NONE)
        cr_assert_leq(sum.resident_bytes, sum.budget_bytes,
                      "after %s of layer %d %s (call %d): resident %llu bytes > budget %llu bytes",
                      ev->is_end ? "end" : "begin", ev->layer, uvmrt_phase_name(ev->phase), ev->index,
                      (unsigned long long)sum.resident_bytes, (unsigned long long)sum.budget_bytes);
    /* the model's device (pages move at a layer's end on demand) */
    if (ev->is_end && uvmrt_context_policy(net->ctx) != UVMRT_POLICY_NONE &&
        uvmrt_context_backend(net->ctx) == UVMRT_BACKEND_SIM) {
        uint64_t dev = sim_device_bytes(net->ctx);
        cr_assert_leq(dev, sum.budget_bytes, "after end of layer %d %s (call %d): the sim device holds %llu bytes > budget %llu",
                      ev->layer, uvmrt_phase_name(ev->phase), ev->index, (unsigned long long)dev,
                      (unsigned long long)sum.budget_bytes);
    }
    if (!ev->is_end)
        for (int k = 0; k < ev->n_uses; k++) {
            int res = uvmrt_tensor_is_resident(ev->uses[k]), homed = uvmrt_tensor_is_host_homed(ev->uses[k]);
            cr_assert(res || homed, "after begin of layer %d %s (call %d): %s neither resident nor host-homed",
                      ev->layer, uvmrt_phase_name(ev->phase), ev->index, uvmrt_tensor_name(ev->uses[k]));
            cr_assert(!(res && homed), "after begin of layer %d %s (call %d): %s resident and host-homed", ev->layer,
                      uvmrt_phase_name(ev->phase), ev->index, uvmrt_tensor_name(ev->uses[k]));
        }
    if (count) {
        count->events++;
        if (sum.resident_bytes > count->max_resident) count->max_resident = sum.resident_bytes;
    }
}

/* ------------------------------------------------------------------ random schedules */
uint64_t xorshift64(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

uint64_t rand_between(uint64_t *state, uint64_t lo, uint64_t hi)
{
    return lo + xorshift64(state) % (hi - lo + 1);
}

void rsched_make(rsched_t *s, uint64_t seed, int n, int m, int max_uses)
{
    memset(s, 0, sizeof *s);
    uint64_t st = seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull;
    if (st == 0) st = 1;
    if (max_uses > n) max_uses = n;
    s->n = n;
    s->m = m;
    s->size = calloc((size_t)n, sizeof *s->size);
    s->footprint = calloc((size_t)n, sizeof *s->footprint);
    s->first = calloc((size_t)m, sizeof *s->first);
    s->count = calloc((size_t)m, sizeof *s->count);
    s->tensor = calloc((size_t)m * (size_t)max_uses, sizeof *s->tensor);
    s->access = calloc((size_t)m * (size_t)max_uses, sizeof *s->access);
    s->events = calloc((size_t)m, sizeof *s->events);
    cr_assert(s->size && s->footprint && s->first && s->count && s->tensor && s->access && s->events);
    for (int t = 0; t < n; t++) {
        s->size[t] = rand_between(&st, 64 * KIB, 4 * MIB);
        s->footprint[t] = footprint_of(s->size[t]);
    }
    static const unsigned acc[3] = {UVMRT_USE_READ, UVMRT_USE_WRITE, UVMRT_USE_READWRITE};
    int k = 0;
    for (int e = 0; e < m; e++) {
        int c = (int)rand_between(&st, 1, (uint64_t)max_uses);
        s->first[e] = k;
        s->count[e] = c;
        for (int i = 0; i < c; i++) {
            int t, dup;
            do { /* distinct tensors within an event */
                t = (int)rand_between(&st, 0, (uint64_t)n - 1);
                dup = 0;
                for (int j = s->first[e]; j < k; j++) dup |= s->tensor[j] == t;
            } while (dup);
            s->tensor[k] = t;
            s->access[k] = acc[rand_between(&st, 0, 2)];
            k++;
        }
        s->events[e] = (uvmrt_plan_event_t){c, &s->tensor[s->first[e]], &s->access[s->first[e]]};
    }
}

void rsched_free(rsched_t *s)
{
    free(s->size);
    free(s->footprint);
    free(s->first);
    free(s->count);
    free(s->tensor);
    free(s->access);
    free(s->events);
    memset(s, 0, sizeof *s);
}

uint64_t rsched_event_ws(const rsched_t *s, int e)
{
    uint64_t ws = 0;
    for (int i = 0; i < s->count[e]; i++) ws += s->footprint[s->tensor[s->first[e] + i]];
    return ws;
}

uint64_t rsched_max_ws(const rsched_t *s)
{
    uint64_t best = 0;
    for (int e = 0; e < s->m; e++) {
        uint64_t ws = rsched_event_ws(s, e);
        if (ws > best) best = ws;
    }
    return best;
}

uint64_t rsched_total(const rsched_t *s)
{
    uint64_t total = 0;
    for (int t = 0; t < s->n; t++) total += s->footprint[t];
    return total;
}

/* ------------------------------------------------------------------ text buffers */
void sb_append(strbuf_t *b, const char *text)
{
    size_t n = strlen(text);
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        cr_assert_not_null(s);
        b->s = s;
        b->cap = cap;
    }
    memcpy(b->s + b->len, text, n + 1);
    b->len += n;
}

void sb_appendf(strbuf_t *b, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    sb_append(b, line);
}

void sb_free(strbuf_t *b)
{
    free(b->s);
    memset(b, 0, sizeof *b);
}

void trace_to_strbuf(void *user, const char *line)
{
    strbuf_t *b = user;
    sb_append(b, line);
    sb_append(b, "\n");
}

/* ------------------------------------------------------------------ files */
char *file_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0, "%s", path);
    long n = ftell(f);
    cr_assert_geq(n, 0, "%s", path);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    cr_assert_not_null(b);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n, "short read of %s", path);
    b[n] = '\0';
    fclose(f);
    return b;
}

int run_capture(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "popen %s", cmd);
    size_t got = 0, cap = 4096, n;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    while ((n = fread(b + got, 1, cap - 1 - got, p)) > 0) {
        got += n;
        if (cap - 1 - got == 0) {
            b = realloc(b, 2 * cap);
            cr_assert_not_null(b);
            cap *= 2;
        }
    }
    b[got] = '\0';
    int status = pclose(p);
    *out = b;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double rehearsed_step_ns(const uvmrt_context_t *ctx)
{
    uvmrt_step_stats_t a = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), b = a;
    cr_assert_eq(uvmrt_step_stats_get(ctx, 2, &a), UVMRT_OK, "no step 3");
    cr_assert_eq(uvmrt_step_stats_get(ctx, 3, &b), UVMRT_OK, "no step 4");
    return 0.5 * ((double)a.step_ns + (double)b.step_ns);
}

double candidate_ns(const uvmrt_context_t *ctx, int v)
{
    double found = 0;
    for (size_t i = 0; i < uvmrt_choice_count(ctx); i++) {
        int value;
        double ns;
        cr_assert_eq(uvmrt_choice_candidate(ctx, i, &value, &ns), UVMRT_OK);
        if (value == v) found = ns;
    }
    return found;
}

uvmrt_status_t layers_add(uvmrt_context_t *ctx, int n)
{
    uvmrt_status_t st = UVMRT_OK;
    for (int l = 0; l < n && st == UVMRT_OK; l++) {
        char name[16];
        int id;
        snprintf(name, sizeof name, "L%d", l);
        st = uvmrt_layer_add(ctx, name, &id);
    }
    return st;
}
