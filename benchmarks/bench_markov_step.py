"""Benchmark: training-step time of the seed-004 models at batch 3000 (Table 2).

* minimal model (App. B/C.1, w = 6, L = 26, d = 50, 3 heads): target <= 0.3 s/step on 2 cores;
* full one-block decoder (Table 3, L = 32): reported on CPU, and on a GPU with ``--device cuda``
  together with the estimated paper-scale Figure 2-3 run time (4 models x 2000 steps).

Usage: ``python benchmarks/bench_markov_step.py --model minimal|full [--device cuda]
[--steps 5] [--threads 2]``; prints JSON with the load average.
"""

from __future__ import annotations

import json
import os
import time

import torch
import torch.nn.functional as F

from sims.markov.models import FullConfig, MinimalConfig, build_model, param_groups
from sims.runtime.cli import ArgumentParser, positive_int


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("minimal", "full"), default="minimal")
    p.add_argument("--device", default="cpu")
    p.add_argument("--steps", type=positive_int, default=5)
    p.add_argument("--batch-size", type=positive_int, default=3000)
    p.add_argument("--threads", type=positive_int, default=2)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = MinimalConfig() if a.model == "minimal" else FullConfig()
    model = build_model(cfg).to(a.device)
    if a.model == "minimal":
        with torch.no_grad():
            model.V.normal_(0, 0.1)  # V = 0 at init gives A no gradient; time the general case
    opt = torch.optim.AdamW(param_groups(model, 0.01), lr=3e-3)
    x = torch.randint(0, cfg.d, (a.batch_size, cfg.L), device=a.device)
    tgt = x[:, cfg.w :].reshape(-1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x).reshape(-1, cfg.d), tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    sync = torch.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    step()
    sync()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    out = {"bench": f"markov_{a.model}_step", "device": a.device, "batch": a.batch_size,
           "threads": a.threads, "s_per_step_median": med, "s_per_step_min": times[0],
           "loadavg": os.getloadavg()}  # fmt: skip
    if a.model == "minimal":
        out["target_s"] = 0.3
    else:
        out["fig2_3_paper_run_estimate_s"] = med * 2000 * 4  # c = 4, 8, 12 + unrestricted
    if a.device.startswith("cuda"):
        out["gpu"] = torch.cuda.get_device_name()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
