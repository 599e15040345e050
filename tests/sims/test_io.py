"""Result files: provenance, atomic writes, NetCDF/JSON round trips."""

import json

import numpy as np
import pytest
import xarray as xr

from sims.runtime.io import (
    atomic_path,
    ensure_writable,
    provenance,
    read_json,
    read_netcdf,
    to_jsonable,
    write_json,
    write_netcdf,
)


def test_provenance_fields():
    meta = provenance({"a": 1, "b": np.float64(2.0)}, seed=7)
    assert meta["config"] == {"a": 1, "b": 2.0} and meta["seed"] == 7
    assert meta["status"] == "success" and "numpy" in meta["packages"]
    assert {"git_commit", "git_dirty", "device", "created"} <= set(meta)
    with pytest.raises(ValueError, match="`status` must be one of"):
        provenance({}, status="ok")


def test_to_jsonable_handles_non_finite_and_numpy():
    out = to_jsonable({"x": np.array([1.0, np.inf]), "n": np.int64(3), "nan": float("nan")})
    assert out == {"x": [1.0, "inf"], "n": 3, "nan": "nan"}
    json.dumps(out, allow_nan=False)


def test_atomic_write_keeps_old_content_on_failure(tmp_path):
    target = tmp_path / "r.json"
    write_json(target, {"v": 1})
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("partial")
            raise RuntimeError("crash mid-write")
    assert read_json(target) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp files left


def test_netcdf_round_trip_with_meta(tmp_path):
    ds = xr.Dataset(
        {"loss": (("run", "step"), np.arange(6.0).reshape(2, 3))},
        coords={"run": [0, 1], "step": [0, 10, 20]},
        attrs={"config": {"lr": 0.1, "sizes": [1, 2]}, "name": "demo"},
    )
    path = write_netcdf(tmp_path / "sub" / "r.nc", ds, meta=provenance({"lr": 0.1}, seed=3))
    back = read_netcdf(path)
    xr.testing.assert_identical(back.drop_attrs(), ds.drop_attrs())
    assert back.attrs["config"] == {"lr": 0.1, "sizes": [1, 2]} and back.attrs["name"] == "demo"
    assert back.attrs["meta"]["seed"] == 3


def test_result_files_get_normal_permissions(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        p = write_json(tmp_path / "r.json", {"a": 1})
        q = write_netcdf(tmp_path / "r.nc", xr.Dataset({"x": ("i", np.arange(3.0))}))
    finally:
        os.umask(old)
    assert p.stat().st_mode & 0o777 == 0o644 and q.stat().st_mode & 0o777 == 0o644


def test_ensure_writable_fails_fast_with_the_argument_name(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"`--out` '/proc/x' is not writable"):
        ensure_writable("/proc/x", kind="dir")
    with pytest.raises(ValueError, match=r"`--out` .*afile' is an existing file; give a folder"):
        ensure_writable(tmp_path / "afile", kind="dir")
    with pytest.raises(ValueError, match=r"`out_path` .* is not writable"):
        ensure_writable(tmp_path / "afile" / "r.nc", arg="out_path")  # parent is a file
    with pytest.raises(ValueError, match="is a folder; give a file path"):
        ensure_writable(tmp_path, kind="file")
    made = ensure_writable(tmp_path / "new" / "deeper", kind="dir", create=True)
    assert made.is_dir() and list(made.iterdir()) == []  # the probe file is gone


def test_ensure_writable_without_create_leaves_nothing_behind(tmp_path):
    deep = tmp_path / "a" / "b" / "c"
    assert ensure_writable(deep, kind="dir", create=False) == deep
    assert list(tmp_path.iterdir()) == []  # checked against tmp_path, nothing made
    ensure_writable(tmp_path / "x" / "r.nc", create=False, suffix=".nc")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"`--out` .*afile/sub' is not writable"):
        ensure_writable(tmp_path / "afile" / "sub", kind="dir", create=False)


def test_ensure_writable_replaces_only_results_of_the_format(tmp_path):
    notes = tmp_path / "notes.nc"
    notes.write_text("my notes")
    with pytest.raises(ValueError, match=r"is an existing file that is not a \.nc result"):
        ensure_writable(notes, suffix=".nc")
    with pytest.raises(ValueError, match=r"must be a \.nc file path \(e\.g\. '.*notes\.nc'\)"):
        ensure_writable(tmp_path / "notes", suffix=".nc")
    result = write_netcdf(tmp_path / "r.nc", xr.Dataset({"x": ("i", np.arange(3.0))}))
    assert ensure_writable(result, suffix=".nc") == result  # an earlier result: replaced
    assert notes.read_text() == "my notes"


@pytest.mark.parametrize("content", [b"", b"\x89HDF\r\n\x1a\n truncated", b"CDF\x01 cut"])
def test_unreadable_results_are_named(tmp_path, content):
    from sims.runtime.io import UnreadableFileError

    bad = tmp_path / "r.nc"
    bad.write_bytes(content)
    with pytest.raises(UnreadableFileError, match=rf"saved result '{bad}' cannot be read \("):
        read_netcdf(bad)
    (tmp_path / "r.json").write_text('{"a": 1')
    with pytest.raises(UnreadableFileError, match=r"r\.json' cannot be read \(JSONDecodeError"):
        read_json(tmp_path / "r.json")
    with pytest.raises(FileNotFoundError):
        read_netcdf(tmp_path / "missing.nc")


def test_to_jsonable_fast_path_keeps_non_finite_markers(tmp_path):
    """Long float lists and arrays take a vectorized path; the markers must not change."""
    values = [float(i) for i in range(100)] + [float("inf"), float("nan"), float("-inf")]
    assert to_jsonable(values)[-3:] == ["inf", "nan", "-inf"]
    assert to_jsonable(values)[:3] == [0.0, 1.0, 2.0] and type(to_jsonable(values)[1]) is float
    arr = np.array([[1.5, np.nan], [np.inf, -2.0]])
    assert to_jsonable(arr) == [[1.5, "nan"], ["inf", -2.0]]
    assert to_jsonable(np.arange(3)) == [0, 1, 2] and to_jsonable(np.array([True])) == [True]
    big = {"x": np.linspace(0, 1, 200_000)}  # over COMPACT_JSON_BYTES: written compact
    small = {"x": [1.0, 2.0]}
    for payload in (big, small):
        p = write_json(tmp_path / "r.json", payload)
        assert json.loads(p.read_text())["x"] == to_jsonable(payload["x"])
    assert "\n  " in write_json(tmp_path / "s.json", small).read_text()
