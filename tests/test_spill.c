/*
 * test_spill.c -- the disk tier's files and engines (src/host/spill.c): data written and
 * read back through both engines, the private directory and the files' modes, stale
 * directories of killed runs removed, O_DIRECT refused (buffered fallback), a full
 * disk (a 1 MiB tmpfs, when root), and the k-th fallocate, read or write failing or
 * coming back short for every k, with the data where it was before the transfer.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "spill.h"
#include "spill_seam.h"

static const uvmrt_log_t test_log = {UVMRT_LOG_DEBUG, log_capture, NULL};

/* ------------------------------------------------------------------ helpers */
static char base_dir[256];

static void make_base(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(base_dir, sizeof base_dir, "%s/uvmrt-test-spill.XXXXXX", t && *t ? t : "/tmp");
    cr_assert_not_null(mkdtemp(base_dir));
    seam_reset();
    log_reset();
}

/* Entries in dir (not . and ..). */
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

static void remove_base(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base_dir);
    cr_assert_eq(system(cmd), 0);
}

static unsigned char *pattern(size_t n, unsigned seed)
{
    unsigned char *p = aligned_alloc(UVMRT_SPILL_ALIGN, n);
    cr_assert_not_null(p);
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(xorshift64(&s) >> 24);
    return p;
}

/* Writes n patterned bytes and reads them back into a zeroed buffer. */
static void roundtrip(uvmrt_spill_t *sp, size_t n)
{
    int f;
    cr_assert_eq(uvmrt__spill_file_create(sp, "layer0.m", n, &f), UVMRT_OK, "%s", log_text());
    unsigned char *src = pattern(n, 7), *dst = aligned_alloc(UVMRT_SPILL_ALIGN, n);
    memset(dst, 0, n);
    cr_assert_eq(uvmrt__spill_transfer(sp, f, 1, src, n), UVMRT_OK, "%s", log_text());
    cr_assert_eq(uvmrt__spill_transfer(sp, f, 0, dst, n), UVMRT_OK, "%s", log_text());
    cr_assert(memcmp(src, dst, n) == 0, "the bytes read back differ from those written");
    free(src);
    free(dst);
}

/* ------------------------------------------------------------------ tests */
Test(spill, roundtrip_both_engines_modes_and_cleanup)
{
    make_base();
    for (int blocked = 0; blocked <= 1; blocked++) {
        seam.block_uring = blocked;
        uvmrt_spill_t *sp = NULL;
        cr_assert_eq(uvmrt__spill_open(base_dir, &seam_ops, &test_log, &sp), UVMRT_OK, "%s", log_text());
        const char *engine = uvmrt__spill_engine(sp), *why = uvmrt__spill_engine_why(sp);
#ifdef UVMRT_HAVE_LIBURING
        if (blocked) {
            cr_assert_str_eq(engine, "threads");
            cr_assert(strstr(why, "Operation not permitted") != NULL, "why: %s", why);
        }
#else
        cr_assert_str_eq(engine, "threads");
        cr_assert_str_eq(why, "built without liburing");
#endif
        cr_assert(log_contains(engine), "the engine is reported: %s", log_text());
        cr_log_info("uring %s: engine %s (%s)", blocked ? "blocked" : "allowed", engine, why);
        struct stat st;
        cr_assert_eq(stat(uvmrt__spill_path(sp), &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0700);
        /* three chunks and a tail: several in flight at once */
        roundtrip(sp, 3 * UVMRT_SPILL_CHUNK + 5 * UVMRT_SPILL_ALIGN);
        char file[512];
        snprintf(file, sizeof file, "%s/f0", uvmrt__spill_path(sp));
        cr_assert_eq(stat(file, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0600);
        cr_assert_geq(st.st_blocks * 512, 3 * UVMRT_SPILL_CHUNK, "space was reserved");
        uvmrt__spill_close(sp);
        cr_assert_eq(entries(base_dir), 0, "the private directory is removed at close");
    }
    remove_base();
}

Test(spill, many_transfers_in_flight)
{
    make_base();
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, NULL, &test_log, &sp), UVMRT_OK);
    enum { N = 6 };
    size_t n = UVMRT_SPILL_CHUNK + UVMRT_SPILL_ALIGN;
    int f[N];
    unsigned char *src[N], *dst[N];
    uvmrt_spill_req_t *r[N];
    for (int i = 0; i < N; i++) {
        cr_assert_eq(uvmrt__spill_file_create(sp, "t", n, &f[i]), UVMRT_OK);
        src[i] = pattern(n, (unsigned)i + 1);
        dst[i] = aligned_alloc(UVMRT_SPILL_ALIGN, n);
        cr_assert_eq(uvmrt__spill_submit(sp, f[i], 1, src[i], n, &r[i]), UVMRT_OK);
    }
    for (int i = N - 1; i >= 0; i--) cr_assert_eq(uvmrt__spill_wait(sp, r[i]), UVMRT_OK);
    for (int i = 0; i < N; i++) cr_assert_eq(uvmrt__spill_submit(sp, f[i], 0, dst[i], n, &r[i]), UVMRT_OK);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(uvmrt__spill_wait(sp, r[i]), UVMRT_OK);
        cr_assert(memcmp(src[i], dst[i], n) == 0, "file %d read back differs", i);
        free(src[i]);
        free(dst[i]);
    }
    uvmrt__spill_file_remove(sp, f[2]);
    cr_assert_eq(uvmrt__spill_file_bytes(sp, f[2]), 0);
    uvmrt__spill_close(sp);
    cr_assert_eq(entries(base_dir), 0);
    remove_base();
}

Test(spill, refuses_unaligned_and_oversized_transfers)
{
    make_base();
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, NULL, &test_log, &sp), UVMRT_OK);
    int f;
    cr_assert_eq(uvmrt__spill_file_create(sp, "w", 10000, &f), UVMRT_OK);
    cr_assert_eq(uvmrt__spill_file_bytes(sp, f), 12288, "rounded up to the alignment");
    unsigned char *b = aligned_alloc(UVMRT_SPILL_ALIGN, 16384);
    uvmrt_spill_req_t *r = NULL;
    cr_assert_eq(uvmrt__spill_submit(sp, f, 1, b + 1, 4096, &r), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt__spill_submit(sp, f, 1, b, 100, &r), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt__spill_submit(sp, f, 1, b, 16384, &r), UVMRT_ERR_INVALID);
    cr_assert_eq(uvmrt__spill_submit(sp, f + 1, 1, b, 4096, &r), UVMRT_ERR_INVALID);
    cr_assert_null(r);
    cr_assert_eq(uvmrt__spill_file_create(sp, "zero", 0, &f), UVMRT_ERR_INVALID);
    free(b);
    uvmrt__spill_close(sp);
    remove_base();
}

Test(spill, open_fails_on_a_missing_directory)
{
    make_base();
    char missing[300];
    snprintf(missing, sizeof missing, "%s/nope", base_dir);
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(missing, NULL, &test_log, &sp), UVMRT_ERR_IO);
    cr_assert_null(sp);
    cr_assert(log_contains(missing) && log_contains("No such file"), "%s", log_text());
    remove_base();
}

/* A directory named as a run of pid with start time start, holding one file. */
static void fake_run_dir(int pid, unsigned long long start, char *path, size_t len)
{
    snprintf(path, len, "%s/" UVMRT_SPILL_PREFIX "%d.%llu.0", base_dir, pid, start);
    cr_assert_eq(mkdir(path, 0700), 0);
    char f[600];
    snprintf(f, sizeof f, "%s/f0", path);
    FILE *fp = fopen(f, "w");
    cr_assert_not_null(fp);
    fputs("stale", fp);
    fclose(fp);
}

Test(spill, removes_the_directories_of_killed_runs_only)
{
    make_base();
    pid_t child = fork();
    if (child == 0) _exit(0);
    cr_assert_eq(waitpid(child, NULL, 0), child); /* child's pid is now free */
    char dead[400], reused[400], other[400];
    fake_run_dir((int)child, 12345, dead, sizeof dead);
    /* our own pid with another start time: the pid was reused since */
    fake_run_dir((int)getpid(), 1, reused, sizeof reused);
    /* not a spill directory: never touched */
    snprintf(other, sizeof other, "%s/keep-me", base_dir);
    cr_assert_eq(mkdir(other, 0700), 0);

    uvmrt_spill_t *a = NULL, *b = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, NULL, &test_log, &a), UVMRT_OK);
    struct stat st;
    cr_assert_neq(stat(dead, &st), 0, "a dead run's directory is removed");
    cr_assert_neq(stat(reused, &st), 0, "a reused pid's directory is removed");
    cr_assert_eq(stat(other, &st), 0);
    cr_assert(log_contains("ended without cleaning up"), "%s", log_text());
    /* a live run's directory (a's) survives another open */
    cr_assert_eq(uvmrt__spill_open(base_dir, NULL, &test_log, &b), UVMRT_OK);
    cr_assert_str_neq(uvmrt__spill_path(a), uvmrt__spill_path(b));
    cr_assert_eq(stat(uvmrt__spill_path(a), &st), 0);
    uvmrt__spill_close(b);
    uvmrt__spill_close(a);
    cr_assert_eq(entries(base_dir), 1);
    remove_base();
}

Test(spill, buffered_when_o_direct_is_refused)
{
    make_base();
    seam.refuse_direct = 1;
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, &seam_ops, &test_log, &sp), UVMRT_OK);
    cr_assert_eq(uvmrt__spill_direct(sp), 1);
    roundtrip(sp, UVMRT_SPILL_CHUNK + UVMRT_SPILL_ALIGN);
    cr_assert_eq(uvmrt__spill_direct(sp), 0);
    cr_assert(log_contains("refuses O_DIRECT") && log_contains("layer0.m"), "%s", log_text());
    uvmrt__spill_close(sp);
    remove_base();
}

Test(spill, failed_fallocate_names_the_file_and_leaves_nothing)
{
    make_base();
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, &seam_ops, &test_log, &sp), UVMRT_OK);
    seam_arm(SEAM_FALLOCATE, 1, -ENOSPC);
    int f = -7;
    cr_assert_eq(uvmrt__spill_file_create(sp, "block3.v", 1 << 20, &f), UVMRT_ERR_IO);
    cr_assert_eq(f, -7);
    cr_assert(log_contains("block3.v") && log_contains("1048576 bytes") && log_contains("bytes free") &&
                  log_contains("No space left"),
              "%s", log_text());
    cr_assert_eq(entries(uvmrt__spill_path(sp)), 0, "the file is removed");
    seam_arm(SEAM_OPEN, 1, -EACCES);
    cr_assert_eq(uvmrt__spill_file_create(sp, "block3.v", 1 << 20, &f), UVMRT_ERR_IO);
    cr_assert(log_contains("Permission denied"), "%s", log_text());
    /* the next one works, in the slot the failures did not keep */
    seam_arm(-1, 0, 0);
    cr_assert_eq(uvmrt__spill_file_create(sp, "block3.v", 1 << 20, &f), UVMRT_OK);
    cr_assert_eq(f, 0);
    uvmrt__spill_close(sp);
    remove_base();
}

/* Every k-th chunk result of one direction fails (an error or a short count): the
 * transfer reports it naming the label and the file; a failed write leaves the buffer
 * as it was and the previous contents of the file readable after a good write again;
 * a failed read leaves the file intact (the next read gets every byte). */
static void sweep(int write, ssize_t with, const char *needle)
{
    make_base();
    for (int blocked = 0; blocked <= 1; blocked++) {
        seam.block_uring = blocked;
        uvmrt_spill_t *sp = NULL;
        cr_assert_eq(uvmrt__spill_open(base_dir, &seam_ops, &test_log, &sp), UVMRT_OK);
        const int chunks = 3;
        size_t n = (size_t)chunks * UVMRT_SPILL_CHUNK;
        int f;
        cr_assert_eq(uvmrt__spill_file_create(sp, "h.7.adam_m", n, &f), UVMRT_OK);
        unsigned char *data = pattern(n, 3), *copy = malloc(n), *back = aligned_alloc(UVMRT_SPILL_ALIGN, n);
        memcpy(copy, data, n);
        if (!write) cr_assert_eq(uvmrt__spill_transfer(sp, f, 1, data, n), UVMRT_OK);
        for (int k = 1; k <= chunks; k++) {
            log_reset();
            seam_arm(write ? SEAM_WRITE : SEAM_READ, k, with);
            uvmrt_status_t st = uvmrt__spill_transfer(sp, f, write, write ? data : back, n);
            cr_assert_eq(st, UVMRT_ERR_IO, "k=%d", k);
            cr_assert(log_contains("h.7.adam_m") && log_contains(uvmrt__spill_path(sp)) && log_contains(needle),
                      "k=%d: %s", k, log_text());
            cr_assert(memcmp(data, copy, n) == 0, "k=%d: the host copy changed", k);
            seam_arm(-1, 0, 0);
            if (write) cr_assert_eq(uvmrt__spill_transfer(sp, f, 1, data, n), UVMRT_OK);
            memset(back, 0, n);
            cr_assert_eq(uvmrt__spill_transfer(sp, f, 0, back, n), UVMRT_OK);
            cr_assert(memcmp(back, copy, n) == 0, "k=%d: the file lost data", k);
        }
        cr_assert_eq(seam.calls[write ? SEAM_WRITE : SEAM_READ], chunks, "every chunk was judged");
        free(data);
        free(copy);
        free(back);
        uvmrt__spill_close(sp);
    }
    remove_base();
}

Test(spill, kth_write_fails_eio) { sweep(1, -EIO, "Input/output error"); }
Test(spill, kth_write_fails_enospc) { sweep(1, -ENOSPC, "No space left"); }
Test(spill, kth_write_is_short) { sweep(1, 4096, "short write: 4096 of"); }
Test(spill, kth_read_fails_eio) { sweep(0, -EIO, "the host copy is not valid"); }
Test(spill, kth_read_is_short) { sweep(0, 0, "short read: 0 of"); }

/* After the mounting test, even one that failed: nothing left mounted. */
static void unmount_base(void)
{
    if (base_dir[0] == '\0') return;
    umount2(base_dir, MNT_DETACH);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base_dir);
    if (system(cmd) != 0) fprintf(stderr, "test_spill: could not remove %s\n", base_dir);
}

/* A real full disk: a 1 MiB tmpfs (root only; skipped otherwise). */
Test(spill, full_disk_is_a_clear_error, .fini = unmount_base)
{
    make_base();
    if (geteuid() != 0) {
        remove_base();
        cr_skip_test("not root: no tmpfs of 1 MiB can be mounted");
    }
    if (mount("uvmrt-spill-test", base_dir, "tmpfs", 0, "size=1m,mode=0700") != 0) {
        int e = errno;
        remove_base();
        cr_skip_test("mount -t tmpfs: %s", strerror(e));
    }
    uvmrt_spill_t *sp = NULL;
    cr_assert_eq(uvmrt__spill_open(base_dir, NULL, &test_log, &sp), UVMRT_OK, "%s", log_text());
    int f, g = -1;
    cr_assert_eq(uvmrt__spill_file_create(sp, "small", 512 << 10, &f), UVMRT_OK, "%s", log_text());
    unsigned char *data = pattern(512 << 10, 9), *back = aligned_alloc(UVMRT_SPILL_ALIGN, 512 << 10);
    cr_assert_eq(uvmrt__spill_transfer(sp, f, 1, data, 512 << 10), UVMRT_OK, "%s", log_text());
    log_reset();
    cr_assert_eq(uvmrt__spill_file_create(sp, "blocks.9.master", 1 << 20, &g), UVMRT_ERR_IO);
    cr_assert_eq(g, -1);
    cr_assert(log_contains("blocks.9.master") && log_contains("1048576 bytes") && log_contains("bytes free") &&
                  log_contains("No space left"),
              "%s", log_text());
    cr_assert_eq(entries(uvmrt__spill_path(sp)), 1, "the refused file is not left behind");
    /* what was spilled before is intact */
    cr_assert_eq(uvmrt__spill_transfer(sp, f, 0, back, 512 << 10), UVMRT_OK, "%s", log_text());
    cr_assert(memcmp(back, data, 512 << 10) == 0);
    free(data);
    free(back);
    uvmrt__spill_close(sp);
    cr_assert_eq(entries(base_dir), 0);
    cr_assert_eq(umount(base_dir), 0);
    remove_base();
}
