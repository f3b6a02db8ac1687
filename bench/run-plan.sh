#!/usr/bin/env bash
#
# run-plan.sh -- the planner benchmark (issue 9) on uvmrt-mlp's W1 (24 x Linear(8192,
# 8192) + GELU, 8192 rows, bf16), all in one run on the GPU machine:
#   1. uvmrt-calibrate: this machine's profile (OUTDIR/profile.json);
#   2. the hand-set combinations at 8 GiB: --cpu-layers K for K in KS (default 0 3 6 ...
#      24, steps of L/8) and --recompute none and all;
#   3. the automatic choice (--cpu-layers auto --recompute auto with the profile) at the
#      budgets in BUDGETS (default 8G 12G 16G 24G), and everything resident: with no
#      policy (resident) and planned under a budget that holds it all (resident-planned,
#      which has a record to predict it from);
#   4. for each measured row, the model's predictions, made here on the CPU with the
#      same profile: a priori (the same flags on --backend sim: declared flops at the
#      profile's GEMM rate), and from the run's own record (uvmrt-plan --record of
#      UVMRT_RECORD, whose calls carry the GPU's measured times of a planned step);
#   5. the table (bench/plan_table.py): measured against predicted, the choice against
#      the best hand-set row, step time over the budgets, and W1 at 8 GiB against its
#      floor (the largest of the resident step, bytes each way over the pinned link,
#      and host-memory bytes -- the CPU's AdamW and the link's DMA -- over host memory
#      bandwidth, all measured in this run).
#
#   [BUILD=DIR] [KS="0 6 12"] [BUDGETS="8G 16G"] [STEPS=6] [AUTO_STEPS=12] [REPEATS=2]
#       bench/run-plan.sh [--smoke] [OUTDIR]
#
# REPEATS: the automatic choice at the small budget and the best hand-set row run that
# many more times, in turns (rows SMALL-auto-rN and BEST-rN), for the 3% comparison.
# The automatic rows run AUTO_STEPS steps: the review after 3 planned steps, a changed
# choice's re-record and 3 planned steps, the second review, and steps left to measure
# the final values by themselves (final_ms_per_step_median, what the table reports).
#
# For a check of the script without a GPU: RUN_BACKEND=sim PROFILE=FILE (no calibration,
# no linkbench; every "measured" number is then the model's and the table says nothing).
#
# --smoke: L=4, H=2048, N=2048 and budgets of 256M/384M: a first check in a minute.
# Memory: W1 allocates 33.6 GiB of managed memory; uvmrt-mlp refuses to start unless
# the GPU has that free plus 4 GiB (never more managed memory than the GPU has free).
set -uo pipefail

smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
out=${1:-./out-plan}
build=${BUILD:-.}
mlp=$build/examples/mlp/uvmrt-mlp
plan=$build/tools/uvmrt-plan
cal=$build/tools/uvmrt-calibrate
here=$(cd "$(dirname "$0")" && pwd)
if [ "$smoke" = 1 ]; then
    shape=(--layers 4 --hidden 2048 --rows 2048)
    L=4 ks_default="0 2 4" budgets_default="256M 384M" small=256M resident_budget=1G
else
    shape=(--layers 24 --hidden 8192 --rows 8192)
    L=24 ks_default="0 3 6 9 12 15 18 21 24" budgets_default="8G 12G 16G 24G" small=8G resident_budget=40G
fi
KS=${KS:-$ks_default}
BUDGETS=${BUDGETS:-$budgets_default}
STEPS=${STEPS:-6}
AUTO_STEPS=${AUTO_STEPS:-12}
REPEATS=${REPEATS:-2}
for p in "$mlp" "$plan" "$cal"; do
    [ -x "$p" ] || { echo "run-plan.sh: $p not found: run from the build folder, or set BUILD" >&2; exit 2; }
done
mkdir -p "$out"
status=0
printf '{"layers": %d, "small_budget": "%s", "smoke": %s}\n' "$L" "$small" \
    "$([ "$smoke" = 1 ] && echo true || echo false)" >"$out/shape.json"

backend=${RUN_BACKEND:-cuda}
if [ -n "${PROFILE:-}" ]; then
    cp "$PROFILE" "$out/profile.json"
else
    echo "== calibrate"
    "$cal" -o "$out/profile.json" --name calibrated >"$out/calibrate.log" 2>&1 || {
        echo "run-plan.sh: uvmrt-calibrate failed: see $out/calibrate.log" >&2
        exit 1
    }
    tail -9 "$out/calibrate.log"
fi
if [ "$backend" = cuda ]; then
    echo "== link"
    "$build/bench/uvmrt-linkbench" --json "$out/link.json" >/dev/null 2>&1 || echo "run-plan.sh: linkbench failed" >&2
fi

# row NAME BUDGET|none FLAG...: the measured run, then its two predictions
row() {
    local name=$1 budget=$2
    shift 2
    local steps=$STEPS
    case $name in *-auto) steps=$AUTO_STEPS ;; esac
    local args=("${shape[@]}" --steps "$steps" --profile "$out/profile.json" "$@")
    local bargs=()
    if [ "$budget" = none ]; then bargs=(--policy none); else bargs=(--budget "$budget"); fi
    rm -f "$out/mlp.$name.json" "$out/rec.$name.json"
    echo "== $name: uvmrt-mlp ${bargs[*]} $*"
    UVMRT_RECORD=$out/rec.$name.json "$mlp" --backend "$backend" "${args[@]}" "${bargs[@]}" -q \
        --result-json "$out/mlp.$name.json" --report "json:$out/report.$name.json" >"$out/mlp.$name.log" 2>&1 ||
        { echo "run-plan.sh: $name failed: see $out/mlp.$name.log" >&2; status=1; return; }
    grep -E '^auto|^summary' "$out/mlp.$name.log" | cut -c1-200
    # a priori: the same flags on the model (sim, the calibrated profile)
    "$mlp" --backend sim "${args[@]}" "${bargs[@]}" -q --result-json "$out/sim.$name.json" \
        >"$out/sim.$name.log" 2>&1 || echo "run-plan.sh: $name on sim failed" >&2
    # from the run's record (planned-step call times measured on the GPU)
    if [ "$budget" != none ] && [ -s "$out/rec.$name.json" ]; then
        "$plan" --record "$out/rec.$name.json" --profile "$out/profile.json" --budget "$budget" --json \
            >"$out/replay.$name.json" 2>"$out/replay.$name.log" || echo "run-plan.sh: replay of $name failed" >&2
    fi
}

row resident none --cpu-layers 0 --recompute none
# the same, planned: a budget that holds every tensor (the plan keeps them all
# resident), so that the run has a record to predict it from
row resident-planned "$resident_budget" --cpu-layers 0 --recompute none
for k in $KS; do
    for r in none all; do
        row "$small-k$k-$r" "$small" --cpu-layers "$k" --recompute "$r"
    done
done
for b in $BUDGETS; do
    row "$b-auto" "$b" --cpu-layers auto --recompute auto
done
# The automatic choice against the best hand-set row, each run REPEATS more times,
# taking turns: one run of a configuration differs from the next by up to ~10% on a
# shared machine, more than the 3% being judged.
if [ "$REPEATS" -gt 0 ] && [ -s "$out/mlp.$small-auto.json" ]; then
    best=$(python3 "$here/plan_table.py" --best-hand "$out") || best=
    if [ -n "$best" ]; then
        read -r bk br <<<"$(python3 -c 'import sys; p = sys.argv[1].split("-"); print(p[1][1:], p[2])' "$best")"
        for i in $(seq 1 "$REPEATS"); do
            row "$small-auto-r$i" "$small" --cpu-layers auto --recompute auto
            row "$best-r$i" "$small" --cpu-layers "$bk" --recompute "$br"
        done
    fi
fi

echo "== table: $out/table.md"
python3 "$here/plan_table.py" "$out" || status=1
exit $status
