"""Measurements on trajectories: learning times, their entropy, drop times (Section 4.3).

* :func:`learning_times`: per-feature time ``T_i`` = first step at which the eigen-component
  ``e_iᵀ M e_i`` reaches a fraction ``c`` of its fixed-point value ``c_i*`` (the simulation analog
  of Theorem 4.4's ``t_i``, which integrates each feature's ODE from the common start to
  ``c λ_i^{-1/3}``; the component is head-agnostic, so it works from random initializations).
* :func:`loss_drop_times`: first step at which the loss falls below the midpoint between
  consecutive saddle levels ``L(M_{i-1})`` and ``L(M_i)``.
* :func:`time_entropy`: Shannon entropy of the sum-normalized times (eq. 11), via
  :func:`sims.entropy.shannon_entropy`; NaN when any time is missing (feature never learned).
  It is scale-free (``c·t`` has the entropy of ``t``) but not shift-free: times are counted from
  step 0, the common start of Theorem 4.4.
* :func:`phase_durations`: ``t_i − t_{i−1}`` (``t_0 = 0``), the plateau-plus-drop durations.
* :func:`feature_counts`: how many features a run has learned by a horizon.
"""

from __future__ import annotations

import numpy as np

from sims.entropy import shannon_entropy

__all__ = [
    "learning_times",
    "loss_drop_times",
    "time_entropy",
    "entropies",
    "phase_durations",
    "feature_counts",
    "quantiles",
]


def learning_times(components, targets, *, fraction: float = 0.5) -> np.ndarray:
    """First index where ``components[..., t, i] >= fraction * targets[i]`` (NaN if never).

    Args:
        components: ``(..., T, d)`` eigen-components of ``M`` along a trajectory.
        targets: ``(d,)`` fixed-point components ``c_i*`` (positive).
        fraction: ``c`` in (0, 1].

    Returns:
        ``(..., d)`` float array of step indices (NaN where the level is never reached).
    """
    comp = np.asarray(components, dtype=float)
    tgt = np.asarray(targets, dtype=float)
    if comp.ndim < 2 or comp.shape[-1] != tgt.shape[-1]:
        raise ValueError(
            f"`components` must be (..., T, d) with d={tgt.shape[-1]} matching `targets`; "
            f"got {comp.shape}."
        )
    if not 0 < fraction <= 1:
        raise ValueError(f"`fraction` must be in (0, 1]; got {fraction!r}.")
    hit = comp >= fraction * tgt
    first = np.argmax(hit, axis=-2).astype(float)
    first[~np.any(hit, axis=-2)] = np.nan
    return first


def loss_drop_times(losses, saddle_levels) -> np.ndarray:
    """First index where ``loss <= (L(M_{i-1}) + L(M_i)) / 2``, ``i = 1..d`` (NaN if never).

    Args:
        losses: ``(..., T)`` loss trajectories.
        saddle_levels: ``(d+1,)`` from :func:`sims.linear_attention.stats.saddle_losses`.
    """
    loss = np.asarray(losses, dtype=float)
    lv = np.asarray(saddle_levels, dtype=float)
    mids = 0.5 * (lv[:-1] + lv[1:])  # (d,)
    hit = loss[..., :, None] <= mids  # (..., T, d)
    first = np.argmax(hit, axis=-2).astype(float)
    first[~np.any(hit, axis=-2)] = np.nan
    return first


def time_entropy(times) -> float:
    """Entropy of sum-normalized learning times (eq. 11); NaN if any time is NaN."""
    t = np.asarray(times, dtype=float)
    if t.size == 0 or np.any(~np.isfinite(t)):
        return float("nan")
    if np.any(t < 0) or t.sum() <= 0:
        raise ValueError(f"`times` must be >= 0 with a positive sum; got {t.tolist()}.")
    return float(shannon_entropy(t))


def entropies(times, n_features: int | None = None) -> np.ndarray:
    """Row-wise :func:`time_entropy` of ``times[..., :n_features]``."""
    t = np.asarray(times, dtype=float)
    if n_features is not None:
        t = t[..., :n_features]
    flat = t.reshape(-1, t.shape[-1])
    return np.array([time_entropy(row) for row in flat]).reshape(t.shape[:-1])


def phase_durations(times) -> np.ndarray:
    """``t_i − t_{i−1}`` along the last axis with ``t_0 = 0`` (NaN propagates)."""
    t = np.asarray(times, dtype=float)
    return np.diff(t, axis=-1, prepend=0.0)


def feature_counts(times, horizon: int) -> np.ndarray:
    """Number of features learned before step ``horizon`` (``times < horizon``; NaN = never)."""
    t = np.asarray(times, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.sum(np.isfinite(t) & (t < horizon), axis=-1)


def quantiles(x, qs=(0.25, 0.5, 0.75)) -> np.ndarray:
    """Quantiles over runs (ignoring NaN)."""
    return np.nanquantile(np.asarray(x, dtype=float), qs)
