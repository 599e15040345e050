import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import xarray as xr

from sims.linear_attention.models import AttnSParams, ansatz_params, init_params
from sims.linear_attention.stats import (
    a_coefficients,
    eigh_desc,
    empirical_moments,
    loss,
    population_moments,
)
from sims.linear_attention.train import integrate_flow, train, train_runs
from sims.optim import METHODS


def _batch(ps):
    return type(ps[0])(*(jnp.stack(x) for x in zip(*ps, strict=True)))


@pytest.mark.parametrize("optimizer", ["gd", "sam"])
def test_trainer_equals_manual_optax_loop(tiny_data, optimizer):
    mom = empirical_moments(tiny_data)
    p = init_params(jax.random.PRNGKey(1), 3, 2, init_scale=2.0)
    res = train(p, mom, 20, optimizer=optimizer, learning_rate=0.05, rho=0.02, record_every=5)
    opt = METHODS[optimizer](0.05, 0.02)
    grad_fn = jax.grad(lambda q: loss(q, mom))
    st = opt.init(p)
    losses = []
    for _ in range(20):
        losses.append(float(loss(p, mom)))
        upd, st = opt.update(grad_fn(p), st, p, grad_fn=grad_fn)
        p = optax.apply_updates(p, upd)
    np.testing.assert_allclose(res.ds.train_loss.values[0], losses, rtol=1e-12)
    np.testing.assert_allclose(res.ds.final_v.values[0], p.v, rtol=1e-12)
    assert res.success and res.ds.v.shape == (1, 4, 2)


def test_vmap_over_runs_and_rho_matches_single_runs(tiny_data):
    mom = empirical_moments(tiny_data)
    ps = [init_params(jax.random.PRNGKey(i), 3, 2, init_scale=2.0) for i in range(3)]
    rhos = np.array([0.0, 0.01, 0.05])
    batch = train_runs(
        _batch(ps), mom, 20, optimizer="sam", learning_rate=0.05, rho=rhos, record_every=5
    )
    for i in range(3):
        one = train(
            ps[i], mom, 20, optimizer="sam", learning_rate=0.05, rho=rhos[i], record_every=5
        )
        np.testing.assert_allclose(
            batch.ds.train_loss.values[i], one.ds.train_loss.values[0], rtol=1e-13
        )
    gd = train(ps[0], mom, 20, optimizer="gd", learning_rate=0.05, record_every=5)
    np.testing.assert_array_equal(batch.ds.train_loss.values[0], gd.ds.train_loss.values[0])


def test_components_track_eigenbasis(tiny_data, tiny_cov):
    lam, e = eigh_desc(tiny_cov)
    p = ansatz_params(e, np.array([0.5, 0.2]), n_heads=3)
    res = train(p, population_moments(tiny_cov, 5), 20, eigvecs=e, record_every=5)
    np.testing.assert_allclose(res.ds.component.values[0, 0], [0.125, 0.008, 0.0], atol=1e-14)


def test_gradient_flow_matches_scalar_ode():
    """On the ansatz the RK4 flow of the full model equals the App. C.2 ODE, tau v' = P(v)."""
    from sims.scalar_odes import attn_s_ode, solve

    cov = np.diag([0.6, 0.4])
    lam, e = eigh_desc(cov)
    a = a_coefficients(cov, 10)
    p0 = ansatz_params(e, np.array([0.2, 0.2]))
    for rho in (0.0, 0.05):
        res = integrate_flow(p0, population_moments(cov, 10), 20.0, dt=0.01, rho=rho)
        v_sim = res.ds.v.values[-1]
        if rho == 0.0:  # heads decouple exactly under GD flow
            for i in range(2):
                ode = attn_s_ode(lam[i], rho=0.0, dynamics="full", a=a[i])
                v_ode = solve(ode, (0.0, res.ds.time.values[-1]), 0.2).x[-1]
                assert v_sim[i] == pytest.approx(v_ode, rel=1e-6)
        assert res.success


def test_result_netcdf_roundtrip(tmp_path, tiny_data):
    from sims.io import provenance, read_netcdf, write_netcdf

    p = init_params(jax.random.PRNGKey(0), 3, 2)
    res = train(p, empirical_moments(tiny_data), 20, record_every=5, attrs={"note": "x"})
    path = write_netcdf(tmp_path / "r.nc", res.ds, meta=provenance(config={"a": 1}, seed=0))
    back = read_netcdf(path)
    xr.testing.assert_allclose(back.drop_attrs(), res.ds.drop_attrs())
    assert back.attrs["meta"]["config"] == {"a": 1} and back.attrs["status"] == "success"
    assert isinstance(res.final_params(0), AttnSParams)
