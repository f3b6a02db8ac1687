"""uvmrt.torch with Hugging Face models (GPT-2 with its tied embedding, Llama), small
configurations built from a config (no download), on the sim backend."""

import pytest
import torch

import uvmrt.torch as ut
from uvmrt import _lib as L

transformers = pytest.importorskip("transformers")


def gpt2(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_layer=3, n_embd=64, n_head=4, n_positions=64, vocab_size=128,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return transformers.GPT2LMHeadModel(cfg)


def llama(seed=0):
    torch.manual_seed(seed)
    cfg = transformers.LlamaConfig(num_hidden_layers=3, hidden_size=64, intermediate_size=160,
                                   num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                                   max_position_embeddings=64, tie_word_embeddings=False, use_cache=False)
    return transformers.LlamaForCausalLM(cfg)


def data(n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 128, (2, 32), generator=g) for _ in range(n)]


def train(model, opt, batches, clip=None):
    out = []
    for x in batches:
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("recompute", [False, True])
def test_losses_bitwise_equal_to_plain_pytorch(make, recompute):
    b = data()
    ref_model = make()
    ref = train(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-3, foreach=False), b, clip=1.0)
    model, opt = ut.offload(make(), torch.optim.AdamW, lr=1e-3, foreach=False, budget="256M",
                            cpu_optimizer=False, recompute=recompute, max_grad_norm=1.0)
    assert train(model, opt, b) == ref


def test_gpt2_layers_and_its_tied_head():
    model, opt = ut.offload(gpt2(), torch.optim.AdamW, budget="256M")
    e = ut.engine_of(model)
    names = [l.name for l in e.layers]
    assert names[:2] == ["transformer.wte", "transformer.wpe"]
    assert names[2:5] == ["transformer.h.0", "transformer.h.1", "transformer.h.2"]
    assert names[-1] == "lm_head"
    assert e.layers[-1].borrowed == [model.transformer.wte.weight]
    assert model.lm_head.weight is model.transformer.wte.weight


def test_llama_trains_with_the_choice_of_uvmrt():
    model, opt = ut.offload(llama(), torch.optim.AdamW, lr=1e-3, budget="64M")
    losses = train(model, opt, data(8))
    assert losses[-1] < losses[0]
    assert ut.engine_of(model).choice is not None


def test_llama_cpu_adamw_follows_torch_adamw():
    b = data()
    ref_model = llama()
    ref = train(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-3, foreach=False), b)
    model, opt = ut.offload(llama(), torch.optim.AdamW, lr=1e-3, budget="256M", cpu_optimizer=True,
                            recompute=False)
    got = train(model, opt, b)
    for a, r in zip(got, ref):
        assert abs(a - r) <= 1e-5 * abs(r), (got, ref)


# ---------------------------------------------------------------- working copies under autocast

def train_autocast(model, opt, batches, micro=1):
    out = []
    for x in batches:
        for _ in range(micro):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=x, labels=x).loss
            loss.backward()
        opt.step()
        opt.zero_grad()
        out.append(loss.item())
    return out


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("recompute", [False, True])
def test_working_copies_give_autocasts_results_bitwise(make, recompute):
    b = data()
    ref_model = make()
    ref = train_autocast(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-3, foreach=False), b)
    model, opt = ut.offload(make(), torch.optim.AdamW, lr=1e-3, foreach=False, budget="256M",
                            cpu_optimizer=False, recompute=recompute)
    assert train_autocast(model, opt, b) == ref
    e = ut.engine_of(model)
    assert e.half.used_bf16
    # between forwards the modules hold their fp32 parameters again
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.lm_head.weight is model.transformer.wte.weight if make is gpt2 else True


def test_working_copies_accumulate_gradients_as_autocast_does():
    b = data(4)
    ref_model = llama()
    ref = train_autocast(ref_model, torch.optim.AdamW(ref_model.parameters(), lr=1e-3, foreach=False), b, micro=2)
    model, opt = ut.offload(llama(), torch.optim.AdamW, lr=1e-3, foreach=False, budget="256M",
                            cpu_optimizer=False, recompute=False)
    assert train_autocast(model, opt, b, micro=2) == ref


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
def test_cpu_layers_forwards_read_the_bf16_copies_adamw_writes(make):
    """With the optimizer on the CPU, the forwards read the bf16 copies uvmrt_adamw_cpu
    writes beside the fp32 weights: the same losses as casting the fp32 weights."""
    b = data()
    runs = []
    for half in (False, True):
        model, opt = ut.offload(make(), torch.optim.AdamW, lr=1e-3, budget="256M", cpu_optimizer=True,
                                recompute=False, half_weights=half)
        runs.append(train_autocast(model, opt, b))
        e = ut.engine_of(model)
        if half:
            blk = e.blocks()[0]
            assert blk.cpu_opt
            uses, only = e.gpu_uses(blk, L.PHASE_FORWARD)
            names = {e.slots[id(p)].handles.get("weight16"): fqn for fqn, p in blk.owned}
            read16 = [names[h] for h, _ in uses if h in names and h is not None]
            assert only and read16, "a CPU block's forward names its bf16 copies"
            s = next(e.slots[id(p)] for _, p in blk.owned if "weight16" in e.slots[id(p)].kinds)
            ut.synchronize(model)  # the last step's CPU updates run beside the next forward
            assert torch.equal(s.hviews["weight16"], s.hviews["weight"].to(torch.bfloat16))
        ut.close(model)
    assert runs[0] == runs[1]


def test_loading_weights_reaches_the_cpu_layers_copies():
    b = data(4)
    model, opt = ut.offload(gpt2(), torch.optim.AdamW, lr=1e-3, budget="256M", cpu_optimizer=True)
    train_autocast(model, opt, b[:2])
    fresh = gpt2(seed=5)
    model.load_state_dict(fresh.state_dict())
    e = ut.engine_of(model)
    for slot in e.slots.values():
        if "weight16" in slot.hviews:
            assert torch.equal(slot.hviews["weight16"], slot.hviews["weight"].to(torch.bfloat16))
    ut.close(model)


def test_a_recomputing_blocks_copies_are_freed_with_its_activations(monkeypatch):
    """The 16-bit copies are not leaves held by the graph until the backward: in a
    checkpointed block they die when its forward ends, as its other activations do."""
    import weakref
    from uvmrt.torch import _half
    made = []
    orig = _half._HalfCopy.forward

    def forward(ctx, param, src, dtype):
        out = orig(ctx, param, src, dtype)
        made.append(weakref.ref(out))
        return out
    monkeypatch.setattr(_half._HalfCopy, "forward", staticmethod(forward))
    model, opt = ut.offload(gpt2(), torch.optim.AdamW, lr=1e-3, budget="256M", cpu_optimizer=False,
                            recompute=True)
    x = data(1)[0]
    train_autocast(model, opt, [x])  # the recorded step (on sim it keeps every block)
    assert all(b.recompute for b in ut.engine_of(model).blocks())
    made.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    n = len(made)
    assert n >= 3 * 8  # 3 blocks x (4 Linear-like modules x weight and bias)
    assert all(r() is None for r in made), "a recomputing block's copies outlive its forward"
    loss.backward()
    assert len(made) == 2 * n  # the recompute made them again
    opt.step()
    opt.zero_grad()
    ut.close(model)


@pytest.mark.parametrize("make", [gpt2, llama], ids=["gpt2", "llama"])
def test_offloaded_checkpoint_inputs_of_hf_blocks_give_the_same_losses(make):
    """The saved_tensors_hooks around a transformers block's checkpoint see its inputs
    (hidden states, and whatever else the block is called with), send them away and bring
    them back: the same losses, and every block's inputs moved out and back."""
    batches = data()
    out, moved = {}, {}
    for off in (False, True):
        model, opt = ut.offload(make(), torch.optim.AdamW, lr=1e-3, budget="256M", cpu_optimizer=False,
                                recompute=True, offload_inputs=off)
        e = ut.engine_of(model)
        if e.offload is not None:
            e.offload.min_bytes = 0
        out[off] = train(model, opt, batches)
        moved[off] = (e.offload.moved_out, e.offload.moved_in) if e.offload is not None else (0, 0)
    assert out[True] == out[False]
    assert moved[True][0] > 0 and moved[True][0] == moved[True][1]
