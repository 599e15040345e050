"""Helpers shared by the optimizer tests: a tiny float64 classifier, data and step functions."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


class TinyNet(torch.nn.Module):
    """Embedding-free MLP classifier: x (n, 3) -> logits (n, 4); tanh makes H_F non-zero."""

    def __init__(self, hidden: int = 5, dtype=torch.float64, dropout: float = 0.0):
        super().__init__()
        self.drop = torch.nn.Dropout(dropout)
        self.fc1 = torch.nn.Linear(3, hidden, dtype=dtype)
        self.norm = torch.nn.LayerNorm(hidden, dtype=dtype)
        self.fc2 = torch.nn.Linear(hidden, 4, dtype=dtype)

    def forward(self, x):
        return self.fc2(self.norm(self.drop(torch.tanh(self.fc1(x)))))


def make_net(seed: int = 0, **kw) -> TinyNet:
    torch.manual_seed(seed)
    return TinyNet(**kw)


def make_data(n: int = 12, seed: int = 1, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g, dtype=dtype)
    y = torch.randint(0, 4, (n,), generator=g)
    return x, y


def closure_for(model, x, y, scale: float = 1.0):
    """A SAM-family closure: forward only, returns (loss, logits)."""

    def closure():
        logits = model(x)
        return torch.nn.functional.cross_entropy(logits, y) * scale, logits

    return closure


def plain_step(opt, model, x, y):
    """One step of a non-SAM optimizer with the usual zero_grad/backward/step."""
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def any_step(opt, model, x, y):
    from sims.optim import SAMFamily

    if isinstance(opt, SAMFamily):
        return opt.step(closure_for(model, x, y))
    return plain_step(opt, model, x, y)


class RecordingSGD(torch.optim.SGD):
    """SGD with lr=0 that records the gradient it receives (the SAM-family direction)."""

    def __init__(self, params, **kw):
        kw.setdefault("lr", 0.0)
        super().__init__(params, **kw)
        self.received = None

    @torch.no_grad()
    def step(self, closure=None):
        self.received = [p.grad.detach().clone() for g in self.param_groups for p in g["params"]]
        return super().step(closure)
