"""Shared ``make`` of the GPU-campaign figures: find the summaries, draw, or say "not run".

The GPU figures draw the small summaries the campaign (``python -m llm_validation campaign``)
writes, never its heavy files, so they render on a machine without a GPU:

* full run: ``results/campaign/gpu/`` when a GPU run was collected here and not yet published,
  else the committed ``figures/summaries/gpu/``; when neither exists the figure says
  "not run: needs a GPU" and lists the planned stages;
* ``--quick``: the CPU rehearsal's summaries (``results/campaign/rehearsal-mini/``, computed
  with ``--rehearse mini`` for the figure's stages when missing); every such figure carries the
  rehearsal banner, so it is never taken for a GPU result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from figures import REPO_ROOT, FigureSpec, save_figure  # noqa: E402

PUBLISHED = REPO_ROOT / "figures" / "summaries" / "gpu"
NOT_RUN = "not run: needs a GPU"


def find_summaries(results_dir, *, quick: bool, stages: Sequence[str]) -> tuple[dict | None, Path]:
    """``(summary, folder)`` for the figure (``summary`` is ``None`` when there is none)."""
    from llm_validation.campaign.runner import load_summary

    if quick:
        folder = Path(results_dir) / "campaign" / "rehearsal-mini"
        s = load_summary(folder)
        have = {e["name"] for e in s["stages"] if e["status"] == "ok"} if s else set()
        if not set(stages) <= have:
            from llm_validation.campaign import main

            main(
                [
                    "--rehearse",
                    "mini",
                    "--no-emulate",
                    "--quiet",
                    "--out",
                    str(folder),
                    "--stage",
                    *stages,
                ]
            )
            s = load_summary(folder)
        return s, folder
    local = Path(results_dir) / "campaign" / "gpu"
    for folder in (local, PUBLISHED):
        s = load_summary(folder)
        if s is not None:
            return s, folder
    return None, PUBLISHED


def stage(summary: dict | None, name: str) -> dict | None:
    """The summary's entry of stage ``name`` (``None`` when absent)."""
    if summary is None:
        return None
    return next((e for e in summary["stages"] if e["name"] == name), None)


def usable(summary: dict, name: str, axes, ok: Sequence[str] = ("ok",)) -> dict | None:
    """Stage ``name``'s entry when its status is in ``ok``; else say why in each of ``axes``."""
    ent = stage(summary, name)
    if ent is not None and ent["status"] in ok:
        return ent
    why = "not run" if ent is None else f"{ent['status']}: {ent.get('message', '')}"
    for ax in axes:
        message_panel(ax, f"{name}: {why}")
    return None


def headline(summary: dict) -> str:
    """Where and when the numbers were measured (the rehearsal banner first when it is one)."""
    meta = summary.get("meta", {})
    dev = next((e.get("device") for e in summary["stages"] if e.get("device")), "?")
    commit = (meta.get("git_commit") or "?")[:10]
    when = summary.get("updated", "?")[:10]
    text = f"{dev}, {when}, commit {commit}"
    return f"{summary['banner']} | {text}" if summary.get("banner") else f"GPU campaign: {text}"


def message_panel(ax, text: str) -> None:
    """An empty panel holding one message (a stage that did not run or did not finish)."""
    ax.axis("off")
    ax.text(
        0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=11, transform=ax.transAxes
    )


def not_run_figure(spec: FigureSpec, stages: Sequence[str]):
    """The figure drawn while no GPU summary exists: what would run, and how."""
    from llm_validation.campaign.stages import STAGES

    fig, ax = plt.subplots(figsize=(9, 4.5))
    ax.axis("off")
    rows = [
        f"{s.name}: planned {s.planned_seconds:.0f} s on one H100"
        for s in STAGES
        if s.name in stages
    ]
    ax.text(
        0.5,
        0.62,
        f"{spec.title}\n\n{NOT_RUN}",
        ha="center",
        va="center",
        fontsize=13,
        weight="bold",
        transform=ax.transAxes,
    )
    ax.text(
        0.5,
        0.25,
        "\n".join(rows) + "\n\npython -m llm_validation campaign --device-plan "
        "(on a GPU session), then --publish",
        ha="center",
        va="center",
        fontsize=10,
        transform=ax.transAxes,
    )
    return fig


def gpu_make(
    spec: FigureSpec, stages: Sequence[str], draw: Callable[[dict, Path], object]
) -> Callable[..., list[Path]]:
    """The registry's ``make`` for a GPU figure drawn by ``draw(summary, folder) -> figure``."""

    def make(out_dir, *, results_dir, quick: bool = False, recompute: bool = False) -> list[Path]:
        """Draw from the campaign's summaries (``quick``: the CPU rehearsal's)."""
        summary, folder = find_summaries(results_dir, quick=quick, stages=stages)
        fig = not_run_figure(spec, stages) if summary is None else draw(summary, folder)
        name = f"{spec.name}_quick.png" if quick else f"{spec.name}.png"
        return [save_figure(fig, Path(out_dir) / name, dpi=110)]

    make.__module__ = draw.__module__
    return make
