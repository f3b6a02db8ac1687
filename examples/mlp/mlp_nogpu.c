/*
 * mlp_nogpu.c -- uvmrt-mlp's GPU side in a build without CUDA or cuBLAS (see
 * mlp_gpu.h): opening it fails the run with the reason; run->gpu then never
 * exists, so the other functions are never reached and do nothing.
 */
#include <stdio.h>

#include "mlp_gpu.h"

const char *const mlp_gpu_missing = PROG " was built without CUDA and cuBLAS";

mlp_gpu_t *mlp_gpu_open(mlp_run_t *run) {
    run_fail(run, "the cuda backend was selected (UVMRT_BACKEND?), but %s", mlp_gpu_missing);
}

void mlp_gpu_init(mlp_run_t *run) { (void)run; }
void mlp_gpu_step_begin(mlp_run_t *run, int s) { (void)run, (void)s; }
void mlp_gpu_forward_wait(mlp_run_t *run, int i, int s) { (void)run, (void)i, (void)s; }
void mlp_gpu_half_from_master(mlp_run_t *run, int i) { (void)run, (void)i; }
int mlp_gpu_can_stage(void) { return 0; }
void mlp_gpu_stage_wait(mlp_run_t *run, int i, int s) { (void)run, (void)i, (void)s; }
void mlp_gpu_stage_half(mlp_run_t *run, int i) { (void)run, (void)i; }
void mlp_gpu_forward(mlp_run_t *run, int i, int s) { (void)run, (void)i, (void)s; }
void mlp_gpu_backward(mlp_run_t *run, int i, int s) { (void)run, (void)i, (void)s; }
void mlp_gpu_optimizer(mlp_run_t *run, int i, int s) { (void)run, (void)i, (void)s; }
double mlp_gpu_step_loss(const mlp_run_t *run, int s) { (void)run, (void)s; return 0.0; }
int mlp_gpu_found_inf(const mlp_run_t *run, int s) { (void)run, (void)s; return 0; }
void mlp_gpu_cpu_wait(mlp_run_t *run, int s) { (void)run, (void)s; }
void mlp_gpu_finish(mlp_run_t *run) { (void)run; }
int mlp_gpu_cpu_times(const mlp_run_t *run, int s, double *adamw_ms, double *wait_ms) {
    (void)run, (void)s, (void)adamw_ms, (void)wait_ms;
    return 0;
}
int mlp_gpu_cpu_block_ns(const mlp_run_t *run, int s, int i, uint64_t *ns) {
    (void)run, (void)s, (void)i;
    *ns = 0;
    return 0;
}
void mlp_gpu_summary(const mlp_run_t *run, FILE *out) { (void)run, (void)out; }

void mlp_gpu_close(mlp_run_t *run) { (void)run; }
