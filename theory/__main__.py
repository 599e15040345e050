"""``python -m theory``: run the SymPy checks and print/write the verdict table.

Exit status: 0 when every check ran (refuted claims are findings, not failures), 1 when a check
crashed, 2 on bad usage (unknown claim name, an ``--out`` folder that cannot be written; both are
reported in one line before any check runs), 130 on Ctrl-C (one line; nothing is written, so an
earlier report stays as it was). Progress (one tick per claim) goes to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from sims.runtime.cli import ArgumentParser, UsageError, display_path, run_cli

from .report import ERROR, format_table, run_claims, write_report
from .verify import set_exhaustive

PROG = "python -m theory"
DEFAULT_OUT = "results/theory"


def _parser() -> ArgumentParser:
    p = ArgumentParser(
        prog=PROG,
        description="Re-derive the main paper's lemmas and theorems with SymPy and report, claim "
        "by claim: verified / verified under an approximation / printed statement refuted; "
        "corrected form verified / refuted / not checkable, with the sizes and method behind "
        "each verdict. Progress goes to stderr (about a minute for every claim on 2 cores).",
    )
    p.add_argument("--claim", action="append", metavar="NAME",
                   help="run only this claim (repeatable); see --list")  # fmt: skip
    p.add_argument("--list", action="store_true", help="list the registered claims and exit")
    p.add_argument("--out", default=None, metavar="DIR",
                   help=f"folder for report.md and report.json (default: "
                        f"{display_path(DEFAULT_OUT)} for the full report; --claim and "
                        f"--exhaustive runs write below it, to claims/<names>/ and "
                        f"exhaustive/, never over the full report)")  # fmt: skip
    p.add_argument("--no-write", action="store_true", help="print the table only")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--plant", action="store_true",
                   help="run the planted-statement harness instead (every check on a perturbed "
                        "statement; prints how many flip; a few minutes)")  # fmt: skip
    p.add_argument(
        "--exhaustive",
        action="store_true",
        help="also run the larger sizes (d = 4-5, H = 4; several minutes on 2 cores)",
    )
    return p


def default_out(claims: Sequence[str] | None, exhaustive: bool = False) -> str:
    """Where a run writes without ``--out``: the full report's folder only for the full report.

    Examples:
        >>> default_out(None), default_out(["a", "b"]), default_out(None, True)
        ('results/theory', 'results/theory/claims/a+b', 'results/theory/exhaustive')
    """
    import hashlib

    parts = []
    if claims:
        names = "+".join(dict.fromkeys(claims))
        if len(names) > 100:
            names = f"{len(claims)}-claims-{hashlib.sha256(names.encode()).hexdigest()[:10]}"
        parts.append(f"claims/{names}")
    if exhaustive:
        parts.insert(0, "exhaustive")
    return "/".join([DEFAULT_OUT, *parts])


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and call the library (:mod:`theory.report`); return the exit status."""
    return run_cli(_main, argv, prog=PROG)


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    if args.list:
        from . import load_all

        for name, c in load_all().items():
            flag = " [erratum]" if c.erratum else (" [approx]" if c.approximation else "")
            print(f"{name:46s} {c.reference}{flag}")
        return 0
    if args.out is None:
        args.out = default_out(args.claim, args.exhaustive)
    if not args.no_write:
        from sims.runtime.io import acquire_run_lock, ensure_writable

        try:
            ensure_writable(args.out, kind="dir", arg="--out")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not args.plant:  # the harness writes nothing
            acquire_run_lock(args.out, arg="--out", prog=PROG)
    if args.claim:
        from . import load_all

        reg = load_all()
        unknown = [n for n in args.claim if n not in reg]
        if unknown:
            import difflib

            near = difflib.get_close_matches(unknown[0], list(reg), n=3)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise UsageError(f"unknown claim {unknown[0]!r}.{hint} `{PROG} --list` lists them.")
    set_exhaustive(args.exhaustive)
    if args.plant:
        from .plant import format_plants, plant_claims

        try:
            rows = plant_claims(args.claim, progress=not args.no_progress,
                                on_row=lambda r: print(f"{r.name}: {r.coef} / {r.sign}",
                                                       file=sys.stderr, flush=True))
            print(format_plants(rows))
        finally:
            set_exhaustive(False)
        return 0
    try:
        rows = run_claims(args.claim, progress=not args.no_progress)
    except KeyboardInterrupt as exc:
        kept = "" if args.no_write else f"; nothing was written to {args.out}"
        raise KeyboardInterrupt(f"{exc or 'interrupted'}{kept}") from None
    finally:
        set_exhaustive(False)
    print(format_table(rows))
    if not args.no_write:
        md, js = write_report(rows, args.out)
        print(f"\nwrote {md} and {js}")
    crashed = [r for r in rows if r.verdict == ERROR]
    for r in crashed:
        print(f"\ncheck {r.name} crashed:\n{r.error}", file=sys.stderr)
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
