"""The SmolLM2 τ figure: registered with the models extra; --quick on a tiny model end to end."""

import numpy as np
import pytest

import figures

pytest.importorskip("torch")
pytest.importorskip("peft")


def test_registered_with_the_models_extra(capsys):
    mod = figures.discover()["sam_family_tau_smollm2"]
    assert mod.FIGURE.extra == "models"
    assert mod.FIGURE.result_file == "sam_family/smollm2/cpu/tau_smollm2.nc"
    assert mod.SCALES["cpu"]["model"] == "smollm2-135m-instruct"
    from figures.__main__ import main

    assert main(["--list"]) == 0
    assert "sam_family_tau_smollm2" in capsys.readouterr().out


def test_quick_computes_on_a_tiny_model_renders_and_reuses(tmp_path, capsys):
    import torch

    from figures import fig_sam_family_tau_smollm2 as fig
    from sims.runtime.io import read_netcdf

    torch.set_num_threads(1)
    out, res = tmp_path / "out", tmp_path / "results"
    paths = fig.make(out, results_dir=res, quick=True)
    assert [p.name for p in paths] == ["sam_family_tau_smollm2_quick.png"]  # never the full name
    assert paths[0].stat().st_size > 10_000
    nc = res / "sam_family" / "smollm2" / "quick" / "tau_smollm2.nc"
    assert not (res / "sam_family" / "smollm2" / "cpu").exists()
    ds = read_netcdf(nc)
    assert list(ds.param_set.values) == ["lora", "last_mlp"] and list(ds.step.values) == [0, 2, 4]
    np.testing.assert_allclose((ds.tau_logit + ds.tau_func + ds.tau_cross).values, 1.0,
                               atol=1e-12)  # fmt: skip
    assert np.all(ds.check_residual.values < 1e-4)  # float32 products vs an independent HVP
    assert np.all(ds.lambda_max.values >= ds.curvature.values * (1 - 1e-6))
    assert ds.attrs["meta"]["status"] == "success" and "git_commit" in ds.attrs["meta"]
    assert ds.attrs["model"] == "tiny llama (from config)" and ds.attrs["lora_rank"] == 2
    assert "τ_logit" in capsys.readouterr().out
    mtime = nc.stat().st_mtime_ns
    fig.make(out, results_dir=res, quick=True)  # loaded, not recomputed
    assert nc.stat().st_mtime_ns == mtime
