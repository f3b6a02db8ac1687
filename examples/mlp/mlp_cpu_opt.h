/*
 * mlp_cpu_opt.h -- uvmrt-mlp's CPU optimizer thread (--optimizer-on cpu).
 *
 * For each step s and each block i in the step's top K (from the top down), the thread
 * waits until backward i of step s has been recorded (a CUDA event after its
 * kernels), syncs on that event, runs AdamW on the block's host-resident master
 * weights and moments (adamw_cpu.c, pinned near the GPU) and writes the new working
 * copy Wh_i. With fp16 it first waits for block 0 (the whole backward), since an
 * inf anywhere skips the step. The thread makes no uvmrt calls (a context is
 * driven by one thread): the block pointers are read on the main thread.
 * Built with the GPU side (CUDA events).
 */
#ifndef UVMRT_MLP_CPU_OPT_H
#define UVMRT_MLP_CPU_OPT_H

#include "mlp.h"

typedef struct mlp_cpu_opt mlp_cpu_opt_t;

/* Starts the thread for run (its net allocated and initialised); found_inf: (S,)
 * mapped host flags of the fp16 inf check; stage_flag: (L,) mapped host memory the
 * thread sets to s + 1 once block i's update of step s is done (NULL: none; when the
 * thread stops or fails it sets every flag past any step, so no GPU wait hangs).
 * Fails the run on error. */
mlp_cpu_opt_t *mlp_cpu_opt_start(mlp_run_t *run, volatile int *found_inf, unsigned *stage_flag);
/* Before step s: the loss scale the step's gradients carry, and K: the step updates
 * blocks L-K..L-1 here (K may change between steps, 0 included; the caller has
 * waited for the previous step's updates of the blocks that leave). */
void mlp_cpu_opt_step(mlp_cpu_opt_t *c, int s, double scale, int K);
/* After backward i of step s is enqueued on stream: records its event and wakes
 * the thread. */
void mlp_cpu_opt_recorded(mlp_run_t *run, mlp_cpu_opt_t *c, int i, int s, uvmrt_stream_t stream);
/* Waits until the update of block i for step s has finished (fails the run when
 * the thread failed); returns at once when step s does not update block i here. */
void mlp_cpu_opt_wait_done(mlp_run_t *run, mlp_cpu_opt_t *c, int i, int s);
/* Seconds spent in AdamW so far (after mlp_cpu_opt_wait_done of the last step). */
double mlp_cpu_opt_busy_s(const mlp_cpu_opt_t *c);
/* Block i's seconds of AdamW in step s (the update, not the waits): 1 when that
 * update has finished and ran (not skipped) and is one of the last 4 steps' (*sec
 * set), else 0 (*sec 0). */
int mlp_cpu_opt_block_time(mlp_cpu_opt_t *c, int s, int i, double *sec);
/* Step s's seconds in AdamW and waiting for its backward's events (after
 * mlp_cpu_opt_wait_done of that step's last block). */
void mlp_cpu_opt_step_times(const mlp_cpu_opt_t *c, int s, double *adamw_s, double *wait_s);
/* Stops and joins the thread and frees it. NULL: no-op. */
void mlp_cpu_opt_stop(mlp_cpu_opt_t *c);

#endif /* UVMRT_MLP_CPU_OPT_H */
