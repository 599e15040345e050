"""First-order identities of the SAM family (seed 003 eq. 10, §3.3), in float64.

References are independent of the optimizer: the exact Hessian ``H_L`` (autograd), the GGN
``H_G = Jᵀ H_out J`` from the explicit Jacobian and ``H_F = H_L − H_G``. The optimizer's output is
read by a base optimizer with lr = 0 that records the gradient it receives.
"""

import copy
import functools
import math

import numpy as np
import pytest
import torch
from torch.func import functional_call

from sims.optim import SAMFamily
from sims.optim import torch_sam as ts
from tests.sims.optim.optim_helpers import RecordingSGD, closure_for, make_data, make_net

X, Y = make_data()


def _flat_fns(net):
    names = [n for n, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [p.numel() for _, p in net.named_parameters()]
    theta = torch.cat([p.detach().flatten() for _, p in net.named_parameters()])

    def unflat(v):
        return {n: c.view(s) for n, c, s in zip(names, torch.split(v, sizes), shapes, strict=True)}

    def logits(v):
        return functional_call(net, unflat(v), (X,))

    def loss(v):
        return torch.nn.functional.cross_entropy(logits(v), Y)

    return theta, logits, loss


def _references(net):
    """g, H_L, H_G, H_F at the current parameters (flattened)."""
    theta, logits_fn, loss_fn = _flat_fns(net)
    g = torch.func.grad(loss_fn)(theta)
    # not torch.func.hessian: functorch's vmap rule for layer_norm's double backward gives wrong
    # mixed second derivatives (pytorch/functorch#534, still in torch 2.13); row-by-row is exact
    H_L = torch.autograd.functional.hessian(loss_fn, theta)
    J = torch.autograd.functional.jacobian(logits_fn, theta)  # (n, K, p)
    p = torch.softmax(logits_fn(theta), -1)  # (n, K)
    n = p.shape[0]
    H_out = (torch.diag_embed(p) - p[:, :, None] * p[:, None, :]) / n  # (n, K, K)
    H_G = torch.einsum("nkp,nkl,nlq->pq", J, H_out, J)
    return g, H_L, H_G, H_L - H_G


@functools.cache
def _default_refs():
    """References at the default net (computed once per session)."""
    return _references(make_net())


def _direction(net, variant, rho, **kw):
    """The gradient a SAM-family optimizer hands to its base (flattened)."""
    opt = SAMFamily(net.parameters(), RecordingSGD, rho, variant=variant, **kw)
    opt.step(closure_for(net, X, Y))
    return torch.cat([r.flatten() for r in opt.base_optimizer.received])


def _slope(rhos, errs):
    return np.polyfit(np.log(rhos), np.log(errs), 1)[0]


RHOS = [1e-2, 1e-3, 1e-4]


def test_sam_equals_fsam_plus_lsam_minus_g_to_second_order():
    net = make_net()
    g = _default_refs()[0]
    res = []
    for rho in RHOS:
        d = {v: _direction(net, v, rho) for v in ("sam", "fsam", "lsam")}
        res.append(float((d["lsam"] + d["fsam"] - g - d["sam"]).norm()))
    assert _slope(RHOS, res) == pytest.approx(2.0, abs=0.1), res
    assert res[-1] < 1e-7


@pytest.mark.parametrize(
    "variant, which, kw",
    [
        ("sam", "H_L", {}),
        ("fsam", "H_F", {}),
        ("lsam", "H_G", {}),
        ("angle_sam", (0.3, 0.8), {"angle_weights": (0.3, 0.8)}),
    ],
)
def test_first_order_term_is_the_right_hessian(variant, which, kw):
    net = make_net()
    g, H_L, H_G, H_F = _default_refs()
    eps = g / g.norm()
    if isinstance(which, tuple):
        target = (which[0] * H_G + which[1] * H_F) @ eps
    else:
        target = {"H_L": H_L, "H_G": H_G, "H_F": H_F}[which] @ eps
    # the three Hessian terms differ, so a wrong path cannot pass by accident
    assert float((H_F @ eps).norm()) > 0.05 * float((H_G @ eps).norm()) > 0
    errs = []
    for rho in RHOS:
        fd = (_direction(net, variant, rho, **kw) - g) / rho
        errs.append(float((fd - target).norm() / target.norm()))
    assert _slope(RHOS, errs) == pytest.approx(1.0, abs=0.1), errs
    assert errs[-1] < 1e-3


def test_angle_endpoints_are_fsam_and_lsam_exactly():
    net = make_net()
    for w, v in (((0.0, 1.0), "fsam"), ((1.0, 0.0), "lsam")):
        a = _direction(net, "angle_sam", 0.05, angle_weights=w)
        b = _direction(net, v, 0.05)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert ts.angle_weights(0.0) == (0.0, 1.0)
    s, c = ts.angle_weights(math.pi / 4)
    assert s == pytest.approx(1 / math.sqrt(2)) and c == pytest.approx(1 / math.sqrt(2))


@pytest.mark.parametrize("variant", ["sam", "fsam", "lsam", "angle_sam"])
def test_rho_zero_direction_is_the_gradient_exactly(variant):
    net = make_net()
    g = torch.func.grad(_flat_fns(net)[2])(_flat_fns(net)[0])
    kw = {"angle_weights": (0.4, 0.9)} if variant == "angle_sam" else {}
    d = _direction(net, variant, 0.0, **kw)
    # same forward/backward as the plain gradient: equal to rounding of the autograd reference
    torch.testing.assert_close(d, g, rtol=1e-13, atol=1e-15)


# ---------------------------------------------------------------- preconditioning


class RecordingAdamW(torch.optim.AdamW):
    received = None

    @torch.no_grad()
    def step(self, closure=None):
        self.received = torch.cat([p.grad.flatten().clone()
                                   for g in self.param_groups for p in g["params"]])  # fmt: skip
        return super().step(closure)


def _adam_M(opt_base, net, bias_correction=True):
    """M = sqrt(v/(1 − β2^k)) + ε from the AdamW state, by hand."""
    out = []
    for group in opt_base.param_groups:
        b2, eps = group["betas"][1], group["eps"]
        for p in group["params"]:
            st = opt_base.state[p]
            k = float(st["step"])
            bc = (1 - b2**k) if bias_correction else 1.0
            out.append((st["exp_avg_sq"] / bc).sqrt().flatten() + eps)
    return torch.cat(out)


@pytest.mark.parametrize("mode", ["pre", "post", "dual"])
@pytest.mark.parametrize("variant, which", [("sam", "H_L"), ("fsam", "H_F")])
def test_preconditioned_first_order_term_uses_adam_M(mode, variant, which):
    torch.manual_seed(0)
    m = make_net()
    opt = SAMFamily(m.parameters(), RecordingAdamW, 0.05, variant=variant, precondition=True,
                    precond_norm=mode, lr=1e-2, betas=(0.9, 0.95))  # fmt: skip
    for _ in range(2):  # build a second moment with a non-trivial spread
        opt.step(closure_for(m, X, Y))
    snapshot = (
        [p.detach().clone() for p in m.parameters()],
        copy.deepcopy(opt.base_optimizer.state_dict()),
    )
    M = _adam_M(opt.base_optimizer, m)
    g, H_L, H_G, H_F = _references(m)
    d = g / M
    norm = {"pre": g.norm(), "post": d.norm(), "dual": torch.sqrt(g @ d)}[mode]
    e_dir = d / norm
    target = {"H_L": H_L, "H_F": H_F}[which] @ e_dir
    refs = {}
    for rho in RHOS:
        with torch.no_grad():
            for p, s in zip(m.parameters(), snapshot[0], strict=True):
                p.copy_(s)
        # load_state_dict aliases the given tensors (and the step mutates them): copy each time
        opt.base_optimizer.load_state_dict(copy.deepcopy(snapshot[1]))
        opt.param_groups = opt.base_optimizer.param_groups
        for group in opt.param_groups:
            group["rho"] = rho
        opt.step(closure_for(m, X, Y))
        assert opt.last_info["preconditioned"]
        # the logged perturbation norm is rho * ||e_dir||
        assert opt.last_info["perturbation_norm"] == pytest.approx(
            rho * float(e_dir.norm()), rel=1e-10
        )
        fd = (opt.base_optimizer.received - g) / rho
        refs[rho] = float((fd - target).norm() / target.norm())
    errs = [refs[r] for r in RHOS]
    assert _slope(RHOS, errs) == pytest.approx(1.0, abs=0.15), errs
    assert errs[-1] < 2e-3


@pytest.mark.parametrize("mode", ["pre", "post", "dual"])
def test_pfsam_with_identity_M_equals_fsam(mode, monkeypatch):
    net_a, net_b = make_net(), make_net()
    kw = dict(lr=1e-2, weight_decay=0.1)
    fsam = SAMFamily(net_a.parameters(), torch.optim.AdamW, 0.1, variant="fsam", **kw)
    pfsam = SAMFamily(net_b.parameters(), torch.optim.AdamW, 0.1, variant="fsam",
                      precondition=True, precond_norm=mode, **kw)  # fmt: skip
    monkeypatch.setattr(ts, "adam_preconditioner",
                        lambda opt, params, **_: [torch.ones_like(p) for p in params])  # fmt: skip
    for _ in range(3):
        fsam.step(closure_for(net_a, X, Y))
        pfsam.step(closure_for(net_b, X, Y))
    for p, q in zip(net_a.parameters(), net_b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-14, atol=1e-15)


def test_pfsam_step0_identity_fallback_is_fsam_and_zero_fallback_is_adamw():
    nets = [make_net() for _ in range(4)]
    kw = dict(lr=1e-2, variant="fsam")
    opts = [
        SAMFamily(nets[0].parameters(), torch.optim.AdamW, 0.1, **kw),
        SAMFamily(nets[1].parameters(), torch.optim.AdamW, 0.1, precondition=True, **kw),
        torch.optim.AdamW(nets[2].parameters(), lr=1e-2),
        SAMFamily(nets[3].parameters(), torch.optim.AdamW, 0.1, precondition=True,
                  precond_step0="zero", **kw),
    ]  # fmt: skip
    for net, opt in zip(nets, opts, strict=True):
        if isinstance(opt, SAMFamily):
            opt.step(closure_for(net, X, Y))
        else:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(X), Y).backward()
            opt.step()
    assert opts[1].last_info["preconditioned"] is False
    for a, b in ((0, 1), (2, 3)):
        for p, q in zip(nets[a].parameters(), nets[b].parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert any(
        not torch.equal(p, q)
        for p, q in zip(nets[0].parameters(), nets[2].parameters(), strict=False)
    )


def test_adam_preconditioner_matches_hand_formula_and_bias_correction_matters():
    net = make_net()
    # distinct betas: with β₁ = β₂ a bias correction by the wrong β could not show
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, betas=(0.8, 0.95))
    params = list(net.parameters())
    assert ts.adam_preconditioner(opt, params) is None  # before the first step
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(X), Y).backward()
        opt.step()
    for bc in (True, False):
        got = torch.cat(
            [m.flatten() for m in ts.adam_preconditioner(opt, params, bias_correction=bc)]
        )
        torch.testing.assert_close(
            got, 1 / _adam_M(opt, net, bias_correction=bc), rtol=1e-14, atol=0
        )
    a = torch.cat([m.flatten() for m in ts.adam_preconditioner(opt, params)])
    b = torch.cat([m.flatten() for m in ts.adam_preconditioner(opt, params, bias_correction=False)])
    assert float((a - b).abs().max()) > 1e-3 * float(b.abs().max())


@pytest.mark.parametrize("mode", ["pre", "post", "dual"])
def test_preconditioned_kernel_norms_and_identity(mode):
    g = [torch.randn(3, 2, dtype=torch.float64), torch.randn(4, dtype=torch.float64)]
    minv = [torch.rand(3, 2, dtype=torch.float64) + 0.1, torch.rand(4, dtype=torch.float64) + 0.1]
    rho = 0.7
    e = ts.preconditioned_perturbation(g, rho, minv, mode=mode)
    gf = torch.cat([t.flatten() for t in g])
    mf = torch.cat([t.flatten() for t in minv])
    ef = torch.cat([t.flatten() for t in e])
    d = mf * gf
    expect = {"pre": rho * d / gf.norm(), "post": rho * d / d.norm(),
              "dual": rho * d / torch.sqrt(gf @ d)}[mode]  # fmt: skip
    torch.testing.assert_close(ef, expect, rtol=1e-14, atol=0)
    if mode == "dual":  # ||e||_M = sqrt(eᵀ M e) = rho
        assert float(torch.sqrt(ef @ (ef / mf))) == pytest.approx(rho, rel=1e-13)
    ones = [torch.ones_like(t) for t in g]
    same = ts.preconditioned_perturbation(g, rho, ones, mode=mode)
    for a, b in zip(same, ts.sam_perturbation(g, rho), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-15, atol=0)


# ---------------------------------------------------------------- pass counts


class _Counter:
    def __init__(self, net):
        self.forward = self.backward = 0
        net.register_forward_hook(lambda *a: self._f())
        net.fc1.weight.register_post_accumulate_grad_hook(lambda p: self._b())

    def _f(self):
        self.forward += 1

    def _b(self):
        self.backward += 1


@pytest.mark.parametrize(
    "name, passes",
    [("adamw", (1, 1)), ("sam", (2, 2)), ("fsam", (2, 2)), ("psam", (2, 2)), ("pfsam", (2, 2)),
     ("lsam", (3, 2)), ("angle_sam", (3, 3))],
)  # fmt: skip
def test_pass_counts_per_step(name, passes):
    from sims.optim import build_optimizer

    net = make_net()
    kw = {"angle_weights": (0.5, 0.5)} if name == "angle_sam" else {}
    opt = build_optimizer(name, net, lr=1e-2, **kw)
    opt.step(closure_for(net, X, Y)) if isinstance(opt, SAMFamily) else None  # warm state
    if not isinstance(opt, SAMFamily):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(X), Y).backward()
        opt.step()
    count = _Counter(net)
    for _ in range(3):
        if isinstance(opt, SAMFamily):
            opt.step(closure_for(net, X, Y))
        else:
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(X), Y).backward()
            opt.step()
    assert (count.forward, count.backward) == (3 * passes[0], 3 * passes[1])


# ---------------------------------------------------------------- JAX reference


def _jax_params(net):
    import jax.numpy as jnp

    return {n: jnp.asarray(p.detach().numpy()) for n, p in net.named_parameters()}


def _jax_fns():
    import jax
    import jax.numpy as jnp
    import optax

    def logits_fn(w):
        h = jnp.tanh(X.numpy() @ w["fc1.weight"].T + w["fc1.bias"][None, :])
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        h = (h - mu) / jnp.sqrt(var + 1e-5) * w["norm.weight"][None, :] + w["norm.bias"][None, :]
        return h @ w["fc2.weight"].T + w["fc2.bias"][None, :]

    def loss_fn(z):
        return optax.softmax_cross_entropy_with_integer_labels(z, jnp.asarray(Y.numpy())).mean()

    del jax
    return logits_fn, loss_fn


@pytest.mark.parametrize("variant", ["sam", "fsam", "lsam"])
@pytest.mark.parametrize("mode", [None, "pre", "post", "dual"])
def test_torch_optimizer_matches_jax_reference(variant, mode, monkeypatch):
    pytest.importorskip("jax")
    from sims.optim import functional_sam_gradient

    net = make_net()
    names = [n for n, _ in net.named_parameters()]
    gen = torch.Generator().manual_seed(3)
    minv = [torch.rand(p.shape, generator=gen, dtype=torch.float64) + 0.2 for p in net.parameters()]
    kw = {}
    if mode is not None:
        kw = dict(precondition=True, precond_norm=mode)
        monkeypatch.setattr(ts, "adam_preconditioner", lambda *a, **k: [m.clone() for m in minv])
    rho = 0.3  # large: the variants differ at first order, so the match is not a trivial one
    opt = SAMFamily(net.parameters(), RecordingAdamW, rho, variant=variant, lr=0.0, **kw)
    params = _jax_params(net)
    opt.step(closure_for(net, X, Y))
    logits_fn, loss_fn = _jax_fns()
    pinv = None if mode is None else {n: m.numpy() for n, m in zip(names, minv, strict=True)}
    out, g, _ = functional_sam_gradient(logits_fn, loss_fn, params, rho, variant=variant,
                                        precond_inv=pinv, mode=mode or "post")  # fmt: skip
    ref = np.concatenate([np.asarray(out[n]).ravel() for n in names])
    gref = np.concatenate([np.asarray(g[n]).ravel() for n in names])
    got = opt.base_optimizer.received.numpy()
    assert np.linalg.norm(ref - gref) > 1e-3 * np.linalg.norm(gref)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-13)


def test_torch_and_jax_perturbation_kernels_agree():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from sims.optim import preconditioned_perturbation as jax_pp
    from sims.optim import sam_perturbation as jax_sp

    rng = np.random.default_rng(0)
    g = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    m = [rng.random((3, 4)) + 0.1, rng.random(5) + 0.1]
    tg = [torch.tensor(a) for a in g]
    for mode in ("pre", "post", "dual"):
        a = ts.preconditioned_perturbation(tg, 0.4, [torch.tensor(b) for b in m], mode=mode)
        b = jax_pp([jnp.asarray(x) for x in g], 0.4, [jnp.asarray(x) for x in m], mode=mode)
        for x, y in zip(a, b, strict=True):
            np.testing.assert_allclose(x.numpy(), np.asarray(y), rtol=1e-14, atol=0)
    for x, y in zip(
        ts.sam_perturbation(tg, 0.4), jax_sp([jnp.asarray(x) for x in g], 0.4), strict=True
    ):
        np.testing.assert_allclose(x.numpy(), np.asarray(y), rtol=1e-14, atol=0)
