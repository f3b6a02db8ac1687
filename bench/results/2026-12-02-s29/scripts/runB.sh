#!/bin/bash
# session 29 run B: the link's updates carried into the next step (beside its forward);
# the copy probe (does a copy into host-homed managed memory stall the compute stream?);
# GPT-2 d48 at 8G (traced) and 16G, PyTorch resident
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
timeout 60 python bench/probes/copy_contention.py > $o/copy_contention.txt 2>&1; echo "== probe rc=$? after $(since) s"
cat $o/copy_contention.txt
UVMRT_STEPS=12 UVMRT_WARMUP=6 TRACE=1 RUN_LIMIT=$((560 - $(since))) bench/run-torch.sh $o/bench gpt-uvmrt-8g gpt-uvmrt-16g gpt-resident > $o/run-torch.out 2>&1
echo "== rows rc=$? after $(since) s"
grep -h -E "^\| gpt" $o/bench/table.md | cut -c1-250
for r in gpt-uvmrt-8g gpt-uvmrt-16g gpt-resident; do
  echo "---- $r"; grep -E "^summary|Error|error" $o/bench/torch.$r.log | cut -c1-250
  sed -n '/^== step:/,/^== forward/p' $o/bench/torch.$r.log | head -14
  sed -n '/^== blocking/,$p' $o/bench/torch.$r.log | head -6
done
grep -E "^uvmrt" $o/bench/torch.gpt-uvmrt-8g.log | cut -c1-300 | head
mv $o/bench/trace.gpt-uvmrt-8g.json.gz $OUT/ 2>/dev/null; rm -f $o/bench/trace.*.json.gz
gzip $o/bench/*.report.json 2>/dev/null
pack runB
