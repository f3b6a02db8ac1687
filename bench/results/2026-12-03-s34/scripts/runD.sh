#!/bin/bash
# session 34 run D: the column sums in one launch (the last block of each column group
# sums the chunks) and the residual projections' bias in fp32 for cuBLASLt's epilogue,
# checked (gpt-gpu-check) and timed (--kernels); the resident rows beside llm.c + cuDNN;
# d48 at 8 GiB (auto); then make check-gpu's scenarios (tests/gpu/test_gpu)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
timeout 60 $BUILD/examples/gpt/gpt-gpu-check > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"; grep -E "FAIL|PASS:" $o/gpucheck.txt | head
timeout 60 $BUILD/examples/gpt/gpt-gpu-check --kernels 8 1024 768 > $o/kernels.txt 2>&1
timeout 60 $BUILD/examples/gpt/gpt-gpu-check --kernels 8 1024 1600 >> $o/kernels.txt 2>&1
grep -E "bias gradient|layernorm back" $o/kernels.txt
mkdir -p $o/gpt
for r in d12-llmc-cudnn d12-resident d48-llmc-cudnn d48-resident; do
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 120 bench/run-gpt.sh $o/gpt $r > $o/gpt/$r.out 2>&1; echo "$r rc=$? after $(since) s"
done
grep -h "attention:\|cuBLASLt" $o/gpt/gpt.d12-resident.log | head -3
cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/gpt/profile.json
lim=$((300 - $(since))); [ $lim -gt 90 ] && { timeout $lim bench/run-gpt.sh $o/gpt d48-prefetch-8g-auto > $o/gpt/d48-8g.out 2>&1; echo "8g rc=$? after $(since) s"; }
cat $o/gpt/table.md 2>/dev/null | grep -E "^\| d"
lim=$((400 - $(since))); [ $lim -gt 30 ] && { (cd $BUILD && timeout $lim ./tests/gpu/test_gpu -j1 > $o/test_gpu.txt 2>&1); echo "test_gpu rc=$? after $(since) s"; tail -5 $o/test_gpu.txt; }
rm -rf $o/gpt/llmc $o/gpt/profile.json
gzip $o/*/*.report.json 2>/dev/null
pack runD
