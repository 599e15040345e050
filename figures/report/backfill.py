"""Add new fields to the committed summaries from the committed data, when ``results/`` is gone.

``python -m figures summaries`` computes a source's numbers from the full results. When a
source's numbers function gains a field (per-seed values for the page's bootstrap, issue 28)
after its results were summarised, and the results are not at hand (a fresh clone; runs that
cost CPU-hours), :func:`backfill_numbers` computes that field with the *same* numbers function
on the committed data files (:func:`~figures.report.store.hydrate`: the reduced result files,
at their stored digits) and adds it to the committed numbers, leaving every existing field as it
is; the numbers file's provenance records what was added, from which files, at how many digits.
:func:`rereduce_data` applies a source's current (stricter) :class:`~figures.report.reduce.
Reduction` to a committed data file (dropping a variable nothing reads). Both rewrite
``MANIFEST.json``.

The next full ``python -m figures summaries`` recomputes everything from the results.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

from sims.io import git_info, to_jsonable

from . import store
from .reduce import reduce_dataset
from .sources import SOURCES

__all__ = ["backfill_numbers", "rereduce_data", "copy_fields"]


def copy_fields(src: dict, dest: dict, path: Sequence[str]) -> int:
    """Copy the field at ``path`` from ``src`` into ``dest``; returns how many were copied.

    ``"*"`` in ``path`` matches every key at its level.
    Only new fields are added: where ``dest`` already has the field, it must be equal (else
    ``ValueError``: a backfill never changes what the page already reads). A level of ``path``
    missing in ``dest`` is skipped (``dest`` does not hold that branch).
    """
    head, *rest = path
    keys = list(src) if head == "*" else [head]
    n = 0
    for k in keys:
        if k not in src:
            continue
        if not rest:
            if k in dest and dest[k] != src[k]:
                raise ValueError(f"field {k!r} already holds another value; not overwritten.")
            dest[k] = src[k]
            n += 1
        elif isinstance(src[k], dict) and isinstance(dest.get(k), dict):
            n += copy_fields(src[k], dest[k], rest)
    return n


def _parse(key: str) -> list[str]:
    parts = key.split("/")
    if not key or any(not p for p in parts):
        raise ValueError(f"`keys`: {key!r} is not a path like 'metrics/*/*/per_seed'.")
    return parts


def backfill_numbers(
    name: str,
    keys: Sequence[str],
    *,
    root: str | Path = store.SUMMARY_DIR,
    progress: Callable[[str], None] = print,
) -> Path:
    """Add the fields ``keys`` to the committed numbers of source ``name``.

    Computed by the source's own numbers function on its committed data files (see the module
    docstring).

    Args:
        name: a summary source with a numbers function and data files.
        keys: field paths in its numbers (``"alignment/*/*/per_run"``).
        root: the summaries folder.
        progress: called with one line.

    Returns:
        The numbers file written.
    """
    if name not in SOURCES:
        raise ValueError(f"`name`: no summary source {name!r}; known: {sorted(SOURCES)}.")
    s = SOURCES[name]
    if s.numbers is None or not s.files:
        raise ValueError(f"`name`: source {name!r} has no numbers function or no data files.")
    paths = [_parse(k) for k in keys]
    if not paths:
        raise ValueError("`keys` is empty: name the fields to add.")
    root = Path(root)
    target = store.numbers_path(name, root)
    committed = store.read_summary_json(target)  # FileNotFoundError names it
    rels = [r for r in s.files if not any(ch in r for ch in "*?[")]
    scratch = store.scratch_dir("sbt-backfill-")
    try:
        store.hydrate(rels, scratch, root)
        fresh = to_jsonable(s.numbers(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    counts = {}
    for key, path in zip(keys, paths, strict=True):
        counts[key] = copy_fields(fresh, committed["numbers"], path)
        if not counts[key]:
            raise ValueError(f"`keys`: {key!r} matched no field of {name!r}'s numbers.")
    sig = {r: s.files[r].sig for r in rels}
    committed.setdefault("provenance", {}).setdefault("backfilled", []).append(
        {
            "keys": list(keys),
            "from": f"the committed data files {rels} (digits {sig}), not results/",
            "written": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "commit": git_info().get("git_commit"),
        }
    )
    store.write_summary_json(target, committed)
    store.write_summary_json(root / "MANIFEST.json", store.manifest(root))
    progress(f"[{name}] added {', '.join(f'{k} ({n})' for k, n in counts.items())}")
    return target


def rereduce_data(name: str, rel: str, *, root: str | Path = store.SUMMARY_DIR) -> Path:
    """Apply source ``name``'s current reduction of ``rel`` to its committed data file.

    For a reduction made stricter than the one the file was written with (a variable dropped,
    fewer digits); the attributes (provenance) are kept as stored.
    """
    if name not in SOURCES or rel not in SOURCES[name].files:
        raise ValueError(f"`rel`: {rel!r} is not a data file of summary source {name!r}.")
    if not rel.endswith(".nc"):
        raise ValueError(f"`rel`: {rel!r} is not a NetCDF result; nothing to reduce.")
    root = Path(root)
    red = SOURCES[name].files[rel]
    path = store.data_path(rel, root)
    ds = store.decode_dataset(store.read_summary_json(path))
    # a variable the committed file already lacks is already dropped
    red_now = dataclasses.replace(red, drop=tuple(v for v in red.drop if v in ds.data_vars))
    payload = store.encode_dataset(reduce_dataset(ds, red_now), sig=red.sig)
    store.write_summary_json(path, payload, indent=None)
    store.write_summary_json(root / "MANIFEST.json", store.manifest(root))
    return path
