#!/usr/bin/env python3
"""plan_table.py -- the planner benchmark's tables (bench/run-plan.sh).

Usage: python3 bench/plan_table.py OUTDIR

Reads OUTDIR/mlp.ROW.json (uvmrt-mlp --result-json, measured on the GPU), sim.ROW.json
(the same flags on the sim model with the calibrated profile: the a-priori prediction),
replay.ROW.json (uvmrt-plan --record of the run's UVMRT_RECORD: the prediction from the
GPU's measured call times), profile.json (uvmrt-calibrate) and link.json (linkbench),
and prints, then writes to OUTDIR/table.md:
  1. measured against predicted, per row, with the errors (predicted / measured - 1):
     a priori, from the run's record, and (automatic rows) the runtime's own prediction
     for the values it ran last; "measured" is the median of the steps after the last
     one that recorded (a changed choice records again);
  2. the automatic choice at the small budget against the best hand-set row;
  3. the automatic choice's step time over the budgets;
  3b. with REPEATS, every run of the automatic choice and of the best hand-set row at
     the small budget, and their medians' ratio;
  4. the small-budget rows against their floor: the largest of the resident row's step,
     GB in / pinned H2D, GB out / pinned D2H, the CPU's AdamW of its blocks at the
     calibrated rate, and host-memory bytes (the CPU's AdamW, 28 per parameter, plus the
     link's DMA, GB in + GB out) over the host's memory bandwidth with the link busy
     (host_mem_shared_bps).
Every predicted number is the model's, labelled so. Standard library only.
"""

import glob
import os
import re
import statistics
import sys

from tablelib import load, write_table

ADAMW_BYTES = 28
REPEAT_RE = re.compile(r"-r[0-9]+$")  # a repeated run of a row (REPEATS)


def measured(r):
    """The final values' steady step: the median of the steps after the last one that
    recorded (uvmrt-mlp's final_ms_per_step_median), else the run's median."""
    return r.get("final_ms_per_step_median") or r["ms_per_step_median"]


def runtime_prediction(r):
    """What the runtime predicts for the values it ran last (predicted_ms): after a
    re-plan, made with the measured work, also when it went back to the first values."""
    ch = r.get("choice")
    if not ch:
        return None
    return ch.get("predicted_ms")


def err(p, m):
    return f"{100.0 * (p / m - 1.0):+.1f}%" if p and m else "-"


def best_hand(out, small):
    """The fastest hand-set row at the small budget (SMALL-kK-REC), or None."""
    best, bm = None, None
    for path in sorted(glob.glob(os.path.join(out, f"mlp.{small}-k*.json"))):
        name = os.path.basename(path)[len("mlp."):-len(".json")]
        r = load(path)
        if REPEAT_RE.search(name) or r is None or r.get("ms_per_step_median") is None:
            continue
        if bm is None or measured(r) < bm:
            best, bm = name, measured(r)
    return best


def main(argv):
    if len(argv) == 3 and argv[1] == "--best-hand":
        shape = load(os.path.join(argv[2], "shape.json")) or {}
        b = best_hand(argv[2], shape.get("small_budget", "8G"))
        if b:
            print(b)
        return 0 if b else 1
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    out = argv[1]
    prof = load(os.path.join(out, "profile.json")) or {}
    prof = prof.get("profile", prof)
    link = load(os.path.join(out, "link.json")) or {}
    shape = load(os.path.join(out, "shape.json")) or {}
    small = shape.get("small_budget", "8G")
    rows, repeats = {}, {}
    for path in sorted(glob.glob(os.path.join(out, "mlp.*.json"))):
        name = os.path.basename(path)[len("mlp."):-len(".json")]
        r = load(path)
        if r is None or r.get("ms_per_step_median") is None:
            continue
        if REPEAT_RE.search(name):
            repeats.setdefault(REPEAT_RE.sub("", name), []).append(measured(r))
            continue
        sim = load(os.path.join(out, f"sim.{name}.json")) or {}
        rep = load(os.path.join(out, f"replay.{name}.json")) or {}
        rows[name] = (r, sim, rep)

    def key(n):
        if n.startswith("resident"):
            return (0, 0, 0, n)
        if n.endswith("-auto"):
            return (2, int("".join(c for c in n.split("-")[0] if c.isdigit()) or 0), 0, n)
        parts = n.split("-")
        return (1, int(parts[1][1:]), 0 if parts[2] == "none" else 1, n)

    L = [
        "W1 (24 x Linear(8192, 8192) + GELU, 8192 rows, bf16), uvmrt-mlp; measured on the GPU, "
        "predicted by uvmrt's model with the profile calibrated in the same run.",
        "",
        "| row | cpu_layers | recompute | measured ms/step | predicted a priori (sim) | error | "
        "predicted from the run's record | error | the runtime's prediction | error | GB in | GB out |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    fmt = lambda v: "-" if v is None else f"{v:.1f}"
    for n in sorted(rows, key=key):
        r, sim, rep = rows[n]
        m = measured(r)
        ps = sim.get("ms_per_step_median")
        pr = rep.get("predicted_step_ns")
        pr = pr / 1e6 if pr else None
        pt = runtime_prediction(r)
        L.append(f"| {n} | {r.get('cpu_layers')} | {r.get('recompute')} | {m:.1f} | "
                 f"{fmt(ps)} | {err(ps, m)} | {fmt(pr)} | {err(pr, m)} | {fmt(pt)} | {err(pt, m)} | "
                 f"{r.get('gb_in_per_step', 0):.2f} | {r.get('gb_out_per_step', 0):.2f} |")

    hand = {n: v for n, v in rows.items() if n.startswith(small + "-k")}
    auto = rows.get(small + "-auto")
    if hand and auto:
        best = min(hand, key=lambda n: measured(hand[n][0]))
        bm = measured(hand[best][0])
        a = auto[0]
        am = measured(a)
        ch = a.get("choice") or {}
        L += ["", f"| automatic choice at {small} | measured ms/step | best hand-set row | its ms/step | "
              "auto / best | within 3% |", "|---|---:|---|---:|---:|---|",
              f"| cpu_layers {a.get('cpu_layers')}, recompute {a.get('recompute')} "
              f"(predicted {ch.get('first_predicted_ms', 0):.1f} ms; measured by the review "
              f"{ch.get('measured_ms') or 0:.1f}; re-planned: {ch.get('replanned')}; "
              f"reverted: {ch.get('reverted')}) | {am:.1f} | {best} | "
              f"{bm:.1f} | {am / bm:.3f} | {'yes' if am <= 1.03 * bm else 'no'} |"]

    # the repeats: every run of the automatic choice and of the best hand-set row
    if hand and auto and (small + "-auto") in repeats and best in repeats:
        runs_a = [measured(auto[0])] + repeats[small + "-auto"]
        runs_b = [measured(hand[best][0])] + repeats[best]
        ma, mb = statistics.median(runs_a), statistics.median(runs_b)
        L += ["", f"| repeated in turns at {small} | runs (ms/step) | median |", "|---|---|---:|",
              f"| automatic choice | {', '.join(f'{v:.1f}' for v in runs_a)} | {ma:.1f} |",
              f"| {best} | {', '.join(f'{v:.1f}' for v in runs_b)} | {mb:.1f} |",
              "", f"Medians of the runs: automatic / best hand-set = {ma / mb:.3f} "
              f"({'within' if ma <= 1.03 * mb else 'not within'} 3%)."]

    autos = sorted((n for n in rows if n.endswith("-auto")), key=key)
    if autos:
        L += ["", "| budget | automatic choice | measured ms/step | predicted (choice) | "
              "rise over the previous budget |", "|---|---|---:|---:|---:|"]
        prev = None
        for n in autos:
            r = rows[n][0]
            m = measured(r)
            rise = f"{100.0 * (m / prev - 1.0):+.1f}%" if prev else "-"
            L.append(f"| {n.split('-')[0]} | cpu_layers {r.get('cpu_layers')}, recompute {r.get('recompute')} | "
                     f"{m:.1f} | {fmt(runtime_prediction(r))} | {rise} |")
            prev = m

    res = rows.get("resident")
    h2d, d2h = link.get("pinned_h2d_bps"), link.get("pinned_d2h_bps")
    hm = prof.get("host_mem_shared_bps") or prof.get("host_mem_bps")
    rate = prof.get("cpu_adamw_params_per_s")
    if res and h2d and d2h:
        L += ["", f"| row at {small} | measured ms | resident | link in | link out | CPU AdamW | "
              "host memory | floor | x floor |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        per_block = 8192 * 8192
        for n in sorted(hand, key=key) + ([small + "-auto"] if auto else []):
            r = rows[n][0]
            m = measured(r)
            gin, gout = r.get("gb_in_per_step", 0) * 1e9, r.get("gb_out_per_step", 0) * 1e9
            cpu_p = (r.get("cpu_layers") or 0) * per_block
            terms = {"resident": measured(res[0]), "link in": gin / h2d * 1e3,
                     "link out": gout / d2h * 1e3}
            terms["CPU AdamW"] = cpu_p / rate * 1e3 if rate else 0.0
            terms["host memory"] = (cpu_p * ADAMW_BYTES + gin + gout) / hm * 1e3 if hm else 0.0
            fl = max(terms.values())
            why = max(terms, key=terms.get)
            L.append(f"| {n} | {m:.1f} | " + " | ".join(f"{terms[k]:.1f}" for k in
                     ("resident", "link in", "link out", "CPU AdamW", "host memory")) +
                     f" | {fl:.1f} ({why}) | {m / fl:.2f} |")
        L += ["", f"Same run: pinned H2D {h2d / 1e9:.1f} GB/s, D2H {d2h / 1e9:.1f} GB/s; host memory "
              f"{(hm or 0) / 1e9:.1f} GB/s with the link busy; CPU AdamW {(rate or 0) / 1e9:.2f} Gparam/s "
              "alone (uvmrt-calibrate)."]
    write_table(out, "\n".join(L) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
