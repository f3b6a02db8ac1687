/*
 * profiles.c -- built-in device profiles for the sim backend.
 *
 * h200 is measured (shared/FACTS.md: NVIDIA H200, PCIe Gen5 x16, CUDA 13, driver
 * 580; one run each, ~10% figures), host memory included (FACTS.md "Host memory
 * is a shared resource"). The consumer profiles are ESTIMATES (uvmrt-profile(5)
 * lists their sources): the link figures are the H200's ratios applied to each
 * card's pinned link; bf16 FLOP/s and memory bandwidth are the vendor's figures
 * (consumer-*: typical of each memory class). Their host memory is unknown until
 * measured, so it is not modelled (0): run uvmrt-calibrate and load its file.
 */
#include <string.h>

#include "uvmrt.h"

#define GB 1e9
#define GIB (1ull << 30)

/* An estimated consumer card from its pinned link per direction (GB/s): the other
 * link figures follow the H200's measured ratios to its pinned link (prefetch 86%,
 * eviction 23%, demand faults 10%, remote read 91% and write 94%, both directions
 * 1.83 x one), the fault and call costs are the H200's, host memory unknown (0). */
#define CONSUMER(nm, desc, gib, link_gbs, bf16, hbm_gbs)                                  \
    {                                                                                   \
        .struct_size = sizeof(uvmrt_profile_t), .name = nm, .description = desc, .memory_bytes = (uint64_t)(gib) * GIB,           \
        .prefetch_h2d_bps = 0.86 * (link_gbs) * GB, .evict_d2h_bps = 0.23 * (link_gbs) * GB, \
        .pinned_h2d_bps = (link_gbs) * GB, .pinned_d2h_bps = (link_gbs) * GB,             \
        .fault_bps = 0.10 * (link_gbs) * GB, .fault_group_bytes = 716u << 10,             \
        .prefetch_call_ns = 50000, .remote_read_bps = 0.91 * (link_gbs) * GB,             \
        .remote_write_bps = 0.94 * (link_gbs) * GB, .flops = (bf16), .hbm_bps = (hbm_gbs) * GB, \
        .fault_trace_ns = 60000, .pinned_bidir_bps = 1.83 * (link_gbs) * GB,              \
        .gpu_bf16_flops = (bf16),                                                         \
    }

static const uvmrt_profile_t profiles[] = {
    {
        .struct_size = sizeof(uvmrt_profile_t),
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
        /* bf16 GEMM as a training step gets it: uvmrt-calibrate's mix of a linear layer's
         * three GEMMs after 2 s of them, 657-675 TFLOP/s at the 700 W limit (cold: 769-798) */
        .flops = 6.7e14,
        .hbm_bps = 4264 * GB,           /* kernel reading resident managed memory */
        .fault_trace_ns = 60000,        /* CUPTI on under demand: 39-76 us per fault group (bench/README.md) */
        .pinned_bidir_bps = 101.7 * GB, /* both directions at once, total */
        .host_mem_bps = 77 * GB,        /* STREAM triad, 16 OpenMP threads, link idle */
        /* triad 49 + H2D >= 39 + D2H ~52 while both run: about 140 in all */
        .host_mem_shared_bps = 140 * GB,
        /* fp32 AdamW on 16 threads, link idle: the trainers' AVX-512 loop as uvmrt-calibrate
         * times it, 3.5-5.7 Gparam/s over eleven runs on these machines, median 4.6 (a plain
         * OpenMP loop: 2.8, FACTS.md). The trainers declare host bytes by this ratio to
         * host_mem_bps, so a rate too low books too much host memory beside the link */
        .cpu_adamw_params_per_s = 4.6e9,
        .gpu_bf16_flops = 6.7e14,       /* the same, as uvmrt-calibrate writes it */
    },
    {
        .struct_size = sizeof(uvmrt_profile_t),
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
        .struct_size = sizeof(uvmrt_profile_t),
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
        .struct_size = sizeof(uvmrt_profile_t),
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
        .struct_size = sizeof(uvmrt_profile_t),
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
    /* Named cards: link per direction from FACTS.md's consumer table (PCIe 4.0 x16
     * measured ~24-27 GB/s per direction on 4090s; x8 about half), bf16 dense
     * tensor FLOP/s and memory bandwidth from the vendor's specifications. */
    CONSUMER("rtx4060ti-16g", "NVIDIA RTX 4060 Ti 16 GB, PCIe 4.0 x8 (estimate)", 16, 12.5, 4.4e13, 288),
    CONSUMER("rtx4080", "NVIDIA RTX 4080 16 GB, PCIe 4.0 x16 (estimate)", 16, 25.0, 9.75e13, 716.8),
    CONSUMER("rtx3090", "NVIDIA RTX 3090 24 GB, PCIe 4.0 x16 (estimate)", 24, 25.0, 7.1e13, 936),
    CONSUMER("rtx4090", "NVIDIA RTX 4090 24 GB, PCIe 4.0 x16 (estimate)", 24, 25.0, 1.65e14, 1008),
};

const uvmrt_profile_t *uvmrt_profile_builtin(size_t i)
{
    return i < sizeof profiles / sizeof profiles[0] ? &profiles[i] : NULL;
}

const uvmrt_profile_t *uvmrt_profile_find(const char *name)
{
    if (name == NULL) return NULL;
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++)
        if (strcmp(profiles[i].name, name) == 0) return &profiles[i];
    return NULL;
}
