/*
 * data.c -- llm.c token shards and byte-level text for uvmrt-gpt (see data.h).
 *
 * The reader keeps the position lazily: after the last batch of a shard the offset
 * simply points past the end, and the next gpt_data_next() moves to the next shard
 * (and, after the last one, draws the next epoch's order). So loading a shard, the
 * only step that can fail after open, happens before anything is changed, and a
 * failed call leaves the handle as it was.
 */
#define _POSIX_C_SOURCE 200809L

#include "data.h"

#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/errbuf.h"
#include "../common/input_file.h"

#define HEADER_BYTES ((long long)GPT_DATA_HEADER_INTS * 4)

typedef struct {
    char *path;
    uint64_t start;  /* byte offset of the first token in the file */
    uint64_t ntok;   /* tokens in this shard (text: bytes of the split) */
} shard_t;

struct gpt_data {
    gpt_data_config_t cfg; /* pattern/text pointers are not kept: see paths in shards */
    int text;              /* 1: bytes, 0: uint16 token file */
    int vocab;
    shard_t *shards;
    int nshards;
    uint64_t bt;           /* B*T */
    uint64_t fingerprint;
    gpt_data_pos_t pos;
    uint64_t rng_next;     /* RNG state after drawing this epoch's order */
    int *order;            /* this epoch's shard order: nshards indices */
    int *order_next;       /* scratch for gpt_data_next's cursor */
    int rank, world;       /* data parallel: this rank of world (world >= 1) */
    int loaded;            /* index of the shard in tokens, -1: none (a cache: after
                              gpt_data_next it may differ from the position's shard) */
    uint16_t *tokens;      /* the loaded shard */
};

/* ----------------------------------------------------------------------------
 * errors */

#define ERR_PREFIX "uvmrt-gpt" /* errbuf_fail's messages on stderr start with it */

/* ----------------------------------------------------------------------------
 * RNG and shard order: splitmix64, so an epoch's order is a function of one
 * 64-bit state that a checkpoint can hold. */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* order := a permutation of 0..n-1 drawn from *state (Fisher-Yates; the modulo
 * bias is below 2^-40 for any shard count that fits in an int). */
static void draw_order(uint64_t *state, int n, int shuffle, int *order) {
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!shuffle)
        return;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(splitmix64(state) % (uint64_t)(i + 1));
        int t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static uint64_t fnv1a(uint64_t h, uint64_t v) {
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xFF;
        h *= 0x100000001B3ull;
    }
    return h;
}

/* ----------------------------------------------------------------------------
 * files */

static int file_size(const char *path, uint64_t *size, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: not a regular file", path);
    *size = (uint64_t)st.st_size;
    return 0;
}

/* Checks a token file's header against its size; sets *ntok. */
static int shard_check_header(const char *path, uint64_t *ntok, char *err, size_t errlen) {
    uint64_t size;
    if (file_size(path, &size, err, errlen) != 0)
        return -1;
    if (size < (uint64_t)HEADER_BYTES)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: truncated: %" PRIu64
                           " bytes, shorter than the %lld-byte header of a "
                           "token file",
                           path, size, HEADER_BYTES);
    const char *why = NULL;
    FILE *f = input_file_fopen(path, NULL, &why); /* stat above, then replaced: still no hang */
    if (f == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: cannot open: %s", path, why);
    int32_t h[GPT_DATA_HEADER_INTS];
    size_t got = fread(h, sizeof h[0], GPT_DATA_HEADER_INTS, f);
    fclose(f);
    if (got != GPT_DATA_HEADER_INTS)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: cannot read the header", path);
    if (h[0] != GPT_DATA_MAGIC)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: bad magic %" PRId32 " in the header, expected %d (an llm.c "
                           "token file)",
                           path, h[0], GPT_DATA_MAGIC);
    if (h[1] != GPT_DATA_VERSION)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: version %" PRId32 ", expected %d (uint16 tokens)", path, h[1],
                           GPT_DATA_VERSION);
    if (h[2] < 0)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: negative token count %" PRId32 " in the header", path, h[2]);
    uint64_t want = (uint64_t)HEADER_BYTES + 2 * (uint64_t)h[2];
    if (size < want)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: truncated: the header says %" PRId32 " tokens (%" PRIu64
                           " bytes), the file has %" PRIu64 " bytes",
                           path, h[2], want, size);
    if (size > want)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: %" PRIu64 " bytes after the %" PRId32 " tokens the header "
                           "counts (expected a file of %" PRIu64 " bytes)",
                           path, size - want, h[2], want);
    *ntok = (uint64_t)h[2];
    return 0;
}

/* Reads shard i into a new buffer and checks every token against the vocab. */
static int shard_load(const gpt_data_t *d, int i, uint16_t **out, char *err, size_t errlen) {
    const shard_t *s = &d->shards[i];
    uint16_t *buf = malloc(s->ntok * sizeof *buf + 1);
    if (buf == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: out of memory for %" PRIu64 " tokens",
                           s->path, s->ntok);
    const char *why = NULL;
    FILE *f = input_file_fopen(s->path, NULL, &why);
    if (f == NULL) {
        free(buf);
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: cannot open: %s", s->path, why);
    }
    int ok = fseeko(f, (off_t)s->start, SEEK_SET) == 0;
    if (ok && d->text) {
        unsigned char *bytes = (unsigned char *)buf; /* read into the upper half, widen down */
        bytes += s->ntok;
        ok = fread(bytes, 1, s->ntok, f) == s->ntok;
        for (uint64_t k = 0; ok && k < s->ntok; k++)
            buf[k] = bytes[k];
    } else if (ok) {
        ok = fread(buf, sizeof *buf, s->ntok, f) == s->ntok;
    }
    fclose(f);
    if (!ok) {
        free(buf);
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: truncated: cannot read %" PRIu64 " tokens",
                           s->path, s->ntok);
    }
    for (uint64_t k = 0; k < s->ntok; k++)
        if (buf[k] >= d->vocab) {
            unsigned v = buf[k];
            free(buf);
            return errbuf_fail(err, errlen, ERR_PREFIX,
                               "%s: token %u at index %" PRIu64 " is >= the vocabulary "
                               "size %d",
                               s->path, v, k, d->vocab);
        }
    *out = buf;
    return 0;
}

/* ----------------------------------------------------------------------------
 * open / close */

static int add_shard(gpt_data_t *d, const char *path, uint64_t start, uint64_t ntok,
                     char *err, size_t errlen) {
    shard_t *s = realloc(d->shards, (size_t)(d->nshards + 1) * sizeof *s);
    if (s == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "out of memory for the shard list");
    d->shards = s;
    s[d->nshards].path = strdup(path);
    if (s[d->nshards].path == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "out of memory for the shard list");
    s[d->nshards].start = start;
    s[d->nshards].ntok = ntok;
    d->nshards++;
    return 0;
}

static int open_tokens(gpt_data_t *d, const char *pattern, char *err, size_t errlen) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return errbuf_fail(err, errlen, ERR_PREFIX, "--data %s: no file matches", pattern);
    if (rc != 0)
        return errbuf_fail(err, errlen, ERR_PREFIX, "--data %s: glob failed (%s)", pattern,
                           rc == GLOB_NOSPACE ? "out of memory" : "read error");
    int status = 0;
    for (size_t i = 0; i < g.gl_pathc && status == 0; i++) {
        uint64_t ntok = 0;
        status = shard_check_header(g.gl_pathv[i], &ntok, err, errlen);
        if (status == 0 && ntok < d->bt + 1)
            status = errbuf_fail(err, errlen, ERR_PREFIX,
                                 "%s: %" PRIu64 " tokens, shorter than one batch: B*T+1 = "
                                 "%" PRIu64,
                                 g.gl_pathv[i], ntok, d->bt + 1);
        if (status == 0)
            status = add_shard(d, g.gl_pathv[i], (uint64_t)HEADER_BYTES, ntok, err, errlen);
    }
    globfree(&g);
    return status;
}

static int open_text(gpt_data_t *d, const char *path, char *err, size_t errlen) {
    uint64_t size;
    if (file_size(path, &size, err, errlen) != 0)
        return -1;
    uint64_t val = size * GPT_DATA_TEXT_VAL_PERCENT / 100, start = 0, n = size;
    const char *what = "the file";
    if (d->cfg.split == GPT_DATA_TRAIN) {
        n = size - val;
        what = "its training split (the first 90%)";
    } else if (d->cfg.split == GPT_DATA_VAL) {
        start = size - val;
        n = val;
        what = "its validation split (the last 10%)";
    }
    if (n < d->bt + 1)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "--text %s: %s has %" PRIu64 " bytes, shorter than one batch: "
                           "B*T+1 = %" PRIu64,
                           path, what, n, d->bt + 1);
    return add_shard(d, path, start, n, err, errlen);
}

void gpt_data_close(gpt_data_t *d) {
    if (d == NULL)
        return;
    for (int i = 0; i < d->nshards; i++)
        free(d->shards[i].path);
    free(d->shards);
    free(d->order);
    free(d->order_next);
    free(d->tokens);
    free(d);
}

int gpt_data_open(gpt_data_t **out, const gpt_data_config_t *cfg, char *err, size_t errlen) {
    *out = NULL;
    if (cfg == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "gpt_data_open: no configuration");
    if ((cfg->pattern == NULL) == (cfg->text == NULL))
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "gpt_data_open: expected exactly one of a token-file pattern "
                           "(--data) and a text file (--text)");
    if (cfg->B < 1 || cfg->T < 1)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "gpt_data_open: B = %d, T = %d: expected both >= 1", cfg->B, cfg->T);
    if (cfg->split < GPT_DATA_ALL || cfg->split > GPT_DATA_VAL)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "gpt_data_open: split %d: expected GPT_DATA_ALL, _TRAIN or _VAL",
                           (int)cfg->split);
    int maxv = cfg->text ? GPT_DATA_TEXT_VOCAB : 65536;
    if (cfg->vocab < 0 || cfg->vocab > 65536)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "gpt_data_open: vocab %d: expected 1..65536 (0: %d)", cfg->vocab, maxv);
    int world = cfg->world ? cfg->world : 1;
    if (cfg->world < 0 || cfg->rank < 0 || cfg->rank >= world)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "gpt_data_open: rank %d of world %d: expected a world >= 1 "
                           "(0: 1) and a rank in 0..world-1",
                           cfg->rank, cfg->world);
    gpt_data_t *d = calloc(1, sizeof *d);
    if (d == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "gpt_data_open: out of memory");
    d->rank = cfg->rank;
    d->world = world;
    d->cfg = *cfg;
    d->cfg.pattern = d->cfg.text = NULL;
    d->text = cfg->text != NULL;
    d->vocab = cfg->vocab ? cfg->vocab : maxv;
    d->bt = (uint64_t)cfg->B * (uint64_t)cfg->T;
    d->loaded = -1;
    int status = d->text ? open_text(d, cfg->text, err, errlen)
                         : open_tokens(d, cfg->pattern, err, errlen);
    if (status == 0) {
        d->order = malloc((size_t)d->nshards * sizeof *d->order);
        d->order_next = malloc((size_t)d->nshards * sizeof *d->order_next);
        if (d->order == NULL || d->order_next == NULL)
            status = errbuf_fail(err, errlen, ERR_PREFIX, "gpt_data_open: out of memory");
    }
    if (status == 0) {
        uint64_t h = 0xCBF29CE484222325ull;
        h = fnv1a(h, (uint64_t)cfg->B);
        h = fnv1a(h, (uint64_t)cfg->T);
        h = fnv1a(h, (uint64_t)d->nshards);
        for (int i = 0; i < d->nshards; i++)
            h = fnv1a(h, d->shards[i].ntok);
        d->fingerprint = h;
        gpt_data_pos_t start = {.rng = splitmix64(&(uint64_t){cfg->seed}), .fingerprint = h};
        status = gpt_data_seek(d, &start, err, errlen);
    }
    if (status != 0) {
        gpt_data_close(d);
        return -1;
    }
    *out = d;
    return 0;
}

/* ----------------------------------------------------------------------------
 * position */

void gpt_data_tell(const gpt_data_t *d, gpt_data_pos_t *pos) {
    *pos = d->pos;
}

/* Makes (pos, order, rng_next, tokens) the state, loading the shard pos points at
 * unless it is the loaded one. On failure nothing changes. */
static int commit(gpt_data_t *d, const gpt_data_pos_t *pos, int *order, uint64_t rng_next,
                  char *err, size_t errlen) {
    int want = order[pos->shard];
    if (want != d->loaded) {
        uint16_t *tokens = NULL;
        if (shard_load(d, want, &tokens, err, errlen) != 0)
            return -1;
        free(d->tokens);
        d->tokens = tokens;
        d->loaded = want;
    }
    if (order != d->order)
        memcpy(d->order, order, (size_t)d->nshards * sizeof *order);
    d->pos = *pos;
    d->rng_next = rng_next;
    return 0;
}

int gpt_data_seek(gpt_data_t *d, const gpt_data_pos_t *pos, char *err, size_t errlen) {
    if (pos->fingerprint != d->fingerprint)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "data position: fingerprint %016" PRIx64 " is not this data's "
                           "(%016" PRIx64
                           "): other files, shard sizes, B or T than the run that saved "
                           "it",
                           pos->fingerprint, d->fingerprint);
    if (pos->shard >= (uint64_t)d->nshards)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "data position: shard %" PRIu64 ", expected < %d", pos->shard,
                           d->nshards);
    int *order = malloc((size_t)d->nshards * sizeof *order);
    if (order == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "data position: out of memory");
    uint64_t rng = pos->rng;
    draw_order(&rng, d->nshards, d->cfg.shuffle, order);
    int status = 0;
    const shard_t *s = &d->shards[order[pos->shard]];
    if (pos->offset % d->bt != 0 || pos->offset > s->ntok)
        status = errbuf_fail(err, errlen, ERR_PREFIX,
                             "data position: offset %" PRIu64 " in %s: expected a multiple "
                             "of B*T = %" PRIu64 " and <= %" PRIu64,
                             pos->offset, s->path, d->bt, s->ntok);
    if (status == 0)
        status = commit(d, pos, order, rng, err, errlen);
    free(order);
    return status;
}

int gpt_data_rewind(gpt_data_t *d, char *err, size_t errlen) {
    gpt_data_pos_t start = {.rng = splitmix64(&(uint64_t){d->cfg.seed}),
                            .fingerprint = d->fingerprint};
    return gpt_data_seek(d, &start, err, errlen);
}

/* ----------------------------------------------------------------------------
 * batches */

/* A position with its epoch's order: what gpt_data_next walks without loading. */
typedef struct {
    gpt_data_pos_t pos;
    uint64_t rng_next;
    int *order;
} cursor_t;

/* Moves c to where the next batch starts: the next shard (or the next epoch's first)
 * when this one has no B*T+1 tokens left. Every shard holds at least one batch. */
static void cursor_fit(const gpt_data_t *d, cursor_t *c) {
    if (c->pos.offset + d->bt + 1 <= d->shards[c->order[c->pos.shard]].ntok)
        return;
    c->pos.offset = 0;
    if (++c->pos.shard < (uint64_t)d->nshards)
        return;
    c->pos.epoch++;
    c->pos.shard = 0;
    c->pos.rng = c->rng_next;
    uint64_t rng = c->pos.rng;
    draw_order(&rng, d->nshards, d->cfg.shuffle, c->order);
    c->rng_next = rng;
}

/* Passes n batches. */
static void cursor_skip(const gpt_data_t *d, cursor_t *c, int n) {
    for (int i = 0; i < n; i++) {
        cursor_fit(d, c);
        c->pos.offset += d->bt;
    }
}

int gpt_data_next(gpt_data_t *d, int32_t *inputs, int32_t *targets, char *err, size_t errlen) {
    /* walk a copy of the position through this rank's group; the handle changes only
     * once the one shard it needs is loaded */
    memcpy(d->order_next, d->order, (size_t)d->nshards * sizeof *d->order);
    cursor_t c = {.pos = d->pos, .rng_next = d->rng_next, .order = d->order_next};
    cursor_skip(d, &c, d->rank);
    cursor_fit(d, &c);
    int want = c.order[c.pos.shard];
    if (want != d->loaded) {
        uint16_t *tokens = NULL;
        if (shard_load(d, want, &tokens, err, errlen) != 0)
            return -1;
        free(d->tokens);
        d->tokens = tokens;
        d->loaded = want;
    }
    const uint16_t *t = d->tokens + c.pos.offset;
    for (uint64_t i = 0; i < d->bt; i++) {
        inputs[i] = t[i];
        targets[i] = t[i + 1];
    }
    c.pos.offset += d->bt;
    cursor_skip(d, &c, d->world - 1 - d->rank);
    d->pos = c.pos;
    d->rng_next = c.rng_next;
    int *o = d->order; /* the walked order is now the handle's */
    d->order = d->order_next;
    d->order_next = o;
    return 0;
}

/* ----------------------------------------------------------------------------
 * facts */

int gpt_data_shards(const gpt_data_t *d) {
    return d->nshards;
}

uint64_t gpt_data_tokens(const gpt_data_t *d) {
    uint64_t n = 0;
    for (int i = 0; i < d->nshards; i++)
        n += d->shards[i].ntok;
    return n;
}

uint64_t gpt_data_batches_per_epoch(const gpt_data_t *d) {
    uint64_t n = 0;
    for (int i = 0; i < d->nshards; i++)
        n += (d->shards[i].ntok - 1) / d->bt;
    return n;
}

int gpt_data_vocab(const gpt_data_t *d) {
    return d->vocab;
}

/* ----------------------------------------------------------------------------
 * writing */

int gpt_data_write_tokens(const char *path, const uint16_t *tokens, uint64_t n, char *err,
                          size_t errlen) {
    if (n > INT32_MAX)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s: %" PRIu64 " tokens, more than a token file's header can "
                           "count (%d)",
                           path, n, INT32_MAX);
    int32_t h[GPT_DATA_HEADER_INTS] = {GPT_DATA_MAGIC, GPT_DATA_VERSION, (int32_t)n};
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: cannot create: %s", path, strerror(errno));
    int ok = fwrite(h, sizeof h, 1, f) == 1 && (n == 0 || fwrite(tokens, 2, n, f) == n);
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s: write failed: %s", path, strerror(errno));
    return 0;
}
