"""Benchmark: sampling the chain (12,000 sequences, w = 12, d = 50) and the best restricted truths.

Targets on 2 idle cores: sampling < 1 s (it was a timed unit test before; speed lives here now);
the Monte Carlo best predictors of one CPU-scale run (100 test sequences, d = 20, 2048 particles,
groups 1 and 1..2) < 60 s.

Usage: ``python benchmarks/bench_markov_chain.py [--repeat 3] [--skip-best]``; prints JSON with
the load average (the cores are shared).
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

from sims.markov.chain import ChainConfig, MarkovChain, best_restricted_log_probs
from sims.runtime.cli import ArgumentParser, positive_int


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=positive_int, default=3, help="timed repetitions (default 3)")
    p.add_argument("--skip-best", action="store_true", help="time only the sampler")
    a = p.parse_args(argv)
    chain = MarkovChain(ChainConfig.hierarchical(w=12), seed=0)
    chain.sample(10, np.random.default_rng(0))  # numba compile / cache load
    times = []
    for k in range(a.repeat):
        t0 = time.perf_counter()
        chain.sample(12000, np.random.default_rng(k))
        times.append(time.perf_counter() - t0)
    out = {"bench": "markov_chain", "sample_12000_s_min": min(times), "sample_s_all": times,
           "sample_target_s": 1.0, "loadavg_sample": os.getloadavg()}  # fmt: skip
    if not a.skip_best:
        ch = MarkovChain(ChainConfig.hierarchical(w=6, d=20, T=20), seed=0)
        x = ch.sample(100, np.random.default_rng(1))
        best_restricted_log_probs(ch, x[:2], 1, method="monte-carlo", n_particles=8)  # compile
        t0 = time.perf_counter()
        for upto in (1, 2):
            best_restricted_log_probs(ch, x, upto, method="monte-carlo", n_particles=2048)
        out.update(best_cpu_run_s=time.perf_counter() - t0, best_target_s=60.0,
                   loadavg_best=os.getloadavg())  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
