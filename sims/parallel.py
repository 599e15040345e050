"""Run independent jobs (seeds, sizes, configs) on all CPU cores, results in input order.

One place for process-level parallelism: the seed-004 sweeps train many small independent
models, each single-threaded (``TrainConfig.threads = 1``), so running ``os.cpu_count()`` of them
at once is close to a linear speed-up, where a single run cannot use two cores well.

Processes are started with ``spawn`` (never ``fork``: forking a process that has already started
torch or OpenMP threads can deadlock), so ``fn`` must be importable: a module-level function, or
a :func:`functools.partial` of one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

__all__ = ["default_workers", "pmap"]

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


def pmap(
    fn: Callable[[Any], T],
    items: Iterable[Any],
    *,
    workers: int | None = None,
    desc: str | None = None,
) -> list[T]:
    """``[fn(x) for x in items]``, computed in ``workers`` processes.

    Args:
        fn: an importable callable of one argument (see the module docstring).
        items: the arguments; each must be picklable.
        workers: process count; ``None`` uses :func:`default_workers`; ``1`` (or a single item)
            runs in this process, with no pickling, which is what tests and debuggers want.
        desc: a tqdm progress-bar label; ``None`` shows no bar.

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

    bar = tqdm(total=len(items), desc=desc, disable=desc is None, leave=False)
    if workers == 1 or len(items) <= 1:
        out = []
        for x in items:
            out.append(fn(x))
            bar.update()
        bar.close()
        return out
    results: list[Any] = [None] * len(items)
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        futures = {ex.submit(fn, x): i for i, x in enumerate(items)}
        try:
            for fut in as_completed(futures):
                i = futures[fut]
                try:
                    results[i] = fut.result()
                except Exception as e:
                    raise RuntimeError(f"job {i} ({items[i]!r}) failed: {e!r}") from e
                bar.update()
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        finally:
            bar.close()
    return results
