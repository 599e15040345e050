"""The sufficient-statistics engine equals the token-level attention (loss and gradients)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from sims.linear_attention.data import ICLData, features_from_tokens
from sims.linear_attention.models import (
    AttnMParams,
    init_params,
    output_scale,
    token_loss,
    tokens_to_matrix,
)
from sims.linear_attention.stats import empirical_moments, loss
from sims.optim import METHODS
from sims.selection import upsample_indices


@pytest.mark.parametrize(
    ("model", "rank", "scale", "optimizer"),
    [
        ("attn_s", 1, "anchor", "sam"),
        ("attn_s", 2, "paper", "gd"),
        ("attn_m", 1, "anchor", "gd"),
    ],
)
def test_loss_and_grads_equal_along_trajectory(
    tiny_tokens, tiny_data, model, rank, scale, optimizer
):
    x, y = tiny_tokens
    n = tiny_data.n_context
    s = output_scale(scale, n)
    xmat = tokens_to_matrix(x, y)
    yq = jnp.asarray(tiny_data.yq)
    moments = empirical_moments(tiny_data, scale=s)
    scale = 2.0 if model == "attn_s" else 0.3  # attn_m: std = init (linattn-icl), no 1/√numel
    params = init_params(jax.random.PRNGKey(3), 3, 4, model=model, rank=rank, init_scale=scale)

    def fast(p):
        return loss(p, moments)

    def naive(p):  # the '*' blocks of W^V, W^Q, W^KQ are random (star_seed) and must not matter
        return token_loss(p, xmat, yq, n_context=n, scale=s, star_seed=3)

    fast_vg = jax.jit(jax.value_and_grad(fast))
    naive_vg = jax.jit(jax.value_and_grad(naive))
    opt = METHODS[optimizer](0.05 / s, 0.05)
    naive_grad = jax.grad(naive)

    @jax.jit
    def step(p, st, g):
        upd, st = opt.update(g, st, p, grad_fn=naive_grad)
        return optax.apply_updates(p, upd), st

    state = opt.init(params)
    for _ in range(10):
        lf, gf = fast_vg(params)
        ln, gn = naive_vg(params)
        assert abs(float(lf - ln)) <= 1e-13 * max(1.0, abs(float(ln)))
        for a, b in zip(gf, gn, strict=False):
            np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13)
        params, state = step(params, state, gn)
    assert isinstance(params, AttnMParams) == (model == "attn_m")


def test_upsampling_by_duplication_equals_weights(tiny_tokens, tiny_data):
    x, y = tiny_tokens
    mask = np.array([True, False, False, True, False, False, False, True])
    idx = upsample_indices(8, mask, factor=2)
    dup = ICLData(*features_from_tokens(x[idx], y[idx]), tiny_data.cov, 5)
    params = init_params(jax.random.PRNGKey(1), 3, 2, init_scale=3.0)
    weights = np.where(mask, 3, 1)
    a = loss(params, empirical_moments(tiny_data, weights))
    b = loss(params, empirical_moments(dup))
    tl = jax.jit(token_loss, static_argnames=("n_context",))
    c = tl(params, tokens_to_matrix(x[idx], y[idx]), jnp.asarray(y[idx, -1]), n_context=5)
    assert float(a) == pytest.approx(float(b), rel=1e-13)
    assert float(a) == pytest.approx(float(c), rel=1e-13)


@pytest.mark.parametrize(("model", "d", "heads", "rank"), [("attn_s", 4, 4000, 1),
                                                          ("attn_s", 2, 3000, 2),
                                                          ("attn_m", 3, 3000, 1)])
def test_init_std_follows_linattn_icl(model, d, heads, rank):
    """std = init/√numel of the whole nn.Linear (attnS; value numel H(d+1)²), init for attnM."""
    p = init_params(jax.random.PRNGKey(7), d, heads, model=model, rank=rank, init_scale=0.01)
    if model == "attn_s":
        want = {"v": 0.01 / np.sqrt(heads * (d + 1) ** 2),
                "k": 0.01 / np.sqrt(heads * rank * (d + 1))}
        got = {"v": float(np.std(p.v)), "k": float(np.std(p.k))}
    else:
        want = {"v": 0.01, "u": 0.01}
        got = {"v": float(np.std(p.v)), "u": float(np.std(p.u))}
    for key in want:  # ≥ 3000 draws: the sample std is within 4% of σ with overwhelming odds
        assert got[key] == pytest.approx(want[key], rel=0.04), key


@pytest.mark.parametrize(("model", "d", "heads", "rank", "scale"), [
    ("attn_s", 4, 5, 1, 0.01), ("attn_s", 6, 4, 3, 0.5), ("attn_s", 2, 1, 1, 1e-3),
    ("attn_m", 3, 2, 1, 3.0), ("attn_m", 2, 1, 1, 0.7)])  # fmt: skip
def test_init_is_the_eager_jax_expression_bit_for_bit(model, d, heads, rank, scale):
    """The draws, split keys and scaling of linattn-icl's init, as plain eager JAX computes them.

    ``init_params`` scales on the host to save compilations; the numbers must not move (Figure
    1's reference values depend on them). H = 1 is the case where XLA's divide differs from
    numpy's in the last bit.
    """
    for seed in range(8):
        key = jax.random.fold_in(jax.random.PRNGKey(11), seed)
        kv, kk, kq = jax.random.split(key, 3)
        if model == "attn_s":
            std = scale / np.sqrt(heads * rank * (d + 1))
            want = (jax.random.normal(kv, (heads,)) * scale / np.sqrt(heads * (d + 1) ** 2),
                    jax.random.normal(kk, (heads, rank, d)) * std,
                    jax.random.normal(kq, (heads, rank, d)) * std)  # fmt: skip
        else:
            want = (jax.random.normal(kv, (heads,)) * scale,
                    jax.random.normal(kk, (heads, d, d)) * scale)  # fmt: skip
        got = init_params(key, d, heads, model=model, rank=rank, init_scale=scale)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert isinstance(g, jax.Array) and g.dtype == w.dtype
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
