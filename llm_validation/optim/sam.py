r"""Sharpness-Aware Minimization (Foret et al., 2021) as a pure kernel plus a thin optimizer.

The SAM step with radius :math:`\rho` is

.. math::

    \epsilon = \rho\, \frac{g}{\lVert g \rVert_2}, \qquad
    \theta \leftarrow \mathrm{base\_step}\big(\theta, \nabla L(\theta + \epsilon)\big),

with :math:`g = \nabla L(\theta)` and the norm taken over **all** parameters together (global
norm). :func:`sam_perturbation` is the kernel (``grads`` -> ``eps``); :class:`SAM` wraps any
``torch.optim`` optimizer with ``first_step`` (climb to ``theta + eps``), ``second_step`` (return
to ``theta`` and take the base step with the gradient found there) and a ``step(closure)``
convenience. The design follows ``davda54/sam`` (two-step interface, base optimizer shares the
param groups); Functional-SAM and preconditioned variants plug in by replacing the kernel.

Examples:
    >>> import torch
    >>> w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    >>> opt = SAM([w], torch.optim.SGD, rho=0.5, lr=0.1)
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = 0.5 * (w**2).sum()
    ...     loss.backward()
    ...     return loss
    >>> float(opt.step(closure))
    12.5
    >>> [round(v, 4) for v in w.tolist()]  # w - 0.1 * (w + 0.5 * w/|w|)
    [2.67, 3.56]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

__all__ = ["sam_perturbation", "SAM"]


def sam_perturbation(
    grads: Sequence[torch.Tensor | None], rho: float, *, eps: float = 1e-12
) -> list[torch.Tensor | None]:
    """SAM ascent step ``eps_i = rho * g_i / ||g||`` with the global 2-norm over all tensors.

    Args:
        grads: gradients (``None`` entries are passed through as ``None``).
        rho: perturbation radius (>= 0); the returned perturbation has global norm ``rho``
            (0 when all gradients vanish).
        eps: added to the norm to avoid division by zero.

    Returns:
        A list of perturbations, one per gradient.

    Raises:
        ValueError: if ``rho`` is negative or not finite.
    """
    if not (isinstance(rho, (int, float)) and rho >= 0 and rho != float("inf")):
        raise ValueError(f"`rho` must be a finite number >= 0; got {rho!r}.")
    present = [g for g in grads if g is not None]
    if not present:
        return [None for _ in grads]
    norm = torch.linalg.vector_norm(
        torch.stack([torch.linalg.vector_norm(g.detach().to(torch.float64)) for g in present])
    )
    scale = rho / (float(norm) + eps)
    return [None if g is None else g.detach() * scale for g in grads]


class SAM(torch.optim.Optimizer):
    """SAM around a base optimizer (``torch.optim.SGD``, ``AdamW``, ...).

    Args:
        params: parameters or param groups.
        base_optimizer_cls: the base optimizer class; it is built on the same param groups.
        rho: perturbation radius.
        **kwargs: passed to ``base_optimizer_cls`` (``lr``, ``weight_decay``, ...).

    Use either ``loss.backward(); opt.first_step(zero_grad=True); loss2.backward();
    opt.second_step(zero_grad=True)`` or ``opt.step(closure)`` where ``closure`` zeroes the
    gradients, computes the loss, calls ``backward`` and returns the loss.
    """

    def __init__(self, params: Iterable, base_optimizer_cls: type[torch.optim.Optimizer],
                 rho: float = 0.05, **kwargs) -> None:  # fmt: skip
        if not (isinstance(rho, (int, float)) and rho >= 0):
            raise ValueError(f"`rho` must be >= 0; got {rho!r}.")
        if not (isinstance(base_optimizer_cls, type)
                and issubclass(base_optimizer_cls, torch.optim.Optimizer)):  # fmt: skip
            raise TypeError(
                f"`base_optimizer_cls` must be a torch.optim.Optimizer subclass; got "
                f"{base_optimizer_cls!r}."
            )
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer_cls(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad: bool = False) -> None:
        """Move to ``theta + eps`` (one global norm over all groups) and remember ``eps``."""
        params = [p for g in self.param_groups for p in g["params"]]
        rhos = {g.get("rho", self.defaults["rho"]) for g in self.param_groups}
        if len(rhos) != 1:
            raise ValueError(f"all param groups must share one `rho`; got {sorted(rhos)}.")
        eps = sam_perturbation([p.grad for p in params], rhos.pop())
        for p, e in zip(params, eps, strict=True):
            if e is None:
                continue
            p.add_(e)
            self.state[p]["e_w"] = e
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad: bool = False) -> None:
        """Return to ``theta`` and take the base step with the gradient at ``theta + eps``."""
        for g in self.param_groups:
            for p in g["params"]:
                e = self.state[p].pop("e_w", None)
                if e is not None:
                    p.sub_(e)
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    def step(self, closure: Callable[[], torch.Tensor] | None = None):  # type: ignore[override]
        """One full SAM step; ``closure`` must zero grads, compute the loss and call backward."""
        if closure is None:
            raise ValueError(
                "SAM.step needs a `closure` (two gradient evaluations per step); or call "
                "first_step()/second_step() yourself."
            )
        with torch.enable_grad():
            loss = closure()
        self.first_step(zero_grad=True)
        with torch.enable_grad():
            closure()
        self.second_step()
        return loss

    def load_state_dict(self, state_dict) -> None:
        """Load state and re-share the param groups with the base optimizer."""
        super().load_state_dict(state_dict)
        self.base_optimizer.param_groups = self.param_groups
