"""Which modules of a model become uvmrt layers, and which layer owns each parameter.

By default the layers are the repeated blocks (the largest nn.ModuleList or
nn.Sequential whose children are all of one class and hold parameters: GPT-2's
transformer.h, Llama's model.layers) plus every other module that holds
parameters directly (embeddings, final norm, head).  A parameter shared by
several modules (GPT-2's tied embedding and LM head) is owned by the first layer
that holds it, and is a use of the others.
"""

from torch import nn


class Layer:
    """One uvmrt layer: a module, the parameters it owns and those it borrows."""

    def __init__(self, name, module, is_block):
        self.name = name
        self.module = module
        self.is_block = is_block
        self.index = -1          # the uvmrt layer number
        self.owned = []          # [(fqn, Parameter)] this layer's tensors hold
        self.borrowed = []       # [Parameter] owned by another layer, used here
        self.matmul_params = 0   # elements of the weights its matmuls use (flops estimate)
        # measured in the recorded step
        self.tokens = 0
        self.act_bytes = 0       # bytes autograd saved for the backward in its forward
        self.in_bytes = 0        # bytes of its floating inputs (what a checkpoint keeps)
        # the choice
        self.cpu_opt = False     # its optimizer state is host-homed (updated on the CPU or over the link)
        self.gpu_link = False    # ... and the GPU updates it over the link (uvmrt_adamw_gpu), not the CPU
        self.recompute = False
        self.offload_input = False  # its checkpoint's inputs wait in host memory (_offload.py)
        self.off_bytes = 0       # bytes of them moved in the recorded step
        self.fwd_orig = None     # the module's own forward (the engine's wraps it)

    def __repr__(self):
        return f"Layer({self.name!r}, {len(self.owned)} params)"


def _blocks(model):
    best = None
    for name, m in model.named_modules():
        if not isinstance(m, (nn.ModuleList, nn.Sequential)):
            continue
        kids = list(m.children())
        if len(kids) < 2 or len({type(k) for k in kids}) != 1:
            continue
        total = sum(p.numel() for p in m.parameters())
        if total > 0 and (best is None or total > best[2]):
            best = (name, kids, total)
    if best is None:
        return []
    return [(f"{best[0]}.{i}" if best[0] else str(i), k) for i, k in enumerate(best[1])]


def find_layers(model, names=None):
    """The layers of model, in module order; names: explicit module names instead."""
    modules = dict(model.named_modules())
    if names is not None:
        layers = []
        for n in names:
            if n not in modules:
                raise ValueError(f"layers: the model has no module named {n!r}")
            layers.append(Layer(n, modules[n], is_block=True))
    else:
        blocks = _blocks(model)
        block_names = {n for n, _ in blocks}
        layers = []
        inside = None
        for name, m in model.named_modules():
            if inside is not None and (name == inside or name.startswith(inside + ".")):
                continue
            inside = None
            if name in block_names:
                layers.append(Layer(name, m, is_block=True))
                inside = name
                continue
            if any(True for _ in m.parameters(recurse=False)):
                layers.append(Layer(name or "(root)", m, is_block=False))
    _assign_params(model, layers)
    return [l for l in layers if l.owned or l.borrowed]


def _assign_params(model, layers):
    fqn = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        fqn.setdefault(id(p), n)
    owner = {}
    layer_ids = {id(l.module) for l in layers}
    for l in layers:
        seen = set()
        for sub_name, sub in l.module.named_modules():
            if sub is not l.module and id(sub) in layer_ids:
                continue  # a nested layer holds its own
            for p in sub.parameters(recurse=False):
                if id(p) in seen:
                    continue
                seen.add(id(p))
                if p.dim() >= 2 and not isinstance(sub, nn.Embedding):
                    l.matmul_params += p.numel()
                if p.numel() == 0:
                    continue
                if id(p) in owner:
                    l.borrowed.append(p)
                else:
                    owner[id(p)] = l
                    l.owned.append((fqn.get(id(p), f"{l.name}.param{len(l.owned)}"), p))
    unowned = [n for n, p in model.named_parameters() if id(p) not in owner and p.numel() > 0]
    if unowned:
        raise ValueError(f"layers: parameters outside every layer: {', '.join(unowned[:4])}"
                         f"{' ...' if len(unowned) > 4 else ''}; name their modules in layers=")

