"""GPU campaign: the LLM pipeline's throughput and the SAM family's cost against their targets.

(a) proxy loss recording and a whole trajectory (with one training epoch), projected to 20,000
examples x 5 checkpoints, against issue 11's 5 minutes; (b) greedy generation at 256 new
tokens per batch size against 50 problems/s; (c, d) step time and peak memory of every
optimizer relative to AdamW on the GPU, against this project's FSAM targets (2.2x, 1.3x) and the
main paper's Fig. 2 (~6x, ~2x); (e) the bf16 matrix product; (f) every target, met or not.
Reads ``figures/summaries/gpu/summary.json`` (the ``throughput`` and ``preflight`` stages of
``python -m llm_validation campaign``); without it the figure says "not run: needs a GPU".
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._gpu import gpu_make, headline, usable  # noqa: E402

FIGURE = FigureSpec(
    name="gpu_throughput",
    title="GPU campaign: pipeline throughput and SAM-family cost vs targets",
    paper_ref="issue 11 targets; main paper Fig. 2 (FSAM cost)",
    result_file="campaign/gpu/summary.json",
    producer="python -m llm_validation campaign (GPU; then --publish)",
    gpu=True,
)
STAGES = ("preflight", "throughput")


def _bars(ax, labels, values, goal, better: str, title: str, unit: str) -> None:
    colors = [
        "tab:green" if (v >= goal if better == "higher" else v <= goal) else "tab:red"
        for v in values
    ]
    ax.bar(range(len(values)), values, color=colors)
    ax.axhline(goal, color="k", ls="--", lw=1, label=f"target {goal:g} {unit}")
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(values)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.set(ylabel=f"{unit} (log)", title=title)
    ax.legend(fontsize=8)


def draw(summary: dict, folder):
    """Six panels from the throughput and preflight entries."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 9), constrained_layout=True)
    (a, b, c), (d, e, f) = axes
    fig.suptitle(f"Pipeline throughput and optimizer cost ({headline(summary)})", fontsize=11)
    th = usable(summary, "throughput", (a, b, c, d))
    if th is not None:
        g = th["figures"]
        rec, traj = g["projected_recording_seconds"], g["projected_trajectory_seconds"]
        _bars(
            a,
            ["loss recording\n(5 x 20k forwards)", "with 1 training\nepoch"],
            [rec, traj],
            300,
            "lower",
            f"(a) 20,000-example trajectory, projected\n{g['model']['params'] / 1e6:.1f}M"
            f" parameters, {g['model']['dtype']}, tokenizer {g['model']['tokenizer']}",
            "s",
        )
        gen = g["generation"]
        _bars(
            b,
            [f"batch {k}" for k in gen],
            [v["prompts_per_s"] for v in gen.values()],
            50,
            "higher",
            f"(b) greedy generation, {next(iter(gen.values()))['new_tokens_max']} new tokens",
            "problems/s",
        )
        key = g.get("lm_step_model") or next(iter(g["optimizers"]))
        rows = g["optimizers"][key]["rows"]
        names = [r["optimizer"] for r in rows]
        for ax, col, goal, paper, what in (
            (c, "time_ratio", 2.2, 6.0, "step time"),
            (d, "memory_ratio", 1.3, 2.0, "peak memory"),
        ):
            vals = np.array([r[col] for r in rows])
            ax.bar(
                range(len(vals)),
                vals,
                color=["tab:orange" if n == "fsam" else "tab:blue" for n in names],
            )
            ax.axhline(goal, color="k", ls="--", lw=1, label=f"FSAM target {goal}x")
            ax.axhline(
                paper, color="tab:red", ls=":", lw=1, label=f"paper Fig. 2: FSAM ~{paper:g}x"
            )
            ax.axhline(1, color="gray", lw=0.6)
            ax.set_xticks(range(len(vals)), names, rotation=45, fontsize=8)
            ax.set(
                ylabel=f"{what} / AdamW's",
                title=f"({'c' if ax is c else 'd'}) {what} / AdamW's, sims.lm decoder '{key}'\n"
                f"(AdamW step {g['lm_step_seconds'] * 1e3:.1f} ms)",
            )
            ax.legend(fontsize=8)
    pf = usable(summary, "preflight", (e,), ok=("ok", "failed"))
    if pf is not None and "matmul_bf16" in pf.get("figures", {}):
        mm = pf["figures"]["matmul_bf16"]
        e.bar([0], [mm["tflops"]], color="tab:purple")
        e.axhline(798, color="k", ls=":", lw=1, label="H100 seen here (KINDS.md): 798")
        e.set_xticks([0], [f"bf16 {mm['n']}^3"])
        e.set(
            ylabel="TFLOP/s",
            title=f"(e) matrix product: {mm['tflops']:.3g} TFLOP/s, relative "
            f"error {mm['rel_error']:.1e}\n{pf['figures']['gpu'].get('name', '?')}",
        )
        e.legend(fontsize=8)
    for ax in axes.flat:
        ax.title.set_fontsize(9)
    f.axis("off")
    lines = []
    for entry in summary["stages"]:
        for t in entry.get("targets", []):
            mark = "met" if t["met"] else "NOT met"
            lines.append(
                f"{entry['name']}: {t['name']}\n    {t['value']:.3g} {t['unit']} "
                f"(target {t['op']} {t['target']:g}): {mark}"
            )
    f.text(
        0,
        1,
        "(f) targets\n\n" + ("\n".join(lines) or "none recorded"),
        va="top",
        fontsize=8,
        family="monospace",
        transform=f.transAxes,
    )
    return fig


make = gpu_make(FIGURE, STAGES, draw)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_gpu_throughput [--quick]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
