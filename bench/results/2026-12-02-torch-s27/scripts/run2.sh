#!/bin/bash
# run 2 (session 27): GPT-2 d48 B=8 T=1024 side by side in one call: floor, compute-only,
# uvmrt.torch 16G (with the allocator's peak by site) and 10G, DeepSpeed ZeRO-2; every row with
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
BUILD=$root/b RUN_LIMIT=200 TRAIN_ARGS=--memory-sites bench/run-torch.sh $o/bench gpt-uvmrt-16g gpt-uvmrt-10g > $o/run-torch-a.out 2>&1
echo "== uvmrt rows rc=$? after $(( $(date +%s) - t0 )) s"
BUILD=$root/b RUN_LIMIT=$(( 530 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench floor gpt-compute-only gpt-ds-zero2 > $o/run-torch-b.out 2>&1
echo "== other rows rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "^\| |^Same run" $o/bench/table.md | cut -c1-420
grep -h -E "optimizer on the CPU|memory peak|^  +[0-9.]+ GiB in" $o/bench/torch.*.log | cut -c1-200 | head -40
cd $OUT && tar czf run2.tgz w && rm -rf w
