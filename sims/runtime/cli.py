"""The contract every ``python -m ...`` entry point of the package keeps, in one place.

* **Bad input** prints one line (``prog: error: ...``) on stderr and exits with status 2, before
  any work and before anything is written: :class:`ArgumentParser` (argparse errors),
  :class:`UsageError` (of :mod:`sims.runtime.errors`; found by library code: a config value, an
  environment variable, a corrupt saved file) and :class:`sims.runtime.extras.MissingExtraError`,
  both turned into that line by :func:`run_cli`.
* **Environment variables** of the package are validated by :func:`check_env`, which
  :meth:`ArgumentParser.parse_args` calls right after parsing, so every CLI checks the same
  variables the same way. A new variable is one :func:`sims.runtime.errors.register_env_check` line.
* **Sizes** are checked before allocating: :func:`check_resources` refuses a run whose memory
  estimate exceeds the machine's available memory (naming both) and announces a long one.
* **Ctrl-C** ends the run with status 130 and one line (what was saved and how to resume);
  no traceback, and no crash at interpreter exit (:func:`run_cli`).

Examples:
    >>> p = ArgumentParser(prog="demo")
    >>> _ = p.add_argument("--n", type=int, default=1, help="a count")
    >>> p.parse_args(["--n", "3"]).n
    3
    >>> format_bytes(3.2e9)
    '3.2 GB'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from .errors import UsageError, env_checks, registered_env_checks

__all__ = [
    "ArgumentParser",
    "add_folder_arguments",
    "check_folders",
    "Estimate",
    "LONG_RUN_SECONDS",
    "UsageError",
    "check_env",
    "check_resources",
    "display_path",
    "fail",
    "format_bytes",
    "format_seconds",
    "lock_outputs",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "seed",
    "seed_list",
    "machine_memory",
    "run_cli",
]


# Every environment variable of the package that changes what a CLI does is validated by
# :func:`check_env` before any work of every CLI. Each is registered, with the function of the
# module it concerns that checks it, in :mod:`sims.runtime.errors` (``register_env_check``); the
# check is imported only when its variable is set, so a CLI pays nothing (no import) for variables
# nobody uses, and this module imports no experiment module.


def check_env(checks: Sequence[tuple[str, Callable[[], object]]] | None = None) -> None:
    """Validate every set environment variable registered in :mod:`.errors` (or ``checks``).

    Raises:
        UsageError: the first invalid variable's message (one line, naming it and the fix).
    """
    from sims.runtime.extras import MissingExtraError

    if checks is None:
        checks = env_checks({name for name in registered_env_checks() if name in os.environ})
    for name, check in checks:
        if name not in os.environ:
            continue
        try:
            check()
        except UsageError:
            raise
        except (ValueError, MissingExtraError) as exc:  # e.g. SBT_EXECUTOR=slurm, no `cluster`
            raise UsageError(str(exc)) from None


# --------------------------------------------------------------------------- parser


class ArgumentParser(argparse.ArgumentParser):
    """An ``argparse`` parser with the package's contract.

    Errors are one line on stderr with exit status 2; :meth:`parse_args` also validates the
    package's environment variables (:func:`check_env`), so no CLI can forget them.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``prog: error: message (see --help)`` and exit with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_args(self, args=None, namespace=None):  # noqa: D102 - argparse's, plus checks
        argv = list(sys.argv[1:] if args is None else args)
        empty = _empty_value(argv)
        if empty is not None:
            self.error(empty)
        parsed = super().parse_args(argv, namespace)
        _expand_home(parsed)
        try:
            check_env()
            if _RUNNING:  # a command run by run_cli (not a parser used by a library or a test)
                lock_outputs(parsed, prog=self.prog)
        except UsageError as exc:
            self.exit(2, f"{self.prog}: error: {exc}\n")
        return parsed


#: String-valued flags that name a path (Path-valued ones are recognised by their type).
PATH_ATTRIBUTES = ("out", "run_dir", "results", "config", "reuse")


def _expand_home(args: argparse.Namespace) -> None:
    """Expand a leading ``~`` in path flags (the shell leaves ``--out=~/x`` as it is).

    The write, the printed path and the lock then all name ``$HOME/x``.
    """
    for attr, value in vars(args).items():
        if isinstance(value, Path) or (attr in PATH_ATTRIBUTES and isinstance(value, str)):
            if str(value).startswith("~"):
                setattr(args, attr, type(value)(os.path.expanduser(value)))


def _empty_value(argv: Sequence[str]) -> str | None:
    """The message for an empty value in ``argv`` (``--out ""``, ``--seeds=``), else ``None``.

    No flag of the package takes an empty string: an empty path would mean the current folder,
    an empty list "all" or a default, silently. A flag meaning "none" says so with a word.
    """
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a.startswith("--") and a.endswith("=") and len(a) > 3:
            return f"argument {a[:-1]}: an empty value; give one (or leave the flag out)"
        if isinstance(a, str) and not a.strip():
            flag = argv[i - 1] if i and str(argv[i - 1]).startswith("-") else "a positional"
            return f"argument {flag}: an empty value; give one (or leave the flag out)"
    return None


#: Attributes of a parsed command line that name where a run writes (locked while it runs).
OUTPUT_ATTRIBUTES = ("out", "run_dir")
#: Flags under which a command writes nothing (its outputs are not locked).
NO_WRITE_ATTRIBUTES = ("no_write", "dry_run", "list", "markdown", "writes_nothing")


def lock_outputs(args: argparse.Namespace, *, prog: str = "") -> None:
    """Lock the run's output paths (``--out``, ``--run-dir``) against a second live run.

    Called by :meth:`ArgumentParser.parse_args` for a command run by :func:`run_cli`;
    :func:`sims.runtime.io.acquire_run_lock`: another live process writing there is one line and
    exit status 2; the locks are released when the command ends (:func:`run_cli`). Ranks > 0 of a
    distributed launch share rank 0's outputs and take no lock.

    Raises:
        UsageError: naming the other run's PID and host.
    """
    from .io import acquire_run_lock

    if any(getattr(args, a, False) for a in NO_WRITE_ATTRIBUTES):
        return
    if os.environ.get("RANK", "0").strip() not in ("0", ""):
        return
    for attr in OUTPUT_ATTRIBUTES:
        value = getattr(args, attr, None)
        if isinstance(value, str | os.PathLike) and str(value):
            acquire_run_lock(value, arg="--" + attr.replace("_", "-"), prog=prog)


def seed(text: str) -> int:
    """An ``argparse`` type: a seed, a non-negative integer (numpy refuses negative seeds).

    >>> seed("7")
    7
    """
    try:
        value = int(text)
    except (TypeError, ValueError):
        msg = f"a seed must be a non-negative integer; got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 0:
        raise argparse.ArgumentTypeError(
            f"a seed must be a non-negative integer (numpy's generators refuse negative seeds); "
            f"got {text!r}"
        )
    return value


def seed_list(text: str) -> tuple[int, ...]:
    """An ``argparse`` type: distinct non-negative seeds, comma-separated (``0,1,2``).

    >>> seed_list("0,1,2")
    (0, 1, 2)
    """
    parts = [t.strip() for t in str(text).split(",")]
    if not text or not all(parts):
        raise argparse.ArgumentTypeError(f"expected seeds like 0,1,2; got {text!r}")
    try:
        seeds = tuple(seed(t) for t in parts)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (in {text!r})") from None
    repeated = sorted({x for x in seeds if seeds.count(x) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(
            f"seed {repeated[0]} is given twice in {text!r}; a repeated seed is the same run"
        )
    return seeds


def _int_at_least(text: str, low: int, what: str, bound: str) -> int:
    """``int(text)`` if it is >= ``low``, else argparse's error naming ``what``."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected {what}; got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}{bound}; got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 1 (a count, a size).

    >>> positive_int("3")
    3
    """
    return _int_at_least(text, 1, "a positive integer", " (>= 1)")


def non_negative_int(text: str) -> int:
    """An ``argparse`` type: an integer >= 0 (``0`` meaning a default, e.g. torch's threads)."""
    return _int_at_least(text, 0, "an integer >= 0", "")


def positive_float(text: str) -> float:
    """An ``argparse`` type: a finite number > 0 (a learning rate, a scale).

    >>> positive_float("1e-3")
    0.001
    """
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"expected a positive number; got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0; got {text!r}")
    return value


def display_path(path: str | os.PathLike) -> str:
    """``path`` as help texts show it, never as a machine's absolute path.

    Relative to the working folder when it lies below it, else with the package's checkout
    written ``<repo>``.
    """
    p = Path(path)
    for base, label in ((Path.cwd(), ""), (Path(__file__).resolve().parents[2], "<repo>/")):
        try:
            return label + str(p.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(p)


def add_folder_arguments(parser: argparse.ArgumentParser, *, out: Path, results: Path) -> None:
    """The ``--out`` (rendered figures) and ``--results`` (saved results) folders of a CLI.

    Check them with :func:`check_folders` before any work.
    """
    parser.add_argument(
        "--out",
        type=Path,
        default=out,
        help=f"folder for the figures (default {display_path(out)})",
    )
    parser.add_argument("--results", type=Path, default=results,
                        help=f"folder of the saved results, computed when missing (default "
                             f"{display_path(results)})")  # fmt: skip


def check_folders(args: argparse.Namespace) -> None:
    """Check ``args.out`` and ``args.results`` are writable folders, creating nothing.

    Raises:
        UsageError: naming the flag and what is wrong (an existing file, no permission).
    """
    from .io import ensure_writable

    try:
        ensure_writable(args.out, kind="dir", arg="--out")
        ensure_writable(args.results, kind="dir", arg="--results")
    except UsageError:
        raise
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# --------------------------------------------------------------------------- sizes


#: A run estimated to take longer than this gets a one-line note and a progress display.
LONG_RUN_SECONDS = 120.0


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What a run needs, estimated before it starts (upper bounds within a small factor).

    Attributes:
        memory: peak memory in bytes.
        seconds: wall time in seconds on one CPU core of a current machine (``None``: unknown).
        what: the flags that set the size, for messages (``"--dim 1000000000"``).
        fix: what to change if the run cannot be done (``"use a smaller --dim"``).
    """

    memory: float
    seconds: float | None = None
    what: str = "this run"
    fix: str = "use smaller sizes"


def format_bytes(n: float) -> str:
    """``3.2 GB``, ``512 MB``, ``7.3 PB``: decimal units, two significant digits."""
    if not math.isfinite(n):
        return "an unbounded amount of memory"
    if n >= 1e18:
        return f"{n:.1e} bytes"
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2g} {unit}" if n / scale < 10 else f"{n / scale:.0f} {unit}"
    return f"{n:.0f} B"


def format_seconds(s: float) -> str:
    """``45 s``, ``12 min``, ``3.1 h``, ``2.4 days``, ``8 years``."""
    if not math.isfinite(s):
        return "forever"
    for unit, scale in (("years", 3.156e7), ("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if s >= scale:
            v = s / scale
            return f"{v:.2g} {unit}" if v < 10 else f"{v:.0f} {unit}"
    return f"{s:.0f} s"


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def machine_memory() -> tuple[int, int]:
    """``(total, available)`` memory in bytes, honouring a container's cgroup limit."""
    total = avail = None
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        total = int(info["MemTotal"].split()[0]) * 1024
        avail = int(info.get("MemAvailable", info["MemFree"]).split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, ValueError, OSError):  # not POSIX: no limit we can read
            total = 2**63
        avail = total
    limit = _read_int("/sys/fs/cgroup/memory.max") or _read_int(
        "/sys/fs/cgroup/memory/memory.limit_in_bytes"
    )
    if limit is not None and limit < total:
        used = _read_int("/sys/fs/cgroup/memory.current") or _read_int(
            "/sys/fs/cgroup/memory/memory.usage_in_bytes"
        )
        total, avail = limit, min(avail, limit - (used or 0))
    return int(total), int(max(avail, 0))


def check_resources(
    est: Estimate, *, prog: str | None = None, quiet: bool = False, progress: bool = True
) -> bool:
    """Refuse a run that cannot fit in memory; announce a long one. Call before allocating.

    Args:
        est: the run's :class:`Estimate`.
        prog: the CLI's name, prefixed to the note.
        quiet: do not print the long-run note.
        progress: whether the run shows progress (the note says so).

    Returns:
        Whether the run is long (over :data:`LONG_RUN_SECONDS`): callers then show progress.

    Raises:
        UsageError: the memory estimate exceeds the memory available now; the message gives
            the estimate, the machine's total and available memory and ``est.fix``.
    """
    total, avail = machine_memory()
    if not est.memory <= avail:
        raise UsageError(
            f"{est.what} needs about {format_bytes(est.memory)} of memory (estimate) but this "
            f"machine has {format_bytes(total)} ({format_bytes(avail)} available); {est.fix}."
        )
    long = est.seconds is not None and est.seconds > LONG_RUN_SECONDS
    if long and not quiet:
        head = f"{prog}: note: " if prog else "note: "
        shown = "progress is shown on stderr, " if progress else ""
        print(f"{head}{est.what} takes about {format_seconds(est.seconds)} on one core "
              f"(estimate); {shown}Ctrl-C stops it.", file=sys.stderr)  # fmt: skip
    return long


# --------------------------------------------------------------------------- running


def fail(message: str, *, prog: str | None = None, status: int = 2) -> NoReturn:
    """Print one error line (``prog: error: message``) on stderr and exit with ``status``."""
    head = f"{prog}: error: " if prog else "error: "
    print(head + message, file=sys.stderr)
    raise SystemExit(status)


def _interrupted(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` behind ``exc`` (itself or its cause), else ``None``.

    Ctrl-C while an extension module initializes surfaces as an ``ImportError`` caused by it.
    """
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _close_progress_bars() -> None:
    """End open tqdm bars, so the error line starts on a line of its own."""
    tqdm_std = sys.modules.get("tqdm.std")
    if tqdm_std is None:
        return
    for bar in list(getattr(tqdm_std.tqdm, "_instances", ())):
        try:
            bar.close()
        except Exception:  # noqa: BLE001 - a bar that cannot close must not hide the message
            pass


def _swallowing(frame) -> bool:
    """Whether an exception raised in ``frame`` would be printed and ignored by Python.

    That is the case inside garbage-collection callbacks (JAX registers one) and ``__del__``
    methods ("Exception ignored in ..."): a Ctrl-C raised there is lost and the run goes on.
    """
    import gc

    callbacks = {getattr(cb, "__code__", None) for cb in gc.callbacks}
    while frame is not None:
        if frame.f_code in callbacks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def _run_exit_handlers() -> None:
    """Stop process pools and release their semaphores, as a normal exit would.

    In the order of Python's own shutdown: the process-pool manager threads are woken and
    joined, then multiprocessing's exit handler ends workers and runs its finalizers (otherwise
    its resource tracker warns about leaked semaphores). The other ``atexit`` handlers are
    skipped on purpose: JAX's destroys its backend client, which crashes (or exits -1) while a
    compilation still runs on its threads.
    """
    for module, name in (("concurrent.futures.process", "_python_exit"),
                         ("multiprocessing.util", "_exit_function")):  # fmt: skip
        handler = getattr(sys.modules.get(module), name, None)
        if handler is None:
            continue
        try:
            handler()
        except Exception:  # noqa: BLE001 - the process ends next whatever happened
            pass


def _install_sigint_handler(prog: str):
    """Ctrl-C raises ``KeyboardInterrupt`` (as Python's default), never where it would be lost.

    A press that lands in a garbage-collection callback or a ``__del__`` is delivered again 50 ms
    later; a second press ends the process at once with the same line and status 130 (for a
    cleanup that hangs). SIGTERM (``kill PID``, a scheduler's stop) takes the same path and ends
    with status 143: a sweep's workers are terminated with it instead of computing on orphaned.
    Returns the previous SIGINT and SIGTERM handlers (``None`` where nothing was installed).
    """
    import _thread
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGINT)
    pressed = []

    def handler(signum, frame):
        if pressed:
            _close_progress_bars()
            print(f"{prog}: error: interrupted", file=sys.stderr, flush=True)
            os._exit(130)
        if _swallowing(frame):
            threading.Timer(0.05, _thread.interrupt_main).start()
            return
        pressed.append(True)
        raise KeyboardInterrupt

    if previous is not signal.SIG_IGN:  # started in the background (`cmd &`): keep it ignored
        signal.signal(signal.SIGINT, handler)
    previous_term = signal.getsignal(signal.SIGTERM)
    if previous_term is signal.SIG_DFL:  # `kill PID`: the same cleanup as Ctrl-C (a sweep's
        # workers are terminated, not left computing), then status 143 (128 + SIGTERM)

        def on_term(signum, frame):
            _TERMINATED.append(True)
            handler(signal.SIGINT, frame)

        signal.signal(signal.SIGTERM, on_term)
    return previous, previous_term


#: The commands :func:`run_cli` is running (nested calls stack): their parsers lock outputs.
_RUNNING: list[str] = []

#: Set once SIGTERM arrived (the interrupt then ends with status 143 instead of 130).
_TERMINATED: list = []


def run_cli(main: Callable[[Sequence[str] | None], int], argv=None, *, prog: str) -> int:
    """Call ``main(argv)`` with the package's exit contract for user errors and Ctrl-C.

    :class:`UsageError` and :class:`sims.runtime.extras.MissingExtraError` become one line and
    status 2; ``KeyboardInterrupt`` becomes one line (its message, e.g. what a sweep saved and how
    to resume) and status 130; a ``MemoryError`` that an estimate missed becomes one line and
    status 2; a closed output pipe (``... | head``) ends quietly with status 141. Anything else
    propagates (a bug deserves its traceback).

    When ``argv`` is ``None`` the command line is the process's own (``python -m ...``; call
    ``main(argv)`` with a list in-process), so after Ctrl-C the process ends at once
    (``os._exit``) once the line is printed: native thread pools of JAX/XLA (a
    compilation still running) or torch otherwise crash during interpreter teardown (a
    segmentation fault after the message). Finished results are already on disk: every file is
    written atomically and ``finally`` blocks have run by then.
    """
    from .extras import MissingExtraError

    owner = argv is None  # the process's own command line: this call owns the process
    previous = _install_sigint_handler(prog) if owner else None
    _TERMINATED.clear()
    _RUNNING.append(prog)
    try:
        return main(argv)
    except (UsageError, MissingExtraError) as exc:
        fail(str(exc), prog=prog)
    except MemoryError:
        fail("ran out of memory (the size estimate was too low); use smaller sizes", prog=prog)
    except BrokenPipeError:  # `... | head` closed stdout: stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by the closed pipe
    except BaseException as exc:
        kb = _interrupted(exc)
        if kb is None:
            raise
        _close_progress_bars()
        message = str(kb) or "interrupted"
        if owner:
            print(f"{prog}: error: {message}", file=sys.stderr)
            from .io import release_run_locks

            release_run_locks()  # os._exit skips the `finally` below
            _run_exit_handlers()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # noqa: BLE001 - a closed pipe must not block the exit
                    pass
            os._exit(143 if _TERMINATED else 130)
        fail(message, prog=prog, status=130)
    finally:
        from .io import release_run_locks

        _RUNNING.pop()
        if not _RUNNING:
            release_run_locks()
        if previous is not None:
            import signal

            if previous[0] is not signal.SIG_IGN:
                signal.signal(signal.SIGINT, previous[0])
            if previous[1] is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
