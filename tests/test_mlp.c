/*
 * test_mlp.c -- uvmrt-mlp's training math and schedule, without a GPU.
 *
 *  - the shared math (train_math.h): GELU and its derivative against fp64 and finite
 *    differences; bf16/fp16 rounding against known patterns and F16C; one AdamW
 *    element against fp64;
 *  - the fp32 reference trainer (mlp_ref.c, the same formulas as the GPU kernels)
 *    gives the gradients of an fp64 implementation written here, and those match
 *    finite differences of the fp64 loss;
 *  - the inf/NaN check of fp16 loss scaling (adamw_cpu.c; the CPU AdamW's paths are
 *    the library's, tested in tests/test_adamw.c);
 *  - the loss falls on the teacher task;
 *  - uvmrt-mlp's schedule on the sim backend, both optimizer placements, never
 *    faults after the recording step under prefetch (the program is run by path);
 *  - on sim a small bf16 model trains on the CPU reference (step 1's loss is
 *    mlp_ref's, the loss falls, the same losses for any --cpu-layers/--recompute);
 *    a larger shape or fp16 computes nothing, says why and writes null losses;
 *  - --recompute N keeps N blocks' pre-activations off the device for one shared workspace;
 *  - --cpu-layers auto / --recompute auto (the defaults) pick the combination that
 *    the explicit runs (same profile and budget) find fastest, with predictions equal
 *    to those runs' step times, and the review on sim does not re-plan.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "adamw_cpu.h"
#include "helpers.h"
#include "train_math.h"
#include "mlp_ref.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("f16c"))) static uint16_t f16c_round(float f) {
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
#endif

/* ----------------------------------------------------------------------------
 * fp64 model: the same network, written independently */

static double gelu64(double x) {
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static double gelu_grad64(double x) {
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* Loss of the fp64 model with weights W (L, H, H); X, Y (N, H). When dW is not
 * NULL, also its gradient. */
static double loss64(int L, int H, int N, const double *W, const double *X, const double *Y,
                     double *dW) {
    size_t nh = (size_t)N * H, hh = (size_t)H * H;
    double *A = calloc((size_t)(L + 1) * nh, sizeof(double));
    double *Z = calloc((size_t)L * nh, sizeof(double));
    double *dA = calloc(nh, sizeof(double)), *dZ = calloc(nh, sizeof(double));
    double *dIn = calloc(nh, sizeof(double));
    cr_assert(A && Z && dA && dZ && dIn);
    memcpy(A, X, nh * sizeof(double));
    for (int i = 0; i < L; i++)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < H; o++) {
                double acc = 0.0;
                for (int k = 0; k < H; k++)
                    acc += A[i * nh + (size_t)n * H + k] * W[i * hh + (size_t)o * H + k];
                Z[i * nh + (size_t)n * H + o] = acc;
                A[(i + 1) * nh + (size_t)n * H + o] = gelu64(acc);
            }
    double loss = 0.0;
    for (size_t j = 0; j < nh; j++) {
        double d = A[L * nh + j] - Y[j];
        loss += d * d;
        dA[j] = 2.0 * d / (double)nh;
    }
    loss /= (double)nh;
    if (dW) {
        for (int i = L - 1; i >= 0; i--) {
            for (size_t j = 0; j < nh; j++)
                dZ[j] = dA[j] * gelu_grad64(Z[i * nh + j]);
            for (int o = 0; o < H; o++)
                for (int k = 0; k < H; k++) {
                    double acc = 0.0;
                    for (int n = 0; n < N; n++)
                        acc += dZ[(size_t)n * H + o] * A[i * nh + (size_t)n * H + k];
                    dW[i * hh + (size_t)o * H + k] = acc;
                }
            for (int n = 0; n < N; n++)
                for (int k = 0; k < H; k++) {
                    double acc = 0.0;
                    for (int o = 0; o < H; o++)
                        acc += dZ[(size_t)n * H + o] * W[i * hh + (size_t)o * H + k];
                    dIn[(size_t)n * H + k] = acc;
                }
            memcpy(dA, dIn, nh * sizeof(double));
        }
    }
    free(A);
    free(Z);
    free(dA);
    free(dZ);
    free(dIn);
    return loss;
}

/* ----------------------------------------------------------------------------
 * the shared math */

Test(mlp_math, gelu_matches_fp64_and_its_derivative_finite_differences) {
    for (double x = -6.0; x <= 6.0; x += 0.01) {
        float f = mlp_gelu((float)x);
        cr_assert(fabs(f - gelu64((float)x)) <= 2e-6 * (1.0 + fabs(x)), "gelu(%g) = %.9g, fp64 %.9g",
                  x, f, gelu64((float)x));
        double h = 1e-6, fd = (gelu64(x + h) - gelu64(x - h)) / (2 * h);
        cr_assert(fabs(gelu_grad64(x) - fd) < 1e-7, "fp64 gelu'(%g): %.9g vs fd %.9g", x,
                  gelu_grad64(x), fd);
        float g = mlp_gelu_grad((float)x);
        cr_assert(fabs(g - gelu_grad64((float)x)) <= 2e-6, "gelu'(%g) = %.9g, fp64 %.9g", x, g,
                  gelu_grad64((float)x));
    }
}

Test(mlp_math, bf16_rounds_to_nearest_even) {
    cr_assert_eq(mlp_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(mlp_f32_to_bf16(mlp_bits_f32(0x3f808000u)), 0x3f80); /* tie: to even */
    cr_assert_eq(mlp_f32_to_bf16(mlp_bits_f32(0x3f818000u)), 0x3f82); /* tie: to even */
    cr_assert_eq(mlp_f32_to_bf16(mlp_bits_f32(0x3f808001u)), 0x3f81);
    cr_assert_eq(mlp_f32_to_bf16(mlp_bits_f32(0x7f7fffffu)), 0x7f80); /* max float -> inf */
    cr_assert_eq(mlp_f32_to_bf16(-0.0f), 0x8000);
    cr_assert(isnan(mlp_bf16_to_f32(mlp_f32_to_bf16(NAN))));
    for (uint32_t k = 0; k < 100000; k++) { /* round trip of every bf16 value's float */
        uint16_t h = (uint16_t)(k * 0x9e37u);
        if ((h & 0x7f80u) == 0x7f80u && (h & 0x7fu))
            continue; /* NaN */
        cr_assert_eq(mlp_f32_to_bf16(mlp_bf16_to_f32(h)), h);
    }
}

Test(mlp_math, fp16_matches_known_values_and_f16c) {
    cr_assert_eq(mlp_f32_to_fp16(1.0f), 0x3c00);
    cr_assert_eq(mlp_f32_to_fp16(65504.0f), 0x7bff);
    cr_assert_eq(mlp_f32_to_fp16(65520.0f), 0x7c00);
    cr_assert_eq(mlp_f32_to_fp16(ldexpf(1.0f, -24)), 0x0001);
    cr_assert_eq(mlp_f32_to_fp16(ldexpf(1.0f, -25)), 0x0000);             /* tie: to even */
    cr_assert_eq(mlp_f32_to_fp16(ldexpf(3.0f, -25)), 0x0002);             /* 1.5 ulp: to even */
    cr_assert_eq(mlp_f32_to_fp16(-2.0f), 0xc000);
    for (uint32_t h = 0; h < 0x10000u; h++) { /* every finite fp16 round-trips */
        if ((h & 0x7c00u) == 0x7c00u)
            continue;
        cr_assert_eq(mlp_f32_to_fp16(mlp_fp16_to_f32((uint16_t)h)), h, "fp16 0x%04x", h);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    /* CPUID leaf 1, ECX bit 29: clang 14's __builtin_cpu_supports lacks "f16c". */
    unsigned ca = 0, cb = 0, cc = 0, cd = 0;
    if (!__get_cpuid(1, &ca, &cb, &cc, &cd) || !(cc & (1u << 29)))
        return;
    uint64_t s = 12345;
    for (int k = 0; k < 1000000; k++) {
        s = mlp_splitmix64(s);
        /* floats around the fp16 range, subnormals included */
        uint32_t u = (uint32_t)s;
        uint32_t e = 100u + (uint32_t)((s >> 40) % 48u); /* 2^-27 .. 2^20 */
        u = (u & 0x807fffffu) | (e << 23);
        float f = mlp_bits_f32(u);
        uint16_t want = f16c_round(f);
        cr_assert_eq(mlp_f32_to_fp16(f), want, "f = %a (0x%08x): 0x%04x, F16C 0x%04x", f, u,
                     mlp_f32_to_fp16(f), want);
    }
#endif
}

Test(mlp_math, adamw_element_matches_fp64) {
    uint64_t s = 7;
    for (int k = 0; k < 10000; k++) {
        float w = mlp_uniform(s, 1, k), m = 0.01f * mlp_uniform(s, 2, k);
        float v = 1e-4f * fabsf(mlp_uniform(s, 3, k)), g = 0.1f * mlp_uniform(s, 4, k);
        long t = 1 + k % 50;
        double lr = 1e-3, wd = MLP_ADAMW_WD;
        mlp_adamw_coef_t c = mlp_adamw_coef_make(lr, wd, t, 1.0);
        double m64 = 0.9 * m + 0.1 * g, v64 = 0.999 * v + 0.001 * (double)g * g;
        double w64 = w * (1 - lr * wd) -
                     lr / (1 - pow(0.9, (double)t)) * m64 /
                         (sqrt(v64) / sqrt(1 - pow(0.999, (double)t)) + 1e-8);
        /* error bounds: a few ulps of the terms each result sums */
        double m_mag = 0.9 * fabs(m) + 0.1 * fabs(g), v_mag = 0.999 * v + 0.001 * (double)g * g;
        double w_mag = fabs(w) + lr / (1 - pow(0.9, (double)t)) * m_mag /
                                     (sqrt(v64) / sqrt(1 - pow(0.999, (double)t)) + 1e-8);
        mlp_adamw_elem(&w, &m, &v, g, &c);
        cr_assert(fabs(m - m64) <= 1e-6 * m_mag, "m %.9g vs fp64 %.9g", m, m64);
        cr_assert(fabs(v - v64) <= 1e-6 * v_mag, "v %.9g vs fp64 %.9g", v, v64);
        cr_assert(fabs(w - w64) <= 2e-6 * w_mag, "w %.9g vs fp64 %.9g", w, w64);
    }
}

/* ----------------------------------------------------------------------------
 * gradients of a tiny model */

Test(mlp_ref, gradients_match_fp64_and_finite_differences) {
    const int L = 3, H = 8, N = 16;
    mlp_ref_t r;
    cr_assert_eq(mlp_ref_init(&r, L, H, N, 42), 0);
    float loss = mlp_ref_forward_backward(&r);

    size_t hh = (size_t)H * H, nh = (size_t)N * H, nw = (size_t)L * hh;
    double *W = malloc(nw * sizeof(double)), *dW = malloc(nw * sizeof(double));
    double *X = malloc(nh * sizeof(double)), *Y = malloc(nh * sizeof(double));
    cr_assert(W && dW && X && Y);
    for (size_t j = 0; j < nw; j++)
        W[j] = r.W[j];
    for (size_t j = 0; j < nh; j++)
        X[j] = r.X[j], Y[j] = r.Y[j];
    double l64 = loss64(L, H, N, W, X, Y, dW);
    cr_assert(l64 > 1e-4, "the teacher task must start with a real loss (%g)", l64);
    cr_assert(fabs(loss - l64) <= 1e-5 * l64, "loss fp32 %.9g vs fp64 %.9g", loss, l64);

    double gmax = 0.0;
    for (size_t j = 0; j < nw; j++)
        gmax = fmax(gmax, fabs(dW[j]));
    for (size_t j = 0; j < nw; j++) /* the fp32 reference against fp64 */
        cr_assert(fabs(r.dW[j] - dW[j]) <= 1e-4 * gmax, "dW[%zu]: fp32 %.9g, fp64 %.9g", j,
                  r.dW[j], dW[j]);
    for (size_t j = 0; j < nw; j += 7) { /* fp64 against central differences */
        double h = 1e-6, keep = W[j];
        W[j] = keep + h;
        double lp = loss64(L, H, N, W, X, Y, NULL);
        W[j] = keep - h;
        double lm = loss64(L, H, N, W, X, Y, NULL);
        W[j] = keep;
        double fd = (lp - lm) / (2 * h);
        cr_assert(fabs(fd - dW[j]) <= 1e-6 * gmax + 1e-6 * fabs(dW[j]),
                  "dW[%zu]: fp64 %.12g, finite difference %.12g", j, dW[j], fd);
    }
    free(W);
    free(dW);
    free(X);
    free(Y);
    mlp_ref_free(&r);
}

Test(mlp_ref, loss_falls_on_the_teacher_task) {
    mlp_ref_t r;
    cr_assert_eq(mlp_ref_init(&r, 3, 16, 64, 1), 0);
    float first = 0.0f, loss = 0.0f;
    for (int s = 0; s < 60; s++) {
        loss = mlp_ref_forward_backward(&r);
        if (s == 0)
            first = loss;
        mlp_ref_adamw(&r, 3e-3);
    }
    cr_assert(isfinite(loss));
    cr_assert(loss < 0.5f * first, "loss %.6g after 60 steps, %.6g at the start", loss, first);
    mlp_ref_free(&r);
}

/* A deep net's loss is tiny (the signal shrinks through 48 GELU blocks): the text
 * uvmrt-mlp prints for it must keep six significant digits, so that a falling loss
 * shows, where "%.6f" printed "0.000000 -> 0.000000". */
Test(mlp_ref, deep_net_loss_text_keeps_significant_digits) {
    mlp_ref_t r;
    cr_assert_eq(mlp_ref_init(&r, 48, 256, 8, 1), 0);
    float first = mlp_ref_forward_backward(&r);
    mlp_ref_adamw(&r, 1e-3);
    float second = mlp_ref_forward(&r);
    mlp_ref_free(&r);
    cr_assert(first > 0.0f && first < 5e-7f, "expected a tiny deep-net loss, got %.6g", first);
    char a[32], b[32], fixed[32];
    mlp_loss_text(a, sizeof a, first);
    mlp_loss_text(b, sizeof b, second);
    snprintf(fixed, sizeof fixed, "%.6f", first);
    cr_assert_str_eq(fixed, "0.000000"); /* what the old format showed */
    cr_assert_str_neq(a, "0.000000");
    double back = strtod(a, NULL);
    cr_assert(fabs(back - first) <= 1e-5 * first, "'%s' is not %.9g to 6 digits", a, first);
    cr_assert(strtod(b, NULL) != back || second == first, "'%s' -> '%s': the change is lost", a, b);
    char *e = strchr(a, 'e');
    cr_assert(e != NULL, "'%s': a loss below 1e-4 prints with an exponent", a);
    cr_assert_geq(e - a, 6, "'%s': fewer than 6 significant digits", a);
}

/* ----------------------------------------------------------------------------
 * the CPU side of fp16 loss scaling (the AdamW paths themselves: tests/test_adamw.c) */

Test(adamw_cpu, nonfinite_check) {
    float g[100] = {0};
    cr_assert_eq(mlp_nonfinite_cpu(g, 100), 0);
    g[57] = INFINITY;
    cr_assert_eq(mlp_nonfinite_cpu(g, 100), 1);
    g[57] = NAN;
    cr_assert_eq(mlp_nonfinite_cpu(g, 100), 1);
}

/* ----------------------------------------------------------------------------
 * uvmrt-mlp on the sim backend */

static const char *mlp_path(void) {
    const char *p = getenv("UVMRT_MLP");
    return p && *p ? p : UVMRT_MLP_PATH;
}

/* Runs uvmrt-mlp with args on sim with profile; returns its result JSON (caller frees). */
static json_t *run_sim_on(const char *profile, const char *args, const char *tag) {
    char json_path[256], report[256], cmd[2048];
    snprintf(json_path, sizeof json_path, "/tmp/uvmrt-test-mlp-%d-%s.json", (int)getpid(), tag);
    snprintf(report, sizeof report, "/tmp/uvmrt-test-mlp-%d-%s.report.json", (int)getpid(), tag);
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd,
             "'%s' --backend sim --profile %s --quiet --result-json %s "
             "--report json:%s %s 2>&1",
             mlp_path(), profile, json_path, report, args);
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
    json_t *rep = json_load_file(report, 0, &err);
    cr_assert(rep != NULL, "%s: %s", report, err.text);
    json_object_set_new(res, "report", rep);
    unlink(json_path);
    unlink(report);
    return res;
}

static json_t *run_sim(const char *args, const char *tag) {
    return run_sim_on("consumer-8g", args, tag);
}

static json_int_t jint(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_integer(v), "no integer \"%s\"", key);
    return json_integer_value(v);
}

static int layer_has_phase(json_t *res, const char *phase) {
    json_t *layers = json_object_get(json_object_get(res, "report"), "layers");
    size_t k;
    json_t *l;
    int with = 0;
    json_array_foreach(layers, k, l) with += json_object_get(l, phase) != NULL;
    return with;
}

static void sim_schedule(const char *placement) {
    char args[512], tag[32];
    snprintf(args, sizeof args,
             "--layers 6 --hidden 1024 --rows 1024 --steps 4 --policy prefetch --budget 24M "
             "--optimizer-on %s --recompute none", placement);
    snprintf(tag, sizeof tag, "%s", placement);
    json_t *res = run_sim(args, tag);
    cr_assert_eq(json_integer_value(json_object_get(res, "steps")), 4);
    cr_assert(json_is_false(json_object_get(res, "arithmetic")));
    /* too large for the CPU reference: no losses, and null says so (never 0) */
    json_t *losses = json_object_get(res, "losses");
    cr_assert_eq(json_array_size(losses), 4);
    for (size_t i = 0; i < 4; i++)
        cr_assert(json_is_null(json_array_get(losses, i)), "loss %zu is not null", i + 1);
    cr_assert_eq(json_integer_value(json_object_get(res, "faults_after_step1")), 0,
                 "prefetch faulted after the recording step (--optimizer-on %s)", placement);
    json_t *rep = json_object_get(res, "report");
    json_t *steps = json_object_get(rep, "steps");
    cr_assert_eq(json_array_size(steps), 4);
    /* data moved: 24 MiB cannot hold the 6 blocks' tensors */
    double moved = 0;
    size_t k;
    json_t *s;
    json_array_foreach(steps, k, s) {
        if (k == 0)
            continue;
        moved += json_number_value(json_object_get(s, "prefetch_bytes")) +
                 json_number_value(json_object_get(s, "remote_read_bytes"));
    }
    cr_assert(moved > 0, "nothing moved under a 24 MiB budget");
    cr_assert_eq(layer_has_phase(res, "forward"), 6);
    cr_assert_eq(layer_has_phase(res, "backward"), 6);
    /* every block has an optimizer call: on the GPU, or declared CPU work */
    cr_assert_eq(layer_has_phase(res, "optimizer"), 6);
    cr_assert_eq(jint(res, "cpu_layers"), strcmp(placement, "gpu") == 0 ? 0 : 6);
    cr_assert(json_is_false(json_object_get(res, "cpu_layers_auto")));
    cr_assert(json_is_false(json_object_get(res, "recompute_auto")));
    cr_assert_null(json_object_get(res, "choice"), "a choice with both values given");
    json_decref(res);
}

/* ----------------------------------------------------------------------------
 * the arithmetic on sim: the CPU reference computes a small bf16 shape */

#define MLP_TINY "--layers 4 --hidden 64 --rows 128 --steps 10 --lr 1e-3"

/* The losses of a result JSON (n of them; NaN for a non-number). */
static size_t losses_of(json_t *res, double *v, size_t cap) {
    json_t *a = json_object_get(res, "losses");
    size_t n = json_array_size(a);
    for (size_t i = 0; i < n && i < cap; i++) {
        json_t *e = json_array_get(a, i);
        v[i] = json_is_number(e) ? json_number_value(e) : NAN;
    }
    return n;
}

/* uvmrt-mlp ARGS on sim, its output into *text (caller frees); the exit status. */
static int run_text(const char *args, char **text) {
    char cmd[2048];
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "'%s' --backend sim %s 2>&1", mlp_path(), args);
    return run_capture(cmd, text);
}

/* A small model trains on sim: the note says so, step 1's loss is the fp32
 * reference's (to bf16's precision: the trainer rounds as the GPU does) and the loss
 * falls on the teacher task. */
Test(mlp_sim, small_model_trains_on_the_cpu_reference) {
    char *text = NULL;
    cr_assert_eq(run_text(MLP_TINY " -q", &text), 0, "%s", text);
    cr_expect(strstr(text, "sim: computing on the CPU with the reference implementation (slow)"),
              "%s", text);
    free(text);
    json_t *res = run_sim(MLP_TINY, "tiny");
    double loss[10];
    cr_assert_eq(losses_of(res, loss, 10), 10);
    for (int i = 0; i < 10; i++)
        cr_assert(isfinite(loss[i]) && loss[i] > 0, "loss %d: %g", i + 1, loss[i]);
    cr_assert(json_is_true(json_object_get(res, "arithmetic")));
    mlp_ref_t r;
    cr_assert_eq(mlp_ref_init(&r, 4, 64, 128, 1), 0);
    double ref = mlp_ref_forward(&r);
    mlp_ref_free(&r);
    cr_expect(fabs(loss[0] - ref) < 0.02 * ref, "step 1's loss %.6g, the reference's %.6g",
              loss[0], ref);
    cr_expect(loss[9] < 0.8 * loss[0], "the loss did not fall: %.6g -> %.6g", loss[0], loss[9]);
    json_decref(res);
}

/* Where AdamW runs and which blocks recompute change the schedule, not the numbers. */
Test(mlp_sim, losses_do_not_depend_on_cpu_layers_or_recompute) {
    static const char *const knobs[] = {"--cpu-layers 0 --recompute none",
                                        "--cpu-layers 4 --recompute all",
                                        "--cpu-layers 2 --recompute 2"};
    double first[10];
    for (size_t k = 0; k < 3; k++) {
        char args[256];
        snprintf(args, sizeof args, MLP_TINY " %s", knobs[k]);
        json_t *res = run_sim(args, "knobs");
        double loss[10];
        cr_assert_eq(losses_of(res, loss, 10), 10);
        for (int i = 0; i < 10; i++) {
            if (k == 0)
                first[i] = loss[i];
            cr_expect(loss[i] == first[i], "%s: loss %d %.17g, %.17g without", knobs[k], i + 1,
                      loss[i], first[i]);
        }
        json_decref(res);
    }
}

/* Where nothing is computed the output says why: a shape over the limit, and fp16. */
Test(mlp_sim, no_arithmetic_says_why) {
    char *text = NULL;
    cr_assert_eq(run_text("--layers 4 --hidden 1024 --rows 1024 --steps 1 -q", &text), 0, "%s",
                 text);
    cr_expect(strstr(text, "sim: no arithmetic:") && strstr(text, "over the CPU reference's"),
              "%s", text);
    cr_expect(strstr(text, "loss -") != NULL, "%s", text);
    free(text);
    cr_assert_eq(run_text("--layers 2 --hidden 64 --rows 64 --steps 1 --precision fp16 -q", &text),
                 0, "%s", text);
    cr_expect(strstr(text, "sim: no arithmetic:") && strstr(text, "bf16 only"), "%s", text);
    free(text);
}

/* No Criterion .timeout here: under load, LeakSanitizer reported 48 bytes leaked inside
 * libcriterion's runner (a timeout's bookkeeping) in CI's sanitizer stage. */
Test(mlp_sim, prefetch_schedule_gpu_optimizer_never_faults_after_step1) {
    sim_schedule("gpu");
}

Test(mlp_sim, prefetch_schedule_cpu_optimizer_never_faults_after_step1) {
    sim_schedule("cpu");
}

Test(mlp_sim, prefetch_schedule_mixed_optimizer_never_faults_after_step1) {
    json_t *res = run_sim("--layers 6 --hidden 1024 --rows 1024 --steps 4 --budget 24M "
                          "--cpu-layers 3 --recompute none", "mixed");
    cr_assert_eq(json_integer_value(json_object_get(res, "faults_after_step1")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(res, "optimizer_on")), "mixed");
    cr_assert_eq(jint(res, "cpu_layers"), 3);
    json_decref(res);
}

Test(mlp_sim, recompute_all_and_fp16_schedules_run) {
    json_t *res = run_sim("--layers 4 --hidden 512 --rows 512 --steps 3 --budget 16M "
                          "--recompute all --precision fp16 --cpu-layers 0", "recompute");
    cr_assert_eq(json_integer_value(json_object_get(res, "faults_after_step1")), 0);
    cr_assert_eq(jint(res, "recompute"), 4);
    json_decref(res);
}

/* --recompute 4 of 6 blocks: those four keep no pre-activation on the device (their
 * own stays allocated and unused; one shared workspace Zr instead: 3 fewer
 * activations resident), the step does 4 more GEMMs of 2 N H^2 (the sim times
 * declared flops: it takes longer with everything resident), and it still never
 * faults after the recording step. */
Test(mlp_sim, recompute_4_of_6_drops_4_activations_for_one_workspace) {
    const char *base = "--layers 6 --hidden 1024 --rows 1024 --steps 4 --policy prefetch "
                       "--budget 1G --cpu-layers 0";
    char args[512];
    snprintf(args, sizeof args, "%s --recompute none", base);
    json_t *none = run_sim(args, "rc0");
    snprintf(args, sizeof args, "%s --recompute 4", base);
    json_t *four = run_sim(args, "rc4");
    cr_assert_eq(jint(four, "recompute"), 4);
    cr_assert(json_is_false(json_object_get(four, "recompute_auto")));
    cr_assert_eq(jint(none, "recompute"), 0);
    json_int_t act = 1024 * 1024 * 2; /* N H bf16: 2 MiB, a whole number of 2 MiB blocks */
    cr_assert_eq(jint(four, "managed_bytes") - jint(none, "managed_bytes"), act, "Zr only");
    cr_assert_eq(jint(none, "peak_resident_bytes") - jint(four, "peak_resident_bytes"), 3 * act);
    cr_assert_eq(jint(four, "faults_after_step1"), 0);
    double t0 = json_number_value(json_object_get(none, "ms_per_step_median"));
    double t4 = json_number_value(json_object_get(four, "ms_per_step_median"));
    cr_assert(t4 > t0, "4 recomputed GEMMs took no time: %.6f ms against %.6f", t4, t0);
    json_decref(none);
    json_decref(four);
}

/* The defaults (--cpu-layers auto, --recompute auto) on a profile with host-memory
 * figures (the CPU optimizer costs time): every candidate's prediction is the step
 * time of the explicit run with its values (same profile and budget), the chosen one
 * is the fastest of them, and the auto run itself is no slower than any. */
Test(mlp_sim, auto_picks_the_fastest_explicit_combination) {
    const char *base = "--layers 4 --hidden 1024 --rows 1024 --steps 4 --budget 20M";
    json_t *aut = run_sim_on("h200", base, "auto");
    cr_assert(json_is_true(json_object_get(aut, "cpu_layers_auto")));
    cr_assert(json_is_true(json_object_get(aut, "recompute_auto")));
    json_t *choice = json_object_get(aut, "choice");
    cr_assert_not_null(choice, "no \"choice\" in the result JSON");
    cr_assert(json_is_true(json_object_get(choice, "fits")));
    json_t *cands = json_object_get(choice, "candidates");
    /* cpu_layers {0, L/8, ..., L} = {0..4}; the runtime's recompute count {0, L/8, ...,
     * L} of the 4 declared pre-activations = {0..4} */
    cr_assert_eq(json_array_size(cands), 25);
    json_t *values = json_object_get(choice, "values");
    int chosen_cpu = (int)jint(values, "cpu_layers"), chosen_rc = (int)jint(values, "recompute");
    cr_assert_eq(jint(aut, "cpu_layers"), chosen_cpu);
    cr_assert_eq(jint(aut, "recompute"), chosen_rc);
    double best = 0, chosen_ms = 0;
    size_t k;
    json_t *c;
    json_array_foreach(cands, k, c) {
        int cpu = (int)jint(c, "cpu_layers"), rc = (int)jint(c, "recompute");
        char args[512], tag[32];
        snprintf(args, sizeof args, "%s --cpu-layers %d --recompute %d", base, cpu, rc);
        snprintf(tag, sizeof tag, "c%zu", k);
        json_t *r = run_sim_on("h200", args, tag);
        double ms = json_number_value(json_object_get(r, "ms_per_step_median"));
        double pred = json_number_value(json_object_get(c, "predicted_ms"));
        cr_expect(fabs(pred - ms) <= 1e-3 * ms,
                  "cpu_layers %d, recompute %d: predicted %.6f ms, the explicit run took %.6f",
                  cpu, rc, pred, ms);
        if (best == 0 || ms < best)
            best = ms;
        if (cpu == chosen_cpu && rc == chosen_rc)
            chosen_ms = ms;
        json_decref(r);
    }
    cr_assert(chosen_ms > 0, "the chosen combination is no candidate");
    cr_assert(chosen_ms <= best * (1 + 1e-6), "chose cpu_layers %d, recompute %d (%.6f ms); the "
              "fastest explicit run took %.6f ms", chosen_cpu, chosen_rc, chosen_ms, best);
    double own = json_number_value(json_object_get(aut, "ms_per_step_median"));
    cr_assert(own <= best * (1 + 1e-3), "the auto run took %.6f ms, the fastest explicit %.6f",
              own, best);
    json_decref(aut);
}

/* The review after 3 planned steps: on sim the prediction is the sim's own time, so
 * it measures what was predicted and does not re-plan; the run keeps its values. */
Test(mlp_sim, review_on_sim_does_not_replan) {
    json_t *r = run_sim_on("h200", "--layers 4 --hidden 1024 --rows 1024 --steps 6 "
                           "--budget 20M --cpu-layers auto --recompute none", "review");
    json_t *choice = json_object_get(r, "choice");
    cr_assert_not_null(choice);
    cr_assert(json_is_false(json_object_get(choice, "replanned")));
    double pred = json_number_value(json_object_get(choice, "first_predicted_ms"));
    json_t *meas = json_object_get(choice, "measured_ms");
    cr_assert(json_is_number(meas), "no review after 3 planned steps");
    cr_assert(fabs(json_number_value(meas) - pred) <= 1e-3 * pred, "measured %.6f, predicted %.6f",
              json_number_value(meas), pred);
    cr_assert_eq(jint(json_object_get(choice, "values"), "cpu_layers"), jint(r, "cpu_layers"));
    cr_assert_null(json_object_get(json_object_get(choice, "values"), "recompute"),
                   "recompute was given: no knob");
    cr_assert(json_is_false(json_object_get(r, "recompute_auto")));
    json_decref(r);
}

/* A re-plan applied between steps (forced with UVMRT_TEST_REPLAN: on sim the review
 * finds no error): from the step after the review the run uses the new values, with
 * the tensors of a run started with them (its managed bytes); step 5 runs them
 * unplanned (faults, recorded again) and from step 6 on they are planned (step 7
 * never faults). */
static void replan_applies(const char *to, int cpu, int rc) {
    const char *base = "--layers 4 --hidden 1024 --rows 1024 --steps 7 --budget 20M";
    char args[512];
    snprintf(args, sizeof args, "%s --cpu-layers %d --recompute %d", base, cpu, rc);
    json_t *ref = run_sim_on("h200", args, "replan-ref");
    setenv("UVMRT_TEST_REPLAN", to, 1);
    json_t *r = run_sim_on("h200", base, "replan");
    unsetenv("UVMRT_TEST_REPLAN");
    json_t *choice = json_object_get(r, "choice");
    cr_assert(json_is_true(json_object_get(choice, "replanned")));
    cr_assert_eq(jint(r, "cpu_layers"), cpu);
    cr_assert_eq(jint(r, "recompute"), rc);
    /* the same tensors, and the shared workspace the auto run always has */
    cr_assert_eq(jint(r, "managed_bytes"), jint(ref, "managed_bytes") + (rc == 0 ? 1024 * 1024 * 2 : 0));
    json_t *steps = json_object_get(json_object_get(r, "report"), "steps");
    cr_assert_eq(json_array_size(steps), 7);
    json_t *last = json_array_get(steps, 6);
    cr_assert_eq(json_integer_value(json_object_get(last, "fault_count")), 0,
                 "step 7 faulted after the re-plan's recording step");
    /* (its step time is not compared: the run keeps the first choice's plan budget and
     * its new tensors sit in arenas of their own, so its plan differs from the other's) */
    cr_assert_eq(json_integer_value(json_object_get(json_array_get(steps, 4), "fault_count")) > 0, 1,
                 "step 5 did not fault: the new values were not applied from the next step");
    json_decref(ref);
    json_decref(r);
}

Test(mlp_sim, replan_applies_more_cpu_blocks_and_less_recompute) {
    replan_applies("4,0", 4, 0);
}

Test(mlp_sim, replan_applies_fewer_cpu_blocks_and_more_recompute) {
    replan_applies("1,3", 1, 3);
}

/* Staged half copies (the default on sim, and on a GPU whose driver has stream memory
 * operations), in the recorded schedule: each CPU block's update is followed by a call
 * of its optimizer phase on a stream of its own, ordered after the CPU's stream, that
 * reads W and writes Wh; no forward reads W, and only the first CPU block's forward
 * waits, for that stream. */
Test(mlp_sim, staged_half_copies_follow_each_cpu_update) {
    char rec[256], cmd[1024];
    snprintf(rec, sizeof rec, "/tmp/uvmrt-test-mlp-%d-staged.rec.json", (int)getpid());
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd,
             "UVMRT_RECORD=%s '%s' --backend sim --profile h200 --quiet --layers 4 --hidden 1024 "
             "--rows 1024 --steps 3 --budget 1G --cpu-layers 2 --recompute none >/dev/null 2>&1",
             rec, mlp_path());
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    json_error_t err;
    json_t *r = json_load_file(rec, 0, &err);
    cr_assert_not_null(r, "%s: %s", rec, err.text);
    json_t *tensors = json_object_get(r, "tensors"), *calls = json_object_get(r, "calls");
    int w_id[4], wh_id[4];
    for (int i = 0; i < 4; i++) {
        char w[16], wh[16];
        snprintf(w, sizeof w, "W%d", i);
        snprintf(wh, sizeof wh, "Wh%d", i);
        w_id[i] = wh_id[i] = -1;
        size_t k;
        json_t *t;
        json_array_foreach(tensors, k, t) {
            const char *n = json_string_value(json_object_get(t, "name"));
            if (strcmp(n, w) == 0) w_id[i] = (int)jint(t, "id");
            if (strcmp(n, wh) == 0) wh_id[i] = (int)jint(t, "id");
        }
    }
    int copies = 0, cpu_calls = 0, prev_cpu = -1;
    size_t k;
    json_t *c;
    json_array_foreach(calls, k, c) {
        int layer = (int)jint(c, "layer"), stream = (int)jint(c, "stream"), after = (int)jint(c, "after");
        const char *phase = json_string_value(json_object_get(c, "phase"));
        json_t *uses = json_object_get(c, "uses");
        if (strcmp(phase, "forward") == 0) {
            for (size_t u = 0; u < json_array_size(uses); u++)
                cr_expect_neq(json_integer_value(json_array_get(json_array_get(uses, u), 0)), w_id[layer],
                              "forward %d reads W", layer);
            if (layer == 2)
                cr_expect(after >= 0 && after != 0, "the first CPU block's forward waits for a stream: after %d", after);
            else
                cr_expect_eq(after, -1, "forward %d waits for stream %d", layer, after);
        }
        if (strcmp(phase, "optimizer") == 0 && json_integer_value(json_object_get(c, "host_bytes")) > 0) {
            cpu_calls++;
            prev_cpu = stream;
        } else if (strcmp(phase, "optimizer") == 0 && layer >= 2) {
            copies++;
            cr_expect(prev_cpu >= 0 && after == prev_cpu, "block %d's copy is not after the CPU's stream", layer);
            cr_expect(stream != 0 && stream != prev_cpu, "block %d's copy on stream %d", layer, stream);
            cr_expect_eq(json_array_size(uses), 2);
            cr_expect_eq(json_integer_value(json_array_get(json_array_get(uses, 0), 0)), w_id[layer]);
            cr_expect_eq(json_integer_value(json_array_get(json_array_get(uses, 1), 0)), wh_id[layer]);
        }
    }
    cr_expect_eq(cpu_calls, 2);
    cr_expect_eq(copies, 2, "one copy per CPU block");
    json_decref(r);
    unlink(rec);
}

Test(mlp_sim, bad_values_exit_2_naming_the_flag) {
    static const char *const bad[][2] = {
        {"--layers 0", "--layers '0'"},       {"--hidden 12", "--hidden '12'"},
        {"--precision fp8", "--precision"},   {"--optimizer-on tpu", "--optimizer-on"},
        {"--report xml:/tmp/x", "--report"},  {"--budget lots", "--budget"},
        {"--policy fast", "--policy"},        {"--lr -1", "--lr"},
        {"--layers 4 --cpu-layers 5", "--cpu-layers"},
        {"--cpu-layers some", "--cpu-layers"},
        {"--optimizer-on cpu --cpu-layers auto", "--cpu-layers auto"},
        {"--optimizer-on gpu --cpu-layers auto", "--cpu-layers auto"},
        {"--layers 4 --recompute 5", "--recompute '5'"},
        {"--recompute some", "--recompute 'some'"},
        {"--recompute -1", "--recompute"},
        {"--recompute", "--recompute"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char cmd[1024], out[4096];
        snprintf(cmd, sizeof cmd, "'%s' --backend sim %s 2>&1", mlp_path(), bad[k][0]);
        FILE *p = popen(cmd, "r");
        cr_assert(p != NULL);
        size_t got = fread(out, 1, sizeof out - 1, p);
        out[got] = '\0';
        int status = pclose(p);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2, "%s: status %d", cmd, status);
        cr_assert(strstr(out, bad[k][1]) != NULL, "%s: message does not name %s:\n%s", cmd,
                  bad[k][1], out);
    }
}
