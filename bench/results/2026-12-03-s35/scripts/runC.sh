#!/bin/bash
# session 35 run C: each kernel's time in one d12 step of uvmrt-gpt and of llm.c + cuDNN
# (ncu, durations only, clocks not locked), for what is left of the d12 gap; and the
# kernels' sum against the step's wall time (nsys, where the machine has it)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null)
echo "ncu: $ncu nsys: $nsys"
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
if [ -n "$nsys" ]; then
  UVMRT_FAULT_STATS=0 timeout 100 $nsys profile -t cuda -o $o/uvmrt-d12 --force-overwrite true \
    $BUILD/examples/gpt/uvmrt-gpt --backend cuda --depth 12 --batch 8 --seq 1024 --steps 8 --policy none \
    --cpu-layers 0 --recompute none -q > $o/nsys-uvmrt.log 2>&1; echo "nsys rc=$? after $(since) s"
  timeout 60 $nsys stats -r cuda_gpu_trace -f csv -o $o/uvmrt-d12 $o/uvmrt-d12.nsys-rep > /dev/null 2>&1
  (cd $o/llmc && timeout 100 $nsys profile -t cuda -o $o/llmc-d12 --force-overwrite true \
    ./train_gpt2cu -e d12 -i tokens.bin -j tokens.bin -b 8 -t 1024 -x 8 -v 100000 -s 100000 -m 1 -g 1 -h 0 -n 0 \
    > $o/nsys-llmc.log 2>&1); echo "nsys llmc rc=$? after $(since) s"
  timeout 60 $nsys stats -r cuda_gpu_trace -f csv -o $o/llmc-d12 $o/llmc-d12.nsys-rep > /dev/null 2>&1
  rm -f $o/*.nsys-rep $o/*.sqlite
  ls -la $o
fi
rm -rf $o/llmc
gzip $o/*.csv 2>/dev/null
pack runC
