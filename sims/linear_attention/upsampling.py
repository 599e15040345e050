"""GD + upsampling in the linear-attention model (main paper Section 5, transplanted).

1. Train a proxy (the same model with GD, same data) for ``proxy_steps`` steps and record each
   example's loss at ``n_checkpoints`` evenly spaced checkpoints (default 5).
2. Cluster the loss trajectories (or the last losses) into 2 groups with k-means
   (:func:`sims.selection.cluster_trajectories`); the higher-mean-loss cluster is *hard*.
3. Upsample by duplication: usage count ``1 + factor`` for the selected examples
   (:func:`sims.selection.usage_weights`); full-batch training on the duplicated set is exactly
   training with these weights, which enter only through the weighted moments.
4. Retrain from scratch (same initialization).

Selections for the compute-matched ablation (Figure 4d analog): ``"hard"``, ``"random"``,
``"easy"`` (same count as hard), and ``"condition"`` (beyond the paper: the same count of
examples with the largest query energy along the last eigen-direction, ``(e_dᵀ x_q)²/λ_d`` — a
query-only rule that meets the entropy condition of :mod:`theory.upsampling`; it uses the
eigenbasis of ``Σ``, an oracle).

Clustering features: the paper's raw ``"trajectory"`` (and ``"last"``, ``"relative"`` from
:mod:`sims.selection`), and ``"log_ratio"`` (beyond the paper): ``log(L_k / L_1)`` for checkpoints
``k = 2..K``, a scale-free trajectory that ignores how large an example's loss is and keeps only
how fast it falls (the raw trajectories are dominated by the target size ``y_q²``, since the
proxy predicts ~0 at its first checkpoints).

:func:`selection_report` says what a selection picks: target size, query energy per
eigen-direction, and the enrichment ``m_i`` of each feature's signal that sets the learning-time
change (:mod:`theory.upsampling`).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from sims.ansatz import boost
from sims.selection import (
    ClusterResult,
    cluster_trajectories,
    kmeans,
    select_easy,
    select_random,
    trajectory_features,
    usage_weights,
)

from .data import ICLData
from .stats import eigh_desc, expected_sample_cov_sq

#: Clustering feature maps (the paper's three, plus the scale-free ``"log_ratio"``).
FEATURES = ("trajectory", "last", "relative", "log_ratio")
#: Selection rules.
SELECTIONS = ("hard", "random", "easy", "condition")


def cluster_features(losses, features: str = "trajectory") -> np.ndarray:
    """Clustering features of ``(P, K)`` proxy losses (see the module docstring).

    ``"log_ratio"`` gives ``log((L_k + δ)/(L_1 + δ))``, ``k = 2..K`` (``δ = 1e-12 × mean loss``
    guards against a zero loss); the other names are :func:`sims.selection.trajectory_features`.

    Raises:
        ValueError: for an unknown ``features`` or ``"log_ratio"`` with fewer than 2 checkpoints.
    """
    arr = np.asarray(losses, dtype=float)
    if features != "log_ratio":
        if features not in FEATURES:
            raise ValueError(f"`features` must be one of {FEATURES}; got {features!r}.")
        return trajectory_features(arr, features)
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise ValueError(
            f"`features`='log_ratio' needs (P, K) losses with K >= 2 checkpoints; got {arr.shape}."
        )
    delta = 1e-12 * max(float(np.mean(arr)), 1e-300)
    return np.log((arr[:, 1:] + delta) / (arr[:, :1] + delta))


def condition_scores(data: ICLData) -> np.ndarray:
    """``(e_dᵀ x_q)² / λ_d`` per example: query energy on the last (weakest) eigen-direction."""
    lam, e = eigh_desc(data.cov)
    return (data.xq @ e[:, -1]) ** 2 / lam[-1]

__all__ = [
    "FEATURES",
    "SELECTIONS",
    "UpsampleResult",
    "cluster_features",
    "condition_scores",
    "selection_report",
    "checkpoint_losses",
    "select_for_upsampling",
    "select_batched",
    "hard_cluster_spectrum",
]


@dataclasses.dataclass(frozen=True)
class UpsampleResult:
    """Selection outcome for one run.

    Attributes:
        weights: ``(P,)`` usage counts.
        selected: ``(P,)`` boolean mask of upsampled examples.
        cluster: the :class:`sims.selection.ClusterResult` (hard cluster found by k-means).
        losses: ``(P, K)`` proxy per-example losses at the checkpoints.
    """

    weights: np.ndarray
    selected: np.ndarray
    cluster: ClusterResult
    losses: np.ndarray


def checkpoint_losses(
    merged_matrices, data: ICLData, *, scale: float = 1.0, features=None
) -> np.ndarray:
    """Per-example losses ``(y_p - s β_pᵀ M_k x_{q,p})²`` for checkpoint matrices ``M_k``.

    Args:
        merged_matrices: ``(K, d, d)`` merged matrices of the proxy at its checkpoints.
        data: the training set.
        scale: output scale ``s``.
        features: precomputed ``data.features()`` (optional, saves recomputing ``z``).

    Returns:
        ``(P, K)`` losses.
    """
    ms = np.asarray(merged_matrices, dtype=float)
    if ms.ndim != 3 or ms.shape[1:] != (data.dim, data.dim):
        raise ValueError(f"`merged_matrices` must be (K, {data.dim}, {data.dim}); got {ms.shape}.")
    z = data.features() if features is None else np.asarray(features)
    pred = scale * (z @ ms.reshape(ms.shape[0], -1).T)  # βᵀ M x_q = ⟨vec(M), vec(β x_qᵀ)⟩
    return (data.yq[:, None] - pred) ** 2


def select_for_upsampling(
    losses,
    *,
    selection: Literal["hard", "random", "easy"] = "hard",
    factor: int = 1,
    features: Literal["trajectory", "last", "relative", "log_ratio"] = "trajectory",
    seed: int = 0,
    n_init: int = 3,
    backend: Literal["sklearn", "numpy"] = "numpy",
) -> UpsampleResult:
    """Cluster proxy loss trajectories and build usage-count weights.

    Args:
        losses: ``(P, K)`` per-example losses at the proxy checkpoints.
        selection: upsample the hard cluster, or as many random / easy examples.
        factor: extra copies per selected example (``u``; 1 in the paper).
        features: clustering features (see :func:`sims.selection.cluster_trajectories`).
        seed: k-means and sampling seed.
        n_init: k-means restarts.
        backend: k-means implementation (``"numpy"``: fast Lloyd; ``"sklearn"``).
    """
    if selection not in ("hard", "random", "easy"):
        raise ValueError(f"`selection` must be 'hard', 'random' or 'easy'; got {selection!r}.")
    losses = np.asarray(losses, dtype=float)
    if features == "log_ratio":  # cluster the log-ratios; hard = slowest relative decrease
        cl = cluster_trajectories(
            cluster_features(losses, features), 2, seed=seed, features="trajectory",
            n_init=n_init, backend=backend,
        )  # fmt: skip
    else:
        cl = cluster_trajectories(
            losses, 2, seed=seed, features=features, n_init=n_init, backend=backend
        )
    n = losses.shape[0]
    count = int(cl.hard_mask.sum())
    mask = _apply_selection(selection, cl.hard_mask, n, count, seed, None)
    return UpsampleResult(usage_weights(n, mask, factor), mask, cl, losses)


def _apply_selection(selection, hard_mask, n, count, seed, scores):
    if selection == "hard":
        return hard_mask
    if selection == "random":
        return select_random(n, count, seed=seed)
    if selection == "easy":
        return select_easy(hard_mask, min(count, n - count), seed=seed)
    if scores is None:
        raise ValueError("`selection`='condition' needs `scores` (see `condition_scores`).")
    mask = np.zeros(n, bool)
    mask[np.argsort(scores, kind="stable")[::-1][:count]] = True
    return mask


def hard_cluster_spectrum(data: ICLData, mask) -> dict[str, np.ndarray]:
    """Which eigen-directions of ``Σ`` the selected examples over-represent.

    Returns ratios per eigen-direction ``e_i`` (decreasing ``λ_i``), selected vs population:
    ``xq_ratio_i = mean_sel (e_iᵀ x_q)² / λ_i`` and ``beta_ratio_i = mean_sel (e_iᵀ β)² / a'_i``
    with ``a'_i = e_iᵀ E[Σ̂²] e_i``; values > 1 mean over-represented. Also the eigenvalues of the
    selected examples' query covariance (``xq_cov_eigs``) next to ``λ`` (``lambda``).
    """
    mask = np.asarray(mask, dtype=bool)
    lam, e = eigh_desc(data.cov)
    s2 = expected_sample_cov_sq(data.cov, data.n_context)
    xq = data.xq[mask] @ e  # (P_sel, d)
    beta = data.beta[mask] @ e
    xq_cov = data.xq[mask].T @ data.xq[mask] / max(mask.sum(), 1)
    return {
        "lambda": lam,
        "xq_ratio": (xq**2).mean(0) / lam,
        "beta_ratio": (beta**2).mean(0) / np.einsum("ia,ij,ja->a", e, s2, e),
        "xq_cov_eigs": np.sort(np.linalg.eigvalsh(xq_cov))[::-1],
    }


def _no_selection(losses: np.ndarray, features: str, factor: int) -> UpsampleResult:
    """A run whose proxy diverged (non-finite losses): nothing selected, unit weights.

    k-means on NaN trajectories has no meaning (numpy's k-means++ seeding raised "Probabilities
    contain NaN"); the run's GD is already marked failed, and its upsampled methods then train on
    the original data, so they are marked failed the same way.
    """
    n = losses.shape[0]
    mask = np.zeros(n, dtype=bool)
    name = "trajectory" if features == "log_ratio" else features
    cl = ClusterResult.from_labels(losses, np.zeros(n, dtype=int), features=name, n_clusters=2)
    return UpsampleResult(usage_weights(n, mask, factor), mask, cl, losses)


def select_batched(
    losses,
    seeds,
    *,
    selection: Literal["hard", "random", "easy", "condition"] = "hard",
    factor: int = 1,
    features: Literal["trajectory", "last", "relative", "log_ratio"] = "trajectory",
    n_init: int = 3,
    scores=None,
) -> list[UpsampleResult]:
    """:func:`select_for_upsampling` for ``R`` runs at once (``losses (R, P, K)``).

    One :func:`sims.selection.kmeans` per run (seeded by ``seeds[r]``; ~1 ms per Lloyd
    iteration at P = 80,000).

    ``selection="condition"`` upsamples, in each run, as many examples as the hard cluster has,
    those with the largest ``scores (R, P)`` (:func:`condition_scores`).
    """
    if selection not in SELECTIONS:
        raise ValueError(f"`selection` must be one of {SELECTIONS}; got {selection!r}.")
    if features not in FEATURES:
        raise ValueError(f"`features` must be one of {FEATURES}; got {features!r}.")
    losses = np.asarray(losses, dtype=float)
    if losses.ndim != 3:
        raise ValueError(f"`losses` must be (R, P, K); got shape {losses.shape}.")
    if selection == "condition" and (scores is None or np.shape(scores) != losses.shape[:2]):
        raise ValueError(
            f"`selection`='condition' needs `scores` of shape {losses.shape[:2]}; got "
            f"{None if scores is None else np.shape(scores)}."
        )
    seeds = np.asarray(seeds).reshape(-1)
    if seeds.size != losses.shape[0]:
        raise ValueError(
            f"`seeds` must have one entry per run ({losses.shape[0]}); got {seeds.size}."
        )
    out = []
    for r, seed in enumerate(seeds):
        if not np.all(np.isfinite(losses[r])):  # the proxy diverged: there is no selection
            out.append(_no_selection(losses[r], features, factor))
            continue
        feats = cluster_features(losses[r], features)
        raw, centers, inertia = kmeans(feats, 2, seed=int(seed), n_init=n_init)
        src, name = (feats, "trajectory") if features == "log_ratio" else (losses[r], features)
        cl = ClusterResult.from_labels(
            src, raw, features=name, centers=centers, inertia=inertia, n_clusters=2,
        )  # fmt: skip
        n = losses.shape[1]
        count = int(cl.hard_mask.sum())
        mask = _apply_selection(
            selection, cl.hard_mask, n, count, int(seed), None if scores is None else scores[r]
        )
        out.append(UpsampleResult(usage_weights(n, mask, factor), mask, cl, losses[r]))
    return out


def selection_report(data: ICLData, mask, *, factor: int = 1) -> dict[str, np.ndarray | float]:
    """What a selection picks, per eigen-direction ``e_i`` of ``Σ`` (decreasing ``λ_i``).

    Returns:
        dict with ``fraction`` (selected share), ``target_ratio`` (``E[y_q² | S]/E[y_q²]``),
        ``xq_ratio (d,)`` (``E[(e_iᵀx_q)² | S]/E[(e_iᵀx_q)²]``), ``xq_share (d,)`` and
        ``xq_share_all (d,)`` (the share of query energy on ``e_i`` in ``S`` and overall),
        ``beta_ratio (d,)`` (as :func:`hard_cluster_spectrum`), ``enrichment (d,)``
        (``m_i = E[y β_i x_{q,i} | S] / E[y β_i x_{q,i}]``, the feature's signal; for a rule
        that depends on ``x_q`` only it equals ``xq_ratio``), and ``boost (d,)`` (``r_i``, the
        factor by which usage weights ``1 + factor·1_S`` multiply the signal ``σ_i``).
    """
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (data.n_examples,):
        raise ValueError(f"`mask` must have shape ({data.n_examples},); got {mask.shape}.")
    lam, e = eigh_desc(data.cov)
    xq = data.xq @ e
    beta = data.beta @ e
    signal = data.yq[:, None] * beta * xq  # y β_i x_{q,i}, (P, d)
    sel = mask if mask.any() else np.zeros_like(mask)
    mean_all = signal.mean(0)
    mean_sel = signal[sel].mean(0) if sel.any() else np.full(lam.shape, np.nan)
    pi = float(mask.mean())
    energy_sel = (xq[sel] ** 2).mean(0) if sel.any() else np.full(lam.shape, np.nan)
    energy_all = (xq**2).mean(0)
    enrich = mean_sel / mean_all
    return {
        "fraction": pi,
        "target_ratio": float((data.yq[sel] ** 2).mean() / (data.yq**2).mean()),
        "xq_ratio": energy_sel / energy_all,
        "xq_share": energy_sel / energy_sel.sum(),
        "xq_share_all": energy_all / energy_all.sum(),
        "beta_ratio": hard_cluster_spectrum(data, mask)["beta_ratio"],
        "enrichment": enrich,
        "boost": boost(enrich, pi, factor),
    }
