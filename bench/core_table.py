#!/usr/bin/env python3
"""core_table.py -- the core benchmark's results as a markdown table.

Usage: python3 bench/core_table.py OUTDIR

Reads what bench/run-core.sh left in OUTDIR:
  core.none.json, core.demand.json, core.prefetch.json   uvmrt's JSON reports
                                                         (uvmrt-report(5)), one per policy
  core.prefetch-noremote.json                            prefetch with UVMRT_REMOTE=0
                                                         (optional)
  link.json                                              uvmrt-linkbench's measurements
and prints a markdown table (also written to OUTDIR/table.md): per policy the median
over steps 2..K (step 1 records the schedule) of the step time, the bytes moved in,
written back and discarded, the faults and the wait; then the pinned link's floor
and the ratios the project targets:

  floor            = max(none ms/step, prefetch link-in bytes / pinned H2D,
                         prefetch link-out bytes / pinned D2H), where link-in =
                         prefetched + read over the link from host-homed tensors,
                         link-out = written back + written over the link
  prefetch/floor   target <= 1.3
  demand/prefetch  target >= 5
  prefetch link throughput = prefetch bytes / h2d_busy_ns (steps 2..K), against
                   pinned H2D: target >= 85%

GB = 1e9 bytes, GiB = 2^30 bytes. Standard library only.
"""

import os
import statistics
import sys

from tablelib import load, write_table

POLICIES = ("none", "demand", "prefetch")
# rows: (report file stem, label); the last is prefetch with host homing off
RUNS = (("none", "none"), ("demand", "demand"), ("prefetch", "prefetch"),
        ("prefetch-noremote", "prefetch, no homing (UVMRT_REMOTE=0)"))
GB = 1e9
GIB = float(1 << 30)

# targets (see DESIGN.md and the brief of bench/)
TARGET_PREFETCH_OVER_FLOOR = 1.3
TARGET_DEMAND_OVER_PREFETCH = 5.0
TARGET_LINK_FRACTION = 0.85


# ---------------------------------------------------------------------------
# reading


def report_steps(report):
    """The per-step records, as dicts; from `steps`, or from `step_ns` alone."""
    steps = report.get("steps")
    if isinstance(steps, list) and steps:
        return [s for s in steps if isinstance(s, dict)]
    return [{"step_ns": ns} for ns in report.get("step_ns", [])]


def policy_row(report):
    """Medians over steps 2..K (index 1.. : step 0 is the recording step)."""
    steps = report_steps(report)
    planned = steps[1:] if len(steps) > 1 else steps

    def med(key, scale):
        values = [float(s.get(key, 0)) / scale for s in planned]
        return statistics.median(values) if values else 0.0

    # steps after the first planned one: that one also moves the plan into place
    steady = planned[1:] if len(planned) > 1 else planned
    h2d_bytes = sum(float(s.get("prefetch_bytes", 0)) for s in steady)
    h2d_ns = sum(float(s.get("h2d_busy_ns", 0)) for s in steady)
    return {
        "policy": report.get("policy", "?"),
        "backend": report.get("backend", "?"),
        "budget_bytes": report.get("budget_bytes", 0),
        "peak_resident_bytes": report.get("peak_resident_bytes", 0),
        "steps": len(steps),
        "ms": med("step_ns", 1e6),
        "in_bytes": med("prefetch_bytes", 1.0),
        "out_bytes": med("evict_bytes", 1.0),
        "discard_bytes": med("discard_bytes", 1.0),
        "rd_bytes": med("remote_read_bytes", 1.0),
        "wr_bytes": med("remote_write_bytes", 1.0),
        "faults": med("fault_count", 1.0),
        "wait_ms": med("wait_ns", 1e6),
        # bytes per second while the copy stream was busy prefetching
        "h2d_bps": h2d_bytes / (h2d_ns * 1e-9) if h2d_ns > 0 else None,
    }


def link_bps(link, name):
    """A bandwidth from link.json: the flat `<name>_bps` key, or its `results` entry."""
    if not link:
        return None
    value = link.get(name + "_bps")
    if value is None:
        for r in link.get("results", []):
            if r.get("name") == name:
                value = r.get("bps")
    return float(value) if value else None


# ---------------------------------------------------------------------------
# formatting


def gb(nbytes):
    return f"{nbytes / GB:.2f}"


def verdict(ok):
    return "ok" if ok else "MISSED"


def build_table(rows, link):
    h2d = link_bps(link, "pinned_h2d")
    d2h = link_bps(link, "pinned_d2h")
    lines = []

    first = next(iter(rows.values()))
    budgeted = rows.get("prefetch") or rows.get("demand") or first  # none has no budget
    lines.append(
        f"uvmrt core benchmark: backend {first['backend']}, "
        f"budget {float(budgeted['budget_bytes'] or 0) / GIB:.2f} GiB (demand, prefetch), "
        f"{first['steps']} steps; medians over steps 2..{first['steps']} "
        f"(step 1 records the schedule)."
    )
    lines.append("")
    lines.append(
        "| run | ms/step | GB in/step | GB out/step | GB discarded/step "
        "| GB read over link/step | GB written over link/step "
        "| faults/step | wait ms/step | peak resident GiB |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for stem, label in RUNS:
        r = rows.get(stem)
        if r is None:
            continue
        lines.append(
            f"| {label} | {r['ms']:.1f} | {gb(r['in_bytes'])} | {gb(r['out_bytes'])} "
            f"| {gb(r['discard_bytes'])} | {gb(r['rd_bytes'])} | {gb(r['wr_bytes'])} "
            f"| {r['faults']:.0f} | {r['wait_ms']:.1f} "
            f"| {float(r['peak_resident_bytes'] or 0) / GIB:.2f} |"
        )

    none, demand, prefetch = (rows.get(p) for p in POLICIES)
    floor = None
    parts = []
    if prefetch and h2d and d2h:
        # bytes that crossed the link each way: migrations plus remote accesses
        link_in = prefetch["in_bytes"] + prefetch["rd_bytes"]
        link_out = prefetch["out_bytes"] + prefetch["wr_bytes"]
        in_ms = link_in / h2d * 1e3
        out_ms = link_out / d2h * 1e3
        floor = max(in_ms, out_ms, none["ms"] if none else 0.0)
        parts = [
            f"in {in_ms:.1f} ms at {h2d / GB:.1f} GB/s",
            f"out {out_ms:.1f} ms at {d2h / GB:.1f} GB/s",
        ]
        if none:
            parts.insert(0, f"none {none['ms']:.1f} ms")
        lines.append(
            f"| pinned-link ceiling for prefetch's bytes | {floor:.1f} | {gb(link_in)} "
            f"| {gb(link_out)} | - | - | - | - | - | - |"
        )

    lines.append("")
    if floor is not None:
        lines.append(f"- floor = max({', '.join(parts)}) = **{floor:.1f} ms/step**")
    else:
        lines.append("- floor: needs link.json (pinned H2D and D2H) and the prefetch report")
    if prefetch and floor:
        ratio = prefetch["ms"] / floor
        ok = verdict(ratio <= TARGET_PREFETCH_OVER_FLOOR)
        lines.append(
            f"- prefetch/floor = **{ratio:.2f}** (target <= {TARGET_PREFETCH_OVER_FLOOR}: {ok})"
        )
    if demand and prefetch and prefetch["ms"] > 0:
        ratio = demand["ms"] / prefetch["ms"]
        ok = verdict(ratio >= TARGET_DEMAND_OVER_PREFETCH)
        lines.append(
            f"- demand/prefetch = **{ratio:.2f}** (target >= {TARGET_DEMAND_OVER_PREFETCH:g}: {ok})"
        )
    if none and prefetch and none["ms"] > 0:
        lines.append(f"- prefetch/none = {prefetch['ms'] / none['ms']:.2f}")
    if prefetch and h2d and d2h and prefetch["ms"] > 0:
        # what the runtime really pushed through the link, all mechanisms together
        in_bps = (prefetch["in_bytes"] + prefetch["rd_bytes"]) / (prefetch["ms"] * 1e-3)
        out_bps = (prefetch["out_bytes"] + prefetch["wr_bytes"]) / (prefetch["ms"] * 1e-3)
        frac = in_bps / h2d
        lines.append(
            f"- prefetch: link throughput host->device = {in_bps / GB:.1f} GB/s over the whole "
            f"step (prefetched + read over the link) = **{100 * frac:.0f}%** of pinned H2D "
            f"(target >= {100 * TARGET_LINK_FRACTION:.0f}%: {verdict(frac >= TARGET_LINK_FRACTION)}); "
            f"device->host {out_bps / GB:.1f} GB/s = {100 * out_bps / d2h:.0f}% of pinned D2H"
        )
    mp = link_bps(link, "prefetch_h2d")
    if mp and h2d:
        lines.append(
            f"- managed prefetch alone (uvmrt-linkbench, 1 GiB calls): {mp / GB:.1f} GB/s = "
            f"{100 * mp / h2d:.0f}% of pinned H2D"
        )
    for stem, label in RUNS[2:]:
        r = rows.get(stem)
        if r and r["in_bytes"] <= 0:
            continue  # nothing prefetched in steady state: no throughput to speak of
        if r and r["h2d_bps"] and h2d:
            frac = r["h2d_bps"] / h2d
            lines.append(
                f"- {label}: prefetch throughput = {r['h2d_bps'] / GB:.1f} GB/s while copying "
                f"(prefetch bytes / h2d_busy_ns) = **{100 * frac:.0f}%** of pinned H2D "
                f"{h2d / GB:.1f} GB/s (target >= {100 * TARGET_LINK_FRACTION:.0f}%: "
                f"{verdict(frac >= TARGET_LINK_FRACTION)})"
            )
        elif r:
            lines.append(f"- {label}: prefetch throughput needs h2d_busy_ns and link.json")
    noremote = rows.get("prefetch-noremote")
    if noremote and prefetch and prefetch["ms"] > 0:
        lines.append(
            f"- host homing: prefetch {prefetch['ms']:.1f} ms/step against "
            f"{noremote['ms']:.1f} without it ({noremote['ms'] / prefetch['ms']:.2f}x)"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# main


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = argv[1]
    rows = {}
    for stem, _ in RUNS:
        report = load(os.path.join(outdir, f"core.{stem}.json"), note_missing=True)
        if report is not None:
            row = policy_row(report)
            if row["policy"] not in ("?", stem.split("-")[0]):
                print(
                    f"core_table.py: core.{stem}.json says policy {row['policy']} "
                    "(UVMRT_POLICY set?)",
                    file=sys.stderr,
                )
            rows[stem] = row
    if not rows:
        print(f"core_table.py: no core.<policy>.json in {outdir}", file=sys.stderr)
        return 1
    link = load(os.path.join(outdir, "link.json"), note_missing=True)

    table = build_table(rows, link)
    write_table(outdir, table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
