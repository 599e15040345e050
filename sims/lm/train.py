"""The one training loop for :mod:`sims.lm`: ``train_lm(config, ...) -> LMRun``.

See the package docstring (:mod:`sims.lm`) for the API; this module holds the config, the loop,
evaluation and checkpointing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from sims.optim import SAMFamily, build_optimizer
from sims.optim.factory import OPTIMIZERS, SAM_FAMILY
from sims.optim.torch_sam import NonFiniteGradientError, global_norm
from sims.runtime.devices import check_device

from .data import Corpus, CorpusConfig, batch_indices, make_corpus
from .model import GPT, GPTConfig
from .schedules import check_schedule, lr_factor

__all__ = ["LMTrainConfig", "CallbackContext", "LMRun", "train_lm", "evaluate_lm", "lm_loss"]

_SAM_INFO = ("rho", "grad_norm", "perturbation_norm", "update_grad_norm")


@dataclasses.dataclass(frozen=True)
class LMTrainConfig:
    """One from-scratch LM run (every field validated; ``to_dict``/``from_dict`` round-trip).

    Attributes:
        model: the architecture (its ``vocab_size`` must match the corpus).
        corpus: the data (``seq_len`` at most the model's).
        optimizer: a name of :data:`sims.optim.OPTIMIZERS` (``adamw``, ``muon``, ``fsam``, ...).
        lr: peak learning rate (every param group; Muon's too unless ``muon_lr`` is an option).
        weight_decay: decoupled decay on matrices (0 on gains).
        betas: Adam's betas.
        rho: SAM-family radius (None: 0.05 for the SAM family; must be None for the others).
        optimizer_options: further options of ``build_optimizer`` (``precond_norm``,
            ``angle_weights``, ``momentum``, ``muon_lr``, ...).
        steps: optimizer steps.
        batch_size: sequences per step.
        grad_accum: micro-batches per step (``batch_size`` must be divisible by it); the
            SAM family perturbs with the accumulated gradient.
        schedule: ``"constant"``, ``"cosine"``, ``"step"`` or ``"wsd"`` (:mod:`sims.lm.schedules`).
        warmup_steps: linear warm-up steps.
        step_fractions, step_factor: the ``"step"`` schedule's decay points and factor.
        decay_fraction: the ``"wsd"`` schedule's final decay share of the run.
        min_lr_factor: floor of ``"cosine"`` and end of ``"wsd"``.
        eval_every: validation every this many steps (and at step 0 and the end); 0: only those.
        checkpoint_every: checkpoint every this many steps (when a checkpoint path is given).
        seed: initialization and data order (the same for every optimizer with this seed).
        threads: torch CPU threads during the run (None: leave as is).
        device: the torch device of the model, its optimizer state, the batches, the validation
            and the callbacks' model (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...). The model is
            built on the CPU from ``seed`` and then moved, so every device starts from the same
            weights; on the CPU the run is bit-identical to a run without this option (tested).
            CUDA runs are untested here (no GPU in CI): the GPU kernels differ in rounding, so
            results agree with the CPU's only to float32 round-off, growing over steps.
        nonfinite: ``"raise"`` (stop with a clear error, nothing updated) or ``"skip"`` the step
            (counted in ``attrs["skipped_steps"]``).
    """

    model: GPTConfig = dataclasses.field(default_factory=GPTConfig)
    corpus: CorpusConfig = dataclasses.field(default_factory=CorpusConfig)
    optimizer: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.95)
    rho: float | None = None
    optimizer_options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    steps: int = 300
    batch_size: int = 16
    grad_accum: int = 1
    schedule: str = "cosine"
    warmup_steps: int = 0
    step_fractions: tuple[float, ...] = (0.5, 0.75)
    step_factor: float = 0.1
    decay_fraction: float = 0.2
    min_lr_factor: float = 0.0
    eval_every: int = 50
    checkpoint_every: int = 100
    seed: int = 0
    threads: int | None = 1
    device: str = "cpu"
    nonfinite: str = "raise"

    def __post_init__(self):
        if not isinstance(self.model, GPTConfig) or not isinstance(self.corpus, CorpusConfig):
            raise TypeError("`model` must be a GPTConfig and `corpus` a CorpusConfig.")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"unknown `optimizer` {self.optimizer!r}; choose one of {', '.join(OPTIMIZERS)}."
            )
        if self.rho is not None and self.optimizer not in SAM_FAMILY:
            raise ValueError(
                f"`rho` applies to the SAM family only; optimizer is {self.optimizer!r}."
            )
        for name in ("steps", "batch_size", "grad_accum"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if self.batch_size % self.grad_accum:
            raise ValueError(
                f"`batch_size`={self.batch_size} must be divisible by `grad_accum`="
                f"{self.grad_accum} (equal micro-batches)."
            )
        for name in ("eval_every", "checkpoint_every", "seed"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"`{name}` must be an int >= 0; got {v!r}.")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr >= 0):
            raise ValueError(f"`lr` must be a finite number >= 0; got {self.lr!r}.")
        if self.nonfinite not in ("raise", "skip"):
            raise ValueError(f"`nonfinite` must be 'raise' or 'skip'; got {self.nonfinite!r}.")
        if self.corpus.kind != "text" and self.corpus.vocab_size != self.model.vocab_size:
            raise ValueError(
                f"`corpus.vocab_size`={self.corpus.vocab_size} differs from "
                f"`model.vocab_size`={self.model.vocab_size}; set them equal."
            )
        if self.corpus.seq_len > self.model.seq_len:
            raise ValueError(
                f"`corpus.seq_len`={self.corpus.seq_len} exceeds `model.seq_len`="
                f"{self.model.seq_len}."
            )
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise ValueError(f"`threads` must be None or a positive int; got {self.threads!r}.")
        if not isinstance(self.device, str):
            raise TypeError(f"`device` must be a str such as 'cpu' or 'cuda'; got {self.device!r}.")
        try:
            torch.device(self.device)
        except (RuntimeError, TypeError) as exc:  # availability: train_lm, before any work
            raise ValueError(f"`device`={self.device!r} is not a torch device ({exc}); use 'cpu' "
                             "or 'cuda'.") from None  # fmt: skip
        check_schedule(
            self.schedule, total_steps=self.steps, warmup_steps=self.warmup_steps,
            step_fractions=tuple(self.step_fractions), step_factor=self.step_factor,
            decay_fraction=self.decay_fraction, min_factor=self.min_lr_factor,
        )  # fmt: skip
        object.__setattr__(self, "optimizer_options", dict(self.optimizer_options))
        object.__setattr__(self, "betas", tuple(self.betas))
        object.__setattr__(self, "step_fractions", tuple(self.step_fractions))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready nested dict."""
        d = dataclasses.asdict(self)
        d["optimizer_options"] = {
            k: list(v) if isinstance(v, tuple) else v for k, v in self.optimizer_options.items()
        }
        d["betas"], d["step_fractions"] = list(self.betas), list(self.step_fractions)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LMTrainConfig:
        """Inverse of :meth:`to_dict` (unknown keys raise ``TypeError``)."""
        d = dict(d)
        d["model"] = GPTConfig(**d.get("model", {}))
        d["corpus"] = CorpusConfig(**d.get("corpus", {}))
        opts = dict(d.get("optimizer_options", {}))
        if "angle_weights" in opts:
            opts["angle_weights"] = tuple(opts["angle_weights"])
        d["optimizer_options"] = opts
        return cls(**d)

    def replace(self, **changes: Any) -> LMTrainConfig:
        """A copy with ``changes`` (``model``/``corpus`` accept dicts of their own changes)."""
        for key in ("model", "corpus"):
            if isinstance(changes.get(key), Mapping):
                changes[key] = dataclasses.replace(getattr(self, key), **changes[key])
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass
class CallbackContext:
    """What a callback sees every ``callback_every`` steps (after the optimizer step).

    Attributes:
        model: the model (in train mode; call ``model.eval()`` yourself if needed and restore).
        step: completed optimizer steps.
        batch: ``(inputs, targets)`` of the step just taken, ``(B, T)`` each.
        optimizer: the optimizer (``SAMFamily.last_info`` holds the SAM-family diagnostics).
        config: the run's :class:`LMTrainConfig`.
        corpus: the :class:`~sims.lm.data.Corpus`.
    """

    model: torch.nn.Module
    step: int
    batch: tuple[torch.Tensor, torch.Tensor]
    optimizer: torch.optim.Optimizer
    config: LMTrainConfig
    corpus: Corpus


@dataclasses.dataclass
class LMRun:
    """Result of :func:`train_lm`.

    Attributes:
        history: ``xr.Dataset`` with ``train_loss``, ``lr`` (and the SAM-family ``rho``,
            ``grad_norm``, ``perturbation_norm``, ``update_grad_norm``) over ``step``;
            ``val_loss`` over ``eval_step``; callback outputs over ``callback_step``; attrs
            ``status``, ``message``, ``config``, ``seed``, ``n_params``, ``bayes_loss``,
            ``skipped_steps`` and ``meta`` (provenance).
        model: the trained model.
        optimizer: its optimizer.
    """

    history: Any
    model: GPT
    optimizer: torch.optim.Optimizer

    @property
    def status(self) -> str:
        """``"success"`` or ``"cancelled"``."""
        return self.history.attrs["status"]

    @property
    def message(self) -> str:
        """What happened, and how to resume a cancelled run."""
        return self.history.attrs["message"]

    @property
    def success(self) -> bool:
        """Whether every step ran."""
        return self.status == "success"


def lm_loss(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean token cross-entropy, logits)`` of next-token targets ``y`` given inputs ``x``."""
    logits = model(x)  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)), logits


@torch.no_grad()
def evaluate_lm(model: torch.nn.Module, data: np.ndarray, *, batch_size: int = 64) -> float:
    """Mean next-token cross-entropy (nats) of ``model`` on sequences ``data`` ``(n, T + 1)``.

    The batches go to the device of the model's parameters.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for i in range(0, len(data), batch_size):
        chunk = torch.as_tensor(data[i : i + batch_size], device=device)
        logits = model(chunk[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                       chunk[:, 1:].reshape(-1), reduction="sum"))  # fmt: skip
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def _set_lr(opt: torch.optim.Optimizer, factor: float) -> None:
    for group in opt.param_groups:
        group["lr"] = group["initial_lr"] * factor


def _plain_step(opt, model, xs, ys, k: int, nonfinite: str, step: int) -> float:
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for x, y in zip(xs, ys, strict=True):
        loss, _ = lm_loss(model, x, y)
        (loss / k).backward()
        total += float(loss.detach()) / k
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    if not torch.isfinite(global_norm(grads)):
        opt.zero_grad(set_to_none=True)
        msg = f"non-finite gradient at step {step} (loss {total}); parameters unchanged."
        if nonfinite == "raise":
            raise NonFiniteGradientError(msg + " Lower `lr`, or set nonfinite='skip'.")
        return float("nan")
    opt.step()
    return total


def _load_checkpoint(path: Path, config: LMTrainConfig) -> dict[str, Any] | None:
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    saved = state.get("config")
    if saved is not None:
        saved.setdefault("device", "cpu")  # checkpoints from before the device option
    if saved != config.to_dict():
        diff = sorted(k for k in config.to_dict() if (saved or {}).get(k) != config.to_dict()[k])
        raise ValueError(
            f"checkpoint {str(path)!r} belongs to another configuration (differs in {diff}); "
            "delete it or use another checkpoint path."
        )
    return state


def _save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    from sims.runtime.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _history_dataset(config, hist, evals, cb, *, status, message, n_params, corpus, skipped):
    import xarray as xr

    from sims.runtime.io import provenance

    steps = np.arange(1, len(hist["train_loss"]) + 1)
    data = {k: ("step", np.asarray(v, dtype=np.float64)) for k, v in hist.items() if v}
    data["val_loss"] = ("eval_step", np.asarray([v for _, v in evals], dtype=np.float64))
    coords = {"step": steps, "eval_step": np.asarray([s for s, _ in evals], dtype=np.int64)}
    if cb:
        keys = sorted({k for _, rec in cb for k in rec})
        clash = set(keys) & set(data)
        if clash:
            raise ValueError(f"callback keys {sorted(clash)} clash with history variables.")
        coords["callback_step"] = np.asarray([s for s, _ in cb], dtype=np.int64)
        for k in keys:
            data[k] = ("callback_step", np.asarray([r.get(k, np.nan) for _, r in cb], dtype=float))
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        status=status, message=message, seed=config.seed, optimizer=config.optimizer,
        n_params=n_params, bayes_loss=float(corpus.bayes_loss), skipped_steps=skipped,
        config=config.to_dict(),
        meta=provenance(config.to_dict(), seed=config.seed, status=status),
    )  # fmt: skip
    return ds


def train_lm(
    config: LMTrainConfig,
    *,
    callback: Callable[[CallbackContext], Mapping[str, float] | None] | None = None,
    callback_every: int = 0,
    checkpoint: str | os.PathLike | None = None,
    corpus: Corpus | None = None,
    progress: bool = False,
) -> LMRun:
    """Train :class:`~sims.lm.model.GPT` from scratch on an offline corpus.

    Args:
        config: the run (:class:`LMTrainConfig`).
        callback: called as ``callback(ctx)`` every ``callback_every`` steps with a
            :class:`CallbackContext`; a returned mapping of floats is recorded in the history
            over ``callback_step``.
        callback_every: callback period in steps (0: never).
        checkpoint: a file to resume from when it exists (same config only) and to write every
            ``config.checkpoint_every`` steps, at the end and on Ctrl-C.
        corpus: a prebuilt corpus (default ``make_corpus(config.corpus)``; pass one to share it
            between runs).
        progress: show a tqdm bar.

    Returns:
        An :class:`LMRun` (``history`` with ``status`` ``"success"`` or ``"cancelled"``).

    Raises:
        NonFiniteGradientError: with ``nonfinite="raise"``, naming the step (nothing updated).
        ValueError: for an incompatible corpus or checkpoint, a bad ``callback_every``, or a
            ``config.device`` that this machine lacks (e.g. ``"cuda"`` without a GPU), before
            any work.
    """
    if not isinstance(config, LMTrainConfig):
        raise TypeError(f"`config` must be an LMTrainConfig; got {type(config).__name__}.")
    check_device(config.device)  # e.g. 'cuda' on a machine without one: before any work
    if not isinstance(callback_every, int) or callback_every < 0:
        raise ValueError(f"`callback_every` must be an int >= 0; got {callback_every!r}.")
    if callback is not None and not callable(callback):
        raise TypeError(f"`callback` must be callable; got {type(callback).__name__}.")
    ckpt = None
    if checkpoint is not None:
        from sims.runtime.io import ensure_writable

        ckpt = ensure_writable(checkpoint, kind="file", arg="checkpoint")
    corpus = corpus if corpus is not None else make_corpus(config.corpus)
    if corpus.config != config.corpus:
        raise ValueError("`corpus` was built from another CorpusConfig than `config.corpus`.")
    if corpus.vocab_size > config.model.vocab_size:
        raise ValueError(
            f"the corpus has {corpus.vocab_size} tokens but `model.vocab_size`="
            f"{config.model.vocab_size}; raise the model's vocab_size."
        )
    if len(corpus.train) < config.batch_size:
        raise ValueError(
            f"`batch_size`={config.batch_size} exceeds the {len(corpus.train)} training "
            "sequences; lower it or enlarge the corpus."
        )
    threads_before = torch.get_num_threads()
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    try:
        return _train(config, corpus, callback, callback_every, ckpt, progress)
    finally:
        torch.set_num_threads(threads_before)


def _train(config, corpus, callback, callback_every, ckpt, progress) -> LMRun:
    device = torch.device(config.device)
    torch.manual_seed(config.seed)
    model = GPT(config.model).to(device)  # built on the CPU: the same weights on every device
    options = dict(config.optimizer_options)
    if config.optimizer in SAM_FAMILY:
        options.setdefault("nonfinite", config.nonfinite)
        options["rho"] = config.rho
    opt = build_optimizer(config.optimizer, model, lr=config.lr, weight_decay=config.weight_decay,
                          betas=config.betas, **options)  # fmt: skip
    for group in opt.param_groups:
        group["initial_lr"] = group["lr"]
    is_sam = isinstance(opt, SAMFamily)
    hist: dict[str, list[float]] = {"train_loss": [], "lr": [], "step_time": []}
    if is_sam:
        hist.update({k: [] for k in _SAM_INFO})
    evals: list[tuple[int, float]] = []
    cb: list[tuple[int, dict[str, float]]] = []
    start, skipped, last_cb = 0, 0, 0
    state = _load_checkpoint(ckpt, config) if ckpt is not None else None
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start, skipped, last_cb = state["step"], state["skipped"], state["last_callback"]
        hist = {k: list(v) for k, v in state["history"].items()}
        evals = [tuple(e) for e in state["evals"]]
        cb = [(s, dict(r)) for s, r in state["callback"]]
        batch = (tuple(torch.as_tensor(b, device=device) for b in state["batch"])
                 if state["batch"] else None)  # fmt: skip
    else:
        evals.append((0, evaluate_lm(model, corpus.val, batch_size=max(config.batch_size, 64))))
        batch = None

    def snapshot(step: int) -> dict[str, Any]:
        return {"config": config.to_dict(), "step": step, "skipped": skipped,
                "last_callback": last_cb, "model": model.state_dict(),
                "optimizer": opt.state_dict(), "history": hist, "evals": evals, "callback": cb,
                "batch": [b.cpu() for b in batch] if batch is not None else []}  # fmt: skip

    def after_step(done: int) -> None:
        """Callback, validation and checkpoint due after ``done`` steps (each at most once)."""
        nonlocal last_cb
        if (
            callback is not None
            and callback_every
            and done % callback_every == 0
            and last_cb < done
        ):
            out = callback(CallbackContext(model, done, batch, opt, config, corpus))
            if out:
                cb.append((done, {str(kk): float(v) for kk, v in out.items()}))
            last_cb = done
            model.train()
        due_eval = (config.eval_every and done % config.eval_every == 0) or done == config.steps
        if due_eval and evals[-1][0] < done:
            evals.append((done, evaluate_lm(model, corpus.val,
                                            batch_size=max(config.batch_size, 64))))  # fmt: skip
        if ckpt is not None and (
            (config.checkpoint_every and done % config.checkpoint_every == 0)
            or done == config.steps
        ):
            _save_checkpoint(ckpt, snapshot(done))

    sched = dict(
        warmup_steps=config.warmup_steps, step_fractions=config.step_fractions,
        step_factor=config.step_factor, decay_fraction=config.decay_fraction,
        min_factor=config.min_lr_factor,
    )  # fmt: skip
    k = config.grad_accum
    steps = range(start, config.steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, initial=start, total=config.steps, desc=f"train {config.optimizer}")
    done, status, message, in_step = start, "success", "", False
    model.train()
    try:
        if start > 0:
            after_step(start)  # finish what an interrupt cut short (callback, validation)
        for step in steps:
            factor = lr_factor(step, config.steps, config.schedule, **sched)
            idx = batch_indices(len(corpus.train), config.batch_size, seed=config.seed, step=step)
            seqs = torch.as_tensor(corpus.train[idx], device=device)
            x, y = seqs[:, :-1], seqs[:, 1:]  # (B, T)
            xs, ys = x.chunk(k), y.chunk(k)
            t0 = time.perf_counter()
            in_step = True
            _set_lr(opt, factor)
            if is_sam:
                closures = [
                    (lambda xi=xi, yi=yi: _scaled(lm_loss(model, xi, yi), k))
                    for xi, yi in zip(xs, ys, strict=True)
                ]  # fmt: skip
                before = opt.skipped_steps
                loss = float(opt.step(closures))
                if opt.skipped_steps > before:
                    loss = float("nan")
            else:
                loss = _plain_step(opt, model, xs, ys, k, config.nonfinite, step)
            if not math.isfinite(loss):
                skipped += 1
            hist["train_loss"].append(loss)
            hist["lr"].append(config.lr * factor)
            hist["step_time"].append(time.perf_counter() - t0)
            if is_sam:
                for key in _SAM_INFO:
                    hist[key].append(float(opt.last_info.get(key, float("nan"))))
            done, batch = step + 1, (x, y)
            in_step = False
            after_step(done)
    except KeyboardInterrupt:
        status = "cancelled"
        if ckpt is not None and not in_step:
            _save_checkpoint(ckpt, snapshot(done))
            message = (f"interrupted after step {done}/{config.steps}; state saved to "
                       f"{str(ckpt)!r}: call train_lm again with checkpoint={str(ckpt)!r} "
                       "to resume.")  # fmt: skip
        elif ckpt is not None:
            message = (f"interrupted during step {done + 1}; the last checkpoint in "
                       f"{str(ckpt)!r} is kept: call train_lm again with the same checkpoint "
                       "to resume from it.")  # fmt: skip
        else:
            message = (f"interrupted after step {done}/{config.steps}; no checkpoint path was "
                       "given, so the run cannot be resumed.")  # fmt: skip
    if status == "success":
        message = f"{done} steps of {config.optimizer}; final val loss {evals[-1][1]:.4f}"
    ds = _history_dataset(config, hist, evals, cb, status=status, message=message,
                          n_params=model.num_params(), corpus=corpus, skipped=skipped)  # fmt: skip
    return LMRun(ds, model, opt)


def _scaled(out: tuple[torch.Tensor, torch.Tensor], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    loss, logits = out
    return loss / k, logits
