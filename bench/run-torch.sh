#!/usr/bin/env bash
#
# run-torch.sh -- the PyTorch benchmark (issue 20): Hugging Face GPT-2 d48 and a 3.4B Llama
# trained by one script (bench/torch_train.py) resident, under uvmrt.torch, under DeepSpeed
# ZeRO offload and under FSDP2 CPU offload, with uvmrt-gpt beside them, side by side in one
# run; then the table (bench/torch_table.py).
#
#   [BUILD=DIR] [PYTHON=python3] [WHEELS=DIR] bench/run-torch.sh [--smoke] OUTDIR [ROW...]
#
# ROWs (default: all of them, in this order):
#   floor                    link and host memory bandwidth (torch_train.py --measure-floor)
#   gpt-compute-only         GPT-2 d48 (1.56B) B=8 T=1024: forward + backward, resident
#   gpt-resident             PyTorch resident, fused AdamW
#   gpt-uvmrt-SIZE           uvmrt.torch under budget SIZE (default rows 16g, 8g)
#   gpt-uvmrt-gpt-SIZE       uvmrt-gpt --depth 48 under SIZE (8g), automatic CPU layers and
#                            recompute (BUILD's examples/gpt/uvmrt-gpt)
#   gpt-ds-zero2             DeepSpeed ZeRO-2, offload_optimizer cpu, checkpointing
#   gpt-ds-zero3             DeepSpeed ZeRO-3, offload_param + offload_optimizer cpu, checkpointing
#   gpt-fsdp2                FSDP2 CPUOffloadPolicy, one rank, checkpointing
#   llama-compute-only, llama-resident, llama-uvmrt-SIZE (16g, 8g), llama-ds-zero3
#                            Llama 3.4B (26 layers, 3200 hidden) B=4 T=1024, the same kinds
#   llama-ds-zero2, llama-fsdp2, gpt-ds-zero3...: any MODEL-KIND pair works when named
#   calibrate                uvmrt-calibrate -o OUTDIR/profile.json (not a default row); when
#                            OUTDIR/profile.json exists the uvmrt rows get UVMRT_PROFILE=it
#
# --smoke: the tiny models (gpt2-tiny, llama-tiny; uvmrt-gpt --depth 12) at B=2 T=128, 3
# steps: every kind of row in a minute or two, to check the setup before a full run. The
# uvmrt rows keep the budget their name gives, under which a tiny model fits whole: name
# rows such as gpt-uvmrt-16m to make it offload.
#
# Each row runs in its own process under `timeout ROW_TIMEOUT` (default 540 s: one device
# call is at most 600 s, so run rows in several calls into one OUTDIR; the table is made
# from whatever OUTDIR holds). Before each GPU row the free GPU memory is read (nvidia-smi,
# printed) and the row is skipped when its estimate (torch_train.py --estimate) is above
# 80% of it. A failed, timed-out or skipped row is recorded in its JSON (ok false, error)
# and in the table; the other rows still run; the exit status is 1 if any row failed.
#
# DeepSpeed: if it does not import, it is installed from WHEELS (default: the repository's
# .whl, filled by bench/peers/fetch-deepspeed.sh) into DS_SITE (default
# /tmp/uvmrt-bench-ds-site) with pip --no-index --no-deps --no-build-isolation, DS_BUILD_OPS=0
# (its CPU Adam is built by JIT in the first ZeRO row, ~1 min, with CUDA_HOME from nvcc's
# place or /usr/local/cuda).
# uvmrt.torch: the repository's python/ goes on PYTHONPATH; UVMRT_LIBRARY defaults to
# BUILD/src/.libs/libuvmrt.so when that exists (a shared build).
#
# RUN_LIMIT=S (seconds, default none) bounds the whole call: each row's timeout is cut to
# what is left of S less 30 s (for the table), and rows that would get less than 60 s are
# not started (recorded as not run), so that one device call of 600 s can take
# RUN_LIMIT=570 and still end with the table.
#
# Variables: BUILD (build folder, default .), PYTHON, WHEELS, DS_SITE, ROW_TIMEOUT,
# TRAIN_ARGS (more arguments for every torch_train.py row, e.g. --memory-sites),
# TRACE=1 (the compute-only, resident and uvmrt.torch rows trace one extra step:
# OUTDIR/trace.ROW.json.gz, and where the GPU sat idle, in the log and the row's JSON),
# DEVICE (default cuda; cpu runs the resident and compute-only rows on the CPU, for tests;
# no free-memory check then), FLOOR_BYTES (the floor row's buffer size, default 1 GiB),
# STEPS/WARMUP (peers, default 6/2), UVMRT_STEPS/UVMRT_WARMUP (uvmrt.torch rows, default
# 8/3: the first steps record and plan), GPT_STEPS (uvmrt-gpt, default 12), MIN_FREE_FRAC
# (default 80, percent of free GPU memory a row may need).
#
# Writes OUTDIR/torch.ROW.json (torch_train.py --json; uvmrt-gpt's own result beside it
# as torch.ROW.json.gpt.json), torch.ROW.log, uvmrt.ROW.report.json (uvmrt.torch rows) and
# gpt.ROW.report.json (uvmrt-gpt: uvmrt-report(5)), skip.ROW.txt, floor.json, run-torch.log,
# deepspeed-install.log and table.md.

set -uo pipefail

usage() { awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; }
smoke=0
case ${1:-} in
-h | --help) usage; exit 0 ;;
--smoke) smoke=1; shift ;;
esac
if [ $# -lt 1 ]; then
    usage >&2
    exit 2
fi
outdir=$1
shift
rows=("$@")

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=${BUILD:-.}
python=${PYTHON:-python3}
wheels=${WHEELS:-$repo/.whl}
ds_site=${DS_SITE:-/tmp/uvmrt-bench-ds-site}
row_timeout=${ROW_TIMEOUT:-540}
steps=${STEPS:-6} warmup=${WARMUP:-2}
ut_steps=${UVMRT_STEPS:-8} ut_warmup=${UVMRT_WARMUP:-3}
gpt_steps=${GPT_STEPS:-12}
free_frac=${MIN_FREE_FRAC:-80}
run_limit=${RUN_LIMIT:-0}
device=${DEVICE:-cuda}
train=$here/torch_train.py

if [ "$smoke" = 1 ]; then
    gpt_model=gpt2-tiny llama_model=llama-tiny gpt_b=2 llama_b=2 seq=128 gpt_depth=12
    steps=3 warmup=1 ut_steps=3 ut_warmup=1 gpt_steps=3
else
    gpt_model=gpt2-d48 llama_model=llama-3b gpt_b=8 llama_b=4 seq=1024 gpt_depth=48
fi
default_rows=(floor
              gpt-compute-only gpt-resident gpt-uvmrt-16g gpt-uvmrt-8g gpt-uvmrt-gpt-8g
              gpt-ds-zero2 gpt-ds-zero3 gpt-fsdp2
              llama-compute-only llama-resident llama-uvmrt-16g llama-uvmrt-8g llama-ds-zero3)
[ ${#rows[@]} -eq 0 ] && rows=("${default_rows[@]}")

# ROW -> "model batch kind budget" (nothing if ROW is not a row)
parse_row() {
    local r=$1 fam rest model b
    case $r in floor | calibrate) echo "- 0 $r none"; return ;; esac
    [[ $r =~ ^(gpt|llama)-(.*)$ ]] || return
    fam=${BASH_REMATCH[1]} rest=${BASH_REMATCH[2]}
    if [ "$fam" = gpt ]; then model=$gpt_model b=$gpt_b; else model=$llama_model b=$llama_b; fi
    case $rest in
    compute-only | resident | ds-zero2 | ds-zero3 | fsdp2) echo "$model $b $rest none" ;;
    *)
        if [[ $rest =~ ^uvmrt-([0-9]+[kKmMgG])$ ]]; then
            echo "$model $b uvmrt ${BASH_REMATCH[1]^^}"
        elif [ "$fam" = gpt ] && [[ $rest =~ ^uvmrt-gpt-([0-9]+[kKmMgG])$ ]]; then
            echo "$model $b uvmrt-gpt ${BASH_REMATCH[1]^^}"
        fi
        ;;
    esac
}

for row in "${rows[@]}"; do
    if [ -z "$(parse_row "$row")" ]; then
        echo "run-torch.sh: unknown row '$row': expected floor, calibrate, or gpt-/llama- followed" \
             "by compute-only, resident, uvmrt-SIZE, ds-zero2, ds-zero3 or fsdp2 (gpt also" \
             "uvmrt-gpt-SIZE); SIZE like 8g" >&2
        exit 2
    fi
done
mkdir -p "$outdir" || exit 1
outdir=$(cd "$outdir" && pwd)
exec > >(tee -a "$outdir/run-torch.log") 2>&1

export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH}
if [ -z "${UVMRT_LIBRARY:-}" ] && [ -e "$build/src/.libs/libuvmrt.so" ]; then
    UVMRT_LIBRARY=$(cd "$build/src/.libs" && pwd)/libuvmrt.so
    export UVMRT_LIBRARY
fi

echo "run-torch.sh: $(date -u +%FT%TZ) $([ "$smoke" = 1 ] && echo smoke || echo full):" \
     "GPT $gpt_model B=$gpt_b, Llama $llama_model B=$llama_b, T=$seq; rows: ${rows[*]}"
echo "run-torch.sh: commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)," \
     "$("$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -1)"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,memory.free --format=csv 2>&1 ||
    echo "run-torch.sh: nvidia-smi failed: no free-memory checks"

status=0
user_profile=${UVMRT_PROFILE:-}

# a row's JSON says it failed: mark_failed JSON ROW ERROR [skipped]; the row's identity
# (model, kind, batch, budget) from the globals of the row being run
mark_failed() {
    "$python" - "$@" "$model" "$kind" "$b" "$seq" "$budget" <<'EOF'
import json, sys
path, row, err = sys.argv[1:4]
skipped = len(sys.argv) > 9
model, kind, batch, seq, budget = sys.argv[-5:]
try:
    with open(path, encoding="utf-8") as f:
        res = json.load(f)
except (OSError, ValueError):
    res = {"program": "run-torch.sh", "name": row, "model": model, "row": kind,
           "batch": int(batch), "seq": int(seq), "budget": None if budget == "none" else budget}
if not res.get("ok") or skipped:
    prev = res.get("error")
    if prev and not skipped and not prev.startswith("started"):
        # the row's own error says more than its exit status; a timeout is worth adding
        err = prev if err.startswith("exit status") else f"{err}; {prev}"
    res.update(ok=False, name=row, error=err)
    if skipped:
        res["skipped"] = True
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1)
    import os
    os.replace(path + ".tmp", path)
EOF
}

free_bytes() {
    local mib
    mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null |
          head -1 | tr -dc 0-9)
    [ -n "$mib" ] && echo $((mib * 1024 * 1024))
}

# fits ROW JSON ESTIMATE-ARGS...: 0 if the row may run
fits() {
    local row=$1 json=$2 need free msg
    shift 2
    need=$("$python" "$train" "$@" --estimate 2>/dev/null) || need=
    free=$(free_bytes)
    if [ -z "$free" ] || [ -z "$need" ]; then
        echo "run-torch.sh: $row: no free-memory figure (nvidia-smi) or estimate: running it unchecked"
        return 0
    fi
    msg=$(awk -v n="$need" -v f="$free" 'BEGIN { printf "needs about %.1f GiB, the GPU has %.1f GiB free", n / 2^30, f / 2^30 }')
    if [ "$need" -gt $((free * free_frac / 100)) ]; then
        msg="skipped: $msg (a row may use at most $free_frac% of it)"
        echo "$msg" >"$outdir/skip.$row.txt"
        echo "run-torch.sh: $row $msg"
        mark_failed "$json" "$row" "$msg" skipped
        return 1
    fi
    echo "run-torch.sh: $row $msg"
    rm -f "$outdir/skip.$row.txt"
    return 0
}

ds_ready=
ensure_deepspeed() {
    [ -n "$ds_ready" ] && return "$ds_ready"
    export DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1
    if [ -z "${CUDA_HOME:-}" ]; then
        local nvcc
        nvcc=$(command -v nvcc || true)
        if [ -n "$nvcc" ]; then
            CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
        elif [ -x /usr/local/cuda/bin/nvcc ]; then
            CUDA_HOME=/usr/local/cuda
        fi
        [ -n "${CUDA_HOME:-}" ] && export CUDA_HOME
    fi
    echo "run-torch.sh: CUDA_HOME=${CUDA_HOME:-unset} (DeepSpeed builds its CPU Adam with it)"
    if "$python" -c 'import deepspeed' >/dev/null 2>&1; then
        ds_ready=0
    elif [ -e "$ds_site/deepspeed/__init__.py" ] &&
        PYTHONPATH=$ds_site:$PYTHONPATH "$python" -c 'import deepspeed' >/dev/null 2>&1; then
        export PYTHONPATH=$ds_site:$PYTHONPATH
        ds_ready=0
    elif ! ls "$wheels"/deepspeed-*.tar.gz >/dev/null 2>&1; then
        echo "run-torch.sh: deepspeed does not import and $wheels holds no deepspeed-*.tar.gz:" \
             "fill it with bench/peers/fetch-deepspeed.sh $wheels where PyPI is reachable"
        ds_ready=1
    else
        echo "run-torch.sh: installing DeepSpeed from $wheels into $ds_site" \
             "(log: $outdir/deepspeed-install.log)"
        local t0=$SECONDS
        if "$python" -m pip install --no-index --no-deps --no-build-isolation --no-compile \
            --no-cache-dir --upgrade --target "$ds_site" "$wheels"/*.whl "$wheels"/deepspeed-*.tar.gz \
            >"$outdir/deepspeed-install.log" 2>&1 &&
            PYTHONPATH=$ds_site:$PYTHONPATH "$python" -c 'import deepspeed; print("deepspeed", deepspeed.__version__)' \
            >>"$outdir/deepspeed-install.log" 2>&1; then
            export PYTHONPATH=$ds_site:$PYTHONPATH
            echo "run-torch.sh: $(tail -1 "$outdir/deepspeed-install.log") installed in $((SECONDS - t0)) s"
            ds_ready=0
        else
            echo "run-torch.sh: DeepSpeed install failed (the DeepSpeed rows will fail):"
            tail -5 "$outdir/deepspeed-install.log"
            ds_ready=1
        fi
    fi
    return "$ds_ready"
}

# the timeout of the next row: ROW_TIMEOUT, cut to what RUN_LIMIT leaves (0: none left)
row_limit() {
    local t=$row_timeout left
    if [ "$run_limit" -gt 0 ]; then
        left=$((run_limit - SECONDS - 30))
        [ "$left" -lt 60 ] && left=0
        [ "$left" -lt "$t" ] && t=$left
    fi
    echo "$t"
}

# run_py ROW JSON ARGS...: torch_train.py in its own process, under the timeout
run_py() {
    local row=$1 json=$2 rc t
    shift 2
    rm -f "$json" "$json.gpt.json"
    t=$(row_limit)
    if [ "$t" -eq 0 ]; then
        echo "run-torch.sh: $row not run: RUN_LIMIT=$run_limit s leaves too little time"
        mark_failed "$json" "$row" "not run: RUN_LIMIT=$run_limit s left too little time" skipped
        status=1
        return
    fi
    # shellcheck disable=SC2086 # TRAIN_ARGS: words on purpose
    set -- "$@" ${TRAIN_ARGS:-}
    case $row in *-compute-only | *-resident | *-uvmrt-*)
        [ "${TRACE:-0}" = 1 ] && [ "$row" = "${row%-uvmrt-gpt-*}" ] &&
            set -- "$@" --trace "$outdir/trace.$row.json.gz" ;;
    esac
    echo "== $row (timeout $t s): $python $train $*"
    timeout --kill-after=20 "$t" "$python" "$train" --name "$row" --json "$json" "$@" \
        2>&1 | tee "$outdir/torch.$row.log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        local why="exit status $rc"
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            why="timed out after $t s (ROW_TIMEOUT $row_timeout, RUN_LIMIT $run_limit)"
        elif [ "$rc" -gt 128 ]; then
            why="killed by signal $((rc - 128)) ($(kill -l $((rc - 128)) 2>/dev/null || echo '?'))"
        fi
        mark_failed "$json" "$row" "$why"
        echo "run-torch.sh: row $row failed ($why): see $outdir/torch.$row.log"
        status=1
    fi
}

for row in "${rows[@]}"; do
    read -r model b kind budget <<<"$(parse_row "$row")"
    json=$outdir/torch.$row.json
    case $kind in
    floor)
        echo "== floor: $python $train --measure-floor --json $outdir/floor.json"
        t=$(row_limit)
        [ "$t" -eq 0 ] && { echo "run-torch.sh: floor not run: RUN_LIMIT"; continue; }
        timeout --kill-after=20 "$t" "$python" "$train" --measure-floor \
            --device "$device" --floor-bytes "${FLOOR_BYTES:-1073741824}" --json "$outdir/floor.json" 2>&1 | tee "$outdir/floor.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "run-torch.sh: floor failed"; status=1; }
        continue
        ;;
    calibrate)
        cal=$build/tools/uvmrt-calibrate
        if [ ! -x "$cal" ]; then
            echo "run-torch.sh: $cal not found: run from the build folder, or set BUILD"
            status=1
            continue
        fi
        echo "== calibrate: $cal -o $outdir/profile.json"
        "$cal" -o "$outdir/profile.json" --name calibrated >"$outdir/calibrate.log" 2>&1 ||
            { echo "run-torch.sh: calibrate failed: see $outdir/calibrate.log"; status=1; }
        continue
        ;;
    esac
    # the calibrated profile, when there is one, models the uvmrt rows' automatic choices
    [ -z "$user_profile" ] && [ -s "$outdir/profile.json" ] && export UVMRT_PROFILE=$outdir/profile.json
    args=(--row "$kind" --model "$model" --batch "$b" --seq "$seq" --device "$device")
    case $kind in
    ds-zero2 | ds-zero3 | fsdp2) args+=(--checkpointing --count-link-bytes) ;;
    esac
    [ "$budget" != none ] && args+=(--budget "$budget")
    [ "$device" = cpu ] || fits "$row" "$json" "${args[@]}" || continue
    case $kind in
    uvmrt)
        run_py "$row" "$json" "${args[@]}" --steps "$ut_steps" --warmup "$ut_warmup" \
            --uvmrt-report "$outdir/uvmrt.$row.report.json"
        ;;
    uvmrt-gpt)
        gargs=(--backend cuda --depth "$gpt_depth" --policy prefetch --cpu-layers auto
               --recompute auto --quiet --report "json:$outdir/gpt.$row.report.json"
               --loss-log "$outdir/gpt.$row.losses")
        run_py "$row" "$json" "${args[@]}" --steps "$gpt_steps" --warmup 1 \
            --gpt-binary "$build/examples/gpt/uvmrt-gpt" -- "${gargs[@]}"
        ;;
    ds-zero2 | ds-zero3)
        # without DeepSpeed the row still runs, and records torch_train.py's error
        ensure_deepspeed || echo "run-torch.sh: $row: DeepSpeed is not installed"
        run_py "$row" "$json" "${args[@]}" --steps "$steps" --warmup "$warmup"
        ;;
    *) run_py "$row" "$json" "${args[@]}" --steps "$steps" --warmup "$warmup" ;;
    esac
done

echo "== table: $outdir/table.md"
"$python" "$here/torch_table.py" "$outdir" || status=1
exit $status
