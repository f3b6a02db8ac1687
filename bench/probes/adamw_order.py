"""Which float operations torch.optim.AdamW(foreach=False) performs on CUDA, found by
comparing its update bit for bit with emulations (numpy, float32 with and without fused
multiply-adds). Prints, per state tensor and variant, the share of elements equal.

    python3 bench/probes/adamw_order.py [--device cuda] [--n 4194304] [--steps 3]
"""
import argparse
import itertools

import numpy as np
import torch

f32 = np.float32


def fma(a, b, c):  # float32 fused multiply-add, through float64 (exact product)
    return (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(f32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(0)
    lr, b1, b2, eps, wd = 3e-4, 0.9, 0.999, 1e-8, 0.01
    p = torch.nn.Parameter(torch.randn(a.n, device=a.device))
    opt = torch.optim.AdamW([p], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False)
    for step in range(1, a.steps + 1):
        g = torch.randn(a.n, device=a.device) * 1e-2
        w0 = p.detach().cpu().numpy().copy()
        st = opt.state.get(p, {})
        m0 = st["exp_avg"].cpu().numpy().copy() if st else np.zeros(a.n, f32)
        v0 = st["exp_avg_sq"].cpu().numpy().copy() if st else np.zeros(a.n, f32)
        p.grad = g
        opt.step()
        st = opt.state[p]
        w1, m1, v1 = (t.detach().cpu().numpy() for t in (p, st["exp_avg"], st["exp_avg_sq"]))
        gn = g.cpu().numpy()
        wt = f32(1 - b1)
        d = (gn - m0).astype(f32)
        ms = {"m+wt*d": (m0 + (wt * d).astype(f32)).astype(f32), "fma(wt,d,m)": fma(np.full_like(d, wt), d, m0),
              "b1*m+(1-b1)*g": ((f32(b1) * m0).astype(f32) + (wt * gn).astype(f32)).astype(f32)}
        vb = (v0 * f32(b2)).astype(f32)
        val = f32(1 - b2)
        vg = (val * gn).astype(f32)
        vs = {"vb+(val*g)*g": (vb + (vg * gn).astype(f32)).astype(f32), "fma(val*g,g,vb)": fma(vg, gn, vb),
              "vb+val*(g*g)": (vb + (val * (gn * gn).astype(f32)).astype(f32)).astype(f32),
              "fma(val,g*g,vb)": fma(np.full_like(gn, val), (gn * gn).astype(f32), vb)}
        for name, m in ms.items():
            print(f"step {step} exp_avg    {name:20s} {np.mean(m == m1) * 100:8.4f}% equal")
        for name, v in vs.items():
            print(f"step {step} exp_avg_sq {name:20s} {np.mean(v == v1) * 100:8.4f}% equal")
        # the weight from the true m1, v1
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        ss, bs = lr / bc1, bc2 ** 0.5
        wdecs = {"w*f(c)": (w0 * f32(1 - lr * wd)).astype(f32),
                 "w*c(double)": (w0.astype(np.float64) * (1 - lr * wd)).astype(f32)}
        sq = np.sqrt(v1).astype(f32)
        dens = {"sqrt/bs": (sq / f32(bs)).astype(f32), "sqrt*f(1/f(bs))": (sq * f32(f32(1) / f32(bs))).astype(f32),
                "sqrt*f(1/bs)": (sq * f32(1 / bs)).astype(f32),
                "sqrt/bs(double)": (sq.astype(np.float64) / bs).astype(f32)}
        s_ = f32(-ss)
        upds = {"w+s*(m/d)": lambda w, m, d: (w + (s_ * (m / d).astype(f32)).astype(f32)).astype(f32),
                "fma(s,m/d,w)": lambda w, m, d: fma(np.full_like(m, s_), (m / d).astype(f32), w),
                "w+(s*m)/d": lambda w, m, d: (w + ((s_ * m).astype(f32) / d).astype(f32)).astype(f32),
                "w+s*m/d(double)": lambda w, m, d: (w.astype(np.float64) + (-ss) * m.astype(np.float64)
                                                    / d.astype(np.float64)).astype(f32)}
        for (wn, wdec), (dn, den), (un, upd) in itertools.product(wdecs.items(), dens.items(), upds.items()):
            den = (den + f32(eps)).astype(f32)
            w = upd(wdec, m1, den)
            print(f"step {step} weight     {wn:11s} {dn:16s} {un:16s} {np.mean(w == w1) * 100:8.4f}% equal")

if __name__ == "__main__":
    main()
