"""The confirmation's time estimate: wall seconds from a measured run's CPU seconds.

``confirm`` announces it before any work (and ``--dry-run`` prints it);
``benchmarks/bench_confirm.py`` prints it for a finished run. A fine-tuning run costs
``a + b * steps`` (fitted to the measured runs); jobs are scheduled longest-first on the idle
cores, phase after phase.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llm_validation.experiments.confirm.design import SCALES, VARIANTS, ConfirmConfig

__all__ = ["COMMITTED_COSTS", "committed_costs", "design_extras", "estimate_line", "estimate_run",
           "lpt_makespan"]  # fmt: skip


#: The committed CPU run's summary (its per-job CPU seconds feed :func:`estimate_run`).
COMMITTED_COSTS = (Path(__file__).resolve().parents[3] / "figures" / "summaries" / "data"
                   / "llm" / "confirm_cpu" / "results.nc.json")  # fmt: skip


def lpt_makespan(costs: Sequence[float], workers: int) -> float:
    """Wall time of ``costs`` on ``workers`` (longest job first to the least loaded worker).

    Examples:
        >>> lpt_makespan([3, 3, 2, 2, 2], 2)
        7.0
    """
    import heapq

    loads = [0.0] * max(1, workers)
    for c in sorted(costs, reverse=True):
        heapq.heapreplace(loads, loads[0] + c)
    return float(max(loads))


def _steps_of(variant: str, ft_steps: float, up_steps: float) -> float:
    v = VARIANTS[variant]
    return ft_steps if v.setting == "ft" and v.match_steps is None else up_steps


def estimate_run(ds, variants: Sequence[str], seeds: int, workers: int, *,
                 step_factor: float = 1.0, reuse: bool = False, extra_run: float = 0.0,
                 extra_proxy: float = 0.0) -> dict:  # fmt: skip
    """Estimated wall seconds per phase of a run of ``variants`` x ``seeds`` on ``workers``.

    ``ds`` is a finished run's ``results.nc`` (or the committed summary,
    :func:`committed_costs`): the CPU seconds of its jobs (``job_cpu_seconds``,
    ``run_cpu_seconds``, ``train_steps``). A fine-tuning run costs ``a + b * steps`` (fitted to
    the measured runs; ``step_factor`` scales the steps, e.g. for other epochs); the jobs are
    scheduled on ``workers`` idle cores, longest first, phase after phase. ``reuse``: the
    pre-training and proxies are reused (cost 0). ``extra_run`` / ``extra_proxy``: CPU
    seconds added to every fine-tuning + evaluation run / proxy run (issue 36: a design that
    evaluates more items or records more losses than the measured run, :func:`design_extras`).
    ``benchmarks/bench_confirm.py`` prints it.
    """
    job = json.loads(ds.attrs["job_cpu_seconds"])
    steps = np.asarray(ds["train_steps"].values, dtype=float).ravel()
    cost = np.asarray(ds["run_cpu_seconds"].values, dtype=float).ravel()
    ok = np.isfinite(steps) & np.isfinite(cost)
    if len(set(steps[ok])) >= 2:
        b, a = np.polyfit(steps[ok], cost[ok], 1)
    else:  # one step count measured: cost proportional to steps
        a, b = 0.0, float(np.mean(cost[ok] / steps[ok]))
    ft_steps = float(np.nanmean(ds["train_steps"].sel(variant="ft").values)) * step_factor
    up = [v for v in ds["variant"].values if _steps_of(str(v), 0, 1) == 1]
    up_steps = (float(np.nanmean(ds["train_steps"].sel(variant=up).values)) * step_factor
                if up else ft_steps)  # fmt: skip
    pre = [job.get("pretrain_target", 0.0), job.get("pretrain_proxy", 0.0)]
    proxy = float(np.nanmean(job.get("proxy", [np.nan])))
    ratio = (pre[0] / pre[1]) if pre[1] else 1.0  # proxy = target costs the target's per token
    kinds = {VARIANTS[v].proxy for v in variants if VARIANTS[v].setting != "ft"}
    kinds |= {"small"} if any(VARIANTS[v].match_steps for v in variants) else set()
    proxies = [proxy * (ratio if k == "target" else 1.0) + extra_proxy
               for k in kinds for _ in range(seeds)]  # fmt: skip
    if reuse:
        pre, proxies = [], []
    runs = []
    for v in variants:
        c = a + b * _steps_of(v, ft_steps, up_steps)
        if VARIANTS[v].optimizer == "fsam":  # two gradients per step: the training part twice
            c += b * _steps_of(v, ft_steps, up_steps)
        runs += [c + extra_run] * seeds
    runs.append(job.get("pt_eval", 0.0) + extra_run)
    phases = {
        "pretrain": lpt_makespan(pre, min(workers, 2)) if pre else 0.0,
        "proxies": lpt_makespan(proxies, workers) if proxies else 0.0,
        "finetune": lpt_makespan(runs, workers),
    }
    return {
        "fit": (float(a), float(b)),
        "ft_steps": ft_steps,
        "up_steps": up_steps,
        "phases": phases,
        "total": sum(phases.values()),
        "cpu_total": sum(pre) + sum(proxies) + sum(runs),
    }


def committed_costs(path: str | os.PathLike = COMMITTED_COSTS):
    """The committed CPU run's costs as a dataset (what :func:`estimate_run` reads)."""
    import xarray as xr

    d = json.loads(Path(path).read_text(encoding="utf-8"))

    def var(v):
        data = [np.nan if x is None else float(x) for x in v["data"]] \
            if v["dtype"].startswith("f") else v["data"]
        return xr.Variable(v["dims"], np.asarray(data).reshape(v["shape"]))

    names = ("train_steps", "run_cpu_seconds")
    return xr.Dataset({k: var(d["data_vars"][k]) for k in names},
                      coords={k: var(v) for k, v in d["coords"].items() if k in ("variant",
                                                                                 "seed")},
                      attrs={"job_cpu_seconds": d["attrs"]["job_cpu_seconds"]})  # fmt: skip


#: Generated answers per run and per-example loss recordings per proxy run of the committed
#: run (issue 29: 6 formats x 60 items + 13 sources x 16 held-out answers; no log-spaced
#: recordings), the base :func:`design_extras` adds to.
COMMITTED_DESIGN = {"generated": 6 * 60 + 13 * 16, "lt_records": 0}


def design_extras(cfg: ConfirmConfig, measured: dict = COMMITTED_DESIGN) -> tuple[float, float]:
    """CPU seconds per run and per proxy run that ``cfg`` adds to a measured run's costs.

    Each generated answer beyond the measured run's costs ``COSTS["gen_item"]`` and each
    example-recording of the proxy's log-spaced losses ``COSTS["lt_record"]``
    (:data:`~llm_validation.experiments.confirm.design.COSTS`, issue 36).

    Examples:
        >>> from llm_validation.experiments.confirm.design import COSTS
        >>> cfg = SCALES["cpu"]
        >>> run, proxy = design_extras(cfg)
        >>> round(run / COSTS["gen_item"]), 6 * 300 + 13 * 50 - 568
        (1882, 1882)
    """
    import math

    from llm_validation.experiments.confirm.design import COSTS

    gen = 6 * cfg.n_test + 13 * cfg.heldout_acc_per_source
    n_train = math.ceil(cfg.n_train * 0.95)
    run = COSTS["gen_item"] * (gen - measured["generated"])
    proxy = COSTS["lt_record"] * n_train * (cfg.lt_records - measured["lt_records"])
    return run, proxy


def estimate_line(cfg: ConfirmConfig, scale: str, workers: int, *, reuse: bool = False) -> str:
    """One line: the run's estimated wall time on ``workers`` idle cores, or why there is none.

    Only the ``cpu`` scale has a measured run to estimate from (the committed one's CPU
    seconds); other variants, seeds and epochs are scaled from it.
    """
    if scale != "cpu":
        return (f"no time estimate for --scale {scale}: only the cpu scale has a measured run "
                "to estimate from")  # fmt: skip
    try:
        extra_run, extra_proxy = design_extras(cfg)
        e = estimate_run(committed_costs(), cfg.variants, len(cfg.seeds), workers,
                         step_factor=cfg.finetune.epochs / SCALES["cpu"].finetune.epochs,
                         reuse=reuse, extra_run=extra_run, extra_proxy=extra_proxy)  # fmt: skip
    except (OSError, KeyError, ValueError) as exc:
        return f"no time estimate ({type(exc).__name__}: the committed run's costs unreadable)"
    ph = ", ".join(f"{k} {v / 60:.0f}" for k, v in e["phases"].items() if v)
    cores = f"{workers} idle core{'s' * (workers != 1)}"
    return (f"estimated {e['total'] / 60:.0f} min on {cores} ({ph} min; from the "
            "committed run's CPU seconds, as benchmarks/bench_confirm.py computes it, plus "
            f"{extra_run:.0f} s per run and {extra_proxy:.0f} s per proxy for this design's "
            "items and recordings; a loaded machine takes longer)")
