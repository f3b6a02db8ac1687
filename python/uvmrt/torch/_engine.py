"""The engine behind uvmrt.torch.offload: uvmrt tensors under a model's parameters,
module hooks that become uvmrt layer calls, the recorded step's measurements, and
the choice (uvmrt_choose) of where each layer's optimizer runs and which blocks
recompute.

Calls per training step, all on torch's current stream:
  forward:   a layer's forward pre-hook opens (layer, forward), its forward hook
             closes it; the first one opens the step
  backward:  an identity autograd.Function on the layer's outputs opens (layer,
             backward) when their gradients arrive, one on its inputs closes it
             when the gradients of its inputs are made (autograd's thread and
             stream); a layer with no differentiable input is closed by the next
             one or by a callback at the end of the backward
  optimizer: opt.step() makes one call per layer (GPU: the user's optimizer class
             over that layer's parameters; CPU: uvmrt_adamw_cpu on host-homed
             tensors, on a worker thread; link: uvmrt_adamw_gpu on the same host-homed
             tensors, on a stream of its own, so that the GPU updates some host-homed
             layers over the link while the CPU updates the others) and ends the step
"""

import ctypes
import os
import sys
import threading
import time

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .. import _lib as L
from .._context import Context
from ._half import HalfWeights, half_candidates
from ._layers import find_layers
from ._offload import InputOffload

_SIM_GPU_STREAM = ctypes.c_char(0)
_SIM_CPU_STREAM = ctypes.c_char(0)
_SIM_LINK_STREAM = ctypes.c_char(0)
REVIEW_AFTER = 3  # planned steps after a choice before uvmrt_choice_review
# a review splits the host-homed updates between the CPU and the link again only when the
# new split saves more than this share of the measured step: a new split records a step
# again (4-5 s for GPT-2 d48 at 8 GiB, bench/README.md session 30), and the two rates,
# measured beside each other, move by 20-30% between reviews (CPU 3.54 then 2.74 Gparam/s)
RESPLIT_GAIN = 0.03


def fmt_bytes(n):
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def notice(text):
    print(f"uvmrt: {text}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------
# views of uvmrt memory as torch tensors

class _CudaArray:
    """The __cuda_array_interface__ of a range of managed memory (torch.as_tensor
    takes it without a copy and keeps this object alive with the tensor)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


def host_view(ptr, nbytes, dtype, shape):
    buf = (ctypes.c_uint8 * nbytes).from_address(ptr)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).view(shape)


def device_view(ptr, nbytes, dtype, shape, device):
    if device.type == "cpu":
        return host_view(ptr, nbytes, dtype, shape)
    t = torch.as_tensor(_CudaArray(ptr, nbytes), device=device)
    return t.view(dtype).view(shape)


class Slot:
    """One parameter's uvmrt tensors and their views."""

    def __init__(self, fqn, param):
        self.fqn, self.param = fqn, param
        self.shape, self.dtype = tuple(param.shape), param.dtype
        self.nbytes = param.numel() * param.element_size()
        self.trainable = param.requires_grad
        self.kinds = []         # its uvmrt tensors: weight, grad, exp_avg, exp_avg_sq, weight16 (in this order)
        self.half = None        # (module, attribute) when a working copy replaces it in forwards (_half.py)
        self.handles = {}       # kind -> uvmrt tensor handle
        self.views = {}         # kind -> device view
        self.hviews = {}        # kind -> host view (the same memory, for the CPU)
        self.norm = None        # the gradient's 2-norm (0-d tensor) of the last backward

    def kind_dtype(self, kind):
        return torch.bfloat16 if kind == "weight16" else self.dtype

    def kind_nbytes(self, kind):
        return self.param.numel() * 2 if kind == "weight16" else self.nbytes


# ----------------------------------------------------------------------------
# identity functions whose backward tells the engine where autograd is

class _Boundary(torch.autograd.Function):
    """Identity on a layer's tensors whose backward calls the engine's `event` for the layer."""
    event = None  # the Engine method's name

    @staticmethod
    def forward(ctx, engine, layer, *tensors):
        ctx.engine, ctx.layer = engine, layer
        return tuple(t.detach() for t in tensors)

    @classmethod
    def backward(cls, ctx, *grads):
        getattr(ctx.engine, cls.event)(ctx.layer)
        return (None, None) + grads


class _PreBackward(_Boundary):
    """On a layer's outputs: their gradients arrived, its backward starts."""
    event = "on_pre_backward"


class _PostBackward(_Boundary):
    """On a layer's inputs: their gradients are made, its backward is over."""
    event = "on_post_backward"


def _wrap(fn, engine, layer, obj):
    """obj with every tensor that requires grad passed through fn (one node for all)."""
    leaves, spec = tree_flatten(obj)
    idx = [i for i, x in enumerate(leaves)
           if isinstance(x, torch.Tensor) and x.requires_grad and x.is_floating_point()]
    if not idx:
        return obj, False
    out = fn.apply(engine, layer, *[leaves[i] for i in idx])
    for i, t in zip(idx, out):
        leaves[i] = t
    return tree_unflatten(leaves, spec), True


# ----------------------------------------------------------------------------
# the engine

class Engine:
    def __init__(self, model, settings):
        self.model = model
        self.s = settings
        self.layers = find_layers(model, settings.layers)
        if not self.layers:
            raise ValueError("offload: the model has no parameters to offload")
        self.ctx = None
        self.device = None
        self.slots = {}            # id(param) -> Slot
        self.owner = {}            # id(param) -> Layer
        self.hooks = []
        self.opt = None            # the OffloadedOptimizer, once offload() made it (rebind)
        self.in_step = False
        self.inference_step = False
        self.opened_by_updates = False  # the open step began with the last step's link updates
        self.in_backward = False
        self.open = None           # (layer, phase) of the open call
        self.steps = 0             # completed training steps
        self.recording = True      # the first step: measure
        self.fwd_order = []        # layers in the recorded step's forward order, each once
        self.fwd_pos = {}          # layer -> its place in fwd_order
        self.rec_calls = []        # the recorded step's (layer, phase) forward and backward calls
        self.choice = None
        self.knob_cpu = self.knob_rec = self.knob_link = self.knob_off = None
        self.share = None          # link_share() at the choice: of the host-homed parameters, the link's
        self.rate_cpu = self.rate_link = None  # measured parameters per second of each updater
        self.link_timing = None    # (start event, end event, parameters) of the last link updates
        self.offload = None        # InputOffload: checkpointed blocks' inputs in host memory
        self.measured_off = set()  # the blocks whose inputs were in host memory in the recorded step
        self.planned_since_choice = 0
        self.tried = {}            # values applied -> the step time measured with them (reviews)
        self.reviews = 0
        self.measure = None
        self.grads_fresh = {}      # layer -> no owned grad existed at its backward (W, not RW)
        self.cpu_stream = None
        self.link_stream = None    # the link layers' updates (uvmrt_adamw_gpu), beside the forward
        self.grad_stream = None    # gradients to host-homed memory, beside the backward
        # host-homed state in page-locked memory (place); UVMRT_TORCH_PINNED=0: managed
        self.pinned = os.environ.get("UVMRT_TORCH_PINNED", "1") != "0"
        self.grad_pending = False  # copies queued on grad_stream that torch's stream has not waited for
        self.link_events = {}      # layer -> CUDA event after its last update over the link
        self.link_keep = None      # the clip coefficient the queued link updates read
        self.torch_peak_bytes = 0
        self.cpu = CpuWorker(self)
        self.ctx_external = 0
        self.measured_with_recompute = False
        self.half = HalfWeights(self, settings.half_weights)

    # ------------------------------------------------------------ setup
    def open_context(self):
        s = self.s
        self.ctx = Context(backend=s.backend, budget=s.budget, profile=s.profile, log_level=s.log_level,
                           report=s.report, trace=s.trace, device=s.device_index)
        cuda = self.ctx.backend == "cuda"
        if not cuda and s.backend != "sim" and torch.cuda.is_available():
            self.ctx.close()
            raise RuntimeError(
                f"offload: libuvmrt ({L.library_path()}) found no usable GPU (a build without CUDA, or "
                f"no concurrent managed access) while torch sees {torch.cuda.get_device_name()}: "
                f"rebuild libuvmrt with CUDA, or pass backend='sim' to train on the CPU against uvmrt's model")
        self.device = torch.device("cuda", s.device_index) if cuda else torch.device("cpu")
        if cuda:
            self.cpu_stream = torch.cuda.Stream(device=self.device)
            self.link_stream = torch.cuda.Stream(device=self.device)
            self.grad_stream = torch.cuda.Stream(device=self.device)
        self.half.open(self.device)
        if self.s.offload_inputs is True or (self.s.offload_inputs == "auto" and self.device.type == "cuda"):
            self.offload = InputOffload(self.device)

    def check_params(self):
        for l in self.layers:
            for fqn, p in l.owned:
                if p.device.type == "meta":
                    raise ValueError(f"offload: parameter {fqn} is on the meta device (no data): "
                                     f"materialise the model first (to_empty and init, or load weights)")
                if p.device.type == "cuda" and self.device.type == "cuda" and p.device != self.device:
                    raise ValueError(f"offload: parameter {fqn} is on {p.device}, uvmrt runs on "
                                     f"{self.device}: keep the model on the CPU or on that GPU")
                if p.layout != torch.strided:
                    raise ValueError(f"offload: parameter {fqn} has layout {p.layout}: expected a dense "
                                     f"(strided) tensor")

    def allocate(self, adam_state):
        """Every layer's tensors, filled from the parameters; nothing of the model changes
        until all succeeded (a failure frees what was made)."""
        made = []
        half = half_candidates(self.model) if self.s.half_weights else {}
        try:
            for l in self.layers:
                l.index = self.ctx.layer_add(l.name)
                for fqn, p in l.owned:
                    slot = Slot(fqn, p)
                    slot.kinds = ["weight"] + (["grad"] + (["exp_avg", "exp_avg_sq"] if adam_state else [])
                                               if slot.trainable else [])
                    if p.dtype == torch.float32 and id(p) in half:
                        slot.half = half[id(p)]
                        if slot.trainable and adam_state and self.s.cpu_capable:
                            slot.kinds.append("weight16")  # written by the CPU's AdamW (host-homed)
                    self.slots[id(p)] = slot
                    self.owner[id(p)] = l
                descs, order = self.layer_descs(l)
                if not descs:
                    continue  # borrows only (a tied head)
                handles = self.ctx.tensors_alloc(descs)
                made += handles
                for (slot, kind), h in zip(order, handles):
                    slot.handles[kind] = h
                    if kind == "weight16":
                        self.place(h, True)  # before the views: pinned, its address is new
                    self.view(slot, kind)
            with torch.no_grad():
                for slot in self.slots.values():
                    slot.hviews["weight"].copy_(slot.param.detach().to("cpu"))
                    for kind in ("exp_avg", "exp_avg_sq"):
                        if kind in slot.hviews:
                            slot.hviews[kind].zero_()
                self.half.refresh(self.slots.values())
        except BaseException:
            for h in made:
                try:
                    self.ctx.tensor_free(h)
                except Exception:
                    pass
            self.slots.clear()
            self.owner.clear()
            raise

    def place(self, h, host):
        """A host-homed tensor of the CPU's or the link's updates lives in page-locked
        memory (UVMRT_PLACE_PINNED: a GPU write into host-resident managed memory holds the
        work queued after it on every stream, bench/probes/copy_contention.py), unless
        UVMRT_TORCH_PINNED=0; its views are made again after (rebind)."""
        if host and self.pinned:
            try:
                self.ctx.set_placement(h, True, pinned=True)
                return
            except L.UvmrtError as e:  # no page-locked memory to spare: managed, as before
                self.pinned = False
                notice(f"host-homed state stays in managed memory: page-locked memory refused ({e})")
        self.ctx.set_placement(h, host)

    def view(self, slot, kind):
        """slot's host and device views of kind, at its tensor's address now."""
        ptr = self.ctx.tensor_ptr(slot.handles[kind])
        n, dt = slot.kind_nbytes(kind), slot.kind_dtype(kind)
        slot.hviews[kind] = host_view(ptr, n, dt, slot.shape)
        slot.views[kind] = device_view(ptr, n, dt, slot.shape, self.device)

    def rebind(self, slot):
        """After a placement moved slot's tensors: new views, and everything that holds
        the old ones takes the new (the parameter, its gradient, the optimizer's state)."""
        old_grad = slot.views.get("grad")
        for kind in slot.handles:
            self.view(slot, kind)
        with torch.no_grad():
            slot.param.data = slot.views["weight"]
            if old_grad is not None and slot.param.grad is old_grad:
                slot.param.grad = slot.views["grad"]
        st = self.opt.state.get(slot.param) if self.opt is not None else None
        if st is not None:
            for kind in ("exp_avg", "exp_avg_sq"):
                if kind in st and kind in slot.views:
                    st[kind] = slot.views[kind]

    def layer_descs(self, l):
        """Layer l's tensors as uvmrt_tensors_alloc takes them: [(name, layer, role, bytes)], and
        the (slot, kind) of each (the real context and the rehearsals' models alike)."""
        descs, order = [], []
        for fqn, p in l.owned:
            slot = self.slots[id(p)]
            for kind in slot.kinds:
                # the working copy belongs to no layer: only the calls that read it name it
                layer = -1 if kind == "weight16" else l.index
                descs.append((fqn if kind == "weight" else f"{fqn}.{kind}", layer, _ROLE[kind],
                              slot.kind_nbytes(kind)))
                order.append((slot, kind))
        return descs, order

    def take_over(self):
        """The model's parameters become views of uvmrt memory; its buffers go to the device."""
        for slot in self.slots.values():
            slot.param.data = slot.views["weight"]
            slot.param.grad = None
        for m in self.model.modules():
            for name, b in list(m._buffers.items()):
                if b is not None and b.device != self.device:
                    m._buffers[name] = b.to(self.device)

    def install_hooks(self):
        for l in self.layers:
            m = l.module
            self.install_forward(l)
            self.hooks.append(m.register_forward_pre_hook(
                lambda mod, args, kwargs, l=l: self.pre_forward(l, args, kwargs), with_kwargs=True))
            self.hooks.append(m.register_forward_hook(
                lambda mod, args, kwargs, out, l=l: self.post_forward(l, out), with_kwargs=True))
        self.hooks.append(self.model.register_forward_hook(lambda mod, args, out: self.root_post_forward()))
        # the CPU's updates of the last step land before anyone reads or writes the weights
        self.hooks.append(self.model.register_state_dict_pre_hook(lambda *a, **k: self.wait_updates()))
        if hasattr(self.model, "register_load_state_dict_pre_hook"):
            self.hooks.append(self.model.register_load_state_dict_pre_hook(lambda *a, **k: self.wait_updates()))
        # loaded weights reach the CPU layers' working copies
        self.hooks.append(self.model.register_load_state_dict_post_hook(lambda *a, **k: self.refresh_half()))
        for slot in self.slots.values():
            if slot.trainable:
                self.hooks.append(slot.param.register_post_accumulate_grad_hook(
                    lambda p, slot=slot: self.grad_ready(slot)))

    def install_forward(self, l):
        """l's forward, run with its working copies (_half.py) and, when l.recompute,
        through a non-reentrant checkpoint whose recompute swaps them in again."""
        m = l.module
        orig = m.forward
        l.fwd_orig = orig

        def run(*args, **kwargs):
            with self.half.swapped(l):
                return orig(*args, **kwargs)

        def forward(*args, **kwargs):
            if l.recompute:
                if l.offload_input and self.offload is not None and torch.is_grad_enabled():
                    with self.offload.hooks(l):  # the checkpoint's saved inputs, to host memory
                        return torch.utils.checkpoint.checkpoint(run, *args, use_reentrant=False, **kwargs)
                return torch.utils.checkpoint.checkpoint(run, *args, use_reentrant=False, **kwargs)
            return run(*args, **kwargs)
        m.forward = forward

    def restore_forwards(self):
        for l in self.layers:
            if getattr(l, "fwd_orig", None) is not None:
                m = l.module
                if "forward" in m.__dict__:
                    del m.__dict__["forward"]
                if m.forward != l.fwd_orig:
                    m.forward = l.fwd_orig
                l.fwd_orig = None

    def refresh_half(self):
        self.wait_updates()
        self.half.drop()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.half.refresh([self.slots[id(p)] for l in self.layers if l.cpu_opt for _, p in l.owned])

    # ------------------------------------------------------------ streams and calls
    def stream(self):
        if self.device.type == "cuda":
            return ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)
        return ctypes.cast(ctypes.pointer(_SIM_GPU_STREAM), ctypes.c_void_p)

    def cpu_stream_handle(self):
        if self.cpu_stream is not None:
            return ctypes.c_void_p(self.cpu_stream.cuda_stream)
        return ctypes.cast(ctypes.pointer(_SIM_CPU_STREAM), ctypes.c_void_p)

    def link_stream_handle(self):
        if self.link_stream is not None:
            return ctypes.c_void_p(self.link_stream.cuda_stream)
        return ctypes.cast(ctypes.pointer(_SIM_LINK_STREAM), ctypes.c_void_p)

    def ensure_step(self, inference=False):
        if self.in_step and inference and self.opened_by_updates:
            # the step the last updates opened holds no forward yet: it ends here, and an
            # inference step of its own begins
            self.ctx.step_end()
            self.in_step = self.opened_by_updates = False
        if self.in_step and not inference:
            self.opened_by_updates = False
        if not self.in_step:
            if self.recording and not inference:
                self.start_measure()
            self.ctx.step_begin()
            self.in_step, self.inference_step = True, inference

    def begin(self, l, phase, call):
        self.close_open()
        try:
            self.ctx.layer_begin(call)
        except L.UvmrtError as e:
            if e.status == L.ERR_BUDGET:
                raise RuntimeError(f"uvmrt: module {l.name!r}: its {_PHASES[phase]} needs more device memory "
                                   f"than the budget leaves ({fmt_bytes(self.ctx.budget)} less "
                                   f"{fmt_bytes(self.ctx_external)} for PyTorch): give a larger budget") from e
            raise
        self.open = (l, phase)
        if self.measure is not None and phase == L.PHASE_BACKWARD:
            self.measure.backward_begin(l)

    def close_open(self):
        if self.open is not None:
            self.ctx.layer_end()
            if self.measure is not None and self.open[1] == L.PHASE_BACKWARD:
                self.measure.backward_end(self.open[0])
            self.open = None

    def uses_array(self, uses):
        arr = (L.Use * len(uses))()
        for i, (h, a) in enumerate(uses):
            arr[i].tensor, arr[i].access = h, a
        return arr

    def make_call(self, l, phase, stream, uses=(), flops=0.0, hbm_bytes=0, host_bytes=0, after=None,
                  no_default=False):
        c = L.LayerCall()
        c.layer, c.phase, c.stream = l.index, phase, stream
        if uses:
            c._uses = self.uses_array(uses)  # kept alive with the struct
            c.uses = ctypes.cast(c._uses, ctypes.POINTER(L.Use))
            c.n_uses = len(uses)
        c.no_default_uses, c.flops, c.hbm_bytes, c.host_bytes = int(no_default), float(flops), int(hbm_bytes), \
            int(host_bytes)
        if after is not None:
            c.after = after
        return c

    def gpu_uses(self, l, phase, handles=None, fresh=True):
        """The uses of l's forward or backward call and whether they replace the defaults:
        a CPU layer whose forwards read bf16 working copies names what the GPU touches
        (the copies, its other weights, its gradients), not the fp32 weights of the copies."""
        uses = self.borrowed_uses(l, handles)

        def h(slot, kind):
            return slot.handles[kind] if handles is None else handles[(id(slot.param), kind)]
        slots = [self.slots[id(p)] for _, p in l.owned]
        if not (l.cpu_opt and self.half.used_bf16 and any("weight16" in s.kinds for s in slots)):
            if phase == L.PHASE_BACKWARD and not fresh:
                uses += [(h(s, "grad"), L.USE_READWRITE) for s in slots if s.trainable]
            return uses, False
        for s in slots:
            uses.append((h(s, "weight16" if "weight16" in s.kinds else "weight"), L.USE_READ))
            if phase == L.PHASE_BACKWARD and s.trainable:
                uses.append((h(s, "grad"), L.USE_WRITE if fresh else L.USE_READWRITE))
        return uses, True

    def borrowed_uses(self, l, handles=None):
        """The weights l uses but another layer owns (handles: a model's, by (id, kind))."""
        out = []
        for p in l.borrowed:
            slot = self.slots.get(id(p))
            if slot is not None:
                h = slot.handles["weight"] if handles is None else handles[(id(p), "weight")]
                out.append((h, L.USE_READ))
        return out

    # ------------------------------------------------------------ work estimates
    def fwd_flops(self, l):
        return 2.0 * l.matmul_params * l.tokens

    def fwd_hbm(self, l):
        return 4 * l.act_bytes

    def forward_work(self, l):
        return {"flops": self.fwd_flops(l), "hbm_bytes": self.fwd_hbm(l)}

    def backward_work(self, l, recompute):
        f = self.fwd_flops(l)
        return {"flops": 2 * f + (f if recompute else 0), "hbm_bytes": 2 * self.fwd_hbm(l)}

    def gpu_adam_work(self, l):
        return {"hbm_bytes": 28 * sum(p.numel() for _, p in l.owned)}

    def cpu_adam_work(self, l):
        n = sum(p.numel() for _, p in l.owned if self.slots[id(p)].trainable)
        return {"host_bytes": self.adam_host_bytes(n), "no_default": True}

    def layer_params(self, l):
        return sum(p.numel() for _, p in l.owned if self.slots[id(p)].trainable)

    def link_adam_uses(self, l, handles=None):
        """What uvmrt_adamw_gpu reads and writes of l's host-homed tensors (over the link)."""
        uses = []
        for _, p in l.owned:
            slot = self.slots[id(p)]
            if not slot.trainable:
                continue
            hd = slot.handles if handles is None else {k: handles[(id(p), k)] for k in slot.handles}
            for kind, acc in (("weight", L.USE_READWRITE), ("exp_avg", L.USE_READWRITE),
                              ("exp_avg_sq", L.USE_READWRITE), ("grad", L.USE_READ), ("weight16", L.USE_WRITE)):
                if kind in hd:
                    uses.append((hd[kind], acc))
        return uses

    def adam_host_bytes(self, n_params):
        p = self.ctx.profile
        if p.cpu_adamw_params_per_s > 0 and p.host_mem_bps > 0:
            return int(n_params * p.host_mem_bps / p.cpu_adamw_params_per_s)
        return n_params * 28

    # ------------------------------------------------------------ forward
    def pre_forward(self, l, args, kwargs):
        if self.in_backward:
            return None  # a checkpoint's recompute: part of the open backward call
        inference = not torch.is_grad_enabled()
        if l.cpu_opt or self.cpu.pending:
            self.cpu.wait(l if l.cpu_opt else None)
        if self.grad_pending:
            self.join_grads()  # another micro-batch's backward adds to these gradients
        ev = self.link_events.pop(l, None)
        if ev is not None:  # its update over the link, before its forward reads the weights
            torch.cuda.current_stream(self.device).wait_event(ev)
        if not self.recording and torch.is_grad_enabled():
            i = self.fwd_pos.get(l)
            if i is not None and i + 1 < len(self.fwd_order):
                self.half.prefetch(self.fwd_order[i + 1])  # the next layer's working copies
        self.ensure_step(inference)
        if self.recording and not inference:
            if l not in self.fwd_order:
                self.fwd_pos[l] = len(self.fwd_order)
                self.fwd_order.append(l)
            self.rec_calls.append((l, L.PHASE_FORWARD))
            self.measure_inputs(l, args, kwargs)
        uses, only = self.gpu_uses(l, L.PHASE_FORWARD)
        call = self.make_call(l, L.PHASE_FORWARD, self.stream(), uses=uses, no_default=only,
                              **self.forward_work(l))
        self.begin(l, L.PHASE_FORWARD, call)
        if self.recording and not inference and self.measure is not None:
            self.measure.enter(l)
        if inference:
            return None
        (args, kwargs), _ = _wrap(_PostBackward, self, l, (args, kwargs))
        return args, kwargs

    def post_forward(self, l, out):
        if self.in_backward:
            return None
        if self.recording and self.measure is not None:
            self.measure.leave(l)
        if self.open is not None and self.open[0] is l:
            self.close_open()
        if not torch.is_grad_enabled():
            return None
        out, _ = _wrap(_PreBackward, self, l, out)
        return out

    def root_post_forward(self):
        if self.in_step and self.inference_step:
            self.close_open()
            self.ctx.step_end()
            self.in_step = self.inference_step = False

    # ------------------------------------------------------------ backward
    def on_pre_backward(self, l):
        if not self.in_backward:
            self.in_backward = True
            torch.autograd.Variable._execution_engine.queue_callback(self.on_backward_done)
        if self.recording:
            self.rec_calls.append((l, L.PHASE_BACKWARD))
        i = self.fwd_pos.get(l)
        if self.offload is not None and i is not None:  # the inputs of the next two blocks back
            for j in (i - 1, i - 2):
                if j >= 0:
                    self.offload.fetch(self.fwd_order[j])
        if i is not None and i >= 1 and self.fwd_order[i - 1].recompute:
            self.half.prefetch(self.fwd_order[i - 1])  # its recompute's working copies
        fresh = not any(self.slots[id(p)].trainable and p.grad is not None for _, p in l.owned)
        uses, only = self.gpu_uses(l, L.PHASE_BACKWARD, fresh=fresh)
        call = self.make_call(l, L.PHASE_BACKWARD, self.stream(), uses=uses, no_default=only,
                              **self.backward_work(l, l.recompute))
        self.begin(l, L.PHASE_BACKWARD, call)

    def on_post_backward(self, l):
        if self.open is not None and self.open[0] is l and self.open[1] == L.PHASE_BACKWARD:
            self.close_open()

    def on_backward_done(self):
        self.close_open()
        self.in_backward = False

    def grad_ready(self, slot):
        p = slot.param
        g = p.grad
        view = slot.views["grad"]
        if g is None:
            return
        if self.s.max_grad_norm is not None:
            slot.norm = torch._foreach_norm([g], 2.0)[0]
        if g is not view:
            with torch.no_grad():
                if self.grad_stream is not None and self.owner[id(p)].cpu_opt:
                    # a host-homed gradient leaves on a stream of its own, beside the backward
                    self.grad_stream.wait_stream(torch.cuda.current_stream(self.device))
                    with torch.cuda.stream(self.grad_stream):
                        view.copy_(g)
                    g.record_stream(self.grad_stream)
                    self.grad_pending = True
                else:
                    view.copy_(g)
            p.grad = view

    # ------------------------------------------------------------ the recorded step's measurements
    def start_measure(self):
        """The recorded step measures what PyTorch holds.  On a GPU every block recomputes
        in it (PyTorch's least memory, so that the step fits where the others will) and
        torch's own counters give its peak and each block's backward working set; on sim,
        nothing recomputes and the bytes autograd saves per layer are counted."""
        if self.device.type == "cuda":
            self.measure = _CudaMeasure(self)
        else:
            self.measure = _Measure(self)

    def measure_inputs(self, l, args, kwargs):
        leaves, _ = tree_flatten((args, kwargs))
        tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
        floats = [t for t in tensors if t.is_floating_point()]
        first = floats[0] if floats else (tensors[0] if tensors else None)
        if first is not None:
            l.tokens = first.numel() // first.shape[-1] if first.is_floating_point() and first.dim() > 1 \
                else first.numel()
        l.in_bytes = sum(t.numel() * t.element_size() for t in floats if t.requires_grad)

    def finish_measure(self):
        m, self.measure = self.measure, None
        if m is not None:
            m.close()
        if self.offload is not None:
            for l in self.blocks():
                l.off_bytes = self.offload.last_bytes.get(l, 0) if l.offload_input else 0
            self.measured_off = {l for l in self.blocks() if l.off_bytes > 0}

    def external_bytes(self, rec, off=None):
        """Device memory torch holds at its peak with the blocks in rec recomputing."""
        ws = self.s.workspace_bytes
        if ws is None:  # beyond the measured peak: fragmentation of torch's caching allocator
            ws = 128 << 20 if self.device.type == "cuda" else 0
        if self.measured_with_recompute:
            # measured with every block recomputing: a kept block adds what its backward
            # regenerated (its activations) less the input the checkpoint kept anyway; a block
            # whose input was in host memory then and is not now adds that input
            kept = sum(max(0, l.act_bytes - l.in_bytes) for l in self.blocks() if l not in rec)
            back = sum(l.off_bytes for l in self.measured_off if l not in (off or ()))
            return self.torch_peak_bytes + kept + back + ws
        saved = sum(l.act_bytes - l.in_bytes for l in rec if l.act_bytes > l.in_bytes)
        regen = max((l.act_bytes for l in rec), default=0)
        return max(0, self.torch_peak_bytes - saved + regen) + ws

    # ------------------------------------------------------------ the optimizer phase (called by the optimizer)
    def optimizer_phase(self, opt):
        self.close_open()
        self.join_grads()
        self.half.drop()  # copies fetched ahead and not used: the update changes their weights
        self.in_backward = False
        if not self.in_step:  # a step without forward: nothing to do but the update
            self.ensure_step()
        self.cpu.report_measured(self)
        coef = opt.clip_coefficient()
        coef_cpu, done = coef, None
        if self.device.type == "cuda":
            if coef is not None:
                coef_cpu = coef.to("cpu", non_blocking=True)
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(self.device))
        order = self.fwd_order if self.fwd_order else self.layers
        for l in order:  # GPU layers: the user's optimizer class, on torch's stream
            if l.cpu_opt or not any(self.slots[id(p)].trainable for _, p in l.owned):
                continue
            call = self.make_call(l, L.PHASE_OPTIMIZER, self.stream(), **self.gpu_adam_work(l))
            self.begin(l, L.PHASE_OPTIMIZER, call)
            opt.gpu_step(l, coef)
            self.close_open()
        # CPU layers, in forward order: the worker thread updates them once the backward
        # (and the clip's norms) are done, beside the GPU's updates and the next step's
        # forward, whose pre-hook waits for its own layer's update only
        cpu_layers = [l for l in order if l.cpu_opt and not l.gpu_link]
        for l in cpu_layers:
            call = self.make_call(l, L.PHASE_OPTIMIZER, self.cpu_stream_handle(), after=self.stream(),
                                  **self.cpu_adam_work(l))
            self.begin(l, L.PHASE_OPTIMIZER, call)
            self.close_open()
        if cpu_layers:
            # which parameters got a gradient is decided now: zero_grad() may run before the update
            with_grad = {id(p) for l in cpu_layers for _, p in l.owned if p.grad is not None}
            for l in cpu_layers:  # and the hyperparameters (an LR scheduler steps next)
                opt.sync_hparams(l)
            self.cpu.submit(cpu_layers, done, coef_cpu, with_grad)
        link_layers = [l for l in order if l.cpu_opt and l.gpu_link]
        self.ctx.step_end()
        self.in_step = False
        self.steps += 1
        self.after_step()
        if link_layers:
            # The updates over the link go on beside the next forward (each layer's forward
            # waits for its own update only), so they are the next step's first calls: in
            # this step uvmrt_step_end would wait for them (it waits for every GPU stream of
            # the step's calls) and the next forward would start after the last update.
            # They are queued after the review (between steps, where placements may
            # change): their kernels update the same tensors wherever these now live.
            self.ensure_step()
            self.opened_by_updates = True
            self.link_updates(opt, link_layers, coef)

    def link_updates(self, opt, layers, coef):
        """The GPU's updates of host-homed layers over the link, in forward order on the link
        stream once the backward (and the clip's norm) is done; each layer's event lets its
        next forward wait for its own update only. On sim the CPU's AdamW stands in for the
        kernel (the same bits), in this thread."""
        with_grad = {id(p) for l in layers for _, p in l.owned if p.grad is not None}
        if self.device.type == "cuda":
            self.link_stream.wait_stream(torch.cuda.current_stream(self.device))  # the backward's gradients
        if self.device.type == "cuda" and coef is not None:
            coef = coef.to(torch.float32)
            coef.record_stream(self.link_stream)  # read by the kernels after torch lets it go
            self.link_keep = coef
        start = None
        if self.device.type == "cuda":
            start = torch.cuda.Event(enable_timing=True)
            start.record(self.link_stream)
        for l in layers:
            opt.sync_hparams(l)
            call = self.make_call(l, L.PHASE_OPTIMIZER, self.link_stream_handle(), after=self.stream(),
                                  uses=self.link_adam_uses(l), no_default=True)
            self.begin(l, L.PHASE_OPTIMIZER, call)
            try:
                if self.device.type == "cuda":
                    opt.link_step(l, coef, with_grad, self.link_stream_handle())
                    ev = torch.cuda.Event()
                    ev.record(self.link_stream)
                    self.link_events[l] = ev
                else:
                    opt.cpu_step(l, None if coef is None else float(coef), with_grad)
            finally:
                self.close_open()
        if start is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record(self.link_stream)
            self.link_timing = (start, end, sum(self.layer_params(l) for l in layers))

    def measure_rates(self):
        """The two updaters' rates in the last step (parameters per second), for link_share."""
        cpu_ns, cpu_n = self.cpu.last_total()
        if cpu_ns > 0 and cpu_n > 0:
            self.rate_cpu = cpu_n / (cpu_ns * 1e-9)
        if self.link_timing is not None:
            start, end, n = self.link_timing
            end.synchronize()
            ms = start.elapsed_time(end)
            if ms > 0 and n > 0:
                self.rate_link = n / (ms * 1e-3)

    def join_grads(self):
        """torch's stream waits for the gradients' copies (before anything reads or adds to them)."""
        if self.grad_pending:
            torch.cuda.current_stream(self.device).wait_stream(self.grad_stream)
            self.grad_pending = False

    def wait_updates(self, l=None):
        """Waits for the optimizer's updates of the last step that run beside the next
        forward: the CPU's of layer l (None: every layer; raises its error) and, with
        l None, the GPU's over the link (the host waits for them)."""
        self.cpu.wait(l)
        if l is None and self.link_events:
            for ev in self.link_events.values():
                ev.synchronize()
            self.link_events.clear()

    def wait_cpu(self, l=None):
        """The old name of wait_updates."""
        self.wait_updates(l)

    def after_step(self):
        if self.recording:
            self.recording = False
            self.finish_measure()
            self.choose()
            return
        if self.choice is None:
            return
        self.planned_since_choice += 1
        if self.planned_since_choice == REVIEW_AFTER and self.reviews < 2 and self.s.review:
            self.reviews += 1
            self.measure_rates()  # the link's share with the rates measured beside each other
            old_share, self.share = self.share, self.link_share()
            before = tuple(self.choice.values)
            choice, changed = self.ctx.choice_review()
            self.tried[before] = choice.measured_step_ns  # what the values now applied measured
            if changed and tuple(choice.values) in self.tried:
                # back to values measured before: keep the faster of those measured, and stop
                # (a model that misjudges both would otherwise swap them at every review)
                best = min(self.tried, key=self.tried.get)
                changed = best != before
                if changed:
                    for i, v in enumerate(best):
                        choice.values[i] = v
                self.reviews = 2
            if not changed and old_share is not None and abs(self.share - old_share) > 0.02:
                if not self.resplit_worth(old_share, self.share, choice.measured_step_ns):
                    self.share = old_share  # the step it would save is within the rates' spread
                else:
                    changed = True  # the same values, another split of the host-homed layers
                    notice(f"the link's share of the host-homed updates: {old_share:.2f} -> {self.share:.2f} "
                           f"(measured: CPU {(self.rate_cpu or 0) / 1e9:.2f}, link "
                           f"{(self.rate_link or 0) / 1e9:.2f} Gparam/s)")
            self.choice = choice
            if changed:
                notice(f"the review chose again: {self.describe(choice.values)} "
                       f"(measured {choice.measured_step_ns / 1e6:.1f} ms/step against "
                       f"{choice.first_predicted_step_ns / 1e6:.1f} predicted)")
                self.apply(choice.values)
                self.planned_since_choice = -1  # the re-recorded step is not a planned one
            elif self.s.verbose:
                notice(f"the values stay, predicted with the measured work: "
                       f"{choice.predicted_step_ns / 1e6:.1f} ms/step")

    # ------------------------------------------------------------ the choice
    def opt_layers(self):
        return [l for l in self.fwd_order or self.layers
                if any(self.slots[id(p)].trainable for _, p in l.owned)]

    def blocks(self):
        return [l for l in self.fwd_order or self.layers if l.is_block]

    def knobs(self):
        knobs = []
        ol, bl = self.opt_layers(), self.blocks()
        self.knob_cpu = self.knob_rec = None
        if self.s.cpu_optimizer == "auto" and self.s.cpu_capable and ol:
            vals = sorted({(k * len(ol) + 4) // 8 for k in range(9)})
            self.knob_cpu = len(knobs)
            knobs.append(("cpu_layers", vals))
        if self.s.recompute == "auto" and bl:
            vals = sorted({0, len(bl) // 4, len(bl) // 2, 3 * len(bl) // 4, len(bl)})
            self.knob_rec = len(knobs)
            knobs.append(("recompute", vals))
        self.knob_off = None
        if self.s.offload_inputs == "auto" and self.offload is not None and bl and self.s.recompute is not False:
            self.knob_off = len(knobs)  # quarters of the recomputed blocks whose inputs wait on the host
            knobs.append(("offload_input_quarters", [0, 2, 4]))
        self.knob_link = None  # the link's share is not a knob: link_share() balances the two rates
        return knobs

    def link_share(self):
        """The share of the host-homed layers' parameters the GPU updates over the link while
        the CPU updates the rest, so that both finish together: the link's rate over the sum
        of the two. Rates: measured in the last step where both ran (the CPU worker's
        times, the link stream's events), else the profile's (the CPU's AdamW, and the
        remote read rate over the 16 bytes a parameter's update reads)."""
        if self.s.link_optimizer is True:
            return 1.0
        if self.s.link_optimizer is False or not self.link_possible():
            return 0.0
        p = self.ctx.profile
        cpu = self.rate_cpu or p.cpu_adamw_params_per_s
        link = self.rate_link or (p.remote_read_bps / 16.0 if p.remote_read_bps > 0 else 0.0)
        if cpu <= 0 or link <= 0:
            return 0.0
        return link / (link + cpu)

    def resplit_worth(self, old, new, step_ns):
        """Whether splitting the host-homed layers' updates at share new instead of old saves
        more than RESPLIT_GAIN of a step of step_ns, with the rates measured: the updates
        take max(link share / link rate, CPU share / CPU rate) of the host-homed parameters."""
        if not (self.rate_cpu and self.rate_link) or step_ns <= 0:
            return True  # nothing measured to weigh it with
        n = self.host_homed_params()

        def ns(s):
            return max(s * n / self.rate_link, (1.0 - s) * n / self.rate_cpu) * 1e9

        return ns(old) - ns(new) > RESPLIT_GAIN * step_ns

    def host_homed_params(self):
        """Parameters of the layers whose state lives in host memory (the CPU's and the link's)."""
        return sum(self.layer_params(l) for l in self.layers if l.cpu_opt)

    def link_possible(self):
        """The GPU can update host-homed layers over the link: a CUDA device, AdamW the CPU
        could run too (the same update), and the choice may put layers on the host."""
        return self.device.type == "cuda" and self.s.cpu_capable and self.s.cpu_optimizer is not False

    def decode(self, values):
        ol, bl = self.opt_layers(), self.blocks()
        if self.knob_cpu is not None:
            k = values[self.knob_cpu]
        else:
            k = len(ol) if self.s.cpu_optimizer is True else 0
        if self.knob_rec is not None:
            r = values[self.knob_rec]
        else:
            r = len(bl) if self.s.recompute is True else 0
        cpu_order = ol[len(ol) - k:] if k > 0 else []
        share = self.share if (self.s.cpu_capable and self.share is not None) else 0.0
        # spread over the host-homed layers in forward order (by parameters), so that the next
        # forward finds its layers updated in turn by either worker
        link, total = set(), sum(self.layer_params(l) for l in cpu_order)
        done = given = 0
        for l in cpu_order:
            n = self.layer_params(l)
            if total > 0 and (given + n / 2) <= share * (done + n):
                link.add(l)
                given += n
            done += n
        rec_order = bl[:r]
        if self.knob_off is not None:
            quarters = values[self.knob_off]
        else:
            quarters = 4 if (self.s.offload_inputs is True and self.offload is not None) else 0
        # the first blocks: their inputs are needed last, so they have the longest to come back
        off = set(rec_order[:(len(rec_order) * quarters + 2) // 4])
        return set(cpu_order), set(rec_order), link, off

    def describe(self, values):
        cpu, rec, link, off = self.decode(values)
        n = len(self.opt_layers())
        return f"optimizer of {n} layers: {n - len(cpu)} on the GPU, {len(cpu) - len(link)} on the CPU, " \
               f"{len(link)} on the GPU over the link (state in host memory); recompute {len(rec)} of " \
               f"{len(self.blocks())} blocks, {len(off)} with their inputs in host memory"

    def choose(self):
        self.measure_rates()
        self.share = self.link_share()
        knobs = self.knobs()
        choice = self.ctx.choose(knobs, self.rehearse)
        if not choice.fits:
            big = max(self.layers, key=lambda l: sum(self.slots[id(p)].nbytes * len(self.slots[id(p)].handles)
                                                     for _, p in l.owned))
            ws = sum(self.slots[id(p)].nbytes * len(self.slots[id(p)].handles) for _, p in big.owned)
            raise RuntimeError(
                f"offload: nothing fits the budget of {fmt_bytes(self.ctx.budget)}: module "
                f"{big.name!r} alone needs {fmt_bytes(ws)} of weights, gradients and optimizer state "
                f"and PyTorch holds {fmt_bytes(self.external_bytes(set(self.blocks())))} (activations, "
                f"with every block recomputing) beside it: give a larger budget")
        self.choice = choice
        self.apply(choice.values)
        self.planned_since_choice = -1  # the next step is recorded again with the new calls
        notice(f"{self.describe(choice.values)}; predicted {choice.predicted_step_ns / 1e6:.1f} ms/step "
               f"({choice.rehearsals} rehearsals, plan budget {choice.plan_budget_bytes / 2**30:.2f} GiB, "
               f"PyTorch's memory {fmt_bytes(self.ctx_external)})")

    def place_cpu(self, cpu):
        """The layers in cpu run AdamW on the CPU (their tensors host-homed); the others on the GPU."""
        for l in self.layers:
            want = l in cpu
            if want != l.cpu_opt:
                self.half.drop(l)
                for _, p in l.owned:
                    slot = self.slots[id(p)]
                    for kind, h in slot.handles.items():
                        if kind != "weight16":  # always host-homed
                            self.place(h, want)
                    self.rebind(slot)
                if want:  # the GPU's updates reach the working copies the CPU keeps from now on
                    if self.device.type == "cuda":
                        torch.cuda.synchronize(self.device)
                    self.half.refresh([self.slots[id(p)] for _, p in l.owned])
                l.cpu_opt = want

    def apply(self, values):
        self.wait_updates()  # placements change: the last step's updates first
        cpu, rec, link, off = self.decode(values)
        self.place_cpu(cpu)
        for l in self.layers:
            l.gpu_link = l in link
            l.offload_input = l in off
        for l in self.layers:
            self.set_recompute(l, l in rec)
        self.ctx_external = self.external_bytes(rec, off)
        try:
            self.ctx.set_external_bytes(self.ctx_external)
        except L.UvmrtError as e:
            raise RuntimeError(f"offload: PyTorch's own memory ({fmt_bytes(self.ctx_external)} of "
                               f"activations and workspace, measured in the first step) leaves nothing of "
                               f"the budget ({fmt_bytes(self.ctx.budget)}): give a larger budget") from e

    def set_recompute(self, l, on):
        l.recompute = on  # the forward install_forward made reads it

    def rehearse(self, handle, values, steps):
        """uvmrt_rehearse_fn: the recorded step's calls, with these values, on the model context
        (the same layers, tensors, calls and declared work as the real steps); its status."""
        cpu, rec, link, off = self.decode(values)
        model = Context.wrap(handle)
        try:
            for l in self.layers:
                if model.layer_add(l.name) != l.index:  # the same numbers as the real context's
                    return L.ERR_STATE
            handles = {}
            for l in self.layers:
                descs, order = self.layer_descs(l)
                if not descs:
                    continue
                for (slot, kind), h in zip(order, model.tensors_alloc(descs)):
                    handles[(id(slot.param), kind)] = h
                    if l in cpu or kind == "weight16":
                        model.set_placement(h, True)
            # the inputs waiting in host memory: host-homed stand-ins that the forward writes
            # and the backward reads, so that the model prices their bytes over the link
            standin = {}
            for l in off:
                n = l.off_bytes or l.in_bytes
                if n > 0:
                    h = model.tensors_alloc([(f"{l.name} input (host)", l.index, L.ROLE_ACTIVATION, n)])[0]
                    model.set_placement(h, True)
                    standin[l] = h
            model.set_external_bytes(self.external_bytes(rec, off))
            gpu = ctypes.cast(ctypes.pointer(_SIM_GPU_STREAM), ctypes.c_void_p)
            cpus = ctypes.cast(ctypes.pointer(_SIM_CPU_STREAM), ctypes.c_void_p)
            links = ctypes.cast(ctypes.pointer(_SIM_LINK_STREAM), ctypes.c_void_p)
            fwd = self.fwd_order or self.layers
            calls = self.rec_calls or [(l, L.PHASE_FORWARD) for l in fwd] + \
                [(l, L.PHASE_BACKWARD) for l in reversed(fwd)]

            def run(call):
                model.layer_begin(call)
                model.layer_end()

            for s in range(steps):
                model.step_begin()
                seen = set()
                for l, phase in calls:  # the recorded step's calls, micro-batches and all
                    was, l.cpu_opt = l.cpu_opt, l in cpu  # gpu_uses reads it
                    try:
                        uses, only = self.gpu_uses(l, phase, handles)
                    finally:
                        l.cpu_opt = was
                    if l in standin:
                        uses = list(uses) + [(standin[l], L.USE_WRITE if phase == L.PHASE_FORWARD else L.USE_READ)]
                    if phase == L.PHASE_FORWARD:
                        after = (links if l in link else cpus) if (l in cpu and s > 0 and l not in seen) else None
                        seen.add(l)
                        run(self.make_call(l, phase, gpu, uses, after=after, no_default=only,
                                           **self.forward_work(l)))
                    else:
                        run(self.make_call(l, phase, gpu, uses, no_default=only,
                                           **self.backward_work(l, l in rec)))
                for l in self.opt_layers():
                    if l not in cpu:
                        run(self.make_call(l, L.PHASE_OPTIMIZER, gpu, **self.gpu_adam_work(l)))
                for l in self.opt_layers():
                    if l in cpu and l not in link:
                        run(self.make_call(l, L.PHASE_OPTIMIZER, cpus, after=gpu, **self.cpu_adam_work(l)))
                for l in self.opt_layers():
                    if l in link:
                        run(self.make_call(l, L.PHASE_OPTIMIZER, links, after=gpu,
                                           uses=self.link_adam_uses(l, handles), no_default=True))
                model.step_end()
        except L.UvmrtError as e:  # ERR_BUDGET: these values do not fit; others stop the choice
            return e.status
        return L.OK

    # ------------------------------------------------------------ teardown
    def close(self):
        try:
            self.cpu.stop()
        finally:  # the kernels over the link and the copies end before their memory goes
            for ev in self.link_events.values():
                ev.synchronize()
            self.link_events.clear()
            for st in (self.grad_stream, self.half.stream, self.link_stream):
                if st is not None:
                    st.synchronize()
            self.half.drop()
        if self.ctx is not None and self.in_step and self.opened_by_updates:
            # the step the last updates opened ends (they are done): no step left open
            try:
                self.ctx.step_end()
            except L.UvmrtError as e:  # the context goes anyway; its destroy says the rest
                notice(f"the last step could not end: {e}")
            self.in_step = self.opened_by_updates = False
        for h in self.hooks:
            h.remove()
        self.hooks = []
        self.restore_forwards()
        if self.ctx is not None:
            self.ctx.close()


class CpuWorker:
    """One thread that runs the CPU layers' AdamW (uvmrt_adamw_cpu releases the GIL)
    after each step's backward, layer by layer in forward order."""

    def __init__(self, engine):
        self.engine = engine
        self.cv = threading.Condition()
        self.queue = []            # [(layers, event, coef)]
        self.done = {}             # layer -> updates done
        self.submitted = {}        # layer -> updates submitted
        self.measured = {}         # layer index -> ns of its last update
        self.error = None
        self.thread = None
        self.stopping = False

    def is_done(self, layer):
        """Whether layer's submitted updates are all done (no wait)."""
        with self.cv:
            return self.done.get(layer, 0) >= self.submitted.get(layer, 0)

    def last_total(self):
        """(ns, parameters) of the last batch of updates."""
        with self.cv:
            return getattr(self, "totals", (0, 0))

    @property
    def pending(self):
        return any(self.done.get(l, 0) < n for l, n in self.submitted.items())

    def submit(self, layers, event, coef, with_grad):
        with self.cv:
            if self.error is not None:
                raise self.error
            for l in layers:
                self.submitted[l] = self.submitted.get(l, 0) + 1
            self.queue.append((layers, event, coef, with_grad))
            if self.thread is None:
                self.thread = threading.Thread(target=self.run, name="uvmrt-cpu-adamw", daemon=True)
                self.thread.start()
            self.cv.notify_all()

    def wait(self, layer=None):
        with self.cv:
            while self.error is None and (
                    self.pending if layer is None else self.done.get(layer, 0) < self.submitted.get(layer, 0)):
                self.cv.wait()
            if self.error is not None:
                err, self.error = self.error, None
                raise RuntimeError(f"uvmrt: the CPU optimizer failed: {err}") from err

    def run(self):
        while True:
            with self.cv:
                while not self.queue and not self.stopping:
                    self.cv.wait()
                if self.stopping and not self.queue:
                    return
                layers, event, coef, with_grad = self.queue[0]
            try:
                if event is not None:
                    event.synchronize()
                c = None if coef is None else float(coef)
                total_ns = total_n = 0
                for l in layers:
                    t0 = time.perf_counter_ns()
                    self.engine.opt.cpu_step(l, c, with_grad)
                    ns = time.perf_counter_ns() - t0
                    total_ns += ns
                    total_n += self.engine.layer_params(l)
                    with self.cv:
                        self.measured[l.index] = ns
                        self.totals = (total_ns, total_n)
                        self.done[l] = self.done.get(l, 0) + 1
                        self.cv.notify_all()
            except BaseException as e:  # surfaces in the training thread at its next wait
                with self.cv:
                    self.error = e
                    self.queue.clear()
                    self.cv.notify_all()
                continue
            with self.cv:
                self.queue.pop(0)
                self.cv.notify_all()

    def report_measured(self, engine):
        """The last updates' CPU times, to the runtime (from the thread that drives it)."""
        with self.cv:
            m, self.measured = self.measured, {}
        if engine.ctx.backend == "cuda":
            for idx, ns in m.items():
                engine.ctx.host_work_measured(idx, L.PHASE_OPTIMIZER, ns)

    def stop(self):
        if self.thread is not None:
            try:
                self.wait()
            finally:
                with self.cv:
                    self.stopping = True
                    self.cv.notify_all()
                self.thread.join()
                self.thread = None


_PHASES = {L.PHASE_FORWARD: "forward", L.PHASE_BACKWARD: "backward", L.PHASE_OPTIMIZER: "optimizer step"}

_ROLE = {"weight": L.ROLE_WEIGHT, "grad": L.ROLE_GRADIENT, "exp_avg": L.ROLE_OPTIMIZER_STATE,
         "exp_avg_sq": L.ROLE_OPTIMIZER_STATE, "weight16": L.ROLE_WEIGHT}


class _CudaMeasure:
    """The recorded step on a GPU: PyTorch's peak reserved memory over the step, and each
    block's backward working set (its recompute's activations and their gradients)."""

    def __init__(self, engine):
        self.engine = engine
        self.dev = engine.device
        self.peak = 0
        self.base = None
        torch.cuda.synchronize(self.dev)
        # what torch's cache holds from before (a model built on the GPU, an earlier run)
        # is not this training's: release it, so that the peak measured is the step's
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(self.dev)

    def enter(self, l):
        pass

    def leave(self, l):
        pass

    def backward_begin(self, l):
        if not l.is_block:
            return
        self.peak = max(self.peak, torch.cuda.max_memory_reserved(self.dev))
        self.base = torch.cuda.memory_allocated(self.dev)
        torch.cuda.reset_peak_memory_stats(self.dev)

    def backward_end(self, l):
        if not l.is_block or self.base is None:
            return
        l.act_bytes = max(l.act_bytes, torch.cuda.max_memory_allocated(self.dev) - self.base)
        self.base = None

    def close(self):
        e = self.engine
        e.torch_peak_bytes = max(self.peak, torch.cuda.max_memory_reserved(self.dev))
        e.measured_with_recompute = all(l.recompute for l in e.blocks())


class _Measure:
    """Bytes autograd saves for the backward in each layer's forward (the recorded step):
    each storage once, uvmrt's own tensors (the parameters) not at all."""

    def __init__(self, engine):
        self.engine = engine
        self.own = {slot.views["weight"].untyped_storage().data_ptr() for slot in engine.slots.values()}
        self.stack = []

    def enter(self, l):
        seen = set()

        def pack(t):
            try:
                ptr = t.untyped_storage().data_ptr()
                if ptr not in self.own and ptr not in seen:
                    seen.add(ptr)
                    l.act_bytes += t.untyped_storage().nbytes()
            except Exception:
                pass
            return t
        ctx = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        ctx.__enter__()
        self.stack.append((l, ctx))

    def leave(self, l):
        while self.stack:
            ll, ctx = self.stack.pop()
            ctx.__exit__(None, None, None)
            if ll is l:
                break

    def backward_begin(self, l):
        pass

    def backward_end(self, l):
        pass

    def close(self):
        while self.stack:
            _, ctx = self.stack.pop()
            ctx.__exit__(None, None, None)
        e = self.engine
        e.torch_peak_bytes = sum(l.act_bytes for l in e.layers)
        e.measured_with_recompute = False
