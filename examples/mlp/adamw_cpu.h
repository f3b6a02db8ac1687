/*
 * adamw_cpu.h -- uvmrt-mlp's AdamW on the CPU: AVX-512, AVX2 (+F16C) or scalar,
 * chosen at run time, OpenMP threads, optionally pinned near the GPU.
 *
 * Every path computes bit-for-bit what mlp_adamw_elem() (mlp_math.h) computes, so
 * results do not depend on the machine or on the thread count.
 */
#ifndef UVMRT_MLP_ADAMW_CPU_H
#define UVMRT_MLP_ADAMW_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "mlp_math.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mlp_isa { MLP_ISA_SCALAR = 0, MLP_ISA_AVX2 = 1, MLP_ISA_AVX512 = 2 } mlp_isa_t;
#define MLP_ISA_COUNT 3

/* "scalar", "avx2", "avx512". */
const char *mlp_isa_name(mlp_isa_t isa);
/* 1 when this CPU (and this build) can run the path. */
int mlp_isa_available(mlp_isa_t isa);
/* The widest available path. */
mlp_isa_t mlp_isa_best(void);

/* One AdamW update of n elements with the given path (which must be available):
 * w, m, v (n,) fp32 updated in place from g (n,) fp32; when half is not NULL it
 * receives w's new value rounded to `kind` (n,) 16-bit patterns. Runs on the
 * calling thread's OpenMP team (parallel inside). */
void mlp_adamw_cpu(mlp_isa_t isa, float *w, float *m, float *v, const float *g, uint16_t *half,
                   mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef);

/* The reference: one element at a time, single thread (for the tests). */
void mlp_adamw_scalar_ref(float *w, float *m, float *v, const float *g, uint16_t *half,
                          mlp_half_kind_t kind, size_t n, const mlp_adamw_coef_t *coef);

/* 1 when any of the n floats is inf or NaN (fp16 loss scaling on the CPU path). */
int mlp_nonfinite_cpu(const float *g, size_t n);

/* Restricts the calling thread (and the OpenMP threads it creates later) to the
 * CPUs of NUMA node `node`. Returns 0, or -1 (with a reason in *why) when libnuma
 * is missing from the build, NUMA is unavailable, or node is < 0. */
int mlp_cpu_pin_node(int node, const char **why);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_MLP_ADAMW_CPU_H */
