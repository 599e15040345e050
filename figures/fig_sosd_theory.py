"""Seed 002 theory checks at a glance: Lemma A.4, Lemma A.8's side, Thm 4.5 and 4.9 errata.

Reads ``results/sosd_theory/panels.nc`` (computed in seconds when missing). Panels: (a) Lemma A.8:
error of ``A_0 + J_1 M`` (printed) and ``A_0 + M J_1`` (corrected) against the size of ``M``;
(b) Lemma A.4: ΔΣ / bound over random, near rank-deficient and independent pairs (≤ 1);
(c) Theorem 4.5: the ODE lower bound ``q(τ)`` with the threshold ``c`` and the hitting times as
printed (Eq. 79) and corrected; (d) App. B (57): ``tr Σ / ||W||_F`` against the condition number
(the printed condition needs ≥ √d, which ill-conditioned matrices miss); (e) App. C (109): the
per-row ``||p − y||`` for two tied wrong classes against the printed and corrected bounds;
(f) (141): ``x^p e^{−x}`` for p = 2.5, e, 3 (≤ 1 for all x iff p ≤ e).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main, save_figure  # noqa: E402

FIGURE = FigureSpec(
    name="sosd_theory",
    title="SoSD theory checks: Lemma A.4, Lemma A.8 side, Thm 4.5/4.9 errata",
    paper_ref="seed 002 App. A-C",
    result_file="sosd_theory/panels.nc",
    producer="figures.fig_sosd_theory.compute() (seconds)",
)

#: Representative constants for panel (c) (d = 16).
ODE = {"d": 16, "q0": 0.05, "v0": 0.1, "C_M": 0.5, "C_V": 0.8, "eta_G_over_eps": 40.0}


def compute(*, quick: bool = False):
    """All panel data as one ``xarray.Dataset``."""
    import xarray as xr

    from sims.sosd.spectral import lemma_a4_bound, sd_variation
    from sims.sosd.toy import theorem45_hitting_times
    from theory.sosd import _matrix_pairs, _softmax

    rng = np.random.default_rng(0)
    # (a) Lemma A.8
    n = 8
    J1 = (np.eye(n) - np.ones((n, n)) / n) / n
    A0 = np.ones((n, n)) / n
    base = rng.standard_normal((n, n))
    scales = np.geomspace(1e-4, 1, 25)
    left, right = [], []
    for s in scales:
        M = s * base
        left.append(np.abs(_softmax(M) - (A0 + J1 @ M)).max())
        right.append(np.abs(_softmax(M) - (A0 + M @ J1)).max())
    # (b) Lemma A.4 ratios
    ratios, kinds = [], []
    for i, (a, b) in enumerate(_matrix_pairs(rng, 200 if quick else 3000)):
        if np.linalg.norm(a) > 0 and np.linalg.norm(b) > 0:
            ratios.append(sd_variation(a, b) / lemma_a4_bound(a, b))
            kinds.append(i % 3)
    # (c) Theorem 4.5 ODE and hitting times (corrected vs printed)
    d, q0, v0, cm, cv = (ODE[k] for k in ("d", "q0", "v0", "C_M", "C_V"))
    c_paper = (1 + math.sqrt(d)) * ODE["eta_G_over_eps"] / math.sqrt(d)  # (58) as printed
    tv, tq = theorem45_hitting_times(c_paper, q0=q0, v0=v0, c_m=cm, c_v=cv)
    lam = math.log(1 + math.sqrt(d)) - math.log(q0 * math.sqrt(d) / ODE["eta_G_over_eps"])
    a = cm * v0
    tq_printed = (-a + math.sqrt(a * a + 2 * a * lam)) / (cm * cv)
    tau = np.linspace(0, 1.5 * max(tq, tq_printed), 400)
    q = q0 * np.exp(0.5 * cm * cv * tau**2 + cm * v0 * tau)
    # (d) nuclear / Frobenius against κ
    kap, nf = [], []
    dd = 16
    for _ in range(200 if quick else 2000):
        s = np.sort(10 ** rng.uniform(-rng.uniform(0, 6), 0, size=dd))[::-1]
        kap.append(s[0] / s[-1])
        nf.append(s.sum() / math.sqrt((s**2).sum()))
    # (e) eq. 109
    gaps = np.linspace(0, 8, 200)
    row = []
    for g in gaps:
        p = _softmax(np.array([g, 0.0, 0.0]))
        row.append(np.linalg.norm(p - np.array([1.0, 0, 0])))
    # (f) polynomial domination
    xs = np.geomspace(1e-2, 60, 400)
    return xr.Dataset(
        {
            "a8_error_printed": ("scale", np.array(left)),
            "a8_error_corrected": ("scale", np.array(right)),
            "a4_ratio": ("pair", np.array(ratios)),
            "a4_kind": ("pair", np.array(kinds)),
            "q_lower_bound": ("tau", q),
            "kappa": ("matrix", np.array(kap)),
            "nuclear_over_frobenius": ("matrix", np.array(nf)),
            "row_error": ("gap", np.array(row)),
            **{f"xpe_{name}": ("x", xs**p * np.exp(-xs))
               for name, p in (("2p5", 2.5), ("e", math.e), ("3", 3.0))},  # fmt: skip
        },
        coords={"scale": scales, "tau": tau, "gap": gaps, "x": xs},
        attrs={"threshold_c": c_paper, "T_V": tv, "T_QK": tq, "T_QK_printed": tq_printed,
               "d": d, **{f"ode_{k}": v for k, v in ODE.items()}},  # fmt: skip
    )


def plot(ds, path=None):
    """Six panels."""
    fig, ax = plt.subplots(2, 3, figsize=(16, 9), constrained_layout=True)
    a, b, c, d, e, f = ax.ravel()
    s = ds.scale.values
    for name, lab in (("a8_error_printed", "A_0 + J_1 M (printed)"),
                      ("a8_error_corrected", "A_0 + M J_1 (corrected)")):  # fmt: skip
        y = ds[name].values
        k = float(np.polyfit(np.log(s[:12]), np.log(y[:12]), 1)[0])
        a.loglog(s, y, "o-", ms=3, label=f"{lab}: slope {k:.2f}")
    a.set(xlabel="entry scale of M", ylabel="max |softmax(M) − expansion|",
          title="(a) Lemma A.8: centering on the right is the first-order expansion")
    a.legend(fontsize=8)
    r = ds.a4_ratio.values
    for kind, lab in ((0, "perturbed"), (1, "near rank-deficient"), (2, "independent")):
        b.hist(r[ds.a4_kind.values == kind], bins=40, alpha=0.6, label=lab)
    b.axvline(1, color="r", ls="--")
    b.set(xlabel="ΔΣ / Lemma A.4 bound (r = min(m, n))", ylabel="pairs",
          title=f"(b) Lemma A.4 on {r.size} pairs: max {r.max():.3f}")
    b.legend(fontsize=8)
    at = ds.attrs
    c.semilogy(ds.tau.values, ds.q_lower_bound.values, "k", label="q(τ), Eq. (76)")
    c.axhline(at["threshold_c"], color="gray", ls=":", label="threshold c (58)")
    c.axvline(at["T_QK"], color="tab:green", label=f"corrected T_QK = {at['T_QK']:.2f}")
    c.axvline(at["T_QK_printed"], color="tab:red", ls="--",
              label=f"printed (79) T_QK = {at['T_QK_printed']:.2f}")  # fmt: skip
    c.set(xlabel="flow time τ = ηt", ylabel="q",
          title="(c) Thm 4.5: printed hitting time misses the threshold")
    c.legend(fontsize=8)
    d.loglog(ds.kappa.values, ds.nuclear_over_frobenius.values, ".", ms=3)
    dd = 16
    d.axhline(math.sqrt(dd), color="r", ls="--", label="√d: needed by (57) as printed")
    d.axhline(1, color="k", ls=":", label="1: always true (||W||_* ≥ ||W||_F)")
    d.set(xlabel="condition number κ (d = 16)", ylabel="||W||_* / ||W||_F",
          title="(d) App. B (57): ||W||_F > c/√d is not sufficient")
    d.legend(fontsize=8)
    g = ds.gap.values
    e.semilogy(g, ds.row_error.values, "k", label="||p − y|| (C=3, tied wrong classes)")
    e.semilogy(g, math.sqrt(2 * 2) * np.exp(-g), "r--", label="printed (109): √(2(C−1)) e^{−gap}")
    e.semilogy(g, 2 * 2 * np.exp(-g), "g-", label="(108): 2(C−1) e^{−gap}")
    e.set(xlabel="τ^V ω (logit gap)", ylabel="per-row bound",
          title="(e) App. C (109): the printed constant fails for gap > 2.2")
    e.legend(fontsize=8)
    for name, lab in (("xpe_2p5", "p = 2.5"), ("xpe_e", "p = e"), ("xpe_3", "p = 3")):
        f.loglog(ds.x.values, ds[name].values, label=lab)
    f.axhline(1, color="r", ls="--")
    f.set(xlabel="x", ylabel="x^p e^{−x}", ylim=(1e-6, 10),
          title="(f) (141): e^{−x} ≤ x^{−p} ∀x iff p ≤ e")
    f.legend(fontsize=8)
    if path is not None:
        save_figure(fig, path, dpi=110)
    return fig


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render from the saved panel data, computing it when missing."""
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    src = Path(results_dir) / FIGURE.result_file
    if quick:
        src = src.with_name("panels_quick.nc")
    if recompute or not src.exists():
        write_netcdf(src, compute(quick=quick), meta=provenance({"quick": quick, **ODE}, seed=0))
    out = Path(out_dir) / ("fig_sosd_theory_quick.png" if quick else "fig_sosd_theory.png")
    plot(read_netcdf(src), out)
    return [out]


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
