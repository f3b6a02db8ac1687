"""The inputs that checkpointed blocks keep for their recompute, in host memory.

A non-reentrant checkpoint keeps each block's inputs on the GPU from its forward until
its backward: for a deep model at a large batch that is gigabytes of PyTorch's memory
that nobody reads for most of the step (GPT-2 d48 at B=8, T=1024: 48 x 50 MiB). The
checkpoint saves them as saved tensors, so a saved_tensors_hooks pair around the
checkpoint call sees exactly them (the checkpoint's own hooks take over inside the
block). The pack hook copies an input to pinned host memory on a stream of its own,
after the forward's work that made it, and lets the GPU copy go; the block two places
later in the backward's order starts the copy back (on another stream), and the unpack
hook makes the recompute wait for it. The values are the same bits, so results do not
change. On a CPU device (sim) the copies are plain and synchronous: the bookkeeping is
what is tested there.
"""

import torch

MIN_BYTES = 1 << 20  # smaller inputs are not worth a copy each way


class _Held:
    """One input while it is off the GPU."""
    __slots__ = ("host", "device", "saved", "back", "ready", "layer")

    def __init__(self, host, device, saved, layer):
        self.host, self.device, self.saved, self.layer = host, device, saved, layer
        self.back = None    # the GPU copy once fetched
        self.ready = None   # event after the copy back


class InputOffload:
    def __init__(self, device):
        self.device = device
        self.min_bytes = MIN_BYTES
        cuda = device.type == "cuda"
        self.out_stream = torch.cuda.Stream(device=device) if cuda else None
        self.in_stream = torch.cuda.Stream(device=device) if cuda else None
        self.pool = {}      # (shape, dtype) -> [(pinned tensor, event after its last use or None)]
        self.held = {}      # layer -> [_Held] of its last forward
        self.last_bytes = {}  # layer -> bytes its last forward moved out
        self.host_bytes = 0  # pinned bytes made (they are kept for the next steps)
        self.moved_out = self.moved_in = 0  # bytes, over the life of the engine

    # ------------------------------------------------------------ the forward's side
    def hooks(self, layer):
        """The saved_tensors_hooks pair to put around layer's checkpoint call."""
        self.held[layer] = []
        self.last_bytes[layer] = 0
        return torch.autograd.graph.saved_tensors_hooks(lambda t: self.pack(layer, t), self.unpack)

    def _buffer(self, t):
        key = (tuple(t.shape), t.dtype)
        free = self.pool.get(key)
        if free:
            return free.pop()
        pinned = self.device.type == "cuda"
        host = torch.empty(t.shape, dtype=t.dtype, pin_memory=pinned)
        self.host_bytes += t.numel() * t.element_size()
        return host, None

    def pack(self, layer, t):
        n = t.numel() * t.element_size()
        if t.device != self.device or n < self.min_bytes or t.layout != torch.strided or not t.is_contiguous():
            return t.detach()
        host, free_after = self._buffer(t)
        saved = t.detach()
        if self.out_stream is not None:
            self.out_stream.wait_stream(torch.cuda.current_stream(self.device))  # t is made
            if free_after is not None:
                self.out_stream.wait_event(free_after)  # its last copy back has read it
            with torch.cuda.stream(self.out_stream):
                host.copy_(saved, non_blocking=True)
            saved.record_stream(self.out_stream)  # torch reuses t's memory after the copy only
            done = torch.cuda.Event()
            done.record(self.out_stream)
        else:
            host.copy_(saved)
            done = None
        h = _Held(host, t.device, done, layer)
        self.held[layer].append(h)
        self.last_bytes[layer] += n
        self.moved_out += n
        return h

    # ------------------------------------------------------------ the backward's side
    def fetch(self, layer):
        """Starts the copies back of layer's inputs (from the autograd thread, ahead of the
        layer's recompute)."""
        for h in self.held.get(layer, ()):
            self._fetch(h)

    def _fetch(self, h):
        if h.back is not None or h.host is None:
            return
        if self.in_stream is None:
            h.back = h.host.clone()
        else:
            cur = torch.cuda.current_stream(self.device)
            h.back = torch.empty(h.host.shape, dtype=h.host.dtype, device=h.device)  # on cur: freed in its order
            self.in_stream.wait_stream(cur)
            self.in_stream.wait_event(h.saved)  # the copy out is done
            with torch.cuda.stream(self.in_stream):
                h.back.copy_(h.host, non_blocking=True)
            h.ready = torch.cuda.Event()
            h.ready.record(self.in_stream)
        self.moved_in += h.host.numel() * h.host.element_size()

    def unpack(self, h):
        if not isinstance(h, _Held):
            return h
        if h.host is None and h.back is None:
            raise RuntimeError("uvmrt: a checkpointed block's input was moved to host memory and a backward "
                               "has used it already: a second backward through the same graph "
                               "(retain_graph=True) needs offload(..., offload_inputs=False)")
        self._fetch(h)
        if h.ready is not None:
            torch.cuda.current_stream(self.device).wait_event(h.ready)
        out, h.back = h.back, None  # the graph's saved object no longer holds the GPU copy
        # the host buffer serves a later step's copy out once this copy back has read it
        self.pool.setdefault((tuple(h.host.shape), h.host.dtype), []).append((h.host, h.ready))
        h.host = None
        held = self.held.get(h.layer)
        if held is not None and h in held:
            held.remove(h)
        return out

    def drop(self):
        """Forgets inputs a backward never asked for (a step without backward)."""
        for layer, held in self.held.items():
            for h in held:
                if h.host is not None:
                    self.pool.setdefault((tuple(h.host.shape), h.host.dtype), []).append((h.host, h.ready))
                    h.host = None
            held.clear()
