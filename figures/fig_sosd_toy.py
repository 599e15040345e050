"""Seed 002 Section 4 toy model: two phases, ΔΣ collapse, Lemma A.4, onset scaling (Thm 4.5).

Reads ``results/sosd_toy/toy.nc`` (default configuration of :mod:`sims.sosd.toy`: n=16, d=32, C=8,
σ=0.01, η=0.5, 20k full-batch GD steps, 8 seeds) and ``results/sosd_toy/sweep_onsets.nc`` +
``sweep_fits.json`` (4 seeds × η ∈ {0.125, 0.25, 0.5, 1} × σ ∈ {0.001, …, 0.1}, 4000 steps);
computes them when missing (about 10 min on 2 cores; ``--quick``: seconds).

Panels: (a) loss and ΔΣ per matrix (seed 0) with the theory's ``T_ε`` (ε = 1e-4); (b) Frobenius
norms with the steps where they shrink (Assumption 4.1 violations); (c) Lemma A.4 ratio over all
seeds (≤ 1); (d) ΔL against ΔΣ (all seeds, t ≥ 300) with the fitted slope; (e) what shrinks ΔΣ
after the onset (decades of ΔΣ, of ||∇W|| and of ||W||_*); (f) margins of Assumption 4.7;
(g) flow-time onset ``η T_ε`` (ε ∝ η) against η; (h) ``(η T_Q)²`` against ``ln(1/σ)`` with the
slope Eq. (76) predicts from the fitted growth coefficient.
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
    name="sosd_toy",
    title="SoSD in the Section 4 toy model: phases, Lemma A.4, norm growth, onset scaling",
    paper_ref="seed 002 Sec. 4 (Thm 4.5, 4.9)",
    result_file="sosd_toy/toy.nc",
    producer="figures.fig_sosd_toy.compute() (sims.sosd.toy.train / onset_sweep)",
)

EPS = 1e-4
EPS_PER_ETA = 2e-4
COLORS = {"Q": "tab:blue", "K": "tab:orange", "V": "tab:green"}


def configs(quick: bool = False):
    """The main run and the onset sweep (``ToyConfig`` pair)."""
    from sims.sosd.toy import ToyConfig

    if quick:
        return (ToyConfig(n=8, d=12, classes=4, steps=600, seeds=(0, 1)),
                ToyConfig(n=8, d=12, classes=4, steps=500, seeds=(0,), eta=(0.5, 1.0, 2.0),
                          sigma=(0.003, 0.03, 0.3)))  # fmt: skip
    return (ToyConfig(steps=20_000, seeds=tuple(range(8))),
            ToyConfig(steps=4000, seeds=(0, 1, 2, 3), eta=(0.125, 0.25, 0.5, 1.0),
                      sigma=(0.001, 0.003, 0.01, 0.03, 0.1)))  # fmt: skip


def compute(results_dir, *, quick: bool = False) -> dict[str, Path]:
    """Run both configurations and write the result files (with provenance)."""
    from sims.runtime.io import provenance, write_json, write_netcdf
    from sims.sosd.toy import onset_sweep, summarize, train

    main_cfg, sweep_cfg = configs(quick)
    paths = _paths(results_dir, quick)
    ds = train(main_cfg, progress=not quick)
    keep = ["loss", "delta_loss", "frobenius", "nuclear", "grad_norm", "delta_sigma",
            "a4_ratio", "omega_min", "gamma_min", "gamma_min_proof"]  # fmt: skip
    write_netcdf(paths["toy"], ds[keep], meta=provenance(main_cfg, seed=main_cfg.seeds[0],
                                                         status=ds.attrs["status"]))  # fmt: skip
    windows = ((100, 600),) if quick else ((300, 3000), (1000, 10000), (3000, 20000))
    runs = [summarize(ds, i, eps=EPS, windows=windows) for i in range(ds.sizes["run"])]
    write_json(paths["summary"], {"runs": runs}, meta=provenance(main_cfg))
    sw = train(sweep_cfg, progress=not quick)
    onsets, fits = onset_sweep(sw, eps=EPS, eps_per_eta=EPS_PER_ETA)
    meta = provenance(sweep_cfg, status=sw.attrs["status"])
    write_netcdf(paths["onsets"], onsets, meta=meta)
    write_json(paths["fits"], fits, meta=meta)
    return paths


def _paths(results_dir, quick: bool) -> dict[str, Path]:
    base = Path(results_dir) / "sosd_toy" / ("quick" if quick else "")
    return {"toy": base / "toy.nc", "summary": base / "summary.json",
            "onsets": base / "sweep_onsets.nc", "fits": base / "sweep_fits.json"}  # fmt: skip


def _nanmedian(x) -> float:
    x = np.asarray(x, dtype=float)
    return float(np.median(x[np.isfinite(x)])) if np.isfinite(x).any() else float("nan")


def plot(ds, summary: dict, onsets, fits: dict, path=None):
    """Draw the eight panels from the saved results."""
    fig, axes = plt.subplots(2, 4, figsize=(19, 8.5), constrained_layout=True)
    (a, b, c, d), (e, f, g, h) = axes
    r0 = ds.isel(run=0)
    steps = r0.step.values
    s0 = summary["runs"][0]
    # (a) loss and ΔΣ
    a.loglog(steps[1:], r0.loss.values[1:], color="k", lw=1.5, label="loss")
    a.set(xlabel="GD step", ylabel="loss", title=f"(a) seed 0: loss and ΔΣ (T_ε, ε={EPS:g})")
    a2 = a.twinx()
    for j, m in enumerate("QKV"):
        a2.loglog(steps[:-1], r0.delta_sigma.values[:-1, j], color=COLORS[m], lw=0.8,
                  label=f"ΔΣ {m}")  # fmt: skip
        t = s0["T_eps"][m]
        if np.isfinite(t):
            a.axvline(t, color=COLORS[m], ls="--", lw=0.8)
    a2.axhline(EPS, color="gray", ls=":", lw=0.8)
    a2.set_ylabel("ΔΣ_t = ||Σ̂_{t+1} − Σ̂_t||")
    a2.legend(loc="lower left", fontsize=8)
    # (b) norms and Assumption 4.1 violations
    for j, m in enumerate("QKV"):
        fro = r0.frobenius.values[:, j]
        b.loglog(steps + 1, fro, color=COLORS[m], label=m)
        bad = np.nonzero(np.diff(fro) <= 0)[0]
        b.plot(bad + 1, fro[bad], "x", color=COLORS[m], ms=4)
    viol = [sum(r["norm_violations"][m]["frobenius"] for m in "QKV") for r in summary["runs"]]
    b.set(xlabel="GD step + 1", ylabel="||W||_F",
          title=f"(b) x: ||W||_F shrinks (Assumption 4.1 fails)\n"
                f"per seed: median {np.median(viol):.0f}, range {min(viol)}–{max(viol)}")
    b.legend(fontsize=8)
    # (c) Lemma A.4 ratio
    ratio = ds.a4_ratio.values[:, :-1, :]
    c.semilogx(steps[:-1] + 1, np.nanmax(ratio, axis=(0, 2)), color="k", lw=0.8, label="max")
    c.semilogx(steps[:-1] + 1, np.nanmedian(ratio, axis=(0, 2)), color="gray", lw=0.8,
               label="median")  # fmt: skip
    c.axhline(1.0, color="r", ls="--", lw=0.8)
    c.set(xlabel="GD step + 1", ylabel="ΔΣ / A.4 bound", ylim=(0, 1.05),
          title=f"(c) Lemma A.4 ratio, {ds.sizes['run']} seeds × 3 matrices: "
                f"max {np.nanmax(ratio):.3f}")  # fmt: skip
    c.legend(fontsize=8)
    # (d) ΔL vs ΔΣ
    comb = np.sqrt(np.nansum(ds.delta_sigma.values[:, :-1] ** 2, axis=2))
    dl = ds.delta_loss.values[:, :-1]
    sel = (steps[:-1] >= 300)[None, :] & (dl > 0) & (comb > 0)
    x, y = comb[sel], dl[sel]
    thin = max(1, x.size // 20000)
    d.loglog(x[::thin], y[::thin], ",", color="tab:purple", alpha=0.5)
    slope, icpt = np.polyfit(np.log10(x), np.log10(y), 1)
    xx = np.geomspace(x.min(), x.max(), 10)
    d.loglog(xx, 10**icpt * xx**slope, "k-", lw=1, label=f"fit slope {slope:.2f}")
    d.loglog(xx, 10**icpt * xx.min() ** (slope - 2) * xx**2, "r--", lw=0.8, label="slope 2")
    d.set(xlabel="ΔΣ (Q,K,V combined)", ylabel="ΔL = L_t − L_{t+1}",
          title="(d) loss decrease vs SD variation, t ≥ 300")  # fmt: skip
    d.legend(fontsize=8)
    # (e) collapse decomposition
    parts = {"ΔΣ": [], "||∇W||": [], "||W||_*": []}
    for r in summary["runs"]:
        for m in "QKV":
            dec = r["collapse_decomposition"].get(m)
            if dec:
                parts["ΔΣ"].append(dec["decades_delta_sigma"])
                parts["||∇W||"].append(dec["decades_grad_norm"])
                parts["||W||_*"].append(-dec["decades_nuclear_norm"])
    e.boxplot(list(parts.values()), tick_labels=list(parts))
    e.axhline(0, color="gray", lw=0.5)
    e.set(ylabel="decades (from T_ε to the end)",
          title="(e) ΔΣ collapse after the onset: gradient decay\nvs norm growth (−Δlog||W||_*)")
    # (f) margins
    for name, lab in (("omega_min", "ω_min (logit)"), ("gamma_min", "γ_min (attn, 4.7)"),
                      ("gamma_min_proof", "γ_min √d (App. C 119)")):  # fmt: skip
        f.semilogx(steps + 1, r0[name].values, label=lab)
    f.axhline(0, color="gray", lw=0.5)
    f.set(xlabel="GD step + 1", ylabel="normalized margin", title="(f) Assumption 4.7 margins")
    f.legend(fontsize=8)
    # (g) flow-time onset against η
    for sig in np.unique(onsets.sigma.values):
        sub = onsets.where(onsets.sigma == sig, drop=True)
        etas = np.unique(sub.eta.values)
        med = [_nanmedian(sub.T_eps_scaled.sel(matrix="Q").values[sub.eta.values == e_] * e_)
               for e_ in etas]  # fmt: skip
        g.semilogx(etas, med, "o-", label=f"σ={sig:g}")
    g.set(xlabel="η", ylabel="η · T_ε(Q), ε = 2e-4·η",
          title="(g) onset in flow time ηt (Thm 4.5: η-free)")  # fmt: skip
    g.legend(fontsize=7)
    # (h) (ηT_Q)² against ln(1/σ): medians over seeds (a few runs stall on a saddle)
    sigmas = np.unique(onsets.sigma.values)
    xs = np.log(1 / sigmas)
    for e_ in np.unique(onsets.eta.values):
        tq = onsets.T_eps_scaled.sel(matrix="Q").values * e_
        ys = np.array([_nanmedian(tq[(onsets.eta.values == e_) & (onsets.sigma.values == g_)])
                       for g_ in sigmas]) ** 2  # fmt: skip
        ok = np.isfinite(ys)
        (line,) = h.plot(xs[ok], ys[ok], "o", ms=4, label=f"η={e_:g}")
        if ok.sum() >= 2:
            cf = np.polyfit(xs[ok], ys[ok], 1)
            h.plot(xs, np.polyval(cf, xs), "-", lw=0.8, color=line.get_color())
    rows = [r for r in fits["sigma_law"] if "slope" in r]
    if rows:
        r2 = np.array([r["r2"] for r in rows])
        ratio = (np.maximum(onsets.theorem_T_V, onsets.theorem_T_QK)
                 / onsets.T_eps.max("matrix")).values  # fmt: skip
        h.set_title(f"(h) (ηT_Q)² vs ln(1/σ), Eq. 76: linear\nper-seed R² median "
                    f"{np.median(r2):.2f}; Thm 4.5 T* / T_ε: {np.nanmedian(ratio):.1e}",
                    fontsize=9)  # fmt: skip
    h.set(xlabel="ln(1/σ)", ylabel="(η T_ε(Q))², median over seeds")
    h.legend(fontsize=7)
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved results, computing them when missing."""
    from sims.runtime.io import read_json, read_netcdf

    paths = _paths(results_dir, quick)
    if recompute or not all(p.exists() for p in paths.values()):
        compute(results_dir, quick=quick)
    out = Path(out_dir) / ("fig_sosd_toy_quick.png" if quick else "fig_sosd_toy.png")
    plot(read_netcdf(paths["toy"]), read_json(paths["summary"]), read_netcdf(paths["onsets"]),
         read_json(paths["fits"]), out)  # fmt: skip
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
