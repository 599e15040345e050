"""``python -m llm_validation demo``: every pipeline step on a tiny model, in about two minutes.

What it does, in ``--out`` (default ``results/llm/demo``), each part resumable:

1. ``corpus/``: the generated MathInstruct-like training file (13 sources) and the six
   benchmarks in MAmmoTH's layout (:func:`llm_validation.data.corpus.write_corpus`);
2. ``models/target`` and ``models/proxy``: two small Llama decoders pre-trained from scratch on
   plain problem text (:func:`llm_validation.train.scratch.pretrain_from_scratch`), standing in for
   the pretrained target and the smaller proxy;
3. ``run.json``: a pipeline config over those, then ``run-all`` on it into ``run/``: ``data``,
   ``proxy`` (loss trajectories), ``select`` (per-source k-means; ``selection.png``),
   ``synthesize`` (the tiny target is no instruction model: expect few or no accepted
   rephrasings), ``finetune`` (LoRA, settings ft / ft_up / synth), ``evaluate`` and ``report``.

The numbers mean little at this size; the demo shows what each step writes and how the pieces
fit. Any step can be rerun alone with ``python -m llm_validation STEP --config OUT/run.json``.

``--size tiny`` is the same code path at a size that runs in seconds (what the tests run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from pathlib import Path

HELP = "run every pipeline step on a tiny model (about 2 minutes on 2 cores); says where to look"

__all__ = ["HELP", "DemoSize", "SIZES", "add_arguments", "run", "run_demo"]


@dataclasses.dataclass(frozen=True)
class DemoSize:
    """How big the demo is.

    Attributes:
        n_train, n_test, n_pretrain: corpus sizes (training problems, per benchmark,
            pre-training problems).
        target_hidden, target_layers, proxy_hidden: widths/depths of the from-scratch models.
        pretrain_epochs: passes of the from-scratch pre-training.
        max_length: tokens per example.
        finetune_epochs: passes of the LoRA fine-tuning.
        max_new_tokens: evaluation generation budget.
        synth_problems: hard problems the synthesis step rephrases.
    """

    n_train: int
    n_test: int
    n_pretrain: int
    target_hidden: int
    target_layers: int
    proxy_hidden: int
    pretrain_epochs: float
    max_length: int
    finetune_epochs: float
    max_new_tokens: int
    synth_problems: int


SIZES = {
    "small": DemoSize(n_train=400, n_test=30, n_pretrain=1000, target_hidden=96,
                      target_layers=4, proxy_hidden=48, pretrain_epochs=2.0, max_length=192,
                      finetune_epochs=2.0, max_new_tokens=64, synth_problems=24),
    "tiny": DemoSize(n_train=90, n_test=4, n_pretrain=120, target_hidden=32, target_layers=2,
                     proxy_hidden=24, pretrain_epochs=1.0, max_length=128, finetune_epochs=1.0,
                     max_new_tokens=8, synth_problems=4),
}  # fmt: skip

SETTINGS = ("ft", "ft_up", "synth")


def add_arguments(parser) -> None:
    """The demo's flags."""
    parser.add_argument("--out", default="results/llm/demo",
                        help="folder for everything the demo writes (rerun: resumes)")  # fmt: skip
    parser.add_argument(
        "--size", choices=tuple(SIZES), default="small",
        help="small: about 2 minutes on 2 cores; tiny: seconds (what the tests run)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bars or summaries")


def run(args) -> int:
    """Run the demo from parsed flags; print where to look."""
    from sims.runtime.extras import require

    require("llm", what="python -m llm_validation demo")
    import torch

    torch.set_num_threads(1)  # models this small run fastest on one thread (and share cores)
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"`--out` {str(out)!r} is an existing file; give a folder.")
    from llm_validation.runs import leave_no_empty_folders

    t0 = time.perf_counter()
    with leave_no_empty_folders(out):
        paths = run_demo(out, size=args.size, quiet=args.quiet)
    print(f"demo finished in {time.perf_counter() - t0:.0f} s; where to look:")
    for what, path in paths.items():
        print(f"  {what:<11} {_shown(path)}")
    print(f"rerun one step: python -m llm_validation STEP --config "
          f"{shlex.quote(_shown(paths['config']))}")
    print(f"accuracy near 0 % is expected here: the demo's models are {args.size} decoders "
          "pre-trained from scratch for seconds, so the demo shows that every step runs, not the "
          "effect (`python -m llm_validation confirm --scale cpu` measures that: FT 21.4 %)")
    return 0


def _shown(path: Path) -> str:
    """``path`` relative to the current folder when below it (as the user typed ``--out``)."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _model_config(size: DemoSize, hidden: int, layers: int):
    from llm_validation.models.tiny import TinySize
    from llm_validation.train.scratch import PretrainConfig

    return PretrainConfig(
        size=TinySize(hidden=hidden, layers=layers, heads=4, kv_heads=2,
                      intermediate=2 * hidden + hidden // 2),
        epochs=size.pretrain_epochs, lr=3e-3, batch_size=16, max_length=size.max_length,
        vocab_size=512,
    )  # fmt: skip


def run_config(out: Path, size: DemoSize, target: Path, proxy: Path) -> dict:
    """The pipeline config the demo runs (written to ``out/run.json``)."""
    return {
        "run_dir": str(out / "run"),
        "data": {"train_file": str(out / "corpus" / "MathInstruct.json"),
                 "benchmark_dir": str(out / "corpus" / "dataset"), "max_length": size.max_length},
        "proxy": {"model": str(proxy), "epoch_fraction": 1.0, "schedule_epochs": 1.0,
                  "n_checkpoints": 4, "batch_size": 16, "per_device_batch_size": 16,
                  "lr": 2e-3, "dtype": "float32", "save_checkpoints": False},
        "selection": {"small_sources": "none", "min_source_size": 4},
        "synthesis": {"model": str(target), "max_new_tokens": size.max_new_tokens,
                      "max_problems": size.synth_problems},
        "finetune": {"model": str(target), "settings": list(SETTINGS), "lora_rank": 8,
                     "lora_alpha": 16, "epochs": size.finetune_epochs, "lr": 2e-3,
                     "warmup_ratio": 0.0, "batch_size": 16, "per_device_batch_size": 16,
                     "dtype": "float32", "save_steps": 20},
        "evaluate": {"max_new_tokens": size.max_new_tokens, "batch_size": 32,
                     "dtype": "float32"},
    }  # fmt: skip


def run_demo(out: str | os.PathLike, *, size: str = "small", quiet: bool = False) -> dict:
    """Corpus, two from-scratch models, then ``run-all`` on them; returns the paths to look at.

    Raises:
        ValueError: for an unknown ``size`` or an ``out`` that is an existing file.
    """
    if size not in SIZES:
        raise ValueError(f"`size` must be one of {', '.join(SIZES)}; got {size!r}.")
    s = SIZES[size]
    # absolute: the config's paths are read relative to its own folder (llm_validation.config),
    # so a relative --out written into it would be joined twice
    out = Path(out).expanduser().resolve()
    from llm_validation.config import load_config
    from llm_validation.data.corpus import write_corpus
    from llm_validation.data.records import load_mathinstruct
    from llm_validation.experiments import pipeline
    from llm_validation.train.scratch import pretrain_from_scratch
    from sims.runtime.io import atomic_path, ensure_writable

    ensure_writable(out, kind="dir", arg="--out")
    corpus = out / "corpus"
    done = f"written by python -m llm_validation demo --size {size}\n"
    if (corpus / "DONE").exists() and (corpus / "DONE").read_text() != done:
        from sims.runtime.errors import UsageError

        there = (corpus / "DONE").read_text().strip().removeprefix("written by ")
        raise UsageError(
            f"--out {str(out)!r} holds a demo of another size ({there}); give another --out, "
            "or delete it to rerun"
        )
    if not (corpus / "DONE").exists():
        _say(f"demo: writing the corpus ({s.n_train} training problems) to {corpus}", quiet)
        write_corpus(corpus, n_train=s.n_train, n_test=s.n_test, n_pretrain=s.n_pretrain, seed=0)
        (corpus / "DONE").write_text(done)
    pre = load_mathinstruct(corpus / "pretrain.json")
    models = {}
    for name, hidden, layers in (("target", s.target_hidden, s.target_layers),
                                 ("proxy", s.proxy_hidden, 2)):  # fmt: skip
        if (out / "models" / name / "model" / "DONE").exists():
            _say(f"demo: reusing the {name} model pre-trained by an earlier run "
                 f"({out / 'models' / name / 'model'})", quiet)  # fmt: skip
        else:
            _say(f"demo: pre-training the {name} model from scratch ({len(pre)} problems)", quiet)
        models[name] = pretrain_from_scratch(pre, out / "models" / name,
                                             _model_config(s, hidden, layers),
                                             progress=not quiet)  # fmt: skip
    cfg_path = out / "run.json"
    with atomic_path(cfg_path) as tmp:
        tmp.write_text(json.dumps(run_config(out, s, models["target"], models["proxy"]), indent=1))
    cfg = load_config(cfg_path)
    pipeline.run_all(cfg, quiet=quiet)
    run_dir = Path(cfg.run_dir)
    return {
        "report": run_dir / "report.md",
        "selection": run_dir / "selection" / "selection.png",
        "trajectory": run_dir / "proxy" / "trajectories.nc",
        "finetune": run_dir / "finetune",
        "evaluation": run_dir / "eval",
        "config": cfg_path,
    }


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, flush=True)
