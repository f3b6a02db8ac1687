#!/bin/sh
# check-bench-plan.sh -- bench/run-plan.sh and bench/plan_table.py end to end, on the sim
# backend with --smoke shapes and a profile written here: every row runs (the hand-set
# sweep, resident and resident-planned, the automatic choice at each budget, the
# repeats), the tables name them, and on sim every prediction equals the step it
# predicts (the model is the measurement: +0.0%); bench/replay-plan.sh of the same
# files makes the same predictions again, and so it does of the same run packed for
# the tree by bench/pack-results.sh (unpacking it on the fly), whose files
# bench/unpack-results.sh gives back unchanged.
#
# Run by `make check` in the build directory. Skips (77) without python3 or without
# the programs the script needs (uvmrt-calibrate is built only with CUDA).

: "${top_srcdir:=.}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
for p in examples/mlp/uvmrt-mlp tools/uvmrt-plan tools/uvmrt-calibrate; do
    [ -x "$p" ] || { echo "SKIP: $p not built"; exit 77; }
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-bench-plan.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# the H200's figures (FACTS.md), with host memory modelled
cat >"$tmp/profile.json" <<'JSON'
{"format_version": 1, "name": "check", "memory_bytes": 150000000000,
 "prefetch_h2d_bps": 4.8e10, "evict_d2h_bps": 1.3e10, "pinned_h2d_bps": 5.55e10,
 "pinned_d2h_bps": 5.53e10, "fault_bps": 5.8e9, "remote_read_bps": 5.05e10,
 "remote_write_bps": 5.22e10, "flops": 7.7e14, "hbm_bps": 4.26e12,
 "pinned_bidir_bps": 1.017e11, "host_mem_bps": 7.7e10, "host_mem_shared_bps": 1.4e11,
 "cpu_adamw_params_per_s": 2.8e9}
JSON
out=$tmp/out
if ! BUILD=. RUN_BACKEND=sim PROFILE="$tmp/profile.json" REPEATS=1 \
        bash "$top_srcdir/bench/run-plan.sh" --smoke "$out" >"$tmp/log" 2>&1; then
    cat "$tmp/log"
    echo "FAIL: bench/run-plan.sh --smoke on sim"
    exit 1
fi
t=$out/table.md
fail=0
for row in resident resident-planned 256M-k0-none 256M-k4-all 256M-auto 384M-auto; do
    grep -q "^| $row |" "$t" || { echo "FAIL: the table has no row $row"; fail=1; }
done
grep -q "^| repeated in turns at 256M |" "$t" || { echo "FAIL: no repeats table"; fail=1; }
grep -q "^| automatic choice at 256M |" "$t" || { echo "FAIL: no choice-against-best table"; fail=1; }
# every error column of the first table: on sim the predictions are the measurements
bad=$(awk -F'|' '/^\| (resident|256M|384M)/ && NF > 12 {
        for (i = 7; i <= 11; i += 2) if ($i !~ /^ *(-|\+0\.0%|-0\.0%) *$/) print $2 ":" $i }' "$t")
if [ -n "$bad" ]; then
    echo "FAIL: predictions differ from the sim's own steps:"
    echo "$bad"
    fail=1
fi
[ "$fail" = 0 ] || { cat "$t"; exit 1; }
# bench/replay-plan.sh: the same predictions made again from the run's files
if ! BUILD=. bash "$top_srcdir/bench/replay-plan.sh" "$out" "$tmp/again" >"$tmp/again.md" 2>"$tmp/again.log"; then
    cat "$tmp/again.log"
    echo "FAIL: bench/replay-plan.sh"
    exit 1
fi
n=$(grep -c '^| \(resident\|256M\|384M\)' "$tmp/again.md")
bad=$(awk -F'|' '/^\| (resident|256M|384M)/ { for (i = 5; i <= 7; i += 2) if ($i !~ /^ *(-|\+0\.0%|-0\.0%) *$/) print $2 ":" $i }' \
    "$tmp/again.md")
if [ -n "$bad" ] || [ "$n" -lt 6 ] || grep -q '^| 256M-auto | [0-9.]* | - ' "$tmp/again.md"; then
    echo "FAIL: bench/replay-plan.sh's predictions differ from the sim's own steps ($n rows):"
    echo "$bad"
    cat "$tmp/again.md" "$tmp/again.log"
    exit 1
fi
# the same run packed for the tree (bench/pack-results.sh): replay-plan.sh unpacks it on
# the fly and prints the same table; bench/unpack-results.sh gives back every file
mkdir -p "$tmp/packed/run"
cp -R "$out/." "$tmp/packed/run/"
rm -rf "$tmp/packed/run/replay-now"
(cd "$tmp/packed/run" && find . -type f -exec cksum {} + | LC_ALL=C sort -k3) >"$tmp/before.sum"
if ! bash "$top_srcdir/bench/pack-results.sh" "$tmp/packed/run" >"$tmp/pack.log" 2>&1 ||
        [ ! -f "$tmp/packed/run/raw.tar.xz" ] || ls "$tmp/packed/run"/mlp.*.json >/dev/null 2>&1; then
    cat "$tmp/pack.log"; ls -la "$tmp/packed/run"
    echo "FAIL: bench/pack-results.sh did not pack the raw files into raw.tar.xz"
    exit 1
fi
if ! BUILD=. bash "$top_srcdir/bench/replay-plan.sh" "$tmp/packed/run" "$tmp/again-packed" \
        >"$tmp/again-packed.md" 2>"$tmp/again-packed.log" || ! cmp -s "$tmp/again.md" "$tmp/again-packed.md"; then
    cat "$tmp/again-packed.log"
    diff "$tmp/again.md" "$tmp/again-packed.md"
    echo "FAIL: bench/replay-plan.sh of the packed run: not the same table"
    exit 1
fi
bash "$top_srcdir/bench/unpack-results.sh" "$tmp/packed/run" "$tmp/unpacked" >/dev/null &&
    (cd "$tmp/unpacked" && find . -type f -exec cksum {} + | LC_ALL=C sort -k3) >"$tmp/after.sum"
if ! cmp -s "$tmp/before.sum" "$tmp/after.sum"; then
    diff "$tmp/before.sum" "$tmp/after.sum"
    echo "FAIL: bench/unpack-results.sh did not give back the files pack-results.sh packed"
    exit 1
fi
echo "PASS: run-plan.sh --smoke on sim: $(grep -c '^| ' "$t") table rows, predictions equal the steps; replay-plan.sh: $n rows, the same, and again from the run packed by pack-results.sh"
