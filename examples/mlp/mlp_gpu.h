/*
 * mlp_gpu.h -- uvmrt-mlp's GPU side, behind one interface so the model code in
 * mlp.c has no #ifdef: mlp_gpu.c (with CUDA and cuBLAS) or mlp_nogpu.c (without).
 *
 * Every function but mlp_gpu_open takes a run whose run->gpu is not NULL: mlp.c
 * calls them only when the GPU does the arithmetic. Errors fail the run
 * (run_fail: message, cleanup, exit 1).
 */
#ifndef UVMRT_MLP_GPU_H
#define UVMRT_MLP_GPU_H

#include <stdio.h>

#include "mlp.h"

/* NULL when this build has the GPU side; otherwise why not (for messages). */
extern const char *const mlp_gpu_missing;

/* The cuda backend's side of a run, before the tensors are allocated: refuses to
 * allocate more than the GPU has free less a safety margin, then the stream,
 * cuBLAS and the trainer's device buffers. Sets run->stream and
 * run->device_workspace_bytes and returns the GPU state for run->gpu. */
mlp_gpu_t *mlp_gpu_open(mlp_run_t *run);
/* After the tensors are allocated: initialises X, W, Wh, m, v on the host, makes the
 * teacher's targets Y on the GPU, starts the CPU optimizer (--optimizer-on cpu). */
void mlp_gpu_init(mlp_run_t *run);
/* Before step s: hands the loss scale to the CPU optimizer. */
void mlp_gpu_step_begin(mlp_run_t *run, int s);
/* Before forward i of step s is opened: waits for the CPU's update of block i from
 * step s-1 (nothing for a block updated on the GPU). */
void mlp_gpu_forward_wait(mlp_run_t *run, int i, int s);
/* Whether this GPU and driver can run the staged half copies (stream memory
 * operations: a stream waits on the GPU for the CPU thread's flag); 0 also when
 * MLP_STAGE=0 asks for the copy in the forward instead. */
int mlp_gpu_can_stage(void);
/* Staged, before the half copy of block i's update of step s is opened: the copy's
 * stream waits (on the GPU) until the CPU thread has finished that update. */
void mlp_gpu_stage_wait(mlp_run_t *run, int i, int s);
/* Wh = half(W) of block i on the copy's stream (inside its layer call). */
void mlp_gpu_stage_half(mlp_run_t *run, int i);
/* The kernels of one layer call, enqueued on run->stream between uvmrt_layer_begin
 * and uvmrt_layer_end (forward also takes the loss at the last block; backward
 * hands block i to the CPU optimizer). */
/* Wh = half(W) of block i now (outside a step; a block whose AdamW moves back to the GPU). */
void mlp_gpu_half_from_master(mlp_run_t *run, int i);
void mlp_gpu_forward(mlp_run_t *run, int i, int s);
void mlp_gpu_backward(mlp_run_t *run, int i, int s);
void mlp_gpu_optimizer(mlp_run_t *run, int i, int s);
/* After step s has ended (its stream is done): its loss, and whether fp16 found
 * inf/NaN gradients (the step is then skipped). */
double mlp_gpu_step_loss(const mlp_run_t *run, int s);
int mlp_gpu_found_inf(const mlp_run_t *run, int s);
/* Waits for the CPU optimizer's updates of step s (its blocks: the current K), e.g.
 * before the K changes; nothing without a CPU optimizer or for s < 0. */
void mlp_gpu_cpu_wait(mlp_run_t *run, int s);
/* After the last step: waits for the CPU optimizer's last updates. */
void mlp_gpu_finish(mlp_run_t *run);
/* Step s's CPU optimizer times (after mlp_gpu_finish): ms in AdamW and ms waiting
 * for the backward. 0 when no CPU optimizer ran, 1 otherwise. */
int mlp_gpu_cpu_times(const mlp_run_t *run, int s, double *adamw_ms, double *wait_ms);
/* Block i's AdamW time in step s on the CPU optimizer, in ns: 1 when it is known
 * (that update finished and ran), 0 otherwise. */
int mlp_gpu_cpu_block_ns(const mlp_run_t *run, int s, int i, uint64_t *ns);
/* One line about the CPU optimizer (time per step, path), when it ran. */
void mlp_gpu_summary(const mlp_run_t *run, FILE *out);
/* Stops the CPU optimizer, destroys run->ctx (it may still refer to the stream, and
 * the thread uses its tensors: so in this order), then frees the GPU state;
 * run->gpu becomes NULL. run->gpu NULL: no-op. */
void mlp_gpu_close(mlp_run_t *run);

#endif /* UVMRT_MLP_GPU_H */
