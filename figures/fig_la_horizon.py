"""Figure 1 against the horizon: where the paper's ordering of the three methods holds.

Median and mean test loss over the 25 runs at every step, runs that have learned all four
features, and the entropy of the four learning times per method. Reads the Figure 1 result
(``results/linear_attention/figure1.nc``); drawing in :mod:`sims.linear_attention.plotting`.
"""

from __future__ import annotations

from figures import FigureSpec, figure_main
from sims.linear_attention.products import render_horizon as make

FIGURE = FigureSpec(
    name="la_fig1_horizon",
    title="Linear attention: median/mean test loss vs horizon, completed runs, entropies",
    paper_ref="main paper Figure 1 (beyond the paper: horizon dependence)",
    result_file="linear_attention/figure1.nc",
    producer="python -m sims.linear_attention figure1",
    extra="jax",
)

__all__ = ["FIGURE", "make", "main"]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_la_horizon [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
