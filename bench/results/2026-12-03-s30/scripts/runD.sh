#!/bin/bash
# session 30 run D (inline, warm): make check-gpu's program, tests/gpu/test_gpu, whole
. bench/device-env.sh
cd $BUILD && UVMRT_DEMO=$BUILD/examples/demo/uvmrt-demo UVMRT_MLP=$BUILD/examples/mlp/uvmrt-mlp \
    timeout 190 sh $root/tests/criterion-tap.sh tests/gpu/test_gpu > $o/test_gpu.tap 2> $o/test_gpu.log
echo "== check-gpu rc=$? $(since)"; grep -c "^ok" $o/test_gpu.tap; grep "^not ok" $o/test_gpu.tap; tail -1 $o/test_gpu.tap
cd $root; pack runD
