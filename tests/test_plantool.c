/*
 * test_plantool.c -- UVMRT_RECORD (src/record_file.c) and uvmrt-plan, run by path:
 * a sim run's recorded step, re-played by the tool, predicts that run's own step
 * time (the sim is the model), --fit finds the smallest budget, a budget below the
 * largest working set names the layer, more budget never predicts slower, and bad
 * input is refused with the documented exit codes.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#ifndef UVMRT_PLAN_PATH
#error "UVMRT_PLAN_PATH must name the built uvmrt-plan"
#endif

#define MiB (1024ull * 1024ull)

static int run_tool(const char *args, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", UVMRT_PLAN_PATH, args);
    int st = run_capture(cmd, out);
    cr_assert(st >= 0, "%s: did not exit", cmd);
    return st;
}

static json_t *run_json(const char *args)
{
    char *out = NULL;
    int rc = run_tool(args, &out);
    cr_assert_eq(rc, 0, "uvmrt-plan %s: exit %d: %s", args, rc, out);
    json_error_t err;
    json_t *j = json_loads(out, 0, &err);
    cr_assert_not_null(j, "uvmrt-plan %s: not JSON (%s): %s", args, err.text, out);
    free(out);
    return j;
}

/* A sim run of the default net (6 steps) at budget, with UVMRT_RECORD=path;
 * returns the run's step-3 time (the replay's steady step, same position). */
static uint64_t recorded_run_on(const char *path, uint64_t budget, const char *profile)
{
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", path, 1);
    if (profile != NULL) setenv("UVMRT_PROFILE", profile, 1);
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, budget, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 6, NULL, NULL);
    uvmrt_step_stats_t s2, s5;
    cr_assert_eq(uvmrt_step_stats_get(ctx, 2, &s2), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 5, &s5), UVMRT_OK);
    cr_assert_eq(s2.step_ns, s5.step_ns, "the run is not steady by step 3: %llu vs %llu",
                 (unsigned long long)s2.step_ns, (unsigned long long)s5.step_ns);
    net_destroy(net);
    unsetenv("UVMRT_RECORD");
    unsetenv("UVMRT_PROFILE");
    return s2.step_ns;
}
static uint64_t recorded_run(const char *path, uint64_t budget) { return recorded_run_on(path, budget, NULL); }

/* Removes the record and its folder (tmpfile_path). */
static void remove_record(const char *path)
{
    unlink(path);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    rmdir(dir);
}

static void tmpfile_path(char *buf, size_t n)
{
    char dir[] = "/tmp/uvmrt-plantool-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(buf, n, "%s/rec.json", dir);
}

Test(plantool, record_file_matches_the_run)
{
    char path[256];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    json_error_t err;
    json_t *r = json_load_file(path, 0, &err);
    cr_assert_not_null(r, "%s: %s", path, err.text);
    cr_assert_str_eq(json_string_value(json_object_get(r, "format")), "uvmrt-record");
    cr_assert_eq(json_integer_value(json_object_get(r, "budget_bytes")), (json_int_t)(16 * MiB));
    cr_assert_str_eq(json_string_value(json_object_get(r, "profile")), "consumer-8g");
    json_t *layers = json_object_get(r, "layers"), *tensors = json_object_get(r, "tensors"),
           *calls = json_object_get(r, "calls");
    cr_assert_eq(json_array_size(layers), 6);
    cr_assert_str_eq(json_string_value(json_array_get(layers, 0)), "layer0");
    /* x, then w a g o of each layer (helpers.h) */
    cr_assert_eq(json_array_size(tensors), 1 + 4 * 6);
    json_t *w0 = json_array_get(tensors, 1);
    cr_assert_str_eq(json_string_value(json_object_get(w0, "role")), "weight");
    cr_assert_eq(json_integer_value(json_object_get(w0, "layer")), 0);
    cr_assert_eq(json_integer_value(json_object_get(w0, "size_bytes")), (json_int_t)(2 * MiB));
    json_t *a0 = json_array_get(tensors, 2);
    cr_assert_eq(json_integer_value(json_object_get(a0, "footprint_bytes")), (json_int_t)footprint_of(1536 * 1024));
    cr_assert_eq(json_array_size(calls), 18);
    /* call 0: forward of layer 0 uses its weight (R), activation (W), and x (R) */
    json_t *c0 = json_array_get(calls, 0), *c6 = json_array_get(calls, 6);
    cr_assert_eq(json_integer_value(json_object_get(c0, "layer")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(c0, "phase")), "forward");
    cr_assert_eq(json_integer_value(json_object_get(c0, "duration_ns")), 200000);
    cr_assert_str_eq(json_string_value(json_object_get(c0, "duration_source")), "modelled");
    cr_assert_eq(json_integer_value(json_object_get(c6, "layer")), 5);
    cr_assert_str_eq(json_string_value(json_object_get(c6, "phase")), "backward");
    json_t *u = json_object_get(c0, "uses");
    int saw_w = 0, saw_x = 0;
    for (size_t k = 0; k < json_array_size(u); k++) {
        json_int_t t = json_integer_value(json_array_get(json_array_get(u, k), 0));
        json_int_t acc = json_integer_value(json_array_get(json_array_get(u, k), 1));
        if (t == 1) saw_w = acc == UVMRT_USE_READ;
        if (t == 0) saw_x = acc == UVMRT_USE_READ;
    }
    cr_assert(saw_w && saw_x, "call 0's uses: %s", json_dumps(u, 0));
    json_decref(r);
    remove_record(path);
}

Test(plantool, prediction_equals_the_sim_runs_own_step_time)
{
    char path[256], args[512];
    tmpfile_path(path, sizeof path);
    uint64_t budgets[] = {10 * MiB, 16 * MiB, 32 * MiB, 64 * MiB};
    for (size_t i = 0; i < sizeof budgets / sizeof budgets[0]; i++) {
        uint64_t measured_on_sim = recorded_run(path, budgets[i]);
        snprintf(args, sizeof args, "--record '%s' --budget %lluM --json", path,
                 (unsigned long long)(budgets[i] / MiB));
        json_t *j = run_json(args);
        cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
        cr_assert_str_eq(json_string_value(json_object_get(j, "label")), "predicted");
        cr_assert_eq(json_integer_value(json_object_get(j, "predicted_step_ns")), (json_int_t)measured_on_sim,
                     "budget %llu MiB: predicted %lld, the sim run took %llu", (unsigned long long)(budgets[i] / MiB),
                     (long long)json_integer_value(json_object_get(j, "predicted_step_ns")),
                     (unsigned long long)measured_on_sim);
        const char *bound = json_string_value(json_object_get(j, "bound"));
        cr_assert(bound && (strcmp(bound, "gpu_compute") == 0 || strncmp(bound, "link_", 5) == 0 ||
                            strcmp(bound, "host_memory") == 0 || strcmp(bound, "cpu") == 0));
        json_t *layers = json_object_get(j, "layers");
        cr_assert_eq(json_array_size(layers), 6);
        cr_assert_not_null(json_string_value(json_object_get(json_array_get(layers, 0), "mechanisms")));
        if (budgets[i] == 64 * MiB) /* everything fits: nothing moves in steady state */
            cr_assert_eq(json_integer_value(json_object_get(j, "h2d_bytes")), 0, "%s", json_dumps(j, 0));
        json_decref(j);
    }
    remove_record(path);
}

/* A profile file (as uvmrt-calibrate writes one): the record names the file, and the
 * tool models it by default or through --profile FILE. */
Test(plantool, profile_file_is_modelled_too)
{
    char path[256], prof[300], args[800];
    tmpfile_path(path, sizeof path);
    snprintf(prof, sizeof prof, "%s.profile.json", path);
    uvmrt_profile_t h200 = *uvmrt_profile_find("h200");
    h200.name = "mybox";
    cr_assert_eq(uvmrt_profile_save(&h200, NULL, prof), UVMRT_OK);
    uint64_t on_sim = recorded_run_on(path, 12 * MiB, prof);
    const char *forms[] = {"", "--profile"};
    for (int i = 0; i < 2; i++) {
        if (i == 0) snprintf(args, sizeof args, "--record '%s' --budget 12M --json", path);
        else snprintf(args, sizeof args, "--record '%s' --profile '%s' --budget 12M --json", path, prof);
        json_t *j = run_json(args);
        cr_assert_eq(json_integer_value(json_object_get(j, "predicted_step_ns")), (json_int_t)on_sim, "%s %s",
                     forms[i], json_dumps(j, 0));
        json_decref(j);
    }
    /* the built-in h200 differs from consumer-8g: the profile matters */
    snprintf(args, sizeof args, "--record '%s' --profile consumer-8g --budget 12M --json", path);
    json_t *j = run_json(args);
    cr_assert_neq(json_integer_value(json_object_get(j, "predicted_step_ns")), (json_int_t)on_sim);
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --profile consumer-8g --budget 9G", path);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "more than the device memory of profile consumer-8g"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "--record '%s' --profile no-such-gpu --fit", path);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "no-such-gpu"), "%s", out);
    free(out);
    unlink(prof);
    remove_record(path);
}

Test(plantool, fit_is_the_smallest_budget_and_too_small_names_the_layer)
{
    char path[256], args[512];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    snprintf(args, sizeof args, "--record '%s' --fit --json", path);
    json_t *j = run_json(args);
    cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
    json_int_t minb = json_integer_value(json_object_get(j, "min_budget_bytes"));
    cr_assert_eq(json_integer_value(json_object_get(j, "budget_bytes")), minb);
    cr_assert_eq(minb % (json_int_t)(2 * MiB), 0);
    /* the net's largest working set (helpers.h) is the floor */
    cr_assert_eq(minb, 8 * (json_int_t)MiB, "min budget %lld", (long long)minb);
    json_decref(j);
    snprintf(args, sizeof args, "--record '%s' --budget %lld --json", path, (long long)(minb - 2 * (json_int_t)MiB));
    j = run_json(args);
    cr_assert(json_is_false(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
    cr_assert_eq(json_integer_value(json_object_get(j, "min_budget_bytes")), minb);
    const char *why = json_string_value(json_object_get(j, "why"));
    cr_assert(why && strstr(why, "layer") != NULL, "%s", json_dumps(j, 0));
    const char *wl = json_string_value(json_object_get(json_object_get(j, "largest_working_set"), "layer"));
    cr_assert(wl && strncmp(wl, "layer", 5) == 0 && strstr(why, wl) != NULL, "%s", json_dumps(j, 0));
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --budget 4M", path);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "does not fit"), "%s", out);
    free(out);
    /* every number about the run is labelled a prediction */
    snprintf(args, sizeof args, "--record '%s' --budget 16M", path);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n"))
        if (strstr(line, " ms") || strstr(line, "MiB to the GPU"))
            cr_assert_not_null(strstr(line, "predicted"), "unlabelled: %s", line);
    free(out);
    remove_record(path);
}

/* issue 9: "More budget never predicts slower". */
Test(plantool, more_budget_never_predicts_slower)
{
    char path[256], args[512];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    snprintf(args, sizeof args, "--record '%s' --sweep 8M:64M:2M --json", path);
    json_t *j = run_json(args);
    json_t *rows = json_object_get(j, "sweep");
    cr_assert_eq(json_array_size(rows), 29);
    json_int_t prev = -1;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        cr_assert(json_is_true(json_object_get(row, "fits")), "%s", json_dumps(row, 0));
        json_int_t ns = json_integer_value(json_object_get(row, "predicted_step_ns"));
        if (prev >= 0)
            cr_expect_leq(ns, prev, "budget %lld MiB predicts %lld ns, slower than %lld ns at 2 MiB less",
                          (long long)(json_integer_value(json_object_get(row, "budget_bytes")) / (json_int_t)MiB),
                          (long long)ns, (long long)prev);
        prev = ns;
    }
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --sweep 8M:16M:4M", path);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "predicted_ms/step"), "%s", out);
    free(out);
    remove_record(path);
}

Test(plantool, bad_input_and_usage)
{
    char *out = NULL;
    cr_assert_eq(run_tool("--help", &out), 0);
    cr_assert_not_null(strstr(out, "--record"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--version", &out), 0);
    cr_assert_not_null(strstr(out, uvmrt_version_string()), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--budget 8G", &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--record"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--record x.json --budget lots", &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "lots"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--record x.json --sweep 8G", &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--sweep"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--record x.json --bogus", &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--bogus"), "%s", out);
    free(out);
    cr_assert_eq(run_tool("--record /nonexistent/rec.json --fit", &out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "/nonexistent/rec.json"), "%s", out);
    free(out);
    char dir[] = "/tmp/uvmrt-plantool-bad-XXXXXX", path[256], args[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/bad.json", dir);
    const char *bad[] = {"{\"format\": \"other\", \"layers\": [], \"tensors\": [], \"calls\": [1]}",
                         "{\"format\": \"uvmrt-record\", \"layers\": [\"l\"], \"tensors\": [], \"calls\": "
                         "[{\"layer\": 0, \"phase\": \"forward\", \"duration_ns\": 1, \"uses\": [[7, 1]]}]}",
                         "not json"};
    const char *says[] = {"format", "tensor id 7", "JSON"};
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(path, "w");
        fputs(bad[i], f);
        fclose(f);
        snprintf(args, sizeof args, "--record '%s' --budget 8M", path);
        cr_assert_eq(run_tool(args, &out), 1, "%s", out);
        cr_assert_not_null(strstr(out, says[i]), "case %d: %s", i, out);
        cr_assert_not_null(strstr(out, path), "case %d: %s", i, out);
        free(out);
    }
    unlink(path);
    rmdir(dir);
}

/* A record that cannot be written is a warning; the step still succeeds. */
Test(plantool, unwritable_record_only_warns)
{
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", "/nonexistent-dir/rec.json", 1);
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MiB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 2, NULL, NULL); /* fails the test if a call fails */
    cr_assert(log_contains("/nonexistent-dir/rec.json"), "%s", log_text());
    net_destroy(net);
}

/* A step that leaves the record is recorded again, and the file follows it. */
Test(plantool, a_rerecorded_step_rewrites_the_file)
{
    char path[256];
    tmpfile_path(path, sizeof path);
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", path, 1);
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MiB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 2, NULL, NULL);
    json_t *r = json_load_file(path, 0, NULL);
    cr_assert_eq(json_array_size(json_object_get(r, "calls")), 18);
    json_decref(r);
    run_step_ex(net, 2, NULL, NULL); /* layer 2's forward left out */
    r = json_load_file(path, 0, NULL);
    cr_assert_eq(json_array_size(json_object_get(r, "calls")), 17);
    json_decref(r);
    net_destroy(net);
    remove_record(path);
}

/* --plot needs --sweep; without gnuplot on PATH it warns and the table still comes. */
Test(plantool, plot_without_gnuplot_warns)
{
    char path[256], args[600];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --budget 16M --plot x.png", path);
    cr_assert_eq(run_tool(args, &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--sweep"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "--record '%s' --sweep 8M:16M:8M --plot '%s.png'", path, path);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "PATH=/nonexistent '%s' %s 2>&1", UVMRT_PLAN_PATH, args);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    cr_assert_eq(pclose(f), 0, "%s", buf);
    cr_assert_not_null(strstr(buf, "gnuplot is not on PATH"), "%s", buf);
    cr_assert_not_null(strstr(buf, "predicted_ms/step"), "%s", buf);
    remove_record(path);
}

/* A real trainer's record (uvmrt-mlp on sim, with CPU-optimizer blocks: host-placed
 * tensors, CPU calls with host_bytes on their own stream), recorded at one budget and
 * re-played at others, predicts the trainer's own step 3 at those budgets. 24 and 26
 * MiB are the budgets where the planner predicts (and the sim runs) slower with more
 * budget (issue 9's "more budget never predicts slower": a finding, see the report). */
Test(plantool, mlp_record_predicts_the_mlp_runs)
{
    char path[256], res[300], cmd[1200];
    tmpfile_path(path, sizeof path);
    snprintf(res, sizeof res, "%s.result.json", path);
    const char *mlp = "--backend sim --steps 4 --layers 8 --hidden 1024 --rows 256 --cpu-layers 4";
    snprintf(cmd, sizeof cmd, "env -i UVMRT_RECORD='%s' UVMRT_MONITOR=0 '%s' %s --budget 20M >/dev/null 2>&1", path,
             UVMRT_MLP_PATH, mlp);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    const char *budgets[] = {"24M", "26M", "50M"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "env -i UVMRT_MONITOR=0 '%s' %s --budget %s --result-json '%s' >/dev/null 2>&1",
                 UVMRT_MLP_PATH, mlp, budgets[i], res);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        json_t *run = json_load_file(res, 0, NULL);
        cr_assert_not_null(run);
        double ms = json_real_value(json_array_get(json_object_get(run, "step_ms"), 2));
        json_decref(run);
        char args[600];
        snprintf(args, sizeof args, "--record '%s' --budget %s --json", path, budgets[i]);
        json_t *j = run_json(args);
        double pred = (double)json_integer_value(json_object_get(j, "predicted_step_ns"));
        cr_assert(pred > 0 && pred / 1e6 - ms < 1e-6 && ms - pred / 1e6 < 1e-6,
                  "budget %s: predicted %.6f ms, uvmrt-mlp on sim took %.6f ms", budgets[i], pred / 1e6, ms);
        json_decref(j);
    }
    unlink(res);
    remove_record(path);
}
