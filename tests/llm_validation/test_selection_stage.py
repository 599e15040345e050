"""The selection stage on trajectory Datasets: masks, usage counts per setting, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from llm_validation.config import SelectionConfig
from llm_validation.select.clustering import (
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


def test_last_checkpoint_features_pick_the_higher_final_loss():
    """``features="last"`` clusters the final losses; the hard cluster is the higher *final* one.

    Group "fast" starts very high and ends low (mean over checkpoints 2.6, final 0.2); group
    "slow" starts low and stays (mean 0.95, final 0.9). By the mean over checkpoints the fast
    group would be "hard"; by the final loss (what ``last`` clusters on) the slow one is.
    """
    fast = [[5.0, 0.2 + 0.01 * i] for i in range(6)]
    slow = [[1.0, 0.9 + 0.01 * i] for i in range(6)]
    loss = np.array(fast + slow)
    assert loss[:6].mean() > loss[6:].mean() and loss[:6, -1].mean() < loss[6:, -1].mean()
    ds = xr.Dataset(
        {"loss": (("example", "checkpoint"), loss), "source": ("example", ["s"] * 12)},
        coords={"example": np.arange(12), "checkpoint": [1, 2], "step": ("checkpoint", [5, 10])},
    )
    cfg = SelectionConfig(small_sources="none", features="last", seed=0)
    hard = select_examples(ds, cfg)["hard"].values.astype(bool)
    assert hard.tolist() == [False] * 6 + [True] * 6
    # the trajectory features see the whole curves: there the fast group is the high one
    cfg = SelectionConfig(small_sources="none", features="trajectory", seed=0)
    assert select_examples(ds, cfg)["hard"].values.astype(bool).tolist() == [True] * 6 + [False] * 6
    from sims.selection import cluster_trajectories

    res = cluster_trajectories(loss, features="last")
    np.testing.assert_allclose(res.cluster_means, [0.225, 0.925])  # final-loss means by hand
