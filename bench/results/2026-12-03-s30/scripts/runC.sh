#!/bin/bash
# session 30 run C (run inline, warm after run B): the library's AdamW GPU tests, the
# binding's GPU tests, and PyTorch resident for the 16G target's ratio
. bench/device-env.sh
cd $BUILD && timeout 60 sh $root/tests/criterion-tap.sh tests/gpu/test_gpu --filter 'gpu/adamw*' > $o/test_gpu_adamw.tap 2>$o/test_gpu_adamw.log
echo "== adamw rc=$? $(since)"; tail -9 $o/test_gpu_adamw.tap; cd $root
timeout 300 python -m pytest -q -p no:cacheprovider tests/gpu/test_torch_gpu.py > $o/torch-gpu.log 2>&1
echo "== torch-gpu rc=$? $(since)"; tail -3 $o/torch-gpu.log; grep -E "^FAILED|^ERROR" $o/torch-gpu.log | head
RUN_LIMIT=$((520 - $(since))) bench/run-torch.sh $o/bench gpt-resident > $o/run-torch.out 2>&1
echo "== resident rc=$? $(since)"; grep -h "^summary" $o/bench/torch.*.log
pack runC
