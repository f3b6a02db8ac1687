/*
 * report_file.c -- how a report reaches its path (uvmrt-report(5), FILES): "-" is
 * stdout; a regular file (or one to create) is replaced through a temporary file
 * and a rename, so a reader never sees half a report; a link to a regular file
 * has its target replaced; a FIFO or a character device is written in place;
 * anything else is refused. The umask is never read or set.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "report.h"

static const char *file_kind(mode_t m)
{
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

/* Opens a new file beside target, named target.tmpXXXXXX, with O_EXCL (never an
 * existing file or link) and mode 0666: the process's umask applies as to any file
 * it creates, without reading or changing the umask (umask() is process-wide, so
 * setting it races with other threads). -1 with errno set when none could be made. */
static int open_temp_beside(const char *target, char *tmp, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)tmp;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; attempt++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull; /* an LCG step: a new name each try */
        char sfx[7];
        for (int i = 0; i < 6; i++) sfx[i] = digits[(x >> (10 + 6 * i)) % 36];
        sfx[6] = '\0';
        if ((size_t)snprintf(tmp, len, "%s.tmp%s", target, sfx) >= len) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

/* A regular file, or one to create: written to a temporary file beside target and
 * renamed onto it, so a reader never sees half a report. An existing file keeps its
 * permission bits (old != NULL); a new one gets 0666 less the umask. `path` is what
 * the caller named (for messages); target is where it resolves. */
static uvmrt_status_t write_replacing(const uvmrt_context_t *ctx, const char *path, const char *target, int fmt,
                                      const struct stat *old)
{
    size_t n = strlen(target) + 16;
    char *tmp = malloc(n);
    if (tmp == NULL) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': out of memory", path);
        return UVMRT_ERR_NOMEM;
    }
    int fd = open_temp_beside(target, tmp, n);
    if (fd < 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': cannot create a temporary file beside '%s': %s", path,
                  target, strerror(errno));
        free(tmp);
        return UVMRT_ERR_IO;
    }
    /* permission bits only: a set-user-ID bit is not the report's to carry over */
    if (old != NULL && fchmod(fd, old->st_mode & 0777) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': cannot give '%s' the mode %03o of the file it replaces: %s",
                  path, tmp, (unsigned)(old->st_mode & 0777), strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return UVMRT_ERR_IO;
    }
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return UVMRT_ERR_IO;
    }
    char where[64 + 4096];
    snprintf(where, sizeof where, "'%s'", path);
    uvmrt_status_t st = uvmrt__report_to_stream(ctx, f, fmt, where);
    if (fclose(f) != 0 && st == UVMRT_OK) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        st = UVMRT_ERR_IO;
    }
    if (st == UVMRT_OK && rename(tmp, target) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': cannot rename '%s' onto '%s': %s", path, tmp, target,
                  strerror(errno));
        st = UVMRT_ERR_IO;
    }
    if (st != UVMRT_OK) unlink(tmp);
    free(tmp);
    return st;
}

/* A FIFO or a character device the user named (a pipe to another program, a
 * terminal, /dev/null): written in place, never created, truncated or replaced.
 * A FIFO without a reader fails at once instead of blocking the program. */
static uvmrt_status_t write_in_place(const uvmrt_context_t *ctx, const char *path, int fmt)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path,
                  errno == ENXIO ? "it is a FIFO with no reader" : strerror(errno));
        return UVMRT_ERR_IO;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        close(fd);
        return UVMRT_ERR_IO;
    }
    if (!S_ISFIFO(sb.st_mode) && !S_ISCHR(sb.st_mode)) { /* swapped since lstat: not ours to overwrite */
        LOG_ERROR(&ctx->log, "cannot write report '%s': it changed while being opened (now %s)", path,
                  file_kind(sb.st_mode));
        close(fd);
        return UVMRT_ERR_IO;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a full pipe waits for its reader */
    FILE *f = fdopen(fd, "w");
    if (f == NULL) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        close(fd);
        return UVMRT_ERR_IO;
    }
    char where[64 + 4096];
    snprintf(where, sizeof where, "'%s'", path);
    uvmrt_status_t st = uvmrt__report_to_stream(ctx, f, fmt, where);
    if (fclose(f) != 0 && st == UVMRT_OK) {
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        st = UVMRT_ERR_IO;
    }
    return st;
}

/* What happens depends on what is at path (uvmrt-report(5), FILES):
 *   "-"                      stdout
 *   nothing                  a new regular file (temporary file + rename)
 *   a regular file           replaced atomically, keeping its mode
 *   a link to a regular file the link's target is replaced (temporary file in the
 *                            target's folder + rename); the link stays
 *   a FIFO, a character device (or a link to one)   written in place
 *   anything else (a directory, a block device, a socket, a dangling link): refused */
static uvmrt_status_t write_to(const uvmrt_context_t *ctx, const char *path, int fmt)
{
    if (strcmp(path, "-") == 0) return uvmrt__report_to_stream(ctx, stdout, fmt, "to stdout");
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return write_replacing(ctx, path, path, fmt, NULL);
        LOG_ERROR(&ctx->log, "cannot write report '%s': %s", path, strerror(errno));
        return UVMRT_ERR_IO;
    }
    int is_link = S_ISLNK(sb.st_mode);
    if (is_link && stat(path, &sb) != 0) {
        LOG_ERROR(&ctx->log,
                  "cannot write report '%s': it is a symbolic link to nothing that can be reached (%s); "
                  "expected a link to an existing file",
                  path, strerror(errno));
        return UVMRT_ERR_IO;
    }
    if (S_ISREG(sb.st_mode)) {
        if (!is_link) return write_replacing(ctx, path, path, fmt, &sb);
        char *real = realpath(path, NULL);
        if (real == NULL) {
            LOG_ERROR(&ctx->log, "cannot write report '%s': cannot resolve the symbolic link: %s", path,
                      strerror(errno));
            return UVMRT_ERR_IO;
        }
        uvmrt_status_t st = write_replacing(ctx, path, real, fmt, &sb);
        free(real);
        return st;
    }
    if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)) return write_in_place(ctx, path, fmt);
    LOG_ERROR(&ctx->log,
              "cannot write report '%s': it is %s%s; expected a regular file (or a path to create), a FIFO, "
              "a character device, or - for stdout",
              path, is_link ? "a symbolic link to " : "", file_kind(sb.st_mode));
    return UVMRT_ERR_IO;
}

uvmrt_status_t uvmrt_report_write(const uvmrt_context_t *ctx, const char *format, const char *path)
{
    if (ctx == NULL) return UVMRT_ERR_INVALID;
    if (format == NULL) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format is NULL: expected text, json, csv or trace");
        return UVMRT_ERR_INVALID;
    }
    int fmt = uvmrt__report_format(format);
    if (fmt < 0) {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: format '%s': expected text, json, csv or trace", format);
        return UVMRT_ERR_INVALID;
    }
    if (path != NULL && path[0] == '\0') {
        LOG_ERROR(&ctx->log, "uvmrt_report_write: path is empty: expected a file path, - or NULL (stdout)");
        return UVMRT_ERR_INVALID;
    }
    return write_to(ctx, path == NULL ? "-" : path, fmt);
}

uvmrt_status_t uvmrt__report_at_destroy(const uvmrt_context_t *ctx)
{
    uvmrt_status_t st = UVMRT_OK;
    const char *t = ctx->cfg.trace;
    if (strcmp(t, "stderr") == 0) st = uvmrt__report_to_stream(ctx, stderr, UVMRT__FMT_TRACE, "to stderr");
    else if (strcmp(t, "none") != 0 && t[0] != '\0') st = write_to(ctx, t, UVMRT__FMT_TRACE);
    const char *r = ctx->cfg.report;
    if (strcmp(r, "none") == 0 || r[0] == '\0') return st;
    uvmrt_status_t st2;
    if (strcmp(r, "stderr") == 0) {
        st2 = uvmrt__report_to_stream(ctx, stderr, UVMRT__FMT_TEXT, "to stderr");
    } else {
        const char *colon = strchr(r, ':'); /* settings.c accepted only FORMAT:PATH here */
        char fmt[8];
        snprintf(fmt, sizeof fmt, "%.*s", (int)(colon - r), r);
        st2 = write_to(ctx, colon + 1, uvmrt__report_format(fmt));
    }
    return st != UVMRT_OK ? st : st2;
}
