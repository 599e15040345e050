"""Validated, frozen configuration of the LLM pipeline (style rule 9).

A run is described by one JSON (or TOML) file holding only the overrides of the defaults below,
in sections named after the stages::

    {"run_dir": "results/llm/smollm2",
     "data": {"train_file": "data/MathInstruct.json", "benchmark_dir": "data/dataset"},
     "proxy": {"model": "smollm2-135m-instruct"},
     "finetune": {"model": "gemma3-270m", "settings": ["ft", "ft_up"]}}

:func:`load_config` merges the file into the defaults by passing each section's keys to its
dataclass, so an unknown key fails with the list of valid ones; every field is checked in
``__post_init__``. Relative paths in the file are relative to the file's folder, except
``run_dir``, which is relative to the current folder (so committed configs write to
``./results/llm/...``).
:func:`config_to_dict` gives the full resolved config, stored with every artifact.

The defaults are the paper's settings (Section 6): proxy trained for 1/3 epoch with 5
checkpoints; LoRA rank 128, alpha 512, dropout 0.05; effective batch 128; 3 epochs; cosine
schedule with max lr 2e-5 and 3 % warm-up; max length 512; zero-shot greedy decoding.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_validation.data.records import BENCHMARKS

__all__ = [
    "DataConfig",
    "ProxyConfig",
    "SelectionConfig",
    "FinetuneConfig",
    "EvalConfig",
    "SynthesisConfig",
    "PipelineConfig",
    "SETTINGS",
    "OPTIMIZERS",
    "SAVE_STEPS",
    "load_config",
    "config_to_dict",
    "config_hash",
]

#: Fine-tuning settings (what the training set is), in the order of the paper's tables:
#: ``ft`` original data; ``ft_up`` hard cluster upsampled (Table 2); ``random``/``easy`` the
#: same number of random/easy examples upsampled (Table 4); ``synth`` synthetic rephrasings of
#: the hard examples instead of duplicates, ``both`` duplicates and rephrasings (Table 5).
SETTINGS = ("ft", "ft_up", "random", "easy", "synth", "both")

#: Default optimizer steps between resume checkpoints of the proxy and the fine-tuning.
SAVE_STEPS = 200

#: Optimizers by name. ``adamw`` and ``muon`` always work; the SAM family needs ``sims.optim``.
OPTIMIZERS = ("adamw", "muon", "sgd", "sam", "fsam", "lsam", "angle_sam", "psam", "pfsam")


def _fail(section: str, name: str, value: Any, want: str) -> None:
    raise ValueError(f"`{section}.{name}` must be {want}; got {value!r}.")


def _pos_int(section, name, v, *, allow_none=False, zero=False):
    if v is None and allow_none:
        return
    lo = 0 if zero else 1
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        _fail(section, name, v, f"an int >= {lo}" + (" or null" if allow_none else ""))


def _pos_float(section, name, v, *, lo=0.0, hi=None, open_lo=True):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    ok = ok and (v > lo if open_lo else v >= lo) and (hi is None or v <= hi)
    if not ok:
        rng = f"{'>' if open_lo else '>='} {lo}" + (f" and <= {hi}" if hi is not None else "")
        _fail(section, name, v, f"a number {rng}")


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Training data and benchmarks.

    Attributes:
        train_file: MathInstruct-format JSON/JSONL (``instruction``, ``output``, ``source``).
        benchmark_dir: folder with the benchmarks in MAmmoTH's layout (see ``data.py``).
        benchmark_files: per-benchmark file overrides ``{name: path}``.
        benchmarks: which benchmarks to evaluate (default all six, Table 2 order).
        val_fraction: held-out fraction of the training file (5 % in the authors' code).
        split_seed: seed of the train/validation split (42 in the authors' code).
        max_length: tokens per training example (prompt + response), 512 in the paper.
        max_examples: keep only the first N records of ``train_file`` (quick runs).
        max_eval_items: evaluate only the first N problems of each benchmark.
    """

    train_file: str | None = None
    benchmark_dir: str | None = None
    benchmark_files: Mapping[str, str] = dataclasses.field(default_factory=dict)
    benchmarks: tuple[str, ...] = BENCHMARKS
    val_fraction: float = 0.05
    split_seed: int = 42
    max_length: int = 512
    max_examples: int | None = None
    max_eval_items: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "benchmarks", _names(self.benchmarks))
        object.__setattr__(self, "benchmark_files", dict(self.benchmark_files))
        for b in (*self.benchmarks, *self.benchmark_files):
            if b not in BENCHMARKS:
                _fail("data", "benchmarks", b, f"one of {', '.join(BENCHMARKS)}")
        if not 0.0 <= self.val_fraction < 1.0:
            _fail("data", "val_fraction", self.val_fraction, "in [0, 1)")
        _pos_int("data", "split_seed", self.split_seed, zero=True)
        _pos_int("data", "max_length", self.max_length)
        _pos_int("data", "max_examples", self.max_examples, allow_none=True)
        _pos_int("data", "max_eval_items", self.max_eval_items, allow_none=True)


@dataclasses.dataclass(frozen=True)
class ProxyConfig:
    """Proxy training and loss-trajectory recording (Section 5; Pythia-70M in the paper).

    Attributes:
        model: model spec (HF folder, GGUF file or named model).
        epoch_fraction: train for this fraction of an epoch (1/3 in the paper).
        n_checkpoints: checkpoints evenly spaced over that stretch (5; 10 and 15 in Fig. 4c).
        schedule_epochs: the learning-rate schedule is that of a run of this many epochs, cut
            at ``epoch_fraction`` (the authors' proxy runs a 3-epoch schedule and keeps its
            first checkpoints).
        lr: peak learning rate.
        warmup_ratio: warm-up fraction of the scheduled steps.
        batch_size: effective batch size (per device x accumulation x processes).
        per_device_batch_size: micro-batch size.
        lora: train LoRA adapters (Section 6 settings) instead of all weights.
        loss_batch_tokens: token budget of a loss-recording batch (length-sorted batches).
        optimizer: see :data:`OPTIMIZERS`.
        dtype: ``auto`` (bf16 on a GPU that supports it), ``float32``, ``bfloat16``.
        seed: training seed.
        keep_checkpoints: keep the proxy's checkpoint folders after their losses are recorded.
        save_checkpoints: write a Trainer checkpoint at every recording step and every
            ``save_steps`` steps so a killed run resumes there (turn off for minute-long CPU
            proxies, where a crash just reruns).
        save_steps: optimizer steps between checkpoints (besides the recording steps); see
            :attr:`FinetuneConfig.save_steps`.
    """

    model: str = "smollm2-135m-instruct"
    epoch_fraction: float = 1 / 3
    n_checkpoints: int = 5
    schedule_epochs: float = 3.0
    lr: float = 2e-5
    warmup_ratio: float = 0.03
    batch_size: int = 128
    per_device_batch_size: int = 8
    lora: bool = False
    loss_batch_tokens: int = 16384
    optimizer: str = "adamw"
    dtype: str = "auto"
    seed: int = 42
    keep_checkpoints: bool = False
    save_checkpoints: bool = True
    save_steps: int = SAVE_STEPS

    def __post_init__(self):
        _pos_float("proxy", "epoch_fraction", self.epoch_fraction)
        _pos_int("proxy", "n_checkpoints", self.n_checkpoints)
        _pos_float("proxy", "schedule_epochs", self.schedule_epochs)
        if self.schedule_epochs < self.epoch_fraction:
            _fail("proxy", "schedule_epochs", self.schedule_epochs, ">= epoch_fraction")
        _pos_float("proxy", "lr", self.lr)
        _pos_float("proxy", "warmup_ratio", self.warmup_ratio, hi=1.0, open_lo=False)
        _pos_int("proxy", "batch_size", self.batch_size)
        _pos_int("proxy", "per_device_batch_size", self.per_device_batch_size)
        _pos_int("proxy", "loss_batch_tokens", self.loss_batch_tokens)
        _pos_int("proxy", "save_steps", self.save_steps)
        if self.optimizer not in OPTIMIZERS:
            _fail("proxy", "optimizer", self.optimizer, f"one of {OPTIMIZERS}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            _fail("proxy", "dtype", self.dtype, "'auto', 'float32', 'bfloat16' or 'float16'")


@dataclasses.dataclass(frozen=True)
class SelectionConfig:
    """Clustering the trajectories and the upsampling ablations (Section 5, Fig. 4b-d).

    Attributes:
        features: ``trajectory`` (all checkpoints), ``last`` (last checkpoint, Table 6
            "Ckpt."), ``relative`` (ratios of consecutive checkpoints, the authors' variant).
        n_checkpoints: use the first N recorded checkpoints (5/10/15 for Fig. 4c; default all).
        n_clusters: k of the per-source k-means (2).
        per_source: cluster inside each MathInstruct source (the authors' code) or globally.
        small_sources: ``below_mean``: a source smaller than the mean source size is upsampled
            whole (the authors' rule); ``none``: cluster every source.
        min_source_size: sources smaller than this are upsampled whole.
        upsample_factor: extra copies of each selected example (1: hard examples seen twice).
        seed: k-means seed and seed of the random/easy ablation draws.
    """

    features: str = "trajectory"
    n_checkpoints: int | None = None
    n_clusters: int = 2
    per_source: bool = True
    small_sources: str = "below_mean"
    min_source_size: int = 0
    upsample_factor: int = 1
    seed: int = 0

    def __post_init__(self):
        if self.features not in ("trajectory", "last", "relative"):
            _fail("selection", "features", self.features, "'trajectory', 'last' or 'relative'")
        _pos_int("selection", "n_checkpoints", self.n_checkpoints, allow_none=True)
        _pos_int("selection", "n_clusters", self.n_clusters)
        if self.small_sources not in ("below_mean", "none"):
            _fail("selection", "small_sources", self.small_sources, "'below_mean' or 'none'")
        _pos_int("selection", "min_source_size", self.min_source_size, zero=True)
        _pos_int("selection", "upsample_factor", self.upsample_factor)
        _pos_int("selection", "seed", self.seed, zero=True)


@dataclasses.dataclass(frozen=True)
class FinetuneConfig:
    """LoRA fine-tuning of the target model (Section 6).

    Attributes:
        model: target model spec.
        settings: which training sets to fine-tune on (:data:`SETTINGS`).
        lora: LoRA adapters (rank/alpha/dropout below); ``False`` trains all weights.
        lora_rank, lora_alpha, lora_dropout: 128, 512, 0.05 in the paper.
        lora_targets: ``auto`` (attention q/k/v/o; Phi-2 also the feed-forward, as the paper),
            ``attention``, ``attention+mlp``, or a list of module names (``["q_proj", "v_proj"]``).
        epochs: passes over the (upsampled) training set (3).
        lr: peak learning rate (2e-5).
        warmup_ratio: linear warm-up fraction (0.03).
        scheduler: transformers scheduler name (``cosine``).
        weight_decay: decoupled weight decay (0).
        batch_size: effective batch (per device x accumulation x processes), 128.
        per_device_batch_size: micro-batch size; accumulation makes up the rest.
        optimizer: see :data:`OPTIMIZERS`.
        optimizer_kwargs: extra arguments of the optimizer (``rho`` of SAM, Muon's lr, ...).
        dtype: ``auto`` (bf16 where supported), ``float32``, ``bfloat16``.
        gradient_checkpointing: trade compute for memory.
        seed: training seed (data order and LoRA initialization).
        save_total_limit: keep at most this many epoch checkpoints (null: all).
        save_steps: also checkpoint every this many optimizer steps, so a killed run loses at
            most this many steps (it resumes at the exact step and data position). Only the
            newest of these mid-epoch checkpoints is kept; epoch checkpoints stay. The default
            (200) is minutes of work on a GPU for the paper's models (an epoch of MathInstruct
            at batch 128 is ~2000 steps) and a LoRA checkpoint is a few MB.
    """

    model: str = "gemma3-270m"
    settings: tuple[str, ...] = ("ft", "ft_up")
    lora: bool = True
    lora_rank: int = 128
    lora_alpha: float = 512.0
    lora_dropout: float = 0.05
    lora_targets: str | tuple[str, ...] = "auto"
    epochs: float = 3.0
    lr: float = 2e-5
    warmup_ratio: float = 0.03
    scheduler: str = "cosine"
    weight_decay: float = 0.0
    batch_size: int = 128
    per_device_batch_size: int = 4
    optimizer: str = "adamw"
    optimizer_kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    dtype: str = "auto"
    gradient_checkpointing: bool = False
    seed: int = 42
    save_total_limit: int | None = None
    save_steps: int = SAVE_STEPS

    def __post_init__(self):
        object.__setattr__(self, "settings", _names(self.settings))
        object.__setattr__(self, "optimizer_kwargs", dict(self.optimizer_kwargs))
        if not isinstance(self.lora_targets, str):
            object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        for s in self.settings:
            if s not in SETTINGS:
                _fail("finetune", "settings", s, f"one of {', '.join(SETTINGS)}")
        _pos_int("finetune", "lora_rank", self.lora_rank)
        _pos_float("finetune", "lora_alpha", self.lora_alpha)
        _pos_float("finetune", "lora_dropout", self.lora_dropout, hi=1.0, open_lo=False)
        if isinstance(self.lora_targets, str) and self.lora_targets not in (
            "auto", "attention", "attention+mlp"
        ):  # fmt: skip
            _fail(
                "finetune", "lora_targets", self.lora_targets,
                "'auto', 'attention', 'attention+mlp' or a list of module names",
            )  # fmt: skip
        _pos_float("finetune", "epochs", self.epochs)
        _pos_float("finetune", "lr", self.lr)
        _pos_float("finetune", "warmup_ratio", self.warmup_ratio, hi=1.0, open_lo=False)
        _pos_float("finetune", "weight_decay", self.weight_decay, open_lo=False)
        _pos_int("finetune", "batch_size", self.batch_size)
        _pos_int("finetune", "per_device_batch_size", self.per_device_batch_size)
        _pos_int("finetune", "save_total_limit", self.save_total_limit, allow_none=True)
        _pos_int("finetune", "save_steps", self.save_steps)
        if self.optimizer not in OPTIMIZERS:
            _fail("finetune", "optimizer", self.optimizer, f"one of {OPTIMIZERS}")
        if self.dtype not in ("auto", "float32", "bfloat16", "float16"):
            _fail("finetune", "dtype", self.dtype, "'auto', 'float32', 'bfloat16' or 'float16'")


#: MAmmoTH's stop strings (a model that starts a new prompt section is cut there).
STOP_STRINGS = (
    "### Instruction", "\n\n\n", "Below is an instruction", "USER:", "ASSISTANT:",
    "<start_of_turn>", "[INST]", "\nProblem", "Problem:",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """Zero-shot greedy evaluation (Section 6).

    Attributes:
        max_new_tokens: generation budget (2048 in the paper; 512 suffices for short answers).
        batch_size: prompts per generation batch (length-sorted, left padded).
        stop_strings: generation stops at any of these; the completion is cut before it.
        checkpoints: ``final`` (the last epoch's checkpoint) or ``all`` (every epoch; the
            table reports the best by average accuracy, as Table 2 does among final-epoch
            checkpoints).
        pretrained: also evaluate the pretrained target (the PT column).
        dtype: ``auto``, ``float32``, ``bfloat16``.
    """

    max_new_tokens: int = 512
    batch_size: int = 32
    stop_strings: tuple[str, ...] = STOP_STRINGS
    checkpoints: str = "final"
    pretrained: bool = True
    dtype: str = "auto"

    def __post_init__(self):
        object.__setattr__(self, "stop_strings", tuple(self.stop_strings))
        _pos_int("evaluate", "max_new_tokens", self.max_new_tokens)
        _pos_int("evaluate", "batch_size", self.batch_size)
        if self.checkpoints not in ("final", "all"):
            _fail("evaluate", "checkpoints", self.checkpoints, "'final' or 'all'")


@dataclasses.dataclass(frozen=True)
class SynthesisConfig:
    """Variational problem synthesis (Appendix E, Table 5).

    Attributes:
        model: the instruction model that writes the problems (SmolLM2-135M-Instruct).
        max_new_tokens: generation budget per problem.
        batch_size: prompts per generation batch.
        max_problems: synthesize for at most this many hard examples (null: all).
        recluster: keep only synthetic problems that the proxy's last checkpoint scores at
            least as high as the hard cluster's lower boundary (assigned to the hard centre).
        max_question_chars: drop synthetic questions longer than this.
        seed: which hard examples are used when ``max_problems`` is set.
    """

    model: str = "smollm2-135m-instruct"
    max_new_tokens: int = 384
    batch_size: int = 16
    max_problems: int | None = None
    recluster: bool = False
    max_question_chars: int = 2000
    seed: int = 0

    def __post_init__(self):
        _pos_int("synthesis", "max_new_tokens", self.max_new_tokens)
        _pos_int("synthesis", "batch_size", self.batch_size)
        _pos_int("synthesis", "max_problems", self.max_problems, allow_none=True)
        _pos_int("synthesis", "max_question_chars", self.max_question_chars)


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """The whole run: where it writes and each stage's settings.

    Attributes:
        run_dir: the run folder (every stage reads and writes there).
        data, proxy, selection, finetune, evaluate, synthesis: the stages' configs.
    """

    run_dir: str = "results/llm/run"
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    proxy: ProxyConfig = dataclasses.field(default_factory=ProxyConfig)
    selection: SelectionConfig = dataclasses.field(default_factory=SelectionConfig)
    finetune: FinetuneConfig = dataclasses.field(default_factory=FinetuneConfig)
    evaluate: EvalConfig = dataclasses.field(default_factory=EvalConfig)
    synthesis: SynthesisConfig = dataclasses.field(default_factory=SynthesisConfig)


_SECTIONS = {
    "data": DataConfig,
    "proxy": ProxyConfig,
    "selection": SelectionConfig,
    "finetune": FinetuneConfig,
    "evaluate": EvalConfig,
    "synthesis": SynthesisConfig,
}
_PATH_FIELDS = {("data", "train_file"), ("data", "benchmark_dir")}
_MODEL_FIELDS = {("proxy", "model"), ("finetune", "model"), ("synthesis", "model")}


def _build(cls, section: str, values: Mapping[str, Any]):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        import difflib

        hints = [difflib.get_close_matches(u, names, n=1) for u in unknown]
        said = ", ".join(
            f"{u!r}" + (f" (did you mean {h[0]!r}?)" if h else "")
            for u, h in zip(unknown, hints, strict=True)
        )
        raise ValueError(
            f"unknown key(s) in section `{section}`: {said}; "
            f"valid keys: {', '.join(sorted(names))}."
        )
    return cls(**values)


def _resolve(base: Path, value: str | None) -> str | None:
    if value is None:
        return None
    p = Path(value).expanduser()
    return str(p if p.is_absolute() else (base / p))


def load_config(
    path: str | os.PathLike | None = None, overrides: Mapping[str, Any] | None = None
) -> PipelineConfig:
    """Defaults, then the file's sections, then ``overrides`` (``{"proxy.lr": 1e-4}``).

    Args:
        path: JSON or TOML file (``.toml``), or ``None`` for the defaults.
        overrides: dotted keys (``"finetune.settings"``) applied last (from ``--set``).

    Returns:
        A validated :class:`PipelineConfig`.

    Raises:
        ValueError: for an unreadable file, unknown sections or keys (with suggestions), or a
            bad value (naming ``section.key``).
    """
    raw: dict[str, Any] = {}
    base = Path.cwd()
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"config file {str(p)!r} does not exist.")
        base = p.resolve().parent
        try:
            raw = tomllib.loads(p.read_text()) if p.suffix == ".toml" else json.loads(p.read_text())
        except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"config file {str(p)!r} is not valid: {exc}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"config file {str(p)!r} must hold an object of sections.")
    raw = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in raw.items()}
    for key, value in (overrides or {}).items():
        if "." not in key:
            raw[key] = value
            continue
        section, name = key.split(".", 1)
        raw.setdefault(section, {})
        if not isinstance(raw[section], dict):
            raise ValueError(f"`{section}` must be a section (an object); got {raw[section]!r}.")
        raw[section][name] = value
    unknown = sorted(set(raw) - set(_SECTIONS) - {"run_dir"})
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; valid: run_dir, {', '.join(_SECTIONS)}.")
    for section, name in _PATH_FIELDS:
        if section in raw and name in raw[section]:
            raw[section][name] = _resolve(base, raw[section][name])
    if "data" in raw and "benchmark_files" in raw["data"]:
        raw["data"]["benchmark_files"] = {
            k: _resolve(base, v) for k, v in dict(raw["data"]["benchmark_files"]).items()
        }
    for section, name in _MODEL_FIELDS:  # a model given as a relative path
        v = raw.get(section, {}).get(name)
        if isinstance(v, str) and (v.startswith(".") or "/" in v) and not Path(v).is_absolute():
            raw[section][name] = _resolve(base, v)
    kwargs = {s: _build(cls, s, raw.get(s, {})) for s, cls in _SECTIONS.items()}
    run_dir = raw.get("run_dir", PipelineConfig.run_dir)
    if not isinstance(run_dir, str) or not run_dir:
        raise ValueError(f"`run_dir` must be a non-empty path string; got {run_dir!r}.")
    return PipelineConfig(run_dir=run_dir, **kwargs)


def _names(value) -> tuple:
    """A list of names from a list or one string (``--set finetune.settings=ft,ft_up``).

    A string is a comma-separated list, never iterated letter by letter.
    """
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(","))
    return tuple(value)


def config_to_dict(cfg) -> dict[str, Any]:
    """A JSON-ready dict of a config (tuples become lists)."""
    from sims.runtime.io import to_jsonable

    return to_jsonable(dataclasses.asdict(cfg))


def config_hash(cfg) -> str:
    """A short hash of a config (detects a resume with changed settings)."""
    import hashlib

    text = json.dumps(config_to_dict(cfg), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
