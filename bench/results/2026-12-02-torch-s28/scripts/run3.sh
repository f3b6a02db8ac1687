#!/bin/bash
# session 28 run 3: working copies fetched ahead and gradients copied beside the backward;
# the binding's GPU tests for the new paths, faults and the CPU AdamW; GPT-2 d48 at 8G and 16G
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.devb/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/.devb/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 210 python -m pytest -q -p no:cacheprovider -s tests/gpu/test_torch_gpu.py -k "link or offloaded or faults or cpu_adamw" > $o/torch-gpu.log 2>&1; echo "== torch gpu rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "passed|failed|Error|offload_inputs=|assert|worst|PASS|FAIL" $o/torch-gpu.log | head -20
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
UVMRT_STEPS=12 UVMRT_WARMUP=6 BUILD=$root/.devb RUN_LIMIT=$(( 560 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-8g gpt-uvmrt-16g > $o/run-torch-a.out 2>&1
echo "== uvmrt rows rc=$? after $(( $(date +%s) - t0 )) s"
grep -h -E "^\| gpt" $o/bench/table.md | cut -c1-260
grep -h -E "^uvmrt|^step|summary|Error|error" $o/bench/torch.*.log | cut -c1-250 | head -60
cd $OUT && tar czf run3.tgz w && rm -rf w
