/*
 * adamw_cpu.c -- see adamw_cpu.h. The AdamW itself is the library's
 * (uvmrt_adamw_cpu, src/api/adamw.c).
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef UVMRT_HAVE_NUMA
#include <numa.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "uvmrt.h"

#include "adamw_cpu.h"

const char *mlp_isa_name(mlp_isa_t isa) {
    switch (isa) {
    case MLP_ISA_SCALAR: return "scalar";
    case MLP_ISA_AVX2: return "avx2";
    case MLP_ISA_AVX512: return "avx512";
    }
    return "?";
}

mlp_isa_t mlp_isa_best(void) {
    const char *name = uvmrt_adamw_isa();
    for (int i = 0; i < MLP_ISA_COUNT; i++)
        if (strcmp(name, mlp_isa_name((mlp_isa_t)i)) == 0)
            return (mlp_isa_t)i;
    return MLP_ISA_SCALAR;
}

int mlp_cpu_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 0;
#endif
}

uvmrt_adamw_t mlp_adamw_hp(double lr, double wd, long t, double loss_scale) {
    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    hp.lr = lr;
    hp.beta1 = MLP_ADAMW_BETA1;
    hp.beta2 = MLP_ADAMW_BETA2;
    hp.eps = MLP_ADAMW_EPS;
    hp.weight_decay = wd;
    hp.step = (uint64_t)t;
    hp.grad_scale = 1.0 / loss_scale;
    hp.threads = mlp_cpu_threads();
    return hp;
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
