"""Seed 004 Figure 5: dataset size. Fewer stages with fewer training sequences (App. C.2).

Left: validation (excess) loss curves per size (first seed) with the best step marked; middle:
KL to the restricted models (context = one, two, all groups) per size; right: the number of
learned stages at the end and at the best (early-stopping) step, per size and seed.

* paper scale: the full model, KL to trained restricted-context models (c = 4, 8, 12), as in
  the paper; one seed (one GPU, runs in sequence).
* CPU scale: the minimal model (:func:`sims.markov.experiments.sweep_exp`: d = 20, lr 2e-2, 4000
  steps), two seeds, and KL to the restricted *ground truths* f_{A*_1:i} (Eq. 3) instead of
  trained restricted-context models, which would cost three more runs per size; the runs go in
  parallel over the cores (:func:`sims.parallel.pmap`). About 5 min on 2 cores.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig5",
    title="Dataset size: fewer stages with less data; KL to restricted models",
    paper_ref="seed004 Figure 5, App. C.2",
    result_file="markov/fig5_datasize.nc",
    producer="python -m figures.fig_markov_5 --recompute",
    extra="torch",
)

SIZES = {"quick": (32, 64), "cpu": (500, 1500, 4000, 9000), "paper": (1000, 2000, 4000, 9000)}
SEEDS = {"quick": (0,), "cpu": (0, 1), "paper": (0,)}
KL_TO = {
    "paper": "trained restricted-context models (c = one, two, all groups)",
    "cpu": "restricted ground truths f_{A*_1:i} (Eq. 3)",
    "quick": "restricted ground truths f_{A*_1:i} (Eq. 3)",
}


def run_size(job: tuple[str, int, int]):
    """One (scale, size, seed) run: curves plus stage counts at the end and at the best step."""
    from sims.markov import experiments as X
    from sims.markov.train import detect_stages, stage_band, train

    scale, n, seed = job
    if scale == "paper":
        exp = X.reseed(X.full_exp(scale, n_train=n, batch_size=min(n, 3000)), seed)
        ds = X.train_with_references(exp, device=X.device_from_env())
        kl = ds["kl_reference"]
    else:
        bs = min(n, 32 if scale == "quick" else 250)
        exp = X.reseed(X.sweep_exp(scale, n_train=n, batch_size=bs), seed)
        ds = train(exp, device=X.device_from_env()).ds
        kl = ds["kl_restricted"]
    rep = detect_stages(ds)
    band = stage_band(ds)
    i_best = int(np.argmin(ds.excess_loss.values))
    best_step = int(ds.step[i_best])
    kl = kl.rename({kl.dims[1]: "reference"}).assign_coords(
        reference=[f"c{i + 1}" for i in range(kl.shape[1])]
    )
    out = ds[["excess_loss"]].assign(kl_context=kl)
    if "kl_floor" in ds and scale != "paper":  # floors of KL to f_{A*_1:i} (issue 16)
        out["kl_floor"] = ("reference", ds["kl_floor"].values)
    out["n_stages"] = rep.n_stages
    out["n_stages_min"] = band.attrs["min"]
    out["n_stages_max"] = band.attrs["max"]
    out["n_stages_at_best"] = int(np.isfinite(rep.group_times[rep.group_times <= best_step]).sum())
    out["best_step"] = best_step
    out["best_excess"] = float(ds.excess_loss[i_best])
    out["closest_at_best"] = int(np.argmin(kl.values[i_best])) + 1  # nearest restricted model
    return out


def compute(scale: str, store=None):
    """All (size, seed) runs, in parallel on CPU, as one dataset with ``size`` and ``seed``.

    ``store``: a :class:`sims.parallel.JobStore` keeping finished runs (resume after a crash).
    """
    import xarray as xr

    from sims.parallel import pmap

    jobs = [(scale, n, s) for n in SIZES[scale] for s in SEEDS[scale]]
    workers = 1 if scale in ("quick", "paper") else None
    runs = pmap(run_size, jobs, workers=workers, desc="Fig. 5 (size, seed) runs", store=store)
    ns = len(SEEDS[scale])
    rows = [
        xr.concat(runs[i * ns : (i + 1) * ns], dim="seed", coords="minimal", compat="override")
        for i in range(len(SIZES[scale]))
    ]
    ds = xr.concat(rows, dim="size", coords="minimal", compat="override")
    ds = ds.assign_coords(size=list(SIZES[scale]), seed=list(SEEDS[scale]))
    ds.attrs = {
        "scale": scale,
        "kl_to": KL_TO[scale],
        "config_of_first_run": runs[0].attrs["config"],  # the others differ in n_train, seeds
        "run_seconds": [float(r.attrs["seconds"]) for r in runs],
    }
    return ds


def plot(ds, scale: str) -> dict:
    """Loss curves and KL per size (first seed); stage counts (with bands) per size and seed."""
    from matplotlib.ticker import MaxNLocator

    from sims.markov.plotting import GROUP_STYLES, plural

    fig, axes = plt.subplots(1, 3, figsize=(17, 4.6), constrained_layout=True)
    colors = plt.cm.viridis(np.linspace(0, 0.9, ds.sizes["size"]))
    s0 = ds.seed.values[0]
    for col, n in zip(colors, ds["size"].values, strict=True):
        r = ds.sel(size=n, seed=s0)
        ns, nb = int(r.n_stages), int(r.n_stages_at_best)
        axes[0].plot(r.step, r.excess_loss, color=col,
                     label=f"n = {n}: {plural(ns, 'stage')}, {nb} at the best step")
        axes[0].axvline(int(r.best_step), color=col, ls="--", lw=0.7)
        for j in range(r.sizes["reference"]):
            axes[1].plot(r.step, r.kl_context[:, j], color=col, ls=GROUP_STYLES[j % 4])
            if "kl_floor" in r and j < r.sizes["reference"] - 1:
                axes[1].axhline(float(r.kl_floor[j]), color=col, ls=GROUP_STYLES[j % 4], lw=0.5,
                                alpha=0.6)  # fmt: skip
        axes[1].axvline(int(r.best_step), color=col, ls="--", lw=0.5)
    axes[0].set(xlabel="training step", ylabel="excess (validation) loss, nats", yscale="log",
                title=f"seed {s0}; dashed: step of the best validation loss")  # fmt: skip
    from matplotlib.lines import Line2D

    what = ("restricted-context model" if scale == "paper"
            else r"restricted truth $f_{A^*_{1:i}}$")  # fmt: skip
    handles = [Line2D([], [], color="k", ls=GROUP_STYLES[j % 4],
                      label=f"{what}, groups 1..{j + 1}") for j in range(ds.sizes["reference"])]
    if "kl_floor" in ds:
        handles.append(Line2D([], [], color="k", lw=0.5, label="thin horizontal: floor "
                              r"KL($f_{A^*_{1:i}}$ $\|$ $f^{\rm best}_{1:i}$)"))  # fmt: skip
    axes[1].legend(handles=handles, fontsize=7)
    axes[1].set(xlabel="training step", ylabel="KL(reference $\\|$ model), nats", yscale="log",
                title="colour: dataset size (as left)")  # fmt: skip
    axes[0].legend(fontsize=7)
    x = np.arange(ds.sizes["size"])
    kinds = (("n_stages", "o", "at the end of training"),
             ("n_stages_at_best", "s", "at the best step"))
    for k, (var, mk, lab) in enumerate(kinds):
        v = ds[var].values  # (size, seed)
        for j in range(v.shape[1]):
            xx = x + 0.15 * (k - 0.5) + 0.04 * j
            axes[2].plot(xx, v[:, j], mk, color=f"C{k}", alpha=0.8,
                         label=lab if j == 0 else None)  # fmt: skip
            if var == "n_stages" and "n_stages_min" in ds:
                axes[2].vlines(xx, ds.n_stages_min.values[:, j] - 0.1,
                               ds.n_stages_max.values[:, j] + 0.1, color=f"C{k}", lw=5,
                               alpha=0.25,
                               label="band over detection thresholds" if j == 0 else None)
    axes[2].set_xticks(x, [str(n) for n in ds["size"].values])
    axes[2].yaxis.set_major_locator(MaxNLocator(integer=True))
    axes[2].set(xlabel="training sequences n", ylabel="number of learned stages",
                ylim=(-0.3, 3.5), title=f"{plural(ds.sizes['seed'], 'seed')}")  # fmt: skip
    axes[2].legend(fontsize=7)
    fig.suptitle(f"Fig. 5 ({scale} scale): KL to {ds.attrs.get('kl_to', '')}", fontsize=9)
    return {"markov_fig5": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.<module> [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
