"""Result files with provenance, written atomically.

Every result file of the package (NetCDF through xarray, or JSON) carries the config that produced
it, the seed, package versions, the git commit (and whether the tree was dirty), the device and a
run ``status``. Files are written to a temporary sibling and renamed into place, so a crash never
leaves a half-written result behind.

Examples:
    >>> meta = provenance(config={"rho": 0.01}, seed=0)
    >>> sorted(k for k in meta if k in {"config", "seed", "git_commit", "status"})
    ['config', 'git_commit', 'seed', 'status']
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import errno
import importlib.metadata
import json
import os
import platform
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .errors import UsageError
from .executors import executor_in_use

__all__ = [
    "UnreadableFileError",
    "unreadable",
    "ensure_writable",
    "provenance",
    "git_info",
    "package_versions",
    "atomic_path",
    "write_json",
    "read_json",
    "write_netcdf",
    "read_netcdf",
    "to_jsonable",
]

#: Packages whose versions are recorded in every result file (absent ones are skipped).
TRACKED_PACKAGES = (
    "numpy", "scipy", "sympy", "xarray", "matplotlib", "netCDF4", "jax", "jaxlib", "optax",
    "torch", "numba", "transformers", "peft", "accelerate", "datasets", "scikit-learn",
    "sbtheory",
)  # fmt: skip

_REPO_ROOT = Path(__file__).resolve().parents[2]


def git_info(repo: str | os.PathLike | None = None) -> dict[str, Any]:
    """Return ``{"git_commit": sha or None, "git_dirty": bool or None}`` for the package repo."""
    cwd = Path(repo) if repo is not None else _REPO_ROOT
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
        if sha.returncode != 0:
            return {"git_commit": None, "git_dirty": None}
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return {"git_commit": sha.stdout.strip(), "git_dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}


def package_versions(packages: tuple[str, ...] = TRACKED_PACKAGES) -> dict[str, str]:
    """Installed versions of ``packages`` (those not installed are left out)."""
    out = {"python": platform.python_version()}
    for name in packages:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            out[name] = importlib.metadata.version(name)
    return out


def _float_list(a: np.ndarray) -> list:
    """``a.tolist()`` with non-finite entries as ``"nan"``, ``"inf"``, ``"-inf"`` (vectorized)."""
    if np.all(np.isfinite(a)):
        return a.tolist()
    out = a.astype(object)
    out[np.isnan(a)] = "nan"
    out[a == np.inf] = "inf"
    out[a == -np.inf] = "-inf"
    return out.tolist()


def to_jsonable(obj: Any) -> Any:
    """Convert numpy scalars/arrays, paths, dataclasses and tuples into JSON-ready objects.

    Non-finite floats become the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so that the JSON
    stays standard (``json.loads`` in any language reads it).
    """
    import dataclasses

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if len(obj) > 64 and all(type(v) is float for v in obj):  # fast path: long float lists
            return _float_list(np.asarray(obj, dtype=float))
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biu":
            return obj.tolist()
        if obj.dtype.kind == "f":
            return _float_list(obj)
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if np.isnan(x):
            return "nan"
        if np.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    if isinstance(obj, Path):
        return str(obj)
    return obj


def provenance(
    config: Mapping[str, Any] | Any | None = None,
    *,
    seed: int | None = None,
    status: str = "success",
    device: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the provenance block stored in every result file (style rule 10).

    Args:
        config: the run's configuration (mapping or dataclass); stored as JSON-ready data.
        seed: the root random seed of the run (``None`` for deterministic computations).
        status: ``"success"``, ``"failed"`` or ``"cancelled"``.
        device: where it ran; defaults to ``"cpu (<machine>)"``.
        extra: anything else worth recording (timings, warnings).

    Returns:
        A JSON-ready dict with keys ``config, seed, status, created, packages, git_commit,
        git_dirty, device, host, executor`` (plus ``extra`` keys).
    """
    if status not in {"success", "failed", "cancelled", "running"}:
        raise ValueError(
            f"`status` must be one of 'success', 'failed', 'cancelled', 'running'; got {status!r}."
        )
    meta: dict[str, Any] = {
        "config": to_jsonable(config) if config is not None else {},
        "seed": seed,
        "status": status,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "packages": package_versions(),
        **git_info(),
        "device": device or f"cpu ({platform.machine()})",
        "host": platform.node(),
        "executor": executor_in_use(),  # where a sweep's jobs ran (dask://HOST:PORT, slurm...)
    }
    if extra:
        meta.update(to_jsonable(dict(extra)))
    return meta


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto ``path`` on success.

    The parent folder is created if needed. On an exception the temporary file is removed and the
    previous content of ``path`` (if any) is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, _file_mode())  # mkstemp makes 0600; result files are 0666 & ~umask
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _file_mode() -> int:
    """The mode a plain ``open(path, "w")`` would give: ``0o666 & ~umask``."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


#: First bytes of the formats :func:`ensure_writable` may replace (``suffix=``): a NetCDF-3 or
#: NetCDF-4 (HDF5) file is a previous result; any other file under that name is refused.
_MAGIC = {".nc": (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")}


class UnreadableFileError(UsageError):
    """A saved result or checkpoint that cannot be read; the message names the file and the fix.

    A :class:`sims.runtime.errors.UsageError` (so a ``ValueError``): CLIs print it as one line, exit
    2.
    """


def unreadable(
    path: str | os.PathLike,
    exc: BaseException,
    what: str = "saved result",
    fix: str = "delete it (or pass --recompute) to compute it again",
) -> UnreadableFileError:
    """The :class:`UnreadableFileError` for ``path`` that failed to load with ``exc``."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    reason = type(exc).__name__ + (f": {reason[:120]}" if reason else "")
    return UnreadableFileError(
        f"{what} {str(path)!r} cannot be read ({reason}); it is truncated or not a file this "
        f"package wrote: {fix}."
    )


def ensure_writable(
    path: str | os.PathLike,
    *,
    kind: str = "file",
    arg: str = "--out",
    create: bool = False,
    suffix: str | None = None,
) -> Path:
    """Check, before any computation, that a result can be written at ``path``.

    Probes the folder (or, when it does not exist yet, its nearest existing ancestor) with a
    temporary file, so a bad ``--out`` fails in a second with a clear message instead of after
    the run.

    Args:
        path: the file (``kind="file"``) or folder (``kind="dir"``) that will be written.
        kind: ``"file"`` or ``"dir"``.
        arg: the argument name to put in the message (``--out``, ``out_dir``).
        create: create missing folders now. By default nothing is created, so a run refused
            later (or interrupted before writing) leaves no empty folder behind: every writer of
            :mod:`sims.runtime.io` (:func:`atomic_path`) creates the folder with its first file.
        suffix: for ``kind="file"``, the suffix the file must have (``".nc"``); an existing file
            there must then be of that format (a previous result, which the run replaces): any
            other file is refused, so a typo never overwrites a script, a figure or a folder.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: naming ``arg``, the path and what is wrong (an existing folder where a file
            is expected or the reverse, a parent that is a file, no permission to write, a
            wrong suffix, an existing file that is not a result).
    """
    if kind not in ("file", "dir"):
        raise ValueError(f"`kind` must be 'file' or 'dir'; got {kind!r}.")
    target = Path(path).expanduser()
    folder = target if kind == "dir" else target.parent
    if kind == "file" and target.is_dir():
        raise ValueError(f"`{arg}` {str(target)!r} is a folder; give a file path.")
    if kind == "dir" and target.exists() and not target.is_dir():
        raise ValueError(f"`{arg}` {str(target)!r} is an existing file; give a folder.")
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        probe_dir = folder
        while not probe_dir.exists() and probe_dir != probe_dir.parent:
            probe_dir = probe_dir.parent
        if not probe_dir.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, f"{str(probe_dir)!r} is a file")
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=probe_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(
            f"`{arg}` {str(target)!r} is not writable ({reason}); choose another path."
        ) from None
    if suffix is not None and kind == "file":
        if target.suffix != suffix:
            raise ValueError(
                f"`{arg}` {str(target)!r} must be a {suffix} file path (e.g. "
                f"{str(target.with_suffix(suffix))!r})."
            )
        if target.exists() and not _has_format(target, suffix):
            raise ValueError(
                f"`{arg}` {str(target)!r} is an existing file that is not a {suffix} result; "
                "refusing to replace it: give a new path or delete it."
            )
    return target


def _has_format(path: Path, suffix: str) -> bool:
    """Whether ``path`` starts like a file of ``suffix``'s format (no magic known: assume so)."""
    magic = _MAGIC.get(suffix)
    if magic is None:
        return True
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return any(head.startswith(m) for m in magic)


#: Result JSON above this size is written compact: indenting runs json's pure-Python encoder,
#: seconds for the tens of MB of a large run (the C encoder writes it in a fraction of that).
COMPACT_JSON_BYTES = 1 << 20


def write_json(path: str | os.PathLike, payload: Mapping[str, Any], *, meta=None) -> Path:
    """Atomically write ``payload`` (plus ``{"meta": meta}`` when given) as JSON.

    Indented when it is under :data:`COMPACT_JSON_BYTES`, compact above (same content).
    """
    data = dict(payload)
    if meta is not None:
        data["meta"] = meta
    data = to_jsonable(data)
    text = json.dumps(data, sort_keys=False)
    if len(text) < COMPACT_JSON_BYTES:
        text = json.dumps(data, indent=2, sort_keys=False)
    with atomic_path(path) as tmp:
        tmp.write_text(text + "\n")
    return Path(path)


def read_json(path: str | os.PathLike) -> dict[str, Any]:
    """Read a JSON result file.

    Raises:
        UnreadableFileError: naming the file, when it is not valid JSON (e.g. truncated).
        FileNotFoundError: when it does not exist.
    """
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise unreadable(path, exc) from None


def write_netcdf(
    path: str | os.PathLike, ds, *, meta: Mapping[str, Any] | None = None, engine=None
) -> Path:
    """Atomically write an ``xarray.Dataset`` with provenance in ``attrs["meta"]`` (JSON string).

    NetCDF attributes cannot hold nested mappings, so the provenance block is stored as one JSON
    string attribute; :func:`read_netcdf` decodes it back into ``ds.attrs["meta"]``.
    ``engine``: xarray's (``None``: netCDF4 when installed, else scipy's NetCDF-3). The file is
    opened again before it replaces ``path``: one that would not read back is a ValueError.
    """
    import xarray as xr

    ds = ds.copy()
    attrs = {}
    for key, value in ds.attrs.items():
        if isinstance(value, (Mapping, list, tuple)) or value is None or isinstance(value, bool):
            attrs[key] = "json:" + json.dumps(to_jsonable(value))
        else:
            attrs[key] = value
    if meta is not None:
        attrs["meta"] = "json:" + json.dumps(to_jsonable(meta))
    ds.attrs = attrs
    with atomic_path(path) as tmp:
        ds.to_netcdf(tmp, engine=engine)
        try:  # e.g. a zero-length dimension that NetCDF-3 cannot place (issue 30)
            xr.open_dataset(tmp, engine=engine).close()
        except Exception as exc:  # noqa: BLE001 - any reader error
            raise ValueError(
                f"{str(path)!r} would not read back ({type(exc).__name__}: {exc}); not written."
            ) from None
    return Path(path)


def read_netcdf(path: str | os.PathLike):
    """Load a NetCDF result into memory, decoding the JSON attributes of :func:`write_netcdf`.

    Raises:
        UnreadableFileError: naming the file, when it cannot be read (truncated, not NetCDF).
        FileNotFoundError: when it does not exist.
    """
    import xarray as xr

    if not Path(path).exists():
        raise FileNotFoundError(errno.ENOENT, "no such result file", str(path))
    try:
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        ds.attrs = {
            k: (json.loads(v[5:]) if isinstance(v, str) and v.startswith("json:") else v)
            for k, v in ds.attrs.items()
        }
    except MemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated HDF5: OSError, ValueError, KeyError...
        raise unreadable(path, exc) from None
    return ds


# --------------------------------------------------------------------------- run locks
#: Output paths this process holds a lock on: resolved target -> lock file.
_LOCKS: dict[Path, Path] = {}


def lock_folder() -> Path:
    """Where run locks live: ``$SBT_LOCK_DIR``, else ``<temp>/sbtheory-locks-<uid>``.

    One folder per machine (and user), so a lock exists before its output folder does; runs on
    other machines writing to a shared file system are not seen (their host is recorded).
    """
    env = os.environ.get("SBT_LOCK_DIR")
    if env:
        return Path(env)
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"sbtheory-locks-{uid}"


def lock_path(target: str | os.PathLike) -> Path:
    """The lock file of output ``target`` (resolved from the current folder)."""
    import hashlib

    resolved = Path(target).expanduser().resolve()
    return lock_folder() / (hashlib.sha256(str(resolved).encode()).hexdigest()[:24] + ".lock")


def held_locks() -> list[Path]:
    """The resolved output paths this process holds a lock on."""
    return list(_LOCKS)


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc``; ``None`` where unknown): tells PID reuse."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return start is None or process_start(pid) in (None, start)


def acquire_run_lock(target: str | os.PathLike, *, arg: str = "--out", prog: str = "") -> Path:
    """Lock output ``target`` for this process; refuse when another live run holds it.

    The lock file (in :func:`lock_folder`, named by a hash of the resolved target) holds the
    owner's PID, host, start time and command; it is removed by :func:`release_run_locks`
    (:func:`sims.runtime.cli.run_cli` calls it when the command ends, and at interpreter exit). A
    lock whose process is gone (killed, crashed: a stale lock) is taken over. The same process may
    lock a target again (a rerun in-process).

    Returns:
        The lock file.

    Raises:
        UsageError: another live process (PID and host named) writes to ``target``.
    """
    import sys

    resolved = Path(target).expanduser().resolve()
    if resolved in _LOCKS:
        return _LOCKS[resolved]
    lock = lock_path(resolved)
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _lock_folder_error(lock.parent, exc) from None
    me = {"pid": os.getpid(), "host": platform.node(), "start": process_start(os.getpid()),
          "target": str(resolved), "command": " ".join([prog or sys.argv[0], *sys.argv[1:]]),
          "since": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}  # fmt: skip
    for _ in range(3):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            try:
                owner = json.loads(lock.read_text())
                pid = int(owner["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                owner, pid = {}, -1  # unreadable (half-written by a crash): stale
            if owner.get("host") not in (None, platform.node()) or (
                pid > 0 and pid != os.getpid() and _alive(pid, owner.get("start"))
            ):
                raise UsageError(
                    f"{arg} {str(target)!r} is being written by another run (PID {pid} on "
                    f"{owner.get('host', '?')}, since {owner.get('since', '?')}: "
                    f"{owner.get('command', '?')}); wait for it to finish or give another "
                    f"{arg} (if that run is gone, delete {lock})"
                ) from None
            lock.unlink(missing_ok=True)  # stale: its process is gone; take it over
            continue
        except OSError as exc:  # not writable, read-only, not a real folder (/proc)
            raise _lock_folder_error(lock.parent, exc) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        _LOCKS[resolved] = lock
        return lock
    raise UsageError(f"{arg} {str(target)!r}: cannot take its lock {lock}; try again")


def _lock_folder_error(folder: Path, exc: OSError) -> UsageError:
    """The one-line error for a lock folder that cannot hold locks (``$SBT_LOCK_DIR`` named)."""
    reason = exc.strerror or type(exc).__name__
    env = os.environ.get("SBT_LOCK_DIR")
    where = f"SBT_LOCK_DIR={env!r}" if env else f"the lock folder {str(folder)!r}"
    fix = ("set SBT_LOCK_DIR to a writable folder, or unset it to use the temp folder" if env
           else "set SBT_LOCK_DIR to a writable folder")
    return UsageError(f"{where} cannot hold run locks ({reason}); {fix}")


def release_run_locks() -> None:
    """Remove every lock this process holds (:func:`acquire_run_lock`)."""
    while _LOCKS:
        _, lock = _LOCKS.popitem()
        try:
            if json.loads(lock.read_text()).get("pid") == os.getpid():
                lock.unlink()
        except (OSError, ValueError):
            pass


atexit.register(release_run_locks)
