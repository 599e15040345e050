r"""From-scratch "pretrained" decoders for CPU-scale runs (issue 14, CPU scale).

A small HF decoder (any family of :mod:`llm_validation.models.tiny`) is built from a config with a
tokenizer trained locally on the pre-training texts, then pre-trained with the same Trainer
machinery as every other run (:func:`llm_validation.train.trainer.build_trainer`; no second training
loop) on *plain* text: each pre-training record becomes ``question\\nsolution<eos>`` with the
loss on every token, without the Alpaca instruction template. The model thus knows the
problems' language and arithmetic but not the instruction format, as a pretrained LM knows math
text but not MathInstruct's prompt, so fine-tuning has something to teach. The result is an
ordinary HF folder that the pipeline loads like a real pretrained model.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path

from llm_validation.config import SAVE_STEPS
from llm_validation.data.records import Example, format_prompt
from llm_validation.models.tiny import TinySize

__all__ = ["PretrainConfig", "pretrain_from_scratch"]


@dataclasses.dataclass(frozen=True)
class PretrainConfig:
    """A from-scratch pre-training run.

    Attributes:
        family: architecture (``llama``, ``gpt_neox``, ...; see :data:`tiny.FAMILIES`).
        size: width and depth.
        vocab_size: BPE vocabulary trained on the pre-training texts (digits kept single).
        epochs: passes over the pre-training texts.
        lr: peak learning rate (cosine schedule, 3 % warm-up), AdamW.
        batch_size: examples per optimizer step.
        max_length: tokens per text.
        seed: initialization and data order.
        save_steps: optimizer steps between resume checkpoints (plus one per epoch).
    """

    family: str = "llama"
    size: TinySize = TinySize(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=384)
    vocab_size: int = 512
    epochs: float = 2.0
    lr: float = 3e-3
    batch_size: int = 32
    max_length: int = 256
    seed: int = 0
    save_steps: int = SAVE_STEPS

    def __post_init__(self):
        if isinstance(self.size, dict):
            object.__setattr__(self, "size", TinySize(**self.size))


def _plain_records(examples: Sequence[Example], tok, max_length: int) -> list[dict]:
    texts = [f"{e.instruction}\n{e.output}" for e in examples]
    ids = tok(texts, add_special_tokens=True)["input_ids"]
    out = []
    for x in ids:
        x = (list(x) + [tok.eos_token_id])[:max_length]
        out.append({"input_ids": x, "labels": list(x)})
    return out


def pretrain_from_scratch(
    examples: Sequence[Example],
    out_dir: str | os.PathLike,
    cfg: PretrainConfig = PretrainConfig(),
    *,
    tokenizer_texts: Sequence[str] | None = None,
    progress: bool = True,
) -> Path:
    """Pre-train a from-scratch decoder on ``examples`` (plain text); return its HF folder.

    Resumable: a finished folder (``DONE`` marker) is returned as is, an interrupted run resumes
    from its last checkpoint (every ``cfg.save_steps`` steps and each epoch's end).

    Args:
        examples: pre-training problems (their ``instruction`` and ``output``).
        out_dir: where the model folder (``model/``) and Trainer checkpoints go.
        cfg: model and training settings.
        tokenizer_texts: texts to train the tokenizer on (default: the pre-training texts plus
            the Alpaca template, so the prompt's words are in the vocabulary).
        progress: progress bars.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from llm_validation.models.tiny import tiny_config, train_tokenizer
    from llm_validation.train.trainer import (
        CheckpointKeeper,
        TokenDataset,
        build_trainer,
        schedule,
        train_resumable,
        training_arguments,
    )

    out = Path(out_dir)
    final = out / "model"
    if (final / "DONE").exists():
        return final
    if tokenizer_texts is None:
        tokenizer_texts = [f"{e.instruction}\n{e.output}" for e in examples]
        tokenizer_texts += [format_prompt(e.instruction) for e in examples[:200]]
    tok = train_tokenizer(tokenizer_texts, vocab_size=cfg.vocab_size)
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_config(tiny_config(cfg.family, len(tok), cfg.size,
                                                         tokenizer=tok))  # fmt: skip
    records = _plain_records(examples, tok, cfg.max_length)
    args = training_arguments(
        out / "trainer", per_device_batch_size=cfg.batch_size, batch_size=cfg.batch_size,
        epochs=cfg.epochs, lr=cfg.lr, warmup_ratio=0.03, seed=cfg.seed,
        save_steps=cfg.save_steps, progress=progress, logging_steps=50,
    )  # fmt: skip
    trainer = build_trainer(model, tok, TokenDataset(records), args, optimizer="adamw",
                            optimizer_kwargs={"betas": (0.9, 0.95)},
                            callbacks=[CheckpointKeeper(keep_epochs=1)])  # fmt: skip
    t0 = time.perf_counter()
    sch = schedule(len(records), cfg.batch_size, cfg.epochs)
    train_resumable(trainer, label="pretrain", steps_per_epoch=sch.steps_per_epoch,
                    batch_size=cfg.batch_size, n_examples=len(records))  # fmt: skip
    model.save_pretrained(final)
    tok.save_pretrained(final)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    (final / "DONE").write_text(
        f"seconds={time.perf_counter() - t0:.1f} steps={trainer.state.global_step} "
        f"first_loss={losses[0] if losses else float('nan'):.4f} "
        f"last_loss={losses[-1] if losses else float('nan'):.4f}\n"
    )
    return final
