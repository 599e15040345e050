"""The findings page and the committed summaries behind it (issue 22).

* ``python -m figures report [--out DIR] [--self-contained]``: :func:`build_report` judges every
  claim (:mod:`figures.report.claims`, one module per seed) on the committed summary numbers,
  draws the figures from the committed summaries (:mod:`figures.report.drawing`) and writes
  ``index.html`` (PNGs beside it, or embedded) and ``REPORT.md``.
* ``python -m figures summaries [--results DIR] [--only NAME ...]``:
  :func:`figures.report.summaries.write_summaries` rewrites ``figures/summaries/`` from fresh
  results (reduced result files, the numbers the page reads, provenance).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from . import beyond, seed000, seed002, seed003, seed004, store  # noqa: F401  (register the claims)
from .claims import CLAIMS, Row, all_rows
from .summaries import load_numbers, load_provenance, write_summaries

__all__ = [
    "build_report",
    "Report",
    "write_summaries",
    "load_numbers",
    "CLAIMS",
    "findings_markdown",
    "FINDINGS",
]

#: The verdict tables as committed Markdown (readable on GitHub without building the page).
FINDINGS = store.SUMMARY_DIR / "FINDINGS.md"


def findings_markdown(root: Path = store.SUMMARY_DIR) -> str:
    """``FINDINGS.md``: every claim and verdict from the summaries in ``root`` (no images)."""
    from .page import render_markdown

    return render_markdown(all_rows(load_numbers(root)), {}, Path(root), committed=True)


@dataclasses.dataclass
class Report:
    """What :func:`build_report` wrote."""

    html: Path
    markdown: Path
    rows: list[Row]
    figures: dict
    seconds: float

    @property
    def failed_figures(self) -> dict:
        """Figures whose drawing failed: ``{name: error}`` (a missing extra is not a failure)."""
        return {
            k: v["error"]
            for k, v in self.figures.items()
            if "error" in v and "missing_extra" not in v
        }

    @property
    def skipped_figures(self) -> dict:
        """Figures left out because their extra is not installed: ``{name: extra}``."""
        return {k: v["missing_extra"] for k, v in self.figures.items() if "missing_extra" in v}


def figures_on_page(rows, root: Path = store.SUMMARY_DIR) -> list[str]:
    """Every summarised figure a row refers to (in order of first use), then the others."""
    from .drawing import summarised
    from .sources import SOURCES

    names = []
    for r in rows:
        if r.claim.figure and r.claim.figure not in names:
            names.append(r.claim.figure)
    names += [n for n in SOURCES if n not in names]
    return [n for n in names if summarised(n, root)]


def build_report(
    out_dir: str | Path,
    *,
    root: Path = store.SUMMARY_DIR,
    embed: bool = False,
    draw_figures: bool = True,
    figures=None,
    progress=None,
) -> Report:
    """Judge every claim on the committed summaries, draw the figures, write the page.

    Args:
        out_dir: folder for ``index.html``, ``REPORT.md`` and (unless ``embed``) the PNGs.
        root: the summaries folder.
        embed: embed the PNGs in ``index.html`` (one self-contained file).
        draw_figures: ``False`` writes the tables only (no images).
        figures: draw only these figures (default: every summarised figure on the page).
        progress: called with one line per drawn figure.
    """
    from figures import discover

    from .drawing import draw
    from .page import render_html, render_markdown

    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers = load_numbers(root)
    rows = all_rows(numbers)
    figs = discover()
    titles = {n: f"{m.FIGURE.title} ({m.FIGURE.paper_ref})" for n, m in figs.items()}
    names = figures_on_page(rows, root)
    if figures is not None:
        names = [n for n in names if n in set(figures)]
    drawn = draw(names, out_dir / "img", root, progress) if draw_figures else {}
    prov = load_provenance(root)
    html_path = out_dir / "index.html"
    html_path.write_text(
        render_html(rows, drawn, out_dir, embed=embed, provenance=prov, titles=titles),
        encoding="utf-8",
    )
    if embed:
        import shutil

        shutil.rmtree(out_dir / "img", ignore_errors=True)
        drawn_md = {}
    else:
        drawn_md = drawn
    md_path = out_dir / "REPORT.md"
    md_path.write_text(render_markdown(rows, drawn_md, out_dir, titles=titles), encoding="utf-8")
    return Report(html_path, md_path, rows, dict(drawn), time.perf_counter() - t0)
