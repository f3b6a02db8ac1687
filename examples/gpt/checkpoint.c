/*
 * checkpoint.c -- atomic, checksummed checkpoints of named buffers (see checkpoint.h).
 *
 * Written and read through plain file descriptors in 4 MiB chunks, the checksum
 * computed on the same chunk while it is in cache. The header goes in last (pwrite
 * at offset 0), so a file whose header is valid was written to its end before the
 * fsync and rename; the rename is the commit point.
 */
#define _POSIX_C_SOURCE 200809L

#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/errbuf.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define HAVE_SSE42_CRC 1
#endif

#define HEADER_WORDS 9 /* version 2's; version 1 has 8 (no run id) */
#define HEADER_BYTES (HEADER_WORDS * 8)
#define HEADER1_WORDS 8
#define CHUNK_BYTES ((size_t)4 << 20)
#define TABLE_MAX_BYTES ((uint64_t)64 << 20) /* sanity bound before allocating a table */

/* ----------------------------------------------------------------------------
 * errors */

#define ERR_PREFIX "uvmrt-gpt" /* errbuf_fail's messages on stderr start with it */

/* ----------------------------------------------------------------------------
 * CRC32C (reflected polynomial 0x82F63B78) */

static uint32_t crc_sw(uint32_t c, const unsigned char *p, size_t n) {
    uint32_t table[256]; /* 2 K operations to build: nothing next to any real payload */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int k = 0; k < 8; k++)
            v = (v >> 1) ^ (0x82F63B78u & (0u - (v & 1u)));
        table[i] = v;
    }
    while (n--)
        c = table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#ifdef HAVE_SSE42_CRC
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p,
                                                          size_t n) {
    for (; n > 0 && ((uintptr_t)p & 7) != 0; n--)
        c = _mm_crc32_u8(c, *p++);
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    for (; n > 0; n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t gpt_ckpt_crc32c(uint32_t crc, const void *buf, size_t n) {
    uint32_t c = ~crc;
#ifdef HAVE_SSE42_CRC
    if (__builtin_cpu_supports("sse4.2"))
        return ~crc_hw(c, buf, n);
#endif
    return ~crc_sw(c, buf, n);
}

/* ----------------------------------------------------------------------------
 * names and files */

void gpt_ckpt_path(char *path, size_t len, const char *dir, uint64_t step) {
    snprintf(path, len, "%s/ckpt-%012" PRIu64 ".bin", dir, step);
}

static void tmp_path(char *path, size_t len, const char *dir, uint64_t step) {
    snprintf(path, len, "%s/.ckpt-%012" PRIu64 ".bin.tmp", dir, step);
}

/* step of "ckpt-<digits>.bin"; 0 if the name is not a checkpoint's */
static int parse_name(const char *name, const char *prefix, const char *suffix, uint64_t *step) {
    size_t lp = strlen(prefix), ls = strlen(suffix), ln = strlen(name);
    if (ln <= lp + ls || strncmp(name, prefix, lp) != 0 || strcmp(name + ln - ls, suffix) != 0)
        return 0;
    uint64_t v = 0;
    for (size_t i = lp; i < ln - ls; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (UINT64_MAX - 9) / 10)
            return 0;
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    *step = v;
    return 1;
}

static int write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 0: n bytes read; -1: error or end of file first (errno 0 then) */
static int read_all(int fd, void *buf, size_t n) {
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = 0;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static int fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* What a directory entry is, for a message: "a directory", "a FIFO", ... */
static const char *kind_name(mode_t mode) {
    return S_ISREG(mode)    ? "a regular file"
           : S_ISDIR(mode)  ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISLNK(mode)  ? "a symbolic link"
                            : "not a regular file";
}

static int not_a_file(const char *path, mode_t mode, char *err, size_t errlen) {
    return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: %s, not a checkpoint file%s", path,
                       kind_name(mode), S_ISLNK(mode) ? " (links are not followed)" : "");
}

/* Opens a checkpoint for reading: only a regular file, never a device, a FIFO or a
 * socket (not even opened: lstat first), not through a symbolic link, and without
 * blocking should the entry have been swapped for a FIFO meanwhile (fstat checks
 * what was opened). Returns the descriptor, or -1 with a line in err naming the path
 * and what the entry is or why it cannot be opened. */
static int open_checkpoint(const char *path, char *err, size_t errlen) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot stat: %s", path,
                           strerror(errno));
    if (!S_ISREG(st.st_mode))
        return not_a_file(path, st.st_mode, err, errlen);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot open: %s", path,
                           strerror(errno));
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot stat: %s", path,
                           strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return not_a_file(path, st.st_mode, err, errlen);
    }
    /* reads of a regular file never block; clear the flag all the same */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

static int cmp_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* All steps matching prefix/suffix in dir, newest first, into a new array. */
static int scan(const char *dir, const char *prefix, const char *suffix, uint64_t **out,
                int *count, char *err, size_t errlen) {
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOENT)
            return 0;
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %s: cannot open: %s", dir,
                           strerror(errno));
    }
    uint64_t *steps = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t s;
        if (!parse_name(e->d_name, prefix, suffix, &s))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            uint64_t *t = realloc(steps, (size_t)cap * sizeof *t);
            if (t == NULL) {
                free(steps);
                closedir(d);
                return errbuf_fail(err, errlen, ERR_PREFIX,
                                   "checkpoint directory %s: out of memory", dir);
            }
            steps = t;
        }
        steps[n++] = s;
    }
    closedir(d);
    if (n > 1) /* qsort of a NULL array is undefined even for 0 elements */
        qsort(steps, (size_t)n, sizeof *steps, cmp_desc);
    *out = steps;
    *count = n;
    return 0;
}

int gpt_ckpt_list(const char *dir, uint64_t *steps, int cap, char *err, size_t errlen) {
    uint64_t *all;
    int n;
    if (scan(dir, "ckpt-", ".bin", &all, &n, err, errlen) != 0)
        return -1;
    for (int i = 0; i < n && i < cap; i++)
        steps[i] = all[i];
    free(all);
    return n;
}

/* ----------------------------------------------------------------------------
 * save */

static int check_buffers(const gpt_ckpt_buffer_t *bufs, int n, char *err, size_t errlen) {
    if (n < 0 || (n > 0 && bufs == NULL))
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint: %d buffers at %p: expected a list",
                           n, (const void *)bufs);
    for (int i = 0; i < n; i++) {
        size_t len = bufs[i].name ? strlen(bufs[i].name) : 0;
        if (len == 0 || len > GPT_CKPT_NAME_MAX)
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "checkpoint: buffer %d: name of %zu bytes, expected 1..%d", i, len,
                               GPT_CKPT_NAME_MAX);
        if (bufs[i].bytes > 0 && bufs[i].ptr == NULL)
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "checkpoint: buffer '%s': NULL pointer for %" PRIu64 " bytes",
                               bufs[i].name, bufs[i].bytes);
        for (int j = 0; j < i; j++)
            if (strcmp(bufs[i].name, bufs[j].name) == 0)
                return errbuf_fail(err, errlen, ERR_PREFIX,
                                   "checkpoint: buffer name '%s' given twice (%d and %d)",
                                   bufs[i].name, j, i);
    }
    return 0;
}

/* The table's bytes, in a new array. */
static unsigned char *table_build(const gpt_ckpt_buffer_t *bufs, int n, uint64_t *bytes,
                                  uint64_t *data_bytes) {
    uint64_t t = 0, d = 0;
    for (int i = 0; i < n; i++) {
        t += 4 + strlen(bufs[i].name) + 8;
        d += bufs[i].bytes;
    }
    unsigned char *tab = malloc(t + 1), *p = tab;
    if (tab == NULL)
        return NULL;
    for (int i = 0; i < n; i++) {
        uint32_t len = (uint32_t)strlen(bufs[i].name);
        memcpy(p, &len, 4);
        memcpy(p + 4, bufs[i].name, len);
        memcpy(p + 4 + len, &bufs[i].bytes, 8);
        p += 4 + len + 8;
    }
    *bytes = t;
    *data_bytes = d;
    return tab;
}

/* Writes p[0..n) in chunks, crc over it; reports progress. */
static int write_chunks(int fd, const void *ptr, uint64_t n, uint32_t *crc, uint64_t *done,
                        uint64_t total, const gpt_ckpt_save_options_t *opts) {
    const unsigned char *p = ptr;
    while (n > 0) {
        size_t k = n < CHUNK_BYTES ? (size_t)n : CHUNK_BYTES;
        *crc = gpt_ckpt_crc32c(*crc, p, k);
        if (write_all(fd, p, k) != 0)
            return -1;
        p += k;
        n -= k;
        *done += k;
        if (opts && opts->progress)
            opts->progress(opts->progress_arg, *done, total);
    }
    return 0;
}

typedef struct {
    uint32_t version;
    uint64_t header_bytes, step, nbufs, table_bytes, meta_bytes, data_bytes, run_id;
    uint32_t crc;
    unsigned char *table;
} file_info_t;

static int read_header(int fd, const char *path, file_info_t *fi, char *err, size_t errlen);
static int entry_is_own(const gpt_ckpt_entry_t *e, uint64_t run_id);

/* After a save of `saved`: leftover temporaries, then this run's checkpoints beyond
 * the newest keep (by header step; `saved` always stays). Files of other runs, and
 * entries whose header cannot be read and checked, are never removed. */
static void prune(const char *dir, int keep, uint64_t run_id, const char *saved) {
    char path[4096];
    uint64_t *steps;
    int n;
    if (scan(dir, ".ckpt-", ".bin.tmp", &steps, &n, NULL, 0) == 0) {
        for (int i = 0; i < n; i++) { /* leftovers of a save that did not finish */
            tmp_path(path, sizeof path, dir, steps[i]);
            if (unlink(path) != 0 && errno != ENOENT)
                fprintf(stderr, "uvmrt-gpt: warning: cannot remove %s: %s\n", path,
                        strerror(errno));
        }
        free(steps);
    }
    gpt_ckpt_entry_t *e;
    if (keep <= 0 || gpt_ckpt_scan(dir, &e, &n, NULL, 0) != 0)
        return;
    int kept = 1; /* the one just saved */
    for (int i = 0; i < n; i++) {
        if (!entry_is_own(&e[i], run_id) || strcmp(e[i].path, saved) == 0)
            continue;
        if (kept < keep) {
            kept++;
            continue;
        }
        if (unlink(e[i].path) != 0 && errno != ENOENT)
            fprintf(stderr, "uvmrt-gpt: warning: --keep %d: cannot remove %s: %s\n", keep,
                    e[i].path, strerror(errno));
    }
    free(e);
}

/* 1 when an entry is at path that the run did not write (its reason in why), 0 when
 * there is none or it is the run's own. */
static int foreign_at(const char *path, uint64_t run_id, char *why, size_t len) {
    struct stat st;
    if (lstat(path, &st) != 0 && errno == ENOENT)
        return 0;
    int fd = open_checkpoint(path, why, len);
    if (fd < 0)
        return 1;
    file_info_t fi;
    int bad = read_header(fd, path, &fi, why, len) != 0;
    close(fd);
    if (!bad && fi.run_id != run_id) {
        if (fi.version == 1)
            snprintf(why, len, "checkpoint %s: format version 1, written before run ids", path);
        else
            snprintf(why, len, "checkpoint %s: written by run %016" PRIx64 ", this run is %016"
                     PRIx64, path, fi.run_id, run_id);
        bad = 1;
    }
    return bad;
}

int gpt_ckpt_save(const char *dir, uint64_t step, const gpt_ckpt_buffer_t *bufs, int n,
                  const void *meta, uint64_t meta_bytes, const gpt_ckpt_save_options_t *opts,
                  char *err, size_t errlen) {
    if (dir == NULL || dir[0] == 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint: no directory given");
    if (strlen(dir) > 4000)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %.64s...: path too long",
                           dir);
    if (meta_bytes > 0 && meta == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint: NULL metadata of %" PRIu64 " bytes", meta_bytes);
    if (check_buffers(bufs, n, err, errlen) != 0)
        return -1;
    if (opts == NULL || opts->run_id == 0)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint: no run id given (expected one from "
                           "gpt_ckpt_run_id_new)");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %s: cannot create: %s",
                           dir, strerror(errno));
    char at[4096], why[4608];
    gpt_ckpt_path(at, sizeof at, dir, step);
    if (!opts->overwrite && foreign_at(at, opts->run_id, why, sizeof why))
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s; this run did not write it: not replaced (nothing "
                           "saved; earlier checkpoints are kept)",
                           why);
    uint64_t table_bytes, data_bytes;
    unsigned char *table = table_build(bufs, n, &table_bytes, &data_bytes);
    if (table == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint: out of memory for the table");

    char tmp[4096], final[4096];
    tmp_path(tmp, sizeof tmp, dir, step);
    gpt_ckpt_path(final, sizeof final, dir, step);
    /* a fresh file, never what is at the name (a planted FIFO would block the save, a
     * link would have its target overwritten and then be renamed to the final name) */
    if (unlink(tmp) != 0 && errno != ENOENT) {
        free(table);
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: cannot remove what is there: %s", tmp, strerror(errno));
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(table);
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot create: %s", tmp,
                           strerror(errno));
    }
    uint64_t h[HEADER_WORDS] = {0};
    uint64_t total = HEADER_BYTES + table_bytes + meta_bytes + data_bytes, done = HEADER_BYTES;
    uint32_t crc = 0;
    const char *what = "write";
    int ok = write_all(fd, h, sizeof h) == 0 &&
             write_chunks(fd, table, table_bytes, &crc, &done, total, opts) == 0 &&
             write_chunks(fd, meta, meta_bytes, &crc, &done, total, opts) == 0;
    for (int i = 0; ok && i < n; i++) {
        if (bufs[i].around)
            bufs[i].around(bufs[i].user, 0);
        ok = write_chunks(fd, bufs[i].ptr, bufs[i].bytes, &crc, &done, total, opts) == 0;
        if (bufs[i].around)
            bufs[i].around(bufs[i].user, 1);
    }
    free(table);
    if (ok) {
        h[0] = GPT_CKPT_MAGIC | (uint64_t)GPT_CKPT_VERSION << 32;
        h[1] = step;
        h[2] = (uint64_t)n;
        h[3] = table_bytes;
        h[4] = meta_bytes;
        h[5] = data_bytes;
        h[6] = crc;
        h[7] = opts->run_id;
        h[8] = gpt_ckpt_crc32c(0, h, 8 * sizeof h[0]);
        ok = pwrite(fd, h, sizeof h, 0) == (ssize_t)sizeof h;
    }
    if (ok) {
        what = "fsync";
        ok = fsync(fd) == 0;
    }
    if (close(fd) != 0 && ok) {
        what = "close";
        ok = 0;
    }
    if (ok) {
        what = "rename to the final name";
        ok = rename(tmp, final) == 0;
    }
    if (!ok) {
        int e = errno;
        unlink(tmp);
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: %s failed: %s (earlier checkpoints are kept)", tmp, what,
                           strerror(e));
    }
    if (fsync_dir(dir) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint directory %s: fsync after renaming %s failed: %s", dir,
                           final, strerror(errno));
    prune(dir, opts->keep, opts->run_id, final);
    return 0;
}

/* ----------------------------------------------------------------------------
 * load */

/* Reads and checks the header (version 1 or 2) and the file's size; fd is left at
 * the table. */
static int read_header(int fd, const char *path, file_info_t *fi, char *err, size_t errlen) {
    fi->table = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot stat: %s", path,
                           strerror(errno));
    uint64_t size = (uint64_t)st.st_size, h[HEADER_WORDS] = {0};
    int words = HEADER1_WORDS;
    if (size < HEADER1_WORDS * 8 || read_all(fd, h, HEADER1_WORDS * 8) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: truncated: %" PRIu64 " bytes, shorter than the "
                           "%d-byte header",
                           path, size, HEADER1_WORDS * 8);
    if ((uint32_t)h[0] != GPT_CKPT_MAGIC)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: bad magic %" PRIu32 ", expected %u (not a "
                           "uvmrt-gpt checkpoint, or a save that never finished)",
                           path, (uint32_t)h[0], GPT_CKPT_MAGIC);
    uint32_t version = (uint32_t)(h[0] >> 32);
    if (version == GPT_CKPT_VERSION) {
        words = HEADER_WORDS;
        if (size < HEADER_BYTES || read_all(fd, h + HEADER1_WORDS, 8) != 0)
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "checkpoint %s: truncated: %" PRIu64 " bytes, shorter than "
                               "the %d-byte header",
                               path, size, HEADER_BYTES);
    } else if (version != 1) {
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: format version %" PRIu32 ", expected 1 or %u "
                           "(written by another uvmrt-gpt?)",
                           path, version, GPT_CKPT_VERSION);
    }
    if (gpt_ckpt_crc32c(0, h, (size_t)(words - 1) * sizeof h[0]) != (uint32_t)h[words - 1])
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: header checksum mismatch (corrupt header)", path);
    fi->version = version;
    fi->header_bytes = (uint64_t)words * 8;
    fi->step = h[1];
    fi->nbufs = h[2];
    fi->table_bytes = h[3];
    fi->meta_bytes = h[4];
    fi->data_bytes = h[5];
    fi->crc = (uint32_t)h[6];
    fi->run_id = version == 1 ? 0 : h[7];
    uint64_t want = fi->header_bytes + fi->table_bytes + fi->meta_bytes + fi->data_bytes;
    if (fi->table_bytes > TABLE_MAX_BYTES || want < fi->data_bytes)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: implausible sizes in the header", path);
    if (size < want)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: truncated: %" PRIu64 " bytes, the header says %" PRIu64,
                           path, size, want);
    if (size > want)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: %" PRIu64 " bytes, %" PRIu64 " more than the "
                           "header says",
                           path, size, size - want);
    return 0;
}

/* Reads and checks the header and table; fd is left at the metadata. */
static int read_head(int fd, const char *path, file_info_t *fi, char *err, size_t errlen) {
    if (read_header(fd, path, fi, err, errlen) != 0)
        return -1;
    fi->table = malloc(fi->table_bytes + 1);
    if (fi->table == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: out of memory for the table",
                           path);
    if (read_all(fd, fi->table, fi->table_bytes) != 0) {
        free(fi->table);
        fi->table = NULL;
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot read the table: %s",
                           path, errno ? strerror(errno) : "end of file");
    }
    /* walk it once so later reads stay in bounds */
    uint64_t off = 0, sum = 0;
    for (uint64_t i = 0; i < fi->nbufs; i++) {
        uint32_t len;
        uint64_t bytes;
        if (off + 4 > fi->table_bytes)
            break;
        memcpy(&len, fi->table + off, 4);
        if (len == 0 || len > GPT_CKPT_NAME_MAX || off + 4 + len + 8 > fi->table_bytes)
            break;
        memcpy(&bytes, fi->table + off + 4 + len, 8);
        sum += bytes;
        off += 4 + len + 8;
    }
    if (off != fi->table_bytes || sum != fi->data_bytes) {
        free(fi->table);
        fi->table = NULL;
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: the buffer table does not match the header "
                           "(corrupt)",
                           path);
    }
    return 0;
}

/* CRC of the table plus the next `bytes` bytes of fd, into *crc. */
static int crc_rest(int fd, const char *path, const file_info_t *fi, uint64_t bytes,
                    uint32_t *crc, char *err, size_t errlen) {
    unsigned char *buf = malloc(CHUNK_BYTES);
    if (buf == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: out of memory", path);
    uint32_t c = gpt_ckpt_crc32c(0, fi->table, fi->table_bytes);
    while (bytes > 0) {
        size_t k = bytes < CHUNK_BYTES ? (size_t)bytes : CHUNK_BYTES;
        if (read_all(fd, buf, k) != 0) {
            free(buf);
            return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: read failed: %s", path,
                               errno ? strerror(errno) : "end of file");
        }
        c = gpt_ckpt_crc32c(c, buf, k);
        bytes -= k;
    }
    free(buf);
    *crc = c;
    return 0;
}

static int verify_fd(int fd, const char *path, file_info_t *fi, char *err, size_t errlen) {
    uint32_t crc = 0;
    if (crc_rest(fd, path, fi, fi->meta_bytes + fi->data_bytes, &crc, err, errlen) != 0)
        return -1;
    if (crc != fi->crc)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: checksum mismatch: CRC32C %08" PRIx32 ", the "
                           "header says %08" PRIx32 " (corrupt)",
                           path, crc, fi->crc);
    return 0;
}

int gpt_ckpt_verify(const char *path, uint64_t *step, char *err, size_t errlen) {
    int fd = open_checkpoint(path, err, errlen);
    if (fd < 0)
        return -1;
    file_info_t fi;
    int status = read_head(fd, path, &fi, err, errlen);
    if (status == 0)
        status = verify_fd(fd, path, &fi, err, errlen);
    if (status == 0 && step)
        *step = fi.step;
    free(fi.table);
    close(fd);
    return status;
}

/* Names and sizes in the file against the caller's list. */
static int match_table(const char *path, const file_info_t *fi, const gpt_ckpt_buffer_t *bufs,
                       int n, uint64_t meta_cap, char *err, size_t errlen) {
    if (fi->nbufs != (uint64_t)n)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: %" PRIu64 " buffers in the file, this run has "
                           "%d (another model or optimizer layout)",
                           path, fi->nbufs, n);
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint32_t len;
        uint64_t bytes;
        memcpy(&len, fi->table + off, 4);
        memcpy(&bytes, fi->table + off + 4 + len, 8);
        const char *name = (const char *)fi->table + off + 4;
        if (strlen(bufs[i].name) != len || memcmp(bufs[i].name, name, len) != 0 ||
            bytes != bufs[i].bytes)
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "checkpoint %s: buffer %d is '%.*s' of %" PRIu64 " bytes in "
                               "the file, this run has '%s' of %" PRIu64
                               " bytes (another model shape?)",
                               path, i, (int)len, name, bytes, bufs[i].name, bufs[i].bytes);
        off += 4 + len + 8;
    }
    if (fi->meta_bytes > meta_cap)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint %s: %" PRIu64 " bytes of metadata, more than the %" PRIu64
                           " this run expects",
                           path, fi->meta_bytes, meta_cap);
    return 0;
}

/* verify: 1 to check the checksum in a pass of its own before writing anything */
static int load_path(const char *path, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                     uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, uint64_t *run_id,
                     int verify, char *err, size_t errlen) {
    if (check_buffers(bufs, n, err, errlen) != 0)
        return -1;
    if (meta_cap > 0 && meta == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint: NULL metadata buffer of %" PRIu64 " bytes", meta_cap);
    int fd = open_checkpoint(path, err, errlen);
    if (fd < 0)
        return -1;
    file_info_t fi;
    unsigned char *m = NULL;
    int status = read_head(fd, path, &fi, err, errlen);
    if (status == 0)
        status = match_table(path, &fi, bufs, n, meta_cap, err, errlen);
    if (status == 0 && verify) {
        status = verify_fd(fd, path, &fi, err, errlen);
        if (status == 0 && lseek(fd, (off_t)(fi.header_bytes + fi.table_bytes), SEEK_SET) < 0)
            status = errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: seek failed: %s", path,
                                 strerror(errno));
    }
    if (status == 0) {
        m = malloc(fi.meta_bytes + 1);
        if (m == NULL)
            status = errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: out of memory", path);
        else if (read_all(fd, m, fi.meta_bytes) != 0)
            status = errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint %s: cannot read the metadata",
                                 path);
    }
    if (status == 0) {
        /* the buffers are written from here on: the file was verified (or is verified
         * now, on the same bytes, when the caller already did) */
        uint32_t c = gpt_ckpt_crc32c(gpt_ckpt_crc32c(0, fi.table, fi.table_bytes), m,
                                     fi.meta_bytes);
        for (int i = 0; i < n && status == 0; i++) {
            if (bufs[i].around)
                bufs[i].around(bufs[i].user, 0);
            unsigned char *p = bufs[i].ptr;
            for (uint64_t left = bufs[i].bytes; left > 0 && status == 0;) {
                size_t k = left < CHUNK_BYTES ? (size_t)left : CHUNK_BYTES;
                if (read_all(fd, p, k) != 0)
                    status = errbuf_fail(err, errlen, ERR_PREFIX,
                                         "checkpoint %s: read of '%s' failed: %s", path,
                                         bufs[i].name, errno ? strerror(errno) : "end of file");
                else
                    c = gpt_ckpt_crc32c(c, p, k);
                p += k;
                left -= k;
            }
            if (bufs[i].around)
                bufs[i].around(bufs[i].user, 1);
        }
        if (status == 0 && c != fi.crc)
            status = errbuf_fail(err, errlen, ERR_PREFIX,
                                 "checkpoint %s: checksum mismatch while loading (the file "
                                 "changed after it was verified); the buffers hold partial data",
                                 path);
    }
    if (status == 0) {
        if (fi.meta_bytes)
            memcpy(meta, m, fi.meta_bytes);
        if (meta_bytes)
            *meta_bytes = fi.meta_bytes;
        if (step)
            *step = fi.step;
        if (run_id)
            *run_id = fi.run_id;
    }
    free(m);
    free(fi.table);
    close(fd);
    return status;
}

int gpt_ckpt_load(const char *path, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                  uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, char *err,
                  size_t errlen) {
    return load_path(path, bufs, n, meta, meta_cap, meta_bytes, step, NULL, 1, err, errlen);
}

/* ----------------------------------------------------------------------------
 * runs, directories and their entries */

int gpt_ckpt_run_id_new(uint64_t *run_id, char *err, size_t errlen) {
    uint64_t v = 0;
    for (int tries = 0; v == 0 && tries < 4; tries++) {
        ssize_t r;
        do
            r = getrandom(&v, sizeof v, 0);
        while (r < 0 && errno == EINTR);
        if (r != (ssize_t)sizeof v)
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "checkpoint: getrandom for a run id failed: %s",
                               r < 0 ? strerror(errno) : "short read");
    }
    if (v == 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint: getrandom returned 0 four times");
    *run_id = v;
    return 0;
}

int gpt_ckpt_dir_prepare(const char *dir, char *err, size_t errlen) {
    if (dir == NULL || dir[0] == 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint: no directory given");
    if (strlen(dir) > 4000)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %.64s...: path too long",
                           dir);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        int e = errno;
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        struct stat pst;
        if (slash == NULL)
            snprintf(parent, sizeof parent, ".");
        else
            slash[slash == parent] = '\0'; /* "/x": "/" */
        int missing = e == ENOENT && stat(parent, &pst) != 0;
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint directory %s: cannot create: %s%s%s%s", dir, strerror(e),
                           missing ? " (its parent " : "", missing ? parent : "",
                           missing ? " is missing)" : "");
    }
    struct stat st;
    if (stat(dir, &st) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %s: cannot stat: %s", dir,
                           strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %s: %s, not a directory",
                           dir, kind_name(st.st_mode));
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/.ckpt-probe-XXXXXX", dir);
    int fd = mkstemp(probe);
    if (fd < 0)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint directory %s: cannot create files in it: %s", dir,
                           strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}

static int entry_is_own(const gpt_ckpt_entry_t *e, uint64_t run_id) {
    return run_id != 0 && e->ok && e->version >= 2 && e->run_id == run_id;
}

int gpt_ckpt_entry_is_own(const gpt_ckpt_entry_t *e, uint64_t run_id) {
    return e != NULL && entry_is_own(e, run_id);
}

/* good headers first, by header step; then the others by name; highest first */
static int cmp_entries(const void *a, const void *b) {
    const gpt_ckpt_entry_t *x = a, *y = b;
    if (x->ok != y->ok)
        return x->ok ? -1 : 1;
    uint64_t p = x->ok ? x->step : x->name_step, q = y->ok ? y->step : y->name_step;
    if (p != q)
        return p < q ? 1 : -1;
    if (x->name_step != y->name_step)
        return x->name_step < y->name_step ? 1 : -1;
    return strcmp(x->path, y->path);
}

int gpt_ckpt_scan(const char *dir, gpt_ckpt_entry_t **entries, int *count, char *err,
                  size_t errlen) {
    *entries = NULL;
    *count = 0;
    if (dir == NULL || strlen(dir) > 4000)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint: no directory given, or path too long");
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOENT)
            return 0;
        return errbuf_fail(err, errlen, ERR_PREFIX, "checkpoint directory %s: cannot open: %s", dir,
                           strerror(errno));
    }
    gpt_ckpt_entry_t *v = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t s;
        if (!parse_name(de->d_name, "ckpt-", ".bin", &s))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            gpt_ckpt_entry_t *t = realloc(v, (size_t)cap * sizeof *t);
            if (t == NULL) {
                free(v);
                closedir(d);
                return errbuf_fail(err, errlen, ERR_PREFIX,
                                   "checkpoint directory %s: out of memory", dir);
            }
            v = t;
        }
        gpt_ckpt_entry_t *e = &v[n++];
        memset(e, 0, sizeof *e);
        snprintf(e->path, sizeof e->path, "%s/%s", dir, de->d_name);
        e->name_step = s;
        int fd = open_checkpoint(e->path, e->why, sizeof e->why);
        if (fd < 0)
            continue;
        file_info_t fi;
        if (read_header(fd, e->path, &fi, e->why, sizeof e->why) == 0) {
            e->ok = 1;
            e->version = fi.version;
            e->step = fi.step;
            e->run_id = fi.run_id;
        }
        close(fd);
    }
    closedir(d);
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_entries);
    *entries = v;
    *count = n;
    return 0;
}

int gpt_ckpt_resume(const char *dir, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                    uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, uint64_t *run_id,
                    char *path_out, size_t path_len, char *err, size_t errlen) {
    if (dir == NULL || strlen(dir) > 4000)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "checkpoint: no directory given, or path too long");
    gpt_ckpt_entry_t *e;
    int count;
    if (gpt_ckpt_scan(dir, &e, &count, err, errlen) != 0)
        return -1;
    /* the entries that are no checkpoint at all first: none of them is ever loaded */
    for (int i = 0; i < count; i++)
        if (!e[i].ok)
            fprintf(stderr, "uvmrt-gpt: warning: --resume: skipping %s\n", e[i].why);
    int status = 1;
    for (int i = 0; i < count && e[i].ok && status == 1; i++) {
        char why[1024];
        if (gpt_ckpt_verify(e[i].path, NULL, why, sizeof why) != 0) {
            fprintf(stderr, "uvmrt-gpt: warning: --resume: skipping %s\n", why);
            continue;
        }
        if (e[i].step != e[i].name_step)
            fprintf(stderr, "uvmrt-gpt: note: --resume: %s holds step %" PRIu64 ", not the %"
                    PRIu64 " of its name (renamed?): taken as step %" PRIu64 "\n", e[i].path,
                    e[i].step, e[i].name_step, e[i].step);
        status = load_path(e[i].path, bufs, n, meta, meta_cap, meta_bytes, step, run_id, 0, err,
                           errlen);
        if (status == 0 && path_out)
            snprintf(path_out, path_len, "%s", e[i].path);
    }
    if (status == 1 && count > 0)
        status = errbuf_fail(err, errlen, ERR_PREFIX,
                             "none of the %d checkpoint entr%s in %s can be used (each is "
                             "named above with the reason); nothing was loaded",
                             count, count == 1 ? "y" : "ies", dir);
    free(e);
    return status;
}
