/*
 * monread.c -- the reader side of the live snapshot (monread.h, monitor.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "monread.h"

#define SHM_DIR "/dev/shm"
#define READ_WAIT_NS 100000000ull /* how long a writer may stay inside its seqlock: 100 ms */
#define MAGIC_WAIT_NS 2000000ull  /* how long a new segment may lack its magic: 2 ms (the
                                   * writer fills a zeroed header, then writes it) */
#define LIST_WAIT_NS 250000000ull /* all the waiting one listing may do: 250 ms, so that
                                   * junk segments cannot slow a frame to seconds */
#define SEGMENT_MAX_BYTES (64ull << 20) /* the most read of one segment (~300 000 layers) */

const char *uvmrt__monread_str(int status)
{
    switch (status) {
    case MONREAD_OK: return "ok";
    case MONREAD_GONE: return "no such snapshot (the program ended)";
    case MONREAD_BAD: return "not a uvmrt snapshot of this version";
    case MONREAD_BUSY: return "the program stopped while publishing (snapshot left half-written)";
    case MONREAD_NOMEM: return "out of memory";
    case MONREAD_ERRNO: return strerror(errno);
    }
    return "unknown error";
}

void uvmrt__monread_free(uvmrt_mon_proc_t *p)
{
    if (p == NULL) return;
    free(p->layers);
    p->layers = NULL;
}

void uvmrt__monread_free_all(uvmrt_mon_proc_t *procs, size_t n)
{
    for (size_t i = 0; i < n; i++) uvmrt__monread_free(&procs[i]);
    free(procs);
}

static void pause_10us(void)
{
    struct timespec ts = {0, 10000};
    nanosleep(&ts, NULL);
}

/* Maps the whole segment as it is now; *bytes receives its size. Anything but a
 * regular file of the owner a publisher gives it (monitor.c: 0600) is refused
 * before a byte is read, and so is a size past SEGMENT_MAX_BYTES. */
static int map_segment(int fd, uid_t owner, const void **map, size_t *bytes)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return MONREAD_ERRNO;
    if (!S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0600 || (st.st_uid != owner && st.st_uid != geteuid()))
        return MONREAD_BAD;
    if ((size_t)st.st_size < UVMRT_MON_HEADER_BYTES || (uint64_t)st.st_size > SEGMENT_MAX_BYTES) return MONREAD_BAD;
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return MONREAD_ERRNO;
    *map = p;
    *bytes = (size_t)st.st_size;
    return MONREAD_OK;
}

/* The seqlock read: header and rows copied between two equal, even reads of seq. */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* deadline: when to give up on a writer inside its seqlock (mono_ns) */
static int copy_consistent(int fd, uid_t owner, uint64_t deadline, const void **map, size_t *bytes,
                           uvmrt_mon_proc_t *out)
{
    uint64_t start = mono_ns();
    for (int tries = 0; tries < 3 || mono_ns() < deadline; tries++) {
        const uvmrt_mon_header_t *h = *map;
        if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != UVMRT_MON_MAGIC) {
            if (mono_ns() - start > MAGIC_WAIT_NS && tries >= 3) return MONREAD_BAD; /* junk, not a new segment */
            pause_10us(); /* a segment being created: the magic is written last */
            continue;
        }
        if (h->version != UVMRT_MON_VERSION || h->row_bytes != sizeof(uvmrt_mon_layer_t) ||
            h->header_bytes != UVMRT_MON_HEADER_BYTES)
            return MONREAD_BAD;
        uint64_t s1 = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1) {
            pause_10us();
            continue;
        }
        memcpy(&out->snap, (const void *)&h->snap, sizeof out->snap);
        uint32_t n = out->snap.n_layers;
        if (n > out->snap.cap_layers) { /* torn: seq will differ */
            pause_10us();
            continue;
        }
        size_t need = UVMRT_MON_BYTES(n);
        if (need > *bytes) {
            /* the writer grew the segment since we mapped it */
            munmap((void *)*map, *bytes);
            *map = NULL;
            int st = map_segment(fd, owner, map, bytes);
            if (st != MONREAD_OK) return st;
            if (need > *bytes) return MONREAD_BAD;
            continue;
        }
        uvmrt_mon_layer_t *rows = realloc(out->layers, (n ? n : 1) * sizeof *rows);
        if (rows == NULL) return MONREAD_NOMEM;
        out->layers = rows;
        memcpy(rows, (const char *)*map + UVMRT_MON_HEADER_BYTES, (size_t)n * sizeof *rows);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) == s1) return MONREAD_OK;
    }
    return MONREAD_BUSY;
}

/* Is the byte sequence at s (n bytes left) one UTF-8 character that is safe on a
 * terminal? Its length, or 0: C0 and C1 controls, DEL, and malformed, overlong or
 * surrogate sequences are not. */
static size_t safe_char(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x20 || c == 0x7f) return 0;
    if (c < 0x80) return 1;
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    uint32_t cp = c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void uvmrt__monread_sanitize(char *s, size_t cap)
{
    if (cap == 0) return;
    size_t n = strnlen(s, cap - 1), o = 0; /* a field without its NUL ends at cap - 1 */
    for (size_t i = 0; i < n;) {
        size_t k = safe_char((const unsigned char *)s + i, n - i);
        if (k == 0) {
            s[o++] = '?';
            i++;
        } else {
            memmove(s + o, s + i, k);
            o += k;
            i += k;
        }
    }
    memset(s + o, 0, cap - o);
}

/* Every string of the copy, made safe for a terminal and NUL-terminated. */
static void sanitize_proc(uvmrt_mon_proc_t *p)
{
    uvmrt_mon_snap_t *s = &p->snap;
    uvmrt__monread_sanitize(s->program, sizeof s->program);
    uvmrt__monread_sanitize(s->backend, sizeof s->backend);
    uvmrt__monread_sanitize(s->policy, sizeof s->policy);
    uvmrt__monread_sanitize(s->profile, sizeof s->profile);
    uvmrt__monread_sanitize(s->fault_source, sizeof s->fault_source);
    for (uint32_t i = 0; i < s->n_layers; i++) {
        uvmrt__monread_sanitize(p->layers[i].name, sizeof p->layers[i].name);
        uvmrt__monread_sanitize(p->layers[i].mechanism, sizeof p->layers[i].mechanism);
    }
}

/* The uid a segment name carries ("/uvmrt.<uid>.<pid>..."), or the reader's own. */
static uid_t owner_of(const char *name)
{
    const char *p = name[0] == '/' ? name + 1 : name;
    size_t k = strlen(UVMRT_MON_PREFIX);
    if (strncmp(p, UVMRT_MON_PREFIX, k) == 0 && p[k] >= '0' && p[k] <= '9') {
        char *end = NULL;
        errno = 0;
        unsigned long u = strtoul(p + k, &end, 10);
        if (errno == 0 && *end == '.' && u <= (uid_t)-1) return (uid_t)u;
    }
    return getuid();
}

static int read_segment(const char *name, uint64_t deadline, uvmrt_mon_proc_t *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->shm_name, sizeof out->shm_name, "%s", name);
    char path[UVMRT_MON_NAME_MAX + sizeof SHM_DIR + 2];
    if (name[0] != '/' || strchr(name + 1, '/') != NULL ||
        snprintf(path, sizeof path, SHM_DIR "%s", name) >= (int)sizeof path)
        return MONREAD_BAD;
    /* O_NONBLOCK: a FIFO planted under a segment's name must not block the reader;
     * O_NOFOLLOW: nor may a link lead it elsewhere (map_segment refuses both) */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno == ENOENT ? MONREAD_GONE : errno == ELOOP ? MONREAD_BAD : MONREAD_ERRNO;
    const void *map = NULL;
    size_t bytes = 0;
    uid_t owner = owner_of(name);
    int st = map_segment(fd, owner, &map, &bytes);
    if (st == MONREAD_OK) st = copy_consistent(fd, owner, deadline, &map, &bytes, out);
    int saved = errno;
    if (map != NULL) munmap((void *)map, bytes);
    close(fd);
    errno = saved;
    if (st == MONREAD_OK) sanitize_proc(out);
    else uvmrt__monread_free(out);
    return st;
}

int uvmrt__monread_one(const char *name, uvmrt_mon_proc_t *out)
{
    return read_segment(name, mono_ns() + READ_WAIT_NS, out);
}

pid_t uvmrt__monread_pid_of(const char *entry, uid_t uid)
{
    char prefix[48];
    int k = snprintf(prefix, sizeof prefix, UVMRT_MON_PREFIX "%u.", (unsigned)uid);
    if (strncmp(entry, prefix, (size_t)k) != 0) return -1;
    const char *p = entry + k;
    char *end = NULL;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno != 0 || end == p || pid <= 0 || pid > 0x7fffffffL) return -1;
    if (*end == '.') { /* a further context: .<n> */
        const char *q = end + 1;
        strtoul(q, &end, 10);
        if (end == q) return -1;
    }
    return *end == '\0' ? (pid_t)pid : -1;
}

static int cmp_proc(const void *a, const void *b)
{
    const uvmrt_mon_proc_t *x = a, *y = b;
    if (x->snap.pid != y->snap.pid) return x->snap.pid < y->snap.pid ? -1 : 1;
    return (x->snap.context_index > y->snap.context_index) - (x->snap.context_index < y->snap.context_index);
}

int uvmrt__monread_list(pid_t only, uvmrt_mon_proc_t **out, size_t *n, int *cleaned)
{
    *out = NULL;
    *n = 0;
    if (cleaned) *cleaned = 0;
    DIR *d = opendir(SHM_DIR);
    if (d == NULL) return MONREAD_ERRNO;
    uid_t uid = getuid();
    uint64_t list_deadline = mono_ns() + LIST_WAIT_NS;
    uvmrt_mon_proc_t *procs = NULL;
    size_t np = 0, cap = 0;
    int st = MONREAD_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = uvmrt__monread_pid_of(e->d_name, uid);
        if (pid < 0 || (only > 0 && pid != only)) continue;
        char name[UVMRT_MON_NAME_MAX + 2];
        if (snprintf(name, sizeof name, "/%s", e->d_name) >= (int)sizeof name) continue;
        struct stat lst;
        if (fstatat(dirfd(d), e->d_name, &lst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(lst.st_mode) ||
            (lst.st_uid != uid && lst.st_uid != geteuid()))
            continue; /* not a segment a publisher of this user made: neither read nor removed */
        if (kill(pid, 0) != 0 && errno == ESRCH) {
            /* its program is gone (killed, or crashed before destroying its context) */
            if (shm_unlink(name) == 0 && cleaned) (*cleaned)++;
            continue;
        }
        if (np == cap) {
            size_t c = cap ? 2 * cap : 8;
            uvmrt_mon_proc_t *p = realloc(procs, c * sizeof *p);
            if (p == NULL) {
                st = MONREAD_NOMEM;
                break;
            }
            procs = p;
            cap = c;
        }
        /* each segment may wait up to READ_WAIT_NS for its writer, all of them together
         * up to LIST_WAIT_NS: past that a busy segment gets its three tries only */
        uint64_t now = mono_ns(), deadline = now + READ_WAIT_NS;
        if (deadline > list_deadline) deadline = list_deadline > now ? list_deadline : now;
        int r = read_segment(name, deadline, &procs[np]);
        if (r == MONREAD_OK) np++;
        else if (r == MONREAD_NOMEM) {
            st = r;
            break;
        } /* gone meanwhile, or not readable: skipped */
    }
    closedir(d);
    if (st != MONREAD_OK) {
        uvmrt__monread_free_all(procs, np);
        return st;
    }
    if (np > 1) qsort(procs, np, sizeof *procs, cmp_proc);
    *out = procs;
    *n = np;
    return MONREAD_OK;
}

double uvmrt__monread_eta_s(const uvmrt_mon_snap_t *s)
{
    if (s->total_steps == 0 || s->step == 0) return -1;
    if (s->step >= s->total_steps) return 0;
    /* the steady state's mean step time; the recording step alone when that is all there is */
    double per = s->steady_steps > 0 ? (double)s->steady_ns / (double)s->steady_steps : (double)s->step_ns;
    return per * (double)(s->total_steps - s->step) / 1e9;
}

/* ------------------------------------------------------------------ JSON */
static json_t *ju(uint64_t v) { return json_integer((json_int_t)v); }

/* A string from the segment: valid UTF-8 is kept; otherwise bytes >= 0x80
 * become '?' (the publisher cuts names on character boundaries, so this is
 * for names that were never UTF-8). */
static json_t *jtext(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    json_t *j = json_stringn(s, n);
    if (j != NULL) return j;
    char buf[256];
    if (n >= sizeof buf) n = sizeof buf - 1;
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)s[i] < 0x80 ? s[i] : '?';
    return json_stringn(buf, n);
}

static json_t *layer_json(uint32_t i, const uvmrt_mon_layer_t *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "index", json_integer(i));
    json_object_set_new(o, "name", jtext(r->name, sizeof r->name));
    json_object_set_new(o, "mechanism", jtext(r->mechanism, sizeof r->mechanism));
    json_object_set_new(o, "calls", ju(r->calls));
    json_object_set_new(o, "duration_ns", ju(r->duration_ns));
    json_object_set_new(o, "wait_ns", ju(r->wait_ns));
    json_object_set_new(o, "in_bytes", ju(r->prefetch_bytes + r->fault_bytes + r->remote_read_bytes));
    json_object_set_new(o, "out_bytes", ju(r->evict_bytes + r->remote_write_bytes));
    json_object_set_new(o, "prefetch_bytes", ju(r->prefetch_bytes));
    json_object_set_new(o, "evict_bytes", ju(r->evict_bytes));
    json_object_set_new(o, "discard_bytes", ju(r->discard_bytes));
    json_object_set_new(o, "fault_count", ju(r->fault_count));
    json_object_set_new(o, "fault_bytes", ju(r->fault_bytes));
    json_object_set_new(o, "remote_read_bytes", ju(r->remote_read_bytes));
    json_object_set_new(o, "remote_write_bytes", ju(r->remote_write_bytes));
    json_object_set_new(o, "gpu_faults", ju(r->gpu_faults));
    json_object_set_new(o, "host_bytes", ju(r->host_bytes));
    json_object_set_new(o, "plan_host_bytes", ju(r->plan_host_bytes));
    return o;
}

static json_t *proc_json(const uvmrt_mon_proc_t *p, uint64_t now)
{
    const uvmrt_mon_snap_t *s = &p->snap;
    json_t *o = json_object();
    json_object_set_new(o, "pid", json_integer(s->pid));
    json_object_set_new(o, "context", json_integer(s->context_index));
    json_object_set_new(o, "shm", json_string(p->shm_name));
    json_object_set_new(o, "program", jtext(s->program, sizeof s->program));
    json_object_set_new(o, "backend", jtext(s->backend, sizeof s->backend));
    json_object_set_new(o, "policy", jtext(s->policy, sizeof s->policy));
    json_object_set_new(o, "profile", jtext(s->profile, sizeof s->profile));
    json_object_set_new(o, "budget_bytes", ju(s->budget_bytes));
    json_object_set_new(o, "allocated_bytes", ju(s->allocated_bytes));
    json_object_set_new(o, "host_homed_bytes", ju(s->host_homed_bytes));
    json_object_set_new(o, "resident_bytes", ju(s->resident_bytes));
    json_object_set_new(o, "peak_resident_bytes", ju(s->peak_resident_bytes));
    json_object_set_new(o, "step", ju(s->step));
    json_object_set_new(o, "total_steps", s->total_steps ? ju(s->total_steps) : json_null());
    double eta = uvmrt__monread_eta_s(s);
    json_object_set_new(o, "eta_s", eta >= 0 ? json_real(eta) : json_null());
    json_object_set_new(o, "step_ns", ju(s->step_ns));
    json_object_set_new(o, "wait_ns", ju(s->wait_ns));
    json_object_set_new(o, "step_peak_resident_bytes", ju(s->step_peak_resident_bytes));
    json_object_set_new(o, "to_device_bytes", ju(s->to_device_bytes));
    json_object_set_new(o, "to_host_bytes", ju(s->to_host_bytes));
    double sec = s->step_ns / 1e9;
    json_object_set_new(o, "to_device_bps", sec > 0 ? json_real(s->to_device_bytes / sec) : json_null());
    json_object_set_new(o, "to_host_bps", sec > 0 ? json_real(s->to_host_bytes / sec) : json_null());
    json_object_set_new(o, "prefetch_bytes", ju(s->prefetch_bytes));
    json_object_set_new(o, "evict_bytes", ju(s->evict_bytes));
    json_object_set_new(o, "discard_bytes", ju(s->discard_bytes));
    json_object_set_new(o, "fault_count", ju(s->fault_count));
    json_object_set_new(o, "fault_bytes", ju(s->fault_bytes));
    json_object_set_new(o, "remote_read_bytes", ju(s->remote_read_bytes));
    json_object_set_new(o, "remote_write_bytes", ju(s->remote_write_bytes));
    json_object_set_new(o, "gpu_faults", ju(s->gpu_faults));
    json_object_set_new(o, "fault_stats_source", jtext(s->fault_source, sizeof s->fault_source));
    json_object_set_new(o, "plans_built", ju(s->plans_built));
    json_object_set_new(o, "host_bytes", ju(s->host_bytes));
    json_object_set_new(o, "peak_host_bytes", ju(s->peak_host_bytes));
    json_object_set_new(o, "plan_host_bytes", ju(s->plan_host_bytes));
    json_object_set_new(o, "host_external_bytes", ju(s->host_external_bytes));
    json_object_set_new(o, "host_budget_bytes", ju(s->host_budget_bytes));
    json_object_set_new(o, "age_s", json_real(now > s->publish_unix_ns ? (now - s->publish_unix_ns) / 1e9 : 0.0));
    json_t *layers = json_array();
    for (uint32_t i = 0; i < s->n_layers; i++) json_array_append_new(layers, layer_json(i, &p->layers[i]));
    json_object_set_new(o, "layers", layers);
    return o;
}

json_t *uvmrt__monread_json(const uvmrt_mon_proc_t *procs, size_t n, uint64_t now)
{
    json_t *root = json_object(), *arr = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(arr, proc_json(&procs[i], now));
    json_object_set_new(root, "processes", arr);
    return root;
}
