#!/bin/bash
# session 28 run 2: the binding's GPU tests for the new paths; GPT-2 d48 at 8G and 16G (auto),
# and at 8G with every layer's state in host memory updated by the GPU over the link
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.devb/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/.devb/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench $o/bench-link
t0=$(date +%s)
timeout 150 python -m pytest -q -p no:cacheprovider -s tests/gpu/test_torch_gpu.py -k "link or offloaded" > $o/torch-gpu-new.log 2>&1; echo "== torch gpu new rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "passed|failed|Error|offload_inputs=|assert" $o/torch-gpu-new.log | head -20
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
UVMRT_STEPS=12 UVMRT_WARMUP=6 BUILD=$root/.devb RUN_LIMIT=$(( 400 - ($(date +%s) - t0) )) TRAIN_ARGS=--memory-sites bench/run-torch.sh $o/bench gpt-uvmrt-8g gpt-uvmrt-16g > $o/run-torch-a.out 2>&1
echo "== uvmrt rows rc=$? after $(( $(date +%s) - t0 )) s"
UVMRT_STEPS=10 UVMRT_WARMUP=5 BUILD=$root/.devb RUN_LIMIT=$(( 570 - ($(date +%s) - t0) )) TRAIN_ARGS="--uvmrt-opt cpu_optimizer=true --uvmrt-opt link_optimizer=true" bench/run-torch.sh $o/bench-link gpt-uvmrt-8g > $o/run-torch-b.out 2>&1
echo "== all-link row rc=$? after $(( $(date +%s) - t0 )) s"
grep -h -E "^\| gpt" $o/bench/table.md $o/bench-link/table.md | cut -c1-260
grep -h -E "^uvmrt|^step|summary|Error|error|memory peak|^  +[0-9.]+ GiB in" $o/bench/torch.*.log $o/bench-link/torch.*.log | cut -c1-250 | head -80
cd $OUT && tar czf run2.tgz w && rm -rf w
