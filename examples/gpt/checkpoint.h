/*
 * checkpoint.h -- uvmrt-gpt's checkpoints: a list of named buffers plus a small
 * metadata blob, written atomically, verified on load, the last K kept.
 *
 * Generic over the model: the caller passes {name, ptr, bytes} for every buffer it
 * wants saved (parameters, AdamW moments, ... ; managed-memory pointers are fine:
 * they are only read and written by the CPU here) and a metadata blob of its own
 * layout (step, data position, RNG, the shape it was saved with).
 *
 * Files: DIR/ckpt-<step, 12 digits>.bin. A save writes DIR/.ckpt-<step>.bin.tmp,
 * fsyncs it, renames it over the final name and fsyncs DIR, so a crash at any point
 * leaves every earlier checkpoint intact and either the old or the new file under the
 * final name; a leftover .tmp is never read and is removed by the next save (one
 * writer per directory).
 *
 * Runs: every checkpoint carries the id of the run that wrote it (a random 64-bit
 * number, gpt_ckpt_run_id_new; a resumed run keeps the id of the checkpoint it
 * loaded). A save never replaces an entry it did not write (another run's checkpoint,
 * a file it cannot read or check, a directory, ...) unless told to, and --keep prunes
 * only the run's own files, whose headers it read and checked. Entries are ordered by
 * the step in their header, not by their name.
 *
 * Format (little-endian), version 2:
 *   header, 9 x uint64: [0] magic 20241202 | version 2 << 32, [1] step, [2] buffer
 *     count, [3] table bytes, [4] metadata bytes, [5] data bytes, [6] CRC32C of
 *     everything after the header, [7] run id (never 0), [8] CRC32C of words 0..7;
 *   table: per buffer uint32 name length, the name (no NUL), uint64 bytes;
 *   the metadata blob; then the buffers' bytes, in table order.
 * Version 1 (before run ids) has an 8-word header: words 0..6 as above, [7] CRC32C of
 * words 0..6. Version-1 files are still read, verified and loaded (their run id reads
 * as 0: no run's own, so never pruned nor replaced without being told to); saves
 * always write version 2. Any other version is refused by number.
 * CRC32C (Castagnoli, as iSCSI/ext4; SSE4.2 instruction where the CPU has it) reads
 * about 10 GB/s, so a 25 GB checkpoint (1.56 B parameters, fp32 weights and two
 * moments and a bf16 copy) costs seconds, not minutes.
 *
 * Errors: every function returns -1 on failure with one line (naming the file, the
 * buffer, the sizes) in err (errlen bytes) when err is not NULL, else on stderr.
 * Loads verify the whole file before writing into the caller's buffers, so a load
 * that fails for a bad file leaves the buffers and metadata as they were.
 * Plain C11 + POSIX; no CUDA, no uvmrt.
 */
#ifndef UVMRT_GPT_CHECKPOINT_H
#define UVMRT_GPT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_CKPT_MAGIC 20241202u
#define GPT_CKPT_VERSION 2u   /* written; 1 is still read */
#define GPT_CKPT_NAME_MAX 255

typedef struct {
    const char *name; /* 1..GPT_CKPT_NAME_MAX bytes, unique in the list */
    void *ptr;        /* save: read from; load: written to */
    uint64_t bytes;
    /* NULL, or called with after 0 just before ptr's bytes are read (save) or written
     * (load), and with after 1 just after, also when that failed: e.g. to bring a
     * tensor in from a tier of storage and put it back */
    void (*around)(void *user, int after);
    void *user;
} gpt_ckpt_buffer_t;

typedef struct {
    uint64_t run_id; /* the writing run's id, not 0 (gpt_ckpt_run_id_new) */
    int keep;        /* after a save, delete all but this run's newest keep checkpoints
                      * (by header step; the one just written always stays); 0: keep all */
    int overwrite;   /* 1: the save may replace an entry at its name that this run did
                      * not write; 0: such an entry fails the save, replacing nothing */
    /* Called after each chunk written (done of total bytes); NULL: none. */
    void (*progress)(void *arg, uint64_t done_bytes, uint64_t total_bytes);
    void *progress_arg;
} gpt_ckpt_save_options_t;

/* Writes DIR/ckpt-<step>.bin (DIR is created if missing, one level). opts is
 * required (its run id). */
int gpt_ckpt_save(const char *dir, uint64_t step, const gpt_ckpt_buffer_t *bufs, int n,
                  const void *meta, uint64_t meta_bytes, const gpt_ckpt_save_options_t *opts,
                  char *err, size_t errlen);

/* A new run id: 64 random bits from getrandom(2), never 0. */
int gpt_ckpt_run_id_new(uint64_t *run_id, char *err, size_t errlen);

/* Before the first step: DIR is a directory this process can create files in (it is
 * created if missing, one level; a probe file is created and removed), so that an
 * unusable DIR (a missing parent, a regular file, /proc/x, no permission) fails before
 * any training it was meant to keep. */
int gpt_ckpt_dir_prepare(const char *dir, char *err, size_t errlen);

/* One entry of DIR named ckpt-<digits>.bin, as gpt_ckpt_scan found it. */
typedef struct {
    char path[4352];
    uint64_t name_step; /* the step in its name */
    int ok;             /* 1: a regular file with a good header (magic, version, header
                         * checksum, sizes); the rest of the file is not checked */
    uint32_t version;   /* ok: its format version */
    uint64_t step;      /* ok: the step in its header */
    uint64_t run_id;    /* ok: the run that wrote it (0 for version 1) */
    char why[768];      /* !ok: what the entry is (a directory, a FIFO, ...) or why its
                         * header is unusable, a line naming the path */
} gpt_ckpt_entry_t;

/* DIR's entries named ckpt-<digits>.bin, each opened without blocking and without
 * following a symbolic link, its type checked with fstat and its header read: the
 * ok ones first, the highest header step first, then the others by name. *entries is
 * a new array (free() it; NULL when *count is 0); a missing DIR has none. */
int gpt_ckpt_scan(const char *dir, gpt_ckpt_entry_t **entries, int *count, char *err,
                  size_t errlen);

/* 1 when e was written by run_id (ok, version 2, the same id). */
int gpt_ckpt_entry_is_own(const gpt_ckpt_entry_t *e, uint64_t run_id);

/* Checks one file (a regular file, opened without blocking or following a link;
 * header, sizes, both checksums); sets *step when not NULL. */
int gpt_ckpt_verify(const char *path, uint64_t *step, char *err, size_t errlen);

/* Loads one file into bufs, which must have the names and sizes (in order) it was
 * saved with, and its metadata into meta (meta_cap bytes; *meta_bytes: how many the
 * file had). */
int gpt_ckpt_load(const char *path, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                  uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, char *err,
                  size_t errlen);

/* --resume: loads the newest usable checkpoint in DIR, by the step in its header. An
 * entry that cannot be used (not a regular file, unreadable, corrupt, truncated, of
 * an unknown version) is skipped with a warning on stderr naming it and why, and the
 * next older one tried. Returns 0 when one was loaded (path into path_out when not
 * NULL, the run that wrote it into *run_id when not NULL: 0 for a version-1 file);
 * 1 when DIR has no checkpoint (missing, or no entry named ckpt-<digits>.bin); -1 on
 * an error: DIR has entries but none can be used (each named on stderr), or a valid
 * checkpoint's names or sizes differ from bufs (another model shape: never silently
 * skipped). */
int gpt_ckpt_resume(const char *dir, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                    uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, uint64_t *run_id,
                    char *path_out, size_t path_len, char *err, size_t errlen);

/* The steps in the names of DIR's checkpoints (not checked), highest first: up to cap
 * into steps; returns how many there are, -1 on error. */
int gpt_ckpt_list(const char *dir, uint64_t *steps, int cap, char *err, size_t errlen);

/* DIR/ckpt-<step>.bin into path (len bytes). */
void gpt_ckpt_path(char *path, size_t len, const char *dir, uint64_t step);

/* CRC32C of buf[0..n), continuing from crc (0 to start). */
uint32_t gpt_ckpt_crc32c(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_GPT_CHECKPOINT_H */
