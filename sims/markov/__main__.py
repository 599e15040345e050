"""Command line for the seed-004 Markov experiments: ``python -m sims.markov {ode,train} ...``.

Examples::

    python -m sims.markov ode --T 40 --out results/markov/fig10_ode.nc
    python -m sims.markov train --model minimal --scale cpu --m 1.7 --out results/markov/m17.nc
    python -m sims.markov train --model full --scale paper --device cuda --out r.nc

Usage errors (unknown options, invalid values) exit with status 2 and a message naming the
argument.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``ode`` and ``train``)."""
    p = argparse.ArgumentParser(prog="python -m sims.markov", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("ode", help="integrate the tensor gradient flow (Fig. 10, App. C.6)")
    o.add_argument("--T", type=int, default=40)
    o.add_argument("--H", type=int, default=3)
    o.add_argument("--h", type=int, default=3)
    o.add_argument("--m", type=float, default=1.7)
    o.add_argument("--b0", type=float, default=1.0)
    o.add_argument("--init-std", type=float, default=1e-6)
    o.add_argument("--t-max", type=float, default=1e4)
    o.add_argument("--seed", type=int, default=0)
    o.add_argument("--out", type=Path, default=None, help="NetCDF result path")

    t = sub.add_parser("train", help="train a minimal/full model on the Markov task")
    t.add_argument("--model", choices=("minimal", "full"), default="minimal")
    t.add_argument("--scale", choices=("quick", "cpu", "paper"), default="cpu")
    t.add_argument("--m", type=float, default=1.7, help="hierarchy ratio (Table 1)")
    t.add_argument("--u", type=float, default=1.0, help="minimal-model init scale U[-u, u]")
    t.add_argument("--reversed", action="store_true", help="App. C.4 reversed importance")
    t.add_argument("--context", type=int, default=None, help="banded context length c")
    t.add_argument("--steps", type=int)
    t.add_argument("--batch-size", type=int)
    t.add_argument("--lr", type=float)
    t.add_argument("--n-train", type=int)
    t.add_argument("--online", action="store_true")
    t.add_argument("--optimizer", choices=("adamw", "sgd", "sam"))
    t.add_argument("--sam-rho", type=float)
    t.add_argument("--scheduler", type=str, help="'plateau' or 'none'")
    t.add_argument("--weight-decay", type=float)
    t.add_argument("--seed", type=int, default=0, help="model/batch seed")
    t.add_argument("--threads", type=int)
    t.add_argument("--device", default="cpu")
    t.add_argument("--out", type=Path, default=None, help="NetCDF result path")
    t.add_argument("--checkpoint", type=Path, default=None)
    t.add_argument("--no-progress", action="store_true")
    return p


def _ode(a) -> int:
    from sims.markov.tensor_dynamics import FlowConfig, count_stages, solve_flow, stage_times

    cfg = FlowConfig(T=a.T, H=a.H, h=a.h, m=a.m, b0=a.b0, init_std=a.init_std, t_max=a.t_max,
                     seed=a.seed)  # fmt: skip
    res = solve_flow(cfg)
    st = stage_times(res.ds)
    print(f"success={res.success} nfev={res.nfev} seconds={res.seconds:.3f}")
    print(f"stage times: {np.round(st, 2).tolist()}  stages: {count_stages(st)}  "
          f"final loss: {float(res.ds.loss[-1]):.3g}")  # fmt: skip
    if a.out is not None:
        from sims.io import provenance, write_netcdf

        write_netcdf(a.out, res.ds, meta=provenance(dataclasses.asdict(cfg), seed=a.seed))
        print(a.out)
    return 0


def _train(a) -> int:
    from sims.markov.chain import ChainConfig
    from sims.markov.experiments import full_exp, minimal_exp
    from sims.markov.train import detect_stages, train

    over = {k: v for k, v in dict(steps=a.steps, batch_size=a.batch_size, lr=a.lr,
                                  n_train=a.n_train, optimizer=a.optimizer, sam_rho=a.sam_rho,
                                  scheduler=a.scheduler, weight_decay=a.weight_decay,
                                  threads=a.threads).items() if v is not None}  # fmt: skip
    if a.online:
        over["online"] = True
    over["seed"] = a.seed
    from sims.markov.experiments import _sizes

    d, T = _sizes(a.scale)
    chain = ChainConfig.reversed_order(m=a.m, d=d, T=T) if a.reversed else None
    if a.model == "minimal":
        exp = minimal_exp(a.scale, m=a.m, init_scale=a.u, chain=chain, **over)
        if a.context is not None:
            exp = exp.replace(model=dataclasses.replace(exp.model, context=a.context))
    else:
        if chain is None and a.m != 1.7:
            chain = ChainConfig.hierarchical(w=12, m=a.m, d=d, T=T)
        exp = full_exp(a.scale, context=a.context, chain=chain, **over)
    res = train(exp, checkpoint=a.checkpoint, progress=not a.no_progress, device=a.device)
    rep = detect_stages(res.ds)
    print(f"status={res.status} seconds={res.seconds:.1f} s/step={res.step_seconds:.4f}")
    print(f"final excess loss {float(res.ds.excess_loss[-1]):.4f}; KL_i "
          f"{np.round(res.ds.kl_restricted[-1].values, 4).tolist()}")  # fmt: skip
    print(f"pattern times {rep.group_times.tolist()} stages {rep.n_stages} order_ok "
          f"{rep.order_ok} heads_on_first {rep.heads_on_first} final "
          f"{rep.final_assignment.tolist()}")  # fmt: skip
    if a.out is not None:
        from sims.io import provenance, write_netcdf

        write_netcdf(
            a.out,
            res.ds,
            meta=provenance(exp.to_dict(), seed=exp.seed, status=res.status, device=str(a.device)),
        )
        print(a.out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on usage errors)."""
    parser = build_parser()
    a = parser.parse_args(argv)  # exits 2 on argparse errors
    try:
        return _ode(a) if a.cmd == "ode" else _train(a)
    except (ValueError, TypeError) as e:
        print(f"{parser.prog} {a.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
