"""Every result file the seed-004 (Markov) figures write reads back, on both NetCDF engines.

Issue 30: on an image without netCDF4, xarray writes NetCDF-3 through scipy, and
``fig8_9_reversed.nc`` was written and then unreadable (scipy: ``TypeError ... int and
NoneType``; netCDF4: "NC_UNLIMITED in the wrong index"). The cause was a zero-length
``reference`` dimension (a run without reference models), which NetCDF can only store as its
unlimited dimension, and NetCDF-3 only as a variable's first dimension. Each figure's quick-scale
result is written here with each engine through :func:`sims.runtime.io.write_netcdf` and read back
three
ways: :func:`sims.runtime.io.read_netcdf`, xarray with that engine, and the netCDF4 library directly
(an implementation independent of xarray, which reads NetCDF-3 files too).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import figures
from sims.runtime.io import provenance, read_netcdf, to_jsonable, write_netcdf

netCDF4 = pytest.importorskip("netCDF4")
ENGINES = ("netcdf4", "scipy")


def _markov_figures() -> list[str]:
    return sorted(
        n for n, m in figures.discover().items() if n.startswith("markov") and hasattr(m, "compute")
    )


@pytest.fixture(scope="module")
def results():
    """Each Markov figure's result at the quick scale, computed once (seconds each)."""
    mods = figures.discover()
    return {name: mods[name].compute("quick") for name in _markov_figures()}


def test_every_markov_figure_is_covered():
    # the figures of seed 004 (main text and appendix) and the project's extensions
    names = _markov_figures()
    expected = {"markov_fig1", "markov_fig2_3", "markov_fig5", "markov_fig8_9", "markov_fig10"}
    assert expected <= set(names) and len(names) >= 8


def _same(a, b, what: str) -> None:
    assert set(a.data_vars) == set(b.data_vars), what
    assert dict(a.sizes) == dict(b.sizes), what
    for v in [*a.data_vars, *a.coords]:
        x, y = np.asarray(a[v].values), np.asarray(b[v].values)
        assert x.shape == y.shape, (what, v)
        if x.dtype.kind in "fc":
            np.testing.assert_array_equal(x, y, err_msg=f"{what}: {v}")  # NaN == NaN here
        else:
            assert (x == y).all(), (what, v)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", _markov_figures())
def test_markov_result_reads_back(results, name, engine, tmp_path):
    ds = results[name]
    meta = provenance({"figure": name, "scale": "quick"}, seed=0)
    path = tmp_path / f"{name}.nc"
    write_netcdf(path, ds, meta=meta, engine=engine)
    magic = path.read_bytes()[:4]
    assert magic == (b"\x89HDF" if engine == "netcdf4" else b"CDF\x02")  # the engine's format
    back = read_netcdf(path)
    _same(ds, back, f"{name} ({engine}) through read_netcdf")
    assert back.attrs["meta"]["config"] == {"figure": name, "scale": "quick"}
    want = json.loads(json.dumps(to_jsonable(dict(ds.attrs))))
    got = json.loads(json.dumps(to_jsonable({k: v for k, v in back.attrs.items() if k != "meta"})))
    assert got == want
    import xarray as xr

    with xr.open_dataset(path, engine=engine) as direct:
        _same(ds, direct.load(), f"{name} ({engine}) through xarray")
    with netCDF4.Dataset(path) as nc:  # the C library, not xarray's decoding
        for v in ds.data_vars:
            raw = np.ma.filled(nc.variables[v][...], np.nan).astype(ds[v].dtype)
            np.testing.assert_array_equal(raw, ds[v].values, err_msg=f"{name}: {v}")


def test_zero_length_dimension_is_refused_by_netcdf3_before_anything_is_written(tmp_path):
    """The writer's own guard: a file that would not read back never replaces the target."""
    import xarray as xr

    bad = xr.Dataset({"x": (("step", "reference"), np.zeros((3, 0)))})
    path = tmp_path / "r.nc"
    path.write_bytes(b"previous")
    with pytest.raises(ValueError, match="would not read back"):
        write_netcdf(path, bad, engine="scipy")
    assert path.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["r.nc"]
    # netCDF4 stores a zero-length dimension as an unlimited one, and reads it back
    write_netcdf(tmp_path / "ok.nc", bad, engine="netcdf4")
    assert read_netcdf(tmp_path / "ok.nc")["x"].shape == (3, 0)


def test_a_run_without_references_has_no_reference_dimension():
    from sims.markov import experiments as X
    from sims.markov.train import train

    exp = X.minimal_exp("quick")
    ds = train(exp).ds
    assert "reference" not in ds.dims and "kl_reference" not in ds
    assert all(size > 0 for size in ds.sizes.values())
