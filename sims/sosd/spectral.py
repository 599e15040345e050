"""Singular-distribution metrics of weight matrices (seed 002, Stability of Singular Distribution).

For a weight ``W ∈ R^{m×n}`` with singular values ``σ_1 ≥ … ≥ σ_r`` (``r = min(m, n)``) the
*singular distribution* (SD, Definition 3.1 of seed 002) is ``Σ̂ = Σ / tr Σ``, i.e. the vector
``p = σ / ||σ||_1``. Between two states of one matrix the *SD variation* (Sec. 3.3) is

    ΔΣ = ||Σ̂(W_next) − Σ̂(W_prev)||_F = ||p_next − p_prev||_2,

and Lemma A.4 bounds it for **any** update (GD, AdamW, Muon, weight decay), with ``r`` in place
of the paper's ``d`` for rectangular matrices:

    ΔΣ ≤ (1 + √r) ||W_next − W_prev||_F / min(||W_prev||_*, ||W_next||_*).

Every function accepts numpy arrays, torch tensors (any device, detached) and JAX arrays; torch is
imported only when a torch tensor is passed, so the numpy path runs on a core install. Results are
float64. Bad input (not 2-D, empty, non-finite, all-zero where Σ̂ is undefined) raises a
``ValueError``/``TypeError`` naming the argument; functions that would divide by a zero nuclear
norm take ``on_zero="nan"`` to return NaN instead (used by the recorders for zero-initialized
layers such as modded-nanogpt's ``c_proj``).

The recorders (:class:`SpectralRecorder` for torch modules, its HF ``TrainerCallback`` adapter
:meth:`SpectralRecorder.hf_callback`, and :func:`record_trajectory` for JAX/numpy parameter
trajectories) snapshot singular values every ``every`` steps into an ``xarray.Dataset`` with the
SD variation, the Lemma A.4 bound and its ratio, norms, condition numbers, cosines to the final
state and, per entry, the reason when a value is NaN.

:func:`detect_onset` is **ours, not the paper's** (the paper places its onset lines by eye): a
floor detector on the smoothed ``log10 ΔΣ`` and, as an option, the theory's
``T_ε = min{T : ΔΣ_t < ε for all t ≥ T}``.

Examples:
    >>> import numpy as np
    >>> w = np.diag([3.0, 1.0])
    >>> singular_distribution(w).tolist()
    [0.75, 0.25]
    >>> round(sd_variation(w, np.diag([2.0, 2.0])), 6)  # ||(0.75, 0.25) - (0.5, 0.5)||_2
    0.353553
    >>> lemma_a4_bound(w, np.diag([2.0, 2.0])) >= sd_variation(w, np.diag([2.0, 2.0]))
    True
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "singular_values",
    "singular_distribution",
    "sd_variation",
    "sd_variation_from_sigma",
    "lemma_a4_bound",
    "spectral_cosine",
    "weight_cosine",
    "matrix_norms",
    "condition_number",
    "OnsetResult",
    "detect_onset",
    "loss_knee",
    "SpectralRecorder",
    "hf_spectral_callback",
    "record_trajectory",
    "DEFAULT_EXCLUDE",
]

#: Parameter names left out by default by the recorders: embeddings and the LM head, which the
#: paper does not plot ("projection layers" only, seed 002 Sec. 3 and App. D).
DEFAULT_EXCLUDE = r"(^|\.)(wte|wpe|embed_tokens|embed|embedding|embeddings|lm_head|tok_emb)(\.|$)"

_ON_ZERO = ("raise", "nan")


# ---------------------------------------------------------------------------------------------
# Input handling
# ---------------------------------------------------------------------------------------------


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch"


def _as_matrix(w: Any, name: str = "w") -> np.ndarray:
    """``w`` as a finite float64 numpy matrix, or a ``TypeError``/``ValueError`` naming ``name``."""
    if _is_torch(w):
        import torch

        if not isinstance(w, torch.Tensor):
            raise TypeError(f"`{name}` must be an array or tensor; got {type(w).__name__}.")
        if w.is_complex():
            raise TypeError(f"`{name}` must be real; got a complex tensor ({w.dtype}).")
        arr = w.detach().to(device="cpu", dtype=torch.float64).numpy()
    else:
        try:
            arr = np.asarray(w)
        except Exception:  # noqa: BLE001 - anything np.asarray cannot read is a type error
            raise TypeError(
                f"`{name}` must be a 2-D array (numpy, torch or JAX); got {type(w).__name__}."
            ) from None
        if arr.dtype == object or not (
            np.issubdtype(arr.dtype, np.floating)
            or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == bool
        ):
            raise TypeError(
                f"`{name}` must be a real numeric 2-D array; got dtype {arr.dtype} "
                f"({type(w).__name__})."
            )
        arr = arr.astype(np.float64, copy=False)
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must be a 2-D weight matrix; got shape {tuple(arr.shape)} "
            f"(ndim={arr.ndim}). Reshape convolution kernels to (out, in*k*k) first, or skip "
            "biases and gains."
        )
    if arr.size == 0:
        raise ValueError(f"`{name}` is empty (shape {tuple(arr.shape)}); it has no spectrum.")
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(
            f"`{name}` has {bad} non-finite entries (NaN/inf); the spectrum is undefined. "
            "Check the run for divergence."
        )
    return arr


def _check_on_zero(on_zero: str) -> None:
    if on_zero not in _ON_ZERO:
        raise ValueError(f"`on_zero` must be one of {_ON_ZERO}; got {on_zero!r}.")


def _same_shape(a: np.ndarray, b: np.ndarray, names: tuple[str, str]) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"`{names[0]}` and `{names[1]}` must have the same shape (two states of one "
            f"matrix); got {a.shape} and {b.shape}."
        )


def _zero_error(name: str) -> ValueError:
    return ValueError(
        f"`{name}` is the zero matrix: its singular distribution Σ/tr(Σ) is undefined "
        "(0/0). Zero-initialized layers (e.g. c_proj) have no spectrum at step 0; pass "
        "on_zero='nan' to get NaN instead."
    )


# ---------------------------------------------------------------------------------------------
# Spectra and distances
# ---------------------------------------------------------------------------------------------


def singular_values(w: Any) -> np.ndarray:
    """Singular values of a 2-D weight in descending order, float64, length ``r = min(m, n)``.

    Args:
        w: a real 2-D numpy array, torch tensor or JAX array.

    Returns:
        ``σ_1 ≥ … ≥ σ_r ≥ 0``.

    Raises:
        TypeError: for a non-numeric input.
        ValueError: for a non-2-D, empty or non-finite input.
    """
    return np.linalg.svd(_as_matrix(w), compute_uv=False)


def _distribution(sigma: np.ndarray, name: str, on_zero: str) -> np.ndarray:
    tot = float(np.sum(sigma))
    if tot <= 0.0:
        if on_zero == "raise":
            raise _zero_error(name)
        return np.full(sigma.shape, np.nan)
    return sigma / tot


def singular_distribution(w: Any, *, on_zero: str = "raise") -> np.ndarray:
    """Definition 3.1 of seed 002: ``Σ̂ = Σ / tr(Σ)``, the singular values divided by their sum.

    The result is a probability vector over ``r = min(m, n)`` entries in descending order. It is
    invariant to rotations ``U W V^T`` and to scaling ``c W`` (c ≠ 0).

    Args:
        w: a real 2-D matrix (numpy, torch or JAX).
        on_zero: ``"raise"`` (default) or ``"nan"`` for the zero matrix, whose SD is 0/0.

    Returns:
        ``p = σ / ||σ||_1`` (float64).

    Raises:
        ValueError: for bad input, or the zero matrix with ``on_zero="raise"``.

    Examples:
        >>> singular_distribution([[0.0, 2.0], [0.0, 0.0]]).tolist()  # rank 1
        [1.0, 0.0]
    """
    _check_on_zero(on_zero)
    return _distribution(singular_values(w), "w", on_zero)


def sd_variation_from_sigma(sigma_prev: Any, sigma_next: Any, *, on_zero: str = "raise") -> float:
    """ΔΣ from two singular-value vectors (descending, equal length): ``||p_next − p_prev||_2``."""
    _check_on_zero(on_zero)
    a = np.asarray(sigma_prev, dtype=np.float64)
    b = np.asarray(sigma_next, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape or a.size == 0:
        raise ValueError(
            "`sigma_prev` and `sigma_next` must be non-empty 1-D vectors of equal length; got "
            f"shapes {a.shape} and {b.shape}."
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("`sigma_prev`/`sigma_next` contain non-finite values.")
    if np.any(a < 0) or np.any(b < 0):
        raise ValueError("singular values must be >= 0; got negative entries.")
    pa = _distribution(np.sort(a)[::-1], "sigma_prev", on_zero)
    pb = _distribution(np.sort(b)[::-1], "sigma_next", on_zero)
    return float(np.linalg.norm(pb - pa))


def sd_variation(w_prev: Any, w_next: Any, *, on_zero: str = "raise") -> float:
    """The paper's SD variation ``ΔΣ = ||Σ̂(w_next) − Σ̂(w_prev)||_2`` (seed 002, Sec. 3.3).

    Args:
        w_prev: the earlier state of the matrix.
        w_next: the later state (same shape).
        on_zero: ``"raise"`` or ``"nan"`` when either state is the zero matrix.

    Returns:
        ΔΣ ≥ 0 (at most √2: both are probability vectors).

    Raises:
        ValueError: for bad input or mismatched shapes.
    """
    _check_on_zero(on_zero)
    a, b = _as_matrix(w_prev, "w_prev"), _as_matrix(w_next, "w_next")
    _same_shape(a, b, ("w_prev", "w_next"))
    pa = _distribution(np.linalg.svd(a, compute_uv=False), "w_prev", on_zero)
    pb = _distribution(np.linalg.svd(b, compute_uv=False), "w_next", on_zero)
    return float(np.linalg.norm(pb - pa))


def lemma_a4_bound(w_prev: Any, w_next: Any, *, on_zero: str = "raise") -> float:
    """Lemma A.4 of seed 002 for any update: ``(1+√r)||w_next − w_prev||_F / min(||·||_*)``.

    ``r = min(m, n)`` replaces the paper's ``d`` (Lemma A.1 with the length of σ). The bound holds
    for every pair of matrices (it uses no property of GD), so ``sd_variation / lemma_a4_bound ≤
    1`` on every step of every optimizer.

    Args:
        w_prev: the earlier state.
        w_next: the later state (same shape).
        on_zero: ``"raise"`` or ``"nan"`` when either nuclear norm is 0 (the bound is then
            undefined, as is ΔΣ).

    Returns:
        The bound (float64).
    """
    _check_on_zero(on_zero)
    a, b = _as_matrix(w_prev, "w_prev"), _as_matrix(w_next, "w_next")
    _same_shape(a, b, ("w_prev", "w_next"))
    na = float(np.sum(np.linalg.svd(a, compute_uv=False)))
    nb = float(np.sum(np.linalg.svd(b, compute_uv=False)))
    if min(na, nb) <= 0.0:
        if on_zero == "raise":
            raise _zero_error("w_prev" if na <= 0.0 else "w_next")
        return math.nan
    r = min(a.shape)
    return (1.0 + math.sqrt(r)) * float(np.linalg.norm(b - a)) / min(na, nb)


def spectral_cosine(w: Any, w_ref: Any, *, on_zero: str = "raise") -> float:
    """``cos⟨Σ_t, Σ_T⟩ = σ_t·σ_T / (||σ_t|| ||σ_T||)`` on descending spectra (seed 002, Fig. 1a).

    Scale-invariant, so it equals the cosine of the singular distributions. Random matrices
    already have a high value (Marchenko–Pastur spectra): always report the t = 0 baseline.
    """
    _check_on_zero(on_zero)
    a, b = _as_matrix(w, "w"), _as_matrix(w_ref, "w_ref")
    _same_shape(a, b, ("w", "w_ref"))
    sa, sb = np.linalg.svd(a, compute_uv=False), np.linalg.svd(b, compute_uv=False)
    return _cos(sa, sb, ("w", "w_ref"), on_zero)


def weight_cosine(w: Any, w_ref: Any, *, on_zero: str = "raise") -> float:
    """``cos⟨W_t, W_T⟩ = tr(W_t^T W_T) / (||W_t||_F ||W_T||_F)``, the raw-matrix cosine."""
    _check_on_zero(on_zero)
    a, b = _as_matrix(w, "w"), _as_matrix(w_ref, "w_ref")
    _same_shape(a, b, ("w", "w_ref"))
    return _cos(a.ravel(), b.ravel(), ("w", "w_ref"), on_zero)


def _cos(a: np.ndarray, b: np.ndarray, names: tuple[str, str], on_zero: str) -> float:
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        if on_zero == "raise":
            raise _zero_error(names[0] if na == 0.0 else names[1])
        return math.nan
    return float(np.dot(a, b) / (na * nb))


def condition_number(w: Any) -> float:
    """``κ(W) = σ_max / σ_min`` over the ``r = min(m, n)`` singular values (Assumption 4.3).

    Returns ``inf`` for a rank-deficient non-zero matrix; raises ``ValueError`` for the zero
    matrix (κ = 0/0).
    """
    s = singular_values(w)
    if s[0] == 0.0:
        raise ValueError("`w` is the zero matrix: its condition number 0/0 is undefined.")
    return float(s[0] / s[-1]) if s[-1] > 0 else math.inf


def matrix_norms(w: Any) -> dict[str, float]:
    """Frobenius, nuclear (= tr Σ, the paper's τ) and spectral norms, rank ``r`` and condition.

    ``condition`` is ``inf`` for rank-deficient and NaN for the zero matrix.

    Examples:
        >>> {k: round(v, 3) for k, v in matrix_norms([[3.0, 0.0], [0.0, 4.0]]).items()}
        {'frobenius': 5.0, 'nuclear': 7.0, 'spectral': 4.0, 'condition': 1.333, 'r': 2}
    """
    s = singular_values(w)
    cond = math.nan if s[0] == 0.0 else (float(s[0] / s[-1]) if s[-1] > 0 else math.inf)
    return {
        "frobenius": float(np.sqrt(np.sum(s**2))),
        "nuclear": float(np.sum(s)),
        "spectral": float(s[0]),
        "condition": cond,
        "r": int(s.size),
    }


# ---------------------------------------------------------------------------------------------
# Onset detection (ours; the paper places its onset lines by eye)
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class OnsetResult:
    """Result of :func:`detect_onset` (NaN ``step`` with a reason when nothing is detected).

    Attributes:
        step: the detected onset step (``nan`` when not detected).
        status: ``"detected"`` or ``"not_detected"``.
        message: why (or how) it was detected, in words.
        method: ``"floor"`` or ``"threshold"``.
        peak_step: step of the smoothed maximum before ``end`` (floor method; else ``nan``).
        floor: the late-span level ``log10 ΔΣ`` (floor method) or ``log10 ε`` (threshold).
        window: the smoothing/hold window in records.
        smoothed: the smoothed ``log10 ΔΣ`` the decision was made on (one value per record).
    """

    step: float
    status: str
    message: str
    method: str
    peak_step: float = math.nan
    floor: float = math.nan
    window: int = 0
    smoothed: np.ndarray | None = dataclasses.field(default=None, repr=False)

    @property
    def success(self) -> bool:
        """Whether an onset was detected."""
        return self.status == "detected"


def _rolling_median(x: np.ndarray, w: int) -> np.ndarray:
    """Centred rolling median of ``w`` records ignoring NaNs (edges use the part inside).

    Record ``i`` uses records ``i - w//2 .. i + (w - 1)//2``: exactly ``w`` records, centred for
    odd ``w``, one more on the left for even ``w`` (pandas' ``rolling(w, center=True)``).
    """
    left, right = w // 2, (w - 1) // 2
    out = np.full(x.shape, np.nan)
    for i in range(x.size):
        seg = x[max(0, i - left) : i + right + 1]
        seg = seg[np.isfinite(seg)]
        if seg.size:
            out[i] = np.median(seg)
    return out


def detect_onset(
    steps: Sequence[float] | np.ndarray,
    delta_sigma: Sequence[float] | np.ndarray,
    *,
    method: str = "floor",
    window: int | None = None,
    window_frac: float = 0.05,
    kappa: float = 2.0,
    floor_frac: float = 0.25,
    end: float | None = None,
    eps: float | None = None,
) -> OnsetResult:
    """Onset of the SoSD phase in a ΔΣ series (**our detector, not the paper's**).

    ``method="floor"`` (default): ``s = log10 ΔΣ`` (the mean of ``log10`` over matrices when
    ``delta_sigma`` is 2-D, i.e. a geometric mean) is smoothed by a centred rolling median of
    ``window`` records; ``t_peak`` = argmax of the smoothed ``s`` before ``end`` (e.g. the first LR
    decrease); the floor is the median of the smoothed ``s`` over the last ``floor_frac`` of the
    records before ``end``; the onset is the first record after ``t_peak`` from which the smoothed
    ``s`` stays ≤ floor + log10(κ) for the next ``window`` records.

    ``method="threshold"``: the theory's ``T_ε = min{T : ΔΣ_t < ε for all t ≥ T}`` (Theorem 4.5;
    with 2-D input all matrices must be below ε, the ``T*`` of the theorem), restricted to records
    before ``end``.

    Args:
        steps: strictly increasing steps of the records.
        delta_sigma: ΔΣ per record (1-D) or per record and matrix (2-D, records first). NaN entries
            (e.g. the first record, zero matrices) are ignored; zeros are floored at 1e-300.
        method: ``"floor"`` or ``"threshold"``.
        window: smoothing/hold window in records (default ``max(3, window_frac · n)`` records).
        window_frac: default window as a fraction of the records before ``end``.
        kappa: the floor method's tolerance factor over the floor (> 1).
        floor_frac: share of the span used for the floor level (0 < f ≤ 1).
        end: only records with ``step < end`` are used (the constant-LR span); default all.
        eps: the threshold ε > 0 (``method="threshold"`` only).

    Returns:
        :class:`OnsetResult` (``step`` is NaN and ``message`` says why when nothing is found).

    Raises:
        ValueError: for mismatched lengths, non-increasing steps, a window ≤ 0 or longer than the
            span, κ ≤ 1, a bad ``floor_frac`` or a missing/non-positive ``eps``.
    """
    if method not in ("floor", "threshold"):
        raise ValueError(f"`method` must be 'floor' or 'threshold'; got {method!r}.")
    t = np.asarray(steps, dtype=np.float64)
    ds = np.asarray(delta_sigma, dtype=np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"`steps` must be a non-empty 1-D sequence; got shape {t.shape}.")
    if ds.ndim not in (1, 2) or ds.shape[0] != t.size:
        raise ValueError(
            f"`delta_sigma` must have one row per step ({t.size}); got shape {ds.shape}."
        )
    if not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise ValueError("`steps` must be finite and strictly increasing.")
    if np.any(ds[np.isfinite(ds)] < 0):
        raise ValueError("`delta_sigma` must be >= 0 (it is a norm).")
    keep = t < end if end is not None else np.ones(t.size, bool)
    t, ds = t[keep], ds[keep]
    n = t.size
    if n < 2:
        raise ValueError(f"need at least 2 records before `end`={end!r}; got {n}.")

    if method == "threshold":
        if eps is None or not (math.isfinite(eps) and eps > 0):
            raise ValueError(
                f"`eps` must be a positive number for method='threshold'; got {eps!r}."
            )
        worst = ds if ds.ndim == 1 else np.nanmax(np.where(np.isnan(ds), -np.inf, ds), axis=1)
        worst = np.where(np.isneginf(worst), np.nan, worst)
        above = np.isfinite(worst) & (worst >= eps)
        if not np.any(np.isfinite(worst)):
            return OnsetResult(math.nan, "not_detected", "no finite ΔΣ values", "threshold",
                               floor=math.log10(eps))  # fmt: skip
        if above[-1]:
            return OnsetResult(math.nan, "not_detected",
                               f"ΔΣ ≥ ε = {eps:g} at the last record (step {t[-1]:g}): T_ε is "
                               "beyond the run", "threshold", floor=math.log10(eps))  # fmt: skip
        idx = int(np.nonzero(above)[0][-1]) + 1 if np.any(above) else 0
        return OnsetResult(float(t[idx]), "detected",
                           f"ΔΣ < ε = {eps:g} for every record from step {t[idx]:g} on",
                           "threshold", floor=math.log10(eps),
                           smoothed=np.log10(np.maximum(worst, 1e-300)))  # fmt: skip

    if not (math.isfinite(kappa) and kappa > 1):
        raise ValueError(f"`kappa` must be > 1; got {kappa!r}.")
    if not (0 < floor_frac <= 1):
        raise ValueError(f"`floor_frac` must be in (0, 1]; got {floor_frac!r}.")
    if window is None:
        if not (0 < window_frac <= 1):
            raise ValueError(f"`window_frac` must be in (0, 1]; got {window_frac!r}.")
        window = max(3, int(round(window_frac * n)))
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window <= 0:
        raise ValueError(f"`window` must be a positive integer (records); got {window!r}.")
    if window > n:
        raise ValueError(
            f"`window` = {window} records is longer than the run ({n} records before "
            f"`end`={end!r}); use a smaller window or record more often."
        )
    logd = np.log10(np.maximum(ds, 1e-300))
    logd = np.where(np.isnan(ds), np.nan, logd)
    s = logd if logd.ndim == 1 else _nanmean_rows(logd)
    sm = _rolling_median(s, window)
    if not np.any(np.isfinite(sm)):
        return OnsetResult(math.nan, "not_detected", "no finite ΔΣ values", "floor",
                           window=int(window), smoothed=sm)  # fmt: skip
    i_peak = int(np.nanargmax(sm))
    n_floor = max(1, int(round(floor_frac * n)))
    floor = float(np.nanmedian(sm[n - n_floor :]))
    thr = floor + math.log10(kappa)
    for i in range(i_peak + 1, n - window + 1):
        seg = sm[i : i + window]
        seg = seg[np.isfinite(seg)]
        if seg.size and np.all(seg <= thr):
            return OnsetResult(float(t[i]), "detected",
                               f"smoothed log10 ΔΣ stays within log10(κ={kappa:g}) of the floor "
                               f"{floor:.3f} for {window} records from step {t[i]:g}", "floor",
                               peak_step=float(t[i_peak]), floor=floor, window=int(window),
                               smoothed=sm)  # fmt: skip
    return OnsetResult(math.nan, "not_detected",
                       f"smoothed log10 ΔΣ never stays within log10(κ={kappa:g}) of the floor "
                       f"{floor:.3f} for {window} records after the peak at step {t[i_peak]:g}",
                       "floor", peak_step=float(t[i_peak]), floor=floor, window=int(window),
                       smoothed=sm)  # fmt: skip


def _nanmean_rows(x: np.ndarray) -> np.ndarray:
    cnt = np.sum(np.isfinite(x), axis=1)
    tot = np.nansum(x, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, tot / np.maximum(cnt, 1), np.nan)


def loss_knee(
    steps: Sequence[float] | np.ndarray, loss: Sequence[float] | np.ndarray, *,
    end: float | None = None,
) -> float:  # fmt: skip
    """Breakpoint of a continuous two-segment linear fit of loss against ``log10(step)``.

    The loss-side "knee" ``T_loss`` of the fast-to-slow transition, to compare with the ΔΣ onset
    (synchronization ``|T_SoSD − T_loss| / T_total``). Only steps > 0 (and < ``end``) are used;
    the breakpoint is searched over the interior records by least squares.

    Raises:
        ValueError: for mismatched lengths, fewer than 4 usable records, or non-finite values.
    """
    t = np.asarray(steps, dtype=np.float64)
    y = np.asarray(loss, dtype=np.float64)
    if t.ndim != 1 or t.shape != y.shape:
        raise ValueError(f"`steps` and `loss` must be 1-D of equal length; got {t.shape}, "
                         f"{y.shape}.")  # fmt: skip
    ok = (t > 0) & np.isfinite(y) & np.isfinite(t)
    if end is not None:
        ok &= t < end
    t, y = t[ok], y[ok]
    if t.size < 4:
        raise ValueError(f"need at least 4 finite records with step > 0; got {t.size}.")
    x = np.log10(t)
    best, best_k = math.inf, None
    for k in range(1, t.size - 2):
        basis = np.stack([np.ones_like(x), x, np.maximum(0.0, x - x[k])], axis=1)
        coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
        sse = float(np.sum((basis @ coef - y) ** 2))
        if sse < best:
            best, best_k = sse, k
    return float(t[best_k])


# ---------------------------------------------------------------------------------------------
# Recorders
# ---------------------------------------------------------------------------------------------

_REASONS = {
    "ok": "",
    "first": "first record: no previous state",
    "zero": "zero matrix: singular distribution undefined",
    "prev_zero": "previous record was the zero matrix",
    "nonfinite": "non-finite entries",
    "prev_nonfinite": "previous record had non-finite entries",
}


def _select(names: Iterable[str], include, exclude) -> list[str]:
    def match(pat, name):
        if pat is None:
            return None
        if callable(pat):
            return bool(pat(name))
        return re.search(pat, name) is not None

    out = []
    for name in names:
        inc = match(include, name)
        exc = match(exclude, name)
        if (inc is None or inc) and not exc:
            out.append(name)
    return out


class SpectralRecorder:
    """Record singular spectra of the 2-D weights of a model every ``every`` steps.

    Cheap by design: one batched SVD per distinct matrix shape, the previous state kept as one
    copy per matrix (for ``||W_t − W_{t−k}||_F`` and the Lemma A.4 bound), optional coarse weight
    snapshots for ``cos⟨W_t, W_T⟩``. :meth:`to_dataset` returns an ``xarray.Dataset``.

    Three ways to drive it:

    * call ``recorder(step)`` (= :meth:`maybe_record`) from any training loop or callback hook;
    * :meth:`attach` to a ``torch.optim.Optimizer`` (a step post-hook counts steps);
    * :meth:`hf_callback` for a HuggingFace ``Trainer`` (``transformers`` imported lazily).

    For JAX or stored numpy trajectories use :func:`record_trajectory`.

    Args:
        params: a ``torch.nn.Module`` (its ``named_parameters()``), or a mapping / iterable of
            ``(name, tensor-or-array)`` pairs.
        every: record when ``step % every == 0`` (``> 0``).
        include: regex or callable selecting parameter names (default: all 2-D parameters).
        exclude: regex or callable removing names (default :data:`DEFAULT_EXCLUDE`: embeddings and
            the LM head). Pass ``None`` to keep everything.
        snapshot_every: also keep a CPU copy of each matrix every this many steps (a multiple of
            ``every``) for the weight cosine to the final state (default: none).
        dtype: ``"float64"`` (default) or ``"float32"`` for the SVD.
        group: optional callable ``name -> str`` (e.g. ``"attn"``/``"mlp"``) stored as a coord.
        split_leading: also accept 3-D parameters ``(H, m, n)`` as ``H`` matrices named
            ``"name[h]"`` (per-head weights stored as one tensor).

    Raises:
        ValueError: for ``every <= 0``, a bad ``snapshot_every``, an unknown dtype, no 2-D
            parameter selected, or an explicitly included parameter that is not 2-D.

    Examples:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> w = {"layer.w": rng.normal(size=(4, 6))}
        >>> rec = SpectralRecorder(w, every=1)
        >>> rec.record(0); w["layer.w"] += 0.1 * rng.normal(size=(4, 6)); rec.record(1)
        >>> ds = rec.to_dataset()
        >>> bool((ds.a4_ratio.isel(record=1) <= 1).all())
        True
    """

    def __init__(
        self,
        params: Any,
        *,
        every: int = 10,
        include: str | Callable[[str], bool] | None = None,
        exclude: str | Callable[[str], bool] | None = DEFAULT_EXCLUDE,
        snapshot_every: int | None = None,
        dtype: str = "float64",
        group: Callable[[str], str] | None = None,
        split_leading: bool = False,
    ):
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every <= 0:
            raise ValueError(f"`every` must be a positive integer (steps); got {every!r}.")
        if snapshot_every is not None and (
            isinstance(snapshot_every, bool)
            or not isinstance(snapshot_every, (int, np.integer))
            or snapshot_every <= 0
            or snapshot_every % every
        ):
            raise ValueError(
                f"`snapshot_every` must be a positive multiple of `every`={every}; got "
                f"{snapshot_every!r}."
            )
        if dtype not in ("float64", "float32"):
            raise ValueError(f"`dtype` must be 'float64' or 'float32'; got {dtype!r}.")
        self.every = int(every)
        self.snapshot_every = snapshot_every
        self.dtype = dtype
        named = self._named(params)
        chosen = _select(named, include, exclude)
        ok_ndim = (2, 3) if split_leading else (2,)
        two_d = [n for n in chosen if len(_shape(named[n])) in ok_ndim]
        if include is not None:
            bad = [n for n in chosen if len(_shape(named[n])) not in ok_ndim]
            if bad:
                hint = "" if split_leading else " (pass split_leading=True for per-head stacks)"
                raise ValueError(
                    f"`include` selects parameters that are not 2-D: "
                    f"{[(n, _shape(named[n])) for n in bad][:5]}; spectra need matrices{hint}."
                )
        if not two_d:
            raise ValueError(
                "no 2-D parameter selected (check `include`/`exclude`); names seen: "
                f"{list(named)[:10]}."
            )
        # matrix name -> (parameter name, index along the leading axis or None)
        self._source: dict[str, tuple[str, int | None]] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        for n in two_d:
            shp = tuple(int(x) for x in _shape(named[n]))
            if len(shp) == 2:
                self._source[n], self.shapes[n] = (n, None), shp
            else:
                for i in range(shp[0]):
                    self._source[f"{n}[{i}]"], self.shapes[f"{n}[{i}]"] = (n, i), shp[1:]
        self.names = list(self._source)
        self.split_leading = split_leading
        # A mapping is read live at each record (its entries may be replaced between steps); a
        # module's parameters are updated in place, so the dict of named parameters stays valid.
        self._params = params if isinstance(params, Mapping) else {n: named[n] for n in two_d}
        self.group = group
        self._steps: list[int] = []
        self._sigma: list[dict[str, np.ndarray]] = []
        self._update: list[dict[str, float]] = []
        self._reason: list[dict[str, str]] = []
        self._prev: dict[str, Any] = {}
        self._snap: dict[int, dict[str, np.ndarray]] = {}
        self._hook_step = 0
        self.seconds = 0.0  # time spent recording (for overhead accounting)

    def _resolve(self, src: Mapping[str, Any], name: str) -> Any:
        pname, idx = self._source[name]
        return src[pname] if idx is None else src[pname][idx]

    @staticmethod
    def _named(params: Any) -> dict[str, Any]:
        if hasattr(params, "named_parameters") and callable(params.named_parameters):
            return dict(params.named_parameters())
        if isinstance(params, Mapping):
            return dict(params)
        try:
            return dict(params)
        except (TypeError, ValueError):
            raise TypeError(
                "`params` must be an nn.Module, a mapping name -> tensor, or (name, tensor) "
                f"pairs; got {type(params).__name__}."
            ) from None

    # -- recording -----------------------------------------------------------------------------

    def maybe_record(self, step: int, *_args, **_kwargs) -> bool:
        """Record if ``step % every == 0``; return whether it did (extra args are ignored)."""
        if int(step) % self.every == 0 and (not self._steps or int(step) > self._steps[-1]):
            self.record(int(step))
            return True
        return False

    __call__ = maybe_record

    def record(self, step: int, values: Mapping[str, Any] | None = None) -> None:
        """Record the spectra now (or those of ``values``, a mapping name -> matrix) at ``step``.

        Raises:
            ValueError: if ``step`` does not increase, or ``values`` misses a matrix or changes a
                shape.
        """
        t0 = time.perf_counter()
        step = int(step)
        if self._steps and step <= self._steps[-1]:
            raise ValueError(
                f"`step` must increase between records (interval > 0); got {step} after "
                f"{self._steps[-1]}."
            )
        src = self._params if values is None else values
        self._latest = src  # the source of the last record (the final state for the cosines)
        missing = sorted({p for p, _ in self._source.values() if p not in src})
        if missing:
            raise ValueError(f"`values` misses parameters {missing[:5]}.")
        mats = {n: self._resolve(src, n) for n in self.names}
        for n, m in mats.items():
            if tuple(int(s) for s in _shape(m)) != self.shapes[n]:
                raise ValueError(
                    f"matrix {n!r} changed shape: {self.shapes[n]} -> {tuple(_shape(m))}."
                )
        sig, upd, why = self._measure(mats)
        self._steps.append(step)
        self._sigma.append(sig)
        self._update.append(upd)
        self._reason.append(why)
        if self.snapshot_every is not None and step % self.snapshot_every == 0:
            self._snap[step] = {n: _to_cpu_copy(m) for n, m in mats.items()}
        self.seconds += time.perf_counter() - t0

    def _measure(self, mats: Mapping[str, Any]):
        torch_mode = any(_is_torch(m) for m in mats.values())
        sig: dict[str, np.ndarray] = {}
        upd: dict[str, float] = {}
        why: dict[str, str] = {}
        by_shape: dict[tuple[int, ...], list[str]] = {}
        for n in self.names:
            by_shape.setdefault(self.shapes[n], []).append(n)
        if torch_mode:
            import torch

            tdt = torch.float64 if self.dtype == "float64" else torch.float32
            with torch.no_grad():
                for names in by_shape.values():
                    stack = torch.stack([mats[n].detach().to(tdt) for n in names])
                    finite = torch.isfinite(stack).flatten(1).all(dim=1)
                    safe = torch.where(finite[:, None, None], stack, torch.zeros_like(stack))
                    s = torch.linalg.svdvals(safe).to("cpu", torch.float64).numpy()
                    fin = finite.cpu().numpy()
                    for j, n in enumerate(names):
                        cur = stack[j]
                        prev = self._prev.get(n)
                        if prev is not None and fin[j]:
                            upd[n] = float(torch.linalg.vector_norm(cur - prev).cpu())
                        else:
                            upd[n] = math.nan
                        sig[n] = s[j] if fin[j] else np.full(s.shape[1], np.nan)
                        self._prev[n] = cur.clone() if fin[j] else None
        else:
            dt = np.float64 if self.dtype == "float64" else np.float32
            for names in by_shape.values():
                stack = np.stack([np.asarray(mats[n], dtype=dt) for n in names])
                fin = np.all(np.isfinite(stack.reshape(len(names), -1)), axis=1)
                safe = np.where(fin[:, None, None], stack, 0.0)
                s = np.linalg.svd(safe, compute_uv=False).astype(np.float64)
                for j, n in enumerate(names):
                    cur = stack[j]
                    prev = self._prev.get(n)
                    upd[n] = (float(np.linalg.norm((cur - prev).astype(np.float64)))
                              if prev is not None and fin[j] else math.nan)  # fmt: skip
                    sig[n] = s[j] if fin[j] else np.full(s.shape[1], np.nan)
                    self._prev[n] = cur.copy() if fin[j] else None
        for n in self.names:
            if not np.all(np.isfinite(sig[n])):
                why[n] = "nonfinite"
            elif sig[n][0] == 0.0:
                why[n] = "zero"
            else:
                why[n] = "ok"
        return sig, upd, why

    # -- drivers -------------------------------------------------------------------------------

    def attach(self, optimizer: Any, *, record_initial: bool = True):
        """Record after every ``every``-th ``optimizer.step()`` (torch step post-hook).

        Args:
            optimizer: a ``torch.optim.Optimizer``.
            record_initial: record the current (step-0) state now.

        Returns:
            The hook handle (``handle.remove()`` detaches).
        """
        if not hasattr(optimizer, "register_step_post_hook"):
            raise TypeError(
                "`optimizer` must be a torch.optim.Optimizer (with register_step_post_hook); "
                f"got {type(optimizer).__name__}."
            )
        self._hook_step = self._steps[-1] if self._steps else 0
        if record_initial and not self._steps:
            self.record(0)

        def _post(_opt, _args, _kwargs):
            self._hook_step += 1
            self.maybe_record(self._hook_step)

        return optimizer.register_step_post_hook(_post)

    def hf_callback(self):
        """A ``transformers.TrainerCallback`` that records at ``state.global_step``.

        Records the initial state at ``on_train_begin`` and then every ``every`` optimizer steps
        (``on_step_end``). Needs the ``llm`` extra.
        """
        from sims.runtime.extras import require

        require("llm", "transformers", what="SpectralRecorder.hf_callback")
        from transformers import TrainerCallback

        rec = self

        class SpectralTrainerCallback(TrainerCallback):
            """Record singular spectra during ``Trainer.train`` (seed 002 SoSD metrics)."""

            def on_train_begin(self, args, state, control, **kwargs):
                if not rec._steps or rec._steps[-1] < state.global_step:
                    rec.record(state.global_step)

            def on_step_end(self, args, state, control, **kwargs):
                rec.maybe_record(state.global_step)

        return SpectralTrainerCallback()

    # -- output --------------------------------------------------------------------------------

    @property
    def steps(self) -> list[int]:
        """Steps recorded so far."""
        return list(self._steps)

    def to_dataset(self, *, attrs: Mapping[str, Any] | None = None):
        """All records as an ``xarray.Dataset`` (dims ``record``, ``matrix``, ``k``).

        Variables: ``sigma`` (NaN-padded to the largest ``r``), ``frobenius``, ``nuclear``,
        ``spectral``, ``condition``, ``delta_sigma`` (ΔΣ from the previous record), ``interval``,
        ``update_norm`` (``||W_t − W_prev||_F``), ``a4_bound``, ``a4_ratio``
        (``delta_sigma / a4_bound``, ≤ 1 by Lemma A.4), ``spectral_cos_final`` (to the last
        record), ``weight_cos_final`` (snapshots only; NaN elsewhere), and ``reason`` (why an
        entry is NaN, empty when valid).
        """
        import xarray as xr

        if not self._steps:
            raise ValueError("nothing recorded yet: call record(step) at least once.")
        names = self.names
        R, M = len(self._steps), len(names)
        rmax = max(min(s) for s in self.shapes.values())
        sigma = np.full((R, M, rmax), np.nan)
        upd = np.full((R, M), np.nan)
        reason = np.empty((R, M), dtype=object)
        for i in range(R):
            for j, n in enumerate(names):
                s = self._sigma[i][n]
                sigma[i, j, : s.size] = s
                upd[i, j] = self._update[i][n]
                reason[i, j] = self._reason[i][n]
        r_of = np.array([min(self.shapes[n]) for n in names])
        mask = np.arange(rmax)[None, :] < r_of[:, None]  # (M, k)
        tot = np.where(mask[None], sigma, 0.0).sum(axis=2)  # nuclear, NaN rows stay NaN
        tot = np.where(np.all(np.isfinite(np.where(mask[None], sigma, 0.0)), axis=2), tot, np.nan)
        fro = np.sqrt((np.where(mask[None], sigma, 0.0) ** 2).sum(axis=2))
        fro = np.where(np.isfinite(tot), fro, np.nan)
        spec = sigma[:, :, 0]
        smin = np.take_along_axis(sigma, (r_of - 1)[None, :, None].repeat(R, 0), axis=2)[..., 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            cond = np.where(spec > 0, spec / smin, np.nan)
            p = np.where(tot[..., None] > 0, sigma / tot[..., None], np.nan)
        dsig = np.full((R, M), np.nan)
        dsig[1:] = np.sqrt(np.nansum((p[1:] - p[:-1]) ** 2, axis=2))
        bad = ~(np.all(np.isfinite(np.where(mask[None], p, 0.0)), axis=2))
        dsig[1:][bad[1:] | bad[:-1]] = np.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = np.full((R, M), np.nan)
            mn = np.minimum(tot[1:], tot[:-1])
            bound[1:] = np.where(mn > 0, (1 + np.sqrt(r_of))[None] * upd[1:] / mn, np.nan)
            ratio = dsig / bound
        # reasons for the pairwise quantities
        pair_reason = reason.copy()
        for j in range(M):
            pair_reason[0, j] = reason[0, j] if reason[0, j] != "ok" else "first"
            for i in range(1, R):
                if reason[i, j] == "ok" and reason[i - 1, j] != "ok":
                    pair_reason[i, j] = "prev_" + reason[i - 1, j]
        # cosines to the final record
        last = sigma[-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            num = np.nansum(np.where(mask[None], sigma * last[None], 0.0), axis=2)
            den = fro * fro[-1][None]
            scos = np.where(den > 0, num / den, np.nan)
        wcos = np.full((R, M), np.nan)
        if self._snap:
            final = self._snap.get(self._steps[-1])
            if final is None:
                final = {n: _to_cpu_copy(self._resolve(self._latest, n)) for n in names}
            for i, st in enumerate(self._steps):
                snap = self._snap.get(st)
                if snap is None:
                    continue
                for j, n in enumerate(names):
                    a, b = snap[n].ravel(), final[n].ravel()
                    na, nb = np.linalg.norm(a), np.linalg.norm(b)
                    if na > 0 and nb > 0 and np.isfinite(na) and np.isfinite(nb):
                        wcos[i, j] = float(a @ b / (na * nb))
        steps = np.asarray(self._steps, dtype=np.int64)
        interval = np.concatenate([[0], np.diff(steps)]).astype(np.int64)
        txt = np.vectorize(lambda k: _REASONS[k])
        groups = [self.group(n) if self.group else "" for n in names]
        ds = xr.Dataset(
            {
                "sigma": (("record", "matrix", "k"), sigma),
                "frobenius": (("record", "matrix"), fro),
                "nuclear": (("record", "matrix"), tot),
                "spectral": (("record", "matrix"), spec),
                "condition": (("record", "matrix"), cond),
                "delta_sigma": (("record", "matrix"), dsig),
                "update_norm": (("record", "matrix"), upd),
                "a4_bound": (("record", "matrix"), bound),
                "a4_ratio": (("record", "matrix"), ratio),
                "spectral_cos_final": (("record", "matrix"), scos),
                "weight_cos_final": (("record", "matrix"), wcos),
                "interval": (("record",), interval),
                "reason": (("record", "matrix"), txt(pair_reason).astype(str)),
                "state_reason": (("record", "matrix"), txt(reason).astype(str)),
            },
            coords={
                "step": (("record",), steps),
                "matrix": (("matrix",), np.asarray(names, dtype=str)),
                "rows": (("matrix",), np.array([self.shapes[n][0] for n in names])),
                "cols": (("matrix",), np.array([self.shapes[n][1] for n in names])),
                "rank": (("matrix",), r_of),
                "group": (("matrix",), np.asarray(groups, dtype=str)),
            },
            attrs={
                "every": self.every,
                "svd_dtype": self.dtype,
                "snapshot_every": self.snapshot_every or 0,
                "recording_seconds": self.seconds,
                "description": (
                    "SoSD metrics (seed 002): delta_sigma = ||Σ̂_t − Σ̂_prev||_2 between "
                    "consecutive records (interval steps apart); a4_bound = (1+√r)||ΔW||_F / "
                    "min(||W||_*) (Lemma A.4, any optimizer); reason says why an entry is NaN."
                ),
                **(dict(attrs) if attrs else {}),
            },
        )
        return ds


def hf_spectral_callback(
    *, every: int = 10, include: str | Callable[[str], bool] | None = None,
    exclude: str | Callable[[str], bool] | None = DEFAULT_EXCLUDE,
    matrices: Callable[[Any], Mapping[str, Any]] | None = None, dtype: str = "float64",
    snapshot_every: int | None = None,
):  # fmt: skip
    """A ``transformers.TrainerCallback`` that builds its recorder from the trained model.

    For trainers that create or wrap the model themselves (LoRA adapters added inside a
    fine-tuning function): at ``on_train_begin`` a :class:`SpectralRecorder` is built on the
    ``model`` the Trainer passes to callbacks (or on ``matrices(model)``, a mapping of derived
    matrices such as LoRA updates ``B·A``) and records the initial state; then every ``every``
    optimizer steps at ``on_step_end``. The recorder is the callback's ``recorder`` attribute.
    Needs the ``llm`` extra.

    Args:
        every: record every this many optimizer steps.
        include: parameter-name filter.
        exclude: names to drop.
        matrices: optional ``model -> {name: 2-D tensor}`` evaluated at every record.
        dtype: SVD precision.
        snapshot_every: weight snapshots for the cosine to the final state.
    """
    from sims.runtime.extras import require

    require("llm", "transformers", what="hf_spectral_callback")
    from transformers import TrainerCallback

    kwargs = dict(every=every, include=include, exclude=exclude, dtype=dtype,
                  snapshot_every=snapshot_every)  # fmt: skip

    class SpectralTrainerCallback(TrainerCallback):
        """Record singular spectra during ``Trainer.train`` (seed 002 SoSD metrics)."""

        recorder: SpectralRecorder | None = None

        def _values(self, model):
            if matrices is None:
                return None
            import torch

            with torch.no_grad():
                return {k: v.detach() for k, v in matrices(model).items()}

        def on_train_begin(self, args, state, control, model=None, **kw):
            if model is None:
                raise ValueError("the Trainer passed no `model` to the callback.")
            if self.recorder is None:
                src = self._values(model) if matrices is not None else model
                self.recorder = SpectralRecorder(src, **kwargs)
            if not self.recorder._steps or self.recorder._steps[-1] < state.global_step:
                self.recorder.record(state.global_step, values=self._values(model))

        def on_step_end(self, args, state, control, model=None, **kw):
            if self.recorder is not None and state.global_step % every == 0:
                self.recorder.record(state.global_step, values=self._values(model))

    return SpectralTrainerCallback()


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(getattr(x, "shape", np.shape(x)))


def _to_cpu_copy(m: Any) -> np.ndarray:
    if _is_torch(m):
        return m.detach().to("cpu").float().numpy().astype(np.float64)
    return np.array(m, dtype=np.float64, copy=True)


def _flatten_tree(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings/sequences (and JAX pytrees when JAX is installed) to name -> leaf."""
    if isinstance(tree, Mapping):
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flatten_tree(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(tree, (list, tuple)) and not hasattr(tree, "shape"):
        out = {}
        for i, v in enumerate(tree):
            out.update(_flatten_tree(v, f"{prefix}.{i}" if prefix else str(i)))
        return out
    if hasattr(tree, "shape") or isinstance(tree, np.ndarray):
        return {prefix or "param": tree}
    mod = type(tree).__module__.split(".")[0]
    if mod in ("jax", "jaxlib", "equinox", "flax"):
        import jax

        leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
        return {(prefix + "." if prefix else "") + jax.tree_util.keystr(p).strip("."): v
                for p, v in leaves}  # fmt: skip
    return {}


def record_trajectory(
    trajectory: Any,
    steps: Sequence[int] | None = None,
    *,
    stacked: bool = False,
    include: str | Callable[[str], bool] | None = None,
    exclude: str | Callable[[str], bool] | None = DEFAULT_EXCLUDE,
    dtype: str = "float64",
    group: Callable[[str], str] | None = None,
    snapshot_every: int | None = None,
    split_leading: bool = False,
):
    """SoSD metrics of a stored parameter trajectory (JAX pytrees, numpy or torch arrays).

    Args:
        trajectory: a sequence of parameter pytrees (nested dicts/lists/JAX pytrees), one per
            recorded step; or, with ``stacked=True``, one pytree whose leaves have a leading time
            axis (e.g. the output of ``jax.lax.scan``), 3-D leaves ``(T, m, n)`` being matrices.
        steps: the step of each state (default ``0, 1, 2, …``); strictly increasing.
        stacked: see ``trajectory``.
        include: regex/callable on the flattened names (``"layer.w_q"``; JAX key paths joined by
            dots), default all matrices.
        exclude: regex/callable removing names (default: embeddings and LM head).
        dtype: SVD precision, ``"float64"`` or ``"float32"``.
        group: optional ``name -> str`` labeller.
        snapshot_every: keep weights every this many *steps* for the weight cosine to the final
            state (must divide the step spacing pattern; default: every state when the trajectory
            has at most 200 states, else none).
        split_leading: treat 3-D leaves ``(H, m, n)`` (4-D when stacked) as ``H`` matrices.

    Returns:
        The recorder's ``xarray.Dataset`` (see :meth:`SpectralRecorder.to_dataset`).

    Raises:
        ValueError: for an empty trajectory, mismatched ``steps``, or no matrix leaves.
    """
    if stacked:
        flat = _flatten_tree(trajectory)
        ok = (3, 4) if split_leading else (3,)
        mats = {k: v for k, v in flat.items() if len(_shape(v)) in ok}
        if not mats:
            raise ValueError("`stacked=True` needs leaves of shape (T, m, n); found none.")
        lengths = {int(_shape(v)[0]) for v in mats.values()}
        if len(lengths) != 1:
            raise ValueError(f"stacked leaves have different lengths {sorted(lengths)}.")
        T = lengths.pop()
        states = [{k: np.asarray(v[i]) for k, v in mats.items()} for i in range(T)]
    else:
        if isinstance(trajectory, Mapping) or not isinstance(trajectory, Sequence):
            trajectory = list(trajectory) if not isinstance(trajectory, Mapping) else [trajectory]
        ok = (2, 3) if split_leading else (2,)
        states = [{k: v for k, v in _flatten_tree(s).items() if len(_shape(v)) in ok}
                  for s in trajectory]  # fmt: skip
    if not states:
        raise ValueError("`trajectory` is empty.")
    steps_list = list(range(len(states))) if steps is None else [int(s) for s in steps]
    if len(steps_list) != len(states):
        raise ValueError(f"`steps` has {len(steps_list)} entries for {len(states)} states.")
    if any(b <= a for a, b in zip(steps_list, steps_list[1:], strict=False)):
        raise ValueError("`steps` must be strictly increasing (intervals > 0).")
    if snapshot_every is None and len(states) <= 200:
        snaps = set(steps_list)
    elif snapshot_every is None:
        snaps = set()
    else:
        if snapshot_every <= 0:
            raise ValueError(f"`snapshot_every` must be positive; got {snapshot_every!r}.")
        snaps = {s for s in steps_list if s % snapshot_every == 0} | {steps_list[-1]}
    rec = SpectralRecorder(states[0], every=1, include=include, exclude=exclude, dtype=dtype,
                           group=group, split_leading=split_leading)  # fmt: skip
    for st, state in zip(steps_list, states, strict=True):
        rec.record(st, values=state)
        if st in snaps:
            rec._snap[st] = {n: _to_cpu_copy(rec._resolve(state, n)) for n in rec.names}
    return rec.to_dataset(attrs={"source": "record_trajectory", "every": 0})
