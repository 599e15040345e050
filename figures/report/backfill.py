"""Add new fields to the committed summaries from the committed data, when ``results/`` is gone.

``python -m figures summaries`` computes a source's numbers from the full results. When a
source's numbers function gains a field (per-seed values for the page's bootstrap, issue 28)
after its results were summarised, and the results are not at hand (a fresh clone; runs that
cost CPU-hours), :func:`backfill_numbers` recomputes the numbers with the *same* numbers
function on the committed data files (:func:`numbers_from_summaries`: the reduced result files,
hydrated, at their stored digits), checks that every field the committed numbers already have
agrees with the recomputation (a drift check: data and numbers still belong together), and
adds the new fields, leaving every existing field as it is (computed from the full results);
the numbers file's ``provenance["backfilled"]`` records what was added, from which files, at
how many digits. :func:`rereduce_data` applies a source's current (stricter)
:class:`~figures.report.reduce.Reduction` to a committed data file (dropping a variable nothing
reads). Both rewrite ``MANIFEST.json``.

The next full ``python -m figures summaries`` recomputes everything from the results.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as _dt
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from sims.runtime.io import git_info, to_jsonable

from . import store
from .reduce import reduce_dataset
from .sources import SOURCES

__all__ = [
    "backfill_numbers",
    "numbers_from_summaries",
    "new_fields",
    "drifted_fields",
    "rereduce_data",
    "RTOL",
]

#: Default relative tolerance of the drift check (absolute: ``RTOL * 1e-3``). The committed
#: data keep 4-5 significant digits (a Reduction's ``sig``), so a statistic recomputed from them
#: differs from the one computed on the full results: on the committed summaries by at most
#: 0.38 % relative (``sam_family_sharpness``'s ``tr_H_G/adamw/sd``; ``sosd_bridge``'s
#: ``alignment/merged/sam/first/max`` 0.7245 vs 0.7220, 0.34 %), or 3.4e-6 absolute on an SD
#: of 4.5e-4 (0.75 %). 1 % passes every committed source with 2.6x margin and is still far
#: below a drift that would change what a row says.
RTOL = 1e-2


def numbers_from_summaries(name: str, root: str | Path = store.SUMMARY_DIR) -> dict:
    """The numbers of source ``name`` recomputed from its committed data (no ``results/``).

    The summarised result files are hydrated into a scratch folder
    (:func:`figures.report.drawing.summary_results`) and the source's ``numbers`` function reads
    them. Files kept whole give the same numbers as the full results; rounded ones (a
    Reduction's ``sig``) give them to those digits.
    """
    from .drawing import summarised, summary_results

    s = SOURCES.get(name)
    if s is None or s.numbers is None or not s.files:
        raise ValueError(
            f"`name`: {name!r} is not a summary source with a numbers function and data files; "
            f"known: {sorted(n for n, v in SOURCES.items() if v.numbers and v.files)}."
        )
    if not summarised(name, Path(root)):
        raise ValueError(f"`name`: {name!r} has no committed data under {root}/data.")
    with summary_results([name], Path(root)) as tmp:
        return to_jsonable(s.numbers(tmp))


def _leaves(d, prefix=()):
    """``(path, value)`` of every leaf; a list of scalars is one leaf."""
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, (*prefix, k))
    elif isinstance(d, list) and any(isinstance(x, (dict, list)) for x in d):
        for i, v in enumerate(d):
            yield from _leaves(v, (*prefix, i))
    else:
        yield prefix, d


def _agree(a, b, rtol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_agree(x, y, rtol) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)):
        return a == b
    if not isinstance(b, (int, float)):
        return False
    return math.isclose(a, b, rel_tol=rtol, abs_tol=rtol * 1e-3)


def _dotted(path) -> str:
    return "/".join(map(str, path))


def drifted_fields(old: dict, new: dict, rtol: float = RTOL) -> list[str]:
    """The leaves ``old`` and ``new`` both have whose values differ beyond ``rtol``."""
    new_leaves = dict(_leaves(new))
    off = (k for k, v in _leaves(old) if k in new_leaves and not _agree(v, new_leaves[k], rtol))
    return [_dotted(k) for k in off]


def _parse(key: str) -> list[str]:
    if not isinstance(key, str) or not key or any(not p for p in key.split("/")):
        raise ValueError(f"`keys`: {key!r} is not a path like 'metrics/*/*/per_seed'.")
    return key.split("/")


def _matches(old: dict, new: dict, path: Sequence[str], prefix=()):
    """``(path, in_old)`` of the fields of ``new`` matching ``path`` (``"*"``: any key).

    Only fields whose parent ``old`` holds: a branch ``old`` lacks is skipped.
    """
    head, *rest = path
    for k in list(new) if head == "*" else [head]:
        if k not in new:
            continue
        if not rest:
            yield (*prefix, k), k in old
        elif isinstance(new[k], dict) and isinstance(old.get(k), dict):
            yield from _matches(old[k], new[k], rest, (*prefix, k))


def _absent(old: dict, new: dict, prefix=()):
    """Paths of the dict keys ``new`` has and ``old`` lacks (whole subtrees)."""
    for k, v in new.items():
        if k not in old:
            yield (*prefix, k)
        elif isinstance(v, dict) and isinstance(old[k], dict):
            yield from _absent(old[k], v, (*prefix, k))


def new_fields(
    old: dict, new: dict, keys: Sequence[str] | None = None, *, rtol: float = RTOL
) -> tuple[dict, list[str]]:
    """``old`` with the fields of ``new`` it lacks, and their paths (``"a/b/c"``).

    Args:
        old: the committed numbers (left unchanged).
        new: the numbers recomputed from the committed data.
        keys: ``None``: every field ``new`` has and ``old`` lacks (whole subtrees); else field
            paths (``"metrics/*/*/per_seed"``, ``"*"`` any key at its level), each of which must
            match a field of ``new``: those ``old`` lacks are added where ``old`` holds their
            parent; those it has are kept.
        rtol: relative tolerance of the drift check.

    Raises:
        ValueError: a leaf both have differs beyond ``rtol`` (the data no longer give the
            committed numbers: nothing is added, whatever ``keys``); a key matches nothing.
    """
    off = drifted_fields(old, new, rtol)
    if off:
        raise ValueError(
            f"the committed data no longer give the committed numbers at {off[:5]} "
            f"({len(off)} field(s), rtol={rtol}); regenerate the summary from the full results "
            "(`python -m figures summaries`), or pass a larger `rtol` with a reason."
        )
    if keys is None:
        paths = list(_absent(old, new))
    else:
        if isinstance(keys, str):
            raise TypeError(f"`keys`: {keys!r} is one string; pass a list of paths.")
        paths = []
        for key in keys:
            hits = list(_matches(old, new, _parse(key)))
            if not hits:
                raise ValueError(f"`keys`: {key!r} matched no field of the recomputed numbers.")
            paths += [p for p, present in hits if not present and p not in paths]
    out = copy.deepcopy(old)
    for path in paths:
        d_out, d_new = out, new
        for k in path[:-1]:
            d_out, d_new = d_out[k], d_new[k]
        d_out[path[-1]] = d_new[path[-1]]
    return out, [_dotted(p) for p in paths]


def origin(name: str) -> str:
    """Where backfilled fields of source ``name`` come from (for the provenance)."""
    files = SOURCES[name].files
    digits = {r: red.sig if r.endswith(".nc") else "whole" for r, red in files.items()}
    return f"the committed data files {list(digits)} (digits {digits}), not results/"


def backfill_numbers(
    name: str,
    keys: Sequence[str] | None = None,
    *,
    root: str | Path = store.SUMMARY_DIR,
    rtol: float = RTOL,
    progress: Callable[[str], None] = print,
) -> list[str]:
    """Add new fields to the committed numbers of source ``name`` (see the module docstring).

    Args:
        name: a summary source with a numbers function and committed data files.
        keys: ``None`` adds every field the recomputation has and the file lacks; else the
            field paths to add (``"alignment/*/*/per_run"``); see :func:`new_fields`.
        root: the summaries folder.
        rtol: relative tolerance of the drift check over every existing field (default
            :data:`RTOL`, which every committed source passes; a larger one needs a reason).
        progress: called with one line.

    Returns:
        The added fields (``"a/b/c"``); ``[]`` when nothing is left to add (nothing written).

    Raises:
        ValueError: unknown source, no committed numbers, a key matching nothing, or drift
            (nothing is written).
    """
    if not isinstance(rtol, (int, float)) or isinstance(rtol, bool) or not 0 <= rtol < 1:
        raise ValueError(f"`rtol`: {rtol!r}; pass a relative tolerance in [0, 1), e.g. {RTOL}.")
    root = Path(root)
    fresh = numbers_from_summaries(name, root)  # validates `name`
    target = store.numbers_path(name, root)
    if not target.exists():
        raise ValueError(f"`name`: {name!r} has no committed numbers file {target}.")
    payload = store.read_summary_json(target)
    try:
        numbers, added = new_fields(payload["numbers"], fresh, keys, rtol=rtol)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None
    if added:
        payload["numbers"] = numbers
        payload.setdefault("provenance", {}).setdefault("backfilled", []).append(
            {
                "fields": added,
                "from": origin(name),
                "written": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                "commit": git_info().get("git_commit"),
            }
        )
        store.write_summary_json(target, payload)
        store.write_summary_json(root / "MANIFEST.json", store.manifest(root))
    progress(f"[{name}] added {len(added)} field(s): {', '.join(added) or 'none'}")
    return added


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
