"""Claim registry and zero-checks for the symbolic re-derivations (style rule 8).

Every claim of a paper that ``theory/`` re-derives is a function decorated with :func:`claim`. It
returns a :class:`CheckResult` ``(holds, residual, conditions, ...)`` rather than a bare bool, so a
failed check can be debugged and "false" is told apart from "simplify gave up".

Fields for the report (all optional; old call signatures keep working):

* ``CheckResult.sizes`` (or ``@claim(..., sizes=...)`` as a static default): **at which sizes the
  verdict holds**, shown in its own column, e.g. ``"all d, H (trace algebra)"``,
  ``"d = 2, N = 2, H = 2"``, ``"300 random settings, M = 2..6"``. Empty renders as ``—``.
* ``CheckResult.method``: **how** (``"symbolic"``, ``"numeric"``, ``"monte-carlo"``,
  ``"symbolic (all d)"``, ...), also its own column.
* ``CheckResult.printed_residual``: for ``erratum=True`` claims, the residual of the statement *as
  printed* (the ``residual`` field is that of the corrected form). The verdict of an erratum claim
  is then "printed statement refuted; corrected form verified", with both residuals shown.
* ``CheckResult.caveat``: for ``approximation=True`` claims, a one-line note when a dropped term is
  not small in the claim's own regime; the verdict then says so instead of a plain "verified under
  an approximation".

:func:`is_zero` is the one zero test used everywhere (routes in its docstring): ``sympy.simplify``
first; otherwise the residual is evaluated at hash-seeded exact rational points with mpmath at
``digits`` (>= 30) significant digits and, where it looks like zero, re-evaluated at twice as many
digits (the "double precision" re-check of nrpy's ``check_zero``): a true zero shrinks with the
working precision, a tiny genuine residual does not. A float64 evaluation is reported for
information only; round-off at double precision never decides.

Examples:
    >>> import sympy as sp
    >>> x = sp.Symbol("x", positive=True)
    >>> r = is_zero(sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    >>> r.holds, r.method
    (True, 'symbolic')
    >>> is_zero(x**2 - x).holds
    False
    >>> r = is_zero(sp.Rational(1, 10**25) * x)  # tiny but nonzero: only high precision can tell
    >>> r.holds, r.detail.split(":")[0]
    (False, 'doubled-precision rejection')
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import sympy as sp

__all__ = [
    "Verdict",
    "CheckResult",
    "Claim",
    "CLAIMS",
    "claim",
    "is_zero",
    "run_claim",
    "erratum_residuals",
    "exhaustive",
    "set_exhaustive",
]


class Verdict(enum.StrEnum):
    """How a claim fared (the wording shown in the report)."""

    VERIFIED = "verified"
    VERIFIED_APPROX = "verified under an approximation"
    VERIFIED_APPROX_CAVEAT = ("verified under an approximation whose dropped term is comparable to "
                              "a kept one in the claim's regime")  # fmt: skip
    ERRATUM = "printed statement refuted; corrected form verified"
    ERRATUM_UNCONFIRMED = "flagged as erratum, but the printed statement holds"
    REFUTED = "refuted"
    NOT_CHECKABLE = "not checkable"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    Attributes:
        holds: whether the claimed identity/inequality holds (under ``conditions``).
        residual: the residual: a SymPy expression (0 when exact) or the largest numeric
            residual found; for refuted claims, the nonzero residual that shows it. For an erratum
            claim: the residual of the corrected form.
        conditions: the assumptions under which it was checked (domain of symbols, approximations).
        method: ``"symbolic"``, ``"numeric"`` (mpmath at random points), ``"monte-carlo"``, ...
        detail: free text (the corrected statement for an erratum, numbers of a counterexample).
        sizes: the sizes at which the verdict holds (``"all d"``, ``"d = 2, H = 2"``, ...).
        printed_residual: erratum claims only: the residual of the statement as printed.
        caveat: approximation claims only: why a dropped term is not small in the claim's regime.
    """

    holds: bool
    residual: Any = 0
    conditions: str = ""
    method: str = "symbolic"
    detail: str = ""
    sizes: str = ""
    printed_residual: Any = None
    caveat: str = ""

    def __bool__(self) -> bool:  # a CheckResult can be asserted on directly
        return bool(self.holds)


def _is_exact_zero(value: Any) -> bool:
    try:
        expr = sp.sympify(value)
    except (sp.SympifyError, TypeError):
        return False
    if isinstance(expr, sp.MatrixBase):
        return all(e == 0 for e in expr)
    return expr == 0


def erratum_residuals(result: CheckResult) -> tuple[Any, Any]:
    """``(printed, corrected)`` residuals of an erratum check (``None`` where not reported).

    ``printed_residual`` is used when given. Older checks returned the printed form's residual as
    ``residual`` (with ``holds`` meaning "the erratum is confirmed"): a *symbolic* check that holds
    with a nonzero residual can only be reporting the printed form (a verified symbolic identity
    has residual exactly 0), so it is read that way and the corrected residual is 0.
    """
    if result.printed_residual is not None:
        return result.printed_residual, result.residual
    if result.holds and result.method == "symbolic" and not _is_exact_zero(result.residual):
        return result.residual, sp.Integer(0)
    return None, result.residual


@dataclasses.dataclass(frozen=True)
class Claim:
    """A registered paper claim and its check function."""

    name: str
    reference: str
    statement: str
    func: Callable[[], CheckResult]
    approximation: bool = False
    erratum: bool = False
    module: str = ""
    sizes: str = ""

    def verdict(self, result: CheckResult) -> Verdict:
        """Map a result to a verdict.

        Not checkable / refuted first; then an erratum claim is "printed statement refuted;
        corrected form verified" (or "flagged as erratum, but the printed statement holds" when
        its printed residual is exactly 0); an approximation claim is "verified under an
        approximation" (with the caveat wording when ``result.caveat`` is set); else "verified".
        """
        if result.method == "not-checkable":
            return Verdict.NOT_CHECKABLE
        if not result.holds:
            return Verdict.REFUTED
        if self.erratum:
            printed, _ = erratum_residuals(result)
            if printed is not None and _is_exact_zero(printed):
                return Verdict.ERRATUM_UNCONFIRMED
            return Verdict.ERRATUM
        if self.approximation:
            return Verdict.VERIFIED_APPROX_CAVEAT if result.caveat else Verdict.VERIFIED_APPROX
        return Verdict.VERIFIED


#: Registry of every claim, filled at import time of the ``theory`` modules.
CLAIMS: dict[str, Claim] = {}

_EXHAUSTIVE = [os.environ.get("SBT_THEORY_EXHAUSTIVE", "") not in ("", "0")]


def exhaustive() -> bool:
    """Whether checks should also run their larger, slower sizes.

    Switched on by ``python -m theory --exhaustive`` or ``SBT_THEORY_EXHAUSTIVE=1``.
    """
    return _EXHAUSTIVE[0]


def set_exhaustive(on: bool) -> None:
    """Switch the exhaustive sizes on or off (used by the CLI and tests)."""
    _EXHAUSTIVE[0] = bool(on)


def claim(
    name: str,
    reference: str,
    statement: str,
    *,
    approximation: bool = False,
    erratum: bool = False,
    sizes: str = "",
) -> Callable[[Callable[[], CheckResult]], Callable[[], CheckResult]]:
    """Register ``func`` as the check of a paper claim.

    Args:
        name: unique snake_case name (used by ``python -m theory --claim NAME``).
        reference: where the claim is in the paper, e.g. ``"main, Lemma B.4"``.
        statement: the claim in one sentence, as the paper states it.
        approximation: the claim only holds under a stated approximation (truncation, ansatz).
        erratum: the paper's statement is wrong as printed; the check tests the corrected one
            and the result's ``detail`` gives the correction and the evidence (and, preferably,
            ``printed_residual`` the printed form's residual).
        sizes: default for the "sizes" column when the result does not set ``sizes``.
    """
    if not name.isidentifier():
        raise ValueError(f"`name` must be a Python identifier; got {name!r}.")

    def decorator(func: Callable[[], CheckResult]) -> Callable[[], CheckResult]:
        if name in CLAIMS and CLAIMS[name].func.__qualname__ != func.__qualname__:
            raise ValueError(f"claim {name!r} is registered twice ({CLAIMS[name].module}).")
        CLAIMS[name] = Claim(
            name=name,
            reference=reference,
            statement=statement,
            func=func,
            approximation=approximation,
            erratum=erratum,
            module=func.__module__,
            sizes=sizes,
        )
        return func

    return decorator


def _seed_for(expr: sp.Expr) -> int:
    return int(hashlib.sha256(sp.srepr(expr).encode()).hexdigest()[:12], 16)


def _float64(expr: sp.Expr, free: list[sp.Symbol], point: dict) -> float:
    """|expr| evaluated in IEEE double precision (information only; never decides)."""
    try:
        f = sp.lambdify(free, expr, "math")
        return abs(complex(f(*[float(point[s]) for s in free])))
    except (ArithmeticError, ValueError, TypeError):
        return math.nan


def is_zero(
    expr: sp.Expr,
    *,
    domain: Mapping[sp.Symbol, tuple[float, float]] | None = None,
    n_points: int = 12,
    digits: int = 30,
    tol: float = 1e-20,
    simplify: bool = True,
) -> CheckResult:
    """Decide whether ``expr`` is identically zero; return the residual either way.

    Routes (the first word of ``detail`` names the route for the numeric ones):

    1. ``method="symbolic"``: ``expr`` is 0, or ``sympy.simplify`` reduces it to 0.
    2. Otherwise ``expr`` is evaluated at ``n_points`` hash-seeded *exact rational* points with
       ``digits`` significant digits. ``|r| > tol·scale`` at a point (``scale`` = max(1, sum of the
       sizes of the top-level terms)) → refuted (``"nonzero at N digits"``).
    3. A point where ``0 < |r| <= tol·scale`` is re-evaluated at ``2·digits``: a true zero shrinks
       to ``<= 10^(-1.6·digits)·scale``; otherwise the residual is genuine but tiny and the check
       is refuted (``"doubled-precision rejection"``).
    4. All points pass → ``holds`` with ``method="numeric"`` (``"numeric zero"``). The float64
       value of ``expr`` at the worst point is reported in ``detail`` but never decides:
       round-off at double precision is not evidence of a nonzero residual.

    Residuals smaller than ``10^(-1.6·digits)`` relative to the terms cannot be told from zero.

    Args:
        expr: a SymPy expression (or matrix) that should vanish.
        domain: interval for each free symbol used by the numeric fallback; symbols not listed are
            drawn from (0.1, 2.0) (positive, away from singular points of typical expressions).
        n_points: random points for the numeric fallback.
        digits: working precision of the numeric fallback (>= 15).
        tol: largest accepted relative |residual| at ``digits`` precision.
        simplify: try ``sympy.simplify`` first.

    Returns:
        ``CheckResult`` with ``method`` ``"symbolic"`` or ``"numeric"``, ``holds`` and the largest
        residual found.

    Raises:
        ValueError: if ``digits`` < 15 or ``n_points`` < 1.
    """
    if not isinstance(digits, int) or digits < 15:
        raise ValueError(f"`digits` must be an int >= 15; got {digits!r}.")
    if not isinstance(n_points, int) or n_points < 1:
        raise ValueError(f"`n_points` must be a positive int; got {n_points!r}.")
    expr = sp.sympify(expr)
    if isinstance(expr, sp.MatrixBase):
        results = [is_zero(e, domain=domain, n_points=n_points, digits=digits, tol=tol,
                           simplify=simplify) for e in expr]  # fmt: skip
        bad = [r for r in results if not r.holds]
        worst = bad[0] if bad else max(results, key=lambda r: float(abs(sp.N(r.residual)))
                                        if r.method == "numeric" else 0.0)  # fmt: skip
        method = "symbolic" if all(r.method == "symbolic" for r in results) else "numeric"
        return dataclasses.replace(worst, method=method if not bad else worst.method)
    if expr == 0:
        return CheckResult(True, sp.Integer(0), method="symbolic")
    if simplify:
        simp = sp.simplify(expr)
        if simp == 0:
            return CheckResult(True, sp.Integer(0), method="symbolic")
        expr = simp
    free = sorted(expr.free_symbols, key=lambda s: s.name)
    rng = random.Random(_seed_for(expr))
    domain = dict(domain or {})
    worst, worst_pt = sp.Float(0), {}
    for _ in range(n_points if free else 1):
        subs = {}
        for s in free:
            lo, hi = (sp.Rational(x) for x in domain.get(s, (0.1, 2.0)))
            subs[s] = lo + (hi - lo) * sp.Rational(rng.getrandbits(53), 2**53)
        at = expr.subs(subs)
        val = sp.N(at, digits)
        if not val.is_number:
            return CheckResult(False, expr, method="numeric",
                               detail=f"could not evaluate numerically: {val}")  # fmt: skip
        val = abs(val)
        terms = sp.Add.make_args(at)
        scale = max(sp.Float(1), sum((abs(sp.N(t, digits)) for t in terms), sp.Float(0)))
        pt = {str(k): float(v) for k, v in subs.items()}
        if val > tol * scale:
            return CheckResult(False, val, method="numeric",
                               detail=f"nonzero at {digits} digits: |r| = {sp.N(val, 4)} at {pt}")
        if val != 0:
            val2 = abs(sp.N(at, 2 * digits))
            if val2 > sp.Float(10) ** (-int(1.6 * digits)) * scale:
                return CheckResult(False, val, method="numeric",
                                   detail=f"doubled-precision rejection: |r| = {sp.N(val, 4)} at "
                                          f"{digits} digits and {sp.N(val2, 4)} at {2 * digits} "
                                          f"digits (does not shrink: a genuine residual) at {pt}")
        if val >= worst:
            worst, worst_pt = val, subs
    dbl = _float64(expr, free, worst_pt) if free else float(abs(sp.N(expr, 15)))
    return CheckResult(True, worst, method="numeric",
                       detail=f"numeric zero at {n_points if free else 1} points ({digits} digits, "
                              f"confirmed at {2 * digits}); float64 |r| at the worst point = "
                              f"{dbl:.3g} (not used)")  # fmt: skip


def run_claim(name: str) -> tuple[Claim, CheckResult, float]:
    """Run one registered claim; return ``(claim, result, seconds)``."""
    if name not in CLAIMS:
        import difflib

        near = difflib.get_close_matches(name, list(CLAIMS), n=3)
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise KeyError(f"unknown claim {name!r}.{hint} `python -m theory --list` lists them.")
    c = CLAIMS[name]
    t0 = time.perf_counter()
    result = c.func()
    return c, result, time.perf_counter() - t0


def iter_claims(names: Iterable[str] | None = None) -> list[Claim]:
    """Registered claims (all, or those named), in registration order."""
    return [CLAIMS[n] for n in names] if names is not None else list(CLAIMS.values())
