"""Bad input: clear errors naming the argument, value and fix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sims.linear_attention.data import make_covariance, sample_dataset, validate_covariance
from sims.linear_attention.experiment import Figure1Config
from sims.linear_attention.models import init_params
from sims.linear_attention.stats import empirical_moments, population_moments
from sims.linear_attention.train import TrainingDivergedError, train, train_runs
from sims.optim import sam


def test_covariance_checks():
    with pytest.raises(ValueError, match="`cov` must be symmetric"):
        validate_covariance([[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match="`cov` must be positive semi-definite.*-1"):
        validate_covariance([[1.0, 0.0], [0.0, -1.0]])
    with pytest.raises(ValueError, match=r"`cov` must be a square \(d, d\) matrix"):
        validate_covariance(np.ones((2, 3)))
    with pytest.raises(ValueError, match="`kind` must be one of"):
        make_covariance("pink", 3)
    with pytest.raises(ValueError, match="`matrix` is required"):
        make_covariance("given")


def test_dataset_checks():
    cov = np.eye(2)
    with pytest.raises(ValueError, match=r"`n_examples` \(P\) must be >= 2; got 1"):
        sample_dataset(1, 4, cov)
    with pytest.raises(ValueError, match=r"`n_context` \(N\) must be >= 1"):
        sample_dataset(4, 0, cov)
    with pytest.raises(ValueError, match="needs explicit tokens"):
        sample_dataset(4, 3, cov, anchor_preprocessing=True)


def test_param_checks():
    with pytest.raises(ValueError, match="`n_heads` must be an int >= 1; got 0"):
        init_params(jax.random.PRNGKey(0), 3, 0)
    with pytest.raises(ValueError, match="`model` must be one of"):
        init_params(jax.random.PRNGKey(0), 3, 2, model="mlp")


def test_trainer_checks(tiny_data):
    p = init_params(jax.random.PRNGKey(0), 3, 2)
    mom = empirical_moments(tiny_data)
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0"):
        train(p, mom, 3, optimizer="sam", rho=-0.1)
    with pytest.raises(ValueError, match="moments are for d²=16 features but params have d=3"):
        train(p, population_moments(np.eye(4), 3), 3)
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        train(p, mom, 3, optimizer="adam")
    with pytest.raises(ValueError, match="`num_steps` must be an int >= 1"):
        train(p, mom, 0)
    with pytest.raises(TypeError, match="`params0` must be AttnSParams"):
        train({"v": 1}, mom, 3)
    with pytest.raises(ValueError, match=r"`params0.v` must be \(R, H\)"):
        train_runs(p, mom, 3)
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0"):
        sam(-1.0)
    with pytest.raises(ValueError, match="`rho` must be finite and >= 0"):
        Figure1Config(rho=-1.0)
    with pytest.raises(ValueError, match=r"`n_examples` \(P\) must be >= 2"):
        Figure1Config(n_examples=1)
    with pytest.raises(ValueError, match="`n_heads` must be an int >= 1"):
        Figure1Config(n_heads=0)


def test_divergence_stops_with_step_and_parameter(tiny_data):
    p = init_params(jax.random.PRNGKey(0), 3, 2, init_scale=3.0)
    mom = empirical_moments(tiny_data, scale=50.0)
    with pytest.raises(
        TrainingDivergedError, match=r"run 0: non-finite .* at step \d+ .*parameter `\w+`"
    ) as exc:
        train(p, mom, 200, learning_rate=5.0, record_every=10)
    res = exc.value.result
    assert res.status == "failed" and not res.success
    n_ok = int(res.n_completed[0])
    loss_curve = res.ds.train_loss.values[0]
    assert 0 < n_ok < 200
    assert np.all(np.isfinite(loss_curve[:n_ok]))
    assert np.all(np.isnan(loss_curve[n_ok + 1 :]))
    # without raising, the same partial result comes back
    res2 = train(p, mom, 200, learning_rate=5.0, record_every=10, raise_on_failure=False)
    assert res2.status == "failed" and int(res2.n_completed[0]) == n_ok
    assert jnp.all(jnp.isfinite(res2.ds.final_v.values))
