import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sims.selection import (
    ClusterResult,
    cluster_by_source,
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


def _two_sources():
    # Source "hi" has losses ~3x those of "lo"; each has an easy and a hard subgroup.
    a = _two_groups(n_easy=30, n_hard=20, seed=1) * 3.0
    b = _two_groups(n_easy=40, n_hard=10, seed=2)
    losses = np.vstack([a, b])
    sources = np.array(["hi"] * 50 + ["lo"] * 50)
    truth = np.r_[[False] * 30, [True] * 20, [False] * 40, [True] * 10]
    return losses, sources, truth


def test_cluster_by_source_finds_hard_subgroup_inside_each_source():
    losses, sources, truth = _two_sources()
    sel = cluster_by_source(losses, sources, small_sources="none")
    assert np.array_equal(sel.hard_mask, truth)
    assert sel.sources == ("hi", "lo")
    assert sel.per_source["hi"] == {
        "size": 50, "rule": "clustered", "n_hard": 20, "hard_fraction": 0.4,
        "cluster_means": sel.per_source["hi"]["cluster_means"], "cluster_sizes": [30, 20],
        "centers": sel.per_source["hi"]["centers"],
    }  # fmt: skip
    hi = sel.per_source["hi"]
    assert np.allclose(hi["centers"][1], losses[30:50].mean(0))  # hard centre = hard rows' mean
    assert hi["cluster_means"][1] == pytest.approx(losses[30:50].mean())
    assert sel.per_source["lo"]["n_hard"] == 10
    assert set(sel.labels.tolist()) == {0, 1}
    # A global k-means is dominated by the level of "hi": it misses the hard group of "lo".
    glob = cluster_trajectories(losses).hard_mask
    assert glob[30:50].all() and not glob[90:].any()


def test_cluster_by_source_order_invariant():
    losses, sources, truth = _two_sources()
    perm = np.random.default_rng(5).permutation(len(losses))
    sel = cluster_by_source(losses[perm], sources[perm], small_sources="none")
    assert np.array_equal(sel.hard_mask, truth[perm])


def test_small_source_rules():
    losses, sources, truth = _two_sources()
    tiny = np.full((5, losses.shape[1]), 0.01)  # very easy, but a small source
    losses = np.vstack([losses, tiny])
    sources = np.r_[sources, ["tiny"] * 5]
    # mean source size is 35: "tiny" (5) is below it and selected whole; 50 >= 35 clustered.
    sel = cluster_by_source(losses, sources, small_sources="below_mean")
    assert sel.per_source["tiny"]["rule"] == "small"
    assert sel.hard_mask[-5:].all()
    assert np.array_equal(sel.hard_mask[:-5], truth)
    assert (sel.labels[-5:] == -1).all()
    # "none" clusters it too; its 5 identical rows cannot be split: degenerate, none selected.
    sel = cluster_by_source(losses, sources, small_sources="none")
    assert sel.per_source["tiny"]["rule"] == "degenerate"
    assert not sel.hard_mask[-5:].any()
    # min_source_size wins over "none"; a threshold of 51 makes every source small.
    sel = cluster_by_source(losses, sources, small_sources="none", min_source_size=51)
    assert sel.hard_mask.all()
    assert sel.hard_fraction == 1.0


def test_cluster_by_source_relative_features():
    losses, sources, truth = _two_sources()
    sel = cluster_by_source(losses, sources, small_sources="none", features="relative")
    assert np.array_equal(sel.hard_mask, truth)  # slow relative decrease = hard
    assert sel.features == "relative"


def test_cluster_by_source_bad_inputs():
    losses, sources, _ = _two_sources()
    with pytest.raises(ValueError, match=r"`sources` must have shape \(100,\)"):
        cluster_by_source(losses, sources[:3])
    with pytest.raises(ValueError, match="`small_sources` must be one of"):
        cluster_by_source(losses, sources, small_sources="tiny")
    with pytest.raises(ValueError, match="`min_source_size` must be >= 0"):
        cluster_by_source(losses, sources, min_source_size=-1)


def test_small_source_rule_is_strictly_below_the_mean():
    """The authors' rule selects a source whole only when it is *smaller* than the mean source
    size: equal-sized sources are all clustered (a `<=` would select everything)."""
    losses = np.vstack([_two_groups(n_easy=30, n_hard=10, seed=s) for s in (1, 2)])
    sources = np.array(["a"] * 40 + ["b"] * 40)
    sel = cluster_by_source(losses, sources)  # sizes 40, 40 = the mean
    assert [sel.per_source[s]["rule"] for s in ("a", "b")] == ["clustered", "clustered"]
    assert sel.hard_mask.sum() == 20
    sel = cluster_by_source(losses[:79], sources[:79])  # b has 39 < mean 39.5: whole
    assert sel.per_source["b"]["rule"] == "small" and sel.per_source["a"]["rule"] == "clustered"


def test_last_features_rank_clusters_by_the_final_loss_not_the_mean_over_checkpoints():
    """Group A starts very high and ends low (mean 7.5, final 0.1); group B stays low and ends
    higher (mean 1.25, final 2). Clustered on the last checkpoint, the hard cluster is the one
    with the higher final loss, B; ranking by the mean over checkpoints would call A hard."""
    rng = np.random.default_rng(0)
    a = np.array([10.0, 10.0, 10.0, 0.1]) + 0.01 * rng.random((6, 4))
    b = np.array([1.0, 1.0, 1.0, 2.0]) + 0.01 * rng.random((9, 4))
    losses = np.vstack([a, b])
    is_b = np.arange(15) >= 6
    res = cluster_trajectories(losses, 2, seed=0, features="last")
    assert res.hard_mask.tolist() == is_b.tolist()
    np.testing.assert_allclose(res.cluster_means, [a[:, -1].mean(), b[:, -1].mean()], rtol=1e-12)
    again = ClusterResult.from_labels(losses, (~is_b).astype(int), features="last")
    assert again.hard_mask.tolist() == is_b.tolist()  # labels given the other way round
    traj = cluster_trajectories(losses, 2, seed=0, features="trajectory")
    assert traj.hard_mask.tolist() == (~is_b).tolist()  # on the whole trajectory A is hard
