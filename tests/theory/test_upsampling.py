"""theory/upsampling.py: claims and helpers against closed forms and Monte Carlo."""

import numpy as np
import pytest
import sympy as sp

import theory
from theory import upsampling as up
from theory.verify import Verdict

EXPECTED = {
    "upsampling_ansatz_rates": Verdict.VERIFIED_APPROX,
    "upsampling_boost_formula": Verdict.VERIFIED,
    "upsampling_query_rule_enrichment": Verdict.VERIFIED,
    "upsampling_target_rule_enrichment": Verdict.VERIFIED,
    "upsampling_entropy_condition": Verdict.VERIFIED,
    "upsampling_paper_recipe_toy": Verdict.VERIFIED_APPROX,
}


def test_every_claim_has_an_expectation():
    mine = {n for n, c in theory.load_all().items() if c.module == "theory.upsampling"}
    assert mine == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_claim_verdict(name):
    c = theory.load_all()[name]
    r = c.func()
    assert c.verdict(r) is EXPECTED[name], (r.residual, r.detail)
    assert r.conditions and r.detail


def test_gaussian_expectation_moments():
    x, y = sp.symbols("x y", real=True)
    assert up.gaussian_expectation(x**4 * y**2 + x * y + 3, [x, y]) == 3 * 1 + 3
    assert up.gaussian_expectation(x**6, [x]) == 15


def test_y2_rule_enrichment_by_monte_carlo():
    """m_i = 3 + 6λ_i/trΣ for ω ∝ y² (claim), against plain sampling of (w, x_q)."""
    rng = np.random.default_rng(0)
    lam = np.array([0.5, 0.3, 0.2])
    n = 2_000_000
    w = rng.standard_normal((n, 3))
    x = rng.standard_normal((n, 3)) * np.sqrt(lam)
    y = (w * x).sum(1)
    sig = y[:, None] * lam * w * x  # E[y β_i x_qi | w, x_q] with E[Σ̂] = Σ
    m = (y[:, None] ** 2 * sig).mean(0) / ((y**2).mean() * sig.mean(0))
    # heavy tails (8th moments): relative MC error ~1e-2 at 2e6 samples
    np.testing.assert_allclose(m, 3 + 6 * lam / lam.sum(), rtol=0.05)


def test_target_threshold_rule_by_sampling():
    lam = np.array([0.4, 0.3, 0.2, 0.1])
    m = up.target_rule_enrichment(lam, 0.3, n_samples=200_000)
    rng = np.random.default_rng(3)
    n = 1_000_000
    w = rng.standard_normal((n, 4))
    x = rng.standard_normal((n, 4)) * np.sqrt(lam)
    y = (w * x).sum(1)
    sel = np.abs(y) > np.quantile(np.abs(y), 0.7)
    sig = y[:, None] * lam * w * x
    m_mc = sig[sel].mean(0) / sig.mean(0)
    np.testing.assert_allclose(m, m_mc, rtol=0.03)
    assert np.all(np.diff(m) < 0)


def test_boost_claim_sees_a_wrong_boost(monkeypatch):
    monkeypatch.setattr(up, "boost", lambda m, pi, f=1: (1 + f * pi * np.asarray(m)) / (1 + pi))
    assert not up.check_boost_formula().holds
