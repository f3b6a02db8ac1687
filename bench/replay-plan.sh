#!/usr/bin/env bash
#
# replay-plan.sh -- the model's predictions of a finished bench/run-plan.sh run, made
# again with this build (no GPU): each row's a priori prediction (uvmrt-mlp on sim
# with the row's flags and the run's calibrated profile) and its re-play
# (uvmrt-plan --record of the row's UVMRT_RECORD), against what the row measured.
# For a model change made after a GPU run: predictions, not measurements.
#
#   [BUILD=DIR] bench/replay-plan.sh RUNDIR [OUTDIR]
#
# RUNDIR: run-plan.sh's output (mlp.ROW.json, rec.ROW.json, profile.json); OUTDIR
# (default RUNDIR/replay-now): sim.ROW.json and replay.ROW.json, then a table on stdout.
# A run packed for the tree (bench/pack-results.sh: the raw files in a raw.tar.xz of
# RUNDIR or of a parent, e.g. bench/results/2026-12-01-plan6/r18-handset) is unpacked
# into a temporary folder first, with its records (records*.tgz), and removed after.
set -uo pipefail
run=${1:?usage: bench/replay-plan.sh RUNDIR [OUTDIR]}
out=${2:-$run/replay-now}
if ! compgen -G "$run/mlp.*.json" >/dev/null; then
    unpacked=$(mktemp -d "${TMPDIR:-/tmp}/replay-plan.XXXXXX") || exit 2
    trap 'rm -rf "$unpacked"' EXIT
    run=$(bash "$(dirname "$0")/unpack-results.sh" "$run" "$unpacked") || exit 2
    for a in "$run"/records*.tgz; do
        [ -f "$a" ] && ! compgen -G "$run/rec.*.json" >/dev/null && tar -xzf "$a" -C "$run"
    done
    compgen -G "$run/mlp.*.json" >/dev/null ||
        { echo "replay-plan.sh: $1: no mlp.*.json, packed or not (not a run-plan.sh output?)" >&2; exit 2; }
fi
build=${BUILD:-.}
mlp=$build/examples/mlp/uvmrt-mlp
plan=$build/tools/uvmrt-plan
for p in "$mlp" "$plan"; do
    [ -x "$p" ] || { echo "replay-plan.sh: $p not found: run from the build folder, or set BUILD" >&2; exit 2; }
done
[ -s "$run/profile.json" ] || { echo "replay-plan.sh: $run/profile.json: no profile (not a run-plan.sh output?)" >&2; exit 2; }
mkdir -p "$out"
shape=(--layers 24 --hidden 8192 --rows 8192)
grep -q '"smoke": true' "$run/shape.json" 2>/dev/null && shape=(--layers 4 --hidden 2048 --rows 2048)
for j in "$run"/mlp.*.json; do
    row=$(basename "$j" .json)
    row=${row#mlp.}
    case $row in *-r[0-9]*) continue ;; esac # the repeats: the same flags
    case $row in
        resident) flags=(--policy none --cpu-layers 0 --recompute none --steps 6) ;;
        resident-planned) flags=(--budget "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["budget_bytes"])' "$j")B"
                                 --cpu-layers 0 --recompute none --steps 6) ;;
        *-auto) flags=(--budget "${row%%-*}" --cpu-layers auto --recompute auto --steps 12) ;;
        *) IFS=- read -r b k r <<<"$row"; flags=(--budget "$b" --cpu-layers "${k#k}" --recompute "$r" --steps 6) ;;
    esac
    "$mlp" --backend sim "${shape[@]}" --profile "$run/profile.json" "${flags[@]}" -q \
        --result-json "$out/sim.$row.json" >"$out/sim.$row.log" 2>&1 || echo "replay-plan.sh: $row on sim failed" >&2
    if [ -s "$run/rec.$row.json" ] && [ "$row" != resident ]; then
        budget=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["budget_bytes"])' "$j")
        "$plan" --record "$run/rec.$row.json" --profile "$run/profile.json" --budget "${budget}B" --json \
            >"$out/replay.$row.json" 2>"$out/replay.$row.log" || echo "replay-plan.sh: replay of $row failed" >&2
    fi
done
python3 - "$run" "$out" <<'PY'
import glob, json, os, re, sys
run, out = sys.argv[1:3]
def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError):
        return None
print("| row | measured ms/step | a priori (this build) | error | from the record (this build) | error |")
print("|---|---:|---:|---:|---:|---:|")
for j in sorted(glob.glob(os.path.join(run, "mlp.*.json"))):
    row = os.path.basename(j)[4:-5]
    if re.search(r"-r[0-9]+$", row):
        continue
    r = load(j)
    m = r.get("final_ms_per_step_median") or r["ms_per_step_median"]
    s = load(os.path.join(out, f"sim.{row}.json")) or {}
    a = s.get("final_ms_per_step_median") or s.get("ms_per_step_median")
    p = (load(os.path.join(out, f"replay.{row}.json")) or {}).get("predicted_step_ns")
    p = p / 1e6 if p else None
    e = lambda x: f"{100 * (x / m - 1):+.1f}%" if x else "-"
    f = lambda x: f"{x:.1f}" if x else "-"
    print(f"| {row} | {m:.1f} | {f(a)} | {e(a)} | {f(p)} | {e(p)} |")
PY
