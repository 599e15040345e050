"""Theorem 4.4 at a glance: GD's time profile, SAM − GD differences, entropy gain, margins.

Reads ``results/sam_entropy/sam_entropy.nc`` (written by ``python -m sims.sam_entropy``);
computes it with the default configuration when missing. The drawing lives beside the
computation, in :mod:`sims.sam_entropy_plots`; this module only registers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from figures import FigureSpec, figure_main
from sims.sam_entropy_plots import plot

FIGURE = FigureSpec(
    name="sam_entropy",
    title="Theorem 4.4: entropy of normalized GD/SAM learning times",
    paper_ref="main paper Thm 4.4 (beyond Fig. 5)",
    result_file="sam_entropy/sam_entropy.nc",
    producer="python -m sims.sam_entropy --out results/sam_entropy",
)


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved result, computing it (default config) when missing."""
    from sims.runtime.io import provenance, read_netcdf, write_netcdf
    from sims.sam_entropy import SamEntropyConfig, check_theorem

    src = Path(results_dir) / FIGURE.result_file
    if quick:
        src = src.with_name("sam_entropy_quick.nc")
    if recompute or not src.exists():
        cfg = SamEntropyConfig(cross_check=not quick)
        write_netcdf(src, check_theorem(cfg), meta=provenance(cfg))
    ds = read_netcdf(src)
    out = Path(out_dir) / ("sam_entropy_quick.png" if quick else "sam_entropy.png")
    plot(ds, out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
