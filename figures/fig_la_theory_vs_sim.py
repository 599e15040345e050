"""Linear attention: simulated learning times and entropies vs the Theorem 4.2 ODE predictions.

Per-feature learning times ``t_i`` (time for ``v_i`` to grow from ``ε`` to ``c v_i*``) from
discrete GD/SAM (eq. 6), the first-order SAM flow (eq. 8) and the scalar ODEs (full App. C.2 and
leading-order eqs. 9–10, via :mod:`sims.scalar_odes`), and the entropy of the normalized times
(eq. 11) against ``ρ`` (Theorem 4.4 predicts it increases).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from figures import FigureSpec, figure_main, save_figure

FIGURE = FigureSpec(
    name="la_theory_vs_sim",
    title="Linear attention: simulated learning times / entropies vs Theorem 4.2 ODEs",
    paper_ref="main paper Theorem 4.2, Theorem 4.4 (beyond the paper's figures)",
    result_file="linear_attention/theory_vs_sim.nc",
    producer="python -m figures.fig_la_theory_vs_sim --recompute",
    extra="jax",
)

QUICK = dict(d=3, rhos=(0.0, 0.02), num_steps=3_000, learning_rate=0.25)
STYLE = {
    "sim_sam": dict(marker="o", ls="none", label="sim: GD / SAM (eq. 6)"),
    "sim_sam_flow": dict(marker="x", ls="none", label="sim: first-order SAM (eq. 8)"),
    "ode_full": dict(ls="-", label="ODE (full, App. C.2)"),
    "ode_truncated": dict(ls="--", label="ODE (eqs. 9-10)"),
}


def _path(results_dir, quick):
    name = FIGURE.result_file.replace(".nc", "_quick.nc") if quick else FIGURE.result_file
    return Path(results_dir) / name


def compute(results_dir: Path, *, quick: bool = False) -> Path:
    """Compute and save the comparison (with provenance)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from sims.io import provenance, write_netcdf
    from sims.linear_attention.theory import TheoryConfig, theory_vs_sim

    cfg = TheoryConfig(**QUICK) if quick else TheoryConfig()
    ds = theory_vs_sim(cfg)
    path = _path(results_dir, quick)
    write_netcdf(path, ds, meta=provenance(config=dataclasses.asdict(cfg)))
    return path


def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
    """Render the two panels (computing the result first when missing or ``recompute``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sims.io import read_netcdf

    path = _path(results_dir, quick)
    if recompute or not path.exists():
        compute(results_dir, quick=quick)
    ds = read_netcdf(path)
    rhos = ds.rho.values
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    feats = ds.feature.values + 1
    for k, src in enumerate(ds.source.values):
        for j in range(rhos.size):
            st = dict(STYLE[str(src)])
            st["label"] = st["label"] if j == 0 else None
            a1.plot(feats, ds.time.values[k, j], color=f"C{j}", **st)
        a2.plot(rhos, ds.entropy.values[k], **STYLE[str(src)])
    for j, r in enumerate(rhos):
        a1.plot([], [], color=f"C{j}", label=f"ρ={r:g}")
    a1.set_yscale("log")
    a1.set_xlabel("feature i (decreasing λ_i)")
    a1.set_ylabel("learning time t_i (τ = 1)")
    a1.set_xticks(feats)
    a1.legend(fontsize=6)
    a2.set_xlabel("ρ")
    a2.set_ylabel("entropy of normalized t_i (eq. 11)")
    a2.legend(fontsize=6)
    cfg = ds.attrs.get("config", {})
    fig.suptitle(f"ATTN_S on the ansatz, ε={cfg.get('eps')}, c={cfg.get('fraction')}", fontsize=9)
    fig.tight_layout()
    return [
        save_figure(
            fig,
            Path(out_dir)
            / ("fig_la_theory_vs_sim_quick.png" if quick else "fig_la_theory_vs_sim.png"),
            dpi=150,
        )
    ]


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_la_theory_vs_sim [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":
    raise SystemExit(main())
