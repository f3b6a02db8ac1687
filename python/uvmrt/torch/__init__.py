"""uvmrt.torch: train an ordinary torch.nn.Module beyond the GPU's memory.

    import uvmrt.torch as ut
    model, opt = ut.offload(model, torch.optim.AdamW, lr=3e-4, budget="8G")
    for batch in data:                       # the training loop stays as it was
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(batch).loss
        loss.backward(); opt.step(); opt.zero_grad()

Each layer's parameters, gradients and optimizer state live in uvmrt tensors (CUDA
managed memory, one arena per layer) under the budget; activations stay in PyTorch's
caching allocator, measured in the first step and left room for.  Module hooks make
each layer's forward, backward and optimizer work uvmrt layer calls, so the runtime
prefetches ahead of them, evicts behind them and reports per layer.  After the first
step uvmrt chooses, by rehearsing the step on its model of the machine, where each
layer's optimizer runs (the GPU, or uvmrt's AdamW on the CPU) and which blocks
recompute their activations (torch.utils.checkpoint); a review after three steps
checks the prediction against the measured steps.  The UVMRT_* variables of the C
library (uvmrt(3)) apply too.  Without a GPU (or with backend="sim") the model trains
on the CPU while the runtime runs its sim backend: the schedule, the choices and the
reports are those of the modelled GPU.
"""


import torch

from .. import __version__
from .. import _lib as L
from ._engine import Engine, notice
from ._optim import OffloadedOptimizer, adam_like, cpu_capable

__all__ = ["offload", "synchronize", "step_stats", "memory_summary", "max_memory_allocated", "reset_peak_memory_stats",
           "report", "close", "engine_of", "__version__"]


class _Settings:
    pass


def _engine(model):
    e = getattr(model, "_uvmrt_engine", None)
    if e is None:
        raise ValueError("uvmrt.torch: this model was not given to uvmrt.torch.offload")
    return e


engine_of = _engine


def offload(model, optimizer_class=torch.optim.AdamW, *, budget=None, param_groups=None, max_grad_norm=None,
            cpu_optimizer="auto", recompute="auto", layers=None, backend=None, profile=None, log_level=None,
            report=None, trace=None, device=None, review=True, workspace_bytes=None, verbose=False,
            half_weights=True, link_optimizer="auto", offload_inputs="auto", **optimizer_kwargs):
    """Trains `model` with uvmrt: returns (model, optimizer).

    model            a torch.nn.Module (on the CPU, or on the GPU uvmrt runs on); it is
                     changed in place: its parameters become views of uvmrt memory
    optimizer_class  a torch.optim.Optimizer class; Adam and AdamW can run on the CPU
    budget           device bytes for everything (an int, or "8G", "512MiB"; default:
                     UVMRT_BUDGET, else the GPU's free memory less UVMRT_BUDGET_RESERVE)
    param_groups     the optimizer's groups as for torch (dicts with "params" and their own
                     hyperparameters); default: every trainable parameter in one group
    max_grad_norm    clip the gradients' total 2-norm to this (as
                     torch.nn.utils.clip_grad_norm_ does); None: no clipping
    cpu_optimizer    "auto" (uvmrt chooses per layer), True (every layer), False (none):
                     the layers whose AdamW state (fp32 weights, moments, gradients) lives
                     in host memory
    link_optimizer   of those layers, the ones the GPU updates over the link
                     (uvmrt_adamw_gpu: one pass, the same bits as the CPU's) while the CPU
                     updates the others: "auto" (uvmrt chooses, on a GPU), True (all of
                     them; on sim the CPU's AdamW stands in), False (none: the CPU's)
    recompute        "auto" (uvmrt chooses which blocks), True (every block), False (none)
    offload_inputs   the inputs a recomputing block keeps for its recompute wait in pinned
                     host memory from its forward to its backward (copied out and back on
                     streams of their own, the same bits): "auto" (uvmrt chooses how many
                     blocks, on a GPU), True (every recomputing block; on sim too), False
    layers           module names that become uvmrt layers (default: the repeated blocks
                     and every other module holding parameters)
    backend, profile, log_level, report, trace: as UVMRT_BACKEND, UVMRT_PROFILE,
                     UVMRT_LOG_LEVEL, UVMRT_REPORT, UVMRT_TRACE (uvmrt(3))
    device           the CUDA device ordinal (default: torch's current device)
    review           review the choice after three planned steps (uvmrt_choice_review)
    workspace_bytes  device memory kept free for PyTorch beyond the peak the first step
                     measured (default: 128 MiB on a GPU, 0 on sim)
    half_weights     under torch.autocast (bf16 or fp16), the forwards of nn.Linear and
                     transformers Conv1D modules read 16-bit working copies of their
                     weights instead of autocast's cached casts (the same values, so the
                     same results; less of PyTorch's memory and, for the layers whose
                     optimizer runs on the CPU, half the link bytes); False: autocast's own
    **optimizer_kwargs  the optimizer's own arguments (lr, betas, weight_decay, ...)

    A failure leaves the model and its parameters as they were.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"offload: model is a {type(model).__name__}, expected a torch.nn.Module")
    if getattr(model, "_uvmrt_engine", None) is not None:
        raise ValueError("offload: this model is already offloaded")
    if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, torch.optim.Optimizer)):
        raise TypeError(f"offload: optimizer_class {optimizer_class!r} is not a torch.optim.Optimizer class")
    for name, v in (("cpu_optimizer", cpu_optimizer), ("recompute", recompute), ("link_optimizer", link_optimizer),
                    ("offload_inputs", offload_inputs)):
        if v not in ("auto", True, False):
            raise ValueError(f"offload: {name}={v!r}: expected 'auto', True or False")
    if max_grad_norm is not None and not (float(max_grad_norm) > 0):
        raise ValueError(f"offload: max_grad_norm={max_grad_norm!r}: expected a positive number or None")
    if budget is not None:
        L.parse_size(budget, "offload: budget")

    s = _Settings()
    s.budget, s.max_grad_norm = budget, (None if max_grad_norm is None else float(max_grad_norm))
    s.cpu_optimizer, s.recompute, s.layers = cpu_optimizer, recompute, layers
    s.link_optimizer, s.offload_inputs = link_optimizer, offload_inputs
    s.backend, s.profile, s.log_level, s.report, s.trace = backend, profile, log_level, report, trace
    s.review, s.verbose, s.half_weights = review, verbose, bool(half_weights)
    s.workspace_bytes = None if workspace_bytes is None else int(workspace_bytes)
    if device is None:
        s.device_index = torch.cuda.current_device() if torch.cuda.is_available() and backend != "sim" else 0
    else:
        s.device_index = torch.device(device).index or 0 if not isinstance(device, int) else device

    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = param_groups if param_groups is not None else [{"params": trainable}]
    groups = [dict(g) for g in groups]
    for g in groups:
        g["params"] = list(g["params"])
    # the optimizer's own validation first (unknown arguments, bad values), on no memory
    probe = optimizer_class([torch.zeros(1, requires_grad=True)], **optimizer_kwargs)
    defaults = probe.defaults
    ok, why = cpu_capable(optimizer_class, defaults, groups)
    if ok and any(p.dtype != torch.float32 for p in trainable):
        ok, why = False, "parameters that are not float32"
    s.cpu_capable = ok
    if not ok and cpu_optimizer is True:
        raise ValueError(f"offload: cpu_optimizer=True, but uvmrt's CPU AdamW cannot run this optimizer: {why}")
    if not ok and cpu_optimizer == "auto":
        notice(f"the optimizer stays on the GPU ({why})")

    engine = Engine(model, s)
    engine.open_context()
    try:
        engine.check_params()
        engine.allocate(adam_state=adam_like(optimizer_class))
    except BaseException:
        engine.close()
        raise
    engine.take_over()
    engine.install_hooks()
    # until the recorded step has measured PyTorch's own memory, half of the budget is left
    # to it, so that the first step does not fill the GPU with uvmrt's tensors beside it
    engine.ctx_external = engine.ctx.budget // 2
    engine.ctx.set_external_bytes(engine.ctx_external)
    if engine.device.type == "cuda" and recompute is not False:
        # the recorded step recomputes every block: PyTorch's least memory, so that it fits
        # wherever the chosen steps will; the choice then keeps what the budget allows
        for b in engine.blocks():
            engine.set_recompute(b, True)
            b.offload_input = engine.offload is not None  # and its inputs in host memory
    if cpu_optimizer is True:  # fixed, not chosen: the recorded step updates on the CPU already
        engine.place_cpu(set(engine.opt_layers()))
    elif cpu_optimizer == "auto" and ok and engine.device.type == "cuda":
        # the recorded step keeps the optimizer state in host memory: uvmrt's least device
        # memory beside PyTorch's unmeasured peak, and the CPU's AdamW rate measured
        engine.place_cpu(set(engine.opt_layers()))
        if link_optimizer is True and ok:
            for l in engine.opt_layers():
                l.gpu_link = True
    opt = OffloadedOptimizer(engine, optimizer_class, groups, defaults, s.max_grad_norm, optimizer_kwargs)
    engine.opt = opt
    model._uvmrt_engine = engine
    return model, opt


def synchronize(model):
    """Waits for the optimizer updates of the last step that run beside the next step's
    forward (the CPU's, and the GPU's over the link); state_dict() and the next forward
    wait for them on their own."""
    _engine(model).wait_updates()


def step_stats(model, step=None):
    """The last completed step's counters (or step's, 0-based) as a dict: step_ms,
    prefetch_bytes, evict_bytes, discard_bytes, remote_read_bytes, remote_write_bytes,
    fault_count, gpu_faults, ..., and predicted_step_ms (the choice's prediction)."""
    e = _engine(model)
    summ = e.ctx.summary()
    if summ.steps == 0:
        return {}
    st = e.ctx.step_stats(summ.steps - 1 if step is None else step)
    out = {name: getattr(st, name) for name, _ in st._fields_}
    out["step_ms"] = st.step_ns / 1e6
    out["predicted_step_ms"] = e.choice.predicted_step_ns / 1e6 if e.choice is not None else None
    out["cpu_layers"] = sum(1 for l in e.layers if l.cpu_opt and not l.gpu_link)
    out["cpu_params"] = sum(p.numel() for l in e.layers if l.cpu_opt and not l.gpu_link
                            for _, p in l.owned if p.requires_grad)
    out["offload_blocks"] = sum(1 for l in e.blocks() if l.recompute and l.offload_input)
    out["offload_host_bytes"] = e.offload.host_bytes if e.offload is not None else 0
    out["link_layers"] = sum(1 for l in e.layers if l.cpu_opt and l.gpu_link)
    out["link_params"] = sum(p.numel() for l in e.layers if l.cpu_opt and l.gpu_link
                             for _, p in l.owned if p.requires_grad)
    out["recompute_layers"] = sum(1 for l in e.layers if l.recompute)
    out["torch_bytes"] = e.ctx_external if hasattr(e, "ctx_external") else None
    return out


def max_memory_allocated(model):
    """uvmrt's peak resident bytes plus torch's max_memory_allocated on that device."""
    e = _engine(model)
    m = e.ctx.memory_stats()
    t = torch.cuda.max_memory_allocated(e.device) if e.device.type == "cuda" else 0
    return m.peak_resident_bytes + t


def reset_peak_memory_stats(model):
    e = _engine(model)
    e.ctx.memory_peak_reset()
    if e.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(e.device)


def memory_summary(model):
    """A table like torch.cuda.memory_summary(): uvmrt's budget, resident and host-homed
    bytes by role, torch's own, and where each layer's optimizer runs."""
    e = _engine(model)
    m = e.ctx.memory_stats()
    gib = 2 ** 30
    roles = ["weight", "gradient", "activation", "optimizer state", "workspace"]
    lines = [f"uvmrt {L.lib().uvmrt_version_string().decode()} memory summary ({e.ctx.backend}, "
             f"{e.device})",
             f"  budget              {m.budget_bytes / gib:9.3f} GiB",
             f"  resident now        {m.resident_bytes / gib:9.3f} GiB",
             f"  resident peak       {m.peak_resident_bytes / gib:9.3f} GiB",
             f"  host-homed          {m.host_homed_bytes / gib:9.3f} GiB",
             f"  allocated           {m.allocated_bytes / gib:9.3f} GiB in {m.tensors} tensors"]
    for i, r in enumerate(roles):
        if m.role_tensors[i]:
            lines.append(f"    {r:17s} {m.role_footprint_bytes[i] / gib:9.3f} GiB, "
                         f"{m.role_resident_bytes[i] / gib:.3f} resident")
    if e.device.type == "cuda":
        lines.append(f"  torch allocated     {torch.cuda.memory_allocated(e.device) / gib:9.3f} GiB "
                     f"(peak {torch.cuda.max_memory_allocated(e.device) / gib:.3f}, reserved "
                     f"{torch.cuda.memory_reserved(e.device) / gib:.3f})")
    if hasattr(e, "ctx_external"):
        lines.append(f"  left for torch      {e.ctx_external / gib:9.3f} GiB (measured in the first step)")
    cpu = [l.name for l in e.layers if l.cpu_opt and not l.gpu_link]
    link = [l.name for l in e.layers if l.cpu_opt and l.gpu_link]
    rec = [l.name for l in e.layers if l.recompute]
    lines.append(f"  optimizer on CPU    {len(cpu)} of {len(e.opt_layers())} layers")
    lines.append(f"  GPU over the link   {len(link)} of {len(e.opt_layers())} layers (state in host memory)")
    off = [l.name for l in e.blocks() if l.recompute and l.offload_input]
    lines.append(f"  recompute           {len(rec)} of {len(e.blocks())} blocks, {len(off)} with their inputs "
                 f"in host memory")
    return "\n".join(lines) + "\n"


def report(model, fmt="text", path=None):
    """Writes uvmrt's report now: fmt text, json, csv or trace (uvmrt-report(5)); path
    None or "-" for stdout."""
    _engine(model).ctx.report_write(fmt, path)


def close(model):
    """Ends uvmrt's part: hooks removed, reports written (UVMRT_REPORT), uvmrt's memory
    released.  The parameters are copied back into ordinary tensors first."""
    e = _engine(model)
    e.wait_updates()
    with torch.no_grad():
        for slot in e.slots.values():
            slot.param.data = slot.param.data.clone()
            if slot.param.grad is not None:
                slot.param.grad = slot.param.grad.clone()
        for st in e.opt.state.values():
            for k, v in list(st.items()):
                if torch.is_tensor(v):
                    st[k] = v.clone()
    for l in e.layers:
        e.set_recompute(l, False)
    e.close()
    del model._uvmrt_engine


def _version_text():
    try:
        lib = f"libuvmrt {L.lib().uvmrt_version_string().decode()} ({L.library_path()})"
    except L.LibraryError as err:
        lib = f"libuvmrt not loaded: {err}"
    return f"uvmrt.torch {__version__}; {lib}; torch {torch.__version__}"
