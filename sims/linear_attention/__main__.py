"""Command line for the linear-attention simulations (needs the ``jax`` extra).

Examples::

    python -m sims.linear_attention --optimizer gd --runs 5 --steps 3001 --paper-steps 1001
    python -m sims.linear_attention --optimizer sam --rho 1e-3 --out results/la/sam.nc
    python -m sims.linear_attention --optimizer gd-upsample --selection random
    python -m sims.linear_attention figure1 [--quick] [--recompute]
    python -m sims.linear_attention mechanism [--quick] [--recompute]
    python -m sims.linear_attention upsampling [--quick] [--recompute]

``main(argv)`` only parses arguments and calls the library. Bad input exits with status 2 and
one line that names the flag, before any computation; output paths are checked first.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

from sims.runtime.cli import (
    ArgumentParser,
    Estimate,
    UsageError,
    add_folder_arguments,
    check_folders,
    check_resources,
    run_cli,
    seed,
)

PROG = "python -m sims.linear_attention"
OPTIMIZERS = {
    "gd": "gd", "sam": "sam", "gd-upsample": "gd_upsample", "sam-flow": "sam_flow",
    "sam-headwise": "sam_headwise", "gd-lr-matched": "gd_lr_matched",
}  # fmt: skip
COMMANDS = ("figure1", "mechanism", "upsampling")
USAGE = (f"{PROG} [figure1 | mechanism | upsampling] [--quick] [--recompute] ...\n"
         f"       {PROG} [--optimizer NAME] [training options] [--out FILE]")  # fmt: skip
#: Figure1Config field -> command-line flag (so errors name what the user typed).
FLAGS = {
    "n_runs": "--runs", "num_steps": "--steps", "paper_steps": "--paper-steps",
    "n_examples": "--P", "n_context": "--N", "d": "--d", "n_heads": "--heads", "rank": "--rank",
    "learning_rate": "--lr", "init_scale": "--init", "rho": "--rho", "proxy_steps":
    "--proxy-steps", "n_checkpoints": "--checkpoints", "upsample_factor": "--factor",
    "cluster_features": "--features", "selection": "--selection", "log_every": "--log-every",
    "seed": "--seed", "scale": "--scale", "covariance": "--covariance",
    "data_method": "--data", "anchor_preprocessing": "--anchor-preprocessing",
}  # fmt: skip


def _flagify(message: str) -> str:
    """Replace ```field``` by the flag that sets it."""
    return re.sub(r"`(\w+)`", lambda m: f"`{FLAGS.get(m.group(1), m.group(1))}`", message)


def _optimizer(text: str) -> str:
    """``--optimizer`` value: the hyphenated names; the library's underscores are accepted."""
    return text.replace("_", "-")


def _train_parser() -> ArgumentParser:
    from .experiment import Figure1Config
    from .upsampling import FEATURES, SELECTIONS

    d = Figure1Config()
    p = ArgumentParser(
        prog=PROG, usage=USAGE,
        description="Train ATTN_S (multi-head linear attention, in-context linear regression) "
        "on exact sufficient statistics, paired over runs, and print per-horizon statistics "
        "(runs that learned 0..d features, test loss median/mean/IQR, entropy of the learning "
        "times). Subcommands: `figure1` (Figure 1 and the horizon figure), `mechanism` (why SAM "
        "is more uniform), `upsampling` (selections vs theory). Defaults: the anchor's paper "
        f"setting. Methods (--optimizer): {', '.join(OPTIMIZERS)}. Memory and time are "
        "estimated first: a run that does not fit in memory is refused.",
    )  # fmt: skip
    a = p.add_argument
    a(
        "--optimizer",
        type=_optimizer,
        choices=list(OPTIMIZERS),
        default="gd",
        help="method (GD always runs too: it is the paired reference); default gd",
    )
    a("--runs", type=int, default=d.n_runs, help=f"paired runs (default {d.n_runs})")
    a(
        "--steps",
        type=int,
        default=d.num_steps,
        help=f"full-batch steps of the long horizon (default {d.num_steps})",
    )
    a(
        "--paper-steps",
        type=int,
        default=None,
        help=f"the paper's horizon, also summarized (default {d.paper_steps}, or --steps when "
             "that is smaller)",
    )
    a(
        "--P",
        dest="n_examples",
        type=int,
        default=d.n_examples,
        help=f"training sequences (default {d.n_examples})",
    )
    a(
        "--N",
        dest="n_context",
        type=int,
        default=d.n_context,
        help=f"context length (default {d.n_context})",
    )
    a("--d", type=int, default=d.d, help=f"input dimension (default {d.d})")
    a("--heads", type=int, default=d.n_heads, help=f"number of heads H (default {d.n_heads})")
    a("--rank", type=int, default=d.rank, help=f"key/query rank (default {d.rank})")
    a(
        "--lr",
        type=float,
        default=d.learning_rate,
        help=f"learning rate (default {d.learning_rate})",
    )
    a(
        "--init",
        type=float,
        default=d.init_scale,
        help=f"init scale, linattn-icl's --init (default {d.init_scale})",
    )
    a("--rho", type=float, default=d.rho, help=f"SAM radius (default {d.rho})")
    a(
        "--scale",
        choices=["anchor", "paper"],
        default=d.scale,
        help="anchor: no 1/N (linattn-icl); paper: 1/N (default anchor)",
    )
    a(
        "--covariance",
        choices=["linear", "white", "geometric"],
        default=d.covariance,
        help="input covariance family (default linear: eigenvalues ∝ 1..d)",
    )
    a(
        "--data",
        choices=["wishart", "tokens"],
        default=d.data_method,
        help="sampler: exact-in-law Wishart or explicit tokens (default wishart)",
    )
    a(
        "--anchor-preprocessing",
        action="store_true",
        help="centre x and whiten w across the dataset like linattn-icl (needs --data tokens)",
    )
    a(
        "--proxy-steps",
        type=int,
        default=None,
        help="upsampling proxy budget (default paper-steps // 3)",
    )
    a(
        "--checkpoints",
        type=int,
        default=d.n_checkpoints,
        help=f"proxy checkpoints (default {d.n_checkpoints})",
    )
    a(
        "--factor",
        type=int,
        default=d.upsample_factor,
        help=f"extra copies of a selected example (default {d.upsample_factor})",
    )
    a(
        "--features",
        choices=list(FEATURES),
        default=d.cluster_features,
        help="clustering features: raw trajectories (paper) or scale-free log_ratio, ... "
        "(default trajectory)",
    )
    a(
        "--selection",
        choices=list(SELECTIONS),
        default=d.selection,
        help="which examples to upsample (default hard)",
    )
    a(
        "--log-every",
        type=int,
        default=None,
        help=f"stride of the stored curves (default {d.log_every}, or the largest stride below it "
             "that divides both horizons minus one)",
    )
    a("--seed", type=seed, default=d.seed, help=f"root seed (default {d.seed})")
    a(
        "--out",
        type=Path,
        default=None,
        help="save the xarray result to this .nc file (an existing file there must be an earlier "
        "NetCDF result, which is replaced; any other file is refused)",
    )
    a("--json", action="store_true", help="print the summary as JSON instead of a table")
    a("--no-progress", action="store_true", help="hide the progress bar")
    return p  # fmt: skip


def _product_parser(command: str) -> ArgumentParser:
    from .products import DEFAULT_OUT, DEFAULT_RESULTS

    what = {
        "figure1": "Compute (if needed) and render Figure 1 at both horizons and the "
                   "test-loss-vs-horizon figure; print the per-method statistics.",
        "mechanism": "Compute (if needed) and render the SAM-mechanism figure (reduced model vs "
                     "simulation, escape experiment).",
        "upsampling": "Compute (if needed) and render the upsampling study (selections vs "
                      "theory, lr-matched control).",
    }[command]  # fmt: skip
    p = ArgumentParser(prog=f"{PROG} {command}", description=what)
    add_folder_arguments(p, out=DEFAULT_OUT, results=DEFAULT_RESULTS)
    p.add_argument(
        "--quick",
        action="store_true",
        help="seconds-long configuration (files get a _quick suffix)",
    )
    p.add_argument("--recompute", action="store_true", help="recompute even if the result exists")
    return p  # fmt: skip


def _run_product(command: str, argv) -> int:
    from sims.runtime.io import read_netcdf

    from . import products

    args = _product_parser(command).parse_args(argv)
    check_folders(args)
    kw = dict(results_dir=args.results, quick=args.quick, recompute=args.recompute,
              progress=True)  # fmt: skip
    if command == "figure1":
        paths = products.render_figure1(args.out, **kw)
        kw["recompute"] = False
        paths += products.render_horizon(args.out, **kw)
        from .experiment import format_summary, summarize

        ds = read_netcdf(products.ensure_figure1(args.results, quick=args.quick))
        print(format_summary(summarize(ds)))
    elif command == "mechanism":
        paths = products.render_mechanism(args.out, **kw)
        _print_mechanism(read_netcdf(products.ensure_mechanism(args.results, quick=args.quick)[0]))
    else:
        paths = products.render_upsampling(args.out, **kw)
        from .study import summarize_study

        summary = summarize_study(
            read_netcdf(products.ensure_study(args.results, quick=args.quick))
        )
        _print_study(summary)
    for p in paths:
        print(f"wrote {p}")
    return 0


def _print_mechanism(an) -> None:
    import numpy as np

    gd = an.measured.sel({"method": "gd"}).values
    print(f"{'method':14s} {'median time ratio to GD':>40s} {'(reduced model)':>40s} {'ΔH':>8s}")
    for m in an.method.values:
        if m == "gd":
            continue
        r = np.nanmedian(an.measured.sel({"method": m}).values / gd, 0)
        p = np.nanmedian(an.predicted.sel({"method": m}).values / gd, 0)
        dh = np.nanmedian(an.entropy_measured.sel({"method": m}).values
                          - an.entropy_measured.sel({"method": "gd"}).values)  # fmt: skip
        print(
            f"{m:14s} {np.array2string(r, precision=3):>40s} "
            f"{np.array2string(p, precision=3):>40s} {dh:>+8.4f}"
        )


def _print_study(summary: dict) -> None:
    print(
        f"{'run kind':16s} {'ΔH median':>10s} {'pred. ΔH':>9s} {'condition':>9s} "
        f"{'test loss (long) median':>24s}  boost r_i"
    )
    for k, row in summary.items():
        if not isinstance(row, dict):
            continue
        pred = row.get("predicted_entropy_change_median")
        cond = row.get("condition_met_runs")
        boost = ", ".join(f"{x:.3f}" for x in row.get("boost_median", []))
        print(
            f"{k:16s} {row['entropy_minus_gd_median']:>+10.4f} "
            f"{'' if pred is None else f'{pred:+.4f}':>9s} {'' if cond is None else cond:>9} "
            f"{row['test_loss']['long']['median']:>24.5f}  {boost}"
        )


#: Costs behind :func:`estimate`, measured on the CI machine (25 runs, P = 80,000 and 320,000:
#: 1.3 and 3.7 GB peak): JAX and the arrays of a small run; floats kept per example and run
#: beyond ``2 d² + 2 d + 2 K``; seconds per example and run (data, proxy, selection) and per
#: step, run, method and unit of ``d⁴ + H (d + 1)²`` (training), plus start-up and compilation.
_BYTES_BASE, _FLOATS_PER_EXAMPLE = 500e6, 8
_SECONDS_BASE, _SECONDS_PER_EXAMPLE, _SECONDS_PER_STEP_UNIT = 15.0, 4e-6, 1.2e-8


def estimate(cfg) -> Estimate:
    """Memory and time of :func:`run_figure1` for ``cfg`` (a ``Figure1Config``), from its sizes.

    Every run keeps its training set in sufficient form (``β, x_q, y_q``), the cubic features
    ``z`` (``d²`` per example), the proxy losses (``K`` per example) and the dataset moments
    (``d⁴`` each: train, test, upsampled); sampling one run's tokens needs ``3 P (N + 1) d``
    more. Training costs one ``d² × d²`` product per step, run and method.
    """
    R, P, d, K = cfg.n_runs, cfg.n_examples, cfg.d, cfg.n_checkpoints
    M = len(cfg.run_methods)
    n_log = cfg.num_steps // cfg.log_every + 1
    per_example = 2 * d * d + 2 * d + 2 * K + _FLOATS_PER_EXAMPLE
    transient = 3 * P * (cfg.n_context + 1) * d if cfg.data_method == "tokens" else 2 * P * d * d
    floats = R * (P * per_example + 3 * d**4) + transient + M * R * (d**4 + n_log * (d + 8))
    unit = d**4 + cfg.n_heads * (d + 1) ** 2
    steps = cfg.num_steps + cfg.proxy_budget
    seconds = (
        _SECONDS_BASE
        + _SECONDS_PER_EXAMPLE * R * P * d * d / 16
        + _SECONDS_PER_STEP_UNIT * R * M * steps * unit
    )
    return Estimate(
        memory=_BYTES_BASE + 8.0 * floats,
        seconds=seconds,
        what=f"--runs {R} --P {P} --d {d} --steps {cfg.num_steps} ({M} method{'s' * (M > 1)})",
        fix=("lower --steps (or raise --log-every)" if M * R * n_log * (d + 8) > R * P
             * per_example else "lower --P, --d or --runs"),
    )


def _horizon_defaults(args, d) -> None:
    """Fill ``--paper-steps`` and ``--log-every`` the user left out so they fit ``--steps``.

    A flag the user gave is kept (a clash is then reported on it); only defaults adapt: the
    paper's horizon is at most ``--steps``, the stride the largest one up to the default that
    divides both horizons minus one (so the last step of each is stored).
    """
    import math

    if args.paper_steps is None:
        args.paper_steps = min(d.paper_steps, args.steps) if args.steps >= 1 else d.paper_steps
    if args.log_every is None:
        g = math.gcd(max(args.steps - 1, 0), max(args.paper_steps - 1, 0))
        args.log_every = d.log_every if g == 0 else max(
            k for k in range(1, min(d.log_every, g) + 1) if g % k == 0)


def _train(argv) -> int:
    from .experiment import Figure1Config, format_summary, run_figure1, summarize

    parser = _train_parser()
    args = parser.parse_args(argv)
    _horizon_defaults(args, Figure1Config())
    try:
        cfg = Figure1Config(
            d=args.d, n_context=args.n_context, n_heads=args.heads, rank=args.rank,
            n_examples=args.n_examples, num_steps=args.steps, paper_steps=args.paper_steps,
            n_runs=args.runs, learning_rate=args.lr, init_scale=args.init, rho=args.rho,
            scale=args.scale, covariance=args.covariance, data_method=args.data,
            anchor_preprocessing=args.anchor_preprocessing, proxy_steps=args.proxy_steps,
            n_checkpoints=args.checkpoints, upsample_factor=args.factor,
            cluster_features=args.features, selection=args.selection, log_every=args.log_every,
            seed=args.seed, methods=(OPTIMIZERS[args.optimizer],),
        )  # fmt: skip
        if args.data == "wishart" and args.anchor_preprocessing:
            raise ValueError("`--anchor-preprocessing` needs explicit tokens; add `--data tokens`.")
        if args.out is not None:
            from sims.runtime.io import ensure_writable

            ensure_writable(args.out, kind="file", arg="--out", suffix=".nc")
        check_resources(estimate(cfg), prog=PROG, progress=not args.no_progress)
    except (ValueError, TypeError) as err:
        raise UsageError(_flagify(str(err))) from None
    try:
        ds = run_figure1(cfg, progress=not args.no_progress)
    except KeyboardInterrupt:
        raise KeyboardInterrupt("interrupted before any result was written") from None
    if args.out is not None:  # first: a computed result is never lost to a display error
        from sims.runtime.io import provenance, write_netcdf

        meta = provenance(config=dataclasses.asdict(cfg), seed=cfg.seed, status=ds.attrs["status"])
        write_netcdf(args.out, ds, meta=meta)
    summary = summarize(ds)
    if args.json:
        print(json.dumps({"status": ds.attrs["status"], "timings": ds.attrs["timings"],
                          **summary}, indent=1))  # fmt: skip
    else:
        print(format_summary(summary))
        print(
            f"status: {ds.attrs['status']}; timings (s): "
            + ", ".join(f"{k} {v:.1f}" for k, v in ds.attrs["timings"].items())
        )
    if args.out is not None:
        print(f"wrote {args.out}")
    if ds.attrs["status"] != "success":
        failed = {m: msg for m, msg in ds.attrs.get("messages", {}).items() if msg}
        why = "; ".join(f"{m}: {msg}" for m, msg in failed.items()) or "a run failed"
        saved = f"the result is saved in {args.out} (status failed)" if args.out else (
            "nothing saved (no --out)")
        print(f"{PROG}: error: the run diverged ({why}); {saved}",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0


def _main(argv) -> int:
    from sims.runtime.extras import exit_on_missing_extra, require

    argv = list(sys.argv[1:] if argv is None else argv)
    with exit_on_missing_extra(PROG):
        require("jax", what=PROG)
        import jax

        jax.config.update("jax_enable_x64", True)
        if argv and argv[0] in COMMANDS:
            return _run_product(argv[0], argv[1:])
        return _train(argv)


def main(argv=None) -> int:
    """Parse ``argv`` and run; returns the exit status.

    Usage errors (and a missing ``jax`` extra) print one line and raise ``SystemExit(2)``;
    Ctrl-C raises ``SystemExit(130)`` (:func:`sims.runtime.cli.run_cli`).
    """
    return run_cli(_main, argv, prog=PROG)


if __name__ == "__main__":
    raise SystemExit(main())
