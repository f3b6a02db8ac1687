/*
 * data.h -- uvmrt-gpt's training data: llm.c token shards or a text file at byte level.
 *
 * Two sources, one reader:
 *   token files  the format llm.c's preprocessing scripts write: a header of 256 int32
 *                (little-endian) [0] = 20240520 (magic), [1] = 1 (version: uint16
 *                tokens), [2] = token count, the rest 0; then that many uint16 tokens.
 *                A glob PATTERN may name several shards (sorted by name). Each epoch
 *                visits every shard once, in an order drawn from a seeded RNG, and
 *                reads each shard front to back in batches of B*T tokens.
 *   text         any file (UTF-8 or not) read as bytes, one token per byte (vocab 256).
 *                GPT_DATA_TRAIN takes the first 90%, GPT_DATA_VAL the last 10%
 *                (GPT_DATA_TEXT_VAL_PERCENT), GPT_DATA_ALL the whole file.
 *
 * A batch is B*T+1 consecutive tokens of one shard: inputs are the first B*T, targets
 * the same shifted by one (targets[i] = inputs[i+1]), as int32 row-major (B, T).
 * Batches start at offsets 0, B*T, 2*B*T, ... of a shard while B*T+1 tokens remain;
 * the remainder of a shard is not used. The sequence of batches is a pure function of
 * the files, B, T and the seed, so a run can be repeated and resumed exactly.
 *
 * Data parallel: with world = N > 1, rank r (0..N-1) takes the r-th batch of every group
 * of N consecutive batches of that sequence and skips the others, so the N ranks read
 * disjoint batches that together are exactly the one-rank sequence (rank r's k-th batch
 * is batch k*N + r of it), with the same seed on every rank. After each call every rank
 * is at the same position (the start of the next group), so one saved position resumes
 * every rank; a run resumed with another world size continues the same sequence, dealt
 * in groups of the new size. Skipped batches are not read: only shards holding a batch
 * of this rank are loaded.
 *
 * Position: gpt_data_tell() gives {epoch, shard, offset, rng, fingerprint}; a handle
 * opened on the same data with the same B, T gives, after gpt_data_seek() to it,
 * exactly the batches the first handle gave after the tell. The fingerprint (a hash
 * of B, T, the shard count and token counts) makes a seek on other data an error.
 *
 * Errors: every function returns 0 on success and -1 on failure, and then writes one
 * line naming the file (or argument) and what was wrong (bad magic, version, a file
 * shorter than its header says, a token >= vocab, a shard shorter than B*T+1, no file
 * matching the pattern...) into err (errlen bytes) when err is not NULL, else to
 * stderr. A failed call leaves the handle as it was. Header checks run on every
 * shard at open; token values are checked when a shard is loaded (the first shard of
 * an epoch at open or when the epoch starts, the others when reading reaches them).
 *
 * Memory: one shard's tokens at a time (2 bytes per token). Not thread-safe: one
 * handle per thread. Plain C11 + POSIX glob; no CUDA, no uvmrt.
 */
#ifndef UVMRT_GPT_DATA_H
#define UVMRT_GPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_DATA_MAGIC 20240520
#define GPT_DATA_VERSION 1
#define GPT_DATA_HEADER_INTS 256
#define GPT_DATA_TEXT_VOCAB 256
#define GPT_DATA_TEXT_VAL_PERCENT 10

typedef struct gpt_data gpt_data_t;

typedef enum {
    GPT_DATA_ALL = 0, /* every token */
    GPT_DATA_TRAIN,   /* text: the first 90% of the bytes (token files: same as ALL) */
    GPT_DATA_VAL,     /* text: the last 10% (token files: same as ALL) */
} gpt_data_split_t;

typedef struct {
    const char *pattern; /* glob of token files; exactly one of pattern and text */
    const char *text;    /* a file read as bytes */
    gpt_data_split_t split;
    int B, T;            /* batch rows and sequence length, both >= 1 */
    uint64_t seed;       /* shard order per epoch */
    int shuffle;         /* 0: shards in name order every epoch (validation) */
    int vocab;           /* every token must be < vocab; 0: 65536 (text: 256) */
    int rank, world;     /* data parallel: this rank of world (0 or 1: every batch) */
} gpt_data_config_t;

typedef struct {
    uint64_t epoch;       /* epochs completed before this one */
    uint64_t shard;       /* index into this epoch's shard order */
    uint64_t offset;      /* token offset of the next batch in that shard */
    uint64_t rng;         /* RNG state this epoch's shard order was drawn from */
    uint64_t fingerprint; /* hash of B, T, shard count and token counts */
} gpt_data_pos_t;

/* Opens the data; *out is the handle (NULL on failure). */
int gpt_data_open(gpt_data_t **out, const gpt_data_config_t *cfg, char *err, size_t errlen);

/* Fills inputs and targets (B*T int32 each) with this rank's next batch and advances
 * past the group of world batches it belongs to. */
int gpt_data_next(gpt_data_t *d, int32_t *inputs, int32_t *targets, char *err, size_t errlen);

/* The position of the next batch. */
void gpt_data_tell(const gpt_data_t *d, gpt_data_pos_t *pos);

/* Moves to a position that gpt_data_tell gave on the same data (same files, B, T). */
int gpt_data_seek(gpt_data_t *d, const gpt_data_pos_t *pos, char *err, size_t errlen);

/* Back to the first batch of epoch 0 (for validation passes). */
int gpt_data_rewind(gpt_data_t *d, char *err, size_t errlen);

/* Facts about the data. */
int gpt_data_shards(const gpt_data_t *d);
uint64_t gpt_data_tokens(const gpt_data_t *d);            /* all shards, whole split */
uint64_t gpt_data_batches_per_epoch(const gpt_data_t *d); /* of all ranks together */
int gpt_data_vocab(const gpt_data_t *d);                  /* the limit tokens were checked against */

/* Closes the handle; NULL is a no-op. */
void gpt_data_close(gpt_data_t *d);

/* Writes a token file in llm.c's format (for tests and tools): tokens[0..n). */
int gpt_data_write_tokens(const char *path, const uint16_t *tokens, uint64_t n, char *err,
                          size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_GPT_DATA_H */
