#!/bin/bash
# session 35 run F: examples/gpt/gpu-check.sh with the final kernels (the kernels and the
# model's gradients against the C reference, loss logs bitwise equal resident vs 2G and
# 1G budgets, and now resident vs 8G at B=8 T=1024 for d12 and d48), and make
# check-gpu's scenarios (tests/gpu/test_gpu)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
(cd $BUILD && timeout 420 sh $root/examples/gpt/gpu-check.sh $o/gpu-check > $o/gpu-check.out 2>&1); echo "gpu-check.sh rc=$? after $(since) s"
grep "^==" $o/gpu-check/summary.txt
(cd $BUILD && timeout 150 tests/gpu/test_gpu -j1 > $o/test_gpu.txt 2>&1); echo "test_gpu rc=$? after $(since) s"; tail -3 $o/test_gpu.txt
rm -rf $o/gpu-check/*.bin
pack runF
