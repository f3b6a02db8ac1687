/*
 * coll_threads.h -- the test transport of examples/common/collective.h: the ranks are
 * threads of one process and meet in shared memory. For `make check` only; users always
 * get NCCL.
 *
 * Every collective is two meetings of all ranks under one mutex: the first publishes
 * each rank's send buffer, then each rank computes its result into a buffer of its own
 * (so in-place calls work) and the second meeting keeps every send buffer alive until
 * all have read it. Reductions add in rank order, so every rank gets the same bits.
 * Calls are synchronous (stream is ignored). A meeting that does not complete within
 * the group's timeout fails naming the ranks that did not arrive; coll_abort() ends
 * every waiting and later call of the group with a message naming the aborting rank.
 */
#ifndef UVMRT_TESTS_COLL_THREADS_H
#define UVMRT_TESTS_COLL_THREADS_H

#include "collective.h"

typedef struct coll_threads_group coll_threads_group_t;

/* A group of world ranks; NULL when out of memory or world < 1. */
coll_threads_group_t *coll_threads_group_new(int world, double timeout_s);

/* The handle of one rank (call from that rank's thread); NULL when out of memory or
 * the rank is outside 0..world-1. coll_destroy() frees it. */
coll_t *coll_threads_join(coll_threads_group_t *g, int rank);

/* Frees the group after every rank's handle is destroyed. */
void coll_threads_group_free(coll_threads_group_t *g);

#endif /* UVMRT_TESTS_COLL_THREADS_H */
