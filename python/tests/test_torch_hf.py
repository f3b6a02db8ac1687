"""uvmrt.torch with Hugging Face models (GPT-2 with its tied embedding, Llama), small
configurations built from a config (no download), on the sim backend."""

import pytest
import torch

import uvmrt.torch as ut

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
