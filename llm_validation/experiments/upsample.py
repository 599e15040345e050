"""``python -m llm_validation upsample``: the paper's data recipe on your own data, in one command.

The main paper's method for practitioners (Section 5): train a small proxy on the fine-tuning
data, record every example's loss at a few checkpoints, cluster the trajectories (per source),
and repeat the cluster learned late; then fine-tune any model on that mixture with any trainer.

::

    python -m llm_validation upsample --data train.jsonl --proxy PROXY --out DIR

reads ``--data`` (JSON, JSONL or a ``datasets.save_to_disk`` folder; instruction/output,
prompt/completion or chat ``messages``: :mod:`llm_validation.data.formats`), and writes in
``DIR``:

* ``mixture.jsonl``: the records in their own layout, each selected one repeated ``1 + --factor``
  times (its copies right after it); with ``--weights`` every record once with a ``weight``
  field (``1 + factor`` or 1) instead;
* ``examples.csv``: per example its index (position in ``--data``), source, learning time,
  the recordings before it, cluster, whether it was selected, its count, and its recorded losses;
* ``report.md`` and ``selection.png``: the cluster trajectories, the learning times of the
  selected examples against the rest, the share selected per source, and the *selection check*
  (:func:`sims.selection.selection_check`: do the selected examples learn late?);
* ``upsample.json``: the config, provenance (:func:`sims.runtime.io.provenance`), the check's
  numbers and the sha256 of every file above (``mixture.jsonl`` and ``examples.csv`` stay plain
  files that any reader takes, so their provenance lives here and in ``report.md``);
* ``proxy/trajectories.nc``: the trajectories (NetCDF with provenance), and the proxy's
  resume checkpoints while it trains (a rerun resumes; a finished proxy is reused).

The proxy (``--proxy``) is a local Hugging Face folder, a ``.gguf`` file or a named model (the
``models`` extra; :mod:`llm_validation.models.registry`), or ``scratch`` (``scratch:128x4``:
width x depth): a small Llama built from a config with a BPE tokenizer trained on ``--data``,
randomly initialized and trained on the data (it gets a ChatML template for ``messages``).

**Learning time** is eq. 11's ``t_i``: the step at which an example's loss makes half of its
recorded drop, interpolated between recordings (:func:`sims.selection.loss_learning_times`).
The losses are recorded before training (step 0) and at ``--checkpoints - 1`` log-spaced steps
(:func:`sims.selection.log_spaced_steps`), so recordings are dense where losses move fast; the
report states how many recordings come before the median example's half-drop (3 or more: the
median learning time is measured, not extrapolated from one segment).

The selection is the pipeline's (:func:`llm_validation.select.clustering.select_examples`):
k-means with k = 2 on the trajectories inside each source, the higher-loss cluster selected,
sources smaller than the mean source size selected whole (the authors' rule;
``--small-sources none`` clusters every source).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from llm_validation.data.formats import FORMATS, DataFields, UserData

HELP = ("the paper's upsampling on your own data: a proxy's loss trajectories -> mixture.jsonl "
        "(late-learned examples repeated), examples.csv, report.md")  # fmt: skip

__all__ = [
    "HELP",
    "SCRATCH",
    "UpsampleConfig",
    "UpsamplePlan",
    "add_arguments",
    "analyse",
    "estimate_seconds",
    "plan_upsample",
    "recording_steps",
    "run",
    "run_upsample",
]

#: ``--proxy`` value for a from-scratch proxy (``scratch:WIDTHxDEPTH`` sets its size).
SCRATCH = "scratch"
#: Width x depth of ``--proxy scratch``.
SCRATCH_SIZE = (64, 2)
#: ChatML, the template a from-scratch proxy's tokenizer gets (for ``messages`` data).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Achieved bf16 rate assumed for a GPU estimate when no GPU is here to time (FLOP/s; an H100
#: reaches ~990 TFLOP/s dense peak; small models with short sequences reach a few percent).
ASSUMED_GPU_FLOPS = 4e13
#: Examples timed for the estimate (one forward pass each).
_TIMED = 64


@dataclasses.dataclass(frozen=True)
class UpsampleConfig:
    """One ``upsample`` run (every flag of the command).

    Attributes:
        data: the training data (file or ``datasets`` folder).
        proxy: the proxy spec, or ``scratch`` / ``scratch:WxD``.
        format: ``auto`` or one of :data:`~llm_validation.data.formats.FORMATS`.
        fields: the field names.
        source_required: the source field was named on the command line (must exist).
        split: split of a ``DatasetDict`` folder.
        max_examples: use only the first N records.
        factor: extra copies of each selected example (>= 1).
        weights: write a weight field instead of repeating records.
        weight_field: its name.
        checkpoints: loss recordings, step 0 included (>= 3).
        first_step: the first recording after step 0 (default: ``stop / 100``, at least 1).
        epoch_fraction: the proxy trains this fraction of an epoch (1/3 in the paper).
        schedule_epochs: its learning-rate schedule is that of this many epochs, cut.
        batch_size: proxy batch size.
        lr: proxy peak learning rate (default: 2e-5 for a pretrained proxy, 3e-3 from scratch).
        max_length: tokens per example (longer ones are cut).
        seed: proxy training, scratch initialization, k-means.
        features: ``trajectory``, ``last`` or ``relative`` (k-means features).
        per_source: cluster inside each source (when the data has sources).
        small_sources: ``below_mean`` (selected whole) or ``none``.
        vocab_size: BPE vocabulary of a from-scratch proxy.
    """

    data: str
    proxy: str
    format: str = "auto"
    fields: DataFields = DataFields()
    source_required: bool = False
    split: str = "train"
    max_examples: int | None = None
    factor: int = 1
    weights: bool = False
    weight_field: str = "weight"
    checkpoints: int = 5
    first_step: int | None = None
    epoch_fraction: float = 1 / 3
    schedule_epochs: float = 3.0
    batch_size: int = 32
    lr: float | None = None
    max_length: int = 512
    seed: int = 0
    features: str = "trajectory"
    per_source: bool = True
    small_sources: str = "below_mean"
    vocab_size: int = 512

    def __post_init__(self):
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 1:
            raise ValueError(f"`--factor` (the mixture factor: extra copies of each selected "
                             f"example) must be an integer >= 1; got {self.factor!r}.")  # fmt: skip
        if not isinstance(self.checkpoints, int) or self.checkpoints < 3:
            raise ValueError(f"`--checkpoints` must be an integer >= 3 (step 0 and two more, for "
                             f"a trajectory); got {self.checkpoints!r}.")  # fmt: skip
        if self.format != "auto" and self.format not in FORMATS:
            raise ValueError(f"`--format` must be auto or one of {FORMATS}; got {self.format!r}.")
        if not 0 < self.epoch_fraction <= self.schedule_epochs:
            raise ValueError(f"`--epoch-fraction` must be in (0, --schedule-epochs]; got "
                             f"{self.epoch_fraction}.")  # fmt: skip
        scratch_size(self.proxy)  # a malformed scratch:WxD

    @property
    def scratch(self) -> bool:
        """Whether the proxy is built from scratch."""
        return self.proxy == SCRATCH or self.proxy.startswith(SCRATCH + ":")

    @property
    def proxy_lr(self) -> float:
        """The proxy's learning rate."""
        return self.lr if self.lr is not None else (3e-3 if self.scratch else 2e-5)


def scratch_size(spec: str) -> tuple[int, int] | None:
    """``(width, depth)`` of a ``scratch[:WxD]`` spec, else ``None``.

    Examples:
        >>> scratch_size("scratch"), scratch_size("scratch:128x4"), scratch_size("model/")
        ((64, 2), (128, 4), None)
    """
    if spec == SCRATCH:
        return SCRATCH_SIZE
    if not spec.startswith(SCRATCH + ":"):
        return None
    w, _, d = spec[len(SCRATCH) + 1 :].partition("x")
    if not (w.isdigit() and d.isdigit() and int(w) >= 8 and int(w) % 4 == 0 and int(d) >= 1):
        raise ValueError(f"`--proxy` {spec!r}: write scratch:WIDTHxDEPTH with WIDTH a multiple "
                         "of 4 (>= 8) and DEPTH >= 1, e.g. scratch:128x4.")  # fmt: skip
    return int(w), int(d)


# ----------------------------------------------------------------------------- plan


def recording_steps(n_examples: int, cfg: UpsampleConfig) -> tuple[int, np.ndarray]:
    """``(stop, steps)``: the proxy's last step and its ``cfg.checkpoints`` recording steps.

    Step 0 (before training), then log-spaced from ``cfg.first_step`` (default ``stop / 100``,
    at least 1) to ``stop`` (:func:`sims.selection.log_spaced_steps`).

    Raises:
        ValueError: when the proxy trains fewer steps than recordings need.
    """
    from llm_validation.train.trainer import schedule
    from sims.selection import log_spaced_steps

    sch = schedule(n_examples, cfg.batch_size, cfg.schedule_epochs)
    stop = max(1, round(cfg.epoch_fraction * sch.steps_per_epoch))
    if stop < cfg.checkpoints - 1:
        raise ValueError(
            f"the proxy trains {stop} steps ({cfg.epoch_fraction:.3g} epoch of {n_examples} "
            f"examples at batch {cfg.batch_size}), fewer than the {cfg.checkpoints - 1} "
            "recordings after step 0: lower --batch-size or --checkpoints, or raise "
            "--epoch-fraction."
        )
    first = cfg.first_step if cfg.first_step is not None else max(1, round(stop / 100))
    first = min(first, stop - cfg.checkpoints + 2)
    return stop, log_spaced_steps(stop, cfg.checkpoints, first=max(1, first))


@dataclasses.dataclass(frozen=True)
class UpsamplePlan:
    """What a run does and costs (``--dry-run`` prints it).

    Attributes:
        n_examples, n_sources: data size and groups.
        stop_step, steps: the proxy's last step and its recording steps.
        n_params: proxy parameters.
        mean_tokens: mean tokens per example (measured on a sample, cut at ``max_length``).
        forward_tokens, train_tokens: tokens of the loss recordings and of the training.
        seconds: estimated wall time; ``how`` says where the rate came from.
        device: the device the estimate is for.
    """

    n_examples: int
    n_sources: int
    stop_step: int
    steps: tuple[int, ...]
    n_params: int
    mean_tokens: float
    forward_tokens: float
    train_tokens: float
    seconds: float
    how: str
    device: str


def estimate_seconds(
    *,
    n_params: float,
    forward_tokens: float,
    train_tokens: float,
    seconds_per_forward_token: float | None = None,
    flops_per_second: float | None = None,
) -> float:
    """Wall time of the proxy run from a timed forward rate, or from FLOPs at a given rate.

    A trained token costs three forward tokens (forward and backward); from FLOPs, a forward
    token costs ``2 * n_params`` (the rule of thumb of Kaplan et al. 2020, attention left out).

    Examples:
        >>> estimate_seconds(n_params=1e6, forward_tokens=100, train_tokens=10,
        ...                  seconds_per_forward_token=0.01)
        1.3
        >>> estimate_seconds(n_params=135e6, forward_tokens=1e9, train_tokens=0,
        ...                  flops_per_second=2.7e13)
        10000.0
    """
    work = forward_tokens + 3 * train_tokens
    if seconds_per_forward_token is not None:
        return work * seconds_per_forward_token
    if flops_per_second is None:
        raise ValueError("give `seconds_per_forward_token` or `flops_per_second`.")
    return 2 * n_params * work / flops_per_second


def _tokenizer_for_plan(cfg: UpsampleConfig, data: UserData):
    from llm_validation.models.registry import load_tokenizer

    if cfg.scratch:
        return _scratch_tokenizer(cfg, data, sample=500)
    return load_tokenizer(cfg.proxy)


def plan_upsample(cfg: UpsampleConfig, data: UserData, *, device: str = "auto") -> UpsamplePlan:
    """The plan and its time estimate (loads the proxy's tokenizer; times a few forward passes).

    On ``device`` (``cpu``/``cuda``; ``auto``: CUDA when here) the rate is timed on
    :data:`_TIMED` examples with the proxy itself; for ``cuda`` on a machine without a GPU it is
    assumed (:data:`ASSUMED_GPU_FLOPS`) and the plan says so.
    """
    import torch

    from llm_validation.data.formats import render_examples
    from llm_validation.data.records import tokenize_examples

    here = "cuda" if torch.cuda.is_available() else "cpu"
    device = here if device == "auto" else device
    stop, steps = recording_steps(len(data), cfg)
    tok = _tokenizer_for_plan(cfg, data)
    rng = np.random.default_rng(cfg.seed)
    sample_idx = np.sort(rng.choice(len(data), size=min(500, len(data)), replace=False))
    sub = dataclasses.replace(data, records=[data.records[i] for i in sample_idx],
                              lines=[data.lines[i] for i in sample_idx],
                              sources=[data.sources[i] for i in sample_idx])  # fmt: skip
    recs = tokenize_examples(render_examples(sub, tok), tok, max_length=cfg.max_length)
    mean_tokens = float(np.mean([len(r["input_ids"]) for r in recs]))
    forward = mean_tokens * len(data) * len(steps)
    trained = mean_tokens * min(len(data), stop * cfg.batch_size)
    model = _plan_model(cfg, tok)
    n_params = sum(p.numel() for p in model.parameters())
    if device == here:
        from llm_validation.train.trainer import per_example_losses

        model.to(device)
        timed = recs[:_TIMED]
        kw = {"pad_id": tok.pad_token_id, "batch_tokens": _loss_batch_tokens(device)}
        per_example_losses(model, timed[:8], **kw)  # warm-up
        t0 = time.perf_counter()
        per_example_losses(model, timed, **kw)
        per_token = (time.perf_counter() - t0) / sum(len(r["input_ids"]) for r in timed)
        seconds = estimate_seconds(n_params=n_params, forward_tokens=forward, train_tokens=trained,
                                   seconds_per_forward_token=per_token)  # fmt: skip
        how = f"from a timed forward pass of {len(timed)} examples on this machine's {device}"
    elif device == "cuda":
        seconds = estimate_seconds(n_params=n_params, forward_tokens=forward, train_tokens=trained,
                                   flops_per_second=ASSUMED_GPU_FLOPS)  # fmt: skip
        how = (f"no GPU here: at an assumed {ASSUMED_GPU_FLOPS / 1e12:.0f} TFLOP/s achieved "
               "(2 x parameters FLOPs per forward token, 3x that per trained token), not "
               "measured")  # fmt: skip
    else:
        raise ValueError(f"`--device` {device!r}: this machine has {here}; give cpu, cuda or "
                         "auto.")  # fmt: skip
    return UpsamplePlan(len(data), len(set(data.sources)), stop, tuple(int(s) for s in steps),
                        int(n_params), mean_tokens, forward, trained, seconds, how,
                        device)  # fmt: skip


def _plan_model(cfg: UpsampleConfig, tok):
    """The proxy as the run loads it (scratch: a random model of its size; no weights saved)."""
    import torch

    if cfg.scratch:
        from transformers import AutoModelForCausalLM

        from llm_validation.models.tiny import tiny_config

        torch.manual_seed(cfg.seed)
        return AutoModelForCausalLM.from_config(tiny_config("llama", len(tok), _tiny_size(cfg),
                                                            tokenizer=tok))  # fmt: skip
    from llm_validation.models.registry import load_model

    model, _ = load_model(cfg.proxy, dtype="float32", device="cpu")
    return model


def _loss_batch_tokens(device: str) -> int:
    """Loss-recording batch: small on a CPU (cache-friendly), large on a GPU."""
    return 16384 if str(device).startswith("cuda") else 4096


def format_plan(cfg: UpsampleConfig, data: UserData, plan: UpsamplePlan, out: Path) -> str:
    """The plan as ``--dry-run`` prints it."""
    from llm_validation.models.registry import describe_model
    from sims.runtime.cli import format_seconds

    if cfg.scratch:
        w, d = _tiny_size(cfg).hidden, _tiny_size(cfg).layers
        proxy = (f"from scratch: Llama {w} wide x {d} blocks, BPE vocabulary {cfg.vocab_size} "
                 f"trained on --data, random init (seed {cfg.seed})")  # fmt: skip
    else:
        proxy = f"{cfg.proxy} [{describe_model(cfg.proxy)}]"
    groups = (f"{plan.n_sources} sources in {cfg.fields.source!r} (per-source clustering)"
              if data.has_sources and cfg.per_source else "one group (global clustering)")
    rows = [
        f"upsample plan (nothing is written with --dry-run): results in {out}",
        f"  data: {data.path} ({data.container}, {data.format} layout): {plan.n_examples:,} "
        f"examples, {groups}",
        f"  proxy: {proxy}; {plan.n_params / 1e6:.2f}M parameters",
        f"  training: {plan.stop_step:,} steps of batch {cfg.batch_size} ({cfg.epoch_fraction:.3g} "
        f"epoch; schedule of {cfg.schedule_epochs:g} epochs), lr {cfg.proxy_lr:g}",
        f"  checkpoints: {len(plan.steps)} loss recordings at steps {list(plan.steps)} (step 0 = "
        f"before training, then log-spaced) = {plan.n_examples * len(plan.steps):,} example "
        "forward passes",
        f"  tokens: {plan.mean_tokens:.0f} per example (sampled, max {cfg.max_length}); "
        f"{plan.forward_tokens / 1e6:,.1f}M recorded, {plan.train_tokens / 1e6:,.1f}M trained",
        f"  estimated time: {format_seconds(plan.seconds)} on {plan.device} ({plan.how})",
        f"  selection: k-means k=2 on {cfg.features}, the later-learned cluster repeated "
        f"{'as a weight ' + repr(cfg.weight_field) if cfg.weights else f'x{1 + cfg.factor}'}",
        f"  outputs: {out / 'mixture.jsonl'}, examples.csv, report.md, selection.png, "
        "upsample.json, proxy/trajectories.nc",
    ]
    return "\n".join(rows)


# ----------------------------------------------------------------------------- the run


def _tiny_size(cfg: UpsampleConfig):
    from llm_validation.models.tiny import TinySize

    w, d = scratch_size(cfg.proxy) or SCRATCH_SIZE
    heads = 4 if w % 4 == 0 else 1
    return TinySize(hidden=w, layers=d, heads=heads, kv_heads=2 if heads % 2 == 0 else 1,
                    max_positions=max(1024, cfg.max_length))  # fmt: skip


def _plain_texts(data: UserData) -> list[str]:
    """The texts a from-scratch tokenizer is trained on (each record as the proxy reads it)."""
    from llm_validation.data.formats import ALPACA_WITH_INPUT
    from llm_validation.data.records import format_prompt

    f = data.fields
    out = []
    for rec in data.records:
        if data.format == "instruction":
            extra = rec.get(f.input)
            head = (ALPACA_WITH_INPUT.format(instruction=rec[f.instruction], input=extra)
                    if extra else format_prompt(rec[f.instruction]))  # fmt: skip
            out.append(head + rec[f.output])
        elif data.format == "prompt":
            out.append(rec[f.prompt] + rec[f.completion])
        else:
            out.append("".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n"
                               for m in rec[f.messages]))  # fmt: skip
    return out


def _scratch_tokenizer(cfg: UpsampleConfig, data: UserData, sample: int = 20000):
    from llm_validation.models.tiny import train_tokenizer

    texts = _plain_texts(data)
    if len(texts) > sample:
        idx = np.random.default_rng(cfg.seed).choice(len(texts), size=sample, replace=False)
        texts = [texts[i] for i in np.sort(idx)]
    tok = train_tokenizer(texts, vocab_size=cfg.vocab_size)
    tok.chat_template = CHATML
    return tok


def _digest(path: Path) -> str:
    """sha256 (16 hex digits) of a file, or of a folder's files (names and contents)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for p in files:
        if path.is_dir():
            h.update(str(p.relative_to(path)).encode())
        with p.open("rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()[:16]


def _say(msg: str, quiet: bool) -> None:
    if not quiet:
        print(msg, file=sys.stderr, flush=True)


def _build_scratch(cfg: UpsampleConfig, data: UserData, out: Path, data_sha: str,
                   quiet: bool) -> Path:  # fmt: skip
    """The from-scratch proxy's HF folder (built once, reused by a rerun)."""
    from llm_validation.models.tiny import make_tiny_model
    from llm_validation.runs import Stage

    key = {"data_sha256": data_sha, "size": dataclasses.asdict(_tiny_size(cfg)),
           "vocab_size": cfg.vocab_size, "seed": cfg.seed, "format": data.format}  # fmt: skip
    stage = Stage(out / "proxy_model", "proxy_model", key)
    folder = stage.folder / "model"
    if stage.check() == "done" and (folder / "config.json").is_file():
        return folder
    stage.start()
    _say("upsample: training the from-scratch proxy's tokenizer on --data", quiet)
    tok = _scratch_tokenizer(cfg, data)
    make_tiny_model(folder, "llama", tok, _tiny_size(cfg), seed=cfg.seed)
    stage.finish({"vocab": len(tok)})
    return folder


def run_upsample(cfg: UpsampleConfig, out: str | os.PathLike, *, quiet: bool = False,
                 data: UserData | None = None) -> dict:  # fmt: skip
    """Proxy trajectories, selection and outputs in ``out`` (resumable); returns the summary.

    Args:
        cfg: the run.
        out: the results folder.
        quiet: no progress bars or messages.
        data: ``cfg.data`` already read (:func:`read_data`).

    Returns:
        The ``upsample.json`` payload (paths, counts, the selection check).
    """
    from llm_validation.config import ProxyConfig
    from llm_validation.data.formats import render_examples
    from llm_validation.models.registry import load_tokenizer, resolve_model
    from llm_validation.runs import Stage
    from llm_validation.train.proxy import record_trajectories

    t0, c0 = time.perf_counter(), time.process_time()
    out = Path(out)
    data = data if data is not None else read_data(cfg)
    data_sha = _digest(data.path)
    spec = str(_build_scratch(cfg, data, out, data_sha, quiet) if cfg.scratch
               else resolve_model(cfg.proxy, progress=not quiet))  # fmt: skip
    tok = load_tokenizer(spec)
    examples = render_examples(data, tok)
    stop, steps = recording_steps(len(examples), cfg)
    pcfg = ProxyConfig(
        model=spec, epoch_fraction=cfg.epoch_fraction, n_checkpoints=cfg.checkpoints,
        schedule_epochs=cfg.schedule_epochs, lr=cfg.proxy_lr, batch_size=cfg.batch_size,
        per_device_batch_size=cfg.batch_size, dtype="auto", seed=cfg.seed,
        loss_batch_tokens=_loss_batch_tokens("cuda" if _cuda() else "cpu"),
    )  # fmt: skip
    key = {"data_sha256": data_sha, "format": data.format,
           "fields": dataclasses.asdict(data.fields), "max_examples": cfg.max_examples,
           "proxy": cfg.proxy if cfg.scratch else str(spec), "proxy_config":
           dataclasses.asdict(pcfg) | {"model": None}, "steps": steps.tolist(),
           "max_length": cfg.max_length}  # fmt: skip
    stage = Stage(out / "proxy", "proxy", key)
    _say(f"upsample: proxy trains {stop} steps; losses of {len(examples):,} examples at steps "
         f"{steps.tolist()}", quiet)  # fmt: skip
    traj = record_trajectories(examples, pcfg, stage.folder, max_length=cfg.max_length,
                               progress=not quiet, on_start=stage.start,
                               record_steps=steps)  # fmt: skip
    if stage.check() != "done":
        stage.finish({"examples": len(examples), "steps": steps.tolist()})
    result = analyse(traj, cfg, has_sources=data.has_sources)
    summary = write_outputs(cfg, data, traj, result, out, data_sha=data_sha)
    summary["seconds"] = time.perf_counter() - t0
    summary["cpu_seconds"] = time.process_time() - c0
    return summary


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def read_data(cfg: UpsampleConfig) -> UserData:
    """``cfg.data`` read and checked (:func:`llm_validation.data.formats.read_user_data`)."""
    from llm_validation.data.formats import read_user_data

    return read_user_data(cfg.data, fields=cfg.fields, fmt=cfg.format, split=cfg.split,
                          source_required=cfg.source_required,
                          max_examples=cfg.max_examples)  # fmt: skip


# ----------------------------------------------------------------------------- analysis


def analyse(traj, cfg: UpsampleConfig, *, has_sources: bool) -> dict:
    """Selection, learning times and the selection check from the trajectories.

    Returns:
        ``selection`` (the :func:`~llm_validation.select.clustering.select_examples` Dataset),
        ``times`` (eq. 11's ``t_i``, ``nan`` = not learned), ``before`` (recordings before each),
        ``counts`` (per example, ``1 + factor`` or 1), ``check`` (a
        :class:`sims.selection.SelectionCheck`, ``None`` when every or no example is selected),
        ``median_time`` (over all examples, unlearned ones last) and ``before_median``.
    """
    from llm_validation.config import SelectionConfig
    from llm_validation.select.clustering import select_examples
    from sims.selection import (
        loss_learning_times,
        recordings_before,
        selection_check,
        usage_weights,
    )

    per_source = cfg.per_source and has_sources
    scfg = SelectionConfig(features=cfg.features, per_source=per_source,
                           small_sources=cfg.small_sources if per_source else "none",
                           upsample_factor=cfg.factor, seed=cfg.seed)  # fmt: skip
    sel = select_examples(traj, scfg)
    steps = traj["step"].values
    losses = traj["loss"].values
    times = loss_learning_times(steps, losses)
    hard = sel["hard"].values.astype(bool)
    sources = traj["source"].values.astype(str)
    check = None
    if hard.any() and not hard.all():
        check = selection_check(times, hard, sources if per_source else None)
    ranked = np.where(np.isfinite(times), times, np.inf)
    median = float(np.median(ranked))
    before_median = int(recordings_before(steps, [median])[0]) if math.isfinite(median) else -1
    return {
        "selection": sel,
        "times": times,
        "before": recordings_before(steps, times),
        "counts": usage_weights(len(hard), hard, cfg.factor),
        "check": check,
        "median_time": median,
        "before_median": before_median,
    }


# ----------------------------------------------------------------------------- outputs


def _sha(path: Path) -> str:
    return _digest(path)


def write_outputs(cfg: UpsampleConfig, data: UserData, traj, result: dict, out: Path, *,
                  data_sha: str) -> dict:  # fmt: skip
    """``mixture.jsonl``, ``examples.csv``, ``selection.png``, ``report.md``, ``upsample.json``."""
    from llm_validation.data.formats import write_mixture
    from sims.runtime.io import atomic_path, provenance, write_json

    sel = result["selection"]
    hard = sel["hard"].values.astype(bool)
    counts = result["counts"]
    steps = traj["step"].values
    meta = provenance(_config_dict(cfg), seed=cfg.seed,
                      device="cuda" if _cuda() else None,
                      extra={"data_sha256": data_sha})  # fmt: skip
    paths = {"mixture": out / "mixture.jsonl", "examples": out / "examples.csv",
             "figure": out / "selection.png", "report": out / "report.md",
             "trajectories": out / "proxy" / "trajectories.nc"}  # fmt: skip
    write_mixture(paths["mixture"], data, counts,
                  weight_field=cfg.weight_field if cfg.weights else None)  # fmt: skip
    with atomic_path(paths["examples"]) as tmp, tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["index", "source", "learning_time", "recordings_before", "cluster",
                    "selected", "count", *[f"loss_step_{s}" for s in steps]])  # fmt: skip
        loss = traj["loss"].values
        for i in range(len(hard)):
            t = result["times"][i]
            w.writerow([int(traj["example"].values[i]), data.sources[i],
                        "" if not np.isfinite(t) else repr(float(t)), int(result["before"][i]),
                        int(sel["cluster"].values[i]), int(hard[i]), int(counts[i]),
                        *[repr(float(x)) for x in loss[i]]])  # fmt: skip
    plot_check(traj, result, paths["figure"], meta=meta)
    check = result["check"]
    n_rows = int(counts.sum()) if not cfg.weights else len(data)
    summary = {
        "data": str(data.path), "container": data.container, "format": data.format,
        "n_examples": len(data), "n_selected": int(hard.sum()), "factor": cfg.factor,
        "mixture_rows": n_rows, "steps": steps.tolist(),
        "median_learning_time": result["median_time"],
        "recordings_before_median": result["before_median"],
        "n_not_learned": int((~np.isfinite(result["times"])).sum()),
        "check": check.to_dict() if check is not None else None,
        "per_source_rules": sel.attrs["per_source"],
    }
    with atomic_path(paths["report"]) as tmp:
        tmp.write_text(report_markdown(cfg, data, summary, meta), encoding="utf-8")
    summary["files"] = {k: {"path": str(p.relative_to(out)), "sha256": _sha(p)}
                        for k, p in paths.items()}  # fmt: skip
    write_json(out / "upsample.json", summary, meta=meta)
    return summary


def _config_dict(cfg: UpsampleConfig) -> dict:
    d = dataclasses.asdict(cfg)
    d["proxy_lr"] = cfg.proxy_lr
    return d


def _fmt(x, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a" if x is None or math.isnan(x) else "not learned"
    return f"{x:,.{digits}f}"


def report_markdown(cfg: UpsampleConfig, data: UserData, s: dict, meta: dict) -> str:
    """``report.md``: what was done, the selection check, per-source shares, how to train."""
    c = s["check"]
    lines = [
        "# Upsampled mixture",
        "",
        f"Data: `{data.path}` ({data.container}, {data.format} layout), {s['n_examples']:,} "
        f"examples. Proxy: `{cfg.proxy}`. Losses recorded at steps {s['steps']} (step 0 = "
        "before training).",
        "",
        f"Selected (repeated in the mixture): **{s['n_selected']:,}** examples "
        f"({100 * s['n_selected'] / s['n_examples']:.1f} %); `mixture.jsonl` has "
        f"{s['mixture_rows']:,} rows"
        + (f" = {s['n_examples']:,} + {cfg.factor} x {s['n_selected']:,}." if not cfg.weights
           else f" with a `{cfg.weight_field}` field (1 + {cfg.factor} for selected records)."),
        "",
        "## The selection check: are the selected examples learned late?",
        "",
        "Learning time = the step at which an example's loss makes half of its recorded drop "
        "(eq. 11's t_i, interpolated between recordings; an example whose loss never drops is "
        "'not learned' and counts as learned last).",
        "",
        f"- median learning time over all examples: {_fmt(s['median_learning_time'])} steps; "
        f"recordings before it: **{s['recordings_before_median']}** "
        + ("(>= 3: measured, not extrapolated)" if s["recordings_before_median"] >= 3 else
           "(< 3: the median is interpolated from too few recordings; lower --first-step or "
           "raise --checkpoints)"),
        f"- not learned within the recorded budget: {s['n_not_learned']:,} examples",
    ]  # fmt: skip
    if c is not None:
        lines += [
            f"- median learning time, selected: {_fmt(c['median_time_selected'])}; rest: "
            f"{_fmt(c['median_time_rest'])}",
            f"- AUC (a selected example is learned later than a random other one): "
            f"**{c['auc']:.3f}** (0.5 = blind, 1 = exactly the late learners); Mann-Whitney p = "
            f"{c['mannwhitney_p']:.2g}",
            f"- Spearman, across sources, share selected vs median learning time: "
            f"{_fmt(c['spearman_share_vs_time'], 3)} (p = {_fmt(c['spearman_p'], 3)})",
        ]
    else:
        lines.append("- every or no example was selected: nothing to compare.")
    lines += ["", "![selection check](selection.png)", "", "## Per source", "",
              "| source | examples | rule | selected | share | median learning time |",
              "|---|---:|---|---:|---:|---:|"]  # fmt: skip
    per = (c or {}).get("per_source") or {}
    for name, info in s["per_source_rules"].items():
        med = per.get(name, {}).get("median_time")
        lines.append(f"| {name} | {info['size']:,} | {info['rule']} | {info['n_hard']:,} | "
                     f"{100 * info['hard_fraction']:.1f} % | {_fmt(med)} |")  # fmt: skip
    lines += [
        "",
        "## Train on the mixture",
        "",
        "```python",
        "from datasets import load_dataset",
        "from trl import SFTTrainer",
        "",
        f'train = load_dataset("json", data_files="{Path("mixture.jsonl")}", split="train")',
        'trainer = SFTTrainer(model="YOUR-MODEL", train_dataset=train)  # then trainer.train()',
        "```",
        "",
        "TRL reads the prompt/completion and messages layouts as they are; an instruction/output "
        "file needs a formatting function (or a rename to prompt/completion). axolotl "
        "(`type: alpaca`) and LLaMA-Factory read the Alpaca layout directly.",
        "",
        "## Provenance",
        "",
        "```json",
        json.dumps({k: meta[k] for k in ("created", "git_commit", "git_dirty", "device", "host",
                                          "packages", "seed", "config")
                    if k in meta}, indent=1, default=str),
        "```",
        "",
    ]  # fmt: skip
    return "\n".join(lines)


def plot_check(traj, result: dict, path: Path, *, meta: dict | None = None) -> Path:
    """The selection check in three panels: trajectories, learning times, shares per source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from llm_validation.select.clustering import save_plot

    sel = result["selection"]
    hard = sel["hard"].values.astype(bool)
    steps = traj["step"].values.astype(float)
    loss = traj["loss"].values
    times = result["times"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    ax = axes[0]
    x = np.maximum(steps, 0.5)  # step 0 drawn at 0.5 on the log axis
    for mask, color, label in ((~hard, "tab:blue", "rest"), (hard, "tab:red", "selected")):
        if mask.sum() == 0:
            continue
        q = np.nanpercentile(loss[mask], [25, 50, 75], axis=0)
        ax.plot(x, q[1], "o-", color=color, label=f"{label} ({int(mask.sum()):,})")
        ax.fill_between(x, q[0], q[2], color=color, alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("proxy step (step 0 at 0.5)")
    ax.set_ylabel("loss (median, quartiles)")
    ax.set_title("cluster trajectories", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[1]
    finite = np.isfinite(times)
    lo = max(0.5, float(np.nanmin(times[finite]))) if finite.any() else 0.5
    hi = float(steps[-1])
    bins = np.geomspace(lo, max(hi, lo * 1.01), 30)
    for mask, color, label in ((~hard, "tab:blue", "rest"), (hard, "tab:red", "selected")):
        t = times[mask & finite]
        if t.size:
            ax.hist(np.maximum(t, lo), bins=bins, color=color, alpha=0.5, density=True,
                    label=f"{label}: median {np.median(t):,.1f}")  # fmt: skip
    for s_ in steps[1:]:
        ax.axvline(s_, color="0.7", lw=0.6, ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("learning time (half-drop step; dotted: recordings)")
    ax.set_ylabel("density")
    chk = result["check"]
    ax.set_title("learning times" + (f" (AUC {chk.auc:.2f})" if chk is not None else ""),
                 fontsize=9)  # fmt: skip
    ax.legend(fontsize=7)
    ax = axes[2]
    src = traj["source"].values.astype(str)
    names = list(dict.fromkeys(src))
    ranked = np.where(finite, times, np.inf)
    share = [hard[src == n].mean() for n in names]
    med = [np.median(ranked[src == n]) for n in names]
    med_plot = [m if np.isfinite(m) else hi for m in med]
    ax.scatter(med_plot, share, s=[12 + 60 * (src == n).mean() ** 0.5 for n in names])
    for n, m, sh in zip(names, med_plot, share, strict=True):
        ax.annotate(Path(n).stem[:18], (m, sh), fontsize=6)
    ax.set_xlabel("median learning time of the source")
    ax.set_ylabel("share selected")
    rho = chk.spearman_share_vs_time if chk is not None else float("nan")
    ax.set_title(f"shares per source (Spearman {rho:.2f})" if np.isfinite(rho)
                 else "shares per source", fontsize=9)  # fmt: skip
    if meta:
        fig.text(0.01, 0.005, f"sbtheory {meta.get('git_commit', '')[:10]}"
                 f"{' (dirty)' if meta.get('git_dirty') else ''}, {meta.get('created', '')}",
                 fontsize=6, color="0.5")  # fmt: skip
    fig.tight_layout()
    return save_plot(fig, path)


# ----------------------------------------------------------------------------- CLI


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``upsample``."""
    from sims.runtime.cli import positive_float, positive_int, seed

    g = p.add_argument_group("inputs")
    g.add_argument("--data", required=True, default=None,
                   help="training data: a .json (array) or .jsonl file, or a "
                        "datasets.save_to_disk folder")  # fmt: skip
    g.add_argument("--proxy", required=True, default=None,
                   help="proxy model: a local HF folder, a .gguf file, a named model (see "
                        "`models`; the `models` extra), or 'scratch' / 'scratch:WIDTHxDEPTH' "
                        "(a small Llama trained from scratch on --data)")  # fmt: skip
    g.add_argument("--out", required=True, default=None,
                   help="results folder (a rerun resumes there)")  # fmt: skip
    g.add_argument("--format", choices=("auto", *FORMATS), default="auto",
                   help="layout of the records (auto: from the first record's fields)")
    g.add_argument("--split", default="train", help="split of a DatasetDict folder")
    g.add_argument("--max-examples", type=positive_int, default=None,
                   help="use only the first N records")
    f = p.add_argument_group("field names")
    for name, default, what in (("instruction", "instruction", "instruction layout"),
                                ("input", "input", "optional Alpaca input"),
                                ("output", "output", "instruction layout's response"),
                                ("prompt", "prompt", "prompt/completion layout"),
                                ("completion", "completion", "prompt/completion layout's "
                                 "response"),
                                ("messages", "messages", "chat layout: [{role, content}], "
                                 "rendered with the proxy's chat template")):  # fmt: skip
        f.add_argument(f"--{name}-field", default=default, help=what)
    f.add_argument("--source-field", default=None,
                   help="source/group field for per-source clustering (default: 'source' when "
                        "the records have it; 'none': one group)")  # fmt: skip
    s = p.add_argument_group("selection and mixture")
    s.add_argument("--factor", type=positive_int, default=1,
                   help="extra copies of each selected example in the mixture (the mixture "
                        "factor; 1: selected examples appear twice)")  # fmt: skip
    s.add_argument("--weights", action="store_true",
                   help="write each record once with a weight field (1 + factor when "
                        "selected) instead of repeating it")  # fmt: skip
    s.add_argument("--weight-field", default="weight", help="name of that field")
    s.add_argument("--features", choices=("trajectory", "last", "relative"),
                   default="trajectory", help="k-means features of a loss trajectory")
    s.add_argument("--small-sources", choices=("below_mean", "none"), default="below_mean",
                   help="below_mean: a source smaller than the mean source size is selected "
                        "whole (the authors' rule); none: cluster every source")  # fmt: skip
    s.add_argument("--global", dest="per_source", action="store_false",
                   help="cluster all examples together, ignoring sources")
    t = p.add_argument_group("proxy training")
    t.add_argument("--checkpoints", type=positive_int, default=5,
                   help="loss recordings, step 0 (before training) included; >= 3")
    t.add_argument("--first-step", type=positive_int, default=None,
                   help="first recording after step 0 (default: 1/100 of the training steps); "
                        "later ones are log-spaced up to the last step")  # fmt: skip
    t.add_argument("--epoch-fraction", type=positive_float, default=1 / 3,
                   help="the proxy trains this fraction of an epoch (the paper: 1/3)")
    t.add_argument("--schedule-epochs", type=positive_float, default=3.0,
                   help="its learning-rate schedule is that of this many epochs, cut at "
                        "--epoch-fraction (as the authors' proxy)")  # fmt: skip
    t.add_argument("--batch-size", type=positive_int, default=32, help="proxy batch size")
    t.add_argument("--lr", type=positive_float, default=None,
                   help="proxy learning rate (default 2e-5, 3e-3 for a scratch proxy)")
    t.add_argument("--max-length", type=positive_int, default=512,
                   help="tokens per example (longer ones are cut)")
    t.add_argument("--vocab-size", type=positive_int, default=512,
                   help="BPE vocabulary of a scratch proxy")
    t.add_argument("--seed", type=seed, default=0, help="proxy, initialization and k-means seed")
    t.add_argument("--threads", type=positive_int, default=None,
                   help="torch CPU threads (default: 1 for a scratch proxy on a CPU, whose "
                        "small matrices run fastest on one thread; else torch's)")
    r = p.add_argument_group("running")
    r.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="the device --dry-run estimates the time for (a run uses CUDA when "
                        "present)")  # fmt: skip
    r.add_argument("--dry-run", action="store_true",
                   help="print the plan (examples, checkpoints, estimated time) and exit")
    r.add_argument("--quiet", action="store_true", help="no progress bars or messages")


def config_from_args(args: argparse.Namespace) -> UpsampleConfig:
    """The :class:`UpsampleConfig` of parsed flags."""
    source = args.source_field
    fields = DataFields(instruction=args.instruction_field, input=args.input_field,
                        output=args.output_field, prompt=args.prompt_field,
                        completion=args.completion_field, messages=args.messages_field,
                        source=None if source == "none" else (source or "source"))  # fmt: skip
    return UpsampleConfig(
        data=args.data, proxy=args.proxy, format=args.format, fields=fields,
        source_required=source not in (None, "none"), split=args.split,
        max_examples=args.max_examples, factor=args.factor, weights=args.weights,
        weight_field=args.weight_field, checkpoints=args.checkpoints,
        first_step=args.first_step, epoch_fraction=args.epoch_fraction,
        schedule_epochs=args.schedule_epochs, batch_size=args.batch_size, lr=args.lr,
        max_length=args.max_length, seed=args.seed, features=args.features,
        per_source=args.per_source, small_sources=args.small_sources,
        vocab_size=args.vocab_size,
    )  # fmt: skip


def check_inputs(cfg: UpsampleConfig, out: Path, *, dry_run: bool = False) -> UserData:
    """Every input check, before any work: data, proxy, step counts, ``--out``.

    Raises:
        ValueError: naming the flag, the value and the fix (the CLI prints one line, exit 2).
    """
    from llm_validation.models.registry import check_model_spec
    from sims.runtime.io import ensure_writable

    if not cfg.scratch:
        check_model_spec(cfg.proxy, key="--proxy")
    if not dry_run:
        ensure_writable(out, kind="dir", arg="--out")
    data = read_data(cfg)
    if data.format == "messages" and not cfg.scratch:
        from llm_validation.models.registry import load_tokenizer

        if not getattr(load_tokenizer(cfg.proxy), "chat_template", None):
            from llm_validation.data.formats import render_examples

            render_examples(data, None)  # raises the chat-template message
    if cfg.weights and any(cfg.weight_field in r for r in data.records):
        raise ValueError(f"the records already have a field {cfg.weight_field!r}; choose "
                         "another --weight-field.")  # fmt: skip
    if cfg.max_length < 8:
        raise ValueError(f"`--max-length` must be >= 8 tokens; got {cfg.max_length}.")
    recording_steps(len(data), cfg)
    return data


def run(args: argparse.Namespace) -> int:
    """Run ``upsample`` from parsed flags: check, plan or run, then say where to look."""
    from sims.runtime.extras import require

    require("llm", what="python -m llm_validation upsample")
    import torch

    from llm_validation.runs import leave_no_empty_folders
    from sims.runtime.cli import format_seconds

    cfg = config_from_args(args)
    threads = args.threads or (1 if cfg.scratch and not torch.cuda.is_available() else None)
    if threads:  # a scratch proxy's small matrices run fastest on one thread (threads spin)
        torch.set_num_threads(threads)
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise ValueError(f"`--out` {str(out)!r} is an existing file; give a folder.")
    data = check_inputs(cfg, out, dry_run=args.dry_run)
    if args.dry_run:
        plan = plan_upsample(cfg, data, device=args.device)
        print(format_plan(cfg, data, plan, out))
        return 0
    if not args.quiet:
        plan = plan_upsample(cfg, data)
        print(f"upsample: {len(data):,} examples x {len(plan.steps)} recordings with "
              f"{cfg.proxy}; about {format_seconds(plan.seconds)} ({plan.how}); progress on "
              "stderr; Ctrl-C stops it and a rerun resumes", file=sys.stderr, flush=True)
    with leave_no_empty_folders(out):
        summary = run_upsample(cfg, out, quiet=args.quiet, data=data)
    c = summary["check"]
    print(f"upsample finished in {format_seconds(summary['seconds'])} (CPU "
          f"{summary['cpu_seconds']:.0f} s): {summary['n_selected']:,} of "
          f"{summary['n_examples']:,} examples selected; mixture of {summary['mixture_rows']:,} "
          "rows")  # fmt: skip
    if c is not None:
        print(f"selection check: AUC {c['auc']:.3f} (selected learned later), median learning "
              f"time selected {_fmt(c['median_time_selected'])} vs rest "
              f"{_fmt(c['median_time_rest'])} steps, Spearman share vs time "
              f"{_fmt(c['spearman_share_vs_time'], 3)}; recordings before the median "
              f"half-drop: {summary['recordings_before_median']}")  # fmt: skip
    print("where to look:")
    for name in ("mixture.jsonl", "examples.csv", "report.md", "selection.png", "upsample.json"):
        print(f"  {out / name}")
    return 0
