"""sims.sosd.spectral: closed forms, invariances, Lemma A.4, bad input, onset detector, recorder."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pytest

import sims.sosd.spectral as sp_
from sims.sosd.spectral import (
    SpectralRecorder,
    condition_number,
    detect_onset,
    lemma_a4_bound,
    loss_knee,
    matrix_norms,
    record_trajectory,
    sd_variation,
    sd_variation_from_sigma,
    singular_distribution,
    singular_values,
    spectral_cosine,
    weight_cosine,
)


def _orth(rng, n):
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return q * np.sign(np.diag(r))


def _with_spectrum(rng, sigma, m, n):
    """A random m x n matrix with the given singular values (U diag V^T)."""
    s = np.zeros((m, n))
    s[np.arange(len(sigma)), np.arange(len(sigma))] = sigma
    return _orth(rng, m) @ s @ _orth(rng, n).T


def test_doctests():
    res = doctest.testmod(sp_, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 5 and res.failed == 0


# --- closed forms ----------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(5, 5), (4, 7), (7, 4)])
def test_singular_distribution_of_a_rotated_known_spectrum(shape):
    rng = np.random.default_rng(1)
    sigma = np.array([4.0, 3.0, 2.0, 1.0])
    w = _with_spectrum(rng, sigma, *shape)
    r = min(shape)
    expect = np.zeros(r)
    expect[:4] = sigma / sigma.sum()
    np.testing.assert_allclose(singular_distribution(w), expect, atol=1e-14)
    np.testing.assert_allclose(singular_values(w)[:4], sigma, rtol=1e-13)
    assert singular_values(w).shape == (r,)


def test_sd_variation_closed_form_is_rotation_and_scale_invariant():
    rng = np.random.default_rng(2)
    a = _with_spectrum(rng, [3.0, 1.0, 0.0], 3, 5)
    b = _with_spectrum(rng, [2.0, 1.0, 1.0], 3, 5) * 7.0  # different bases and scale
    # p_a = (3/4, 1/4, 0), p_b = (1/2, 1/4, 1/4): ||diff|| = sqrt(1/16 + 0 + 1/16)
    assert sd_variation(a, b) == pytest.approx(math.sqrt(2) / 4, rel=1e-12)
    assert sd_variation(b, a) == pytest.approx(math.sqrt(2) / 4, rel=1e-12)
    assert sd_variation(a, -3.0 * a) == pytest.approx(0.0, abs=1e-14)


def test_sd_variation_sorts_descending():
    # sigma vectors given in any order are sorted before normalizing
    assert sd_variation_from_sigma([1.0, 3.0], [3.0, 1.0]) == 0.0
    assert sd_variation_from_sigma([3.0, 1.0], [2.0, 2.0]) == pytest.approx(math.sqrt(2) / 4)


def test_lemma_a4_bound_closed_form_uses_r_min_mn():
    # diag(3,1) -> diag(2,2) embedded in 2 x 5: ||dW||_F = sqrt(2), nuclear norms 4, 4, r = 2
    a = np.zeros((2, 5))
    a[0, 0], a[1, 1] = 3.0, 1.0
    b = np.zeros((2, 5))
    b[0, 0], b[1, 1] = 2.0, 2.0
    assert lemma_a4_bound(a, b) == pytest.approx((1 + math.sqrt(2)) * math.sqrt(2) / 4, rel=1e-12)
    # min of the two nuclear norms: scale the second state
    assert lemma_a4_bound(a, 3 * b) == pytest.approx(
        (1 + math.sqrt(2)) * np.linalg.norm(3 * b - a) / 4.0, rel=1e-12
    )
    assert lemma_a4_bound(3 * b, a) == pytest.approx(lemma_a4_bound(a, 3 * b))


def test_cosines_closed_forms():
    w = np.array([[1.0, 2.0], [3.0, -1.0]])
    assert weight_cosine(w, -w) == pytest.approx(-1.0)
    assert spectral_cosine(w, -w) == pytest.approx(1.0)
    e1, e2 = np.diag([1.0, 0.0]), np.diag([0.0, 1.0])
    assert weight_cosine(e1, e2) == pytest.approx(0.0)
    assert spectral_cosine(e1, e2) == pytest.approx(1.0)  # same sorted spectrum (1, 0)
    # (3,1) vs (2,2): cos = (6 + 2) / (sqrt(10) sqrt(8))
    assert spectral_cosine(np.diag([3.0, 1.0]), np.diag([2.0, 2.0])) == pytest.approx(
        8 / math.sqrt(80)
    )


def test_norms_and_condition_closed_forms():
    rng = np.random.default_rng(3)
    w = _with_spectrum(rng, [5.0, 2.0, 0.5], 3, 4)
    nrm = matrix_norms(w)
    assert nrm["nuclear"] == pytest.approx(7.5)
    assert nrm["frobenius"] == pytest.approx(math.sqrt(25 + 4 + 0.25))
    assert nrm["spectral"] == pytest.approx(5.0)
    assert nrm["condition"] == pytest.approx(10.0)
    assert condition_number(w) == pytest.approx(10.0)
    assert condition_number(np.diag([1.0, 0.0])) == math.inf
    assert math.isnan(matrix_norms(np.zeros((2, 3)))["condition"])


# --- Lemma A.4 on random and adversarial pairs -----------------------------------------------


def _a4_ratios(pairs):
    return np.array([sd_variation(a, b) / lemma_a4_bound(a, b) for a, b in pairs])


def test_lemma_a4_holds_on_random_pairs():
    rng = np.random.default_rng(4)
    pairs = []
    for _ in range(300):
        m, n = rng.integers(1, 12, size=2)
        a = rng.standard_normal((m, n))
        pairs.append((a, a + 10 ** rng.uniform(-3, 0.5) * rng.standard_normal((m, n))))
    r = _a4_ratios(pairs)
    assert np.all(r <= 1.0 + 1e-12), r.max()
    assert r.max() > 0.05  # the sample reaches a non-trivial part of the bound


def test_lemma_a4_holds_on_adversarial_near_rank_deficient_pairs():
    # one dominant direction, the rest tiny; updates that move the tiny ones or swap dominance
    rng = np.random.default_rng(5)
    pairs = []
    for _ in range(300):
        m, n = rng.integers(2, 9, size=2)
        r = min(m, n)
        s = np.full(r, 10 ** rng.uniform(-12, -3))
        s[0] = 1.0
        a = _with_spectrum(rng, s, m, n)
        kind = rng.integers(3)
        if kind == 0:  # grow the small singular values in a's own basis
            b = a + 10 ** rng.uniform(-6, -1) * _with_spectrum(rng, np.ones(r), m, n)
        elif kind == 1:  # nearly zero second state
            b = 10 ** rng.uniform(-10, -4) * rng.standard_normal((m, n))
        else:  # rank-one rotation
            b = _with_spectrum(rng, s[::-1] * 0 + s, m, n)
        pairs.append((a, b))
    ratios = _a4_ratios(pairs)
    assert np.all(ratios <= 1.0 + 1e-9), ratios.max()


def test_lemma_a4_ratio_can_approach_its_scale():
    # a pair where the bound is within a factor ~3 of being tight: the bound is not vacuous
    a = np.diag([1.0, 0.0])
    b = np.diag([1.0, 1.0])
    r = sd_variation(a, b) / lemma_a4_bound(a, b)
    # p: (1,0) -> (1/2,1/2): ΔΣ = 1/√2; bound = (1+√2)·1/1
    assert r == pytest.approx((1 / math.sqrt(2)) / (1 + math.sqrt(2)), rel=1e-12)


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("w", "match"),
    [
        (np.ones(3), r"2-D weight matrix; got shape \(3,\)"),
        (np.ones((2, 2, 2)), r"2-D weight matrix; got shape \(2, 2, 2\)"),
        (np.ones((0, 3)), "is empty"),
        (np.array([[1.0, np.nan]]), "non-finite"),
        (np.array([[1.0, np.inf]]), "non-finite"),
        (np.zeros((3, 2)), "zero matrix.*on_zero='nan'"),
    ],
)
def test_bad_matrices_raise_value_error(w, match):
    with pytest.raises(ValueError, match=match):
        singular_distribution(w)


def test_bad_types_raise_type_error():
    with pytest.raises(TypeError, match="`w`"):
        singular_values([["a", "b"]])
    with pytest.raises(TypeError, match="`w`"):
        singular_values(object())
    with pytest.raises(TypeError, match="complex"):
        singular_values(np.ones((2, 2), dtype=complex))


def test_zero_matrix_nan_mode_and_shape_mismatch():
    z = np.zeros((2, 3))
    assert np.all(np.isnan(singular_distribution(z, on_zero="nan")))
    assert math.isnan(sd_variation(z, np.ones((2, 3)), on_zero="nan"))
    assert math.isnan(lemma_a4_bound(z, np.ones((2, 3)), on_zero="nan"))
    assert math.isnan(weight_cosine(z, np.ones((2, 3)), on_zero="nan"))
    with pytest.raises(ValueError, match="`w_prev` is the zero matrix"):
        lemma_a4_bound(z, np.ones((2, 3)))
    with pytest.raises(ValueError, match="same shape"):
        sd_variation(np.ones((2, 3)), np.ones((3, 2)))
    with pytest.raises(ValueError, match="`on_zero` must be one of"):
        singular_distribution(np.ones((2, 2)), on_zero="ignore")


# --- torch and JAX inputs --------------------------------------------------------------------


def test_torch_inputs_match_numpy():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((6, 4)), rng.standard_normal((6, 4))
    ta = torch.tensor(a, requires_grad=True)  # float64, needs detaching
    tb32 = torch.tensor(b, dtype=torch.float32)
    b32 = tb32.double().numpy()
    assert sd_variation(ta, tb32) == pytest.approx(sd_variation(a, b32), rel=1e-12)
    assert lemma_a4_bound(ta, tb32) == pytest.approx(lemma_a4_bound(a, b32), rel=1e-12)
    np.testing.assert_allclose(singular_distribution(ta), singular_distribution(a), rtol=1e-12)
    with pytest.raises(ValueError, match="2-D"):
        singular_values(torch.ones(2, 2, 2))
    with pytest.raises(TypeError, match="complex"):
        singular_values(torch.ones(2, 2, dtype=torch.complex64))


def test_jax_inputs_match_numpy():
    jnp = pytest.importorskip("jax.numpy")
    a = np.arange(12.0).reshape(3, 4) ** 1.5
    assert spectral_cosine(jnp.asarray(a), a + 1) == pytest.approx(spectral_cosine(a, a + 1))


# --- onset detector and loss knee ------------------------------------------------------------


def _synthetic_series(rng, onset=400, n=1000, floor=1e-4, peak=1e-2, noise=0.05):
    t = np.arange(n, dtype=float)
    s = np.where(
        t < 50, np.log10(peak) - 2 + 2 * t / 50,  # rise to the peak at t = 50
        np.where(t < onset, np.log10(peak) + (np.log10(floor) - np.log10(peak)) * (t - 50)
                 / (onset - 50), np.log10(floor)),
    )  # fmt: skip
    return t, 10 ** (s + noise * rng.standard_normal(n))


def test_floor_detector_finds_a_planted_onset():
    rng = np.random.default_rng(7)
    t, ds = _synthetic_series(rng, onset=400)
    res = detect_onset(t, ds, window=21, kappa=2.0)
    assert res.success and res.method == "floor"
    # the smoothed log falls linearly at 2 decades / 350 steps; κ = 2 (0.3 decades) above the
    # floor is reached 0.3 / (2/350) ≈ 53 steps before the planted corner
    assert 400 - 53 - 25 <= res.step <= 400 + 5, res
    assert res.peak_step == pytest.approx(50, abs=15)
    assert res.floor == pytest.approx(-4, abs=0.05)


def test_floor_detector_2d_and_end():
    rng = np.random.default_rng(8)
    t, a = _synthetic_series(rng, onset=300)
    _, b = _synthetic_series(rng, onset=300, floor=1e-5)
    both = np.stack([a, b], axis=1)
    res = detect_onset(t, both, window=21)
    assert 300 - 80 <= res.step <= 310
    # a late LR decay drops ΔΣ; with `end` before it the floor is the constant-LR one
    late = np.concatenate([a[:800], a[800:] * 1e-3])
    res_end = detect_onset(t, late, window=21, end=800)
    assert res_end.floor == pytest.approx(-4, abs=0.05)


def test_threshold_detector_is_the_theorys_T_eps():
    t = np.array([0, 10, 20, 30, 40, 50.0])
    ds = np.array([np.nan, 1e-2, 5e-5, 2e-4, 5e-5, 1e-5])
    res = detect_onset(t, ds, method="threshold", eps=1e-4)
    assert res.step == 40.0  # the excursion at step 30 resets T_ε
    res2 = detect_onset(t, np.stack([ds, ds * 0.1], 1), method="threshold", eps=1e-3)
    assert res2.step == 20.0  # both matrices below 1e-3 from step 20 on
    no = detect_onset(t, ds * 100, method="threshold", eps=1e-4)
    assert not no.success and math.isnan(no.step) and "beyond the run" in no.message


def test_detector_bad_input():
    t, ds = np.arange(10.0), np.ones(10)
    with pytest.raises(ValueError, match="longer than the run"):
        detect_onset(t, ds, window=11)
    with pytest.raises(ValueError, match="positive integer"):
        detect_onset(t, ds, window=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        detect_onset(t[::-1], ds)
    with pytest.raises(ValueError, match="one row per step"):
        detect_onset(t, ds[:5])
    with pytest.raises(ValueError, match="`eps`"):
        detect_onset(t, ds, method="threshold")
    with pytest.raises(ValueError, match="kappa"):
        detect_onset(t, ds, kappa=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        detect_onset(t, -ds)


def test_floor_detector_reports_nan_when_there_is_no_floor():
    t = np.arange(200.0)
    res = detect_onset(t, 10 ** (np.sin(t / 5)), window=15)  # oscillates, never settles
    assert not res.success and math.isnan(res.step) and "never stays" in res.message


def test_loss_knee_finds_the_break():
    t = np.unique(np.round(np.geomspace(1, 1e4, 400)))
    x = np.log10(t)
    loss = np.where(x < 3, 10 - 2 * x, 4 - 0.2 * (x - 3))
    assert loss_knee(t, loss) == pytest.approx(1000, rel=0.05)
    with pytest.raises(ValueError, match="at least 4"):
        loss_knee([0, 1, 2], [1, 1, 1])


# --- recorders -------------------------------------------------------------------------------


def test_recorder_numpy_values_match_the_functions():
    rng = np.random.default_rng(9)
    state = {"blk.q": rng.standard_normal((6, 6)), "blk.fc": rng.standard_normal((6, 10)),
             "blk.bias": rng.standard_normal(6), "wte": rng.standard_normal((20, 6))}  # fmt: skip
    rec = SpectralRecorder(state, every=2, snapshot_every=4)
    hist = []
    for step in range(9):
        if rec(step):
            hist.append({k: v.copy() for k, v in state.items()})
        for k in state:
            state[k] = state[k] + 0.2 * rng.standard_normal(state[k].shape)
    ds = rec.to_dataset()
    assert list(ds.matrix.values) == ["blk.q", "blk.fc"]  # bias (1-D) and embedding excluded
    assert ds.step.values.tolist() == [0, 2, 4, 6, 8]
    assert ds.interval.values.tolist() == [0, 2, 2, 2, 2]
    for i in range(1, 5):
        for name in ("blk.q", "blk.fc"):
            a, b = hist[i - 1][name], hist[i][name]
            row = ds.sel(matrix=name).isel(record=i)
            assert float(row.delta_sigma) == pytest.approx(sd_variation(a, b), rel=1e-10)
            assert float(row.a4_bound) == pytest.approx(lemma_a4_bound(a, b), rel=1e-10)
            assert float(row.update_norm) == pytest.approx(np.linalg.norm(b - a), rel=1e-12)
            assert float(row.spectral_cos_final) == pytest.approx(
                spectral_cosine(b, hist[-1][name]), rel=1e-10
            )
    assert np.all(ds.a4_ratio.isel(record=slice(1, None)) <= 1)
    # weight cosines only at snapshots (0, 4, 8), equal to the direct value
    wc = ds.weight_cos_final.sel(matrix="blk.q").values
    assert np.isnan(wc[1]) and np.isnan(wc[3])
    assert wc[2] == pytest.approx(weight_cosine(hist[2]["blk.q"], hist[-1]["blk.q"]), rel=1e-10)
    assert (ds.reason.isel(record=0) == "first record: no previous state").all()
    assert (ds.reason.isel(record=slice(1, None)) == "").all()


def test_recorder_zero_and_nonfinite_matrices_give_nan_with_reason():
    state = {"a": np.zeros((3, 3)), "b": np.eye(3)}
    rec = SpectralRecorder(state, every=1)
    rec.record(0)
    state["a"] = np.diag([1.0, 2.0, 3.0])
    state["b"] = np.full((3, 3), np.nan)
    rec.record(1)
    state["b"] = np.eye(3)
    rec.record(2)
    ds = rec.to_dataset()
    a, b = ds.sel(matrix="a"), ds.sel(matrix="b")
    zero = "zero matrix: singular distribution undefined"
    assert str(a.state_reason.isel(record=0).values) == zero
    assert str(a.reason.isel(record=1).values) == "previous record was the zero matrix"
    assert np.isnan(a.delta_sigma.isel(record=1)) and np.isfinite(a.delta_sigma.isel(record=2))
    assert str(b.state_reason.isel(record=1).values) == "non-finite entries"
    assert str(b.reason.isel(record=2).values) == "previous record had non-finite entries"
    assert np.isnan(b.delta_sigma.isel(record=2))


def test_recorder_bad_arguments():
    w = {"w": np.eye(3), "v": np.ones(3)}
    with pytest.raises(ValueError, match="`every` must be a positive integer"):
        SpectralRecorder(w, every=0)
    with pytest.raises(ValueError, match="multiple of `every`"):
        SpectralRecorder(w, every=3, snapshot_every=4)
    with pytest.raises(ValueError, match="not 2-D"):
        SpectralRecorder(w, include=r"^v$")
    with pytest.raises(ValueError, match="no 2-D parameter"):
        SpectralRecorder(w, include=r"^nothing$")
    with pytest.raises(TypeError, match="`params`"):
        SpectralRecorder(3)
    rec = SpectralRecorder(w, every=1)
    rec.record(5)
    with pytest.raises(ValueError, match="interval > 0"):
        rec.record(5)
    with pytest.raises(ValueError, match="nothing recorded"):
        SpectralRecorder(w).to_dataset()


def test_recorder_attached_to_a_torch_optimizer():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 8, bias=False),
                                torch.nn.Linear(8, 10))  # fmt: skip
    with torch.no_grad():
        model[2].weight.zero_()  # zero-init output projection
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    rec = SpectralRecorder(model, every=3, exclude=r"^0\.")  # drop the embedding by name
    rec.attach(opt)
    x = torch.randint(0, 10, (16,))
    copies = {0: {n: p.detach().clone() for n, p in model.named_parameters()}}
    for step in range(1, 10):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), x).backward()
        opt.step()
        copies[step] = {n: p.detach().clone() for n, p in model.named_parameters()}
    ds = rec.to_dataset()
    assert ds.step.values.tolist() == [0, 3, 6, 9]
    assert list(ds.matrix.values) == ["1.weight", "2.weight"]
    assert str(ds.state_reason.sel(matrix="2.weight").isel(record=0).values).startswith("zero")
    got = float(ds.delta_sigma.sel(matrix="1.weight").isel(record=2))
    assert got == pytest.approx(sd_variation(copies[3]["1.weight"], copies[6]["1.weight"]),
                                rel=1e-9)  # fmt: skip
    a, b = copies[3]["1.weight"].double(), copies[6]["1.weight"].double()
    row = ds.sel(matrix="1.weight").isel(record=2)
    assert float(row.update_norm) == pytest.approx(float(torch.linalg.norm(b - a)), rel=1e-9)
    assert float(row.a4_bound) == pytest.approx(lemma_a4_bound(a, b), rel=1e-9)
    ok = ds.a4_ratio.isel(record=slice(1, None)).values
    assert np.all(ok[np.isfinite(ok)] <= 1)


def test_hf_trainer_callback_records_at_global_steps():
    pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from transformers import TrainerControl, TrainerState

    lin = torch.nn.Linear(4, 4)
    rec = SpectralRecorder(lin, every=2)
    cb = rec.hf_callback()
    state, control = TrainerState(), TrainerControl()
    cb.on_train_begin(None, state, control, model=lin)
    for step in range(1, 6):
        with torch.no_grad():
            lin.weight.add_(0.1 * torch.randn(4, 4))
        state.global_step = step
        cb.on_step_end(None, state, control, model=lin)
    assert rec.steps == [0, 2, 4]


def test_record_trajectory_lists_stacked_and_jax():
    rng = np.random.default_rng(10)
    traj = [{"layer": {"w": rng.standard_normal((4, 5)), "b": np.ones(4)}} for _ in range(4)]
    ds = record_trajectory(traj, steps=[0, 10, 20, 30])
    assert list(ds.matrix.values) == ["layer.w"] and ds.step.values.tolist() == [0, 10, 20, 30]
    assert float(ds.delta_sigma.isel(record=3, matrix=0)) == pytest.approx(
        sd_variation(traj[2]["layer"]["w"], traj[3]["layer"]["w"])
    )
    assert float(ds.weight_cos_final.isel(record=0, matrix=0)) == pytest.approx(
        weight_cosine(traj[0]["layer"]["w"], traj[3]["layer"]["w"])
    )
    stacked = {"layer": {"w": np.stack([s["layer"]["w"] for s in traj])}}
    ds2 = record_trajectory(stacked, stacked=True)
    np.testing.assert_allclose(ds2.delta_sigma.values, ds.delta_sigma.values)
    with pytest.raises(ValueError, match="strictly increasing"):
        record_trajectory(traj, steps=[0, 1, 1, 2])
    with pytest.raises(ValueError, match="4 states"):
        record_trajectory(traj, steps=[0, 1])
    jnp = pytest.importorskip("jax.numpy")
    jtraj = [{"w": jnp.asarray(s["layer"]["w"])} for s in traj]
    ds3 = record_trajectory(jtraj)
    np.testing.assert_allclose(ds3.delta_sigma.values, ds.delta_sigma.values, rtol=1e-6)


def test_dataset_roundtrip_netcdf(tmp_path):
    xr = pytest.importorskip("xarray")
    from sims.runtime.io import read_netcdf, write_netcdf

    rng = np.random.default_rng(11)
    traj = [{"w": rng.standard_normal((3, 3))} for _ in range(3)]
    ds = record_trajectory(traj)
    write_netcdf(tmp_path / "s.nc", ds)
    back = read_netcdf(tmp_path / "s.nc")
    xr.testing.assert_allclose(back.drop_vars(["reason", "state_reason"]),
                               ds.drop_vars(["reason", "state_reason"]))  # fmt: skip
    assert back.reason.values.tolist() == ds.reason.values.tolist()


def test_recorder_splits_per_head_stacks():
    rng = np.random.default_rng(12)
    state = {"A": rng.standard_normal((3, 4, 5)), "w": rng.standard_normal((4, 4))}
    hist = []
    rec = SpectralRecorder(state, every=1, split_leading=True)
    for step in range(3):
        rec.record(step)
        hist.append({k: v.copy() for k, v in state.items()})
        state = {k: v + 0.3 * rng.standard_normal(v.shape) for k, v in state.items()}
        rec._params = state  # a new mapping object: the live mapping is replaced here
    ds = rec.to_dataset()
    assert list(ds.matrix.values) == ["A[0]", "A[1]", "A[2]", "w"]
    assert ds.rows.sel(matrix="A[1]") == 4 and ds.cols.sel(matrix="A[1]") == 5
    got = float(ds.delta_sigma.sel(matrix="A[2]").isel(record=2))
    assert got == pytest.approx(sd_variation(hist[1]["A"][2], hist[2]["A"][2]), rel=1e-10)
    with pytest.raises(ValueError, match="split_leading=True"):
        SpectralRecorder(state, include=r"^A$")
    traj = record_trajectory(hist, split_leading=True)
    np.testing.assert_allclose(traj.delta_sigma.values, ds.delta_sigma.values, rtol=1e-10)
