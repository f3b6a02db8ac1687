/*
 * demo_cpu.c -- uvmrt-demo's arithmetic on the CPU (see demo.h), with OpenMP.
 *
 * Used to initialise the tensors on the host before the first step (so their pages
 * start on the host, where uvmrt's accounting says they are), and on the sim backend
 * to do each layer's work when the data is small enough to check.
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "demo.h"

/* Without OpenMP the loops simply run on one thread. */
#ifdef _OPENMP
#define DEMO_OMP_FOR _Pragma("omp parallel for schedule(static)")
#define DEMO_OMP_FOR_SUM _Pragma("omp parallel for schedule(static) reduction(+ : sum)")
#else
#define DEMO_OMP_FOR
#define DEMO_OMP_FOR_SUM
#endif

/* ----------------------------------------------------------------------------
 * initialisation */

/* splitmix64's finaliser: a bijection of 64-bit words with good avalanche. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

float demo_hash_uniform(uint64_t seed, uint64_t tensor_id, uint64_t index) {
    uint64_t h = mix64(seed ^ 0x9e3779b97f4a7c15ull);
    h = mix64(h ^ mix64(tensor_id + 0x632be59bd9b4e019ull));
    h = mix64(h ^ index);
    /* the top 24 bits give u in [0, 1) exactly representable as a float; 2u - 1 too */
    float u = (float)(h >> 40) * (1.0f / 16777216.0f);
    return 2.0f * u - 1.0f;
}

void demo_cpu_fill_hash(float *p, size_t n, uint64_t seed, uint64_t tensor_id) {
    DEMO_OMP_FOR
    for (size_t i = 0; i < n; i++)
        p[i] = demo_hash_uniform(seed, tensor_id, i);
}

void demo_cpu_fill_zero(float *p, size_t n) {
    DEMO_OMP_FOR
    for (size_t i = 0; i < n; i++)
        p[i] = 0.0f;
}

/* ----------------------------------------------------------------------------
 * layer work (the same formulas as demo_kernels.cu) */

void demo_cpu_forward(float *a, const float *a_prev, const float *w, size_t n) {
    DEMO_OMP_FOR
    for (size_t i = 0; i < n; i++)
        a[i] = 0.5f * a_prev[i] + 0.5f * w[i];
}

void demo_cpu_backward(float *g, const float *g_next, const float *a, const float *w,
                       size_t n) {
    DEMO_OMP_FOR
    for (size_t i = 0; i < n; i++)
        g[i] = 0.5f * g_next[i] + 0.25f * a[i] * w[i];
}

void demo_cpu_optimizer(float *w, float *o, const float *g, size_t n) {
    DEMO_OMP_FOR
    for (size_t i = 0; i < n; i++) {
        float m = 0.9f * o[i] + 0.1f * g[i];
        o[i] = m;
        w[i] = w[i] - 0.01f * m;
    }
}

/* ----------------------------------------------------------------------------
 * checksum */

uint64_t demo_cpu_checksum(const void *p, size_t bytes) {
    const uint32_t *words = (const uint32_t *)p; /* (bytes/4,) */
    size_t n = bytes / sizeof(uint32_t);
    uint64_t sum = 0;
    DEMO_OMP_FOR_SUM /* over a variable named sum */
    for (size_t i = 0; i < n; i++)
        sum += words[i];
    return sum;
}
