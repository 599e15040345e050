"""Seed 004 Figure 1 (bottom): minimal model, KL to the restricted truths and attention maps.

Stage-wise learning of the order-6 chain (groups {1,2}, {3,4}, {5,6}; m = 1.7): KL to f_{A*_1}
reaches its minimum first, then f_{A*_{1:2}}, then f_{A*_{1:3}}; attention maps go from all heads
on I(1) (competitive) to one head per group (cooperative). Scales: see sims.markov.experiments.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import training_figure  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig1",
    title="Minimal model: KL to restricted ground truths and attention maps over training",
    paper_ref="seed004 Figure 1 (bottom), App. C.1",
    result_file="markov/fig1_minimal.nc",
    producer="python -m figures.fig_markov_1 --recompute",
    extra="torch",
)


def compute(scale: str):
    """Train the minimal model (finite data, m = 1.7)."""
    from sims.markov import experiments as X
    from sims.markov.train import train

    return train(X.minimal_exp(scale), device=X.device_from_env()).ds


def plot(ds, scale: str) -> dict:
    """One figure (maps, KL with floors, losses, group masses)."""
    return {"markov_fig1": training_figure(ds, f"Fig. 1 minimal model ({scale} scale)")}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
