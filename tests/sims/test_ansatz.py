"""sims/ansatz.py: the reduced ATTN_S models against quadrature, hand computations and each other.

The claims of theory/sam_saddle.py and theory/upsampling.py pin the same functions to their
SymPy forms (tests/theory); here each function is checked on its own and inside its callers.
"""

import math

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp

from sims import ansatz as az


def test_gd_time_matches_quadrature_and_limits():
    for s, k, v0, v1 in (
        (4.96, 68.5, 2e-3, 0.33),
        (0.31, 2.0, 5e-3, 0.4),
        (3.0, 0.0, 0.01, 1.0),
        (2.0, 1e-6, 1e-3, 0.02),
    ):  # the last one takes the series branch
        ref = quad(lambda x, s=s, k=k: 1 / (s * x * x - k * x**5), v0, v1, epsrel=1e-12)[0]
        assert float(az.ansatz_gd_time(s, k, v0, v1)) == pytest.approx(ref, rel=1e-9)
    with pytest.raises(ValueError, match="below the fixed point"):
        az.ansatz_gd_time(1.0, 1.0, 0.1, 1.5)
    with pytest.raises(ValueError, match="need 0 < v0 < v1"):
        az.ansatz_gd_time(1.0, 1.0, 0.3, 0.2)


def test_calibrate_start_inverts_the_time():
    s, k = np.array([4.96, 2.79]), np.array([68.5, 40.0])
    v1 = np.cbrt(0.5 * s / k)
    v0 = np.array([1.7e-3, 2.4e-3])
    t = az.ansatz_gd_time(s, k, v0, v1)
    np.testing.assert_allclose(az.calibrate_start(t, s, k, v1), v0, rtol=1e-9)
    assert np.isnan(az.calibrate_start(np.array([np.nan, 1.0]), s, k, v1)[0])


def test_reduced_rate_by_hand():
    sig, kap = np.array([2.0, 0.5]), np.array([1.0, 0.2])
    v = np.array([0.3, 0.1])
    g = sig * v**2 - kap * v**5
    gp = 2 * sig * v - 5 * kap * v**4
    c = 0.01 / math.sqrt(3)
    share = g / np.linalg.norm(g)
    w = v - c * share
    np.testing.assert_allclose(
        az.reduced_rate(v, sig, kap, 0.01), sig * w**2 - kap * w**5, rtol=1e-14
    )
    np.testing.assert_allclose(
        az.reduced_rate(v, sig, kap, 0.01, form="first_order"), g - c * share * gp, rtol=1e-14
    )
    w = v - c
    np.testing.assert_allclose(
        az.reduced_rate(v, sig, kap, 0.01, normalization="headwise"),
        sig * w**2 - kap * w**5,
        rtol=1e-14,
    )
    np.testing.assert_allclose(az.reduced_rate(v, sig, kap, 0.01, form="first_order",
                                               normalization="headwise"),
                               g - c * gp, rtol=1e-14)  # fmt: skip
    np.testing.assert_allclose(az.reduced_rate(v, sig, kap, 0.0), g, rtol=0)
    with pytest.raises(ValueError, match="`form` must be one of"):
        az.reduced_rate(v, sig, kap, 0.01, form="second_order")


@pytest.mark.parametrize("form", az.FORMS)
@pytest.mark.parametrize("normalization", az.NORMALIZATIONS)
def test_reduced_map_is_the_euler_map_of_reduced_rate(form, normalization):
    """Every step of the map is v + 2η·reduced_rate(v): an independent loop over the rate gives
    the same first passages, step for step (issue 24: the map was only compared with itself)."""
    sig, kap = np.array([2.0, 0.9, 0.5]), np.array([1.0, 0.6, 0.2])
    thr = 0.6 * np.cbrt(sig / kap)
    v, eta, rho = np.array([0.02, 0.03, 0.025]), 0.05, 0.01  # 2ρ/√3 < v: every head learns
    hit = np.full(3, np.nan)
    for t in range(3000):
        hit[np.isnan(hit) & (v >= thr)] = t
        v = v + 2 * eta * az.reduced_rate(v, sig, kap, rho, form=form, normalization=normalization)
    got = az.reduced_map(
        np.array([[0.02, 0.03, 0.025]]),
        sig,
        kap,
        thr,
        rho=rho,
        eta=eta,
        n_steps=3000,
        form=form,
        normalization=normalization,
    )[0]
    assert np.all(np.isfinite(hit))
    np.testing.assert_array_equal(got, hit)


def test_reduced_map_variants_in_one_loop_equal_separate_loops():
    sig, kap = np.array([2.0, 0.5]), np.array([1.0, 0.2])
    thr = np.array([0.6, 0.6])
    v0 = np.full((3, 2), 0.02)
    one = az.reduced_map(
        v0,
        sig,
        kap,
        thr,
        rho=np.array([0.0, 0.01, 0.01]),
        eta=0.05,
        n_steps=20_000,
        form=["exact", "exact", "first_order"],
    )
    for i, (rho, form) in enumerate(((0.0, "exact"), (0.01, "exact"), (0.01, "first_order"))):
        sep = az.reduced_map(v0[:1], sig, kap, thr, rho=rho, eta=0.05, n_steps=20_000, form=form)
        np.testing.assert_array_equal(one[i], sep[0])
    assert np.all(one[1] > one[0])  # exact SAM from v = 0.02 ≫ c is slower than GD


def test_small_step_map_follows_the_flow_of_reduced_rate():
    """At a small step the first-order SAM map tracks solve_ivp's flow of the same rate."""
    sig, kap = np.array([2.0, 0.9]), np.array([1.0, 0.6])
    rho = 0.01
    sol = solve_ivp(lambda _, v: az.reduced_rate(v, sig, kap, rho, form="first_order"),
                    (0, 5.0), [0.2, 0.1], rtol=1e-11, atol=1e-13)  # fmt: skip
    eta = 1e-4
    v = np.array([0.2, 0.1])
    for _ in range(int(5.0 / (2 * eta))):
        v = v + 2 * eta * az.reduced_rate(v, sig, kap, rho, form="first_order")
    np.testing.assert_allclose(v, sol.y[:, -1], rtol=2e-4)


def test_figure1_coefficients_and_predicted_steps():
    lam, sig, kap, thr = az.figure1_coefficients()
    a = lam**2 * (1 + (1 + 1 / lam) / 31)
    np.testing.assert_allclose(sig, 31 * lam**2, rtol=1e-15)
    np.testing.assert_allclose(kap, 31**2 * lam * a, rtol=1e-15)
    np.testing.assert_allclose(thr**3, 0.5 * sig / kap, rtol=1e-14)
    f = az.figure1_ansatz()
    # GD steps: the flow time / 2η to within the Euler discretization (~0.5%)
    np.testing.assert_allclose(f["gd"], az.ansatz_gd_time(sig, kap, 2e-3, thr) / 0.04, rtol=0.01)
    assert np.all(f["exact/global"] > f["gd"]) and np.all(f["first_order/global"] > f["gd"])


def test_boost_condition_and_entropy_change():
    r = az.boost([1.0, 2.0, 3.0], 0.2, 1)
    np.testing.assert_allclose(r, [1.0, 1.4 / 1.2, 1.6 / 1.2])
    np.testing.assert_allclose(az.boost([1.0, 2.0], 0.25, 3), [1.0, 2.5 / 1.75])
    assert az.condition_holds(r) and not az.condition_holds(r[::-1])
    assert az.condition_holds([1.0, 0.999], rtol=0.002) and not az.condition_holds([1.0, 0.999])
    T = np.array([1.0, 2.0, 8.0])
    assert az.entropy_change(T, r) > 0 > az.entropy_change(T, r[::-1])
    assert az.entropy_change(T, [1.3, 1.3, 1.3]) == pytest.approx(0.0, abs=1e-15)
    p = (T / r) / (T / r).sum()
    q = T / T.sum()
    want = -(p * np.log(p)).sum() + (q * np.log(q)).sum()
    assert az.entropy_change(T, r) == pytest.approx(want, rel=1e-13)


def test_time_entropy_rows_and_nan():
    t = np.array([[1.0, 2.0, 3.0], [1.0, np.nan, 2.0]])
    h = az.time_entropy(t)
    p = t[0] / 6
    assert h[0] == pytest.approx(-(p * np.log(p)).sum(), rel=1e-14) and np.isnan(h[1])


def test_gd_time_series_branch_against_high_precision_quadrature():
    """The series branch (z1 < 1e-3) at its largest relative correction (v0 ≈ v1, z1 ≈ 9e-4),
    against 30-digit quadrature: the κ term is ~4e-10 of the time, resolved at rtol 1e-13."""
    import mpmath

    sigma, v0, v1 = 1.0, 0.49, 0.5
    kappa = (1.8e-3) ** 3  # z1 = (κ/σ)^(1/3) v1 = 9e-4
    with mpmath.workdps(30):
        ref = float(mpmath.quad(lambda x: 1 / (sigma * x**2 - kappa * x**5), [v0, v1]))
    pure = (1 / v0 - 1 / v1) / sigma
    assert abs(ref / pure - 1) > 1e-10  # the correction matters at the tolerance below
    assert float(az.ansatz_gd_time(sigma, kappa, v0, v1)) == pytest.approx(ref, rel=1e-13)


def test_doctests():
    import doctest

    result = doctest.testmod(az, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
