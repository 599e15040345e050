"""Scalar ODEs of early training under GD and SAM, and their learning times.

Every ODE here is polynomial in one variable ``x``: ``tau * dx/dt = P(x)``.

* ATTN_S value dynamics (main paper Theorem 4.2, App. C.2), variable ``x = v_i``:

  - truncated GD, eq. (10): ``P = λ² v²``
  - truncated SAM, eq. (9): ``P = λ² v² − (2ρ/√3) λ² v``
  - full GD (C.2): ``P = λ² v² − λ a v⁵``
  - full SAM (C.2): ``P = λ² v² − λ a v⁵ + (ρ/√3)(5 λ a v⁴ − 2 λ² v)``

  with ``a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N)`` (App. C.1).

* ATTN_M merged key-query dynamics (App. B), written in ``x = u = √s`` where they are polynomial:

  - Theorem B.2, ``τ ṡ = 2s(γ − αs) + 2ραs^{3/2}`` ⇔ ``τ u̇ = u(γ + ραu − αu²)`` (valid while
    ``γ − αs > 0``, i.e. below ``u = √(γ/α)``; with the paper's sign convention that level is
    the stable equilibrium),
  - Theorem B.3 / Lemma B.5 truncation, ``τ ṡ = 2γs + 2ραs^{3/2}`` ⇔ ``τ u̇ = u(γ + ραu)``.

The learning time from ``x0`` to ``x1 > x0`` is ``t = τ ∫_{x0}^{x1} dx / P(x)``. It is computed
three independent ways, which the tests compare in units of their tolerances:

``"closed"``
    the paper's closed forms (eq. 23 and C.4 for the truncated ATTN_S ODEs, Lemma B.4 and
    Theorem B.3 for ATTN_M), an elementary antiderivative for full GD, and partial fractions over
    the roots of ``P`` for full SAM;
``"quad"``
    adaptive quadrature of ``τ / P`` (``scipy.integrate.quad``);
``"ode"``
    integration of the ODE in time (``scipy.integrate.solve_ivp``, DOP853) with a terminal event
    at ``x = x1``.

When ``P`` vanishes or is negative somewhere on ``[x0, x1]`` the target is never reached and the
result says why (``"decays"``: SAM with ``v0 < 2ρ/√3``; ``"stalls"``: a stable fixed point below
the target; ``"stationary"``: starts at a fixed point) with ``time = inf``; nothing returns NaN.

Examples:
    >>> ode = attn_s_ode(0.4, rho=0.0)
    >>> round(learning_time(ode, 0.01, 0.5).time, 6)  # τ/λ² (1/ε − 1/u)
    612.5
    >>> learning_time(attn_s_ode(0.4, rho=0.01), 0.01, 0.5).status  # 0.01 < 2ρ/√3 ≈ 0.01155
    'decays'
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from scipy import integrate

__all__ = [
    "PolynomialODE",
    "LearningTime",
    "ODEResult",
    "attn_s_ode",
    "merged_kq_ode",
    "a_coefficient",
    "learned_value",
    "rho_hat",
    "learning_time",
    "learning_times",
    "solve",
    "closed_form_trajectory",
    "escape_times",
    "METHODS",
]

SQRT3 = math.sqrt(3.0)
Dynamics = Literal["truncated", "full"]
SamForm = Literal["first_order", "exact"]
Status = Literal["reached", "decays", "stalls", "stationary", "invalid"]


def _check_positive(name: str, value: float, *, allow_zero: bool = False, fix: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"`{name}` must be a real number; got {value!r} ({type(value).__name__}).")
    value = float(value)
    ok = value >= 0 if allow_zero else value > 0
    if not math.isfinite(value) or not ok:
        need = "non-negative" if allow_zero else "positive"
        raise ValueError(f"`{name}` must be a finite {need} number; got {value!r}.{fix}")
    return value


def rho_hat(rho: float) -> float:
    """SAM's effective radius in eq. (9): ``ρ̂ = 2ρ/√3``; SAM needs ``v0 > ρ̂`` to grow."""
    return 2.0 * float(rho) / SQRT3


def a_coefficient(lam: float, trace: float, n_context: float) -> float:
    """``a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N)``, the eigenvalue of E[Σ̂²] (App. C.1).

    ``n_context = inf`` gives the infinite-context limit ``a_i = λ_i²``.
    """
    lam = _check_positive("lam", lam)
    trace = _check_positive("trace", trace)
    n = _check_positive("n_context", n_context, fix=" Use `inf` for the infinite-context limit.")
    return lam**2 * (1.0 + (1.0 + trace / lam) / n)


def learned_value(lam: float, trace: float, n_context: float) -> float:
    """Fixed point of full GD, eq. (3): ``v_i = (λ_i + (λ_i + tr Σ)/N)^{-1/3} = (λ_i/a_i)^⅓``."""
    return (lam / a_coefficient(lam, trace, n_context)) ** (1.0 / 3.0)


@dataclasses.dataclass(frozen=True)
class PolynomialODE:
    """``tau * dx/dt = P(x)`` with ``P(x) = sum_k coeffs[k] x**k``.

    Attributes:
        coeffs: polynomial coefficients in ascending powers of ``x``.
        tau: time constant τ > 0.
        model: ``"attn_s"`` or ``"merged_kq"``.
        optimizer: ``"gd"`` or ``"sam"``.
        dynamics: ``"truncated"`` or ``"full"``.
        params: the physical parameters (λ, a, ρ or γ, α, ρ) for the closed forms.
        x_max: upper end of the ODE's domain of validity (``inf`` if none); targets at or beyond
            it are reported as ``"stalls"`` (Theorem B.2's sign convention at ``s = γ/α``).
        variable: name of ``x`` (``"v"`` or ``"u = sqrt(s)"``).
    """

    coeffs: tuple[float, ...]
    tau: float
    model: str
    optimizer: str
    dynamics: str
    params: dict[str, float]
    x_max: float = math.inf
    variable: str = "v"

    def P(self, x):
        """Evaluate ``P(x)`` (vectorized)."""
        return np.polynomial.polynomial.polyval(x, self.coeffs)

    def dP(self, x):
        """Evaluate ``P'(x)``."""
        return np.polynomial.polynomial.polyval(x, np.polynomial.polynomial.polyder(self.coeffs))

    def rhs(self, t, x):
        """Right-hand side ``dx/dt = P(x)/τ`` in ``solve_ivp`` form.

        Horner on floats: this is the hot path of the ODE method (~10⁴ calls per learning time).
        """
        v = float(x[0])
        acc = 0.0
        for c in reversed(self.coeffs):
            acc = acc * v + c
        return [acc / self.tau]

    def roots(self) -> np.ndarray:
        """All complex roots of ``P`` (companion eigenvalues, Newton-polished where it helps)."""
        c = np.trim_zeros(np.asarray(self.coeffs, dtype=float), "b")
        if c.size <= 3:  # the truncated ODEs: closed-form roots (~50x faster than eigenvalues)
            return _quadratic_roots(c)
        r = np.polynomial.polynomial.polyroots(c).astype(complex)
        dc = np.polynomial.polynomial.polyder(c)
        for _ in range(2):  # Newton polish, keeping only steps that reduce |P|: at a multiple
            # root P' ≈ 0 and a raw Newton step can throw the root far away
            pv = np.polynomial.polynomial.polyval(r, c)
            d = np.polynomial.polynomial.polyval(r, dc)
            cand = r - pv / np.where(d != 0, d, 1.0)
            better = (d != 0) & (np.abs(np.polynomial.polynomial.polyval(cand, c)) < np.abs(pv))
            r = np.where(better, cand, r)
        return r

    def real_roots(self) -> np.ndarray:
        """Real roots of ``P`` in increasing order."""
        r = self.roots()
        scale = np.maximum(1.0, np.abs(r))
        return np.sort(r[np.abs(r.imag) <= 1e-10 * scale].real)


def _quadratic_roots(c: np.ndarray) -> np.ndarray:
    """Roots of ``c[0] + c[1] x + c[2] x²`` (degree ≤ 2), in the cancellation-free form."""
    if c.size <= 1:
        return np.empty(0, complex)
    if c.size == 2:
        return np.array([-c[0] / c[1]], complex)
    c0, c1, c2 = (float(x) for x in c)
    disc = complex(c1 * c1 - 4.0 * c2 * c0)
    sq = disc**0.5
    if (c1 * sq.conjugate()).real < 0:  # q = -(c1 + sign(c1) √disc)/2 avoids cancellation
        sq = -sq
    q = -(c1 + sq) / 2.0
    if q == 0:  # c1 = c0 = 0: a double root at 0
        return np.zeros(2, complex)
    return np.array([q / c2, c0 / q], complex)


def attn_s_ode(
    lam: float,
    *,
    rho: float = 0.0,
    dynamics: Dynamics = "truncated",
    a: float | None = None,
    tau: float = 1.0,
    sam_form: SamForm = "first_order",
) -> PolynomialODE:
    """The value ODE of the active head learning feature ``i`` (Theorem 4.2, App. C.2–C.3).

    Args:
        lam: eigenvalue ``λ_i > 0`` of the data covariance.
        rho: SAM radius ``ρ >= 0``; ``0`` gives GD.
        dynamics: ``"truncated"`` (eqs. 9–10, small-v) or ``"full"`` (C.2, needs ``a``).
        a: ``a_i`` of App. C.1 (see :func:`a_coefficient`); required for ``"full"``.
        tau: time constant τ.
        sam_form: ``"first_order"`` (the paper's (I + P) expansion, eqs. 8–9) or ``"exact"``
            (beyond the paper): on the ansatz ray ``k = q = v e`` the ascent direction is
            ``−(1, e, e)/√3``, so the perturbed point stays on the ray at ``v − ρ/√3`` and the
            exact SAM flow is the GD flow shifted, ``τ v̇ = g(v − ρ/√3)`` with ``g`` the GD
            right-hand side. Its eq.-(9) linearization in ρ is the first-order form; the
            dropped ``λ²ρ²/3`` is as large as the kept ``2ρλ²v/√3`` when ``v = O(ρ)``.
    """
    lam = _check_positive("lam", lam)
    rho = _check_positive("rho", rho, allow_zero=True, fix=" SAM's radius cannot be negative.")
    tau = _check_positive("tau", tau)
    if sam_form not in ("first_order", "exact"):
        raise ValueError(f"`sam_form` must be 'first_order' or 'exact'; got {sam_form!r}.")
    opt = "sam" if rho > 0 else "gd"
    if sam_form == "exact" and rho > 0:
        if dynamics not in ("truncated", "full"):
            raise ValueError(f"`dynamics` must be 'truncated' or 'full'; got {dynamics!r}.")
        base = attn_s_ode(lam, dynamics=dynamics, a=a, tau=tau)  # the GD flow g
        shift = rho / SQRT3
        shifted = np.polynomial.Polynomial(base.coeffs)(np.polynomial.Polynomial([-shift, 1.0]))
        coeffs = tuple(float(x) for x in shifted.coef)
        params = {**base.params, "rho": rho, "shift": shift}
        return PolynomialODE(coeffs, tau, "attn_s", "sam", dynamics, params)
    if dynamics == "truncated":
        # P(v) = λ² v² − (2ρ/√3) λ² v
        coeffs = (0.0, -rho_hat(rho) * lam**2, lam**2)
        params = {"lam": lam, "rho": rho}
    elif dynamics == "full":
        if a is None:
            raise ValueError(
                "`a` is required for dynamics='full'; compute it with a_coefficient()."
            )
        a = _check_positive("a", a)
        # P(v) = λ²v² − λ a v⁵ + (ρ/√3)(5 λ a v⁴ − 2 λ² v)
        k = rho / SQRT3
        coeffs = (0.0, -2.0 * k * lam**2, lam**2, 0.0, 5.0 * k * lam * a, -lam * a)
        params = {"lam": lam, "rho": rho, "a": a}
    else:
        raise ValueError(f"`dynamics` must be 'truncated' or 'full'; got {dynamics!r}.")
    return PolynomialODE(coeffs, tau, "attn_s", opt, dynamics, params)


def merged_kq_ode(
    gamma: float,
    alpha: float,
    *,
    rho: float = 0.0,
    dynamics: Dynamics = "full",
    tau: float = 1.0,
) -> PolynomialODE:
    """ATTN_M norm dynamics of App. B in the variable ``u = √s``.

    Args:
        gamma: ``γ = ‖E[y_q z]‖₂`` (Theorem B.2).
        alpha: ``α`` with ``E[z zᵀ] = α I`` (white case).
        rho: SAM radius ``ρ >= 0`` (layer-wise SAM on ``w2``).
        dynamics: ``"full"`` (Theorem B.2, valid below ``s = γ/α``) or ``"truncated"``
            (Theorem B.3 / Lemma B.5, early training).
        tau: time constant τ.
    """
    gamma = _check_positive("gamma", gamma)
    alpha = _check_positive("alpha", alpha)
    rho = _check_positive("rho", rho, allow_zero=True, fix=" SAM's radius cannot be negative.")
    tau = _check_positive("tau", tau)
    opt = "sam" if rho > 0 else "gd"
    params = {"gamma": gamma, "alpha": alpha, "rho": rho}
    if dynamics == "full":
        # τ u̇ = u (γ + ραu − αu²)
        return PolynomialODE(
            (0.0, gamma, rho * alpha, -alpha), tau, "merged_kq", opt, "full", params,
            x_max=math.sqrt(gamma / alpha), variable="u = sqrt(s)",
        )  # fmt: skip
    if dynamics == "truncated":
        # τ u̇ = u (γ + ραu)
        return PolynomialODE(
            (0.0, gamma, rho * alpha), tau, "merged_kq", opt, "truncated", params,
            variable="u = sqrt(s)",
        )  # fmt: skip
    raise ValueError(f"`dynamics` must be 'truncated' or 'full'; got {dynamics!r}.")


@dataclasses.dataclass(frozen=True)
class LearningTime:
    """Time for ``x`` to go from ``x0`` to ``x1`` under a scalar ODE.

    Attributes:
        time: the learning time (``inf`` when the target is never reached).
        status: ``"reached"``, ``"decays"``, ``"stalls"`` or ``"stationary"``.
        message: a sentence explaining ``status``.
        method: ``"closed"``, ``"quad"`` or ``"ode"``.
        x0, x1: start and target.
        abserr: error estimate where the method provides one (quadrature, ODE tolerance).
        nfev: right-hand-side evaluations (0 for closed forms).
    """

    time: float
    status: Status
    message: str
    method: str
    x0: float
    x1: float
    abserr: float = 0.0
    nfev: int = 0

    @property
    def success(self) -> bool:
        """Whether the target was reached."""
        return self.status == "reached"


def _reachability(ode: PolynomialODE, x0: float, x1: float) -> tuple[Status, str]:
    """Decide whether ``x1`` is reached from ``x0`` (``P > 0`` on ``[x0, x1]``) and say why not."""
    if x1 >= ode.x_max:
        return "stalls", (
            f"target {x1:.6g} is at or beyond the end of the ODE's domain {ode.x_max:.6g} "
            "(Theorem B.2: u = sqrt(gamma/alpha) is the stable equilibrium)"
        )
    shift = ode.params.get("shift", 0.0)
    if shift > 0.0 and x0 <= shift:  # exact SAM: v = ρ/√3 is a semi-stable double root of P
        if x0 == shift:
            return "stationary", f"x0 = {x0:.6g} = ρ/√3 is a fixed point of exact SAM"
        return "stalls", (
            f"exact SAM stalls: v0 = {x0:.6g} is below ρ/√3 = {shift:.6g}, where the perturbed "
            "point has v < 0; v creeps up to ρ/√3 and never passes it (needs ρ < √3 v0)"
        )
    p0 = float(ode.P(x0))
    scale = max(abs(c) * max(1.0, x0) ** k for k, c in enumerate(ode.coeffs))
    if abs(p0) <= 1e-14 * scale:
        return "stationary", f"x0 = {x0:.6g} is a fixed point of the ODE (P(x0) = 0)"
    if p0 < 0:
        if ode.optimizer == "sam" and ode.model == "attn_s":
            bound = rho_hat(ode.params["rho"])
            return "decays", (
                f"SAM decays: v0 = {x0:.6g} is below the unstable point (~2ρ/√3 = {bound:.6g}), "
                "so v shrinks to 0 and the feature is never learned (needs ρ < (√3/2) v0)"
            )
        return "decays", f"P(x0) = {p0:.3g} < 0: x decreases from x0 and never reaches {x1:.6g}"
    inside = [r for r in ode.real_roots() if x0 < r <= x1]
    if inside:
        r = inside[0]
        return "stalls", (
            f"x stalls at the stable fixed point {r:.6g} below the target {x1:.6g} "
            "(lower c or raise the endpoint's fixed point)"
        )
    return "reached", "reached"


def _closed_form_time(ode: PolynomialODE, x0: float, x1: float) -> float:
    """Closed-form ``τ ∫_{x0}^{x1} dx / P(x)`` (assumes reachability was checked)."""
    p, tau = ode.params, ode.tau
    if ode.model == "attn_s" and p.get("shift", 0.0) > 0.0:  # exact SAM: GD between shifted ends
        base = dataclasses.replace(ode, params={**p, "rho": 0.0, "shift": 0.0})
        return _closed_form_time(base, x0 - p["shift"], x1 - p["shift"])
    if ode.model == "attn_s" and ode.dynamics == "truncated":
        lam, rh = p["lam"], rho_hat(p["rho"])
        if rh == 0.0:  # eq. (23) with I₁: τ/λ² (1/ε − 1/u)
            return tau / lam**2 * (1.0 / x0 - 1.0 / x1)
        # I₂(u) = (1/ρ̂) ln[(1 − ρ̂/u)/(1 − ρ̂/ε)]  (C.4), written with log1p for accuracy
        return tau / (lam**2 * rh) * (math.log1p(-rh / x1) - math.log1p(-rh / x0))
    if ode.model == "attn_s" and ode.dynamics == "full" and p["rho"] == 0.0:
        return _gd_full_time(p["lam"], p["a"], x0, x1, tau)
    if ode.model == "merged_kq" and ode.dynamics == "full":
        return _lemma_b4_time(p["gamma"], p["alpha"], p["rho"], x0, x1, tau)
    if ode.model == "merged_kq" and ode.dynamics == "truncated":
        g, ra = p["gamma"], p["rho"] * p["alpha"]
        # Theorem B.3: t = (τ/γ) ln[u*(γ + ραu0) / (u0 (γ + ραu*))]
        return tau / g * (math.log(x1 / x0) + math.log1p(ra * x0 / g) - math.log1p(ra * x1 / g))
    return _partial_fraction_time(ode, x0, x1)


def _gd_full_time(lam: float, a: float, x0: float, x1: float, tau: float) -> float:
    """Full GD, ``τ v̇ = λ v² (λ − a v³)``, integrated in elementary functions.

    With ``b³ = λ/a`` (the fixed point), ``1/(v²(b³ − v³)) = 1/(b³v²) + v/(b³(b³ − v³))`` and
    ``∫ v/(b³ − v³) dv = ln((v² + bv + b²)/(b − v)²)/(6b) − arctan((2v + b)/(b√3))/(b√3)``, so
    ``t = (τ/λ²) [1/x0 − 1/x1 + F(x1) − F(x0)]``.
    """
    b = (lam / a) ** (1.0 / 3.0)

    def F(v: float) -> float:
        return math.log((v * v + b * v + b * b) / (b - v) ** 2) / (6.0 * b) - math.atan(
            (2.0 * v + b) / (b * SQRT3)
        ) / (b * SQRT3)

    return tau / lam**2 * ((1.0 / x0 - 1.0 / x1) + (F(x1) - F(x0)))


def _lemma_b4_time(gamma: float, alpha: float, rho: float, u0: float, u1: float, tau: float):
    """Lemma B.4 in ``u = √s``, the implicit solution of Theorem B.2's ODE.

    ``t/τ = (1/γ) ln(u/u0) + (1/(αΔ))[ln((u−r₋)/(u0−r₋))/r₋ − ln((u−r₊)/(u0−r₊))/r₊]``,

    ``Δ = √(ρ² + 4γ/α)``, ``r± = (ρ ± Δ)/2`` (the paper writes ``(1/2γ) ln(s/s0)`` for the first
    term, the same thing in ``s = u²``).
    """
    delta = math.sqrt(rho**2 + 4.0 * gamma / alpha)
    rp, rm = (rho + delta) / 2.0, (rho - delta) / 2.0
    return tau * (
        math.log(u1 / u0) / gamma
        + (math.log((u1 - rm) / (u0 - rm)) / rm - math.log((rp - u1) / (rp - u0)) / rp)
        / (alpha * delta)
    )


def _partial_fraction_time(ode: PolynomialODE, x0: float, x1: float) -> float:
    """``τ ∫ dx/P`` by partial fractions over the (simple) roots of ``P``.

    Used for full SAM, whose quintic has no elementary roots: the antiderivative is exact given the
    roots (companion-matrix eigenvalues polished by Newton steps). Every ODE here has ``P(0) = 0``;
    writing ``P = x p(x)`` with simple nonzero roots ``r_j`` of ``p``, the residues of ``1/P`` sum
    to zero, so ``∫ dx/P = Σ_j B_j ln(1 − r_j/x)`` with ``B_j = 1/(r_j p'(r_j))``. Each term is
    evaluated as ``[log1p(−r_j/x1) − log1p(−r_j/x0)] / r_j / p'(r_j)``, which stays accurate when a
    root of ``p`` approaches 0 (SAM with tiny ρ: roots 0 and ≈ρ̂ nearly coincide, and the textbook
    form ``A ln x + B ln(x − ρ̂)`` cancels catastrophically). Along the real segment ``1 − r_j/x``
    stays in one half-plane, so the principal logarithm is the right branch.
    """
    c = np.asarray(ode.coeffs, dtype=float)
    if c[0] != 0.0:
        raise ArithmeticError("partial fractions here assume P(0) = 0.")
    q = c[1:]  # p(x) = P(x)/x
    if q[0] == 0.0:
        raise ArithmeticError("P has a double root at 0; use the GD closed form.")
    deflated = dataclasses.replace(ode, coeffs=tuple(q))
    r = deflated.roots()
    d = deflated.dP(r)
    if np.any(np.abs(d) < 1e-12 * np.max(np.abs(d))):
        raise ArithmeticError("P has a repeated root; partial fractions need simple roots.")
    # g_j = [ln(1 − r_j/x1) − ln(1 − r_j/x0)] / r_j. Real roots in real arithmetic (numpy's complex
    # log1p loses digits for tiny arguments), with |1 − r/x| (both ends share its sign when the
    # target is reachable); for |r| ≪ x0 the Taylor series, which also makes the result
    # insensitive to the root's absolute rounding error near 0.
    g = np.empty(r.shape, dtype=complex)
    for j, rj in enumerate(r):
        if abs(rj) < 1e-6 * x0:
            g[j] = (1.0 / x0 - 1.0 / x1) + rj / 2.0 * (1.0 / x0**2 - 1.0 / x1**2)
        elif abs(rj.imag) <= 1e-14 * abs(rj):
            a = rj.real
            g[j] = (_log_abs_1m(a / x1) - _log_abs_1m(a / x0)) / a
        else:
            g[j] = (np.log(1.0 - rj / x1) - np.log(1.0 - rj / x0)) / rj
    return float(ode.tau * np.sum(g / d).real)


def _log_abs_1m(y: float) -> float:
    """``ln|1 − y|`` accurately for small ``|y|``."""
    return math.log1p(-y) if y < 0.5 else math.log(abs(1.0 - y))


def _quad_time(ode: PolynomialODE, x0: float, x1: float) -> tuple[float, float, int]:
    val, err, info = integrate.quad(
        lambda x: ode.tau / ode.P(x), x0, x1, epsabs=0.0, epsrel=1e-13, limit=200, full_output=1
    )[:3]
    return float(val), float(err), int(info["neval"])


def _ode_time(
    ode: PolynomialODE, x0: float, x1: float, *, rtol: float = 1e-12, atol: float = 1e-14
) -> tuple[float, float, int]:
    def hit(t, y):
        return y[0] - x1

    hit.terminal = True
    hit.direction = 1
    # The horizon only needs to exceed the learning time; double it until the event fires.
    horizon = ode.tau / max(abs(float(ode.P(x0))), 1e-300) * max(x1 - x0, 1e-12) + ode.tau
    nfev = 0
    for _ in range(60):
        sol = integrate.solve_ivp(
            ode.rhs, (0.0, horizon), [x0], method="DOP853", events=hit, rtol=rtol, atol=atol
        )
        nfev += sol.nfev
        if sol.status == 1 and sol.t_events[0].size:
            return float(sol.t_events[0][0]), rtol * float(sol.t_events[0][0]), nfev
        if sol.status < 0:
            raise ArithmeticError(f"solve_ivp failed: {sol.message}")
        horizon *= 2.0
    raise ArithmeticError("the ODE did not reach the target within 2^60 initial horizons.")


#: Learning-time methods by name (style rule 4).
METHODS: dict[str, Callable[[PolynomialODE, float, float], Any]] = {
    "closed": lambda ode, x0, x1: (_closed_form_time(ode, x0, x1), 0.0, 0),
    "quad": _quad_time,
    "ode": _ode_time,
}


def learning_time(
    ode: PolynomialODE, x0: float, x1: float, *, method: str = "closed"
) -> LearningTime:
    """Time for ``x`` to grow from ``x0`` to ``x1`` (Theorem 4.4's ``t_i``, Theorem B.3's escape).

    Args:
        ode: the scalar ODE (:func:`attn_s_ode`, :func:`merged_kq_ode`).
        x0: start ``x0 > 0`` (ε in Theorem 4.4, ``√s0`` in Theorem B.3).
        x1: target ``x1 > x0`` (``c λ_i^{-1/3}``, ``√s*``).
        method: ``"closed"``, ``"quad"`` or ``"ode"`` (see the module docstring).

    Returns:
        A :class:`LearningTime`; ``time = inf`` with a ``status`` explaining why when the target is
        never reached.

    Raises:
        ValueError: for ``x0 <= 0``, ``x1 <= x0`` or an unknown method.
    """
    if not isinstance(ode, PolynomialODE):
        raise TypeError(f"`ode` must be a PolynomialODE; got {type(ode).__name__}.")
    x0 = _check_positive("x0", x0)
    x1 = _check_positive("x1", x1)
    if x1 <= x0:
        raise ValueError(
            f"`x1` must exceed `x0` (learning means growth); got x0={x0!r}, x1={x1!r}. "
            "Raise c or lower eps so that the endpoint c*lam**(-1/3) lies above eps."
        )
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {sorted(METHODS)}; got {method!r}.")
    status, message = _reachability(ode, x0, x1)
    if status != "reached":
        return LearningTime(math.inf, status, message, method, x0, x1)
    t, err, nfev = METHODS[method](ode, x0, x1)
    if not (math.isfinite(t) and t > 0):
        raise ArithmeticError(f"method {method!r} produced t={t!r} for a reachable target.")
    return LearningTime(t, "reached", "reached", method, x0, x1, err, nfev)


def learning_times(
    lams, *, rho: float, eps: float, c: float, tau: float = 1.0, dynamics: Dynamics = "truncated",
    a=None, method: str = "closed", sam_form: SamForm = "first_order",
) -> list[LearningTime]:  # fmt: skip
    """Theorem 4.4's times ``t_i = τ ∫_ε^{c λ_i^{-1/3}} dv / P_i(v)`` for every eigenvalue.

    Args:
        lams: eigenvalues ``λ_i``.
        rho: SAM radius (0 for GD).
        eps: common start ``ε`` (the paper's ``max_i ε_i``).
        c: Assumption 4.3's fraction: feature ``i`` is learned at ``v_i = c λ_i^{-1/3}``.
        tau: time constant.
        dynamics: ``"truncated"`` or ``"full"``.
        a: the ``a_i`` (required for ``"full"``).
        method: learning-time method.
        sam_form: ``"first_order"`` (eq. 9) or ``"exact"`` (see :func:`attn_s_ode`).
    """
    lams = np.asarray(lams, dtype=float)
    if dynamics == "full" and (a is None or np.shape(a) != lams.shape):
        raise ValueError("`a` must give one a_i per eigenvalue for dynamics='full'.")
    out = []
    for i, lam in enumerate(lams):
        ode = attn_s_ode(
            float(lam), rho=rho, dynamics=dynamics, tau=tau, sam_form=sam_form,
            a=None if a is None else float(np.asarray(a)[i]),
        )  # fmt: skip
        out.append(learning_time(ode, eps, c * lam ** (-1.0 / 3.0), method=method))
    return out


@dataclasses.dataclass(frozen=True)
class ODEResult:
    """Trajectory of a scalar ODE (``solve_ivp``-shaped).

    Attributes:
        t: times.
        x: the solution at ``t``.
        status: 0 reached the end of ``t_span``; 1 a terminal event (blow-up guard) fired.
        message: solver message.
        success: ``status >= 0``.
        nfev: right-hand-side evaluations.
    """

    t: np.ndarray
    x: np.ndarray
    status: int
    message: str
    success: bool
    nfev: int


def solve(
    ode: PolynomialODE,
    t_span: tuple[float, float],
    x0: float,
    *,
    t_eval=None,
    x_cap: float = 1e6,
    rtol: float = 1e-10,
    atol: float = 1e-13,
) -> ODEResult:
    """Integrate ``τ ẋ = P(x)`` over ``t_span`` from ``x0`` (stops early if ``|x|`` hits ``x_cap``).

    Truncated GD blows up in finite time (``v → ∞`` at ``t = τ/(λ² v0)``); the cap turns that into
    a terminal event with ``status = 1`` instead of a solver failure.
    """
    x0 = _check_positive("x0", x0)
    t0, t1 = map(float, t_span)
    if not t1 > t0:
        raise ValueError(f"`t_span` must be increasing; got {t_span!r}.")

    def cap(t, y):
        return abs(y[0]) - x_cap

    cap.terminal = True
    sol = integrate.solve_ivp(
        ode.rhs, (t0, t1), [x0], method="DOP853", t_eval=t_eval, events=cap, rtol=rtol, atol=atol
    )
    return ODEResult(sol.t, sol.y[0], sol.status, sol.message, sol.status >= 0, sol.nfev)


def closed_form_trajectory(ode: PolynomialODE, t, x0: float) -> np.ndarray:
    """Explicit ``x(t)`` where the paper gives one.

    * truncated ATTN_S GD: ``v = v0 / (1 − λ² v0 t/τ)`` (blows up at ``τ/(λ² v0)``),
    * truncated ATTN_S SAM: ``v = ρ̂ / (1 − (1 − ρ̂/v0) e^{λ² ρ̂ t/τ})``,
    * ATTN_M GD (Theorem B.2 at ρ = 0, logistic): ``s = γ e^{2γt/τ} / (α(e^{2γt/τ} − 1) + γ/s0)``,
    * ATTN_M truncated (Lemma B.5): ``u = γ u0 e^{γt/τ} / (γ + ραu0 (1 − e^{γt/τ}))``.

    Returned in the ODE's variable ``x`` (``u = √s`` for ATTN_M). Past a blow-up the value is
    ``inf``.
    """
    t = np.asarray(t, dtype=float)
    p, tau = ode.params, ode.tau
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if ode.model == "attn_s" and ode.dynamics == "truncated":
            lam, rh = p["lam"], rho_hat(p["rho"])
            if rh == 0.0:
                den = 1.0 - lam**2 * x0 * t / tau
            else:
                den = (1.0 - (1.0 - rh / x0) * np.exp(lam**2 * rh * t / tau)) * x0 / rh
            x = x0 / den
        elif ode.model == "merged_kq" and ode.dynamics == "full" and p["rho"] == 0.0:
            g, al, s0 = p["gamma"], p["alpha"], x0**2
            e = np.exp(2.0 * g * t / tau)
            den = al * (e - 1.0) + g / s0
            x = np.sqrt(g * e / den)
        elif ode.model == "merged_kq" and ode.dynamics == "truncated":
            g, ra = p["gamma"], p["rho"] * p["alpha"]
            e = np.exp(g * t / tau)
            den = g + ra * x0 * (1.0 - e)
            x = g * x0 * e / den
        else:
            raise ValueError(
                f"no explicit trajectory for {ode.model}/{ode.dynamics}/{ode.optimizer}; "
                "use solve() instead."
            )
        return np.where(den > 0, x, np.inf)


def escape_times(
    gamma: float, alpha: float, rho: float, s0: float, s_star: float, *, tau: float = 1.0
) -> dict[str, float]:
    """Theorem B.3's escape times from ``s0`` to ``s*`` under the truncated ATTN_M ODEs.

    Returns:
        ``{"t_gd", "t_sam", "delta_t", "delta_t_approx"}``: ``t_GD = (τ/γ) ln √(s*/s0)``,
        ``t_SAM = (τ/γ) ln[√s*(γ + ρα√s0) / (√s0 (γ + ρα√s*))]``, their exact difference and the
        paper's first-order approximation ``Δt ≈ τρα(√s* − √s0)/γ²``.
    """
    s0 = _check_positive("s0", s0)
    s_star = _check_positive("s_star", s_star)
    u0, u1 = math.sqrt(s0), math.sqrt(s_star)
    t_gd = learning_time(merged_kq_ode(gamma, alpha, rho=0.0, dynamics="truncated", tau=tau),
                         u0, u1).time  # fmt: skip
    t_sam = learning_time(merged_kq_ode(gamma, alpha, rho=rho, dynamics="truncated", tau=tau),
                          u0, u1).time  # fmt: skip
    return {
        "t_gd": t_gd,
        "t_sam": t_sam,
        "delta_t": t_gd - t_sam,
        "delta_t_approx": tau * rho * alpha * (u1 - u0) / gamma**2,
    }
