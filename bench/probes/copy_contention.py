#!/usr/bin/env python3
"""copy_contention.py -- does a copy beside the compute stream slow it down? (session 29)

    python3 bench/probes/copy_contention.py [--mib N] [--reps R]

The 8 GiB GPT-2 row's trace (bench/results/2026-12-02-s29) shows the compute stream idle,
its kernels already launched, while the gradients' copies into host-homed managed memory
('Memcpy DtoD (Device -> Managed)') run on a stream of their own. This probe times a
bf16 matmul loop on the compute stream alone and beside a loop of copies of N MiB on a
second stream, for each destination: managed memory preferring the host (as uvmrt's
host-homed tensors), pinned host memory, and device memory; copied, or written (and read)
by an elementwise kernel, as the link's AdamW kernel reads and writes host-homed state. It prints each case's
compute time, the copies' rate, and the compute's slowdown; then uvmrt_adamw_gpu over
pinned state (when the uvmrt package and libuvmrt load) by the number of blocks it may
take (UVMRT_ADAMW_LINK_BLOCKS): its rate alone and the chain's slowdown beside it. Needs a GPU and the CUDA
runtime (libcudart) for cudaMallocManaged and cudaMemAdvise (CUDA 12.2+ location form).
"""
import argparse
import ctypes
import ctypes.util
import sys
import time


class MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


def cudart():
    import glob
    import os
    names = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    import torch
    base = os.path.dirname(torch.__file__)
    names += glob.glob(os.path.join(base, "..", "nvidia", "*", "lib", "libcudart.so*"))
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    raise OSError("libcudart not found")


class CudaArray:
    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                         "data": (ptr, False), "version": 3}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--mib", type=int, default=40, help="bytes of one copy (MiB, default 40)")
    ap.add_argument("--reps", type=int, default=200, help="matmuls per case (default 200)")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("copy_contention.py: no GPU", file=sys.stderr)
        return 77
    rt = cudart()
    n = a.mib << 20
    ptr = ctypes.c_void_p()
    assert rt.cudaMallocManaged(ctypes.byref(ptr), ctypes.c_size_t(n), 1) == 0
    host = MemLocation(2, 0)  # cudaMemLocationTypeHost
    dev = MemLocation(1, 0)
    assert rt.cudaMemAdvise(ptr, ctypes.c_size_t(n), 3, host) == 0  # SetPreferredLocation host
    assert rt.cudaMemAdvise(ptr, ctypes.c_size_t(n), 5, dev) == 0   # SetAccessedBy GPU 0
    ctypes.memset(ptr, 1, n)  # first touch on the host: the pages live there
    managed = torch.as_tensor(CudaArray(ptr.value, n), device="cuda")
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    device = torch.empty(n, dtype=torch.uint8, device="cuda")
    src = torch.ones(n, dtype=torch.uint8, device="cuda")
    srcf = src.view(torch.float32)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()

    def compute():
        y = x
        for _ in range(a.reps):
            y = x @ x
        return y

    def case(dst):
        torch.cuda.synchronize()
        copies = 0
        t = time.perf_counter()
        compute()
        if dst is not None:
            side.wait_stream(torch.cuda.current_stream())
            ev = torch.cuda.Event()
            ev.record()
            with torch.cuda.stream(side):
                while True:  # copies until the compute is done
                    dst.copy_(src, non_blocking=True)
                    copies += 1
                    if ev.query() or copies >= 2000:
                        break
        done = torch.cuda.Event()
        done.record()
        done.synchronize()
        t_compute = time.perf_counter() - t
        torch.cuda.synchronize()
        t_all = time.perf_counter() - t
        return t_compute, copies * n / t_all / 1e9

    def adamw_on(state, stream):
        """uvmrt_adamw_gpu over the four fp32 arrays of state (pinned: over the link) on stream."""
        w, m, v, g = (t.data_ptr() for t in state)
        st = L.lib().uvmrt_adamw_gpu(ctypes.byref(hp), w, m, v, g, state[0].numel(), None, None,
                                     ctypes.c_void_p(stream.cuda_stream))
        assert st == 0, st

    def chain(dst, n_links=60, kernel=False, read=None, adamw=None):
        """The backward's pattern: on the compute stream a chain of small kernels per
        'parameter' (a norm, a cast), after each the side stream waits for it and copies a
        gradient of N MiB out; returns the compute stream's time (ms) for the chain."""
        torch.cuda.synchronize()
        g = torch.randn(n // 4, device="cuda")
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n_links):
            torch._foreach_norm([g])
            h = g.to(torch.bfloat16).float()
            del h
            if dst is not None:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    if adamw is not None:  # the link's AdamW over state in pinned memory
                        adamw_on(adamw, side)
                    elif read is not None:  # a kernel reads it (into device memory)
                        torch.mul(read.view(torch.float32), 1.0, out=device.view(torch.float32))
                    elif kernel:  # an elementwise kernel writes it (x * 1: the same bits)
                        torch.mul(srcf, 1.0, out=dst.view(torch.float32))
                    else:
                        dst.copy_(src, non_blocking=True)
            x @ x  # some compute after the copy is queued
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    chain(None)
    alone = chain(None)
    print(f"chain of small kernels and a matmul, 60 links, alone: {alone:.1f} ms")
    # pinned host memory seen as a CUDA tensor (its host pointer is valid on the GPU: UVA),
    # as a kernel over the link would write it (zero-copy)
    pinned_dev = torch.as_tensor(CudaArray(pinned.data_ptr(), n), device="cuda")
    for name, dst, kernel, read in (("managed (host-preferred)", managed, False, None),
                                    ("managed, by a kernel", managed, True, None),
                                    ("pinned host", pinned, False, None),
                                    ("pinned host, by a kernel", pinned_dev, True, None),
                                    ("device", device, False, None),
                                    ("[read] managed, by a kernel", device, False, managed),
                                    ("[read] pinned, by a kernel", device, False, pinned_dev)):
        chain(dst, kernel=kernel, read=read)
        t = chain(dst, kernel=kernel, read=read)
        print(f"  each link's gradient copied to {name:27s}: {t:8.1f} ms ({t / alone:5.2f}x)")

    # the link's AdamW (uvmrt_adamw_gpu over pinned state, each array N/4 MiB): its rate
    # alone and the chain beside it, by the number of blocks it may take
    L = None
    try:
        from uvmrt import _lib as L
        hp = L.AdamW()
        L.lib().uvmrt_adamw_init(ctypes.byref(hp))
        hp.step = 1
    except Exception as e:  # noqa: BLE001 - the probe goes on without it
        print(f"  (uvmrt_adamw_gpu not measured: {e})")
    if L is not None:
        import os
        state = [torch.ones(n // 16, dtype=torch.float32, pin_memory=True) for _ in range(4)]
        for blocks in ("1056", "132", "64", "32", "16", "8", "4"):
            os.environ["UVMRT_ADAMW_LINK_BLOCKS"] = blocks
            for _ in range(2):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(20):
                    adamw_on(state, torch.cuda.current_stream())
                torch.cuda.synchronize()
                dt = (time.perf_counter() - t) / 20
            rate = state[0].numel() / dt / 1e9
            chain(device, adamw=state)
            tc = chain(device, adamw=state)
            print(f"  link AdamW, {blocks:>4s} blocks: {rate:5.2f} Gparam/s alone "
                  f"({rate * 28:5.1f} GB/s over the link); chain beside it {tc:6.1f} ms ({tc / alone:5.2f}x)")
        os.environ.pop("UVMRT_ADAMW_LINK_BLOCKS", None)

    case(None)
    base, _ = case(None)
    print(f"compute alone: {base * 1e3:.1f} ms ({a.reps} bf16 matmuls 4096^3)")
    for name, dst in (("managed (host-preferred)", managed), ("pinned host", pinned),
                      ("device", device)):
        case(dst)
        tc, rate = case(dst)
        print(f"beside copies to {name:25s}: compute {tc * 1e3:8.1f} ms ({tc / base:5.2f}x), "
              f"copies {rate:6.1f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
