"""Beyond both seeds: are stage-wise feature-learning events spectral restructuring events?

Linear attention (main paper's ATTN_S, Figure 1 setting, 8 paired runs, GD / GD + upsampling /
SAM, spectra every 10 steps) and the seed-004 Markov minimal model (AdamW / SAM / hard and random
upsampling, CPU scale, spectra every 10 steps), via :mod:`sims.sosd.bridge`.

Reads ``results/sosd_bridge/la.nc`` and ``results/sosd_bridge/markov_seed<s>.nc`` (computed when
missing: the linear-attention part takes minutes, each Markov seed ~20 min on 2 idle cores), and
the pooled batches ``la_seed<s>.nc`` / ``la_seed<s>_valuerow.nc`` (seeds 0-7 under today's value
init and the one before commit 4d1fae3; ``--recompute`` reruns them, ~15 CPU-s each).
Panels: (a) one GD run of linear attention: loss, ΔΣ of the merged matrix, loss-drop times and the
ΔΣ peaks; (b) |peak − drop| / drop per stage for every run and arm, against the chance level of
randomly placed peaks; (c) the SoSD onset of the merged matrix, arm − GD per paired run,
pooled over the batches, under each value init, with the sign test's count and p; (d)–(f) the
same for the Markov model (ΔΣ of the attention matrices A[h], stage = first step a head puts half
its attention on a pattern).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="sosd_bridge",
    title="SoSD bridge: stage-wise learning vs spectral restructuring (linear attention, Markov)",
    paper_ref="beyond the papers (seed 002 x main, seed 004)",
    result_file="sosd_bridge/la.nc",
    producer="figures.fig_sosd_bridge.compute_la() / compute_markov() (sims.sosd.bridge)",
    extra="torch",
)

MARKOV_SEEDS = (0,)
#: The linear-attention batches (seeds) pooled for the onset finding, under each value init
#: (:data:`sims.linear_attention.models.VALUE_INITS`; ~15 CPU-s per batch).
POOLED_SEEDS = tuple(range(8))
POOLED_INITS = ("linattn-icl", "value-row")


def _paths(results_dir, quick: bool) -> dict[str, Path]:
    base = Path(results_dir) / "sosd_bridge" / ("quick" if quick else "")
    return {"la": base / "la.nc", "markov": base / "markov_seed{seed}.nc"}


def compute_la(results_dir, *, quick: bool = False) -> Path:
    """Run the linear-attention study and write ``la.nc``."""
    from sims.runtime.io import provenance, write_netcdf
    from sims.sosd.bridge import LAStudyConfig, la_study

    cfg = (LAStudyConfig(n_runs=2, num_steps=801, n_examples=2000, learning_rate=0.1)
           if quick else LAStudyConfig())  # fmt: skip
    ds = la_study(cfg)
    path = _paths(results_dir, quick)["la"]
    write_netcdf(path, ds, meta=provenance(cfg, seed=cfg.seed, status=ds.attrs["status"]))
    return path


def batch_path(results_dir, seed: int, value_init: str) -> Path:
    """``sosd_bridge/la_seed<s>.nc`` (today's value init) or ``la_seed<s>_valuerow.nc``."""
    suffix = "" if value_init == "linattn-icl" else "_" + value_init.replace("-", "")
    return Path(results_dir) / "sosd_bridge" / f"la_seed{seed}{suffix}.nc"


def compute_la_pooled(results_dir, *, seeds: Sequence[int] = POOLED_SEEDS,
                      value_inits: Sequence[str] = POOLED_INITS,
                      recompute: bool = False) -> list[Path]:  # fmt: skip
    """One full linear-attention batch (8 paired runs) per seed and value init.

    Saved batches are skipped unless ``recompute``. They feed the pooled onset finding and its
    value-init robustness row.
    """
    from sims.runtime.io import provenance, write_netcdf
    from sims.sosd.bridge import LAStudyConfig, la_study

    out = []
    for vi in value_inits:
        for s in seeds:
            path = batch_path(results_dir, s, vi)
            if recompute or not path.exists():
                cfg = LAStudyConfig(seed=s, value_init=vi)
                ds = la_study(cfg)
                write_netcdf(path, ds, meta=provenance(cfg, seed=s, status=ds.attrs["status"]))
            out.append(path)
    return out


def compute_markov(results_dir, *, seeds: Sequence[int] = MARKOV_SEEDS, quick: bool = False,
                   progress: bool = False) -> list[Path]:  # fmt: skip
    """Run the Markov study for each seed (skipping seeds already saved)."""
    from sims.markov.experiments import minimal_exp, reseed, sweep_exp
    from sims.runtime.io import provenance, write_netcdf
    from sims.sosd.bridge import markov_study

    base = minimal_exp("quick") if quick else sweep_exp("cpu")
    out = []
    for s in seeds:
        path = Path(str(_paths(results_dir, quick)["markov"]).format(seed=s))
        if not path.exists():
            exp = reseed(base, s)
            summary, runs = markov_study(exp, every=2 if quick else 10, seed=s, progress=progress)
            write_netcdf(path, summary, meta=provenance(exp.to_dict(), seed=s))
        out.append(path)
    return out


def _offsets(align: dict, arms) -> dict[str, list[float]]:
    out = {}
    for a in arms:
        items = align[a] if isinstance(align[a], list) else [align[a]]
        out[a] = [float(x) for it in items for x in it["relative"]]
    return out


def _chance(align: dict) -> float:
    vals = []
    for items in align.values():
        for it in items if isinstance(items, list) else [items]:
            x = float(it.get("chance_relative", "nan"))  # JSON round trip: "nan" strings
            if np.isfinite(x):
                vals.append(x)
    return float(np.median(vals)) if vals else float("nan")


def _onset_panel(c, la, pooled) -> None:
    """(c) Paired onset differences (arm − GD) per run, pooled over batches, per value init."""
    from scipy.stats import binomtest

    if not pooled:  # one batch: the runs of ``la``
        pooled = {"linattn-icl": [{"seed": int(la.attrs.get("config", {}).get("seed", 0)),
                                   **{a: [None if not np.isfinite(x) else float(x)
                                          for x in la.onset.sel(arm=a).values]
                                      for a in ("gd", "gd_upsample", "sam")}}]}  # fmt: skip
    inits = [i for i in POOLED_INITS if i in pooled]
    labels, x0 = [], 0
    for init in inits:
        for arm, col in (("gd_upsample", "tab:orange"), ("sam", "tab:green")):
            d = [b2 - a2 for b in pooled[init] for a2, b2 in zip(b["gd"], b[arm], strict=True)
                 if a2 is not None and b2 is not None]  # fmt: skip
            d = np.asarray(d, float)
            x = x0 + 0.12 * np.linspace(-1, 1, d.size) if d.size else []
            c.plot(x, d, "o", ms=3.5, color=col, alpha=0.7)
            earlier, later = int((d < 0).sum()), int((d > 0).sum())
            p = binomtest(earlier, earlier + later).pvalue if earlier + later else float("nan")
            c.text(x0, 1.01, f"{earlier}/{earlier + later} earlier\np = {p:.1g}", ha="center",
                   va="bottom", fontsize=7, transform=c.get_xaxis_transform())  # fmt: skip
            lab = "GD+UP − GD" if arm == "gd_upsample" else "SAM − GD"
            nb = len(pooled[init])
            labels.append(f"{lab}\nv init: {init}\n({nb} batch{'es' if nb != 1 else ''})")
            x0 += 1
    c.axhline(0, color="k", lw=0.8)
    c.set_xticks(range(len(labels)), labels, fontsize=7)
    c.set_ylabel("onset(arm) − onset(GD), paired run (steps)")
    c.set_title("(c) SoSD onset of M, arm − GD per paired run (< 0: earlier)", pad=26)


def _committed_pooled() -> dict | None:
    """The pooled batches' onsets from the committed summary numbers (no batch in results/)."""
    from figures.report import store

    p = store.numbers_path("sosd_bridge")
    return store.read_summary_json(p).get("numbers", {}).get("pooled") if p.exists() else None


def plot(la, markov: list, path=None, pooled=None):
    """Six panels (Markov panels empty when no Markov result is given).

    ``pooled``: the onsets per batch and value init (:func:`figures.report.sources.
    bridge_batches`) for panel (c); without it, the runs of ``la``.
    """
    fig, ax = plt.subplots(2, 3, figsize=(17, 9), constrained_layout=True)
    (a, b, c), (d, e, f) = ax
    # (a) one linear-attention GD run
    r = la.sel(arm="gd").isel(run=0)
    steps = la.step.values
    a.semilogy(steps, r.train_loss.values, "k", lw=1.2, label="train loss")
    a2 = a.twinx()
    a2.semilogy(steps, r.delta_sigma.sel(matrix="merged").values, color="tab:purple", lw=0.8,
                label="ΔΣ merged M (10 steps)")  # fmt: skip
    a2.semilogy(steps, r.delta_sigma.sel(matrix="key").values, color="tab:orange", lw=0.6,
                alpha=0.7, label="ΔΣ keys")  # fmt: skip
    a2.set_ylabel("ΔΣ: SD variation over 10 steps (log)")
    for t in r.drop_time.values:
        if np.isfinite(t):
            a.axvline(t, color="gray", ls="--", lw=0.8)
    a.set(xlabel="step", ylabel="train loss", title="(a) linear attention, GD run 0: loss drops "
          "(dashed) vs ΔΣ")  # fmt: skip
    a2.legend(fontsize=8, loc="upper right")
    # (b) alignment, keys and merged matrix
    from sims.sosd.bridge import alignment_table

    arms = list(la.arm.values)
    data, labels = [], []
    for mat in ("key", "merged"):
        offs = _offsets(alignment_table(la, mat), arms)
        for k in arms:
            data.append(np.maximum(offs[k], 1e-4))
            labels.append(f"{mat}\n{k.replace('gd_upsample', 'upsample')}")
    b.boxplot(data, tick_labels=labels)
    b.tick_params(axis="x", labelsize=7)
    b.set_yscale("log")
    b.axhline(_chance(la.attrs["alignment"]), color="r", ls="--", label="chance (random peaks)")
    b.set(ylabel="|ΔΣ peak − loss drop| / drop time",
          title="(b) each loss drop vs the nearest ΔΣ peak")  # fmt: skip
    b.legend(fontsize=8)
    _onset_panel(c, la, pooled)
    if markov:
        m0 = markov[0]
        runs = list(m0.run.values)
        st = m0.step.values
        d.semilogy(st, m0.a_delta_sigma.sel(run="adamw").values, color="tab:purple", lw=0.8,
                   label="ΔΣ of A (geo. mean over heads)")  # fmt: skip
        for t in m0.pattern_time.sel(run="adamw").values:
            if np.isfinite(t):
                d.axvline(t, color="gray", ls="--", lw=0.8)
        d.set(
            xlabel="step",
            ylabel="ΔΣ (10 steps)",
            title="(d) Markov minimal model, AdamW: stage times (dashed) vs ΔΣ",
        )
        d.legend(fontsize=8, loc="upper right")
        mo = {k: [] for k in runs}
        for m in markov:
            al = m.attrs["alignment"]
            keys = [f"{k}/per_head" if f"{k}/per_head" in al else k for k in runs]
            for k, v in zip(runs, _offsets(al, keys).values(), strict=True):
                mo[k].extend(v)
        e.boxplot([np.maximum(mo[k], 1e-4) if mo[k] else [np.nan] for k in runs],
                  tick_labels=[k.replace("upsample_", "up_") for k in runs])  # fmt: skip
        e.set_yscale("log")
        ch = [x for x in (_chance(m.attrs["alignment"]) for m in markov) if np.isfinite(x)]
        if ch:
            e.axhline(float(np.median(ch)), color="r", ls="--", label="chance")
        e.set(
            ylabel="|ΔΣ peak − stage| / stage time",
            title=f"(e) Markov: stages vs the heads' ΔΣ(A[h]) peaks, {len(markov)} seed(s)",
        )
        e.legend(fontsize=8)
        onm = np.stack([m.onset.values for m in markov])  # (seed, run)
        for i in range(len(runs)):
            f.plot(np.full(onm.shape[0], i), onm[:, i], "o")
        f.set(
            xticks=range(len(runs)),
            xticklabels=[k.replace("upsample_", "up_") for k in runs],
            ylabel="SoSD onset of A (floor detector)",
            title="(f) Markov: onset per run",
        )
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved results, computing missing ones."""
    from sims.runtime.extras import require
    from sims.runtime.io import read_netcdf

    require("jax", what="figure 'sosd_bridge' (linear-attention part)")
    paths = _paths(results_dir, quick)
    if recompute or not paths["la"].exists():
        compute_la(results_dir, quick=quick)
    seeds = (0,) if quick else MARKOV_SEEDS
    mk = [Path(str(paths["markov"]).format(seed=s)) for s in seeds]
    if recompute:
        for p in mk:
            p.unlink(missing_ok=True)
    compute_markov(results_dir, seeds=seeds, quick=quick)
    pooled = None
    if not quick:
        from figures.report.sources import bridge_batches

        if recompute:  # ~16 × 15 CPU-s; drawn from what is saved otherwise
            compute_la_pooled(results_dir, recompute=True)
        pooled = bridge_batches(results_dir) or _committed_pooled()
    out = Path(out_dir) / ("fig_sosd_bridge_quick.png" if quick else "fig_sosd_bridge.png")
    plot(read_netcdf(paths["la"]), [read_netcdf(p) for p in mk], out, pooled=pooled)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
