"""Seed 004 Figures 2-3: full one-block decoder, attention maps and KL curves.

Fig. 2: per-head attention over training (all heads on I(1), then one head per group).
Fig. 3: KL to the restricted truths (left) and to restricted-context models c = 4, 8, 12 (right),
which the unrestricted model approaches in that order.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.experiments import FIGURE_RUNS  # noqa: E402
from sims.markov.plotting import training_figure  # noqa: E402

RUN = FIGURE_RUNS["markov_fig2_3"]  # the computation (sims), shared with the GPU campaign
FIGURE = FigureSpec(
    name=RUN.name,
    title="Full model: attention maps, KL to restricted truths and restricted-context models",
    paper_ref="seed004 Figures 2-3",
    result_file=RUN.result_file,
    producer="MARKOV_SCALE=paper python -m figures.fig_markov_2_3 --recompute  (GPU)",
    extra="torch",
    gpu=True,
)


def compute(scale: str):
    """Train the c-restricted models, then the unrestricted one with KL to them.

    :func:`sims.markov.experiments.fig2_3` on ``$MARKOV_DEVICE``.
    """
    return RUN.compute(scale)


def plot(ds, scale: str) -> dict:
    """One figure with the reference-KL panel."""
    fig = training_figure(ds, f"Figs. 2-3 full model ({scale} scale)", reference=True)
    return {"markov_fig2_3": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
