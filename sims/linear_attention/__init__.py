"""Multi-head linear-attention dynamics under GD, SAM and GD + upsampling (main paper Figure 1).

Submodules: :mod:`.data` (datasets, covariance families), :mod:`.models` (ATTN_S / ATTN_M and the
token-level forward pass), :mod:`.stats` (sufficient statistics, population moments, saddle
levels), :mod:`.train` (scan/vmap trainer, gradient-flow integrator), :mod:`.sam_variants`
(head-wise SAM), :mod:`.upsampling` (proxy trajectories, k-means, selection reports),
:mod:`.measure` (learning times, entropies), :mod:`.experiment` (the paired Figure 1 pipeline),
:mod:`.mechanism` (why SAM is more uniform), :mod:`.study` (upsampling selections vs theory),
:mod:`.plotting` and :mod:`.products` (figures and result files). CLI:
``python -m sims.linear_attention``.

Importing the package is cheap and needs only the core install: the names below are loaded from
their (JAX) submodules on first use.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "ICLData": "data", "make_covariance": "data", "sample_dataset": "data",
    "validate_covariance": "data", "Figure1Config": "experiment", "run_figure1": "experiment",
    "summarize": "experiment", "AttnMParams": "models", "AttnSParams": "models",
    "init_params": "models", "merged_matrix": "models", "Moments": "stats",
    "empirical_moments": "stats", "population_moments": "stats", "saddle_losses": "stats",
    "TrainingDivergedError": "train", "TrainResult": "train", "integrate_flow": "train",
    "train": "train", "train_runs": "train",
}  # fmt: skip

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
