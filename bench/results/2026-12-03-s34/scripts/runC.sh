#!/bin/bash
# session 34 run C: LayerNorm's backward in one pass (input gradient and the weight/bias
# gradients' partial sums together) checked (gpt-gpu-check) and timed (--kernels); each
# kernel's time in one step of uvmrt-gpt d12 and of llm.c d12 (ncu, durations only);
# then the resident rows beside llm.c + cuDNN again
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
timeout 60 $BUILD/examples/gpt/gpt-gpu-check > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"; grep -E "FAIL|PASS:" $o/gpucheck.txt | head
for s in "8 1024 768" "8 1024 1600"; do
  timeout 60 $BUILD/examples/gpt/gpt-gpu-check --kernels $s >> $o/kernels.txt 2>&1
done
grep -E "layernorm|copy" $o/kernels.txt
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
echo "ncu: $ncu after $(since) s"
if [ -n "$ncu" ]; then
  UVMRT_FAULT_STATS=0 timeout 150 $ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    $BUILD/examples/gpt/uvmrt-gpt --backend cuda --depth 12 --batch 8 --seq 1024 --steps 3 --policy none \
    --cpu-layers 0 --recompute none -q > $o/ncu-uvmrt-d12.csv 2> $o/ncu-uvmrt-d12.err; echo "ncu uvmrt rc=$? after $(since) s"
  mkdir -p $o/llmc && cp $BUILD/llmc_train_gpt2cu $o/llmc/train_gpt2cu
  python3 - $o/llmc/tokens.bin 200000 <<'PY'
import random, struct, sys
n = int(sys.argv[2]); rng = random.Random(1234)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack(f"<{n}H", *(rng.randrange(50257) for _ in range(n))))
PY
  (cd $o/llmc && timeout 150 $ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
    ./train_gpt2cu -e d12 -i tokens.bin -j tokens.bin -b 8 -t 1024 -x 3 -v 100000 -s 100000 -m 1 -g 1 -h 0 -n 0 \
    > $o/ncu-llmc-d12.csv 2> $o/ncu-llmc-d12.err); echo "ncu llmc rc=$? after $(since) s"
  rm -rf $o/llmc
  ls -la $o/*.csv; tail -3 $o/ncu-uvmrt-d12.err
fi
mkdir -p $o/gpt
for r in d12-llmc-cudnn d12-resident d48-llmc-cudnn d48-resident; do
  [ $(since) -gt 500 ] && break
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=10 timeout 120 bench/run-gpt.sh $o/gpt $r > $o/gpt/$r.out 2>&1; echo "$r rc=$? after $(since) s"
done
cat $o/gpt/table.md 2>/dev/null | grep -E "^\| d"
rm -rf $o/gpt/llmc
gzip $o/*/*.report.json $o/*.csv 2>/dev/null
pack runC
