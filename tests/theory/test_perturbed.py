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


def test_entropy_gap_reverses_for_a_speedup():
    # A SAM-like term that *accelerates* small v (sign flipped) lowers entropy instead.
    import mpmath as mp

    lams, c, eps = [2.0, 1.0, 0.5], 0.8, 0.05
    tg, _ = en.learning_times(lams, c, eps, 0.0)
    fast = [t / (1 + 5 / (i + 1)) for i, t in enumerate(tg)]  # shrink early (large-λ) times most
    assert en.entropy(fast) < en.entropy(tg) + mp.mpf(0)
