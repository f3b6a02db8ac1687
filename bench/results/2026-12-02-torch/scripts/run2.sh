#!/bin/bash
# run 2: uvmrt.torch's correctness on the GPU (tests/gpu/test_torch_gpu.py), then GPT-2 d48 under
# uvmrt.torch at 8 and 16 GiB and the machine's floor figures (bench/run-torch.sh)
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 230 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|budget|worst" $o/torch-gpu.log | head -40
BUILD=$root/b RUN_LIMIT=$(( 585 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench floor gpt-uvmrt-8g gpt-uvmrt-16g > $o/run-torch.out 2>&1
echo "== bench rc=$? after $(( $(date +%s) - t0 )) s"; tail -30 $o/run-torch.out
cd $OUT && tar czf run2.tgz w && rm -rf w
