/*
 * test_gpt_ref.c -- the GPT-2 C reference (examples/gpt/gpt_ref.c) against central
 * finite differences, without a GPU.
 *
 * This binary builds gpt_ref.c with GPT_REF_REAL=double, so the loss is accurate to
 * ~1e-15 and a central difference with h = 1e-5 to ~1e-10 (truncation h^2 * f''',
 * rounding 1e-16 / h): every one of the ~2 000 gradients of a tiny model (V=17,
 * Vp=20, T=5, C=8, NH=2, L=2, B=2) must agree with its difference within
 * 1e-7 + 1e-5 * |fd|. The same comparison must flag a gradient changed by 1e-4
 * (so the check can fail), and the loss and the padded rows are checked exactly.
 *
 * Also uvmrt-gpt's schedule on the sim backend (the program run by path): under
 * prefetch and a budget below its tensors, no fault after the recording step, for
 * both optimizer placements and both recompute settings, and the budget holds.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "gpt_ref.h"

static const gpt_shape_t SHAPE = {.V = 17, .Vp = 20, .maxT = 6, .L = 2, .C = 8, .NH = 2};
enum { B = 2, T = 5 };
static const double FD_H = 1e-5, FD_ATOL = 1e-7, FD_RTOL = 1e-5;

static uint64_t rng_state;

static double rng_uniform(void) { /* [0, 1), xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

/* Parameters large enough that every path carries gradient: U(-0.5, 0.5) scaled
 * per tensor, LayerNorm weights near 1; the padded rows of wte stay 0 (as in the
 * trainer). */
static double *params_make(uint64_t seed) {
    rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
    size_t sz[GPT_NUM_PARAM_TENSORS], n = gpt_num_params(&SHAPE);
    gpt_param_sizes(&SHAPE, sz);
    double *p = calloc(n, sizeof *p), *q = p;
    cr_assert(p);
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++) {
        int is_lnw = t == 2 || t == 8 || t == 14;
        for (size_t i = 0; i < sz[t]; i++) {
            double u = rng_uniform() - 0.5;
            q[i] = is_lnw ? 1.0 + 0.4 * u : 0.8 * u;
        }
        q += sz[t];
    }
    for (size_t i = (size_t)SHAPE.V * SHAPE.C; i < (size_t)SHAPE.Vp * SHAPE.C; i++)
        p[i] = 0.0;
    return p;
}

static void tokens_make(int *inp, int *tgt) {
    rng_state = 12345;
    for (int i = 0; i < B * T; i++) {
        inp[i] = (int)(rng_uniform() * SHAPE.V);
        tgt[i] = (int)(rng_uniform() * SHAPE.V);
    }
}

/* The number of gradients that disagree with their central difference; the
 * largest error relative to the tolerance goes to *worst. */
static size_t fd_mismatches(double *p, const double *grads, const int *inp, const int *tgt,
                            double *worst) {
    size_t n = gpt_num_params(&SHAPE), bad = 0;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double keep = p[i];
        p[i] = keep + FD_H;
        double lp = gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, NULL);
        p[i] = keep - FD_H;
        double lm = gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, NULL);
        p[i] = keep;
        double fd = (lp - lm) / (2 * FD_H), tol = FD_ATOL + FD_RTOL * fabs(fd);
        double r = fabs(grads[i] - fd) / tol;
        if (r > *worst)
            *worst = r;
        if (r > 1.0)
            bad++;
    }
    return bad;
}

Test(gpt_ref, gradients_match_central_differences) {
    double *p = params_make(1);
    size_t n = gpt_num_params(&SHAPE);
    double *g = calloc(n, sizeof *g);
    int inp[B * T], tgt[B * T];
    tokens_make(inp, tgt);
    double loss = gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, g);
    cr_assert(isfinite(loss));
    double norm = 0;
    for (size_t i = 0; i < n; i++)
        norm += g[i] * g[i];
    cr_assert(norm > 1e-4, "gradients are almost zero (norm^2 %g): the test would prove nothing",
              norm);
    double worst = 0;
    size_t bad = fd_mismatches(p, g, inp, tgt, &worst);
    cr_expect_eq(bad, 0, "%zu of %zu gradients differ from central differences (worst %.3g x "
                         "the tolerance)", bad, n, worst);
    free(g);
    free(p);
}

/* Each tensor's gradients, tensor by tensor, must each carry signal (a tensor the
 * backward forgot would pass a test of the whole vector with zeros only where the
 * differences are zero too; here every tensor must have a non-zero gradient). */
Test(gpt_ref, every_tensor_has_gradient) {
    double *p = params_make(2);
    size_t sz[GPT_NUM_PARAM_TENSORS], n = gpt_num_params(&SHAPE);
    gpt_param_sizes(&SHAPE, sz);
    double *g = calloc(n, sizeof *g), *q = g;
    int inp[B * T], tgt[B * T];
    tokens_make(inp, tgt);
    gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, g);
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++) {
        double s = 0;
        for (size_t i = 0; i < sz[t]; i++)
            s += fabs(q[i]);
        cr_expect(s > 0, "tensor %s has an all-zero gradient", gpt_param_names[t]);
        q += sz[t];
    }
    free(g);
    free(p);
}

Test(gpt_ref, a_wrong_gradient_fails_the_check) {
    double *p = params_make(3);
    size_t n = gpt_num_params(&SHAPE);
    double *g = calloc(n, sizeof *g);
    int inp[B * T], tgt[B * T];
    tokens_make(inp, tgt);
    gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, g);
    /* one entry of qkvw of block 1 and one LayerNorm bias, each off by 1e-4 */
    size_t sz[GPT_NUM_PARAM_TENSORS], off[GPT_NUM_PARAM_TENSORS], o = 0;
    gpt_param_sizes(&SHAPE, sz);
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++) {
        off[t] = o;
        o += sz[t];
    }
    g[off[4] + sz[4] / 2 + 3] += 1e-4;
    g[off[9] + 1] -= 1e-4;
    double worst = 0;
    size_t bad = fd_mismatches(p, g, inp, tgt, &worst);
    cr_expect_eq(bad, 2, "the check found %zu wrong gradients, expected the 2 planted", bad);
    free(g);
    free(p);
}

/* With every weight 0 and LayerNorm weights 1, every logit is 0: the loss is ln V
 * exactly (to rounding), and the padded rows of wte get no gradient. */
Test(gpt_ref, zero_model_loss_is_log_vocab) {
    size_t sz[GPT_NUM_PARAM_TENSORS], n = gpt_num_params(&SHAPE), o = 0;
    gpt_param_sizes(&SHAPE, sz);
    double *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g);
    for (int t = 0; t < GPT_NUM_PARAM_TENSORS; t++) {
        if (t == 2 || t == 8 || t == 14)
            for (size_t i = 0; i < sz[t]; i++)
                p[o + i] = 1.0;
        o += sz[t];
    }
    int inp[B * T], tgt[B * T];
    tokens_make(inp, tgt);
    double loss = gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, g);
    cr_expect(fabs(loss - log((double)SHAPE.V)) < 1e-12, "loss %.15g, expected ln 17 = %.15g",
              loss, log((double)SHAPE.V));
    free(g);
    free(p);
}

Test(gpt_ref, padded_vocab_rows_and_unused_positions_get_no_gradient) {
    double *p = params_make(4);
    size_t n = gpt_num_params(&SHAPE);
    double *g = calloc(n, sizeof *g);
    int inp[B * T], tgt[B * T];
    tokens_make(inp, tgt);
    gpt_ref_loss(&SHAPE, p, inp, tgt, B, T, g);
    for (size_t i = (size_t)SHAPE.V * SHAPE.C; i < (size_t)SHAPE.Vp * SHAPE.C; i++)
        cr_expect_eq(g[i], 0.0, "dwte[%zu] = %g in a padded row", i, g[i]);
    const double *dwpe = g + (size_t)SHAPE.Vp * SHAPE.C;
    for (size_t i = (size_t)T * SHAPE.C; i < (size_t)SHAPE.maxT * SHAPE.C; i++)
        cr_expect_eq(dwpe[i], 0.0, "dwpe[%zu] = %g beyond T", i, dwpe[i]);
    free(g);
    free(p);
}

/* The attention's saved log-sum-exp is what the flash kernels rely on: check it
 * against the scores computed here. */
Test(gpt_ref, attention_lse_is_the_log_sum_exp_of_scaled_scores) {
    enum { C = 8, NH = 2, hs = 4 };
    double qkv[B * T * 3 * C], out[B * T * C], lse[B * NH * T];
    rng_state = 99;
    for (size_t i = 0; i < sizeof qkv / sizeof qkv[0]; i++)
        qkv[i] = rng_uniform() * 2 - 1;
    gref_attention_forward(out, lse, qkv, B, T, C, NH);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double sum = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += qkv[(b * T + t) * 3 * C + h * hs + d] *
                             qkv[(b * T + u) * 3 * C + C + h * hs + d];
                    sum += exp(s / 2.0);
                }
                double want = log(sum), got = lse[(b * NH + h) * T + t];
                cr_expect(fabs(got - want) < 1e-12, "lse[%d,%d,%d] = %.15g, expected %.15g", b,
                          h, t, got, want);
            }
}

/* ----------------------------------------------------------------------------
 * uvmrt-gpt on the sim backend */

static json_t *run_gpt_sim(const char *args) {
    char json_path[256], cmd[2048];
    snprintf(json_path, sizeof json_path, "/tmp/uvmrt-test-gpt-%d.json", (int)getpid());
    const char *path = getenv("UVMRT_GPT");
    snprintf(cmd, sizeof cmd,
             "env -u UVMRT_BACKEND -u UVMRT_POLICY -u UVMRT_BUDGET -u UVMRT_PROFILE '%s' "
             "--backend sim --profile h200 --quiet --result-json %s %s 2>&1",
             path && *path ? path : UVMRT_GPT_PATH, json_path, args);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL, "popen %s", cmd);
    char out[16384];
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    cr_assert_eq(status, 0, "%s\nexited %d:\n%s", cmd, status, out);
    json_error_t err;
    json_t *res = json_load_file(json_path, 0, &err);
    cr_assert(res != NULL, "%s: %s\n%s", json_path, err.text, out);
    unlink(json_path);
    return res;
}

Test(gpt_sim, prefetch_under_a_budget_never_faults_after_step_one, .timeout = 120) {
    static const char *const variants[] = {
        "--optimizer-on gpu --recompute none", "--optimizer-on gpu --recompute all",
        "--optimizer-on cpu --recompute none", "--optimizer-on cpu --recompute all"};
    for (size_t k = 0; k < sizeof variants / sizeof variants[0]; k++) {
        char args[512];
        /* d12-like blocks, small batch: ~0.8 GiB of tensors under a 256 MiB budget */
        snprintf(args, sizeof args, "--layers 6 --channels 768 --heads 12 --batch 2 --seq 256 "
                                    "--vocab 4096 --steps 3 --budget 256M %s", variants[k]);
        json_t *r = run_gpt_sim(args);
        json_int_t managed = json_integer_value(json_object_get(r, "managed_bytes"));
        json_int_t peak = json_integer_value(json_object_get(r, "peak_resident_bytes"));
        json_int_t late = json_integer_value(json_object_get(r, "faults_after_step1"));
        cr_expect(managed > (json_int_t)(256ll << 20), "%s: %lld bytes fit the budget: the "
                  "test would prove nothing", variants[k], (long long)managed);
        cr_expect(peak <= (json_int_t)(256ll << 20), "%s: peak resident %lld over the budget",
                  variants[k], (long long)peak);
        cr_expect_eq(late, 0, "%s: %lld faults after the recording step", variants[k],
                     (long long)late);
        json_decref(r);
    }
}

Test(gpt_sim, bad_usage_exits_2) {
    const char *path = getenv("UVMRT_GPT");
    char cmd[1024];
    static const char *const bad[] = {"--depth 13", "--channels 100", "--recompute some",
                                      "--tokens text", "--steps 0", "--heads 7 --channels 768"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(cmd, sizeof cmd, "'%s' --backend sim %s >/dev/null 2>&1",
                 path && *path ? path : UVMRT_GPT_PATH, bad[k]);
        int st = system(cmd);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s' exited %d, expected 2", bad[k],
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
}
