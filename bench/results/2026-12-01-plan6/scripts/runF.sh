#!/bin/bash
# run F: d48 at 8 GiB with the default profile (auto: the built-in h200, AdamW 4.6) after 1096291
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.ldlibs
o=$OUT/w; mkdir -p $o
UVMRT_RECORD=$o/rec.d48-8g-default.json timeout 150 $root/bx/examples/gpt/uvmrt-gpt --depth 48 --budget 8G --steps 12 --result-json $o/d48-8g-default.json > $o/d48-8g-default.log 2>&1
echo "rc=$?"; grep -E '^auto|^summary|cpu optimizer' $o/d48-8g-default.log | cut -c1-230
cd $OUT && tar czf runF.tgz w && rm -rf w
