#!/usr/bin/env python3
"""regress_table.py -- bench/run-regress.sh's results: old build against new, per row.

Usage: python3 bench/regress_table.py OUTDIR

Reads OUTDIR/ROW.LABEL.ROUND*.json for LABEL old and new: uvmrt's JSON report
(uvmrt-report(5): a top-level "step_ns" array) from uvmrt-demo, or uvmrt-mlp's
--result-json (a "step_ms" array). A run's figure is the median step time over steps
2..N (step 1 records the schedule); a row's figure per build is the median over
rounds. Prints a markdown table with new/old; standard library only.
"""

import glob
import json
import os
import statistics
import sys

ROWS = ("demo-prefetch", "demo-demand", "mlp-8g")


def run_ms(path):
    """Median step time in ms over steps 2..N of one run, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"regress_table.py: {path}: {e}", file=sys.stderr)
        return None
    if "step_ms" in doc:
        steps = [float(v) for v in doc["step_ms"]]
    elif "step_ns" in doc:
        steps = [v / 1e6 for v in doc["step_ns"]]
    else:
        print(f"regress_table.py: {path}: no step times", file=sys.stderr)
        return None
    steps = steps[1:] if len(steps) > 1 else steps
    return statistics.median(steps) if steps else None


def build_ms(outdir, row, label):
    """(median over rounds, list of per-round figures) for one row and build."""
    figs = []
    for path in sorted(glob.glob(os.path.join(outdir, f"{row}.{label}.*.json"))):
        ms = run_ms(path)
        if ms is not None:
            figs.append(ms)
    return (statistics.median(figs) if figs else None), figs


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    print("| row | old ms/step | new ms/step | new/old | rounds (old; new) |")
    print("|---|---:|---:|---:|---|")
    for row in ROWS:
        old, old_figs = build_ms(outdir, row, "old")
        new, new_figs = build_ms(outdir, row, "new")
        if old is None or new is None:
            print(f"| {row} | - | - | - | missing |")
            continue
        rounds = ", ".join(f"{v:.1f}" for v in old_figs) + "; " + ", ".join(f"{v:.1f}" for v in new_figs)
        print(f"| {row} | {old:.1f} | {new:.1f} | {new / old:.3f} | {rounds} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
