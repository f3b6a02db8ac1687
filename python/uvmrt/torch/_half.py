"""Low-precision working copies of the weights that autocast casts.

Under torch.autocast, F.linear and torch.addmm cast an fp32 weight (and bias) to the
autocast dtype before the matmul, and autocast keeps that cast in its cache, for every
weight, until the forward ends: 2 bytes per parameter of PyTorch's memory at its peak,
and, for a layer whose fp32 weights are host-homed (the CPU runs its optimizer), 4
bytes per parameter read over the link by each cast, in the forward and again in each
recompute.

Instead, while a layer's forward runs (and its checkpoint's recompute), the weight and
bias of each nn.Linear and each transformers Conv1D it owns are replaced by a tensor
of the autocast dtype holding the same values autocast's cast would make (a
cast on the device; for a CPU layer, a device copy of the bf16 working copy that the
CPU's AdamW writes beside the fp32 weights: 2 bytes per parameter over the link).
Autocast then casts nothing and caches nothing; the matmuls compute exactly what they
did.  The copy is made by an autograd function of the fp32 parameter whose backward
gives the gradient in fp32, as autocast's cast does, so autograd accumulates it into
the parameter as before: the results are bitwise those of plain autocast training.

Only parameters used by exactly one such module are replaced (a weight tied to an
embedding keeps autocast's cast), and only while autocast is on for the device with a
16-bit floating dtype.  Between forwards the modules hold their fp32 parameters, so
state_dict(), the optimizer and the user's code see nothing else.
"""

import contextlib

import torch
from torch import nn

HALF_PARAMS = ("weight", "bias")


def half_module(m):
    """Whether autocast lowers every use of m's weight and bias (F.linear, torch.addmm)."""
    return isinstance(m, nn.Linear) or type(m).__name__ == "Conv1D"


def half_candidates(model):
    """{id(param): (module, attribute name)} for the parameters of Linear and Conv1D
    modules that no other module (nor another attribute) holds."""
    holders = {}
    for m in model.modules():
        for name, p in m._parameters.items():
            if p is not None:
                holders.setdefault(id(p), []).append((m, name))
    out = {}
    for pid, hs in holders.items():
        if len(hs) == 1 and half_module(hs[0][0]) and hs[0][1] in HALF_PARAMS:
            out[pid] = hs[0]
    return out


def autocast_dtype(device):
    """The 16-bit dtype autocast casts to on this device now, or None."""
    dev = device.type
    try:
        if not torch.is_autocast_enabled(dev):
            return None
        dt = torch.get_autocast_dtype(dev)
    except (TypeError, AttributeError, RuntimeError):  # torch before 2.4's device-type forms
        if dev == "cuda":
            if not torch.is_autocast_enabled():
                return None
            dt = torch.get_autocast_gpu_dtype()
        else:
            if not torch.is_autocast_cpu_enabled():
                return None
            dt = torch.get_autocast_cpu_dtype()
    return dt if dt in (torch.bfloat16, torch.float16) else None


class _HalfCopy(torch.autograd.Function):
    """param (fp32) -> its 16-bit values, from src (a bf16 working copy) when given;
    backward: the gradient in fp32, as autocast's cast gives it.  Unlike a leaf, the
    result is held only by what uses it (autograd keeps no reference to it), so a
    checkpointed block's copies go with its other activations."""

    @staticmethod
    def forward(ctx, param, src, dtype):
        if src is not None:
            if src.device.type == "cpu":
                # page-locked: a copy engine's DMA, which holds no SMs while it waits on
                # the link (a kernel reading host memory holds every SM it was given and
                # the other streams' kernels wait behind it: bench/probes/copy_contention.py)
                return src.to(param.device, non_blocking=True, copy=True)
            # managed: a kernel (not a memcpy) reads the host-homed copy over the link in
            # one pass, so that its pages stay on the host for the CPU's next update
            return torch.mul(src, 1)
        return param.detach().to(dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(torch.float32), None, None


class HalfWeights:
    """The swaps of one engine: which slots have a working copy, and the swap itself."""

    def __init__(self, engine, enabled):
        self.engine = engine
        self.enabled = enabled
        self.used_bf16 = False   # a forward ran with bf16 working copies (the calls declare them)
        self.stream = None       # the copies ahead of use (a CUDA stream; None: made when used)
        self.ready = {}          # layer -> {id(slot): (device copy, event)} fetched ahead

    def open(self, device):
        if device.type == "cuda":
            self.stream = torch.cuda.Stream(device=device)

    def prefetch(self, layer):
        """Starts reading a host-homed layer's bf16 working copies over the link on a stream
        of its own, while the layer before it computes, so that its forward (or recompute)
        finds them on the device. Only when its update is done (the CPU's) or ordered (the
        link's event); otherwise its forward reads them itself, as without this."""
        e = self.engine
        if self.stream is None or not self.used_bf16 or not layer.cpu_opt or layer in self.ready:
            return
        slots = [e.slots[id(p)] for _, p in layer.owned
                 if e.slots[id(p)].half is not None and "weight16" in e.slots[id(p)].views]
        if not slots or not e.cpu.is_done(layer):
            return
        cur = torch.cuda.current_stream(e.device)
        bufs = {id(s): torch.empty(s.views["weight16"].shape, dtype=torch.bfloat16, device=e.device)
                for s in slots}  # on cur: freed in its order
        self.stream.wait_stream(cur)
        ev = e.link_events.get(layer)
        if ev is not None:
            self.stream.wait_event(ev)  # the GPU's update over the link first
        with torch.cuda.stream(self.stream):
            for s in slots:
                src = self.source(s)
                if src.device.type == "cpu":
                    bufs[id(s)].copy_(src, non_blocking=True)  # page-locked: DMA (see _HalfCopy)
                else:
                    torch.mul(src, 1, out=bufs[id(s)])  # managed: a kernel, the pages stay on the host
        done = torch.cuda.Event()
        done.record(self.stream)
        self.ready[layer] = {k: (b, done) for k, b in bufs.items()}

    def drop(self, layer=None):
        """Forgets copies fetched ahead (their weights are about to change)."""
        if layer is None:
            self.ready.clear()
        else:
            self.ready.pop(layer, None)

    @contextlib.contextmanager
    def swapped(self, layer):
        """Layer's Linear/Conv1D parameters replaced by autocast-dtype copies while inside."""
        e = self.engine
        dtype = autocast_dtype(e.device) if self.enabled else None
        slots = [e.slots[id(p)] for _, p in layer.owned if e.slots[id(p)].half is not None] \
            if dtype is not None else []
        if not slots:
            yield
            return
        if dtype is torch.bfloat16:
            self.used_bf16 = True
        done = []
        try:
            for slot in slots:
                copy = self.copy(layer, slot, dtype)
                mod, name = slot.half
                mod._parameters[name] = copy
                done.append(slot)
            yield
        finally:
            for slot in done:
                mod, name = slot.half
                mod._parameters[name] = slot.param

    def source(self, slot):
        """Where slot's bf16 working copy is read from: its host view when it is page-locked
        (copied by DMA), its device view when it is managed memory (read by a kernel)."""
        pinned = self.engine.ctx.tensor_pinned(slot.handles["weight16"])
        return slot.hviews["weight16"] if pinned else slot.views["weight16"]

    def copy(self, layer, slot, dtype):
        src = self.source(slot) if (layer.cpu_opt and dtype is torch.bfloat16 and "weight16" in slot.views) \
            else None
        got = self.ready.get(layer, {}).pop(id(slot), None) if src is not None else None
        if got is not None:  # fetched ahead: wait for its copy, then a device-to-device one
            buf, ev = got
            torch.cuda.current_stream(self.engine.device).wait_event(ev)
            src = buf
            if not self.ready.get(layer):
                self.ready.pop(layer, None)
        if slot.trainable and torch.is_grad_enabled():
            return _HalfCopy.apply(slot.param, src, dtype)
        with torch.no_grad():
            return _HalfCopy.forward(None, slot.param, src, dtype)

    def refresh(self, slots):
        """The bf16 working copies of these slots made again from their fp32 weights (host views)."""
        with torch.no_grad():
            for slot in slots:
                if "weight16" in slot.hviews:
                    slot.hviews["weight16"].copy_(slot.hviews["weight"])
