"""Sufficient statistics and population moments (main paper Appendix A.1, C.1).

With ``z = vec(β x_qᵀ)`` (row-major, so ``⟨M, β x_qᵀ⟩ = vec(M)·z``) and ``s`` the output scale,
the weighted full-batch loss of any model whose prediction is ``ŷ = s vec(M)·z`` is exactly::

    L(M) = E_w[y_q²] - 2 s vec(M)·E_w[y_q z] + s² vec(M)ᵀ E_w[z zᵀ] vec(M),

where ``E_w`` is the weighted mean over the dataset (weights = usage counts for upsampling). A
training step therefore costs O(d⁴ + H d²) regardless of ``P`` and ``N``. Population moments
(infinite data, ``x ~ N(0, Σ)``, ``w ~ N(0, I)``)::

    E[y_q²] = tr Σ,   E[y_q z] = vec(Σ²),   E[z zᵀ] = E[Σ̂²] ⊗ Σ  (row-major ``kron``),
    E[Σ̂²] = Σ² + (Σ + tr(Σ) I) Σ / N = Σ_i a_i e_i e_iᵀ,  a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N).

Fixed points (Appendix A.2): learning eigen-direction ``j`` sets its component of ``M`` to
``c_j = (λ_j + (λ_j + tr Σ)/N)^{-1} / s`` and lowers the loss by ``λ_j / (1 + (1 + tr Σ/λ_j)/N)``;
ansatz (3): ``v_j = c_j^{1/3}``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .data import ICLData, validate_covariance
from .models import merged_matrix

__all__ = [
    "Moments",
    "empirical_moments",
    "population_moments",
    "quadratic_loss",
    "loss",
    "per_example_losses",
    "eigh_desc",
    "expected_sample_cov_sq",
    "a_coefficients",
    "fixed_point_components",
    "fixed_point_values",
    "saddle_losses",
    "ansatz_coefficients",
]


class Moments(NamedTuple):
    """Second-order sufficient statistics of a (weighted) dataset, output scale folded in.

    Attributes:
        c0: ``E[y_q²]``.
        b: ``(d²,)`` ``s E[y_q z]``.
        A: ``(d², d²)`` ``s² E[z zᵀ]``.
    """

    c0: object
    b: object
    A: object


def empirical_moments(data: ICLData, weights=None, *, scale: float = 1.0, features=None) -> Moments:
    """Weighted dataset moments (weights = usage counts; ``None`` = all ones).

    ``features`` may pass a precomputed ``data.features()`` to avoid recomputing ``z``.

    Raises:
        ValueError: on weights of the wrong shape, negative or all zero.
    """
    z = data.features() if features is None else features
    y = data.yq
    if weights is None:
        w = np.full(y.shape[0], 1.0 / y.shape[0])
    else:
        w = np.asarray(weights, dtype=float)
        if w.shape != y.shape:
            raise ValueError(
                f"`weights` must have shape {y.shape} (one per example); got {w.shape}."
            )
        if np.any(w < 0) or not np.all(np.isfinite(w)) or w.sum() <= 0:
            raise ValueError("`weights` must be finite, non-negative and not all zero.")
        w = w / w.sum()
    c0 = float(np.dot(w, y * y))
    b = scale * (z.T @ (w * y))
    a = scale**2 * (z.T @ (z * w[:, None]))
    return Moments(c0, b, 0.5 * (a + a.T))


def expected_sample_cov_sq(cov, n_context: int) -> np.ndarray:
    """``E[Σ̂²] = Σ² + (Σ + tr(Σ) I) Σ / N`` (Appendix C.1)."""
    c = validate_covariance(cov)
    return c @ c + (c + np.trace(c) * np.eye(c.shape[0])) @ c / n_context


def population_moments(cov, n_context: int, *, scale: float = 1.0) -> Moments:
    """Infinite-data moments ``(tr Σ, s vec(Σ²), s² E[Σ̂²] ⊗ Σ)``."""
    c = validate_covariance(cov)
    if n_context < 1:
        raise ValueError(f"`n_context` must be >= 1; got {n_context}.")
    s2 = expected_sample_cov_sq(c, n_context)
    return Moments(float(np.trace(c)), scale * (c @ c).reshape(-1), scale**2 * np.kron(s2, c))


def quadratic_loss(m_vec, moments: Moments):
    """``c0 - 2 m·b + mᵀ A m``."""
    return moments.c0 - 2.0 * jnp.dot(m_vec, moments.b) + jnp.dot(m_vec, moments.A @ m_vec)


def loss(params, moments: Moments):
    """Full-batch (or population) loss of ATTN_S / ATTN_M parameters."""
    return quadratic_loss(merged_matrix(params).reshape(-1), moments)


def per_example_losses(params, data: ICLData, *, scale: float = 1.0) -> np.ndarray:
    """``(y_p - s βᵀ M x_q)²`` for each example (for the upsampling proxy)."""
    m = np.asarray(merged_matrix(params))
    pred = scale * np.einsum("pi,ij,pj->p", data.beta, m, data.xq)
    return (data.yq - pred) ** 2


def eigh_desc(cov) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (decreasing) and eigenvectors (columns) of ``Σ``."""
    lam, vec = np.linalg.eigh(validate_covariance(cov))
    order = np.argsort(lam)[::-1]
    return lam[order], vec[:, order]


def a_coefficients(cov, n_context: int) -> np.ndarray:
    """``a_i = λ_i² (1 + (1 + tr Σ/λ_i)/N)`` in decreasing-eigenvalue order (Appendix C.1)."""
    lam, _ = eigh_desc(cov)
    return lam**2 + (lam**2 + np.sum(lam) * lam) / n_context


def fixed_point_components(cov, n_context: int, *, scale: float = 1.0) -> np.ndarray:
    """Learned component ``c_j = e_jᵀ M e_j = (λ_j + (λ_j + tr Σ)/N)^{-1} / s`` per direction."""
    lam, _ = eigh_desc(cov)
    return 1.0 / (lam + (lam + np.sum(lam)) / n_context) / scale


def fixed_point_values(cov, n_context: int, *, scale: float = 1.0) -> np.ndarray:
    """Ansatz (3) learned values ``v_j = c_j^{1/3}``."""
    return np.cbrt(fixed_point_components(cov, n_context, scale=scale))


def saddle_losses(cov, n_context: int) -> np.ndarray:
    """Population losses ``L(M_m)``, ``m = 0..d``, after learning the top ``m`` eigen-directions."""
    lam, _ = eigh_desc(cov)
    drops = lam / (1.0 + (1.0 + np.sum(lam) / lam) / n_context)
    return np.sum(lam) - np.concatenate([[0.0], np.cumsum(drops)])


def ansatz_coefficients(moments: Moments, eigvecs) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the ansatz value ODE ``τ v̇_i = σ_i v_i² − κ_i v_i⁵`` for any moments.

    On the ansatz ``k_i = q_i = v_i e_i`` the merged matrix has ``M = v_i³ e_i e_iᵀ``, so with
    ``f_i = vec(e_i e_iᵀ)`` the loss is ``c0 − 2 v³ f_i·b + v⁶ f_iᵀ A f_i`` and
    ``−½ ∂L/∂v = σ_i v² − κ_i v⁵`` with ``σ_i = f_i·b`` (the feature's *signal*) and
    ``κ_i = f_iᵀ A f_i``. Population moments give ``σ_i = s λ_i²``, ``κ_i = s² λ_i a_i``
    (App. C.2); weighted (upsampled) moments give the effective rates of
    :mod:`theory.upsampling`.

    Args:
        moments: (weighted) :class:`Moments` with the output scale folded in.
        eigvecs: ``(d, d)`` eigenvectors (columns) in the order of the features.

    Returns:
        ``sigma (d,)`` and ``kappa (d,)``.
    """
    e = np.asarray(eigvecs, dtype=float)
    d = e.shape[0]
    f = np.einsum("ia,ja->aij", e, e).reshape(d, d * d)  # rows vec(e_a e_aᵀ), row-major
    b = np.asarray(moments.b, dtype=float)
    a = np.asarray(moments.A, dtype=float)
    if b.shape != (d * d,) or a.shape != (d * d, d * d):
        raise ValueError(
            f"`moments` must be unbatched with b ({d * d},) and A ({d * d}, {d * d}) for "
            f"eigvecs of size {d}; got b {b.shape}, A {a.shape}."
        )
    return f @ b, np.einsum("ak,kl,al->a", f, a, f)
