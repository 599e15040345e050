"""Seed 003 Tables 4/6 analog: sharpness of the final Table 1 models.

λ_max(H_L) (Lanczos), Hutchinson tr(H_L), tr(H_G) and tr(H_F) = tr(H_L) − tr(H_G) (same probes),
per method and seed, on held-out sequences; plus the final logit statistics. Runs the Table 1
figure's training first when its models are missing. Reads ``results/sam_family/sharpness.nc``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._sam_family import suptitle  # noqa: E402

FIGURE = FigureSpec(
    name="sam_family_sharpness",
    title="Sharpness of the final SAM-family models (Tables 4/6 analog)",
    paper_ref="seed 003 Tables 4, 6",
    result_file="sam_family/sharpness.nc",
    producer="python -m figures.fig_sam_family_sharpness --recompute",
    extra="torch",
)

PANELS = (("lambda_max", "λ_max(H_L)"), ("tr_H_L", "tr(H_L)"), ("tr_H_G", "tr(H_G)"),
          ("tr_H_F", "tr(H_F)"), ("logit_one_minus_p_sq", "mean 1−‖p‖²"))  # fmt: skip


def compute(results_dir, *, quick: bool = False, recompute: bool = False):
    """Diagnostics of the Table 1 models (training them first when missing)."""
    from figures.fig_sam_family_table1 import compute as table1
    from sims.lm import experiments as E

    study = E.QUICK_STUDY if quick else E.DEFAULT_STUDY
    table1(results_dir, quick=quick)
    models = E.result_path(results_dir, "models", quick=quick)
    return E.run_or_load(
        E.result_path(results_dir, "sharpness.nc", quick=quick),
        lambda store: E.final_sharpness(study, model_dir=str(models)),
        recompute=recompute,
        config={"figure": FIGURE.name, "study": study.to_dict()},
    )


def summary(ds) -> str:
    """Mean ± std over seeds, and the ratio to AdamW (the paper's Table 4 reading)."""
    lines = [f"{'method':>7} " + " ".join(f"{k:>20}" for k, _ in PANELS)]
    for m in ds.optimizer.values:
        cells = []
        for k, _ in PANELS:
            v = ds[k].sel(optimizer=m)
            r = float(v.mean() / ds[k].sel(optimizer="adamw").mean())
            cells.append(f"{float(v.mean()):9.4g}±{float(v.std()):.2g} ({r:.2f}x)")
        lines.append(f"{m:>7} " + " ".join(f"{c:>20}" for c in cells))
    return "\n".join(lines)


def plot(ds, out: Path, *, quick: bool = False) -> list[Path]:
    """One bar panel per quantity, seeds as dots."""
    methods = list(ds.optimizer.values)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4 * len(PANELS), 4.3),
                             constrained_layout=True)  # fmt: skip
    suptitle(fig, "Seed 003 Tables 4/6 analog: sharpness of the final models", ds.attrs)
    for ax, (k, label) in zip(axes, PANELS, strict=True):
        for i, m in enumerate(methods):
            v = ds[k].sel(optimizer=m).values
            ax.bar(i, v.mean(), color=f"C{i}", alpha=0.6)
            ax.plot(np.full(v.size, i), v, "k.", ms=5)
        ax.set_xticks(range(len(methods)), [str(m).upper() for m in methods], fontsize=8)
        ax.set(title=label)
    name = "sam_family_sharpness" + ("_quick" if quick else "")
    return [save_figure(fig, Path(out) / f"{name}.png")]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (or load) and render; prints the table."""
    ds = compute(results_dir, quick=quick, recompute=recompute)
    print(summary(ds))
    return plot(ds, Path(out_dir), quick=quick)


def main(argv=None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
