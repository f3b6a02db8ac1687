/*
 * spill.h -- the disk tier: files in a private subdirectory of a directory the user
 * names (UVMRT_SPILL_DIR), filled and read back in large aligned transfers on CPU
 * threads. The engine is io_uring (liburing) where io_uring_queue_init works, else a
 * pool of threads doing pread/pwrite, chosen when the spill is opened and reported.
 * Files are opened O_DIRECT; where the filesystem refuses it (EINVAL), buffered, with
 * a notice. Self-contained: it knows files, buffers and labels, not tensors.
 *
 * Nothing lost: a transfer that fails (an error, a short count) is reported by
 * uvmrt__spill_wait with the file, its label and the cause. A failed write leaves the
 * caller's buffer untouched (the caller keeps it until the write completed); a failed
 * read leaves the file as it was, and says that the buffer's contents are not valid.
 *
 * Threads: open, close, file_create/remove, submit and wait are called by one thread
 * (the one that drives the context); the engine's threads only move bytes.
 */
#ifndef UVMRT_SPILL_H
#define UVMRT_SPILL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "log.h"
#include "uvmrt.h"

#define UVMRT_SPILL_ALIGN 4096u           /* O_DIRECT buffer, length and offset alignment */
#define UVMRT_SPILL_CHUNK (8u << 20)      /* bytes per read or write call */
#define UVMRT_SPILL_DEPTH 16u             /* chunks in flight on io_uring (the pool: 4 threads) */
#define UVMRT_SPILL_PREFIX "uvmrt-spill." /* private subdirectories: PREFIX<pid>.<start>.<n> */

/* The system calls the spill makes that can fail: the test seam (tests/test_spill.c
 * fails the k-th of each kind). Each returns what the system call does, with -errno
 * instead of -1. NULL entries and a NULL table: the real calls. */
typedef struct uvmrt_spill_ops {
    int (*open_file)(int dirfd, const char *name, int flags, mode_t mode); /* fd or -errno */
    int (*fallocate)(int fd, off_t bytes);                                 /* 0 or -errno */
    int (*uring_probe)(void); /* 0: io_uring may be used, -errno: it is blocked */
    /* Every read or write chunk's result passes here before it is judged (res: bytes
     * moved or -errno); the seam replaces it with an error or a short count. */
    ssize_t (*result)(int write, ssize_t res);
} uvmrt_spill_ops_t;

typedef struct uvmrt_spill uvmrt_spill_t;
typedef struct uvmrt_spill_req uvmrt_spill_req_t;

/* Opens the tier in dir (an existing directory): removes the private subdirectories
 * killed runs left there (their pid is gone, or is another process now), creates this
 * run's (0700), and starts the engine. log: where open's notices go (the engine and
 * why, O_DIRECT refused); errors are logged too. UVMRT_ERR_IO (logged, naming dir and
 * the cause) when dir cannot be used; UVMRT_ERR_NOMEM. */
uvmrt_status_t uvmrt__spill_open(const char *dir, const uvmrt_spill_ops_t *ops, const uvmrt_log_t *log,
                                 uvmrt_spill_t **out);
/* Stops the engine (after every request was waited for), removes the files and the
 * private subdirectory. NULL: no-op. */
void uvmrt__spill_close(uvmrt_spill_t *sp);

/* "io_uring" or "threads", and why ("io_uring_queue_init: Operation not permitted"). */
const char *uvmrt__spill_engine(const uvmrt_spill_t *sp);
const char *uvmrt__spill_engine_why(const uvmrt_spill_t *sp);
/* The private subdirectory's path. */
const char *uvmrt__spill_path(const uvmrt_spill_t *sp);
/* 1: every file so far is O_DIRECT; 0: some filesystem refused it (buffered). */
int uvmrt__spill_direct(const uvmrt_spill_t *sp);

/* Creates a file (0600, O_EXCL, O_NOFOLLOW) of bytes rounded up to UVMRT_SPILL_ALIGN,
 * reserved with fallocate; label names its contents in messages (a tensor's name).
 * *out: its number. UVMRT_ERR_IO (logged: the file, the bytes needed and free) when the
 * disk lacks the space, nothing left behind; UVMRT_ERR_INVALID for bytes 0. */
uvmrt_status_t uvmrt__spill_file_create(uvmrt_spill_t *sp, const char *label, uint64_t bytes, int *out);
/* Removes a file (no request of it in flight). */
void uvmrt__spill_file_remove(uvmrt_spill_t *sp, int file);
uint64_t uvmrt__spill_file_bytes(const uvmrt_spill_t *sp, int file);

/* Starts a transfer of bytes between buf and the start of file: write 1 (buf to the
 * file) or 0 (the file into buf). buf, bytes: multiples of UVMRT_SPILL_ALIGN, bytes at
 * most the file's. The buffer belongs to the transfer until uvmrt__spill_wait.
 * UVMRT_ERR_INVALID (logged) for bad arguments, UVMRT_ERR_NOMEM. */
uvmrt_status_t uvmrt__spill_submit(uvmrt_spill_t *sp, int file, int write, void *buf, uint64_t bytes,
                                   uvmrt_spill_req_t **out);
/* Waits for a transfer and frees the request. UVMRT_ERR_IO, logged at error naming the
 * file, its label, the direction and the cause (errno, or a short count and where),
 * when any part failed; then a write's buffer is as it was, a read's is not valid.
 * NULL req: UVMRT_OK. */
uvmrt_status_t uvmrt__spill_wait(uvmrt_spill_t *sp, uvmrt_spill_req_t *req);
/* 1 when req has finished (uvmrt__spill_wait will not block). */
int uvmrt__spill_done(uvmrt_spill_t *sp, const uvmrt_spill_req_t *req);
/* Both, for one transfer. */
uvmrt_status_t uvmrt__spill_transfer(uvmrt_spill_t *sp, int file, int write, void *buf, uint64_t bytes);

#endif
