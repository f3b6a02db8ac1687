#!/usr/bin/env bash
#
# run-faults.sh -- overhead of fault statistics (CUPTI unified-memory counters):
# uvmrt-demo at 3x oversubscription (24 x 1 GiB layers, 8 GiB budget) under the
# policies prefetch and demand, with UVMRT_FAULT_STATS=1 and =0 alternated in one
# run, then the median step times and the overhead into a table.
#
#   [BUILD=DIR] bench/run-faults.sh [OUTDIR [EXTRA DEMO OPTIONS...]]  (OUTDIR default ./out-faults)
#
# Writes OUTDIR/faults.<policy>.<on|off>.<rep>.json (uvmrt's reports),
# OUTDIR/faults.<policy>.on.1.{csv,trace.json}, OUTDIR/demo.log and OUTDIR/table.md
# (target: overhead <= 3%). Takes about 3 minutes on an H200; needs 24.25 GiB of
# managed memory free plus 4 GiB, like run-core.sh.

set -euo pipefail

outdir=${1:-./out-faults}
[ $# -gt 0 ] && shift
build=${BUILD:-.}
demo=$build/examples/demo/uvmrt-demo
if [ ! -x "$demo" ]; then
    echo "run-faults.sh: $demo not found: run from the build folder, or set BUILD" >&2
    exit 1
fi
mkdir -p "$outdir"
: >"$outdir/demo.log"

run() { # policy on|off rep steps
    local policy=$1 mode=$2 rep=$3 steps=$4 extra=()
    shift 4
    local fs=1
    [ "$mode" = off ] && fs=0
    if [ "$mode" = on ] && [ "$rep" = 1 ]; then
        extra=(--report "csv:$outdir/faults.$policy.csv" --trace "$outdir/faults.$policy.trace.json")
    fi
    echo "== $policy, fault statistics $mode (rep $rep)" | tee -a "$outdir/demo.log"
    UVMRT_FAULT_STATS=$fs "$demo" --backend cuda --policy "$policy" --budget 8G --layers 24 \
        --layer-mib 1024 --steps "$steps" --no-verify -q \
        --report-json "$outdir/faults.$policy.$mode.$rep.json" "${extra[@]}" "$@" >>"$outdir/demo.log" 2>&1
}

# prefetch steps are short: two alternating pairs; demand is slow: one pair
for rep in 1 2; do
    run prefetch on $rep 5 "$@"
    run prefetch off $rep 5 "$@"
done
run demand on 1 4 "$@"
run demand off 1 4 "$@"

python3 - "$outdir" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
rows = []
for policy in ("prefetch", "demand"):
    med = {}
    src = "?"
    for mode in ("on", "off"):
        steps = []
        for f in sorted(glob.glob(os.path.join(out, f"faults.{policy}.{mode}.*.json"))):
            j = json.load(open(f))
            steps += j["step_ns"][1:]          # step 1 records the schedule
            if mode == "on":
                src = j.get("fault_stats_source", "?")
        med[mode] = statistics.median(steps) / 1e6 if steps else float("nan")
    over = 100.0 * (med["on"] / med["off"] - 1.0)
    rows.append((policy, med["on"], med["off"], over, src))
with open(os.path.join(out, "table.md"), "w") as t:
    t.write("| policy | ms/step, stats on | ms/step, stats off | overhead | source |\n")
    t.write("|---|---:|---:|---:|---|\n")
    for p, on, off, o, s in rows:
        t.write(f"| {p} | {on:.1f} | {off:.1f} | {o:+.2f}% | {s} |\n")
    t.write("\n24 x 1 GiB layers, budget 8 GiB (3x oversubscription); medians of steps 2..N; "
            "target: overhead <= 3%.\n")
print(open(os.path.join(out, "table.md")).read())
PY
