#!/bin/bash
# session 29 run C: side by side, with steps timed as a training loop sees them (to the
# loss on the host; work carried into the next step counts there): floor, compute-only,
# uvmrt.torch 8G, DeepSpeed ZeRO-2 offload, uvmrt.torch 16G
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
UVMRT_STEPS=12 UVMRT_WARMUP=6 WHEELS=$root/.whl RUN_LIMIT=575 bench/run-torch.sh $o/bench floor gpt-compute-only gpt-uvmrt-8g gpt-ds-zero2 gpt-uvmrt-16g > $o/run-torch.out 2>&1
echo "== rows rc=$? after $(since) s"
grep -h -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^summary|Error|error" $o/bench/torch.*.log | cut -c1-250
grep -h -E "^step " $o/bench/torch.gpt-uvmrt-8g.log $o/bench/torch.gpt-ds-zero2.log | cut -c1-100
gzip $o/bench/*.report.json 2>/dev/null
pack runC
