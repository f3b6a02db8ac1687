"""A Python handle on one uvmrt context: creation, layers, tensors, steps and layer
calls, statistics and choices.  Thin: every method is one or two library calls,
and a failed call raises UvmrtError with the library's status (the library has
already logged what was wrong) and leaves the context as it was."""

import ctypes

from . import _lib as L


class Context:
    def __init__(self, backend="auto", budget=None, profile=None, policy=None, log_level=None,
                 report=None, trace=None, device=0):
        lib = L.lib()
        p = L.Params()
        lib.uvmrt_params_init_size(ctypes.byref(p), ctypes.sizeof(p))
        p.device = int(device)
        if backend is not None:
            b = ctypes.c_int()
            if lib.uvmrt_backend_parse(str(backend).encode(), ctypes.byref(b)) != L.OK:
                raise ValueError(f"backend {backend!r}: expected auto, cuda or sim")
            p.backend = b.value
        if budget is not None and budget != "auto":
            p.budget_bytes = L.parse_size(budget, "budget")
        if policy is not None:
            v = ctypes.c_int()
            if lib.uvmrt_policy_parse(str(policy).encode(), ctypes.byref(v)) != L.OK:
                raise ValueError(f"policy {policy!r}: expected none, demand or prefetch")
            p.policy = v.value
        if log_level is not None:
            names = {"error": L.LOG_ERROR, "warn": L.LOG_WARN, "info": L.LOG_INFO, "debug": L.LOG_DEBUG}
            if log_level not in names:
                raise ValueError(f"log_level {log_level!r}: expected one of {', '.join(names)}")
            p.log_level = names[log_level]
        # kept alive as long as the params are read (the library copies the strings)
        self._keep = [s.encode() if s is not None else None for s in (profile, report, trace)]
        p.profile, p.report, p.trace = self._keep
        h = ctypes.c_void_p()
        L.check("uvmrt_context_create", lib.uvmrt_context_create(ctypes.byref(p), ctypes.byref(h)))
        self.handle = h
        self._lib = lib

    @classmethod
    def wrap(cls, handle):
        """A non-owning handle on a context the library made (a rehearsal's model)."""
        self = cls.__new__(cls)
        self.handle, self._lib, self._borrowed = handle, L.lib(), True
        return self

    # ---------------------------------------------------------------- lifetime
    def close(self):
        if getattr(self, "_borrowed", False):
            return
        if self.handle:
            self._lib.uvmrt_context_destroy(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---------------------------------------------------------------- settings
    @property
    def backend(self):
        return "cuda" if self._lib.uvmrt_context_backend(self.handle) == L.BACKEND_CUDA else "sim"

    @property
    def budget(self):
        return self._lib.uvmrt_context_budget(self.handle)

    @property
    def profile(self):
        return self._lib.uvmrt_context_profile(self.handle).contents

    def set_external_bytes(self, n):
        L.check("uvmrt_context_set_external_bytes",
                self._lib.uvmrt_context_set_external_bytes(self.handle, int(n)))

    def set_total_steps(self, n):
        L.check("uvmrt_context_set_total_steps", self._lib.uvmrt_context_set_total_steps(self.handle, int(n)))

    # ---------------------------------------------------------------- layers and tensors
    def layer_add(self, name):
        out = ctypes.c_int()
        L.check("uvmrt_layer_add", self._lib.uvmrt_layer_add(self.handle, name.encode(), ctypes.byref(out)),
                name)
        return out.value

    def tensors_alloc(self, descs):
        """descs: [(name, layer, role, size_bytes)] -> [tensor handle (int)]."""
        n = len(descs)
        arr = (L.TensorDesc * n)()
        names = [d[0].encode() for d in descs]
        for i, (name, layer, role, size) in enumerate(descs):
            arr[i].name, arr[i].layer, arr[i].role, arr[i].size_bytes = names[i], layer, role, size
        out = (ctypes.c_void_p * n)()
        L.check("uvmrt_tensors_alloc", self._lib.uvmrt_tensors_alloc(self.handle, n, arr, out),
                f"{n} tensors, {sum(d[3] for d in descs)} bytes")
        return [out[i] for i in range(n)]

    def tensor_free(self, t):
        L.check("uvmrt_tensor_free", self._lib.uvmrt_tensor_free(self.handle, t))

    def tensor_ptr(self, t):
        return self._lib.uvmrt_tensor_ptr(t)

    def tensor_pinned(self, t):
        """Whether t lives in page-locked memory of its own (UVMRT_PLACE_PINNED)."""
        return self._lib.uvmrt_tensor_placement(t) == L.PLACE_PINNED

    def set_placement(self, t, host, pinned=False):
        """host: kept in host memory (pinned: page-locked memory of its own, at a new
        address: uvmrt_tensor_ptr again after it); else the policy's."""
        place = (L.PLACE_PINNED if pinned else L.PLACE_HOST) if host else L.PLACE_AUTO
        L.check("uvmrt_tensor_set_placement", self._lib.uvmrt_tensor_set_placement(self.handle, t, place))

    # ---------------------------------------------------------------- steps
    def step_begin(self):
        L.check("uvmrt_step_begin", self._lib.uvmrt_step_begin(self.handle))

    def step_end(self):
        L.check("uvmrt_step_end", self._lib.uvmrt_step_end(self.handle))

    def layer_begin(self, call):
        L.check("uvmrt_layer_begin", self._lib.uvmrt_layer_begin(self.handle, ctypes.byref(call)))

    def layer_end(self):
        L.check("uvmrt_layer_end", self._lib.uvmrt_layer_end(self.handle))

    def host_work_measured(self, layer, phase, ns):
        L.check("uvmrt_host_work_measured", self._lib.uvmrt_host_work_measured(self.handle, layer, phase,
                                                                                max(1, int(ns))))

    # ---------------------------------------------------------------- observation
    def summary(self):
        s = L.Summary()
        L.check("uvmrt_summary_get", self._lib.uvmrt_summary_get(self.handle, ctypes.byref(s)))
        return s

    def step_stats(self, step):
        s = L.StepStats()
        L.check("uvmrt_step_stats_get", self._lib.uvmrt_step_stats_get(self.handle, step, ctypes.byref(s)))
        return s

    def layer_stats(self, layer, phase):
        s = L.LayerStats()
        L.check("uvmrt_layer_stats_get",
                self._lib.uvmrt_layer_stats_get(self.handle, layer, phase, ctypes.byref(s)))
        return s

    def memory_stats(self):
        s = L.MemoryStats()
        L.check("uvmrt_memory_stats_get", self._lib.uvmrt_memory_stats_get(self.handle, ctypes.byref(s)))
        return s

    def memory_peak_reset(self):
        L.check("uvmrt_memory_peak_reset", self._lib.uvmrt_memory_peak_reset(self.handle))

    def memory_summary(self):
        n = ctypes.c_size_t()
        L.check("uvmrt_memory_summary", self._lib.uvmrt_memory_summary(self.handle, None, 0, ctypes.byref(n)))
        arr = (L.TensorInfo * max(1, n.value))()
        arr[0].struct_size = ctypes.sizeof(L.TensorInfo)  # the array's stride (arrays skip __init__)
        L.check("uvmrt_memory_summary", self._lib.uvmrt_memory_summary(self.handle, arr, n.value,
                                                                        ctypes.byref(n)))
        return [arr[i] for i in range(n.value)]

    def report_write(self, fmt, path):
        L.check("uvmrt_report_write", self._lib.uvmrt_report_write(self.handle, fmt.encode(),
                                                                    path.encode() if path else None), path)

    # ---------------------------------------------------------------- choices
    def choose(self, knobs, rehearse):
        """knobs: [(name, [values])]; rehearse(model_handle, values, steps) -> status."""
        arr = (L.Knob * max(1, len(knobs)))()
        keep = []
        for i, (name, values) in enumerate(knobs):
            v = (ctypes.c_int * len(values))(*values)
            nm = name.encode()
            keep += [v, nm]
            arr[i].name, arr[i].n_values, arr[i].values = nm, len(values), v

        def trampoline(model, values, steps, user):
            try:
                return rehearse(ctypes.c_void_p(model), [values[i] for i in range(len(knobs))], steps)
            except Exception as e:  # an exception must not cross the C frames
                self.rehearse_error = e
                return L.ERR_INVALID
        self._rehearse_cb = L.REHEARSE_FN(trampoline)  # kept: reviews call it again later
        self._knob_keep = (arr, keep)
        self.rehearse_error = None
        out = L.Choice()
        st = self._lib.uvmrt_choose(self.handle, arr, len(knobs), self._rehearse_cb, None, ctypes.byref(out))
        if self.rehearse_error is not None:
            raise self.rehearse_error
        L.check("uvmrt_choose", st)
        return out

    def choice_review(self):
        out = L.Choice()
        changed = ctypes.c_int()
        self.rehearse_error = None
        st = self._lib.uvmrt_choice_review(self.handle, ctypes.byref(out), ctypes.byref(changed))
        if self.rehearse_error is not None:
            raise self.rehearse_error
        L.check("uvmrt_choice_review", st)
        return out, bool(changed.value)
