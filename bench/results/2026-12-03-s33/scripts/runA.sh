#!/bin/bash
# session 33 run A: where the disk tier's time goes on the GPU machine. With runs'
# output timed line by line and the resident set sampled (bench/run-tier.sh's
# ROW.timeline): a small tier row first (26 x 1600, 4G host budget), then the 3.3B tier
# row (16G host budget), the 3.3B host row and d48 at 8G; session 32's calibrated profile
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | tee $o/gpu.txt
spill=$root/spill-a; mkdir -p $spill; df -h $spill | tee $o/df.txt
for d in small tier; do mkdir -p $o/$d; cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/$d/; done
LAYERS=26 CHANNELS=1600 HOST=4G STEPS=4 SPILL=$spill timeout 150 bench/run-tier.sh $o/small tier > $o/small.out 2>&1
echo "== small rc=$? after $(since) s"; cat $o/small/table.md
STEPS=3 SPILL=$spill timeout $((420 - $(since))) bench/run-tier.sh $o/tier tier > $o/tier.out 2>&1
echo "== tier rc=$? after $(since) s"
lim=$((510 - $(since)))
[ $lim -gt 60 ] && { GPT_ARGS="--page-locked off" STEPS=3 timeout $lim bench/run-tier.sh $o/tier host > $o/host.out 2>&1; echo "== host rc=$? after $(since) s"; }
lim=$((570 - $(since)))
[ $lim -gt 40 ] && { STEPS=6 timeout $lim bench/run-tier.sh $o/tier d48 > $o/d48.out 2>&1; echo "== d48 rc=$? after $(since) s"; }
cat $o/tier/table.md
for f in $o/small/tier.timeline $o/tier/*.timeline; do echo "== $f"; grep -v " rss " $f | grep -E "allocated|disk tier|^ *[0-9.]+ step|summary|error|failed|auto" | cut -c1-190 | head -16; grep " rss " $f | sort -k3 -g | tail -1; done
rm -rf $spill
gzip $o/*/*.report.json 2>/dev/null
pack runA
