"""bench/trace_gaps.py on a small synthetic trace: the compute stream's idle time is split
into 'the host launched late' (with what the launching thread was doing) and 'the kernel
waited on another stream', per phase; bad input is an error naming the file."""

import gzip
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import trace_gaps  # noqa: E402


def kernel(ts, dur, corr, stream=7, cat="kernel", name="k", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": ts, "dur": dur,
            "args": dict(stream=stream, correlation=corr, **args)}


def cpu(ts, dur, name, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


def synthetic():
    return [
        cpu(0, 1000, "phase:forward", cat="user_annotation"),
        cpu(1000, 1000, "phase:backward", cat="user_annotation"),
        # forward: k1 0-100; the host launches k2 late (at 400) because it was in a sync
        cpu(0, 5, "cudaLaunchKernel", cat="cuda_runtime", correlation=1),
        kernel(0, 100, 1),
        cpu(100, 290, "aten::item"),
        cpu(110, 280, "cudaStreamSynchronize", cat="cuda_runtime"),
        cpu(400, 5, "cudaLaunchKernel", cat="cuda_runtime", correlation=2),
        kernel(410, 590, 2),
        # backward: k3 launched early waits on a copy of stream 20 from 1000 to 1300
        cpu(950, 5, "cudaLaunchKernel", cat="cuda_runtime", correlation=3),
        kernel(1000, 10, 9, stream=20, cat="gpu_memcpy", name="Memcpy HtoD (Pinned -> Device)",
               bytes=3_000_000),
        cpu(950, 5, "cudaMemcpyAsync", cat="cuda_runtime", correlation=9),
        kernel(1000, 300, 10, stream=20, cat="gpu_memcpy", name="Memcpy DtoH (Device -> Pinned)",
               bytes=5_000_000),
        kernel(1300, 700, 3),
    ]


def test_gaps_and_causes():
    res = trace_gaps.analyse(synthetic())
    step = res["step"]
    assert step["compute_stream"] == "7"
    assert abs(step["idle_ms"] - 0.61) < 1e-9  # 100..410 and 1000..1300
    assert step["idle_by_cause_ms"] == {"cpu:cudaStreamSynchronize < aten::item": 0.31,
                                        "wait:stream 20 (Memcpy DtoH (Device -> Pinned))": 0.3}
    fwd, bwd = res["phases"]
    assert fwd["phase"] == "forward" and bwd["phase"] == "backward"
    assert list(fwd["idle_by_cause_ms"]) == ["cpu:cudaStreamSynchronize < aten::item"]
    assert list(bwd["idle_by_cause_ms"]) == ["wait:stream 20 (Memcpy DtoH (Device -> Pinned))"]
    s20 = bwd["streams"]["20"]
    assert abs(s20["busy_ms"] - 0.3) < 1e-9 and s20["kernel_ms"] == 0
    assert abs(s20["h2d_gb"] - 0.003) < 1e-12 and abs(s20["d2h_gb"] - 0.005) < 1e-12
    assert s20["managed_gb"] == 0
    assert [b["call"] for b in res["blocking_calls"]] == ["cudaStreamSynchronize"]


def test_command_line(tmp_path):
    path = tmp_path / "t.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": synthetic()}, f)
    out = tmp_path / "a.json"
    p = subprocess.run([sys.executable, str(REPO / "bench" / "trace_gaps.py"), str(path),
                        "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["step"]["compute_stream"] == "7"
    assert "cpu:cudaStreamSynchronize" in p.stdout
    cpu_only = tmp_path / "cpu.json"
    cpu_only.write_text(json.dumps({"traceEvents": [cpu(0, 5, "aten::mm")]}))
    p = subprocess.run([sys.executable, str(REPO / "bench" / "trace_gaps.py"), str(cpu_only)],
                       capture_output=True, text=True)
    assert p.returncode == 1 and str(cpu_only) in p.stderr and "ProfilerActivity.CUDA" in p.stderr
    p = subprocess.run([sys.executable, str(REPO / "bench" / "trace_gaps.py"), str(path),
                        "--top", "0"], capture_output=True, text=True)
    assert p.returncode == 2 and "--top 0" in p.stderr


def test_copies_into_managed_memory_are_counted_apart():
    evs = synthetic() + [kernel(1400, 100, 11, stream=24, cat="gpu_memcpy",
                                name="Memcpy DtoD (Device -> Managed)", bytes=7_000_000)]
    s24 = trace_gaps.analyse(evs)["step"]["streams"]["24"]
    assert abs(s24["managed_gb"] - 0.007) < 1e-12 and s24["h2d_gb"] == 0 and s24["d2h_gb"] == 0
