/*
 * gpt_ckpt.c -- uvmrt-gpt's checkpoints (see gpt.h): a run's w, wh, m, v of every
 * layer and its metadata, written with checkpoint.c's format and read back for --resume.
 */
#define _GNU_SOURCE

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "gpt.h"

/* ----------------------------------------------------------------------------
 * checkpoints: w, wh, m, v of every layer, and the metadata below */

#define CKPT_META_MAGIC 0x67707431u /* "gpt1" */

typedef struct ckpt_meta {
    uint32_t magic, size;           /* CKPT_META_MAGIC, sizeof(ckpt_meta_t) */
    int32_t L, C, NH, V, Vp, maxT;  /* the model: must match */
    int32_t B, T, source;           /* the batches: must match for the data position */
    int32_t steps, warmup;          /* the LR schedule the run was saved under */
    int32_t reserved;               /* 0: no padding before lr (the file's bytes are all set) */
    double lr;
    uint64_t seed;
    uint64_t step;                  /* training steps done */
    int64_t adam_t;                 /* AdamW updates done */
    uint64_t rng;                   /* the sampler's state */
    gpt_data_pos_t data;            /* the training data's next batch */
} ckpt_meta_t;

/* A buffer's tensor, brought in from the disk tier around its bytes' save or load. */
typedef struct ckpt_tier {
    gpt_run_t *run;
    uvmrt_tensor_t *t;
    int held;
} ckpt_tier_t;

typedef struct ckpt_bufs {
    gpt_ckpt_buffer_t *b;
    char (*names)[24];
    ckpt_tier_t *tier;
    int n;
} ckpt_bufs_t;

static void ckpt_tier_around(void *user, int after) {
    ckpt_tier_t *c = user;
    if (!after)
        c->held = gpt_tier_hold(c->run, c->t);
    else
        gpt_tier_release(c->run, c->t, c->held);
}

static void ckpt_bufs_make(gpt_run_t *run, ckpt_bufs_t *cb) {
    cb->n = 4 * run->model.nl;
    cb->b = calloc((size_t)cb->n, sizeof *cb->b);
    cb->names = calloc((size_t)cb->n, sizeof *cb->names);
    cb->tier = calloc((size_t)cb->n, sizeof *cb->tier);
    if (!cb->b || !cb->names || !cb->tier)
        gpt_run_fail(run, "out of host memory");
    static const char *const kind[4] = {"w", "wh", "m", "v"};
    for (int l = 0; l < run->model.nl; l++) {
        const layer_params_t *p = &run->model.lp[l];
        uvmrt_tensor_t *t[4] = {p->w, p->wh, p->m, p->v};
        uint64_t bytes[4] = {p->n * 4, p->n * 2, p->n * 4, p->n * 4};
        for (int k = 0; k < 4; k++) {
            int i = 4 * l + k;
            snprintf(cb->names[i], sizeof cb->names[i], "%s_%d", kind[k], l);
            cb->tier[i] = (ckpt_tier_t){run, t[k], 0};
            /* one tensor at a time in host memory: the host budget has room for the
             * tier's window, not for every layer's state */
            cb->b[i] = (gpt_ckpt_buffer_t){cb->names[i], ptr(t[k]), bytes[k], ckpt_tier_around, &cb->tier[i]};
        }
    }
}

static void ckpt_bufs_free(ckpt_bufs_t *cb) {
    free(cb->b);
    free(cb->names);
    free(cb->tier);
}

static void ckpt_meta_make(const gpt_run_t *run, ckpt_meta_t *m, int steps_done) {
    const gpt_options_t *o = run->set.opt;
    memset(m, 0, sizeof *m);
    *m = (ckpt_meta_t){CKPT_META_MAGIC,
                       sizeof *m,
                       run->model.L,
                       run->model.C,
                       run->model.NH,
                       run->model.V,
                       run->model.Vp,
                       run->model.maxT,
                       run->model.B,
                       run->model.T,
                       (int32_t)o->source,
                       o->c.steps,
                       o->warmup,
                       0,
                       o->lr,
                       o->c.seed,
                       (uint64_t)steps_done,
                       run->adam_t,
                       run->rng,
                       {0}};
    if (run->train)
        gpt_data_tell(run->train, &m->data);
}

/* One line per entry of DIR (at most 10, then a count) on stderr, for a refusal. */
static void ckpt_entries_print(const gpt_ckpt_entry_t *e, int n) {
    fflush(stdout);
    for (int i = 0; i < n && i < 10; i++) {
        if (!e[i].ok)
            fprintf(stderr, PROG ": %s\n", e[i].why);
        else if (e[i].version == 1)
            fprintf(stderr, PROG ": checkpoint %s: step %llu, format version 1 (no run id)\n",
                    e[i].path, (unsigned long long)e[i].step);
        else
            fprintf(stderr, PROG ": checkpoint %s: step %llu of run %016llx\n", e[i].path,
                    (unsigned long long)e[i].step, (unsigned long long)e[i].run_id);
    }
    if (n > 10)
        fprintf(stderr, PROG ": ... and %d more\n", n - 10);
}

/* Before the data, the GPU setup and step 1: --checkpoint DIR must be a directory
 * this process can write (created if missing), and a run without --resume gets a new
 * run id and must not find another run's checkpoints there (it would replace and
 * prune them) unless --overwrite-checkpoints says so. */
void gpt_run_ckpt_start(gpt_run_t *run) {
    const gpt_options_t *o = run->set.opt;
    char err[1024];
    if (!o->ckpt_dir)
        return;
    if (gpt_ckpt_dir_prepare(o->ckpt_dir, err, sizeof err) != 0)
        gpt_run_fail(run, "--checkpoint: %s (no step was run)", err);
    if (gpt_ckpt_run_id_new(&run->run_id, err, sizeof err) != 0)
        gpt_run_fail(run, "--checkpoint: %s", err);
    if (o->resume) /* the run id of the checkpoint it loads, checked there */
        return;
    gpt_ckpt_entry_t *e;
    int n;
    if (gpt_ckpt_scan(o->ckpt_dir, &e, &n, err, sizeof err) != 0)
        gpt_run_fail(run, "--checkpoint: %s", err);
    if (n > 0 && !o->ckpt_overwrite) {
        ckpt_entries_print(e, n);
        free(e);
        gpt_run_fail(run, "--checkpoint %s holds %d checkpoint entr%s (above) this new run did "
                     "not write: --resume continues from them, --overwrite-checkpoints replaces "
                     "them, or give another directory (no step was run)", o->ckpt_dir, n,
                     n == 1 ? "y" : "ies");
    }
    if (n > 0) {
        printf("--overwrite-checkpoints: the %d checkpoint entr%s in %s are removed after this "
               "run's first save\n", n, n == 1 ? "y" : "ies", o->ckpt_dir);
        run->ckpt_replace = 1;
    }
    free(e);
}

/* --overwrite-checkpoints without --resume, after the first save: DIR's checkpoints
 * of other runs go (regular files and links; anything else stays, with a warning). */
static void ckpt_remove_others(gpt_run_t *run) {
    const char *dir = run->set.opt->ckpt_dir;
    char err[1024];
    gpt_ckpt_entry_t *e;
    int n, removed = 0;
    run->ckpt_replace = 0;
    if (gpt_ckpt_scan(dir, &e, &n, err, sizeof err) != 0) {
        fprintf(stderr, PROG ": warning: --overwrite-checkpoints: %s\n", err);
        return;
    }
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (gpt_ckpt_entry_is_own(&e[i], run->run_id) || lstat(e[i].path, &st) != 0)
            continue;
        if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            fprintf(stderr, PROG ": warning: --overwrite-checkpoints: %s left in place: %s\n",
                    e[i].path, e[i].ok ? "not a regular file" : e[i].why);
        else if (unlink(e[i].path) != 0)
            fprintf(stderr, PROG ": warning: --overwrite-checkpoints: cannot remove %s: %s\n",
                    e[i].path, strerror(errno));
        else
            removed++;
    }
    free(e);
    printf("--overwrite-checkpoints: removed %d checkpoint%s of another run from %s\n", removed,
           removed == 1 ? "" : "s", dir);
}

/* After training step s (0-based): the GPU is idle (step_end waited for it); the
 * CPU optimizer is waited for, then the host reads the managed memory. */
void gpt_run_ckpt_save(gpt_run_t *run, int s) {
    char err[1024];
    gpt_cpu_drain(run);
    /* a CPU layer's bf16 copy is made in its next forward (weights_ready): bring the
     * saved one up to date, so that a run resumed with that layer on the GPU reads it */
    for (int l = 0; gpt_computes(run) && l < run->model.nl; l++)
        if (on_cpu(run, l))
            gpt_wh_from_master_host(run, l);
    ckpt_bufs_t cb;
    ckpt_bufs_make(run, &cb);
    ckpt_meta_t meta;
    ckpt_meta_make(run, &meta, s + 1);
    gpt_ckpt_save_options_t so = {.run_id = run->run_id,
                                  .keep = run->set.opt->keep,
                                  .overwrite = run->set.opt->ckpt_overwrite};
    double t0 = cli_now_s();
    uint64_t bytes = 0;
    for (int i = 0; i < cb.n; i++)
        bytes += cb.b[i].bytes;
    int rc = gpt_ckpt_save(run->set.opt->ckpt_dir, (uint64_t)(s + 1), cb.b, cb.n, &meta,
                           sizeof meta, &so, err, sizeof err);
    ckpt_bufs_free(&cb);
    if (rc != 0)
        gpt_run_fail(run, "--checkpoint: saving step %d: %s", s + 1, err);
    gpt_ckpt_path(run->ckpt_last, sizeof run->ckpt_last, run->set.opt->ckpt_dir, (uint64_t)(s + 1));
    printf("checkpoint step %d: %s (%.2f GiB, %.1f s)\n", s + 1, run->ckpt_last,
           (double)bytes / GIB, cli_now_s() - t0);
    if (run->ckpt_replace)
        ckpt_remove_others(run);
    fflush(stdout);
}

#define META_CHECK(field, what)                                                                \
    do {                                                                                       \
        if (m.field != want.field)                                                             \
            gpt_run_fail(run, "--resume: %s was saved with %s %lld, this run has %lld: start a "    \
                          "new --checkpoint DIR or use the flags it was saved with",           \
                     run->ckpt_last, what, (long long)m.field, (long long)want.field);         \
    } while (0)

/* After loading step `step`: an entry named for a later step (up to --steps) that
 * this run did not write would be replaced by one of its saves: refused before step 1
 * unless --overwrite-checkpoints. */
static void ckpt_future_check(gpt_run_t *run, uint64_t step) {
    const gpt_options_t *o = run->set.opt;
    char err[1024];
    gpt_ckpt_entry_t *e;
    int n, bad = 0;
    if (o->ckpt_overwrite)
        return;
    if (gpt_ckpt_scan(o->ckpt_dir, &e, &n, err, sizeof err) != 0)
        gpt_run_fail(run, "--resume: %s", err);
    for (int i = 0; i < n; i++)
        if (e[i].name_step > step && e[i].name_step <= (uint64_t)o->c.steps &&
            !gpt_ckpt_entry_is_own(&e[i], run->run_id)) {
            ckpt_entries_print(&e[i], 1);
            bad++;
        }
    free(e);
    if (bad)
        gpt_run_fail(run, "--resume: %d entr%s above, named for a step after %llu, this run did "
                     "not write, and a save could replace %s: move %s away or add "
                     "--overwrite-checkpoints (no step was run)", bad, bad == 1 ? "y" : "ies",
                     (unsigned long long)step, bad == 1 ? "it" : "them",
                     bad == 1 ? "it" : "them");
}

/* --resume: the newest valid checkpoint in DIR, or none (then from step 1). */
void gpt_run_ckpt_resume(gpt_run_t *run) {
    const gpt_options_t *o = run->set.opt;
    char err[1024];
    ckpt_bufs_t cb;
    ckpt_bufs_make(run, &cb);
    ckpt_meta_t m, want;
    uint64_t mb = 0, step = 0, rid = 0;
    int rc = gpt_ckpt_resume(o->ckpt_dir, cb.b, cb.n, &m, sizeof m, &mb, &step, &rid,
                             run->ckpt_last, sizeof run->ckpt_last, err, sizeof err);
    ckpt_bufs_free(&cb);
    if (rc < 0)
        gpt_run_fail(run, "--resume: %s", err);
    if (rc == 1) {
        run->ckpt_last[0] = '\0';
        printf("resume: no checkpoint in %s: starting at step 1\n", o->ckpt_dir);
        return;
    }
    ckpt_meta_make(run, &want, 0);
    if (mb != sizeof m || m.magic != CKPT_META_MAGIC || m.size != sizeof m)
        gpt_run_fail(run, "--resume: %s: its metadata (%llu bytes) is not uvmrt-gpt's of this "
                      "version (%zu bytes)", run->ckpt_last, (unsigned long long)mb, sizeof m);
    META_CHECK(L, "--layers");
    META_CHECK(C, "--channels");
    META_CHECK(NH, "--heads");
    META_CHECK(V, "--vocab");
    META_CHECK(maxT, "max(1024, --seq)");
    META_CHECK(B, "--batch");
    META_CHECK(T, "--seq");
    META_CHECK(source, "token source (0 random, 1 cycle, 2 --data, 3 --text)");
    if (m.step != step)
        gpt_run_fail(run, "--resume: %s: its metadata says step %llu, its header %llu",
                 run->ckpt_last, (unsigned long long)m.step, (unsigned long long)step);
    if (m.steps != want.steps || m.warmup != want.warmup || m.lr != want.lr || m.seed != want.seed)
        fprintf(stderr, PROG ": note: %s was saved by a run with --steps %d --warmup %d --lr %g "
                        "--seed %llu; continuing with this run's (the losses will not match an "
                        "uninterrupted run)\n",
                run->ckpt_last, m.steps, m.warmup, m.lr, (unsigned long long)m.seed);
    if (run->train && gpt_data_seek(run->train, &m.data, err, sizeof err) != 0)
        gpt_run_fail(run, "--resume: %s: the training data position: %s", run->ckpt_last, err);
    if (step > (uint64_t)o->c.steps)
        gpt_run_fail(run, "--resume: %s is at step %llu, past --steps %d", run->ckpt_last,
                 (unsigned long long)step, o->c.steps);
    if (rid != 0)
        run->run_id = rid; /* the same run goes on: its files are its own to prune */
    else
        fprintf(stderr, PROG ": note: %s has format version 1 (no run id): continuing as run "
                "%016llx; --keep never removes the version-1 files\n", run->ckpt_last,
                (unsigned long long)run->run_id);
    ckpt_future_check(run, step);
    run->set.first = (int)step;
    run->adam_t = (long)m.adam_t;
    run->rng = m.rng;
    printf("resume: %s: step %llu done, continuing at step %llu of %d (run %016llx)\n",
           run->ckpt_last, (unsigned long long)step, (unsigned long long)step + 1, o->c.steps,
           (unsigned long long)run->run_id);
}

