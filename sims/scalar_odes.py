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
    "LearningTimes",
    "attn_s_learning_times",
    "attn_s_coefficients",
    "batched_roots",
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


def a_coefficient(lam, trace, n_context):
    """``a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N)``, the eigenvalue of E[Σ̂²] (App. C.1).

    ``n_context = inf`` gives the infinite-context limit ``a_i = λ_i²``. Scalars give a float;
    an array of ``lam`` gives an array.
    """
    if np.ndim(lam) or np.ndim(trace) or np.ndim(n_context):
        lam, trace, n = (np.asarray(x, dtype=float) for x in (lam, trace, n_context))
        for name, v in (("lam", lam), ("trace", trace)):
            if np.any(~(v > 0) | np.isinf(v)):
                raise ValueError(f"`{name}` must be finite and positive; got {v.tolist()}.")
    else:
        lam = _check_positive("lam", lam)
        trace = _check_positive("trace", trace)
        n = n_context if n_context == math.inf else _check_positive("n_context", n_context)
    if np.any(~(np.asarray(n, dtype=float) > 0)):
        raise ValueError(f"`n_context` must be positive (`inf` for the infinite-context limit); "
                         f"got {n!r}.")  # fmt: skip
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
        if c.size <= 1:
            return np.empty(0, complex)
        if c.size == 2:
            return np.array([-c[0] / c[1]], complex)
        return batched_roots(c[None])[0]

    def real_roots(self) -> np.ndarray:
        """Real roots of ``P`` in increasing order."""
        r = self.roots()
        scale = np.maximum(1.0, np.abs(r))
        return np.sort(r[np.abs(r.imag) <= 1e-10 * scale].real)


def _quadratic_roots(c: np.ndarray) -> np.ndarray:
    """Roots ``(n, 2)`` of the rows of ``c (n, 3)`` (``c0 + c1 x + c2 x²``, ``c2 != 0``).

    The cancellation-free form ``q = −(c1 + sign(c1) √disc)/2``, roots ``q/c2`` and ``c0/q``.
    """
    c0, c1, c2 = (c[:, j].astype(float) for j in range(3))
    sq = (c1 * c1 - 4.0 * c2 * c0 + 0j) ** 0.5
    sq = np.where((c1 * sq.conjugate()).real < 0, -sq, sq)
    q = -(c1 + sq) / 2.0
    zero = q == 0  # c1 = c0 = 0: a double root at 0
    qs = np.where(zero, 1.0, q)
    return np.where(zero[:, None], 0j, np.stack([q / c2, c0 / qs], axis=1))


def _polyval_rows(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Horner's rule for every row: ``P_n(x_n, ...)`` with ``c (n, k+1)``, ``x (n, ...)``."""
    c = c.reshape(c.shape + (1,) * (np.ndim(x) - 1))
    acc = c[:, -1] + x * 0
    for j in range(c.shape[1] - 2, -1, -1):
        acc = c[:, j] + acc * x
    return acc


def _polyder_rows(c: np.ndarray) -> np.ndarray:
    """Coefficients of ``P'`` for every row of ``c (n, k+1)``."""
    return c[:, 1:] * np.arange(1, c.shape[1], dtype=float)


def batched_roots(c) -> np.ndarray:
    """Complex roots ``(n, k)`` of ``n`` polynomials of one degree ``k >= 2`` (rows of ``c``).

    Degree 2 in closed form (~50x faster than eigenvalues); higher degrees as the eigenvalues of
    numpy's ``polyroots`` companion matrix (sorted the same way), then two Newton steps that are
    kept only where they reduce ``|P|``: at a multiple root ``P' ≈ 0`` and a raw Newton step can
    throw the root far away. This is the one root finder of :class:`PolynomialODE` and of the
    vectorized :func:`attn_s_learning_times`.
    """
    c = np.asarray(c, dtype=float)
    if c.ndim != 2 or c.shape[1] < 3 or np.any(c[:, -1] == 0):
        raise ValueError(f"`c` must be (n, k+1) with k >= 2 and nonzero leading terms; got {c}.")
    if c.shape[1] == 3:
        return _quadratic_roots(c)
    k = c.shape[1] - 1
    mat = np.zeros((c.shape[0], k, k))
    mat[:, np.arange(1, k), np.arange(k - 1)] = 1.0
    mat[:, :, -1] -= c[:, :-1] / c[:, -1:]
    r = np.sort(np.linalg.eigvals(mat), axis=1).astype(complex)
    dc = _polyder_rows(c)
    for _ in range(2):
        pv = _polyval_rows(r, c)
        d = _polyval_rows(r, dc)
        cand = r - pv / np.where(d != 0, d, 1.0)
        better = (d != 0) & (np.abs(_polyval_rows(cand, c)) < np.abs(pv))
        r = np.where(better, cand, r)
    return r


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
    _check_attn_s_names(dynamics, sam_form)
    if dynamics == "full":
        if a is None:
            raise ValueError(
                "`a` is required for dynamics='full'; compute it with a_coefficient()."
            )
        a = _check_positive("a", a)
    coeffs, shift = attn_s_coefficients(lam, rho, dynamics=dynamics, a=a, sam_form=sam_form)
    params = {"lam": lam, "rho": rho, **({"a": a} if dynamics == "full" else {})}
    if shift[0] > 0:
        params["shift"] = float(shift[0])
    opt = "sam" if rho > 0 else "gd"
    return PolynomialODE(tuple(float(x) for x in coeffs[0]), tau, "attn_s", opt, dynamics, params)


def _check_attn_s_names(dynamics: str, sam_form: str) -> None:
    if sam_form not in ("first_order", "exact"):
        raise ValueError(f"`sam_form` must be 'first_order' or 'exact'; got {sam_form!r}.")
    if dynamics not in ("truncated", "full"):
        raise ValueError(f"`dynamics` must be 'truncated' or 'full'; got {dynamics!r}.")


def attn_s_coefficients(
    lam, rho=0.0, *, dynamics: Dynamics = "truncated", a=None, sam_form: SamForm = "first_order"
) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the ATTN_S value ODEs ``τ v̇ = P(v)`` for many features at once.

    The one place the right-hand sides of eqs. (9)–(10), App. C.2 and exact SAM are written
    (:func:`attn_s_ode` is this for one feature). Arguments broadcast; no validation (see
    :func:`attn_s_ode`).

    Returns:
        ``coeffs (n, k+1)`` in ascending powers of ``v`` (``k = 2`` truncated, ``5`` full) and
        ``shift (n,)``: ``ρ/√3`` for exact SAM at ``ρ > 0`` (``P(v) = g(v − ρ/√3)`` with ``g``
        the GD right-hand side), else 0.
    """
    _check_attn_s_names(dynamics, sam_form)
    lam, rho = (np.ravel(x).astype(float) for x in np.broadcast_arrays(lam, rho))
    l2 = lam**2
    if dynamics == "truncated":
        # P(v) = λ² v² − (2ρ/√3) λ² v
        zero = np.zeros_like(lam)
        gd = np.stack([zero, -0.0 * l2, l2], axis=1)
        first = np.stack([zero, -(2.0 * rho / SQRT3) * l2, l2], axis=1)
    else:
        la = lam * np.broadcast_to(np.asarray(a, dtype=float), lam.shape).ravel()
        zero = np.zeros_like(lam)
        # P(v) = λ²v² − λ a v⁵ + (ρ/√3)(5 λ a v⁴ − 2 λ² v)
        k = rho / SQRT3
        gd = np.stack([zero, -0.0 * l2, l2, zero, 0.0 * la, -la], axis=1)
        first = np.stack([zero, -2.0 * k * l2, l2, zero, 5.0 * k * la, -la], axis=1)
    if sam_form == "first_order":
        return np.where((rho > 0)[:, None], first, gd), np.zeros_like(lam)
    shift = np.where(rho > 0, rho / SQRT3, 0.0)
    # g(v − shift) by Horner's rule on polynomials, as numpy's Polynomial composition does
    acc = gd[:, -1:]
    for j in range(gd.shape[1] - 2, -1, -1):
        times = np.concatenate([acc * -shift[:, None], np.zeros_like(shift)[:, None]], axis=1)
        times[:, 1:] += acc
        times[:, 0] += gd[:, j]
        acc = times
    return np.where((rho > 0)[:, None], acc, gd), shift


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


#: Reachability codes of :func:`_reach_rows` -> status (the message depends on the code).
_REACH = {0: "reached", 1: "stalls", 2: "stationary", 3: "stalls", 4: "stationary", 5: "decays",
          6: "stalls"}  # fmt: skip


def _reach_rows(coeffs, x0, x1, shift, x_max):
    """Whether each row's ``x1`` is reached from ``x0`` (``P > 0`` on ``[x0, x1]``), vectorized.

    Returns ``(code, root)``: ``code`` 0 reached; 1 target at or beyond the domain end
    ``x_max``; 2/3 exact SAM started at / below its double root ``shift``; 4 ``P(x0) = 0``;
    5 ``P(x0) < 0``; 6 a real root in ``(x0, x1]`` (``root``, else NaN), checked in this order.
    """
    n = coeffs.shape[0]
    code = np.zeros(n, dtype=int)
    root = np.full(n, np.nan)
    code[x1 >= x_max] = 1
    pend = code == 0
    code[pend & (shift > 0) & (x0 == shift)] = 2
    code[pend & (shift > 0) & (x0 < shift)] = 3
    pend = code == 0
    p0 = _polyval_rows(x0, coeffs)
    powers = np.maximum(1.0, x0)[:, None] ** np.arange(coeffs.shape[1])
    scale = np.max(np.abs(coeffs) * powers, axis=1)
    stationary = np.abs(p0) <= 1e-14 * scale
    code[pend & stationary] = 4
    code[pend & ~stationary & (p0 < 0)] = 5
    pend = code == 0
    if np.any(pend):
        c = coeffs[pend]
        k = c.shape[1] - 1
        while k > 0 and np.all(c[:, k] == 0):
            k -= 1
        c = c[:, : k + 1]
        if k >= 2:
            r = batched_roots(c)
        elif k == 1:
            r = (-c[:, :1] / c[:, 1:]).astype(complex)
        else:
            r = np.empty((c.shape[0], 0), complex)
        real = np.abs(r.imag) <= 1e-10 * np.maximum(1.0, np.abs(r))
        inside = real & (r.real > x0[pend, None]) & (r.real <= x1[pend, None])
        first = np.min(np.where(inside, r.real, np.inf), axis=1, initial=np.inf)
        hit = np.isfinite(first)
        idx = np.flatnonzero(pend)[hit]
        code[idx] = 6
        root[idx] = first[hit]
    return code, root


def _reachability(ode: PolynomialODE, x0: float, x1: float) -> tuple[Status, str]:
    """Decide whether ``x1`` is reached from ``x0`` (``P > 0`` on ``[x0, x1]``) and say why not."""
    code, root = _reach_rows(
        np.asarray([ode.coeffs], dtype=float), np.array([x0]), np.array([x1]),
        np.array([ode.params.get("shift", 0.0)]), np.array([ode.x_max]),
    )  # fmt: skip
    return _REACH[int(code[0])], _reach_message(ode, int(code[0]), x0, x1, float(root[0]))


def _reach_message(ode: PolynomialODE, code: int, x0: float, x1: float, root: float) -> str:
    """The sentence explaining a :func:`_reach_rows` code for ``ode``."""
    shift = ode.params.get("shift", 0.0)
    if code == 0:
        return "reached"
    if code == 1:
        return (
            f"target {x1:.6g} is at or beyond the end of the ODE's domain {ode.x_max:.6g} "
            "(Theorem B.2: u = sqrt(gamma/alpha) is the stable equilibrium)"
        )
    if code == 2:
        return f"x0 = {x0:.6g} = ρ/√3 is a fixed point of exact SAM"
    if code == 3:
        return (
            f"exact SAM stalls: v0 = {x0:.6g} is below ρ/√3 = {shift:.6g}, where the perturbed "
            "point has v < 0; v creeps up to ρ/√3 and never passes it (needs ρ < √3 v0)"
        )
    if code == 4:
        return f"x0 = {x0:.6g} is a fixed point of the ODE (P(x0) = 0)"
    if code == 5:
        if ode.optimizer == "sam" and ode.model == "attn_s":
            bound = rho_hat(ode.params["rho"])
            return (
                f"SAM decays: v0 = {x0:.6g} is below the unstable point (~2ρ/√3 = {bound:.6g}), "
                "so v shrinks to 0 and the feature is never learned (needs ρ < (√3/2) v0)"
            )
        p0 = float(ode.P(x0))
        return f"P(x0) = {p0:.3g} < 0: x decreases from x0 and never reaches {x1:.6g}"
    return (
        f"x stalls at the stable fixed point {root:.6g} below the target {x1:.6g} "
        "(lower c or raise the endpoint's fixed point)"
    )


def _closed_form_time(ode: PolynomialODE, x0: float, x1: float) -> float:
    """Closed-form ``τ ∫_{x0}^{x1} dx / P(x)`` (assumes reachability was checked)."""
    p, tau = ode.params, ode.tau
    if ode.model == "attn_s":
        t = _attn_s_closed_rows(
            np.asarray([ode.coeffs], dtype=float), np.array([p["lam"]]), np.array([p["rho"]]),
            np.array([p.get("a", np.nan)]), np.array([p.get("shift", 0.0)]), np.array([x0]),
            np.array([x1]), tau, ode.dynamics,
        )  # fmt: skip
        return float(t[0])
    if ode.model == "merged_kq" and ode.dynamics == "full":
        return _lemma_b4_time(p["gamma"], p["alpha"], p["rho"], x0, x1, tau)
    if ode.model == "merged_kq" and ode.dynamics == "truncated":
        g, ra = p["gamma"], p["rho"] * p["alpha"]
        # Theorem B.3: t = (τ/γ) ln[u*(γ + ραu0) / (u0 (γ + ραu*))]
        return tau / g * (math.log(x1 / x0) + math.log1p(ra * x0 / g) - math.log1p(ra * x1 / g))
    return float(_partial_fraction_rows(np.asarray([ode.coeffs], float), np.array([x0]),
                                        np.array([x1]), tau)[0])  # fmt: skip


def _attn_s_closed_rows(coeffs, lam, rho, a, shift, x0, x1, tau, dynamics):
    """Closed-form ATTN_S learning times of reachable rows.

    Eq. (23) and C.4 (truncated), elementary (full GD), partial fractions (full first-order
    SAM); exact SAM is GD between the shifted endpoints.
    """
    ex = shift > 0
    w0, w1 = np.where(ex, x0 - shift, x0), np.where(ex, x1 - shift, x1)
    l2 = lam**2
    if dynamics == "truncated":
        rh = np.where(ex, 0.0, 2.0 * rho / SQRT3)
        gd = tau / l2 * (1.0 / w0 - 1.0 / w1)  # eq. (23) with I₁: τ/λ² (1/ε − 1/u)
        with np.errstate(divide="ignore", invalid="ignore"):
            # I₂(u) = (1/ρ̂) ln[(1 − ρ̂/u)/(1 − ρ̂/ε)]  (C.4), written with log1p for accuracy
            sam = tau / (l2 * rh) * (np.log1p(-rh / w1) - np.log1p(-rh / w0))
        return np.where(rh == 0.0, gd, sam)
    gd_rows = ex | (rho == 0.0)
    out = np.empty(lam.shape)
    out[gd_rows] = _gd_full_time(lam[gd_rows], a[gd_rows], w0[gd_rows], w1[gd_rows], tau)
    sam = ~gd_rows
    if np.any(sam):
        out[sam] = _partial_fraction_rows(coeffs[sam], x0[sam], x1[sam], tau)
    return out


def _gd_full_time(lam, a, x0, x1, tau: float):
    """Full GD, ``τ v̇ = λ v² (λ − a v³)``, integrated in elementary functions (vectorized).

    With ``b³ = λ/a`` (the fixed point), ``1/(v²(b³ − v³)) = 1/(b³v²) + v/(b³(b³ − v³))`` and
    ``∫ v/(b³ − v³) dv = ln((v² + bv + b²)/(b − v)²)/(6b) − arctan((2v + b)/(b√3))/(b√3)``, so
    ``t = (τ/λ²) [1/x0 − 1/x1 + F(x1) − F(x0)]``.
    """
    b = (lam / a) ** (1.0 / 3.0)

    def F(v):
        return np.log((v * v + b * v + b * b) / (b - v) ** 2) / (6.0 * b) - np.arctan(
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


def _partial_fraction_rows(c, x0, x1, tau: float) -> np.ndarray:
    """``τ ∫ dx/P`` by partial fractions over the (simple) roots of ``P``, row by row.

    Used for full SAM, whose quintic has no elementary roots: the antiderivative is exact given the
    roots (companion-matrix eigenvalues polished by Newton steps). Every ODE here has ``P(0) = 0``;
    writing ``P = x p(x)`` with simple nonzero roots ``r_j`` of ``p``, the residues of ``1/P`` sum
    to zero, so ``∫ dx/P = Σ_j B_j ln(1 − r_j/x)`` with ``B_j = 1/(r_j p'(r_j))``. Each term is
    evaluated as ``[log1p(−r_j/x1) − log1p(−r_j/x0)] / r_j / p'(r_j)``, which stays accurate when a
    root of ``p`` approaches 0 (SAM with tiny ρ: roots 0 and ≈ρ̂ nearly coincide, and the textbook
    form ``A ln x + B ln(x − ρ̂)`` cancels catastrophically). Along the real segment ``1 − r_j/x``
    stays in one half-plane, so the principal logarithm is the right branch.
    """
    c = np.asarray(c, dtype=float)
    if np.any(c[:, 0] != 0.0):
        raise ArithmeticError("partial fractions here assume P(0) = 0.")
    q = c[:, 1:]  # p(x) = P(x)/x
    if np.any(q[:, 0] == 0.0):
        raise ArithmeticError("P has a double root at 0; use the GD closed form.")
    r = batched_roots(q)
    d = _polyval_rows(r, _polyder_rows(q))
    if np.any(np.abs(d) < 1e-12 * np.max(np.abs(d), axis=1, keepdims=True)):
        raise ArithmeticError("P has a repeated root; partial fractions need simple roots.")
    # g_j = [ln(1 − r_j/x1) − ln(1 − r_j/x0)] / r_j. Real roots in real arithmetic (numpy's complex
    # log1p loses digits for tiny arguments), with |1 − r/x| (both ends share its sign when the
    # target is reachable); for |r| ≪ x0 the Taylor series, which also makes the result
    # insensitive to the root's absolute rounding error near 0.
    a0, a1 = x0[:, None], x1[:, None]
    tiny = np.abs(r) < 1e-6 * a0
    real = ~tiny & (np.abs(r.imag) <= 1e-14 * np.abs(r))
    with np.errstate(divide="ignore", invalid="ignore"):
        g_tiny = (1.0 / a0 - 1.0 / a1) + r / 2.0 * (1.0 / a0**2 - 1.0 / a1**2)
        re = np.where(real, r.real, 1.0)
        g_real = (_log_abs_1m(re / a1) - _log_abs_1m(re / a0)) / re
        rc = np.where(tiny | real, 1.0, r)
        g_cplx = (np.log(1.0 - rc / a1) - np.log(1.0 - rc / a0)) / rc
    g = np.where(tiny, g_tiny, np.where(real, g_real + 0j, g_cplx))
    return tau * np.sum(g / d, axis=1).real


def _log_abs_1m(y):
    """``ln|1 − y|`` accurately for small ``|y|`` (vectorized)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(y < 0.5, np.log1p(-np.minimum(y, 0.5)), np.log(np.abs(1.0 - y)))


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
class LearningTimes:
    """Closed-form learning times of many ATTN_S features (:func:`attn_s_learning_times`).

    Attributes:
        time: ``(n,)`` learning times (``inf`` where the target is never reached).
        status: ``(n,)`` ``"reached"``, ``"decays"``, ``"stalls"`` or ``"stationary"``.
    """

    time: np.ndarray
    status: np.ndarray

    @property
    def success(self) -> np.ndarray:
        """Where the target was reached."""
        return self.status == "reached"


def attn_s_learning_times(
    lam, x0, x1, *, rho=0.0, dynamics: Dynamics = "truncated", a=None, tau: float = 1.0,
    sam_form: SamForm = "first_order",
) -> LearningTimes:  # fmt: skip
    """:func:`learning_time` (closed forms) of the ATTN_S value ODEs for many features at once.

    The same reachability test and closed forms as the scalar path (which calls this kernel
    with one row), vectorized over features: no Python loop, one batched eigenvalue call for the
    roots of full first-order SAM. Arguments broadcast to one length ``n``; the scalar
    :func:`learning_time` gives the sentence behind a status that is not ``"reached"``.

    Args:
        lam: eigenvalues ``λ_i > 0``.
        x0: starts ``ε > 0``.
        x1: targets ``> x0`` (e.g. ``c λ_i^{-1/3}``).
        rho: SAM radii ``>= 0`` (0: GD).
        dynamics: ``"truncated"`` or ``"full"`` (needs ``a``).
        a: ``a_i`` of App. C.1 (:func:`a_coefficient`), for ``"full"``.
        tau: time constant.
        sam_form: ``"first_order"`` or ``"exact"`` (see :func:`attn_s_ode`).

    Raises:
        ValueError: on non-positive or non-finite inputs, ``x1 <= x0`` or missing ``a``.
    """
    tau = _check_positive("tau", tau)
    _check_attn_s_names(dynamics, sam_form)
    if dynamics == "full" and a is None:
        raise ValueError("`a` is required for dynamics='full'; compute it with a_coefficient().")
    arrays = np.broadcast_arrays(lam, x0, x1, rho, np.nan if a is None else a)
    lam, x0, x1, rho, a = (np.ravel(x).astype(float) for x in arrays)
    for name, v, zero_ok in (("lam", lam, False), ("x0", x0, False), ("x1", x1, False),
                             ("rho", rho, True), *((("a", a, False),) if dynamics == "full"
                                                   else ())):  # fmt: skip
        bad = ~np.isfinite(v) | ((v < 0) if zero_ok else (v <= 0))
        if np.any(bad):
            raise ValueError(f"`{name}` must be finite and {'>= 0' if zero_ok else '> 0'}; got "
                             f"{v[bad][:3].tolist()} (first bad values).")  # fmt: skip
    if np.any(x1 <= x0):
        raise ValueError("`x1` must exceed `x0` (learning means growth); raise c or lower eps.")
    coeffs, shift = attn_s_coefficients(lam, rho, dynamics=dynamics, a=a, sam_form=sam_form)
    code, _ = _reach_rows(coeffs, x0, x1, shift, np.full(lam.shape, np.inf))
    ok = code == 0
    time = np.full(lam.shape, np.inf)
    time[ok] = _attn_s_closed_rows(coeffs[ok], lam[ok], rho[ok], a[ok], shift[ok], x0[ok], x1[ok],
                                   tau, dynamics)  # fmt: skip
    if not np.all((time[ok] > 0) & np.isfinite(time[ok])):
        raise ArithmeticError("a closed form gave a non-positive time for a reachable target.")
    status = np.array([_REACH[k] for k in range(7)])[code]
    return LearningTimes(time, status)


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
