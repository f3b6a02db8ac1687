/*
 * demo.h -- the host (CPU) half of uvmrt-demo's synthetic network.
 *
 * The demo trains L layers of four float32 tensors each (weight W, saved activation
 * A, gradient G, optimizer state O, all of n elements) plus one input X. These are
 * the CPU versions of its arithmetic, used to initialise the tensors on the host and,
 * on the sim backend with small data, to do each layer's work so that checksums can
 * be verified. demo_kernels.cu holds the same arithmetic for the GPU.
 *
 *   forward  i:  A_i = 0.5*A_{i-1} + 0.5*W_i              (A_{-1} = X)
 *   backward i:  G_i = 0.5*G_{i+1} + 0.25*A_i*W_i         (G_L := A_{L-1})
 *   optimizer i: O_i = 0.9*O_i + 0.1*G_i;  W_i = W_i - 0.01*O_i
 *
 * All functions are OpenMP-parallel when compiled with OpenMP, and give the same
 * result with any number of threads.
 */
#ifndef UVMRT_DEMO_H
#define UVMRT_DEMO_H

#include <stddef.h>
#include <stdint.h>

/* The value at index of tensor tensor_id for a seed, in [-1, 1): a hash, so every
 * element can be computed independently (and in parallel) and a run is repeatable. */
float demo_hash_uniform(uint64_t seed, uint64_t tensor_id, uint64_t index);

/* p[0..n) = demo_hash_uniform(seed, tensor_id, index). */
void demo_cpu_fill_hash(float *p, size_t n, uint64_t seed, uint64_t tensor_id);
/* p[0..n) = 0. */
void demo_cpu_fill_zero(float *p, size_t n);

/* One layer call each; every array has n elements. For the top layer's backward the
 * caller passes g_next = a. The arithmetic is done once whatever --work says: the
 * result is the same, and on the sim backend the time is the model's, not the CPU's. */
void demo_cpu_forward(float *a, const float *a_prev, const float *w, size_t n);
void demo_cpu_backward(float *g, const float *g_next, const float *a, const float *w,
                       size_t n);
void demo_cpu_optimizer(float *w, float *o, const float *g, size_t n);

/* Sum of the 32-bit words of p[0..bytes) as a uint64 (bytes a multiple of 4). An
 * integer sum does not depend on the order, so GPU and CPU sums of the same bytes agree. */
uint64_t demo_cpu_checksum(const void *p, size_t bytes);

#endif /* UVMRT_DEMO_H */
