/* outfile.c -- see outfile.h. The umask is never read or set (umask() is
 * process-wide: setting it races with other threads). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"

enum dest { DEST_STDOUT, DEST_NEW, DEST_REGULAR, DEST_IN_PLACE };

const char *uvmrt__outfile_kind(unsigned mode)
{
    mode_t m = (mode_t)mode;
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISLNK(m)) return "a symbolic link";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "a special file";
}

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
    if (why != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The folder a new file at path goes in ("." for a bare name), malloc'd. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL) return strdup(".");
    while (slash > path && slash[-1] == '/') slash--; /* "a//b" -> "a" */
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* Why a file cannot be made at path (lstat said ENOENT or ENOTDIR): names the
 * folder and what is wrong with it. */
static int folder_problem(const char *path, int err, char *why, size_t len)
{
    char *dir = folder_of(path);
    if (dir == NULL) return fail(why, len, "out of memory");
    struct stat sb;
    int rc;
    if (stat(dir, &sb) != 0)
        rc = errno == ENOENT    ? fail(why, len, "its folder '%s' does not exist", dir)
             : errno == ENOTDIR ? fail(why, len, "its folder '%s' is not a folder (a part of it is a file)", dir)
                                : fail(why, len, "its folder '%s': %s", dir, strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        rc = fail(why, len, "its folder '%s' is %s, not a folder", dir, uvmrt__outfile_kind(sb.st_mode));
    else
        rc = fail(why, len, "%s", strerror(err));
    free(dir);
    return rc;
}

/* What is at path and where its bytes go: *target (malloc'd, for a new or regular
 * file) and *old (a regular file's stat, for its mode). -1 with why filled for a
 * path that the rules refuse. */
static int resolve(const char *path, unsigned flags, enum dest *kind, char **target, struct stat *old, char *why,
                   size_t len)
{
    *target = NULL;
    if (path == NULL || path[0] == '\0') return fail(why, len, "expected a file path");
    if ((flags & UVMRT__OUTFILE_DASH_STDOUT) && strcmp(path, "-") == 0) {
        *kind = DEST_STDOUT;
        return 0;
    }
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            if (e == ENOENT && path[strlen(path) - 1] != '/') {
                *kind = DEST_NEW;
                *target = strdup(path);
                return *target ? 0 : fail(why, len, "out of memory");
            }
            if (e == ENOENT) return fail(why, len, "expected a file path, not a folder's (it ends in '/')");
            return folder_problem(path, e, why, len);
        }
        return fail(why, len, "%s", strerror(e));
    }
    int is_link = S_ISLNK(sb.st_mode);
    if (is_link && stat(path, &sb) != 0)
        return fail(why, len,
                    "it is a symbolic link to nothing that can be reached (%s); expected a link to an existing file",
                    strerror(errno));
    if (S_ISREG(sb.st_mode)) {
        *kind = DEST_REGULAR;
        *old = sb;
        *target = is_link ? realpath(path, NULL) : strdup(path);
        if (*target == NULL)
            return fail(why, len, "%s%s", is_link ? "cannot resolve the symbolic link: " : "", strerror(errno));
        return 0;
    }
    if (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)) {
        *kind = DEST_IN_PLACE;
        return 0;
    }
    char what[96];
    snprintf(what, sizeof what, "%s%s", is_link ? "a symbolic link to " : "", uvmrt__outfile_kind(sb.st_mode));
    return fail(why, len, "it is %s; expected a regular file (or a path to create), a FIFO or a character device%s",
                what, (flags & UVMRT__OUTFILE_DASH_STDOUT) ? ", or - for stdout" : "");
}

/* Opens a new file beside target, named target.tmpXXXXXX, with O_EXCL (never an
 * existing file or link) and mode 0666: the umask applies as to any file the process
 * creates (mkstemp would make it 0600). *tmp is malloc'd. -1 with errno set when
 * none could be made. */
static int open_temp_beside(const char *target, char **tmp)
{
    size_t len = strlen(target) + 16;
    *tmp = malloc(len);
    if (*tmp == NULL) return -1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)*tmp;
    static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (int attempt = 0; attempt < 100; attempt++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull; /* an LCG step: a new name each try */
        char sfx[7];
        for (int i = 0; i < 6; i++) sfx[i] = digits[(x >> (10 + 6 * i)) % 36];
        sfx[6] = '\0';
        snprintf(*tmp, len, "%s.tmp%s", target, sfx);
        int fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) {
            if (fd < 0) {
                int e = errno;
                free(*tmp);
                *tmp = NULL;
                errno = e;
            }
            return fd;
        }
    }
    free(*tmp);
    *tmp = NULL;
    errno = EEXIST;
    return -1;
}

static int temp_problem(const char *target, int err, char *why, size_t len)
{
    if (err == ENAMETOOLONG) return fail(why, len, "the path is too long for a temporary file beside it");
    char *dir = folder_of(target);
    struct stat sb;
    int rc = dir != NULL && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
                 ? folder_problem(target, err, why, len)
                 : fail(why, len, "cannot create a file in '%s': %s", dir ? dir : target, strerror(err));
    free(dir);
    return rc;
}

int uvmrt__outfile_check(const char *path, unsigned flags, char *why, size_t len)
{
    enum dest kind;
    char *target = NULL;
    struct stat old;
    if (resolve(path, flags, &kind, &target, &old, why, len) != 0) return -1;
    int rc = 0;
    if (kind == DEST_NEW || kind == DEST_REGULAR) {
        char *tmp = NULL;
        int fd = open_temp_beside(target, &tmp);
        if (fd < 0) rc = temp_problem(target, errno, why, len);
        else {
            close(fd);
            unlink(tmp);
            free(tmp);
        }
    } else if (kind == DEST_IN_PLACE && access(path, W_OK) != 0) {
        rc = fail(why, len, "%s", strerror(errno));
    }
    free(target);
    return rc;
}

/* A FIFO or a character device (or a link to one): opened where it is. */
static int open_in_place(uvmrt__outfile_t *o, const char *path, char *why, size_t len)
{
    int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC); /* never blocks on a FIFO */
    if (fd < 0)
        return fail(why, len, "%s", errno == ENXIO ? "it is a FIFO with no reader" : strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (!S_ISFIFO(sb.st_mode) && !S_ISCHR(sb.st_mode))) { /* swapped since lstat */
        int e = errno;
        close(fd);
        return fail(why, len, "it changed while being opened (now %s)",
                    e ? strerror(e) : uvmrt__outfile_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* a full pipe waits for its reader */
    o->f = fdopen(fd, "w");
    if (o->f == NULL) {
        int e = errno;
        close(fd);
        return fail(why, len, "%s", strerror(e));
    }
    return 0;
}

int uvmrt__outfile_open(uvmrt__outfile_t *o, const char *path, unsigned flags, char *why, size_t len)
{
    memset(o, 0, sizeof *o);
    enum dest kind;
    struct stat old;
    char *target = NULL;
    if (resolve(path, flags, &kind, &target, &old, why, len) != 0) return -1;
    if (kind == DEST_STDOUT) {
        o->f = stdout;
        return 0;
    }
    if (kind == DEST_IN_PLACE) return open_in_place(o, path, why, len);
    char *tmp = NULL;
    int fd = open_temp_beside(target, &tmp);
    if (fd < 0) {
        int rc = temp_problem(target, errno, why, len);
        free(target);
        return rc;
    }
    /* permission bits only: a set-user-ID bit is not the new file's to carry over */
    if (kind == DEST_REGULAR && fchmod(fd, old.st_mode & 0777) != 0) {
        int e = errno;
        char mode[8];
        snprintf(mode, sizeof mode, "%03o", (unsigned)(old.st_mode & 0777));
        close(fd);
        unlink(tmp);
        fail(why, len, "cannot give the temporary file the mode %s of the file it replaces: %s", mode, strerror(e));
        free(tmp);
        free(target);
        return -1;
    }
    o->f = fdopen(fd, "w");
    if (o->f == NULL) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        free(target);
        return fail(why, len, "%s", strerror(e));
    }
    o->tmp = tmp;
    o->target = target;
    return 0;
}

static void release(uvmrt__outfile_t *o)
{
    free(o->tmp);
    free(o->target);
    memset(o, 0, sizeof *o);
}

int uvmrt__outfile_close(uvmrt__outfile_t *o, char *why, size_t len)
{
    if (o->f == NULL) return 0;
    int bad = ferror(o->f), e = EIO;
    if (fflush(o->f) != 0) bad = 1, e = errno; /* a failed write's error again, when it is still there */
    if (o->f == stdout) {
        o->f = NULL;
        return bad ? fail(why, len, "write failed: %s", strerror(e)) : 0;
    }
    if (!bad && o->tmp != NULL && fsync(fileno(o->f)) != 0) bad = 1, e = errno; /* the rename publishes it */
    if (fclose(o->f) != 0 && !bad) bad = 1, e = errno;
    o->f = NULL;
    if (!bad && o->tmp != NULL && rename(o->tmp, o->target) != 0) {
        e = errno;
        if (o->tmp) unlink(o->tmp);
        char *dir = folder_of(o->target);
        fail(why, len, "cannot rename the temporary file onto it in '%s': %s", dir ? dir : o->target, strerror(e));
        free(dir);
        release(o);
        return -1;
    }
    if (bad) {
        if (o->tmp) unlink(o->tmp);
        fail(why, len, "write failed: %s", strerror(e));
    }
    release(o);
    return bad ? -1 : 0;
}

void uvmrt__outfile_abandon(uvmrt__outfile_t *o)
{
    if (o->f == NULL) return;
    if (o->f == stdout) fflush(stdout);
    else fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    release(o);
}
