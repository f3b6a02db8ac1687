#!/usr/bin/env bash
#
# run-mlp.sh -- the trainer benchmark (issue 4): workload W1 (24 x Linear(8192, 8192)
# + GELU, 8192 rows, bf16, fp32 AdamW: 1.61 B parameters) under uvmrt and PyTorch,
# side by side, then the results table.
#
#   [BUILD=DIR] [PYTHON=python3] bench/run-mlp.sh [--smoke] [OUTDIR [ROW...]]
#
# OUTDIR defaults to ./out-mlp. ROWs (default: all, in this order):
#   link                 uvmrt-linkbench: pinned memcpy each way (the link's ceiling)
#   resident             uvmrt-mlp, policy none, no budget (everything resident)
#   prefetch-big-gpu     prefetch, budget 16G, optimizer on the GPU
#   prefetch-big-cpu     prefetch, budget 16G, optimizer on the CPU
#   prefetch-small-gpu   prefetch, budget 8G,  optimizer on the GPU
#   prefetch-small-cpu   prefetch, budget 8G,  optimizer on the CPU
#   prefetch-small-mixed prefetch, budget 8G,  AdamW of the top half of the blocks on the
#                        CPU, the rest on the GPU (--cpu-layers L/2: CPU memory bandwidth
#                        and the link share the optimizer's work)
#   demand-small-gpu     demand (driver emulation), budget 8G, 3 steps
#   torch-resident       PyTorch, everything on the GPU
#   torch-offload        PyTorch FSDP2 CPUOffloadPolicy + save_on_cpu, 4 steps
# then always: the table (bench/mlp_table.py) from whatever OUTDIR holds, so rows
# can be run in separate calls (run-mlp.sh out link resident; run-mlp.sh out
# torch-offload; ...) and the last call prints the whole table.
#
# --smoke: L=4, H=2048, N=2048, 4 steps, budgets 256M and 128M: a first GPU check
# of every row in about a minute.
#
# BUILD is the build folder holding examples/ and bench/ (default: the current one).
# Per row it writes OUTDIR/mlp.ROW.json (uvmrt-mlp --result-json: medians and
# losses), OUTDIR/mlp.ROW.report.json (uvmrt's report, uvmrt-report(5)),
# OUTDIR/mlp.ROW.log, OUTDIR/torch.ROW.json and .log, OUTDIR/link.json, and
# OUTDIR/table.md. W1 allocates ~34 GiB of managed memory (36 with the CPU
# optimizer); uvmrt-mlp refuses to run unless the GPU has that free plus 4 GiB:
# the budget, not real memory, emulates the smaller GPU.

set -uo pipefail

smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
outdir=${1:-./out-mlp}
[ $# -gt 0 ] && shift
rows=("$@")
if [ ${#rows[@]} -eq 0 ]; then
    rows=(link resident prefetch-big-gpu prefetch-big-cpu prefetch-small-gpu prefetch-small-cpu
          prefetch-small-mixed demand-small-gpu torch-resident torch-offload)
fi

here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-.}
python=${PYTHON:-python3}
linkbench=$build/bench/uvmrt-linkbench
mlp=$build/examples/mlp/uvmrt-mlp

if [ "$smoke" = 1 ]; then
    shape=(--layers 4 --hidden 2048 --rows 2048)
    half_layers=2
    steps=4 demand_steps=3 torch_steps=6 torch_offload_steps=4 big=256M small=128M
else
    shape=(--layers 24 --hidden 8192 --rows 8192)
    half_layers=12
    steps=6 demand_steps=3 torch_steps=8 torch_offload_steps=4 big=16G small=8G
fi
all_rows=" link resident prefetch-big-gpu prefetch-big-cpu prefetch-small-gpu prefetch-small-cpu prefetch-small-mixed demand-small-gpu torch-resident torch-offload "
for row in "${rows[@]}"; do
    case $all_rows in
    *" $row "*) ;;
    *)
        echo "run-mlp.sh: unknown row '$row': expected one of$all_rows" >&2
        exit 2
        ;;
    esac
done
mkdir -p "$outdir"
echo "run-mlp.sh: $([ "$smoke" = 1 ] && echo smoke || echo W1): ${shape[*]}; rows: ${rows[*]}"

status=0
fail() {
    echo "run-mlp.sh: row $1 failed (exit $2): see $3" >&2
    status=1
}

mlp_row() { # ROW POLICY BUDGET OPTIMIZER STEPS [EXTRA ARGS...]
    local row=$1 policy=$2 budget=$3 placement=$4 n=$5
    shift 5
    if [ ! -x "$mlp" ]; then
        echo "run-mlp.sh: $mlp not found: run from the build folder, or set BUILD" >&2
        exit 1
    fi
    local args=(--backend cuda "${shape[@]}" --steps "$n" --policy "$policy"
                --optimizer-on "$placement" --recompute none --quiet
                --result-json "$outdir/mlp.$row.json" --report "json:$outdir/mlp.$row.report.json"
                --loss-log "$outdir/mlp.$row.losses")
    [ "$budget" != none ] && args+=(--budget "$budget")
    args+=("$@")
    rm -f "$outdir/mlp.$row.json" # a failed row must not leave an old result behind
    echo "== $row: $mlp ${args[*]}"
    "$mlp" "${args[@]}" 2>&1 | tee "$outdir/mlp.$row.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || fail "$row" "$rc" "$outdir/mlp.$row.log"
}

torch_row() { # ROW MODE STEPS
    local row=$1 mode=$2 n=$3
    local args=("${shape[@]}" --steps "$n" --mode "$mode" --json "$outdir/torch.$row.json")
    rm -f "$outdir/torch.$row.json"
    echo "== $row: $python $here/mlp_torch.py ${args[*]}"
    "$python" "$here/mlp_torch.py" "${args[@]}" 2>&1 | tee "$outdir/torch.$row.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || fail "$row" "$rc" "$outdir/torch.$row.log"
}

for row in "${rows[@]}"; do
    case $row in
    link)
        if [ ! -x "$linkbench" ]; then
            echo "run-mlp.sh: $linkbench not found (built with CUDA only)" >&2
            status=1
            continue
        fi
        echo "== link: $linkbench --json $outdir/link.json"
        "$linkbench" --json "$outdir/link.json" || fail link $? "the output above"
        ;;
    resident) mlp_row resident none none gpu "$steps" ;;
    prefetch-big-gpu) mlp_row "$row" prefetch "$big" gpu "$steps" ;;
    prefetch-big-cpu) mlp_row "$row" prefetch "$big" cpu "$steps" ;;
    prefetch-small-gpu) mlp_row "$row" prefetch "$small" gpu "$steps" ;;
    prefetch-small-cpu) mlp_row "$row" prefetch "$small" cpu "$steps" ;;
    prefetch-small-mixed)
        mlp_row "$row" prefetch "$small" cpu "$steps" --cpu-layers "$half_layers" ;;
    demand-small-gpu) mlp_row "$row" demand "$small" gpu "$demand_steps" ;;
    torch-resident) torch_row "$row" resident "$torch_steps" ;;
    torch-offload) torch_row "$row" offload "$torch_offload_steps" ;;
    esac
done

echo "== table: $outdir/table.md"
"$python" "$here/mlp_table.py" "$outdir" || status=1
exit $status
