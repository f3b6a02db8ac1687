"""uvmrt.torch on the sim backend (CPU tensors): hooks, schedule, choices, numbers."""

import copy
import ctypes
import os
import subprocess
import sys

import pytest
import torch

import uvmrt.torch as ut
from uvmrt import _lib as L
from uvmrt.torch._engine import RESPLIT_GAIN, host_view

import models

STEPS = 8


def plain_run(model, data, clip=None, **kw):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False, **kw)
    return models.train(model, opt, data, clip)


def test_the_model_trains_and_its_parameters_live_in_uvmrt_memory():
    model = models.make()
    model, opt = ut.offload(model, torch.optim.AdamW, lr=1e-2, budget="64M")
    e = ut.engine_of(model)
    for slot in e.slots.values():
        assert slot.param.data_ptr() == e.ctx.tensor_ptr(slot.handles["weight"])
    losses = models.train(model, opt, models.batches(STEPS))
    assert losses[-1] < losses[0]
    st = ut.step_stats(model)
    assert st["step_ms"] > 0
    assert st["predicted_step_ms"] is not None and st["predicted_step_ms"] > 0
    # per-module attribution: each layer made one forward, backward and optimizer call a step
    summ = e.ctx.summary()
    for l in e.layers:
        phases = (L.PHASE_FORWARD, L.PHASE_BACKWARD) + ((L.PHASE_OPTIMIZER,) if l.owned else ())
        for phase in phases:
            assert e.ctx.layer_stats(l.index, phase).calls == summ.steps, (l.name, phase)
    assert e.ctx.layer_stats(e.layers[-1].index, L.PHASE_OPTIMIZER).calls == 0  # the tied head owns nothing


def test_layers_are_the_blocks_and_the_modules_around_them():
    model = models.make()
    model, _ = ut.offload(model, torch.optim.AdamW, budget="64M")
    names = [l.name for l in ut.engine_of(model).layers]
    assert names == ["emb", "blocks.0", "blocks.1", "blocks.2", "blocks.3", "ln_f", "head"]
    head = ut.engine_of(model).layers[-1]
    assert head.owned == [] and head.borrowed == [model.emb.weight]  # tied: owned by emb


@pytest.mark.parametrize("recompute", [False, True])
def test_losses_bitwise_equal_to_plain_pytorch_with_the_optimizer_on_the_gpu_side(recompute):
    data = models.batches(STEPS)
    ref = plain_run(models.make(), data)
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, foreach=False, budget="64M",
                            cpu_optimizer=False, recompute=recompute)
    got = models.train(model, opt, data)
    assert got == ref
    assert all(l.recompute == (recompute and l.is_block) for l in ut.engine_of(model).layers)


def test_gradient_clipping_matches_clip_grad_norm():
    data = models.batches(STEPS)
    ref = plain_run(models.make(), data, clip=0.05)
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, foreach=False, budget="64M",
                            cpu_optimizer=False, recompute=False, max_grad_norm=0.05)
    assert models.train(model, opt, data) == ref


def test_cpu_adamw_is_within_a_few_ulp_of_torch_adamw():
    data = models.batches(STEPS)
    ref_model = models.make()
    ref = plain_run(ref_model, data, weight_decay=0.1)
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, weight_decay=0.1, budget="64M",
                            cpu_optimizer=True, recompute=False)
    got = models.train(model, opt, data)
    ut.synchronize(model)
    assert all(l.cpu_opt for l in ut.engine_of(model).opt_layers())
    for a, b in zip(got, ref):
        assert abs(a - b) <= 1e-5 * abs(b)
    # after one step on the same gradients: the update itself, element by element
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), ref_model.named_parameters()):
        assert n1 == n2
        assert torch.allclose(p1, p2, rtol=1e-4, atol=1e-5), n1


@pytest.mark.parametrize("order", [L.ADAMW_ORDER_UVMRT, L.ADAMW_ORDER_TORCH])
def test_cpu_updates_are_within_the_stated_bound_of_torch_adamw_foreach_false(order):
    """The stated bound (python/README.md): after 3 updates on the same gradients, every
    element within 4 eps (|w| + lr) of torch.optim.AdamW(foreach=False) in fp32 on the
    CPU (eps = 2^-23; measured 3.5 in uvmrt's order, 3.7 in torch's: torch's CPU kernels
    round otherwise than its CUDA ones, which torch's order follows), and almost all
    bitwise equal."""
    torch.manual_seed(3)
    n = 100003
    w, g = torch.randn(n), torch.randn(n) * 1e-2
    lib = L.lib()
    hp = L.AdamW()
    lib.uvmrt_adamw_init(ctypes.byref(hp))
    hp.lr, hp.weight_decay, hp.order = 1e-3, 0.1, order
    ours_w, m, v = w.clone(), torch.zeros(n), torch.zeros(n)
    p = torch.nn.Parameter(w.clone())
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.1, foreach=False)
    for step in range(1, 4):
        hp.step = step
        assert lib.uvmrt_adamw_cpu(ctypes.byref(hp), ours_w.data_ptr(), m.data_ptr(), v.data_ptr(),
                                   g.data_ptr(), n, None) == 0
        p.grad = g.clone()
        opt.step()
    d = (ours_w - p.detach()).abs()
    eps = torch.finfo(torch.float32).eps
    assert (d <= 4 * eps * (w.abs() + 1e-3)).all(), (d / (eps * (w.abs() + 1e-3))).max().item()
    assert (d == 0).float().mean().item() > 0.95


def test_state_dict_round_trip_continues_as_an_uninterrupted_run(tmp_path):
    data = models.batches(2 * STEPS)
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M")
    full = models.train(model, opt, data)

    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M")
    first = models.train(model, opt, data[:STEPS])
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ck.pt")
    ck = torch.load(tmp_path / "ck.pt")
    assert all(not hasattr(v, "_uvmrt") for v in ck["model"].values())
    model2, opt2 = ut.offload(models.make(seed=99), torch.optim.AdamW, lr=1e-2, budget="64M")
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    second = models.train(model2, opt2, data[STEPS:])
    assert first + second == full


def test_frozen_parameters_and_groups_with_their_own_hyperparameters():
    model = models.make()
    model.blocks[0].fc1.weight.requires_grad_(False)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    frozen_before = model.blocks[0].fc1.weight.detach().clone()
    model, opt = ut.offload(model, torch.optim.AdamW, lr=1e-2, budget="64M",
                            param_groups=[{"params": decay, "weight_decay": 0.1},
                                          {"params": no_decay, "weight_decay": 0.0}])
    e = ut.engine_of(model)
    assert "grad" not in e.slots[id(model.blocks[0].fc1.weight)].handles
    models.train(model, opt, models.batches(4))
    assert torch.equal(model.blocks[0].fc1.weight.detach(), frozen_before)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0]


@pytest.mark.parametrize("cpu", [False, True])
def test_an_lr_scheduler_changes_the_updates(cpu):
    data = models.batches(4)
    ref_model = models.make()
    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=1e-2, foreach=False)
    ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, 1, gamma=0.5)
    ref = []
    for ids in data:
        loss = ref_model(ids); loss.backward(); ref_opt.step(); ref_opt.zero_grad(); ref_sched.step()
        ref.append(loss.item())
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, foreach=False, budget="64M",
                            cpu_optimizer=cpu, recompute=False)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
    got = []
    for ids in data:
        loss = model(ids); loss.backward(); opt.step(); opt.zero_grad(); sched.step()
        got.append(loss.item())
    if cpu:  # the CPU's AdamW: within its bound of torch's, not bitwise
        assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)
    else:
        assert got == ref


def test_a_recomputing_block_makes_no_second_forward_call():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M", recompute=True, cpu_optimizer=False)
    models.train(model, opt, models.batches(4))
    e = ut.engine_of(model)
    summ = e.ctx.summary()
    for l in e.blocks():
        assert l.recompute
        assert e.ctx.layer_stats(l.index, L.PHASE_FORWARD).calls == summ.steps


def test_the_choice_is_made_after_the_first_step_and_is_reviewed():
    model, opt = ut.offload(models.make(n=8, d=64), torch.optim.AdamW, budget="8M")
    models.train(model, opt, models.batches(6))
    e = ut.engine_of(model)
    assert e.choice is not None and e.choice.fits
    assert e.reviews == 1
    assert e.ctx.budget == 8 << 20
    assert 0 < e.ctx_external < 8 << 20


def test_cpu_layers_are_host_homed():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M", cpu_optimizer=True)
    models.train(model, opt, models.batches(2))
    e = ut.engine_of(model)
    lib = L.lib()
    for l in e.opt_layers():
        for _, p in l.owned:
            for h in e.slots[id(p)].handles.values():
                assert lib.uvmrt_tensor_is_host_homed(h) == 1


def test_cpu_layers_state_is_page_locked_and_the_views_follow(monkeypatch):
    """The CPU's layers' tensors are placed UVMRT_PLACE_PINNED (page-locked memory of their
    own: a new address), and the parameter, its gradient and the optimizer's moments are
    views of that memory; UVMRT_TORCH_PINNED=0 keeps them in managed memory; the losses
    are the same either way."""
    data = models.batches(STEPS)
    losses = {}
    for pinned in ("1", "0"):
        monkeypatch.setenv("UVMRT_TORCH_PINNED", pinned)
        model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=True)
        losses[pinned] = models.train(model, opt, data)
        e = ut.engine_of(model)
        lib = L.lib()
        want = L.PLACE_PINNED if pinned == "1" else L.PLACE_HOST
        for l in e.opt_layers():
            for _, p in l.owned:
                slot = e.slots[id(p)]
                for kind, h in slot.handles.items():
                    assert lib.uvmrt_tensor_placement(h) == want, (slot.fqn, kind)
                    assert slot.hviews[kind].data_ptr() == lib.uvmrt_tensor_ptr(h), (slot.fqn, kind)
                assert p.data_ptr() == lib.uvmrt_tensor_ptr(slot.handles["weight"])
                st = opt.state[p]
                assert st["exp_avg"].data_ptr() == lib.uvmrt_tensor_ptr(slot.handles["exp_avg"])
        ut.close(model)
    assert losses["1"] == losses["0"]


def test_the_cpu_adamw_team_size_is_set_by_its_variable_and_changes_no_bit(monkeypatch):
    """UVMRT_TORCH_CPU_THREADS sets the CPU AdamW's thread count (each element is computed
    once by one thread, so the losses do not change); a value that is not a count >= 1 is
    an error naming it."""
    data = models.batches(STEPS)
    losses = {}
    for n in ("1", "3"):
        monkeypatch.setenv("UVMRT_TORCH_CPU_THREADS", n)
        model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=True)
        assert opt._cpu_threads == int(n)
        losses[n] = models.train(model, opt, data)
        ut.close(model)
    assert losses["1"] == losses["3"]
    monkeypatch.setenv("UVMRT_TORCH_CPU_THREADS", "zero")
    with pytest.raises(ValueError, match="UVMRT_TORCH_CPU_THREADS='zero'"):
        ut.offload(models.make(), torch.optim.AdamW, budget="64M", cpu_optimizer=True)


def test_page_locked_memory_refused_falls_back_to_managed(monkeypatch, capsys):
    """Where page-locked memory is refused (a desktop short of it), the state stays in
    managed memory, with a notice, and training goes on."""
    from uvmrt._context import Context
    real = Context.set_placement

    def refuse(self, t, host, pinned=False):
        if pinned:
            raise L.UvmrtError("uvmrt_tensor_set_placement", L.ERR_NOMEM)
        return real(self, t, host)
    monkeypatch.setattr(Context, "set_placement", refuse)
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M", cpu_optimizer=True)
    models.train(model, opt, models.batches(2))
    assert "page-locked memory refused" in capsys.readouterr().err
    e = ut.engine_of(model)
    assert not e.pinned
    for l in e.opt_layers():
        for _, p in l.owned:
            for h in e.slots[id(p)].handles.values():
                assert L.lib().uvmrt_tensor_placement(h) == L.PLACE_HOST


def test_inference_under_no_grad_runs_as_its_own_step():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    e = ut.engine_of(model)
    before = e.ctx.summary().steps
    with torch.no_grad():
        model(models.batches(1)[0])
    assert e.ctx.summary().steps == before + 1
    assert not e.in_step


def test_memory_summary_and_peaks():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    text = ut.memory_summary(model)
    assert "budget" in text and "optimizer on CPU" in text
    assert ut.max_memory_allocated(model) > 0
    ut.reset_peak_memory_stats(model)


def test_reports_name_the_modules(tmp_path):
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    ut.report(model, "json", str(tmp_path / "r.json"))
    import json
    r = json.load(open(tmp_path / "r.json"))
    names = {l["name"] for l in r["layers"]}
    assert {"emb", "blocks.0", "head"} <= names


def test_errors_name_the_bad_value_and_leave_the_model_as_it_was():
    model = models.make()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ptrs = {n: p.data_ptr() for n, p in model.named_parameters()}
    with pytest.raises(ValueError, match="'eight'"):
        ut.offload(model, torch.optim.AdamW, budget="eight")
    with pytest.raises(TypeError, match="not a torch.optim.Optimizer"):
        ut.offload(model, dict)
    with pytest.raises(ValueError, match="no module named 'nope'"):
        ut.offload(model, torch.optim.AdamW, layers=["nope"])
    with pytest.raises(TypeError):
        ut.offload(model, torch.optim.AdamW, not_an_adamw_argument=1)
    with pytest.raises(ValueError, match="cpu_optimizer"):
        ut.offload(model, torch.optim.SGD, lr=0.1, cpu_optimizer=True)
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == ptrs
    for n, p in model.named_parameters():
        assert torch.equal(p.detach(), before[n])
    assert not hasattr(model, "_uvmrt_engine")


def test_a_budget_below_the_largest_module_fails_with_its_name():
    model, opt = ut.offload(models.make(d=128, vocab=4096), torch.optim.AdamW, budget="1M")
    with pytest.raises(RuntimeError, match="'emb'|budget"):
        models.train(model, opt, models.batches(2, vocab=4096))


def test_sgd_stays_on_the_gpu_side_and_trains():
    model, opt = ut.offload(models.make(), torch.optim.SGD, lr=0.1, momentum=0.9, budget="64M")
    losses = models.train(model, opt, models.batches(STEPS))
    assert losses[-1] < losses[0]
    assert not any(l.cpu_opt for l in ut.engine_of(model).layers)


def test_close_gives_back_ordinary_tensors():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    w = model.emb.weight.detach().clone()
    ut.close(model)
    assert torch.equal(model.emb.weight.detach(), w)
    assert model.head.weight is model.emb.weight
    model(models.batches(1)[0]).backward()


def test_version_and_a_missing_library():
    env = dict(os.environ)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-m", "uvmrt.torch", "--version"], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert "uvmrt.torch 0.1.0" in out and "libuvmrt 0.1.0" in out
    env["UVMRT_LIBRARY"] = "/nonexistent/libuvmrt.so"
    r = subprocess.run([sys.executable, "-m", "uvmrt.torch", "--check"], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 1 and "could not be loaded" in r.stderr and "/nonexistent/libuvmrt.so" in r.stderr


def test_the_struct_mirrors_set_their_struct_size():
    # uvmrt.h "structs that grow": each mirror says its own size, which the library checks
    sized = (L.LayerCall, L.LayerStats, L.StepStats, L.Summary, L.MemoryStats, L.TensorInfo, L.Choice,
             L.Profile, L.AdamW)
    for cls in sized:
        assert cls().struct_size == ctypes.sizeof(cls), cls.__name__
    lib = L.lib()
    for name, cls in L._MIRRORS.items():
        assert lib.uvmrt_abi_struct_size(name.encode()) == ctypes.sizeof(cls), name
    p = L.Params()
    lib.uvmrt_params_init(ctypes.byref(p))
    p.backend, p.ignore_env, p.budget_bytes = L.BACKEND_SIM, 1, 64 << 20
    ctx = ctypes.c_void_p()
    assert lib.uvmrt_context_create(ctypes.byref(p), ctypes.byref(ctx)) == L.OK
    bad = L.Summary()
    bad.struct_size = 0  # not set: refused, not written
    assert lib.uvmrt_summary_get(ctx, ctypes.byref(bad)) == L.ERR_INVALID
    good = L.Summary()
    assert lib.uvmrt_summary_get(ctx, ctypes.byref(good)) == L.OK and good.budget_bytes == 64 << 20
    lib.uvmrt_context_destroy(ctx)


def test_the_recorded_step_leaves_half_the_budget_to_pytorch():
    model, opt = ut.offload(models.make(n=8, d=128, vocab=512), torch.optim.AdamW, budget="16M",
                            cpu_optimizer=False)
    e = ut.engine_of(model)
    assert sum(s.nbytes * len(s.handles) for s in e.slots.values()) > 8 << 20  # more than half
    models.train(model, opt, models.batches(2, vocab=512))
    first = ut.step_stats(model, 0)
    assert 0 < first["peak_resident_bytes"] <= 8 << 20


@pytest.mark.parametrize("cpu", [False, True])
def test_gradient_accumulation_over_two_micro_batches(cpu):
    data = models.batches(2 * STEPS)

    def train(model, opt):
        out = []
        for i in range(0, len(data), 2):
            loss = model(data[i]) / 2
            loss.backward()
            loss2 = model(data[i + 1]) / 2
            loss2.backward()
            opt.step()
            opt.zero_grad()
            out.append(loss.item() + loss2.item())
        return out
    ref_model = models.make()
    ref = train(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-2, foreach=False))
    model, opt = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, foreach=False, budget="64M",
                            cpu_optimizer=cpu, recompute=False)
    got = train(model, opt)
    if cpu:
        assert all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (got, ref)
    else:
        assert got == ref
    e = ut.engine_of(model)
    assert e.ctx.layer_stats(e.layers[1].index, L.PHASE_FORWARD).calls == 2 * e.ctx.summary().steps


TESTS = os.path.dirname(os.path.abspath(__file__))


def test_uvmrt_top_shows_a_python_process_and_its_modules(tmp_path):
    """uvmrt-top (tools/uvmrt-top, found through UVMRT_TOP as make check sets it) reads the
    monitor snapshot of a Python training process: its steps and its modules by name."""
    import json
    top = os.environ.get("UVMRT_TOP")
    if not top or not os.path.exists(top):
        pytest.skip("UVMRT_TOP (the build's tools/uvmrt-top) not set")
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, time, torch\n"
        f"sys.path[:0] = [{os.path.dirname(TESTS)!r}, {TESTS!r}]\n"
        "import models, uvmrt.torch as ut\n"
        "model, opt = ut.offload(models.make(), torch.optim.AdamW, budget='64M')\n"
        "data = models.batches(1)\n"
        "for i in range(600):\n"
        "    models.train(model, opt, data)\n"
        "    if i == 2: print('ready', flush=True)\n"
        "    time.sleep(0.05)\n")
    env = dict(os.environ, UVMRT_MONITOR="1")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        out = subprocess.run([top, "--once", "--json", "-p", str(proc.pid)], capture_output=True, text=True,
                             timeout=30, env=env)
        assert out.returncode == 0, out.stderr
        procs = json.loads(out.stdout)["processes"]
        assert [p["pid"] for p in procs] == [proc.pid]
        assert procs[0]["step"] >= 3
        assert [l["name"] for l in procs[0]["layers"]][:3] == ["emb", "blocks.0", "blocks.1"]
    finally:
        proc.kill()
        proc.wait()


def test_link_updates_equal_the_cpus_and_are_declared_on_their_own_stream():
    """link_optimizer=True: the host-homed layers are updated by the GPU's kernel over the
    link (on sim the CPU's AdamW stands in, in the training thread): the same losses as
    the CPU worker's, the layers counted apart, and their optimizer calls on a stream of
    their own that names what the kernel reads and writes."""
    data = models.batches(STEPS)
    m1, o1 = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=True,
                        link_optimizer=False, max_grad_norm=0.05)
    ref = models.train(m1, o1, data)
    m2, o2 = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=True,
                        link_optimizer=True, max_grad_norm=0.05)
    got = models.train(m2, o2, data)
    assert got == ref
    e = ut.engine_of(m2)
    n_opt = len(e.opt_layers())
    st = ut.step_stats(m2)
    assert st["link_layers"] == n_opt and st["cpu_layers"] == 0
    assert st["link_params"] == sum(p.numel() for p in m2.parameters() if p.requires_grad)
    assert ut.step_stats(m1)["link_layers"] == 0
    for l in e.opt_layers():
        assert l.cpu_opt and l.gpu_link
        assert e.ctx.layer_stats(l.index, L.PHASE_OPTIMIZER).calls == e.ctx.summary().steps
    uses = e.link_adam_uses(e.opt_layers()[0])
    kinds = {h: a for h, a in uses}
    slot = e.slots[id(e.opt_layers()[0].owned[0][1])]
    assert kinds[slot.handles["weight"]] == L.USE_READWRITE and kinds[slot.handles["grad"]] == L.USE_READ
    assert "GPU over the link" in ut.memory_summary(m2)
    # the last updates over the link are the next step's first calls (uvmrt_step_end waits
    # for every stream of its step's calls: they go on beside the next forward instead)
    assert e.in_step and e.opened_by_updates
    sd = m2.state_dict()  # waits for the updates; ordinary tensors
    assert all(torch.equal(sd[k], v) for k, v in m1.state_dict().items())
    steps = e.ctx.summary().steps
    with torch.no_grad():  # an inference forward: the step the updates opened ends first
        m2(data[0])
    assert not e.in_step and not e.opened_by_updates
    assert e.ctx.summary().steps >= steps + 1
    assert models.train(m2, o2, data[:2]) == models.train(m1, o1, data[:2])
    assert e.in_step and e.opened_by_updates
    ut.close(m2)  # ends that step: none is left open in a destroyed context
    assert not e.in_step


def test_link_optimizer_is_checked_and_its_share_spreads_over_the_layers():
    with pytest.raises(ValueError, match="link_optimizer"):
        ut.offload(models.make(), torch.optim.AdamW, budget="64M", link_optimizer="sometimes")
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    e = ut.engine_of(model)
    assert e.link_share() == 0.0  # sim: no kernel to run
    ol = e.opt_layers()
    e.knob_cpu, e.knob_rec = 0, None
    e.share = 0.5
    cpu, _, link, _ = e.decode([len(ol)])
    assert cpu == set(ol)
    total = sum(e.layer_params(l) for l in ol)
    given = sum(e.layer_params(l) for l in link)
    assert 0.25 * total <= given <= 0.75 * total
    blocks = [l for l in ol if l.is_block]
    assert 0 < sum(l in link for l in blocks) < len(blocks)  # spread, not a block of layers
    e.share = 0.0
    assert e.decode([len(ol)])[2] == set()
    e.share = 1.0
    assert e.decode([len(ol)])[2] == set(ol)
    assert e.decode([0])[2] == set()
    # the share balances the two rates: both finish together
    e.s.link_optimizer = "auto"
    e.link_possible = lambda: True
    e.rate_cpu, e.rate_link = 2e9, 3e9
    assert abs(e.link_share() - 0.6) < 1e-9
    # a review splits again only when that saves more than RESPLIT_GAIN of the step
    n = 10**9
    e.host_homed_params = lambda: n
    at = lambda s: max(s * n / 3e9, (1 - s) * n / 2e9) * 1e9  # noqa: E731
    gain = at(0.5) - at(0.6)
    assert gain > 0
    assert e.resplit_worth(0.5, 0.6, gain / (2 * RESPLIT_GAIN))
    assert not e.resplit_worth(0.5, 0.6, 2 * gain / RESPLIT_GAIN)
    assert not e.resplit_worth(0.6, 0.5, 1.0)  # a worse split never
    e.rate_link = None
    assert e.resplit_worth(0.5, 0.6, 1e12)  # nothing measured: as before


def test_offloaded_checkpoint_inputs_give_the_same_losses():
    """offload_inputs=True: the inputs each recomputing block keeps go to host memory after
    its forward and come back for its recompute (on sim: plain copies): the same losses as
    keeping them, every block's inputs moved out and back once a step."""
    data = models.batches(STEPS)
    m1, o1 = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=False,
                        recompute=True, offload_inputs=False)
    ref = models.train(m1, o1, data)
    m2, o2 = ut.offload(models.make(), torch.optim.AdamW, lr=1e-2, budget="64M", cpu_optimizer=False,
                        recompute=True, offload_inputs=True)
    e = ut.engine_of(m2)
    e.offload.min_bytes = 0  # the test model's inputs are small
    got = models.train(m2, o2, data)
    assert got == ref
    blocks = e.blocks()
    assert all(l.recompute and l.offload_input for l in blocks)
    assert e.offload.moved_out > 0 and e.offload.moved_out == e.offload.moved_in
    assert all(not held for held in e.offload.held.values())  # each came back and was let go
    st = ut.step_stats(m2)
    assert st["offload_blocks"] == len(blocks) and st["offload_host_bytes"] > 0
    assert ut.engine_of(m1).offload is None


def test_offloaded_inputs_lower_the_memory_counted_for_pytorch():
    model, opt = ut.offload(models.make(), torch.optim.AdamW, budget="64M")
    models.train(model, opt, models.batches(2))
    e = ut.engine_of(model)
    bl = e.blocks()
    e.measured_with_recompute, e.torch_peak_bytes = True, 1 << 30
    for l in bl:
        l.off_bytes = 1 << 20
    e.measured_off = set(bl)
    rec = set(bl)
    assert e.external_bytes(rec, set(bl)) + len(bl) * (1 << 20) == e.external_bytes(rec, set())
    e.offload = object()  # a knob only where inputs can move
    e.s.offload_inputs = "auto"
    names = [k[0] for k in e.knobs()]
    assert "offload_input_quarters" in names
    vals = [0] * len(names)
    vals[names.index("recompute")] = len(bl)
    vals[names.index("offload_input_quarters")] = 2
    _, r, _, off = e.decode(vals)
    assert r == rec and len(off) == len(bl) // 2 and off == set(bl[:len(bl) // 2])
