#!/bin/bash
# session 34 run B: the one-pass LayerNorm, 16-byte column sums, residual and
# cross-entropy kernels, and the forward matmuls' bias/GELU/residual in cuBLASLt's
# epilogues, checked against the C reference (gpu-check.sh, as far as 200 s go); what bounds the
# resident step (--bench, --kernels: each memory-bound kernel against its least bytes at
# a device copy's rate); llm.c + cuDNN d12 and d48 (prebuilt, .peers carried) beside
# uvmrt-gpt resident with cuDNN's attention; then d48 at 8 GiB (auto)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
(cd $BUILD && timeout 200 sh $root/examples/gpt/gpu-check.sh $o/gpucheck > $o/gpucheck.out 2>&1); echo "gpu-check.sh rc=$? after $(since) s"
cat $o/gpucheck/summary.txt | grep -v "^ok" | head -40; grep -h "FAIL" $o/gpucheck/*.txt | head
for s in "8 1024 768 12" "8 1024 1600 48"; do
  timeout 60 $BUILD/examples/gpt/gpt-gpu-check --bench $s >> $o/bench.txt 2>&1
done
for s in "8 1024 768" "8 1024 1600"; do
  timeout 60 $BUILD/examples/gpt/gpt-gpu-check --kernels $s >> $o/kernels.txt 2>&1
done
cat $o/bench.txt $o/kernels.txt
echo "== rows after $(since) s"
mkdir -p $o/gpt
for r in d12-llmc-cudnn d12-resident d48-llmc-cudnn d48-resident; do
  [ $(since) -gt 470 ] && break
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 150 bench/run-gpt.sh $o/gpt $r > $o/gpt/$r.out 2>&1; echo "$r rc=$? after $(since) s"
done
grep -h "step\b\|ms/step\|error" $o/gpt/d12-llmc-cudnn.out | tail -3
cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/gpt/profile.json
mkdir -p $o/plain
lim=$((570 - $(since))); [ $lim -gt 40 ] && { UVMRT_GPT_PLAIN_EPILOGUES=1 timeout $lim bench/run-gpt.sh $o/plain d48-resident > $o/plain/d48.out 2>&1; echo "plain d48 rc=$? after $(since) s"; }
cat $o/plain/table.md 2>/dev/null | grep -E "^\| d48"
cat $o/gpt/table.md 2>/dev/null | grep -E "^\|" | head -14
rm -rf $o/gpt/llmc $o/gpt/profile.json
gzip $o/*/*.report.json 2>/dev/null
pack runB
