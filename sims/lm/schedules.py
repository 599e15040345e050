"""Learning-rate schedules as pure functions ``step -> factor`` (multiplying each group's lr).

* ``constant``: 1.
* ``cosine``: ``min + (1 − min)(1 + cos(π p))/2`` over the post-warm-up progress ``p ∈ [0, 1]``.
* ``step``: 1, times ``step_factor`` at each fraction of ``step_fractions`` of the run (e.g.
  ``(0.5, 0.75)``: ×0.1 at half-way, ×0.01 from three quarters on).
* ``wsd`` (warm-up–stable–decay): 1 until the last ``decay_fraction`` of the run, then linear
  to ``min``.

Every schedule starts with an optional linear warm-up from ``1/warmup_steps`` to 1 over
``warmup_steps`` steps. ``step`` is 0-based (the factor used for the update at step ``step``).

Examples:
    >>> [round(lr_factor(s, 10, "cosine"), 3) for s in (0, 5, 10)]
    [1.0, 0.5, 0.0]
    >>> [lr_factor(s, 100, "step", step_fractions=(0.5, 0.75)) for s in (49, 50, 75)]
    [1.0, 0.1, 0.010000000000000002]
    >>> [lr_factor(s, 100, "wsd", decay_fraction=0.2) for s in (79, 80, 90, 100)]
    [1.0, 1.0, 0.5, 0.0]
    >>> [lr_factor(s, 100, "constant", warmup_steps=4) for s in (0, 3, 4)]
    [0.25, 1.0, 1.0]
"""

from __future__ import annotations

import math

__all__ = ["SCHEDULES", "lr_factor", "check_schedule"]

SCHEDULES = ("constant", "cosine", "step", "wsd")


def check_schedule(
    kind: str,
    *,
    total_steps: int,
    warmup_steps: int = 0,
    step_fractions: tuple[float, ...] = (0.5, 0.75),
    step_factor: float = 0.1,
    decay_fraction: float = 0.2,
    min_factor: float = 0.0,
) -> None:
    """Raise ``ValueError`` naming the bad schedule argument (see :func:`lr_factor`)."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {SCHEDULES}.")
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"`total_steps` must be a positive int; got {total_steps!r}.")
    if not isinstance(warmup_steps, int) or not 0 <= warmup_steps < max(total_steps, 1):
        raise ValueError(f"`warmup_steps` must be in [0, total_steps); got {warmup_steps!r}.")
    if any(not 0 < f < 1 for f in step_fractions) or list(step_fractions) != sorted(step_fractions):
        raise ValueError(f"`step_fractions` must be increasing, in (0, 1); got {step_fractions!r}.")
    if not 0 < step_factor <= 1:
        raise ValueError(f"`step_factor` must be in (0, 1]; got {step_factor!r}.")
    if not 0 < decay_fraction <= 1:
        raise ValueError(f"`decay_fraction` must be in (0, 1]; got {decay_fraction!r}.")
    if not 0 <= min_factor <= 1:
        raise ValueError(f"`min_factor` must be in [0, 1]; got {min_factor!r}.")


def lr_factor(
    step: int,
    total_steps: int,
    kind: str = "constant",
    *,
    warmup_steps: int = 0,
    step_fractions: tuple[float, ...] = (0.5, 0.75),
    step_factor: float = 0.1,
    decay_fraction: float = 0.2,
    min_factor: float = 0.0,
) -> float:
    """The lr multiplier at 0-based ``step`` of a ``total_steps`` run (see the module docstring)."""
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    if kind == "cosine":
        span = max(total_steps - warmup_steps, 1)
        p = min(max((step - warmup_steps) / span, 0.0), 1.0)
        return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * p))
    if kind == "step":
        n = sum(step >= round(f * total_steps) for f in step_fractions)
        return step_factor**n
    if kind == "wsd":
        start = total_steps - round(decay_fraction * total_steps)
        if step < start:
            return 1.0
        p = min((step - start) / max(total_steps - start, 1), 1.0)
        return 1.0 - (1.0 - min_factor) * p
    raise ValueError(f"unknown schedule {kind!r}; choose one of {SCHEDULES}.")
