/*
 * test_gpt_trainer.c -- uvmrt-gpt as a user meets it, run by path on the sim backend
 * (no GPU, no arithmetic: the schedule, the data, the checkpoints and the flags are
 * real; losses are not), checked by exit status, output and the files it writes.
 *
 *  - flags: the shared ones (examples/common) and its own in --help; bad values and
 *    contradictory combinations exit 2 naming the flag;
 *  - data: --data shards and --text files are read on sim too; a bad file (magic,
 *    version, truncation, a token >= --vocab, no match, a missing or too short text)
 *    exits 1 naming the file and what was wrong;
 *  - validation: a pass every --val-every steps and after the last, in --result-json;
 *  - checkpoints: written every --checkpoint-every steps and after the last, the
 *    newest --keep kept; --resume continues at the saved step with the data position
 *    an uninterrupted run has there, its loss log continuing the first one's; refused
 *    (exit 1, naming the flag) for another shape; a corrupt newest file is skipped;
 *    an empty directory starts at step 1; SIGTERM saves the step under way and stops;
 *  - checkpoints and other runs (issue 21): a new run refuses a directory holding
 *    another run's checkpoints (--overwrite-checkpoints replaces them after its first
 *    save); --keep prunes only the run's own, never a file it cannot read; --resume
 *    that finds checkpoints but can use none (corrupt, truncated, a directory, a
 *    checkpoint it may not read) exits 1 naming each; it orders by the step a file
 *    holds, not its name, and a FIFO does not hang it; an unusable --checkpoint DIR
 *    fails before step 1;
 *  - the progress line's fields, --log-level, an unwritable output (exit 1);
 *  - the arithmetic on sim: a small model trains on the CPU reference (the loss falls
 *    from ln 256, --sample prints, the same losses for any --cpu-layers/--recompute,
 *    step 1's gradients those of gpt_ref_loss to bf16's precision); a large shape
 *    says why not and writes null losses;
 *  - where AdamW runs and which blocks recompute: --cpu-layers K and --recompute N
 *    (bad values and contradictions exit 2 naming the flags; explicit values reach
 *    the result JSON and change what is allocated and declared); auto: the values
 *    chosen run the least step time of every candidate run explicitly, on sim the
 *    run takes what was predicted and the review does not re-plan, an explicit value
 *    leaves its knob out.
 *
 * The program's path comes from UVMRT_GPT_PATH (build tree) or UVMRT_GPT.
 */
#define _GNU_SOURCE
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "checkpoint.h"
#include "data.h"
#include "gpt_ref.h"
#include "gpt_tokens.h"
#include "helpers.h"

static const char *gpt_path(void) {
    const char *p = getenv("UVMRT_GPT");
    return p && *p ? p : UVMRT_GPT_PATH;
}

/* A small model that runs in milliseconds on sim. */
#define SMALL "--backend sim --layers 2 --channels 128 --heads 2 --batch 2 --seq 64 -q"

static char out[1 << 17]; /* the last run's stdout and stderr */
static char gpt_env[512];  /* VAR=value for the next gpt() run only ("": none) */
static char dir[256];      /* this test's scratch directory */

static void scratch(void) {
    snprintf(dir, sizeof dir, "/tmp/uvmrt-test-gpt-trainer-%d", (int)getpid());
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    cr_assert_eq(system(cmd), 0);
}

static void scratch_done(void) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)system(cmd);
}

/* Runs "'uvmrt-gpt' ARGS 2>&1" (clean UVMRT_* environment, killed after 300 s);
 * returns the exit status (-1 when it did not exit), its output in out. */
static int gpt(const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s timeout 300 '%s' %s 2>&1", gpt_env, gpt_path(), args);
    gpt_env[0] = '\0';
    env_clear_uvmrt();
    char *text;
    int status = run_capture(cmd, &text);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    return status;
}

static json_t *json_file(const char *path) {
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    cr_assert(j != NULL, "%s: %s\n%s", path, err.text, out);
    return j;
}

static long long jint(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_integer(v), "result JSON: %s is not an integer", key);
    return (long long)json_integer_value(v);
}

/* A token file of n tokens, token i = (i * 7 + salt) % mod. */
static void tokens_file(const char *name, int n, int salt, int mod) {
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    uint16_t *t = malloc((size_t)n * sizeof *t);
    cr_assert(t != NULL);
    for (int i = 0; i < n; i++)
        t[i] = (uint16_t)((i * 7 + salt) % mod);
    cr_assert_eq(gpt_data_write_tokens(path, t, (uint64_t)n, err, sizeof err), 0, "%s", err);
    free(t);
}

/* Overwrites bytes [at, at + n) of dir/name with bytes (or truncates at `at` when
 * bytes is NULL). */
static void file_patch(const char *name, long at, const void *bytes, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (bytes == NULL) {
        cr_assert_eq(truncate(path, at), 0);
        return;
    }
    FILE *f = fopen(path, "r+b");
    cr_assert(f != NULL, "%s", path);
    cr_assert_eq(fseek(f, at, SEEK_SET), 0);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static int file_exists(const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ----------------------------------------------------------------------------
 * flags */

Test(gpt_trainer, help_lists_shared_and_own_flags) {
    cr_assert_eq(gpt("--help"), 0, "%s", out);
    static const char *const flags[] = {
        "--steps", "--lr", "--seed", "--budget", "--policy", "--backend", "--profile",
        "--optimizer-on", "--report", "--trace", "--loss-log", "--result-json", "--quiet",
        "--log-level", "--version", "--data", "--val ", "--text", "--val-every", "--val-batches",
        "--checkpoint ", "--checkpoint-every", "--keep", "--resume", "--overwrite-checkpoints",
        "--stop-at", "--sample ",
        "--sample-every", "--top-k", "--prompt", "--tokens", "--depth", "--recompute"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        cr_expect(strstr(out, flags[k]) != NULL, "--help lacks %s", flags[k]);
    cr_assert_eq(gpt("--version"), 0);
    cr_expect(strstr(out, "uvmrt-gpt (uvmrt) ") == out, "--version said: %s", out);
}

Test(gpt_trainer, bad_usage_exits_2_naming_the_flag) {
    static const struct {
        const char *args, *named;
    } bad[] = {
        {"--val v.bin", "--val"},
        {"--text t.txt --data d.bin", "--data and --text"},
        {"--text t.txt --vocab 1000", "--vocab 1000"},
        {"--text t.txt --tokens cycle", "--tokens"},
        {"--val-every 5", "--val-every"},
        {"--resume", "--resume"},
        {"--checkpoint-every 5", "--checkpoint-every"},
        {"--keep 2", "--keep"},
        {"--overwrite-checkpoints", "--overwrite-checkpoints without --checkpoint"},
        {"--steps 4 --stop-at 5", "--stop-at 5"},
        {"--top-k 5", "--top-k"},
        {"--sample-every 2", "--sample-every"},
        {"--prompt hello --sample 3", "--prompt"},
        {"--text t.txt --sample 3 --prompt ''", "--prompt ''"},
        {"--sample 0", "--sample '0'"},
        {"--sample 3 --top-k 60000", "--top-k 60000"},
        {"--seed 0x10", "--seed '0x10'"},
        {"--log-level loud", "--log-level 'loud'"},
        {"--policy fast", "--policy 'fast'"},
        {"--data ''", "--data ''"},
        {"--heads 3", "--heads 3"},
        /* SMALL has 2 blocks, so 4 layers (embedding, blocks, head) */
        {"--cpu-layers -1", "--cpu-layers '-1'"},
        {"--cpu-layers x", "--cpu-layers 'x'"},
        {"--cpu-layers 5", "--cpu-layers '5': expected a number of layers"},
        {"--cpu-layers ''", "--cpu-layers ''"},
        {"--cpu-layers 2 --optimizer-on gpu", "--cpu-layers 2 with --optimizer-on gpu"},
        {"--optimizer-on cpu --cpu-layers 3", "--cpu-layers 3 with --optimizer-on cpu"},
        {"--optimizer-on gpu --cpu-layers auto", "--cpu-layers auto with --optimizer-on gpu"},
        {"--optimizer-on cpu --cpu-layers auto", "--cpu-layers auto with --optimizer-on cpu"},
        {"--optimizer-on both", "--optimizer-on 'both'"},
        {"--recompute 3", "--recompute '3': expected none, all, a number of blocks in 0..2"},
        {"--recompute some", "--recompute 'some'"},
        {"--recompute -2", "--recompute '-2'"},
        {"--attention flash", "--attention 'flash': expected auto, cudnn or mma"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int st = gpt("%s %s", SMALL, bad[k].args);
        cr_expect_eq(st, 2, "'%s' exited %d, expected 2:\n%s", bad[k].args, st, out);
        cr_expect(strstr(out, bad[k].named) != NULL, "'%s': the message does not name %s:\n%s",
                  bad[k].args, bad[k].named, out);
    }
}

/* Several processes would each train the whole model (README: Several GPUs (in
 * progress)): a launcher's variables saying so, or contradicting themselves, exit 2. */
Test(gpt_trainer, several_processes_are_refused_until_built) {
    snprintf(gpt_env, sizeof gpt_env, "RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=h "
             "MASTER_PORT=9");
    int st = gpt("%s --steps 1", SMALL);
    cr_assert_eq(st, 2, "exited %d:\n%s", st, out);
    cr_assert(strstr(out, "launched as rank 1 of 2 (torchrun): training on several GPUs is not "
                     "built yet") != NULL, "%s", out);
    snprintf(gpt_env, sizeof gpt_env, "RANK=1 WORLD_SIZE=2");
    st = gpt("%s --steps 1", SMALL);
    cr_assert_eq(st, 2, "exited %d:\n%s", st, out);
    cr_assert(strstr(out, "LOCAL_RANK") != NULL, "%s", out);
    /* one process, launched or in an sbatch script of several tasks: trains */
    snprintf(gpt_env, sizeof gpt_env, "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0");
    st = gpt("%s --steps 1", SMALL);
    cr_assert_eq(st, 0, "exited %d:\n%s", st, out);
    snprintf(gpt_env, sizeof gpt_env, "SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_LOCALID=0");
    st = gpt("%s --steps 1", SMALL);
    cr_assert_eq(st, 0, "exited %d:\n%s", st, out);
}

Test(gpt_trainer, progress_line_has_every_field) {
    cr_assert_eq(gpt(SMALL " --steps 2"), 0, "%s", out);
    const char *line = strstr(out, "step 2/2 ");
    cr_assert(line != NULL, "no progress line for step 2:\n%s", out);
    static const char *const fields[] = {"loss ", " ms ", " tokens/s ", " TFLOP/s ", "MFU ",
                                         "in ", " GB ", "out ", "faults ", "ETA "};
    const char *end = strchr(line, '\n');
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        const char *f = strstr(line, fields[k]);
        cr_expect(f != NULL && f < end, "the progress line lacks '%s': %.*s", fields[k],
                  (int)(end - line), line);
    }
}

/* Without a usable GPU (and no --backend) it falls back to the sim with consumer-8g, the
 * profile of every example program's fallback and of --backend sim. */
Test(gpt_trainer, fallback_uses_the_one_default_sim_profile) {
    const char *args = "--layers 2 --channels 128 --heads 2 --batch 2 --seq 64 --steps 2 -q";
    cr_assert_eq(gpt("%s", args), 0, "%s", out);
    if (strstr(out, "no usable GPU") == NULL)
        cr_skip_test("a GPU ran it: no fallback to look at");
    cr_expect(strstr(out, "running on the sim backend with profile consumer-8g") != NULL, "%s",
              out);
    cr_assert_eq(gpt("--backend sim %s", args), 0, "%s", out);
    cr_expect(strstr(out, "on sim, profile consumer-8g") != NULL, "%s", out);
}

/* uvmrt-gpt declares the uvmrt steps it will make, so uvmrt-top shows its step count and
 * an ETA: one per training step and val_n per validation pass (--val-every 10, 2
 * batches: 200000 + 20000 * 2). Read from the running trainer with uvmrt-top --json. */
Test(gpt_trainer, declares_its_step_count_for_uvmrt_top) {
    char cmd[2048];
    env_clear_uvmrt();
    snprintf(cmd, sizeof cmd, "'%s' %s --text '%s' --steps 200000 --val-every 10 "
             "--val-batches 2 >/dev/null 2>&1 & echo $!", gpt_path(), SMALL, GPT_CORPUS_PATH);
    char *text;
    cr_assert_eq(run_capture(cmd, &text), 0);
    int pid = atoi(text);
    free(text);
    cr_assert_gt(pid, 0);
    long long total = -1;
    for (int tries = 0; tries < 1000 && total < 0; tries++) { /* up to 20 s to start */
        snprintf(cmd, sizeof cmd, "'%s' --once --json -p %d", UVMRT_TOP_PATH, pid);
        cr_assert_geq(run_capture(cmd, &text), 0);
        json_t *j = json_loads(text, JSON_DISABLE_EOF_CHECK, NULL);
        free(text);
        json_t *p = json_array_get(json_object_get(j, "processes"), 0);
        if (json_is_integer(json_object_get(p, "total_steps")))
            total = json_integer_value(json_object_get(p, "total_steps"));
        json_decref(j);
        if (total < 0)
            usleep(20 * 1000);
    }
    kill(pid, SIGTERM);
    cr_assert_eq(total, 240000, "uvmrt-top shows total_steps %lld", total);
}

Test(gpt_trainer, log_level_reaches_the_library) {
    cr_assert_eq(gpt(SMALL " --steps 2 --log-level debug"), 0, "%s", out);
    cr_expect(strstr(out, "uvmrt debug: ") || strstr(out, "uvmrt info: "), "%s", out);
    cr_assert_eq(gpt(SMALL " --steps 2"), 0, "%s", out);
    cr_expect(!strstr(out, "uvmrt debug: ") && !strstr(out, "uvmrt info: "), "%s", out);
}

Test(gpt_trainer, an_output_that_cannot_be_written_exits_1) {
    int st = gpt(SMALL " --steps 2 --result-json /nonexistent-dir/r.json");
    cr_expect_eq(st, 1, "exited %d:\n%s", st, out);
    cr_expect(strstr(out, "--result-json") && strstr(out, "/nonexistent-dir/r.json"), "%s", out);
}

/* Every output is checked before step 1, by the report rules, and none hangs (issue
 * 21, items 4, 7 and 10): a folder that takes no file, a file where a folder should
 * be, a FIFO with no reader (never replaced), the environment's outputs, and a
 * UVMRT_REPORT that fails when it is written at the end. */
Test(gpt_trainer, outputs_are_checked_before_step_1_and_never_hang) {
    scratch();
    char afile[300], fifo[300];
    snprintf(afile, sizeof afile, "%s/afile", dir);
    FILE *f = fopen(afile, "w");
    cr_assert(f != NULL);
    fclose(f);
    static const char *const flags[] = {"--loss-log", "--result-json", "--trace", "--dump-weights"};
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
        int st = gpt(SMALL " --steps 2 %s %s/x", flags[k], afile);
        cr_expect_eq(st, 1, "%s under a file: exited %d:\n%s", flags[k], st, out);
        cr_expect(strstr(out, flags[k]) && strstr(out, "is a regular file, not a folder") &&
                  strstr(out, "nothing was run") && !strstr(out, "step 1/"), "%s", out);
    }
    int st = gpt(SMALL " --steps 2 --loss-log /proc/uvmrt-x");
    cr_expect_eq(st, 1, "exited %d:\n%s", st, out);
    cr_expect(strstr(out, "/proc/uvmrt-x") && !strstr(out, "step 1/"), "%s", out);

    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    st = gpt(SMALL " --steps 2 --loss-log %s", fifo);
    cr_expect_eq(st, 1, "--loss-log FIFO: exited %d:\n%s", st, out);
    cr_expect(strstr(out, "FIFO with no reader") && !strstr(out, "step 1/"), "%s", out);
    st = gpt(SMALL " --steps 2 --result-json %s", fifo);
    cr_expect_eq(st, 1, "--result-json FIFO: exited %d:\n%s", st, out);
    cr_expect(strstr(out, "--result-json") && strstr(out, "FIFO with no reader"), "%s", out);
    struct stat sb;
    cr_expect(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");

    snprintf(gpt_env, sizeof gpt_env, "UVMRT_RECORD=%s/nodir/r.json", dir);
    st = gpt(SMALL " --steps 2");
    cr_expect_eq(st, 1, "UVMRT_RECORD in a missing folder: exited %d:\n%s", st, out);
    cr_expect(strstr(out, "UVMRT_RECORD") && strstr(out, "does not exist") && !strstr(out, "step 1/"), "%s", out);
    snprintf(gpt_env, sizeof gpt_env, "UVMRT_REPORT=json:/dev/full");
    st = gpt(SMALL " --steps 2");
    cr_expect_eq(st, 1, "UVMRT_REPORT=json:/dev/full: exited %d:\n%s", st, out);
    cr_expect(strstr(out, "/dev/full") && strstr(out, "No space left on device"), "%s", out);
    scratch_done();
}

/* ----------------------------------------------------------------------------
 * data */

Test(gpt_trainer, token_shards_and_validation_passes) {
    scratch();
    tokens_file("train_000.bin", 3000, 1, 500);
    tokens_file("train_001.bin", 2000, 2, 500);
    tokens_file("val_000.bin", 700, 3, 500); /* 5 batches of 2 x 64 + 1 */
    int st = gpt(SMALL " --vocab 512 --steps 5 --data '%s/train_*.bin' --val %s/val_000.bin "
                 "--val-every 2 --val-batches 10 --result-json %s/r.json", dir, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "2 shard(s), 5000 training tokens") != NULL, "%s", out);
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *r = json_file(path);
    json_t *val = json_object_get(r, "val");
    cr_assert_eq(json_array_size(val), 3, "validation passes after steps 2, 4, 5 expected");
    static const int at[3] = {2, 4, 5};
    for (size_t k = 0; k < 3; k++)
        cr_expect_eq(jint(json_array_get(val, k), "step"), at[k]);
    cr_expect(strstr(out, "5 batches per pass") != NULL, "--val-batches not capped by the "
              "validation data:\n%s", out);
    json_t *data = json_object_get(r, "data");
    cr_expect_str_eq(json_string_value(json_object_get(data, "source")), "data");
    /* every batch is 128 tokens; 5 steps within one epoch of 39 batches */
    cr_expect_eq(jint(data, "epoch"), 0);
    json_decref(r);
    scratch_done();
}

Test(gpt_trainer, bad_token_files_exit_1_naming_the_file) {
    scratch();
    tokens_file("good.bin", 1000, 0, 500);
    char cmd[1024];
    static const char *const names[] = {"magic.bin", "version.bin", "short.bin", "big.bin"};
    for (int k = 0; k < 4; k++) {
        snprintf(cmd, sizeof cmd, "cp %s/good.bin %s/%s", dir, dir, names[k]);
        cr_assert_eq(system(cmd), 0);
    }
    int32_t word = 123;
    file_patch("magic.bin", 0, &word, 4);
    word = 2;
    file_patch("version.bin", 4, &word, 4);
    file_patch("short.bin", 1024 + 2 * 999, NULL, 0);
    uint16_t big = 600;
    file_patch("big.bin", 1024 + 2 * 10, &big, 2);
    static const char *const why[] = {"bad magic 123", "version 2", "truncated",
                                      "token 600 at index 10"};
    for (int k = 0; k < 4; k++) {
        int st = gpt(SMALL " --vocab 512 --steps 2 --data %s/%s", dir, names[k]);
        cr_expect_eq(st, 1, "%s: exited %d:\n%s", names[k], st, out);
        cr_expect(strstr(out, names[k]) && strstr(out, why[k]), "%s: expected '%s':\n%s",
                  names[k], why[k], out);
    }
    /* a bad validation file too, and no match */
    int st = gpt(SMALL " --vocab 512 --steps 2 --data %s/good.bin --val %s/big.bin", dir, dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "--val") && strstr(out, "big.bin"), "%s", out);
    st = gpt(SMALL " --vocab 512 --steps 2 --data '%s/none_*.bin'", dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "--data") && strstr(out, "no file matches"), "%s", out);
    st = gpt(SMALL " --vocab 512 --steps 2 --data %s/good.bin --val '%s/none_*.bin'", dir, dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "--val") && strstr(out, "no file matches"), "%s", out);
    /* --text: a missing file, and one too short for a batch of B*T+1 bytes */
    st = gpt(SMALL " --steps 2 --text %s/missing.txt", dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "missing.txt") != NULL, "%s", out);
    snprintf(cmd, sizeof cmd, "printf 'hello world' > %s/tiny.txt", dir);
    cr_assert_eq(system(cmd), 0);
    st = gpt(SMALL " --steps 2 --text %s/tiny.txt", dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "tiny.txt") != NULL, "%s", out);
    cr_expect(strstr(out, "Segmentation") == NULL && strstr(out, "Abort") == NULL, "%s", out);
    scratch_done();
}

/* ----------------------------------------------------------------------------
 * the arithmetic on sim: the CPU reference computes a small shape, none a large one */

/* A model small enough for the CPU reference (gpt_simref.c): about 5e7 parameters x
 * tokens, tens of milliseconds a step. */
#define TINY "--backend sim --layers 2 --channels 64 --heads 4 --batch 4 --seq 64 -q"

/* The losses array of a result JSON as doubles (n of them); NaN for a non-number. */
static int losses_get(json_t *r, double *v, int cap) {
    json_t *a = json_object_get(r, "losses");
    cr_assert(json_is_array(a), "no losses array");
    int n = (int)json_array_size(a);
    for (int i = 0; i < n && i < cap; i++) {
        json_t *e = json_array_get(a, (size_t)i);
        v[i] = json_is_number(e) ? json_number_value(e) : NAN;
    }
    return n;
}

/* On sim a small model trains on the CPU: the note says so, the loss falls from about
 * ln 256 over a few steps, the loss log and the JSON carry the same numbers, the
 * validation loss is a number and --sample prints the prompt and what follows it. */
Test(gpt_trainer, sim_small_model_trains_and_samples_on_the_cpu) {
    scratch();
    int st = gpt(TINY " --steps 8 --lr 1e-3 --text %s --sample 12 --top-k 5 --prompt 'The ' "
                 "--result-json %s/r.json --loss-log %s/loss.txt",
                 GPT_CORPUS_PATH, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "sim: computing on the CPU with the reference implementation (slow)"),
              "%s", out);
    cr_expect(strstr(out, "no arithmetic") == NULL, "%s", out);
    cr_expect(strstr(out, "sample after step 8 (top-k, 12 tokens") != NULL, "no sample:\n%s", out);
    cr_expect(strstr(out, "\nThe ") != NULL, "the sample does not start with the prompt:\n%s",
              out);
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *r = json_file(path);
    double loss[8];
    cr_assert_eq(losses_get(r, loss, 8), 8);
    for (int i = 0; i < 8; i++)
        cr_assert(isfinite(loss[i]) && loss[i] > 0, "loss %d: %g\n%s", i + 1, loss[i], out);
    cr_expect(fabs(loss[0] - log(256.0)) < 0.2, "step 1's loss %g, expected about ln 256", loss[0]);
    cr_expect(loss[7] < loss[0] - 0.3, "the loss did not fall: %g -> %g\n%s", loss[0], loss[7],
              out);
    cr_expect((loss[5] + loss[6] + loss[7]) < (loss[0] + loss[1] + loss[2]) - 0.6,
              "the loss did not fall: %g %g %g ... %g %g %g", loss[0], loss[1], loss[2], loss[5],
              loss[6], loss[7]);
    cr_expect(json_is_true(json_object_get(r, "arithmetic")));
    cr_expect_str_eq(json_string_value(json_object_get(r, "arithmetic_on")), "cpu-reference");
    json_t *val = json_array_get(json_object_get(r, "val"), 0);
    cr_expect(json_is_number(json_object_get(val, "loss")), "the validation loss is no number");
    snprintf(path, sizeof path, "%s/loss.txt", dir);
    char *log = file_slurp(path);
    cr_assert(log != NULL);
    const char *p = log;
    for (int i = 0; i < 8; i++) {
        char *end;
        long stepno = strtol(p, &end, 10);
        double x = strtod(end, &end);
        cr_expect(stepno == i + 1 && fabs(x - loss[i]) <= 1e-9 * loss[i],
                  "loss log line %d: %ld %.17g, JSON %.17g", i + 1,
                  stepno, x, loss[i]);
        p = end;
    }
    free(log);
    json_decref(r);
    scratch_done();
}

/* Where the AdamW runs and which blocks recompute change the schedule, not the
 * numbers: the same losses to the bit (uvmrt_adamw_cpu on either side; a recompute
 * makes the same rounded activations), also when a changed choice applies mid-run. */
Test(gpt_trainer, sim_losses_do_not_depend_on_cpu_layers_or_recompute) {
    static const char *const knobs[] = {"--cpu-layers 0 --recompute none",
                                        "--cpu-layers 4 --recompute all",
                                        "--cpu-layers 1 --recompute 1", "(auto, re-planned)"};
    char *first = NULL;
    scratch();
    for (size_t k = 0; k < sizeof knobs / sizeof knobs[0]; k++) {
        /* the last: auto, then a changed choice applied after step 4 (the test hook) */
        if (k == 3)
            snprintf(gpt_env, sizeof gpt_env, "UVMRT_TEST_REPLAN=3,1");
        int st = gpt(TINY " --steps 6 --text %s %s --loss-log %s/loss.txt", GPT_CORPUS_PATH,
                     k == 3 ? "" : knobs[k], dir);
        cr_expect(k < 3 || strstr(out, "UVMRT_TEST_REPLAN (a test hook): applying"), "%s", out);
        cr_assert_eq(st, 0, "%s: %s", knobs[k], out);
        char path[512];
        snprintf(path, sizeof path, "%s/loss.txt", dir);
        char *log = file_slurp(path);
        cr_assert(log != NULL && strstr(log, "null") == NULL, "%s", log ? log : "");
        if (first == NULL)
            first = log;
        else {
            cr_expect_str_eq(log, first, "%s changed the losses", knobs[k]);
            free(log);
        }
    }
    free(first);
    scratch_done();
}

/* Step 1's loss and gradients against gpt_ref_loss on the same weights and tokens: the
 * trainer rounds its working copies and activations to bf16 as the GPU does, so they
 * agree to bf16's precision, not to the bit. */
Test(gpt_trainer, sim_gradients_match_the_reference) {
    scratch();
    int st = gpt("--backend sim --layers 2 --channels 32 --heads 2 --vocab 64 --batch 2 --seq 16 "
                 "-q --steps 1 --cpu-layers 0 --recompute none --dump-weights %s/w.bin "
                 "--dump-grads %s/g.bin --result-json %s/r.json",
                 dir, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    gpt_shape_t shape = {.V = 64, .Vp = 128, .maxT = 1024, .L = 2, .C = 32, .NH = 2};
    size_t n = gpt_num_params(&shape);
    float *w = malloc(n * sizeof *w), *g = malloc(n * sizeof *g), *ref = malloc(n * sizeof *ref);
    cr_assert(w && g && ref);
    const char *names[2] = {"w.bin", "g.bin"};
    float *dst[2] = {w, g};
    for (int k = 0; k < 2; k++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        FILE *f = fopen(path, "rb");
        cr_assert(f != NULL, "%s", path);
        cr_assert(fseek(f, 1024, SEEK_SET) == 0 && fread(dst[k], sizeof(float), n, f) == n,
                  "%s: shorter than %zu parameters", path, n);
        fclose(f);
    }
    int inp[32], tgt[32];
    gpt_tokens_random(inp, tgt, 2, 16, 64, 1, 0); /* --seed 1, step 1 */
    double loss = gpt_ref_loss(&shape, w, inp, tgt, 2, 16, ref);
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *r = json_file(path);
    double got;
    cr_assert_eq(losses_get(r, &got, 1), 1);
    cr_expect(fabs(got - loss) < 0.01 * loss, "step 1's loss %.6f, the reference's %.6f", got,
              loss);
    double d2 = 0.0, r2 = 0.0;
    for (size_t k = 0; k < n; k++) {
        d2 += ((double)g[k] - ref[k]) * ((double)g[k] - ref[k]);
        r2 += (double)ref[k] * ref[k];
    }
    cr_expect(r2 > 0 && sqrt(d2 / r2) < 0.05,
              "the gradient differs from the reference's by %.3g of its norm", sqrt(d2 / r2));
    json_decref(r);
    free(w), free(g), free(ref);
    scratch_done();
}

/* A shape over the CPU reference's limit computes nothing: the output says why, the
 * progress line shows "-", and the loss log and the result JSON say null, never 0. */
Test(gpt_trainer, sim_large_shape_says_why_and_writes_null) {
    scratch();
    int st = gpt(SMALL " --steps 2 --sample 4 --result-json %s/r.json --loss-log %s/loss.txt",
                 dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "sim: no arithmetic:") && strstr(out, "over the CPU reference's"),
              "%s", out);
    cr_expect(strstr(out, "loss -") != NULL, "%s", out);
    cr_expect(strstr(out, "sampling needs the arithmetic") != NULL, "%s", out);
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    json_t *r = json_file(path);
    json_t *a = json_object_get(r, "losses");
    cr_assert(json_is_array(a) && json_array_size(a) == 2);
    for (size_t i = 0; i < 2; i++)
        cr_expect(json_is_null(json_array_get(a, i)), "loss %zu is not null", i + 1);
    cr_expect(json_is_false(json_object_get(r, "arithmetic")));
    cr_expect(json_is_null(json_object_get(r, "arithmetic_on")));
    snprintf(path, sizeof path, "%s/loss.txt", dir);
    char *log = file_slurp(path);
    cr_assert(log != NULL);
    cr_expect_str_eq(log, "1 null\n2 null\n");
    free(log);
    json_decref(r);
    scratch_done();
}

/* A validation or sampling step begins like a training step; uvmrt follows a
 * recorded plan while the calls match it, and a training step run on a validation
 * plan would lose the activations its backward reads (that plan's next use of them
 * is a write, so they may be discarded). Each side step must leave the training
 * record at its first call, and the training step after it the side record. */
Test(gpt_trainer, validation_steps_never_run_on_the_training_plan) {
    int st = gpt(SMALL " --steps 5 --text %s --val-every 2 --val-batches 2 --sample 3 "
                 "--sample-every 3 --log-level info", GPT_CORPUS_PATH);
    cr_assert_eq(st, 0, "%s", out);
    int left = 0;
    for (const char *p = out; (p = strstr(p, "left the recorded sequence at call ")) != NULL;
         p++, left++)
        /* or a sampling step on a validation pass's plan, at the head: its call
         * differs there, and it reads a subset of what validation's head reads */
        cr_expect(strncmp(p + strlen("left the recorded sequence at call "), "0 ", 2) == 0 ||
                      strncmp(strchr(p, '('), "(layer 'head' forward)", 22) == 0,
                  "a step left the recorded sequence after its first call: %.120s", p);
    /* validation after steps 2, 4, 5 and the training steps after the first two */
    cr_expect(left >= 5, "%d steps left the record, expected at least 5:\n%s", left, out);
}

/* ----------------------------------------------------------------------------
 * checkpoints */

#define CKPT_RUN SMALL " --vocab 512 --steps 6 --data '%s/train_*.bin'"

static void shards(void) {
    tokens_file("train_000.bin", 400, 1, 500);  /* 3 batches of 2 x 64 + 1 */
    tokens_file("train_001.bin", 300, 2, 500);  /* 2 batches: epoch 1 starts at step 6 */
}

/* --checkpoint naming a regular file fails at start, before step 1, naming the path. */
Test(gpt_trainer, checkpoint_that_is_a_file_fails_before_step_1) {
    scratch();
    char path[512];
    snprintf(path, sizeof path, "%s/ck", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fclose(f);
    int st = gpt(SMALL " --vocab 512 --steps 2 --checkpoint %s", path);
    cr_expect_eq(st, 1, "exit %d:\n%s", st, out);
    cr_expect(strstr(out, path) && strstr(out, "not a directory"), "%s", out);
    cr_expect(strstr(out, "step 1/") == NULL, "a step ran:\n%s", out);
    scratch_done();
}

Test(gpt_trainer, checkpoints_are_written_and_the_newest_kept) {
    scratch();
    shards();
    int st = gpt(CKPT_RUN " --checkpoint %s/ck --checkpoint-every 2 --keep 2", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "checkpoint step 2: ") && strstr(out, "checkpoint step 6: "), "%s",
              out);
    cr_expect(!file_exists("%s/ck/ckpt-000000000002.bin", dir), "--keep 2 kept step 2");
    cr_expect(file_exists("%s/ck/ckpt-000000000004.bin", dir), "step 4 missing");
    cr_expect(file_exists("%s/ck/ckpt-000000000006.bin", dir), "step 6 missing");
    /* a whole, checksummed file of the step it is named after */
    char path[512], err[512];
    uint64_t step = 0;
    snprintf(path, sizeof path, "%s/ck/ckpt-000000000006.bin", dir);
    cr_expect_eq(gpt_ckpt_verify(path, &step, err, sizeof err), 0, "%s", err);
    cr_expect_eq(step, 6);
    uint64_t steps[8];
    snprintf(path, sizeof path, "%s/ck", dir);
    cr_expect_eq(gpt_ckpt_list(path, steps, 8, err, sizeof err), 2, "%s", err);
    /* every step's checkpoint at the end only: one save after the last step */
    st = gpt(CKPT_RUN " --stop-at 3 --checkpoint %s/end", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(file_exists("%s/end/ckpt-000000000003.bin", dir), "no checkpoint after --stop-at");
    scratch_done();
}

Test(gpt_trainer, resume_continues_the_steps_and_the_data) {
    scratch();
    shards();
    /* uninterrupted: 6 steps, crossing into the second epoch */
    int st = gpt(CKPT_RUN " --result-json %s/full.json --loss-log %s/full.log", dir, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    /* interrupted after 4, then resumed */
    st = gpt(CKPT_RUN " --stop-at 4 --checkpoint %s/ck --checkpoint-every 2 --loss-log %s/a.log",
             dir, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    st = gpt(CKPT_RUN " --resume --checkpoint %s/ck --result-json %s/res.json --loss-log %s/b.log",
             dir, dir, dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "step 4 done, continuing at step 5 of 6") != NULL, "%s", out);
    cr_expect(strstr(out, "step 4/6") == NULL && strstr(out, "step 5/6") != NULL, "%s", out);
    char path[512];
    snprintf(path, sizeof path, "%s/full.json", dir);
    json_t *full = json_file(path);
    snprintf(path, sizeof path, "%s/res.json", dir);
    json_t *res = json_file(path);
    cr_expect_eq(jint(res, "first_step"), 5);
    cr_expect_eq(json_array_size(json_object_get(res, "losses")), 2);
    json_t *fd = json_object_get(full, "data"), *rd = json_object_get(res, "data");
    cr_expect(jint(fd, "epoch") == 1, "the uninterrupted run did not reach epoch 1");
    cr_expect(jint(fd, "epoch") == jint(rd, "epoch") && jint(fd, "shard") == jint(rd, "shard") &&
                  jint(fd, "offset") == jint(rd, "offset"),
              "data position after the resumed run (%lld, %lld, %lld) differs from the "
              "uninterrupted run's (%lld, %lld, %lld)", jint(rd, "epoch"), jint(rd, "shard"),
              jint(rd, "offset"), jint(fd, "epoch"), jint(fd, "shard"), jint(fd, "offset"));
    json_decref(full);
    json_decref(res);
    /* the loss logs: a.log + b.log is the uninterrupted one, step for step */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cat %s/a.log %s/b.log | cmp -s - %s/full.log", dir, dir, dir);
    cr_expect_eq(system(cmd), 0, "the loss logs do not concatenate to the uninterrupted one");
    /* resuming a finished run trains nothing */
    st = gpt(CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "nothing to train") != NULL, "%s", out);
    scratch_done();
}

/* A preempted job: SIGTERM finishes the step, saves it, stops with 128 + 15; the
 * resumed run goes on from the next step. */
Test(gpt_trainer, sigterm_saves_the_step_and_stops) {
    scratch();
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && { timeout -s KILL 200 '%s' " SMALL " --vocab 512 --steps 200000 "
             "--checkpoint ck >sig.log 2>&1 & p=$!; "
             "for i in $(seq 1200); do grep -q '^step 3/' sig.log && break; sleep 0.1; done; "
             /* the trainer, not timeout: timeout would pass the signal on and then signal its
              * process group too, a second SIGTERM that can land after the handler reset */
             "pkill -TERM -P $p || kill -TERM $p; wait $p; echo $? >rc; }", dir, gpt_path());
    env_clear_uvmrt();
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char path[512];
    snprintf(path, sizeof path, "%s/rc", dir);
    char *rc = file_slurp(path);
    snprintf(path, sizeof path, "%s/sig.log", dir);
    char *log = file_slurp(path);
    cr_expect_eq(atoi(rc), 143, "exited %s after SIGTERM:\n%s", rc, log);
    const char *m = strstr(log, "stopped by signal 15 after step ");
    cr_assert(m != NULL, "no stop message:\n%.2000s", log);
    int step = atoi(m + strlen("stopped by signal 15 after step "));
    cr_expect(step >= 3, "stopped after step %d", step);
    cr_expect(file_exists("%s/ck/ckpt-%012d.bin", dir, step), "no checkpoint of step %d", step);
    free(rc);
    free(log);
    int st = gpt(SMALL " --vocab 512 --steps 200000 --stop-at %d --checkpoint %s/ck --resume",
                 step + 2, dir);
    cr_expect_eq(st, 0, "%s", out);
    char want[128];
    snprintf(want, sizeof want, "continuing at step %d of 200000", step + 1);
    cr_expect(strstr(out, want) != NULL, "expected '%s':\n%.3000s", want, out);
    scratch_done();
}

Test(gpt_trainer, resume_refuses_another_shape) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 2 --checkpoint %s/ck", dir, dir), 0, "%s", out);
    static const struct {
        const char *args, *named;
    } other[] = {
        {"--layers 3", "buffers"},        /* another parameter layout */
        {"--channels 256 --heads 4", "bytes"},
        {"--heads 4", "--heads"},          /* same sizes, another model */
        {"--batch 3", "--batch"},          /* the data position would mean other batches */
        {"--vocab 500", "--vocab"},     /* the same padded sizes */
    };
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
        int st = gpt(CKPT_RUN " %s --resume --checkpoint %s/ck", dir, other[k].args, dir);
        cr_expect_eq(st, 1, "'%s' exited %d:\n%s", other[k].args, st, out);
        cr_expect(strstr(out, "--resume") && strstr(out, other[k].named),
                  "'%s': expected a message naming '%s':\n%s", other[k].args, other[k].named, out);
    }
    scratch_done();
}

Test(gpt_trainer, resume_skips_a_corrupt_newest_and_starts_fresh_without_one) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 4 --checkpoint %s/ck --checkpoint-every 2", dir, dir),
                 0, "%s", out);
    uint64_t junk = 0x0123456789abcdefull;
    file_patch("ck/ckpt-000000000004.bin", 200, &junk, sizeof junk);
    int st = gpt(CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "continuing at step 3 of 6") != NULL, "the corrupt step 4 was not "
              "skipped for step 2:\n%s", out);
    st = gpt(CKPT_RUN " --resume --checkpoint %s/empty", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "starting at step 1") && strstr(out, "step 1/6"), "%s", out);
    scratch_done();
}

/* ----------------------------------------------------------------------------
 * checkpoints and other runs, odd entries, unusable directories (issue 21) */

#define LONG_RUN SMALL " --vocab 512 --steps 40 --data '%s/train_*.bin'"

/* gpt() killed after limit_s seconds, run through prefix ("setpriv ... ": as another
 * user; "": none). */
static int gpt_with(int limit_s, const char *prefix, const char *fmt, ...) {
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "timeout %d %s'%s' %s 2>&1", limit_s, prefix, gpt_path(), args);
    env_clear_uvmrt();
    char *text;
    int status = run_capture(cmd, &text);
    snprintf(out, sizeof out, "%s", text);
    free(text);
    return status;
}

static uint64_t ckpt_step(const char *name) {
    char path[512], err[512];
    uint64_t step = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cr_expect_eq(gpt_ckpt_verify(path, &step, err, sizeof err), 0, "%s", err);
    return step;
}

/* The case: a run without --resume in a directory holding an older run's
 * ckpt-10/20/30, saving every 5 steps to step 15, deleted its own ckpt-5 at once,
 * overwrote the older run's ckpt-10, and a later --resume continued the older run. */
Test(gpt_trainer, a_new_run_never_replaces_another_runs_checkpoints) {
    scratch();
    shards();
    cr_assert_eq(gpt(LONG_RUN " --checkpoint %s/ck --checkpoint-every 10 --stop-at 30", dir, dir),
                 0, "%s", out);
    int st = gpt(LONG_RUN " --checkpoint %s/ck --checkpoint-every 5 --stop-at 15", dir, dir);
    cr_expect_eq(st, 1, "a new run in another run's directory exited %d:\n%s", st, out);
    cr_expect(strstr(out, "ckpt-000000000030.bin") && strstr(out, "--resume") &&
                  strstr(out, "--overwrite-checkpoints"),
              "the refusal names the files and the ways out:\n%s", out);
    cr_expect(strstr(out, "step 1/40") == NULL, "steps ran before the refusal:\n%s", out);
    cr_expect_eq(ckpt_step("ck/ckpt-000000000010.bin"), 10);
    cr_expect_eq(ckpt_step("ck/ckpt-000000000020.bin"), 20);
    cr_expect_eq(ckpt_step("ck/ckpt-000000000030.bin"), 30);
    cr_expect(!file_exists("%s/ck/ckpt-000000000005.bin", dir));
    /* told to: this run's 5, 10 and 15 stay (--keep 3), the older run's go */
    st = gpt(LONG_RUN " --checkpoint %s/ck --checkpoint-every 5 --stop-at 15 "
             "--overwrite-checkpoints", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(file_exists("%s/ck/ckpt-000000000005.bin", dir), "its own step 5 was pruned");
    cr_expect(file_exists("%s/ck/ckpt-000000000015.bin", dir));
    cr_expect(!file_exists("%s/ck/ckpt-000000000020.bin", dir) &&
                  !file_exists("%s/ck/ckpt-000000000030.bin", dir),
              "the older run's checkpoints are still there");
    st = gpt(LONG_RUN " --resume --checkpoint %s/ck --stop-at 16", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "continuing at step 16 of 40") != NULL, "%s", out);
    scratch_done();
}

/* The other case: three corrupt higher-numbered files, and every new save
 * was deleted right after its "checkpoint step N" line. */
Test(gpt_trainer, keep_prunes_only_the_runs_own_readable_checkpoints) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 2 --checkpoint %s/ck --checkpoint-every 1", dir, dir),
                 0, "%s", out);
    for (int s = 100; s <= 102; s++) {
        char name[64];
        snprintf(name, sizeof name, "ck/ckpt-%012d.bin", s);
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "echo corrupt >'%s/%s'", dir, name);
        cr_assert_eq(system(cmd), 0);
    }
    int st = gpt(CKPT_RUN " --resume --checkpoint %s/ck --checkpoint-every 1 --keep 2", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "checkpoint step 6: ") != NULL, "%s", out);
    for (int s = 1; s <= 4; s++)
        cr_expect(!file_exists("%s/ck/ckpt-%012d.bin", dir, s), "--keep 2 kept step %d", s);
    cr_expect(file_exists("%s/ck/ckpt-000000000005.bin", dir) &&
                  file_exists("%s/ck/ckpt-000000000006.bin", dir),
              "the run's newest two were pruned");
    for (int s = 100; s <= 102; s++)
        cr_expect(file_exists("%s/ck/ckpt-%012d.bin", dir, s), "unreadable step %d pruned", s);
    scratch_done();
}

Test(gpt_trainer, resume_with_no_usable_checkpoint_exits_1_naming_each) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 4 --checkpoint %s/ck --checkpoint-every 2", dir, dir),
                 0, "%s", out);
    uint64_t junk = 0x0123456789abcdefull;
    file_patch("ck/ckpt-000000000004.bin", 200, &junk, sizeof junk);
    file_patch("ck/ckpt-000000000002.bin", 100, NULL, 0);
    char d[512];
    snprintf(d, sizeof d, "%s/ck/ckpt-000000000003.bin", dir);
    cr_assert_eq(mkdir(d, 0755), 0);
    int st = gpt(CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_expect_eq(st, 1, "a resume that could use no checkpoint exited %d:\n%s", st, out);
    cr_expect(strstr(out, "ckpt-000000000004.bin: the buffer table does not match") &&
                  strstr(out, "ckpt-000000000002.bin: truncated") &&
                  strstr(out, "ckpt-000000000003.bin: a directory"),
              "each file and why:\n%s", out);
    cr_expect(strstr(out, "none of the 3") != NULL, "%s", out);
    cr_expect(strstr(out, "step 1/6") == NULL, "started again at step 1:\n%s", out);
    /* an empty or missing directory still starts at step 1 (as documented) */
    st = gpt(CKPT_RUN " --resume --checkpoint %s/missing --stop-at 1", dir, dir);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "starting at step 1") != NULL, "%s", out);
    scratch_done();
}

/* A valid checkpoint the user may not read. chmod 000 does not stop root: as root the
 * trainer runs as uid/gid 65534 (setpriv), the test skipped without setpriv. */
Test(gpt_trainer, resume_of_an_unreadable_checkpoint_exits_1) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 2 --checkpoint %s/ck", dir, dir), 0, "%s", out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "chmod 0 '%s/ck/ckpt-000000000002.bin' && chmod 777 '%s/ck'", dir,
             dir);
    cr_assert_eq(system(cmd), 0);
    const char *prefix = "";
    if (geteuid() == 0) {
        if (system("setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null") != 0)
            cr_skip_test("running as root without a working setpriv to drop to uid 65534");
        prefix = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    }
    int st = gpt_with(300, prefix, CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_expect_eq(st, 1, "exited %d:\n%s", st, out);
    cr_expect(strstr(out, "ckpt-000000000002.bin: cannot open: Permission denied") != NULL,
              "%s", out);
    cr_expect(strstr(out, "step 1/6") == NULL, "started again at step 1:\n%s", out);
    scratch_done();
}

Test(gpt_trainer, resume_takes_the_newest_step_held_and_names_odd_entries) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 4 --checkpoint %s/ck --checkpoint-every 2", dir, dir),
                 0, "%s", out);
    char from[512], to[512];
    snprintf(from, sizeof from, "%s/ck/ckpt-000000000002.bin", dir);
    snprintf(to, sizeof to, "%s/ck/ckpt-000000000009.bin", dir);
    cr_assert_eq(rename(from, to), 0);
    snprintf(to, sizeof to, "%s/ck/ckpt-000000000008.bin", dir);
    cr_assert_eq(mkdir(to, 0755), 0);
    int st = gpt(CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "continuing at step 5 of 6") != NULL,
              "step 2 renamed to 9 was taken as the newest:\n%s", out);
    cr_expect(strstr(out, "ckpt-000000000008.bin: a directory") != NULL, "%s", out);
    cr_expect(strstr(out, "truncated: 4096") == NULL, "%s", out);
    scratch_done();
}

Test(gpt_trainer, resume_does_not_hang_on_a_fifo) {
    scratch();
    shards();
    cr_assert_eq(gpt(CKPT_RUN " --stop-at 2 --checkpoint %s/ck", dir, dir), 0, "%s", out);
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/ck/ckpt-000000000099.bin", dir);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    int st = gpt_with(30, "", CKPT_RUN " --resume --checkpoint %s/ck --stop-at 3", dir, dir);
    cr_expect_eq(st, 0, "exited %d (124: it hung):\n%s", st, out);
    cr_expect(strstr(out, "ckpt-000000000099.bin: a FIFO") != NULL, "%s", out);
    cr_expect(strstr(out, "continuing at step 3 of 6") != NULL, "%s", out);
    /* one named for a step this run would save: refused before step 1, not replaced */
    snprintf(fifo, sizeof fifo, "%s/ck/ckpt-000000000005.bin", dir);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    st = gpt_with(30, "", CKPT_RUN " --resume --checkpoint %s/ck", dir, dir);
    cr_expect_eq(st, 1, "exited %d:\n%s", st, out);
    cr_expect(strstr(out, "ckpt-000000000005.bin: a FIFO") &&
                  strstr(out, "--overwrite-checkpoints"), "%s", out);
    cr_expect(strstr(out, "step 4/6") == NULL, "steps ran:\n%s", out);
    struct stat sb;
    cr_expect(stat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    scratch_done();
}

Test(gpt_trainer, an_unusable_checkpoint_directory_fails_before_step_1) {
    scratch();
    char file[512], cmd[1024];
    snprintf(file, sizeof file, "%s/file", dir);
    snprintf(cmd, sizeof cmd, "echo x >'%s'", file);
    cr_assert_eq(system(cmd), 0);
    static const char *const what[] = {"missing parent", "regular file", "/proc", "file dir"};
    char paths[4][600];
    snprintf(paths[0], sizeof paths[0], "%s/missing/ck", dir);
    snprintf(paths[1], sizeof paths[1], "%s", file);
    snprintf(paths[2], sizeof paths[2], "/proc/uvmrt-test-ckpt");
    snprintf(paths[3], sizeof paths[3], "%s/ck", file);
    for (int k = 0; k < 4; k++) {
        int st = gpt(SMALL " --vocab 512 --steps 3 --checkpoint %s", paths[k]);
        cr_expect_eq(st, 1, "%s: exited %d:\n%s", what[k], st, out);
        cr_expect(strstr(out, paths[k]) != NULL, "%s: the path is not named:\n%s", what[k], out);
        cr_expect(strstr(out, "step 1/3") == NULL, "%s: found after training:\n%s", what[k],
                  out);
    }
    scratch_done();
}

/* ----------------------------------------------------------------------------
 * where AdamW runs (--cpu-layers) and which blocks recompute (--recompute) */

/* 4 blocks: 6 layers */
#define SPLIT "--backend sim --layers 4 --channels 128 --heads 2 --batch 2 --seq 64 -q"

/* Runs SPLIT ARGS --steps 4 --result-json into *r (the caller frees it). */
static json_t *split_run(const char *args) {
    char path[512];
    snprintf(path, sizeof path, "%s/r.json", dir);
    int st = gpt(SPLIT " --steps 4 %s --result-json %s", args, path);
    cr_assert_eq(st, 0, "'%s' exited %d:\n%s", args, st, out);
    return json_file(path);
}

static const char *jstr(json_t *obj, const char *key) {
    const char *v = json_string_value(json_object_get(obj, key));
    cr_assert(v != NULL, "result JSON: %s is not a string", key);
    return v;
}

/* --attention: on sim nothing runs the kernels, but the calls declare the attention's
 * rate, so cudnn's (faster) declared work makes the modelled step shorter; auto on sim
 * is the trainer's own kernels; the result names the attention. */
Test(gpt_trainer, attention_choice_sets_the_declared_rate) {
    scratch();
    double ms[3];
    const char *names[3] = {"mma", "mma", "cudnn"}, *args[3] = {"", "--attention mma", "--attention cudnn"};
    for (int i = 0; i < 3; i++) {
        json_t *r = split_run(args[i]);
        ms[i] = json_real_value(json_object_get(r, "ms_per_step_median"));
        cr_expect_str_eq(jstr(r, "attention"), names[i], "%s", args[i]);
        json_decref(r);
    }
    cr_expect(ms[0] > 0 && ms[0] == ms[1], "auto on sim is mma: %.3f against %.3f ms", ms[0], ms[1]);
    cr_expect(ms[2] < ms[1], "cudnn's declared rate is higher: %.3f ms, mma %.3f ms", ms[2], ms[1]);
    scratch_done();
}

/* The logits buffer's bytes (the classifier's chunk of rows x Vp x 2) of a 2-step run. */
static long long logits_bytes(const char *env, const char *args) {
    char rep[512];
    snprintf(rep, sizeof rep, "%s/rep.json", dir);
    snprintf(gpt_env, sizeof gpt_env, "%s", env);
    int st = gpt("--backend sim --layers 1 --vocab 256 --batch 8 --seq 1024 --steps 2 -q %s --report json:%s",
                 args, rep);
    cr_assert_eq(st, 0, "'%s' exited %d:\n%s", args, st, out);
    json_t *r = json_file(rep), *ts = json_object_get(json_object_get(r, "memory"), "tensors");
    long long bytes = -1;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *t = json_array_get(ts, i);
        if (strcmp(json_string_value(json_object_get(t, "name")), "logits") == 0)
            bytes = (long long)json_integer_value(json_object_get(t, "size_bytes"));
    }
    json_decref(r);
    cr_assert(bytes > 0, "no logits tensor in the report of '%s'", args);
    return bytes;
}

/* The classifier's chunk follows the shape (powers of two from 2048 rows while rows x
 * channels <= 8192 x 768, at most the batch's 8192 rows), never the budget, so losses stay
 * bitwise equal across budgets; UVMRT_GPT_CHUNK_ROWS overrides it, a bad value is named. */
Test(gpt_trainer, classifier_chunk_follows_the_shape_not_the_budget) {
    scratch();
    const long long row = 256 * 2; /* Vp 256, bf16 */
    cr_expect_eq(logits_bytes("", "--channels 64 --heads 1"), 8192 * row, "64 channels: all 8192 rows");
    cr_expect_eq(logits_bytes("", "--channels 64 --heads 1 --budget 48M"), 8192 * row, "the same under a budget");
    cr_expect_eq(logits_bytes("", "--channels 1024 --heads 16"), 4096 * row, "1024 channels: 4096 rows");
    cr_expect_eq(logits_bytes("", "--channels 1600 --heads 25"), 2048 * row, "1600 channels: 2048 rows");
    cr_expect_eq(logits_bytes("UVMRT_GPT_CHUNK_ROWS=1000", "--channels 64 --heads 1"), 1000 * row, "the override");
    cr_expect_eq(logits_bytes("UVMRT_GPT_CHUNK_ROWS=lots", "--channels 64 --heads 1"), 8192 * row,
                 "a bad override is ignored");
    cr_expect(strstr(out, "UVMRT_GPT_CHUNK_ROWS=lots") && strstr(out, "expected rows"),
              "a bad override is named with what was expected:\n%s", out);
    scratch_done();
}

/* The result's wall clock: from one step's end to the next's, after non-recording steps
 * (none in a 2-step run: null, never 0). */
Test(gpt_trainer, result_has_the_wall_clock_per_step) {
    scratch();
    json_t *r = split_run("");
    json_t *w = json_object_get(r, "wall_ms_per_step_median");
    cr_expect(json_is_real(w) && json_real_value(w) > 0, "4 steps: wall_ms_per_step_median is a positive number");
    json_decref(r);
    char path[512];
    snprintf(path, sizeof path, "%s/r2.json", dir);
    cr_assert_eq(gpt(SPLIT " --steps 2 --result-json %s", path), 0, "%s", out);
    r = json_file(path);
    cr_expect(json_is_null(json_object_get(r, "wall_ms_per_step_median")), "2 steps: null");
    json_decref(r);
    scratch_done();
}

Test(gpt_trainer, explicit_cpu_layers_and_recompute_reach_the_result) {
    scratch();
    static const struct {
        const char *args;
        int k, n;
        const char *on, *rec;
    } cases[] = {
        {"--cpu-layers 5 --recompute 3", 5, 3, "mixed", "partial"},
        {"--optimizer-on cpu --recompute all", 6, 4, "cpu", "all"},
        {"--optimizer-on gpu --recompute none", 0, 0, "gpu", "none"},
        {"--cpu-layers 6 --optimizer-on cpu --recompute 0", 6, 0, "cpu", "none"},
        {"--cpu-layers 0 --optimizer-on gpu --recompute 4", 0, 4, "gpu", "all"},
    };
    long long managed[5], cpu_params[5];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *r = split_run(cases[i].args);
        cr_expect_eq(jint(r, "cpu_layers"), cases[i].k, "%s", cases[i].args);
        cr_expect_eq(jint(r, "recompute_blocks"), cases[i].n, "%s", cases[i].args);
        cr_expect_str_eq(jstr(r, "optimizer_on"), cases[i].on, "%s", cases[i].args);
        cr_expect_str_eq(jstr(r, "recompute"), cases[i].rec, "%s", cases[i].args);
        cr_expect(json_is_null(json_object_get(r, "choice")), "%s: no auto knob, but a choice",
                  cases[i].args);
        managed[i] = jint(r, "managed_bytes");
        cpu_params[i] = jint(r, "cpu_params");
        json_decref(r);
    }
    /* the CPU's AdamW parameters: the top k layers' (4 blocks of 12 C^2 + 13 C and the
     * head's final LayerNorm, 2 C, at C = 128; then the embedding too) */
    cr_expect_eq(cpu_params[0], 4 * (12 * 128 * 128 + 13 * 128) + 2 * 128);
    cr_expect_gt(cpu_params[1], cpu_params[0]);
    cr_expect_eq(cpu_params[1], cpu_params[3]);
    cr_expect_eq(cpu_params[2], 0);
    /* each recomputing block drops its own activation set for the one they share */
    cr_expect(managed[2] > managed[0] && managed[0] > managed[1], "managed bytes for recompute "
              "0, 3, 4 blocks: %lld, %lld, %lld", managed[2], managed[0], managed[1]);
    cr_expect_eq(managed[3], managed[2], "where AdamW runs changed the managed bytes");
    cr_expect_eq(managed[4], managed[1]);
    scratch_done();
}

/* The per-layer optimizer rows and the host-homed bytes of a 3-step run's report. */
static json_t *split_report(const char *args) {
    char rep[512];
    snprintf(rep, sizeof rep, "%s/rep.json", dir);
    int st = gpt(SPLIT " --profile h200 --steps 3 --budget 160M %s --report json:%s", args, rep);
    cr_assert_eq(st, 0, "'%s' exited %d:\n%s", args, st, out);
    return json_file(rep);
}

static long long optimizer_field(json_t *rep, int layer, const char *key) {
    json_t *l = json_array_get(json_object_get(rep, "layers"), (size_t)layer);
    cr_assert(l != NULL, "the report has no layer %d", layer);
    return jint(json_object_get(l, "optimizer"), key);
}

/* --cpu-layers 3 of 6: block2, block3 and the head update on the CPU. Their AdamW is
 * declared as one optimizer call per step on a stream of its own, with host-memory
 * work and no uses (no fault, no transfer, a duration from the profile's host memory
 * rate), and their w, m, v, g live in host memory; the GPU's layers' AdamW touches
 * their tensors (the recording step faults them in). */
Test(gpt_trainer, cpu_layers_are_declared_and_host_placed) {
    scratch();
    json_t *gpu = split_report("--cpu-layers 0 --recompute 0");
    json_t *mix = split_report("--cpu-layers 3 --recompute 0");
    static const char *const none[] = {"fault_count", "prefetch_bytes", "remote_read_bytes",
                                       "remote_write_bytes", "evict_bytes"};
    for (int l = 3; l < 6; l++) {
        cr_expect_eq(optimizer_field(mix, l, "calls"), 3, "layer %d", l);
        for (size_t k = 0; k < sizeof none / sizeof none[0]; k++)
            cr_expect_eq(optimizer_field(mix, l, none[k]), 0, "CPU layer %d: optimizer %s", l,
                         none[k]);
        cr_expect(optimizer_field(mix, l, "duration_ns") > 0, "CPU layer %d: no host time", l);
        cr_expect(optimizer_field(gpu, l, "fault_count") + optimizer_field(gpu, l, "remote_read_bytes") > 0,
                  "GPU layer %d: its AdamW touched nothing", l);
    }
    for (int l = 0; l < 3; l++)
        cr_expect(optimizer_field(mix, l, "fault_count") > 0, "GPU layer %d touched nothing", l);
    /* w, m, v, g of 2 blocks of 12 C^2 + 13 C and the head's 2 C, in fp32 */
    long long C = 128, n = 2 * (12 * C * C + 13 * C) + 2 * C;
    long long homed = jint(mix, "host_homed_bytes") - jint(gpu, "host_homed_bytes");
    cr_expect(homed >= 16 * n, "host-homed bytes grew by %lld with 3 CPU layers, expected at "
              "least %lld", homed, 16 * n);
    json_decref(gpu);
    json_decref(mix);
    scratch_done();
}

/* The tier tests' run: TINY, 4 steps, block2 and the head on the CPU. */
#define TIER_RUN TINY " --profile h200 --steps 4 --budget 160M --text " GPT_CORPUS_PATH " --cpu-layers 2 --recompute 0"

/* A run with --spill-dir spill --spill what stopped after step 2 and resumed (into the
 * checkpoint folder dir/ck_TAG) gives the losses of dir/plain.txt. */
static void tier_stop_and_resume(const char *spill, const char *what, const char *tag) {
    int st = gpt(TIER_RUN " --stop-at 2 --checkpoint %s/ck_%s --checkpoint-every 2 --loss-log %s/a_%s.txt "
                          "--spill-dir %s --spill %s",
                 dir, tag, dir, tag, spill, what);
    cr_assert_eq(st, 0, "%s", out);
    st = gpt(TIER_RUN " --resume --checkpoint %s/ck_%s --loss-log %s/b_%s.txt --spill-dir %s --spill %s", dir, tag,
             dir, tag, spill, what);
    cr_assert_eq(st, 0, "%s", out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cat %s/a_%s.txt %s/b_%s.txt | cmp -s - %s/plain.txt", dir, tag, dir, tag, dir);
    cr_expect_eq(system(cmd), 0, "stopped and resumed with --spill %s, the losses differ", what);
}

/* A tier test's scratch: the spill directory dir/spill (made) and its report path
 * dir/rep.json (spill: 300 bytes, rep: 512). */
static void tier_scratch(char *spill, char *rep) {
    snprintf(spill, 300, "%s/spill", dir);
    snprintf(rep, 512, "%s/rep.json", dir);
    cr_assert_eq(mkdir(spill, 0700), 0);
}

/* --spill-dir: the CPU layers' AdamW moments live on the disk tier, read back for their
 * update and written after it: the losses equal those of a run without the tier bit
 * for bit, the CPU layers' optimizer calls (block2 and the head of 4 layers)
 * read and write their moments, the GPU layers' none, and the tier's files are gone
 * when the run ends. */
Test(gpt_trainer, moments_on_the_disk_tier_change_no_loss) {
    scratch();
    char spill[300], rep[512];
    tier_scratch(spill, rep);
    int st = gpt(TIER_RUN " --loss-log %s/plain.txt", dir);
    cr_assert_eq(st, 0, "%s", out);
    st = gpt(TIER_RUN " --loss-log %s/tier.txt --spill-dir %s --spill moments --report json:%s", dir, spill, rep);
    cr_assert_eq(st, 0, "%s", out);
    char path[512];
    snprintf(path, sizeof path, "%s/plain.txt", dir);
    char *plain = file_slurp(path);
    snprintf(path, sizeof path, "%s/tier.txt", dir);
    char *tier = file_slurp(path);
    cr_assert(plain != NULL && tier != NULL && strstr(plain, "null") == NULL, "%s", out);
    cr_expect_str_eq(tier, plain, "the disk tier changed the losses");
    free(plain);
    free(tier);
    json_t *r = json_file(rep);
    long long C = 64;
    for (int l = 2; l < 4; l++) {
        long long n = l < 3 ? 12 * C * C + 13 * C : 2 * C; /* a block's parameters; the head's */
        cr_expect_geq(optimizer_field(r, l, "spill_write_bytes"), 4 * 8 * n, "layer %d: moments not written", l);
        cr_expect_geq(optimizer_field(r, l, "spill_read_bytes"), 3 * 8 * n, "layer %d: moments not read", l);
    }
    for (int l = 0; l < 2; l++)
        cr_expect_eq(optimizer_field(r, l, "spill_read_bytes") + optimizer_field(r, l, "spill_write_bytes"), 0,
                     "GPU layer %d used the tier", l);
    json_decref(r);
    /* a checkpoint saves the moments from their files and a resume puts them back: a
     * run stopped after step 2 and resumed gives the same losses */
    tier_stop_and_resume(spill, "moments", "m");
    /* --spill state: the master weights and gradients too; the forward reads w back, the
     * backward writes g without reading it, the update reads all four */
    st = gpt(TIER_RUN " --loss-log %s/state.txt --spill-dir %s --spill state --report json:%s", dir, spill, rep);
    cr_assert_eq(st, 0, "%s", out);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmp -s %s/state.txt %s/plain.txt", dir, dir);
    cr_expect_eq(system(cmd), 0, "--spill state changed the losses");
    r = json_file(rep);
    long long n2 = 12 * C * C + 13 * C; /* block2's parameters */
    json_t *l2 = json_array_get(json_object_get(r, "layers"), 2);
    cr_expect_geq(jint(json_object_get(l2, "forward"), "spill_read_bytes"), 3 * 4 * n2, "w not read for the forward");
    cr_expect_eq(jint(json_object_get(l2, "backward"), "spill_read_bytes"), 0, "g read back for the backward");
    cr_expect_geq(jint(json_object_get(l2, "backward"), "spill_write_bytes"), 4 * 4 * n2, "g not written");
    cr_expect_geq(optimizer_field(r, 2, "spill_read_bytes"), 3 * 16 * n2, "w, m, v, g not read for the update");
    cr_expect_geq(optimizer_field(r, 2, "spill_write_bytes"), 4 * 12 * n2, "w, m, v not written after it");
    json_decref(r);
    /* stopped and resumed with --spill state: the checkpoint's save and load bring each
     * tensor in from the tier and put it back, one at a time */
    tier_stop_and_resume(spill, "state", "s");
    st = gpt(TINY " --steps 2 --text %s --cpu-layers 2 --spill-dir %s --spill state --dump-weights %s/w.bin",
             GPT_CORPUS_PATH, spill, dir);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "not with CPU layers' state on the disk tier") != NULL, "%s", out);
    cr_expect_eq(rmdir(spill), 0, "the tier's files are left in %s", spill);
    scratch_done();
}

/* A host budget that holds the CPU layers' state only with the disk tier: refused
 * before anything is allocated without it (naming what is needed), and with --spill
 * state the run keeps within it, its peak host bytes under the budget. */
Test(gpt_trainer, a_host_budget_that_fits_only_with_the_disk_tier) {
    scratch();
    char spill[300], rep[512];
    tier_scratch(spill, rep);
#define HOSTLY "--backend sim --layers 8 --channels 512 --heads 8 --vocab 4096 --batch 2 --seq 256 --steps 3 " \
               "--budget 256M --host-budget 300M --cpu-layers 10 --recompute 8 -q"
    int st = gpt(HOSTLY);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "does not fit") && strstr(out, "nothing allocated"), "%s", out);
    st = gpt(HOSTLY " --spill-dir %s --spill moments", spill);
    cr_expect_eq(st, 1, "%s", out);
    cr_expect(strstr(out, "more on the disk tier"), "%s", out);
    st = gpt(HOSTLY " --spill-dir %s --spill state --report json:%s", spill, rep);
    cr_assert_eq(st, 0, "%s", out);
    json_t *r = json_file(rep);
    cr_expect_leq(jint(r, "peak_host_bytes"), jint(r, "host_budget_bytes"), "over the host budget");
    cr_expect_gt(jint(json_array_get(json_object_get(r, "steps"), 1), "spill_write_bytes"), 0);
    json_decref(r);
    /* chosen by uvmrt: its rehearsals model the tier as the run moves it (its discards
     * and the syncs they need), so the prediction holds on sim */
    st = gpt("--backend sim --layers 8 --channels 512 --heads 8 --vocab 4096 --batch 2 --seq 256 --steps 4 "
             "--budget 256M --host-budget 300M --spill-dir %s --spill state", spill);
    cr_assert_eq(st, 0, "%s", out);
    const char *e = strstr(out, "auto: predicted ");
    double pred = 0, meas = 0;
    cr_assert(e != NULL && sscanf(e, "auto: predicted %lf ms/step, measured %lf", &pred, &meas) == 2, "%s", out);
    cr_expect(fabs(meas - pred) <= 0.05 * meas, "predicted %.1f ms, measured %.1f ms", pred, meas);
#undef HOSTLY
    cr_expect_eq(rmdir(spill), 0, "the tier's files are left in %s", spill);
    scratch_done();
}

/* --spill auto (the default with --spill-dir): uvmrt puts on the disk tier the least that
 * brings the host memory within the host budget: every CPU layer's moments first, then
 * layers' whole state, blocks from the top down (the head and embedding last); nothing
 * when the budget holds it all or there is none. A mixed plan's losses equal those of a
 * run without the tier bit for bit. */
Test(gpt_trainer, spill_auto_puts_the_least_on_the_disk_tier) {
    scratch();
    char spill[300], rep[512], cmd[1024];
    tier_scratch(spill, rep);
#define MIXED "--backend sim --layers 4 --channels 128 --heads 4 --batch 2 --seq 64 -q --steps 3 --budget 64M " \
              "--text " GPT_CORPUS_PATH " --recompute 0 --cpu-layers 6"
    int st = gpt(MIXED " --host-budget none --loss-log %s/plain.txt", dir);
    cr_assert_eq(st, 0, "%s", out);
    st = gpt(MIXED " --host-budget 8M --spill-dir %s --loss-log %s/auto.txt --report json:%s", spill, dir, rep);
    cr_assert_eq(st, 0, "%s", out);
    int ml = -1, sl = -1;
    const char *line = strstr(out, "disk tier: ");
    cr_assert(line && sscanf(line, "disk tier: %d CPU layers' moments and %d layers' state", &ml, &sl) == 2, "%s", out);
    cr_expect(ml > 0 && sl > 0 && ml + sl == 6, "expected a mix of moments and state on 6 layers: %s", out);
    snprintf(cmd, sizeof cmd, "cmp -s %s/auto.txt %s/plain.txt", dir, dir);
    cr_expect_eq(system(cmd), 0, "the auto tier plan changed the losses");
    json_t *r = json_file(rep);
    cr_expect_leq(jint(r, "plan_host_bytes"), jint(r, "host_budget_bytes"), "the plan is over the host budget");
    /* the top block's whole state is on the tier (its forward reads w back); the embedding's
     * moments only (its forward reads nothing back, its update m and v) */
    json_t *layers = json_object_get(r, "layers");
    cr_expect_gt(jint(json_object_get(json_array_get(layers, 4), "forward"), "spill_read_bytes"), 0,
                 "block 3's master weights are not on the tier");
    cr_expect_eq(jint(json_object_get(json_array_get(layers, 0), "forward"), "spill_read_bytes"), 0,
                 "the embedding's master weights are on the tier");
    cr_expect_gt(optimizer_field(r, 0, "spill_read_bytes"), 0, "the embedding's moments are not on the tier");
    json_decref(r);
    /* a host budget that holds everything, and none: nothing on the tier */
    st = gpt(MIXED " --host-budget 24M --spill-dir %s --report json:%s", spill, rep);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "disk tier: nothing on it (--spill auto): the host budget holds") != NULL, "%s", out);
    r = json_file(rep);
    cr_expect_eq(jint(json_array_get(json_object_get(r, "steps"), 1), "spill_write_bytes"), 0);
    json_decref(r);
    st = gpt(MIXED " --host-budget none --spill-dir %s", spill);
    cr_assert_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "no host budget to make room in") != NULL, "%s", out);
    st = gpt(MIXED " --spill-dir %s --spill everything", spill);
    cr_expect_eq(st, 2, "%s", out);
    cr_expect(strstr(out, "--spill 'everything': expected auto, moments or state") != NULL, "%s", out);
#undef MIXED
    cr_expect_eq(rmdir(spill), 0, "the tier's files are left in %s", spill);
    scratch_done();
}

/* The access a recorded call declares for the tensor named name (-1: not used). */
static int recorded_access(json_t *rec, int layer, const char *phase, const char *name) {
    json_t *tensors = json_object_get(rec, "tensors"), *calls = json_object_get(rec, "calls");
    long long id = -1;
    for (size_t i = 0; i < json_array_size(tensors); i++) {
        json_t *t = json_array_get(tensors, i);
        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
            id = jint(t, "id");
    }
    cr_assert(id >= 0, "the record has no tensor %s", name);
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *c = json_array_get(calls, i);
        if (jint(c, "layer") != layer || strcmp(jstr(c, "phase"), phase) != 0)
            continue;
        json_t *uses = json_object_get(c, "uses");
        for (size_t k = 0; k < json_array_size(uses); k++) {
            json_t *u = json_array_get(uses, k);
            if (json_integer_value(json_array_get(u, 0)) == id)
                return (int)json_integer_value(json_array_get(u, 1));
        }
        return -1;
    }
    cr_assert_fail("the record has no %s call of layer %d", phase, layer);
    return -1;
}

/* A CPU block's backward makes its gradient in one of the GPU's two gdev buffers (block
 * l's is gdev{l % 2}: one is copied to the host while the next block writes the other)
 * and copies it to its host-homed g once (written, never read: the matmuls do not write
 * it over the link and the grad norm does not read it back); a GPU block's writes its g
 * in place and uses neither buffer. */
Test(gpt_trainer, a_cpu_block_streams_its_gradient_to_the_host_once) {
    scratch();
    char rec[512], cmd[2048];
    snprintf(rec, sizeof rec, "%s/rec.json", dir);
    snprintf(cmd, sizeof cmd, "timeout 300 '%s' " SPLIT " --steps 3 --cpu-layers 3 --recompute 0 2>&1",
             gpt_path());
    env_clear_uvmrt();
    setenv("UVMRT_RECORD", rec, 1);
    char *text = NULL;
    int st = run_capture(cmd, &text);
    unsetenv("UVMRT_RECORD");
    cr_assert_eq(st, 0, "exited %d:\n%s", st, text);
    free(text);
    json_t *r = json_file(rec);
    /* layers: embed, block0..block3, head; the CPU's: block2, block3, head */
    for (int l = 3; l <= 4; l++) {
        char g[16], mine[8], other[8];
        snprintf(g, sizeof g, "g_%d", l);
        snprintf(mine, sizeof mine, "gdev%d", l % 2);
        snprintf(other, sizeof other, "gdev%d", (l + 1) % 2);
        cr_expect_eq(recorded_access(r, l, "backward", mine), (int)UVMRT_USE_WRITE, "layer %d", l);
        cr_expect_eq(recorded_access(r, l, "backward", other), -1, "layer %d uses %s", l, other);
        cr_expect_eq(recorded_access(r, l, "backward", g), (int)(UVMRT_USE_WRITE | UVMRT_USE_STREAM),
                     "CPU layer %d's backward: %s", l, g);
    }
    for (int l = 1; l <= 2; l++) {
        char g[16];
        snprintf(g, sizeof g, "g_%d", l);
        cr_expect_eq(recorded_access(r, l, "backward", "gdev0"), -1, "GPU layer %d uses gdev0", l);
        cr_expect_eq(recorded_access(r, l, "backward", "gdev1"), -1, "GPU layer %d uses gdev1", l);
        cr_expect_eq(recorded_access(r, l, "backward", g), (int)UVMRT_USE_WRITE, "GPU layer %d", l);
    }
    json_decref(r);
    scratch_done();
}

/* ----------------------------------------------------------------------------
 * auto: uvmrt chooses --cpu-layers and --recompute (uvmrt_choose(3)) */

/* A budget where the candidates differ (the embedding is small next to the blocks). */
#define AUTO SPLIT " --vocab 512 --profile h200 --budget 8M"

static double jreal(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    cr_assert(json_is_number(v), "result JSON: %s is not a number", key);
    return json_number_value(v);
}

static json_t *auto_run(const char *args, int steps) {
    char path[512];
    snprintf(path, sizeof path, "%s/auto.json", dir);
    int st = gpt(AUTO " --steps %d %s --result-json %s", steps, args, path);
    cr_assert_eq(st, 0, "'%s' exited %d:\n%s", args, st, out);
    return json_file(path);
}

/* On sim the model is the machine: the chosen values' step time is the least of every
 * candidate's, each run on its own with explicit flags at the same profile and budget
 * (the choice may plan with a smaller budget it predicts faster: never slower), and
 * the run takes what was predicted. */
Test(gpt_trainer, auto_picks_the_least_predicted_step_time) {
    scratch();
    json_t *a = auto_run("", 6);
    json_t *c = json_object_get(a, "choice");
    cr_assert(json_is_object(c), "auto run without a choice:\n%s", out);
    json_t *v = json_object_get(c, "values");
    int k = (int)jint(v, "cpu_layers"), n = (int)jint(v, "recompute");
    cr_expect_eq(jint(a, "cpu_layers"), k);
    cr_expect_eq(jint(a, "recompute_blocks"), n);
    double ms = jreal(a, "ms_per_step_median"), pred = jreal(c, "predicted_ms");
    cr_expect(fabs(ms - pred) <= 1e-6 * pred, "sim ran %.6f ms/step, the choice predicted %.6f",
              ms, pred);
    cr_expect_eq(jreal(a, "predicted_step_ms"), pred);
    /* the candidates: cpu_layers {0, 6/8, ..., 6} rounded = 0..6, recompute {0, 2, 4} */
    static const int rec[3] = {0, 2, 4};
    double best = 0, chosen = 0;
    int nbest = 0;
    for (int kk = 0; kk <= 6; kk++)
        for (int r = 0; r < 3; r++) {
            char args[128];
            snprintf(args, sizeof args, "--cpu-layers %d --recompute %d", kk, rec[r]);
            json_t *e = auto_run(args, 6);
            double t = jreal(e, "ms_per_step_median");
            cr_expect(json_is_null(json_object_get(e, "choice")), "%s made a choice", args);
            if (nbest++ == 0 || t < best)
                best = t;
            if (kk == k && rec[r] == n)
                chosen = t;
            json_decref(e);
        }
    cr_expect(ms <= best * (1 + 1e-9), "auto (cpu_layers %d, recompute %d) ran %.6f ms/step; the "
              "best explicit candidate %.6f", k, n, ms, best);
    if ((long long)jreal(c, "plan_budget_bytes") == jint(a, "budget_bytes"))
        cr_expect(fabs(chosen - best) <= 1e-9 * best, "the chosen values ran %.6f ms/step "
                  "explicitly, the best candidate %.6f", chosen, best);
    json_decref(a);
    scratch_done();
}

/* After 3 planned steps the review compares measured with predicted; on sim they agree,
 * so it does not re-plan; with -q the choice is one line. */
Test(gpt_trainer, auto_review_on_sim_does_not_replan) {
    scratch();
    json_t *a = auto_run("", 6);
    json_t *c = json_object_get(a, "choice");
    cr_assert(json_is_object(c), "%s", out);
    cr_expect(json_is_false(json_object_get(c, "replanned")), "re-planned on sim:\n%s", out);
    double meas = jreal(c, "measured_ms"), pred = jreal(c, "first_predicted_ms");
    cr_expect(fabs(meas - pred) <= 0.1 * pred, "measured %.6f, predicted %.6f", meas, pred);
    cr_expect(strstr(out, "auto: predicted ") && strstr(out, " ms/step, measured ") &&
              strstr(out, "(error "), "no review line:\n%s", out);
    cr_expect(strstr(out, "re-planned") == NULL, "%s", out);
    const char *line = strstr(out, "auto: cpu_layers ");
    cr_assert(line != NULL, "no choice line:\n%s", out);
    cr_expect(strstr(line, " predicted ") && strstr(line, "plan budget") &&
              strstr(line, "rehearsals"), "%.200s", line);
    cr_expect(strstr(out, "auto candidate") == NULL, "-q printed the candidates:\n%s", out);
    cr_expect(strstr(line + 1, "auto: cpu_layers ") == NULL, "two choice lines:\n%s", out);
    /* the review comes after step 4 (step 1 records) */
    const char *rev = strstr(out, "auto: predicted "), *s4 = strstr(out, "step 4/6");
    const char *s5 = strstr(out, "step 5/6");
    cr_expect(s4 && s5 && rev && s4 < rev && rev < s5, "the review is not between steps 4 and "
              "5:\n%s", out);
    json_decref(a);
    scratch_done();
}

/* An explicit value leaves its knob out of the choice. */
Test(gpt_trainer, auto_chooses_only_the_knobs_left_auto) {
    scratch();
    json_t *a = auto_run("--cpu-layers 2", 3);
    json_t *v = json_object_get(json_object_get(a, "choice"), "values");
    cr_assert(json_is_object(v), "%s", out);
    cr_expect(json_object_get(v, "cpu_layers") == NULL && json_object_get(v, "recompute"),
              "--cpu-layers 2 --recompute auto: values %s", json_dumps(v, 0));
    cr_expect_eq(jint(a, "cpu_layers"), 2);
    json_decref(a);
    a = auto_run("--recompute all --cpu-layers auto", 3);
    v = json_object_get(json_object_get(a, "choice"), "values");
    cr_assert(json_is_object(v), "%s", out);
    cr_expect(json_object_get(v, "cpu_layers") && json_object_get(v, "recompute") == NULL);
    cr_expect_eq(jint(a, "recompute_blocks"), 4);
    cr_expect(strstr(out, "auto: cpu_layers ") && !strstr(out, "auto: cpu_layers 2, recompute"),
              "%s", out);
    json_decref(a);
    a = auto_run("--optimizer-on cpu --recompute none", 3);
    cr_expect(json_is_null(json_object_get(a, "choice")) && !strstr(out, "auto:"), "%s", out);
    json_decref(a);
    scratch_done();
}

/* A changed choice is applied between steps: the CPU's layers and their placement, each
 * block's own activations freed or allocated; the runtime records the next step again.
 * On sim the review never re-plans, so the test hook UVMRT_TEST_REPLAN applies
 * given values as if it had; the run ends with the tensors an explicit run of those
 * values has. */
Test(gpt_trainer, auto_applies_a_changed_choice_between_steps) {
    scratch();
    static const struct {
        int k, n;
    } to[] = {{3, 1}, {0, 4}, {6, 0}, {2, 2}};
    for (size_t i = 0; i < sizeof to / sizeof to[0]; i++) {
        char hook[32], args[96];
        snprintf(hook, sizeof hook, "%d,%d", to[i].k, to[i].n);
        setenv("UVMRT_TEST_REPLAN", hook, 1);
        json_t *a = auto_run("", 7);
        unsetenv("UVMRT_TEST_REPLAN");
        cr_expect(strstr(out, "UVMRT_TEST_REPLAN (a test hook): applying") != NULL, "%s",
                  out);
        const char *s5 = strstr(out, "step 5/7"), *s6 = strstr(out, "step 6/7");
        const char *rec = s5 ? strstr(s5, "(recording step)") : NULL;
        cr_expect(s5 && s6 && rec && rec < s6,
                  "step 5 after the change is not a recording step:\n%s", out);
        cr_expect_eq(jint(a, "cpu_layers"), to[i].k, "%s", hook);
        cr_expect_eq(jint(a, "recompute_blocks"), to[i].n, "%s", hook);
        long long managed = jint(a, "managed_bytes");
        json_decref(a);
        snprintf(args, sizeof args, "--cpu-layers %d --recompute %d", to[i].k, to[i].n);
        json_t *e = auto_run(args, 2);
        cr_expect_eq(managed, jint(e, "managed_bytes"), "after the change to %s: %lld managed "
                     "bytes, an explicit run has %lld", hook, managed, jint(e, "managed_bytes"));
        json_decref(e);
    }
    setenv("UVMRT_TEST_REPLAN", "7,0", 1);
    int st = gpt(AUTO " --steps 5");
    unsetenv("UVMRT_TEST_REPLAN");
    cr_expect(st == 1 && strstr(out, "UVMRT_TEST_REPLAN '7,0'"), "exit %d:\n%s", st, out);
    scratch_done();
}
