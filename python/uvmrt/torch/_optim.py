"""The optimizer offload() returns: a torch.optim.Optimizer whose step() is uvmrt's
optimizer phase, one layer call per layer, each layer updated where the choice put it
(the user's optimizer class on the GPU, or uvmrt_adamw_cpu on the CPU).

Its param_groups are the user's (an LR scheduler changes them as usual); each step copies
their hyperparameters into the per-layer optimizers.  Its state is torch's usual
per-parameter dict ({"step", "exp_avg", "exp_avg_sq"} for Adam and AdamW), whose
moments are views of uvmrt memory, so state_dict() and load_state_dict() work as with
any optimizer.
"""

import ctypes
import os

import torch

from .. import _lib as L


def adam_like(cls):
    return issubclass(cls, (torch.optim.Adam, torch.optim.AdamW))


def cpu_capable(cls, defaults, groups):
    """Whether uvmrt_adamw_cpu computes what cls does with these hyperparameters."""
    if not adam_like(cls):
        return False, f"{cls.__name__} is not Adam or AdamW"
    for g in groups:
        h = dict(defaults, **{k: v for k, v in g.items() if k != "params"})
        for flag in ("amsgrad", "maximize", "capturable", "differentiable"):
            if h.get(flag):
                return False, f"{flag}=True"
        if issubclass(cls, torch.optim.Adam) and not issubclass(cls, torch.optim.AdamW) and \
                h.get("weight_decay", 0) and not h.get("decoupled_weight_decay", False):
            return False, "Adam's weight_decay is an L2 term added to the gradient"
        if torch.is_tensor(h.get("lr")):
            return False, "a tensor learning rate"
    return True, ""


class OffloadedOptimizer(torch.optim.Optimizer):
    def __init__(self, engine, cls, groups, defaults, max_grad_norm, kwargs):
        self._engine = engine
        self._cls = cls
        self._max_grad_norm = max_grad_norm
        super().__init__(groups, defaults)
        self._adam = adam_like(cls)
        # the CPU AdamW's threads: the CPUs this process may use, less two for the thread
        # that launches the GPU's work (and the worker's own), which must not wait for a core
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        self._cpu_threads = max(1, n - 2)
        env = os.environ.get("UVMRT_TORCH_CPU_THREADS", "")
        if env:  # a benchmark's sweep of the team's size against the step
            try:
                want = int(env)
            except ValueError:
                want = 0
            if want < 1:
                raise ValueError(f"UVMRT_TORCH_CPU_THREADS={env!r}: expected a number of threads >= 1")
            self._cpu_threads = want
        # one optimizer of the user's class per (layer) over that layer's parameters,
        # its groups derived from the user's; state dicts shared with self.state
        self._inner = {}
        self._inner_groups = {}  # layer -> [(user group index, inner group)]
        gid = {}
        for gi, g in enumerate(self.param_groups):
            for p in g["params"]:
                gid[id(p)] = gi
        for l in engine.layers:
            groups_l = {}
            for _, p in l.owned:
                if not p.requires_grad or id(p) not in gid:
                    continue
                groups_l.setdefault(gid[id(p)], []).append(p)
            if not groups_l:
                continue
            inner_groups = []
            for gi, ps in groups_l.items():
                h = {k: v for k, v in self.param_groups[gi].items() if k != "params"}
                inner_groups.append(dict(h, params=ps))
            opt = cls(inner_groups, **kwargs)
            self._inner[l] = opt
            self._inner_groups[l] = list(zip(groups_l.keys(), opt.param_groups))
            if self._adam:
                for _, p in l.owned:
                    if p.requires_grad and id(p) in gid:
                        self._init_state(opt, p)

    def _init_state(self, opt, p):
        slot = self._engine.slots[id(p)]
        g = next(g for g in opt.param_groups if any(q is p for q in g["params"]))
        if g.get("amsgrad"):
            return  # torch makes max_exp_avg_sq; its state stays torch's
        scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
        if g.get("fused") or g.get("capturable"):
            step = torch.zeros((), dtype=scalar, device=p.device)
        else:
            step = torch.tensor(0.0, dtype=scalar)
        st = {"step": step, "exp_avg": slot.views["exp_avg"], "exp_avg_sq": slot.views["exp_avg_sq"]}
        opt.state[p] = st
        self.state[p] = st

    # ------------------------------------------------------------ the user's calls
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._engine.optimizer_phase(self)
        return loss

    def state_dict(self):
        self._engine.wait_updates()  # the last step's updates beside the forward first
        return super().state_dict()

    def zero_grad(self, set_to_none=True):
        # The gradients' uvmrt tensors stay; the next backward overwrites them (its
        # gradient is copied in), which is what zeroing and adding would give.
        for g in self.param_groups:
            for p in g["params"]:
                p.grad = None

    def load_state_dict(self, state_dict):
        self._engine.wait_updates()
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved) or any(len(a["params"]) != len(b["params"]) for a, b in zip(groups, saved)):
            raise ValueError("load_state_dict: the saved optimizer's parameter groups differ from this one's "
                             f"({[len(g['params']) for g in saved]} parameters per group, expected "
                             f"{[len(g['params']) for g in groups]})")
        ids = {}
        for g, sg in zip(groups, saved):
            for p, i in zip(g["params"], sg["params"]):
                ids[i] = p
        for pid, st in state_dict["state"].items():
            p = ids.get(pid)
            if p is None:
                raise ValueError(f"load_state_dict: state for parameter {pid}, which no group names")
            ours = self.state[p]
            slot = self._engine.slots.get(id(p))
            for k, v in st.items():
                if k in ("exp_avg", "exp_avg_sq") and slot is not None and k in slot.hviews:
                    if tuple(v.shape) != slot.shape:
                        raise ValueError(f"load_state_dict: {slot.fqn}'s {k} has shape {tuple(v.shape)}, "
                                         f"expected {slot.shape}")
                    slot.hviews[k].copy_(v.detach().to("cpu", slot.dtype))
                elif k == "step" and torch.is_tensor(ours.get("step")):
                    ours["step"].copy_(torch.as_tensor(v, dtype=ours["step"].dtype))
                else:
                    ours[k] = v.to(p.device) if torch.is_tensor(v) else v
        for g, sg in zip(groups, saved):
            for k, v in sg.items():
                if k != "params":
                    g[k] = v

    # ------------------------------------------------------------ the engine's calls
    def sync_hparams(self, l):
        if l not in self._inner_groups:
            return
        for gi, ig in self._inner_groups[l]:
            for k, v in self.param_groups[gi].items():
                if k != "params":
                    ig[k] = v

    def clip_coefficient(self):
        """max_grad_norm / (total norm + 1e-6), at most 1 (a 0-d tensor), as
        torch.nn.utils.clip_grad_norm_ computes it; None without clipping."""
        if self._max_grad_norm is None:
            return None
        norms = []
        for g in self.param_groups:
            for p in g["params"]:
                slot = self._engine.slots.get(id(p))
                if slot is not None and slot.norm is not None and p.grad is not None:
                    norms.append(slot.norm)
        if not norms:
            return None
        total = torch.linalg.vector_norm(torch.stack(norms), 2.0)
        self.last_grad_norm = total
        return torch.clamp(self._max_grad_norm / (total + 1e-6), max=1.0)

    def gpu_step(self, l, coef):
        opt = self._inner.get(l)
        if opt is None:
            return
        self.sync_hparams(l)
        if coef is not None:
            grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
            if grads:
                torch._foreach_mul_(grads, coef.to(grads[0].device))
        opt.step()

    def _hparams(self, g, coef):
        hp = L.AdamW()
        L.lib().uvmrt_adamw_init(ctypes.byref(hp))
        hp.lr = float(g["lr"])
        hp.beta1, hp.beta2 = (float(b) for b in g["betas"])
        hp.eps = float(g["eps"])
        hp.weight_decay = float(g.get("weight_decay", 0.0))
        hp.grad_scale = 1.0 if coef is None else coef
        hp.threads = self._cpu_threads
        hp.order = L.ADAMW_ORDER_TORCH  # the bits of the user's AdamW on CUDA
        return hp

    def _update_each(self, l, coef, with_grad, name, update):
        """update(hp, w, m, v, g, n, half) -> status for each of layer l's parameters that had
        a gradient, with its group's hyperparameters and its next step number."""
        opt = self._inner.get(l)
        if opt is None:
            return
        for g in opt.param_groups:
            hp = self._hparams(g, coef)
            for p in g["params"]:
                if id(p) not in with_grad:
                    continue
                slot = self._engine.slots[id(p)]
                st = self.state[p]
                step = int(st["step"].item()) + 1
                hp.step = step
                h = slot.hviews
                half = h["weight16"].data_ptr() if "weight16" in h else None  # the forwards' bf16 copy
                L.check(name, update(ctypes.byref(hp), h["weight"].data_ptr(), h["exp_avg"].data_ptr(),
                                     h["exp_avg_sq"].data_ptr(), h["grad"].data_ptr(), p.numel(), half),
                        slot.fqn)
                st["step"].fill_(step)

    def link_step(self, l, coef, with_grad, stream):
        """The GPU's update of layer l's host-homed parameters over the link: uvmrt_adamw_gpu
        on stream, the clip coefficient read from coef (a CUDA tensor) by the kernel."""
        lib = L.lib()
        scale = None if coef is None else ctypes.c_void_p(coef.data_ptr())
        self._update_each(l, None, with_grad, "uvmrt_adamw_gpu",
                          lambda *a: lib.uvmrt_adamw_gpu(*a, scale, stream))

    def cpu_step(self, l, coef, with_grad):
        """Runs on the CPU worker thread: AdamW of layer l's parameters that had a gradient."""
        self._update_each(l, coef, with_grad, "uvmrt_adamw_cpu", L.lib().uvmrt_adamw_cpu)
