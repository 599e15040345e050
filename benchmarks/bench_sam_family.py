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
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's packages, also when run as a script
OPTIMIZERS = ("adamw", "sgd", "muon", "sam", "fsam", "psam", "pfsam", "lsam", "angle_sam", "asam")
MODEL = dict(vocab_size=2048, seq_len=128, n_layer=4, n_head=4, d_model=128)
OPTIONS = {"angle_sam": {"angle_weights": (0.5, 0.5)}, "asam": {"adaptive": True, "rho": 0.5}}
BUILD = {"asam": "sam"}  # bench rows that are options of a build_optimizer name


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _worker(name: str, mode: str, a) -> dict:
    import torch

    from sims.lm import GPT, GPTConfig, lm_loss
    from sims.optim import SAMFamily, build_optimizer

    torch.set_num_threads(a.threads)
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    rss0 = _rss_bytes()
    prof = None
    if mode == "memory" and not cuda:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        prof.__enter__()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(0)
    model = GPT(GPTConfig(**MODEL)).to(device)
    kw = dict(OPTIONS.get(name, {}))
    if name not in ("adamw", "sgd", "muon"):
        kw.setdefault("rho", 0.05)
    opt = build_optimizer(BUILD.get(name, name), model, lr=1e-3, weight_decay=0.1, **kw)
    bf16 = a.autocast == "bf16"

    def loss():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            return lm_loss(model, x, y)

    g = torch.Generator().manual_seed(1)
    seqs = torch.randint(0, MODEL["vocab_size"], (a.batch_size, MODEL["seq_len"] + 1), generator=g)
    x, y = seqs[:, :-1].to(device), seqs[:, 1:].to(device)

    def step():
        if isinstance(opt, SAMFamily):
            opt.step(loss)
        else:
            opt.zero_grad(set_to_none=True)
            loss()[0].backward()
            opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    out = {"optimizer": name, "mode": mode}
    if mode == "memory":
        for _ in range(3):
            step()
        sync()
        if cuda:
            out["peak_bytes"] = torch.cuda.max_memory_allocated()
        else:
            prof.__exit__(None, None, None)
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                prof.export_chrome_trace(f.name)
                events = json.load(open(f.name))["traceEvents"]
            totals = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
            out["peak_bytes"] = max(totals)
        out["param_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
        return out
    for _ in range(a.warmup):
        step()
    sync()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    out["median_s"] = statistics.median(times)
    # cross-check only: includes allocator slack and freed-but-kept pages
    out["peak_rss_above_baseline"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
    )
    out["loadavg"] = os.getloadavg()
    return out


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
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    p.add_argument("--steps", type=int, default=5, help="timed steps per run (default 5)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per step (default 16)")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
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
        from sims.io import ensure_writable

        try:
            ensure_writable(a.out, kind="file", arg="--out")
        except ValueError as exc:
            p.exit(2, f"error: {exc}\n")
    names = list(OPTIMIZERS) if not a.only else ["adamw", *[n for n in a.only if n != "adamw"]]
    load_before = os.getloadavg()
    mem = {n: _run(n, "memory", a) for n in names}
    times: dict[str, list[float]] = {n: [] for n in names}
    rss: dict[str, list[int]] = {n: [] for n in names}
    for rep in range(a.reps):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for n in order:
            res = _run(n, "time", a)
            times[n].append(res["median_s"])
            rss[n].append(res["peak_rss_above_baseline"])
    ratios = {n: statistics.median(t / b for t, b in zip(times[n], times["adamw"], strict=True))
              for n in names}  # fmt: skip
    base_mem = mem["adamw"]["peak_bytes"]
    rows = []
    print(
        f"{'optimizer':>10} {'s/step':>8} {'time x':>7} {'peak MB':>8} {'mem x':>6} {'RSS+ MB':>8}"
    )
    for n in names:
        row = {"optimizer": n, "median_s_per_step": statistics.median(times[n]),
               "time_ratio": ratios[n], "peak_bytes": mem[n]["peak_bytes"],
               "memory_ratio": mem[n]["peak_bytes"] / base_mem,
               "peak_rss_above_baseline": statistics.median(rss[n]),
               "reps_s": times[n]}  # fmt: skip
        rows.append(row)
        print(f"{n:>10} {row['median_s_per_step']:8.4f} {ratios[n]:7.2f} "
              f"{row['peak_bytes'] / 2**20:8.1f} {row['memory_ratio']:6.2f} "
              f"{row['peak_rss_above_baseline'] / 2**20:8.1f}")  # fmt: skip
    result = {"bench": "sam_family_cost", "model": MODEL, "batch_size": a.batch_size,
              "autocast": a.autocast,
              "steps": a.steps, "warmup": a.warmup, "reps": a.reps, "hardware": _hardware(a),
              "loadavg_before": load_before, "loadavg_after": os.getloadavg(), "rows": rows,
              "param_bytes": mem["adamw"]["param_bytes"]}  # fmt: skip
    print(f"hardware: {json.dumps(result['hardware'])}")
    print(f"loadavg before {load_before}, after {result['loadavg_after']}")
    if a.out is not None:
        from sims.io import provenance, write_json

        write_json(a.out, result, meta=provenance(result | {"rows": None}))
    fsam = next(r for r in rows if r["optimizer"] == "fsam") if "fsam" in names else None
    if fsam is not None:
        t, m = fsam["time_ratio"], fsam["memory_ratio"]
        print(f"FSAM/AdamW time_ratio={t:.2f} memory_ratio={m:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
