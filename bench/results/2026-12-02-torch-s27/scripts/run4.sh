#!/bin/bash
# run 4: the torch-order CPU AdamW (reciprocal in double) bit for bit against torch on CUDA, and the
# CPU AdamW loss checks
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
mkdir -p $OUT/w
timeout 50 python3 bench/adamw_torch_bits.py > $OUT/w/adamw-bits.log 2>&1
echo "== adamw bits rc=$?"; grep -c "^OK" $OUT/w/adamw-bits.log; grep "^DIFF" $OUT/w/adamw-bits.log | head -5
timeout 80 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py -k cpu_adamw > $OUT/w/torch-gpu-adamw.log 2>&1
echo "== rc=$?"; grep -E "passed|failed|worst" $OUT/w/torch-gpu-adamw.log
