"""Figure 1 experiment: ATTN_S under GD, GD + upsampling and SAM, paired runs (Sections 3–5).

Each run ``r`` draws its own covariance rotation, training set and initialization; the methods
share them (paired design). Pipeline per batch of runs (:func:`prepare_runs`, :func:`select`,
:func:`run_figure1`):

1. data: ``P`` sequences per run (``"wishart"`` sufficient sampling by default) -> moments;
2. the upsampling proxy: GD from the same initialization on the same data for ``proxy_steps``
   steps (so it is exactly the first ``proxy_steps`` steps of the GD run), whose parameters at
   ``n_checkpoints`` evenly spaced steps give per-example loss trajectories;
3. k-means on the trajectories -> hard cluster -> usage counts -> weighted moments;
4. every method from the same initialization: ``gd`` (eq. 2), ``gd_upsample`` (GD on the
   weighted moments), ``sam`` (eq. 6) and, beyond the paper, ``sam_flow`` (the first-order SAM
   of eq. 8, Euler steps), ``sam_headwise`` (SAM normalized per head, the paper's C.2
   reduction; :mod:`sims.linear_attention.sam_variants`) and ``gd_lr_matched`` (GD with the
   learning rate multiplied by the upsampling's mean signal boost: the control that separates
   "upsampling helps" from "a bigger step helps").

Two horizons: the paper's (``paper_steps`` = 10,001) and a long one (``num_steps``, default
200,001, where every run of every method has learned every feature). Learning times (a
feature's eigen-component reaches ``fraction`` × its fixed-point value) and drop times (the
**test** loss crosses the midpoint between consecutive saddle levels) are first passages tracked
inside the scan at full step resolution; curves are stored every ``log_every`` steps. Test loss =
population loss (an infinite held-out set) unless ``n_test > 0``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from .data import make_covariance, sample_dataset
from .measure import entropies, feature_counts, phase_durations
from .models import AttnSParams, init_params, merged_matrix, output_scale
from .stats import (
    Moments,
    ansatz_coefficients,
    eigh_desc,
    empirical_moments,
    fixed_point_components,
    population_moments,
    saddle_losses,
)
from .train import compile_runs, train_runs
from .upsampling import (
    FEATURES,
    SELECTIONS,
    checkpoint_losses,
    condition_scores,
    select_batched,
    selection_report,
)

__all__ = [
    "Figure1Config",
    "METHOD_NAMES",
    "PAPER_METHODS",
    "Prepared",
    "prepare_runs",
    "select",
    "run_figure1",
    "summarize",
    "ordering_window",
    "format_summary",
]

#: The paper's three methods (Figure 1 panels).
PAPER_METHODS = ("gd", "gd_upsample", "sam")
#: Every method :func:`run_figure1` can run: name -> (optimizer, moments, uses rho).
METHODS = {
    "gd": ("gd", "train", False),
    "gd_upsample": ("gd", "upsampled", False),
    "sam": ("sam", "train", True),
    "sam_flow": ("sam_flow", "train", True),
    "sam_headwise": ("sam_headwise", "train", True),
    "gd_lr_matched": ("gd", "train", False),
}
METHOD_NAMES = tuple(METHODS)


@dataclasses.dataclass(frozen=True)
class Figure1Config:
    """Configuration of the Figure 1 experiment (defaults: the anchor's paper setting).

    Attributes:
        d: input dimension ``D`` (anchor: 4).
        n_context: context length ``N`` (anchor: seq_len 32 -> N = 31).
        n_heads: ``H`` (anchor attnS figure: 5).
        rank: key/query rank ``r`` (1, Lemma 3.1).
        n_examples: training sequences ``P`` (anchor: 80,000).
        num_steps: full-batch steps of the long horizon (every run learns every feature).
        paper_steps: the paper's horizon (anchor: 10,001 steps); summaries are given at both.
        n_runs: independent runs per method (paper: 25).
        learning_rate: ``η`` (anchor attnS: 0.02).
        init_scale: anchor ``--init`` (0.01); std ``init/√numel`` of the whole ``nn.Linear``,
            as ``linattn-icl`` (value: ``init/√(H(d+1)²)``; see :func:`models.init_params`).
        rho: SAM radius (Theorem 4.4's condition is ``ρ < (√3/2) ε``).
        scale: ``"anchor"`` (no 1/N, as linattn-icl; matches its lr/init) or ``"paper"`` (1/N).
        covariance: covariance family (``"linear"``: eigenvalues ∝ 1..d, trace 1).
        data_method: ``"wishart"`` (fast, exact in law) or ``"tokens"``.
        anchor_preprocessing: centre x / whiten w like linattn-icl (needs ``"tokens"``).
        proxy_steps: proxy budget (default ``paper_steps // 3``: the LLM proxy sees 1/3 epoch).
        n_checkpoints: proxy checkpoints ``K`` (paper: 5).
        upsample_factor: extra copies of a selected example (paper: 1).
        cluster_features: ``"trajectory"`` (paper), ``"last"``, ``"relative"`` or the
            scale-free ``"log_ratio"`` (:mod:`sims.linear_attention.upsampling`).
        selection: ``"hard"`` (the method), ``"random"``, ``"easy"`` or ``"condition"``.
        kmeans_n_init: k-means++ restarts (1 = sklearn's ``n_init="auto"`` for k-means++).
        fraction: learning-time threshold ``c`` (fraction of the fixed-point component).
        n_test: held-out test sequences (0 = population loss).
        log_every: stride of the stored curves (must divide ``paper_steps - 1``).
        seed: root seed.
        methods: methods to run (see :data:`METHOD_NAMES`); GD always runs (it is the
            reference of the paired statistics).
    """

    d: int = 4
    n_context: int = 31
    n_heads: int = 5
    rank: int = 1
    n_examples: int = 80_000
    num_steps: int = 200_001
    paper_steps: int = 10_001
    n_runs: int = 25
    learning_rate: float = 0.02
    init_scale: float = 0.01
    rho: float = 1e-3
    scale: Literal["anchor", "paper"] = "anchor"
    covariance: Literal["linear", "white", "geometric"] = "linear"
    data_method: Literal["wishart", "tokens"] = "wishart"
    anchor_preprocessing: bool = False
    proxy_steps: int | None = None
    n_checkpoints: int = 5
    upsample_factor: int = 1
    cluster_features: Literal["trajectory", "last", "relative", "log_ratio"] = "trajectory"
    selection: Literal["hard", "random", "easy", "condition"] = "hard"
    kmeans_n_init: int = 1
    fraction: float = 0.5
    n_test: int = 0
    log_every: int = 50
    seed: int = 0
    methods: tuple[str, ...] = PAPER_METHODS

    def __post_init__(self):
        ints = ("d", "n_context", "n_heads", "rank", "num_steps", "paper_steps", "n_runs",
                "n_checkpoints", "log_every")  # fmt: skip
        for name in ints:
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
                raise ValueError(f"`{name}` must be an int >= 1; got {val!r}.")
        if self.n_examples < 2:
            raise ValueError(f"`n_examples` (P) must be >= 2; got {self.n_examples}.")
        if not np.isfinite(self.learning_rate) or self.learning_rate <= 0:
            raise ValueError(f"`learning_rate` must be positive; got {self.learning_rate!r}.")
        if not np.isfinite(self.rho) or self.rho < 0:
            raise ValueError(
                f"`rho` must be finite and >= 0; got {self.rho!r}. rho=0 makes SAM equal GD."
            )
        if not np.isfinite(self.init_scale) or self.init_scale < 0:
            raise ValueError(f"`init_scale` must be >= 0; got {self.init_scale!r}.")
        if self.upsample_factor < 0:
            raise ValueError(f"`upsample_factor` must be >= 0; got {self.upsample_factor!r}.")
        if self.paper_steps > self.num_steps:
            raise ValueError(
                f"`paper_steps` ({self.paper_steps}) must not exceed `num_steps` "
                f"({self.num_steps})."
            )
        if (self.paper_steps - 1) % self.log_every or (self.num_steps - 1) % self.log_every:
            raise ValueError(
                f"`log_every` ({self.log_every}) must divide `paper_steps` - 1 "
                f"({self.paper_steps - 1}) and `num_steps` - 1 ({self.num_steps - 1}), so the "
                "last step of each horizon is stored."
            )
        if self.proxy_steps is not None and not 1 <= self.proxy_steps <= self.num_steps:
            raise ValueError(
                f"`proxy_steps` must be in [1, num_steps={self.num_steps}]; got {self.proxy_steps}."
            )
        if self.n_checkpoints > self.proxy_budget:
            raise ValueError(
                f"`n_checkpoints` ({self.n_checkpoints}) must not exceed the proxy budget "
                f"({self.proxy_budget} steps)."
            )
        if not 0 < self.fraction <= 1:
            raise ValueError(f"`fraction` must be in (0, 1]; got {self.fraction!r}.")
        if self.cluster_features not in FEATURES:
            raise ValueError(
                f"`cluster_features` must be one of {FEATURES}; got {self.cluster_features!r}."
            )
        if self.selection not in SELECTIONS:
            raise ValueError(f"`selection` must be one of {SELECTIONS}; got {self.selection!r}.")
        bad = [m for m in self.methods if m not in METHODS]
        if bad or not self.methods:
            raise ValueError(
                f"`methods` must be a non-empty subset of {METHOD_NAMES}; got {self.methods!r}."
            )

    @property
    def proxy_budget(self) -> int:
        """Proxy steps actually used."""
        return self.proxy_steps if self.proxy_steps is not None else max(1, self.paper_steps // 3)

    @property
    def run_methods(self) -> tuple[str, ...]:
        """Methods in :data:`METHOD_NAMES` order, GD first (always run)."""
        return tuple(m for m in METHOD_NAMES if m == "gd" or m in self.methods)

    def checkpoint_steps(self) -> np.ndarray:
        """Evenly spaced proxy checkpoints in ``(0, proxy_budget]``."""
        k = np.arange(1, self.n_checkpoints + 1)
        return np.unique(np.round(k * self.proxy_budget / self.n_checkpoints).astype(int))


def _stack(items):
    return type(items[0])(*(np.stack(x) for x in zip(*items, strict=False)))


@dataclasses.dataclass
class Prepared:
    """Per-run data, moments, initializations and reference levels of a batch of runs."""

    config: Figure1Config
    scale: float
    covs: list
    datas: list
    features: list
    moments: object
    test_moments: object
    params0: object
    eigvecs: np.ndarray
    lam: np.ndarray
    fixed_point: np.ndarray
    levels: np.ndarray


def _sample_run(cfg: Figure1Config, r: int, scale: float) -> tuple:
    """Run ``r``'s covariance, eigenvectors, data, features, moments and test moments."""
    rs = cfg.seed * 100_003 + r
    cov = make_covariance(cfg.covariance, cfg.d, seed=rs)
    data = sample_dataset(
        cfg.n_examples, cfg.n_context, cov, seed=rs, method=cfg.data_method,
        anchor_preprocessing=cfg.anchor_preprocessing,
    )  # fmt: skip
    z = data.features()
    if cfg.n_test > 0:
        test = sample_dataset(max(cfg.n_test, 2), cfg.n_context, cov, seed=rs + 7_919_113)
        test_mom = empirical_moments(test, scale=scale)
    else:
        test_mom = population_moments(cov, cfg.n_context, scale=scale)
    moments = empirical_moments(data, scale=scale, features=z)
    return cov, eigh_desc(cov)[1], data, z, moments, test_mom


def _init_runs(cfg: Figure1Config):
    """Every run's initialization, stacked over runs (run ``r`` from the ``r``-th split key)."""
    keys = np.asarray(jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.n_runs))  # host rows
    return _stack([
        init_params(keys[r], cfg.d, cfg.n_heads, rank=cfg.rank, init_scale=cfg.init_scale)
        for r in range(cfg.n_runs)
    ])  # fmt: skip


def prepare_runs(cfg: Figure1Config, *, progress=None, pool=None) -> Prepared:
    """Sample every run's covariance, training set, test moments and initialization.

    Args:
        cfg: the configuration.
        progress: a tqdm bar advanced once per run.
        pool: a ``concurrent.futures`` executor to sample the runs in (numpy releases the GIL
            while it fills arrays); ``None`` samples them here, one after the other.
    """
    from threadpoolctl import threadpool_limits

    s = output_scale(cfg.scale, cfg.n_context)
    with threadpool_limits(1):  # skinny numpy matmuls are slower with BLAS threads
        params = pool.submit(_init_runs, cfg) if pool else None
        runs = [pool.submit(_sample_run, cfg, r, s) for r in range(cfg.n_runs)] if pool else None
        out: list = [None] * cfg.n_runs
        for r in reversed(range(cfg.n_runs)):  # the pool samples from the front, this thread
            if runs is None or runs[r].cancel():  # from the back what the pool has not started
                out[r] = _sample_run(cfg, r, s)
                if progress is not None:
                    progress.update(1)
        for r in range(cfg.n_runs):
            if out[r] is None:
                out[r] = runs[r].result()
                if progress is not None:
                    progress.update(1)
    covs, eigs, datas, zs, moms, test_moms = (list(x) for x in zip(*out, strict=True))
    return Prepared(
        cfg, s, covs, datas, zs, _stack(moms), _stack(test_moms),
        params.result() if pool else _init_runs(cfg), np.stack(eigs),
        eigh_desc(covs[0])[0], fixed_point_components(covs[0], cfg.n_context, scale=s),
        saddle_losses(covs[0], cfg.n_context),
    )  # fmt: skip


def _proxy_losses(prep: Prepared, gd=None, *, pool=None) -> np.ndarray:
    """``(R, P, K)`` per-example losses of the GD proxy at its checkpoints.

    The proxy is GD from the same initialization on the same data, i.e. the first
    ``proxy_budget`` steps of the GD run: its checkpoints are read off ``gd`` (a
    :class:`~sims.linear_attention.train.TrainResult` run with ``checkpoint_steps``), or, without
    it, off a GD run of ``proxy_budget`` steps.
    """
    from threadpoolctl import threadpool_limits

    cfg = prep.config
    ckpts = cfg.checkpoint_steps()
    if gd is None or "checkpoint_v" not in gd.ds:
        gd = train_runs(
            prep.params0, prep.moments, int(ckpts[-1]), optimizer="gd",
            learning_rate=cfg.learning_rate, record_every=int(ckpts[-1]),
            log_every=int(ckpts[-1]), raise_on_failure=False, checkpoint_steps=ckpts,
        )  # fmt: skip
    have = gd.ds.checkpoint_step.values
    if not np.all(np.isin(ckpts, have)):
        raise ValueError(
            f"`gd` holds checkpoints {have.tolist()}; the proxy needs {ckpts.tolist()}."
        )
    ds = gd.ds.isel(checkpoint=np.searchsorted(have, ckpts))
    pk = AttnSParams(*(jnp.asarray(ds[f"checkpoint_{n}"].values) for n in ("v", "k", "q")))
    mats = np.asarray(merged_matrix(pk))  # (R, K, d, d)

    def one(r):
        return checkpoint_losses(mats[r], prep.datas[r], scale=prep.scale,
                                 features=prep.features[r])  # fmt: skip

    with threadpool_limits(1):
        return np.stack(list(pool.map(one, range(cfg.n_runs)) if pool else
                             map(one, range(cfg.n_runs))))  # fmt: skip


def select(prep: Prepared, cfg: Figure1Config | None = None, *, losses=None, pool=None) -> dict:
    """Upsampling selection of every run: weights, weighted moments and the selection report.

    Args:
        prep: the prepared runs.
        cfg: selection settings (``selection``, ``cluster_features``, ``upsample_factor``,
            ``kmeans_n_init``; default ``prep.config``).
        losses: precomputed proxy losses ``(R, P, K)`` (reused across selections).
        pool: a ``concurrent.futures`` executor to select the runs in (numpy releases the GIL
            in the k-means' products); ``None`` selects them here, one after the other.

    Returns:
        dict with ``weights`` (list of ``(P,)``), ``moments`` (stacked weighted moments),
        ``losses``, ``results`` (:class:`UpsampleResult` per run) and ``report`` (a dict of
        ``(R, ...)`` arrays from :func:`selection_report`, plus ``sigma_ratio (R, d)``: the
        boost of each feature's ansatz signal ``σ_i`` computed from the weighted moments).
    """
    from threadpoolctl import threadpool_limits

    cfg = prep.config if cfg is None else cfg
    losses = _proxy_losses(prep) if losses is None else losses
    scores = None
    if cfg.selection == "condition":
        scores = np.stack([condition_scores(d) for d in prep.datas])
    seeds = cfg.seed * 1000 + np.arange(cfg.n_runs)

    def one(r):
        up = select_batched(
            losses[r : r + 1], seeds[r : r + 1], selection=cfg.selection,
            factor=cfg.upsample_factor, features=cfg.cluster_features, n_init=cfg.kmeans_n_init,
            scores=None if scores is None else scores[r : r + 1],
        )[0]  # fmt: skip
        rep = selection_report(prep.datas[r], up.selected, factor=cfg.upsample_factor)
        m_w = empirical_moments(prep.datas[r], up.weights, scale=prep.scale,
                                features=prep.features[r])  # fmt: skip
        base = type(m_w)(*(np.asarray(x)[r] for x in prep.moments))
        ratio = (ansatz_coefficients(m_w, prep.eigvecs[r])[0]
                 / ansatz_coefficients(base, prep.eigvecs[r])[0])  # fmt: skip
        return up, rep, m_w, ratio

    with threadpool_limits(1):
        runs = list(pool.map(one, range(cfg.n_runs)) if pool else map(one, range(cfg.n_runs)))
    ups, reports, moms, ratios = (list(x) for x in zip(*runs, strict=True))
    report = {k: np.array([rep[k] for rep in reports]) for k in reports[0]}
    report["hard_fraction"] = np.array([u.cluster.hard_fraction for u in ups])
    report["sigma_ratio"] = np.array(ratios)
    return {"weights": [u.weights for u in ups], "moments": _stack(moms), "losses": losses,
            "results": ups, "report": report}  # fmt: skip


def _program(name: str, share_sam: bool) -> str:
    """The compiled program (optimizer) that runs method ``name``.

    With ``share_sam`` (SAM runs anyway) the GD methods run SAM's program at ``ρ = 0``: its
    perturbation is ``0·g``, so the trajectory is GD's bit for bit (tested), and one compilation
    (~1 s) serves all three paper methods, at twice the gradient cost per GD step.
    """
    optimizer = METHODS[name][0]
    return "sam" if optimizer == "gd" and share_sam else optimizer


def _method_kwargs(prep: Prepared, name: str, moments, lr_factor=1.0, *,
                   share_sam: bool = False) -> dict:  # fmt: skip
    """:func:`train_runs` arguments of method ``name`` (also what :func:`_compile` compiles)."""
    cfg = prep.config
    _, _, uses_rho = METHODS[name]
    mids = 0.5 * (prep.levels[:-1] + prep.levels[1:])
    return dict(
        params0=prep.params0, moments=moments, num_steps=cfg.num_steps,
        optimizer=_program(name, share_sam),
        learning_rate=cfg.learning_rate * np.asarray(lr_factor),
        rho=cfg.rho if uses_rho else 0.0, test_moments=prep.test_moments,
        eigvecs=prep.eigvecs, record_every=_record_every(cfg.num_steps, cfg.log_every),
        log_every=cfg.log_every, component_targets=cfg.fraction * prep.fixed_point,
        loss_levels=mids, checkpoint_steps=cfg.checkpoint_steps(),
    )  # fmt: skip


def _train_method(prep: Prepared, name: str, moments, *, lr_factor: float | np.ndarray = 1.0,
                  share_sam: bool = False):  # fmt: skip
    """Train every run with method ``name`` (GD runs also keep the proxy's checkpoints)."""
    kwargs = _method_kwargs(prep, name, moments, lr_factor, share_sam=share_sam)
    return train_runs(**kwargs, raise_on_failure=False)


def _compile(cfg: Figure1Config, name: str, share_sam: bool = False) -> float:
    """Compile method ``name``'s program for ``cfg``'s shapes (zeros stand in for the data)."""
    t0 = time.perf_counter()
    r, d, dd = cfg.n_runs, cfg.d, cfg.d * cfg.d
    moments = Moments(np.zeros(r), np.zeros((r, dd)), np.zeros((r, dd, dd)))
    zeros = np.zeros((r, cfg.n_heads, cfg.rank, d))  # numpy: no eager JAX op to compile
    stub = Prepared(
        cfg, 1.0, [], [], [], moments, moments, AttnSParams(np.zeros((r, cfg.n_heads)), zeros,
                                                            zeros),
        np.zeros((r, d, d)), np.zeros(d), np.zeros(d), np.zeros(d + 1),
    )  # fmt: skip
    compile_runs(**_method_kwargs(stub, name, moments, share_sam=share_sam))
    return time.perf_counter() - t0


def _record_every(num_steps: int, log_every: int, n_snapshots: int = 20) -> int:
    """A snapshot stride (multiple of ``log_every``) giving about ``n_snapshots`` snapshots.

    The scan runs whole snapshot blocks, so the stride also bounds the wasted steps past
    ``num_steps`` (at most one stride).
    """
    n_log = -(-num_steps // log_every)
    return log_every * max(1, -(-n_log // n_snapshots))


def _warm_xarray() -> None:
    """Make xarray's first variable now: with dask installed it imports ``dask.array`` then.

    That import (~0.6 s of Python) would otherwise happen when the first run's results are
    packaged, on the critical path; in a pool thread it overlaps with compilation and sampling.
    """
    xr.Variable("x", np.zeros(1))


def run_figure1(config: Figure1Config = Figure1Config(), *, progress: bool = False,
                store=None) -> xr.Dataset:  # fmt: skip
    """Run the paired experiment and return an ``xr.Dataset``.

    Work overlaps on two threads (JAX and numpy release the GIL): every optimizer's program
    compiles while the data are sampled; the methods that do not depend on the selection (SAM
    and its variants) train while GD runs, its checkpoints give the proxy's losses (the proxy
    *is* the first ``proxy_budget`` GD steps), k-means selects and GD + upsampling trains.
    Results do not depend on the scheduling.

    With ``store`` (a folder), each method's runs are saved there as soon as they finish and a
    later call with the same configuration reuses them (an interrupted run resumes). The main
    thread only waits on the training threads, so Ctrl-C acts at once: the unfinished methods
    are dropped (``KeyboardInterrupt`` says how many were kept).

    Returns:
        Dataset with dims ``method, run, step (stored every log_every), feature, level,
        horizon`` holding the test/train loss curves, eigen-components, learning and drop times,
        losses and feature counts at both horizons, the selection report and reference levels;
        config, timings (wall seconds per stage; stages overlap) and status in ``attrs``.
    """
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    cfg = config
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    methods = cfg.run_methods
    kept = _MethodStore(store, cfg)
    bar = tqdm(total=cfg.n_runs + 1 + len(methods), desc="figure1", disable=not progress,
               leave=False)  # fmt: skip

    def timed(name, fn, *args, **kwargs):
        t1 = time.perf_counter()
        out = fn(*args, **kwargs)
        timings[name] = time.perf_counter() - t1
        return out

    def train(m, moments, **kw):  # a stored method is read back, a new one saved at once
        got = kept.get(m)
        return got if got is not None else kept.put(m, timed(f"train_{m}_s", _train_method,
                                                             prep, m, moments, **kw))

    # selection-free methods (SAM and variants) run beside GD -> select -> GD + upsampling
    background = [m for m in methods if METHODS[m][1] == "train" and METHODS[m][0] != "gd"]
    share = "sam" in methods
    programs = {_program(m, share): m for m in reversed(methods)}  # one compile per program
    pool = ThreadPoolExecutor(max_workers=2)
    line = ThreadPoolExecutor(max_workers=1)  # GD's line; the main thread waits (Ctrl-C acts)
    try:
        compiling = [pool.submit(_compile, cfg, m, share) for m in programs.values()]
        pool.submit(_warm_xarray)
        prep = timed("data_s", prepare_runs, cfg, progress=bar, pool=pool)
        later = {m: pool.submit(train, m, prep.moments, share_sam=share) for m in background}
        results = {"gd": line.submit(train, "gd", prep.moments, share_sam=share).result()}
        bar.update(1)
        t1 = time.perf_counter()
        sel = select(prep, losses=_proxy_losses(prep, results["gd"], pool=pool), pool=pool)
        timings["select_s"] = time.perf_counter() - t1
        bar.update(1)
        boost = sel["report"]["sigma_ratio"].mean(axis=1)  # (R,) mean signal boost of selection
        for m in methods:
            if m == "gd" or m in background:
                continue
            moments = sel["moments"] if METHODS[m][1] == "upsampled" else prep.moments
            factor = boost if m == "gd_lr_matched" else 1.0
            results[m] = line.submit(train, m, moments, lr_factor=factor,
                                     share_sam=share).result()  # fmt: skip
            bar.update(1)
        for m, fut in later.items():
            results[m] = fut.result()
            bar.update(1)
        for fut in compiling:
            fut.result()  # surfaces a compilation error
    except KeyboardInterrupt:
        for ex in (pool, line):  # do not wait for the running trainings: they are dropped
            ex.shutdown(wait=False, cancel_futures=True)
        raise KeyboardInterrupt(kept.interrupted_message(methods)) from None
    except BaseException:
        for ex in (pool, line):
            ex.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    line.shutdown()
    bar.close()
    results = {m: results[m] for m in methods}
    timings["total_s"] = time.perf_counter() - t0
    ds = _assemble(prep, results, sel["report"], boost)
    statuses = {m: results[m].status for m in methods}
    ds.attrs.update(
        {
            "config": dataclasses.asdict(cfg),
            "timings": timings,
            "status": "success" if all(v == "success" for v in statuses.values()) else "failed",
            "messages": {m: results[m].message for m in methods},
            "output_scale": prep.scale,
        }
    )
    return ds


class _MethodStore:
    """Each method's :class:`TrainResult`, saved in ``folder`` as it finishes (resume).

    Files are keyed by the configuration: another configuration's files are ignored (and
    replaced). ``folder=None`` keeps nothing.
    """

    def __init__(self, folder, cfg: Figure1Config):
        import hashlib
        from pathlib import Path

        self.folder = None if folder is None else Path(folder)
        self.key = hashlib.sha256(json.dumps(dataclasses.asdict(cfg), sort_keys=True,
                                             default=str).encode()).hexdigest()[:16]  # fmt: skip
        self.reused: set[str] = set()
        self.saved: set[str] = set()

    def _file(self, method: str):
        return self.folder / f"{method}.pkl"

    def get(self, method: str):
        if self.folder is None or not self._file(method).exists():
            return None
        import pickle

        try:
            key, result = pickle.loads(self._file(method).read_bytes())
        except Exception:  # noqa: BLE001 - a damaged file is recomputed
            return None
        if key != self.key:
            return None
        self.reused.add(method)
        import sys

        print(f"figure1: reusing {method}'s finished runs from {self.folder} (an earlier, "
              "interrupted run saved them)", file=sys.stderr)
        return result

    def put(self, method: str, result):
        if self.folder is not None:
            import pickle

            from sims.runtime.io import atomic_path

            with atomic_path(self._file(method)) as tmp:
                tmp.write_bytes(pickle.dumps((self.key, result)))
            self.saved.add(method)
        return result

    def interrupted_message(self, methods) -> str:
        done = sorted(self.saved | self.reused, key=list(methods).index)
        if self.folder is None:
            return f"interrupted; nothing kept ({len(done)} of {len(methods)} methods had finished)"
        return (f"interrupted; {len(done)} of {len(methods)} methods kept in {self.folder} "
                f"({', '.join(done) or 'none finished'}); rerun the same command to resume")

    def clear(self) -> None:
        """Remove the stored methods (once the whole result is written)."""
        if self.folder is None or not self.folder.is_dir():
            return
        for f in self.folder.glob("*.pkl"):
            f.unlink(missing_ok=True)
        try:
            self.folder.rmdir()
        except OSError:
            pass


def _assemble(prep: Prepared, results: dict, report: dict, boost) -> xr.Dataset:
    cfg = prep.config
    methods = list(results)

    def stacked(name):
        return np.stack([results[m].ds[name].values for m in methods])

    steps = results[methods[0]].ds.step.values
    test_l = stacked("test_loss")
    lt = stacked("first_component_step")  # (method, run, feature)
    dt = stacked("first_test_below")
    horizons = np.array([cfg.paper_steps, cfg.num_steps])
    at = np.searchsorted(steps, horizons - 1)
    d = cfg.d
    coeffs = np.array([
        ansatz_coefficients(type(prep.moments)(*(np.asarray(x)[r] for x in prep.moments)),
                            prep.eigvecs[r])
        for r in range(cfg.n_runs)
    ])  # (R, 2, d): the runs' training-moment σ_i, κ_i (theory.sam_saddle)
    data = {
        "train_loss": (("method", "run", "step"), stacked("train_loss")),
        "test_loss": (("method", "run", "step"), test_l),
        "component": (("method", "run", "step", "feature"), stacked("component")),
        "final_train_loss": (("method", "run"), stacked("final_train_loss")),
        "final_test_loss": (("method", "run"), stacked("final_test_loss")),
        "test_loss_at": (("method", "run", "horizon"), test_l[:, :, at]),
        "learning_time": (("method", "run", "feature"), lt),
        "drop_time": (("method", "run", "feature"), dt),
        "n_learned": (("method", "run", "horizon"),
                      np.stack([feature_counts(lt, h) for h in horizons], axis=-1)),
        "grad_norm": (("method", "run", "step"), stacked("grad_norm")),
        "final_v": (("method", "run", "head"), stacked("final_v")),
        "final_k": (("method", "run", "head", "rank", "dim"), stacked("final_k")),
        "final_q": (("method", "run", "head", "rank", "dim"), stacked("final_q")),
        "eigvecs": (("run", "dim", "feature"), prep.eigvecs),
        "ansatz_sigma": (("run", "feature"), coeffs[:, 0]),
        "ansatz_kappa": (("run", "feature"), coeffs[:, 1]),
        "n_completed": (("method", "run"), stacked("n_completed")),
        "learning_rate": (("method", "run"), stacked("learning_rate")),
        "lr_boost": (("run",), np.asarray(boost)),
        "eigenvalue": (("feature",), prep.lam),
        "fixed_point_component": (("feature",), prep.fixed_point),
        "saddle_level": (("saddle",), prep.levels),
        "checkpoint_step": (("checkpoint",), cfg.checkpoint_steps()),
        "horizon_step": (("horizon",), horizons),
    }  # fmt: skip
    for key, val in report.items():
        arr = np.asarray(val)
        dims = ("run",) if arr.ndim == 1 else ("run", "feature")
        data[f"sel_{key}"] = (dims, arr)
    ds = xr.Dataset(
        data,
        coords={
            "method": methods, "run": np.arange(cfg.n_runs), "step": steps,
            "feature": np.arange(d), "head": np.arange(cfg.n_heads), "dim": np.arange(d),
            "saddle": np.arange(d + 1), "horizon": ["paper", "long"],
        },
    )  # fmt: skip
    ds["entropy"] = (("method", "run"), entropies(lt))
    ds["drop_entropy"] = (("method", "run"), entropies(dt))
    ds["phase"] = (("method", "run", "feature"), phase_durations(lt))
    return ds


def _stats(x) -> dict:
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if not x.size:
        return {"n": 0, "median": None, "mean": None, "q25": None, "q75": None}
    q25, med, q75 = np.quantile(x, [0.25, 0.5, 0.75])
    return {"n": int(x.size), "median": float(med), "mean": float(x.mean()), "q25": float(q25),
            "q75": float(q75), "min": float(x.min()), "max": float(x.max())}  # fmt: skip


def ordering_window(ds: xr.Dataset, *, statistic: str = "median") -> dict:
    """Steps at which each method's median (or mean) test loss is below GD's.

    Returns ``{method: [[start, end], ...]}`` of stored steps (intervals where the method's
    statistic over runs is strictly below GD's), for every method other than GD.
    """
    if statistic not in ("median", "mean"):
        raise ValueError(f"`statistic` must be 'median' or 'mean'; got {statistic!r}.")
    f = np.median if statistic == "median" else np.mean
    curves = f(ds.test_loss.values, axis=1)  # (method, step)
    steps = ds.step.values
    gd = curves[list(ds.method.values).index("gd")]
    out = {}
    for i, m in enumerate(ds.method.values):
        if m == "gd":
            continue
        below = curves[i] < gd
        edges = np.flatnonzero(np.diff(np.concatenate([[0], below.astype(int), [0]])))
        out[str(m)] = [[int(steps[a]), int(steps[b - 1])] for a, b in zip(edges[::2], edges[1::2],
                                                                          strict=True)]
    return out


def summarize(ds: xr.Dataset) -> dict:
    """Per method and horizon: feature counts, test loss statistics, entropies, phase ratios.

    For each horizon (``paper``: the paper's 10,001 steps; ``long``) and method:
    ``runs_with_n_features`` (how many runs have learned exactly 0..d features), the median,
    mean and quartiles of the test loss, and the entropy of the learning times of all ``d``
    features over the runs that learned them all (with its paired difference to GD). Also,
    per method: median learning times, median phase ratios to GD (paired, runs that learned all
    features under both), the drop-time entropy, and the steps where the method's median/mean
    test loss is below GD's.
    """
    methods = [str(m) for m in ds.method.values]
    d = ds.feature.size
    gd_i = methods.index("gd")
    lt = ds.learning_time.values
    out: dict = {"horizons": {h: int(s) for h, s in zip(ds.horizon.values,
                                                        ds.horizon_step.values, strict=True)}}
    rep = {k[4:]: ds[k].values for k in ds.data_vars if k.startswith("sel_")}
    out["selection"] = {k: (np.nanmean(v, axis=0).tolist() if v.ndim > 1 else float(np.mean(v)))
                        for k, v in rep.items()}  # fmt: skip
    out["lr_boost_mean"] = float(ds.lr_boost.mean())
    for i, m in enumerate(methods):
        row: dict = {}
        for j, h in enumerate(ds.horizon.values):
            hstep = int(ds.horizon_step.values[j])
            n = ds.n_learned.values[i, :, j]
            full = np.all(lt[i] < hstep, axis=1)
            ent = np.where(full, ds.entropy.values[i], np.nan)
            both = full & np.all(lt[gd_i] < hstep, axis=1)
            diff = ds.entropy.values[i][both] - ds.entropy.values[gd_i][both]
            row[str(h)] = {
                "runs_with_n_features": np.bincount(n, minlength=d + 1).tolist(),
                "test_loss": _stats(ds.test_loss_at.values[i, :, j]),
                "entropy_all_features": _stats(ent),
                "entropy_minus_gd": {**_stats(diff), "frac_positive": float(np.mean(diff > 0))
                                     if diff.size else None},  # fmt: skip
            }
        ok = np.all(np.isfinite(lt[i]) & np.isfinite(lt[gd_i]), axis=1)
        ph = ds.phase.values
        ratio = ph[i][ok] / ph[gd_i][ok]
        row["median_learning_time"] = [
            float(np.nanmedian(lt[i, :, k])) if np.any(np.isfinite(lt[i, :, k])) else None
            for k in range(d)
        ]
        row["median_phase_ratio_to_gd"] = np.median(ratio, axis=0).tolist() if ok.any() else None
        row["median_time_ratio_to_gd"] = (
            np.median(lt[i][ok] / lt[gd_i][ok], axis=0).tolist() if ok.any() else None
        )
        row["drop_entropy"] = _stats(ds.drop_entropy.values[i])
        out[m] = row
    out["window_median_below_gd"] = ordering_window(ds, statistic="median")
    out["window_mean_below_gd"] = ordering_window(ds, statistic="mean")
    return json.loads(json.dumps(out))


def format_summary(summary: dict) -> str:
    """A plain-text table of :func:`summarize` (one row per method and horizon)."""
    lines = []
    head = (f"{'method':14s} {'horizon':>8s} {'runs with 0..d features':>24s} "
            f"{'test loss median':>16s} {'mean':>8s} {'IQR':>19s} {'entropy(all t_i)':>16s}")
    lines.append(head)
    lines.append("-" * len(head))
    hz = summary["horizons"]
    horizons = ("paper",) if hz["paper"] == hz["long"] else ("paper", "long")  # one row if equal
    for m, row in summary.items():
        if not isinstance(row, dict) or not isinstance(row.get("paper"), dict):
            continue
        for h in horizons:
            r = row[h]
            tl, en = r["test_loss"], r["entropy_all_features"]
            ent = f"{en['median']:.4f} (n={en['n']})" if en["n"] else "n/a (n=0)"
            counts = "/".join(map(str, r["runs_with_n_features"]))
            if tl["n"]:
                iqr = f"[{tl['q25']:.5f}, {tl['q75']:.5f}]"
                med, mean = f"{tl['median']:.5f}", f"{tl['mean']:.5f}"
            else:  # every run diverged (no finite test loss)
                iqr, med, mean = "n/a", "n/a", "n/a"
            lines.append(f"{m:14s} {summary['horizons'][h]:>8d} {counts:>24s} "
                         f"{med:>16s} {mean:>8s} {iqr:>19s} {ent:>16s}")
    lines.append("")
    for m, row in summary.items():
        if isinstance(row, dict) and row.get("median_phase_ratio_to_gd") and m != "gd":
            ph = ", ".join(f"{x:.3f}" for x in row["median_phase_ratio_to_gd"])
            lines.append(f"{m:14s} median phase ratio to GD (paired): {ph}")
    sel = summary.get("selection", {})
    if sel:
        lines.append(f"upsampling selection: {sel.get('fraction', float('nan')):.3f} of the data, "
                     f"target size ×{sel.get('target_ratio', float('nan')):.2f}, signal boost r_i "
                     + ", ".join(f"{x:.3f}" for x in sel.get("sigma_ratio", [])))  # fmt: skip
    for stat in ("median", "mean"):
        win = summary.get(f"window_{stat}_below_gd", {})
        for m in ("gd_upsample", "sam"):
            if m in win:
                lines.append(f"steps where the {stat} test loss of {m} is below GD's: {win[m]}")
    return "\n".join(lines)
