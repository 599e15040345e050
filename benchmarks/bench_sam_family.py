"""Benchmark: step time and peak memory of every optimizer relative to AdamW (main paper Fig. 2).

The main paper reports preconditioned Functional-SAM at ~6x the step time and ~2x the memory of
AdamW on Phi-2 and calls it prohibitively expensive. Here every optimizer of
``sims.optim.build_optimizer`` trains the same :mod:`sims.lm` decoder on the same batch; target:
FSAM <= 2.2x AdamW's time and <= 1.3x its peak memory.

Method (each measurement in a fresh subprocess, so no allocator or cache state carries over):

* **time**: median of ``--steps`` timed steps after ``--warmup`` steps; ``--reps`` repetitions
  interleaved over the optimizers (the order rotates every repetition), and each ratio is the
  median over repetitions of ``t_opt / t_AdamW`` from the same repetition, so slow phases of a
  loaded machine hit both sides of a ratio.
* **memory**: peak bytes of live tensors, from the CPU allocator's running total that
  ``torch.profiler`` (``profile_memory=True``) records at every allocation and free; the
  profiler starts before the model is built, so parameters, gradients, optimizer states, SAM
  buffers and activations all count (``tracemalloc`` does not see torch's allocator, and peak RSS
  is dominated by the ~300 MB of the interpreter and libraries). Peak RSS above the pre-model
  baseline is reported alongside as a cross-check. On CUDA: ``torch.cuda.max_memory_allocated``.

Usage: ``python benchmarks/bench_sam_family.py [--reps 3] [--steps 5] [--threads 1]
[--device cpu|cuda] [--autocast none|bf16] [--out results/bench_sam_family.json]``. The
issue-25 GPU measurement is ``--device cuda --autocast bf16`` (not run yet: no GPU so far).
The last line reads ``FSAM/AdamW time_ratio=<x> memory_ratio=<y>``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's packages, also when run as a script
from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402 - this checkout's

OPTIMIZERS = ("adamw", "sgd", "muon", "sam", "fsam", "psam", "pfsam", "lsam", "angle_sam", "asam")
MODEL = dict(vocab_size=2048, seq_len=128, n_layer=4, n_head=4, d_model=128)
OPTIONS = {"angle_sam": {"angle_weights": (0.5, 0.5)}, "asam": {"adaptive": True, "rho": 0.5}}
BUILD = {"asam": "sam"}  # bench rows that are options of a build_optimizer name


def _worker(name: str, mode: str, a) -> dict:
    from llm_validation.campaign.measure import optimizer_step_cost

    return optimizer_step_cost(name, mode=mode, model=MODEL, batch_size=a.batch_size,
                               steps=a.steps, warmup=a.warmup, device=a.device,
                               threads=a.threads, options=OPTIONS.get(name),
                               build=BUILD.get(name), autocast=a.autocast)  # fmt: skip


def _run(name: str, mode: str, a) -> dict:
    cmd = [sys.executable, __file__, "--worker", name, "--mode", mode, "--threads", str(a.threads),
           "--steps", str(a.steps), "--warmup", str(a.warmup), "--batch-size", str(a.batch_size),
           "--device", a.device, "--autocast", a.autocast]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {name}/{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _hardware(a) -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(
                (ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu
            )
    except OSError:
        pass
    hw = {"cpu": cpu, "cores": os.cpu_count(), "threads": a.threads, "device": a.device,
          "platform": platform.platform(), "python": platform.python_version()}  # fmt: skip
    import torch

    hw["torch"] = torch.__version__
    if a.device.startswith("cuda"):
        hw["gpu"] = torch.cuda.get_device_name()
    return hw


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--reps", type=positive_int, default=3, help="interleaved repetitions (default 3)"
    )
    p.add_argument("--steps", type=positive_int, default=5, help="timed steps per run (default 5)")
    p.add_argument("--warmup", type=positive_int, default=2, help="untimed steps first (default 2)")
    p.add_argument(
        "--batch-size", type=positive_int, default=16, help="sequences per step (default 16)"
    )
    p.add_argument("--threads", type=positive_int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    p.add_argument(
        "--autocast",
        choices=("none", "bf16"),
        default="none",
        help="run the forward passes under bf16 autocast (GPU runs; default none)",
    )
    p.add_argument("--only", nargs="+", choices=OPTIMIZERS, help="a subset (AdamW is always run)")
    p.add_argument("--out", type=Path, help="also write the results as JSON here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--mode", default="time", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(_worker(a.worker, a.mode, a)))
        return 0
    for name in ("reps", "steps", "batch_size", "threads"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if a.out is not None:
        from sims.runtime.io import ensure_writable

        try:
            ensure_writable(a.out, kind="file", arg="--out")
        except ValueError as exc:
            p.exit(2, f"error: {exc}\n")
    names = list(OPTIMIZERS) if not a.only else ["adamw", *[n for n in a.only if n != "adamw"]]
    load_before = os.getloadavg()
    from llm_validation.campaign.measure import optimizer_cost_table

    rows = optimizer_cost_table(names, lambda n, mode: _run(n, mode, a), reps=a.reps)
    print(
        f"{'optimizer':>10} {'s/step':>8} {'time x':>7} {'peak MB':>8} {'mem x':>6} {'RSS+ MB':>8}"
    )
    for row in rows:
        print(f"{row['optimizer']:>10} {row['median_s_per_step']:8.4f} {row['time_ratio']:7.2f} "
              f"{row['peak_bytes'] / 2**20:8.1f} {row['memory_ratio']:6.2f} "
              f"{row['peak_rss_above_baseline'] / 2**20:8.1f}")  # fmt: skip
    result = {"bench": "sam_family_cost", "model": MODEL, "batch_size": a.batch_size,
              "autocast": a.autocast,
              "steps": a.steps, "warmup": a.warmup, "reps": a.reps, "hardware": _hardware(a),
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "rows": rows,
              "param_bytes": rows[0]["param_bytes"]}  # fmt: skip
    print(f"hardware: {json.dumps(result['hardware'])}")
    print(f"loadavg before {load_before}, after {result['loadavg_after']}")
    if a.out is not None:
        from sims.runtime.io import provenance, write_json

        write_json(a.out, result, meta=provenance(result | {"rows": None}))
    fsam = next((r for r in rows if r["optimizer"] == "fsam"), None)
    if fsam is not None:
        t, m = fsam["time_ratio"], fsam["memory_ratio"]
        print(f"FSAM/AdamW time_ratio={t:.2f} memory_ratio={m:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
