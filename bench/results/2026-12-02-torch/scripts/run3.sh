#!/bin/bash
# run 3: uvmrt.torch's correctness (tests/gpu/test_torch_gpu.py), make check-gpu's C tests on the merged
# library (issue 21's planner changes), then GPT-2 d48: uvmrt.torch at 10 GiB beside DeepSpeed ZeRO-2
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|budget|worst|^E  " $o/torch-gpu.log | head -40
UVMRT_DEMO=$root/b/examples/demo/uvmrt-demo timeout 200 sh tests/criterion-tap.sh b/tests/gpu/test_gpu -j1 > $o/check-gpu.tap 2> $o/check-gpu.log
echo "== check-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -c '^ok' $o/check-gpu.tap; grep '^not ok' $o/check-gpu.tap
BUILD=$root/b RUN_LIMIT=$(( 580 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-10g gpt-ds-zero2 > $o/run-torch.out 2>&1
echo "== bench rc=$? after $(( $(date +%s) - t0 )) s"; tail -22 $o/run-torch.out
cd $OUT && tar czf run3.tgz w && rm -rf w
