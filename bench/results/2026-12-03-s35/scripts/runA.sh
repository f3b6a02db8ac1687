#!/bin/bash
# session 35 run A: session 34's last refactors checked on the GPU (gpt-gpu-check, --attn);
# the cross-entropy kernel on a grid of K blocks an SM (K = 0: a block a row) and the
# classifier's chunk rows (2048, 4096, 8192) timed alone (--kernels, --bench) and in d12
# and d48 resident steps beside llm.c + cuDNN in the same call
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv > $o/gpu.txt 2>&1
g=$BUILD/examples/gpt/gpt-gpu-check
timeout 60 $g > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"
timeout 60 $g --attn > $o/attn.txt 2>&1; echo "attn rc=$?"
grep -hcE "FAIL" $o/gpucheck.txt $o/attn.txt
for k in 0 2 3 4; do
  UVMRT_GPT_CE_BLOCKS_PER_SM=$k timeout 30 $g --kernels 8 1024 768 > $o/kernels-ce$k.txt 2>&1
  echo "ce$k: $(grep -h 'cross-entropy' $o/kernels-ce$k.txt)"
done
for r in 2048 4096 8192; do
  UVMRT_GPT_CHUNK_ROWS=$r timeout 30 $g --bench 8 1024 768 12 > $o/bench-d12-r$r.txt 2>&1
  UVMRT_GPT_CHUNK_ROWS=$r timeout 30 $g --bench 8 1024 1600 48 > $o/bench-d48-r$r.txt 2>&1
  echo "rows $r: $(grep -h 'classifier chunk' $o/bench-d12-r$r.txt) | $(grep -h 'classifier chunk' $o/bench-d48-r$r.txt)"
done
echo "checks done after $(since) s"
run() { # run DIR ROW [ENV...]
  local d=$1 r=$2; shift 2; mkdir -p $o/$d
  env "$@" CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 90 bench/run-gpt.sh $o/$d $r > $o/$d/$r.out 2>&1
  echo "$d $r rc=$? after $(since) s: $(grep -h "^| d" $o/$d/table.md | tail -1)"
}
run llmc1 d12-llmc-cudnn
run r2048 d12-resident UVMRT_GPT_CHUNK_ROWS=2048 UVMRT_GPT_CE_BLOCKS_PER_SM=0
run r2048ce d12-resident UVMRT_GPT_CHUNK_ROWS=2048
run r4096 d12-resident UVMRT_GPT_CHUNK_ROWS=4096
run r8192 d12-resident UVMRT_GPT_CHUNK_ROWS=8192
run llmc2 d12-llmc-cudnn
[ $(since) -lt 330 ] && run llmc1 d48-llmc-cudnn
[ $(since) -lt 400 ] && run r2048ce d48-resident UVMRT_GPT_CHUNK_ROWS=2048
[ $(since) -lt 460 ] && run r4096 d48-resident UVMRT_GPT_CHUNK_ROWS=4096
for d in $o/*/; do rm -rf $d/llmc; done
gzip $o/*/*.report.json 2>/dev/null
pack runA
