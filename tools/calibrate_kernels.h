/*
 * calibrate_kernels.h -- uvmrt-calibrate's GPU kernels behind extern "C"
 * launchers (the host code is plain C). Each launcher checks its launch and
 * returns the CUDA error; it does not wait for the kernel.
 */
#ifndef UVMRT_CALIBRATE_KERNELS_H
#define UVMRT_CALIBRATE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Reads every byte of p (bytes: a multiple of 16) with wide loads spread over the
 * whole GPU; *sink (device memory, one value) is written only in the unlikely case
 * that the data's XOR is a magic value, so the loads cannot be optimised away. */
cudaError_t calib_read(const void *p, size_t bytes, unsigned long long *sink, int sms, cudaStream_t s);
/* Writes every byte of p (a multiple of 16) with wide stores. */
cudaError_t calib_write(void *p, size_t bytes, unsigned value, int sms, cudaStream_t s);
/* n bf16 values (bit patterns), pseudo-random in [-1, 1), from seed. */
cudaError_t calib_fill_bf16(uint16_t *p, size_t n, unsigned seed, int sms, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
