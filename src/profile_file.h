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

/* The profile a context uses: the file or built-in profile cfg->profile names on
 * sim; on cuda the file when it names one (the planner's reference), else the
 * measured h200. *owned is what the context must free (NULL for a built-in). */
uvmrt_status_t uvmrt__profile_resolve(const uvmrt_config_t *cfg, const uvmrt_log_t *log,
                                      const uvmrt_profile_t **use, uvmrt_profile_t **owned);

#endif
