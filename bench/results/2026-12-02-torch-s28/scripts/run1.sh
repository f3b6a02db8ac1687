#!/bin/bash
# session 28 run 1: the new GPU AdamW over the link and the offloaded checkpoint inputs:
# C bitwise tests, the binding's GPU tests for both, then GPT-2 d48 at 8G and 16G
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.devb/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/.devb/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
nvidia-smi --query-gpu=memory.used,memory.free --format=csv
.devb/tests/gpu/test_gpu --filter 'gpu/adamw*' --verbose > $o/test_gpu_adamw.log 2>&1; echo "== test_gpu adamw rc=$?"
tail -3 $o/test_gpu_adamw.log
timeout 200 python -m pytest -q -p no:cacheprovider -s tests/gpu/test_torch_gpu.py -k "link or offloaded" > $o/torch-gpu-new.log 2>&1; echo "== torch gpu new rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "passed|failed|Error|offload_inputs=|assert" $o/torch-gpu-new.log | head -20
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
UVMRT_STEPS=12 UVMRT_WARMUP=6 BUILD=$root/.devb RUN_LIMIT=$(( 560 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-8g gpt-uvmrt-16g > $o/run-torch-a.out 2>&1
echo "== uvmrt rows rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^uvmrt|^step|summary|Error|error" $o/bench/torch.*.log | cut -c1-250 | head -50
cd $OUT && tar czf run1.tgz w && rm -rf w
