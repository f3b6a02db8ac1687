#!/bin/bash
# session 34 run A: cuDNN's fused attention in uvmrt-gpt (issue 23): gpt-gpu-check (the
# C reference, then --attn: cuDNN and mma against the fp32 kernels, and their times);
# the GPU's AdamW over host-homed state beside the CPU's (issue 24, bench/probes/
# remote_adamw.cu); d12 and d48 resident with --attention mma and with cuDNN, beside
# llm.c + cuDNN (built on the CPU machine: LLMC_BIN)
set -uo pipefail
root=$PWD
. bench/device-env.sh
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__) if nvidia.cudnn.__file__ else nvidia.cudnn.__path__[0])' 2>/dev/null)
[ -d "$cudnn/lib" ] || cudnn=$(python3 -c 'import nvidia.cudnn; print(nvidia.cudnn.__path__[0])')
nvrtc=$(dirname "$(find "$(dirname "$cudnn")" -name 'libnvrtc.so*' 2>/dev/null | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$cudnn/lib${nvrtc:+:$nvrtc}
ls "$cudnn/lib" | head -3; echo "nvrtc: $nvrtc"; python3 -c 'import torch; print("torch cudnn", torch.backends.cudnn.version())'
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
echo "== gpu-check after $(since) s"
timeout 120 $BUILD/examples/gpt/gpt-gpu-check > $o/gpucheck.txt 2>&1; echo "gpu-check rc=$?"; grep -E "FAIL|SKIP|cudnn|PASS:" $o/gpucheck.txt | head -30
echo "== attn after $(since) s"
timeout 150 $BUILD/examples/gpt/gpt-gpu-check --attn > $o/attn.txt 2>&1; echo "attn rc=$?"; grep -E "FAIL|SKIP|time|PASS:|failure" $o/attn.txt | head -40
echo "== remote adamw after $(since) s"
timeout 60 $BUILD/remote_adamw 64 14 > $o/remote_adamw.txt 2>&1; echo "rc=$?"; cat $o/remote_adamw.txt
echo "== rows after $(since) s"
mkdir -p $o/mma $o/cudnn
for r in d12-resident d48-resident; do
  lim=$((540 - $(since))); [ $lim -lt 60 ] && break
  GPT_ARGS="--attention mma" timeout $lim bench/run-gpt.sh $o/mma $r > $o/mma/$r.out 2>&1; echo "mma $r rc=$? after $(since) s"
  lim=$((540 - $(since))); [ $lim -lt 60 ] && break
  GPT_ARGS="--attention cudnn" timeout $lim bench/run-gpt.sh $o/cudnn $r > $o/cudnn/$r.out 2>&1; echo "cudnn $r rc=$? after $(since) s"
done
for r in d12-llmc-cudnn d48-llmc-cudnn; do
  lim=$((585 - $(since))); [ $lim -lt 40 ] && break
  CUDNN_HOME=$cudnn LLMC_BIN=$BUILD/llmc_train_gpt2cu LLMC_STEPS=8 timeout $lim bench/run-gpt.sh $o/cudnn $r > $o/cudnn/$r.out 2>&1; echo "$r rc=$? after $(since) s"
done
grep -h "attention:" $o/*/gpt.*.log | sort | uniq -c
for d in mma cudnn; do echo "== $d"; cat $o/$d/table.md 2>/dev/null | head -20; done
rm -rf $o/cudnn/llmc
pack runA
