#!/usr/bin/env bash
#
# run-monitor.sh -- what publishing the live snapshot for uvmrt-top costs (issue 10:
# at most 0.1% of step time): uvmrt-mlp's W1 at an 8 GiB budget (prefetch, optimizer
# on the GPU), side by side with UVMRT_MONITOR=1 and UVMRT_MONITOR=0, runs
# alternating so drift hits both alike.
#
#   [BUILD=DIR] bench/run-monitor.sh [--smoke] [OUTDIR [REPEATS]]
#
# OUTDIR (default ./out-monitor) gets mon.{1,0}.R.json (uvmrt-mlp --result-json)
# and .log per run, and prints per setting the median over runs of each run's
# median step time (step 1, the recording step, excluded by uvmrt-mlp), and the
# difference. REPEATS defaults to 5 (10 runs of 12 steps). --smoke: a small net
# (L=4, H=2048, N=2048, budget 128M) for a first check. W1 needs ~34 GiB of free
# GPU memory (uvmrt-mlp checks); the budget, not real memory, emulates the smaller GPU.

set -uo pipefail
smoke=0
if [ "${1:-}" = "--smoke" ]; then smoke=1; shift; fi
outdir=${1:-./out-monitor}
repeats=${2:-5}
build=${BUILD:-.}
mlp=$build/examples/mlp/uvmrt-mlp
[ -x "$mlp" ] || { echo "run-monitor.sh: $mlp not found (set BUILD)" >&2; exit 1; }
if [ "$smoke" = 1 ]; then
    args=(--layers 4 --hidden 2048 --rows 2048 --budget 128M --steps 6)
else
    args=(--budget 8G --steps 12)
fi
mkdir -p "$outdir"
for r in $(seq 1 "$repeats"); do
    for mon in 1 0; do
        base=$outdir/mon.$mon.$r
        if ! UVMRT_MONITOR=$mon "$mlp" "${args[@]}" --policy prefetch --optimizer-on gpu --recompute none -q \
            --result-json "$base.json" >"$base.log" 2>&1; then
            echo "run-monitor.sh: run $r with UVMRT_MONITOR=$mon failed: see $base.log" >&2
            exit 1
        fi
    done
done
python3 - "$outdir" "$repeats" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
med = {}
for mon in (1, 0):
    runs = [json.load(open(f"{out}/mon.{mon}.{r}.json"))["ms_per_step_median"] for r in range(1, n + 1)]
    med[mon] = statistics.median(runs)
    print(f"UVMRT_MONITOR={mon}: median step {med[mon]:.3f} ms over {n} runs ({', '.join(f'{x:.3f}' for x in runs)})")
d = (med[1] - med[0]) / med[0] * 100
print(f"publishing costs {d:+.3f}% of step time (target: at most 0.1%; run-to-run spread above says what is noise)")
PY
