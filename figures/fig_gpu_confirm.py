"""GPU campaign: the upsampling confirmation (FT, FT+UP, random, easy; 3 seeds).

(a) average accuracy over the six benchmarks per variant (dots: seeds; bar: mean; dotted:
the model before fine-tuning); (b) mean solution loss on clean held-out problems; (c) paired
differences against FT with 95 % t-intervals over seeds (accuracy in points; held-out loss in
nats, lower is better). Reads the ``confirm`` stage of ``figures/summaries/gpu/``; without it
the figure says "not run: needs a GPU".
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._gpu import gpu_make, headline, message_panel, usable  # noqa: E402

FIGURE = FigureSpec(
    name="gpu_confirm",
    title="GPU campaign: upsampling confirmation (FT, FT+UP, random, easy)",
    paper_ref="main paper Table 2, Table 4, Fig. 4d (at GPU scale)",
    result_file="campaign/gpu/summary.json",
    producer="python -m llm_validation campaign (GPU; then --publish)",
    gpu=True,
)
STAGES = ("confirm",)


def _strip(ax, values: dict, ref: float | None, ylabel: str, title: str) -> None:
    for i, xs in enumerate(values.values()):
        xs = np.asarray(xs, float)
        ax.plot(np.full(xs.size, i), xs, "o", color=f"C{i}", alpha=0.6)
        ax.plot([i - 0.3, i + 0.3], [np.nanmean(xs)] * 2, color=f"C{i}", lw=2.5)
    if ref is not None and np.isfinite(ref):
        ax.axhline(ref, color="gray", ls=":", label="before fine-tuning")
        ax.legend(fontsize=8)
    ax.set_xticks(range(len(values)), list(values))
    ax.set(ylabel=ylabel, title=title)


def draw(summary: dict, folder):
    """Three panels from the confirm entry."""
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(17, 5.2), constrained_layout=True)
    fig.suptitle(f"Upsampling confirmation ({headline(summary)})", fontsize=11)
    ent = usable(summary, "confirm", (a, b, c))
    if ent is None:
        return fig
    g = ent["figures"]
    who = f"{g['model']} models, {g['n_train']} problems, {len(g['seeds'])} seeds" + (
        f" ({g['fallback_reason']})" if g.get("fallback_reason") else ""
    )
    _strip(
        a,
        g["avg_accuracy_points"],
        g.get("pt_avg_accuracy_points"),
        "average accuracy (points)",
        f"(a) accuracy, six benchmarks\n{who}",
    )
    if g.get("heldout_loss"):
        _strip(
            b,
            g["heldout_loss"],
            g.get("pt_heldout_loss"),
            "nats per solution token",
            "(b) held-out solution loss (lower is better)",
        )
    else:
        message_panel(b, "no held-out loss recorded")
    diffs = g.get("paired_differences", {})
    labels, y = [], 0
    for name, d in diffs.items():
        for key, col, unit in (
            ("accuracy_points", "tab:blue", "points"),
            ("heldout_loss", "tab:red", "nats"),
        ):
            if key in d:
                m, lo, hi = (np.nan if v in (None, "nan") else float(v) for v in d[key])
                c.errorbar(
                    [m],
                    [y],
                    xerr=[[m - lo if np.isfinite(lo) else 0], [hi - m if np.isfinite(hi) else 0]],
                    fmt="o",
                    color=col,
                )
                labels.append(f"{name} ({unit})")
                y += 1
    c.axvline(0, color="k", lw=0.8)
    c.set_yticks(range(len(labels)), labels, fontsize=8)
    c.set(
        xlabel="paired difference vs FT (95 % t-interval over seeds)",
        title="(c) FT+UP, random, easy minus FT",
    )
    return fig


make = gpu_make(FIGURE, STAGES, draw)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_gpu_confirm [--quick]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
