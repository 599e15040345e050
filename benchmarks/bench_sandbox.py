"""Throughput of the program-of-thought sandbox (``llm_validation.execution``): programs
per second.

Runs the corpus's own program-of-thought solutions (a few lines each, ``print`` at the end)
through :func:`llm_validation.execution.run_programs`, with and without the root-only
isolation layers, interleaved over ``--reps`` repetitions (the best repetition is reported: other
jobs on a shared machine only slow a run down). Prints the layers in force, the load average, and a
last line ``programs_per_s=... (target >= 20 on 2 cores)``. Issue 20 asks for >= 20 programs/s on
2 cores.

    python benchmarks/bench_sandbox.py                 # 200 programs, default workers
    python benchmarks/bench_sandbox.py --n 400 --workers 2 --reps 3
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages
from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402 - this checkout's


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--n", type=positive_int, default=200, help="programs per repetition (default 200)"
    )
    p.add_argument("--workers", type=positive_int, default=None,
                   help="programs at once (default: run_programs' default)")  # fmt: skip
    p.add_argument(
        "--reps", type=positive_int, default=3, help="interleaved repetitions (default 3)"
    )
    args = p.parse_args(argv)
    if args.n < 1 or args.reps < 1 or (args.workers is not None and args.workers < 1):
        p.error("--n, --reps and --workers must be >= 1")

    from llm_validation.data.corpus import generate_corpus
    from llm_validation.execution import isolation, run_programs

    progs = [r["output"] for r in generate_corpus(20 * args.n, seed=7) if r["style"] == "code"]
    progs = (progs * (1 + args.n // max(1, len(progs))))[: args.n]
    sizes = [len(x) for x in progs]
    layers = ", ".join(isolation()) or "none"
    print(f"{len(progs)} programs of {min(sizes)}-{max(sizes)} characters; {os.cpu_count()} "
          f"cores; isolation layers: {layers}")  # fmt: skip
    best = {True: 0.0, False: 0.0}
    for rep in range(args.reps):
        for isolate in (True, False):
            t0 = time.perf_counter()
            res = run_programs(progs, workers=args.workers, isolate=isolate)
            rate = len(progs) / (time.perf_counter() - t0)
            ok = sum(r.ok for r in res)
            if ok != len(res):
                bad = next(r for r in res if not r.ok)
                raise SystemExit(f"{len(res) - ok} programs failed, e.g. {bad.error!r}")
            best[isolate] = max(best[isolate], rate)
            print(f"rep {rep}: isolate={isolate!s:5} {rate:6.1f} programs/s "
                  f"(load {os.getloadavg()[0]:.1f})")  # fmt: skip
    print(f"limits only: {best[False]:.1f} programs/s; isolation costs "
          f"{best[False] / best[True]:.2f}x")  # fmt: skip
    print(f"programs_per_s={best[True]:.1f} (target >= 20 on 2 cores)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
