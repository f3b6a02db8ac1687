/*
 * test_monitor.c -- the live snapshot (src/monitor.c) read back through the
 * reader uvmrt-top uses (tools/monread.c): it matches the step's statistics and
 * report, is named and created 0600, grows past its first rows, is never read
 * torn, is removed at destroy, is not made with UVMRT_MONITOR=0, and a sim
 * program killed with SIGKILL leaves a segment that the next reader (and
 * uvmrt-top itself, run by path) removes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "monitor.h"
#include "monread.h"

#ifndef UVMRT_TOP_PATH
#define UVMRT_TOP_PATH "tools/uvmrt-top"
#endif

#define BUDGET (16 * MIB)

static int shm_exists(const char *name)
{
    char p[128];
    snprintf(p, sizeof p, "/dev/shm%s", name);
    struct stat st;
    return stat(p, &st) == 0;
}

static uvmrt_mon_proc_t read_ok(const char *name)
{
    uvmrt_mon_proc_t p;
    int st = uvmrt__monread_one(name, &p);
    cr_assert_eq(st, MONREAD_OK, "reading %s: %s", name, uvmrt__monread_str(st));
    return p;
}

/* The layer's counters of absolute step `step` (0-based), phases summed, from the
 * history rows (what the csv report prints). */
static uvmrt_layer_stats_t row_sum(const uvmrt_context_t *ctx, uint64_t step, int layer)
{
    uvmrt_layer_stats_t s = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
    memset(&s, 0, sizeof s);
    for (size_t i = 0; i < ctx->hist.n_rows; i++) {
        const uvmrt_step_row_t *r = &ctx->hist.rows[i];
        if (r->step != step || r->layer != layer) continue;
        s.calls += r->s.calls;
        s.duration_ns += r->s.duration_ns;
        s.wait_ns += r->s.wait_ns;
        s.prefetch_bytes += r->s.prefetch_bytes;
        s.evict_bytes += r->s.evict_bytes;
        s.discard_bytes += r->s.discard_bytes;
        s.fault_count += r->s.fault_count;
        s.fault_bytes += r->s.fault_bytes;
        s.remote_read_bytes += r->s.remote_read_bytes;
        s.remote_write_bytes += r->s.remote_write_bytes;
        s.gpu_faults += r->s.gpu_faults;
    }
    return s;
}

Test(monitor, snapshot_matches_the_steps_statistics)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    uvmrt_context_t *ctx = net->ctx;
    cr_assert_eq(uvmrt_context_set_total_steps(ctx, 10), UVMRT_OK);
    const char *name = uvmrt__monitor_name(ctx);
    cr_assert_not_null(name, "no segment; log:\n%s", log_text());
    char want[64];
    snprintf(want, sizeof want, "/uvmrt.%u.%d", (unsigned)getuid(), (int)getpid());
    cr_assert_str_eq(name, want);
    struct stat st;
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", name);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "mode %o", (unsigned)(st.st_mode & 0777));

    uvmrt_mon_proc_t p = read_ok(name); /* published at creation: no step yet */
    cr_assert_eq(p.snap.step, 0);
    cr_assert_eq(p.snap.pid, getpid());
    uvmrt__monread_free(&p);

    run_steps(net, 3, NULL, NULL);
    p = read_ok(name);
    const uvmrt_mon_snap_t *s = &p.snap;
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    uvmrt_step_stats_t last = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 2, &last), UVMRT_OK);
    cr_assert_eq(s->step, 3, "steps are numbered from 1: the third step is 3, got %llu", (unsigned long long)s->step);
    cr_assert_eq(s->total_steps, 10);
    cr_assert_str_eq(s->backend, "sim");
    cr_assert_str_eq(s->policy, "prefetch");
    cr_assert_eq(s->budget_bytes, uvmrt_context_budget(ctx));
    cr_assert_eq(s->resident_bytes, sum.resident_bytes);
    cr_assert_eq(s->peak_resident_bytes, sum.peak_resident_bytes);
    cr_assert_eq(s->allocated_bytes, sum.allocated_bytes);
    cr_assert_eq(s->step_ns, last.step_ns);
    cr_assert_eq(s->wait_ns, last.wait_ns);
    cr_assert_eq(s->prefetch_bytes, last.prefetch_bytes);
    cr_assert_eq(s->evict_bytes, last.evict_bytes);
    cr_assert_eq(s->discard_bytes, last.discard_bytes);
    cr_assert_eq(s->fault_count, last.fault_count);
    cr_assert_eq(s->step_peak_resident_bytes, last.peak_resident_bytes);
    cr_assert_eq(s->to_device_bytes, last.prefetch_bytes + last.fault_bytes + last.remote_read_bytes);
    cr_assert_eq(s->to_host_bytes, last.evict_bytes + last.remote_write_bytes);
    cr_assert_gt(s->to_device_bytes, 0, "a 16 MiB budget under a 62 MiB net moves data every step");
    cr_assert_eq(s->steady_steps, 2, "steps 2 and 3 are the steady state");
    double eta = uvmrt__monread_eta_s(s);
    cr_assert_gt(eta, 0);
    cr_assert_eq(s->n_layers, (uint32_t)net->L);
    uint64_t sum_pf = 0;
    for (int l = 0; l < net->L; l++) {
        const uvmrt_mon_layer_t *r = &p.layers[l];
        uvmrt_layer_stats_t want_r = row_sum(ctx, 2, l);
        char nm[16];
        snprintf(nm, sizeof nm, "layer%d", l);
        cr_assert_str_eq(r->name, nm);
        cr_assert_eq(r->calls, 3, "forward, backward and optimizer of layer %d", l);
        cr_assert_eq(r->calls, want_r.calls);
        cr_assert_eq(r->duration_ns, want_r.duration_ns);
        cr_assert_eq(r->wait_ns, want_r.wait_ns);
        cr_assert_eq(r->prefetch_bytes, want_r.prefetch_bytes);
        cr_assert_eq(r->evict_bytes, want_r.evict_bytes);
        cr_assert_eq(r->discard_bytes, want_r.discard_bytes);
        cr_assert_eq(r->fault_count, want_r.fault_count);
        cr_assert_eq(r->gpu_faults, want_r.gpu_faults);
        cr_assert_gt(strlen(r->mechanism), 0);
        cr_assert_null(strstr(r->mechanism, "demand"), "step 3 follows the plan, layer %d: %s", l, r->mechanism);
        sum_pf += r->prefetch_bytes;
    }
    /* X (the input) is layer -1: its prefetches are the step's but no layer's row */
    cr_assert_leq(sum_pf, s->prefetch_bytes);
    uvmrt__monread_free(&p);
    net_destroy(net);
}

Test(monitor, destroy_removes_the_segment)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_DEMAND, BUDGET);
    char name[UVMRT_MON_NAME_MAX];
    cr_assert_not_null(uvmrt__monitor_name(net->ctx));
    snprintf(name, sizeof name, "%s", uvmrt__monitor_name(net->ctx));
    run_steps(net, 1, NULL, NULL);
    cr_assert(shm_exists(name));
    net_destroy(net);
    cr_assert_not(shm_exists(name));
    uvmrt_mon_proc_t p;
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_GONE);
}

Test(monitor, off_with_UVMRT_MONITOR_0)
{
    env_clear_uvmrt();
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_null(uvmrt__monitor_name(ctx));
    char name[64];
    snprintf(name, sizeof name, "/uvmrt.%u.%d", (unsigned)getuid(), (int)getpid());
    cr_assert_not(shm_exists(name));
    uvmrt_context_destroy(ctx);
}

Test(monitor, bad_UVMRT_MONITOR_is_refused_by_name)
{
    env_clear_uvmrt();
    setenv("UVMRT_MONITOR", "yes", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert_null(ctx);
    cr_assert(log_contains("UVMRT_MONITOR='yes'"), "%s", log_text());
    cr_assert(log_contains("1 or 0"), "%s", log_text());
}

Test(monitor, several_contexts_get_their_own_segments)
{
    uvmrt_context_t *a = make_ctx(UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    uvmrt_context_t *b = make_ctx(UVMRT_POLICY_DEMAND, BUDGET, NULL);
    cr_assert_not_null(uvmrt__monitor_name(a));
    cr_assert_not_null(uvmrt__monitor_name(b));
    char want[64];
    snprintf(want, sizeof want, "/uvmrt.%u.%d.1", (unsigned)getuid(), (int)getpid());
    cr_assert_str_eq(uvmrt__monitor_name(b), want);
    uvmrt_mon_proc_t *procs = NULL;
    size_t n = 0;
    cr_assert_eq(uvmrt__monread_list(getpid(), &procs, &n, NULL), MONREAD_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(procs[0].snap.context_index, 0);
    cr_assert_str_eq(procs[0].snap.policy, "prefetch");
    cr_assert_eq(procs[1].snap.context_index, 1);
    cr_assert_str_eq(procs[1].snap.policy, "demand");
    uvmrt__monread_free_all(procs, n);
    uvmrt_context_destroy(a);
    uvmrt_context_destroy(b);
}

Test(monitor, segment_grows_past_its_first_rows)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    enum { L = 3 * UVMRT_MON_LAYERS0 + 5 };
    uvmrt_tensor_t *w[L];
    for (int i = 0; i < L; i++) {
        char nm[32];
        int id;
        snprintf(nm, sizeof nm, "blk%d", i);
        cr_assert_eq(uvmrt_layer_add(ctx, nm, &id), UVMRT_OK);
        uvmrt_tensor_desc_t d = {nm, id, UVMRT_ROLE_WEIGHT, 64 * KIB};
        cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &w[i]), UVMRT_OK);
    }
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        for (int i = 0; i < L; i++) {
            uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = i, .phase = UVMRT_PHASE_FORWARD, .sim_duration_ns = 1000};
            cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
            cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        }
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
    uvmrt_mon_proc_t p = read_ok(uvmrt__monitor_name(ctx));
    cr_assert_eq(p.snap.n_layers, L);
    cr_assert_geq(p.snap.cap_layers, L);
    cr_assert_str_eq(p.layers[L - 1].name, "blk196");
    cr_assert_eq(p.layers[L - 1].calls, 1);
    uvmrt__monread_free(&p);
    uvmrt_context_destroy(ctx);
}

/* A writer that stopped inside its seqlock (odd sequence) is never read: the
 * reader gives up with BUSY rather than return a torn copy. */
Test(monitor, reader_refuses_a_half_written_snapshot)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 2, NULL, NULL);
    const char *name = uvmrt__monitor_name(net->ctx);
    int fd = shm_open(name, O_RDWR, 0);
    cr_assert_geq(fd, 0);
    uvmrt_mon_header_t *h = mmap(NULL, UVMRT_MON_HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(h, MAP_FAILED);
    uint64_t seq = h->seq;
    cr_assert_eq(seq % 2, 0);
    cr_assert_eq(seq, 2 * 3, "one publish at creation and one per step, two increments each");
    h->seq = seq + 1;
    uvmrt_mon_proc_t p;
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_BUSY);
    h->seq = seq;
    p = read_ok(name);
    cr_assert_eq(p.snap.step, 2);
    uvmrt__monread_free(&p);
    munmap(h, UVMRT_MON_HEADER_BYTES);
    close(fd);
    net_destroy(net);
}

Test(monitor, segment_names_parse)
{
    uid_t u = getuid();
    char b[64];
    snprintf(b, sizeof b, "uvmrt.%u.1234", (unsigned)u);
    cr_assert_eq(uvmrt__monread_pid_of(b, u), 1234);
    snprintf(b, sizeof b, "uvmrt.%u.1234.7", (unsigned)u);
    cr_assert_eq(uvmrt__monread_pid_of(b, u), 1234);
    snprintf(b, sizeof b, "uvmrt.%u.1234.", (unsigned)u);
    cr_assert_eq(uvmrt__monread_pid_of(b, u), -1);
    snprintf(b, sizeof b, "uvmrt.%u.12x4", (unsigned)u);
    cr_assert_eq(uvmrt__monread_pid_of(b, u), -1);
    snprintf(b, sizeof b, "uvmrt.%u.1234", (unsigned)u + 1);
    cr_assert_eq(uvmrt__monread_pid_of(b, u), -1, "another user's segment");
    cr_assert_eq(uvmrt__monread_pid_of("bxfi_1234", u), -1);
}

/* ------------------------------------------------------------------ a separate trainer */
/* The child: a sim trainer that writes its JSON report after step 3, tells the
 * parent, then waits to be killed (alarm: never outlives a broken test). */
static void trainer(int fd, const char *report)
{
    alarm(60);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, BUDGET, NULL);
    p.log_fn = NULL;
    uvmrt_context_t *ctx = NULL;
    if (uvmrt_context_create(&p, &ctx) != UVMRT_OK) _exit(10);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    uvmrt_context_set_total_steps(ctx, 1000);
    run_steps(net, 3, NULL, NULL);
    if (uvmrt_report_write(ctx, "json", report) != UVMRT_OK) _exit(11);
    char c = 'r';
    if (write(fd, &c, 1) != 1) _exit(12);
    for (;;) pause();
}

static pid_t start_trainer(const char *report)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        trainer(fds[1], report);
    }
    close(fds[1]);
    char c = 0;
    ssize_t r = read(fds[0], &c, 1);
    close(fds[0]);
    cr_assert_eq(r, 1, "the trainer did not get to step 3");
    return pid;
}

/* Kills the trainer with SIGKILL and reaps it (a zombie still answers kill(pid, 0)). */
static void kill9(pid_t pid)
{
    cr_assert_eq(kill(pid, SIGKILL), 0);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

static json_t *run_top_json(pid_t pid, int *rc)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --once --json -p %d", UVMRT_TOP_PATH, (int)pid);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    json_error_t err;
    json_t *j = json_loadf(f, JSON_DISABLE_EOF_CHECK, &err);
    int st = pclose(f);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cr_assert_not_null(j, "uvmrt-top --json output does not parse: %s", err.text);
    return j;
}

static uint64_t jget(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_integer(v), "key %s", k);
    return (uint64_t)json_integer_value(v);
}

Test(monitor, killed_trainer_is_shown_then_cleaned)
{
    char report[] = "/tmp/uvmrt-monitor-XXXXXX";
    int rfd = mkstemp(report);
    cr_assert_geq(rfd, 0);
    close(rfd);
    pid_t pid = start_trainer(report);
    char name[64];
    snprintf(name, sizeof name, "/uvmrt.%u.%d", (unsigned)getuid(), (int)pid);

    /* the reader uvmrt-top uses, filtered to the trainer */
    uvmrt_mon_proc_t *procs = NULL;
    size_t n = 0;
    cr_assert_eq(uvmrt__monread_list(pid, &procs, &n, NULL), MONREAD_OK);
    cr_assert_eq(n, 1);
    const uvmrt_mon_snap_t *s = &procs[0].snap;
    cr_assert_eq(s->pid, pid);
    cr_assert_eq(s->step, 3);
    cr_assert_eq(s->n_layers, 6);

    /* ... matches the trainer's own report of that step */
    json_error_t err;
    json_t *rep = json_load_file(report, 0, &err);
    cr_assert_not_null(rep, "%s", err.text);
    json_t *steps = json_object_get(rep, "steps");
    cr_assert_eq(json_array_size(steps), 3);
    json_t *last = json_array_get(steps, 2);
    cr_assert_eq(s->budget_bytes, jget(rep, "budget_bytes"));
    cr_assert_eq(s->peak_resident_bytes, jget(rep, "peak_resident_bytes"));
    cr_assert_eq(s->step_ns, jget(last, "step_ns"));
    cr_assert_eq(s->prefetch_bytes, jget(last, "prefetch_bytes"));
    cr_assert_eq(s->evict_bytes, jget(last, "evict_bytes"));
    cr_assert_eq(s->discard_bytes, jget(last, "discard_bytes"));
    cr_assert_eq(s->wait_ns, jget(last, "wait_ns"));
    cr_assert_eq(s->step_peak_resident_bytes, jget(last, "peak_resident_bytes"));
    json_t *rl = json_object_get(rep, "layers");
    for (size_t i = 0; i < json_array_size(rl); i++)
        cr_assert_str_eq(procs[0].layers[i].name, json_string_value(json_object_get(json_array_get(rl, i), "name")));
    json_decref(rep);
    unlink(report);

    /* uvmrt-top itself, by path */
    int rc = -1;
    json_t *top = run_top_json(pid, &rc);
    cr_assert_eq(rc, 0);
    json_t *ps = json_object_get(top, "processes");
    cr_assert_eq(json_array_size(ps), 1);
    json_t *p0 = json_array_get(ps, 0);
    cr_assert_eq(jget(p0, "pid"), (uint64_t)pid);
    cr_assert_eq(jget(p0, "budget_bytes"), s->budget_bytes);
    cr_assert_eq(jget(p0, "resident_bytes"), s->resident_bytes);
    cr_assert_eq(jget(p0, "peak_resident_bytes"), s->peak_resident_bytes);
    cr_assert_eq(jget(p0, "step"), 3);
    cr_assert_eq(json_array_size(json_object_get(p0, "layers")), 6);
    json_t *l0 = json_array_get(json_object_get(p0, "layers"), 0);
    cr_assert_eq(jget(l0, "duration_ns"), procs[0].layers[0].duration_ns);
    cr_assert_str_eq(json_string_value(json_object_get(l0, "mechanism")), procs[0].layers[0].mechanism);
    json_decref(top);
    uvmrt__monread_free_all(procs, n);

    /* kill -9: the segment stays until the next reader sees the process is gone */
    kill9(pid);
    cr_assert(shm_exists(name), "SIGKILL gives the library no chance to unlink");
    int cleaned = 0;
    cr_assert_eq(uvmrt__monread_list(pid, &procs, &n, &cleaned), MONREAD_OK);
    cr_assert_eq(n, 0);
    cr_assert_eq(cleaned, 1);
    cr_assert_not(shm_exists(name));
}

Test(monitor, uvmrt_top_cleans_a_killed_trainer)
{
    char report[] = "/tmp/uvmrt-monitor-XXXXXX";
    int rfd = mkstemp(report);
    cr_assert_geq(rfd, 0);
    close(rfd);
    pid_t pid = start_trainer(report);
    unlink(report);
    char name[64];
    snprintf(name, sizeof name, "/uvmrt.%u.%d", (unsigned)getuid(), (int)pid);
    kill9(pid);
    cr_assert(shm_exists(name));
    int rc = -1;
    json_t *top = run_top_json(pid, &rc);
    cr_assert_eq(rc, 1, "--once -p PID with no snapshot exits 1");
    cr_assert_eq(json_array_size(json_object_get(top, "processes")), 0);
    cr_assert_eq(jget(top, "cleaned_stale"), 1);
    json_decref(top);
    cr_assert_not(shm_exists(name));
}

Test(monitor, uvmrt_top_usage_errors)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' -p abc 2>&1", UVMRT_TOP_PATH);
    FILE *f = popen(cmd, "r");
    char buf[512] = "";
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    buf[k] = '\0';
    int st = pclose(f);
    cr_assert_eq(WEXITSTATUS(st), 2);
    cr_assert_not_null(strstr(buf, "-p 'abc': expected a process id"), "%s", buf);
    snprintf(cmd, sizeof cmd, "'%s' -d 0 >/dev/null 2>&1", UVMRT_TOP_PATH);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' --bogus >/dev/null 2>&1", UVMRT_TOP_PATH);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
    snprintf(cmd, sizeof cmd, "'%s' --version | grep -q '^uvmrt-top (uvmrt) '", UVMRT_TOP_PATH);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 0);
    snprintf(cmd, sizeof cmd, "'%s' --help | grep -q -- '--once'", UVMRT_TOP_PATH);
    cr_assert_eq(WEXITSTATUS(system(cmd)), 0);
}

/* ------------------------------------------------------------------ what other users can plant */
/* /dev/shm is writable by every user, so anything can sit under a segment's name:
 * a FIFO (whose open would block), a link, a file with another mode, junk bytes, a
 * program name of escape sequences. None may hang, slow or steer the reader. */

/* "/uvmrt.<uid>.<this pid>.<n>": a name the reader lists (this process is alive) */
static void planted_name(char *b, size_t n, int k)
{
    snprintf(b, n, "/uvmrt.%u.%d.%d", (unsigned)getuid(), (int)getpid(), 900 + k);
}

static void planted_path(char *b, size_t n, int k)
{
    char name[64];
    planted_name(name, sizeof name, k);
    snprintf(b, n, "/dev/shm%s", name);
}

/* A regular file of bytes header + rows, mode, the header's magic and seq. */
static void plant_file(int k, mode_t mode, uint64_t magic, uint64_t seq)
{
    char path[128];
    planted_path(path, sizeof path, k);
    unlink(path);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
    cr_assert_eq(fchmod(fd, mode), 0);
    cr_assert_eq(ftruncate(fd, (off_t)UVMRT_MON_BYTES(4)), 0);
    uvmrt_mon_header_t h;
    memset(&h, 0, sizeof h);
    h.magic = magic;
    h.version = UVMRT_MON_VERSION;
    h.header_bytes = UVMRT_MON_HEADER_BYTES;
    h.row_bytes = sizeof(uvmrt_mon_layer_t);
    h.seq = seq;
    h.snap.cap_layers = 4;
    cr_assert_eq(pwrite(fd, &h, sizeof h, 0), (ssize_t)sizeof h);
    close(fd);
}

static void unplant(int k)
{
    char path[128];
    planted_path(path, sizeof path, k);
    unlink(path);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

Test(monitor, a_planted_fifo_neither_blocks_nor_is_read)
{
    alarm(20); /* a hang fails the test; not Criterion's .timeout: two tests with one, run in parallel, leak 48 bytes in its 2.4.1 runner (CI's LeakSanitizer stage) */
    char path[128], name[64];
    planted_path(path, sizeof path, 0);
    planted_name(name, sizeof name, 0);
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "%s", strerror(errno));
    uvmrt_mon_proc_t p;
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_BAD, "a FIFO is not a snapshot (and its open must not block)");
    uvmrt_mon_proc_t *procs = NULL;
    size_t n = 0;
    int cleaned = 0;
    cr_assert_eq(uvmrt__monread_list(getpid(), &procs, &n, &cleaned), MONREAD_OK);
    cr_assert_eq(n, 0);
    uvmrt__monread_free_all(procs, n);
    /* and uvmrt-top itself, by path: one frame, at once */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "timeout 10 '%s' --once -p %d >/dev/null 2>&1", UVMRT_TOP_PATH, (int)getpid());
    int st = system(cmd);
    unlink(path);
    cr_assert_eq(WEXITSTATUS(st), 1, "uvmrt-top --once finds no snapshot for this pid (124: it hung)");
}

Test(monitor, a_planted_link_or_loose_mode_or_oversize_is_refused)
{
    net_t *net = net_default_on_sim(UVMRT_POLICY_PREFETCH, BUDGET);
    run_steps(net, 1, NULL, NULL);
    char target[128], path[128], name[64];
    snprintf(target, sizeof target, "/dev/shm%s", uvmrt__monitor_name(net->ctx));
    planted_path(path, sizeof path, 1);
    planted_name(name, sizeof name, 1);
    unlink(path);
    cr_assert_eq(symlink(target, path), 0);
    uvmrt_mon_proc_t p;
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_BAD, "a link to a real snapshot is not followed");
    unlink(path);
    plant_file(1, 0644, UVMRT_MON_MAGIC, 0);
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_BAD, "mode 0644: not what a publisher makes");
    plant_file(1, 0600, UVMRT_MON_MAGIC, 0);
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_OK, "the same file with mode 0600 is read");
    uvmrt__monread_free(&p);
    cr_assert_eq(truncate(path, (off_t)(65ll << 20)), 0);
    cr_assert_eq(uvmrt__monread_one(name, &p), MONREAD_BAD, "65 MiB: more than a snapshot needs");
    unlink(path);
    net_destroy(net);
}

/* Escape sequences, a C1 control and bytes that are not UTF-8 in every string of a
 * snapshot reach neither the copy nor uvmrt-top's text. */
Test(monitor, strings_of_a_segment_are_sanitized)
{
    char buf[64] = "a\033]0;owned\007b\302\233c\377d\303\251";
    uvmrt__monread_sanitize(buf, sizeof buf);
    cr_assert_str_eq(buf, "a?]0;owned?b??c?d\303\251", "each byte of C0, C1 and bad sequences becomes '?', é stays");
    char full[8];
    memset(full, 'x', sizeof full); /* no NUL: ends at cap - 1 */
    uvmrt__monread_sanitize(full, sizeof full);
    cr_assert_str_eq(full, "xxxxxxx");

    plant_file(2, 0600, UVMRT_MON_MAGIC, 0);
    char path[128], name[64];
    planted_path(path, sizeof path, 2);
    planted_name(name, sizeof name, 2);
    int fd = open(path, O_RDWR);
    cr_assert_geq(fd, 0);
    uvmrt_mon_header_t *h = mmap(NULL, UVMRT_MON_BYTES(4), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    cr_assert_neq(h, MAP_FAILED);
    h->snap.pid = getpid();
    h->snap.n_layers = 1;
    memset(h->snap.program, 'P', sizeof h->snap.program); /* no NUL at all */
    memcpy(h->snap.program, "\033[2J\033]0;x\007", 11);
    snprintf(h->snap.backend, sizeof h->snap.backend, "\033[31m");
    snprintf(h->snap.policy, sizeof h->snap.policy, "p\033c");
    snprintf(h->snap.profile, sizeof h->snap.profile, "\302\233" "31m");
    uvmrt_mon_layer_t *row = (uvmrt_mon_layer_t *)((char *)h + UVMRT_MON_HEADER_BYTES);
    snprintf(row->name, sizeof row->name, "layer\033[1A");
    snprintf(row->mechanism, sizeof row->mechanism, "\033[0m");
    munmap(h, UVMRT_MON_BYTES(4));
    close(fd);
    uvmrt_mon_proc_t p = read_ok(name);
    cr_assert_null(memchr(p.snap.program, '\033', sizeof p.snap.program));
    cr_assert_eq(p.snap.program[sizeof p.snap.program - 1], '\0');
    cr_assert_str_eq(p.snap.backend, "?[31m");
    cr_assert_str_eq(p.snap.policy, "p?c");
    cr_assert_str_eq(p.snap.profile, "??31m");
    cr_assert_str_eq(p.layers[0].name, "layer?[1A");
    cr_assert_str_eq(p.layers[0].mechanism, "?[0m");
    uvmrt__monread_free(&p);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' --once -p %d", UVMRT_TOP_PATH, (int)getpid());
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char out[8192];
    size_t k = fread(out, 1, sizeof out - 1, f);
    out[k] = '\0';
    int st = pclose(f);
    unlink(path);
    cr_assert_eq(WEXITSTATUS(st), 0, "%s", out);
    cr_assert_not_null(strstr(out, "layer?[1A"), "%s", out);
    for (size_t i = 0; i < k; i++)
        cr_assert(out[i] == '\n' || (unsigned char)out[i] >= 0x20, "a control byte 0x%02x in uvmrt-top's text at %zu",
                  (unsigned char)out[i], i);
}

/* Fifty junk segments (no magic, or a seqlock left odd) cost a frame well under a
 * second, not 100 ms each. */
Test(monitor, fifty_junk_segments_do_not_stall_a_frame)
{
    alarm(60); /* a hang fails the test; not Criterion's .timeout: two tests with one, run in parallel, leak 48 bytes in its 2.4.1 runner (CI's LeakSanitizer stage) */
    for (int k = 0; k < 50; k++) plant_file(10 + k, 0600, k % 2 ? UVMRT_MON_MAGIC : 0, k % 2 ? 1 : 0);
    uvmrt_mon_proc_t *procs = NULL;
    size_t n = 0;
    double t0 = mono_s();
    int st = uvmrt__monread_list(getpid(), &procs, &n, NULL);
    double dt = mono_s() - t0;
    for (int k = 0; k < 50; k++) unplant(10 + k);
    cr_assert_eq(st, MONREAD_OK);
    cr_assert_eq(n, 0, "none of them is a snapshot");
    uvmrt__monread_free_all(procs, n);
    cr_assert_lt(dt, 1.0, "listing 50 junk segments took %.2f s", dt);
}
