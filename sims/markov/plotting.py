"""Shared matplotlib panels for the seed-004 figures (``figures/fig_markov_*.py``)."""

from __future__ import annotations

import numpy as np

__all__ = ["HEAD_COLORS", "attention_rgb", "plot_attention_row", "plot_kl", "plot_group_mass",
           "mark_stages"]  # fmt: skip

#: Head colours of Fig. 2 (blue, yellow, green), then more.
HEAD_COLORS = np.array([[0.12, 0.35, 0.85], [0.95, 0.75, 0.05], [0.15, 0.65, 0.25],
                        [0.8, 0.2, 0.2], [0.5, 0.2, 0.7]])  # fmt: skip


def attention_rgb(att: np.ndarray) -> np.ndarray:
    """Overlay ``(H, Tq, L)`` attention maps as one RGB image, one colour per head."""
    H = att.shape[0]
    img = np.ones(att.shape[1:] + (3,))
    for k in range(H):
        a = np.clip(att[k] / max(att[k].max(), 1e-12), 0, 1)[..., None]
        img *= 1 - a * (1 - HEAD_COLORS[k % len(HEAD_COLORS)])
    return img


def plot_attention_row(axes, ds, steps) -> None:
    """Sum of per-head attention maps (query x key) at the given steps (Figs. 1, 2, 6, 8)."""
    for ax, st in zip(axes, steps, strict=False):
        att = ds["attention"].sel(step=st, method="nearest").values
        ax.imshow(attention_rgb(att), aspect="auto", interpolation="nearest")
        ax.set_title(f"step {int(ds.step.sel(step=st, method='nearest'))}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].set_ylabel("query")


def plot_kl(ax, ds, *, var: str = "kl_restricted", labels=None, logy: bool = True) -> None:
    """KL curves vs step (restricted truths or reference models)."""
    vals = ds[var].values
    dim = ds[var].dims[1]
    names = labels or [str(v) for v in ds[dim].values]
    for i in range(vals.shape[1]):
        lab = f"f_A1:{names[i]}" if var == "kl_restricted" else names[i]
        ax.plot(ds.step.values, vals[:, i], label=lab)
    ax.set(xlabel="step", ylabel="KL", yscale="log" if logy else "linear")
    ax.legend(fontsize=7)


def plot_group_mass(ax, ds) -> None:
    """Attention mass of each head on each lag group vs step."""
    M = ds["group_mass"].values  # (step, H, h)
    for k in range(M.shape[1]):
        for g in range(M.shape[2]):
            ax.plot(ds.step.values, M[:, k, g], color=HEAD_COLORS[k % 5],
                    ls=["-", "--", ":", "-."][g % 4], lw=1)  # fmt: skip
    ax.set(xlabel="step", ylabel="group mass", title="head (colour) x group (-, --, :)")


def mark_stages(ax, times, color="k") -> None:
    """Dashed vertical lines at finite stage times."""
    for t in np.asarray(times, float):
        if np.isfinite(t):
            ax.axvline(t, color=color, ls="--", lw=0.7)


def pick_steps(ds, n: int = 5) -> list[int]:
    """``n`` evaluation steps spread over the run (log-like spacing, first and last included)."""
    steps = ds.step.values
    idx = np.unique(np.round(np.geomspace(1, len(steps), n)).astype(int) - 1)
    return [int(steps[i]) for i in idx]


def training_figure(ds, path, title: str, *, reference: bool = False, n_maps: int = 5):
    """Attention maps over training + KL to restricted truths (+ references) + group masses.

    The layout shared by Figs. 1, 2-3, 6-7 and 8-9.
    """
    import matplotlib.pyplot as plt

    from figures import save_figure

    from .train import detect_stages

    rep = detect_stages(ds)
    steps = pick_steps(ds, n_maps)
    ncol = max(n_maps, 3 + int(reference))
    fig = plt.figure(figsize=(3.0 * ncol, 6.2), constrained_layout=True)
    gs = fig.add_gridspec(2, ncol)
    plot_attention_row([fig.add_subplot(gs[0, i]) for i in range(len(steps))], ds, steps)
    ax = fig.add_subplot(gs[1, 0])
    plot_kl(ax, ds)
    mark_stages(ax, rep.group_times)
    ax.set_title("KL(f_A*1:i || model)")
    ax = fig.add_subplot(gs[1, 1])
    ax.plot(ds.step, ds.excess_loss, "k", label="excess (test)")
    ax.plot(ds.step, ds.test_loss, "C1", label="test loss")
    ax.set(xlabel="step", yscale="log", title="losses")
    ax.legend(fontsize=7)
    ax = fig.add_subplot(gs[1, 2])
    plot_group_mass(ax, ds)
    if reference and ds.sizes.get("reference", 0):
        ax = fig.add_subplot(gs[1, 3])
        plot_kl(ax, ds, var="kl_reference")
        ax.set_title("KL(restricted-context model || model)")
    fig.suptitle(f"{title}  |  pattern times {rep.group_times.tolist()}, stages {rep.n_stages}",
                 fontsize=10)  # fmt: skip
    return save_figure(fig, path, dpi=110)
