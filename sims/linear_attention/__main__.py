"""Command line for the linear-attention simulations.

Examples::

    python -m sims.linear_attention --optimizer gd --runs 5 --steps 3000
    python -m sims.linear_attention --optimizer sam --rho 1e-3 --out results/linear_attention/sam.nc
    python -m sims.linear_attention --optimizer gd-upsample --selection random
    python -m sims.linear_attention figure1 [--quick] [--recompute]

``main(argv)`` only parses arguments and calls the library (exit status 2 on usage errors).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

OPTIMIZERS = {"gd": "gd", "sam": "sam", "gd-upsample": "gd_upsample"}


def _train_parser() -> argparse.ArgumentParser:
    from .experiment import Figure1Config

    d = Figure1Config()
    p = argparse.ArgumentParser(
        prog="python -m sims.linear_attention",
        description="Train ATTN_S (multi-head linear attention, in-context linear regression) with "
        "GD, SAM or GD + upsampling on exact sufficient statistics (main paper Figure 1). "
        "Use the `figure1` subcommand for the three-panel figure.",
    )
    p.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="gd")
    p.add_argument("--runs", type=int, default=d.n_runs, help="independent runs (paired seeds)")
    p.add_argument("--steps", type=int, default=d.num_steps, help="full-batch steps")
    p.add_argument("--P", dest="n_examples", type=int, default=d.n_examples, help="sequences")
    p.add_argument("--N", dest="n_context", type=int, default=d.n_context, help="context length")
    p.add_argument("--d", type=int, default=d.d, help="input dimension")
    p.add_argument("--heads", type=int, default=d.n_heads, help="number of heads H")
    p.add_argument("--rank", type=int, default=d.rank, help="key/query rank")
    p.add_argument("--lr", type=float, default=d.learning_rate, help="learning rate")
    p.add_argument("--init", type=float, default=d.init_scale, help="init scale (anchor --init)")
    p.add_argument("--rho", type=float, default=d.rho, help="SAM radius")
    p.add_argument("--scale", choices=["anchor", "paper"], default=d.scale)
    p.add_argument("--covariance", choices=["linear", "white", "geometric"], default=d.covariance)
    p.add_argument("--data", choices=["wishart", "tokens"], default=d.data_method)
    p.add_argument("--anchor-preprocessing", action="store_true")
    p.add_argument("--proxy-steps", type=int, default=None)
    p.add_argument("--checkpoints", type=int, default=d.n_checkpoints)
    p.add_argument("--factor", type=int, default=d.upsample_factor, help="extra copies")
    p.add_argument("--features", choices=["trajectory", "last", "relative"], default="trajectory")
    p.add_argument("--selection", choices=["hard", "random", "easy"], default="hard")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", type=Path, default=None, help="save the xarray result (netCDF)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p


def _figure_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sims.linear_attention figure1",
        description="Compute (if needed) and render the Figure 1 analog.",
    )
    from figures import DEFAULT_OUT, DEFAULT_RESULTS

    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--recompute", action="store_true")
    return p


def main(argv=None) -> int:
    """Parse ``argv`` and run; returns the exit status (2 on usage errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    if argv and argv[0] == "figure1":
        args = _figure_parser().parse_args(argv[1:])
        from figures.fig01_linear_attention import make

        for path in make(args.out, results_dir=args.results, quick=args.quick,
                         recompute=args.recompute):  # fmt: skip
            print(path)
        return 0
    parser = _train_parser()
    args = parser.parse_args(argv)
    from .experiment import Figure1Config, run_figure1, summarize

    try:
        cfg = Figure1Config(
            d=args.d, n_context=args.n_context, n_heads=args.heads, rank=args.rank,
            n_examples=args.n_examples, num_steps=args.steps, n_runs=args.runs,
            learning_rate=args.lr, init_scale=args.init, rho=args.rho, scale=args.scale,
            covariance=args.covariance, data_method=args.data,
            anchor_preprocessing=args.anchor_preprocessing, proxy_steps=args.proxy_steps,
            n_checkpoints=args.checkpoints, upsample_factor=args.factor,
            cluster_features=args.features, selection=args.selection, seed=args.seed,
            methods=(OPTIMIZERS[args.optimizer],),
        )  # fmt: skip
    except (ValueError, TypeError) as err:
        parser.print_usage(sys.stderr)
        print(f"error: {err}", file=sys.stderr)
        return 2
    ds = run_figure1(cfg, progress=not args.no_progress)
    summary = summarize(ds)
    print(json.dumps({"status": ds.attrs["status"], "timings": ds.attrs["timings"], **summary},
                     indent=1))  # fmt: skip
    if args.out is not None:
        from sims.io import provenance, write_netcdf

        meta = provenance(config=dataclasses.asdict(cfg), seed=cfg.seed, status=ds.attrs["status"])
        write_netcdf(args.out, ds, meta=meta)
        print(args.out)
    return 0 if ds.attrs["status"] == "success" else 1


if __name__ == "__main__":
    raise SystemExit(main())
