"""Beyond the paper (Theorem 2): the heads' coupling time grows like log^2(1/eps).

Decoupling time ``t_c`` (first time ``max_k ||s_k - mean s|| > 0.1``) of the Fig. 10 flow
(H = h = 3, m = 1.7, b0 = 1) against ``log(1/eps)`` for the perturbation std ``eps`` of the
initial attention, for T = 20 and T = 40 and three perturbation seeds, with the law derived in
:mod:`theory.markov_coupling` overlaid: ``t_c = (log(1/eps) + b)^2 / (4 beta^2)``, ``beta`` from
the linearised flow (no fit) and one fitted offset ``b``. A straight line in ``log(1/eps)``
(what a ``Theta(log 1/eps)`` coupling time would give) is drawn for contrast.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from figures import FigureSpec, figure_main  # noqa: E402
from figures._markov import scaled_make  # noqa: E402
from sims.markov.plotting import plural  # noqa: E402

FIGURE = FigureSpec(
    name="markov_coupling",
    title="Coupling time of the heads vs log(1/eps): the log^2 law of the linearised flow",
    paper_ref="beyond the paper (seed004 Theorem 2, Fig. 10)",
    result_file="markov/coupling_time.nc",
    producer="python -m figures.fig_markov_coupling --recompute",
    extra="torch",
)

SETUP = {
    "quick": dict(T=(10,), eps=(1e-4, 1e-6, 1e-8), seeds=(0,), t_max=3e3),
    "cpu": dict(T=(20, 40), eps=tuple(10.0 ** -k for k in range(3, 13)), seeds=(0, 1, 2),
                t_max=5e3),  # fmt: skip
}
SETUP["paper"] = SETUP["cpu"]


def compute(scale: str):
    """Decoupling times ``t_c (T, seed, eps)`` of the reduced flow."""
    import xarray as xr

    from sims.markov.tensor_dynamics import FlowConfig, coupling_times

    st = SETUP[scale]
    tc = np.array([[coupling_times(FlowConfig(T=T, seed=s, t_max=st["t_max"], n_eval=1500),
                                   st["eps"]) for s in st["seeds"]] for T in st["T"]])  # fmt: skip
    return xr.Dataset(
        {"t_c": (("T", "seed", "eps"), tc)},
        coords={"T": list(st["T"]), "seed": list(st["seeds"]), "eps": list(st["eps"])},
        attrs={"H": 3, "h": 3, "m": 1.7, "b0": 1.0, "delta": 0.1,
               "method": "LSODA rtol 1e-8 atol 1e-11, n_eval 1500 log-spaced"},
    )  # fmt: skip


def plot(ds, scale: str) -> dict:
    """``t_c`` and ``sqrt(t_c)`` against ``log(1/eps)`` with the derived law."""
    from sims.markov.tensor_dynamics import target_scales
    from theory.markov_coupling import coupling_beta, coupling_time_law

    ms = target_scales(ds.attrs["h"], ds.attrs["m"], ds.attrs["b0"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), constrained_layout=True)
    L = np.log(1.0 / ds.eps.values)
    LL = np.linspace(L.min() * 0.9, L.max() * 1.03, 100)
    lines = []
    for k, T in enumerate(ds["T"].values):
        tc = ds.t_c.sel(T=T).values  # (seed, eps)
        beta = coupling_beta(ms, int(ds.attrs["H"]), int(T))
        big = L >= np.median(L)  # fit the one offset b on the larger half (asymptotic regime)
        b = float(np.mean(2 * beta * np.sqrt(tc[:, big]) - L[big]))
        law = coupling_time_law(np.exp(-LL), ms, int(ds.attrs["H"]), int(T), b=b)
        lin = np.polyfit(L[big], tc[:, big].mean(0), 1)
        for s in range(tc.shape[0]):
            for ax, f in ((axes[0], tc[s]), (axes[1], np.sqrt(tc[s]))):
                ax.plot(L, f, "o", color=f"C{k}", ms=4, alpha=0.7,
                        label=f"T = {T}: measured ({plural(tc.shape[0], 'seed')})"
                        if s == 0 else None)  # fmt: skip
        axes[0].plot(LL, law, color=f"C{k}",
                     label=rf"law $(\log(1/\epsilon) + b)^2/(4\beta^2)$, $\beta$ = {beta:.3f}, "
                     f"b = {b:.1f}")  # fmt: skip
        axes[0].plot(LL, np.polyval(lin, LL), color=f"C{k}", ls=":", lw=1,
                     label="best straight line in log(1/eps)" if k == 0 else None)  # fmt: skip
        axes[1].plot(LL, (LL + b) / (2 * beta), color=f"C{k}",
                     label=rf"slope $1/(2\beta)$ = {1 / (2 * beta):.2f} (no fit)")  # fmt: skip
        slope = np.polyfit(L[big], np.sqrt(tc[:, big]).mean(0), 1)[0]
        lines.append(f"T = {T}: measured slope {slope:.2f} vs 1/(2 beta) = {1 / (2 * beta):.2f}")
    axes[0].set(xlabel=r"$\log(1/\epsilon)$ ($\epsilon$: std of the perturbation of $s_k(0)$)",
                ylabel="decoupling time $t_c$", title="coupling time")  # fmt: skip
    axes[1].set(xlabel=r"$\log(1/\epsilon)$", ylabel=r"$\sqrt{t_c}$",
                title="\n".join(lines))  # fmt: skip
    axes[0].set_ylim(bottom=0)
    axes[1].title.set_fontsize(9)
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle(f"Heads decouple after ~log$^2$(1/$\\epsilon$), not log(1/$\\epsilon$) "
                 f"(H = h = 3, m = 1.7; {scale} scale)")  # fmt: skip
    return {"markov_coupling": fig}


make = scaled_make(FIGURE, compute, plot)


def main(argv=None) -> int:
    """Command line: ``python -m figures.fig_markov_coupling [--quick] [--recompute]``."""
    return figure_main(make, FIGURE, argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
