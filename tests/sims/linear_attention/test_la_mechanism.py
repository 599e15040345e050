"""sims/ansatz.py's reduced model (derived in theory/sam_saddle.py) reproduces the full model."""

import jax.numpy as jnp
import numpy as np
import pytest

from sims.ansatz import reduced_map
from sims.linear_attention.data import make_covariance
from sims.linear_attention.mechanism import (
    EscapeConfig,
    background_delay,
    escape_experiment,
    head_assignment,
    predict_from_gd,
)
from sims.linear_attention.models import AttnSParams, ansatz_params
from sims.linear_attention.stats import (
    a_coefficients,
    eigh_desc,
    fixed_point_components,
    population_moments,
)
from sims.linear_attention.train import train_runs

OPT = {"gd": ("sam", 0.0, "exact", "global"), "sam": ("sam", 1e-3, "exact", "global"),
       "sam_flow": ("sam_flow", 1e-3, "first_order", "global"),
       "sam_headwise": ("sam_headwise", 1e-3, "exact", "headwise")}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("method", list(OPT))
def test_full_model_on_multihead_ansatz_equals_reduced_map(method):
    """All heads at ε on their own eigen-directions (d = 3): the learning steps agree.

    Any error in the trainer's SAM (sign, 1/√3, global vs per-head norm, first vs exact form)
    shifts these steps by far more than the ±1 step allowed for round-off at a threshold.
    """
    opt, rho, form, norm = OPT[method]
    d, n, s, eta = 3, 31, 31.0, 0.05
    cov = make_covariance("linear", d, rotate=False)
    lam, e = eigh_desc(cov)
    fp = fixed_point_components(cov, n, scale=s)
    a = a_coefficients(cov, n)
    eps = 0.004
    p = ansatz_params(e, np.full(d, eps), n_heads=d)
    p0 = AttnSParams(*(jnp.asarray(x)[None] for x in p))
    res = train_runs(p0, population_moments(cov, n, scale=s), 6000, optimizer=opt,
                     learning_rate=eta, rho=rho, eigvecs=e, record_every=6000, log_every=6000,
                     component_targets=0.5 * fp)  # fmt: skip
    full = res.ds.first_component_step.values[0]
    red = reduced_map(np.full((1, d), eps), s * lam**2, s**2 * lam * a, np.cbrt(0.5 * fp),
                      rho=rho, eta=eta, n_steps=6000, form=form, normalization=norm)[0]
    assert np.all(np.isfinite(full))
    if norm == "global" and rho > 0:
        # learned heads bounce under global SAM (claim sam_learned_head_bounce) and the bounce
        # amplifies round-off, which differs between the two codes: allow 2%
        np.testing.assert_allclose(full, red, rtol=0.02)
    else:
        np.testing.assert_allclose(full, red, atol=1.0)


def test_calibration_reproduces_gd_times():
    lam = np.array([0.4, 0.3, 0.2, 0.1])
    a = lam**2 * (1 + (1 + 1 / lam) / 31)
    sig, kap = 31 * lam**2, 31**2 * lam * a
    thr = np.cbrt(0.5 * sig / kap)
    eps = np.array([[2e-3, 1.5e-3, 2.5e-3, 2e-3], [1e-3, 3e-3, 2e-3, 2.2e-3]])
    gd = reduced_map(eps, sig, kap, thr, rho=0.0, eta=0.02, n_steps=200_000)
    out = predict_from_gd(gd, sig, kap, thr, rho=1e-3, eta=0.02, n_steps=200_000)
    # calibration inverts the continuous-time GD ODE; the discrete map differs by ~0.3%
    np.testing.assert_allclose(out["eps"], eps, rtol=0.01)
    np.testing.assert_allclose(out["gd"], gd, rtol=0.005)
    assert out["sam"][0, 0] > out["gd"][0, 0] * 1.2  # the leader of run 0 is slowed most
    assert np.all(out["sam_headwise"] > out["gd"])  # head-wise SAM slows every feature


def test_head_assignment():
    """A rotated eigenbasis and |k| ≠ |q| per feature (an identity basis and k = ±q hid a
    transposed basis or a k·k for k·q)."""
    e, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((3, 3)))
    v = np.array([0.5, 0.0, -0.4])
    kc = np.zeros((3, 3))  # head × feature coordinates in the eigenbasis
    qc = np.zeros((3, 3))
    kc[0, 1], qc[0, 1] = 0.9, 0.3  # head 0 carries feature 1: |v k q| = 0.135
    kc[2, 0], qc[2, 0] = -0.2, 0.9  # head 2 carries feature 0 (any signs): 0.072
    kc[1, 2], qc[1, 2] = 0.1, 0.1  # head 1 aligned with feature 2 but v = 0
    kc[0, 2], qc[0, 2] = 0.3, 0.05  # head 0 on feature 2: 0.0075
    kc[2, 2], qc[2, 2] = 0.02, 0.5  # head 2 on feature 2: 0.004
    kc[0, 0], qc[0, 0] = 0.05, 0.6  # head 0 on feature 0: 0.015 < 0.072
    k = (kc @ e.T)[:, None, :]  # back to input coordinates: k_h = Σ_a kc[h, a] e_a
    q = (qc @ e.T)[:, None, :]
    np.testing.assert_array_equal(head_assignment(v, k, q, e), [2, 0, 0])
    # a head with a large key but a tiny query on feature 1: k·q ignores it, k·k would not
    kc2, qc2 = kc.copy(), qc.copy()
    kc2[2, 1], qc2[2, 1] = 1.2, 0.01  # head 2: |v k q| = 0.005 (k·k would give 0.58 > 0.41)
    k2, q2 = (kc2 @ e.T)[:, None, :], (qc2 @ e.T)[:, None, :]
    np.testing.assert_array_equal(head_assignment(v, k2, q2, e), [2, 0, 0])
    batched = head_assignment(np.stack([v, v]), np.stack([k, k2]), np.stack([q, q2]),
                              np.stack([e, e]))  # fmt: skip
    np.testing.assert_array_equal(batched, [[2, 0, 0], [2, 0, 0]])


def test_background_delay_limits():
    d0 = background_delay(5.0, 2e-3, 0.4, 0.0, 1e-3)
    ch = 2e-3 / np.sqrt(3)
    assert d0 == pytest.approx(ch / 10 * (1 / 4e-6 - 1 / 0.16), rel=1e-12)
    assert background_delay(5.0, 2e-3, 0.4, 1e-12, 1e-3) == pytest.approx(d0, rel=1e-6)
    assert background_delay(5.0, 2e-3, 0.4, 1e-3, 1e-3) < 0.2 * d0


@pytest.mark.slow
def test_escape_experiment_full_model_vs_reduced_map():
    cfg = EscapeConfig(d=3, saddles=(0, 1), backgrounds=(0.0, 3e-2), rhos=(1e-3,), eps=0.01,
                       num_steps=2001)  # fmt: skip
    esc = escape_experiment(cfg)
    full, red = esc.escape_step.values, esc.reduced_step.values
    assert np.all(np.isfinite(full))
    np.testing.assert_allclose(full, red, rtol=0.02)  # round-off-seeded bouncing: see claim
    assert np.all(full[:, :, 1] > full[:, :, 0])  # SAM escapes later than GD
    # a background gradient shrinks SAM's delay
    assert (full[0, 1, 1] - full[0, 1, 0]) < (full[0, 0, 1] - full[0, 0, 0])
    with pytest.raises(ValueError, match="`saddles` must lie in"):
        EscapeConfig(d=3, saddles=(2,))
