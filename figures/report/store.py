"""The committed summaries: where they live, how a result file becomes a small JSON and back.

``figures/summaries/`` is tracked in git (everything else the figures read is regenerable and
git-ignored). It holds, for every summarised figure,

* ``numbers/<figure>.json``: the few numbers the findings page reads (claims, verdicts), with
  the provenance of the result files they come from (commit, config, seeds);
* ``data/<result path>.json``: the result files the figure draws from, reduced (long curves
  thinned, floats rounded to a few significant digits) and stored as JSON, so that
  ``python -m figures`` draws the figure on a fresh clone without recomputing it;

plus ``theory.json`` (the verdicts of ``python -m theory``), ``MANIFEST.json`` (every file,
its size and hash) and ``gpu/`` (written by ``python -m llm_validation campaign``).

A reduced dataset is stored as ``{"format": DATASET_FORMAT, "attrs", "coords", "data_vars"}``;
each variable as ``{"dims", "dtype", "shape", "attrs", "data"}`` with ``data`` flattened in C
order, ``null`` for NaN and the strings ``"inf"``/``"-inf"`` for infinities (a mostly-NaN float
variable stores ``"sparse": {"index", "values"}`` instead: its finite entries only). A variable
with more than :data:`PACK_ABOVE` values stores its list as ``{"packed": base64(zlib(JSON))}``,
the same rounded values about three times smaller. Attributes are
kept exactly as they are stored in the NetCDF file (the provenance stays a ``"json:..."``
string), so a hydrated file reads back through :func:`sims.runtime.io.read_netcdf` unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import tempfile
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from sims.runtime.io import atomic_path, to_jsonable

__all__ = [
    "SUMMARY_DIR",
    "DATASET_FORMAT",
    "encode_dataset",
    "decode_dataset",
    "write_summary_json",
    "read_summary_json",
    "data_path",
    "numbers_path",
    "hydrate",
    "manifest",
]

SUMMARY_DIR = Path(__file__).resolve().parents[1] / "summaries"
DATASET_FORMAT = "sbtheory-dataset/1"


def _round(x: float, sig: int) -> Any:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return float(f"{x:.{sig}g}")


def _encode_values(a: np.ndarray, sig: int) -> list:
    flat = a.reshape(-1)
    kind = a.dtype.kind
    if kind == "f":
        return [_round(float(x), sig) for x in flat]
    if kind in "iu":
        return [int(x) for x in flat]
    if kind == "b":
        return [bool(x) for x in flat]
    if kind in "USO":
        return [str(x) for x in flat]
    if kind == "c":
        raise TypeError("complex variables cannot be summarised; store |z| or its parts.")
    raise TypeError(f"cannot summarise values of dtype {a.dtype} (kind {kind!r}).")


def _encode_attrs(attrs: Mapping) -> dict:
    return {str(k): to_jsonable(v) for k, v in attrs.items()}


def _pack(values: list) -> str:
    """A long list as base64 of its zlib-compressed JSON text (the rounded values, losslessly)."""
    raw = json.dumps(values, separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(zlib.compress(raw, 9)).decode("ascii")


def _unpack(text: str) -> list:
    return json.loads(zlib.decompress(base64.b64decode(text)))


#: Arrays longer than this are stored zlib-compressed (``"packed"``); shorter ones as plain lists.
PACK_ABOVE = 2048


def _encode_var(var, sig: int) -> dict:
    a = np.asarray(var.values)
    dtype = "str" if a.dtype.kind in "USO" else a.dtype.str.lstrip("<>|=")
    out = {
        "dims": list(var.dims),
        "dtype": dtype,
        "shape": list(a.shape),
        "attrs": _encode_attrs(var.attrs),
    }
    if a.dtype.kind == "f" and a.size > 16 and np.isnan(a).mean() > 0.5:
        where = np.flatnonzero(~np.isnan(a.reshape(-1)))
        out["sparse"] = {
            "index": where.tolist(),
            "values": _encode_values(a.reshape(-1)[where], sig),
        }
    else:
        out["data"] = _encode_values(a, sig)
    for key in ("data", "sparse"):
        if key in out and a.size > PACK_ABOVE:
            out[key] = {"packed": _pack(out[key])}
    return out


def encode_dataset(ds, *, sig: int = 5) -> dict:
    """An ``xarray.Dataset`` as the JSON-ready dict described in the module docstring.

    Floats keep ``sig`` significant digits (a summary is for drawing and for the report's
    numbers, which are computed from the full results before rounding).
    """
    if sig < 2:
        raise ValueError(f"`sig` must be >= 2 significant digits; got {sig!r}.")
    return {
        "format": DATASET_FORMAT,
        "attrs": _encode_attrs(ds.attrs),
        "coords": {str(k): _encode_var(v, sig) for k, v in ds.coords.items()},
        "data_vars": {str(k): _encode_var(v, sig) for k, v in ds.data_vars.items()},
    }


def _decode_float(x) -> float:
    return np.nan if x is None else float(x)  # float("inf") / float("-inf") read the strings


def _decode_var(d: Mapping):
    import xarray as xr

    dtype = d["dtype"]
    d = {
        k: (_unpack(v["packed"]) if isinstance(v, Mapping) and "packed" in v else v)
        for k, v in d.items()
    }
    if "sparse" in d:  # mostly-NaN float array: the finite entries and their flat indices
        a = np.full(int(np.prod(d["shape"])), np.nan, dtype=dtype)
        vals = d["sparse"]["values"]
        a[np.asarray(d["sparse"]["index"], dtype=int)] = [_decode_float(x) for x in vals]
        return xr.Variable(d["dims"], a.reshape(d["shape"]), attrs=dict(d.get("attrs", {})))
    data = d["data"]
    if dtype == "str":
        a = np.asarray(data, dtype=str)
    elif np.dtype(dtype).kind == "f":
        a = np.asarray([_decode_float(x) for x in data], dtype=dtype)
    else:
        a = np.asarray(data, dtype=dtype)
    return xr.Variable(d["dims"], a.reshape(d["shape"]), attrs=dict(d.get("attrs", {})))


def decode_dataset(d: Mapping):
    """The inverse of :func:`encode_dataset` (rounded floats stay rounded)."""
    import xarray as xr

    if d.get("format") != DATASET_FORMAT:
        raise ValueError(
            f"not a summarised dataset: `format` is {d.get('format')!r}, expected "
            f"{DATASET_FORMAT!r}."
        )
    coords = {k: _decode_var(v) for k, v in d["coords"].items()}
    data_vars = {k: _decode_var(v) for k, v in d["data_vars"].items()}
    return xr.Dataset(data_vars, coords=coords, attrs=dict(d.get("attrs", {})))


def write_summary_json(path: str | Path, payload: Mapping, *, indent: int | None = 1) -> Path:
    """Write a summary file atomically (``indent=None``: one compact line, for data files)."""
    seps = (",", ":") if indent is None else (",", ": ")
    text = json.dumps(payload, indent=indent, separators=seps, ensure_ascii=False, allow_nan=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")
    return Path(path)


def read_summary_json(path: str | Path) -> dict:
    """Read a summary file."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def numbers_path(figure: str, root: Path = SUMMARY_DIR) -> Path:
    """``<root>/numbers/<figure>.json``."""
    return Path(root) / "numbers" / f"{figure}.json"


def data_path(result_rel: str, root: Path = SUMMARY_DIR) -> Path:
    """Where the summary of ``results/<result_rel>`` lives (``<root>/data/<rel>[.json]``)."""
    name = result_rel if result_rel.endswith(".json") else f"{result_rel}.json"
    return Path(root) / "data" / name


def hydrate(rels: Iterable[str], target: str | Path, root: Path = SUMMARY_DIR) -> list[Path]:
    """Write the summarised result files ``rels`` under ``target`` as the figures read them.

    A ``*.nc`` result is written back as NetCDF (its attributes as stored), any other result
    (JSON) verbatim. Returns the written paths; raises ``FileNotFoundError`` naming the missing
    summary.
    """
    out = []
    for rel in rels:
        src = data_path(rel, root)
        if not src.exists():
            raise FileNotFoundError(f"no committed summary {src} for results/{rel}.")
        dest = Path(target) / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        payload = read_summary_json(src)
        if rel.endswith(".nc"):
            decode_dataset(payload).to_netcdf(dest)
        else:
            dest.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        out.append(dest)
    return out


#: Text files of the summaries folder that the manifest does not list.
NOT_DATA = ("MANIFEST.json", "README.md", "FINDINGS.md")


def manifest(root: Path = SUMMARY_DIR) -> dict:
    """Every summary file under ``root``: size in bytes and sha256 (``MANIFEST.json`` body)."""
    files = {}
    for p in sorted(Path(root).rglob("*")):
        if p.is_file() and p.name not in NOT_DATA and not p.name.startswith("."):
            files[p.relative_to(root).as_posix()] = {
                "bytes": p.stat().st_size,
                "sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
            }
    return {"files": files, "total_bytes": sum(f["bytes"] for f in files.values())}


def scratch_dir(prefix: str = "sbt-summaries-") -> Path:
    """A fresh temporary folder for hydrated results (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=prefix))
