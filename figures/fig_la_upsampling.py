"""Upsampling in the ATTN_S toy: what each selection picks and what it does to uniformity.

Signal enrichment per feature, query energy per eigen-direction, measured speed-ups vs the
predicted boosts, and entropy changes (simulation vs ``theory/upsampling.py``) for the paper's
selection, its scale-free variant, random/easy controls, a rule built from the entropy condition
and GD at a learning rate matched to the upsampling boost. Reads
``results/linear_attention/upsampling_study.nc`` (computed when missing); drawing in
:mod:`sims.linear_attention.plotting`.
"""

from __future__ import annotations

from figures import FigureSpec, figure_main
from sims.linear_attention.products import render_upsampling as make

FIGURE = FigureSpec(
    name="la_upsampling",
    title="Linear attention: which upsampling selections make feature learning more uniform",
    paper_ref="main paper Sec. 5, Table 1, remarks after Thm B.3 (beyond the paper: theory)",
    result_file="linear_attention/upsampling_study.nc",
    producer="python -m sims.linear_attention upsampling",
    extra="jax",
)

__all__ = ["FIGURE", "make", "main"]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_la_upsampling [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
