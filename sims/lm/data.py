"""Offline corpora for the from-scratch LM runs, and a deterministic batch order per seed.

Three kinds (:class:`CorpusConfig` ``kind``), all generated or read locally, never downloaded:

* ``"hmm"`` (default): a hidden Markov model with ``n_states`` sticky states, each emitting from
  a Zipf distribution over its own random permutation of the vocabulary. The Bayes-optimal
  next-token loss given the whole past is computed exactly on the validation set by the forward
  algorithm (:attr:`Corpus.bayes_loss`), so runs report an excess loss.
* ``"zipf"``: a first-order Markov chain whose successor distributions are Zipf over a random
  permutation per token; its entropy rate (the Bayes loss) is exact.
* ``"text"``: any local text file, tokenized by bytes (``V = 256``) or characters (``V`` = the
  distinct characters); the first 90% of the file trains, the rest validates.

A corpus is a pair of integer arrays ``train`` ``(n_train, T + 1)`` and ``val`` ``(n_val, T + 1)``
of sequences (input ``[:-1]``, target ``[1:]``). :func:`batch_indices` gives the training
sequences of step ``s`` for a seed: a fresh permutation per epoch, a pure function of
``(seed, step)``, so the data order is the same for every optimizer with that seed and a resumed
run sees exactly the batches it would have seen.

Examples:
    >>> c = make_corpus(CorpusConfig(vocab_size=16, seq_len=8, n_train=32, n_val=8))
    >>> c.train.shape, c.val.shape, c.vocab_size
    ((32, 9), (8, 9), 16)
    >>> bool((batch_indices(32, 4, seed=0, step=3) == batch_indices(32, 4, seed=0, step=3)).all())
    True
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

__all__ = [
    "CorpusConfig",
    "Corpus",
    "make_corpus",
    "batch_indices",
    "zipf_weights",
    "hmm_parameters",
    "hmm_predictive_nll",
]

_KINDS = ("hmm", "zipf", "text")


@dataclasses.dataclass(frozen=True)
class CorpusConfig:
    """Which corpus, and how big.

    Attributes:
        kind: ``"hmm"``, ``"zipf"`` or ``"text"``.
        vocab_size: ``V`` for the synthetic kinds (text: set by the tokenizer).
        seq_len: sequence length ``T`` (each stored sequence has ``T + 1`` tokens).
        n_train: training sequences (synthetic kinds; text: as many as the file gives).
        n_val: validation sequences (synthetic kinds).
        zipf_exponent: ``s`` of the Zipf weights ``k^(-s)`` (1.1: a heavy, language-like tail).
        n_states: HMM hidden states.
        stickiness: HMM probability of staying in the current state.
        seed: seed of the corpus itself (its parameters and samples), separate from run seeds.
        path: the text file (``kind="text"``).
        tokenizer: ``"byte"`` or ``"char"`` (``kind="text"``).
    """

    kind: str = "hmm"
    vocab_size: int = 256
    seq_len: int = 64
    n_train: int = 8192
    n_val: int = 256
    zipf_exponent: float = 1.1
    n_states: int = 16
    stickiness: float = 0.9
    seed: int = 0
    path: str | None = None
    tokenizer: str = "byte"

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"unknown corpus `kind` {self.kind!r}; choose one of {_KINDS}.")
        for name in ("vocab_size", "seq_len", "n_train", "n_val", "n_states"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if self.vocab_size < 2:
            raise ValueError(f"`vocab_size` must be >= 2; got {self.vocab_size}.")
        if not self.zipf_exponent > 0:
            raise ValueError(f"`zipf_exponent` must be > 0; got {self.zipf_exponent!r}.")
        if not 0 <= self.stickiness < 1:
            raise ValueError(f"`stickiness` must be in [0, 1); got {self.stickiness!r}.")
        if self.kind == "text":
            if self.path is None:
                raise ValueError("corpus kind 'text' needs `path` (a local text file).")
            if self.tokenizer not in ("byte", "char"):
                raise ValueError(f"`tokenizer` must be 'byte' or 'char'; got {self.tokenizer!r}.")


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Token sequences and what is known about them.

    Attributes:
        config: the :class:`CorpusConfig`.
        train: ``(n_train, T + 1)`` int64 token ids.
        val: ``(n_val, T + 1)`` int64 token ids.
        vocab_size: ``V``.
        bayes_loss: mean next-token NLL of the Bayes-optimal predictor on ``val`` (nats; ``nan``
            for text), the floor of any model's validation loss.
        chars: the character vocabulary (``tokenizer="char"``), else None.
    """

    config: CorpusConfig
    train: np.ndarray
    val: np.ndarray
    vocab_size: int
    bayes_loss: float = float("nan")
    chars: str | None = None


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Normalized ``k^(-s)``, ``k = 1..n``."""
    w = np.arange(1, n + 1, dtype=np.float64) ** (-s)
    return w / w.sum()


def _sample_rows(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` (inverse CDF, vectorized)."""
    cdf = probs.cumsum(-1)
    u = rng.random(len(probs))[:, None] * cdf[:, -1:]
    return np.minimum((u > cdf).sum(-1), probs.shape[-1] - 1)


def hmm_parameters(cfg: CorpusConfig) -> tuple[np.ndarray, np.ndarray]:
    """The ``"hmm"`` corpus's transition matrix ``A (K, K)`` and emissions ``B (K, V)``.

    ``A = s I + (1 − s) D`` (``s`` = stickiness, ``D`` rows Dirichlet(1)), row-stochastic
    (``A[i, j] = p(state_{t+1} = j | state_t = i)``); ``B[k]`` is the Zipf law over state ``k``'s
    own permutation of the vocabulary. Deterministic in ``cfg.seed``; the initial state is
    uniform.
    """
    return _hmm_parameters(np.random.default_rng([cfg.seed, 1]), cfg)


def _hmm_parameters(rng: np.random.Generator, cfg: CorpusConfig):
    K, V = cfg.n_states, cfg.vocab_size
    off = rng.dirichlet(np.ones(K), size=K)
    A = cfg.stickiness * np.eye(K) + (1 - cfg.stickiness) * off  # (K, K) row-stochastic
    z = zipf_weights(V, cfg.zipf_exponent)
    B = np.stack([z[np.argsort(rng.permutation(V))] for _ in range(K)])  # (K, V)
    return A, B


def hmm_predictive_nll(seqs, A, B, init=None) -> float:
    """Mean next-token NLL of the Bayes-optimal predictor given the whole past (forward algorithm).

    ``−(1/(n T)) Σ log p(x_t | x_{<t})`` over the targets ``t = 1..T`` of ``seqs (n, T + 1)``
    under the HMM ``(A, B)`` (``A`` row-stochastic, ``A[i, j] = p(j | i)``) started from
    ``init`` (default uniform).
    """
    seqs = np.asarray(seqs)
    K = A.shape[0]
    alpha = np.full((len(seqs), K), 1.0 / K) if init is None else np.tile(init, (len(seqs), 1))
    alpha = alpha * B[:, seqs[:, 0]].T
    alpha /= alpha.sum(-1, keepdims=True)
    nll = 0.0
    for t in range(1, seqs.shape[1]):
        prior = alpha @ A  # p(state_t | x_<t)
        pred = prior * B[:, seqs[:, t]].T  # (n, K)
        p_tok = pred.sum(-1)
        nll -= np.log(p_tok).sum()
        alpha = pred / p_tok[:, None]
    return float(nll / (len(seqs) * (seqs.shape[1] - 1)))


def _hmm(cfg: CorpusConfig) -> Corpus:
    rng = np.random.default_rng([cfg.seed, 1])
    A, B = _hmm_parameters(rng, cfg)  # the same stream then samples the sequences
    K, T1 = cfg.n_states, cfg.seq_len + 1
    n = cfg.n_train + cfg.n_val
    states = rng.integers(0, K, n)  # uniform initial state
    seqs = np.empty((n, T1), dtype=np.int64)
    for t in range(T1):
        seqs[:, t] = _sample_rows(rng, B[states])
        states = _sample_rows(rng, A[states])
    val = seqs[cfg.n_train :]
    bayes = hmm_predictive_nll(val, A, B)  # exact, on the validation targets (positions 1..T)
    return Corpus(cfg, seqs[: cfg.n_train], val, cfg.vocab_size, bayes)


def _zipf_chain(cfg: CorpusConfig) -> Corpus:
    rng = np.random.default_rng([cfg.seed, 2])
    V, T1 = cfg.vocab_size, cfg.seq_len + 1
    z = zipf_weights(V, cfg.zipf_exponent)
    P = np.stack([z[np.argsort(rng.permutation(V))] for _ in range(V)])  # (V, V) successors
    n = cfg.n_train + cfg.n_val
    seqs = np.empty((n, T1), dtype=np.int64)
    seqs[:, 0] = rng.integers(0, V, n)
    for t in range(1, T1):
        seqs[:, t] = _sample_rows(rng, P[seqs[:, t - 1]])
    val = seqs[cfg.n_train :]
    logp = np.log(P)
    bayes = float(-logp[val[:, :-1], val[:, 1:]].mean())
    return Corpus(cfg, seqs[: cfg.n_train], val, V, bayes)


def _text(cfg: CorpusConfig) -> Corpus:
    path = Path(cfg.path).expanduser()
    if not path.is_file():
        raise ValueError(f"corpus `path` {str(path)!r} is not a readable file.")
    raw = path.read_bytes()
    chars = None
    if cfg.tokenizer == "byte":
        ids = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
        V = 256
    else:
        text = raw.decode("utf-8", errors="replace")
        chars = "".join(sorted(set(text)))
        lookup = {c: i for i, c in enumerate(chars)}
        ids = np.fromiter((lookup[c] for c in text), dtype=np.int64, count=len(text))
        V = max(len(chars), 2)
    T1 = cfg.seq_len + 1
    split = int(0.9 * len(ids))
    tr, va = ids[:split], ids[split:]
    if len(tr) < 2 * T1 or len(va) < T1:
        raise ValueError(
            f"text file {str(path)!r} has {len(ids)} tokens: too short for `seq_len`="
            f"{cfg.seq_len} (needs >= {3 * T1 / 0.9:.0f}); use a longer file or a shorter seq_len."
        )
    train = tr[: len(tr) // T1 * T1].reshape(-1, T1)
    val = va[: len(va) // T1 * T1].reshape(-1, T1)
    return Corpus(cfg, train, val, V, float("nan"), chars)


def make_corpus(cfg: CorpusConfig) -> Corpus:
    """Build (synthetic) or read (text) the corpus of ``cfg`` (deterministic in ``cfg.seed``)."""
    if not isinstance(cfg, CorpusConfig):
        raise TypeError(f"`cfg` must be a CorpusConfig; got {type(cfg).__name__}.")
    return {"hmm": _hmm, "zipf": _zipf_chain, "text": _text}[cfg.kind](cfg)


def batch_indices(n_train: int, batch_size: int, *, seed: int, step: int) -> np.ndarray:
    """The training sequences of ``step`` (0-based) for ``seed``.

    Epoch ``e = step // (n_train // batch_size)`` uses the permutation drawn from
    ``default_rng([seed, e])``; each step takes the next ``batch_size`` slice of it.

    Raises:
        ValueError: if ``batch_size`` exceeds ``n_train``.
    """
    if not 1 <= batch_size <= n_train:
        raise ValueError(
            f"`batch_size`={batch_size} must be between 1 and the number of training sequences "
            f"({n_train}); lower it or enlarge the corpus (`n_train`)."
        )
    per_epoch = n_train // batch_size
    epoch, k = divmod(step, per_epoch)
    perm = np.random.default_rng([seed, epoch]).permutation(n_train)
    return perm[k * batch_size : (k + 1) * batch_size]
