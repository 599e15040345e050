"""Seed 004 Figures 6-7: online ("infinite data") training of the minimal model (App. C.3).

Fresh sequences every step; the same incremental behaviour as with the finite dataset.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import training_figure  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig6_7",
    title="Online sampling: attention maps, validation loss and KL (minimal model)",
    paper_ref="seed004 Figures 6-7, App. C.3",
    result_file="markov/fig6_7_online.nc",
    producer="python -m figures.fig_markov_6_7 --recompute",
    extra="torch",
)


def compute(scale: str):
    """Train the minimal model with a fresh batch every step."""
    from sims.markov import experiments as X
    from sims.markov.train import train

    return train(X.minimal_exp(scale, online=True), device=X.device_from_env()).ds


def plot(ds, scale: str) -> dict:
    """One figure (maps, KL with floors, losses, group masses)."""
    return {"markov_fig6_7": training_figure(ds, f"Figs. 6-7 online ({scale} scale)")}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
