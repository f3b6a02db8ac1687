/*
 * adamw.c -- uvmrt_adamw_cpu(3): AdamW on the CPU over caller-owned fp32 arrays.
 *
 * Two orders of operations (hp->order), each in three paths: AVX-512F, AVX2 and
 * scalar.
 *  - uvmrt's order, uvmrt__adamw_elem() (adamw_math.h): every product and sum rounded
 *    on its own (no FMA: this file is compiled with -ffp-contract=off and the SIMD
 *    paths use separate mul/add), the same bits as the trainers' GPU kernels;
 *  - torch's order, uvmrt__adamw_elem_torch(): torch.optim.AdamW's kernels on CUDA,
 *    with their fused multiply-adds written out (fmaf in the scalar path, the FMA
 *    instructions in the SIMD ones; the AVX2 path needs the CPU's FMA too).
 * sqrt, division and fma are correctly rounded in every path, so the three paths of
 * an order give the same bits. The SIMD paths are compiled with
 * __attribute__((target)) and chosen at run time, so one library runs on any x86-64;
 * other machines get the scalar path.
 *
 * Work is split into fixed chunks over an OpenMP team (when configure found OpenMP;
 * serial otherwise): each element is computed once by one thread, so the thread count
 * never changes the result. The chunks are handed out as threads free up (dynamic): in
 * a trainer the team shares the cores with the thread that launches the GPU's work,
 * and a static split waits for whichever thread that slowed.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __linux__
#include <sched.h>
#endif
#include <unistd.h>

#include "abi.h"        /* defines: UVMRT__ABI_READ */
#include "adamw_math.h" /* defines: uvmrt__adamw_coef_t, uvmrt__adamw_elem(_torch), uvmrt__f32_to_bf16 */
#include "log.h"        /* defines: LOG_ERROR, LOG_WARN */
#include "uvmrt.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define ADAMW_X86 1
#include <immintrin.h>
#endif

static const size_t CHUNK = (size_t)1 << 16; /* elements per work item; a multiple of 16 */

/* Messages of the calls without a context go to stderr from the warn level. */
static const uvmrt_log_t stderr_log = {UVMRT_LOG_WARN, NULL, NULL};

typedef enum adamw_isa { ISA_SCALAR = 0, ISA_AVX2 = 1, ISA_AVX512 = 2 } adamw_isa_t;
static const char *const ISA_NAMES[] = {"scalar", "avx2", "avx512"};

/* ----------------------------------------------------------------------------
 * scalar */

static void adamw_scalar(float *w, float *m, float *v, const float *g, uint16_t *half, size_t n,
                         const uvmrt__adamw_coef_t *c) {
    for (size_t i = 0; i < n; i++) {
        uvmrt__adamw_elem(&w[i], &m[i], &v[i], g[i], c);
        if (half)
            half[i] = uvmrt__f32_to_bf16(w[i]);
    }
}

/* fmaf here is the C library's (correctly rounded), or the instruction where the
 * compiler targets FMA */
static void adamw_scalar_torch(float *w, float *m, float *v, const float *g, uint16_t *half,
                               size_t n, const uvmrt__adamw_coef_t *c) {
    for (size_t i = 0; i < n; i++) {
        uvmrt__adamw_elem_torch(&w[i], &m[i], &v[i], g[i], c);
        if (half)
            half[i] = uvmrt__f32_to_bf16(w[i]);
    }
}

/* ----------------------------------------------------------------------------
 * AVX2: 8 floats at a time */

#ifdef ADAMW_X86
/* bf16 of 8 floats: round to nearest even, a NaN kept quiet (uvmrt__f32_to_bf16) */
__attribute__((target("avx2"))) static inline void store_bf16_avx2(uint16_t *half, __m256 w) {
    const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    __m256i u = _mm256_castps_si256(w);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), lsb), 16);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(w, w, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
    _mm_storeu_si128((__m128i *)half, _mm256_castsi256_si128(p));
}

__attribute__((target("avx2"))) static void adamw_avx2(float *w, float *m, float *v,
                                                       const float *g, uint16_t *half, size_t n,
                                                       const uvmrt__adamw_coef_t *c) {
    const __m256 b1 = _mm256_set1_ps(c->b1), omb1 = _mm256_set1_ps(c->omb1);
    const __m256 b2 = _mm256_set1_ps(c->b2), omb2 = _mm256_set1_ps(c->omb2);
    const __m256 step = _mm256_set1_ps(c->step_size), isb = _mm256_set1_ps(c->inv_sqrt_bc2);
    const __m256 eps = _mm256_set1_ps(c->eps), decay = _mm256_set1_ps(c->decay);
    const __m256 iscale = _mm256_set1_ps(c->inv_scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), iscale);
        __m256 m2 = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)),
                                  _mm256_mul_ps(omb1, gi));
        __m256 v2 = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                  _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
        __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(v2), isb), eps);
        __m256 upd = _mm256_mul_ps(step, _mm256_div_ps(m2, denom));
        __m256 w2 = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), decay), upd);
        _mm256_storeu_ps(w + i, w2);
        _mm256_storeu_ps(m + i, m2);
        _mm256_storeu_ps(v + i, v2);
        if (half)
            store_bf16_avx2(half + i, w2);
    }
    adamw_scalar(w + i, m + i, v + i, g + i, half ? half + i : NULL, n - i, c);
}

/* torch's order (uvmrt__adamw_elem_torch); fnmadd(a, b, c) = -(a*b) + c, rounded once */
__attribute__((target("avx2,fma"))) static void adamw_avx2_torch(float *w, float *m, float *v,
                                                                const float *g, uint16_t *half,
                                                                size_t n,
                                                                const uvmrt__adamw_coef_t *c) {
    const bool lerp_small = c->omb1 < 0.5f;
    const __m256 omb1 = _mm256_set1_ps(c->omb1), omw = _mm256_set1_ps(c->lerp_omw);
    const __m256 b2 = _mm256_set1_ps(c->b2), omb2 = _mm256_set1_ps(c->omb2);
    const __m256 nstep = _mm256_set1_ps(-c->step_size), isb = _mm256_set1_ps(c->torch_isb);
    const __m256 eps = _mm256_set1_ps(c->eps), decay = _mm256_set1_ps(c->decay);
    const __m256 iscale = _mm256_set1_ps(c->inv_scale);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gi = _mm256_mul_ps(_mm256_loadu_ps(g + i), iscale);
        __m256 w1 = _mm256_mul_ps(_mm256_loadu_ps(w + i), decay);
        __m256 mi = _mm256_loadu_ps(m + i);
        __m256 diff = _mm256_sub_ps(gi, mi);
        __m256 m2 = lerp_small ? _mm256_fmadd_ps(omb1, diff, mi) : _mm256_fnmadd_ps(diff, omw, gi);
        __m256 v2 = _mm256_fmadd_ps(omb2, _mm256_mul_ps(gi, gi),
                                    _mm256_mul_ps(_mm256_loadu_ps(v + i), b2));
        __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(v2), isb), eps);
        __m256 w2 = _mm256_fmadd_ps(nstep, _mm256_div_ps(m2, denom), w1);
        _mm256_storeu_ps(w + i, w2);
        _mm256_storeu_ps(m + i, m2);
        _mm256_storeu_ps(v + i, v2);
        if (half)
            store_bf16_avx2(half + i, w2);
    }
    adamw_scalar_torch(w + i, m + i, v + i, g + i, half ? half + i : NULL, n - i, c);
}

/* ----------------------------------------------------------------------------
 * AVX-512F: 16 floats at a time */

__attribute__((target("avx512f"))) static inline void store_bf16_avx512(uint16_t *half,
                                                                        __m512 w) {
    const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    __m512i u = _mm512_castps_si512(w);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, round), lsb), 16);
    __mmask16 nan = _mm512_cmp_ps_mask(w, w, _CMP_UNORD_Q);
    r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
    _mm256_storeu_si256((__m256i *)half, _mm512_cvtepi32_epi16(r));
}

__attribute__((target("avx512f"))) static void adamw_avx512(float *w, float *m, float *v,
                                                            const float *g, uint16_t *half,
                                                            size_t n,
                                                            const uvmrt__adamw_coef_t *c) {
    const __m512 b1 = _mm512_set1_ps(c->b1), omb1 = _mm512_set1_ps(c->omb1);
    const __m512 b2 = _mm512_set1_ps(c->b2), omb2 = _mm512_set1_ps(c->omb2);
    const __m512 step = _mm512_set1_ps(c->step_size), isb = _mm512_set1_ps(c->inv_sqrt_bc2);
    const __m512 eps = _mm512_set1_ps(c->eps), decay = _mm512_set1_ps(c->decay);
    const __m512 iscale = _mm512_set1_ps(c->inv_scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), iscale);
        __m512 m2 = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)),
                                  _mm512_mul_ps(omb1, gi));
        __m512 v2 = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                  _mm512_mul_ps(_mm512_mul_ps(omb2, gi), gi));
        __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(v2), isb), eps);
        __m512 upd = _mm512_mul_ps(step, _mm512_div_ps(m2, denom));
        __m512 w2 = _mm512_sub_ps(_mm512_mul_ps(_mm512_loadu_ps(w + i), decay), upd);
        _mm512_storeu_ps(w + i, w2);
        _mm512_storeu_ps(m + i, m2);
        _mm512_storeu_ps(v + i, v2);
        if (half)
            store_bf16_avx512(half + i, w2);
    }
    adamw_scalar(w + i, m + i, v + i, g + i, half ? half + i : NULL, n - i, c);
}

/* torch's order (uvmrt__adamw_elem_torch); AVX-512F has the FMA instructions */
__attribute__((target("avx512f"))) static void adamw_avx512_torch(float *w, float *m, float *v,
                                                                  const float *g, uint16_t *half,
                                                                  size_t n,
                                                                  const uvmrt__adamw_coef_t *c) {
    const bool lerp_small = c->omb1 < 0.5f;
    const __m512 omb1 = _mm512_set1_ps(c->omb1), omw = _mm512_set1_ps(c->lerp_omw);
    const __m512 b2 = _mm512_set1_ps(c->b2), omb2 = _mm512_set1_ps(c->omb2);
    const __m512 nstep = _mm512_set1_ps(-c->step_size), isb = _mm512_set1_ps(c->torch_isb);
    const __m512 eps = _mm512_set1_ps(c->eps), decay = _mm512_set1_ps(c->decay);
    const __m512 iscale = _mm512_set1_ps(c->inv_scale);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gi = _mm512_mul_ps(_mm512_loadu_ps(g + i), iscale);
        __m512 w1 = _mm512_mul_ps(_mm512_loadu_ps(w + i), decay);
        __m512 mi = _mm512_loadu_ps(m + i);
        __m512 diff = _mm512_sub_ps(gi, mi);
        __m512 m2 = lerp_small ? _mm512_fmadd_ps(omb1, diff, mi) : _mm512_fnmadd_ps(diff, omw, gi);
        __m512 v2 = _mm512_fmadd_ps(omb2, _mm512_mul_ps(gi, gi),
                                    _mm512_mul_ps(_mm512_loadu_ps(v + i), b2));
        __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(v2), isb), eps);
        __m512 w2 = _mm512_fmadd_ps(nstep, _mm512_div_ps(m2, denom), w1);
        _mm512_storeu_ps(w + i, w2);
        _mm512_storeu_ps(m + i, m2);
        _mm512_storeu_ps(v + i, v2);
        if (half)
            store_bf16_avx512(half + i, w2);
    }
    adamw_scalar_torch(w + i, m + i, v + i, g + i, half ? half + i : NULL, n - i, c);
}

#endif /* ADAMW_X86 */

/* ----------------------------------------------------------------------------
 * choosing the path */

/* The widest path this CPU and this build can run (probed once; a race between two
 * first calls computes the same value twice). */
static adamw_isa_t isa_hardware(void) {
    static int cached = -1;
    int isa = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (isa >= 0)
        return (adamw_isa_t)isa;
    isa = ISA_SCALAR;
#ifdef ADAMW_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        isa = ISA_AVX512;
    else if (__builtin_cpu_supports("avx2"))
        isa = ISA_AVX2;
#endif
    __atomic_store_n(&cached, isa, __ATOMIC_RELAXED);
    return (adamw_isa_t)isa;
}

/* The hardware's path, narrowed by UVMRT_ADAMW_ISA (read at every call, so a test
 * can compare the paths in one process); an unknown value is warned about once and
 * ignored. */
static adamw_isa_t isa_current(void) {
    adamw_isa_t hw = isa_hardware();
    const char *want = getenv("UVMRT_ADAMW_ISA");
    if (want == NULL || *want == '\0')
        return hw;
    for (int i = 0; i < (int)(sizeof ISA_NAMES / sizeof *ISA_NAMES); i++)
        if (strcmp(want, ISA_NAMES[i]) == 0)
            return (adamw_isa_t)i < hw ? (adamw_isa_t)i : hw;
    static int warned;
    if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        LOG_WARN(&stderr_log, "UVMRT_ADAMW_ISA=%s: expected scalar, avx2 or avx512; using %s",
                 want, ISA_NAMES[hw]);
    return hw;
}

const char *uvmrt_adamw_isa(void) { return ISA_NAMES[isa_current()]; }

/* Whether the CPU has FMA, which torch's order needs beside AVX2 (probed once). */
static bool cpu_has_fma(void) {
    static int cached = -1;
    int fma = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (fma >= 0)
        return fma;
    fma = 0;
#ifdef ADAMW_X86
    __builtin_cpu_init();
    fma = __builtin_cpu_supports("fma") != 0;
#endif
    __atomic_store_n(&cached, fma, __ATOMIC_RELAXED);
    return fma;
}

/* The path an order takes: torch's leaves AVX2 for scalar on a CPU without FMA. */
static adamw_isa_t isa_for_order(int order) {
    adamw_isa_t isa = isa_current();
    if (order == UVMRT_ADAMW_ORDER_TORCH && isa == ISA_AVX2 && !cpu_has_fma())
        return ISA_SCALAR;
    return isa;
}

/* The CPUs the calling thread may run on (at least 1). */
static int threads_default(void) {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void adamw_chunk(adamw_isa_t isa, int order, float *w, float *m, float *v,
                        const float *g, uint16_t *half, size_t n, const uvmrt__adamw_coef_t *c) {
    bool torch = order == UVMRT_ADAMW_ORDER_TORCH;
    switch (isa) {
#ifdef ADAMW_X86
    case ISA_AVX512:
        (torch ? adamw_avx512_torch : adamw_avx512)(w, m, v, g, half, n, c);
        return;
    case ISA_AVX2: (torch ? adamw_avx2_torch : adamw_avx2)(w, m, v, g, half, n, c); return;
#endif
    default: (torch ? adamw_scalar_torch : adamw_scalar)(w, m, v, g, half, n, c); return;
    }
}

/* ----------------------------------------------------------------------------
 * the public calls */

void uvmrt_adamw_init(uvmrt_adamw_t *hp) {
    if (hp == NULL)
        return;
    memset(hp, 0, sizeof *hp);
    hp->struct_size = sizeof *hp;
    hp->lr = 1e-3;
    hp->beta1 = 0.9;
    hp->beta2 = 0.999;
    hp->eps = 1e-8;
    hp->weight_decay = 1e-2;
    hp->step = 1;
    hp->grad_scale = 1.0;
    hp->threads = 0;
    hp->order = UVMRT_ADAMW_ORDER_UVMRT;
}

/* The error of a bad argument, naming the public function the caller called. */
__attribute__((format(printf, 2, 3))) static uvmrt_status_t bad(const char *fn, const char *fmt,
                                                                 ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    LOG_ERROR(&stderr_log, "%s: %s", fn, msg);
    return UVMRT_ERR_INVALID;
}

/* Both updaters' arguments, checked alike: the caller's struct up to its struct_size into
 * *full (fields past it take the defaults: a struct that ends before order means
 * UVMRT_ADAMW_ORDER_UVMRT), the hyperparameters, then the arrays. */
static uvmrt_status_t read_args(const char *fn, const uvmrt_adamw_t *given, uvmrt_adamw_t *full,
                                const float *w, const float *m, const float *v, const float *g,
                                size_t n) {
    if (given == NULL)
        return bad(fn, "hp is NULL: expected a uvmrt_adamw_t set up by uvmrt_adamw_init");
    uvmrt_adamw_init(full);
    if (UVMRT__ABI_READ(&stderr_log, fn, uvmrt_adamw_t, given, full) != UVMRT_OK)
        return UVMRT_ERR_INVALID;
    const uvmrt_adamw_t *hp = full;
    if (!(isfinite(hp->lr) && hp->lr >= 0.0))
        return bad(fn, "lr %g: expected a finite value >= 0", hp->lr);
    if (!(hp->beta1 >= 0.0 && hp->beta1 < 1.0))
        return bad(fn, "beta1 %g: expected a value in [0, 1)", hp->beta1);
    if (!(hp->beta2 >= 0.0 && hp->beta2 < 1.0))
        return bad(fn, "beta2 %g: expected a value in [0, 1)", hp->beta2);
    if (!(isfinite(hp->eps) && hp->eps >= 0.0))
        return bad(fn, "eps %g: expected a finite value >= 0", hp->eps);
    if (!(isfinite(hp->weight_decay) && hp->weight_decay >= 0.0))
        return bad(fn, "weight_decay %g: expected a finite value >= 0", hp->weight_decay);
    if (hp->step == 0)
        return bad(fn, "step 0: expected the update's number, >= 1");
    if (!isfinite(hp->grad_scale))
        return bad(fn, "grad_scale %g: expected a finite value", hp->grad_scale);
    if (hp->threads < 0)
        return bad(fn, "threads %d: expected >= 0 (0: the CPUs the calling thread may run on)",
                   hp->threads);
    if (hp->order != UVMRT_ADAMW_ORDER_UVMRT && hp->order != UVMRT_ADAMW_ORDER_TORCH)
        return bad(fn,
                   "order %d: expected UVMRT_ADAMW_ORDER_UVMRT (%d) or UVMRT_ADAMW_ORDER_TORCH (%d)",
                   hp->order, UVMRT_ADAMW_ORDER_UVMRT, UVMRT_ADAMW_ORDER_TORCH);
    if (n > 0 && (w == NULL || m == NULL || v == NULL || g == NULL))
        return bad(fn, "%s is NULL with n = %zu: expected %zu floats",
                   w == NULL ? "w" : m == NULL ? "m" : v == NULL ? "v" : "g", n, n);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_adamw_cpu(const uvmrt_adamw_t *given, float *w, float *m, float *v,
                               const float *g, size_t n, uint16_t *half_out) {
    uvmrt_adamw_t full;
    uvmrt_status_t st = read_args("uvmrt_adamw_cpu", given, &full, w, m, v, g, n);
    if (st != UVMRT_OK || n == 0)
        return st;
    const uvmrt_adamw_t *hp = &full;
    uvmrt__adamw_coef_t c = uvmrt__adamw_coef_make(hp->lr, hp->beta1, hp->beta2, hp->eps,
                                                   hp->weight_decay, hp->step, hp->grad_scale);
    adamw_isa_t isa = isa_for_order(hp->order);
    size_t chunks = (n + CHUNK - 1) / CHUNK;
    if (chunks == 1) { /* no team for one work item */
        adamw_chunk(isa, hp->order, w, m, v, g, half_out, n, &c);
        return UVMRT_OK;
    }
#ifdef _OPENMP
    int nt = hp->threads > 0 ? hp->threads : threads_default();
    if ((size_t)nt > chunks)
        nt = (int)chunks;
#pragma omp parallel for schedule(dynamic) num_threads(nt)
    for (long k = 0; k < (long)chunks; k++) {
        size_t lo = (size_t)k * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        adamw_chunk(isa, hp->order, w + lo, m + lo, v + lo, g + lo,
                    half_out ? half_out + lo : NULL, len, &c);
    }
#else
    (void)threads_default;
    adamw_chunk(isa, hp->order, w, m, v, g, half_out, n, &c);
#endif
    return UVMRT_OK;
}

#ifdef UVMRT_HAVE_CUDA
/* adamw_kernel.cu: queues the kernels on stream; the launch's cudaError_t (0: queued). */
int uvmrt__adamw_gpu_launch(int torch_order, const uvmrt__adamw_coef_t *coef, float *w, float *m,
                            float *v, const float *g, size_t n, uint16_t *half_out,
                            const float *scale_dev, void *stream);
const char *uvmrt__adamw_gpu_error_string(int err);
#endif

uvmrt_status_t uvmrt_adamw_gpu(const uvmrt_adamw_t *given, float *w, float *m, float *v,
                               const float *g, size_t n, uint16_t *half_out,
                               const float *grad_scale_dev, uvmrt_stream_t stream) {
    uvmrt_adamw_t full;
    uvmrt_status_t st = read_args("uvmrt_adamw_gpu", given, &full, w, m, v, g, n);
    if (st != UVMRT_OK || n == 0)
        return st;
#ifdef UVMRT_HAVE_CUDA
    uvmrt__adamw_coef_t c = uvmrt__adamw_coef_make(full.lr, full.beta1, full.beta2, full.eps,
                                                   full.weight_decay, full.step, full.grad_scale);
    int err = uvmrt__adamw_gpu_launch(full.order == UVMRT_ADAMW_ORDER_TORCH, &c, w, m, v, g, n,
                                      half_out, grad_scale_dev, (void *)stream);
    if (err == 0)
        return UVMRT_OK;
    /* cudaErrorNoDevice (100) and cudaErrorInsufficientDriver (35): no GPU to run on */
    LOG_ERROR(&stderr_log, "uvmrt_adamw_gpu: the kernel's launch failed for %zu elements: %s (CUDA error %d)",
              n, uvmrt__adamw_gpu_error_string(err), err);
    return err == 100 || err == 35 ? UVMRT_ERR_NO_DEVICE : UVMRT_ERR_BACKEND;
#else
    (void)half_out, (void)grad_scale_dev, (void)stream;
    LOG_ERROR(&stderr_log, "uvmrt_adamw_gpu: this libuvmrt was built without CUDA "
                           "(configure found no CUDA toolkit): use uvmrt_adamw_cpu");
    return UVMRT_ERR_UNSUPPORTED;
#endif
}
