"""The checks can fail: feed perturbed expressions (wrong constants, signs, indices) to the same
checking functions and see them refuted."""

from __future__ import annotations

import sympy as sp

from theory import attention_model as am
from theory import entropy as en
from theory import merged_kq as mk
from theory import sam_flow as sf
from theory import wishart as wi
from theory.verify import is_zero

SQ3 = sp.sqrt(3)


def test_wishart_wrong_coefficient_fails():
    S = wi.symmetric_matrix(2)
    N = sp.Symbol("N", positive=True)
    wrong = S**2 + (2 * S + S.trace() * sp.eye(2)) * S / N
    assert not is_zero(wi.wishart_second_moment(S, N) - wrong).holds


def test_gd_flow_wrong_power_fails():
    r = sf.check_flow_against_model(lambda lam, a, v, rho: lam**2 * v**2 - lam * a * v**4,
                                    which="gd")
    assert not r.holds


def test_sam_flow_wrong_constant_fails():
    def wrong(lam, a, v, rho):  # 6 instead of 5 in the v⁴ term
        return sf.gd_flow_full(lam, a, v) + rho / SQ3 * (6 * lam * a * v**4 - 2 * lam**2 * v)

    assert not sf.check_flow_against_model(wrong, which="sam").holds


def test_sam_flow_wrong_rho_scale_fails():
    def wrong(lam, a, v, rho):  # ρ/(2√3) instead of ρ/√3
        return sf.gd_flow_full(lam, a, v) + rho / (2 * SQ3) * (5 * lam * a * v**4 - 2 * lam**2 * v)

    assert not sf.check_flow_against_model(wrong, which="sam").holds


def test_truncation_wrong_constant_fails():
    lam, a, v, rho = sp.symbols("lam a v rho", positive=True)
    wrong9 = lam**2 * v**2 - rho / SQ3 * lam**2 * v
    assert not sf.check_truncation(sf.sam_flow_full(lam, a, v, rho), wrong9, v, 3).holds
    assert sf.check_truncation(sf.sam_flow_full(lam, a, v, rho),
                               sf.sam_flow_eq9(lam, v, rho), v, 3).holds


def test_implicit_solution_wrong_prefactor_fails():
    s, s0, g, a, r = sp.symbols("s s0 gamma alpha rho", positive=True)
    good = mk.implicit_time_b2(s, s0, g, a, r)
    wrong = good + sp.log(s / s0) / (2 * g)  # 1/γ instead of 1/(2γ)
    assert mk.check_implicit_solution(good, mk.sam_ode_rhs(s, g, a, r)).holds
    assert not mk.check_implicit_solution(wrong, mk.sam_ode_rhs(s, g, a, r)).holds
    # the GD right-hand side does not solve the SAM implicit form either
    assert not mk.check_implicit_solution(good, mk.gd_ode_rhs(s, g, a)).holds


def test_gradient_with_transposed_index_fails():
    assert not am.check_gradients(am.gradient_printed).holds
    assert am.check_gradients(am.gradient_corrected).holds


def test_hessian_with_wrong_factor_fails():
    def wrong(Sigma, E2, heads, i, corrected=False):
        b = am.hessian_blocks_printed(Sigma, E2, heads, i, corrected=True)
        b["vv"] = 3 * b["vv"]
        return b

    r = am.check_hessian_blocks(corrected=True, printed_fn=wrong)
    assert not r.holds and "H_vv:WRONG" in r.detail


def test_lemma_c2_fails_for_decreasing_weights():
    assert not en.check_lemma_c2(n_trials=100, weight_order="decreasing").holds
    assert en.check_lemma_c2(n_trials=100).holds


def test_learning_times_match_quadrature_of_the_odes():
    # t^GD, t^SAM of eq. (23) against direct quadrature of the inverse ODEs (9)-(10)
    import mpmath as mp

    lams, c, eps, rho = [2.0, 1.0, 0.5], 0.8, 0.05, 0.02
    # 30 digits here, whatever precision an earlier test in this worker left mpmath at (the
    # 1e-20 tolerance needs them; at the default 15 digits the quadrature itself is off by 1e-15)
    with mp.workdps(30):
        tg, ts = en.learning_times(lams, c, eps, rho)
        rh = 2 * mp.mpf(rho) / mp.sqrt(3)
        for lam, a, b in zip(lams, tg, ts, strict=True):
            u = mp.mpf(c) * mp.mpf(lam) ** (-mp.mpf(1) / 3)
            qa = mp.quad(lambda v, lam=lam: 1 / (lam**2 * v**2), [eps, u])
            qb = mp.quad(lambda v, lam=lam: 1 / (lam**2 * (v**2 - rh * v)), [eps, u])
            assert abs(a - qa) < 1e-20 and abs(b - qb) < 1e-20
    # and the entropy of (1, 1, 1, 1) is ln 4, of (1, 3) is ln 4 − (3/4) ln 3
    assert abs(en.entropy([1, 1, 1, 1]) - mp.log(4)) < 1e-25
    assert abs(en.entropy([1, 3]) - (mp.log(4) - mp.mpf(3) / 4 * mp.log(3))) < 1e-25


def test_symbolic_d_gradient_check_rejects_a_wrong_coefficient():
    am_alg = am.algebra_model()
    D = am._alg_derivatives(am_alg)
    g = am._alg_gradients(am_alg)
    assert am_alg.alg.equal(D["k"], am_alg.dk.T * g["k"])
    wrong = g["k"] * sp.Rational(3, 2)  # -3 v G q instead of -2 v G q
    assert not am_alg.alg.equal(D["k"], am_alg.dk.T * wrong)


def test_symbolic_d_hessian_check_rejects_a_sign():
    a = am.algebra_model()
    D = am._alg_derivatives(a)
    H = am._alg_hessian_blocks(a)
    S, E, M, v = a.S, a.E, a.head_M, a.v
    flipped = 2 * v * S * S + 2 * v * E * M * S + 2 * v**2 * E * a.k * a.q.T * S  # sign of -2vΣ²
    assert a.alg.equal(D["kq"], a.dk.T * H["kq"] * a.dq)
    assert not a.alg.equal(D["kq"], a.dk.T * flipped * a.dq)


def test_coordinate_reduction_matches_the_explicit_model():
    # the eigen-coordinate gradient equals the full d = 3 gradient at an ansatz point
    from theory.fixed_points import ansatz_model, coordinate_gradient

    m = ansatz_model(3, 2)
    v = sp.Symbol("v", positive=True)
    g = m.grad_at(m.ansatz([], active=2, v_active=v))
    s2 = m.head_slice(2)
    blk = g[s2, 0]
    red = coordinate_gradient(m.lam[1], v, v, v, trace=m.trace, N=m.N)
    assert sp.expand(blk[0] - red[0]) == 0
    assert sp.expand(blk[1 + 1] - red[1]) == 0 and sp.expand(blk[4 + 1] - red[2]) == 0
    assert all(sp.expand(blk[i]) == 0 for i in (1, 3, 4, 6))  # off-coordinate components


def test_grad_norm_from_gradient_is_computed():
    g = sp.Symbol("g", positive=True)
    assert sp.simplify(sf.grad_norm_from_gradient(sp.Matrix([g, g, g]), g) - SQ3 * g) == 0
    assert sp.simplify(sf.grad_norm_from_gradient(sp.Matrix([2 * g, 2 * g, 2 * g]), g)
                       - 2 * SQ3 * g) == 0  # fmt: skip
    x = sp.Symbol("x", positive=True)
    import pytest

    with pytest.raises(ValueError, match="not a positive constant"):
        sf.grad_norm_from_gradient(sp.Matrix([g, x]), g)


def test_small_v_truncation_reports_the_dropped_exact_sam_term():
    r = sf.check_small_v()
    lam, rho = sp.symbols("lam rho", positive=True)
    assert sp.simplify(r.residual - lam**2 * rho**2 / 3) == 0
    assert "up to 1/4" in r.caveat and "sqrt(3)*rho/(6*v)" in r.caveat


def test_exact_sam_fixed_point_value():
    r = sf.check_lemma41_exact()
    assert not r.holds  # the statement is refuted
    # ‖∇L(v*)‖ = 2√3 g(ρ/√3) at λ = (1, ½, ½), N = 10, ρ = 1/20: ≈ 2√3·λ²ρ²/3 = 0.0028868
    assert abs(float(r.residual) - 2 * 3**0.5 * (0.05**2 / 3)) < 1e-6
