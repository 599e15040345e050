"""Seed 004 Figure 10: the tensor gradient flow (Proposition 1) in reduced coordinates.

Top: attention ``s_k`` of each head on the three target positions; middle: value coefficients
``C_{ka} = <V_k, V_a*>``; bottom: the loss split into (feature, position) parts, log time axis.
Reads ``results/markov/fig10_ode.nc``; the ODE costs < 1 s, so every scale uses T = 40.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from sims.markov.plotting import HEAD_COLORS, mark_stages  # noqa: E402
from sims.markov.tensor_dynamics import solve_flow, stage_times  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig10",
    title="Tensor gradient flow: stage-wise learning, competition then cooperation",
    paper_ref="seed004 Figure 10 (App. C.6)",
    result_file="markov/fig10_ode.nc",
    producer="python -m sims.markov ode --out results/markov/fig10_ode.nc",
    extra="torch",
)


def compute(scale: str):
    """Integrate the Fig. 10 flow."""
    from sims.markov.experiments import flow_config

    res = solve_flow(flow_config(scale))
    ds = res.ds
    ds.attrs.update(success=int(res.success), message=res.message)
    return ds


def plot(ds, path: Path) -> Path:
    """Three stacked panels on a log time axis."""
    t = ds.time.values[1:]
    h = ds.sizes["feature"]
    fig, axes = plt.subplots(3, 1, figsize=(7, 8), sharex=True, constrained_layout=True)
    st = stage_times(ds)
    for k in range(ds.sizes["head"]):
        for a in range(h):
            ls = ["-", "--", ":"][a % 3]
            axes[0].plot(t, ds.S.values[1:, k, a], color=HEAD_COLORS[k % 5], ls=ls)
            axes[1].plot(t, ds.C.values[1:, k, a], color=HEAD_COLORS[k % 5], ls=ls)
    axes[0].set(ylabel="s_k[p_a]", title="attention on positions (1 -, 2 --, 3 :)")
    axes[1].set(ylabel="<V_k, V_a*>", title="value coefficients (feature 1 -, 2 --, 3 :)")
    ls = ds.loss_split.values[1:]  # (time, h, T)
    owner = ds.C.values[-1].argmax(0)  # head holding each feature at the end
    for a in range(h):
        for p in range(min(h, ls.shape[2])):
            if ls[:, a, p].max() > 1e-3:
                axes[2].plot(
                    t,
                    ls[:, a, p],
                    color=HEAD_COLORS[owner[a] % 5],
                    ls="-" if a == p else ":",
                    label=f"(feature {a + 1}, pos {p + 1})",
                )
    axes[2].plot(t, ds.loss.values[1:], "k", lw=2, label="total")
    axes[2].set(
        xscale="log",
        yscale="log",
        xlabel="time",
        ylabel="loss part",
        ylim=(1e-4, None),
        title=f"stage times {np.round(st, 1).tolist()}",
    )
    axes[2].legend(fontsize=6, ncol=2)
    for ax in axes:
        mark_stages(ax, st)
    return save_figure(fig, path, dpi=120)


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (if needed) and render Figure 10."""
    from sims.markov.experiments import flow_config, run_or_load, scale_from_env

    scale = scale_from_env(quick)
    name = FIGURE.result_file if scale != "quick" else "markov/quick/fig10_ode.nc"
    ds = run_or_load(
        Path(results_dir) / name,
        lambda: compute(scale),
        recompute=recompute,
        config=dict(flow_config(scale).__dict__),
        seed=0,
    )
    return [plot(ds, Path(out_dir) / "markov_fig10.png")]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_markov_10``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
