"""Measured per-run cost of the confirmation experiment and the estimated time of its full runs.

The confirmation (``python -m llm_validation confirm``) runs in three phases, each a pool of
``workers`` single-threaded processes: (1) pre-training of the from-scratch target and proxy,
(2) one proxy trajectory run per seed, (3) one fine-tuning + evaluation run per (variant, seed)
plus the pretrained model's evaluation. This script reads the CPU seconds of every job of a
finished run (``results.nc``: ``job_cpu_seconds``, ``run_cpu_seconds``, ``train_steps``),
models a fine-tuning run's cost as ``a + b * steps`` (fitted to the measured runs: FT+UP and
``ft_matched`` take more steps than FT), and schedules the jobs of a full run on ``workers``
idle cores (longest job first, phase after phase) to estimate its wall time. CPU seconds are
the process's own (``time.process_time``), so a measurement on a loaded machine still gives the
idle-core cost (approximately: shared caches slow it somewhat).

    python benchmarks/bench_confirm.py --results results/llm/confirm_cpu
    python benchmarks/bench_confirm.py --measure results/bench_confirm   # runs seed 0 first

``--measure DIR`` first runs the scale with one seed and the variants ``ft, ft_matched, ft_up``
into DIR (resumable), then reports from it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages

from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402


def estimate(ds, variants, seeds: int, workers: int) -> dict:
    """Estimated wall seconds per phase.

    ``llm_validation.experiments.confirm.estimate_run``, shared with ``confirm``'s own
    announcement.
    """
    from llm_validation.experiments.confirm import estimate_run

    return estimate_run(ds, variants, seeds, workers)


def check_against_run(ds, workers: int) -> dict:
    """The estimate of the run ``ds`` itself (its variants and seeds) beside what it measured.

    A run records ``wall_seconds_measured`` and ``cpu_seconds_measured`` (issue 36). On a
    shared machine the wall time is inflated by the load, so the comparison that holds there is
    CPU against CPU; the wall-time check needs a run on idle cores.
    """
    variants = [str(v) for v in ds["variant"].values]
    e = estimate(ds, variants, ds.sizes["seed"], workers)
    wall = float(ds.attrs.get("wall_seconds_measured", float("nan")))
    cpu = float(ds.attrs.get("cpu_seconds_measured", float("nan")))
    return {
        "estimate_wall": e["total"],
        "estimate_cpu": e["cpu_total"],
        "measured_wall": wall,
        "measured_cpu": cpu,
        "wall_ratio": e["total"] / wall if wall else float("nan"),
        "cpu_ratio": e["cpu_total"] / cpu if cpu else float("nan"),
    }


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--results", default=None, help="a finished confirmation run's folder")
    p.add_argument(
        "--measure", default=None, metavar="DIR",
        help="first run one seed (ft, ft_matched, ft_up) of --scale into DIR",
    )  # fmt: skip
    p.add_argument("--scale", default="cpu", help="the scale to estimate (default cpu)")
    p.add_argument("--workers", type=positive_int, default=2, help="idle cores (default 2)")
    args = p.parse_args(argv)
    from llm_validation.experiments.confirm import SCALES, VARIANTS

    if args.scale not in SCALES:
        p.error(f"--scale must be one of {', '.join(SCALES)}; got {args.scale!r}")
    if (args.results is None) == (args.measure is None):
        p.error("give exactly one of --results DIR and --measure DIR")
    cfg = SCALES[args.scale]
    folder = Path(args.results or args.measure)
    if args.measure:
        from sims.runtime.io import ensure_writable

        try:  # before an hour of training, not after
            ensure_writable(folder, kind="dir", arg="--measure")
        except ValueError as exc:
            p.error(str(exc))
        from llm_validation.experiments.confirm import run_confirmation

        one = dataclasses.replace(cfg, seeds=(0,), variants=("ft", "ft_matched", "ft_up"),
                                  workers=args.workers)  # fmt: skip
        run_confirmation(one, folder, quiet=True)
    if not (folder / "results.nc").exists():
        p.error(f"--results: no results.nc in {folder}")
    from sims.runtime.io import read_netcdf

    ds = read_netcdf(folder / "results.nc")
    job = json.loads(ds.attrs.get("job_cpu_seconds", "{}"))
    if not job or "run_cpu_seconds" not in ds:
        p.error(f"--results: {folder} was written before per-job costs were recorded; rerun it")
    print(f"measured in {folder} (scale {ds.attrs.get('scale')}; CPU seconds, one thread each)")
    for k, v in job.items():
        vals = v if isinstance(v, list) else [v]
        print(f"  {k:16s} " + ", ".join(f"{x:.0f}" for x in vals))
    for v in ds["variant"].values:
        c = ds["run_cpu_seconds"].sel(variant=v).values
        s = ds["train_steps"].sel(variant=v).values
        runs = [f"{x:.0f} s ({int(n) if math.isfinite(n) else '?'} steps)"
                for x, n in zip(c, s, strict=True)]  # fmt: skip
        print(f"  run {str(v):12s} " + ", ".join(runs))
    if "wall_seconds_measured" in ds.attrs:
        c = check_against_run(ds, args.workers)
        ok = abs(c["cpu_ratio"] - 1) <= 0.15
        print(f"this run: estimated {c['estimate_wall'] / 60:.1f} min wall / "
              f"{c['estimate_cpu'] / 60:.1f} CPU-min on {args.workers} idle cores; measured "
              f"{c['measured_wall'] / 60:.1f} min wall (load {ds.attrs.get('load', '?')}) / "
              f"{c['measured_cpu'] / 60:.1f} CPU-min: CPU estimate/measured "
              f"{c['cpu_ratio']:.2f} ({'within' if ok else 'outside'} 15 %), wall "
              f"{c['wall_ratio']:.2f}")  # fmt: skip
    for label, variants in (("default", cfg.variants), ("--variants all", tuple(VARIANTS))):
        e = estimate(ds, variants, len(cfg.seeds), args.workers)
        ph = ", ".join(f"{k} {v / 60:.1f}" for k, v in e["phases"].items())
        print(f"estimate, {label} ({len(variants)} variants x {len(cfg.seeds)} seeds) on "
              f"{args.workers} idle cores: {e['total'] / 60:.0f} min ({ph} min; "
              f"{e['cpu_total'] / 60:.0f} CPU-min; run cost {e['fit'][0]:.0f} s + "
              f"{e['fit'][1]:.2f} s/step, FT {e['ft_steps']:.0f} / FT+UP {e['up_steps']:.0f} "
              f"steps; an estimate, not a timing)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
