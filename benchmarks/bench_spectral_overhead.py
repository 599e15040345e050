"""Benchmark: cost of recording spectra every 10 steps on the CPU pre-training configuration.

Target (issue 12): recording every 10 steps adds at most 10% to the step time of the CPU
configuration of :func:`sims.sosd.bridge.lm_sosd_config` (the :mod:`sims.lm` default decoder,
0.1M parameters, batch 16 x 64 tokens, AdamW). Plain :func:`sims.lm.train_lm` runs (A) and runs
with :func:`sims.sosd.bridge.train_lm_with_spectra` (B, float64 SVDs of all 8 matrices every
``--every`` steps, weight snapshots every 100 steps) are interleaved A, B, A, B, ... on the same
seed, with validation off, and timed by wall clock; the printed ratio is median(B) / median(A).
The time spent inside the recorder (``recording_seconds``) is printed too.

Usage: ``python benchmarks/bench_spectral_overhead.py [--steps 200] [--reps 3] [--every 10]
[--threads 1]``; prints JSON with the load average (timings on a loaded machine are
provisional).
"""

from __future__ import annotations

import json
import os
import time

import torch

from sims.runtime.cli import ArgumentParser, positive_int


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--steps", type=positive_int, default=200, help="steps per timed run (default 200)"
    )
    p.add_argument(
        "--reps", type=positive_int, default=3, help="interleaved repetitions (default 3)"
    )
    p.add_argument("--every", type=positive_int, default=10, help="recording interval (default 10)")
    p.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1)")
    a = p.parse_args(argv)
    if min(a.steps, a.reps, a.every, a.threads) < 1:
        p.error("--steps, --reps, --every and --threads must be >= 1")
    torch.set_num_threads(a.threads)
    from sims.lm import train_lm
    from sims.sosd.bridge import lm_sosd_config, train_lm_with_spectra

    cfg = lm_sosd_config("constant", scale="cpu").replace(steps=a.steps, eval_every=0,
                                                          threads=a.threads)  # fmt: skip
    make_corpus_once = train_lm(cfg.replace(steps=2, warmup_steps=1))  # warm caches
    del make_corpus_once
    plain, rec, inside = [], [], []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        train_lm(cfg)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _, sp = train_lm_with_spectra(cfg, every=a.every, snapshot_every=100)
        rec.append(time.perf_counter() - t0)
        inside.append(float(sp.attrs["recording_seconds"]))
    med = sorted(plain)[len(plain) // 2], sorted(rec)[len(rec) // 2]
    out = {
        "config": "lm_sosd_config('constant', scale='cpu')", "steps": a.steps, "every": a.every,
        "threads": a.threads, "reps": a.reps,
        "plain_seconds": plain, "recording_seconds_total": rec, "inside_recorder": inside,
        "ratio_recording_over_plain": med[1] / med[0],
        "overhead_percent": 100 * (med[1] / med[0] - 1),
        "recorder_share_percent": 100 * float(sorted(inside)[len(inside) // 2]) / med[0],
        "target_percent": 10.0,
        "loadavg": os.getloadavg(),
    }  # fmt: skip
    print(json.dumps(out, indent=1))
    print(f"recording every {a.every} steps: {out['ratio_recording_over_plain']:.3f}x the plain "
          f"run time ({out['overhead_percent']:+.1f}%; recorder itself "
          f"{out['recorder_share_percent']:.1f}%; target <= 10%) at load "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
