/*
 * launch.h -- where this process sits among several: rank, world size, local rank and
 * the NCCL bootstrap address, read from the launcher's environment.
 *
 * Launchers, in this order (the first whose variables are present is used: torchrun run
 * inside a Slurm job sets its own, and the job's then describe the job, not this process):
 *   torchrun   RANK, WORLD_SIZE, LOCAL_RANK (LOCAL_WORLD_SIZE when set)
 *   mpirun     OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK (_LOCAL_SIZE when set)
 *   srun       SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID (only in an srun step: an
 *              sbatch script is one process, whatever SLURM_NTASKS and SLURM_PROCID say)
 * None of them: one process (rank 0 of 1). A set that is only partly present, a value
 * that is not a whole number, a rank outside 0..world-1, a local rank above the rank or
 * outside the local world is an error naming the variables and their values.
 *
 * Bootstrap (world > 1): NCCL_COMM_ID=<host>:<port> when set; otherwise MASTER_ADDR and
 * a port: UVMRT_NCCL_PORT when set, else MASTER_PORT + 1 (torchrun's agent serves its
 * own store at MASTER_PORT). With that address in NCCL_COMM_ID every rank's
 * ncclGetUniqueId gives the same id and rank 0 listens there, so no id is exchanged.
 * Missing both NCCL_COMM_ID and MASTER_ADDR is an error that says what to set.
 *
 * Plain C11; the environment is read through a function so tests can give their own.
 */
#ifndef UVMRT_EXAMPLES_LAUNCH_H
#define UVMRT_EXAMPLES_LAUNCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAUNCH_COMM_ID_MAX 300

typedef struct {
    int rank, world;
    int local_rank;
    int local_world;        /* processes on this host; -1: the launcher did not say */
    const char *launcher;   /* "torchrun", "mpirun", "slurm" or "none" (static strings) */
    char comm_id[LAUNCH_COMM_ID_MAX]; /* host:port for NCCL_COMM_ID; "" when world == 1 */
} launch_t;

/* Returns the value of an environment variable or NULL. */
typedef const char *(*launch_getenv_fn)(const char *name, void *arg);

/* Fills *out from the environment given by get (NULL: getenv). Returns 0, or -1 with
 * one line in err (errlen bytes; stderr when err is NULL); *out is then unchanged. */
int launch_from_env(launch_t *out, launch_getenv_fn get, void *arg, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* UVMRT_EXAMPLES_LAUNCH_H */
