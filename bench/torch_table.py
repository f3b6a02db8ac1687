#!/usr/bin/env python3
"""torch_table.py -- the results table of the PyTorch benchmark (bench/run-torch.sh, issue 20).

  bench/torch_table.py OUTDIR

Reads OUTDIR/torch.ROW.json (bench/torch_train.py --json; uvmrt-gpt's results converted by
it) and OUTDIR/floor.json (torch_train.py --measure-floor), prints one markdown table per
model and writes them to OUTDIR/table.md. Standard library only.

Columns:
  ms/step, tokens/s    median of the timed steps (after the warm-up ones), B*T per step
  peak GPU GiB         torch.cuda.max_memory_allocated; uvmrt.torch rows: uvmrt's peak
                       resident bytes plus torch's (uvmrt.torch.max_memory_allocated);
                       uvmrt-gpt: its peak resident plus its device workspace
  host RSS GiB         peak resident set (VmHWM) of the row's processes, summed
  GB in, GB out        per step, host to device and back. uvmrt.torch rows: step_stats of a
                       steady-state step (prefetch + remote reads in, evictions + remote
                       writes out); uvmrt-gpt: its own counters; DeepSpeed and FSDP2 rows
                       (marked *): memcpy bytes the CUDA profiler saw in one extra step;
                       otherwise n/a (not measured)
  faults/step          GPU page faults per step (uvmrt rows only)
  floor ms (bound)     the largest of: the same model's compute-only step (forward and
                       backward, resident), GB in / pinned host-to-device bandwidth, GB out /
                       pinned device-to-host bandwidth, host bytes / host memory bandwidth
                       (floor.json). Host bytes: the DMA bytes both ways plus 28 bytes per
                       parameter updated by a CPU AdamW (fp32 parameter, gradient and two
                       moments read, three written): every parameter for the DeepSpeed and
                       FSDP2 rows, step_stats' cpu_params for uvmrt.torch rows where it is
                       reported. uvmrt-gpt rows: the link and host terms only
  x floor              ms/step over the floor
  x DeepSpeed          tokens/s over the tokens/s of the same model's DeepSpeed row in the
                       same OUTDIR (ZeRO-2 where there is one, else ZeRO-3)
A failed, timed-out or skipped row shows its error instead of figures.

Then issue 20's targets, for the rows of gpt2-d48 and llama-3b that the folder holds:
uvmrt.torch at 8G at least 2x the tokens/s of DeepSpeed (GPT-2: ZeRO-2, Llama: ZeRO-3) at
no more peak GPU memory; at 16G within 1.3x of PyTorch resident's step time (GPT-2); every
uvmrt.torch row's host RSS no higher than that DeepSpeed row's.
"""

import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tablelib  # noqa: E402

GIB = 1 << 30
MODEL_TITLES = {
    "gpt2-d48": "HF GPT-2 d48 (GPT2LMHeadModel, 48 layers, 1600 channels)",
    "llama-3b": "HF Llama 3.4B (LlamaForCausalLM, 26 layers, hidden 3200, untied head)",
    "gpt2-tiny": "HF GPT-2 tiny (2 layers, 64 channels; tests)",
    "llama-tiny": "HF Llama tiny (2 layers, hidden 64; tests)",
}
ROW_ORDER = ("compute-only", "resident", "uvmrt", "uvmrt-gpt", "ds-zero2", "ds-zero3", "fsdp2")
CPU_ADAM_BYTES = 28


def label(r):
    kind, budget = r.get("row"), r.get("budget")
    ck = ", checkpointing" if r.get("checkpointing") is True else ""
    if kind == "compute-only":
        return f"PyTorch forward + backward only (compute floor){ck}"
    if kind == "resident":
        return f"PyTorch resident{ck}"
    if kind == "uvmrt":
        st = r.get("uvmrt_step_stats") or {}
        ch = ""
        if st.get("cpu_layers") is not None:
            ch = (f" (chose {st['cpu_layers']} CPU layers, "
                  f"{st.get('recompute_layers', '?')} recomputing)")
        return f"uvmrt.torch, budget {budget}{ch}"
    if kind == "uvmrt-gpt":
        ch = ""
        if r.get("gpt_cpu_layers") is not None:
            ch = (f" (chose {r['gpt_cpu_layers']} CPU layers, "
                  f"{r.get('gpt_recompute_blocks', '?')} recomputing)")
        return f"uvmrt-gpt (CUDA C), budget {budget}{ch}"
    if kind == "ds-zero2":
        return f"DeepSpeed ZeRO-2, offload_optimizer cpu{ck}"
    if kind == "ds-zero3":
        return f"DeepSpeed ZeRO-3, offload_param + optimizer cpu{ck}"
    if kind == "fsdp2":
        return f"FSDP2 CPUOffloadPolicy, one rank{ck}"
    return str(kind)


def link_gb(r):
    """(GB in, GB out, marker) per step, or (None, None, '')."""
    kind = r.get("row")
    st = r.get("uvmrt_step_stats") or {}
    if kind == "uvmrt" and st:
        gin = (st.get("prefetch_bytes", 0) or 0) + (st.get("remote_read_bytes", 0) or 0)
        gout = (st.get("evict_bytes", 0) or 0) + (st.get("remote_write_bytes", 0) or 0)
        return gin / 1e9, gout / 1e9, ""
    if kind == "uvmrt-gpt" and st.get("gb_in_per_step") is not None:
        return st["gb_in_per_step"], st.get("gb_out_per_step"), ""
    lb = r.get("link_bytes")
    if lb:
        return lb.get("h2d", 0) / 1e9, lb.get("d2h", 0) / 1e9, "*"
    return None, None, ""


def faults(r):
    st = r.get("uvmrt_step_stats") or {}
    if r.get("row") == "uvmrt":
        return st.get("gpu_faults")
    if r.get("row") == "uvmrt-gpt":
        return st.get("faults_per_step")
    return None


def cpu_params(r):
    """Parameters whose AdamW runs on the CPU each step (None: not known)."""
    if r.get("row") in ("ds-zero2", "ds-zero3", "fsdp2"):
        return r.get("params")
    st = r.get("uvmrt_step_stats") or {}
    return st.get("cpu_params")


def floor_of(r, compute_ms, fl):
    """(floor ms, bound) or (None, None)."""
    terms = []
    # uvmrt-gpt runs its own kernels: PyTorch's compute-only step is no floor of it
    if compute_ms and r.get("row") != "uvmrt-gpt":
        terms.append((compute_ms, "compute"))
    gin, gout, _ = link_gb(r)
    fl = fl or {}
    if gin is not None and fl.get("h2d_bps"):
        terms.append((gin * 1e9 / fl["h2d_bps"] * 1e3, "link in"))
    if gout is not None and fl.get("d2h_bps"):
        terms.append((gout * 1e9 / fl["d2h_bps"] * 1e3, "link out"))
    if fl.get("host_bps"):
        host = ((gin or 0) + (gout or 0)) * 1e9 + CPU_ADAM_BYTES * (cpu_params(r) or 0)
        if host > 0:
            terms.append((host / fl["host_bps"] * 1e3, "host mem"))
    if not terms:
        return None, None
    return max(terms)


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def rows_of(outdir):
    out = []
    for path in sorted(glob.glob(os.path.join(outdir, "torch.*.json"))):
        if path.endswith(".gpt.json"):
            continue
        r = tablelib.load(path)
        if not isinstance(r, dict):
            continue
        r.setdefault("name", os.path.basename(path)[len("torch."):-len(".json")])
        out.append(r)
    return out


def order_key(r):
    kind = r.get("row")
    k = ROW_ORDER.index(kind) if kind in ROW_ORDER else len(ROW_ORDER)
    b = r.get("budget_bytes") or 0
    return (k, -b, r.get("name", ""))


def model_of(r):
    if r.get("model"):
        return r["model"]
    n = r.get("name", "")
    return "gpt2-d48" if n.startswith("gpt") else "llama-3b" if n.startswith("llama") else "?"


def find(rows, model, kind, budget=None):
    for r in rows:
        if (model_of(r) == model and r.get("row") == kind and r.get("ok") and
                (budget is None or str(r.get("budget", "")).upper() == budget)):
            return r
    return None


def targets(rows):
    """Issue 20's targets: list of (target, measured, met: True/False/None)."""
    out = []
    for model, ds_kind, ds_name in (("gpt2-d48", "ds-zero2", "ZeRO-2"),
                                    ("llama-3b", "ds-zero3", "ZeRO-3")):
        if not any(model_of(r) == model for r in rows):
            continue
        short = "GPT-2 d48" if model.startswith("gpt2") else "Llama 3.4B"
        ds = find(rows, model, ds_kind)
        u8 = find(rows, model, "uvmrt", "8G")
        t = f"{short} at 8G: >= 2x the tokens/s of DeepSpeed {ds_name} offload"
        if ds and u8:
            x = u8["tokens_per_s"] / ds["tokens_per_s"]
            out.append((t, f"{u8['tokens_per_s']:.0f} / {ds['tokens_per_s']:.0f} = {x:.2f}x",
                        x >= 2.0))
            g8, gd = u8.get("peak_gpu_bytes"), ds.get("peak_gpu_bytes")
            if g8 is not None and gd is not None:
                out.append((f"{short} at 8G: peak GPU memory <= DeepSpeed {ds_name}'s",
                            f"{g8 / GIB:.2f} GiB against {gd / GIB:.2f} GiB", g8 <= gd))
        else:
            out.append((t, "not measured (" + ", ".join(
                n for n, r in ((f"{ds_kind} row", ds), ("uvmrt 8G row", u8)) if not r) +
                " missing or failed)", None))
        if model == "gpt2-d48":
            res, u16 = find(rows, model, "resident"), find(rows, model, "uvmrt", "16G")
            t = "GPT-2 d48 at 16G: step time within 1.3x of PyTorch resident's"
            if res and u16:
                x = u16["ms_per_step_median"] / res["ms_per_step_median"]
                out.append((t, f"{u16['ms_per_step_median']:.1f} / {res['ms_per_step_median']:.1f} ms"
                            f" = {x:.2f}x", x <= 1.3))
            else:
                out.append((t, "not measured", None))
        for u in (r for r in rows if model_of(r) == model and r.get("row") == "uvmrt" and r.get("ok")):
            hu, hd = u.get("peak_host_rss_bytes"), (ds or {}).get("peak_host_rss_bytes")
            t = f"{short} uvmrt.torch {u.get('budget')}: host RSS <= DeepSpeed {ds_name}'s"
            if hu is not None and hd is not None:
                out.append((t, f"{hu / GIB:.1f} GiB against {hd / GIB:.1f} GiB", hu <= hd))
            else:
                out.append((t, "not measured", None))
    return out


def table(outdir):
    rows = rows_of(outdir)
    fl = tablelib.load(os.path.join(outdir, "floor.json"))
    if fl is not None and not fl.get("ok", True):
        fl = None
    lines = []
    if not rows:
        return None
    models = []
    for r in rows:
        m = model_of(r)
        if m not in models:
            models.append(m)
    for m in models:
        group = sorted([r for r in rows if model_of(r) == m], key=order_key)
        ok = [r for r in group if r.get("ok")]
        shape = next((r for r in ok if r.get("batch")), group[0])
        compute = next((r for r in ok if r.get("row") == "compute-only"), None)
        compute_ms = compute["ms_per_step_median"] if compute else None
        ref = next((r for r in ok if r.get("row") == "ds-zero2"), None) or \
            next((r for r in ok if r.get("row") == "ds-zero3"), None)
        params = next((r.get("params") for r in ok if r.get("params")), None)
        ptxt = ""
        if params:
            ptxt = (f", {params / 1e9:.2f} B parameters" if params >= 1e8
                    else f", {params / 1e6:.2f} M parameters")
        lines.append(f"### {MODEL_TITLES.get(m, m)}{ptxt}, B={shape.get('batch')}, "
                     f"T={shape.get('seq')}, random tokens, bf16 autocast, fp32 AdamW")
        lines.append("")
        lines.append("| row | run | ms/step | tokens/s | peak GPU GiB | host RSS GiB | GB in/step | "
                     "GB out/step | faults/step | loss first -> last | floor ms (bound) | "
                     "x floor | x DeepSpeed |")
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
        starred = False
        for r in group:
            name = r.get("name", "?")
            if not r.get("ok"):
                err = str(r.get("error") or "failed, no error recorded").replace("|", "/")
                err = " ".join(err.split())
                if len(err) > 160:
                    err = err[:157] + "..."
                if not r.get("skipped"):
                    err = f"FAILED: {err}"
                lines.append(f"| {name} | {label(r)} | {err} |" + " |" * 10)
                continue
            ms, tok = r["ms_per_step_median"], r["tokens_per_s"]
            gin, gout, mark = link_gb(r)
            starred |= bool(mark)
            gpu = r.get("peak_gpu_bytes")
            rss = r.get("peak_host_rss_bytes")
            losses = r.get("losses") or []
            loss = f"{losses[0]:.4f} -> {losses[-1]:.4f}" if losses else "-"
            floor, bound = floor_of(r, compute_ms, fl)
            xf = fmt(ms / floor if floor else None, ".2f")
            xd = fmt(tok / ref["tokens_per_s"] if ref else None, ".2f")
            f = faults(r)
            lines.append(
                f"| {name} | {label(r)} | {ms:.1f} | {tok:.0f} | "
                f"{fmt(gpu / GIB if gpu is not None else None, '.2f')} | "
                f"{fmt(rss / GIB if rss is not None else None, '.1f')} | "
                f"{fmt(gin, '.2f', 'n/a')}{mark} | {fmt(gout, '.2f', 'n/a')}{mark} | "
                f"{fmt(f, '.0f')} | {loss} | "
                f"{fmt(floor, '.1f')}{f' ({bound})' if bound else ''} | {xf} | {xd} |")
        lines.append("")
        notes = []
        if ref:
            notes.append(f"x DeepSpeed: against {ref.get('name')} ({ref['tokens_per_s']:.0f} tokens/s).")
        else:
            notes.append("x DeepSpeed: no DeepSpeed row of this model completed in this run.")
        if not compute:
            notes.append("No compute-only row completed: floors count the link and host memory only.")
        if any(r.get("row") == "uvmrt-gpt" and r.get("ok") for r in group):
            notes.append("uvmrt-gpt's floor counts the link and host memory only (its kernels are "
                         "not PyTorch's; its host bytes leave out its CPU AdamW).")
        if starred:
            notes.append("*: memcpy bytes the CUDA profiler (torch.profiler) saw in one extra step "
                         "after the timed ones.")
        lines.extend(notes)
        lines.append("")
    tg = targets(rows)
    if tg:
        lines.append("| target (issue 20) | measured | |")
        lines.append("|---|---|---|")
        for t, m, ok in tg:
            lines.append(f"| {t} | {m} | {'-' if ok is None else 'met' if ok else 'missed'} |")
        lines.append("")
    if fl:
        parts = []
        if fl.get("h2d_bps"):
            parts.append(f"pinned host->device {fl['h2d_bps'] / 1e9:.1f} GB/s, device->host "
                         f"{fl['d2h_bps'] / 1e9:.1f} GB/s (torch copies of 1 GiB pinned)")
        if fl.get("host_bps"):
            size = (fl.get("host_copy_bytes") or 0) / 2
            how = (f"a copy of {size / GIB:.2f} GiB between CPU tensors, "
                   f"{fl.get('threads', '?')} threads")
            if fl.get("host_adamw_bps"):
                how = (f"the faster of {fl['host_copy_bps'] / 1e9:.1f} GB/s by {how} and "
                       f"{fl['host_adamw_bps'] / 1e9:.1f} GB/s by uvmrt_adamw_cpu")
            parts.append(f"host memory {fl['host_bps'] / 1e9:.1f} GB/s read + written ({how})")
        lines.append("Same run: " + "; ".join(parts) + ".")
    else:
        lines.append("No floor.json (the floor row): floors count the compute-only step only.")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        out = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        out.write(__doc__)
        return 0 if out is sys.stdout else 2
    outdir = argv[0]
    if not os.path.isdir(outdir):
        print(f"torch_table.py: {outdir}: not a folder", file=sys.stderr)
        return 2
    text = table(outdir)
    if text is None:
        print(f"torch_table.py: {outdir}: no torch.*.json results", file=sys.stderr)
        return 1
    tablelib.write_table(outdir, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
