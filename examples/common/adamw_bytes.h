/*
 * adamw_bytes.h -- how a CPU AdamW is declared to uvmrt's model (one definition for the
 * trainers and uvmrt-plan's model files): the host-memory bytes (uvmrt_layer_call_t.host_bytes)
 * that the model times at the profile's measured AdamW rate.
 */
#ifndef UVMRT_EXAMPLES_ADAMW_BYTES_H
#define UVMRT_EXAMPLES_ADAMW_BYTES_H

#include <stdint.h>

#include "uvmrt.h"

/* params parameters at cpu_adamw_params_per_s against host_mem_bps (uvmrt-profile(5));
 * without those figures, the bytes it moves: 28 per parameter (fp32 weight, moments,
 * gradient) and 2 for the bf16 copy. */
static inline uint64_t cli_adamw_host_bytes(const uvmrt_profile_t *p, uint64_t params)
{
    if (p != NULL && p->cpu_adamw_params_per_s > 0 && p->host_mem_bps > 0)
        return (uint64_t)((double)params * p->host_mem_bps / p->cpu_adamw_params_per_s);
    return params * 30;
}

#endif
