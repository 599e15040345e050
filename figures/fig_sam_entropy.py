"""Theorem 4.4 at a glance: GD's time profile, SAM − GD differences, entropy gain, margins.

Reads ``results/sam_entropy/sam_entropy.nc`` (written by ``python -m sims.sam_entropy``);
computes it with the default configuration when missing. The drawing lives beside the
computation, in :mod:`sims.sam_entropy_plots`; this module only registers it.
"""

from __future__ import annotations

import sys
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
    note = other_parameters_note(ds, src)
    if note:
        print(note, file=sys.stderr)
    out = Path(out_dir) / ("sam_entropy_quick.png" if quick else "sam_entropy.png")
    plot(ds, out)
    return [out]


def other_parameters_note(ds, src) -> str:
    """One line when ``ds`` was made with other parameters than the default run's, else ``""``.

    (An exploratory run writes elsewhere by default, but ``--out results/sam_entropy`` can still
    put one here.)
    """
    import dataclasses

    import numpy as np

    from sims.sam_entropy import SamEntropyConfig

    want = dataclasses.asdict(SamEntropyConfig())
    got = (ds.attrs.get("meta") or {}).get("config") or {}
    diff = []
    for k in ("eigenvalues", "rhos", "eps", "c", "tau", "dynamics", "n_context", "sam_form"):
        if k not in got:
            continue
        a, b = got[k], want[k]
        same = (a == b) if isinstance(b, str) or a is None or b is None else (
            np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=1e-12, atol=0))
        if not same:
            diff.append(f"{k}={a}")
    if not diff:
        return ""
    return (f"sam_entropy: {src} was made with other parameters than the default run "
            f"({'; '.join(diff)}); the figure draws that run (`python -m sims.sam_entropy` "
            "rewrites the default)")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
