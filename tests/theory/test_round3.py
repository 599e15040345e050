"""Issue 38: inequalities proved for every size, generality from what ran, every half computed.

Each planted statement named by the issue must come back not verified; the references are
closed forms computed here (the first size where √n/(1+√n) exceeds c, by a plain loop), never
numbers taken from the code under test.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import theory
from theory import entropy, markov_coupling, sosd
from theory.verify import CheckResult, Claim, Plant, Verdict, generality_of


def _first_failing_by_loop(c: float) -> int:
    """Smallest n with √n/(1+√n) > c, by counting (independent of the code's closed form)."""
    n = 1
    while math.sqrt(n) / (1 + math.sqrt(n)) <= c:
        n += 1
    return n


# ------------------------------------------------------------------ A.1 and A.4 for every size


def test_first_failing_sizes_match_a_plain_count():
    for c, n in ((0.96, 577), (0.9, 82), (0.82, 21)):
        assert _first_failing_by_loop(c) == n
        assert sosd.first_failing_size(c) == n
    assert sosd.first_failing_size(1.0) is None


def test_a1_family_is_the_true_extremal_pair():
    """√n/(1+√n) from the vectors themselves (numpy), not from the code's formula."""
    for n in (2, 3, 39, 577):
        a, b = sosd.a1_extremal_family(n, 1e-9)
        assert np.allclose(a[1:], 1e-9) and a[0] == b[0] == 1 and not b[1:].any()
        lhs = np.linalg.norm(a / np.abs(a).sum() - b / np.abs(b).sum())
        ratio = lhs / ((1 + math.sqrt(n)) * np.linalg.norm(a - b) / min(np.abs(a).sum(), 1.0))
        assert ratio == pytest.approx(math.sqrt(n) / (1 + math.sqrt(n)), rel=1e-6)
    w, w2 = sosd.a4_extremal_pair(4, 1e-9)
    assert np.allclose(np.linalg.svd(w2, compute_uv=False), [1, 1e-9, 1e-9, 1e-9])


def test_a1_proof_steps_all_verified_and_the_constant_step_needs_one():
    steps, ok = sosd.prove_lemma_a1()
    assert ok and all(s[1] for s in steps) and len(steps) >= 9
    steps, ok = sosd.prove_lemma_a1(0.96)
    assert not ok and not steps[-1][1] and all(s[1] for s in steps[:-1])
    sup_steps, sup_ok = sosd.a1_extremal_supremum()
    assert sup_ok and "1" in sup_steps[-1][2]
    steps, ok = sosd.prove_lemma_a4()
    assert ok and any("Mirsky" in s[0] for s in steps)


def test_a1_with_096_is_not_verified():
    r = sosd.check_lemma_a1(constant=0.96)
    assert not r.holds
    assert "first fails at n = 577" in r.detail and "first exceeds the bound at n = 577" in r.detail


@pytest.mark.parametrize("c, r_fail", [(0.9, 82), (0.82, 21)])
def test_a4_with_a_constant_below_one_is_not_verified(c, r_fail):
    r = sosd.check_lemma_a4(constant=c, with_toy=False)
    assert not r.holds
    assert f"first fails at r = {r_fail}" in r.detail
    assert f"first exceeds the bound at r = {r_fail}" in r.detail


def test_a4_constant_is_checked():
    with pytest.raises(ValueError, match="`constant`"):
        sosd.check_lemma_a4(constant=0, with_toy=False)
    with pytest.raises(ValueError, match="`constant`"):
        sosd.check_lemma_a1(constant=-1.0)


@pytest.mark.parametrize("name", ["sosd_lemma_a1", "sosd_lemma_a4"])
def test_a1_a4_reported_as_proved_with_supremum_one(name, claim_run):
    r = claim_run(name)
    assert theory.load_all()[name].verdict(r) is Verdict.VERIFIED
    assert r.generality.startswith("proved for all sizes")
    assert r.residual == 1.0 and "sup over sizes of lhs/rhs = 1" in r.detail
    # the search, started from the true family, reaches √3/(1+√3) = 0.634 at n = 3 (or 3×3)
    assert "0.6340" in r.detail or "0.633" in r.detail


# ------------------------------------------------------------------ generality from what ran


def test_a_fixed_size_check_whose_text_says_symbolic_is_fixed_sizes():
    def planted():
        return CheckResult(True, 0, "generic entries", "symbolic",
                           sizes="d = 3 (symbolic), H = 2 symbolic")  # fmt: skip

    r = Claim("planted_fixed", "t", "t", planted).run()
    assert r.generality.startswith("fixed sizes"), r.generality
    # the same text without a size fixed is an identity in its free symbols
    r = Claim("free", "t", "t", lambda: CheckResult(True, 0, sizes="all u > 0 (symbolic)")).run()
    assert r.generality.startswith("symbolic in its free symbols")
    # a declared scope is reported as declared; an unknown one is refused
    r = Claim("p", "t", "t", lambda: CheckResult(True, 0, sizes="all n", scope="proved")).run()
    assert r.generality.startswith("proved for all sizes")
    with pytest.raises(ValueError, match="`scope`"):
        generality_of(CheckResult(True, 0, scope="everything"))


NINE = ["seed004_coupling_growth_rate", "seed004_phi_nondecreasing", "b3_alignment_eq13",
        "thm_b3_small_s_odes", "sosd_lemma_a8_as_printed", "sosd_lemma_a8_corrected",
        "upsampling_ansatz_rates", "upsampling_query_rule_enrichment",
        "upsampling_target_rule_enrichment"]  # fmt: skip


@pytest.mark.parametrize("name", NINE)
def test_the_nine_fixed_size_rows_are_not_labelled_symbolic(name, claim_run):
    g = claim_run(name).generality
    assert not g.startswith("symbolic"), (name, g)
    assert g.startswith(("fixed sizes", "one counterexample", "sampled")), (name, g)


# ------------------------------------------------------------------ every half computed


def test_planted_plateau_flips_theorem1():
    c = theory.load_all()["seed004_theorem1_fixed_point"]
    base = c.run()
    assert base.holds and "loss at the fixed point" in base.detail
    site = list(base._sites).index("plateau 1/2 sum_{a>=2} m_a^2")
    assert not c.run(Plant("coef", site)).holds
    assert not c.run(Plant("sign", site)).holds


def test_coupling_rate_with_beta_3_percent_off_is_not_verified(monkeypatch, claim_run):
    base = claim_run("seed004_coupling_growth_rate")
    assert base.holds
    true_beta = markov_coupling.coupling_beta

    def planted(mstar, H, T):
        return 1.03 * true_beta(mstar, H, T)

    monkeypatch.setattr(markov_coupling, "coupling_beta", planted)
    r = theory.load_all()["seed004_coupling_growth_rate"].run()
    assert not r.holds and "coupling_beta equals the closed form (rel. tol 1e-9)" in [
        p.name for p in r.parts if not p.ok]


def test_coupling_rate_baseline_deviation_far_below_its_tolerance(claim_run):
    import re

    r = claim_run("seed004_coupling_growth_rate")
    devs = [abs(float(x)) for x in re.findall(r"t = 1e\+0[67]: ([-+][\d.e+-]+)", r.detail)]
    assert len(devs) == 4 and max(devs) < 1e-2 / 10, r.detail


def test_thm44_gap_is_resolved_above_its_floor(claim_run):
    r = claim_run("thm44_sam_higher_entropy")
    assert r.holds and "tolerance 1e-20" in r.detail and "recomputed at 60 digits" in r.detail


def test_thm44_rho_zero_is_gd_and_a_sign_error_raises(monkeypatch):
    lams, c, eps = [2.0, 1.0, 0.5], 0.8, 0.05
    tg, ts = entropy.learning_times(lams, c, eps, 0)
    assert ts == tg  # the stated case: ρ = 0 is GD
    tg, ts = entropy.learning_times(lams, c, eps, 0.01)
    assert all(s > g for s, g in zip(ts, tg, strict=True))
    monkeypatch.setattr(entropy, "_rho_hat", lambda rho: -2 * rho / mp.sqrt(3))
    with pytest.raises(ValueError, match="ρ̂"):  # before: GD's times, a gap of exactly 0
        entropy.learning_times(lams, c, eps, 0.01)


def test_lemma_a8_is_a_substantive_error_downstream():
    c = theory.load_all()["sosd_lemma_a8_as_printed"]
    assert c.failure == "substantive"
    assert "(45)" in c.why and "sosd_thm45_query_gradient_bound" in c.why
    assert "sosd_thm45_query_gradient_bound" in theory.load_all()


def test_a5_a6_a7_proofs_hold_and_break_on_a_tighter_bound(claim_run):
    assert sosd.prove_lemma_a5()[1] and sosd.prove_lemma_a6()[1] and sosd.prove_lemma_a7()[1]
    assert not sosd.prove_lemma_a5(lower=lambda x: 2 * (1 - x / 2))[1]
    assert not sosd.prove_lemma_a6(0.5)[1]
    assert not sosd.prove_lemma_a7(two=1)[1]
    # the paper's (30) drops the cross terms of xᵀaaᵀx: a = (½, ½), x = (1, −1) gives 0 vs ½
    steps, _ = sosd.prove_lemma_a7()
    assert any("(30)" in s[0] and not s[1] for s in steps)
    for name in ("sosd_lemma_a5_descent", "sosd_lemma_a6_softmax_gap",
                 "sosd_lemma_a7_softmax_jacobian"):
        assert claim_run(name).generality.startswith("proved for all sizes"), name
