/*
 * test_adamw.c -- uvmrt_adamw_cpu(3), the library's CPU AdamW (src/api/adamw.c).
 *
 *  - in both orders (uvmrt's, torch's), every instruction set this CPU has
 *    (UVMRT_ADAMW_ISA narrows the path) and thread counts 1, 2 and 3 give bit for bit
 *    what the scalar reference gives (the element formula of src/base/adamw_math.h, one
 *    element at a time), on sizes 0, 1, 7, 15, 16, 17 and 1000003, over three steps,
 *    with and without half_out, including zero and infinite gradients and a loss scale;
 *  - torch's order equals a reference written here from torch's kernels (fmaf), in
 *    both branches of torch's lerp, and differs from uvmrt's order;
 *  - a struct_size from before the order field means uvmrt's order;
 *  - half_out is the bf16 rounding (to nearest even, NaN kept quiet) of the new w,
 *    checked against a rounding written here;
 *  - every invalid argument returns UVMRT_ERR_INVALID, logs a message naming it, and
 *    leaves the arrays as they were;
 *  - three steps against torch.optim.AdamW's formula (foreach=False) evaluated in
 *    double: the worst error, in float ULPs of the operation's magnitude, is measured
 *    and asserted (ADAMW_ULP_BOUND);
 *  - uvmrt_adamw_init's defaults, and uvmrt_adamw_isa's answers.
 * Each Test runs in its own process (Criterion), so setenv here affects one test.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "adamw_math.h" /* defines: the scalar reference's element update */
#include "uvmrt.h"

/* The worst error of three steps against torch's formula in double, in float ULPs of
 * the magnitude each value is computed from, over all steps so far (what rounding
 * errors scale with when terms cancel): for m, M_t = b1 M_{t-1} + (1-b1)|g|; for v, v
 * itself (no cancellation); for w, W_t = W_{t-1} (1-lr*wd) + step_size M_t / denom
 * (the update's error follows m's). Measured on x86-64 (every path gives the same
 * bits): w 3.0, m 2.8, v 3.7 (test_adamw prints the figures). */
#define ADAMW_ULP_BOUND 4.0

/* ----------------------------------------------------------------------------
 * inputs and the scalar reference */

/* Deterministic values in [-1, 1) (splitmix64 of the index). */
static float unit(uint64_t seed, uint64_t i) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + i + 1;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (float)(int64_t)(x >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

typedef struct arrays {
    float *w, *m, *v, *g;
    uint16_t *h;
    size_t n;
} arrays_t;

static void arrays_alloc(arrays_t *a, size_t n) {
    size_t k = n ? n : 1;
    a->n = n;
    a->w = malloc(k * sizeof(float));
    a->m = malloc(k * sizeof(float));
    a->v = malloc(k * sizeof(float));
    a->g = malloc(k * sizeof(float));
    a->h = malloc(k * sizeof(uint16_t));
    cr_assert(a->w && a->m && a->v && a->g && a->h, "out of memory for %zu elements", n);
}

static void arrays_free(arrays_t *a) {
    free(a->w);
    free(a->m);
    free(a->v);
    free(a->g);
    free(a->h);
}

static void arrays_copy(arrays_t *dst, const arrays_t *src) {
    memcpy(dst->w, src->w, src->n * sizeof(float));
    memcpy(dst->m, src->m, src->n * sizeof(float));
    memcpy(dst->v, src->v, src->n * sizeof(float));
    memcpy(dst->g, src->g, src->n * sizeof(float));
    memcpy(dst->h, src->h, src->n * sizeof(uint16_t));
}

/* A wide exponent range (tiny gradients, subnormal-ish bf16, large moments), zero
 * gradients every 101st element and an infinite one every 10007th. */
static void arrays_fill(arrays_t *a, uint64_t seed) {
    for (size_t j = 0; j < a->n; j++) {
        float e = ldexpf(1.0f, (int)(j % 40) - 30);
        a->w[j] = unit(seed, 4 * j) * e * 64.0f;
        a->m[j] = unit(seed, 4 * j + 1) * e;
        a->v[j] = fabsf(unit(seed, 4 * j + 2)) * e * e;
        a->g[j] = unit(seed, 4 * j + 3) * e;
        if (j % 101 == 50)
            a->g[j] = 0.0f;
        if (j % 10007 == 5000)
            a->g[j] = (j & 1) ? INFINITY : -INFINITY;
        a->h[j] = 0xdead;
    }
}

static uvmrt_adamw_t hp_make_order(uint64_t t, double grad_scale, int threads, int order) {
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    hp.lr = 3e-3;
    hp.beta1 = 0.9;
    hp.beta2 = 0.95;
    hp.weight_decay = 0.1;
    hp.step = t;
    hp.grad_scale = grad_scale;
    hp.threads = threads;
    hp.order = order;
    return hp;
}

static uvmrt_adamw_t hp_make(uint64_t t, double grad_scale, int threads) {
    return hp_make_order(t, grad_scale, threads, UVMRT_ADAMW_ORDER_UVMRT);
}

/* One element at a time, in order: the definition every path must equal. */
static void reference(const uvmrt_adamw_t *hp, arrays_t *a, int with_half) {
    uvmrt__adamw_coef_t c = uvmrt__adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                                   hp->weight_decay, hp->step, hp->grad_scale);
    for (size_t j = 0; j < a->n; j++) {
        if (hp->order == UVMRT_ADAMW_ORDER_TORCH)
            uvmrt__adamw_elem_torch(&a->w[j], &a->m[j], &a->v[j], a->g[j], &c);
        else
            uvmrt__adamw_elem(&a->w[j], &a->m[j], &a->v[j], a->g[j], &c);
        if (with_half)
            a->h[j] = uvmrt__f32_to_bf16(a->w[j]);
    }
}

static int same_bits(const void *x, const void *y, size_t bytes) { return memcmp(x, y, bytes) == 0; }

/* The first element where a and b differ (n when none). */
static size_t first_difference(const arrays_t *a, const arrays_t *b) {
    for (size_t j = 0; j < a->n; j++)
        if (!same_bits(&a->w[j], &b->w[j], 4) || !same_bits(&a->m[j], &b->m[j], 4) ||
            !same_bits(&a->v[j], &b->v[j], 4) || a->h[j] != b->h[j])
            return j;
    return a->n;
}

/* The same, but any two NaNs are equal (their sign and payload are the hardware's: a
 * GPU makes other NaN bits than x86). */
static int same_or_nan(float x, float y) { return same_bits(&x, &y, 4) || (isnan(x) && isnan(y)); }

static size_t first_difference_nan_equal(const arrays_t *a, const arrays_t *b) {
    for (size_t j = 0; j < a->n; j++)
        if (!same_or_nan(a->w[j], b->w[j]) || !same_or_nan(a->m[j], b->m[j]) ||
            !same_or_nan(a->v[j], b->v[j]))
            return j;
    return a->n;
}

/* ----------------------------------------------------------------------------
 * every path and thread count, bit for bit */

/* 1 when UVMRT_ADAMW_ISA=isa makes the library take isa (the CPU has it). */
static int force_isa(const char *isa) {
    cr_assert_eq(setenv("UVMRT_ADAMW_ISA", isa, 1), 0);
    return strcmp(uvmrt_adamw_isa(), isa) == 0;
}

static void bitwise_against_reference(const char *isa, int order) {
    if (!force_isa(isa))
        cr_skip_test("this CPU has no %s path (the library takes %s)", isa, uvmrt_adamw_isa());
    static const size_t sizes[] = {0, 1, 7, 15, 16, 17, 1000003};
    static const int threads[] = {1, 2, 3};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        size_t n = sizes[si];
        arrays_t start, ref, got;
        arrays_alloc(&start, n);
        arrays_alloc(&ref, n);
        arrays_alloc(&got, n);
        arrays_fill(&start, 11 + n);
        for (int with_half = 0; with_half <= 1; with_half++) {
            /* with half_out: a loss scale of 1024 (grad_scale 1/1024); without: none */
            double scale = with_half ? 1.0 / 1024.0 : 1.0;
            arrays_copy(&ref, &start);
            for (uint64_t t = 1; t <= 3; t++) {
                uvmrt_adamw_t hp = hp_make_order(t, scale, 1, order);
                reference(&hp, &ref, with_half);
            }
            for (size_t ti = 0; ti < sizeof threads / sizeof *threads; ti++) {
                arrays_copy(&got, &start);
                for (uint64_t t = 1; t <= 3; t++) {
                    uvmrt_adamw_t hp = hp_make_order(t, scale, threads[ti], order);
                    uvmrt_status_t st = uvmrt_adamw_cpu(&hp, got.w, got.m, got.v, got.g, n,
                                                        with_half ? got.h : NULL);
                    cr_assert_eq(st, UVMRT_OK, "%s order %d n %zu threads %d step %d: %s", isa,
                                 order, n, threads[ti], (int)t, uvmrt_status_str(st));
                }
                size_t j = first_difference(&ref, &got);
                cr_assert_eq(j, n,
                             "%s, order %d, n %zu, threads %d, half_out %s: element %zu differs "
                             "from the scalar reference: w %a vs %a, m %a vs %a, v %a vs %a, "
                             "bf16 0x%04x vs 0x%04x",
                             isa, order, n, threads[ti], with_half ? "on" : "off", j,
                             j < n ? got.w[j] : 0.0f, j < n ? ref.w[j] : 0.0f,
                             j < n ? got.m[j] : 0.0f, j < n ? ref.m[j] : 0.0f,
                             j < n ? got.v[j] : 0.0f, j < n ? ref.v[j] : 0.0f,
                             j < n ? got.h[j] : 0u, j < n ? ref.h[j] : 0u);
            }
        }
        arrays_free(&start);
        arrays_free(&ref);
        arrays_free(&got);
    }
}

Test(adamw, scalar_path_bitwise) { bitwise_against_reference("scalar", UVMRT_ADAMW_ORDER_UVMRT); }
Test(adamw, avx2_path_bitwise) { bitwise_against_reference("avx2", UVMRT_ADAMW_ORDER_UVMRT); }
Test(adamw, avx512_path_bitwise) { bitwise_against_reference("avx512", UVMRT_ADAMW_ORDER_UVMRT); }
Test(adamw, torch_order_scalar_path_bitwise) {
    bitwise_against_reference("scalar", UVMRT_ADAMW_ORDER_TORCH);
}
Test(adamw, torch_order_avx2_path_bitwise) {
    bitwise_against_reference("avx2", UVMRT_ADAMW_ORDER_TORCH);
}
Test(adamw, torch_order_avx512_path_bitwise) {
    bitwise_against_reference("avx512", UVMRT_ADAMW_ORDER_TORCH);
}

/* threads 0 (the calling thread's CPUs) and more threads than work items: the same bits */
static void default_and_many_threads(int order) {
    const size_t n = 300007;
    arrays_t ref, got;
    arrays_alloc(&ref, n);
    arrays_alloc(&got, n);
    arrays_fill(&ref, 5);
    arrays_copy(&got, &ref);
    uvmrt_adamw_t hp = hp_make_order(4, 1.0, 1, order);
    reference(&hp, &ref, 1);
    hp.threads = 0;
    cr_assert_eq(uvmrt_adamw_cpu(&hp, got.w, got.m, got.v, got.g, n, got.h), UVMRT_OK);
    hp.threads = 64;
    reference(&hp, &ref, 1);
    cr_assert_eq(uvmrt_adamw_cpu(&hp, got.w, got.m, got.v, got.g, n, got.h), UVMRT_OK);
    cr_assert_eq(first_difference(&ref, &got), n, "order %d", order);
    arrays_free(&ref);
    arrays_free(&got);
}

Test(adamw, default_and_many_threads_bitwise) { default_and_many_threads(UVMRT_ADAMW_ORDER_UVMRT); }
Test(adamw, torch_order_default_and_many_threads_bitwise) {
    default_and_many_threads(UVMRT_ADAMW_ORDER_TORCH);
}

/* ----------------------------------------------------------------------------
 * torch's order against torch's kernels, written here from them */

/* torch.optim.AdamW(foreach=False) on CUDA, one element: each line one of its kernels
 * (float arithmetic; fmaf where the kernel's expression contracts to an FMA), its
 * scalars from Python doubles rounded to float once. */
static void torch_elem(const uvmrt_adamw_t *hp, float *w, float *m, float *v, float grad) {
    double t = (double)hp->step;
    float g = grad * (float)hp->grad_scale;                          /* the clip's g * coef */
    float w1 = *w * (float)(1.0 - hp->lr * hp->weight_decay);         /* param.mul_ */
    float weight = (float)(1.0 - hp->beta1);                          /* exp_avg.lerp_(g, 1-b1) */
    float m2 = weight < 0.5f ? fmaf(weight, g - *m, *m) : fmaf(-(g - *m), 1.0f - weight, g);
    float vb2 = *v * (float)hp->beta2;                                /* exp_avg_sq.mul_(b2) */
    float v2 = fmaf((float)(1.0 - hp->beta2), g * g, vb2);            /* .addcmul_(g, g, 1-b2) */
    double bc2_sqrt = pow(1.0 - pow(hp->beta2, t), 0.5);              /* bias_correction2**0.5 */
    float recip = (float)(1.0 / bc2_sqrt);                            /* x / scalar: x * (1/s), 1/s in double */
    float denom = sqrtf(v2) * recip + (float)hp->eps;                 /* sqrt() / s, add_(eps) */
    float step_size = (float)(-(hp->lr / (1.0 - pow(hp->beta1, t)))); /* addcdiv_ value */
    *w = fmaf(step_size, m2 / denom, w1);
    *m = m2;
    *v = v2;
}

Test(adamw, torch_order_equals_torch_kernels) {
    const size_t n = 100003; /* two work items and a tail */
    static const double beta1s[] = {0.9, 0.3, 0.0}; /* lerp's both branches, and m = g' */
    arrays_t start, ref, got, uvm;
    arrays_alloc(&start, n);
    arrays_alloc(&ref, n);
    arrays_alloc(&got, n);
    arrays_alloc(&uvm, n);
    arrays_fill(&start, 31);
    for (size_t bi = 0; bi < sizeof beta1s / sizeof *beta1s; bi++) {
        arrays_copy(&ref, &start);
        arrays_copy(&got, &start);
        arrays_copy(&uvm, &start);
        static const uint64_t steps[] = {1, 2, 3, 1000};
        for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
            uvmrt_adamw_t hp = hp_make_order(steps[k], 0.37, 2, UVMRT_ADAMW_ORDER_TORCH);
            hp.beta1 = beta1s[bi];
            for (size_t j = 0; j < n; j++)
                torch_elem(&hp, &ref.w[j], &ref.m[j], &ref.v[j], ref.g[j]);
            cr_assert_eq(uvmrt_adamw_cpu(&hp, got.w, got.m, got.v, got.g, n, NULL), UVMRT_OK);
            hp.order = UVMRT_ADAMW_ORDER_UVMRT;
            cr_assert_eq(uvmrt_adamw_cpu(&hp, uvm.w, uvm.m, uvm.v, uvm.g, n, NULL), UVMRT_OK);
        }
        size_t j = first_difference_nan_equal(&ref, &got);
        cr_assert_eq(j, n,
                     "beta1 %g (%s): element %zu differs from torch's kernels: w %a vs %a, "
                     "m %a vs %a, v %a vs %a",
                     beta1s[bi], uvmrt_adamw_isa(), j, j < n ? got.w[j] : 0.0f,
                     j < n ? ref.w[j] : 0.0f, j < n ? got.m[j] : 0.0f, j < n ? ref.m[j] : 0.0f,
                     j < n ? got.v[j] : 0.0f, j < n ? ref.v[j] : 0.0f);
        cr_assert_lt(first_difference(&uvm, &got), n,
                     "beta1 %g: torch's order should round some element differently from "
                     "uvmrt's", beta1s[bi]);
    }
    arrays_free(&start);
    arrays_free(&ref);
    arrays_free(&got);
    arrays_free(&uvm);
}

/* A struct from before the order field (struct_size offsetof(order)): uvmrt's order,
 * whatever lies past the caller's struct. */
Test(adamw, struct_before_order_means_uvmrt_order) {
    const size_t n = 1000;
    arrays_t ref, got;
    arrays_alloc(&ref, n);
    arrays_alloc(&got, n);
    arrays_fill(&ref, 8);
    arrays_copy(&got, &ref);
    uvmrt_adamw_t hp = hp_make(2, 1.0, 1);
    reference(&hp, &ref, 1);
    hp.struct_size = offsetof(uvmrt_adamw_t, order);
    hp.order = 12345; /* not the caller's: never read */
    cr_assert_eq(uvmrt_adamw_cpu(&hp, got.w, got.m, got.v, got.g, n, got.h), UVMRT_OK);
    cr_assert_eq(first_difference(&ref, &got), n);
    arrays_free(&ref);
    arrays_free(&got);
}

/* ----------------------------------------------------------------------------
 * half_out: bf16 of the new w */

/* fp32 -> bf16, round to nearest even, written apart from the library's: through
 * the value's two neighbours in bf16 and the distances to them. */
static uint16_t bf16_expected(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f))
        return (uint16_t)((u >> 16) | 0x40u);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u; /* truncated, and one step away */
    float flo, fhi;
    memcpy(&flo, &lo, 4);
    memcpy(&fhi, &hi, 4);
    if ((u & 0xffffu) == 0)
        return (uint16_t)(u >> 16);
    /* hi may be inf (or the next binade): compare the distances exactly in double */
    double dlo = fabs((double)f - (double)flo);
    double dhi = isinf(fhi) ? ldexp(1.0, 128) - fabs((double)f) : fabs((double)fhi - (double)f);
    if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

Test(adamw, half_out_is_bf16_of_new_w) {
    const size_t n = 200003;
    arrays_t a;
    arrays_alloc(&a, n);
    arrays_fill(&a, 9);
    uvmrt_adamw_t hp = hp_make(2, 1.0, 2);
    cr_assert_eq(uvmrt_adamw_cpu(&hp, a.w, a.m, a.v, a.g, n, a.h), UVMRT_OK);
    size_t nan_seen = 0;
    for (size_t j = 0; j < n; j++) {
        nan_seen += isnan(a.w[j]) != 0;
        cr_assert_eq(a.h[j], bf16_expected(a.w[j]), "element %zu: w %a gave bf16 0x%04x, expected 0x%04x",
                     j, a.w[j], a.h[j], bf16_expected(a.w[j]));
    }
    cr_assert_gt(nan_seen, 0, "the infinite gradients should have made NaN weights to round");
    /* ties, both ways, and the largest float (rounds to inf) */
    float w[4], m[4] = {0}, v[4] = {0}, g[4] = {0};
    uint16_t h[4];
    uint32_t bits[4] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xbf800001u};
    for (int k = 0; k < 4; k++)
        memcpy(&w[k], &bits[k], 4);
    uvmrt_adamw_t keep;
    uvmrt_adamw_init(&keep);
    keep.weight_decay = 0.0; /* g = 0: w unchanged, so half_out rounds these bits */
    cr_assert_eq(uvmrt_adamw_cpu(&keep, w, m, v, g, 4, h), UVMRT_OK);
    cr_assert_eq(h[0], 0x3f80, "tie to even (down): 0x%04x", h[0]);
    cr_assert_eq(h[1], 0x3f82, "tie to even (up): 0x%04x", h[1]);
    cr_assert_eq(h[2], 0x7f80, "FLT_MAX rounds to inf: 0x%04x", h[2]);
    cr_assert_eq(h[3], 0xbf80, "just above a bf16 value rounds to it: 0x%04x", h[3]);
    arrays_free(&a);
}

/* ----------------------------------------------------------------------------
 * invalid arguments: UVMRT_ERR_INVALID, a message, nothing changed */

/* Runs uvmrt_adamw_cpu (gpu: uvmrt_adamw_gpu, no stream) with stderr captured into buf. */
static uvmrt_status_t run_captured_on(bool gpu, const uvmrt_adamw_t *hp, float *w, float *m,
                                      float *v, const float *g, size_t n, uint16_t *h, char *buf,
                                      size_t cap) {
    fflush(stderr);
    FILE *tmp = tmpfile();
    cr_assert(tmp != NULL);
    int saved = dup(2);
    cr_assert(saved >= 0 && dup2(fileno(tmp), 2) >= 0);
    uvmrt_status_t st = gpu ? uvmrt_adamw_gpu(hp, w, m, v, g, n, h, NULL, NULL)
                            : uvmrt_adamw_cpu(hp, w, m, v, g, n, h);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t got = fread(buf, 1, cap - 1, tmp);
    buf[got] = '\0';
    fclose(tmp);
    return st;
}

static uvmrt_status_t run_captured(const uvmrt_adamw_t *hp, float *w, float *m, float *v,
                                   const float *g, size_t n, uint16_t *h, char *buf, size_t cap) {
    return run_captured_on(false, hp, w, m, v, g, n, h, buf, cap);
}

typedef struct bad_case {
    const char *name;
    void (*spoil)(uvmrt_adamw_t *hp);
    const char *needle; /* the message names the argument */
} bad_case_t;

#define SPOIL(fn, stmt) \
    static void fn(uvmrt_adamw_t *hp) { stmt; }
SPOIL(size_zero, hp->struct_size = 0)
SPOIL(size_small, hp->struct_size = sizeof hp->struct_size - 1) /* less than the field itself */
SPOIL(size_big, hp->struct_size = sizeof *hp + 8)
SPOIL(step_zero, hp->step = 0)
SPOIL(lr_negative, hp->lr = -1e-3)
SPOIL(lr_nan, hp->lr = NAN)
SPOIL(lr_inf, hp->lr = INFINITY)
SPOIL(eps_negative, hp->eps = -1e-8)
SPOIL(eps_nan, hp->eps = NAN)
SPOIL(eps_inf, hp->eps = INFINITY)
SPOIL(wd_negative, hp->weight_decay = -0.1)
SPOIL(wd_nan, hp->weight_decay = NAN)
SPOIL(wd_inf, hp->weight_decay = INFINITY)
SPOIL(beta1_negative, hp->beta1 = -0.1)
SPOIL(beta1_one, hp->beta1 = 1.0)
SPOIL(beta1_nan, hp->beta1 = NAN)
SPOIL(beta2_negative, hp->beta2 = -1e-9)
SPOIL(beta2_one, hp->beta2 = 1.0)
SPOIL(beta2_big, hp->beta2 = 2.0)
SPOIL(beta2_nan, hp->beta2 = NAN)
SPOIL(scale_nan, hp->grad_scale = NAN)
SPOIL(scale_inf, hp->grad_scale = -INFINITY)
SPOIL(threads_negative, hp->threads = -1)
SPOIL(order_unknown, hp->order = 2)
SPOIL(order_negative, hp->order = -1)

static const bad_case_t BAD_CASES[] = {
    {"struct_size 0", size_zero, "struct_size is 0"},
    {"struct_size too small", size_small, "struct_size"},
    {"struct_size too big", size_big, "struct_size"},
    {"step 0", step_zero, "step 0"},
    {"lr negative", lr_negative, "lr -0.001"},
    {"lr NaN", lr_nan, "lr nan"},
    {"lr inf", lr_inf, "lr inf"},
    {"eps negative", eps_negative, "eps -1e-08"},
    {"eps NaN", eps_nan, "eps nan"},
    {"eps inf", eps_inf, "eps inf"},
    {"weight_decay negative", wd_negative, "weight_decay -0.1"},
    {"weight_decay NaN", wd_nan, "weight_decay nan"},
    {"weight_decay inf", wd_inf, "weight_decay inf"},
    {"beta1 negative", beta1_negative, "beta1 -0.1"},
    {"beta1 1", beta1_one, "beta1 1"},
    {"beta1 NaN", beta1_nan, "beta1 nan"},
    {"beta2 negative", beta2_negative, "beta2 -1e-09"},
    {"beta2 1", beta2_one, "beta2 1"},
    {"beta2 2", beta2_big, "beta2 2"},
    {"beta2 NaN", beta2_nan, "beta2 nan"},
    {"grad_scale NaN", scale_nan, "grad_scale nan"},
    {"grad_scale -inf", scale_inf, "grad_scale -inf"},
    {"threads -1", threads_negative, "threads -1"},
    {"order 2", order_unknown, "order 2"},
    {"order -1", order_negative, "order -1"},
};

/* The arrays after a failed call: bit for bit as before. */
static void assert_unchanged(const arrays_t *a, const arrays_t *before, const char *name) {
    cr_assert_eq(first_difference(a, before), a->n, "%s: the arrays changed", name);
}

/* Every bad case through uvmrt_adamw_cpu (gpu: uvmrt_adamw_gpu): UVMRT_ERR_INVALID, a
 * message naming the function, the argument and what was expected, the arrays unchanged. */
static void check_bad_cases(bool gpu, size_t n) {
    const char *fn = gpu ? "uvmrt_adamw_gpu" : "uvmrt_adamw_cpu";
    arrays_t a, before;
    arrays_alloc(&a, n);
    arrays_alloc(&before, n);
    arrays_fill(&a, 3);
    arrays_copy(&before, &a);
    char msg[2048];
    for (size_t k = 0; k < sizeof BAD_CASES / sizeof *BAD_CASES; k++) {
        const bad_case_t *c = &BAD_CASES[k];
        uvmrt_adamw_t hp = hp_make(1, 1.0, 2);
        c->spoil(&hp);
        uvmrt_status_t st = run_captured_on(gpu, &hp, a.w, a.m, a.v, a.g, n, a.h, msg, sizeof msg);
        cr_assert_eq(st, UVMRT_ERR_INVALID, "%s %s: status %s, expected UVMRT_ERR_INVALID", fn,
                     c->name, uvmrt_status_name(st));
        cr_assert(strstr(msg, fn) != NULL && strstr(msg, c->needle) != NULL &&
                      strstr(msg, "expected") != NULL,
                  "%s %s: the message should name %s, '%s' and what was expected: '%s'", fn,
                  c->name, fn, c->needle, msg);
        assert_unchanged(&a, &before, c->name);
    }
    arrays_free(&a);
    arrays_free(&before);
}

Test(adamw, invalid_hyperparameters) {
    check_bad_cases(false, 70001); /* two work items: the threaded path would run */
}

/* uvmrt_adamw_gpu checks its arguments as the CPU's does, and its messages name it (no
 * kernel is queued for a bad call, so host arrays are safe here with or without a GPU). */
Test(adamw, gpu_invalid_hyperparameters_name_the_gpu_function) {
    check_bad_cases(true, 1000);
}

Test(adamw, invalid_pointers) {
    const size_t n = 17;
    arrays_t a, before;
    arrays_alloc(&a, n);
    arrays_alloc(&before, n);
    arrays_fill(&a, 4);
    arrays_copy(&before, &a);
    uvmrt_adamw_t hp = hp_make(1, 1.0, 1);
    char msg[2048];
    cr_assert_eq(run_captured(NULL, a.w, a.m, a.v, a.g, n, a.h, msg, sizeof msg), UVMRT_ERR_INVALID);
    cr_assert(strstr(msg, "hp is NULL") != NULL, "NULL hp: '%s'", msg);
    cr_assert_eq(run_captured(NULL, NULL, NULL, NULL, NULL, 0, NULL, msg, sizeof msg),
                 UVMRT_ERR_INVALID, "a NULL hp is invalid even with n 0");
    struct {
        const char *name;
        float *w, *m, *v;
        const float *g;
    } cases[] = {{"w", NULL, a.m, a.v, a.g},
                 {"m", a.w, NULL, a.v, a.g},
                 {"v", a.w, a.m, NULL, a.g},
                 {"g", a.w, a.m, a.v, NULL}};
    for (int k = 0; k < 4; k++) {
        uvmrt_status_t st = run_captured(&hp, cases[k].w, cases[k].m, cases[k].v, cases[k].g, n, a.h,
                                         msg, sizeof msg);
        cr_assert_eq(st, UVMRT_ERR_INVALID, "NULL %s: status %s", cases[k].name,
                     uvmrt_status_name(st));
        char needle[32];
        snprintf(needle, sizeof needle, "%s is NULL", cases[k].name);
        cr_assert(strstr(msg, needle) != NULL, "NULL %s: the message should say so: '%s'",
                  cases[k].name, msg);
        assert_unchanged(&a, &before, cases[k].name);
    }
    /* n 0: no element, nothing to check but hp */
    cr_assert_eq(uvmrt_adamw_cpu(&hp, NULL, NULL, NULL, NULL, 0, NULL), UVMRT_OK);
    arrays_free(&a);
    arrays_free(&before);
}

/* ----------------------------------------------------------------------------
 * against torch.optim.AdamW's formula in double */

/* A float ULP at magnitude x (x > 0): the spacing of floats there. */
static double ulp_at(double x) {
    int e;
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    if (e < -125)
        e = -125; /* subnormals: fixed spacing 2^-149 */
    return ldexp(1.0, e - 24);
}

Test(adamw, torch_formula_in_double) {
    const size_t n = 100003;
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    float *w = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4), *g = malloc(n * 4);
    double *dw = malloc(n * 8), *dm = calloc(n, 8), *dv = calloc(n, 8);
    double *mag_w = malloc(n * 8), *mag_m = calloc(n, 8); /* W_t, M_t */
    cr_assert(w && m && v && g && dw && dm && dv && mag_w && mag_m);
    for (size_t j = 0; j < n; j++)
        mag_w[j] = fabs(dw[j] = w[j] = unit(21, j));
    double worst[3] = {0, 0, 0}; /* w, m, v */
    size_t worst_at[3] = {0, 0, 0};
    for (uint64_t t = 1; t <= 3; t++) {
        for (size_t j = 0; j < n; j++) /* fresh gradients each step, over 8 binades */
            g[j] = unit(100 + t, j) * ldexpf(1.0f, -(int)(j % 8));
        uvmrt_adamw_t hp;
        uvmrt_adamw_init(&hp);
        hp.lr = lr, hp.beta1 = b1, hp.beta2 = b2, hp.eps = eps, hp.weight_decay = wd, hp.step = t;
        cr_assert_eq(uvmrt_adamw_cpu(&hp, w, m, v, g, n, NULL), UVMRT_OK);
        /* torch/optim/adamw.py, _single_tensor_adamw (amsgrad off), in double */
        double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
        double step_size = lr / bc1, bc2_sqrt = sqrt(bc2);
        for (size_t j = 0; j < n; j++) {
            double gj = g[j];
            double wd_part = dw[j] * (1.0 - lr * wd);                 /* param.mul_(1 - lr*wd) */
            dm[j] = dm[j] + (gj - dm[j]) * (1.0 - b1);                /* exp_avg.lerp_(g, 1-b1) */
            dv[j] = dv[j] * b2 + (1.0 - b2) * gj * gj;                /* mul_(b2).addcmul_ */
            double denom = sqrt(dv[j]) / bc2_sqrt + eps;
            double upd = step_size * dm[j] / denom;
            dw[j] = wd_part - upd;                                    /* addcdiv_(-step_size) */
            mag_m[j] = b1 * mag_m[j] + (1.0 - b1) * fabs(gj);
            mag_w[j] = mag_w[j] * (1.0 - lr * wd) + step_size * mag_m[j] / denom;
            double mag[3] = {mag_w[j], mag_m[j], dv[j]};
            double got[3] = {w[j], m[j], v[j]}, want[3] = {dw[j], dm[j], dv[j]};
            for (int k = 0; k < 3; k++) {
                double d = mag[k] > 0 ? fabs(got[k] - want[k]) / ulp_at(mag[k]) : fabs(got[k]);
                if (d > worst[k]) {
                    worst[k] = d;
                    worst_at[k] = j;
                }
            }
        }
    }
    cr_log_info("worst error against torch's formula in double, 3 steps, in float ULPs of the "
                "magnitude: w %.2f (element %zu), m %.2f (%zu), v %.2f (%zu); bound %.1f",
                worst[0], worst_at[0], worst[1], worst_at[1], worst[2], worst_at[2],
                ADAMW_ULP_BOUND);
    fprintf(stderr, "test_adamw: worst ULPs against torch's formula in double: w %.2f, m %.2f, v %.2f\n",
            worst[0], worst[1], worst[2]);
    static const char *const names[3] = {"w", "m", "v"};
    for (int k = 0; k < 3; k++)
        cr_assert(worst[k] <= ADAMW_ULP_BOUND, "%s: %.2f ULPs at element %zu, bound %.1f", names[k],
                  worst[k], worst_at[k], ADAMW_ULP_BOUND);
    free(w), free(m), free(v), free(g), free(dw), free(dm), free(dv), free(mag_w), free(mag_m);
}

/* ----------------------------------------------------------------------------
 * defaults and the path's name */

Test(adamw, init_defaults) {
    uvmrt_adamw_t hp;
    memset(&hp, 0xa5, sizeof hp);
    uvmrt_adamw_init(&hp);
    cr_assert_eq(hp.struct_size, sizeof hp);
    cr_assert(hp.lr == 1e-3 && hp.beta1 == 0.9 && hp.beta2 == 0.999 && hp.eps == 1e-8);
    cr_assert(hp.weight_decay == 1e-2 && hp.step == 1 && hp.grad_scale == 1.0 && hp.threads == 0);
    cr_assert_eq(hp.order, UVMRT_ADAMW_ORDER_UVMRT);
    uvmrt_adamw_init(NULL); /* nothing happens */
}

Test(adamw, isa_names_and_override) {
    unsetenv("UVMRT_ADAMW_ISA");
    const char *best = uvmrt_adamw_isa();
    cr_assert(strcmp(best, "scalar") == 0 || strcmp(best, "avx2") == 0 || strcmp(best, "avx512") == 0,
              "uvmrt_adamw_isa: '%s'", best);
    cr_assert(force_isa("scalar"), "UVMRT_ADAMW_ISA=scalar always gives scalar");
    /* asking for the widest gives the CPU's best, never more */
    setenv("UVMRT_ADAMW_ISA", "avx512", 1);
    cr_assert_str_eq(uvmrt_adamw_isa(), best);
    /* an unknown value is ignored (with a warning) */
    setenv("UVMRT_ADAMW_ISA", "sse9", 1);
    cr_assert_str_eq(uvmrt_adamw_isa(), best);
}

/* uvmrt_adamw_gpu checks its arguments as uvmrt_adamw_cpu does, before any CUDA call;
 * with valid ones and no GPU (or a library without CUDA) it fails and changes nothing. */
Test(adamw, gpu_invalid_arguments_and_no_device) {
    float w[4] = {1, 2, 3, 4}, m[4] = {0}, v[4] = {0}, g[4] = {1, 1, 1, 1};
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    cr_assert_eq(uvmrt_adamw_gpu(NULL, w, m, v, g, 4, NULL, NULL, NULL), UVMRT_ERR_INVALID);
    hp.step = 0;
    cr_assert_eq(uvmrt_adamw_gpu(&hp, w, m, v, g, 4, NULL, NULL, NULL), UVMRT_ERR_INVALID);
    hp.step = 1;
    hp.order = 7;
    cr_assert_eq(uvmrt_adamw_gpu(&hp, w, m, v, g, 4, NULL, NULL, NULL), UVMRT_ERR_INVALID);
    hp.order = UVMRT_ADAMW_ORDER_TORCH;
    cr_assert_eq(uvmrt_adamw_gpu(&hp, w, NULL, v, g, 4, NULL, NULL, NULL), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_adamw_gpu(&hp, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL), UVMRT_OK);
    if (access("/dev/nvidia0", F_OK) == 0)
        return; /* a GPU: the launch would be queued on these host arrays (tests/gpu covers it) */
    uvmrt_status_t st = uvmrt_adamw_gpu(&hp, w, m, v, g, 4, NULL, NULL, NULL);
    cr_assert(st == UVMRT_ERR_NO_DEVICE || st == UVMRT_ERR_UNSUPPORTED, "no GPU here: got %s",
              uvmrt_status_name(st));
    cr_assert(w[0] == 1 && w[3] == 4 && m[0] == 0 && v[0] == 0, "the arrays changed");
}
