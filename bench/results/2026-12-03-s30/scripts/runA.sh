#!/bin/bash
# session 30 run A: the page-locked (UVMRT_PLACE_PINNED) path on a GPU for the first time:
# the contention probe's new variants (kernels writing pinned memory through its device
# view, kernels reading managed or pinned memory), the binding's GPU tests, the library's
# pinned AdamW test, and one traced 8G step of GPT-2 d48 with the CPU/link state pinned
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
timeout 90 python bench/probes/copy_contention.py > $o/copy_contention.txt 2>&1
echo "== probe rc=$? after $(since) s"; tail -25 $o/copy_contention.txt
cd $BUILD && timeout 120 sh $root/tests/criterion-tap.sh tests/gpu/test_gpu --filter 'gpu/adamw*' > $o/test_gpu_adamw.tap 2> $o/test_gpu_adamw.log
echo "== test_gpu adamw rc=$? after $(since) s"; cd $root; cat $o/test_gpu_adamw.tap | tail -8
UVMRT_STEPS=8 UVMRT_WARMUP=4 TRACE=1 RUN_LIMIT=$((330 - $(since))) bench/run-torch.sh $o/bench gpt-uvmrt-8g > $o/run-torch.out 2>&1
echo "== 8g rc=$? after $(since) s"
grep -h -E "^\| " $o/bench/table.md | cut -c1-300
grep -h -E "^summary|Error|error|notice|uvmrt:" $o/bench/torch.*.log | cut -c1-250 | head -20
grep -h -E "^step " $o/bench/torch.gpt-uvmrt-8g.log | cut -c1-100
ls $o/bench
for f in $o/bench/trace.*.json.gz; do [ -f "$f" ] && python bench/trace_gaps.py "$f" > $o/trace_gaps.txt 2>&1; done; head -60 $o/trace_gaps.txt 2>/dev/null
timeout $((585 - $(since))) python -m pytest -x -q -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== check-gpu-torch rc=$? after $(since) s"
tail -4 $o/torch-gpu.log; grep -E "^FAILED|^ERROR|Error" $o/torch-gpu.log | head
rm -f $o/bench/trace.*.json.gz
gzip $o/bench/*.report.json 2>/dev/null
pack runA
