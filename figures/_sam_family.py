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
