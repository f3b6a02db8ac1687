#!/bin/bash
# run B: kernel times of a d48-shaped block (ncu) and make check-gpu
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o
t0=$(date +%s)
which ncu || ls /opt/nvidia/nsight-compute/*/ncu
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1)
for rc in none all; do
timeout 200 $NCU --clock-control none --csv --metrics gpu__time_duration.sum --target-processes all \
  b/examples/gpt/uvmrt-gpt --layers 2 --channels 1600 --heads 25 --batch 8 --seq 1024 --policy none \
  --steps 2 --cpu-layers 0 --recompute $rc -q > $o/ncu-d48-2-$rc.csv 2> $o/ncu-d48-2-$rc.err
echo "ncu $rc rc=$? after $(( $(date +%s) - t0 )) s"
done
UVMRT_DEMO=$root/b/examples/demo/uvmrt-demo timeout 300 sh tests/criterion-tap.sh b/tests/gpu/test_gpu -j1 --verbose > $o/check-gpu.tap 2> $o/check-gpu.log
echo "check-gpu rc=$? after $(( $(date +%s) - t0 )) s"
grep -c '^ok' $o/check-gpu.tap; grep '^not ok' $o/check-gpu.tap
cd $OUT && tar czf runB.tgz w && rm -rf w
