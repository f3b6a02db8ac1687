#!/bin/bash
# session 34 run E: the gradient norm's sum of squares with 16-byte loads, and
# LayerNorm's input gradient re-reading the row (UVMRT_GPT_LN_BWD=reread) beside
# keeping it in registers: checked (gpt-gpu-check, both ways), timed (--kernels), and d48
# and d12 resident both ways beside llm.c + cuDNN in the same call
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
timeout 40 $BUILD/examples/gpt/gpt-gpu-check > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"
UVMRT_GPT_LN_BWD=reread timeout 40 $BUILD/examples/gpt/gpt-gpu-check > $o/gpucheck-reread.txt 2>&1; echo "gpu-check reread rc=$?"
grep -hE "FAIL|PASS:|sum of squares" $o/gpucheck*.txt | head
timeout 30 $BUILD/examples/gpt/gpt-gpu-check --kernels 8 1024 1600 > $o/kernels.txt 2>&1
UVMRT_GPT_LN_BWD=reread timeout 30 $BUILD/examples/gpt/gpt-gpu-check --kernels 8 1024 1600 > $o/kernels-reread.txt 2>&1
grep -h "layernorm back" $o/kernels*.txt
mkdir -p $o/gpt $o/reread
for r in d48-llmc-cudnn d48-resident d12-llmc-cudnn d12-resident; do
  [ $(since) -gt 150 ] && break
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 60 bench/run-gpt.sh $o/gpt $r > $o/gpt/$r.out 2>&1; echo "$r rc=$? after $(since) s"
  case $r in *resident) [ $(since) -gt 160 ] || { UVMRT_GPT_LN_BWD=reread timeout 40 bench/run-gpt.sh $o/reread $r > $o/reread/$r.out 2>&1; echo "reread $r rc=$? after $(since) s"; } ;; esac
done
grep -h "^| d" $o/gpt/table.md $o/reread/table.md 2>/dev/null
rm -rf $o/gpt/llmc
gzip $o/*/*.report.json 2>/dev/null
pack runE
