"""Shared ``make`` of the seed-004 figure modules: pick the scale, run or load, render, save.

The scale is ``"quick"`` when asked, else ``$MARKOV_SCALE`` (default ``"cpu"``); results of the
non-default scales live under ``results/markov/<scale>/``
(:func:`sims.markov.experiments.result_path`) and their images get a ``_<scale>`` suffix
(``markov_fig1_quick.png``), so a quick or paper-scale run never overwrites the CPU-scale
files. An unknown ``$MARKOV_SCALE`` is a one-line error with exit status 2.

The result is run or loaded by :meth:`sims.markov.experiments.FigureRun.run`, as the GPU
campaign does: a ``compute`` that takes a ``store`` argument (the multi-run sweeps) gets a
:class:`sims.runtime.parallel.JobStore` next to its result file (``<result>.parts/``): finished runs
are kept there while the sweep runs, so an interrupted sweep resumes; it is removed once the result
file is written, and cleared first by ``--recompute``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from figures import FigureSpec, save_figure


def image_name(name: str, scale: str) -> str:
    """``name.png`` at the CPU scale, ``name_<scale>.png`` otherwise."""
    return f"{name}.png" if scale == "cpu" else f"{name}_{scale}.png"


def scale_or_exit(quick: bool) -> str:
    """:func:`sims.markov.experiments.scale_from_env`, or exit 2 with one line on a bad value."""
    from sims.markov import experiments as X

    try:
        return X.scale_from_env(quick)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def scaled_make(
    spec: FigureSpec,
    compute: Callable[[str], object],
    plot: Callable[[object, str], Mapping[str, object]],
) -> Callable[..., list[Path]]:
    """The registry's ``make(out_dir, *, results_dir, quick, recompute)`` for a Markov figure.

    ``plot(ds, scale)`` returns ``{image name: matplotlib figure}``.
    """

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
    plot: Callable[[object, str], Mapping[str, object]],
    out_dir,
    *,
    results_dir,
    quick: bool = False,
    recompute: bool = False,
) -> list[Path]:
    """Compute ``spec``'s result at the chosen scale if needed (with provenance) and render it."""
    from sims.markov import experiments as X

    scale = scale_or_exit(quick)
    ds = X.FigureRun(spec.name, spec.result_file, compute).run(results_dir, scale,
                                                                 recompute=recompute)  # fmt: skip
    figs = plot(ds, scale)
    return [save_figure(fig, Path(out_dir) / image_name(name, scale), dpi=110)
            for name, fig in figs.items()]  # fmt: skip
