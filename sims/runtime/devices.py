"""Torch devices: check a ``device`` argument before any work (one implementation for sims).

Used by :func:`sims.markov.train.train` and :func:`sims.lm.train_lm`.

Examples:
    >>> check_device("cpu")
    device(type='cpu')
    >>> check_device("gpu0")
    Traceback (most recent call last):
    ...
    ValueError: `device`='gpu0' is not a torch device (...); use 'cpu' or 'cuda'.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_device"]


def check_device(device: Any):
    """Parse ``device`` and check that this torch build and machine can use it.

    Returns:
        The ``torch.device``.

    Raises:
        ValueError: for a string that is not a torch device, or a CUDA/MPS device that this torch
            build or machine does not have (e.g. ``"cuda"`` on the CPU wheel ``torch==2.13.0``).
    """
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"`device`={device!r} is not a torch device ({exc}); use 'cpu' or "
                         "'cuda'.") from None  # fmt: skip
    if dev.type == "cuda" and not torch.cuda.is_available():
        build = torch.version.cuda or "none (CPU-only build)"
        raise ValueError(
            f"`device`={device!r} but torch {torch.__version__} has no usable CUDA device "
            f"(CUDA build: {build}); use device 'cpu' (--device cpu), or run on a GPU machine "
            "with a CUDA build of torch."
        )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"`device`={device!r} but MPS is not available here; use device 'cpu'.")
    return dev
