"""Run independent jobs (seeds, sizes, configs) on all CPU cores, results in input order.

One place for process-level parallelism: the seed-004 sweeps train many small independent
models, each single-threaded (``TrainConfig.threads = 1``), so running ``os.cpu_count()`` of them
at once is close to a linear speed-up, where a single run cannot use two cores well.

Processes are started with ``spawn`` (never ``fork``: forking a process that has already started
torch or OpenMP threads can deadlock), so ``fn`` must be importable: a module-level function, or
a :func:`functools.partial` of one.

With a :class:`JobStore`, each finished job's ``xarray.Dataset`` is written (atomically, in the
parent process) as soon as it arrives, and a rerun loads the finished ones instead of computing
them again: a crashed or interrupted sweep loses only the jobs that were running. A part file
that cannot be read back (a disk filled up, a file truncated by hand) is reported, deleted and
its job computed again. Ctrl-C stops the workers at once and raises :class:`SweepInterrupted`,
a ``KeyboardInterrupt`` whose message says how many jobs were saved and how to resume.
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

__all__ = ["JobStore", "SweepInterrupted", "check_workers_env", "default_workers", "pmap"]

T = TypeVar("T")


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`pmap`; the message says what was saved and how to resume."""


def check_workers_env() -> int | None:
    """Validate ``$SBT_WORKERS`` (the process cap): its value, or ``None`` when unset.

    CLIs call this before any work, so a bad value is a one-line usage error, not a traceback
    in the middle of a sweep.

    Raises:
        sims.cli.UsageError: (a ``ValueError``) if ``SBT_WORKERS`` is set but is not a positive
            integer.
    """
    from sims.cli import UsageError

    env = os.environ.get("SBT_WORKERS")
    if env is None:
        return None
    if not env.strip().isdigit() or int(env) < 1:
        raise UsageError(
            f"SBT_WORKERS={env!r} must be a positive integer (e.g. SBT_WORKERS=2), or unset to "
            "use every core."
        )
    return int(env)


def default_workers(n_jobs: int) -> int:
    """``min(n_jobs, $SBT_WORKERS or os.cpu_count())``, at least 1."""
    cap = check_workers_env() or os.cpu_count() or 1
    return max(1, min(n_jobs, cap))


def _ignore_sigint() -> None:  # pool initializer: Ctrl-C is the parent's to handle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
        """The saved result of ``item``, or ``None`` (also for an unreadable file, removed)."""
        import sys

        from sims.io import read_netcdf

        p = self.path(item)
        if not p.exists():
            return None
        try:
            return read_netcdf(p)
        except Exception as exc:  # truncated/corrupt HDF5 raises OSError, ValueError, KeyError...
            print(f"warning: saved job {p.name} of {item!r} is unreadable "
                  f"({type(exc).__name__}); computing it again", file=sys.stderr)  # fmt: skip
            p.unlink(missing_ok=True)
            return None

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

    Raises:
        SweepInterrupted: on Ctrl-C (workers are stopped; saved jobs are kept).
        RuntimeError: a job failed (in the process pool), naming the item.
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

    n_done = [len(items) - len(todo)]

    def interrupted() -> SweepInterrupted:
        saved = (f" and saved in {store.directory}; rerun the same command to resume"
                 if store is not None else " (nothing is saved without a JobStore)")  # fmt: skip
        return SweepInterrupted(f"interrupted: {n_done[0]} of {len(items)} jobs finished{saved}")

    if workers == 1 or len(todo) <= 1:
        try:
            for i in todo:
                finish(i, fn(items[i]))
                n_done[0] += 1
        except KeyboardInterrupt:
            raise interrupted() from None
        finally:
            bar.close()
        return results
    ex = ProcessPoolExecutor(
        max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_ignore_sigint
    )
    futures = {ex.submit(fn, items[i]): i for i in todo}
    try:
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                r = fut.result()
            except Exception as e:
                raise RuntimeError(f"job {i} ({items[i]!r}) failed: {e!r}") from e
            finish(i, r)
            n_done[0] += 1
    except KeyboardInterrupt:
        _stop(ex)
        raise interrupted() from None
    except BaseException:
        _stop(ex)
        raise
    finally:
        bar.close()
    ex.shutdown()
    return results


def _stop(ex: ProcessPoolExecutor) -> None:
    """Cancel pending jobs and terminate the running workers (they would finish their job)."""
    procs = list(getattr(ex, "_processes", {}).values())  # no public API to terminate workers
    ex.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
