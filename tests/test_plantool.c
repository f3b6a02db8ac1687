/*
 * test_plantool.c -- UVMRT_RECORD (src/observe/record_file.c) and uvmrt-plan, run by path:
 * a sim run's recorded step, re-played by the tool, predicts that run's own step
 * time (the sim is the model), --fit finds the smallest budget, a budget below the
 * largest working set names the layer, more budget never predicts slower, and bad
 * input is refused with the documented exit codes. --model: the step a model file
 * describes, checked against uvmrt-mlp on sim and against working sets computed by
 * hand; --batch-max against a direct check of every batch; bad and damaged files.
 * Hugging Face config.json files: GPT-2 XL's predicts what gpt2-1.5b.json does, a Llama
 * config's parameters, bad configs name the key. --profile list, and a model without
 * --budget at the profile's GPU memory. The search of a model's mechanisms (uvmrt_choose):
 * CPU layers when the budget is tight, none when roomy, the best candidate chosen, what a
 * model that fits no way needs where, --batch-max within both budgets (and the disk's: the
 * tier within the spill directory's free space, a small tmpfs when root), tokens per second.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#ifndef UVMRT_PLAN_PATH
#error "UVMRT_PLAN_PATH must name the built uvmrt-plan"
#endif

#define MiB (1024ull * 1024ull)

/* "ulimit -v KB; " before a command, to bound what it allocates; nothing under
 * AddressSanitizer, whose shadow memory needs terabytes of address space. */
#if defined(__SANITIZE_ADDRESS__)
#define VLIMIT(kb) ""
#else
#define VLIMIT(kb) "ulimit -v " #kb "; "
#endif

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

/* The predictions here are compared with the trainers' sim runs, which have no host
 * limit (auto on sim): the tool's default, this machine's memory, would make them
 * depend on the machine. The host budget's own tests give --host-budget. */
static void no_host_limit(void) { setenv("UVMRT_HOST_BUDGET", "none", 1); }
TestSuite(plantool, .init = no_host_limit);

/* A sim context (prefetch, budget, profile; NULL: the default) that writes its
 * recorded step to path (UVMRT_RECORD), with the monitor off. */
static uvmrt_context_t *recording_ctx(const char *path, uint64_t budget, const char *profile)
{
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", path, 1);
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, budget, profile);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    return ctx;
}

/* A sim run of the default net (6 steps) at budget, with UVMRT_RECORD=path;
 * returns the run's step-3 time (the replay's steady step, same position). */
static uint64_t recorded_run_on(const char *path, uint64_t budget, const char *profile)
{
    uvmrt_context_t *ctx = recording_ctx(path, budget, profile);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 6, NULL, NULL);
    uvmrt_step_stats_t s2 = UVMRT_STRUCT_INIT(uvmrt_step_stats_t), s5 = s2;
    cr_assert_eq(uvmrt_step_stats_get(ctx, 2, &s2), UVMRT_OK);
    cr_assert_eq(uvmrt_step_stats_get(ctx, 5, &s5), UVMRT_OK);
    cr_assert_eq(s2.step_ns, s5.step_ns, "the run is not steady by step 3: %llu vs %llu",
                 (unsigned long long)s2.step_ns, (unsigned long long)s5.step_ns);
    net_destroy(net);
    unsetenv("UVMRT_RECORD");
    return s2.step_ns;
}
static uint64_t recorded_run(const char *path, uint64_t budget) { return recorded_run_on(path, budget, NULL); }

/* Removes the record and its folder (tmpfile_path). */
static void remove_record(const char *path)
{
    unlink(path);
    char dir[512];
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

/* A record path that cannot be written is refused when the context is created (issue
 * 21, item 4), naming the variable and the path; one that fails when it is written (a
 * FIFO with no reader) is an error, counted in output_errors, and the steps still
 * succeed: the FIFO is never replaced by a file (item 1). */
Test(plantool, unwritable_record_fails_create_and_a_failed_write_is_counted)
{
    alarm(30); /* a hang fails the test (not .timeout: Criterion 2.4.1's runner leaks when timed tests overlap) */
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", "/nonexistent-dir/rec.json", 1);
    setenv("UVMRT_MONITOR", "0", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 16 * MiB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    log_reset();
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert(log_contains("UVMRT_RECORD") && log_contains("/nonexistent-dir/rec.json") &&
              log_contains("does not exist"), "%s", log_text());
    cr_assert_null(ctx);

    char path[256];
    tmpfile_path(path, sizeof path);
    cr_assert_eq(mkfifo(path, 0600), 0);
    log_reset();
    ctx = recording_ctx(path, 16 * MiB, NULL);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 2, NULL, NULL); /* fails the test if a call fails */
    cr_assert(log_contains(path) && log_contains("FIFO with no reader"), "%s", log_text());
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_assert_eq(sum.output_errors, 1);
    net_destroy(net);
    struct stat sb;
    cr_assert(lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    unsetenv("UVMRT_RECORD");
    remove_record(path);
}

/* A step that leaves the record is recorded again, and the file follows it. */
Test(plantool, a_rerecorded_step_rewrites_the_file)
{
    char path[256];
    tmpfile_path(path, sizeof path);
    uvmrt_context_t *ctx = recording_ctx(path, 16 * MiB, NULL);
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

/* The CPU work the trainer measured (uvmrt_host_work_measured) is in the record as
 * the call's host_ns, and the re-play times that work by it. */
Test(plantool, measured_cpu_work_is_recorded_and_replayed)
{
    char path[256];
    tmpfile_path(path, sizeof path);
    uvmrt_context_t *ctx = recording_ctx(path, 64 * MiB, "h200");
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d = {"w", l, UVMRT_ROLE_WEIGHT, 2 * MiB};
    uvmrt_tensor_t *w;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &w), UVMRT_OK);
    cr_assert_eq(uvmrt_host_work_measured(ctx, l, UVMRT_PHASE_OPTIMIZER, 77000000), UVMRT_OK);
    uvmrt_stream_t gpu = (uvmrt_stream_t)0x10, cpu = (uvmrt_stream_t)0x20;
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
        uvmrt_layer_call_t c;
        uvmrt_layer_call_init(&c, l, UVMRT_PHASE_BACKWARD, gpu);
        c.sim_duration_ns = 1000000;
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        uvmrt_layer_call_init(&c, l, UVMRT_PHASE_OPTIMIZER, cpu);
        c.no_default_uses = 1;
        c.host_bytes = 100000000; /* the model's time alone: ~1 ms */
        c.after = gpu;
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    }
    uvmrt_context_destroy(ctx);
    unsetenv("UVMRT_RECORD");
    json_t *r = json_load_file(path, 0, NULL);
    cr_assert_not_null(r);
    json_t *calls = json_object_get(r, "calls");
    cr_assert_eq(json_array_size(calls), 2);
    cr_assert_null(json_object_get(json_array_get(calls, 0), "host_ns")); /* no CPU work */
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(calls, 1), "host_ns")), 77000000);
    json_decref(r);
    char args[512];
    snprintf(args, sizeof args, "--record '%s' --profile h200 --json", path);
    json_t *j = run_json(args);
    json_int_t step = json_integer_value(json_object_get(j, "predicted_step_ns"));
    cr_assert(step >= 78000000 && step < 79000000, "predicted %lld: the 1 ms backward, then the measured 77 ms",
              (long long)step);
    double cpu_floor = json_number_value(json_object_get(json_object_get(j, "floor_ns"), "cpu"));
    cr_assert(cpu_floor > 76.9e6 && cpu_floor < 77.1e6, "cpu floor %.0f", cpu_floor);
    json_decref(j);
    remove_record(path);
}

/* Runs uvmrt-plan with PATH=path_env (the shell that runs it found by its full path). */
static int run_tool_path(const char *path_env, const char *args, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PATH='%s' '%s' %s 2>&1", path_env, UVMRT_PLAN_PATH, args);
    int st = run_capture(cmd, out);
    cr_assert(st >= 0, "%s: did not exit", cmd);
    return st;
}

/* A stand-in gnuplot in dir: "ok" draws "PNG" to the script's output file, "fail"
 * exits 3. */
static void fake_gnuplot(const char *dir, const char *how)
{
    char path[300];
    snprintf(path, sizeof path, "%s/gnuplot", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    if (strcmp(how, "fail") == 0) fprintf(f, "#!/bin/sh\necho 'gnuplot: broken' >&2\nexit 3\n");
    else fprintf(f, "#!/bin/sh\nout=$(sed -n \"s/^set output '\\(.*\\)'$/\\1/p\" \"$1\")\necho PNG >\"$out\"\n");
    fclose(f);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* --plot needs --sweep; without gnuplot on PATH it fails at once (exit 1) naming the
 * package to install (issue 21, item 10), before any work. */
Test(plantool, plot_without_gnuplot_fails_naming_the_package)
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
    cr_assert_eq(run_tool_path("/nonexistent", args, &out), 1, "%s", out);
    cr_assert(strstr(out, "gnuplot is not on PATH") && strstr(out, "gnuplot-nox"), "%s", out);
    cr_assert_null(strstr(out, "predicted_ms/step"), "the sweep ran first: %s", out);
    free(out);
    remove_record(path);
}

/* --plot: an unwritable path fails at start (exit 1, naming it), whether gnuplot is
 * there or not; gnuplot failing is exit 1; a chart goes through a link to its target
 * (the link kept), by the report rules (issue 21, items 4 and 10). */
Test(plantool, plot_outputs_fail_with_exit_1_and_follow_the_report_rules)
{
    char path[256], args[900], dir[300];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --sweep 1M:8M --plot /nonexistent/x.png", path);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "/nonexistent/x.png") && strstr(out, "does not exist"), "%s", out);
    cr_assert_null(strstr(out, "predicted_ms/step"), "the sweep ran first: %s", out);
    free(out);

    fake_gnuplot(dir, "fail");
    char pathenv[600];
    snprintf(pathenv, sizeof pathenv, "%s:/usr/bin:/bin", dir);
    snprintf(args, sizeof args, "--record '%s' --sweep 8M:16M:8M --plot '%s/chart.png'", path, dir);
    cr_assert_eq(run_tool_path(pathenv, args, &out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "gnuplot failed"), "%s", out);
    free(out);
    char chart[400], target[400];
    snprintf(chart, sizeof chart, "%s/chart.png", dir);
    cr_assert_neq(access(chart, F_OK), 0, "a failed chart was written");

    fake_gnuplot(dir, "ok");
    snprintf(target, sizeof target, "%s/target.png", dir);
    FILE *f = fopen(target, "w");
    cr_assert_not_null(f);
    fputs("old", f);
    fclose(f);
    cr_assert_eq(symlink("target.png", chart), 0);
    cr_assert_eq(run_tool_path(pathenv, args, &out), 0, "%s", out);
    free(out);
    struct stat sb;
    cr_assert(lstat(chart, &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced by a file");
    char buf[16] = "";
    f = fopen(target, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(buf, sizeof buf, f));
    fclose(f);
    cr_assert_str_eq(buf, "PNG\n");
    unlink(chart);
    unlink(target);
    snprintf(target, sizeof target, "%s/gnuplot", dir);
    unlink(target);
    remove_record(path);
}

/* --trace: /dev/full and a FIFO with no reader fail with exit 1 and a message (no
 * hang); a folder that takes no files fails before the replay (issue 21, items 4, 7
 * and 10). */
Test(plantool, trace_outputs_fail_with_exit_1)
{
    alarm(60); /* a hang fails the test (not .timeout: Criterion 2.4.1's runner leaks when timed tests overlap) */
    char path[256], args[900], fifo[300];
    tmpfile_path(path, sizeof path);
    recorded_run(path, 16 * MiB);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --trace /dev/full", path);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "/dev/full") && strstr(out, "not written"), "%s", out);
    free(out);
    snprintf(fifo, sizeof fifo, "%s.fifo", path);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(args, sizeof args, "--record '%s' --trace '%s'", path, fifo);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, fifo) && strstr(out, "FIFO with no reader"), "%s", out);
    free(out);
    struct stat sb;
    cr_assert(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    unlink(fifo);
    snprintf(args, sizeof args, "--record '%s' --trace /proc/uvmrt-t.json", path);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "/proc/uvmrt-t.json") && strstr(out, "nothing was run"), "%s", out);
    free(out);
    /* standard output is an output too */
    char cmd[900];
    snprintf(cmd, sizeof cmd, "'%s' --record '%s' --budget 16M --json 2>&1 >/dev/full", UVMRT_PLAN_PATH, path);
    cr_assert_eq(run_capture(cmd, &out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "standard output"), "%s", out);
    free(out);
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
    const char *mlp = "--backend sim --steps 4 --layers 8 --hidden 1024 --rows 256 --cpu-layers 4 "
                      "--recompute none"; /* both given: uvmrt-mlp's default is to choose them */
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

/* ------------------------------------------------------------------ --model */
#ifndef UVMRT_MODELS_DIR
#error "UVMRT_MODELS_DIR must name tools/models"
#endif
#define W1_MODEL UVMRT_MODELS_DIR "/w1.json"
#define GPT_MODEL UVMRT_MODELS_DIR "/gpt2-1.5b.json"
#define HF_GPT2 UVMRT_TEST_DATA_DIR "/hf-gpt2-1.5b.config.json"
#define HF_LLAMA UVMRT_TEST_DATA_DIR "/hf-llama-3b.config.json"

static json_int_t jint(const json_t *o, const char *key) { return json_integer_value(json_object_get(o, key)); }

/* path = a new file in a new folder, holding text; remove_record removes both. */
static void write_model(char *path, size_t n, const char *text)
{
    char dir[] = "/tmp/uvmrt-plantool-model-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, n, "%s/model.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* The W1 file with one change: "key": old replaced by "key": new (a model variant). */
static char *w1_variant(const char *from, const char *to)
{
    FILE *f = fopen(W1_MODEL, "r");
    cr_assert_not_null(f, "%s", W1_MODEL);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *at = strstr(buf, from);
    cr_assert_not_null(at, "%s has no %s", W1_MODEL, from);
    char *out = malloc(n + strlen(to) + 1);
    cr_assert_not_null(out);
    snprintf(out, n + strlen(to) + 1, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
    return out;
}

/* Whether uvmrt-mlp --help has text (the flags' forms changed with --cpu-layers auto). */
static int mlp_help_has(const char *text)
{
    char cmd[600], *out = NULL;
    snprintf(cmd, sizeof cmd, "'%s' --help 2>&1", UVMRT_MLP_PATH);
    cr_assert_eq(run_capture(cmd, &out), 0);
    int has = strstr(out, text) != NULL;
    free(out);
    return has;
}

/* uvmrt-mlp's flags for "no recompute" and "recompute every block": a switch before
 * --recompute none|all|N|auto. */
static const char *mlp_recompute_flag(int on)
{
    if (mlp_help_has("--recompute none")) return on ? "--recompute all" : "--recompute none";
    return on ? "--recompute" : "";
}

/* uvmrt-mlp's own step 3 on sim (--result-json), in ns rounded as it writes ms. */
static double mlp_sim_step_ms(const char *flags, const char *budget, const char *res)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "env -i UVMRT_MONITOR=0 '%s' --backend sim --profile h200 --steps 4 %s --budget %s --result-json '%s' "
             ">/dev/null 2>&1",
             UVMRT_MLP_PATH, flags, budget, res);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    json_t *run = json_load_file(res, 0, NULL);
    cr_assert_not_null(run, "%s", res);
    double ms = json_real_value(json_array_get(json_object_get(run, "step_ms"), 2));
    json_decref(run);
    return ms;
}

static double model_predicted_ms(const char *model, const char *budget)
{
    char args[700];
    snprintf(args, sizeof args, "--model '%s' --no-search --profile h200 --budget %s --json", model, budget);
    json_t *j = run_json(args);
    cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
    double ms = (double)jint(j, "predicted_step_ns") / 1e6;
    json_decref(j);
    return ms;
}

/* The W1 model file is uvmrt-mlp's default shape, built with the trainer's tensors,
 * uses and call timing: its prediction equals uvmrt-mlp's own sim step time, at several
 * budgets, with recompute, and with the top blocks' AdamW on the CPU: a CPU call after
 * each CPU block's backward, timed at the profile's AdamW rate, as uvmrt-mlp declares it
 * from --cpu-layers K|auto on; before that it declared none (optimizer_bytes_per_param 0). */
Test(plantool, model_w1_predicts_the_mlp_runs)
{
    char res[300], rc_path[256], cpu_path[256];
    snprintf(res, sizeof res, "/tmp/uvmrt-plantool-w1-%d.json", (int)getpid());
    char *rc_text = w1_variant("\"recompute\": false", "\"recompute\": true");
    write_model(rc_path, sizeof rc_path, rc_text);
    /* blocks 0..17 on the GPU, 18..23 on the CPU: one more layer entry of the same name */
    char *cpu_text = w1_variant(
        "\"repeat\": 24,", "\"repeat\": 18,");
    char *split = strstr(cpu_text, "\n  }\n ]");
    cr_assert_not_null(split);
    char *both = malloc(strlen(cpu_text) + 1024);
    snprintf(both, strlen(cpu_text) + 1024,
             "%.*s\n  },\n  {\"name\": \"block\", \"repeat\": 6, \"params\": 67108864, \"optimizer\": \"cpu\", "
             "%s\"activation_bytes_per_sample\": 32768, "
             "\"output_bytes_per_sample\": 16384, \"workspace_bytes_per_sample\": 16384, \"flops_per_sample\": 134217728}%s",
             (int)(split - cpu_text), cpu_text,
             mlp_help_has("--cpu-layers K|auto") ? "" : "\"optimizer_bytes_per_param\": 0, ", split + 4);
    write_model(cpu_path, sizeof cpu_path, both);
    char gpu_flags[200], rc_flags[200];
    snprintf(gpu_flags, sizeof gpu_flags, "--optimizer-on gpu %s", mlp_recompute_flag(0));
    snprintf(rc_flags, sizeof rc_flags, "--optimizer-on gpu %s", mlp_recompute_flag(1));
    char cpu_flags[200];
    snprintf(cpu_flags, sizeof cpu_flags, "--optimizer-on cpu --cpu-layers 6 %s", mlp_recompute_flag(0));
    struct {
        const char *model, *flags, *budget;
    } rows[] = {{W1_MODEL, gpu_flags, "8G"},   {W1_MODEL, gpu_flags, "16G"}, {W1_MODEL, gpu_flags, "40G"},
                {rc_path, rc_flags, "8G"},     {cpu_path, cpu_flags, "8G"},  {cpu_path, cpu_flags, "12G"}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double ms = mlp_sim_step_ms(rows[i].flags, rows[i].budget, res);
        double pred = model_predicted_ms(rows[i].model, rows[i].budget);
        cr_assert(ms > 0 && fabs(pred - ms) < 1e-6, "%s at %s: predicted %.6f ms, uvmrt-mlp %s on sim took %.6f ms",
                  rows[i].model, rows[i].budget, pred, rows[i].flags, ms);
    }
    /* and the variants are different steps: the check can fail */
    cr_assert(fabs(model_predicted_ms(rc_path, "8G") - model_predicted_ms(W1_MODEL, "8G")) > 1.0);
    free(rc_text);
    free(cpu_text);
    free(both);
    unlink(res);
    remove_record(rc_path);
    remove_record(cpu_path);
}

/* The host memory uvmrt-plan says a model needs is what the library demands when the
 * trainer runs it: W1 (uvmrt-mlp's shape) at 8 and 12 GiB on the H200 and at a 12 GiB
 * card's default budget, on sim, both choosing with uvmrt_choose (the same mechanisms),
 * the plan's host_bytes_needed equals the run's plan_host_bytes (its report). Three
 * causes made them differ: uvmrt-mlp keeps a recomputing block's Z allocated (unused),
 * which the library counts and the model file built no tensor for (3 GiB more at 8 GiB;
 * now recompute_keeps_tensors in w1.json); without --budget the plan took the card's
 * whole memory, 512 MiB more than a run's auto budget (at 12 GiB it then chose 21 CPU
 * layers, not 24: 21.6 against 24.1 GiB); and a searched model had no recompute buffer
 * when none recomputes, which uvmrt-mlp allocates before its choice. */
Test(plantool, model_host_need_equals_the_librarys_at_run_time)
{
    char rep[300], res[300], cmd[1500], args[700];
    snprintf(rep, sizeof rep, "/tmp/uvmrt-plantool-hostneed-%d.json", (int)getpid());
    snprintf(res, sizeof res, "/tmp/uvmrt-plantool-hostneed-res-%d.json", (int)getpid());
    /* the last without a budget: the run's auto, the plan's default (the card's memory
     * less the reserve) */
    const char *profiles[] = {"h200", "h200", "consumer-12g"}, *budgets[] = {"8G", "12G", "auto"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "env -i UVMRT_MONITOR=0 '%s' --backend sim --profile %s --steps 3 --budget %s -q "
                 "--report 'json:%s' --result-json '%s' >/dev/null 2>&1",
                 UVMRT_MLP_PATH, profiles[i], budgets[i], rep, res);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        json_t *run = json_load_file(rep, 0, NULL), *r = json_load_file(res, 0, NULL);
        cr_assert(run != NULL && r != NULL, "%s %s", rep, res);
        json_t *vals = json_object_get(json_object_get(r, "choice"), "values");
        char bflag[32] = "";
        if (strcmp(budgets[i], "auto") != 0) snprintf(bflag, sizeof bflag, "--budget %s", budgets[i]);
        snprintf(args, sizeof args, "--model '%s' --profile %s %s --host-budget none --json", W1_MODEL, profiles[i],
                 bflag);
        json_t *j = run_json(args), *ch = json_object_get(j, "choice");
        cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
        cr_assert_eq(jint(ch, "cpu_layers"), jint(vals, "cpu_layers"), "%s", budgets[i]);
        cr_assert_eq(jint(ch, "recompute_layers"), jint(vals, "recompute"), "%s", budgets[i]);
        if (i < 2) cr_assert_gt(jint(vals, "recompute"), 0, "%s: the check needs recomputing blocks", budgets[i]);
        cr_assert_eq(jint(j, "host_bytes_needed"), jint(run, "plan_host_bytes"),
                     "%s: uvmrt-plan says %.3f GiB of host memory, the library demanded %.3f GiB", budgets[i],
                     jint(j, "host_bytes_needed") / 1073741824.0, jint(run, "plan_host_bytes") / 1073741824.0);
        json_decref(j);
        json_decref(run);
        json_decref(r);
    }
    unlink(rep);
    unlink(res);
}

/* The GPT-2 1.5B file describes uvmrt-gpt --depth 48 (its tied classifier, logits
 * buffer, unstreamed gradients) closely but not exactly (the gradient-norm buffer, the
 * tokens the head reads and the single gradient buffer it carries between blocks are
 * left out): within 2% of uvmrt-gpt's own sim step, where streaming the gradients (the
 * MLP's pattern) would predict 20% faster at 16 GiB. */
Test(plantool, model_gpt_is_close_to_the_gpt_runs)
{
    char res[300], cmd[1200];
    snprintf(res, sizeof res, "/tmp/uvmrt-plantool-gpt-%d.json", (int)getpid());
    const char *budgets[] = {"8G", "16G", "40G"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "env -i UVMRT_MONITOR=0 '%s' --backend sim --profile h200 --depth 48 --steps 4 --budget %s "
                 "--cpu-layers 0 --recompute none "
                 "--result-json '%s' >/dev/null 2>&1",
                 UVMRT_GPT_PATH, budgets[i], res);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
        json_t *run = json_load_file(res, 0, NULL);
        cr_assert_not_null(run, "%s", res);
        double ms = json_real_value(json_array_get(json_object_get(run, "step_ms"), 2));
        json_decref(run);
        double pred = model_predicted_ms(GPT_MODEL, budgets[i]);
        cr_assert(ms > 0 && fabs(pred - ms) <= 0.02 * ms, "%s: predicted %.3f ms, uvmrt-gpt on sim took %.3f ms",
                  budgets[i], pred, ms);
    }
    unlink(res);
}

/* A model file's memory-bound bytes add their time at the profile's HBM rate to the
 * flops': with everything resident (40 GiB holds W1), X bytes per sample forward and by
 * default twice that backward, once in the first layer (as for flops), add 24 + 23 x 2
 * + 1 = 71 X bytes per sample; per parameter, a backward's 4 add 24 x 4 x params. */
Test(plantool, model_hbm_bytes_add_their_time_at_the_hbm_rate)
{
    char path[256], path2[256];
    double base = model_predicted_ms(W1_MODEL, "40G");
    char *text = w1_variant("\"recompute\": false", "\"recompute\": false, \"hbm_bytes_per_sample\": 1000000");
    write_model(path, sizeof path, text);
    double with = model_predicted_ms(path, "40G");
    double hbm = uvmrt_profile_find("h200")->hbm_bps, want = 71.0 * 1e6 * 8192 / hbm * 1e3;
    cr_assert(fabs((with - base) - want) <= 0.001 * want + 0.01, "added %.3f ms, expected %.3f", with - base, want);
    char *text2 = w1_variant("\"recompute\": false", "\"recompute\": false, \"backward_hbm_bytes_per_param\": 4");
    write_model(path2, sizeof path2, text2);
    double per_param = model_predicted_ms(path2, "40G");
    want = 24.0 * 4 * 67108864 / hbm * 1e3;
    cr_assert(fabs((per_param - base) - want) <= 0.001 * want + 0.01, "added %.3f ms, expected %.3f", per_param - base,
              want);
    remove_record(path);
    remove_record(path2);
    free(text);
    free(text2);
}

/* Fits exactly from the largest working set of one call, computed here from the files'
 * numbers: W1's is a block's GPU optimizer (W, m, v, dW fp32 and Wh bf16: 4 x 256 + 128
 * MiB); with AdamW on the CPU those stay on the host and the last forward (Wh, A22, Z,
 * A, Y, dA: 6 x 128 MiB) is the largest. GPT-2 1.5B at batch 8 is bounded by the
 * embedding's optimizer; at batch 32 by a block's backward. */
Test(plantool, model_fits_at_budgets_computed_by_hand)
{
    const uint64_t w1_opt = 4 * 256 * MiB + 128 * MiB;
    uint64_t emb = 82124800, blk = 30740800;
    const uint64_t gpt8 = 4 * footprint_of(emb * 4) + footprint_of(emb * 2);
    const uint64_t gpt32 = footprint_of(blk * 2) + 3 * footprint_of(6553600ull * 32) +
                           footprint_of(52547584ull * 32) + footprint_of(36147200ull * 32) + footprint_of(blk * 4);
    char cpu_path[256], args[800];
    char *cpu_text = w1_variant("\"optimizer\": \"gpu\"", "\"optimizer\": \"cpu\"");
    write_model(cpu_path, sizeof cpu_path, cpu_text);
    struct {
        const char *model, *batch, *phase;
        uint64_t ws;
    } rows[] = {{W1_MODEL, "", "optimizer", w1_opt},
                {cpu_path, "", "forward", 6 * 128 * MiB},
                {GPT_MODEL, "", "optimizer", gpt8},
                {GPT_MODEL, "--batch 32", "backward", gpt32}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        snprintf(args, sizeof args, "--model '%s' %s --no-search --fit --json", rows[i].model, rows[i].batch);
        json_t *j = run_json(args);
        cr_assert(json_is_true(json_object_get(j, "fits")));
        cr_assert_eq(jint(j, "min_budget_bytes"), (json_int_t)rows[i].ws, "%s %s: min budget %lld, by hand %llu",
                     rows[i].model, rows[i].batch, (long long)jint(j, "min_budget_bytes"),
                     (unsigned long long)rows[i].ws);
        json_t *lw = json_object_get(j, "largest_working_set");
        cr_assert_eq(jint(lw, "bytes"), (json_int_t)rows[i].ws);
        cr_assert_str_eq(json_string_value(json_object_get(lw, "phase")), rows[i].phase);
        json_decref(j);
        /* 2 MiB less does not fit, and says which call */
        snprintf(args, sizeof args, "--model '%s' %s --no-search --budget %llu --json", rows[i].model, rows[i].batch,
                 (unsigned long long)(rows[i].ws - 2 * MiB));
        j = run_json(args);
        cr_assert(json_is_false(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
        const char *why = json_string_value(json_object_get(j, "why"));
        cr_assert(why && strstr(why, rows[i].phase), "%s", json_dumps(j, 0));
        json_decref(j);
    }
    free(cpu_text);
    remove_record(cpu_path);
}

/* A small model whose largest fitting batch is found by the search, checked against a
 * direct --budget and --fit run at every batch; the throughput rows equal the direct
 * predictions and best_batch is the best of them. */
Test(plantool, batch_max_equals_a_direct_check_per_batch)
{
    char path[256], args[800];
    write_model(path, sizeof path,
                "{\"name\": \"small\", \"batch\": 4, \"target_bytes_per_sample\": 65536, \"layers\": ["
                "{\"name\": \"l\", \"repeat\": 4, \"params\": 1048576, \"activation_bytes_per_sample\": 131072,"
                " \"output_bytes_per_sample\": 65536, \"workspace_bytes_per_sample\": 65536,"
                " \"flops_per_sample\": 2097152}]}");
    const int N = 40;
    const char *budget = "24M";
    snprintf(args, sizeof args, "--model '%s' --no-search --budget %s --batch-max %d --json", path, budget, N);
    json_t *bm = run_json(args);
    cr_assert_str_eq(json_string_value(json_object_get(bm, "label")), "predicted");
    json_int_t largest = jint(bm, "largest_fitting_batch"), best = jint(bm, "best_batch");
    json_t *rows = json_object_get(bm, "batches");
    json_int_t direct_largest = 0;
    double best_sps = 0;
    json_int_t direct_best = 0;
    for (int b = 1; b <= N; b++) {
        snprintf(args, sizeof args, "--model '%s' --no-search --budget %s --batch %d --json", path, budget, b);
        json_t *j = run_json(args);
        int fits = json_is_true(json_object_get(j, "fits"));
        cr_assert_eq(jint(j, "batch"), b);
        /* --fit agrees: the smallest budget that fits this batch is within the budget */
        cr_assert_eq(fits, jint(j, "min_budget_bytes") <= (json_int_t)(24 * MiB), "batch %d: %s", b, json_dumps(j, 0));
        if (fits) {
            cr_assert_eq(direct_largest, b - 1, "fit is not monotone in the batch at %d", b);
            direct_largest = b;
            double sps = json_real_value(json_object_get(j, "predicted_samples_per_s"));
            if (sps > best_sps) best_sps = sps, direct_best = b;
            /* the finder's row for this batch is this prediction */
            json_t *row = json_array_get(rows, (size_t)b - 1);
            cr_assert_eq(jint(row, "batch"), b);
            cr_assert(json_is_true(json_object_get(row, "fits")));
            cr_assert_eq(jint(row, "predicted_step_ns"), jint(j, "predicted_step_ns"), "batch %d", b);
            cr_assert_str_eq(json_string_value(json_object_get(row, "bound")),
                             json_string_value(json_object_get(j, "bound")));
        }
        json_decref(j);
    }
    cr_assert(direct_largest > 1 && direct_largest < N, "pick a budget that cuts: largest %lld", (long long)direct_largest);
    cr_assert_eq(largest, direct_largest, "--batch-max: %lld, direct: %lld", (long long)largest, (long long)direct_largest);
    cr_assert_eq(best, direct_best);
    /* the row after the last fitting batch says where it stops */
    json_t *stop = json_array_get(rows, (size_t)largest);
    cr_assert_eq(jint(stop, "batch"), largest + 1);
    cr_assert(json_is_false(json_object_get(stop, "fits")) && json_is_null(json_object_get(stop, "predicted_step_ns")));
    json_decref(bm);
    /* text: a table, every number labelled */
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --no-search --budget %s --batch-max %d", path, budget, N);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "predicted_ms/step"), "%s", out);
    char want[64];
    snprintf(want, sizeof want, "largest batch that fits (predicted): %lld", (long long)largest);
    cr_assert_not_null(strstr(out, want), "%s", out);
    free(out);
    /* nothing fits: says what batch 1 needs */
    snprintf(args, sizeof args, "--model '%s' --no-search --budget 1M --batch-max 8 --json", path);
    json_t *none = run_json(args);
    cr_assert_eq(jint(none, "largest_fitting_batch"), 0);
    cr_assert_eq(jint(none, "best_batch"), 0);
    cr_assert_gt(jint(none, "batch1_min_budget_bytes"), (json_int_t)MiB);
    json_decref(none);
    remove_record(path);
}

/* The GPT file's batch finder: more budget fits at least as large a batch. */
Test(plantool, batch_max_on_the_gpt_model)
{
    json_int_t prev = 0;
    const char *budgets[] = {"2G", "4G"};
    for (int i = 0; i < 2; i++) {
        char args[600];
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget %s --batch-max 32 --json", GPT_MODEL,
                 budgets[i]);
        json_t *j = run_json(args);
        json_int_t l = jint(j, "largest_fitting_batch"), best = jint(j, "best_batch");
        cr_assert(l > prev && best >= 1 && best <= l, "%s: largest %lld best %lld", budgets[i], (long long)l,
                  (long long)best);
        cr_assert_str_eq(json_string_value(json_object_get(j, "model")), "gpt2-1.5b");
        prev = l;
        json_decref(j);
    }
}

/* --json has the documented fields, for --model as for --record; text labels numbers. */
Test(plantool, model_json_and_text_fields)
{
    char args[600];
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 16G --json", GPT_MODEL);
    json_t *j = run_json(args);
    cr_assert(json_is_true(json_object_get(j, "fits")));
    cr_assert_gt(jint(j, "min_budget_bytes"), 0);
    cr_assert_gt(jint(j, "predicted_step_ns"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(j, "label")), "predicted");
    const char *bound = json_string_value(json_object_get(j, "bound"));
    const char *bounds[] = {"gpu_compute", "link_h2d", "link_d2h", "host_memory", "cpu"};
    int known = 0;
    json_t *floor = json_object_get(j, "floor_ns");
    for (int k = 0; k < 5; k++) {
        known |= bound && strcmp(bound, bounds[k]) == 0;
        cr_assert(json_is_integer(json_object_get(floor, bounds[k])), "floor_ns.%s: %s", bounds[k], json_dumps(j, 0));
    }
    cr_assert(known, "bound %s", bound ? bound : "(none)");
    json_t *layers = json_object_get(j, "layers");
    cr_assert_eq(json_array_size(layers), 50); /* embed, block0..block47, head */
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(layers, 1), "name")), "block0");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(layers, 49), "name")), "head");
    for (size_t l = 0; l < 50; l++)
        cr_assert_not_null(json_string_value(json_object_get(json_array_get(layers, l), "mechanisms")));
    cr_assert_str_eq(json_string_value(json_object_get(j, "model")), "gpt2-1.5b");
    cr_assert_eq(jint(j, "batch"), 8);
    cr_assert_gt(json_real_value(json_object_get(j, "predicted_samples_per_s")), 0);
    json_decref(j);
    /* not fitting: the same keys, null where there is no step */
    snprintf(args, sizeof args, "--model '%s' --no-search --budget 1G --json", GPT_MODEL);
    j = run_json(args);
    cr_assert(json_is_false(json_object_get(j, "fits")));
    cr_assert(json_is_null(json_object_get(j, "predicted_step_ns")) && json_is_null(json_object_get(j, "bound")));
    cr_assert(json_is_array(json_object_get(j, "layers")) && jint(j, "min_budget_bytes") > (json_int_t)(1024 * MiB));
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --batch 4 --budget 16G", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "batch 4"), "%s", out);
    for (char *line = strtok(out, "\n"); line != NULL; line = strtok(NULL, "\n"))
        if (strstr(line, " ms") || strstr(line, "samples/s") || strstr(line, "MiB to the GPU") ||
            strstr(line, "smallest budget"))
            cr_assert_not_null(strstr(line, "predicted"), "unlabelled: %s", line);
    free(out);
}

Test(plantool, bad_model_files_name_the_key)
{
    const struct {
        const char *text, *says;
    } bad[] = {
        {"{\"name\": \"x\",, \"batch\": 1}", "line 1, column"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"name\": \"x\", \"batch\": 1}", "'layers' is missing"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": []}", "'layers' is []"},
        {"{\"name\": \"x\", \"batch\": 0, \"layers\": []}", "'batch' is 0: expected an integer from 1"},
        {"{\"name\": \"x\", \"batch\": 2.5, \"layers\": []}", "'batch' is 2.5"},
        {"{\"format\": \"other\", \"name\": \"x\", \"batch\": 1, \"layers\": [{}]}", "'format' is \"other\""},
        {"{\"name\": \"x\", \"batch\": 1, \"layer\": []}", "unknown key 'layer'"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [7]}", "layers[0] is 7: expected an object"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"params\": 1}]}", "layers[0]: key 'name' is missing"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": \"lots\", "
         "\"activation_bytes_per_sample\": 1}]}",
         "layers[0] ('l'): 'params' is \"lots\": expected an integer"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"parms\": 1, "
         "\"activation_bytes_per_sample\": 1}]}",
         "unknown key 'parms'"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1}]}",
         "'activation_bytes_per_sample' is missing"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"optimizer\": \"tpu\", "
         "\"activation_bytes_per_sample\": 1}]}",
         "'optimizer' is \"tpu\": expected \"gpu\", \"cpu\" or \"none\""},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"repeat\": 0, "
         "\"activation_bytes_per_sample\": 1}]}",
         "'repeat' is 0"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"recompute\": 1, "
         "\"activation_bytes_per_sample\": 1}]}",
         "'recompute' is 1: expected true or false"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, "
         "\"activation_bytes_per_sample\": 8, \"output_bytes_per_sample\": 9}]}",
         "'output_bytes_per_sample' is 9: expected a number from 1 to 8"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"flops_per_sample\": -1, "
         "\"activation_bytes_per_sample\": 1}]}",
         "'flops_per_sample' is -1"},
        {"{\"name\": \"x\", \"batch\": 1, \"batch\": 2, \"layers\": []}", "duplicate"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"l\", \"params\": 1, \"tied_to\": \"l\", "
         "\"activation_bytes_per_sample\": 1}]}",
         "'tied_to' is \"l\": expected the name of one earlier layer"},
        {"{\"name\": \"x\", \"batch\": 1, \"layers\": [{\"name\": \"e\", \"repeat\": 2, \"params\": 1, "
         "\"activation_bytes_per_sample\": 1}, {\"name\": \"h\", \"params\": 1, \"tied_to\": \"e\", "
         "\"activation_bytes_per_sample\": 1}]}",
         "layers[1] ('h'): 'tied_to' is \"e\""},
        /* a tensor over the library's limit at this batch */
        {"{\"name\": \"x\", \"batch\": 10000000, \"layers\": [{\"name\": \"l\", \"params\": 1, "
         "\"activation_bytes_per_sample\": 1e12}]}",
         "expected at most 2^50"},
    };
    char path[256], args[600], *out = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_model(path, sizeof path, bad[i].text);
        snprintf(args, sizeof args, "--model '%s' --budget 8G", path);
        cr_assert_eq(run_tool(args, &out), 1, "case %zu: %s", i, out);
        cr_assert_not_null(strstr(out, bad[i].says), "case %zu: wanted '%s' in: %s", i, bad[i].says, out);
        cr_assert_not_null(strstr(out, path), "case %zu: the file is not named: %s", i, out);
        free(out);
        remove_record(path);
    }
    cr_assert_eq(run_tool("--model /nonexistent/m.json --budget 8G", &out), 1, "%s", out);
    cr_assert_not_null(strstr(out, "/nonexistent/m.json"), "%s", out);
    free(out);
    /* usage errors: exit 2, naming the flag */
    const struct {
        const char *args, *says;
    } usage[] = {
        {"--model m.json --record r.json --fit", "--record"},
        {"--record r.json --batch 4 --fit", "--batch needs --model"},
        {"--record r.json --batch-max 4 --budget 8G", "--batch-max needs --model"},
        {"--record r.json --seq 512 --fit", "--seq needs --model"},
        {"--model m.json --seq 0 --fit", "--seq '0'"},
        {"--model m.json --seq 2000000 --fit", "--seq '2000000'"},
        {"--model m.json --batch-max 4 --batch 2 --budget 8G", "excludes --batch"},
        {"--model m.json --batch 0 --fit", "--batch '0'"},
        {"--model m.json --batch-max 2000000 --budget 8G", "--batch-max '2000000'"},
        {"--model m.json --batch 4x --fit", "--batch '4x'"},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        cr_assert_eq(run_tool(usage[i].args, &out), 2, "%s: %s", usage[i].args, out);
        cr_assert_not_null(strstr(out, usage[i].says), "%s: %s", usage[i].args, out);
        free(out);
    }
}

/* Fuzz-robust: every prefix of a model file, and files with one byte changed, give
 * a prediction or a clean error (exit 0 or 1), never a crash. */
static void damage_each_part_of(const char *file, size_t parts)
{
    FILE *f = fopen(file, "r");
    cr_assert_not_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char path[256], args[600], *out = NULL;
    write_model(path, sizeof path, "");
    static const char subst[] = {'0', '9', '-', '"', '}', ']', ',', 'e', ' ', 'x'};
    for (size_t k = 0, cut = 0; cut < n; cut += n / parts + 1, k++) {
        for (int variant = 0; variant < 2; variant++) {
            char buf[8192];
            memcpy(buf, text, n + 1);
            if (variant == 0) buf[cut] = '\0';
            else buf[cut] = subst[k % sizeof subst];
            FILE *g = fopen(path, "w");
            cr_assert_not_null(g);
            fputs(buf, g);
            fclose(g);
            snprintf(args, sizeof args, "--model '%s' --budget 2G --json", path);
            int rc = run_tool(args, &out);
            cr_assert(rc == 0 || rc == 1, "cut %zu variant %d: exit %d: %s", cut, variant, rc, out);
            if (rc == 1) cr_assert_not_null(strstr(out, path), "%s", out);
            free(out);
        }
    }
    remove_record(path);
}

Test(plantool, damaged_model_files_never_crash)
{
    damage_each_part_of(W1_MODEL, 16);
    damage_each_part_of(HF_LLAMA, 8); /* a Hugging Face config too */
}

#ifndef UVMRT_TEST_DATA_DIR
#error "UVMRT_TEST_DATA_DIR must name tests/data"
#endif

/* A real record (uvmrt-gpt d48 at 16 GiB on the H200, 19 CPU layers, their CPU calls
 * without a measurement) with that run's calibrated profile: the model cuts the CPU's
 * bookings under every later transfer, and once cut bookings were cut again their
 * number multiplied: this re-play, --fit's search included, ran for minutes. */
Test(plantool, a_gpt_record_with_cpu_layers_replays_quickly)
{
    alarm(30); /* a hang fails the test (not Criterion's .timeout: see the FIFO test's note) */
    json_t *j = run_json("--record '" UVMRT_TEST_DATA_DIR "/gpt-d48-16g.rec.json' --profile '" UVMRT_TEST_DATA_DIR
                         "/h200-calibrated.profile.json' --budget 16G --json");
    cr_assert(json_is_true(json_object_get(j, "fits")));
    double ms = (double)json_integer_value(json_object_get(j, "predicted_step_ns")) / 1e6;
    cr_assert(ms > 300 && ms < 800, "predicted %.1f ms (the run measured 565)", ms);
    json_decref(j);
}

/* --trace FILE: the re-play's model timeline as trace-event JSON, of the prediction
 * reported (not of the search for the smallest budget): the record's layers' calls in
 * each of its steps, the last step's calls ending at the predicted step time. An
 * unwritable path and --trace with --fit are refused before anything runs. */
Test(plantool, trace_is_the_predicted_steps_timeline)
{
    char rec[256], trace[300];
    tmpfile_path(rec, sizeof rec);
    recorded_run(rec, 16 * MiB);
    snprintf(trace, sizeof trace, "%s.trace.json", rec);
    char args[1024];
    snprintf(args, sizeof args, "--record '%s' --budget 16M --json --trace '%s'", rec, trace);
    json_t *p = run_json(args);
    double predicted_us = (double)json_integer_value(json_object_get(p, "predicted_step_ns")) / 1e3;
    json_error_t err;
    json_t *t = json_load_file(trace, 0, &err);
    cr_assert_not_null(t, "%s: %s", trace, err.text);
    json_t *ev = json_object_get(t, "traceEvents");
    double first = -1, last = 0;
    json_int_t max_step = 0;
    size_t calls = 0;
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        const char *ph = json_string_value(json_object_get(e, "ph")), *name = json_string_value(json_object_get(e, "name"));
        json_int_t step = json_integer_value(json_object_get(json_object_get(e, "args"), "step"));
        if (ph == NULL || strcmp(ph, "X") != 0 || name == NULL || strstr(name, "forward") == NULL) continue;
        if (step > max_step) max_step = step, first = -1, last = 0, calls = 0;
        if (step != max_step) continue;
        double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
        if (first < 0 || ts < first) first = ts;
        if (ts + dur > last) last = ts + dur;
        calls++;
    }
    cr_assert_eq(max_step, 3, "the trace's last step is %lld, expected the re-play's 3", (long long)max_step);
    cr_assert_gt(calls, 0, "no forward call in the last step");
    cr_assert(last - first > 0 && last - first <= predicted_us * 1.001, "the last step's forwards span %.0f us, "
              "the predicted step is %.0f us", last - first, predicted_us);
    json_decref(t);
    json_decref(p);
    char *out = NULL;
    snprintf(args, sizeof args, "--record '%s' --fit --trace '%s'", rec, trace);
    cr_assert_eq(run_tool(args, &out), 2);
    cr_assert(strstr(out, "--trace") && strstr(out, "--fit"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "--record '%s' --trace /nonexistent-dir/t.json", rec);
    cr_assert_eq(run_tool(args, &out), 1);
    cr_assert(strstr(out, "/nonexistent-dir/t.json") && strstr(out, "cannot write"), "%s", out);
    free(out);
    unlink(trace);
    remove_record(rec);
}

/* ------------------------------------------------------------------ what a record may hold */
/* A two-layer record, each field given as text: version, budget_bytes, footprint
 * of tensor 0, its arena, its placement, the first call's stream and after. */
typedef struct rec_fields {
    const char *version, *budget, *footprint, *arena, *placement, *stream, *after, *id;
} rec_fields_t;

static void write_record(const char *path, const rec_fields_t *f)
{
    FILE *o = fopen(path, "w");
    cr_assert_not_null(o);
    fprintf(o,
            "{\"format\": \"uvmrt-record\", \"version\": %s, \"profile\": \"consumer-8g\", \"budget_bytes\": %s,"
            " \"layers\": [\"l0\", \"l1\"], \"tensors\": ["
            "{\"id\": %s, \"name\": \"w0\", \"layer\": 0, \"role\": \"weight\", \"size_bytes\": 16384,"
            " \"footprint_bytes\": %s, \"arena\": %s, \"placement\": %s},"
            "{\"id\": 1, \"name\": \"w1\", \"layer\": 1, \"role\": \"weight\", \"size_bytes\": 16384,"
            " \"footprint_bytes\": 65536}],"
            " \"calls\": [{\"layer\": 0, \"phase\": \"forward\", \"stream\": %s, \"after\": %s, \"duration_ns\": 1000,"
            " \"uses\": [[%s, 1]]}, {\"layer\": 1, \"phase\": \"backward\", \"duration_ns\": 1000, \"uses\": [[1, 3]]}]}",
            f->version, f->budget, f->id, f->footprint, f->arena, f->placement, f->stream, f->after, f->id);
    cr_assert_eq(fclose(o), 0);
}

static const rec_fields_t good_fields = {"1", "8388608", "65536", "0", "\"auto\"", "0", "-1", "0"};

/* Every field out of its range is refused (exit 1) naming the field and the value;
 * the same record with good values is predicted. */
Test(plantool, record_fields_are_checked_by_name)
{
    char path[256], args[512], *out = NULL;
    tmpfile_path(path, sizeof path);
    write_record(path, &good_fields);
    snprintf(args, sizeof args, "--record '%s' --json", path);
    json_t *j = run_json(args);
    cr_assert(json_is_true(json_object_get(j, "fits")));
    json_decref(j);
    struct {
        rec_fields_t f;
        const char *says;
    } bad[] = {
        {{"2", "8388608", "65536", "0", "\"auto\"", "0", "-1", "0"}, "version 2"},
        {{"1", "-1", "65536", "0", "\"auto\"", "0", "-1", "0"}, "budget_bytes -1"},
        {{"1", "8388608", "1099511627776", "0", "\"auto\"", "0", "-1", "0"}, "footprint_bytes 1099511627776"},
        {{"1", "8388608", "4096", "0", "\"auto\"", "0", "-1", "0"}, "footprint_bytes 4096"},
        {{"1", "8388608", "65536", "5", "\"auto\"", "0", "-1", "0"}, "arena 5"},
        {{"1", "8388608", "65536", "-2", "\"auto\"", "0", "-1", "0"}, "arena -2"},
        {{"1", "8388608", "65536", "0", "\"moon\"", "0", "-1", "0"}, "placement 'moon'"},
        {{"1", "8388608", "65536", "0", "7", "0", "-1", "0"}, "placement 7"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "7", "-1", "0"}, "stream 7"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "-1", "-1", "0"}, "stream -1"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "0", "1", "0"}, "after 1"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "0", "-2", "0"}, "after -2"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "0", "99", "0"}, "after 99"},
        {{"1", "8388608", "65536", "0", "\"auto\"", "0", "-1", "2000000000"}, "id 2000000000"},
        {{"1", "\"8M\"", "65536", "0", "\"auto\"", "0", "-1", "0"}, "budget_bytes \"8M\""},
        {{"1", "8388608", "65536.5", "0", "\"auto\"", "0", "-1", "0"}, "footprint_bytes 65536.5"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_record(path, &bad[i].f);
        int rc = run_tool(args, &out);
        cr_assert_eq(rc, 1, "case %zu (%s): exit %d: %s", i, bad[i].says, rc, out);
        cr_assert_not_null(strstr(out, bad[i].says), "case %zu: expected '%s' in: %s", i, bad[i].says, out);
        cr_assert_not_null(strstr(out, path), "case %zu: %s", i, out);
        free(out);
    }
    remove_record(path);
}

/* Twenty tensors with a footprint of 2^62 add up to 2^66, which wrapped to 0 ("fits",
 * smallest budget 0.0 MiB): refused, whatever the sizes. */
Test(plantool, footprints_that_would_wrap_are_refused)
{
    char path[256], args[512], *out = NULL;
    tmpfile_path(path, sizeof path);
    FILE *o = fopen(path, "w");
    cr_assert_not_null(o);
    fprintf(o, "{\"format\": \"uvmrt-record\", \"version\": 1, \"layers\": [\"l0\"], \"tensors\": [");
    for (int i = 0; i < 20; i++)
        fprintf(o, "%s{\"id\": %d, \"name\": \"t%d\", \"layer\": 0, \"role\": \"weight\", \"size_bytes\": 1048576,"
                   " \"footprint_bytes\": 4611686018427387904}", i ? ", " : "", i, i);
    fprintf(o, "], \"calls\": [{\"layer\": 0, \"phase\": \"forward\", \"duration_ns\": 1, \"uses\": [[0, 1]]}]}");
    cr_assert_eq(fclose(o), 0);
    snprintf(args, sizeof args, "--record '%s' --fit", path);
    int rc = run_tool(args, &out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert_null(strstr(out, "fits"), "%s", out);
    cr_assert_not_null(strstr(out, "footprint_bytes 4611686018427387904"), "%s", out);
    free(out);
    remove_record(path);
}

/* A record of a run with tensors on the disk tier ("tier": "disk", written by the
 * runtime): the replay says it keeps them in host memory and times no disk; a tier
 * other than memory or disk is refused, named. */
Test(plantool, a_records_disk_tensors_are_named_in_a_note)
{
    char path[256], args[512], *out = NULL;
    for (int bad = 0; bad <= 1; bad++) {
        tmpfile_path(path, sizeof path);
        FILE *o = fopen(path, "w");
        cr_assert_not_null(o);
        fprintf(o, "{\"format\": \"uvmrt-record\", \"version\": 1, \"layers\": [\"l0\"], \"tensors\": ["
                   "{\"id\": 0, \"name\": \"w\", \"layer\": 0, \"role\": \"weight\", \"size_bytes\": 1048576,"
                   " \"footprint_bytes\": 1048576},"
                   "{\"id\": 1, \"name\": \"m\", \"layer\": 0, \"role\": \"optimizer_state\", \"size_bytes\": 2097152,"
                   " \"footprint_bytes\": 2097152, \"placement\": \"host\", \"tier\": \"%s\"}], "
                   "\"calls\": [{\"layer\": 0, \"phase\": \"forward\", \"duration_ns\": 1000, \"uses\": [[0, 1]]},"
                   "{\"layer\": 0, \"phase\": \"optimizer\", \"duration_ns\": 1000, \"uses\": [[0, 3], [1, 3]]}]}",
                bad ? "tape" : "disk");
        cr_assert_eq(fclose(o), 0);
        snprintf(args, sizeof args, "--record '%s' --budget 64M --profile h200", path);
        int rc = run_tool(args, &out);
        if (bad) {
            cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
            cr_assert_not_null(strstr(out, "tier 'tape'"), "%s", out);
        } else {
            cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
            cr_assert_not_null(strstr(out, "1 tensors (0.00 GiB) were on the disk tier"), "%s", out);
            cr_assert_not_null(strstr(out, "keeps them in host memory"), "%s", out);
            cr_assert_not_null(strstr(out, "fits (predicted)"), "%s", out);
            /* with a spill directory and a profile with disk figures: planned there as
             * recorded, m read and written once by its one read-write use, out of host
             * memory but for the tier's window (its one layer's) */
            char prof[300], dir[300];
            snprintf(prof, sizeof prof, "%s.profile.json", path);
            snprintf(dir, sizeof dir, "%s.spill", path);
            cr_assert_eq(mkdir(dir, 0700), 0);
            FILE *f = fopen(prof, "w");
            cr_assert_not_null(f);
            fprintf(f, "{\"format_version\": 1, \"name\": \"t\", \"memory_bytes\": 150000000000, "
                       "\"prefetch_h2d_bps\": 4.8e10, \"evict_d2h_bps\": 1.3e10, \"fault_bps\": 5.8e9, "
                       "\"remote_read_bps\": 5.05e10, \"remote_write_bps\": 5.22e10, \"flops\": 7.7e14, "
                       "\"hbm_bps\": 4.26e12, \"pinned_h2d_bps\": 5.55e10, \"pinned_d2h_bps\": 5.53e10, "
                       "\"disk_read_bps\": 1e9, \"disk_write_bps\": 5e8}");
            cr_assert_eq(fclose(f), 0);
            snprintf(args, sizeof args, "--record '%s' --budget 64M --profile '%s' --spill-dir '%s' --json", path,
                     prof, dir);
            free(out);
            rc = run_tool(args, &out);
            cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
            cr_assert_not_null(strstr(out, "planned there as recorded"), "%s", out);
            json_error_t err;
            json_t *j = json_loads(strstr(out, "{"), 0, &err);
            cr_assert_not_null(j, "%s: %s", err.text, out);
            json_t *d = json_object_get(j, "disk");
            cr_assert_eq(json_integer_value(json_object_get(d, "bytes")), 2097152, "%s", out);
            cr_assert_eq(json_integer_value(json_object_get(d, "read_bytes_per_step")), 2097152, "%s", out);
            cr_assert_eq(json_integer_value(json_object_get(d, "write_bytes_per_step")), 2097152, "%s", out);
            /* the drive's time both ways: 2 MiB at 1 GB/s and at 0.5 GB/s, at least */
            double ns = (double)json_integer_value(json_object_get(j, "predicted_step_ns"));
            cr_assert_geq(ns, 2097152 / 1e9 * 1e9 + 2097152 / 5e8 * 1e9 - 2, "%s", out);
            json_decref(j);
            remove(prof);
            rmdir(dir);
        }
        free(out);
        out = NULL;
        remove_record(path);
    }
}

/* A tensor id of 10^9 costs what one tensor costs: the run fits in 200 MB of address
 * space (a table by the largest id took 4.4 GB). */
Test(plantool, a_large_tensor_id_allocates_nothing_by_it)
{
    char path[256], args[640], *out = NULL;
    tmpfile_path(path, sizeof path);
    rec_fields_t f = good_fields;
    f.id = "1000000000";
    f.arena = "-1";
    write_record(path, &f);
    snprintf(args, sizeof args, "--record '%s' --json", path);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, VLIMIT(400000) "'%s' %s 2>&1", UVMRT_PLAN_PATH, args);
    int rc = run_capture(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    cr_assert_not_null(strstr(out, "\"fits\": true"), "%s", out);
    free(out);
    remove_record(path);
}

/* A FIFO (or a directory) given as a record, a model or a profile file is refused at
 * once: opening a FIFO with no writer blocked the tool for ever. (Each command has its own
 * `timeout 10`; no Criterion .timeout: two tests with one, run in parallel, leak 48 bytes in
 * Criterion 2.4.1's runner, which CI's LeakSanitizer stage counts.) */
Test(plantool, a_fifo_as_input_is_refused_without_blocking)
{
    char dir[] = "/tmp/uvmrt-plantool-fifo-XXXXXX", fifo[256], args[512], *out = NULL;
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof fifo, "%s/in.json", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    const char *forms[] = {"--record '%s' --fit", "--model '%s' --fit", "--record '%s/..' --fit"};
    const char *says[] = {"a FIFO, not a regular file", "a FIFO, not a regular file", "a directory"};
    for (int i = 0; i < 3; i++) {
        char a[300];
        snprintf(a, sizeof a, forms[i], i == 2 ? dir : fifo);
        snprintf(args, sizeof args, "%s", a);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "timeout 10 '%s' %s 2>&1", UVMRT_PLAN_PATH, args);
        int rc = run_capture(cmd, &out);
        cr_assert_eq(rc, 1, "%s: exit %d (124: it hung): %s", args, rc, out);
        cr_assert_not_null(strstr(out, says[i]), "%s: %s", args, out);
        free(out);
    }
    /* a profile file that is a FIFO: the sim context is refused, not hung */
    char rec[256];
    snprintf(rec, sizeof rec, "%s/rec.json", dir);
    write_record(rec, &good_fields);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 10 '%s' --record '%s' --profile '%s' --fit 2>&1", UVMRT_PLAN_PATH, rec, fifo);
    int rc = run_capture(cmd, &out);
    cr_assert_eq(rc, 1, "exit %d (124: it hung): %s", rc, out);
    cr_assert_not_null(strstr(out, "FIFO"), "%s", out);
    free(out);
    unlink(rec);
    unlink(fifo);
    rmdir(dir);
}

/* A record of 100 000 calls over 4 000 tensors: the planner's next-use table was
 * calls x tensors (1.6 GB here), so the replay ran out of a 1.2 GB address space;
 * by the uses it is a few MB. One budget (--sweep A:A: no --fit search). */
Test(plantool, a_long_record_is_planned_in_memory_by_its_uses)
{
    alarm(300); /* a hang fails the test (not Criterion's .timeout: see the FIFO test's note) */
    char path[256], *out = NULL;
    tmpfile_path(path, sizeof path);
    FILE *o = fopen(path, "w");
    cr_assert_not_null(o);
    const int n_tensors = 4000, n_calls = 100000;
    fprintf(o, "{\"format\": \"uvmrt-record\", \"version\": 1, \"profile\": \"consumer-8g\", \"layers\": [\"l\"], "
               "\"tensors\": [");
    for (int i = 0; i < n_tensors; i++)
        fprintf(o, "%s{\"id\": %d, \"name\": \"t%d\", \"layer\": -1, \"role\": \"activation\", \"size_bytes\": 4096,"
                   " \"footprint_bytes\": 65536, \"arena\": 0}", i ? ", " : "", i, i);
    fprintf(o, "], \"calls\": [");
    for (int i = 0; i < n_calls; i++)
        fprintf(o, "%s{\"layer\": 0, \"phase\": \"forward\", \"duration_ns\": 1000, \"uses\": [[%d, 1], [%d, 3]]}",
                i ? ", " : "", i % n_tensors, (i + 1) % n_tensors);
    fprintf(o, "]}");
    cr_assert_eq(fclose(o), 0);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, VLIMIT(1200000) "'%s' --record '%s' --sweep 64M:64M --json 2>&1", UVMRT_PLAN_PATH, path);
    int rc = run_capture(cmd, &out);
    cr_assert_eq(rc, 0, "exit %d: %.2000s", rc, out);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "%.2000s", out);
    json_t *row = json_array_get(json_object_get(j, "sweep"), 0);
    cr_assert(json_is_true(json_object_get(row, "fits")), "%.2000s", out);
    json_decref(j);
    free(out);
    remove_record(path);
}

/* ------------------------------------------------------------------ Hugging Face configs */

/* The GPT-2 XL config.json builds the step gpt2-1.5b.json describes: the same parameters,
 * the same smallest budget and, at batch 8 and T 1024 (its n_positions, the default), the
 * same predicted step within 2% at budgets that stream and that hold everything. */
Test(plantool, hf_gpt2_config_predicts_like_the_model_file)
{
    const char *budgets[] = {"8G", "16G", "40G"};
    for (int i = 0; i < 3; i++) {
        char args[700];
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget %s --batch 8 --json", HF_GPT2, budgets[i]);
        json_t *hf = run_json(args);
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget %s --json", GPT_MODEL, budgets[i]);
        json_t *file = run_json(args);
        cr_assert(json_is_true(json_object_get(hf, "fits")), "%s", json_dumps(hf, 0));
        cr_assert_eq(jint(hf, "batch"), 8);
        double a = (double)jint(hf, "predicted_step_ns"), b = (double)jint(file, "predicted_step_ns");
        cr_assert(b > 0 && fabs(a - b) <= 0.02 * b, "%s: config %.0f ns, model file %.0f ns", budgets[i], a, b);
        cr_assert_eq(jint(hf, "min_budget_bytes"), jint(file, "min_budget_bytes"));
        double pa = json_real_value(json_object_get(hf, "params")), pb = json_real_value(json_object_get(file, "params"));
        cr_assert(pb > 1.5e9 && pa == pb, "params: config %.0f, model file %.0f", pa, pb);
        const char *src = json_string_value(json_object_get(hf, "source"));
        cr_assert(src && strstr(src, "gpt2") && strstr(src, "seq 1024"), "source: %s", src ? src : "(none)");
        cr_assert_str_eq(json_string_value(json_object_get(hf, "batch_source")), "--batch");
        cr_assert_null(json_object_get(file, "source")); /* a model file has no config to tell of */
        json_decref(hf);
        json_decref(file);
    }
}

/* A Llama config (OpenLLaMA 3B's shapes): 3.43e9 parameters (the embedding and the
 * untied classifier 32000 x 3200 each, 26 blocks of 4 C^2 + 3 C I + 2 C); the defaults
 * (batch 1, seq 2048 = its max_position_embeddings) said in the output; with the whole
 * model resident (the H200's memory) a quarter of the sequence predicts less than half
 * the step (the optimizer's pass over 3.43e9 parameters does not shrink), and a --seq
 * beyond the config's positions is refused. */
Test(plantool, hf_llama_config_counts_its_parameters)
{
    char args[700], *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --profile h200 --json", HF_LLAMA); /* all of it resident */
    json_t *j = run_json(args);
    double params = json_real_value(json_object_get(j, "params"));
    cr_assert(fabs(params - 3.43e9) <= 0.01 * 3.43e9, "params %.0f", params);
    cr_assert_eq(params, 26.0 * (4 * 3200.0 * 3200 + 3 * 3200.0 * 8640 + 2 * 3200) + 2 * 32000.0 * 3200 + 3200);
    cr_assert(json_is_true(json_object_get(j, "fits")));
    cr_assert_eq(jint(j, "batch"), 1);
    cr_assert_str_eq(json_string_value(json_object_get(j, "batch_source")), "the default");
    const char *src = json_string_value(json_object_get(j, "source"));
    cr_assert(src && strstr(src, "seq 2048 (the default"), "source: %s", src ? src : "(none)");
    json_int_t full = jint(j, "predicted_step_ns");
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --seq 512 --json", HF_LLAMA);
    j = run_json(args);
    cr_assert(jint(j, "predicted_step_ns") > 0 && jint(j, "predicted_step_ns") < full / 2, "seq 512: %lld, 2048: %lld",
              (long long)jint(j, "predicted_step_ns"), (long long)full);
    cr_assert(strstr(json_string_value(json_object_get(j, "source")), "seq 512 (--seq)"));
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 40G", HF_LLAMA);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "seq 2048 (the default: the config's max_position_embeddings 2048)") &&
                  strstr(out, "batch 1 (the default)") && strstr(out, "parameters: 3426473600"),
              "%s", out);
    free(out);
    snprintf(args, sizeof args, "--model '%s' --budget 40G --seq 4096", HF_LLAMA);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "--seq 4096") && strstr(out, "max_position_embeddings (2048)"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "--model '%s' --budget 40G --seq 512", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "--seq 512 is for a Hugging Face config.json"), "%s", out);
    free(out);
}

/* A config that is neither GPT-2 nor Llama, or has a key missing or out of range, is
 * refused (exit 1) with the file, the key and its value. */
Test(plantool, hf_bad_configs_name_the_key)
{
#define LL "\"model_type\": \"llama\", \"hidden_size\": 3200, \"intermediate_size\": 8640, " \
           "\"num_attention_heads\": 32, \"vocab_size\": 32000, \"max_position_embeddings\": 2048"
#define G2 "\"model_type\": \"gpt2\", \"n_embd\": 1600, \"n_head\": 25, \"n_positions\": 1024, \"vocab_size\": 50257"
    const struct {
        const char *text, *says;
    } bad[] = {
        {"{\"model_type\": \"bert\", \"hidden_size\": 768}", "'model_type' is \"bert\": expected \"gpt2\", \"llama\""},
        {"{\"model_type\": 7}", "'model_type' is 7"},
        {"{" G2 "}", "key 'n_layer' is missing"},
        {"{" G2 ", \"n_layer\": 0}", "'n_layer' is 0: expected an integer from 1"},
        {"{" G2 ", \"n_layer\": 4, \"n_inner\": -1}", "'n_inner' is -1"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 1601, \"n_head\": 25, \"n_positions\": 1024, "
         "\"vocab_size\": 50257}",
         "'n_embd' is 1601: expected a multiple of n_head (25)"},
        {"{" LL "}", "key 'num_hidden_layers' is missing"},
        {"{" LL ", \"num_hidden_layers\": \"26\"}", "'num_hidden_layers' is \"26\""},
        {"{" LL ", \"num_hidden_layers\": 2, \"num_key_value_heads\": 5}",
         "'num_key_value_heads' is 5: expected a divisor of num_attention_heads (32)"},
        {"{" LL ", \"num_hidden_layers\": 2, \"tie_word_embeddings\": \"no\"}", "'tie_word_embeddings' is \"no\""},
        {"{" LL ", \"num_hidden_layers\": 2, \"head_dim\": 128}", "'head_dim' is 128: expected"},
        {"{\"model_type\": \"gpt2\", \"n_layer\": 2, \"n_embd\": 1600, \"n_head\": 25, \"n_positions\": 1024, "
         "\"vocab_size\": 2.5}",
         "'vocab_size' is 2.5"},
    };
#undef LL
#undef G2
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[300], args[400], *out = NULL;
        write_model(path, sizeof path, bad[i].text);
        snprintf(args, sizeof args, "--model '%s' --budget 8G", path);
        cr_assert_eq(run_tool(args, &out), 1, "case %zu: %s", i, out);
        cr_assert_not_null(strstr(out, bad[i].says), "case %zu: wanted '%s' in: %s", i, bad[i].says, out);
        cr_assert_not_null(strstr(out, path), "case %zu: the file is not named: %s", i, out);
        free(out);
        remove_record(path);
    }
}

/* --profile list: every built-in profile with its memory and whether it was measured. */
Test(plantool, profile_list_prints_the_built_in_profiles)
{
    char *out = NULL;
    cr_assert_eq(run_tool("--profile list", &out), 0, "%s", out);
    size_t n = 0;
    while (uvmrt_profile_builtin(n) != NULL) n++;
    cr_assert_gt(n, 1);
    for (size_t i = 0; i < n; i++) {
        const uvmrt_profile_t *p = uvmrt_profile_builtin(i);
        char want[200];
        snprintf(want, sizeof want, "%-16s %-12.1f %-10s", p->name, p->memory_bytes / (1024.0 * MiB),
                 p->measured ? "yes" : "no");
        cr_assert_not_null(strstr(out, want), "wanted '%s' in: %s", want, out);
    }
    free(out);
}

/* A model without --budget (nor --fit or --sweep) is predicted at the profile's GPU
 * memory, and the output says so; --batch-max searches at it too. */
Test(plantool, a_model_without_budget_takes_the_profiles_memory)
{
    char args[700], *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --profile consumer-24g --json", GPT_MODEL);
    json_t *j = run_json(args);
    /* less the 512 MiB a run's auto budget keeps free: the budget a run on the card gets */
    cr_assert_eq(jint(j, "budget_bytes"), (json_int_t)(uvmrt_profile_find("consumer-24g")->memory_bytes - 512 * MiB));
    const char *why = json_string_value(json_object_get(j, "budget_source"));
    cr_assert(why && strstr(why, "GPU memory of profile consumer-24g"), "%s", why ? why : "(none)");
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile consumer-24g --budget 8G --json", GPT_MODEL);
    j = run_json(args);
    cr_assert_eq(jint(j, "budget_bytes"), (json_int_t)(8192 * MiB));
    cr_assert_null(json_object_get(j, "budget_source"));
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile h200", HF_LLAMA);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "the GPU memory of profile h200 less the 512.0 MiB a run's auto budget keeps free (no "
                          "--budget given)"),
              "%s", out);
    free(out);
    snprintf(args, sizeof args, "--model '%s' --profile consumer-8g --batch-max 4 --json", GPT_MODEL);
    j = run_json(args);
    cr_assert_eq(jint(j, "budget_bytes"), (json_int_t)(uvmrt_profile_find("consumer-8g")->memory_bytes - 512 * MiB));
    json_decref(j);
    /* a profile file's memory_bytes too */
    const char *pf = UVMRT_TEST_DATA_DIR "/h200-calibrated.profile.json";
    uvmrt_profile_t *prof = NULL;
    cr_assert_eq(uvmrt_profile_load(pf, &prof), UVMRT_OK);
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --json", GPT_MODEL, pf);
    j = run_json(args);
    cr_assert_eq(jint(j, "budget_bytes"), (json_int_t)(prof->memory_bytes - 512 * MiB));
    uvmrt_profile_free(prof);
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile nosuch", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 1, "%s", out);
    cr_assert(strstr(out, "--profile 'nosuch'"), "%s", out);
    free(out);
}

/* The Llama family's other two: Mistral 7B (grouped key-value heads, 8 of 32) and
 * Qwen2 0.5B (q/k/v biases, tied embeddings, 32768 positions) count their published
 * parameters exactly (7241732096 and 494032768), and a config's positions above 2048
 * give seq 2048, said so. */
Test(plantool, hf_mistral_and_qwen2_count_their_published_parameters)
{
    const struct {
        const char *text;
        double params;
        const char *source;
    } cfg[] = {
        {"{\"model_type\": \"mistral\", \"num_hidden_layers\": 32, \"hidden_size\": 4096, \"intermediate_size\": 14336, "
         "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 32000, "
         "\"max_position_embeddings\": 32768, \"tie_word_embeddings\": false}",
         7241732096.0, "seq 2048 (the default: the config's max_position_embeddings 32768, capped at 2048)"},
        {"{\"model_type\": \"qwen2\", \"num_hidden_layers\": 24, \"hidden_size\": 896, \"intermediate_size\": 4864, "
         "\"num_attention_heads\": 14, \"num_key_value_heads\": 2, \"vocab_size\": 151936, "
         "\"max_position_embeddings\": 32768, \"tie_word_embeddings\": true}",
         494032768.0, "Hugging Face config (qwen2), seq 2048"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        char path[300], args[400];
        write_model(path, sizeof path, cfg[i].text);
        snprintf(args, sizeof args, "--model '%s' --profile h200 --json", path);
        json_t *j = run_json(args);
        cr_assert_eq(json_real_value(json_object_get(j, "params")), cfg[i].params, "case %zu: %s", i,
                     json_dumps(j, 0));
        const char *src = json_string_value(json_object_get(j, "source"));
        cr_assert(src && strstr(src, cfg[i].source), "case %zu: %s", i, src ? src : "(none)");
        cr_assert(json_is_true(json_object_get(j, "fits")));
        json_decref(j);
        remove_record(path);
    }
}

/* --host-budget: a plan that needs more host memory does not fit, says what it needs
 * where, and the batch finder keeps to it (issue 24 §3). */
Test(plantool, host_budget_bounds_the_plan_and_the_batch)
{
    char args[700];
    snprintf(args, sizeof args, "--model '%s' --no-search --profile h200 --budget 8G --batch 8 --json", GPT_MODEL);
    json_t *free_host = run_json(args); /* UVMRT_HOST_BUDGET=none (the suite's) */
    cr_assert(json_is_true(json_object_get(free_host, "fits")));
    json_int_t need = jint(free_host, "host_bytes_needed"), tensors = jint(free_host, "tensor_bytes");
    cr_assert(need >= tensors - (json_int_t)(8ull << 30) && need <= tensors, "need %lld of %lld", (long long)need,
              (long long)tensors);
    cr_assert(jint(free_host, "gpu_bytes_needed") <= (json_int_t)(8ull << 30));
    cr_assert(json_is_null(json_object_get(free_host, "host_budget_bytes")));
    json_decref(free_host);

    /* 1 GiB less than the plan needs: does not fit, because of the host */
    char hb[32];
    snprintf(hb, sizeof hb, "%lldM", (long long)(need >> 20) - 1024);
    snprintf(args, sizeof args, "--model '%s' --no-search --profile h200 --budget 8G --batch 8 --host-budget %s --json",
             GPT_MODEL, hb);
    json_t *j = run_json(args);
    cr_assert(json_is_false(json_object_get(j, "fits")));
    cr_assert(json_is_true(json_object_get(j, "host_limited")));
    cr_assert_gt(jint(j, "host_bytes_needed"), jint(j, "host_budget_bytes"));
    cr_assert_gt(jint(j, "min_budget_bytes"), (json_int_t)(8ull << 30), "a larger GPU budget makes it fit");
    cr_assert_not_null(strstr(json_string_value(json_object_get(j, "why")), "does not fit: needs "));
    json_decref(j);
    /* the same from the environment, and in text */
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --no-search --profile h200 --budget 8G --batch 8", GPT_MODEL);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "UVMRT_HOST_BUDGET=%s '%s' %s 2>&1", hb, UVMRT_PLAN_PATH, args);
    cr_assert_eq(run_capture(cmd, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "does not fit: needs "), "%s", out);
    cr_assert_not_null(strstr(out, "(UVMRT_HOST_BUDGET)"), "%s", out);
    free(out);

    /* the batch finder: a host budget never fits a larger batch, a small one none */
    json_int_t largest[3];
    const char *hosts[] = {"none", "12G", "1G"};
    for (int i = 0; i < 3; i++) {
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 4G --batch-max 32 --host-budget %s --json",
                 GPT_MODEL, hosts[i]);
        json_t *b = run_json(args);
        largest[i] = jint(b, "largest_fitting_batch");
        json_decref(b);
    }
    cr_assert_gt(largest[0], 0);
    cr_assert_leq(largest[1], largest[0]);
    /* each fitting row says its host need, which a larger batch does not lower */
    snprintf(args, sizeof args,
             "--model '%s' --no-search --profile h200 --budget 4G --batch-max 4 --host-budget none --json", GPT_MODEL);
    json_t *rows = run_json(args), *arr = json_object_get(rows, "batches");
    cr_assert_geq(json_array_size(arr), 2);
    json_t *r1 = json_array_get(arr, 0), *r2 = json_array_get(arr, 1);
    cr_assert(json_is_true(json_object_get(r1, "fits")) && json_is_true(json_object_get(r2, "fits")));
    cr_assert_gt(jint(r1, "host_bytes_needed"), (json_int_t)(20ull << 30), "1.5e9 parameters' AdamW beyond 4 GiB");
    cr_assert_geq(jint(r2, "host_bytes_needed"), jint(r1, "host_bytes_needed"));
    json_decref(rows);
    cr_assert_eq(largest[2], 0, "the tensors alone need more than 1 GiB of host memory");

    /* bad values */
    cr_assert_eq(run_tool("--model x --host-budget 512K", &out), 2);
    cr_assert_not_null(strstr(out, "--host-budget '512K'"), "%s", out);
    free(out);
}

/* A built-in estimate warns that it does not know the host, and points to uvmrt-calibrate. */
Test(plantool, estimated_profiles_warn_what_they_did_not_measure)
{
    char args[600];
    snprintf(args, sizeof args, "--model '%s' --profile rtx4090 --json", GPT_MODEL);
    json_t *j = run_json(args);
    json_t *w = json_object_get(j, "warnings");
    cr_assert(json_is_array(w) && json_array_size(w) == 1);
    cr_assert_not_null(strstr(json_string_value(json_array_get(w, 0)), "uvmrt-calibrate"));
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --json", GPT_MODEL);
    j = run_json(args);
    cr_assert_null(json_object_get(j, "warnings"), "h200 is measured");
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --profile consumer-8g", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "warning: profile consumer-8g is an estimate"), "%s", out);
    free(out);
}

/* ------------------------------------------------------------------ the search (issue 24 §3) */
/* A model's prediction at budget with its mechanisms searched (the default), as JSON. */
static json_t *searched(const char *model, const char *more)
{
    char args[800];
    snprintf(args, sizeof args, "--model '%s' --profile h200 %s --json", model, more);
    json_t *j = run_json(args);
    json_t *c = json_object_get(j, "choice");
    cr_assert(json_is_object(c) && json_is_true(json_object_get(c, "searched")), "%s", json_dumps(j, 0));
    return j;
}

/* The choice is uvmrt_choose's over the trainers' candidates: the chosen combination is
 * the fastest of those rehearsed, the prediction is its, and no slower than the file's
 * own mechanisms (a candidate too). A tight budget puts AdamW of the top layers on the
 * CPU (the embedding's optimizer alone needs 1.6 GB of GPU memory at batch 8); a budget
 * that holds everything keeps it all on the GPU and recomputes nothing. */
Test(plantool, search_puts_adamw_on_the_cpu_when_tight_and_none_when_roomy)
{
    const char *budgets[] = {"2G", "8G", "100G"};
    json_int_t cpu[3], rc[3];
    for (int i = 0; i < 3; i++) {
        char more[64];
        snprintf(more, sizeof more, "--budget %s", budgets[i]);
        json_t *j = searched(GPT_MODEL, more), *c = json_object_get(j, "choice");
        cr_assert(json_is_true(json_object_get(j, "fits")), "%s: %s", budgets[i], json_dumps(j, 0));
        cpu[i] = jint(c, "cpu_layers");
        rc[i] = jint(c, "recompute_layers");
        cr_assert_eq(jint(c, "placeable_layers"), 50);
        cr_assert_eq(jint(c, "recomputable_layers"), 48); /* the blocks */
        json_t *cands = json_object_get(c, "candidates");
        cr_assert_eq(json_array_size(cands), 9 * 5, "the trainers' K in n/8 steps, N in quarters");
        json_int_t best = 0, chosen = 0;
        for (size_t k = 0; k < json_array_size(cands); k++) {
            json_t *x = json_array_get(cands, k);
            json_int_t ns = jint(x, "predicted_step_ns");
            if (ns > 0 && (best == 0 || ns < best)) best = ns;
            if (jint(x, "cpu_layers") == cpu[i] && jint(x, "recompute_layers") == rc[i]) chosen = ns;
        }
        cr_assert(chosen > 0 && chosen == best, "%s: chose a candidate of %lld ns, the best is %lld", budgets[i],
                  (long long)chosen, (long long)best);
        if (jint(c, "plan_budget_bytes") == jint(j, "budget_bytes")) /* the replay is the rehearsal's step */
            cr_assert_eq(jint(j, "predicted_step_ns"), best, "%s", budgets[i]);
        json_t *file = searched(GPT_MODEL, more);
        json_decref(file);
        char args[600];
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget %s --no-search --json", GPT_MODEL, budgets[i]);
        json_t *as = run_json(args);
        cr_assert(json_is_false(json_object_get(json_object_get(as, "choice"), "searched")));
        if (json_is_true(json_object_get(as, "fits")))
            cr_assert_leq(jint(j, "predicted_step_ns"), jint(as, "predicted_step_ns"), "%s", budgets[i]);
        json_decref(as);
        /* the layers say where each AdamW runs and whether it recomputes, as the names do */
        json_t *layers = json_object_get(j, "layers"), *names = json_object_get(c, "cpu_layer_names");
        cr_assert_eq((json_int_t)json_array_size(names), cpu[i]);
        json_int_t on_cpu = 0, recomputing = 0;
        for (size_t l = 0; l < json_array_size(layers); l++) {
            json_t *lo = json_array_get(layers, l);
            int is_cpu = strcmp(json_string_value(json_object_get(lo, "adamw")), "cpu") == 0;
            on_cpu += is_cpu;
            recomputing += json_is_true(json_object_get(lo, "recompute"));
            if (is_cpu) /* the top layers: the last in forward order */
                cr_assert_geq(l, json_array_size(layers) - (size_t)cpu[i], "%s: layer %zu", budgets[i], l);
        }
        cr_assert_eq(on_cpu, cpu[i]);
        cr_assert_eq(recomputing, rc[i]);
        json_decref(j);
    }
    cr_assert_gt(cpu[0], 0, "2G: the embedding's AdamW does not fit the GPU");
    cr_assert_gt(cpu[1], 0, "8G: tight for 1.56e9 parameters' AdamW");
    cr_assert_eq(cpu[2], 0, "100G holds the whole model: no CPU layers");
    cr_assert_eq(rc[2], 0, "100G holds every activation: nothing recomputes");
    /* in text: what it chose, and the throughput in tokens (the file says 1024 per sample) */
    char *out = NULL, args[600];
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "chose (uvmrt_choose, 45 combinations") && strstr(out, "AdamW on the CPU for ") &&
                  strstr(out, " tokens/s") && strstr(out, "bound by "),
              "%s", out);
    free(out);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G --no-search", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "mechanisms as the model file says (--no-search): AdamW on the CPU for 0 of 50"),
                       "%s", out);
    free(out);
}

/* A model that fits no way says so, and what it needs where: below the lightest
 * mechanisms' largest working set, the GPU budget it needs (and at that budget it
 * fits); under a host budget too small for any plan, the host memory the least-hungry
 * plan needs (and with that host budget it fits). */
Test(plantool, a_model_that_fits_no_way_says_what_it_needs_where)
{
    json_t *j = searched(GPT_MODEL, "--budget 256M"), *nd = json_object_get(j, "needed");
    cr_assert(json_is_false(json_object_get(j, "fits")));
    cr_assert(json_is_false(json_object_get(json_object_get(j, "choice"), "fits")));
    cr_assert(json_is_true(json_object_get(nd, "gpu_limited")), "%s", json_dumps(j, 0));
    json_int_t gpu = jint(nd, "gpu_budget_bytes");
    cr_assert_gt(gpu, (json_int_t)(256 * MiB));
    const char *why = json_string_value(json_object_get(j, "why"));
    cr_assert(why && strstr(why, "does not fit any way") && strstr(why, "GPU budget of at least"), "%s", why);
    json_decref(j);
    char more[160];
    snprintf(more, sizeof more, "--budget %lld", (long long)gpu);
    j = searched(GPT_MODEL, more);
    cr_assert(json_is_true(json_object_get(j, "fits")), "at the GPU budget it named: %s", json_dumps(j, 0));
    json_decref(j);

    j = searched(GPT_MODEL, "--budget 8G --host-budget 4G");
    nd = json_object_get(j, "needed");
    cr_assert(json_is_false(json_object_get(j, "fits")));
    cr_assert(json_is_true(json_object_get(nd, "host_limited")) && json_is_false(json_object_get(nd, "gpu_limited")),
              "%s", json_dumps(j, 0));
    json_int_t host = jint(nd, "host_bytes");
    cr_assert_gt(host, (json_int_t)(4ull << 30));
    why = json_string_value(json_object_get(j, "why"));
    cr_assert(why && strstr(why, "of host memory") && strstr(why, "over the host budget of 4.00 GiB"), "%s", why);
    json_decref(j);
    snprintf(more, sizeof more, "--budget 8G --host-budget %lldM", (long long)(host >> 20) + 1);
    j = searched(GPT_MODEL, more);
    cr_assert(json_is_true(json_object_get(j, "fits")), "with the host memory it named: %s", json_dumps(j, 0));
    cr_assert_leq(jint(j, "host_bytes_needed"), host + (json_int_t)MiB);
    json_decref(j);
    /* in text */
    char *out = NULL, args[600];
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G --host-budget 4G", GPT_MODEL);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "does not fit any way (predicted)") && strstr(out, "none fits"), "%s", out);
    free(out);
}

/* --batch-max searches each batch: every fitting row keeps to both budgets and says
 * what it chose; a host budget never fits a larger batch than none. */
Test(plantool, batch_max_searches_within_both_budgets)
{
    json_int_t largest[2];
    const char *hosts[] = {"none", "24G"};
    for (int i = 0; i < 2; i++) {
        char args[600];
        snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 4G --batch-max 24 --host-budget %s --json",
                 GPT_MODEL, hosts[i]);
        json_t *b = run_json(args), *rows = json_object_get(b, "batches");
        cr_assert(json_is_true(json_object_get(b, "searched")));
        largest[i] = jint(b, "largest_fitting_batch");
        for (size_t k = 0; k < json_array_size(rows); k++) {
            json_t *r = json_array_get(rows, k), *c = json_object_get(r, "choice");
            if (!json_is_true(json_object_get(r, "fits"))) continue;
            cr_assert(json_is_object(c) && jint(c, "cpu_layers") >= 0 && jint(c, "cpu_layers") <= 50, "%s",
                      json_dumps(r, 0));
            if (i == 1) cr_assert_leq(jint(r, "host_bytes_needed"), (json_int_t)(24ull << 30), "%s", json_dumps(r, 0));
        }
        json_decref(b);
    }
    cr_assert_gt(largest[1], 0);
    cr_assert_leq(largest[1], largest[0]);
}

/* A Hugging Face config's tokens per sample are its seq: tokens/s = samples/s x seq. */
Test(plantool, search_reports_tokens_per_second)
{
    json_t *j = searched(HF_GPT2, "--budget 8G --batch 4 --seq 512");
    double sps = json_real_value(json_object_get(j, "predicted_samples_per_s"));
    double tps = json_real_value(json_object_get(j, "predicted_tokens_per_s"));
    cr_assert(sps > 0 && fabs(tps - 512 * sps) <= 1e-6 * tps, "%f samples/s, %f tokens/s", sps, tps);
    json_decref(j);
}

/* A fresh directory (dir: a mkdtemp template) holding prof, the calibrated H200 profile
 * with the disk's rates (6.5 GB/s read, 4.5 GB/s write) added: the disk tier's tests. */
static void disk_profile(char *dir, char *prof, size_t cap)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(prof, cap, "%s/p.json", dir);
    json_t *pj = json_load_file(UVMRT_TEST_DATA_DIR "/h200-calibrated.profile.json", 0, NULL);
    cr_assert_not_null(pj);
    json_object_set_new(pj, "disk_read_bps", json_real(6.5e9));
    json_object_set_new(pj, "disk_write_bps", json_real(4.5e9));
    cr_assert_eq(json_dump_file(pj, prof, 0), 0);
    json_decref(pj);
}

/* A profile that measured the disk, without a spill directory: the disk line says it is
 * not planned and why (nothing goes on it); one without its figures says nothing of it;
 * --spill-dir reports the directory and its free space. */
Test(plantool, a_measured_disk_without_a_spill_dir_is_not_planned)
{
    char dir[] = "/tmp/uvmrt-plantool-disk-XXXXXX", prof[300], args[800];
    disk_profile(dir, prof, sizeof prof);
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --json", W1_MODEL, prof);
    json_t *j = run_json(args), *d = json_object_get(j, "disk");
    cr_assert(json_is_object(d) && json_is_false(json_object_get(d, "modelled")), "%s", json_dumps(j, 0));
    cr_assert_eq(json_real_value(json_object_get(d, "read_bps")), 6.5e9);
    json_decref(j);
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G", W1_MODEL, prof);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert_not_null(strstr(out, "disk: not planned (no --spill-dir"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G --json", W1_MODEL);
    j = run_json(args);
    cr_assert_null(json_object_get(j, "disk"));
    json_decref(j);
    /* --spill-dir: the directory and its free space; one that does not exist is a usage error */
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G --spill-dir '%s' --json", W1_MODEL, dir);
    j = run_json(args);
    d = json_object_get(j, "disk");
    cr_assert(json_is_object(d), "%s", json_dumps(j, 0));
    cr_assert_str_eq(json_string_value(json_object_get(d, "spill_dir")), dir);
    cr_assert_gt(json_integer_value(json_object_get(d, "free_bytes")), 0);
    json_decref(j);
    snprintf(args, sizeof args, "--model '%s' --profile h200 --budget 8G --spill-dir '%s/nosuch'", W1_MODEL, dir);
    cr_assert_eq(run_tool(args, &out), 2, "%s", out);
    cr_assert_not_null(strstr(out, "--spill-dir '"), "%s", out);
    free(out);
    unlink(prof);
    rmdir(dir);
}

/* A host budget too small for the plan's host-homed state, a spill directory and a
 * profile with the disk's rates: the plan puts the last CPU layers' AdamW moments on
 * the disk tier until the host need fits, says the GPU, host and
 * disk bytes, and adds the disk's reads (which the CPU's update waits for) to the step,
 * the disk being its bound; with a host budget that holds everything nothing goes to the
 * disk; without a spill directory it does not fit; and when even every CPU layer's state
 * on the disk leaves too much in host memory, it says what is needed on the GPU, in host
 * memory and on the disk. */
Test(plantool, a_short_host_budget_puts_the_cpu_state_on_the_disk_tier)
{
    char dir[] = "/tmp/uvmrt-plantool-tier-XXXXXX", prof[300], args[900];
    disk_profile(dir, prof, sizeof prof);
    /* the plan without a host budget: what the host would need */
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget none --spill-dir '%s' --json",
             W1_MODEL, prof, dir);
    json_t *free_run = run_json(args);
    json_int_t host_all = jint(free_run, "host_bytes_needed");
    cr_assert(json_is_true(json_object_get(free_run, "fits")));
    cr_assert_eq(jint(free_run, "disk_bytes_needed"), 0, "nothing on the disk when the host holds it all");
    cr_assert_gt(host_all, 16 * 1024 * MiB);
    /* 18 GiB of host: the tier takes the moments of the CPU layers it needs to */
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 18G --spill-dir '%s' --json",
             W1_MODEL, prof, dir);
    json_t *j = run_json(args), *d = json_object_get(j, "disk");
    cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
    cr_assert(json_is_true(json_object_get(d, "modelled")), "%s", json_dumps(d, 0));
    json_int_t disk = jint(j, "disk_bytes_needed"), host = jint(j, "host_bytes_needed");
    cr_assert_gt(disk, 0);
    cr_assert_eq(jint(d, "bytes"), disk);
    cr_assert_leq(host, 18 * 1024 * MiB);
    cr_assert_geq(host + disk, host_all, "what left host memory is on the disk (staging stays)");
    cr_assert_gt(jint(d, "layers"), 0);
    cr_assert_eq(jint(d, "read_bytes_per_step"), disk);
    cr_assert_eq(jint(d, "write_bytes_per_step"), disk);
    double read_ns = (double)disk / 6.5e9 * 1e9, write_ns = (double)disk / 4.5e9 * 1e9;
    cr_assert(fabs((double)jint(d, "read_ns") - read_ns) < 2 && fabs((double)jint(d, "write_ns") - write_ns) < 2);
    cr_assert_geq((double)jint(j, "predicted_step_ns"), (double)jint(free_run, "predicted_step_ns") + read_ns - 2,
                  "the step waits for the disk's reads");
    cr_assert_str_eq(json_string_value(json_object_get(j, "bound")), "disk");
    cr_assert_gt(json_real_value(json_object_get(d, "tb_written_per_day")), 0.0);
    json_decref(j);
    json_decref(free_run);
    char *out = NULL;
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 18G --spill-dir '%s'", W1_MODEL,
             prof, dir);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "disk: the AdamW moments of ") && strstr(out, "TB written per day") &&
                  strstr(out, ", disk ") && strstr(out, "GiB\n"),
              "%s", out);
    free(out);
    /* 12 GiB of host: the moments of every CPU layer are not enough; layers' master
     * weights and gradients follow them (as uvmrt-gpt's --spill auto), and a state
     * layer's weights are read twice a step (its forward, its update) */
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 12G --spill-dir '%s' --json",
             W1_MODEL, prof, dir);
    j = run_json(args);
    d = json_object_get(j, "disk");
    cr_assert(json_is_true(json_object_get(j, "fits")), "%s", json_dumps(j, 0));
    cr_assert_leq(jint(j, "host_bytes_needed"), 12 * 1024 * MiB);
    cr_assert_gt(jint(d, "state_layers"), 0, "%s", json_dumps(d, 0));
    cr_assert_leq(jint(d, "state_layers"), jint(d, "layers"));
    cr_assert_gt(jint(d, "bytes"), disk, "less host memory, more on the disk: %s", json_dumps(d, 0));
    cr_assert_gt(jint(d, "read_bytes_per_step"), jint(d, "write_bytes_per_step"));
    cr_assert_eq(jint(d, "write_bytes_per_step"), jint(d, "bytes"));
    json_decref(j);
    /* no spill directory: the host budget is short */
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 16G --spill-dir none --json",
             W1_MODEL, prof);
    j = run_json(args);
    cr_assert(json_is_false(json_object_get(j, "fits")));
    cr_assert(json_is_true(json_object_get(j, "host_limited")));
    json_decref(j);
    /* 4 GiB of host: not even with every CPU layer's state on the disk */
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 4G --spill-dir '%s' --json",
             W1_MODEL, prof, dir);
    j = run_json(args);
    cr_assert(json_is_false(json_object_get(j, "fits")));
    const char *why = json_string_value(json_object_get(j, "disk_why"));
    cr_assert(why && strstr(why, "on the GPU") && strstr(why, "of host memory (budget 4.00 GiB)") &&
                  strstr(why, "on the disk"),
              "%s", json_dumps(j, 0));
    json_decref(j);
    unlink(prof);
    rmdir(dir);
}

/* --sweep searches at each budget: every row carries its choice, and none predicts
 * slower than the file's own mechanisms (one of the candidates) at that budget. */
Test(plantool, sweep_searches_at_each_budget)
{
    char args[600];
    snprintf(args, sizeof args, "--model '%s' --profile h200 --sweep 2G:8G:3G --json", GPT_MODEL);
    json_t *s = run_json(args), *rows = json_object_get(s, "sweep");
    snprintf(args, sizeof args, "--model '%s' --profile h200 --sweep 2G:8G:3G --no-search --json", GPT_MODEL);
    json_t *f = run_json(args), *frows = json_object_get(f, "sweep");
    cr_assert_eq(json_array_size(rows), 3);
    cr_assert_eq(json_array_size(frows), 3);
    for (size_t i = 0; i < 3; i++) {
        json_t *r = json_array_get(rows, i), *fr = json_array_get(frows, i);
        cr_assert(json_is_true(json_object_get(json_object_get(r, "choice"), "searched")), "%s", json_dumps(r, 0));
        cr_assert_null(json_object_get(fr, "choice"), "a record-like row of the file's mechanisms");
        cr_assert(json_is_true(json_object_get(r, "fits")), "%s", json_dumps(r, 0));
        if (json_is_true(json_object_get(fr, "fits")))
            cr_assert_leq(jint(r, "predicted_step_ns"), jint(fr, "predicted_step_ns"), "row %zu", i);
    }
    json_decref(s);
    json_decref(f);
}

/* --batch-max within all three budgets: with a short host budget and a spill directory,
 * batches fit with CPU layers' state on the disk tier that would not without it, never
 * with more on the disk than the directory's free space (a small tmpfs, where the test
 * may mount one, fits a smaller largest batch). */
static json_t *batch_max_json(const char *prof, const char *dir, json_int_t *largest)
{
    char args[900];
    snprintf(args, sizeof args,
             "--model '%s' --profile '%s' --budget 8G --host-budget 16G --spill-dir '%s' --batch-max 4 --json", W1_MODEL,
             prof, dir);
    json_t *j = run_json(args);
    *largest = jint(j, "largest_fitting_batch");
    json_t *rows = json_object_get(j, "batches");
    json_int_t free_b = json_is_integer(json_object_get(j, "spill_free_bytes")) ? jint(j, "spill_free_bytes") : 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        if (!json_is_true(json_object_get(row, "fits"))) continue;
        cr_assert_leq(jint(row, "host_bytes_needed"), 16 * 1024 * MiB, "%s", json_dumps(row, 0));
        cr_assert_leq(jint(row, "disk_bytes_needed"), free_b, "%s", json_dumps(row, 0));
    }
    return j;
}

static char g_small_dir[64];
static void unmount_small(void)
{
    if (g_small_dir[0]) umount2(g_small_dir, MNT_DETACH), rmdir(g_small_dir);
}

Test(plantool, batch_max_respects_the_disk_budget, .fini = unmount_small)
{
    char dir[] = "/tmp/uvmrt-plantool-bmax-XXXXXX", prof[300];
    disk_profile(dir, prof, sizeof prof);
    json_int_t none = 0, tier = 0;
    json_decref(batch_max_json(prof, "none", &none));
    json_t *j = batch_max_json(prof, dir, &tier);
    cr_assert_gt(tier, none, "the disk tier fits a larger batch: %lld against %lld", (long long)tier, (long long)none);
    json_t *rows = json_object_get(j, "batches");
    json_int_t disk_largest = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        if (jint(row, "batch") == tier) disk_largest = jint(row, "disk_bytes_needed");
    }
    cr_assert_gt(disk_largest, 0, "the largest batch puts state on the disk: %s", json_dumps(j, 0));
    json_decref(j);
    char *out = NULL, args[900];
    snprintf(args, sizeof args, "--model '%s' --profile '%s' --budget 8G --host-budget 16G --spill-dir '%s' --batch-max 4",
             W1_MODEL, prof, dir);
    cr_assert_eq(run_tool(args, &out), 0, "%s", out);
    cr_assert(strstr(out, "disk_GiB") && strstr(out, "disk tier: "), "%s", out);
    free(out);
    /* a spill directory with less free space than the largest batch needs there */
    snprintf(g_small_dir, sizeof g_small_dir, "%s/small", dir);
    cr_assert_eq(mkdir(g_small_dir, 0700), 0);
    char opts[64];
    snprintf(opts, sizeof opts, "size=%lldk,mode=0700", (long long)(disk_largest / 1024 - 1024));
    if (geteuid() == 0 && mount("uvmrt-plantool", g_small_dir, "tmpfs", 0, opts) == 0) {
        json_int_t small = 0;
        json_decref(batch_max_json(prof, g_small_dir, &small));
        cr_assert_lt(small, tier, "less free space on the disk fits a smaller batch");
        cr_assert_eq(umount(g_small_dir), 0);
    }
    rmdir(g_small_dir);
    g_small_dir[0] = '\0';
    unlink(prof);
    rmdir(dir);
}
