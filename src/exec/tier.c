/*
 * tier.c -- tensors on the disk tier (tier.h, uvmrt_tensor_set_tier).
 *
 * A disk tensor's contents are in its file, in its host memory, or both:
 *   file_valid  the file holds them (a write-back completed, or no use wrote since)
 *   host_valid  the host memory holds them (read back, or not yet dropped)
 * At least one is always true: the host copy is dropped only after the file holds
 * the contents, and a failed write leaves the host copy in place. A read ahead of use
 * (rd) fills the host memory of a tensor that is not host_valid; it becomes host_valid
 * only when a call that uses it has waited for the read.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "tier.h"

/* Its file's label in messages: the tensor and its layer. */
static void label_of(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t, char *b, size_t n)
{
    if (t->layer >= 0) snprintf(b, n, "%s' of layer '%s", t->name, ctx->tensors.layers[t->layer].name);
    else snprintf(b, n, "%s", t->name);
}

/* Whether the tier's tensors leave host memory between their uses: where the backend
 * can discard managed ranges (sim; cuda from CUDA 13, whose discard releases the pages
 * wherever they are); on CUDA 12 the managed pages stay (managed memory has no other
 * way to give host pages back without freeing the range). */
static int gives_back(const uvmrt_context_t *ctx)
{
    return ctx->cfg.backend == UVMRT_BACKEND_SIM || uvmrt__be_has_discard(ctx);
}

/* A disk tensor's host copy comes or goes: the tier's bytes out of host memory
 * (ctx->tier.off_host, what the memory stats leave out) follow, and the host peak. */
static void set_host_valid(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int valid)
{
    if (t->host_valid == valid) return;
    t->host_valid = valid;
    if (valid) ctx->tier.off_host -= t->footprint;
    else ctx->tier.off_host += t->footprint;
    uvmrt__host_note(ctx);
}

/* Drops the host copy where the pages go back (a later read of them gives indeterminate
 * contents until the file is read back); elsewhere the copy stays valid and no read is
 * needed. The discard is waited for: a read into the range beside it would be undefined.
 * sim's pages are its own memory, also given back by madvise. A failure keeps the copy
 * (valid, in host memory), counted. */
static void drop_host(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    if (!gives_back(ctx)) return;
    uvmrt_range_t r = {t->ptr, t->footprint};
    uvmrt_status_t st = uvmrt__be_discard(ctx, &r, 1, ctx->ev.d2h_stream);
    if (st == UVMRT_OK) st = uvmrt__be_stream_sync(ctx, ctx->ev.d2h_stream);
    if (st != UVMRT_OK) {
        uvmrt__be_absorb(ctx, "discard (disk tier's host copy)", st);
        return;
    }
    /* a rehearsal's model takes the discard's time as the run does; its contents stay */
    if (!ctx->tier.modelled && ctx->cfg.backend == UVMRT_BACKEND_SIM &&
        madvise(t->ptr, t->footprint, MADV_DONTNEED) != 0)
        return;
    set_host_valid(ctx, t, 0);
}

/* Brings in the host pages of tensors about to be read from their files (or written
 * from pages never touched), one prefetch to the host on the tier's own stream, waited
 * for, where drop_host gave them back on cuda: an O_DIRECT read into discarded managed
 * pages populates each page in the kernel's fault path, 0.54-0.59 GB/s on the H200
 * machine against 1.86-1.97 into host-resident pages, while the prefetch runs at 11
 * GB/s (bench/probes/tier_cycle.cu). Not on sim: its pages are the process's own,
 * given back by madvise and filled at memory speed (and its model times the read as
 * the drive's). Only a speed-up: a failure is counted and logged (uvmrt__be_absorb)
 * and the transfers go ahead into the pages as they are. */
static void populate(uvmrt_context_t *ctx, uvmrt_tensor_t *const *t, size_t n)
{
    if (n == 0 || !gives_back(ctx) || ctx->cfg.backend == UVMRT_BACKEND_SIM) return;
    uvmrt_status_t st = UVMRT_OK;
    if (ctx->tier.fill_stream == NULL) st = uvmrt__be_stream_create(ctx, &ctx->tier.fill_stream);
    if (st != UVMRT_OK) {
        ctx->tier.fill_stream = NULL;
        uvmrt__be_absorb(ctx, "stream for the disk tier's prefetches", st);
        return;
    }
    uvmrt_range_t stack[16] = {{NULL, 0}}, *r = n <= 16 ? stack : malloc(n * sizeof *r);
    if (r == NULL) return; /* no room to batch them: the reads go ahead as they are */
    for (size_t k = 0; k < n; k++) r[k] = (uvmrt_range_t){t[k]->ptr, t[k]->footprint};
    st = uvmrt__be_move_wait(ctx, r, n, UVMRT_LOC_HOST, ctx->tier.fill_stream);
    if (st != UVMRT_OK) uvmrt__be_absorb(ctx, "prefetch to the host before a disk tier transfer", st);
    if (r != stack) free(r);
}

static int writing_add(uvmrt_context_t *ctx, int id)
{
    uvmrt_tier_state_t *s = &ctx->tier;
    if (s->n_writing == s->cap_writing) {
        int cap = s->cap_writing ? 2 * s->cap_writing : 16;
        int *w = realloc(s->writing, (size_t)cap * sizeof *w);
        if (w == NULL) return -1;
        s->writing = w;
        s->cap_writing = cap;
    }
    s->writing[s->n_writing++] = id;
    return 0;
}

/* Waits for t's write-back: the file holds the contents and the host copy goes, or it
 * failed (logged by the spill) and the host copy stays. */
static uvmrt_status_t finish_write(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_status_t st = uvmrt__spill_wait(ctx->tier.sp, t->wb);
    t->wb = NULL;
    t->file_valid = st == UVMRT_OK;
    if (st == UVMRT_OK) drop_host(ctx, t);
    else
        LOG_ERROR(&ctx->log,
                  "tensor '%s': its write-back to the disk tier failed; its contents stay in host memory "
                  "and are written again after its next use",
                  t->name);
    return st;
}

uvmrt_status_t uvmrt__tier_poll(uvmrt_context_t *ctx, int block)
{
    uvmrt_tier_state_t *s = &ctx->tier;
    uvmrt_status_t worst = UVMRT_OK;
    int kept = 0;
    for (int i = 0; i < s->n_writing; i++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[s->writing[i]];
        if (t->wb == NULL) continue; /* waited for elsewhere */
        if (!block && !uvmrt__spill_done(s->sp, t->wb)) {
            s->writing[kept++] = s->writing[i];
            continue;
        }
        if (finish_write(ctx, t) != UVMRT_OK) worst = UVMRT_ERR_IO;
    }
    s->n_writing = kept;
    return worst;
}

/* ------------------------------------------------------------------ host memory */
void uvmrt__tier_host(const uvmrt_context_t *ctx, const uvmrt_tensor_t *except, uint64_t *off, uint64_t *window)
{
    *off = *window = 0;
    if (ctx->tier.n_disk == 0 || !gives_back(ctx)) return;
    size_t nl = (size_t)ctx->tensors.n_layers + 1; /* layer + 1: -1 is one too */
    uint64_t *per = calloc(nl, sizeof *per);
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t == NULL || t->magic != UVMRT_TENSOR_MAGIC || !t->on_disk || t == except) continue;
        *off += t->footprint;
        if (per != NULL) per[t->layer + 1] += t->footprint;
    }
    if (per == NULL) { /* no memory to group them: the most they could hold */
        *window = *off;
        return;
    }
    uint64_t big[2] = {0, 0};
    for (size_t l = 0; l < nl; l++) {
        if (per[l] > big[0]) big[1] = big[0], big[0] = per[l];
        else if (per[l] > big[1]) big[1] = per[l];
    }
    free(per);
    *window = big[0] + big[1];
}

uint64_t uvmrt__tier_host_share(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t, int plan)
{
    if (!t->on_disk || !gives_back(ctx)) return t->footprint;
    return plan || !t->host_valid ? 0 : t->footprint;
}

uint64_t uvmrt__tier_plan_host_peak(const uvmrt_context_t *ctx, const uvmrt_plan_t *p, const uint64_t *fp,
                                    uint8_t *off_gpu)
{
    uint64_t off, window;
    uvmrt__tier_host(ctx, NULL, &off, &window);
    size_t n = (size_t)p->n_tensors;
    uint64_t *own = off > 0 ? malloc((n + 1) * sizeof *own) : NULL;
    if (own == NULL) return uvmrt__plan_host_peak(p, fp, off_gpu); /* whole footprints: never less than needed */
    for (size_t t = 0; t < n; t++) {
        const uvmrt_tensor_t *x = t < (size_t)ctx->tensors.n ? ctx->tensors.by_id[t] : NULL;
        own[t] = x != NULL && x->magic == UVMRT_TENSOR_MAGIC && uvmrt__tier_host_share(ctx, x, 1) == 0 ? 0 : fp[t];
    }
    uint64_t host = uvmrt__plan_host_peak(p, own, off_gpu) + window;
    free(own);
    return host;
}

static void window_update(uvmrt_context_t *ctx)
{
    uint64_t off;
    uvmrt__tier_host(ctx, NULL, &off, &ctx->tier.window);
}

/* The copies still being written and `reads` more bytes fit in the window: the oldest
 * write-backs are waited for until they do (a failure keeps its host copy, logged). */
static uvmrt_status_t make_room(uvmrt_context_t *ctx, uint64_t reads)
{
    uvmrt_tier_state_t *s = &ctx->tier;
    if (!gives_back(ctx)) return UVMRT_OK;
    uint64_t held = 0;
    for (int i = 0; i < s->n_writing; i++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[s->writing[i]];
        if (t->wb != NULL) held += t->footprint;
    }
    uvmrt_status_t st = UVMRT_OK;
    for (int i = 0; i < s->n_writing && held + reads > s->window; i++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[s->writing[i]];
        if (t->wb == NULL) continue;
        held -= t->footprint;
        if (finish_write(ctx, t) != UVMRT_OK) st = UVMRT_ERR_IO;
    }
    return st;
}

/* ------------------------------------------------------------------ layer calls */
static void read_failed(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, const uvmrt_tensor_t *t)
{
    char lab[300];
    label_of(ctx, t, lab, sizeof lab);
    LOG_ERROR(&ctx->log, "layer '%s' %s: reading '%s' from the disk tier failed; its file is unchanged",
              ctx->tensors.layers[layer].name, uvmrt_phase_name(phase), lab);
}

/* Waits for t's read ahead, if any (its tensor is leaving the tier or the context):
 * a success makes the host copy valid; a failure leaves it invalid (the file holds the
 * contents) and is the caller's to report when it needs the contents. */
static uvmrt_status_t finish_read(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    if (t->rd == NULL) return UVMRT_OK;
    uvmrt_status_t st = uvmrt__spill_wait(ctx->tier.sp, t->rd);
    t->rd = NULL;
    if (st == UVMRT_OK) set_host_valid(ctx, t, 1);
    return st;
}

/* Whether the uses [first, first + n) of q read tensor id's previous contents (a use
 * that writes without reading overwrites every byte first: uvmrt.h, UVMRT_USE_WRITE),
 * so that the tier reads it back for them. */
static int reads_contents(const uvmrt_sequence_t *q, size_t first, size_t n, int id)
{
    for (size_t k = 0; k < n; k++)
        if (q->use_tensor[first + k] == id && (q->use_access[first + k] & UVMRT_USE_READ)) return 1;
    return 0;
}

/* Call i has opened in a step that has not left its record (step.c's match), so the
 * record's call i + 1 (the next step's first after the last) comes next: its disk
 * tensors start reading now, beside call i's work, so that their call finds them read
 * (disk time off the critical path). Only what fits in the window beside the copies
 * held now, without waiting for any write-back; a read that cannot start is left to
 * its call (a debug line), one that fails is reported by its call. */
void uvmrt__tier_read_ahead(uvmrt_context_t *ctx, size_t i)
{
    const uvmrt_sequence_t *rec = &ctx->sched.record;
    if (ctx->tier.n_disk == 0 || ctx->tier.modelled || !gives_back(ctx) ||
        ctx->cfg.policy != UVMRT_POLICY_PREFETCH || !ctx->sched.have_record || ctx->sched.deviated ||
        i >= rec->n_calls)
        return;
    const uvmrt_call_t *next = &rec->calls[i + 1 < rec->n_calls ? i + 1 : 0];
    uint64_t held = 0;
    for (int id = 0; id < ctx->tensors.n; id++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t != NULL && t->magic == UVMRT_TENSOR_MAGIC && t->on_disk && (t->host_valid || t->rd != NULL))
            held += t->footprint;
    }
    /* the tensors to read ahead: those that fit the window, in the call's order */
    uvmrt_tensor_t *stack[16] = {NULL}, **pick = next->n_uses <= 16 ? stack : malloc(next->n_uses * sizeof *pick);
    if (pick == NULL) return; /* their call reads them */
    size_t n = 0;
    for (size_t k = 0; k < next->n_uses; k++) {
        int id = rec->use_tensor[next->use_first + k];
        uvmrt_tensor_t *t = id < ctx->tensors.n ? ctx->tensors.by_id[id] : NULL;
        if (t == NULL || t->magic != UVMRT_TENSOR_MAGIC || !t->on_disk || t->host_valid || t->rd != NULL ||
            t->wb != NULL || !reads_contents(rec, next->use_first, next->n_uses, id))
            continue;
        int dup = 0; /* a tensor named twice in one call is read once */
        for (size_t j = 0; j < n; j++) dup |= pick[j] == t;
        if (dup) continue;
        if (held + t->footprint > ctx->tier.window) break; /* its call reads it */
        held += t->footprint;
        pick[n++] = t;
    }
    populate(ctx, pick, n);
    for (size_t k = 0; k < n; k++) {
        uvmrt_tensor_t *t = pick[k];
        if (uvmrt__spill_submit(ctx->tier.sp, t->spill_file, 0, t->ptr, t->footprint, &t->rd) != UVMRT_OK) {
            t->rd = NULL;
            LOG_DEBUG(&ctx->log, "tensor '%s': its read ahead did not start; its call reads it", t->name);
            break;
        }
        ctx->tier.read_ahead += t->footprint;
    }
    if (pick != stack) free(pick);
}

/* The tensors a call only writes (to_read[k] == 2 of its uses [first, first + n)):
 * their discarded pages made on the host in one prefetch (a GPU's writes would fault
 * each in; a rehearsal's model too, for its time), then their host copies valid; on a
 * failure none is. */
static uvmrt_status_t make_fresh(uvmrt_context_t *ctx, const uvmrt_sequence_t *q, size_t first, size_t n,
                                 const uint8_t *to_read)
{
    uvmrt_range_t *r = malloc(n * sizeof *r);
    if (r == NULL) return UVMRT_ERR_NOMEM;
    size_t m = 0;
    for (size_t k = 0; k < n; k++) {
        if (to_read[k] != 2) continue;
        const uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        r[m++] = (uvmrt_range_t){t->ptr, t->footprint};
    }
    uvmrt_status_t st = uvmrt__be_move_wait(ctx, r, m, UVMRT_LOC_HOST, ctx->ev.d2h_stream);
    free(r);
    for (size_t k = 0; k < n && st == UVMRT_OK; k++)
        if (to_read[k] == 2) set_host_valid(ctx, ctx->tensors.by_id[q->use_tensor[first + k]], 1);
    return st;
}

uvmrt_status_t uvmrt__tier_before_call(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, size_t first, size_t n)
{
    if (ctx->tier.n_disk == 0) return UVMRT_OK;
    uvmrt_status_t st = uvmrt__tier_poll(ctx, 0);
    const uvmrt_sequence_t *q = &ctx->sched.cur;
    /* this call's own tensors still being written: their write must finish first
     * (a failed one keeps the host copy, which is all this call needs) */
    for (size_t k = 0; k < n; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (t->on_disk && t->wb != NULL && finish_write(ctx, t) != UVMRT_OK) st = UVMRT_ERR_IO;
    }
    uvmrt_spill_req_t **reqs = calloc(n ? n : 1, sizeof *reqs);
    uint8_t *to_read = calloc(n ? n : 1, 1);
    if (reqs == NULL || to_read == NULL) {
        free(reqs);
        free(to_read);
        return UVMRT_ERR_NOMEM;
    }
    uint64_t bytes = 0, reads = 0, ahead = 0, fresh = 0;
    for (size_t k = 0; k < n; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (!t->on_disk || t->host_valid) continue;
        int dup = 0; /* a tensor named twice in one call is read once */
        for (size_t j = 0; j < k; j++) dup |= q->use_tensor[first + j] == t->id;
        if (dup) continue;
        if (t->rd != NULL) ahead += t->footprint; /* read ahead: waited for below */
        else if (!reads_contents(q, first, n, t->id)) to_read[k] = 2, fresh += t->footprint;
        else to_read[k] = 1, reads += t->footprint;
    }
    /* the copies read ahead, and those the call only writes, count in the window as the
     * reads do */
    if (make_room(ctx, reads + ahead + fresh) != UVMRT_OK) st = UVMRT_ERR_IO;
    int ahead_failed = 0;
    for (size_t k = 0; k < n; k++) { /* read ahead: waited for, a failure as a read's here */
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (t->rd == NULL) continue;
        uvmrt_status_t r = uvmrt__spill_wait(ctx->tier.sp, t->rd);
        t->rd = NULL;
        if (r == UVMRT_OK) {
            set_host_valid(ctx, t, 1);
            bytes += t->footprint;
        } else {
            read_failed(ctx, layer, phase, t);
            st = UVMRT_ERR_IO;
            ahead_failed = 1;
        }
    }
    if (ahead_failed) memset(to_read, 0, n ? n : 1); /* the call fails: no more reads */
    if (!ctx->tier.modelled && reads > 0) { /* the pages the reads fill, brought in first */
        uvmrt_tensor_t **fill = malloc(n * sizeof *fill);
        size_t m = 0;
        for (size_t k = 0; fill != NULL && k < n; k++)
            if (to_read[k] == 1) fill[m++] = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (fill != NULL) populate(ctx, fill, m); /* no room to batch them: read as they are */
        free(fill);
    }
    for (size_t k = 0; k < n; k++) {
        if (!to_read[k]) continue;
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (to_read[k] == 2) continue; /* the call overwrites every byte: nothing to read */
        if (ctx->tier.modelled) {
            set_host_valid(ctx, t, 1);
            bytes += t->footprint;
            continue;
        }
        uvmrt_status_t r = uvmrt__spill_submit(ctx->tier.sp, t->spill_file, 0, t->ptr, t->footprint, &reqs[k]);
        if (r != UVMRT_OK) st = r;
    }
    for (size_t k = 0; k < n; k++) {
        if (reqs[k] == NULL) continue;
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[first + k]];
        if (uvmrt__spill_wait(ctx->tier.sp, reqs[k]) == UVMRT_OK) {
            set_host_valid(ctx, t, 1);
            bytes += t->footprint;
        } else {
            read_failed(ctx, layer, phase, t);
            st = UVMRT_ERR_IO;
        }
    }
    if (st == UVMRT_OK && fresh > 0) st = make_fresh(ctx, q, first, n, to_read);
    free(reqs);
    free(to_read);
    ctx->tier.read_pending += bytes; /* also a read before a begin that failed: it happened */
    if (bytes > 0) uvmrt__stat_add(ctx, layer, phase, STAT_SPILL_READ, bytes);
    return st;
}

/* Whether the end of a call that used t with access acc writes t back. */
static int writes_back(const uvmrt_tensor_t *t, unsigned acc)
{
    return t->on_disk && t->host_valid && t->wb == NULL && ((acc & UVMRT_USE_WRITE) || !t->file_valid);
}

void uvmrt__tier_call_bytes(const uvmrt_context_t *ctx, const uvmrt_call_t *c, uint64_t *read, uint64_t *write)
{
    *read = ctx->tier.read_pending;
    *write = 0;
    if (ctx->tier.n_disk == 0) return;
    const uvmrt_sequence_t *q = &ctx->sched.cur;
    for (size_t k = 0; k < c->n_uses; k++) {
        const uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[c->use_first + k]];
        int dup = 0; /* a tensor named twice in one call is written once */
        for (size_t j = 0; j < k; j++) dup |= q->use_tensor[c->use_first + j] == t->id;
        if (!dup && writes_back(t, q->use_access[c->use_first + k])) *write += t->footprint;
    }
}

uvmrt_status_t uvmrt__tier_after_call(uvmrt_context_t *ctx, const uvmrt_call_t *c)
{
    ctx->tier.read_pending = 0; /* the call's model of the work has them */
    if (ctx->tier.n_disk == 0) return UVMRT_OK;
    const uvmrt_sequence_t *q = &ctx->sched.cur;
    int any = 0;
    for (size_t k = 0; k < c->n_uses; k++) any |= ctx->tensors.by_id[q->use_tensor[c->use_first + k]]->on_disk;
    if (!any) return UVMRT_OK;
    /* the call's work on them is done before their bytes are taken or dropped */
    uvmrt_status_t st = uvmrt__be_stream_sync(ctx, c->stream);
    if (st != UVMRT_OK) return st;
    uint64_t bytes = 0;
    for (size_t k = 0; k < c->n_uses && st == UVMRT_OK; k++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[q->use_tensor[c->use_first + k]];
        unsigned acc = q->use_access[c->use_first + k];
        if (!t->on_disk || !t->host_valid || t->wb != NULL) continue; /* a retried end: already written */
        if (!(acc & UVMRT_USE_WRITE) && t->file_valid) {
            drop_host(ctx, t);
            continue;
        }
        if (ctx->tier.modelled) {
            t->file_valid = 1;
            drop_host(ctx, t);
            bytes += t->footprint;
            continue;
        }
        if (writing_add(ctx, t->id) != 0) return UVMRT_ERR_NOMEM;
        st = uvmrt__spill_submit(ctx->tier.sp, t->spill_file, 1, t->ptr, t->footprint, &t->wb);
        if (st != UVMRT_OK) {
            ctx->tier.n_writing--;
            break;
        }
        t->file_valid = 0;
        bytes += t->footprint;
    }
    if (bytes > 0) uvmrt__stat_add(ctx, c->layer, c->phase, STAT_SPILL_WRITE, bytes);
    return st;
}

/* ------------------------------------------------------------------ the public call */
static uvmrt_status_t to_disk(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int zero)
{
    uvmrt_tier_state_t *s = &ctx->tier;
    if (!s->modelled && strcmp(ctx->cfg.spill_dir, "none") == 0) {
        LOG_ERROR(&ctx->log,
                  "uvmrt_tensor_set_tier('%s', disk): no spill directory: set UVMRT_SPILL_DIR to a "
                  "directory on a fast local disk",
                  t->name);
        return UVMRT_ERR_CONFIG;
    }
    if (!t->placed_host || t->pinned != NULL) {
        LOG_ERROR(&ctx->log,
                  "uvmrt_tensor_set_tier('%s', disk): the tensor is %s: expected "
                  "uvmrt_tensor_set_placement(UVMRT_PLACE_HOST) first",
                  t->name, t->pinned != NULL ? "in page-locked memory (UVMRT_PLACE_PINNED)" : "not placed in host memory");
        return UVMRT_ERR_STATE;
    }
    if (s->modelled) {
        t->on_disk = 1;
        t->spill_file = -1;
        t->file_valid = t->host_valid = 1;
        s->n_disk++;
        drop_host(ctx, t);
        window_update(ctx);
        return UVMRT_OK;
    }
    if (s->sp == NULL) {
        uvmrt_status_t st = uvmrt__spill_open(ctx->cfg.spill_dir, s->ops, &ctx->log, &s->sp);
        if (st != UVMRT_OK) return st;
    }
    char lab[300];
    label_of(ctx, t, lab, sizeof lab);
    int f;
    uvmrt_status_t st = uvmrt__spill_file_create(s->sp, lab, t->footprint, &f);
    if (st == UVMRT_OK && !zero) { /* zero: the file's reserved space reads as zeros */
        populate(ctx, &t, 1); /* a never-touched tensor's pages too: the write would fault each in */
        st = uvmrt__spill_transfer(s->sp, f, 1, t->ptr, t->footprint);
        if (st != UVMRT_OK) uvmrt__spill_file_remove(s->sp, f);
    }
    if (st != UVMRT_OK) return st;
    t->on_disk = 1;
    t->spill_file = f;
    t->file_valid = t->host_valid = 1;
    s->n_disk++;
    drop_host(ctx, t);
    /* zero: a host copy that stays (no discard: CUDA 12; or a discard that failed) is
     * what the calls will use, so it is made zero as the file is */
    if (zero && t->host_valid) memset(t->ptr, 0, t->footprint);
    window_update(ctx);
    return UVMRT_OK;
}

static uvmrt_status_t to_memory(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    uvmrt_tier_state_t *s = &ctx->tier;
    uint64_t need = uvmrt__host_need_except(ctx, t);
    if (ctx->host_budget != 0 && need > ctx->host_budget) {
        LOG_ERROR(&ctx->log,
                  "uvmrt_tensor_set_tier('%s', memory): %.2f GiB back in host memory make the host need %.2f GiB, "
                  "over the host budget of %.2f GiB (UVMRT_HOST_BUDGET, --host-budget): expected it to stay on the "
                  "disk tier or a host budget of at least %.2f GiB",
                  t->name, t->footprint / 1073741824.0, need / 1073741824.0, ctx->host_budget / 1073741824.0,
                  need / 1073741824.0);
        return UVMRT_ERR_BUDGET;
    }
    if (t->wb != NULL) (void)finish_write(ctx, t); /* a failure keeps the host copy: all we need */
    (void)finish_read(ctx, t); /* a failure: read below, as if it had not been read ahead */
    if (!t->host_valid && !s->modelled) {
        populate(ctx, &t, 1);
        uvmrt_status_t st = uvmrt__spill_transfer(s->sp, t->spill_file, 0, t->ptr, t->footprint);
        if (st != UVMRT_OK) return st;
    }
    set_host_valid(ctx, t, 1);
    if (!s->modelled) uvmrt__spill_file_remove(s->sp, t->spill_file);
    t->on_disk = 0;
    t->spill_file = -1;
    s->n_disk--;
    window_update(ctx);
    return UVMRT_OK;
}

uvmrt_status_t uvmrt_tensor_set_tier(uvmrt_context_t *ctx, uvmrt_tensor_t *tensor, uvmrt_tier_t tier)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    uvmrt_tensor_t *t = uvmrt__tensor_checked(ctx, tensor);
    if (t == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_tier(%p): not a live tensor of this context", (void *)tensor);
        return UVMRT_ERR_NOT_FOUND;
    }
    if ((unsigned)tier > UVMRT_TIER_DISK_ZERO) {
        LOG_ERROR(&ctx->log,
                  "uvmrt_tensor_set_tier('%s'): tier %d: expected UVMRT_TIER_MEMORY, UVMRT_TIER_DISK or "
                  "UVMRT_TIER_DISK_ZERO",
                  t->name, (int)tier);
        return UVMRT_ERR_INVALID;
    }
    if (uvmrt__in_step(ctx)) {
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_tier('%s') inside a step: change tiers between steps", t->name);
        return UVMRT_ERR_STATE;
    }
    if (t->on_disk && tier == UVMRT_TIER_DISK_ZERO) {
        LOG_ERROR(&ctx->log,
                  "uvmrt_tensor_set_tier('%s', disk zero): already on the disk tier: UVMRT_TIER_DISK_ZERO puts a "
                  "tensor there from memory",
                  t->name);
        return UVMRT_ERR_STATE;
    }
    if (t->on_disk == (tier != UVMRT_TIER_MEMORY)) return UVMRT_OK;
    uvmrt_status_t st = tier == UVMRT_TIER_MEMORY ? to_memory(ctx, t) : to_disk(ctx, t, tier == UVMRT_TIER_DISK_ZERO);
    if (st != UVMRT_OK)
        LOG_ERROR(&ctx->log, "uvmrt_tensor_set_tier('%s', %s): tier unchanged: %s", t->name,
                  tier == UVMRT_TIER_MEMORY ? "memory" : tier == UVMRT_TIER_DISK ? "disk" : "disk zero",
                  uvmrt_status_str(st));
    return st;
}

uvmrt_tier_t uvmrt_tensor_tier(const uvmrt_tensor_t *t)
{
    return t && t->magic == UVMRT_TENSOR_MAGIC && t->on_disk ? UVMRT_TIER_DISK : UVMRT_TIER_MEMORY;
}

/* ------------------------------------------------------------------ lifetime */
void uvmrt__tier_forget(uvmrt_context_t *ctx, uvmrt_tensor_t *t)
{
    if (!t->on_disk) return;
    if (t->wb != NULL) {
        (void)uvmrt__spill_wait(ctx->tier.sp, t->wb); /* its contents die with it */
        t->wb = NULL;
    }
    (void)finish_read(ctx, t); /* its buffer is about to go */
    if (!ctx->tier.modelled) uvmrt__spill_file_remove(ctx->tier.sp, t->spill_file);
    if (!t->host_valid) ctx->tier.off_host -= t->footprint; /* it leaves with its bytes */
    t->on_disk = 0;
    ctx->tier.n_disk--;
    window_update(ctx);
}

void uvmrt__tier_close(uvmrt_context_t *ctx)
{
    if (ctx->tier.sp != NULL) (void)uvmrt__tier_poll(ctx, 1);
    for (int id = 0; ctx->tier.sp != NULL && id < ctx->tensors.n; id++) {
        uvmrt_tensor_t *t = ctx->tensors.by_id[id];
        if (t != NULL && t->magic == UVMRT_TENSOR_MAGIC && t->rd != NULL) (void)finish_read(ctx, t);
    }
    uvmrt__spill_close(ctx->tier.sp);
    uvmrt__be_stream_destroy(ctx, ctx->tier.fill_stream);
    free(ctx->tier.writing);
    memset(&ctx->tier, 0, sizeof ctx->tier); /* modelled too: nothing is left to model */
}

void uvmrt__tier_set_ops(uvmrt_context_t *ctx, const uvmrt_spill_ops_t *ops) { ctx->tier.ops = ops; }

void uvmrt__tier_model(uvmrt_context_t *model, const uvmrt_context_t *parent)
{
    model->tier.modelled = strcmp(parent->cfg.spill_dir, "none") != 0;
}
