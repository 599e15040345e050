"""Wall time of the main job (`python -m sims.sam_entropy`) against the 10 s target (2 cores).

Runs the default check in a fresh interpreter (imports included, as a user would see it) a few
times and prints the median, plus the in-process cost of the check with and without the
quadrature/ODE cross-checks and of the sweep.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

TARGET_S = 10.0


def wall(cmd: list[str], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    from sims.sam_entropy import SamEntropyConfig, SweepConfig, check_theorem, sweep

    with tempfile.TemporaryDirectory() as out:
        full = wall([sys.executable, "-m", "sims.sam_entropy", "--out", out])
        js = wall([sys.executable, "-m", "sims.sam_entropy", "--json", "--no-plot", "--out", out])
    t0 = time.perf_counter()
    check_theorem(SamEntropyConfig())
    t_check = time.perf_counter() - t0
    t0 = time.perf_counter()
    check_theorem(SamEntropyConfig(cross_check=False))
    t_closed = time.perf_counter() - t0
    t0 = time.perf_counter()
    sweep(SweepConfig(), progress=False)
    t_sweep = time.perf_counter() - t0
    print(f"python -m sims.sam_entropy (table+NetCDF+JSON+figure): {full:.2f} s  "
          f"(target {TARGET_S:.0f} s, ratio {TARGET_S / full:.1f}x under)")  # fmt: skip
    print(f"python -m sims.sam_entropy --json --no-plot:            {js:.2f} s")
    print(f"check_theorem, with quad+ODE cross-checks:              {t_check * 1e3:.0f} ms")
    print(f"check_theorem, closed forms only:                       {t_closed * 1e3:.1f} ms")
    print(f"sweep, 2 dynamics x 16 spreads x 25 rho (800 checks):   {t_sweep:.2f} s")


if __name__ == "__main__":
    main()
