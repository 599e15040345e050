import jax
import numpy as np
import pytest

from sims.linear_attention.data import ICLData, features_from_tokens, make_covariance, sample_tokens


@pytest.fixture(scope="session")
def tiny_cov():
    return make_covariance("linear", 3, seed=1)


@pytest.fixture(scope="session")
def tiny_tokens(tiny_cov):
    """8 sequences, N=5 context pairs, d=3."""
    x, y = sample_tokens(8, 5, tiny_cov, seed=0)
    return x, y


@pytest.fixture(scope="session")
def tiny_data(tiny_tokens, tiny_cov):
    x, y = tiny_tokens
    return ICLData(*features_from_tokens(x, y), tiny_cov, 5)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


@pytest.fixture(scope="session")
def rng():
    return np.random.default_rng(0)
