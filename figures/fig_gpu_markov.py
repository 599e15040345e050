"""GPU campaign: seed 004's full-model figures at the paper's scale (d = 50, batch 3000).

Top: Figures 2-3 (standard order): KL to the restricted truths f_{A*_1:i} (a), KL to the
trained restricted-context models c = 4, 8, 12, which the model should approach in that order
(b), and the attention mass the best head puts on each lag group (c), with the detected stage
times. Bottom: Figures 8-9 (reversed importance order) the same way (d, e), and Figure 5's
learned stages per dataset size (f). Reads the campaign's ``markov_*`` stage files under
``figures/summaries/gpu/``; without them the figure says "not run: needs a GPU".
"""

from __future__ import annotations

import csv
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._gpu import gpu_make, headline, usable  # noqa: E402

FIGURE = FigureSpec(
    name="gpu_markov",
    title="GPU campaign: seed 004 Figures 2-3, 8-9 and 5 at the paper's scale",
    paper_ref="seed004 Figures 2-3, 5, 8-9 (paper scale)",
    result_file="campaign/gpu/summary.json",
    producer="python -m llm_validation campaign (GPU; then --publish)",
    gpu=True,
)
STAGES = ("markov_fig2_3", "markov_fig8_9", "markov_fig5")


def _read(folder, name):
    """``(figures, columns)`` of a Markov stage's JSON and CSV."""
    figs = json.loads((folder / name / f"{name}.json").read_text())
    with open(folder / name / f"{name}.csv", newline="") as f:
        rows = list(csv.reader(f))
    cols = {h: np.array([float(r[i]) for r in rows[1:]]) for i, h in enumerate(rows[0])}
    return figs, cols


def _curves(ax, cols, prefix, title, times=None):
    step = np.maximum(cols["step"], 1)
    keys = [k for k in cols if k.startswith(prefix)]
    for i, k in enumerate(keys):
        ax.plot(step, cols[k], color=f"C{i}", label=k.removeprefix(prefix))
        if times is not None and i < len(times) and np.isfinite(times[i]):
            ax.axvline(max(times[i], 1), color=f"C{i}", ls=":", lw=0.8)
    ax.set_xscale("log")
    if prefix.startswith("kl"):
        ax.set_yscale("log")
    ax.set(xlabel="step", title=title)
    ax.legend(fontsize=7)


def _times(xs) -> str:
    """Stage times as text: integers, '-' for never."""
    out = []
    for x in xs:
        try:
            v = float(x)
        except (TypeError, ValueError):
            v = float("nan")
        out.append(f"{v:.0f}" if np.isfinite(v) else "-")
    return ", ".join(out)


def _num(xs) -> list[float]:
    vals = []
    for x in xs:
        try:
            vals.append(float(x))
        except (TypeError, ValueError):
            vals.append(float("nan"))
    return vals


def draw(summary: dict, folder):
    """Six panels from the Markov stages' CSV/JSON files."""
    fig, axes = plt.subplots(2, 3, figsize=(17, 10), constrained_layout=True)
    (a, b, c), (d, e, f) = axes
    fig.suptitle(f"Seed 004, full model ({headline(summary)})", fontsize=11)
    for name, panels in (("markov_fig2_3", (a, b, c)), ("markov_fig8_9", (d, e))):
        if usable(summary, name, panels) is None:
            continue
        figs, cols = _read(folder, name)
        gt = _num(figs["group_times"])
        label = "Figs. 2-3" if name == "markov_fig2_3" else "Figs. 8-9 (reversed order)"
        first = "a" if name == "markov_fig2_3" else "d"
        _curves(
            panels[0],
            cols,
            "kl_restricted_",
            f"({first}) {label}, {figs['scale']} scale: "
            f"KL(f_A*_1:i || model)\n{figs['n_stages']} stages, in order: {figs['order_ok']}",
            gt,
        )
        if name == "markov_fig2_3":
            closest = figs.get("first_step_closest", {})
            _curves(
                b,
                cols,
                "kl_reference_",
                "(b) KL to restricted-context models\nfirst step "
                "closest: "
                + ", ".join(f"{k} {v if v is not None else '-'}" for k, v in closest.items()),
            )
        _curves(
            panels[-1],
            cols,
            "group_mass_",
            f"({'c' if first == 'a' else 'e'}) best head's "
            f"attention mass per lag group\nstage times (dotted): {_times(gt)}",
            gt,
        )
    if usable(summary, "markov_fig5", (f,)) is not None:
        figs, cols = _read(folder, "markov_fig5")
        for key, mk in (("n_stages", "o-"), ("n_stages_at_best", "s--")):
            f.plot(cols["size"], cols[key], mk, label=key)
        f.set_xscale("log")
        f.set(
            xlabel="training sequences",
            ylabel="learned stages",
            title=f"(f) Fig. 5: stages vs dataset size\nKL to {figs.get('kl_to')}",
        )
        f.legend(fontsize=8)
    for ax in axes.flat:
        ax.title.set_fontsize(9)
    return fig


make = gpu_make(FIGURE, STAGES, draw)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_gpu_markov [--quick]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
