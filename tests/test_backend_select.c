/*
 * test_backend_select.c -- UVMRT_BACKEND=auto|cuda|sim (backend_select.c): auto
 * falls back to sim with one notice naming why, an explicit cuda without a GPU
 * fails with NO_DEVICE and an error that says how to get sim.
 *
 * The no-GPU cases skip themselves where a usable GPU is found (they run on
 * build machines and CI, which have none); the probe runs in each test's
 * forked child, never in the runner's parent.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "backend_select.h"
#include "helpers.h"

static uvmrt_gpu_probe_t probe(char *why, size_t n) { return uvmrt__gpu_probe(0, why, n); }

static void skip_if_gpu(void)
{
    char why[256];
    if (probe(why, sizeof why) == UVMRT_GPU_USABLE) cr_skip_test("a usable GPU is here (%s)", why);
}

static int count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) n++;
    return n;
}

static void auto_params(uvmrt_params_t *p)
{
    uvmrt_params_init(p);
    p->ignore_env = 1;
    p->log_fn = log_capture;
    p->budget_bytes = 64 * MIB;
}

Test(backend_select, default_is_auto)
{
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    cr_expect_eq(p.backend, UVMRT_BACKEND_AUTO);
    cr_expect_eq((int)UVMRT_BACKEND_CUDA, 0);
    cr_expect_eq((int)UVMRT_BACKEND_SIM, 1);
    cr_expect_eq((int)UVMRT_BACKEND_AUTO, 2);
    cr_expect_str_eq(uvmrt_backend_name(UVMRT_BACKEND_AUTO), "auto");
    uvmrt_backend_kind_t k = UVMRT_BACKEND_CUDA;
    cr_expect_eq(uvmrt_backend_parse("auto", &k), UVMRT_OK);
    cr_expect_eq(k, UVMRT_BACKEND_AUTO);
}

Test(backend_select, probe_names_what_it_found)
{
    char why[256] = "";
    uvmrt_gpu_probe_t found = probe(why, sizeof why);
    cr_expect_neq(why[0], '\0', "the probe must always say what it found");
#ifndef UVMRT_HAVE_CUDA
    cr_expect_eq(found, UVMRT_GPU_NO_CUDA_BUILD);
    cr_expect(strstr(why, "no CUDA support") != NULL, "%s", why);
#else
    if (found == UVMRT_GPU_NO_DRIVER) cr_expect(strstr(why, "driver") != NULL, "%s", why);
    if (found == UVMRT_GPU_NO_DEVICE) cr_expect(strstr(why, "no CUDA device") != NULL, "%s", why);
    if (found == UVMRT_GPU_NO_CONCURRENT) cr_expect(strstr(why, "concurrent managed access") != NULL, "%s", why);
#endif
}

/* No GPU: auto opens sim, with exactly one warn-level notice, which names why. */
Test(backend_select, auto_without_gpu_runs_on_sim_with_one_notice)
{
    skip_if_gpu();
    char why[256];
    probe(why, sizeof why);
    uvmrt_params_t p;
    auto_params(&p);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_str_eq(uvmrt_context_profile(ctx)->name, "consumer-8g");
    cr_expect_eq(count_of(log_text(), "\n"), 1, "one message expected, log:\n%s", log_text());
    cr_expect_eq(count_of(log_text(), "warn: backend auto: running on sim"), 1, "log:\n%s", log_text());
    cr_expect(log_contains(why), "the notice must name why (%s); log:\n%s", why, log_text());
    cr_expect_eq(count_of(log_text(), "error:"), 0, "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

Test(backend_select, env_auto_overrides_params_cuda)
{
    skip_if_gpu();
    env_clear_uvmrt();
    setenv("UVMRT_BACKEND", "auto", 1);
    uvmrt_params_t p;
    auto_params(&p);
    p.ignore_env = 0;
    p.backend = UVMRT_BACKEND_CUDA;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_eq(count_of(log_text(), "backend auto: running on sim"), 1, "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

/* A notice below the log level is not printed: the level still rules. */
Test(backend_select, auto_notice_respects_log_level)
{
    skip_if_gpu();
    uvmrt_params_t p;
    auto_params(&p);
    p.log_level = UVMRT_LOG_ERROR;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_eq(log_text()[0], '\0', "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

/* No GPU: an explicit cuda fails with NO_DEVICE and an error that names what
 * was found and how to get sim. */
static void expect_cuda_refused(uvmrt_params_t *p)
{
    char why[256];
    probe(why, sizeof why);
    uvmrt_context_t *ctx = (uvmrt_context_t *)&ctx; /* must become NULL */
    cr_assert_eq(uvmrt_context_create(p, &ctx), UVMRT_ERR_NO_DEVICE, "%s", log_text());
    cr_expect_null(ctx);
    cr_expect(log_contains("error: backend cuda: no usable GPU"), "log:\n%s", log_text());
    cr_expect(log_contains(why), "the error must name what was found (%s); log:\n%s", why, log_text());
    cr_expect(log_contains("UVMRT_BACKEND=sim"), "the error must say how to get sim; log:\n%s", log_text());
    cr_expect_eq(count_of(log_text(), "warn:"), 0, "no warning beside the error; log:\n%s", log_text());
}

Test(backend_select, explicit_cuda_without_gpu_is_no_device)
{
    skip_if_gpu();
    uvmrt_params_t p;
    auto_params(&p);
    p.backend = UVMRT_BACKEND_CUDA;
    expect_cuda_refused(&p);
}

Test(backend_select, env_cuda_without_gpu_is_no_device)
{
    skip_if_gpu();
    env_clear_uvmrt();
    setenv("UVMRT_BACKEND", "cuda", 1);
    uvmrt_params_t p;
    auto_params(&p);
    p.ignore_env = 0;
    p.backend = UVMRT_BACKEND_SIM;
    expect_cuda_refused(&p);
}

Test(backend_select, explicit_sim_gives_no_notice)
{
    uvmrt_params_t p;
    auto_params(&p);
    p.backend = UVMRT_BACKEND_SIM;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_backend(ctx), UVMRT_BACKEND_SIM);
    cr_expect_eq(log_text()[0], '\0', "log:\n%s", log_text());
    uvmrt_context_destroy(ctx);
}

Test(backend_select, bad_backend_value_rejected)
{
    uvmrt_params_t p;
    auto_params(&p);
    p.backend = (uvmrt_backend_kind_t)3;
    uvmrt_context_t *ctx = NULL;
    cr_expect_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_INVALID);
    cr_expect_null(ctx);
    cr_expect(log_contains("params.backend = 3"), "log:\n%s", log_text());
    cr_expect(log_contains("UVMRT_BACKEND_AUTO"), "log:\n%s", log_text());
}

/* A wrapped backend (tests' ops): auto resolves to sim without looking for a GPU. */
Test(backend_select, given_ops_resolve_auto_to_sim)
{
    uvmrt_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.backend = UVMRT_BACKEND_AUTO;
    const uvmrt_backend_ops_t *ops = &uvmrt__backend_sim;
    uvmrt_log_t log = {.level = UVMRT_LOG_DEBUG, .fn = log_capture};
    cr_expect_eq(uvmrt__backend_select(&cfg, &log, &ops), UVMRT_OK);
    cr_expect_eq(cfg.backend, UVMRT_BACKEND_SIM);
    cr_expect_eq(cfg.backend_auto, 1);
    cr_expect_eq(ops, &uvmrt__backend_sim);
    cr_expect_eq(log_text()[0], '\0', "log:\n%s", log_text());
}

/* The printout keeps the setting as given (auto) and says what it became. */
Test(backend_select, print_config_says_auto_and_the_choice)
{
    skip_if_gpu();
    uvmrt_params_t p;
    auto_params(&p);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    uvmrt_context_print_config(ctx, f);
    fclose(f);
    cr_expect(strstr(text, "UVMRT_BACKEND=auto") != NULL, "%s", text);
    cr_expect(strstr(text, "backend sim") != NULL, "%s", text);
    free(text);
    uvmrt_context_destroy(ctx);
}
