"""Entropy of normalized sequences and vector majorization (main paper Sec. 4.3, App. C.4–C.5).

The paper measures simplicity bias by the Shannon entropy of the sum-normalized learning times
(eq. 11): ``p_i = t_i / sum_j t_j``, ``Entropy = -sum_i p_i log p_i`` (natural log). A more uniform
time profile has higher entropy. Theorem 4.4 proves the ordering through majorization
(Definition C.1): the normalized GD profile majorizes the SAM profile (Lemma C.2), and entropy is
strictly Schur-concave (Lemma C.4).

Examples:
    >>> bool(np.isclose(shannon_entropy([1, 1, 1]), np.log(3)))
    True
    >>> m = majorization([0.6, 0.3, 0.1], [0.4, 0.35, 0.25])
    >>> bool(m.holds), round(float(m.min_margin), 3)
    (True, 0.15)
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "normalize",
    "shannon_entropy",
    "Majorization",
    "majorization",
    "majorizes",
    "renormalized_reweighting",
    "lorenz_curve",
]


def _as_positive_vector(x: ArrayLike, name: str, *, allow_zero: bool = True) -> NDArray:
    arr = np.asarray(x, dtype=float)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D sequence; got shape {arr.shape}.")
    if not np.all(np.isfinite(arr)):
        raise ValueError(
            f"`{name}` must be finite; got {arr.tolist()}. Infinite learning times mean a feature "
            "is never learned: report it instead of normalizing."
        )
    bad = arr < 0 if allow_zero else arr <= 0
    if np.any(bad):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"`{name}` must be {kind}; got {arr.tolist()}.")
    if arr.sum() <= 0:
        raise ValueError(f"`{name}` must have a positive sum; got {arr.tolist()}.")
    return arr


def normalize(x: ArrayLike) -> NDArray:
    """Sum-normalize a non-negative sequence into a probability vector (``p_i = x_i / sum x``)."""
    arr = _as_positive_vector(x, "x")
    return arr / arr.sum()


def shannon_entropy(x: ArrayLike) -> float:
    """Shannon entropy (nats) of the sum-normalized sequence ``x`` (main paper eq. 11).

    Zero entries contribute 0 (the limit of ``p log p``).

    Args:
        x: non-negative values with a positive sum (e.g. per-feature learning times).

    Returns:
        ``-sum_i p_i log p_i`` with ``p = x / sum(x)``; between 0 and ``log(len(x))``.
    """
    p = normalize(x)
    nz = p[p > 0]
    return float(-np.sum(nz * np.log(nz)))


@dataclasses.dataclass(frozen=True)
class Majorization:
    """Result of testing ``x ≻ y`` (Definition C.1).

    Attributes:
        holds: whether ``x`` majorizes ``y`` (within ``atol``).
        margins: partial-sum margins ``sum_{i<=k} x↓_i - sum_{i<=k} y↓_i`` for ``k = 1..n-1``;
            majorization means all are >= 0.
        min_margin: the smallest margin (``inf`` for ``n = 1``).
        total_gap: ``sum(x) - sum(y)`` (must be 0).
        strict: ``holds`` and ``y`` is not a permutation of ``x``.
    """

    holds: bool
    margins: NDArray
    min_margin: float
    total_gap: float
    strict: bool


def majorization(x: ArrayLike, y: ArrayLike, *, atol: float = 1e-12) -> Majorization:
    """Test vector majorization ``x ≻ y`` (main paper Definition C.1) and return the margins.

    Args:
        x: the vector claimed to be more spread out.
        y: the vector claimed to be more even (same length as ``x``).
        atol: tolerance for the partial-sum inequalities and for equality of the totals.
    """
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    if xa.ndim != 1 or ya.ndim != 1 or xa.shape != ya.shape or xa.size == 0:
        raise ValueError(
            f"`x` and `y` must be non-empty 1-D vectors of equal length; got {xa.shape=} and "
            f"{ya.shape=}."
        )
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise ValueError("`x` and `y` must be finite.")
    xs = np.sort(xa)[::-1]
    ys = np.sort(ya)[::-1]
    margins = np.cumsum(xs)[:-1] - np.cumsum(ys)[:-1]
    total_gap = float(xs.sum() - ys.sum())
    scale = max(1.0, float(np.abs(xs).sum()))
    holds = bool(np.all(margins >= -atol * scale) and abs(total_gap) <= atol * scale)
    strict = holds and not np.allclose(xs, ys, rtol=0, atol=atol * scale)
    min_margin = float(margins.min()) if margins.size else float("inf")
    return Majorization(holds, margins, min_margin, total_gap, strict)


def majorizes(x: ArrayLike, y: ArrayLike, *, atol: float = 1e-12) -> bool:
    """``True`` when ``x ≻ y`` (Definition C.1)."""
    return majorization(x, y, atol=atol).holds


def renormalized_reweighting(a: ArrayLike, w: ArrayLike) -> NDArray:
    """Lemma C.2's renormalized reweighting ``B_i = A_i w_i / sum_j A_j w_j``.

    Lemma C.2: if ``A`` is a probability vector sorted non-increasingly, ``w`` is positive and
    non-decreasing, and ``B`` comes out sorted non-increasingly, then ``A ≻ B``. This function only
    computes ``B``; the lemma is checked in the tests.

    Args:
        a: non-negative weights ``A`` (normalized internally).
        w: positive reweighting factors, same length.
    """
    av = normalize(a)
    wv = _as_positive_vector(w, "w", allow_zero=False)
    if wv.shape != av.shape:
        raise ValueError(f"`a` and `w` must have equal length; got {av.shape=} and {wv.shape=}.")
    b = av * wv
    return b / b.sum()


def lorenz_curve(x: ArrayLike) -> tuple[NDArray, NDArray]:
    """Lorenz curve of a non-negative sequence, largest shares first.

    Returns ``(k / n, cumulative share of the k largest entries)`` for ``k = 0..n``. ``x ≻ y``
    exactly when x's curve lies on or above y's everywhere (equal totals after normalizing); the
    uniform profile is the diagonal.
    """
    p = np.sort(normalize(x))[::-1]
    frac = np.arange(p.size + 1) / p.size
    return frac, np.concatenate([[0.0], np.cumsum(p)])
