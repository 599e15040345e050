"""Main paper Figure 5 analog: entropy of normalized learning times in a 3-feature toy.

Figure 5 of the paper is a cartoon: three features, each with an early-training phase of length
``t_i``; more even phases mean a normalized profile closer to (1/3, 1/3, 1/3) and higher entropy.
Here the phases are the actual learning times of the truncated GD and SAM ODEs (eqs. 9–10) for a
3-eigenvalue spectrum, with ε not small against the endpoints so that the difference is visible
(at the main job's default ε = 0.01 it is ~1e-3 nats).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="entropy_toy",
    title="Entropy of normalized learning times, 3-feature toy (GD vs SAM)",
    paper_ref="main paper Fig. 5",
    result_file="fig05_entropy_toy/toy.nc",
    producer="python -m figures.fig05_entropy_toy --recompute",
)

#: Toy configuration: 3 features, ε = 0.2, c = 0.25, ρ at 95% of the bound (√3/2)ε.
TOY = {"eigenvalues": (0.5, 0.3, 0.2), "eps": 0.2, "c": 0.25, "rho_fraction": 0.95}


def compute():
    """Learning times of the toy under GD and SAM (closed forms, cross-checked)."""
    from sims.sam_entropy import SamEntropyConfig, check_theorem, rho_bound

    cfg = SamEntropyConfig(
        eigenvalues=TOY["eigenvalues"], eps=TOY["eps"], c=TOY["c"],
        rhos=(TOY["rho_fraction"] * rho_bound(TOY["eps"]),),
    )  # fmt: skip
    return cfg, check_theorem(cfg)


def plot(ds, path: str | Path | None = None):
    """Timelines of the early-training phases (top: GD, bottom: SAM) and the profiles."""
    fig, axes = plt.subplots(
        2, 2, figsize=(11, 4.6), gridspec_kw={"width_ratios": [3, 1.3]}, constrained_layout=True
    )
    rho = float(ds.rho.values[-1])
    rows = [
        ("GD", ds.t_gd.values, ds.p_gd.values, float(ds.entropy_gd)),
        (f"SAM (ρ={rho:.3g})", ds.t_sam.sel(rho=rho).values, ds.p_sam.sel(rho=rho).values,
         float(ds.entropy_sam.sel(rho=rho))),
    ]  # fmt: skip
    for (name, t, p, h), (ax, axp) in zip(rows, axes, strict=True):
        start = 0.0
        for i, (ti, pi) in enumerate(zip(t / t.sum(), p, strict=True)):
            ax.barh(0, ti, left=start, color="tab:green", alpha=0.35 + 0.2 * i, edgecolor="k")
            ax.text(start + ti / 2, 0, f"t{i + 1}\n{pi:.2f}", ha="center", va="center", fontsize=9)
            start += ti
        ax.set(xlim=(0, 1), yticks=[], xlabel="share of early-training time",
               title=f"{name}: Entropy = {h:.4f} (uniform: log 3 = {np.log(3):.4f})")  # fmt: skip
        axp.bar(ds.feature.values, p, color="tab:green")
        axp.axhline(1 / 3, color="gray", ls=":")
        axp.set(ylim=(0, 1), xticks=ds.feature.values, xlabel=r"feature $i$",
                ylabel=r"$p_i = t_i / \sum_j t_j$", title="normalized times (dotted: 1/3)")
    if path is not None:
        save_figure(fig, path, dpi=130)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved toy result, computing it when missing."""
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    # the toy takes 0.1 s: --quick computes the same thing, under its own file names
    suffix = "_quick" if quick else ""
    src = Path(results_dir) / FIGURE.result_file
    src = src.with_name(f"{src.stem}{suffix}.nc")
    if recompute or not src.exists():
        cfg, ds = compute()
        write_netcdf(src, ds, meta=provenance(cfg))
    out = Path(out_dir) / f"fig05_entropy_toy{suffix}.png"
    plot(read_netcdf(src), out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
