"""Extra seeds for the findings page's one-seed Markov rows (issue 28: n >= 3 for a verdict).

``python -m figures.report.reruns [--figs fig1 fig6_7] [--seeds 1 2 3 4] [--results DIR]``
trains the seed-004 minimal model (Figure 1; online sampling, Figures 6-7) at the CPU scale for
each extra seed (~2 CPU-minutes each; seed 0 is the figure's own run) and writes
``<results>/markov/seeds/<fig>_seed<s>.nc``; ``python -m figures summaries --only markov_seeds``
then adds their stage counts to the page (``numbers/markov_seeds.json``). Saved seeds are
skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["EXPERIMENTS", "SEEDS_DIR", "seed_path", "run", "main"]

#: Figure key → the experiment (a function of the scale) of the row's figure.
EXPERIMENTS = {"fig1": {}, "fig6_7": {"online": True}}
SEEDS_DIR = "markov/seeds"
COMMAND = "python -m figures.report.reruns"


def seed_path(results_dir, fig: str, seed: int) -> Path:
    """``<results>/markov/seeds/<fig>_seed<seed>.nc``."""
    return Path(results_dir) / SEEDS_DIR / f"{fig}_seed{seed}.nc"


def run(results_dir, figs: Sequence[str], seeds: Sequence[int], *, progress=print) -> list[Path]:
    """Train every missing (figure, seed) run at the CPU scale and save it."""
    from sims.markov import experiments as X
    from sims.markov.train import train
    from sims.runtime.io import provenance, write_netcdf

    out = []
    for fig in figs:
        for s in seeds:
            path = seed_path(results_dir, fig, s)
            if not path.exists():
                exp = X.reseed(X.minimal_exp("cpu", **EXPERIMENTS[fig]), s)
                ds = train(exp, device="cpu").ds
                write_netcdf(path, ds, meta=provenance(exp.to_dict(), seed=s))
                progress(f"[{fig} seed {s}] {path}")
            out.append(path)
    return out


def _main(argv: Sequence[str] | None) -> int:
    from figures import DEFAULT_RESULTS
    from sims.runtime.cli import ArgumentParser, UsageError, display_path, seed_list
    from sims.runtime.io import acquire_run_lock, ensure_writable

    p = ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    p.add_argument("--figs", nargs="+", choices=list(EXPERIMENTS), default=list(EXPERIMENTS),
                   help="the figures whose rows get extra seeds (default: both)")
    p.add_argument("--seeds", type=seed_list, default=(1, 2, 3, 4),
                   help="extra seeds, comma-separated, each >= 1 (seed 0 is the figure's own "
                        "run; default 1,2,3,4)")  # fmt: skip
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS,
                   help=f"results folder (default {display_path(DEFAULT_RESULTS)}); the runs "
                        f"go to <results>/{SEEDS_DIR}/")  # fmt: skip
    a = p.parse_args(argv)
    if 0 in a.seeds:
        p.error("--seeds must be >= 1 (seed 0 is the figure's own run)")
    try:
        ensure_writable(a.results, kind="dir", arg="--results")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    acquire_run_lock(a.results, arg="--results", prog=COMMAND)  # one live run per folder
    run(a.results, a.figs, a.seeds)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (bad arguments: one line, exit status 2, before any run; Ctrl-C: 130)."""
    from sims.runtime.cli import run_cli

    return run_cli(_main, argv, prog=COMMAND)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
