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

from .tensor_dynamics import FlowConfig, discrete_flow, stage_times

__all__ = ["entropies", "ode_uniformity", "minimal_uniformity"]


def entropies(times) -> tuple[float, float]:
    """``(H(t_1..t_h), H(durations))``; ``nan`` when a stage was never reached."""
    from sims.entropy import shannon_entropy

    t = np.asarray(times, float)
    if not np.all(np.isfinite(t)) or np.any(t <= 0):
        return float("nan"), float("nan")
    dur = np.diff(np.concatenate([[0.0], np.sort(t)]))
    return shannon_entropy(t), shannon_entropy(np.maximum(dur, 1e-12))


def ode_uniformity(rhos=(0.0, 0.01, 0.05, 0.2), seeds=range(5), *, lr: float = 0.1,
                   steps: int = 60000, T: int = 40, init_std: float = 1e-6,
                   record_every: int = 50):  # fmt: skip
    """Stage times and entropies of discrete GD (``rho = 0``) and SAM on the tensor loss.

    Returns an ``xarray.Dataset`` with ``stage_time (rho, seed, stage)``, ``entropy_times`` and
    ``entropy_durations`` ``(rho, seed)``.
    """
    import xarray as xr

    rhos, seeds = list(rhos), list(seeds)
    st = np.full((len(rhos), len(seeds), 3), np.inf)
    for i, rho in enumerate(rhos):
        for j, s in enumerate(seeds):
            cfg = FlowConfig(T=T, init_std=init_std, seed=s)
            ds = discrete_flow(cfg, "gd" if rho == 0 else "sam", lr=lr, rho=rho, steps=steps,
                               record_every=record_every)  # fmt: skip
            st[i, j] = stage_times(ds)
    ent = np.array([[entropies(st[i, j]) for j in range(len(seeds))] for i in range(len(rhos))])
    return xr.Dataset(
        {"stage_time": (("rho", "seed", "stage"), st),
         "entropy_times": (("rho", "seed"), ent[..., 0]),
         "entropy_durations": (("rho", "seed"), ent[..., 1])},
        coords={"rho": rhos, "seed": seeds, "stage": [1, 2, 3]},
        attrs={"lr": lr, "steps": steps, "T": T, "init_std": init_std,
               "method": "discrete GD (rho=0) / SAM on the reduced tensor loss"},
    )  # fmt: skip


def minimal_uniformity(exp, *, sam_rho: float = 0.05, factor: int = 1,
                       proxy_steps: int | None = None,
                       seed: int = 0, progress: bool = False):  # fmt: skip
    """AdamW vs SAM vs upsampling (hard / random) on the minimal model; stage times + entropies.

    Args:
        exp: a finite-data minimal :class:`~sims.markov.train.ExperimentConfig` (the baseline).
        sam_rho: SAM radius for the SAM run.
        factor: extra copies of each selected sequence (usage ``1 + factor``).
        proxy_steps: length of the proxy run whose per-sequence loss trajectories are clustered
            (default: the baseline run itself, i.e. the full run).
        seed: selection seed.
        progress: progress bars.

    Returns:
        ``(xarray.Dataset, dict of run datasets)``; the dataset has ``pattern_time (run,
        group)``, ``entropy_times (run)``, ``entropy_durations (run)`` and ``n_selected``.
    """
    import xarray as xr

    from sims.selection import cluster_trajectories, select_random, upsample_indices

    from .chain import MarkovChain, make_dataset
    from .train import detect_stages, train

    if exp.train.online:
        raise ValueError("`exp.train.online` must be False: upsampling needs a finite dataset.")
    chain = MarkovChain(exp.chain, seed=exp.seed)
    data = make_dataset(chain, exp.train.n_train, exp.train.n_test)
    runs = {}
    base_tr = dataclasses.replace(exp.train, record_example_losses=True)
    proxy_tr = base_tr if proxy_steps is None else dataclasses.replace(base_tr, steps=proxy_steps)
    proxy = train(exp.replace(train=proxy_tr), data=data, progress=progress).ds
    if proxy_steps is None:
        runs["adamw"] = proxy
    else:
        runs["adamw"] = train(exp, data=data, progress=progress).ds
    runs["sam"] = train(exp.replace(train=dataclasses.replace(exp.train, optimizer="sam",
                                                              sam_rho=sam_rho)),
                        data=data, progress=progress).ds  # fmt: skip
    losses = proxy["example_loss"].values.T  # (example, checkpoint)
    cl = cluster_trajectories(losses, seed=seed)
    hard = np.asarray(cl.hard_mask)
    n = len(hard)
    runs["upsample_hard"] = train(exp, data=data, progress=progress,
                                  train_index=upsample_indices(n, hard, factor)).ds  # fmt: skip
    rand = select_random(n, int(hard.sum()), seed=seed)
    runs["upsample_random"] = train(exp, data=data, progress=progress,
                                    train_index=upsample_indices(n, rand, factor)).ds  # fmt: skip
    names = list(runs)
    pt = np.stack([detect_stages(runs[k]).group_times for k in names])
    ent = np.array([entropies(t) for t in pt])
    ds = xr.Dataset(
        {"pattern_time": (("run", "group"), pt),
         "entropy_times": (("run",), ent[:, 0]),
         "entropy_durations": (("run",), ent[:, 1]),
         "final_excess": (("run",), [float(runs[k].excess_loss[-1]) for k in names])},
        coords={"run": names, "group": np.arange(1, pt.shape[1] + 1)},
        attrs={"n_selected": int(hard.sum()), "n_train": n, "sam_rho": sam_rho,
               "factor": factor, "hard_cluster_mean_loss": float(losses[hard].mean())},
    )  # fmt: skip
    return ds, runs
