r"""LoRA fine-tuning of the target model on original or upsampled data (Section 6).

The paper's settings (defaults of :class:`~llm_validation.config.FinetuneConfig`): LoRA rank
128, alpha 512, dropout 0.05 on the attention projections (plus the feed-forward for Phi-2),
maximum length 512, effective batch 128 (by gradient accumulation, across processes), 3 epochs,
cosine schedule with peak lr 2e-5 and 3 % warm-up, AdamW or Muon. Upsampling is duplication:
the training set repeats each example by its usage count (``1 + u`` for selected examples) and
the Trainer shuffles it with a seeded sampler.

One :class:`transformers.Trainer` (``sims.optim.hf.SAMFamilyTrainer`` for SAM-type optimizers)
does the work. It checkpoints every ``save_steps`` optimizer steps (only the newest of these is
kept) and at the end of each epoch (kept for evaluation), so a killed run loses at most
``save_steps`` steps: it resumes at the exact step and data position (weights, optimizer,
schedule, RNG, the batches already seen in the epoch) and says where in one line. Extra
``TrainerCallback``s can be passed in (e.g. a spectral recorder, or a
:class:`~llm_validation.train.trainer.LossRecorder` for learning-time analyses).

Multi-GPU / multi-node: run the same command under ``accelerate launch`` (data parallel; the
accumulation is divided by the number of processes so the effective batch stays 128)::

    accelerate launch --num_processes 4 -m llm_validation finetune --config run.json
    accelerate launch --num_machines 2 --machine_rank 0 --main_process_ip HOST \\
        --num_processes 16 -m llm_validation finetune --config run.json

A script of your own that calls :func:`finetune` under a launcher should end with
:func:`llm_validation.train.trainer.end_distributed` (the CLI does): a process that exits while the
gloo process group is alive can die of SIGABRT after its work is done, failing the launch.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from llm_validation.config import FinetuneConfig
from llm_validation.data.records import Example

__all__ = ["FinetuneResult", "finetune", "load_finetuned", "plan_finetune", "is_main_process"]


def is_main_process() -> bool:
    """Whether this is process 0 (the only one that writes shared files)."""
    return int(os.environ.get("RANK", "0")) == 0


@dataclasses.dataclass(frozen=True)
class FinetuneResult:
    """Where a fine-tuning run left its models.

    Attributes:
        final: folder of the final model (LoRA adapter or full weights) with the tokenizer.
        epoch_checkpoints: Trainer checkpoints at the end of each epoch (oldest first).
        n_train: training-set size after upsampling.
        steps: optimizer steps.
        seconds: wall-clock training time of this call (0 when it only reloaded a result).
    """

    final: Path
    epoch_checkpoints: tuple[Path, ...]
    n_train: int
    steps: int
    seconds: float


def plan_finetune(n_train: int, cfg: FinetuneConfig) -> dict:
    """Step counts: examples, steps per epoch, total steps, warm-up steps, accumulation."""
    from llm_validation.train.trainer import accumulation_steps, schedule, world_size

    sch = schedule(n_train, cfg.batch_size, cfg.epochs)
    return {
        "examples": n_train,
        "steps_per_epoch": sch.steps_per_epoch,
        "total_steps": sch.total,
        "warmup_steps": int(np.ceil(cfg.warmup_ratio * sch.total)),
        "accumulation": accumulation_steps(cfg.batch_size, cfg.per_device_batch_size),
        "processes": world_size(),
    }


def _bf16(dtype: str) -> bool:
    import torch

    if dtype == "bfloat16":
        return True
    return dtype == "auto" and torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def finetune(
    examples: Sequence[Example],
    counts: Sequence[int] | None,
    cfg: FinetuneConfig,
    out_dir: str | os.PathLike,
    *,
    max_length: int = 512,
    callbacks: Sequence = (),
    progress: bool = True,
    model=None,
    tokenizer=None,
    on_start: Callable[[], object] | None = None,
    label: str = "finetune",
) -> FinetuneResult:
    """Fine-tune ``cfg.model`` on ``examples`` repeated by ``counts`` (resumable).

    Args:
        examples: the training examples (the original split, plus synthetic ones if any).
        counts: per-example repeat counts (``None``: each once).
        cfg: fine-tuning settings.
        out_dir: the stage folder (``trainer/checkpoint-N`` at each epoch's end plus the newest
            every-``save_steps`` one; ``final/``).
        max_length: tokens per example.
        callbacks: extra ``TrainerCallback``s.
        progress: progress bars.
        model: an already loaded model (default: load ``cfg.model``).
        tokenizer: its tokenizer (with ``model``).
        on_start: called once the model is loaded, LoRA applied and the data tokenized, just
            before the first write (the pipeline marks its stage running there, so a bad
            input leaves nothing behind).
        label: prefix of the resume line.

    Returns:
        A :class:`FinetuneResult`.

    Raises:
        ValueError: on mismatched ``counts``, a missing LoRA target, an optimizer that is not
            available, or an effective batch that the processes cannot divide.
    """
    from llm_validation.data.records import tokenize_examples
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model
    from llm_validation.train.trainer import (
        CheckpointKeeper,
        TokenDataset,
        build_trainer,
        epoch_checkpoints,
        train_resumable,
        training_arguments,
    )

    out = Path(out_dir)
    counts = np.ones(len(examples), np.int64) if counts is None else np.asarray(counts)
    if counts.shape != (len(examples),) or (counts < 0).any():
        raise ValueError(
            f"`counts` must hold one non-negative count per example ({len(examples)}); got "
            f"shape {counts.shape}."
        )
    indices = np.repeat(np.arange(len(examples)), counts)
    plan = plan_finetune(len(indices), cfg)  # checks the batch divides before loading anything
    final = out / "final"
    if (final / "DONE").exists():
        ckpts = epoch_checkpoints(out / "trainer")
        return FinetuneResult(final, ckpts, len(indices), plan["total_steps"], 0.0)
    if model is None:
        model, tokenizer = load_model(cfg.model, dtype="float32")
    if cfg.lora:
        model = apply_lora(
            model, rank=cfg.lora_rank, alpha=cfg.lora_alpha, dropout=cfg.lora_dropout,
            targets=cfg.lora_targets, seed=cfg.seed,
        )  # fmt: skip
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        if cfg.lora:
            model.enable_input_require_grads()
    records = tokenize_examples(examples, tokenizer, max_length=max_length)
    args = training_arguments(
        out / "trainer", per_device_batch_size=cfg.per_device_batch_size,
        batch_size=cfg.batch_size, epochs=cfg.epochs, lr=cfg.lr,
        warmup_ratio=cfg.warmup_ratio, scheduler=cfg.scheduler, weight_decay=cfg.weight_decay,
        seed=cfg.seed, bf16=_bf16(cfg.dtype), save_steps=cfg.save_steps, progress=progress,
    )  # fmt: skip
    keeper = CheckpointKeeper(epoch_checkpoints=True, keep_epochs=cfg.save_total_limit)
    trainer = build_trainer(
        model, tokenizer, TokenDataset(records, indices), args, optimizer=cfg.optimizer,
        optimizer_kwargs=dict(cfg.optimizer_kwargs), callbacks=[keeper, *callbacks],
    )  # fmt: skip
    if on_start is not None:
        on_start()
    t0 = time.perf_counter()
    train_resumable(trainer, label=label, steps_per_epoch=plan["steps_per_epoch"],
                    batch_size=cfg.batch_size, n_examples=len(indices))  # fmt: skip
    seconds = time.perf_counter() - t0
    if is_main_process():
        trainer.save_model(str(final))
        tokenizer.save_pretrained(final)
        (final / "DONE").write_text(f"steps={trainer.state.global_step}\n")
    return FinetuneResult(final, epoch_checkpoints(out / "trainer"), len(indices),
                          int(trainer.state.global_step), seconds)  # fmt: skip


def load_finetuned(base: str | os.PathLike, checkpoint: str | os.PathLike, *, dtype="auto",
                   device=None, padding_side="left"):  # fmt: skip
    """Load a fine-tuned model: ``base`` plus the LoRA adapter in ``checkpoint``, or full weights.

    Returns:
        ``(model, tokenizer)`` ready for generation (adapters merged for speed).
    """
    import torch
    from transformers import AutoModelForCausalLM

    from llm_validation.models.registry import _offline, load_model, load_tokenizer, resolve_dtype

    ckpt = Path(checkpoint)
    if (ckpt / "adapter_config.json").exists():
        from peft import PeftModel

        from llm_validation.models.lora import quiet_peft

        model, tok = load_model(base, dtype=dtype, device=device, padding_side=padding_side)
        with quiet_peft():
            model = PeftModel.from_pretrained(model, ckpt).merge_and_unload()
        return model, tok
    if not (ckpt / "config.json").exists():
        raise ValueError(
            f"checkpoint {str(ckpt)!r} holds neither a LoRA adapter (adapter_config.json) nor "
            "a full model (config.json)."
        )
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    with _offline():
        model = AutoModelForCausalLM.from_pretrained(
            ckpt, dtype=resolve_dtype(dtype, device), local_files_only=True
        )
    tok_src = ckpt if (ckpt / "tokenizer_config.json").exists() else base
    return model.to(device), load_tokenizer(tok_src, padding_side=padding_side)
