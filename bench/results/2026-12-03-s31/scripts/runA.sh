#!/bin/bash
# session 31 run A: Llama 3.4B (26 layers, hidden 3200) B=4 T=1024 side by side: the floor,
# compute-only, uvmrt.torch at 8G, DeepSpeed ZeRO-3 offload (params + optimizer, checkpointing),
# uvmrt.torch at 16G
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
WHEELS=$root/.whl RUN_LIMIT=$((578 - $(since))) bench/run-torch.sh $o/bench floor llama-compute-only llama-uvmrt-8g llama-ds-zero3 llama-uvmrt-16g > $o/run-torch.out 2>&1
echo "== rows rc=$? after $(since) s"
grep -h -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^summary|Error|error|^uvmrt:" $o/bench/torch.*.log | cut -c1-250 | head -20
grep -h -E "^step " $o/bench/torch.*.log | cut -c1-100
gzip $o/bench/*.report.json 2>/dev/null
pack runA
