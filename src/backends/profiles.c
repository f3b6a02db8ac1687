/*
 * profiles.c -- built-in device profiles for the sim backend.
 *
 * h200 is measured (shared/FACTS.md: NVIDIA H200, PCIe Gen5 x16, CUDA 13, driver
 * 580; one run each, ~10% figures). The consumer profiles are ESTIMATES for PCIe
 * 4.0 x16 cards: the link figures are the H200's ratios applied to a ~26 GB/s
 * pinned link; compute and memory bandwidth are typical of each memory class.
 */
#include <string.h>

#include "uvmrt.h"

#define GB 1e9
#define GIB (1ull << 30)

static const uvmrt_profile_t profiles[] = {
    {
        .name = "h200",
        .description = "NVIDIA H200, PCIe Gen5 x16 (measured, FACTS.md)",
        .measured = 1,
        .memory_bytes = 143771ull << 20,
        .prefetch_h2d_bps = 47.8 * GB,  /* one 4 GiB prefetch: 46.8-48.8 */
        .evict_d2h_bps = 13.0 * GB,     /* prefetch to host: 9.9-16.4 */
        .pinned_h2d_bps = 55.5 * GB,
        .pinned_d2h_bps = 55.3 * GB,
        .fault_bps = 5.8 * GB,          /* kernel over host-resident data: 5.4-6.3 */
        .fault_group_bytes = 716u << 10, /* ~6000 fault groups per 4 GiB */
        .prefetch_call_ns = 77000,      /* 2 MiB calls reach 17.3 GB/s, not 47.8 */
        .remote_read_bps = 50.5 * GB,   /* preferred location host, accessed by the GPU */
        .remote_write_bps = 52.2 * GB,
        .flops = 7.7e14,                /* bf16 GEMM through PyTorch: 769-798 TFLOP/s */
        .hbm_bps = 4264 * GB,           /* kernel reading resident managed memory */
        .fault_trace_ns = 60000,        /* CUPTI on under demand: 39-76 us per fault group (bench/README.md) */
    },
    {
        .name = "consumer-8g",
        .description = "8 GiB consumer GPU, PCIe 4.0 x16 (estimate)",
        .memory_bytes = 8 * GIB,
        .prefetch_h2d_bps = 22.0 * GB,
        .evict_d2h_bps = 7.0 * GB,
        .pinned_h2d_bps = 26.0 * GB,
        .pinned_d2h_bps = 26.0 * GB,
        .fault_bps = 3.0 * GB,
        .fault_group_bytes = 716u << 10,
        .prefetch_call_ns = 50000,
        .remote_read_bps = 23.5 * GB,
        .remote_write_bps = 24.5 * GB,
        .flops = 4.4e13,
        .hbm_bps = 288 * GB,
        .fault_trace_ns = 60000,       /* the H200's figure: driver work on the CPU */
    },
    {
        .name = "consumer-12g",
        .description = "12 GiB consumer GPU, PCIe 4.0 x16 (estimate)",
        .memory_bytes = 12 * GIB,
        .prefetch_h2d_bps = 22.0 * GB,
        .evict_d2h_bps = 7.0 * GB,
        .pinned_h2d_bps = 26.0 * GB,
        .pinned_d2h_bps = 26.0 * GB,
        .fault_bps = 3.0 * GB,
        .fault_group_bytes = 716u << 10,
        .prefetch_call_ns = 50000,
        .remote_read_bps = 23.5 * GB,
        .remote_write_bps = 24.5 * GB,
        .flops = 6.0e13,
        .hbm_bps = 504 * GB,
        .fault_trace_ns = 60000,       /* the H200's figure: driver work on the CPU */
    },
    {
        .name = "consumer-16g",
        .description = "16 GiB consumer GPU, PCIe 4.0 x16 (estimate)",
        .memory_bytes = 16 * GIB,
        .prefetch_h2d_bps = 22.0 * GB,
        .evict_d2h_bps = 7.0 * GB,
        .pinned_h2d_bps = 26.0 * GB,
        .pinned_d2h_bps = 26.0 * GB,
        .fault_bps = 3.0 * GB,
        .fault_group_bytes = 716u << 10,
        .prefetch_call_ns = 50000,
        .remote_read_bps = 23.5 * GB,
        .remote_write_bps = 24.5 * GB,
        .flops = 9.0e13,
        .hbm_bps = 672 * GB,
        .fault_trace_ns = 60000,       /* the H200's figure: driver work on the CPU */
    },
    {
        .name = "consumer-24g",
        .description = "24 GiB consumer GPU, PCIe 4.0 x16 (estimate)",
        .memory_bytes = 24 * GIB,
        .prefetch_h2d_bps = 22.0 * GB,
        .evict_d2h_bps = 7.0 * GB,
        .pinned_h2d_bps = 26.0 * GB,
        .pinned_d2h_bps = 26.0 * GB,
        .fault_bps = 3.0 * GB,
        .fault_group_bytes = 716u << 10,
        .prefetch_call_ns = 50000,
        .remote_read_bps = 23.5 * GB,
        .remote_write_bps = 24.5 * GB,
        .flops = 1.65e14,
        .hbm_bps = 1008 * GB,
        .fault_trace_ns = 60000,       /* the H200's figure: driver work on the CPU */
    },
};

const uvmrt_profile_t *uvmrt_profiles(size_t *count)
{
    if (count) *count = sizeof profiles / sizeof profiles[0];
    return profiles;
}

const uvmrt_profile_t *uvmrt_profile_find(const char *name)
{
    if (name == NULL) return NULL;
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
        if (strcmp(profiles[i].name, name) == 0) return &profiles[i];
    return NULL;
}
