"""Optimizers of the package: optax-style JAX transformations and the torch SAM family.

One home for every optimizer, below both ``sims`` simulations and ``llm_validation``. Importing
``sims.optim`` imports neither JAX nor torch: each public name is resolved on first access
(PEP 562), from the submodule that defines it.

JAX (:mod:`sims.optim.optax_sam`, extra ``jax``), names unchanged from the old ``sims.optim``:
    ``gd``, ``sam``, ``sam_flow``, ``sam_gd``, ``sam_flow_gd``, ``METHODS``, ``SAMState``,
    ``global_norm``, ``sam_perturbation``, ``sam_gradient``, ``sam_flow_direction``, plus the
    Functional-SAM reference kernels ``functional_sam_gradient`` and
    ``preconditioned_perturbation`` (seed 003, eqs. 11-12; used to cross-check the torch side).

Torch (extra ``torch``):
    * :mod:`sims.optim.torch_sam`: pure kernels (``sam_perturbation``,
      ``adaptive_perturbation``, ``preconditioned_perturbation``, ``adam_preconditioner``,
      ``angle_combine``, ...; reach them through the submodule, since the JAX kernels own those
      names here) and the optimizer ``SAMFamily`` (SAM, Functional-SAM, Logit-SAM, ANGLE-SAM,
      their preconditioned and ASAM forms; several processes, mixed precision), with ``SAM`` its
      plain-SAM spelling (davda54/sam's signature), exported here.
    * :mod:`sims.optim.muon`: ``partition_params``, ``ParamPartition``, ``MuonAdamW``.
    * :mod:`sims.optim.factory`: ``build_optimizer(name, model, *, lr, ...)`` and
      ``OPTIMIZERS`` (the names it accepts).
    * :mod:`sims.optim.hf`: ``SAMFamilyTrainer`` (extra ``llm``; not re-exported here).
    * :mod:`sims.optim.diagnostics`: τ fractions, λ_max, Hutchinson traces, logit statistics.

Coming from davda54/sam:
    Change ``from sam import SAM`` to ``from sims.optim import SAM``; nothing else has to change.
    The constructor (``SAM(model.parameters(), torch.optim.SGD, rho=0.05, adaptive=False,
    lr=0.1, momentum=0.9)``), ``first_step``/``second_step`` and ``rho``'s meaning (for ASAM,
    ``adaptive=True``: ``‖e/|θ|‖ = ρ``) are the same, and a davda54-style closure (calls
    ``loss.backward()``, returns the loss) is detected and run as davda54/sam runs it
    (``benchmarks/compare_davda54_sam.py``: equal to 6e-12 over 20 float64 steps, SGD and
    AdamW bases, SAM and ASAM, both APIs). What you gain: the closure protocol ``(loss,
    logits)`` without ``backward`` (k micro-batches = one batch k times larger; Functional-,
    Logit-, ANGLE- and preconditioned SAM need it), ``sync_perturbation`` for
    ``DistributedDataParallel`` (all-reduced or per-replica ascent, one all-reduce per pass
    after ``opt.attach_ddp(ddp_model)``), fp16 ``grad_scaler=`` support, a NaN policy,
    ``rho_warmup_steps``, ``state_dict`` with counters, and ``SAMFamilyTrainer`` for the
    Hugging Face Trainer (gradient accumulation, bf16/fp16, ``accelerate launch``). Also as
    davda54's: ``adaptive`` may be given positionally (``SAM(params, SGD, 2.0, True, lr=0.1)``),
    each param group carries ``"rho"`` and ``"adaptive"``, the ASAM scale is ``|θ|`` with no
    ``η`` offset, and a zero gradient gives ``e = 0``. Differences: one ``rho`` (and one
    ``adaptive``) for all param groups; BatchNorm running statistics are updated only at θ,
    once per forward there (davda54 updates them at θ + e too unless the training loop calls its
    ``disable_running_stats``; ``batchnorm_stats="every_pass"`` restores that); a davda54
    ``SAM.state_dict()``, which lacks the base optimizer's state, is refused (load the base's
    ``state_dict()``); ``sync_perturbation=False`` under DDP is honoured by both APIs.

Examples:
    >>> import sys, sims.optim
    >>> "torch" in sys.modules and "jax" in sys.modules  # doctest: +SKIP
    False
    >>> sorted(n for n in sims.optim.__all__ if n.startswith("sam_f"))
    ['sam_flow', 'sam_flow_direction', 'sam_flow_gd']
"""

from __future__ import annotations

import importlib

# name -> submodule that defines it
_JAX_NAMES = (
    "SAMState", "global_norm", "sam_perturbation", "sam_gradient", "sam_flow_direction", "gd",
    "sam", "sam_flow", "sam_gd", "sam_flow_gd", "METHODS", "functional_sam_gradient",
    "preconditioned_perturbation",
)  # fmt: skip
_LAZY: dict[str, str] = {name: "optax_sam" for name in _JAX_NAMES}
_LAZY.update(
    SAM="torch_sam",
    SAMFamily="torch_sam",
    VARIANTS="torch_sam",
    NonFiniteGradientError="torch_sam",
    partition_params="muon",
    ParamPartition="muon",
    MuonAdamW="muon",
    build_optimizer="factory",
    OPTIMIZERS="factory",
)

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
