"""Make a result file small enough to commit: keep the variables a figure draws, thin long axes.

A :class:`Reduction` says, for one result file, which variables to keep (or drop), which
dimensions to thin to at most how many points, and how many significant digits to keep. Thinning
keeps both ends of the axis, a uniform and a log-uniform half of the points (so a curve keeps its
shape on a linear and on a log axis), and any anchor coordinate values (the paper's horizon).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np

__all__ = ["Reduction", "thin_indices", "reduce_dataset"]


def thin_indices(
    n: int, m: int, *, coord: Sequence | None = None, anchors: Sequence = ()
) -> np.ndarray:
    """At most ``m`` (plus anchors) sorted indices of ``range(n)``.

    Both ends, half uniform and half log-uniform in the index, and the positions of the
    ``anchors`` in ``coord``.

    Examples:
        >>> thin_indices(5, 10).tolist()
        [0, 1, 2, 3, 4]
        >>> idx = thin_indices(1001, 20)
        >>> int(idx[0]), int(idx[-1]), len(idx) <= 20
        (0, 1000, True)
    """
    if m < 2:
        raise ValueError(f"`m` must be >= 2 points; got {m!r}.")
    if n <= m:
        return np.arange(n)
    half = m // 2
    uni = np.linspace(0, n - 1, half).round().astype(int)
    log = (np.geomspace(1, n, m - half) - 1).round().astype(int)
    idx = set(uni.tolist()) | set(log.tolist()) | {0, n - 1}
    if anchors:
        if coord is None:
            raise ValueError("`anchors` need the coordinate values (`coord`).")
        c = np.asarray(coord)
        for a in anchors:
            idx.add(int(np.argmin(np.abs(c - a))))
    return np.array(sorted(i for i in idx if 0 <= i < n))


@dataclasses.dataclass(frozen=True)
class Reduction:
    """How one result file is reduced before it is committed.

    Attributes:
        keep: data variables to keep (``None``: all but ``drop``).
        drop: data variables to leave out.
        thin: ``{dim: max points}`` for long axes.
        anchors: ``{dim: coordinate values always kept}`` (e.g. the paper's horizon).
        isel: ``{dim: indices}`` to keep outright (a subset of runs, of random pairs).
        only: ``{variable: {dim: indices or f(ds) -> indices}}``: keep that variable's values
            at these indices only (NaN elsewhere, stored sparsely), for what a figure draws at
            a few points (one run's curve, attention maps at five steps).
        sig: significant digits of floats.
    """

    keep: tuple[str, ...] | None = None
    drop: tuple[str, ...] = ()
    thin: Mapping[str, int] = dataclasses.field(default_factory=dict)
    anchors: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    isel: Mapping[str, Sequence[int]] = dataclasses.field(default_factory=dict)
    only: Mapping[str, Mapping[str, Sequence[int] | Callable]] = dataclasses.field(
        default_factory=dict
    )
    sig: int = 5


def reduce_dataset(ds, r: Reduction):
    """Apply a :class:`Reduction` to a dataset (a new dataset; attributes kept as they are)."""
    names = list(ds.data_vars)
    unknown = [v for v in (*(r.keep or ()), *r.drop) if v not in names]
    if unknown:
        raise KeyError(f"variables {unknown} are not in the result (it has {names}).")
    keep = [v for v in (r.keep if r.keep is not None else names) if v not in r.drop]
    out = ds[keep]
    # coordinates whose dimension no kept variable uses would keep the dimension alive
    used = {d for v in keep for d in ds[v].dims}
    out = out.drop_vars([c for c in out.coords if not set(ds[c].dims) <= used])
    sel = {}
    for dim, idx in r.isel.items():
        if dim in out.dims:
            sel[dim] = list(idx)
    for dim, m in r.thin.items():
        if dim not in out.dims:
            continue
        coord = out[dim].values if dim in out.coords else None
        sel[dim] = thin_indices(out.sizes[dim], m, coord=coord, anchors=r.anchors.get(dim, ()))
    out = out.isel(sel) if sel else out
    for var, where in r.only.items():
        da = out[var]
        where = {d: (w(out) if callable(w) else w) for d, w in where.items()}
        mask = np.zeros(da.shape, dtype=bool)
        index = tuple(
            np.isin(np.arange(da.sizes[d]), list(where[d])) if d in where else slice(None)
            for d in da.dims
        )
        grid = np.ix_(
            *[
                np.arange(da.sizes[d]) if isinstance(i, slice) else np.flatnonzero(i)
                for d, i in zip(da.dims, index, strict=True)
            ]
        )
        mask[grid] = True
        out[var] = da.where(mask)
    out.attrs = dict(ds.attrs)
    return out
