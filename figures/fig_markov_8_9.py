"""Seed 004 Figures 8-9: reversed importance order with interval lengths 8/4/2 (App. C.4).

The furthest block {13, 14} is the most important (digest reading A), then {9..12}, then {1..8};
full model (narrow at the CPU scale).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.experiments import FIGURE_RUNS  # noqa: E402
from sims.markov.plotting import training_figure  # noqa: E402

RUN = FIGURE_RUNS["markov_fig8_9"]  # the computation (sims), shared with the GPU campaign
FIGURE = FigureSpec(
    name=RUN.name,
    title="Reversed importance order: attention maps, loss and KL (full model)",
    paper_ref="seed004 Figures 8-9, App. C.4",
    result_file=RUN.result_file,
    producer="MARKOV_SCALE=paper python -m figures.fig_markov_8_9 --recompute  (GPU)",
    extra="torch",
    gpu=True,
)


def compute(scale: str):
    """Train the full model on the reversed-order chain.

    :func:`sims.markov.experiments.fig8_9` on ``$MARKOV_DEVICE``.
    """
    return RUN.compute(scale)


def plot(ds, scale: str) -> dict:
    """One figure (maps, KL with floors, losses, group masses)."""
    return {"markov_fig8_9": training_figure(ds, f"Figs. 8-9 reversed order ({scale} scale)")}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
