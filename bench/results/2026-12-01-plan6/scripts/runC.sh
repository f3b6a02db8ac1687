#!/bin/bash
# run C: W1, the automatic choice at 8 GiB against the hand-set rows around it (final build)
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o/plan
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > $o/machine.txt 2>&1; nproc >> $o/machine.txt
BUILD=$root/bx KS="15 18 21 24" BUDGETS="8G" REPEATS=2 timeout 560 bench/run-plan.sh $o/plan 2>&1 | tee $o/plan.log | grep -E '^==|^auto' | cut -c1-160
echo "== plan done after $(( $(date +%s) - t0 )) s"
cat $o/plan/table.md
cd $OUT && tar czf runC.tgz w && rm -rf w
