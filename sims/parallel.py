"""Run independent jobs (seeds, sizes, configs) on all CPU cores, results in input order.

One place for process-level parallelism: the seed-004 sweeps train many small independent
models, each single-threaded (``TrainConfig.threads = 1``), so running ``os.cpu_count()`` of them
at once is close to a linear speed-up, where a single run cannot use two cores well.

Processes are started with ``spawn`` (never ``fork``: forking a process that has already started
torch or OpenMP threads can deadlock), so ``fn`` must be importable: a module-level function, or
a :func:`functools.partial` of one.

With a :class:`JobStore`, each finished job's ``xarray.Dataset`` is written (atomically, in the
parent process) as soon as it arrives, and a rerun loads the finished ones instead of computing
them again: a crashed or interrupted sweep loses only the jobs that were running.
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["JobStore", "default_workers", "pmap"]

T = TypeVar("T")


def default_workers(n_jobs: int) -> int:
    """``min(n_jobs, $SBT_WORKERS or os.cpu_count())``, at least 1."""
    env = os.environ.get("SBT_WORKERS")
    if env is not None:
        if not env.isdigit() or int(env) < 1:
            raise ValueError(f"SBT_WORKERS={env!r} must be a positive integer (e.g. 2).")
        cap = int(env)
    else:
        cap = os.cpu_count() or 1
    return max(1, min(n_jobs, cap))


class JobStore:
    """One NetCDF file per finished job under ``directory``, keyed by the job's ``repr``.

    The key is a hash of ``repr(item)``, so a job whose arguments change is recomputed; a change
    of code is not detected (as for every saved result): :meth:`clear` before recomputing.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def path(self, item: Any) -> Path:
        """File of ``item``'s result."""
        key = hashlib.sha256(repr(item).encode()).hexdigest()[:20]
        return self.directory / f"job-{key}.nc"

    def load(self, item: Any):
        """The saved result of ``item``, or ``None``."""
        from sims.io import read_netcdf

        p = self.path(item)
        return read_netcdf(p) if p.exists() else None

    def save(self, item: Any, result: Any) -> None:
        """Write ``result`` (an ``xarray.Dataset``) atomically."""
        import xarray as xr

        from sims.io import write_netcdf

        if not isinstance(result, xr.Dataset):
            raise TypeError(
                f"a JobStore keeps xarray.Dataset results; job {item!r} returned "
                f"{type(result).__name__}. Return a Dataset, or call pmap without `store`."
            )
        write_netcdf(self.path(item), result)

    def clear(self) -> None:
        """Delete every saved job."""
        shutil.rmtree(self.directory, ignore_errors=True)


def pmap(
    fn: Callable[[Any], T],
    items: Iterable[Any],
    *,
    workers: int | None = None,
    desc: str | None = None,
    store: JobStore | None = None,
) -> list[T]:
    """``[fn(x) for x in items]``, computed in ``workers`` processes.

    Args:
        fn: an importable callable of one argument (see the module docstring).
        items: the arguments; each must be picklable.
        workers: process count; ``None`` uses :func:`default_workers`; ``1`` (or a single item)
            runs in this process, with no pickling, which is what tests and debuggers want.
        desc: a tqdm progress-bar label; ``None`` shows no bar.
        store: where finished jobs are saved and, on a rerun, loaded from (module docstring).

    Returns:
        The results, in the order of ``items``. The first job to raise cancels the jobs not yet
        started and the exception is re-raised here, naming the item.
    """
    items = list(items)
    if workers is None:
        workers = default_workers(len(items))
    if not (isinstance(workers, int) and workers >= 1):
        raise ValueError(f"`workers` must be a positive int or None; got {workers!r}.")
    from tqdm.auto import tqdm

    results: list[Any] = [None] * len(items)
    todo = []
    for i, x in enumerate(items):
        done = store.load(x) if store is not None else None
        if done is None:
            todo.append(i)
        else:
            results[i] = done
    bar = tqdm(total=len(items), initial=len(items) - len(todo), desc=desc,
               disable=desc is None, leave=False)  # fmt: skip

    def finish(i: int, r: Any) -> None:
        if store is not None:
            store.save(items[i], r)
        results[i] = r
        bar.update()

    if workers == 1 or len(todo) <= 1:
        try:
            for i in todo:
                finish(i, fn(items[i]))
        finally:
            bar.close()
        return results
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        futures = {ex.submit(fn, items[i]): i for i in todo}
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    r = fut.result()
                except Exception as e:
                    raise RuntimeError(f"job {i} ({items[i]!r}) failed: {e!r}") from e
                finish(i, r)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        finally:
            bar.close()
    return results
