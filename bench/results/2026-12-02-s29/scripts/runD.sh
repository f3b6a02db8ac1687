#!/bin/bash
# session 29 run D: the GPU tests after the link's updates moved into the next step:
# tests/gpu/test_torch_gpu.py (make check-gpu-torch) and tests/gpu/test_gpu (make check-gpu)
set -uo pipefail
root=$PWD
. bench/device-env.sh
timeout 330 python -m pytest -q -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== check-gpu-torch rc=$? after $(since) s"
tail -4 $o/torch-gpu.log; grep -E "^FAILED|^ERROR|Error" $o/torch-gpu.log | head
cd $BUILD && UVMRT_DEMO=$BUILD/examples/demo/uvmrt-demo UVMRT_MLP=$BUILD/examples/mlp/uvmrt-mlp \
    timeout $((570 - $(since))) sh $root/tests/criterion-tap.sh tests/gpu/test_gpu > $o/test_gpu.tap 2> $o/test_gpu.log
echo "== check-gpu rc=$? after $(since) s"
cd $root
grep -c "^ok" $o/test_gpu.tap; grep "^not ok" $o/test_gpu.tap; tail -2 $o/test_gpu.tap
pack runD
