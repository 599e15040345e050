"""Training and metrics for the sparse-attention Markov task (seed 004, App. B, Tables 1-2).

:func:`train` trains a :mod:`~sims.markov.models` model on a :mod:`~sims.markov.chain` dataset
(finite, multi-epoch, or online) with the Table 2 defaults (AdamW, lr 3e-3, weight decay 0.01,
global-norm clipping 1.0, batch 3000, 2000 steps, ReduceLROnPlateau(patience 10, factor 0.5))
and records, every ``eval_every`` steps on the test set:

* ``test_loss`` and ``excess_loss`` = ``E KL(p* || model)`` (test CE minus the true entropy, A11);
* ``kl_restricted[i]`` = ``E KL(f_{A*_{1:i}} || model)`` for the restricted truths of Eq. (3);
* ``kl_best[i]`` = ``E KL(f^best_{1:i} || model)`` for the best predictors that see only groups
  ``1..i`` (:func:`~sims.markov.chain.best_restricted_log_probs`, on the first ``best_contexts``
  test sequences), and the floors ``kl_floor[i] = E KL(f_{A*_{1:i}} || f^best_{1:i})`` that
  ``kl_restricted[i]`` cannot go below while the model uses only groups ``1..i`` (issue 16);
* ``kl_reference[name]`` = ``E KL(p_ref || model)`` for given reference predictions (the
  restricted-context models of Fig. 3 right);
* ``attention`` (per head, query x key, test-averaged) and ``group_mass`` ``(head, group)``:
  the attention mass each head puts on each lag group (digest §3.1);
* optionally per-training-example losses (``example_loss``) for trajectory-based selection.

The scheduler (digest A9; issue 16): the paper does not say what ReduceLROnPlateau monitors nor how
often it is stepped. Stepped every step on the noisy training loss (``scheduler="plateau_step"``,
the literal reading) it halves the rate every ~10 steps once the stage-1 plateau starts (lr 3e-3 ->
1e-8 within ~300 steps) and only one pattern is ever learned. The default ``"plateau"`` steps it
once per evaluation on the held-out (test) loss, which is deterministic, with a relative threshold,
a cooldown and a floor ``min_lr``; a ``RuntimeWarning`` is raised (and ``attrs["lr_warning"]``
set) if the rate falls below ``lr_warn``.

Results are ``xarray.Dataset``s (:class:`TrainResult`); :func:`detect_stages` reads stage times
off them. Long runs checkpoint and resume (``checkpoint=``).

Examples:
    >>> exp = ExperimentConfig.minimal(d=8, T=6, train=TrainConfig(steps=3, batch_size=16,
    ...     n_train=32, n_test=16, eval_every=1))
    >>> res = train(exp)
    >>> res.ds["group_mass"].dims
    ('step', 'head', 'group')
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from sims.runtime.devices import check_device

from .chain import BatchSampler, ChainConfig, MarkovChain, MarkovData, OnlineStream, make_dataset
from .models import FullConfig, MinimalConfig, build_model, param_groups

__all__ = [
    "TrainConfig",
    "ExperimentConfig",
    "TrainResult",
    "StageReport",
    "train",
    "evaluate",
    "predict_log_probs",
    "detect_stages",
    "stage_band",
    "group_mass",
    "check_device",
    "load_checkpoint",
    "make_scheduler",
    "OPTIMIZERS",
    "SCHEDULERS",
]

OPTIMIZERS = ("adamw", "sgd", "sam")
SCHEDULERS = ("plateau", "plateau_step", "none")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimisation and logging settings (Table 2 defaults).

    Attributes:
        steps: optimisation steps (2000).
        batch_size: sequences per step (3000).
        lr: learning rate (3e-3).
        weight_decay: AdamW decoupled weight decay on matrices (0.01; C.5: 0 makes no difference).
        grad_clip: global-norm clipping threshold (1.0); ``None`` disables.
        optimizer: ``"adamw"``, ``"sgd"`` or ``"sam"`` (SAM around ``sam_base``).
        sam_rho: SAM radius.
        sam_base: base optimizer of SAM (``"adamw"`` or ``"sgd"``).
        scheduler: ``"plateau"``: ReduceLROnPlateau stepped once per evaluation on the held-out
            (test) loss; ``"plateau_step"``: stepped every optimisation step on the training loss
            (the literal reading of Table 2; it collapses the rate at the first plateau, issue
            16); ``"none"``.
        plateau_patience: scheduler patience (10), in evaluations for ``"plateau"`` and in steps
            for ``"plateau_step"``.
        plateau_factor: scheduler factor (0.5).
        plateau_threshold: relative improvement that counts as progress (PyTorch default 1e-4).
        plateau_cooldown: evaluations (or steps) to wait after a reduction before counting again.
        min_lr: floor of the learning rate under the scheduler (0 = none).
        lr_warn: warn (``RuntimeWarning``, ``attrs["lr_warning"]``) when the rate falls below this.
        online: draw a fresh batch every step (App. C.3) instead of epochs over ``n_train``.
        n_train: training sequences (9000); ignored when ``online``.
        n_test: test sequences (3000).
        eval_every: steps between evaluations (step 0 and the last step are always evaluated).
        eval_batch: sequences per evaluation forward pass.
        best_contexts: test sequences (the first ones) on which the best-predictor restricted
            truths ``f^best_{1:i}`` (:func:`~sims.markov.chain.best_restricted_log_probs`) are
            computed once, for ``kl_best`` and the KL floors; 0 disables them.
        best_particles: Monte Carlo particles per context when the exact method is too large.
        record_example_losses: also record each training sequence's loss at every evaluation.
        seed: seed of the model init and the batch order (the chain has its own seed).
        threads: ``torch.set_num_threads`` for the run (``None`` leaves it).
        checkpoint_every: steps between checkpoints when a checkpoint path is given.
    """

    steps: int = 2000
    batch_size: int = 3000
    lr: float = 3e-3
    weight_decay: float = 0.01
    grad_clip: float | None = 1.0
    optimizer: str = "adamw"
    sam_rho: float = 0.05
    sam_base: str = "adamw"
    scheduler: str = "plateau"
    plateau_patience: int = 10
    plateau_factor: float = 0.5
    plateau_threshold: float = 1e-4
    plateau_cooldown: int = 0
    min_lr: float = 0.0
    lr_warn: float = 1e-5
    online: bool = False
    n_train: int = 9000
    n_test: int = 3000
    eval_every: int = 20
    eval_batch: int = 1000
    best_contexts: int = 100
    best_particles: int = 2048
    record_example_losses: bool = False
    seed: int = 0
    threads: int | None = None
    checkpoint_every: int = 200

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "n_test", "eval_every", "eval_batch",
                     "plateau_patience", "checkpoint_every"):  # fmt: skip
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"`{name}` must be a positive int; got {v!r}.")
        if not (isinstance(self.n_train, int) and self.n_train >= 0):
            raise ValueError(f"`n_train` must be an int >= 0; got {self.n_train!r}.")
        if not (isinstance(self.best_contexts, int) and 0 <= self.best_contexts):
            raise ValueError(f"`best_contexts` must be an int >= 0; got {self.best_contexts!r}.")
        if not (isinstance(self.best_particles, int) and self.best_particles >= 4):
            raise ValueError(f"`best_particles` must be an int >= 4; got {self.best_particles!r}.")
        if not (isinstance(self.plateau_cooldown, int) and self.plateau_cooldown >= 0):
            raise ValueError(
                f"`plateau_cooldown` must be an int >= 0; got {self.plateau_cooldown!r}."
            )
        _finite(self, "lr", positive=True)
        _finite(self, "weight_decay")
        _finite(self, "sam_rho")
        _finite(self, "plateau_threshold")
        _finite(self, "min_lr")
        _finite(self, "lr_warn")
        if self.grad_clip is not None:
            _finite(self, "grad_clip", positive=True, extra=" or None")
        if self.min_lr > self.lr:
            raise ValueError(
                f"`min_lr`={self.min_lr!r} is above `lr`={self.lr!r}; the floor must be <= lr."
            )
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"`optimizer`={self.optimizer!r} unknown; choose one of {OPTIMIZERS}.")
        if self.sam_base not in ("adamw", "sgd"):
            raise ValueError(f"`sam_base`={self.sam_base!r} unknown; choose 'adamw' or 'sgd'.")
        if self.scheduler not in SCHEDULERS:
            raise ValueError(
                f"`scheduler`={self.scheduler!r} unknown; choose one of {SCHEDULERS} "
                "('none' disables it)."
            )
        if not 0 < self.plateau_factor < 1:
            raise ValueError(f"`plateau_factor` must be in (0, 1); got {self.plateau_factor!r}.")
        if not self.online and self.batch_size > self.n_train:
            raise ValueError(
                f"`batch_size`={self.batch_size} is larger than the dataset `n_train`="
                f"{self.n_train} and batches are drawn without replacement; lower `batch_size`, "
                "raise `n_train`, or set `online=True`."
            )


def _finite(cfg, name: str, *, positive: bool = False, extra: str = "") -> None:
    """Raise ``ValueError`` unless ``cfg.name`` is a finite real ``> 0`` (or ``>= 0``)."""
    v = getattr(cfg, name)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if positive else v < 0):
        want = "a finite number > 0" if positive else "a finite number >= 0"
        raise ValueError(f"`{name}` must be {want}{extra}; got {v!r}.")


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A full run: chain (data), model and training settings.

    Attributes:
        chain: the data-generating process.
        model: the model config; its ``d``, ``L`` and ``w`` must match the chain.
        train: the optimisation settings.
        seed: seed of the chain (ground-truth matrices and datasets).
    """

    chain: ChainConfig
    model: MinimalConfig | FullConfig
    train: TrainConfig = TrainConfig()
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.chain, ChainConfig):
            raise TypeError(f"`chain` must be a ChainConfig; got {type(self.chain).__name__}.")
        if not isinstance(self.model, (MinimalConfig, FullConfig)):
            raise TypeError(
                f"`model` must be MinimalConfig or FullConfig; got {type(self.model).__name__}."
            )
        if not isinstance(self.train, TrainConfig):
            raise TypeError(f"`train` must be a TrainConfig; got {type(self.train).__name__}.")
        c, m = self.chain, self.model
        if (m.d, m.L, m.w) != (c.d, c.L, c.w):
            raise ValueError(
                f"model (d, L, w)={(m.d, m.L, m.w)} does not match the chain {(c.d, c.L, c.w)}; "
                "build both from the same values (ExperimentConfig.minimal/full do)."
            )

    @classmethod
    def minimal(cls, *, w: int = 6, h: int = 3, m: float = 1.7, b0: float = 10.0, d: int = 50,
                T: int = 20, init_scale: float = 1.0, context: int | None = None,
                train: TrainConfig | None = None, seed: int = 0,
                chain: ChainConfig | None = None) -> ExperimentConfig:  # fmt: skip
        """Minimal-model experiment (Table 4 minimal column; Fig. 1 bottom, Fig. 4, Figs. 6-7)."""
        chain = chain or ChainConfig.hierarchical(w=w, h=h, m=m, b0=b0, d=d, T=T)
        model = MinimalConfig(d=chain.d, L=chain.L, w=chain.w, n_head=chain.h,
                              init_scale=init_scale, context=context)  # fmt: skip
        return cls(chain, model, train or TrainConfig(), seed)

    @classmethod
    def full(cls, *, w: int = 12, h: int = 3, m: float = 1.7, b0: float = 10.0, d: int = 50,
             T: int = 20, context: int | None = None, train: TrainConfig | None = None,
             seed: int = 0, chain: ChainConfig | None = None,
             **model_kw) -> ExperimentConfig:  # fmt: skip
        """Full-model experiment (Table 3, Table 4 full column; Figs. 2-3, 5, 8-9)."""
        chain = chain or ChainConfig.hierarchical(w=w, h=h, m=m, b0=b0, d=d, T=T)
        model = FullConfig(d=chain.d, L=chain.L, w=chain.w, n_head=model_kw.pop("n_head", 3),
                           context=context, **model_kw)  # fmt: skip
        return cls(chain, model, train or TrainConfig(), seed)

    def replace(self, **kw) -> ExperimentConfig:
        """Copy with top-level fields replaced (``train=...``, ``model=...``)."""
        return dataclasses.replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (for provenance)."""
        d = dataclasses.asdict(self)
        d["model_kind"] = type(self.model).__name__
        return d


@dataclasses.dataclass
class TrainResult:
    """Outcome of :func:`train`.

    Attributes:
        ds: ``xarray.Dataset`` with dims ``step, head, group, restricted, reference, query, key``
            (and ``example`` when recorded); ``attrs["config"]`` holds the experiment config.
        model: the trained model (eval mode).
        data: the :class:`~sims.markov.chain.MarkovData` used.
        status: ``"success"`` or ``"failed"`` (the message says "diverged at step k": a
            non-finite training loss; training stopped
            there and the last evaluation is of the diverged model).
        message: human-readable status.
        seconds: wall time of the run (this process only when resumed).
        step_seconds: mean seconds per optimisation step.
    """

    ds: Any
    model: torch.nn.Module
    data: MarkovData
    status: str
    message: str
    seconds: float
    step_seconds: float

    @property
    def success(self) -> bool:
        """``status == "success"``."""
        return self.status == "success"


def group_mass(attn: np.ndarray, chain: ChainConfig) -> np.ndarray:
    """Attention mass per head and lag group (digest §3.1), ``(..., H, h)``.

    Args:
        attn: ``(..., H, T, L)`` attention of the scored queries ``p = w-1..L-2`` (0-based).
        chain: the chain config (lags).

    Returns:
        ``M[..., k, g] = mean_query sum_{l in I(g)} attn[..., k, query, p + 1 - l]``.
    """
    T, L, w = chain.T, chain.L, chain.w
    p = np.arange(w - 1, L - 1)  # (T,)
    out = []
    for lags in chain.lags:
        cols = p[:, None] + 1 - np.asarray(lags)[None, :]  # (T, |I|) key index of each lag
        rows = np.broadcast_to(np.arange(T)[:, None], cols.shape)
        out.append(attn[..., rows, cols].sum(-1).mean(-1))  # (..., H)
    return np.stack(out, axis=-1)


@torch.no_grad()
def predict_log_probs(model: torch.nn.Module, x: np.ndarray, batch: int = 1000) -> np.ndarray:
    """Model log-probabilities ``(N, T, d)`` at the scored positions (float32)."""
    model.eval()
    out = []
    for i in range(0, len(x), batch):
        xb = torch.as_tensor(x[i : i + batch], device=_device(model))
        out.append(F.log_softmax(model(xb).float(), -1).cpu().numpy())
    return np.concatenate(out)


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


_BEST_CACHE: dict[tuple, dict[str, np.ndarray]] = {}


def best_truths(data: MarkovData, n_contexts: int, n_particles: int) -> dict[str, np.ndarray]:
    """Best-predictor restricted truths on the first ``n_contexts`` test sequences, and floors.

    Computed once per (chain, test set, sizes) in this process (the runs of one figure share it).

    Returns:
        ``{"log_probs": (h, n, T, d), "kl_floor": (h,), "kl_floor_first": (h,),
        "kl_floor_spread": (h,), "excess_floor": (h,), "method": str}``:
        ``kl_floor[i] = E KL(f_{A*_{1:i}} || f^best_{1:i})`` (the least ``KL_i`` of a model that
        uses exactly groups ``1..i`` optimally), ``kl_floor_first`` the same at the first scored
        token (where the unseen lags are i.i.d. uniform seeds), ``excess_floor[i] =
        E KL(p* || f^best_{1:i})`` (the excess-loss plateau of stage ``i``) and, for the Monte
        Carlo method, ``kl_floor_spread`` = the floor at ``n_particles/4`` minus the floor at
        ``n_particles`` (bounds the remaining Monte Carlo bias when it decays at least as
        ``n**-0.5``; 0 for the exact method).
    """
    from .chain import best_restricted_log_probs, kl_divergence

    chain = data.chain
    cfg = chain.config
    x = data.test[:n_contexts]
    key = (cfg, chain.seed, x.tobytes(), n_particles)
    if key in _BEST_CACHE:
        return _BEST_CACHE[key]
    exact = cfg.d ** int(cfg.w) <= 2**18
    method = "exact" if exact else "monte-carlo"
    truth = chain.log_probs(x)
    lp, floor, first, spread, excess = [], [], [], [], []
    for i in range(1, cfg.h + 1):
        b = best_restricted_log_probs(chain, x, i, method=method, n_particles=n_particles,
                                      seed=chain.seed)  # fmt: skip
        f = chain.log_probs(x, upto=i)
        kl = kl_divergence(f, b)
        lp.append(b)
        floor.append(kl.mean())
        first.append(kl[:, 0].mean())
        excess.append(kl_divergence(truth, b).mean())
        if not exact and i < cfg.h:
            b4 = best_restricted_log_probs(chain, x, i, method=method,
                                           n_particles=max(n_particles // 4, 1),
                                           seed=chain.seed + 1)  # fmt: skip
            spread.append(kl_divergence(f, b4).mean() - floor[-1])
        else:
            spread.append(0.0)
    out = {"log_probs": np.stack(lp), "kl_floor": np.array(floor),
           "kl_floor_first": np.array(first), "kl_floor_spread": np.array(spread),
           "excess_floor": np.array(excess), "method": method}  # fmt: skip
    _BEST_CACHE[key] = out
    return out


class _Evaluator:
    """Pre-computes truth log-probs on the test set; evaluates a model in chunks."""

    def __init__(self, data: MarkovData, reference: Mapping[str, np.ndarray] | None,
                 batch: int, device, best_contexts: int = 0,
                 best_particles: int = 2048) -> None:  # fmt: skip
        chain = data.chain
        self.data, self.batch, self.device = data, batch, device
        h = chain.config.h
        self.truth = [
            torch.as_tensor(chain.log_probs(data.test, upto=i), dtype=torch.float32)
            for i in range(1, h + 1)
        ]  # h x (N, T, d)
        self.n_best = min(best_contexts, len(data.test))
        self.best = best_truths(data, self.n_best, best_particles) if self.n_best else None
        self.best_lp = (torch.as_tensor(self.best["log_probs"], dtype=torch.float32)
                        if self.best else None)  # (h, n_best, T, d)  # fmt: skip
        self.entropy = float(-(self.truth[-1].exp() * self.truth[-1]).sum(-1).mean())
        self.reference = {k: torch.as_tensor(v, dtype=torch.float32)
                          for k, v in (reference or {}).items()}  # fmt: skip
        for k, v in self.reference.items():
            if tuple(v.shape) != tuple(self.truth[0].shape):
                raise ValueError(
                    f"`reference[{k!r}]` must have shape {tuple(self.truth[0].shape)} (test "
                    f"log-probs); got {tuple(v.shape)}."
                )
        self.test = torch.as_tensor(data.test)
        self.targets = self.test[:, chain.config.w :]

    @torch.no_grad()
    def __call__(self, model: torch.nn.Module) -> dict[str, np.ndarray]:
        model.eval()
        n = len(self.test)
        h = len(self.truth)
        ce = 0.0
        kl = np.zeros(h)
        klb = np.zeros(h)
        klr = np.zeros(len(self.reference))
        attn_sum = None
        for i in range(0, n, self.batch):
            sl = slice(i, i + self.batch)
            logits, att = model(self.test[sl].to(self.device), return_attn=True)
            lp = F.log_softmax(logits.float(), -1).cpu()  # (b, T, d)
            ce += float(-lp.gather(-1, self.targets[sl, :, None]).sum())
            for r in range(h):
                ref = self.truth[r][sl]
                kl[r] += float((ref.exp() * (ref - lp)).sum())
            if self.best_lp is not None and i < self.n_best:
                nb = min(self.n_best - i, len(lp))
                ref = self.best_lp[:, i : i + nb]  # (h, nb, T, d)
                klb += (ref.exp() * (ref - lp[None, :nb])).sum((1, 2, 3)).double().numpy()
            for j, ref in enumerate(self.reference.values()):
                ref = ref[sl]
                klr[j] += float((ref.exp() * (ref - lp)).sum())
            a = att.float().sum(1).cpu()  # (H, T, L)
            attn_sum = a if attn_sum is None else attn_sum + a
        npos = n * self.targets.shape[1]
        return {
            "test_loss": ce / npos,
            "kl_restricted": kl / npos,
            "kl_best": klb / max(self.n_best * self.targets.shape[1], 1),
            "kl_reference": klr / npos,
            "attention": (attn_sum / n).numpy(),
        }

    @torch.no_grad()
    def example_losses(self, model: torch.nn.Module, train: np.ndarray) -> np.ndarray:
        model.eval()
        out = []
        w = self.data.chain.config.w
        for i in range(0, len(train), self.batch):
            xb = torch.as_tensor(train[i : i + self.batch], device=self.device)
            lp = F.log_softmax(model(xb).float(), -1)
            out.append((-lp.gather(-1, xb[:, w:, None])).mean((1, 2)).cpu().numpy())
        return np.concatenate(out)


def evaluate(model: torch.nn.Module, data: MarkovData,
             reference: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:  # fmt: skip
    """One evaluation of ``model`` on ``data.test`` (the metrics listed in the module docstring)."""
    ev = _Evaluator(data, reference, 1000, _device(model))
    out = ev(model)
    out.pop("kl_best")
    out["excess_loss"] = out["test_loss"] - ev.entropy
    out["group_mass"] = group_mass(out["attention"], data.chain.config)
    return out


def make_scheduler(opt: torch.optim.Optimizer, cfg: TrainConfig):
    """The ReduceLROnPlateau of Table 2 as ``cfg`` configures it (``None`` for ``"none"``)."""
    if cfg.scheduler == "none":
        return None
    return torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt, mode="min", factor=cfg.plateau_factor, patience=cfg.plateau_patience,
        threshold=cfg.plateau_threshold, threshold_mode="rel", cooldown=cfg.plateau_cooldown,
        min_lr=cfg.min_lr,
    )  # fmt: skip


def _make_optimizer(model: torch.nn.Module, cfg: TrainConfig):
    from sims.optim import SAM

    groups = param_groups(model, cfg.weight_decay)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(groups, lr=cfg.lr)
    base = torch.optim.AdamW if cfg.sam_base == "adamw" else torch.optim.SGD
    return SAM(groups, base, rho=cfg.sam_rho, lr=cfg.lr)


def _base(opt):
    return getattr(opt, "base_optimizer", opt)


#: Entries every checkpoint written by :func:`train` holds.
_CHECKPOINT_KEYS = ("config", "model", "opt", "sched", "batch_rng", "torch_rng", "hist", "step",
                    "run_loss")  # fmt: skip


def load_checkpoint(path: str | os.PathLike, exp: ExperimentConfig | None = None) -> dict:
    """Read a checkpoint written by :func:`train` (``checkpoint=``), checking what it holds.

    Args:
        path: the checkpoint file.
        exp: when given, the checkpoint must have been written by this experiment config.

    Returns:
        The checkpoint's state dict.

    Raises:
        sims.runtime.io.UnreadableFileError: (a ``ValueError``) naming the file, when it is not a
            checkpoint of :func:`train` (truncated, another format) or was written by another
            config; the message says to delete it or give another path.
    """
    from sims.runtime.io import unreadable

    fix = "delete it, or give another --checkpoint path to start afresh"
    try:
        state = torch.load(path, weights_only=False, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - torch raises anything from unpickling junk
        raise unreadable(path, exc, what="checkpoint", fix=fix) from None
    missing = [k for k in _CHECKPOINT_KEYS if k not in state] if isinstance(state, dict) else ["*"]
    if missing:
        err = KeyError(f"no {', '.join(missing)} entry" if missing != ["*"] else "not a dict")
        raise unreadable(path, err, what="checkpoint", fix=fix)
    if exp is not None and state["config"] != exp.to_dict():
        from sims.runtime.io import UnreadableFileError

        raise UnreadableFileError(
            f"checkpoint {str(path)!r} was written by a different config; {fix}."
        )
    return state


def train(
    exp: ExperimentConfig,
    *,
    data: MarkovData | None = None,
    reference: Mapping[str, np.ndarray] | None = None,
    train_index: np.ndarray | None = None,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = False,
    device: str | torch.device = "cpu",
) -> TrainResult:
    """Train a model on the Markov task and record the stage metrics (App. B, Table 2).

    Args:
        exp: the experiment config.
        data: datasets to use (default: :func:`make_dataset` from ``exp.chain``/``exp.seed``).
        reference: ``{name: (n_test, T, d) log-probs}`` of reference models on ``data.test``
            (e.g. restricted-context models), logged as ``kl_reference``.
        train_index: epoch index list with repeats (upsampling, :mod:`sims.selection`); default
            every training sequence once.
        checkpoint: path of a checkpoint file: resumed from when it exists, written every
            ``checkpoint_every`` steps and at the end.
        progress: show a tqdm progress bar.
        device: torch device.

    Returns:
        :class:`TrainResult`.
    """
    import xarray as xr

    if not isinstance(exp, ExperimentConfig):
        raise TypeError(f"`exp` must be an ExperimentConfig; got {type(exp).__name__}.")
    device = check_device(device)
    cfg = exp.train
    if cfg.threads is not None:
        torch.set_num_threads(cfg.threads)
    if data is None:
        chain = MarkovChain(exp.chain, seed=exp.seed)
        data = make_dataset(chain, 0 if cfg.online else cfg.n_train, cfg.n_test)
    chain = data.chain
    if chain.config != exp.chain:
        raise ValueError("`data` was drawn from a different chain than `exp.chain`.")
    if not cfg.online and len(data.train) < cfg.batch_size:
        raise ValueError(
            f"`batch_size`={cfg.batch_size} is larger than the dataset ({len(data.train)} "
            "sequences) and batches are drawn without replacement; lower `batch_size` or use "
            "`online=True`."
        )
    ss_model = np.random.SeedSequence(cfg.seed, spawn_key=(3, 0))
    ss_batch = np.random.SeedSequence(cfg.seed, spawn_key=(3, 1))
    torch.manual_seed(int(ss_model.generate_state(1)[0]))
    model = build_model(exp.model).to(device)
    opt = _make_optimizer(model, cfg)
    sched = make_scheduler(_base(opt), cfg)
    batch_rng = np.random.default_rng(ss_batch)
    if cfg.online:
        batches = OnlineStream(chain, cfg.batch_size, batch_rng)
    else:
        batches = BatchSampler(len(data.train), cfg.batch_size, batch_rng, index=train_index)
    ev = _Evaluator(data, reference, cfg.eval_batch, device, cfg.best_contexts,
                    cfg.best_particles)  # fmt: skip
    hist: dict[str, list] = {k: [] for k in ("step", "test_loss", "kl_restricted", "kl_best",
                                              "kl_reference", "attention", "lr", "train_loss",
                                              "example_loss")}  # fmt: skip
    start, run_loss = 0, float("nan")
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.exists():
        state = load_checkpoint(ckpt, exp)
        model.load_state_dict(state["model"])
        _base(opt).load_state_dict(state["opt"])
        if sched is not None:
            sched.load_state_dict(state["sched"])
        batch_rng.bit_generator.state = state["batch_rng"]
        if not cfg.online:
            batches._perm, batches._pos = state["perm"], state["pos"]
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and state.get("cuda_rng") is not None:  # dropout on the GPU
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        hist, start, run_loss = state["hist"], state["step"], state["run_loss"]

    lr_warning: list[str] = []

    def step_scheduler(value: float, step: int) -> None:
        sched.step(value)
        lr = _base(opt).param_groups[0]["lr"]
        if lr < cfg.lr_warn and not lr_warning:
            lr_warning.append(
                f"learning rate {lr:.3g} fell below {cfg.lr_warn:g} at step {step} "
                f"(scheduler {cfg.scheduler!r}); later stages may never be learned: raise "
                "`min_lr`, `plateau_patience` or use scheduler='plateau'/'none'"
            )
            warnings.warn(lr_warning[0], RuntimeWarning, stacklevel=3)

    def record(step: int) -> None:
        m = ev(model)
        hist["step"].append(step)
        hist["test_loss"].append(m["test_loss"])
        hist["kl_restricted"].append(m["kl_restricted"])
        hist["kl_best"].append(m["kl_best"])
        hist["kl_reference"].append(m["kl_reference"])
        hist["attention"].append(m["attention"])
        hist["lr"].append(_base(opt).param_groups[0]["lr"])
        hist["train_loss"].append(run_loss)
        if cfg.record_example_losses and not cfg.online:
            hist["example_loss"].append(ev.example_losses(model, data.train))
        if sched is not None and cfg.scheduler == "plateau" and step > 0:
            if math.isfinite(m["test_loss"]):
                step_scheduler(m["test_loss"], step)
        model.train()

    def save(step: int) -> None:
        from sims.runtime.io import atomic_path

        state = {
            "config": exp.to_dict(), "model": model.state_dict(), "opt": _base(opt).state_dict(),
            "sched": sched.state_dict() if sched is not None else None,
            "batch_rng": batch_rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if device.type == "cuda" else None,
            "perm": getattr(batches, "_perm", None), "pos": getattr(batches, "_pos", None),
            "hist": hist, "step": step, "run_loss": run_loss,
        }  # fmt: skip
        with atomic_path(ckpt) as tmp:
            torch.save(state, tmp)

    w = exp.chain.w
    status, message = "success", "finished"
    t0 = time.perf_counter()
    if start == 0:
        record(0)
    model.train()
    it = range(start, cfg.steps)
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(it, desc="train", initial=start, total=cfg.steps)
    train_time, n_steps = 0.0, 0
    for step in it:
        ts = time.perf_counter()
        xb = next(batches)
        xb = torch.as_tensor(data.train[xb] if not cfg.online else xb, device=device)
        tgt = xb[:, w:].reshape(-1)

        def closure(xb=xb, tgt=tgt):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xb).reshape(-1, exp.chain.d), tgt)
            loss.backward()
            return loss

        if cfg.optimizer == "sam":
            loss = closure()
            opt.first_step(zero_grad=True)
            closure()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.second_step(zero_grad=False)
        else:
            loss = closure()
            if cfg.grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
        run_loss = float(loss.detach())
        train_time += time.perf_counter() - ts
        n_steps += 1
        if not math.isfinite(run_loss):
            status = "failed"
            message = (f"diverged at step {step + 1}: non-finite training loss ({run_loss}); "
                       f"lower `lr` (now {cfg.lr:g}) or keep `grad_clip`")  # fmt: skip
            record(step + 1)
            break
        if sched is not None and cfg.scheduler == "plateau_step":
            step_scheduler(run_loss, step + 1)
        if (step + 1) % cfg.eval_every == 0 or step + 1 == cfg.steps:
            record(step + 1)
            if progress:
                it.set_postfix(loss=f"{run_loss:.3f}", kl=f"{hist['kl_restricted'][-1][-1]:.3f}")
        if ckpt is not None and ((step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps):
            save(step + 1)
    seconds = time.perf_counter() - t0
    model.eval()
    attn = np.stack(hist["attention"])  # (n_eval, H, T, L)
    h = exp.chain.h
    kl = np.stack(hist["kl_restricted"])
    ent = ev.entropy
    ref_names = list(reference or {})
    data_vars = {
        "test_loss": ("step", np.asarray(hist["test_loss"])),
        "excess_loss": ("step", np.asarray(hist["test_loss"]) - ent),
        "train_loss": ("step", np.asarray(hist["train_loss"])),
        "lr": ("step", np.asarray(hist["lr"])),
        "kl_restricted": (("step", "restricted"), kl),
        **({"kl_best": (("step", "restricted"), np.stack(hist["kl_best"])),
            "kl_floor": ("restricted", ev.best["kl_floor"]),
            "kl_floor_first": ("restricted", ev.best["kl_floor_first"]),
            "kl_floor_spread": ("restricted", ev.best["kl_floor_spread"]),
            "excess_floor": ("restricted", ev.best["excess_floor"])}
           if ev.best is not None else {}),  # fmt: skip
        "attention": (("step", "head", "query", "key"), attn),
        "group_mass": (("step", "head", "group"), group_mass(attn, exp.chain)),
    }
    # No references: no `reference` dimension. A zero-length dimension can only be stored as
    # NetCDF's unlimited one, which NetCDF-3 (the scipy engine, used where netCDF4 is missing)
    # allows only as a variable's first dimension: `kl_reference (step, reference)` with zero
    # references wrote a file neither engine could read back (issue 30).
    if ref_names:
        data_vars["kl_reference"] = (("step", "reference"), np.stack(hist["kl_reference"]))
    if hist["example_loss"]:
        data_vars["example_loss"] = (("step", "example"), np.stack(hist["example_loss"]))
    ds = xr.Dataset(
        data_vars,
        coords={
            "step": np.asarray(hist["step"]),
            "head": np.arange(attn.shape[1]),
            "group": np.arange(1, h + 1),
            "restricted": np.arange(1, h + 1),
            **({"reference": ref_names} if ref_names else {}),
            "query": np.arange(exp.chain.w - 1, exp.chain.L - 1),
            "key": np.arange(exp.chain.L),
        },
        attrs={
            "config": exp.to_dict(),
            "entropy": ent,
            "status": status,
            "message": message,
            "lr_warning": lr_warning[0] if lr_warning else "",
            "best_method": ev.best["method"] if ev.best is not None else "none",
            "best_contexts": ev.n_best,
            "seconds": seconds,
            "step_seconds": train_time / max(n_steps, 1),
        },  # fmt: skip
    )
    return TrainResult(ds, model, data, status, message, seconds, train_time / max(n_steps, 1))


@dataclasses.dataclass(frozen=True)
class StageReport:
    """Stages read off a training run (:func:`detect_stages`).

    Attributes:
        group_times: ``(h,)`` first step at which some head puts >= ``threshold`` attention mass
            on group ``g`` (``inf`` if never): the stage in which pattern ``g`` is learned.
        kl_times: ``(h,)`` first step at which ``KL_i`` is within 10% (of its total drop) of its
            minimum.
        n_stages: distinct learned-pattern times after merging those within a factor ``ratio``.
        order_ok: patterns learned in the order I(1) -> I(2) -> ... (finite times increasing).
        heads_on_first: the most heads holding >= threshold mass on group 1 at one evaluation
            before pattern 2 is learned (competitive phase: > 1).
        final_assignment: ``(H,)`` group with the most mass per head at the end (cooperative
            phase: one head per group).
        n_patterns: distinct groups some head holds >= threshold mass on at the end.
    """

    group_times: np.ndarray
    kl_times: np.ndarray
    n_stages: int
    order_ok: bool
    heads_on_first: int
    final_assignment: np.ndarray
    n_patterns: int


def detect_stages(ds, *, threshold: float = 0.5, ratio: float = 1.3) -> StageReport:
    """Stage times and phase diagnostics from a :func:`train` dataset.

    Args:
        ds: the result dataset.
        threshold: attention-mass level that counts as "a head attends to this group".
        ratio: two consecutive pattern times ``t < t'`` count as one stage when
            ``t' <= ratio * t`` (stages are spread on a log time scale; same rule as
            :func:`sims.markov.tensor_dynamics.count_stages`).
    """
    steps = ds["step"].values
    M = ds["group_mass"].values  # (n, H, h)
    h = M.shape[-1]
    best = M.max(1)  # (n, h)
    gt = np.full(h, np.inf)
    for g in range(h):
        hit = np.nonzero(best[:, g] >= threshold)[0]
        if hit.size:
            gt[g] = steps[hit[0]]
    kl = ds["kl_restricted"].values
    kt = np.full(h, np.inf)
    for i in range(h):  # a diverged run has NaN rows: use the finite evaluations only
        fin = np.isfinite(kl[:, i])
        if not fin.any():
            continue
        lo, hi = kl[fin, i].min(), kl[fin, i][0]
        hit = np.nonzero(fin & (kl[:, i] <= lo + 0.1 * (hi - lo)))[0]
        kt[i] = steps[hit[0]]
    from .tensor_dynamics import count_stages

    n_stages = count_stages(np.maximum(gt, 1e-9), ratio=ratio)
    f = gt[np.isfinite(gt)]
    order_ok = bool(np.all(np.isfinite(gt[: f.size])) and np.all(np.diff(f) >= 0))
    before = steps < gt[1] if h > 1 else np.ones_like(steps, dtype=bool)
    heads_first = int((M[before, :, 0] >= threshold).sum(-1).max()) if before.any() else 0
    ok_rows = np.nonzero(np.isfinite(M).all((1, 2)))[0]
    last = M[ok_rows[-1]] if ok_rows.size else np.zeros(M.shape[1:])
    final = last.argmax(-1)
    n_pat = int(((last >= threshold).any(0)).sum())
    return StageReport(gt, kt, n_stages, order_ok, heads_first, final, n_pat)


#: Threshold grids of :func:`stage_band` (issue 16: stage counts depend on them).
BAND_THRESHOLDS = (0.4, 0.5, 0.6, 0.7)
BAND_RATIOS = (1.1, 1.3, 1.5, 2.0)


def stage_band(ds, *, thresholds=BAND_THRESHOLDS, ratios=BAND_RATIOS):
    """Stage counts of :func:`detect_stages` over a grid of mass thresholds and merge ratios.

    The number of stages read off a run depends on both knobs (at m = 1.3 one run gives 1, 2 or
    3 stages); report it as a band, not as one number.

    Returns:
        ``xarray.Dataset`` with ``n_stages (threshold, ratio)``, ``n_patterns (threshold,)`` and
        ``pattern_time (threshold, group)``; ``attrs`` ``min``/``max`` of ``n_stages`` and the
        count at the defaults (``threshold=0.5, ratio=1.3``).
    """
    import xarray as xr

    thresholds, ratios = [float(x) for x in thresholds], [float(x) for x in ratios]
    if not thresholds or not ratios or not all(0 < x < 1 for x in thresholds):
        raise ValueError(f"`thresholds` must be in (0, 1) and non-empty; got {thresholds!r}.")
    if not all(r >= 1 for r in ratios):
        raise ValueError(f"`ratios` must be >= 1 and non-empty; got {ratios!r}.")
    n = np.zeros((len(thresholds), len(ratios)), dtype=int)
    npat = np.zeros(len(thresholds), dtype=int)
    times = []
    for i, th in enumerate(thresholds):
        for j, r in enumerate(ratios):
            rep = detect_stages(ds, threshold=th, ratio=r)
            n[i, j] = rep.n_stages
        npat[i] = rep.n_patterns
        times.append(rep.group_times)
    default = detect_stages(ds).n_stages
    return xr.Dataset(
        {"n_stages": (("threshold", "ratio"), n), "n_patterns": (("threshold",), npat),
         "pattern_time": (("threshold", "group"), np.array(times))},
        coords={"threshold": thresholds, "ratio": ratios,
                "group": np.arange(1, len(times[0]) + 1)},
        attrs={"min": int(n.min()), "max": int(n.max()), "default": int(default)},
    )  # fmt: skip
