#!/bin/bash
# session 29 run F: the host-homed gradients written by a kernel instead of cudaMemcpyAsync
# (the probe first, with that variant), then GPT-2 d48 at 8G; the link's bitwise test
set -uo pipefail
root=$PWD
. bench/device-env.sh
timeout 60 python bench/probes/copy_contention.py > $o/copy_contention3.txt 2>&1; head -6 $o/copy_contention3.txt
UVMRT_STEPS=10 UVMRT_WARMUP=5 RUN_LIMIT=160 bench/run-torch.sh $o/bench gpt-uvmrt-8g > $o/run-torch.out 2>&1
echo "== 8g rc=$? after $(since) s"
grep -E "^step|^summary|Error" $o/bench/torch.gpt-uvmrt-8g.log | cut -c1-200
timeout 90 python -m pytest -q -p no:cacheprovider tests/gpu/test_torch_gpu.py -k "link_updates_bitwise or cpu_adamw" > $o/torch-gpu.log 2>&1
echo "== tests rc=$? after $(since) s"; tail -2 $o/torch-gpu.log
gzip $o/bench/*.report.json 2>/dev/null
pack runF
