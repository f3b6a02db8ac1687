#!/usr/bin/env bash
#
# run-tier.sh -- the host-memory and disk-tier benchmark (issue 24): uvmrt-gpt on a GPT of
# about 3.3B (--layers 26 --channels 3200, B=4, T=1024) at an 8 GiB GPU budget, with no
# host budget beside a 16 GiB host budget whose CPU layers keep their state on the disk
# tier (--spill-dir, --spill state), the compute-only step of the same model, and d48 at
# 8 GiB for the CPU AdamW's rate against uvmrt-calibrate's; side by side in one run, with
# the machine's link, host memory and disk measured in the same run (uvmrt-calibrate
# --spill-dir); then a table with each row's floor (compute, link each way, host memory:
# the CPU AdamW's 28 bytes a parameter and the link's and disk's bytes at the shared rate,
# disk: read then write on one drive) and uvmrt's prediction where uvmrt-gpt chose.
#
#   [BUILD=DIR] [SPILL=DIR] bench/run-tier.sh [--smoke] OUTDIR [ROW...]
#
# ROWs (default: all, in this order):
#   calibrate   uvmrt-calibrate --spill-dir SPILL -o OUTDIR/profile.json (the uvmrt rows
#               then run with it: UVMRT_PROFILE)
#   resident    the model with --policy none (everything on the GPU): its compute-only step
#   host        --budget 8G, every layer's AdamW on the CPU, every block recomputing, no
#               host budget
#   host-auto   the same with uvmrt's own choice of CPU layers and recompute (its
#               prediction against the measured step in the table)
#   tier        the same under --host-budget HOST (default 16G) with --spill-dir SPILL
#               (--spill auto: uvmrt-gpt puts the least of the CPU layers' state in
#               files that brings it within the host budget, moments first); skipped
#               (OUTDIR/skip.tier.txt) when SPILL has less free space than the CPU
#               layers' 16 bytes a parameter and a tenth more
#   d48         --depth 48 --batch 8 at --budget 8G, the choice uvmrt's: the CPU AdamW's
#               rate in the step (uvmrt-gpt's "cpu optimizer" line) against the profile's
#
# --smoke: the sim backend, a tiny shape (8 layers, 128 channels), a host budget of 24M
# (a mix of moments and whole layers on the tier),
# no calibrate row (a profile written here): every row in seconds, to check the script.
#
# Variables: BUILD (the build folder, default .), SPILL (the disk tier's directory, on the
# disk to measure; default OUTDIR/spill), LAYERS, CHANNELS, BATCH, SEQ (the shape), HOST
# (the tier row's host budget), STEPS (default 6), GPT_ARGS (more uvmrt-gpt flags for
# every row, e.g. --page-locked off). Before each GPU row the free GPU memory
# is read and the row is skipped when the model's managed bytes are above 80% of it.
#
# Writes OUTDIR/ROW.json (uvmrt-gpt --result-json), ROW.report.json (uvmrt-report(5)),
# ROW.losses (--loss-log), ROW.log, ROW.rss (the row's peak resident set, KiB),
# ROW.timeline (the log's lines with their times, and the resident set every 2 s),
# rec.ROW.json (UVMRT_RECORD: the planned step with its calls' measured times, for
# uvmrt-plan --record and bench/replay-plan.sh, to check the model offline),
# profile.json, table.md; the table says whether the tier row's losses equal the host
# row's bit for bit (they must: the tier moves bytes, not values).
set -uo pipefail

usage() { awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; }
smoke=0
case ${1:-} in
-h | --help) usage; exit 0 ;;
--version) echo "run-tier.sh (uvmrt)"; exit 0 ;;
--smoke) smoke=1; shift ;;
esac
[ $# -ge 1 ] || { usage >&2; exit 2; }
out=$1
shift
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
build=${BUILD:-.}
gpt=$build/examples/gpt/uvmrt-gpt
cal=$build/tools/uvmrt-calibrate
[ -x "$gpt" ] || { echo "run-tier.sh: $gpt not found: run from the build folder, or set BUILD" >&2; exit 2; }
spill=${SPILL:-$out/spill}
mkdir -p "$spill" || exit 2
steps=${STEPS:-6}
if [ $smoke = 1 ]; then
    shape=(--layers 8 --channels 128 --heads 2 --vocab 4096 --batch 2 --seq 64)
    backend=sim host=${HOST:-24M} budget=64M d48=(--layers 4 --channels 128 --heads 2 --batch 2 --seq 64)
    rows_default=(resident host tier d48)
    cat >"$out/profile.json" <<'JSON'
{"format_version": 1, "name": "smoke", "memory_bytes": 150000000000,
 "prefetch_h2d_bps": 4.8e10, "evict_d2h_bps": 1.3e10, "pinned_h2d_bps": 5.55e10,
 "pinned_d2h_bps": 5.53e10, "fault_bps": 5.8e9, "remote_read_bps": 5.05e10,
 "remote_write_bps": 5.22e10, "flops": 7.7e14, "hbm_bps": 4.26e12,
 "pinned_bidir_bps": 1.017e11, "host_mem_bps": 7.7e10, "host_mem_shared_bps": 1.4e11,
 "cpu_adamw_params_per_s": 2.8e9, "disk_read_bps": 3e9, "disk_write_bps": 2e9}
JSON
else
    shape=(--layers "${LAYERS:-26}" --channels "${CHANNELS:-3200}" --batch "${BATCH:-4}" --seq "${SEQ:-1024}")
    backend=cuda host=${HOST:-16G} budget=8G d48=(--depth 48 --batch 8 --seq 1024)
    rows_default=(calibrate resident host tier d48)
fi
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=("${rows_default[@]}")
echo "run-tier.sh: $(date -u +%FT%TZ) rows: ${rows[*]}; shape: ${shape[*]}; spill: $spill" | tee "$out/run-tier.log"

# The row's program under a peak-RSS probe: python's rusage of its child, in KiB, into
# ROW.rss; beside it ROW.timeline: each line of the program's output with the seconds
# since its start, and every 2 s the program's resident set (VmRSS, GiB), so that a row
# killed by a timeout still shows how far it got and when its memory peaked.
run_rss() {
    local row=$1
    shift
    python3 - "$out/$row.rss" "$out/$row.timeline" "$@" <<'EOF'
import resource, subprocess, sys, threading, time
t0 = time.time()
tl = open(sys.argv[2], "w", buffering=1)
p = subprocess.Popen(sys.argv[3:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
def sample():
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                kb = next((int(l.split()[1]) for l in f if l.startswith("VmRSS:")), 0)
            tl.write(f"{time.time() - t0:8.1f} rss {kb / 2**20:.2f} GiB\n")
        except (OSError, ValueError):
            pass
        time.sleep(2)
threading.Thread(target=sample, daemon=True).start()
for raw in p.stdout:
    sys.stdout.buffer.write(raw)
    sys.stdout.flush()
    tl.write(f"{time.time() - t0:8.1f} {raw.decode(errors='replace')}")
rc = p.wait()
open(sys.argv[1], "w").write(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}\n")
sys.exit(rc)
EOF
}

# The model's parameters, from a planning-only run (--steps 0 prints the shape).
params_of() {
    "$gpt" --backend sim "$@" --steps 1 -q --policy none 2>&1 |
        sed -n 's/.* \([0-9.]*\) M parameters.*/\1/p' | head -1
}

free_gpu_mib() {
    command -v nvidia-smi >/dev/null 2>&1 || { echo 0; return; }
    nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits | head -1
}

gpt_row() {
    local row=$1
    shift
    # shellcheck disable=SC2206 # GPT_ARGS: more flags for every row, split on spaces
    local args=(--backend "$backend" --steps "$steps" --profile "$out/profile.json" ${GPT_ARGS:-}
                --result-json "$out/$row.json" --report "json:$out/$row.report.json"
                --loss-log "$out/$row.losses" "$@")
    echo "== $row: uvmrt-gpt ${args[*]}" | tee -a "$out/run-tier.log"
    local t0=$SECONDS
    UVMRT_RECORD=$out/rec.$row.json run_rss "$row" "$gpt" "${args[@]}" >"$out/$row.log" 2>&1
    local rc=$?
    echo "== $row: exit $rc after $((SECONDS - t0)) s" | tee -a "$out/run-tier.log"
    grep -E "^(summary|auto|cpu optimizer|disk tier)" "$out/$row.log" | tee -a "$out/run-tier.log"
}

for row in "${rows[@]}"; do
    case $row in
    calibrate)
        [ -x "$cal" ] || { echo "run-tier.sh: $cal not built (CUDA only)"; continue; }
        "$cal" --spill-dir "$spill" -o "$out/profile.json" >"$out/calibrate.log" 2>&1
        echo "== calibrate: exit $?" | tee -a "$out/run-tier.log"
        ;;
    resident) gpt_row resident "${shape[@]}" --policy none --cpu-layers 0 --recompute none ;;
    host) gpt_row host "${shape[@]}" --budget "$budget" --host-budget none --optimizer-on cpu --recompute all ;;
    host-auto) gpt_row host-auto "${shape[@]}" --budget "$budget" --host-budget none ;;
    tier)
        mparams=$(params_of "${shape[@]}")
        need=$(python3 -c "print(int(float('${mparams:-0}') * 1e6 * 16 * 1.1))")
        # a killed row's files (uvmrt-spill.PID.*, its process gone) would count as used:
        # uvmrt removes them when it opens the tier, after this check, so here first
        for d in "$spill"/uvmrt-spill.*; do
            pid=${d##*/uvmrt-spill.}
            pid=${pid%%.*}
            [ -d "$d" ] && [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && rm -rf "$d"
        done
        free=$(df -PB1 "$spill" | awk 'NR == 2 {print $4}')
        if [ "${free:-0}" -lt "$need" ]; then
            echo "tier: $spill has $free bytes free, the tier needs about $need" | tee "$out/skip.tier.txt"
            continue
        fi
        gpt_row tier "${shape[@]}" --budget "$budget" --host-budget "$host" --optimizer-on cpu --recompute all \
            --spill-dir "$spill"
        ;;
    d48) gpt_row d48 "${d48[@]}" --budget "$budget" ;;
    *) echo "run-tier.sh: unknown row '$row'" >&2; exit 2 ;;
    esac
    if [ $backend = cuda ] && [ "$(free_gpu_mib)" -lt 1000 ]; then
        echo "run-tier.sh: the GPU has $(free_gpu_mib) MiB free after $row: stopping" >&2
        break
    fi
done

python3 - "$out" <<'EOF' | tee "$out/table.md"
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
prof = load("profile.json") or {}
res = load("resident.json")
compute_ms = res.get("ms_per_step_median") if res else None
print("| row | ms/step | predicted ms | tokens/s | peak RSS GiB | planned host (uvmrt) GiB | GB in / out | disk GB read / written | floor ms (bound) | x floor |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for row in ("resident", "host", "host-auto", "tier", "d48"):
    r, rep = load(f"{row}.json"), load(f"{row}.report.json")
    if r is None:
        skip = os.path.join(out, f"skip.{row}.txt")
        why = open(skip).read().strip() if os.path.exists(skip) else "did not run"
        print(f"| {row} | {why} | | | | | | | | |")
        continue
    ms = r.get("ms_per_step_median") or 0
    try:
        rss = int(open(os.path.join(out, f"{row}.rss")).read()) / 2**20
    except (OSError, ValueError):
        rss = float("nan")
    steps = (rep or {}).get("steps", [])[1:] or (rep or {}).get("steps", [])
    rd = max((s.get("spill_read_bytes", 0) for s in steps), default=0) / 1e9
    wr = max((s.get("spill_write_bytes", 0) for s in steps), default=0) / 1e9
    gin, gout = r.get("gb_in_per_step") or 0, r.get("gb_out_per_step") or 0
    floors = {}
    if compute_ms and row != "d48":
        floors["compute"] = compute_ms
    if prof.get("pinned_h2d_bps"):
        floors["link in"] = gin * 1e9 / prof["pinned_h2d_bps"] * 1e3
    if prof.get("pinned_d2h_bps"):
        floors["link out"] = gout * 1e9 / prof["pinned_d2h_bps"] * 1e3
    # host memory: the CPU AdamW's 28 bytes a parameter (w, m, v read and written, g
    # read), the link's bytes both ways and the disk's, at the rate CPU and link reach
    # together (the profile's host_mem_shared_bps)
    hm = prof.get("host_mem_shared_bps") or prof.get("host_mem_bps")
    if hm and row != "resident":
        hbytes = (r.get("cpu_params") or 0) * 28 + (gin + gout + rd + wr) * 1e9
        floors["host mem"] = hbytes / hm * 1e3
    if prof.get("disk_read_bps") and prof.get("disk_write_bps"):  # one drive, both ways
        floors["disk"] = (rd * 1e9 / prof["disk_read_bps"] + wr * 1e9 / prof["disk_write_bps"]) * 1e3
    bound = max(floors, key=floors.get) if floors else None
    fl = f"{floors[bound]:.1f} ({bound})" if bound else "-"
    xf = f"{ms / floors[bound]:.2f}" if bound and floors[bound] > 0 else "-"
    peak = ((rep or {}).get("plan_host_bytes") or 0) / 2**30
    pred = r.get("predicted_step_ms")
    pred = f"{pred:.1f} ({(ms - pred) / pred * 100:+.1f}%)" if pred and ms else ""
    print(f"| {row} | {ms:.1f} | {pred} | {r.get('tokens_per_s', 0):.0f} | {rss:.1f} | {peak:.2f} | {gin:.2f} / {gout:.2f} "
          f"| {rd:.2f} / {wr:.2f} | {fl} | {xf} |")
def losses(row):
    try:
        return open(os.path.join(out, f"{row}.losses")).read()
    except OSError:
        return None
if losses("tier") is not None and losses("host") is not None:
    print()
    print("tier row's losses against the host row's: " +
          ("equal, bit for bit" if losses("tier") == losses("host") else "DIFFERENT"))
print()
print(f"profile: link {prof.get('pinned_h2d_bps', 0) / 1e9:.1f} / {prof.get('pinned_d2h_bps', 0) / 1e9:.1f} GB/s, "
      f"disk {prof.get('disk_read_bps', 0) / 1e9:.2f} read / {prof.get('disk_write_bps', 0) / 1e9:.2f} write GB/s, "
      f"host memory {(prof.get('host_mem_shared_bps') or 0) / 1e9:.1f} GB/s shared, "
      f"CPU AdamW {prof.get('cpu_adamw_params_per_s', 0) / 1e9:.2f} Gparam/s")
EOF
