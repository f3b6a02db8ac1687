/*
 * work.c -- a layer call's declared work at the profile's rates (work.h).
 */
#include <math.h>
#include <stdio.h>

#include "work.h"

int uvmrt__work_declare(uvmrt_work_t *w, const uvmrt_layer_call_t *call, const uvmrt_profile_t *prof, char *why,
                        size_t len)
{
    if ((double)call->sim_duration_ns > UVMRT_MAX_CALL_NS) {
        snprintf(why, len, "sim_duration_ns %llu: expected at most 1e18 ns", (unsigned long long)call->sim_duration_ns);
        return -1;
    }
    if (!(call->flops >= 0) || isinf(call->flops)) { /* also NaN */
        snprintf(why, len, "flops %g: expected a finite number >= 0", call->flops);
        return -1;
    }
    /* the matmuls' flops at the profile's FLOP/s plus the memory-bound kernels' bytes
     * at its HBM rate (kernels on one stream run one after another) */
    double flops_ns = call->flops > 0 && prof->flops > 0 ? call->flops / prof->flops * 1e9 : 0.0;
    double hbm_ns = call->hbm_bytes > 0 && prof->hbm_bps > 0 ? (double)call->hbm_bytes / prof->hbm_bps * 1e9 : 0.0;
    if (!(flops_ns + hbm_ns <= UVMRT_MAX_CALL_NS)) {
        snprintf(why, len, "flops %g and hbm_bytes %llu take %g ns at the profile's %g FLOP/s and %g bytes/s: "
                           "expected at most 1e18 ns",
                 call->flops, (unsigned long long)call->hbm_bytes, flops_ns + hbm_ns, prof->flops, prof->hbm_bps);
        return -1;
    }
    if (call->host_bytes > 0 && prof->host_mem_bps > 0 &&
        !((double)call->host_bytes / prof->host_mem_bps * 1e9 <= UVMRT_MAX_CALL_NS)) {
        snprintf(why, len, "host_bytes %llu take over 1e18 ns at the profile's host_mem_bps %g: expected fewer",
                 (unsigned long long)call->host_bytes, prof->host_mem_bps);
        return -1;
    }
    if ((double)call->host_ns > UVMRT_MAX_CALL_NS) {
        snprintf(why, len, "host_ns %llu: expected at most 1e18 ns", (unsigned long long)call->host_ns);
        return -1;
    }
    uint64_t counted = (uint64_t)flops_ns + (uint64_t)hbm_ns;
    uint64_t modelled = call->sim_duration_ns > 0 ? call->sim_duration_ns : counted;
    *w = (uvmrt_work_t){
        .flop_count = call->flops,
        .hbm_byte_count = call->hbm_bytes,
        .host_byte_count = call->host_bytes,
        /* an explicit sim duration then plays the GPU's real time */
        .declared_ns = counted > 0 ? counted : modelled,
        .modelled_ns = modelled,
        .host_ns = call->host_ns,
    };
    return 0;
}
