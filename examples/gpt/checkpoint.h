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
 * Format (little-endian):
 *   header, 8 x uint64: [0] magic 20241202 | version 1 << 32, [1] step, [2] buffer
 *     count, [3] table bytes, [4] metadata bytes, [5] data bytes, [6] CRC32C of
 *     everything after the header, [7] CRC32C of words 0..6;
 *   table: per buffer uint32 name length, the name (no NUL), uint64 bytes;
 *   the metadata blob; then the buffers' bytes, in table order.
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
#define GPT_CKPT_VERSION 1u
#define GPT_CKPT_NAME_MAX 255

typedef struct {
    const char *name; /* 1..GPT_CKPT_NAME_MAX bytes, unique in the list */
    void *ptr;        /* save: read from; load: written to */
    uint64_t bytes;
} gpt_ckpt_buffer_t;

typedef struct {
    int keep; /* after a save, delete all but the newest keep checkpoints; 0: keep all */
    /* Called after each chunk written (done of total bytes); NULL: none. */
    void (*progress)(void *arg, uint64_t done_bytes, uint64_t total_bytes);
    void *progress_arg;
} gpt_ckpt_save_options_t;

/* Writes DIR/ckpt-<step>.bin (DIR is created if missing, one level). opts may be
 * NULL (keep all, no progress). */
int gpt_ckpt_save(const char *dir, uint64_t step, const gpt_ckpt_buffer_t *bufs, int n,
                  const void *meta, uint64_t meta_bytes, const gpt_ckpt_save_options_t *opts,
                  char *err, size_t errlen);

/* Checks one file (header, sizes, both checksums); sets *step when not NULL. */
int gpt_ckpt_verify(const char *path, uint64_t *step, char *err, size_t errlen);

/* Loads one file into bufs, which must have the names and sizes (in order) it was
 * saved with, and its metadata into meta (meta_cap bytes; *meta_bytes: how many the
 * file had). */
int gpt_ckpt_load(const char *path, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                  uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, char *err,
                  size_t errlen);

/* --resume: loads the newest valid checkpoint in DIR. A newest file that fails
 * verification (corrupt, truncated) is skipped with a warning on stderr and the next
 * older one tried. Returns 0 when one was loaded (path into path_out when not NULL),
 * 1 when DIR has none (missing or empty, or every file invalid: a warning each), -1
 * on an error, including a valid checkpoint whose names or sizes differ from bufs
 * (another model shape: never silently skipped). */
int gpt_ckpt_resume(const char *dir, const gpt_ckpt_buffer_t *bufs, int n, void *meta,
                    uint64_t meta_cap, uint64_t *meta_bytes, uint64_t *step, char *path_out,
                    size_t path_len, char *err, size_t errlen);

/* The steps of DIR's checkpoints (not checked), newest first: up to cap into steps;
 * returns how many there are, -1 on error. */
int gpt_ckpt_list(const char *dir, uint64_t *steps, int cap, char *err, size_t errlen);

/* DIR/ckpt-<step>.bin into path (len bytes). */
void gpt_ckpt_path(char *path, size_t len, const char *dir, uint64_t step);

/* CRC32C of buf[0..n), continuing from crc (0 to start). */
uint32_t gpt_ckpt_crc32c(uint32_t crc, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_GPT_CHECKPOINT_H */
