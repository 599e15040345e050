"""Figure 1 end to end: the paper's 10,001-step setting, or the long horizon with every method.

P=80,000 sequences, N=31, d=4, H=5, 25 paired runs; data generation and k-means selection
included. ``--steps 10001 --methods paper`` is the paper's setting (target: 30 s on 2 cores);
the default is what ``python -m figures`` computes: 200,001 steps and the six methods (GD,
GD+upsampling, SAM, first-order SAM, head-wise SAM, lr-matched GD).

    python benchmarks/bench_linear_attention.py [--runs 25] [--steps 200001] [--methods all]

Prints the wall time (first call, JIT compilation included), the process CPU time, the stage
timings, the machine load (``os.getloadavg``: other jobs sharing the 2 cores inflate the wall
time), the per-method statistics and the anchor comparison (linattn-icl: ~8.7 s per full-batch
step here).
"""

from __future__ import annotations

import argparse
import os
import time

ANCHOR_S_PER_STEP = 8.7
TARGET_S = 30.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=25)
    p.add_argument("--steps", type=int, default=200_001)
    p.add_argument("--methods", choices=["paper", "all"], default="all")
    p.add_argument("--P", type=int, default=80_000)
    p.add_argument("--data", choices=["wishart", "tokens"], default="wishart")
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    c0 = time.process_time()
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
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    s = summarize(ds)
    n_steps_total = len(ds.method) * args.runs * args.steps
    print(f"cpu count: {os.cpu_count()}, load average before: {load_before}, "
          f"after: {os.getloadavg()}")  # fmt: skip
    verdict = "MET" if wall < TARGET_S else "NOT MET"
    print(f"Figure 1 ({args.runs} runs x {len(ds.method)} methods, P={args.P}, {args.steps} "
          f"steps, data={args.data}): wall {wall:.1f} s (imports + JIT included); paper-setting "
          f"target {TARGET_S:.0f} s -> {verdict}")  # fmt: skip
    print("stage timings (s):", {k: round(v, 2) for k, v in ds.attrs["timings"].items()})
    print(f"process CPU time (all threads): {cpu:.1f} s -> lower bound on 2 idle cores "
          f"{cpu / 2:.1f} s; other processes share the cores when the load average exceeds 2")
    print(f"per optimizer step (amortized over {n_steps_total} run-steps): "
          f"{wall / n_steps_total * 1e6:.2f} us; anchor linattn-icl ~{ANCHOR_S_PER_STEP} s/step "
          f"-> anchor: ~{ANCHOR_S_PER_STEP * n_steps_total / 86400:.0f} days")  # fmt: skip
    print(format_summary(s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
