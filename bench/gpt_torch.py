#!/usr/bin/env python3
"""gpt_torch.py -- PyTorch's and DeepSpeed's side of the GPT benchmark (bench/run-gpt.sh).

The model uvmrt-gpt trains, in transformers: GPT2LMHeadModel from a GPT2Config with
n_layer L, n_embd C, n_head C/64, n_positions T, vocab 50257, GELU(tanh), LayerNorm
eps 1e-5, dropout 0, SDPA attention, tied LM head. Random tokens (torch generator,
--seed) unless --tokens FILE gives int32 batches of B*(T+1) tokens (several batches:
step s uses batch s mod count). Loss: mean cross-entropy of the B*T positions, the
targets the inputs shifted by one (as uvmrt-gpt; transformers' own labels= loss would
drop the last position). AdamW betas (.9, .95), eps 1e-8, weight decay .1 on the
2-D weights only, gradient clipping at global norm 1.0, constant --lr.

  --mode resident     bf16 autocast, fp32 weights and AdamW state on the GPU (fused AdamW)
  --mode checkpoint   the same with activation checkpointing (transformers'
                      gradient_checkpointing_enable, non-reentrant): one block input kept
  --mode zero2        DeepSpeed ZeRO-2, bf16, offload_optimizer cpu (pinned; DeepSpeed's
                      CPU Adam, built on first use), activation checkpointing
  --mode zero3        DeepSpeed ZeRO-3, bf16, offload_param + offload_optimizer cpu
                      (pinned), activation checkpointing (the model is built on the CPU
                      and partitioned by deepspeed.initialize)
  --mode hostbw       no model: host memory bandwidth, a STREAM triad a = b + s*c on
                      torch's CPU threads over 3 x 1 GiB arrays (GB/s = 3 x 1 GiB / time,
                      best of 5), for the resource floor of bench/gpt_table.py
  --compare W G L     see bench/gpt_compare.py (same flags)

Prints one line per step and writes --json PATH: ms/step (median of the steps after
the --warmup first ones), tokens/s (B*T / step time), TFLOP/s and the losses, peak GPU
memory (torch.cuda.max_memory_allocated: every tensor PyTorch and DeepSpeed allocate on
the GPU, not the CUDA context). FLOP per step = 6 * N * B*T + 12 * L * C * T * B*T, N
the parameter count (tied embedding once, wpe included): the dense matmuls of forward
and backward and, as in PaLM's appendix B, attention's QK^T and PV without the causal
half discounted. bench/gpt_table.py recomputes every row's TFLOP/s with this formula.
"""

import argparse
import json
import os
import statistics
import sys
import time

DEPTHS = {12: 768, 24: 1024, 36: 1280, 48: 1600, 60: 1920}
VOCAB = 50257


def param_count(L, C, V, T):
    """GPT-2's parameters: wte, wpe, L blocks of 12 C^2 + 13 C, final LayerNorm."""
    return V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C


def step_flops(L, C, V, B, T):
    return 6.0 * param_count(L, C, V, T) * B * T + 12.0 * L * C * T * B * T


def read_tokens(path, B, T):
    """int32 tokens, a whole number of batches of B*(T+1): list of (B, T+1) arrays."""
    import numpy as np
    a = np.fromfile(path, dtype="<i4")
    per = B * (T + 1)
    if a.size == 0 or a.size % per:
        raise SystemExit(f"gpt_torch.py: --tokens {path}: {a.size} int32, expected a multiple "
                         f"of B*(T+1) = {per}")
    if a.min() < 0:
        raise SystemExit(f"gpt_torch.py: --tokens {path}: negative token {a.min()}")
    return [a[i * per:(i + 1) * per].reshape(B, T + 1) for i in range(a.size // per)]


def gpt2_config(L, C, V, T):
    from transformers import GPT2Config
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=C, n_layer=L, n_head=C // 64,
                     n_inner=4 * C, activation_function="gelu_new", resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                     tie_word_embeddings=True, use_cache=False, bos_token_id=None,
                     eos_token_id=None)
    cfg._attn_implementation = "sdpa"
    return cfg


def build_model(cfg):
    from transformers import GPT2LMHeadModel
    try:
        return GPT2LMHeadModel._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, AttributeError):
        return GPT2LMHeadModel(cfg)


def loss_of(model, inputs, targets):
    import torch.nn.functional as F
    logits = model(input_ids=inputs).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def param_groups(model, wd):
    # ZeRO-3 leaves partitioned parameters empty; their shape is in ds_shape
    def dims(p):
        return len(getattr(p, "ds_shape", p.shape))
    decay = [p for p in model.parameters() if dims(p) >= 2]
    other = [p for p in model.parameters() if dims(p) < 2]
    return [{"params": decay, "weight_decay": wd}, {"params": other, "weight_decay": 0.0}]


def ds_config(a, stage):
    zero = {"stage": stage, "offload_optimizer": {"device": "cpu", "pin_memory": True},
            "overlap_comm": True, "contiguous_gradients": True}
    if stage == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    return {
        "train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
        "bf16": {"enabled": True},
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": a.lr, "betas": [0.9, 0.95],
                                                  "eps": 1e-8, "weight_decay": 0.1}},
        "gradient_clipping": 1.0,
        "steps_per_print": 1 << 30, "wall_clock_breakdown": False,
    }


def host_bandwidth(a):
    import torch
    n = (1 << 30) // 4
    x, y, z = (torch.empty(n, dtype=torch.float32) for _ in range(3))
    for t in (x, y, z):  # first touch outside the timing
        t.fill_(1.0)
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        torch.add(y, z, alpha=3.0, out=x)
        best = min(best, time.perf_counter() - t)
    bps = 3 * n * 4 / best
    res = {"program": "gpt_torch.py", "mode": "hostbw", "threads": torch.get_num_threads(),
           "triad_bytes": 3 * n * 4, "triad_best_s": best, "host_triad_bps": bps}
    print(f"host memory: STREAM triad on {res['threads']} threads, 3 x 1 GiB: "
          f"{bps / 1e9:.1f} GB/s (best of 5)")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--compare" in argv:  # the whole command line is gpt_compare.py's
        import gpt_compare
        i = argv.index("--compare")
        return gpt_compare.main(argv[:i] + argv[i + 1:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depth", type=int, choices=sorted(DEPTHS), default=12)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=VOCAB)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1, help="first steps left out of the median")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mode", choices=("resident", "checkpoint", "zero2", "zero3", "hostbw"),
                    default="resident")
    ap.add_argument("--tokens", default=None, help="int32 batches of B*(T+1) tokens")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.mode == "hostbw":
        return host_bandwidth(a)
    if a.steps <= a.warmup:
        ap.error(f"--steps {a.steps}: expected more than --warmup {a.warmup}")
    import torch
    if not torch.cuda.is_available():
        print("gpt_torch.py: no CUDA device", file=sys.stderr)
        return 1
    L, C, V, B, T = a.depth, DEPTHS[a.depth], a.vocab, a.batch, a.seq
    torch.cuda.set_device(0)
    torch.manual_seed(a.seed)
    if a.tokens:
        batches = [torch.from_numpy(x.astype("int64")).cuda() for x in read_tokens(a.tokens, B, T)]
        if max(int(x.max()) for x in batches) >= V:
            raise SystemExit(f"gpt_torch.py: --tokens {a.tokens}: a token >= vocab {V}")
    else:
        gen = torch.Generator(device="cuda").manual_seed(a.seed)
        batches = [torch.randint(0, V, (B, T + 1), device="cuda", generator=gen)]
    cfg = gpt2_config(L, C, V, T)

    t0 = time.perf_counter()
    ds = a.mode in ("zero2", "zero3")
    if ds:
        import deepspeed
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29531")
        os.environ.setdefault("RANK", "0")
        os.environ.setdefault("LOCAL_RANK", "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        deepspeed.init_distributed(dist_backend="nccl")
        dcfg = ds_config(a, 2 if a.mode == "zero2" else 3)
        # built on the CPU in fp32 with transformers' own init; deepspeed.initialize casts
        # to bf16 and places it (ZeRO-3: partitions it to the CPU). Not under zero.Init:
        # there transformers' init runs on empty partitions and the weights keep torch's
        # defaults (N(0, 1) embeddings: a step-1 loss of ~400 instead of ~10.9).
        model = build_model(cfg)
        model.train()
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        engine, _, _, _ = deepspeed.initialize(model=model, config=dcfg,
                                               model_parameters=param_groups(model, 0.1))
    else:
        model = build_model(cfg).cuda()
        if a.mode == "checkpoint":
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": False})
        model.train()
        opt = torch.optim.AdamW(param_groups(model, 0.1), lr=a.lr, betas=(0.9, 0.95), eps=1e-8,
                                fused=True)
    N = param_count(L, C, V, T)
    print(f"gpt_torch.py: {a.mode}: GPT-2 L={L} C={C} heads={C // 64} V={V}, B={B} T={T}, "
          f"{N / 1e6:.1f} M parameters; built in {time.perf_counter() - t0:.1f} s", flush=True)

    flops = step_flops(L, C, V, B, T)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for s in range(a.steps):
        batch = batches[s % len(batches)]
        inputs, targets = batch[:, :-1], batch[:, 1:]
        torch.cuda.synchronize()
        t = time.perf_counter()
        if ds:
            loss = loss_of(engine, inputs, targets)
            engine.backward(loss)
            engine.step()
        else:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_of(model, inputs, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        lv = loss.item()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t) * 1e3
        times.append(ms)
        losses.append(lv)
        print(f"step {s + 1}/{a.steps}  loss {lv:.6f}  {ms:.1f} ms  "
              f"{B * T / (ms * 1e-3):.0f} tokens/s  {flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s",
              flush=True)
    med = statistics.median(times[a.warmup:])
    peak = torch.cuda.max_memory_allocated()
    res = {
        "program": "gpt_torch.py", "torch": torch.__version__, "mode": a.mode,
        "depth": L, "layers": L, "channels": C, "heads": C // 64, "vocab": V,
        "batch": B, "seq": T, "steps": a.steps, "warmup": a.warmup, "params": N,
        "ms_per_step_median": med, "tokens_per_s": B * T / (med * 1e-3),
        "tflops": flops / (med * 1e-3) / 1e12, "flops_per_step": flops,
        "peak_gpu_bytes": peak, "losses": losses, "step_ms": times,
        "device_name": torch.cuda.get_device_name(0),
    }
    if ds:
        import deepspeed
        import torch.distributed as dist
        res["deepspeed"] = deepspeed.__version__
        res["zero_stage"] = 2 if a.mode == "zero2" else 3
        dist.destroy_process_group()
    print(f"summary: {med:.1f} ms/step (median of steps {a.warmup + 1}..{a.steps}), "
          f"{res['tokens_per_s']:.0f} tokens/s, {res['tflops']:.1f} TFLOP/s, "
          f"peak {peak / 2**30:.2f} GiB, loss {losses[-1]:.6f}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.exit(main())
