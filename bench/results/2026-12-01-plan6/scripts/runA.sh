#!/bin/bash
# run A: the final build (16dff5c) on the GPU: Run C's rows and the d48 rows
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o/plan $o/gpt
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv; nproc; free -g | head -2; } 2>&1 | tee $o/machine.txt
BUILD=$root/b KS=" " REPEATS=0 bench/run-plan.sh $o/plan 2>&1 | tee $o/plan.log
echo "== plan done after $(( $(date +%s) - t0 )) s"
cp $o/plan/profile.json $o/plan/link.json $o/gpt/
BUILD=$root/b AUTO_STEPS=12 bench/run-gpt.sh $o/gpt d48-resident d48-prefetch-8g-auto d48-prefetch-16g-auto d48-prefetch-96g-gpu-none 2>&1 | tee $o/gpt.log
echo "== gpt done after $(( $(date +%s) - t0 )) s"
cd $OUT && tar czf runA.tgz w && rm -rf w
