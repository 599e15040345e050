"""Shared by the SAM-family figures: a suptitle that states the study behind the panels."""

from __future__ import annotations

from collections.abc import Mapping


def study_line(attrs: Mapping, *, show_rho: bool = True) -> str:
    """Two lines describing the run every method shares: model and corpus; steps, batch, lr.

    Reads the study config from ``attrs["study"]`` (or the provenance's ``meta.config.study``).
    """
    study = attrs.get("study") or attrs.get("meta", {}).get("config", {}).get("study") or {}
    base = study.get("base", {})
    m, c = base.get("model", {}), base.get("corpus", {})
    if not m:
        return ""
    radii = sorted(set((study.get("rho") or {}).values()))
    rho = f"; ρ = {radii[0]:g} for every SAM variant" if show_rho and len(radii) == 1 else ""
    n = attrs.get("n_params")
    size = f"{int(n) / 1e6:.2f}M-parameter " if n is not None else ""
    return (
        f"{size}decoder ({m['n_layer']} layers, width {m['d_model']}, {m['n_head']} heads) on the "
        f"{c.get('kind', '?').upper()} corpus (V = {c.get('vocab_size')}, T = {c.get('seq_len')})\n"
        f"{base.get('steps')} steps, batch {base.get('batch_size')}, lr {base.get('lr')}, "
        f"{base.get('schedule')} schedule, weight decay {base.get('weight_decay')}{rho}"
    )


def suptitle(fig, what: str, attrs: Mapping, *, show_rho: bool = True) -> None:
    """``what`` on the first line, the study below (without the study's ρ where ρ is swept)."""
    line = study_line(attrs, show_rho=show_rho)
    fig.suptitle(what + (f"\n{line}" if line else ""), fontsize=10)


#: The three shares of ‖H ε*‖² and their colours in every τ figure.
TAU_SHARES = (("tau_logit", "C0"), ("tau_func", "C3"), ("tau_cross", "C2"))


def tau_panel(ax, steps, curves: Mapping, *, bands: Mapping | None = None, marker: str = "-",
              xlabel: str, ylabel: str, title: str) -> None:  # fmt: skip
    """τ_logit, τ_func, τ_cross vs step on one axis (optional ± bands), with 0 and 1 guides.

    ``curves[k]`` (and ``bands[k]``) are indexed by the keys of :data:`TAU_SHARES`.
    """
    for k, c in TAU_SHARES:
        ax.plot(steps, curves[k], marker, color=c, label=k.replace("tau_", "τ_"))
        if bands is not None:
            ax.fill_between(steps, curves[k] - bands[k], curves[k] + bands[k], color=c, alpha=0.2)
    ax.axhline(0, color="k", lw=0.6)
    ax.axhline(1, color="gray", lw=0.6, ls=":")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(fontsize=8)
