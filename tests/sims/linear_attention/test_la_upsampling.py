import jax
import numpy as np
import pytest

from sims.linear_attention.data import make_covariance, sample_dataset
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


def test_a_run_whose_proxy_diverged_selects_nothing():
    """NaN/inf proxy losses: no k-means on them (it raised from its seeding); unit weights."""
    losses = np.stack([_two_groups(s) for s in range(3)])
    losses[1, 7, 3] = np.nan
    losses[2, 0, 4] = np.inf
    out = select_batched(losses, np.arange(3), factor=2)
    ref = select_batched(losses[:1], np.arange(1), factor=2)[0]
    np.testing.assert_array_equal(out[0].selected, ref.selected)  # finite runs unchanged
    assert out[0].selected.sum() == 100
    for r in (1, 2):
        assert not out[r].selected.any()
        np.testing.assert_array_equal(out[r].weights, np.ones(500))


def test_hard_cluster_spectrum_ratios_are_one_for_everything():
    cov = make_covariance("linear", 3, seed=0)
    data = sample_dataset(50_000, 6, cov, seed=1)
    spec = hard_cluster_spectrum(data, np.ones(50_000, bool))
    np.testing.assert_allclose(spec["xq_ratio"], 1.0, atol=0.05)
    np.testing.assert_allclose(spec["beta_ratio"], 1.0, atol=0.08)


def test_log_ratio_features_are_scale_free():
    from sims.linear_attention.upsampling import cluster_features

    losses = np.array([[4.0, 2.0, 1.0], [400.0, 200.0, 100.0], [1.0, 1.0, 0.5]])
    f = cluster_features(losses, "log_ratio")
    np.testing.assert_allclose(f[0], np.log([0.5, 0.25]), rtol=1e-9)
    np.testing.assert_allclose(f[1], f[0], rtol=1e-9)  # ×100 in loss: same features
    np.testing.assert_allclose(f[2], np.log([1.0, 0.5]), atol=1e-9)
    with pytest.raises(ValueError, match="K >= 2 checkpoints"):
        cluster_features(losses[:, :1], "log_ratio")
    with pytest.raises(ValueError, match="`features` must be one of"):
        cluster_features(losses, "ranks")


def test_log_ratio_hard_cluster_is_the_slow_decrease_not_the_large_loss():
    rng = np.random.default_rng(0)
    t = np.arange(5)
    fast = np.exp(-1.0 * t) * rng.uniform(1, 100, (300, 1))  # all sizes, fast decrease
    slow = np.exp(-0.1 * t) * rng.uniform(1, 100, (100, 1))  # all sizes, slow decrease
    losses = np.vstack([fast, slow])[None]
    res = select_batched(losses, [0], features="log_ratio")[0]
    np.testing.assert_array_equal(res.selected, np.arange(400) >= 300)
    raw = select_batched(losses, [0], features="trajectory")[0]
    assert not np.array_equal(raw.selected, res.selected)  # raw picks by size


def test_condition_selection_takes_the_top_scores():
    losses = np.stack([_two_groups(s) for s in range(2)])
    scores = np.random.default_rng(1).random(losses.shape[:2])
    res = select_batched(losses, [0, 1], selection="condition", scores=scores)
    hard = select_batched(losses, [0, 1])
    for r in range(2):
        count = int(hard[r].selected.sum())
        assert res[r].selected.sum() == count
        assert scores[r][res[r].selected].min() >= scores[r][~res[r].selected].max()
    with pytest.raises(ValueError, match="needs `scores`"):
        select_batched(losses, [0, 1], selection="condition")


def test_selection_report_boost_equals_weighted_moment_ratio():
    """r_i from the report is exactly σ_i^ω/σ_i computed from the weighted moments."""
    from sims.linear_attention.stats import ansatz_coefficients, eigh_desc, empirical_moments
    from sims.linear_attention.upsampling import selection_report
    from sims.selection import usage_weights

    cov = make_covariance("linear", 3, seed=2)
    data = sample_dataset(4_000, 6, cov, seed=3)
    mask = np.abs(data.yq) > np.quantile(np.abs(data.yq), 0.7)
    rep = selection_report(data, mask, factor=2)
    _, e = eigh_desc(cov)
    s0, _ = ansatz_coefficients(empirical_moments(data, scale=6.0), e)
    weighted = empirical_moments(data, usage_weights(4_000, mask, 2), scale=6.0)
    s1, _ = ansatz_coefficients(weighted, e)
    np.testing.assert_allclose(rep["boost"], s1 / s0, rtol=1e-10)
    assert rep["fraction"] == pytest.approx(mask.mean())
    assert rep["target_ratio"] == pytest.approx((data.yq[mask] ** 2).mean() / (data.yq**2).mean())
    np.testing.assert_allclose(rep["xq_share"].sum(), 1.0)


def test_query_rule_enrichment_is_the_query_energy_ratio():
    """theory.upsampling: for a rule on x_q only, m_i = E[x_qi² | S]/λ_i (Monte Carlo)."""
    from sims.linear_attention.upsampling import condition_scores, selection_report

    cov = make_covariance("linear", 3, seed=4)
    data = sample_dataset(400_000, 8, cov, seed=5)
    sc = condition_scores(data)
    mask = sc > np.quantile(sc, 0.8)
    rep = selection_report(data, mask)
    # MC error of the ratio of means over 80k selected examples: a few percent at most
    np.testing.assert_allclose(rep["enrichment"], rep["xq_ratio"], rtol=0.06)
    assert rep["xq_ratio"][-1] > 3.0 and np.all(np.abs(rep["xq_ratio"][:-1] - 1) < 0.03)
