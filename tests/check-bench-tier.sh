#!/bin/sh
# check-bench-tier.sh -- bench/run-tier.sh --smoke end to end on the sim backend: every row
# runs, the table has a line of figures for each, the tier row moved bytes to and from
# the disk, its peak host bytes stayed under its host budget (24 MiB), and its losses
# equal the host row's bit for bit.
#
# Run by `make check` in the build directory. Skips (77) without python3 or uvmrt-gpt.
: "${top_srcdir:=.}"
command -v python3 >/dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
[ -x examples/gpt/uvmrt-gpt ] || { echo "SKIP: examples/gpt/uvmrt-gpt not built"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-bench-tier.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
BUILD=. bash "$top_srcdir/bench/run-tier.sh" --smoke "$tmp/out" >"$tmp/log" 2>&1 ||
    { cat "$tmp/log"; echo "FAIL: run-tier.sh --smoke exited $?"; exit 1; }
fail=0
for row in resident host tier d48; do
    grep -q "^| $row | [0-9]" "$tmp/out/table.md" || { echo "FAIL: no figures for $row"; fail=1; }
done
grep -q "losses against the host row's: equal, bit for bit" "$tmp/out/table.md" ||
    { echo "FAIL: the tier row's losses"; fail=1; }
python3 - "$tmp/out" <<'PY' || fail=1
import json, sys
rep = json.load(open(sys.argv[1] + "/tier.report.json"))
steps = rep["steps"][1:]
assert all(s["spill_read_bytes"] > 0 and s["spill_write_bytes"] > 0 for s in steps), "the tier moved nothing"
assert rep["peak_host_bytes"] <= 24 << 20, f"peak host {rep['peak_host_bytes']} over the 24 MiB budget"
host = json.load(open(sys.argv[1] + "/host.report.json"))
assert host["peak_host_bytes"] > rep["peak_host_bytes"], "the tier saved no host memory"
PY
[ $fail = 0 ] || cat "$tmp/out/table.md"
exit $fail
