"""Seed 002 Figures 2–5 analogs on a small decoder (:mod:`sims.lm`) pre-trained on CPU.

Runs (:data:`sims.sosd.bridge.LM_EXPERIMENTS`, 3 seeds each, spectra every 10 steps): AdamW
with a constant learning rate (Figs. 1–3: cosine to the final state, ΔΣ with validation loss and
the onset), step decay ×0.1 at 50% and 75% (Fig. 4a), WSD with the last 28.4% decayed (Fig. 4b),
cosine to 0.1× (Fig. 4c), cosine with weight decay 0 vs 0.1 (Fig. 5a), Muon vs AdamW under WSD
(Fig. 5b). Model and data: the :mod:`sims.lm` default decoder (RMSNorm, RoPE, ReLU², tied
embeddings, 0.1M parameters) on its HMM corpus (V = 256, exact Bayes loss).

Reads ``results/sosd_lm/cpu/<name>_seed<s>.{spectra.nc,history.nc,json}`` and
``results/sosd_lm/cpu/summary.json``; computes missing runs with
:func:`sims.sosd.bridge.lm_sosd_runs` (1000 steps each, about 1–2 min per run on one idle
core, 18 runs). ``SOSD_LM_SCALE=gpu`` selects the GPU configuration (on ``cuda``; not run here:
the GPU campaign, ``python -m llm_validation campaign --stage sosd``, runs it).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="sosd_lm",
    title="SoSD in small-LM pre-training: phases, schedules, weight decay, Muon",
    paper_ref="seed 002 Figs. 2-5",
    result_file="sosd_lm/cpu/summary.json",
    producer="figures.fig_sosd_lm.compute() (sims.sosd.bridge.lm_sosd_runs)",
    extra="torch",
)


def compute(results_dir, *, scale: str = "cpu", names: Sequence[str] | None = None,
            seeds: Sequence[int] | None = None, progress: bool = False) -> Path:  # fmt: skip
    """Run the missing (name, seed) runs, then write the aggregated ``summary.json``.

    :func:`sims.sosd.bridge.lm_sosd_runs` (default: every experiment, seeds 0, 1, 2).
    """
    from sims.sosd.bridge import lm_sosd_runs

    kw = {k: tuple(v) for k, v in (("names", names), ("seeds", seeds)) if v is not None}
    return lm_sosd_runs(results_dir, scale=scale, progress=progress, **kw)


def _load(results_dir, scale, name, seed):
    from sims.runtime.io import read_netcdf
    from sims.sosd.bridge import lm_sosd_dir

    stem = lm_sosd_dir(results_dir, scale) / f"{name}_seed{seed}"
    return read_netcdf(f"{stem}.spectra.nc"), read_netcdf(f"{stem}.history.nc")


def _geo(x, axis):
    import warnings

    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows (the first record)
        return 10 ** np.nanmean(np.log10(x), axis=axis)


def _group_curve(sp, group):
    sel = sp.group.values == group
    return _geo(sp.delta_sigma.values[:, sel], axis=1)


def _loss_and_dsigma(ax, sp, h, title, summary=None, lines=()):
    ax.plot(h.eval_step.values, h.val_loss.values, color="navy", lw=1.2, label="val loss")
    if np.isfinite(h.attrs.get("bayes_loss", np.nan)):
        ax.axhline(h.attrs["bayes_loss"], color="navy", ls=":", lw=0.8)
    ax.set(xlabel="step", ylabel="validation loss (navy; dotted: Bayes loss)", title=title)
    a2 = ax.twinx()
    a2.set_ylabel("ΔΣ over 10 steps (log)")
    for g, c in (("attn", "tab:red"), ("mlp", "tab:green")):
        a2.semilogy(sp.step.values, _group_curve(sp, g), color=c, lw=0.7, label=f"ΔΣ {g}")
    for x in lines:
        ax.axvline(x, color="r", ls="--", lw=0.8)
    if summary is not None:
        for key, style in (("onset", "-"), ("loss_knee", ":")):
            if np.isfinite(summary.get(key, np.nan)):
                ax.axvline(summary[key], color="k", ls=style, lw=0.8, alpha=0.7)
    a2.legend(fontsize=7, loc="upper right")
    return a2


def plot(results_dir, summary: dict, *, scale: str = "cpu", path=None):
    """Eight panels from the saved runs (seed 0 curves; numbers over seeds in the titles)."""
    runs = summary["runs"]
    fig, ax = plt.subplots(2, 4, figsize=(21, 9), constrained_layout=True)
    (a, b, c, d), (e, f, g, hh) = ax
    n_seeds = len({k.rsplit("_seed", 1)[1] for k in runs})
    fig.suptitle("Seed 002 Figs. 2–5 analogs: singular-distribution variation ΔΣ in small-LM "
                 f"pre-training (0.1M-parameter decoder, HMM corpus; {n_seeds} seeds per setting, "
                 "curves of seed 0; red dashed: learning-rate decay points; black: ΔΣ onset (—) "
                 "and loss knee (···))", fontsize=11)  # fmt: skip

    def over(name, key, sub=None):
        vals = []
        for k, v in runs.items():
            if k.rsplit("_seed", 1)[0] == name:
                x = v.get(key, np.nan) if sub is None else v.get(key, {}).get(sub, np.nan)
                vals.append(float(x))
        return np.array(vals, float)

    sp, h = _load(results_dir, scale, "constant", 0)
    st = sp.step.values
    with warnings.catch_warnings():  # steps with no finite matrix are NaN, dropped below
        warnings.simplefilter("ignore", RuntimeWarning)  # ("Mean of empty slice")
        wc = np.nanmean(sp.weight_cos_final.values, axis=1)
        sc = np.nanmean(sp.spectral_cos_final.values, axis=1)
    ok = np.isfinite(wc)
    a.semilogy(st[ok], 1 - wc[ok], "o-", ms=3, label="1 − cos⟨W_t, W_T⟩")
    a.semilogy(st, np.maximum(1 - sc, 1e-12), "--", label="1 − cos⟨Σ_t, Σ_T⟩")
    a.set(xlabel="step", ylabel="1 − cosine to final (mean over matrices)",
          title="(a) constant LR: spectra settle long before weights\n(Fig. 1a/2)")
    a.legend(fontsize=8)
    on, kn = over("constant", "onset"), over("constant", "loss_knee")
    _loss_and_dsigma(b, sp, h, f"(b) constant LR: ΔΣ onset (—) {np.nanmedian(on):.0f},\nloss "
                     f"knee (···) {np.nanmedian(kn):.0f} (medians of seeds)",
                     runs.get("constant_seed0"))  # fmt: skip
    for axis, name, title in ((c, "step", "(c) step decay ×0.1 at 50%, 75% (Fig. 4a)"),
                              (d, "wsd", "(d) WSD, last 28.4% decayed (Fig. 4b)"),
                              (e, "cosine", "(e) cosine to 0.1× (Fig. 4c)")):  # fmt: skip
        spn, hn = _load(results_dir, scale, name, 0)
        T = int(hn.step.values[-1])
        lines = {"step": (0.5 * T, 0.75 * T), "wsd": (T - round(0.284 * T),)}.get(name, ())
        ratio = over(name, "decay_ratio")
        extra = (f"\nΔΣ after/before decay: {np.nanmedian(ratio):.2f} (median of seeds)"
                 if np.isfinite(ratio).any() else "")  # fmt: skip
        _loss_and_dsigma(axis, spn, hn, title + extra, runs.get(f"{name}_seed0"), lines)
    for axis, pair, title in ((f, ("cosine", "cosine_wd"), "(f) weight decay 0 (dashed) vs 0.1"),
                              (g, ("wsd", "wsd_muon"), "(g) AdamW (dashed) vs Muon, WSD")):
        for name, ls in zip(pair, ("--", "-"), strict=True):
            spn, hn = _load(results_dir, scale, name, 0)
            for grp, col in (("attn", "tab:red"), ("mlp", "tab:green")):
                axis.semilogy(spn.step.values, _group_curve(spn, grp), ls, color=col, lw=0.7,
                              label=f"{name} {grp}")  # fmt: skip
        lv = {n: over(n, "delta_sigma_attn", "end") for n in pair}
        vl = {n: over(n, "val_loss_final") for n in pair}
        axis.set(xlabel="step", ylabel="ΔΣ (10 steps)",
                 title=f"{title}\nend ΔΣ attn {np.nanmedian(lv[pair[0]]):.1e} vs "
                       f"{np.nanmedian(lv[pair[1]]):.1e}; val {np.nanmedian(vl[pair[0]]):.4f} vs "
                       f"{np.nanmedian(vl[pair[1]]):.4f}")  # fmt: skip
        axis.legend(fontsize=7)
    ratios = np.array([v["a4_ratio_max"] for v in runs.values()])
    n_rec = sum(v["a4_records_checked"] for v in runs.values())
    viol = sum(v["a4_ratio_violations"] for v in runs.values())
    hh.bar(range(len(ratios)), ratios)
    hh.axhline(1, color="r", ls="--")
    hh.set(xticks=range(len(ratios)), ylabel="max ΔΣ / Lemma A.4 bound",
           title=f"(h) Lemma A.4 on every record: {viol} violations in {n_rec}")
    hh.set_xticklabels(list(runs), rotation=90, fontsize=6)
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved runs, computing missing ones."""
    from sims.runtime.io import read_json
    from sims.sosd.bridge import lm_sosd_dir

    scale = "quick" if quick else os.environ.get("SOSD_LM_SCALE", "cpu")
    seeds = (0,) if quick else None
    if recompute:
        for p in lm_sosd_dir(results_dir, scale).glob("*_seed*"):
            p.unlink()
    path = compute(results_dir, scale=scale, seeds=seeds)
    out = Path(out_dir) / ("fig_sosd_lm_quick.png" if quick else f"fig_sosd_lm_{scale}.png")
    plot(results_dir, read_json(path), scale=scale, path=out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
