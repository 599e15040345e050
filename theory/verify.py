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

import contextlib
import contextvars
import dataclasses
import enum
import hashlib
import math
import os
import random
import re
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
    "Part",
    "record",
    "printed_form",
    "stated",
    "statement",
    "Plant",
    "planting",
    "FAILURES",
    "generality_of",
    "fixed_sizes_in",
    "SCOPES",
]


class Verdict(enum.StrEnum):
    """How a claim fared (the wording shown in the report)."""

    VERIFIED = "verified"
    VERIFIED_APPROX = "verified under an approximation"
    VERIFIED_APPROX_CAVEAT = ("verified under an approximation whose dropped term is comparable to "
                              "a kept one in the claim's regime")  # fmt: skip
    ERRATUM = "printed statement refuted; corrected form verified"
    ERRATUM_UNCONFIRMED = "flagged as erratum, but the printed statement holds"
    #: a typo in the printed formula (sign, transpose, factor, index) where the paper's own proof
    #: or neighbouring equations use the correct form; the corrected form is verified in the row
    #: named by ``Claim.corrected_by`` (or in the check itself)
    TYPO = "erratum (typo in the printed formula)"
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
        generality: how general the verdict is, as proved (``"symbolic in all d"``,
            ``"reduction argued by hand; machine-checked at d = 3"``, ``"fixed sizes: ..."``,
            ``"sampled: N samples"``, ``"adversarial search: ..."``); empty = derived by
            :func:`generality_of` from ``method`` and ``sizes``.
        parts: every sub-comparison the check made (:class:`Part`), filled in by
            :meth:`Claim.run`; the verdict consumes all of them.
        scope: what the check established, declared by the check itself (:data:`SCOPES`):
            ``"proved"`` (a chain of steps, each verified symbolically for a symbolic size),
            ``"symbolic-dims"`` (an identity verified with the dimension a symbol),
            ``"symbolic"`` (an identity in scalar symbols, no dimension in it), ``"fixed"``,
            ``"sampled"``, ``"searched"``; empty = derived by :func:`generality_of` from the
            method and the sizes recorded.
    """

    holds: bool
    residual: Any = 0
    conditions: str = ""
    method: str = "symbolic"
    detail: str = ""
    sizes: str = ""
    printed_residual: Any = None
    caveat: str = ""
    generality: str = ""
    parts: tuple = ()
    scope: str = ""

    def __bool__(self) -> bool:  # a CheckResult can be asserted on directly
        return bool(self.holds)


# ---------------------------------------------------------------------------------------------
# The evidence log: every comparison a check makes reaches its verdict
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Part:
    """One sub-comparison of a check: what was compared, its outcome and the outcome it needs.

    ``expected=False`` marks a comparison the check *needs* to fail (the printed form of an
    erratum, the negative control of a bound): the claim holds only if it does fail.
    """

    name: str
    ok: bool
    expected: bool = True

    @property
    def as_needed(self) -> bool:
        """Whether the comparison came out as the claim needs."""
        return bool(self.ok) == bool(self.expected)


_LOG: contextvars.ContextVar[list | None] = contextvars.ContextVar("theory_log", default=None)
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("theory_depth", default=0)
_IN_PRINTED: contextvars.ContextVar[bool] = contextvars.ContextVar("theory_printed", default=False)
_FALLBACK: contextvars.ContextVar[list | None] = contextvars.ContextVar("theory_fallback",
                                                                      default=None)


def record(name: str, ok: Any, *, expected: bool = True) -> bool:
    """Log one sub-comparison of the running check and return ``bool(ok)``.

    Every :func:`is_zero` call and every trace-algebra ``equal`` made while a claim runs (through
    :meth:`Claim.run`) is logged the same way; numeric checks log their comparisons with this
    function. :meth:`Claim.run` then holds the claim only if every logged comparison came out as
    needed, so a comparison cannot be computed and left out of the verdict.

    Examples:
        >>> record("not inside a claim: only returns", 1 > 0)
        True
    """
    ok = bool(ok)
    log = _LOG.get()
    if log is not None and _DEPTH.get() == 0:
        log.append(Part(str(name), ok, bool(expected)))
    return ok


class PrintedForm:
    """What :func:`printed_form` found: ``fails`` is True when a comparison inside failed."""

    fails: bool | None = None


@contextlib.contextmanager
def printed_form(label: str = "printed form"):
    """Run the check of a *printed* (wrong) form inside a corrected claim.

    The comparisons made inside are collected apart; on exit one :class:`Part` is logged,
    ``"<label> fails"``, that holds when at least one of them failed, so the corrected claim
    needs its printed form to fail and says so in its verdict.

    Examples:
        >>> import sympy as sp
        >>> with printed_form("x = x + 1") as pf:
        ...     _ = is_zero(sp.Integer(1))
        >>> pf.fails
        True
    """
    out = PrintedForm()
    sub: list[Part] = []
    token, t2 = _LOG.set(sub), _IN_PRINTED.set(True)
    try:
        yield out
    finally:
        _LOG.reset(token)
        _IN_PRINTED.reset(t2)
    out.fails = any(not p.ok for p in sub)
    record(f"{label} fails", out.fails)


@contextlib.contextmanager
def _nested():
    """Comparisons made inside (e.g. per matrix entry) are not logged separately."""
    token = _DEPTH.set(_DEPTH.get() + 1)
    try:
        yield
    finally:
        _DEPTH.reset(token)


# ---------------------------------------------------------------------------------------------
# Planted statements: the transcribed statement of a claim, perturbed on request
# ---------------------------------------------------------------------------------------------

#: What a planted error does to a statement, by the kind of statement (see :func:`stated`).
_COEF = {"eq": sp.Rational(5, 4), "upper": sp.Rational(1, 2), "lower": sp.Integer(2)}


@dataclasses.dataclass(frozen=True)
class Plant:
    """A planted error at the ``site``-th distinct :func:`stated` label a check uses.

    Every value with that label is perturbed: the statement is wrong wherever the check uses it.

    ``kind`` ``"coef"`` scales one coefficient (×5/4 in an identity, ×1/2 in an upper bound, ×2
    in a lower bound); ``"sign"`` negates one term (in a bound, a term whose negation tightens
    it, else the whole upper bound, or ×2 for a lower bound with no such term).
    """

    kind: str = "coef"
    site: int = 0

    def __post_init__(self):
        if self.kind not in ("coef", "sign"):
            raise ValueError(f"`kind` must be 'coef' or 'sign'; got {self.kind!r}.")
        if not isinstance(self.site, int) or self.site < 0:
            raise ValueError(f"`site` must be an int >= 0; got {self.site!r}.")


_PLANT: contextvars.ContextVar[Plant | None] = contextvars.ContextVar("theory_plant", default=None)
_SITES: contextvars.ContextVar[list | None] = contextvars.ContextVar("theory_sites", default=None)


@contextlib.contextmanager
def planting(plant: Plant | None):
    """Run checks with ``plant`` applied to their stated values; yields the list of site labels."""
    t1, t2 = _PLANT.set(plant), _SITES.set([])
    try:
        yield _SITES.get()
    finally:
        _PLANT.reset(t1)
        _SITES.reset(t2)


def _perturb(value: Any, kind: str, bound: str) -> Any:
    """``value`` with one coefficient scaled (``"coef"``) or one term negated (``"sign"``)."""
    if callable(value) and not isinstance(value, sp.Basic):
        def planted(*args, **kwargs):
            return _perturb(value(*args, **kwargs), kind, bound)

        return planted
    if isinstance(value, dict):
        if not value:
            return value
        k0 = next(iter(value))
        return {**value, k0: _perturb(value[k0], kind, bound)}
    if isinstance(value, tuple | list):
        if not value:
            return value
        return type(value)([_perturb(value[0], kind, bound), *value[1:]])
    if isinstance(value, sp.MatrixBase):
        m = value.as_mutable()
        idx = next((k for k, e in enumerate(m) if e != 0), 0)
        m[idx] = _perturb(m[idx], kind, bound)
        return m if isinstance(value, sp.MutableDenseMatrix) else m.as_immutable()
    if isinstance(value, sp.Basic):
        terms = sp.Add.make_args(value)
        if bound == "eq" and len(terms) > 1:  # one coefficient / one term of a sum
            t0 = terms[0]
            new = _COEF["eq"] * t0 if kind == "coef" else -t0
            return value - t0 + new
        if kind == "sign" and len(terms) > 1:  # a sign error that tightens the bound
            want_negative = bound == "lower"  # 1 − x → 1 + x raises a lower bound
            for t in terms:
                if bool(t.could_extract_minus_sign()) == want_negative:
                    return value - 2 * t
        if kind == "sign" and bound == "lower":  # no sign error tightens it: the coefficient
            return _COEF[bound] * value
        return _COEF[bound] * value if kind == "coef" else -value
    if kind == "sign" and bound == "lower" and not type(value).__module__.startswith("mpmath"):
        return value * float(_COEF[bound])
    factor = _COEF[bound] if kind == "coef" else sp.Integer(-1)
    if isinstance(value, int | float | complex) or type(value).__module__.startswith("numpy"):
        return value * float(factor)
    if type(value).__module__.startswith("mpmath"):
        return value * int(factor) if factor.is_integer else value * factor.p / factor.q
    return value * factor  # other algebras (the trace algebra's MatExpr) take SymPy scalars


def statement(func: Callable | None = None, *, bound: str = "eq"):
    """Decorator: the function returns a statement of the paper (a :func:`stated` site per call).

    Each call is labelled by the function's name. Put it outermost, above any cache.

    Examples:
        >>> @statement
        ... def rate(v):
        ...     return 2 * v
        >>> rate(3)
        6
    """
    import functools

    def wrap(f):
        @functools.wraps(f)
        def inner(*args, **kwargs):
            return stated(f(*args, **kwargs), f.__name__, bound=bound)

        return inner

    return wrap(func) if func is not None else wrap


def stated(value: Any, label: str = "", *, bound: str = "eq") -> Any:
    """Mark ``value`` as the paper's statement as transcribed (a hook for planted errors).

    Returns ``value`` unchanged, except inside :func:`planting` where the site chosen by the
    :class:`Plant` is perturbed: SymPy sums get one term's coefficient scaled by 5/4 (or negated),
    other expressions, matrices (first nonzero entry), numbers and arrays are scaled (or negated),
    a callable's return value is perturbed. ``bound`` says what kind of statement it is:
    ``"eq"`` (an identity), ``"upper"`` (the claim says lhs ≤ value: the plant halves it) or
    ``"lower"`` (lhs ≥ value: the plant doubles it), so a planted bound is always *tighter*.

    Examples:
        >>> import sympy as sp
        >>> x = sp.Symbol("x")
        >>> stated(x + 1)
        x + 1
        >>> with planting(Plant("coef")) as sites:
        ...     stated(2 * x, "rhs"), sites
        (5*x/2, ['rhs'])
    """
    if bound not in _COEF:
        raise ValueError(f"`bound` must be 'eq', 'upper' or 'lower'; got {bound!r}.")
    sites = _SITES.get()
    plant = _PLANT.get()
    if sites is None:
        return value
    label = label or f"site {len(sites)}"
    if label not in sites:
        sites.append(label)
    if plant is not None and plant.site < len(sites) and sites[plant.site] == label:
        return _perturb(value, plant.kind, bound)  # the statement is wrong wherever it is used
    return value


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


#: How a failing ("refuted") row failed: ``"typo"`` (an erratum: a sign, transpose, factor or
#: index in the printed formula, where the paper's own proof or neighbouring equations use the
#: correct form), ``"substantive"`` (a counterexample, a wrong bound or step) or ``"ours"`` (a
#: reading or hypothesis of ours, not the paper's: reported under "beyond the papers").
FAILURES = ("typo", "substantive", "ours")


@dataclasses.dataclass(frozen=True)
class Claim:
    """A registered paper claim and its check function.

    ``failure``/``why`` classify a row whose statement fails (see :data:`FAILURES`), with a
    one-line reason; ``corrected_by`` names the row that verifies the corrected form of a typo.
    ``generality`` is a static default for :attr:`CheckResult.generality`.
    """

    name: str
    reference: str
    statement: str
    func: Callable[[], CheckResult]
    approximation: bool = False
    erratum: bool = False
    module: str = ""
    sizes: str = ""
    failure: str = ""
    why: str = ""
    corrected_by: str = ""
    generality: str = ""

    def verdict(self, result: CheckResult) -> Verdict:
        """Map a result to a verdict.

        Not checkable / refuted first (a failing row classified as a typo is an *erratum*, not a
        refutation); then an erratum claim is "printed statement refuted; corrected form
        verified" (or "flagged as erratum, but the printed statement holds" when its printed
        residual is exactly 0); an approximation claim is "verified under an approximation"
        (with the caveat wording when ``result.caveat`` is set); else "verified".
        """
        if result.method == "not-checkable":
            return Verdict.NOT_CHECKABLE
        if not result.holds:
            return Verdict.TYPO if self.failure == "typo" else Verdict.REFUTED
        if self.erratum:
            printed, _ = erratum_residuals(result)
            if printed is not None and _is_exact_zero(printed):
                return Verdict.ERRATUM_UNCONFIRMED
            return Verdict.ERRATUM
        if self.approximation:
            return Verdict.VERIFIED_APPROX_CAVEAT if result.caveat else Verdict.VERIFIED_APPROX
        return Verdict.VERIFIED

    def run(self, plant: Plant | None = None) -> CheckResult:
        """Run the check with its comparisons logged; the result's ``parts`` hold the log.

        The claim holds only if the check says so *and* every logged comparison came out as
        needed (:class:`Part`): a comparison that fails is never left out of the verdict. The
        ``method`` gains "numeric fallback" where a symbolic zero test fell back to numbers,
        and ``generality`` is filled in (:func:`generality_of`) when the check did not set it.
        With ``plant``, the check runs on a planted statement (:func:`stated`).
        """
        log: list[Part] = []
        t_log = _LOG.set(log)
        t_fb = _FALLBACK.set([])
        try:
            with planting(plant) as sites:
                result = self.func()
            fallback = list(_FALLBACK.get() or ())
        finally:
            _LOG.reset(t_log)
            _FALLBACK.reset(t_fb)
        if not isinstance(result, CheckResult):
            return result
        holds = bool(result.holds) and all(p.as_needed for p in log)
        method = result.method
        if fallback and "symbolic" in method and "numeric" not in method:
            # what actually ran: simplify gave up and the zero test went numeric
            method = f"{method} (numeric fallback in {len(fallback)} zero test"
            method += "s)" if len(fallback) > 1 else ")"
        out = dataclasses.replace(result, holds=holds, parts=tuple(log), method=method)
        gen = result.generality or self.generality or generality_of(out, self)
        out = dataclasses.replace(out, generality=gen)
        object.__setattr__(out, "_sites", tuple(sites))
        object.__setattr__(out, "_own_holds", bool(result.holds))
        return out


#: The generality classes a check can declare (:attr:`CheckResult.scope`), as reported.
SCOPES = {
    "proved": "proved for all sizes",
    "symbolic-dims": "symbolic in all sizes",
    "symbolic": "symbolic in its free symbols",
    "fixed": "fixed sizes",
    "sampled": "sampled (not a proof)",
    "searched": "adversarial search (worst case found, not a proof)",
}

#: A dimension or parameter set to one integer in a recorded sizes field ("d = 3", "H = h = 3",
#: "T=4"), not a range ("n = 2..7") nor a decimal value ("m = 1.7"): the check ran at that size.
_FIXED_SIZE = re.compile(r"(?<![\w.])[A-Za-z][\w']*\s*=\s*\d+(?![\d.]|\s*\.\.|\s*[–-]\s*\d)")


def fixed_sizes_in(sizes: str) -> list[str]:
    """The assignments of a single integer size in ``sizes`` (``["d = 3", "H = 2"]``).

    Examples:
        >>> fixed_sizes_in("symbolic: h = 3, T = 4; numeric T = 40, m = 1.7, n = 2..7")
        ['h = 3', 'T = 4', 'T = 40']
        >>> fixed_sizes_in("all u > ε > 0 (symbolic)")
        []
    """
    return [re.sub(r"\s+", " ", m.group(0)) for m in _FIXED_SIZE.finditer(sizes or "")]


def generality_of(result: CheckResult, c: Claim | None = None) -> str:
    """How general a verdict is, derived from what ran: the check's method and recorded sizes.

    The class comes from structured records only, never from a word in the sizes text: the
    check's declared :attr:`CheckResult.scope` when set; else its method (``"not-checkable"``, a
    counterexample that refutes, ``"adversarial"``, ``"monte-carlo"``/``"sampled"``, a symbolic
    route in all sizes: the trace algebra or a method marked ``"(all d)"``/``"all sizes"``); else
    the sizes it recorded: any dimension set to one integer (:func:`fixed_sizes_in`) makes the row
    "fixed sizes", whatever else the text says; a symbolic method with no size fixed is
    "symbolic in its free symbols"; anything else is "fixed sizes".
    """
    method, sizes = result.method.lower(), (result.sizes or (c.sizes if c else "")).strip()
    low = sizes.lower()
    fixed = fixed_sizes_in(sizes)
    fallback = "; zero test numeric (exact points, 30/60 digits) where simplify gave up" \
        if "numeric fallback" in method else ""
    if method.startswith("not-checkable"):
        return "not checkable"
    if result.scope:
        if result.scope not in SCOPES:
            raise ValueError(f"`scope` must be one of {sorted(SCOPES)}; got {result.scope!r}.")
        return f"{SCOPES[result.scope]}: {sizes or 'see detail'}{fallback}"
    if not result.holds and "counterexample" in method:
        return f"one counterexample (a single instance refutes): {sizes or 'see detail'}"
    if "adversarial" in method:
        return f"{SCOPES['searched']}: {sizes}"
    if "reduction" in low:  # a hand step named in the sizes can only lower the class
        return f"reduction argued by hand, machine-checked at the sizes named: {sizes}"
    if "trace algebra" in method or "all sizes" in method or "(all d)" in method \
            or "(all n)" in method:
        return f"{SCOPES['symbolic-dims']}: {sizes}"
    if not result.holds and (fixed or "symbolic" not in method):
        return f"one counterexample (a single instance refutes): {sizes or 'see detail'}"
    if "monte-carlo" in method or "sampled" in method or (
            "symbolic" not in method and ("random" in low or "sampled" in low)):
        return f"{SCOPES['sampled']}: {sizes}"
    if fixed:
        return f"{SCOPES['fixed']}: {sizes}{fallback}"
    if "symbolic" in method:
        return f"{SCOPES['symbolic']}: {sizes or 'see detail'}{fallback}"
    return f"{SCOPES['fixed']}: {sizes or 'see detail'}{fallback}"


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
    failure: str = "",
    why: str = "",
    corrected_by: str = "",
    generality: str = "",
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
        failure: for a row whose statement fails: ``"typo"``, ``"substantive"`` or ``"ours"``
            (:data:`FAILURES`); with ``why``, a one-line reason.
        why: the one-line reason for ``failure``.
        corrected_by: for a typo, the claim that verifies the corrected form.
        generality: how general the verdict is (default: :func:`generality_of`).
    """
    if not name.isidentifier():
        raise ValueError(f"`name` must be a Python identifier; got {name!r}.")
    if failure not in ("", *FAILURES):
        raise ValueError(f"`failure` must be one of {FAILURES} or ''; got {failure!r}.")
    if failure and not why:
        raise ValueError(f"claim {name!r}: `why` must give the one-line reason for `failure`.")

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
            failure=failure,
            why=why,
            corrected_by=corrected_by,
            generality=generality,
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


def is_zero(expr: sp.Expr, *, expect: bool = True, label: str = "", **kwargs) -> CheckResult:
    """Decide whether ``expr`` is identically zero (see :func:`_zero_test` for the routes).

    Inside a running claim the outcome is logged (:func:`record`) with ``expected=expect``:
    pass ``expect=False`` where the check needs a nonzero residual (a printed form that is
    wrong); a numeric fallback is noted so the claim's ``method`` says so.
    """
    with _nested():
        r = _zero_test(expr, **kwargs)
    if _DEPTH.get() == 0:
        record(label or "is_zero", r.holds, expected=expect)
        fb = _FALLBACK.get()
        if fb is not None and r.method == "numeric" and expect and not _IN_PRINTED.get():
            fb.append(label or "is_zero")
    return r


def _zero_test(
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
    result = c.run()
    return c, result, time.perf_counter() - t0


def iter_claims(names: Iterable[str] | None = None) -> list[Claim]:
    """Registered claims (all, or those named), in registration order."""
    return [CLAIMS[n] for n in names] if names is not None else list(CLAIMS.values())
