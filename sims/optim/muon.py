"""Parameter partition for transformers, and hybrid Muon (hidden matrices) + AdamW (the rest).

:func:`partition_params` splits a model's **trainable** parameters into

* ``hidden``: 2-D weight matrices inside the network (attention and MLP projections, LoRA
  factors): Muon's group, decayed;
* ``embeddings`` and ``head``: token/position embeddings and the LM head (tied heads count as
  embeddings): AdamW, decayed;
* ``other``: gains, biases and anything not 2-D: AdamW, never decayed.

It works for any Hugging Face causal LM (``get_input_embeddings``/``get_output_embeddings``),
PEFT models (only the adapters are trainable) and :mod:`sims.lm`. The same partition drives
weight decay for AdamW/SGD/SAM-family builds (decay on ``ndim >= 2``, as nanoGPT does) and the
Muon/AdamW split of :class:`MuonAdamW`, which wraps ``torch.optim.Muon`` (Newton–Schulz
orthogonalized momentum; ``adjust_lr_fn="match_rms_adamw"`` by default, so one learning rate
serves both groups) and ``torch.optim.AdamW``.

Examples:
    >>> import torch
    >>> model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4),
    ...                             torch.nn.LayerNorm(4))
    >>> part = partition_params(model)
    >>> [n for n, _ in part.hidden], [n for n, _ in part.embeddings], len(part.other)
    (['1.weight'], ['0.weight'], 3)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

__all__ = ["ParamPartition", "partition_params", "MuonAdamW"]

_HEAD_NAMES = ("lm_head", "embed_out", "output_projection")
_EMBED_NAMES = ("embed", "wte", "wpe", "word_embeddings", "position_embeddings")

Named = list[tuple[str, torch.nn.Parameter]]


@dataclasses.dataclass(frozen=True)
class ParamPartition:
    """Trainable parameters by role (each a list of ``(name, parameter)``).

    Attributes:
        hidden: 2-D hidden weight matrices (Muon's group; weight-decayed).
        embeddings: input (and tied output) embeddings (AdamW; weight-decayed).
        head: an untied LM head (AdamW; weight-decayed).
        other: norms' gains, biases, anything not 2-D (AdamW; no weight decay).
    """

    hidden: Named
    embeddings: Named
    head: Named
    other: Named

    @property
    def muon(self) -> list[torch.nn.Parameter]:
        """Parameters Muon updates: the hidden matrices."""
        return [p for _, p in self.hidden]

    @property
    def adamw(self) -> list[torch.nn.Parameter]:
        """Parameters AdamW updates in the hybrid: embeddings, head, norms and biases."""
        return [p for _, p in self.embeddings + self.head + self.other]

    @property
    def decay(self) -> list[torch.nn.Parameter]:
        """Weight-decayed parameters (every matrix: hidden, embeddings, head)."""
        return [p for _, p in self.hidden + self.embeddings + self.head]

    @property
    def no_decay(self) -> list[torch.nn.Parameter]:
        """Parameters never decayed (gains and biases)."""
        return [p for _, p in self.other]

    @property
    def names(self) -> dict[str, list[str]]:
        """The parameter names of each role."""
        return {f.name: [n for n, _ in getattr(self, f.name)] for f in dataclasses.fields(self)}

    def __len__(self) -> int:
        return len(self.hidden) + len(self.embeddings) + len(self.head) + len(self.other)


def _param_ids(module: Any) -> set[int]:
    if isinstance(module, torch.nn.Module):
        return {id(p) for p in module.parameters()}
    return set()


def _get(model: torch.nn.Module, getter: str) -> Any:
    fn = getattr(model, getter, None)
    if not callable(fn):
        return None
    try:
        return fn()
    except (NotImplementedError, AttributeError, TypeError):
        return None


def partition_params(model: torch.nn.Module) -> ParamPartition:
    """Split ``model``'s trainable parameters into hidden matrices, embeddings, head and other.

    Args:
        model: any ``torch.nn.Module`` (HF causal LM, PEFT model, :class:`sims.lm.GPT`, ...).

    Returns:
        A :class:`ParamPartition` (parameters with ``requires_grad=False`` are left out).

    Raises:
        TypeError: if ``model`` is not a module.
        ValueError: if it has no trainable parameter.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    embed_ids = _param_ids(_get(model, "get_input_embeddings"))
    head_ids = _param_ids(_get(model, "get_output_embeddings"))
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            embed_ids |= _param_ids(module)
    hidden, embeddings, head, other = [], [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        lname = name.lower()
        if p.ndim < 2 or p.ndim > 2 and id(p) not in embed_ids:
            other.append((name, p))
        elif id(p) in embed_ids or any(k in lname for k in _EMBED_NAMES):
            embeddings.append((name, p))
        elif id(p) in head_ids or any(k in lname for k in _HEAD_NAMES):
            head.append((name, p))
        else:
            hidden.append((name, p))
    part = ParamPartition(hidden, embeddings, head, other)
    if len(part) == 0:
        raise ValueError(
            f"`model` ({type(model).__name__}) has no trainable parameters to optimize or "
            "perturb (every parameter has requires_grad=False); unfreeze some or attach "
            "adapters (e.g. LoRA)."
        )
    return part


class MuonAdamW(torch.optim.Optimizer):
    """Muon for the hidden matrices and AdamW for the rest, stepped together.

    Args:
        partition: from :func:`partition_params`.
        lr: AdamW's learning rate, and Muon's unless ``muon_lr`` is given (with
            ``adjust_lr_fn="match_rms_adamw"`` the Muon update has AdamW's RMS, so one rate fits).
        weight_decay: decoupled decay of every matrix (gains and biases are never decayed).
        betas, eps: AdamW's.
        muon_lr: Muon's learning rate (default ``lr``).
        momentum, nesterov, ns_steps, adjust_lr_fn: ``torch.optim.Muon``'s.

    The param groups are Muon's followed by AdamW's (each carries ``"muon": True/False``), so an
    LR scheduler scales both; ``state_dict``/``load_state_dict`` cover both inner optimizers.
    """

    def __init__(
        self,
        partition: ParamPartition,
        *,
        lr: float,
        weight_decay: float = 0.0,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        muon_lr: float | None = None,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = "match_rms_adamw",
    ) -> None:
        if not isinstance(partition, ParamPartition):
            raise TypeError(
                "`partition` must come from partition_params(model); got "
                f"{type(partition).__name__}."
            )
        muon_lr = lr if muon_lr is None else muon_lr
        groups: list[dict[str, Any]] = []
        if partition.muon:
            groups.append(dict(params=partition.muon, muon=True, lr=muon_lr,
                               weight_decay=weight_decay))  # fmt: skip
        if partition.embeddings or partition.head:
            groups.append(dict(params=[p for _, p in partition.embeddings + partition.head],
                               muon=False, lr=lr, weight_decay=weight_decay))  # fmt: skip
        if partition.other:
            groups.append(dict(params=partition.no_decay, muon=False, lr=lr, weight_decay=0.0))
        super().__init__(groups, dict(lr=lr, weight_decay=weight_decay))
        self._muon_kwargs = dict(momentum=momentum, nesterov=nesterov, ns_steps=ns_steps,
                                 adjust_lr_fn=adjust_lr_fn)  # fmt: skip
        self._adamw_kwargs = dict(betas=betas, eps=eps)
        self._build_inner()

    def _build_inner(self) -> None:
        muon_groups = [g for g in self.param_groups if g["muon"]]
        adamw_groups = [g for g in self.param_groups if not g["muon"]]
        self.muon = torch.optim.Muon(muon_groups, **self._muon_kwargs) if muon_groups else None
        self.adamw = torch.optim.AdamW(adamw_groups, **self._adamw_kwargs) if adamw_groups else None
        for inner in (self.muon, self.adamw):
            if inner is not None:
                inner.state = self.state  # one state dict (disjoint keys) for state_dict()

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        """Step both inner optimizers (``closure`` is evaluated once, with grad enabled)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for inner in (self.muon, self.adamw):
            if inner is not None:
                inner.step()
        return loss

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load, then re-share the loaded groups and state with the inner optimizers."""
        super().load_state_dict(state_dict)
        self._build_inner()
