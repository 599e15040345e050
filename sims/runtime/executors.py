"""Where the jobs of a sweep run: a local process pool, Dask (local or a running cluster), SLURM.

:func:`sims.runtime.parallel.pmap` hands its jobs to one of these engines, chosen by (first match):
its ``executor=`` argument, a CLI's ``--executor`` (:func:`use_executor`), ``$SBT_EXECUTOR``,
else ``processes``. The specs:

``processes``
    A ``spawn`` process pool on this machine (``$SBT_WORKERS`` caps its size); the default.
``dask-local[:N]``
    A :class:`distributed.LocalCluster` of ``N`` single-threaded worker processes (default:
    ``$SBT_WORKERS``, else every core), started at the first sweep and kept for the others of
    the same run. A worker that dies (killed, out of memory) is restarted and its job run again.
``dask://HOST:PORT``
    A running Dask scheduler (``dask scheduler`` / ``dask worker HOST:PORT --nthreads 1``).
``slurm``
    One SLURM job per sweep job (a job array) through ``submitit``: partition, time limit and
    resources from ``$SBT_SLURM_*`` or a TOML file (:class:`SlurmSettings`).
An object
    Any :class:`concurrent.futures.Executor` (or a :class:`distributed.Client`), passed in code.

**What the workers need.** Jobs are module-level functions of this project, pickled by
reference, so every worker must import the same version of the project and the extras its jobs
use: ``dask-local`` and the local pool start their workers from this interpreter (same
``sys.path``, environment and working folder); on other machines install the project the same
way on each (``pip install -e ".[cluster,torch]"`` from a shared checkout, or the same release
in the same environment) and start the workers from that environment. ``slurm`` jobs run
``sys.executable`` of the submitting process, so the environment must live on a file system the
nodes share (or be activated by ``SBT_SLURM_SETUP``). Results come back to the submitting
process, which writes them (:class:`sims.runtime.parallel.JobStore`); workers need no shared folder
for the results (SLURM's job files go to ``SBT_SLURM_FOLDER``, which the nodes must see).

**Checked before any work** (:func:`check_executor`, at a CLI's parsing): ``slurm`` needs
SLURM's commands on ``PATH`` (or ``SBT_SLURM_CLUSTER=local``); ``dask://HOST:PORT`` must answer
and have a worker within :data:`DASK_TIMEOUT` seconds each, and every worker must import the
same package source as the submitter (:func:`source_fingerprint`, a hash of the ``.py`` files;
also shipped with each job and checked on the worker, for workers that join later). A mismatch
is a :class:`SourceMismatch` naming both hashes and folders. Every result file records the
executor (:func:`executor_in_use`, ``executor`` in :func:`sims.runtime.io.provenance`).

Examples:
    >>> parse_executor("dask-local:2")
    ExecutorSpec(kind='dask-local', n_workers=2, address=None)
    >>> str(parse_executor("dask://scheduler:8786"))
    'dask://scheduler:8786'
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import contextlib
import dataclasses
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .errors import UsageError

__all__ = [
    "ENV",
    "ExecutorSpec",
    "SlurmSettings",
    "SubmititExecutor",
    "check_executor",
    "check_executor_env",
    "check_executor_setting",
    "check_source",
    "check_workers_env",
    "chosen_executor",
    "close_clusters",
    "executor_in_use",
    "parse_executor",
    "slurm_settings",
    "source_fingerprint",
    "use_executor",
]

ENV = "SBT_EXECUTOR"
SPECS = "processes, dask-local[:N], dask://HOST:PORT or slurm"


@dataclasses.dataclass(frozen=True)
class ExecutorSpec:
    """A parsed executor spec (:func:`parse_executor`); ``str()`` gives the spec back."""

    kind: str  # "processes" | "dask-local" | "dask" | "slurm"
    n_workers: int | None = None  # dask-local:N
    address: str | None = None  # dask://HOST:PORT -> "HOST:PORT"

    def __str__(self) -> str:
        if self.kind == "dask":
            return f"dask://{self.address}"
        return self.kind + (f":{self.n_workers}" if self.n_workers is not None else "")


_SPEC = re.compile(
    r"^(?:(?P<kind>processes|slurm)|dask-local(?::(?P<n>\d+))?"
    r"|dask://(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5}))$"
)


def parse_executor(value: str, *, source: str | None = None) -> ExecutorSpec:
    """Parse an executor spec (``processes``, ``dask-local[:N]``, ``dask://HOST:PORT``, ``slurm``).

    Syntax only: nothing is imported or contacted (see :func:`check_executor`).

    Args:
        value: the spec.
        source: where it came from, for the message (``"SBT_EXECUTOR"``); ``None``: not named.

    Raises:
        sims.runtime.errors.UsageError: (a ``ValueError``) naming the value and the valid specs.
    """
    where = f"{source}={value!r}" if source else repr(value)
    m = _SPEC.match(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise UsageError(f"{where} is not an executor; use {SPECS} (e.g. {ENV}=dask-local:2)")
    if m["kind"]:
        return ExecutorSpec(m["kind"])
    if m["host"]:
        if not 0 < int(m["port"]) < 65536:
            raise UsageError(f"{where}: port {m['port']} is not in 1-65535 (Dask's is 8786)")
        return ExecutorSpec("dask", address=f"{m['host']}:{int(m['port'])}")
    if m["n"] is not None and int(m["n"]) < 1:
        raise UsageError(f"{where}: N must be a positive number of workers, e.g. dask-local:2")
    return ExecutorSpec("dask-local", n_workers=None if m["n"] is None else int(m["n"]))


def check_executor(
    spec: ExecutorSpec, *, env: Mapping[str, str] | None = None, connect: bool = True
) -> ExecutorSpec:
    """Check that ``spec`` can run here, before any work.

    Its extra is installed; for ``slurm``, the settings are valid and SLURM's commands are on
    ``PATH`` (unless ``SBT_SLURM_CLUSTER=local``); for ``dask://HOST:PORT`` (when
    ``connect``), the scheduler answers and has at least one worker within
    :data:`DASK_TIMEOUT` seconds each, and every worker imports the same package source as this
    process (:func:`source_fingerprint`). The client is kept for the sweeps of the process.

    Raises:
        sims.runtime.extras.MissingExtraError: the ``cluster`` extra is missing (its message says
            how to install it).
        sims.runtime.errors.UsageError: a bad ``SBT_SLURM_*`` variable or config file, SLURM's
            commands missing; a Dask scheduler unreachable, without workers, or with workers of
            another package version (both named).
    """
    from .extras import require

    if spec.kind in ("dask-local", "dask"):
        require("cluster", "dask", "distributed", what=f"executor {spec}")
        if spec.kind == "dask" and connect:
            _dask_client(spec)  # reachable, >= 1 worker, the same package source: or UsageError
    elif spec.kind == "slurm":
        require("cluster", "submitit", what="executor slurm")
        settings = slurm_settings(os.environ if env is None else env)
        if settings.cluster == "slurm":
            _check_slurm_commands()
    return spec


#: The SLURM commands submitit runs (submit, launch, poll, cancel).
SLURM_COMMANDS = ("sbatch", "srun", "sacct", "scancel")


def _check_slurm_commands() -> None:
    """Refuse ``slurm`` where SLURM's commands are not on ``PATH`` (before any job is written)."""
    import shutil

    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        raise UsageError(
            f"executor slurm: SLURM's {', '.join(missing)} not found on PATH (this is not a "
            "SLURM node); run on a login node of the cluster, or set SBT_SLURM_CLUSTER=local to "
            "run the same jobs as local processes"
        )


#: Seconds to reach a ``dask://`` scheduler, and then again to see its first worker.
DASK_TIMEOUT = 10.0
#: The packages whose source the workers must share with the submitter.
PROJECT_PACKAGES = ("sims", "theory", "llm_validation", "figures")


def source_fingerprint() -> tuple[str, str]:
    """``(hash, folder)`` of the project's Python source as this process imports it.

    A SHA-256 over the relative path and bytes of every ``.py`` file of
    :data:`PROJECT_PACKAGES` (as found on ``sys.path``, nothing imported), first 16 hex digits;
    ``folder`` is where ``sims`` was found. Shipped with each job to Dask workers, which compare
    it with their own (a worker importing another copy of the package would compute other
    results silently).
    """
    import hashlib
    import importlib.util

    global _FINGERPRINT
    if _FINGERPRINT is not None:
        return _FINGERPRINT
    h = hashlib.sha256()
    folder = "?"
    for name in PROJECT_PACKAGES:
        spec = importlib.util.find_spec(name)
        roots = list(spec.submodule_search_locations or []) if spec else []
        if not roots:
            h.update(f"{name}: missing\n".encode())
            continue
        root = Path(roots[0])
        if name == "sims":
            folder = str(root.parent)
        for f in sorted(root.rglob("*.py")):
            if "__pycache__" in f.parts:
                continue
            h.update(f"{name}/{f.relative_to(root).as_posix()}\n".encode())
            h.update(f.read_bytes())
    _FINGERPRINT = (h.hexdigest()[:16], folder)
    return _FINGERPRINT


_FINGERPRINT: tuple[str, str] | None = None


class SourceMismatch(UsageError):
    """A worker imports another version of the project than the submitting process."""


def check_source(expected: tuple[str, str], where: str = "this worker") -> None:
    """Raise :class:`SourceMismatch` unless this process's source is ``expected``'s.

    Args:
        expected: the submitter's :func:`source_fingerprint`.
        where: the worker, for the message.
    """
    mine = source_fingerprint()
    if mine[0] != expected[0]:
        raise SourceMismatch(
            f"{where} imports another version of the package (source {mine[0]} in {mine[1]}) "
            f"than the submitting process (source {expected[0]} in {expected[1]}); start the "
            "workers from the same checkout and environment (README: 'Run the sweeps on a "
            "cluster')"
        )


# --------------------------------------------------------------------------- the chosen executor
_chosen: ExecutorSpec | cf.Executor | None = None


def use_executor(executor: str | ExecutorSpec | cf.Executor | None) -> None:
    """Make ``executor`` this process's default for :func:`.parallel.pmap` (``None``: unset).

    A CLI's ``--executor`` calls this; it wins over ``$SBT_EXECUTOR``.
    """
    global _chosen
    if isinstance(executor, str):
        executor = check_executor(parse_executor(executor, source="executor"))
    _chosen = executor


def chosen_executor(executor=None, *, env: Mapping[str, str] | None = None):
    """The executor a sweep uses: ``executor``, else :func:`use_executor`'s, else the env's.

    Returns an :class:`ExecutorSpec` (checked) or the executor object given.
    """
    env = os.environ if env is None else env
    if executor is None:
        executor = _chosen
    if executor is None:
        executor = env.get(ENV) or "processes"
        return check_executor(parse_executor(executor, source=ENV), env=env)
    if isinstance(executor, str):
        return check_executor(parse_executor(executor, source="executor"), env=env)
    if isinstance(executor, ExecutorSpec) or hasattr(executor, "submit"):
        return executor
    raise TypeError(
        f"`executor` must be a spec string ({SPECS}), a concurrent.futures.Executor or a "
        f"distributed.Client; got {type(executor).__name__}."
    )


def check_workers_env() -> int | None:
    """Validate ``$SBT_WORKERS`` (the process cap): its value, or ``None`` when unset.

    Registered in :mod:`sims.runtime.errors`, so every CLI checks it before any work: a bad value is
    a one-line usage error, not a traceback in the middle of a sweep.

    Raises:
        sims.runtime.errors.UsageError: (a ``ValueError``) if ``SBT_WORKERS`` is set but is not a
            positive integer.
    """
    env = os.environ.get("SBT_WORKERS")
    if env is None:
        return None
    if not env.strip().isdigit() or int(env) < 1:
        raise UsageError(
            f"SBT_WORKERS={env!r} must be a positive integer (e.g. SBT_WORKERS=2), or unset to "
            "use every core."
        )
    return int(env)


def check_executor_setting() -> ExecutorSpec:
    """``$SBT_EXECUTOR`` checked as every CLI checks it (registered in :mod:`sims.runtime.errors`).

    Its spec, extra, SLURM settings and commands; a ``dask://`` scheduler is not contacted
    here: a CLI that runs sweeps does so at its parsing (:func:`check_executor_env`, through
    ``--executor``), so a command without sweeps (``theory --list``) does not wait on it.
    """
    value = os.environ.get(ENV) or "processes"
    return check_executor(parse_executor(value, source=ENV), connect=False)


def check_executor_env() -> ExecutorSpec:
    """Validate ``$SBT_EXECUTOR`` (and ``$SBT_SLURM_*`` for ``slurm``): the parsed spec.

    Checked before any work by every CLI that runs sweeps (``--executor``'s default);
    unset means ``processes``. A ``dask://`` scheduler is contacted (:func:`check_executor`).

    Raises:
        sims.runtime.errors.UsageError: (a ``ValueError``) a value that is not an executor spec, or
            a bad SLURM setting.
        sims.runtime.extras.MissingExtraError: the ``cluster`` extra that the executor needs is
            missing.
    """
    return chosen_executor()


def executor_in_use() -> str:
    """The executor this process's sweeps use, as its spec (``dask://HOST:PORT``), for provenance.

    Never raises: an invalid ``$SBT_EXECUTOR`` (refused by every CLI before any work) is given
    as typed, an executor object by its type.
    """
    chosen = _chosen if _chosen is not None else (os.environ.get(ENV) or "processes")
    if isinstance(chosen, str):
        try:
            return str(parse_executor(chosen))
        except ValueError:
            return chosen
    if isinstance(chosen, ExecutorSpec):
        return str(chosen)
    address = getattr(getattr(chosen, "scheduler", None), "address", None)
    return f"{type(chosen).__name__}" + (f" ({address})" if address else "")


# ------------------------------------------------------------------------------------ SLURM
_SLURM_VARS = {  # setting -> (type, help)
    "partition": (str, "partition (queue) name"),
    "time": ("minutes", "time limit per job: minutes, or [D-]HH:MM[:SS]"),
    "cpus": (int, "CPUs per job (cpus_per_task)"),
    "mem_gb": (float, "memory per job in GB"),
    "gpus": (int, "GPUs per job (gpus_per_node)"),
    "account": (str, "account to charge"),
    "qos": (str, "quality of service"),
    "array_parallelism": (int, "most jobs of the array running at once"),
    "setup": ("lines", "shell lines run before each job, e.g. 'source ~/venv/bin/activate'"),
    "folder": (str, "folder for the job scripts, logs and pickles (shared with the nodes)"),
    "cluster": ("cluster", "'slurm', or 'local' to run the same jobs as local processes"),
}


@dataclasses.dataclass(frozen=True)
class SlurmSettings:
    """Resources of the SLURM jobs of a sweep, from ``SBT_SLURM_<NAME>`` or a TOML file.

    ``$SBT_SLURM_CONFIG`` names a TOML file of the same settings in lower case
    (``partition = "cpu"``, ``time = 120``, ``setup = ["module load python"]``); a variable
    wins over the file. ``cluster = "local"`` runs each job as a local process instead (to try a
    setup, or in tests), with the same job files.
    """

    partition: str | None = None
    time: int = 60
    cpus: int = 1
    mem_gb: float | None = None
    gpus: int = 0
    account: str | None = None
    qos: str | None = None
    array_parallelism: int | None = None
    setup: tuple[str, ...] = ()
    folder: str = "results/slurm"
    cluster: str = "slurm"

    def parameters(self) -> dict[str, Any]:
        """Keyword arguments of ``submitit.AutoExecutor.update_parameters``."""
        p: dict[str, Any] = {
            "timeout_min": self.time,
            "cpus_per_task": self.cpus,
            "gpus_per_node": self.gpus,
            "slurm_partition": self.partition,
            "slurm_account": self.account,
            "slurm_qos": self.qos,
            "slurm_array_parallelism": self.array_parallelism,
            "mem_gb": self.mem_gb,
            "name": "sbtheory",
        }
        # A job gets as many BLAS/OpenMP/torch threads as it has CPUs (as Dask's workers, which
        # start with one): more would oversubscribe the node, and float32 reductions depend on
        # the thread count, so the same sweep on another engine would give other last digits.
        n = self.cpus
        threads = f"export OMP_NUM_THREADS={n} MKL_NUM_THREADS={n} OPENBLAS_NUM_THREADS={n}"
        p[f"{self.cluster}_setup"] = [threads, *self.setup]
        return {k: v for k, v in p.items() if v is not None}


def _minutes(text: str) -> int:
    t = text.strip()
    if t.isdigit() and int(t) > 0:
        return int(t)
    m = re.fullmatch(r"(?:(\d+)-)?(\d+):(\d{2})(?::(\d{2}))?", t)
    if m is None:
        raise ValueError
    days, h, mi, s = (int(g or 0) for g in m.groups())
    total = days * 1440 + h * 60 + mi + (1 if s else 0)
    if total < 1:
        raise ValueError
    return total


def _convert(name: str, value: Any, where: str) -> Any:
    kind, what = _SLURM_VARS[name]
    try:
        if kind == "minutes":
            return _minutes(str(value))
        if kind == "lines":
            lines = [value] if isinstance(value, str) else list(value)
            if not all(isinstance(x, str) for x in lines):
                raise ValueError
            return tuple(x for x in lines if x.strip())
        if kind == "cluster":
            if value not in ("slurm", "local"):
                raise ValueError
            return value
        if kind is int:
            v = int(str(value).strip())
            if v < 0 or (v == 0 and name != "gpus"):
                raise ValueError
            return v
        if kind is float:
            v = float(str(value).strip())
            if not v > 0:
                raise ValueError
            return v
        if not isinstance(value, str) or not value.strip():
            raise ValueError
        return value.strip()
    except ValueError:
        pass
    eg = {"minutes": "60 or 02:00:00", "lines": "'source ~/venv/bin/activate'",
          "cluster": "slurm or local", int: "a positive integer", float: "a positive number",
          str: "a name"}[kind]  # fmt: skip
    raise UsageError(f"{where}={value!r} is not valid for the {what}; use {eg}")


def slurm_settings(env: Mapping[str, str] | None = None) -> SlurmSettings:
    """The :class:`SlurmSettings` from ``$SBT_SLURM_CONFIG`` (a TOML file) and ``$SBT_SLURM_*``.

    Raises:
        sims.runtime.errors.UsageError: an unknown or invalid variable or key, an unreadable file.
    """
    import tomllib

    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    cfg = env.get("SBT_SLURM_CONFIG")
    if cfg:
        try:
            data = tomllib.loads(Path(cfg).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UsageError(f"SBT_SLURM_CONFIG={cfg!r} cannot be read as TOML: {exc}") from None
        data = data.get("slurm", data)  # a [slurm] table, or top-level keys
        for k, v in data.items():
            if k not in _SLURM_VARS:
                raise UsageError(
                    f"SBT_SLURM_CONFIG={cfg!r}: unknown setting {k!r}; known: "
                    f"{', '.join(_SLURM_VARS)}"
                )
            values[k] = _convert(k, v, f"{k} in {cfg}")
    for var, v in env.items():
        if not var.startswith("SBT_SLURM_") or var == "SBT_SLURM_CONFIG":
            continue
        k = var.removeprefix("SBT_SLURM_").lower()
        if k not in _SLURM_VARS:
            known = ", ".join(f"SBT_SLURM_{n.upper()}" for n in (*_SLURM_VARS, "config"))
            raise UsageError(f"{var} is not a setting; known: {known}")
        values[k] = _convert(k, v, var)
    return SlurmSettings(**values)


class SubmititExecutor(cf.Executor):
    """A :class:`concurrent.futures.Executor` over ``submitit`` (SLURM, or local processes).

    Each :meth:`submit` is one job (:meth:`map_submit`: one job array); a thread polls the
    queue every ``poll`` seconds and completes the futures. A job that ended without a result
    and without an error of its own (its node failed, it was preempted or killed) is submitted
    again, at most ``retries`` times; then its future raises the scheduler's error.
    """

    def __init__(self, settings: SlurmSettings | None = None, *, poll: float = 1.0,
                 retries: int = 2) -> None:  # fmt: skip
        import submitit

        self.settings = settings or slurm_settings()
        folder = Path(self.settings.folder)
        self._ex = submitit.AutoExecutor(folder=folder, cluster=self.settings.cluster)
        self._ex.update_parameters(**self.settings.parameters())
        self._poll, self._retries = poll, retries
        self._pending: dict[Any, tuple[cf.Future, Callable, tuple, int]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        """Submit ``fn(*args, **kwargs)`` as one job."""
        return self._add([self._ex.submit(fn, *args, **kwargs)], fn, [(args, kwargs)])[0]

    def map_submit(self, fn, items) -> list[cf.Future]:
        """``[submit(fn, x) for x in items]`` as one job array (one ``sbatch`` call)."""
        items = list(items)
        with self._ex.batch():
            jobs = [self._ex.submit(fn, x) for x in items]
        return self._add(jobs, fn, [((x,), {}) for x in items])

    def _add(self, jobs, fn, calls) -> list[cf.Future]:
        futures = []
        with self._lock:
            for job, call in zip(jobs, calls, strict=True):
                fut: cf.Future = cf.Future()
                fut.set_running_or_notify_cancel()
                self._pending[job] = (fut, fn, call, 0)
                futures.append(fut)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="submitit-poll")  # fmt: skip
                self._thread.start()
        return futures

    def _watch(self) -> None:
        from submitit.core.utils import FailedJobError, UncompletedJobError

        while not self._stop.wait(self._poll):
            with self._lock:
                pending = list(self._pending.items())
            for job, (fut, fn, (args, kwargs), tries) in pending:
                try:
                    if not job.done():
                        continue
                    result = job.result()
                except FailedJobError as exc:  # the job's own error, with its traceback
                    self._settle(job, fut, exc=_job_error(job, exc))
                except UncompletedJobError as exc:  # killed, node failure, preempted: no result
                    with self._lock:
                        if tries < self._retries and not self._stop.is_set():
                            self._pending.pop(job, None)
                            again = self._ex.submit(fn, *args, **kwargs)
                            self._pending[again] = (fut, fn, (args, kwargs), tries + 1)
                            continue
                    self._settle(job, fut, exc=exc)
                except Exception as exc:  # noqa: BLE001 - e.g. sacct failing: the sweep fails
                    self._settle(job, fut, exc=exc)
                else:
                    self._settle(job, fut, result=result)

    def _settle(self, job, fut: cf.Future, *, result: Any = None, exc: Exception | None = None):
        with self._lock:
            self._pending.pop(job, None)
        if exc is None:
            fut.set_result(result)
        else:
            fut.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop polling; ``cancel_futures``: cancel (``scancel``) the jobs not finished."""
        if cancel_futures:
            self._stop.set()
            with self._lock:
                pending, self._pending = list(self._pending.items()), {}
            for job, (fut, *_) in pending:
                job.cancel(check=False)
                fut.cancel() or fut.set_exception(cf.CancelledError())
        elif wait:
            while self._pending and self._thread is not None and self._thread.is_alive():
                time.sleep(self._poll)
        self._stop.set()


def _job_error(job, exc: Exception) -> Exception:
    """A job's error in one line (its last traceback line) and where its log is."""
    from submitit.core.utils import FailedJobError

    if not isinstance(exc, FailedJobError):
        return exc
    trace = str(exc).split("\n\n")[0]  # the traceback, before submitit's note on the logs
    last = [x.strip() for x in trace.splitlines() if x.strip()][-1:] or ["failed"]
    return RuntimeError(f"{last[0]} (job log: {job.paths.stderr})")


# ------------------------------------------------------------------------------------- leases
class Lease:
    """An executor for one sweep and how to stop it: :meth:`submit_all`, :meth:`abort`, ``close``.

    The base class wraps an executor owned by the caller: it is never shut down, and an abort
    only cancels this sweep's jobs that have not started.
    """

    def __init__(self, executor: cf.Executor) -> None:
        self.executor = executor
        self.futures: list[cf.Future] = []

    def submit_all(self, fn: Callable, items: list) -> list[cf.Future]:
        """Submit ``fn(x)`` for each item."""
        many = getattr(self.executor, "map_submit", None)
        self.futures = many(fn, items) if many else [self.executor.submit(fn, x) for x in items]
        return self.futures

    def abort(self) -> None:
        """Ctrl-C or a failed job: drop the jobs not finished."""
        for f in self.futures:
            f.cancel()

    def close(self) -> None:
        """The sweep is over."""


class _PoolLease(Lease):
    def abort(self) -> None:
        """Terminate the workers; the pool's threads end and its semaphores are freed here.

        ``shutdown(wait=False)`` drops the pool's queues at once, so their semaphores would be
        released by whichever thread ends last (the manager or the queue's feeder thread); a CLI
        that then leaves through ``os._exit`` (:func:`sims.runtime.cli.run_cli` after Ctrl-C) can
        cut that thread short between unlinking a semaphore and telling multiprocessing's resource
        tracker, which then prints two "leaked semaphore" warnings under the one-line message.
        Holding the pool's internals until its threads are joined, then collecting them in this
        thread, makes that release synchronous. (No public API kills a pool's workers.)
        """
        import gc

        ex = self.executor
        procs = list((getattr(ex, "_processes", None) or {}).values())
        internals = [getattr(ex, name, None) for name in
                     ("_executor_manager_thread", "_call_queue", "_result_queue")]  # fmt: skip
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
        manager, call_queue, _ = internals
        for thread in (manager, getattr(call_queue, "_thread", None)):
            if thread is not None and thread.ident is not None:
                thread.join(timeout=10)
        del internals, manager, call_queue
        gc.collect()

    def close(self) -> None:
        self.executor.shutdown()


class _DaskLease(Lease):
    def __init__(self, client, key: ExecutorSpec | None) -> None:
        super().__init__(client.get_executor(pure=False))
        self._key = key  # set for a cluster this module started (dask-local)

    def close(self) -> None:
        self.executor.shutdown(wait=False)  # releases the results kept on the workers

    def abort(self) -> None:
        self.executor.shutdown(wait=False)  # cancels this sweep's tasks
        if self._key is not None:  # running tasks cannot be cancelled: stop our workers
            _close_dask(self._key, terminate=True)


class _SubmititLease(Lease):
    def abort(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        self.executor.shutdown(wait=False)


_DASK: dict[ExecutorSpec, tuple[Any, Any]] = {}  # spec -> (client, LocalCluster or None)


def _close_dask(spec: ExecutorSpec, *, terminate: bool = False) -> None:
    """Close a client (and the cluster this module started); ``terminate``: stop running jobs.

    A graceful close would wait for the running tasks (and their workers log errors while the
    scheduler goes away): on an abort the worker processes are terminated first.
    """
    import signal

    client, cluster = _DASK.pop(spec, (None, None))
    if terminate and cluster is not None:
        for nanny in list(cluster.workers.values()):
            pid = getattr(getattr(getattr(nanny, "process", None), "process", None), "pid", None)
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


@atexit.register
def close_clusters() -> None:
    """Close the Dask clients (and ``dask-local`` clusters) of this process; also run at exit."""
    for spec in list(_DASK):
        try:
            _close_dask(spec)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def _dask_client(spec: ExecutorSpec):
    client, _ = _DASK.get(spec, (None, None))
    if client is not None and client.status == "running":
        return client
    import logging

    from distributed import Client, LocalCluster

    if spec.kind == "dask-local":
        n = spec.n_workers or check_workers_env() or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n,
                               threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)  # fmt: skip
        client = Client(cluster, set_as_default=False)  # dask's own default stays as it was
    else:
        cluster = None
        start = (f"start one with `dask scheduler --port {spec.address.rsplit(':', 1)[1]}` and "
                 f"workers with `dask worker {spec.address} --nthreads 1`")  # fmt: skip
        try:
            client = Client(f"tcp://{spec.address}", timeout=DASK_TIMEOUT, set_as_default=False)
        except (OSError, TimeoutError):
            raise UsageError(
                f"executor dask://{spec.address}: no Dask scheduler answered within "
                f"{DASK_TIMEOUT:g} s; {start}"
            ) from None
        try:
            client.wait_for_workers(1, timeout=DASK_TIMEOUT)
            theirs = client.run(source_fingerprint)
        except (OSError, TimeoutError):
            client.close()
            raise UsageError(
                f"executor dask://{spec.address}: the scheduler has no worker after "
                f"{DASK_TIMEOUT:g} s; start one with `dask worker {spec.address} --nthreads 1`"
            ) from None
        mine = source_fingerprint()
        for worker, fp in sorted(theirs.items()):
            if tuple(fp)[0] != mine[0]:
                client.close()
                raise SourceMismatch(
                    f"executor dask://{spec.address}: worker {worker} imports another version "
                    f"of the package (source {fp[0]} in {fp[1]}) than this process (source "
                    f"{mine[0]} in {mine[1]}); start the workers from the same checkout and "
                    "environment (README: 'Run the sweeps on a cluster')"
                )
    _DASK[spec] = (client, cluster)
    return client


def lease(executor, *, workers: int) -> Lease:
    """A :class:`Lease` for one sweep on ``executor`` (a spec or an executor object).

    ``workers`` sizes the ``processes`` pool; ``dask-local`` without ``:N`` starts
    ``$SBT_WORKERS`` (else one per core) workers, kept for the later sweeps of the process.
    """
    if isinstance(executor, ExecutorSpec):
        if executor.kind == "processes":
            import multiprocessing as mp

            return _PoolLease(cf.ProcessPoolExecutor(
                max_workers=workers, mp_context=mp.get_context("spawn"),
                initializer=_ignore_sigint))  # fmt: skip
        if executor.kind == "slurm":
            return _SubmititLease(SubmititExecutor())
        key = executor if executor.kind == "dask-local" else None
        return _DaskLease(_dask_client(executor), key)
    if hasattr(executor, "get_executor"):  # a distributed.Client
        return _DaskLease(executor, None)
    return Lease(executor)


def _ignore_sigint() -> None:  # pool initializer: Ctrl-C is the parent's to handle
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
