"""Figure 1 analog: ATTN_S test loss under GD, GD + upsampling and SAM (25 paired runs).

Top row: the paper's setting and horizon (10,001 steps), unchanged. Bottom row: the same runs
until every run of every method has learned every feature (200,001 steps). Titles give the
median, mean and quartiles of the test loss and how many runs have learned 0..4 features.
Reads ``results/linear_attention/figure1.nc`` (computed when missing; it also holds the
first-order, head-wise and lr-matched controls used by the mechanism and horizon figures). The
drawing lives in :mod:`sims.linear_attention.plotting`; this module only registers it.
"""

from __future__ import annotations

from figures import FigureSpec, figure_main
from sims.linear_attention.products import render_figure1 as make

FIGURE = FigureSpec(
    name="la_fig1",
    title="Linear attention (ATTN_S): GD vs GD+upsampling vs SAM at 10,001 and 200,001 steps",
    paper_ref="main paper Figure 1",
    result_file="linear_attention/figure1.nc",
    producer="python -m sims.linear_attention figure1",
    extra="jax",
)

__all__ = ["FIGURE", "make", "main"]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig01_linear_attention [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
