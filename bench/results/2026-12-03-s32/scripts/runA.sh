#!/bin/bash
# session 32 run A: the machine (disk free), make check-gpu (test_gpu: the disk tier's
# host pages given back), examples/gpt/gpu-check.sh (the page-locked CPU layers), then
# bench/run-tier.sh calibrate (link, host memory, disk into the profile) and d48 at 8G
# (the CPU AdamW's rate in the step against the profile's; uvmrt-gpt's start time)
set -uo pipefail
root=$PWD
. bench/device-env.sh
{ nvidia-smi --query-gpu=name,memory.used,memory.free --format=csv; df -PB1 / "$root" /tmp; free -g; nproc
  lscpu | grep -E "Model name|NUMA|Socket"; } > $o/machine.txt 2>&1
cat $o/machine.txt
(cd $BUILD && UVMRT_DEMO=$BUILD/examples/demo/uvmrt-demo UVMRT_MLP=$BUILD/examples/mlp/uvmrt-mlp \
    timeout 150 sh $root/tests/criterion-tap.sh tests/gpu/test_gpu > $o/test_gpu.tap 2> $o/test_gpu.log)
echo "== check-gpu rc=$? after $(since) s"
grep -c "^ok" $o/test_gpu.tap; grep "^not ok" $o/test_gpu.tap; grep disk_tier $o/test_gpu.tap; tail -2 $o/test_gpu.tap
(cd $BUILD && timeout 230 sh examples/gpt/gpu-check.sh $o/gpt-check > $o/gpt-check.out 2>&1; echo "== gpu-check rc=$? after $(since) s")
grep "^==" $o/gpt-check/summary.txt | tail -30
lim=$((575 - $(since))); [ $lim -gt 30 ] || lim=30
SPILL=$root/spill-a timeout $lim bench/run-tier.sh $o/tier calibrate d48 > $o/run-tier.out 2>&1
echo "== run-tier rc=$? after $(since) s"
cat $o/tier/run-tier.log; grep -E "disk|adamw|AdamW|host" $o/tier/calibrate.log | head; cat $o/tier/table.md
grep -E "^(uvmrt-gpt|start|init|step +[0-9]+ )" $o/tier/d48.log | head -5
rm -rf $root/spill-a
gzip $o/tier/*.report.json 2>/dev/null
pack runA
