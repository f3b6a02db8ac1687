#!/usr/bin/env python3
"""mlp_table.py -- the trainer benchmark's results as a markdown table.

Usage: python3 bench/mlp_table.py OUTDIR

Reads what bench/run-mlp.sh left in OUTDIR (any subset; missing rows are left out):
  mlp.ROW.json          uvmrt-mlp --result-json (medians over steps 2..S)
  mlp.ROW.report.json   uvmrt's report (for the per-step traffic), optional
  torch.ROW.json        bench/mlp_torch.py --json
  link.json             uvmrt-linkbench
prints the table and writes OUTDIR/table.md.

Columns: ms/step (median of the steps after the first), TFLOP/s (6*N*H*H*L per
step, 8*... with --recompute), peak GPU memory, GB moved each way per step, GPU
faults per step, loss after the last step.
Peak GPU memory: uvmrt rows give uvmrt's peak resident bytes (its own accounting of
managed memory on the GPU, bounded by the budget) plus the device buffers the
trainer allocates itself (cuBLAS workspace, loss partials); CUDA context and
cuBLAS handle memory are not counted in either column. PyTorch rows give
torch.cuda.max_memory_allocated(). GB in = prefetched + read over the link from
host-homed tensors; GB out = written back + written over the link. PyTorch rows
have no traffic counters (-). GB = 1e9 bytes, GiB = 2^30 bytes. Standard library only.
"""

import os
import sys

from tablelib import load, write_table

ROWS = (
    ("mlp", "resident", "uvmrt, no budget (policy none, all resident)"),
    ("mlp", "prefetch-big-gpu", "uvmrt prefetch, {big}, optimizer GPU"),
    ("mlp", "prefetch-big-cpu", "uvmrt prefetch, {big}, optimizer CPU"),
    ("mlp", "prefetch-small-gpu", "uvmrt prefetch, {small}, optimizer GPU"),
    ("mlp", "prefetch-small-cpu", "uvmrt prefetch, {small}, optimizer CPU"),
    ("mlp", "prefetch-small-mixed", "uvmrt prefetch, {small}, optimizer CPU for half the blocks"),
    ("mlp", "demand-small-gpu", "uvmrt demand (driver emulation), {small}, optimizer GPU"),
    ("torch", "torch-resident", "PyTorch, all resident"),
    ("torch", "torch-offload", "PyTorch FSDP2 CPU offload + save_on_cpu"),
)
GIB = float(1 << 30)
TARGET_RESIDENT_VS_TORCH = 1.10
TARGET_SMALL_MS = 350.0
TARGET_VS_TORCH_OFFLOAD = 10.0
TARGET_VS_DEMAND = 5.0


def budget_label(res):
    b = res.get("budget_bytes", 0) if res else 0
    return f"{b / GIB:g} GiB" if b else "?"


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = argv[1]
    runs = {}
    for kind, row, _ in ROWS:
        runs[row] = load(os.path.join(out, f"{kind}.{row}.json"))
    big = budget_label(runs.get("prefetch-big-gpu") or runs.get("prefetch-big-cpu"))
    small = budget_label(runs.get("prefetch-small-gpu") or runs.get("prefetch-small-cpu")
                         or runs.get("demand-small-gpu"))
    lines = []
    shape = next((r for r in runs.values() if r), None)
    if shape:
        lines.append(f"Workload: L={shape['layers']}, H={shape['hidden']}, N={shape['rows']}, "
                     f"bf16, fp32 AdamW ({shape['layers'] * shape['hidden'] ** 2 / 1e9:.2f} B "
                     "parameters)")
        lines.append("")
    lines.append("| run | ms/step | TFLOP/s | peak GPU memory GiB | GB in/step | GB out/step "
                 "| GPU faults/step | loss after last step | steps |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, row, label in ROWS:
        r = runs[row]
        if r is None:
            continue
        label = label.format(big=big, small=small)
        if r.get("backend") == "sim":
            label += " (sim model, not a measurement)"
        loss = r["losses"][-1] if r.get("losses") else float("nan")
        if kind == "mlp":
            peak = (r["peak_resident_bytes"] + r["device_workspace_bytes"]) / GIB
            lines.append(f"| {label} | {r['ms_per_step_median']:.1f} | {r['tflops']:.1f} | "
                         f"{peak:.2f} | {r['gb_in_per_step']:.2f} | {r['gb_out_per_step']:.2f} | "
                         f"{r['faults_per_step']:.0f} | {loss:.6f} | {r['steps']} |")
        else:
            lines.append(f"| {label} | {r['ms_per_step_median']:.1f} | {r['tflops']:.1f} | "
                         f"{r['peak_gpu_bytes'] / GIB:.2f} | - | - | - | {loss:.6f} | "
                         f"{r['steps']} |")
    link = load(os.path.join(out, "link.json"))
    if link:
        lines.append("")
        lines.append(f"Link (same run): pinned H2D {link.get('pinned_h2d_bps', 0) / 1e9:.1f} GB/s, "
                     f"D2H {link.get('pinned_d2h_bps', 0) / 1e9:.1f} GB/s, managed prefetch to "
                     f"GPU {link.get('prefetch_h2d_bps', 0) / 1e9:.1f} GB/s.")
    # targets (issue 4)
    ms = {row: (r["ms_per_step_median"] if r else None) for row, r in runs.items()}
    checks = []
    if ms.get("resident") and ms.get("torch-resident"):
        v = ms["resident"] / ms["torch-resident"]
        checks.append(("resident within 10% of PyTorch resident", f"{v:.2f}x",
                       v <= TARGET_RESIDENT_VS_TORCH))
    smalls = [ms[k] for k in ("prefetch-small-gpu", "prefetch-small-cpu", "prefetch-small-mixed")
              if ms.get(k)]
    if smalls:
        best = min(smalls)
        checks.append((f"at {small} at most {TARGET_SMALL_MS:.0f} ms/step", f"{best:.1f} ms",
                       best <= TARGET_SMALL_MS))
        if ms.get("torch-offload"):
            v = ms["torch-offload"] / best
            checks.append(("at least 10x faster than PyTorch offload", f"{v:.1f}x",
                           v >= TARGET_VS_TORCH_OFFLOAD))
        if ms.get("demand-small-gpu"):
            v = ms["demand-small-gpu"] / best
            checks.append(("at least 5x faster than demand", f"{v:.1f}x", v >= TARGET_VS_DEMAND))
    if checks:
        lines.append("")
        lines.append("| target | measured | |")
        lines.append("|---|---:|---|")
        for what, val, ok in checks:
            lines.append(f"| {what} | {val} | {'met' if ok else 'missed'} |")
    lines.append("")
    lines.append("ms/step: median of the steps after the first (uvmrt records its schedule in "
                 "step 1; PyTorch warms up). Peak GPU memory: uvmrt = peak resident managed "
                 "bytes (uvmrt's accounting) + the trainer's own device buffers; PyTorch = "
                 "torch.cuda.max_memory_allocated(). GB in = prefetched + read over the link; "
                 "GB out = written back + written over the link.")
    write_table(out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
