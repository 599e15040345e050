"""Figure registry: discovery, ``python -m figures --list``, smoke renders of the core figures."""

import pytest

import figures
from figures.__main__ import main as figures_main
from sims.runtime.extras import EXTRAS
from tests.core_only import run_core_only


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
    from matplotlib.image import imread

    mod = figures.discover()[name]
    paths = mod.make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    assert paths and all("quick" in p.name for p in paths)  # never the full figure's file name
    for p in paths:
        img = imread(p)
        assert img.ndim == 3 and min(img.shape[:2]) > 300
        assert img[..., :3].std() > 0.05  # not a blank canvas
    results = sorted((tmp_path / "res").rglob("*.nc"))
    assert len(results) == 1 and "quick" in results[0].name
    # a second call reads the saved result instead of recomputing
    mtime = results[0].stat().st_mtime_ns
    mod.make(tmp_path / "out", results_dir=tmp_path / "res", quick=True)
    assert results[0].stat().st_mtime_ns == mtime


def test_unknown_figure_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        figures_main(["--only", "nope", "--out", "/tmp/x"])
    assert exc.value.code == 2


def test_every_figure_declares_an_extra():
    for name, mod in figures.discover().items():
        assert mod.FIGURE.extra in EXTRAS, name


def test_list_works_on_a_core_install_and_names_missing_extras():
    # figure modules import only core packages at module level (their extra inside functions)
    proc = run_core_only("figures", "--list")
    assert proc.returncode == 0, proc.stderr[-2000:]
    markov = [ln for ln in proc.stdout.splitlines() if "markov/fig5_datasize.nc" in ln]
    assert markov and "NOT INSTALLED" in markov[0] and "[torch]" in markov[0]
    core = [ln for ln in proc.stdout.splitlines() if "sam_entropy/sam_entropy.nc" in ln]
    assert core and "NOT INSTALLED" not in core[0]


def test_only_a_figure_whose_extra_is_missing_exits_2_with_the_install_command(tmp_path):
    proc = run_core_only("figures", "--only", "markov_fig5", "--out", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "needs the `torch` extra" in proc.stderr and "pip install" in proc.stderr


def test_unwritable_out_fails_before_any_work(capsys):
    with pytest.raises(SystemExit) as exc:
        figures_main(["--only", "sam_entropy", "--out", "/proc/x"])
    assert exc.value.code == 2
    assert "`--out` '/proc/x' is not writable" in capsys.readouterr().err


def test_figures_readme_is_the_generated_figure_map():
    from pathlib import Path

    readme = (Path(figures.__file__).parent / "README.md").read_text()
    table = figures.figure_map()
    assert table in readme, "stale figures/README.md: regenerate with python -m figures --markdown"
    for name in figures.discover():
        assert f"| `{name}` |" in readme
