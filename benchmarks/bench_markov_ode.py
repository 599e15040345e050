"""Benchmark: one Figure 10 tensor-flow run (T = 40, t_max = 1e4, LSODA). Target < 2 s on 2 cores.

Usage: ``python benchmarks/bench_markov_ode.py [--repeat 3]``; prints JSON (with the load average,
since the 2 cores are shared).
"""

from __future__ import annotations

import json
import os
import time

from sims.markov.tensor_dynamics import FlowConfig, solve_flow, stage_times
from sims.runtime.cli import ArgumentParser, positive_int


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=positive_int, default=3)
    a = p.parse_args(argv)
    cfg = FlowConfig(T=40, t_max=1e4)
    solve_flow(FlowConfig(T=5, t_max=10.0))  # numba compile / cache load
    times = []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        res = solve_flow(cfg)
        times.append(time.perf_counter() - t0)
    out = {"bench": "markov_ode_fig10", "seconds_min": min(times), "seconds_all": times,
           "nfev": res.nfev, "stage_times": stage_times(res.ds).tolist(), "target_s": 2.0,
           "loadavg": os.getloadavg()}  # fmt: skip
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
