"""Torch SAM family (``sims.optim.torch_sam``): kernels, hand-computed steps, every variant
against an independent construction, davda54/sam closures, fp16 loss scaling and bf16 autocast.

The SAM step must restore the unperturbed parameters *before* the base step, so that weight
decay and momentum act at θ, not at θ + e. With plain SGD the order cannot matter; with weight
decay it does, so the hand-computed references below use weight decay and momentum.

Configurations are chosen so that each parameter matters: ANGLE-SAM weights are asymmetric,
Adam's two betas differ, ρ is large enough that the variants differ at first order.
"""

import copy
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sims.optim import SAM, SAMFamily
from sims.optim import torch_sam as ts
from sims.optim.torch_sam import sam_perturbation
from tests.sims.optim.optim_helpers import closure_for, make_data, make_net, reference_train


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


def _flat(net):
    return torch.cat([p.detach().flatten() for p in net.parameters()])


def _ref_flat(ref, net):
    return torch.cat([ref[n].flatten() for n, _ in net.named_parameters()])


# Every variant, 3 steps at ρ = 0.3, against optim_helpers.reference_train (torch.func, no
# sims.optim code). Adam's betas differ (a β₁/β₂ swap in the bias correction shows), ANGLE-SAM's
# weights are asymmetric (a swap of w_logit and w_func shows).
CASES = {
    "sam": (dict(variant="sam"), {}),
    "fsam": (dict(variant="fsam"), {}),
    "lsam": (dict(variant="lsam"), {}),
    "angle_sam": (dict(variant="angle_sam", angle_weights=(0.3, 0.8)), dict(angle=(0.3, 0.8))),
    "asam": (dict(variant="sam", adaptive=True), dict(adaptive=True)),
    "afsam": (dict(variant="fsam", adaptive=True), dict(adaptive=True)),
    **{f"p{v}-{m}": (dict(variant=v, precondition=True, precond_norm=m),
                     dict(precondition=True, mode=m))
       for v in ("sam", "fsam") for m in ("pre", "post", "dual")},
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_every_variant_equals_an_independent_construction(case):
    kw, ref_kw = CASES[case]
    x, y = make_data(n=12)
    net = make_net()
    adam = kw.get("precondition", False)
    base, lr = (torch.optim.Adam, 0.01) if adam else (torch.optim.SGD, 0.1)
    extra = dict(betas=(0.8, 0.95)) if adam else {}
    opt = SAMFamily(net.parameters(), base, 0.3, lr=lr, **kw, **extra)
    for _ in range(3):
        opt.step(closure_for(net, x, y))
    variant = kw["variant"]
    ref_kw = dict(ref_kw, **({"base": "adam", "betas": (0.8, 0.95)} if adam else {}))
    ref = reference_train(make_net(), [(x, y)], variant, 0.3, 3, lr=lr, **ref_kw)
    torch.testing.assert_close(_flat(net), _ref_flat(ref, net), rtol=1e-12, atol=1e-14)
    # ρ matters here: the same steps at ρ = 0 land measurably elsewhere
    plain = reference_train(make_net(), [(x, y)], variant, 0.0, 3, lr=lr, **ref_kw)
    assert float((_ref_flat(ref, net) - _ref_flat(plain, net)).norm()) > 1e-3


def test_angle_combine_closed_form_with_asymmetric_weights():
    g = [torch.tensor([1.0, -2.0], dtype=torch.float64)]
    gl = [torch.tensor([0.5, 4.0], dtype=torch.float64)]
    gf = [torch.tensor([-3.0, 1.5], dtype=torch.float64)]
    got = ts.angle_combine(g, gl, gf, 0.3, 0.8)[0]
    # g + 0.3 (gl − g) + 0.8 (gf − g), written out
    expect = torch.tensor(
        [
            1.0 + 0.3 * (0.5 - 1.0) + 0.8 * (-3.0 - 1.0),
            -2.0 + 0.3 * (4.0 + 2.0) + 0.8 * (1.5 + 2.0),
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(got, expect, rtol=1e-15, atol=1e-15)
    assert ts.angle_weights(math.pi / 6) == pytest.approx((0.5, math.sqrt(3) / 2))


def test_adam_preconditioner_is_the_bias_corrected_second_moment():
    net = make_net()
    x, y = make_data()
    b1, b2, eps = 0.8, 0.95, 1e-6  # distinct betas: the second moment's β₂ must be the one used
    opt = torch.optim.Adam(net.parameters(), lr=1e-2, betas=(b1, b2), eps=eps)
    params = list(net.parameters())
    assert ts.adam_preconditioner(opt, params) is None  # no second moment before step 1
    v = [torch.zeros_like(p) for p in params]
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        v = [b2 * vi + (1 - b2) * p.grad**2 for vi, p in zip(v, params, strict=True)]
        opt.step()
    got = ts.adam_preconditioner(opt, params)
    raw = ts.adam_preconditioner(opt, params, bias_correction=False)
    for mi, ri, vi in zip(got, raw, v, strict=True):
        torch.testing.assert_close(mi, 1 / ((vi / (1 - b2**3)).sqrt() + eps), rtol=1e-12, atol=0)
        torch.testing.assert_close(ri, 1 / (vi.sqrt() + eps), rtol=1e-12, atol=0)


def test_rho_warmup_starts_at_zero_and_ramps_linearly():
    net = make_net()
    x, y = make_data()
    opt = SAMFamily(net.parameters(), torch.optim.SGD, 0.4, variant="fsam", lr=0.1,
                    rho_warmup_steps=4)  # fmt: skip
    assert [opt.rho_at(t) for t in (0, 1, 2, 4, 9)] == pytest.approx([0.0, 0.1, 0.2, 0.4, 0.4])
    # the first step is the base step exactly (e = 0), the second perturbs with ρ/4
    twin = make_net()
    sgd = torch.optim.SGD(twin.parameters(), lr=0.1)
    opt.step(closure_for(net, x, y))
    sgd.zero_grad()
    torch.nn.functional.cross_entropy(twin(x), y).backward()
    sgd.step()
    torch.testing.assert_close(_flat(net), _flat(twin), rtol=0, atol=0)
    opt.step(closure_for(net, x, y))
    assert opt.last_info["rho"] == pytest.approx(0.1)
    assert opt.last_info["perturbation_norm"] == pytest.approx(0.1, rel=1e-12)


def test_global_norm_of_low_precision_tensors_is_taken_in_float32():
    vals = torch.linspace(0.01, 3.0, 4001, dtype=torch.float64)
    exact = float(vals.norm())
    for dtype in (torch.bfloat16, torch.float16):
        t = vals.to(dtype)
        got = float(ts.global_norm([t, None]))
        # the norm of the stored (rounded) values, to float32 accuracy; a norm accumulated or
        # returned in bf16 keeps 3 digits (fp16 overflows: the squares sum to ~1.2e4 > 65504/4)
        assert got == pytest.approx(float(t.double().norm()), rel=1e-6)
        assert got == pytest.approx(exact, rel=1e-2)
    mixed = ts.global_norm([vals[:10].to(torch.bfloat16), vals[10:]])
    assert float(mixed) == pytest.approx(
        math.hypot(float(vals[:10].to(torch.bfloat16).double().norm()), float(vals[10:].norm())),
        rel=1e-6,
    )


def test_adaptive_perturbation_closed_form():
    f64 = dict(dtype=torch.float64)
    w = [torch.tensor([1.0, -2.0, 0.0], **f64), torch.tensor([0.5], **f64)]
    g = [torch.tensor([4.0, 1.0, 7.0], **f64), torch.tensor([-2.0], **f64)]
    rho = 0.7
    e = ts.adaptive_perturbation(g, w, rho)
    # davda54/sam: e = ρ w² g / ‖|w| g‖ ; here |w| g = (4, 2, 0, -1), norm sqrt(21)
    n = math.sqrt(16 + 4 + 0 + 1)
    expect = [torch.tensor([rho * 4 / n, rho * 4 / n, 0.0], **f64),
              torch.tensor([rho * 0.25 * -2 / n], **f64)]  # fmt: skip
    for a, b in zip(e, expect, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-15, atol=0)
    # ‖T⁻¹e‖ = ρ on the entries with w ≠ 0
    inv = torch.cat([e[0][:2] / w[0][:2].abs(), e[1] / w[1].abs()])
    assert float(inv.norm()) == pytest.approx(rho, rel=1e-14)
    assert ts.adaptive_perturbation([None, g[1]], w, 0.1)[0] is None
    with pytest.raises(ValueError, match="`params` has 1"):
        ts.adaptive_perturbation(g, w[:1], 0.1)


def test_adaptive_is_rejected_where_it_is_not_defined():
    net = make_net()
    for kw in (dict(variant="lsam"), dict(variant="fsam", precondition=True)):
        with pytest.raises(ValueError, match="`adaptive=True`"):
            SAMFamily(net.parameters(), torch.optim.Adam, 0.1, adaptive=True, lr=0.1, **kw)
    with pytest.raises(TypeError, match="`adaptive`"):
        SAMFamily(net.parameters(), torch.optim.SGD, 0.1, adaptive="yes", lr=0.1)


# ---------------------------------------------------------------- davda54/sam closures


def _davda54_loop(opt, net, x, y, steps, *, backward_first=True, counter=None):
    """davda54/sam's README loop: backward at θ, then step(closure) whose closure calls backward."""

    def closure():
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        return loss

    for _ in range(steps):
        if backward_first:
            torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step(closure)
        opt.zero_grad()


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("backward_first", [True, False])
def test_davda54_closure_loop_equals_sam_and_asam(adaptive, backward_first):
    x, y = make_data(n=12)
    net = make_net()
    forwards = []
    net.register_forward_hook(lambda *a: forwards.append(1))
    opt = SAM(net.parameters(), torch.optim.SGD, rho=0.3, adaptive=adaptive, lr=0.1)
    _davda54_loop(opt, net, x, y, 3, backward_first=backward_first)
    ref = reference_train(make_net(), [(x, y)], "sam", 0.3, 3, lr=0.1, adaptive=adaptive)
    torch.testing.assert_close(_flat(net), _ref_flat(ref, net), rtol=1e-12, atol=1e-14)
    assert len(forwards) == 2 * 3  # two passes per step either way, as davda54/sam
    assert opt._closure_style == "backward"


def test_our_closure_with_a_stray_gradient_still_takes_our_step():
    x, y = make_data(n=12)
    a, b = make_net(), make_net()
    oa = SAM(a.parameters(), torch.optim.SGD, rho=0.3, lr=0.1)
    ob = SAM(b.parameters(), torch.optim.SGD, rho=0.3, lr=0.1)
    for _ in range(2):
        oa.step(closure_for(a, x, y))
        torch.nn.functional.cross_entropy(b(x), y).backward()  # e.g. a logged gradient
        ob.step(closure_for(b, x, y))
    torch.testing.assert_close(_flat(a), _flat(b), rtol=0, atol=0)
    assert ob._closure_style == "forward"


def test_a_backward_closure_is_rejected_for_the_logit_variants():
    m = _model()
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt = SAMFamily(m.parameters(), torch.optim.SGD, 0.1, variant="fsam", lr=0.1)
    before = copy.deepcopy(m.state_dict())

    def old_style():
        out = m(x)
        loss = ((out - y) ** 2).mean()
        loss.backward()
        return loss, out

    with pytest.raises(RuntimeError, match="called backward.*davda54"):
        opt.step(old_style)
    for k, v in m.state_dict().items():
        assert torch.equal(before[k], v)


# ---------------------------------------------------------------- mixed precision


def _amp_run(variant, amp=None, scaler=None, rho=0.2, steps=3, **kw):
    """Parameter change after ``steps`` SGD-based steps, the forward under ``amp`` autocast."""
    x, y = make_data(n=32, dtype=torch.float32)
    net = make_net(dtype=torch.float32)
    start = _flat(net)
    opt = SAMFamily(net.parameters(), torch.optim.SGD, rho, variant=variant, lr=0.5,
                    grad_scaler=scaler, **kw)  # fmt: skip

    def closure():
        with torch.autocast("cpu", dtype=amp or torch.bfloat16, enabled=amp is not None):
            z = net(x)
            return torch.nn.functional.cross_entropy(z.float(), y), z

    norms = []
    for _ in range(steps):
        opt.step(closure)
        norms.append(opt.last_info.get("grad_norm"))
        if scaler is not None:
            scaler.update()
    return _flat(net) - start, norms, opt


AMP_VARIANTS = [("sam", {}), ("fsam", {}), ("lsam", {}),
                ("angle_sam", {"angle_weights": (0.3, 0.8)}),
                ("sam", {"adaptive": True})]  # fmt: skip


@pytest.mark.parametrize("variant, kw", AMP_VARIANTS)
def test_fp16_with_grad_scaler_matches_float32(variant, kw):
    """fp16 autocast + GradScaler (scale 1024): the update within 5e-3 of float32's.

    fp16's unit roundoff is 4.9e-4; measured relative errors are 5e-4 to 1.2e-3 over 3 steps,
    while ρ = 0.2 moves the update by 17-31 % (so a variant path lost to the scaling fails).
    An unscaled pass-2 gradient would be 1024x too large, an unscaled pass 1 a hard error.
    """
    d32, n32, _ = _amp_run(variant, **kw)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    d16, n16, opt = _amp_run(variant, amp=torch.float16, scaler=scaler, **kw)
    assert float((d16 - d32).norm() / d32.norm()) < 5e-3
    assert n16 == pytest.approx(n32, rel=1e-2)  # the unscaled gradient's norm (not 1024x)
    d0, _, _ = _amp_run(variant, rho=0.0, **kw)
    assert float((d0 - d32).norm() / d32.norm()) > 0.1
    assert opt.skipped_steps == 0


@pytest.mark.parametrize("variant, kw", AMP_VARIANTS)
def test_bf16_autocast_matches_float32(variant, kw):
    """bf16 autocast, no scaler: the update within 5e-2 of float32's (measured <= 2e-2; bf16's
    unit roundoff is 3.9e-3), against a 17-31 % effect of ρ."""
    d32, _, _ = _amp_run(variant, **kw)
    dbf, _, _ = _amp_run(variant, amp=torch.bfloat16, **kw)
    assert float((dbf - d32).norm() / d32.norm()) < 5e-2


@pytest.mark.parametrize("when", [1, 2])
def test_fp16_overflow_skips_the_step_and_backs_the_scale_off(when):
    x, y = make_data(n=8, dtype=torch.float32)
    net = make_net(dtype=torch.float32)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    opt = SAMFamily(net.parameters(), torch.optim.SGD, 0.1, variant="fsam", lr=0.5,
                    grad_scaler=scaler)  # fmt: skip
    calls = {"n": 0}

    def closure():
        calls["n"] += 1
        with torch.autocast("cpu", dtype=torch.float16):
            z = net(x)
        if calls["n"] == when:  # this pass overflows
            z = z * torch.tensor(float("inf"))
        return torch.nn.functional.cross_entropy(z.float(), y), z

    before = _flat(net)
    opt.step(closure)
    scaler.update()
    torch.testing.assert_close(_flat(net), before, rtol=0, atol=0)
    assert opt.skipped_steps == 1 and opt.last_info == {"skipped": True, "overflow": True}
    assert scaler.get_scale() == 2.0**9  # backed off once
    assert all(p.grad is None for p in net.parameters())
    opt.step(closure)  # the next step goes through
    scaler.update()
    assert opt.sam_steps == 1 and not torch.equal(_flat(net), before)


def test_first_pass_with_a_scaler_needs_the_scaler_to_unscale_pass_one():
    x, y = make_data(n=8, dtype=torch.float32)
    net = make_net(dtype=torch.float32)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    opt = SAMFamily(net.parameters(), torch.optim.SGD, 0.1, variant="fsam", lr=0.5,
                    grad_scaler=scaler)  # fmt: skip
    c = closure_for(net, x, y)
    loss, logits = c()
    opt.first_pass(loss, logits, closure=c, backward=lambda t: scaler.scale(t).backward())
    before = _flat(net)
    with pytest.raises(RuntimeError, match="not unscaled"):
        opt.step()  # the Trainer's path runs scaler.step(opt), which unscales first
    torch.testing.assert_close(_flat(net), before, rtol=0, atol=0)
    loss, logits = c()
    opt.zero_grad()
    opt.first_pass(loss, logits, closure=c, backward=lambda t: scaler.scale(t).backward())
    scaler.step(opt)
    scaler.update()
    assert opt.sam_steps == 1
