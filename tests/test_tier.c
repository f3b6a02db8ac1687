/*
 * test_tier.c -- tensors on the disk tier (uvmrt_tensor_set_tier, src/exec/tier.c) on sim:
 * a small MLP trained with its AdamW moments (and its weights) in files gives losses
 * bit for bit those without the tier, on both engines; the host pages are given back
 * between uses (so the bytes really come from the files); the counters count the
 * bytes each way per step; a failed read or write-back inside a step is an error that
 * names the tensor and layer and loses nothing, also when the disk fills up mid-run
 * (ENOSPC through the seam, or the kernel's RLIMIT_FSIZE: no mount needed); the API's
 * refusals change nothing.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <jansson.h>

#include "faultinject.h"
#include "helpers.h"
#include "internal.h"
#include "monitor.h"
#include "spill_seam.h"

enum { L = 3, H = 96, N = 8, STEPS = 5 };

/* ------------------------------------------------------------------ the model */
typedef struct mlp {
    uvmrt_context_t *ctx;
    uvmrt_tensor_t *w[L], *g[L], *m[L], *v[L];
    float x[N * H], y[N * H];
    float act[L + 1][N * H]; /* activations: the trainer's own memory */
    float dact[N * H], dnext[N * H];
} mlp_t;

static char spill_dir[256];

static void make_dir(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(spill_dir, sizeof spill_dir, "%s/uvmrt-test-tier.XXXXXX", t && *t ? t : "/tmp");
    cr_assert_not_null(mkdtemp(spill_dir));
    seam_reset();
    log_reset();
}

static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* tier: 0 none, 1 the moments, 2 the moments and the weights, 3 the moments put there
 * as zeros (UVMRT_TIER_DISK_ZERO, never written by the trainer: new managed memory is
 * not zero on every backend, so the tier must make them so) and the weights; fi: over
 * the fault-injecting backend (tests/faultinject.c) around sim */
static uvmrt_backend_ops_t fi_ops;
static mlp_t *mlp_create_on(int tier, const char *dir, int fi_backend)
{
    mlp_t *n = calloc(1, sizeof *n);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    p.log_level = UVMRT_LOG_INFO;
    if (fi_backend) {
        fi_ops = fi_wrap(&uvmrt__backend_sim);
        cr_assert_eq(uvmrt__context_create_with(&p, &fi_ops, &n->ctx), UVMRT_OK, "%s", log_text());
    } else {
        cr_assert_eq(uvmrt_context_create(&p, &n->ctx), UVMRT_OK, "%s", log_text());
    }
    if (dir != NULL) snprintf(n->ctx->cfg.spill_dir, sizeof n->ctx->cfg.spill_dir, "%s", dir); /* as UVMRT_SPILL_DIR */
    uvmrt__tier_set_ops(n->ctx, &seam_ops);
    uint64_t s = 12345;
    for (int l = 0; l < L; l++) {
        char name[32];
        snprintf(name, sizeof name, "block%d", l);
        int layer;
        cr_assert_eq(uvmrt_layer_add(n->ctx, name, &layer), UVMRT_OK);
        uvmrt_tensor_desc_t d[4] = {{"w", layer, UVMRT_ROLE_WEIGHT, H * H * 4},
                                    {"g", layer, UVMRT_ROLE_GRADIENT, H * H * 4},
                                    {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, H * H * 4},
                                    {"adam_v", layer, UVMRT_ROLE_OPTIMIZER_STATE, H * H * 4}};
        uvmrt_tensor_t *t[4];
        cr_assert_eq(uvmrt_tensors_alloc(n->ctx, 4, d, t), UVMRT_OK);
        n->w[l] = t[0], n->g[l] = t[1], n->m[l] = t[2], n->v[l] = t[3];
        float *w = uvmrt_tensor_ptr(t[0]);
        for (int i = 0; i < H * H; i++) w[i] = ((float)(xorshift64(&s) % 2001) - 1000.0f) / 1000.0f / sqrtf(H);
        memset(uvmrt_tensor_ptr(t[2]), tier == 3 ? 0x7f : 0, H * H * 4); /* 3: garbage the tier drops */
        memset(uvmrt_tensor_ptr(t[3]), tier == 3 ? 0x7f : 0, H * H * 4);
        uvmrt_tensor_t *on_disk[3] = {t[2], t[3], t[0]};
        for (int k = 0; k < (tier == 0 ? 0 : tier == 1 ? 2 : 3); k++) {
            cr_assert_eq(uvmrt_tensor_set_placement(n->ctx, on_disk[k], UVMRT_PLACE_HOST), UVMRT_OK);
            uvmrt_tier_t to = tier == 3 && k < 2 ? UVMRT_TIER_DISK_ZERO : UVMRT_TIER_DISK;
            cr_assert_eq(uvmrt_tensor_set_tier(n->ctx, on_disk[k], to), UVMRT_OK, "%s", log_text());
        }
    }
    for (int i = 0; i < N * H; i++) {
        n->x[i] = sinf((float)i * 0.37f);
        n->y[i] = cosf((float)i * 0.11f) * 0.5f;
    }
    return n;
}
static mlp_t *mlp_create(int tier, const char *dir) { return mlp_create_on(tier, dir, 0); }

/* A failure of the disk tier (UVMRT_ERR_IO) inside a step is counted, its message
 * checked, and the same call made again, as a trainer that retries would: the failed
 * call changed nothing, so the run goes on as if it had not failed. */
static int io_failures, backend_failures;
static const char *io_cause; /* when set: each failure's message also says it ("No space left") */
static uvmrt_status_t retried(uvmrt_status_t st, const char *what)
{
    if (st == UVMRT_ERR_BACKEND && fi.last_failed) { /* an injected backend failure: the same */
        backend_failures++;
        return UVMRT_ERR_IO;
    }
    if (st != UVMRT_ERR_IO) return st;
    io_failures++;
    cr_assert(log_contains("adam_") && log_contains("block") && log_contains("uvmrt-spill."),
              "%s: the message names the tensor, its layer and the file: %s", what, log_text());
    cr_assert(io_cause == NULL || log_contains(io_cause), "%s: the message says '%s': %s", what, io_cause, log_text());
    log_reset();
    return UVMRT_ERR_IO;
}

static uvmrt_status_t call(mlp_t *n, int l, uvmrt_phase_t ph)
{
    uvmrt_layer_call_t c;
    uvmrt_layer_call_init(&c, l, ph, NULL);
    uvmrt_status_t st = uvmrt_layer_begin(n->ctx, &c);
    for (int k = 0; k < 2 * L && retried(st, "uvmrt_layer_begin") == UVMRT_ERR_IO; k++)
        st = uvmrt_layer_begin(n->ctx, &c);
    return st;
}

static uvmrt_status_t end_call(mlp_t *n)
{
    uvmrt_status_t st = uvmrt_layer_end(n->ctx);
    for (int k = 0; k < 2 * L && retried(st, "uvmrt_layer_end") == UVMRT_ERR_IO; k++) st = uvmrt_layer_end(n->ctx);
    return st;
}

/* One step; returns the loss (NAN when a call failed: *st says which status). */
static float mlp_step(mlp_t *n, uint64_t t, uvmrt_status_t *st)
{
    *st = uvmrt_step_begin(n->ctx);
    if (*st != UVMRT_OK) return NAN;
    memcpy(n->act[0], n->x, sizeof n->x);
    for (int l = 0; l < L; l++) {
        if ((*st = call(n, l, UVMRT_PHASE_FORWARD)) != UVMRT_OK) return NAN;
        const float *w = uvmrt_tensor_ptr(n->w[l]);
        for (int r = 0; r < N; r++)
            for (int j = 0; j < H; j++) {
                float a = 0;
                for (int k = 0; k < H; k++) a += n->act[l][r * H + k] * w[k * H + j];
                n->act[l + 1][r * H + j] = tanhf(a);
            }
        if ((*st = end_call(n)) != UVMRT_OK) return NAN;
    }
    float loss = 0;
    for (int i = 0; i < N * H; i++) {
        float d = n->act[L][i] - n->y[i];
        loss += d * d;
        n->dact[i] = 2 * d / (N * H);
    }
    for (int l = L - 1; l >= 0; l--) {
        if ((*st = call(n, l, UVMRT_PHASE_BACKWARD)) != UVMRT_OK) return NAN;
        const float *w = uvmrt_tensor_ptr(n->w[l]);
        float *g = uvmrt_tensor_ptr(n->g[l]);
        for (int i = 0; i < N * H; i++) n->dact[i] *= 1 - n->act[l + 1][i] * n->act[l + 1][i]; /* through tanh */
        for (int k = 0; k < H; k++)
            for (int j = 0; j < H; j++) {
                float a = 0;
                for (int r = 0; r < N; r++) a += n->act[l][r * H + k] * n->dact[r * H + j];
                g[k * H + j] = a;
            }
        for (int r = 0; r < N; r++)
            for (int k = 0; k < H; k++) {
                float a = 0;
                for (int j = 0; j < H; j++) a += n->dact[r * H + j] * w[k * H + j];
                n->dnext[r * H + k] = a;
            }
        memcpy(n->dact, n->dnext, sizeof n->dact);
        if ((*st = end_call(n)) != UVMRT_OK) return NAN;
    }
    for (int l = 0; l < L; l++) {
        if ((*st = call(n, l, UVMRT_PHASE_OPTIMIZER)) != UVMRT_OK) return NAN;
        uvmrt_adamw_t hp;
        uvmrt_adamw_init(&hp);
        hp.lr = 1e-2;
        hp.step = t;
        hp.threads = 1;
        *st = uvmrt_adamw_cpu(&hp, uvmrt_tensor_ptr(n->w[l]), uvmrt_tensor_ptr(n->m[l]), uvmrt_tensor_ptr(n->v[l]),
                              uvmrt_tensor_ptr(n->g[l]), H * H, NULL);
        cr_assert_eq(*st, UVMRT_OK);
        if ((*st = end_call(n)) != UVMRT_OK) return NAN;
    }
    *st = uvmrt_step_end(n->ctx);
    for (int k = 0; k < 2 * L && retried(*st, "uvmrt_step_end") == UVMRT_ERR_IO; k++) *st = uvmrt_step_end(n->ctx);
    return loss;
}

static void train(int tier, int block_uring, float *losses)
{
    seam.block_uring = block_uring;
    mlp_t *n = mlp_create(tier, tier ? spill_dir : NULL);
    char rec[400];
    snprintf(rec, sizeof rec, "%s.rec.json", spill_dir); /* the recorded step (UVMRT_RECORD) */
    snprintf(n->ctx->cfg.record, sizeof n->ctx->cfg.record, "%s", rec);
    for (int s = 0; s < STEPS; s++) {
        uvmrt_status_t st;
        losses[s] = mlp_step(n, (uint64_t)s + 1, &st);
        cr_assert_eq(st, UVMRT_OK, "tier %d step %d: %s", tier, s, log_text());
    }
    /* the record names the tensors on the disk tier ("tier": "disk"), no others */
    json_error_t jerr;
    json_t *r = json_load_file(rec, 0, &jerr);
    cr_assert_not_null(r, "%s: %s", rec, jerr.text);
    size_t i, on_disk = 0;
    json_t *t;
    json_array_foreach(json_object_get(r, "tensors"), i, t) {
        const char *tr = json_string_value(json_object_get(t, "tier"));
        cr_assert(tr == NULL || strcmp(tr, "disk") == 0, "tier '%s'", tr);
        on_disk += tr != NULL;
    }
    cr_assert_eq(on_disk, (size_t)(tier == 0 ? 0 : tier == 1 ? 2 * L : 3 * L), "tier %d: %zu on disk", tier, on_disk);
    json_decref(r);
    remove(rec);
    if (tier) {
        uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
        cr_assert_eq(uvmrt_summary_get(n->ctx, &sum), UVMRT_OK);
        /* every disk tensor read once per call that uses it and written after its update */
        uint64_t fp = footprint_of(H * H * 4);
        uint64_t reads = tier == 1 ? 2 * L * fp : 5 * L * fp; /* w: forward, backward, optimizer */
        uint64_t writes = tier == 1 ? 2 * L * fp : 3 * L * fp;
        cr_assert_eq(sum.spill_read_bytes, STEPS * reads, "read %llu", (unsigned long long)sum.spill_read_bytes);
        cr_assert_eq(sum.spill_write_bytes, STEPS * writes);
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(n->ctx, 2, &ss), UVMRT_OK);
        cr_assert_eq(ss.spill_read_bytes, reads);
        cr_assert_eq(ss.spill_write_bytes, writes);
        cr_assert_leq(n->ctx->tier.read_ahead, sum.spill_read_bytes);
        uvmrt_layer_stats_t ls = UVMRT_STRUCT_INIT(uvmrt_layer_stats_t);
        cr_assert_eq(uvmrt_layer_stats_get(n->ctx, 1, UVMRT_PHASE_OPTIMIZER, &ls), UVMRT_OK);
        cr_assert_eq(ls.spill_write_bytes, STEPS * (tier == 1 ? 2 : 3) * fp);
        /* the reports: traffic per step and the drive wear it projects */
        char path[400], *text = NULL;
        snprintf(path, sizeof path, "%s.json", spill_dir);
        cr_assert_eq(uvmrt_report_write(n->ctx, "json", path), UVMRT_OK);
        json_error_t err;
        json_t *root = json_load_file(path, 0, &err), *dt = json_object_get(root, "disk_tier");
        cr_assert_not_null(dt, "a disk_tier object");
        cr_assert_str_eq(json_string_value(json_object_get(dt, "engine")),
                         block_uring ? "threads" : uvmrt__spill_engine(n->ctx->tier.sp));
        cr_assert_eq(json_real_value(json_object_get(dt, "write_bytes_per_step")), (double)writes);
        cr_assert_eq(json_real_value(json_object_get(dt, "read_bytes_per_step")), (double)reads);
        cr_assert_gt(json_real_value(json_object_get(dt, "tb_written_per_day")), 0.0);
        json_decref(root);
        snprintf(path, sizeof path, "%s.txt", spill_dir);
        cr_assert_eq(uvmrt_report_write(n->ctx, "text", path), UVMRT_OK);
        text = file_slurp(path);
        cr_assert(strstr(text, "disk tier (") && strstr(text, "TB written per day"), "%s", text);
        free(text);
        unlink(path);
        snprintf(path, sizeof path, "%s.json", spill_dir);
        unlink(path);
        /* between steps, with the write-backs done, the host pages hold nothing: the
         * next step's bytes come from the files */
        cr_assert_eq(uvmrt__tier_poll(n->ctx, 1), UVMRT_OK);
        const float *m = uvmrt_tensor_ptr(n->m[0]);
        float sum_abs = 0;
        for (int i = 0; i < H * H; i++) sum_abs += fabsf(m[i]);
        cr_assert_eq(sum_abs, 0.0f, "the host copy of a disk tensor was given back");
        cr_assert_eq(uvmrt_tensor_tier(n->m[0]), UVMRT_TIER_DISK);
        /* back to memory: the contents return */
        cr_assert_eq(uvmrt_tensor_set_tier(n->ctx, n->m[0], UVMRT_TIER_MEMORY), UVMRT_OK);
        sum_abs = 0;
        for (int i = 0; i < H * H; i++) sum_abs += fabsf(m[i]);
        cr_assert_gt(sum_abs, 0.0f);
        cr_assert_eq(entries(spill_dir), 1, "one private subdirectory");
        cr_assert(log_contains(block_uring ? "engine threads" : "engine "), "%s", log_text());
    }
    uvmrt_context_destroy(n->ctx);
    free(n);
    if (tier) cr_assert_eq(entries(spill_dir), 0, "the spill directory is removed at destroy");
}

/* The moments on the disk tier, on both engines (io_uring, then the thread pool): run
 * gets a fresh model and the losses without the tier. */
typedef void (*engine_run_t)(mlp_t *n, int blocked, const float *base, const void *arg);
static void each_engine(engine_run_t run, const void *arg)
{
    make_dir();
    float base[STEPS];
    train(0, 0, base);
    for (int blocked = 0; blocked < 2; blocked++) {
        seam.block_uring = blocked;
        mlp_t *n = mlp_create(1, spill_dir);
        run(n, blocked, base, arg);
        uvmrt_context_destroy(n->ctx);
        free(n);
    }
    rmdir(spill_dir);
}

/* In a step that follows the record, the record's next call's disk tensors are read
 * while the current call works: here the first optimizer call's moments start reading at
 * the backward call before it (nothing else is held then, once the last step's
 * write-backs are done: waited for between steps, so that the count does not depend on
 * the disk's speed), and later moments when the window has room. The losses stay those
 * without the tier, and every byte is still counted at the call that uses it. */
static void reads_ahead(mlp_t *n, int blocked, const float *base, const void *arg)
{
    (void)arg;
    uint64_t fp = footprint_of(H * H * 4), before = 0;
    for (int s = 0; s < STEPS; s++) {
        uvmrt_status_t st;
        float loss = mlp_step(n, (uint64_t)s + 1, &st);
        cr_assert_eq(st, UVMRT_OK, "%s", log_text());
        cr_assert(memcmp(&loss, &base[s], sizeof loss) == 0, "engine %d step %d", blocked, s);
        cr_assert_eq(uvmrt__tier_poll(n->ctx, 1), UVMRT_OK);
        uint64_t ahead = n->ctx->tier.read_ahead - before;
        before = n->ctx->tier.read_ahead;
        if (s == 0) cr_assert_eq(ahead, 0, "the recorded step has no record to read ahead by");
        if (s >= 2)
            cr_assert_geq(ahead, 2 * fp, "engine %d step %d: %llu bytes read ahead", blocked, s,
                          (unsigned long long)ahead);
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(n->ctx, (uint64_t)s, &ss), UVMRT_OK);
        cr_assert_eq(ss.spill_read_bytes, 2 * L * fp, "every moment counted once, at its call");
    }
}
Test(tier, a_planned_step_reads_the_next_calls_disk_tensors_ahead) { each_engine(reads_ahead, NULL); }

Test(tier, mlp_losses_bitwise_equal_with_the_moments_and_weights_on_disk)
{
    make_dir();
    float base[STEPS], moments[STEPS], all[STEPS], threads[STEPS], zeroed[STEPS];
    train(0, 0, base);
    train(1, 0, moments);
    train(2, 0, all);
    train(2, 1, threads);
    train(3, 0, zeroed);
    cr_assert_lt(base[STEPS - 1], base[0], "the loss falls");
    for (int s = 0; s < STEPS; s++) {
        cr_assert(memcmp(&base[s], &moments[s], sizeof(float)) == 0, "step %d: %.9g vs %.9g", s, base[s], moments[s]);
        cr_assert(memcmp(&base[s], &all[s], sizeof(float)) == 0, "step %d: %.9g vs %.9g", s, base[s], all[s]);
        cr_assert(memcmp(&base[s], &threads[s], sizeof(float)) == 0, "step %d", s);
        cr_assert(memcmp(&base[s], &zeroed[s], sizeof(float)) == 0, "step %d: %.9g vs %.9g (moments put there "
                  "as zeros)", s, base[s], zeroed[s]);
    }
    rmdir(spill_dir);
}

/* The k-th read or write chunk fails, for every k over the run: the call or step end
 * where it surfaces fails with UVMRT_ERR_IO naming the tensor, its layer and the file,
 * exactly once; made again, the run goes on, and its losses equal those of a run
 * without failures bit for bit (a failed read left the file as it was; a failed write
 * kept the host copy, written again after its next use). */
static void fail_sweep(int write)
{
    make_dir();
    float base[STEPS];
    train(0, 0, base);
    const int per_run = STEPS * 2 * L; /* one chunk per moment tensor and step */
    for (int k = 1; k <= per_run; k++) {
        mlp_t *n = mlp_create(1, spill_dir);
        seam_arm(write ? SEAM_WRITE : SEAM_READ, k, -EIO); /* set_tier's own writes are not counted */
        io_failures = 0;
        log_reset();
        for (int s = 0; s < STEPS; s++) {
            uvmrt_status_t st;
            float loss = mlp_step(n, (uint64_t)s + 1, &st);
            cr_assert_eq(st, UVMRT_OK, "k=%d step %d: %s", k, s, log_text());
            cr_assert(memcmp(&loss, &base[s], sizeof loss) == 0, "k=%d step %d: %.9g vs %.9g", k, s, loss, base[s]);
        }
        /* a write-back of the last step fails after its end: it surfaces when waited for */
        if (retried(uvmrt__tier_poll(n->ctx, 1), "the last write-backs") == UVMRT_ERR_IO)
            cr_assert(write, "k=%d: only a write can fail after the step", k);
        cr_assert_eq(io_failures, 1, "k=%d: the injected failure surfaced once (%d)", k, io_failures);
        uvmrt_context_destroy(n->ctx);
        free(n);
        seam_arm(-1, 0, 0);
    }
    rmdir(spill_dir);
}

/* Every backend call the disk tier adds (the stream sync before a write-back, the
 * discard that gives a written tensor's host pages back and the sync after it) and the
 * others of the same steps fail once, for every k: the call fails and changes nothing,
 * made again it succeeds, or the tier keeps the host copy (counted); the losses are
 * those of a run without failures. */
static void tier_backend_sweep(int op)
{
    make_dir();
    float base[STEPS];
    train(0, 0, base);
    mlp_t *n = mlp_create_on(1, spill_dir, 1);
    fi_arm(-1, 0, 0, 0);
    for (int s = 0; s < STEPS; s++) {
        uvmrt_status_t st;
        mlp_step(n, (uint64_t)s + 1, &st);
        cr_assert_eq(st, UVMRT_OK);
    }
    uint64_t calls = fi.calls[op];
    uvmrt_context_destroy(n->ctx);
    free(n);
    if (op == FI_STREAM_SYNC) cr_assert_geq(calls, (uint64_t)(STEPS * L), "a sync before each write-back call at least");
    else cr_assert_gt(calls, 0, "no %s", fi_op_names[op]);
    for (uint64_t k = 1; k <= calls; k++) {
        n = mlp_create_on(1, spill_dir, 1);
        fi_arm(op, k, 0, 0);
        backend_failures = io_failures = 0;
        log_reset();
        for (int s = 0; s < STEPS; s++) {
            uvmrt_status_t st;
            float loss = mlp_step(n, (uint64_t)s + 1, &st);
            cr_assert_eq(st, UVMRT_OK, "k=%llu step %d: %s", (unsigned long long)k, s, log_text());
            cr_assert(memcmp(&loss, &base[s], sizeof loss) == 0, "k=%llu step %d", (unsigned long long)k, s);
        }
        /* it failed a call (made again), or a call completed without it (counted); or
         * this run made fewer syncs than k: a dropped host copy's discard is waited for
         * when its write-back is found done, which depends on the disk's timing */
        uvmrt_summary_t sum = UVMRT_STRUCT_INIT(uvmrt_summary_t);
        cr_assert_eq(uvmrt_summary_get(n->ctx, &sum), UVMRT_OK);
        if (!fi.fired) {
            cr_assert_lt(fi.calls[op], k, "k=%llu: not fired", (unsigned long long)k);
            cr_assert_eq(backend_failures + (int)sum.backend_errors, 0);
            uvmrt_context_destroy(n->ctx);
            free(n);
            continue;
        }
        cr_assert_eq(backend_failures + (int)sum.backend_errors, 1, "k=%llu: %d failures, %llu absorbed: %s",
                     (unsigned long long)k, backend_failures, (unsigned long long)sum.backend_errors, log_text());
        cr_assert_eq(io_failures, 0);
        uvmrt_context_destroy(n->ctx);
        free(n);
    }
    rmdir(spill_dir);
}

Test(tier, kth_backend_call_fails_for_every_k_with_the_tier_on) { tier_backend_sweep(FI_STREAM_SYNC); }
Test(tier, kth_discard_fails_for_every_k_with_the_tier_on) { tier_backend_sweep(FI_DISCARD); }
Test(tier, kth_write_back_fails_for_every_k) { fail_sweep(1); }

/* The disk fills up in the middle of a run and space comes back later; the moments'
 * write-backs fail meanwhile. Each failure surfaces as UVMRT_ERR_IO naming the tensor,
 * its layer, the file and the cause, the contents stay in host memory, and once the
 * writes succeed again the run reads its files back: the losses of every step are those
 * without the tier, bit for bit. full(n, on) fills the disk, on = 0 frees it again. */
typedef struct fill {
    void (*full)(mlp_t *n, int on);
    const char *cause;
} fill_t;

static void fills_mid_run(mlp_t *n, int blocked, const float *base, const void *arg)
{
    const fill_t *f = arg;
    io_failures = 0;
    io_cause = f->cause;
    log_reset();
    for (int s = 0; s < STEPS; s++) {
        if (s == 1) f->full(n, 1); /* after step 1's reads and write-backs */
        if (s == 3) f->full(n, 0);
        uvmrt_status_t st;
        float loss = mlp_step(n, (uint64_t)s + 1, &st);
        cr_assert_eq(st, UVMRT_OK, "engine %d step %d: %s", blocked, s, log_text());
        cr_assert(memcmp(&loss, &base[s], sizeof loss) == 0, "engine %d step %d: %.9g vs %.9g", blocked, s, loss,
                  base[s]);
    }
    cr_assert_eq(retried(uvmrt__tier_poll(n->ctx, 1), "the last write-backs"), UVMRT_OK);
    cr_assert_geq(io_failures, 2, "engine %d: the write-backs of both full steps failed (%d)", blocked, io_failures);
    uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    cr_assert_eq(uvmrt_step_stats_get(n->ctx, STEPS - 1, &ss), UVMRT_OK);
    cr_assert_eq(ss.spill_read_bytes, 2 * L * footprint_of(H * H * 4), "the last step read every moment back");
    io_cause = NULL;
}

static void fill_mid_run(void (*full)(mlp_t *n, int on), const char *cause)
{
    fill_t f = {full, cause};
    each_engine(fills_mid_run, &f);
}

/* Through the seam: every write from the first on gives ENOSPC, as a full filesystem does. */
static void full_seam(mlp_t *n, int on)
{
    (void)n;
    seam_arm(on ? SEAM_WRITE : -1, 1, on ? -ENOSPC : 0);
    seam.fail_on = on;
}
Test(tier, a_disk_that_fills_up_mid_run_loses_nothing) { fill_mid_run(full_seam, "No space left"); }

/* Through the kernel, no seam and no mount: RLIMIT_FSIZE below the files' sizes makes
 * every write past it fail (EFBIG, a short count; SIGXFSZ ignored), as a disk without
 * room for the rest would. */
static struct rlimit fsize_before;
static void full_rlimit(mlp_t *n, int on)
{
    (void)n;
    if (on) {
        signal(SIGXFSZ, SIG_IGN);
        cr_assert_eq(getrlimit(RLIMIT_FSIZE, &fsize_before), 0);
        struct rlimit small = {UVMRT_SPILL_ALIGN, fsize_before.rlim_max};
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    } else {
        cr_assert_eq(setrlimit(RLIMIT_FSIZE, &fsize_before), 0);
    }
}
Test(tier, a_file_size_limit_mid_run_loses_nothing) { fill_mid_run(full_rlimit, "short write"); }
Test(tier, kth_read_fails_for_every_k) { fail_sweep(0); }

Test(tier, refusals_change_nothing)
{
    make_dir();
    mlp_t *n = mlp_create(0, NULL);
    uvmrt_context_t *ctx = n->ctx;
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK), UVMRT_ERR_CONFIG, "no UVMRT_SPILL_DIR");
    cr_assert(log_contains("UVMRT_SPILL_DIR"), "%s", log_text());
    snprintf(ctx->cfg.spill_dir, sizeof ctx->cfg.spill_dir, "%s", spill_dir);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK), UVMRT_ERR_STATE, "not placed on the host");
    cr_assert(log_contains("UVMRT_PLACE_HOST"), "%s", log_text());
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], (uvmrt_tier_t)7), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, (uvmrt_tensor_t *)n, UVMRT_TIER_DISK), UVMRT_ERR_NOT_FOUND);
    cr_assert_eq(uvmrt_tensor_set_tier(NULL, n->m[0], UVMRT_TIER_DISK), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt_tensor_tier(NULL), UVMRT_TIER_MEMORY);
    cr_assert_eq(uvmrt_tensor_tier(n->m[0]), UVMRT_TIER_MEMORY);
    cr_assert_eq(entries(spill_dir), 0, "nothing created by refused calls");
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, n->m[0], UVMRT_PLACE_HOST), UVMRT_OK);
    cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK), UVMRT_ERR_STATE, "inside a step");
    cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK);
    float *m = uvmrt_tensor_ptr(n->m[0]);
    for (int i = 0; i < H * H; i++) m[i] = (float)i;
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, n->m[0], UVMRT_PLACE_AUTO), UVMRT_ERR_STATE, "on disk: stays host");
    cr_assert_eq(uvmrt_tensor_placement(n->m[0]), UVMRT_PLACE_HOST);
    cr_assert_eq(m[5], 0.0f, "the host pages were given back");
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK_ZERO), UVMRT_ERR_STATE, "already on disk");
    cr_assert(log_contains("already on the disk tier"), "%s", log_text());
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_MEMORY), UVMRT_OK);
    for (int i = 0; i < H * H; i++) cr_assert_eq(m[i], (float)i, "the refused zero changed nothing");
    /* a freed disk tensor takes its file with it */
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK), UVMRT_OK);
    char sub[600];
    snprintf(sub, sizeof sub, "%s", uvmrt__spill_path(ctx->tier.sp));
    cr_assert_eq(entries(sub), 1);
    cr_assert_eq(uvmrt_tensor_free(ctx, n->m[0]), UVMRT_OK);
    cr_assert_eq(entries(sub), 0);
    uvmrt_context_destroy(ctx);
    free(n);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}

/* UVMRT_TIER_DISK_ZERO: the file is made and its space reserved, but nothing is
 * written; the tensor reads back as zeros whatever it held; a failed file creation
 * leaves it in memory with its contents. */
Test(tier, a_tensor_put_there_as_zeros_is_not_written)
{
    make_dir();
    mlp_t *n = mlp_create(0, spill_dir);
    uvmrt_context_t *ctx = n->ctx;
    float *m = uvmrt_tensor_ptr(n->m[0]);
    for (int i = 0; i < H * H; i++) m[i] = (float)(i + 1);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, n->m[0], UVMRT_PLACE_HOST), UVMRT_OK);
    seam_arm(SEAM_FALLOCATE, 1, -ENOSPC);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK_ZERO), UVMRT_ERR_IO);
    cr_assert_eq(uvmrt_tensor_tier(n->m[0]), UVMRT_TIER_MEMORY);
    for (int i = 0; i < H * H; i++) cr_assert_eq(m[i], (float)(i + 1), "the refused call changed the contents");
    seam_reset();
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK_ZERO), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_tensor_tier(n->m[0]), UVMRT_TIER_DISK);
    cr_assert_eq(seam.calls[SEAM_WRITE], 0, "written: %d chunks", seam.calls[SEAM_WRITE]);
    cr_assert_eq(seam.calls[SEAM_FALLOCATE], 1, "its space reserved");
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_MEMORY), UVMRT_OK);
    cr_assert_gt(seam.calls[SEAM_READ], 0, "read back from the file");
    for (int i = 0; i < H * H; i++) cr_assert_eq(m[i], 0.0f, "m[%d] = %g", i, m[i]);
    uvmrt_context_destroy(ctx);
    free(n);
    cr_assert_eq(entries(spill_dir), 0);
    /* a discard that fails keeps the host copy, which the calls then use: zero too */
    n = mlp_create_on(0, spill_dir, 1);
    ctx = n->ctx;
    m = uvmrt_tensor_ptr(n->m[0]);
    for (int i = 0; i < H * H; i++) m[i] = (float)(i + 1);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, n->m[0], UVMRT_PLACE_HOST), UVMRT_OK);
    fi_arm(FI_DISCARD, 1, 0, 0);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, n->m[0], UVMRT_TIER_DISK_ZERO), UVMRT_OK, "%s", log_text());
    fi_arm(-1, 0, 0, 0);
    cr_assert(ctx->tier.n_disk == 1 && n->m[0]->host_valid, "the failed discard kept the host copy");
    for (int i = 0; i < H * H; i++) cr_assert_eq(m[i], 0.0f, "kept copy: m[%d] = %g", i, m[i]);
    uvmrt_context_destroy(ctx);
    free(n);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}

Test(tier, spill_dir_checked_at_creation)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    p.ignore_env = 0;
    env_clear_uvmrt();
    setenv("UVMRT_SPILL_DIR", "/nonexistent/uvmrt-spill", 1);
    uvmrt_context_t *ctx = NULL;
    log_reset();
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert(log_contains("UVMRT_SPILL_DIR") && log_contains("/nonexistent/uvmrt-spill"), "%s", log_text());
    setenv("UVMRT_SPILL_DIR", "AUTO", 1);
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    make_dir();
    setenv("UVMRT_SPILL_DIR", spill_dir, 1);
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_eq(entries(spill_dir), 0, "nothing is made before a tensor goes to disk");
    uvmrt_context_destroy(ctx);
    unsetenv("UVMRT_SPILL_DIR");
    rmdir(spill_dir);
}

/* After a test that mounts on spill_dir, even one that failed: nothing left mounted. */
static void unmount_dir(void)
{
    if (spill_dir[0] == '\0') return;
    umount2(spill_dir, MNT_DETACH);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", spill_dir);
    if (system(cmd) != 0) fprintf(stderr, "test_tier: could not remove %s\n", spill_dir);
}

/* A real full disk (a 160 KiB tmpfs: two files of 64 KiB; root only): the tensor that does not fit is refused
 * with a message naming it, the bytes needed and free, and is as it was. */
Test(tier, full_disk_refuses_the_tensor_and_changes_nothing, .fini = unmount_dir)
{
    make_dir();
    if (geteuid() != 0 || mount("uvmrt-tier-test", spill_dir, "tmpfs", 0, "size=160k,mode=0700") != 0) {
        rmdir(spill_dir);
        cr_skip_test("no small tmpfs (needs root)");
    }
    mlp_t *n = mlp_create(0, spill_dir);
    uvmrt_context_t *ctx = n->ctx;
    int ok = 0, refused = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 2; k++) {
            uvmrt_tensor_t *t = k ? n->v[l] : n->m[l];
            float *p = uvmrt_tensor_ptr(t);
            for (int i = 0; i < H * H; i++) p[i] = (float)(i + l);
            cr_assert_eq(uvmrt_tensor_set_placement(ctx, t, UVMRT_PLACE_HOST), UVMRT_OK);
            log_reset();
            uvmrt_status_t st = uvmrt_tensor_set_tier(ctx, t, UVMRT_TIER_DISK);
            if (st == UVMRT_OK) {
                ok++;
                continue;
            }
            refused++;
            cr_assert_eq(st, UVMRT_ERR_IO);
            cr_assert(log_contains("adam_") && log_contains("bytes free") && log_contains("No space left"), "%s",
                      log_text());
            cr_assert_eq(uvmrt_tensor_tier(t), UVMRT_TIER_MEMORY);
            for (int i = 0; i < H * H; i++) cr_assert_eq(p[i], (float)(i + l), "the data stays in memory");
        }
    cr_assert_gt(ok, 0);
    cr_assert_gt(refused, 0);
    /* the run trains on with what fits */
    uvmrt_status_t st;
    mlp_step(n, 1, &st);
    cr_assert_eq(st, UVMRT_OK, "%s", log_text());
    uvmrt_context_destroy(ctx);
    free(n);
    cr_assert_eq(umount(spill_dir), 0);
    rmdir(spill_dir);
}

/* A directory on a filesystem without O_DIRECT (ramfs when root, which has no direct
 * I/O; otherwise the seam refuses it): a warning, buffered files, and the run's losses
 * as without the tier. */
Test(tier, a_filesystem_without_o_direct_falls_back_to_buffered, .fini = unmount_dir)
{
    make_dir();
    float base[STEPS], buffered[STEPS];
    train(0, 0, base);
    int mounted = geteuid() == 0 && mount("uvmrt-tier-ramfs", spill_dir, "ramfs", 0, "mode=0700") == 0;
    if (!mounted) seam.refuse_direct = 1;
    log_reset();
    train(2, 0, buffered);
    cr_assert(log_contains("refuses O_DIRECT") && log_contains("page cache"), "%s", log_text());
    for (int s = 0; s < STEPS; s++) cr_assert(memcmp(&base[s], &buffered[s], sizeof(float)) == 0, "step %d", s);
    if (mounted) cr_assert_eq(umount(spill_dir), 0);
    seam.refuse_direct = 0;
    rmdir(spill_dir);
}

/* ------------------------------------------------------------------ the host budget */
/* LB layers of w, m and v, 2 MiB each, at a GPU budget of 8 MiB: allocated layer by
 * layer, with each layer's m and v put on the disk tier (tier) before the next. */
enum { LB = 6 };
static uvmrt_status_t budget_model(uvmrt_context_t **out, int tier, uvmrt_tensor_t *state[2 * LB], int *made)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 8 * MIB, NULL);
    p.host_budget_bytes = 18 * MIB;
    p.spill_dir = spill_dir;
    cr_assert_eq(uvmrt_context_create(&p, out), UVMRT_OK, "%s", log_text());
    uvmrt_context_t *ctx = *out;
    uvmrt__tier_set_ops(ctx, &seam_ops);
    *made = 0;
    for (int l = 0; l < LB; l++) {
        char name[32];
        snprintf(name, sizeof name, "block%d", l);
        int layer;
        cr_assert_eq(uvmrt_layer_add(ctx, name, &layer), UVMRT_OK);
        uvmrt_tensor_desc_t d[3] = {{"w", layer, UVMRT_ROLE_WEIGHT, 2 * MIB},
                                    {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB},
                                    {"adam_v", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB}};
        uvmrt_tensor_t *t[3];
        uvmrt_status_t st = uvmrt_tensors_alloc(ctx, 3, d, t);
        if (st != UVMRT_OK) return st;
        for (int k = 1; k < 3; k++) {
            state[2 * l + k - 1] = t[k];
            cr_assert_eq(uvmrt_tensor_set_placement(ctx, t[k], UVMRT_PLACE_HOST), UVMRT_OK);
            if (tier) cr_assert_eq(uvmrt_tensor_set_tier(ctx, t[k], UVMRT_TIER_DISK), UVMRT_OK, "%s", log_text());
        }
        (*made)++;
    }
    return UVMRT_OK;
}

Test(tier, a_host_budget_that_fits_only_with_the_tier_is_accepted)
{
    make_dir();
    uvmrt_context_t *ctx = NULL;
    uvmrt_tensor_t *state[2 * LB];
    int made = 0;
    /* without the tier: 36 MiB of tensors, 8 on the GPU, over 18 MiB of host memory */
    cr_assert_eq(budget_model(&ctx, 0, state, &made), UVMRT_ERR_BUDGET);
    cr_assert_lt(made, LB);
    cr_assert(log_contains("host budget of"), "%s", log_text());
    uvmrt_context_destroy(ctx);
    log_reset();
    /* with it: each layer's state leaves host memory but for two layers' copies in flight */
    cr_assert_eq(budget_model(&ctx, 1, state, &made), UVMRT_OK, "%s", log_text());
    cr_assert_eq(ctx->tier.window, 8 * MIB, "the two largest layers' tier bytes");
    cr_assert_eq(uvmrt__host_need_min(ctx, 0, 0), 4 * MIB + 8 * MIB, "12 MiB of w beyond the GPU's 8, the window");
    for (int s = 0; s < 4; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK, "%s", log_text());
        for (int ph = 0; ph < 3; ph++)
            for (int l = 0; l < LB; l++) {
                uvmrt_layer_call_t c;
                int layer = ph == 1 ? LB - 1 - l : l;
                uvmrt_layer_call_init(&c, layer, (uvmrt_phase_t)ph, NULL);
                cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
                cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
                /* the tier's copies in host memory never pass its window */
                uint64_t held = 0;
                for (int k = 0; k < 2 * LB; k++) held += state[k]->host_valid ? state[k]->footprint : 0;
                cr_assert_leq(held, ctx->tier.window, "step %d: %llu bytes held", s, (unsigned long long)held);
            }
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK, "%s", log_text());
    }
    cr_assert_gt(ctx->sched.plans_built, 0, "the steps ran planned");
    cr_assert_eq(ctx->sched.host_refused, 0, "%s", log_text());
    cr_assert_gt(uvmrt__plan_host_bytes(ctx), 8 * MIB);
    cr_assert_leq(uvmrt__plan_host_bytes(ctx), 18 * MIB);
    /* the memory stats count what is in host memory: never over the budget, and less
     * than the tensors off the GPU */
    uvmrt_memory_stats_t ms = UVMRT_STRUCT_INIT(uvmrt_memory_stats_t);
    cr_assert_eq(uvmrt_memory_stats_get(ctx, &ms), UVMRT_OK);
    cr_assert_leq(ms.peak_host_bytes, 18 * MIB, "peak %llu", (unsigned long long)ms.peak_host_bytes);
    cr_assert_lt(ms.host_bytes, 36 * MIB - ms.resident_bytes - 8 * MIB, "now %llu", (unsigned long long)ms.host_bytes);
    /* uvmrt-top's per-layer rows count a disk tensor as the plan's total does: the plan's
     * rows hold only the tensors it keeps off the GPU in host memory (the copies in
     * flight are the context's window), and now, only host copies that are there */
    uvmrt_mon_layer_t rows[LB];
    uvmrt__monitor_layer_host(ctx, rows, LB);
    uint64_t rows_plan = 0, rows_now = 0, disk = 0, in_memory = 0, off_now = 0;
    for (int l = 0; l < LB; l++) rows_plan += rows[l].plan_host_bytes, rows_now += rows[l].host_bytes;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t->magic != UVMRT_TENSOR_MAGIC) continue;
        if (!t->resident) off_now += t->footprint;
        if (!ctx->sched.plan_off_gpu[id]) continue;
        if (t->on_disk) disk += t->footprint;
        else in_memory += t->footprint;
    }
    cr_assert_gt(disk, 0, "the plan keeps state on the disk");
    cr_assert_eq(rows_plan, in_memory, "rows %llu, tensors in host memory %llu", (unsigned long long)rows_plan,
                 (unsigned long long)in_memory);
    cr_assert_lt(rows_now, off_now, "a disk tensor without its host copy is not in host memory");
    /* back in memory only as far as the host budget allows; a refusal changes nothing */
    int back = 0;
    uvmrt_status_t st = UVMRT_OK;
    char sub[600];
    snprintf(sub, sizeof sub, "%s", uvmrt__spill_path(ctx->tier.sp));
    for (; back < 2 * LB && st == UVMRT_OK; back++) st = uvmrt_tensor_set_tier(ctx, state[back], UVMRT_TIER_MEMORY);
    back--;
    cr_assert_eq(st, UVMRT_ERR_BUDGET, "%s", log_text());
    cr_assert_gt(back, 0);
    cr_assert(log_contains("host budget") && log_contains("adam_"), "%s", log_text());
    cr_assert_eq(uvmrt_tensor_tier(state[back]), UVMRT_TIER_DISK);
    cr_assert_eq(entries(sub), 2 * LB - back, "its file stays");
    uvmrt_context_destroy(ctx);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}

/* ------------------------------------------------------------------ the tier's cost, rehearsed */
/* The rehearsal: LB layers of w, m and v (2 MiB each; m and v on the host, and on the
 * disk tier when values[0] is 1), each layer's forward, backward and CPU update; it keeps
 * the disk bytes of its last step. */
typedef struct tier_rehearsal {
    uint64_t read, write;
} tier_rehearsal_t;

static uvmrt_status_t rehearse_tier(uvmrt_context_t *model, const int *values, int steps, void *user)
{
    tier_rehearsal_t *r = user;
    uvmrt_tensor_t *t[3];
    for (int l = 0; l < LB; l++) {
        char name[32];
        snprintf(name, sizeof name, "block%d", l);
        int layer;
        uvmrt_status_t st = uvmrt_layer_add(model, name, &layer);
        uvmrt_tensor_desc_t d[3] = {{"w", layer, UVMRT_ROLE_WEIGHT, 2 * MIB},
                                    {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB},
                                    {"adam_v", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB}};
        if (st == UVMRT_OK) st = uvmrt_tensors_alloc(model, 3, d, t);
        for (int k = 1; k < 3 && st == UVMRT_OK; k++) {
            st = uvmrt_tensor_set_placement(model, t[k], UVMRT_PLACE_HOST);
            if (st == UVMRT_OK && values[0]) st = uvmrt_tensor_set_tier(model, t[k], UVMRT_TIER_DISK);
        }
        if (st != UVMRT_OK) return st;
    }
    for (int s = 0; s < steps; s++) {
        uvmrt_status_t st = uvmrt_step_begin(model);
        for (int ph = 0; ph < 3 && st == UVMRT_OK; ph++)
            for (int l = 0; l < LB && st == UVMRT_OK; l++) {
                uvmrt_layer_call_t c;
                uvmrt_layer_call_init(&c, ph == 1 ? LB - 1 - l : l, (uvmrt_phase_t)ph, NULL);
                c.flops = 2e9;
                if (ph == 2) c.host_bytes = 28 * (uint64_t)MIB; /* AdamW's bytes on the CPU */
                st = uvmrt_layer_begin(model, &c);
                if (st == UVMRT_OK) st = uvmrt_layer_end(model);
            }
        if (st == UVMRT_OK) st = uvmrt_step_end(model);
        if (st != UVMRT_OK) return st;
    }
    uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
    uvmrt_status_t st = uvmrt_step_stats_get(model, (uint64_t)steps - 1, &ss);
    if (values[0]) r->read = ss.spill_read_bytes, r->write = ss.spill_write_bytes;
    return st;
}

/* The predicted step times of no tier (ns[0]) and the tier (ns[1]) with the disk at
 * read_bps and write_bps (0: the profile has no disk figures). */
static void choose_tier(double read_bps, double write_bps, const char *dir, double ns[2], tier_rehearsal_t *r)
{
    uvmrt_profile_t prof = *uvmrt_profile_find("h200");
    prof.name = "h200-disk";
    prof.disk_read_bps = read_bps;
    prof.disk_write_bps = write_bps;
    char path[400];
    snprintf(path, sizeof path, "%s.profile.json", spill_dir);
    cr_assert_eq(uvmrt_profile_save(&prof, NULL, path), UVMRT_OK);
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, path);
    p.spill_dir = dir;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    uvmrt_knob_t knob = {"tier", 2, (const int[]){0, 1}};
    uvmrt_choice_t out = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &knob, 1, rehearse_tier, r, &out), UVMRT_OK, "%s", log_text());
    for (size_t i = 0; i < 2; i++) {
        int v = -1;
        cr_assert_eq(uvmrt_choice_candidate(ctx, i, &v, &ns[i]), UVMRT_OK);
        cr_assert_eq(v, (int)i);
        cr_assert_gt(ns[i], 0, "candidate %zu fits: %s", i, log_text());
    }
    cr_assert_eq(out.values[0], ns[1] < ns[0] ? 1 : 0, "the faster one is chosen");
    uvmrt_context_destroy(ctx);
    unlink(path);
}

Test(tier, a_rehearsal_predicts_the_tiers_cost_at_the_disks_rates)
{
    make_dir();
    double ns[2];
    tier_rehearsal_t r = {0, 0};
    /* a disk of 1 GB/s each way: the step waits for the reads, and the drive carries
     * the writes too (one drive): at least the two, as uvmrt-plan adds them */
    choose_tier(1e9, 1e9, spill_dir, ns, &r);
    cr_assert_gt(r.read, 0, "the model counts the tier's bytes");
    cr_assert_gt(r.write, 0);
    double disk_ns = (double)(r.read + r.write) / 1e9 * 1e9;
    cr_assert_gt(ns[1], ns[0], "the tier costs time: %.0f against %.0f ns", ns[1], ns[0]);
    cr_assert_geq(ns[1], 0.99 * disk_ns, "%.0f ns against the disk's %.0f", ns[1], disk_ns);
    cr_assert_eq(entries(spill_dir), 0, "a rehearsal makes no files");
    /* a disk 10 times faster costs less */
    double fast[2];
    choose_tier(1e10, 1e10, spill_dir, fast, &r);
    cr_assert_lt(fast[1], ns[1]);
    cr_assert_eq(fast[0], ns[0], "without the tier the disk does not matter");
    /* without a spill directory the tier fails in the rehearsal as it would for real */
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, "h200");
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK);
    uvmrt_knob_t knob = {"tier", 2, (const int[]){0, 1}};
    uvmrt_choice_t out = UVMRT_STRUCT_INIT(uvmrt_choice_t);
    cr_assert_eq(uvmrt_choose(ctx, &knob, 1, rehearse_tier, &r, &out), UVMRT_ERR_CONFIG);
    uvmrt_context_destroy(ctx);
    rmdir(spill_dir);
}

/* A sim context with the test's spill directory (made) and one layer, "block0". */
static uvmrt_context_t *one_layer_with_tier(int *layer)
{
    make_dir();
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    p.spill_dir = spill_dir;
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt_layer_add(ctx, "block0", layer), UVMRT_OK);
    return ctx;
}

/* A CPU call (host_bytes) names the host-placed tensors its work reads and writes: they
 * are host memory to it (no link traffic counted), and the disk tier reads them back
 * before it and writes them after, as for any call, so a trainer's CPU AdamW can keep its
 * moments on the disk. */
Test(tier, a_cpu_calls_uses_are_read_back_and_written_by_the_tier)
{
    int layer;
    uvmrt_context_t *ctx = one_layer_with_tier(&layer);
    uvmrt_tensor_desc_t d[2] = {{"w", layer, UVMRT_ROLE_WEIGHT, 2 * MIB},
                                {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    float *m = uvmrt_tensor_ptr(t[1]);
    for (int i = 0; i < 16; i++) m[i] = (float)i;
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, t[1], UVMRT_PLACE_HOST), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, t[1], UVMRT_TIER_DISK), UVMRT_OK, "%s", log_text());
    static int cpu_stream; /* any handle: a timeline of its own on sim */
    uvmrt_use_t use_m = {t[1], UVMRT_USE_READWRITE};
    for (int s = 0; s < 3; s++) {
        cr_assert_eq(uvmrt_step_begin(ctx), UVMRT_OK, "%s", log_text());
        uvmrt_layer_call_t c;
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_FORWARD, NULL);
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK);
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_OPTIMIZER, (uvmrt_stream_t)&cpu_stream);
        c.no_default_uses = 1;
        c.host_bytes = 28 * (uint64_t)MIB;
        c.uses = &use_m;
        c.n_uses = 1;
        cr_assert_eq(uvmrt_layer_begin(ctx, &c), UVMRT_OK, "%s", log_text());
        for (int i = 0; i < 16; i++) /* read back from its file for this call */
            cr_assert_eq(m[i], (float)(i + s), "step %d: m[%d] = %g", s, i, m[i]);
        for (int i = 0; i < 16; i++) m[i] += 1.0f; /* the CPU's update */
        cr_assert_eq(uvmrt_layer_end(ctx), UVMRT_OK, "%s", log_text());
        cr_assert_eq(uvmrt_step_end(ctx), UVMRT_OK, "%s", log_text());
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)s, &ss), UVMRT_OK);
        cr_assert_eq(ss.spill_write_bytes, 2 * MIB, "step %d: written back after the CPU's call", s);
        if (s > 0) cr_assert_eq(ss.spill_read_bytes, 2 * MIB, "step %d: read back before it", s);
        cr_assert_eq(ss.remote_read_bytes + ss.remote_write_bytes, 0, "the CPU's uses are not link traffic");
    }
    uvmrt_context_destroy(ctx);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}

/* A call that writes a disk tensor without reading it (UVMRT_USE_WRITE: it overwrites
 * every byte) gets no read from the file, and no read ahead: a gradient made in the
 * backward costs its write only; its discarded pages are made on the host first (a
 * GPU's writes would fault them in). What it wrote is written back and read for the
 * next call that reads it. fail_op >= 0: the k-th call of that backend operation fails
 * (every k in turn, the calls retried): each begin or end that fails changes nothing,
 * and the contents come back all the same. */
static void write_only_steps(int fail_op, uint64_t k, uint64_t *calls)
{
    make_dir();
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    p.spill_dir = spill_dir;
    uvmrt_backend_ops_t ops = fi_wrap(&uvmrt__backend_sim);
    uvmrt_context_t *ctx = NULL;
    fi_arm(-1, 0, 0, 0);
    cr_assert_eq(uvmrt__context_create_with(&p, &ops, &ctx), UVMRT_OK, "%s", log_text());
    int layer;
    cr_assert_eq(uvmrt_layer_add(ctx, "block0", &layer), UVMRT_OK);
    uvmrt_tensor_desc_t d[2] = {{"w", layer, UVMRT_ROLE_WEIGHT, 2 * MIB},
                                {"g", layer, UVMRT_ROLE_GRADIENT, 2 * MIB}};
    uvmrt_tensor_t *t[2];
    cr_assert_eq(uvmrt_tensors_alloc(ctx, 2, d, t), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, t[1], UVMRT_PLACE_HOST), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, t[1], UVMRT_TIER_DISK), UVMRT_OK, "%s", log_text());
    float *g = uvmrt_tensor_ptr(t[1]);
    static int cpu_stream;
    uvmrt_use_t write_g = {t[1], UVMRT_USE_WRITE}, read_g = {t[1], UVMRT_USE_READ};
    fi_arm(fail_op, k, 0, 0);
    int failures = 0;
    for (int s = 0; s < 4; s++) {
        uvmrt_status_t st;
        while ((st = uvmrt_step_begin(ctx)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        uvmrt_layer_call_t c;
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_BACKWARD, NULL);
        c.no_default_uses = 1;
        c.uses = &write_g;
        c.n_uses = 1;
        while ((st = uvmrt_layer_begin(ctx, &c)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        for (size_t i = 0; i < 2 * MIB / sizeof(float); i++) g[i] = (float)(s * 1000 + (int)(i % 997));
        while ((st = uvmrt_layer_end(ctx)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        while ((st = uvmrt__tier_poll(ctx, 1)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        uvmrt_layer_call_init(&c, layer, UVMRT_PHASE_OPTIMIZER, (uvmrt_stream_t)&cpu_stream);
        c.no_default_uses = 1;
        c.host_bytes = 4 * (uint64_t)MIB;
        c.uses = &read_g;
        c.n_uses = 1;
        while ((st = uvmrt_layer_begin(ctx, &c)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        for (size_t i = 0; i < 2 * MIB / sizeof(float); i += 4099)
            cr_assert_eq(g[i], (float)(s * 1000 + (int)(i % 997)), "k=%llu step %d: g[%zu] = %g",
                         (unsigned long long)k, s, i, g[i]);
        while ((st = uvmrt_layer_end(ctx)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        while ((st = uvmrt_step_end(ctx)) != UVMRT_OK) cr_assert(failures++ < 8, "%s", log_text());
        uvmrt_step_stats_t ss = UVMRT_STRUCT_INIT(uvmrt_step_stats_t);
        cr_assert_eq(uvmrt_step_stats_get(ctx, (uint64_t)s, &ss), UVMRT_OK);
        if (fail_op < 0) {
            cr_assert_eq(ss.spill_read_bytes, 2 * MIB, "step %d: only the optimizer's read", s);
            cr_assert_eq(ss.spill_write_bytes, 2 * MIB, "step %d: the backward's write", s);
        }
    }
    if (calls != NULL) *calls = fail_op >= 0 ? fi.calls[fail_op] : 0;
    uvmrt_context_destroy(ctx);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}

Test(tier, a_write_only_use_is_not_read_back) { write_only_steps(-1, 0, NULL); }

/* The same steps with the k-th move (the prefetch that makes a written tensor's pages),
 * sync or discard failing, for every k the steps make. */
Test(tier, a_write_only_use_survives_each_backend_failure)
{
    const int ops[] = {FI_MOVE, FI_STREAM_SYNC, FI_DISCARD};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        uint64_t calls = 0;
        write_only_steps(ops[o], UINT64_MAX, &calls);
        cr_assert_gt(calls, 0, "no %s", fi_op_names[ops[o]]);
        for (uint64_t k = 1; k <= calls; k++) write_only_steps(ops[o], k, NULL);
    }
}

/* A tensor in page-locked memory (UVMRT_PLACE_PINNED) does not go on the disk tier (its
 * file I/O would name its managed slot); refused, and it stays pinned. */
Test(tier, a_pinned_tensor_is_refused_by_the_tier)
{
    int layer;
    uvmrt_context_t *ctx = one_layer_with_tier(&layer);
    uvmrt_tensor_desc_t d = {"adam_m", layer, UVMRT_ROLE_OPTIMIZER_STATE, 2 * MIB};
    uvmrt_tensor_t *t;
    cr_assert_eq(uvmrt_tensor_alloc(ctx, &d, &t), UVMRT_OK);
    cr_assert_eq(uvmrt_tensor_set_placement(ctx, t, UVMRT_PLACE_PINNED), UVMRT_OK, "%s", log_text());
    log_reset();
    cr_assert_eq(uvmrt_tensor_set_tier(ctx, t, UVMRT_TIER_DISK), UVMRT_ERR_STATE);
    cr_assert(log_contains("page-locked") && log_contains("UVMRT_PLACE_HOST"), "%s", log_text());
    cr_assert_eq(uvmrt_tensor_placement(t), UVMRT_PLACE_PINNED);
    cr_assert_eq(uvmrt_tensor_tier(t), UVMRT_TIER_MEMORY);
    uvmrt_context_destroy(ctx);
    cr_assert_eq(entries(spill_dir), 0);
    rmdir(spill_dir);
}
