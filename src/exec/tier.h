/*
 * tier.h -- tensors on the disk tier (uvmrt_tensor_set_tier): each has a file of the
 * spill (spill.h); the executor reads it into the tensor's host memory before a layer
 * call that uses it and writes it back after, and the host copy is dropped once the
 * file holds the contents (internal; tier.c owns ctx->tier and the tensors' tier
 * fields).
 */
#ifndef UVMRT_TIER_H
#define UVMRT_TIER_H

#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "spill.h"
#include "uvmrt.h"

typedef struct uvmrt_tier_state {
    uvmrt_spill_t *sp;            /* opened at the first tensor put on the disk tier */
    const uvmrt_spill_ops_t *ops; /* tests: the spill's system calls (NULL: the real ones) */
    int *writing;                 /* ids of the tensors with a write-back in flight */
    int n_writing, cap_writing;
    int n_disk; /* live tensors on the disk tier */
    /* the host bytes the tier's copies may hold at once (uvmrt__tier_host's window),
     * kept when tensors change tiers: before a call's reads, write-backs in flight are
     * waited for until they and the reads fit in it */
    uint64_t window;
    uint64_t off_host;     /* footprints of the tier's tensors whose host copy is dropped now */
    uint64_t read_pending; /* bytes read for the open call, for its model of the work (touch) */
    uint64_t read_ahead;   /* bytes read ahead of their call, since the context began (tests) */
    /* a rehearsal's model context (uvmrt__tier_model): its tensors go on the tier without
     * files, their bytes counted and modelled as if they moved, their contents kept */
    int modelled;
    /* the stream of the prefetches that bring discarded pages in before a read (cuda):
     * its own, so that they never queue behind the policy's evictions; made at the first */
    uvmrt_stream_t fill_stream;
} uvmrt_tier_state_t;

/* Before layer call c opens (step.c, staged uses [first, first + n)): every disk tensor
 * it uses is in host memory once this returns UVMRT_OK (read back, the call's reads in
 * flight together, or read ahead: waited for), its bytes counted to (layer, phase).
 * UVMRT_ERR_IO (logged with the tensor, its layer and the file) when a read failed:
 * the file is as it was, the call is not opened. A write-back that failed surfaces here or at step end (its host copy
 * is kept, so nothing is lost). */
uvmrt_status_t uvmrt__tier_before_call(uvmrt_context_t *ctx, int layer, uvmrt_phase_t phase, size_t first, size_t n);
/* After call i opened (step.c), in a step that has not left its record: the disk
 * tensors of the record's next call (the next step's first after the last) are read
 * ahead, in flight beside call i's work, when they fit in the window beside the copies
 * held now. Cannot fail: a read that does not start is left to its call. */
void uvmrt__tier_read_ahead(uvmrt_context_t *ctx, size_t i);
/* After layer call c's work (step.c, before it closes): waits for its stream, starts
 * the write-back of the disk tensors it wrote (the host copy stays until the write
 * completed) and drops the host copy of those it only read. Retried calls do not
 * write twice. */
uvmrt_status_t uvmrt__tier_after_call(uvmrt_context_t *ctx, const uvmrt_call_t *c);
/* Completed write-backs: drops their host copies; block: waits for all. UVMRT_ERR_IO
 * when one failed (logged; its tensor keeps its host copy and writes again after its
 * next use). */
uvmrt_status_t uvmrt__tier_poll(uvmrt_context_t *ctx, int block);
/* A tensor being freed: its write-back waited for, its file removed. */
void uvmrt__tier_forget(uvmrt_context_t *ctx, uvmrt_tensor_t *t);
/* At destroy, after the tensors: the spill's files and directory removed. */
void uvmrt__tier_close(uvmrt_context_t *ctx);
/* The tier's tensors for the host budget (tensor.c's allocation check, the plan's):
 * *off: the footprints it keeps out of host memory (0 where their host pages stay:
 * cuda's managed memory cannot give them back yet); *window: the host bytes their
 * copies in flight may hold at once, the two largest layers' tier bytes (one layer's
 * read back while the one before it is written), at most *off. except: a tensor
 * counted as in memory (NULL: none). */
void uvmrt__tier_host(const uvmrt_context_t *ctx, const uvmrt_tensor_t *except, uint64_t *off, uint64_t *window);
/* The bytes of tensor t that host memory holds while t is off the GPU, for the plan
 * (plan: 1) or now (plan: 0): none for a disk-tier tensor whose pages go back (now: while
 * its host copy is not valid; the plan counts the tier's copies in flight as the window,
 * once for the context), its footprint otherwise (CUDA 12's managed pages stay). */
uint64_t uvmrt__tier_host_share(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t, int plan);
/* The host bytes plan p needs at its peak (uvmrt__plan_host_peak) with the tier's
 * tensors counted as their window, not their footprints. */
uint64_t uvmrt__tier_plan_host_peak(const uvmrt_context_t *ctx, const uvmrt_plan_t *p, const uint64_t *fp,
                                    uint8_t *off_gpu);
/* The disk bytes of call c (opened, not yet ended) for its model of the work: what was
 * read for it and what its end will write back. */
void uvmrt__tier_call_bytes(const uvmrt_context_t *ctx, const uvmrt_call_t *c, uint64_t *read, uint64_t *write);
/* A rehearsal's model context of parent (choose.c): when parent has a spill directory,
 * the model's tier is modelled (no files; the bytes it would move are counted and, on
 * the sim, take the profile's disk rates); else set_tier fails there as it would for real. */
void uvmrt__tier_model(uvmrt_context_t *model, const uvmrt_context_t *parent);
/* Tests: the spill's system calls (before the first tensor goes to disk). */
void uvmrt__tier_set_ops(uvmrt_context_t *ctx, const uvmrt_spill_ops_t *ops);

#endif
