r"""Order-``w`` Markov chains with sparse lag groups (seed 004, Eq. (1)-(3), Tables 1 and 4).

The next token is drawn from

.. math::

    x_t \sim \mathrm{softmax}\Big(\sum_{k=1}^{h} A_k^* \sum_{\ell\in I(k)} \alpha_\ell\,
    e_{x_{t-\ell}}\Big), \qquad A_k^* = m_k O_k,\ \alpha_\ell = 1/|I(k)|,

with Haar-orthogonal ``O_k`` and 1-based lags ``ell`` (lag 1 = the preceding token; digest A1).
The lag groups are an explicit list of ``(lags, scale)`` pairs, so the paper's default
(:meth:`ChainConfig.hierarchical`, Table 4) and the reversed-order variant of App. C.4
(:meth:`ChainConfig.reversed_order`) are both plain configs.

A sequence has ``L = w + T`` tokens: ``w`` uniform seed tokens and ``T`` generated ones; only the
``T`` generated tokens are scored. Random streams (digest A5): ``SeedSequence(seed).spawn(4)`` gives
the ground-truth matrices, the training data, the test data and the model/training stream, in that
order.

Examples:
    >>> cfg = ChainConfig.hierarchical(w=6, h=3, m=1.7, b0=10.0, d=8, T=5)
    >>> chain = MarkovChain(cfg, seed=0)
    >>> x = chain.sample(4, np.random.default_rng(0))
    >>> x.shape
    (4, 11)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence

import numpy as np

try:  # numba is optional: the numpy path is only a few times slower
    import numba

    _HAVE_NUMBA = True
except ImportError:  # pragma: no cover - depends on the environment
    _HAVE_NUMBA = False

__all__ = [
    "ChainConfig",
    "MarkovChain",
    "MarkovData",
    "OnlineStream",
    "BatchSampler",
    "haar_orthogonal",
    "make_dataset",
    "kl_divergence",
    "best_restricted_log_probs",
]


@dataclasses.dataclass(frozen=True)
class ChainConfig:
    """The data-generating process of Eq. (1) (Tables 1 and 4).

    Attributes:
        groups: ``((lags, scale), ...)`` in order of the paper's index ``k``; ``lags`` are 1-based
            (lag 1 is the preceding token), disjoint across groups; ``scale`` is ``m_k`` in
            ``A_k^* = m_k O_k`` (operator norm). Restricted truths ``f_{A*_{1:i}}`` use the first
            ``i`` groups.
        d: vocabulary size (Table 1: 50).
        T: number of generated (scored) tokens per sequence (Table 1: 20).
        w: Markov order / window; ``None`` means the largest lag. Every lag must be in ``1..w``.
    """

    groups: tuple[tuple[tuple[int, ...], float], ...]
    d: int = 50
    T: int = 20
    w: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.groups, (tuple, list)) or len(self.groups) == 0:
            raise ValueError(
                "`groups` must be a non-empty sequence of (lags, scale) pairs; "
                f"got {self.groups!r}."
            )
        norm: list[tuple[tuple[int, ...], float]] = []
        seen: dict[int, int] = {}
        for k, g in enumerate(self.groups):
            if not isinstance(g, (tuple, list)) or len(g) != 2:
                raise ValueError(f"`groups[{k}]` must be a (lags, scale) pair; got {g!r}.")
            lags, scale = g
            lags = tuple(int(x) for x in lags)
            if len(lags) == 0:
                raise ValueError(f"`groups[{k}]` has no lags; give at least one lag >= 1.")
            if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
                raise ValueError(
                    f"`groups[{k}]` scale must be a positive finite number; got {scale!r}. "
                    "Use m**(h-k)*b0 > 0 (Table 1)."
                )
            for lag in lags:
                if lag < 1:
                    raise ValueError(
                        f"`groups[{k}]` has lag {lag}; lags are 1-based (lag 1 = preceding token)."
                    )
                if lag in seen:
                    raise ValueError(
                        f"`groups` overlap: lag {lag} is in group {seen[lag]} and group {k}; "
                        "the lag groups I(k) must be disjoint."
                    )
                seen[lag] = k
            norm.append((lags, float(scale)))
        object.__setattr__(self, "groups", tuple(norm))
        if not (isinstance(self.d, int) and self.d >= 2):
            raise ValueError(f"`d` must be an int >= 2; got {self.d!r}.")
        if not (isinstance(self.T, int) and self.T >= 1):
            raise ValueError(f"`T` must be an int >= 1; got {self.T!r}.")
        max_lag = max(seen)
        if self.w is None:
            object.__setattr__(self, "w", max_lag)
        elif not (isinstance(self.w, int) and self.w >= max_lag):
            raise ValueError(
                f"`groups` do not fit in the window: largest lag {max_lag} > `w`={self.w!r}; "
                f"raise `w` to at least {max_lag} or drop the lag."
            )

    # ------------------------------------------------------------------ constructors
    @classmethod
    def hierarchical(
        cls, *, w: int = 6, h: int = 3, m: float = 1.7, b0: float = 10.0, d: int = 50, T: int = 20
    ) -> ChainConfig:
        """Equal contiguous blocks, nearest most important: ``m_k = m^{h-k} b0`` (Eq. (2), Table 4).

        ``w=6`` is the minimal configuration ({1,2},{3,4},{5,6}); ``w=12`` the full one.
        """
        if not (isinstance(h, int) and h >= 1 and isinstance(w, int) and w % h == 0 and w >= h):
            raise ValueError(f"`w`={w!r} must be a positive multiple of `h`={h!r} (App. B).")
        if not (math.isfinite(m) and math.isfinite(b0) and m > 0 and b0 > 0):
            raise ValueError(f"`m`={m!r} and `b0`={b0!r} must be finite and positive (Table 1).")
        size = w // h
        groups = tuple(
            (tuple(range(k * size + 1, (k + 1) * size + 1)), float(m ** (h - 1 - k) * b0))
            for k in range(h)
        )
        return cls(groups=groups, d=d, T=T, w=w)

    @classmethod
    def reversed_order(
        cls, *, m: float = 1.7, b0: float = 10.0, d: int = 50, T: int = 20,
        lengths: Sequence[int] = (2, 4, 8),
    ) -> ChainConfig:  # fmt: skip
        """App. C.4 (digest reading A): the furthest block is the most important.

        Blocks counted from the furthest lag: the first (most important, scale ``m^{h-1} b0``)
        has ``lengths[0]`` lags at the far end of the window, and so on; the default gives
        ``I(1)={13,14}``, ``I(2)={9..12}``, ``I(3)={1..8}`` with ``w = 14``.
        """
        h = len(lengths)
        w = int(sum(lengths))
        groups, hi = [], w
        for k, n in enumerate(lengths):
            groups.append((tuple(range(hi - n + 1, hi + 1)), float(m ** (h - 1 - k) * b0)))
            hi -= n
        return cls(groups=tuple(groups), d=d, T=T, w=w)

    # ------------------------------------------------------------------ properties
    @property
    def h(self) -> int:
        """Number of lag groups."""
        return len(self.groups)

    @property
    def L(self) -> int:
        """Sequence length ``w + T``."""
        return int(self.w) + self.T

    @property
    def scales(self) -> tuple[float, ...]:
        """``(m_1, ..., m_h)``."""
        return tuple(s for _, s in self.groups)

    @property
    def lags(self) -> tuple[tuple[int, ...], ...]:
        """``(I(1), ..., I(h))`` as 1-based lags."""
        return tuple(lg for lg, _ in self.groups)


def haar_orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-distributed orthogonal ``d x d`` matrix (QR of a Gaussian with sign fix; App. B)."""
    z = rng.standard_normal((d, d))
    q, r = np.linalg.qr(z)
    return q * np.sign(np.diag(r))[None, :]


if _HAVE_NUMBA:

    @numba.njit(cache=True)
    def _sample_nb(x, W, u, w):  # pragma: no cover - compiled
        n, L = x.shape
        d = W.shape[2]
        z = np.empty(d)
        for i in range(n):
            for t in range(w, L):
                for v in range(d):
                    z[v] = 0.0
                for lag in range(1, w + 1):
                    row = W[lag - 1, x[i, t - lag]]
                    for v in range(d):
                        z[v] += row[v]
                zmax = z.max()
                tot = 0.0
                for v in range(d):
                    z[v] = math.exp(z[v] - zmax)
                    tot += z[v]
                thr = u[i, t - w] * tot
                acc = 0.0
                pick = d - 1
                for v in range(d):
                    acc += z[v]
                    if acc >= thr:
                        pick = v
                        break
                x[i, t] = pick
        return x


if _HAVE_NUMBA:

    @numba.njit(cache=True)
    def _lw_nb(x, W, L, seen, N, seed):  # pragma: no cover - compiled
        """Likelihood weighting at target position ``L`` for every context (see below)."""
        np.random.seed(seed)
        n = x.shape[0]
        w, d = W.shape[0], W.shape[2]
        oldest = 0
        for lag in range(1, w + 1):
            if seen[lag]:
                oldest = lag
        first = max(L - oldest, 0)
        prefix = np.empty((N, max(first, 1)), dtype=np.int64)
        z = np.empty(d)
        y = np.empty(L, dtype=np.int64)
        for j in range(N):  # context-independent part, shared by all contexts
            for pos in range(first):
                if pos < w:
                    y[pos] = np.random.randint(0, d)
                else:
                    y[pos] = _draw(W, y, pos, z, np.random.random())
                prefix[j, pos] = y[pos]
        out = np.zeros((n, d))
        logw = np.empty(N)
        pred = np.empty((N, d))
        for i in range(n):
            for j in range(N):
                for pos in range(first):
                    y[pos] = prefix[j, pos]
                lw = 0.0
                for pos in range(first, L):
                    lag = L - pos
                    if seen[lag]:
                        if pos >= w:  # seed tokens are uniform: constant evidence weight
                            lw += _logp(W, y, pos, z, x[i, pos])
                        y[pos] = x[i, pos]
                    elif pos < w:
                        y[pos] = np.random.randint(0, d)
                    else:
                        y[pos] = _draw(W, y, pos, z, np.random.random())
                _logits(W, y, L, z)
                zmax = z.max()
                tot = 0.0
                for v in range(d):
                    z[v] = math.exp(z[v] - zmax)
                    tot += z[v]
                for v in range(d):
                    pred[j, v] = z[v] / tot
                logw[j] = lw
            m = logw.max()
            wsum = 0.0
            for j in range(N):
                wj = math.exp(logw[j] - m)
                wsum += wj
                for v in range(d):
                    out[i, v] += wj * pred[j, v]
            for v in range(d):
                out[i, v] /= wsum
        return out

    @numba.njit(cache=True)
    def _logits(W, y, pos, z):  # pragma: no cover - compiled
        w, d = W.shape[0], W.shape[2]
        for v in range(d):
            z[v] = 0.0
        for lag in range(1, w + 1):
            row = y[pos - lag]
            for v in range(d):
                z[v] += W[lag - 1, row, v]

    @numba.njit(cache=True)
    def _logp(W, y, pos, z, tok):  # pragma: no cover - compiled
        _logits(W, y, pos, z)
        zmax = z.max()
        tot = 0.0
        for v in range(z.shape[0]):
            tot += math.exp(z[v] - zmax)
        return z[tok] - zmax - math.log(tot)

    @numba.njit(cache=True)
    def _draw(W, y, pos, z, u):  # pragma: no cover - compiled
        _logits(W, y, pos, z)
        d = z.shape[0]
        zmax = z.max()
        tot = 0.0
        for v in range(d):
            z[v] = math.exp(z[v] - zmax)
            tot += z[v]
        thr = u * tot
        acc = 0.0
        for v in range(d):
            acc += z[v]
            if acc >= thr:
                return v
        return d - 1


class MarkovChain:
    """A sampled instance of the chain of Eq. (1): the matrices ``A_k^* = m_k O_k``.

    Args:
        config: the :class:`ChainConfig`.
        seed: root seed; the ground truth uses the first child of ``SeedSequence(seed)``.

    Attributes:
        O: ``(h, d, d)`` Haar-orthogonal matrices.
        A: ``(h, d, d)`` feature matrices ``A_k^*``.
    """

    def __init__(self, config: ChainConfig, seed: int = 0) -> None:
        if not isinstance(config, ChainConfig):
            raise TypeError(f"`config` must be a ChainConfig; got {type(config).__name__}.")
        self.config = config
        self.seed = int(seed)
        self.streams = np.random.SeedSequence(self.seed).spawn(4)
        rng = np.random.default_rng(self.streams[0])
        self.O = np.stack([haar_orthogonal(config.d, rng) for _ in range(config.h)])
        self.A = self.O * np.asarray(config.scales)[:, None, None]
        self._W = {i: self._lag_weights(i) for i in range(1, config.h + 1)}

    def _lag_weights(self, upto: int) -> np.ndarray:
        """``W[l-1, j, :] = alpha_l * A_k^*[:, j]`` for lag ``l`` in ``I(k)``, ``k <= upto``."""
        cfg = self.config
        W = np.zeros((cfg.w, cfg.d, cfg.d))
        for k in range(upto):
            lags, _ = cfg.groups[k]
            for lag in lags:
                W[lag - 1] = self.A[k].T / len(lags)
        return W

    def logits(self, x: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Logits of the restricted truth ``f_{A*_{1:upto}}`` at every scored position (Eq. (3)).

        Args:
            x: ``(N, L)`` integer sequences.
            upto: number of groups kept (``None`` = all = the true conditional).

        Returns:
            ``(N, T, d)`` logits; entry ``[:, t]`` predicts ``x[:, w + t]``.
        """
        cfg = self.config
        upto = cfg.h if upto is None else int(upto)
        if not 1 <= upto <= cfg.h:
            raise ValueError(f"`upto` must be in 1..{cfg.h}; got {upto}.")
        x = np.asarray(x)
        if x.ndim != 2 or x.shape[1] != cfg.L:
            raise ValueError(f"`x` must have shape (N, {cfg.L}); got {x.shape=}.")
        W = self._W[upto]
        w, T = cfg.w, cfg.T
        z = np.zeros((x.shape[0], T, cfg.d))
        for lag in range(1, w + 1):
            if np.any(W[lag - 1]):
                z += W[lag - 1][x[:, w - lag : w - lag + T]]  # (N, T, d)
        return z

    def log_probs(self, x: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Log-probabilities ``(N, T, d)`` of :meth:`logits`."""
        z = self.logits(x, upto)
        z = z - z.max(-1, keepdims=True)
        return z - np.log(np.exp(z).sum(-1, keepdims=True))

    def sequence_nll(self, x: np.ndarray, batch: int = 4096) -> np.ndarray:
        """Per-sequence Bayes loss: the true model's mean next-token NLL over the ``T`` positions.

        The irreducible part of each sequence's training loss (a model's per-sequence loss minus
        this is its excess loss). Returns ``(N,)``.
        """
        x = np.asarray(x)
        w = self.config.w
        out = []
        for i in range(0, len(x), batch):
            xb = x[i : i + batch]
            lp = self.log_probs(xb)
            out.append(-np.take_along_axis(lp, xb[:, w:, None], -1)[..., 0].mean(1))
        return np.concatenate(out) if out else np.zeros(0)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw ``n`` sequences ``(n, L)`` (int64): uniform seed tokens, then Eq. (1)."""
        cfg = self.config
        if not (isinstance(n, (int, np.integer)) and n >= 1):
            raise ValueError(f"`n` must be a positive int; got {n!r}.")
        x = np.empty((n, cfg.L), dtype=np.int64)
        x[:, : cfg.w] = rng.integers(0, cfg.d, size=(n, cfg.w))
        u = rng.random((n, cfg.T))
        W = self._W[cfg.h]
        if _HAVE_NUMBA:
            return _sample_nb(x, W, u, cfg.w)
        for t in range(cfg.w, cfg.L):  # pragma: no cover - numpy fallback
            z = np.zeros((n, cfg.d))
            for lag in range(1, cfg.w + 1):
                z += W[lag - 1][x[:, t - lag]]
            p = np.exp(z - z.max(1, keepdims=True))
            c = np.cumsum(p, 1)
            x[:, t] = np.minimum((c < u[:, t - cfg.w, None] * c[:, -1:]).sum(1), cfg.d - 1)
        return x


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def _seen_lags(cfg: ChainConfig, upto: int) -> np.ndarray:
    if not 1 <= upto <= cfg.h:
        raise ValueError(f"`upto` must be in 1..{cfg.h}; got {upto!r}.")
    return np.array(sorted(lag for lags in cfg.lags[:upto] for lag in lags))


def _best_exact(chain: MarkovChain, x: np.ndarray, upto: int) -> np.ndarray:
    """Forward algorithm over the ``d^w`` windows (exact; small configs only)."""
    cfg = chain.config
    d, w, T = cfg.d, int(cfg.w), cfg.T
    S = d**w
    digits = (np.arange(S)[:, None] // d ** np.arange(w)[None, :]) % d  # (S, w): lag l -> col l-1
    W = chain._W[cfg.h]
    z = np.zeros((S, d))
    for lag in range(1, w + 1):
        z += W[lag - 1][digits[:, lag - 1]]
    logP = _log_softmax(z)  # (S, d) true conditional of every window
    P = np.exp(logP)
    seen = _seen_lags(cfg, upto)
    unseen_axes = tuple(w - lag for lag in range(1, w + 1) if lag not in seen)  # axis of lag l
    pi = np.full(S, 1.0 / S)  # seed tokens i.i.d. uniform (digest A4)
    out = np.empty((len(x), T, d))
    for t in range(T):
        joint = (pi[:, None] * P).reshape((d,) * w + (d,))  # axes: lag w, ..., lag 1, next
        table = joint.sum(unseen_axes) if unseen_axes else joint  # seen lags (desc.), next
        table = table / table.sum(-1, keepdims=True)
        idx = tuple(x[:, w + t - lag] for lag in sorted(seen, reverse=True))
        out[:, t] = np.log(np.clip(table[idx], 1e-300, None))
        pi = np.einsum("tr,trv->rv", pi.reshape(d, S // d), P.reshape(d, S // d, d)).ravel()
    return out


def _best_monte_carlo(chain: MarkovChain, x: np.ndarray, upto: int, n_particles: int,
                      rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """Likelihood weighting: sample each context's unseen tokens forward, clamp the seen ones.

    Positions older than the oldest seen lag do not depend on the context: their particles are
    drawn once per target position and shared by every context (exact, and ~L/|seen| x faster
    when the seen lags are the most recent ones, as in the hierarchical chains).
    """
    cfg = chain.config
    d, w, T = cfg.d, int(cfg.w), cfg.T
    W = chain._W[cfg.h]
    seen_lags = _seen_lags(cfg, upto)
    seen, oldest = set(seen_lags.tolist()), int(seen_lags.max())
    n, N = len(x), n_particles

    def logits(y, pos):
        zz = np.zeros(y.shape[:2] + (d,))
        for lag in range(1, w + 1):
            zz += W[lag - 1][y[:, :, pos - lag]]
        return _log_softmax(zz)

    out = np.empty((n, T, d))
    for t in range(T):
        L = w + t  # positions 0..L-1 precede the target at L
        y = np.empty((1, N, L), dtype=np.int64)  # shared until the oldest seen position
        logw = np.zeros((n, N))
        for pos in range(L):
            if pos == max(L - oldest, 0):
                y = np.repeat(y, n, axis=0)  # (n, N, L) from here on: context-specific
            clamp = (L - pos) in seen
            if clamp:
                if pos >= w:  # seed tokens are uniform: their evidence weight 1/d is constant
                    obs = np.broadcast_to(x[:, None, pos, None], (n, N, 1))
                    logw += np.take_along_axis(logits(y, pos), obs, -1)[..., 0]
                y[:, :, pos] = x[:, None, pos]
            elif pos < w:
                y[:, :, pos] = rng.integers(0, d, y.shape[:2])
            else:
                cdf = np.cumsum(np.exp(logits(y, pos)), -1)
                u = rng.random(y.shape[:2] + (1,))
                y[:, :, pos] = np.minimum((cdf < u * cdf[..., -1:]).sum(-1), d - 1)
        if y.shape[0] == 1:  # no seen position (cannot happen: every group has a lag)
            y = np.repeat(y, n, axis=0)
        wts = np.exp(logw - logw.max(1, keepdims=True))
        wts /= wts.sum(1, keepdims=True)
        p = (wts[..., None] * np.exp(logits(y, L))).sum(1)  # (n, d)
        out[:, t] = np.log(np.clip(p, 1e-300, None))
    return out


def best_restricted_log_probs(chain: MarkovChain, x: np.ndarray, upto: int, *,
                              method: str = "auto", n_particles: int = 256, seed: int = 0,
                              max_states: int = 2**18) -> np.ndarray:  # fmt: skip
    r"""Log-probabilities of the best predictor that sees only the lags of groups ``1..upto``.

    Eq. (3)'s restricted truth ``f_{A*_{1:i}}`` drops the other groups' logits; it is *not* what
    a model that uses only ``I(1) ∪ ... ∪ I(i)`` converges to under cross entropy. That model
    converges to the conditional expectation

    .. math::

        f^{best}_{1:i}(v \mid x_{I}) = \mathbb{E}ig[p^*(v \mid x_{t-1}, \dots, x_{t-w})
        \,ig|\, x_{t-\ell} = 	ext{observed},\ \ell \in I(1) \cup \dots \cup I(i)ig],

    which marginalises the unseen lags over their conditional law at position ``t`` (not a
    uniform one: tokens are correlated, except the i.i.d. uniform seed tokens). Hence
    ``KL(f_{A*_{1:i}} || model)`` has a floor ``KL(f_{A*_{1:i}} || f^{best}_{1:i}) > 0`` for a
    model that has learned groups ``1..i`` perfectly (issue 16). For ``upto = h`` both are the
    true conditional.

    Args:
        chain: the chain.
        x: ``(N, L)`` sequences (contexts are read at every scored position).
        upto: number of groups seen.
        method: ``"exact"`` (forward algorithm over all ``d^w`` windows; needs
            ``d**w <= max_states``), ``"monte-carlo"`` (likelihood weighting: per context,
            ``n_particles`` sequences drawn from the chain with the seen tokens clamped and
            weighted by their probability; consistent, error ~ ``n_particles**-0.5``) or
            ``"auto"`` (exact when small enough).
        n_particles: particles per context of the Monte Carlo method.
        seed: seed of the Monte Carlo draws.
        max_states: largest ``d**w`` for the exact method.

    Returns:
        ``(N, T, d)`` log-probabilities; entry ``[:, t]`` predicts ``x[:, w + t]``.
    """
    cfg = chain.config
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != cfg.L:
        raise ValueError(f"`x` must have shape (N, {cfg.L}); got {x.shape=}.")
    _seen_lags(cfg, upto)
    if method not in ("auto", "exact", "monte-carlo"):
        raise ValueError(f"`method`={method!r} unknown; use 'auto', 'exact' or 'monte-carlo'.")
    small = cfg.d ** int(cfg.w) <= max_states
    if method == "exact" and not small:
        raise ValueError(
            f"`method`='exact' needs d**w = {cfg.d}**{cfg.w} <= `max_states`={max_states}; use "
            "'monte-carlo' or raise `max_states`."
        )
    if upto == cfg.h:
        return chain.log_probs(x)
    if method == "exact" or (method == "auto" and small):
        return _best_exact(chain, x, upto)
    if not (isinstance(n_particles, (int, np.integer)) and n_particles >= 1):
        raise ValueError(f"`n_particles` must be a positive int; got {n_particles!r}.")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(4,)))
    if not _HAVE_NUMBA:  # pragma: no cover - depends on the environment
        return _best_monte_carlo(chain, x, upto, int(n_particles), rng)
    seen = np.zeros(int(cfg.w) + 1, dtype=np.bool_)
    seen[_seen_lags(cfg, upto)] = True
    W = chain._W[cfg.h]
    out = np.empty((len(x), cfg.T, cfg.d))
    for t in range(cfg.T):
        p = _lw_nb(np.ascontiguousarray(x, dtype=np.int64), W, int(cfg.w) + t, seen,
                   int(n_particles), int(rng.integers(2**31 - 1)))  # fmt: skip
        out[:, t] = np.log(np.clip(p, 1e-300, None))
    return out


def kl_divergence(logp_ref: np.ndarray, logp_model: np.ndarray) -> np.ndarray:
    """``KL(ref || model)`` over the last axis (digest A10)."""
    return (np.exp(logp_ref) * (logp_ref - logp_model)).sum(-1)


@dataclasses.dataclass(frozen=True)
class MarkovData:
    """A finite train/test split drawn from one :class:`MarkovChain` (Table 1: 9000 / 3000).

    Attributes:
        chain: the generating chain.
        train: ``(n_train, L)`` sequences (empty ``(0, L)`` for online runs).
        test: ``(n_test, L)`` sequences.
    """

    chain: MarkovChain
    train: np.ndarray
    test: np.ndarray

    def entropy(self) -> float:
        """Mean entropy (nats) of the true conditional over the test positions."""
        lp = self.chain.log_probs(self.test)
        return float(-(np.exp(lp) * lp).sum(-1).mean())


def make_dataset(chain: MarkovChain, n_train: int = 9000, n_test: int = 3000) -> MarkovData:
    """Sample the finite datasets of Table 1 from the chain's train/test random streams."""
    for name, v, lo in (("n_train", n_train, 0), ("n_test", n_test, 1)):
        if not (isinstance(v, (int, np.integer)) and v >= lo):
            raise ValueError(f"`{name}` must be an int >= {lo}; got {v!r}.")
    L = chain.config.L
    train = (
        chain.sample(n_train, np.random.default_rng(chain.streams[1]))
        if n_train > 0
        else np.zeros((0, L), dtype=np.int64)
    )
    test = chain.sample(n_test, np.random.default_rng(chain.streams[2]))
    return MarkovData(chain, train, test)


class BatchSampler:
    """Shuffled mini-batches of a finite dataset, reshuffled each epoch (without replacement).

    Args:
        n: dataset size.
        batch_size: sequences per batch; must not exceed ``n``.
        rng: the numpy generator.
        index: optional epoch index list with repeats (e.g. from upsampling with
            :func:`sims.selection.upsample_indices`); default ``arange(n)``.
    """

    def __init__(self, n: int, batch_size: int, rng: np.random.Generator,
                 index: np.ndarray | None = None) -> None:  # fmt: skip
        self.index = np.arange(n) if index is None else np.asarray(index, dtype=np.int64)
        if batch_size > len(self.index):
            raise ValueError(
                f"`batch_size`={batch_size} is larger than the dataset ({len(self.index)} "
                "sequences) and batches are drawn without replacement; lower `batch_size`, raise "
                "`n_train`, or use `online=True`."
            )
        self.batch_size = batch_size
        self.rng = rng
        self._perm = np.empty(0, dtype=np.int64)
        self._pos = 0

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        if self._pos + self.batch_size > len(self._perm):
            self._perm = self.index[self.rng.permutation(len(self.index))]
            self._pos = 0
        out = self._perm[self._pos : self._pos + self.batch_size]
        self._pos += self.batch_size
        return out


class OnlineStream:
    """Fresh sequences at every step ("infinite data", App. C.3)."""

    def __init__(self, chain: MarkovChain, batch_size: int, rng: np.random.Generator) -> None:
        if not (isinstance(batch_size, (int, np.integer)) and batch_size >= 1):
            raise ValueError(f"`batch_size` must be a positive int; got {batch_size!r}.")
        self.chain, self.batch_size, self.rng = chain, int(batch_size), rng

    def __iter__(self) -> Iterator[np.ndarray]:
        return self

    def __next__(self) -> np.ndarray:
        return self.chain.sample(self.batch_size, self.rng)
