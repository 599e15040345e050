"""SAM-family figures: the quick experiments end to end, reuse of saved results, the tables."""

import importlib

import numpy as np
import pytest

import figures

pytest.importorskip("torch")

MODULES = ["fig_sam_family_table1", "fig_sam_family_rho", "fig_sam_family_tau",
           "fig_sam_family_sharpness"]  # fmt: skip


def test_discovered_with_the_torch_extra():
    found = figures.discover()
    for name in ("sam_family_table1", "sam_family_rho", "sam_family_tau", "sam_family_sharpness"):
        assert found[name].FIGURE.extra == "torch"


@pytest.mark.slow
def test_quick_figures_compute_render_and_reuse(tmp_path, capsys):
    out, res = tmp_path / "out", tmp_path / "results"
    for mod in MODULES:
        m = importlib.import_module(f"figures.{mod}")
        paths = m.make(out, results_dir=res, quick=True)
        assert paths and all(p.exists() and p.stat().st_size > 10_000 for p in paths)
        assert all(p.name.endswith("_quick.png") for p in paths)  # never the full figure's name
    saved = sorted(res.rglob("*.nc"))
    assert [p.name for p in saved] == ["rho_sweep.nc", "sharpness.nc", "table1.nc", "tau.nc"]
    assert all(p.parent.name == "quick" for p in saved)
    assert len(list((res / "sam_family" / "quick" / "models").glob("*.pt"))) == 10
    mtimes = [p.stat().st_mtime_ns for p in saved]
    for mod in MODULES:  # second round: loaded, not recomputed
        importlib.import_module(f"figures.{mod}").make(out, results_dir=res, quick=True)
    assert [p.stat().st_mtime_ns for p in saved] == mtimes
    text = capsys.readouterr().out
    assert "Δ vs AdamW" in text and "tau_logit" in text

    from sims.runtime.io import read_netcdf

    t1 = read_netcdf(res / "sam_family" / "quick" / "table1.nc")
    assert t1.final_val_loss.dims == ("optimizer", "seed") and t1.sizes["seed"] == 2
    assert np.all(np.isfinite(t1.final_val_loss.values))
    assert t1.attrs["meta"]["status"] == "success" and "git_commit" in t1.attrs["meta"]
    # every method of a seed starts from the same weights: identical step-0 validation loss
    v0 = t1.val_loss.isel(eval_step=0)
    assert np.all(v0 == v0.isel(optimizer=0))
    tau = read_netcdf(res / "sam_family" / "quick" / "tau.nc")
    total = (tau.tau_logit + tau.tau_func + tau.tau_cross).values
    measured = np.isfinite(total)  # the extension optimizers run on the first seed only
    assert measured.sum() == 3 * 3  # (adamw, seeds 0 and 1) + (sam, seed 0), 3 steps each
    np.testing.assert_allclose(total[measured], 1.0, atol=1e-9)
