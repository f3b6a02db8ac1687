#!/usr/bin/env python3
"""torch_train.py -- one training script for every row of the PyTorch benchmark (issue 20,
bench/run-torch.sh): a Hugging Face model trained resident, under uvmrt.torch, under
DeepSpeed ZeRO offload or under FSDP2 CPU offload, with the same model, batches and
optimizer settings.

Models (random init from a config object, nothing downloaded; --seed seeds the init):
  gpt2-d48    GPT2LMHeadModel, 48 layers, n_embd 1600, 25 heads, n_positions 1024,
              vocab 50257, tied head (1.56 B parameters)
  llama-3b    LlamaForCausalLM, 26 layers, hidden 3200, intermediate 8640, 32 heads,
              vocab 32000, untied head (3.4 B parameters)
  gpt2-tiny, llama-tiny   two-layer, 64-channel versions for tests (vocab 256)
Dropout is 0 and attention is SDPA. The model is built on the CPU in fp32 (the same
weights for every row) and then placed by the row.

Rows:
  resident      the model on the GPU, torch.optim.AdamW (fused on CUDA), gradient clipping
                at norm 1.0 (torch.nn.utils.clip_grad_norm_)
  uvmrt         uvmrt.torch.offload(model, torch.optim.AdamW, budget=--budget,
                max_grad_norm=1.0, ...): the binding chooses recompute and the optimizer's
                place; --checkpointing is ignored (the binding's choice)
  ds-zero2      DeepSpeed ZeRO-2, offload_optimizer cpu (pinned), bf16, gradient_clipping 1.0
  ds-zero3      DeepSpeed ZeRO-3, offload_param + offload_optimizer cpu (pinned), bf16
  fsdp2         torch.distributed.fsdp.fully_shard per block and the root with
                CPUOffloadPolicy(pin_memory=True), one rank (nccl), AdamW on the CPU
                (--device cpu, for tests: gloo and no offload policy)
  compute-only  the resident model, forward and backward only (no optimizer): the
                compute floor of the model's rows
  uvmrt-gpt     not a PyTorch row: runs --gpt-binary (examples/gpt/uvmrt-gpt) with the
                arguments after "--" and --result-json, and converts its result to this
                script's JSON (its peak host RSS measured from here: the child's ru_maxrss)
DeepSpeed and FSDP2 rows run as one process without a launcher (RANK=0 WORLD_SIZE=1
LOCAL_RANK=0 MASTER_ADDR=127.0.0.1, MASTER_PORT from the environment or 29531).

Every PyTorch row: random tokens (B, T) from a seeded CPU torch.Generator, a new batch per
step, loss = model(input_ids=x, labels=x).loss (transformers shifts the labels), bf16
autocast (DeepSpeed rows: DeepSpeed's bf16 mode, which casts the model), AdamW lr
--lr, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter. --checkpointing
turns on transformers' gradient_checkpointing_enable(use_reentrant False).

--json OUT gets one JSON object: ok, error (on failure), row, model, batch, seq, steps,
warmup, step_ms and losses (every step: from the step's call to its loss on the host, as
a training loop sees it; work left running beside the next step counts in that one, and the
last step waits for the whole device), ms_per_step_median (median of the steps after the
--warmup first ones), tokens_per_s (B*T over that), peak_gpu_bytes
(torch.cuda.max_memory_allocated; the uvmrt row: uvmrt.torch.max_memory_allocated, uvmrt's
peak resident plus torch's), peak_host_rss_bytes (VmHWM of this process plus that of its
live child processes), for the uvmrt row uvmrt_step_stats (uvmrt.torch.step_stats after
the last step; --uvmrt-report PATH writes uvmrt's per-layer report) and, with
--count-link-bytes, link_bytes: the host-to-device and
device-to-host memcpy bytes the CUDA profiler (torch.profiler) saw in one extra step after
the timed ones. A row that fails writes ok false and the error, and exits 1.

--measure-floor measures, in this process: pinned host-to-device and device-to-host
bandwidth (torch copies of a 1 GiB pinned buffer, best of 5 after a warm-up) and host
memory bandwidth, bytes read plus written per second: host_copy_bps (a copy between two
1 GiB CPU tensors on torch's threads, best of 5), host_adamw_bps (uvmrt_adamw_cpu over 1 GiB
of w, m, v and g, 28 bytes a parameter, best of 3; needs libuvmrt) and host_bps, the faster
of the two (a floor divides by the fastest rate, to stay a lower bound); --json OUT gets
them (bench/torch_table.py's floors).

--estimate prints the row's estimated GPU bytes (run-torch.sh's free-memory check) and exits.
"""

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import traceback

ROWS = ("resident", "uvmrt", "ds-zero2", "ds-zero3", "fsdp2", "compute-only", "uvmrt-gpt")
MODELS = ("gpt2-d48", "llama-3b", "gpt2-tiny", "llama-tiny")
GIB = 1 << 30


def prog():
    return "torch_train.py"


# ----------------------------------------------------------------------------------------
# sizes

def parse_size(s):
    """'8G', '512m', '1024' -> bytes; None for None/'none'."""
    if s is None or str(s).lower() in ("", "none"):
        return None
    t = str(s).strip()
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    m = 1
    if t[-1].lower() in mult:
        m = mult[t[-1].lower()]
        t = t[:-1]
    if t.lower().endswith("i"):
        raise ValueError(f"--budget '{s}': expected a number with K, M, G or T (no 'iB')")
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"--budget '{s}': expected a size such as 8G, 512M or a byte count") from None
    if v <= 0:
        raise ValueError(f"--budget '{s}': expected a positive size")
    return int(v * m)


# ----------------------------------------------------------------------------------------
# models

def model_shape(name, seq):
    """The shape of a model: dict of family, layers, hidden, heads, vocab, inter, positions."""
    if name == "gpt2-d48":
        return dict(family="gpt2", layers=48, hidden=1600, heads=25, vocab=50257,
                    inter=4 * 1600, positions=max(1024, seq))
    if name == "gpt2-tiny":
        return dict(family="gpt2", layers=2, hidden=64, heads=4, vocab=256, inter=256,
                    positions=max(128, seq))
    if name == "llama-3b":
        return dict(family="llama", layers=26, hidden=3200, heads=32, vocab=32000,
                    inter=8640, positions=max(2048, seq))
    if name == "llama-tiny":
        return dict(family="llama", layers=2, hidden=64, heads=4, vocab=256, inter=172,
                    positions=max(128, seq))
    raise ValueError(f"--model '{name}': expected one of {', '.join(MODELS)}")


def param_count(sh):
    """Parameters of the model (tied embedding once)."""
    L, C, V, I, P = sh["layers"], sh["hidden"], sh["vocab"], sh["inter"], sh["positions"]
    if sh["family"] == "gpt2":  # wte, wpe, blocks (qkv, proj, fc, fc-proj, 2 LN), ln_f
        return V * C + P * C + L * (4 * C * C + 2 * C * I + 9 * C + I) + 2 * C
    # embed, untied head, blocks (q k v o, gate up down, 2 RMSNorm), final norm
    return 2 * V * C + L * (4 * C * C + 3 * C * I + 2 * C) + C


def build_config(sh):
    if sh["family"] == "gpt2":
        from transformers import GPT2Config
        cfg = GPT2Config(vocab_size=sh["vocab"], n_positions=sh["positions"],
                         n_embd=sh["hidden"], n_layer=sh["layers"], n_head=sh["heads"],
                         n_inner=sh["inter"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                         tie_word_embeddings=True, use_cache=False, bos_token_id=None,
                         eos_token_id=None)
    else:
        from transformers import LlamaConfig
        cfg = LlamaConfig(vocab_size=sh["vocab"], hidden_size=sh["hidden"],
                          intermediate_size=sh["inter"], num_hidden_layers=sh["layers"],
                          num_attention_heads=sh["heads"], num_key_value_heads=sh["heads"],
                          max_position_embeddings=sh["positions"], tie_word_embeddings=False,
                          use_cache=False, attention_dropout=0.0)
    return cfg


def build_model(sh, seed):
    """The model on the CPU in fp32, transformers' own init under torch.manual_seed(seed)."""
    import torch
    cfg = build_config(sh)
    if sh["family"] == "gpt2":
        from transformers import GPT2LMHeadModel as cls
    else:
        from transformers import LlamaForCausalLM as cls
    torch.manual_seed(seed)
    try:
        model = cls._from_config(cfg, attn_implementation="sdpa")
    except (TypeError, AttributeError, ValueError, ImportError) as e:
        print(f"{prog()}: {cls.__name__}._from_config failed ({e}); building with "
              f"{cls.__name__}(config), attention {getattr(cfg, '_attn_implementation', '?')}",
              file=sys.stderr)
        model = cls(cfg)
    return model.float()


def blocks_of(model):
    """The repeated transformer blocks (GPT-2: transformer.h; Llama: model.layers)."""
    for path in ("transformer.h", "model.layers"):
        m = model
        try:
            for part in path.split("."):
                m = getattr(m, part)
            return list(m)
        except AttributeError:
            continue
    raise RuntimeError(f"{type(model).__name__}: no transformer.h or model.layers")


# ----------------------------------------------------------------------------------------
# measurements

def vm_hwm_bytes(pid="self"):
    """Peak resident set (VmHWM) of a process, bytes; None if it cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def descendants(pid):
    """Live descendant process ids of pid (from /proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children", encoding="ascii") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def memory_peak_sites(step, top=14):
    """One more step under torch's allocator history: what was allocated at the step's
    peak, by the first frame outside torch's own files (where the tensor was made)."""
    import torch
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                             max_entries=1 << 20)
    try:
        step()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    live, cur, peak, at_peak = {}, 0, 0, {}
    for ev in snap["device_traces"][0] if snap.get("device_traces") else []:
        act = ev.get("action")
        if act == "alloc":
            live[ev["addr"]] = (ev["size"], ev.get("frames") or [])
            cur += ev["size"]
            if cur > peak:
                peak, at_peak = cur, dict(live)
        elif act in ("free_completed",) and ev["addr"] in live:
            cur -= live.pop(ev["addr"])[0]

    def site(frames):
        for f in frames:
            fn = f.get("filename", "")
            if "/torch/" not in fn and "<" not in fn:
                return f"{fn.split('/site-packages/')[-1].split('/python/')[-1]}:{f.get('line')} {f.get('name')}"
        return "(torch internals)"
    sites = {}
    for size, frames in at_peak.values():
        k = site(frames)
        n, b = sites.get(k, (0, 0))
        sites[k] = (n + 1, b + size)
    rows = sorted(sites.items(), key=lambda kv: -kv[1][1])[:top]
    text = [f"memory peak of one more step: {(base + peak) / 2**30:.2f} GiB allocated "
            f"({base / 2**30:.2f} before the step, {peak / 2**30:.2f} made in it), live at the peak by site:"]
    text += [f"  {b / 2**30:7.3f} GiB in {n:5d} blocks  {k}" for k, (n, b) in rows]
    return {"base_bytes": base, "peak_step_bytes": peak, "sites": [[k, n, b] for k, (n, b) in rows],
            "text": text}


def host_rss():
    """(sum of VmHWM over this process and its live descendants, per-process list)."""
    me = os.getpid()
    per = []
    for p in [me] + descendants(me):
        v = vm_hwm_bytes(p)
        if v is not None:
            per.append({"pid": p, "vm_hwm_bytes": v})
    if not per:  # no /proc: ru_maxrss (kilobytes on Linux)
        v = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        per.append({"pid": me, "ru_maxrss_bytes": v})
        return v, per
    return sum(x["vm_hwm_bytes"] for x in per), per


TRACING = {"on": False}


def phase(name):
    """A record_function span "phase:NAME" while --trace profiles a step (bench/trace_gaps.py
    splits the step by them); nothing otherwise."""
    if not TRACING["on"]:
        return contextlib.nullcontext()
    import torch
    return torch.profiler.record_function("phase:" + name)


def trace_step(step_fn, path):
    """Runs step_fn() once under torch.profiler (CPU and CUDA activities, the step's phases
    marked), writes the Chrome trace to PATH (gzip when it ends in .gz) and returns
    bench/trace_gaps.py's analysis of it."""
    import gzip
    import shutil
    import tempfile
    import torch
    from torch.profiler import ProfilerActivity, profile
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import trace_gaps
    TRACING["on"] = True
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            step_fn()
            torch.cuda.synchronize()
    finally:
        TRACING["on"] = False
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix="torch_train-trace-")
    os.close(fd)
    try:
        p.export_chrome_trace(tmp)
        res = trace_gaps.analyse(trace_gaps.load(tmp))
        if path.endswith(".gz"):
            with open(tmp, "rb") as src, gzip.open(path, "wb") as dst:
                shutil.copyfileobj(src, dst)
        else:
            shutil.copyfile(tmp, path)
    finally:
        os.unlink(tmp)
    trace_gaps.print_report(res)
    return res


def count_link_bytes(step_fn):
    """Runs step_fn() once under torch.profiler (CUDA activity) and sums the bytes of its
    memcpy events by direction, from the exported trace. Returns a dict (h2d, d2h, events)
    or raises."""
    import tempfile
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as p:
        step_fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json", prefix="torch_train-trace-")
    os.close(fd)
    try:
        p.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    res = memcpy_bytes(trace)
    res["source"] = "torch.profiler memcpy events, one extra step after the timed ones"
    return res


def memcpy_bytes(trace):
    """Bytes of a Chrome trace's (torch.profiler's export) memcpy events by direction:
    {h2d, d2h, memcpy_events}; kineto names them 'Memcpy HtoD (Pinned -> Device)' and so
    on, with the size in args.bytes."""
    h2d = d2h = n = 0
    for ev in trace.get("traceEvents", []):
        if ev.get("cat") != "gpu_memcpy":
            continue
        name = ev.get("name", "")
        b = int((ev.get("args") or {}).get("bytes", 0))
        n += 1
        if "HtoD" in name:
            h2d += b
        elif "DtoH" in name:
            d2h += b
    if n == 0:
        raise RuntimeError("the profiler's trace has no gpu_memcpy events")
    return {"h2d": h2d, "d2h": d2h, "memcpy_events": n}


def adamw_host_bps(n):
    """Host-memory bytes per second uvmrt_adamw_cpu streams over n bytes of fp32 w, m, v
    and g (16 bytes read and 12 written a parameter), best of 3; raises without libuvmrt."""
    import ctypes
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "python"))
    from uvmrt import _lib as L
    k = max(1, n // 16)
    w, m, v, g = (torch.full((k,), x, dtype=torch.float32) for x in (0.5, 0.0, 0.0, 1e-3))
    hp = L.AdamW()
    L.lib().uvmrt_adamw_init(ctypes.byref(hp))
    best = float("inf")
    for step in range(1, 4):
        hp.step = step
        t = time.perf_counter()
        st = L.lib().uvmrt_adamw_cpu(ctypes.byref(hp), w.data_ptr(), m.data_ptr(), v.data_ptr(),
                                     g.data_ptr(), k, None)
        best = min(best, time.perf_counter() - t)
        if st != 0:
            raise RuntimeError(f"uvmrt_adamw_cpu returned {st}")
    return 28 * k / best


def measure_floor(a):
    import torch
    res = {"program": prog(), "mode": "floor", "torch": torch.__version__,
           "threads": torch.get_num_threads(), "h2d_bps": None, "d2h_bps": None}
    n = a.floor_bytes
    src = torch.empty(n, dtype=torch.uint8)
    dst = torch.empty(n, dtype=torch.uint8)
    src.fill_(1)
    dst.fill_(2)  # first touch outside the timing
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        dst.copy_(src)
        best = min(best, time.perf_counter() - t)
    res["host_copy_bytes"] = 2 * n
    res["host_copy_bps"] = 2 * n / best
    print(f"host memory: copy of {n / GIB:.2f} GiB on {res['threads']} threads: "
          f"{res['host_copy_bps'] / 1e9:.1f} GB/s read + written (best of 5)", flush=True)
    del src, dst
    # The CPU's AdamW streams host memory faster than a copy does: a floor divides by the
    # fastest rate measured, so that it stays a lower bound of the step
    try:
        res["host_adamw_bps"] = adamw_host_bps(n)
        print(f"host memory: uvmrt_adamw_cpu over {n / GIB:.2f} GiB of w, m, v and g: "
              f"{res['host_adamw_bps'] / 1e9:.1f} GB/s read + written (28 bytes a parameter, "
              f"best of 3)", flush=True)
    except Exception as e:  # no libuvmrt here: the copy's figure alone
        res["host_adamw_error"] = f"{type(e).__name__}: {e}"
        print(f"{prog()}: the CPU AdamW's host rate not measured: {res['host_adamw_error']}",
              file=sys.stderr)
    res["host_bps"] = max(res["host_copy_bps"], res.get("host_adamw_bps") or 0)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        host.fill_(3)
        dev = torch.empty(n, dtype=torch.uint8, device="cuda")
        for key, fn in (("h2d_bps", lambda: dev.copy_(host, non_blocking=True)),
                        ("d2h_bps", lambda: host.copy_(dev, non_blocking=True))):
            fn()
            torch.cuda.synchronize()
            best = float("inf")
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                best = min(best, start.elapsed_time(end) * 1e-3)
            res[key] = n / best
        res["link_bytes"] = n
        res["device_name"] = torch.cuda.get_device_name(0)
        print(f"link: pinned host->device {res['h2d_bps'] / 1e9:.1f} GB/s, device->host "
              f"{res['d2h_bps'] / 1e9:.1f} GB/s ({n / GIB:.2f} GiB, best of 5)", flush=True)
    res["ok"] = True
    return res


def estimate_bytes(a, sh):
    """Estimated GPU bytes of the row (parameters, optimizer state, activations, logits),
    plus 2 GiB, times 1.2. GPT-2 coefficients fit to the 2026-12-01 d48 measurements
    (bench/run-gpt.sh); Llama's to the 3.4B's 66.3 GiB resident at B=4 (FACTS.md)."""
    N = param_count(sh)
    B, T = a.batch, a.seq
    A = B * T * sh["hidden"] * sh["layers"]
    G = B * T * sh["vocab"]
    full = 85 * A if sh["family"] == "gpt2" else 50 * A
    act = 6 * A if a.checkpointing else full
    budget = parse_size(a.budget) or 0
    if a.row == "resident":
        need = 16 * N + act + 12 * G
    elif a.row == "compute-only":
        need = 8 * N + act + 12 * G
    elif a.row == "uvmrt":  # managed allocations for everything, activations in torch's
        need = 18 * N + min(full, max(budget, 6 * A)) + 12 * G
    elif a.row == "ds-zero2":
        need = 4 * N + act + 12 * G
    elif a.row in ("ds-zero3", "fsdp2"):
        need = act + 12 * G + 8 * N // max(sh["layers"], 1)
    else:  # uvmrt-gpt: managed memory for everything it holds
        need = 18 * N + 4 * A + 4 * G
    return int(1.2 * (need + 2 * GIB))


# ----------------------------------------------------------------------------------------
# rows

class Row:
    """What a row's training loop needs: step() -> loss tensor (one training step),
    plus how to read its peaks."""

    def __init__(self):
        self.cleanup = []
        self.info = {}


def set_dist_env():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29531")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")


def enable_checkpointing(model):
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def adamw_kwargs(a):
    return dict(lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def make_row(a, model):
    import torch
    dev = a.device
    r = Row()
    r.model = model
    if a.row in ("resident", "compute-only"):
        model.to(dev)
        if a.checkpointing:
            enable_checkpointing(model)
        model.train()
        opt = None
        if a.row == "resident":
            kw = adamw_kwargs(a)
            if dev == "cuda":
                kw["fused"] = True
            opt = torch.optim.AdamW(model.parameters(), **kw)

        def step(x):
            with phase("forward"), torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                if opt is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    opt.step()
                opt_zero(model, opt)
            return loss
        r.step = step
    elif a.row == "uvmrt":
        try:
            import uvmrt.torch as ut
        except ImportError as e:
            raise RuntimeError(f"uvmrt.torch does not import ({e}): put the repository's python/ "
                               "on PYTHONPATH (run-torch.sh does) and libuvmrt.so where the "
                               "binding finds it (UVMRT_LIBRARY=PATH)") from e
        model.train()
        extra = {}
        for kv in a.uvmrt_opt or ():  # offload()'s mechanism arguments, for experiments
            k, _, v = kv.partition("=")
            extra[k] = {"true": True, "false": False, "auto": "auto"}.get(v.lower(), v)
        model, opt = ut.offload(model, torch.optim.AdamW, budget=a.budget, max_grad_norm=1.0,
                                **extra, **adamw_kwargs(a))
        r.model, r.ut = model, ut
        r.info["uvmrt_version"] = getattr(sys.modules.get("uvmrt"), "__version__", None)

        def step(x):
            with phase("forward"), torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
            with phase("backward"):
                loss.backward()
            with phase("optimizer"):
                opt.step()
                opt.zero_grad()
            return loss
        r.step = step
    elif a.row in ("ds-zero2", "ds-zero3"):
        try:
            import deepspeed
        except ImportError as e:
            raise RuntimeError(f"deepspeed does not import ({e}): download it with "
                               "bench/peers/fetch-deepspeed.sh DIR where PyPI is reachable; "
                               "run-torch.sh installs it from WHEELS=DIR") from e
        if dev != "cuda":
            raise RuntimeError(f"--row {a.row}: DeepSpeed rows need --device cuda")
        set_dist_env()
        deepspeed.init_distributed(dist_backend="nccl")
        stage = 2 if a.row == "ds-zero2" else 3
        zero = {"stage": stage, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                "overlap_comm": True, "contiguous_gradients": True}
        if stage == 3:
            zero["offload_param"] = {"device": "cpu", "pin_memory": True}
        kw = adamw_kwargs(a)
        cfg = {"train_micro_batch_size_per_gpu": a.batch, "gradient_accumulation_steps": 1,
               "bf16": {"enabled": True}, "zero_optimization": zero,
               "optimizer": {"type": "AdamW", "params": {"lr": kw["lr"], "betas": list(kw["betas"]),
                                                         "eps": kw["eps"],
                                                         "weight_decay": kw["weight_decay"]}},
               "gradient_clipping": 1.0, "steps_per_print": 1 << 30,
               "wall_clock_breakdown": False}
        if a.checkpointing:
            enable_checkpointing(model)
        model.train()
        # built on the CPU with transformers' own init (not under zero.Init, whose
        # partitioned parameters transformers' init would not reach); initialize casts to
        # bf16 and places or partitions it
        engine, _, _, _ = deepspeed.initialize(model=model, config=cfg,
                                               model_parameters=model.parameters())
        r.info["deepspeed"] = deepspeed.__version__
        r.info["ds_config"] = cfg

        def step(x):
            loss = engine(input_ids=x, labels=x).loss
            engine.backward(loss)
            engine.step()
            return loss
        r.step = step

        def done():
            import torch.distributed as dist
            if dist.is_initialized():
                dist.destroy_process_group()
        r.cleanup.append(done)
    elif a.row == "fsdp2":
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        try:
            from torch.distributed.fsdp import CPUOffloadPolicy, fully_shard
        except ImportError:  # torch before 2.6
            from torch.distributed._composable.fsdp import CPUOffloadPolicy, fully_shard
        set_dist_env()
        if dev == "cuda":
            torch.cuda.set_device(0)
        # on the CPU (tests): gloo, and no offload policy (the parameters are there already)
        dist.init_process_group("nccl" if dev == "cuda" else "gloo", rank=0, world_size=1)
        mesh = init_device_mesh(dev, (1,))
        if a.checkpointing:
            enable_checkpointing(model)
        kw = {"mesh": mesh}
        if dev == "cuda":
            kw["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
        for blk in blocks_of(model):
            fully_shard(blk, **kw)
        fully_shard(model, **kw)
        model.train()
        opt = torch.optim.AdamW(model.parameters(), **adamw_kwargs(a))

        def step(x):
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        r.step = step

        def done():
            if dist.is_initialized():
                dist.destroy_process_group()
        r.cleanup.append(done)
    else:
        raise ValueError(f"--row '{a.row}': expected one of {', '.join(ROWS)}")
    return r


def opt_zero(model, opt):
    if opt is not None:
        opt.zero_grad(set_to_none=True)
    else:
        for p in model.parameters():
            p.grad = None


def train(a, res):
    import torch
    sh = model_shape(a.model, a.seq)
    if a.seq > sh["positions"]:
        raise ValueError(f"--seq {a.seq}: expected at most {sh['positions']} for {a.model}")
    dev = a.device
    if dev == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device (use --device cpu "
                               "for the resident, compute-only and uvmrt rows)")
        torch.cuda.set_device(0)
        res["device_name"] = torch.cuda.get_device_name(0)
    res.update(torch=torch.__version__, params=param_count(sh), shape=sh)
    try:
        import transformers
        res["transformers"] = transformers.__version__
    except ImportError as e:
        raise RuntimeError(f"transformers does not import ({e})") from e

    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    batches = [torch.randint(0, sh["vocab"], (a.batch, a.seq), generator=gen)
               for _ in range(a.steps + 1)]
    t0 = time.perf_counter()
    model = build_model(sh, a.seed)
    res["params"] = sum(p.numel() for p in model.parameters())
    res["build_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = make_row(a, model)
    res["setup_s"] = time.perf_counter() - t0
    res.update(r.info)
    batches = [b.to(dev) for b in batches]
    print(f"{prog()}: {a.row} {a.model}: {res['params'] / 1e6:.1f} M parameters, B={a.batch} "
          f"T={a.seq}; built in {res['build_s']:.1f} s, set up in {res['setup_s']:.1f} s",
          flush=True)

    def sync():
        if dev == "cuda":
            torch.cuda.synchronize()

    if dev == "cuda":
        sync()
        torch.cuda.reset_peak_memory_stats()
    times, losses, stats = [], [], []
    sync()
    for s in range(a.steps):
        # A step's time runs from its call to its loss on the host (loss.item() waits for
        # torch's stream), as a user's loop sees it: work a row leaves running beside the
        # next step (uvmrt's updates over the link, its CPU updates) lands in the next
        # step's time, and the last step waits for all of it (the whole device).
        t = time.perf_counter()
        loss = r.step(batches[s])
        lv = float(loss.item())
        if s == a.steps - 1:
            sync()
        ms = (time.perf_counter() - t) * 1e3
        times.append(ms)
        losses.append(lv)
        if a.row == "uvmrt":
            try:  # the first steps may have no completed step to report yet
                stats.append(r.ut.step_stats(r.model))
            except Exception as e:
                stats.append({"error": f"{type(e).__name__}: {e}"})
        print(f"step {s + 1}/{a.steps}  loss {lv:.6f}  {ms:.1f} ms  "
              f"{a.batch * a.seq / (ms * 1e-3):.0f} tokens/s", flush=True)
    med = statistics.median(times[a.warmup:])
    res.update(step_ms=times, losses=losses, ms_per_step_median=med,
               tokens_per_s=a.batch * a.seq / (med * 1e-3))
    # the peaks of the timed steps, before the profiled step and the reports
    res["peak_host_rss_bytes"], res["host_rss_processes"] = host_rss()
    if dev == "cuda":
        res["peak_gpu_torch_bytes"] = torch.cuda.max_memory_allocated()
        res["peak_gpu_bytes"] = res["peak_gpu_torch_bytes"]
    if a.row == "uvmrt":
        good = [x for x in stats if isinstance(x, dict) and x and "error" not in x]
        res["uvmrt_step_stats"] = dict(good[-1]) if good else None
        res["uvmrt_step_stats_per_step"] = stats
        res["peak_gpu_bytes"] = int(r.ut.max_memory_allocated(r.model))
        try:
            res["uvmrt_memory_summary"] = str(r.ut.memory_summary(r.model))
        except Exception as e:  # a summary is informative only
            res["uvmrt_memory_summary"] = f"memory_summary failed: {e}"
        if a.uvmrt_report:
            try:  # uvmrt's per-layer report (uvmrt-report(5))
                r.ut.report(r.model, "json", a.uvmrt_report)
                res["uvmrt_report"] = a.uvmrt_report
            except Exception as e:
                res["uvmrt_report_error"] = f"{type(e).__name__}: {e}"
    if a.memory_sites and dev == "cuda":
        try:
            res["memory_peak"] = memory_peak_sites(lambda: r.step(batches[a.steps % len(batches)]))
            for line in res["memory_peak"]["text"]:
                print(line, flush=True)
        except Exception as e:
            res["memory_peak_error"] = f"{type(e).__name__}: {e}"
            print(f"{prog()}: memory peak not traced: {res['memory_peak_error']}", file=sys.stderr)
            traceback.print_exc()
    if a.trace and dev == "cuda":
        try:
            res["trace"] = trace_step(lambda: r.step(batches[a.steps % len(batches)]), a.trace)
            res["trace_file"] = os.path.basename(a.trace)
        except Exception as e:
            res["trace_error"] = f"{type(e).__name__}: {e}"
            print(f"{prog()}: step not traced: {res['trace_error']}", file=sys.stderr)
            traceback.print_exc()
    if a.count_link_bytes and dev == "cuda" and a.row != "uvmrt":
        try:
            res["link_bytes"] = count_link_bytes(lambda: r.step(batches[a.steps]))
        except Exception as e:
            res["link_bytes_error"] = f"{type(e).__name__}: {e}"
            print(f"{prog()}: link bytes not counted: {res['link_bytes_error']}", file=sys.stderr)
    for fn in r.cleanup:
        fn()
    return res


def run_uvmrt_gpt(a, res, extra):
    """uvmrt-gpt in a child process; its --result-json converted to this script's JSON."""
    if not a.gpt_binary:
        raise ValueError("--row uvmrt-gpt needs --gpt-binary PATH (examples/gpt/uvmrt-gpt)")
    if not os.access(a.gpt_binary, os.X_OK):
        raise FileNotFoundError(f"--gpt-binary {a.gpt_binary}: not an executable file")
    out = (a.json or "uvmrt-gpt") + ".gpt.json"
    cmd = [a.gpt_binary, "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
           "--result-json", out] + extra
    if a.budget:
        cmd += ["--budget", a.budget]
    print(f"{prog()}: running {' '.join(cmd)}", flush=True)
    try:
        os.unlink(out)
    except FileNotFoundError:
        pass
    t0 = time.perf_counter()
    rc = subprocess.call(cmd)
    res["wall_s"] = time.perf_counter() - t0
    res["command"] = cmd
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    res["peak_host_rss_bytes"] = rss
    res["host_rss_processes"] = [{"pid": None, "ru_maxrss_bytes": rss, "what": "uvmrt-gpt"}]
    if rc != 0:
        raise RuntimeError(f"{a.gpt_binary} exited with status {rc}")
    with open(out, encoding="utf-8") as f:
        g = json.load(f)
    res["uvmrt_gpt"] = g
    times = list(g.get("step_ms") or [])
    res.update(step_ms=times, losses=list(g.get("losses") or []),
               ms_per_step_median=g["ms_per_step_median"], tokens_per_s=g["tokens_per_s"],
               peak_gpu_bytes=int(g.get("peak_resident_bytes", 0)) +
               int(g.get("device_workspace_bytes", 0)),
               params=None)
    res["uvmrt_step_stats"] = {
        "gb_in_per_step": g.get("gb_in_per_step"), "gb_out_per_step": g.get("gb_out_per_step"),
        "faults_per_step": g.get("faults_per_step"),
        "predicted_step_ms": g.get("predicted_step_ms")}
    for k in ("layers", "channels", "heads", "vocab", "cpu_layers", "recompute_blocks",
              "budget_bytes", "managed_bytes", "policy"):
        if k in g:
            res["gpt_" + k] = g[k]
    return res


def write_json(path, res):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1, default=str)
    os.replace(tmp, path)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    extra = []
    if "--" in argv:  # uvmrt-gpt's own arguments
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog=prog(), description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", choices=ROWS, help="what trains the model (required unless "
                    "--measure-floor)")
    ap.add_argument("--model", choices=MODELS, default="gpt2-tiny")
    ap.add_argument("--name", default=None, help="the row's name in the table "
                    "(default MODEL-ROW[-BUDGET])")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: resident, compute-only, uvmrt and fsdp2 (gloo, no offload) "
                         "rows, for tests")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="first steps left out of the median")
    ap.add_argument("--memory-sites", action="store_true",
                    help="after the timed steps, one more under torch's allocator history: what "
                         "was allocated at its peak, by the code that made it (GPU only)")
    ap.add_argument("--budget", default=None, help="uvmrt budget (8G, 16G, ...)")
    ap.add_argument("--uvmrt-opt", action="append", metavar="KEY=VALUE",
                    help="an argument of uvmrt.torch.offload for the uvmrt row (true/false/auto or text), "
                         "e.g. link_optimizer=true; repeatable")
    ap.add_argument("--checkpointing", action="store_true",
                    help="transformers' activation checkpointing (non-reentrant)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default=None, metavar="OUT")
    ap.add_argument("--trace", default=None, metavar="OUT.json.gz",
                    help="one extra step under torch.profiler (CPU and CUDA, phases marked), "
                    "its Chrome trace written to OUT and its GPU idle time explained "
                    "(bench/trace_gaps.py) in the JSON's 'trace'; GPU only")
    ap.add_argument("--count-link-bytes", action="store_true",
                    help="one extra step under the CUDA profiler, counting memcpy bytes each way")
    ap.add_argument("--gpt-binary", default=None, help="uvmrt-gpt, for --row uvmrt-gpt")
    ap.add_argument("--uvmrt-report", default=None, metavar="PATH",
                    help="uvmrt row: write uvmrt's JSON report (uvmrt.torch.report) there")
    ap.add_argument("--measure-floor", action="store_true",
                    help="measure link and host memory bandwidth instead of training")
    ap.add_argument("--floor-bytes", type=int, default=GIB, help=argparse.SUPPRESS)
    ap.add_argument("--estimate", action="store_true",
                    help="print the row's estimated GPU bytes and exit")
    a = ap.parse_args(argv)
    if extra and a.row != "uvmrt-gpt":
        ap.error("arguments after '--' are uvmrt-gpt's: only with --row uvmrt-gpt")
    if a.measure_floor:
        res = {"program": prog(), "mode": "floor", "ok": False}
        try:
            res = measure_floor(a)
        except Exception as e:
            res["error"] = f"{type(e).__name__}: {e}"
            print(f"{prog()}: --measure-floor failed: {res['error']}", file=sys.stderr)
            write_json(a.json, res)
            return 1
        write_json(a.json, res)
        return 0
    if not a.row:
        ap.error("--row is required (or --measure-floor)")
    for flag, v in (("--batch", a.batch), ("--seq", a.seq), ("--steps", a.steps)):
        if v < 1:
            ap.error(f"{flag} {v}: expected at least 1")
    if a.warmup < 0 or a.steps <= a.warmup:
        ap.error(f"--steps {a.steps}: expected more than --warmup {a.warmup}")
    if a.row == "uvmrt" and not a.budget:
        ap.error("--row uvmrt needs --budget (8G, 16G, ...)")
    try:
        parse_size(a.budget)
    except ValueError as e:
        ap.error(str(e))
    if a.estimate:
        print(estimate_bytes(a, model_shape(a.model, a.seq)))
        return 0
    name = a.name or f"{a.model}-{a.row}" + (f"-{a.budget.lower()}" if a.budget else "")
    res = {"program": prog(), "ok": False, "name": name, "row": a.row, "model": a.model,
           "device": a.device, "batch": a.batch, "seq": a.seq, "steps": a.steps,
           "warmup": a.warmup, "budget": a.budget, "budget_bytes": parse_size(a.budget),
           "checkpointing": ("binding's choice" if a.row in ("uvmrt", "uvmrt-gpt")
                             else bool(a.checkpointing)),
           "seed": a.seed, "lr": a.lr, "argv": argv + (["--"] + extra if extra else [])}
    write_json(a.json, dict(res, error="started, not finished (killed or timed out?)"))
    try:
        if a.row == "uvmrt-gpt":
            run_uvmrt_gpt(a, res, extra)
        else:
            train(a, res)
        res["ok"] = True
    except BaseException as e:  # the row's failure goes into its JSON, not a lost run
        if isinstance(e, KeyboardInterrupt):
            res["error"] = "interrupted"
        else:
            res["error"] = f"{type(e).__name__}: {e}"
        res["traceback"] = traceback.format_exc()[-4000:]
        if "peak_host_rss_bytes" not in res:
            try:
                res["peak_host_rss_bytes"], res["host_rss_processes"] = host_rss()
            except Exception:
                pass
        print(f"{prog()}: {name} failed: {res['error']}", file=sys.stderr)
        traceback.print_exc()
        write_json(a.json, res)
        return 1
    write_json(a.json, res)
    gpu = res.get("peak_gpu_bytes")
    print(f"summary: {name}: {res['ms_per_step_median']:.1f} ms/step (median of steps "
          f"{a.warmup + 1}..{a.steps}), {res['tokens_per_s']:.0f} tokens/s, peak GPU "
          f"{'-' if gpu is None else f'{gpu / GIB:.2f} GiB'}, peak host RSS "
          f"{res['peak_host_rss_bytes'] / GIB:.2f} GiB, last loss "
          f"{res['losses'][-1] if res['losses'] else float('nan'):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
