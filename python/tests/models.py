"""Small models for the tests: a stack of MLP blocks with an embedding and a tied head
(the shape of a language model), built from a seed."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab=64, d=32, n=4, tied=True):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids, labels=None):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                                 ids[:, 1:].reshape(-1))
        return loss


def make(seed=0, **kw):
    torch.manual_seed(seed)
    return TinyLM(**kw)


def batches(n, seed=1, b=4, t=16, vocab=64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, vocab, (b, t), generator=g) for _ in range(n)]


def train(model, opt, data, clip=None):
    losses = []
    for ids in data:
        loss = model(ids)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses
