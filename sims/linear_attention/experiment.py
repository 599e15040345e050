"""Figure 1 experiment: ATTN_S under GD, GD + upsampling and SAM, paired runs (Section 3–5).

Each run ``r`` draws its own covariance rotation, training set and initialization; the three
methods share them (paired design). Pipeline per batch of runs:

1. data: ``P`` sequences per run (``"wishart"`` sufficient sampling by default) -> moments;
2. GD (``n_runs`` runs in one vmapped scan) — it doubles as the upsampling proxy: its
   parameters at ``n_checkpoints`` evenly spaced steps up to ``proxy_steps`` give per-example
   loss trajectories (the proxy is the same model trained with GD on the same data from the same
   initialization, so re-running it would reproduce these exact checkpoints);
3. k-means on the trajectories -> hard cluster -> usage counts -> weighted moments;
4. GD + upsampling from the same initialization, and SAM (eq. 6) with radius ``rho``.

All three trainings use one compiled SAM step (``rho = 0`` is exactly GD: the perturbation is 0),
so the whole figure compiles once. Test loss = population loss (an infinite held-out set) unless
``n_test > 0``.
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
from .measure import entropies, learning_times, loss_drop_times
from .models import AttnSParams, init_params, merged_matrix, output_scale
from .stats import (
    eigh_desc,
    empirical_moments,
    fixed_point_components,
    population_moments,
    saddle_losses,
)
from .train import train_runs
from .upsampling import checkpoint_losses, hard_cluster_spectrum, select_batched

__all__ = ["Figure1Config", "run_figure1", "METHOD_NAMES", "summarize"]

METHOD_NAMES = ("gd", "gd_upsample", "sam")


@dataclasses.dataclass(frozen=True)
class Figure1Config:
    """Configuration of the Figure 1 experiment (defaults: the anchor's paper setting).

    Attributes:
        d: input dimension ``D`` (anchor: 4).
        n_context: context length ``N`` (anchor: seq_len 32 -> N = 31).
        n_heads: ``H`` (anchor attnS figure: 5).
        rank: key/query rank ``r`` (1, Lemma 3.1).
        n_examples: training sequences ``P`` (anchor: 80,000).
        num_steps: full-batch steps (anchor: 10,001).
        n_runs: independent runs per method (paper: 25).
        learning_rate: ``η`` (anchor attnS: 0.02).
        init_scale: anchor ``--init`` (0.01; std = init/sqrt(numel)).
        rho: SAM radius; must be below ~√3/2 × the initial weight scale (Theorem 4.4's condition)
            or SAM never leaves the zero saddle (checked empirically; see the report).
        scale: ``"anchor"`` (no 1/N, as linattn-icl; matches its lr/init) or ``"paper"`` (1/N).
        covariance: covariance family (``"linear"``: eigenvalues ∝ 1..d, trace 1).
        data_method: ``"wishart"`` (fast, exact in law) or ``"tokens"``.
        anchor_preprocessing: centre x / whiten w like linattn-icl (needs ``"tokens"``).
        proxy_steps: proxy budget (default ``num_steps // 3``; the LLM proxy sees 1/3 epoch).
        n_checkpoints: proxy checkpoints ``K`` (paper: 5).
        upsample_factor: extra copies of a selected example (paper: 1).
        cluster_features: ``"trajectory"``, ``"last"`` or ``"relative"``.
        selection: ``"hard"`` (the method), ``"random"`` or ``"easy"`` (ablations).
        kmeans_n_init: k-means++ restarts (1 = sklearn's ``n_init="auto"`` for k-means++).
        fraction: learning-time threshold ``c`` (fraction of the fixed-point component).
        n_test: held-out test sequences (0 = population loss).
        save_every: stride of the saved per-step trajectories.
        seed: root seed.
        methods: which of ``("gd", "gd_upsample", "sam")`` to report (GD always runs: it is the
            upsampling proxy).
    """

    d: int = 4
    n_context: int = 31
    n_heads: int = 5
    rank: int = 1
    n_examples: int = 80_000
    num_steps: int = 10_001
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
    cluster_features: Literal["trajectory", "last", "relative"] = "trajectory"
    selection: Literal["hard", "random", "easy"] = "hard"
    kmeans_n_init: int = 1
    fraction: float = 0.5
    n_test: int = 0
    save_every: int = 10
    seed: int = 0
    methods: tuple[str, ...] = METHOD_NAMES

    def __post_init__(self):
        ints = ("d", "n_context", "n_heads", "rank", "num_steps", "n_runs", "n_checkpoints",
                "save_every")  # fmt: skip
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
        if self.init_scale < 0:
            raise ValueError(f"`init_scale` must be >= 0; got {self.init_scale!r}.")
        if self.upsample_factor < 0:
            raise ValueError(f"`upsample_factor` must be >= 0; got {self.upsample_factor!r}.")
        if self.proxy_steps is not None and not 1 <= self.proxy_steps <= self.num_steps:
            raise ValueError(
                f"`proxy_steps` must be in [1, num_steps={self.num_steps}]; got {self.proxy_steps}."
            )
        if not 0 < self.fraction <= 1:
            raise ValueError(f"`fraction` must be in (0, 1]; got {self.fraction!r}.")
        bad = [m for m in self.methods if m not in METHOD_NAMES]
        if bad or not self.methods:
            raise ValueError(
                f"`methods` must be a non-empty subset of {METHOD_NAMES}; got {self.methods!r}."
            )

    @property
    def proxy_budget(self) -> int:
        """Proxy steps actually used."""
        return self.proxy_steps if self.proxy_steps is not None else max(1, self.num_steps // 3)

    def checkpoint_steps(self) -> np.ndarray:
        """Evenly spaced proxy checkpoints in ``(0, proxy_budget]``."""
        k = np.arange(1, self.n_checkpoints + 1)
        return np.unique(np.round(k * self.proxy_budget / self.n_checkpoints).astype(int))


def _stack(items):
    return type(items[0])(*(np.stack(x) for x in zip(*items, strict=False)))


def run_figure1(config: Figure1Config = Figure1Config(), *, progress: bool = False) -> xr.Dataset:
    """Run the paired GD / GD+upsampling / SAM experiment and return an ``xr.Dataset``.

    Returns:
        Dataset with dims ``method, run, step (saved stride), feature, head, level`` holding the
        loss curves, eigen-components, learning and drop times, entropies, final test losses,
        hard-cluster statistics and reference levels; config, timings and status in ``attrs``.
    """
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    cfg = config
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    s = output_scale(cfg.scale, cfg.n_context)
    bar = tqdm(total=cfg.n_runs + 3, desc="figure1", disable=not progress, leave=False)
    covs, eigs, datas, zs, moms, test_moms, params = [], [], [], [], [], [], []
    keys = jax.random.split(jax.random.PRNGKey(cfg.seed), cfg.n_runs)
    blas1 = threadpool_limits(1)  # skinny numpy matmuls are slower with BLAS threads
    for r in range(cfg.n_runs):
        rs = cfg.seed * 100_003 + r
        cov = make_covariance(cfg.covariance, cfg.d, seed=rs)
        data = sample_dataset(
            cfg.n_examples, cfg.n_context, cov, seed=rs, method=cfg.data_method,
            anchor_preprocessing=cfg.anchor_preprocessing,
        )  # fmt: skip
        covs.append(cov)
        eigs.append(eigh_desc(cov)[1])
        datas.append(data)
        zs.append(data.features())
        moms.append(empirical_moments(data, scale=s, features=zs[-1]))
        if cfg.n_test > 0:
            test = sample_dataset(max(cfg.n_test, 2), cfg.n_context, cov, seed=rs + 7_919_113)
            test_moms.append(empirical_moments(test, scale=s))
        else:
            test_moms.append(population_moments(cov, cfg.n_context, scale=s))
        params.append(
            init_params(keys[r], cfg.d, cfg.n_heads, rank=cfg.rank, init_scale=cfg.init_scale)
        )
        bar.update(1)
    blas1.unregister()
    moments, test_moments, p0 = _stack(moms), _stack(test_moms), _stack(params)
    eigvecs = np.stack(eigs)
    timings["data_s"] = time.perf_counter() - t0

    ckpts = cfg.checkpoint_steps()
    record_every = int(np.gcd.reduce(np.concatenate([ckpts, [cfg.save_every]])))
    common = dict(
        optimizer="sam", learning_rate=cfg.learning_rate, test_moments=test_moments,
        eigvecs=eigvecs, record_every=record_every, raise_on_failure=False,
    )  # fmt: skip
    t1 = time.perf_counter()
    res_gd = train_runs(p0, moments, cfg.num_steps, rho=0.0, **common)
    bar.update(1)
    timings["train_gd_s"] = time.perf_counter() - t1

    # Upsampling: proxy = the GD run's checkpoints.
    t1 = time.perf_counter()
    snap = res_gd.ds.snapshot_step.values
    idx = np.searchsorted(snap, ckpts)
    all_losses = []
    blas1 = threadpool_limits(1)
    for r in range(cfg.n_runs):
        pk = AttnSParams(
            jnp.asarray(res_gd.ds.v.values[r, idx]),
            jnp.asarray(res_gd.ds.k.values[r, idx]),
            jnp.asarray(res_gd.ds.q.values[r, idx]),
        )
        mats = np.asarray(jax.vmap(merged_matrix)(pk))  # (K, d, d)
        all_losses.append(checkpoint_losses(mats, datas[r], scale=s, features=zs[r]))
    ups = select_batched(
        np.stack(all_losses), cfg.seed * 1000 + np.arange(cfg.n_runs), selection=cfg.selection,
        factor=cfg.upsample_factor, features=cfg.cluster_features, n_init=cfg.kmeans_n_init,
    )  # fmt: skip
    weights = [u.weights for u in ups]
    hard_frac = [u.cluster.hard_fraction for u in ups]
    sel_frac = [float(u.selected.mean()) for u in ups]
    specs = [hard_cluster_spectrum(datas[r], ups[r].cluster.hard_mask) for r in range(cfg.n_runs)]
    xq_ratio = [sp["xq_ratio"] for sp in specs]
    beta_ratio = [sp["beta_ratio"] for sp in specs]
    up_moments = _stack(
        [
            empirical_moments(datas[r], weights[r], scale=s, features=zs[r])
            for r in range(cfg.n_runs)
        ]
    )
    blas1.unregister()
    timings["select_s"] = time.perf_counter() - t1

    results = {"gd": res_gd}
    if "gd_upsample" in cfg.methods:  # proxy selection only needed here
        t1 = time.perf_counter()
        results["gd_upsample"] = train_runs(p0, up_moments, cfg.num_steps, rho=0.0, **common)
        timings["train_gd_upsample_s"] = time.perf_counter() - t1
    bar.update(1)
    if "sam" in cfg.methods:
        t1 = time.perf_counter()
        results["sam"] = train_runs(p0, moments, cfg.num_steps, rho=cfg.rho, **common)
        timings["train_sam_s"] = time.perf_counter() - t1
    bar.update(1)
    bar.close()
    timings["total_s"] = time.perf_counter() - t0
    methods = [m for m in METHOD_NAMES if m in cfg.methods]
    lam = eigh_desc(covs[0])[0]
    fp = fixed_point_components(covs[0], cfg.n_context, scale=s)
    levels = saddle_losses(covs[0], cfg.n_context)
    stride = cfg.save_every
    steps = np.arange(0, cfg.num_steps, stride)

    def stacked(name):
        return np.stack([results[m].ds[name].values for m in methods])

    train_l, test_l, comp = stacked("train_loss"), stacked("test_loss"), stacked("component")
    lt = learning_times(comp, fp, fraction=cfg.fraction)  # (method, run, feature)
    dt = loss_drop_times(train_l, levels)
    ds = xr.Dataset(
        {
            "train_loss": (("method", "run", "step"), train_l[:, :, ::stride]),
            "test_loss": (("method", "run", "step"), test_l[:, :, ::stride]),
            "component": (("method", "run", "step", "feature"), comp[:, :, ::stride]),
            "final_train_loss": (("method", "run"), train_l[:, :, -1]),
            "final_test_loss": (("method", "run"), test_l[:, :, -1]),
            "learning_time": (("method", "run", "feature"), lt),
            "drop_time": (("method", "run", "feature"), dt),
            "final_v": (("method", "run", "head"), stacked("final_v")),
            "n_completed": (("method", "run"), stacked("n_completed")),
            "hard_fraction": (("run",), np.array(hard_frac)),
            "selected_fraction": (("run",), np.array(sel_frac)),
            "hard_xq_ratio": (("run", "feature"), np.array(xq_ratio)),
            "hard_beta_ratio": (("run", "feature"), np.array(beta_ratio)),
            "eigenvalue": (("feature",), lam),
            "fixed_point_component": (("feature",), fp),
            "saddle_level": (("level",), levels),
            "checkpoint_step": (("checkpoint",), ckpts),
        },
        coords={
            "method": methods,
            "run": np.arange(cfg.n_runs),
            "step": steps,
            "feature": np.arange(cfg.d),
            "head": np.arange(cfg.n_heads),
            "level": np.arange(cfg.d + 1),
        },
    )
    n_feat = _common_learned(lt)
    ds["entropy"] = (
        ("method", "run"),
        entropies(lt, n_feat) if n_feat else np.full(lt.shape[:2], np.nan),
    )
    ds["drop_entropy"] = (
        ("method", "run"),
        entropies(dt, _common_learned(dt))
        if _common_learned(dt)
        else np.full(lt.shape[:2], np.nan),
    )
    statuses = {m: results[m].status for m in methods}
    ds.attrs.update(
        {
            "config": dataclasses.asdict(cfg),
            "timings": timings,
            "entropy_n_features": n_feat,
            "drop_entropy_n_features": _common_learned(dt),
            "status": "success" if all(v == "success" for v in statuses.values()) else "failed",
            "messages": {m: results[m].message for m in methods},
            "output_scale": s,
        }
    )
    return ds


def _common_learned(times) -> int:
    """Largest ``M`` such that every run of every method learned features ``0..M-1``."""
    ok = np.all(np.isfinite(times), axis=(0, 1))
    return int(np.argmin(ok)) if not np.all(ok) else int(ok.size)


def summarize(ds: xr.Dataset) -> dict:
    """Per-method medians/quartiles of the final test loss, learning times and entropies.

    Entropies are reported for the first ``M`` features (``M = 2..d``) over the runs in which
    every method learned those ``M`` features (paired), with the number of such runs and the
    fraction of those runs whose entropy exceeds the first method's (GD) on the same run.
    """
    lt_all = ds.learning_time.values  # (method, run, feature)
    out: dict = {"hard_fraction_mean": float(ds.hard_fraction.mean())}
    out["hard_xq_ratio_mean"] = ds.hard_xq_ratio.values.mean(0).tolist()
    out["hard_beta_ratio_mean"] = ds.hard_beta_ratio.values.mean(0).tolist()
    for i, m in enumerate(ds.method.values):
        f = ds.final_test_loss.values[i]
        lt = lt_all[i]
        row = {
            "median_test_loss": float(np.median(f)),
            "test_loss_quartiles": np.quantile(f, [0.25, 0.75]).tolist(),
            "mean_features_learned": float(np.isfinite(lt).sum(-1).mean()),
            "median_learning_time": [
                float(np.nanmedian(lt[:, j])) if np.any(np.isfinite(lt[:, j])) else None
                for j in range(lt.shape[1])
            ],
        }
        for n_feat in range(2, lt.shape[1] + 1):
            ok = np.all(np.isfinite(lt_all[:, :, :n_feat]), axis=(0, 2))  # paired runs
            ent = entropies(lt[ok], n_feat) if ok.any() else np.array([])
            ref = entropies(lt_all[0][ok], n_feat) if ok.any() else np.array([])
            row[f"entropy_first{n_feat}"] = {
                "median": float(np.median(ent)) if ent.size else None,
                "n_runs": int(ok.sum()),
                "frac_runs_above_first_method": float(np.mean(ent > ref)) if ent.size else None,
            }
        out[str(m)] = row
    return json.loads(json.dumps(out))
