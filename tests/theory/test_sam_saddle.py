"""theory/sam_saddle.py: claims, and the numeric helpers against independent computations."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

import theory
from theory import sam_saddle as ss
from theory.verify import Verdict

EXPECTED = {
    "sam_multihead_ansatz_reduction": Verdict.VERIFIED,
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


def test_gd_time_matches_quadrature_and_limits():
    for s, k, v0, v1 in ((4.96, 68.5, 2e-3, 0.33), (0.31, 2.0, 5e-3, 0.4), (3.0, 0.0, 0.01, 1.0)):
        ref = quad(lambda x, s=s, k=k: 1 / (s * x * x - k * x**5), v0, v1, epsrel=1e-12)[0]
        assert float(ss.ansatz_gd_time(s, k, v0, v1)) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match="below the fixed point"):
        ss.ansatz_gd_time(1.0, 1.0, 0.1, 1.5)
    with pytest.raises(ValueError, match="need 0 < v0 < v1"):
        ss.ansatz_gd_time(1.0, 1.0, 0.3, 0.2)


def test_calibrate_start_inverts_the_time():
    s, k = np.array([4.96, 2.79]), np.array([68.5, 40.0])
    v1 = np.cbrt(0.5 * s / k)
    v0 = np.array([1.7e-3, 2.4e-3])
    t = ss.ansatz_gd_time(s, k, v0, v1)
    np.testing.assert_allclose(ss.calibrate_start(t, s, k, v1), v0, rtol=1e-9)
    assert np.isnan(ss.calibrate_start(np.array([np.nan, 1.0]), s, k, v1)[0])


def test_reduced_rate_by_hand():
    sig, kap = np.array([2.0, 0.5]), np.array([1.0, 0.2])
    v = np.array([0.3, 0.1])
    g = sig * v**2 - kap * v**5
    gp = 2 * sig * v - 5 * kap * v**4
    c = 0.01 / math.sqrt(3)
    share = g / np.linalg.norm(g)
    w = v - c * share
    np.testing.assert_allclose(ss.reduced_rate(v, sig, kap, 0.01), sig * w**2 - kap * w**5,
                               rtol=1e-14)
    np.testing.assert_allclose(ss.reduced_rate(v, sig, kap, 0.01, form="first_order"),
                               g - c * share * gp, rtol=1e-14)
    w = v - c
    np.testing.assert_allclose(ss.reduced_rate(v, sig, kap, 0.01, normalization="headwise"),
                               sig * w**2 - kap * w**5, rtol=1e-14)
    np.testing.assert_allclose(ss.reduced_rate(v, sig, kap, 0.0), g, rtol=0)
    with pytest.raises(ValueError, match="`form` must be one of"):
        ss.reduced_rate(v, sig, kap, 0.01, form="second_order")


def test_reduced_map_variants_in_one_loop_equal_separate_loops():
    sig, kap = np.array([2.0, 0.5]), np.array([1.0, 0.2])
    thr = np.array([0.6, 0.6])
    v0 = np.full((3, 2), 0.02)
    one = ss.reduced_map(v0, sig, kap, thr, rho=np.array([0.0, 0.01, 0.01]), eta=0.05,
                         n_steps=20_000, form=["exact", "exact", "first_order"])
    for i, (rho, form) in enumerate(((0.0, "exact"), (0.01, "exact"), (0.01, "first_order"))):
        sep = ss.reduced_map(v0[:1], sig, kap, thr, rho=rho, eta=0.05, n_steps=20_000, form=form)
        np.testing.assert_array_equal(one[i], sep[0])
    assert np.all(one[1] > one[0])  # exact SAM from v = 0.02 ≫ c is slower than GD
