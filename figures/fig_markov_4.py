"""Seed 004 Figure 4: minimal model, excess loss for init scales u (left) and ratios m (right).

Claims (App. C.1): smaller u gives slower incremental learning and u = 0 learns one pattern only
(identical heads never separate); m = 1 gives two stages, m = 1.3 and 1.5 three.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._markov import scaled_make  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig4",
    title="Minimal model: excess loss vs init scale u and hierarchy ratio m",
    paper_ref="seed004 Figure 4, App. C.1",
    result_file="markov/fig4_sweeps.nc",
    producer="python -m figures.fig_markov_4 --recompute",
    extra="torch",
)

U_VALUES = {"quick": (0.0,), "cpu": (0.0, 0.01, 0.1, 1.0), "paper": (0.0, 0.001, 0.01, 0.1, 1.0)}
M_VALUES = {"quick": (1.0, 1.7), "cpu": (1.0, 1.3, 1.5, 1.7), "paper": (1.0, 1.3, 1.5, 1.7)}


def compute(scale: str):
    """One run per u (m = 1.7) and per m (u = 1); stacked on a ``run`` dimension."""
    import xarray as xr

    from sims.markov import experiments as X
    from sims.markov.train import detect_stages, train

    runs, names = [], []
    for u in U_VALUES[scale]:
        runs.append(train(X.minimal_exp(scale, init_scale=u)).ds)
        names.append(f"u={u:g}")
    for m in M_VALUES[scale]:
        runs.append(train(X.minimal_exp(scale, m=m)).ds)
        names.append(f"m={m:g}")
    keep = ["excess_loss", "group_mass", "kl_restricted"]
    ds = xr.concat([r[keep] for r in runs], dim="run", coords="minimal", compat="override")
    rep = [detect_stages(r) for r in runs]
    ds["pattern_time"] = (("run", "group"), np.stack([r.group_times for r in rep]))
    ds["n_stages"] = (("run",), [r.n_stages for r in rep])
    ds["n_patterns"] = (("run",), [r.n_patterns for r in rep])
    ds = ds.assign_coords(run=names)
    ds.attrs = {"scale": scale}
    return ds


def plot(ds, out: Path, scale: str) -> list[Path]:
    """Two panels of excess-loss curves."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for name in ds.run.values:
        ax = axes[0] if name.startswith("u=") else axes[1]
        r = ds.sel(run=name)
        ax.plot(r.step, r.excess_loss, label=f"{name} ({int(r.n_stages)} stages, "
                f"{int(r.n_patterns)} patterns)")  # fmt: skip
    axes[0].set(title="init scale u (m = 1.7)", xlabel="step", ylabel="excess loss", yscale="log")
    axes[1].set(title="hierarchy ratio m (u = 1)", xlabel="step", yscale="log")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle(f"Fig. 4 ({scale})")
    return [save_figure(fig, out / "markov_fig4.png", dpi=110)]


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
