import jax
import numpy as np
import pytest

from sims.linear_attention.data import make_covariance, sample_dataset
from sims.linear_attention.measure import learning_times, loss_drop_times, time_entropy
from sims.linear_attention.models import init_params, merged_matrix
from sims.linear_attention.stats import per_example_losses
from sims.linear_attention.upsampling import (
    checkpoint_losses,
    hard_cluster_spectrum,
    select_batched,
    select_for_upsampling,
)


def test_checkpoint_losses_match_per_example(tiny_data):
    ps = [init_params(jax.random.PRNGKey(i), 3, 2, init_scale=3.0) for i in range(2)]
    mats = np.stack([np.asarray(merged_matrix(p)) for p in ps])
    got = checkpoint_losses(mats, tiny_data, scale=2.0)
    for k, p in enumerate(ps):
        np.testing.assert_allclose(got[:, k], per_example_losses(p, tiny_data, scale=2.0))
    with pytest.raises(ValueError, match="`merged_matrices` must be"):
        checkpoint_losses(mats[0], tiny_data)


def _two_groups(seed, n=400):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, 5)
    easy = np.exp(-4 * t) * np.exp(0.05 * rng.standard_normal((n, 5)))
    hard = 3 * np.exp(-0.3 * t) * np.exp(0.05 * rng.standard_normal((n // 4, 5)))
    return np.vstack([easy, hard])


def test_batched_kmeans_agrees_with_selection_module():
    losses = np.stack([_two_groups(s) for s in range(3)])
    batched = select_batched(losses, np.arange(3))
    for r in range(3):
        ref = select_for_upsampling(losses[r], seed=r, backend="sklearn")
        np.testing.assert_array_equal(batched[r].selected, ref.selected)
        assert batched[r].weights.sum() == 500 + 100
    rand = select_batched(losses, np.arange(3), selection="random")
    easy = select_batched(losses, np.arange(3), selection="easy")
    for r in range(3):
        assert rand[r].selected.sum() == easy[r].selected.sum() == 100
        assert not np.any(easy[r].selected & batched[r].selected)
    with pytest.raises(ValueError, match="`selection` must be"):
        select_batched(losses, np.arange(3), selection="all")


def test_hard_cluster_spectrum_ratios_are_one_for_everything():
    cov = make_covariance("linear", 3, seed=0)
    data = sample_dataset(50_000, 6, cov, seed=1)
    spec = hard_cluster_spectrum(data, np.ones(50_000, bool))
    np.testing.assert_allclose(spec["xq_ratio"], 1.0, atol=0.05)
    np.testing.assert_allclose(spec["beta_ratio"], 1.0, atol=0.08)


def test_learning_and_drop_times():
    comp = np.array([[0.0, 0.0], [0.6, 0.1], [1.0, 0.2], [1.0, 0.3]])
    np.testing.assert_array_equal(learning_times(comp, np.array([1.0, 1.0])), [1.0, np.nan])
    losses = np.array([1.0, 0.9, 0.5, 0.45, 0.2])
    np.testing.assert_array_equal(loss_drop_times(losses, [1.0, 0.6, 0.3]), [2.0, 4.0])
    assert time_entropy([1, 1]) == pytest.approx(np.log(2), rel=1e-3)
    assert np.isnan(time_entropy([1.0, np.nan]))
    with pytest.raises(ValueError, match="`fraction` must be in"):
        learning_times(comp, np.ones(2), fraction=0.0)
