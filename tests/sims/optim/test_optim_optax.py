"""Contract tests over every optimizer in sims.optim, plus SAM-specific equivalences."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sims.optim import (
    METHODS,
    gd,
    sam,
    sam_flow_direction,
    sam_gradient,
    sam_perturbation,
)

A = jnp.array([[3.0, 0.5], [0.5, 1.0]])


def quad(w):
    return 0.5 * w["x"] @ A @ w["x"] + jnp.sum(w["y"] ** 4)


def _run(opt, steps=200):
    w = {"x": jnp.array([1.0, -2.0]), "y": jnp.array([0.3])}
    state = opt.init(w)
    grad_fn = jax.grad(quad)

    @jax.jit
    def step(w, state):
        upd, state = opt.update(grad_fn(w), state, w, grad_fn=grad_fn)
        return optax.apply_updates(w, upd), state

    for _ in range(steps):
        w, state = step(w, state)
    return w


@pytest.mark.parametrize("name", sorted(METHODS))
def test_contract_converges_and_keeps_dtype(name):
    w = _run(METHODS[name](0.1, 0.01))
    assert w["x"].dtype == jnp.float64
    assert float(jnp.linalg.norm(w["x"])) < 0.05  # near the minimum (SAM: O(rho) bias)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_rho_zero_is_gd_exactly(name):
    a = _run(METHODS[name](0.1, 0.0), steps=20)
    b = _run(optax.with_extra_args_support(gd(0.1)), steps=20)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


@given(st.floats(1e-4, 1.0), st.lists(st.floats(-3, 3), min_size=3, max_size=3))
def test_perturbation_norm_is_rho(rho, g):
    g = {"a": jnp.array(g[:2]), "b": jnp.array(g[2:])}
    eps = sam_perturbation(g, rho)
    norm = float(optax.tree.norm(g))
    expected = rho if norm > 0 else 0.0
    assert float(optax.tree.norm(eps)) == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_sam_matches_definition_and_first_order_slope():
    w = {"x": jnp.array([0.7, -0.4]), "y": jnp.array([0.5])}
    grad_fn = jax.grad(quad)
    g = grad_fn(w)
    rho = 0.05
    norm = optax.tree.norm(g)
    manual = grad_fn(jax.tree_util.tree_map(lambda p, gi: p + rho * gi / norm, w, g))
    got = sam_gradient(grad_fn, w, g, rho)
    for k in w:
        np.testing.assert_allclose(got[k], manual[k], rtol=1e-14)
    # eq. 7: SAM gradient = (I + P) g + O(rho^2): the error shrinks with slope ~2 in rho
    errs = []
    for r in (1e-2, 5e-3, 2.5e-3):
        exact = sam_gradient(grad_fn, w, g, r)
        approx = sam_flow_direction(grad_fn, w, g, r)
        errs.append(float(optax.tree.norm(jax.tree_util.tree_map(jnp.subtract, exact, approx))))
    slopes = np.diff(np.log(errs)) / np.diff(np.log([1e-2, 5e-3, 2.5e-3]))
    assert np.all(np.abs(slopes - 2.0) < 0.1)


def test_sam_flow_uses_hessian():
    w = {"x": jnp.array([0.7, -0.4]), "y": jnp.array([0.0])}
    grad_fn = jax.grad(quad)
    g = grad_fn(w)
    out = sam_flow_direction(grad_fn, w, g, 0.1)
    expected = g["x"] + 0.1 / optax.tree.norm(g) * (A @ g["x"])
    np.testing.assert_allclose(out["x"], expected, rtol=1e-13)


def test_errors():
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0; got -0.5"):
        sam(-0.5)
    with pytest.raises(ValueError, match="`learning_rate` must be finite and >= 0"):
        gd(-1.0)
    opt = sam(0.1)
    w = jnp.ones(2)
    with pytest.raises(TypeError, match="needs the keyword-only extra argument `grad_fn`"):
        opt.update(w, opt.init(w), w)
    with pytest.raises(ValueError, match="needs `params`"):
        opt.update(w, opt.init(w), None, grad_fn=lambda p: p)


def test_zero_gradient_is_safe():
    g = {"x": jnp.zeros(2)}
    eps = sam_perturbation(g, 0.1)
    assert float(jnp.abs(eps["x"]).max()) == 0.0
