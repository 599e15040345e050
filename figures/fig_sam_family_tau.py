"""Seed 003 Fig. 2 analog: how the sharpness gradient splits into logit and functional paths.

τ_logit, τ_func, τ_cross (eq. 9; they sum to 1) along AdamW training of the Table 1 model,
measured with exact Hessian-vector products on held-out sequences every 25 steps, over 3 seeds;
also along SAM and PFSAM (seed 0; beyond the paper, which measured along AdamW only), with the logit
statistics behind the over-confidence story (entropy, ``1 − ‖p‖²``). Reads
``results/sam_family/tau.nc``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402
from figures._sam_family import TAU_SHARES, suptitle, tau_panel  # noqa: E402

FIGURE = FigureSpec(
    name="sam_family_tau",
    title="Logit vs functional share of the SAM sharpness gradient along training (Fig. 2)",
    paper_ref="seed 003 Fig. 2 (C4 panels), Fig. 4",
    result_file="sam_family/tau.nc",
    producer="python -m figures.fig_sam_family_tau --recompute",
    extra="torch",
)

METHODS = ("adamw", "sam", "pfsam")


def compute(results_dir, *, quick: bool = False, recompute: bool = False):
    """τ along training for each method and seed (loaded when saved)."""
    import xarray as xr

    from sims.lm import experiments as E

    study = E.QUICK_STUDY if quick else E.DEFAULT_STUDY
    methods = ("adamw", "sam") if quick else METHODS

    def run(store):
        # AdamW (the paper's setting) over every seed; the extension methods on the first seed
        base = E.tau_along_training(study, methods=methods[:1], store=store)
        ext = E.tau_along_training(study, methods=methods[1:], seeds=study.seeds[:1], store=store)
        ds = xr.merge([base, ext], join="outer", compat="no_conflicts", combine_attrs="override")
        return ds.sel(optimizer=list(methods))

    return E.run_or_load(
        E.result_path(results_dir, "tau.nc", quick=quick),
        run,
        recompute=recompute,
        config={"figure": FIGURE.name, "methods": methods, "study": study.to_dict()},
    )


def summary(ds) -> str:
    """Quartiles of the τ fractions over seeds and the steps after the first 50, per method."""
    lines = []
    cut = min(50, int(ds.callback_step.max()) // 2)  # quick runs are shorter than 50 steps
    for m in ds.optimizer.values:
        x = ds.sel(optimizer=m).where(ds.callback_step > cut, drop=True)
        for k in ("tau_logit", "tau_func", "tau_cross"):
            q = x[k].quantile([0.0, 0.25, 0.5, 0.75, 1.0]).values
            lines.append(f"{m:>6} {k:>9}: min {q[0]:.3f}  q1 {q[1]:.3f}  median {q[2]:.3f}  "
                         f"q3 {q[3]:.3f}  max {q[4]:.3f}")  # fmt: skip
        init = ds.sel(optimizer=m, callback_step=0)
        lines.append(
            f"{m:>6} at init: τ_logit {float(init.tau_logit.mean()):.3f}, τ_func "
            f"{float(init.tau_func.mean()):.3f}, τ_cross {float(init.tau_cross.mean()):.3f}"
        )
    return "\n".join(lines)


def plot(ds, out: Path, *, quick: bool = False) -> list[Path]:
    """One panel of τ curves per method (mean ± std over seeds), plus logit statistics."""
    methods = list(ds.optimizer.values)
    fig, axes = plt.subplots(1, len(methods) + 1, figsize=(5 * (len(methods) + 1), 4.5),
                             constrained_layout=True)  # fmt: skip
    suptitle(
        fig,
        "Seed 003 Fig. 2 analog: logit vs functional share of the SAM sharpness "
        "gradient ‖H ε*‖² along training (τ_logit + τ_func + τ_cross = 1)",
        ds.attrs,
    )
    steps = ds.callback_step.values
    for ax, m in zip(axes, methods, strict=False):
        v = {k: ds[k].sel(optimizer=m) for k, _ in TAU_SHARES}
        n = int(ds.tau_logit.sel(optimizer=m).notnull().any("callback_step").sum())
        seeds = f"{n} seed{'s' if n != 1 else ''}"
        tau_panel(
            ax,
            steps,
            {k: x.mean("seed") for k, x in v.items()},
            bands={k: x.std("seed") for k, x in v.items()},
            xlabel="step",
            ylabel="share of ‖H ε*‖²",
            title=f"along {str(m).upper()} ({seeds}, mean ± std)",
        )
    ax = axes[-1]
    for i, m in enumerate(methods):
        ax.plot(steps, ds.logit_one_minus_p_sq.sel(optimizer=m).mean("seed"), "-", color=f"C{i}",
                label=f"{str(m).upper()} 1−‖p‖²")  # fmt: skip
        ax.plot(steps, ds.logit_max_prob.sel(optimizer=m).mean("seed"), "--", color=f"C{i}",
                label=f"{str(m).upper()} max p")  # fmt: skip
    ax.set(xlabel="step", title="logit statistics (held-out)")
    ax.legend(fontsize=7)
    name = "sam_family_tau" + ("_quick" if quick else "")
    return [save_figure(fig, Path(out) / f"{name}.png")]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Compute (or load) and render; prints the τ quartiles."""
    ds = compute(results_dir, quick=quick, recompute=recompute)
    print(summary(ds))
    return plot(ds, Path(out_dir), quick=quick)


def main(argv=None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
