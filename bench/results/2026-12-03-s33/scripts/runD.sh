#!/bin/bash
# session 33 run D: the 3.3B model without a host budget, with run C's binaries (the
# CPU layers' bf16 copies no longer made on the host at the start; the process's own
# memory declared): forced as the tier row (every AdamW on the CPU, every block
# recomputing) and as uvmrt-gpt chooses (its prediction against the step); d48 at 8G
# over 10 steps
set -uo pipefail
root=$PWD
. bench/device-env.sh
mkdir -p $o/tier; cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/tier/
GPT_ARGS="--page-locked off" STEPS=3 timeout 90 bench/run-tier.sh $o/tier host > $o/host.out 2>&1; echo "== host rc=$? after $(since) s"
STEPS=6 timeout $((200 - $(since))) bench/run-tier.sh $o/tier host-auto > $o/host-auto.out 2>&1; echo "== host-auto rc=$? after $(since) s"
lim=$((265 - $(since)))
[ $lim -gt 40 ] && { STEPS=10 timeout $lim bench/run-tier.sh $o/tier d48 > $o/d48.out 2>&1; echo "== d48 rc=$? after $(since) s"; }
cat $o/tier/table.md
for f in $o/tier/*.timeline; do echo "== $f"; grep -v " rss " $f | grep -E "^ *[0-9.]+ (step|auto:)|summary|host memory:" | cut -c1-200 | head -14; grep " rss " $f | sort -k3 -g | tail -1; done
gzip $o/*/*.report.json 2>/dev/null
pack runD
