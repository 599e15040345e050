"""``build_optimizer(name, model, ...)``: every optimizer of the package by name.

Names (:data:`OPTIMIZERS`):

=============  ==========================================================================
``sgd``        ``torch.optim.SGD`` (``momentum`` option)
``adamw``      ``torch.optim.AdamW``
``muon``       :class:`~sims.optim.muon.MuonAdamW`: Muon on hidden matrices, AdamW elsewhere
``sam``        SAM (seed 003 eq. 2) over ``base`` (``"adamw"`` or ``"sgd"``)
``fsam``       Functional-SAM (eq. 11)
``lsam``       Logit-SAM (App. D)
``angle_sam``  ANGLE-SAM (App. D; needs ``angle_weights=(w_logit, w_func)``)
``psam``       preconditioned SAM (eq. 12; AdamW base)
``pfsam``      preconditioned Functional-SAM (eq. 12 with eq. 11; AdamW base)
=============  ==========================================================================

Defaults that differ from torch's: ``betas=(0.9, 0.95)`` for every Adam (``adamw``, Muon's
AdamW group, the SAM family's AdamW base; ``torch.optim.AdamW``: ``(0.9, 0.999)``) and
``weight_decay=0.0`` (``torch.optim.AdamW``: 0.01; ``torch.optim.Muon``: 0.1), as in the
Hugging Face Trainer the paper's fine-tunes use; pass them to change them.

Weight decay goes to every matrix (hidden weights, embeddings, head) and never to gains and
biases (:func:`~sims.optim.muon.partition_params`). SAM-family options (``precond_norm``,
``precond_step0``, ``rho_warmup_steps``, ``nonfinite``, ``max_grad_norm``, ...) are those of
:class:`~sims.optim.torch_sam.SAMFamily`.

Examples:
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.LayerNorm(3))
    >>> opt = build_optimizer("pfsam", model, lr=1e-3, weight_decay=0.1, rho=0.1)
    >>> type(opt).__name__, opt.variant, opt.precondition
    ('SAMFamily', 'fsam', True)
    >>> [g["weight_decay"] for g in opt.param_groups]
    [0.1, 0.0]
    >>> build_optimizer("adam", model, lr=1e-3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown optimizer 'adam'; choose one of sgd, adamw, muon, sam, fsam, lsam, ...
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from .muon import MuonAdamW, partition_params
from .torch_sam import SAMFamily

__all__ = ["OPTIMIZERS", "SAM_FAMILY", "build_optimizer"]

#: SAM-family names -> (variant, precondition).
SAM_FAMILY: dict[str, tuple[str, bool]] = {
    "sam": ("sam", False),
    "fsam": ("fsam", False),
    "lsam": ("lsam", False),
    "angle_sam": ("angle_sam", False),
    "psam": ("sam", True),
    "pfsam": ("fsam", True),
}
#: Every name :func:`build_optimizer` accepts.
OPTIMIZERS: tuple[str, ...] = ("sgd", "adamw", "muon", *SAM_FAMILY)

_BASES = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
_SAM_OPTIONS = tuple(
    k for k, v in inspect.signature(SAMFamily.__init__).parameters.items()
    if v.kind is inspect.Parameter.KEYWORD_ONLY and k != "variant"
)  # fmt: skip
_MUON_OPTIONS = ("muon_lr", "momentum", "nesterov", "ns_steps", "adjust_lr_fn", "embeddings",
                 "head")  # fmt: skip


def _groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    part = partition_params(model)
    groups = [dict(params=part.decay, weight_decay=weight_decay),
              dict(params=part.no_decay, weight_decay=0.0)]  # fmt: skip
    return [g for g in groups if g["params"]]


def _check_options(name: str, options: dict[str, Any], allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise TypeError(
            f"optimizer {name!r} got unknown option(s) {unknown}; it accepts "
            f"{sorted(allowed) or 'no extra options'}."
        )


def build_optimizer(
    name: str,
    model: torch.nn.Module,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.95),
    eps: float = 1e-8,
    rho: float | None = None,
    base: str | None = None,
    **variant_options: Any,
) -> torch.optim.Optimizer:
    """Build optimizer ``name`` over ``model``'s trainable parameters.

    Args:
        name: one of :data:`OPTIMIZERS`.
        model: the module to train (only ``requires_grad`` parameters are optimized).
        lr: learning rate.

    Other Parameters:
        weight_decay: decoupled decay on matrices (AdamW, Muon) or L2 (SGD); 0 on gains/biases.
            Default 0 (torch's AdamW: 0.01).
        betas: Adam's (AdamW, Muon's AdamW group, SAM-family AdamW base). Default
            ``(0.9, 0.95)`` (torch's AdamW: ``(0.9, 0.999)``).
        eps: Adam's epsilon.
        rho: SAM-family radius (default 0.05; rejected for the other names).
        base: SAM-family base optimizer, ``"adamw"`` (default) or ``"sgd"`` (``psam``/``pfsam``:
            AdamW only); rejected for the other names.
        **variant_options: ``momentum``/``nesterov`` (SGD, SGD base), Muon's ``muon_lr``,
            ``momentum``, ``nesterov``, ``ns_steps``, ``adjust_lr_fn`` and ``embeddings``/``head``
            (tables and an untied head that :func:`~sims.optim.muon.partition_params` cannot
            recognise), or the SAM-family options of :class:`~sims.optim.torch_sam.SAMFamily`
            (``adaptive``, ``sync_perturbation``, ``grad_scaler``, ``rho_warmup_steps``, ...).

    Returns:
        A ``torch.optim.Optimizer``.

    Raises:
        ValueError: unknown ``name``/``base``, bad ``lr``/``weight_decay``, a preconditioned
            variant over SGD, a model with no trainable parameter.
        TypeError: an option the chosen optimizer does not take.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}.")
    if not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr < 0:
        raise ValueError(f"`lr` must be a finite number >= 0; got {lr!r}.")
    if not isinstance(weight_decay, (int, float)) or not weight_decay >= 0:
        raise ValueError(f"`weight_decay` must be >= 0; got {weight_decay!r}.")
    if name not in SAM_FAMILY:
        given = [k for k, v in (("rho", rho), ("base", base)) if v is not None]
        if given:
            raise TypeError(
                f"{given} only apply to the SAM family; optimizer {name!r} takes neither."
            )
    rho = 0.05 if rho is None else rho
    base = "adamw" if base is None else base
    if name == "muon":
        _check_options(name, variant_options, _MUON_OPTIONS)
        roles = {k: variant_options.pop(k) for k in ("embeddings", "head") if k in variant_options}
        return MuonAdamW(partition_params(model, **roles), lr=lr, weight_decay=weight_decay,
                         betas=betas, eps=eps, **variant_options)  # fmt: skip
    groups = _groups(model, weight_decay)
    sgd_kw = {k: variant_options.pop(k) for k in ("momentum", "nesterov") if k in variant_options}
    if name == "sgd":
        _check_options(name, variant_options, ())
        return torch.optim.SGD(groups, lr=lr, **sgd_kw)
    if name == "adamw":
        _check_options(name, {**variant_options, **sgd_kw}, ())
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)
    variant, precondition = SAM_FAMILY[name]
    if base not in _BASES:
        raise ValueError(f"unknown `base` {base!r}; choose 'adamw' or 'sgd'.")
    if precondition and base != "adamw":
        raise ValueError(
            f"{name!r} preconditions with Adam's second moment and needs base='adamw'; got "
            f"base={base!r}. Use 'sam'/'fsam' for an SGD base."
        )
    _check_options(name, variant_options, tuple(o for o in _SAM_OPTIONS if o != "precondition"))
    base_kw = dict(lr=lr, betas=betas, eps=eps) if base == "adamw" else dict(lr=lr, **sgd_kw)
    if base == "adamw" and sgd_kw:
        raise TypeError(f"options {sorted(sgd_kw)} apply to base='sgd' only.")
    return SAMFamily(groups, _BASES[base], rho, variant=variant, precondition=precondition,
                     **variant_options, **base_kw)  # fmt: skip
