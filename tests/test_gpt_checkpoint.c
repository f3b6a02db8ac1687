/*
 * test_gpt_checkpoint.c -- uvmrt-gpt's checkpoints (examples/gpt/checkpoint.c), no GPU.
 *
 *  - CRC32C against the standard check value;
 *  - save/load round trip of several named buffers and the metadata, bit for bit;
 *  - a flipped payload byte, a flipped header byte and a truncated file are refused
 *    and leave the caller's buffers untouched; --resume then skips the bad newest
 *    file and loads the one before;
 *  - a save killed halfway (a child _exits from the progress callback) loses no
 *    earlier checkpoint, is never loaded, and is cleaned up by the next save;
 *  - keep-K pruning;
 *  - names, sizes, buffer count and metadata size that differ from the file are
 *    refused by name on load and on resume (never skipped silently).
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "checkpoint.h"

static char dir[256];
static char err[1024];

static void make_dir(void) {
    snprintf(dir, sizeof dir, "%s/gptckpt.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(gpt_checkpoint, .init = make_dir, .fini = remove_dir);

/* A small "model": three buffers filled from a step number. */
typedef struct {
    float w[1000];
    float m[1000];
    unsigned char odd[40]; /* 37 saved: the size of no float array */
} model_t;

typedef struct {
    uint64_t step;
    uint64_t data_pos[5];
    uint64_t rng;
} meta_t;

static void fill(model_t *x, meta_t *meta, uint64_t step) {
    for (int i = 0; i < 1000; i++) {
        x->w[i] = (float)step + (float)i * 0.5f;
        x->m[i] = -(float)i / (float)(step + 1);
    }
    memset(x->odd, 0, sizeof x->odd);
    for (int i = 0; i < 37; i++)
        x->odd[i] = (unsigned char)(step * 7 + i);
    *meta = (meta_t){.step = step, .data_pos = {step, 2, 3, 4, 5}, .rng = step * 0x9E37u};
}

static void buffers(model_t *x, gpt_ckpt_buffer_t b[3]) {
    b[0] = (gpt_ckpt_buffer_t){"wte", x->w, sizeof x->w};
    b[1] = (gpt_ckpt_buffer_t){"adam_m", x->m, sizeof x->m};
    b[2] = (gpt_ckpt_buffer_t){"odd", x->odd, 37};
}

static void save_step(uint64_t step, int keep) {
    model_t x;
    meta_t meta;
    gpt_ckpt_buffer_t b[3];
    fill(&x, &meta, step);
    buffers(&x, b);
    gpt_ckpt_save_options_t o = {.keep = keep};
    cr_assert_eq(gpt_ckpt_save(dir, step, b, 3, &meta, sizeof meta, &o, err, sizeof err), 0,
                 "%s", err);
}

static void path_of(char *p, size_t n, uint64_t step) {
    gpt_ckpt_path(p, n, dir, step);
}

static void flip_byte(const char *path, long off) {
    int fd = open(path, O_RDWR);
    cr_assert(fd >= 0);
    unsigned char c;
    cr_assert_eq(pread(fd, &c, 1, off), 1);
    c ^= 0x10;
    cr_assert_eq(pwrite(fd, &c, 1, off), 1);
    close(fd);
}

Test(gpt_checkpoint, crc32c_check_value) {
    cr_assert_eq(gpt_ckpt_crc32c(0, "123456789", 9), 0xE3069283u);
    /* in pieces, unaligned: the same */
    uint32_t c = gpt_ckpt_crc32c(0, "1234", 4);
    cr_assert_eq(gpt_ckpt_crc32c(c, "56789", 5), 0xE3069283u);
    cr_assert_eq(gpt_ckpt_crc32c(0, "", 0), 0);
}

Test(gpt_checkpoint, round_trip) {
    save_step(5, 0);
    model_t want, got;
    meta_t mwant, mgot;
    fill(&want, &mwant, 5);
    memset(&got, 0xAB, sizeof got);
    memset(got.odd + 37, 0, 3);
    memset(&mgot, 0, sizeof mgot);
    gpt_ckpt_buffer_t b[3];
    buffers(&got, b);
    char path[512];
    path_of(path, sizeof path, 5);
    uint64_t step = 0, mb = 0;
    cr_assert_eq(gpt_ckpt_load(path, b, 3, &mgot, sizeof mgot, &mb, &step, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(step, 5);
    cr_assert_eq(mb, sizeof mgot);
    cr_assert_eq(memcmp(&want, &got, sizeof want), 0);
    cr_assert_eq(memcmp(&mwant, &mgot, sizeof mgot), 0);
    cr_assert_eq(gpt_ckpt_verify(path, &step, err, sizeof err), 0, "%s", err);
    /* no temporary left behind */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-000000000005.bin.tmp", dir);
    cr_assert_neq(access(tmp, F_OK), 0);
    /* resume finds it */
    memset(&got, 0, sizeof got);
    char found[600];
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &mgot, sizeof mgot, &mb, &step, found, sizeof found,
                                 err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(found, path);
    cr_assert_eq(memcmp(&want, &got, sizeof want), 0);
}

Test(gpt_checkpoint, no_checkpoint_yet) {
    model_t x;
    meta_t m;
    gpt_ckpt_buffer_t b[3];
    buffers(&x, b);
    uint64_t step = 77;
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 1);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/not-there", dir);
    cr_assert_eq(gpt_ckpt_resume(missing, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err,
                                 sizeof err), 1);
    cr_assert_eq(step, 77, "nothing loaded, nothing changed");
}

/* A load of a bad file fails naming the problem and writes nothing. */
static void expect_bad(uint64_t step, const char *what) {
    model_t got;
    meta_t m;
    memset(&got, 0x5A, sizeof got);
    memset(&m, 0x5A, sizeof m);
    model_t before = got;
    gpt_ckpt_buffer_t b[3];
    buffers(&got, b);
    char path[512];
    path_of(path, sizeof path, step);
    cr_assert_eq(gpt_ckpt_load(path, b, 3, &m, sizeof m, NULL, NULL, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, what), "expected '%s' in: %s", what, err);
    cr_assert_not_null(strstr(err, path), "names the file: %s", err);
    cr_assert_eq(memcmp(&before, &got, sizeof got), 0, "buffers untouched");
    cr_assert_eq(gpt_ckpt_verify(path, NULL, err, sizeof err), -1);
}

Test(gpt_checkpoint, corruption_and_truncation_detected) {
    save_step(1, 0);
    save_step(2, 0);
    save_step(3, 0);
    save_step(4, 0);
    char p2[512], p3[512], p4[512];
    path_of(p2, sizeof p2, 2);
    path_of(p3, sizeof p3, 3);
    path_of(p4, sizeof p4, 4);
    struct stat st;
    cr_assert_eq(stat(p4, &st), 0);
    flip_byte(p4, st.st_size - 100); /* in the data */
    expect_bad(4, "checksum mismatch");
    flip_byte(p3, 8);                /* the step, in the header */
    expect_bad(3, "header checksum");
    cr_assert_eq(truncate(p2, st.st_size - 1), 0);
    expect_bad(2, "truncated");

    /* --resume skips 4, 3 and 2 (warnings) and loads 1 */
    model_t got = {0}, want;
    meta_t m, mwant;
    fill(&want, &mwant, 1);
    gpt_ckpt_buffer_t b[3];
    buffers(&got, b);
    uint64_t step = 0;
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 0, "%s", err);
    cr_assert_eq(step, 1);
    cr_assert_eq(memcmp(&got, &want, sizeof got), 0);
    cr_assert_eq(memcmp(&m, &mwant, sizeof m), 0);
}

Test(gpt_checkpoint, bad_magic_is_named) {
    save_step(9, 0);
    char p[512];
    path_of(p, sizeof p, 9);
    flip_byte(p, 0);
    expect_bad(9, "bad magic");
}

static void die_halfway(void *arg, uint64_t done, uint64_t total) {
    (void)arg;
    if (done > 4096 && done < total)
        _exit(3); /* as a kill -9 in the middle of writing would */
}

Test(gpt_checkpoint, crash_during_save_loses_nothing) {
    save_step(10, 2);
    /* a big enough buffer that the save takes several chunks */
    size_t big = (size_t)9 << 20;
    unsigned char *x = calloc(1, big);
    cr_assert_not_null(x);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        gpt_ckpt_buffer_t b[1] = {{"big", x, big}};
        gpt_ckpt_save_options_t o = {.keep = 2, .progress = die_halfway};
        gpt_ckpt_save(dir, 11, b, 1, NULL, 0, &o, NULL, 0);
        _exit(0);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 3, "the child died in the save");
    free(x);
    char tmp[600], p11[512];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-000000000011.bin.tmp", dir);
    path_of(p11, sizeof p11, 11);
    cr_assert_eq(access(tmp, F_OK), 0, "the partial temporary is there");
    cr_assert_neq(access(p11, F_OK), 0, "and never under the final name");
    uint64_t steps[4];
    cr_assert_eq(gpt_ckpt_list(dir, steps, 4, err, sizeof err), 1);
    cr_assert_eq(steps[0], 10);

    model_t got = {0}, want;
    meta_t m, mwant;
    fill(&want, &mwant, 10);
    gpt_ckpt_buffer_t b[3];
    buffers(&got, b);
    uint64_t step = 0;
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 0, "%s", err);
    cr_assert_eq(step, 10);
    cr_assert_eq(memcmp(&got, &want, sizeof got), 0);

    save_step(12, 2); /* the next save removes the leftover */
    cr_assert_neq(access(tmp, F_OK), 0);
}

Test(gpt_checkpoint, keep_k_prunes_the_oldest) {
    for (uint64_t s = 1; s <= 5; s++)
        save_step(s * 100, 3);
    uint64_t steps[8];
    cr_assert_eq(gpt_ckpt_list(dir, steps, 8, err, sizeof err), 3);
    cr_assert_eq(steps[0], 500);
    cr_assert_eq(steps[1], 400);
    cr_assert_eq(steps[2], 300);
    save_step(600, 0); /* keep 0: keep all */
    cr_assert_eq(gpt_ckpt_list(dir, steps, 8, err, sizeof err), 4);
    /* unrelated files are left alone and not taken for checkpoints */
    char other[600];
    snprintf(other, sizeof other, "%s/ckpt-notes.txt", dir);
    FILE *f = fopen(other, "w");
    cr_assert_not_null(f);
    fputs("x", f);
    fclose(f);
    save_step(700, 1);
    cr_assert_eq(gpt_ckpt_list(dir, steps, 8, err, sizeof err), 1);
    cr_assert_eq(steps[0], 700);
    cr_assert_eq(access(other, F_OK), 0);
}

Test(gpt_checkpoint, mismatch_on_resume_is_an_error) {
    save_step(7, 0);
    model_t got;
    meta_t m;
    gpt_ckpt_buffer_t b[3];
    buffers(&got, b);
    uint64_t step = 0;

    b[1].name = "adam_v";
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 -1);
    cr_assert_not_null(strstr(err, "buffer 1 is 'adam_m'"), "%s", err);
    cr_assert_not_null(strstr(err, "this run has 'adam_v'"), "%s", err);

    buffers(&got, b);
    b[2].bytes = 36;
    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 -1);
    cr_assert_not_null(strstr(err, "of 37 bytes in the file"), "%s", err);

    buffers(&got, b);
    cr_assert_eq(gpt_ckpt_resume(dir, b, 2, &m, sizeof m, NULL, &step, NULL, 0, err, sizeof err),
                 -1);
    cr_assert_not_null(strstr(err, "3 buffers in the file, this run has 2"), "%s", err);

    cr_assert_eq(gpt_ckpt_resume(dir, b, 3, &m, sizeof m - 8, NULL, &step, NULL, 0, err,
                                 sizeof err), -1);
    cr_assert_not_null(strstr(err, "metadata"), "%s", err);
    cr_assert_eq(step, 0, "nothing loaded");
}

Test(gpt_checkpoint, bad_arguments_are_named) {
    float w[4];
    gpt_ckpt_buffer_t b[2] = {{"w", w, sizeof w}, {"w", w, sizeof w}};
    cr_assert_eq(gpt_ckpt_save(dir, 1, b, 2, NULL, 0, NULL, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "'w' given twice"), "%s", err);
    b[1] = (gpt_ckpt_buffer_t){"", w, sizeof w};
    cr_assert_eq(gpt_ckpt_save(dir, 1, b, 2, NULL, 0, NULL, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "buffer 1"), "%s", err);
    b[1] = (gpt_ckpt_buffer_t){"v", NULL, 8};
    cr_assert_eq(gpt_ckpt_save(dir, 1, b, 2, NULL, 0, NULL, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "'v': NULL pointer"), "%s", err);
    cr_assert_eq(gpt_ckpt_save(dir, 1, b, 1, NULL, 8, NULL, err, sizeof err), -1);
    cr_assert_not_null(strstr(err, "metadata"), "%s", err);
    uint64_t steps[1];
    cr_assert_eq(gpt_ckpt_list(dir, steps, 1, err, sizeof err), 0, "nothing was written");
}
