#!/usr/bin/env python3
"""gpt_table.py -- the GPT benchmark's results as a markdown table (bench/run-gpt.sh).

Usage: python3 bench/gpt_table.py OUTDIR

Reads what bench/run-gpt.sh left in OUTDIR (any subset; rows are ordered by depth, then
uvmrt, PyTorch, DeepSpeed):
  gpt.ROW.json     uvmrt-gpt --result-json        torch.ROW.json  bench/gpt_torch.py --json
  link.json        uvmrt-linkbench --json         hostbw.json     gpt_torch.py --mode hostbw
  shape.json       B, T of the run                skip.ROW.txt    why a row was not run
  llmc.ROW.json    llm.c + cuDNN (run-gpt.sh's llmc rows: step times from its log)
prints the table and writes OUTDIR/table.md.

Columns: ms/step (median of the steps after the warm-up ones), tokens/s (B*T per step
time), TFLOP/s (every row with one formula: 6 N B T + 12 L C T B T per step, N the
parameter count, as bench/gpt_torch.py documents; recomputation is not counted as
work), peak GPU memory (uvmrt: its peak resident managed bytes + the trainer's own
device buffers; PyTorch/DeepSpeed: torch.cuda.max_memory_allocated; llm.c: its
"device memory usage" line), GB in/out per step
over the link (uvmrt's counters; - for the peers), GPU faults per step, the last loss,
and for each uvmrt row its resource floor: the largest of
  compute   the resident row's step time at the same depth and recompute setting
            (dD-resident, or dD-resident-recompute for --recompute all rows),
  link in   GB in per step / pinned host-to-device bandwidth (link.json),
  link out  GB out per step / pinned device-to-host bandwidth,
  host mem  host-memory bytes per step / host memory bandwidth: the calibrate row's
            host_mem_shared_bps (CPU and DMA together) when it ran, else the triad (hostbw.json): the
            trainer's host_bytes_per_step when it reports one, else GB in + GB out
            (the DMA reads and writes host memory) + 28 bytes per parameter when the
            optimizer runs on the CPU (fp32 AdamW: read grad, master, m, v; write
            master, m, v),
  CPU AdamW the parameters whose AdamW runs on the CPU over the calibrated AdamW rate,
with the step time over that floor and the resource that sets it. GB = 1e9 bytes,
GiB = 2^30 bytes. Standard library only.
"""

import glob
import os
import re
import sys

from tablelib import load, write_table

DEPTHS = {12: 768, 24: 1024, 36: 1280, 48: 1600, 60: 1920}
GIB = float(1 << 30)
CPU_ADAMW_BYTES_PER_PARAM = 28
TARGET_RESIDENT_TOKENS = 33000
TARGET_SMALL_TOKENS = 14500
TARGET_FLOOR_RATIO = 1.3
ROW_RE = re.compile(r"^d(\d+)(?:b(\d+))?-(.*)$")


def param_count(L, C, V, T):
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


def cpu_params(r, L, C, V, T):
    """Parameters whose AdamW runs on the CPU: the top cpu_layers of the L + 2 layers
    (head first, then the top blocks, the embedding last)."""
    k = r.get("cpu_layers")
    if k is None:
        return param_count(L, C, V, T) if r.get("optimizer_on") == "cpu" else 0
    n = 0
    if k >= 1:
        n += 2 * C
    n += min(max(k - 1, 0), L) * (12 * C * C + 13 * C)
    if k >= L + 2:
        n += V * C + T * C
    return n


def step_flops(L, C, V, B, T):
    return 6.0 * param_count(L, C, V, T) * B * T + 12.0 * L * C * T * B * T


def describe(rest, r):
    if rest == "resident":
        return "uvmrt-gpt, all resident (policy none)"
    if rest == "resident-recompute":
        return "uvmrt-gpt, all resident, --recompute all"
    m = re.match(r"^prefetch-(\w+)-auto$", rest)
    if m:
        ch = ""
        if r.get("cpu_layers") is not None:
            ch = f" (chose {r.get('cpu_layers')} CPU layers, {r.get('recompute_blocks')} recomputing)"
        return f"uvmrt-gpt prefetch, budget {m.group(1).upper()}, automatic choice{ch}"
    m = re.match(r"^prefetch-(\w+)-k(\d+)-(\w+)$", rest)
    if m:
        return (f"uvmrt-gpt prefetch, budget {m.group(1).upper()}, top {m.group(2)} layers' AdamW "
                f"on the CPU, recompute {m.group(3)}")
    m = re.match(r"^prefetch-(\w+)-(gpu|cpu)-(none|all)$", rest)
    if m:
        return (f"uvmrt-gpt prefetch, budget {m.group(1).upper()}, optimizer {m.group(2).upper()}"
                f", recompute {m.group(3)}")
    return {"llmc-cudnn": "llm.c + cuDNN attention (USE_CUDNN=1), all resident",
            "torch-resident": "PyTorch, all resident",
            "torch-checkpoint": "PyTorch, activation checkpointing",
            "zero2": "DeepSpeed ZeRO-2, offload_optimizer cpu, checkpointing",
            "zero3": "DeepSpeed ZeRO-3, offload_param + optimizer cpu, checkpointing"}.get(rest, rest)


def order_key(row):
    m = ROW_RE.match(row)
    d, rest = int(m.group(1)), m.group(3)
    kind = 0 if not (rest.startswith("torch") or rest.startswith("zero")) else (
        1 if rest.startswith("torch") else 2)
    sub = {"resident": 0, "llmc-cudnn": 0.5, "resident-recompute": 1, "torch-resident": 0, "torch-checkpoint": 1,
           "zero2": 0, "zero3": 1}.get(rest, 2)
    big = 0
    pm = re.match(r"^prefetch-(\d+)([kmg]?)", rest, re.I)
    if pm:
        big = -int(pm.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[
            pm.group(2).lower()]
    return (d, int(m.group(2) or 0), kind, sub, big, rest)


def fmt(v, spec, dash="-"):
    return dash if v is None else format(v, spec)


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = argv[1]
    shape = load(os.path.join(out, "shape.json")) or {}
    link = load(os.path.join(out, "link.json")) or {}
    host = load(os.path.join(out, "hostbw.json")) or {}
    h2d, d2h = link.get("pinned_h2d_bps"), link.get("pinned_d2h_bps")
    host_bps = host.get("host_triad_bps")
    # The calibrated profile (the calibrate row), when there is one: host memory carries
    # more with the CPU and the link's DMA both at work than the CPU's triad alone reaches,
    # so the floor divides by that total; and the CPU's AdamW at its measured rate.
    prof = load(os.path.join(out, "profile.json")) or {}
    if prof.get("host_mem_shared_bps"):
        host_bps = prof["host_mem_shared_bps"]
    adamw_rate = prof.get("cpu_adamw_params_per_s")

    runs, skipped = {}, {}
    for path in glob.glob(os.path.join(out, "gpt.*.json")) + glob.glob(
            os.path.join(out, "torch.*.json")) + glob.glob(os.path.join(out, "llmc.*.json")):
        base = os.path.basename(path)
        if base.endswith(".report.json"):
            continue
        kind, row = base.split(".", 1)[0], base.split(".", 1)[1][:-len(".json")]
        if not ROW_RE.match(row):
            continue
        r = load(path)
        if r is not None:
            runs[row] = (kind, r)
    for path in glob.glob(os.path.join(out, "skip.*.txt")):
        row = os.path.basename(path)[len("skip."):-len(".txt")]
        if ROW_RE.match(row) and row not in runs:
            with open(path, encoding="utf-8") as f:
                skipped[row] = f.read().strip()

    def shape_of(row, r):
        m = ROW_RE.match(row)
        L = int(r.get("layers") or r.get("depth") or m.group(1))
        C = int(r.get("channels") or DEPTHS.get(L, 0))
        B = int(r.get("batch") or m.group(2) or shape.get("batch", 8))
        T = int(r.get("seq") or shape.get("seq", 1024))
        V = int(r.get("vocab") or shape.get("vocab", 50257))
        return L, C, V, B, T

    lines = [f"GPT-2, B={shape.get('batch', '?')} (dDbN rows: N), T={shape.get('seq', '?')}, "
             "random tokens, vocab 50257, bf16 matmuls, fp32 AdamW"
             + (" (smoke shapes)" if shape.get("smoke") else ""), ""]
    lines.append("| run | ms/step | tokens/s | TFLOP/s | peak GPU GiB | GB in/step | "
                 "GB out/step | faults/step | loss | floor ms (bound) | x floor |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = {}
    for row in sorted(set(runs) | set(skipped), key=order_key):
        m = ROW_RE.match(row)
        d, rest = int(m.group(1)), m.group(3)
        label = f"d{d}{'b' + m.group(2) if m.group(2) else ''} {describe(rest, {})}"
        if row in skipped:
            lines.append(f"| {label} | {skipped[row]} |" + " |" * 9)
            continue
        kind, r = runs[row]
        label = f"d{d}{'b' + m.group(2) if m.group(2) else ''} {describe(rest, r)}"
        if r.get("backend") == "sim":
            label += " (sim model, not a measurement)"
        L, C, V, B, T = shape_of(row, r)
        ms = r.get("ms_per_step_median")
        tok = B * T / (ms * 1e-3) if ms else None
        tfl = step_flops(L, C, V, B, T) / (ms * 1e-3) / 1e12 if ms else None
        loss = r["losses"][-1] if r.get("losses") else None
        if kind == "gpt":
            peak = (r.get("peak_resident_bytes", 0) + r.get("device_workspace_bytes", 0)) / GIB
            gin, gout = r.get("gb_in_per_step"), r.get("gb_out_per_step")
            faults = r.get("faults_per_step")
        else:
            peak, gin, gout, faults = (r.get("peak_gpu_bytes") or 0) / GIB, None, None, None
        floor_s = "-"
        ratio = None
        if kind == "gpt" and ms:
            rec = "all" if (rest.endswith("-all") or rest == "resident-recompute"
                            or r.get("recompute") == "all") else "none"
            base = f"d{d}{'b' + m.group(2) if m.group(2) else ''}-" + (
                "resident-recompute" if rec == "all" else "resident")
            cands = []
            if base in runs and runs[base][1].get("ms_per_step_median"):
                cands.append((runs[base][1]["ms_per_step_median"], "compute"))
            if gin is not None and h2d:
                cands.append((gin * 1e9 / h2d * 1e3, "link in"))
            if gout is not None and d2h:
                cands.append((gout * 1e9 / d2h * 1e3, "link out"))
            if host_bps and gin is not None and gout is not None:
                hb = r.get("host_bytes_per_step")
                if hb is None:
                    hb = (gin + gout) * 1e9
                    hb += CPU_ADAMW_BYTES_PER_PARAM * cpu_params(r, L, C, V, T)
                cands.append((hb / host_bps * 1e3, "host mem"))
            if adamw_rate and cpu_params(r, L, C, V, T) > 0:
                cands.append((cpu_params(r, L, C, V, T) / adamw_rate * 1e3, "CPU AdamW"))
            if cands:
                fl, why = max(cands)
                ratio = ms / fl if fl > 0 else None
                floor_s = f"{fl:.1f} ({why})"
        summary[row] = {"tokens": tok, "ratio": ratio, "faults_late": r.get("faults_after_step1"),
                        "faults": faults}
        lines.append(f"| {label} | {fmt(ms, '.1f')} | {fmt(tok, '.0f')} | {fmt(tfl, '.1f')} | "
                     f"{peak:.2f} | {fmt(gin, '.2f')} | {fmt(gout, '.2f')} | "
                     f"{fmt(faults, '.0f')} | {fmt(loss, '.4f')} | {floor_s} | "
                     f"{fmt(ratio, '.2f')} |")
    if link or host:
        lines.append("")
        lines.append("Same run: " + ", ".join(x for x in (
            h2d and f"pinned H2D {h2d / 1e9:.1f} GB/s",
            d2h and f"pinned D2H {d2h / 1e9:.1f} GB/s",
            link.get("pinned_bidir_bps") and f"both at once {link['pinned_bidir_bps'] / 1e9:.1f} GB/s",
            link.get("prefetch_h2d_bps") and f"managed prefetch to GPU "
                                             f"{link['prefetch_h2d_bps'] / 1e9:.1f} GB/s",
            host.get("host_triad_bps") and f"host memory (triad, {host.get('threads', '?')} threads) "
                                           f"{host['host_triad_bps'] / 1e9:.1f} GB/s",
            prof.get("host_mem_shared_bps") and f"host memory with the CPU and the link both at work "
                                                f"{prof['host_mem_shared_bps'] / 1e9:.1f} GB/s (the floor's)",
            adamw_rate and f"CPU AdamW {adamw_rate / 1e9:.2f} Gparam/s alone (uvmrt-calibrate)") if x) + ".")

    # Issue 9: uvmrt's predictions against the measured step, for the uvmrt rows with a
    # budget: the runtime's own (the automatic choice's, after its review), and the
    # re-play of the run's record (uvmrt-plan --record: the GPU's measured call times).
    preds = []
    for row in sorted(runs, key=order_key):
        kind, r = runs[row]
        if kind != "gpt" or r.get("backend") != "cuda" or r.get("policy") != "prefetch":
            continue
        meas = r.get("final_ms_per_step_median") or r.get("ms_per_step_median")
        ch = r.get("choice") or {}
        own = None
        if ch:  # the prediction for the values it ran last (after a re-plan: with the measured work)
            own = ch.get("predicted_ms")
        rep = load(os.path.join(out, f"replay.{row}.json")) or {}
        rp = rep.get("predicted_step_ns")
        rp = rp / 1e6 if rp else None
        e = lambda p: f"{100.0 * (p / meas - 1.0):+.1f}%" if p and meas else "-"
        preds.append(f"| {row} | {fmt(meas, '.1f')} | {fmt(own, '.1f')} | {e(own)} | "
                     f"{fmt(rp, '.1f')} | {e(rp)} |")
    if preds:
        lines += ["", "| uvmrt row | measured ms/step (final values) | the runtime's prediction | error | "
                  "predicted from the run's record | error |", "|---|---:|---:|---:|---:|---:|"] + preds

    checks = []
    res = summary.get("d48-resident")
    if res and res["tokens"]:
        checks.append((f"d48 resident >= {TARGET_RESIDENT_TOKENS} tokens/s",
                       f"{res['tokens']:.0f}", res["tokens"] >= TARGET_RESIDENT_TOKENS))
    small = {k: v for k, v in summary.items() if k.startswith("d48-prefetch-8g-") and v["tokens"]}
    if small:
        best = max(small, key=lambda k: small[k]["tokens"])
        v = small[best]
        checks.append((f"d48 at 8 GiB >= {TARGET_SMALL_TOKENS} tokens/s (best: {best})",
                       f"{v['tokens']:.0f}", v["tokens"] >= TARGET_SMALL_TOKENS))
        late = v["faults_late"] if v["faults_late"] is not None else v["faults"]
        if late is not None:
            checks.append((f"{best}: 0 GPU faults after step 1", f"{late:.0f}", late == 0))
        if v["ratio"] is not None:
            checks.append((f"{best}: within {TARGET_FLOOR_RATIO}x of its floor",
                           f"{v['ratio']:.2f}x", v["ratio"] <= TARGET_FLOOR_RATIO))
    d60 = [k for k in runs if k.startswith("d60b4-prefetch-12g")]
    for k in d60:
        # random tokens: the loss cannot fall below ln(V) in a few steps; "trains" means
        # every step ran with a finite loss, the budget held and nothing faulted after step 1
        r = runs[k][1]
        losses = r.get("losses") or []
        finite = bool(losses) and all(isinstance(x, (int, float)) and x == x and abs(x) < 1e30
                                      for x in losses)
        peak = r.get("peak_resident_bytes", 0)
        late = r.get("faults_after_step1")
        ok = finite and len(losses) == r.get("steps", len(losses)) and peak <= 12 * GIB and not late
        checks.append((f"{k}: trains under 12 GiB (every step a finite loss, peak resident "
                       "<= 12 GiB, no faults after step 1)",
                       f"{len(losses)} steps, loss {losses[0]:.3f} -> {losses[-1]:.3f}, peak "
                       f"{peak / GIB:.2f} GiB, {late if late is not None else '?'} faults" if losses
                       else "no losses", ok))
    if checks:
        lines += ["", "| target (issue 11) | measured | |", "|---|---:|---|"]
        lines += [f"| {w} | {v} | {'met' if ok else 'missed'} |" for w, v, ok in checks]
    write_table(out, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
