"""Figure registry: discovery, ``python -m figures --list``, smoke renders of the core figures."""

import pytest

import figures
from figures.__main__ import main as figures_main


def test_discover_finds_core_figures():
    found = figures.discover()
    assert {"sam_entropy", "entropy_toy", "sam_entropy_sweep"} <= set(found)
    for mod in found.values():
        assert isinstance(mod.FIGURE, figures.FigureSpec) and callable(mod.main)


def test_list(capsys):
    assert figures_main(["--list"]) == 0
    assert "sam_entropy" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["sam_entropy", "entropy_toy", "sam_entropy_sweep"])
def test_render_core_figures(name, tmp_path):
    paths = figures.discover()[name].make(
        tmp_path / "out", results_dir=tmp_path / "res", quick=True
    )
    assert paths and all(p.exists() and p.stat().st_size > 10_000 for p in paths)
    # second call reads the saved result instead of recomputing
    res = tmp_path / "res" / figures.discover()[name].FIGURE.result_file
    if name == "sam_entropy_sweep":
        res = res.with_name("sweep_quick.nc")
    mtime = res.stat().st_mtime_ns
    figures.discover()[name].make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    assert res.stat().st_mtime_ns == mtime


def test_unknown_figure_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        figures_main(["--only", "nope", "--out", "/tmp/x"])
    assert exc.value.code == 2
