/*
 * test_outfile.c -- src/base/outfile.c, the one way every output file reaches its path
 * (issue 21): the check before a run, and open/close by the report rules.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

static char dir[64];
static char *at(const char *name)
{
    static char path[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}
static void fresh(void)
{
    snprintf(dir, sizeof dir, "/tmp/uvmrt-outfile-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}
static void cleanup(void)
{
    char cmd[128];
    if (dir[0] == '\0') return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "test_outfile: could not remove %s\n", dir);
}
TestSuite(outfile, .fini = cleanup);

static void put(const char *name, const char *text)
{
    FILE *f = fopen(at(name), "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}
static void check_fails(const char *path, const char *needle)
{
    char why[600] = "";
    cr_assert_eq(uvmrt__outfile_check(path, 0, why, sizeof why), -1, "%s: passed", path);
    cr_assert_not_null(strstr(why, needle), "%s: '%s' does not say '%s'", path, why, needle);
}

/* What the programs check before any work: each problem named. */
Test(outfile, check_names_what_is_wrong)
{
    fresh();
    put("afile", "keep");
    cr_assert_eq(mkdir(at("adir"), 0755), 0);
    cr_assert_eq(symlink("nowhere", at("dangling")), 0);
    check_fails(at("nodir/x"), "does not exist");
    check_fails(at("afile/x"), "is a regular file, not a folder");
    check_fails(at("afile/sub/x"), "not a folder");
    check_fails("/proc/uvmrt-outfile-x", "cannot create a file in '/proc'");
    check_fails(at("adir"), "it is a directory");
    check_fails(at("adir/"), "it is a directory");
    check_fails(at("nodir/"), "ends in '/'");
    check_fails(at("dangling"), "symbolic link to nothing");
    check_fails("", "expected a file path");
    char why[600];
    cr_assert_eq(uvmrt__outfile_check(at("new.json"), 0, why, sizeof why), 0, "%s", why);
    cr_assert_eq(uvmrt__outfile_check(at("afile"), 0, why, sizeof why), 0, "%s", why);
    cr_assert_eq(uvmrt__outfile_check("-", UVMRT__OUTFILE_DASH_STDOUT, why, sizeof why), 0, "%s", why);
    cr_assert_eq(uvmrt__outfile_check("/dev/null", 0, why, sizeof why), 0, "%s", why);
    /* a FIFO is checked, not opened: no reader needed yet, and none sees an end of file */
    cr_assert_eq(mkfifo(at("fifo"), 0600), 0);
    cr_assert_eq(uvmrt__outfile_check(at("fifo"), 0, why, sizeof why), 0, "%s", why);
    cr_assert_eq(entries(), 4, "the check left a file behind"); /* afile, adir, dangling, fifo */
}

/* A regular file is replaced whole, keeping its mode; a failed or abandoned write
 * leaves it as it was and no temporary file. */
Test(outfile, regular_files_are_replaced_whole)
{
    fresh();
    put("f.txt", "old");
    cr_assert_eq(chmod(at("f.txt"), 0640), 0);
    uvmrt__outfile_t o;
    char why[600];
    cr_assert_eq(uvmrt__outfile_open(&o, at("f.txt"), 0, why, sizeof why), 0, "%s", why);
    fputs("new", o.f);
    FILE *r = fopen(at("f.txt"), "r");
    char buf[8] = "";
    cr_assert(fgets(buf, sizeof buf, r) != NULL);
    fclose(r);
    cr_assert_str_eq(buf, "old", "a reader saw the file before it was complete");
    cr_assert_eq(uvmrt__outfile_close(&o, why, sizeof why), 0, "%s", why);
    r = fopen(at("f.txt"), "r");
    cr_assert(fgets(buf, sizeof buf, r) != NULL);
    fclose(r);
    cr_assert_str_eq(buf, "new");
    struct stat sb;
    cr_assert(stat(at("f.txt"), &sb) == 0 && (sb.st_mode & 0777) == 0640);
    cr_assert_eq(entries(), 1);

    cr_assert_eq(uvmrt__outfile_open(&o, at("f.txt"), 0, why, sizeof why), 0, "%s", why);
    fputs("half", o.f);
    uvmrt__outfile_abandon(&o);
    r = fopen(at("f.txt"), "r");
    cr_assert(fgets(buf, sizeof buf, r) != NULL);
    fclose(r);
    cr_assert_str_eq(buf, "new");
    cr_assert_eq(entries(), 1, "an abandoned write left its temporary file");
}

/* Links are written through; FIFOs and devices in place; a FIFO with no reader fails
 * at once; a write error is reported at close. */
Test(outfile, links_fifos_and_devices)
{
    alarm(30); /* a hang fails the test (not .timeout: Criterion 2.4.1's runner leaks when timed tests overlap) */
    fresh();
    put("target", "old");
    cr_assert_eq(symlink("target", at("link")), 0);
    uvmrt__outfile_t o;
    char why[600];
    cr_assert_eq(uvmrt__outfile_open(&o, at("link"), 0, why, sizeof why), 0, "%s", why);
    fputs("new", o.f);
    cr_assert_eq(uvmrt__outfile_close(&o, why, sizeof why), 0, "%s", why);
    struct stat sb;
    cr_assert(lstat(at("link"), &sb) == 0 && S_ISLNK(sb.st_mode), "the link was replaced");
    FILE *r = fopen(at("target"), "r");
    char buf[8] = "";
    cr_assert(fgets(buf, sizeof buf, r) != NULL);
    fclose(r);
    cr_assert_str_eq(buf, "new");

    cr_assert_eq(mkfifo(at("fifo"), 0600), 0);
    cr_assert_eq(uvmrt__outfile_open(&o, at("fifo"), 0, why, sizeof why), -1);
    cr_assert_not_null(strstr(why, "FIFO with no reader"), "%s", why);
    cr_assert(lstat(at("fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode));
    int rd = open(at("fifo"), O_RDONLY | O_NONBLOCK); /* a reader: now it opens, in place */
    cr_assert(rd >= 0);
    cr_assert_eq(uvmrt__outfile_open(&o, at("fifo"), 0, why, sizeof why), 0, "%s", why);
    fputs("hello", o.f);
    cr_assert_eq(uvmrt__outfile_close(&o, why, sizeof why), 0, "%s", why);
    cr_assert_eq(read(rd, buf, 5), 5);
    close(rd);
    cr_assert(lstat(at("fifo"), &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO was replaced");

    cr_assert_eq(uvmrt__outfile_open(&o, "/dev/full", 0, why, sizeof why), 0, "%s", why);
    for (int i = 0; i < 10000; i++) fputs("full ", o.f);
    cr_assert_eq(uvmrt__outfile_close(&o, why, sizeof why), -1);
    cr_assert_not_null(strstr(why, "No space left on device"), "%s", why);
    cr_assert(stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode));
}
