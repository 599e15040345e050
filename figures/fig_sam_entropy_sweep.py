"""Where does Theorem 4.4's ordering hold? Entropy gain over (ρ/bound, spectrum spread).

Reads ``results/sam_entropy/sweep.nc`` (``python -m sims.sam_entropy --sweep``); computes it when
missing. One heatmap per model: truncated/full ODEs × first-order/exact SAM. Grey hatched
cells: some feature is never learned (entropy undefined); crosses: the ordering fails. The
drawing lives in :mod:`sims.sam_entropy_plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from figures import FigureSpec, figure_main
from sims.sam_entropy_plots import plot_sweep

FIGURE = FigureSpec(
    name="sam_entropy_sweep",
    title="Theorem 4.4 ordering over (ρ, spectrum spread), 4 ODE models",
    paper_ref="main paper Thm 4.4 (beyond the paper)",
    result_file="sam_entropy/sweep.nc",
    producer="python -m sims.sam_entropy --sweep --out results/sam_entropy",
)


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved sweep, computing it (smaller grid when ``quick``) when missing."""
    import numpy as np

    from sims.runtime.io import provenance, read_netcdf, write_netcdf
    from sims.sam_entropy import SweepConfig, sweep

    src = Path(results_dir) / FIGURE.result_file
    if quick:
        src = src.with_name("sweep_quick.nc")
    if recompute or not src.exists():
        cfg = SweepConfig()
        if quick:
            cfg = SweepConfig(
                spreads=(2.0, 20.0, 200.0), rho_fractions=tuple(np.arange(1, 22) / 10)
            )
        write_netcdf(src, sweep(cfg, progress=False), meta=provenance(cfg))
    out = Path(out_dir) / ("sam_entropy_sweep_quick.png" if quick else "sam_entropy_sweep.png")
    plot_sweep(read_netcdf(src), out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
