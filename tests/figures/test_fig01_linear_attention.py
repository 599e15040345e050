"""Render the linear-attention figures with their quick configurations, as a reader would.

Checks the files are written (quick names, no recompute on the second call) and that every
panel can be read without the caption: axis labels, a suptitle with the configuration, legends
on panels with several labelled curves, no two differently labelled curves in the same style.
"""

import importlib

import pytest

from sims.runtime.io import read_netcdf

MODULES = ["figures.fig01_linear_attention", "figures.fig_la_horizon",
           "figures.fig_la_sam_mechanism", "figures.fig_la_upsampling",
           "figures.fig_la_theory_vs_sim"]  # fmt: skip


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("la_figs")
    return root / "out", root / "results"


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_quick_render(dirs, module):
    out_dir, res_dir = dirs
    mod = importlib.import_module(module)
    assert mod.FIGURE.extra == "jax"
    out = mod.make(out_dir, results_dir=res_dir, quick=True)
    assert len(out) == 1 and out[0].exists() and out[0].name.endswith("_quick.png")
    results = sorted(res_dir.rglob("*.nc"))
    assert results and all(p.stem.endswith("_quick") for p in results)
    for p in results:
        meta = read_netcdf(p).attrs["meta"]
        assert meta["status"] in {"success", "failed"} and "config" in meta
    mtimes = {p: p.stat().st_mtime for p in results}
    mod.make(out_dir, results_dir=res_dir, quick=True)  # reads the saved files
    assert all(p.stat().st_mtime == t for p, t in mtimes.items())


def _check_readable(fig):
    assert fig._suptitle is not None and fig._suptitle.get_text()
    for ax in fig.axes:
        if not ax.get_visible() or not ax.has_data() or ax.get_label() == "<colorbar>":
            continue
        if ax.get_ylabel() == "" and ax.get_xlabel() == "":  # twin axes of saddle labels
            continue
        assert ax.get_xlabel(), ax.get_title()
        labelled = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
        if len(labelled) > 1:
            assert ax.get_legend() is not None, ax.get_title()
        styles = {}
        for ln in labelled:
            key = (str(ln.get_color()), ln.get_linestyle(), ln.get_marker())
            assert styles.setdefault(key, ln.get_label()) == ln.get_label(), (
                f"{ax.get_title()!r}: {ln.get_label()!r} and {styles[key]!r} share a style")


@pytest.mark.slow
def test_figures_read_without_caption(dirs):
    from sims.linear_attention import plotting, products

    out_dir, res_dir = dirs
    fig1 = read_netcdf(products.ensure_figure1(res_dir, quick=True))
    _check_readable(plotting.plot_figure1(fig1))
    _check_readable(plotting.plot_horizon(fig1))
    ana, esc = products.ensure_mechanism(res_dir, quick=True)
    _check_readable(plotting.plot_mechanism(read_netcdf(ana), read_netcdf(esc), fig1=fig1))
    _check_readable(plotting.plot_upsampling(read_netcdf(products.ensure_study(res_dir,
                                                                               quick=True))))
    _check_readable(plotting.plot_theory_vs_sim(read_netcdf(
        products.ensure_theory_vs_sim(res_dir, quick=True))))
