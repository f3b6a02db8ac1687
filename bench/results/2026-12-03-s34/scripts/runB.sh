#!/bin/bash
# session 34 run B: what bounds uvmrt-gpt's resident step with cuDNN's attention
# (gpt-gpu-check --bench, and --kernels: each memory-bound kernel against its least
# bytes at the HBM rate of a device copy); llm.c + cuDNN d12 and d48 (prebuilt, .peers
# carried); d48 at 8 GiB (auto) with cuDNN's attention and with mma
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
for s in "8 1024 768 12" "8 1024 1600 48"; do
  timeout 60 $BUILD/examples/gpt/gpt-gpu-check --bench $s >> $o/bench.txt 2>&1
done
for s in "8 1024 768" "8 1024 1600"; do
  timeout 60 $BUILD/examples/gpt/gpt-gpu-check --kernels $s >> $o/kernels.txt 2>&1
done
cat $o/bench.txt $o/kernels.txt
echo "== llm.c after $(since) s"
mkdir -p $o/cudnn $o/mma
for r in d12-llmc-cudnn d48-llmc-cudnn; do
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 150 bench/run-gpt.sh $o/cudnn $r > $o/cudnn/$r.out 2>&1; echo "$r rc=$? after $(since) s"
done
tail -5 $o/cudnn/d12-llmc-cudnn.out
cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/cudnn/profile.json
cp bench/results/2026-12-03-s32/runA/tier/profile.json $o/mma/profile.json
lim=$((560 - $(since))); [ $lim -gt 100 ] && { timeout $((lim / 2)) bench/run-gpt.sh $o/cudnn d48-prefetch-8g-auto > $o/cudnn/d48-8g.out 2>&1; echo "cudnn 8g rc=$? after $(since) s"; }
lim=$((560 - $(since))); [ $lim -gt 60 ] && { GPT_ARGS="--attention mma" timeout $lim bench/run-gpt.sh $o/mma d48-prefetch-8g-auto > $o/mma/d48-8g.out 2>&1; echo "mma 8g rc=$? after $(since) s"; }
for d in cudnn mma; do echo "== $d"; cat $o/$d/table.md 2>/dev/null | grep -E "^\|" | head -12; done
rm -rf $o/cudnn/llmc $o/*/profile.json
gzip $o/*/*.report.json 2>/dev/null
pack runB
