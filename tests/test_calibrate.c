/*
 * test_calibrate.c -- uvmrt-calibrate's command line, run by path. No GPU is
 * used: CUDA_VISIBLE_DEVICES is emptied, so even on a GPU machine the tool must
 * find none, say so and exit 1 without writing a file. (The measurements
 * themselves need a GPU; their file format is tested in test_profile.c through
 * the same writer. The disk tier's measurement needs no GPU: tools/diskmeasure.c is
 * tested here directly.)
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "diskmeasure.h"
#include "helpers.h"

#ifndef UVMRT_CALIBRATE_PATH
#error "UVMRT_CALIBRATE_PATH must name the built uvmrt-calibrate"
#endif

/* Runs the tool with args; its exit status, and stdout+stderr in *out (caller frees). */
static int run_tool(const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "CUDA_VISIBLE_DEVICES= '%s' %s 2>&1", UVMRT_CALIBRATE_PATH, args);
    int st = run_capture(cmd, out);
    cr_assert(st >= 0, "%s: did not exit", cmd);
    return st;
}

Test(calibrate, without_a_gpu_exits_1_saying_so_and_writes_nothing)
{
    char path[] = "/tmp/uvmrt-calib-XXXXXX";
    cr_assert_not_null(mkdtemp(path));
    char args[128], file[160];
    snprintf(file, sizeof file, "%s/p.json", path);
    snprintf(args, sizeof args, "--quick -o '%s'", file);
    char *out = NULL;
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "no usable GPU") != NULL || strstr(out, "has no CUDA") != NULL, "%s", out);
    cr_assert_neq(access(file, F_OK), 0, "a file was written without a GPU");
    free(out);
    rmdir(path);
}

/* The profile file's path is checked before any measuring (issue 21, item 4): a missing
 * folder or /proc is exit 1 naming the path, with or without a GPU. */
Test(calibrate, an_unwritable_output_fails_before_measuring)
{
    char *out = NULL;
    cr_assert_eq(run_tool("--quick -o /nonexistent-dir/p.json", &out), 1, "%s", out);
    cr_assert(strstr(out, "/nonexistent-dir/p.json") && strstr(out, "does not exist") &&
              strstr(out, "nothing was measured"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--quick -o /proc/uvmrt-p.json", &out), 1, "%s", out);
    cr_assert(strstr(out, "/proc/uvmrt-p.json") && strstr(out, "nothing was measured"), "%s", out);
    free(out);
}

Test(calibrate, help_version_and_usage_errors)
{
    char *out = NULL;
    cr_assert_eq(run_tool("--help", &out), 0);
    cr_assert_not_null(strstr(out, "--quick"), "%s", out);
    cr_assert_not_null(strstr(out, "--output"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--version", &out), 0);
    cr_assert_not_null(strstr(out, uvmrt_version_string()), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--reps 0", &out), 2);
    cr_assert_not_null(strstr(out, "--reps '0'"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--output ''", &out), 2);
    free(out);
    cr_assert_eq(run_tool("stray", &out), 2);
    cr_assert_not_null(strstr(out, "unexpected argument 'stray'"), "%s", out);
    free(out);
}

/* --spill-dir is checked before measuring, like --output. */
Test(calibrate, a_missing_spill_dir_fails_before_measuring)
{
    char *out = NULL;
    cr_assert_eq(run_tool("--quick -o /tmp/uvmrt-calib-never.json --spill-dir /nonexistent-spill", &out), 1, "%s",
                 out);
    cr_assert(strstr(out, "--spill-dir /nonexistent-spill") && strstr(out, "nothing was measured"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--spill-dir ''", &out), 2);
    free(out);
    cr_assert_eq(run_tool("--help", &out), 0);
    cr_assert_not_null(strstr(out, "--spill-dir"), "%s", out);
    free(out);
}

/* The disk measurement (what --spill-dir adds to the profile): both rates measured and
 * positive, the engine and the reason given, the directory left as it was. */
Test(calibrate, disk_measure_gives_both_rates_and_the_engine)
{
    char dir[] = "/tmp/uvmrt-disk-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    disk_rates_t r;
    char err[256] = "";
    cr_assert_eq(disk_measure(dir, 16u << 20, 3, &r, err, sizeof err), 0, "%s", err);
    cr_assert_gt(r.read_bps, 0);
    cr_assert_gt(r.write_bps, 0);
    cr_assert_eq(r.bytes, 16u << 20);
    cr_assert(r.io_uring == 0 || r.io_uring == 1);
    cr_assert_neq(r.why[0], '\0');
    for (int i = 0; i < 3; i++) cr_assert_gt(r.read_samples[i], 0);
    free(r.read_samples);
    free(r.write_samples);
    cr_assert_eq(rmdir(dir), 0, "the measurement leaves nothing behind");
    cr_assert_eq(disk_measure("/nonexistent-spill", 16u << 20, 3, &r, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "/nonexistent-spill"), "%s", err);
}
