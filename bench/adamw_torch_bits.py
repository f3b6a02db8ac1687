#!/usr/bin/env python3
"""adamw_torch_bits.py -- uvmrt_adamw_cpu(order=UVMRT_ADAMW_ORDER_TORCH) against
torch.optim.AdamW(foreach=False) on CUDA, bit for bit.  Needs a GPU, torch, and the
library: UVMRT_LIBRARY=path/to/libuvmrt.so python3 bench/adamw_torch_bits.py

  1. the reciprocal torch's `exp_avg_sq.sqrt() / bias_correction2_sqrt` multiplies by
     (CUDA's division by a CPU scalar), read back from the GPU for t = 1..T and several
     beta2, against 1.0f / (float)s and (float)(1.0 / s) (what the library uses);
  2. AdamW steps of a ~1M-element parameter (w, m and v compared after every step), for
     several hyperparameter sets (beta1 below and above 0.5: both branches of torch's
     lerp; a gradient factor; steps far from 1), with every instruction set the CPU has
     (UVMRT_ADAMW_ISA) and 1 and many threads, half_out on.
Prints one line per comparison; exit status 1 when any differs.
"""

import ctypes
import os
import sys

import numpy as np
import torch


class AdamW(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("lr", ctypes.c_double), ("beta1", ctypes.c_double),
                ("beta2", ctypes.c_double), ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double),
                ("step", ctypes.c_uint64), ("grad_scale", ctypes.c_double), ("threads", ctypes.c_int),
                ("order", ctypes.c_int)]


ORDER_TORCH = 1
failed = False


def report(what, bad, total, detail=""):
    global failed
    failed |= bad != 0
    print(f"{'OK  ' if bad == 0 else 'DIFF'} {what}: {bad} of {total} differ{' ' + detail if detail else ''}",
          flush=True)


def reciprocals(T=20000):
    dev = torch.ones(1, device="cuda")
    for b2 in (0.999, 0.95, 0.98, 0.9999, 0.5):
        bad_lib = bad_double = 0
        for t in range(1, T + 1):
            s = (1 - b2 ** float(t)) ** 0.5
            got = np.float32((dev / s).item())  # 1 * r: r itself
            bad_lib += got != np.float32(1.0) / np.float32(s)
            bad_double += got != np.float32(1.0 / s)
        report(f"reciprocal, beta2 {b2}, t 1..{T}: (float)(1.0/s), the library's", bad_double, T,
               f"[1.0f/(float)s: {bad_lib} differ]")


def bf16_bits(x):
    """numpy float32 -> bf16 bit patterns, round to nearest even (torch's rounding)."""
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


def adamw_runs(lib, n=(1 << 20) + 13):
    isas = []
    for isa in ("scalar", "avx2", "avx512"):
        os.environ["UVMRT_ADAMW_ISA"] = isa
        if lib.uvmrt_adamw_isa().decode() == isa:
            isas.append(isa)
    print(f"instruction sets: {isas}", flush=True)
    cases = [  # lr, beta1, beta2, eps, wd, grad factor, steps (jumps set torch's step count)
        (1e-3, 0.9, 0.999, 1e-8, 0.01, None, [1, 2, 3, 4, 5]),
        (3e-4, 0.9, 0.95, 1e-8, 0.1, 0.37, [1, 2, 3, 1000, 1001, 54321]),
        (1e-2, 0.3, 0.99, 1e-6, 0.0, None, [1, 2, 3]),
        (5e-3, 0.0, 0.9, 1e-8, 0.05, 1.0 / 1024, [1, 2, 7]),
    ]
    gen = torch.Generator().manual_seed(1)
    exps = torch.arange(n) % 40 - 30.0
    for ci, (lr, b1, b2, eps, wd, gs, steps) in enumerate(cases):
        w0 = torch.rand(n, generator=gen) * 2 - 1
        p = torch.nn.Parameter(w0.clone().cuda())
        opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
        grads, want = [], []
        for t in steps:
            g = (torch.rand(n, generator=gen) * 2 - 1) * torch.exp2(exps)
            g[::101] = 0.0
            grads.append(g)
            gd = g.cuda()
            if gs is not None:  # the clip's multiply, as uvmrt.torch's GPU step does it
                gd = gd * torch.tensor(gs, dtype=torch.float32, device="cuda")
            p.grad = gd
            if opt.state:
                opt.state[p]["step"].fill_(t - 1)
            opt.step()
            st = opt.state[p]
            want.append([x.detach().cpu().numpy().copy() for x in (p, st["exp_avg"], st["exp_avg_sq"])])
        for isa in isas:
            os.environ["UVMRT_ADAMW_ISA"] = isa
            for threads in (1, 16):
                w = w0.numpy().copy()
                m = np.zeros(n, np.float32)
                v = np.zeros(n, np.float32)
                h = np.zeros(n, np.uint16)
                bad = 0
                detail = ""
                for k, t in enumerate(steps):
                    hp = AdamW()
                    lib.uvmrt_adamw_init(ctypes.byref(hp))
                    hp.lr, hp.beta1, hp.beta2, hp.eps, hp.weight_decay = lr, b1, b2, eps, wd
                    hp.step, hp.grad_scale, hp.threads, hp.order = t, 1.0 if gs is None else gs, threads, ORDER_TORCH
                    g = grads[k].numpy()
                    st = lib.uvmrt_adamw_cpu(ctypes.byref(hp), w.ctypes.data, m.ctypes.data, v.ctypes.data,
                                             g.ctypes.data, n, h.ctypes.data)
                    assert st == 0, st
                    for name, got, exp in zip("wmv", (w, m, v), want[k]):
                        diff = np.flatnonzero(got.view(np.uint32) != exp.view(np.uint32))
                        bad += diff.size
                        if diff.size and not detail:
                            j = diff[0]
                            detail = f"(first: step {t}, {name}[{j}] {got[j]!r} vs torch {exp[j]!r})"
                    hb = np.flatnonzero(h != bf16_bits(w))
                    bad += hb.size
                    if hb.size and not detail:
                        detail = f"(first: step {t}, half_out[{hb[0]}])"
                report(f"case {ci} (lr {lr}, betas {b1}/{b2}, wd {wd}, factor {gs}, steps {steps}), {isa}, "
                       f"{threads} threads", bad, 4 * n * len(steps), detail)


def main():
    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 2
    lib = ctypes.CDLL(os.environ.get("UVMRT_LIBRARY", "libuvmrt.so"))
    lib.uvmrt_adamw_isa.restype = ctypes.c_char_p
    lib.uvmrt_adamw_cpu.argtypes = [ctypes.POINTER(AdamW)] + [ctypes.c_void_p] * 4 + [ctypes.c_size_t,
                                                                                      ctypes.c_void_p]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}", flush=True)
    reciprocals()
    adamw_runs(lib)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
