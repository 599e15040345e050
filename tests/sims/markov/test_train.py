import dataclasses

import numpy as np
import pytest
import torch
import xarray as xr

from sims.markov.chain import ChainConfig, MarkovChain, make_dataset
from sims.markov.train import (
    ExperimentConfig,
    TrainConfig,
    detect_stages,
    evaluate,
    group_mass,
    predict_log_probs,
    train,
)
from sims.runtime.io import provenance, read_netcdf, write_netcdf

TINY = dict(steps=4, batch_size=16, n_train=32, n_test=16, eval_every=2)


def tiny(**kw):
    return ExperimentConfig.minimal(d=8, T=5, train=TrainConfig(**{**TINY, **kw}))


def test_smoke_and_netcdf_roundtrip(tmp_path):
    res = train(tiny())
    ds = res.ds
    assert res.success and list(ds.step.values) == [0, 2, 4]
    assert ds.group_mass.shape == (3, 3, 3) and ds.kl_restricted.shape == (3, 3)
    np.testing.assert_allclose(ds.attention.sum("key"), 1.0, rtol=1e-5)
    # excess loss = KL to the full truth in expectation (digest A10/A11; sampled targets)
    np.testing.assert_allclose(ds.excess_loss, ds.kl_restricted.sel(restricted=3), atol=5e-3)
    p = write_netcdf(tmp_path / "r.nc", ds, meta=provenance({"x": 1}, seed=0))
    back = read_netcdf(p)
    back.attrs.pop("meta")
    xr.testing.assert_allclose(back, ds)


def _one_batch(exp):
    """The first training batch of ``train`` (same seed streams) and the initial model."""
    from sims.markov.chain import BatchSampler
    from sims.markov.models import build_model

    chain = MarkovChain(exp.chain, seed=exp.seed)
    data = make_dataset(chain, exp.train.n_train, exp.train.n_test)
    ss_model = np.random.SeedSequence(exp.train.seed, spawn_key=(3, 0))
    ss_batch = np.random.SeedSequence(exp.train.seed, spawn_key=(3, 1))
    torch.manual_seed(int(ss_model.generate_state(1)[0]))
    model = build_model(exp.model)
    idx = next(BatchSampler(len(data.train), exp.train.batch_size,
                            np.random.default_rng(ss_batch)))  # fmt: skip
    return model, torch.as_tensor(data.train[idx]), data


def _loss_fn(model, xb, w, d):
    return torch.nn.functional.cross_entropy(model(xb).reshape(-1, d), xb[:, w:].reshape(-1))


@pytest.mark.parametrize("rho", [0.05, 0.5])
def test_sam_training_step_at_positive_rho_by_hand(rho):
    """train(optimizer="sam") = SGD with the gradient at theta + rho g/||g|| (global norm)."""
    exp = tiny(steps=1, eval_every=1, optimizer="sam", sam_rho=rho, sam_base="sgd", lr=0.5,
               grad_clip=None, weight_decay=0.0, scheduler="none")  # fmt: skip
    model, xb, _ = _one_batch(exp)
    w, d = exp.chain.w, exp.chain.d
    params = list(model.parameters())
    g = torch.autograd.grad(_loss_fn(model, xb, w, d), params)
    norm = torch.sqrt(sum((x.double() ** 2).sum() for x in g))
    with torch.no_grad():
        for p, x in zip(params, g, strict=True):
            p.add_(rho * x / norm)
    g2 = torch.autograd.grad(_loss_fn(model, xb, w, d), params)
    with torch.no_grad():
        for p, x, x2 in zip(params, g, g2, strict=True):
            p.sub_(rho * x / norm).sub_(0.5 * x2)
    got = train(exp).model
    for p, q in zip(got.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    sgd = train(exp.replace(train=dataclasses.replace(exp.train, optimizer="sgd"))).model
    assert float((sgd.A - got.A).abs().max()) > 1e-4  # A moves only through the perturbation


def test_sgd_step_with_clipping_by_hand():
    exp = tiny(steps=1, eval_every=1, optimizer="sgd", lr=0.3, grad_clip=0.01,
               weight_decay=0.0, scheduler="none")  # fmt: skip
    model, xb, _ = _one_batch(exp)
    g = torch.autograd.grad(_loss_fn(model, xb, exp.chain.w, exp.chain.d),
                            list(model.parameters()))  # fmt: skip
    norm = float(torch.sqrt(sum((x**2).sum() for x in g)))
    assert norm > 0.01  # clipping is active
    got = train(exp).model
    for p, p0, x in zip(got.parameters(), model.parameters(), g, strict=True):
        torch.testing.assert_close(p, p0.detach() - 0.3 * 0.01 / norm * x, rtol=1e-5, atol=1e-7)


def test_online_runs_draw_fresh_data_reproducibly():
    a = train(tiny(online=True, steps=6, eval_every=3))
    b = train(tiny(online=True, steps=6, eval_every=3))
    c = train(tiny(online=True, steps=6, eval_every=3, seed=1))
    np.testing.assert_array_equal(a.ds.test_loss, b.ds.test_loss)
    assert not np.array_equal(a.ds.test_loss, c.ds.test_loss)
    assert len(a.data.train) == 0  # no finite training set
    assert float(a.ds.excess_loss[-1]) < float(a.ds.excess_loss[0])


class _Recorder(torch.optim.lr_scheduler.ReduceLROnPlateau):
    seen: list = []

    def step(self, metrics, *a, **k):
        _Recorder.seen.append(float(metrics))
        return super().step(metrics, *a, **k)


def test_plateau_scheduler_steps_once_per_evaluation_on_the_held_out_loss(monkeypatch):
    import sims.markov.train as T

    monkeypatch.setattr(T.torch.optim.lr_scheduler, "ReduceLROnPlateau", _Recorder)
    _Recorder.seen = []
    ds = train(tiny(steps=12, eval_every=3, scheduler="plateau", plateau_patience=1,
                    plateau_threshold=0.9, lr=0.02)).ds  # fmt: skip
    # one call per evaluation after step 0, with the test loss of that evaluation
    np.testing.assert_allclose(_Recorder.seen, ds.test_loss.values[1:], rtol=1e-12)
    # threshold 0.9 (relative): no evaluation after the first counts as progress, so with
    # patience 1 the third call (step 9) halves the rate; ``lr`` is recorded before the call,
    # as the rate used for the steps just taken: steps 0, 3, 6, 9 -> 0.02, step 12 -> 0.01
    assert ds.lr.values.tolist() == pytest.approx([0.02, 0.02, 0.02, 0.02, 0.01])


def test_plateau_step_scheduler_steps_every_step_on_the_training_loss(monkeypatch):
    import sims.markov.train as T

    monkeypatch.setattr(T.torch.optim.lr_scheduler, "ReduceLROnPlateau", _Recorder)
    _Recorder.seen = []
    ds = train(tiny(steps=6, eval_every=3, scheduler="plateau_step")).ds
    assert len(_Recorder.seen) == 6
    assert _Recorder.seen[2] == pytest.approx(float(ds.train_loss[1]))  # step 3's loss
    assert _Recorder.seen[5] == pytest.approx(float(ds.train_loss[2]))


def test_scheduler_floor_and_low_rate_warning():
    kw = dict(steps=12, eval_every=1, scheduler="plateau", plateau_patience=1,
              plateau_threshold=0.9, lr=0.02)  # fmt: skip
    ds = train(tiny(min_lr=0.005, **kw)).ds
    assert ds.lr.min() == pytest.approx(0.005) and ds.attrs["lr_warning"] == ""
    with pytest.warns(RuntimeWarning, match="fell below"):
        ds = train(tiny(lr_warn=0.004, **kw)).ds
    assert "fell below 0.004" in ds.attrs["lr_warning"] and float(ds.lr[-1]) < 0.004


def test_scheduler_none_keeps_the_rate():
    ds = train(tiny(scheduler="none", lr=0.02)).ds
    np.testing.assert_array_equal(ds.lr.values, 0.02)


@pytest.mark.slow
def test_paper_scheduler_passes_stage_one_and_learns_three_patterns():
    """The ``paper`` preset's scheduler (shortened run): three patterns; the literal one: one.

    A small chain (d = 10, T = 10, batch 128, lr 0.05) learns its three groups at steps ~40, 220
    and 720 without a scheduler. With :data:`PAPER_SCHEDULER` (per evaluation on held-out loss,
    patience 10 evaluations, floor) it still does; stepped every step on the training loss
    (``plateau_step``) the rate collapses during the first plateau and one pattern is learned
    (issue 16).
    """
    from sims.markov.experiments import PAPER_SCHEDULER

    base = dict(batch_size=128, n_train=2000, n_test=300, lr=0.05, best_contexts=0)
    paper = ExperimentConfig.minimal(d=10, T=10, train=TrainConfig(
        steps=900, **{**PAPER_SCHEDULER, **base}))  # fmt: skip
    ds = train(paper).ds
    rep = detect_stages(ds)
    assert rep.n_patterns == 3 and rep.order_ok and np.all(np.isfinite(rep.group_times))
    assert float(ds.lr.min()) >= 0.05 / 4  # at most two halvings
    literal = paper.replace(train=dataclasses.replace(paper.train, scheduler="plateau_step",
                                                      steps=400, min_lr=0.0))  # fmt: skip
    with pytest.warns(RuntimeWarning, match="fell below"):
        ds2 = train(literal).ds
    assert detect_stages(ds2).n_patterns == 1 and float(ds2.lr[-1]) < 1e-5


def test_detect_stages_on_nan_metrics():
    """All-NaN or partly-NaN KL columns (a diverged run) give inf times, not an IndexError."""
    steps = np.arange(0, 50, 10)
    M = np.full((5, 3, 3), np.nan)
    M[0] = 0.3
    kl = np.full((5, 3), np.nan)
    kl[:2, 0] = [1.0, 0.5]  # finite, then NaN
    ds = xr.Dataset({"group_mass": (("step", "head", "group"), M),
                     "kl_restricted": (("step", "restricted"), kl)}, coords={"step": steps})
    rep = detect_stages(ds)
    assert rep.kl_times.tolist() == [10.0, np.inf, np.inf]
    assert np.isinf(rep.group_times).all() and rep.n_stages == 0 and rep.n_patterns == 0


def test_divergence_stops_with_a_status_and_stage_detection_survives():
    exp = tiny(steps=20, eval_every=5, optimizer="sgd", lr=1e30, grad_clip=None)
    res = train(exp)
    assert res.status == "failed" and "diverged at step" in res.message
    k = int(res.message.split("diverged at step ")[1].split(":")[0])
    assert int(res.ds.step[-1]) == k < 20 and not np.isfinite(res.ds.train_loss[-1])
    rep = detect_stages(res.ds)  # NaN metrics: no crash
    assert rep.final_assignment.shape == (3,)
    assert res.ds.attrs["status"] == "failed"


def test_loss_decreases_on_a_short_run():
    exp = ExperimentConfig.minimal(
        d=10,
        T=8,
        train=TrainConfig(steps=40, batch_size=64, n_train=256, n_test=64, eval_every=40, lr=3e-2),
    )
    ds = train(exp).ds
    assert float(ds.excess_loss[-1]) < 0.8 * float(ds.excess_loss[0])


def test_device_is_checked_before_any_work():
    from sims.markov.train import check_device

    assert check_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match="not a torch device"):
        check_device("gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no usable CUDA device"):
            train(tiny(), device="cuda")


def test_stage_band_over_thresholds():
    from sims.markov.train import stage_band

    steps = np.arange(0, 100, 10)
    M = np.full((10, 3, 3), 0.1)
    M[2:, :, 0] = 0.8  # group 1 at step 20 (mass 0.8)
    M[4:, 1, 1] = 0.55  # group 2 at step 40, but only at thresholds <= 0.55
    M[5:, 2, 2] = 0.9  # group 3 at step 50 (ratio 1.25 after group 2)
    ds = xr.Dataset({"group_mass": (("step", "head", "group"), M),
                     "kl_restricted": (("step", "restricted"), np.ones((10, 3)))},
                    coords={"step": steps})  # fmt: skip
    band = stage_band(ds, thresholds=(0.5, 0.6), ratios=(1.1, 1.3))
    # th 0.5: times 20, 40, 50 -> ratio 1.1: 3 stages, 1.3: 2 (40 and 50 merge)
    # th 0.6: times 20, inf, 50 -> 2 stages at both ratios
    assert band.n_stages.values.tolist() == [[3, 2], [2, 2]]
    assert band.n_patterns.values.tolist() == [3, 2]
    assert (band.attrs["min"], band.attrs["max"], band.attrs["default"]) == (2, 3, 2)
    with pytest.raises(ValueError, match="thresholds"):
        stage_band(ds, thresholds=(1.5,))


def test_detect_stages_kl_times_are_the_first_step_within_10_percent_of_the_drop():
    """KL time of restricted truth i: first step with KL <= lo + 0.1 (hi − lo), hi the first
    evaluation and lo the minimum (planted curves whose 10%, 50% and 1% crossings differ)."""
    steps = np.arange(0, 100, 10)
    kl = np.stack([
        [2.0, 1.5, 1.2, 0.9, 0.5, 0.25, 0.19, 0.12, 0.1, 0.1],  # 10%: 0.29 -> step 50
        [4.0, 4.0, 3.0, 2.0, 1.0, 0.6, 0.45, 0.4, 0.4, 0.4],  # 10%: 0.76 -> step 50
        [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.2, 0.09, 0.0],  # 10%: 0.1 -> step 80
    ], axis=1)  # fmt: skip
    ds = xr.Dataset({"group_mass": (("step", "head", "group"), np.full((10, 2, 3), 0.1)),
                     "kl_restricted": (("step", "restricted"), kl)}, coords={"step": steps})
    np.testing.assert_array_equal(detect_stages(ds).kl_times, [50.0, 50.0, 80.0])


def test_sam_rho_zero_matches_adamw():
    a = train(tiny(optimizer="adamw", scheduler="none")).model
    b = train(tiny(optimizer="sam", sam_rho=0.0, scheduler="none")).model
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_checkpoint_resume_is_exact(tmp_path):
    ck = tmp_path / "ck.pt"
    full = train(tiny(steps=6, checkpoint_every=3, eval_every=3))
    part = train(tiny(steps=6, checkpoint_every=3, eval_every=3), checkpoint=ck)
    resumed = train(tiny(steps=6, checkpoint_every=3, eval_every=3), checkpoint=ck)  # from step 6
    for p, q in zip(full.model.parameters(), part.model.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    np.testing.assert_allclose(resumed.ds.test_loss, full.ds.test_loss, rtol=1e-6)
    # resume mid-run: cut a 6-step run at step 3
    ck2 = tmp_path / "ck2.pt"
    cut = tiny(steps=6, checkpoint_every=3, eval_every=3)
    import sims.markov.train as T

    state = {}
    orig = torch.save

    def save_once(obj, f, *a, **k):
        if not state:
            state["first"] = True
            orig(obj, f, *a, **k)
            raise KeyboardInterrupt
        orig(obj, f, *a, **k)

    T_save = torch.save
    try:
        torch.save = save_once
        with pytest.raises(KeyboardInterrupt):
            T.train(cut, checkpoint=ck2)
    finally:
        torch.save = T_save
    again = train(cut, checkpoint=ck2)
    for p, q in zip(full.model.parameters(), again.model.parameters(), strict=True):
        torch.testing.assert_close(p, q)
    np.testing.assert_allclose(again.ds.test_loss, full.ds.test_loss, rtol=1e-6)


def test_reference_models_logged():
    exp = tiny()
    chain = MarkovChain(exp.chain, seed=0)
    data = make_dataset(chain, 32, 16)
    ref = {"c2": predict_log_probs(train(exp, data=data).model, data.test)}
    ds = train(exp, data=data, reference=ref).ds
    assert ds.kl_reference.shape == (3, 1)
    assert float(ds.kl_reference[-1, 0]) < 1e-5  # same seed, same run -> identical model
    with pytest.raises(ValueError, match="reference"):
        train(exp, data=data, reference={"bad": np.zeros((2, 2, 2))})


def test_example_losses_recorded_and_upsampled_index_used():
    res = train(tiny(record_example_losses=True))
    ds = res.ds
    assert ds.example_loss.shape == (3, 32)
    w = res.data.chain.config.w
    lp = predict_log_probs(res.model, res.data.train)  # each sequence's loss, independently
    nll = -np.take_along_axis(lp, res.data.train[:, w:, None], -1)[..., 0].mean(1)
    np.testing.assert_allclose(ds.example_loss[-1], nll, rtol=1e-5)
    # an index list made only of sequence 0 trains on sequence 0 only
    only0 = train(tiny(batch_size=4), train_index=np.zeros(8, dtype=np.int64))
    other = train(tiny(batch_size=4), train_index=np.ones(8, dtype=np.int64))
    l0 = predict_log_probs(only0.model, only0.data.train[:2])
    l1 = predict_log_probs(other.model, other.data.train[:2])
    x = only0.data.train[:2, w:, None]
    nll0, nll1 = (-np.take_along_axis(v, x, -1)[..., 0].mean(1) for v in (l0, l1))
    assert nll0[0] < nll1[0] and nll1[1] < nll0[1]


def test_group_mass_on_a_pure_lag_pattern():
    cfg = ChainConfig.hierarchical(w=6, d=5, T=4)
    H, T, L = 3, cfg.T, cfg.L
    att = np.zeros((H, T, L))
    for qi, p in enumerate(range(cfg.w - 1, L - 1)):
        att[0, qi, p] = 1.0  # lag 1 (group 1)
        att[1, qi, p - 2] = 1.0  # lag 3 (group 2)
        att[2, qi, p - 5] = 0.5  # lag 6 (group 3)
        att[2, qi, p] = 0.5  # lag 1
    M = group_mass(att, cfg)
    np.testing.assert_allclose(M, [[1, 0, 0], [0, 1, 0], [0.5, 0, 0.5]])


def test_detect_stages_on_synthetic_masses():
    steps = np.arange(0, 100, 10)
    M = np.full((10, 3, 3), 0.1)
    M[2:, :, 0] = 0.8  # all heads on group 1 from step 20 (competitive)
    M[5:, 1, 0], M[5:, 1, 1] = 0.1, 0.9  # head 1 moves to group 2 at step 50
    M[8:, 2, 0], M[8:, 2, 2] = 0.1, 0.9  # head 2 moves to group 3 at step 80
    kl = np.linspace(1, 0, 30).reshape(10, 3)
    ds = xr.Dataset(
        {
            "group_mass": (("step", "head", "group"), M),
            "kl_restricted": (("step", "restricted"), kl),
        },
        coords={"step": steps},
    )
    rep = detect_stages(ds)
    assert rep.group_times.tolist() == [20, 50, 80] and rep.n_stages == 3 and rep.order_ok
    assert rep.heads_on_first == 3 and sorted(rep.final_assignment.tolist()) == [0, 1, 2]


def test_evaluate_equals_the_last_recorded_evaluation():
    exp = tiny()
    res = train(exp)
    out = evaluate(res.model, res.data)
    last = res.ds.isel(step=-1)
    assert out["excess_loss"] == pytest.approx(float(last.excess_loss), rel=1e-6)
    np.testing.assert_allclose(out["kl_restricted"], last.kl_restricted, rtol=1e-6)
    np.testing.assert_allclose(out["group_mass"], last.group_mass, rtol=1e-6)


def test_kl_best_and_floors_by_hand():
    """kl_best / kl_floor recorded by train() equal a direct computation on the same contexts."""
    from sims.markov.chain import best_restricted_log_probs, kl_divergence

    res = train(tiny(best_contexts=6))
    ds, data = res.ds, res.data
    x = data.test[:6]
    lp = predict_log_probs(res.model, x)
    for i in (1, 2):
        best = best_restricted_log_probs(data.chain, x, i, method="exact")
        assert float(ds.kl_best[-1, i - 1]) == pytest.approx(kl_divergence(best, lp).mean(),
                                                             rel=1e-4)  # fmt: skip
        floor = kl_divergence(data.chain.log_probs(x, upto=i), best)
        assert float(ds.kl_floor[i - 1]) == pytest.approx(floor.mean(), rel=1e-9)
        assert float(ds.kl_floor_first[i - 1]) == pytest.approx(floor[:, 0].mean(), rel=1e-9)
    assert float(ds.kl_floor[2]) == 0.0 and ds.attrs["best_method"] == "exact"


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(batch_size=64, n_train=32), "larger than the dataset"),
        (dict(scheduler="cosine"), "scheduler"),
        (dict(optimizer="adam"), "optimizer"),
        (dict(lr=0.0), "lr"),
        (dict(grad_clip=0.0), "grad_clip"),
        (dict(lr=float("inf")), "`lr` must be a finite number > 0"),
        (dict(lr=float("nan")), "`lr`"),
        (dict(weight_decay=float("inf")), "weight_decay"),
        (dict(sam_rho=-0.1), "sam_rho"),
        (dict(min_lr=1.0), "min_lr"),
        (dict(best_contexts=-1), "best_contexts"),
        (dict(plateau_cooldown=-1), "plateau_cooldown"),
    ],
)
def test_bad_train_config(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**{**TINY, **kw})


def test_bad_experiment_config():
    with pytest.raises(ValueError, match="init_scale"):
        ExperimentConfig.minimal(init_scale=-0.1)
    exp = tiny()
    with pytest.raises(ValueError, match="does not match"):
        ExperimentConfig(chain=ChainConfig.hierarchical(w=6, d=9, T=5), model=exp.model)
