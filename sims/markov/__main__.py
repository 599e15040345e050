"""Command line for the seed-004 Markov experiments: ``python -m sims.markov {ode,train} ...``.

``ode`` needs only the core install; ``train`` needs the ``torch`` extra
(``pip install torch==2.13.0 && pip install -e ".[torch]"``).

Examples::

    python -m sims.markov ode --T 40 --out results/markov/fig10_ode.nc
    python -m sims.markov train --model minimal --scale cpu --m 1.7 --out results/markov/m17.nc
    python -m sims.markov train --model full --scale paper --device cuda --out r.nc

Usage errors (unknown options, invalid values, an output path that cannot be written, a device
this torch cannot use, a run that does not fit in memory, a corrupt checkpoint) exit with status 2
and one line naming the argument, before any work or write; Ctrl-C exits with status 130 and one
line saying what was saved (a ``--checkpoint`` resumes the run).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from sims.runtime.cli import ArgumentParser, Estimate, UsageError, check_resources, run_cli, seed

__all__ = ["main", "build_parser"]

PROG = "python -m sims.markov"
OUT_HELP = (
    "NetCDF result file (.nc; an existing file there must be an earlier result, which is "
    "replaced; default: not saved)"
)
TORCH_EXTRA = 'the `torch` extra (pip install torch==2.13.0 && pip install -e ".[torch]")'


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Show ``(default: x)`` once, and not for flags whose default is "unset" (None/False)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1; got {value}")
    return value


def build_parser() -> ArgumentParser:
    """The argument parser (subcommands ``ode`` and ``train``)."""
    fmt = _Defaults
    p = ArgumentParser(
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
    o.add_argument("--heads", dest="H", type=int, default=3,
                   help="number of attention heads (H in the paper)")
    o.add_argument("--features", dest="h", type=int, default=3,
                   help="number of true features / groups (h in the paper)")
    o.add_argument("--m", type=float, default=1.7, help="hierarchy ratio: m_a = m^(h-a) b0")
    o.add_argument("--b0", type=float, default=1.0, help="base scale b0 of the features")
    o.add_argument("--init-std", type=float, default=1e-6,
                   help="std of the perturbation of s_k(0) (the paper's 'covariance 1e-6' is "
                   "std 1e-3)")  # fmt: skip
    o.add_argument("--t-max", type=float, default=1e4, help="integration horizon")
    o.add_argument("--seed", type=seed, default=0, help="seed of the perturbation")
    o.add_argument("--out", type=Path, default=None, help=OUT_HELP)

    t = sub.add_parser("train", formatter_class=fmt,
                       help=f"train a minimal/full model on the Markov task (needs {TORCH_EXTRA})",
                       description="Train the minimal or full transformer on the order-w Markov "
                       f"chain and report stage times. Needs {TORCH_EXTRA}.")  # fmt: skip
    t.add_argument(
        "--model",
        choices=("minimal", "full"),
        default="minimal",
        help="minimal attention model (App. B) or the full one-block decoder",
    )
    t.add_argument(
        "--scale",
        choices=("quick", "cpu", "paper"),
        default=None,
        help="preset of sims.markov.experiments (default: $MARKOV_SCALE, else cpu)",
    )
    t.add_argument("--m", type=float, default=1.7, help="hierarchy ratio (Table 1)")
    t.add_argument("--u", type=float, default=1.0, help="minimal-model init scale U[-u, u]")
    t.add_argument("--reversed", action="store_true", help="App. C.4 reversed importance")
    t.add_argument(
        "--context",
        type=int,
        default=None,
        help="banded context length c (restricted-context model); default: full",
    )
    t.add_argument("--steps", type=int, help="optimisation steps (default: the scale's)")
    t.add_argument("--batch-size", type=int, help="sequences per step (default: the scale's)")
    t.add_argument("--lr", type=float, help="learning rate (default: the scale's)")
    t.add_argument("--n-train", type=int, help="training sequences (default: the scale's)")
    t.add_argument("--online", action="store_true", help="fresh sequences every step (C.3)")
    t.add_argument(
        "--optimizer", choices=("adamw", "sgd", "sam"), help="optimizer (default: adamw)"
    )
    t.add_argument("--sam-rho", type=float,
                   help="SAM radius (only with --optimizer sam; default 0.05)")  # fmt: skip
    t.add_argument("--scheduler", choices=("plateau", "plateau_step", "none"),
                   help="ReduceLROnPlateau per evaluation on the held-out loss ('plateau'), per "
                   "step on the training loss ('plateau_step', collapses the rate), or none "
                   "(default: the scale's)")  # fmt: skip
    t.add_argument("--min-lr", type=float, help="floor of the scheduled learning rate")
    t.add_argument("--weight-decay", type=float, help="AdamW weight decay (Table 2: 0.01)")
    t.add_argument("--seed", type=seed, default=0, help="model/batch seed")
    t.add_argument(
        "--threads",
        type=_positive_int,
        help="torch threads, >= 1 (default: the scale's: 1 at cpu, else torch's)",
    )
    t.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1, ...")
    t.add_argument("--out", type=Path, default=None, help=OUT_HELP)
    t.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="checkpoint file: resumed from if it exists (it must be a checkpoint of "
        "this config), written every checkpoint_every steps; Ctrl-C keeps it",
    )
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


#: Costs behind :func:`ode_estimate` (measured, T = 40 to 800 on one core: 9 to 245 s, under
#: 400 MB): seconds per state variable, and the dense Jacobian of the stiff solver (LSODA).
_ODE_SECONDS_PER_VARIABLE, _ODE_BASE_BYTES = 0.12, 300e6


def ode_estimate(cfg) -> Estimate:
    """Memory and time of :func:`~sims.markov.tensor_dynamics.solve_flow` for ``cfg``.

    The state has ``n = H (h + T)`` variables; the stiff solver keeps a dense ``n × n``
    Jacobian and its LU factors, and the result stores ``n_eval`` states and the ``h × T``
    loss split at each. The time grows with ``n`` and the decades of the horizon (measured at
    ``t_max = 1e4``, ``t_min = 1e-2``: six decades).
    """
    n = cfg.H * (cfg.h + cfg.T)
    floats = 3.0 * n * n + 20.0 * n + (cfg.n_eval + 1) * (4.0 * n + cfg.h * cfg.T)
    return Estimate(
        memory=_ODE_BASE_BYTES + 8.0 * floats,
        seconds=_ODE_SECONDS_PER_VARIABLE * n * max(0.1, math.log10(cfg.t_max / cfg.t_min) / 6),
        what=f"--T {cfg.T} --heads {cfg.H} --features {cfg.h} ({n} ODE variables)",
        fix="lower --T",
    )


#: Costs behind :func:`train_estimate` (measured on one core: minimal model 0.05 s and small
#: full model 0.28 s per step of 250 sequences): seconds per unit of
#: ``batch L (H L w + w (4 w + 2 d_ff) + w d)``, bytes per activation float kept for the backward
#: pass, and torch's own memory.
_TRAIN_SECONDS_PER_UNIT, _TRAIN_BASE_BYTES = 3e-9, 400e6


def train_estimate(exp) -> Estimate:
    """Memory and time of :func:`~sims.markov.train.train` for ``exp``, from its sizes."""
    m, t = exp.model, exp.train
    L, d, H = m.L, m.d, m.n_head
    w, d_ff = getattr(m, "n_embd", d), getattr(m, "d_ff", 0)
    per_token = H * L + 6 * w + 2 * d_ff + 2 * d  # activations kept per token (forward)
    n_eval = t.steps // t.eval_every + 2
    n_data = 0 if t.online else t.n_train
    floats = (
        3 * max(t.batch_size, t.eval_batch) * L * per_token * (2 if t.optimizer == "sam" else 1)
        + (n_data + t.n_test) * L
        + n_eval * H * L * L
        + (n_eval * n_data if t.record_example_losses else 0)
        + t.best_contexts * t.best_particles * d
    )
    unit = t.batch_size * L * (H * L * w + w * (4 * w + 2 * d_ff) + w * d)
    per_step = _TRAIN_SECONDS_PER_UNIT * unit * (2 if t.optimizer == "sam" else 1)
    eval_share = 1 + t.n_test / (3 * t.batch_size * t.eval_every)
    return Estimate(
        memory=_TRAIN_BASE_BYTES + 8.0 * floats,
        seconds=5.0 + t.steps * per_step * eval_share,
        what=(
            f"--steps {t.steps} --batch-size {t.batch_size} --n-train {t.n_train} "
            f"({type(m).__name__[:-6].lower()} model, L={L}, d={d})"
        ),  # fmt: skip
        fix="lower --batch-size, --n-train or --steps, or use a smaller --scale",
    )


def _ode(a) -> int:
    from sims.markov.tensor_dynamics import FlowConfig, count_stages, solve_flow, stage_times
    from sims.runtime.io import ensure_writable, provenance, write_netcdf

    try:
        cfg = FlowConfig(T=a.T, H=a.H, h=a.h, m=a.m, b0=a.b0, init_std=a.init_std,
                         t_max=a.t_max, seed=a.seed)  # fmt: skip
        if a.out is not None:
            ensure_writable(a.out, kind="file", arg="--out", suffix=".nc")
    except UsageError:
        raise
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    check_resources(ode_estimate(cfg), prog=PROG, progress=False)
    try:
        res = solve_flow(cfg)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted before any result was written") from None
    st = stage_times(res.ds)
    n = count_stages(st)
    if res.success:
        print(f"integrated to t = {cfg.t_max:g} ({res.nfev} evaluations, {res.seconds:.1f} s)")
    else:
        print(f"the integration stopped before t = {cfg.t_max:g}: {res.message}")
    print(f"stage times: {np.round(st, 2).tolist()}  {n} stage{'s' if n != 1 else ''}  "
          f"final loss: {float(res.ds.loss[-1]):.3g}")  # fmt: skip
    if a.out is not None:
        write_netcdf(a.out, res.ds, meta=provenance(dataclasses.asdict(cfg), seed=a.seed))
        print(f"wrote {a.out}")
    else:
        print("nothing saved (give --out FILE.nc to keep the trajectory)")
    return 0 if res.success else 1


def _train_config(a):
    """The experiment ``a`` asks for, validated (``ValueError`` naming the flag otherwise)."""
    from sims.markov.experiments import _sizes, full_exp, minimal_exp, scale_from_env

    scale = a.scale or scale_from_env(False)  # ValueError for a bad $MARKOV_SCALE
    from sims.markov.chain import ChainConfig

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
    if a.sam_rho is not None and exp.train.optimizer != "sam":
        raise ValueError(
            f"`--sam-rho` {a.sam_rho:g} is the SAM radius but the optimizer is "
            f"{exp.train.optimizer!r}; add `--optimizer sam` or drop `--sam-rho`."
        )
    return exp


def _train(a) -> int:
    from sims.runtime.extras import exit_on_missing_extra
    from sims.runtime.io import ensure_writable, provenance, write_netcdf

    with exit_on_missing_extra(f"{PROG} train"):
        from sims.markov.train import (
            check_device,
            detect_stages,
            load_checkpoint,
            stage_band,
            train,
        )

    try:
        exp = _train_config(a)
        device = check_device(a.device)
        if a.out is not None:
            ensure_writable(a.out, kind="file", arg="--out", suffix=".nc")
        if a.checkpoint is not None:
            ensure_writable(a.checkpoint, kind="file", arg="--checkpoint")
            if a.checkpoint.exists():
                load_checkpoint(a.checkpoint, exp)  # a corrupt or foreign one: refused now
    except UsageError:
        raise
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    check_resources(train_estimate(exp), prog=PROG, progress=not a.no_progress)
    try:
        res = train(exp, checkpoint=a.checkpoint, progress=not a.no_progress,
                    device=device)  # fmt: skip
    except KeyboardInterrupt:
        if a.checkpoint is None:
            raise KeyboardInterrupt(
                "interrupted; nothing was saved (give --checkpoint FILE to make a long run "
                "resumable)"
            ) from None
        saved = "resumes from it" if a.checkpoint.exists() else "starts afresh (none was saved yet)"
        raise KeyboardInterrupt(
            f"interrupted; the checkpoint {a.checkpoint} is written every "
            f"{exp.train.checkpoint_every} steps: the same command {saved}"
        ) from None
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
        meta = provenance(exp.to_dict(), seed=exp.seed, status=res.status, device=str(device))
        write_netcdf(a.out, ds, meta=meta)
        print(a.out)
    return 0 if res.status == "success" else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (1 if training diverged).

    Usage errors raise ``SystemExit(2)`` after one line on stderr, Ctrl-C ``SystemExit(130)``
    (:func:`sims.runtime.cli.run_cli`).
    """
    return run_cli(_main, argv, prog=PROG)


def _main(argv: Sequence[str] | None) -> int:
    a = build_parser().parse_args(argv)
    return _ode(a) if a.cmd == "ode" else _train(a)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
