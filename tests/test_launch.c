/*
 * test_launch.c -- rank, world and NCCL's bootstrap address from the launcher's
 * environment (examples/common/launch.c), through a fake environment.
 *
 *  - torchrun's, mpirun's and srun's variables; none of them: one process; an sbatch
 *    script (SLURM_PROCID and SLURM_NTASKS without step variables): one process;
 *  - the first launcher present wins (torchrun inside a Slurm job);
 *  - partial sets, numbers that are not, ranks out of range: refused, naming them;
 *  - NCCL_COMM_ID as given, else MASTER_ADDR with UVMRT_NCCL_PORT or MASTER_PORT + 1,
 *    an IPv6 address in brackets; no address: refused, saying what to set;
 *  - a failed call leaves the output as it was.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "launch.h"

static char err[1024];

/* env: "NAME=value" strings, NULL-terminated */
static const char *fake_getenv(const char *name, void *arg) {
    const char **env = arg;
    size_t n = strlen(name);
    for (; *env != NULL; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

static int from(launch_t *l, const char **env) {
    err[0] = '\0';
    return launch_from_env(l, fake_getenv, env, err, sizeof err);
}

static void assert_refused(const char **env, const char *needle1, const char *needle2) {
    launch_t l = {.rank = 77};
    cr_assert_eq(from(&l, env), -1);
    cr_assert_eq(l.rank, 77, "a failed call changed the output");
    cr_assert(strstr(err, needle1) != NULL, "'%s' not in: %s", needle1, err);
    if (needle2 != NULL)
        cr_assert(strstr(err, needle2) != NULL, "'%s' not in: %s", needle2, err);
}

Test(launch, no_launcher_is_one_process) {
    const char *env[] = {"HOME=/x", NULL};
    launch_t l;
    cr_assert_eq(from(&l, env), 0, "%s", err);
    cr_assert_eq(l.rank, 0);
    cr_assert_eq(l.world, 1);
    cr_assert_eq(l.local_rank, 0);
    cr_assert_str_eq(l.launcher, "none");
    cr_assert_str_eq(l.comm_id, "");
}

Test(launch, torchrun_port_is_master_port_plus_one) {
    const char *env[] = {"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=3", "LOCAL_WORLD_SIZE=4",
                         "MASTER_ADDR=node7", "MASTER_PORT=29500", NULL};
    launch_t l;
    cr_assert_eq(from(&l, env), 0, "%s", err);
    cr_assert_eq(l.rank, 3);
    cr_assert_eq(l.world, 8);
    cr_assert_eq(l.local_rank, 3);
    cr_assert_eq(l.local_world, 4);
    cr_assert_str_eq(l.launcher, "torchrun");
    cr_assert_str_eq(l.comm_id, "node7:29501");
}

Test(launch, nccl_comm_id_and_uvmrt_nccl_port_win) {
    const char *env1[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=a",
                          "MASTER_PORT=29500", "NCCL_COMM_ID=10.0.0.1:4000", NULL};
    launch_t l;
    cr_assert_eq(from(&l, env1), 0, "%s", err);
    cr_assert_str_eq(l.comm_id, "10.0.0.1:4000");
    cr_assert_eq(l.local_world, -1);
    const char *env2[] = {"RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=a",
                          "MASTER_PORT=29500", "UVMRT_NCCL_PORT=6000", NULL};
    cr_assert_eq(from(&l, env2), 0, "%s", err);
    cr_assert_str_eq(l.comm_id, "a:6000");
    const char *env3[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=fe80::1",
                          "MASTER_PORT=29500", NULL};
    cr_assert_eq(from(&l, env3), 0, "%s", err);
    cr_assert_str_eq(l.comm_id, "[fe80::1]:29501");
}

Test(launch, mpirun_and_slurm) {
    const char *mpi[] = {"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=6",
                         "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                         "NCCL_COMM_ID=h:1", NULL};
    launch_t l;
    cr_assert_eq(from(&l, mpi), 0, "%s", err);
    cr_assert_str_eq(l.launcher, "mpirun");
    cr_assert_eq(l.rank, 5);
    cr_assert_eq(l.world, 6);
    cr_assert_eq(l.local_rank, 1);
    cr_assert_eq(l.local_world, 2);
    const char *slurm[] = {"SLURM_PROCID=2", "SLURM_NTASKS=8", "SLURM_STEP_NUM_TASKS=4",
                           "SLURM_LOCALID=0",
                           "MASTER_ADDR=h", "UVMRT_NCCL_PORT=7", NULL};
    cr_assert_eq(from(&l, slurm), 0, "%s", err);
    cr_assert_str_eq(l.launcher, "slurm");
    cr_assert_eq(l.rank, 2);
    cr_assert_eq(l.world, 4);
    cr_assert_eq(l.local_world, -1);
    cr_assert_str_eq(l.comm_id, "h:7");
}

Test(launch, an_sbatch_script_is_one_process) {
    const char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_LOCALID=0",
                         "SLURM_JOB_ID=7", NULL};
    launch_t l;
    cr_assert_eq(from(&l, env), 0, "%s", err);
    cr_assert_str_eq(l.launcher, "none");
    cr_assert_eq(l.world, 1);
    cr_assert_eq(l.rank, 0);
}

Test(launch, torchrun_inside_a_slurm_job_wins) {
    const char *env[] = {"SLURM_PROCID=0", "SLURM_STEP_NUM_TASKS=1", "SLURM_LOCALID=0", "RANK=1",
                         "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", "MASTER_PORT=9",
                         NULL};
    launch_t l;
    cr_assert_eq(from(&l, env), 0, "%s", err);
    cr_assert_str_eq(l.launcher, "torchrun");
    cr_assert_eq(l.rank, 1);
    cr_assert_eq(l.world, 2);
}

Test(launch, one_process_needs_no_address) {
    const char *env[] = {"RANK=0", "WORLD_SIZE=1", "LOCAL_RANK=0", NULL};
    launch_t l;
    cr_assert_eq(from(&l, env), 0, "%s", err);
    cr_assert_eq(l.world, 1);
    cr_assert_str_eq(l.comm_id, "");
}

Test(launch, bad_values_are_refused_by_name) {
    const char *partial[] = {"RANK=1", "WORLD_SIZE=2", NULL};
    assert_refused(partial, "LOCAL_RANK", "(unset)");
    const char *nan[] = {"RANK=x1", "WORLD_SIZE=2", "LOCAL_RANK=0", NULL};
    assert_refused(nan, "RANK=\"x1\"", "whole number");
    const char *neg[] = {"RANK=-1", "WORLD_SIZE=2", "LOCAL_RANK=0", NULL};
    assert_refused(neg, "RANK=\"-1\"", NULL);
    const char *zero[] = {"RANK=0", "WORLD_SIZE=0", "LOCAL_RANK=0", NULL};
    assert_refused(zero, "WORLD_SIZE=\"0\"", NULL);
    const char *big[] = {"OMPI_COMM_WORLD_RANK=4", "OMPI_COMM_WORLD_SIZE=4",
                         "OMPI_COMM_WORLD_LOCAL_RANK=0", "NCCL_COMM_ID=h:1", NULL};
    assert_refused(big, "OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4", NULL);
    const char *local[] = {"RANK=1", "WORLD_SIZE=4", "LOCAL_RANK=2", "MASTER_ADDR=h",
                           "MASTER_PORT=1", NULL};
    assert_refused(local, "LOCAL_RANK=2 is above RANK=1", NULL);
    const char *lw[] = {"RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=2", "LOCAL_WORLD_SIZE=2",
                        "MASTER_ADDR=h", "MASTER_PORT=1", NULL};
    assert_refused(lw, "LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2", NULL);
    const char *trail[] = {"SLURM_PROCID=1 ", "SLURM_STEP_NUM_TASKS=2", "SLURM_LOCALID=0", NULL};
    assert_refused(trail, "SLURM_PROCID=\"1 \"", NULL);
}

Test(launch, bootstrap_address_is_required) {
    const char *none[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", NULL};
    assert_refused(none, "NCCL_COMM_ID", "MASTER_ADDR");
    const char *noport[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h", NULL};
    assert_refused(noport, "MASTER_PORT", "UVMRT_NCCL_PORT");
    const char *badport[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h",
                             "MASTER_PORT=65535", NULL};
    assert_refused(badport, "MASTER_PORT=\"65535\"", NULL);
    const char *badid[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "NCCL_COMM_ID=h", NULL};
    assert_refused(badid, "NCCL_COMM_ID=\"h\"", "<host>:<port>");
    const char *badid2[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "NCCL_COMM_ID=h:0", NULL};
    assert_refused(badid2, "the port of NCCL_COMM_ID", NULL);
    const char *badn[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", "MASTER_ADDR=h",
                          "UVMRT_NCCL_PORT=70000", NULL};
    assert_refused(badn, "UVMRT_NCCL_PORT=\"70000\"", NULL);
}

Test(launch, errors_go_to_stderr_without_a_buffer) {
    const char *env[] = {"RANK=1", "WORLD_SIZE=2", "LOCAL_RANK=1", NULL};
    launch_t l = {.rank = 77};
    cr_assert_eq(launch_from_env(&l, fake_getenv, env, NULL, 0), -1);
    cr_assert_eq(l.rank, 77);
}
