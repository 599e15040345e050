"""Seed 003 Fig. 3 analog: final loss vs the SAM radius ρ, relative to the best PFSAM run.

SAM and PFSAM as in the paper's figure (PFSAM post-normalized: ‖e‖ = ρ) over
ρ ∈ {0.01, 0.03, 0.1, 0.3}, seed 0, on the Table 1 model and data; ρ = 0 is AdamW. Reads
``results/sam_family/rho_sweep.nc``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._sam_family import suptitle  # noqa: E402

FIGURE = FigureSpec(
    name="sam_family_rho",
    title="SAM-family loss vs perturbation radius (Fig. 3 analog)",
    paper_ref="seed 003 Fig. 3",
    result_file="sam_family/rho_sweep.nc",
    producer="python -m figures.fig_sam_family_rho --recompute",
    extra="torch",
)

RHOS = (0.01, 0.03, 0.1, 0.3)
METHODS = ("sam", "pfsam")


def compute(results_dir, *, quick: bool = False, recompute: bool = False):
    """The ρ sweep (loaded when saved)."""
    from sims.lm import experiments as E

    study = E.QUICK_STUDY if quick else E.DEFAULT_STUDY
    rhos = (0.01, 0.3) if quick else RHOS
    return E.run_or_load(
        E.result_path(results_dir, "rho_sweep.nc", quick=quick),
        lambda store: E.rho_sweep(study, rhos=rhos, methods=METHODS, store=store),
        recompute=recompute,
        config={"figure": FIGURE.name, "rhos": rhos, "study": study.to_dict()},
    )


def plot(ds, out: Path, *, quick: bool = False) -> list[Path]:
    """Loss minus the best PFSAM loss vs ρ (log axis); AdamW as the ρ = 0 line."""
    best = float(ds.final_val_loss.sel(optimizer="pfsam").min())
    fig, ax = plt.subplots(figsize=(7, 4.8), constrained_layout=True)
    suptitle(fig, "Seed 003 Fig. 3 analog: final validation loss vs perturbation radius ρ",
             ds.attrs, show_rho=False)
    style = {"sam": ("s-", "C3"), "fsam": ("d-", "C0"), "pfsam": ("o-", "C1")}
    for m in ds.optimizer.values:
        fmt, color = style.get(str(m), ("o-", None))
        ax.plot(ds.rho, ds.final_val_loss.sel(optimizer=m) - best, fmt, color=color,
                label=str(m).upper())  # fmt: skip
    ax.axhline(float(ds.adamw_val_loss) - best, color="k", ls="--", label="AdamW (ρ = 0)")
    ax.axhline(0, color="gray", lw=0.6)
    ax.set(xscale="log", xlabel="ρ (‖e‖ = ρ)", ylabel="val loss − best PFSAM (nats)",
           title=f"seed {ds.attrs['seed']}")  # fmt: skip
    ax.legend(fontsize=8)
    name = "sam_family_rho" + ("_quick" if quick else "")
    return [save_figure(fig, Path(out) / f"{name}.png")]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (or load) and render; prints the table."""
    ds = compute(results_dir, quick=quick, recompute=recompute)
    print(ds.final_val_loss.to_pandas().round(4), f"\nAdamW {float(ds.adamw_val_loss):.4f}")
    return plot(ds, Path(out_dir), quick=quick)


def main(argv=None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
