"""ctypes declarations of libuvmrt's public API (include/uvmrt.h), loaded once.

The library is found, in this order: the file named by UVMRT_LIBRARY; a copy
bundled in this package (uvmrt/lib/libuvmrt.so); the dynamic linker's search
(ctypes.util.find_library("uvmrt"), i.e. an installed libuvmrt).  The struct
mirrors below are checked against the loaded library's own sizes
(uvmrt_abi_struct_size), so a library of another ABI is refused with a clear
error instead of corrupting memory.
"""

import ctypes
import ctypes.util
import os

from . import __version__

c_u64 = ctypes.c_uint64
c_size = ctypes.c_size_t
c_int = ctypes.c_int
c_double = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p

# uvmrt_status_t, uvmrt_role_t, uvmrt_phase_t, ... (include/uvmrt.h)
OK = 0
ERR_INVALID, ERR_CONFIG, ERR_NOMEM, ERR_BUDGET, ERR_STATE = -1, -2, -3, -4, -5
ERR_NOT_FOUND, ERR_NO_DEVICE, ERR_UNSUPPORTED, ERR_BACKEND, ERR_IO = -6, -7, -8, -9, -10
BACKEND_CUDA, BACKEND_SIM, BACKEND_AUTO = 0, 1, 2
POLICY_NONE, POLICY_DEMAND, POLICY_PREFETCH = 0, 1, 2
ROLE_WEIGHT, ROLE_GRADIENT, ROLE_ACTIVATION, ROLE_OPTIMIZER_STATE, ROLE_WORKSPACE = range(5)
PHASE_FORWARD, PHASE_BACKWARD, PHASE_OPTIMIZER = range(3)
LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG = range(4)
USE_READ, USE_WRITE, USE_READWRITE, USE_STREAM = 1, 2, 3, 4
PLACE_AUTO, PLACE_HOST, PLACE_PINNED = 0, 1, 2  # uvmrt_placement_t
KNOBS_MAX = 8

# The counters of UVMRT_COUNTERS, in order, and which are step (s) / summary fields.
COUNTERS = [
    # name, step, summary, source
    ("calls", 0, 0, "CALL"), ("prefetch_bytes", 1, 1, "OWN"), ("evict_bytes", 1, 1, "OWN"),
    ("discard_bytes", 1, 1, "OWN"), ("fault_count", 1, 1, "OWN"), ("fault_bytes", 1, 1, "OWN"),
    ("remote_read_bytes", 1, 1, "OWN"), ("remote_write_bytes", 1, 1, "OWN"), ("wait_ns", 1, 0, "OWN"),
    ("duration_ns", 0, 0, "OWN"), ("gpu_faults", 1, 1, "DRIVER"), ("fault_htod_bytes", 1, 1, "DRIVER"),
    ("prefetch_htod_bytes", 1, 1, "DRIVER"), ("driver_prefetch_htod_bytes", 1, 1, "DRIVER"),
    ("evict_dtoh_bytes", 1, 1, "DRIVER"), ("thrashing", 1, 1, "DRIVER"), ("throttling", 1, 1, "DRIVER"),
    ("remote_map", 1, 1, "DRIVER"), ("cpu_faults", 1, 1, "DRIVER"), ("sampled_calls", 0, 0, "CALL"),
    ("spill_read_bytes", 1, 1, "LATE"), ("spill_write_bytes", 1, 1, "LATE"),
]


def _fields(which, source):
    return [(n, c_u64) for n, step, summ, src in COUNTERS
            if src == source and (step if which == "step" else summ)]


class _Sized(ctypes.Structure):
    """A struct that grows (uvmrt.h, "structs that grow"): its first field, struct_size,
    is set to the mirror's own size on creation, as UVMRT_STRUCT_INIT does in C."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.struct_size = ctypes.sizeof(self)


SIZE = [("struct_size", c_size)]


# host memory, at the end of uvmrt_summary_t (uvmrt_memory_stats_t has the same, in the same order)
HOST_FIELDS = ("host_bytes", "peak_host_bytes", "host_budget_bytes", "host_external_bytes", "plan_host_bytes")


class Params(ctypes.Structure):
    _fields_ = [("struct_size", c_size), ("device", c_int), ("backend", c_int), ("profile", c_char_p),
                ("policy", c_int), ("budget_bytes", c_u64), ("budget_reserve_bytes", c_u64),
                ("discard_dead", c_int), ("remote", c_int), ("log_level", c_int), ("log_fn", c_void_p),
                ("log_user", c_void_p), ("report", c_char_p), ("ignore_env", c_int), ("fault_stats", c_int),
                ("fault_sample_every", c_int), ("trace", c_char_p), ("host_budget_bytes", c_u64),
                ("spill_dir", c_char_p)]


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("layer", c_int), ("role", c_int), ("size_bytes", c_size)]


class Use(ctypes.Structure):
    _fields_ = [("tensor", c_void_p), ("access", ctypes.c_uint)]


class LayerCall(_Sized):
    _fields_ = SIZE + [("layer", c_int), ("phase", c_int), ("stream", c_void_p), ("uses", ctypes.POINTER(Use)),
                ("n_uses", c_size), ("no_default_uses", c_int), ("flops", c_double),
                ("sim_duration_ns", c_u64), ("host_bytes", c_u64), ("after", c_void_p),
                ("host_ns", c_u64), ("hbm_bytes", c_u64)]


class LayerStats(_Sized):
    _fields_ = SIZE + [(n, c_u64) for n, *_ in COUNTERS]


class StepStats(_Sized):
    _fields_ = (SIZE + [("step_ns", c_u64)] + _fields("step", "OWN") +
                [("peak_resident_bytes", c_u64), ("h2d_busy_ns", c_u64), ("d2h_busy_ns", c_u64)] +
                _fields("step", "DRIVER") + [("fault_sampled", c_int)] + _fields("step", "LATE"))


class Summary(_Sized):
    _fields_ = (SIZE + [("steps", c_u64), ("budget_bytes", c_u64), ("resident_bytes", c_u64),
                 ("peak_resident_bytes", c_u64), ("allocated_bytes", c_u64)] + _fields("summary", "OWN") +
                [("host_homed_bytes", c_u64), ("plans_built", c_u64)] + _fields("summary", "DRIVER") +
                [("unattributed_records", c_u64), ("unattributed_gpu_faults", c_u64),
                 ("unattributed_htod_bytes", c_u64), ("unattributed_dtoh_bytes", c_u64),
                 ("unattributed_cpu_faults", c_u64), ("fault_stats_source", c_char_p),
                 ("fault_sampled_steps", c_u64), ("fault_sample_every", c_int),
                 ("fault_sample_period", ctypes.c_uint), ("fault_sample_overhead", c_double),
                 ("fault_records_lost", c_u64), ("backend_errors", c_u64), ("output_errors", c_u64)] +
                [(n, c_u64) for n in HOST_FIELDS] + _fields("summary", "LATE"))


class MemoryStats(_Sized):
    _fields_ = SIZE + [("budget_bytes", c_u64), ("resident_bytes", c_u64), ("peak_resident_bytes", c_u64),
                ("allocated_bytes", c_u64), ("host_homed_bytes", c_u64), ("tensors", c_u64),
                ("role_tensors", c_u64 * 5), ("role_size_bytes", c_u64 * 5),
                ("role_footprint_bytes", c_u64 * 5), ("role_resident_bytes", c_u64 * 5)] + [
                (n, c_u64) for n in HOST_FIELDS]


class TensorInfo(_Sized):
    # in an array (uvmrt_memory_summary) set arr[0].struct_size: ctypes arrays do not
    # call __init__ on their elements
    _fields_ = SIZE + [("name", ctypes.c_char * 128), ("id", c_int), ("layer", c_int), ("role", c_int),
                ("size_bytes", c_size), ("footprint_bytes", c_size), ("where", c_int),
                ("mechanism", ctypes.c_uint)]


class Knob(ctypes.Structure):
    _fields_ = [("name", c_char_p), ("n_values", c_size), ("values", ctypes.POINTER(c_int))]


class Choice(_Sized):
    _fields_ = SIZE + [("values", c_int * KNOBS_MAX), ("predicted_step_ns", c_double), ("plan_budget_bytes", c_u64),
                ("fits", c_int), ("rehearsals", c_size), ("measured_step_ns", c_double),
                ("first_predicted_step_ns", c_double), ("replanned", c_int),
                ("replanned_measured_step_ns", c_double), ("reverted", c_int),
                ("recomputable_tensors", c_int), ("recompute_tensors", c_int)]


class Profile(_Sized):
    _fields_ = SIZE + [("name", c_char_p), ("description", c_char_p), ("measured", c_int), ("memory_bytes", c_u64),
                ("prefetch_h2d_bps", c_double), ("evict_d2h_bps", c_double), ("pinned_h2d_bps", c_double),
                ("pinned_d2h_bps", c_double), ("fault_bps", c_double), ("fault_group_bytes", c_u64),
                ("prefetch_call_ns", c_u64), ("remote_read_bps", c_double), ("remote_write_bps", c_double),
                ("flops", c_double), ("hbm_bps", c_double), ("fault_trace_ns", c_u64),
                ("pinned_bidir_bps", c_double), ("host_mem_bps", c_double), ("host_mem_shared_bps", c_double),
                ("cpu_adamw_params_per_s", c_double), ("gpu_bf16_flops", c_double),
                ("host_mem_cpu_beside_h2d_bps", c_double), ("host_mem_cpu_beside_d2h_bps", c_double),
                ("disk_read_bps", c_double), ("disk_write_bps", c_double), ("disk_io_uring", c_int)]


class AdamW(_Sized):
    _fields_ = SIZE + [("lr", c_double), ("beta1", c_double), ("beta2", c_double),
                ("eps", c_double), ("weight_decay", c_double), ("step", c_u64), ("grad_scale", c_double),
                ("threads", c_int), ("order", c_int)]


# AdamW.order: uvmrt_adamw_order_t
ADAMW_ORDER_UVMRT = 0  # no FMA: the example trainers' GPU kernels' bits
ADAMW_ORDER_TORCH = 1  # torch.optim.AdamW(foreach=False) on CUDA's bits


REHEARSE_FN = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(c_int), c_int, c_void_p)

_MIRRORS = {"uvmrt_params_t": Params, "uvmrt_tensor_desc_t": TensorDesc, "uvmrt_use_t": Use,
            "uvmrt_layer_call_t": LayerCall, "uvmrt_layer_stats_t": LayerStats,
            "uvmrt_step_stats_t": StepStats, "uvmrt_summary_t": Summary,
            "uvmrt_memory_stats_t": MemoryStats, "uvmrt_tensor_info_t": TensorInfo, "uvmrt_knob_t": Knob,
            "uvmrt_choice_t": Choice, "uvmrt_profile_t": Profile, "uvmrt_adamw_t": AdamW}

# name: (restype, argtypes)
_SIGNATURES = {
    "uvmrt_version_string": (c_char_p, []),
    "uvmrt_version_number": (c_int, []),
    "uvmrt_abi_struct_size": (c_size, [c_char_p]),
    "uvmrt_status_str": (c_char_p, [c_int]),
    "uvmrt_status_name": (c_char_p, [c_int]),
    "uvmrt_size_parse": (c_int, [c_char_p, ctypes.POINTER(c_u64)]),
    "uvmrt_backend_parse": (c_int, [c_char_p, ctypes.POINTER(c_int)]),
    "uvmrt_policy_parse": (c_int, [c_char_p, ctypes.POINTER(c_int)]),
    "uvmrt_params_init": (None, [ctypes.POINTER(Params)]),
    "uvmrt_params_init_size": (None, [ctypes.POINTER(Params), c_size]),
    "uvmrt_context_create": (c_int, [ctypes.POINTER(Params), ctypes.POINTER(c_void_p)]),
    "uvmrt_context_destroy": (None, [c_void_p]),
    "uvmrt_context_backend": (c_int, [c_void_p]),
    "uvmrt_context_policy": (c_int, [c_void_p]),
    "uvmrt_context_budget": (c_u64, [c_void_p]),
    "uvmrt_context_profile": (ctypes.POINTER(Profile), [c_void_p]),
    "uvmrt_context_set_total_steps": (c_int, [c_void_p, c_u64]),
    "uvmrt_context_set_external_bytes": (c_int, [c_void_p, c_u64]),
    "uvmrt_context_external_bytes": (c_u64, [c_void_p]),
    "uvmrt_context_set_host_external_bytes": (c_int, [c_void_p, c_u64]),
    "uvmrt_context_host_external_bytes": (c_u64, [c_void_p]),
    "uvmrt_context_host_budget": (c_u64, [c_void_p]),
    "uvmrt_layer_add": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_int)]),
    "uvmrt_layer_count": (c_int, [c_void_p]),
    "uvmrt_host_work_measured": (c_int, [c_void_p, c_int, c_int, c_u64]),
    "uvmrt_tensors_alloc": (c_int, [c_void_p, c_size, ctypes.POINTER(TensorDesc), ctypes.POINTER(c_void_p)]),
    "uvmrt_tensor_free": (c_int, [c_void_p, c_void_p]),
    "uvmrt_tensor_ptr": (c_void_p, [c_void_p]),
    "uvmrt_tensor_size": (c_size, [c_void_p]),
    "uvmrt_tensor_set_placement": (c_int, [c_void_p, c_void_p, c_int]),
    "uvmrt_tensor_placement": (c_int, [c_void_p]),
    "uvmrt_tensor_is_resident": (c_int, [c_void_p]),
    "uvmrt_tensor_is_host_homed": (c_int, [c_void_p]),
    "uvmrt_step_begin": (c_int, [c_void_p]),
    "uvmrt_step_end": (c_int, [c_void_p]),
    "uvmrt_layer_begin": (c_int, [c_void_p, ctypes.POINTER(LayerCall)]),
    "uvmrt_layer_end": (c_int, [c_void_p]),
    "uvmrt_layer_stats_get": (c_int, [c_void_p, c_int, c_int, ctypes.POINTER(LayerStats)]),
    "uvmrt_step_stats_get": (c_int, [c_void_p, c_u64, ctypes.POINTER(StepStats)]),
    "uvmrt_summary_get": (c_int, [c_void_p, ctypes.POINTER(Summary)]),
    "uvmrt_report_write": (c_int, [c_void_p, c_char_p, c_char_p]),
    "uvmrt_memory_stats_get": (c_int, [c_void_p, ctypes.POINTER(MemoryStats)]),
    "uvmrt_memory_peak_reset": (c_int, [c_void_p]),
    "uvmrt_memory_summary": (c_int, [c_void_p, ctypes.POINTER(TensorInfo), c_size, ctypes.POINTER(c_size)]),
    "uvmrt_choose": (c_int, [c_void_p, ctypes.POINTER(Knob), c_size, REHEARSE_FN, c_void_p,
                             ctypes.POINTER(Choice)]),
    "uvmrt_choice_review": (c_int, [c_void_p, ctypes.POINTER(Choice), ctypes.POINTER(c_int)]),
    "uvmrt_choice_get": (c_int, [c_void_p, ctypes.POINTER(Choice)]),
    "uvmrt_adamw_init": (None, [ctypes.POINTER(AdamW)]),
    "uvmrt_adamw_cpu": (c_int, [ctypes.POINTER(AdamW), c_void_p, c_void_p, c_void_p, c_void_p, c_size,
                                c_void_p]),
    "uvmrt_adamw_gpu": (c_int, [ctypes.POINTER(AdamW), c_void_p, c_void_p, c_void_p, c_void_p, c_size,
                                c_void_p, c_void_p, c_void_p]),
    "uvmrt_adamw_isa": (c_char_p, []),
}


class LibraryError(ImportError):
    """libuvmrt could not be found or is not the version this package expects."""


class UvmrtError(RuntimeError):
    """A libuvmrt call failed; .status is the uvmrt_status_t, .name its enum name."""

    def __init__(self, what, status, detail=""):
        self.status = status
        self.name = lib().uvmrt_status_name(status).decode()
        text = lib().uvmrt_status_str(status).decode()
        super().__init__(f"{what} failed: {text} ({self.name}){': ' + detail if detail else ''}")


def _candidates():
    env = os.environ.get("UVMRT_LIBRARY")
    if env:
        return [("UVMRT_LIBRARY", env)]
    out = []
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libuvmrt.so")
    if os.path.exists(here):
        out.append(("the package's bundled copy", here))
    found = ctypes.util.find_library("uvmrt")
    if found:
        out.append(("the system's libuvmrt", found))
    for d in ("/usr/local/lib", "/usr/lib"):
        p = os.path.join(d, "libuvmrt.so.1")
        if os.path.exists(p):
            out.append((d, p))
    return out


_LIB = None
_PATH = None


def library_path():
    lib()
    return _PATH


def lib():
    """The loaded library (ctypes.CDLL) with every signature declared."""
    global _LIB, _PATH
    if _LIB is not None:
        return _LIB
    cands = _candidates()
    if not cands:
        raise LibraryError("uvmrt: libuvmrt.so not found: install uvmrt (./configure && make install, "
                           "then ldconfig), or set UVMRT_LIBRARY to the library's path")
    errors = []
    for where, path in cands:
        try:
            handle = ctypes.CDLL(path)
        except OSError as e:
            errors.append(f"{where} ({path}): {e}")
            continue
        _check_and_declare(handle, path)
        _LIB, _PATH = handle, path
        return handle
    raise LibraryError("uvmrt: libuvmrt.so could not be loaded: " + "; ".join(errors))


def _check_and_declare(handle, path):
    missing = [n for n in _SIGNATURES if not hasattr(handle, n)]
    if missing:
        raise LibraryError(f"uvmrt: {path} lacks {', '.join(missing[:4])}"
                           f"{' ...' if len(missing) > 4 else ''}: it is older than this package "
                           f"({__version__}); install the libuvmrt of the same version")
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype = res
        fn.argtypes = args
    libver = handle.uvmrt_version_string().decode()
    if libver != __version__:
        raise LibraryError(f"uvmrt: {path} is libuvmrt {libver}, this package is {__version__}: "
                           f"install matching versions")
    for cname, mirror in _MIRRORS.items():
        size = handle.uvmrt_abi_struct_size(cname.encode())
        if size != ctypes.sizeof(mirror):
            raise LibraryError(f"uvmrt: {path}: {cname} is {size} bytes in the library, "
                               f"{ctypes.sizeof(mirror)} in this package: mismatched versions")
    size = ctypes.sizeof(AdamW)
    hp = AdamW()
    handle.uvmrt_adamw_init(ctypes.byref(hp))
    if hp.struct_size != size:
        raise LibraryError(f"uvmrt: {path}: uvmrt_adamw_t is {hp.struct_size} bytes in the library, "
                           f"{size} in this package: mismatched versions")


def check(what, status, detail=""):
    if status != OK:
        raise UvmrtError(what, status, detail)


def parse_size(value, what="budget"):
    """Bytes from an int or a size text ("8G", "512MiB"); ValueError names the value."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: {value!r} is not a size: expected bytes or a text like '8G'")
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{what}: {value} bytes: expected a positive size")
        return value
    if isinstance(value, str):
        out = c_u64()
        if lib().uvmrt_size_parse(value.encode(), ctypes.byref(out)) != OK or out.value == 0:
            raise ValueError(f"{what}: {value!r} is not a size: expected an integer with an optional "
                             f"K, M, G or T suffix, e.g. '8G' or '512MiB'")
        return out.value
    raise ValueError(f"{what}: {value!r} is not a size: expected bytes (int) or a text like '8G'")
