"""In-context linear-regression data (main paper Section 3, eq. 1) and covariance families.

A sequence is ``x_1..x_N, x_q ~ N(0, Σ)`` i.i.d., a task ``w ~ N(0, I_d)`` per sequence, labels
``y_n = wᵀ x_n`` and the query label ``y_q = wᵀ x_q`` zeroed in the input. The linear-attention
models of this package see a sequence only through ``β = (1/N) Σ_n y_n x_n`` and ``x_q``
(Appendix A.1, eq. 12), so a dataset is stored as the arrays ``beta (P, d)``, ``xq (P, d)`` and
``yq (P,)``; the cubic feature ``z = vec(β x_qᵀ)`` is formed on demand.

Two generators give the same distribution of ``(β, x_q, y_q)``:

* ``"tokens"``: explicit token tensors ``(P, N+1, d)`` (what a transformer sees; used by the
  exactness tests and needed for the anchor's dataset centring / task whitening);
* ``"wishart"`` (default, fast): ``N Σ̂ = N (1/N) Σ_n x_n x_nᵀ ~ Wishart(Σ, N)`` sampled by the
  Bartlett decomposition, then ``β = Σ̂ w``; ``d(d+1)/2`` random numbers per sequence instead of
  ``N d``. Exact in law (not the same draws as ``"tokens"``).

Covariance families (:func:`make_covariance`): ``"linear"`` (Zhang et al. 2025's default:
eigenvalues ∝ 1..d, rotated by a random orthogonal matrix, trace-normalized), ``"white"``,
``"geometric"`` (eigenvalues ∝ ratio^k) and ``"given"`` (a user matrix, validated).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

__all__ = [
    "COVARIANCES",
    "ICLData",
    "make_covariance",
    "validate_covariance",
    "sample_tokens",
    "features_from_tokens",
    "sample_dataset",
]

COVARIANCES = ("linear", "white", "geometric", "given")


def validate_covariance(cov, *, name: str = "cov", atol: float = 1e-10) -> np.ndarray:
    """Return ``cov`` as a float array after checking it is a symmetric PSD ``(d, d)`` matrix.

    Raises:
        ValueError: on a non-square, non-finite, non-symmetric or non-PSD matrix (the message
            names the argument, the offending value and the fix).
    """
    c = np.asarray(cov, dtype=float)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.shape[0] < 1:
        raise ValueError(f"`{name}` must be a square (d, d) matrix; got shape {c.shape}.")
    if not np.all(np.isfinite(c)):
        raise ValueError(f"`{name}` must be finite; got {c.tolist()}.")
    scale = max(1.0, float(np.abs(c).max()))
    asym = float(np.abs(c - c.T).max())
    if asym > atol * scale:
        raise ValueError(
            f"`{name}` must be symmetric; max |cov - cov.T| = {asym:.3g}. "
            "Pass (cov + cov.T) / 2 if the asymmetry is round-off."
        )
    eig_min = float(np.linalg.eigvalsh(c).min())
    if eig_min < -atol * scale:
        raise ValueError(
            f"`{name}` must be positive semi-definite; its smallest eigenvalue is {eig_min:.3g}. "
            "Use a covariance matrix (e.g. A @ A.T)."
        )
    return 0.5 * (c + c.T)


def make_covariance(
    kind: Literal["linear", "white", "geometric", "given"] = "linear",
    d: int = 4,
    *,
    seed: int = 0,
    trace: float = 1.0,
    ratio: float = 0.5,
    matrix=None,
    rotate: bool = True,
) -> np.ndarray:
    """Build an input covariance ``Σ`` from a named family.

    Args:
        kind: ``"linear"`` (eigenvalues ∝ 1..d, Zhang et al. 2025), ``"white"``, ``"geometric"``
            (eigenvalues ∝ ratio^0..ratio^(d-1)) or ``"given"`` (``matrix``).
        d: dimension (ignored for ``"given"``).
        seed: seed of the random rotation.
        trace: trace after normalization (1 in the anchor); ``None``-like values are not accepted.
        ratio: eigenvalue ratio for ``"geometric"``, in (0, 1].
        matrix: the covariance for ``"given"`` (validated, not renormalized).
        rotate: rotate the eigenbasis by a random orthogonal matrix (QR of a Gaussian).

    Returns:
        ``(d, d)`` symmetric PSD matrix.

    Raises:
        ValueError: on an unknown ``kind`` or invalid ``d``, ``trace``, ``ratio``, ``matrix``.
    """
    if kind == "given":
        if matrix is None:
            raise ValueError("`matrix` is required when `kind`='given'.")
        return validate_covariance(matrix, name="matrix")
    if kind not in COVARIANCES:
        raise ValueError(f"`kind` must be one of {COVARIANCES}; got {kind!r}.")
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"`d` must be a positive int; got {d!r}.")
    if not np.isfinite(trace) or trace <= 0:
        raise ValueError(f"`trace` must be positive and finite; got {trace!r}.")
    if kind == "linear":
        eig = np.arange(1, d + 1, dtype=float)
    elif kind == "white":
        eig = np.ones(d)
    else:
        if not 0 < ratio <= 1:
            raise ValueError(f"`ratio` must be in (0, 1] for 'geometric'; got {ratio!r}.")
        eig = ratio ** np.arange(d, dtype=float)
    eig = eig * trace / eig.sum()
    if not rotate:
        return np.diag(np.sort(eig)[::-1])
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    cov = q @ np.diag(eig) @ q.T
    return 0.5 * (cov + cov.T)


@dataclasses.dataclass(frozen=True)
class ICLData:
    """A finite in-context regression dataset in sufficient form.

    Attributes:
        beta: ``(P, d)`` ``β_p = (1/N) Σ_n y_n x_n`` per sequence.
        xq: ``(P, d)`` query inputs.
        yq: ``(P,)`` query labels (targets).
        cov: ``(d, d)`` population covariance used to sample.
        n_context: ``N``.
    """

    beta: np.ndarray
    xq: np.ndarray
    yq: np.ndarray
    cov: np.ndarray
    n_context: int

    @property
    def n_examples(self) -> int:
        """``P``."""
        return int(self.yq.shape[0])

    @property
    def dim(self) -> int:
        """``d``."""
        return int(self.xq.shape[1])

    def features(self) -> np.ndarray:
        """Cubic features ``z_p = vec(β_p x_qᵀ)`` (row-major), shape ``(P, d²)`` (eq. 12)."""
        return (self.beta[:, :, None] * self.xq[:, None, :]).reshape(self.n_examples, -1)

    def subset(self, idx) -> ICLData:
        """Rows ``idx`` (e.g. an upsampled index array from :mod:`sims.selection`)."""
        return ICLData(self.beta[idx], self.xq[idx], self.yq[idx], self.cov, self.n_context)


def _check_sizes(n_examples, n_context):
    if isinstance(n_examples, bool) or not isinstance(n_examples, (int, np.integer)):
        raise TypeError(f"`n_examples` must be an int; got {n_examples!r}.")
    if n_examples < 2:
        raise ValueError(f"`n_examples` (P) must be >= 2; got {n_examples}.")
    if isinstance(n_context, bool) or not isinstance(n_context, (int, np.integer)):
        raise TypeError(f"`n_context` must be an int; got {n_context!r}.")
    if n_context < 1:
        raise ValueError(f"`n_context` (N) must be >= 1; got {n_context}.")


def sample_tokens(
    n_examples: int, n_context: int, cov, *, seed: int = 0, anchor_preprocessing: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Sample explicit token sequences.

    Args:
        n_examples: ``P``.
        n_context: ``N`` (context pairs; the sequence has ``N + 1`` tokens).
        cov: ``(d, d)`` input covariance.
        seed: numpy seed.
        anchor_preprocessing: apply Zhang et al.'s ``linattn-icl`` conventions: centre ``x`` across
            the dataset (per position) and whiten the task vectors across the dataset.

    Returns:
        ``x (P, N+1, d)`` (last token = query) and ``y (P, N+1)`` (the true labels, including the
        query's target ``y[:, -1]``; the model input zeroes it).
    """
    _check_sizes(n_examples, n_context)
    cov = validate_covariance(cov)
    d = cov.shape[0]
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n_examples, n_context + 1, d))
    x = g @ _psd_sqrt(cov).T  # (P, N+1, d), covariance R Rᵀ = Σ
    w = rng.standard_normal((n_examples, d))
    if anchor_preprocessing:
        x = x - x.mean(axis=0, keepdims=True)
        w = w - w.mean(axis=0, keepdims=True)
        evals, evecs = np.linalg.eigh(np.cov(w.T).reshape(d, d))
        w = w @ (evecs @ np.diag(evals**-0.5) @ evecs.T).T
    y = np.einsum("pnd,pd->pn", x, w)  # (P, N+1)
    return x, y


def _psd_sqrt(cov):
    evals, evecs = np.linalg.eigh(cov)
    return evecs @ np.diag(np.sqrt(np.clip(evals, 0, None)))


def features_from_tokens(x, y) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``β = (1/N) Σ_n y_n x_n``, ``x_q``, ``y_q`` from tokens ``x (P, N+1, d)``, ``y (P, N+1)``."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 3 or y.shape != x.shape[:2]:
        raise ValueError(
            f"`x` must be (P, N+1, d) and `y` (P, N+1); got {x.shape=} and {y.shape=}."
        )
    n = x.shape[1] - 1
    beta = np.einsum("pn,pnd->pd", y[:, :-1], x[:, :-1]) / n
    return beta, x[:, -1], y[:, -1]


def sample_dataset(
    n_examples: int,
    n_context: int,
    cov,
    *,
    seed: int = 0,
    method: Literal["wishart", "tokens"] = "wishart",
    anchor_preprocessing: bool = False,
) -> ICLData:
    """Sample a dataset of ``P`` sequences in sufficient form (see the module docstring).

    Args:
        n_examples: ``P >= 2``.
        n_context: ``N >= 1``.
        cov: ``(d, d)`` symmetric PSD covariance.
        seed: numpy seed.
        method: ``"wishart"`` (fast, exact in law) or ``"tokens"`` (explicit tokens).
        anchor_preprocessing: only with ``method="tokens"``; see :func:`sample_tokens`.

    Returns:
        An :class:`ICLData`.
    """
    _check_sizes(n_examples, n_context)
    cov = validate_covariance(cov)
    if method == "tokens":
        x, y = sample_tokens(
            n_examples, n_context, cov, seed=seed, anchor_preprocessing=anchor_preprocessing
        )
        beta, xq, yq = features_from_tokens(x, y)
        return ICLData(beta, xq, yq, cov, int(n_context))
    if method != "wishart":
        raise ValueError(f"`method` must be 'wishart' or 'tokens'; got {method!r}.")
    if anchor_preprocessing:
        raise ValueError("`anchor_preprocessing`=True needs explicit tokens; pass method='tokens'.")
    d = cov.shape[0]
    p = int(n_examples)
    rng = np.random.default_rng(seed)
    root = _psd_sqrt(cov)  # Σ = R Rᵀ
    # Bartlett: N Ĝ = A Aᵀ, A lower triangular, A_ii² ~ χ²(N - i), A_ij ~ N(0, 1) (i > j).
    a = np.zeros((p, d, d))
    a[:, np.arange(d), np.arange(d)] = np.sqrt(rng.chisquare(n_context - np.arange(d), (p, d)))
    rows, cols = np.tril_indices(d, -1)
    a[:, rows, cols] = rng.standard_normal((p, rows.size))
    w = rng.standard_normal((p, d))
    xq = rng.standard_normal((p, d)) @ root.T
    # β = Σ̂ w = R (A Aᵀ / N) Rᵀ w
    u = np.einsum("ij,pi->pj", root, w)  # Rᵀ w, (P, d)
    u = np.einsum("pji,pj->pi", a, u)  # Aᵀ (Rᵀ w)
    u = np.einsum("pij,pj->pi", a, u) / n_context  # A Aᵀ Rᵀ w / N
    beta = u @ root.T
    yq = np.einsum("pd,pd->p", xq, w)
    return ICLData(beta, xq, yq, cov, int(n_context))
