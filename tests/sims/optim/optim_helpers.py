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


# ------------------------------------------------------------------------------------------------
# An independent construction of every SAM-family gradient (torch.func; no sims.optim code)
# ------------------------------------------------------------------------------------------------


def _ce_of(model, p, x, y):
    from torch.func import functional_call

    logits = functional_call(model, p, (x,))
    return torch.nn.functional.cross_entropy(logits, y), logits


def _tree(fn, *trees):
    return {k: fn(*(t[k] for t in trees)) for k in trees[0]}


def _norm(tree):
    return torch.sqrt(sum((v.double() ** 2).sum() for v in tree.values()))


def reference_gradient(model, params, batches, variant, rho, *, angle=(0.0, 0.0), minv=None,
                       mode="post", adaptive=False, local=False):  # fmt: skip
    """The gradient a SAM-family method hands its base optimizer, built from scratch.

    ``batches``: one ``(x, y)`` per replica (equal sizes); the objective is the mean over
    replicas of each replica's mean cross-entropy. ``local=False``: ``e`` from the replica-mean
    gradient (one process on the whole batch); ``local=True``: replica ``r`` perturbs with its own
    gradient (``sync_perturbation=False``). Returns the replica mean of the variant gradients.
    Seed 003 eqs. 2, 11, 12, App. D; ASAM ``e = ρ T²g/‖Tg‖``, ``T = |θ|``.
    """
    from torch.func import functional_call, grad, vjp

    def loss_fn(p, x, y):
        return _ce_of(model, p, x, y)[0]

    def r_of(p, x, y):  # ∂L/∂Z at p
        z = _ce_of(model, p, x, y)[1].detach().requires_grad_(True)
        return torch.autograd.grad(torch.nn.functional.cross_entropy(z, y), z)[0]

    def jt(p, x, r):  # J(p)ᵀ r
        return vjp(lambda q: functional_call(model, q, (x,)), p)[1](r)[0]

    def perturbation(g):
        if adaptive:
            tg = _tree(lambda a, w: a * w.abs(), g, params)
            s = rho / _norm(tg) if _norm(tg) > 0 else 0.0
            return _tree(lambda a, w: s * a * w.abs(), tg, params)
        d = g if minv is None else _tree(torch.mul, g, minv)
        n = {
            "pre": _norm(g),
            "post": _norm(d),
            "dual": torch.sqrt(
                sum(
                    (a.double() * b.double()).sum()
                    for a, b in zip(g.values(), d.values(), strict=True)
                )
            ),
        }[mode]
        return _tree(lambda a: (rho / n) * a, d)

    gs = [grad(loss_fn)(params, x, y) for x, y in batches]
    g_mean = _tree(lambda *a: sum(a) / len(a), *gs)
    out = []
    for (x, y), g_r in zip(batches, gs, strict=True):
        e = perturbation(g_r if local else g_mean)
        pe = _tree(torch.add, params, e)
        g_sam = grad(loss_fn)(pe, x, y)
        g_fsam = jt(pe, x, r_of(params, x, y))
        g_lsam = jt(params, x, r_of(pe, x, y))
        if variant == "sam":
            out.append(g_sam)
        elif variant == "fsam":
            out.append(g_fsam)
        elif variant == "lsam":
            out.append(g_lsam)
        else:
            wl, wf = angle
            out.append(_tree(lambda a, b, c, wl=wl, wf=wf: (1 - wl - wf) * a + wl * b + wf * c,
                             g_r, g_lsam, g_fsam))  # fmt: skip
    return _tree(lambda *a: sum(a) / len(a), *out)


def reference_train(model, batches, variant, rho, steps, *, lr, base="sgd", betas=(0.9, 0.95),
                    eps=1e-8, precondition=False, mode="post", **kw):  # fmt: skip
    """``steps`` SAM-family steps from ``model``'s parameters with SGD or Adam(W) written out.

    Adam (no weight decay): ``m ← β₁m + (1−β₁)G``, ``v ← β₂v + (1−β₂)G²``,
    ``θ ← θ − η m̂/(sqrt(v̂) + ε)``; with ``precondition`` the perturbation uses
    ``M⁻¹ = 1/(sqrt(v/(1 − β₂ᵏ)) + ε)`` from the state *before* the step (``M = I`` at ``k = 0``).
    """
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    m = {n: torch.zeros_like(p) for n, p in params.items()}
    v = {n: torch.zeros_like(p) for n, p in params.items()}
    b1, b2 = betas
    for k in range(steps):
        minv = None
        if precondition and k > 0:
            minv = _tree(lambda a, k=k: 1.0 / ((a / (1 - b2**k)).sqrt() + eps), v)
        G = reference_gradient(model, params, batches, variant, rho, minv=minv, mode=mode, **kw)
        if base == "sgd":
            params = _tree(lambda p, g: p - lr * g, params, G)
        else:
            m = _tree(lambda a, g: b1 * a + (1 - b1) * g, m, G)
            v = _tree(lambda a, g: b2 * a + (1 - b2) * g * g, v, G)
            t = k + 1
            params = _tree(lambda p, a, b, t=t: p - lr * (a / (1 - b1**t))
                           / ((b / (1 - b2**t)).sqrt() + eps), params, m, v)  # fmt: skip
    return params
