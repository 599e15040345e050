"""Seed 004 Figures 8-9: reversed importance order with interval lengths 8/4/2 (App. C.4).

The furthest block {13, 14} is the most important (digest reading A), then {9..12}, then {1..8};
full model (narrow at the CPU scale).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import training_figure  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig8_9",
    title="Reversed importance order: attention maps, loss and KL (full model)",
    paper_ref="seed004 Figures 8-9, App. C.4",
    result_file="markov/fig8_9_reversed.nc",
    producer="MARKOV_SCALE=paper python -m figures.fig_markov_8_9 --recompute  (GPU)",
    extra="torch",
    gpu=True,
)


def compute(scale: str):
    """Train the full model on the reversed-order chain."""
    from sims.markov import experiments as X
    from sims.markov.chain import ChainConfig
    from sims.markov.train import train

    d, T = X._sizes(scale)
    exp = X.full_exp(scale, chain=ChainConfig.reversed_order(d=d, T=T))
    return train(exp, device=X.device_from_env()).ds


def plot(ds, scale: str) -> dict:
    """One figure (maps, KL with floors, losses, group masses)."""
    return {"markov_fig8_9": training_figure(ds, f"Figs. 8-9 reversed order ({scale} scale)")}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
