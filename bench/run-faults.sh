#!/usr/bin/env bash
#
# run-faults.sh -- what the fault statistics (CUPTI unified-memory counters)
# cost: uvmrt-demo at 3x oversubscription under the policies prefetch and
# demand, with the statistics off, sampled (UVMRT_FAULT_SAMPLE=auto, the
# default) and collected on every step (UVMRT_FAULT_SAMPLE=1), the runs of each
# round side by side, then mean step times and overheads into a table.
#
#   [BUILD=DIR] [REPS=N] [POLICIES="prefetch demand"] [LAYERS=N] [LAYER_MIB=N] [BUDGET=SIZE] [STEPS=N]
#       bench/run-faults.sh [OUTDIR [EXTRA DEMO OPTIONS...]]   (OUTDIR default ./out-faults)
#
# Defaults: 24 layers of 512 MiB (12 GiB of tensors), budget 4G, 24 steps for
# off and auto (auto needs a run to space its samples: its first collected
# steps are 1 and 3), 8 steps for every-step collection, REPS=1 round.
# Overheads compare mean step times over steps 3..N (steps 1 and 2 record the
# schedule and warm up) against the off run of the same round.
# Writes OUTDIR/faults.<policy>.<mode>.<rep>.json (uvmrt's reports),
# OUTDIR/faults.<policy>.csv and .trace.json (every-step collection, round 1),
# OUTDIR/demo.log and OUTDIR/table.md. About 5 minutes a round on an H200; needs
# the tensors plus 4 GiB of device memory free.

set -euo pipefail

outdir=${1:-./out-faults}
[ $# -gt 0 ] && shift
build=${BUILD:-.}
reps=${REPS:-1}
layers=${LAYERS:-24}
layer_mib=${LAYER_MIB:-512}
budget=${BUDGET:-4G}
steps=${STEPS:-24}
policies=${POLICIES:-prefetch demand}
demo=$build/examples/demo/uvmrt-demo
if [ ! -x "$demo" ]; then
    echo "run-faults.sh: $demo not found: run from the build folder, or set BUILD" >&2
    exit 1
fi
mkdir -p "$outdir"
: >"$outdir/demo.log"

run() { # policy mode rep steps [demo options]
    local policy=$1 mode=$2 rep=$3 n=$4 extra=()
    shift 4
    local env=(UVMRT_FAULT_STATS=1 UVMRT_FAULT_SAMPLE=auto)
    case $mode in
        off) env=(UVMRT_FAULT_STATS=0) ;;
        all) env=(UVMRT_FAULT_STATS=1 UVMRT_FAULT_SAMPLE=1)
             [ "$rep" = 1 ] && extra=(--report "csv:$outdir/faults.$policy.csv"
                                      --trace "$outdir/faults.$policy.trace.json") ;;
    esac
    echo "== $(date +%T) $policy, fault statistics $mode, $n steps (round $rep)" | tee -a "$outdir/demo.log"
    env "${env[@]}" "$demo" --backend cuda --policy "$policy" --budget "$budget" --layers "$layers" \
        --layer-mib "$layer_mib" --steps "$n" --no-verify -q \
        --report-json "$outdir/faults.$policy.$mode.$rep.json" "${extra[@]}" "$@" >>"$outdir/demo.log" 2>&1
}

for rep in $(seq 1 "$reps"); do
    for policy in $policies; do
        run "$policy" off "$rep" "$steps" "$@"
        run "$policy" auto "$rep" "$steps" "$@"
        run "$policy" all "$rep" 8 "$@"
    done
done

python3 - "$outdir" "$layers" "$layer_mib" "$budget" <<'PY'
import glob, json, os, re, sys
out, layers, layer_mib, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def mean_ms(j):
    s = j["step_ns"][2:]          # steps 1 and 2: recording and warm-up
    return sum(s) / len(s) / 1e6 if s else float("nan")

rows = []
for policy in ("prefetch", "demand"):
    for f in sorted(glob.glob(os.path.join(out, f"faults.{policy}.off.*.json"))):
        rep = re.search(r"\.off\.(\d+)\.json$", f).group(1)
        r = {m: json.load(open(os.path.join(out, f"faults.{policy}.{m}.{rep}.json")))
             for m in ("off", "auto", "all")}
        off = mean_ms(r["off"])
        a, e = mean_ms(r["auto"]), mean_ms(r["all"])
        fs = r["auto"].get("fault_sampling", {})
        faults = [s["gpu_faults"] for s in r["all"]["steps"][2:]]
        rows.append((policy, rep, off, a, 100 * (a / off - 1), e, 100 * (e / off - 1),
                     fs.get("sampled_steps"), len(r["auto"]["step_ns"]), fs.get("period"),
                     sum(faults) / len(faults) if faults else 0, r["auto"].get("fault_stats_source")))

with open(os.path.join(out, "table.md"), "w") as t:
    t.write("| policy | round | off ms/step | auto ms/step | auto overhead | every step ms/step "
            "| every-step overhead | auto: steps collected | auto period | GPU fault groups/step | source |\n")
    t.write("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    for p, rep, off, a, ao, e, eo, ns, n, per, fg, src in rows:
        t.write(f"| {p} | {rep} | {off:.1f} | {a:.1f} | {ao:+.2f}% | {e:.1f} | {eo:+.2f}% "
                f"| {ns} of {n} | {per} | {fg:.0f} | {src} |\n")
    t.write(f"\n{layers} x {layer_mib} MiB layers, budget {budget} (3x oversubscription); means of "
            "steps 3..N against the off run of the same round; target: overhead <= 3%.\n")
print(open(os.path.join(out, "table.md")).read())
PY
