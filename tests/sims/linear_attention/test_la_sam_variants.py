"""Head-wise SAM (the paper's per-head reduction) against hand computations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims.linear_attention.models import ansatz_params, init_params
from sims.linear_attention.sam_variants import (
    METHODS,
    head_norms,
    headwise_perturbation,
    headwise_sam_flow_direction,
    headwise_sam_gradient,
)
from sims.linear_attention.stats import eigh_desc, empirical_moments, loss, population_moments
from sims.optim import sam_gradient


def test_perturbation_has_radius_rho_on_every_head(tiny_data):
    p = init_params(jax.random.PRNGKey(0), 3, 4, init_scale=2.0)
    g = jax.grad(loss)(p, empirical_moments(tiny_data))
    eps = headwise_perturbation(g, 0.07)
    np.testing.assert_allclose(head_norms(eps), 0.07, rtol=1e-12)
    for h in range(4):  # parallel to that head's gradient, same orientation
        gh = np.concatenate([np.ravel(x[h]) for x in g])
        eh = np.concatenate([np.ravel(x[h]) for x in eps])
        np.testing.assert_allclose(eh, 0.07 * gh / np.linalg.norm(gh), rtol=1e-12)
    assert float(head_norms(headwise_perturbation(jax.tree_util.tree_map(jnp.zeros_like, g),
                                                  0.1)).max()) == 0.0


def test_headwise_equals_global_sam_with_one_active_head(tiny_cov):
    """Remark after Def. B.1: with a single head carrying gradient, the two forms coincide."""
    lam, e = eigh_desc(tiny_cov)
    p = ansatz_params(e, np.array([0.3]), n_heads=3)  # heads 2, 3 are zero: zero gradient
    pop = population_moments(tiny_cov, 5)
    grad = jax.grad(lambda q: loss(q, pop))
    g = grad(p)
    a = headwise_sam_gradient(grad, p, g, 0.05)
    b = sam_gradient(grad, p, g, 0.05)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)


def test_headwise_differs_from_global_with_two_active_heads(tiny_cov):
    lam, e = eigh_desc(tiny_cov)
    p = ansatz_params(e, np.array([0.3, 0.05]), n_heads=3)
    pop = population_moments(tiny_cov, 5)
    grad = jax.grad(lambda q: loss(q, pop))
    g = grad(p)
    a = headwise_sam_gradient(grad, p, g, 0.05)
    b = sam_gradient(grad, p, g, 0.05)
    assert float(jnp.abs(a.v[1] - b.v[1])) > 1e-6  # the small head gets the full radius


def test_headwise_flow_direction_is_g_plus_rho_hessian_times_unit(tiny_data):
    """(H u) by central finite differences of the gradient along the head-wise unit u."""
    mom = empirical_moments(tiny_data)
    p = init_params(jax.random.PRNGKey(5), 3, 2, init_scale=2.0)
    grad = jax.jit(jax.grad(lambda q: loss(q, mom)))
    g = grad(p)
    u = headwise_perturbation(g, 1.0)
    h = 1e-5
    plus = grad(jax.tree_util.tree_map(lambda a, b: a + h * b, p, u))
    minus = grad(jax.tree_util.tree_map(lambda a, b: a - h * b, p, u))
    got = headwise_sam_flow_direction(grad, p, g, 0.3)
    for gg, pl, mi, d in zip(g, plus, minus, got, strict=True):
        # the loss is a polynomial of degree 6 in the weights: central differences are accurate
        # to O(h²) ~ 1e-10 relative here
        np.testing.assert_allclose(d, gg + 0.3 * (pl - mi) / (2 * h), rtol=1e-6, atol=1e-9)


def test_methods_registry_extends_optim():
    from sims.optim import METHODS as BASE

    assert set(BASE) < set(METHODS)
    assert {"sam_headwise", "sam_flow_headwise"} <= set(METHODS)
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0"):
        METHODS["sam_headwise"](0.1, -1.0)
