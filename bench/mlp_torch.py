#!/usr/bin/env python3
"""mlp_torch.py -- PyTorch's side of the trainer benchmark (bench/run-mlp.sh).

The same model and numerics as uvmrt-mlp: L blocks of Linear(H, H, bias=False) +
GELU (exact), N rows, MSE against a fixed random teacher of the same shape; fp32
master weights, bf16 autocast, fp32 AdamW (betas .9/.999, eps 1e-8, weight decay
.01). Weights U(-b, b) with b = sqrt(6/H), input U(-sqrt 3, sqrt 3), as uvmrt-mlp
(drawn with torch's generator, so the losses agree in size, not in bits).

  --mode resident   everything on the GPU
  --mode offload    PyTorch's own offload: FSDP2 fully_shard per Linear with
                    CPUOffloadPolicy(pin_memory=True) in a one-process group (NCCL,
                    world size 1), activations under
                    torch.autograd.graph.save_on_cpu(pin_memory=True); the optimizer
                    then steps on the CPU, where the parameters live

Prints one line per step and writes --json PATH: median ms/step over the steps
after the first (warm-up), TFLOP/s (6*N*H*H*L per step), peak GPU memory
(torch.cuda.max_memory_allocated), the losses.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def build(L, H, device, gen):
    b = math.sqrt(6.0 / H)
    blocks = []
    for _ in range(L):
        lin = nn.Linear(H, H, bias=False, device="meta")
        lin.to_empty(device=device)
        with torch.no_grad():
            lin.weight.uniform_(-b, b, generator=gen)
        blocks += [lin, nn.GELU()]
    return nn.Sequential(*blocks)


@torch.no_grad()
def teacher_targets(L, H, X, seed):
    """Y = teacher(X), one bf16 weight on the GPU at a time."""
    gen = torch.Generator(device="cuda").manual_seed(seed ^ 0x7EAC4E5)
    b = math.sqrt(6.0 / H)
    a = X
    for _ in range(L):
        w = torch.empty(H, H, device="cuda", dtype=torch.bfloat16).uniform_(-b, b, generator=gen)
        a = F.gelu(a @ w.t())
        del w
    return a


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", choices=("resident", "offload"), default="resident")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.steps < 2:
        ap.error("--steps: expected at least 2 (the first is warm-up)")
    if not torch.cuda.is_available():
        print("mlp_torch.py: no CUDA device", file=sys.stderr)
        return 1
    L, H, N = a.layers, a.hidden, a.rows
    torch.cuda.set_device(0)
    torch.manual_seed(a.seed)

    gen_x = torch.Generator(device="cuda").manual_seed(a.seed)
    X = (torch.rand(N, H, device="cuda", generator=gen_x) * 2 - 1) * math.sqrt(3.0)
    X = X.to(torch.bfloat16)
    Y = teacher_targets(L, H, X, a.seed)

    t0 = time.perf_counter()
    if a.mode == "resident":
        gen = torch.Generator(device="cuda").manual_seed(a.seed + 1)
        model = build(L, H, "cuda", gen)
    else:
        import torch.distributed as dist
        try:
            from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        except ImportError:  # before 2.6
            from torch.distributed._composable.fsdp import CPUOffloadPolicy, fully_shard
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1)
        gen = torch.Generator(device="cpu").manual_seed(a.seed + 1)
        model = build(L, H, "cpu", gen)
        policy = CPUOffloadPolicy(pin_memory=True)
        for m in model:
            if isinstance(m, nn.Linear):
                fully_shard(m, offload_policy=policy)
        fully_shard(model, offload_policy=policy)
    print(f"mlp_torch.py: {a.mode}: {L} x Linear({H}, {H}) + GELU, {N} rows, "
          f"{L * H * H / 1e9:.2f} B parameters; built in {time.perf_counter() - t0:.1f} s",
          flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01)
    flops = 6.0 * N * H * H * L
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for s in range(a.steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        if a.mode == "offload":
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    out = model(X)
                    loss = F.mse_loss(out.float(), Y.float())
                loss.backward()
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = model(X)
                loss = F.mse_loss(out.float(), Y.float())
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        lv = loss.item()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t) * 1e3
        times.append(ms)
        losses.append(lv)
        print(f"step {s + 1}/{a.steps}  loss {lv:.6f}  {ms:.1f} ms  "
              f"{flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s", flush=True)
    med = statistics.median(times[1:])
    peak = torch.cuda.max_memory_allocated()
    res = {
        "program": "mlp_torch.py", "torch": torch.__version__, "mode": a.mode,
        "layers": L, "hidden": H, "rows": N, "steps": a.steps,
        "ms_per_step_median": med, "tflops": flops / (med * 1e-3) / 1e12,
        "peak_gpu_bytes": peak, "losses": losses, "step_ms": times,
        "device_name": torch.cuda.get_device_name(0),
    }
    print(f"summary: {med:.1f} ms/step (median of steps 2..{a.steps}), "
          f"{res['tflops']:.1f} TFLOP/s, peak {peak / 2**30:.2f} GiB, loss {losses[-1]:.6f}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    if a.mode == "offload":
        import torch.distributed as dist
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
