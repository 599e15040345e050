"""Figure 1 end to end: the paper's 10,001-step setting, or the long horizon with every method.

P=80,000 sequences, N=31, d=4, H=5, 25 paired runs; data generation, compilation and the k-means
selection included. ``--steps 10001 --methods paper`` is the paper's setting (target: 5 s wall on
2 idle cores, imports and compilation included); the default is what ``python -m figures``
computes: 200,001 steps and the six methods (GD, GD+upsampling, SAM, first-order SAM, head-wise
SAM, lr-matched GD).

    python benchmarks/bench_linear_attention.py [--runs 25] [--steps 200001] [--methods all]
        [--repeats 3]

Prints the wall time (imports and JIT compilation included), the process CPU time (user + sys,
all threads), the stage timings (wall; stages overlap on two threads), the machine load
(``os.getloadavg``: other jobs sharing the cores inflate the wall time), the per-method
statistics and the anchor comparison (linattn-icl: ~8.7 s per full-batch step here). With
``--repeats N`` it runs N fresh interpreters and prints the minimum, median and maximum.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time

from sims.runtime.cli import ArgumentParser, positive_int

T0 = time.perf_counter()
ANCHOR_S_PER_STEP = 8.7
TARGET_S = 5.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _repeat(argv: list[str], repeats: int) -> int:
    walls, cpus = [], []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, __file__, *argv, "--repeats", "1", "--json"],
                             check=True, capture_output=True, text=True).stdout  # fmt: skip
        row = json.loads(out.strip().splitlines()[-1])
        walls.append(row["wall_s"])
        cpus.append(row["cpu_s"])
    print(f"{repeats} fresh interpreters, load average now {os.getloadavg()}")
    print(f"wall (imports + JIT included): min {min(walls):.2f} s, median "
          f"{statistics.median(walls):.2f} s, max {max(walls):.2f} s; target {TARGET_S:.0f} s on "
          f"2 idle cores ({sum(w <= TARGET_S for w in walls)}/{repeats} within)")  # fmt: skip
    print(f"CPU user+sys (all threads):    min {min(cpus):.2f} s, median "
          f"{statistics.median(cpus):.2f} s")  # fmt: skip
    return 0


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=positive_int, default=25)
    p.add_argument("--steps", type=positive_int, default=200_001)
    p.add_argument("--methods", choices=["paper", "all"], default="all")
    p.add_argument("--P", type=positive_int, default=80_000)
    p.add_argument("--data", choices=["wishart", "tokens"], default="wishart")
    p.add_argument(
        "--repeats", type=positive_int, default=1, help="fresh interpreters (min and median)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON line (wall, CPU)")
    args = p.parse_args(argv)
    if args.repeats > 1:
        raw = sys.argv[1:] if argv is None else list(argv)
        keep = [a for i, a in enumerate(raw) if a != "--repeats" and
                (i == 0 or raw[i - 1] != "--repeats")]  # fmt: skip
        return _repeat(keep, args.repeats)
    load_before = os.getloadavg()
    import jax

    jax.config.update("jax_enable_x64", True)
    from sims.linear_attention.experiment import (
        METHOD_NAMES,
        PAPER_METHODS,
        Figure1Config,
        format_summary,
        run_figure1,
        summarize,
    )

    cfg = Figure1Config(
        n_runs=args.runs, num_steps=args.steps, paper_steps=min(10_001, args.steps),
        n_examples=args.P, data_method=args.data,
        methods=METHOD_NAMES if args.methods == "all" else PAPER_METHODS,
    )  # fmt: skip
    ds = run_figure1(cfg)
    wall = time.perf_counter() - T0  # from interpreter start: every import included
    cpu = _cpu()
    if args.json:
        print(json.dumps({"wall_s": wall, "cpu_s": cpu, "load": load_before}))
        return 0
    s = summarize(ds)
    n_steps_total = len(ds.method) * args.runs * args.steps
    print(f"cpu count: {os.cpu_count()}, load average before: {load_before}, "
          f"after: {os.getloadavg()}")  # fmt: skip
    paper = args.steps == 10_001 and args.methods == "paper"
    verdict = ("MET" if wall <= TARGET_S else "NOT MET") if paper else "n/a (not the paper setting)"
    print(f"Figure 1 ({args.runs} runs x {len(ds.method)} methods, P={args.P}, {args.steps} "
          f"steps, data={args.data}): wall {wall:.2f} s (imports + JIT included); paper-setting "
          f"target {TARGET_S:.0f} s on 2 idle cores -> {verdict}")  # fmt: skip
    print("stage timings (wall s, overlapping):",
          {k: round(v, 2) for k, v in ds.attrs["timings"].items()})  # fmt: skip
    print(
        f"process CPU time user+sys (all threads): {cpu:.2f} s -> lower bound on 2 idle cores "
        f"{cpu / 2:.2f} s; other processes share the cores when the load average exceeds 2"
    )
    print(f"per optimizer step (amortized over {n_steps_total} run-steps): "
          f"{wall / n_steps_total * 1e6:.2f} us; anchor linattn-icl ~{ANCHOR_S_PER_STEP} s/step "
          f"-> anchor: ~{ANCHOR_S_PER_STEP * n_steps_total / 86400:.0f} days")  # fmt: skip
    print(format_summary(s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
