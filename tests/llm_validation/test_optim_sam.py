import copy

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from llm_validation.optim import SAM, sam_perturbation


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _closure(model, opt, x, y):
    def closure():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        return loss

    return closure


@pytest.mark.parametrize(
    "base, kw",
    [
        (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
        (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.01)),
    ],
)
def test_rho_zero_reproduces_the_base_optimizer_exactly(base, kw):
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    m1, m2 = _model(), _model()
    o1, o2 = base(m1.parameters(), **kw), SAM(m2.parameters(), base, rho=0.0, **kw)
    for _ in range(5):
        o1.step(_closure(m1, o1, x, y))
        o2.step(_closure(m2, o2, x, y))
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
    if gn > 1e-6:
        assert abs(float(n) - rho) < 1e-6 * max(1.0, rho)
    else:
        assert float(n) <= rho + 1e-9


def test_matches_hand_computed_step_on_a_quadratic():
    A = torch.tensor([[3.0, 0.5], [0.5, 1.0]], dtype=torch.float64)
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    lr, rho = 0.1, 0.3
    opt = SAM([w], torch.optim.SGD, rho=rho, lr=lr)
    w0 = w.detach().clone()

    def closure():
        opt.zero_grad()
        loss = 0.5 * w @ A @ w
        loss.backward()
        return loss

    opt.step(closure)
    g = A @ w0
    expect = w0 - lr * (A @ (w0 + rho * g / g.norm()))
    torch.testing.assert_close(w.detach(), expect)


def test_two_step_interface_and_errors():
    m = _model()
    opt = SAM(m.parameters(), torch.optim.SGD, rho=0.1, lr=0.1)
    before = copy.deepcopy(m.state_dict())
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    ((m(x) - y) ** 2).mean().backward()
    opt.first_step(zero_grad=True)
    moved = any(not torch.equal(before[k], v) for k, v in m.state_dict().items())
    assert moved
    ((m(x) - y) ** 2).mean().backward()
    opt.second_step(zero_grad=True)
    with pytest.raises(ValueError, match="closure"):
        opt.step()
    with pytest.raises(ValueError, match="rho"):
        SAM(m.parameters(), torch.optim.SGD, rho=-1.0, lr=0.1)
    with pytest.raises(TypeError, match="base_optimizer_cls"):
        SAM(m.parameters(), "sgd", rho=0.1)
    with pytest.raises(ValueError, match="rho"):
        sam_perturbation([torch.ones(2)], -0.5)
