/*
 * spill.c -- the disk tier's files and engines (spill.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config.h"
#include "spill.h"

#ifdef UVMRT_HAVE_LIBURING
#include <liburing.h>
#endif

#define POOL_THREADS 4

typedef struct spill_file {
    int fd; /* -1: free slot */
    char name[32];
    char *label;
    uint64_t bytes;
} spill_file_t;

/* One piece of a request, moved by one system call (or ring entry). */
typedef struct chunk {
    uvmrt_spill_req_t *req;
    uint64_t off, len;
} chunk_t;

struct uvmrt_spill_req {
    int file, write;
    char *buf;
    uint64_t bytes;
    uint64_t handed; /* bytes given to the engine so far */
    uint64_t n_chunks, done_chunks;
    int finished;
    /* the first failure: -errno, or a short count (res >= 0 below len) at err_off */
    int failed;
    ssize_t err_res;
    uint64_t err_off, err_len;
    uvmrt_spill_req_t *next;
};

struct uvmrt_spill {
    uvmrt_spill_ops_t ops;
    const uvmrt_log_t *log;
    char *path;
    int dirfd;
    int direct;
    spill_file_t *files;
    int n_files;
    int use_uring;
    char why[160];
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    uvmrt_spill_req_t *head, *tail; /* requests with bytes not yet handed out */
    int stop;
    pthread_t threads[POOL_THREADS];
    int n_threads;
#ifdef UVMRT_HAVE_LIBURING
    struct io_uring ring;
    int ring_up;
#endif
};

/* ------------------------------------------------------------------ the real calls */
static int real_open(int dirfd, const char *name, int flags, mode_t mode)
{
    int fd = openat(dirfd, name, flags, mode);
    return fd < 0 ? -errno : fd;
}
static int real_fallocate(int fd, off_t bytes)
{
    if (fallocate(fd, 0, 0, bytes) == 0) return 0;
    if (errno != EOPNOTSUPP) return -errno;
    int e = posix_fallocate(fd, 0, bytes); /* a filesystem without fallocate: written out */
    return -e;
}
static int real_uring_probe(void) { return 0; }
static ssize_t real_result(int write, ssize_t res)
{
    (void)write;
    return res;
}

/* ------------------------------------------------------------------ stale directories */
/* The start time of process pid (clock ticks since boot, /proc/PID/stat field 22), 0 when unknown. */
static unsigned long long proc_start(pid_t pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "re");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *s = strrchr(buf, ')'); /* the command may hold spaces */
    if (s == NULL) return 0;
    unsigned long long start = 0;
    /* after ")": state is field 3; starttime is field 22 */
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
        return 0;
    return start;
}

/* 1 when the run that named a subdirectory name is gone: its pid is not alive, or it
 * is another process now (a different start time). */
static int run_is_gone(const char *name)
{
    int pid;
    unsigned long long start;
    unsigned n;
    char tail;
    if (sscanf(name + strlen(UVMRT_SPILL_PREFIX), "%d.%llu.%u%c", &pid, &start, &n, &tail) != 3 || pid <= 0) return 0;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    unsigned long long now = proc_start(pid);
    return now != 0 && now != start;
}

/* Removes subdirectory name of dirfd and the regular files in it (no symlinks followed). */
static int remove_tree(int dirfd, const char *name)
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) unlinkat(fd, e->d_name, 0);
    closedir(d);
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
}

/* Removes the private subdirectories of killed runs of this user. */
static void remove_stale(int dirfd, const uvmrt_log_t *log, const char *dir)
{
    int fd = dup(dirfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (d == NULL) {
        if (fd >= 0) close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, UVMRT_SPILL_PREFIX, strlen(UVMRT_SPILL_PREFIX)) != 0) continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != geteuid() || !run_is_gone(e->d_name))
            continue;
        int r = remove_tree(dirfd, e->d_name);
        if (r == 0) LOG_INFO(log, "spill: removed %s/%s, left by a run that ended without cleaning up", dir, e->d_name);
        else LOG_WARN(log, "spill: cannot remove %s/%s left by an ended run: %s", dir, e->d_name, strerror(-r));
    }
    closedir(d);
}

/* ------------------------------------------------------------------ requests */
/* The next chunk to move, or 0 when none is waiting (called with mu held). */
static int take_chunk(uvmrt_spill_t *sp, chunk_t *c)
{
    uvmrt_spill_req_t *r = sp->head;
    if (r == NULL) return 0;
    uint64_t len = r->bytes - r->handed;
    if (len > UVMRT_SPILL_CHUNK) len = UVMRT_SPILL_CHUNK;
    *c = (chunk_t){r, r->handed, len};
    r->handed += len;
    if (r->handed == r->bytes) {
        sp->head = r->next;
        if (sp->head == NULL) sp->tail = NULL;
    }
    return 1;
}

/* Judges a chunk's result (called with mu held). */
static void chunk_done(uvmrt_spill_t *sp, const chunk_t *c, ssize_t res)
{
    uvmrt_spill_req_t *r = c->req;
    res = sp->ops.result(r->write, res);
    if (res != (ssize_t)c->len && !r->failed) {
        r->failed = 1;
        r->err_res = res;
        r->err_off = c->off;
        r->err_len = c->len;
    }
    if (++r->done_chunks == r->n_chunks) {
        r->finished = 1;
        pthread_cond_broadcast(&sp->done);
    }
}

static ssize_t move_sync(const uvmrt_spill_t *sp, const chunk_t *c)
{
    int fd = sp->files[c->req->file].fd;
    ssize_t n = c->req->write ? pwrite(fd, c->req->buf + c->off, c->len, (off_t)c->off)
                              : pread(fd, c->req->buf + c->off, c->len, (off_t)c->off);
    return n < 0 ? -errno : n;
}

static void *pool_thread(void *arg)
{
    uvmrt_spill_t *sp = arg;
    pthread_mutex_lock(&sp->mu);
    for (;;) {
        chunk_t c;
        while (!sp->stop && !take_chunk(sp, &c)) pthread_cond_wait(&sp->work, &sp->mu);
        if (sp->stop) break;
        pthread_mutex_unlock(&sp->mu);
        ssize_t res = move_sync(sp, &c);
        pthread_mutex_lock(&sp->mu);
        chunk_done(sp, &c, res);
    }
    pthread_mutex_unlock(&sp->mu);
    return NULL;
}

#ifdef UVMRT_HAVE_LIBURING
/* One thread owns the ring: it keeps up to UVMRT_SPILL_DEPTH chunks in flight. */
static void *uring_thread(void *arg)
{
    uvmrt_spill_t *sp = arg;
    chunk_t slots[UVMRT_SPILL_DEPTH];
    int busy[UVMRT_SPILL_DEPTH] = {0};
    unsigned inflight = 0;
    for (;;) {
        pthread_mutex_lock(&sp->mu);
        while (!sp->stop && inflight == 0 && sp->head == NULL) pthread_cond_wait(&sp->work, &sp->mu);
        if (sp->stop && inflight == 0) {
            pthread_mutex_unlock(&sp->mu);
            return NULL;
        }
        unsigned queued = 0;
        for (unsigned i = 0; i < UVMRT_SPILL_DEPTH && !sp->stop; i++) {
            if (busy[i]) continue;
            struct io_uring_sqe *sqe = sp->head != NULL ? io_uring_get_sqe(&sp->ring) : NULL;
            if (sqe == NULL || !take_chunk(sp, &slots[i])) break;
            chunk_t *c = &slots[i];
            int fd = sp->files[c->req->file].fd;
            if (c->req->write) io_uring_prep_write(sqe, fd, c->req->buf + c->off, (unsigned)c->len, c->off);
            else io_uring_prep_read(sqe, fd, c->req->buf + c->off, (unsigned)c->len, c->off);
            io_uring_sqe_set_data64(sqe, i);
            busy[i] = 1;
            queued++;
        }
        pthread_mutex_unlock(&sp->mu);
        if (queued > 0) {
            int s = io_uring_submit(&sp->ring);
            if (s < 0) { /* cannot happen after a successful init, but never lose a chunk */
                pthread_mutex_lock(&sp->mu);
                for (unsigned i = 0; i < UVMRT_SPILL_DEPTH; i++)
                    if (busy[i] && queued > 0) {
                        busy[i] = 0;
                        queued--;
                        chunk_done(sp, &slots[i], s);
                    }
                pthread_mutex_unlock(&sp->mu);
            }
            inflight += queued;
        }
        if (inflight == 0) continue;
        struct io_uring_cqe *cqe;
        int w = io_uring_wait_cqe(&sp->ring, &cqe);
        if (w < 0) continue; /* EINTR */
        unsigned i = (unsigned)io_uring_cqe_get_data64(cqe);
        ssize_t res = cqe->res;
        io_uring_cqe_seen(&sp->ring, cqe);
        pthread_mutex_lock(&sp->mu);
        busy[i] = 0;
        inflight--;
        chunk_done(sp, &slots[i], res);
        pthread_mutex_unlock(&sp->mu);
    }
}
#endif

/* ------------------------------------------------------------------ the engine */
static int start_engine(uvmrt_spill_t *sp)
{
    sp->use_uring = 0;
#ifdef UVMRT_HAVE_LIBURING
    int r = sp->ops.uring_probe();
    if (r == 0) r = io_uring_queue_init(UVMRT_SPILL_DEPTH, &sp->ring, 0);
    if (r == 0) {
        sp->ring_up = 1;
        if (pthread_create(&sp->threads[0], NULL, uring_thread, sp) == 0) {
            sp->n_threads = 1;
            sp->use_uring = 1;
            snprintf(sp->why, sizeof sp->why, "io_uring_queue_init succeeded");
            return 0;
        }
        io_uring_queue_exit(&sp->ring);
        sp->ring_up = 0;
        snprintf(sp->why, sizeof sp->why, "no thread for the ring");
    } else {
        snprintf(sp->why, sizeof sp->why, "io_uring_queue_init: %s", strerror(-r));
    }
#else
    snprintf(sp->why, sizeof sp->why, "built without liburing");
#endif
    for (int i = 0; i < POOL_THREADS; i++) {
        if (pthread_create(&sp->threads[i], NULL, pool_thread, sp) != 0) break;
        sp->n_threads++;
    }
    return sp->n_threads > 0 ? 0 : -1;
}

static void stop_engine(uvmrt_spill_t *sp)
{
    pthread_mutex_lock(&sp->mu);
    sp->stop = 1;
    pthread_cond_broadcast(&sp->work);
    pthread_mutex_unlock(&sp->mu);
    for (int i = 0; i < sp->n_threads; i++) pthread_join(sp->threads[i], NULL);
    sp->n_threads = 0;
#ifdef UVMRT_HAVE_LIBURING
    if (sp->ring_up) io_uring_queue_exit(&sp->ring);
    sp->ring_up = 0;
#endif
}

/* ------------------------------------------------------------------ open / close */
static atomic_uint spill_serial;

static void spill_free(uvmrt_spill_t *sp)
{
    if (sp->dirfd >= 0) close(sp->dirfd);
    pthread_mutex_destroy(&sp->mu);
    pthread_cond_destroy(&sp->work);
    pthread_cond_destroy(&sp->done);
    free(sp->files);
    free(sp->path);
    free(sp);
}

/* Creates and opens this run's subdirectory of dir; 0 or -errno. */
static int make_private_dir(uvmrt_spill_t *sp, const char *dir)
{
    char name[96];
    snprintf(name, sizeof name, UVMRT_SPILL_PREFIX "%d.%llu.%u", (int)getpid(), proc_start(getpid()),
             atomic_fetch_add(&spill_serial, 1));
    size_t len = strlen(dir) + 1 + strlen(name) + 1;
    sp->path = malloc(len);
    if (sp->path == NULL) return -ENOMEM;
    snprintf(sp->path, len, "%s/%s", dir, name);
    int parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) return -errno;
    remove_stale(parent, sp->log, dir);
    int r = mkdirat(parent, name, 0700) == 0 ? 0 : -errno;
    if (r == 0) {
        sp->dirfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sp->dirfd < 0) {
            r = -errno;
            unlinkat(parent, name, AT_REMOVEDIR);
        }
    }
    close(parent);
    return r;
}

uvmrt_status_t uvmrt__spill_open(const char *dir, const uvmrt_spill_ops_t *ops, const uvmrt_log_t *log,
                                 uvmrt_spill_t **out)
{
    uvmrt_spill_t *sp = calloc(1, sizeof *sp);
    if (sp == NULL) return UVMRT_ERR_NOMEM;
    if (ops != NULL) sp->ops = *ops;
    if (sp->ops.open_file == NULL) sp->ops.open_file = real_open;
    if (sp->ops.fallocate == NULL) sp->ops.fallocate = real_fallocate;
    if (sp->ops.uring_probe == NULL) sp->ops.uring_probe = real_uring_probe;
    if (sp->ops.result == NULL) sp->ops.result = real_result;
    sp->log = log;
    sp->dirfd = -1;
    sp->direct = 1;
    pthread_mutex_init(&sp->mu, NULL);
    pthread_cond_init(&sp->work, NULL);
    pthread_cond_init(&sp->done, NULL);
    int r = make_private_dir(sp, dir);
    if (r != 0) {
        LOG_ERROR(log,
                  "UVMRT_SPILL_DIR=%s: cannot create a private subdirectory there: %s (expected an existing "
                  "directory this user may write)",
                  dir, strerror(-r));
        spill_free(sp);
        return r == -ENOMEM ? UVMRT_ERR_NOMEM : UVMRT_ERR_IO;
    }
    if (start_engine(sp) != 0) {
        LOG_ERROR(log, "spill %s: cannot start the I/O threads", sp->path);
        unlinkat(AT_FDCWD, sp->path, AT_REMOVEDIR);
        spill_free(sp);
        return UVMRT_ERR_NOMEM;
    }
    LOG_INFO(log, "spill: %s, engine %s (%s)", sp->path, uvmrt__spill_engine(sp), sp->why);
    *out = sp;
    return UVMRT_OK;
}

void uvmrt__spill_close(uvmrt_spill_t *sp)
{
    if (sp == NULL) return;
    stop_engine(sp);
    for (int i = 0; i < sp->n_files; i++) uvmrt__spill_file_remove(sp, i);
    if (unlinkat(AT_FDCWD, sp->path, AT_REMOVEDIR) != 0)
        LOG_WARN(sp->log, "spill: cannot remove %s: %s", sp->path, strerror(errno));
    spill_free(sp);
}

const char *uvmrt__spill_engine(const uvmrt_spill_t *sp) { return sp->use_uring ? "io_uring" : "threads"; }
const char *uvmrt__spill_engine_why(const uvmrt_spill_t *sp) { return sp->why; }
const char *uvmrt__spill_path(const uvmrt_spill_t *sp) { return sp->path; }
int uvmrt__spill_direct(const uvmrt_spill_t *sp) { return sp->direct; }

/* ------------------------------------------------------------------ files */
static uint64_t round_up(uint64_t v) { return (v + UVMRT_SPILL_ALIGN - 1) / UVMRT_SPILL_ALIGN * UVMRT_SPILL_ALIGN; }

/* A free slot of files (grown), or -1. */
static int file_slot(uvmrt_spill_t *sp)
{
    for (int i = 0; i < sp->n_files; i++)
        if (sp->files[i].fd < 0 && sp->files[i].label == NULL) return i;
    spill_file_t *f = realloc(sp->files, (size_t)(sp->n_files + 1) * sizeof *f);
    if (f == NULL) return -1;
    sp->files = f;
    f[sp->n_files] = (spill_file_t){.fd = -1};
    return sp->n_files++;
}

/* Opens name O_DIRECT, or buffered when the filesystem refuses O_DIRECT. */
static int open_new(uvmrt_spill_t *sp, const char *name, const char *label)
{
    const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = sp->ops.open_file(sp->dirfd, name, flags | O_DIRECT, 0600);
    if (fd != -EINVAL) return fd;
    if (sp->direct)
        LOG_WARN(sp->log,
                 "spill: %s/%s ('%s'): the filesystem refuses O_DIRECT; its files are read and written "
                 "through the page cache instead",
                 sp->path, name, label);
    sp->direct = 0;
    /* a filesystem without direct I/O may have created the file before refusing the
     * flag (ramfs does): the name is ours, in our private directory */
    unlinkat(sp->dirfd, name, 0);
    return sp->ops.open_file(sp->dirfd, name, flags, 0600);
}

static void space_error(uvmrt_spill_t *sp, const char *name, const char *label, uint64_t need, int err)
{
    struct statvfs v;
    if (fstatvfs(sp->dirfd, &v) == 0)
        LOG_ERROR(sp->log,
                  "spill: cannot reserve %" PRIu64 " bytes for '%s' in %s/%s: %s (%" PRIu64 " bytes free there)", need,
                  label, sp->path, name, strerror(err), (uint64_t)v.f_bavail * v.f_frsize);
    else
        LOG_ERROR(sp->log, "spill: cannot reserve %" PRIu64 " bytes for '%s' in %s/%s: %s", need, label, sp->path, name,
                  strerror(err));
}

uvmrt_status_t uvmrt__spill_file_create(uvmrt_spill_t *sp, const char *label, uint64_t bytes, int *out)
{
    if (bytes == 0 || bytes > (1ull << 52)) {
        LOG_ERROR(sp->log, "spill: file for '%s' of %" PRIu64 " bytes: expected 1 to 2^52", label, bytes);
        return UVMRT_ERR_INVALID;
    }
    int i = file_slot(sp);
    char *lab = strdup(label ? label : "?");
    if (i < 0 || lab == NULL) {
        free(lab);
        return UVMRT_ERR_NOMEM;
    }
    spill_file_t *f = &sp->files[i];
    snprintf(f->name, sizeof f->name, "f%d", i);
    uint64_t need = round_up(bytes);
    int fd = open_new(sp, f->name, lab);
    if (fd < 0) {
        LOG_ERROR(sp->log, "spill: cannot create %s/%s for '%s': %s", sp->path, f->name, lab, strerror(-fd));
        free(lab);
        return UVMRT_ERR_IO;
    }
    int r = sp->ops.fallocate(fd, (off_t)need);
    if (r != 0) {
        space_error(sp, f->name, lab, need, -r);
        close(fd);
        unlinkat(sp->dirfd, f->name, 0);
        free(lab);
        return UVMRT_ERR_IO;
    }
    f->fd = fd;
    f->label = lab;
    f->bytes = need;
    *out = i;
    return UVMRT_OK;
}

void uvmrt__spill_file_remove(uvmrt_spill_t *sp, int file)
{
    if (file < 0 || file >= sp->n_files || sp->files[file].fd < 0) return;
    spill_file_t *f = &sp->files[file];
    close(f->fd);
    unlinkat(sp->dirfd, f->name, 0);
    free(f->label);
    *f = (spill_file_t){.fd = -1};
}

uint64_t uvmrt__spill_file_bytes(const uvmrt_spill_t *sp, int file)
{
    return file >= 0 && file < sp->n_files && sp->files[file].fd >= 0 ? sp->files[file].bytes : 0;
}

/* ------------------------------------------------------------------ transfers */
uvmrt_status_t uvmrt__spill_submit(uvmrt_spill_t *sp, int file, int write, void *buf, uint64_t bytes,
                                   uvmrt_spill_req_t **out)
{
    uint64_t have = uvmrt__spill_file_bytes(sp, file);
    if (have == 0 || buf == NULL || bytes == 0 || bytes > have || bytes % UVMRT_SPILL_ALIGN != 0 ||
        (uintptr_t)buf % UVMRT_SPILL_ALIGN != 0) {
        LOG_ERROR(sp->log,
                  "spill: transfer of %" PRIu64 " bytes at %p to file %d: expected a live file of at least "
                  "that size and a buffer and length aligned to %u",
                  bytes, buf, file, UVMRT_SPILL_ALIGN);
        return UVMRT_ERR_INVALID;
    }
    uvmrt_spill_req_t *r = calloc(1, sizeof *r);
    if (r == NULL) return UVMRT_ERR_NOMEM;
    *r = (uvmrt_spill_req_t){.file = file, .write = write != 0, .buf = buf, .bytes = bytes};
    r->n_chunks = (bytes + UVMRT_SPILL_CHUNK - 1) / UVMRT_SPILL_CHUNK;
    pthread_mutex_lock(&sp->mu);
    if (sp->tail) sp->tail->next = r;
    else sp->head = r;
    sp->tail = r;
    pthread_cond_broadcast(&sp->work);
    pthread_mutex_unlock(&sp->mu);
    *out = r;
    return UVMRT_OK;
}

uvmrt_status_t uvmrt__spill_wait(uvmrt_spill_t *sp, uvmrt_spill_req_t *r)
{
    if (r == NULL) return UVMRT_OK;
    pthread_mutex_lock(&sp->mu);
    while (!r->finished) pthread_cond_wait(&sp->done, &sp->mu);
    pthread_mutex_unlock(&sp->mu);
    uvmrt_status_t st = UVMRT_OK;
    if (r->failed) {
        const spill_file_t *f = &sp->files[r->file];
        char cause[128];
        if (r->err_res < 0) snprintf(cause, sizeof cause, "%s", strerror((int)-r->err_res));
        else
            snprintf(cause, sizeof cause, "short %s: %zd of %" PRIu64 " bytes", r->write ? "write" : "read", r->err_res,
                     r->err_len);
        LOG_ERROR(sp->log, "spill: %s '%s' %s %s/%s failed at byte %" PRIu64 ": %s; %s",
                  r->write ? "writing" : "reading", f->label, r->write ? "to" : "from", sp->path, f->name, r->err_off,
                  cause,
                  r->write ? "the data stays in host memory" : "the host copy is not valid, the file is unchanged");
        st = UVMRT_ERR_IO;
    }
    free(r);
    return st;
}

int uvmrt__spill_done(uvmrt_spill_t *sp, const uvmrt_spill_req_t *r)
{
    pthread_mutex_lock(&sp->mu);
    int done = r->finished;
    pthread_mutex_unlock(&sp->mu);
    return done;
}

uvmrt_status_t uvmrt__spill_transfer(uvmrt_spill_t *sp, int file, int write, void *buf, uint64_t bytes)
{
    uvmrt_spill_req_t *r;
    uvmrt_status_t st = uvmrt__spill_submit(sp, file, write, buf, bytes, &r);
    return st == UVMRT_OK ? uvmrt__spill_wait(sp, r) : st;
}
