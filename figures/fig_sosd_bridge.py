"""Beyond both seeds: are stage-wise feature-learning events spectral restructuring events?

Linear attention (main paper's ATTN_S, Figure 1 setting, 8 paired runs, GD / GD + upsampling /
SAM, spectra every 10 steps) and the seed-004 Markov minimal model (AdamW / SAM / hard and random
upsampling, CPU scale, spectra every 10 steps), via :mod:`sims.spectral_bridge`.

Reads ``results/sosd_bridge/la.nc`` and ``results/sosd_bridge/markov_seed<s>.nc`` (computed when
missing: the linear-attention part takes minutes, each Markov seed ~20 min on 2 idle cores).
Panels: (a) one GD run of linear attention: loss, ΔΣ of the merged matrix, loss-drop times and the
ΔΣ peaks; (b) |peak − drop| / drop per stage for every run and arm, against the chance level of
randomly placed peaks; (c) SoSD onset of the merged matrix per arm (paired runs); (d)–(f) the
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
    producer="figures.fig_sosd_bridge.compute_la() / compute_markov() (sims.spectral_bridge)",
    extra="torch",
)

MARKOV_SEEDS = (0, 1)


def _paths(results_dir, quick: bool) -> dict[str, Path]:
    base = Path(results_dir) / "sosd_bridge" / ("quick" if quick else "")
    return {"la": base / "la.nc", "markov": base / "markov_seed{seed}.nc"}


def compute_la(results_dir, *, quick: bool = False) -> Path:
    """Run the linear-attention study and write ``la.nc``."""
    from sims.io import provenance, write_netcdf
    from sims.spectral_bridge import LAStudyConfig, la_study

    cfg = (LAStudyConfig(n_runs=2, num_steps=801, n_examples=2000, learning_rate=0.1)
           if quick else LAStudyConfig())  # fmt: skip
    ds = la_study(cfg)
    path = _paths(results_dir, quick)["la"]
    write_netcdf(path, ds, meta=provenance(cfg, seed=cfg.seed, status=ds.attrs["status"]))
    return path


def compute_markov(results_dir, *, seeds: Sequence[int] = MARKOV_SEEDS, quick: bool = False,
                   progress: bool = False) -> list[Path]:  # fmt: skip
    """Run the Markov study for each seed (skipping seeds already saved)."""
    from sims.io import provenance, write_netcdf
    from sims.markov.experiments import minimal_exp, reseed, sweep_exp
    from sims.spectral_bridge import markov_study

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


def plot(la, markov: list, path=None):
    """Six panels (Markov panels empty when no Markov result is given)."""
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
    for t in r.drop_time.values:
        if np.isfinite(t):
            a.axvline(t, color="gray", ls="--", lw=0.8)
    a.set(xlabel="step", ylabel="train loss", title="(a) linear attention, GD run 0: loss drops "
          "(dashed) vs ΔΣ")  # fmt: skip
    a2.legend(fontsize=8, loc="upper right")
    # (b) alignment, keys and merged matrix
    from sims.spectral_bridge import alignment_table

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
    # (c) onsets
    on = la.onset.values  # (arm, run)
    for i in range(len(arms)):
        c.plot(np.full(on.shape[1], i) + np.linspace(-0.1, 0.1, on.shape[1]), on[i], "o")
    for j in range(on.shape[1]):
        c.plot(range(len(arms)), on[:, j], color="gray", lw=0.5)
    c.set(xticks=range(len(arms)), xticklabels=arms, ylabel="SoSD onset of M (floor detector)",
          title="(c) onset per arm, paired runs")  # fmt: skip
    if markov:
        m0 = markov[0]
        runs = list(m0.run.values)
        st = m0.step.values
        d.semilogy(st, m0.a_delta_sigma.sel(run="adamw").values, color="tab:purple", lw=0.8,
                   label="ΔΣ of A (geo. mean over heads)")  # fmt: skip
        for t in m0.pattern_time.sel(run="adamw").values:
            if np.isfinite(t):
                d.axvline(t, color="gray", ls="--", lw=0.8)
        d.set(xlabel="step", ylabel="ΔΣ (10 steps)",
              title="(d) Markov minimal model, AdamW: stage times (dashed) vs ΔΣ")
        d.legend(fontsize=8, loc="upper right")
        mo = {k: [] for k in runs}
        for m in markov:
            for k, v in _offsets(m.attrs["alignment"], runs).items():
                mo[k].extend(v)
        e.boxplot([np.maximum(mo[k], 1e-4) if mo[k] else [np.nan] for k in runs],
                  tick_labels=[k.replace("upsample_", "up_") for k in runs])  # fmt: skip
        e.set_yscale("log")
        ch = [x for x in (_chance(m.attrs["alignment"]) for m in markov) if np.isfinite(x)]
        if ch:
            e.axhline(float(np.median(ch)), color="r", ls="--", label="chance")
        e.set(ylabel="|ΔΣ peak − stage| / stage time",
              title=f"(e) Markov: stages vs ΔΣ(A) peaks, {len(markov)} seed(s)")
        e.legend(fontsize=8)
        onm = np.stack([m.onset.values for m in markov])  # (seed, run)
        for i in range(len(runs)):
            f.plot(np.full(onm.shape[0], i), onm[:, i], "o")
        f.set(xticks=range(len(runs)), xticklabels=[k.replace("upsample_", "up_") for k in runs],
              ylabel="SoSD onset of A (floor detector)", title="(f) Markov: onset per run")
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved results, computing missing ones."""
    from sims.extras import require
    from sims.io import read_netcdf

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
    out = Path(out_dir) / ("fig_sosd_bridge_quick.png" if quick else "fig_sosd_bridge.png")
    plot(read_netcdf(paths["la"]), [read_netcdf(p) for p in mk], out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
