"""Seed 004 Figure 5: dataset size. Fewer stages with fewer training sequences (App. C.2).

Left: validation (excess) loss curves per size (first seed) with the best step marked; middle:
KL to the restricted models (context = one, two, all groups) per size; right: the number of
learned stages at the end and at the best (early-stopping) step, per size and seed.

* paper scale: the full model, KL to trained restricted-context models (c = 4, 8, 12), as in
  the paper; one seed (one GPU, runs in sequence).
* CPU scale: the minimal model (:func:`sims.markov.experiments.sweep_exp`: d = 20, lr 2e-2, 4000
  steps), two seeds, and KL to the restricted *ground truths* f_{A*_1:i} (Eq. 3) instead of
  trained restricted-context models, which would cost three more runs per size; the runs go in
  parallel over the cores (:func:`sims.runtime.parallel.pmap`). About 5 min on 2 cores.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.experiments import FIGURE_RUNS  # noqa: E402

RUN = FIGURE_RUNS["markov_fig5"]  # the computation (sims), shared with the GPU campaign
FIGURE = FigureSpec(
    name=RUN.name,
    title="Dataset size: fewer stages with less data; KL to restricted models",
    paper_ref="seed004 Figure 5, App. C.2",
    result_file=RUN.result_file,
    producer="python -m figures.fig_markov_5 --recompute",
    extra="torch",
)


def compute(scale: str, store=None):
    """All (size, seed) runs, in parallel on CPU, as one dataset with ``size`` and ``seed``.

    :func:`sims.markov.experiments.fig5` (sizes :data:`~sims.markov.experiments.FIG5_SIZES`,
    seeds :data:`~sims.markov.experiments.FIG5_SEEDS`) on ``$MARKOV_DEVICE``; ``store``: a
    :class:`sims.runtime.parallel.JobStore` keeping finished runs (resume after a crash).
    """
    return RUN.compute(scale, store=store)


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
