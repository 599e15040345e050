"""Plotting helpers shared by the library's drawing functions and ``figures/``.

Drawing functions live beside the computation they draw (``sims/...``); ``figures/`` only
registers them. This module holds what every drawing function needs: :func:`save_figure`.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["save_figure"]


def save_figure(fig, path: str | os.PathLike, *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` atomically (creating the folder), close it, return the path."""
    import matplotlib.pyplot as plt

    from .io import atomic_path

    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    return path
