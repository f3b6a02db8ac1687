/*
 * test_settings.c -- params, environment overrides, sizes, the printout, status
 * strings and the version (config.c, context.c, status.c).
 *
 * Environment tests set variables inside the test body: each test runs in its
 * own forked process. They start from env_clear_uvmrt() so the runner's own
 * UVMRT_* variables cannot leak in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <unistd.h>

#include "helpers.h"

/* ------------------------------------------------------------------ defaults */
Test(config, params_init_defaults)
{
    uvmrt_params_t p;
    memset(&p, 0xa5, sizeof p);
    uvmrt_params_init(&p);
    cr_expect_eq(p.struct_size, sizeof(uvmrt_params_t));
    cr_expect_eq(p.device, 0);
    cr_expect_eq(p.backend, UVMRT_BACKEND_AUTO);
    cr_expect_null(p.profile);
    cr_expect_eq(p.policy, UVMRT_POLICY_PREFETCH);
    cr_expect_eq(p.budget_bytes, 0);
    cr_expect_eq(p.budget_reserve_bytes, 512 * MIB);
    cr_expect_eq(p.discard_dead, 1);
    cr_expect_eq(p.log_level, UVMRT_LOG_WARN);
    cr_expect_null(p.log_fn);
    cr_expect_null(p.log_user);
    cr_expect_null(p.report);
    cr_expect_eq(p.ignore_env, 0);
    uvmrt_params_init(NULL); /* no crash */
}

Test(config, default_params_on_sim)
{
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.backend = UVMRT_BACKEND_SIM;
    p.ignore_env = 1;
    p.log_fn = log_capture;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_policy(ctx), UVMRT_POLICY_PREFETCH);
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    const uvmrt_profile_t *prof = uvmrt_context_profile(ctx);
    cr_assert_not_null(prof);
    cr_expect_str_eq(prof->name, "consumer-8g");
    /* budget auto = the sim device's free memory (all of it) minus the 512 MiB reserve */
    cr_expect_eq(uvmrt_context_budget(ctx), prof->memory_bytes - 512 * MIB);
    cr_expect_eq(uvmrt_layer_count(ctx), 0);
    uvmrt_context_destroy(ctx);
}

/* params = NULL means defaults plus the environment; the environment picks sim. */
Test(config, null_params_with_env_backend_sim)
{
    env_clear_uvmrt();
    setenv("UVMRT_BACKEND", "sim", 1);
    setenv("UVMRT_LOG_LEVEL", "error", 1); /* NULL params: messages would go to stderr */
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(NULL, &ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_eq(uvmrt_context_policy(ctx), UVMRT_POLICY_PREFETCH);
    cr_expect_str_eq(uvmrt_context_profile(ctx)->name, "consumer-8g");
    cr_expect_eq(uvmrt_context_budget(ctx), 8 * GIB - 512 * MIB);
    uvmrt_context_destroy(ctx);
}

Test(config, create_null_out)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    cr_expect_eq(uvmrt_context_create(&p, NULL), UVMRT_ERR_INVALID);
}

Test(config, every_profile_creates_a_context)
{
    size_t n = 0;
    while (uvmrt_profile_builtin(n) != NULL) n++;
    cr_assert_gt(n, 1);
    for (size_t i = 0; i < n; i++) {
        const uvmrt_profile_t *prof = uvmrt_profile_builtin(i);
        cr_expect_eq(prof->struct_size, sizeof(uvmrt_profile_t));
        cr_expect_eq(uvmrt_profile_find(prof->name), prof);
        uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 0, prof->name);
        cr_expect_str_eq(uvmrt_context_profile(ctx)->name, prof->name);
        cr_expect_eq(uvmrt_context_budget(ctx), prof->memory_bytes - 512 * MIB, "profile %s", prof->name);
        uvmrt_context_destroy(ctx);
    }
    cr_expect_null(uvmrt_profile_find("nope"));
    cr_expect_null(uvmrt_profile_find(""));
}

/* ------------------------------------------------------------------ environment overrides */
static uvmrt_context_t *create_with_env(uvmrt_params_t *p)
{
    p->ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(p, &ctx);
    cr_assert_eq(st, UVMRT_OK, "%s; log:\n%s", uvmrt_status_name(st), log_text());
    return ctx;
}

Test(config, env_policy_beats_params)
{
    env_clear_uvmrt();
    setenv("UVMRT_POLICY", "demand", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    uvmrt_context_t *ctx = create_with_env(&p);
    cr_expect_eq(uvmrt_context_policy(ctx), UVMRT_POLICY_DEMAND);
    uvmrt_context_destroy(ctx);
}

Test(config, env_budget_beats_params)
{
    env_clear_uvmrt();
    setenv("UVMRT_BUDGET", "64M", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 1 * GIB, NULL);
    uvmrt_context_t *ctx = create_with_env(&p);
    cr_expect_eq(uvmrt_context_budget(ctx), 64 * MIB);
    uvmrt_context_destroy(ctx);
}

Test(config, env_budget_auto_and_reserve)
{
    env_clear_uvmrt();
    setenv("UVMRT_BUDGET", "auto", 1);
    setenv("UVMRT_BUDGET_RESERVE", "1G", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, "consumer-8g");
    uvmrt_context_t *ctx = create_with_env(&p);
    cr_expect_eq(uvmrt_context_budget(ctx), 7 * GIB);
    uvmrt_context_destroy(ctx);
}

Test(config, env_backend_sim_beats_params_cuda)
{
    env_clear_uvmrt();
    setenv("UVMRT_BACKEND", "sim", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.backend = UVMRT_BACKEND_CUDA;
    uvmrt_context_t *ctx = create_with_env(&p);
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    uvmrt_context_destroy(ctx);
}

Test(config, env_profile_beats_params)
{
    env_clear_uvmrt();
    setenv("UVMRT_PROFILE", "h200", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, "consumer-8g");
    uvmrt_context_t *ctx = create_with_env(&p);
    cr_expect_str_eq(uvmrt_context_profile(ctx)->name, "h200");
    uvmrt_context_destroy(ctx);
}

Test(config, env_log_level_debug_reaches_log_fn)
{
    env_clear_uvmrt();
    setenv("UVMRT_LOG_LEVEL", "info", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.log_level = UVMRT_LOG_ERROR;
    uvmrt_context_t *ctx = create_with_env(&p);
    /* the creation message is logged at info */
    cr_expect(log_contains("info: context: backend sim"), "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

Test(config, ignore_env_ignores_everything)
{
    env_clear_uvmrt();
    setenv("UVMRT_POLICY", "bogus", 1);
    setenv("UVMRT_BUDGET", "lots", 1);
    setenv("UVMRT_BACKEND", "cuda", 1);
    setenv("UVMRT_DEVICE", "-3", 1);
    setenv("UVMRT_PROFILE", "nope", 1);
    setenv("UVMRT_LOG_LEVEL", "loud", 1);
    setenv("UVMRT_REPORT", "xml:/x", 1);
    setenv("UVMRT_DISCARD", "maybe", 1);
    setenv("UVMRT_BUDGET_RESERVE", "some", 1);
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 64 * MIB, NULL);
    cr_expect_eq(uvmrt_context_policy(ctx), UVMRT_POLICY_DEMAND);
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_eq(uvmrt_context_budget(ctx), 64 * MIB);
    cr_expect_eq(log_text()[0], '\0', "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

/* Each invalid UVMRT_* value: UVMRT_ERR_CONFIG, *out NULL, a message naming the
 * variable and the bad value. */
static void expect_env_rejected(const char *var, const char *value)
{
    env_clear_uvmrt();
    log_reset();
    setenv(var, value, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = (uvmrt_context_t *)&p; /* must be overwritten with NULL */
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    cr_expect_eq(st, UVMRT_ERR_CONFIG, "%s='%s': got %s", var, value, uvmrt_status_name(st));
    cr_expect_null(ctx, "%s='%s': *out not NULL on failure", var, value);
    cr_expect(log_contains(var), "%s='%s': message does not name the variable; log:\n%s", var, value, log_text());
    char quoted[256];
    snprintf(quoted, sizeof quoted, "'%s'", value);
    cr_expect(log_contains(quoted), "%s='%s': message does not name the value; log:\n%s", var, value, log_text());
    if (st == UVMRT_OK) uvmrt_context_destroy(ctx);
    unsetenv(var);
}

Test(config, env_invalid_budget)
{
    expect_env_rejected("UVMRT_BUDGET", "lots");
    expect_env_rejected("UVMRT_BUDGET", "0");
    expect_env_rejected("UVMRT_BUDGET", "1.5G");
    expect_env_rejected("UVMRT_BUDGET", "");
}
Test(config, env_invalid_policy)
{
    expect_env_rejected("UVMRT_POLICY", "fast");
    expect_env_rejected("UVMRT_POLICY", "Prefetch");
}
Test(config, env_invalid_backend) { expect_env_rejected("UVMRT_BACKEND", "gpu"); }
Test(config, env_invalid_device)
{
    expect_env_rejected("UVMRT_DEVICE", "-1");
    expect_env_rejected("UVMRT_DEVICE", "zero");
    expect_env_rejected("UVMRT_DEVICE", "1024");
}
Test(config, env_invalid_profile) { expect_env_rejected("UVMRT_PROFILE", "nope"); }
Test(config, env_invalid_log_level) { expect_env_rejected("UVMRT_LOG_LEVEL", "verbose"); }
Test(config, env_invalid_report)
{
    expect_env_rejected("UVMRT_REPORT", "xml:/tmp/x");
    expect_env_rejected("UVMRT_REPORT", "json:");
    expect_env_rejected("UVMRT_REPORT", "stdout");
}
Test(config, env_invalid_discard)
{
    expect_env_rejected("UVMRT_DISCARD", "yes");
    expect_env_rejected("UVMRT_DISCARD", "2");
}
Test(config, env_invalid_budget_reserve) { expect_env_rejected("UVMRT_BUDGET_RESERVE", "some"); }

/* One rule for every variable (uvmrt(3), ENVIRONMENT): a value is taken exactly as
 * written, so a sign, blanks around it or a newline are refused, for integers and
 * paths alike; and a path that is a keyword in another case (AUTO, None) is refused
 * naming the keyword, where it used to create a file of that name. */
static void expect_env_refused_saying(const char *var, const char *value, const char *shown, const char *says)
{
    env_clear_uvmrt();
    log_reset();
    setenv(var, value, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
    cr_expect_eq(st, UVMRT_ERR_CONFIG, "%s='%s': got %s", var, shown, uvmrt_status_name(st));
    char named[256];
    snprintf(named, sizeof named, "%s='%s'", var, shown);
    cr_expect(log_contains(named), "%s: not named; log:\n%s", named, log_text());
    cr_expect(log_contains(says), "%s: the message does not say '%s'; log:\n%s", named, says, log_text());
    if (st == UVMRT_OK) uvmrt_context_destroy(ctx);
    unsetenv(var);
}

Test(config, env_one_rule_for_every_value)
{
    const char *blank = "exactly as written";
    expect_env_refused_saying("UVMRT_HISTORY", "+5", "+5", "expected");
    expect_env_refused_saying("UVMRT_HISTORY", " 5", " 5", blank);
    expect_env_refused_saying("UVMRT_HISTORY", "5 ", "5 ", blank);
    expect_env_refused_saying("UVMRT_DEVICE", "+0", "+0", "expected");
    expect_env_refused_saying("UVMRT_FAULT_SAMPLE", " 3", " 3", blank);
    expect_env_refused_saying("UVMRT_BUDGET", " 8G", " 8G", blank);
    expect_env_refused_saying("UVMRT_BUDGET", "8G\n", "8G\\n", "control character");
    expect_env_refused_saying("UVMRT_POLICY", "prefetch ", "prefetch ", blank);
    expect_env_refused_saying("UVMRT_DISCARD", "1\n", "1\\n", "control character");
    /* paths: the keyword in another case, blanks, a newline */
    expect_env_refused_saying("UVMRT_TRACE", "AUTO", "AUTO", "keyword 'auto'");
    expect_env_refused_saying("UVMRT_TRACE", "None", "None", "keyword 'none'");
    expect_env_refused_saying("UVMRT_TRACE", " auto", " auto", blank);
    expect_env_refused_saying("UVMRT_TRACE", "1\n", "1\\n", "control character");
    expect_env_refused_saying("UVMRT_TRACE", "/tmp/t.json ", "/tmp/t.json ", blank);
    expect_env_refused_saying("UVMRT_RECORD", "AUTO", "AUTO", "keyword 'auto'");
    expect_env_refused_saying("UVMRT_RECORD", "Auto", "Auto", "./Auto");
    expect_env_refused_saying("UVMRT_RECORD", " auto", " auto", blank);
    expect_env_refused_saying("UVMRT_RECORD", "1\n", "1\\n", "control character");
    expect_env_refused_saying("UVMRT_RECORD", "STDERR", "STDERR", "keyword 'stderr'");
    expect_env_refused_saying("UVMRT_REPORT", "json:AUTO", "json:AUTO", "keyword 'auto'");
    expect_env_refused_saying("UVMRT_REPORT", "json: /tmp/r.json", "json: /tmp/r.json", "expected");
    expect_env_refused_saying("UVMRT_PROFILE", "AUTO", "AUTO", "keyword 'auto'");
    /* and what the rule lets through: a path that only looks like a keyword */
    char dir[] = "/tmp/uvmrt-settings-XXXXXX", path[128];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/AUTO", dir);
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", path, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "UVMRT_RECORD=%s", path);
    uvmrt_context_destroy(ctx);
    unsetenv("UVMRT_RECORD");
    rmdir(dir);
}

/* The same path rules for params' strings: params.trace " auto" or "AUTO" is refused. */
Test(config, params_paths_follow_the_rule)
{
    const char *bad[] = {"AUTO", " auto", "auto\n", "x.json ", "None"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        env_clear_uvmrt();
        uvmrt_params_t p;
        sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
        p.trace = bad[i];
        uvmrt_context_t *ctx = NULL;
        uvmrt_status_t st = uvmrt_context_create(&p, &ctx);
        cr_expect_eq(st, UVMRT_ERR_INVALID, "params.trace '%s': got %s", bad[i], uvmrt_status_name(st));
        if (st == UVMRT_OK) uvmrt_context_destroy(ctx);
    }
}

/* Every entry of the configuration table, including ones added later. */
Test(config, env_invalid_every_table_entry)
{
    size_t n = 0;
    const uvmrt_config_entry_t *table = uvmrt__config_table(&n);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++) {
        char var[64];
        snprintf(var, sizeof var, "UVMRT_%s", table[i].name);
        /* TRACE and RECORD take any file path: only an empty one is bad */
        int path = strcmp(table[i].name, "TRACE") == 0 || strcmp(table[i].name, "RECORD") == 0;
        expect_env_rejected(var, path ? "" : "@bogus@");
    }
}

/* Even when the bad variable comes after UVMRT_LOG_LEVEL=error, it is reported. */
Test(config, env_invalid_reported_at_log_level_error)
{
    env_clear_uvmrt();
    setenv("UVMRT_LOG_LEVEL", "error", 1);
    setenv("UVMRT_POLICY", "fast", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = NULL;
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_expect_null(ctx);
    cr_expect(log_contains("UVMRT_POLICY='fast'"), "log:\n%s", log_text());
}

/* A reserve at least as large as the sim device's memory leaves no auto budget. */
Test(config, auto_budget_reserve_too_large)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, "consumer-8g");
    p.budget_reserve_bytes = 8 * GIB;
    uvmrt_context_t *ctx = (uvmrt_context_t *)&p;
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_expect_null(ctx);
    cr_expect(log_contains("UVMRT_BUDGET_RESERVE"), "log:\n%s", log_text());
}

/* ------------------------------------------------------------------ sizes */
static void expect_size(const char *text, uint64_t want)
{
    uint64_t v = 12345;
    uvmrt_status_t st = uvmrt_size_parse(text, &v);
    cr_expect_eq(st, UVMRT_OK, "uvmrt_size_parse(\"%s\"): %s", text, uvmrt_status_name(st));
    cr_expect_eq(v, want, "uvmrt_size_parse(\"%s\") = %llu, want %llu", text, (unsigned long long)v,
                 (unsigned long long)want);
}

static void expect_size_rejected(const char *text)
{
    uint64_t v = 12345;
    uvmrt_status_t st = uvmrt_size_parse(text, &v);
    cr_expect_eq(st, UVMRT_ERR_INVALID, "uvmrt_size_parse(\"%s\"): %s, value %llu", text ? text : "(null)",
                 uvmrt_status_name(st), (unsigned long long)v);
    cr_expect_eq(v, 12345, "uvmrt_size_parse(\"%s\") wrote its output on failure", text ? text : "(null)");
}

Test(config, size_parse_accepts)
{
    expect_size("8G", 8 * GIB);
    expect_size("512M", 512 * MIB);
    expect_size("512MiB", 512 * MIB);
    expect_size("512MB", 512 * MIB);
    expect_size("1K", 1024);
    expect_size("1k", 1024);
    expect_size("1KiB", 1024);
    expect_size("1048576", 1048576);
    expect_size("1048576B", 1048576);
    expect_size("1T", 1ull << 40);
    expect_size("0", 0);
    expect_size("16777215T", 16777215ull << 40); /* the largest T that fits */
}

Test(config, size_parse_rejects)
{
    expect_size_rejected("");
    expect_size_rejected("G");
    expect_size_rejected("-1");
    expect_size_rejected("1X");
    expect_size_rejected("1.5G");
    expect_size_rejected("99999999999T");
    expect_size_rejected("16777216T");
    expect_size_rejected("18446744073709551616");
    expect_size_rejected(" 8G");
    expect_size_rejected("8G ");
    expect_size_rejected("8GG");
    expect_size_rejected("8iB");
    expect_size_rejected("+8G");
    expect_size_rejected(NULL);
    cr_expect_eq(uvmrt_size_parse("8G", NULL), UVMRT_ERR_INVALID);
}

Test(config, enum_names_and_parsers)
{
    uvmrt_policy_t pol;
    for (int i = 0; i <= 2; i++) {
        cr_assert_eq(uvmrt_policy_parse(uvmrt_policy_name((uvmrt_policy_t)i), &pol), UVMRT_OK);
        cr_expect_eq(pol, i);
    }
    cr_expect_str_eq(uvmrt_policy_name(UVMRT_POLICY_PREFETCH), "prefetch");
    cr_expect_str_eq(uvmrt_policy_name((uvmrt_policy_t)7), "?");
    pol = UVMRT_POLICY_DEMAND;
    cr_expect_eq(uvmrt_policy_parse("all", &pol), UVMRT_ERR_INVALID);
    cr_expect_eq(pol, UVMRT_POLICY_DEMAND, "out touched on failure");
    cr_expect_eq(uvmrt_policy_parse(NULL, &pol), UVMRT_ERR_INVALID);

    uvmrt_backend_kind_t be = UVMRT_BACKEND_SIM;
    cr_expect_eq(uvmrt_backend_parse("cuda", &be), UVMRT_OK);
    cr_expect_eq(be, UVMRT_BACKEND_CUDA);
    cr_expect_eq(uvmrt_backend_parse("sim", &be), UVMRT_OK);
    cr_expect_eq(be, UVMRT_BACKEND_SIM);
    cr_expect_eq(uvmrt_backend_parse("gpu", &be), UVMRT_ERR_INVALID);
    cr_expect_eq(be, UVMRT_BACKEND_SIM, "out touched on failure");
    cr_expect_str_eq(uvmrt_backend_name(UVMRT_BACKEND_SIM), "sim");
    cr_expect_str_eq(uvmrt_role_name(UVMRT_ROLE_OPTIMIZER_STATE), "optimizer_state");
    cr_expect_str_eq(uvmrt_role_name((uvmrt_role_t)UVMRT_ROLE_COUNT), "?");
    cr_expect_str_eq(uvmrt_phase_name(UVMRT_PHASE_BACKWARD), "backward");
    cr_expect_str_eq(uvmrt_phase_name((uvmrt_phase_t)-1), "?");
    cr_expect_str_eq(uvmrt_log_level_name(UVMRT_LOG_WARN), "warn");
}

/* ------------------------------------------------------------------ invalid params */
static void expect_param_rejected(const uvmrt_params_t *p, const char *needle1, const char *needle2)
{
    log_reset();
    uvmrt_context_t *ctx = (uvmrt_context_t *)p;
    uvmrt_status_t st = uvmrt_context_create(p, &ctx);
    cr_expect_eq(st, UVMRT_ERR_INVALID, "%s: got %s", needle1, uvmrt_status_name(st));
    cr_expect_null(ctx, "%s: *out not NULL on failure", needle1);
    cr_expect(log_contains(needle1), "message does not contain '%s'; log:\n%s", needle1, log_text());
    if (needle2) cr_expect(log_contains(needle2), "message does not contain '%s'; log:\n%s", needle2, log_text());
}

Test(config, params_invalid_fields)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.device = -1;
    expect_param_rejected(&p, "params.device", "-1");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.policy = (uvmrt_policy_t)7;
    expect_param_rejected(&p, "params.policy", "7");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.struct_size = 0;
    expect_param_rejected(&p, "uvmrt_params_t.struct_size is 0", "uvmrt_params_init");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.profile = "nope";
    expect_param_rejected(&p, "params.profile", "'nope'");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.backend = (uvmrt_backend_kind_t)5;
    expect_param_rejected(&p, "params.backend", "5");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.discard_dead = 2;
    expect_param_rejected(&p, "params.discard_dead", "2");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.log_level = (uvmrt_log_level_t)9;
    expect_param_rejected(&p, "params.log_level", "9");

    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.report = "xml:out";
    expect_param_rejected(&p, "params.report", "'xml:out'");
}

/* ------------------------------------------------------------------ the printout */
/* The source printed on the line of UVMRT_<name>=, or NULL. */
static const char *source_of(const char *text, const char *name, char *buf, size_t len)
{
    char key[64];
    snprintf(key, sizeof key, "UVMRT_%s=", name);
    const char *line = strstr(text, key);
    if (line == NULL) return NULL;
    const char *eol = strchr(line, '\n');
    const char *open = strchr(line, '(');
    if (open == NULL || (eol && open > eol)) return NULL;
    const char *close = strchr(open, ')');
    if (close == NULL || (eol && close > eol)) return NULL;
    snprintf(buf, len, "%.*s", (int)(close - open - 1), open + 1);
    return buf;
}

Test(config, print_config_names_and_sources)
{
    env_clear_uvmrt();
    setenv("UVMRT_POLICY", "demand", 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    p.ignore_env = 0;
    uvmrt_context_t *ctx = create_with_env(&p);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    uvmrt_context_print_config(ctx, f);
    fclose(f);
    size_t n = 0;
    const uvmrt_config_entry_t *table = uvmrt__config_table(&n);
    cr_assert_geq(n, 9);
    static const char *const names[] = {"BUDGET", "POLICY", "BACKEND", "DEVICE", "PROFILE",
                                        "LOG_LEVEL", "REPORT", "DISCARD", "BUDGET_RESERVE"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "UVMRT_%s=", names[i]);
        cr_expect_not_null(strstr(text, key), "no %s in:\n%s", key, text);
    }
    for (size_t i = 0; i < n; i++) {
        char key[64];
        snprintf(key, sizeof key, "UVMRT_%s=", table[i].name);
        cr_expect_not_null(strstr(text, key), "table entry %s missing from:\n%s", table[i].name, text);
    }
    char buf[64];
    const char *s;
    s = source_of(text, "POLICY", buf, sizeof buf);
    cr_expect(s && strcmp(s, "environment") == 0, "POLICY source '%s' in:\n%s", s ? s : "?", text);
    cr_expect_not_null(strstr(text, "UVMRT_POLICY=demand"), "%s", text);
    s = source_of(text, "BUDGET", buf, sizeof buf);
    cr_expect(s && strcmp(s, "params") == 0, "BUDGET source '%s' in:\n%s", s ? s : "?", text);
    cr_expect_not_null(strstr(text, "UVMRT_BUDGET=64M"), "%s", text);
    s = source_of(text, "BACKEND", buf, sizeof buf);
    cr_expect(s && strcmp(s, "params") == 0, "BACKEND source '%s' in:\n%s", s ? s : "?", text);
    s = source_of(text, "DEVICE", buf, sizeof buf);
    cr_expect(s && strcmp(s, "default") == 0, "DEVICE source '%s' in:\n%s", s ? s : "?", text);
    cr_expect_not_null(strstr(text, "67108864 bytes"), "resolved budget missing:\n%s", text);
    cr_expect_not_null(strstr(text, "backend sim"), "%s", text);
    free(text);
    uvmrt_context_destroy(ctx);
}

Test(config, print_config_fmemopen_and_null)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 96 * MIB, "h200");
    char buf[8192];
    memset(buf, 0, sizeof buf);
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    cr_assert_not_null(f);
    uvmrt_context_print_config(ctx, f);
    fclose(f);
    cr_expect_not_null(strstr(buf, "UVMRT_PROFILE=h200"), "%s", buf);
    cr_expect_not_null(strstr(buf, "UVMRT_BUDGET=96M"), "%s", buf);
    uvmrt_context_print_config(NULL, stdout); /* no crash */
    uvmrt_context_print_config(ctx, NULL);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ status strings and version */
Test(config, status_strings)
{
#define CHECK_STATUS(name, value, text)                                      \
    cr_expect_eq((int)name, value);                                          \
    cr_expect_str_eq(uvmrt_status_str(name), text);                          \
    cr_expect_str_eq(uvmrt_status_name(name), #name);
    UVMRT_STATUS_LIST(CHECK_STATUS)
#undef CHECK_STATUS
    cr_expect_str_eq(uvmrt_status_str((uvmrt_status_t)-99), "unknown status");
    cr_expect_str_eq(uvmrt_status_name((uvmrt_status_t)-99), "UVMRT_UNKNOWN");
    cr_expect_str_eq(uvmrt_status_str((uvmrt_status_t)1), "unknown status");
    cr_expect_str_eq(uvmrt_status_name((uvmrt_status_t)1), "UVMRT_UNKNOWN");
}

Test(config, version)
{
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", UVMRT_VERSION_MAJOR, UVMRT_VERSION_MINOR, UVMRT_VERSION_PATCH);
    cr_expect_str_eq(uvmrt_version_string(), want);
    cr_expect_eq(uvmrt_version_number(), UVMRT_VERSION_NUMBER);
    cr_expect_eq(UVMRT_VERSION_NUMBER,
                 UVMRT_VERSION_MAJOR * 10000 + UVMRT_VERSION_MINOR * 100 + UVMRT_VERSION_PATCH);
}

/* include/uvmrt.h's contract, "Return values, by kind of function": accessors give
 * the documented neutral value for a NULL handle, names a static string for any
 * value, lookups NULL or 0 when there is no entry, initialisers and releasers
 * accept NULL. */
Test(config, return_kinds_keep_the_header_contract)
{
    /* 2, 3: initialisers and releasers that cannot fail, with NULL */
    uvmrt_params_init(NULL);
    uvmrt_layer_call_init(NULL, 0, UVMRT_PHASE_FORWARD, NULL);
    uvmrt_adamw_init(NULL);
    uvmrt_context_destroy(NULL);
    uvmrt_profile_free(NULL);
    /* 4: accessors of a NULL handle */
    cr_expect_eq(uvmrt_context_policy(NULL), UVMRT_POLICY_PREFETCH);
    cr_expect_eq(uvmrt_context_backend(NULL), UVMRT_BACKEND_CUDA);
    cr_expect_eq(uvmrt_context_budget(NULL), 0);
    cr_expect_eq(uvmrt_context_external_bytes(NULL), 0);
    cr_expect_eq(uvmrt_layer_count(NULL), 0);
    cr_expect_eq(uvmrt_choice_count(NULL), 0);
    cr_expect_eq(uvmrt_tensor_recomputes(NULL, NULL), 0);
    cr_assert_not_null(uvmrt_context_profile(NULL));
    cr_expect_str_eq(uvmrt_context_profile(NULL)->name, "consumer-8g");
    cr_expect_eq(uvmrt_choice_candidate_recompute(NULL, 0), -1);
    cr_expect_null(uvmrt_tensor_ptr(NULL));
    cr_expect_null(uvmrt_tensor_name(NULL));
    cr_expect_eq(uvmrt_tensor_size(NULL), 0);
    cr_expect_eq(uvmrt_tensor_is_resident(NULL), 0);
    cr_expect_eq(uvmrt_tensor_is_host_homed(NULL), 0);
    cr_expect_eq(uvmrt_tensor_recompute_flops(NULL), 0.0);
    cr_expect_eq(uvmrt_tensor_layer(NULL), -1);
    cr_expect_eq(uvmrt_tensor_role(NULL), UVMRT_ROLE_WORKSPACE);
    cr_expect_eq(uvmrt_tensor_placement(NULL), UVMRT_PLACE_AUTO);
    /* 4, with a context: a candidate out of range */
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 64ull << 20, NULL);
    cr_expect_eq(uvmrt_choice_count(ctx), 0);
    cr_expect_eq(uvmrt_choice_candidate_recompute(ctx, 0), -1);
    uvmrt_context_destroy(ctx);
    /* 5: names, static strings for values outside their enums */
    cr_expect_str_eq(uvmrt_status_str((uvmrt_status_t)12345), "unknown status");
    cr_expect_str_eq(uvmrt_status_name((uvmrt_status_t)12345), "UVMRT_UNKNOWN");
    cr_expect_str_eq(uvmrt_policy_name((uvmrt_policy_t)999), "?");
    cr_expect_str_eq(uvmrt_backend_name((uvmrt_backend_kind_t)999), "?");
    cr_expect_str_eq(uvmrt_role_name((uvmrt_role_t)999), "?");
    cr_expect_str_eq(uvmrt_phase_name((uvmrt_phase_t)999), "?");
    cr_expect_str_eq(uvmrt_log_level_name((uvmrt_log_level_t)999), "?");
    cr_expect_str_eq(uvmrt_where_name((uvmrt_where_t)999), "?");
    cr_expect_not_null(uvmrt_version_string());
    cr_expect_not_null(uvmrt_adamw_isa());
    /* 6: lookups without an entry */
    cr_expect_not_null(uvmrt_profile_builtin(0));
    cr_expect_null(uvmrt_profile_builtin((size_t)-1));
    cr_expect_null(uvmrt_profile_find(NULL));
    cr_expect_null(uvmrt_profile_find("no-such-profile"));
    cr_expect_eq(uvmrt_abi_struct_size(NULL), 0);
    cr_expect_eq(uvmrt_abi_struct_size("no_such_t"), 0);
    cr_expect_eq(uvmrt_version_number(), UVMRT_VERSION_NUMBER);
    /* 7: formatters */
    uvmrt_context_print_config(NULL, stdout); /* writes nothing */
    cr_expect_eq(uvmrt_mechanism_name(0, NULL, 0), strlen("none"));
}
