/*
 * context.c -- context lifecycle: params and environment into a configuration,
 * the backend opened, the budget resolved; layers declared.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "backend_select.h"
#include "faults.h"
#include "profile_file.h"
#include "hostmem.h"
#include "internal.h"
#include "monitor.h"
#include "steady.h"

/* uvmrt_params_t as libuvmrt.so.1's first header declared it (tests/abi/uvmrt-v0.1.0.h):
 * what the function uvmrt_params_init fills for programs built before the macro. */
#define PARAMS_SIZE_V1 offsetof(uvmrt_params_t, host_budget_bytes)

static void params_defaults(uvmrt_params_t *p);

void uvmrt_params_init_size(uvmrt_params_t *p, size_t size)
{
    if (p == NULL || size < sizeof p->struct_size) return;
    uvmrt_params_t d;
    params_defaults(&d);
    size_t known = size < sizeof d ? size : sizeof d;
    memcpy(p, &d, known);
    if (size > known) memset((char *)p + known, 0, size - known);
    p->struct_size = size; /* larger than this library's: uvmrt_context_create says so */
}

void(uvmrt_params_init)(uvmrt_params_t *p) { uvmrt_params_init_size(p, PARAMS_SIZE_V1); }

static void params_defaults(uvmrt_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->device = 0;
    p->backend = UVMRT_BACKEND_AUTO;
    p->profile = NULL; /* the table's default */
    p->policy = UVMRT_POLICY_PREFETCH;
    p->budget_bytes = 0;
    p->budget_reserve_bytes = 512ull << 20;
    p->discard_dead = 1;
    p->remote = 1;
    p->log_level = UVMRT_LOG_WARN;
    p->report = NULL;
    p->fault_stats = 1;
    p->trace = NULL;
}

static uvmrt_status_t resolve_budget(uvmrt_context_t *ctx)
{
    uint64_t free_b = 0, total_b = 0;
    uvmrt_status_t st = uvmrt__be_mem_info(ctx, &free_b, &total_b);
    if (st != UVMRT_OK) return st;
    if (ctx->cfg.budget_bytes == 0) {
        if (free_b <= ctx->cfg.budget_reserve_bytes) {
            LOG_ERROR(&ctx->log, "budget auto: free device memory (%llu bytes) is not above "
                                 "UVMRT_BUDGET_RESERVE (%llu bytes): expected a smaller reserve",
                      (unsigned long long)free_b, (unsigned long long)ctx->cfg.budget_reserve_bytes);
            return UVMRT_ERR_CONFIG;
        }
        ctx->budget = free_b - ctx->cfg.budget_reserve_bytes;
    } else {
        ctx->budget = ctx->cfg.budget_bytes;
        if (ctx->budget > free_b)
            LOG_WARN(&ctx->log, "budget %llu bytes is more than the device's free memory (%llu bytes): "
                                "the driver will evict on its own beyond that",
                     (unsigned long long)ctx->budget, (unsigned long long)free_b);
    }
    return UVMRT_OK;
}

/* auto: the machine's memory (a cgroup's limit counts) less the reserve (hostmem.h). */
static uvmrt_status_t resolve_host_budget(uvmrt_context_t *ctx)
{
    if (ctx->cfg.host_budget_bytes != 0) { /* UINT64_MAX: none, no limit (0) */
        ctx->host_budget = ctx->cfg.host_budget_bytes == UINT64_MAX ? 0 : ctx->cfg.host_budget_bytes;
        return UVMRT_OK;
    }
    if (ctx->cfg.backend == UVMRT_BACKEND_SIM) {
        ctx->host_budget = 0; /* the modelled machine is not this one: no limit unless one is set */
        return UVMRT_OK;
    }
    uint64_t total = 0;
    char source[64];
    if (uvmrt__host_memory(NULL, &total, source, sizeof source) != 0) {
        LOG_ERROR(&ctx->log, "host budget auto: /proc/meminfo has no MemTotal to read: set UVMRT_HOST_BUDGET "
                             "(a size such as 48G)");
        return UVMRT_ERR_CONFIG;
    }
    ctx->host_budget = total - uvmrt__host_reserve(total);
    LOG_INFO(&ctx->log, "host budget %.1f GiB: %s %.1f GiB less the reserve (10%%, at least 2 GiB)",
             ctx->host_budget / 1073741824.0, source, total / 1073741824.0);
    return UVMRT_OK;
}

/* The log of a context not made yet: the caller's log function, unless their
 * struct_size is a valid one that stops before it (a struct_size that is not valid,
 * such as 0 for a struct not set up, says nothing: the struct the caller declared has
 * every field of the first uvmrt_params_t, the log function among them). */
static uvmrt_log_t caller_log(const uvmrt_params_t *params)
{
    uvmrt_log_t log = {UVMRT_LOG_WARN, NULL, NULL};
    if (params == NULL) return log;
    size_t size = params->struct_size, log_end = offsetof(uvmrt_params_t, log_user) + sizeof params->log_user;
    if (size >= log_end || size < sizeof(size_t)) log = (uvmrt_log_t){params->log_level, params->log_fn, params->log_user};
    return log;
}

/* The step's tail, in its order (observer.h): the choice and the sampler read the
 * step's time; the faults' observer hands the new clock anchor to the record source
 * first (CUPTI reads its clock right after it), before the history collects the
 * copies and attributes the records; the record file writes the record; the history
 * keeps the step; the monitor publishes what the step left. */
static uvmrt_status_t add_observers(uvmrt_context_t *ctx)
{
    static const uvmrt_observer_t *const list[] = {&uvmrt__choice_observer, &uvmrt__faults_observer,
                                                   &uvmrt__record_observer, &uvmrt__history_observer,
                                                   &uvmrt__monitor_observer};
    uvmrt_status_t st = UVMRT_OK;
    for (size_t i = 0; i < sizeof list / sizeof list[0] && st == UVMRT_OK; i++) st = uvmrt__observer_add(ctx, list[i]);
    return st;
}

/* How uvmrt_choose makes its rehearsals' model contexts (choose.h). */
static const uvmrt_model_seam_t model_seam = {uvmrt__context_create_model, uvmrt_context_destroy};

/* model: a context for uvmrt_choose's rehearsals (choose.c): nothing published, reported,
 * recorded or traced, whatever the environment says. */
static uvmrt_status_t create(const uvmrt_params_t *params, const uvmrt_backend_ops_t *ops, int model,
                             uvmrt_context_t **out)
{
    uvmrt_log_t early = caller_log(params); /* no context yet */
    if (out == NULL) {
        LOG_ERROR(&early, "uvmrt_context_create: out is NULL: expected a uvmrt_context_t * to receive the context");
        return UVMRT_ERR_INVALID;
    }
    *out = NULL;
    /* The caller's params up to their struct_size; the fields a newer library added
     * take uvmrt_params_init's defaults. */
    uvmrt_params_t full;
    if (params != NULL) {
        uvmrt_params_init(&full);
        if (UVMRT__ABI_READ(&early, "uvmrt_context_create", uvmrt_params_t, params, &full) != UVMRT_OK)
            return UVMRT_ERR_INVALID;
        params = &full;
    }
    uvmrt_context_t *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL) return UVMRT_ERR_NOMEM;
    ctx->log.level = params ? params->log_level : UVMRT_LOG_WARN;
    if ((unsigned)ctx->log.level > UVMRT_LOG_DEBUG) ctx->log.level = UVMRT_LOG_WARN;
    ctx->log.fn = params ? params->log_fn : NULL;
    ctx->log.user = params ? params->log_user : NULL;
    uvmrt__sched_init(ctx);
    uvmrt__choice_set_model_seam(ctx, &model_seam);

    uvmrt_status_t st = add_observers(ctx);
    if (st == UVMRT_OK) st = uvmrt__config_resolve(&ctx->cfg, ctx->sources, params, &ctx->log);
    if (st != UVMRT_OK) goto fail;
    ctx->model = model;
    if (model) {
        ctx->cfg.monitor = 0;
        ctx->cfg.fault_stats = 0;
        snprintf(ctx->cfg.report, sizeof ctx->cfg.report, "none");
        snprintf(ctx->cfg.trace, sizeof ctx->cfg.trace, "none");
        snprintf(ctx->cfg.record, sizeof ctx->cfg.record, "none");
    }
    ctx->log.level = ctx->cfg.log_level;
    if ((st = uvmrt__outputs_check(ctx)) != UVMRT_OK) goto fail; /* before any work, not at the end */
    /* auto becomes cuda or sim (one notice when sim); an explicit cuda without a GPU fails. */
    if ((st = uvmrt__backend_select(&ctx->cfg, &ctx->log, &ops)) != UVMRT_OK)
        goto fail;
    if ((st = uvmrt__profile_resolve(&ctx->cfg, &ctx->log, &ctx->profile, &ctx->profile_owned)) != UVMRT_OK)
        goto fail;
    uvmrt_backend_config_t bcfg = {ctx->cfg.device, ctx->profile, &ctx->log};
    if ((st = uvmrt__be_open(ctx, ops, &bcfg)) != UVMRT_OK) goto fail;
    uvmrt__be_set_describer(ctx, uvmrt__describe_ptr);
    if ((st = resolve_budget(ctx)) != UVMRT_OK) goto fail;
    if ((st = resolve_host_budget(ctx)) != UVMRT_OK) goto fail;
    if ((st = uvmrt__exec_init(ctx)) != UVMRT_OK) goto fail;
    uvmrt__faults_open(ctx);
    LOG_INFO(&ctx->log, "context: backend %s, policy %s, budget %llu bytes", ops->name,
             uvmrt_policy_name(ctx->cfg.policy), (unsigned long long)ctx->budget);
    ctx->created = 1;
    uvmrt__monitor_open(ctx); /* a failure is a warning: the run goes on unmonitored */
    *out = ctx;
    return UVMRT_OK;
fail:
    uvmrt_context_destroy(ctx);
    return st;
}

uvmrt_status_t uvmrt__context_create_with(const uvmrt_params_t *params, const uvmrt_backend_ops_t *ops,
                                          uvmrt_context_t **out)
{
    return create(params, ops, 0, out);
}

uvmrt_status_t uvmrt_context_create(const uvmrt_params_t *params, uvmrt_context_t **out)
{
    return create(params, NULL, 0, out);
}

uvmrt_status_t uvmrt__context_create_model(const uvmrt_context_t *parent, uint64_t budget, uvmrt_log_fn log_fn,
                                           void *log_user, uvmrt_context_t **out)
{
    uvmrt_params_t p;
    uvmrt_params_init(&p);
    p.ignore_env = 1;
    p.backend = UVMRT_BACKEND_SIM;
    p.profile = uvmrt__profile_label(&parent->cfg, parent->profile); /* the model of the GPU the parent plans for */
    p.policy = parent->cfg.policy;
    p.budget_bytes = budget;
    p.host_budget_bytes = parent->host_budget ? parent->host_budget : UINT64_MAX; /* the parent's machine */
    p.discard_dead = parent->cfg.discard_dead;
    p.remote = parent->cfg.remote;
    /* the model's own notices (budget above the modelled device, ...) would repeat
     * once per rehearsal: errors only, to the caller's function */
    p.log_level = UVMRT_LOG_ERROR;
    p.log_fn = log_fn;
    p.log_user = log_user;
    p.fault_stats = 0;
    return create(&p, NULL, 1, out);
}

void uvmrt_context_destroy(uvmrt_context_t *ctx)
{
    if (ctx == NULL) return;
    if (ctx->be.state != NULL) {
        if (uvmrt__in_step(ctx)) LOG_WARN(&ctx->log, "context destroyed inside a step: the step is not counted");
        uvmrt__exec_fini(ctx); /* waits for copy streams, harvests timings */
        if (ctx->created) uvmrt__report_at_destroy(ctx); /* not for a create that failed */
        uvmrt__tier_close(ctx); /* write-backs waited for, the spill's files removed */
        uvmrt__tensors_release_all(ctx);
        uvmrt__events_close_streams(ctx);
        uvmrt__be_close(ctx);
    }
    uvmrt__sched_free(ctx); /* after the report: its memory summary reads the plan */
    uvmrt__layers_free(ctx);
    uvmrt__faults_close(ctx);
    uvmrt_profile_free(ctx->profile_owned);
    uvmrt__monitor_close(ctx);
    uvmrt__steady_free(ctx);
    uvmrt__choice_free(ctx);
    uvmrt__faults_free(ctx);
    uvmrt__stats_free(ctx);
    uvmrt__history_free(ctx);
    free(ctx);
}

void uvmrt_context_print_config(const uvmrt_context_t *ctx, FILE *out)
{
    if (ctx == NULL || out == NULL) return;
    fprintf(out, "uvmrt %s configuration:\n", uvmrt_version_string());
    uvmrt__config_print(&ctx->cfg, ctx->sources, out);
    fprintf(out, "  backend %s", ctx->be.ops->name);
    if (ctx->cfg.backend == UVMRT_BACKEND_SIM)
        fprintf(out, ", profile %s: %s", ctx->profile->name, ctx->profile->description);
    fprintf(out, "\n  budget %.3f GiB (%llu bytes)%s\n", (double)ctx->budget / (1u << 30),
            (unsigned long long)ctx->budget, ctx->cfg.budget_bytes == 0 ? ", auto: free memory minus reserve" : "");
    if (ctx->host_budget == 0)
        fprintf(out, "  host budget none (auto on sim: the modelled machine is not this one)\n");
    else
        fprintf(out, "  host budget %.3f GiB (%llu bytes)%s\n", (double)ctx->host_budget / (1u << 30),
                (unsigned long long)ctx->host_budget,
                ctx->cfg.host_budget_bytes == 0 ? ", auto: the machine's memory minus 10% (at least 2 GiB)" : "");
}

/* NULL gives the defaults (and the default profile), so callers need no checks. */
uvmrt_policy_t uvmrt_context_policy(const uvmrt_context_t *ctx)
{
    return ctx ? ctx->cfg.policy : UVMRT_POLICY_PREFETCH;
}
uvmrt_backend_kind_t uvmrt_context_backend(const uvmrt_context_t *ctx)
{
    return ctx ? ctx->cfg.backend : UVMRT_BACKEND_CUDA;
}
uint64_t uvmrt_context_budget(const uvmrt_context_t *ctx) { return ctx ? ctx->budget : 0; }
uint64_t uvmrt_context_host_budget(const uvmrt_context_t *ctx) { return ctx ? ctx->host_budget : 0; }
int uvmrt_context_has_disk_tier(const uvmrt_context_t *ctx)
{
    return ctx != NULL && (ctx->tier.modelled || strcmp(ctx->cfg.spill_dir, "none") != 0);
}
const uvmrt_profile_t *uvmrt_context_profile(const uvmrt_context_t *ctx)
{
    return ctx ? ctx->profile : uvmrt_profile_find("consumer-8g");
}

