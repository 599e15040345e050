"""The zero test's routes and the registry's verdicts (issue 9).

Each route of :func:`theory.verify.is_zero` is reached by a residual built for it: exact zeros that
simplify, true identities that only numbers can decide, a true zero whose float64 evaluation is
pure round-off (it must be accepted: float64 never decides), and residuals that are nonzero but
below the 30-digit tolerance, which only the doubled-precision re-check can reject.
"""

from __future__ import annotations

import pytest
import sympy as sp

from theory import verify
from theory.verify import CheckResult, Claim, Verdict, erratum_residuals, is_zero

x = sp.Symbol("x", positive=True)


def test_symbolic_route():
    r = is_zero(sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    assert r.holds and r.method == "symbolic" and r.residual == 0


def test_numeric_route_for_a_true_identity():
    # simplify switched off: only the numeric evaluation can decide
    r = is_zero(sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1, simplify=False)
    assert r.holds and r.method == "numeric"
    assert r.detail.startswith("numeric zero at 12 points (30 digits, confirmed at 60)")
    assert abs(r.residual) < 1e-50  # a true zero shrinks with the working precision


def test_true_zero_with_float64_roundoff_is_accepted():
    # exp(cosh² − sinh² − 1) − 1 = 0, but at x ≈ 20 float64 loses everything (cosh² ≈ 6e16,
    # so cosh² − sinh² is 0 or ±8): the residual evaluates to O(1) in double precision, far above
    # 1e-8 times the size of its terms (≈ 2; exp of a sum is not expanded at a numeric point).
    # A guard that let float64 decide would refute this identity; the design accepts it.
    expr = sp.exp(sp.cosh(x) ** 2 - sp.sinh(x) ** 2 - 1) - 1
    f = sp.lambdify(x, expr, "math")
    assert all(abs(f(t)) > 0.5 for t in (19.3, 20.3, 21.7))  # round-off, not zero
    r = is_zero(expr, domain={x: (18.0, 22.0)}, simplify=False)
    assert r.holds and r.method == "numeric", r.detail
    assert "float64" in r.detail and "(not used)" in r.detail


def test_tiny_nonzero_rejected_only_at_doubled_precision():
    # x + 1e-25·x − x: float64 gives exactly 0, 30 digits see 1e-25 (below tol = 1e-20),
    # only the 60-digit re-check shows the residual does not shrink.
    expr = sp.Add(x, x / 10**25, -x, evaluate=False)
    f = sp.lambdify(x, expr, "math")
    assert f(1.3) == 0.0
    r = is_zero(expr, simplify=False)
    assert not r.holds
    assert r.detail.startswith("doubled-precision rejection"), r.detail
    assert 1e-26 < float(r.residual) < 1e-24


def test_nonzero_at_working_precision():
    r = is_zero(x / 10**18, simplify=False)  # above tol: rejected at 30 digits already
    assert not r.holds and r.detail.startswith("nonzero at 30 digits")
    r = is_zero(x**2 - x)
    assert not r.holds and r.residual > 0.01


def test_bad_arguments():
    with pytest.raises(ValueError, match="`digits`"):
        is_zero(x, digits=10)
    with pytest.raises(ValueError, match="`n_points`"):
        is_zero(x, n_points=0)


def test_matrix_residual():
    r = is_zero(sp.Matrix([sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1, 0]))
    assert r.holds and r.method == "symbolic"
    assert not is_zero(sp.Matrix([0, x - 1])).holds


def _claim(**kw) -> Claim:
    return Claim("c", "ref", "stmt", lambda: CheckResult(True), **kw)


def test_verdicts():
    assert _claim().verdict(CheckResult(True)) is Verdict.VERIFIED
    assert _claim().verdict(CheckResult(False, 1)) is Verdict.REFUTED
    assert _claim().verdict(CheckResult(False, method="not-checkable")) is Verdict.NOT_CHECKABLE
    approx = _claim(approximation=True)
    assert approx.verdict(CheckResult(True)) is Verdict.VERIFIED_APPROX
    assert approx.verdict(CheckResult(True, caveat="big")) is Verdict.VERIFIED_APPROX_CAVEAT
    err = _claim(erratum=True)
    assert err.verdict(CheckResult(True, 0, printed_residual=3)) is Verdict.ERRATUM
    assert err.verdict(CheckResult(True, 0, printed_residual=0)) is Verdict.ERRATUM_UNCONFIRMED
    assert err.verdict(CheckResult(False, 2, printed_residual=3)) is Verdict.REFUTED
    assert Verdict.ERRATUM.value == "printed statement refuted; corrected form verified"


def test_erratum_residuals_legacy_convention():
    # new convention: both residuals given
    assert erratum_residuals(CheckResult(True, 0, printed_residual=5)) == (5, 0)
    # older checks returned the printed form's residual with holds = "erratum confirmed":
    # a holding *symbolic* check with a nonzero residual can only mean that
    p, c = erratum_residuals(CheckResult(True, sp.Integer(14), method="symbolic"))
    assert p == 14 and c == 0
    # a numeric check's small residual is its own (corrected) residual
    assert erratum_residuals(CheckResult(True, 1e-30, method="numeric")) == (None, 1e-30)


def test_old_call_signatures_still_work():
    # positional CheckResult and @claim without the new keywords (other modules use them)
    r = CheckResult(True, 0, "cond", "symbolic", "detail")
    assert r.sizes == "" and r.printed_residual is None and r.caveat == ""

    @verify.claim("_tmp_old_style", "ref", "stmt", erratum=True)
    def _old() -> CheckResult:
        return CheckResult(True, 0, "cond", "symbolic", "detail")

    try:
        c = verify.CLAIMS["_tmp_old_style"]
        assert c.sizes == ""
        assert c.verdict(_old()) is Verdict.ERRATUM  # printed residual unknown, not zero
    finally:
        verify.CLAIMS.pop("_tmp_old_style", None)


def test_exhaustive_switch():
    old = verify.exhaustive()
    try:
        verify.set_exhaustive(True)
        assert verify.exhaustive() is True
        verify.set_exhaustive(False)
        assert verify.exhaustive() is False
    finally:
        verify.set_exhaustive(old)
