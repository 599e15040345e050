"""Seed 004 Figure 5: dataset size. Fewer stages with fewer training sequences (App. C.2).

Left: validation (excess) loss curves per size with the best step marked; right: KL to the
restricted-context models (c = one, two, all groups) per size. Full model at the paper scale; the
minimal model (restricted contexts c = 2, 4, 6) at the quick/CPU scales to stay within minutes.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov import experiments as X  # noqa: E402
from sims.markov.train import detect_stages  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig5",
    title="Dataset size: fewer stages with less data; KL to restricted-context models",
    paper_ref="seed004 Figure 5, App. C.2",
    result_file="markov/fig5_datasize.nc",
    producer="python -m figures.fig_markov_5 --recompute",
)

SIZES = {"quick": (32, 64), "cpu": (500, 1000, 3000, 9000), "paper": (1000, 2000, 4000, 9000)}


def compute(scale: str):
    """Per size: restricted-context models then the unrestricted one (``size`` dimension)."""
    import xarray as xr

    out = []
    for n in SIZES[scale]:
        bs = min(n, 32 if scale == "quick" else (500 if scale == "cpu" else 3000))
        exp = (X.full_exp(scale, n_train=n, batch_size=bs) if scale == "paper"
               else X.minimal_exp(scale, n_train=n, batch_size=bs))  # fmt: skip
        ds = X.train_with_references(exp)
        ds = ds[["excess_loss", "kl_reference", "kl_restricted", "group_mass"]]
        ds = ds.assign_coords(reference=[f"c{i + 1}" for i in range(ds.sizes["reference"])])
        rep = detect_stages(ds)
        ds["n_stages"] = rep.n_stages
        ds["best_step"] = int(ds.step[int(ds.excess_loss.argmin())])
        out.append(ds)
    ds = xr.concat(out, dim="size", coords="minimal", compat="override")
    ds = ds.assign_coords(size=list(SIZES[scale]))
    ds.attrs = {"scale": scale}
    return ds


def plot(ds, out: Path, scale: str) -> list[Path]:
    """Loss curves per size (left), KL to restricted-context models per size (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    colors = plt.cm.viridis(np.linspace(0, 0.9, ds.sizes["size"]))
    for col, n in zip(colors, ds["size"].values, strict=True):
        r = ds.sel(size=n)
        axes[0].plot(r.step, r.excess_loss, color=col, label=f"n={n} ({int(r.n_stages)} stages)")
        axes[0].axvline(int(r.best_step), color=col, ls="--", lw=0.7)
        for j, ls in zip(range(r.sizes["reference"]), ["-", "--", ":"], strict=False):
            axes[1].plot(r.step, r.kl_reference[:, j], color=col, ls=ls)
    axes[0].set(xlabel="step", ylabel="excess (validation) loss", yscale="log")
    axes[1].set(
        xlabel="step",
        ylabel="KL(restricted-context || model)",
        yscale="log",
        title="context: one group -, two --, all :",
    )
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Fig. 5 ({scale})")
    return [save_figure(fig, out / "markov_fig5.png", dpi=110)]


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
