#!/usr/bin/env bash
#
# run-regress.sh -- has a change made uvmrt slower? Runs the core benchmark's demo rows
# and the trainer's 8 GiB row with two builds side by side in one run, interleaved
# (old, new, old, new), on the GPU machine, then prints the ratio new/old per row.
#
#   OLD=DIR NEW=DIR bench/run-regress.sh [OUTDIR]      (OUTDIR default ./out-regress)
#
# OLD and NEW are build folders (holding examples/ and bench/), e.g. a
# `--disable-shared` build of the previous commit and one of the change. REPS (default
# 2) rounds (DEMAND_REPS, default 1, of them with the demand row); each round runs,
# for OLD then NEW:
#   demo-prefetch   uvmrt-demo --policy prefetch --budget 8G --layers 24 --layer-mib 1024
#   demo-demand     the same under --policy demand (3 steps: it is slow and noisy)
#   mlp-8g          uvmrt-mlp on W1 (24 x 8192, 8192 rows) --budget 8G --optimizer-on gpu
# Each row's figure is the median step time over steps 2..N (from --report-json /
# --result-json); the table shows the median over rounds of each build and new/old.
# Needs 28.25 GiB (demo) and ~34 GiB (trainer) of free GPU memory, never both at once.

set -euo pipefail

outdir=${1:-./out-regress}
old=${OLD:?set OLD to the previous build folder}
new=${NEW:?set NEW to the new build folder}
reps=${REPS:-2}
demand_reps=${DEMAND_REPS:-1} # demand is slow (~7 s a step) and noisy (+-40%): fewer rounds
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$outdir"

for b in "$old" "$new"; do
    for exe in examples/demo/uvmrt-demo examples/mlp/uvmrt-mlp; do
        [ -x "$b/$exe" ] || { echo "run-regress.sh: $b/$exe not found" >&2; exit 1; }
    done
done

run_row() { # build label row round
    local b=$1 label=$2 row=$3 r=$4 base="$outdir/$3.$2.$4"
    case $row in
    demo-prefetch | demo-demand)
        local policy=${row#demo-} steps=6
        [ "$policy" = demand ] && steps=3
        "$b/examples/demo/uvmrt-demo" --backend cuda --policy "$policy" --budget 8G --layers 24 \
            --layer-mib 1024 --steps "$steps" --report-json "$base.json" >"$base.log" 2>&1
        ;;
    mlp-8g)
        "$b/examples/mlp/uvmrt-mlp" --backend cuda --layers 24 --hidden 8192 --rows 8192 --steps 6 \
            --policy prefetch --budget 8G --optimizer-on gpu --recompute none --quiet --result-json "$base.json" \
            >"$base.log" 2>&1
        ;;
    esac
}

for r in $(seq 1 "$reps"); do
    for row in demo-prefetch demo-demand mlp-8g; do
        [ "$row" = demo-demand ] && [ "$r" -gt "$demand_reps" ] && continue
        for label in old new; do
            b=$old
            [ "$label" = new ] && b=$new
            echo "== round $r: $row ($label: $b)"
            if ! run_row "$b" "$label" "$row" "$r"; then
                echo "run-regress.sh: $row with $label failed: see $outdir/$row.$label.$r.log" >&2
                tail -5 "$outdir/$row.$label.$r.log" >&2
            fi
        done
    done
done

python3 "$here/regress_table.py" "$outdir" | tee "$outdir/table.md"
