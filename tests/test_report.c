/*
 * test_report.c -- the report writers: JSON and trace files parse with jansson
 * and carry the documented keys; CSV has one row per (step, layer, phase) that
 * ran; the text table has units, a totals row and marked offenders; UVMRT_TRACE
 * and UVMRT_REPORT=csv:PATH write at destroy.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

static char dir[64];

static void mkdir_tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/uvmrt-report-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void rm_file(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

/* A 6-layer net on sim, run for `steps` steps. */
static net_t *run(uvmrt_policy_t policy, int steps, const char *report, const char *trace)
{
    uvmrt_params_t p;
    sim_params(&p, policy, 16 * MIB, NULL);
    p.report = report;
    p.trace = trace;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, steps, NULL, NULL);
    return net;
}

static const char *const PHASE_KEYS[] = {"calls", "sampled_calls", "prefetch_bytes", "evict_bytes", "fault_count", "wait_ns",
                                         "gpu_faults", "fault_htod_bytes", "prefetch_htod_bytes",
                                         "driver_prefetch_htod_bytes", "evict_dtoh_bytes", "thrashing",
                                         "cpu_faults"};

Test(report, json_has_fault_keys)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_DEMAND, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s: %s", path, err.text);
    cr_expect_str_eq(json_string_value(json_object_get(root, "fault_stats_source")), "sim");
    json_t *un = json_object_get(root, "unattributed");
    cr_assert(json_is_object(un));
    cr_expect(json_is_integer(json_object_get(un, "records")));
    cr_expect(json_is_integer(json_object_get(un, "gpu_faults")));
    cr_expect(json_is_integer(json_object_get(root, "fault_records_lost")));
    cr_expect_eq(json_integer_value(json_object_get(root, "fault_records_lost")), 0);
    cr_expect(json_is_object(json_object_get(root, "fault_sampling")));
    json_t *layers = json_object_get(root, "layers");
    cr_assert_eq(json_array_size(layers), 6);
    uint64_t faults = 0;
    for (size_t l = 0; l < json_array_size(layers); l++) {
        json_t *fw = json_object_get(json_array_get(layers, l), "forward");
        cr_assert(json_is_object(fw));
        for (size_t k = 0; k < sizeof PHASE_KEYS / sizeof PHASE_KEYS[0]; k++)
            cr_expect(json_is_integer(json_object_get(fw, PHASE_KEYS[k])), "forward lacks %s", PHASE_KEYS[k]);
        faults += (uint64_t)json_integer_value(json_object_get(fw, "gpu_faults"));
    }
    cr_expect_gt(faults, 0);
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 3);
    cr_expect(json_is_integer(json_object_get(json_array_get(steps, 0), "gpu_faults")));
    json_decref(root);
    net_destroy(net);
    rm_file("r.json");
    rmdir(dir);
}

Test(report, csv_rows_are_steps_layers_phases)
{
    mkdir_tmp();
    const int steps = 4;
    net_t *net = run(UVMRT_POLICY_PREFETCH, steps, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/r.csv", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "csv", path), UVMRT_OK);
    char *text = file_slurp(path);
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    /* header + steps x layers x 3 phases (each phase runs in this net) */
    cr_expect_eq(lines, 1 + steps * 6 * 3, "%d lines:\n%s", lines, text);
    cr_expect_eq(strncmp(text, "policy,backend,fault_stats_source,step,layer,name,phase,", 56), 0);
    cr_expect_not_null(strstr(text, "\nprefetch,sim,sim,4,5,\"layer5\",optimizer,1,"), "%s", text);
    /* every row has as many fields as the header */
    int header_fields = 1;
    for (char *c = text; *c != '\n'; c++) header_fields += *c == ',';
    for (char *line = strchr(text, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        int f = 1;
        for (char *c = line; *c != '\n'; c++) f += *c == ',';
        cr_expect_eq(f, header_fields);
    }
    free(text);
    net_destroy(net);
    rm_file("r.csv");
    rmdir(dir);
}

Test(report, trace_parses_with_spans_copies_and_faults)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_PREFETCH, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "trace", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    cr_assert(json_is_array(ev));
    int layer_spans = 0, copies = 0, counters = 0;
    double last_end = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        cr_assert_not_null(ph);
        cr_assert_not_null(name);
        cr_expect(json_is_number(json_object_get(e, "ts")));
        cr_expect(json_is_integer(json_object_get(e, "pid")));
        cr_expect(json_is_integer(json_object_get(e, "tid")));
        if (strcmp(ph, "X") == 0) {
            cr_expect(json_number_value(json_object_get(e, "dur")) >= 0);
            int tid = (int)json_integer_value(json_object_get(e, "tid"));
            if (tid == 1) {
                layer_spans++;
                double ts = json_number_value(json_object_get(e, "ts"));
                cr_expect(ts + 1e-3 >= last_end, "spans in order: %f < %f", ts, last_end);
                last_end = ts + json_number_value(json_object_get(e, "dur"));
            } else {
                copies++;
                cr_expect(json_is_integer(json_object_get(json_object_get(e, "args"), "bytes")));
            }
        }
        if (strcmp(ph, "C") == 0) counters++;
    }
    cr_expect_eq(layer_spans, 3 * 6 * 3);
    cr_expect_gt(copies, 0);
    cr_expect_gt(counters, 0); /* step 1 runs like demand: faults */
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(ev, 3), "name")), "layer0 forward"));
    json_decref(root);
    net_destroy(net);
    rm_file("t.json");
    rmdir(dir);
}

Test(report, text_table_units_totals_offenders)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 2, NULL, NULL);
    mkdir_tmp();
    char path[256];
    snprintf(path, sizeof path, "%s/r.txt", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", path), UVMRT_OK);
    char *text = file_slurp(path);
    cr_expect_not_null(strstr(text, "MiB"), "%s", text);
    cr_expect_not_null(strstr(text, "\ntotal "), "%s", text);
    cr_expect_not_null(strstr(text, " *"), "%s", text);
    cr_expect_not_null(strstr(text, "* most faults"), "%s", text);
    cr_expect_not_null(strstr(text, "fault statistics: sim"), "%s", text);
    free(text);
    net_destroy(net);
    rm_file("r.txt");
    rmdir(dir);
}

Test(report, csv_and_trace_at_destroy)
{
    mkdir_tmp();
    char rep[300], trace[256], csv[256];
    snprintf(csv, sizeof csv, "%s/d.csv", dir);
    snprintf(rep, sizeof rep, "csv:%s", csv);
    snprintf(trace, sizeof trace, "%s/d.trace.json", dir);
    net_destroy(run(UVMRT_POLICY_PREFETCH, 2, rep, trace));
    char *text = file_slurp(csv);
    int lines = 0;
    for (char *c = text; *c; c++) lines += *c == '\n';
    cr_expect_eq(lines, 1 + 2 * 6 * 3);
    free(text);
    json_error_t err;
    json_t *root = json_load_file(trace, 0, &err);
    cr_expect_not_null(root, "%s", err.text);
    json_decref(root);
    rm_file("d.csv");
    rm_file("d.trace.json");
    rmdir(dir);
}

Test(report, env_trace_and_bad_format)
{
    env_clear_uvmrt();
    mkdir_tmp();
    char trace[256];
    snprintf(trace, sizeof trace, "%s/e.json", dir);
    setenv("UVMRT_TRACE", trace, 1);
    setenv("UVMRT_FAULT_STATS", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    uvmrt_summary_get(ctx, &s);
    cr_expect_str_eq(s.fault_stats_source, "none");
    cr_expect_eq(uvmrt_report_write(ctx, "xml", "-"), UVMRT_ERR_INVALID);
    cr_expect(log_contains("expected text, json, csv or trace"), "%s", log_text());
    uvmrt_context_destroy(ctx);
    cr_expect_eq(access(trace, R_OK), 0);
    setenv("UVMRT_FAULT_STATS", "2", 1);
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_expect(log_contains("UVMRT_FAULT_STATS='2'"), "%s", log_text());
    rm_file("e.json");
    rmdir(dir);
}

/* ------------------------------------------------------------------ what is at the path */
static void path_in_dir(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

/* Entries of dir other than . and .. */
static int entries(void)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* A link to a regular file: the report replaces the link's target, which keeps its
 * mode; the link stays a link and no temporary file is left. */
Test(report, symlink_to_regular_file_writes_through)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    mkdir_tmp();
    char target[256], link[256];
    path_in_dir(target, sizeof target, "target.json");
    path_in_dir(link, sizeof link, "link.json");
    FILE *f = fopen(target, "w");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    cr_assert_eq(chmod(target, 0600), 0);
    cr_assert_eq(symlink("target.json", link), 0);
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", link), UVMRT_OK, "%s", log_text());
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), 0);
    cr_expect(S_ISLNK(sb.st_mode), "the link was replaced by a file");
    cr_assert_eq(lstat(target, &sb), 0);
    cr_expect(S_ISREG(sb.st_mode));
    cr_expect_eq(sb.st_mode & 0777, 0600, "target mode %o, want its old 600", (unsigned)(sb.st_mode & 0777));
    json_error_t err;
    json_t *root = json_load_file(target, 0, &err);
    cr_expect_not_null(root, "the target does not hold the report: %s", err.text);
    json_decref(root);
    cr_expect_eq(entries(), 2, "a temporary file was left");
    unlink(link);
    unlink(target);
    rmdir(dir);
    net_destroy(net);
}

/* A dangling link, a link to a directory: refused, nothing created, the link kept. */
Test(report, dangling_symlink_and_link_to_directory_refused)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    mkdir_tmp();
    char link[256], missing[256], sub[256], link2[256];
    path_in_dir(link, sizeof link, "dangling.json");
    path_in_dir(missing, sizeof missing, "missing.json");
    path_in_dir(sub, sizeof sub, "sub");
    path_in_dir(link2, sizeof link2, "todir");
    cr_assert_eq(symlink("missing.json", link), 0);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "text", link), UVMRT_ERR_IO);
    cr_expect(log_contains(link), "the message does not name the path: %s", log_text());
    cr_expect(log_contains("symbolic link to nothing"), "%s", log_text());
    struct stat sb;
    cr_expect_neq(lstat(missing, &sb), 0, "the link's target was created");
    cr_assert_eq(lstat(link, &sb), 0);
    cr_expect(S_ISLNK(sb.st_mode));
    cr_assert_eq(mkdir(sub, 0755), 0);
    cr_assert_eq(symlink("sub", link2), 0);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "csv", link2), UVMRT_ERR_IO);
    cr_expect(log_contains("a symbolic link to a directory"), "%s", log_text());
    cr_expect_eq(entries(), 3, "something was created");
    unlink(link);
    unlink(link2);
    rmdir(sub);
    rmdir(dir);
    net_destroy(net);
}

/* A FIFO is written in place (a pipe to another program); without a reader the
 * write fails at once instead of hanging, and the FIFO stays a FIFO either way. */
Test(report, fifo_written_in_place_or_refused_without_reader)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    mkdir_tmp();
    char fifo[256];
    path_in_dir(fifo, sizeof fifo, "pipe");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    log_reset();
    cr_expect_eq(uvmrt_report_write(net->ctx, "text", fifo), UVMRT_ERR_IO);
    cr_expect(log_contains("FIFO with no reader"), "%s", log_text());
    int rd = open(fifo, O_RDONLY | O_NONBLOCK);
    cr_assert_geq(rd, 0);
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", fifo), UVMRT_OK, "%s", log_text());
    char buf[4096];
    ssize_t n = read(rd, buf, sizeof buf - 1);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_expect_not_null(strstr(buf, "uvmrt "), "%s", buf);
    close(rd);
    struct stat sb;
    cr_assert_eq(lstat(fifo, &sb), 0);
    cr_expect(S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    cr_expect_eq(entries(), 1);
    unlink(fifo);
    rmdir(dir);
    net_destroy(net);
}

/* /dev/null (a character device) is written in place, never replaced: directly and
 * through a link, as a report at destroy too. */
Test(report, dev_null_never_replaced)
{
    struct stat before, after;
    cr_assert_eq(stat("/dev/null", &before), 0);
    mkdir_tmp();
    char link[256];
    path_in_dir(link, sizeof link, "null");
    cr_assert_eq(symlink("/dev/null", link), 0);
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, "json:/dev/null", "/dev/null");
    cr_expect_eq(uvmrt_report_write(net->ctx, "text", "/dev/null"), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_report_write(net->ctx, "trace", link), UVMRT_OK, "%s", log_text());
    net_destroy(net);
    cr_assert_eq(stat("/dev/null", &after), 0);
    cr_expect(S_ISCHR(after.st_mode));
    cr_expect_eq(after.st_rdev, before.st_rdev);
    cr_expect_eq(after.st_ino, before.st_ino);
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), 0);
    cr_expect(S_ISLNK(sb.st_mode));
    unlink(link);
    rmdir(dir);
}

/* Reading the umask means setting it; the writer must not, so it stays as set, and
 * a new report gets 0666 less it. */
Test(report, umask_untouched_and_applied)
{
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    mkdir_tmp();
    char path[256];
    path_in_dir(path, sizeof path, "r.csv");
    umask(027);
    cr_assert_eq(uvmrt_report_write(net->ctx, "csv", path), UVMRT_OK);
    cr_expect_eq(umask(022), 027);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_expect_eq(sb.st_mode & 0777, 0640, "mode %o, want 640 under umask 027", (unsigned)(sb.st_mode & 0777));
    unlink(path);
    rmdir(dir);
    net_destroy(net);
}

/* ------------------------------------------------------------------ "-" is stdout */
/* Runs fn with file descriptor out (1 or 2) sent to a file, and returns what it wrote
 * (caller frees). */
static char *capture_fd(int out, void (*fn)(void *), void *arg)
{
    char path[256];
    path_in_dir(path, sizeof path, "captured.txt");
    fflush(stdout);
    fflush(stderr);
    int saved = dup(out);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    dup2(fd, out);
    close(fd);
    fn(arg);
    fflush(stdout);
    fflush(stderr);
    dup2(saved, out);
    close(saved);
    char *text = file_slurp(path);
    unlink(path);
    return text;
}

static void destroy_net(void *arg) { net_destroy(arg); }

/* UVMRT_REPORT=json:- and UVMRT_TRACE=- write to stdout, as uvmrt_report_write's
 * "-" does; no file named "-" appears. */
Test(report, dash_is_stdout_in_env)
{
    env_clear_uvmrt();
    mkdir_tmp();
    cr_assert_eq(chdir(dir), 0);
    setenv("UVMRT_REPORT", "json:-", 1);
    setenv("UVMRT_TRACE", "-", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 1, NULL, NULL);
    char *out = capture_fd(1, destroy_net, net);
    cr_expect_not_null(strstr(out, "\"traceEvents\""), "no trace on stdout:\n%.400s", out);
    cr_expect_not_null(strstr(out, "\"budget_bytes\""), "no JSON report on stdout:\n%.400s", out);
    struct stat sb;
    cr_expect_neq(lstat("-", &sb), 0, "a file named - was written");
    free(out);
    cr_assert_eq(chdir("/"), 0);
    rmdir(dir);
}

/* UVMRT_TRACE=stderr writes the timeline to stderr; UVMRT_REPORT=text:- the table
 * to stdout. */
Test(report, trace_to_stderr_and_text_to_stdout)
{
    env_clear_uvmrt();
    mkdir_tmp();
    cr_assert_eq(chdir(dir), 0);
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, "text:-", "stderr");
    char *err = capture_fd(2, destroy_net, net);
    cr_expect_not_null(strstr(err, "\"traceEvents\""), "no trace on stderr:\n%.400s", err);
    free(err);
    net = run(UVMRT_POLICY_DEMAND, 1, "text:-", NULL);
    char *out = capture_fd(1, destroy_net, net);
    cr_expect_not_null(strstr(out, "\ntotal "), "no text report on stdout:\n%.400s", out);
    free(out);
    struct stat sb;
    cr_expect_neq(lstat("stderr", &sb), 0, "a file named stderr was written");
    cr_expect_neq(lstat("-", &sb), 0, "a file named - was written");
    cr_assert_eq(chdir("/"), 0);
    rmdir(dir);
}

/* UVMRT_TRACE takes none, stderr, - or a path that is not blank; anything else is
 * refused by name, from the environment and from params. */
Test(report, trace_setting_validated)
{
    static const char *const bad[] = {"", " ", "\t", "auto", "1", "on"};
    uvmrt_params_t p;
    uvmrt_context_t *ctx = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        env_clear_uvmrt();
        setenv("UVMRT_TRACE", bad[i], 1);
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.ignore_env = 0;
        log_reset();
        cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG, "UVMRT_TRACE='%s' accepted", bad[i]);
        cr_expect(log_contains("UVMRT_TRACE='") && log_contains("expected none, stderr, - (stdout) or a file path"),
                  "%s", log_text());
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.trace = bad[i];
        log_reset();
        cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_INVALID, "params.trace '%s' accepted", bad[i]);
        cr_expect(log_contains("params.trace = '"), "%s", log_text());
    }
    static const char *const bad_report[] = {"json: ", "text:auto", "csv:"};
    for (size_t i = 0; i < sizeof bad_report / sizeof bad_report[0]; i++) {
        env_clear_uvmrt();
        setenv("UVMRT_REPORT", bad_report[i], 1);
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.ignore_env = 0;
        cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG, "UVMRT_REPORT='%s' accepted", bad_report[i]);
    }
    static const char *const good[] = {"none", "stderr", "-", "./auto", "trace.json"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        env_clear_uvmrt();
        sim_params(&p, UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
        p.trace = good[i];
        cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "params.trace '%s' refused: %s", good[i], log_text());
        ctx->cfg.trace[0] = '\0'; /* created to check the setting, not to write a trace */
        uvmrt_context_destroy(ctx);
    }
}

/* ------------------------------------------------------------------ one counter list */
/* The reports' counter keys and columns come from UVMRT_COUNTERS and nothing else:
 * each JSON layer phase holds exactly the listed counters, a step exactly those with
 * step = 1 (plus what only a step has), the unattributed object exactly the DRIVER
 * ones, and the CSV header exactly the csv = 1 ones. */
#define ALL_NAME(name, ...) #name,
#define STEP_NAME(name, tag, src, step, ...) UVMRT__IF_##step(#name, )
#define DRIVER_NAME(name, tag, src, ...) UVMRT__DRIVER_##src(#name, )
#define CSV_NAME(name, tag, src, step, sum, csv, ...) UVMRT__IF_##csv(#name, )
static const char *const LIST_ALL[] = {UVMRT_COUNTERS(ALL_NAME)};
static const char *const LIST_STEP[] = {UVMRT_COUNTERS(STEP_NAME) "step_ns", "peak_resident_bytes", "h2d_busy_ns",
                                        "d2h_busy_ns", "fault_sampled"};
static const char *const LIST_UNATTR[] = {UVMRT_COUNTERS(DRIVER_NAME) "records"};
static const char *const LIST_CSV[] = {"policy", "backend", "fault_stats_source", "step", "layer", "name", "phase",
                                       UVMRT_COUNTERS(CSV_NAME) "step_ns", "fault_sampled",
                                       "plan_host_bytes"};
#define LEN(a) (sizeof a / sizeof a[0])

static void expect_exact_keys(json_t *o, const char *const *keys, size_t n, const char *what)
{
    cr_assert(json_is_object(o), "%s is not an object", what);
    cr_expect_eq(json_object_size(o), n, "%s has %zu keys, the list names %zu", what, json_object_size(o), n);
    for (size_t k = 0; k < n; k++) cr_expect_not_null(json_object_get(o, keys[k]), "%s lacks %s", what, keys[k]);
}

Test(report, counter_list_gives_json_keys_and_csv_columns)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_PREFETCH, 2, NULL, NULL);
    char path[256];
    path_in_dir(path, sizeof path, "r.json");
    cr_assert_eq(uvmrt_report_write(net->ctx, "json", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *layers = json_object_get(root, "layers");
    for (size_t l = 0; l < json_array_size(layers); l++)
        for (int p = 0; p < UVMRT_PHASE_COUNT; p++)
            expect_exact_keys(json_object_get(json_array_get(layers, l), uvmrt_phase_name((uvmrt_phase_t)p)), LIST_ALL,
                              LEN(LIST_ALL), "a layer phase");
    json_t *steps = json_object_get(root, "steps");
    cr_assert_eq(json_array_size(steps), 2);
    expect_exact_keys(json_array_get(steps, 1), LIST_STEP, LEN(LIST_STEP), "a step");
    expect_exact_keys(json_object_get(root, "unattributed"), LIST_UNATTR, LEN(LIST_UNATTR), "unattributed");
    cr_expect(json_is_integer(json_object_get(root, "backend_errors")));
    json_decref(root);
    unlink(path);
    path_in_dir(path, sizeof path, "r.csv");
    cr_assert_eq(uvmrt_report_write(net->ctx, "csv", path), UVMRT_OK);
    char *text = file_slurp(path);
    char want[4096] = "";
    for (size_t i = 0; i < LEN(LIST_CSV); i++) {
        if (i > 0) strcat(want, ",");
        strcat(want, LIST_CSV[i]);
    }
    strcat(want, "\n");
    cr_expect_eq(strncmp(text, want, strlen(want)), 0, "CSV header:\n%.*s\nlist:\n%s", (int)strcspn(text, "\n"), text,
                 want);
    free(text);
    unlink(path);
    rmdir(dir);
    net_destroy(net);
}

/* Each counter's value reaches its own JSON key, CSV column and text column: the
 * counters of layer 0's forward phase (and of step 0's layer 0 forward row) are set
 * to distinct values through the list, then read back from the reports. */
Test(report, counter_list_carries_each_value)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    uvmrt_context_t *ctx = net->ctx;
    uvmrt_layer_stats_t *ls = &ctx->tensors.layers[0].stats[UVMRT_PHASE_FORWARD];
    cr_assert_gt(ctx->hist.n_rows, 0);
    uvmrt_step_row_t *row = &ctx->hist.rows[0];
    cr_assert(row->layer == 0 && row->phase == UVMRT_PHASE_FORWARD);
    uint64_t k = 0;
#define SET(name, ...) ls->name = row->s.name = (++k) * 1000003ull;
    UVMRT_COUNTERS(SET)
#undef SET
    char path[256];
    path_in_dir(path, sizeof path, "v.json");
    cr_assert_eq(uvmrt_report_write(ctx, "json", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *fw = json_object_get(json_array_get(json_object_get(root, "layers"), 0), "forward");
    k = 0;
#define CHECK(name, ...)                                                                                         \
    k++;                                                                                                         \
    cr_expect_eq((uint64_t)json_integer_value(json_object_get(fw, #name)), k * 1000003ull, "JSON %s", #name);
    UVMRT_COUNTERS(CHECK)
#undef CHECK
    json_decref(root);
    unlink(path);
    path_in_dir(path, sizeof path, "v.csv");
    cr_assert_eq(uvmrt_report_write(ctx, "csv", path), UVMRT_OK);
    char *text = file_slurp(path);
    char *line = strchr(text, '\n') + 1; /* row 0: step 0, layer 0, forward */
    /* fields after "phase" (the 7th) are the csv counters in list order */
    char *field = line;
    for (int i = 0; i < 7; i++) field = strchr(field, ',') + 1;
    k = 0;
#define CHECK_CSV(name, tag, src, step, sum, csv, ...)                                                           \
    k++;                                                                                                         \
    UVMRT__IF_##csv(cr_expect_eq(strtoull(field, &field, 10), k * 1000003ull, "CSV %s", #name); field++;)
    UVMRT_COUNTERS(CHECK_CSV)
#undef CHECK_CSV
    free(text);
    unlink(path);
    /* the text table: calls (the first column) reads 1000003 on layer0's forward row */
    path_in_dir(path, sizeof path, "v.txt");
    cr_assert_eq(uvmrt_report_write(ctx, "text", path), UVMRT_OK);
    text = file_slurp(path);
    cr_expect_not_null(strstr(text, "\nlayer0           forward   1000003 "), "%s", text);
    free(text);
    unlink(path);
    rmdir(dir);
    net_destroy(net);
}

/* The text table's columns are the ranked entries of the list, in rank order. */
Test(report, counter_list_gives_text_columns)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_DEMAND, 1, NULL, NULL);
    char path[256];
    path_in_dir(path, sizeof path, "c.txt");
    cr_assert_eq(uvmrt_report_write(net->ctx, "text", path), UVMRT_OK);
    char *text = file_slurp(path);
    char *header = strstr(text, "\nlayer ");
    cr_assert_not_null(header, "%s", text);
    struct text_col { int rank; const char *label; } cols[64];
    int n = 0;
#define COL(name, tag, src, step, sum, csv, rank, label, ...) \
    if (rank > 0) cols[n++] = (struct text_col){rank, label};
    UVMRT_COUNTERS(COL)
#undef COL
    int prev_rank = 0;
    char *at = header + strlen("\nlayer ");
    for (int done = 0; done < n; done++) {
        int next = -1;
        for (int i = 0; i < n; i++)
            if (cols[i].rank > prev_rank && (next < 0 || cols[i].rank < cols[next].rank)) next = i;
        cr_assert_geq(next, 0);
        char word[32];
        snprintf(word, sizeof word, " %s", cols[next].label);
        char *found = strstr(at, word);
        cr_expect(found != NULL && found < strchr(header + 1, '\n'), "column %s missing or out of order", cols[next].label);
        if (found) at = found + strlen(word);
        prev_rank = cols[next].rank;
    }
    free(text);
    unlink(path);
    rmdir(dir);
    net_destroy(net);
}

/* ------------------------------------------------------------------ names escaped, never dropped */
/* Layer names that are not valid UTF-8 (a stray byte, a character cut short, an
 * overlong form, a surrogate) or hold quotes, commas and newlines: every report
 * keeps every row and shows the same valid UTF-8 name, invalid bytes as U+FFFD. */
#define FFFD "\xEF\xBF\xBD"
static const char *const RAW_NAMES[] = {"plain", "bad\xff" "x", "cut\xe2\x82", "q\"c,\nn", "eur\xe2\x82\xac",
                                        "over\xc0\xaf", "sur\xed\xa0\x80", "\xe2\x82\xac\xe2\x82\xac long enough to be cut"};
static const char *const CLEAN_NAMES[] = {"plain", "bad" FFFD "x", "cut" FFFD FFFD, "q\"c,\nn", "eur\xe2\x82\xac",
                                          "over" FFFD FFFD, "sur" FFFD FFFD FFFD,
                                          "\xe2\x82\xac\xe2\x82\xac long enough to be cut"};
#define N_NAMES (int)(sizeof RAW_NAMES / sizeof RAW_NAMES[0])

static uvmrt_context_t *named_layers_run(void)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 16 * MIB, NULL);
    int layer[N_NAMES];
    for (int i = 0; i < N_NAMES; i++) {
        cr_assert_eq(uvmrt_layer_add(ctx, RAW_NAMES[i], &layer[i]), UVMRT_OK);
        uvmrt_tensor_desc_t d = {NULL, layer[i], UVMRT_ROLE_WEIGHT, 1 * MIB};
        uvmrt_tensor_t *t;
        cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    }
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        for (int i = 0; i < N_NAMES; i++) {
            uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = layer[i], .phase = UVMRT_PHASE_FORWARD, .sim_duration_ns = 10000};
            cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
            cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        }
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
    return ctx;
}

Test(report, names_escaped_never_dropped)
{
    mkdir_tmp();
    uvmrt_context_t *ctx = named_layers_run();
    char path[256];
    json_error_t err;
    /* JSON: every layer, its name cleaned */
    path_in_dir(path, sizeof path, "n.json");
    cr_assert_eq(uvmrt_report_write(ctx, "json", path), UVMRT_OK, "%s", log_text());
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *layers = json_object_get(root, "layers");
    cr_assert_eq(json_array_size(layers), (size_t)N_NAMES);
    for (int i = 0; i < N_NAMES; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(layers, (size_t)i), "name"));
        cr_assert_not_null(name, "layer %d lost its name", i);
        cr_expect_str_eq(name, CLEAN_NAMES[i], "layer %d", i);
    }
    json_decref(root);
    unlink(path);
    /* trace: every call's span, named "<clean name> forward" */
    path_in_dir(path, sizeof path, "n.trace");
    cr_assert_eq(uvmrt_report_write(ctx, "trace", path), UVMRT_OK, "%s", log_text());
    root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    for (int i = 0; i < N_NAMES; i++) {
        char want[256];
        snprintf(want, sizeof want, "%s forward", CLEAN_NAMES[i]);
        int found = 0;
        for (size_t e = 0; e < json_array_size(ev); e++) {
            const char *name = json_string_value(json_object_get(json_array_get(ev, e), "name"));
            found += name != NULL && strcmp(name, want) == 0;
        }
        cr_expect_eq(found, 2, "trace: '%s' %d times, want one per step", want, found);
    }
    json_decref(root);
    unlink(path);
    /* CSV: the name quoted, inner quotes doubled, one row per step and layer */
    path_in_dir(path, sizeof path, "n.csv");
    cr_assert_eq(uvmrt_report_write(ctx, "csv", path), UVMRT_OK, "%s", log_text());
    char *text = file_slurp(path);
    json_t *csv_valid = json_string(text);
    cr_expect_not_null(csv_valid, "the CSV is not valid UTF-8");
    json_decref(csv_valid);
    for (int i = 0; i < N_NAMES; i++) {
        char want[256], *w = want;
        *w++ = ',';
        *w++ = '"';
        for (const char *c = CLEAN_NAMES[i]; *c; c++) {
            if (*c == '"') *w++ = '"';
            *w++ = *c;
        }
        snprintf(w, sizeof want - (size_t)(w - want), "\",forward,");
        int n = 0;
        for (const char *at = text; (at = strstr(at, want)) != NULL; at++) n++;
        cr_expect_eq(n, 2, "CSV: %s %d times", want, n);
    }
    free(text);
    unlink(path);
    /* text: valid UTF-8, one row per layer (a newline in a name shows as ?) */
    path_in_dir(path, sizeof path, "n.txt");
    cr_assert_eq(uvmrt_report_write(ctx, "text", path), UVMRT_OK, "%s", log_text());
    text = file_slurp(path);
    json_t *valid = json_string(text);
    cr_expect_not_null(valid, "the text report is not valid UTF-8:\n%s", text);
    json_decref(valid);
    int rows = 0;
    for (char *line = text; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != '\0')) {
        char *hit = strstr(line, " forward ");
        rows += hit != NULL && hit < line + strcspn(line, "\n");
    }
    /* each layer once in the steady-state table and once in the recording step's */
    cr_expect_eq(rows, 2 * N_NAMES, "%d rows:\n%s", rows, text);
    cr_expect_not_null(strstr(text, "\nq\"c,?n           forward "), "%s", text);
    cr_expect_not_null(strstr(text, "\n\xe2\x82\xac\xe2\x82\xac long enough t forward "), "cut at 16 characters:\n%s", text);
    free(text);
    unlink(path);
    rmdir(dir);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ out of memory */
/* jansson's allocations fail from the k-th on, for every k until the report can be
 * built: each attempt fails with UVMRT_ERR_NOMEM and a message, and leaves the
 * existing report as it was; none passes as written with something missing. */
static long allocs_left;
static void *failing_malloc(size_t n) { return allocs_left-- > 0 ? malloc(n) : NULL; }

static void sweep_nomem(uvmrt_context_t *ctx, const char *format)
{
    char path[256];
    path_in_dir(path, sizeof path, format);
    cr_assert_eq(uvmrt_report_write(ctx, format, path), UVMRT_OK);
    char *good = file_slurp(path);
    long k = 0;
    for (;; k++) {
        cr_assert_lt(k, 1000000, "%s: no end to the allocations", format);
        allocs_left = k;
        log_reset();
        json_set_alloc_funcs(failing_malloc, free);
        uvmrt_status_t st = uvmrt_report_write(ctx, format, path);
        json_set_alloc_funcs(malloc, free);
        if (st == UVMRT_OK) break;
        cr_assert_eq(st, UVMRT_ERR_NOMEM, "%s, allocation %ld failing: %s", format, k, uvmrt_status_name(st));
        cr_expect(log_contains("out of memory"), "%s", log_text());
        char *now = file_slurp(path);
        cr_assert_str_eq(now, good, "%s: a failed write changed the report", format);
        free(now);
    }
    cr_expect_gt(k, 10, "%s: only %ld allocations swept", format, k);
    char *now = file_slurp(path);
    cr_expect_str_eq(now, good);
    free(now);
    free(good);
    unlink(path);
}

Test(report, jansson_out_of_memory_is_nomem)
{
    mkdir_tmp();
    uvmrt_context_t *ctx = named_layers_run();
    sweep_nomem(ctx, "json");
    sweep_nomem(ctx, "trace");
    cr_expect_eq(entries(), 0, "temporary files left");
    rmdir(dir);
    uvmrt_context_destroy(ctx);
}

/* The clearer timeline (issue 10): the process's name, a global marker at each
 * step's start (numbered from 1), waits as slices of their own (B/E), and a
 * resident-bytes counter at each layer call. */
Test(report, trace_has_step_markers_waits_and_resident_bytes)
{
    mkdir_tmp();
    net_t *net = run(UVMRT_POLICY_PREFETCH, 3, NULL, NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/t.json", dir);
    cr_assert_eq(uvmrt_report_write(net->ctx, "trace", path), UVMRT_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    cr_assert_not_null(root, "%s", err.text);
    json_t *ev = json_object_get(root, "traceEvents");
    const uvmrt_context_t *ctx = net->ctx;
    size_t waits = 0;
    for (size_t i = 0; i < ctx->hist.n_spans; i++) waits += ctx->hist.spans[i].wait_end_ns > ctx->hist.spans[i].start_ns;
    int pname = 0, markers = 0, begins = 0, ends = 0, resident = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *args = json_object_get(e, "args");
        if (strcmp(ph, "M") == 0 && strcmp(name, "process_name") == 0) {
            pname++;
            cr_expect_not_null(strstr(json_string_value(json_object_get(args, "name")), "policy prefetch"));
        } else if (strcmp(ph, "i") == 0) {
            markers++;
            char want[32];
            snprintf(want, sizeof want, "step %d", markers);
            cr_expect_str_eq(name, want, "steps numbered from 1, in order");
            cr_expect_str_eq(json_string_value(json_object_get(e, "s")), "g");
            /* at the start of the step's first layer call */
            const uvmrt_span_t *first = NULL;
            for (size_t k = 0; k < ctx->hist.n_spans && first == NULL; k++)
                if (ctx->hist.spans[k].step + 1 == (uint64_t)markers) first = &ctx->hist.spans[k];
            cr_assert_not_null(first);
            cr_expect_float_eq(json_number_value(json_object_get(e, "ts")), first->start_ns / 1e3, 1e-6);
        } else if (strcmp(ph, "B") == 0 || strcmp(ph, "E") == 0) {
            cr_expect_str_eq(name, "wait for prefetches");
            if (ph[0] == 'B') begins++;
            else ends++;
        } else if (strcmp(ph, "C") == 0 && strcmp(name, "resident bytes") == 0) {
            resident++;
            cr_expect_leq(json_integer_value(json_object_get(args, "bytes")), (json_int_t)uvmrt_context_budget(ctx));
        }
    }
    cr_expect_eq(pname, 1);
    cr_expect_eq(markers, 3);
    cr_expect_eq(begins, (int)waits, "one wait slice per call that waited");
    cr_expect_eq(ends, begins);
    cr_expect_eq(resident, (int)ctx->hist.n_spans, "one sample per layer call");
    json_decref(root);
    net_destroy(net);
    rm_file("t.json");
    rmdir(dir);
}
