/*
 * outfile.h -- how every file that uvmrt, its trainers and its tools write reaches
 * its path: one set of rules (uvmrt-report(5), FILES), so no output can differ.
 *
 *   "-" (where the caller allows it)   stdout
 *   nothing                             a new regular file: written to a temporary
 *                                       file in the same folder, then renamed onto
 *                                       the path (0666 less the umask)
 *   a regular file                      replaced that way, keeping its permission bits
 *   a link to a regular file            its target replaced that way (the temporary
 *                                       file in the target's folder); the link stays
 *   a FIFO, a character device          written in place, never created, truncated or
 *   (or a link to one)                  replaced; a FIFO with no reader fails at once
 *   anything else                       refused: a directory, a block device, a
 *                                       socket, a dangling link
 *
 * Internal (uvmrt__): the library links it, hidden, and the programs link their own
 * copy of the same object (src/libuvmrt-outfile.la, Makefile.am). It logs nothing:
 * each call fills `why` (a sentence without the path) and the caller says whose file
 * it was. Not thread-safe per object; distinct objects are independent.
 */
#ifndef UVMRT_OUTFILE_H
#define UVMRT_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

/* "-" means stdout (without it, "-" is a file named "-") */
#define UVMRT__OUTFILE_DASH_STDOUT 0x1u

typedef struct uvmrt__outfile {
    FILE *f;       /* write here between open and close; NULL when not open */
    char *tmp;     /* the temporary file renamed onto target at close; NULL: written in place */
    char *target;  /* where tmp goes (the path, or a link's target) */
} uvmrt__outfile_t;

/* Whether path can be written by the rules above, without writing it: 0, or -1
 * with why filled. A path to create or a regular file: a temporary file is made and
 * removed beside it (so a missing folder, a file where a folder should be, a folder
 * that takes no new files such as /proc, are all found); a FIFO or a device: it is
 * checked for write permission only, never opened (a reader would see an end of
 * file). For a program's start, before any long work. */
int uvmrt__outfile_check(const char *path, unsigned flags, char *why, size_t len);

/* Opens path for writing by the rules above: 0 and o->f, or -1 with why filled and
 * nothing left behind. */
int uvmrt__outfile_open(uvmrt__outfile_t *o, const char *path, unsigned flags, char *why, size_t len);

/* Finishes the file: flushes it (and syncs a temporary file), closes it and renames
 * a temporary file onto its target. 0, or -1 with why filled (a write or the rename
 * failed: the temporary file is removed, what was at the path is as before). stdout
 * is flushed, not closed. o is closed either way; closing a closed o returns 0. */
int uvmrt__outfile_close(uvmrt__outfile_t *o, char *why, size_t len);

/* Gives the file up: closes it and removes a temporary file (what was at the path is
 * as before). A closed o is a no-op. */
void uvmrt__outfile_abandon(uvmrt__outfile_t *o);

/* "a regular file", "a directory", "a FIFO", ... for a message */
const char *uvmrt__outfile_kind(unsigned mode);

#endif
