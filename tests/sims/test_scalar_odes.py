"""Scalar ODEs: closed form vs quadrature vs ODE integration, in units of tolerance (rule 6)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sims.scalar_odes import (
    METHODS,
    a_coefficient,
    attn_s_ode,
    closed_form_trajectory,
    escape_times,
    learned_value,
    learning_time,
    learning_times,
    merged_kq_ode,
    rho_hat,
    solve,
)

# Tolerances: quadrature is asked for 1e-13 relative; the ODE for rtol 1e-12 per step, whose
# global error on the event time grows with the number of steps, so 1e-9 is the promise.
TOL = {"quad": (1e-11, 0.0), "ode": (1e-9, 0.0)}


def err_units(got, ref, rtol, atol):
    return abs(got - ref) / (atol + rtol * abs(ref))


CASES = [
    # (ode, x0, x1)
    (attn_s_ode(0.4), 0.01, 0.6),
    (attn_s_ode(0.1, rho=0.005), 0.01, 1.0),
    (attn_s_ode(0.25, rho=0.0086), 0.01, 0.8),  # close to the bound: slow start
    (attn_s_ode(0.3, dynamics="full", a=a_coefficient(0.3, 1.0, 31)), 0.01, 1.2),
    (attn_s_ode(0.3, rho=0.004, dynamics="full", a=a_coefficient(0.3, 1.0, 31)), 0.01, 1.2),
    (attn_s_ode(0.05, rho=0.002, dynamics="full", a=a_coefficient(0.05, 1.0, 8)), 0.005, 1.0),
    (attn_s_ode(0.3, rho=0.012, sam_form="exact"), 0.01, 1.0),  # beyond (√3/2)ε, below √3ε
    (
        attn_s_ode(
            0.3, rho=0.004, dynamics="full", a=a_coefficient(0.3, 1.0, 31), sam_form="exact"
        ),
        0.01,
        1.2,
    ),
    (merged_kq_ode(2.0, 1.5), 0.01, 1.1),
    (merged_kq_ode(2.0, 1.5, rho=0.3), 0.01, 1.1),
    (merged_kq_ode(0.7, 3.0, rho=1.0), 1e-3, 0.45),
    (merged_kq_ode(2.0, 1.5, dynamics="truncated"), 0.01, 3.0),
    (merged_kq_ode(2.0, 1.5, rho=0.3, dynamics="truncated"), 0.01, 3.0),
]


@pytest.mark.parametrize("method", ["quad", "ode"])
@pytest.mark.parametrize("ode,x0,x1", CASES, ids=lambda v: getattr(v, "model", None) and
                         f"{v.model}-{v.dynamics}-{v.optimizer}")  # fmt: skip
def test_three_methods_agree(ode, x0, x1, method):
    ref = learning_time(ode, x0, x1, method="closed")
    got = learning_time(ode, x0, x1, method=method)
    assert ref.success and got.success
    assert err_units(got.time, ref.time, *TOL[method]) < 1.0, (got.time, ref.time)


def test_truncated_closed_forms_match_paper_formulas():
    """Eq. (23): t_GD = τ/λ² (1/ε − 1/u); t_SAM = τ/(λ²ρ̂) ln[(u−ρ̂)ε / (u(ε−ρ̂))] (C.4)."""
    lam, eps, u, rho, tau = 0.3, 0.01, 0.7, 0.006, 2.5
    rh = 2 * rho / math.sqrt(3)
    t_gd = tau / lam**2 * (1 / eps - 1 / u)
    t_sam = tau / (lam**2 * rh) * math.log((u - rh) * eps / (u * (eps - rh)))
    assert learning_time(attn_s_ode(lam, tau=tau), eps, u).time == pytest.approx(t_gd, rel=1e-14)
    assert learning_time(attn_s_ode(lam, rho=rho, tau=tau), eps, u).time == pytest.approx(
        t_sam, rel=1e-12
    )


def test_lemma_b4_reduces_to_logistic_at_rho0():
    """Theorem B.2 at ρ=0: t/τ = (1/2γ) ln[s(s0 − γ/α) / (s0 (s − γ/α))]."""
    g, al, s0, s1 = 1.7, 0.9, 1e-4, 1.5
    expected = 1 / (2 * g) * math.log(s1 * (s0 - g / al) / (s0 * (s1 - g / al)))
    got = learning_time(merged_kq_ode(g, al), math.sqrt(s0), math.sqrt(s1)).time
    assert got == pytest.approx(expected, rel=1e-12)


def test_escape_times_theorem_b3():
    g, al, s0, s1 = 2.0, 1.5, 1e-4, 0.5
    out = escape_times(g, al, 0.0, s0, s1)
    assert out["t_gd"] == pytest.approx(math.log(math.sqrt(s1 / s0)) / g, rel=1e-13)
    assert out["delta_t"] == pytest.approx(0.0, abs=1e-13)
    # SAM escapes faster, and the paper's first-order Δt approximation has O(ρ) relative error.
    rel = []
    for rho in (0.1, 0.05, 0.025):
        o = escape_times(g, al, rho, s0, s1)
        assert o["t_sam"] < o["t_gd"]
        rel.append(abs(o["delta_t_approx"] / o["delta_t"] - 1))
    slope = np.polyfit(np.log([0.1, 0.05, 0.025]), np.log(rel), 1)[0]
    assert slope == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize(
    "ode,x0,t_end",
    [
        (attn_s_ode(0.4), 0.05, 100.0),  # blows up at τ/(λ² v0) = 125
        (attn_s_ode(0.4, rho=0.02), 0.05, 150.0),  # blows up at ~167
        (attn_s_ode(0.4, rho=0.05), 0.05, 300.0),  # v0 < ρ̂: decays
        (merged_kq_ode(2.0, 1.5), 0.01, 4.0),
        (merged_kq_ode(2.0, 1.5, rho=0.2, dynamics="truncated"), 0.01, 2.0),
    ],
)
def test_trajectory_matches_closed_form(ode, x0, t_end):
    t = np.linspace(0, t_end, 50)
    sol = solve(ode, (0, t_end), x0, t_eval=t, rtol=1e-11, atol=1e-14)
    assert sol.success and sol.status == 0
    ref = closed_form_trajectory(ode, t, x0)
    assert np.max(err_units(sol.x, ref, 1e-8, 1e-12)) < 1.0


def test_truncated_gd_blow_up_is_a_terminal_event():
    ode = attn_s_ode(0.4)
    sol = solve(ode, (0, 200.0), 0.05, x_cap=1e4)
    assert sol.status == 1 and sol.t[-1] < 125.0  # blow-up time τ/(λ² v0) = 125
    assert np.isinf(closed_form_trajectory(ode, [130.0], 0.05)[0])


def test_sam_decays_below_threshold():
    rho = 0.01
    res = learning_time(attn_s_ode(0.4, rho=rho), 0.01, 0.5)
    assert res.status == "decays" and math.isinf(res.time) and not res.success
    assert "2ρ/√3" in res.message
    sol = solve(attn_s_ode(0.4, rho=rho), (0, 1e4), 0.01)
    assert sol.x[-1] < 0.01 * 1e-3  # really decays


def test_stationary_and_stalling():
    rho = 0.01
    assert learning_time(attn_s_ode(0.4, rho=rho), rho_hat(rho), 0.5).status == "stationary"
    lam, tr, n = 0.2, 1.0, 31
    vstar = learned_value(lam, tr, n)
    ode = attn_s_ode(lam, dynamics="full", a=a_coefficient(lam, tr, n))
    assert abs(ode.P(vstar)) < 1e-15  # eq. (3) is the fixed point of the full GD ODE
    res = learning_time(ode, 0.01, 1.01 * vstar)
    assert res.status == "stalls" and math.isinf(res.time)
    assert learning_time(merged_kq_ode(2.0, 1.5, rho=0.3), 0.01, 1.2).status == "stalls"


@given(
    lam=st.floats(0.01, 2.0),
    frac=st.floats(0.0, 0.95),
    eps=st.floats(1e-3, 0.1),
    c=st.floats(0.3, 0.9),
)
def test_closed_form_equals_quadrature_property(lam, frac, eps, c):
    rho = frac * math.sqrt(3) / 2 * eps
    u = c * lam ** (-1 / 3)
    if u <= 1.01 * eps:
        return
    for dyn in ("truncated", "full"):
        ode = attn_s_ode(lam, rho=rho, dynamics=dyn, a=a_coefficient(lam, 1.0, 31))
        ref = learning_time(ode, eps, u)
        got = learning_time(ode, eps, u, method="quad")
        assert ref.status == got.status
        if ref.success:
            assert err_units(got.time, ref.time, 1e-10, 0.0) < 1.0


def test_learning_times_vectorized_wrapper():
    lams = [0.4, 0.3, 0.2, 0.1]
    res = learning_times(lams, rho=0.004, eps=0.01, c=0.5)
    t = [r.time for r in res]
    assert all(np.diff(t) > 0)  # Step 1 of Thm 4.4: smaller λ, longer time


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: attn_s_ode(0.4, rho=-0.1), "`rho` must be a finite non-negative"),
        (lambda: attn_s_ode(-1.0), "`lam` must be a finite positive"),
        (lambda: attn_s_ode(0.4, dynamics="full"), "`a` is required"),
        (lambda: attn_s_ode(0.4, dynamics="exact"), "`dynamics` must be"),
        (lambda: learning_time(attn_s_ode(0.4), 0.5, 0.1), "`x1` must exceed `x0`"),
        (lambda: learning_time(attn_s_ode(0.4), 0.0, 0.1), "`x0` must be a finite positive"),
        (lambda: learning_time(attn_s_ode(0.4), 0.01, 0.1, method="rk4"), "`method` must be"),
        (lambda: a_coefficient(0.4, 1.0, 0), "`n_context`"),
        (lambda: merged_kq_ode(2.0, 0.0), "`alpha`"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_type_errors():
    with pytest.raises(TypeError, match="`lam` must be a real number"):
        attn_s_ode("0.4")
    with pytest.raises(TypeError, match="`ode` must be a PolynomialODE"):
        learning_time(lambda t, x: x, 0.1, 0.2)


def test_methods_registry():
    assert set(METHODS) == {"closed", "quad", "ode"}


@pytest.mark.parametrize("rho", [1e-290, 1e-12, 1e-7, 1e-4])
def test_regression_full_sam_tiny_rho_near_double_root(rho):
    """Found by Hypothesis: roots 0 and ≈ρ̂ of the full-SAM quintic nearly coincide for tiny ρ and
    the textbook partial fractions cancelled catastrophically (wrong by 1/x0 − 1/x1)."""
    ode = attn_s_ode(1.0, rho=rho, dynamics="full", a=a_coefficient(1.0, 1.0, 31))
    ref = learning_time(ode, 0.0625, 0.5, method="quad").time
    assert err_units(learning_time(ode, 0.0625, 0.5).time, ref, 1e-11, 0.0) < 1.0


def test_exact_sam_is_gd_between_shifted_endpoints():
    """Exact SAM on the ansatz ray: τ v̇ = g(v − ρ/√3), so t = t_GD(ε − ρ/√3 → u − ρ/√3)."""
    lam, rho, eps, u, tau = 0.3, 0.012, 0.01, 0.9, 1.5
    d = rho / math.sqrt(3)
    ode = attn_s_ode(lam, rho=rho, tau=tau, sam_form="exact")
    np.testing.assert_allclose(
        ode.P(np.array([0.2, 0.5])), lam**2 * (np.array([0.2, 0.5]) - d) ** 2
    )
    expected = tau / lam**2 * (1 / (eps - d) - 1 / (u - d))
    assert learning_time(ode, eps, u).time == pytest.approx(expected, rel=1e-13)
    # threshold is ρ < √3 ε, twice the first-order bound; below it exact SAM stalls (not decays)
    stall = learning_time(attn_s_ode(lam, rho=1.01 * math.sqrt(3) * eps, sam_form="exact"), eps, u)
    assert stall.status == "stalls" and "ρ/√3" in stall.message
    sol = solve(attn_s_ode(lam, rho=1.01 * math.sqrt(3) * eps, sam_form="exact"), (0, 1e6), eps)
    assert eps < sol.x[-1] < 1.01 * eps  # creeps up towards ρ/√3 and stays below it


def test_regression_newton_polish_diverged_at_double_root():
    """A raw Newton step at the exact-SAM double root ρ/√3 moved it above ε, so a reachable target
    was reported as stalling (seen as holes in the sweep at ρ/bound = 1.7)."""
    lam, rho = 0.07514087, 1.7 * math.sqrt(3) / 2 * 0.01
    ode = attn_s_ode(lam, rho=rho, sam_form="exact")
    assert np.all(ode.real_roots() == pytest.approx(rho / math.sqrt(3), rel=1e-6))
    assert learning_time(ode, 0.01, 0.5 * lam ** (-1 / 3)).success


def test_sam_form_validation():
    with pytest.raises(ValueError, match="`sam_form` must be"):
        attn_s_ode(0.3, rho=0.01, sam_form="second_order")


@pytest.mark.parametrize(
    "coeffs",
    [(0.0, -0.0123, 0.16), (0.0, 2.0, 0.45), (1e-3, -0.5, 2.0), (0.09, -0.6, 1.0),  # double
     (1.0, 0.2, 3.0), (0.0, 0.0, 2.0), (-4.0, 0.0, 1.0), (0.7, 0.3, 0.0)],
)  # fmt: skip
def test_closed_form_quadratic_roots_equal_companion_eigenvalues(coeffs):
    from sims.scalar_odes import PolynomialODE

    ode = PolynomialODE(coeffs, 1.0, "attn_s", "sam", "truncated", {})
    got = np.sort_complex(ode.roots())
    ref = np.sort_complex(np.polynomial.polynomial.polyroots(np.trim_zeros(coeffs, "b")))
    assert got.shape == ref.shape
    # companion eigenvalues lose ~sqrt(eps) at a double root; elsewhere they agree to ~1e-15
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-7 * max(1.0, np.abs(ref).max()))
    P = np.polynomial.polynomial.polyval(got, np.asarray(coeffs))
    assert np.all(np.abs(P) <= 1e-13 * np.abs(coeffs).max() * np.maximum(1, np.abs(got)) ** 2)


def test_a_coefficient_infinite_context_and_arrays():
    """``n_context = inf`` is the documented infinite-context limit a = λ² (it was refused)."""
    assert a_coefficient(0.4, 1.0, math.inf) == pytest.approx(0.16, rel=1e-15)
    lam = np.array([0.4, 0.3])
    np.testing.assert_allclose(a_coefficient(lam, 1.0, 31), [a_coefficient(0.4, 1.0, 31),
                                                              a_coefficient(0.3, 1.0, 31)],
                               rtol=1e-15)  # fmt: skip
    assert learned_value(0.4, 1.0, math.inf) == pytest.approx(0.4 ** (-1 / 3), rel=1e-14)
    with pytest.raises(ValueError, match="`n_context`"):
        a_coefficient(lam, 1.0, -1.0)
    with pytest.raises(ValueError, match="`lam`"):
        a_coefficient(np.array([0.4, 0.0]), 1.0, 31)


@pytest.mark.parametrize("dynamics", ["truncated", "full"])
@pytest.mark.parametrize("sam_form", ["first_order", "exact"])
def test_vectorized_times_equal_the_scalar_path_with_every_status(dynamics, sam_form):
    """attn_s_learning_times row by row against learning_time, on rows chosen to hit every
    status: reached, decays (ρ̂ > ε), stalls (full: target beyond the fixed point; exact SAM:
    start below ρ/√3) and stationary (truncated: start at the root ρ̂ or ρ/√3)."""
    from sims.scalar_odes import attn_s_learning_times

    lam = np.array([0.4, 0.3, 0.2, 0.1, 0.05, 0.3])
    eps = np.array([0.01, 0.01, 0.02, 0.01, 0.01, 0.01])
    rho = np.array([0.004, 0.0, 0.04, 0.0086, 0.002, 0.0])
    shift = rho_hat if sam_form == "first_order" else (lambda r: r / math.sqrt(3))
    eps[3] = shift(rho[3])  # stationary start
    a = a_coefficient(lam, 1.0, 31)
    u = 0.5 * lam ** (-1 / 3)
    if dynamics == "full":
        u[5] = 1.01 * learned_value(lam[5], 1.0, 31)  # beyond the full GD fixed point: stalls
    got = attn_s_learning_times(lam, eps, u, rho=rho, dynamics=dynamics,
                                a=a if dynamics == "full" else None, sam_form=sam_form)
    statuses = set()
    for i in range(lam.size):
        ode = attn_s_ode(lam[i], rho=rho[i], dynamics=dynamics,
                         a=a[i] if dynamics == "full" else None, sam_form=sam_form)
        ref = learning_time(ode, eps[i], u[i])
        assert got.status[i] == ref.status, (i, ref.message)
        assert got.time[i] == ref.time or abs(got.time[i] / ref.time - 1) < 1e-14
        statuses.add(ref.status)
    assert "reached" in statuses and len(statuses) >= 3, statuses
    with pytest.raises(ValueError, match="`x1` must exceed `x0`"):
        attn_s_learning_times(lam, u, eps)
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0"):
        attn_s_learning_times(lam, eps, u, rho=-1.0)
    with pytest.raises(ValueError, match="`a` is required"):
        attn_s_learning_times(lam, eps, u, dynamics="full")
