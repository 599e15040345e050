import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sims.selection import (
    cluster_trajectories,
    select_easy,
    select_hard_random_easy,
    select_random,
    trajectory_features,
    upsample_indices,
    usage_weights,
)


def _two_groups(n_easy=30, n_hard=20, k=5, seed=0):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, k)
    easy = np.exp(-5 * t)[None] * np.exp(0.02 * rng.standard_normal((n_easy, k)))
    hard = np.exp(-0.5 * t)[None] * np.exp(0.02 * rng.standard_normal((n_hard, k)))
    return np.vstack([easy, hard])


@pytest.mark.parametrize("features", ["trajectory", "last", "relative"])
def test_cluster_recovers_hard_group(features):
    losses = _two_groups()
    res = cluster_trajectories(losses, seed=0, features=features)
    assert res.hard_cluster == 1
    assert res.hard_mask.tolist() == [False] * 30 + [True] * 20
    assert res.cluster_sizes.tolist() == [30, 20]
    assert res.cluster_means[1] > res.cluster_means[0]
    assert res.hard_fraction == pytest.approx(0.4)


def test_cluster_labels_invariant_to_order():
    losses = _two_groups()
    perm = np.random.default_rng(1).permutation(len(losses))
    a = cluster_trajectories(losses).hard_mask
    b = cluster_trajectories(losses[perm]).hard_mask
    assert np.array_equal(a[perm], b)


def test_upsample_and_weights():
    mask = np.array([True, False, True, False])
    idx = upsample_indices(4, mask, factor=2)
    assert idx.tolist() == [0, 0, 0, 1, 2, 2, 2, 3]
    assert np.array_equal(np.bincount(idx, minlength=4), usage_weights(4, mask, 2))
    sh = upsample_indices(4, mask, factor=2, shuffle=True, seed=3)
    assert sorted(sh.tolist()) == idx.tolist()


@given(st.lists(st.booleans(), min_size=1, max_size=40), st.integers(0, 4))
def test_upsampled_superset_property(mask, factor):
    mask = np.array(mask, dtype=bool)
    idx = upsample_indices(mask.size, mask, factor)
    assert set(idx.tolist()) == set(range(mask.size))
    assert idx.size == mask.size + factor * mask.sum()


def test_compute_matched_masks():
    hard = np.zeros(20, bool)
    hard[:6] = True
    m = select_hard_random_easy(hard, seed=0)
    assert {k: int(v.sum()) for k, v in m.items()} == {"hard": 6, "random": 6, "easy": 6}
    assert not np.any(m["easy"] & hard)
    assert select_random(10, 3, seed=1).sum() == 3
    assert select_easy(hard, 2).sum() == 2


def test_bad_inputs():
    with pytest.raises(ValueError, match="`losses` must have shape"):
        cluster_trajectories(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="`n_clusters` must be between"):
        cluster_trajectories(np.zeros((3, 2)), n_clusters=4)
    with pytest.raises(ValueError, match="`features` must be one of"):
        trajectory_features(np.zeros((3, 2)), "bogus")
    with pytest.raises(ValueError, match="needs at least 2 checkpoints"):
        trajectory_features(np.zeros((3, 1)), "relative")
    with pytest.raises(TypeError, match="`selected_mask` must be a boolean"):
        usage_weights(3, [0, 1, 2])
    with pytest.raises(ValueError, match=r"must have shape \(3,\)"):
        usage_weights(3, np.array([True, False]))
    with pytest.raises(ValueError, match="`factor` must be >= 0"):
        upsample_indices(2, np.array([True, False]), factor=-1)
    with pytest.raises(ValueError, match="`count` must be between"):
        select_random(3, 5)
    with pytest.raises(ValueError, match="exceeds the number of easy"):
        select_easy(np.array([True, True, False]), 2)
    with pytest.raises(ValueError, match="must be 1-d"):
        select_easy(np.zeros((2, 2), bool))


@pytest.mark.parametrize("features", ["trajectory", "last"])
def test_numpy_backend_matches_sklearn(features):
    losses = _two_groups(n_easy=300, n_hard=200)
    a = cluster_trajectories(losses, features=features, backend="sklearn")
    b = cluster_trajectories(losses, features=features, backend="numpy")
    assert np.array_equal(a.hard_mask, b.hard_mask)
    assert a.inertia == pytest.approx(b.inertia, rel=1e-9)
    with pytest.raises(ValueError, match="`backend` must be"):
        cluster_trajectories(losses, backend="faiss")
