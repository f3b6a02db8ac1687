#!/bin/bash
# session 33 run B: (1) the disk tier's cycle, step by step, on managed memory
# (bench/probes/tier_cycle.cu: discard, O_DIRECT into discarded pages, the GPU's reads,
# a DMA into them); (2) uvmrt-gpt with the tier on a small model (8 x 1600, 1G host
# budget), two steps, its report per layer and phase (run A's tier row spent 100 s in
# its first step, the sim's model 14 s); (3) issue 20: uvmrt.torch GPT-2 d48 at 8G with
# the CPU AdamW team at 8 threads and at its default (14), beside DeepSpeed ZeRO-2
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader | tee $o/gpu.txt
spill=$root/spill-b; mkdir -p $spill
timeout 60 $BUILD/tier_cycle $spill 1 2 > $o/tier_cycle.txt 2>&1; echo "== tier_cycle rc=$? after $(since) s"; cat $o/tier_cycle.txt
(cd $BUILD && timeout 110 python3 -u - $o/small.timeline ./examples/gpt/uvmrt-gpt --layers 8 --channels 1600 --batch 4 --seq 1024 \
    --budget 8G --host-budget 1G --optimizer-on cpu --recompute all --spill-dir $spill --steps 2 \
    --profile $root/bench/results/2026-12-03-s32/runA/tier/profile.json --report text:$o/small.report.txt <<'PY'
import subprocess, sys, time
t0 = time.time(); out = open(sys.argv[1], "w", buffering=1)
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
for l in p.stdout: out.write(f"{time.time() - t0:8.1f} {l}")
sys.exit(p.wait())
PY
) ; echo "== small rc=$? after $(since) s"
grep -v "UVMRT_" $o/small.timeline | head -30 | cut -c1-200
rm -rf $spill
export UVMRT_STEPS=8 UVMRT_WARMUP=4
UVMRT_TORCH_CPU_THREADS=8 RUN_LIMIT=$((330 - $(since))) bench/run-torch.sh $o/t8 floor gpt-uvmrt-8g > $o/t8.out 2>&1
echo "== t8 rc=$? after $(since) s"
RUN_LIMIT=$((575 - $(since))) WHEELS=$root/.whl bench/run-torch.sh $o/t14 gpt-uvmrt-8g gpt-ds-zero2 > $o/t14.out 2>&1
echo "== t14 rc=$? after $(since) s"
grep -h -E "^\| " $o/t8/table.md $o/t14/table.md | cut -c1-260
grep -h -E "^step |cpu|threads" $o/t8/torch.*.log $o/t14/torch.*.log 2>/dev/null | cut -c1-160 | head -30
gzip $o/*/*.report.json 2>/dev/null
pack runB
