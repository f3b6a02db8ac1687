/*
 * spill_seam.h -- the disk tier's fault seam for tests (test_spill, test_tier): the
 * spill's system calls (uvmrt_spill_ops_t, src/host/spill.h) with one kind of call
 * failing at its k-th call (or from it on: a disk that fills up), O_DIRECT refused as
 * on a filesystem without it, and io_uring blocked as under seccomp.
 */
#ifndef UVMRT_TESTS_SPILL_SEAM_H
#define UVMRT_TESTS_SPILL_SEAM_H

#include <sys/types.h>

#include "spill.h"

enum { SEAM_OPEN, SEAM_FALLOCATE, SEAM_READ, SEAM_WRITE, SEAM_KINDS };

typedef struct spill_seam {
    int fail_kind;     /* SEAM_*, or -1: nothing fails */
    int fail_at;       /* 1-based call of that kind that fails */
    int fail_on;       /* 1: every call of that kind from fail_at on fails too */
    ssize_t fail_with; /* -errno, or a short count when >= 0 */
    int calls[SEAM_KINDS];
    int refuse_direct; /* open with O_DIRECT gives EINVAL (tmpfs before Linux 6.6, ramfs) */
    int block_uring;   /* io_uring_queue_init would be refused (seccomp) */
} spill_seam_t;

extern spill_seam_t seam;
extern const uvmrt_spill_ops_t seam_ops;

/* Nothing fails, nothing refused, no calls counted. */
void seam_reset(void);
/* From now on the k-th call of kind (counted from here) gives with; kind -1: none.
 * Keeps refuse_direct and block_uring. */
void seam_arm(int kind, int k, ssize_t with);

#endif
