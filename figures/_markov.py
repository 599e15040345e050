"""Shared ``make`` of the seed-004 figure modules: pick the scale, run or load, render.

The scale is ``"quick"`` when asked, else ``$MARKOV_SCALE`` (default ``"cpu"``); results of the
non-default scales live under ``results/markov/<scale>/`` so they never overwrite each other.

A ``compute`` that takes a ``store`` argument (the multi-run sweeps) gets a
:class:`sims.parallel.JobStore` next to its result file (``<result>.parts/``): finished runs are
kept there while the sweep runs, so an interrupted sweep resumes; it is removed once the result
file is written, and cleared first by ``--recompute``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

from figures import FigureSpec
from sims.parallel import JobStore


def scaled_make(
    spec: FigureSpec,
    compute: Callable[[str], object],
    plot: Callable[[object, Path, str], list[Path]],
) -> Callable[..., list[Path]]:
    """The registry's ``make(out_dir, *, results_dir, quick, recompute)`` for a Markov figure."""

    def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
        """Compute the result if needed (scale from ``quick`` / ``$MARKOV_SCALE``) and render."""
        return make_scaled(
            spec, compute, plot, out_dir, results_dir=results_dir, quick=quick, recompute=recompute
        )

    make.__module__ = compute.__module__  # the figure module: names its CLI (`--help`)
    return make


def make_scaled(
    spec: FigureSpec,
    compute: Callable[[str], object],
    plot: Callable[[object, Path, str], list[Path]],
    out_dir,
    *,
    results_dir,
    quick: bool = False,
    recompute: bool = False,
) -> list[Path]:
    """Compute ``spec``'s result at the chosen scale if needed (with provenance) and render it."""
    from sims.markov import experiments as X

    scale = X.scale_from_env(quick)
    rel = spec.result_file
    if scale != "cpu":
        rel = rel.replace("markov/", f"markov/{scale}/")
    path = Path(results_dir) / rel
    kw = {}
    if "store" in inspect.signature(compute).parameters:
        kw["store"] = JobStore(path.with_suffix(".parts"))
        if recompute:
            kw["store"].clear()
    ds = X.run_or_load(
        path,
        lambda: compute(scale, **kw),
        recompute=recompute,
        config={"figure": spec.name, "scale": scale},
        seed=0,
    )
    if "store" in kw:
        kw["store"].clear()
    return plot(ds, Path(out_dir), scale)
