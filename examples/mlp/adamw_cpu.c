/*
 * adamw_cpu.c -- AdamW on the CPU for uvmrt-mlp --optimizer-on cpu.
 *
 * Three paths over the same arithmetic as mlp_adamw_elem(): AVX-512F, AVX2 with
 * F16C, and scalar. Each rounds every product and sum on its own (no FMA: this
 * file is compiled with -ffp-contract=off and the SIMD paths use separate
 * mul/add), and sqrt and division are correctly rounded in every path, so all
 * three give the same bits as each other and as the GPU kernel. The SIMD paths
 * are compiled with __attribute__((target)) and chosen at run time, so one
 * binary runs on any x86-64; other machines get the scalar path.
 *
 * Work is split into fixed chunks over an OpenMP team: each element is computed
 * once by one thread, so the thread count never changes the result. The chunks
 * are handed out as threads free up (dynamic): in a trainer the team shares the
 * cores with the thread that launches the GPU's work, and a static split waits
 * for whichever thread that slowed.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef UVMRT_HAVE_NUMA
#include <numa.h>
#endif

#include "adamw_cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define MLP_X86 1
#include <cpuid.h>
#include <immintrin.h>
#endif

static const size_t CHUNK = 1u << 16; /* elements per OpenMP work item; a multiple of 16 */

/* ----------------------------------------------------------------------------
 * scalar */

static void adamw_scalar(float *w, float *m, float *v, const float *g, uint16_t *half,
                         mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *c) {
    for (size_t i = 0; i < n; i++) {
        mlp_adamw_elem(&w[i], &m[i], &v[i], g[i], c);
        if (half)
            half[i] = mlp_f32_to_half(w[i], kind);
    }
}

/* ----------------------------------------------------------------------------
 * AVX2 + F16C: 8 floats at a time */

#ifdef MLP_X86
__attribute__((target("avx2,f16c")))
static void adamw_avx2(float *w, float *m, float *v, const float *g, uint16_t *half,
                       mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *c) {
    const __m256 b1 = _mm256_set1_ps(c->b1), omb1 = _mm256_set1_ps(c->omb1);
    const __m256 b2 = _mm256_set1_ps(c->b2), omb2 = _mm256_set1_ps(c->omb2);
    const __m256 step = _mm256_set1_ps(c->step_size), isb = _mm256_set1_ps(c->inv_sqrt_bc2);
    const __m256 eps = _mm256_set1_ps(c->eps), decay = _mm256_set1_ps(c->decay);
    const __m256 iscale = _mm256_set1_ps(c->inv_scale);
    const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x40);
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
        if (half == NULL)
            continue;
        __m128i h;
        if (kind == MLP_BF16) {
            __m256i u = _mm256_castps_si256(w2);
            __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
            __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), lsb), 16);
            __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(w2, w2, _CMP_UNORD_Q));
            r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet), nan);
            __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
            h = _mm256_castsi256_si128(p);
        } else {
            h = _mm256_cvtps_ph(w2, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        _mm_storeu_si128((__m128i *)(half + i), h);
    }
    adamw_scalar(w + i, m + i, v + i, g + i, half ? half + i : NULL, kind, n - i, c);
}

/* ----------------------------------------------------------------------------
 * AVX-512F: 16 floats at a time */

__attribute__((target("avx512f")))
static void adamw_avx512(float *w, float *m, float *v, const float *g, uint16_t *half,
                         mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *c) {
    const __m512 b1 = _mm512_set1_ps(c->b1), omb1 = _mm512_set1_ps(c->omb1);
    const __m512 b2 = _mm512_set1_ps(c->b2), omb2 = _mm512_set1_ps(c->omb2);
    const __m512 step = _mm512_set1_ps(c->step_size), isb = _mm512_set1_ps(c->inv_sqrt_bc2);
    const __m512 eps = _mm512_set1_ps(c->eps), decay = _mm512_set1_ps(c->decay);
    const __m512 iscale = _mm512_set1_ps(c->inv_scale);
    const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
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
        if (half == NULL)
            continue;
        __m256i h;
        if (kind == MLP_BF16) {
            __m512i u = _mm512_castps_si512(w2);
            __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, round), lsb), 16);
            __mmask16 nan = _mm512_cmp_ps_mask(w2, w2, _CMP_UNORD_Q);
            r = _mm512_mask_blend_epi32(nan, r, _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet));
            h = _mm512_cvtepi32_epi16(r);
        } else {
            h = _mm512_cvtps_ph(w2, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        }
        _mm256_storeu_si256((__m256i *)(half + i), h);
    }
    adamw_scalar(w + i, m + i, v + i, g + i, half ? half + i : NULL, kind, n - i, c);
}
#endif /* MLP_X86 */

/* ----------------------------------------------------------------------------
 * dispatch */

const char *mlp_isa_name(mlp_isa_t isa) {
    switch (isa) {
    case MLP_ISA_SCALAR: return "scalar";
    case MLP_ISA_AVX2: return "avx2";
    case MLP_ISA_AVX512: return "avx512";
    }
    return "?";
}

#ifdef MLP_X86
/* F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does
 * not know "f16c", gcc's does; <cpuid.h> works with both. */
static int cpu_has_f16c(void) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

int mlp_isa_available(mlp_isa_t isa) {
    switch (isa) {
    case MLP_ISA_SCALAR: return 1;
#ifdef MLP_X86
    case MLP_ISA_AVX2:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && cpu_has_f16c();
    case MLP_ISA_AVX512:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f");
#else
    case MLP_ISA_AVX2:
    case MLP_ISA_AVX512: return 0;
#endif
    }
    return 0;
}

mlp_isa_t mlp_isa_best(void) {
    if (mlp_isa_available(MLP_ISA_AVX512))
        return MLP_ISA_AVX512;
    if (mlp_isa_available(MLP_ISA_AVX2))
        return MLP_ISA_AVX2;
    return MLP_ISA_SCALAR;
}

void mlp_adamw_cpu(mlp_isa_t isa, float *w, float *m, float *v, const float *g, uint16_t *half,
                   mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef) {
    long chunks = (long)((n + CHUNK - 1) / CHUNK);
#pragma omp parallel for schedule(dynamic)
    for (long k = 0; k < chunks; k++) {
        size_t lo = (size_t)k * CHUNK, len = n - lo < CHUNK ? n - lo : CHUNK;
        uint16_t *h = half ? half + lo : NULL;
        switch (isa) {
#ifdef MLP_X86
        case MLP_ISA_AVX512:
            adamw_avx512(w + lo, m + lo, v + lo, g + lo, h, kind, len, coef);
            break;
        case MLP_ISA_AVX2:
            adamw_avx2(w + lo, m + lo, v + lo, g + lo, h, kind, len, coef);
            break;
#endif
        default:
            adamw_scalar(w + lo, m + lo, v + lo, g + lo, h, kind, len, coef);
            break;
        }
    }
}

void mlp_adamw_scalar_ref(float *w, float *m, float *v, const float *g, uint16_t *half,
                          mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef) {
    adamw_scalar(w, m, v, g, half, kind, n, coef);
}

int mlp_nonfinite_cpu(const float *g, size_t n) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (size_t i = 0; i < n; i++)
        bad |= (mlp_f32_bits(g[i]) & 0x7f800000u) == 0x7f800000u;
    return bad;
}

int mlp_cpu_pin_node(int node, const char **why) {
#ifdef UVMRT_HAVE_NUMA
    if (node < 0) {
        *why = "the GPU reports no host NUMA node";
        return -1;
    }
    if (numa_available() < 0) {
        *why = "NUMA is not available on this machine";
        return -1;
    }
    if (numa_run_on_node(node) != 0) {
        *why = "numa_run_on_node failed";
        return -1;
    }
    return 0;
#else
    (void)node;
    *why = "built without libnuma";
    return -1;
#endif
}
