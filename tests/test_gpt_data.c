/*
 * test_gpt_data.c -- uvmrt-gpt's data reader (examples/gpt/data.c), no GPU.
 *
 *  - token files round trip: batches are consecutive tokens, targets shifted by one,
 *    every shard read front to back once per epoch;
 *  - the shard order is shuffled per epoch, the same for the same seed, different
 *    for another seed, and name order without shuffling;
 *  - every bad file is refused with a message naming the file and the fault (magic,
 *    version, truncation, token >= vocab, shard shorter than B*T+1, no match);
 *  - tell/seek: a second handle seeked to a saved position gives identical batches,
 *    across shard and epoch boundaries; a position of other data is refused;
 *  - a shard that fails to load later leaves the handle as it was;
 *  - text at byte level: 90/10 split, vocab 256;
 *  - data parallel: rank r of N gets batch k*N + r of the one-rank sequence (disjoint,
 *    together all of it, seeded), every rank at the same position after each call, a
 *    saved position resumes every rank, a bad rank or world is refused, and a rank
 *    whose own shard fails to load changes nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "data.h"

static char dir[256];
static char err[1024];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "%s/gptdata.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(gpt_data, .init = make_dir, .fini = remove_dir);

/* shard k holds tokens k*1000 + i (mod vocab 50257), so a token names its shard */
static void write_shard(const char *name, int k, uint64_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint16_t *t = malloc(n * sizeof *t + 1);
    cr_assert_not_null(t);
    for (uint64_t i = 0; i < n; i++)
        t[i] = (uint16_t)((k * 1000 + i) % 50257);
    cr_assert_eq(gpt_data_write_tokens(path, t, n, err, sizeof err), 0, "%s", err);
    free(t);
}

static void write_raw(const char *name, const void *buf, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static gpt_data_config_t tokens_cfg(const char *glob_tail, int B, int T, uint64_t seed) {
    static char pat[512];
    snprintf(pat, sizeof pat, "%s/%s", dir, glob_tail);
    return (gpt_data_config_t){.pattern = pat, .B = B, .T = T, .seed = seed, .shuffle = 1,
                               .vocab = 50257};
}

Test(gpt_data, round_trip_one_shard) {
    write_shard("a.bin", 0, 100);
    gpt_data_config_t cfg = tokens_cfg("a.bin", 2, 8, 1);
    gpt_data_t *d;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gpt_data_shards(d), 1);
    cr_assert_eq(gpt_data_tokens(d), 100);
    cr_assert_eq(gpt_data_batches_per_epoch(d), 6); /* (100-1)/16 */
    int32_t in[16], tg[16];
    for (int b = 0; b < 6; b++) {
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
        for (int i = 0; i < 16; i++) {
            cr_assert_eq(in[i], b * 16 + i);
            cr_assert_eq(tg[i], b * 16 + i + 1);
        }
    }
    /* the 4 tokens left over are skipped: epoch 1 starts again at 0 */
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(in[0], 0);
    gpt_data_pos_t p;
    gpt_data_tell(d, &p);
    cr_assert_eq(p.epoch, 1);
    cr_assert_eq(p.offset, 16);
    gpt_data_close(d);
    gpt_data_close(NULL);
}

/* The first token of each batch of one epoch, by shard (token / 1000). */
static void epoch_shards(gpt_data_t *d, int nb, int *shard_of_batch) {
    int32_t in[32], tg[32];
    for (int b = 0; b < nb; b++) {
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
        shard_of_batch[b] = in[0] / 1000;
    }
}

Test(gpt_data, shuffle_per_epoch_is_seeded) {
    const int S = 6;
    for (int k = 0; k < S; k++) {
        char name[32];
        snprintf(name, sizeof name, "shard_%02d.bin", k);
        write_shard(name, k, 65); /* 2 batches of 32 each */
    }
    int a[3][12], b[3][12], c[3][12], plain[12];
    for (int run = 0; run < 3; run++) {
        gpt_data_config_t cfg = tokens_cfg("shard_*.bin", 2, 16, run == 2 ? 99 : 7);
        gpt_data_t *d;
        cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
        cr_assert_eq(gpt_data_batches_per_epoch(d), 12);
        for (int e = 0; e < 3; e++)
            epoch_shards(d, 12, run == 0 ? a[e] : run == 1 ? b[e] : c[e]);
        gpt_data_close(d);
    }
    cr_assert_eq(memcmp(a, b, sizeof a), 0, "same seed, same batches");
    cr_assert_neq(memcmp(a, c, sizeof a), 0, "another seed, another order");
    cr_assert_neq(memcmp(a[0], a[1], sizeof a[0]), 0, "each epoch draws its own order");
    for (int e = 0; e < 3; e++) {
        int seen[6] = {0};
        for (int i = 0; i < 12; i += 2) {
            cr_assert_eq(a[e][i], a[e][i + 1], "a shard is read front to back");
            seen[a[e][i]]++;
        }
        for (int k = 0; k < S; k++)
            cr_assert_eq(seen[k], 1, "epoch %d visits shard %d once", e, k);
    }
    gpt_data_config_t cfg = tokens_cfg("shard_*.bin", 2, 16, 7);
    cfg.shuffle = 0;
    gpt_data_t *d;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    epoch_shards(d, 12, plain);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(plain[i], i / 2, "no shuffle: name order");
    gpt_data_close(d);
}

/* Opening must fail with a message containing both the file name and what. */
static void expect_open_error(gpt_data_config_t cfg, const char *file, const char *what) {
    gpt_data_t *d = (gpt_data_t *)&cfg; /* not NULL: open must set it */
    err[0] = 0;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), -1);
    cr_assert_null(d);
    cr_assert_not_null(strstr(err, file), "message names %s: %s", file, err);
    cr_assert_not_null(strstr(err, what), "message says '%s': %s", what, err);
}

Test(gpt_data, bad_files_are_refused_by_name) {
    int32_t h[256] = {GPT_DATA_MAGIC, GPT_DATA_VERSION, 40};
    uint16_t body[40] = {0};
    unsigned char buf[1024 + 80];

    h[0] = 12345;
    memcpy(buf, h, 1024);
    memcpy(buf + 1024, body, 80);
    write_raw("magic.bin", buf, sizeof buf);
    expect_open_error(tokens_cfg("magic.bin", 1, 8, 1), "magic.bin", "bad magic 12345");

    h[0] = GPT_DATA_MAGIC;
    h[1] = 2;
    memcpy(buf, h, 1024);
    write_raw("version.bin", buf, sizeof buf);
    expect_open_error(tokens_cfg("version.bin", 1, 8, 1), "version.bin", "version 2");

    h[1] = GPT_DATA_VERSION;
    memcpy(buf, h, 1024);
    write_raw("trunc.bin", buf, sizeof buf - 1);
    expect_open_error(tokens_cfg("trunc.bin", 1, 8, 1), "trunc.bin", "truncated");
    write_raw("header.bin", buf, 100);
    expect_open_error(tokens_cfg("header.bin", 1, 8, 1), "header.bin", "truncated");
    {
        unsigned char big[1024 + 82];
        memcpy(big, buf, sizeof buf);
        big[sizeof buf] = big[sizeof buf + 1] = 0;
        write_raw("extra.bin", big, sizeof big);
        expect_open_error(tokens_cfg("extra.bin", 1, 8, 1), "extra.bin", "bytes after");
    }

    uint16_t toks[40];
    for (int i = 0; i < 40; i++)
        toks[i] = (uint16_t)i;
    toks[17] = 50257;
    char path[512];
    snprintf(path, sizeof path, "%s/vocab.bin", dir);
    cr_assert_eq(gpt_data_write_tokens(path, toks, 40, err, sizeof err), 0);
    expect_open_error(tokens_cfg("vocab.bin", 1, 8, 1), "vocab.bin", ">= the vocabulary size 50257");
    expect_open_error(tokens_cfg("vocab.bin", 1, 8, 1), "vocab.bin", "index 17");

    write_shard("short.bin", 0, 16);
    expect_open_error(tokens_cfg("short.bin", 2, 8, 1), "short.bin", "shorter than one batch");

    expect_open_error(tokens_cfg("nothing*.bin", 1, 8, 1), "nothing*.bin", "no file matches");
    gpt_data_config_t cfg = tokens_cfg("short.bin", 0, 8, 1);
    expect_open_error(cfg, "B = 0", "expected both >= 1");
    cfg = tokens_cfg("short.bin", 1, 8, 1);
    cfg.text = "x";
    expect_open_error(cfg, "gpt_data_open", "exactly one");
}

Test(gpt_data, errors_go_to_stderr_without_a_buffer) {
    gpt_data_config_t cfg = tokens_cfg("none.bin", 1, 8, 1);
    gpt_data_t *d;
    cr_assert_eq(gpt_data_open(&d, &cfg, NULL, 0), -1);
    cr_assert_null(d);
}

Test(gpt_data, seek_gives_identical_batches) {
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "s%d.bin", k);
        write_shard(name, k, 50 + 17 * k); /* 3..5 batches of 16 */
    }
    gpt_data_config_t cfg = tokens_cfg("s*.bin", 2, 8, 42);
    gpt_data_t *d, *e;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gpt_data_open(&e, &cfg, err, sizeof err), 0, "%s", err);
    uint64_t nb = gpt_data_batches_per_epoch(d);
    int32_t in[16], tg[16], in2[16], tg2[16];
    /* save at every batch of two epochs (shard ends, epoch ends included) */
    for (uint64_t s = 0; s < 2 * nb + 1; s++) {
        gpt_data_pos_t p;
        gpt_data_tell(d, &p);
        cr_assert_eq(gpt_data_seek(e, &p, err, sizeof err), 0, "%s", err);
        for (int k = 0; k < 7; k++) { /* e runs ahead, d's copy is compared */
            cr_assert_eq(gpt_data_next(e, in2, tg2, err, sizeof err), 0, "%s", err);
            if (k == 0) {
                cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
                cr_assert_eq(memcmp(in, in2, sizeof in), 0, "batch after the seek at %lu",
                             (unsigned long)s);
                cr_assert_eq(memcmp(tg, tg2, sizeof tg), 0);
            }
        }
    }
    /* a fresh handle with another seed, seeked, follows d too: the order lives in pos */
    gpt_data_config_t other = cfg;
    other.seed = 5;
    gpt_data_t *f;
    cr_assert_eq(gpt_data_open(&f, &other, err, sizeof err), 0, "%s", err);
    gpt_data_pos_t p;
    gpt_data_tell(d, &p);
    cr_assert_eq(gpt_data_seek(f, &p, err, sizeof err), 0, "%s", err);
    for (uint64_t s = 0; s < 2 * nb; s++) {
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0);
        cr_assert_eq(gpt_data_next(f, in2, tg2, err, sizeof err), 0);
        cr_assert_eq(memcmp(in, in2, sizeof in), 0);
    }
    /* rewind: the first batches again */
    cr_assert_eq(gpt_data_rewind(e, err, sizeof err), 0);
    gpt_data_t *g;
    cr_assert_eq(gpt_data_open(&g, &cfg, err, sizeof err), 0);
    cr_assert_eq(gpt_data_next(e, in, tg, err, sizeof err), 0);
    cr_assert_eq(gpt_data_next(g, in2, tg2, err, sizeof err), 0);
    cr_assert_eq(memcmp(in, in2, sizeof in), 0);
    gpt_data_close(d);
    gpt_data_close(e);
    gpt_data_close(f);
    gpt_data_close(g);
}

Test(gpt_data, seek_to_other_data_is_refused_and_changes_nothing) {
    write_shard("x.bin", 0, 200);
    gpt_data_config_t cfg = tokens_cfg("x.bin", 2, 8, 1);
    gpt_data_t *d;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    int32_t in[16], tg[16];
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0);
    gpt_data_pos_t before, p, after;
    gpt_data_tell(d, &before);
    p = before;
    p.fingerprint ^= 1;
    cr_assert_eq(gpt_data_seek(d, &p, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "fingerprint"), "%s", err);
    p = before;
    p.shard = 3;
    cr_assert_eq(gpt_data_seek(d, &p, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "shard 3"), "%s", err);
    p = before;
    p.offset = 5;
    cr_assert_eq(gpt_data_seek(d, &p, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "offset 5"), "%s", err);
    gpt_data_tell(d, &after);
    cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0);
    cr_assert_eq(in[0], 16, "still the second batch");
    /* same files, other T: another fingerprint */
    gpt_data_config_t cfg2 = tokens_cfg("x.bin", 2, 4, 1);
    gpt_data_t *e;
    cr_assert_eq(gpt_data_open(&e, &cfg2, err, sizeof err), 0);
    cr_assert_eq(gpt_data_seek(e, &before, err, sizeof err), -1);
    gpt_data_close(d);
    gpt_data_close(e);
}

Test(gpt_data, a_bad_later_shard_fails_next_and_changes_nothing) {
    write_shard("p0.bin", 0, 33); /* one batch of 32 */
    uint16_t toks[33];
    for (int i = 0; i < 33; i++)
        toks[i] = (uint16_t)(1000 + i);
    toks[30] = 60000;
    char path[512];
    snprintf(path, sizeof path, "%s/p1.bin", dir);
    cr_assert_eq(gpt_data_write_tokens(path, toks, 33, err, sizeof err), 0);
    gpt_data_config_t cfg = tokens_cfg("p*.bin", 2, 16, 1);
    cfg.shuffle = 0;
    gpt_data_t *d;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    int32_t in[32], tg[32];
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
    gpt_data_pos_t before, after;
    gpt_data_tell(d, &before);
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), -1);
        cr_assert_not_null(strstr(err, "p1.bin"), "%s", err);
        cr_assert_not_null(strstr(err, "token 60000"), "%s", err);
        gpt_data_tell(d, &after);
        cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
    }
    gpt_data_close(d);
}

Test(gpt_data, text_is_bytes_split_90_10) {
    char text[1000];
    for (int i = 0; i < 1000; i++)
        text[i] = (char)(i < 900 ? 'a' + i % 26 : 0xC3 + (i & 1)); /* UTF-8 lead bytes at the end */
    write_raw("t.txt", text, sizeof text);
    char path[512];
    snprintf(path, sizeof path, "%s/t.txt", dir);
    gpt_data_config_t cfg = {.text = path, .split = GPT_DATA_TRAIN, .B = 4, .T = 8, .seed = 1};
    gpt_data_t *d, *v;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gpt_data_vocab(d), 256);
    cr_assert_eq(gpt_data_tokens(d), 900);
    cfg.split = GPT_DATA_VAL;
    cr_assert_eq(gpt_data_open(&v, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_eq(gpt_data_tokens(v), 100);
    int32_t in[32], tg[32];
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0);
    for (int i = 0; i < 32; i++) {
        cr_assert_eq(in[i], 'a' + i % 26);
        cr_assert_eq(tg[i], 'a' + (i + 1) % 26);
    }
    cr_assert_eq(gpt_data_next(v, in, tg, err, sizeof err), 0);
    for (int i = 0; i < 32; i++)
        cr_assert_eq(in[i], 0xC3 + (i & 1), "byte values above 127 stay as they are");
    gpt_data_close(d);
    gpt_data_close(v);

    cfg.split = GPT_DATA_VAL;
    cfg.B = 16; /* 129 bytes wanted, the split has 100 */
    expect_open_error(cfg, "t.txt", "validation split");
    cfg.text = "/nonexistent/corpus.txt";
    expect_open_error(cfg, "/nonexistent/corpus.txt", "cannot stat");
    cfg.text = path;
    cfg.split = GPT_DATA_ALL;
    cfg.B = 1;
    cfg.vocab = 150; /* bytes >= 150 are then out of range */
    expect_open_error(cfg, "t.txt", "token 195 at index 900");
}

Test(gpt_data, the_repository_corpus_trains_at_byte_level) {
    gpt_data_config_t cfg = {.text = GPT_CORPUS_PATH, .split = GPT_DATA_TRAIN, .B = 8, .T = 256,
                             .seed = 1, .shuffle = 1};
    gpt_data_t *d, *v;
    cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
    cfg.split = GPT_DATA_VAL;
    cr_assert_eq(gpt_data_open(&v, &cfg, err, sizeof err), 0, "%s", err);
    cr_assert_geq(gpt_data_tokens(d), 150000, "about 200 KB of text");
    cr_assert_geq(gpt_data_batches_per_epoch(v), 5, "validation has several batches");
    static int32_t in[8 * 256], tg[8 * 256];
    cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
    for (int i = 0; i < 8 * 256; i++)
        cr_assert(in[i] >= 0 && in[i] < 256);
    gpt_data_close(d);
    gpt_data_close(v);
}

/* Rank r of N (token files over shard and epoch ends, and text) against one rank. */
static void check_sharding(gpt_data_config_t cfg, int N, int steps) {
    gpt_data_t *one, *r[4];
    cfg.rank = 0;
    cfg.world = 0;
    cr_assert_eq(gpt_data_open(&one, &cfg, err, sizeof err), 0, "%s", err);
    for (int k = 0; k < N; k++) {
        cfg.rank = k;
        cfg.world = N;
        cr_assert_eq(gpt_data_open(&r[k], &cfg, err, sizeof err), 0, "%s", err);
    }
    size_t bt = (size_t)cfg.B * (size_t)cfg.T;
    int32_t in[64], tg[64], in1[64], tg1[64];
    for (int s = 0; s < steps; s++) {
        gpt_data_pos_t p0;
        for (int k = 0; k < N; k++) {
            cr_assert_eq(gpt_data_next(one, in1, tg1, err, sizeof err), 0, "%s", err);
            cr_assert_eq(gpt_data_next(r[k], in, tg, err, sizeof err), 0, "%s", err);
            cr_assert_eq(memcmp(in, in1, bt * sizeof *in), 0, "world %d rank %d step %d", N, k,
                         s);
            cr_assert_eq(memcmp(tg, tg1, bt * sizeof *tg), 0);
            gpt_data_pos_t p;
            gpt_data_tell(r[k], &p);
            if (k == 0)
                p0 = p;
            cr_assert_eq(memcmp(&p, &p0, sizeof p), 0, "every rank at the same position");
        }
        gpt_data_pos_t p1;
        gpt_data_tell(one, &p1);
        cr_assert_eq(memcmp(&p0, &p1, sizeof p1), 0, "the one-rank reader's position too");
    }
    for (int k = 0; k < N; k++)
        gpt_data_close(r[k]);
    gpt_data_close(one);
}

Test(gpt_data, ranks_read_disjoint_batches_that_make_up_one_rank_sequence) {
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "d%d.bin", k);
        write_shard(name, k, 40 + 23 * k); /* 2, 3 and 5 batches of 16 */
    }
    for (int N = 1; N <= 4; N++)
        check_sharding(tokens_cfg("d*.bin", 2, 8, 3), N, 17); /* 17 * N batches: epochs */
    char path[512];
    snprintf(path, sizeof path, "%s/t.txt", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 300; i++)
        fputc('a' + i % 26, f);
    fclose(f);
    gpt_data_config_t text = {.text = path, .split = GPT_DATA_TRAIN, .B = 1, .T = 10};
    check_sharding(text, 3, 20);
}

Test(gpt_data, a_saved_position_resumes_every_rank) {
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "e%d.bin", k);
        write_shard(name, k, 50 + 17 * k);
    }
    for (int k = 0; k < 2; k++) {
        gpt_data_config_t cfg = tokens_cfg("e*.bin", 2, 8, 11);
        cfg.rank = k;
        cfg.world = 2;
        gpt_data_t *d, *e;
        cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
        cr_assert_eq(gpt_data_open(&e, &cfg, err, sizeof err), 0, "%s", err);
        int32_t in[16], tg[16], in2[16], tg2[16];
        for (int s = 0; s < 20; s++) {
            gpt_data_pos_t p;
            gpt_data_tell(d, &p);
            cr_assert_eq(gpt_data_seek(e, &p, err, sizeof err), 0, "%s", err);
            cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
            cr_assert_eq(gpt_data_next(e, in2, tg2, err, sizeof err), 0, "%s", err);
            cr_assert_eq(memcmp(in, in2, sizeof in), 0, "rank %d step %d", k, s);
        }
        gpt_data_close(d);
        gpt_data_close(e);
    }
}

Test(gpt_data, a_bad_rank_or_world_is_refused) {
    write_shard("w.bin", 0, 100);
    int bad[][2] = {{2, 2}, {-1, 2}, {0, -1}, {1, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gpt_data_config_t cfg = tokens_cfg("w.bin", 2, 8, 1);
        cfg.rank = bad[i][0];
        cfg.world = bad[i][1];
        gpt_data_t *d = (gpt_data_t *)&cfg;
        cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), -1);
        cr_assert_null(d);
        char want[64];
        snprintf(want, sizeof want, "rank %d of world %d", bad[i][0], bad[i][1]);
        cr_assert_not_null(strstr(err, want), "%s", err);
    }
}

Test(gpt_data, a_rank_whose_shard_fails_to_load_changes_nothing) {
    write_shard("q0.bin", 0, 65); /* two batches of 32 */
    uint16_t toks[65];
    for (int i = 0; i < 65; i++)
        toks[i] = (uint16_t)(1000 + i);
    toks[40] = 60000; /* in q1's second batch */
    char path[512];
    snprintf(path, sizeof path, "%s/q1.bin", dir);
    cr_assert_eq(gpt_data_write_tokens(path, toks, 65, err, sizeof err), 0);
    int32_t in[32], tg[32];
    for (int k = 0; k < 2; k++) {
        gpt_data_config_t cfg = tokens_cfg("q*.bin", 2, 16, 1);
        cfg.shuffle = 0;
        cfg.rank = k;
        cfg.world = 2;
        gpt_data_t *d;
        cr_assert_eq(gpt_data_open(&d, &cfg, err, sizeof err), 0, "%s", err);
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), 0, "%s", err);
        cr_assert_eq(in[0], k * 32, "rank %d: batch %d of q0", k, k);
        gpt_data_pos_t before, after;
        gpt_data_tell(d, &before);
        /* the next group is q1's two batches: q1 fails its token check on either rank */
        cr_assert_eq(gpt_data_next(d, in, tg, err, sizeof err), -1);
        cr_assert_not_null(strstr(err, "token 60000"), "%s", err);
        gpt_data_tell(d, &after);
        cr_assert_eq(memcmp(&before, &after, sizeof before), 0);
        gpt_data_close(d);
    }
}
