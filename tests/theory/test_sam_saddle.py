"""theory/sam_saddle.py: the claims' verdicts, and that each claim sees a wrong number in sims.

The numerics themselves (sims/ansatz.py) are tested in tests/sims/test_ansatz.py.
"""

import numpy as np
import pytest

import sims.ansatz
import theory
from theory import sam_saddle as ss
from theory.verify import Verdict

EXPECTED = {
    "sam_multihead_ansatz_reduction": Verdict.VERIFIED,
    "sam_reduced_rate_and_map_numerics": Verdict.VERIFIED,
    "sam_headwise_uniform_slowdown": Verdict.VERIFIED_APPROX,
    "sam_exact_kick_region": Verdict.VERIFIED,
    "sam_shared_radius_background_delay": Verdict.VERIFIED_APPROX,
    "ansatz_gd_time_closed_form": Verdict.VERIFIED,
    "sam_shared_radius_fig1": Verdict.VERIFIED_APPROX,
    "sam_learned_head_bounce": Verdict.VERIFIED,
}


def test_every_claim_has_an_expectation():
    mine = {n for n, c in theory.load_all().items() if c.module == "theory.sam_saddle"}
    assert mine == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_claim_verdict(name):
    c = theory.load_all()[name]
    r = c.func()
    assert c.verdict(r) is EXPECTED[name], (r.residual, r.detail)
    assert r.conditions and r.detail


def _first_order_rate_doubled(v, sigma, kappa, c, exact, glob):
    g = sims.ansatz.ansatz_rate(v, sigma, kappa)
    n = np.sqrt(np.sum(g * g, axis=-1, keepdims=True))
    share = np.where(glob, g / np.where(n > 0, n, 1.0), np.sign(g))
    return np.where(exact, sims.ansatz.ansatz_rate(v - c * share, sigma, kappa),
                    g - 2 * c * share * sims.ansatz.ansatz_rate_prime(v, sigma, kappa))


@pytest.mark.parametrize(
    "target, wrong",
    [
        ("_rate", _first_order_rate_doubled),
        ("ansatz_rate", lambda v, s, k: s * np.asarray(v) ** 2 - k * np.asarray(v) ** 4),
    ],
)
def test_numerics_claim_sees_a_wrong_rate(monkeypatch, target, wrong):
    """Negative control: the claim pinning sims.ansatz must fail when the numbers are wrong."""
    monkeypatch.setattr(sims.ansatz, target, wrong)
    monkeypatch.setattr(ss, "ansatz_rate", sims.ansatz.ansatz_rate)
    assert not ss.check_rate_and_map_numerics().holds


def test_numerics_claim_sees_a_map_that_is_not_one_rate_step(monkeypatch):
    real = sims.ansatz._rate
    monkeypatch.setattr(sims.ansatz, "_rate", lambda *a: 1.01 * real(*a))
    monkeypatch.setattr(ss, "reduced_rate", lambda *a, **k: real_reduced(*a, **k))
    assert not ss.check_rate_and_map_numerics().holds


def real_reduced(v, sigma, kappa, rho, *, form="exact", normalization="global"):
    g = sims.ansatz.ansatz_rate(v, sigma, kappa)
    c = rho / np.sqrt(3)
    n = np.linalg.norm(g)
    share = g / n if normalization == "global" else np.sign(g)
    if form == "exact":
        return sims.ansatz.ansatz_rate(v - c * share, sigma, kappa)
    return g - c * share * sims.ansatz.ansatz_rate_prime(v, sigma, kappa)
