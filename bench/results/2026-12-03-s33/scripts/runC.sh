#!/bin/bash
# session 33 run C: the disk tier with its discarded pages brought in before each read
# (run B's probe: an O_DIRECT read into discarded managed pages ran at 0.54-0.59 GB/s,
# 1.86-1.97 into resident ones): the GPU test of the tier, then the 3.3B tier row
# (26 x 3200, B=4, 8G, 16G host budget, --spill auto), then d48 at 8G (its resident
# set against the plan's host need, now with the process's own memory declared)
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | tee $o/gpu.txt
spill=$root/spill-c; mkdir -p $spill; df -h $spill | tee $o/df.txt
(cd $BUILD && timeout 60 ./tests/gpu/test_gpu --filter 'gpu/disk_tier*' > $o/test_gpu_tier.txt 2>&1); echo "== gpu tier test rc=$? after $(since) s"; tail -3 $o/test_gpu_tier.txt
mkdir -p $o/tier; cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/tier/
STEPS=3 SPILL=$spill timeout $((470 - $(since))) bench/run-tier.sh $o/tier tier > $o/tier.out 2>&1
echo "== tier rc=$? after $(since) s"
rm -rf $spill/*
lim=$((560 - $(since)))
[ $lim -gt 45 ] && { STEPS=6 timeout $lim bench/run-tier.sh $o/tier d48 > $o/d48.out 2>&1; echo "== d48 rc=$? after $(since) s"; }
cat $o/tier/table.md
for f in $o/tier/*.timeline; do echo "== $f"; grep -v " rss " $f | grep -E "allocated|initialised|disk tier|^ *[0-9.]+ step|summary|error|failed|note|host memory" | cut -c1-220 | head -16; grep " rss " $f | sort -k3 -g | tail -1; done
rm -rf $spill
gzip $o/*/*.report.json 2>/dev/null
pack runC
