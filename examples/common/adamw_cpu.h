/*
 * adamw_cpu.h -- what uvmrt-mlp and uvmrt-gpt add around the library's CPU AdamW
 * (uvmrt_adamw_cpu(3)): the name of the path it takes, the inf/NaN check of fp16
 * loss scaling, and pinning the optimizer's thread near the GPU.
 */
#ifndef UVMRT_EXAMPLES_ADAMW_CPU_H
#define UVMRT_EXAMPLES_ADAMW_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "train_math.h"
#include "uvmrt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mlp_isa { MLP_ISA_SCALAR = 0, MLP_ISA_AVX2 = 1, MLP_ISA_AVX512 = 2 } mlp_isa_t;
#define MLP_ISA_COUNT 3

/* "scalar", "avx2", "avx512". */
const char *mlp_isa_name(mlp_isa_t isa);
/* The path uvmrt_adamw_cpu takes on this machine (uvmrt_adamw_isa()). */
mlp_isa_t mlp_isa_best(void);

/* The CPU AdamW's threads: OpenMP's default team (OMP_NUM_THREADS, else the CPUs the
 * program started with), the team the trainers have always used; 0 without OpenMP. */
int mlp_cpu_threads(void);

/* uvmrt_adamw_cpu's hyperparameters for uvmrt-mlp's AdamW: the coefficients are
 * mlp_adamw_coef_make(lr, wd, t, loss_scale)'s, so the CPU's bits equal the GPU's. */
uvmrt_adamw_t mlp_adamw_hp(double lr, double wd, long t, double loss_scale);

/* 1 when any of the n floats is inf or NaN (fp16 loss scaling on the CPU path). */
int mlp_nonfinite_cpu(const float *g, size_t n);

/* Restricts the calling thread (and the threads it creates later, uvmrt_adamw_cpu's
 * among them) to the CPUs of NUMA node `node`. Returns 0, or -1 (with a reason in
 * *why) when libnuma is missing from the build, NUMA is unavailable, or node is < 0. */
int mlp_cpu_pin_node(int node, const char **why);

#ifdef __cplusplus
}
#endif
#endif /* UVMRT_EXAMPLES_ADAMW_CPU_H */
