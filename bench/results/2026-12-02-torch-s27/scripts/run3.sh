#!/bin/bash
# run 3 (session 27): the CPU AdamW in torch's order bit for bit against torch on CUDA; uvmrt.torch's
# GPU correctness; GPT-2 d48 10G with the allocator's peak by site; Llama 3.4B at 16G
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 60 python3 bench/adamw_torch_bits.py > $o/adamw-bits.log 2>&1
echo "== adamw bits rc=$?"; tail -4 $o/adamw-bits.log
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|worst|Error" $o/torch-gpu.log | head -20
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
TRAIN_ARGS=--memory-sites BUILD=$root/b RUN_LIMIT=$(( 400 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-10g > $o/run-torch-a.out 2>&1
echo "== gpt 10g rc=$? after $(( $(date +%s) - t0 )) s"
BUILD=$root/b RUN_LIMIT=$(( 540 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench llama-uvmrt-16g > $o/run-torch-b.out 2>&1
echo "== llama rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "^\| (gpt|llama)" $o/bench/table.md | cut -c1-400
grep -h -E "optimizer on the CPU|memory peak|^  +[0-9.]+ GiB in" $o/bench/torch.*.log | cut -c1-220 | head -30
cd $OUT && tar czf run3.tgz w && rm -rf w
