"""Command line for the seed-004 Markov experiments: ``python -m sims.markov {ode,train} ...``.

``ode`` needs only the core install; ``train`` needs the ``torch`` extra
(``pip install torch==2.13.0 && pip install -e ".[torch]"``).

Examples::

    python -m sims.markov ode --T 40 --out results/markov/fig10_ode.nc
    python -m sims.markov train --model minimal --scale cpu --m 1.7 --out results/markov/m17.nc
    python -m sims.markov train --model full --scale paper --device cuda --out r.nc

Usage errors (unknown options, invalid values, an output path that cannot be written, a device
this torch cannot use) exit with status 2 and one line naming the argument, before any work.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = ["main", "build_parser"]

PROG = "python -m sims.markov"
TORCH_EXTRA = 'the `torch` extra (pip install torch==2.13.0 && pip install -e ".[torch]")'


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Show ``(default: x)`` once, and not for flags whose default is "unset" (None/False)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``ode`` and ``train``)."""
    fmt = _Defaults
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Seed-004 Markov experiments. `ode` needs only the core install; `train` "
        f"needs {TORCH_EXTRA}.",
    )
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{ode,train}")
    o = sub.add_parser("ode", formatter_class=fmt,
                       help="integrate the tensor gradient flow (Fig. 10, App. C.6; core install)",
                       description="Integrate the reduced tensor gradient flow of Proposition 1 "
                       "from the App. C.6 init (V = 0, s = 1/T + noise) and print the stage "
                       "times.")  # fmt: skip
    o.add_argument("--T", type=int, default=40, help="sequence length (positions of s_k)")
    o.add_argument("--H", type=int, default=3, help="number of attention heads")
    o.add_argument("--h", type=int, default=3, help="number of true features / groups")
    o.add_argument("--m", type=float, default=1.7, help="hierarchy ratio: m_a = m^(h-a) b0")
    o.add_argument("--b0", type=float, default=1.0, help="base scale b0 of the features")
    o.add_argument("--init-std", type=float, default=1e-6,
                   help="std of the perturbation of s_k(0) (the paper's 'covariance 1e-6' is "
                   "std 1e-3)")  # fmt: skip
    o.add_argument("--t-max", type=float, default=1e4, help="integration horizon")
    o.add_argument("--seed", type=int, default=0, help="seed of the perturbation")
    o.add_argument("--out", type=Path, default=None, help="NetCDF result path (none: not saved)")

    t = sub.add_parser("train", formatter_class=fmt,
                       help=f"train a minimal/full model on the Markov task (needs {TORCH_EXTRA})",
                       description="Train the minimal or full transformer on the order-w Markov "
                       f"chain and report stage times. Needs {TORCH_EXTRA}.")  # fmt: skip
    t.add_argument("--model", choices=("minimal", "full"), default="minimal",
                   help="minimal attention model (App. B) or the full one-block decoder")
    t.add_argument("--scale", choices=("quick", "cpu", "paper"), default=None,
                   help="preset of sims.markov.experiments (default: $MARKOV_SCALE, else cpu)")
    t.add_argument("--m", type=float, default=1.7, help="hierarchy ratio (Table 1)")
    t.add_argument("--u", type=float, default=1.0, help="minimal-model init scale U[-u, u]")
    t.add_argument("--reversed", action="store_true", help="App. C.4 reversed importance")
    t.add_argument("--context", type=int, default=None,
                   help="banded context length c (restricted-context model); default: full")
    t.add_argument("--steps", type=int, help="optimisation steps (default: the scale's)")
    t.add_argument("--batch-size", type=int, help="sequences per step (default: the scale's)")
    t.add_argument("--lr", type=float, help="learning rate (default: the scale's)")
    t.add_argument("--n-train", type=int, help="training sequences (default: the scale's)")
    t.add_argument("--online", action="store_true", help="fresh sequences every step (C.3)")
    t.add_argument("--optimizer", choices=("adamw", "sgd", "sam"),
                   help="optimizer (default: adamw)")
    t.add_argument("--sam-rho", type=float, help="SAM radius (with --optimizer sam)")
    t.add_argument("--scheduler", choices=("plateau", "plateau_step", "none"),
                   help="ReduceLROnPlateau per evaluation on the held-out loss ('plateau'), per "
                   "step on the training loss ('plateau_step', collapses the rate), or none "
                   "(default: the scale's)")  # fmt: skip
    t.add_argument("--min-lr", type=float, help="floor of the scheduled learning rate")
    t.add_argument("--weight-decay", type=float, help="AdamW weight decay (Table 2: 0.01)")
    t.add_argument("--seed", type=int, default=0, help="model/batch seed")
    t.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    t.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1, ...")
    t.add_argument("--out", type=Path, default=None, help="NetCDF result path (none: not saved)")
    t.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint file: resumed from if it exists, written during the run")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _ode(a) -> int:
    from sims.markov.tensor_dynamics import FlowConfig, count_stages, solve_flow, stage_times

    cfg = FlowConfig(T=a.T, H=a.H, h=a.h, m=a.m, b0=a.b0, init_std=a.init_std, t_max=a.t_max,
                     seed=a.seed)  # fmt: skip
    if a.out is not None:
        from sims.io import ensure_writable

        ensure_writable(a.out, kind="file", arg="--out")
    res = solve_flow(cfg)
    st = stage_times(res.ds)
    n = count_stages(st)
    print(f"status={res.status} ({res.message}) nfev={res.nfev} seconds={res.seconds:.3f}")
    print(f"stage times: {np.round(st, 2).tolist()}  {n} stage{'s' if n != 1 else ''}  "
          f"final loss: {float(res.ds.loss[-1]):.3g}")  # fmt: skip
    if a.out is not None:
        from sims.io import provenance, write_netcdf

        write_netcdf(a.out, res.ds, meta=provenance(dataclasses.asdict(cfg), seed=a.seed))
        print(a.out)
    return 0


def _train(a) -> int:
    from sims.extras import exit_on_missing_extra
    from sims.markov.experiments import _sizes, full_exp, minimal_exp, scale_from_env

    scale = a.scale or scale_from_env(False)  # ValueError (exit 2) for a bad $MARKOV_SCALE
    with exit_on_missing_extra(f"{PROG} train"):
        from sims.markov.chain import ChainConfig
        from sims.markov.train import check_device, detect_stages, stage_band, train

    over = {k: v for k, v in dict(steps=a.steps, batch_size=a.batch_size, lr=a.lr,
                                  n_train=a.n_train, optimizer=a.optimizer, sam_rho=a.sam_rho,
                                  scheduler=a.scheduler, weight_decay=a.weight_decay,
                                  min_lr=a.min_lr, threads=a.threads).items()
            if v is not None}  # fmt: skip
    if a.online:
        over["online"] = True
    over["seed"] = a.seed
    d, T = _sizes(scale)
    chain = ChainConfig.reversed_order(m=a.m, d=d, T=T) if a.reversed else None
    if a.model == "minimal":
        exp = minimal_exp(scale, m=a.m, init_scale=a.u, chain=chain, **over)
        if a.context is not None:
            exp = exp.replace(model=dataclasses.replace(exp.model, context=a.context))
    else:
        if chain is None and a.m != 1.7:
            chain = ChainConfig.hierarchical(w=12, m=a.m, d=d, T=T)
        exp = full_exp(scale, context=a.context, chain=chain, **over)
    device = check_device(a.device)
    if a.out is not None:
        from sims.io import ensure_writable

        ensure_writable(a.out, kind="file", arg="--out")
    if a.checkpoint is not None:
        from sims.io import ensure_writable

        ensure_writable(a.checkpoint, kind="file", arg="--checkpoint")
    res = train(exp, checkpoint=a.checkpoint, progress=not a.no_progress, device=device)
    ds = res.ds
    print(f"status={res.status} ({res.message}) seconds={res.seconds:.1f} "
          f"s/step={res.step_seconds:.4f} final lr={float(ds.lr[-1]):.3g}")  # fmt: skip
    if ds.attrs.get("lr_warning"):
        print(f"warning: {ds.attrs['lr_warning']}")
    print(f"final excess loss {float(ds.excess_loss[-1]):.4f}; KL to f_A*1:i "
          f"{np.round(ds.kl_restricted[-1].values, 4).tolist()}")  # fmt: skip
    if "kl_best" in ds:
        print(f"KL to the best I(1..i) predictors {np.round(ds.kl_best[-1].values, 4).tolist()}"
              f"; floors of KL to f_A*1:i {np.round(ds.kl_floor.values, 3).tolist()}")  # fmt: skip
    rep = detect_stages(ds)
    band = stage_band(ds)
    n = rep.n_stages
    print(f"pattern times {rep.group_times.tolist()}; {n} stage{'s' if n != 1 else ''} "
          f"(band over thresholds/merge ratios: {band.attrs['min']}-{band.attrs['max']}); "
          f"order ok {rep.order_ok}; heads on group 1 {rep.heads_on_first}; "
          f"final head->group {(rep.final_assignment + 1).tolist()}")  # fmt: skip
    if a.out is not None:
        from sims.io import provenance, write_netcdf

        write_netcdf(
            a.out,
            ds,
            meta=provenance(exp.to_dict(), seed=exp.seed, status=res.status, device=str(device)),
        )
        print(a.out)
    return 0 if res.status == "success" else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on usage errors, 1 if training diverged)."""
    parser = build_parser()
    a = parser.parse_args(argv)  # exits 2 on argparse errors
    try:
        return _ode(a) if a.cmd == "ode" else _train(a)
    except (ValueError, TypeError) as e:
        print(f"{PROG} {a.cmd}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
