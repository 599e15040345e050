"""Numeric ODE coefficients of ``sims.scalar_odes`` pinned to the symbolic ones of ``theory``.

``sims.scalar_odes`` stores every ODE as polynomial coefficients typed in by hand; the three
learning-time methods (closed form, quadrature, ODE) all integrate those same coefficients, so
they agree with each other even when a coefficient is wrong. Here each coefficient is compared
with the expression that ``theory/`` derives (and verifies against the attention model in its
claims: ``sam_flow_full``, ``gd_flow_full``, ``sam_first_order_series``, ``sam_exact_flow_ansatz``,
``thm_b2``), at parameters where every term matters (ρ > 0, a ≠ λ², γ ≠ α).
"""

import math

import pytest
import sympy as sp

from sims.scalar_odes import a_coefficient, attn_s_ode, merged_kq_ode
from theory import merged_kq, sam_flow, wishart

V, U = sp.symbols("v u", positive=True)
# Generic parameters (no coefficient vanishes or coincides with another); ρ is not small, so a
# wrong ρ-term changes the polynomial by far more than the tolerance.
PARAMS = [
    dict(lam=0.37, a=0.21, rho=0.013),
    dict(lam=1.7, a=3.1, rho=0.25),
    dict(lam=0.05, a=a_coefficient(0.05, 1.0, 8.0), rho=0.002),
]


def coeffs_of(expr, var, n):
    """Ascending coefficients of a polynomial SymPy expression, padded to length ``n``."""
    c = sp.Poly(sp.expand(expr), var).all_coeffs()[::-1]
    return [float(x) for x in c] + [0.0] * (n - len(c))


def assert_same_polynomial(ode, expr, var):
    n = max(len(ode.coeffs), sp.Poly(sp.expand(expr), var).degree() + 1)
    want = coeffs_of(expr, var, n)
    got = list(ode.coeffs) + [0.0] * (n - len(ode.coeffs))
    scale = max(abs(w) for w in want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        # coefficients are products of a few floats: agreement to 1e-13 of the largest one
        assert abs(g - w) <= 1e-13 * scale, f"coefficient of {var}^{k}: sims {g!r} vs theory {w!r}"


@pytest.mark.parametrize("p", PARAMS)
def test_full_sam_coefficients_equal_the_c2_expression(p):
    ode = attn_s_ode(p["lam"], rho=p["rho"], dynamics="full", a=p["a"])
    assert_same_polynomial(ode, sam_flow.sam_flow_full(p["lam"], p["a"], V, p["rho"]), V)


@pytest.mark.parametrize("p", PARAMS)
def test_full_gd_coefficients_equal_the_c2_expression(p):
    ode = attn_s_ode(p["lam"], dynamics="full", a=p["a"])
    assert_same_polynomial(ode, sam_flow.gd_flow_full(p["lam"], p["a"], V), V)


@pytest.mark.parametrize("p", PARAMS)
def test_truncated_coefficients_equal_eqs_9_and_10(p):
    assert_same_polynomial(
        attn_s_ode(p["lam"], rho=p["rho"]), sam_flow.sam_flow_eq9(p["lam"], V, p["rho"]), V
    )
    assert_same_polynomial(attn_s_ode(p["lam"]), sam_flow.gd_flow_eq10(p["lam"], V), V)


@pytest.mark.parametrize("p", PARAMS)
@pytest.mark.parametrize("dynamics", ["truncated", "full"])
def test_exact_sam_is_the_gd_flow_at_the_shifted_point(p, dynamics):
    # theory claim `sam_exact_flow_ansatz`: τv̇ = g(v − ρ/√3), g the GD right-hand side
    g = sam_flow.gd_flow_full if dynamics == "full" else (lambda lam, a, v: lam**2 * v**2)
    shifted = g(p["lam"], p["a"], V - p["rho"] / math.sqrt(3))
    ode = attn_s_ode(p["lam"], rho=p["rho"], dynamics=dynamics, a=p["a"], sam_form="exact")
    assert_same_polynomial(ode, shifted, V)


def test_a_coefficient_equals_the_wishart_eigenvalue():
    for lam, tr, n in [(0.4, 1.0, 31), (0.05, 2.5, 8), (3.0, 7.0, 2)]:
        want = float(wishart.wishart_eigenvalue(sp.Float(lam), sp.Float(tr), sp.Float(n)))
        assert a_coefficient(lam, tr, n) == pytest.approx(want, rel=1e-14)


@pytest.mark.parametrize(("gamma", "alpha", "rho"), [(2.0, 1.5, 0.3), (0.7, 3.0, 1.1)])
def test_merged_kq_ode_is_theorem_b2_in_u(gamma, alpha, rho):
    # τṡ = f(s) with s = u² gives τu̇ = f(u²)/(2u): the u-polynomial sims integrates
    full = sp.expand(merged_kq.sam_ode_rhs(U**2, gamma, alpha, rho) / (2 * U))
    assert_same_polynomial(merged_kq_ode(gamma, alpha, rho=rho), full, U)
    # Theorem B.3 / Lemma B.5 truncation: drop the −2αs² term of τṡ
    trunc = sp.expand((merged_kq.sam_ode_rhs(U**2, gamma, alpha, rho) + 2 * alpha * U**4) / (2 * U))
    assert_same_polynomial(merged_kq_ode(gamma, alpha, rho=rho, dynamics="truncated"), trunc, U)
