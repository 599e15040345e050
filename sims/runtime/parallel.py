"""Run independent jobs (seeds, sizes, configs) in parallel, results in input order.

One place for sweep parallelism: the seed-004 sweeps train many small independent models, each
single-threaded (``TrainConfig.threads = 1``), so running one per core is close to a linear
speed-up, where a single run cannot use two cores well.

**Where the jobs run** (:mod:`sims.runtime.executors`): a ``spawn`` process pool on this machine by
default; ``SBT_EXECUTOR`` (or a CLI's ``--executor``, or ``pmap(executor=...)``) picks Dask
(``dask-local[:N]``, ``dask://HOST:PORT``), SLURM (``slurm``) or any
:class:`concurrent.futures.Executor`. Processes are started with ``spawn`` (never ``fork``:
forking a process that has already started torch or OpenMP threads can deadlock), and other
machines import the job by name, so ``fn`` must be importable: a module-level function, or a
:func:`functools.partial` of one. A :func:`pmap` inside a job runs in that job's process.

With a :class:`JobStore`, each finished job's ``xarray.Dataset`` is written (atomically, in the
parent process, whatever the executor) as soon as it arrives, and a rerun loads the finished
ones instead of computing them again: a crashed or interrupted sweep, a killed worker or a lost
node loses only the jobs that were running. A part file that cannot be read back (a disk filled
up, a file truncated by hand) is reported, deleted and its job computed again. Ctrl-C stops the
running jobs (the local pool's or ``dask-local``'s workers are terminated, SLURM jobs cancelled;
on a shared Dask cluster the running tasks finish and are dropped) and raises
:class:`SweepInterrupted`, a ``KeyboardInterrupt`` whose message says how many jobs were saved
and how to resume.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextvars
import functools
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from .executors import (
    ENV,
    ExecutorSpec,
    SourceMismatch,
    check_executor,
    check_executor_env,
    check_workers_env,
    chosen_executor,
    lease,
    parse_executor,
    source_fingerprint,
    use_executor,
)

__all__ = [
    "JobStore",
    "SweepInterrupted",
    "add_executor_argument",
    "check_executor_env",
    "check_workers_env",
    "default_workers",
    "executor_notice",
    "pmap",
    "use_executor",
]

T = TypeVar("T")


#: How many sweeps of this process handed jobs to an executor (``[n]``): a CLI whose
#: ``--executor`` had no effect (the run needed no sweep) says so (:func:`executor_notice`).
DISPATCHED = [0]


def executor_notice(args, before: int, what: str) -> str | None:
    """The notice for an ``--executor`` that no sweep used since ``DISPATCHED[0]`` was ``before``.

    Args:
        args: the parsed command line (``args.executor``: the spec given, or ``None``).
        before: ``DISPATCHED[0]`` when the run started.
        what: the run, for the message (``"figure sosd_toy"``).
    """
    spec = getattr(args, "executor", None)
    if spec is None or DISPATCHED[0] != before:
        return None
    return (f"note: --executor {spec} had no effect: {what} ran in this process (it has no "
            "sweep of independent jobs, or every job was saved already)")  # fmt: skip


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`pmap`; the message says what was saved and how to resume."""


def default_workers(n_jobs: int) -> int:
    """``min(n_jobs, $SBT_WORKERS or os.cpu_count())``, at least 1."""
    cap = check_workers_env() or os.cpu_count() or 1
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
        """The saved result of ``item``, or ``None`` (also for an unreadable file, removed)."""
        import sys

        from sims.runtime.io import read_netcdf

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

        from sims.runtime.io import write_netcdf

        if not isinstance(result, xr.Dataset):
            raise TypeError(
                f"a JobStore keeps xarray.Dataset results; job {item!r} returned "
                f"{type(result).__name__}. Return a Dataset, or call pmap without `store`."
            )
        write_netcdf(self.path(item), result)

    def clear(self) -> None:
        """Delete every saved job."""
        shutil.rmtree(self.directory, ignore_errors=True)


_FROM_ENV = "$SBT_EXECUTOR, else processes"  # the flag's default: checked when the flag is absent


def _executor_arg(value: str) -> ExecutorSpec | None:
    import argparse

    from sims.runtime.extras import MissingExtraError

    try:
        if value == _FROM_ENV:  # no flag: this parse decides, from the environment
            use_executor(None)
            return check_executor_env() if os.environ.get(ENV) else None
        return check_executor(parse_executor(value))
    except (ValueError, MissingExtraError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _UseExecutor(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None) -> None:
        use_executor(values)  # for every pmap of this process (the CLI's run)
        setattr(namespace, self.dest, values)


def add_executor_argument(parser) -> None:
    """Add ``--executor SPEC`` to a CLI's ``parser`` (or argument group).

    The flag makes every :func:`pmap` of the process use that executor; without it,
    ``$SBT_EXECUTOR`` is checked at parse time. A bad value (or a missing ``cluster`` extra) is
    a usage error: one line, exit status 2, before any work. ``args.executor`` holds the parsed
    :class:`~sims.runtime.executors.ExecutorSpec` (``None``: the default, ``processes``).
    """
    parser.add_argument(
        "--executor", metavar="SPEC", type=_executor_arg, action=_UseExecutor, default=_FROM_ENV,
        help="where the sweep's jobs run: processes (a local pool), dask-local[:N] (a local Dask "
        "cluster of N processes), dask://HOST:PORT (a running Dask scheduler) or slurm (jobs "
        "via submitit, resources from $SBT_SLURM_*); default: %(default)s. Finished jobs are "
        "saved, so a rerun resumes on any executor",
    )  # fmt: skip


def _run_job(fn: Callable[[Any], T], item: Any, source: tuple[str, str] | None = None) -> T:
    """One job on a worker: a :func:`pmap` inside it runs in this process, not on the engine.

    ``source``: the submitter's :func:`~sims.runtime.executors.source_fingerprint`, checked first on
    a worker of another machine or environment (Dask, SLURM), so a worker importing another
    version of the package fails the sweep with both named instead of computing other numbers.
    """
    if source is not None:
        from .executors import check_source

        check_source(source, f"the worker of job {item!r} (pid {os.getpid()})")
    token = _IN_JOB.set(True)
    try:
        return fn(item)
    finally:
        _IN_JOB.reset(token)


_IN_JOB: contextvars.ContextVar[bool] = contextvars.ContextVar("sbt_in_job", default=False)


def pmap(
    fn: Callable[[Any], T],
    items: Iterable[Any],
    *,
    workers: int | None = None,
    desc: str | None = None,
    store: JobStore | None = None,
    executor: str | cf.Executor | None = None,
) -> list[T]:
    """``[fn(x) for x in items]``, computed in parallel by ``executor``.

    Args:
        fn: an importable callable of one argument (see the module docstring).
        items: the arguments; each must be picklable.
        workers: size of the ``processes`` pool; ``None`` uses :func:`default_workers`; ``1``
            (or a single job) runs in this process, with no pickling, which is what tests and
            debuggers want. Other executors have their own size (``dask-local:N``, the Dask
            cluster's workers, the SLURM queue) and get every job.
        desc: a tqdm progress-bar label; ``None`` shows no bar.
        store: where finished jobs are saved and, on a rerun, loaded from (module docstring).
        executor: a spec (``"processes"``, ``"dask-local:2"``, ``"dask://HOST:PORT"``,
            ``"slurm"``), a :class:`concurrent.futures.Executor` or a ``distributed.Client``
            (not shut down here); ``None``: a CLI's ``--executor``, else ``$SBT_EXECUTOR``,
            else ``"processes"`` (:mod:`sims.runtime.executors`).

    Returns:
        The results, in the order of ``items``. The first job to raise cancels the jobs not yet
        started and the exception is re-raised here, naming the item.

    Raises:
        SweepInterrupted: on Ctrl-C (running jobs are stopped; saved jobs are kept).
        RuntimeError: a job failed on the executor, naming the item.
        ValueError, TypeError: a bad ``workers`` or ``executor`` (before any job runs).
    """
    items = list(items)
    engine = chosen_executor(executor)
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
    n_done = [len(items) - len(todo)]

    def finish(i: int, r: Any) -> None:
        if store is not None:
            store.save(items[i], r)
        results[i] = r
        n_done[0] += 1
        bar.update()

    def interrupted() -> SweepInterrupted:
        saved = (f" and saved in {store.directory}; rerun the same command to resume"
                 if store is not None else " (nothing is saved without a JobStore)")  # fmt: skip
        return SweepInterrupted(f"interrupted: {n_done[0]} of {len(items)} jobs finished{saved}")

    local = isinstance(engine, ExecutorSpec) and engine.kind == "processes"
    if not todo or _IN_JOB.get() or (local and (workers == 1 or len(todo) <= 1)):
        try:
            for i in todo:
                finish(i, fn(items[i]))
        except KeyboardInterrupt:
            raise interrupted() from None
        finally:
            bar.close()
        return results
    ls = lease(engine, workers=workers)
    DISPATCHED[0] += 1
    source = None if local else source_fingerprint()  # the local pool runs this very source
    try:
        futures = ls.submit_all(functools.partial(_run_job, fn, source=source),
                                [items[i] for i in todo])  # fmt: skip
        index = dict(zip(futures, todo, strict=True))
        for fut in cf.as_completed(index):
            i = index[fut]
            try:
                r = fut.result()
            except SourceMismatch:
                raise  # a usage error (one line from a CLI), not a failed job
            except Exception as e:
                raise RuntimeError(f"job {i} ({items[i]!r}) failed: {e!r}{_hint(e)}") from e
            finish(i, r)
    except KeyboardInterrupt:
        ls.abort()
        raise interrupted() from None
    except BaseException:
        ls.abort()
        raise
    finally:
        bar.close()
    ls.close()
    return results


def _hint(exc: Exception) -> str:
    """What to do about an error that comes from the engine rather than the job."""
    from concurrent.futures.process import BrokenProcessPool

    if isinstance(exc, BrokenProcessPool):
        return ("; a worker process died (killed, or out of memory): finished jobs are kept with "
                "a JobStore, rerun to resume; dask-local restarts dead workers")  # fmt: skip
    if isinstance(exc, ModuleNotFoundError):
        return ("; every worker must import this project and its extras (README: 'Run the "
                "sweeps on a cluster')")  # fmt: skip
    return ""
