"""GPU campaign: the upsampling confirmation (FT, FT+UP, random, easy; 3 seeds), two models.

Top row: the from-scratch models (stage ``confirm``); bottom row: SmolLM2-135M-Instruct with
LoRA (stage ``confirm_smollm2``; a rehearsal checks only its carry and conversion and says so).

(a) average accuracy over the six benchmarks per variant (dots: seeds; bar: mean; dotted:
the model before fine-tuning); (b) mean solution loss on clean held-out problems; (c) paired
differences against FT with 95 % t-intervals over seeds (accuracy in points; held-out loss in
nats, lower is better). Reads those stages of ``figures/summaries/gpu/``; without it
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
STAGES = ("confirm", "confirm_smollm2")


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


ROWS = (("confirm", "from scratch"), ("confirm_smollm2", "SmolLM2-135M + LoRA"))


def draw(summary: dict, folder):
    """One row of three panels per confirmation stage: from scratch, then SmolLM2 with LoRA."""
    fig, grid = plt.subplots(len(ROWS), 3, figsize=(17, 5.0 * len(ROWS)), constrained_layout=True)
    fig.suptitle(f"Upsampling confirmation ({headline(summary)})", fontsize=11)
    for axes, (name, label) in zip(grid, ROWS, strict=True):
        ent = usable(summary, name, axes)
        if ent is not None:
            _draw_row(axes, ent, label)
    return fig


def _draw_row(axes, ent: dict, label: str) -> None:
    """Accuracy, held-out loss and paired differences of one stage (or the stage's message)."""
    a, b, c = axes
    g = ent["figures"]
    if not g.get("avg_accuracy_points"):  # a rehearsal checks the carry, not the fine-tuning
        why = g.get("rehearsal_only") or ent.get("message") or "no accuracies recorded"
        for ax in axes:
            message_panel(ax, f"{label}: {why}")
        return
    who = f"{label}: {g['model']}, {g['n_train']} problems, {len(g['seeds'])} seeds" + (
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
            f"(b) held-out solution loss (lower is better)\n{label}",
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
        title=f"(c) each variant minus FT\n{label}",
    )


make = gpu_make(FIGURE, STAGES, draw)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_gpu_confirm [--quick]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
