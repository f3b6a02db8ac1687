#!/bin/bash
# session 28 run 4: the fault tests again (reviews that cannot swap back); then the peers of
# the same run: floor, compute-only, DeepSpeed ZeRO-2 (the uvmrt rows are run 3's, same session)
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/.devb/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/.devb/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o/bench
t0=$(date +%s)
timeout 100 python -m pytest -q -p no:cacheprovider -s tests/gpu/test_torch_gpu.py -k "faults" > $o/torch-gpu.log 2>&1; echo "== torch gpu rc=$? after $(( $(date +%s) - t0 )) s"
grep -E "passed|failed|Error|assert|fault_count" $o/torch-gpu.log | head -20
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
BUILD=$root/.devb RUN_LIMIT=$(( 560 - ($(date +%s) - t0) )) bench/run-torch.sh $o/bench floor gpt-compute-only gpt-ds-zero2 > $o/run-torch-b.out 2>&1
echo "== peer rows rc=$? after $(( $(date +%s) - t0 )) s"
grep -h -E "^\| gpt|^Same run" $o/bench/table.md | cut -c1-260
grep -h -E "^step|summary|Error|error" $o/bench/torch.*.log | cut -c1-200 | head -30
cd $OUT && tar czf run4.tgz w && rm -rf w
