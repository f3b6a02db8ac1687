#!/bin/bash
# session 31 run C: uvmrt.torch 16G with unpin's prefetch (traced); uvmrt-gpt d48 8G from main
# (.devb) and from the gpt-pinned-dma branch (.dma: the CPU layers' state page-locked, the
# gradient out of gdev by DMA); the branch's gpu-check.sh
set -uo pipefail
root=$PWD
. bench/device-env.sh
nvidia-smi --query-gpu=memory.used,memory.free --format=csv | tee $o/gpu.txt
BUILD=$root/.devb bench/run-torch.sh $o/bench gpt-uvmrt-gpt-8g > $o/run-gpt-main.out 2>&1
echo "== uvmrt-gpt main rc=$? after $(since) s"
BUILD=$root/.dma bench/run-torch.sh $o/bench-dma gpt-uvmrt-gpt-8g > $o/run-gpt-dma.out 2>&1
echo "== uvmrt-gpt branch rc=$? after $(since) s"
grep -h -E "^summary|^auto|Error|error" $o/bench/torch.*.log $o/bench-dma/torch.*.log | cut -c1-250
(cd .dma && timeout $((330 - $(since))) sh examples/gpt/gpu-check.sh $o/dma-check > $o/dma-check.out 2>&1; echo "== branch gpu-check rc=$? after $(since) s")
grep "^==" $o/dma-check/summary.txt
TRACE=1 UVMRT_STEPS=10 UVMRT_WARMUP=5 RUN_LIMIT=$((578 - $(since))) bench/run-torch.sh $o/bench gpt-uvmrt-16g > $o/run-torch.out 2>&1
echo "== 16g rc=$? after $(since) s"
grep -h -E "^summary|Error|error|^uvmrt:|^step |idle" $o/bench/torch.gpt-uvmrt-16g.log | cut -c1-250 | head -30
gzip $o/bench/*.report.json 2>/dev/null
mv $o/bench/trace.*.json.gz $OUT/ 2>/dev/null
pack runC
