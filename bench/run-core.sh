#!/usr/bin/env bash
#
# run-core.sh -- the core benchmark: the link's ceiling, then uvmrt-demo under the
# policies none, demand and prefetch with an 8 GiB budget, then the results table.
#
# Runs on the GPU machine after the build:
#   [BUILD=DIR] bench/run-core.sh [OUTDIR [EXTRA DEMO OPTIONS...]]  (OUTDIR default ./out)
# BUILD is the build folder holding examples/ and bench/ (default: the current one).
# Writes OUTDIR/link.json (uvmrt-linkbench), OUTDIR/core.{none,demand,prefetch}.json
# (uvmrt's reports), OUTDIR/core.prefetch-noremote.json (prefetch with host homing
# off, UVMRT_REMOTE=0), OUTDIR/demo.log, OUTDIR/table.md, and prints the table.
# Extra options go after the defaults, so they win (e.g. --layers 8 for a quick run).
# UVMRT_* environment variables steer the demo too (they override its flags).
#
# The demo allocates 24 x 1 GiB + 256 MiB = 24.25 GiB of managed memory and refuses to
# run unless the GPU has that much free plus 4 GiB: the budget, not real memory,
# emulates the 8 GiB GPU.

set -euo pipefail

outdir=${1:-./out}
[ $# -gt 0 ] && shift

here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-.}
linkbench=$build/bench/uvmrt-linkbench
demo=$build/examples/demo/uvmrt-demo
for exe in "$linkbench" "$demo"; do
    if [ ! -x "$exe" ]; then
        echo "run-core.sh: $exe not found: run from the build folder, or set BUILD" >&2
        exit 1
    fi
done
mkdir -p "$outdir"

echo "== link: $linkbench --json $outdir/link.json"
"$linkbench" --json "$outdir/link.json"

echo "== demo: policies none, demand, prefetch; budget 8G"
# a checksum mismatch (exit 1) still gets its table; the script then fails with it
demo_status=0
# --detail: the log keeps each run's configuration and per-layer tables (after the table)
"$demo" --backend cuda --policy all --budget 8G --layers 24 --layer-mib 1024 --steps 6 --detail \
    --report-json "$outdir/core.json" "$@" 2>&1 | tee "$outdir/demo.log" ||
    demo_status=${PIPESTATUS[0]}

echo "== demo: policy prefetch with host homing off (UVMRT_REMOTE=0); budget 8G"
UVMRT_REMOTE=0 "$demo" --backend cuda --policy prefetch --budget 8G --layers 24 --layer-mib 1024 \
    --steps 6 --report-json "$outdir/core.prefetch-noremote.json" "$@" 2>&1 |
    tee "$outdir/demo-noremote.log" || demo_status=${PIPESTATUS[0]}

echo "== table: $outdir/table.md"
python3 "$here/core_table.py" "$outdir"

if [ "$demo_status" -ne 0 ]; then
    echo "run-core.sh: uvmrt-demo failed (exit $demo_status): see $outdir/demo.log" >&2
    exit "$demo_status"
fi
