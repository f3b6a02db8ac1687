#!/bin/bash
# session 30 run B: after runA's probe showed that a kernel reading or writing host memory
# (pinned or managed) holds the compute stream's kernels 4.1x: uvmrt_adamw_gpu over host
# memory takes few blocks (UVMRT_ADAMW_LINK_BLOCKS, default 16) and the binding copies
# page-locked bf16 working copies by DMA. The probe's new AdamW section (rate and the
# chain's slowdown by block count), then GPT-2 d48 side by side: floor, compute-only,
# uvmrt.torch 8G, DeepSpeed ZeRO-2 offload, uvmrt.torch 16G
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
timeout 100 python bench/probes/copy_contention.py > $o/copy_contention.txt 2>&1
echo "== probe rc=$? after $(since) s"; grep -E "alone|link AdamW|by a kernel|pinned" $o/copy_contention.txt
UVMRT_STEPS=10 UVMRT_WARMUP=5 WHEELS=$root/.whl RUN_LIMIT=$((578 - $(since))) bench/run-torch.sh $o/bench floor gpt-compute-only gpt-uvmrt-8g gpt-ds-zero2 gpt-uvmrt-16g > $o/run-torch.out 2>&1
echo "== rows rc=$? after $(since) s"
grep -h -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^summary|Error|error|^uvmrt:" $o/bench/torch.*.log | cut -c1-250 | head -20
grep -h -E "^step " $o/bench/torch.gpt-uvmrt-8g.log $o/bench/torch.gpt-ds-zero2.log | cut -c1-100
gzip $o/bench/*.report.json 2>/dev/null
pack runB
