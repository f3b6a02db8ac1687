#!/usr/bin/env python3
"""gpt_compare.py -- uvmrt-gpt against transformers' GPT2LMHeadModel on the same weights.

Usage:
  gpt_compare.py WEIGHTS GRADS LOSSLOG --tokens FILE|random:SEED|cycle:SEED [--batch B]
                 [--seq T] [--steps 20] [--lr 3e-4] [--lr-warmup 0] [--lr-total S]
                 [--final-lr-frac .1] [--weight-decay .1] [--clip 1] [--trainer-json RESULT]
                 [--precision bf16|fp32] [--device cuda|cpu] [--json OUT]
  gpt_compare.py --selftest [--device cpu|cuda]

For example, after
  uvmrt-gpt --depth 12 --batch 4 --seq 256 --steps 20 --seed 1 --dump-weights w.bin \
            --dump-grads g.bin --loss-log loss.txt --result-json r.json
run
  gpt_compare.py w.bin g.bin loss.txt --tokens random:1 --trainer-json r.json

WEIGHTS is what `uvmrt-gpt --dump-weights` wrote (the initial weights), GRADS what
`--dump-grads` wrote (step 1's gradients, before clipping and the update), LOSSLOG its
`--loss-log` (one line per step, "STEP LOSS" with the loss an exact hex float as C's %a
writes it; a line of the loss alone is read too). --tokens names the batches it trained
on: random:SEED or cycle:SEED are uvmrt-gpt's own synthetic batches (--tokens
random|cycle --seed SEED), generated here as examples/gpt/gpt_tokens.h does; or a file
of int32, K batches of B*(T+1) tokens (step s uses batch s mod K; inputs are a row's
first T tokens, targets the last T; B defaults to the file's size over T+1, one batch);
or the llm.c token file (one shard) it read with --data, batched as its data reader
does. B and T come from --batch/--seq, else from --trainer-json (uvmrt-gpt's
--result-json: batch, seq), else T is the weights' maxT.

Weights and gradient files: a header of 256 int32, [0] = 20241201, [1] = 1, [2] = maxT,
[3] = V, [4] = L, [5] = C, [6] = H (heads), [7] = Vp (padded vocabulary); then float32,
tensor-major, in llm.c's order: wte (Vp,C), wpe (maxT,C), ln1w (L,C), ln1b (L,C),
qkvw (L,3C,C), qkvb (L,3C), attprojw (L,C,C), attprojb (L,C), ln2w (L,C), ln2b (L,C),
fcw (L,4C,C), fcb (L,4C), fcprojw (L,C,4C), fcprojb (L,C), lnfw (C), lnfb (C). Weight
matrices are (out, in) like torch.nn.Linear; transformers' GPT-2 uses Conv1D, which
stores (in, out), so they are transposed on load. The LM head is tied to wte; wte's
rows V..Vp-1 (padding) are ignored.

Checks (issue 11): the step-0 loss within 1e-3 relative of LOSSLOG's first, each of the
16 tensors' gradient norm (all L layers together; wte's first V rows) within 2% of
GRADS', and the losses of --steps steps within 2% of LOSSLOG's. The optimizer is the
trainer's: AdamW betas (.9, .95), eps 1e-8, weight decay on the 2-D weights, global
gradient-norm clipping, and its schedule: lr * (s+1)/W for s < W, then cosine from lr at
step W to lr * F at step S-1, S the trainer's --steps (--lr-total; default --steps, or
--trainer-json's steps). The defaults are uvmrt-gpt's (lr 3e-4, W 0, F 0.1); pass its
--lr and --warmup when they were given (--trainer-json's lr, warmup_steps,
final_lr_frac, weight_decay, grad_clip keys are used where present). Exit status 0
when every check passed, 1 when one failed, 2 for unusable input.

--selftest: writes a tiny random weights file, reads it back (numpy), refuses damaged
files, and, where torch and transformers import, loads it into GPT2LMHeadModel and checks
its loss against an independent float64 numpy forward pass (1e-5) and its mapped
gradients against central differences of that pass: the loader's layout and transposes.
"""

import argparse
import json
import math
import os
import re
import sys
import tempfile

import numpy as np

MAGIC = 20241201
VERSION = 1
NAMES = ("wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
         "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb")


class FormatError(Exception):
    pass


def shapes(maxT, V, L, C, Vp):
    return {"wte": (Vp, C), "wpe": (maxT, C), "ln1w": (L, C), "ln1b": (L, C),
            "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C),
            "attprojb": (L, C), "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C),
            "fcb": (L, 4 * C), "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,),
            "lnfb": (C,)}


def read_weights(path):
    """-> (header dict, {name: float32 array})"""
    raw = np.fromfile(path, dtype="<i4", count=256)
    if raw.size < 256:
        raise FormatError(f"{path}: {raw.size * 4} bytes, shorter than the 1024-byte header")
    if raw[0] != MAGIC:
        raise FormatError(f"{path}: bad magic {raw[0]}, expected {MAGIC} (uvmrt-gpt "
                          "--dump-weights/--dump-grads)")
    if raw[1] != VERSION:
        raise FormatError(f"{path}: version {raw[1]}, expected {VERSION}")
    maxT, V, L, C, H, Vp = (int(x) for x in raw[2:8])
    if min(maxT, V, L, C, H, Vp) < 1 or Vp < V or C % H:
        raise FormatError(f"{path}: implausible header maxT={maxT} V={V} L={L} C={C} H={H} "
                          f"Vp={Vp}")
    sh = shapes(maxT, V, L, C, Vp)
    total = sum(int(np.prod(s)) for s in sh.values())
    size = os.path.getsize(path)
    if size != 1024 + 4 * total:
        raise FormatError(f"{path}: {size} bytes, expected {1024 + 4 * total} (1024-byte header "
                          f"+ {total} float32 for maxT={maxT} V={V} L={L} C={C} Vp={Vp})"
                          + (": truncated" if size < 1024 + 4 * total else ""))
    data = np.fromfile(path, dtype="<f4", offset=1024)
    out, off = {}, 0
    for n in NAMES:
        k = int(np.prod(sh[n]))
        out[n] = data[off:off + k].reshape(sh[n])
        off += k
    hdr = {"maxT": maxT, "V": V, "L": L, "C": C, "H": H, "Vp": Vp}
    return hdr, out


def write_weights(path, hdr, tensors):
    h = np.zeros(256, dtype="<i4")
    h[:8] = [MAGIC, VERSION, hdr["maxT"], hdr["V"], hdr["L"], hdr["C"], hdr["H"], hdr["Vp"]]
    with open(path, "wb") as f:
        f.write(h.tobytes())
        for n in NAMES:
            f.write(np.ascontiguousarray(tensors[n], dtype="<f4").tobytes())


def read_loss_log(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            s = line.split("#", 1)[0].strip()
            if not s:
                continue
            tok = s.replace(",", " ").split()[-1]  # "STEP LOSS" (uvmrt-gpt) or "LOSS"
            try:
                out.append(float.fromhex(tok) if "x" in tok.lower() else float(tok))
            except ValueError:
                raise FormatError(f"{path}:{i}: '{tok}' is not a (hex) float") from None
    return out


M64 = (1 << 64) - 1
TOKENS_SEED_XOR = 0x70C3E5
CYCLE_LEN = 61


def splitmix64(x):
    """train_math.h's mlp_splitmix64 over numpy uint64 arrays (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def synthetic_batch(kind, seed, step, B, T, V):
    """The (B, T+1) tokens of uvmrt-gpt --tokens random|cycle --seed SEED at a step
    (0-based): a port of examples/gpt/gpt_tokens.h, which it must follow."""
    u = np.uint64
    base = splitmix64(np.array([((seed ^ TOKENS_SEED_XOR) + step * 0x1000193) & M64], dtype=u))[0]
    b = np.arange(B, dtype=u)[:, None]
    t = np.arange(T + 1, dtype=u)[None, :]
    with np.errstate(over="ignore"):
        if kind == "random":
            h = splitmix64(base + b * u(T + 1) + t)
        else:
            start = splitmix64(base + b) % u(CYCLE_LEN)
            k = (start + t) % u(CYCLE_LEN)
            h = splitmix64(u((seed * 31) & M64) + k + u(7))
    return ((h >> u(33)) % u(V)).astype(np.int64)


def read_batches(path, B, T, V, steps):
    """The batches of a --tokens file, as int64 (B, T+1) arrays. Either int32 batches of
    B*(T+1) (B = 0: the file is one batch), or an llm.c token file (magic 20240520,
    uint16), read as uvmrt-gpt --data reads a single shard: batch k is tokens
    [k*B*T, (k+1)*B*T + 1), row b of it tokens [k*B*T + b*T, ... + T + 1); B must be given."""
    m = re.match(r"^(random|cycle):(\d+)$", path)
    if m:
        if B < 1:
            raise FormatError(f"--tokens {path}: synthetic batches need --batch")
        return [synthetic_batch(m.group(1), int(m.group(2)), s, B, T, V) for s in range(steps)]
    head = np.fromfile(path, dtype="<i4", count=3)
    if head.size == 3 and head[0] == 20240520:
        if head[1] != 1:
            raise FormatError(f"--tokens {path}: llm.c token file version {head[1]}, expected 1")
        if B < 1:
            raise FormatError(f"--tokens {path}: an llm.c token file needs --batch")
        t = np.fromfile(path, dtype="<u2", offset=1024)
        if t.size != head[2]:
            raise FormatError(f"--tokens {path}: {t.size} tokens, the header says {head[2]}")
        n = (t.size - 1) // (B * T)
        if n < 1:
            raise FormatError(f"--tokens {path}: {t.size} tokens, fewer than B*T+1 = "
                              f"{B * T + 1}")
        idx = np.arange(B)[:, None] * T + np.arange(T + 1)[None, :]
        out = [t[k * B * T + idx].astype(np.int64) for k in range(min(n, steps))]
    else:
        toks = np.fromfile(path, dtype="<i4")
        B = B or toks.size // (T + 1)
        per = B * (T + 1)
        if B < 1 or toks.size == 0 or toks.size % per:
            raise FormatError(f"--tokens {path}: {toks.size} int32, not a whole number of "
                              f"batches of B*(T+1) = {per}")
        out = [toks[i * per:(i + 1) * per].reshape(B, T + 1).astype(np.int64)
               for i in range(toks.size // per)]
    for b in out:
        if b.min() < 0 or b.max() >= V:
            raise FormatError(f"--tokens {path}: tokens outside 0..{V - 1}")
    return out


# ----------------------------------------------------------------------------
# an independent float64 forward pass (numpy), for the self-test

def np_loss(w, hdr, tokens):
    V, L, C, H = hdr["V"], hdr["L"], hdr["C"], hdr["H"]
    B, T1 = tokens.shape
    T, hs = T1 - 1, C // H
    inp, tgt = tokens[:, :-1], tokens[:, 1:]
    f = {k: v.astype(np.float64) for k, v in w.items()}

    def ln(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * g + b

    x = f["wte"][inp] + f["wpe"][:T]
    mask = np.triu(np.ones((T, T), dtype=bool), 1)
    for l in range(L):
        h = ln(x, f["ln1w"][l], f["ln1b"][l])
        qkv = h @ f["qkvw"][l].T + f["qkvb"][l]
        q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, H, hs).transpose(0, 2, 1, 3)
                   for i in range(3))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
        s[..., mask] = -np.inf
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        y = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ f["attprojw"][l].T + f["attprojb"][l]
        h = ln(x, f["ln2w"][l], f["ln2b"][l])
        u = h @ f["fcw"][l].T + f["fcb"][l]
        g = 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))
        x = x + g @ f["fcprojw"][l].T + f["fcprojb"][l]
    x = ln(x, f["lnfw"], f["lnfb"])
    logits = x @ f["wte"][:V].T
    mx = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - mx).sum(-1)) + mx[..., 0]
    picked = np.take_along_axis(logits, tgt[..., None], -1)[..., 0]
    return float((lse - picked).mean())


# ----------------------------------------------------------------------------
# transformers

def hf_model(hdr, device):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import gpt_torch
    cfg = gpt_torch.gpt2_config(hdr["L"], hdr["C"], hdr["V"], hdr["maxT"])
    cfg.n_head = hdr["H"]
    model = gpt_torch.build_model(cfg).to(device=device, dtype=torch.float32)
    return model


def _is_conv1d(mod):
    return type(mod).__name__ == "Conv1D"


def _modules(model, l):
    b = model.transformer.h[l]
    return {"ln1": b.ln_1, "qkv": b.attn.c_attn, "attproj": b.attn.c_proj, "ln2": b.ln_2,
            "fc": b.mlp.c_fc, "fcproj": b.mlp.c_proj}


def load_into(model, hdr, w):
    """Copies llm.c-layout weights into the model (in place: the head stays tied)."""
    import torch
    V, L = hdr["V"], hdr["L"]
    tr = model.transformer

    def put(param, arr):
        t = torch.from_numpy(np.ascontiguousarray(arr)).to(param.device, param.dtype)
        if tuple(t.shape) != tuple(param.shape):
            raise FormatError(f"shape {tuple(t.shape)} for a parameter of {tuple(param.shape)}")
        param.copy_(t)

    with torch.no_grad():
        put(tr.wte.weight, w["wte"][:V])
        put(tr.wpe.weight, w["wpe"])
        for l in range(L):
            m = _modules(model, l)
            put(m["ln1"].weight, w["ln1w"][l])
            put(m["ln1"].bias, w["ln1b"][l])
            put(m["ln2"].weight, w["ln2w"][l])
            put(m["ln2"].bias, w["ln2b"][l])
            for key in ("qkv", "attproj", "fc", "fcproj"):
                mod, W = m[key], w[key + "w"][l]
                put(mod.weight, W.T if _is_conv1d(mod) else W)
                put(mod.bias, w[key + "b"][l])
        put(tr.ln_f.weight, w["lnfw"])
        put(tr.ln_f.bias, w["lnfb"])
        if model.lm_head.weight.data_ptr() != tr.wte.weight.data_ptr():
            put(model.lm_head.weight, w["wte"][:V])
            print("gpt_compare.py: warning: lm_head is not tied to wte in this transformers; "
                  "copied (its gradient is then not wte's)", file=sys.stderr)


def grads_of(model, hdr):
    """The model's gradients in llm.c's layout (wte: the V real rows), float64 numpy."""
    L = hdr["L"]
    tr = model.transformer

    def g(p):
        return p.grad.detach().double().cpu().numpy() if p.grad is not None else np.zeros(
            tuple(p.shape))

    out = {"wte": g(tr.wte.weight), "wpe": g(tr.wpe.weight), "lnfw": g(tr.ln_f.weight),
           "lnfb": g(tr.ln_f.bias)}
    per = {n: [] for n in NAMES[2:14]}
    for l in range(L):
        m = _modules(model, l)
        per["ln1w"].append(g(m["ln1"].weight))
        per["ln1b"].append(g(m["ln1"].bias))
        per["ln2w"].append(g(m["ln2"].weight))
        per["ln2b"].append(g(m["ln2"].bias))
        for key in ("qkv", "attproj", "fc", "fcproj"):
            mod = m[key]
            gw = g(mod.weight)
            per[key + "w"].append(gw.T if _is_conv1d(mod) else gw)
            per[key + "b"].append(g(mod.bias))
    for n, v in per.items():
        out[n] = np.stack(v)
    return out


def hf_loss(model, batch, precision):
    import torch
    import torch.nn.functional as F
    inputs, targets = batch[:, :-1], batch[:, 1:]
    ctx = (torch.autocast(batch.device.type, dtype=torch.bfloat16) if precision == "bf16"
           else torch.autocast(batch.device.type, enabled=False))
    with ctx:
        logits = model(input_ids=inputs).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))


def lr_at(step, lr, warmup, total, final_frac):
    """uvmrt-gpt's schedule (gpt.c lr_at): linear warmup, then cosine from lr at step
    `warmup` to lr * final_frac at the last step, total - 1."""
    if step < warmup:
        return lr * (step + 1) / warmup
    span = total - warmup
    frac = (step - warmup) / (span - 1) if span > 1 else 0.0
    lo = lr * final_frac
    return lo + 0.5 * (1.0 + math.cos(math.pi * frac)) * (lr - lo)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


# ----------------------------------------------------------------------------
# compare

def compare(a):
    import torch
    hdr, w = read_weights(a.weights)
    ghdr, g_dump = read_weights(a.grads)
    if ghdr != hdr:
        raise FormatError(f"{a.grads}: header {ghdr} differs from {a.weights}'s {hdr}")
    losses_ref = read_loss_log(a.losslog)
    tj = {}
    if a.trainer_json:
        with open(a.trainer_json, encoding="utf-8") as f:
            tj = json.load(f)
        a.batch = a.batch or int(tj.get("batch") or 0)
        a.seq = a.seq or int(tj.get("seq") or 0)
    T = a.seq or hdr["maxT"]
    if T > hdr["maxT"]:
        raise FormatError(f"--seq {T}: longer than the weights' maxT {hdr['maxT']}")
    batches = [torch.from_numpy(b).to(a.device)
               for b in read_batches(a.tokens, a.batch, T, hdr["V"], a.steps)]
    B = batches[0].shape[0]
    if len(losses_ref) < a.steps:
        raise FormatError(f"{a.losslog}: {len(losses_ref)} losses, --steps wants {a.steps}")

    opt_cfg = {"lr": a.lr, "warmup_steps": a.lr_warmup, "steps": a.lr_total or a.steps,
               "final_lr_frac": a.final_lr_frac, "weight_decay": a.weight_decay,
               "grad_clip": a.clip}
    for k in opt_cfg:
        if k in tj and tj[k] is not None and not (k == "steps" and a.lr_total):
            opt_cfg[k] = tj[k]
    torch.manual_seed(0)
    model = hf_model(hdr, a.device)
    load_into(model, hdr, w)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": opt_cfg["weight_decay"]},
                             {"params": other, "weight_decay": 0.0}], lr=opt_cfg["lr"],
                            betas=(0.9, 0.95), eps=1e-8, fused=a.device.startswith("cuda"))
    checks, losses = [], []
    grad_rows = []
    for s in range(a.steps):
        loss = hf_loss(model, batches[s % len(batches)], a.precision)
        loss.backward()
        losses.append(loss.item())
        if s == 0:
            g_hf = grads_of(model, hdr)
            for n in NAMES:
                gd = g_dump[n][:hdr["V"]] if n == "wte" else g_dump[n]
                nd, nh = float(np.linalg.norm(gd.astype(np.float64))), float(np.linalg.norm(g_hf[n]))
                grad_rows.append((n, nd, nh, rel(nh, nd)))
        if opt_cfg["grad_clip"] and opt_cfg["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), opt_cfg["grad_clip"])
        for gr in opt.param_groups:
            gr["lr"] = lr_at(s, opt_cfg["lr"], opt_cfg["warmup_steps"], opt_cfg["steps"],
                             opt_cfg["final_lr_frac"])
        opt.step()
        opt.zero_grad(set_to_none=True)

    r0 = rel(losses[0], losses_ref[0])
    checks.append(("step-0 loss", f"{losses[0]:.6f} vs {losses_ref[0]:.6f}", r0, 1e-3))
    for n, nd, nh, r in grad_rows:
        checks.append((f"grad norm {n}", f"{nh:.5g} vs {nd:.5g}", r, 0.02))
    rs = [rel(losses[s], losses_ref[s]) for s in range(a.steps)]
    worst = int(np.argmax(rs))
    checks.append((f"losses of {a.steps} steps (worst: step {worst})",
                   f"{losses[worst]:.6f} vs {losses_ref[worst]:.6f}", rs[worst], 0.02))
    ok = all(r <= tol for _, _, r, tol in checks)
    print(f"gpt_compare.py: GPT-2 L={hdr['L']} C={hdr['C']} H={hdr['H']} V={hdr['V']} "
          f"(Vp {hdr['Vp']}), B={B} T={T}, {a.precision}, {a.steps} steps on {a.device}; "
          f"optimizer {opt_cfg}")
    print("| check | transformers vs uvmrt-gpt | relative difference | limit | |")
    print("|---|---|---:|---:|---|")
    for what, val, r, tol in checks:
        print(f"| {what} | {val} | {r:.2e} | {tol:g} | {'ok' if r <= tol else 'FAILED'} |")
    print(f"gpt_compare.py: {'all checks passed' if ok else 'some checks FAILED'}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"program": "gpt_compare.py", "ok": ok, "header": hdr, "batch": B,
                       "seq": T, "precision": a.precision, "optimizer": opt_cfg,
                       "losses_hf": losses, "losses_uvmrt": losses_ref[:a.steps],
                       "checks": [{"what": c[0], "values": c[1], "rel": c[2], "limit": c[3]}
                                  for c in checks]}, f, indent=1)
    return 0 if ok else 1


# ----------------------------------------------------------------------------
# self-test

def selftest(a):
    rng = np.random.default_rng(5)
    hdr = {"maxT": 8, "V": 37, "L": 2, "C": 16, "H": 2, "Vp": 64}
    sh = shapes(hdr["maxT"], hdr["V"], hdr["L"], hdr["C"], hdr["Vp"])
    w = {n: (rng.standard_normal(s) * (0.3 if n not in ("ln1w", "ln2w", "lnfw") else 0.1)
             + (1.0 if n in ("ln1w", "ln2w", "lnfw") else 0.0)).astype(np.float32)
         for n, s in sh.items()}
    w["wte"][hdr["V"]:] = 0
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "w.bin")
        write_weights(p, hdr, w)
        h2, w2 = read_weights(p)
        if h2 != hdr or any(not np.array_equal(w[n], w2[n]) for n in NAMES):
            print("selftest: FAILED: round trip of the weights file")
            fails += 1
        else:
            print("selftest: ok: weights file round trip")
        raw = open(p, "rb").read()
        for what, data, want in (("truncated", raw[:-4], "truncated"),
                                 ("bad magic", b"\x00" * 4 + raw[4:], "bad magic"),
                                 ("short header", raw[:100], "header")):
            q = os.path.join(d, "bad.bin")
            open(q, "wb").write(data)
            try:
                read_weights(q)
                print(f"selftest: FAILED: {what} file accepted")
                fails += 1
            except FormatError as e:
                good = want in str(e) and q in str(e)
                fails += not good
                print(f"selftest: {'ok' if good else 'FAILED'}: {what}: {e}")
        # an llm.c shard gives the batches uvmrt-gpt's data reader gives (data.h)
        q = os.path.join(d, "shard.bin")
        h = np.zeros(256, dtype="<i4")
        h[:3] = [20240520, 1, 40]
        with open(q, "wb") as f:
            f.write(h.tobytes())
            f.write(np.arange(40, dtype="<u2").tobytes())
        bs = read_batches(q, 2, 8, 50, 99)
        good = (len(bs) == 2 and bs[1][0].tolist() == list(range(16, 25))
                and bs[1][1].tolist() == list(range(24, 33)))
        fails += not good
        print(f"selftest: {'ok' if good else 'FAILED'}: llm.c shard as --tokens: 2 batches, "
              f"batch 1 rows {bs[1][0].tolist()}, ...")
        q = os.path.join(d, "toks.bin")
        np.arange(18, dtype="<i4").tofile(q)
        bs = read_batches(q, 0, 8, 50, 99)
        good = len(bs) == 1 and bs[0].shape == (2, 9) and bs[0][1, 0] == 9
        fails += not good
        print(f"selftest: {'ok' if good else 'FAILED'}: int32 batches as --tokens")
        # uvmrt-gpt's synthetic batches: values from the C code (gpt_tokens.h), B=2, T=4
        r0 = synthetic_batch("random", 1, 0, 2, 4, 50257)
        r1 = synthetic_batch("random", 1, 1, 2, 4, 50257)
        c3 = synthetic_batch("cycle", 7, 3, 2, 4, 50257)
        good = (r0[:, :4].ravel().tolist() == [12594, 17677, 35113, 6267, 37362, 14325, 21265,
                                               49715] and r0[0, 4] == 29948 and r0[1, 4] == 40943
                and r1[0, :4].tolist() == [40376, 8861, 38234, 21662] and r1[1, 4] == 22446
                and c3[:, :4].ravel().tolist() == [1035, 27670, 19823, 18292, 50028, 46635,
                                                   29147, 443] and c3[1, 4] == 31665)
        fails += not good
        print(f"selftest: {'ok' if good else 'FAILED'}: --tokens random:1 / cycle:7 give "
              "uvmrt-gpt's batches")
        lp = os.path.join(d, "loss.log")
        open(lp, "w").write(f"1 {(10.8125).hex()}\n2 {(1 / 3).hex()}\n\n")
        ll = read_loss_log(lp)
        good = ll == [10.8125, 1 / 3]
        fails += not good
        print(f"selftest: {'ok' if good else 'FAILED'}: hex-float loss log {ll}")

    tokens = rng.integers(0, hdr["V"], size=(2, hdr["maxT"] + 1))
    ref = np_loss(w, hdr, tokens)
    print(f"selftest: float64 numpy loss {ref:.8f} (ln V = {math.log(hdr['V']):.4f})")
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"selftest: transformers part skipped: {e}")
        return 1 if fails else 0
    torch.manual_seed(0)
    model = hf_model(hdr, a.device)
    load_into(model, hdr, w)
    batch = torch.from_numpy(tokens).to(a.device)
    loss = hf_loss(model, batch, "fp32")
    loss.backward()
    r = rel(loss.item(), ref)
    good = r <= 1e-5
    fails += not good
    print(f"selftest: {'ok' if good else 'FAILED'}: transformers loss {loss.item():.8f}, "
          f"relative difference {r:.2e} (limit 1e-5)")
    g = grads_of(model, hdr)
    eps, worst = 1e-4, (0.0, "")
    for n in NAMES:
        for _ in range(2):
            idx = tuple(int(rng.integers(0, s)) for s in w[n].shape)
            if n == "wte":
                idx = (int(rng.integers(0, hdr["V"])),) + idx[1:]
            wp = {k: v.copy() for k, v in w.items()}
            wp[n][idx] += eps
            lp = np_loss(wp, hdr, tokens)
            wp[n][idx] -= 2 * eps
            lm = np_loss(wp, hdr, tokens)
            fd = (lp - lm) / (2 * eps)
            err = abs(fd - g[n][idx]) / max(1e-3, abs(fd))
            if err > worst[0]:
                worst = (err, f"{n}{list(idx)}: transformers {g[n][idx]:.6g}, central "
                              f"difference {fd:.6g}")
    good = worst[0] <= 2e-2
    fails += not good
    print(f"selftest: {'ok' if good else 'FAILED'}: gradients in llm.c layout against central "
          f"differences, 2 elements of each tensor: worst relative error {worst[0]:.2e} "
          f"({worst[1]}; limit 2e-2)")
    return 1 if fails else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights", nargs="?")
    ap.add_argument("grads", nargs="?")
    ap.add_argument("losslog", nargs="?")
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--tokens")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--lr-warmup", type=int, default=0)
    ap.add_argument("--lr-total", type=int, default=0,
                    help="the trainer's --steps: the cosine ends at its last step (0: --steps)")
    ap.add_argument("--final-lr-frac", type=float, default=0.1)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--trainer-json")
    ap.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    ap.add_argument("--device", default=None)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    if a.device is None:
        try:
            import torch
            a.device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            a.device = "cpu"
    try:
        if a.selftest:
            return selftest(a)
        if not (a.weights and a.grads and a.losslog and a.tokens):
            ap.error("expected WEIGHTS GRADS LOSSLOG and --tokens FILE (or --selftest)")
        return compare(a)
    except (FormatError, OSError) as e:
        print(f"gpt_compare.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
