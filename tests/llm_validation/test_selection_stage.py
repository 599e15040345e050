"""The selection stage on trajectory Datasets: masks, usage counts per setting, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from llm_validation.config import SelectionConfig
from llm_validation.selection import (
    EmptySelectionError,
    plot_selection,
    select_examples,
    selection_table,
    usage_counts,
)


def _traj(seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, 6)
    rows, src, hard = [], [], []
    for name, level, n_easy, n_hard in (("a", 1.0, 40, 20), ("b", 3.0, 30, 10)):
        rows += [level * np.exp(-4 * t) + 0.01 * rng.standard_normal(6) for _ in range(n_easy)]
        rows += [level * np.exp(-0.4 * t) + 0.01 * rng.standard_normal(6) for _ in range(n_hard)]
        src += [name] * (n_easy + n_hard)
        hard += [False] * n_easy + [True] * n_hard
    ds = xr.Dataset(
        {"loss": (("example", "checkpoint"), np.array(rows)), "source": ("example", src)},
        coords={"example": np.arange(100) * 3, "checkpoint": np.arange(1, 7),
                "step": ("checkpoint", np.arange(1, 7) * 10)},
    )  # fmt: skip
    return ds, np.array(hard)


def test_masks_and_usage_counts():
    traj, truth = _traj()
    sel = select_examples(traj, SelectionConfig(small_sources="none", upsample_factor=2, seed=1))
    hard, rand, easy = (sel[k].values.astype(bool) for k in ("hard", "random", "easy"))
    assert np.array_equal(hard, truth)
    assert rand.sum() == easy.sum() == hard.sum() == 30
    assert not (easy & hard).any()
    assert sel["example"].values.tolist() == traj["example"].values.tolist()
    for setting, mask in (("ft_up", hard), ("random", rand), ("easy", easy), ("both", hard)):
        np.testing.assert_array_equal(usage_counts(sel, setting, 2), np.where(mask, 3, 1))
    for setting in ("ft", "synth"):
        np.testing.assert_array_equal(usage_counts(sel, setting, 2), np.ones(100, int))
    assert sel.attrs["hard_fraction"] == pytest.approx(0.3)
    table = selection_table(sel)
    assert (
        "| a | 60 | clustered | 20 | 33.3 |" in table and "| **all** | 100 | | 30 | 30.0 |" in table
    )


def test_first_k_checkpoints_and_last_feature():
    traj, truth = _traj()
    sel = select_examples(traj, SelectionConfig(small_sources="none", n_checkpoints=3,
                                                features="last"))  # fmt: skip
    assert sel.attrs["n_checkpoints"] == 3 and sel.attrs["features"] == "last"
    assert np.array_equal(sel["hard"].values.astype(bool), truth)
    with pytest.raises(ValueError, match="exceeds the 6 recorded proxy checkpoints"):
        select_examples(traj, SelectionConfig(n_checkpoints=10))


def test_global_clustering_misses_the_low_level_source():
    traj, truth = _traj()
    sel = select_examples(traj, SelectionConfig(per_source=False, small_sources="none"))
    hard = sel["hard"].values.astype(bool)
    assert not np.array_equal(hard, truth)
    assert hard[60:].mean() > hard[:60].mean()  # the high-level source dominates


def test_empty_hard_cluster_is_an_error(tmp_path):
    traj, _ = _traj()
    flat = traj.assign(loss=(("example", "checkpoint"), np.ones((100, 6))))
    with pytest.raises(EmptySelectionError, match="the hard cluster is empty"):
        select_examples(flat, SelectionConfig(small_sources="none"))


def test_plot(tmp_path):
    traj, _ = _traj()
    sel = select_examples(traj, SelectionConfig(small_sources="none"))
    path = plot_selection(traj, sel, tmp_path / "sel.png")
    assert path.exists() and path.stat().st_size > 10_000
