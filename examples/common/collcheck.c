/*
 * collcheck.c -- uvmrt-collcheck: the collective seam over NCCL, checked on real GPUs.
 *
 *   torchrun --nproc-per-node N --no-python examples/common/uvmrt-collcheck [COUNT]
 *   mpirun -n N examples/common/uvmrt-collcheck        (with NCCL_COMM_ID or MASTER_ADDR)
 *
 * Every rank: checks that all ranks got the same arguments (coll_check_same), then
 * all-reduce (sum, average, max), reduce-scatter and all-gather of COUNT floats
 * (default 1M) in managed memory, with values whose sums are exact in float, and
 * compares every element; a barrier; exit 0. Any failure: the message names the rank,
 * the communicator is aborted so the other ranks end too, exit 1. Rank 0 prints one
 * line of result; UVMRT_COLL_TIMEOUT_S bounds every wait.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "collective.h"
#include "launch.h"

/* small integers: every sum of them is exact in float */
static float value(int rank, size_t i) { return (float)(rank + 1) + (float)(i % 7); }

static int check(coll_t *c, const char *what, const float *got, size_t n, size_t base,
                 coll_op_t op) {
    for (size_t i = 0; i < n; i++) {
        float sum = 0, max = value(0, base + i);
        for (int r = 0; r < c->world; r++) {
            sum += value(r, base + i);
            max = value(r, base + i) > max ? value(r, base + i) : max;
        }
        float want = op == COLL_SUM ? sum : op == COLL_AVG ? sum / (float)c->world : max;
        /* NCCL may average as a sum of x * (1/N): exact only for N a power of two */
        float tol = op == COLL_AVG ? 1e-6f * want : 0;
        if (!(got[i] >= want - tol && got[i] <= want + tol))
            return coll_fail(c, "%s: element %zu is %g, expected %g", what, base + i,
                             (double)got[i], (double)want);
    }
    return 0;
}

static int run(coll_t *c, size_t count, float *a, float *b, int argc, char **argv) {
    char args[1024] = "";
    for (int i = 1; i < argc; i++) {
        strncat(args, argv[i], sizeof args - strlen(args) - 2);
        strncat(args, " ", sizeof args - strlen(args) - 1);
    }
    if (coll_check_same(c, args, strlen(args), "the arguments") != 0)
        return -1;
    const coll_op_t ops[] = {COLL_SUM, COLL_AVG, COLL_MAX};
    const char *names[] = {"all-reduce sum", "all-reduce avg", "all-reduce max"};
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < count; i++)
            a[i] = value(c->rank, i);
        if (coll_all_reduce(c, a, b, count, ops[k], NULL) != 0 || coll_wait(c, NULL) != 0 ||
            check(c, names[k], b, count, 0, ops[k]) != 0)
            return -1;
    }
    size_t part = count / (size_t)c->world;
    for (size_t i = 0; i < count; i++)
        a[i] = value(c->rank, i);
    /* llm.c's ZeRO-1 shape: reduce-scatter into this rank's slice, gather the slices */
    float *mine = a + (size_t)c->rank * part;
    if (coll_reduce_scatter(c, a, mine, part, COLL_AVG, NULL) != 0 || coll_wait(c, NULL) != 0 ||
        check(c, "reduce-scatter", mine, part, (size_t)c->rank * part, COLL_AVG) != 0)
        return -1;
    if (coll_all_gather(c, mine, a, part, NULL) != 0 || coll_wait(c, NULL) != 0 ||
        check(c, "all-gather", a, part * (size_t)c->world, 0, COLL_AVG) != 0)
        return -1;
    return coll_barrier(c);
}

int main(int argc, char **argv) {
    char err[1024];
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    launch_t l;
    double timeout;
    if (launch_from_env(&l, NULL, NULL, err, sizeof err) != 0 ||
        coll_timeout_from_env(&timeout, err, sizeof err) != 0) {
        fprintf(stderr, "uvmrt-collcheck: %s\n", err);
        return 1;
    }
    if (count < (size_t)l.world) {
        fprintf(stderr, "uvmrt-collcheck: COUNT %zu: expected at least the world size %d\n",
                count, l.world);
        return 1;
    }
    coll_t *c;
    if (coll_nccl_create(&c, &l, timeout, err, sizeof err) != 0) {
        fprintf(stderr, "uvmrt-collcheck: %s\n", err);
        return 1;
    }
    float *a = NULL, *b = NULL;
    int status;
    if (cudaMallocManaged((void **)&a, count * sizeof *a, cudaMemAttachGlobal) != cudaSuccess ||
        cudaMallocManaged((void **)&b, count * sizeof *b, cudaMemAttachGlobal) != cudaSuccess)
        status = coll_fail(c, "cudaMallocManaged of 2 x %zu floats failed", count);
    else
        status = run(c, count, a, b, argc, argv);
    if (status != 0) {
        fprintf(stderr, "uvmrt-collcheck: %s\n", coll_error(c));
        coll_abort(c);
    } else if (c->rank == 0) {
        printf("uvmrt-collcheck: %d ranks (%s, bootstrap %s): all-reduce, reduce-scatter, "
               "all-gather of %zu floats: ok\n", c->world, l.launcher,
               l.world > 1 ? l.comm_id : "-", count);
    }
    cudaFree(a);
    cudaFree(b);
    coll_destroy(c);
    return status == 0 ? 0 : 1;
}
