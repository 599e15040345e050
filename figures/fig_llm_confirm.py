"""Figure 4 style: upsampling ablations on the generated MathInstruct-like corpus (issue 14).

The paired differences (seeds as dots, 95 % t-intervals) behind the findings page's
confirmation rows (issues 28, 29): average accuracy (the paper's metric, the rows' first) and
mean held-out loss (the companion) for every comparison the page judges, each with the
equivalence band of the no-effect claims; the worst-source loss at 3 and 5 epochs; the
per-source change; entropy vs accuracy per seed; the loss levels. See :func:`plot`. Reads
``results/llm/confirm_cpu/results.nc`` (``python -m
llm_validation confirm --scale cpu``) and, for the 5-epoch check,
``results/llm/confirm_cpu_ep5/results.nc`` (or its committed summary numbers).
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
    ("(d) compute-matched",
     {"ft": "FT", "ft_matched": "FT, FT+UP's\nsteps", "random": "rand.", "easy": "easy",
      "ft_up": "hard"}),  # fmt: skip
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


#: The paired differences the findings page judges: (label, a, b) for ``a − b``.
LOSS_ITEMS = (
    ("FT+UP − FT", "ft_up", "ft"),
    ("FT+UP − FT (step-matched)", "ft_up", "ft_matched"),
    ("random − FT", "random", "ft"),
    ("easy − FT", "easy", "ft"),
    ("FT+UP − random", "ft_up", "random"),
    ("FT+UP − easy", "ft_up", "easy"),
    ("traj. − ckpt.", "ft_up", "ft_up_last"),
    ("K = 10 − K = 5", "ft_up_k10", "ft_up"),
    ("K = 15 − K = 5", "ft_up_k15", "ft_up"),
    ("target proxy − small", "ft_up_self", "ft_up"),
    ("Muon+UP − Muon", "ft_up_muon", "ft_muon"),
    ("FT+UP − FSAM (ρ untuned)", "ft_up", "ft_fsam"),
    ("FSAM − FT (ρ untuned)", "ft_fsam", "ft"),
)
#: No-effect claims (equivalence band drawn): random − FT, K = 10/15 − K = 5, proxy.
EQUIV = {("random", "ft"), ("ft_up_k10", "ft_up"), ("ft_up_k15", "ft_up"), ("ft_up_self", "ft_up")}


def _forest(ax, rows, unit: str, title: str, margin: float | None = None) -> None:
    """Paired differences: seeds (dots), mean (tick) and 95 % t-interval (line) per row.

    The equivalence band ±margin is drawn behind the no-effect rows.
    """
    from figures.report.verdicts import t_interval

    ax.axvline(0, color="k", lw=0.8)
    for y, (_, d, equiv) in enumerate(rows):
        if equiv and margin:
            ax.fill_betweenx([y - 0.4, y + 0.4], -margin, margin, color="tab:green", alpha=0.15,
                             lw=0)  # fmt: skip
        m, lo, hi, _ = t_interval(d)
        col = "tab:blue" if not (lo < 0 < hi) else "tab:gray"
        ax.plot([lo, hi], [y, y], color=col, lw=2.2)
        ax.plot([m], [y], "|", color=col, ms=14, mew=2.5)
        ax.plot(d, np.full(len(d), y) + np.linspace(-0.15, 0.15, len(d)), "o", ms=3.5,
                color="k", alpha=0.6)  # fmt: skip
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"paired difference ({unit}); line: 95 % t-interval, dots: seeds")
    ax.set_title(title, fontsize=10)


def plot(ds, out: Path, tag: str = "", ep5: dict | None = None) -> list[Path]:
    """The paired differences behind the findings page's confirmation rows.

    (a) average accuracy (the paper's metric) for every comparison the page judges, with the
    equivalence band (± :data:`llm_validation.experiments.confirm.ACCURACY_MARGIN`) behind the
    no-effect claims; (b) worst-source held-out loss at 3 epochs and, from ``ep5`` (the 5-epoch
    run's :func:`~figures.report.sources.confirm_numbers`; labelled when it ran at another scale),
    at 5; (c) mean held-out loss (the companion metric; band ± half the main effect); (d)
    per-source change against the source's FT loss; (e) FT+UP − FT per
    seed, entropy of learning times vs accuracy; (f) held-out loss levels (FT, random, easy,
    hard). Blue: the 95 % interval excludes 0; grey: it contains 0.
    """
    from figures.report.sources import confirm_numbers
    from figures.report.sources import paired_per_seed as paired

    nums = confirm_numbers(ds)
    pairs = nums["pairs"]
    have = set(ds["variant"].values.tolist())
    fig, axes = plt.subplots(2, 3, figsize=(20, 10.5), constrained_layout=True)
    (a, b, c), (d, e, f) = axes
    main = paired(pairs, "ft_up", "ft", "mean_loss") if "heldout_loss" in ds else None
    margin = abs(float(np.mean(main))) / 2 if main else None
    if "heldout_loss" in ds:
        rows = []
        for label, x, y in LOSS_ITEMS:
            dd = paired(pairs, x, y, "mean_loss")
            if dd is not None:
                rows.append((label, dd, (x, y) in EQUIV))
        band = f"; green: equivalence margin ±{margin:.2g}" if margin else ""
        _forest(c, rows, "nats/token", "(c) mean held-out loss (the companion metric), a − b "
                f"(< 0: a better)\n{band.removeprefix('; ')}", margin)  # fmt: skip
        rows = []
        for label, x, y in (("FT+UP − FT, 3 epochs", "ft_up", "ft"),
                            ("FT+UP − random, 3 epochs", "ft_up", "random"),
                            ("FT+UP − easy, 3 epochs", "ft_up", "easy")):  # fmt: skip
            dd = paired(pairs, x, y, "worst_loss")
            if dd is not None:
                rows.append((label, dd, False))
        if ep5 is not None:
            dd = paired(ep5["pairs"], "ft_up", "ft", "worst_loss")
            other = ep5.get("scale", ds.attrs.get("scale")) != ds.attrs.get("scale")
            if dd is not None:
                rows.append(("FT+UP − FT, 5 epochs" + (f"\n(previous scale, {len(dd)} seeds)"
                                                       if other else ""), dd, True))  # fmt: skip
        worst = nums["worst_source"].get("ft", {}).get("name", "?")
        _forest(b, rows, "nats/token", f"(b) worst-source ({worst}) held-out loss; 5-epoch check"
                + ("" if ep5 is not None else " not available") + "\n(green: ±margin, 'gone')",
                margin)  # fmt: skip
    from llm_validation.experiments.confirm import ACCURACY_MARGIN

    rows = []
    for label, x, y in LOSS_ITEMS:
        dd = paired(pairs, x, y, "accuracy")
        if dd is not None:
            rows.append((label, dd, (x, y) in EQUIV))
    _forest(a, rows, "points", "(a) average accuracy, a − b (the paper's metric; > 0: a better)\n"
            f"green: equivalence margin ±{ACCURACY_MARGIN:g} point", ACCURACY_MARGIN)  # fmt: skip
    if "heldout_loss" in ds and {"ft", "ft_up"} <= have:
        per = ds["heldout_loss"].groupby("heldout_source").mean("heldout")  # (v, seed, src)
        ft = per.sel(variant="ft").mean("seed").values
        for v, lab, col in (("ft_up", "hard", "C3"), ("random", "rand.", "C1"),
                            ("easy", "easy", "C2")):  # fmt: skip
            if v in have:
                dv = per.sel(variant=v).mean("seed").values - ft
                d.plot(ft, dv, "o", color=col, alpha=0.8, label=f"{lab} − FT")
        d.axhline(0, color="k", lw=0.6)
        d.legend(fontsize=8)
    d.set(title="(d) per source, seed mean, vs FT", xlabel="FT held-out loss of the source "
          "(nats/token)", ylabel="Δ held-out loss vs FT (nats/token)")  # fmt: skip
    if {"ft", "ft_up"} <= have:
        avg = 100 * ds["accuracy"].mean("benchmark")
        de = (ds["entropy_sources"].sel(variant="ft_up")
              - ds["entropy_sources"].sel(variant="ft")).values  # fmt: skip
        da = (avg.sel(variant="ft_up") - avg.sel(variant="ft")).values
        e.plot(de, da, "o")
        for s_, x, y in zip(ds["seed"].values, de, da, strict=True):
            e.annotate(f"seed {s_}", (x, y), fontsize=8, xytext=(4, 4),
                       textcoords="offset points")  # fmt: skip
        e.axhline(0, color="k", lw=0.6)
        e.axvline(0, color="k", lw=0.6)
    e.set(title="(e) FT+UP − FT per seed", xlabel="Δ entropy of learning times (nats)",
          ylabel="Δ avg accuracy (points)")  # fmt: skip
    if "heldout_loss" in ds:
        _strip(f, ds["heldout_loss"].mean("heldout"), "(f) held-out loss levels (lower is "
               "better)", PANELS[3][1], "held-out loss (nats/token)",
               float(ds["heldout_loss"].mean("heldout").sel(variant="ft").mean())
               if "ft" in have else None)  # fmt: skip
        f.legend(fontsize=8)
    fig.suptitle(
        f"Upsampling confirmation, generated corpus ({ds.attrs.get('scale')} scale, "
        f"{ds.sizes['seed']} seeds): the paired differences the findings page judges"
    )
    return [save_figure(fig, Path(out) / f"llm_confirm{tag}.png", dpi=110)]


def _ep5(results_dir) -> dict | None:
    """The 5-epoch run's pairs: from its results, else from the committed summary numbers."""
    from figures.report import store
    from figures.report.sources import confirm_numbers
    from sims.runtime.io import read_netcdf

    path = Path(results_dir) / "llm" / "confirm_cpu_ep5" / "results.nc"
    if path.exists():
        return confirm_numbers(read_netcdf(path))
    p = store.numbers_path("llm_confirm_ep5")
    return store.read_summary_json(p).get("numbers") if p.exists() else None


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Run (or load) the confirmation at the CPU scale (``quick``: the smoke scale), render."""
    from llm_validation.experiments.confirm import SCALES, run_confirmation
    from sims.runtime.io import read_netcdf

    scale = "quick" if quick else "cpu"
    folder = Path(results_dir) / "llm" / f"confirm_{scale}"
    path = folder / "results.nc"
    if recompute or not path.exists():
        if recompute and (folder / "jobs").exists():
            import shutil

            shutil.rmtree(folder / "jobs")
        run_confirmation(SCALES[scale], folder, quiet=quick)
    ep5 = None if quick else _ep5(results_dir)
    return plot(read_netcdf(path), Path(out_dir), "_quick" if quick else "", ep5=ep5)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_llm_confirm [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
