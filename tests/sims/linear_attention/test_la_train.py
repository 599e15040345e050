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
    from sims.runtime.io import provenance, read_netcdf, write_netcdf

    p = init_params(jax.random.PRNGKey(0), 3, 2)
    res = train(p, empirical_moments(tiny_data), 20, record_every=5, attrs={"note": "x"})
    path = write_netcdf(tmp_path / "r.nc", res.ds, meta=provenance(config={"a": 1}, seed=0))
    back = read_netcdf(path)
    xr.testing.assert_allclose(back.drop_attrs(), res.ds.drop_attrs())
    assert back.attrs["meta"]["config"] == {"a": 1} and back.attrs["status"] == "success"
    assert isinstance(res.final_params(0), AttnSParams)


def _manual_sam_loop(p, mom, test_mom, n, lr, rho, hw=False):
    """Hand-written SAM (eq. 6): ε = ρ g/‖g‖, w ← w − η ∇L(w + ε); losses before each step."""
    grad = jax.jit(jax.grad(lambda q: loss(q, mom)))
    train_l, test_l, gn = [], [], []
    for _ in range(n):
        train_l.append(float(loss(p, mom)))
        test_l.append(float(loss(p, test_mom)))
        g = grad(p)
        leaves = jax.tree_util.tree_leaves(g)
        gn.append(float(np.sqrt(sum(float(jnp.sum(x * x)) for x in leaves))))
        eps = jax.tree_util.tree_map(lambda x: rho * x / gn[-1], g)
        g2 = grad(jax.tree_util.tree_map(jnp.add, p, eps))
        p = jax.tree_util.tree_map(lambda a, b: a - lr * b, p, g2)
    return np.array(train_l), np.array(test_l), np.array(gn), p


def test_sam_trainer_separates_train_and_test_moments(tiny_data, tiny_cov):
    """SAM at ρ > 0 with test moments ≠ training moments, against a hand-written SAM loop.

    Catches a swapped train/test argument, a SAM step that uses the test moments, a wrong
    perturbation sign or normalization (the trajectories differ by far more than 1e-10).
    """
    mom = empirical_moments(tiny_data)
    test_mom = population_moments(tiny_cov, 5)
    p = init_params(jax.random.PRNGKey(4), 3, 2, init_scale=2.0)
    res = train(p, mom, 25, optimizer="sam", learning_rate=0.05, rho=0.05, test_moments=test_mom,
                record_every=5)
    tr, te, gn, pf = _manual_sam_loop(p, mom, test_mom, 25, 0.05, 0.05)
    assert np.max(np.abs(tr - te)) > 1e-3  # the two losses really differ
    np.testing.assert_allclose(res.ds.train_loss.values[0], tr, rtol=1e-10)
    np.testing.assert_allclose(res.ds.test_loss.values[0], te, rtol=1e-10)
    np.testing.assert_allclose(res.ds.grad_norm.values[0], gn, rtol=1e-10)
    np.testing.assert_allclose(res.ds.final_v.values[0], pf.v, rtol=1e-10)
    assert float(res.ds.final_test_loss[0]) == pytest.approx(te[-1], rel=1e-12)
    gd = train(p, mom, 25, optimizer="gd", learning_rate=0.05, record_every=5)
    assert np.max(np.abs(gd.ds.train_loss.values[0] - tr)) > 1e-6  # SAM is not GD here


def test_first_passages_are_exact_at_any_logging_stride(tiny_data, tiny_cov):
    lam, e = eigh_desc(tiny_cov)
    mom = empirical_moments(tiny_data)
    test_mom = population_moments(tiny_cov, 5)
    p = init_params(jax.random.PRNGKey(2), 3, 3, init_scale=1.0)
    targets = np.array([0.05, 0.02, 0.01])
    levels = np.array([0.95, 0.9, 0.86])  # the test loss crosses them late; the train loss at 0
    kw = dict(optimizer="sam", learning_rate=0.05, rho=0.01, test_moments=test_mom, eigvecs=e,
              component_targets=targets, loss_levels=levels)
    fine = train(p, mom, 300, record_every=300, log_every=1, **kw)
    coarse = train(p, mom, 300, record_every=70, log_every=7, **kw)
    from sims.linear_attention.measure import learning_times

    comp = fine.ds.component.values[0]
    expect_c = learning_times(comp, targets, fraction=1.0)
    tl = fine.ds.test_loss.values[0]
    expect_l = np.array([np.argmax(tl <= lv) if np.any(tl <= lv) else np.nan for lv in levels])
    assert np.sum(np.isfinite(expect_c)) >= 1 and np.all(np.isfinite(expect_l))
    tr = fine.ds.train_loss.values[0]
    assert np.argmax(tr <= levels[0]) != expect_l[0]  # train and test curves cross differently
    for res in (fine, coarse):
        np.testing.assert_array_equal(res.ds.first_component_step.values[0], expect_c)
        np.testing.assert_array_equal(res.ds.first_test_below.values[0], expect_l)
    np.testing.assert_allclose(coarse.ds.test_loss.values[0], tl[::7], rtol=1e-12)
    assert coarse.ds.step.values.tolist() == list(range(0, 300, 7))
    with pytest.raises(ValueError, match="must be a multiple of `log_every`"):
        train(p, mom, 10, record_every=5, log_every=3)
    with pytest.raises(ValueError, match="`component_targets` must have shape"):
        train(p, mom, 10, component_targets=np.ones(2))


@pytest.mark.parametrize("rho", [0.03, 0.1])
def test_integrate_flow_first_order_sam_matches_c2_ode(rho):
    """One active head: the RK4 flow of eq. (8) equals the App. C.2 full SAM ODE at ρ > 0."""
    from sims.scalar_odes import attn_s_ode, solve

    cov = np.diag([0.6, 0.4])
    lam, e = eigh_desc(cov)
    a = a_coefficients(cov, 10)
    p0 = ansatz_params(e, np.array([0.2]))
    res = integrate_flow(p0, population_moments(cov, 10), 10.0, dt=0.01, rho=rho)
    t = res.ds.time.values
    ode = attn_s_ode(lam[0], rho=rho, dynamics="full", a=a[0])
    v_ode = solve(ode, (0.0, t[-1]), 0.2, t_eval=t).x
    v_gd = solve(attn_s_ode(lam[0], rho=0.0, dynamics="full", a=a[0]), (0.0, t[-1]), 0.2,
                 t_eval=t).x
    np.testing.assert_allclose(res.ds.v.values[:, 0], v_ode, rtol=1e-7)
    assert np.max(np.abs(v_ode - v_gd)) > 1e-3  # ρ really matters over this window


def test_integrate_flow_sam_shares_the_radius_between_heads():
    """Two active heads: each moves by G_i − (ρ/√3) G_i G_i'/‖G‖ (global norm, theory)."""
    from scipy.integrate import solve_ivp

    from sims.ansatz import reduced_rate

    cov = np.diag([0.6, 0.4])
    lam, e = eigh_desc(cov)
    a = a_coefficients(cov, 10)
    sigma, kappa = lam**2, lam * a
    v0 = np.array([0.15, 0.25])
    rho = 0.05
    res = integrate_flow(ansatz_params(e, v0), population_moments(cov, 10), 6.0, dt=0.01, rho=rho)
    t = res.ds.time.values
    for norm, close in (("global", True), ("headwise", False)):
        sol = solve_ivp(lambda _, v, nm=norm: reduced_rate(v, sigma, kappa, rho,
                                                           form="first_order", normalization=nm),
                        (0, t[-1]), v0, t_eval=t, rtol=1e-11, atol=1e-13)
        err = np.max(np.abs(res.ds.v.values - sol.y.T))
        assert (err < 1e-8) == close, (norm, err)


def test_sam_at_rho_zero_is_gd_bit_for_bit_and_checkpoints_are_the_trajectory():
    """Figure 1 runs GD through SAM's compiled program at ρ = 0 (one compilation for the paper's
    three methods): the perturbation is 0·g, so every number must equal GD's exactly. The
    proxy's checkpoints (``checkpoint_steps``) must be the parameters w_s of the same run."""
    from sims.linear_attention.data import make_covariance

    cov = make_covariance("linear", 3, seed=2)
    mom = population_moments(cov, 8)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    p0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x),
                                *[init_params(k, 3, 2, init_scale=0.3) for k in keys])
    kw = dict(learning_rate=0.05, record_every=7, log_every=1, checkpoint_steps=[0, 7, 10, 40])
    gd = train_runs(p0, mom, 40, optimizer="gd", **kw)
    sam0 = train_runs(p0, mom, 40, optimizer="sam", rho=0.0, **kw)
    for name in ("train_loss", "component", "final_v", "final_k", "checkpoint_q", "v"):
        np.testing.assert_array_equal(gd.ds[name].values, sam0.ds[name].values, err_msg=name)
    # checkpoints: w_0 = init, w_7 = the snapshot at step 7, w_40 = the final parameters
    ck = gd.ds.checkpoint_v.values
    np.testing.assert_array_equal(ck[:, 0], np.asarray(p0.v))
    np.testing.assert_array_equal(ck[:, 1], gd.ds.v.sel(snapshot=1).values)
    np.testing.assert_array_equal(ck[:, 3], gd.ds.final_v.values)
    assert not np.array_equal(ck[:, 2], ck[:, 1])
    assert gd.ds.checkpoint_step.values.tolist() == [0, 7, 10, 40]
    sam = train_runs(p0, mom, 40, optimizer="sam", rho=0.05, **kw)
    assert np.max(np.abs(sam.ds.final_v.values - gd.ds.final_v.values)) > 1e-6
    with pytest.raises(ValueError, match="`checkpoint_steps` must be integer steps"):
        train_runs(p0, mom, 40, checkpoint_steps=[41])
