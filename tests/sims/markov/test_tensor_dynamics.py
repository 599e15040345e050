import numpy as np
import pytest
from scipy.integrate import solve_ivp

from sims.markov.tensor_dynamics import (
    FlowConfig,
    antisymmetric_jacobian,
    count_stages,
    coupling_time,
    discrete_flow,
    full_loss,
    full_rhs,
    init_state,
    lyapunov_phi,
    plateau_levels,
    reduced_loss,
    reduced_rhs,
    softmax,
    solve_flow,
    solve_symmetric,
    stage_times,
    symmetric_rhs,
    target_positions,
    target_scales,
)


def _orthonormal_features(h, d, rng):
    Q, _ = np.linalg.qr(rng.standard_normal((d * d, h)))
    return Q.T.reshape(h, d, d)  # <V_a*, V_b*>_F = delta_ab


def test_full_rhs_is_the_negative_gradient_of_the_tensor_loss():
    rng = np.random.default_rng(0)
    H, h, d, T = 2, 2, 3, 4
    Vs, ms, Ss = _orthonormal_features(h, d, rng), np.array([2.0, 1.0]), target_positions(h, T)
    y = rng.standard_normal(H * d * d + H * T)

    def L(y):
        return full_loss(
            y[: H * d * d].reshape(H, d, d), softmax(y[H * d * d :].reshape(H, T)), Vs, ms, Ss
        )

    g = np.array([(L(y + 1e-6 * e) - L(y - 1e-6 * e)) / 2e-6 for e in np.eye(y.size)])
    np.testing.assert_allclose(full_rhs(0, y, Vs, ms, Ss, H), -g, atol=1e-6)


def test_reduced_flow_equals_full_flow_when_V0_is_in_the_span():
    rng = np.random.default_rng(1)
    H, h, d, T = 3, 2, 3, 5
    Vs, ms, Ss = _orthonormal_features(h, d, rng), np.array([1.7, 1.0]), target_positions(h, T)
    C0, Q0 = 0.3 * rng.standard_normal((H, h)), rng.standard_normal((H, T))
    V0 = np.einsum("ia,axy->ixy", C0, Vs)
    tf = 3.0
    full = solve_ivp(
        full_rhs,
        (0, tf),
        np.concatenate([V0.ravel(), Q0.ravel()]),
        args=(Vs, ms, Ss, H),
        rtol=1e-10,
        atol=1e-12,
    )
    red = solve_ivp(
        reduced_rhs,
        (0, tf),
        np.concatenate([C0.ravel(), Q0.ravel()]),
        args=(ms, Ss, H),
        rtol=1e-10,
        atol=1e-12,
    )
    Vf = full.y[: H * d * d, -1].reshape(H, d, d)
    Cr = red.y[: H * h, -1].reshape(H, h)
    np.testing.assert_allclose(np.einsum("ixy,axy->ia", Vf, Vs), Cr, atol=1e-7)
    np.testing.assert_allclose(Vf, np.einsum("ia,axy->ixy", Cr, Vs), atol=1e-7)  # stays in span
    np.testing.assert_allclose(full.y[H * d * d :, -1], red.y[H * h :, -1], atol=1e-7)
    S = softmax(red.y[H * h :, -1].reshape(H, T))
    assert np.isclose(full_loss(Vf, S, Vs, ms, Ss), reduced_loss(Cr, S, ms, Ss), atol=1e-8)


def test_theorem1_symmetric_flow_converges_to_first_pattern_and_phi_increases():
    cfg = FlowConfig(T=8, t_max=1e5, n_eval=300)
    rng = np.random.default_rng(0)
    s0 = softmax(0.1 * rng.standard_normal(8))
    s0[[0, 1, 2]] = np.sort(s0[[0, 1, 2]])[::-1]  # Eq. (6): <s(0), s_1*> is the largest
    t, c, s, phi = solve_symmetric(cfg, s0=s0)
    m = cfg.scales
    target = np.array([m[0] / cfg.H, 0, 0])
    err = np.abs(c - target).max(1)
    assert err[-1] < 5e-3 and err[-1] < 0.5 * err[len(t) // 2]  # slow (algebraic) approach
    assert s[-1, 0] > 0.995
    assert np.all(np.diff(phi) >= -1e-9)  # Lyapunov function of Eq. (9)
    # loss plateau 1/2 sum_{a>=2} m_a^2 (L_sym = 1/2||G||^2 - H phi)
    np.testing.assert_allclose(
        0.5 * (m**2).sum() - cfg.H * phi[-1], plateau_levels(m)[1], atol=1e-2
    )


def test_symmetric_rhs_is_one_head_of_the_reduced_flow_with_identical_heads():
    H, h, T = 3, 3, 6
    ms, Ss = target_scales(h, 1.7, 1.0), target_positions(h, T)
    rng = np.random.default_rng(2)
    c, q = rng.standard_normal(h), rng.standard_normal(T)
    y = np.concatenate([np.tile(c, H), np.tile(q, H)])
    dy = reduced_rhs(0, y, ms, Ss, H)
    ds = symmetric_rhs(0, np.concatenate([c, q]), ms, Ss, H)
    np.testing.assert_allclose(dy[:h], ds[:h], atol=1e-12)
    np.testing.assert_allclose(dy[H * h : H * h + T], ds[h:], atol=1e-12)


def test_fig10_three_stages_in_order_and_final_loss():
    res = solve_flow(FlowConfig(T=20, t_max=2e4, n_eval=300))
    assert res.success
    t = stage_times(res.ds)
    assert np.all(np.isfinite(t)) and t[0] < t[1] < t[2]
    assert count_stages(t) == 3
    assert float(res.ds.loss[-1]) < 1e-2
    np.testing.assert_allclose(res.ds.loss_split.sum(("feature", "position")), res.ds.loss)


def test_m_equal_one_gives_two_stages():
    res = solve_flow(FlowConfig(T=20, m=1.0, t_max=3e3, n_eval=300))
    assert count_stages(stage_times(res.ds)) == 2


def test_coupling_time_grows_with_log_inverse_eps():
    ts = [
        coupling_time(solve_flow(FlowConfig(T=10, init_std=e, t_max=2e4, n_eval=600)).ds)
        for e in (1e-4, 1e-6, 1e-8)
    ]
    assert ts[0] < ts[1] < ts[2]


def test_init_state_is_on_the_simplex_and_centred():
    C, Q = init_state(FlowConfig(init_std=1e-2, seed=3))
    assert np.all(C == 0)
    np.testing.assert_allclose(softmax(Q).sum(1), 1.0)
    np.testing.assert_allclose(Q.mean(1), 0.0, atol=1e-12)


def test_discrete_gd_converges_to_flow_at_first_order():
    cfg = FlowConfig(T=6, init_std=1e-2, t_max=5.0, n_eval=10)
    res = solve_flow(
        cfg,
    )
    C_flow = None
    errs = []
    for lr in (0.02, 0.01):
        ds = discrete_flow(cfg, "gd", lr=lr, steps=int(2.0 / lr), record_every=int(2.0 / lr))
        flow = solve_flow(FlowConfig(T=6, init_std=1e-2, t_max=2.0, t_min=1.0, n_eval=2))
        C_flow = flow.ds.C.values[-1]
        errs.append(np.abs(ds.C.values[-1] - C_flow).max())
    assert 1.6 < errs[0] / errs[1] < 2.4  # order-1 (Euler) convergence
    assert res.success


def test_sam_with_rho_zero_is_gd():
    cfg = FlowConfig(T=6, init_std=1e-2)
    a = discrete_flow(cfg, "gd", lr=0.05, steps=30, record_every=10)
    b = discrete_flow(cfg, "sam", lr=0.05, rho=0.0, steps=30, record_every=10)
    np.testing.assert_allclose(a.C.values, b.C.values, atol=1e-14)


def test_lyapunov_phi_values_by_hand():
    ms, Ss = target_scales(3, 1.7, 1.0), target_positions(3, 5)
    rng = np.random.default_rng(0)
    c, s = rng.standard_normal((4, 3)), softmax(rng.standard_normal((4, 5)))
    # phi = <V, G s> - H/2 ||V||^2 ||s||^2 with V = sum_a c_a V_a*, G s = sum_a m_a s[p_a] V_a*
    want = [sum(c[i, a] * ms[a] * s[i, a] for a in range(3)) - 1.5 * (c[i] ** 2).sum()
            * (s[i] ** 2).sum() for i in range(4)]  # fmt: skip
    np.testing.assert_allclose(lyapunov_phi(c, s, ms, Ss, 3), want, rtol=1e-12)


def _fd_grad(C, Q, ms, Ss, h=1e-6):
    """Central finite differences of the reduced tensor loss (an independent gradient)."""
    y = np.concatenate([C.ravel(), Q.ravel()])

    def L(y):
        return reduced_loss(y[: C.size].reshape(C.shape), softmax(y[C.size :].reshape(Q.shape)),
                            ms, Ss)  # fmt: skip

    g = np.array([(L(y + h * e) - L(y - h * e)) / (2 * h) for e in np.eye(y.size)])
    return g[: C.size].reshape(C.shape), g[C.size :].reshape(Q.shape)


@pytest.mark.parametrize("rho", [0.05, 0.3])
def test_sam_step_at_positive_rho_matches_a_hand_computed_step(rho):
    """One SAM step = GD step with the gradient at theta + rho g/||g|| (finite differences)."""
    cfg = FlowConfig(T=5, init_std=0.05, seed=2)
    ms, Ss = cfg.scales, target_positions(cfg.h, cfg.T)
    lr = 0.05
    # start from a non-trivial state: three GD steps from the App. C.6 init
    ds = discrete_flow(cfg, "gd", lr=lr, steps=3, record_every=3)
    C = ds.C.values[-1]
    Q = np.log(ds.S.values[-1])
    Q -= Q.mean(1, keepdims=True)
    gC, gQ = _fd_grad(C, Q, ms, Ss)
    n = np.sqrt((gC**2).sum() + (gQ**2).sum())
    hC, hQ = _fd_grad(C + rho * gC / n, Q + rho * gQ / n, ms, Ss)
    from sims.markov.tensor_dynamics import METHODS

    C1, Q1 = METHODS["sam"](C, Q, lr, rho, ms, Ss)
    np.testing.assert_allclose(C1, C - lr * hC, atol=1e-8)
    np.testing.assert_allclose(Q1, Q - lr * hQ, atol=1e-8)
    G1, _ = METHODS["gd"](C, Q, lr, rho, ms, Ss)
    assert np.abs(C1 - G1).max() > 1e-4  # rho > 0 really changes the step


def test_discrete_sam_trajectory_at_positive_rho_by_hand():
    """discrete_flow(..., "sam") records the hand-computed SAM iterates (rho = 0.1)."""
    cfg = FlowConfig(T=4, init_std=0.05, seed=1)
    ms, Ss = cfg.scales, target_positions(cfg.h, cfg.T)
    lr, rho = 0.1, 0.1
    C, Q = init_state(cfg)
    for _ in range(4):
        gC, gQ = _fd_grad(C, Q, ms, Ss)
        n = np.sqrt((gC**2).sum() + (gQ**2).sum())
        hC, hQ = _fd_grad(C + rho * gC / n, Q + rho * gQ / n, ms, Ss)
        C, Q = C - lr * hC, Q - lr * hQ
    ds = discrete_flow(cfg, "sam", lr=lr, rho=rho, steps=4, record_every=4)
    np.testing.assert_allclose(ds.C.values[-1], C, atol=1e-8)
    np.testing.assert_allclose(ds.S.values[-1], softmax(Q), atol=1e-8)
    assert ds.time.values[-1] == pytest.approx(4 * lr)


def test_asymmetric_block_is_neutral_at_the_fixed_point_and_grows_as_beta_over_sqrt_t():
    from theory.markov_coupling import coupling_beta

    cfg = FlowConfig(T=12)
    ms, Ss = cfg.scales, target_positions(cfg.h, cfg.T)
    c = np.array([ms[0] / cfg.H, 0.0, 0.0])
    q = np.full(cfg.T, -40.0)
    q[0] = 40.0  # s = e_1 to double precision
    J = antisymmetric_jacobian(c, q, ms, Ss, cfg.H)
    assert np.abs(J).max() < 1e-9  # neutral: head differences neither grow nor decay
    t, cc, sv, _ = solve_symmetric(FlowConfig(T=12, t_max=2e3, t_min=2e2, n_eval=3))
    qq = np.log(sv[-1])
    lam = np.linalg.eigvals(antisymmetric_jacobian(cc[-1], qq - qq.mean(), ms, Ss, 3)).real.max()
    beta = coupling_beta(ms, 3, 12)
    assert 0.9 < lam * np.sqrt(t[-1]) / beta < 1.15  # ratios of s relax only as t^(-1/T)


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(T=2, h=3), "T"),
        (dict(m=0.0), "`m` must be a finite number > 0"),
        (dict(b0=float("inf")), "`b0` must be a finite number > 0"),
        (dict(init_std=float("nan")), "init_std"),
        (dict(t_max=float("inf")), "t_max"),
        (dict(init_std=-1.0), "init_std"),
        (dict(method="Euler"), "method"),
        (dict(t_min=10.0, t_max=1.0), "t_min"),
    ],
)
def test_bad_flow_config(kw, match):
    with pytest.raises(ValueError, match=match):
        FlowConfig(**kw)


def test_bad_discrete_method():
    with pytest.raises(ValueError, match="method"):
        discrete_flow(FlowConfig(T=5), "adam")
    with pytest.raises(ValueError, match="`lr`"):
        discrete_flow(FlowConfig(T=5), "gd", lr=float("inf"))
    with pytest.raises(ValueError, match="`rho`"):
        discrete_flow(FlowConfig(T=5), "sam", rho=float("nan"))


def test_target_scales_by_hand_and_equal_to_the_chains_group_scales():
    """m_a = m^(h−1−a) b0 (the last pattern has scale b0), the same numbers as the Markov
    chain's hierarchical groups (Table 1) that the tensor flow models."""
    from sims.markov.chain import ChainConfig

    np.testing.assert_allclose(target_scales(3, 1.7, 2.0), [1.7**2 * 2.0, 1.7 * 2.0, 2.0],
                               rtol=1e-15)  # fmt: skip
    cfg = ChainConfig.hierarchical(h=3, m=1.7, b0=2.0)
    np.testing.assert_allclose(target_scales(3, 1.7, 2.0), cfg.scales, rtol=1e-15)
