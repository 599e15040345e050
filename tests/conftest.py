"""Test harness (style rule 7): deterministic, offline, CPU-only, strict.

* JAX runs in float64 with rank-promotion errors (when JAX is installed).
* numpy's and torch's global RNGs are reseeded before every test.
* Hypothesis uses a derandomized ``ci`` profile (set ``HYPOTHESIS_PROFILE=dev`` for more examples).
"""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

try:  # JAX is an optional extra; configure it before any test imports it.
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_numpy_rank_promotion", "raise")
    jax.config.update("jax_platforms", "cpu")
except ImportError:  # pragma: no cover - depends on the installed extras
    pass

# Matplotlib must never try to open a window in tests.
os.environ.setdefault("MPLBACKEND", "Agg")
# Sweeps run in-process by default: the spawn pool's start-up (a fresh interpreter importing torch
# or JAX per worker) cost most of the quick figures' test time on 2 cores. The pool path itself is
# tested with explicit ``workers=2`` in tests/sims/test_parallel.py.
os.environ.setdefault("SBT_WORKERS", "1")


@pytest.fixture(autouse=True)
def _reseed() -> None:
    random.seed(0)
    np.random.seed(0)
    try:
        import torch

        torch.manual_seed(0)
    except ImportError:  # pragma: no cover
        pass


@pytest.fixture
def tmp_results(tmp_path):
    """A scratch results folder."""
    d = tmp_path / "results"
    d.mkdir()
    return d
