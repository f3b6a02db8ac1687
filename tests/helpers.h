/*
 * helpers.h -- shared pieces of the Criterion tests: log capture, sim contexts,
 * a synthetic network driven step by step with an observer at every layer
 * boundary, and seeded random schedules for the planner.
 *
 * Every test runs in its own forked process (Criterion), so the static state
 * here (the log buffer) is per test. Nothing here touches a GPU: contexts are
 * created on the sim backend with ignore_env = 1 unless a test says otherwise.
 */
#ifndef UVMRT_TESTS_HELPERS_H
#define UVMRT_TESTS_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"
#include "plan.h"
#include "uvmrt.h"

#define KIB (1024ull)
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * 1024ull * 1024ull)

/* ------------------------------------------------------------------ log capture */
/* A uvmrt_log_fn that appends "level: message\n" to a static buffer (64 KiB,
 * the tail is dropped when full). user is ignored. */
void log_capture(uvmrt_log_level_t level, const char *message, void *user);
const char *log_text(void);           /* everything captured so far */
void log_reset(void);
int log_contains(const char *needle); /* 1 when needle occurs in log_text() */

/* Unsets every UVMRT_* variable of the configuration table, so environment
 * tests start clean whatever the runner's environment holds. */
void env_clear_uvmrt(void);

/* A whole file as a NUL-terminated string (caller frees); fails the test when it
 * cannot be read. */
char *file_slurp(const char *path);

/* Runs cmd through the shell (add 2>&1 for stderr) and returns its exit status, or -1
 * when it did not exit (killed by a signal); *out receives what it wrote to stdout,
 * NUL-terminated (caller frees). Fails the test when the shell cannot be started. */
int run_capture(const char *cmd, char **out);

/* ------------------------------------------------------------------ contexts */
/* params_init, then backend sim, the given policy/budget/profile (profile NULL:
 * the default), ignore_env = 1, log_fn = log_capture. */
void sim_params(uvmrt_params_t *p, uvmrt_policy_t policy, uint64_t budget_bytes, const char *profile);
/* A sim context from sim_params(); fails the test when creation fails. */
uvmrt_context_t *make_ctx(uvmrt_policy_t policy, uint64_t budget_bytes, const char *profile);

/* Bytes the sim model holds on its device (profile memory minus free, from the
 * backend's mem_info): the truth that uvmrt's own accounting must match. Only
 * meaningful on the sim backend (or a wrapper of it). */
uint64_t sim_device_bytes(uvmrt_context_t *ctx);

/* Footprint of a tensor of `size` bytes, computed independently of tensor.c:
 * >= 1 MiB rounds up to 2 MiB, smaller sizes round up to 64 KiB. */
uint64_t footprint_of(uint64_t size);

/* The last choice's predicted ns for the candidate whose one knob has value v (0: it
 * did not fit, or no such candidate). For contexts whose choice has one knob. */
double candidate_ns(const uvmrt_context_t *ctx, int v);

/* Adds layers "L0" .. "L<n-1>" (ids 0..n-1 on a fresh context); the first failure's status. */
uvmrt_status_t layers_add(uvmrt_context_t *ctx, int n);

/* The mean step time of steps 3 and 4 (0-based 2 and 3) of a context that ran at least
 * 4 steps: what uvmrt_choose(3) predicts a rehearsal by. Fails the test otherwise. */
double rehearsed_step_ns(const uvmrt_context_t *ctx);

/* ------------------------------------------------------------------ synthetic network */
typedef struct net_spec {
    int layers;
    size_t w_bytes, a_bytes, g_bytes, o_bytes; /* per layer: weight, activation, gradient, optimizer state */
    size_t x_bytes;                            /* the input, layer -1 */
    uint64_t sim_ns;                           /* sim_duration_ns of every layer call */
    int stream_acts;                           /* 1: every use of A and X is | UVMRT_USE_STREAM */
} net_spec_t;

/* A small default: 6 layers, W 2 MiB, A 1.5 MiB (2 MiB footprint), G 2 MiB,
 * O 4 MiB, X 1 MiB; 200 us per call. Largest working set 8 MiB, total 62 MiB. */
net_spec_t net_spec_default(void);

typedef struct net {
    uvmrt_context_t *ctx;    /* not owned */
    net_spec_t spec;
    int L;
    int *layer;              /* (L) layer numbers */
    uvmrt_tensor_t *x;       /* input, layer -1 */
    uvmrt_tensor_t **w, **a, **g, **o; /* (L) each */
    uvmrt_tensor_t **all;    /* (n_all) allocation order: x, then w, a, g, o of each layer */
    int n_all;
    uvmrt_stream_t stream;   /* NULL: sim uses it as a name only */
} net_t;

/* Declares L layers ("layer0"...) and allocates every tensor in one
 * uvmrt_tensors_alloc call; fails the test on error. */
net_t *net_create(uvmrt_context_t *ctx, const net_spec_t *spec);
void net_free(net_t *net); /* frees the helper's arrays, not the tensors or the context */
/* The default net (net_spec_default) on a context from make_ctx(policy, budget, NULL). */
net_t *net_default_on_sim(uvmrt_policy_t policy, uint64_t budget_bytes);
/* net_free, then destroys the net's context (and with it the tensors). */
void net_destroy(net_t *net);

/* One layer call as the network makes it, handed to the observer. */
#define NET_MAX_USES 8
typedef struct net_event {
    int index;              /* call index within the step, 0..3L-1 */
    int layer;
    uvmrt_phase_t phase;
    int is_end;             /* 0: just after uvmrt_layer_begin; 1: just after uvmrt_layer_end */
    int n_uses;
    uvmrt_tensor_t *uses[NET_MAX_USES];   /* every tensor the call uses: defaults + extras */
    unsigned access[NET_MAX_USES];
} net_event_t;

typedef void (*net_observer_fn)(net_t *net, const net_event_t *ev, void *user);

/* The uses of one call (defaults and extras); returns the count. */
int net_call_uses(const net_t *net, int layer, uvmrt_phase_t phase, uvmrt_tensor_t **uses, unsigned *access);
/* Largest working set (footprints) of any call, and the total footprint. */
uint64_t net_max_working_set(const net_t *net);
uint64_t net_total_footprint(const net_t *net);
int net_calls_per_step(const net_t *net); /* 3L */

/* One step: forward 0..L-1 (extra use: previous A, or X, READ), backward
 * L-1..0 (extra use: G of layer i+1 READ), optimizer 0..L-1. With
 * spec.stream_acts the uses of A and X also carry UVMRT_USE_STREAM. The observer (may
 * be NULL) runs after every begin and end. skip_forward: a layer whose forward
 * call is left out (a deviation from the record), or -1. Fails the test when a
 * call fails. */
void run_step_ex(net_t *net, int skip_forward, net_observer_fn obs, void *user);
/* Like run_step, with the optimizer calls in reverse order (L-1..0): a step of
 * the same length as the usual one that still differs from it. */
void run_step_reversed_optimizer(net_t *net, net_observer_fn obs, void *user);
void run_step(net_t *net, net_observer_fn obs, void *user);
void run_steps(net_t *net, int n, net_observer_fn obs, void *user);

/* A standard observer: asserts resident_bytes <= budget (unless policy none)
 * at every event; after a begin, that every tensor the call uses is resident
 * or host-homed (never both);
 * after an end, that the sim device holds no more than the budget. user: a struct invariant_count (may be NULL) that counts events. */
typedef struct invariant_count {
    int events;
    uint64_t max_resident;
} invariant_count_t;
void observe_invariants(net_t *net, const net_event_t *ev, void *user);

/* ------------------------------------------------------------------ random schedules */
uint64_t xorshift64(uint64_t *state); /* state != 0 */
/* A value in [lo, hi]. */
uint64_t rand_between(uint64_t *state, uint64_t lo, uint64_t hi);

/* n tensors of random sizes (64 KiB..4 MiB), m events each using a random
 * subset of 1..max_uses distinct tensors with random access (R, W or RW). */
typedef struct rsched {
    int n, m;
    uint64_t *size;             /* (n) bytes */
    uint64_t *footprint;        /* (n) footprint_of(size) */
    int *first, *count;         /* (m) into tensor/access */
    int *tensor;                /* (sum count) tensor ids */
    unsigned *access;           /* (sum count) UVMRT_USE_* */
    uvmrt_plan_event_t *events; /* (m) views for plan.h */
} rsched_t;

void rsched_make(rsched_t *s, uint64_t seed, int n, int m, int max_uses);
void rsched_free(rsched_t *s);
uint64_t rsched_event_ws(const rsched_t *s, int e);
uint64_t rsched_max_ws(const rsched_t *s);
uint64_t rsched_total(const rsched_t *s);

/* ------------------------------------------------------------------ text buffers */
/* A growable string, for traces. */
typedef struct strbuf {
    char *s;
    size_t len, cap;
} strbuf_t;
void sb_append(strbuf_t *b, const char *text);
void sb_appendf(strbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_free(strbuf_t *b);
/* A uvmrt__set_trace callback appending "line\n" to the strbuf_t in user. */
void trace_to_strbuf(void *user, const char *line);

#endif
