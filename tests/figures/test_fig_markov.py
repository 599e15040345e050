import importlib
import subprocess
import sys

import numpy as np
import pytest

import figures
from sims.runtime.io import read_netcdf

MODULES = [
    "fig_markov_10",
    "fig_markov_coupling",
    "fig_markov_1",
    "fig_markov_4",
    "fig_markov_2_3",
    "fig_markov_5",
    "fig_markov_beyond",
    "fig_markov_6_7",
    "fig_markov_8_9",
]


def test_markov_figures_are_discovered():
    found = figures.discover()
    for mod in MODULES:
        m = importlib.import_module(f"figures.{mod}")
        assert found[m.FIGURE.name] is m and m.FIGURE.extra == "torch"


@pytest.mark.parametrize("mod", MODULES)
def test_quick_render_reuse_and_no_overwrite(mod, tmp_path):
    m = importlib.import_module(f"figures.{mod}")
    out, res = tmp_path / "out", tmp_path / "results"
    out.mkdir()
    name = m.FIGURE.name
    full = out / f"{name}.png"
    full.write_bytes(b"the CPU-scale figure")
    paths = m.make(out, results_dir=res, quick=True)
    assert [p.name for p in paths] == [f"{name}_quick.png"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert full.read_bytes() == b"the CPU-scale figure"  # --quick never overwrites it
    saved = list(res.rglob("*.nc"))
    assert len(saved) == 1 and "quick" in saved[0].parts
    mtime = saved[0].stat().st_mtime
    assert m.main(["--quick", "--out", str(out), "--results", str(res)]) == 0  # reads, no recompute
    assert saved[0].stat().st_mtime == mtime


def _quick_result(mod, tmp_path):
    m = importlib.import_module(f"figures.{mod}")
    m.make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    return read_netcdf(next((tmp_path / "res").rglob("*.nc")))


def test_fig10_has_both_perturbation_sizes(tmp_path):
    from sims.markov.experiments import flow_config
    from sims.markov.tensor_dynamics import solve_flow

    ds = _quick_result("fig_markov_10", tmp_path)
    assert ds.init_std.values.tolist() == [1e-6, 1e-3]
    for std in (1e-6, 1e-3):
        ref = solve_flow(flow_config("quick", init_std=std)).ds
        np.testing.assert_allclose(ds.S.sel(init_std=std).values, ref.S.values, atol=1e-9)


def test_coupling_figure_times_are_the_measured_ones(tmp_path):
    from sims.markov.tensor_dynamics import FlowConfig, coupling_times

    ds = _quick_result("fig_markov_coupling", tmp_path)
    tc = ds.t_c.sel(T=10, seed=0).values
    ref = coupling_times(FlowConfig(T=10, seed=0, t_max=3e3, n_eval=1500), ds.eps.values)
    np.testing.assert_allclose(tc, ref, rtol=1e-12)
    assert np.all(np.diff(tc) > 0)


def test_fig4_stage_counts_lie_in_their_bands(tmp_path):
    ds = _quick_result("fig_markov_4", tmp_path)
    assert set(ds.param.values) == {"u", "m"}
    assert (ds.seed.values[ds.param.values == "m"] >= 0).all()
    assert np.all(ds.n_stages_min <= ds.n_stages) and np.all(ds.n_stages <= ds.n_stages_max)
    from figures.fig_markov_4 import order_text

    assert order_text(ds, 1.0).count(";") == 1  # two seeds at m = 1


def test_bad_scale_env(monkeypatch, tmp_path, capsys):
    from figures import fig_markov_10
    from sims.markov.experiments import scale_from_env

    monkeypatch.setenv("MARKOV_SCALE", "huge")
    with pytest.raises(ValueError, match="MARKOV_SCALE"):
        scale_from_env(False)
    with pytest.raises(SystemExit) as e:
        fig_markov_10.main(["--out", str(tmp_path), "--results", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == ("python -m figures.fig_markov_10: error: MARKOV_SCALE='huge' unknown; set it "
                   "to one of quick, cpu, paper.\n")  # fmt: skip


def test_bad_scale_env_from_python_m_figures(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "figures", "--only", "markov_fig10", "--out", str(tmp_path),
         "--results", str(tmp_path)],
        capture_output=True, text=True, env={**__import__("os").environ, "MARKOV_SCALE": "x"},
        timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "MARKOV_SCALE='x' unknown" in r.stderr
