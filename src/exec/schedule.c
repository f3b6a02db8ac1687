/*
 * schedule.c -- the scheduler's state as the other modules change it (schedule.h):
 * the plan dropped when what it was built for changed (tensors added or freed, the
 * plan budget, the device bytes held outside uvmrt), and the budget the policy plans
 * with. It calls nothing of the executor's other files, so tensor.c can tell the
 * scheduler of its changes without a call circle through the policy.
 */
#include <stdlib.h>

#include "exec.h"

void uvmrt__plan_drop(uvmrt_context_t *ctx)
{
    if (!ctx->sched.have_plan) return;
    uvmrt__plan_free(&ctx->sched.plan);
    ctx->sched.have_plan = 0;
    free(ctx->sched.plan_off_gpu);
    ctx->sched.plan_off_gpu = NULL;
    ctx->sched.plan_host_bytes = 0;
}

uint64_t uvmrt__plan_budget(const uvmrt_context_t *ctx)
{
    uint64_t b = ctx->sched.plan_budget;
    b = b > 0 && b < ctx->budget ? b : ctx->budget;
    return b > ctx->sched.external_bytes ? b - ctx->sched.external_bytes : 0;
}

void uvmrt__sched_set_plan_budget(uvmrt_context_t *ctx, uint64_t bytes)
{
    uint64_t v = bytes < ctx->budget ? bytes : 0;
    if (v != ctx->sched.plan_budget) {
        ctx->sched.plan_budget = v;
        uvmrt__plan_drop(ctx);
    }
}

void uvmrt__sched_set_external_bytes(uvmrt_context_t *ctx, uint64_t bytes)
{
    if (bytes != ctx->sched.external_bytes) {
        ctx->sched.external_bytes = bytes;
        uvmrt__plan_drop(ctx);
    }
}

uint64_t uvmrt__plan_host_bytes(const uvmrt_context_t *ctx)
{
    return ctx->sched.have_plan ? ctx->sched.plan_host_bytes + ctx->choice.host_external_bytes : 0;
}

void uvmrt__sched_tensors_added(uvmrt_context_t *ctx)
{
    free(ctx->sched.scratch_resident); /* sized by the tensor count: made again when needed */
    ctx->sched.scratch_resident = NULL;
    uvmrt__plan_drop(ctx);
}

void uvmrt__sched_tensor_freed(uvmrt_context_t *ctx)
{
    ctx->sched.have_record = 0;
    uvmrt__plan_drop(ctx);
}
