"""Data selection from per-example loss trajectories (main paper, Section 5).

Pure numpy / scikit-learn functions shared by every experiment of the package (the in-context
linear-regression simulations, the Markov-chain experiments and the LLM pipeline). They operate on
plain arrays, never on a model.

The data-centric method of Section 5: train a proxy model for a short budget, record each
example's loss at ``K`` checkpoints (a trajectory), cluster the trajectories (or the last losses)
into two groups with k-means, call the cluster with the higher mean loss *hard* and upsample it by
duplication (usage count ``1 + factor``), then retrain from scratch on the upsampled data. The
compute-matched ablation (Figure 4d) upsamples the same number of random or easy examples.

Public API (stable):

* :func:`cluster_trajectories` ``(losses, n_clusters=2, *, seed=0, features="trajectory")``
  -> :class:`ClusterResult` (``labels, hard_cluster, hard_mask, centers, cluster_means,
  cluster_sizes, features, inertia``). ``features`` is ``"trajectory"`` (all checkpoints),
  ``"last"`` (the last checkpoint only) or ``"relative"`` (ratios ``loss[t+1]/loss[t]``, as in
  the authors' ``S2LRelativeUpsample``).
* :func:`usage_weights` ``(n_examples, selected_mask, factor=1)`` -> int array of usage counts
  (``1`` for every example, ``1 + factor`` for the selected ones).
* :func:`upsample_indices` ``(n_examples, selected_mask, factor=1, *, shuffle=False, seed=0)``
  -> int index array in which each selected example appears ``1 + factor`` times and every
  other example once (the originals are kept; sorted unless ``shuffle``).
* :func:`select_random` ``(n, count, seed=0)`` -> boolean mask with exactly ``count`` ``True``.
* :func:`select_easy` ``(hard_mask, count=None, *, seed=0)`` -> boolean mask of ``count``
  (default: as many as hard) examples drawn at random from the easy (non-hard) ones.
* :func:`select_hard_random_easy` ``(hard_mask, *, seed=0)`` -> dict ``{"hard", "random",
  "easy"}`` of equal-count masks for the compute-matched ablation.
* :func:`cluster_by_source` ``(losses, sources, n_clusters=2, *, seed=0, features="trajectory",
  small_sources="below_mean", min_source_size=0)`` -> :class:`SourceSelection`: the k-means of
  :func:`cluster_trajectories` run separately inside each data source (MathInstruct's 13
  sub-datasets), with the authors' small-sources rule (a source smaller than the mean source
  size, or than ``min_source_size``, is upsampled whole).
* :func:`log_spaced_steps` ``(total_steps, n_records, *, first=1)`` -> the recording schedule
  (step 0, then log-spaced), :func:`loss_learning_times` ``(steps, losses, fraction=0.5)`` ->
  per-example learning time (eq. 11's ``t_i``: the interpolated half-drop step),
  :func:`recordings_before` and :func:`selection_check` ``(times, selected, sources=None)`` ->
  :class:`SelectionCheck` (do the selected examples learn late? medians, AUC, Spearman).

Examples:
    >>> import numpy as np
    >>> losses = np.array([[1.0, 0.1], [1.0, 0.2], [1.0, 0.9], [1.0, 0.8]])
    >>> res = cluster_trajectories(losses, seed=0)
    >>> res.hard_mask.tolist()
    [False, False, True, True]
    >>> upsample_indices(4, res.hard_mask, factor=1).tolist()
    [0, 1, 2, 2, 3, 3]
    >>> usage_weights(4, res.hard_mask).tolist()
    [1, 1, 2, 2]
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

__all__ = [
    "ClusterResult",
    "FEATURES",
    "cluster_trajectories",
    "kmeans",
    "trajectory_features",
    "usage_weights",
    "upsample_indices",
    "select_random",
    "select_easy",
    "select_hard_random_easy",
    "SMALL_SOURCE_RULES",
    "SourceSelection",
    "cluster_by_source",
    "log_spaced_steps",
    "loss_learning_times",
    "recordings_before",
    "SelectionCheck",
    "selection_check",
]

#: Feature maps accepted by :func:`cluster_trajectories`.
FEATURES = ("trajectory", "last", "relative")


@dataclasses.dataclass(frozen=True)
class ClusterResult:
    """Outcome of :func:`cluster_trajectories`.

    Attributes:
        labels: ``(n_examples,)`` int cluster label of each example, relabelled so that cluster
            ``0`` has the lowest mean loss and cluster ``n_clusters - 1`` the highest.
        hard_cluster: label of the hard cluster (the highest mean loss), ``n_clusters - 1``.
        hard_mask: ``(n_examples,)`` boolean, ``labels == hard_cluster``.
        centers: ``(n_clusters, n_features)`` k-means centres in feature space (relabelled).
        cluster_means: ``(n_clusters,)`` per cluster, the mean loss over examples and
            checkpoints (``"trajectory"``), over examples at the last checkpoint (``"last"``),
            or the mean consecutive ratio (``"relative"``): the score that ranks the clusters.
        cluster_sizes: ``(n_clusters,)`` number of examples per cluster.
        features: the feature map used (``"trajectory"``, ``"last"`` or ``"relative"``).
        inertia: k-means within-cluster sum of squares.
    """

    labels: np.ndarray
    hard_cluster: int
    hard_mask: np.ndarray
    centers: np.ndarray
    cluster_means: np.ndarray
    cluster_sizes: np.ndarray
    features: str
    inertia: float

    @classmethod
    def from_labels(
        cls,
        losses,
        labels,
        *,
        features: str = "trajectory",
        centers=None,
        inertia: float = float("nan"),
        n_clusters: int | None = None,
    ) -> ClusterResult:
        """Build a result from raw cluster labels of any k-means (e.g. a batched GPU/JAX one).

        Relabels clusters by increasing mean loss (mean relative ratio for ``"relative"``, mean
        final-checkpoint loss for ``"last"``) so the hard cluster is the last one, exactly as
        :func:`cluster_trajectories` does.

        Args:
            losses: ``(n_examples, n_checkpoints)`` the clustered losses.
            labels: ``(n_examples,)`` raw integer labels in ``[0, n_clusters)``.
            features: the feature map the labels were computed on.
            centers: ``(n_clusters, n_features)`` raw centres (default: recomputed).
            inertia: the k-means objective (stored as is).
            n_clusters: default ``labels.max() + 1``.
        """
        arr = _as_losses(losses)
        raw = np.asarray(labels).astype(int)
        if raw.shape != (arr.shape[0],):
            raise ValueError(
                f"`labels` must have shape ({arr.shape[0]},) to match `losses`; got {raw.shape}."
            )
        k = int(raw.max()) + 1 if n_clusters is None else int(n_clusters)
        if raw.min() < 0 or raw.max() >= k:
            raise ValueError(
                f"`labels` must lie in [0, {k}); got range [{raw.min()}, {raw.max()}]."
            )
        feats = trajectory_features(arr, features)  # type: ignore[arg-type]
        if centers is None:
            centers = np.stack(
                [feats[raw == j].mean(0) if np.any(raw == j) else np.full(feats.shape[1], np.nan)
                 for j in range(k)]
            )  # fmt: skip
        # "last" ranks clusters by the final-checkpoint loss it clustered on (the paper's
        # "final values"), not by the mean over checkpoints, which can disagree with it
        score_src = feats if features in ("relative", "last") else np.nan_to_num(arr, nan=0.0)
        means = np.array(
            [score_src[raw == j].mean() if np.any(raw == j) else -np.inf for j in range(k)]
        )
        order = np.argsort(means, kind="stable")  # order[new] = old
        remap = np.empty(k, dtype=int)
        remap[order] = np.arange(k)
        new = remap[raw]
        return cls(
            labels=new,
            hard_cluster=k - 1,
            hard_mask=new == k - 1,
            centers=np.asarray(centers)[order],
            cluster_means=means[order],
            cluster_sizes=np.bincount(new, minlength=k),
            features=features,
            inertia=float(inertia),
        )

    @property
    def hard_fraction(self) -> float:
        """Fraction of examples in the hard cluster."""
        return float(self.hard_mask.mean()) if self.hard_mask.size else 0.0


def _as_losses(losses) -> np.ndarray:
    arr = np.asarray(losses, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(
            f"`losses` must have shape (n_examples, n_checkpoints); got shape {arr.shape}. "
            "Pass one row per example and one column per proxy checkpoint."
        )
    if arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"`losses` must be non-empty; got shape {arr.shape}.")
    return arr


def trajectory_features(
    losses, features: Literal["trajectory", "last", "relative"] = "trajectory"
) -> np.ndarray:
    """Map loss trajectories to clustering features.

    Args:
        losses: ``(n_examples, n_checkpoints)`` per-example losses (NaN are replaced by 0, as in
            the authors' code).
        features: ``"trajectory"`` (the raw rows), ``"last"`` (last column only) or
            ``"relative"`` (ratios ``loss[t+1] / loss[t]``; NaN/inf replaced by 1; needs at least
            two checkpoints).

    Returns:
        ``(n_examples, n_features)`` float array.

    Raises:
        ValueError: on a bad shape or an unknown ``features``.
    """
    arr = np.nan_to_num(_as_losses(losses), nan=0.0)
    if features == "trajectory":
        return arr
    if features == "last":
        return arr[:, -1:]
    if features == "relative":
        if arr.shape[1] < 2:
            raise ValueError(
                f"`features`='relative' needs at least 2 checkpoints; `losses` has shape "
                f"{arr.shape}. Use features='last' for a single checkpoint."
            )
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = arr[:, 1:] / arr[:, :-1]
        return np.where(np.isfinite(ratio), ratio, 1.0)
    raise ValueError(f"`features` must be one of {FEATURES}; got {features!r}.")


def cluster_trajectories(
    losses,
    n_clusters: int = 2,
    *,
    seed: int = 0,
    features: Literal["trajectory", "last", "relative"] = "trajectory",
    n_init: int = 10,
    backend: Literal["sklearn", "numpy"] = "sklearn",
    max_iter: int = 300,
) -> ClusterResult:
    """Cluster per-example loss trajectories with k-means; the highest-mean-loss cluster is hard.

    Implements the selection step of Section 5 of the main paper (proxy loss trajectories at K
    checkpoints, 2-cluster k-means, upsample the cluster with the higher average loss). Labels are
    relabelled by increasing mean loss so they do not depend on k-means' arbitrary numbering.
    For ``features="relative"`` "mean loss" is the mean relative ratio (slowest decrease = hard);
    for ``features="last"`` it is the mean loss at the last checkpoint (the values clustered).

    Args:
        losses: ``(n_examples, n_checkpoints)`` per-example losses (a 1-d array is one
            checkpoint).
        n_clusters: number of k-means clusters (``2`` in the paper), ``1 <= n_clusters <=
            n_examples``.
        seed: k-means random state.
        features: see :func:`trajectory_features`.
        n_init: number of k-means restarts.
        backend: ``"sklearn"`` (``sklearn.cluster.KMeans``) or ``"numpy"`` (a vectorized Lloyd
            iteration with k-means++ seeding and sklearn's stopping rule: centre shift <= 1e-4 x
            mean feature variance, or no label change; faster for tens of thousands of short
            trajectories; same objective, possibly a different local optimum).
        max_iter: Lloyd iterations per restart.

    Returns:
        A :class:`ClusterResult`.

    Raises:
        ValueError: on a bad ``losses`` shape, non-finite features, or an invalid ``n_clusters``.
    """
    arr = _as_losses(losses)
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, (int, np.integer)):
        raise TypeError(f"`n_clusters` must be an int; got {n_clusters!r} ({type(n_clusters)}).")
    if not 1 <= n_clusters <= arr.shape[0]:
        raise ValueError(
            f"`n_clusters` must be between 1 and n_examples={arr.shape[0]}; got {n_clusters}."
        )
    feats = trajectory_features(arr, features)
    if not np.all(np.isfinite(feats)):
        raise ValueError("`losses` contains infinite values; clean them before clustering.")
    if backend == "sklearn":
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed, max_iter=max_iter)
        km.fit(feats)
        raw, centers, inertia = km.labels_.astype(int), np.asarray(km.cluster_centers_), km.inertia_
    elif backend == "numpy":
        raw, centers, inertia = kmeans(feats, n_clusters, seed=seed, n_init=n_init,
                                       max_iter=max_iter)  # fmt: skip
    else:
        raise ValueError(f"`backend` must be 'sklearn' or 'numpy'; got {backend!r}.")
    return ClusterResult.from_labels(
        arr, raw, features=features, centers=centers, inertia=inertia, n_clusters=n_clusters
    )


def kmeans(x, k: int = 2, *, seed: int = 0, n_init: int = 1, max_iter: int = 300):
    """Lloyd's k-means with k-means++ seeding on ``x (P, F)``; best of ``n_init`` by inertia.

    sklearn's stopping rule (no label change, or a centre shift <= 1e-4 x the mean feature
    variance). Distances as ``‖x‖² − 2 x·c + ‖c‖²`` (one skinny matrix product per iteration),
    centres as ``onehotᵀ x``: ~1 ms per iteration at P = 80,000, F = 5 on one core, so the 25
    selections of Figure 1 cost a fraction of a second. Deterministic in ``seed``.

    Returns:
        ``(labels (P,), centers (k, F), inertia)`` with raw (not yet relabelled) cluster ids.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # skinny products: BLAS threads cost ~7x here, never gain
        return _kmeans(np.ascontiguousarray(x, dtype=float), k, seed, n_init, max_iter)


def _kmeans(x: np.ndarray, k: int, seed: int, n_init: int, max_iter: int):
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    xsq = np.einsum("ij,ij->i", x, x)
    total = x.sum(axis=0)
    tol = 1e-4 * float(np.mean(np.var(x, axis=0)))  # sklearn's convergence tolerance
    arange_k = np.arange(k)

    def sq_dist(centers):
        d = xsq[:, None] - 2.0 * (x @ centers.T) + np.einsum("ij,ij->i", centers, centers)
        return np.maximum(d, 0.0)

    def assign(centers):
        if k == 2:  # nearer to c1 than c0 ⟺ x·(c1 − c0) > (‖c1‖² − ‖c0‖²)/2 (ties: 0)
            c0, c1 = centers
            return (x @ (c1 - c0) > 0.5 * (c1 @ c1 - c0 @ c0)).astype(np.intp)
        return np.argmin(sq_dist(centers), axis=1)

    def cluster_sums(labels):
        if k == 2:  # one matrix-vector product instead of a one-hot matrix
            m = labels.astype(float)
            s1, n1 = m @ x, m.sum()
            return np.stack([total - s1, s1]), np.array([n - n1, n1])
        onehot = (labels[:, None] == arange_k).astype(float)
        return onehot.T @ x, onehot.sum(axis=0)

    best = None
    for _ in range(max(1, n_init)):
        centers = x[[rng.integers(n)]].copy()
        for _ in range(1, k):  # k-means++ seeding: the next centre with probability ∝ d²
            d2 = sq_dist(centers).min(axis=1)
            p = d2 / d2.sum() if d2.sum() > 0 else None
            centers = np.vstack([centers, x[rng.choice(n, p=p)]])
        labels = np.full(n, -1)
        for _ in range(max_iter):
            new = assign(centers)
            if np.array_equal(new, labels):
                break
            labels = new
            sums, counts = cluster_sums(labels)
            nonempty = counts > 0
            old = centers.copy()
            centers[nonempty] = sums[nonempty] / counts[nonempty, None]
            if np.sum((centers - old) ** 2) <= tol:
                break
        dist = sq_dist(centers)
        labels = np.argmin(dist, axis=1)
        inertia = float(dist[np.arange(n), labels].sum())
        if best is None or inertia < best[2]:
            best = (labels.copy(), centers.copy(), inertia)
    return best


def _as_mask(n_examples: int, selected_mask, name: str = "selected_mask") -> np.ndarray:
    if isinstance(n_examples, bool) or not isinstance(n_examples, (int, np.integer)):
        raise TypeError(f"`n_examples` must be an int; got {n_examples!r}.")
    if n_examples < 0:
        raise ValueError(f"`n_examples` must be >= 0; got {n_examples}.")
    mask = np.asarray(selected_mask)
    if mask.dtype != bool:
        raise TypeError(
            f"`{name}` must be a boolean mask; got dtype {mask.dtype}. "
            "Convert indices with np.isin(np.arange(n), idx)."
        )
    if mask.shape != (n_examples,):
        raise ValueError(
            f"`{name}` must have shape ({n_examples},) to match `n_examples`; got {mask.shape}."
        )
    return mask


def _as_1d_mask(hard_mask) -> np.ndarray:
    mask = np.asarray(hard_mask)
    if mask.ndim != 1:
        raise ValueError(
            f"`hard_mask` must be 1-d (one entry per example); got shape {mask.shape}."
        )
    return _as_mask(mask.shape[0], mask, "hard_mask")


def _check_factor(factor) -> int:
    if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)):
        raise TypeError(f"`factor` must be a non-negative int; got {factor!r}.")
    if factor < 0:
        raise ValueError(
            f"`factor` must be >= 0 (extra copies per selected example); got {factor}."
        )
    return int(factor)


def usage_weights(n_examples: int, selected_mask, factor: int = 1) -> np.ndarray:
    """Per-example usage counts: 1 for every example, ``1 + factor`` for the selected ones.

    Full-batch training on the upsampled set equals training with these weights on the original
    set (weighted mean over examples), which is how the simulations use it.

    Args:
        n_examples: dataset size.
        selected_mask: ``(n_examples,)`` boolean mask of examples to upsample.
        factor: extra copies per selected example (the authors' ``upsample_amount``; the
            paper states no value; their code defaults to 3 and its configs use 1, e.g.
            ``configs/s2l_upsample_6.yml`` of chrisVat/sam at 1c560fc).

    Returns:
        ``(n_examples,)`` int64 array.

    Raises:
        TypeError, ValueError: on a non-boolean or mis-shaped mask or a negative ``factor``.
    """
    mask = _as_mask(n_examples, selected_mask)
    f = _check_factor(factor)
    return np.where(mask, 1 + f, 1).astype(np.int64)


def upsample_indices(
    n_examples: int, selected_mask, factor: int = 1, *, shuffle: bool = False, seed: int = 0
) -> np.ndarray:
    """Indices of the upsampled dataset: each selected example ``1 + factor`` times, others once.

    Args:
        n_examples: dataset size.
        selected_mask: ``(n_examples,)`` boolean mask.
        factor: extra copies per selected example.
        shuffle: shuffle the result (seeded); otherwise sorted.
        seed: shuffle seed.

    Returns:
        int64 index array of length ``n_examples + factor * selected_mask.sum()``.
    """
    counts = usage_weights(n_examples, selected_mask, factor)
    idx = np.repeat(np.arange(n_examples, dtype=np.int64), counts)
    if shuffle:
        np.random.default_rng(seed).shuffle(idx)
    return idx


def select_random(n: int, count: int, seed: int = 0) -> np.ndarray:
    """Boolean mask with exactly ``count`` examples chosen uniformly at random out of ``n``."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"`n` must be a non-negative int; got {n!r}.")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"`count` must be an int; got {count!r}.")
    if not 0 <= count <= n:
        raise ValueError(f"`count` must be between 0 and n={n}; got {count}.")
    mask = np.zeros(n, dtype=bool)
    mask[np.random.default_rng(seed).choice(n, size=int(count), replace=False)] = True
    return mask


def select_easy(hard_mask, count: int | None = None, *, seed: int = 0) -> np.ndarray:
    """Random subset of the easy (not hard) examples, for the compute-matched ablation (Fig. 4d).

    Args:
        hard_mask: ``(n_examples,)`` boolean mask of hard examples.
        count: how many easy examples to select; default ``hard_mask.sum()`` (same count as hard).
        seed: sampling seed.

    Returns:
        ``(n_examples,)`` boolean mask, disjoint from ``hard_mask``.

    Raises:
        ValueError: when there are fewer than ``count`` easy examples.
    """
    mask = _as_1d_mask(hard_mask)
    easy = np.flatnonzero(~mask)
    count = int(mask.sum()) if count is None else count
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise ValueError(f"`count` must be a non-negative int; got {count!r}.")
    if count > easy.size:
        raise ValueError(
            f"`count`={count} exceeds the number of easy examples ({easy.size}); "
            "pass a smaller `count`."
        )
    out = np.zeros(mask.shape[0], dtype=bool)
    out[np.random.default_rng(seed).choice(easy, size=count, replace=False)] = True
    return out


def select_hard_random_easy(hard_mask, *, seed: int = 0) -> dict[str, np.ndarray]:
    """Equal-count masks ``{"hard", "random", "easy"}`` for the compute-matched ablation.

    ``easy`` is clipped to the number of easy examples when the hard cluster is the larger one.
    """
    mask = _as_1d_mask(hard_mask)
    count = int(mask.sum())
    return {
        "hard": mask.copy(),
        "random": select_random(mask.shape[0], count, seed=seed),
        "easy": select_easy(mask, min(count, int((~mask).sum())), seed=seed + 1),
    }


#: Small-source rules of :func:`cluster_by_source`.
SMALL_SOURCE_RULES = ("below_mean", "none")


@dataclasses.dataclass(frozen=True)
class SourceSelection:
    """Outcome of :func:`cluster_by_source`.

    Attributes:
        hard_mask: ``(n_examples,)`` boolean, the examples to upsample (hard clusters of the
            clustered sources plus every example of the small sources).
        labels: ``(n_examples,)`` int, the cluster of each example inside its source (``0`` =
            lowest mean loss, ``n_clusters - 1`` = hard); ``-1`` for examples of sources that were
            not clustered (small or degenerate).
        sources: the distinct source names, in order of first appearance.
        per_source: for each source a dict with ``size``, ``rule`` (``"clustered"``, ``"small"``
            or ``"degenerate"``: fewer distinct feature rows than clusters, nothing selected),
            ``n_hard``, ``hard_fraction``, and for clustered sources ``cluster_means``,
            ``cluster_sizes`` and ``centers`` (k-means centres in feature space, hard last).
        features: the feature map used.
        n_clusters: k of the per-source k-means.
    """

    hard_mask: np.ndarray
    labels: np.ndarray
    sources: tuple[str, ...]
    per_source: dict[str, dict]
    features: str
    n_clusters: int

    @property
    def hard_fraction(self) -> float:
        """Fraction of all examples selected."""
        return float(self.hard_mask.mean()) if self.hard_mask.size else 0.0


def cluster_by_source(
    losses,
    sources,
    n_clusters: int = 2,
    *,
    seed: int = 0,
    features: Literal["trajectory", "last", "relative"] = "trajectory",
    small_sources: Literal["below_mean", "none"] = "below_mean",
    min_source_size: int = 0,
    **kmeans_kwargs,
) -> SourceSelection:
    """Per-source k-means on loss trajectories; the hard cluster of each source is selected.

    The selection of the main paper (Section 5) as the authors run it on MathInstruct
    (``chrisVat/sam``, ``schedules/s2l_upsample.py``): the data come from heterogeneous sources
    whose losses differ in level, so the two clusters are found *inside* each source (by
    :func:`cluster_trajectories`, same features and relabelling), and the higher-mean cluster of
    every source is hard. Sources too small to cluster are upsampled whole:

    * ``small_sources="below_mean"`` (the authors' rule): a source with fewer examples than the
      mean source size is selected whole;
    * ``min_source_size``: a source with fewer examples is selected whole, whatever the rule
      (the authors' code, chrisVat/sam at 1c560fc, uses 78 in both ``S2LUpsample`` and
      ``S2LRelativeUpsample``; the paper gives no number);
    * ``small_sources="none"`` and ``min_source_size=0``: every source is clustered.

    A clustered source whose features have fewer distinct rows than ``n_clusters`` (e.g. all
    losses equal) cannot be split: it is marked ``"degenerate"`` and nothing of it is selected.

    Args:
        losses: ``(n_examples, n_checkpoints)`` per-example losses.
        sources: ``(n_examples,)`` source name (or any hashable label) of each example.
        n_clusters: k of each source's k-means (2 in the paper).
        seed: k-means seed (the same for every source).
        features: ``"trajectory"``, ``"last"`` or ``"relative"`` (see
            :func:`trajectory_features`).
        small_sources: ``"below_mean"`` or ``"none"``.
        min_source_size: sources with fewer examples are selected whole (>= 0).
        **kmeans_kwargs: passed to :func:`cluster_trajectories` (``n_init``, ``backend``, ...).

    Returns:
        A :class:`SourceSelection`.

    Raises:
        ValueError: on mismatched shapes or an unknown rule.

    Examples:
        >>> import numpy as np
        >>> losses = np.array([[1.0, .1], [1.0, .2], [1.0, .9], [1.0, .8], [2.0, 2.0]])
        >>> sel = cluster_by_source(losses, ["a", "a", "a", "a", "b"], small_sources="below_mean")
        >>> sel.hard_mask.tolist(), sel.per_source["b"]["rule"]
        ([False, False, True, True, True], 'small')
    """
    arr = _as_losses(losses)
    src = np.asarray(sources)
    if src.shape != (arr.shape[0],):
        raise ValueError(
            f"`sources` must have shape ({arr.shape[0]},) to match `losses`; got {src.shape}."
        )
    if small_sources not in SMALL_SOURCE_RULES:
        raise ValueError(
            f"`small_sources` must be one of {SMALL_SOURCE_RULES}; got {small_sources!r}."
        )
    if isinstance(min_source_size, bool) or not isinstance(min_source_size, (int, np.integer)):
        raise TypeError(f"`min_source_size` must be an int; got {min_source_size!r}.")
    if min_source_size < 0:
        raise ValueError(f"`min_source_size` must be >= 0; got {min_source_size}.")
    names, first, inverse = np.unique(src, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # sources in order of first appearance
    sizes = np.bincount(inverse, minlength=len(names))
    mean_size = float(sizes.mean())
    hard = np.zeros(arr.shape[0], dtype=bool)
    labels = np.full(arr.shape[0], -1, dtype=int)
    per_source: dict[str, dict] = {}
    for j in order:
        idx = np.flatnonzero(inverse == j)
        size = int(idx.size)
        info: dict = {"size": size}
        small = size < min_source_size or (small_sources == "below_mean" and size < mean_size)
        if small:
            hard[idx] = True
            info.update(rule="small", n_hard=size)
        else:
            feats = trajectory_features(arr[idx], features)
            if np.unique(feats, axis=0).shape[0] < n_clusters:
                info.update(rule="degenerate", n_hard=0)
            else:
                res = cluster_trajectories(
                    arr[idx], n_clusters, seed=seed, features=features, **kmeans_kwargs
                )
                hard[idx] = res.hard_mask
                labels[idx] = res.labels
                info.update(
                    rule="clustered",
                    n_hard=int(res.hard_mask.sum()),
                    cluster_means=res.cluster_means.tolist(),
                    cluster_sizes=res.cluster_sizes.tolist(),
                    centers=res.centers.tolist(),
                )
        info["hard_fraction"] = info["n_hard"] / size
        per_source[str(names[j])] = info
    return SourceSelection(
        hard_mask=hard,
        labels=labels,
        sources=tuple(str(names[j]) for j in order),
        per_source=per_source,
        features=features,
        n_clusters=int(n_clusters),
    )


# --- learning times and the selection check (issue 36) -------------------------------------------


def log_spaced_steps(total_steps: int, n_records: int, *, first: int = 1) -> np.ndarray:
    """Recording schedule: step 0, then ``n_records - 1`` steps log-spaced from ``first``.

    Loss trajectories recorded on an even grid put most examples' half-drop inside the first
    interval, so their learning times are interpolated from one segment. A log-spaced grid
    records densely where losses move fast (the first steps) and sparsely later. Rounding can
    make neighbouring grid points coincide; each duplicate is moved to the next free step, so
    the schedule always holds exactly ``n_records`` distinct, increasing integer steps ending at
    ``total_steps``.

    Args:
        total_steps: the last step recorded (>= ``n_records - 1``).
        n_records: number of recordings, step 0 included (>= 2).
        first: the first step after 0 (1 <= first <= total_steps).

    Returns:
        ``(n_records,)`` int array: ``0, first, ..., total_steps``.

    Examples:
        >>> log_spaced_steps(1000, 5).tolist()
        [0, 1, 10, 100, 1000]
        >>> log_spaced_steps(4, 5).tolist()
        [0, 1, 2, 3, 4]
    """
    for name, v in (("total_steps", total_steps), ("n_records", n_records), ("first", first)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"`{name}` must be an int; got {v!r}.")
    if n_records < 2:
        raise ValueError(f"`n_records` must be >= 2 (step 0 and the last step); got {n_records}.")
    if not 1 <= first <= total_steps:
        raise ValueError(
            f"`first` must satisfy 1 <= first <= total_steps; got first={first}, "
            f"total_steps={total_steps}."
        )
    if total_steps - first + 1 < n_records - 1:
        raise ValueError(
            f"{n_records} distinct recordings need total_steps - first >= {n_records - 2}; got "
            f"total_steps={total_steps}, first={first}: record fewer or train longer."
        )
    grid = np.rint(np.geomspace(first, total_steps, n_records - 1)).astype(np.int64)
    # Push coinciding points forward, then pull back from the end so the last is total_steps.
    for i in range(1, grid.size):
        grid[i] = max(grid[i], grid[i - 1] + 1)
    grid[-1] = total_steps
    for i in range(grid.size - 2, -1, -1):
        grid[i] = min(grid[i], grid[i + 1] - 1)
    return np.concatenate([[0], grid])


def loss_learning_times(steps, losses, fraction: float = 0.5) -> np.ndarray:
    """Per-example learning time: the step at which its loss made ``fraction`` of its drop.

    The learning time ``t_i`` of the main paper's eq. (11), measured on a recorded loss
    trajectory: with ``L0`` the loss at the first recording and ``Lmin`` the lowest recorded
    loss, ``t_i`` is the first step at which the loss reaches ``L0 - fraction * (L0 - Lmin)``,
    linearly interpolated between the two recordings around the crossing. A trajectory that
    never drops below its first value (``L0 <= Lmin``) or has a non-finite value has no learning
    time: ``nan`` ("not learned within the recorded budget").

    Args:
        steps: ``(K,)`` increasing recording steps.
        losses: ``(n, K)`` (or ``(K,)``) losses at those steps.
        fraction: the share of the drop that defines "learned", in (0, 1]; 0.5 = half-drop.

    Returns:
        ``(n,)`` float array of steps (``nan`` where not learned).

    Examples:
        >>> loss_learning_times([0, 10, 20], [[4.0, 2.0, 0.0], [1.0, 1.0, 2.0]]).tolist()
        [10.0, nan]
    """
    s = np.asarray(steps, dtype=float)
    x = np.asarray(losses, dtype=float)
    if x.ndim == 1:
        x = x[None, :]
    if s.ndim != 1 or x.ndim != 2 or x.shape[1] != s.size or s.size < 2:
        raise ValueError(
            f"`losses` must be (n, K) with K = len(steps) >= 2; got losses {x.shape}, steps "
            f"{s.shape}."
        )
    if not np.all(np.diff(s) > 0):
        raise ValueError(f"`steps` must be strictly increasing; got {s.tolist()}.")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"`fraction` must be in (0, 1]; got {fraction}.")
    out = np.full(x.shape[0], np.nan)
    finite = np.all(np.isfinite(x), axis=1)
    lo = np.where(finite, x.min(axis=1, initial=np.inf, where=finite[:, None]), np.nan)
    ok = finite & (x[:, 0] > lo)
    if not ok.any():
        return out
    xs = x[ok]
    level = xs[:, 0] - fraction * (xs[:, 0] - lo[ok])
    j = np.argmax(xs <= level[:, None], axis=1)  # first recording at or below the level
    rows = np.arange(xs.shape[0])
    y1 = xs[rows, j]
    y0 = xs[rows, np.maximum(j - 1, 0)]
    t1 = s[j]
    t0 = s[np.maximum(j - 1, 0)]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(y0 != y1, t0 + (t1 - t0) * (y0 - level) / (y0 - y1), t1)
    out[ok] = np.where(j == 0, s[0], t)
    return out


def recordings_before(steps, times) -> np.ndarray:
    """Number of recordings strictly before each time (``nan`` times give ``-1``).

    A learning time is measured, not extrapolated, only when recordings bracket it from below;
    issue 36 asks for >= 3 before the median example's half-drop.

    Examples:
        >>> recordings_before([0, 1, 10, 100], [0.5, 10.0, 50.0, float("nan")]).tolist()
        [1, 2, 3, -1]
    """
    s = np.asarray(steps, dtype=float)
    t = np.asarray(times, dtype=float)
    n = np.searchsorted(s, t, side="left").astype(np.int64)
    return np.where(np.isfinite(t), n, -1)


@dataclasses.dataclass(frozen=True)
class SelectionCheck:
    """Does a selection pick the late-learned examples? (:func:`selection_check`).

    Attributes:
        n_selected, n_rest: sizes of the two groups.
        n_unlearned_selected, n_unlearned_rest: examples with no learning time (never made the
            drop within the recorded budget), counted as learned last.
        median_time_selected, median_time_rest: medians of the learning times (``inf`` when over
            half of a group is unlearned).
        auc: probability that a random selected example is learned later than a random other
            one (ties count 1/2): the Mann-Whitney ``U / (n_selected * n_rest)``; 0.5 = blind,
            1 = the selection is exactly the late learners.
        mannwhitney_p: two-sided Mann-Whitney p-value of the same comparison.
        spearman_share_vs_time: across sources, Spearman correlation between a source's share of
            selected examples and its median learning time (``nan`` with < 3 sources or a
            constant column).
        spearman_p: its two-sided p-value.
        per_source: source -> ``{"n", "share_selected", "median_time"}``.
    """

    n_selected: int
    n_rest: int
    n_unlearned_selected: int
    n_unlearned_rest: int
    median_time_selected: float
    median_time_rest: float
    auc: float
    mannwhitney_p: float
    spearman_share_vs_time: float
    spearman_p: float
    per_source: dict[str, dict]

    def to_dict(self) -> dict:
        """Plain-JSON dict (``inf`` and ``nan`` become ``None``)."""

        def clean(v):
            if isinstance(v, dict):
                return {k: clean(w) for k, w in v.items()}
            if isinstance(v, float) and not np.isfinite(v):
                return None
            return v

        return clean(dataclasses.asdict(self))


def selection_check(times, selected, sources=None) -> SelectionCheck:
    """Compare the learning times of the selected examples with the rest's.

    The paper's mechanism needs the upsampled examples to be the ones learned late. This
    measures it: medians of both groups, the AUC of "selected is learned later" (unlearned
    examples count as learned last), and, with ``sources``, the Spearman correlation across
    sources of the share selected against the source's median learning time.

    Args:
        times: ``(n,)`` learning times (:func:`loss_learning_times`; ``nan`` = not learned).
        selected: ``(n,)`` boolean mask of the selected examples (both groups non-empty).
        sources: optional ``(n,)`` source labels.

    Returns:
        A :class:`SelectionCheck`.

    Examples:
        >>> chk = selection_check([1.0, 2.0, 3.0, float("nan")], [False, False, True, True])
        >>> chk.auc, chk.median_time_selected, chk.n_unlearned_selected
        (1.0, inf, 1)
    """
    from scipy import stats

    t = np.asarray(times, dtype=float)
    if t.ndim != 1:
        raise ValueError(f"`times` must be 1-D; got shape {t.shape}.")
    sel = _as_mask(t.size, selected, "selected")
    if sel.all() or not sel.any():
        raise ValueError(
            f"`selected` must select some but not all examples; got {int(sel.sum())} of "
            f"{t.size}: the check compares two groups."
        )
    ranked = np.where(np.isfinite(t), t, np.inf)  # unlearned = learned last
    a, b = ranked[sel], ranked[~sel]
    r = stats.rankdata(ranked)
    u = r[sel].sum() - a.size * (a.size + 1) / 2.0
    auc = float(u / (a.size * b.size))
    p = float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue) if np.ptp(ranked) else 1.0
    per: dict[str, dict] = {}
    rho = p_rho = float("nan")
    if sources is not None:
        src = np.asarray(sources)
        if src.shape != t.shape:
            raise ValueError(f"`sources` must have shape {t.shape}; got {src.shape}.")
        names, first = np.unique(src, return_index=True)
        for name in names[np.argsort(first, kind="stable")]:
            m = src == name
            per[str(name)] = {
                "n": int(m.sum()),
                "share_selected": float(sel[m].mean()),
                "median_time": float(np.median(ranked[m])),
            }
        shares = np.array([v["share_selected"] for v in per.values()])
        meds = np.array([v["median_time"] for v in per.values()])
        if len(per) >= 3 and np.ptp(shares) > 0 and np.unique(meds).size > 1:
            res = stats.spearmanr(shares, meds)
            rho, p_rho = float(res.statistic), float(res.pvalue)
    return SelectionCheck(
        n_selected=int(a.size),
        n_rest=int(b.size),
        n_unlearned_selected=int(np.isinf(a).sum()),
        n_unlearned_rest=int(np.isinf(b).sum()),
        median_time_selected=float(np.median(a)),
        median_time_rest=float(np.median(b)),
        auc=auc,
        mannwhitney_p=p,
        spearman_share_vs_time=rho,
        spearman_p=p_rho,
        per_source=per,
    )
