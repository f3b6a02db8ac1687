#!/bin/bash
# run 4: uvmrt.torch's correctness again (the recorded step's measurement now starts from an empty
# torch cache), then GPT-2 d48 B=8 T=1024: uvmrt.torch at 16 GiB, the compute-only step, the floor figures
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 150 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|budget .* MiB|worst" $o/torch-gpu.log | head -30
BUILD=$root/b RUN_LIMIT=$(( 560 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-16g gpt-compute-only floor > $o/run-torch.out 2>&1
echo "== bench rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "^\| gpt|summary|^Same run" $o/run-torch.out | cut -c1-500
cd $OUT && tar czf run4.tgz w && rm -rf w
