"""``python -m figures``: regenerate every registered figure (or a chosen few)."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence

from sims.runtime.cli import ArgumentParser, add_folder_arguments, check_folders, run_cli
from sims.runtime.extras import EXTRAS
from sims.runtime.parallel import DISPATCHED, add_executor_argument, executor_notice

from . import DEFAULT_OUT, DEFAULT_RESULTS, discover, figure_map


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and render the figures (exit 2 on bad input, 130 on Ctrl-C).

    ``python -m figures report ...`` and ``python -m figures summaries ...`` are the findings
    page and its committed summaries (:mod:`figures.report.cli`).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("report", "summaries"):
        from .report.cli import run_subcommand as subcommand

        return subcommand(argv[0], argv[1:])
    return run_cli(_main, argv, prog="python -m figures")


def _main(argv: Sequence[str] | None = None) -> int:
    parser = ArgumentParser(
        prog="python -m figures",
        description="Regenerate the paper figures from saved results (computing missing ones; a "
        "figure whose result is missing but summarised in figures/summaries/ is drawn from the "
        "summary). Subcommands: `python -m figures report` (the findings page) and "
        "`python -m figures summaries` (rewrite the summaries from results/).",
    )
    parser.add_argument("--list", action="store_true", help="list the registered figures")
    parser.add_argument(
        "--markdown", action="store_true",
        help="print the figure map of figures/README.md (a Markdown table) and exit",
    )  # fmt: skip
    parser.add_argument("--only", nargs="+", metavar="NAME", help="render only these figures")
    add_folder_arguments(parser, out=DEFAULT_OUT, results=DEFAULT_RESULTS)
    parser.add_argument("--quick", action="store_true", help="small configurations")
    parser.add_argument("--recompute", action="store_true", help="recompute saved results")
    add_executor_argument(parser)
    args = parser.parse_args(argv)  # also validates the package's environment variables

    figures = discover()
    if args.markdown:
        print(figure_map(figures))
        return 0
    if args.list:
        width = max(len(n) for n in figures) if figures else 4
        for name, mod in figures.items():
            spec = mod.FIGURE
            needs = f"needs [{spec.extra}]" if spec.extra != "core" else "core"
            if spec.gpu:
                needs += ", GPU for the full run"
            if not spec.available:
                needs += f" - NOT INSTALLED: {EXTRAS[spec.extra].install}"
            print(f"{name:<{width}}  {spec.paper_ref:<28}  {spec.title}")
            print(f"{'':<{width}}  result: {spec.result_file}  <- {spec.producer}  ({needs})")
        return 0
    names = args.only or list(figures)
    unknown = [n for n in names if n not in figures]
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; `python -m figures --list` lists them")
    missing = [n for n in names if not figures[n].FIGURE.available]
    if args.only and missing:
        spec = figures[missing[0]].FIGURE
        parser.error(
            f"figure {spec.name!r} needs the `{spec.extra}` extra; "
            f"install it with: {EXTRAS[spec.extra].install}"
        )
    try:
        check_folders(args)
    except ValueError as exc:
        parser.error(str(exc))
    for name in missing:
        spec = figures[name].FIGURE
        print(f"[{name}] skipped: needs the `{spec.extra}` extra ({EXTRAS[spec.extra].install})")
    names = [n for n in names if n not in missing]
    for i, name in enumerate(names):
        t0 = time.perf_counter()
        before = DISPATCHED[0]
        try:
            with _results_for(figures[name].FIGURE, args) as results_dir:
                paths = figures[name].make(
                    args.out, results_dir=results_dir, quick=args.quick, recompute=args.recompute
                )
        except KeyboardInterrupt:
            raise KeyboardInterrupt(
                f"interrupted in figure {name} ({i} of {len(names)} figures done; their files "
                "and every saved result are kept: rerun to continue)"
            ) from None
        dt = time.perf_counter() - t0
        for p in paths:
            print(f"[{name}] {p}  ({dt:.1f} s)")
        note = executor_notice(args, before, f"figure {name}")
        if note:
            print(f"[{name}] {note}", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _results_for(spec, args):
    """``args.results``, or a scratch folder with the figure's committed summary.

    The summary stands in when the figure's full result is missing
    (:func:`figures.report.drawing.use_summary`).
    """
    from .report.drawing import summary_results, use_summary

    if not use_summary(spec, args.results, quick=args.quick, recompute=args.recompute):
        yield args.results
        return
    print(
        f"[{spec.name}] drawn from the committed summary in figures/summaries/ "
        f"(full run: {spec.producer})"
    )
    with summary_results([spec.name]) as folder:
        yield folder


if __name__ == "__main__":
    sys.exit(main())
