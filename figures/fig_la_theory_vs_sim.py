"""Linear attention: simulated learning times and entropies vs the Theorem 4.2 ODE predictions.

Per-feature learning times ``t_i`` (time for ``v_i`` to grow from ``ε`` to ``c v_i*``, each
feature simulated alone on the ansatz) from discrete GD/SAM (eq. 6), the first-order SAM flow
(eq. 8) and the scalar ODEs (full App. C.2 and leading-order eqs. 9–10), and the entropy of the
normalized times (eq. 11) against ``ρ``. Drawing in :mod:`sims.linear_attention.plotting`.
"""

from __future__ import annotations

from figures import FigureSpec, figure_main
from sims.linear_attention.products import render_theory_vs_sim as make

FIGURE = FigureSpec(
    name="la_theory_vs_sim",
    title="Linear attention: simulated learning times / entropies vs Theorem 4.2 ODEs",
    paper_ref="main paper Theorem 4.2, Theorem 4.4 (beyond the paper's figures)",
    result_file="linear_attention/theory_vs_sim.nc",
    producer="python -m figures.fig_la_theory_vs_sim --recompute",
    extra="jax",
)

__all__ = ["FIGURE", "make", "main"]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_la_theory_vs_sim [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
