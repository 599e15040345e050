"""sims/linear_attention/data.py: both samplers against the closed-form moments of their law.

``β = Σ̂ w`` with ``Σ̂`` the sample covariance of ``N`` tokens and ``w ~ N(0, I)``, ``x_q ~ N(0, Σ)``,
``y_q = wᵀ x_q``, so ``E[x_q x_qᵀ] = Σ``, ``E[y_q²] = tr Σ``, ``E[β y_q x_qᵀ] = Σ²`` and
``E[β βᵀ] = E[Σ̂²] = Σ² + (Σ + tr(Σ) I) Σ / N`` (App. C.1). Each is checked at a small ``N``
(where the ``1/N`` term is large) to within 5 Monte-Carlo standard errors computed from the
samples themselves.
"""

import numpy as np
import pytest

from sims.linear_attention.data import (
    features_from_tokens,
    make_covariance,
    sample_dataset,
    sample_tokens,
)


def _within(samples, expect, n_se=5.0):
    """Mean of ``samples (P, ...)`` equals ``expect`` within ``n_se`` standard errors."""
    mean = samples.mean(0)
    se = samples.std(0) / np.sqrt(samples.shape[0])
    z = np.abs(mean - expect) / np.maximum(se, 1e-300)
    assert np.all(z < n_se), (z.max(), mean, expect)


@pytest.mark.parametrize("method", ["wishart", "tokens"])
def test_sampler_moments_equal_their_closed_forms(method):
    n = 3
    cov = make_covariance("linear", 3, seed=4)
    data = sample_dataset(400_000 if method == "wishart" else 200_000, n, cov, seed=9,
                          method=method)  # fmt: skip
    b, xq, yq = data.beta, data.xq, data.yq
    _within(xq[:, :, None] * xq[:, None, :], cov)
    _within(yq**2, np.trace(cov))
    _within(b[:, :, None] * (yq[:, None] * xq)[:, None, :], cov @ cov)
    e_s2 = cov @ cov + (cov + np.trace(cov) * np.eye(3)) @ cov / n
    _within(b[:, :, None] * b[:, None, :], e_s2)
    # the 1/N term is what a wrong normalization or degrees of freedom would change: it is
    # resolved here (larger than the tolerance by a wide margin)
    assert np.abs((cov + np.trace(cov) * np.eye(3)) @ cov / n).max() > 0.1


def test_features_from_tokens_is_the_context_average():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 2))
    y = rng.standard_normal((3, 5))
    beta, xq, yq = features_from_tokens(x, y)
    np.testing.assert_allclose(beta, sum(y[:, i, None] * x[:, i] for i in range(4)) / 4)
    np.testing.assert_array_equal(xq, x[:, -1])
    np.testing.assert_array_equal(yq, y[:, -1])


def test_tokens_have_the_covariance_and_labels_are_linear():
    cov = make_covariance("geometric", 3, seed=1, ratio=0.3)
    x, y = sample_tokens(100_000, 2, cov, seed=3)
    flat = x.reshape(-1, 3)
    _within(flat[:, :, None] * flat[:, None, :], cov)
    # y_n = wᵀ x_n with one w per sequence: the 3 labels are exactly linear in the tokens
    w = np.linalg.solve(x[:, :, :], y[..., None])[..., 0]
    np.testing.assert_allclose(np.einsum("pnd,pd->pn", x, w), y, atol=1e-8)
    _within(w[:, :, None] * w[:, None, :], np.eye(3))


def test_covariance_families_have_their_spectra():
    for kind, eig in (("linear", [0.4, 0.3, 0.2, 0.1]), ("white", [0.25] * 4)):
        c = make_covariance(kind, 4, seed=7)
        np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(c))[::-1], eig, atol=1e-14)
    g = np.sort(np.linalg.eigvalsh(make_covariance("geometric", 3, ratio=0.5)))[::-1]
    np.testing.assert_allclose(g / g[0], [1.0, 0.5, 0.25], rtol=1e-12)
    np.testing.assert_allclose(g.sum(), 1.0, rtol=1e-12)
