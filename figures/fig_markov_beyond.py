"""Beyond the paper: stage uniformity (entropy of learning times) under SAM and upsampling.

Left: stage times of the tensor flow for discrete GD and SAM(rho), several seeds; middle: the
entropy of the sum-normalised stage times (main paper Eq. 11) vs rho; right: when the minimal
transformer learns group 3 under AdamW, SAM(AdamW), hard-cluster upsampling and random upsampling
(same count; k-means k = 2 and 4 on the loss trajectories as in the paper, and on the trajectories
minus each sequence's Bayes loss), per seed; far right: the paired entropy gain over AdamW. Reads
``results/markov/beyond_uniformity.nc``.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402

FIGURE = FigureSpec(
    name="markov_beyond",
    title="Does SAM or upsampling make the Markov stages more uniform?",
    paper_ref="beyond the paper (seed004 x main paper Eq. 11)",
    result_file="markov/beyond_uniformity.nc",
    producer="python -m figures.fig_markov_beyond --recompute",
    extra="torch",
)


SELECT_ON = ("loss", "excess")  # the paper's selection, and the Bayes-loss-corrected oracle


def compute(scale: str, store=None):
    """ODE GD/SAM sweep + minimal-model AdamW/SAM/upsampling runs over seeds, merged.

    ``store``: a :class:`sims.runtime.parallel.JobStore` keeping finished seeds (resume after a
        crash).
    """
    import xarray as xr

    from sims.markov import experiments as X
    from sims.markov.beyond import minimal_uniformity_seeds, ode_uniformity

    if scale == "quick":
        ode = ode_uniformity(rhos=(0.0, 0.1), seeds=[0], lr=0.2, steps=2000, T=8,
                             init_std=1e-3, record_every=10, workers=1)  # fmt: skip
        base = X.sweep_exp(scale, best_contexts=0)  # no KL floors needed here
        mm = minimal_uniformity_seeds(base, seeds=[0, 1], n_clusters=(2, 4),
                                      cluster_on=SELECT_ON, workers=1, store=store)  # fmt: skip
    else:
        ode = ode_uniformity()
        gpu = scale == "paper"  # one device: runs in sequence
        base = X.sweep_exp(scale, best_contexts=0)
        mm = minimal_uniformity_seeds(base, seeds=range(3 if gpu else 6),
                                      sam_rho=(0.05, 0.2), n_clusters=(2, 4),
                                      cluster_on=SELECT_ON, workers=1 if gpu else None,
                                      store=store, device=X.device_from_env())  # fmt: skip
    ode = ode.rename({k: f"ode_{k}" for k in ode.data_vars})
    mm = mm.rename({k: f"mm_{k}" for k in mm.data_vars}).rename(seed="mm_seed")
    ds = xr.merge([ode, mm], combine_attrs="drop")
    ds.attrs = {"scale": scale, **{f"mm_{k}": v for k, v in mm.attrs.items()}}
    return ds


def plot(ds, scale: str) -> dict:
    """Four panels: ODE stage times, ODE entropy vs rho, minimal-model pattern times, gains."""
    from figures.report.verdicts import t_interval

    fig, axes = plt.subplots(1, 4, figsize=(20, 5.2), constrained_layout=True)
    for i, r in enumerate(ds.rho.values):
        st = ds.ode_stage_time.sel(rho=r).values  # (seed, stage)
        for s in range(st.shape[0]):
            axes[0].plot([1, 2, 3], st[s], "o-", color=f"C{i}", alpha=0.6,
                         label=(f"SAM, $\\rho$ = {r:g}" if r > 0 else "GD")
                         if s == 0 else None)  # fmt: skip
    axes[0].set(yscale="log", xlabel="stage", ylabel="time (step x learning rate)",
                title="tensor flow: stage times per seed", xticks=[1, 2, 3])  # fmt: skip
    axes[0].legend(fontsize=7)
    names = {"ode_entropy_times": "entropy of the stage times",
             "ode_entropy_durations": "entropy of the stage durations"}
    for var, mk in (("ode_entropy_times", "o-"), ("ode_entropy_durations", "s--")):
        m, sd = ds[var].mean("seed"), ds[var].std("seed")
        axes[1].errorbar(ds.rho.values, m, sd, fmt=mk, label=names[var], capsize=3)
    axes[1].set(xlabel="SAM radius $\\rho$ (0 = GD)", ylabel="entropy (nats)",
                title="uniformity (main paper Eq. 11); bars: sd over seeds")  # fmt: skip
    axes[1].legend(fontsize=7)
    runs = [str(r) for r in ds.run.values]
    n_seed = ds.sizes["mm_seed"]
    for i, run in enumerate(runs):
        for ax, var in ((axes[2], ds.mm_pattern_time.sel(group=3)), (axes[3], ds.mm_gain_times)):
            v = var.sel(run=run).values  # (seed,)
            ax.plot(np.full(n_seed, i), v, "o", color=f"C{i % 10}", alpha=0.6)
            if np.isfinite(v).any():
                ax.plot([i - 0.3, i + 0.3], [np.nanmean(v)] * 2, color=f"C{i % 10}", lw=2)
            if ax is axes[3] and np.isfinite(v).sum() > 1:  # the page's paired t-interval
                m, lo, hi, _ = t_interval(v[np.isfinite(v)])
                ax.plot([i + 0.22, i + 0.22], [lo, hi], color="k", lw=1)
    for ax in axes[2:]:
        ax.set_xticks(range(len(runs)), runs, rotation=35, ha="right", fontsize=7)
    t3 = ds.mm_pattern_time.sel(group=3).values
    axes[2].set(yscale="log" if np.isfinite(t3).any() else "linear", ylabel="training step",
                title=f"minimal model: group 3 learned at ({n_seed} seeds; bar: mean)")
    axes[2].text(0.01, 0.01, "runs missing a dot never learned group 3", fontsize=7,
                 transform=axes[2].transAxes)  # fmt: skip
    axes[3].axhline(0, color="k", lw=0.7)
    axes[3].set(ylabel="entropy gain over AdamW\n(same seed, nats)",
                title="paired gain (bar: mean; line: 95 % t-interval)")  # fmt: skip
    fig.suptitle(f"Stage uniformity under SAM / upsampling ({scale} scale)")
    return {"markov_beyond": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_markov_beyond [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
