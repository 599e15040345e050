"""Seed 004 Figure 4: minimal model, excess loss for init scales u and hierarchy ratios m.

Claims (App. C.1): smaller u gives slower incremental learning and u = 0 learns one pattern only
(identical heads never separate); m = 1 gives two stages ("one, then two together"), m = 1.3 and
1.5 three (intertwined at 1.3). The m sweep runs several seeds (each seed draws its own chain,
data and init) and the stage count of every run is shown as a band over the detection thresholds
(:func:`sims.markov.train.stage_band`), since the count depends on them; the pattern times show
the order in which the groups are learned.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import plural  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig4",
    title="Minimal model: excess loss vs init scale u and hierarchy ratio m (seeds, stage bands)",
    paper_ref="seed004 Figure 4, App. C.1",
    result_file="markov/fig4_sweeps.nc",
    producer="python -m figures.fig_markov_4 --recompute",
    extra="torch",
)

U_VALUES = {"quick": (0.0,), "cpu": (0.0, 0.01, 0.1, 1.0), "paper": (0.0, 0.001, 0.01, 0.1, 1.0)}
M_VALUES = {"quick": (1.0, 1.7), "cpu": (1.0, 1.3, 1.5, 1.7), "paper": (1.0, 1.3, 1.5, 1.7)}
M_SEEDS = {"quick": (0, 1), "cpu": (0, 1, 2), "paper": (0, 1, 2)}


def run_one(job: tuple[str, str, float, int]):
    """One ``(scale, "u" | "m", value, seed)`` run: curves, pattern times and stage band."""
    from sims.markov import experiments as X
    from sims.markov.train import detect_stages, stage_band, train

    scale, param, value, seed = job
    kw = {"init_scale": value} if param == "u" else {"m": value}
    exp = X.reseed(X.sweep_exp(scale, best_contexts=0, **kw), seed)
    ds = train(exp, device=X.device_from_env()).ds
    rep = detect_stages(ds)
    band = stage_band(ds)
    out = ds[["excess_loss"]]
    out["pattern_time"] = ("group", rep.group_times)
    out["n_stages"] = rep.n_stages
    out["n_stages_min"] = band.attrs["min"]
    out["n_stages_max"] = band.attrs["max"]
    out["n_patterns"] = rep.n_patterns
    return out.assign_coords(group=np.arange(1, len(rep.group_times) + 1))


def compute(scale: str, store=None):
    """One seed per u (m = 1.7), several seeds per m (u = 1); stacked on a ``run`` dimension.

    ``store``: a :class:`sims.runtime.parallel.JobStore` keeping finished runs (resume after a
        crash).
    """
    import xarray as xr

    from sims.runtime.parallel import pmap

    jobs = [(scale, "u", u, 0) for u in U_VALUES[scale]]
    jobs += [(scale, "m", m, s) for m in M_VALUES[scale] for s in M_SEEDS[scale]]
    workers = 1 if scale in ("quick", "paper") else None
    runs = pmap(run_one, jobs, workers=workers, desc="Fig. 4 runs", store=store)
    ds = xr.concat(runs, dim="run", coords="minimal", compat="override", join="outer")
    ds = ds.assign_coords(param=("run", [j[1] for j in jobs]),
                          value=("run", [float(j[2]) for j in jobs]),
                          seed=("run", [j[3] for j in jobs]))  # fmt: skip
    ds.attrs = {"scale": scale, "config_of_first_run": runs[0].attrs["config"]}
    return ds


def order_text(ds, m: float) -> str:
    """Per seed, the order in which the groups are learned at ratio ``m``, e.g. ``2,3>1``."""
    out = []
    for i in np.nonzero((ds.param.values == "m") & np.isclose(ds.value.values, m))[0]:
        t = ds.pattern_time.values[i]
        fin = np.isfinite(t)
        if not fin.any():
            out.append("none")
            continue
        steps = sorted(set(t[fin]))
        out.append(">".join(",".join(str(g + 1) for g in np.nonzero(t == s)[0]) for s in steps))
    return "; ".join(out)


def plot(ds, scale: str) -> dict:
    """Excess-loss curves (u, m), stage counts with bands, pattern times per group."""
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.6), constrained_layout=True)
    is_u = ds.param.values == "u"
    for i in np.nonzero(is_u)[0]:
        r = ds.isel(run=i)
        axes[0].plot(r.step, r.excess_loss, label=f"u = {float(r.value):g} "
                     f"({plural(int(r.n_patterns), 'pattern')} learned)")  # fmt: skip
    ms = sorted(set(ds.value.values[~is_u].tolist()))
    for k, m in enumerate(ms):
        idx = np.nonzero(~is_u & np.isclose(ds.value.values, m))[0]
        for j, i in enumerate(idx):
            r = ds.isel(run=i)
            axes[1].plot(r.step, r.excess_loss, color=f"C{k}", lw=1.5 if j == 0 else 0.7,
                         alpha=1 if j == 0 else 0.6,
                         label=f"m = {m:g} ({len(idx)} seeds)" if j == 0 else None)  # fmt: skip
            lo, hi, n = int(r.n_stages_min), int(r.n_stages_max), int(r.n_stages)
            x = k + 0.12 * (j - (len(idx) - 1) / 2)
            axes[2].vlines(x, lo - 0.1, hi + 0.1, color=f"C{k}", lw=6, alpha=0.3,
                           label="band over thresholds" if k == j == 0 else None)  # fmt: skip
            axes[2].plot(x, n, "o", color=f"C{k}",
                         label="default detection" if k == j == 0 else None)  # fmt: skip
            t = r.pattern_time.values
            for g in range(len(t)):
                if np.isfinite(t[g]):
                    axes[3].plot(x, t[g], ["o", "s", "^", "D"][g % 4], color=f"C{k}",
                                 mfc="none" if g else f"C{k}",
                                 label=f"group {g + 1}" if k == j == 0 else None)  # fmt: skip
    axes[0].set(title="init scale u (m = 1.7, seed 0)", xlabel="training step",
                ylabel="excess loss (nats)", yscale="log")  # fmt: skip
    axes[1].set(title="hierarchy ratio m (u = 1); thin: other seeds", xlabel="training step",
                ylabel="excess loss (nats)", yscale="log")  # fmt: skip
    for ax in axes[2:]:
        ax.set_xticks(range(len(ms)), [f"m = {m:g}" for m in ms])
    axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[2].set(ylabel="number of stages", ylim=(-0.3, 3.5),
                title="stages per seed (dot: threshold 0.5, ratio 1.3)")  # fmt: skip
    axes[3].set(ylabel="step at which a head holds >= 0.5 of the group", yscale="log",
                title="when each group is learned (per seed)")  # fmt: skip
    if 1.0 in ms:
        axes[3].text(0.02, 0.02, f"m = 1 order: {order_text(ds, 1.0)}", fontsize=7,
                     transform=axes[3].transAxes)  # fmt: skip
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(f"Fig. 4 ({scale} scale): minimal model, excess loss and stages")
    return {"markov_fig4": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_markov_4 [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
