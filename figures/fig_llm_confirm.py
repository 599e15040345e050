"""Figure 4 style: upsampling ablations on the generated MathInstruct-like corpus (issue 14).

Top row: average accuracy over the six benchmarks; bottom row: mean solution loss on clean
held-out problems of the training distribution (the low-variance companion); dots: seeds, bar:
mean. Panels (a) proxy choice, (b) trajectory vs last checkpoint, (c) trajectory length 5/10/15,
(d) FT / random / easy / hard upsampling (compute-matched), (e) optimizers, (f) paired change of
the learning-time entropy (eq. 11) vs the paired accuracy change, FT+UP minus FT, per seed, (g)
per-source held-out loss change against the source's FT loss (does upsampling help the
worst-learned sources?). Reads
``results/llm/confirm_cpu/results.nc`` (``python -m llm_validation confirm --scale cpu``).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="llm_confirm",
    title="Upsampling ablations on the generated math corpus (FT, FT+UP, random, easy, ...)",
    paper_ref="main paper Fig. 4 and Tables 2, 4, 6 (confirmation, issue 14)",
    result_file="llm/confirm_cpu/results.nc",
    producer="python -m llm_validation confirm --scale cpu",
    extra="llm",
)

PANELS = [
    ("(a) proxy", {"ft_up": "small", "ft_up_self": "= target"}),
    ("(b) clustering", {"ft_up": "traj.", "ft_up_last": "ckpt."}),
    ("(c) checkpoints", {"ft_up": "5", "ft_up_k10": "10", "ft_up_k15": "15"}),
    ("(d) compute-matched", {"ft": "FT", "random": "rand.", "easy": "easy", "ft_up": "hard"}),
    (
        "(e) optimizers",
        {
            "ft": "AdamW",
            "ft_up": "AdamW+UP",
            "ft_muon": "Muon",
            "ft_up_muon": "Muon+UP",
            "ft_fsam": "FSAM",
        },
    ),  # fmt: skip
]


def _strip(ax, values, title: str, cols: dict, ylabel: str, ref: float | None) -> None:
    """Dots per seed and a bar at the mean for the variants of one panel."""
    have = set(values["variant"].values.tolist())
    names = [c for c in cols if c in have]
    for i, v in enumerate(names):
        vals = values.sel(variant=v).values
        ax.plot(np.full(vals.size, i), vals, "o", color=f"C{i}", alpha=0.6)
        ax.plot([i - 0.3, i + 0.3], [np.nanmean(vals)] * 2, color=f"C{i}", lw=2.5)
    if ref is not None:
        ax.axhline(ref, color="grey", lw=0.8, ls="--", label="FT mean")
    ax.set_xticks(range(len(names)), [cols[n] for n in names], fontsize=8)
    ax.set(title=title, ylabel=ylabel)
    if not names:
        ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)


def plot(ds, out: Path, tag: str = "") -> list[Path]:
    """Accuracy (top row) and held-out solution loss (bottom row) per ablation panel.

    Reads the aggregate of :func:`llm_validation.confirm.run_confirmation`; the bottom row is
    drawn when the results carry ``heldout_loss``.
    """
    rows = [(100 * ds["accuracy"].mean("benchmark"), "avg accuracy (%)", "higher is better")]
    if "heldout_loss" in ds:
        rows.append((ds["heldout_loss"].mean("heldout"), "held-out loss (nats/token)",
                     "lower is better"))  # fmt: skip
    have = set(ds["variant"].values.tolist())
    fig, axes = plt.subplots(len(rows), 6, figsize=(22, 3.6 * len(rows)), squeeze=False,
                             constrained_layout=True)  # fmt: skip
    for r, (values, ylabel, better) in enumerate(rows):
        ref = float(values.sel(variant="ft").mean()) if "ft" in have else None
        for ax, (title, cols) in zip(axes[r], PANELS, strict=False):
            _strip(ax, values, f"{title} ({better})", cols, ylabel, ref)
        axes[r, 0].legend(fontsize=7, loc="best")
    ax = axes[0, 5]
    if {"ft", "ft_up"} <= have:
        avg = rows[0][0]
        de = (ds["entropy_sources"].sel(variant="ft_up")
              - ds["entropy_sources"].sel(variant="ft")).values  # fmt: skip
        da = (avg.sel(variant="ft_up") - avg.sel(variant="ft")).values
        ax.plot(de, da, "o")
        for s, x, y in zip(ds["seed"].values, de, da, strict=True):
            ax.annotate(f"s{s}", (x, y), fontsize=7)
        ax.axhline(0, color="k", lw=0.6)
        ax.axvline(0, color="k", lw=0.6)
    ax.set(title="(f) FT+UP − FT per seed", xlabel="Δ entropy of learning times (nats)",
           ylabel="Δ avg accuracy (points)")  # fmt: skip
    if len(rows) > 1:
        ax = axes[1, 5]
        if {"ft", "ft_up"} <= have:
            per = ds["heldout_loss"].groupby("heldout_source").mean("heldout")  # (v, seed, src)
            ft = per.sel(variant="ft").mean("seed").values
            # colours as in panel (d): rand. C1, easy C2, hard C3
            for v, lab, col in (("ft_up", "hard", "C3"), ("random", "rand.", "C1"),
                                ("easy", "easy", "C2")):  # fmt: skip
                if v in have:
                    d = per.sel(variant=v).mean("seed").values - ft
                    ax.plot(ft, d, "o", color=col, alpha=0.8, label=f"{lab} − FT")
            ax.axhline(0, color="k", lw=0.6)
            ax.legend(fontsize=7)
        ax.set(title="(g) per source, vs FT",
               xlabel="FT held-out loss of the source (nats/token)",
               ylabel="Δ held-out loss vs FT")  # fmt: skip
    fig.suptitle(f"Upsampling ablations, generated corpus ({ds.attrs.get('scale')} scale, "
                 f"{ds.sizes['seed']} seeds; dots: seeds, bars: means)")  # fmt: skip
    return [save_figure(fig, Path(out) / f"llm_confirm{tag}.png", dpi=110)]


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Run (or load) the confirmation at the CPU scale (``quick``: the smoke scale), render."""
    from llm_validation.confirm import SCALES, run_confirmation
    from sims.io import read_netcdf

    scale = "quick" if quick else "cpu"
    folder = Path(results_dir) / "llm" / f"confirm_{scale}"
    path = folder / "results.nc"
    if recompute or not path.exists():
        if recompute and (folder / "jobs").exists():
            import shutil

            shutil.rmtree(folder / "jobs")
        run_confirmation(SCALES[scale], folder, quiet=quick)
    return plot(read_netcdf(path), Path(out_dir), "_quick" if quick else "")


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_llm_confirm [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
