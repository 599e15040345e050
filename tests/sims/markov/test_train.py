import numpy as np
import pytest
import torch
import xarray as xr

from sims.io import provenance, read_netcdf, write_netcdf
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


@pytest.mark.parametrize(
    "kw",
    [
        dict(optimizer="sam", sam_rho=0.05),
        dict(optimizer="sgd"),
        dict(online=True),
        dict(scheduler="none"),
    ],
)
def test_trainer_variants_run(kw):
    assert train(tiny(**kw)).success


def test_loss_decreases_on_a_short_run():
    exp = ExperimentConfig.minimal(
        d=10,
        T=8,
        train=TrainConfig(steps=40, batch_size=64, n_train=256, n_test=64, eval_every=40, lr=3e-2),
    )
    ds = train(exp).ds
    assert float(ds.excess_loss[-1]) < 0.8 * float(ds.excess_loss[0])


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
    ds = train(tiny(record_example_losses=True)).ds
    assert ds.example_loss.shape == (3, 32)
    idx = np.concatenate([np.arange(32), np.arange(8)])
    assert train(tiny(), train_index=idx).success


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


def test_evaluate_on_the_truth_like_model():
    exp = tiny()
    res = train(exp)
    out = evaluate(res.model, res.data)
    assert out["group_mass"].shape == (3, 3) and out["excess_loss"] > 0


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(batch_size=64, n_train=32), "larger than the dataset"),
        (dict(scheduler="cosine"), "scheduler"),
        (dict(optimizer="adam"), "optimizer"),
        (dict(lr=0.0), "lr"),
        (dict(grad_clip=0.0), "grad_clip"),
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
