/*
 * test_abi.c -- a program built against an older uvmrt.h runs against this library,
 * and one built against a newer uvmrt.h gets a clear error, not corrupted memory
 * (uvmrt.h, "structs that grow"; README "Versions and ABI").
 *
 * Built against tests/abi/uvmrt-v0.1.0.h, the frozen header of libuvmrt.so.1 (never
 * include/uvmrt.h), and linked with the shared library of this build. An older
 * header than that one is simulated by giving the library a struct_size that stops
 * before the last fields, with bytes after it that would fail the call (or crash it)
 * if the library read them, and a canary after outputs that must stay as it was;
 * a newer header, by a struct_size larger than the library's sizeof. The structs of
 * those cases are heap blocks, so ASan also sees any access past them.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmrt-v0.1.0.h"

#define MIB (1024ull * 1024ull)
#define LAYERS 3
#define STEPS 4
#define BUDGET (64 * MIB)

/* ------------------------------------------------------------------ the log */
static char log_buf[8192];
static size_t log_len;

static void log_capture(uvmrt_log_level_t level, const char *message, void *user)
{
    (void)user;
    if (level != UVMRT_LOG_ERROR) return;
    int k = snprintf(log_buf + log_len, sizeof log_buf - log_len, "%s\n", message);
    if (k > 0) log_len += (size_t)k < sizeof log_buf - log_len ? (size_t)k : sizeof log_buf - log_len - 1;
}

static int log_has(const char *fmt, ...)
{
    char want[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    return strstr(log_buf, want) != NULL;
}

/* ------------------------------------------------------------------ a small net on sim */
typedef struct net {
    uvmrt_context_t *ctx;
    int layer[LAYERS];
    uvmrt_tensor_t *t[LAYERS][3];
} net_t;

static void sim_params(uvmrt_params_t *p)
{
    uvmrt_params_init(p);
    p->backend = UVMRT_BACKEND_SIM;
    p->budget_bytes = BUDGET;
    p->ignore_env = 1;
    p->log_fn = log_capture;
}

static void net_tensors(net_t *n)
{
    static const uvmrt_role_t roles[3] = {UVMRT_ROLE_WEIGHT, UVMRT_ROLE_ACTIVATION, UVMRT_ROLE_GRADIENT};
    for (int l = 0; l < LAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        cr_assert_eq(uvmrt_layer_add(n->ctx, name, &n->layer[l]), UVMRT_OK, "%s", log_buf);
        uvmrt_tensor_desc_t d[3];
        for (int k = 0; k < 3; k++) d[k] = (uvmrt_tensor_desc_t){NULL, n->layer[l], roles[k], (size_t)(k + 1) * MIB};
        cr_assert_eq(uvmrt_tensors_alloc(n->ctx, 3, d, n->t[l]), UVMRT_OK, "%s", log_buf);
    }
}

static net_t net_make(void)
{
    net_t n = {0};
    uvmrt_params_t p;
    sim_params(&p);
    cr_assert_eq(uvmrt_context_create(&p, &n.ctx), UVMRT_OK, "%s", log_buf);
    net_tensors(&n);
    return n;
}

static void one_call(net_t *n, int l, uvmrt_phase_t phase)
{
    /* both ways of setting struct_size: the init function and a designated initialiser */
    uvmrt_layer_call_t c = {
        .struct_size = sizeof(uvmrt_layer_call_t), .layer = n->layer[l], .phase = phase, .sim_duration_ns = 1000};
    if (phase == UVMRT_PHASE_BACKWARD) {
        uvmrt_layer_call_init(&c, n->layer[l], phase, NULL);
        c.flops = 1e9;
    }
    cr_assert_eq(uvmrt_layer_begin(n->ctx, &c), UVMRT_OK, "%s", log_buf);
    cr_assert_eq(uvmrt_layer_end(n->ctx), UVMRT_OK, "%s", log_buf);
}

static void net_steps(net_t *n, int steps)
{
    for (int s = 0; s < steps; s++) {
        cr_assert_eq(uvmrt_step_begin(n->ctx), UVMRT_OK, "%s", log_buf);
        for (int l = 0; l < LAYERS; l++) one_call(n, l, UVMRT_PHASE_FORWARD);
        for (int l = LAYERS - 1; l >= 0; l--) one_call(n, l, UVMRT_PHASE_BACKWARD);
        for (int l = 0; l < LAYERS; l++) one_call(n, l, UVMRT_PHASE_OPTIMIZER);
        cr_assert_eq(uvmrt_step_end(n->ctx), UVMRT_OK, "%s", log_buf);
    }
}

/* A heap block of `size` bytes holding a struct of which the caller gives `given`
 * bytes (struct_size = given), and `fill` in the rest (what the library must not read
 * or, for an output, write). */
static void *block(size_t size, size_t given, const void *prefix, unsigned char fill)
{
    unsigned char *b = malloc(size);
    cr_assert_not_null(b);
    memset(b, fill, size);
    memcpy(b, prefix, given);
    memcpy(b, &given, sizeof given);
    return b;
}

static int all_bytes(const void *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (((const unsigned char *)p)[i] != v) return 0;
    return 1;
}

/* ------------------------------------------------------------------ the old program */
Test(abi, a_program_built_against_the_frozen_header_runs)
{
    net_t n = net_make();
    net_steps(&n, STEPS);

    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(n.ctx, &sum), UVMRT_OK, "%s", log_buf);
    cr_expect_eq(sum.struct_size, sizeof sum, "the caller's struct_size stays");
    cr_expect_eq(sum.steps, STEPS);
    cr_expect_eq(sum.budget_bytes, BUDGET);
    cr_expect_geq(sum.allocated_bytes, LAYERS * 6 * MIB);
    cr_expect_leq(sum.peak_resident_bytes, BUDGET);
    cr_expect_str_eq(sum.fault_stats_source, "sim");

    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(n.ctx, STEPS - 1, &st), UVMRT_OK, "%s", log_buf);
    cr_expect_gt(st.step_ns, 0);
    cr_expect_leq(st.peak_resident_bytes, BUDGET);

    for (int l = 0; l < LAYERS; l++) {
        uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
        cr_assert_eq(uvmrt_layer_stats_get(n.ctx, n.layer[l], UVMRT_PHASE_BACKWARD, &ls), UVMRT_OK);
        cr_expect_eq(ls.calls, STEPS, "layer %d: %llu calls", l, (unsigned long long)ls.calls);
        cr_expect_gt(ls.duration_ns, 0);
    }

    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(n.ctx, &m), UVMRT_OK);
    cr_expect_eq(m.tensors, LAYERS * 3);
    cr_expect_eq(m.role_tensors[UVMRT_ROLE_GRADIENT], LAYERS);
    cr_expect_eq(m.role_size_bytes[UVMRT_ROLE_GRADIENT], LAYERS * 3 * MIB);

    uvmrt_tensor_info_t info[LAYERS * 3];
    info[0].struct_size = sizeof info[0];
    size_t k = 0;
    cr_assert_eq(uvmrt_memory_summary(n.ctx, info, LAYERS * 3, &k), UVMRT_OK, "%s", log_buf);
    cr_assert_eq(k, LAYERS * 3);
    for (size_t i = 0; i < k; i++) {
        cr_expect_eq(info[i].struct_size, sizeof info[i]);
        cr_expect_eq(info[i].layer, n.layer[i / 3]);
        cr_expect_eq(info[i].size_bytes, (i % 3 + 1) * MIB);
    }

    const uvmrt_profile_t *h200 = uvmrt_profile_find("h200");
    cr_assert_not_null(h200);
    cr_expect_geq(h200->struct_size, sizeof *h200);
    cr_expect_str_eq(h200->name, "h200");
    cr_expect_gt(h200->memory_bytes, 100ull << 30);
    cr_expect(UVMRT_HAS_FIELD(uvmrt_profile_t, h200, host_mem_cpu_beside_d2h_bps));
    cr_expect_eq(uvmrt_profile_builtin(0)->struct_size, h200->struct_size);

    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    float w[4] = {1, 2, 3, 4}, mm[4] = {0}, v[4] = {0}, g[4] = {1, 1, 1, 1};
    cr_expect_eq(uvmrt_adamw_cpu(&hp, w, mm, v, g, 4, NULL), UVMRT_OK);
    cr_expect_lt(w[0], 1.0f);
    uvmrt_context_destroy(n.ctx);
}

/* Every struct of the frozen header is the library's, or a prefix of it. */
Test(abi, every_struct_of_the_frozen_header_fits_the_library)
{
#define GROWS(type)                                                                                         \
    cr_expect_leq(sizeof(type), uvmrt_abi_struct_size(#type), #type ": %zu bytes here, %zu in the library", \
                  sizeof(type), uvmrt_abi_struct_size(#type));
#define FIXED(type)                                                                                        \
    cr_expect_eq(sizeof(type), uvmrt_abi_struct_size(#type), #type ": %zu bytes here, %zu in the library", \
                 sizeof(type), uvmrt_abi_struct_size(#type));
    GROWS(uvmrt_params_t)
    GROWS(uvmrt_layer_call_t)
    GROWS(uvmrt_layer_stats_t) GROWS(uvmrt_step_stats_t) GROWS(uvmrt_summary_t) GROWS(uvmrt_memory_stats_t)
        GROWS(uvmrt_tensor_info_t) GROWS(uvmrt_choice_t) GROWS(uvmrt_profile_t) GROWS(uvmrt_profile_meta_t)
            GROWS(uvmrt_adamw_t) FIXED(uvmrt_tensor_desc_t) FIXED(uvmrt_use_t) FIXED(uvmrt_knob_t)
#undef GROWS
#undef FIXED
}

/* ------------------------------------------------------------------ an older header */
/* Inputs: the fields past struct_size take their defaults; the bytes there (0xFF: a
 * NaN flops, threads -1, a wild trace pointer) are never read. */
Test(abi, a_shorter_input_struct_is_read_up_to_its_size)
{
    uvmrt_params_t p;
    sim_params(&p);
    uvmrt_params_t *short_p = block(sizeof p, offsetof(uvmrt_params_t, trace), &p, 0xFF);
    net_t n = {0};
    cr_assert_eq(uvmrt_context_create(short_p, &n.ctx), UVMRT_OK, "%s", log_buf);
    free(short_p);
    net_tensors(&n);
    cr_assert_eq(uvmrt_step_begin(n.ctx), UVMRT_OK);
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, n.layer[0], UVMRT_PHASE_FORWARD, NULL);
    uvmrt_layer_call_t *short_c = block(sizeof c, offsetof(uvmrt_layer_call_t, flops), &c, 0xFF);
    cr_assert_eq(uvmrt_layer_begin(n.ctx, short_c), UVMRT_OK, "%s", log_buf);
    cr_assert_eq(uvmrt_layer_end(n.ctx), UVMRT_OK, "%s", log_buf);
    free(short_c);
    cr_assert_eq(uvmrt_step_end(n.ctx), UVMRT_OK);
    uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(n.ctx, &sum), UVMRT_OK);
    cr_expect_eq(sum.steps, 1);
    uvmrt_context_destroy(n.ctx);

    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    uvmrt_adamw_t *short_hp = block(sizeof hp, offsetof(uvmrt_adamw_t, threads), &hp, 0xFF);
    float w[2] = {1, 2}, w2[2] = {1, 2}, m[2] = {0}, m2[2] = {0}, v[2] = {0}, v2[2] = {0}, g[2] = {0.5f, -0.5f};
    cr_expect_eq(uvmrt_adamw_cpu(short_hp, w, m, v, g, 2, NULL), UVMRT_OK);
    cr_expect_eq(uvmrt_adamw_cpu(&hp, w2, m2, v2, g, 2, NULL), UVMRT_OK);
    cr_expect_eq(memcmp(w, w2, sizeof w), 0, "the same update as with the whole struct");
    free(short_hp);

    /* a profile without its last two figures: saved without them, read back as 0 */
    uvmrt_profile_t prof = *uvmrt_profile_find("h200");
    uvmrt_profile_t *short_prof =
        block(sizeof prof, offsetof(uvmrt_profile_t, host_mem_cpu_beside_h2d_bps), &prof, 0xFF);
    char path[] = "/tmp/uvmrt-abi-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    cr_assert_eq(uvmrt_profile_save(short_prof, NULL, path), UVMRT_OK);
    uvmrt_profile_t *back = NULL;
    cr_assert_eq(uvmrt_profile_load(path, &back), UVMRT_OK);
    unlink(path);
    cr_expect_eq(back->struct_size, uvmrt_abi_struct_size("uvmrt_profile_t"));
    cr_expect_eq(back->host_mem_bps, prof.host_mem_bps);
    cr_expect_eq(back->host_mem_cpu_beside_h2d_bps, 0.0);
    cr_expect_eq(back->host_mem_cpu_beside_d2h_bps, 0.0);
    uvmrt_profile_free(back);
    free(short_prof);
}

/* Outputs: written up to struct_size, not one byte more (the canary, 0xAB, stays). */
Test(abi, a_shorter_output_struct_is_written_up_to_its_size)
{
    net_t n = net_make();
    net_steps(&n, 2);
    uvmrt_summary_t whole = UVMRT_STRUCT_INIT(uvmrt_summary_t);
    cr_assert_eq(uvmrt_summary_get(n.ctx, &whole), UVMRT_OK);

    size_t cut = offsetof(uvmrt_summary_t, peak_resident_bytes);
    uvmrt_summary_t *s = block(sizeof whole, cut, &whole, 0xAB);
    memset((char *)s + sizeof(size_t), 0, cut - sizeof(size_t));
    cr_assert_eq(uvmrt_summary_get(n.ctx, s), UVMRT_OK, "%s", log_buf);
    cr_expect_eq(s->struct_size, cut);
    cr_expect_eq(s->steps, 2);
    cr_expect_eq(s->budget_bytes, BUDGET);
    cr_expect_eq(s->resident_bytes, whole.resident_bytes);
    cr_expect(all_bytes((char *)s + cut, sizeof whole - cut, 0xAB), "written past struct_size");
    free(s);

    uvmrt_step_stats_t st = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cut = offsetof(uvmrt_step_stats_t, step_ns) + sizeof st.step_ns;
    uvmrt_step_stats_t *sp = block(sizeof st, cut, &st, 0xAB);
    cr_assert_eq(uvmrt_step_stats_get(n.ctx, 1, sp), UVMRT_OK, "%s", log_buf);
    cr_expect_gt(sp->step_ns, 0);
    cr_expect(all_bytes((char *)sp + cut, sizeof st - cut, 0xAB), "written past struct_size");
    free(sp);

    uvmrt_memory_stats_t m = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cut = offsetof(uvmrt_memory_stats_t, role_tensors);
    uvmrt_memory_stats_t *mp = block(sizeof m, cut, &m, 0xAB);
    cr_assert_eq(uvmrt_memory_stats_get(n.ctx, mp), UVMRT_OK, "%s", log_buf);
    cr_expect_eq(mp->tensors, LAYERS * 3);
    cr_expect(all_bytes((char *)mp + cut, sizeof m - cut, 0xAB), "written past struct_size");
    free(mp);

    /* an array whose elements are the older, shorter struct: its struct_size is the stride */
    size_t stride = offsetof(uvmrt_tensor_info_t, where), count = LAYERS * 3, got = 0;
    unsigned char *arr = malloc(stride * count + 64);
    cr_assert_not_null(arr);
    memset(arr, 0xAB, stride * count + 64);
    memcpy(arr, &stride, sizeof stride);
    cr_assert_eq(uvmrt_memory_summary(n.ctx, (uvmrt_tensor_info_t *)(void *)arr, count, &got), UVMRT_OK, "%s", log_buf);
    cr_assert_eq(got, count);
    for (size_t i = 0; i < count; i++) {
        uvmrt_tensor_info_t e;
        memcpy(&e, arr + i * stride, stride);
        cr_expect_eq(e.struct_size, stride);
        cr_expect_eq(e.layer, n.layer[i / 3], "element %zu", i);
        cr_expect_eq(e.size_bytes, (i % 3 + 1) * MIB, "element %zu", i);
    }
    cr_expect(all_bytes(arr + stride * count, 64, 0xAB), "written past the array");
    free(arr);
    uvmrt_context_destroy(n.ctx);
}

/* ------------------------------------------------------------------ a newer header */
/* A struct_size larger than the library knows: UVMRT_ERR_INVALID naming the struct and
 * both sizes, nothing written; 0 (not set): the same. */
#define EXPECT_REFUSED(type, call_with_out)                                                               \
    do {                                                                                                  \
        size_t lib = uvmrt_abi_struct_size(#type), sizes[2] = {lib + 16, 0};                              \
        for (int i = 0; i < 2; i++) {                                                                     \
            unsigned char *b = malloc(lib + 16);                                                          \
            memset(b, 0xAB, lib + 16);                                                                    \
            memcpy(b, &sizes[i], sizeof sizes[i]);                                                        \
            type *out = (type *)(void *)b;                                                                \
            log_len = 0;                                                                                  \
            log_buf[0] = '\0';                                                                            \
            cr_expect_eq(call_with_out, UVMRT_ERR_INVALID, #type " struct_size %zu", sizes[i]);           \
            cr_expect(log_has(#type ".struct_size is %zu", sizes[i]), "log: %s", log_buf);                \
            cr_expect(log_has("%zu bytes", lib), "the library's size named; log: %s", log_buf);           \
            cr_expect(all_bytes(b + sizeof(size_t), lib + 16 - sizeof(size_t), 0xAB), #type ": written"); \
            free(b);                                                                                      \
        }                                                                                                 \
    } while (0)

static uvmrt_status_t no_rehearsal(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    (void)model, (void)values, (void)steps, (void)user;
    cr_assert_fail("uvmrt_choose rehearsed with an out it refuses");
    return UVMRT_ERR_INVALID;
}

Test(abi, a_newer_output_struct_is_refused_by_name_and_sizes)
{
    net_t n = net_make();
    net_steps(&n, 1);
    size_t k = 0;
    EXPECT_REFUSED(uvmrt_summary_t, uvmrt_summary_get(n.ctx, out));
    EXPECT_REFUSED(uvmrt_step_stats_t, uvmrt_step_stats_get(n.ctx, 0, out));
    EXPECT_REFUSED(uvmrt_layer_stats_t, uvmrt_layer_stats_get(n.ctx, 0, UVMRT_PHASE_FORWARD, out));
    EXPECT_REFUSED(uvmrt_memory_stats_t, uvmrt_memory_stats_get(n.ctx, out));
    EXPECT_REFUSED(uvmrt_tensor_info_t, uvmrt_memory_summary(n.ctx, out, 1, &k));
    EXPECT_REFUSED(uvmrt_choice_t, uvmrt_choose(n.ctx, NULL, 0, no_rehearsal, NULL, out));
    uvmrt_context_destroy(n.ctx);
}

Test(abi, a_newer_input_struct_is_refused_and_nothing_changes)
{
    uvmrt_params_t p;
    sim_params(&p);
    size_t lib = uvmrt_abi_struct_size("uvmrt_params_t");
    unsigned char *big = calloc(1, lib + 16);
    memcpy(big, &p, sizeof p);
    memcpy(big, &(size_t){lib + 16}, sizeof(size_t));
    uvmrt_context_t *ctx = (uvmrt_context_t *)&p; /* must become NULL */
    cr_expect_eq(uvmrt_context_create((uvmrt_params_t *)(void *)big, &ctx), UVMRT_ERR_INVALID);
    cr_expect_null(ctx);
    cr_expect(log_has("uvmrt_params_t.struct_size is %zu bytes, larger than this library's uvmrt_params_t (%zu "
                      "bytes)",
                      lib + 16, lib),
              "log: %s", log_buf);
    free(big);

    net_t n = net_make();
    net_steps(&n, 1);
    cr_assert_eq(uvmrt_step_begin(n.ctx), UVMRT_OK);
    lib = uvmrt_abi_struct_size("uvmrt_layer_call_t");
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, n.layer[0], UVMRT_PHASE_FORWARD, NULL);
    big = calloc(1, lib + 16);
    memcpy(big, &c, sizeof c);
    memcpy(big, &(size_t){lib + 16}, sizeof(size_t));
    log_len = 0;
    cr_expect_eq(uvmrt_layer_begin(n.ctx, (uvmrt_layer_call_t *)(void *)big), UVMRT_ERR_INVALID);
    cr_expect(log_has("uvmrt_layer_call_t.struct_size is %zu", lib + 16), "log: %s", log_buf);
    free(big);
    /* the context is as before: the same call with its own size goes through */
    cr_assert_eq(uvmrt_layer_begin(n.ctx, &c), UVMRT_OK, "%s", log_buf);
    cr_assert_eq(uvmrt_layer_end(n.ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_step_end(n.ctx), UVMRT_OK);
    uvmrt_context_destroy(n.ctx);

    uvmrt_adamw_t hp;
    uvmrt_adamw_init(&hp);
    hp.struct_size = uvmrt_abi_struct_size("uvmrt_adamw_t") + 8;
    float w = 1, m = 0, v = 0, g = 1;
    unsigned char *hb = calloc(1, hp.struct_size);
    memcpy(hb, &hp, sizeof hp);
    cr_expect_eq(uvmrt_adamw_cpu((uvmrt_adamw_t *)(void *)hb, &w, &m, &v, &g, 1, NULL), UVMRT_ERR_INVALID);
    cr_expect_eq(w, 1.0f, "nothing updated");
    free(hb);

    /* a profile or its metadata of a newer header: no file written */
    char path[] = "/tmp/uvmrt-abi-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(path);
    lib = uvmrt_abi_struct_size("uvmrt_profile_t");
    unsigned char *pb = calloc(1, lib + 8);
    memcpy(pb, uvmrt_profile_find("h200"), sizeof(uvmrt_profile_t));
    memcpy(pb, &(size_t){lib + 8}, sizeof(size_t));
    cr_expect_eq(uvmrt_profile_save((uvmrt_profile_t *)(void *)pb, NULL, path), UVMRT_ERR_INVALID);
    uvmrt_profile_meta_t meta = UVMRT_STRUCT_INIT(uvmrt_profile_meta_t);
    meta.struct_size = uvmrt_abi_struct_size("uvmrt_profile_meta_t") + 8;
    unsigned char *mb = calloc(1, meta.struct_size);
    memcpy(mb, &meta, sizeof meta);
    cr_expect_eq(uvmrt_profile_save(uvmrt_profile_find("h200"), (uvmrt_profile_meta_t *)(void *)mb, path),
                 UVMRT_ERR_INVALID);
    cr_expect_neq(access(path, F_OK), 0, "a file was written");
    free(pb);
    free(mb);
}
