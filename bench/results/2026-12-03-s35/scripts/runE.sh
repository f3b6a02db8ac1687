#!/bin/bash
# session 35 run E: the final kernels and step (classifier chunks by shape, cross-entropy
# second pass from the row's end, LayerNorm's backward writing the gradient's bf16 copy,
# the token index made during the forward, CUPTI flushed only after collecting steps):
# gpt-gpu-check; d12 and d48 resident (10 steps) beside llm.c + cuDNN in the same call,
# d12 twice, alternating; d48 at 8 GiB; uvmrt-gpt against transformers' GPT-2 at d12
# B=16 T=1024 (two classifier chunks of 8192 rows), 20 steps (bench/gpt_compare.py)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
g=$BUILD/examples/gpt/gpt-gpu-check
timeout 60 $g > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$? ($(grep -c '^ok' $o/gpucheck.txt) ok, $(grep -c FAIL $o/gpucheck.txt) FAIL)"
timeout 30 $g --kernels 8 1024 768 > $o/kernels-d12.txt 2>&1
timeout 30 $g --kernels 8 1024 1600 > $o/kernels-d48.txt 2>&1
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env "$@" STEPS=10 CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 150 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s"
  [ -f $o/$d/gpt.$r.json ] && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  runtime', round(j['ms_per_step_median'],2), 'wall', j.get('wall_ms_per_step_median'), 'steps', [round(x,2) for x in j['step_ms']])" $o/$d/gpt.$r.json
}
run a d12-llmc-cudnn
run a d12-resident
run b d12-llmc-cudnn
run b d12-resident
run a d48-llmc-cudnn
run a d48-resident
STEPS=6 run c d48-prefetch-8g-auto
grep -h "^| d" $o/a/table.md $o/b/table.md $o/c/table.md
mkdir -p $o/cmp
timeout 120 $BUILD/examples/gpt/uvmrt-gpt --depth 12 --batch 16 --seq 1024 --steps 20 --seed 1 --policy none -q \
  --dump-weights $o/cmp/w.bin --dump-grads $o/cmp/g.bin --loss-log $o/cmp/loss.txt --result-json $o/cmp/r.json \
  > $o/cmp/uvmrt.txt 2>&1; echo "uvmrt d12 B16 rc=$? after $(since) s"
timeout 200 python3 bench/gpt_compare.py $o/cmp/w.bin $o/cmp/g.bin $o/cmp/loss.txt --tokens random:1 \
  --trainer-json $o/cmp/r.json --device cuda --json $o/cmp/compare.json > $o/cmp/compare.txt 2>&1
echo "gpt_compare rc=$? after $(since) s"; tail -8 $o/cmp/compare.txt
rm -f $o/cmp/*.bin
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runE
