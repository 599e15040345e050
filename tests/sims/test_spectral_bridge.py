"""sims.sosd.bridge: torch capture, peak/stage alignment, linear attention and Markov."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sims.sosd.bridge import capture_torch_training, peak_times, stage_alignment
from sims.sosd.spectral import sd_variation

torch = pytest.importorskip("torch")


def _loop(model, opts, steps, x, y, *, sam=None):
    """A training loop the capture knows nothing about; returns the weight copies per step."""
    copies = [{n: p.detach().clone() for n, p in model.named_parameters()}]
    for _ in range(steps):
        if sam is not None:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            sam.first_step(zero_grad=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            sam.second_step(zero_grad=True)
        else:
            for o in opts:
                o.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            for o in opts:
                o.step()
        copies.append({n: p.detach().clone() for n, p in model.named_parameters()})
    return copies


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def test_capture_records_what_the_loop_did():
    x, y = torch.randn(32, 6), torch.randn(32, 3)
    m1, m2 = _mlp(), _mlp()
    with capture_torch_training(every=2) as cap:
        c1 = _loop(m1, [torch.optim.AdamW(m1.parameters(), lr=1e-2)], 7, x, y)
        c2 = _loop(m2, [torch.optim.SGD(m2.parameters(), lr=1e-1)], 4, x, y)
    assert len(cap.runs) == 2 and cap.runs[0].model is m1 and cap.runs[1].model is m2
    d1, d2 = cap.to_datasets()
    assert d1.step.values.tolist() == [0, 2, 4, 6] and d2.step.values.tolist() == [0, 2, 4]
    for ds, copies in ((d1, c1), (d2, c2)):
        for i, st in enumerate(ds.step.values[1:], start=1):
            prev = int(ds.step.values[i - 1])
            for name in ("0.weight", "2.weight"):
                got = float(ds.delta_sigma.sel(matrix=name).isel(record=i))
                assert got == pytest.approx(sd_variation(copies[prev][name], copies[st][name]),
                                            rel=1e-9)  # fmt: skip


def test_capture_counts_sam_once_and_two_optimizers_once():
    from sims.optim import SAM

    x, y = torch.randn(16, 6), torch.randn(16, 3)
    m = _mlp()
    sam = SAM(m.parameters(), torch.optim.SGD, rho=0.05, lr=0.1)
    with capture_torch_training(every=1) as cap:
        copies = _loop(m, [], 3, x, y, sam=sam)
    ds = cap.to_dataset()
    assert ds.step.values.tolist() == [0, 1, 2, 3]
    got = float(ds.delta_sigma.sel(matrix="0.weight").isel(record=3))
    assert got == pytest.approx(sd_variation(copies[2]["0.weight"], copies[3]["0.weight"]))
    # two optimizers per step (e.g. Muon on matrices + AdamW elsewhere): one step each iteration,
    # recorded after both have stepped
    m2 = _mlp()
    o1 = torch.optim.SGD([m2[0].weight], lr=0.1)
    o2 = torch.optim.AdamW([p for n, p in m2.named_parameters() if n != "0.weight"], lr=1e-2)
    with capture_torch_training(every=1) as cap2:
        copies2 = _loop(m2, [o1, o2], 3, x, y)
    ds2 = cap2.to_dataset()
    assert ds2.step.values.tolist() == [0, 1, 2, 3]
    got = float(ds2.delta_sigma.sel(matrix="2.weight").isel(record=2))
    assert got == pytest.approx(sd_variation(copies2[1]["2.weight"], copies2[2]["2.weight"]))


def test_capture_without_training_says_so():
    with capture_torch_training(every=1) as cap:
        _mlp()(torch.randn(2, 6))
    with pytest.raises(ValueError, match="no training step was captured"):
        cap.to_dataset()
    with pytest.raises(ValueError, match="`every`"), capture_torch_training(every=0):
        pass


def test_peak_times_finds_planted_peaks():
    t = np.arange(0, 1000, 10.0)
    x = 1e-4 * np.ones_like(t)
    for c in (200, 500, 800):
        x *= 1 + 30 * np.exp(-((t - c) / 20) ** 2)
    x[::7] *= 1.3  # ripple below the prominence threshold
    found = peak_times(t, x, min_ratio=3)
    assert found.size == 3 and np.all(np.abs(found - [200, 500, 800]) <= 10)  # ±1 record
    assert peak_times(t, x, min_ratio=100).tolist() == []
    with pytest.raises(ValueError, match="min_ratio"):
        peak_times(t, x, min_ratio=1)


def test_stage_alignment_offsets_and_chance():
    res = stage_alignment([100, 400, np.inf, np.nan], [90, 420, 2000], horizon=3000)
    assert res["offsets"] == [-10, 20] and res["n_stages"] == 2 and res["n_peaks"] == 3
    assert res["relative"] == pytest.approx([0.1, 0.05])
    assert 0.05 < res["chance_relative"] < 5
    empty = stage_alignment([np.inf], [1, 2])
    assert empty["n_stages"] == 0 and math.isnan(empty["chance_relative"])


def test_la_spectra_match_the_merged_matrices():
    pytest.importorskip("jax")
    import jax

    from sims.linear_attention import (
        empirical_moments,
        init_params,
        make_covariance,
        sample_dataset,
    )
    from sims.linear_attention.train import train
    from sims.sosd.bridge import la_spectra

    cov = make_covariance("linear", 3, seed=0)
    data = sample_dataset(2000, 15, cov, seed=0)
    mom = empirical_moments(data, scale=15.0)
    p0 = init_params(jax.random.PRNGKey(0), 3, 2, init_scale=0.1)
    res = train(p0, mom, 60, learning_rate=0.05, record_every=20)
    sp = la_spectra(res.ds, 0)
    assert list(sp.matrix.values) == ["merged", "key", "query"]
    ds = res.ds
    v, k, q = ds.v.values[0], ds.k.values[0], ds.q.values[0]
    merged = np.einsum("sh,shri,shrj->sij", v, k, q)
    assert float(sp.delta_sigma.sel(matrix="merged").isel(record=2)) == pytest.approx(
        sd_variation(merged[1], merged[2]), rel=1e-9
    )


def test_markov_study_captures_every_run():
    from sims.markov.experiments import minimal_exp
    from sims.sosd.bridge import markov_study

    summary, runs = markov_study(minimal_exp("quick"), every=2)
    assert list(summary.run.values) == ["adamw", "sam_0.05", "upsample_hard", "upsample_random"]
    for _name, (train_ds, sp) in runs.items():
        assert sp.step.values.tolist() == [0, 2, 4, 6]
        assert {"A[0]", "V[0]"} <= set(sp.matrix.values)
        assert str(sp.state_reason.sel(matrix="V[0]").isel(record=0).values).startswith("zero")
        assert train_ds.attrs["status"] == "success"


def test_alignment_table_on_a_planted_dataset():
    import xarray as xr

    from sims.sosd.bridge import alignment_table

    steps = np.arange(0, 3000, 10)
    base = 1e-4 * np.ones(steps.size)
    bumps = base * (1 + 50 * np.exp(-((steps - 1000) / 30) ** 2)
                    + 50 * np.exp(-((steps - 2000) / 30) ** 2))  # fmt: skip
    ds = xr.Dataset(
        {"delta_sigma": (("arm", "run", "record", "matrix"),
                         np.stack([bumps, base])[None, None].transpose(0, 1, 3, 2)),
         "drop_time": (("arm", "run", "feature"), np.array([[[1010.0, 1990.0, np.nan]]]))},
        coords={"arm": ["gd"], "run": [0], "record": np.arange(steps.size),
                "step": ("record", steps), "matrix": ["key", "merged"]},
    )  # fmt: skip
    key = alignment_table(ds, "key")["gd"][0]
    assert key["n_peaks"] == 2  # peaks at 1000 and 2000 (± one record from the 3-point median)
    assert np.all(np.abs(np.array(key["offsets"]) - [-10, 10]) <= 10)
    flat = alignment_table(ds, "merged")["gd"][0]
    assert flat["n_peaks"] == 0 and flat["offsets"] == []


def test_lm_spectra_start_from_train_lms_init_and_track_its_weights():
    from sims.lm import train_lm
    from sims.sosd.bridge import lm_sosd_config, train_lm_with_spectra
    from sims.sosd.spectral import singular_values

    cfg = lm_sosd_config("constant", scale="quick").replace(steps=20)
    # the step-0 record is GPT(config.model) under torch.manual_seed(seed): a zero-lr run keeps it
    frozen = train_lm(cfg.replace(lr=0.0)).model
    run, sp = train_lm_with_spectra(cfg, every=5)
    assert sp.step.values.tolist() == [0, 5, 10, 15, 20]
    assert "lm_head.weight" not in sp.matrix.values  # tied embedding excluded
    for name in ("blocks.0.attn.qkv.weight", "blocks.1.mlp.fc.weight"):
        w0 = dict(frozen.named_parameters())[name]
        wT = dict(run.model.named_parameters())[name]
        r = int(sp["rank"].sel(matrix=name))
        np.testing.assert_allclose(sp.sigma.sel(matrix=name).isel(record=0).values[:r],
                                   singular_values(w0), rtol=1e-6)  # fmt: skip
        np.testing.assert_allclose(sp.sigma.sel(matrix=name).isel(record=-1).values[:r],
                                   singular_values(wT), rtol=1e-6)  # fmt: skip
        assert float(sp.weight_cos_final.sel(matrix=name).isel(record=-1)) == pytest.approx(1.0)
    assert set(sp.group.values) == {"attn", "mlp"}
    ok = sp.a4_ratio.values[np.isfinite(sp.a4_ratio.values)]
    assert ok.size > 0 and np.all(ok <= 1)


def test_lm_summary_and_configs():
    from sims.sosd.bridge import (
        LM_EXPERIMENTS,
        lm_decay_start,
        lm_sosd_config,
        lm_sosd_summary,
        train_lm_with_spectra,
    )

    assert lm_decay_start(lm_sosd_config("step")) == 500.0
    assert lm_decay_start(lm_sosd_config("wsd")) == 1000 - 284
    assert lm_decay_start(lm_sosd_config("constant")) is None
    assert lm_sosd_config("wsd_muon").optimizer == "muon"
    assert lm_sosd_config("cosine_wd").weight_decay == 0.1
    assert lm_sosd_config("cosine", scale="gpu").model.d_model == 384
    assert set(LM_EXPERIMENTS) == {"constant", "step", "wsd", "cosine", "cosine_wd", "wsd_muon"}
    with pytest.raises(ValueError, match="unknown experiment"):
        lm_sosd_config("adam")
    with pytest.raises(ValueError, match="`scale`"):
        lm_sosd_config("wsd", scale="tpu")
    cfg = lm_sosd_config("step", scale="quick")
    run, sp = train_lm_with_spectra(cfg, every=5)
    s = lm_sosd_summary(run, sp, decay_start=lm_decay_start(cfg))
    assert s["a4_ratio_violations"] == 0 and s["a4_records_checked"] > 0
    assert s["decay_ratio"] < 1  # ΔΣ drops when the learning rate drops ×0.1
    assert s["status"] == "success" and np.isfinite(s["val_loss_final"])
    # the per-group ΔΣ levels, recomputed here from the spectra: geometric mean over the group's
    # matrices per record (records where none is defined skipped), then peak / end / the last
    # 20 % before the decay
    steps = sp.step.values
    groups = sp.group.values
    decay = lm_decay_start(cfg)
    assert set(groups) == {"attn", "mlp"}
    for g in ("attn", "mlp"):
        d = sp.delta_sigma.values[:, groups == g]
        rows = [np.exp(np.mean(np.log(r[np.isfinite(r) & (r > 0)]))) if np.any(r > 0) else np.nan
                for r in d]  # fmt: skip
        gm = np.array(rows)
        pre = (steps >= 0.8 * decay) & (steps < decay)
        got = s[f"delta_sigma_{g}"]
        assert got["peak"] == pytest.approx(np.nanmax(gm), rel=1e-9)
        assert got["end"] == pytest.approx(gm[-1], rel=1e-9)
        assert got["before_decay"] == pytest.approx(np.exp(np.mean(np.log(gm[pre]))), rel=1e-9)
    assert s["delta_sigma_attn"]["end"] != pytest.approx(s["delta_sigma_mlp"]["end"], rel=1e-3)


@pytest.mark.slow
def test_hf_callback_records_lora_updates_in_a_real_trainer(tmp_path):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    from sims.sosd.bridge import lora_matrices
    from sims.sosd.spectral import hf_spectral_callback, singular_values

    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=2, max_position_embeddings=32)  # fmt: skip
    torch.manual_seed(0)
    model = peft.get_peft_model(
        transformers.LlamaForCausalLM(cfg),
        peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]),
    )
    ids = torch.randint(0, 64, (16, 12))
    data = [{"input_ids": x, "labels": x} for x in ids]
    cb = hf_spectral_callback(every=2, matrices=lora_matrices)
    args = transformers.TrainingArguments(str(tmp_path), per_device_train_batch_size=4,
                                          max_steps=4, learning_rate=1e-2, report_to=[],
                                          save_strategy="no", logging_strategy="no",
                                          use_cpu=True, disable_tqdm=True)  # fmt: skip
    transformers.Trainer(model=model, args=args, train_dataset=data, callbacks=[cb]).train()
    ds = cb.recorder.to_dataset()
    assert ds.step.values.tolist() == [0, 2, 4]
    names = list(ds.matrix.values)
    assert len(names) == 6 and sum(n.endswith(".delta") for n in names) == 2
    delta = next(n for n in names if n.endswith(".delta"))
    b = delta.replace(".delta", ".B")
    assert str(ds.state_reason.sel(matrix=b).isel(record=0).values).startswith("zero")
    final = lora_matrices(model)[delta].detach()
    r = int(ds["rank"].sel(matrix=delta))
    np.testing.assert_allclose(ds.sigma.sel(matrix=delta).isel(record=-1).values[:r],
                               singular_values(final), rtol=1e-6, atol=1e-12)  # fmt: skip
    assert np.count_nonzero(singular_values(final) > 1e-9 * singular_values(final)[0]) <= 4
    assert np.isfinite(float(ds.delta_sigma.sel(matrix=delta).isel(record=2)))


def test_peak_prominence_is_measured_from_the_higher_flanking_minimum():
    """A step up followed by a small bump: 100× above the left minimum, 1.5× above the right
    one. Its prominence is the smaller rise (1.5×), so it is not a peak at min_ratio 3."""
    t = np.arange(0, 200, 10.0)
    x = np.r_[np.full(8, 1e-6), np.full(12, 1e-4)]
    x[12] = 1.5e-4
    assert peak_times(t, x, min_ratio=3, smooth=1).tolist() == []
    assert peak_times(t, x, min_ratio=1.4, smooth=1).tolist() == [120.0]


def test_lm_sosd_device_per_scale_and_errors_before_any_run(tmp_path, monkeypatch):
    import torch

    import sims.sosd.bridge as B

    assert B.lm_sosd_config("wsd", scale="gpu").device == "cuda"  # the GPU configuration
    assert B.lm_sosd_config("wsd", scale="cpu").device == "cpu"
    assert B.lm_sosd_config("wsd", scale="gpu", device="cuda:1").device == "cuda:1"
    gpu = B.lm_sosd_config("wsd", scale="gpu")
    assert gpu == B.lm_sosd_config("wsd", scale="gpu", device="cpu").replace(device="cuda")

    def no_work(*a, **k):
        raise AssertionError("a run started before the arguments were checked")

    monkeypatch.setattr("sims.lm.GPT", no_work)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no usable CUDA device"):
            B.train_lm_with_spectra(gpu)  # before the 11M-parameter model is built
        with pytest.raises(ValueError, match="no usable CUDA device"):
            B.lm_sosd_runs(tmp_path, scale="gpu", names=("wsd",), seeds=(0,))
    monkeypatch.setattr(B, "train_lm_with_spectra", no_work)
    with pytest.raises(ValueError, match="unknown experiment 'adam'"):
        B.lm_sosd_runs(tmp_path, scale="quick", names=("constant", "adam"))
    with pytest.raises(ValueError, match="`results_dir`.*not writable"):
        B.lm_sosd_runs("/proc/nope", scale="quick", names=("constant",))
    assert not list(tmp_path.rglob("*.*"))
    assert B.lm_sosd_dir(tmp_path, "gpu") == tmp_path / "sosd_lm" / "gpu"


def test_value_init_option_reproduces_the_init_before_commit_4d1fae3():
    """Issue 28: the bridge's onset finding flipped with the value init, not the selection.

    ``value_init="value-row"`` draws v with std init/√(H(d+1)) (before commit 4d1fae3
    "linattn-icl value init"), the default init/√(H(d+1)²): the same key gives the same draws
    scaled by √(d+1), and keys/queries are untouched.
    """
    jax = pytest.importorskip("jax")
    from sims.linear_attention.models import VALUE_INITS, init_params
    from sims.sosd.bridge import LAStudyConfig

    key = jax.random.PRNGKey(3)
    d, h = 4, 5
    a = init_params(key, d, h, init_scale=0.01)
    b = init_params(key, d, h, init_scale=0.01, value_init="value-row")
    np.testing.assert_allclose(np.asarray(b.v), np.asarray(a.v) * math.sqrt(d + 1), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(a.k), np.asarray(b.k))
    np.testing.assert_array_equal(np.asarray(a.q), np.asarray(b.q))
    # the default is today's linattn-icl init: std 0.01 / sqrt(H (d+1)^2) = 0.01 / sqrt(125)
    many = init_params(jax.random.PRNGKey(0), d, 20_000, init_scale=0.01)
    assert float(np.std(np.asarray(many.v))) * math.sqrt(20_000 * 25) == pytest.approx(
        0.01, rel=0.03
    )
    assert VALUE_INITS == ("linattn-icl", "value-row")
    assert LAStudyConfig().value_init == "linattn-icl"
    with pytest.raises(ValueError, match="value_init"):
        init_params(key, d, h, value_init="row")
    with pytest.raises(ValueError, match="value_init"):
        LAStudyConfig(value_init="row")
