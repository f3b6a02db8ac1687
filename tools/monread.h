/*
 * monread.h -- reading the snapshots uvmrt programs publish (monitor.h):
 * listing a user's segments, cleaning those of dead processes, copying one
 * consistently under its seqlock, and the JSON that uvmrt-top --json prints.
 * Compiled into uvmrt-top and tests/test_monitor (not part of libuvmrt).
 */
#ifndef UVMRT_MONREAD_H
#define UVMRT_MONREAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "monitor.h"

/* One process's (one context's) snapshot, copied out of its segment. */
typedef struct uvmrt_mon_proc {
    char shm_name[UVMRT_MON_NAME_MAX]; /* "/uvmrt.<uid>.<pid>[.<n>]" */
    uvmrt_mon_snap_t snap;
    uvmrt_mon_layer_t *layers;          /* (snap.n_layers), malloc'd */
} uvmrt_mon_proc_t;

/* Why a segment could not be read. */
typedef enum uvmrt_monread_status {
    MONREAD_OK = 0,
    MONREAD_GONE = -1,    /* no such segment (its program ended) */
    MONREAD_BAD = -2,     /* not a uvmrt snapshot, or another layout version */
    MONREAD_BUSY = -3,    /* the writer stayed inside its seqlock (a program stopped mid-publish) */
    MONREAD_NOMEM = -4,
    MONREAD_ERRNO = -5    /* a system call failed: see errno */
} uvmrt_monread_status_t;

/* A status as a phrase ("not a uvmrt snapshot ..."). */
const char *uvmrt__monread_str(int status);

/* Copies the snapshot of segment name ("/uvmrt....") into *out (out->layers
 * allocated; free with uvmrt__monread_free). Retries while the writer is inside
 * its seqlock, up to about 100 ms, so the copy is never torn. Other users can
 * create files in /dev/shm under any name, so a segment is opened without
 * blocking or following links, and read only when it is a regular file with mode
 * 0600 owned by the uid its name carries (or by the reader) and at most 64 MiB
 * (else MONREAD_BAD); every string of the copy is made safe for a terminal
 * (uvmrt__monread_sanitize). */
int uvmrt__monread_one(const char *name, uvmrt_mon_proc_t *out);
void uvmrt__monread_free(uvmrt_mon_proc_t *p);

/* Makes the string in s[0..cap) safe to print: control characters (C0, DEL, C1)
 * and bytes that are not well-formed UTF-8 become '?', and it ends with a NUL
 * inside cap (a field the publisher filled to its end is cut at cap - 1). */
void uvmrt__monread_sanitize(char *s, size_t cap);

/* The pid a segment name of this user carries, or -1 when the name is not one
 * ("uvmrt.<uid>.<pid>" or "uvmrt.<uid>.<pid>.<n>", without the slash). */
pid_t uvmrt__monread_pid_of(const char *entry, uid_t uid);

/* Every readable snapshot of this user (pid > 0: only that process), sorted by
 * pid then context. Segments whose process is gone (kill(pid, 0) fails with
 * ESRCH) are unlinked and counted in *cleaned (may be NULL); names that are not
 * regular files of this user are skipped, neither read nor removed. Waiting on
 * busy writers is capped for the whole listing (250 ms), so that many junk
 * segments cannot stall a frame. *out is an array
 * of *n (free with uvmrt__monread_free_all). Lists /dev/shm, where Linux keeps
 * POSIX shared memory. 0, or a MONREAD_* error. */
int uvmrt__monread_list(pid_t pid, uvmrt_mon_proc_t **out, size_t *n, int *cleaned);
void uvmrt__monread_free_all(uvmrt_mon_proc_t *procs, size_t n);

/* {"processes": [...]}: what uvmrt-top --json prints (see uvmrt-top(1)). */
json_t *uvmrt__monread_json(const uvmrt_mon_proc_t *procs, size_t n, uint64_t now_unix_ns);

/* Estimated seconds to the declared last step, or -1 when unknown. */
double uvmrt__monread_eta_s(const uvmrt_mon_snap_t *s);

#endif
