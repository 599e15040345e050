"""Figure 1 analog: ATTN_S training loss under GD, GD + upsampling and SAM (25 paired runs).

Reads ``results/linear_attention/figure1.nc`` (``figure1_quick.nc`` with ``quick``), computing it
with :func:`sims.linear_attention.experiment.run_figure1` when missing. Panels: GD,
GD + upsampling, SAM; thin lines = runs, thick = median; dotted lines = saddle losses
``L(M_m)`` (Appendix A.2); title = median final test (population) loss.

Curves show the population (test) loss rather than the paper's training loss: for GD + upsampling
the training loss is a usage-weighted loss whose scale differs from the saddle levels, while with
P = 80,000 the GD/SAM training and test curves coincide to the line width.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from figures import FigureSpec, figure_main, save_figure

FIGURE = FigureSpec(
    name="la_fig1",
    title="Linear attention (ATTN_S): GD vs GD+upsampling vs SAM, 25 paired runs",
    paper_ref="main paper Figure 1",
    result_file="linear_attention/figure1.nc",
    producer="python -m sims.linear_attention figure1",
    extra="jax",
)

QUICK = dict(
    d=3, n_heads=3, n_examples=2_000, num_steps=1_500, n_runs=4, learning_rate=0.05,
    init_scale=0.05, rho=1e-3, save_every=5,
)  # fmt: skip
LABELS = {"gd": "GD", "gd_upsample": "GD + upsampling", "sam": "SAM"}


def config(quick: bool = False):
    """The Figure 1 configuration (anchor's paper setting, or a seconds-long quick one)."""
    from sims.linear_attention.experiment import Figure1Config

    return Figure1Config(**QUICK) if quick else Figure1Config()


def compute(results_dir: Path, *, quick: bool = False) -> Path:
    """Run the experiment and save it with provenance; returns the result path."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from sims.io import provenance, write_netcdf
    from sims.linear_attention.experiment import run_figure1, summarize

    cfg = config(quick)
    ds = run_figure1(cfg, progress=not quick)
    path = Path(results_dir) / (
        FIGURE.result_file.replace(".nc", "_quick.nc") if quick else FIGURE.result_file
    )
    meta = provenance(
        config=dataclasses.asdict(cfg), seed=cfg.seed, status=ds.attrs["status"],
        extra={"timings": ds.attrs["timings"], "summary": summarize(ds)},
    )  # fmt: skip
    write_netcdf(path, ds, meta=meta)
    return path


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render Figure 1 (computing the result file first when missing or ``recompute``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sims.io import read_netcdf

    path = Path(results_dir) / (
        FIGURE.result_file.replace(".nc", "_quick.nc") if quick else FIGURE.result_file
    )
    if recompute or not path.exists():
        compute(results_dir, quick=quick)
    ds = read_netcdf(path)
    methods = [str(m) for m in ds.method.values]
    levels = ds.saddle_level.values
    fig, axes = plt.subplots(1, len(methods), figsize=(4.2 * len(methods), 3.4), sharey=True)
    axes = np.atleast_1d(axes)
    steps = ds.step.values
    for ax, (i, m) in zip(axes, enumerate(methods), strict=True):
        curves = ds.test_loss.values[i]
        for c in curves:
            ax.plot(steps, c, color="k", lw=0.5, alpha=0.3)
        ax.plot(steps, np.median(curves, axis=0), color="C3", lw=1.8, label="median")
        for lv in levels:
            ax.axhline(lv, color="grey", ls=":", lw=0.8)
        med = float(np.median(ds.final_test_loss.values[i]))
        ax.set_title(f"{LABELS.get(m, m)}\nmedian test loss {med:.4f}", fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1.1 * levels[0])
    axes[0].set_ylabel("test (population) loss")
    right = axes[-1].twinx()
    right.set_ylim(axes[-1].get_ylim())
    right.set_yticks(levels)
    right.set_yticklabels([f"$L(M_{k})$" for k in range(levels.size)], fontsize=8)
    cfg = ds.attrs.get("config", {})
    fig.suptitle(
        f"ATTN_S, d={cfg.get('d')}, N={cfg.get('n_context')}, H={cfg.get('n_heads')}, "
        f"P={cfg.get('n_examples')}, {ds.run.size} runs, SAM ρ={cfg.get('rho')}",
        fontsize=9,
    )
    fig.tight_layout()
    return [
        save_figure(
            fig,
            Path(out_dir)
            / ("fig01_linear_attention_quick.png" if quick else "fig01_linear_attention.png"),
            dpi=150,
        )
    ]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig01_linear_attention [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
