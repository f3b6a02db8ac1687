/*
 * test_profile.c -- device profiles: the built-in ones, profile files (strict
 * reading, exact round trip through the writer uvmrt-calibrate uses) and
 * UVMRT_PROFILE=FILE in a context.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "profile_file.h"

static const uvmrt_log_t capture_log = {UVMRT_LOG_DEBUG, log_capture, NULL};

/* A fresh path in a fresh folder of /tmp (each test runs in its own process). */
static char dir[64];
static void tmp_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/uvmrt-profile-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static const char *tmp_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}
static const char *write_text(const char *name, const char *text)
{
    const char *p = tmp_path(name);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

/* The required keys of a small valid profile, then `extra` (which may start with ','). */
static char *doc(const char *extra)
{
    static char buf[4096];
    snprintf(buf, sizeof buf,
             "{\"name\": \"mycard\", \"memory_bytes\": 12884901888, \"prefetch_h2d_bps\": 2.2e10,"
             " \"evict_d2h_bps\": 7e9, \"pinned_h2d_bps\": 2.6e10, \"pinned_d2h_bps\": 2.6e10,"
             " \"fault_bps\": 3e9, \"remote_read_bps\": 2.35e10, \"remote_write_bps\": 2.45e10,"
             " \"flops\": 6e13, \"hbm_bps\": 5.04e11%s}",
             extra);
    return buf;
}

static void assert_profiles_equal(const uvmrt_profile_t *a, const uvmrt_profile_t *b)
{
    cr_assert_str_eq(a->name, b->name);
    cr_assert_str_eq(a->description, b->description);
    cr_assert_eq(a->measured, b->measured);
    cr_assert_eq(a->memory_bytes, b->memory_bytes);
    cr_assert_eq(a->fault_group_bytes, b->fault_group_bytes);
    cr_assert_eq(a->prefetch_call_ns, b->prefetch_call_ns);
    cr_assert_eq(a->fault_trace_ns, b->fault_trace_ns);
    cr_assert_eq(a->disk_io_uring, b->disk_io_uring);
    const double da[] = {a->prefetch_h2d_bps, a->evict_d2h_bps, a->pinned_h2d_bps, a->pinned_d2h_bps,
                         a->fault_bps, a->remote_read_bps, a->remote_write_bps, a->flops, a->hbm_bps,
                         a->pinned_bidir_bps, a->host_mem_bps, a->host_mem_shared_bps,
                         a->cpu_adamw_params_per_s, a->gpu_bf16_flops, a->host_mem_cpu_beside_h2d_bps,
                         a->host_mem_cpu_beside_d2h_bps, a->disk_read_bps, a->disk_write_bps};
    const double db[] = {b->prefetch_h2d_bps, b->evict_d2h_bps, b->pinned_h2d_bps, b->pinned_d2h_bps,
                         b->fault_bps, b->remote_read_bps, b->remote_write_bps, b->flops, b->hbm_bps,
                         b->pinned_bidir_bps, b->host_mem_bps, b->host_mem_shared_bps,
                         b->cpu_adamw_params_per_s, b->gpu_bf16_flops, b->host_mem_cpu_beside_h2d_bps,
                         b->host_mem_cpu_beside_d2h_bps, b->disk_read_bps, b->disk_write_bps};
    for (size_t i = 0; i < sizeof da / sizeof da[0]; i++)
        cr_assert_eq(da[i], db[i], "rate %zu: %.17g != %.17g", i, da[i], db[i]); /* exact */
}

/* ------------------------------------------------------------------ built-in profiles */
Test(profile, h200_has_the_measured_host_memory_figures)
{
    const uvmrt_profile_t *p = uvmrt_profile_find("h200");
    cr_assert_not_null(p);
    cr_assert_eq(p->measured, 1);
    cr_assert_float_eq(p->host_mem_bps, 77e9, 1);       /* FACTS.md: triad, CPU alone */
    cr_assert_float_eq(p->host_mem_shared_bps, 140e9, 1); /* CPU and DMA together */
    cr_assert_float_eq(p->cpu_adamw_params_per_s, 4.6e9, 1); /* uvmrt-calibrate, the trainers' loop */
    cr_assert_float_eq(p->pinned_bidir_bps, 101.7e9, 1);
    cr_assert_gt(p->gpu_bf16_flops, 0);
    /* together more than either alone, less than both solo rates added */
    cr_assert_gt(p->host_mem_shared_bps, p->host_mem_bps);
    cr_assert_lt(p->host_mem_shared_bps, p->host_mem_bps + p->pinned_bidir_bps);
}

Test(profile, consumer_cards_are_named_estimates)
{
    static const struct {
        const char *name;
        double gib, tflops, max_link_gbs;
    } cards[] = {
        {"rtx4060ti-16g", 16, 44, 14}, /* PCIe 4.0 x8: about half of x16 */
        {"rtx4080", 16, 97.5, 27},
        {"rtx3090", 24, 71, 27},
        {"rtx4090", 24, 165, 27},
    };
    for (size_t i = 0; i < sizeof cards / sizeof cards[0]; i++) {
        const uvmrt_profile_t *p = uvmrt_profile_find(cards[i].name);
        cr_assert_not_null(p, "%s", cards[i].name);
        cr_assert_eq(p->measured, 0);
        cr_assert_not_null(strstr(p->description, "estimate"), "%s: %s", p->name, p->description);
        cr_assert_eq(p->memory_bytes, (uint64_t)cards[i].gib * GIB);
        cr_assert_float_eq(p->flops, cards[i].tflops * 1e12, 1e9);
        cr_assert_leq(p->pinned_h2d_bps, cards[i].max_link_gbs * 1e9);
        cr_assert_lt(p->prefetch_h2d_bps, p->pinned_h2d_bps);
        cr_assert_eq(p->host_mem_shared_bps, 0); /* unknown until calibrated: not modelled */
    }
    const char *old[] = {"consumer-8g", "consumer-12g", "consumer-16g", "consumer-24g"};
    for (size_t i = 0; i < 4; i++) cr_assert_not_null(uvmrt_profile_find(old[i]), "%s", old[i]);
}

Test(profile, every_builtin_profile_round_trips)
{
    tmp_dir();
    const uvmrt_profile_t *one;
    for (size_t i = 0; (one = uvmrt_profile_builtin(i)) != NULL; i++) {
        const char *path = tmp_path("rt.json");
        cr_assert_eq(uvmrt__profile_file_save(one, NULL, path, &capture_log), UVMRT_OK, "%s", one->name);
        uvmrt_profile_t *back = NULL;
        cr_assert_eq(uvmrt__profile_file_load(path, &capture_log, &back), UVMRT_OK, "%s: %s", one->name,
                     log_text());
        assert_profiles_equal(one, back);
        uvmrt_profile_free(back);
    }
}

/* ------------------------------------------------------------------ the writer */
Test(profile, calibrated_file_round_trips_with_its_metadata)
{
    tmp_dir();
    uvmrt_profile_t p = *uvmrt_profile_find("h200");
    p.name = "calibrated";
    p.description = "measured by uvmrt-calibrate";
    p.pinned_h2d_bps = 55512345678.901234; /* not a round number: all 17 digits matter */
    p.host_mem_shared_bps = 1.0 / 3.0 * 4.2e11;
    p.host_mem_cpu_beside_h2d_bps = 6.1e10 / 7.0; /* the optional per-direction CPU figures */
    p.host_mem_cpu_beside_d2h_bps = 5.3e10;
    p.disk_read_bps = 2.06e9 / 3.0; /* the disk tier's directory (--spill-dir) */
    p.disk_write_bps = 1.53e9;
    p.disk_io_uring = 1;
    uvmrt_profile_meta_t m = {sizeof m, "2026-12-01T09:30:00Z", "NVIDIA H200", 13000, 13000, "uvmrt-calibrate 0.1.0",
                              "{\"pinned_h2d\": {\"bytes\": 1073741824, \"ns\": [19342000, 19350000]}}"};
    const char *path = tmp_path("cal.json");
    cr_assert_eq(uvmrt_profile_save(&p, &m, path), UVMRT_OK);
    uvmrt_profile_t *back = NULL;
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(path, &capture_log, &back), UVMRT_OK, "%s", log_text());
    cr_assert(!log_contains("unknown key"), "metadata keys are known: %s", log_text());
    assert_profiles_equal(&p, back);
    uvmrt_profile_free(back);
    char *text = file_slurp(path);
    cr_assert_not_null(strstr(text, "\"gpu_name\": \"NVIDIA H200\""), "%s", text);
    cr_assert_not_null(strstr(text, "\"raw\""));
    cr_assert_not_null(strstr(text, "\"date\": \"2026-12-01T09:30:00Z\""));
    free(text);
    /* nothing left beside it */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s | wc -l)\" = 1", dir);
    cr_assert_eq(system(cmd), 0, "a temporary file was left in %s", dir);
}

Test(profile, writer_leaves_out_what_was_not_measured)
{
    tmp_dir();
    uvmrt_profile_t p = *uvmrt_profile_find("consumer-8g");
    const char *path = tmp_path("c.json");
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, path, &capture_log), UVMRT_OK);
    char *text = file_slurp(path);
    cr_assert_null(strstr(text, "host_mem_bps"), "%s", text);
    cr_assert_null(strstr(text, "disk_"), "%s", text);
    cr_assert_not_null(strstr(text, "\"hbm_bps\""));
    free(text);
}

Test(profile, writer_refuses_bad_raw_json_and_directories)
{
    tmp_dir();
    uvmrt_profile_t p = *uvmrt_profile_find("h200");
    uvmrt_profile_meta_t m = {.struct_size = sizeof m, .raw_json = "[1, 2]"};
    const char *path = tmp_path("x.json");
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, &m, path, &capture_log), UVMRT_ERR_INVALID);
    cr_assert(log_contains("raw_json"), "%s", log_text());
    cr_assert_neq(access(path, F_OK), 0, "a failed save wrote the file");
    /* a folder where the file should go */
    const char *sub = tmp_path("sub.json");
    cr_assert_eq(mkdir(sub, 0700), 0);
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, sub, &capture_log), UVMRT_ERR_IO);
    cr_assert(log_contains("it is a directory"), "%s", log_text());
    struct stat sb;
    cr_assert_eq(stat(sub, &sb), 0);
    cr_assert(S_ISDIR(sb.st_mode));
}

/* The profile file follows the report rules (issue 21, item 1): a link's target is
 * replaced and the link kept; a character device is written in place, never replaced;
 * a FIFO with no reader fails at once (no hang); a missing folder is named. */
Test(profile, writer_follows_the_report_rules)
{
    alarm(30); /* a hang fails the test (not .timeout: Criterion 2.4.1's runner leaks when timed tests overlap) */
    tmp_dir();
    uvmrt_profile_t p = *uvmrt_profile_find("h200");
    char target[128], link[128];
    snprintf(target, sizeof target, "%s", write_text("target.json", "keep"));
    snprintf(link, sizeof link, "%s", tmp_path("link.json"));
    cr_assert_eq(symlink("target.json", link), 0);
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, link, &capture_log), UVMRT_OK, "%s", log_text());
    struct stat sb;
    cr_assert_eq(lstat(link, &sb), 0);
    cr_assert(S_ISLNK(sb.st_mode), "the link was replaced by a file");
    uvmrt_profile_t *back = NULL;
    cr_assert_eq(uvmrt_profile_load(target, &back), UVMRT_OK, "the link's target holds no profile");
    uvmrt_profile_free(back);
    /* a link to a device: written in place, the device and the link kept */
    char dev[128];
    snprintf(dev, sizeof dev, "%s", tmp_path("dev.json"));
    cr_assert_eq(symlink("/dev/null", dev), 0);
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, dev, &capture_log), UVMRT_OK, "%s", log_text());
    cr_assert(lstat(dev, &sb) == 0 && S_ISLNK(sb.st_mode), "the link to /dev/null was replaced");
    cr_assert(stat("/dev/null", &sb) == 0 && S_ISCHR(sb.st_mode));
    /* a FIFO without a reader */
    const char *fifo = tmp_path("fifo.json");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, fifo, &capture_log), UVMRT_ERR_IO);
    cr_assert(log_contains("FIFO with no reader"), "%s", log_text());
    cr_assert(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");
    /* a missing folder */
    const char *missing = tmp_path("nodir/p.json");
    log_reset();
    cr_assert_eq(uvmrt__profile_file_save(&p, NULL, missing, &capture_log), UVMRT_ERR_IO);
    cr_assert(log_contains("nodir") && log_contains("does not exist"), "%s", log_text());
}

/* ------------------------------------------------------------------ the reader */
Test(profile, minimal_file_takes_the_defaults)
{
    tmp_dir();
    const char *path = write_text("min.json", doc(""));
    uvmrt_profile_t *p = NULL;
    cr_assert_eq(uvmrt__profile_file_load(path, &capture_log, &p), UVMRT_OK, "%s", log_text());
    cr_assert_str_eq(p->name, "mycard");
    cr_assert_not_null(strstr(p->description, path));
    cr_assert_not_null(strstr(p->description, "estimate"));
    cr_assert_eq(p->measured, 0);
    cr_assert_eq(p->memory_bytes, 12ull * GIB);
    cr_assert_eq(p->fault_group_bytes, 716u << 10);
    cr_assert_eq(p->host_mem_shared_bps, 0);
    uvmrt_profile_free(p);
}

Test(profile, unknown_key_is_warned_by_name_and_ignored)
{
    tmp_dir();
    const char *path = write_text("u.json", doc(", \"hbm_bandwidth\": 3"));
    uvmrt_profile_t *p = NULL;
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(path, &capture_log, &p), UVMRT_OK);
    cr_assert(log_contains("warn"), "%s", log_text());
    cr_assert(log_contains("unknown key 'hbm_bandwidth'"), "%s", log_text());
    cr_assert(log_contains(path));
    uvmrt_profile_free(p);
}

/* Each bad document fails with CONFIG and a message naming the file, the key and the value. */
static void expect_bad(const char *text, const char *key, const char *value)
{
    const char *path = write_text("bad.json", text);
    uvmrt_profile_t *p = (uvmrt_profile_t *)0x1;
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(path, &capture_log, &p), UVMRT_ERR_CONFIG, "%s", text);
    cr_assert_eq(p, (uvmrt_profile_t *)0x1, "out was written on failure");
    cr_assert(log_contains(path), "%s", log_text());
    if (key) cr_assert(log_contains(key), "no '%s' in: %s", key, log_text());
    if (value) cr_assert(log_contains(value), "no '%s' in: %s", value, log_text());
}

Test(profile, bad_values_are_errors_naming_key_and_value)
{
    tmp_dir();
    /* the later key wins in these: jansson rejects duplicates, so build each by replacement */
    char text[4096];
#define BAD(from, to, key, value)                                         \
    do {                                                                  \
        snprintf(text, sizeof text, "%s", doc(""));                       \
        char *at = strstr(text, from);                                    \
        cr_assert_not_null(at, "%s", from);                               \
        char rest[4096];                                                  \
        snprintf(rest, sizeof rest, "%s", at + strlen(from));             \
        snprintf(at, sizeof text - (size_t)(at - text), "%s%s", to, rest); \
        expect_bad(text, key, value);                                     \
    } while (0)
    BAD("\"hbm_bps\": 5.04e11", "\"hbm_bps\": -5", "'hbm_bps'", "-5");
    BAD("\"fault_bps\": 3e9", "\"fault_bps\": 0", "'fault_bps'", "= 0");
    BAD("\"flops\": 6e13", "\"flops\": \"fast\"", "'flops'", "\"fast\"");
    BAD("\"flops\": 6e13", "\"flops\": null", "'flops'", "null");
    BAD("\"memory_bytes\": 12884901888", "\"memory_bytes\": 1.5e10", "'memory_bytes'", "15000000000");
    BAD("\"memory_bytes\": 12884901888", "\"memory_bytes\": 0", "'memory_bytes'", "= 0");
    BAD("\"name\": \"mycard\"", "\"name\": \"\"", "'name'", "\"\"");
    BAD("\"name\": \"mycard\"", "\"name\": 7", "'name'", "7");
    BAD("\"pinned_h2d_bps\": 2.6e10", "\"pinned_h2d_bps\": true", "'pinned_h2d_bps'", "true");
#undef BAD
    expect_bad(doc(", \"measured\": 2"), "'measured'", "2");
    expect_bad(doc(", \"host_mem_shared_bps\": -1.4e11"), "'host_mem_shared_bps'", "-140000000000");
    expect_bad(doc(", \"host_mem_bps\": 0"), "'host_mem_bps'", "= 0");
    expect_bad(doc(", \"prefetch_call_ns\": -3"), "'prefetch_call_ns'", "-3");
    expect_bad(doc(", \"date\": 5"), "'date'", "5");
    expect_bad(doc(", \"raw\": [1]"), "'raw'", "an array");
    expect_bad(doc(", \"format_version\": 2"), "'format_version'", "2");
}

Test(profile, each_missing_required_key_is_named)
{
    tmp_dir();
    const char *req[] = {"name", "memory_bytes", "prefetch_h2d_bps", "evict_d2h_bps", "pinned_h2d_bps",
                         "pinned_d2h_bps", "fault_bps", "remote_read_bps", "remote_write_bps", "flops", "hbm_bps"};
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        /* rename the key, so the rest of the document stays valid */
        char text[4096], quoted[64];
        snprintf(text, sizeof text, "%s", doc(""));
        snprintf(quoted, sizeof quoted, "\"%s\"", req[i]);
        char *at = strstr(text, quoted);
        cr_assert_not_null(at);
        at[1] = 'X'; /* "Xame": an unknown key now */
        char msg[96];
        snprintf(msg, sizeof msg, "required key '%s' is missing", req[i]);
        expect_bad(text, msg, NULL);
    }
}

Test(profile, not_json_not_an_object_and_no_file)
{
    tmp_dir();
    expect_bad("{\"name\": \"x\",", NULL, "line 1");
    expect_bad("[1, 2, 3]", "not a JSON object", NULL);
    expect_bad("{\"name\": \"a\", \"name\": \"b\"}", "duplicate", NULL);
    uvmrt_profile_t *p = NULL;
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(tmp_path("none.json"), &capture_log, &p), UVMRT_ERR_IO);
    cr_assert(log_contains("none.json"), "%s", log_text());
    cr_assert_null(p);
}

/* A FIFO under the path (no writer: open(2) would block for ever) or a directory is
 * refused at once, naming what it is. */
Test(profile, a_fifo_or_a_directory_is_refused_without_blocking, .timeout = 30)
{
    tmp_dir();
    const char *fifo = tmp_path("fifo.json");
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    uvmrt_profile_t *p = NULL;
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(fifo, &capture_log, &p), UVMRT_ERR_IO);
    cr_assert(log_contains("a FIFO, not a regular file"), "%s", log_text());
    cr_assert_null(p);
    unlink(fifo);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", tmp_path("dir.json"));
    mkdir(dir, 0700);
    log_reset();
    cr_assert_eq(uvmrt__profile_file_load(dir, &capture_log, &p), UVMRT_ERR_IO);
    cr_assert(log_contains("a directory"), "%s", log_text());
    rmdir(dir);
}

/* ------------------------------------------------------------------ UVMRT_PROFILE=FILE */
Test(profile, path_or_name)
{
    cr_assert(uvmrt__profile_is_path("./h200"));
    cr_assert(uvmrt__profile_is_path("h200.json"));
    cr_assert(uvmrt__profile_is_path("/etc/uvmrt/card"));
    cr_assert(!uvmrt__profile_is_path("h200"));
    cr_assert(!uvmrt__profile_is_path("rtx4060ti-16g"));
    cr_assert(!uvmrt__profile_is_path("json"));
}

Test(profile, sim_context_models_a_profile_file)
{
    tmp_dir();
    const char *path = write_text("card.json", doc(", \"measured\": 1, \"description\": \"my desk\""));
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, path);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    const uvmrt_profile_t *prof = uvmrt_context_profile(ctx);
    cr_assert_str_eq(prof->name, "mycard");
    cr_assert_str_eq(prof->description, "my desk");
    cr_assert_eq(prof->memory_bytes, 12ull * GIB);
    /* the model uses it: the auto budget is its memory minus the reserve */
    cr_assert_eq(uvmrt_context_budget(ctx), 12ull * GIB - (512ull << 20));
    /* the file may go away: the context owns its copy */
    cr_assert_eq(unlink(path), 0);
    cr_assert_str_eq(uvmrt_context_profile(ctx)->name, "mycard");
    uvmrt_context_destroy(ctx);
}

Test(profile, environment_names_a_file_and_a_bad_file_fails_create)
{
    tmp_dir();
    env_clear_uvmrt();
    const char *good = write_text("good.json", doc(""));
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    p.ignore_env = 0;
    setenv("UVMRT_BACKEND", "sim", 1);
    setenv("UVMRT_PROFILE", good, 1);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_str_eq(uvmrt_context_profile(ctx)->name, "mycard");
    uvmrt_context_destroy(ctx);

    const char *bad = write_text("bad.json", doc(", \"host_mem_bps\": \"lots\""));
    setenv("UVMRT_PROFILE", bad, 1);
    log_reset();
    ctx = (uvmrt_context_t *)0x1;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert_null(ctx);
    cr_assert(log_contains("'host_mem_bps'"), "%s", log_text());
    cr_assert(log_contains("\"lots\""), "%s", log_text());
    cr_assert(log_contains("UVMRT_PROFILE"), "%s", log_text());

    setenv("UVMRT_PROFILE", tmp_path("missing.json"), 1);
    log_reset();
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert(log_contains("missing.json"), "%s", log_text());

    setenv("UVMRT_PROFILE", "no-such-card", 1);
    log_reset();
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_ERR_CONFIG);
    cr_assert(log_contains("profile file"), "the expected text names files too: %s", log_text());
    env_clear_uvmrt();
}

/* ------------------------------------------------------------------ UVMRT_PROFILE=auto */
/* On cuda, auto models the GPU found: its own built-in profile by name (not a GH200,
 * whose link to the CPU is another; a 4060 Ti only in its 16 GB variant), else the
 * consumer estimate of its memory size, and above 28 GiB the measured h200. */
Test(profile, auto_picks_the_devices_own_profile_else_the_nearest_by_memory)
{
    static const struct {
        const char *name;
        double gib;
        const char *want;
        int matched;
    } cases[] = {
        {"NVIDIA H200", 140.4, "h200", 1},
        {"NVIDIA H200 NVL", 140.4, "h200", 1},
        {"NVIDIA GeForce RTX 4090", 23.6, "rtx4090", 1},
        {"NVIDIA GeForce RTX 4080", 15.6, "rtx4080", 1},
        {"NVIDIA GeForce RTX 3090", 23.7, "rtx3090", 1},
        {"NVIDIA GeForce RTX 4060 Ti", 15.6, "rtx4060ti-16g", 1},
        {"NVIDIA GeForce RTX 4060 Ti", 7.6, "consumer-8g", 0},
        {"NVIDIA GH200 480GB", 94.5, "h200", 0},
        {"NVIDIA GeForce RTX 3060", 11.8, "consumer-12g", 0},
        {"NVIDIA RTX A4000", 15.7, "consumer-16g", 0},
        {"NVIDIA GeForce RTX 3070", 7.8, "consumer-8g", 0},
        {"NVIDIA GeForce GTX 1650", 3.8, "consumer-8g", 0},
        {"NVIDIA RTX A5000", 23.6, "consumer-24g", 0},
        {"NVIDIA A100-SXM4-80GB", 79.2, "h200", 0},
        {NULL, 0, "consumer-8g", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int matched = -1;
        const uvmrt_profile_t *p = uvmrt__profile_for_device(cases[i].name, (uint64_t)(cases[i].gib * GIB), &matched);
        cr_assert_not_null(p);
        cr_expect_str_eq(p->name, cases[i].want, "%s, %.1f GiB: %s", cases[i].name, cases[i].gib, p->name);
        cr_expect_eq(matched, cases[i].matched, "%s, %.1f GiB", cases[i].name, cases[i].gib);
    }
}

/* auto is the default, a value of its own, and on sim consumer-8g; what records and
 * messages call the profile is the one in use (uvmrt-plan --profile takes it), a
 * file's path for a file. */
Test(profile, auto_is_the_default_and_records_name_the_profile_in_use)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    uvmrt_context_t *ctx = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_str_eq(ctx->cfg.profile, "auto");
    cr_assert_str_eq(uvmrt_context_profile(ctx)->name, "consumer-8g");
    cr_assert_str_eq(uvmrt__profile_label(&ctx->cfg, ctx->profile), "consumer-8g");
    uvmrt_context_destroy(ctx);
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, "auto");
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    cr_assert_str_eq(uvmrt_context_profile(ctx)->name, "consumer-8g");
    uvmrt_context_destroy(ctx);
    tmp_dir();
    const char *path = write_text("card.json", doc(""));
    uvmrt_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.profile, sizeof cfg.profile, "%s", path);
    cr_assert_str_eq(uvmrt__profile_label(&cfg, uvmrt_profile_find("h200")), path);
}

/* uvmrt_choose's model contexts model the GPU the context plans for: its profile in
 * use, not the setting's text (on cuda, auto is resolved from the device; here the
 * parent's profile is set by hand to stand for that). */
Test(profile, model_contexts_take_the_profile_in_use)
{
    uvmrt_params_t p;
    sim_params(&p, UVMRT_POLICY_PREFETCH, 0, NULL);
    uvmrt_context_t *ctx = NULL, *model = NULL;
    cr_assert_eq(uvmrt_context_create(&p, &ctx), UVMRT_OK, "%s", log_text());
    const uvmrt_profile_t *resolved = ctx->profile;
    ctx->profile = uvmrt_profile_find("rtx4090"); /* as auto resolves it on an RTX 4090 */
    cr_assert_eq(uvmrt__context_create_model(ctx, 4 * GIB, NULL, NULL, &model), UVMRT_OK, "%s", log_text());
    cr_expect_str_eq(uvmrt_context_profile(model)->name, "rtx4090");
    uvmrt_context_destroy(model);
    ctx->profile = resolved;
    uvmrt_context_destroy(ctx);
}
