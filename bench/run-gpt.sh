#!/usr/bin/env bash
#
# run-gpt.sh -- the GPT benchmark (issue 11): uvmrt-gpt, PyTorch and DeepSpeed on GPT-2
# 124M (--depth 12) and 1.56B (--depth 48), B=8, T=1024, random tokens (vocab 50257),
# side by side in one run, with the link's ceiling and the host memory bandwidth
# measured in the same run; then the results table (bench/gpt_table.py).
#
#   [BUILD=DIR] [PYTHON=python3] bench/run-gpt.sh [--smoke] [OUTDIR [ROW...]]
#
# OUTDIR defaults to ./out-gpt. ROWs (default: all of the list below, in its order):
#   calibrate                  uvmrt-calibrate: this machine's profile (OUTDIR/profile.json),
#                              the model every uvmrt row's automatic choice is made with
#   link                       uvmrt-linkbench: pinned memcpy each way (the link's ceiling)
#   hostbw                     host memory bandwidth: STREAM triad on all CPU threads
#                              (bench/gpt_torch.py --mode hostbw)
#   dD-resident                uvmrt-gpt --depth D, policy none, no budget (all resident):
#                              the compute-only floor of the prefetch rows
#   dD-resident-recompute      the same with --recompute all (the floor of the
#                              recompute rows)
#   dD-prefetch-SIZE-OPT-REC   prefetch, --budget SIZE (8g, 16g, 512m...), --optimizer-on
#                              OPT (gpu|cpu), --recompute REC (none|all)
#   dD-prefetch-SIZE-kK-REC    the top K layers' AdamW on the CPU (--cpu-layers K), the
#                              rest on the GPU; REC none|all|N
#   dD-prefetch-SIZE-auto      --cpu-layers auto --recompute auto: uvmrt chooses both
#                              with the profile of the calibrate row
#   dD-llmc-cudnn              llm.c (karpathy/llm.c train_gpt2cu, bf16) built with cuDNN's
#                              fused attention (USE_CUDNN=1, cudnn-frontend v1.18.0), random
#                              init (-e dD), all resident: see "llm.c" below
#   dD-torch-resident          PyTorch (transformers GPT2LMHeadModel, SDPA, bf16 autocast,
#                              fused AdamW), everything on the GPU
#   dD-torch-checkpoint        the same with activation checkpointing
#   dD-zero2                   DeepSpeed ZeRO-2, offload_optimizer cpu, checkpointing
#   dD-zero3                   DeepSpeed ZeRO-3, offload_param + offload_optimizer cpu,
#                              checkpointing
# dDbN-... runs that row at batch N instead (d60b4-prefetch-12g-cpu-all: issue 11's
# "2.7B at B=4 under 12 GiB"). The table is always made last, from whatever OUTDIR
# holds, so rows can be run in separate calls and the last call prints everything.
#
# --smoke: B=2, T=256, 4 steps, d12 rows only, budgets 2G and 1G (d12's embedding layer
# alone, wte with its gradient and AdamW state, is 0.7 GB): a first check of every kind
# of row in a minute or two.
#
# Memory: before each GPU row the free GPU memory is read (nvidia-smi) and the row is
# skipped, with a message and OUTDIR/skip.ROW.txt, when its estimated need (the
# estimate() below: parameters, optimizer state, saved activations, logits) is above
# 80% of it. uvmrt-gpt allocates managed memory for everything it holds (d48 B=8 about
# 64 GiB; the budget, not real memory, emulates the small GPU): never more than the
# GPU has free.
#
# BUILD is the build folder holding examples/ and bench/ (default: the current one).
# DeepSpeed must import (see bench/README.md: sdist + wheels, PYTHONPATH); without it
# the zero rows fail and the others still run. Per row it writes OUTDIR/gpt.ROW.json
# (uvmrt-gpt --result-json), .report.json (uvmrt-report(5)), .losses (--loss-log), .log;
# for uvmrt rows with a budget also OUTDIR/rec.ROW.json (UVMRT_RECORD: the planned steps'
# measured call times) and replay.ROW.json (uvmrt-plan --record of it with the calibrated
# profile: the model's prediction, which the table sets beside the measured step);
# OUTDIR/torch.ROW.json and .log; OUTDIR/link.json, hostbw.json, shape.json, table.md.
#
# llm.c: its source and cudnn-frontend's headers come from bench/peers/fetch-llmc.sh, run
# where there is network (PEERS=DIR, default .peers in the source tree). The first llmc row
# copies llm.c to OUTDIR/llmc and builds train_gpt2cu there with nvcc (make USE_CUDNN=1
# NO_MULTI_GPU=1 NO_USE_MPI=1; build log OUTDIR/llmc.build.log), against the cuDNN 9 of
# CUDNN_HOME (a folder with include/cudnn.h and lib/ or lib64/ holding libcudnn.so.9),
# by default PyTorch's wheel: $PYTHON -c "import nvidia.cudnn; print(nvidia.cudnn.__path__[0])".
# That lib/ is put on LD_LIBRARY_PATH when the row runs. LLMC_ARCH=90 sets the compute
# capability (default: llm.c asks nvidia-smi). The row trains LLMC_STEPS (default 10) steps
# on OUTDIR/llmc/tokens.bin (random tokens in llm.c's shard format) and writes
# OUTDIR/llmc.ROW.json (the median step time of steps 3 onward) and .log.
#
# LLMC_BIN=FILE: a train_gpt2cu built beforehand (e.g. on a machine without a GPU, by this
# script's make line with LLMC_ARCH set): the llmc rows then skip the build.
# GPT_ARGS="...": more uvmrt-gpt flags for every uvmrt row (e.g. --attention mma).
# STEPS=N (default 6; 4 at depth 60) steps per uvmrt row; AUTO_STEPS=N (default 12) for
# the automatic rows, room for the review, a re-plan, the second review and the final
# values' own steps.

set -uo pipefail

smoke=0
if [ "${1:-}" = "--smoke" ]; then
    smoke=1
    shift
fi
outdir=${1:-./out-gpt}
[ $# -gt 0 ] && shift
rows=("$@")

here=$(cd "$(dirname "$0")" && pwd)
build=${BUILD:-.}
python=${PYTHON:-python3}
linkbench=$build/bench/uvmrt-linkbench
gpt=$build/examples/gpt/uvmrt-gpt
plan=$build/tools/uvmrt-plan

if [ "$smoke" = 1 ]; then
    batch=2 seq=256 steps=4 torch_steps=4 torch_warmup=1 ds_steps=4 ds_warmup=1
    default_rows=(calibrate link hostbw d12-resident d12-resident-recompute d12-prefetch-2g-gpu-none
                  d12-prefetch-2g-cpu-none d12-prefetch-1g-gpu-all d12-prefetch-1g-cpu-all
                  d12-prefetch-1g-k7-all d12-prefetch-1g-auto
                  d12-torch-resident d12-torch-checkpoint d12-zero2 d12-zero3)
else
    batch=8 seq=1024 steps=${STEPS:-6} torch_steps=8 torch_warmup=2 ds_steps=6 ds_warmup=2
    default_rows=(calibrate link hostbw
                  d12-resident d12-llmc-cudnn d12-prefetch-8g-auto
                  d48-resident d48-llmc-cudnn d48-resident-recompute
                  d48-prefetch-16g-gpu-all d48-prefetch-16g-auto
                  d48-prefetch-8g-gpu-all d48-prefetch-8g-cpu-all
                  d48-prefetch-8g-k25-all d48-prefetch-8g-auto
                  d60b4-prefetch-12g-auto
                  d12-torch-resident d12-torch-checkpoint
                  d48-torch-resident d48-torch-checkpoint
                  d48-zero2 d48-zero3)
fi
[ ${#rows[@]} -eq 0 ] && rows=("${default_rows[@]}")

# ROW -> "depth batch kind arg..." (kind: link hostbw uvmrt torch ds), or nothing if
# the name is not a row
parse_row() {
    local r=$1 d b rest
    case $r in
    calibrate | link | hostbw) echo "0 0 $r"; return ;;
    esac
    [[ $r =~ ^d(12|24|36|48|60)(b([0-9]+))?-(.*)$ ]] || return
    d=${BASH_REMATCH[1]}
    b=${BASH_REMATCH[3]:-$batch}
    rest=${BASH_REMATCH[4]}
    case $rest in
    resident) echo "$d $b uvmrt none none 0 none" ;;
    resident-recompute) echo "$d $b uvmrt none none 0 all" ;;
    llmc-cudnn) echo "$d $b llmc cudnn" ;;
    torch-resident) echo "$d $b torch resident" ;;
    torch-checkpoint) echo "$d $b torch checkpoint" ;;
    zero2 | zero3) echo "$d $b ds $rest" ;;
    *)
        if [[ $rest =~ ^prefetch-([0-9]+[kKmMgG]?)-auto$ ]]; then
            echo "$d $b uvmrt prefetch ${BASH_REMATCH[1]} auto auto"
            return
        fi
        if [[ $rest =~ ^prefetch-([0-9]+[kKmMgG]?)-k([0-9]+)-(none|all|[0-9]+)$ ]]; then
            echo "$d $b uvmrt prefetch ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
            return
        fi
        [[ $rest =~ ^prefetch-([0-9]+[kKmMgG]?)-(gpu|cpu)-(none|all)$ ]] || return
        echo "$d $b uvmrt prefetch ${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
        ;;
    esac
}

for row in "${rows[@]}"; do
    if [ -z "$(parse_row "$row")" ]; then
        echo "run-gpt.sh: unknown row '$row': expected calibrate, link, hostbw, dD-resident," \
             "dD-resident-recompute, dD-prefetch-SIZE-gpu|cpu-none|all, dD-prefetch-SIZE-kK-REC," \
             "dD-prefetch-SIZE-auto, dD-llmc-cudnn, dD-torch-resident," \
             "dD-torch-checkpoint, dD-zero2 or dD-zero3 (D: 12 24 36 48 60; dDbN-: batch N)" >&2
        exit 2
    fi
done
mkdir -p "$outdir"
printf '{"batch": %d, "seq": %d, "smoke": %s, "vocab": 50257}\n' "$batch" "$seq" \
    "$([ "$smoke" = 1 ] && echo true || echo false)" >"$outdir/shape.json"
echo "run-gpt.sh: $([ "$smoke" = 1 ] && echo smoke || echo full): B=$batch T=$seq;" \
     "rows: ${rows[*]}"

status=0
fail() {
    echo "run-gpt.sh: row $1 failed (exit $2): see $3" >&2
    status=1
}

# Estimated GPU bytes of a row: KIND DEPTH BATCH RECOMPUTE-or-MODE. N parameters,
# A = B*T*C*L (one activation element per position, channel and layer), G = B*T*V.
# uvmrt-gpt: fp32 master + moments + grads and a bf16 copy (18 N), bf16 saved
# activations and their workspaces (~40 A, 4 A with --recompute all), bf16 logits and their gradient (4 G).
# PyTorch (fit to the 2026-12-01 d48 measurements, FACTS.md): 16 N + 85 A + 12 G
# resident, 16 N + 6 A + 12 G with checkpointing; DeepSpeed ZeRO-2 keeps bf16 weights and
# gradients (4 N), ZeRO-3 streams them (~0); both 6 A + 12 G. Plus 2 GiB (context,
# workspaces), all times 1.2.
estimate() {
    "$python" - "$@" <<'EOF'
import sys
kind, depth, B, extra = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
T, V = int(sys.argv[5]), 50257
C = {12: 768, 24: 1024, 36: 1280, 48: 1600, 60: 1920}[depth]
L = depth
N = V * C + T * C + L * (12 * C * C + 13 * C)
A, G = B * T * C * L, B * T * V
if kind in ("uvmrt", "llmc"):
    need = 18 * N + (4 if extra == "all" else 40) * A + 4 * G
elif kind == "torch":
    need = 16 * N + (85 if extra == "resident" else 6) * A + 12 * G
else:
    need = (4 * N if extra == "zero2" else 0) + 6 * A + 12 * G
print(int(1.2 * (need + (2 << 30))))
EOF
}

free_bytes() {
    local mib
    mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null |
          head -1 | tr -dc 0-9)
    [ -n "$mib" ] && echo $((mib * 1024 * 1024))
}

# fits ROW KIND DEPTH BATCH EXTRA: 0 if the row may run
fits() {
    local row=$1 need free
    need=$(estimate "$2" "$3" "$4" "$5" "$seq") || return 0
    free=$(free_bytes)
    if [ -z "$free" ]; then
        echo "run-gpt.sh: nvidia-smi gave no free memory; running $row unchecked" >&2
        return 0
    fi
    if [ "$need" -gt $((free * 8 / 10)) ]; then
        local msg
        msg=$(awk -v n="$need" -v f="$free" 'BEGIN { printf "skipped: needs about %.1f GiB, the GPU has %.1f GiB free (a row may use at most 80%% of it)", n / 2^30, f / 2^30 }')
        echo "$msg" >"$outdir/skip.$row.txt"
        echo "run-gpt.sh: $row $msg" >&2
        return 1
    fi
    rm -f "$outdir/skip.$row.txt"
    return 0
}

uvmrt_row() { # ROW DEPTH BATCH POLICY BUDGET OPTIMIZER(gpu|cpu|K|auto) RECOMPUTE
    local row=$1 depth=$2 b=$3 policy=$4 budget=$5 placement=$6 recompute=$7
    if [ ! -x "$gpt" ]; then
        echo "run-gpt.sh: $gpt not found: run from the build folder, or set BUILD" >&2
        status=1
        return
    fi
    fits "$row" uvmrt "$depth" "$b" "$recompute" || return
    local n=$steps
    [ "$depth" -ge 60 ] && n=4
    [ "$placement" = auto ] && [ "$smoke" = 0 ] && n=${AUTO_STEPS:-12}
    local where=(--cpu-layers "$placement")
    case $placement in gpu | cpu) where=(--optimizer-on "$placement") ;; esac
    local args=(--backend cuda --depth "$depth" --batch "$b" --seq "$seq" --steps "$n"
                --policy "$policy" "${where[@]}" --recompute "$recompute" --quiet
                --result-json "$outdir/gpt.$row.json" --report "json:$outdir/gpt.$row.report.json"
                --loss-log "$outdir/gpt.$row.losses")
    [ "$budget" != none ] && args+=(--budget "$budget")
    # shellcheck disable=SC2206 # GPT_ARGS: words on purpose
    [ -n "${GPT_ARGS:-}" ] && args+=($GPT_ARGS)
    # the calibrated profile: the model of the automatic choices (on cuda nothing else)
    [ -s "$outdir/profile.json" ] && args+=(--profile "$outdir/profile.json")
    rm -f "$outdir/gpt.$row.json" # a failed row must not leave an old result behind
    echo "== $row: $gpt ${args[*]}"
    rm -f "$outdir/rec.$row.json" "$outdir/replay.$row.json"
    local rec=()
    [ "$policy" = prefetch ] && rec=(env "UVMRT_RECORD=$outdir/rec.$row.json")
    "${rec[@]}" "$gpt" "${args[@]}" 2>&1 | tee "$outdir/gpt.$row.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || fail "$row" "$rc" "$outdir/gpt.$row.log"
    # the model's prediction from the run's record (planned-step call times measured)
    if [ "$rc" -eq 0 ] && [ "$budget" != none ] && [ -s "$outdir/rec.$row.json" ] && [ -x "$plan" ] &&
        [ -s "$outdir/profile.json" ]; then
        "$plan" --record "$outdir/rec.$row.json" --profile "$outdir/profile.json" --budget "$budget" --json \
            >"$outdir/replay.$row.json" 2>"$outdir/replay.$row.log" || echo "run-gpt.sh: replay of $row failed" >&2
    fi
}

# llm.c's build, once per run: sets llmc_bin, or says why not and returns 1
llmc_bin= llmc_failed=0 cudnn_lib=
llmc_build() {
    [ -n "$llmc_bin" ] && return 0
    [ "$llmc_failed" = 1 ] && return 1
    llmc_failed=1
    local peers=${PEERS:-$here/../.peers} cudnn=${CUDNN_HOME:-} dir=$outdir/llmc
    if [ ! -f "$peers/llm.c/train_gpt2.cu" ] || [ ! -d "$peers/cudnn-frontend/include" ]; then
        echo "run-gpt.sh: no llm.c source in $peers: run bench/peers/fetch-llmc.sh where there is" \
             "network and bring its folder (or set PEERS)" >&2
        return 1
    fi
    [ -z "$cudnn" ] && cudnn=$("$python" -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])' 2>/dev/null)
    cudnn_lib=
    for l in "$cudnn/lib" "$cudnn/lib64"; do
        [ -f "$l/libcudnn.so.9" ] && cudnn_lib=$l && break
    done
    if [ -z "$cudnn" ] || [ ! -f "$cudnn/include/cudnn.h" ] || [ -z "$cudnn_lib" ]; then
        echo "run-gpt.sh: no cuDNN 9 found (set CUDNN_HOME to a folder with include/cudnn.h and" \
             "lib/libcudnn.so.9, or install PyTorch's nvidia-cudnn wheel in $python)" >&2
        return 1
    fi
    peers=$(cd "$peers" && pwd) cudnn=$(cd "$cudnn" && pwd) cudnn_lib=$(cd "$cudnn_lib" && pwd)
    rm -rf "$dir"
    mkdir -p "$dir/linkdir"
    dir=$(cd "$dir" && pwd)
    if [ -n "${LLMC_BIN:-}" ]; then # built elsewhere (same llm.c, same flags): no nvcc here
        [ -x "$LLMC_BIN" ] || { echo "run-gpt.sh: LLMC_BIN=$LLMC_BIN is not an executable" >&2; return 1; }
        cp "$LLMC_BIN" "$dir/train_gpt2cu"
        echo "== llm.c: $LLMC_BIN (prebuilt), cuDNN $cudnn_lib at run time"
    else
    cp -r "$peers/llm.c/." "$dir/"
    # llm.c's Makefile insists on a cudnn-frontend/include folder beside it (the headers
    # named by CUDNN_FRONTEND_PATH, which also carries cudnn.h's folder); a wheel's lib/
    # has no unversioned libcudnn.so for -lcudnn (LIBRARY_PATH: this link folder)
    ln -s "$peers/cudnn-frontend" "$dir/cudnn-frontend"
    ln -s "$cudnn_lib/libcudnn.so.9" "$dir/linkdir/libcudnn.so"
    # llm.c links -lnvidia-ml; where the driver left no unversioned libnvidia-ml.so, its
    # libnvidia-ml.so.1, else the toolkit's stub (same soname: the driver's one runs)
    if [ "$(gcc -print-file-name=libnvidia-ml.so)" = libnvidia-ml.so ]; then
        local stub
        for stub in "$(/sbin/ldconfig -p 2>/dev/null | awk '/libnvidia-ml\.so\.1 .*x86-64/ { print $NF; exit }')" \
                    "$(dirname "$(command -v nvcc)")"/../lib64/stubs/libnvidia-ml.so \
                    "$(dirname "$(command -v nvcc)")"/../targets/*/lib/stubs/libnvidia-ml.so; do
            [ -f "$stub" ] && ln -s "$stub" "$dir/linkdir/libnvidia-ml.so" && break
        done
    fi
    # CUDA 13's cudaMemAdvise takes a cudaMemLocation: llm.c's one call (its fallback to
    # managed memory when cudaMalloc runs out, never taken in these rows) gets the host
    # location in that form; with CUDA 12 the macro is llm.c's own argument
    if grep -q 'cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)' "$dir/llmc/cuda_utils.cuh"; then
        sed -i -e 's/cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)/cudaMemAdviseSetPreferredLocation, LLMC_HOST_LOCATION)/' \
            -e '/^int cudaMallocConditionallyManaged/i #if CUDART_VERSION >= 13000\n#define LLMC_HOST_LOCATION (cudaMemLocation{cudaMemLocationTypeHost, 0})\n#else\n#define LLMC_HOST_LOCATION cudaCpuDeviceId\n#endif' \
            "$dir/llmc/cuda_utils.cuh"
    fi
    local make_args=(train_gpt2cu USE_CUDNN=1 NO_MULTI_GPU=1 NO_USE_MPI=1
                     CUDNN_FRONTEND_PATH="$peers/cudnn-frontend/include -I$cudnn/include")
    [ -n "${LLMC_ARCH:-}" ] && make_args+=(GPU_COMPUTE_CAPABILITY="$LLMC_ARCH")
    echo "== llm.c build: make -C $dir ${make_args[*]} (cuDNN $cudnn)"
    if ! (cd "$dir" && LIBRARY_PATH="$dir/linkdir:$cudnn_lib${LIBRARY_PATH:+:$LIBRARY_PATH}" \
            make "${make_args[@]}") >"$outdir/llmc.build.log" 2>&1; then
        echo "run-gpt.sh: llm.c's build failed: see $outdir/llmc.build.log" >&2
        tail -5 "$outdir/llmc.build.log" >&2
        return 1
    fi
    fi
    # random tokens in llm.c's shard format: 256 int32 header (magic, version, count),
    # then uint16 tokens; enough for every step of both sizes
    "$python" - "$dir/tokens.bin" $((batch * seq * (${LLMC_STEPS:-10} + 4) + 1)) <<'EOF' || return 1
import random, struct, sys
n = int(sys.argv[2])
rng = random.Random(1234)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
EOF
    llmc_bin=$dir/train_gpt2cu
    llmc_failed=0
}

llmc_row() { # ROW DEPTH BATCH
    local row=$1 depth=$2 b=$3 n=${LLMC_STEPS:-10}
    fits "$row" llmc "$depth" "$b" none || return
    rm -f "$outdir/llmc.$row.json"
    if ! llmc_build; then
        fail "$row" 1 "the messages above"
        return
    fi
    # no validation or sampling inside the timed steps (-v/-s past the end; llm.c does one
    # validation batch before step 1 and after the last); no checkpoints, no HellaSwag
    local args=(-e "d$depth" -i tokens.bin -j tokens.bin -b "$b" -t "$seq" -x "$n" -v 100000
                -s 100000 -m 1 -g 1 -h 0 -n 0)
    echo "== $row: LD_LIBRARY_PATH=$cudnn_lib $llmc_bin ${args[*]}"
    (cd "$outdir/llmc" && LD_LIBRARY_PATH="$cudnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ./train_gpt2cu "${args[@]}") 2>&1 | tee "$outdir/llmc.$row.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { fail "$row" "$rc" "$outdir/llmc.$row.log"; return; }
    "$python" - "$outdir/llmc.$row.log" "$outdir/llmc.$row.json" "$depth" "$b" "$seq" <<'EOF' ||
import json, re, statistics, sys
log, out, depth, B, T = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
ms, losses, mem = [], [], None
for line in open(log, encoding="utf-8", errors="replace"):
    m = re.match(r"^step\s+(\d+)/\d+ \| loss ([0-9.eE+-]+) .*?\| ([0-9.]+) ms \|", line)
    if m:
        losses.append(float(m.group(2)))
        if int(m.group(1)) >= 3:  # steps 1-2: cuBLAS/cuDNN set-up
            ms.append(float(m.group(3)))
    m = re.match(r"^device memory usage: (\d+) MiB", line)
    if m:
        mem = int(m.group(1)) << 20
if not ms:
    sys.exit(f"{log}: no timed step lines (llm.c's output changed?)")
json.dump({"program": "llm.c train_gpt2cu USE_CUDNN=1", "depth": depth, "batch": B, "seq": T,
           "ms_per_step_median": statistics.median(ms), "steps_timed": len(ms),
           "losses": losses, "peak_gpu_bytes": mem}, open(out, "w"), indent=1)
EOF
        fail "$row" 1 "$outdir/llmc.$row.log"
}

torch_row() { # ROW DEPTH BATCH MODE STEPS WARMUP
    local row=$1 depth=$2 b=$3 mode=$4 n=$5 w=$6
    fits "$row" "$([ "${mode#zero}" != "$mode" ] && echo ds || echo torch)" "$depth" "$b" \
        "$mode" || return
    local args=(--depth "$depth" --batch "$b" --seq "$seq" --steps "$n" --warmup "$w"
                --mode "$mode" --json "$outdir/torch.$row.json")
    rm -f "$outdir/torch.$row.json"
    echo "== $row: $python $here/gpt_torch.py ${args[*]}"
    NCCL_NVLS_ENABLE=0 "$python" "$here/gpt_torch.py" "${args[@]}" 2>&1 |
        tee "$outdir/torch.$row.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || fail "$row" "$rc" "$outdir/torch.$row.log"
}

for row in "${rows[@]}"; do
    read -r depth b kind a1 a2 a3 a4 <<<"$(parse_row "$row")"
    case $kind in
    calibrate)
        cal=$build/tools/uvmrt-calibrate
        echo "== calibrate: $cal -o $outdir/profile.json"
        "$cal" -o "$outdir/profile.json" --name calibrated 2>&1 | tee "$outdir/calibrate.log" |
            tail -12 || fail calibrate $? "$outdir/calibrate.log"
        ;;
    link)
        if [ ! -x "$linkbench" ]; then
            echo "run-gpt.sh: $linkbench not found (built with CUDA only)" >&2
            status=1
            continue
        fi
        echo "== link: $linkbench --json $outdir/link.json"
        "$linkbench" --json "$outdir/link.json" || fail link $? "the output above"
        ;;
    hostbw)
        echo "== hostbw: $python $here/gpt_torch.py --mode hostbw --json $outdir/hostbw.json"
        "$python" "$here/gpt_torch.py" --mode hostbw --json "$outdir/hostbw.json" ||
            fail hostbw $? "the output above"
        ;;
    uvmrt) uvmrt_row "$row" "$depth" "$b" "$a1" "$a2" "$a3" "$a4" ;;
    llmc) llmc_row "$row" "$depth" "$b" ;;
    torch) torch_row "$row" "$depth" "$b" "$a1" "$torch_steps" "$torch_warmup" ;;
    ds) torch_row "$row" "$depth" "$b" "$a1" "$ds_steps" "$ds_warmup" ;;
    esac
done

echo "== table: $outdir/table.md"
"$python" "$here/gpt_table.py" "$outdir" || status=1
exit $status
