/*
 * counters.h -- the library's side of the one counter list (UVMRT_COUNTERS in
 * uvmrt.h): the indices uvmrt__stat_add takes (STAT_<tag>, uvmrt's own counters)
 * and those of the driver's counter sets (FC_<tag>, uvmrt_fcount_t), generated
 * from the list so that a counter is added in one line there.
 */
#ifndef UVMRT_COUNTERS_H
#define UVMRT_COUNTERS_H

#include "uvmrt.h"

/* uvmrt's own counters: OWN and LATE (LATE only places the fields at the structs' ends) */
#define UVMRT__MINE_CALL(...)
#define UVMRT__MINE_OWN(...) __VA_ARGS__
#define UVMRT__MINE_DRIVER(...)
#define UVMRT__MINE_LATE(...) __VA_ARGS__
#define UVMRT__STAT_ENUM(name, tag, src, ...) UVMRT__MINE_##src(STAT_##tag, )
#define UVMRT__FC_ENUM(name, tag, src, ...) UVMRT__DRIVER_##src(FC_##tag, )

/* uvmrt's own counters, for uvmrt__stat_add; STAT_CALL counts a layer call (calls,
 * and sampled_calls when the step collects the driver's counters). */
enum { STAT_CALL = -1, UVMRT_COUNTERS(UVMRT__STAT_ENUM) STAT_COUNT };

/* The driver's counters: indices of uvmrt_fcount_t (attrib.h). */
enum { UVMRT_COUNTERS(UVMRT__FC_ENUM) FC_COUNT };

/* Adds step b into a (stats.c): every step counter of the list, step_ns and the busy
 * times summed, the larger peak kept, fault_sampled counting the steps that
 * collected. For aggregates of steps (e.g. those a bounded history drops). */
void uvmrt__step_stats_add(uvmrt_step_stats_t *a, const uvmrt_step_stats_t *b);

#endif
