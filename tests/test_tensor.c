/*
 * test_tensor.c -- tensors and arenas (tensor.c): packing, alignment, frees,
 * accessors, and failures that must leave nothing behind.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "helpers.h"

static uintptr_t addr(const uvmrt_tensor_t *t) { return (uintptr_t)uvmrt_tensor_ptr(t); }
static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static uint64_t align_for(uint64_t size) { return size >= MIB ? 2 * MIB : 64 * KIB; }

static uint64_t allocated(uvmrt_context_t *ctx)
{
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    return s.allocated_bytes;
}

/* ------------------------------------------------------------------ packing */
Test(tensor, one_layer_packed_contiguous_and_aligned)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    /* mixed sizes: big (2 MiB aligned) and small (64 KiB aligned), odd lengths */
    const size_t sizes[] = {3 * MIB + 5, 100 * KIB, 1 * MIB, 7, 64 * KIB, 5 * MIB / 2, 1 * MIB - 1, 2 * MIB};
    const size_t n = sizeof sizes / sizeof sizes[0];
    uvmrt_tensor_desc_t d[sizeof sizes / sizeof sizes[0]];
    uvmrt_tensor_t *t[sizeof sizes / sizeof sizes[0]];
    for (size_t i = 0; i < n; i++) d[i] = (uvmrt_tensor_desc_t){NULL, l, UVMRT_ROLE_WEIGHT, sizes[i]};
    cr_assert_eq(uvmrt_tensors_alloc(ctx, n, d, t), UVMRT_OK, "%s", log_text());
    uintptr_t base = addr(t[0]);
    cr_expect_eq(base % (2 * MIB), 0, "arena base %#lx not 2 MiB aligned", (unsigned long)base);
    uint64_t expect_off = 0;
    for (size_t i = 0; i < n; i++) {
        expect_off = align_up(expect_off, align_for(sizes[i]));
        cr_expect_eq(addr(t[i]) - base, expect_off, "tensor %zu (%zu bytes) at offset %#lx, want %#lx", i, sizes[i],
                     (unsigned long)(addr(t[i]) - base), (unsigned long)expect_off);
        cr_expect_eq(addr(t[i]) % align_for(sizes[i]), 0, "tensor %zu misaligned", i);
        cr_expect_eq(uvmrt_tensor_size(t[i]), sizes[i]);
        expect_off += align_up(sizes[i], align_for(sizes[i]));
    }
    uint64_t fp = 0;
    for (size_t i = 0; i < n; i++) fp += footprint_of(sizes[i]);
    cr_expect_eq(allocated(ctx), fp);
    uvmrt_context_destroy(ctx);
}

/* One call with more tensors of one layer than its table had room for (it grew by one
 * per call: a PyTorch block has 24 and more, and wrote past the table). */
Test(tensor, many_tensors_of_one_layer_in_one_call)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "block", &l), UVMRT_OK);
    enum { N = 100 };
    uvmrt_tensor_desc_t d[N];
    uvmrt_tensor_t *t[N];
    for (int i = 0; i < N; i++) d[i] = (uvmrt_tensor_desc_t){NULL, l, (uvmrt_role_t)(i % 4), 4 * KIB};
    cr_assert_eq(uvmrt_tensors_alloc(ctx, N, d, t), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_tensors_alloc(ctx, N, d, t), UVMRT_OK, "%s", log_text());
    uvmrt_tensor_info_t info[2 * N];
    info[0].struct_size = sizeof info[0];
    size_t n = 0;
    cr_assert_eq(uvmrt_memory_summary(ctx, info, 2 * N, &n), UVMRT_OK);
    cr_expect_eq(n, 2 * N);
    for (size_t i = 0; i < n; i++) cr_expect_eq(info[i].layer, l);
    uvmrt_context_destroy(ctx);
}

Test(tensor, layers_get_different_arenas_in_one_call)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l0, l1;
    cr_assert_eq(uvmrt_layer_add(ctx, "a", &l0), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "b", &l1), UVMRT_OK);
    cr_expect_eq(l0, 0);
    cr_expect_eq(l1, 1);
    cr_expect_eq(uvmrt_layer_count(ctx), 2);
    /* interleaved layers: each layer's tensors still side by side, in order */
    uvmrt_tensor_desc_t d[6] = {
        {"a0", l0, UVMRT_ROLE_WEIGHT, 2 * MIB}, {"b0", l1, UVMRT_ROLE_WEIGHT, 2 * MIB},
        {"a1", l0, UVMRT_ROLE_GRADIENT, 2 * MIB}, {"x", -1, UVMRT_ROLE_ACTIVATION, 1 * MIB},
        {"b1", l1, UVMRT_ROLE_GRADIENT, 4 * MIB}, {"a2", l0, UVMRT_ROLE_OPTIMIZER_STATE, 128 * KIB},
    };
    uvmrt_tensor_t *t[6];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 6, d, t), UVMRT_OK, "%s", log_text());
    cr_expect_eq(addr(t[2]), addr(t[0]) + 2 * MIB, "a1 does not follow a0");
    cr_expect_eq(addr(t[5]), addr(t[2]) + 2 * MIB, "a2 does not follow a1");
    cr_expect_eq(addr(t[4]), addr(t[1]) + 2 * MIB, "b1 does not follow b0");
    for (int i = 0; i < 6; i++) cr_expect_eq(addr(t[i]) % (i == 5 ? 64 * KIB : 2 * MIB), 0, "tensor %d misaligned", i);
    /* different arenas: no overlap of [first, last end) between layers */
    uintptr_t a_lo = addr(t[0]), a_hi = addr(t[5]) + 128 * KIB;
    uintptr_t b_lo = addr(t[1]), b_hi = addr(t[4]) + 4 * MIB;
    cr_expect(a_hi <= b_lo || b_hi <= a_lo, "arenas of layers a and b overlap");
    cr_expect(addr(t[3]) + MIB <= a_lo || addr(t[3]) >= a_hi, "x lies inside layer a's arena");
    cr_expect(addr(t[3]) + MIB <= b_lo || addr(t[3]) >= b_hi, "x lies inside layer b's arena");
    for (int i = 0; i < 6; i++) {
        cr_expect_str_eq(uvmrt_tensor_name(t[i]), d[i].name);
        cr_expect_eq(uvmrt_tensor_layer(t[i]), d[i].layer);
        cr_expect_eq(uvmrt_tensor_role(t[i]), d[i].role);
    }
    uvmrt_context_destroy(ctx);
}

Test(tensor, separate_calls_separate_arenas)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d = {"w", l, UVMRT_ROLE_WEIGHT, 64 * KIB};
    uvmrt_tensor_t *a, *b;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &a), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &b), UVMRT_OK);
    cr_expect_eq(addr(a) % (2 * MIB), 0);
    cr_expect_eq(addr(b) % (2 * MIB), 0);
    cr_expect_neq(addr(a), addr(b));
    cr_expect_eq(allocated(ctx), 128 * KIB);
    uvmrt_context_destroy(ctx);
}

Test(tensor, pointers_writable_and_distinct)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d[3] = {{"a", l, UVMRT_ROLE_WEIGHT, 3 * MIB}, {"b", l, UVMRT_ROLE_WEIGHT, 100},
                                {"c", -1, UVMRT_ROLE_WORKSPACE, 1 * MIB}};
    uvmrt_tensor_t *t[3];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 3, d, t), UVMRT_OK);
    for (int i = 0; i < 3; i++) memset(uvmrt_tensor_ptr(t[i]), 0x10 + i, d[i].size_bytes);
    for (int i = 0; i < 3; i++) {
        const unsigned char *p = uvmrt_tensor_ptr(t[i]);
        for (size_t k = 0; k < d[i].size_bytes; k += 4093)
            cr_assert_eq(p[k], 0x10 + i, "tensor %d byte %zu overwritten by a neighbour", i, k);
        cr_assert_eq(p[d[i].size_bytes - 1], 0x10 + i);
    }
    uvmrt_context_destroy(ctx);
}

Test(tensor, default_names)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_tensor_desc_t d[2] = {{NULL, -1, UVMRT_ROLE_WEIGHT, 4096}, {NULL, -1, UVMRT_ROLE_WEIGHT, 4096}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    cr_expect_str_eq(uvmrt_tensor_name(t[0]), "tensor0");
    cr_expect_str_eq(uvmrt_tensor_name(t[1]), "tensor1");
    uvmrt_context_destroy(ctx);
}

Test(tensor, name_is_copied)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    char name[16] = "mine";
    uvmrt_tensor_desc_t d = {name, -1, UVMRT_ROLE_WEIGHT, 4096};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    strcpy(name, "changed");
    cr_expect_str_eq(uvmrt_tensor_name(t), "mine");
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ failures leave nothing */
static void expect_alloc_rejected(uvmrt_context_t *ctx, size_t n, const uvmrt_tensor_desc_t *d, uvmrt_status_t want,
                                  const char *needle)
{
    uvmrt_tensor_t *out[8];
    for (int i = 0; i < 8; i++) out[i] = (uvmrt_tensor_t *)(uintptr_t)0x1234;
    uint64_t before = allocated(ctx);
    log_reset();
    uvmrt_status_t st = uvmrt_tensors_alloc(ctx, n, d, out);
    cr_expect_eq(st, want, "got %s", uvmrt_status_name(st));
    cr_expect_eq(allocated(ctx), before, "allocated_bytes changed by a failed alloc");
    for (int i = 0; i < 8; i++) cr_expect_eq(out[i], (uvmrt_tensor_t *)(uintptr_t)0x1234, "out[%d] touched", i);
    if (needle) cr_expect(log_contains(needle), "message lacks '%s'; log:\n%s", needle, log_text());
}

Test(tensor, zero_size_rejected_nothing_allocated)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t ok = {"ok", l, UVMRT_ROLE_WEIGHT, 2 * MIB};
    uvmrt_tensor_t *first;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &ok, &first), UVMRT_OK);
    /* the bad one last: the good ones before it must not be allocated either */
    uvmrt_tensor_desc_t d[3] = {{"a", l, UVMRT_ROLE_WEIGHT, MIB}, {"b", -1, UVMRT_ROLE_WEIGHT, MIB},
                                {"empty", l, UVMRT_ROLE_WEIGHT, 0}};
    expect_alloc_rejected(ctx, 3, d, UVMRT_ERR_INVALID, "'empty'");
    cr_expect(log_contains("size_bytes"), "%s", log_text());
    /* the context still allocates */
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &ok, &t), UVMRT_OK);
    cr_expect_eq(allocated(ctx), 4 * MIB);
    uvmrt_context_destroy(ctx);
}

Test(tensor, bad_layer_and_role_rejected)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d[2] = {{"a", l, UVMRT_ROLE_WEIGHT, MIB}, {"bad", 5, UVMRT_ROLE_WEIGHT, MIB}};
    expect_alloc_rejected(ctx, 2, d, UVMRT_ERR_INVALID, "layer 5");
    d[1].layer = -2;
    expect_alloc_rejected(ctx, 2, d, UVMRT_ERR_INVALID, "layer -2");
    d[1].layer = l;
    d[1].role = (uvmrt_role_t)9;
    expect_alloc_rejected(ctx, 2, d, UVMRT_ERR_INVALID, "role 9");
    expect_alloc_rejected(ctx, 0, d, UVMRT_ERR_INVALID, NULL);
    uvmrt_tensor_t *out[1];
    cr_expect_eq(uvmrt_tensors_alloc(ctx, 1, NULL, out), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_tensors_alloc(ctx, 1, d, NULL), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_tensors_alloc(NULL, 1, d, out), UVMRT_ERR_INVALID);
    cr_expect_eq(uvmrt_tensor_alloc(ctx, &d[1], out), UVMRT_ERR_INVALID);
    cr_expect_eq(allocated(ctx), 0);
    uvmrt_context_destroy(ctx);
}

/* A backend whose allocations fail after a few: the arenas already made for
 * the call are given back, and nothing of the call remains. */
static struct {
    int allowed; /* allocations that still succeed */
    int live;    /* allocations not yet freed */
} fa;

static uvmrt_status_t failing_alloc(void *state, size_t bytes, void **ptr)
{
    if (fa.allowed-- <= 0) return UVMRT_ERR_NOMEM;
    uvmrt_status_t st = uvmrt__backend_sim.alloc(state, bytes, ptr);
    if (st == UVMRT_OK) fa.live++;
    return st;
}

static void counting_free(void *state, void *ptr, size_t bytes)
{
    fa.live--;
    uvmrt__backend_sim.free(state, ptr, bytes);
}

Test(tensor, backend_alloc_failure_leaves_nothing)
{
    uvmrt_backend_ops_t ops = uvmrt__backend_sim;
    ops.alloc = failing_alloc;
    ops.free = counting_free;
    fa.allowed = 1000;
    fa.live = 0;
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt__context_create_with(&p, &ops, &ctx), UVMRT_OK, "%s", log_text());
    int l0, l1, l2;
    cr_assert_eq(uvmrt_layer_add(ctx, "a", &l0), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "b", &l1), UVMRT_OK);
    cr_assert_eq(uvmrt_layer_add(ctx, "c", &l2), UVMRT_OK);
    uvmrt_tensor_desc_t keep = {"keep", l0, UVMRT_ROLE_WEIGHT, 2 * MIB};
    uvmrt_tensor_t *k;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &keep, &k), UVMRT_OK);
    int live = fa.live;
    /* three arenas needed; the third fails */
    uvmrt_tensor_desc_t d[3] = {{"x", l0, UVMRT_ROLE_WEIGHT, MIB}, {"y", l1, UVMRT_ROLE_WEIGHT, MIB},
                                {"z", l2, UVMRT_ROLE_WEIGHT, MIB}};
    fa.allowed = 2;
    expect_alloc_rejected(ctx, 3, d, UVMRT_ERR_NOMEM, NULL);
    cr_expect_eq(fa.live, live, "arenas of the failed call were not given back (%d live, want %d)", fa.live, live);
    /* the layers' default uses did not gain the failed tensors */
    fa.allowed = 1000;
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l0, .phase = UVMRT_PHASE_FORWARD};
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_eq(s.resident_bytes, 2 * MIB, "layer a uses more than 'keep'");
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
    cr_expect_eq(fa.live, 0, "%d arenas leaked at destroy", fa.live);
}

/* ------------------------------------------------------------------ frees */
Test(tensor, free_twice_not_found)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, 3 * MIB};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    cr_expect_eq(allocated(ctx), 4 * MIB);
    cr_expect_eq(uvmrt_tensor_free(ctx, t), UVMRT_OK);
    cr_expect_eq(allocated(ctx), 0);
    log_reset();
    cr_expect_eq(uvmrt_tensor_free(ctx, t), UVMRT_ERR_NOT_FOUND);
    cr_expect(log_contains("uvmrt_tensor_free"), "%s", log_text());
    cr_expect_null(uvmrt_tensor_ptr(t), "a freed tensor still has a pointer");
    cr_expect_eq(uvmrt_tensor_size(t), 0);
    cr_expect_eq(uvmrt_tensor_is_resident(t), 0);
    uvmrt_context_destroy(ctx);
}

Test(tensor, free_null_ok)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    cr_expect_eq(uvmrt_tensor_free(ctx, NULL), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_free(NULL, NULL), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

Test(tensor, free_of_other_context_not_found)
{
    uvmrt_context_t *a = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_context_t *b = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, MIB};
    uvmrt_tensor_t *ta, *tb;
    cr_assert_eq(uvmrt_tensor_alloc(a, &d, &ta), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_alloc(b, &d, &tb), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_free(b, ta), UVMRT_ERR_NOT_FOUND);
    cr_expect_eq(uvmrt_tensor_free(a, tb), UVMRT_ERR_NOT_FOUND);
    cr_expect_not_null(uvmrt_tensor_ptr(ta), "a failed free released the tensor");
    cr_expect_eq(allocated(a), 2 * MIB);
    cr_expect_eq(allocated(b), 2 * MIB);
    cr_expect_eq(uvmrt_tensor_free(a, ta), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_free(b, tb), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_free(NULL, ta), UVMRT_ERR_INVALID);
    uvmrt_context_destroy(a);
    uvmrt_context_destroy(b);
}

/* The arena lives until its last tensor goes: the survivor's memory stays usable. */
Test(tensor, arena_outlives_partial_free)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d[2] = {{"a", l, UVMRT_ROLE_WEIGHT, 2 * MIB}, {"b", l, UVMRT_ROLE_WEIGHT, 2 * MIB}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    memset(uvmrt_tensor_ptr(t[1]), 0x5a, 2 * MIB);
    cr_assert_eq(uvmrt_tensor_free(ctx, t[0]), UVMRT_OK);
    const unsigned char *p = uvmrt_tensor_ptr(t[1]);
    cr_expect_eq(p[0], 0x5a);
    cr_expect_eq(p[2 * MIB - 1], 0x5a);
    cr_assert_eq(uvmrt_tensor_free(ctx, t[1]), UVMRT_OK);
    cr_expect_eq(allocated(ctx), 0);
    uvmrt_context_destroy(ctx);
}

/* A freed tensor is dropped from its layer's default uses. */
Test(tensor, freed_tensor_leaves_default_uses)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 256 * MIB, NULL);
    int l;
    cr_assert_eq(uvmrt_layer_add(ctx, "L", &l), UVMRT_OK);
    uvmrt_tensor_desc_t d[2] = {{"w", l, UVMRT_ROLE_WEIGHT, 2 * MIB}, {"a", l, UVMRT_ROLE_ACTIVATION, 2 * MIB}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_free(ctx, t[0]), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = l, .phase = UVMRT_PHASE_FORWARD};
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_eq(s.resident_bytes, 2 * MIB, "only 'a' should be used");
    cr_expect(uvmrt_tensor_is_resident(t[1]));
    cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

Test(tensor, free_resident_tensor_lowers_resident_bytes)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_DEMAND, 256 * MIB, NULL);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_step(net, NULL, NULL);
    uvmrt_summary_t s0 = UVMRT_STRUCT_INIT(uvmrt_summary_t), s1 = s0;
    cr_assert_eq(uvmrt_summary_get(ctx, &s0), UVMRT_OK);
    cr_assert(uvmrt_tensor_is_resident(net->o[0]));
    cr_assert_eq(uvmrt_tensor_free(ctx, net->o[0]), UVMRT_OK);
    cr_assert_eq(uvmrt_summary_get(ctx, &s1), UVMRT_OK);
    cr_expect_eq(s1.resident_bytes, s0.resident_bytes - 4 * MIB);
    cr_expect_eq(s1.allocated_bytes, s0.allocated_bytes - 4 * MIB);
    net_destroy(net);
}

/* ------------------------------------------------------------------ state */
Test(tensor, alloc_and_free_inside_step_rejected)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_WEIGHT, MIB};
    uvmrt_tensor_t *t, *u = NULL;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    log_reset();
    cr_expect_eq(uvmrt_tensor_alloc(ctx, &d, &u), UVMRT_ERR_STATE);
    cr_expect_null(u);
    cr_expect(log_contains("inside a step"), "%s", log_text());
    log_reset();
    cr_expect_eq(uvmrt_tensor_free(ctx, t), UVMRT_ERR_STATE);
    cr_expect(log_contains("inside a step"), "%s", log_text());
    cr_expect_not_null(uvmrt_tensor_ptr(t), "a rejected free released the tensor");
    cr_expect_eq(allocated(ctx), 2 * MIB);
    int l = -1;
    cr_expect_eq(uvmrt_layer_add(ctx, "late", &l), UVMRT_ERR_STATE);
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_free(ctx, t), UVMRT_OK);
    uvmrt_context_destroy(ctx);
}

/* ------------------------------------------------------------------ accessors and destroy */
Test(tensor, accessors_null)
{
    cr_expect_null(uvmrt_tensor_ptr(NULL));
    cr_expect_eq(uvmrt_tensor_size(NULL), 0);
    cr_expect_null(uvmrt_tensor_name(NULL));
    cr_expect_eq(uvmrt_tensor_layer(NULL), -1);
    cr_expect_eq(uvmrt_tensor_is_resident(NULL), 0);
    (void)uvmrt_tensor_role(NULL);
}

Test(tensor, new_tensor_not_resident)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 256 * MIB, NULL);
    uvmrt_tensor_desc_t d = {"t", -1, UVMRT_ROLE_GRADIENT, 123456};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    cr_expect_eq(uvmrt_tensor_is_resident(t), 0);
    cr_expect_eq(uvmrt_tensor_size(t), 123456);
    cr_expect_eq(uvmrt_tensor_role(t), UVMRT_ROLE_GRADIENT);
    cr_expect_eq(uvmrt_tensor_layer(t), -1);
    uvmrt_summary_t s = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &s), UVMRT_OK);
    cr_expect_eq(s.resident_bytes, 0);
    cr_expect_eq(s.allocated_bytes, footprint_of(123456));
    uvmrt_context_destroy(ctx);
}

Test(tensor, destroy_null_noop) { uvmrt_context_destroy(NULL); }

Test(tensor, destroy_with_live_tensors_and_open_step)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 32 * MIB, NULL);
    net_spec_t spec = net_spec_default();
    net_t *net = net_create(ctx, &spec);
    run_steps(net, 2, NULL, NULL);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    uvmrt_layer_call_t c = {.struct_size = sizeof(uvmrt_layer_call_t), .layer = net->layer[0], .phase = UVMRT_PHASE_FORWARD};
    cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK);
    uvmrt_context_destroy(ctx); /* inside a step, a layer open, tensors live: no crash */
    net_free(net);
}

/* Sizes beyond what the layout arithmetic holds are refused by name, and
 * nothing is allocated (a SIZE_MAX tensor once got footprint 0; two of
 * SIZE_MAX/2+1 overflowed the arena sum). */
Test(tensor, sizes_beyond_the_arithmetic_rejected)
{
    uvmrt_context_t *ctx = make_ctx(UVMRT_POLICY_PREFETCH, 64 * MIB, NULL);
    int layer;
    cr_assert_eq(uvmrt_layer_add(ctx, "l", &layer), UVMRT_OK);
    uvmrt_tensor_t *out[2] = {NULL, NULL};
    uvmrt_tensor_desc_t big = {"huge", layer, UVMRT_ROLE_WEIGHT, SIZE_MAX};
    log_reset();
    cr_expect_eq(uvmrt_tensor_alloc(ctx, &big, out), UVMRT_ERR_INVALID);
    cr_expect(log_contains("huge") && log_contains("size_bytes"), "%s", log_text());
    cr_expect_null(out[0]);
    uvmrt_tensor_desc_t two[2] = {{"a", layer, UVMRT_ROLE_WEIGHT, SIZE_MAX / 2 + 1},
                                  {"b", layer, UVMRT_ROLE_WEIGHT, SIZE_MAX / 2 + 1}};
    cr_expect_eq(uvmrt_tensors_alloc(ctx, 2, two, out), UVMRT_ERR_INVALID);
    /* within the per-tensor bound but summing over the per-arena bound */
    uvmrt_tensor_desc_t many[5];
    for (int i = 0; i < 5; i++) many[i] = (uvmrt_tensor_desc_t){"m", layer, UVMRT_ROLE_WEIGHT, (size_t)1 << 50};
    uvmrt_tensor_t *outs[5] = {NULL};
    log_reset();
    cr_expect_eq(uvmrt_tensors_alloc(ctx, 5, many, outs), UVMRT_ERR_INVALID);
    cr_expect(log_contains("add up to"), "%s", log_text());
    cr_expect_null(outs[0]);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(ctx, &sum), UVMRT_OK);
    cr_expect_eq(sum.allocated_bytes, 0);
    cr_expect_eq(ctx->tensors.n, 0);
    cr_expect_eq(ctx->tensors.n_arenas, 0);
    uvmrt_context_destroy(ctx);
}
