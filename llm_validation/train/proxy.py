"""Proxy loss trajectories (main paper, Section 5; Section 6 "Pythia-70M ... 5 checkpoints").

Train a small proxy causal LM on the training set for a fraction of an epoch (1/3) and record
every example's mean response-token loss at ``K`` checkpoints evenly spaced over that stretch
(K = 5; 10 and 15 for the trajectory-length ablation). The learning-rate schedule is the one of
a ``schedule_epochs``-epoch run cut at the fraction, as the authors' proxy does. The result is an
``xarray.Dataset`` with ``loss`` of shape ``(example, checkpoint)``, the ``source`` and
``n_response`` of each example, and the checkpoint steps.

The recording is a :class:`~llm_validation.train.trainer.LossRecorder` callback on the one Trainer
(one forward pass per example per checkpoint, length-sorted token-budgeted batches). With
``save_checkpoints`` the Trainer checkpoints at each recording step and every ``save_steps``
steps (only the newest is kept); a killed run resumes there at the exact step and data
position, says so in one line, and skips the recorded steps.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from llm_validation.config import ProxyConfig
from llm_validation.data.records import Example

__all__ = ["ProxyPlan", "plan_proxy", "record_trajectories", "trajectories_dataset"]


@dataclasses.dataclass(frozen=True)
class ProxyPlan:
    """Step counts of a proxy run.

    Attributes:
        n_examples: training examples.
        steps_per_epoch: optimizer steps per epoch at the effective batch.
        scheduled_steps: length of the learning-rate schedule.
        stop_step: the last trained step (``epoch_fraction`` of an epoch).
        record_steps: the ``K`` checkpoint steps.
    """

    n_examples: int
    steps_per_epoch: int
    scheduled_steps: int
    stop_step: int
    record_steps: tuple[int, ...]


def plan_proxy(
    n_examples: int, cfg: ProxyConfig, *, record_steps: Sequence[int] | None = None
) -> ProxyPlan:
    """Optimizer steps of the proxy run and its ``K`` checkpoint steps.

    Args:
        n_examples: training examples.
        cfg: proxy settings.
        record_steps: record at these steps instead of ``K`` evenly spaced ones (strictly
            increasing integers from 0, step 0 being the model before any update, to the last
            trained step; e.g. :func:`sims.selection.log_spaced_steps`); ``cfg.n_checkpoints``
            must equal their count.

    Raises:
        ValueError: when the stretch has fewer optimizer steps than checkpoints, or
            ``record_steps`` does not fit it.
    """
    from llm_validation.train.trainer import schedule

    sch = schedule(n_examples, cfg.batch_size, cfg.schedule_epochs)
    stop = max(1, round(cfg.epoch_fraction * sch.steps_per_epoch))
    if record_steps is not None:
        steps = tuple(int(s) for s in record_steps)
        if (len(steps) != cfg.n_checkpoints or steps[0] < 0 or steps[-1] != stop
                or any(b <= a for a, b in zip(steps, steps[1:], strict=False))):  # fmt: skip
            raise ValueError(
                f"`record_steps` {list(steps)} must be {cfg.n_checkpoints} (`n_checkpoints`) "
                f"strictly increasing steps from >= 0 to the last trained step {stop}."
            )
        return ProxyPlan(n_examples, sch.steps_per_epoch, sch.total, stop, steps)
    k_all = cfg.n_checkpoints
    steps = tuple(sorted({round(k * stop / k_all) for k in range(1, k_all + 1)}))
    if len(steps) < cfg.n_checkpoints or steps[0] < 1:
        raise ValueError(
            f"the proxy trains {stop} optimizer steps ({cfg.epoch_fraction:.3g} epoch of "
            f"{n_examples} examples at batch {cfg.batch_size}), fewer than `n_checkpoints`="
            f"{cfg.n_checkpoints}; lower `proxy.batch_size` or raise `proxy.epoch_fraction`."
        )
    return ProxyPlan(n_examples, sch.steps_per_epoch, sch.total, stop, steps)


def trajectories_dataset(
    losses: np.ndarray, examples: Sequence[Example], plan: ProxyPlan, n_response: Sequence[int]
):
    """Wrap ``(n_examples, K)`` losses in an ``xarray.Dataset`` (example x checkpoint)."""
    import xarray as xr

    k = losses.shape[1]
    return xr.Dataset(
        {
            "loss": (("example", "checkpoint"), losses),
            "source": ("example", np.array([e.source for e in examples], dtype=object)),
            "n_response": ("example", np.asarray(n_response, dtype=np.int64)),
        },
        coords={
            "example": np.array([e.index for e in examples], dtype=np.int64),
            "checkpoint": np.arange(1, k + 1),
            "step": ("checkpoint", np.array(plan.record_steps[:k], dtype=np.int64)),
            "epoch": ("checkpoint", np.array(plan.record_steps[:k]) / plan.steps_per_epoch),
        },
        attrs={"description": "mean response-token loss of each example at each proxy checkpoint"},
    )


def record_trajectories(
    examples: Sequence[Example],
    cfg: ProxyConfig,
    out_dir: str | os.PathLike,
    *,
    max_length: int = 512,
    progress: bool = True,
    callbacks: Sequence = (),
    score_examples: Sequence[Example] | None = None,
    on_start: Callable[[], object] | None = None,
    record_steps: Sequence[int] | None = None,
):
    """Train the proxy and record loss trajectories into ``out_dir`` (resumable).

    Args:
        examples: the training split.
        cfg: proxy settings.
        out_dir: the stage folder (``trainer/`` checkpoints, ``losses/`` per-step files,
            ``trajectories.nc``).
        max_length: tokens per example.
        progress: progress bars.
        callbacks: extra ``TrainerCallback``s.
        score_examples: record the losses of these instead of ``examples`` (the proxy still
            trains on ``examples``; used to place synthetic problems on the same trajectories).
        on_start: called once the model is loaded and the data tokenized, before the first
            write (the pipeline marks its stage running there).
        record_steps: the recording steps (see :func:`plan_proxy`; default ``K`` evenly spaced).

    Returns:
        The trajectories ``xarray.Dataset`` (also written to ``out_dir/trajectories.nc``).
    """
    import torch

    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model
    from llm_validation.train.trainer import (
        CheckpointKeeper,
        LossRecorder,
        TokenDataset,
        _barrier,
        _rank,
        build_trainer,
        train_resumable,
        training_arguments,
    )
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    out = Path(out_dir)
    final = out / "trajectories.nc"
    plan = plan_proxy(len(examples), cfg, record_steps=record_steps)
    if final.exists():
        try:
            return read_netcdf(final)
        except (OSError, ValueError, RuntimeError, KeyError) as exc:  # rebuilt from losses/
            print(f"proxy: {final} is unreadable ({type(exc).__name__}); recomputing it",
                  flush=True)  # fmt: skip
    model, tok = load_model(cfg.model, dtype="float32")
    from llm_validation.data.records import tokenize_examples

    records = tokenize_examples(examples, tok, max_length=max_length)
    scored = examples if score_examples is None else score_examples
    score_records = (
        records if score_examples is None
        else tokenize_examples(score_examples, tok, max_length=max_length)
    )  # fmt: skip
    cuda = torch.cuda.is_available()
    bf16 = cfg.dtype == "bfloat16" or (
        cfg.dtype == "auto" and cuda and torch.cuda.is_bf16_supported()
    )
    if cfg.lora:
        model = apply_lora(model, seed=cfg.seed)
    recorder = LossRecorder(
        score_records, plan.record_steps, out / "losses", pad_id=tok.pad_token_id,
        batch_tokens=cfg.loss_batch_tokens, stop_at=plan.stop_step,
        save_checkpoints=cfg.save_checkpoints,
        progress=progress,
    )  # fmt: skip
    if on_start is not None:
        on_start()
    t0 = time.perf_counter()
    if len(recorder.done()) < len(plan.record_steps):
        args = training_arguments(
            out / "trainer", per_device_batch_size=cfg.per_device_batch_size,
            batch_size=cfg.batch_size, epochs=cfg.schedule_epochs, lr=cfg.lr,
            warmup_ratio=cfg.warmup_ratio, seed=cfg.seed, bf16=bf16, save_strategy="no",
            save_steps=cfg.save_steps if cfg.save_checkpoints else None, progress=progress,
        )  # fmt: skip
        trainer = build_trainer(
            model, tok, TokenDataset(records), args, optimizer=cfg.optimizer,
            callbacks=[recorder, CheckpointKeeper(epoch_checkpoints=False), *callbacks],
        )  # fmt: skip
        train_resumable(trainer, label="proxy", steps_per_epoch=plan.steps_per_epoch,
                        batch_size=cfg.batch_size, n_examples=len(records))  # fmt: skip
    train_s = time.perf_counter() - t0
    losses = recorder.trajectories()
    ds = trajectories_dataset(losses, scored, plan, [r["n_response"] for r in score_records])
    meta = provenance(
        dataclasses.asdict(cfg), seed=cfg.seed,
        extra={"plan": dataclasses.asdict(plan), "train_seconds": train_s,
               "loss_seconds": recorder.seconds, "loss_tokens": recorder.tokens},
    )  # fmt: skip
    if _rank() == 0:  # one process writes; the others wait and read
        write_netcdf(final, ds, meta=meta)
        if not cfg.keep_checkpoints:
            shutil.rmtree(out / "trainer", ignore_errors=True)
    _barrier()
    return read_netcdf(final)
