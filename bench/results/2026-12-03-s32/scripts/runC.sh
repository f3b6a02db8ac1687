#!/bin/bash
# session 32 run C: what pinning costs here (bench/probes/pin_cost.c, 2 x 1 GiB), then
# bench/run-tier.sh's 3.3B rows (resident, host, tier under a 16G host budget with
# --spill auto) with --page-locked off (run A's d48 spent about 300 s before its first
# step: its rehearsals pinned every candidate's CPU layers for real, fixed since; what
# the real pinning of 53 GB costs here is not known), then d48 at 8G as uvmrt-gpt
# defaults (page-locked: the start after the fix), with run A's profile
set -uo pipefail
root=$PWD
. bench/device-env.sh
timeout 40 $BUILD/pin_cost 1 2 > $o/pin_cost.txt 2>&1; echo "== pin_cost rc=$? after $(since) s"; cat $o/pin_cost.txt
mkdir -p $o/tier $root/spill-c
cp bench/results/2026-12-03-s32/runA-profile.json $o/tier/profile.json
free=$(df -PB1 $root/spill-c | awk 'NR == 2 {print $4}')
layers=$(python3 -c "C=3200; print(max(4, min(26, int(($free - 4e9) / ((12*C*C + 13*C) * 16 * 1.1)))))")
echo "== disk free $free bytes: LAYERS=$layers"
GPT_ARGS="--page-locked off" LAYERS=$layers STEPS=3 SPILL=$root/spill-c timeout $((340 - $(since))) \
    bench/run-tier.sh $o/tier resident tier host > $o/run-tier.out 2>&1
echo "== run-tier rc=$? after $(since) s"
cp $o/tier/run-tier.log $o/tier/run-tier-3b.log
lim=$((425 - $(since)))
[ $lim -gt 40 ] && { LAYERS=$layers STEPS=6 SPILL=$root/spill-c timeout $lim bench/run-tier.sh $o/tier d48 > $o/run-tier-d48.out 2>&1
    echo "== run-tier d48 rc=$? after $(since) s"; }
cat $o/tier/run-tier-3b.log $o/tier/run-tier.log; cat $o/tier/table.md
grep -h -E "^step +[0-9]+/|cpu optimizer|disk tier|initialised" $o/tier/tier.log $o/tier/host.log | cut -c1-200 | head -20
rm -rf $root/spill-c
gzip $o/tier/*.report.json 2>/dev/null
pack runC
