/*
 * test_misuse.c -- the API misuse sweep (issue 8, "Done when" #1): a table of
 * bad-input cases over the whole public API, as a new user and a fault injector
 * would make them.
 *
 * Each case runs in its own forked process (a crash or a hang there is counted,
 * not fatal to the sweep) and is judged on four things:
 *   1. no crash (a signal, or 30 s without finishing, counts as one);
 *   2. the status: the one the table expects, any error, or (EXPECT_EITHER) OK
 *      or an error, where the case checks itself which outcome was handled right;
 *   3. an error return logged a message at error level that contains the case's
 *      needle (the bad value or the argument's name; alternatives split by '|',
 *      case-insensitive). Where the API has no context to log to (the parsers,
 *      a NULL context) the needle is NULL and the status alone is the contract;
 *   4. after an error return the context is exactly as before (summary, layer
 *      count, each tensor's residency and placement, step count, the open step
 *      and call, the record and plan, every layer's counters, the model device's
 *      bytes), and it still runs normal steps afterwards, keeping the budget.
 * A case is clear when 2 and 3 hold, unclear otherwise; "changed" is counted
 * apart. The sweep ends with one line on stderr,
 *   misuse: N cases, C clear, U unclear, X crashed
 * and fails when, among the cases not flagged known_bad, more than 3 are
 * unclear, any crashed or any left its context changed. known_bad marks what
 * failed when the sweep was written: those still count
 * in the summary line, and a flagged case that now passes is listed so that its
 * flag can be removed. MISUSE_CASE=substring runs only matching cases;
 * MISUSE_VERBOSE=1 prints a line for every case; MISUSE_STRICT=1 judges the
 * flagged cases like the others (the sweep then fails on main).
 *
 * The forked case processes must not fail a Criterion assertion (a failed
 * cr_assert talks to the runner, which the fork cannot do): they use the
 * helpers only where those cannot fail, and run their steps with the static,
 * status-returning runner below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "helpers.h"

#define EXPECT_ANY_ERROR 100 /* any negative status */
#define EXPECT_EITHER 101    /* OK or an error: the case checks which was handled right */
#define CASE_TIMEOUT_S 30
#define MAX_UNCLEAR 3

/* ------------------------------------------------------------------ cases */
typedef enum fixture_kind {
    FIX_NONE = 0, /* no context: parsers, context creation */
    FIX_IDLE,     /* the default net on sim (prefetch, 16 MiB), 2 steps run, between steps */
    FIX_STEP,     /* the same, inside a third step, no layer call open */
    FIX_LAYER     /* the same, inside a third step, its first call (layer0 forward) open */
} fixture_kind_t;

struct mcase;

/* What the forked case process reports back (in shared memory). */
enum { PH_START = 0, PH_SETUP, PH_CALL, PH_CHECK, PH_AFTER, PH_DONE };
typedef struct result {
    int phase;           /* how far the case process got */
    int status;          /* of the bad call */
    int logged;          /* an error-level message contains the needle */
    int changed;         /* the context differs from before the call */
    char changed_what[256];
    int after_failed;    /* normal steps afterwards failed */
    char after_what[512];
    char wrong[256];     /* the case's own check of how the input was handled */
    char errors[768];    /* the error-level messages the call logged */
    char setup_what[256];
    char dir[512];       /* the case's folder, removed by the sweep if the case died */
} result_t;

typedef struct fix fix_t;
typedef uvmrt_status_t (*case_fn)(fix_t *f, const struct mcase *c, result_t *r);

typedef struct mcase {
    const char *name;
    case_fn run;
    fixture_kind_t fix;
    const char *a, *b; /* string arguments, by case */
    long long n;       /* integer argument */
    uint64_t u;        /* unsigned argument */
    double x;          /* floating argument */
    int k;             /* an enum argument (role, phase), as int: a double out of an enum's range is UB */
    int expect;        /* a uvmrt_status_t, EXPECT_ANY_ERROR or EXPECT_EITHER */
    const char *needle;
    int known_bad;     /* fails on main today; counted, does not fail make check */
} mcase_t;

/* ------------------------------------------------------------------ snapshots */
#define SNAP_TENSORS 64
#define SNAP_LAYERS 16

typedef struct snap {
    uvmrt_summary_t sum;
    int sum_status;
    int layers, n_tensors, n_arenas;
    int in_step, open_call;
    size_t cur_calls, cur_uses, rec_calls;
    int have_record, have_plan;
    uint64_t step_index, budget, dev_bytes;
    unsigned char tensor[SNAP_TENSORS]; /* live | resident << 1 | host_homed << 2 | placed host << 3 */
    uvmrt_layer_stats_t stats[SNAP_LAYERS][UVMRT_PHASE_COUNT];
} snap_t;

struct fix {
    fixture_kind_t kind;
    uvmrt_context_t *ctx;  /* the context under test (NULL for FIX_NONE) */
    net_t *net;
    uvmrt_context_t *ctx2; /* a second context, for foreign tensors; destroyed by the harness */
    snap_t before;
    int in_step, open, resume; /* where the step stands: open call, next call index */
    char dir[512];             /* the case's own temporary folder, also its cwd */
};

static uint64_t dev_bytes(uvmrt_context_t *ctx)
{
    uint64_t free_b = 0, total_b = 0;
    if (ctx->be.ops->mem_info(ctx->be.state, &free_b, &total_b) != UVMRT_OK) return UINT64_MAX;
    return total_b - free_b;
}

static void snap_take(uvmrt_context_t *ctx, snap_t *s)
{
    memset(s, 0, sizeof *s);
    s->sum.struct_size = sizeof s->sum;
    s->sum_status = uvmrt_summary_get(ctx, &s->sum);
    s->layers = uvmrt_layer_count(ctx);
    s->n_tensors = ctx->tensors.n;
    s->n_arenas = ctx->tensors.n_arenas;
    s->in_step = ctx->sched.in_step;
    s->open_call = ctx->sched.open_call;
    s->cur_calls = ctx->sched.cur.n_calls;
    s->cur_uses = ctx->sched.cur.n_uses;
    s->rec_calls = ctx->sched.record.n_calls;
    s->have_record = ctx->sched.have_record;
    s->have_plan = ctx->sched.have_plan;
    s->step_index = ctx->sched.step_index;
    s->budget = uvmrt_context_budget(ctx);
    s->dev_bytes = dev_bytes(ctx);
    for (int i = 0; i < ctx->tensors.n && i < SNAP_TENSORS; i++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[i];
        s->tensor[i] = (unsigned char)((uvmrt_tensor_ptr(t) != NULL) | uvmrt_tensor_is_resident(t) << 1 |
                                       uvmrt_tensor_is_host_homed(t) << 2 |
                                       (uvmrt_tensor_placement(t) == UVMRT_PLACE_HOST) << 3);
    }
    for (int l = 0; l < s->layers && l < SNAP_LAYERS; l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++) {
            s->stats[l][p].struct_size = sizeof s->stats[l][p];
            uvmrt_layer_stats_get(ctx, l, (uvmrt_phase_t)p, &s->stats[l][p]);
        }
}

/* Names what differs (empty when nothing does). */
static void snap_diff(const snap_t *a, const snap_t *b, char *out, size_t n)
{
    out[0] = '\0';
    size_t len = 0;
#define DIFF(cond, ...)                                                                  \
    do {                                                                                 \
        if ((cond) && len < n) len += (size_t)snprintf(out + len, n - len, __VA_ARGS__); \
    } while (0)
    DIFF(a->sum.steps != b->sum.steps, "steps %llu -> %llu; ", (unsigned long long)a->sum.steps,
         (unsigned long long)b->sum.steps);
    DIFF(a->sum.resident_bytes != b->sum.resident_bytes, "resident %llu -> %llu; ",
         (unsigned long long)a->sum.resident_bytes, (unsigned long long)b->sum.resident_bytes);
    DIFF(a->sum.allocated_bytes != b->sum.allocated_bytes, "allocated %llu -> %llu; ",
         (unsigned long long)a->sum.allocated_bytes, (unsigned long long)b->sum.allocated_bytes);
    DIFF(a->sum_status != b->sum_status || memcmp(&a->sum, &b->sum, sizeof a->sum) != 0, "summary; ");
    DIFF(a->layers != b->layers, "layers %d -> %d; ", a->layers, b->layers);
    DIFF(a->n_tensors != b->n_tensors, "tensors %d -> %d; ", a->n_tensors, b->n_tensors);
    DIFF(a->n_arenas != b->n_arenas, "arenas %d -> %d; ", a->n_arenas, b->n_arenas);
    DIFF(a->in_step != b->in_step, "in_step %d -> %d; ", a->in_step, b->in_step);
    DIFF(a->open_call != b->open_call, "open call %d -> %d; ", a->open_call, b->open_call);
    DIFF(a->cur_calls != b->cur_calls || a->cur_uses != b->cur_uses, "step calls/uses %zu/%zu -> %zu/%zu; ",
         a->cur_calls, a->cur_uses, b->cur_calls, b->cur_uses);
    DIFF(a->rec_calls != b->rec_calls || a->have_record != b->have_record, "record; ");
    DIFF(a->have_plan != b->have_plan, "plan %d -> %d; ", a->have_plan, b->have_plan);
    DIFF(a->step_index != b->step_index, "step index; ");
    DIFF(a->budget != b->budget, "budget; ");
    DIFF(a->dev_bytes != b->dev_bytes, "model device %llu -> %llu bytes; ", (unsigned long long)a->dev_bytes,
         (unsigned long long)b->dev_bytes);
    DIFF(memcmp(a->tensor, b->tensor, sizeof a->tensor) != 0, "tensor residency/placement; ");
    DIFF(memcmp(a->stats, b->stats, sizeof a->stats) != 0, "layer counters; ");
#undef DIFF
    if (len >= 2 && len < n) out[len - 2] = '\0'; /* the last "; " */
}

/* ------------------------------------------------------------------ a step runner that returns */
/* Call k of the net's step: forward 0..L-1, backward L-1..0, optimizer 0..L-1
 * (the order of helpers.c's run_step). */
static void call_of(const net_t *net, int k, int *i, uvmrt_phase_t *ph)
{
    int L = net->L;
    if (k < L) *i = k, *ph = UVMRT_PHASE_FORWARD;
    else if (k < 2 * L) *i = 2 * L - 1 - k, *ph = UVMRT_PHASE_BACKWARD;
    else *i = k - 2 * L, *ph = UVMRT_PHASE_OPTIMIZER;
}

/* The budget holds, on uvmrt's books and on the model's device (after an end);
 * after a begin, each tensor the call uses is resident or host-homed, not both. */
static int invariants(net_t *net, int i, uvmrt_phase_t ph, int is_end, char *why, size_t n)
{
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    if (uvmrt_summary_get(net->ctx, &s) != UVMRT_OK) return snprintf(why, n, "summary_get failed"), -1;
    if (s.resident_bytes > s.budget_bytes)
        return snprintf(why, n, "layer%d %s %s: resident %llu > budget %llu", i, uvmrt_phase_name(ph),
                        is_end ? "end" : "begin", (unsigned long long)s.resident_bytes,
                        (unsigned long long)s.budget_bytes), -1;
    if (is_end && dev_bytes(net->ctx) > s.budget_bytes)
        return snprintf(why, n, "layer%d %s end: the model device holds %llu > budget %llu", i,
                        uvmrt_phase_name(ph), (unsigned long long)dev_bytes(net->ctx),
                        (unsigned long long)s.budget_bytes), -1;
    if (!is_end) {
        uvmrt_tensor_t *uses[NET_MAX_USES];
        unsigned acc[NET_MAX_USES];
        int nu = net_call_uses(net, i, ph, uses, acc);
        for (int k = 0; k < nu; k++) {
            int res = uvmrt_tensor_is_resident(uses[k]), homed = uvmrt_tensor_is_host_homed(uses[k]);
            if (res == homed)
                return snprintf(why, n, "layer%d %s begin: %s resident %d, host-homed %d", i, uvmrt_phase_name(ph),
                                uvmrt_tensor_name(uses[k]), res, homed), -1;
        }
    }
    return 0;
}

static int call_begin(net_t *net, int k, char *why, size_t n)
{
    int i;
    uvmrt_phase_t ph;
    call_of(net, k, &i, &ph);
    uvmrt_use_t extra[1];
    size_t n_extra = 0;
    if (ph == UVMRT_PHASE_FORWARD) extra[n_extra++] = (uvmrt_use_t){i > 0 ? net->a[i - 1] : net->x, UVMRT_USE_READ};
    if (ph == UVMRT_PHASE_BACKWARD && i < net->L - 1) extra[n_extra++] = (uvmrt_use_t){net->g[i + 1], UVMRT_USE_READ};
    uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[i], .phase = ph, .stream = net->stream,
                               .uses = n_extra ? extra : NULL, .n_uses = n_extra,
                               .sim_duration_ns = net->spec.sim_ns};
    uvmrt_status_t st = uvmrt_layer_begin(net->ctx, &call);
    if (st != UVMRT_OK)
        return snprintf(why, n, "layer_begin(layer%d %s): %s", i, uvmrt_phase_name(ph), uvmrt_status_name(st)), -1;
    return invariants(net, i, ph, 0, why, n);
}

static int call_end(net_t *net, int k, char *why, size_t n)
{
    int i;
    uvmrt_phase_t ph;
    call_of(net, k, &i, &ph);
    uvmrt_status_t st = uvmrt_layer_end(net->ctx);
    if (st != UVMRT_OK)
        return snprintf(why, n, "layer_end(layer%d %s): %s", i, uvmrt_phase_name(ph), uvmrt_status_name(st)), -1;
    return invariants(net, i, ph, 1, why, n);
}

/* Calls from..3L-1 of a step already begun, then its end. */
static int step_rest(net_t *net, int from, char *why, size_t n)
{
    for (int k = from; k < net_calls_per_step(net); k++)
        if (call_begin(net, k, why, n) != 0 || call_end(net, k, why, n) != 0) return -1;
    uvmrt_status_t st = uvmrt_step_end(net->ctx);
    if (st != UVMRT_OK) return snprintf(why, n, "step_end: %s", uvmrt_status_name(st)), -1;
    return 0;
}

static int normal_steps(net_t *net, int steps, char *why, size_t n)
{
    for (int s = 0; s < steps; s++) {
        uvmrt_status_t st = uvmrt_step_begin(net->ctx);
        if (st != UVMRT_OK) return snprintf(why, n, "step_begin: %s", uvmrt_status_name(st)), -1;
        if (step_rest(net, 0, why, n) != 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the harness, in the case process */
/* A case could not prepare what its bad call needs: a failure of the sweep, not of the library. */
#define SETUP_FAIL(r, ...)                                                  \
    do {                                                                    \
        snprintf((r)->setup_what, sizeof (r)->setup_what, __VA_ARGS__);      \
        (r)->phase = PH_SETUP;                                              \
        _exit(3);                                                           \
    } while (0)

/* Snapshot and a clean log: what follows is the bad call. Cases that prepare
 * more than the fixture (free a tensor, open a step) call it again after. */
static void mark(fix_t *f)
{
    if (f->ctx) snap_take(f->ctx, &f->before);
    log_reset();
}

/* 1 when an error-level line contains one of needle's '|'-separated alternatives. */
static int needle_logged(const char *needle)
{
    const char *text = log_text();
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "error: ", 7) == 0) {
            char buf[1200];
            snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
            for (const char *alt = needle; *alt;) {
                const char *bar = strchr(alt, '|');
                size_t al = bar ? (size_t)(bar - alt) : strlen(alt);
                char want[256];
                snprintf(want, sizeof want, "%.*s", (int)al, alt);
                if (al > 0 && strcasestr(buf, want) != NULL) return 1;
                alt += al;
                if (*alt == '|') alt++;
            }
        }
        line += len;
        if (*line == '\n') line++;
    }
    return 0;
}

/* s with bytes outside printable ASCII as \xNN, so that the log stays text */
static void printable(const char *s, size_t len, char *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < len && s[i] && k + 5 < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f) out[k++] = (char)ch;
        else k += (size_t)snprintf(out + k, n - k, "\\x%02x", ch);
    }
    out[k] = '\0';
}

static void error_lines(char *out, size_t n)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *line = log_text(); *line && len + 1 < n;) {
        const char *nl = strchr(line, '\n');
        size_t l = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "error: ", 7) == 0) {
            char text[1200];
            printable(line + 7, l - 7, text, sizeof text);
            len += (size_t)snprintf(out + len, n - len, "%s%s", len ? " | " : "", text);
        }
        line += l;
        if (*line == '\n') line++;
    }
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int fixture_make(fix_t *f, fixture_kind_t kind, result_t *r)
{
    f->kind = kind;
    if (kind == FIX_NONE) return 0;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    uvmrt_status_t st = uvmrt_context_create(&p, &f->ctx);
    if (st != UVMRT_OK) return snprintf(r->setup_what, sizeof r->setup_what, "context_create: %s", uvmrt_status_name(st)), -1;
    net_spec_t spec = net_spec_default();
    f->net = net_create(f->ctx, &spec);
    if (normal_steps(f->net, 2, r->setup_what, sizeof r->setup_what) != 0) return -1;
    if (kind >= FIX_STEP) {
        if ((st = uvmrt_step_begin(f->ctx)) != UVMRT_OK)
            return snprintf(r->setup_what, sizeof r->setup_what, "step_begin: %s", uvmrt_status_name(st)), -1;
        f->in_step = 1;
    }
    if (kind == FIX_LAYER) {
        if (call_begin(f->net, 0, r->setup_what, sizeof r->setup_what) != 0) return -1;
        f->open = 1;
        f->resume = 1;
    }
    return 0;
}

static void run_case(const mcase_t *c, result_t *r)
{
    fix_t f;
    memset(&f, 0, sizeof f);
    signal(SIGALRM, SIG_DFL); /* a hang ends the process, and is counted */
    alarm(CASE_TIMEOUT_S);
    /* its own folder as cwd: report cases write there, and nothing lands in the build tree */
    const char *tmp = getenv("TMPDIR");
    snprintf(f.dir, sizeof f.dir, "%s/uvmrt-misuse-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(f.dir) == NULL || chdir(f.dir) != 0) {
        snprintf(r->setup_what, sizeof r->setup_what, "mkdtemp/chdir %.200s: %s", f.dir, strerror(errno));
        return;
    }
    snprintf(r->dir, sizeof r->dir, "%s", f.dir);
    env_clear_uvmrt();
    r->phase = PH_SETUP;
    if (fixture_make(&f, c->fix, r) != 0) return;
    mark(&f);
    r->phase = PH_CALL;
    uvmrt_status_t st = c->run(&f, c, r);
    r->phase = PH_CHECK;
    r->status = st;
    r->logged = c->needle != NULL && needle_logged(c->needle);
    error_lines(r->errors, sizeof r->errors);
    if (f.ctx) {
        if (st != UVMRT_OK) {
            snap_t after;
            snap_take(f.ctx, &after);
            snap_diff(&f.before, &after, r->changed_what, sizeof r->changed_what);
            r->changed = r->changed_what[0] != '\0';
        }
        r->phase = PH_AFTER;
        /* finish the step the fixture (or the case) left open, then two normal steps */
        uvmrt_summary_t s0 = UVMRT_STRUCT_INIT(uvmrt_summary_t), s1 = s0;
        uvmrt_summary_get(f.ctx, &s0);
        char *why = r->after_what;
        size_t wn = sizeof r->after_what;
        int bad = 0;
        if (f.in_step) {
            if (f.open) bad = call_end(f.net, f.resume - 1, why, wn) != 0;
            if (!bad) bad = step_rest(f.net, f.resume, why, wn) != 0;
        }
        if (!bad) bad = normal_steps(f.net, 2, why, wn) != 0;
        if (!bad) {
            uvmrt_summary_get(f.ctx, &s1);
            uint64_t want = s0.steps + (uint64_t)f.in_step + 2;
            if (s1.steps != want)
                bad = 1, snprintf(why, wn, "steps %llu after the normal steps, expected %llu",
                                  (unsigned long long)s1.steps, (unsigned long long)want);
        }
        r->after_failed = bad;
        net_free(f.net);
        uvmrt_context_destroy(f.ctx);
    }
    uvmrt_context_destroy(f.ctx2);
    if (chdir("/") == 0) rm_tree(f.dir);
    r->phase = PH_DONE;
}

/* ------------------------------------------------------------------ cases: parsers */
#define SENTINEL 0x5a5a5a5a5a5a5a5aull

static uvmrt_status_t c_size_parse(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    uint64_t v = SENTINEL;
    uvmrt_status_t st = uvmrt_size_parse(c->a, c->n ? NULL : &v);
    if (st != UVMRT_OK && v != SENTINEL) snprintf(r->wrong, sizeof r->wrong, "failed but wrote %llu", (unsigned long long)v);
    return st;
}

static uvmrt_status_t c_policy_parse(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    uvmrt_policy_t v = (uvmrt_policy_t)77;
    uvmrt_status_t st = uvmrt_policy_parse(c->a, c->n ? NULL : &v);
    if (st != UVMRT_OK && (int)v != 77) snprintf(r->wrong, sizeof r->wrong, "failed but wrote %d", (int)v);
    return st;
}

static uvmrt_status_t c_backend_parse(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    uvmrt_backend_kind_t v = (uvmrt_backend_kind_t)77;
    uvmrt_status_t st = uvmrt_backend_parse(c->a, c->n ? NULL : &v);
    if (st != UVMRT_OK && (int)v != 77) snprintf(r->wrong, sizeof r->wrong, "failed but wrote %d", (int)v);
    return st;
}

/* ------------------------------------------------------------------ cases: context creation */
/* b, then n copies of 'a' (long values) */
static char *long_text(const char *b, long long n)
{
    size_t lb = b ? strlen(b) : 0;
    char *s = malloc(lb + (size_t)n + 1);
    if (s == NULL) return NULL;
    if (lb) memcpy(s, b, lb);
    memset(s + lb, 'a', (size_t)n);
    s[lb + (size_t)n] = '\0';
    return s;
}

/* Creates with p; a context that was made anyway is destroyed (the call "succeeded"). */
static uvmrt_status_t create_checked(const uvmrt_params_t *p, result_t *r)
{
    uvmrt_context_t *ctx = (uvmrt_context_t *)(uintptr_t)0x1; /* must come back NULL on failure */
    uvmrt_status_t st = uvmrt_context_create(p, &ctx);
    if (st != UVMRT_OK && ctx != NULL)
        snprintf(r->wrong, sizeof r->wrong, "failed with *out = %p, expected NULL", (void *)ctx);
    if (st == UVMRT_OK) uvmrt_context_destroy(ctx);
    return st;
}

/* params.<a> = n (or b, for the string fields) */
static uvmrt_status_t c_params(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    char *text = c->n > 0 && c->b ? long_text(c->b, c->n) : NULL;
    const char *s = text ? text : c->b;
    const char *a = c->a;
    if (strcmp(a, "struct_size") == 0) p.struct_size = (size_t)c->n;
    else if (strcmp(a, "device") == 0) p.device = (int)c->n;
    else if (strcmp(a, "backend") == 0) p.backend = (uvmrt_backend_kind_t)c->n;
    else if (strcmp(a, "policy") == 0) p.policy = (uvmrt_policy_t)c->n;
    else if (strcmp(a, "log_level") == 0) p.log_level = (uvmrt_log_level_t)c->n;
    else if (strcmp(a, "discard_dead") == 0) p.discard_dead = (int)c->n;
    else if (strcmp(a, "remote") == 0) p.remote = (int)c->n;
    else if (strcmp(a, "fault_stats") == 0) p.fault_stats = (int)c->n;
    else if (strcmp(a, "fault_sample_every") == 0) p.fault_sample_every = (int)c->n;
    else if (strcmp(a, "profile") == 0) p.profile = s;
    else if (strcmp(a, "report") == 0) p.report = s;
    else if (strcmp(a, "trace") == 0) p.trace = s;
    else if (strcmp(a, "spill_dir") == 0) p.spill_dir = s;
    else if (strcmp(a, "budget_reserve_bytes") == 0) p.budget_bytes = 0, p.budget_reserve_bytes = c->u;
    else if (strcmp(a, "host_budget_bytes") == 0) p.host_budget_bytes = c->u;
    uvmrt_status_t st = create_checked(&p, r);
    free(text);
    return st;
}

static uvmrt_status_t c_create_null_out(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f, (void)c, (void)r;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    return uvmrt_context_create(&p, NULL);
}

/* backend cuda asked for explicitly: OK where a GPU is usable, else an error
 * that says how to get sim (issue 8, item 6) */
static uvmrt_status_t c_create_cuda(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f, (void)c;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.backend = UVMRT_BACKEND_CUDA;
    return create_checked(&p, r);
}

/* UVMRT_<a>=b (b followed by n 'a's when n > 0) over otherwise valid params */
static uvmrt_status_t c_env(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    char *text = c->n > 0 ? long_text(c->b, c->n) : NULL;
    setenv(c->a, text ? text : c->b, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL); /* budget auto: the reserve counts */
    p.ignore_env = 0;
    uvmrt_status_t st = create_checked(&p, r);
    free(text);
    return st;
}

/* "-" must mean the same in UVMRT_REPORT / UVMRT_TRACE or params.report / .trace (a, b =
 * its value, "text:-" or "-") as in uvmrt_report_write (format in n: 0 text, 1
 * trace): stdout in both, or a file named "-" in both (or the variable refused). */
static uvmrt_status_t c_env_dash(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    if (strcmp(c->a, "params.report") == 0) p.report = c->b;
    else if (strcmp(c->a, "params.trace") == 0) p.trace = c->b;
    else setenv(c->a, c->b, 1), p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    if (st != UVMRT_OK) return st;
    fflush(stdout);
    int saved = dup(1), devnull = open("/dev/null", O_WRONLY); /* reports to stdout are not the test's output */
    if (saved < 0 || devnull < 0 || dup2(devnull, 1) < 0) SETUP_FAIL(r, "redirecting stdout: %s", strerror(errno));
    uvmrt_status_t wst = uvmrt_report_write(ctx, c->n ? "trace" : "text", "-");
    int file_by_call = access("-", F_OK) == 0;
    unlink("-");
    uvmrt_context_destroy(ctx);
    int file_by_env = access("-", F_OK) == 0;
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(devnull);
    if (wst != UVMRT_OK) snprintf(r->wrong, sizeof r->wrong, "report_write(\"-\") failed: %s", uvmrt_status_name(wst));
    else if (file_by_call != file_by_env)
        snprintf(r->wrong, sizeof r->wrong, "\"-\" is %s for uvmrt_report_write but %s for %s=%s",
                 file_by_call ? "a file" : "stdout", file_by_env ? "a file" : "stdout", c->a, c->b);
    return st;
}

/* ------------------------------------------------------------------ cases: NULL context */
static uvmrt_status_t c_null_ctx(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    const char *a = c->a;
    uvmrt_tensor_t *t = f->net->w[0], *tout = NULL;
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, 4096};
    uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = 0, .phase = UVMRT_PHASE_FORWARD};
    int l = 0;
    uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    if (strcmp(a, "step_begin") == 0) return uvmrt_step_begin(NULL);
    if (strcmp(a, "step_end") == 0) return uvmrt_step_end(NULL);
    if (strcmp(a, "layer_begin") == 0) return uvmrt_layer_begin(NULL, &call);
    if (strcmp(a, "layer_end") == 0) return uvmrt_layer_end(NULL);
    if (strcmp(a, "layer_add") == 0) return uvmrt_layer_add(NULL, "x", &l);
    if (strcmp(a, "tensors_alloc") == 0) return uvmrt_tensors_alloc(NULL, 1, &d, &tout);
    if (strcmp(a, "tensor_alloc") == 0) return uvmrt_tensor_alloc(NULL, &d, &tout);
    if (strcmp(a, "tensor_free") == 0) return uvmrt_tensor_free(NULL, t);
    if (strcmp(a, "set_placement") == 0) return uvmrt_tensor_set_placement(NULL, t, UVMRT_PLACE_HOST);
    if (strcmp(a, "layer_stats_get") == 0) return uvmrt_layer_stats_get(NULL, 0, UVMRT_PHASE_FORWARD, &ls);
    if (strcmp(a, "step_stats_get") == 0) return uvmrt_step_stats_get(NULL, 0, &ss);
    if (strcmp(a, "summary_get") == 0) return uvmrt_summary_get(NULL, &sum);
    if (strcmp(a, "report_write") == 0) return uvmrt_report_write(NULL, "text", "r.txt");
    if (strcmp(a, "set_host_external_bytes") == 0) return uvmrt_context_set_host_external_bytes(NULL, 1);
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ cases: layers */
static uvmrt_status_t c_layer_add(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    int l = -7;
    return uvmrt_layer_add(f->ctx, c->n == 1 ? NULL : "extra", c->n == 2 ? NULL : &l);
}

/* A layer whose name is not valid UTF-8 (a) must not vanish from the JSON (b =
 * "json") or trace (b = "trace") report: accepted and escaped, or refused. */
static uvmrt_status_t c_layer_name_report(fix_t *f, const mcase_t *c, result_t *r)
{
    int l = -1;
    uvmrt_status_t st = uvmrt_layer_add(f->ctx, c->a, &l);
    if (st != UVMRT_OK) return st;
    int is_trace = strcmp(c->b, "trace") == 0;
    if (is_trace) { /* a call of that layer, so that the trace has a span named after it */
        char why[256];
        uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD, .sim_duration_ns = 1000};
        if (uvmrt_step_begin(f->ctx) != UVMRT_OK || uvmrt_layer_begin(f->ctx, &call) != UVMRT_OK ||
            uvmrt_layer_end(f->ctx) != UVMRT_OK || step_rest(f->net, 0, why, sizeof why) != 0) {
            snprintf(r->wrong, sizeof r->wrong, "a step with the new layer failed: %s", log_text());
            return UVMRT_OK;
        }
    }
    st = uvmrt_report_write(f->ctx, c->b, "r.json");
    if (st != UVMRT_OK) {
        snprintf(r->wrong, sizeof r->wrong, "layer_add took the name, then report_write %s failed: %s", c->b,
                 uvmrt_status_name(st));
        return UVMRT_OK;
    }
    json_error_t err;
    json_t *root = json_load_file("r.json", 0, &err);
    if (root == NULL) {
        snprintf(r->wrong, sizeof r->wrong, "the %s report does not parse: %s", c->b, err.text);
        return UVMRT_OK;
    }
    json_t *arr = json_object_get(root, is_trace ? "traceEvents" : "layers");
    size_t i;
    json_t *e;
    int found = 0;
    char prefix[8], shown[40];
    snprintf(prefix, sizeof prefix, "%.3s", c->a); /* the name's first bytes */
    printable(prefix, strlen(prefix), shown, sizeof shown);
    json_array_foreach(arr, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        found |= name != NULL && strncmp(name, prefix, strlen(prefix)) == 0;
    }
    if (!found) snprintf(r->wrong, sizeof r->wrong, "layer '%s...' accepted but missing from the %s report", shown, c->b);
    json_decref(root);
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ cases: tensors */
static uvmrt_status_t c_tensor_alloc(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    uvmrt_tensor_desc_t d = {"bad", (int)c->n, (uvmrt_role_t)c->k, (size_t)c->u};
    uvmrt_tensor_t *t = NULL;
    return uvmrt_tensor_alloc(f->ctx, &d, &t);
}

/* a: "n0", "descs", "out", "desc", "tout", "two_half_max", "second_bad" */
static uvmrt_status_t c_tensors_alloc(fix_t *f, const mcase_t *c, result_t *r)
{
    uvmrt_tensor_desc_t d[2] = {{"t0", -1, UVMRT_ROLE_WEIGHT, 4096}, {"t1", -1, UVMRT_ROLE_WEIGHT, 4096}};
    uvmrt_tensor_t *out[2] = {(uvmrt_tensor_t *)(uintptr_t)0x11, (uvmrt_tensor_t *)(uintptr_t)0x22};
    uvmrt_status_t st;
    const char *a = c->a;
    if (strcmp(a, "n0") == 0) return uvmrt_tensors_alloc(f->ctx, 0, d, out);
    if (strcmp(a, "descs") == 0) return uvmrt_tensors_alloc(f->ctx, 1, NULL, out);
    if (strcmp(a, "out") == 0) return uvmrt_tensors_alloc(f->ctx, 1, d, NULL);
    if (strcmp(a, "desc") == 0) return uvmrt_tensor_alloc(f->ctx, NULL, out);
    if (strcmp(a, "tout") == 0) return uvmrt_tensor_alloc(f->ctx, d, NULL);
    if (strcmp(a, "two_half_max") == 0) d[0].size_bytes = d[1].size_bytes = SIZE_MAX / 2 + 1;
    if (strcmp(a, "second_bad") == 0) d[1].size_bytes = 0;
    st = uvmrt_tensors_alloc(f->ctx, 2, d, out);
    if (st != UVMRT_OK && (out[0] != (uvmrt_tensor_t *)(uintptr_t)0x11 || out[1] != (uvmrt_tensor_t *)(uintptr_t)0x22))
        snprintf(r->wrong, sizeof r->wrong, "failed but wrote out[]");
    return st;
}

static uvmrt_status_t c_tensors_alloc_in_step(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)c, (void)r;
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, 4096};
    uvmrt_tensor_t *t = NULL;
    return uvmrt_tensors_alloc(f->ctx, 1, &d, &t);
}

/* A tensor of a second context (made here; the harness destroys it). */
static uvmrt_tensor_t *foreign_tensor(fix_t *f)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    if (uvmrt_context_create(&p, &f->ctx2) != UVMRT_OK) return NULL;
    uvmrt_tensor_desc_t d = {"foreign", -1, UVMRT_ROLE_WEIGHT, 2 * MIB};
    uvmrt_tensor_t *t = NULL;
    if (uvmrt_tensor_alloc(f->ctx2, &d, &t) != UVMRT_OK) return NULL;
    return t;
}

/* A tensor of a second context that was destroyed since: its struct is freed
 * memory, which the call must not read (ASan reports it as a heap use-after-free). */
static uvmrt_tensor_t *destroyed_tensor(fix_t *f)
{
    uvmrt_tensor_t *t = foreign_tensor(f);
    uvmrt_context_destroy(f->ctx2);
    f->ctx2 = NULL;
    return t;
}

/* A tensor allocated and freed (between steps; the fixture is idle). */
static uvmrt_tensor_t *freed_tensor(fix_t *f)
{
    uvmrt_tensor_desc_t d = {"freed", -1, UVMRT_ROLE_WEIGHT, 2 * MIB};
    uvmrt_tensor_t *t = NULL;
    if (uvmrt_tensor_alloc(f->ctx, &d, &t) != UVMRT_OK || uvmrt_tensor_free(f->ctx, t) != UVMRT_OK) return NULL;
    return t;
}

/* Zeroed memory, or a byte copy of a live tensor, posing as a tensor. */
static void *fake_tensor(fix_t *f, int copy)
{
    static _Alignas(max_align_t) unsigned char mem[4096];
    memset(mem, 0, sizeof mem);
    if (copy) memcpy(mem, f->net->w[0], sizeof(struct uvmrt_tensor));
    return mem;
}

/* a: which tensor: "freed", "foreign", "destroyed", "zeroed", "copy", "w0" */
static uvmrt_tensor_t *pick_tensor(fix_t *f, const char *a)
{
    if (strcmp(a, "freed") == 0) return freed_tensor(f);
    if (strcmp(a, "foreign") == 0) return foreign_tensor(f);
    if (strcmp(a, "destroyed") == 0) return destroyed_tensor(f);
    if (strcmp(a, "zeroed") == 0) return fake_tensor(f, 0);
    if (strcmp(a, "copy") == 0) return fake_tensor(f, 1);
    if (strcmp(a, "null") == 0) return NULL;
    return f->net->w[0];
}

static uvmrt_status_t c_tensor_free(fix_t *f, const mcase_t *c, result_t *r)
{
    uvmrt_tensor_t *t = pick_tensor(f, c->a);
    if (t == NULL && strcmp(c->a, "null") != 0) SETUP_FAIL(r, "preparing the %s tensor failed", c->a);
    mark(f);
    return uvmrt_tensor_free(f->ctx, t);
}

/* uvmrt_context_set_host_external_bytes(ctx, c->u) */
static uvmrt_status_t c_host_external(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    return uvmrt_context_set_host_external_bytes(f->ctx, c->u);
}

static uvmrt_status_t c_set_placement(fix_t *f, const mcase_t *c, result_t *r)
{
    uvmrt_tensor_t *t = pick_tensor(f, c->a);
    if (t == NULL && strcmp(c->a, "null") != 0) SETUP_FAIL(r, "preparing the %s tensor failed", c->a);
    mark(f);
    return uvmrt_tensor_set_placement(f->ctx, t, (uvmrt_placement_t)c->n);
}

/* ------------------------------------------------------------------ cases: steps and layer calls */
/* a: "step_begin", "step_end", "layer_end", "layer_begin_open", "layer_begin_outside", "layer_end_twice" */
static uvmrt_status_t c_state(fix_t *f, const mcase_t *c, result_t *r)
{
    const char *a = c->a;
    if (strcmp(a, "step_begin") == 0) return uvmrt_step_begin(f->ctx);
    if (strcmp(a, "step_end") == 0) return uvmrt_step_end(f->ctx);
    if (strcmp(a, "layer_end") == 0) return uvmrt_layer_end(f->ctx);
    if (strcmp(a, "layer_end_twice") == 0) {
        char why[256];
        if (call_end(f->net, 0, why, sizeof why) != 0) SETUP_FAIL(r, "%s", why);
        f->open = 0;
        mark(f);
        return uvmrt_layer_end(f->ctx);
    }
    /* layer1 forward, as the net makes it */
    uvmrt_use_t in = {f->net->a[0], UVMRT_USE_READ};
    uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = f->net->layer[1], .phase = UVMRT_PHASE_FORWARD, .uses = &in, .n_uses = 1,
                               .sim_duration_ns = 1000};
    return uvmrt_layer_begin(f->ctx, &call);
}

/* layer_begin inside a step with one thing wrong: a names it */
static uvmrt_status_t c_layer_begin(fix_t *f, const mcase_t *c, result_t *r)
{
    net_t *net = f->net;
    uvmrt_use_t uses[16];
    uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[0], .phase = UVMRT_PHASE_FORWARD, .uses = uses, .n_uses = 1,
                               .sim_duration_ns = 1000};
    uses[0] = (uvmrt_use_t){net->x, UVMRT_USE_READ};
    const char *a = c->a;
    if (strcmp(a, "null_call") == 0) return uvmrt_layer_begin(f->ctx, NULL);
    if (strcmp(a, "layer") == 0) call.layer = (int)c->n;
    if (strcmp(a, "phase") == 0) call.phase = (uvmrt_phase_t)c->n;
    if (strcmp(a, "uses_null") == 0) call.uses = NULL, call.n_uses = (size_t)c->n;
    if (strcmp(a, "access") == 0) uses[0].access = (unsigned)c->u;
    if (strcmp(a, "flops") == 0) call.sim_duration_ns = 0, call.flops = c->x;
    if (strcmp(a, "duration") == 0) call.sim_duration_ns = c->u;
    if (strcmp(a, "use_tensor") == 0 || strcmp(a, "use_second") == 0) {
        /* the freed and foreign tensors are made between steps (the fixture is idle), then the step begins */
        uvmrt_tensor_t *t = pick_tensor(f, c->b);
        if (t == NULL && strcmp(c->b, "null") != 0) SETUP_FAIL(r, "preparing the %s tensor failed", c->b);
        if (uvmrt_step_begin(f->ctx) != UVMRT_OK) SETUP_FAIL(r, "step_begin failed");
        f->in_step = 1;
        if (strcmp(a, "use_second") == 0) uses[1] = (uvmrt_use_t){t, UVMRT_USE_READ}, call.n_uses = 2;
        else uses[0].tensor = t;
        mark(f);
    }
    if (strcmp(a, "over_budget") == 0) { /* layer0's own tensors plus every other weight and state */
        size_t k = 0;
        for (int i = 1; i < net->L; i++) {
            uses[k++] = (uvmrt_use_t){net->w[i], UVMRT_USE_READ};
            uses[k++] = (uvmrt_use_t){net->o[i], UVMRT_USE_READ};
        }
        call.n_uses = k;
    }
    if (strcmp(a, "tensor_over_budget") == 0) { /* one tensor larger than the whole budget */
        uvmrt_tensor_desc_t d = {"big", -1, UVMRT_ROLE_WEIGHT, 32 * MIB};
        uvmrt_tensor_t *t = NULL;
        if (uvmrt_tensor_alloc(f->ctx, &d, &t) != UVMRT_OK || uvmrt_step_begin(f->ctx) != UVMRT_OK)
            SETUP_FAIL(r, "allocating a 32 MiB tensor and beginning a step failed");
        f->in_step = 1;
        uses[0].tensor = t;
        mark(f);
    }
    uvmrt_status_t st = uvmrt_layer_begin(f->ctx, &call);
    /* accepted: close the call, so that the steps afterwards test what the input did */
    if (st == UVMRT_OK && uvmrt_layer_end(f->ctx) != UVMRT_OK)
        snprintf(r->wrong, sizeof r->wrong, "accepted, then layer_end failed");
    return st;
}

/* The user goes on after a refused layer_begin (working set over the budget) and
 * closes the call that never opened. */
static uvmrt_status_t c_layer_end_after_failed_begin(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)c;
    net_t *net = f->net;
    uvmrt_use_t uses[16];
    size_t k = 0;
    for (int i = 1; i < net->L; i++) {
        uses[k++] = (uvmrt_use_t){net->w[i], UVMRT_USE_READ};
        uses[k++] = (uvmrt_use_t){net->o[i], UVMRT_USE_READ};
    }
    uvmrt_layer_call_t call = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[0], .phase = UVMRT_PHASE_FORWARD, .uses = uses, .n_uses = k,
                               .sim_duration_ns = 1000};
    if (uvmrt_layer_begin(f->ctx, &call) == UVMRT_OK) {
        uvmrt_layer_end(f->ctx);
        SETUP_FAIL(r, "a layer call over the budget was accepted (see layer_begin_working_set_over_budget)");
    }
    mark(f);
    return uvmrt_layer_end(f->ctx);
}

/* Destroying a context with a layer call open must not crash (a warning says the
 * step is not counted). */
static uvmrt_status_t c_destroy_in_call(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)c, (void)r;
    net_free(f->net);
    uvmrt_context_destroy(f->ctx);
    f->net = NULL;
    f->ctx = NULL; /* nothing left to check afterwards */
    return UVMRT_OK;
}

/* The tensor accessors on a freed tensor and on zeroed memory: no crash, and
 * the values of "no tensor". */
static uvmrt_status_t c_accessors(fix_t *f, const mcase_t *c, result_t *r)
{
    uvmrt_tensor_t *t = pick_tensor(f, c->a);
    if (t == NULL) SETUP_FAIL(r, "preparing the %s tensor failed", c->a);
    mark(f);
    if (uvmrt_tensor_ptr(t) != NULL || uvmrt_tensor_size(t) != 0 || uvmrt_tensor_is_resident(t) ||
        uvmrt_tensor_is_host_homed(t) || uvmrt_tensor_placement(t) != UVMRT_PLACE_AUTO)
        snprintf(r->wrong, sizeof r->wrong, "a %s tensor: ptr %p, size %zu, resident %d, host-homed %d, placement %d",
                 c->a, uvmrt_tensor_ptr(t), uvmrt_tensor_size(t), uvmrt_tensor_is_resident(t),
                 uvmrt_tensor_is_host_homed(t), (int)uvmrt_tensor_placement(t));
    (void)uvmrt_tensor_name(t);
    (void)uvmrt_tensor_layer(t);
    (void)uvmrt_tensor_role(t);
    return UVMRT_OK;
}

static uvmrt_status_t c_print_config(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)c, (void)r;
    uvmrt_context_print_config(f->ctx, NULL);
    uvmrt_context_print_config(NULL, stdout);
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ cases: statistics */
static uvmrt_status_t c_layer_stats(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    uvmrt_layer_stats_t s = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    return uvmrt_layer_stats_get(f->ctx, (int)c->n, (uvmrt_phase_t)c->k, c->a ? NULL : &s);
}

static uvmrt_status_t c_step_stats(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    uvmrt_step_stats_t s = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    return uvmrt_step_stats_get(f->ctx, c->u, c->a ? NULL : &s);
}

static uvmrt_status_t c_summary_null(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)c, (void)r;
    return uvmrt_summary_get(f->ctx, NULL);
}

/* A struct_size the library refuses (uvmrt.h, "structs that grow"): .a names the struct,
 * .n is the size given, -1 for the library's sizeof + 8 (a program of a newer header). */
static uvmrt_status_t c_struct_size(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    char type[48];
    snprintf(type, sizeof type, "uvmrt_%s_t", c->a);
    size_t lib = uvmrt_abi_struct_size(type), size = c->n < 0 ? lib + 8 : (size_t)c->n;
    union {
        size_t struct_size;
        uvmrt_layer_call_t call;
        unsigned char bytes[2048];
    } u;
    cr_assert_leq(lib + 8, sizeof u, "%s", type);
    memset(&u, 0, sizeof u);
    if (strcmp(c->a, "layer_call") == 0) uvmrt_layer_call_init(&u.call, 0, UVMRT_PHASE_FORWARD, NULL);
    u.struct_size = size;
    size_t n = 0;
    if (strcmp(c->a, "layer_call") == 0) return uvmrt_layer_begin(f->ctx, &u.call);
    if (strcmp(c->a, "summary") == 0) return uvmrt_summary_get(f->ctx, (uvmrt_summary_t *)(void *)&u);
    if (strcmp(c->a, "step_stats") == 0) return uvmrt_step_stats_get(f->ctx, 0, (uvmrt_step_stats_t *)(void *)&u);
    if (strcmp(c->a, "layer_stats") == 0)
        return uvmrt_layer_stats_get(f->ctx, 0, UVMRT_PHASE_FORWARD, (uvmrt_layer_stats_t *)(void *)&u);
    if (strcmp(c->a, "memory_stats") == 0)
        return uvmrt_memory_stats_get(f->ctx, (uvmrt_memory_stats_t *)(void *)&u);
    if (strcmp(c->a, "tensor_info") == 0)
        return uvmrt_memory_summary(f->ctx, (uvmrt_tensor_info_t *)(void *)&u, 1, &n);
    return UVMRT_OK;
}

/* ------------------------------------------------------------------ cases: reports */
static int is_kind(const char *path, mode_t kind)
{
    struct stat st;
    return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind;
}

static int file_is(const char *path, const char *text)
{
    char buf[64] = "";
    FILE *fp = fopen(path, "r");
    if (fp == NULL) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return strncmp(buf, text, strlen(text)) == 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

/* a: format (NULL allowed: n = 1), b: path */
static uvmrt_status_t c_report_format(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)r;
    return uvmrt_report_write(f->ctx, c->n ? NULL : c->a, c->b);
}

/* b: path; a: what to put there first: "dir", "fifo", "file", "long" */
static uvmrt_status_t c_report_path(fix_t *f, const mcase_t *c, result_t *r)
{
    const char *a = c->a ? c->a : "";
    char *path = NULL;
    if (strcmp(a, "dir") == 0 && mkdir(c->b, 0755) != 0) SETUP_FAIL(r, "preparing %s: %s", c->b, strerror(errno));
    if (strcmp(a, "fifo") == 0 && mkfifo(c->b, 0644) != 0) SETUP_FAIL(r, "preparing %s: %s", c->b, strerror(errno));
    if (strcmp(a, "file") == 0) write_file("target.txt", "keep");
    if (strcmp(a, "long") == 0) path = long_text(NULL, c->n);
    uvmrt_status_t st = uvmrt_report_write(f->ctx, "text", path ? path : c->b);
    if (strcmp(a, "fifo") == 0 && !is_kind(c->b, S_IFIFO))
        snprintf(r->wrong, sizeof r->wrong, "the FIFO '%s' was replaced", c->b);
    if (strcmp(a, "dir") == 0 && !is_kind(c->b, S_IFDIR))
        snprintf(r->wrong, sizeof r->wrong, "the folder '%s' was replaced", c->b);
    if (strcmp(a, "file") == 0 && !file_is("target.txt", "keep"))
        snprintf(r->wrong, sizeof r->wrong, "target.txt was changed");
    free(path);
    return st;
}

/* b: a symlink to target.txt (a = "existing": a regular file holding "keep"; else
 * dangling). Either written through the link (documented) or refused; never the
 * link replaced by a file. */
static uvmrt_status_t c_report_symlink(fix_t *f, const mcase_t *c, result_t *r)
{
    int existing = c->a && strcmp(c->a, "existing") == 0;
    if (existing) write_file("target.txt", "keep");
    if (symlink("target.txt", c->b) != 0) SETUP_FAIL(r, "symlink %s: %s", c->b, strerror(errno));
    uvmrt_status_t st = uvmrt_report_write(f->ctx, "text", c->b);
    if (!is_kind(c->b, S_IFLNK)) snprintf(r->wrong, sizeof r->wrong, "the link '%s' was replaced by a file", c->b);
    else if (st == UVMRT_OK && !file_is("target.txt", "uvmrt"))
        snprintf(r->wrong, sizeof r->wrong, "OK, but the link's target holds no report");
    else if (st != UVMRT_OK && existing && !file_is("target.txt", "keep"))
        snprintf(r->wrong, sizeof r->wrong, "refused, but the link's target was changed");
    else if (st != UVMRT_OK && !existing && access("target.txt", F_OK) == 0)
        snprintf(r->wrong, sizeof r->wrong, "refused, but the link's target was created");
    return st;
}

/* ------------------------------------------------------------------ cases: the context's output files */
/* UVMRT_<a>=b where b cannot be written (issue 21, item 4): the context is refused at
 * creation, naming the variable, instead of the run learning it at its end. a file
 * named "afile" is there first (for "afile/x": a file where a folder should be). */
static uvmrt_status_t c_env_output(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    write_file("afile", "keep");
    setenv(c->a, c->b, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_status_t st = create_checked(&p, r);
    if (!file_is("afile", "keep")) snprintf(r->wrong, sizeof r->wrong, "afile was changed");
    return st;
}

/* UVMRT_RECORD=rec, where a says what rec is first (issue 21, item 1): "fifo" (no
 * reader: an error at once, the FIFO kept), "link-file" (a link to target.txt: the
 * target replaced, the link kept), "link-dev" (a link to /dev/null: written in place,
 * the link kept). The record is written after the recording step; a write that failed
 * is returned as UVMRT_ERR_IO from the summary's output_errors. */
static uvmrt_status_t c_record_dest(fix_t *f, const mcase_t *c, result_t *r)
{
    (void)f;
    const char *a = c->a;
    if (strcmp(a, "fifo") == 0 && mkfifo("rec", 0644) != 0) SETUP_FAIL(r, "mkfifo rec: %s", strerror(errno));
    if (strcmp(a, "link-file") == 0) write_file("target.txt", "keep");
    if (strncmp(a, "link", 4) == 0 && symlink(strcmp(a, "link-dev") == 0 ? "/dev/null" : "target.txt", "rec") != 0)
        SETUP_FAIL(r, "symlink rec: %s", strerror(errno));
    setenv("UVMRT_RECORD", "rec", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    if (st != UVMRT_OK) return st;
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    char why[256] = "";
    if (normal_steps(net, 2, why, sizeof why) != 0) snprintf(r->wrong, sizeof r->wrong, "the steps failed: %.230s", why);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    memset(&sum, 0, sizeof sum);
    uvmrt_summary_get(ctx, &sum);
    net_free(net);
    uvmrt_context_destroy(ctx);
    if (r->wrong[0]) return UVMRT_OK;
    if (strcmp(a, "fifo") == 0 && !is_kind("rec", S_IFIFO))
        snprintf(r->wrong, sizeof r->wrong, "the FIFO 'rec' was replaced");
    else if (strncmp(a, "link", 4) == 0 && !is_kind("rec", S_IFLNK))
        snprintf(r->wrong, sizeof r->wrong, "the link 'rec' was replaced");
    else if (strcmp(a, "link-file") == 0 && !file_is("target.txt", "{"))
        snprintf(r->wrong, sizeof r->wrong, "the link's target holds no record");
    else if (strcmp(a, "link-dev") == 0 && !is_kind("/dev/null", S_IFCHR))
        snprintf(r->wrong, sizeof r->wrong, "/dev/null is no longer a character device");
    return sum.output_errors > 0 ? UVMRT_ERR_IO : UVMRT_OK;
}

/* ------------------------------------------------------------------ the table */
#define P(name_, fn, text, ...) {.name = name_, .run = fn, .fix = FIX_NONE, .a = text, .expect = UVMRT_ERR_INVALID, __VA_ARGS__}
/* params: INVALID today; CONFIG (as for the environment) would be as right */
#define PARAM(name_, field, value, needle_, ...) \
    {.name = name_, .run = c_params, .a = field, .n = value, .expect = EXPECT_ANY_ERROR, .needle = needle_, __VA_ARGS__}
#define PARAMS(name_, field, text, needle_, ...) \
    {.name = name_, .run = c_params, .a = field, .b = text, .expect = EXPECT_ANY_ERROR, .needle = needle_, __VA_ARGS__}
#define ENV(name_, var, value, ...) \
    {.name = name_, .run = c_env, .a = var, .b = value, .expect = UVMRT_ERR_CONFIG, .needle = var, __VA_ARGS__}
#define NULLCTX(fn_) {.name = "null_ctx_" fn_, .run = c_null_ctx, .fix = FIX_IDLE, .a = fn_, .expect = UVMRT_ERR_INVALID}
#define LB(name_, what, ...) \
    {.name = "layer_begin_" name_, .run = c_layer_begin, .fix = FIX_STEP, .a = what, .expect = UVMRT_ERR_INVALID, __VA_ARGS__}

/* 16 x U+00E9 (2 bytes each): long names that a fixed-size buffer cuts mid-character */
#define E16 "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9" \
            "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
/* The macros give defaults that a case may override (a later designated initialiser wins). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
static const mcase_t cases[] = {
    /* ---- parsers: no context, the status (and an untouched out) is the contract */
    P("size_parse_null_text", c_size_parse, NULL),
    P("size_parse_null_out", c_size_parse, "8G", .n = 1),
    P("size_parse_empty", c_size_parse, ""),
    P("size_parse_junk", c_size_parse, "junk"),
    P("size_parse_negative", c_size_parse, "-1"),
    P("size_parse_plus_sign", c_size_parse, "+8G"),
    P("size_parse_leading_space", c_size_parse, " 8G"),
    P("size_parse_trailing_space", c_size_parse, "8G "),
    P("size_parse_inner_space", c_size_parse, "8 G"),
    P("size_parse_wrong_suffix", c_size_parse, "8X"),
    P("size_parse_double_suffix", c_size_parse, "8KK"),
    P("size_parse_suffix_only", c_size_parse, "G"),
    P("size_parse_ib_without_unit", c_size_parse, "8iB"),
    P("size_parse_suffix_junk", c_size_parse, "8GiBx"),
    P("size_parse_fraction", c_size_parse, "1.5G"),
    P("size_parse_hex", c_size_parse, "0x10"),
    P("size_parse_overflow_digits", c_size_parse, "18446744073709551616"),
    P("size_parse_overflow_suffix", c_size_parse, "16777216T"),
    P("policy_parse_null_text", c_policy_parse, NULL),
    P("policy_parse_null_out", c_policy_parse, "prefetch", .n = 1),
    P("policy_parse_empty", c_policy_parse, ""),
    P("policy_parse_upper_case", c_policy_parse, "Prefetch"),
    P("policy_parse_trailing_space", c_policy_parse, "prefetch "),
    P("policy_parse_unknown", c_policy_parse, "lru"),
    P("backend_parse_null_text", c_backend_parse, NULL),
    P("backend_parse_null_out", c_backend_parse, "sim", .n = 1),
    P("backend_parse_empty", c_backend_parse, ""),
    P("backend_parse_unknown", c_backend_parse, "gpu"),
    P("backend_parse_upper_case", c_backend_parse, "SIM"),

    /* ---- params fields: creation fails, *out NULL, the field named */
    PARAM("params_struct_size_zero", "struct_size", 0, "struct_size"),
    PARAM("params_struct_size_larger", "struct_size", (long long)sizeof(uvmrt_params_t) + 8, "struct_size"),
    PARAM("params_struct_size_smaller", "struct_size", (long long)sizeof(size_t) - 1, "struct_size"),
    PARAM("params_device_negative", "device", -1, "device"),
    PARAM("params_device_too_big", "device", 1024, "device"),
    PARAM("params_backend_unknown", "backend", 7, "backend"),
    PARAM("params_backend_negative", "backend", -1, "backend"),
    PARAM("params_policy_unknown", "policy", 3, "policy"),
    PARAM("params_policy_negative", "policy", -1, "policy"),
    PARAM("params_log_level_unknown", "log_level", 9, "log_level"),
    PARAM("params_log_level_negative", "log_level", -1, "log_level"),
    PARAM("params_discard_dead_2", "discard_dead", 2, "discard_dead"),
    PARAM("params_remote_negative", "remote", -1, "remote"),
    PARAM("params_fault_stats_7", "fault_stats", 7, "fault_stats"),
    PARAM("params_fault_sample_negative", "fault_sample_every", -1, "fault_sample_every"),
    PARAM("params_fault_sample_too_big", "fault_sample_every", 1000001, "fault_sample_every"),
    PARAMS("params_profile_unknown", "profile", "nope", "profile"),
    PARAMS("params_profile_empty", "profile", "", "profile"),
    PARAMS("params_profile_too_long", "profile", "h200", "profile", .n = 300),
    PARAMS("params_report_unknown_format", "report", "xml:/tmp/x", "report"),
    PARAMS("params_report_no_path", "report", "json:", "report"),
    PARAMS("params_report_empty", "report", "", "report"),
    PARAMS("params_report_too_long", "report", "json:", "report", .n = 5000),
    PARAMS("params_spill_dir_dash", "spill_dir", "-", "spill_dir"),
    PARAMS("params_spill_dir_empty", "spill_dir", "", "spill_dir"),
    PARAMS("params_spill_dir_too_long", "spill_dir", "/tmp/", "spill_dir", .n = 5000),
    PARAMS("params_trace_empty", "trace", "", "trace"),
    PARAMS("params_trace_blank", "trace", " ", "trace"),
    PARAMS("params_trace_too_long", "trace", "t", "trace", .n = 5000),
    {.name = "params_budget_reserve_all", .run = c_params, .a = "budget_reserve_bytes", .u = UINT64_MAX,
     .expect = EXPECT_ANY_ERROR, .needle = "reserve"},
    {.name = "create_null_out", .run = c_create_null_out, .expect = UVMRT_ERR_INVALID, .needle = "out"},
    {.name = "create_cuda_without_gpu", .run = c_create_cuda, .expect = EXPECT_EITHER, .needle = "sim"},

    /* ---- UVMRT_* environment variables: creation fails with CONFIG, the variable named */
    ENV("env_log_level_junk", "UVMRT_LOG_LEVEL", "loud"),
    ENV("env_log_level_empty", "UVMRT_LOG_LEVEL", ""),
    ENV("env_log_level_upper_case", "UVMRT_LOG_LEVEL", "WARN"),
    ENV("env_backend_junk", "UVMRT_BACKEND", "gpu"),
    ENV("env_backend_empty", "UVMRT_BACKEND", ""),
    ENV("env_backend_trailing_space", "UVMRT_BACKEND", "sim "),
    ENV("env_device_junk", "UVMRT_DEVICE", "abc"),
    ENV("env_device_empty", "UVMRT_DEVICE", ""),
    ENV("env_device_negative", "UVMRT_DEVICE", "-1"),
    ENV("env_device_out_of_range", "UVMRT_DEVICE", "1024"),
    ENV("env_device_overflow", "UVMRT_DEVICE", "99999999999999999999"),
    ENV("env_device_exponent", "UVMRT_DEVICE", "1e3"),
    ENV("env_device_hex", "UVMRT_DEVICE", "0x1"),
    ENV("env_profile_unknown", "UVMRT_PROFILE", "nope"),
    ENV("env_profile_empty", "UVMRT_PROFILE", ""),
    ENV("env_profile_upper_case", "UVMRT_PROFILE", "H200"),
    ENV("env_profile_too_long", "UVMRT_PROFILE", "h200", .n = 300),
    ENV("env_policy_junk", "UVMRT_POLICY", "fast"),
    ENV("env_policy_empty", "UVMRT_POLICY", ""),
    ENV("env_policy_upper_case", "UVMRT_POLICY", "PREFETCH"),
    ENV("env_policy_newline", "UVMRT_POLICY", "prefetch\n"),
    ENV("env_budget_junk", "UVMRT_BUDGET", "junk"),
    ENV("env_budget_empty", "UVMRT_BUDGET", ""),
    ENV("env_budget_negative", "UVMRT_BUDGET", "-1"),
    ENV("env_budget_zero", "UVMRT_BUDGET", "0"),
    ENV("env_budget_wrong_suffix", "UVMRT_BUDGET", "8X"),
    ENV("env_budget_fraction", "UVMRT_BUDGET", "1.5G"),
    ENV("env_budget_inner_space", "UVMRT_BUDGET", "8 G"),
    ENV("env_budget_overflow_digits", "UVMRT_BUDGET", "99999999999999999999"),
    ENV("env_budget_overflow_suffix", "UVMRT_BUDGET", "16777216T"),
    ENV("env_reserve_junk", "UVMRT_BUDGET_RESERVE", "junk"),
    ENV("env_reserve_empty", "UVMRT_BUDGET_RESERVE", ""),
    ENV("env_reserve_negative", "UVMRT_BUDGET_RESERVE", "-512M"),
    ENV("env_reserve_wrong_suffix", "UVMRT_BUDGET_RESERVE", "512X"),
    ENV("env_reserve_overflow", "UVMRT_BUDGET_RESERVE", "99999999999999999999"),
    ENV("env_reserve_above_memory", "UVMRT_BUDGET_RESERVE", "1T"),
    ENV("env_discard_junk", "UVMRT_DISCARD", "yes"),
    ENV("env_discard_empty", "UVMRT_DISCARD", ""),
    ENV("env_discard_2", "UVMRT_DISCARD", "2"),
    ENV("env_discard_word", "UVMRT_DISCARD", "true"),
    ENV("env_remote_junk", "UVMRT_REMOTE", "no"),
    ENV("env_remote_empty", "UVMRT_REMOTE", ""),
    ENV("env_remote_10", "UVMRT_REMOTE", "10"),
    ENV("env_report_unknown_format", "UVMRT_REPORT", "xml:/tmp/x"),
    ENV("env_report_no_path", "UVMRT_REPORT", "json:"),
    ENV("env_report_empty", "UVMRT_REPORT", ""),
    ENV("env_report_format_only", "UVMRT_REPORT", "text"),
    ENV("env_report_stdout_word", "UVMRT_REPORT", "stdout"),
    ENV("env_report_too_long", "UVMRT_REPORT", "json:", .n = 5000),
    ENV("env_trace_empty", "UVMRT_TRACE", ""),
    ENV("env_trace_blank", "UVMRT_TRACE", " "),
    ENV("env_trace_auto", "UVMRT_TRACE", "auto"),
    ENV("env_trace_too_long", "UVMRT_TRACE", "t", .n = 5000),
    /* ---- output files (issue 21): refused at creation, or written by the report rules */
#define ENVOUT(name_, var, value) {.name = name_, .run = c_env_output, .a = var, .b = value, \
                                   .expect = UVMRT_ERR_CONFIG, .needle = var}
    ENVOUT("env_record_missing_folder", "UVMRT_RECORD", "nodir/r.json"),
    ENVOUT("env_record_file_as_folder", "UVMRT_RECORD", "afile/r.json"),
    ENVOUT("env_record_proc", "UVMRT_RECORD", "/proc/uvmrt-r.json"),
    ENVOUT("env_record_directory", "UVMRT_RECORD", "."),
    ENVOUT("env_report_missing_folder", "UVMRT_REPORT", "json:nodir/r.json"),
    ENVOUT("env_report_file_as_folder", "UVMRT_REPORT", "text:afile/r.txt"),
    ENVOUT("env_trace_missing_folder", "UVMRT_TRACE", "nodir/t.json"),
    ENVOUT("env_trace_proc", "UVMRT_TRACE", "/proc/uvmrt-t.json"),
    {.name = "record_to_fifo_without_reader", .run = c_record_dest, .a = "fifo", .expect = UVMRT_ERR_IO,
     .needle = "UVMRT_RECORD"},
    {.name = "record_through_link_to_file", .run = c_record_dest, .a = "link-file", .expect = UVMRT_OK},
    {.name = "record_through_link_to_device", .run = c_record_dest, .a = "link-dev", .expect = UVMRT_OK},
    {.name = "env_report_dash_means_stdout", .run = c_env_dash, .a = "UVMRT_REPORT", .b = "text:-",
     .expect = EXPECT_EITHER, .needle = "UVMRT_REPORT"},
    {.name = "env_trace_dash_means_stdout", .run = c_env_dash, .a = "UVMRT_TRACE", .b = "-", .n = 1,
     .expect = EXPECT_EITHER, .needle = "UVMRT_TRACE"},
    {.name = "params_report_dash_means_stdout", .run = c_env_dash, .a = "params.report", .b = "json:-",
     .expect = EXPECT_EITHER, .needle = "report"},
    ENV("env_fault_stats_junk", "UVMRT_FAULT_STATS", "on"),
    ENV("env_fault_stats_empty", "UVMRT_FAULT_STATS", ""),
    ENV("env_fault_stats_2", "UVMRT_FAULT_STATS", "2"),
    ENV("env_fault_sample_zero", "UVMRT_FAULT_SAMPLE", "0"),
    ENV("env_fault_sample_negative", "UVMRT_FAULT_SAMPLE", "-1"),
    ENV("env_fault_sample_too_big", "UVMRT_FAULT_SAMPLE", "1000001"),
    ENV("env_fault_sample_junk", "UVMRT_FAULT_SAMPLE", "x"),
    ENV("env_fault_sample_empty", "UVMRT_FAULT_SAMPLE", ""),
    ENV("env_fault_sample_trailing_space", "UVMRT_FAULT_SAMPLE", "auto "),
    ENV("env_fault_sample_overflow", "UVMRT_FAULT_SAMPLE", "99999999999999999999"),

    /* ---- a NULL context: nothing to log to, the status is the contract */
    NULLCTX("step_begin"), NULLCTX("step_end"), NULLCTX("layer_begin"), NULLCTX("layer_end"),
    NULLCTX("layer_add"), NULLCTX("tensors_alloc"), NULLCTX("tensor_alloc"), NULLCTX("tensor_free"),
    NULLCTX("set_placement"), NULLCTX("layer_stats_get"), NULLCTX("step_stats_get"), NULLCTX("summary_get"),
    NULLCTX("report_write"), NULLCTX("set_host_external_bytes"),

    /* ---- the host budget (UVMRT_HOST_BUDGET, params.host_budget_bytes) and declared host bytes */
    ENV("env_host_budget_junk", "UVMRT_HOST_BUDGET", "junk"),
    ENV("env_host_budget_zero", "UVMRT_HOST_BUDGET", "0"),
    ENV("env_host_budget_below_1m", "UVMRT_HOST_BUDGET", "512K"),
    ENV("env_host_budget_negative", "UVMRT_HOST_BUDGET", "-8G"),
    ENV("env_host_budget_upper_case_auto", "UVMRT_HOST_BUDGET", "AUTO"),
    ENV("env_host_budget_overflow", "UVMRT_HOST_BUDGET", "16777216T"),
    {.name = "params_host_budget_below_1m", .run = c_params, .a = "host_budget_bytes", .u = 4096,
     .expect = EXPECT_ANY_ERROR, .needle = "host_budget_bytes"},
    {.name = "host_external_wraps", .run = c_host_external, .fix = FIX_IDLE, .u = UINT64_MAX,
     .expect = UVMRT_ERR_BUDGET, .needle = "host budget"},
    {.name = "host_external_in_step", .run = c_host_external, .fix = FIX_STEP, .u = MIB,
     .expect = UVMRT_ERR_STATE, .needle = "inside a step"},

    /* ---- layers */
    {.name = "layer_add_null_name", .run = c_layer_add, .fix = FIX_IDLE, .n = 1, .expect = UVMRT_ERR_INVALID,
     .needle = "name"},
    {.name = "layer_add_null_out", .run = c_layer_add, .fix = FIX_IDLE, .n = 2, .expect = UVMRT_ERR_INVALID,
     .needle = "out_layer|out"},
    {.name = "layer_add_in_step", .run = c_layer_add, .fix = FIX_STEP, .expect = UVMRT_ERR_STATE,
     .needle = "inside a step|step"},
    {.name = "layer_name_invalid_utf8_json", .run = c_layer_name_report, .fix = FIX_IDLE, .a = "bad\xff\xfe name",
     .b = "json", .expect = EXPECT_EITHER, .needle = "name|utf"},
    {.name = "layer_name_long_utf8_trace", .run = c_layer_name_report, .fix = FIX_IDLE, .a = E16 E16 E16 E16 E16 E16 E16 E16 E16 E16 E16 E16 E16,
     .b = "trace", .expect = EXPECT_EITHER, .needle = "name|utf|long"},
    {.name = "layer_name_cut_utf8_trace", .run = c_layer_name_report, .fix = FIX_IDLE, .a = "caf\xc3",
     .b = "trace", .expect = EXPECT_EITHER, .needle = "name|utf"},

    /* ---- tensors_alloc / tensor_alloc */
    {.name = "tensors_alloc_n_zero", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "n0", .expect = UVMRT_ERR_INVALID,
     .needle = "n = 0|n=0|n is 0|count"},
    {.name = "tensors_alloc_null_descs", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "descs",
     .expect = UVMRT_ERR_INVALID, .needle = "descs"},
    {.name = "tensors_alloc_null_out", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "out",
     .expect = UVMRT_ERR_INVALID, .needle = "out"},
    {.name = "tensor_alloc_null_desc", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "desc",
     .expect = UVMRT_ERR_INVALID, .needle = "desc"},
    {.name = "tensor_alloc_null_out", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "tout",
     .expect = UVMRT_ERR_INVALID, .needle = "out"},
    {.name = "tensors_alloc_second_desc_bad", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "second_bad",
     .expect = UVMRT_ERR_INVALID, .needle = "size_bytes|size"},
    {.name = "tensors_alloc_two_of_half_size_max", .run = c_tensors_alloc, .fix = FIX_IDLE, .a = "two_half_max",
     .expect = EXPECT_ANY_ERROR, .needle = "9223372036854775808|size|overflow"},
    {.name = "tensors_alloc_in_step", .run = c_tensors_alloc_in_step, .fix = FIX_STEP, .expect = UVMRT_ERR_STATE,
     .needle = "inside a step|step"},
    {.name = "tensors_alloc_in_layer_call", .run = c_tensors_alloc_in_step, .fix = FIX_LAYER,
     .expect = UVMRT_ERR_STATE, .needle = "inside a step|step"},
    {.name = "tensor_alloc_size_zero", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -1, .u = 0,
     .expect = UVMRT_ERR_INVALID, .needle = "size_bytes|size"},
    {.name = "tensor_alloc_size_max", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -1, .u = SIZE_MAX,
     .expect = EXPECT_ANY_ERROR, .needle = "18446744073709551615|size"},
    {.name = "tensor_alloc_size_max_in_layer", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = 0, .u = SIZE_MAX - 4095,
     .expect = EXPECT_ANY_ERROR, .needle = "18446744073709547520|size"},
    {.name = "tensor_alloc_size_4_eib", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -1, .u = 1ull << 62,
     .expect = EXPECT_ANY_ERROR, .needle = "4611686018427387904|arena|size"},
    {.name = "tensor_alloc_layer_too_big", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = 99, .u = 4096,
     .expect = UVMRT_ERR_INVALID, .needle = "layer 99"},
    {.name = "tensor_alloc_layer_minus_2", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -2, .u = 4096,
     .expect = UVMRT_ERR_INVALID, .needle = "-2"},
    {.name = "tensor_alloc_layer_int_min", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = INT_MIN, .u = 4096,
     .expect = UVMRT_ERR_INVALID, .needle = "-2147483648"},
    {.name = "tensor_alloc_role_unknown", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -1, .u = 4096, .k = 5,
     .expect = UVMRT_ERR_INVALID, .needle = "role"},
    {.name = "tensor_alloc_role_negative", .run = c_tensor_alloc, .fix = FIX_IDLE, .n = -1, .u = 4096, .k = -1,
     .expect = UVMRT_ERR_INVALID, .needle = "role"},

    /* ---- tensor_free: the needle is the argument's name (any message about it will do) */
    {.name = "tensor_free_twice", .run = c_tensor_free, .fix = FIX_IDLE, .a = "freed",
     .expect = UVMRT_ERR_NOT_FOUND, .needle = "tensor"},
    {.name = "tensor_free_other_context", .run = c_tensor_free, .fix = FIX_IDLE, .a = "foreign",
     .expect = UVMRT_ERR_NOT_FOUND, .needle = "tensor"},
    {.name = "tensor_free_of_a_destroyed_context", .run = c_tensor_free, .fix = FIX_IDLE, .a = "destroyed",
     .expect = UVMRT_ERR_NOT_FOUND, .needle = "tensor"},
    {.name = "tensor_free_zeroed_memory", .run = c_tensor_free, .fix = FIX_IDLE, .a = "zeroed",
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "tensor_free_forged_copy", .run = c_tensor_free, .fix = FIX_IDLE, .a = "copy",
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "tensor_free_in_step", .run = c_tensor_free, .fix = FIX_STEP, .a = "w0", .expect = UVMRT_ERR_STATE,
     .needle = "inside a step|step"},
    {.name = "tensor_free_in_layer_call", .run = c_tensor_free, .fix = FIX_LAYER, .a = "w0",
     .expect = UVMRT_ERR_STATE, .needle = "inside a step|step"},

    /* ---- tensor_set_placement */
    {.name = "set_placement_unknown_value", .run = c_set_placement, .fix = FIX_IDLE, .a = "w0", .n = 3,
     .expect = UVMRT_ERR_INVALID, .needle = "placement"},
    {.name = "set_placement_negative_value", .run = c_set_placement, .fix = FIX_IDLE, .a = "w0", .n = -1,
     .expect = UVMRT_ERR_INVALID, .needle = "placement"},
    {.name = "set_placement_null_tensor", .run = c_set_placement, .fix = FIX_IDLE, .a = "null", .n = 1,
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "set_placement_freed_tensor", .run = c_set_placement, .fix = FIX_IDLE, .a = "freed", .n = 1,
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "set_placement_other_context", .run = c_set_placement, .fix = FIX_IDLE, .a = "foreign", .n = 1,
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "set_placement_of_a_destroyed_context", .run = c_set_placement, .fix = FIX_IDLE, .a = "destroyed",
     .n = 1, .expect = UVMRT_ERR_NOT_FOUND, .needle = "tensor"},
    {.name = "set_placement_zeroed_memory", .run = c_set_placement, .fix = FIX_IDLE, .a = "zeroed", .n = 1,
     .expect = EXPECT_ANY_ERROR, .needle = "tensor"},
    {.name = "set_placement_in_step", .run = c_set_placement, .fix = FIX_STEP, .a = "w0", .n = 1,
     .expect = UVMRT_ERR_STATE, .needle = "inside a step|step"},
    {.name = "set_placement_in_layer_call", .run = c_set_placement, .fix = FIX_LAYER, .a = "w0", .n = 1,
     .expect = UVMRT_ERR_STATE, .needle = "inside a step|step"},

    /* ---- step and layer state */
    {.name = "step_begin_twice", .run = c_state, .fix = FIX_STEP, .a = "step_begin", .expect = UVMRT_ERR_STATE,
     .needle = "still open|open"},
    {.name = "step_begin_in_layer_call", .run = c_state, .fix = FIX_LAYER, .a = "step_begin",
     .expect = UVMRT_ERR_STATE, .needle = "still open|open"},
    {.name = "step_end_outside_step", .run = c_state, .fix = FIX_IDLE, .a = "step_end", .expect = UVMRT_ERR_STATE,
     .needle = "outside a step|step_end"},
    {.name = "step_end_with_layer_open", .run = c_state, .fix = FIX_LAYER, .a = "step_end",
     .expect = UVMRT_ERR_STATE, .needle = "still open|layer0"},
    {.name = "layer_begin_outside_step", .run = c_state, .fix = FIX_IDLE, .a = "layer_begin_outside",
     .expect = UVMRT_ERR_STATE, .needle = "outside a step"},
    {.name = "layer_begin_while_open", .run = c_state, .fix = FIX_LAYER, .a = "layer_begin_open",
     .expect = UVMRT_ERR_STATE, .needle = "still open|layer0"},
    {.name = "layer_end_outside_step", .run = c_state, .fix = FIX_IDLE, .a = "layer_end", .expect = UVMRT_ERR_STATE,
     .needle = "layer_end|no open|without an open"},
    {.name = "layer_end_none_open", .run = c_state, .fix = FIX_STEP, .a = "layer_end", .expect = UVMRT_ERR_STATE,
     .needle = "layer_end|no open|without an open"},
    {.name = "layer_end_after_refused_begin", .run = c_layer_end_after_failed_begin, .fix = FIX_STEP,
     .expect = UVMRT_ERR_STATE, .needle = "layer_end|no open|without an open"},
    {.name = "context_destroy_in_layer_call", .run = c_destroy_in_call, .fix = FIX_LAYER, .expect = EXPECT_EITHER},
    {.name = "tensor_accessors_on_freed", .run = c_accessors, .fix = FIX_IDLE, .a = "freed", .expect = EXPECT_EITHER},
    {.name = "tensor_accessors_on_zeroed_memory", .run = c_accessors, .fix = FIX_IDLE, .a = "zeroed",
     .expect = EXPECT_EITHER},
    {.name = "print_config_null_file_or_context", .run = c_print_config, .fix = FIX_IDLE, .expect = EXPECT_EITHER},
    {.name = "layer_end_twice", .run = c_state, .fix = FIX_LAYER, .a = "layer_end_twice",
     .expect = UVMRT_ERR_STATE, .needle = "layer_end|no open|without an open"},

    /* ---- layer_begin arguments (inside a step) */
    LB("null_call", "null_call", .needle = "call"),
    LB("layer_negative", "layer", .n = -1, .needle = "layer -1"),
    LB("layer_too_big", "layer", .n = 99, .needle = "layer 99"),
    LB("layer_int_max", "layer", .n = INT_MAX, .needle = "2147483647"),
    LB("phase_unknown", "phase", .n = 3, .needle = "phase 3|phase"),
    LB("phase_negative", "phase", .n = -1, .needle = "phase -1|phase"),
    LB("uses_null_with_n_uses", "uses_null", .n = 2, .needle = "uses|n_uses"),
    LB("use_null_tensor", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "null", .needle = "uses[0]"),
    LB("use_freed_tensor", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "freed", .needle = "uses[0]"),
    LB("use_foreign_tensor", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "foreign", .needle = "uses[0]"),
    LB("use_tensor_of_a_destroyed_context", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "destroyed",
       .needle = "uses[0]"),
    LB("use_zeroed_memory", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "zeroed", .needle = "uses[0]"),
    LB("use_forged_copy", "use_tensor", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "copy", .needle = "uses[0]"),
    LB("second_use_freed", "use_second", .fix = FIX_IDLE, .expect = EXPECT_ANY_ERROR, .b = "freed", .needle = "uses[1]"),
    LB("access_zero", "access", .u = 0, .needle = "access"),
    LB("access_8", "access", .u = 8, .needle = "access"),
    LB("access_all_bits", "access", .u = 0xffffffffu, .needle = "access|4294967295"),
    LB("access_stream_only", "access", .u = UVMRT_USE_STREAM, .needle = "access"),
    LB("flops_nan", "flops", .x = NAN, .expect = EXPECT_ANY_ERROR, .needle = "flops"),
    LB("flops_inf", "flops", .x = INFINITY, .expect = EXPECT_ANY_ERROR, .needle = "flops"),
    LB("flops_negative", "flops", .x = -1e12, .expect = EXPECT_ANY_ERROR, .needle = "flops"),
    LB("flops_1e300", "flops", .x = 1e300, .expect = EXPECT_ANY_ERROR, .needle = "flops"),
    LB("duration_max", "duration", .u = UINT64_MAX, .expect = EXPECT_ANY_ERROR, .needle = "duration",
),
    LB("working_set_over_budget", "over_budget", .expect = UVMRT_ERR_BUDGET, .needle = "budget"),
    LB("tensor_over_budget", "tensor_over_budget", .fix = FIX_IDLE, .expect = UVMRT_ERR_BUDGET, .needle = "budget"),

    /* ---- statistics getters (2 steps completed) */
    {.name = "layer_stats_layer_negative", .run = c_layer_stats, .fix = FIX_IDLE, .n = -1,
     .expect = UVMRT_ERR_INVALID, .needle = "layer -1"},
    {.name = "layer_stats_layer_too_big", .run = c_layer_stats, .fix = FIX_IDLE, .n = 99,
     .expect = UVMRT_ERR_INVALID, .needle = "layer 99"},
    {.name = "layer_stats_phase_unknown", .run = c_layer_stats, .fix = FIX_IDLE, .n = 0, .k = 3,
     .expect = UVMRT_ERR_INVALID, .needle = "phase 3"},
    {.name = "layer_stats_phase_negative", .run = c_layer_stats, .fix = FIX_IDLE, .n = 0, .k = -1,
     .expect = UVMRT_ERR_INVALID, .needle = "phase -1"},
    {.name = "layer_stats_null_out", .run = c_layer_stats, .fix = FIX_IDLE, .n = 0, .a = "null",
     .expect = UVMRT_ERR_INVALID, .needle = "out"},
    {.name = "step_stats_past_end", .run = c_step_stats, .fix = FIX_IDLE, .u = 2, .expect = UVMRT_ERR_INVALID,
     .needle = "step 2"},
    {.name = "step_stats_uint64_max", .run = c_step_stats, .fix = FIX_IDLE, .u = UINT64_MAX,
     .expect = UVMRT_ERR_INVALID, .needle = "18446744073709551615"},
    {.name = "step_stats_open_step", .run = c_step_stats, .fix = FIX_STEP, .u = 2, .expect = UVMRT_ERR_INVALID,
     .needle = "step 2"},
    {.name = "step_stats_null_out", .run = c_step_stats, .fix = FIX_IDLE, .u = 0, .a = "null",
     .expect = UVMRT_ERR_INVALID, .needle = "out"},
    {.name = "summary_null_out", .run = c_summary_null, .fix = FIX_IDLE, .expect = UVMRT_ERR_INVALID,
     .needle = "out"},

    /* ---- struct_size: 0 (not set), less than the field, more than the library knows */
#define SIZE_CASES(s_, fix_)                                                                                     \
    {.name = "struct_size_" s_ "_zero", .run = c_struct_size, .fix = fix_, .a = s_, .n = 0,                    \
     .expect = UVMRT_ERR_INVALID, .needle = "uvmrt_" s_ "_t.struct_size is 0"},                                \
    {.name = "struct_size_" s_ "_short", .run = c_struct_size, .fix = fix_, .a = s_, .n = 4,                   \
     .expect = UVMRT_ERR_INVALID, .needle = "uvmrt_" s_ "_t.struct_size is 4 bytes"},                          \
    {.name = "struct_size_" s_ "_newer", .run = c_struct_size, .fix = fix_, .a = s_, .n = -1,                  \
     .expect = UVMRT_ERR_INVALID, .needle = "newer uvmrt.h"}
    SIZE_CASES("layer_call", FIX_STEP), SIZE_CASES("summary", FIX_IDLE), SIZE_CASES("step_stats", FIX_IDLE),
    SIZE_CASES("layer_stats", FIX_IDLE), SIZE_CASES("memory_stats", FIX_IDLE), SIZE_CASES("tensor_info", FIX_IDLE),
#undef SIZE_CASES

    /* ---- report_write */
    {.name = "report_null_format", .run = c_report_format, .fix = FIX_IDLE, .n = 1, .b = "r.txt",
     .expect = UVMRT_ERR_INVALID, .needle = "format"},
    {.name = "report_unknown_format", .run = c_report_format, .fix = FIX_IDLE, .a = "xml", .b = "r.txt",
     .expect = UVMRT_ERR_INVALID, .needle = "xml"},
    {.name = "report_empty_format", .run = c_report_format, .fix = FIX_IDLE, .a = "", .b = "r.txt",
     .expect = UVMRT_ERR_INVALID, .needle = "format"},
    {.name = "report_upper_case_format", .run = c_report_format, .fix = FIX_IDLE, .a = "JSON", .b = "r.txt",
     .expect = UVMRT_ERR_INVALID, .needle = "JSON"},
    {.name = "report_empty_path", .run = c_report_path, .fix = FIX_IDLE, .b = "", .expect = EXPECT_ANY_ERROR,
     .needle = "path|''"},
    {.name = "report_path_is_directory", .run = c_report_path, .fix = FIX_IDLE, .a = "dir", .b = "a-directory",
     .expect = EXPECT_ANY_ERROR, .needle = "a-directory"},
    {.name = "report_missing_folder", .run = c_report_path, .fix = FIX_IDLE, .b = "no-such-folder/r.txt",
     .expect = EXPECT_ANY_ERROR, .needle = "no-such-folder"},
    {.name = "report_folder_is_a_file", .run = c_report_path, .fix = FIX_IDLE, .a = "file", .b = "target.txt/r.txt",
     .expect = EXPECT_ANY_ERROR, .needle = "target.txt"},
    {.name = "report_path_too_long", .run = c_report_path, .fix = FIX_IDLE, .a = "long", .n = 5000,
     .expect = EXPECT_ANY_ERROR, .needle = "too long|aaaaaaaaaaaaaaaa"},
    {.name = "report_path_is_fifo", .run = c_report_path, .fix = FIX_IDLE, .a = "fifo", .b = "a-fifo",
     .expect = EXPECT_ANY_ERROR, .needle = "a-fifo"},
    {.name = "report_path_is_symlink", .run = c_report_symlink, .fix = FIX_IDLE, .a = "existing", .b = "a-link",
     .expect = EXPECT_EITHER, .needle = "a-link"},
    {.name = "report_path_is_dangling_symlink", .run = c_report_symlink, .fix = FIX_IDLE, .b = "a-dangling",
     .expect = EXPECT_EITHER, .needle = "a-dangling"},
};
#pragma GCC diagnostic pop
#define N_CASES (sizeof cases / sizeof cases[0])

/* ------------------------------------------------------------------ the sweep */
static const char *expect_name(int e)
{
    if (e == EXPECT_ANY_ERROR) return "any error";
    if (e == EXPECT_EITHER) return "OK or a logged error";
    return uvmrt_status_name((uvmrt_status_t)e);
}

Test(misuse, sweep)
{
    result_t *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(r, MAP_FAILED);
    const char *only = getenv("MISUSE_CASE");
    const char *verbose_env = getenv("MISUSE_VERBOSE");
    int verbose = verbose_env && *verbose_env && strcmp(verbose_env, "0") != 0;
    const char *strict_env = getenv("MISUSE_STRICT"); /* 1: judge flagged cases like the others */
    int strict = strict_env && *strict_env && strcmp(strict_env, "0") != 0;
    unsigned n = 0, clear = 0, unclear = 0, crashed = 0, changed = 0;
    unsigned unflagged_unclear = 0, unflagged_crashed = 0, unflagged_changed = 0, fixed = 0;
    for (size_t i = 0; i < N_CASES; i++) {
        const mcase_t *c = &cases[i];
        if (only && *only && strstr(c->name, only) == NULL) continue;
        memset(r, 0, sizeof *r);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            run_case(c, r);
            _exit(r->phase == PH_DONE ? 0 : 3);
        }
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
        if (r->phase != PH_DONE && r->dir[0]) rm_tree(r->dir);
        char what[1800];
        int is_crash = 0, is_unclear = 0, is_changed = 0;
        if (r->phase == PH_SETUP || (r->phase < PH_CALL && !WIFSIGNALED(ws))) {
            /* the harness could not prepare the case: a failure of the sweep itself */
            cr_expect_fail("case %s: setup failed: %s", c->name, r->setup_what);
            continue;
        }
        n++;
        if (WIFSIGNALED(ws) || r->phase != PH_DONE) {
            is_crash = 1;
            char how[64];
            if (WIFSIGNALED(ws))
                snprintf(how, sizeof how, "%s%s", strsignal(WTERMSIG(ws)), WTERMSIG(ws) == SIGALRM ? ": hung" : "");
            else snprintf(how, sizeof how, "exit status %d: a sanitizer report?", WEXITSTATUS(ws));
            snprintf(what, sizeof what, "CRASHED (%s) during %s", how,
                     r->phase == PH_CALL ? "the bad call" : r->phase == PH_CHECK ? "the checks"
                                                        : "the normal steps afterwards");
        } else {
            int st = r->status;
            int status_ok = c->expect == EXPECT_ANY_ERROR ? st < 0 : c->expect == EXPECT_EITHER ? 1 : st == c->expect;
            int log_ok = st == UVMRT_OK || c->needle == NULL || r->logged;
            is_unclear = !status_ok || !log_ok || r->wrong[0] != '\0';
            is_changed = st != UVMRT_OK && (r->changed || r->after_failed);
            size_t len = (size_t)snprintf(what, sizeof what, "%s: got %s, expected %s", is_unclear ? "UNCLEAR" : "clear",
                                          uvmrt_status_name((uvmrt_status_t)st), expect_name(c->expect));
            if (!log_ok) len += (size_t)snprintf(what + len, sizeof what - len, "; no error-level message with '%s' (errors: %s)",
                                                 c->needle, r->errors[0] ? r->errors : "none");
            if (r->wrong[0]) len += (size_t)snprintf(what + len, sizeof what - len, "; %s", r->wrong);
            if (r->changed && st != UVMRT_OK)
                len += (size_t)snprintf(what + len, sizeof what - len, "; CONTEXT CHANGED: %s", r->changed_what);
            if (r->after_failed)
                len += (size_t)snprintf(what + len, sizeof what - len, "; %snormal steps afterwards failed: %s",
                                        st != UVMRT_OK ? "CONTEXT CHANGED: " : "", r->after_what);
        }
        if (is_crash) crashed++;
        else if (is_unclear) unclear++;
        else clear++;
        changed += is_changed;
        int failing = is_crash || is_unclear || is_changed;
        int flagged = c->known_bad && !strict;
        if (!flagged) {
            unflagged_crashed += is_crash;
            unflagged_unclear += is_unclear && !is_crash;
            unflagged_changed += is_changed;
        } else if (!failing) {
            fixed++;
        }
        if (failing || verbose || (c->known_bad && !failing))
            fprintf(stderr, "misuse: %-40s %s%s\n", c->name, what,
                    c->known_bad ? (failing ? " [known_bad]" : " [known_bad, now passes: remove the flag]") : "");
    }
    munmap(r, sizeof *r);
    if (fixed) fprintf(stderr, "misuse: %u known_bad cases now pass (listed above): remove their flags\n", fixed);
    fprintf(stderr, "misuse: %u cases left their context changed; not flagged known_bad: %u unclear (at most %d "
                    "allowed), %u crashed, %u changed\n",
            changed, unflagged_unclear, MAX_UNCLEAR, unflagged_crashed, unflagged_changed);
    fprintf(stderr, "misuse: %u cases, %u clear, %u unclear, %u crashed\n", n, clear, unclear, crashed);
    cr_expect_leq(unflagged_unclear, MAX_UNCLEAR, "%u unclear errors among the cases not flagged known_bad", unflagged_unclear);
    cr_expect_eq(unflagged_crashed, 0, "%u crashes among the cases not flagged known_bad", unflagged_crashed);
    cr_expect_eq(unflagged_changed, 0, "%u failed calls changed their context, among the cases not flagged known_bad",
                 unflagged_changed);
    if (!(only && *only)) cr_expect_geq(n, 150, "the sweep has %u cases, expected at least 150", n);
}
