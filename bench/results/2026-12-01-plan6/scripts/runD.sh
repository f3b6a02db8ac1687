#!/bin/bash
# run D: the GPT kernels checked, d48 rows with the declared bytes, make check-gpu (final build)
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o/gpt $o/gpucheck
t0=$(date +%s)
cp $root/.dev/profile.json $root/.dev/link.json $o/gpt/
(cd bx && timeout 230 bash ../examples/gpt/gpu-check.sh $o/gpucheck > $o/gpucheck.log 2>&1); echo "gpu-check rc=$? after $(( $(date +%s) - t0 )) s"
grep -E 'PASS|FAIL|DIFF|^== d|summary' $o/gpucheck/summary.txt | cut -c1-200
BUILD=$root/bx AUTO_STEPS=12 timeout 200 bench/run-gpt.sh $o/gpt d48-resident d48-prefetch-8g-auto d48-prefetch-16g-auto d48-prefetch-96g-gpu-none > $o/gpt.log 2>&1
echo "gpt rc=$? after $(( $(date +%s) - t0 )) s"
grep -E '^auto|^summary' $o/gpt.log | cut -c1-220
sed -n '/uvmrt row/,$p' $o/gpt/table.md
timeout 60 ncu --clock-control none --csv --metrics gpu__time_duration.sum --target-processes all bx/examples/gpt/uvmrt-gpt --layers 2 --channels 1600 --heads 25 --batch 8 --seq 1024 --policy none --steps 2 --cpu-layers 0 --recompute none -q > $o/ncu-d48-2-none.csv 2>/dev/null; echo "ncu rc=$?"
UVMRT_DEMO=$root/bx/examples/demo/uvmrt-demo timeout 170 sh tests/criterion-tap.sh bx/tests/gpu/test_gpu -j1 > $o/check-gpu.tap 2> $o/check-gpu.log
echo "check-gpu rc=$? after $(( $(date +%s) - t0 )) s: $(grep -c '^ok' $o/check-gpu.tap) ok"; grep '^not ok' $o/check-gpu.tap
cd $OUT && tar czf runD.tgz w && rm -rf w
