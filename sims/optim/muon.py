"""Parameter partition for transformers, and hybrid Muon (hidden matrices) + AdamW (the rest).

:func:`partition_params` splits a model's **trainable** parameters into

* ``hidden``: 2-D weight matrices inside the network (attention and MLP projections, LoRA
  factors): Muon's group, decayed;
* ``embeddings`` and ``head``: token/position embeddings and the LM head (tied heads count as
  embeddings): AdamW, decayed;
* ``other``: gains, biases and anything not 2-D: AdamW, never decayed.

It works for any Hugging Face causal LM (``get_input_embeddings``/``get_output_embeddings``),
PEFT models (only the adapters are trainable) and :mod:`sims.lm`; a custom model's position
table or untied head that is neither an ``nn.Embedding`` nor named like one is given by the
caller (``partition_params(model, embeddings=["pos"], head=["out"])``, also through
``build_optimizer("muon", model, embeddings=..., head=...)``), else it lands in Muon's group.
The same partition drives weight decay for AdamW/SGD/SAM-family builds (decay on
``ndim >= 2``, as nanoGPT does) and the Muon/AdamW split of :class:`MuonAdamW`, which wraps
``torch.optim.Muon`` (Newton–Schulz orthogonalized momentum; ``adjust_lr_fn="match_rms_adamw"``
by default, so one learning rate serves both groups; see :class:`MuonAdamW` for why its defaults
differ from torch's) and ``torch.optim.AdamW``.

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


def _named_ids(model: torch.nn.Module, named: Any, arg: str) -> set[int]:
    """Ids of the parameters ``named`` picks: parameter names, module names, or parameters."""
    if isinstance(named, (str, torch.Tensor)):
        named = [named]
    params = dict(model.named_parameters())
    modules = dict(model.named_modules())
    ids: set[int] = set()
    for item in named:
        if isinstance(item, torch.Tensor):
            if not any(item is p for p in params.values()):
                raise ValueError(f"`{arg}` holds a tensor that is not a parameter of `model`.")
            ids.add(id(item))
        elif isinstance(item, str) and item in params:
            ids.add(id(params[item]))
        elif isinstance(item, str) and item in modules:
            ids |= _param_ids(modules[item])
        else:
            names = sorted(params)
            raise ValueError(
                f"`{arg}` names {item!r}, which is neither a parameter nor a module of `model`; "
                f"parameter names look like {names[:4]}."
            )
    return ids


def partition_params(
    model: torch.nn.Module, *, embeddings: Any = (), head: Any = ()
) -> ParamPartition:
    """Split ``model``'s trainable parameters into hidden matrices, embeddings, head and other.

    Roles are recognised from the model: ``nn.Embedding`` modules and
    ``get_input_embeddings()`` are embeddings, ``get_output_embeddings()`` is the head (a tied
    head counts as the embedding), and so are 2-D parameters whose names contain ``embed``,
    ``wte``, ``wpe``, ``word_embeddings``, ``position_embeddings`` (embeddings) or ``lm_head``,
    ``embed_out``, ``output_projection`` (head). Anything else 2-D is a hidden matrix and goes to
    Muon, so a custom model's position table kept as a bare ``nn.Parameter`` (``self.pos``) or an
    untied head called e.g. ``self.out`` must be named with ``embeddings=``/``head=``: Muon would
    orthogonalise a lookup table's update, which is meaningless for rows looked up one at a time.

    Args:
        model: any ``torch.nn.Module`` (HF causal LM, PEFT model, :class:`sims.lm.GPT`, ...).
        embeddings: extra token/position tables: parameter names, module names (all their
            parameters) or the parameters themselves.
        head: an untied output head, given the same way.

    Returns:
        A :class:`ParamPartition` (parameters with ``requires_grad=False`` are left out).

    Raises:
        TypeError: if ``model`` is not a module.
        ValueError: if it has no trainable parameter, or ``embeddings``/``head`` name something
            that is not in it.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module; got {type(model).__name__}.")
    embed_ids = _param_ids(_get(model, "get_input_embeddings"))
    head_ids = _param_ids(_get(model, "get_output_embeddings"))
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            embed_ids |= _param_ids(module)
    named_embed = _named_ids(model, embeddings, "embeddings")
    named_head = _named_ids(model, head, "head")
    if named_embed & named_head:
        raise ValueError("`embeddings` and `head` name the same parameter; give it once.")
    embed_ids |= named_embed
    head_ids = (head_ids - named_embed) | named_head
    hidden, embeddings_, head_, other = [], [], [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        lname = name.lower()
        if id(p) in named_head:
            head_.append((name, p))
        elif p.ndim < 2 or p.ndim > 2 and id(p) not in embed_ids:
            other.append((name, p))
        elif id(p) in embed_ids or any(k in lname for k in _EMBED_NAMES):
            embeddings_.append((name, p))
        elif id(p) in head_ids or any(k in lname for k in _HEAD_NAMES):
            head_.append((name, p))
        else:
            hidden.append((name, p))
    part = ParamPartition(hidden, embeddings_, head_, other)
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

    Defaults that differ from ``torch.optim.Muon``'s, on purpose:

    * ``weight_decay=0.0`` (torch: 0.1). One weight-decay value serves every optimizer of
      :func:`~sims.optim.factory.build_optimizer` and defaults to 0 there, as in the Hugging Face
      Trainer that the paper's fine-tunes use (it states no weight decay); so switching AdamW for
      Muon changes the update rule and nothing else. Pass ``weight_decay`` to decay.
    * ``adjust_lr_fn="match_rms_adamw"`` (torch: ``None``, Keller Jordan's
      ``sqrt(max(1, A/B))``). The orthogonalized update of an ``A x B`` matrix (singular values
      about 1) has RMS about ``1/sqrt(max(A, B))``; it is multiplied by the factor
      ``0.2 sqrt(max(A, B))``·lr, so its RMS is about ``0.2``·lr, AdamW's typical update RMS
      (Liu et al. 2025, "Muon is scalable for LLM training"), and one learning rate and schedule
      drive both groups, as in the paper (peak lr 2e-5 for AdamW and Muon alike). With ``None``
      Muon's step is ~5-10x smaller for matrices of 500-2500 rows or columns and needs its own
      ``muon_lr``.

    Defaults that differ from ``torch.optim.AdamW``'s (the AdamW group): ``betas=(0.9, 0.95)``
    (torch: ``(0.9, 0.999)``; the nanoGPT/LLM-training choice) and ``weight_decay=0.0`` (torch:
    0.01; see above). ``eps=1e-8`` is torch's.

    ``momentum=0.95``, ``nesterov=True`` and ``ns_steps=5`` are torch's.

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
