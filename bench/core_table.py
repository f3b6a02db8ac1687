#!/usr/bin/env python3
"""core_table.py -- the core benchmark's results as a markdown table.

Usage: python3 bench/core_table.py OUTDIR

Reads what bench/run-core.sh left in OUTDIR:
  core.none.json, core.demand.json, core.prefetch.json   uvmrt's JSON reports
                                                         (uvmrt-report(5)), one per policy
  link.json                                              uvmrt-linkbench's measurements
and prints a markdown table (also written to OUTDIR/table.md): per policy the median
over steps 2..K (step 1 records the schedule) of the step time, the bytes moved in,
written back and discarded, the faults and the wait; then the pinned link's floor
and the ratios the project targets:

  floor            = max(none ms/step, prefetch in-bytes / pinned H2D,
                         prefetch out-bytes / pinned D2H)
  prefetch/floor   target <= 1.3
  demand/prefetch  target >= 5
  prefetch link throughput = prefetch bytes / h2d_busy_ns (steps 2..K), against
                   pinned H2D: target >= 85%

GB = 1e9 bytes, GiB = 2^30 bytes. Standard library only.
"""

import json
import os
import statistics
import sys

POLICIES = ("none", "demand", "prefetch")
GB = 1e9
GIB = float(1 << 30)

# targets (see DESIGN.md and the brief of bench/)
TARGET_PREFETCH_OVER_FLOOR = 1.3
TARGET_DEMAND_OVER_PREFETCH = 5.0
TARGET_LINK_FRACTION = 0.85


# ---------------------------------------------------------------------------
# reading


def load_json(path):
    """The parsed file, or None (with a note on stderr) when it is missing or bad."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        print(f"core_table.py: {path}: not found, left out", file=sys.stderr)
    except (OSError, ValueError) as e:
        print(f"core_table.py: {path}: cannot read: {e}", file=sys.stderr)
    return None


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

    h2d_bytes = sum(float(s.get("prefetch_bytes", 0)) for s in planned)
    h2d_ns = sum(float(s.get("h2d_busy_ns", 0)) for s in planned)
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
        "| faults/step | wait ms/step | peak resident GiB |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in POLICIES:
        r = rows.get(name)
        if r is None:
            continue
        lines.append(
            f"| {name} | {r['ms']:.1f} | {gb(r['in_bytes'])} | {gb(r['out_bytes'])} "
            f"| {gb(r['discard_bytes'])} | {r['faults']:.0f} | {r['wait_ms']:.1f} "
            f"| {float(r['peak_resident_bytes'] or 0) / GIB:.2f} |"
        )

    none, demand, prefetch = (rows.get(p) for p in POLICIES)
    floor = None
    parts = []
    if prefetch and h2d and d2h:
        in_ms = prefetch["in_bytes"] / h2d * 1e3
        out_ms = prefetch["out_bytes"] / d2h * 1e3
        floor = max(in_ms, out_ms, none["ms"] if none else 0.0)
        parts = [
            f"in {in_ms:.1f} ms at {h2d / GB:.1f} GB/s",
            f"out {out_ms:.1f} ms at {d2h / GB:.1f} GB/s",
        ]
        if none:
            parts.insert(0, f"none {none['ms']:.1f} ms")
        lines.append(
            f"| pinned-link ceiling | {floor:.1f} | {gb(prefetch['in_bytes'])} "
            f"| {gb(prefetch['out_bytes'])} | - | - | - | - |"
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
    if prefetch and prefetch["h2d_bps"] and h2d:
        frac = prefetch["h2d_bps"] / h2d
        lines.append(
            f"- prefetch throughput = {prefetch['h2d_bps'] / GB:.1f} GB/s while copying "
            f"(prefetch bytes / h2d_busy_ns) = **{100 * frac:.0f}%** of pinned H2D "
            f"{h2d / GB:.1f} GB/s (target >= {100 * TARGET_LINK_FRACTION:.0f}%: "
            f"{verdict(frac >= TARGET_LINK_FRACTION)})"
        )
    elif prefetch:
        lines.append("- prefetch throughput: needs h2d_busy_ns in the report and link.json")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# main


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    outdir = argv[1]
    rows = {}
    for policy in POLICIES:
        report = load_json(os.path.join(outdir, f"core.{policy}.json"))
        if report is not None:
            row = policy_row(report)
            if row["policy"] not in ("?", policy):
                print(
                    f"core_table.py: core.{policy}.json says policy {row['policy']} "
                    "(UVMRT_POLICY set?)",
                    file=sys.stderr,
                )
            rows[policy] = row
    if not rows:
        print(f"core_table.py: no core.<policy>.json in {outdir}", file=sys.stderr)
        return 1
    link = load_json(os.path.join(outdir, "link.json"))

    table = build_table(rows, link)
    sys.stdout.write(table)
    path = os.path.join(outdir, "table.md")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(table)
    os.replace(tmp, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
