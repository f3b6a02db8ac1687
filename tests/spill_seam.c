/*
 * spill_seam.c -- the disk tier's fault seam (spill_seam.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spill_seam.h"

spill_seam_t seam = {.fail_kind = -1};

static int hit(int kind)
{
    int n = ++seam.calls[kind];
    return seam.fail_kind == kind && (n == seam.fail_at || (seam.fail_on && n > seam.fail_at));
}

static int seam_open(int dirfd, const char *name, int flags, mode_t mode)
{
    if (seam.refuse_direct && (flags & O_DIRECT)) return -EINVAL;
    if (hit(SEAM_OPEN)) return (int)seam.fail_with;
    int fd = openat(dirfd, name, flags, mode);
    return fd < 0 ? -errno : fd;
}

static int seam_fallocate(int fd, off_t bytes)
{
    if (hit(SEAM_FALLOCATE)) return (int)seam.fail_with;
    if (fallocate(fd, 0, 0, bytes) == 0) return 0;
    if (errno != EOPNOTSUPP) return -errno;
    return -posix_fallocate(fd, 0, bytes); /* as the spill's own call: written out */
}

static int seam_probe(void) { return seam.block_uring ? -EPERM : 0; }

static ssize_t seam_result(int write, ssize_t res)
{
    return hit(write ? SEAM_WRITE : SEAM_READ) ? seam.fail_with : res;
}

const uvmrt_spill_ops_t seam_ops = {seam_open, seam_fallocate, seam_probe, seam_result};

void seam_reset(void)
{
    memset(&seam, 0, sizeof seam);
    seam.fail_kind = -1;
}

void seam_arm(int kind, int k, ssize_t with)
{
    memset(&seam.calls, 0, sizeof seam.calls);
    seam.fail_kind = kind;
    seam.fail_at = k;
    seam.fail_on = 0;
    seam.fail_with = with;
}
