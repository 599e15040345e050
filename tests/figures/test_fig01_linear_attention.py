"""Smoke-render the linear-attention figures with their quick configurations."""

import importlib

import pytest

from sims.io import read_netcdf


@pytest.mark.parametrize(
    "module", ["figures.fig01_linear_attention", "figures.fig_la_theory_vs_sim"]
)
def test_quick_render(tmp_path, module):
    mod = importlib.import_module(module)
    out = mod.make(tmp_path / "out", results_dir=tmp_path / "results", quick=True)
    assert len(out) == 1 and out[0].exists() and out[0].stat().st_size > 10_000
    results = list((tmp_path / "results").rglob("*.nc"))
    assert len(results) == 1
    ds = read_netcdf(results[0])
    assert ds.attrs["meta"]["status"] in {"success", "failed"}
    assert "config" in ds.attrs["meta"]
    if module.endswith("fig01_linear_attention"):
        assert {"method", "run", "step", "feature", "head"} <= set(ds.dims)
        assert list(ds.method.values) == ["gd", "gd_upsample", "sam"]
    # second call reads the saved file (no recompute)
    mtime = results[0].stat().st_mtime
    mod.make(tmp_path / "out", results_dir=tmp_path / "results", quick=True)
    assert results[0].stat().st_mtime == mtime
