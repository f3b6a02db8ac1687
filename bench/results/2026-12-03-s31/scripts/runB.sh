#!/bin/bash
# session 31 run B: GPT-2 d48 B=8 T=1024 side by side: compute-only, uvmrt.torch 8G,
# DeepSpeed ZeRO-2 offload, ZeRO-3 offload, FSDP2 CPU offload (all with checkpointing)
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
UVMRT_STEPS=10 UVMRT_WARMUP=5 WHEELS=$root/.whl RUN_LIMIT=$((578 - $(since))) bench/run-torch.sh $o/bench floor gpt-compute-only gpt-uvmrt-8g gpt-ds-zero2 gpt-ds-zero3 gpt-fsdp2 > $o/run-torch.out 2>&1
echo "== rows rc=$? after $(since) s"
grep -h -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^summary|Error|error|^uvmrt:" $o/bench/torch.*.log | cut -c1-250 | head -20
grep -h -E "^step " $o/bench/torch.*.log | cut -c1-100
gzip $o/bench/*.report.json 2>/dev/null
pack runB
