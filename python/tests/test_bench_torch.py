"""The PyTorch benchmark's scripts (issue 20) on the CPU: bench/torch_train.py trains the
tiny models for the resident and compute-only rows and writes its JSON; its failures are
recorded, not lost; the uvmrt-gpt row converts the trainer's result; bench/torch_table.py
makes the table from those JSONs; bench/run-torch.sh runs rows in their own processes and
ends with the table. Needs torch and transformers (skipped without them)."""

import json
import math
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench"
TRAIN = BENCH / "torch_train.py"
TABLE = BENCH / "torch_table.py"
RUN = BENCH / "run-torch.sh"
B, T = 2, 16


def run(args, check=True, env=None, timeout=600):
    e = dict(os.environ, PYTHONUNBUFFERED="1")
    e.update(env or {})
    p = subprocess.run(args, capture_output=True, text=True, env=e, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{args} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def train(out, name, *args, check=True):
    path = out / f"torch.{name}.json"
    p = run([sys.executable, str(TRAIN), "--device", "cpu", "--batch", str(B), "--seq", str(T),
             "--steps", "2", "--warmup", "1", "--name", name, "--json", str(path), *args],
            check=check)
    with open(path, encoding="utf-8") as f:
        return p, json.load(f)


def table_rows(text):
    """{row name: [cells]} of the markdown table lines."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| row |"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows[cells[0]] = cells
    return rows


COLS = ["row", "run", "ms/step", "tokens/s", "peak GPU GiB", "host RSS GiB", "GB in/step",
        "GB out/step", "faults/step", "loss first -> last", "floor ms (bound)", "x floor",
        "x DeepSpeed"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The CPU rows, run once: name -> (process, JSON)."""
    out = tmp_path_factory.mktemp("bench-torch")
    r = {"out": out}
    r["gpt-resident"] = train(out, "gpt-resident", "--row", "resident", "--model", "gpt2-tiny")
    r["gpt-compute-only"] = train(out, "gpt-compute-only", "--row", "compute-only",
                                  "--model", "gpt2-tiny")
    r["llama-resident"] = train(out, "llama-resident", "--row", "resident", "--model",
                                "llama-tiny", "--checkpointing")
    return r


def test_scripts_have_help():
    for cmd in ([sys.executable, str(TRAIN), "--help"], [sys.executable, str(TABLE), "--help"],
                ["bash", str(RUN), "--help"],
                ["bash", str(BENCH / "peers" / "fetch-deepspeed.sh"), "--help"]):
        p = run(cmd)
        assert "usage" in p.stdout.lower() or "--" in p.stdout, cmd
        assert len(p.stdout.splitlines()) > 5, cmd


def test_train_json_fields(runs):
    sys.path.insert(0, str(BENCH))
    import torch_train
    for name, model in (("gpt-resident", "gpt2-tiny"), ("gpt-compute-only", "gpt2-tiny"),
                        ("llama-resident", "llama-tiny")):
        _, j = runs[name]
        assert j["ok"] is True, j.get("error")
        assert j["name"] == name and j["model"] == model and j["device"] == "cpu"
        assert (j["batch"], j["seq"], j["steps"], j["warmup"]) == (B, T, 2, 1)
        assert len(j["losses"]) == 2 and len(j["step_ms"]) == 2
        assert all(math.isfinite(x) and 0 < x < 20 for x in j["losses"])
        assert j["ms_per_step_median"] == pytest.approx(statistics.median(j["step_ms"][1:]))
        assert j["tokens_per_s"] == pytest.approx(B * T / (j["ms_per_step_median"] * 1e-3))
        assert j["peak_host_rss_bytes"] > 10 << 20
        assert j["host_rss_processes"][0]["pid"] > 0
        assert j["params"] == torch_train.param_count(torch_train.model_shape(model, T))
        assert "peak_gpu_bytes" not in j  # no GPU figure is made up on the CPU
    assert runs["llama-resident"][1]["checkpointing"] is True
    assert runs["gpt-resident"][1]["checkpointing"] is False


def test_rows_share_weights_and_batches(runs):
    # same seed: the same initial weights and batches, so the first forward is the same
    a = runs["gpt-resident"][1]["losses"]
    b = runs["gpt-compute-only"][1]["losses"]
    assert a[0] == pytest.approx(b[0], rel=1e-6)
    # the resident row updates the weights, the compute-only row does not
    assert a[1] != b[1]


def test_fsdp2_row_on_cpu_matches_resident(runs, tmp_path):
    # the FSDP2 row's code (fully_shard per block and the root, checkpointing, clipping,
    # AdamW over DTensors) on the CPU with gloo: the same losses as the resident row
    port = str(20000 + os.getpid() % 20000)
    path = tmp_path / "torch.f.json"
    run([sys.executable, str(TRAIN), "--device", "cpu", "--batch", str(B), "--seq", str(T),
         "--steps", "2", "--warmup", "1", "--row", "fsdp2", "--model", "gpt2-tiny",
         "--checkpointing", "--json", str(path)], env={"MASTER_PORT": port})
    j = json.loads(path.read_text())
    assert j["ok"] is True and j["checkpointing"] is True
    ref = runs["gpt-resident"][1]["losses"]
    assert j["losses"][0] == pytest.approx(ref[0], rel=1e-5)
    assert j["losses"][1] == pytest.approx(ref[1], rel=1e-3)


def test_memcpy_bytes_of_a_trace():
    sys.path.insert(0, str(BENCH))
    import torch_train
    trace = {"traceEvents": [
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "args": {"bytes": 1000}},
        {"cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "args": {"bytes": 300}},
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "args": {"bytes": 24}},
        {"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "args": {"bytes": 5000}},
        {"cat": "kernel", "name": "HtoD-looking kernel", "args": {"bytes": 7}}]}
    assert torch_train.memcpy_bytes(trace) == {"h2d": 1024, "d2h": 300, "memcpy_events": 4}
    with pytest.raises(RuntimeError, match="no gpu_memcpy"):
        torch_train.memcpy_bytes({"traceEvents": []})


def test_failures_are_recorded(tmp_path):
    # DeepSpeed on the CPU fails either way (not installed, or no CUDA device): recorded
    p, j = train(tmp_path, "ds", "--row", "ds-zero2", "--model", "gpt2-tiny", "--checkpointing",
                 check=False)
    assert p.returncode == 1
    assert j["ok"] is False and j["row"] == "ds-zero2"
    assert "deepspeed" in j["error"].lower() or "cuda" in j["error"].lower(), j["error"]
    p, j = train(tmp_path, "gpt", "--row", "uvmrt-gpt", "--model", "gpt2-tiny", "--budget", "8G",
                 "--gpt-binary", str(tmp_path / "missing"), check=False)
    assert p.returncode == 1 and j["ok"] is False and "not an executable" in j["error"]
    # bad arguments are refused before anything runs
    p = run([sys.executable, str(TRAIN), "--row", "uvmrt", "--device", "cpu"], check=False)
    assert p.returncode == 2 and "--budget" in p.stderr
    p = run([sys.executable, str(TRAIN), "--row", "resident", "--steps", "2", "--warmup", "2"],
            check=False)
    assert p.returncode == 2 and "--warmup" in p.stderr


FAKE_GPT = textwrap.dedent("""\
    #!{python}
    import json, sys
    a = sys.argv[1:]
    steps = int(a[a.index("--steps") + 1])
    assert a[a.index("--budget") + 1] == "8G" and "--depth" in a
    with open(a[a.index("--result-json") + 1], "w") as f:
        json.dump({{"program": "uvmrt-gpt", "ms_per_step_median": 700.0, "tokens_per_s": 11702.9,
                   "gb_in_per_step": 9.5, "gb_out_per_step": 9.25, "faults_per_step": 0.0,
                   "peak_resident_bytes": 8 << 30, "device_workspace_bytes": 1 << 25,
                   "losses": [11.0] * steps, "step_ms": [700.0] * steps, "cpu_layers": 38,
                   "recompute_blocks": 48, "predicted_step_ms": 690.0}}, f)
    """)


def test_uvmrt_gpt_row_converts_the_trainers_result(tmp_path):
    fake = tmp_path / "uvmrt-gpt"
    fake.write_text(FAKE_GPT.format(python=sys.executable))
    fake.chmod(0o755)
    _, j = train(tmp_path, "gpt-uvmrt-gpt-8g", "--row", "uvmrt-gpt", "--model", "gpt2-d48",
                 "--budget", "8G", "--gpt-binary", str(fake), "--", "--depth", "48")
    assert j["ok"] is True, j.get("error")
    assert j["ms_per_step_median"] == 700.0 and j["tokens_per_s"] == 11702.9
    assert j["peak_gpu_bytes"] == (8 << 30) + (1 << 25)
    assert j["uvmrt_step_stats"]["gb_in_per_step"] == 9.5
    assert j["gpt_cpu_layers"] == 38 and len(j["losses"]) == 2
    assert j["peak_host_rss_bytes"] > 0
    assert j["command"][0] == str(fake) and "--depth" in j["command"]


def test_measure_floor_on_cpu(tmp_path):
    path = tmp_path / "floor.json"
    run([sys.executable, str(TRAIN), "--measure-floor", "--device", "cpu",
         "--floor-bytes", str(8 << 20), "--json", str(path)])
    f = json.loads(path.read_text())
    assert f["ok"] is True and f["host_bps"] > 1e8 and f["host_copy_bytes"] == 16 << 20
    assert f["h2d_bps"] is None and f["d2h_bps"] is None
    # with libuvmrt (make check gives UVMRT_LIBRARY): the CPU AdamW's rate too, and the
    # floor takes the faster of the two
    if os.environ.get("UVMRT_LIBRARY"):
        assert f.get("host_adamw_bps", 0) > 1e8, f
        assert f["host_bps"] == max(f["host_copy_bps"], f["host_adamw_bps"])


def test_estimates_fit_the_h200_and_order_the_rows():
    def est(*a):
        return int(run([sys.executable, str(TRAIN), "--estimate", "--batch", "8", "--seq", "1024",
                        *a]).stdout)
    h200_free = 139 << 30
    gpt_res = est("--row", "resident", "--model", "gpt2-d48")
    assert gpt_res < 0.8 * h200_free
    assert est("--row", "resident", "--model", "llama-3b", "--batch", "4") < 0.8 * h200_free
    z2 = est("--row", "ds-zero2", "--model", "gpt2-d48", "--checkpointing")
    z3 = est("--row", "ds-zero3", "--model", "gpt2-d48", "--checkpointing")
    assert z3 < z2 < gpt_res


def test_table_from_the_jsons(runs, tmp_path):
    out = tmp_path
    for name in ("gpt-resident", "gpt-compute-only", "llama-resident"):
        (out / f"torch.{name}.json").write_text(json.dumps(runs[name][1]))
    base = dict(runs["gpt-resident"][1])
    cm = runs["gpt-compute-only"][1]["ms_per_step_median"]
    # a DeepSpeed row with profiler link bytes, a uvmrt row with step_stats, a failed and a
    # skipped row, and the floor: made up, to check the table's arithmetic
    ds = dict(base, name="gpt-ds-zero2", row="ds-zero2", checkpointing=True,
              ms_per_step_median=4 * cm, tokens_per_s=B * T / (4 * cm * 1e-3),
              link_bytes={"h2d": 2e9, "d2h": 1e9, "memcpy_events": 10, "source": "test"})
    ut = dict(base, name="gpt-uvmrt-8g", row="uvmrt", budget="8G", budget_bytes=8 << 30,
              checkpointing="binding's choice", ms_per_step_median=2 * cm,
              tokens_per_s=B * T / (2 * cm * 1e-3), peak_gpu_bytes=8 << 30,
              uvmrt_step_stats={"step_ms": 2 * cm, "prefetch_bytes": 3e9, "remote_read_bytes": 1e9,
                                "evict_bytes": 2e9, "remote_write_bytes": 0, "discard_bytes": 0,
                                "gpu_faults": 0, "fault_count": 0, "predicted_step_ms": cm,
                                "cpu_layers": 3, "recompute_layers": 2})
    bad = {"name": "gpt-fsdp2", "row": "fsdp2", "model": "gpt2-tiny", "ok": False,
           "error": "RuntimeError: boom | with a pipe"}
    skip = {"name": "gpt-ds-zero3", "row": "ds-zero3", "model": "gpt2-tiny", "ok": False,
            "skipped": True, "error": "skipped: needs about 9.0 GiB, the GPU has 4.0 GiB free"}
    gpt = dict(base, name="gpt-uvmrt-gpt-8g", row="uvmrt-gpt", budget="8G", params=None,
               ms_per_step_median=cm / 2, tokens_per_s=B * T / (cm / 2 * 1e-3),
               uvmrt_step_stats={"gb_in_per_step": 1.0, "gb_out_per_step": 0.5,
                                 "faults_per_step": 0.0}, gpt_cpu_layers=1,
               gpt_recompute_blocks=2)
    for j in (ds, ut, bad, skip, gpt):
        (out / f"torch.{j['name']}.json").write_text(json.dumps(j))
    # link bandwidth such that 4 GB in takes 4 compute-only steps: the uvmrt row's floor is
    # then set by the link (2x its own step)
    h2d = 4e9 / (4 * cm * 1e-3)
    (out / "floor.json").write_text(json.dumps({"ok": True, "h2d_bps": h2d, "d2h_bps": h2d,
                                                "host_bps": 1e15, "host_copy_bytes": 2 << 30,
                                                "threads": 2}))
    p = run([sys.executable, str(TABLE), str(out)])
    text = (out / "table.md").read_text()
    assert text == p.stdout
    rows = table_rows(text)
    assert set(rows) >= {"gpt-resident", "gpt-compute-only", "llama-resident", "gpt-ds-zero2",
                         "gpt-uvmrt-8g", "gpt-fsdp2", "gpt-ds-zero3"}
    c = {k: dict(zip(COLS, v)) for k, v in rows.items()}
    assert c["gpt-compute-only"]["floor ms (bound)"].endswith("(compute)")
    assert c["gpt-compute-only"]["x floor"] == "1.00"
    assert float(c["gpt-resident"]["ms/step"]) == pytest.approx(
        runs["gpt-resident"][1]["ms_per_step_median"], abs=0.06)
    assert c["gpt-resident"]["GB in/step"] == "n/a"
    # DeepSpeed: the reference; its link bytes marked as the profiler's
    assert c["gpt-ds-zero2"]["x DeepSpeed"] == "1.00"
    assert c["gpt-ds-zero2"]["GB in/step"] == "2.00*" and c["gpt-ds-zero2"]["GB out/step"] == "1.00*"
    # uvmrt: 2x DeepSpeed's tokens/s; 4 GB in, 2 GB out; floor 4 GB / h2d = 4 compute steps
    u = c["gpt-uvmrt-8g"]
    assert u["x DeepSpeed"] == "2.00"
    assert u["GB in/step"] == "4.00" and u["GB out/step"] == "2.00" and u["faults/step"] == "0"
    assert u["floor ms (bound)"].endswith("(link in)")
    assert float(u["floor ms (bound)"].split()[0]) == pytest.approx(4 * cm, rel=1e-3, abs=0.06)
    assert u["x floor"] == "0.50"
    assert u["peak GPU GiB"] == "8.00"
    assert u["run"] == "uvmrt.torch, budget 8G (chose 3 CPU layers, 2 recomputing)"
    # uvmrt-gpt: faster than PyTorch's compute-only step, so its floor is the link's only
    g = c["gpt-uvmrt-gpt-8g"]
    assert g["run"] == "uvmrt-gpt (CUDA C), budget 8G (chose 1 CPU layers, 2 recomputing)"
    assert g["floor ms (bound)"].endswith("(link in)") and g["x floor"] == "0.50"
    assert g["GB in/step"] == "1.00" and g["faults/step"] == "0"
    assert "uvmrt-gpt's floor counts the link and host memory only" in text
    assert c["gpt-fsdp2"]["ms/step"].startswith("FAILED: RuntimeError: boom / with a pipe")
    assert c["gpt-ds-zero3"]["ms/step"].startswith("skipped: needs about 9.0 GiB")
    # the Llama table has no DeepSpeed row and says so
    assert c["llama-resident"]["x DeepSpeed"] == "-"
    assert "no DeepSpeed row of this model" in text
    assert "x DeepSpeed: against gpt-ds-zero2" in text
    # no results: an error, not an empty table
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run([sys.executable, str(TABLE), str(empty)], check=False).returncode == 1


def test_targets(tmp_path):
    # made-up rows of the models: the target lines compare what they must
    def row(name, kind, tok, gpu, rss, budget=None, ms=None):
        return {"name": name, "row": kind, "model": "gpt2-d48", "ok": True, "budget": budget,
                "batch": 8, "seq": 1024, "tokens_per_s": tok,
                "ms_per_step_median": ms or 8192 / tok * 1e3, "peak_gpu_bytes": gpu << 30,
                "peak_host_rss_bytes": rss << 30, "losses": [11.0, 10.9]}
    for j in (row("gpt-ds-zero2", "ds-zero2", 6000, 10, 34),
              row("gpt-uvmrt-8g", "uvmrt", 12500, 8, 40, "8G"),
              row("gpt-uvmrt-16g", "uvmrt", 16000, 16, 30, "16G"),
              row("gpt-resident", "resident", 22000, 75, 20)):
        (tmp_path / f"torch.{j['name']}.json").write_text(json.dumps(j))
    llama = dict(row("llama-resident", "resident", 14000, 66, 20), model="llama-3b", batch=4)
    (tmp_path / "torch.llama-resident.json").write_text(json.dumps(llama))
    run([sys.executable, str(TABLE), str(tmp_path)])
    t = {}
    for line in (tmp_path / "table.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2] in ("met", "missed", "-"):
            t[cells[0]] = (cells[1], cells[2])
    assert t["GPT-2 d48 at 8G: >= 2x the tokens/s of DeepSpeed ZeRO-2 offload"] == \
        ("12500 / 6000 = 2.08x", "met")
    assert t["GPT-2 d48 at 8G: peak GPU memory <= DeepSpeed ZeRO-2's"][1] == "met"
    assert t["GPT-2 d48 at 16G: step time within 1.3x of PyTorch resident's"][1] == "missed"
    assert t["GPT-2 d48 uvmrt.torch 8G: host RSS <= DeepSpeed ZeRO-2's"][1] == "missed"
    assert t["GPT-2 d48 uvmrt.torch 16G: host RSS <= DeepSpeed ZeRO-2's"][1] == "met"
    lt = t["Llama 3.4B at 8G: >= 2x the tokens/s of DeepSpeed ZeRO-3 offload"]
    assert lt[1] == "-" and "ds-zero3 row" in lt[0] and "uvmrt 8G row" in lt[0]


def test_run_torch_sh_on_cpu(tmp_path):
    out = tmp_path / "out"
    p = run(["bash", str(RUN), "--smoke", str(out), "floor", "gpt-compute-only", "gpt-ds-zero2"],
            check=False, env={"DEVICE": "cpu", "PYTHON": sys.executable, "FLOOR_BYTES": str(8 << 20),
                              "WHEELS": str(tmp_path / "no-wheels"), "STEPS": "2", "WARMUP": "1",
                              "DS_SITE": str(tmp_path / "site")})
    # the DeepSpeed row fails (not installed here, or no GPU), the others run, and the
    # table ends the run
    assert p.returncode == 1, p.stdout + p.stderr
    rows = {k: dict(zip(COLS, v)) for k, v in table_rows((out / "table.md").read_text()).items()}
    assert float(rows["gpt-compute-only"]["ms/step"]) > 0
    assert rows["gpt-ds-zero2"]["ms/step"].startswith("FAILED")
    j = json.loads((out / "torch.gpt-ds-zero2.json").read_text())
    assert j["ok"] is False and j["model"] == "gpt2-tiny"
    assert json.loads((out / "floor.json").read_text())["host_bps"] > 0
    log = (out / "run-torch.log").read_text()
    assert "== gpt-compute-only" in log and "== table" in log
    assert (out / "torch.gpt-compute-only.log").stat().st_size > 0
    # RUN_LIMIT: a row that would get too little of it is not started, and says so
    out3 = tmp_path / "o3"
    p = run(["bash", str(RUN), "--smoke", str(out3), "llama-resident"], check=False,
            env={"DEVICE": "cpu", "PYTHON": sys.executable, "RUN_LIMIT": "1"})
    assert p.returncode == 1
    cell = table_rows((out3 / "table.md").read_text())["llama-resident"][2]
    assert cell.startswith("not run: RUN_LIMIT=1 s"), cell
    # an unknown row is refused before anything runs
    p = run(["bash", str(RUN), str(tmp_path / "o2"), "gpt-bogus"], check=False)
    assert p.returncode == 2 and "unknown row" in p.stderr
    assert not (tmp_path / "o2").exists()


def uvmrt_torch_imports():
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO / "python") + os.pathsep + e.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", "import uvmrt.torch"], capture_output=True,
                       text=True, env=e)
    return p.returncode == 0, p.stderr.strip().splitlines()[-1:] or [""]


def test_uvmrt_row_on_cpu(tmp_path):
    ok, why = uvmrt_torch_imports()
    if not ok:
        pytest.skip(f"uvmrt.torch does not import: {why[0]}")
    path = tmp_path / "torch.u.json"
    p = run([sys.executable, str(TRAIN), "--device", "cpu", "--row", "uvmrt", "--model", "gpt2-tiny",
             "--budget", "1G", "--batch", str(B), "--seq", str(T), "--steps", "3", "--warmup", "1",
             "--json", str(path)], check=False,
            env={"PYTHONPATH": str(REPO / "python") + os.pathsep + os.environ.get("PYTHONPATH", "")})
    j = json.loads(path.read_text())
    assert p.returncode == 0 and j["ok"] is True, j.get("error")
    st = j["uvmrt_step_stats"]
    for k in ("step_ms", "prefetch_bytes", "evict_bytes", "discard_bytes", "remote_read_bytes",
              "remote_write_bytes", "gpu_faults", "fault_count", "predicted_step_ms"):
        assert k in st, k
    assert j["peak_gpu_bytes"] >= 0 and len(j["losses"]) == 3
