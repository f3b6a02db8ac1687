/*
 * test_examples.c -- the example programs as a user meets them: uvmrt-demo and
 * uvmrt-mlp run by path on the sim backend (no GPU), checked by exit status, output
 * and the files they write.
 *
 *  - the flags shared through examples/common: --help and --version everywhere,
 *    bad values exit 2 naming the flag and the value, --seed is decimal only,
 *    --log-level reaches the library, --profile list;
 *  - outputs: a report, trace, result JSON or loss log that cannot be written makes
 *    the program fail (exit 1, naming the flag, the path and the OS error) after it
 *    wrote the others; --trace writes a trace;
 *  - uvmrt-demo: --policy all names one report per policy (out.json ->
 *    out.none.json ...), refuses a directory, and its default budget works with
 *    1 and 2 layers;
 *  - uvmrt-mlp: --cpu-layers against --optimizer-on is a usage error.
 *
 * The programs' paths come from UVMRT_DEMO_PATH / UVMRT_MLP_PATH (build tree), or
 * the UVMRT_DEMO / UVMRT_MLP environment variables.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "helpers.h"

static const char *demo_path(void) {
    const char *p = getenv("UVMRT_DEMO");
    return p && *p ? p : UVMRT_DEMO_PATH;
}

static const char *mlp_path(void) {
    const char *p = getenv("UVMRT_MLP");
    return p && *p ? p : UVMRT_MLP_PATH;
}

/* Small, fast shapes on sim for each program. */
#define DEMO_SMALL "--backend sim --layers 3 --layer-mib 8 --steps 2 -q"
#define MLP_SMALL "--backend sim --layers 3 --hidden 256 --rows 256 --steps 2 -q"

static char out[65536]; /* the last run's stdout and stderr */

/* Runs "'prog' ARGS 2>&1" through the shell with a clean UVMRT_* environment (in dir
 * when not NULL), killed after 300 s; returns the exit status (124: timed out; -1 when
 * it did not exit), its output in out. */
static int run_v(const char *dir, const char *prog, const char *fmt, va_list ap) {
    char args[4096], cmd[8192];
    vsnprintf(args, sizeof args, fmt, ap);
    /* coreutils' timeout, not Criterion's .timeout: Criterion 2.4.1's runner leaks (under
     * LeakSanitizer) when timed tests overlap, and a hung program must still fail the test */
    if (dir)
        snprintf(cmd, sizeof cmd, "cd '%s' && timeout 300 '%s' %s 2>&1", dir, prog, args);
    else
        snprintf(cmd, sizeof cmd, "timeout 300 '%s' %s 2>&1", prog, args);
    env_clear_uvmrt();
    char *text;
    int status = run_capture(cmd, &text);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    return status;
}

static int run(const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int st = run_v(NULL, prog, fmt, ap);
    va_end(ap);
    return st;
}

/* The same, with dir as the working directory. */
static int run_in(const char *dir, const char *prog, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int st = run_v(dir, prog, fmt, ap);
    va_end(ap);
    return st;
}

static int has(const char *needle) {
    return strstr(out, needle) != NULL;
}

static int exists(const char *dir, const char *name) {
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static json_t *load(const char *dir, const char *name) {
    char path[512];
    json_error_t err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *j = json_load_file(path, 0, &err);
    cr_assert(j != NULL, "%s: %s", path, err.text);
    return j;
}

static char *tmpdir(void) {
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/uvmrt-test-examples-XXXXXX");
    cr_assert(mkdtemp(dir) != NULL);
    return dir;
}

static void rmdir_all(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* ----------------------------------------------------------------------------
 * the shared flags */

static const char *const SHARED[] = {"--backend", "--profile", "--policy", "--budget", "--steps",
                                     "--seed", "--report", "--trace", "--result-json",
                                     "--log-level", "--quiet", "--help", "--version"};

Test(examples_flags, help_lists_every_shared_flag_and_exits_0) {
    const char *progs[] = {demo_path(), mlp_path()};
    for (size_t k = 0; k < 2; k++) {
        cr_assert_eq(run(progs[k], "--help"), 0, "%s --help:\n%s", progs[k], out);
        for (size_t i = 0; i < sizeof SHARED / sizeof SHARED[0]; i++)
            cr_assert(has(SHARED[i]), "%s --help does not list %s:\n%s", progs[k], SHARED[i], out);
    }
    cr_assert_eq(run(mlp_path(), "-h"), 0);
    cr_assert(has("--loss-log") && has("--cpu-layers"));
    /* traces are written by the library: the help must not say otherwise */
    cr_assert(!has("not available") && !has("issue 3"), "%s", out);
}

Test(examples_flags, version_names_the_program) {
    cr_assert_eq(run(demo_path(), "--version"), 0);
    cr_assert(strncmp(out, "uvmrt-demo (uvmrt) ", 19) == 0, "%s", out);
    cr_assert_eq(run(mlp_path(), "-V"), 0);
    cr_assert(strncmp(out, "uvmrt-mlp (uvmrt) ", 18) == 0, "%s", out);
}

/* Bad values: exit 2, the message names the flag and the value. */
Test(examples_flags, bad_values_exit_2_naming_flag_and_value) {
    static const char *const bad[][2] = {
        {"--budget lots", "--budget 'lots'"},     {"--steps x", "--steps 'x'"},
        {"--steps ' 3'", "--steps ' 3'"},         {"--seed 0x10", "--seed '0x10'"},
        {"--seed -1", "--seed '-1'"},             {"--seed 1x", "--seed '1x'"},
        {"--seed ' 7'", "--seed ' 7'"},           {"--log-level loud", "--log-level 'loud'"},
        {"--profile nope", "--profile 'nope'"},   {"--backend tpu", "--backend 'tpu'"},
        {"--policy fast", "--policy 'fast'"},     {"--report xml:x", "--report 'xml:x'"},
        {"--trace ''", "--trace ''"},             {"--result-json ''", "--result-json ''"},
        {"--report json:/tmp", "--report 'json:/tmp'"}, {"--trace /tmp/", "--trace '/tmp/'"},
        {"--result-json /tmp", "--result-json '/tmp'"}, {"stray", "'stray'"},
    };
    const char *progs[] = {demo_path(), mlp_path()};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            int st = run(progs[k], "--backend sim %s", bad[i][0]);
            cr_assert_eq(st, 2, "%s %s: exit %d\n%s", progs[k], bad[i][0], st, out);
            cr_assert(has(bad[i][1]), "%s %s: message does not name %s:\n%s", progs[k],
                      bad[i][0], bad[i][1], out);
        }
    cr_assert_eq(run(mlp_path(), "--loss-log /tmp"), 2);
    cr_assert(has("--loss-log '/tmp'") && has("directory"), "%s", out);
}

/* "010" is ten (decimal), not eight (octal): same state as --seed 10, not as 8. */
Test(examples_flags, seed_is_decimal) {
    char *dir = tmpdir();
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy prefetch --seed 010 --result-json %s/a.json", dir), 0, "%s", out);
    cr_assert(has("seed 10"), "%s", out);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy none --seed 010 --report-json %s/s010.json", dir), 0, "%s", out);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy none --seed 10 --report-json %s/s10.json", dir), 0, "%s", out);
    const char *d010 = strstr(out, "state digest");
    cr_assert(d010 != NULL, "%s", out);
    char digest10[64];
    snprintf(digest10, sizeof digest10, "%.40s", d010);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy none --seed 010"), 0);
    cr_assert(has(digest10), "--seed 010 and --seed 10 differ:\n%s", out);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy none --seed 8"), 0);
    cr_assert(!has(digest10), "--seed 8 gave the state of --seed 10");
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --seed 010"), 0, "%s", out);
    cr_assert(has("seed 10;"), "%s", out);
    rmdir_all(dir);
}

/* --spill-dir reaches the library as its setting (params), and a directory that does
 * not exist is a usage error. */
Test(examples_flags, spill_dir_reaches_the_library) {
    char *dir = tmpdir();
    const char *progs[] = {demo_path(), mlp_path()};
    const char *shapes[] = {"--backend sim --layers 3 --layer-mib 8 --steps 2 --policy prefetch --no-verify --detail",
                            "--backend sim --layers 3 --hidden 256 --rows 256 --steps 2"};
    for (size_t k = 0; k < 2; k++) {
        cr_assert_eq(run(progs[k], "--help"), 0);
        cr_assert(has("--spill-dir DIR|none"), "%s", out);
        cr_assert_eq(run(progs[k], "%s --spill-dir %s", shapes[k], dir), 0, "%s", out);
        char want[256];
        snprintf(want, sizeof want, "UVMRT_SPILL_DIR=%s", dir);
        const char *line = strstr(out, want);
        cr_assert(line != NULL && strstr(line, "(params)") != NULL && strstr(line, "(params)") < strchr(line, '\n'),
                  "%s", out);
        cr_assert_eq(run(progs[k], "%s -q --spill-dir %s/nosuch", shapes[k], dir), 2, "%s", out);
        cr_assert(has("--spill-dir '") && has("existing directory"), "%s", out);
    }
    rmdir_all(dir);
}

Test(examples_flags, log_level_reaches_the_library) {
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --log-level debug"), 0, "%s", out);
    cr_assert(has("uvmrt debug: ") || has("uvmrt info: "), "%s", out);
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --log-level error"), 0, "%s", out);
    cr_assert(!has("uvmrt info: ") && !has("uvmrt debug: ") && !has("uvmrt warn: "), "%s", out);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --policy prefetch --log-level info"), 0, "%s", out);
    cr_assert(has("uvmrt info: "), "%s", out);
}

Test(examples_flags, profile_list_on_both) {
    cr_assert_eq(run(demo_path(), "--profile list"), 0);
    cr_assert(has("h200") && has("consumer-8g"), "%s", out);
    cr_assert_eq(run(mlp_path(), "--profile list"), 0);
    cr_assert(has("h200") && has("consumer-8g"), "%s", out);
}

/* ----------------------------------------------------------------------------
 * outputs */

/* Each output that cannot be written fails the run (exit 1) with the flag, the path
 * and why: one whose folder cannot take it before any step (issue 21, item 4), one
 * whose write fails at the end after the others are written. */
/* One default sim profile: without a usable GPU (and no --backend) both programs fall
 * back to the sim with consumer-8g, the profile --backend sim gets by default. */
Test(examples_flags, fallback_and_backend_sim_model_one_profile) {
    static const char *const args[2] = {"--layers 2 --steps 2 --policy none -q",
                                        "--layers 2 --hidden 256 --rows 256 --steps 2 -q"};
    for (int k = 0; k < 2; k++) {
        const char *prog = k == 0 ? demo_path() : mlp_path();
        cr_assert_eq(run(prog, "%s", args[k]), 0, "%s", out);
        if (!has("no usable GPU"))
            continue; /* a GPU ran it: no fallback to look at */
        cr_expect(has("running on the sim backend with profile consumer-8g"), "%s", out);
        cr_assert_eq(run(prog, "--backend sim %s", args[k]), 0, "%s", out);
        cr_expect(has("on sim, profile consumer-8g"), "%s", out);
    }
}

Test(examples_outputs, mlp_fails_when_an_output_cannot_be_written) {
    char *dir = tmpdir();
    int st = run(mlp_path(), MLP_SMALL " --trace /nonexistent-dir/t.json --result-json %s/r.json "
                 "--report json:%s/rep.json --loss-log %s/loss.txt", dir, dir, dir);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--trace /nonexistent-dir/t.json") && has("'/nonexistent-dir' does not exist") &&
              has("nothing was run"), "%s", out);
    cr_assert(!exists(dir, "r.json") && !exists(dir, "rep.json") && !exists(dir, "loss.txt") &&
              !has("summary:"), "a run whose output cannot be written started:\n%s", out);

    st = run(mlp_path(), MLP_SMALL " --result-json /dev/full --trace %s/t.json --loss-log %s/loss.txt",
             dir, dir);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--result-json /dev/full") && has("No space left on device"), "%s", out);
    cr_assert(exists(dir, "t.json") && exists(dir, "loss.txt"), "the outputs that could be written were not:\n%s",
              out);

    st = run(mlp_path(), MLP_SMALL " --report csv:/nonexistent-dir/r.csv");
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--report /nonexistent-dir/r.csv") && has("does not exist"), "%s", out);

    st = run(mlp_path(), MLP_SMALL " --loss-log /dev/full");
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--loss-log /dev/full") && has("No space left on device"), "%s", out);

    char cmd[900], *text = NULL;
    snprintf(cmd, sizeof cmd, "'%s' " MLP_SMALL " --result-json %s/r.json 2>&1 >/dev/full", mlp_path(), dir);
    env_clear_uvmrt();
    st = run_capture(cmd, &text);
    cr_assert_eq(st, 1, "stdout on /dev/full: exit %d:\n%s", st, text);
    cr_assert(strstr(text, "standard output") && exists(dir, "r.json"), "%s", text);
    free(text);
    rmdir_all(dir);
}

/* Runs prog with one UVMRT_ variable set (var=value), like run(). */
static int run_env(const char *var, const char *value, const char *prog, const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s='%s' timeout 300 '%s' %s 2>&1", var, value, prog, args);
    env_clear_uvmrt();
    char *text;
    int status = run_capture(cmd, &text);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    return status;
}

static int is_kind(const char *dir, const char *name, mode_t kind) {
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &sb) == 0 && (sb.st_mode & S_IFMT) == kind;
}

/* Every output path is checked before step 1 (issue 21, item 4): a missing folder, a
 * regular file where a folder should be, /proc, for the flags and for UVMRT_RECORD,
 * UVMRT_REPORT and UVMRT_TRACE: exit 1 and a message naming the path and why. */
Test(examples_outputs, mlp_checks_every_output_path_before_step_1) {
    char *dir = tmpdir();
    char afile[300];
    snprintf(afile, sizeof afile, "%s/afile", dir);
    FILE *f = fopen(afile, "w");
    cr_assert(f != NULL);
    fclose(f);
    static const char *const flags[] = {"--loss-log", "--result-json", "--trace"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        int st = run(mlp_path(), MLP_SMALL " %s %s/x", flags[k], afile);
        cr_assert_eq(st, 1, "%s under a file: exit %d:\n%s", flags[k], st, out);
        cr_assert(has(flags[k]) && has("afile/x") && has("is a regular file, not a folder") && !has("step 1/"),
                  "%s", out);
        st = run(mlp_path(), MLP_SMALL " %s /proc/uvmrt-x", flags[k]);
        cr_assert_eq(st, 1, "%s in /proc: exit %d:\n%s", flags[k], st, out);
        cr_assert(has("/proc/uvmrt-x") && has("cannot create a file in '/proc'") && !has("step 1/"), "%s", out);
    }
    static const char *const vars[][2] = {
        {"UVMRT_RECORD", "/nonexistent-dir/r.json"}, {"UVMRT_REPORT", "json:/nonexistent-dir/r.json"},
        {"UVMRT_TRACE", "/proc/uvmrt-t.json"},
    };
    for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++) {
        int st = run_env(vars[k][0], vars[k][1], mlp_path(), MLP_SMALL);
        cr_assert_eq(st, 1, "%s=%s: exit %d:\n%s", vars[k][0], vars[k][1], st, out);
        cr_assert(has(vars[k][0]) && has(strchr(vars[k][1], '/')) && !has("step 1/"), "%s", out);
    }
    rmdir_all(dir);
}

/* The report rules for every file the trainer writes (issue 21, items 1, 7 and 10):
 * a FIFO with no reader fails at once (never hangs) and stays a FIFO; a link to a
 * device stays a link and the device a device; a link to a file has its target
 * replaced; /dev/full as UVMRT_RECORD or UVMRT_TRACE is exit 1 with a message. */
Test(examples_outputs, mlp_outputs_follow_the_report_rules) {
    char *dir = tmpdir();
    char path[300];
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    int st = run(mlp_path(), MLP_SMALL " --loss-log %s", path);
    cr_assert_eq(st, 1, "--loss-log FIFO: exit %d:\n%s", st, out);
    cr_assert(has("FIFO with no reader") && !has("step 1/"), "%s", out);
    st = run(mlp_path(), MLP_SMALL " --result-json %s", path);
    cr_assert_eq(st, 1, "--result-json FIFO: exit %d:\n%s", st, out);
    cr_assert(has("--result-json") && has("FIFO with no reader"), "%s", out);
    st = run_env("UVMRT_RECORD", path, mlp_path(), MLP_SMALL);
    cr_assert_eq(st, 1, "UVMRT_RECORD=FIFO: exit %d:\n%s", st, out);
    cr_assert(has("UVMRT_RECORD") && has("FIFO with no reader"), "%s", out);
    cr_assert(is_kind(dir, "fifo", S_IFIFO), "the FIFO was replaced");

    snprintf(path, sizeof path, "%s/dev", dir);
    cr_assert_eq(symlink("/dev/null", path), 0);
    st = run_env("UVMRT_RECORD", path, mlp_path(), MLP_SMALL " --loss-log %s --result-json %s", path, path);
    cr_assert_eq(st, 0, "a link to /dev/null: exit %d:\n%s", st, out);
    cr_assert(is_kind(dir, "dev", S_IFLNK), "the link to /dev/null was replaced");
    struct stat sb;
    cr_assert(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));

    char target[300];
    snprintf(target, sizeof target, "%s/target.txt", dir);
    FILE *f = fopen(target, "w");
    cr_assert(f != NULL);
    fputs("old", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/link.txt", dir);
    cr_assert_eq(symlink("target.txt", path), 0);
    st = run(mlp_path(), MLP_SMALL " --loss-log %s", path);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    cr_assert(is_kind(dir, "link.txt", S_IFLNK), "the link was replaced by a file");
    char line[64] = "";
    f = fopen(target, "r");
    cr_assert(f != NULL);
    cr_assert(fgets(line, sizeof line, f) != NULL);
    fclose(f);
    cr_assert(strncmp(line, "1 ", 2) == 0, "the link's target holds '%s', not the loss log", line);

    st = run_env("UVMRT_RECORD", "/dev/full", mlp_path(), MLP_SMALL);
    cr_assert_eq(st, 1, "UVMRT_RECORD=/dev/full: exit %d:\n%s", st, out);
    cr_assert(has("UVMRT_RECORD") && has("/dev/full"), "%s", out);
    st = run_env("UVMRT_TRACE", "/dev/full", mlp_path(), MLP_SMALL);
    cr_assert_eq(st, 1, "UVMRT_TRACE=/dev/full: exit %d:\n%s", st, out);
    cr_assert(has("/dev/full") && has("No space left on device"), "%s", out);
    rmdir_all(dir);
}

Test(examples_outputs, mlp_trace_is_written) {
    char *dir = tmpdir();
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --trace %s/t.json", dir), 0, "%s", out);
    cr_assert(!has("not available"), "%s", out);
    json_t *t = load(dir, "t.json");
    json_t *ev = json_is_array(t) ? t : json_object_get(t, "traceEvents");
    cr_assert(json_array_size(ev) > 0, "the trace has no events");
    json_decref(t);
    rmdir_all(dir);
}

Test(examples_outputs, demo_fails_when_a_report_cannot_be_written) {
    char *dir = tmpdir();
    int st = run(demo_path(), DEMO_SMALL " --policy prefetch --report json:/nonexistent-dir/r.json "
                 "--trace %s/t.json --result-json %s/res.json", dir, dir);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--report /nonexistent-dir/r.json") && has("does not exist") && has("nothing was run"), "%s",
              out);
    st = run(demo_path(), DEMO_SMALL " --policy prefetch --report json:/dev/full "
             "--trace %s/t.json --result-json %s/res.json", dir, dir);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--report /dev/full") && has("No space left on device"), "%s", out);
    cr_assert(exists(dir, "t.json") && exists(dir, "res.json"), "%s", out);
    st = run(demo_path(), DEMO_SMALL " --policy prefetch --result-json /dev/full");
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert(has("--result-json /dev/full") && has("No space left on device"), "%s", out);
    rmdir_all(dir);
}

/* ----------------------------------------------------------------------------
 * uvmrt-demo */

Test(examples_demo, policy_all_names_a_report_per_policy) {
    char *dir = tmpdir(), sub[512];
    snprintf(sub, sizeof sub, "%s/d.v1", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    cr_assert_eq(run(demo_path(), DEMO_SMALL " --report json:%s/out.json --trace %s/tr "
                 "--report-json %s/d.v1/rj", dir, dir, dir), 0, "%s", out);
    static const char *const pol[] = {"none", "demand", "prefetch"};
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "out.%s.json", pol[k]);
        json_t *r = load(dir, name);
        const char *p = json_string_value(json_object_get(r, "policy"));
        cr_assert(p && strcmp(p, pol[k]) == 0, "%s is the report of policy %s", name, p ? p : "?");
        json_decref(r);
        snprintf(name, sizeof name, "tr.%s", pol[k]);
        cr_assert(exists(dir, name), "no %s", name);
        snprintf(name, sizeof name, "d.v1/rj.%s", pol[k]); /* the dot in the folder is no extension */
        cr_assert(exists(dir, name), "no %s", name);
    }
    cr_assert(!exists(dir, "out.json") && !exists(dir, "out.json.none"));
    rmdir_all(dir);
}

/* "-" is stdout for every run, never a file named "-.none". */
Test(examples_demo, policy_all_report_to_stdout_stays_stdout) {
    char *dir = tmpdir();
    cr_assert_eq(run_in(dir, demo_path(), DEMO_SMALL " --report csv:- --trace -"), 0, "%s", out);
    cr_assert(!exists(dir, "-") && !exists(dir, "-.none") && !exists(dir, "-.prefetch"),
              "a file was written for '-'");
    cr_assert(has("policy,backend,") && has("prefetch,sim,"), "no CSV of each run on stdout:\n%s", out);
    cr_assert(has("traceEvents"), "no trace on stdout");
    rmdir_all(dir);
}

Test(examples_demo, directory_report_paths_are_refused) {
    char *dir = tmpdir();
    const char *flags[] = {"--report json:%s", "--report-json %s", "--trace %s", "--report csv:%s/"};
    for (size_t k = 0; k < 4; k++) {
        char f[600];
        snprintf(f, sizeof f, flags[k], dir);
        int st = run(demo_path(), "--backend sim --policy all %s", f);
        cr_assert_eq(st, 2, "%s: exit %d\n%s", f, st, out);
        cr_assert(has("directory"), "%s:\n%s", f, out);
    }
    cr_assert(!exists("/tmp", "uvmrt-test-examples.none"));
    rmdir_all(dir);
}

/* The default budget holds the largest layer call's working set, whatever L. */
Test(examples_demo, default_budget_works_with_one_and_two_layers) {
    char *dir = tmpdir();
    for (int layers = 1; layers <= 3; layers++) {
        /* the default --layer-mib (1024), as a user would run it */
        int st = run(demo_path(), "--backend sim --layers %d --steps 2 -q --result-json %s/r.json",
                     layers, dir);
        cr_assert_eq(st, 0, "--layers %d: exit %d\n%s", layers, st, out);
        json_t *r = load(dir, "r.json");
        json_t *runs = json_object_get(r, "runs");
        cr_assert_eq(json_array_size(runs), 3);
        uint64_t ws = (layers > 1 ? 4 : 3) * 256 * MIB;
        uint64_t total = (uint64_t)(1 + 4 * layers) * 256 * MIB;
        for (size_t k = 1; k < 3; k++) { /* demand, prefetch: under a budget */
            uint64_t b = (uint64_t)json_integer_value(json_object_get(json_array_get(runs, k), "budget_bytes"));
            cr_assert(b >= ws, "--layers %d: budget %llu below the working set %llu", layers,
                      (unsigned long long)b, (unsigned long long)ws);
            cr_assert(b < total, "--layers %d: budget %llu holds everything", layers,
                      (unsigned long long)b);
        }
        json_decref(r);
        /* with data: the checksums still match under that budget */
        st = run(demo_path(), "--backend sim --layers %d --layer-mib 8 --steps 3 -q", layers);
        cr_assert_eq(st, 0, "--layers %d --layer-mib 8: exit %d\n%s", layers, st, out);
        cr_assert(has("checksums: match"), "%s", out);
    }
    rmdir_all(dir);
}

/* ----------------------------------------------------------------------------
 * uvmrt-mlp */

Test(examples_mlp, cpu_layers_against_optimizer_on_is_a_usage_error) {
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --optimizer-on gpu --cpu-layers 2"), 2, "%s", out);
    cr_assert(has("--cpu-layers 2") && has("--optimizer-on gpu"), "%s", out);
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --cpu-layers 2 --optimizer-on gpu"), 2, "%s", out);
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --optimizer-on cpu --cpu-layers 0"), 2, "%s", out);
    cr_assert(has("--cpu-layers 0") && has("--optimizer-on cpu"), "%s", out);

    char *dir = tmpdir();
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --optimizer-on cpu --cpu-layers 2 --result-json %s/r.json",
                     dir), 0, "%s", out);
    json_t *r = load(dir, "r.json");
    cr_assert_eq(json_integer_value(json_object_get(r, "cpu_layers")), 2);
    cr_assert_str_eq(json_string_value(json_object_get(r, "optimizer_on")), "mixed");
    json_decref(r);
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --optimizer-on cpu --result-json %s/r.json", dir), 0);
    r = load(dir, "r.json");
    cr_assert_eq(json_integer_value(json_object_get(r, "cpu_layers")), 3);
    json_decref(r);
    cr_assert_eq(run(mlp_path(), MLP_SMALL " --cpu-layers 1 --result-json %s/r.json", dir), 0);
    r = load(dir, "r.json");
    cr_assert_eq(json_integer_value(json_object_get(r, "cpu_layers")), 1);
    json_decref(r);
    rmdir_all(dir);
}

/* The comparison is what a run shows: without --detail no configuration, per-layer
 * or per-tensor table; with it they all come after the table and the verdict;
 * --quiet leaves them out again. */
Test(examples_demo, detail_only_on_request_and_after_the_table) {
    const char *args = "--backend sim --layers 3 --layer-mib 8 --steps 2";
    const char *table = "\npolicy        ms/step", *config = "UVMRT_POLICY=",
               *layers = "per layer and phase", *tensors = "\ntensor ";
    cr_assert_eq(run(demo_path(), "%s", args), 0, "%s", out);
    cr_assert(has(table) && has("checksums: match"), "no table or verdict:\n%s", out);
    cr_assert(!has(config) && !has(layers) && !has(tensors) && !has("== detail"),
              "detail without --detail:\n%s", out);
    int lines = 0;
    for (const char *p = out; *p; p++)
        lines += *p == '\n';
    cr_assert_lt(lines, 40, "%d lines without --detail:\n%s", lines, out);

    cr_assert_eq(run(demo_path(), "%s --detail", args), 0, "%s", out);
    const char *t = strstr(out, table), *v = strstr(out, "checksums: match"),
               *d = strstr(out, "== detail: policy none"), *c = strstr(out, config),
               *l = strstr(out, layers), *x = strstr(out, tensors);
    cr_assert(t && v && d && c && l && x, "--detail: something missing:\n%s", out);
    cr_assert(t < v && v < d && d < c && c < l && l < x,
              "--detail: not table, verdict, then the detail:\n%s", out);
    cr_assert(strstr(out, "== detail: policy demand") && strstr(out, "== detail: policy prefetch"),
              "--detail: not every run:\n%s", out);

    cr_assert_eq(run(demo_path(), "%s --detail -q", args), 0, "%s", out);
    cr_assert(has(table) && !has(config) && !has(layers) && !has("== detail"),
              "--detail -q printed the detail:\n%s", out);
}
