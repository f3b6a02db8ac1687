/*
 * tensor.h -- tensors, their arenas and the layers that own them (internal;
 * tensor.c owns the table). Other modules read ctx->tensors and change it
 * only through tensor.c's functions, with three documented exceptions: a
 * tensor's residency fields (dead .. last_use; resident itself only through
 * uvmrt__tensor_set_resident) are the executor's (exec.h: migrate.c, policy.c,
 * step.c), its disk-tier fields (on_disk .. rd) tier.c's, and a layer's stats
 * stats.c's (uvmrt__stat_add). tests/check-ownership.sh checks each field.
 */
#ifndef UVMRT_TENSOR_H
#define UVMRT_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "uvmrt.h"

#define UVMRT_TENSOR_MAGIC 0x75766d74u /* "uvmt" while allocated */
#define UVMRT_BLOCK (2u << 20)         /* the driver's large page: arena and big-tensor alignment */
#define UVMRT_SMALL_ALIGN (64u << 10)  /* alignment of tensors under 1 MiB */

typedef struct uvmrt_arena {
    void *base;
    size_t bytes;
    int live_tensors;
} uvmrt_arena_t;

struct uvmrt_tensor {
    uint32_t magic;
    uvmrt_context_t *ctx;
    int id;              /* allocation order; index in ctx->tensors.by_id */
    char *name;
    int layer;
    uvmrt_role_t role;
    size_t size;         /* bytes requested */
    size_t footprint;    /* size rounded up to its alignment: what residency counts */
    int arena;
    size_t offset;
    void *ptr;                /* its managed slot: what the executor's ranges name */
    void *pinned;             /* UVMRT_PLACE_PINNED: its page-locked copy, which
                               * uvmrt_tensor_ptr returns (tensor.c's; NULL: none) */
    /* uvmrt's own residency accounting (cudaMemGetInfo does not see managed pages);
     * changed by the executor, whose moves they describe */
    int resident;
    int dead;                 /* contents dead: discarded, or never written */
    int host_homed;           /* kept in host memory, used over the link */
    int placed_host;          /* uvmrt_tensor_set_placement(HOST): homed whatever the plan */
    int advised_remote;       /* advise_remote was applied to its range */
    double recompute_flops;   /* > 0: the trainer can recompute it (uvmrt_tensor_set_recompute) */
    uvmrt_evref_t ready;      /* the prefetch that made it resident */
    uvmrt_evref_t leaving;    /* the eviction that made it non-resident */
    uvmrt_evref_t last_use;   /* end of the last layer call that used it */
    /* the disk tier (uvmrt_tensor_set_tier; changed by tier.c only, see tier.c) */
    int on_disk;
    int spill_file;           /* its file in the spill */
    int host_valid;           /* its host memory holds the contents */
    int file_valid;           /* its file holds the contents */
    struct uvmrt_spill_req *wb; /* its write-back in flight, or NULL */
    struct uvmrt_spill_req *rd; /* its read ahead of its next use in flight, or NULL */
};

typedef struct uvmrt_layer {
    char *name;
    uvmrt_layer_stats_t stats[UVMRT_PHASE_COUNT]; /* totals; changed by stats.c only */
    int *owned;          /* tensor ids owned by this layer (default uses) */
    int n_owned, cap_owned;
    /* the trainer's latest measurement of each phase's CPU work (uvmrt_host_work_measured;
     * 0: none): the record and a review's re-plan take it over the model's time */
    uint64_t host_measured_ns[UVMRT_PHASE_COUNT];
    /* the end of its latest CPU call (host_bytes > 0) and that call's stream: a later
     * call of the layer ordered after that stream waits for its own CPU work there */
    uvmrt_evref_t host_done;
    uvmrt_stream_t host_done_stream;
} uvmrt_layer_t;

/* Every tensor, arena and layer of a context. */
typedef struct uvmrt_tensor_table {
    uvmrt_tensor_t **by_id;         /* by id, freed ones kept (magic cleared) */
    int n, cap;
    /* Every pointer in by_id, as an open-addressing set (index_cap a power of two,
     * at most half full; 0: empty slot): a handle is looked up here before it is
     * dereferenced, so a stale one (of a destroyed context) is refused without
     * reading freed memory. */
    uintptr_t *index;
    size_t index_cap;
    /* which tensors are resident, by id (a mirror of uvmrt_tensor.resident, kept by
     * uvmrt__tensor_set_resident), and a summary bit per word that has one: the
     * victim scans visit the resident tensors only */
    uint64_t *res_bits, *res_sum;
    size_t res_words;
    uvmrt_arena_t *arenas;
    int n_arenas, cap_arenas;
    uvmrt_layer_t *layers;
    int n_layers, cap_layers;
    uint64_t allocated_bytes;       /* footprints of the live tensors */
} uvmrt_tensor_table_t;

uvmrt_tensor_t *uvmrt__tensor_checked(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t);
/* Sets t->resident, and its bit. Every change of a tensor's residency goes here. */
void uvmrt__tensor_set_resident(uvmrt_context_t *ctx, uvmrt_tensor_t *t, int on);
/* The first resident tensor id >= from, or -1. */
int uvmrt__resident_next(const uvmrt_context_t *ctx, int from);
/* Layer's CPU call on stream ended at ring event done (see uvmrt_layer_t.host_done). */
void uvmrt__layer_host_done(uvmrt_context_t *ctx, int layer, uvmrt_evref_t done, uvmrt_stream_t stream);
void uvmrt__tensors_release_all(uvmrt_context_t *ctx);
/* The host bytes the live tensors need at least with `more` bytes more: the footprints
 * of those in host memory beyond the plan budget (the context's budget for policy none),
 * the disk tier's window (uvmrt__tier_host: its tensors count only as the copies it
 * may hold at once), plus host_external. */
uint64_t uvmrt__host_need_min(const uvmrt_context_t *ctx, uint64_t more, uint64_t host_external);
/* The same with t back from the disk tier in host memory, and the declared host bytes. */
uint64_t uvmrt__host_need_except(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t);
/* Frees the layers' names and owned lists (at destroy, after the tensors). */
void uvmrt__layers_free(uvmrt_context_t *ctx);
void uvmrt__describe_ptr(const uvmrt_context_t *ctx, const void *ptr, char *buf, size_t len);
/* The live tensors declared recomputable, and t's place among them in the recompute
 * order (0 first; -1 when t is not declared): device memory freed per flop, the most
 * first, then the earliest layer (layer -1 last), then allocation order. */
int uvmrt__recomputable_count(const uvmrt_context_t *ctx);
int uvmrt__recompute_rank(const uvmrt_context_t *ctx, const uvmrt_tensor_t *t);

#endif
