"""Figures of the Theorem 4.4 check (:mod:`sims.sam_entropy`), drawn from its result Datasets.

The SAM profiles differ from GD's by ~1e-4 inside the theorem's condition, so curves of both
would lie on top of each other: the panels show GD's profile and then *differences* (SAM − GD),
the entropy gain against ρ, and the majorization margins (partial-sum differences, Def. C.1).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sims.runtime.plotting import save_figure

__all__ = ["plot", "plot_sweep", "describe_config"]

_SAM_FORM = {"first_order": "first-order SAM (I+P), as in the paper", "exact": "exact SAM"}


def describe_config(ds) -> str:
    """One line naming the spectrum, ε, c, the dynamics and the SAM form of a result."""
    cfg = ds.attrs["config"]
    lam = np.asarray(ds.lam.values) if "lam" in ds else None
    if lam is not None and lam.size <= 6:
        spec = "λ = (" + ", ".join(f"{x:.3g}" for x in lam) + ")"
    elif lam is not None:
        spec = f"d = {lam.size} eigenvalues in [{lam.min():.3g}, {lam.max():.3g}]"
    else:
        spec = f"geometric spectra, d = {cfg['dim']}"
    dyn = ds.attrs.get("dynamics", "")
    dyn = {"truncated": "truncated ODEs (eqs. 9-10)", "full": "full ODEs (App. C.2)"}.get(dyn, dyn)
    form = _SAM_FORM.get(ds.attrs.get("sam_form", ""), "")
    return ", ".join(x for x in (spec, f"ε = {cfg['eps']:g}", f"c = {cfg['c']:g}", dyn, form) if x)


def plot(ds, path: str | os.PathLike | None = None):
    """Four panels: GD's profile, SAM − GD profile differences, entropy gain, majorization margins.

    Args:
        ds: a result of :func:`sims.sam_entropy.check_theorem`.
        path: where to save the figure (PNG); ``None`` returns it unsaved.

    Returns:
        The matplotlib figure (closed once saved).
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(19, 4.6), constrained_layout=True)
    feats = ds.feature.values
    rhos = ds.rho.values
    bound = ds.attrs["rho_bound"]
    sam = [r for r in rhos if r > 0 and bool(ds.learned_all.sel(rho=r))]
    colors = dict(zip(sam, plt.cm.viridis(np.linspace(0.1, 0.9, max(len(sam), 2))), strict=False))
    gd_ok = bool(np.all(np.isfinite(ds.t_gd.values)))
    many = feats.size > 12
    marker = "" if many else "o"

    ax = axes[0]
    if gd_ok:
        ax.plot(feats, ds.p_gd.values, "k-" + marker, lw=2, label="GD")
    ax.axhline(1 / len(feats), color="gray", ls=":", label="uniform profile 1/M")
    ax.set(xlabel=r"feature $i$ (eigenvalue $\lambda_i$ decreasing)",
           ylabel=r"$p_i = t_i / \sum_j t_j$", yscale="log",
           title="GD: normalized learning times")  # fmt: skip
    if not many:
        ax.set_xticks(feats)
    ax.legend(fontsize=8)

    ax = axes[1]
    for r in sam:
        ax.plot(feats, ds.p_sam.sel(rho=r).values - ds.p_gd.values, "-" + marker, ms=3,
                color=colors[r], label=f"ρ = {r:.3g} ({r / bound:.2f} of bound)")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel=r"feature $i$", ylabel=r"$p_i^{\mathrm{SAM}} - p_i^{\mathrm{GD}}$",
           title="SAM − GD (> 0: a larger share of the total time)")  # fmt: skip
    if not many:
        ax.set_xticks(feats)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    if sam:
        ax.legend(fontsize=7, title="SAM radius", title_fontsize=7)

    ax = axes[2]
    ok = ds.learned_all.values
    ax.plot(rhos[ok] / bound, ds.entropy_gap.values[ok], "o-", color="C1",
            label=f"{ds.attrs['dynamics']} ODE")  # fmt: skip
    if "entropy_gap_truncated" in ds:
        ax.plot(rhos / bound, ds.entropy_gap_truncated.values, "x:", color="C2",
                label="truncated ODE (eq. 9)")  # fmt: skip
    ax.axhline(float(ds.entropy_ceiling) - float(ds.entropy_gd), color="C3", ls="--",
               label=r"ceiling: $p \propto \lambda^{-2}$ as $\rho \to$ bound")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.axvline(1.0, color="gray", ls=":", label=r"bound $\rho = (\sqrt{3}/2)\,\varepsilon$")
    ax.set(xlabel=r"$\rho \,/\, ((\sqrt{3}/2)\,\varepsilon)$",
           ylabel=r"$H(t^{\mathrm{SAM}}) - H(t^{\mathrm{GD}})$  [nats]",
           title=f"Entropy gain ($H_{{\\mathrm{{GD}}}}$ = {float(ds.entropy_gd):.4f}, "
                 f"$\\log M$ = {np.log(len(feats)):.4f})")  # fmt: skip
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    ax.legend(fontsize=7)

    ax = axes[3]
    for r in sam:
        ax.plot(ds.k.values, ds.margins.sel(rho=r).values, "-" + marker, color=colors[r], ms=3,
                label=f"ρ = {r:.3g}")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set(xlabel=r"$k$ (number of slowest features)",
           ylabel=r"$\sum_{i \leq k} p^{\downarrow}_{\mathrm{GD},i}"
                  r" - \sum_{i \leq k} p^{\downarrow}_{\mathrm{SAM},i}$",
           title="Majorization margins (all ≥ 0 ⇔ GD ≻ SAM)")  # fmt: skip
    if not many:
        ax.set_xticks(ds.k.values)
    ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    if sam:
        ax.legend(fontsize=7)
    fig.suptitle(f"Theorem 4.4 (main paper §4.3): do SAM's learning times spread more evenly "
                 f"than GD's?  {describe_config(ds)}", fontsize=10)  # fmt: skip
    if path is not None:
        save_figure(fig, path)
    return fig


def plot_sweep(ds, path: str | os.PathLike | None = None):
    """Heatmaps of the entropy gain over (ρ/bound, spread), one per ODE model.

    Grey hatched cells are undefined (some feature is never learned, so the entropy of the times
    is undefined); crosses mark cells where the ordering fails. The colour scale is symmetric
    log so that both the ~1e-4 gains inside the condition and the larger ones outside show.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import SymLogNorm
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    models = list(ds.model.values)
    ncol = 2
    nrow = -(-len(models) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(12.5, 4.4 * nrow + 0.6), constrained_layout=True)
    finite = np.abs(ds.entropy_gap.values[np.isfinite(ds.entropy_gap.values)])
    vmax = float(finite.max()) if finite.size else 1.0
    handles = [
        Patch(facecolor="0.8", hatch="///", edgecolor="0.5",
              label="undefined: a feature is never learned"),  # fmt: skip
        Line2D([], [], color="k", marker="x", ls="", label="ordering fails: H(SAM) ≤ H(GD)"),
        Line2D([], [], color="k", ls="--", label="the paper's bound ρ = (√3/2)ε"),
    ]
    for ax, m in zip(np.ravel(axes), models, strict=False):
        x = ds.sel(model=m)
        gap = np.ma.masked_invalid(x.entropy_gap.values)
        ax.set_facecolor("0.8")  # shows through the masked (undefined) cells
        ax.patch.set_hatch("///")
        ax.patch.set_edgecolor("0.5")
        im = ax.pcolormesh(x.rho_fraction.values, x.spread.values, gap, shading="nearest",
                           cmap="RdBu", norm=SymLogNorm(1e-5, vmin=-vmax, vmax=vmax))  # fmt: skip
        ax.axvline(1.0, color="k", ls="--", lw=1)
        fail = (x.learned_all & ~x.ordering_holds & (x.rho_fraction > 0)).values
        yy, xx = np.nonzero(fail)
        ax.plot(x.rho_fraction.values[xx], x.spread.values[yy], "kx", ms=4)
        dyn, form = str(m).split("/")
        ax.set(yscale="log", xlabel=r"$\rho \,/\, ((\sqrt{3}/2)\,\varepsilon)$",
               ylabel=r"spread $\lambda_{\max}/\lambda_{\min}$",
               title=f"{dyn} ODE, {_SAM_FORM.get(form, form)}")  # fmt: skip
        fig.colorbar(im, ax=ax, label="H(SAM) − H(GD)  [nats]")
    for ax in np.ravel(axes)[len(models) :]:
        ax.set_visible(False)
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    fig.suptitle(f"Where does Theorem 4.4's entropy ordering hold?  {describe_config(ds)}",
                 fontsize=10)  # fmt: skip
    if path is not None:
        save_figure(fig, Path(path))
    return fig
