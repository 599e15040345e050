"""Named experiments of seed 004 at three scales, with run-or-load result files.

Scales:

* ``"quick"``: seconds, for smoke tests of the figures (tiny vocabulary, a few steps).
* ``"cpu"``: minutes on 2 idle CPU cores (~0.05 s/step). Minimal model with vocabulary d = 20
  (Table 1: 50), T = 20, w = 6, m = 1.7, b0 = 10, batch 250, lr 1e-2, no scheduler, 9000
  training sequences (or online), 6000 steps. These changes (documented here, never silently)
  make a step ~8x cheaper than d = 50 / batch 500; the third stage needs several thousand steps
  at this lr. Full-model figures at this scale use a narrower model (hidden 48) at d = 20.
  Multi-run sweeps (Fig. 5's sizes x seeds, the SAM/upsampling seeds) use
  :func:`sweep_exp`: the same minimal model at lr 2e-2 and 4000 steps, which brings the third
  stage forward from ~4000 to ~2100 steps, and evaluations every 25 steps.
* ``"paper"``: Tables 1-3 (d = 50, batch 3000, lr 3e-3, 2000 steps, AdamW, clip 1, wd 0.01) with
  ReduceLROnPlateau(patience 10, factor 0.5) as :data:`PAPER_SCHEDULER` configures it: stepped
  once per evaluation (every 20 steps) on the held-out loss, with a floor ``min_lr = lr/100``
  (issue 16: stepped every step on the training loss it collapses the rate to ~1e-8 at the first
  plateau and only one pattern is learned). Meant for a GPU (full model: ~8 s/step on 2 CPU
  cores; ``python -m sims.markov train --scale paper --device cuda``).

``MARKOV_SCALE`` (environment) picks the scale used by the figure modules when ``quick`` is
false (default ``"cpu"``); ``MARKOV_DEVICE`` the torch device they train on (default ``cuda`` when
available, else ``cpu``). Every result is written with :func:`sims.io.write_netcdf` and
provenance; :func:`run_or_load` reads it back when it exists.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from .chain import ChainConfig, MarkovChain, make_dataset
from .tensor_dynamics import FlowConfig

__all__ = [
    "SCALES",
    "PAPER_SCHEDULER",
    "scale_from_env",
    "device_from_env",
    "minimal_exp",
    "sweep_exp",
    "reseed",
    "full_exp",
    "flow_config",
    "run_or_load",
    "train_with_references",
]

SCALES = ("quick", "cpu", "paper")

#: Table 2's ReduceLROnPlateau(patience 10, factor 0.5) as the ``paper`` scale uses it: stepped
#: per evaluation (``eval_every`` = 20 steps) on the held-out loss, relative threshold 1e-4, floor
#: lr/100; a warning below 1e-5 (:class:`~sims.markov.train.TrainConfig`).
PAPER_SCHEDULER = dict(scheduler="plateau", eval_every=20, plateau_patience=10,
                       plateau_factor=0.5, plateau_threshold=1e-4, plateau_cooldown=0,
                       min_lr=3e-5, lr_warn=1e-5)  # fmt: skip


def scale_from_env(quick: bool) -> str:
    """``"quick"`` when ``quick``, else ``$MARKOV_SCALE`` (default ``"cpu"``).

    Raises:
        ValueError: for an unknown ``$MARKOV_SCALE`` (one line, naming the values).
    """
    if quick:
        return "quick"
    s = os.environ.get("MARKOV_SCALE", "cpu")
    if s not in SCALES:
        raise ValueError(f"MARKOV_SCALE={s!r} unknown; set it to one of {', '.join(SCALES)}.")
    return s


def device_from_env() -> str:
    """``$MARKOV_DEVICE`` (e.g. ``cuda``) for the figure runs; default ``cuda`` when available.

    The figure modules train on this device; the paper scale is meant for one GPU.
    """
    dev = os.environ.get("MARKOV_DEVICE", "auto")
    if dev != "auto":
        return dev
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _train_cfg(scale: str, **over):
    from .train import TrainConfig

    if scale == "quick":
        base = dict(steps=6, batch_size=32, n_train=64, n_test=16, eval_every=3,
                    scheduler="none", lr=3e-2, checkpoint_every=1000, best_contexts=8,
                    best_particles=256)  # fmt: skip
    elif scale == "cpu":
        base = dict(steps=6000, batch_size=250, lr=1e-2, scheduler="none", n_test=500,
                    eval_every=50, threads=1)  # fmt: skip
    elif scale == "paper":
        base = dict(PAPER_SCHEDULER)
    else:
        raise ValueError(f"`scale`={scale!r} unknown; use one of {SCALES}.")
    base.update(over)
    return TrainConfig(**base)


def _sizes(scale: str) -> tuple[int, int]:
    """``(d, T)`` per scale."""
    return {"quick": (8, 6), "cpu": (20, 20)}.get(scale, (50, 20))


def minimal_exp(scale: str, *, m: float = 1.7, init_scale: float = 1.0,
                chain: ChainConfig | None = None, **train_over):  # fmt: skip
    """Minimal-model experiment (Fig. 1 bottom, Fig. 4, Figs. 6-7)."""
    from .train import ExperimentConfig

    d, T = _sizes(scale)
    return ExperimentConfig.minimal(m=m, d=d, T=T, init_scale=init_scale, chain=chain,
                                    train=_train_cfg(scale, **train_over))  # fmt: skip


def sweep_exp(scale: str, **over):
    """:func:`minimal_exp` for sweeps of many runs; at the CPU scale lr 2e-2, 4000 steps."""
    if scale == "cpu":
        over = {"lr": 2e-2, "steps": 4000, "eval_every": 25, **over}
    return minimal_exp(scale, **over)


def reseed(exp, seed: int):
    """``exp`` with a new chain (A*, datasets) and a new init / batch order, both from ``seed``."""
    return exp.replace(seed=seed, train=dataclasses.replace(exp.train, seed=seed))


def full_exp(scale: str, *, context: int | None = None, chain: ChainConfig | None = None,
             **train_over):  # fmt: skip
    """Full-model experiment (Figs. 2-3, 5, 8-9); narrower at the quick/cpu scales."""
    from .train import ExperimentConfig

    d, T = _sizes(scale)
    model_kw = {"quick": dict(n_embd=12, d_ff=8), "cpu": dict(n_embd=48, d_ff=64)}.get(scale, {})
    tr = dict(train_over)
    if scale == "cpu":  # 4 models (c = 4, 8, 12 and unrestricted) x 1500 steps: ~20 min, 2 cores
        tr = {"steps": 1500, "lr": 3e-3, "eval_every": 50, **tr}
    return ExperimentConfig.full(d=d, T=T, context=context, chain=chain,
                                 train=_train_cfg(scale, **tr), **model_kw)  # fmt: skip


def flow_config(scale: str, **over) -> FlowConfig:
    """Fig. 10 ODE (App. C.6): T = 40, m = 1.7, std 1e-6; quick: T = 10."""
    base = dict(T=10, t_max=2e3, n_eval=150) if scale == "quick" else dict(T=40, t_max=1e4)
    base.update(over)
    return FlowConfig(**base)


def run_or_load(path: Path, compute: Callable[[], object], *, recompute: bool = False,
                config: Mapping | None = None, seed: int | None = None):  # fmt: skip
    """Read the NetCDF result at ``path``; compute, stamp with provenance and save it first."""
    from sims.io import provenance, read_netcdf, write_netcdf

    path = Path(path)
    if path.exists() and not recompute:
        return read_netcdf(path)
    ds = compute()
    status = ds.attrs.get("status", "success") if hasattr(ds, "attrs") else "success"
    write_netcdf(path, ds, meta=provenance(config or {}, seed=seed, status=status))
    return read_netcdf(path)


def train_with_references(exp, contexts: tuple[int, ...] | None = None,
                          *, progress: bool = False, data=None, device: str = "cpu"):  # fmt: skip
    """Train restricted-context models (banded masks) and the unrestricted one (Fig. 3 right).

    Returns the unrestricted run's dataset with ``kl_reference`` = ``KL(p_c || model)`` for each
    ``c`` in ``contexts`` (default: the cumulative group boundaries, e.g. 4, 8, 12).
    """
    from .train import predict_log_probs, train

    if contexts is None:
        contexts = tuple(int(np.cumsum([len(g) for g in exp.chain.lags])[i])
                         for i in range(exp.chain.h))  # fmt: skip
    chain = MarkovChain(exp.chain, seed=exp.seed)
    tr = exp.train
    if data is None:
        data = make_dataset(chain, 0 if tr.online else tr.n_train, tr.n_test)
    refs = {}
    for c in contexts:
        sub = exp.replace(model=dataclasses.replace(exp.model, context=c))
        refs[f"c={c}"] = predict_log_probs(
            train(sub, data=data, progress=progress, device=device).model, data.test
        )
    return train(exp, data=data, reference=refs, progress=progress, device=device).ds
