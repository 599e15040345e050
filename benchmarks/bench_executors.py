"""Benchmark: the same Markov sweep on the ``processes`` pool and on ``dask-local:2``.

The sweep is the tensor-flow half of ``markov_beyond`` (:func:`sims.markov.beyond.ode_uniformity`:
discrete GD and SAM on the reduced tensor loss, 4 radii x 2 seeds = 8 jobs at T = 40), run through
the library exactly as the figure runs it, with the executor chosen as ``--executor`` would.

Each repeat times, in this order (interleaved, so a change of the machine's load hits all three):
* ``processes``: a fresh spawn pool of 2 workers (what every sweep does);
* ``dask-local:2`` cold: start a LocalCluster of 2 workers, run the sweep (start-up included);
* ``dask-local:2`` warm: the same sweep again on that cluster (a second sweep of the same run).
The minimum over repeats of each is the figure of merit (the cores are shared: the minimum is the
run least disturbed by others); the ratios ``cold / processes`` and ``warm / processes`` are
printed with every time and the load average. Target: cold <= 1.15 x.

Usage: ``python benchmarks/bench_executors.py [--repeat 3] [--steps 60000]``; prints JSON.
"""

from __future__ import annotations

import json
import os
import time

from sims.runtime.cli import ArgumentParser, positive_int


def _sweep(steps: int):
    from sims.markov.beyond import ode_uniformity

    return ode_uniformity(rhos=(0.0, 0.01, 0.05, 0.2), seeds=(0, 1), steps=steps, T=40)


def _timed(steps: int) -> tuple[float, object]:
    t0 = time.perf_counter()
    ds = _sweep(steps)
    return time.perf_counter() - t0, ds


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--repeat", type=positive_int, default=3, help="interleaved repetitions (default 3)"
    )
    p.add_argument(
        "--steps", type=positive_int, default=60000, help="GD/SAM steps per job (default 60000)"
    )
    a = p.parse_args(argv)
    from sims.markov.beyond import _ode_stage_times
    from sims.runtime.executors import close_clusters
    from sims.runtime.parallel import use_executor

    os.environ["SBT_WORKERS"] = "2"  # the pool's size, as dask-local:2
    _ode_stage_times((0.0, 0, 0.1, 200, 40, 1e-6, 50))  # numba cache, here and on disk
    times: dict[str, list[float]] = {"processes": [], "dask_cold": [], "dask_warm": []}
    ref = None
    for _ in range(a.repeat):
        use_executor("processes")
        t, ds = _timed(a.steps)
        times["processes"].append(t)
        use_executor("dask-local:2")
        t, cold = _timed(a.steps)  # starts the cluster
        times["dask_cold"].append(t)
        t, warm = _timed(a.steps)
        times["dask_warm"].append(t)
        close_clusters()
        ref = ds if ref is None else ref
        for other in (ds, cold, warm):  # same numbers whatever ran them
            assert other.identical(ref), "results differ between executors"
    best = {k: min(v) for k, v in times.items()}
    out = {
        "bench": "executors",
        "jobs": 8,
        "steps": a.steps,
        "seconds_min": best,
        "seconds_all": times,
        "ratio_dask_cold_over_processes": best["dask_cold"] / best["processes"],
        "ratio_dask_warm_over_processes": best["dask_warm"] / best["processes"],
        "target_ratio_cold": 1.15,
        "loadavg_end": os.getloadavg(),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
