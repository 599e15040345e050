"""``python -m figures report`` and ``python -m figures summaries`` (parsing only)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sims.runtime.cli import ArgumentParser, display_path, run_cli

__all__ = ["SUBCOMMANDS", "run_subcommand"]

DEFAULT_REPORT = Path(__file__).resolve().parents[1] / "out" / "report"


def _report(argv: Sequence[str] | None) -> int:
    parser = ArgumentParser(
        prog="python -m figures report",
        description="Render the findings page (index.html + REPORT.md): every checked claim of "
        "the seed papers with our numbers, verdict, figure and command, from the committed "
        "summaries in figures/summaries/ (no results/ needed; about a minute).",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_REPORT,
        help=f"output folder (default: {display_path(DEFAULT_REPORT)})",
    )
    parser.add_argument(
        "--self-contained",
        action="store_true",
        help="embed the images in index.html (one file to send around)",
    )
    parser.add_argument(
        "--no-figures",
        action="store_true",
        help="write the tables only, without drawing the figures (seconds)",
    )
    args = parser.parse_args(argv)
    from sims.runtime.io import ensure_writable

    try:
        ensure_writable(args.out, kind="dir", arg="--out")
    except ValueError as exc:
        parser.error(str(exc))
    from . import build_report

    rep = build_report(
        args.out, embed=args.self_contained, draw_figures=not args.no_figures, progress=print
    )
    counts: dict[str, int] = {}
    for r in rep.rows:
        counts[r.finding.verdict] = counts.get(r.finding.verdict, 0) + 1
    print(f"{len(rep.rows)} claims: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    for name, err in rep.failed_figures.items():
        print(f"[{name}] NOT DRAWN: {err}")
    for name, extra in rep.skipped_figures.items():
        print(f"[{name}] not drawn: needs the `{extra}` extra")
    print(
        f"wrote {rep.html} and {rep.markdown} in {rep.seconds:.0f} s "
        f"(open it with: xdg-open {rep.html})"
    )
    return 1 if rep.failed_figures else 0


def _summaries(argv: Sequence[str] | None) -> int:
    from figures import DEFAULT_RESULTS

    from .sources import SOURCES
    from .store import SUMMARY_DIR

    parser = ArgumentParser(
        prog="python -m figures summaries",
        description="Rewrite the committed summaries (figures/summaries/) from the full results: "
        "the reduced result files the figures draw, the numbers the findings page reads, and "
        "their provenance. Sources whose results are missing are listed with the command that "
        "makes them and keep their previous summary.",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=DEFAULT_RESULTS,
        help=f"results folder (default: {display_path(DEFAULT_RESULTS)})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=SUMMARY_DIR,
        help=f"summaries folder (default: {display_path(SUMMARY_DIR)})",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="NAME",
        help=f"rewrite only these sources (theory, {', '.join(SOURCES)})",
    )
    args = parser.parse_args(argv)
    if not args.results.is_dir():
        parser.error(
            f"--results {str(args.results)!r} is not a folder; run the experiments "
            "first (python -m figures, python -m theory)"
        )
    unknown = [n for n in args.only or () if n != "theory" and n not in SOURCES]
    if unknown:
        parser.error(f"unknown source(s) {unknown}; known: theory, {', '.join(SOURCES)}")
    from sims.runtime.io import ensure_writable

    try:
        ensure_writable(args.out, kind="dir", arg="--out")
    except ValueError as exc:
        parser.error(str(exc))
    from .summaries import write_summaries

    status = write_summaries(args.results, root=args.out, only=args.only)
    n = sum(v == "written" for v in status.values())
    from sims.runtime.io import atomic_path

    from . import findings_markdown

    with atomic_path(args.out / "FINDINGS.md") as tmp:
        tmp.write_text(findings_markdown(args.out), encoding="utf-8")
    print(f"{n} of {len(status)} summaries written to {args.out}, with FINDINGS.md")
    return 0


SUBCOMMANDS = {"report": _report, "summaries": _summaries}


def run_subcommand(command: str, argv: Sequence[str] | None = None) -> int:
    """Run a subcommand with the project's exit contract (bad input: 2; Ctrl-C: 130)."""
    return run_cli(SUBCOMMANDS[command], argv, prog=f"python -m figures {command}")
