"""Shared Trainer machinery of the proxy and the target fine-tuning (style rule 14).

One HF :class:`transformers.Trainer` builds every run; behaviour is added by callbacks, never by
a copied loop:

* :class:`LossRecorder` records each example's mean response-token loss at given optimizer steps
  (the proxy's loss trajectories, Section 5; also the fine-tuning trajectories used to measure
  learning times), optionally stops training after the last one, and asks the Trainer for a
  checkpoint at each of them so a killed run resumes there;
* :class:`ProgressPrinter` prints one line per logging step (for logs, beside tqdm).

The optimizer comes from :func:`make_optimizer`, the single place where ``sims.optim``'s
``build_optimizer`` (AdamW, Muon, the SAM family) plugs in; the Trainer class from
:func:`trainer_class` (``sims.optim.hf.SAMFamilyTrainer`` for two-pass optimizers, which
overrides only ``training_step``). Without ``sims.optim``, AdamW still works (torch's).

The pure function :func:`per_example_losses` computes the losses of any model on any tokenized
records; it runs in length-sorted, token-budgeted batches and makes exactly one forward pass per
example. Under ``accelerate launch`` each process takes its share of the examples.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ProgressCallback

from llm_validation.data.records import IGNORE_INDEX

__all__ = [
    "TokenDataset",
    "collate",
    "per_example_losses",
    "LossRecorder",
    "ProgressPrinter",
    "make_optimizer",
    "trainer_class",
    "training_arguments",
    "accumulation_steps",
    "world_size",
    "CheckpointKeeper",
    "epoch_checkpoints",
    "find_resume_checkpoint",
    "describe_resume",
    "train_resumable",
]

SAM_FAMILY = ("sam", "fsam", "lsam", "angle_sam", "psam", "pfsam")


class TokenDataset(torch.utils.data.Dataset):
    """Tokenized records, optionally repeated by an index array (upsampling by duplication).

    Args:
        records: dicts with ``input_ids`` and ``labels`` (from ``data.tokenize_examples``).
        indices: which record each position returns (e.g. ``sims.selection.upsample_indices``);
            default every record once.
    """

    def __init__(self, records: Sequence[dict], indices: Sequence[int] | None = None):
        self.records = records
        self.indices = np.arange(len(records)) if indices is None else np.asarray(indices)
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= len(records)):
            raise ValueError(
                f"`indices` must lie in [0, {len(records)}); got range "
                f"[{self.indices.min()}, {self.indices.max()}]."
            )

    def __len__(self) -> int:
        return int(self.indices.size)

    def __getitem__(self, i: int) -> dict:
        rec = self.records[int(self.indices[i])]
        return {"input_ids": rec["input_ids"], "labels": rec["labels"]}


def collate(features: Sequence[dict], pad_id: int, *, side: str = "right") -> dict:
    """Pad ``input_ids`` with ``pad_id`` and ``labels`` with ``-100``; add the attention mask."""
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), pad_id, dtype=torch.long)
    labels = torch.full((len(features), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    for i, f in enumerate(features):
        n = len(f["input_ids"])
        sl = slice(0, n) if side == "right" else slice(width - n, width)
        ids[i, sl] = torch.as_tensor(f["input_ids"])
        mask[i, sl] = 1
        if "labels" in f:
            labels[i, sl] = torch.as_tensor(f["labels"])
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _length_batches(lengths: np.ndarray, batch_tokens: int, max_batch: int) -> list[np.ndarray]:
    """Index batches of similar length (longest first) within a padded-token budget."""
    order = np.argsort(-lengths, kind="stable")
    batches, i = [], 0
    while i < order.size:
        size = max(1, min(max_batch, batch_tokens // max(1, int(lengths[order[i]]))))
        batches.append(order[i : i + size])
        i += size
    return batches


@torch.no_grad()
def per_example_losses(
    model,
    records: Sequence[dict],
    *,
    pad_id: int,
    batch_tokens: int = 16384,
    max_batch: int = 256,
    progress: bool = False,
    desc: str = "losses",
) -> np.ndarray:
    """Mean response-token cross-entropy of every record (one forward pass per example).

    Records are sorted by length and packed into batches of at most ``batch_tokens`` padded
    tokens, so padding is small; logits are gathered only at labelled positions before the
    float32 cross-entropy. The model is put in eval mode and restored afterwards.

    Args:
        model: a causal LM (any HF model, PEFT-wrapped or not).
        records: dicts with ``input_ids`` and ``labels`` (``-100`` = no loss).
        pad_id: padding token id.
        batch_tokens: padded-token budget per forward pass.
        max_batch: at most this many examples per pass.
        progress: show a tqdm bar.
        desc: the bar's label.

    Returns:
        ``(len(records),)`` float64 array; NaN for a record without labelled tokens.
    """
    n = len(records)
    out = np.full(n, np.nan)
    if n == 0:
        return out
    lengths = np.array([len(r["input_ids"]) for r in records])
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    try:
        batches = _length_batches(lengths, batch_tokens, max_batch)
        bar = _tqdm(total=n, desc=desc, disable=not progress)
        for idx in batches:
            batch = collate([records[i] for i in idx], pad_id)
            batch = {k: v.to(device) for k, v in batch.items()}
            ids, att = batch["input_ids"], batch["attention_mask"]
            logits = model(input_ids=ids, attention_mask=att).logits
            labels = batch["labels"][:, 1:]
            keep = labels != IGNORE_INDEX  # (B, T-1)
            if keep.any():
                lg = logits[:, :-1][keep].float()  # (N_labelled, V)
                tok = torch.nn.functional.cross_entropy(lg, labels[keep], reduction="none")
                row = keep.nonzero()[:, 0]
                sums = torch.zeros(len(idx), device=device, dtype=torch.float64)
                sums.index_add_(0, row, tok.double())
                counts = keep.sum(1)
                vals = (sums / counts.clamp(min=1)).cpu().numpy()
                vals[counts.cpu().numpy() == 0] = np.nan
                out[idx] = vals
            bar.update(len(idx))
        bar.close()
    finally:
        model.train(was_training)
    return out


def _tqdm(**kw):
    from tqdm.auto import tqdm

    return tqdm(**kw)


def world_size() -> int:
    """Number of processes of this run (``accelerate launch``/``torchrun``), 1 otherwise."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _barrier() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.barrier()


def end_distributed() -> None:
    """Wait for every process, then tear the process group down (no-op in a single process).

    Without it, a process that leaves Python while gloo's background threads still run can die
    of ``std::terminate`` ("terminate called without an active exception", SIGABRT) after its
    work is done, and the launcher reports the whole run as failed.
    """
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def accumulation_steps(batch_size: int, per_device: int, processes: int | None = None) -> int:
    """Gradient-accumulation steps so that ``per_device x steps x processes == batch_size``.

    Raises:
        ValueError: when ``batch_size`` is not a multiple of ``per_device x processes``.
    """
    processes = world_size() if processes is None else processes
    unit = per_device * processes
    if batch_size % unit:
        raise ValueError(
            f"`batch_size`={batch_size} must be a multiple of per_device_batch_size x processes "
            f"= {per_device} x {processes} = {unit}; change `per_device_batch_size`."
        )
    return batch_size // unit


class LossRecorder(TrainerCallback):
    """Record per-example losses at given optimizer steps; optionally stop after the last.

    At each step of ``steps`` (after the optimizer update) the current model's loss on every
    record is computed by :func:`per_example_losses` and saved atomically to
    ``out_dir/step-{step}.npy``-like NetCDF shards; a step whose file exists is skipped, so a
    resumed run does not recompute it. Under several processes each computes its share and the
    main one merges. With ``save_checkpoints`` the Trainer is asked for a checkpoint at each
    recording step (the resume points); with ``stop_at`` training stops after that step.

    The callback reads the model and sets only ``control`` flags (style rule 14).

    Args:
        records: tokenized records to score.
        steps: optimizer steps at which to record (sorted, >= 1).
        out_dir: folder of the per-step loss files.
        pad_id: padding token id.
        batch_tokens: token budget of a loss batch.
        stop_at: stop training after this step (``None``: run to the end).
        save_checkpoints: request a Trainer checkpoint at each recording step.
        progress: show a progress bar for each recording.
    """

    def __init__(
        self,
        records: Sequence[dict],
        steps: Sequence[int],
        out_dir: str | os.PathLike,
        *,
        pad_id: int,
        batch_tokens: int = 16384,
        stop_at: int | None = None,
        save_checkpoints: bool = True,
        progress: bool = True,
    ):
        self.records = records
        self.steps = sorted({int(s) for s in steps})
        if not self.steps or self.steps[0] < 0:
            raise ValueError(f"`steps` must be optimizer steps >= 0; got {list(steps)}.")
        self.out_dir = Path(out_dir)
        self.pad_id = pad_id
        self.batch_tokens = batch_tokens
        self.stop_at = stop_at
        self.save_checkpoints = save_checkpoints
        self.progress = progress
        self.seconds = 0.0
        self.tokens = 0

    def path(self, step: int) -> Path:
        """The loss file of ``step``."""
        return self.out_dir / f"step-{step:07d}.nc"

    def done(self) -> list[int]:
        """Recording steps whose file exists."""
        return [s for s in self.steps if self.path(s).exists()]

    def _maybe_record(self, args, model, step: int) -> None:
        if step in self.steps and not self.path(step).exists():
            cuda = torch.cuda.is_available() and next(model.parameters()).is_cuda
            ctx = (
                torch.autocast("cuda", dtype=torch.bfloat16)
                if args.bf16 and cuda
                else contextlib.nullcontext()
            )
            with ctx:
                self._record(model, step)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        """Record step 0 (before any update) when it is requested."""
        if state.global_step == 0:
            self._maybe_record(args, model, 0)
        return control

    def on_step_end(self, args, state, control, model=None, **kwargs):
        """Record at a recording step; request a checkpoint; stop after ``stop_at``."""
        step = state.global_step
        if step in self.steps:
            self._maybe_record(args, model, step)
            if self.save_checkpoints:
                control.should_save = True
        if self.stop_at is not None and step >= self.stop_at:
            control.should_training_stop = True
            if self.save_checkpoints:
                control.should_save = True
        return control

    def _record(self, model, step: int) -> None:
        import xarray as xr

        from sims.runtime.io import write_netcdf

        rank, world = _rank(), world_size()
        mine = np.arange(rank, len(self.records), world)
        t0 = time.perf_counter()
        losses = per_example_losses(
            model, [self.records[i] for i in mine], pad_id=self.pad_id,
            batch_tokens=self.batch_tokens, progress=self.progress and rank == 0,
            desc=f"losses at step {step}",
        )  # fmt: skip
        self.seconds += time.perf_counter() - t0
        self.tokens += int(sum(len(self.records[i]["input_ids"]) for i in mine))
        shard = xr.Dataset({"loss": ("row", losses)}, coords={"row": mine})
        if world == 1:
            write_netcdf(self.path(step), shard.assign_attrs(step=step))
            return
        part = self.out_dir / f".step-{step:07d}.rank{rank}.nc"
        write_netcdf(part, shard)
        _barrier()
        if rank == 0:
            from sims.runtime.io import read_netcdf

            parts = [self.out_dir / f".step-{step:07d}.rank{r}.nc" for r in range(world)]
            merged = xr.concat([read_netcdf(p) for p in parts], dim="row").sortby("row")
            write_netcdf(self.path(step), merged.assign_attrs(step=step))
            for p in parts:
                p.unlink()
        _barrier()

    def trajectories(self) -> np.ndarray:
        """``(n_records, n_steps)`` losses from the saved files (all steps must be recorded)."""
        from sims.runtime.io import read_netcdf

        missing = [s for s in self.steps if not self.path(s).exists()]
        if missing:
            raise RuntimeError(
                f"losses at steps {missing} were not recorded; the run stopped early "
                f"(fewer optimizer steps than {max(missing)}?)."
            )
        cols = []
        for s in self.steps:
            try:
                ds = read_netcdf(self.path(s))
            except (OSError, ValueError, RuntimeError, KeyError) as exc:
                raise ValueError(
                    f"loss file {self.path(s)} is unreadable ({type(exc).__name__}); delete "
                    f"{self.out_dir.parent} to recompute these losses."
                ) from None
            col = np.full(len(self.records), np.nan)
            col[ds["row"].values] = ds["loss"].values
            cols.append(col)
        return np.stack(cols, axis=1)


class LearningTimeRecorder(LossRecorder):
    """A :class:`LossRecorder` for the learning times' log-spaced schedule (issue 36).

    The same recorder under its own class: a proxy run records its K checkpoints and this
    schedule side by side, and transformers warns when a callback class is added twice.
    """


class ProgressPrinter(TrainerCallback):
    """Print one summary line per log event (loss, lr, step/s) for log files."""

    def __init__(self, prefix: str = ""):
        self.prefix = prefix
        self.t0 = None

    def on_train_begin(self, args, state, control, **kwargs):
        """Start the clock."""
        self.t0 = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Print the logged loss."""
        if not state.is_world_process_zero or not logs or "loss" not in logs:
            return
        rate = state.global_step / max(1e-9, time.perf_counter() - (self.t0 or 0))
        print(
            f"{self.prefix}step {state.global_step}/{state.max_steps} loss {logs['loss']:.4f} "
            f"lr {logs.get('learning_rate', float('nan')):.2e} ({rate:.2f} step/s)",
            flush=True,
        )


# ----------------------------------------------------------------------------- optimizers


def _sims_optim():
    """``sims.optim``'s torch API (``build_optimizer``, ``hf``), or ``None`` when absent.

    An older ``sims.optim`` that is a single (JAX-only) module has no torch API; it is detected
    without importing it (importing JAX costs seconds).
    """
    import importlib.util

    spec = importlib.util.find_spec("sims.optim")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        import sims.optim as so
        from sims.optim import build_optimizer  # noqa: F401
    except ImportError:
        return None
    return so


def make_optimizer(
    name: str, model, *, lr: float, weight_decay: float = 0.0, **kwargs
) -> torch.optim.Optimizer:
    """The optimizer ``name`` over the trainable parameters of ``model``.

    The single place where ``sims.optim.build_optimizer`` plugs in (AdamW, Muon with its own
    2-D/other partition, the SAM family); without ``sims.optim`` only ``adamw`` is available
    (``torch.optim.AdamW``).

    Raises:
        ValueError: for an optimizer that needs ``sims.optim`` when it is absent.
    """
    so = _sims_optim()
    if so is not None:
        if name != "sgd":
            kwargs.setdefault("betas", (0.9, 0.999))  # the HF Trainer's AdamW default
        return so.build_optimizer(name, model, lr=lr, weight_decay=weight_decay, **kwargs)
    if name != "adamw":
        raise ValueError(
            f"optimizer {name!r} needs `sims.optim` (build_optimizer), which this checkout "
            "lacks; use optimizer 'adamw'."
        )
    params = [p for p in model.parameters() if p.requires_grad]
    betas = tuple(kwargs.pop("betas", (0.9, 0.999)))
    eps = kwargs.pop("eps", 1e-8)
    if kwargs:
        raise ValueError(f"unknown AdamW options {sorted(kwargs)}; valid: betas, eps.")
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps)


def trainer_class(optimizer: str) -> type[Trainer]:
    """``sims.optim.hf.SAMFamilyTrainer`` for two-pass optimizers, else ``transformers.Trainer``."""
    if optimizer not in SAM_FAMILY:
        return Trainer
    try:
        from sims.optim.hf import SAMFamilyTrainer
    except ImportError:
        raise ValueError(
            f"optimizer {optimizer!r} needs `sims.optim.hf.SAMFamilyTrainer`, which this "
            "checkout lacks."
        ) from None
    return SAMFamilyTrainer


@dataclasses.dataclass(frozen=True)
class Schedule:
    """Step counts of a run: ``steps_per_epoch`` optimizer steps, ``total`` scheduled steps."""

    examples: int
    batch_size: int
    steps_per_epoch: int
    total: int


def schedule(n_examples: int, batch_size: int, epochs: float) -> Schedule:
    """Optimizer steps of ``epochs`` passes over ``n_examples`` at effective ``batch_size``."""
    per_epoch = max(1, math.ceil(n_examples / batch_size))
    return Schedule(n_examples, batch_size, per_epoch, max(1, math.ceil(per_epoch * epochs)))


def training_arguments(
    out_dir: str | os.PathLike,
    *,
    per_device_batch_size: int,
    batch_size: int,
    epochs: float,
    lr: float,
    warmup_ratio: float,
    scheduler: str = "cosine",
    weight_decay: float = 0.0,
    seed: int = 0,
    bf16: bool = False,
    save_strategy: str = "epoch",
    save_total_limit: int | None = None,
    save_steps: int | None = None,
    logging_steps: int = 10,
    progress: bool = True,
    max_steps: int = -1,
) -> TrainingArguments:
    """``TrainingArguments`` with the effective batch made up by accumulation.

    Warm-up is given as a fraction of the scheduled steps (``warmup_steps`` < 1 means a ratio
    in transformers 5). The data order is a seeded random permutation per epoch. With
    ``save_steps`` the Trainer checkpoints every ``save_steps`` optimizer steps (and at the
    last step); add a :class:`CheckpointKeeper` for epoch checkpoints and pruning.
    """
    if save_steps is not None:
        save_strategy = "steps"
    accum = accumulation_steps(batch_size, per_device_batch_size)
    return TrainingArguments(
        output_dir=str(out_dir),
        per_device_train_batch_size=per_device_batch_size,
        gradient_accumulation_steps=accum,
        num_train_epochs=epochs,
        max_steps=max_steps,
        learning_rate=lr,
        lr_scheduler_type=scheduler,
        warmup_steps=float(warmup_ratio),
        weight_decay=weight_decay,
        seed=seed,
        data_seed=seed,
        bf16=bf16,
        save_strategy=save_strategy,
        save_steps=save_steps if save_steps is not None else 500,
        save_total_limit=save_total_limit,
        logging_steps=logging_steps,
        report_to="none",
        disable_tqdm=not progress,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
    )


def build_trainer(
    model,
    tokenizer,
    dataset: TokenDataset,
    args: TrainingArguments,
    *,
    optimizer: str = "adamw",
    optimizer_kwargs: dict | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> Trainer:
    """A Trainer (or ``SAMFamilyTrainer``) with our optimizer, collator and callbacks."""
    opt = make_optimizer(
        optimizer, model, lr=args.learning_rate, weight_decay=args.weight_decay,
        **dict(optimizer_kwargs or {}),
    )  # fmt: skip
    cls = trainer_class(optimizer)
    pad_id = tokenizer.pad_token_id
    collator: Callable = lambda feats: collate(feats, pad_id)  # noqa: E731
    trainer = cls(
        model=model,
        args=args,
        train_dataset=dataset,
        data_collator=collator,
        processing_class=tokenizer,
        optimizers=(opt, None),
        callbacks=list(callbacks),
    )
    if cls is Trainer and args.fp16:  # (SAMFamilyTrainer warns itself)
        from sims.optim.hf import warn_if_fp16_unavailable

        warn_if_fp16_unavailable(trainer)
    if args.disable_tqdm:  # quiet: no per-log dict printed either
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
    else:  # a progress bar showing the loss, instead of raw log dicts printed under it
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(LossBar())
    return trainer


class LossBar(ProgressCallback):
    """HF's progress bar, with the logged loss as its postfix instead of printed log dicts."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        bar = self.training_bar
        if state.is_world_process_zero and bar is not None and logs and "loss" in logs:
            bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)


# ----------------------------------------------------------------------------- checkpoints


def _checkpoint_dirs(folder: Path, prefix: str = "checkpoint-") -> list[tuple[int, Path]]:
    """``(step, path)`` of the ``checkpoint-N`` folders in ``folder``, oldest first."""
    if not folder.is_dir():
        return []
    found = []
    for p in folder.glob(prefix + "*"):
        tail = p.name[len(prefix) :]
        if tail.isdigit() and p.is_dir():
            found.append((int(tail), p))
    return sorted(found)


def _trainer_state(ckpt: Path) -> dict:
    import json

    return json.loads((ckpt / "trainer_state.json").read_text())


def _is_epoch_end(state: dict) -> bool:
    """Whether a checkpoint's Trainer state is at an epoch's end (or the run's last step).

    The Trainer sets ``epoch = e + batches_done / batches_per_epoch``, exactly ``e + 1`` after
    an epoch's last batch.
    """
    epoch, step = float(state.get("epoch") or 0.0), int(state.get("global_step", 0))
    return (epoch > 0 and epoch == round(epoch)) or step >= int(state.get("max_steps", 1 << 62))


def epoch_checkpoints(folder: str | os.PathLike) -> tuple[Path, ...]:
    """The checkpoints of ``folder`` written at an epoch's end or the last step, oldest first."""
    return tuple(p for _, p in _checkpoint_dirs(Path(folder)) if _is_epoch_checkpoint(p))


class CheckpointKeeper(TrainerCallback):
    """Epoch-end checkpoints besides the Trainer's every-``save_steps`` ones; prune the rest.

    Use with ``training_arguments(save_steps=N)`` (``save_strategy="steps"``): the Trainer then
    writes ``checkpoint-<step>`` every ``N`` optimizer steps and at the last step; this callback
    also asks for one at the end of each epoch (``epoch_checkpoints``), and after every save
    deletes each mid-epoch checkpoint but the newest (the resume point). Epoch checkpoints are
    kept (the newest ``keep_epochs`` of them; ``None``: all) for evaluation. So a kill loses at
    most ``N`` steps, and the disk holds the epoch checkpoints plus one.

    Args:
        epoch_checkpoints: checkpoint at each epoch end and keep those checkpoints.
        keep_epochs: keep at most this many epoch checkpoints (``None``: all).
    """

    def __init__(self, *, epoch_checkpoints: bool = True, keep_epochs: int | None = None):
        self.epoch_checkpoints = epoch_checkpoints
        self.keep_epochs = keep_epochs
        self._saved_at = -1

    def on_epoch_end(self, args, state, control, **kwargs):
        """Ask for a checkpoint at the epoch's end (unless this step was just saved)."""
        if self.epoch_checkpoints and self._saved_at != state.global_step:
            control.should_save = True
        return control

    def on_save(self, args, state, control, **kwargs):
        """Delete the mid-epoch checkpoints but the newest (process 0 only)."""
        self._saved_at = state.global_step
        if state.is_world_process_zero:
            self.prune(Path(args.output_dir))
        return control

    def prune(self, folder: Path) -> None:
        """Keep the newest checkpoint and (``epoch_checkpoints``) the epoch ones."""
        found = [p for _, p in _checkpoint_dirs(folder)]
        if not found:
            return
        epochs = [p for p in found if self.epoch_checkpoints and _is_epoch_checkpoint(p)]
        if self.keep_epochs is not None:
            epochs = epochs[len(epochs) - self.keep_epochs :] if self.keep_epochs else []
        keep = {*epochs, found[-1]}
        for p in found:
            if p not in keep:
                _remove_tree(p)


def _is_epoch_checkpoint(ckpt: Path) -> bool:
    try:
        return _is_epoch_end(_trainer_state(ckpt))
    except (OSError, ValueError):
        return False  # unreadable: not a checkpoint to keep


def _remove_tree(path: Path) -> None:
    """Delete a folder: renamed first, so a kill mid-delete never leaves a half checkpoint."""
    import shutil

    trash = path.with_name(f".trash-{path.name}")
    try:
        os.replace(path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _checkpoint_problem(ckpt: Path) -> str | None:
    """Why ``ckpt`` cannot be resumed from (``None``: it looks intact).

    The Trainer writes ``trainer_state.json`` last, so a checkpoint cut by a kill has none (or
    a truncated one); a file damaged later shows as a safetensors header beyond the file's end
    or a truncated torch zip archive.
    """
    import json
    import zipfile

    state_file = ckpt / "trainer_state.json"
    if not state_file.is_file():
        return "no trainer_state.json (the save was cut off)"
    try:
        state = json.loads(state_file.read_text())
        int(state["global_step"])
    except (ValueError, KeyError, TypeError) as exc:
        return f"trainer_state.json is unreadable ({type(exc).__name__})"
    weights = sorted(ckpt.glob("*.safetensors")) + sorted(ckpt.glob("pytorch_model*.bin"))
    if not weights:
        return "no model or adapter weights"
    for w in weights:
        if w.suffix == ".safetensors":
            problem = _safetensors_problem(w)
            if problem:
                return f"{w.name} is damaged ({problem})"
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):
        f = ckpt / name
        if f.exists() and not zipfile.is_zipfile(f):
            return f"{name} is truncated or damaged"
    return None


def _safetensors_problem(path: Path) -> str | None:
    import json
    import struct

    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return "shorter than its header"
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            return "header longer than the file"
        try:
            header = json.loads(f.read(n))
        except ValueError:
            return "unreadable header"
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    if 8 + n + end != size:
        return f"{size} bytes instead of {8 + n + end}"
    return None


def find_resume_checkpoint(
    folder: str | os.PathLike, *, say: Callable[[str], None] | None = print, label: str = ""
) -> Path | None:
    """The newest intact ``checkpoint-N`` of ``folder`` (``None``: start from scratch).

    A damaged checkpoint (cut off by a kill, or a file damaged later) is named in one line and
    set aside as ``corrupt-checkpoint-N`` (by process 0), and the next older one is used: the
    steps after it are recomputed.
    """
    for step, ckpt in reversed(_checkpoint_dirs(Path(folder))):
        problem = _checkpoint_problem(ckpt)
        if problem is None:
            return ckpt
        aside = ckpt.with_name(f"corrupt-checkpoint-{step}")
        if _rank() == 0:
            if aside.exists():
                _remove_tree(aside)
            os.replace(ckpt, aside)
        if say is not None and _rank() == 0:
            say(f"{label}checkpoint {ckpt} is corrupt: {problem}; set aside as {aside.name}, "
                "resuming from an older one")  # fmt: skip
    return None


def describe_resume(ckpt: Path, *, steps_per_epoch: int, batch_size: int, n_examples: int) -> str:
    """Where a run resumes: ``step S/T, epoch E (position P/N examples into it)``."""
    state = _trainer_state(ckpt)
    step, total = int(state["global_step"]), int(state.get("max_steps", 0))
    epoch = step // steps_per_epoch
    in_epoch = step - epoch * steps_per_epoch
    done = min(n_examples, in_epoch * batch_size)
    return (f"step {step}/{total}, epoch {epoch + 1} at position {done}/{n_examples} "
            f"(step {in_epoch}/{steps_per_epoch} of the epoch)")  # fmt: skip


def train_resumable(
    trainer: Trainer,
    *,
    label: str,
    steps_per_epoch: int,
    batch_size: int,
    n_examples: int,
):
    """``trainer.train()`` from the newest intact checkpoint, saying where it resumed.

    Prints one line (process 0) such as ``finetune[ft]: resumed from .../checkpoint-600: step
    600/6150, epoch 1 at position 76800/262144 (step 600/2048 of the epoch)``. The Trainer
    restores weights, optimizer, schedule and RNG states and skips the batches already seen in
    the epoch, so the resumed run continues the uninterrupted one exactly.
    """
    say = (lambda msg: print(msg, flush=True)) if _rank() == 0 else None
    ckpt = find_resume_checkpoint(trainer.args.output_dir, say=say, label=f"{label}: ")
    if ckpt is not None and say is not None:
        where = describe_resume(ckpt, steps_per_epoch=steps_per_epoch, batch_size=batch_size,
                                n_examples=n_examples)  # fmt: skip
        say(f"{label}: resumed from {ckpt}: {where}")
    return trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
