"""Drawing functions of the linear-attention figures (registered by ``figures/fig*_la*``).

Each function takes saved result Datasets and a path, draws a figure that reads without its
caption (axis labels with meaning and units, legends, a suptitle with the configuration) and
saves it with :func:`sims.runtime.plotting.save_figure`.

* :func:`plot_figure1` — the paper's Figure 1 at its horizon (top row, unchanged setting) and
  at the long horizon where every run learns every feature (bottom row).
* :func:`plot_horizon` — median/mean test loss against the horizon, runs that have learned all
  features, and the entropy of the learning times: where the paper's ordering holds.
* :func:`plot_mechanism` — why SAM is more uniform (:mod:`theory.sam_saddle`).
* :func:`plot_upsampling` — what each selection picks and what it does to the learning times
  (:mod:`theory.upsampling`).
* :func:`plot_theory_vs_sim` — learning times on the ansatz vs the Theorem 4.2 ODEs.
"""

from __future__ import annotations

import os

import numpy as np

from sims.runtime.plotting import save_figure

__all__ = [
    "LABELS",
    "COLORS",
    "describe",
    "plot_figure1",
    "plot_horizon",
    "plot_mechanism",
    "plot_upsampling",
    "plot_theory_vs_sim",
]

LABELS = {
    "gd": "GD",
    "gd_upsample": "GD + upsampling",
    "sam": "SAM",
    "sam_flow": "first-order SAM (eq. 8)",
    "sam_headwise": "head-wise SAM (paper's reduction)",
    "gd_lr_matched": "GD, lr × signal boost",
}
COLORS = {
    "gd": "C0",
    "gd_upsample": "C2",
    "sam": "C3",
    "sam_flow": "C1",
    "sam_headwise": "C4",
    "gd_lr_matched": "C7",
}
PAPER = ("gd", "gd_upsample", "sam")


def describe(cfg: dict, n_runs: int | None = None) -> str:
    """One line with the configuration of a Figure 1 result."""
    runs = n_runs if n_runs is not None else cfg.get("n_runs")
    return (f"ATTN_S, d={cfg.get('d')}, N={cfg.get('n_context')}, H={cfg.get('n_heads')}, "
            f"P={cfg.get('n_examples')}, lr={cfg.get('learning_rate')}, "
            f"init={cfg.get('init_scale')} (linattn-icl), SAM ρ={cfg.get('rho')}, {runs} paired "
            "runs, test = population loss")  # fmt: skip


def _stats_line(x) -> str:
    x = np.asarray(x, float)
    q1, med, q3 = np.quantile(x, [0.25, 0.5, 0.75])
    return f"median {med:.4f}, mean {x.mean():.4f}, IQR [{q1:.4f}, {q3:.4f}]"


def plot_figure1(ds, path: str | os.PathLike | None = None):
    """Two rows × paper methods: test loss at the paper's horizon (top) and the long one (bottom).

    Thin black lines are runs, red the median, blue dashed the mean; dotted grey lines are the
    saddle levels ``L(M_m)`` (App. A.2). Titles give the median/mean/quartiles of the test loss
    at that horizon and how many runs have learned 0..d features.
    """
    import matplotlib.pyplot as plt

    methods = [m for m in PAPER if m in ds.method.values]
    levels = ds.saddle_level.values
    steps = ds.step.values
    fig, axes = plt.subplots(2, len(methods), figsize=(4.6 * len(methods), 7.6), sharey=True,
                             squeeze=False, constrained_layout=True)  # fmt: skip
    for row, horizon in enumerate(ds.horizon.values):
        hstep = int(ds.horizon_step.sel(horizon=horizon))
        keep = steps <= hstep - 1
        for col, m in enumerate(methods):
            ax = axes[row, col]
            curves = ds.test_loss.sel({"method": m}).values[:, keep]
            x = steps[keep] + (1 if row else 0)  # log axis: step + 1
            for c in curves:
                ax.plot(x, c, color="k", lw=0.5, alpha=0.25)
            first = col == 0  # the legend is on the first panel of each row
            ax.plot(x, np.median(curves, axis=0), color="C3", lw=1.8,
                    label="median of runs" if first else "_median")
            ax.plot(x, curves.mean(axis=0), color="C0", lw=1.4, ls="--",
                    label="mean of runs" if first else "_mean")
            for lv in levels:
                ax.axhline(lv, color="grey", ls=":", lw=0.8)
            final = ds.test_loss_at.sel({"method": m, "horizon": horizon}).values
            counts = np.bincount(ds.n_learned.sel({"method": m, "horizon": horizon}).values,
                                 minlength=levels.size)  # fmt: skip
            ax.set_title(
                f"{LABELS[m]}, {hstep:,} steps\n{_stats_line(final)}\nruns with "
                f"0..{levels.size - 1} features learned: {'/'.join(str(c) for c in counts)}",
                fontsize=8,
            )
            ax.set_xlabel("full-batch step" + (" + 1 (log scale)" if row else ""))
            if row:
                ax.set_xscale("log")
            ax.set_ylim(0, 1.1 * levels[0])
            if col == 0:
                ax.set_ylabel("test (population) loss")
                ax.legend(fontsize=7, loc="lower left")
        right = axes[row, -1].twinx()
        right.set_ylim(axes[row, -1].get_ylim())
        right.set_yticks(levels)
        right.set_yticklabels([f"$L(M_{k})$" for k in range(levels.size)], fontsize=8)
    hs = [int(x) for x in ds.horizon_step.values]
    fig.suptitle(f"Figure 1 analog: top = the paper's horizon ({hs[0]:,} steps); bottom = "
                 f"{hs[1]:,} steps, until every run has learned every feature\n"
                 + describe(ds.attrs.get("config", {}), ds.run.size), fontsize=9)  # fmt: skip
    return _finish(fig, path)


def _lab(kind: str, text: str) -> str:
    """Legend entries only on the phase panel (the time panel uses the same symbols)."""
    return text if kind == "phase" else "_" + text


def _plain_log_ticks(ax):
    """Plain-number ticks at 1, 2, 5 × 10^k on the log axes of ratio panels.

    The ratios span less than a decade, where the default log locator labels only 1.
    """
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

    for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
        if scale != "log":
            continue
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(NullFormatter())


def _finish(fig, path):
    if path is None:
        return fig
    save_figure(fig, path, dpi=130)
    return fig


def plot_horizon(ds, path: str | os.PathLike | None = None):
    """Where the paper's ordering holds: loss vs horizon, difference to GD, runs done, entropies."""
    import matplotlib.pyplot as plt

    methods = [m for m in (*PAPER, "gd_lr_matched") if m in ds.method.values]
    steps = ds.step.values + 1
    d = ds.feature.size
    paper = int(ds.horizon_step.sel(horizon="paper"))
    fig, axes = plt.subplots(1, 4, figsize=(21, 6.0), constrained_layout=True)
    gd_curves = ds.test_loss.sel({"method": "gd"}).values
    gd_med, gd_mean = np.median(gd_curves, 0), gd_curves.mean(0)
    both = np.ones_like(gd_med, bool)
    for m in ("gd_upsample", "sam"):
        if m in ds.method.values:
            both &= np.median(ds.test_loss.sel({"method": m}).values, 0) < gd_med
    ax = axes[0]
    for m in methods:
        curves = ds.test_loss.sel({"method": m}).values
        ax.plot(steps, np.median(curves, 0), color=COLORS[m], lw=1.6, label=f"{LABELS[m]}")
        ax.plot(steps, curves.mean(0), color=COLORS[m], lw=1.0, ls="--")
    levels = ds.saddle_level.values
    ax.set_ylim(levels[-1] - 0.02, levels[2] + 0.05)
    ax.set_title("Median (solid) and mean (dashed) test loss over runs (zoom on the last saddles)",
                 fontsize=8)  # fmt: skip
    ax.set_ylabel("test (population) loss at that step")
    ax = axes[1]
    for m in methods:
        if m == "gd":
            continue
        curves = ds.test_loss.sel({"method": m}).values
        ax.plot(steps, np.median(curves, 0) - gd_med, color=COLORS[m], lw=1.5,
                label=f"{LABELS[m]}: median − GD median")  # fmt: skip
        ax.plot(steps, curves.mean(0) - gd_mean, color=COLORS[m], lw=1.0, ls="--",
                label=f"{LABELS[m]}: mean − GD mean")  # fmt: skip
    ax.axhline(0, color="k", lw=0.8)
    ax.set_yscale("symlog", linthresh=1e-4)
    ax.set_ylabel("test loss − GD's (symlog; < 0: better than GD)")
    ax.set_title("Difference to GD at the same step", fontsize=9)
    for a in axes[:2]:
        _shade(a, steps, both, "paper's ordering holds (medians of GD+up and SAM < GD)")
        a.axvline(paper, color="k", ls=":", lw=1)
        a.set_xscale("log")
        a.set_xlim(max(1.0, paper / 20), steps[-1])  # nothing happens before the first drop
        a.set_xlabel("horizon (full-batch steps, log scale); dotted: the paper's 10,001")
    for a, ncol in ((axes[0], 2), (axes[1], 2)):  # below the axes, off the data
        a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=ncol)
    ax = axes[2]
    for m in methods:
        last = ds.learning_time.sel({"method": m}).values[:, -1]
        frac = [(np.isfinite(last) & (last < s)).sum() for s in steps]
        ax.plot(steps, frac, color=COLORS[m], lw=1.5, label=LABELS[m])
    ax.axvline(paper, color="k", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("horizon (full-batch steps, log scale)")
    ax.set_ylabel(f"runs that have learned all {d} features")
    ax.set_title(f"Runs past the last saddle (of {ds.run.size})", fontsize=9)
    ax.legend(fontsize=7, loc="center left")  # before the paper's horizon: no run is done
    ax = axes[3]
    ent = [ds.entropy.sel({"method": m}).values for m in methods]
    ax.boxplot([e[np.isfinite(e)] for e in ent], tick_labels=[LABELS[m] for m in methods])
    for i, e in enumerate(ent):
        ax.plot(np.full(e.size, i + 1) + np.linspace(-0.15, 0.15, e.size), e, ".",
                color=COLORS[methods[i]], ms=4)  # fmt: skip
    ax.axhline(np.log(d), color="grey", ls=":", lw=0.8)
    ax.text(0.6, np.log(d), f"log {d} (uniform)", fontsize=7, va="bottom")
    ax.set_ylabel(f"entropy of the {d} learning times (nats, eq. 11)")
    ax.set_title("Uniformity of feature learning (each dot = one run)", fontsize=9)
    ax.set_xlabel("method")
    ax.tick_params(axis="x", labelsize=7, rotation=15)
    fig.suptitle("When does the paper's ordering hold? " + describe(ds.attrs.get("config", {}),
                                                                      ds.run.size), fontsize=9)
    return _finish(fig, path)


def _shade(ax, x, mask, label):
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    for k, (a, b) in enumerate(zip(edges[::2], edges[1::2], strict=True)):
        ax.axvspan(x[a], x[b - 1], color="gold", alpha=0.3, lw=0, label=label if k == 0 else None)


def plot_mechanism(analysis, escape, path: str | os.PathLike | None = None, *, fig1=None):
    """Six panels: phase ratios, time ratios, entropy gains, predicted vs measured, escape vs b.

    Args:
        analysis: :func:`sims.linear_attention.mechanism.analyze` result.
        escape: :func:`sims.linear_attention.mechanism.escape_experiment` result.
        path: output PNG.
        fig1: the Figure 1 result (for the gradient-norm panel), optional.
    """
    import matplotlib.pyplot as plt

    from sims.ansatz import figure1_ansatz

    fig, axes = plt.subplots(2, 3, figsize=(16, 9), constrained_layout=True)
    methods = [m for m in ("sam", "sam_flow", "sam_headwise") if m in analysis.method.values]
    meas, pred = analysis.measured, analysis.predicted
    gd_m = meas.sel({"method": "gd"}).values
    d = analysis.feature.size
    feats = np.arange(1, d + 1)
    ans = figure1_ansatz(rho=analysis.attrs["rho"], eta=analysis.attrs["learning_rate"])
    key = {"sam": "exact/global", "sam_flow": "first_order/global",
           "sam_headwise": "exact/headwise"}  # fmt: skip

    def phase(t):
        return np.diff(t, axis=-1, prepend=0.0)

    for ax, kind in ((axes[0, 0], "phase"), (axes[0, 1], "time")):
        for j, m in enumerate(methods):
            t = meas.sel({"method": m}).values
            ok = np.all(np.isfinite(t) & np.isfinite(gd_m), axis=1)
            r = (phase(t) / phase(gd_m) if kind == "phase" else t / gd_m)[ok]
            q1, med, q3 = np.quantile(r, [0.25, 0.5, 0.75], axis=0)
            off = (j - 1) * 0.12
            ax.errorbar(feats + off, med, yerr=[med - q1, q3 - med], fmt="o", color=COLORS[m],
                        capsize=3, label=_lab(kind, f"{LABELS[m]}: simulation (median, IQR)"))
            p = pred.sel({"method": m}).values[ok]
            pr = phase(p) / phase(gd_m[ok]) if kind == "phase" else p / gd_m[ok]
            ax.plot(feats + off, np.median(pr, 0), "x", color=COLORS[m], ms=9, mew=2,
                    label=_lab(kind, f"{LABELS[m]}: reduced model, calibrated per run"))
            if d == ans["gd"].size:  # Figure 1's spectrum
                a = ans[key[m]] / ans["gd"]
                a = phase(ans[key[m]]) / phase(ans["gd"]) if kind == "phase" else a
                ax.plot(feats + off, a, "_", color=COLORS[m], ms=16, mew=2,
                        label=_lab(kind, f"{LABELS[m]}: reduced model, at ε=0.002"))
        ax.axhline(1.0, color="k", lw=0.8)
        ax.axhline(1.49, color="grey", ls="--", lw=1, label=_lab(kind, "eq. 9 per feature (×1.49)"))
        ax.set_xticks(feats)
        ax.set_xlabel("feature i (decreasing eigenvalue λ_i)")
        ax.set_ylabel("SAM / GD " + ("phase duration t_i − t_{i−1}" if kind == "phase"
                                     else "learning time t_i"))  # fmt: skip
        ax.set_title(("Phase" if kind == "phase" else "Learning-time") + " ratios to GD (paired)",
                     fontsize=9)  # fmt: skip
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        if kind == "phase":
            ax.legend(fontsize=6)
    ax = axes[0, 2]
    h_gd = analysis.entropy_measured.sel({"method": "gd"}).values
    for j, m in enumerate(methods):
        dh = analysis.entropy_measured.sel({"method": m}).values - h_gd
        dp = analysis.entropy_predicted.sel({"method": m}).values - \
            analysis.entropy_predicted.sel({"method": "gd"}).values
        ax.plot(np.full(dh.size, j) + np.linspace(-0.15, 0.15, dh.size), dh, ".",
                color=COLORS[m], ms=5)  # fmt: skip
        ax.plot([j - 0.25, j + 0.25], [np.nanmedian(dh)] * 2, color=COLORS[m], lw=2,
                label=f"{LABELS[m]}: simulation median {np.nanmedian(dh):+.3f}")  # fmt: skip
        ax.plot([j - 0.25, j + 0.25], [np.nanmedian(dp)] * 2, color=COLORS[m], lw=1, ls="--",
                label=f"reduced model median {np.nanmedian(dp):+.3f}")  # fmt: skip
    ax.axhline(1.9e-4, color="grey", ls=":", lw=1, label="Thm 4.4 / eq. 9: +1.9e-4")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(methods)))
    ax.set_xticklabels([LABELS[m] for m in methods], fontsize=7)
    ax.set_ylabel("entropy(SAM) − entropy(GD) of the 4 learning times (nats)")
    ax.set_title("Entropy gain per run (dots)", fontsize=9)
    ax.set_xlabel("SAM variant")
    ax.legend(fontsize=6)
    ax = axes[1, 0]
    if "sam" in methods:
        t = meas.sel({"method": "sam"}).values
        p = pred.sel({"method": "sam"}).values
        same = analysis.same_assignment.sel({"method": "sam"}).values
        for k in range(d):
            r_m, r_p = t[:, k] / gd_m[:, k], p[:, k] / gd_m[:, k]
            ax.scatter(r_p[same], r_m[same], color=f"C{k}", s=14, marker="o",
                       label=f"feature {k + 1}" + (": same heads as GD" if k == 0 else ""))
            ax.scatter(r_p[~same], r_m[~same], color=f"C{k}", s=22, marker="^",
                       facecolors="none", label="head assignment changed" if k == 0 else None)
        lim = [0.3, 3.5]
        ax.plot(lim, lim, "k:", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_xlabel("predicted SAM/GD time ratio (reduced model, calibrated on the GD run)")
        ax.set_ylabel("simulated SAM/GD time ratio")
        n_diff = int((~same).sum())
        ax.set_title(f"Per run and feature (SAM); {n_diff}/{same.size} runs change which head "
                     "learns which feature", fontsize=8)  # fmt: skip
        ax.legend(fontsize=6)
    ax = axes[1, 1]
    for i, m in enumerate(escape.saddle.values):
        gd = escape.escape_step.sel(saddle=m, rho=0.0).values
        x = escape.b.sel(saddle=m).values / escape.g_escape.sel(saddle=m).values
        x = np.where(x > 0, x, 1e-3)
        for j, r in enumerate(escape.rho.values[1:]):
            col = f"C{j}"
            y = escape.escape_step.sel(saddle=m, rho=r).values / gd
            yr = escape.reduced_step.sel(saddle=m, rho=r).values / \
                escape.reduced_step.sel(saddle=m, rho=0.0).values
            yd = 1 + escape.delay_first_order.sel(saddle=m, rho=r).values / gd
            mk = "os^"[i % 3]
            ax.plot(x, y, mk, color=col, ms=5,
                    label=f"ρ={r:g}" if i == 0 else None)  # fmt: skip
            ax.plot(x, yr, "-", color=col, lw=0.8)
            ax.plot(x, yd, ":", color=col, lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("background gradient b / escaping head's gradient G(ε)  (0 shown at 1e-3)")
    ax.set_ylabel("escape steps, SAM / GD")
    ax.set_title("Escape from M_m (o: m=0, s: m=1, ^: m=2): symbols = full model,\n"
                 "lines = reduced map, dotted = first-order delay with frozen b", fontsize=8)
    ax.legend(fontsize=6, title="SAM radius", title_fontsize=6)
    ax = axes[1, 2]
    if fig1 is not None and "grad_norm" in fig1:
        run = int(np.argmax(np.nanmax(fig1.learning_time.sel({"method": "gd"}).values, axis=1) <
                            fig1.step.values[-1]))  # fmt: skip
        x = fig1.step.values + 1
        for m in ("gd", "sam"):
            if m in fig1.method.values:
                ax.plot(x, fig1.grad_norm.sel({"method": m, "run": run}).values, color=COLORS[m],
                        lw=1, label=LABELS[m])  # fmt: skip
                for t in fig1.learning_time.sel({"method": m, "run": run}).values:
                    ax.axvline(t + 1, color=COLORS[m], ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("full-batch step + 1 (log scale); dotted: learning times")
        ax.set_ylabel("‖∇L‖₂ of the training loss")
        ax.set_title(f"Run {run}: SAM keeps a gradient floor on the plateaus (learned heads "
                     "bounce),\nwhich further shrinks the escaping head's share", fontsize=8)
        ax.legend(fontsize=7)
    else:
        ax.axis("off")
    fig.suptitle("Why SAM learns ATTN_S's features more uniformly: the heads share one "
                 "perturbation radius (theory/sam_saddle.py). Figure 1 setting, "
                 f"ρ={analysis.attrs['rho']}, {analysis.run.size} paired runs", fontsize=9)
    return _finish(fig, path)


def plot_upsampling(study, path: str | os.PathLike | None = None):
    """What each selection picks and what it does (:mod:`sims.linear_attention.study`)."""
    import matplotlib.pyplot as plt

    sels = [str(s) for s in study.selection.values]
    d = study.feature.size
    feats = np.arange(1, d + 1)
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.8), constrained_layout=True)
    ax = axes[0]
    for j, s in enumerate(sels):
        en = study.enrichment.sel(selection=s).values
        ax.plot(feats + (j - len(sels) / 2) * 0.05, np.median(en, 0), "o-", color=f"C{j}",
                label=f"{s} (target ×{np.median(study.target_ratio.sel(selection=s)):.2f})")
    ax.axhline(1, color="k", lw=0.6)
    ax.set_xticks(feats)
    ax.set_xlabel("feature i (decreasing λ_i)")
    ax.set_ylabel("enrichment m_i = E[yβ_i x_qi | S] / E[yβ_i x_qi]")
    ax.set_title("What each selection picks (median over runs);\nlegend: E[y²|S]/E[y²]",
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=6)
    ax = axes[1]
    for j, s in enumerate(sels):
        share = study.xq_share.sel(selection=s).values
        ax.plot(feats, np.median(share, 0), "o-", color=f"C{j}", label=s)
    ax.plot(feats, np.median(study.xq_share_all.isel(selection=0).values, 0), "k--",
            label="all examples")
    ax.set_xticks(feats)
    ax.set_xlabel("eigen-direction e_i")
    ax.set_ylabel("share of query energy on e_i")
    ax.set_title("Query energy per eigen-direction", fontsize=9)
    ax.legend(fontsize=6)
    ax = axes[2]
    gd = study.learning_time.sel(run_kind="gd").values
    for j, s in enumerate(sels):
        t = study.learning_time.sel(run_kind=s).values
        r = gd / t
        ax.plot(feats + (j - len(sels) / 2) * 0.05, np.nanmedian(r, 0), "o-", color=f"C{j}",
                label=f"{s}: simulation")  # fmt: skip
        ax.plot(feats + (j - len(sels) / 2) * 0.05, np.median(study.boost.sel(selection=s), 0),
                "x", color=f"C{j}", ms=8, mew=2)  # fmt: skip
    if "gd_lr_matched" in study.run_kind.values:
        t = study.learning_time.sel(run_kind="gd_lr_matched").values
        ax.plot(feats, np.nanmedian(gd / t, 0), "k^--", label="GD, lr × mean boost (control)")
    ax.axhline(1, color="k", lw=0.6)
    ax.set_xticks(feats)
    ax.set_xlabel("feature i")
    ax.set_ylabel("speed-up t_i(GD) / t_i(method)")
    ax.set_title("Measured speed-up (o) vs predicted boost r_i (x)", fontsize=9)
    ax.legend(fontsize=6)
    ax = axes[3]
    h_gd = study.entropy.sel(run_kind="gd").values
    kinds = [k for k in study.run_kind.values if k != "gd"]
    for j, k in enumerate(kinds):
        dh = study.entropy.sel(run_kind=k).values - h_gd
        ax.plot(np.full(dh.size, j) + np.linspace(-0.15, 0.15, dh.size), dh, ".", ms=5,
                color=f"C{j}" if k in sels else "k")  # fmt: skip
        ax.plot([j - 0.3, j + 0.3], [np.nanmedian(dh)] * 2, lw=2,
                color=f"C{j}" if k in sels else "k")  # fmt: skip
        if k in sels:
            pr = study.predicted_entropy_change.sel(selection=k).values
            ax.plot([j - 0.3, j + 0.3], [np.nanmedian(pr)] * 2, ls="--", lw=1, color=f"C{j}")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(kinds)))
    ax.set_xticklabels(kinds, fontsize=7, rotation=20)
    ax.set_ylabel("entropy(method) − entropy(GD), 4 learning times (nats)")
    ax.set_title("Uniformity: simulation (dots, median bar) vs theory (dashed)", fontsize=9)
    ax.set_xlabel("selection upsampled (or control)")
    fig.suptitle("Upsampling in the ATTN_S toy (theory/upsampling.py): entropy rises only if the "
                 "selection boosts late features at least as much as early ones. "
                 + describe(study.attrs.get("config", {}), study.run.size), fontsize=8)
    return _finish(fig, path)


STYLE_TVS = {
    "sim_sam": dict(marker="o", ls="none", label="simulation: GD (ρ=0) / SAM (eq. 6)"),
    "sim_sam_flow": dict(marker="x", ls="none", label="simulation: first-order SAM (eq. 8)"),
    "ode_full": dict(ls="-", label="ODE (full, App. C.2)"),
    "ode_truncated": dict(ls="--", label="ODE (eqs. 9-10)"),
}


def plot_theory_vs_sim(ds, path: str | os.PathLike | None = None):
    """Learning times (per ρ: one colour; per source: one marker/line style) and entropies."""
    import matplotlib.pyplot as plt

    rhos = ds.rho.values
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4), constrained_layout=True)
    feats = ds.feature.values + 1
    cmap = plt.get_cmap("viridis")
    cols = [cmap(x) for x in np.linspace(0, 0.9, rhos.size)]
    for k, src in enumerate(ds.source.values):
        st = STYLE_TVS[str(src)]
        for j in range(rhos.size):
            a1.plot(feats, ds.time.values[k, j], color=cols[j], marker=st.get("marker"),
                    ls=st["ls"])  # fmt: skip
        a2.plot(rhos, ds.entropy.values[k], color=f"C{k}", marker=st.get("marker", "."),
                ls=st["ls"], label=st["label"])  # fmt: skip
    for src in ds.source.values:  # legend entries for the sources (black), then the ρ colours
        st = STYLE_TVS[str(src)]
        a1.plot([], [], color="k", marker=st.get("marker"), ls=st["ls"], label=st["label"])
    for j, r in enumerate(rhos):
        a1.plot([], [], color=cols[j], lw=4, label=f"ρ={r:g}")
    a1.set_yscale("log")
    a1.set_xlabel("feature i (decreasing λ_i)")
    a1.set_ylabel("learning time t_i (ODE time units, τ = 1)")
    a1.set_xticks(feats)
    a1.legend(fontsize=6, ncol=2)
    a2.set_xlabel("SAM radius ρ")
    a2.set_ylabel("entropy of normalized t_i (eq. 11, nats)")
    a2.legend(fontsize=6)
    cfg = ds.attrs.get("config", {})
    fig.suptitle(f"ATTN_S on the ansatz (one head per feature, each simulated alone), "
                 f"ε={cfg.get('eps')}, c={cfg.get('fraction')}, d={cfg.get('d')}, "
                 f"N={cfg.get('n_context')}", fontsize=9)  # fmt: skip
    return _finish(fig, path)
