"""Issue 33: checks test exactly what they state.

* inequalities are attacked (extremal families + L-BFGS-B), not only sampled: a false constant
  (n^(1/4) for √n in Lemma A.1) is caught, and the search finds √(n−1) on A.1's extremal family;
* every "iff"/"faster"/"unstable" is checked on both sides of its threshold;
* every comparison a check computes reaches its verdict (walks every claim);
* ``method`` says what ran (numeric fallback), every verdict states its generality;
* the planted-statement harness flips the claims it is run on.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

import theory
from theory import plant, sam_saddle, sosd
from theory.verify import (
    FAILURES,
    CheckResult,
    Claim,
    Plant,
    Verdict,
    is_zero,
    planting,
    printed_form,
    record,
    stated,
)

# ------------------------------------------------------------------ Lemma A.1: attacked


@pytest.mark.parametrize("n", [2, 10, 39])
def test_a1_extremal_family_ratio_is_sqrt_n(n):
    """Issue 38: the true extremal pair b = e₁, a = e₁ + δ(0, 1, …, 1) reaches √n (not √(n−1))."""
    delta = 1e-6
    a, b = sosd.a1_extremal_family(n, delta=delta)
    al, bl = np.abs(a).sum(), np.abs(b).sum()
    raw = np.linalg.norm(a / al - b / bl) * min(al, bl) / np.linalg.norm(a - b)
    assert raw == pytest.approx(math.sqrt(n) / (1 + (n - 1) * delta), rel=1e-7)  # hand-derived


def test_a1_fourth_root_bound_is_refuted_and_sqrt_verified():
    good = sosd.check_lemma_a1(n_trials=200)
    assert good.holds
    # proved: the reported worst ratio is the supremum 1; the family reaches √577/(1+√577)
    assert good.residual == 1.0
    assert f"{math.sqrt(577) / (1 + math.sqrt(577)):.6f} at n = 577" in good.detail
    bad = sosd.check_lemma_a1(n_trials=200, exponent=0.25)
    assert not bad.holds  # random sampling alone never saw this (issue 33: 0.52 at most)
    # worst found: the family at n = 577 (the largest scanned), √577/(1 + 577^(1/4))
    assert bad.residual == pytest.approx(math.sqrt(577) / (1 + 577**0.25), rel=1e-5)


def test_a1_sampling_alone_would_miss_the_fourth_root():
    """The seeded samples stay below 1 even for n^(1/4): only the attack catches it."""
    r = sosd.check_lemma_a1(n_trials=300, exponent=0.25, sizes=())
    sampled = float(r.detail.split("max lhs/rhs ")[1].split(")")[0])
    assert sampled < 1 < r.residual


def test_a4_and_a6_report_their_worst_cases(claim_run):
    a4 = claim_run("sosd_lemma_a4")
    assert a4.holds and "extremal pair" in a4.detail
    # the pair's worst scanned is √r/(1+√r) at r = 577 (issue 38), the supremum 1 is reported
    assert f"{math.sqrt(577) / (1 + math.sqrt(577)):.6f} at r = 577" in a4.detail
    a6 = claim_run("sosd_lemma_a6_softmax_gap")
    assert a6.holds and 1 - 1e-6 < a6.residual <= 1 + 1e-9  # tight: e^g/(e^g + m − 1) → 1


def test_a4_wrong_constant_is_caught_by_the_family():
    assert not sosd.check_lemma_a4(n_trials=30, sqrt_of="one", with_toy=False).holds


@pytest.mark.parametrize("name", ["sosd_lemma_a1", "sosd_lemma_a2_mirsky",
                                  "sosd_lemma_a3_von_neumann", "sosd_lemma_a4",
                                  "sosd_lemma_a6_softmax_gap", "sosd_lemma_a7_softmax_jacobian",
                                  "sosd_thm45_frobenius_condition_corrected"])
def test_bounds_fail_when_halved(name):
    """A bound made twice as tight must be refuted: the attack gets close enough to it."""
    c = theory.load_all()[name]
    assert c.verdict(c.run(Plant("coef"))) in (Verdict.REFUTED, Verdict.TYPO)


# ------------------------------------------------------------------ both sides of a threshold


def test_kick_region_reversed_gain_is_refuted():
    assert sam_saddle.check_kick_region().holds
    # the gain's sign reversed (exact − GD → GD − exact): root unchanged, sides swapped
    rev = sam_saddle.check_kick_region(
        exact_rate=lambda lam, v, c, s: 2 * lam**2 * v**2 - lam**2 * (v - c * s) ** 2)
    assert not rev.holds
    # first-order half: a first-order SAM that is faster than GD must be refuted too
    fo = sam_saddle.check_kick_region(
        first_order_rate=lambda lam, v, c, s: lam**2 * v**2 + 2 * c * s * lam**2 * v)
    assert not fo.holds


def test_thm_b2_zero_is_unstable_on_every_point():
    c = theory.load_all()["thm_b2_equilibria"]
    r = c.run()
    names = {p.name: p.ok for p in r.parts}
    assert r.holds and names["s = 0 unstable: τṡ > 0 at every s in (0, γ/α)"]
    # planted: the logistic term's sign flipped makes s = 0 stable; the check must say so
    bad = c.run(Plant("sign", site=1))
    assert not bad.holds
    assert not {p.name: p.ok for p in bad.parts}["s = 0 unstable: slope 2γ > 0 at 0+"] or \
        not {p.name: p.ok for p in bad.parts}["s = 0 unstable: τṡ > 0 at every s in (0, γ/α)"]


# ------------------------------------------------------------------ every comparison is used


def _all_names():
    return list(theory.load_all())


@pytest.mark.parametrize("name", _all_names())
def test_no_computed_comparison_is_left_out(name, claim_run):
    """Walk every claim: a logged comparison that failed must not sit under a holding verdict,
    and a printed form that fails (expected=False) is only allowed in a row that reports it."""
    r = claim_run(name)
    c = theory.load_all()[name]
    bad = [p for p in r.parts if not p.as_needed]
    assert not (r._own_holds and bad), f"{name}: check holds but {bad} came out wrong"
    expects_failure = [p for p in r.parts if not p.expected]
    if expects_failure:
        assert c.erratum or c.failure, (
            f"{name} needs a printed form to fail ({expects_failure}) but is not an erratum row")


def test_c1_eq18_is_its_own_row(claim_run):
    reg = theory.load_all()
    row = reg["c1_eq18_matrix_form_as_printed"]
    assert row.verdict(claim_run(row.name)) is Verdict.TYPO
    c1 = reg["c1_expectation_forms_16_18"]
    r = claim_run(c1.name)
    assert c1.verdict(r) is Verdict.ERRATUM  # corrected form verified, printed (18) fails
    assert any(not p.expected and not p.ok for p in r.parts)


def test_an_unused_failing_comparison_refutes_the_claim():
    """The mechanism itself: a check that computes a failing comparison and ignores it."""
    x = sp.Symbol("x")

    def sloppy():
        is_zero(x**2 - x)  # computed, never used
        return CheckResult(True, 0, "none", "symbolic")

    c = Claim("sloppy", "test", "test", sloppy)
    r = c.run()
    assert r._own_holds and not r.holds and c.verdict(r) is Verdict.REFUTED

    def careful():
        with printed_form("x² = x") as pf:
            is_zero(x**2 - x)
        return CheckResult(pf.fails, 0, "none", "symbolic")

    assert Claim("careful", "t", "t", careful).run().holds
    assert record("outside a claim", False) is False


# ------------------------------------------------------------------ method and generality


def test_method_says_when_the_zero_test_fell_back_to_numbers():
    x = sp.Symbol("x", positive=True)

    def check():
        r = is_zero((x + 1) ** 2 - x**2 - 2 * x - 1, simplify=False)  # zero, not simplified
        return CheckResult(r.holds, r.residual, "x > 0", "symbolic", sizes="all x")

    r = Claim("fallback", "t", "t", check).run()
    assert r.holds and "numeric fallback in 1 zero test" in r.method


def test_markov_coupling_method_comes_from_the_zero_tests():
    from theory import markov_coupling as mc

    assert mc._ran([CheckResult(True, method="symbolic")]) == "symbolic"
    assert mc._ran([CheckResult(True, method="symbolic"),
                    CheckResult(False, 1.46, method="numeric")]) == "numeric"


@pytest.mark.parametrize("name", _all_names())
def test_every_verdict_states_its_generality(name, claim_run):
    r = claim_run(name)
    assert r.generality.startswith((
        "not checkable", "adversarial search (worst case found, not a proof)",
        "proved for all sizes",
        "symbolic in", "sampled (not a proof)", "fixed sizes",
        "one counterexample (a single instance refutes)",
        "reduction argued by hand, machine-checked at the sizes named")), (name, r.generality)
    if "all sizes" in r.generality or "all d" in r.generality.split(":")[0]:
        assert "trace algebra" in r.generality or "(all" in r.method, name


# ------------------------------------------------------------------ classification (issue 28)

#: every failing row, its class (typo = erratum, substantive = refuted, ours = beyond the papers)
FAILING = {
    "gradients_16_21_as_printed": "typo",
    "c1_eq18_matrix_form_as_printed": "typo",
    "hessian_blocks_c1_as_printed": "substantive",
    "a2_attn_s_fixed_points_complete_as_printed": "substantive",
    "seed004_coupling_time_log_reading": "ours",
    "b1_vec_gradient_as_printed": "typo",
    "a2_attn_m_fixed_points_complete_as_printed": "substantive",
    "thm_b3_gamma_statement_as_printed": "substantive",
    "thm_b3_gamma_proof_as_printed": "typo",
    "lemma_b5_as_printed": "typo",
    "c2_grad_norm_as_printed": "typo",
    "lemma41_as_printed": "typo",
    "lemma41_exact_sam": "substantive",
    "sosd_lemma_a8_as_printed": "substantive",
    "sosd_thm45_hitting_times_as_printed": "substantive",
    "sosd_thm45_frobenius_condition_as_printed": "substantive",
    "sosd_thm45_value_gradient_bound": "substantive",
    "sosd_thm45_query_gradient_bound": "substantive",
    "sosd_assumption41_monotone_norms": "substantive",
    "sosd_thm49_eq94_prefactor": "substantive",
    "sosd_thm49_eq95_max_to_sum": "substantive",
    "sosd_thm49_statement_vs_eq97": "substantive",
    "sosd_thm49_eq109": "typo",
    "sosd_thm49_attention_margin_normalization": "typo",
    "sosd_thm49_eq143_factor": "typo",
}


def test_classifications_are_pinned():
    reg = theory.load_all()
    assert {n: c.failure for n, c in reg.items() if c.failure} == FAILING
    for n in FAILING:
        c = reg[n]
        assert c.failure in FAILURES and len(c.why) > 20, n
        if c.failure == "typo":
            assert c.corrected_by in reg, f"{n}: a typo names the row verifying its correction"
        if c.failure == "ours":
            assert c.reference.startswith("beyond the papers (ours"), n


@pytest.mark.parametrize("name", sorted(FAILING))
def test_every_failing_row_gets_its_class_verdict(name, claim_run):
    c = theory.load_all()[name]
    v = c.verdict(claim_run(name))
    assert v is (Verdict.TYPO if FAILING[name] == "typo" else Verdict.REFUTED), (name, v)
    if FAILING[name] == "typo":  # the corrected form is verified where the row says
        mate = theory.load_all()[c.corrected_by]
        assert mate.verdict(claim_run(mate.name)) in (Verdict.ERRATUM, Verdict.VERIFIED)


def test_every_failing_verdict_is_classified(claim_run):
    for n, c in theory.load_all().items():
        v = c.verdict(claim_run(n))
        if v in (Verdict.REFUTED, Verdict.TYPO):
            assert n in FAILING, f"{n} fails ({v.value}) without a classification"


# ------------------------------------------------------------------ planted statements

#: fast claims whose planted statements must all flip (the full run: python -m theory --plant)
FAST = ["sam_exact_kick_region", "thm_b2_equilibria", "sosd_lemma_a6_softmax_gap",
        "thm44_I1_I2_closed_forms", "sosd_thm45_qk_ode_solution", "lemma_b4_partial_fractions",
        "thm_b2_rho0_logistic", "c1_expectation_forms_16_18"]


def test_planted_statements_flip_the_fast_claims():
    rows = plant.plant_claims(FAST)
    s = plant.summary(rows)
    assert s["applicable"] == len(FAST)
    assert s["flipped"] == len(FAST), s["not_flipped"]


@pytest.mark.parametrize("flips", ["coef", "sign"])
def test_a_claim_that_flips_under_one_kind_only_counts_as_flipped(monkeypatch, flips):
    """A sign claim cannot flip by a coefficient: one kind flipping is enough (any, not all)."""
    def fake_verdict(c, p, timeout=None):
        if p is None:
            return "verified", ("s",)
        return ("refuted" if p.kind == flips else "verified"), ()

    monkeypatch.setattr(plant, "_verdict", fake_verdict)
    monkeypatch.setattr(plant, "load_all", lambda: None)
    monkeypatch.setitem(plant.CLAIMS, "_tmp_one_kind", object())
    (row,) = plant.plant_claims(["_tmp_one_kind"])
    assert row.flipped is True and row.reason == ""
    assert getattr(row, flips) == "refuted"
    assert getattr(row, "sign" if flips == "coef" else "coef") == "verified"
    assert plant.summary([row])["flipped"] == 1


def test_plant_perturbs_exactly_one_site():
    x = sp.Symbol("x")
    with planting(Plant("sign", site=1)) as sites:
        a, b = stated(x + 2, "a"), stated(3 * x - 1, "b")
    assert (a, sites) == (x + 2, ["a", "b"])
    assert b != 3 * x - 1 and sp.expand(b - (3 * x - 1)) != 0
    with planting(Plant("coef")):
        assert stated(2.0, bound="upper") == 1.0  # a bound made tighter: halved ...
    with planting(Plant("coef")):
        assert stated(2.0, bound="lower") == 4.0  # ... or doubled
    with planting(Plant("sign")):
        assert stated(1 - x / 2, bound="lower") == 1 + x / 2  # the sign that tightens it
    assert stated(2.0) == 2.0  # outside a plant: unchanged
    with pytest.raises(ValueError, match="`kind`"):
        Plant("swap")
    with pytest.raises(ValueError, match="`bound`"):
        stated(1.0, bound="both")


def test_the_listed_non_flipping_claims_really_do_not_flip():
    """Each reason in NO_FLIP_REASONS names a claim the harness cannot flip (and says why)."""
    rows = plant.plant_claims(sorted(plant.NO_FLIP_REASONS))
    for r in rows:
        assert r.flipped is False and r.reason == plant.NO_FLIP_REASONS[r.name], r
