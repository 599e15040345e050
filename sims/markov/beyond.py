"""Beyond the paper: does SAM, or upsampling late-learned sequences, make the stages uniform?

The main paper measures simplicity bias by the entropy of the sum-normalised per-feature learning
times (main paper Eq. 11, :func:`sims.entropy.shannon_entropy`): higher entropy = more uniform
stages. Here the "features" are the ``h`` lag groups of seed 004 and the learning times are

* for the tensor flow: the stage times of :func:`~sims.markov.tensor_dynamics.stage_times`
  (loss crossing the midpoint between plateaus), for discrete GD and SAM on the same loss
  (:func:`ode_uniformity`);
* for the minimal transformer: the step at which some head first holds >= 0.5 attention mass on
  group ``g`` (:func:`~sims.markov.train.detect_stages`), for AdamW, SAM(AdamW), and AdamW on a
  training set where the hard (late-learned) cluster of a proxy run's per-sequence loss
  trajectories is upsampled, with a random-upsampling control of the same count
  (:func:`minimal_uniformity`, using :mod:`sims.selection`).

Both the entropy of the absolute learning times ``t_g`` and of the stage durations
``t_g - t_{g-1}`` are reported.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .experiments import reseed
from .tensor_dynamics import FlowConfig, discrete_flow, stage_times

__all__ = [
    "entropies",
    "ode_uniformity",
    "minimal_uniformity",
    "minimal_uniformity_seeds",
    "paired_gains",
]


def entropies(times) -> tuple[float, float]:
    """``(H(t_1..t_h), H(durations))``; ``nan`` when a stage was never reached."""
    from sims.entropy import shannon_entropy

    t = np.asarray(times, float)
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        return float("nan"), float("nan")
    dur = np.diff(np.concatenate([[0.0], np.sort(t)]))
    return shannon_entropy(t), shannon_entropy(np.maximum(dur, 1e-12))


def _ode_stage_times(job: tuple) -> np.ndarray:
    """Stage times of one discrete GD/SAM run on the tensor loss.

    A :func:`~sims.runtime.parallel.pmap` job: ``(rho, seed, lr, steps, T, init_std,
    record_every)``.
    """
    rho, seed, lr, steps, T, init_std, record_every = job
    cfg = FlowConfig(T=T, init_std=init_std, seed=seed)
    ds = discrete_flow(cfg, "gd" if rho == 0 else "sam", lr=lr, rho=rho, steps=steps,
                       record_every=record_every)  # fmt: skip
    return stage_times(ds)


def ode_uniformity(rhos=(0.0, 0.01, 0.05, 0.2), seeds=range(5), *, lr: float = 0.1,
                   steps: int = 60000, T: int = 40, init_std: float = 1e-6,
                   record_every: int = 50, workers: int | None = None):  # fmt: skip
    """Stage times and entropies of discrete GD (``rho = 0``) and SAM on the tensor loss.

    The ``(rho, seed)`` runs are independent and run in ``workers`` processes
    (:func:`sims.runtime.parallel.pmap`; ``None``: all cores).

    Returns an ``xarray.Dataset`` with ``stage_time (rho, seed, stage)``, ``entropy_times`` and
    ``entropy_durations`` ``(rho, seed)``.
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    rhos, seeds = list(rhos), list(seeds)
    jobs = [(r, s, lr, steps, T, init_std, record_every) for r in rhos for s in seeds]
    st = np.array(pmap(_ode_stage_times, jobs, workers=workers, desc="tensor flow GD/SAM"))
    st = st.reshape(len(rhos), len(seeds), 3)
    ent = np.array([[entropies(st[i, j]) for j in range(len(seeds))] for i in range(len(rhos))])
    return xr.Dataset(
        {"stage_time": (("rho", "seed", "stage"), st),
         "entropy_times": (("rho", "seed"), ent[..., 0]),
         "entropy_durations": (("rho", "seed"), ent[..., 1])},
        coords={"rho": rhos, "seed": seeds, "stage": [1, 2, 3]},
        attrs={"lr": lr, "steps": steps, "T": T, "init_std": init_std,
               "method": "discrete GD (rho=0) / SAM on the reduced tensor loss"},
    )  # fmt: skip


def _rhos(sam_rho) -> tuple[float, ...]:
    rhos = tuple(np.atleast_1d(np.asarray(sam_rho, float)).tolist())
    if not all(np.isfinite(r) and r > 0 for r in rhos):
        raise ValueError(f"`sam_rho` must be a positive radius or a tuple; got {sam_rho!r}.")
    return rhos


def _cluster_counts(n_clusters) -> tuple[int, ...]:
    raw = np.atleast_1d(np.asarray(n_clusters))
    if raw.size == 0 or raw.dtype.kind not in "iu" or (raw < 2).any():
        raise ValueError(
            f"`n_clusters` must be an int >= 2 or a tuple of them (2 in the paper); "
            f"got {n_clusters!r}."
        )
    return tuple(int(k) for k in raw)


def minimal_uniformity(exp, *, sam_rho: float | tuple[float, ...] = 0.05, factor: int = 1,
                       proxy_steps: int | None = None, n_clusters: int | tuple[int, ...] = 2,
                       cluster_on: str | tuple[str, ...] = "loss", seed: int = 0,
                       progress: bool = False, device: str = "cpu"):  # fmt: skip
    """AdamW vs SAM vs upsampling (hard / random) on the minimal model; stage times + entropies.

    Args:
        exp: a finite-data minimal :class:`~sims.markov.train.ExperimentConfig` (the baseline).
        sam_rho: SAM radius, or several (one SAM run each, named ``sam_<rho>``); ``()``: none.
        factor: extra copies of each selected sequence (usage ``1 + factor``).
        proxy_steps: length of the proxy run whose per-sequence loss trajectories are clustered
            (default: the baseline run itself, i.e. the full run).
        n_clusters: k of the k-means on the proxy trajectories (the paper: 2), or several; the
            highest-loss cluster is upsampled (runs ``upsample_hard`` / ``upsample_random`` for
            k = 2, ``upsample_hard_k<k>`` / ``upsample_random_k<k>`` otherwise). A larger k
            picks a smaller, later-learned cluster.
        cluster_on: ``"loss"`` (the paper: raw per-sequence loss trajectories) or ``"excess"``
            (an oracle available only on synthetic data: the trajectories minus each sequence's
            Bayes loss, :meth:`~sims.markov.chain.MarkovChain.sequence_nll`, so the clusters
            follow what is still to be learned rather than the irreducible noise; run names get
            an ``_excess`` suffix), or both; every (target, k) pair shares the one proxy run.
        seed: selection seed.
        progress: progress bars.
        device: torch device of the runs.

    Returns:
        ``(xarray.Dataset, dict of run datasets)``; the dataset has ``pattern_time (run,
        group)``, ``entropy_times (run)``, ``entropy_durations (run)``, ``final_excess (run)``,
        and per clustering ``n_selected``, ``hard_cluster_mean_loss`` (mean proxy loss over the
        checkpoints) and ``hard_cluster_bayes_loss`` ``(target, k)``; ``attrs["bayes_loss_mean"]``
        is the mean Bayes loss of all training sequences.
    """
    import xarray as xr

    from sims.selection import cluster_trajectories, select_random, upsample_indices

    from .chain import MarkovChain, make_dataset
    from .train import detect_stages, train

    if exp.train.online:
        raise ValueError("`exp.train.online` must be False: upsampling needs a finite dataset.")
    rhos = _rhos(sam_rho)
    ks = _cluster_counts(n_clusters)
    targets = (cluster_on,) if isinstance(cluster_on, str) else tuple(cluster_on)
    if not targets or any(t not in ("loss", "excess") for t in targets):
        raise ValueError(f"`cluster_on`={cluster_on!r} unknown; use 'loss', 'excess' or both.")
    chain = MarkovChain(exp.chain, seed=exp.seed)
    data = make_dataset(chain, exp.train.n_train, exp.train.n_test)
    runs = {}
    base_tr = dataclasses.replace(exp.train, record_example_losses=True)
    proxy_tr = base_tr if proxy_steps is None else dataclasses.replace(base_tr, steps=proxy_steps)
    proxy = train(exp.replace(train=proxy_tr), data=data, progress=progress, device=device).ds
    if proxy_steps is None:
        runs["adamw"] = proxy
    else:
        runs["adamw"] = train(exp, data=data, progress=progress, device=device).ds
    for rho in rhos:
        tr = dataclasses.replace(exp.train, optimizer="sam", sam_rho=rho)
        runs[f"sam_{rho:g}"] = train(exp.replace(train=tr), data=data, progress=progress,
                                     device=device).ds
    losses = proxy["example_loss"].values.T  # (example, checkpoint)
    n = losses.shape[0]
    bayes = chain.sequence_nll(data.train)
    sel = np.zeros((3, len(targets), len(ks)))  # n_selected, hard loss, hard Bayes loss
    for i, tgt in enumerate(targets):
        feats = losses if tgt == "loss" else losses - bayes[:, None]
        for j, k in enumerate(ks):
            hard = np.asarray(cluster_trajectories(feats, k, seed=seed).hard_mask)
            rand = select_random(n, int(hard.sum()), seed=seed)
            tag = ("" if k == 2 else f"_k{k}") + ("" if tgt == "loss" else "_excess")
            for name, mask in ((f"upsample_hard{tag}", hard), (f"upsample_random{tag}", rand)):
                idx = upsample_indices(n, mask, factor)
                runs[name] = train(exp, data=data, progress=progress, train_index=idx,
                                   device=device).ds
            sel[:, i, j] = hard.sum(), losses[hard].mean(), bayes[hard].mean()
    names = list(runs)
    pt = np.stack([detect_stages(runs[k]).group_times for k in names])
    ent = np.array([entropies(t) for t in pt])
    ds = xr.Dataset(
        {"pattern_time": (("run", "group"), pt),
         "entropy_times": (("run",), ent[:, 0]),
         "entropy_durations": (("run",), ent[:, 1]),
         "final_excess": (("run",), [float(runs[k].excess_loss[-1]) for k in names]),
         "n_selected": (("target", "k"), sel[0].astype(int)),
         "hard_cluster_mean_loss": (("target", "k"), sel[1]),
         "hard_cluster_bayes_loss": (("target", "k"), sel[2])},
        coords={"run": names, "group": np.arange(1, pt.shape[1] + 1), "k": list(ks),
                "target": list(targets)},
        attrs={"n_train": n, "sam_rho": list(rhos), "factor": factor,
               "bayes_loss_mean": float(bayes.mean())},
    )  # fmt: skip
    return ds, runs


def _uniformity_job(job: tuple):
    """One seed of :func:`minimal_uniformity_seeds` (a :func:`~sims.runtime.parallel.pmap` job)."""
    exp, kw = job
    return minimal_uniformity(exp, **kw)[0]


def minimal_uniformity_seeds(exp, seeds=range(5), *, workers: int | None = None,
                             sam_rho: float | tuple[float, ...] = 0.05, factor: int = 1,
                             proxy_steps: int | None = None, n_clusters=2,
                             cluster_on: str | tuple[str, ...] = "loss",
                             store=None, device: str = "cpu"):  # fmt: skip
    """:func:`minimal_uniformity` over ``seeds``, in parallel, with paired entropy gains.

    ``store``: an optional :class:`sims.runtime.parallel.JobStore` that keeps finished seeds
        (resume).

    Each seed redraws everything (:func:`reseed`: the chain's A*, the datasets, the init, the batch
    order and the selection seed); within a seed the four runs share data and init, so the
    comparison to AdamW is paired.

    Returns:
        ``xarray.Dataset`` with the variables of :func:`minimal_uniformity` along a ``seed``
        dimension (``bayes_loss_mean`` becomes a ``(seed,)`` variable), plus ``gain_times`` /
        ``gain_durations (seed, run)``: the entropy minus the AdamW entropy of the same seed
        (``nan`` when a stage was not reached in either run).
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    seeds = [int(s) for s in seeds]
    if not seeds:
        raise ValueError("`seeds` is empty; give at least one seed, e.g. range(5).")
    kw = dict(sam_rho=sam_rho, factor=factor, proxy_steps=proxy_steps, n_clusters=n_clusters,
              cluster_on=cluster_on, device=device)  # fmt: skip
    jobs = [(reseed(exp, s), {**kw, "seed": s}) for s in seeds]
    dss = pmap(_uniformity_job, jobs, workers=workers, desc="minimal model, seeds", store=store)
    for d in dss:  # per-seed numbers become variables (concat keeps only the first's attrs)
        d["bayes_loss_mean"] = d.attrs.pop("bayes_loss_mean")
    ds = xr.concat(dss, dim="seed", combine_attrs="override").assign_coords(seed=seeds)
    for k in ("times", "durations"):
        e = ds[f"entropy_{k}"]
        ds[f"gain_{k}"] = e - e.sel(run="adamw", drop=True)
    return ds


def paired_gains(ds, var: str = "gain_times") -> dict[str, dict[str, float]]:
    """Per run: mean, sd, min and max of the paired gain over seeds, and how many are > 0.

    ``ds`` is :func:`minimal_uniformity_seeds`'s result (or any dataset with a ``(seed, run)``
    gain variable); seeds where either entropy is ``nan`` are left out and counted in ``n``.
    """
    out = {}
    for run in ds["run"].values:
        g = ds[var].sel(run=run).values
        f = g[np.isfinite(g)]
        out[str(run)] = {
            "mean": float(f.mean()) if f.size else float("nan"),
            "sd": float(f.std(ddof=1)) if f.size > 1 else float("nan"),
            "min": float(f.min()) if f.size else float("nan"),
            "max": float(f.max()) if f.size else float("nan"),
            "n_positive": int((f > 0).sum()),
            "n": int(f.size),
            "n_seeds": int(g.size),
        }
    return out
