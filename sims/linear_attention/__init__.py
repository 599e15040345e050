"""Multi-head linear-attention dynamics under GD, SAM and GD + upsampling (main paper Figure 1).

Submodules: :mod:`.data` (datasets, covariance families), :mod:`.models` (ATTN_S / ATTN_M and the
token-level forward pass), :mod:`.stats` (sufficient statistics, population moments, saddle
levels), :mod:`.train` (scan/vmap trainer, gradient-flow integrator), :mod:`.upsampling`
(proxy trajectories, k-means, usage counts), :mod:`.measure` (learning times, entropies),
:mod:`.experiment` (the paired Figure 1 pipeline). CLI: ``python -m sims.linear_attention``.
"""

from .data import ICLData, make_covariance, sample_dataset, validate_covariance
from .experiment import Figure1Config, run_figure1, summarize
from .models import AttnMParams, AttnSParams, init_params, merged_matrix
from .stats import Moments, empirical_moments, population_moments, saddle_losses
from .train import TrainingDivergedError, TrainResult, integrate_flow, train, train_runs

__all__ = [
    "ICLData", "make_covariance", "sample_dataset", "validate_covariance", "Figure1Config",
    "run_figure1", "summarize", "AttnMParams", "AttnSParams", "init_params", "merged_matrix",
    "Moments", "empirical_moments", "population_moments", "saddle_losses",
    "TrainingDivergedError", "TrainResult", "integrate_flow", "train", "train_runs",
]  # fmt: skip
