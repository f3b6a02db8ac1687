/*
 * profile_file.h -- device profiles as JSON files (uvmrt-profile(5)): strict
 * reading, exact writing, and the choice of a context's profile (internal).
 *
 * The key names are uvmrt_profile_t's field names. A file written by
 * uvmrt__profile_file_save loads back equal, field for field (doubles are
 * written with 17 significant digits). uvmrt-calibrate writes its results
 * through the same function, so a calibrated file always parses.
 */
#ifndef UVMRT_PROFILE_FILE_H
#define UVMRT_PROFILE_FILE_H

#include "log.h"
#include "settings.h"
#include "uvmrt.h"

/* 1 when UVMRT_PROFILE's text names a file rather than a built-in profile: it
 * contains '/' or ends in ".json". */
int uvmrt__profile_is_path(const char *text);

/* Reads a profile file. Unknown keys are warned about by name; a missing
 * required key, a value of the wrong type or out of range (negative, zero
 * bandwidth) is an error naming the file, the key and the value
 * (UVMRT_ERR_CONFIG; UVMRT_ERR_IO when it cannot be read). *out is one
 * allocation holding the strings too: free it with uvmrt_profile_free. */
uvmrt_status_t uvmrt__profile_file_load(const char *path, const uvmrt_log_t *log, uvmrt_profile_t **out);

/* Writes profile (and meta, which may be NULL) to path: a temporary file in the
 * same folder, then renamed; anything at path other than a regular file is
 * refused. Zero optional fields (not measured) are left out. */
uvmrt_status_t uvmrt__profile_file_save(const uvmrt_profile_t *profile, const uvmrt_profile_meta_t *meta,
                                        const char *path, const uvmrt_log_t *log);

/* The profile a context uses, on sim its model and on cuda the planner's model of
 * the GPU: the file or built-in profile cfg->profile names; for "auto", consumer-8g
 * on sim and on cuda the built-in profile of the device (uvmrt__profile_for_device,
 * with a notice naming it when it is only the nearest estimate). *owned is what the
 * context must free (NULL for a built-in). */
uvmrt_status_t uvmrt__profile_resolve(const uvmrt_config_t *cfg, const uvmrt_log_t *log,
                                      const uvmrt_profile_t **use, uvmrt_profile_t **owned);

/* The built-in profile for a GPU of this name (as cudaGetDeviceProperties gives it)
 * and memory: the one made for that card when there is one (*matched = 1), else the
 * consumer estimate of the nearest memory size at or below it (8, 12, 16, 24 GB), and
 * above 28 GiB the measured h200 (*matched = 0). Never NULL. */
const uvmrt_profile_t *uvmrt__profile_for_device(const char *device_name, uint64_t memory_bytes, int *matched);

/* What a record or a message calls the context's profile: the file's path for a file,
 * else the built-in profile's name (also when UVMRT_PROFILE is auto). */
const char *uvmrt__profile_label(const uvmrt_config_t *cfg, const uvmrt_profile_t *profile);

#endif
