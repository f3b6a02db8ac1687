/*
 * memsum.h -- what the memory summary and the live monitor share (internal):
 * the mechanism each tensor gets and where its pages are.
 */
#ifndef UVMRT_MEMSUM_H
#define UVMRT_MEMSUM_H

#include "internal.h"

#define UVMRT__MECH_USED 0x8000u /* scratch bit: the recorded step uses the tensor */

/* bits[id] = UVMRT_MECH_* of tensor id, for id in [0, ctx->n_tensors) (freed
 * tensors: 0). bits has room for n_tensors entries. O(tensors + plan actions +
 * recorded uses); no allocation. */
void uvmrt__mechanisms(const uvmrt_context_t *ctx, uint16_t *bits);
/* Where the tensor's pages are now (SPLIT: its last move has not completed). */
uvmrt_where_t uvmrt__tensor_where(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t);
/* Copies src into dst (cap bytes, NUL-terminated), cut on a UTF-8 boundary. */
void uvmrt__copy_utf8(char *dst, size_t cap, const char *src);

/* Report sections (called from report.c): the per-role table and one line per
 * tensor in the text report; the "memory" object in the JSON report (NULL on no
 * memory). */
void uvmrt__memsum_text(const uvmrt_context_t *ctx, FILE *f);
/* Layer l's host bytes: *now, its tensors not resident now; *plan, those the plan
 * keeps in host memory at some point of the step (0 without a plan). */
void uvmrt__memsum_layer_host(const uvmrt_context_t *ctx, int l, uint64_t *now, uint64_t *plan);
struct json_t;
struct json_t *uvmrt__memsum_json(const uvmrt_context_t *ctx);

#endif
