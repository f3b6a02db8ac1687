#!/usr/bin/env bash
#
# plan-large-record.sh -- how long uvmrt-plan takes on a large record (issue 21,
# item 9): writes a synthetic record of CALLS calls (default 300000) and times
# `uvmrt-plan --record FILE --budget BUDGET --json` on it (the prediction at the
# budget, after the --fit search every prediction makes). Runs anywhere: the
# replay is the sim model on the CPU.
#
#   [PLAN=tools/uvmrt-plan] [CALLS=300000] [LAYERS=20000] [BUDGET=256M]
#       bench/plan-large-record.sh [OUTDIR]
#
# The record: LAYERS layers (at most CALLS/2) with a weight, an activation and a
# gradient each (512 KiB, 1 MiB, 512 KiB; a layer's three are one arena), the
# forward of every layer (weight read, activation written), then the backward in
# reverse (weight and activation read, gradient written), again and again (micro-
# batches) until CALLS calls; one stream. LAYERS stays well under the 65 530
# mappings a Linux process may have (vm.max_map_count): the sim backend maps each
# arena apart. Prints the wall and CPU seconds (CPU time is the figure
# to compare on a shared machine) and keeps the record and the tool's output in
# OUTDIR (default a temporary folder, removed).
set -euo pipefail
plan=${PLAN:-tools/uvmrt-plan}
calls=${CALLS:-300000}
layers=${LAYERS:-20000}
[ "$layers" -le $((calls / 2)) ] || layers=$((calls / 2))
budget=${BUDGET:-256M}
out=${1:-}
keep=1
if [ -z "$out" ]; then
    out=$(mktemp -d /tmp/uvmrt-plan-bench.XXXXXX)
    keep=0
fi
mkdir -p "$out"
rec=$out/large.rec.json
python3 - "$calls" "$layers" >"$rec" <<'PY'
import json, sys
calls, layers = int(sys.argv[1]), max(1, int(sys.argv[2]))
KiB, MiB = 1024, 1024 * 1024
def fp(n):
    a = 2 * MiB if n >= MiB else 64 * KiB
    return (n + a - 1) // a * a
tensors = []
def tensor(name, layer, role, size):
    tensors.append({"id": len(tensors), "name": name, "layer": layer, "role": role, "size_bytes": size,
                    "footprint_bytes": fp(size), "arena": 3 * layer, "placement": "auto"})
    return len(tensors) - 1
w, a, g = [], [], []
for l in range(layers):
    w.append(tensor("w%d" % l, l, "weight", 512 * KiB))
    a.append(tensor("a%d" % l, l, "activation", MiB))
    g.append(tensor("g%d" % l, l, "gradient", 512 * KiB))
out = []
def call(layer, phase, uses):
    out.append({"layer": layer, "phase": phase, "stream": 0, "after": -1, "duration_ns": 10000,
                "host_bytes": 0, "uses": uses})
while len(out) < calls:
    for l in range(layers):
        if len(out) < calls: call(l, "forward", [[w[l], 1], [a[l], 2]])
    for l in reversed(range(layers)):
        if len(out) < calls: call(l, "backward", [[w[l], 1], [a[l], 1], [g[l], 2]])
json.dump({"format": "uvmrt-record", "version": 1, "profile": "consumer-8g", "budget_bytes": 0,
           "discard": True, "remote": True, "layers": ["layer%d" % l for l in range(layers)],
           "tensors": tensors, "calls": out}, sys.stdout)
PY
TIMEFORMAT='%R %U %S'
times=$( { time { "$plan" --record "$rec" --budget "$budget" --json >"$out/plan.json" 2>"$out/plan.err";
                  echo $? >"$out/plan.rc"; }; } 2>&1 )
rc=$(cat "$out/plan.rc")
read -r wall user sys <<<"$times"
cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
echo "calls $calls (layers $layers, record $(du -h "$rec" | cut -f1)): $wall s wall, $cpu s CPU (user+sys), exit $rc"
[ "$rc" -eq 0 ] || cat "$out/plan.err" >&2
[ "$keep" -eq 1 ] || rm -rf "$out"
exit "$rc"
