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
available, else ``cpu``). Every result is written with :func:`sims.runtime.io.write_netcdf` and
provenance; :func:`run_or_load` reads it back when it exists.

The figure computations that more than the figure modules need (the GPU campaign,
:mod:`llm_validation.campaign`, runs them at the paper scale) live here, each once:
:func:`fig2_3`, :func:`fig8_9` and :func:`fig5` (with :func:`fig5_run` and its tables
:data:`FIG5_SIZES`, :data:`FIG5_SEEDS`, :data:`FIG5_KL_TO`), registered with their result files
in :data:`FIGURE_RUNS`. A :class:`FigureRun` places its result by scale (:func:`result_path`:
``results/markov/<scale>/`` for the non-CPU scales) and runs or loads it with provenance; the
``figures.fig_markov_*`` modules and the campaign both call it, so both write the same files.

The paper-scale runs on one GPU (results under ``results/markov/paper/``, images
``markov_*_paper.png``; the multi-run figures run their jobs in sequence on the one device and
keep finished runs in ``<result>.parts/`` so an interrupted sweep resumes)::

    MARKOV_SCALE=paper MARKOV_DEVICE=cuda python -m figures --only markov_fig1 markov_fig2_3 \
        markov_fig4 markov_fig5 markov_fig6_7 markov_fig8_9
    python -m sims.markov train --model full --scale paper --device cuda \
        --out results/markov/paper/full.nc --checkpoint results/markov/paper/full.pt

Every run there also computes the best restricted truths once (Monte Carlo, 100 test sequences,
2048 particles: ~1-4 min of CPU per chain at d = 50).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .chain import ChainConfig, MarkovChain, make_dataset
from .tensor_dynamics import FlowConfig

__all__ = [
    "SCALES",
    "PAPER_SCHEDULER",
    "check_scale_env",
    "scale_from_env",
    "device_from_env",
    "minimal_exp",
    "sweep_exp",
    "reseed",
    "full_exp",
    "flow_config",
    "run_or_load",
    "train_with_references",
    "result_path",
    "FigureRun",
    "FIGURE_RUNS",
    "fig2_3",
    "fig8_9",
    "fig5",
    "fig5_run",
    "FIG5_SIZES",
    "FIG5_SEEDS",
    "FIG5_KL_TO",
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


def check_scale_env() -> str:
    """``$MARKOV_SCALE``'s scale; registered in :mod:`sims.runtime.errors`: every CLI checks it."""
    return scale_from_env(False)


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


def run_or_load(path: Path, compute: Callable[..., object], *, recompute: bool = False,
                config: Mapping | None = None, seed: int | None = None,
                resumable: bool = False):  # fmt: skip
    """Read the NetCDF result at ``path``; compute, stamp with provenance and save it first.

    Args:
        path: the result file.
        compute: ``compute()`` returns the dataset; with ``resumable``, ``compute(store=...)``.
        recompute: compute even when ``path`` exists (and clear the job store first).
        config: recorded in the file's provenance.
        seed: recorded in the file's provenance.
        resumable: give ``compute`` a :class:`sims.runtime.parallel.JobStore` next to the result
            (``<path stem>.parts/``) that keeps finished jobs while it runs, so an interrupted
            sweep resumes; the store is removed once the result file is written.
    """
    from sims.runtime.io import provenance, read_netcdf, write_netcdf
    from sims.runtime.parallel import JobStore

    path = Path(path)
    store = JobStore(path.with_suffix(".parts")) if resumable else None
    if path.exists() and not recompute:
        ds = read_netcdf(path)
    else:
        if store is not None and recompute:
            store.clear()
        ds = compute(store=store) if store is not None else compute()
        status = ds.attrs.get("status", "success") if hasattr(ds, "attrs") else "success"
        write_netcdf(path, ds, meta=provenance(config or {}, seed=seed, status=status))
        ds = read_netcdf(path)
    if store is not None:
        store.clear()
    return ds


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


# ---------------------------------------------------------------------------------------------
# Figure runs shared by the figure modules and the GPU campaign
# ---------------------------------------------------------------------------------------------


def result_path(result_file: str, results_dir, scale: str) -> Path:
    """``results_dir / result_file``, under ``markov/<scale>/`` for the non-CPU scales.

    So a quick or paper-scale run never overwrites the CPU-scale result.

    >>> result_path("markov/fig5_datasize.nc", "results", "paper").as_posix()
    'results/markov/paper/fig5_datasize.nc'
    >>> result_path("markov/fig5_datasize.nc", "results", "cpu").as_posix()
    'results/markov/fig5_datasize.nc'
    """
    if scale not in SCALES:
        raise ValueError(f"`scale`={scale!r} unknown; use one of {SCALES}.")
    rel = result_file if scale == "cpu" else result_file.replace("markov/", f"markov/{scale}/")
    return Path(results_dir) / rel


@dataclasses.dataclass(frozen=True)
class FigureRun:
    """A seed-004 figure's computation and where its result lives.

    Attributes:
        name: the figure's name (``python -m figures --only NAME``).
        result_file: its result relative to the results folder, at the CPU scale
            (:func:`result_path` places the other scales).
        compute: ``compute(scale, **options)`` returns the result dataset; a ``store``
            parameter makes the run resumable (:func:`run_or_load`).
    """

    name: str
    result_file: str
    compute: Callable[..., Any]

    def path(self, results_dir, scale: str) -> Path:
        """The result file at ``scale`` (:func:`result_path`)."""
        return result_path(self.result_file, results_dir, scale)

    def run(self, results_dir, scale: str, *, recompute: bool = False, **options):
        """The result at ``scale``: read when saved, else computed and saved with provenance.

        ``options`` (e.g. ``device``) go to ``compute``; the provenance config is
        ``{"figure": name, "scale": scale}`` with seed 0.
        """
        path = self.path(results_dir, scale)
        resumable = "store" in inspect.signature(self.compute).parameters

        def compute(**kw):
            return self.compute(scale, **options, **kw)

        return run_or_load(path, compute, recompute=recompute, resumable=resumable,
                           config={"figure": self.name, "scale": scale}, seed=0)  # fmt: skip


def _device(device: str | None) -> str:
    """``device`` (default :func:`device_from_env`), checked before any work."""
    from sims.runtime.devices import check_device

    device = device or device_from_env()
    check_device(device)
    return device


def fig2_3(scale: str, *, device: str | None = None):
    """Figures 2-3: the c-restricted full models, then the unrestricted one with KL to them.

    ``device``: the torch device (default :func:`device_from_env`).
    """
    device = _device(device)
    return train_with_references(full_exp(scale), device=device)


def fig8_9(scale: str, *, device: str | None = None):
    """Figures 8-9 (App. C.4): the full model on the reversed-importance-order chain."""
    from .train import train

    device = _device(device)
    d, T = _sizes(scale)
    exp = full_exp(scale, chain=ChainConfig.reversed_order(d=d, T=T))
    return train(exp, device=device).ds


#: Figure 5's training-set sizes, seeds and the references of its KL panel, per scale.
FIG5_SIZES = {"quick": (32, 64), "cpu": (500, 1500, 4000, 9000), "paper": (1000, 2000, 4000, 9000)}
FIG5_SEEDS = {"quick": (0,), "cpu": (0, 1), "paper": (0,)}
FIG5_KL_TO = {
    "paper": "trained restricted-context models (c = one, two, all groups)",
    "cpu": "restricted ground truths f_{A*_1:i} (Eq. 3)",
    "quick": "restricted ground truths f_{A*_1:i} (Eq. 3)",
}


def fig5_run(job: tuple):
    """One Figure 5 run: curves, and the stage counts at the end and at the best step.

    ``job`` is ``(scale, size, seed)`` or ``(scale, size, seed, device)``. Paper scale: the full
    model with KL to trained restricted-context models (:func:`train_with_references`); other
    scales: :func:`sweep_exp` with KL to the restricted ground truths, batch ``min(n, 32)``
    (quick) or ``min(n, 250)`` (cpu).
    """
    from .train import detect_stages, stage_band, train

    scale, n, seed = job[:3]
    device = _device(job[3] if len(job) > 3 else None)
    if scale == "paper":
        exp = reseed(full_exp(scale, n_train=n, batch_size=min(n, 3000)), seed)
        ds = train_with_references(exp, device=device)
        kl = ds["kl_reference"]
    else:
        bs = min(n, 32 if scale == "quick" else 250)
        exp = reseed(sweep_exp(scale, n_train=n, batch_size=bs), seed)
        ds = train(exp, device=device).ds
        kl = ds["kl_restricted"]
    rep = detect_stages(ds)
    band = stage_band(ds)
    i_best = int(np.argmin(ds.excess_loss.values))
    best_step = int(ds.step[i_best])
    kl = kl.rename({kl.dims[1]: "reference"}).assign_coords(
        reference=[f"c{i + 1}" for i in range(kl.shape[1])]
    )
    out = ds[["excess_loss"]].assign(kl_context=kl)
    if "kl_floor" in ds and scale != "paper":  # floors of KL to f_{A*_1:i} (issue 16)
        out["kl_floor"] = ("reference", ds["kl_floor"].values)
    out["n_stages"] = rep.n_stages
    out["n_stages_min"] = band.attrs["min"]
    out["n_stages_max"] = band.attrs["max"]
    out["n_stages_at_best"] = int(np.isfinite(rep.group_times[rep.group_times <= best_step]).sum())
    out["best_step"] = best_step
    out["best_excess"] = float(ds.excess_loss[i_best])
    out["closest_at_best"] = int(np.argmin(kl.values[i_best])) + 1  # nearest restricted model
    return out


def fig5(scale: str, *, store=None, device: str | None = None):
    """Figure 5 (App. C.2): every (size, seed) run of :data:`FIG5_SIZES` x :data:`FIG5_SEEDS`.

    In parallel over the CPU cores at the CPU scale (:func:`sims.runtime.parallel.pmap`), one after
    the other at the quick and paper scales (one device). Returns one dataset with ``size`` and
    ``seed`` dimensions.

    Args:
        scale: ``"quick"``, ``"cpu"`` or ``"paper"``.
        store: a :class:`sims.runtime.parallel.JobStore` keeping finished runs (resume after a
            crash).
        device: the torch device (default :func:`device_from_env`, resolved in each run).
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    if device is not None:
        _device(device)  # before any run
    tail = () if device is None else (device,)  # the job's repr keys the store
    jobs = [(scale, n, s, *tail) for n in FIG5_SIZES[scale] for s in FIG5_SEEDS[scale]]
    workers = 1 if scale in ("quick", "paper") else None
    runs = pmap(fig5_run, jobs, workers=workers, desc="Fig. 5 (size, seed) runs", store=store)
    ns = len(FIG5_SEEDS[scale])
    rows = [
        xr.concat(runs[i * ns : (i + 1) * ns], dim="seed", coords="minimal", compat="override")
        for i in range(len(FIG5_SIZES[scale]))
    ]
    ds = xr.concat(rows, dim="size", coords="minimal", compat="override")
    ds = ds.assign_coords(size=list(FIG5_SIZES[scale]), seed=list(FIG5_SEEDS[scale]))
    ds.attrs = {
        "scale": scale,
        "kl_to": FIG5_KL_TO[scale],
        "config_of_first_run": runs[0].attrs["config"],  # the others differ in n_train, seeds
        "run_seconds": [float(r.attrs["seconds"]) for r in runs],
    }
    return ds


#: The figure runs that the GPU campaign needs (:mod:`llm_validation.campaign`), by figure name.
FIGURE_RUNS = {
    r.name: r
    for r in (
        FigureRun("markov_fig2_3", "markov/fig2_3_full.nc", fig2_3),
        FigureRun("markov_fig8_9", "markov/fig8_9_reversed.nc", fig8_9),
        FigureRun("markov_fig5", "markov/fig5_datasize.nc", fig5),
    )
}
