"""Why SAM learns ATTN_S's features more uniformly: the heads share one perturbation radius.

Phase and learning-time ratios SAM/GD (simulation vs the reduced model of
``theory/sam_saddle.py``, for exact, first-order and head-wise SAM), entropy gains per run,
predicted vs simulated ratios per run, escape from a saddle vs the plateau's background gradient,
and the gradient norm of one run. Reads ``results/linear_attention/sam_mechanism.nc`` and
``sam_escape.nc`` (computed from the Figure 1 result when missing); drawing in
:mod:`sims.linear_attention.plotting`.
"""

from __future__ import annotations

from figures import FigureSpec, figure_main
from sims.linear_attention.products import render_mechanism as make

FIGURE = FigureSpec(
    name="la_sam_mechanism",
    title="Linear attention: SAM's shared radius explains its more uniform feature learning",
    paper_ref="main paper Thm 4.2/4.4, eq. (22) (beyond the paper: mechanism)",
    result_file="linear_attention/sam_mechanism.nc",
    producer="python -m sims.linear_attention mechanism",
    extra="jax",
)

__all__ = ["FIGURE", "make", "main"]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_la_sam_mechanism [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
