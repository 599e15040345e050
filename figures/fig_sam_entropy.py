"""Theorem 4.4 at a glance: normalized learning-time profiles, entropy vs ρ, Lorenz curves.

Reads ``results/sam_entropy/sam_entropy.nc`` (written by ``python -m sims.sam_entropy``);
computes it with the default configuration when missing. Also renders the ``--sweep`` map.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from sims.entropy import lorenz_curve  # noqa: E402

FIGURE = FigureSpec(
    name="sam_entropy",
    title="Theorem 4.4: entropy of normalized GD/SAM learning times",
    paper_ref="main paper Thm 4.4 (beyond Fig. 5)",
    result_file="sam_entropy/sam_entropy.nc",
    producer="python -m sims.sam_entropy --out results/sam_entropy",
)


def plot(ds, path: str | Path | None = None):
    """Four panels: profiles p_i, Lorenz curves, entropy gain vs ρ, majorization margins."""
    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2), constrained_layout=True)
    feats = ds.feature.values
    rhos = ds.rho.values
    bound = ds.attrs["rho_bound"]
    sam = [r for r in rhos if r > 0 and bool(ds.learned_all.sel(rho=r))]
    colors = dict(zip(sam, plt.cm.viridis(np.linspace(0.1, 0.9, max(len(sam), 2))), strict=False))
    gd_ok = bool(np.all(np.isfinite(ds.t_gd.values)))

    ax = axes[0]
    if gd_ok:
        ax.plot(feats, ds.p_gd.values, "k-o", lw=2, label="GD")
    for r in sam:
        ax.plot(feats, ds.p_sam.sel(rho=r).values, "--s", color=colors[r], ms=3,
                label=f"SAM ρ={r:.3g}")  # fmt: skip
    ax.axhline(1 / len(feats), color="gray", ls=":", label="uniform")
    ax.set(xlabel="feature i (λ decreasing)", ylabel="normalized time p_i", xticks=feats,
           yscale="log", title="Normalized learning times")  # fmt: skip
    ax.legend(fontsize=7)

    ax = axes[1]
    if gd_ok:
        x, y = lorenz_curve(ds.t_gd.values)
        ax.plot(x, y, "k-o", lw=2, label="GD")
    for r in sam:
        x, y = lorenz_curve(ds.t_sam.sel(rho=r).values)
        ax.plot(x, y, "--", color=colors[r], label=f"SAM ρ={r:.3g}")
    ax.plot([0, 1], [0, 1], color="gray", ls=":", label="uniform")
    ax.set(xlabel="fraction of features (longest first)", ylabel="share of total time",
           title="Lorenz curves (GD above ⇒ GD ≻ SAM)")  # fmt: skip
    ax.legend(fontsize=7)

    ax = axes[2]
    ok = ds.learned_all.values
    ax.plot(rhos[ok] / bound, ds.entropy_gap.values[ok], "o-", color="C1",
            label=f"{ds.attrs['dynamics']} ODE")  # fmt: skip
    if "entropy_gap_truncated" in ds:
        ax.plot(rhos / bound, ds.entropy_gap_truncated.values, "x:", color="C2",
                label="truncated ODE")  # fmt: skip
    ax.axhline(float(ds.entropy_ceiling) - float(ds.entropy_gd), color="C3", ls="--",
               label="ceiling: p ∝ λ⁻² (ρ → bound)")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.axvline(1.0, color="gray", ls=":")
    ax.set(xlabel="ρ / ((√3/2) ε)", ylabel="Entropy(SAM) − Entropy(GD)  [nats]",
           title=f"Entropy gain (H_GD = {float(ds.entropy_gd):.4f}, log M = "
           f"{np.log(len(feats)):.4f})")  # fmt: skip
    ax.legend(fontsize=7)

    ax = axes[3]
    for r in sam:
        ax.plot(ds.k.values, ds.margins.sel(rho=r).values, "-o", color=colors[r], ms=3,
                label=f"ρ={r:.3g}")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel="k", ylabel="Σ_{i≤k} p↓GD − Σ_{i≤k} p↓SAM", xticks=ds.k.values,
           title="Majorization margins (all ≥ 0 ⇔ GD ≻ SAM)")  # fmt: skip
    ax.legend(fontsize=7)
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def plot_sweep(ds, path: str | Path | None = None):
    """Heatmaps of the entropy gap over (spread, ρ/bound), one per model; blank = undefined."""
    models = list(ds.model.values)
    ncol = 2
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(12, 4.2 * nrow), constrained_layout=True)
    vmax = float(np.nanmax(np.abs(ds.entropy_gap.values)))
    for ax, m in zip(np.ravel(axes), models, strict=False):
        x = ds.sel(model=m)
        gap = np.ma.masked_invalid(x.entropy_gap.values)
        im = ax.pcolormesh(x.rho_fraction.values, x.spread.values, gap, shading="nearest",
                           cmap="RdBu", norm=matplotlib.colors.SymLogNorm(1e-5, vmin=-vmax,
                                                                         vmax=vmax))  # fmt: skip
        ax.axvline(1.0, color="k", ls="--", lw=1)
        fail = (x.learned_all & ~x.ordering_holds & (x.rho_fraction > 0)).values
        yy, xx = np.nonzero(fail)
        ax.plot(x.rho_fraction.values[xx], x.spread.values[yy], "kx", ms=4, label="ordering fails")
        ax.set(yscale="log", xlabel="ρ / ((√3/2) ε)   (dashed: the paper's bound)",
               ylabel="spread λmax/λmin", title=f"H(SAM) − H(GD), {m}")  # fmt: skip
        fig.colorbar(im, ax=ax)
        if fail.any():
            ax.legend(fontsize=7, loc="lower left")
    for ax in np.ravel(axes)[len(models) :]:
        ax.set_visible(False)
    if path is not None:
        save_figure(fig, path, dpi=120)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved result, computing it (default config) when missing."""
    from sims.io import provenance, read_netcdf, write_netcdf
    from sims.sam_entropy import SamEntropyConfig, check_theorem

    src = Path(results_dir) / FIGURE.result_file
    if recompute or not src.exists():
        cfg = SamEntropyConfig(cross_check=not quick)
        write_netcdf(src, check_theorem(cfg), meta=provenance(cfg))
    ds = read_netcdf(src)
    out = Path(out_dir) / "sam_entropy.png"
    plot(ds, out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
