import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims.linear_attention.data import make_covariance, sample_dataset
from sims.linear_attention.models import ansatz_params
from sims.linear_attention.stats import (
    a_coefficients,
    eigh_desc,
    empirical_moments,
    expected_sample_cov_sq,
    fixed_point_components,
    fixed_point_values,
    loss,
    population_moments,
    quadratic_loss,
    saddle_losses,
)


@pytest.mark.parametrize("method", ["wishart", "tokens"])
def test_population_moments_match_monte_carlo(method):
    cov = make_covariance("linear", 3, seed=2)
    data = sample_dataset(200_000, 4, cov, seed=5, method=method)
    emp = empirical_moments(data)
    pop = population_moments(cov, 4)
    assert emp.c0 == pytest.approx(pop.c0, rel=0.05)
    np.testing.assert_allclose(emp.b, pop.b, atol=0.05 * np.abs(pop.b).max())
    np.testing.assert_allclose(emp.A, pop.A, atol=0.08 * np.abs(pop.A).max())


def test_expected_sample_cov_sq_and_a():
    cov = make_covariance("linear", 4, seed=0)
    lam, e = eigh_desc(cov)
    s2 = expected_sample_cov_sq(cov, 31)
    np.testing.assert_allclose(e.T @ s2 @ e, np.diag(a_coefficients(cov, 31)), atol=1e-14)


@pytest.mark.parametrize("scale", [1.0, 31.0])
def test_saddles_are_fixed_points_with_paper_levels(scale):
    cov = make_covariance("linear", 4, seed=3)
    lam, e = eigh_desc(cov)
    pop = population_moments(cov, 31, scale=scale)
    vals = fixed_point_values(cov, 31, scale=scale)
    levels = saddle_losses(cov, 31)
    assert levels[0] == pytest.approx(1.0)
    for m in range(5):
        p = ansatz_params(e, vals[:m], n_heads=5) if m else ansatz_params(e, np.zeros(1), 5)
        assert float(loss(p, pop)) == pytest.approx(levels[m], abs=1e-13)
        g = jax.grad(loss)(p, pop)
        assert max(float(jnp.abs(x).max()) for x in g) < 1e-12
    # anchor plot_loss formula for the drops
    drops = lam / (1 + (1 + 1.0 / lam) / 31)
    np.testing.assert_allclose(-np.diff(levels), drops, rtol=1e-13)
    np.testing.assert_allclose(fixed_point_components(cov, 31, scale=scale), vals**3, rtol=1e-13)


def test_quadratic_loss_is_mse(tiny_data):
    m = np.random.default_rng(0).standard_normal(9)
    mom = empirical_moments(tiny_data)
    pred = tiny_data.features() @ m
    assert float(quadratic_loss(jnp.asarray(m), mom)) == pytest.approx(
        np.mean((tiny_data.yq - pred) ** 2), rel=1e-12
    )


def test_anchor_preprocessing_centres_and_whitens():
    from sims.linear_attention.data import sample_tokens

    cov = make_covariance("linear", 3, seed=0)
    x, y = sample_tokens(4000, 4, cov, seed=1, anchor_preprocessing=True)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12)
    # the task vectors are recoverable from any 3 tokens: w = x⁻¹ y; whitened across the dataset
    w = np.linalg.solve(x[:, :3, :], y[:, :3, None])[..., 0]
    np.testing.assert_allclose(w.mean(0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(w.T), np.eye(3), atol=1e-10)


@pytest.mark.parametrize("scale", [1.0, 31.0])
def test_ansatz_coefficients_of_population_moments(scale):
    """σ_i = s λ_i², κ_i = s² λ_i a_i (App. C.2), and the rate is −½ dL/dv on the ansatz."""
    from sims.linear_attention.stats import ansatz_coefficients

    cov = make_covariance("linear", 3, seed=5)
    lam, e = eigh_desc(cov)
    pop = population_moments(cov, 7, scale=scale)
    sig, kap = ansatz_coefficients(pop, e)
    np.testing.assert_allclose(sig, scale * lam**2, rtol=1e-12)
    np.testing.assert_allclose(kap, scale**2 * lam * a_coefficients(cov, 7), rtol=1e-12)
    v = 0.3
    p = ansatz_params(e, np.array([0.0, v]), n_heads=2)
    g = jax.grad(loss)(p, pop)
    assert -0.5 * float(g.v[1]) == pytest.approx(sig[1] * v**2 - kap[1] * v**5, rel=1e-12)
