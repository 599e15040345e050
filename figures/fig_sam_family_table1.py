"""Seed 003 Table 1 analog: AdamW, SAM, PSAM, FSAM, PFSAM on a small LM trained from scratch.

Equal steps, the same initialization and data order per seed, 3 seeds (mean ± std). The model
is :mod:`sims.lm`'s 0.1M-parameter decoder on the synthetic HMM corpus (Bayes loss known), so the
y axis is the excess validation loss. Reads ``results/sam_family/table1.nc`` and keeps the final
weights in ``results/sam_family/models/`` for the sharpness figure.
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
    name="sam_family_table1",
    title="SAM family vs AdamW on a from-scratch LM (Table 1 analog)",
    paper_ref="seed 003 Table 1",
    result_file="sam_family/table1.nc",
    producer="python -m figures.fig_sam_family_table1 --recompute",
    extra="torch",
)

PAPER = {"adamw": 3.90, "sam": 3.91, "psam": 3.89, "fsam": 3.88, "pfsam": 3.86}


def compute(results_dir, *, quick: bool = False, recompute: bool = False):
    """Table 1 runs (loaded when saved); the final models go to ``.../models``."""
    from sims.lm import experiments as E

    study = E.QUICK_STUDY if quick else E.DEFAULT_STUDY
    path = E.result_path(results_dir, "table1.nc", quick=quick)
    models = path.parent / "models"
    return E.run_or_load(
        path,
        lambda store: E.table1(study, store=store, model_dir=str(models)),
        recompute=recompute,
        config={"figure": FIGURE.name, "study": study.to_dict()},
    )


def summary(ds) -> str:
    """The table as text: mean ± std (and paired Δ vs AdamW) over seeds, next to the paper."""
    base = ds.final_val_loss.sel(optimizer="adamw")
    lines = [f"{'method':>7} {'rho':>5} {'val loss':>17} {'Δ vs AdamW (paired)':>22}  paper"]

    def sd(x):
        return float(x.std(ddof=1)) if x.size > 1 else 0.0

    for m in ds.optimizer.values:
        v = ds.final_val_loss.sel(optimizer=m)
        d = v - base
        paper = PAPER.get(str(m), float("nan"))
        rho = float(ds.sel(optimizer=m)["rho"])
        lines.append(
            f"{m:>7} {rho:5.2g} {float(v.mean()):9.4f} ± {sd(v):.4f} "
            f"{float(d.mean()):+11.4f} ± {sd(d):.4f}  {paper:.2f}"
        )
    seeds = [int(s) for s in ds.seed.values]
    lines.append(f"seeds {seeds}; Bayes loss {ds.attrs['bayes_loss']:.4f}")
    return "\n".join(lines)


def plot(ds, out: Path, *, quick: bool = False) -> list[Path]:
    """Left: excess final loss per method (seeds as dots); right: validation curves."""
    bayes = ds.attrs["bayes_loss"]
    methods = list(ds.optimizer.values)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    suptitle(fig, "Seed 003 Table 1 analog: final validation loss of the SAM family vs AdamW",
             ds.attrs)
    ax = axes[0]
    for i, m in enumerate(methods):
        v = ds.final_val_loss.sel(optimizer=m).values - bayes
        ax.bar(i, v.mean(), yerr=v.std(ddof=1) if v.size > 1 else 0, color=f"C{i}", alpha=0.6,
               capsize=4)  # fmt: skip
        ax.plot(np.full(v.size, i), v, "k.", ms=5)
    ax.set_xticks(range(len(methods)), [m.upper() for m in methods])
    lo = float((ds.final_val_loss - bayes).min())
    hi = float((ds.final_val_loss - bayes).max())
    ax.set(ylim=(lo - 0.2 * (hi - lo + 1e-3), hi + 0.2 * (hi - lo + 1e-3)),
           ylabel="final val loss − Bayes loss (nats)",
           title=f"{ds.sizes['seed']} seeds, paired init and data order")  # fmt: skip
    ax = axes[1]
    for i, m in enumerate(methods):
        c = ds.val_loss.sel(optimizer=m) - bayes
        ax.plot(ds.eval_step, c.mean("seed"), "o-", color=f"C{i}", ms=3, label=m.upper())
    ax.set(yscale="log", xlabel="step", ylabel="val loss − Bayes", title="validation curves")
    ax.legend(fontsize=8)
    name = "sam_family_table1" + ("_quick" if quick else "")
    return [save_figure(fig, Path(out) / f"{name}.png")]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (or load) the runs and render; prints the table."""
    ds = compute(results_dir, quick=quick, recompute=recompute)
    print(summary(ds))
    return plot(ds, Path(out_dir), quick=quick)


def main(argv=None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
