/*
 * test_hostbudget.c -- host memory as a planned resource (issue 24 §1): the machine's
 * memory read through cgroups (hostmem.c), UVMRT_HOST_BUDGET, the host bytes counted
 * (memory stats, summary, plan), and allocations, declarations, plans and rehearsals
 * over the host budget refused with nothing changed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "hostmem.h"

/* ------------------------------------------------------------------ a fake root */
static char g_root[256];

static void put(const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", g_root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(g_root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0700);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

static void root_make(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/uvmrt-hostmem-%d-XXXXXX", (int)getpid());
    cr_assert_not_null(mkdtemp(g_root));
    put("proc/meminfo", "MemFree:         1000 kB\nMemTotal:       67108864 kB\nSwapTotal: 0 kB\n");
}

static void root_rm(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    cr_assert_eq(system(cmd), 0);
}

Test(hostmem, memtotal_without_cgroups)
{
    root_make();
    uint64_t b = 0;
    char src[64];
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 64 * GIB);
    cr_expect_str_eq(src, "MemTotal");
    root_rm();
}

Test(hostmem, cgroup_v2_limit_of_this_cgroup_or_a_parent_counts)
{
    root_make();
    put("proc/self/cgroup", "0::/user.slice/job\n");
    put("sys/fs/cgroup/user.slice/memory.max", "17179869184\n"); /* 16 GiB on the parent */
    put("sys/fs/cgroup/user.slice/job/memory.max", "max\n");
    uint64_t b = 0;
    char src[64];
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 16 * GIB);
    cr_expect_str_eq(src, "cgroup v2 memory.max");
    put("sys/fs/cgroup/user.slice/job/memory.max", "8589934592\n"); /* the smaller one wins */
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 8 * GIB);
    put("sys/fs/cgroup/user.slice/job/memory.max", "max\n");
    put("sys/fs/cgroup/user.slice/memory.max", "max\n"); /* none: MemTotal */
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 64 * GIB);
    cr_expect_str_eq(src, "MemTotal");
    root_rm();
}

Test(hostmem, cgroup_v1_limit_counts_and_no_limit_is_ignored)
{
    root_make();
    put("proc/self/cgroup", "7:cpu,cpuacct:/x\n5:memory:/docker/abc\n");
    put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
    uint64_t b = 0;
    char src[64];
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 4 * GIB);
    cr_expect_str_eq(src, "cgroup v1 memory.limit_in_bytes");
    put("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n"); /* v1's "none" */
    cr_assert_eq(uvmrt__host_memory(g_root, &b, src, sizeof src), 0);
    cr_expect_eq(b, 64 * GIB);
    root_rm();
}

Test(hostmem, no_meminfo_is_an_error_and_the_reserve)
{
    root_make();
    char path[512];
    snprintf(path, sizeof path, "%s/proc/meminfo", g_root);
    unlink(path);
    uint64_t b = 123;
    cr_expect_eq(uvmrt__host_memory(g_root, &b, NULL, 0), -1);
    cr_expect_eq(b, 123);
    root_rm();
    cr_expect_eq(uvmrt__host_reserve(64 * GIB), 64 * GIB / 10);
    cr_expect_eq(uvmrt__host_reserve(8 * GIB), 2 * GIB);
    cr_expect_eq(uvmrt__host_reserve(3 * GIB), 3 * GIB / 2);
    /* this machine: a budget below what it has */
    cr_assert_eq(uvmrt__host_memory(NULL, &b, NULL, 0), 0);
    cr_expect(b > uvmrt__host_reserve(b));
}

/* ------------------------------------------------------------------ the setting */
static uvmrt_status_t create_env(const char *value, uint64_t param, uvmrt_context_t **ctx)
{
    env_clear_uvmrt();
    setenv("UVMRT_MONITOR", "0", 1);
    if (value) setenv("UVMRT_HOST_BUDGET", value, 1);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 8 * MIB, NULL);
    p.ignore_env = 0;
    p.host_budget_bytes = param;
    *ctx = NULL;
    return uvmrt_context_create(&p, ctx);
}

Test(hostbudget, auto_on_sim_is_no_limit_and_a_size_is_taken)
{
    uvmrt_context_t *ctx;
    cr_assert_eq(create_env(NULL, 0, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_host_budget(ctx), 0);
    uvmrt_context_destroy(ctx);
    cr_assert_eq(create_env("1G", 0, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_host_budget(ctx), GIB);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m), UVMRT_OK);
    cr_expect_eq(m.host_budget_bytes, GIB);
    uvmrt_context_destroy(ctx);
    cr_assert_eq(create_env(NULL, 3 * GIB, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_host_budget(ctx), 3 * GIB);
    uvmrt_context_destroy(ctx);
    cr_assert_eq(create_env("none", 3 * GIB, &ctx), UVMRT_OK, "%s", log_text()); /* the variable wins */
    cr_expect_eq(uvmrt_context_host_budget(ctx), 0);
    uvmrt_context_destroy(ctx);
    cr_assert_eq(create_env(NULL, UINT64_MAX, &ctx), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_host_budget(ctx), 0);
    uvmrt_context_destroy(ctx);
    uint64_t total = 0, budget = 0;
    cr_assert_eq(uvmrt_host_memory(&total, &budget), UVMRT_OK);
    cr_expect(budget > 0 && budget < total);
    cr_expect_eq(uvmrt_host_memory(NULL, NULL), UVMRT_OK);
    cr_expect_eq(uvmrt_context_host_budget(NULL), 0);
    cr_expect_eq(uvmrt_context_host_external_bytes(NULL), 0);
}

Test(hostbudget, bad_values_are_refused_by_name)
{
    static const char *const bad[] = {"0", "512K", "abc", "-1G", " 1G", "1G ", "AUTO", "1Q"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        log_reset();
        uvmrt_context_t *ctx;
        cr_expect_eq(create_env(bad[i], 0, &ctx), UVMRT_ERR_CONFIG, "'%s'", bad[i]);
        cr_expect_null(ctx);
        cr_expect(log_contains("UVMRT_HOST_BUDGET"), "'%s': %s", bad[i], log_text());
    }
    log_reset();
    uvmrt_context_t *ctx;
    cr_expect_eq(create_env(NULL, 1000, &ctx), UVMRT_ERR_INVALID);
    cr_expect(log_contains("host_budget_bytes"), "%s", log_text());
}

/* ------------------------------------------------------------------ counted and bounded */
static uvmrt_context_t *ctx_host(uint64_t budget, uint64_t host_budget)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, budget, NULL);
    p.host_budget_bytes = host_budget;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    return ctx;
}

static uvmrt_status_t alloc_mib(uvmrt_context_t *ctx, size_t mib, uvmrt_tensor_t **t)
{
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, mib * MIB};
    return uvmrt_tensor_alloc(ctx, &d, t);
}

Test(hostbudget, allocation_over_the_host_budget_fails_and_changes_nothing)
{
    uvmrt_context_t *ctx = ctx_host(8 * MIB, 16 * MIB);
    uvmrt_tensor_t *a, *b = NULL;
    cr_assert_eq(alloc_mib(ctx, 20, &a), UVMRT_OK, "%s", log_text()); /* 12 MiB beyond the GPU budget */
    uvmrt_memory_stats_t m0 = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t), m1 = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m0), UVMRT_OK);
    cr_expect_eq(m0.host_bytes, 20 * MIB); /* nothing resident yet */
    cr_expect_eq(m0.peak_host_bytes, 20 * MIB);
    log_reset();
    cr_expect_eq(alloc_mib(ctx, 6, &b), UVMRT_ERR_BUDGET); /* 18 MiB beyond it, over 16 */
    cr_expect_null(b);
    cr_expect(log_contains("host budget of 0.02 GiB") && log_contains("UVMRT_HOST_BUDGET") &&
                  log_contains("a GPU budget of"),
              "%s", log_text());
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m1), UVMRT_OK);
    cr_expect_eq(m1.allocated_bytes, m0.allocated_bytes);
    cr_expect_eq(m1.tensors, 1);
    cr_expect_eq(alloc_mib(ctx, 4, &b), UVMRT_OK, "%s", log_text()); /* exactly at the budget */
    uvmrt_context_destroy(ctx);
}

Test(hostbudget, host_external_bytes_count_and_a_refusal_changes_nothing)
{
    uvmrt_context_t *ctx = ctx_host(8 * MIB, 32 * MIB);
    uvmrt_tensor_t *a;
    cr_assert_eq(alloc_mib(ctx, 20, &a), UVMRT_OK);
    cr_assert_eq(uvmrt_context_set_host_external_bytes(ctx, 10 * MIB), UVMRT_OK, "%s", log_text());
    cr_expect_eq(uvmrt_context_host_external_bytes(ctx), 10 * MIB);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m), UVMRT_OK);
    cr_expect_eq(m.host_external_bytes, 10 * MIB);
    cr_expect_eq(m.host_bytes, 30 * MIB);
    /* 12 MiB of tensors beyond the GPU budget + 21 > 32 */
    log_reset();
    cr_expect_eq(uvmrt_context_set_host_external_bytes(ctx, 21 * MIB), UVMRT_ERR_BUDGET);
    cr_expect(log_contains("expected at most 0.02 GiB"), "%s", log_text());
    cr_expect_eq(uvmrt_context_host_external_bytes(ctx), 10 * MIB);
    cr_expect_eq(uvmrt_context_set_host_external_bytes(ctx, UINT64_MAX), UVMRT_ERR_BUDGET); /* no wrap */
    cr_expect_eq(uvmrt_context_set_host_external_bytes(NULL, 1), UVMRT_ERR_INVALID);
    /* the declared bytes count for later allocations too: 12 + 10 + 12 > 32 */
    uvmrt_tensor_t *b = NULL;
    cr_expect_eq(alloc_mib(ctx, 12, &b), UVMRT_ERR_BUDGET);
    cr_expect_eq(uvmrt_context_set_host_external_bytes(ctx, 0), UVMRT_OK);
    cr_expect_eq(alloc_mib(ctx, 12, &b), UVMRT_OK, "%s", log_text());
    /* inside a step: refused */
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_context_set_host_external_bytes(ctx, MIB), UVMRT_ERR_STATE);
    cr_expect_eq(uvmrt_context_host_external_bytes(ctx), 0);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* The plan's host need of the default net at a 16 MiB GPU budget, with no host limit. */
static uint64_t plan_host_unlimited(uint64_t *total)
{
    uvmrt_context_t *ctx = ctx_host(16 * MIB, 0);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 3, observe_invariants, NULL);
    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m), UVMRT_OK);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_eq(s.plan_host_bytes, m.plan_host_bytes);
    cr_expect_eq(s.peak_host_bytes, m.peak_host_bytes);
    cr_expect(s.plans_built > 0);
    *total = net_total_footprint(net);
    /* the host holds what the GPU does not; the peak seen is at least the host now */
    cr_expect_eq(m.host_bytes, *total - m.resident_bytes);
    cr_expect(m.peak_host_bytes >= m.host_bytes);
    cr_expect(m.peak_host_bytes >= *total - 16 * MIB);
    cr_expect_eq(m.peak_host_bytes, *total, "every tensor starts in host memory");
    cr_assert_eq(uvmrt_memory_peak_reset(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &m), UVMRT_OK);
    cr_expect_eq(m.peak_host_bytes, m.host_bytes);
    net_free(net);
    uvmrt_context_destroy(ctx);
    return m.plan_host_bytes;
}

Test(hostbudget, the_plan_counts_its_host_need)
{
    uint64_t total, plan = plan_host_unlimited(&total);
    cr_expect(plan >= total - 16 * MIB, "plan %llu, total %llu", (unsigned long long)plan, (unsigned long long)total);
    cr_expect(plan <= total);
}

Test(hostbudget, a_plan_over_the_host_budget_is_refused)
{
    uint64_t total, plan = plan_host_unlimited(&total);
    /* a host budget the tensors fit (total - GPU budget) but the plan does not */
    uint64_t host = plan - MIB;
    cr_assert(host >= total - 16 * MIB, "the plan needs no more than the allocation check: %llu",
              (unsigned long long)plan);
    log_reset();
    uvmrt_context_t *ctx = ctx_host(16 * MIB, host);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 3, NULL, NULL);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_eq(s.plans_built, 0);
    cr_expect_eq(s.plan_host_bytes, 0);
    cr_expect(log_contains("plan refused") && log_contains("UVMRT_HOST_BUDGET"), "%s", log_text());
    int said = 0;
    for (const char *p = log_text(); (p = strstr(p, "plan refused")) != NULL; p++) said++;
    cr_expect_eq(said, 1, "said once, not at every step: %s", log_text());
    net_free(net);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ rehearsals */
/* One layer whose tensors are values[0] MiB in all, one call per phase. */
static uvmrt_status_t mib_rehearse(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)user;
    int layer;
    uvmrt_status_t st = uvmrt_layer_add(model, "L", &layer);
    uvmrt_tensor_t *t[8];
    uvmrt_tensor_desc_t d[8];
    for (int i = 0; i < 8; i++) d[i] = (uvmrt_tensor_desc_t){NULL, layer, UVMRT_ROLE_WEIGHT, (size_t)values[0] * MIB / 8};
    if (st == UVMRT_OK) st = uvmrt_tensors_alloc(model, 8, d, t);
    for (int s = 0; s < steps && st == UVMRT_OK; s++) {
        st = uvmrt_step_begin(model);
        for (int i = 0; i < 8 && st == UVMRT_OK; i++) {
            uvmrt_use_t u = {t[i], UVMRT_USE_READ};
            uvmrt_layer_call_t c;
            uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_FORWARD, NULL);
            c.uses = &u;
            c.n_uses = 1;
            c.no_default_uses = 1;
            c.sim_duration_ns = 100000;
            st = uvmrt_layer_begin(model, &c);
            if (st == UVMRT_OK) st = uvmrt_layer_end(model);
        }
        if (st == UVMRT_OK) st = uvmrt_step_end(model);
    }
    return st;
}

Test(hostbudget, a_rehearsal_over_the_host_budget_does_not_fit)
{
    uvmrt_context_t *ctx = ctx_host(8 * MIB, 32 * MIB);
    static const int mib[] = {16, 64};
    uvmrt_knob_t k = {"mib", 2, mib};
    uvmrt_choice_t c = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &k, 1, mib_rehearse, NULL, &c), UVMRT_OK, "%s", log_text());
    cr_expect(c.fits);
    cr_expect_eq(c.values[0], 16);
    cr_expect(candidate_ns(ctx, 16) > 0);
    cr_expect_eq(candidate_ns(ctx, 64), 0, "64 MiB at an 8 MiB GPU budget needs 56 MiB of host memory");
    uvmrt_context_destroy(ctx);
}
