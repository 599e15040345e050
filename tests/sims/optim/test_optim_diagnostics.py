"""Diagnostics against closed forms: τ fractions, λ_max, Hutchinson traces, logit statistics."""

import math

import pytest
import torch

from sims.optim import diagnostics as dg
from tests.sims.optim.optim_helpers import make_data, make_net


def _linear_softmax(n=10, d=3, K=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (n,), generator=g)
    lin = torch.nn.Linear(d, K, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.randn(K, d, generator=g, dtype=torch.float64))
    # closed form: H[(k,j),(l,m)] = (1/n) Σ_i (diag p_i − p_i p_iᵀ)[k,l] x_ij x_im ; H_F = 0
    p = torch.softmax(x @ lin.weight.detach().T, -1)
    hout = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    H = torch.einsum("nkl,nj,nm->kjlm", hout, x, x).reshape(K * d, K * d) / n
    return lin, x, y, H


def test_linear_softmax_has_no_functional_path():
    lin, x, y, H = _linear_softmax()
    params, logits_fn = dg.functionalize(lin, x)
    tau = dg.tau_fractions(logits_fn, dg.cross_entropy_loss(y), params, check=True)
    assert tau.tau_logit == pytest.approx(1.0, abs=1e-12)
    assert abs(tau.tau_func) < 1e-24 and abs(tau.tau_cross) < 1e-12
    g = torch.func.grad(lambda p: dg.cross_entropy_loss(y)(logits_fn(p)))(params)["weight"]
    eps = g.flatten() / g.norm()
    assert tau.sharpness_grad_norm == pytest.approx(float((H @ eps).norm()), rel=1e-12)
    assert tau.curvature == pytest.approx(float(eps @ H @ eps), rel=1e-12)
    assert tau.check_residual < 1e-12


def test_linear_softmax_lambda_max_and_traces():
    lin, x, y, H = _linear_softmax()
    params, logits_fn = dg.functionalize(lin, x)
    loss = dg.cross_entropy_loss(y)
    exact = torch.linalg.eigvalsh(H)
    lm = dg.lambda_max(logits_fn, loss, params, iters=H.shape[0])
    assert lm == pytest.approx(float(exact[-1]), rel=1e-10)
    tr = dg.hessian_traces(logits_fn, loss, params, probes=200, seed=1)
    # H_F = 0: the paired per-probe difference vanishes to rounding
    assert abs(tr["tr_H_F"]) < 1e-12 and tr["se_H_F"] < 1e-12
    # Rademacher: one probe's variance is 2(‖H‖_F² − Σ H_ii²) exactly; 4σ/√n is a 1-in-10⁴ bound
    sigma = math.sqrt(2 * (float((H**2).sum()) - float((H.diagonal() ** 2).sum())) / 200)
    assert abs(tr["tr_H_L"] - float(H.trace())) < 4 * sigma
    assert tr["tr_H_G"] == pytest.approx(tr["tr_H_L"], rel=1e-12)
    assert 0.7 * sigma < tr["se_H_L"] < 1.3 * sigma  # the reported standard error is right


def _explicit(net, x, y):
    """H_L (autograd, row by row), H_G (explicit Jacobian), g at net's parameters (flattened)."""
    names = [n for n, _ in net.named_parameters()]
    shapes = [p.shape for _, p in net.named_parameters()]
    sizes = [p.numel() for _, p in net.named_parameters()]
    theta = torch.cat([p.detach().flatten() for p in net.parameters()])

    def unflat(v):
        return {n: c.view(s) for n, c, s in zip(names, torch.split(v, sizes), shapes, strict=True)}

    def logits(v):
        return torch.func.functional_call(net, unflat(v), (x,))

    def loss(v):
        return torch.nn.functional.cross_entropy(logits(v), y)

    H_L = torch.autograd.functional.hessian(loss, theta)
    J = torch.autograd.functional.jacobian(logits, theta)
    p = torch.softmax(logits(theta), -1)
    hout = (torch.diag_embed(p) - p[:, :, None] * p[:, None, :]) / len(x)
    H_G = torch.einsum("nkp,nkl,nlq->pq", J, hout, J)
    g = torch.autograd.functional.jacobian(loss, theta)
    return g, H_L, H_G


def test_tau_fractions_match_explicit_matrices():
    net = make_net()
    x, y = make_data()
    g, H_L, H_G = _explicit(net, x, y)
    eps = g / g.norm()
    dl, df = H_G @ eps, (H_L - H_G) @ eps
    tot = float((dl + df) @ (dl + df))
    params, logits_fn = dg.functionalize(net, x)
    tau = dg.tau_fractions(logits_fn, dg.cross_entropy_loss(y), params, check=True)
    assert tau.tau_logit == pytest.approx(float(dl @ dl) / tot, rel=1e-9)
    assert tau.tau_func == pytest.approx(float(df @ df) / tot, rel=1e-9)
    assert tau.tau_cross == pytest.approx(2 * float(dl @ df) / tot, rel=1e-9)
    assert tau.tau_logit + tau.tau_func + tau.tau_cross == pytest.approx(1.0, abs=1e-12)
    assert tau.tau_func > 1e-3 and tau.check_residual < 1e-10
    assert tau.grad_norm == pytest.approx(float(g.norm()), rel=1e-12)


def test_lanczos_vs_power_on_an_indefinite_spectrum():
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=torch.float64))
    lam = torch.cat([torch.tensor([3.0, -5.0]), torch.linspace(-1, 1, 28)]).double()
    A = Q @ torch.diag(lam) @ Q.T
    ritz = dg.lanczos(lambda v: A @ v, 30, iters=30)
    torch.testing.assert_close(ritz, torch.sort(lam).values, rtol=0, atol=1e-10)
    # largest algebraic from a short Krylov space (gap 3 vs 1): converged to 1e-6
    assert float(dg.lanczos(lambda v: A @ v, 30, iters=15)[-1]) == pytest.approx(3.0, abs=1e-6)
    # power iteration finds the largest magnitude, -5, not lambda_max = 3
    assert dg.power_iteration(lambda v: A @ v, 30, iters=500) == pytest.approx(-5.0, abs=1e-6)


def test_lambda_max_of_a_network_matches_eigvalsh():
    net = make_net()
    x, y = make_data()
    _, H_L, _ = _explicit(net, x, y)
    params, logits_fn = dg.functionalize(net, x)
    lm = dg.lambda_max(logits_fn, dg.cross_entropy_loss(y), params, iters=40)
    assert lm == pytest.approx(float(torch.linalg.eigvalsh(H_L)[-1]), rel=1e-8)


def test_lanczos_start_vector():
    g = torch.Generator().manual_seed(0)
    Q, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=torch.float64))
    lam = torch.cat([torch.tensor([3.0, -5.0]), torch.linspace(-1, 1, 28)]).double()
    A = Q @ torch.diag(lam) @ Q.T
    # an eigenvector spans an invariant subspace: one step gives its eigenvalue exactly
    ritz = dg.lanczos(lambda v: A @ v, 30, iters=10, v0=7.0 * Q[:, 0])
    assert ritz.numel() == 1 and float(ritz[0]) == pytest.approx(3.0, abs=1e-12)
    # any start: the top Ritz value is at least the Rayleigh quotient of the start vector
    v0 = Q[:, 0] + 0.5 * Q[:, 5]
    rq = float(v0 @ A @ v0 / (v0 @ v0))
    assert float(dg.lanczos(lambda v: A @ v, 30, iters=2, v0=v0)[-1]) >= rq - 1e-12
    for bad in (torch.zeros(30), torch.ones(29), torch.full((30,), float("nan"))):
        with pytest.raises(ValueError, match="`v0` must be a finite non-zero vector"):
            dg.lanczos(lambda v: A @ v, 30, v0=bad)


def test_lambda_max_from_the_gradient_bounds_the_curvature_along_it():
    net = make_net()
    x, y = make_data()
    _, H_L, _ = _explicit(net, x, y)
    params, logits_fn = dg.functionalize(net, x)
    loss = dg.cross_entropy_loss(y)
    exact = float(torch.linalg.eigvalsh(H_L)[-1])
    curv = dg.tau_fractions(logits_fn, loss, params).curvature  # ε*ᵀ H_L ε*
    for iters in (1, 2, 3):
        lm = dg.lambda_max(logits_fn, loss, params, iters=iters, start="gradient")
        assert curv - 1e-12 <= lm <= exact + 1e-10
    assert dg.lambda_max(logits_fn, loss, params, iters=1, start="gradient") == pytest.approx(
        curv, rel=1e-10
    )  # one iteration is the Rayleigh quotient of the start vector
    full = dg.lambda_max(logits_fn, loss, params, iters=40, start="gradient")
    assert full == pytest.approx(exact, rel=1e-8)
    with pytest.raises(ValueError, match="unknown `start`"):
        dg.lambda_max(logits_fn, loss, params, start="top")


def test_hutchinson_on_a_fixed_matrix():
    g = torch.Generator().manual_seed(2)
    B = torch.randn(40, 40, generator=g, dtype=torch.float64)
    A = B + B.T
    est, se = dg.hutchinson(lambda z: z @ A @ z, 40, probes=400, seed=3)
    sigma = math.sqrt(2 * (float((A**2).sum()) - float((A.diagonal() ** 2).sum())) / 400)
    assert abs(est - float(A.trace())) < 4 * sigma
    assert 0.8 * sigma < se < 1.2 * sigma
    # a diagonal matrix: Rademacher probes are exact
    D = torch.diag(torch.arange(5.0, dtype=torch.float64))
    assert dg.hutchinson(lambda z: z @ D @ z, 5, probes=3) == (10.0, 0.0)


def test_logit_statistics_closed_forms():
    V = 8
    z = torch.zeros(3, V, dtype=torch.float64)
    t = torch.tensor([0, 5, -100])
    s = dg.logit_statistics(z, t)
    assert s["entropy"] == pytest.approx(math.log(V))
    assert s["max_prob"] == pytest.approx(1 / V)
    assert s["one_minus_p_sq"] == pytest.approx(1 - 1 / V)
    assert s["logit_std"] == 0.0
    assert s["loss"] == pytest.approx(math.log(V)) and s["p_true"] == pytest.approx(1 / V)
    assert s["grad_sq"] == pytest.approx(1 - 1 / V)
    # a peaked two-class case by hand: p = (e/(e+1), 1/(e+1))
    z2 = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    p = math.e / (math.e + 1)
    s2 = dg.logit_statistics(z2, torch.tensor([1]))
    assert s2["entropy"] == pytest.approx(-(p * math.log(p) + (1 - p) * math.log(1 - p)))
    assert s2["one_minus_p_sq"] == pytest.approx(1 - p**2 - (1 - p) ** 2)
    assert s2["p_true"] == pytest.approx(1 - p) and s2["grad_sq"] == pytest.approx(2 * p**2)


def test_diagnostic_errors():
    lin, x, y, _ = _linear_softmax()
    params, logits_fn = dg.functionalize(lin, x)
    zero = {k: torch.zeros_like(v) for k, v in params.items()}
    with pytest.raises(ValueError, match="gradient norm is 0"):
        dg.tau_fractions(logits_fn, lambda z: (z * 0).sum(), zero)
    with pytest.raises(ValueError, match="`method`"):
        dg.lambda_max(logits_fn, dg.cross_entropy_loss(y), params, method="arnoldi")
    for p in lin.parameters():
        p.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        dg.functionalize(lin, x)
    with pytest.raises(ValueError, match="`probes`"):
        dg.hutchinson(lambda z: z @ z, 3, probes=1)


def test_hf_llama_lora_tau_fractions():
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=48, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32,
        attn_implementation="eager",
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(cfg).double()
    model = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"],
                                                       init_lora_weights=False))  # fmt: skip
    ids = torch.randint(0, 48, (2, 9))
    params, logits_fn = dg.functionalize(model, input_ids=ids[:, :-1])
    assert all("lora" in n for n in params)
    tau = dg.tau_fractions(logits_fn, dg.cross_entropy_loss(ids[:, 1:]), params, check=True)
    assert tau.tau_logit + tau.tau_func + tau.tau_cross == pytest.approx(1.0, abs=1e-12)
    # Llama computes its rotary tables in float32 even in a float64 model: float32-level residual
    assert tau.check_residual < 1e-6


def test_check_residual_reacts_to_a_wrong_functional_part(monkeypatch):
    """Negative control: the independent-HVP check must flag a wrong δ_func (a check that stayed
    at 0 whatever the split would let a broken τ through)."""
    net = make_net()
    x, y = make_data()
    params, logits_fn = dg.functionalize(net, x)
    loss = dg.cross_entropy_loss(y)
    good = dg.tau_fractions(logits_fn, loss, params, check=True)
    assert good.check_residual < 1e-10
    real = dg.hvp

    def off_by_ten_percent(f, p, v):  # δ_func comes from the surrogate's HVP
        out = real(f, p, v)
        return {k: 1.1 * t for k, t in out.items()} if f.__name__ == "surrogate" else out

    monkeypatch.setattr(dg, "hvp", off_by_ten_percent)
    bad = dg.tau_fractions(logits_fn, loss, params, check=True)
    # ‖0.1 δ_func‖/‖H_L ε*‖ with τ_func ≈ this net's share: far above rounding
    assert bad.check_residual == pytest.approx(0.1 * math.sqrt(good.tau_func), rel=0.2)
    assert bad.check_residual > 1e-3


def test_hessian_traces_of_a_network_with_a_functional_part_match_the_same_probes_by_hand():
    """On TinyNet (H_F ≠ 0; the linear-softmax test has H_F = 0, where tr(H_L − H_G) and
    tr(H_G − H_L) agree): the estimates equal the explicit matrices on the same Rademacher
    probes (the generator replayed), to rounding."""
    net = make_net()
    x, y = make_data()
    _, H_L, H_G = _explicit(net, x, y)
    params, logits_fn = dg.functionalize(net, x)
    probes, seed = 20, 3
    tr = dg.hessian_traces(logits_fn, dg.cross_entropy_loss(y), params, probes=probes, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    zs = [torch.randint(0, 2, (H_L.shape[0],), generator=gen).double() * 2 - 1
          for _ in range(probes)]  # fmt: skip
    ql = torch.tensor([float(z @ H_L @ z) for z in zs], dtype=torch.float64)
    qg = torch.tensor([float(z @ H_G @ z) for z in zs], dtype=torch.float64)
    assert tr["tr_H_L"] == pytest.approx(float(ql.mean()), rel=1e-9)
    assert tr["tr_H_G"] == pytest.approx(float(qg.mean()), rel=1e-9)
    assert tr["tr_H_F"] == pytest.approx(float((ql - qg).mean()), rel=1e-8)
    assert tr["se_H_F"] == pytest.approx(float((ql - qg).std() / math.sqrt(probes)), rel=1e-8)
    assert abs(tr["tr_H_F"]) > 0.05 * abs(tr["tr_H_G"])  # the functional part is not 0 here


def test_lanczos_keeps_ritz_values_inside_the_spectrum_with_a_repeated_eigenvalue():
    """40 copies of λ = 1 and 80 eigenvalues down to 1e-15, the full Krylov dimension: without
    the second reorthogonalization the lost orthogonality makes ghost Ritz values (up to 40)."""
    g = torch.Generator().manual_seed(0)
    spec = torch.cat([torch.ones(40), torch.logspace(-1, -15, 80)]).double()
    Q, _ = torch.linalg.qr(torch.randn(120, 120, generator=g, dtype=torch.float64))
    A = Q @ torch.diag(spec) @ Q.T
    ritz = dg.lanczos(lambda v: A @ v, 120, iters=120)
    assert float(ritz.max()) == pytest.approx(1.0, abs=1e-12)
    assert float(ritz.min()) > -1e-12
