"""Shared matplotlib panels for the seed-004 figures (``figures/fig_markov_*.py``).

The functions draw on axes or return a :class:`matplotlib.figure.Figure`; saving is the caller's
job (the figure modules use :func:`figures.save_figure`), so this library never imports
``figures``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "HEAD_COLORS",
    "GROUP_STYLES",
    "attention_rgb",
    "plot_attention_row",
    "plot_kl",
    "plot_group_mass",
    "mark_stages",
    "pick_steps",
    "plural",
    "stage_summary",
    "training_figure",
]

#: Head colours of Fig. 2 (blue, yellow, green), then more.
HEAD_COLORS = np.array([[0.12, 0.35, 0.85], [0.95, 0.75, 0.05], [0.15, 0.65, 0.25],
                        [0.8, 0.2, 0.2], [0.5, 0.2, 0.7]])  # fmt: skip
#: Line style per lag group / feature (1, 2, 3, ...).
GROUP_STYLES = ("-", "--", ":", "-.")


def plural(n: int, word: str) -> str:
    """``"1 stage"``, ``"2 stages"``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def attention_rgb(att: np.ndarray) -> np.ndarray:
    """Overlay ``(H, Tq, L)`` attention maps as one RGB image, one colour per head."""
    H = att.shape[0]
    img = np.ones(att.shape[1:] + (3,))
    for k in range(H):
        a = np.clip(att[k] / max(att[k].max(), 1e-12), 0, 1)[..., None]
        img *= 1 - a * (1 - HEAD_COLORS[k % len(HEAD_COLORS)])
    return img


def _head_handles(H: int):
    from matplotlib.patches import Patch

    return [Patch(color=HEAD_COLORS[k % len(HEAD_COLORS)], label=f"head {k + 1}")
            for k in range(H)]  # fmt: skip


def plot_attention_row(axes, ds, steps) -> None:
    """Sum of per-head attention maps (query x key) at the given steps (Figs. 1, 2, 6, 8)."""
    q0 = int(ds["query"].values[0])
    for ax, st in zip(axes, steps, strict=False):
        att = ds["attention"].sel(step=st, method="nearest").values
        ext = (-0.5, att.shape[-1] - 0.5, q0 + att.shape[-2] - 0.5, q0 - 0.5)
        ax.imshow(attention_rgb(att), aspect="auto", interpolation="nearest", extent=ext)
        ax.set_title(f"step {int(ds.step.sel(step=st, method='nearest'))}", fontsize=8)
        ax.set_xlabel("key position", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0].set_ylabel("query position", fontsize=7)
    axes[-1].legend(handles=_head_handles(ds.sizes["head"]), fontsize=6, loc="lower left")


def plot_kl(ax, ds, *, var: str = "kl_restricted", labels=None, logy: bool = True,
            floors: bool = True) -> None:  # fmt: skip
    """KL curves vs step; with ``var="kl_restricted"`` also the best-predictor KL and the floors.

    * solid: ``KL(f_{A*_{1:i}} || model)`` (Eq. 3's restricted truths);
    * dashed: ``KL(f^best_{1:i} || model)`` (the best predictor that sees groups ``1..i``);
    * dotted horizontal: the floor ``KL(f_{A*_{1:i}} || f^best_{1:i})`` that the solid curve
      reaches when the model has learned groups ``1..i`` perfectly (not 0; issue 16).
    """
    vals = ds[var].values
    dim = ds[var].dims[1]
    steps = ds.step.values
    if var != "kl_restricted":
        names = labels or [str(v) for v in ds[dim].values]
        for i in range(vals.shape[1]):
            ax.plot(steps, vals[:, i], color=f"C{i}", label=names[i])
    else:
        for i in range(vals.shape[1]):
            n = i + 1
            ax.plot(steps, vals[:, i], color=f"C{i}",
                    label=rf"KL($f_{{A^*_{{1:{n}}}}}$ $\|$ model)")  # fmt: skip
            if floors and "kl_best" in ds and n < vals.shape[1]:
                ax.plot(steps, ds["kl_best"].values[:, i], color=f"C{i}", ls="--",
                        label=rf"KL($f^{{\rm best}}_{{1:{n}}}$ $\|$ model)")  # fmt: skip
                lab = rf"floor KL($f_{{A^*_{{1:{n}}}}}$ $\|$ $f^{{\rm best}}_{{1:{n}}}$)"
                ax.axhline(float(ds["kl_floor"][i]), color=f"C{i}", ls=":", lw=1, label=lab)
    ax.set(xlabel="training step", ylabel="KL (nats)", yscale="log" if logy else "linear")
    ax.legend(fontsize=6)


def plot_group_mass(ax, ds) -> None:
    """Attention mass of each head (colour) on each lag group (line style) vs step."""
    from matplotlib.lines import Line2D

    M = ds["group_mass"].values  # (step, H, h)
    for k in range(M.shape[1]):
        for g in range(M.shape[2]):
            ax.plot(ds.step.values, M[:, k, g], color=HEAD_COLORS[k % 5],
                    ls=GROUP_STYLES[g % 4], lw=1)  # fmt: skip
    ax.set(xlabel="training step", ylabel="attention mass on lag group", ylim=(0, 1.02))
    handles = _head_handles(M.shape[1]) + [
        Line2D([], [], color="k", ls=GROUP_STYLES[g % 4], label=f"group {g + 1}")
        for g in range(M.shape[2])
    ]
    ax.legend(handles=handles, fontsize=6, ncol=2)


def mark_stages(ax, times, color="k", label: str | None = None) -> None:
    """Dashed vertical lines at finite stage times (one legend entry ``label``)."""
    first = True
    for t in np.asarray(times, float):
        if np.isfinite(t):
            ax.axvline(t, color=color, ls="--", lw=0.7, label=label if first else None)
            first = False


def pick_steps(ds, n: int = 5) -> list[int]:
    """``n`` evaluation steps spread over the run (log-like spacing, first and last included)."""
    steps = ds.step.values
    idx = np.unique(np.round(np.geomspace(1, len(steps), n)).astype(int) - 1)
    return [int(steps[i]) for i in idx]


def stage_summary(ds) -> str:
    """One line: pattern times, the stage count and its band over detection thresholds."""
    from .train import detect_stages, stage_band

    rep = detect_stages(ds)
    band = stage_band(ds)
    times = ", ".join("never" if not np.isfinite(t) else f"{int(t)}" for t in rep.group_times)
    lo, hi = band.attrs["min"], band.attrs["max"]
    rng = f"{lo}" if lo == hi else f"{lo}-{hi}"
    th, ra = band.threshold.values, band.ratio.values
    return (f"groups learned at steps {times}; {plural(rep.n_stages, 'stage')} "
            f"({rng} over mass thresholds {th.min():g}-{th.max():g} and merge ratios "
            f"{ra.min():g}-{ra.max():g})")  # fmt: skip


def training_figure(ds, title: str, *, reference: bool = False, n_maps: int = 5):
    """Attention maps over training + KL to restricted truths (+ references) + group masses.

    The layout shared by Figs. 1, 2-3, 6-7 and 8-9. Returns the figure (not saved).
    """
    import matplotlib.pyplot as plt

    from .train import detect_stages

    rep = detect_stages(ds)
    steps = pick_steps(ds, n_maps)
    ncol = max(len(steps), 3 + int(reference))
    fig = plt.figure(figsize=(3.2 * ncol, 6.8), constrained_layout=True)
    gs = fig.add_gridspec(2, ncol)
    plot_attention_row([fig.add_subplot(gs[0, i]) for i in range(len(steps))], ds, steps)
    ax = fig.add_subplot(gs[1, 0])
    plot_kl(ax, ds)
    mark_stages(ax, rep.group_times)
    ax.set_title("KL to the restricted ground truths", fontsize=9)
    ax = fig.add_subplot(gs[1, 1])
    ax.plot(ds.step, ds.excess_loss, "k", label="excess loss (test CE - entropy)")
    ax.plot(ds.step, ds.test_loss, "C1", label="test loss")
    if "excess_floor" in ds:
        for i, v in enumerate(ds.excess_floor.values[:-1]):
            ax.axhline(v, color="0.5", ls=":", lw=1,
                       label="excess loss of the best predictor\nseeing groups 1..i (i = 1, 2)"
                       if i == 0 else None)  # fmt: skip
    mark_stages(ax, rep.group_times, label="a group is learned")
    ax.set(xlabel="training step", ylabel="nats", yscale="log")
    ax.set_title("losses", fontsize=9)
    ax.legend(fontsize=6)
    ax = fig.add_subplot(gs[1, 2])
    plot_group_mass(ax, ds)
    mark_stages(ax, rep.group_times)
    ax.set_title("attention mass per head and group", fontsize=9)
    if reference and ds.sizes.get("reference", 0):
        ax = fig.add_subplot(gs[1, 3])
        plot_kl(ax, ds, var="kl_reference",
                labels=[f"context {str(r).split('=')[-1]}" for r in ds.reference.values])
        ax.set_title("KL(restricted-context model $\\|$ model)", fontsize=9)
    fig.suptitle(f"{title}\n{stage_summary(ds)}", fontsize=10)
    return fig
