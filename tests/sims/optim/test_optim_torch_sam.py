"""Torch SAM: kernel properties, hand-computed steps, and the order of operations (issue 9).

The SAM step must restore the unperturbed parameters *before* the base step, so that weight
decay and momentum act at θ, not at θ + e. With plain SGD the order cannot matter; with weight
decay it does, so the hand-computed references below use weight decay and momentum.
"""

import copy

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sims.optim import SAM, SAMFamily
from sims.optim.torch_sam import sam_perturbation


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _closure(model, x, y):
    def closure():
        out = model(x)
        return ((out - y) ** 2).mean(), out

    return closure


@pytest.mark.parametrize(
    "base, kw",
    [
        (torch.optim.SGD, dict(lr=0.1, momentum=0.9, weight_decay=0.05)),
        (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.01)),
    ],
)
def test_rho_zero_reproduces_the_base_optimizer_exactly(base, kw):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    m1, m2 = _model(), _model()
    o1, o2 = base(m1.parameters(), **kw), SAM(m2.parameters(), base, rho=0.0, **kw)
    for _ in range(5):
        o1.zero_grad()
        ((m1(x) - y) ** 2).mean().backward()
        o1.step()
        o2.step(_closure(m2, x, y))
    for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


@given(st.lists(st.floats(-10, 10, allow_nan=False), min_size=2, max_size=8), st.floats(0.0, 5.0))
def test_perturbation_global_norm_is_rho(vals, rho):
    g = [
        torch.tensor(vals[: len(vals) // 2 or 1], dtype=torch.float64),
        torch.tensor(vals[len(vals) // 2 :], dtype=torch.float64),
        None,
    ]
    eps = sam_perturbation(g, rho)
    assert eps[2] is None
    n = torch.cat([e.flatten() for e in eps[:2]]).norm()
    gn = torch.cat([x.flatten() for x in g[:2]]).norm()
    if gn > 0:
        assert abs(float(n) - rho) <= 1e-12 * max(1.0, rho)
        # direction: e is a positive multiple of g
        cos = float(
            torch.cat([e.flatten() for e in eps[:2]]) @ torch.cat([x.flatten() for x in g[:2]])
        )
        assert cos >= 0
    else:
        assert float(n) == 0.0


A = torch.tensor([[3.0, 0.5], [0.5, 1.0]], dtype=torch.float64)


def _quad_closure(w):
    return lambda: (0.5 * w @ A @ w, w)


def test_matches_hand_computed_step_on_a_quadratic():
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    lr, rho = 0.1, 0.3
    opt = SAM([w], torch.optim.SGD, rho=rho, lr=lr)
    w0 = w.detach().clone()
    opt.step(_quad_closure(w))
    g = A @ w0
    expect = w0 - lr * (A @ (w0 + rho * g / g.norm()))
    torch.testing.assert_close(w.detach(), expect, rtol=1e-15, atol=1e-15)


def _sam_grad(w0, rho):
    g = A @ w0
    return A @ (w0 + rho * g / g.norm())


def test_order_of_operations_sgd_momentum_and_weight_decay():
    # torch SGD: d = g̃ + λθ (L2 at the *unperturbed* θ); b ← μ b + d; θ ← θ − η b.
    lr, rho, mu, wd = 0.1, 0.3, 0.9, 0.2
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = SAM([w], torch.optim.SGD, rho=rho, lr=lr, momentum=mu, weight_decay=wd)
    theta, buf = w.detach().clone(), None
    for _ in range(3):
        opt.step(_quad_closure(w))
        d = _sam_grad(theta, rho) + wd * theta
        buf = d if buf is None else mu * buf + d  # torch initializes the buffer with d
        theta = theta - lr * buf
        torch.testing.assert_close(w.detach(), theta, rtol=1e-14, atol=1e-14)


def test_order_of_operations_adamw_decoupled_weight_decay():
    # torch AdamW: θ ← θ(1 − ηλ); m, v from g̃; θ ← θ − η m̂/(sqrt(v̂) + ε), all at the unperturbed θ.
    lr, rho, wd, (b1, b2), eps = 0.05, 0.3, 0.5, (0.9, 0.99), 1e-8
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = SAM([w], torch.optim.AdamW, rho=rho, lr=lr, weight_decay=wd, betas=(b1, b2), eps=eps)
    theta = w.detach().clone()
    m = torch.zeros(2, dtype=torch.float64)
    v = torch.zeros(2, dtype=torch.float64)
    for k in range(1, 4):
        opt.step(_quad_closure(w))
        gt = _sam_grad(theta, rho)
        theta = theta * (1 - lr * wd)
        m = b1 * m + (1 - b1) * gt
        v = b2 * v + (1 - b2) * gt**2
        mhat, vhat = m / (1 - b1**k), v / (1 - b2**k)
        theta = theta - lr * mhat / (vhat.sqrt() + eps)
        torch.testing.assert_close(w.detach(), theta, rtol=1e-13, atol=1e-14)


def test_manual_two_step_interface_matches_step():
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    m1, m2 = _model(), _model()
    kw = dict(lr=0.1, momentum=0.9, weight_decay=0.1)
    o1 = SAM(m1.parameters(), torch.optim.SGD, rho=0.2, **kw)
    o2 = SAM(m2.parameters(), torch.optim.SGD, rho=0.2, **kw)
    before = copy.deepcopy(m1.state_dict())
    ((m1(x) - y) ** 2).mean().backward()
    o1.first_step(zero_grad=True)
    assert any(not torch.equal(before[k], v) for k, v in m1.state_dict().items())
    ((m1(x) - y) ** 2).mean().backward()
    o1.second_step(zero_grad=True)
    o2.step(_closure(m2, x, y))
    for p, q in zip(m1.parameters(), m2.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_errors_name_the_argument():
    m = _model()
    opt = SAM(m.parameters(), torch.optim.SGD, rho=0.1, lr=0.1)
    with pytest.raises(RuntimeError, match="closure"):
        opt.step()
    with pytest.raises(ValueError, match="`rho`"):
        SAM(m.parameters(), torch.optim.SGD, rho=-1.0, lr=0.1)
    with pytest.raises(TypeError, match="base_optimizer_cls"):
        SAM(m.parameters(), "sgd", rho=0.1)
    with pytest.raises(ValueError, match="`rho`"):
        sam_perturbation([torch.ones(2)], -0.5)
    with pytest.raises(ValueError, match="`rho`"):
        sam_perturbation([torch.ones(2)], float("nan"))
    assert isinstance(opt, SAMFamily) and opt.variant == "sam"


def test_closure_that_calls_backward_is_rejected():
    m = _model()
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt = SAM(m.parameters(), torch.optim.SGD, rho=0.1, lr=0.1)
    before = copy.deepcopy(m.state_dict())

    def old_style():
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        return loss

    with pytest.raises(RuntimeError, match="called backward"):
        opt.step(old_style)
    for k, v in m.state_dict().items():
        assert torch.equal(before[k], v)
