"""``python -m figures``: regenerate every registered figure (or a chosen few)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from . import DEFAULT_OUT, DEFAULT_RESULTS, discover


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and render the figures."""
    parser = argparse.ArgumentParser(
        prog="python -m figures",
        description="Regenerate the paper figures from saved results (computing missing ones).",
    )
    parser.add_argument("--list", action="store_true", help="list the registered figures")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="render only these figures")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--results", type=Path, default=DEFAULT_RESULTS, help="results folder")
    parser.add_argument("--quick", action="store_true", help="small configurations")
    parser.add_argument("--recompute", action="store_true", help="recompute saved results")
    args = parser.parse_args(argv)

    figures = discover()
    if args.list:
        width = max(len(n) for n in figures) if figures else 4
        for name, mod in figures.items():
            spec = mod.FIGURE
            print(f"{name:<{width}}  {spec.paper_ref:<28}  {spec.title}")
            print(f"{'':<{width}}  result: {spec.result_file}  <- {spec.producer}")
        return 0
    names = args.only or list(figures)
    unknown = [n for n in names if n not in figures]
    if unknown:
        parser.error(f"unknown figure(s) {unknown}; `python -m figures --list` lists them")
    for name in names:
        t0 = time.perf_counter()
        paths = figures[name].make(
            args.out, results_dir=args.results, quick=args.quick, recompute=args.recompute
        )
        dt = time.perf_counter() - t0
        for p in paths:
            print(f"[{name}] {p}  ({dt:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
