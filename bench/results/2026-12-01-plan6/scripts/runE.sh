#!/bin/bash
# run E: the default profile (auto) on the GPU, and make check-gpu with its two new tests
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o
t0=$(date +%s)
g=$root/bx/examples/gpt/uvmrt-gpt
timeout 90 $g --depth 48 --policy none --steps 4 --log-level info --result-json $o/d48-none-default.json > $o/d48-none-default.log 2>&1
echo "d48 policy none, default profile: rc=$? after $(( $(date +%s) - t0 )) s"; grep -E 'UVMRT_PROFILE|^auto|^summary' $o/d48-none-default.log | cut -c1-230
timeout 120 $g --depth 48 --budget 8G --steps 10 --result-json $o/d48-8g-default.json > $o/d48-8g-default.log 2>&1
echo "d48 8G, default profile: rc=$? after $(( $(date +%s) - t0 )) s"; grep -E '^auto|^summary' $o/d48-8g-default.log | cut -c1-230
UVMRT_DEMO=$root/bx/examples/demo/uvmrt-demo timeout 250 sh tests/criterion-tap.sh bx/tests/gpu/test_gpu -j1 > $o/check-gpu.tap 2> $o/check-gpu.log
echo "check-gpu rc=$? after $(( $(date +%s) - t0 )) s: $(grep -c '^ok' $o/check-gpu.tap) ok of $(grep -c '^\(not \)\?ok' $o/check-gpu.tap)"; grep -E '^not ok|profile_auto|gpt_resident' $o/check-gpu.tap | cut -c1-200
cd $OUT && tar czf runE.tgz w && rm -rf w
