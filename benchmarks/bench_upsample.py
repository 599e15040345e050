"""Speed of ``python -m llm_validation upsample`` as a user runs it (issue 41).

Target: on 2 CPU cores, with a small from-scratch proxy (``--proxy scratch``: Llama 64 wide x
2 blocks, vocabulary 512), 20,000 examples with 5 recorded checkpoints in <= 10 minutes.

Writes a generated MathInstruct-like file (``python -m llm_validation corpus``), runs the command
in a child process exactly as typed on the command line, and prints its wall time, its CPU
seconds (user + system of the child; on a machine shared with other work the wall time grows,
the CPU seconds do not), the load average, and the selection check's numbers from
``upsample.json``. Then prints the documented GPU estimate for 260,000 MathInstruct-sized
examples with a 135M proxy (:func:`llm_validation.experiments.upsample.estimate_seconds` at the
assumed rate; nothing is timed on a GPU here).

    python benchmarks/bench_upsample.py                      # 20,000 examples, into a temp folder
    python benchmarks/bench_upsample.py --n 2000 --out /tmp/up
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's packages
from sims.runtime.cli import ArgumentParser, positive_int  # noqa: E402 - this checkout's

REPO = Path(__file__).resolve().parent.parent


def gpu_estimate(n_examples: int = 260_000, tokens: float = 300.0, n_params: float = 134.5e6,
                 checkpoints: int = 5, epoch_fraction: float = 1 / 3) -> float:  # fmt: skip
    """Seconds for ``n_examples`` of ``tokens`` tokens with an ``n_params`` proxy on a GPU.

    MathInstruct's examples average a few hundred tokens with SmolLM2's tokenizer (300 is the
    assumption here, not a measurement); the rate is the assumed
    :data:`~llm_validation.experiments.upsample.ASSUMED_GPU_FLOPS`.
    """
    from llm_validation.experiments.upsample import ASSUMED_GPU_FLOPS, estimate_seconds

    return estimate_seconds(n_params=n_params, forward_tokens=n_examples * tokens * checkpoints,
                            train_tokens=n_examples * tokens * epoch_fraction,
                            flops_per_second=ASSUMED_GPU_FLOPS)  # fmt: skip


def main(argv=None) -> int:
    """Run the benchmark; print the numbers."""
    p = ArgumentParser(prog="bench_upsample", description=__doc__.splitlines()[0])
    p.add_argument("--n", type=positive_int, default=20_000, help="training examples")
    p.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    args = p.parse_args(argv)
    work = Path(args.out or tempfile.mkdtemp(prefix="bench_upsample."))
    env = {**os.environ, "PYTHONPATH": str(REPO), "MPLBACKEND": "Agg"}
    corpus = work / "corpus"
    if not (corpus / "MathInstruct.json").exists():
        subprocess.run([sys.executable, "-m", "llm_validation", "corpus", "--out", str(corpus),
                        "--n-train", str(args.n), "--n-test", "10"], check=True,
                       env=env)  # fmt: skip
    cmd = [sys.executable, "-m", "llm_validation", "upsample", "--data",
           str(corpus / "MathInstruct.json"), "--proxy", "scratch", "--out", str(work / "run"),
           "--checkpoints", "5"]  # fmt: skip
    print("$ " + " ".join(cmd[1:]), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    s = json.loads((work / "run" / "upsample.json").read_text())
    c = s["check"] or {}
    print(f"{args.n:,} examples, 5 checkpoints, scratch proxy: wall {wall:.0f} s, CPU {cpu:.0f} s "
          f"(target: <= 600 s on 2 cores), load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")  # fmt: skip
    print(f"selected {s['n_selected']:,} of {s['n_examples']:,}; mixture {s['mixture_rows']:,} "
          f"rows; steps {s['steps']}; recordings before the median half-drop "
          f"{s['recordings_before_median']}")  # fmt: skip
    if c:
        print(f"selection check: AUC {c['auc']:.3f}, median learning time selected "
              f"{c['median_time_selected']} vs rest {c['median_time_rest']}, Spearman share vs "
              f"time {c['spearman_share_vs_time']}")  # fmt: skip
    g = gpu_estimate()
    print(f"GPU estimate (assumed rate, not measured): 260,000 examples x 300 tokens, 135M proxy, "
          f"5 checkpoints: {g / 60:.0f} min")  # fmt: skip
    print(f"outputs in {work / 'run'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
