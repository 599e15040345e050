"""Claim registry and zero-checks for the symbolic re-derivations (style rule 8).

Every claim of a paper that ``theory/`` re-derives is a function decorated with :func:`claim`. It
returns a :class:`CheckResult` ``(holds, residual, conditions, ...)`` rather than a bare bool, so a
failed check can be debugged and "false" is told apart from "simplify gave up".

:func:`is_zero` is the one zero test used everywhere: ``sympy.simplify`` first; if that does not
reach 0, the residual is evaluated with mpmath at >= 30 digits at hash-seeded random points inside
the stated domain, and re-checked at double precision, and the result says which route was taken.

Examples:
    >>> import sympy as sp
    >>> x = sp.Symbol("x", positive=True)
    >>> r = is_zero(sp.sin(x) ** 2 + sp.cos(x) ** 2 - 1)
    >>> r.holds, r.method
    (True, 'symbolic')
    >>> is_zero(x**2 - x).holds
    False
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
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
]


class Verdict(enum.StrEnum):
    """How a claim fared."""

    VERIFIED = "verified"
    VERIFIED_APPROX = "verified under an approximation"
    REFUTED = "refuted"
    NOT_CHECKABLE = "not checkable"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """Outcome of one check.

    Attributes:
        holds: whether the claimed identity/inequality holds (under ``conditions``).
        residual: the residual: a SymPy expression (0 when exact) or the largest numeric
            residual found; for refuted claims, the nonzero residual that shows it.
        conditions: the assumptions under which it was checked (domain of symbols, approximations).
        method: ``"symbolic"``, ``"numeric"`` (mpmath at random points), ``"monte-carlo"``, ...
        detail: free text (the corrected statement for an erratum, numbers of a counterexample).
    """

    holds: bool
    residual: Any = 0
    conditions: str = ""
    method: str = "symbolic"
    detail: str = ""

    def __bool__(self) -> bool:  # a CheckResult can be asserted on directly
        return bool(self.holds)


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

    def verdict(self, result: CheckResult) -> Verdict:
        """Map a result to a verdict (an approximation claim that holds is 'verified under...')."""
        if result.method == "not-checkable":
            return Verdict.NOT_CHECKABLE
        if not result.holds:
            return Verdict.REFUTED
        return Verdict.VERIFIED_APPROX if self.approximation else Verdict.VERIFIED


#: Registry of every claim, filled at import time of the ``theory`` modules.
CLAIMS: dict[str, Claim] = {}


def claim(
    name: str,
    reference: str,
    statement: str,
    *,
    approximation: bool = False,
    erratum: bool = False,
) -> Callable[[Callable[[], CheckResult]], Callable[[], CheckResult]]:
    """Register ``func`` as the check of a paper claim.

    Args:
        name: unique snake_case name (used by ``python -m theory --claim NAME``).
        reference: where the claim is in the paper, e.g. ``"main, Lemma B.4"``.
        statement: the claim in one sentence, as the paper states it.
        approximation: the claim only holds under a stated approximation (truncation, ansatz).
        erratum: the paper's statement is wrong as printed; the check tests the corrected one
            and the result's ``detail`` gives the correction and the evidence.
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
        )
        return func

    return decorator


def _seed_for(expr: sp.Expr) -> int:
    return int(hashlib.sha256(sp.srepr(expr).encode()).hexdigest()[:12], 16)


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

    Args:
        expr: a SymPy expression (or matrix) that should vanish.
        domain: interval for each free symbol used by the numeric fallback; symbols not listed are
            drawn from (0.1, 2.0) (positive, away from singular points of typical expressions).
        n_points: random points for the numeric fallback.
        digits: working precision of the numeric fallback.
        tol: largest accepted |residual| at ``digits`` precision (relative to the size of the
            expression's terms when those are larger than 1).
        simplify: try ``sympy.simplify`` first.

    Returns:
        ``CheckResult`` with ``method`` ``"symbolic"`` (simplified to exactly 0) or ``"numeric"``
        (mpmath evaluation; ``residual`` = largest |value| found), and ``holds``.
    """
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
    if not free:
        val = sp.N(expr, digits)
        return CheckResult(abs(val) < tol, val, method="numeric")
    rng = random.Random(_seed_for(expr))
    domain = dict(domain or {})
    worst = sp.Float(0)
    for _ in range(n_points):
        subs = {}
        for s in free:
            lo, hi = domain.get(s, (0.1, 2.0))
            subs[s] = sp.Float(lo + (hi - lo) * rng.random(), digits + 10)
        val = sp.N(expr.subs(subs), digits)
        if not val.is_number:
            return CheckResult(False, expr, method="numeric",
                               detail=f"could not evaluate numerically: {val}")  # fmt: skip
        val = abs(val)
        worst = max(worst, val)
        # Re-check at double precision so a high-precision cancellation artefact is not accepted.
        dbl = abs(complex(sp.N(expr.subs({k: float(v) for k, v in subs.items()}), 15)))
        scale = max(1.0, float(sum(abs(sp.N(t.subs(subs), 15)) for t in sp.Add.make_args(expr))))
        if val > tol * scale or dbl > 1e-8 * scale:
            return CheckResult(False, val, method="numeric",
                               detail=f"nonzero at {dict((str(k), float(v)) for k, v in subs.items())}")  # noqa: E501  # fmt: skip
    return CheckResult(True, worst, method="numeric")


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
