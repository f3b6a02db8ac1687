/*
 * launch.c -- rank, world and the NCCL bootstrap address from the environment (see launch.h).
 */
#define _POSIX_C_SOURCE 200809L

#include "launch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"

#define ERR_PREFIX "uvmrt" /* errbuf_fail's messages on stderr start with it */

static const char *env_default(const char *name, void *arg) {
    (void)arg;
    return getenv(name);
}

/* One launcher's variable names. */
typedef struct {
    const char *launcher;
    const char *rank, *world, *local_rank, *local_world; /* local_world may be NULL */
    int world_marks_it; /* only the world variable says the launcher started this process */
} names_t;

static const names_t launchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", 0},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", 0},
    /* srun sets SLURM_STEP_NUM_TASKS; an sbatch script, one process, has SLURM_PROCID=0,
     * SLURM_LOCALID=0 and SLURM_NTASKS = the job's task count, but no step variables */
    {"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", NULL, 1},
};

/* A whole number in [min, max]; -1 with a message naming the variable otherwise. */
static int parse_int(const char *name, const char *s, long min, long max, int *out, char *err,
                     size_t errlen) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < min || v > max)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s=\"%s\": expected a whole number in %ld..%ld", name, s, min, max);
    *out = (int)v;
    return 0;
}

/* Reads one launcher's set. Returns 1 when present and good, 0 when absent, -1 on error. */
static int read_set(const names_t *n, launch_getenv_fn get, void *arg, launch_t *l, char *err,
                    size_t errlen) {
    const char *r = get(n->rank, arg), *w = get(n->world, arg), *lr = get(n->local_rank, arg);
    const char *lw = n->local_world ? get(n->local_world, arg) : NULL;
    if (w == NULL && (r == NULL || n->world_marks_it))
        return 0;
    if (r == NULL || w == NULL || lr == NULL)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s launch: %s, %s and %s must all be set (%s=%s, %s=%s, %s=%s)",
                           n->launcher, n->rank, n->world, n->local_rank, n->rank,
                           r ? r : "(unset)", n->world, w ? w : "(unset)", n->local_rank,
                           lr ? lr : "(unset)");
    *l = (launch_t){.launcher = n->launcher, .local_world = -1};
    if (parse_int(n->world, w, 1, INT_MAX, &l->world, err, errlen) != 0 ||
        parse_int(n->rank, r, 0, INT_MAX, &l->rank, err, errlen) != 0 ||
        parse_int(n->local_rank, lr, 0, INT_MAX, &l->local_rank, err, errlen) != 0)
        return -1;
    if (lw != NULL && parse_int(n->local_world, lw, 1, INT_MAX, &l->local_world, err, errlen) != 0)
        return -1;
    if (l->rank >= l->world)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s=%d is not below %s=%d: expected a rank in 0..%d", n->rank, l->rank,
                           n->world, l->world, l->world - 1);
    if (l->local_world > l->world)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s=%d is above %s=%d", n->local_world,
                           l->local_world, n->world, l->world);
    if (l->local_world > 0 && l->local_rank >= l->local_world)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s=%d is not below %s=%d", n->local_rank,
                           l->local_rank, n->local_world, l->local_world);
    if (l->local_rank > l->rank)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s=%d is above %s=%d: a local rank counts the processes of "
                           "one host, so it cannot exceed the rank",
                           n->local_rank, l->local_rank, n->rank, l->rank);
    return 1;
}

/* host:port with a port in 1..65535 and a host that is not empty. */
static int check_comm_id(const char *what, const char *id, char *err, size_t errlen) {
    const char *colon = strrchr(id, ':');
    int port;
    if (strlen(id) >= LAUNCH_COMM_ID_MAX)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "%s is %zu characters long, expected fewer than %d", what, strlen(id),
                           LAUNCH_COMM_ID_MAX);
    if (colon == NULL || colon == id)
        return errbuf_fail(err, errlen, ERR_PREFIX, "%s=\"%s\": expected <host>:<port>", what, id);
    char name[64];
    snprintf(name, sizeof name, "the port of %s", what);
    return parse_int(name, colon + 1, 1, 65535, &port, err, errlen);
}

static int bootstrap(launch_t *l, launch_getenv_fn get, void *arg, char *err, size_t errlen) {
    const char *id = get("NCCL_COMM_ID", arg);
    if (id != NULL) {
        if (check_comm_id("NCCL_COMM_ID", id, err, errlen) != 0)
            return -1;
        snprintf(l->comm_id, sizeof l->comm_id, "%s", id);
        return 0;
    }
    const char *addr = get("MASTER_ADDR", arg), *mport = get("MASTER_PORT", arg);
    const char *nport = get("UVMRT_NCCL_PORT", arg);
    if (addr == NULL || *addr == '\0')
        return errbuf_fail(
            err, errlen, ERR_PREFIX,
            "%s launch of %d processes: set NCCL_COMM_ID=<host>:<port>, or "
            "MASTER_ADDR (rank 0's host) and MASTER_PORT or UVMRT_NCCL_PORT, for NCCL's "
            "bootstrap",
            l->launcher, l->world);
    int port;
    if (nport != NULL) {
        if (parse_int("UVMRT_NCCL_PORT", nport, 1, 65535, &port, err, errlen) != 0)
            return -1;
    } else if (mport != NULL) {
        if (parse_int("MASTER_PORT", mport, 1, 65534, &port, err, errlen) != 0)
            return -1;
        port++; /* torchrun's agent serves its store at MASTER_PORT itself */
    } else {
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "MASTER_ADDR=%s but neither MASTER_PORT nor UVMRT_NCCL_PORT is "
                           "set: expected a port for NCCL's bootstrap",
                           addr);
    }
    int bracket = strchr(addr, ':') != NULL && addr[0] != '['; /* an IPv6 address */
    int n = snprintf(l->comm_id, sizeof l->comm_id, bracket ? "[%s]:%d" : "%s:%d", addr, port);
    if (n < 0 || (size_t)n >= sizeof l->comm_id)
        return errbuf_fail(err, errlen, ERR_PREFIX,
                           "MASTER_ADDR is %zu characters long, expected fewer than %d",
                           strlen(addr), LAUNCH_COMM_ID_MAX - 8);
    return 0;
}

int launch_from_env(launch_t *out, launch_getenv_fn get, void *arg, char *err, size_t errlen) {
    if (get == NULL)
        get = env_default;
    launch_t found = {.rank = 0, .world = 1, .local_world = 1, .launcher = "none"};
    /* The first set present wins: a launcher started inside another's job (torchrun in
     * an sbatch script, mpirun in an allocation) sets its own variables, and the outer
     * ones then describe the outer job, not this process. */
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++) {
        int rc = read_set(&launchers[i], get, arg, &found, err, errlen);
        if (rc < 0)
            return -1;
        if (rc > 0)
            break;
    }
    if (found.world > 1 && bootstrap(&found, get, arg, err, errlen) != 0)
        return -1;
    *out = found;
    return 0;
}
