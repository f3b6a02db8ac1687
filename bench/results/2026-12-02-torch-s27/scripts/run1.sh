#!/bin/bash
# run 1 (session 27): torch's AdamW op order probe, uvmrt.torch's GPU correctness with the
# bf16 working copies, GPT-2 d48 rows at 16, 10 and 8 GiB
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
nvidia-smi --query-gpu=memory.used,memory.free --format=csv
timeout 60 python3 bench/probes/adamw_order.py --device cuda > $o/adamw-order.log 2>&1
echo "== probe rc=$?"; grep "step 3" $o/adamw-order.log | sort -k6 -n -t'%' | awk '$NF=="equal"' | grep -E "100.0000|99.9" | head -20
timeout 200 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "passed|failed|^FAILED|MiB recompute|worst|Error" $o/torch-gpu.log | head -40
BUILD=$root/b RUN_LIMIT=$(( 570 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench gpt-uvmrt-16g gpt-uvmrt-10g gpt-uvmrt-8g > $o/run-torch.out 2>&1
echo "== bench rc=$? after $(( $(date +%s) - t0 )) s"; grep -E "^\| gpt|summary|^Same run|chose|optimizer on the CPU" $o/run-torch.out $o/bench/*.log | cut -c1-400 | head -30
cd $OUT && tar czf run1.tgz w && rm -rf w
