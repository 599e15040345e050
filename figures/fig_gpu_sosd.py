"""GPU campaign: seed 002's small-LM runs at their GPU configuration (SoSD onsets and knees).

(a) the ΔΣ onset against the validation-loss knee per run (the paper: they coincide), (b) the
final validation loss per schedule (dots: seeds), (c) the largest ratio of ΔΣ to the Lemma A.4
bound per run (must stay <= 1). Reads the ``sosd`` stage of ``figures/summaries/gpu/``; without
it the figure says "not run: needs a GPU"; a blocked stage is shown with its reason.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._gpu import gpu_make, headline, message_panel, usable  # noqa: E402

FIGURE = FigureSpec(
    name="gpu_sosd",
    title="GPU campaign: SoSD onset vs loss knee at the GPU configuration",
    paper_ref="seed 002 Figs. 2-5 (GPU configuration)",
    result_file="campaign/gpu/summary.json",
    producer="python -m llm_validation campaign (GPU; then --publish)",
    gpu=True,
)
STAGES = ("sosd",)


def _num(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return float("nan")


def draw(summary: dict, folder):
    """Three panels from the sosd entry."""
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 5), constrained_layout=True)
    fig.suptitle(f"SoSD in small-LM pre-training ({headline(summary)})", fontsize=11)
    ent = usable(summary, "sosd", (a, b, c), ok=("ok", "partial"))
    runs = (ent or {}).get("figures", {}).get("runs", {})
    if ent is None:
        return fig
    if not runs:
        for ax in (a, b, c):
            message_panel(ax, "sosd: no finished run")
        return fig
    names = sorted({k.rsplit("_seed", 1)[0] for k in runs})
    for i, n in enumerate(names):
        sel = {k: v for k, v in runs.items() if k.rsplit("_seed", 1)[0] == n}
        on = [_num(v.get("onset")) for v in sel.values()]
        kn = [_num(v.get("loss_knee")) for v in sel.values()]
        a.plot(kn, on, "o", color=f"C{i}", label=n)
        vl = [_num(v.get("val_loss_final")) for v in sel.values()]
        b.plot([i] * len(vl), vl, "o", color=f"C{i}")
        c.plot(
            [i] * len(sel), [_num(v.get("a4_ratio_max")) for v in sel.values()], "o", color=f"C{i}"
        )
    lim = [
        np.nanmin([a.get_xlim()[0], a.get_ylim()[0]]),
        np.nanmax([a.get_xlim()[1], a.get_ylim()[1]]),
    ]
    a.plot(lim, lim, "k:", lw=0.8, label="onset = knee")
    a.set(
        xlabel="validation-loss knee (step)",
        ylabel="ΔΣ onset (step)",
        title=f"(a) onset vs knee ({ent['figures'].get('done')} of "
        f"{ent['figures'].get('total')} runs)",
    )
    a.legend(fontsize=8)
    b.set_xticks(range(len(names)), names, rotation=30)
    b.set(ylabel="final validation loss", title="(b) final validation loss per schedule")
    c.axhline(1, color="r", ls="--")
    c.set_xticks(range(len(names)), names, rotation=30)
    c.set(ylabel="max ΔΣ / Lemma A.4 bound", title="(c) Lemma A.4 (must stay <= 1)")
    return fig


make = gpu_make(FIGURE, STAGES, draw)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_gpu_sosd [--quick]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
