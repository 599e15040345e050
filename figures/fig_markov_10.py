"""Seed 004 Figure 10: the tensor gradient flow (Proposition 1) in reduced coordinates.

Two columns: the initial attention perturbed with std 1e-6 (left) and with std 1e-3 (right), the
latter being the paper's literal "covariance eps I, eps = 1e-6" (App. C.6). Rows: attention of each
head on the three target positions; value coefficients ``C_{ka} = <V_k, V_a*>``; the loss split
into (feature, position) parts; log time axis, T = 40, b0 = 1, m = 1.7.

The paper's picture (all heads first compete for position 1, then specialise, three clearly
separated stages) needs the small perturbation: with std 1e-3 the heads decouple at t ~ 22,
together with stage 1, and the competitive phase nearly vanishes (issue 16). The ODE costs
seconds, so every scale uses T = 40 (quick: T = 10).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import GROUP_STYLES, HEAD_COLORS, mark_stages, plural  # noqa: E402
from sims.markov.tensor_dynamics import count_stages, coupling_time, stage_times  # noqa: E402

FIGURE = FigureSpec(
    name="markov_fig10",
    title="Tensor gradient flow: stage-wise learning, competition then cooperation",
    paper_ref="seed004 Figure 10 (App. C.6)",
    result_file="markov/fig10_ode.nc",
    producer="python -m figures.fig_markov_10 --recompute",
    extra="torch",
)

#: Perturbation stds of s_k(0): the clean-stage one and the paper's literal covariance 1e-6.
INIT_STDS = (1e-6, 1e-3)


def compute(scale: str):
    """Integrate the Fig. 10 flow for both perturbation sizes (``init_std`` dimension)."""
    import xarray as xr

    from sims.markov.experiments import flow_config
    from sims.markov.tensor_dynamics import solve_flow

    runs = []
    for std in INIT_STDS:
        res = solve_flow(flow_config(scale, init_std=std))
        if not res.success:
            raise RuntimeError(f"Fig. 10 ODE failed at init_std={std:g}: {res.message}")
        runs.append(res.ds.drop_attrs())
    ds = xr.concat(runs, dim="init_std").assign_coords(init_std=list(INIT_STDS))
    cfg = {k: v for k, v in res.ds.attrs["config"].items() if k != "init_std"}
    ds.attrs = {"m_star": res.ds.attrs["m_star"], "T": int(res.ds.sizes["position"]),
                "config": cfg}  # fmt: skip
    return ds


def _column(axes, ds, std: float) -> None:
    r = ds.sel(init_std=std)
    r.attrs["m_star"] = ds.attrs["m_star"]
    t = r.time.values[1:]
    h = r.sizes["feature"]
    st = stage_times(r)
    tc = coupling_time(r)
    for k in range(r.sizes["head"]):
        for a in range(h):
            ls = GROUP_STYLES[a % 4]
            axes[0].plot(t, r.S.values[1:, k, a], color=HEAD_COLORS[k % 5], ls=ls)
            axes[1].plot(t, r.C.values[1:, k, a], color=HEAD_COLORS[k % 5], ls=ls)
    label = "paper's literal 'covariance 1e-6'" if std == 1e-3 else "clean stages"
    axes[0].set_title(f"perturbation std {std:g} ({label}):\n{plural(count_stages(st), 'stage')}"
                      f"; stage 1 at t = {st[0]:.3g}, heads decouple at t = {tc:.3g} "
                      f"(competitive phase x{tc / st[0]:.3g})", fontsize=9)  # fmt: skip
    axes[0].set(ylabel="attention $s_k$ on target position", ylim=(-0.02, 1.02))
    axes[1].set(ylabel=r"value coefficient $\langle V_k, V^*_a\rangle$")
    ls = r.loss_split.values[1:]  # (time, h, T)
    owner = r.C.values[-1].argmax(0)  # head holding each feature at the end
    for a in range(h):
        for p in range(min(h, ls.shape[2])):
            if ls[:, a, p].max() > 1e-3:
                axes[2].plot(t, ls[:, a, p], color=HEAD_COLORS[owner[a] % 5],
                             ls="-" if a == p else ":",
                             label=f"feature {a + 1} at position {p + 1}")  # fmt: skip
    axes[2].plot(t, r.loss.values[1:], "k", lw=2, label="total loss")
    axes[2].set(xscale="log", yscale="log", xlabel="time t", ylabel="loss part",
                ylim=(1e-4, None))  # fmt: skip
    axes[2].legend(fontsize=6, ncol=2, title="colour: head that learns it", title_fontsize=6)
    for ax in axes:
        mark_stages(ax, st)
        ax.axvline(tc, color="r", ls="-.", lw=0.8)


def plot(ds, scale: str) -> dict:
    """Three rows (attention, values, loss parts) x two perturbation sizes."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(3, 2, figsize=(12, 9), sharex=True, constrained_layout=True)
    for j, std in enumerate(ds.init_std.values):
        _column(axes[:, j], ds, float(std))
    handles = [Patch(color=HEAD_COLORS[k % 5], label=f"head {k + 1}")
               for k in range(ds.sizes["head"])]  # fmt: skip
    handles += [Line2D([], [], color="k", ls=GROUP_STYLES[a % 4],
                       label=f"position / feature {a + 1}") for a in range(ds.sizes["feature"])]
    handles += [Line2D([], [], color="k", ls="--", lw=0.7, label="stage times"),
                Line2D([], [], color="r", ls="-.", lw=0.8, label="heads decouple")]  # fmt: skip
    axes[0, 0].legend(handles=handles, fontsize=6, ncol=2)
    fig.suptitle(f"Fig. 10: tensor gradient flow, T = {ds.attrs['T']}, m = 1.7, "
                 f"b0 = 1 ({scale} scale)")  # fmt: skip
    return {"markov_fig10": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_markov_10 [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
