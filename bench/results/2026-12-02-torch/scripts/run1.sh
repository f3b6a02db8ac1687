#!/bin/bash
# run 1: uvmrt.torch on the GPU (smoke, tests/gpu/test_torch_gpu.py), make check-gpu's C tests and
# examples/gpt/gpu-check.sh (the library's CPU AdamW against the GPU kernels)
set -uo pipefail
root=$PWD
export LD_LIBRARY_PATH=$root/b/src/.libs:$root/.ldlibs
export UVMRT_LIBRARY=$root/b/src/.libs/libuvmrt.so PYTHONPATH=$root/python PYTHONUNBUFFERED=1
o=$OUT/w; mkdir -p $o
t0=$(date +%s)
{ nvidia-smi --query-gpu=name,memory.used,memory.total,memory.free --format=csv; nproc; free -g | head -2
  python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"; } 2>&1 | tee $o/machine.txt
python3 -m uvmrt.torch --check 2>&1 | tee $o/check.txt
timeout 150 python3 - <<'PY' 2>&1 | tee $o/smoke.log
import time, torch, transformers, uvmrt.torch as ut
torch.manual_seed(0)
cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, use_cache=False)
m = transformers.GPT2LMHeadModel(cfg)
m, opt = ut.offload(m, torch.optim.AdamW, lr=3e-4, budget="1500M", max_grad_norm=1.0, verbose=True)
for i in range(8):
    x = torch.randint(0, 50257, (4, 512), device="cuda")
    t = time.time()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(input_ids=x, labels=x).loss
    loss.backward(); opt.step(); opt.zero_grad()
    torch.cuda.synchronize()
    st = ut.step_stats(m)
    print(i, f"{loss.item():.4f}", f"{(time.time()-t)*1e3:.1f} ms", {k: st.get(k) for k in ("step_ms", "predicted_step_ms", "gpu_faults", "fault_count", "prefetch_bytes", "evict_bytes", "remote_read_bytes", "remote_write_bytes", "cpu_layers", "recompute_layers")})
print(ut.memory_summary(m))
PY
echo "== smoke rc=$? after $(( $(date +%s) - t0 )) s"
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/gpu/test_torch_gpu.py 2>&1 | tee $o/torch-gpu.log | grep -v "^uvmrt info"
echo "== torch-gpu rc=$? after $(( $(date +%s) - t0 )) s"
UVMRT_DEMO=$root/b/examples/demo/uvmrt-demo timeout 240 sh tests/criterion-tap.sh b/tests/gpu/test_gpu -j1 > $o/check-gpu.tap 2> $o/check-gpu.log
echo "== check-gpu rc=$? after $(( $(date +%s) - t0 )) s"; grep -c '^ok' $o/check-gpu.tap; grep '^not ok' $o/check-gpu.tap
(cd b && timeout 120 bash ../examples/gpt/gpu-check.sh $o/gpucheck) > $o/gpu-check.log 2>&1
echo "== gpu-check rc=$? after $(( $(date +%s) - t0 )) s"; tail -5 $o/gpu-check.log
cd $OUT && tar czf run1.tgz w && rm -rf w
