"""The Theorem 4.4 figures draw the result's numbers (not only "a PNG was written")."""

import numpy as np
import pytest

from sims import sam_entropy as se
from sims.sam_entropy_plots import describe_config, plot, plot_sweep


@pytest.fixture(scope="module")
def ds():
    return se.check_theorem(se.SamEntropyConfig(rhos=(0.0, 0.002, 0.006), cross_check=False))


def lines_by_label(ax):
    return {ln.get_label(): ln for ln in ax.get_lines()}


def test_panels_show_profiles_differences_gain_and_margins(ds):
    fig = plot(ds)
    ax_p, ax_d, ax_h, ax_m = fig.axes[:4]
    np.testing.assert_allclose(lines_by_label(ax_p)["GD"].get_ydata(), ds.p_gd.values)
    for rho in (0.002, 0.006):
        lines = lines_by_label(ax_d).items()
        (line,) = [ln for lab, ln in lines if lab.startswith(f"ρ = {rho:.3g}")]
        want = ds.p_sam.sel(rho=rho).values - ds.p_gd.values
        np.testing.assert_allclose(line.get_ydata(), want)
        assert want[-1] < 0 < want[0]  # SAM moves time share away from the slowest feature
        np.testing.assert_allclose(
            lines_by_label(ax_m)[f"ρ = {rho:.3g}"].get_ydata(), ds.margins.sel(rho=rho).values
        )
    gain = lines_by_label(ax_h)["truncated ODE"]
    np.testing.assert_allclose(gain.get_xdata(), ds.rho.values / ds.attrs["rho_bound"])
    np.testing.assert_allclose(gain.get_ydata(), ds.entropy_gap.values)
    for ax in (ax_p, ax_d, ax_h, ax_m):
        assert ax.get_legend() is not None and ax.get_xlabel() and ax.get_ylabel()
    title = fig._suptitle.get_text()
    assert "λ = (0.4, 0.3, 0.2, 0.1)" in title and "ε = 0.01" in title and "truncated" in title


def test_sweep_marks_undefined_cells_and_failures():
    cfg = se.SweepConfig(spreads=(2.0, 50.0), rho_fractions=(0.5, 1.0, 1.5))
    ds = se.sweep(cfg, progress=False)
    fig = plot_sweep(ds)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("undefined" in t for t in labels) and any("fails" in t for t in labels)
    for ax, model in zip(fig.axes, ds.model.values, strict=False):
        mesh = ax.collections[0].get_array()
        undefined = ~ds.sel(model=model).learned_all.values
        assert np.array_equal(np.ma.getmaskarray(mesh).reshape(undefined.shape), undefined)
        crosses = ax.get_lines()[1]  # after the bound line
        x = ds.sel(model=model)
        n_fail = int((x.learned_all & ~x.ordering_holds & (x.rho_fraction > 0)).sum())
        assert len(crosses.get_xdata()) == n_fail
    assert "geometric spectra, d = 4" in describe_config(ds)
