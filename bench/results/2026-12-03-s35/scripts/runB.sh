#!/bin/bash
# session 35 run B: the classifier's chunk by the shape (8192 rows at d12, 2048 at d48),
# cross-entropy a block a row with its second pass from the row's end, LayerNorm's
# backward writing the bf16 copy of the residual gradient (no conversion pass): checked
# (gpt-gpu-check), timed alone (--kernels) and in d12 and d48 resident steps beside
# llm.c + cuDNN in the same call (d12 twice each, alternating), and d48 at 8 GiB
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
g=$BUILD/examples/gpt/gpt-gpu-check
timeout 60 $g > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"; grep -hE "FAIL|bf16 copy" $o/gpucheck.txt | head
timeout 30 $g --kernels 8 1024 768 > $o/kernels-d12.txt 2>&1
timeout 30 $g --kernels 8 1024 1600 > $o/kernels-d48.txt 2>&1
grep -hE "layernorm backward|cross-entropy" $o/kernels-d*.txt
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env "$@" CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 150 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s: $(grep -h "^| d" $o/$d/table.md | tail -1)"
}
run a d12-llmc-cudnn
run a d12-resident
run b d12-llmc-cudnn
run b d12-resident
run a d48-llmc-cudnn
run a d48-resident
run c d48-prefetch-8g-auto
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runB
