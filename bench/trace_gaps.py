#!/usr/bin/env python3
"""trace_gaps.py -- where does a training step's GPU sit idle, and why?

    python3 bench/trace_gaps.py TRACE.json[.gz] [--top N] [--json OUT]

Reads a Chrome trace exported by torch.profiler (CPU and CUDA activities) of one step and
prints, for the whole step and for each phase the step marked with record_function
("phase:NAME", as bench/torch_train.py --trace does):
  - each stream's busy time (the union of its kernels, copies and memsets) and the bytes
    its copies moved each way (and to or from managed memory, which the profiler names
    neither way);
  - the compute stream's (the one with the most kernel time) idle time, split by cause:
      cpu:WHAT     the next kernel was launched after the gap began: the launching thread
                   was busy with WHAT (its innermost CPU op or runtime call then);
      wait:STREAM (OP)  the next kernel had been launched before the gap: it waited on
                   work of another stream (the busiest one during the gap, with the
                   operation it ran most then), or on nothing seen (wait:none);
  - the largest gaps, each with its cause;
  - the CUDA runtime calls that block the host (synchronize, blocking copies, allocations)
    with their total time per thread.
Why a tool: a step slower than its compute is slow for one of these reasons, and the trace
says which without guessing. Nothing here is specific to uvmrt.
"""
import argparse
import bisect
import gzip
import json
import sys
from collections import defaultdict

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
BLOCKING = ("Synchronize", "cudaMemcpy", "cudaMalloc", "cudaFree", "cudaHostAlloc",
            "cudaHostRegister", "cudaMallocHost", "cudaFreeHost", "cudaHostUnregister",
            "cuMemAlloc", "cuMemFree", "cuMemMap", "cuMemUnmap", "cuMemCreate", "cuMemRelease",
            "cuMemSetAccess", "cuMemAddressReserve", "cudaStreamWaitEvent")
MIN_GAP_US = 20.0


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    evs = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    return [e for e in evs if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


def stream_of(e):
    a = e.get("args") or {}
    return a.get("stream", e.get("tid"))


def union(intervals):
    """Merged (start, end) list of possibly overlapping intervals."""
    out = []
    for s, t in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], t)
        else:
            out.append([s, t])
    return out


def clip(intervals, lo, hi):
    return [(max(s, lo), min(t, hi)) for s, t in intervals if t > lo and s < hi]


def busy(intervals, lo, hi):
    return sum(t - s for s, t in union(clip(intervals, lo, hi)))


class Busy:
    """A stream's merged busy intervals, for quick 'how busy within [lo, hi)' queries."""

    def __init__(self, intervals):
        self.iv = union(intervals)
        self.starts = [s for s, _ in self.iv]

    def within(self, lo, hi):
        i = max(bisect.bisect_right(self.starts, lo) - 1, 0)
        tot = 0.0
        while i < len(self.iv) and self.iv[i][0] < hi:
            s, t = self.iv[i]
            tot += max(0.0, min(t, hi) - max(s, lo))
            i += 1
        return tot


class Trace:
    def __init__(self, events):
        self.gpu = [e for e in events if e.get("cat") in GPU_CATS]
        if not self.gpu:
            raise ValueError("the trace has no kernel, memcpy or memset events: was it taken "
                             "with ProfilerActivity.CUDA on a GPU?")
        self.runtime = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")]
        self.cpu = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation",
                                                          "python_function")]
        self.launch_by_corr = {}
        for e in self.runtime:
            c = (e.get("args") or {}).get("correlation")
            if c is not None:
                self.launch_by_corr[c] = e
        self.phases = {}
        for e in events:
            n = e.get("name", "")
            if e.get("cat") == "user_annotation" and n.startswith("phase:"):
                self.phases[n[6:]] = (e["ts"], e["ts"] + e["dur"])  # the last one wins
        self.lo = min(e["ts"] for e in self.gpu)
        self.hi = max(e["ts"] + e["dur"] for e in self.gpu)
        self.by_stream = defaultdict(list)
        for e in self.gpu:
            self.by_stream[stream_of(e)].append(e)
        kern = defaultdict(float)
        for e in self.gpu:
            if e.get("cat") == "kernel":
                kern[stream_of(e)] += e["dur"]
        self.compute = max(kern, key=kern.get) if kern else max(
            self.by_stream, key=lambda s: len(self.by_stream[s]))
        self.busy = {s: Busy([(e["ts"], e["ts"] + e["dur"]) for e in evs])
                     for s, evs in self.by_stream.items()}
        self.cpu_by_tid = defaultdict(list)
        for e in self.cpu + self.runtime:
            self.cpu_by_tid[e.get("tid")].append(e)
        self.cpu_starts = {}
        for tid, evs in self.cpu_by_tid.items():
            evs.sort(key=lambda e: e["ts"])
            self.cpu_starts[tid] = [e["ts"] for e in evs]

    def innermost(self, tid, t, skip_runtime=False, scan=20000):
        """The innermost CPU op or runtime call of thread tid running at time t: of the ops
        that contain t, the one that began last (ops nest)."""
        evs = self.cpu_by_tid.get(tid, ())
        i = bisect.bisect_right(self.cpu_starts.get(tid, []), t) - 1
        while i >= 0 and scan > 0:
            e = evs[i]
            if e["ts"] + e["dur"] > t and not (skip_runtime and e.get("cat") in
                                                ("cuda_runtime", "cuda_driver")):
                return e
            i -= 1
            scan -= 1
        return None

    def gaps(self, lo, hi):
        """The compute stream's idle intervals inside [lo, hi), each with its cause."""
        evs = sorted((e for e in self.by_stream[self.compute]
                      if e["ts"] + e["dur"] > lo and e["ts"] < hi), key=lambda e: e["ts"])
        out = []
        end = lo
        for e in evs:
            if e["ts"] - end >= MIN_GAP_US:
                out.append((end, e["ts"], self.cause(end, e)))
            end = max(end, e["ts"] + e["dur"])
        return out

    def cause(self, gap_start, nxt):
        launch = self.launch_by_corr.get((nxt.get("args") or {}).get("correlation"))
        if launch is not None and launch["ts"] > gap_start:
            # the host was late: what was the launching thread doing in the gap's middle?
            # (the innermost op, and the op around it when that is a runtime call)
            mid = (gap_start + nxt["ts"]) / 2
            what = self.innermost(launch.get("tid"), mid)
            if what is None:
                return "cpu:(no op recorded)"
            label = "cpu:" + what["name"][:60]
            if what.get("cat") in ("cuda_runtime", "cuda_driver"):
                around = self.innermost(launch.get("tid"), mid, skip_runtime=True)
                if around is not None:
                    label += " < " + around["name"][:60]
            return label
        # launched in time: the kernel waited on another stream's work
        gap_end = nxt["ts"]
        others = {s: b.within(gap_start, gap_end) for s, b in self.busy.items()
                  if s != self.compute}
        others = {s: b for s, b in others.items() if b > 0}
        if not others:
            return "wait:none"
        s = max(others, key=others.get)
        return f"wait:stream {s} ({self.busiest_op(s, gap_start, gap_end)})"

    def busiest_op(self, s, lo, hi):
        """The name of stream s's operation that overlaps [lo, hi) the most: what the
        compute stream waited beside (a copy's kind, a kernel)."""
        best, name = 0.0, "?"
        for e in self.by_stream[s]:
            o = min(e["ts"] + e["dur"], hi) - max(e["ts"], lo)
            if o > best:
                best, name = o, e.get("name", "?")
        return name[:48]

    def report(self, name, lo, hi, top):
        out = {"phase": name, "wall_ms": (hi - lo) / 1e3, "streams": {}}
        for s, evs in sorted(self.by_stream.items(), key=lambda kv: str(kv[0])):
            iv = [(e["ts"], e["ts"] + e["dur"]) for e in evs]
            b = busy(iv, lo, hi)
            if b <= 0:
                continue
            h2d = sum(int((e.get("args") or {}).get("bytes", 0)) for e in evs
                      if e.get("cat") == "gpu_memcpy" and "HtoD" in e.get("name", "")
                      and lo <= e["ts"] < hi)
            d2h = sum(int((e.get("args") or {}).get("bytes", 0)) for e in evs
                      if e.get("cat") == "gpu_memcpy" and "DtoH" in e.get("name", "")
                      and lo <= e["ts"] < hi)
            managed = sum(int((e.get("args") or {}).get("bytes", 0)) for e in evs
                          if e.get("cat") == "gpu_memcpy" and "Managed" in e.get("name", "")
                          and lo <= e["ts"] < hi)
            kern = busy([(e["ts"], e["ts"] + e["dur"]) for e in evs if e.get("cat") == "kernel"],
                        lo, hi)
            out["streams"][str(s)] = {"busy_ms": b / 1e3, "kernel_ms": kern / 1e3,
                                      "h2d_gb": h2d / 1e9, "d2h_gb": d2h / 1e9,
                                      "managed_gb": managed / 1e9}
        gaps = self.gaps(lo, hi)
        by_cause = defaultdict(float)
        for s, t, c in gaps:
            by_cause[c] += t - s
        out["compute_stream"] = str(self.compute)
        out["idle_ms"] = sum(t - s for s, t, _ in gaps) / 1e3
        out["idle_by_cause_ms"] = {c: v / 1e3 for c, v in
                                   sorted(by_cause.items(), key=lambda kv: -kv[1])}
        out["largest_gaps"] = [{"at_ms": (s - self.lo) / 1e3, "ms": (t - s) / 1e3, "cause": c}
                               for s, t, c in sorted(gaps, key=lambda g: g[0] - g[1])[:top]]
        return out

    def blocking(self):
        tot = defaultdict(float)
        for e in self.runtime:
            n = e.get("name", "")
            if any(k in n for k in BLOCKING):
                tot[(e.get("tid"), n)] += e["dur"]
        return [{"thread": str(tid), "call": n, "ms": v / 1e3}
                for (tid, n), v in sorted(tot.items(), key=lambda kv: -kv[1]) if v >= 100]


def analyse(events, top=15):
    tr = Trace(events)
    res = {"step": tr.report("step", tr.lo, tr.hi, top), "phases": []}
    for name, (lo, hi) in sorted(tr.phases.items(), key=lambda kv: kv[1][0]):
        res["phases"].append(tr.report(name, lo, hi, top))
    res["blocking_calls"] = tr.blocking()
    return res


def print_report(res, f=sys.stdout):
    for rep in [res["step"]] + res["phases"]:
        print(f"== {rep['phase']}: {rep['wall_ms']:.1f} ms wall; compute stream "
              f"{rep['compute_stream']} idle {rep['idle_ms']:.1f} ms", file=f)
        for s, v in rep["streams"].items():
            print(f"   stream {s:>4}: busy {v['busy_ms']:8.1f} ms (kernels {v['kernel_ms']:8.1f})"
                  f"  H2D {v['h2d_gb']:6.2f} GB  D2H {v['d2h_gb']:6.2f} GB"
                  f"  managed {v['managed_gb']:6.2f} GB", file=f)
        for c, v in list(rep["idle_by_cause_ms"].items())[:12]:
            print(f"   idle {v:8.1f} ms  {c}", file=f)
        for g in rep["largest_gaps"][:8]:
            print(f"   gap {g['ms']:7.2f} ms at {g['at_ms']:8.1f} ms  {g['cause']}", file=f)
    if res["blocking_calls"]:
        print("== blocking runtime calls (>= 0.1 ms in all)", file=f)
        for b in res["blocking_calls"][:15]:
            print(f"   {b['ms']:8.1f} ms  thread {b['thread']}  {b['call']}", file=f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="a torch.profiler Chrome trace (.json or .json.gz)")
    ap.add_argument("--top", type=int, default=15, help="largest gaps to list (default 15)")
    ap.add_argument("--json", metavar="OUT", help="also write the analysis as JSON")
    ap.add_argument("--version", action="version", version="trace_gaps 1")
    a = ap.parse_args(argv)
    if a.top < 1:
        ap.error(f"--top {a.top}: expected a positive number of gaps")
    try:
        res = analyse(load(a.trace), a.top)
    except (OSError, ValueError) as e:
        print(f"trace_gaps.py: {a.trace}: {e}", file=sys.stderr)
        return 1
    print_report(res)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
