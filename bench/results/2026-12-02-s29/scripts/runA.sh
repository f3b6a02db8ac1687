#!/bin/bash
# session 29 run A: where the 8G row's step sits idle (one traced step, bench/trace_gaps.py);
# bench/run-regress.sh: before issue 22 (44d9fa0) against this tree, interleaved
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=name,memory.used,memory.free,memory.total --format=csv | tee $o/gpu.txt
{ command -v nsys || echo "no nsys"; nproc; free -g | head -2; } >> $o/gpu.txt 2>&1
UVMRT_STEPS=10 UVMRT_WARMUP=5 TRACE=1 RUN_LIMIT=330 bench/run-torch.sh $o/bench gpt-uvmrt-8g > $o/run-torch.out 2>&1
echo "== 8g rc=$? after $(since) s"
grep -E "^step|^summary|Error" $o/bench/torch.gpt-uvmrt-8g.log | cut -c1-200
sed -n '/^== step:/,$p' $o/bench/torch.gpt-uvmrt-8g.log | grep -v "^step \|^summary" | head -90
ls -la $o/bench/
mv $o/bench/trace.*.json.gz $OUT/ 2>/dev/null
OLD=$root/.regress/old NEW=$root/.regress/new REPS=2 DEMAND_REPS=0 timeout $((560 - $(since))) \
    bench/run-regress.sh $o/regress > $o/regress.out 2>&1
echo "== regress rc=$? after $(since) s"
cat $o/regress/table.md 2>/dev/null || tail -20 $o/regress.out
pack runA
