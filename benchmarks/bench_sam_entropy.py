"""Wall and CPU time of the main job (`python -m sims.sam_entropy`) against its targets (2 cores).

Runs each command in a fresh interpreter (imports included, as a user would see it) ``--repeats``
times and prints the minimum and median wall time and CPU time (user + sys of the child, from
``resource.getrusage``): the default check (target 10 s) and the large spectrum of issue 24,
``--family power --dim 60000 --no-plot --json`` (target 10 s; over 10 minutes before the learning
times were vectorized). Then the in-process cost of the check with and without the quadrature/ODE
cross-checks, of the 60,000-feature check, and of the sweep. On a loaded machine the wall time
is inflated by other jobs; the CPU time much less so.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import tempfile
import time

from sims.runtime.cli import ArgumentParser, positive_int

TARGET_S = 10.0


def timed(cmd: list[str], repeats: int) -> tuple[list[float], list[float]]:
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return walls, cpus


def _row(label: str, walls: list[float], cpus: list[float]) -> str:
    return (f"{label:58s} wall min {min(walls):6.2f} s (median {statistics.median(walls):6.2f}), "
            f"CPU min {min(cpus):6.2f} s; target {TARGET_S:.0f} s -> "
            f"{'MET' if min(walls) <= TARGET_S else 'NOT MET'}")  # fmt: skip


def main(argv=None) -> None:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=positive_int, default=3)
    args = p.parse_args(argv)
    from sims.sam_entropy import SamEntropyConfig, SweepConfig, check_theorem, spectrum, sweep

    job = [sys.executable, "-m", "sims.sam_entropy"]
    with tempfile.TemporaryDirectory() as out:
        rows = [
            ("python -m sims.sam_entropy (table+NetCDF+JSON+figure)", [*job, "--out", out]),
            ("python -m sims.sam_entropy --json --no-plot", [*job, "--json", "--no-plot", "--out",
                                                             out]),
            ("... --family power --dim 60000 --no-plot --json",
             [*job, "--family", "power", "--dim", "60000", "--no-plot", "--json", "--out", out]),
        ]  # fmt: skip
        for label, cmd in rows:
            print(_row(label, *timed(cmd, args.repeats)), flush=True)
    for label, cfg in (
        ("check_theorem, d = 4, with quad+ODE cross-checks", SamEntropyConfig()),
        ("check_theorem, d = 4, closed forms only", SamEntropyConfig(cross_check=False)),
        ("check_theorem, power d = 60000, cross-checks (16 features)",
         SamEntropyConfig(eigenvalues=tuple(spectrum("power", 60_000)))),
        ("check_theorem, power d = 60000, closed forms only",
         SamEntropyConfig(eigenvalues=tuple(spectrum("power", 60_000)), cross_check=False)),
    ):  # fmt: skip
        t0, c0 = time.perf_counter(), time.process_time()
        check_theorem(cfg, progress=False)
        print(f"{label:58s} {time.perf_counter() - t0:8.3f} s wall, "
              f"{time.process_time() - c0:8.3f} s CPU")  # fmt: skip
    t0 = time.perf_counter()
    sweep(SweepConfig(), progress=False)
    print(f"{'sweep, 4 models x 12 spreads x 22 rho':58s} {time.perf_counter() - t0:8.3f} s wall")


if __name__ == "__main__":
    main()
