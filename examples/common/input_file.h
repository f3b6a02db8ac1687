/*
 * input_file.h -- opening a file the programs read (a record, a model, a weights
 * file) so that what a path names cannot hang or mislead them: opened with
 * O_NONBLOCK (a FIFO without a writer would block open(2) forever, one with a
 * writer every read), then fstat'd, and refused unless it is a regular file.
 * Header-only: the tools and the example programs both include it.
 */
#ifndef UVMRT_INPUT_FILE_H
#define UVMRT_INPUT_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a file that is not a regular one is, for messages. */
static inline const char *input_file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* path opened for reading, blocking again once it is known to be a regular file;
 * -1 with *why set (strerror's text, or "a FIFO, not a regular file"...) otherwise.
 * st (may be NULL) receives its fstat. */
static inline int input_file_open(const char *path, struct stat *st, const char **why)
{
    static __thread char buf[96];
    struct stat s;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        *why = strerror(errno);
        return -1;
    }
    if (fstat(fd, &s) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (!S_ISREG(s.st_mode)) {
        snprintf(buf, sizeof buf, "%s, not a regular file", input_file_kind(s.st_mode));
        *why = buf;
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        *why = strerror(errno);
        close(fd);
        return -1;
    }
    if (st) *st = s;
    return fd;
}

/* The same as a stdio stream ("rb"). */
static inline FILE *input_file_fopen(const char *path, struct stat *st, const char **why)
{
    int fd = input_file_open(path, st, why);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        *why = strerror(errno);
        close(fd);
    }
    return f;
}

#endif /* UVMRT_INPUT_FILE_H */
