"""Reduced models of ATTN_S on the multi-head ansatz: the numerics the simulations compare with.

Main paper, eqs. (6)-(10), App. C.2, Sec. 5. On the ansatz (head ``i`` at ``k_i = q_i = v_i e_i``,
population loss) a head's value obeys ``τ v̇ = G(v) = σ v² − κ v⁵`` under GD (``σ_i = s λ_i²``,
``κ_i = s² λ_i a_i`` with the output scale ``s``). SAM's global normalization shares its radius
between the heads in proportion to their gradient (share ``s_i = G_i/‖G‖``; head-wise: ``sign
G_i``); one step of size ``η`` is ``2η`` time units of ``τ Ẇ = −½∇L`` with ``τ = 1``::

    exact SAM:        v_i ← v_i + 2η G_i(v_i − c s_i)
    first-order SAM:  v_i ← v_i + 2η [G_i(v_i) − c s_i G_i'(v_i)],      c = ρ/√3

Usage weights ``1 + f·1_S`` multiply a feature's signal ``σ_i`` by the boost
``r_i = (1 + f π m_i)/(1 + f π)`` (``π`` the selected share, ``m_i`` the enrichment of the
feature's signal in the selection); the entropy of the learning times rises when ``r_i`` is
non-decreasing in ``i``.

This module holds the numbers; :mod:`theory.sam_saddle` and :mod:`theory.upsampling` derive them
(SymPy claims pin :func:`ansatz_rate`, :func:`reduced_rate`, one step of :func:`reduced_map`,
:func:`ansatz_gd_time` and :func:`boost` to their symbolic forms), and
:mod:`sims.linear_attention` measures the full model against them. numpy only.

Examples:
    >>> round(float(ansatz_gd_time(1.0, 0.0, 0.1, 1.0)), 12)  # κ = 0: (1/v0 − 1/v1)/σ
    9.0
    >>> boost([1.0, 2.0], 0.5).tolist()  # (1 + π m)/(1 + π) at f = 1
    [1.0, 1.3333333333333333]
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "FORMS",
    "NORMALIZATIONS",
    "ansatz_rate",
    "ansatz_rate_prime",
    "ansatz_gd_time",
    "calibrate_start",
    "reduced_rate",
    "reduced_map",
    "figure1_ansatz",
    "figure1_coefficients",
    "time_entropy",
    "boost",
    "entropy_change",
    "condition_holds",
]

FORMS = ("exact", "first_order")
NORMALIZATIONS = ("global", "headwise")
SQRT3 = math.sqrt(3.0)


def ansatz_rate(v, sigma, kappa):
    """``G(v) = σ v² − κ v⁵``: ``τ v̇`` of a head on the ansatz under GD (App. C.2)."""
    v = np.asarray(v, dtype=float)
    return sigma * v**2 - kappa * v**5


def ansatz_rate_prime(v, sigma, kappa):
    """``G'(v) = 2σ v − 5κ v⁴``."""
    v = np.asarray(v, dtype=float)
    return 2.0 * sigma * v - 5.0 * kappa * v**4


def _antiderivative(z):
    """``F(z) = ∫ dz / (z²(1 − z³))`` for ``0 < z < 1`` (claim ``ansatz_gd_time_closed_form``)."""
    z = np.asarray(z, dtype=float)
    return (-1.0 / z - np.log1p(-z) / 3.0 + np.log(z * z + z + 1.0) / 6.0
            - np.arctan((2.0 * z + 1.0) / SQRT3) / SQRT3)  # fmt: skip


def ansatz_gd_time(sigma, kappa, v0, v1):
    """GD time ``∫_{v0}^{v1} dv / (σ v² − κ v⁵)`` (``τ = 1``), closed form, vectorized.

    With ``z = (κ/σ)^{1/3} v`` the integrand is ``(κ/σ)^{1/3}/σ · 1/(z²(1 − z³))``. Requires
    ``0 < v0 < v1 < (σ/κ)^{1/3}`` (below the fixed point); ``κ = 0`` gives ``(1/v0 − 1/v1)/σ``.

    Raises:
        ValueError: for non-positive ``sigma``, negative ``kappa`` or endpoints out of range.
    """
    sigma, kappa, v0, v1 = np.broadcast_arrays(*(np.asarray(x, dtype=float)
                                                for x in (sigma, kappa, v0, v1)))  # fmt: skip
    if np.any(sigma <= 0) or np.any(kappa < 0):
        raise ValueError(f"`sigma` must be > 0 and `kappa` >= 0; got {sigma=}, {kappa=}.")
    if np.any(v0 <= 0) or np.any(v1 <= v0):
        raise ValueError(f"need 0 < v0 < v1; got v0={v0}, v1={v1}.")
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.cbrt(kappa / sigma)
        z0, z1 = scale * v0, scale * v1
    if np.any((kappa > 0) & (z1 >= 1)):
        raise ValueError("`v1` must lie below the fixed point (σ/κ)^{1/3}; the time is infinite.")
    pure = (1.0 / v0 - 1.0 / v1) / sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        full = scale / sigma * (_antiderivative(z1) - _antiderivative(z0))
    small = z1 < 1e-3  # the closed form cancels catastrophically; use the series
    series = pure + kappa / sigma**2 * (v1**2 - v0**2) / 2.0
    return np.where(kappa == 0, pure, np.where(small, series, full))


def calibrate_start(times, sigma, kappa, v1, *, lo: float = 1e-9):
    """Start values ``v0`` whose GD time to ``v1`` equals ``times`` (inverse of ansatz_gd_time).

    Used to give the reduced model each feature's effective initial size from a simulated GD
    run (whose heads do not start on the ansatz). Bisection in ``log v0`` (80 halvings), fully
    vectorized; NaN where ``times`` is NaN.
    """
    t = np.asarray(times, dtype=float)
    sigma, kappa, v1 = (np.broadcast_to(np.asarray(x, float), t.shape) for x in (sigma, kappa, v1))
    a = np.full(t.shape, math.log(lo))
    b = np.log(v1 * (1 - 1e-12))
    ok = np.isfinite(t)
    for _ in range(80):
        mid = 0.5 * (a + b)
        tm = ansatz_gd_time(sigma, kappa, np.exp(mid), v1)
        longer = tm > np.where(ok, t, 0.0)  # start too small: move up
        a = np.where(longer, mid, a)
        b = np.where(longer, b, mid)
    return np.where(ok, np.exp(0.5 * (a + b)), np.nan)


def _rate(v, sigma, kappa, c, exact, glob):
    """SAM rate on the ansatz with radius ``c = ρ/√3`` per run (``exact``/``glob``: per-run masks).

    The one implementation of the reduced SAM rate: :func:`reduced_rate` and every step of
    :func:`reduced_map` call it.
    """
    g = ansatz_rate(v, sigma, kappa)
    n = np.sqrt(np.sum(g * g, axis=-1, keepdims=True))
    share = np.where(glob, g / np.where(n > 0, n, 1.0), np.sign(g))
    return np.where(exact, ansatz_rate(v - c * share, sigma, kappa),
                    g - c * share * ansatz_rate_prime(v, sigma, kappa))  # fmt: skip


def _check_names(form, normalization, n_runs=None):
    forms = np.asarray(form) if n_runs is None else np.broadcast_to(np.asarray(form), (n_runs,))
    norms = (np.asarray(normalization) if n_runs is None
             else np.broadcast_to(np.asarray(normalization), (n_runs,)))  # fmt: skip
    if not set(np.ravel(forms).tolist()) <= set(FORMS):
        raise ValueError(f"`form` must be one of {FORMS}; got {sorted(set(np.ravel(forms)))}.")
    if not set(np.ravel(norms).tolist()) <= set(NORMALIZATIONS):
        raise ValueError(f"`normalization` must be one of {NORMALIZATIONS}; got "
                         f"{sorted(set(np.ravel(norms)))}.")  # fmt: skip
    return forms == "exact", norms == "global"


def reduced_rate(v, sigma, kappa, rho, *, form: str = "exact", normalization: str = "global"):
    """Value rate of every head under SAM on the multi-head ansatz (module docstring).

    Args:
        v: ``(..., M)`` values of the ``M`` active heads.
        sigma: ``(M,)`` (or broadcastable) signal ``σ`` of :func:`ansatz_rate`.
        kappa: ``(M,)`` (or broadcastable) coefficient ``κ`` of :func:`ansatz_rate`.
        rho: SAM radius (0 gives GD).
        form: ``"exact"`` (eq. 6) or ``"first_order"`` (eq. 8).
        normalization: ``"global"`` (eq. 6: shares ``G_i/‖G‖``) or ``"headwise"`` (eq. 22 for
            every head: shares ``sign G_i``).
    """
    if form not in FORMS:
        raise ValueError(f"`form` must be one of {FORMS}; got {form!r}.")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"`normalization` must be one of {NORMALIZATIONS}; got {normalization!r}.")
    if rho == 0:
        return ansatz_rate(v, sigma, kappa)
    return _rate(np.asarray(v, dtype=float), sigma, kappa, rho / SQRT3, form == "exact",
                 normalization == "global")  # fmt: skip


def reduced_map(v0, sigma, kappa, thresholds, *, rho, eta: float, n_steps: int,
                form="exact", normalization="global") -> np.ndarray:  # fmt: skip
    """Iterate ``v ← v + 2η rate(v)`` and return the first step each head reaches its threshold.

    This *is* discrete GD/SAM on the multi-head ansatz (claim
    ``sam_multihead_ansatz_reduction``), so it reproduces the full model started there. Each step
    uses :func:`reduced_rate`'s kernel (claim ``reduced_map_step_is_the_rate``).

    Args:
        v0: ``(R, M)`` start values (``R`` independent runs).
        sigma: ``(M,)`` or ``(R, M)`` signals.
        kappa: ``(M,)`` or ``(R, M)`` coefficients.
        thresholds: ``(M,)`` or ``(R, M)`` values at which a head counts as arrived.
        rho: SAM radius, a scalar or ``(R,)`` (one per run; 0 gives GD).
        eta: learning rate.
        n_steps: iterations (stops early once every head of every run has arrived).
        form: see :func:`reduced_rate`; a name, or one name per run (several variants
            advance in one vectorized loop).
        normalization: as ``form``.

    Returns:
        ``(R, M)`` first steps (float; NaN where never reached).
    """
    v = np.array(v0, dtype=float, ndmin=2)
    n_runs = v.shape[0]
    thr = np.broadcast_to(np.asarray(thresholds, float), v.shape)
    sigma = np.broadcast_to(np.asarray(sigma, float), v.shape)
    kappa = np.broadcast_to(np.asarray(kappa, float), v.shape)
    exact, glob = _check_names(form, normalization, n_runs)
    c = (np.broadcast_to(np.asarray(rho, float), (n_runs,)) / SQRT3)[:, None]
    exact, glob = exact[:, None], glob[:, None]
    hit = np.full(v.shape, np.nan)
    for t in range(int(n_steps)):
        new = np.isnan(hit) & (v >= thr)
        hit[new] = t
        if t % 256 == 0 and not np.isnan(hit).any():
            break
        v = v + 2.0 * eta * _rate(v, sigma, kappa, c, exact, glob)
    return hit


def time_entropy(times) -> np.ndarray:
    """Entropy (nats) of sum-normalized times along the last axis (eq. 11); NaN if any NaN."""
    t = np.asarray(times, dtype=float)
    p = t / t.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=-1)
    return np.where(np.all(np.isfinite(t), axis=-1), h, np.nan)


#: Figure 1's spectrum (λ ∝ 4:3:2:1, trace 1).
FIGURE1_LAMBDA = (0.4, 0.3, 0.2, 0.1)


def figure1_coefficients(n_context: int = 31, scale: float = 31.0, fraction: float = 0.5):
    """``σ, κ`` of the ansatz ODE at Figure 1's population setting, and the learning thresholds.

    ``a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N)`` (App. C.1), ``σ = s λ²``, ``κ = s² λ a``; a head counts
    as learned at ``v³ = fraction × σ/κ`` (the simulation's criterion on the component).

    Returns:
        ``(lam, sigma, kappa, thresholds)``, each ``(4,)``.
    """
    lam = np.array(FIGURE1_LAMBDA)
    a = lam**2 * (1 + (1 + lam.sum() / lam) / n_context)
    sigma, kappa = scale * lam**2, scale**2 * lam * a
    return lam, sigma, kappa, np.cbrt(fraction * sigma / kappa)


@functools.lru_cache(maxsize=4)
def figure1_ansatz(eps: float = 2e-3, rho: float = 1e-3, eta: float = 0.02, n_context: int = 31,
                   scale: float = 31.0, fraction: float = 0.5) -> dict:  # fmt: skip
    """The reduced model at Figure 1's setting: λ ∝ (4, 3, 2, 1)/10, all heads start at ε.

    Returns learning steps for GD and for SAM in each (form, normalization), and the thresholds
    (``v³ = fraction × c_i*``, the simulation's learning criterion).
    """
    lam, sigma, kappa, thr = figure1_coefficients(n_context, scale, fraction)
    keys = ["gd"] + [f"{f}/{n}" for f in FORMS for n in NORMALIZATIONS]
    forms = ["exact"] + [k.split("/")[0] for k in keys[1:]]
    norms = ["global"] + [k.split("/")[1] for k in keys[1:]]
    rhos = [0.0] + [rho] * (len(keys) - 1)
    n = int(2.5 * ansatz_gd_time(sigma[-1], kappa[-1], eps, thr[-1]) / (2 * eta))
    hits = reduced_map(np.full((len(keys), 4), eps), sigma, kappa, thr, rho=np.array(rhos),
                       eta=eta, n_steps=n, form=forms, normalization=norms)  # fmt: skip
    out = {"lam": lam, "sigma": sigma, "kappa": kappa, "threshold": thr}
    out.update({k: hits[i] for i, k in enumerate(keys)})
    return out


# --- upsampling (theory.upsampling derives these) ----------------------------------------------


def boost(enrichment, fraction: float, factor: int = 1):
    """``r_i = (1 + f π m_i)/(1 + f π)``: the signal boost of usage weights ``1 + f·1_S``."""
    m = np.asarray(enrichment, dtype=float)
    return (1.0 + factor * fraction * m) / (1.0 + factor * fraction)


def entropy_change(times_gd, boosts) -> np.ndarray:
    """``H(T/r) − H(T)`` for early-time scaling ``t_i = T_i / r_i`` (last axis = features)."""
    t = np.asarray(times_gd, dtype=float)
    return time_entropy(t / np.asarray(boosts, dtype=float)) - time_entropy(t)


def condition_holds(boosts, *, rtol: float = 0.0) -> np.ndarray:
    """Whether ``r_i`` is non-decreasing in ``i`` (features ordered by decreasing ``λ``)."""
    r = np.asarray(boosts, dtype=float)
    return np.all(np.diff(r, axis=-1) >= -rtol * np.abs(r[..., 1:]), axis=-1)
