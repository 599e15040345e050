r"""Run model-written programs in a sandbox and capture what they print (program-of-thought).

Model-written code is hostile by assumption: a program-of-thought completion may loop forever,
fork, allocate all memory, fill the disk, read private files, open sockets or signal the process
that scores it. :func:`run_program` runs one program in a fresh interpreter and returns a
:class:`ProgramResult` (``ok``, ``stdout``, ``timed_out``, ``error``, ...);
:func:`run_programs` runs many on a pool of threads, each waiting on its own sandboxed process.
Nothing of the program runs in the calling process: no ``exec``/``eval`` here.

**This is containment for scoring, not a security boundary for untrusted users.** It stops the
accidents and the obvious attacks of generated code from corrupting a scoring run or the
machine; it is not hardened against a determined attacker with kernel exploits (no seccomp
filter, no cgroups; the kernel's whole system-call surface stays reachable).

What every run gets (any user, any machine with Linux ``setrlimit``):

* a **wall-clock timeout** (``timeout_s``), after which the whole process group is killed with
  ``SIGKILL`` (which no program can ignore, unlike ``SIGTERM``, ``SIGINT`` or ``SIGHUP``); the
  call returns only once nothing of the program is left running: the process group is killed
  again until none of its processes is left (a killed process exits only when next scheduled,
  long after the ``kill`` on a loaded machine), and with a PID namespace (below) until its init
  is gone; the same clean-up follows a program that ends by itself or is stopped by a limit;
* **resource limits**: CPU seconds (``cpu_s``; ``SIGXCPU``, then ``SIGKILL``), address space
  (``memory_mb``), size of any file written (``file_mb``), processes and threads
  (``max_processes``, 0 by default: no ``fork``, no thread), 64 open files, no core dump;
* a **fresh, empty working directory**, removed afterwards (also ``HOME`` and ``TMPDIR``);
* an **environment stripped** of the caller's variables (``PATH``, ``LANG`` and single-thread
  settings for BLAS only; the interpreter runs isolated, ``-I``);
* **stdin** at end of file, **output capped** at ``max_output`` bytes (the program is killed
  when it prints more; ``truncated``), stderr kept to its last 4 kB;
* a separate **process** (a segfault or ``os._exit`` ends only the program).

What a run gets in addition when the caller is **root** (checked with ``os.geteuid()``), as far as
the kernel allows (each layer that was applied is listed in ``ProgramResult.isolation``):

* ``"user"``: the program runs as an unprivileged user and group (a uid of its own from a
  reserved range, or ``nobody``), no supplementary groups, ``no_new_privs``: it cannot read files
  that are private to their owner (mode ``0600``/``0700``) nor signal the caller;
* ``"net"``: a new, empty network namespace (loopback down): no connection, local or remote;
* ``"pid"`` and ``"ipc"``: new PID and IPC namespaces with a private ``/proc``; every process of
  the program dies with it, even one that left the process group;
* ``"readonly"``: a new mount namespace in which every file system is read-only except the
  working directory (a size-limited ``tmpfs``): no write outside it (``/tmp`` and
  ``/dev/shm`` included).

**Not isolated when the caller is not root** (or where the kernel refuses namespaces, e.g. a
container without ``CAP_SYS_ADMIN``; see :func:`isolation`): the program runs as the caller's
user, so it can read whatever the caller can read, write wherever the caller can write, open
network connections, and signal the caller's other processes (the caller included); children it
starts (only with ``max_processes > 0``) that leave the process group may outlive the call.
In that case run the evaluation in a container or as root.

Examples:
    >>> r = run_program("x = 16 - 3 - 4\nprint(x * 2)")
    >>> r.ok, r.stdout
    (True, '18\n')
    >>> r = run_program("while True: pass", timeout_s=0.5, cpu_s=5)
    >>> r.ok, r.timed_out
    (False, True)
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Sequence

__all__ = ["ProgramResult", "run_program", "run_programs", "isolation"]

#: First uid/gid of the range from which a root caller draws one unprivileged user per run.
_UID_BASE = 1_700_000_000
_UID_SPAN = 1 << 20
_NOBODY = 65534
_STDERR_KEEP = 4096

# The sandbox side. Runs as ``python -I -S -c _BOOT <config> <code>``; as root it enters new
# namespaces, makes every mount read-only, mounts a tmpfs on the working directory and forks
# the init (PID 1) of a new PID namespace, which forks the program (PID 2) and reports its exit
# status on the status pipe; then, in the program's process: resource limits, an unprivileged
# user, the code.
_BOOT = r"""
import os, sys, json, resource
cfg = json.loads(sys.argv[1])
code = sys.argv[2]
status = os.fdopen(cfg["status_fd"], "w", buffering=1)
layers = []
cwd = os.getcwd()
root = cfg["isolate"] and os.geteuid() == 0
libc = None
if root:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if cfg["uid"] >= 0:
        os.chown(cwd, cfg["uid"], cfg["gid"])
    MNT, PID, NET, IPC, UTS = 0x20000, 0x20000000, 0x40000000, 0x08000000, 0x04000000
    if libc.unshare(MNT | PID | NET | IPC | UTS) == 0:
        layers += ["net", "pid", "ipc"]
        MS_REC, MS_PRIVATE, MS_BIND, MS_REMOUNT, MS_RDONLY = 16384, 1 << 18, 4096, 32, 1
        MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
        libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None)
        # The interpreter's files under a folder others cannot enter (e.g. /root/.pyenv): hide
        # that folder behind an empty tmpfs and bind the interpreter's folders back in place.
        fds = [(p, os.open(p, os.O_PATH | os.O_DIRECTORY)) for p in cfg["expose"]]
        for top in cfg["hide"]:
            libc.mount(b"tmpfs", top.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755")
        for p, fd in fds:
            os.makedirs(p, exist_ok=True)
            libc.mount(b"/proc/self/fd/%d" % fd, p.encode(), None, MS_BIND | MS_REC, None)
            os.close(fd)

        class Attr(ctypes.Structure):
            _fields_ = [(n, ctypes.c_uint64) for n in ("set", "clr", "prop", "userns")]

        ro = libc.syscall(442, -100, b"/", 0x8000, ctypes.byref(Attr(1, 0, 0, 0)), 32) == 0
        if not ro:  # kernels before 5.12: remount every mount point read-only, one by one
            ro = True
            with open("/proc/self/mountinfo") as fh:
                points = [line.split()[4] for line in fh]
            for p in sorted(set(points), key=len):
                flags = MS_REMOUNT | MS_BIND | MS_RDONLY
                if libc.mount(None, p.encode(), None, flags, None) != 0 and p == "/":
                    ro = False
        opts = "size=%dk,nr_inodes=4096,mode=0700,uid=%d,gid=%d" % (
            cfg["tmpfs_kb"], cfg["uid"], cfg["gid"])
        if ro and libc.mount(b"tmpfs", cwd.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                             opts.encode()) == 0:
            os.chdir(cwd)
            layers.append("readonly")
        pid = os.fork()
        if pid:  # outside the new PID namespace: wait for its init
            status.write("child %d\n" % pid)
            os.waitpid(pid, 0)
            os._exit(0)
        # PID 1 of the namespace: a private /proc, then the program as PID 2 (init ignores
        # signals such as SIGXCPU that must end the program); its status goes to the caller
        libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: SIGKILL when the waiting parent dies
        libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        pid = os.fork()
        if pid:
            _, st = os.waitpid(pid, 0)
            status.write(("signal %d\n" % os.WTERMSIG(st)) if os.WIFSIGNALED(st)
                         else ("exit %d\n" % os.WEXITSTATUS(st)))
            os._exit(0)
    else:
        status.write("note unshare failed (errno %d): no namespaces\n" % ctypes.get_errno())
        if cfg["hide"]:  # the interpreter's files would be out of an unprivileged user's reach
            status.write("note the interpreter is under %s: the program keeps our user\n"
                         % cfg["hide"][0])
            cfg["uid"] = -1
nproc = cfg["max_processes"] + 1
if not root and cfg["max_processes"]:  # shared uid: this many tasks more than it has now
    uid = os.getuid()
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and os.stat("/proc/" + p).st_uid == uid:
                nproc += len(os.listdir("/proc/%s/task" % p))
        except OSError:
            pass
R = resource
for name, soft, hard in (("RLIMIT_CPU", cfg["cpu_s"], cfg["cpu_s"] + 1),
                         ("RLIMIT_AS", cfg["memory"], cfg["memory"]),
                         ("RLIMIT_FSIZE", cfg["fsize"], cfg["fsize"]),
                         ("RLIMIT_NOFILE", 64, 64), ("RLIMIT_CORE", 0, 0),
                         ("RLIMIT_NPROC", nproc, nproc)):
    R.setrlimit(getattr(R, name), (soft, hard))
if root and cfg["uid"] >= 0:
    try:
        os.setgroups([])
        os.setgid(cfg["gid"])
        os.setuid(cfg["uid"])
        layers.append("user")
    except OSError as exc:
        status.write("note could not drop to uid %d: %s\n" % (cfg["uid"], exc))
if libc is not None:
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: SIGKILL when the waiting parent dies
status.write("layers %s\n" % ",".join(layers))
status.close()
del status, cfg, libc, R, layers
sys.argv = ["<program>"]
sys.path[:0] = json.loads(os.environ.pop("SBT_SANDBOX_PATH", "[]"))
exec(compile(code, "<program>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"""


@dataclasses.dataclass(frozen=True)
class ProgramResult:
    """What a sandboxed program did.

    Attributes:
        ok: it exited with status 0 within every limit (not timed out, output not truncated).
        stdout: what it printed (decoded as UTF-8, invalid bytes replaced; at most
            ``max_output`` bytes).
        timed_out: it ran past ``timeout_s`` and was killed.
        error: ``None`` when ``ok``; else why not: the last line of its traceback
            (``"ZeroDivisionError: division by zero"``), the signal that ended it
            (``"killed by SIGXCPU (CPU time limit, 1 s)"``), the timeout, or the output cap.
        returncode: its exit status (``None`` when killed by a signal).
        signal: the number of the signal that ended it, else ``None``.
        truncated: it printed more than ``max_output`` bytes and was stopped.
        stderr: the last 4 kB of its standard error.
        seconds: wall time of the call.
        isolation: the layers applied on top of the limits (``"user"``, ``"net"``, ``"pid"``,
            ``"ipc"``, ``"readonly"``); empty for a non-root caller (see the module docstring).
    """

    ok: bool
    stdout: str
    timed_out: bool
    error: str | None
    returncode: int | None = None
    signal: int | None = None
    truncated: bool = False
    stderr: str = ""
    seconds: float = 0.0
    isolation: tuple[str, ...] = ()


_ids_lock = threading.Lock()
_rng = random.Random()


@functools.cache
def _own_ids_allowed() -> bool:
    """Whether uids/gids of the reserved range exist in this user namespace."""
    ok = True
    for kind in ("uid", "gid"):
        try:
            with open(f"/proc/self/{kind}_map") as fh:
                rows = [tuple(int(x) for x in line.split()) for line in fh if line.strip()]
        except OSError:
            rows = [(0, 0, 2**32 - 1)]
        ok &= any(a <= _UID_BASE and _UID_BASE + _UID_SPAN <= a + n for a, _, n in rows)
    return ok


def _sandbox_ids() -> tuple[int, int]:
    """A fresh unprivileged uid (= gid) for a root caller, else ``nobody``; ``-1`` if not root."""
    if os.geteuid() != 0:
        return -1, -1
    if not _own_ids_allowed():
        return _NOBODY, _NOBODY
    with _ids_lock:
        n = _UID_BASE + _rng.randrange(_UID_SPAN)
    return n, n


def _site_paths() -> list[str]:
    """Where installed packages live, so a program can ``import numpy`` under ``-I -S``."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if p))


@functools.cache
def _interpreter_exposure() -> dict[str, list[str]]:
    """Folders others cannot enter above the interpreter's files, and the folders to bind back.

    ``{"hide": [...], "expose": [...]}``: as root, the sandbox mounts an empty tmpfs on each
    ``hide`` folder (so an unprivileged program can enter it, and sees nothing of it) and binds
    each ``expose`` folder (the interpreter's prefix and site-packages) back at its path.
    """
    import stat

    hide, expose = set(), []
    wanted = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, *_site_paths())}
    for p in sorted(wanted, key=len):
        if any(p.startswith(e + os.sep) for e in expose) or not os.path.isdir(p):
            continue
        parts = p.split(os.sep)
        for i in range(2, len(parts) + 1):
            anc = os.sep.join(parts[:i])
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                hide.add(anc)
                expose.append(p)
                break
    hide = {h for h in hide if not any(h.startswith(o + os.sep) for o in hide)}
    return {"hide": sorted(hide), "expose": expose}


def _environment(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "SBT_SANDBOX_PATH": json.dumps(_site_paths()),
    }


def _check(name: str, value, *, lo: float, integer: bool = False, fix: str = "") -> None:
    bad_type = isinstance(value, bool) or not isinstance(value, (int, float))
    if integer:
        bad_type = bad_type or not float(value).is_integer()
    if bad_type or not math.isfinite(value) or value < lo:
        kind = "an int" if integer else "a finite number"
        raise ValueError(f"`{name}` must be {kind} >= {lo}; got {value!r}. {fix}".rstrip())


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _group_members(pgid: int) -> list[int]:
    """Host processes of process group ``pgid`` that have not exited (zombies excluded)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(p))
    return found


def _end_group(pgid: int, bound_s: float = 60.0) -> bool:
    """SIGKILL process group ``pgid`` until none of its processes is left (True), or ``bound_s``.

    A killed process exits only when it is next scheduled (on a loaded machine, long after the
    ``kill``), so one ``killpg`` is not enough for "nothing is left": the group is swept until it
    is empty. Its id cannot be reused meanwhile (a group's id stays taken while it has members).
    """
    stop = time.monotonic() + bound_s
    while True:
        _kill_group(pgid)
        if not _group_members(pgid):
            return True
        if time.monotonic() > stop:
            return False
        time.sleep(0.005)


def _drain(fd: int) -> bytes:
    """What is left to read in pipe ``fd`` without blocking (its writers are gone or stuck)."""
    os.set_blocking(fd, False)
    got = bytearray()
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            break
        if not chunk:
            break
        got += chunk
    return bytes(got)


def _remove_tree(path: str) -> None:
    """Remove ``path`` (a sandbox's working directory) whatever modes the program left in it.

    Root removes a mode-0 folder anyway; any other caller needs write and search permission on
    each folder, so a first ``rmtree`` that leaves something behind is followed by making every
    folder (not a symbolic link: it could point at the caller's own files) ``0700`` and a second
    ``rmtree``. Files vanishing meanwhile are not an error.
    """
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path) or os.path.islink(path):
        return
    todo = [path]
    while todo:
        d = todo.pop()
        try:
            os.chmod(d, 0o700)
            with os.scandir(d) as it:
                todo += [e.path for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass
    shutil.rmtree(path, ignore_errors=True)


def _gone(pid: int) -> bool:
    """Whether host process ``pid`` has exited (gone, or a zombie: its children are dead too)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _sweep_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (a uid of this run only), until none is left."""
    for _ in range(50):
        found = False
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                if os.stat(f"/proc/{p}").st_uid == uid and not _gone(int(p)):
                    found = True
                    os.kill(int(p), signal.SIGKILL)
            except OSError:
                pass
        if not found:
            return
        time.sleep(0.01)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def run_program(
    code: str,
    *,
    timeout_s: float = 5.0,
    cpu_s: int | None = None,
    memory_mb: int = 1024,
    file_mb: int = 4,
    max_output: int = 65536,
    max_processes: int = 0,
    isolate: bool = True,
) -> ProgramResult:
    r"""Run Python source ``code`` in a sandbox and return what it printed.

    Args:
        code: the program (Python source), run as ``__main__`` in a fresh interpreter.
        timeout_s: wall-clock limit; the program and every process it started are killed then.
        cpu_s: CPU-time limit in whole seconds (default: ``timeout_s`` rounded up).
        memory_mb: address-space limit (``RLIMIT_AS``); importing numpy needs about 300.
        file_mb: largest file the program may write (``RLIMIT_FSIZE``); its working directory
            holds at most 4x this in all when a ``tmpfs`` is mounted there (root).
        max_output: bytes of standard output kept; a program printing more is stopped.
        max_processes: processes or threads the program may start (0: none).
        isolate: apply the root-only layers (user, namespaces, read-only mounts) when the caller
            is root; ``False`` runs with the limits only (as a non-root caller would).

    Returns:
        A :class:`ProgramResult`.

    Raises:
        TypeError: when ``code`` is not a string.
        ValueError: for a non-positive ``timeout_s`` or a negative limit.

    Examples:
        >>> run_program("print(sum(range(5)))").stdout
        '10\n'
        >>> run_program("1/0").error
        'ZeroDivisionError: division by zero'
    """
    if not isinstance(code, str):
        raise TypeError(f"`code` must be a str (Python source); got {type(code).__name__}.")
    _check("timeout_s", timeout_s, lo=1e-3, fix="Give a positive number of seconds.")
    if cpu_s is None:
        cpu_s = max(1, math.ceil(timeout_s))
    _check("cpu_s", cpu_s, lo=1, integer=True, fix="RLIMIT_CPU counts whole seconds.")
    _check("memory_mb", memory_mb, lo=32, integer=True, fix="Python needs about 32 MB.")
    _check("file_mb", file_mb, lo=0, integer=True)
    _check("max_output", max_output, lo=1, integer=True)
    _check("max_processes", max_processes, lo=0, integer=True)
    if len(code.encode("utf-8", "surrogatepass")) > 100_000:
        return ProgramResult(False, "", False, "program longer than 100 kB: not run")
    if "\x00" in code:
        return ProgramResult(False, "", False, "SyntaxError: source code contains a null byte")
    t0 = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="sbt-sandbox-")
    uid, gid = _sandbox_ids() if isolate else (-1, -1)
    r_status, w_status = os.pipe()
    cfg = {
        "status_fd": w_status,
        "isolate": bool(isolate),
        "uid": uid,
        "gid": gid,
        "cpu_s": int(cpu_s),
        "memory": int(memory_mb) << 20,
        "fsize": int(file_mb) << 20,
        "tmpfs_kb": max(64, 4 * int(file_mb) << 10),
        "max_processes": int(max_processes),
        **(_interpreter_exposure() if uid >= 0 else {"hide": [], "expose": []}),
    }
    try:
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _BOOT, json.dumps(cfg), code],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=_environment(workdir),
            pass_fds=(w_status,),
            start_new_session=True,
        )
    except BaseException:
        os.close(r_status)
        os.close(w_status)
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    os.close(w_status)
    out, err, status = bytearray(), bytearray(), bytearray()
    timed_out = truncated = False
    deadline = time.monotonic() + timeout_s
    try:
        with selectors.DefaultSelector() as sel:
            for f, buf in ((proc.stdout, out), (proc.stderr, err), (r_status, status)):
                sel.register(f, selectors.EVENT_READ, buf)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for key, _ in sel.select(left):
                    fd = key.fd
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    key.data.extend(chunk)
                    if key.data is err and len(err) > 2 * _STDERR_KEEP:
                        del err[: len(err) - _STDERR_KEEP]
                if len(out) > max_output:
                    truncated = True
                    break
        # Every pipe is closed: wait (until the deadline) for the exit without reaping, so
        # the process group cannot be reused before it is killed.
        while not (timed_out or truncated):
            if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(0.002)
    finally:
        _kill_group(proc.pid)
        proc.wait()
        # every process of the group, not only the one we started, is gone before we return
        left = not _end_group(proc.pid)
        for f in (proc.stdout, proc.stderr):
            f.close()
        status += _drain(r_status)  # e.g. the PID-namespace init's id, not read before a timeout
        os.close(r_status)
    notes = status.decode("utf-8", "replace").splitlines()
    child = next((int(n.split()[1]) for n in notes if n.startswith("child ")), None)
    layers = next((n[7:].split(",") for n in notes if n.startswith("layers ")), [])
    layers = tuple(x for x in layers if x)
    if child is not None:  # PID-namespace init: once it is gone, so is everything it started
        stop = time.monotonic() + 60
        while not _gone(child) and time.monotonic() < stop:
            time.sleep(0.002)
    if uid >= 0 and uid != _NOBODY and "pid" not in layers and max_processes:
        _sweep_uid(uid)
    _remove_tree(workdir)
    if left:  # a process stuck in the kernel (uninterruptible sleep) for a minute
        import warnings

        warnings.warn(f"processes {_group_members(proc.pid)} of a sandboxed program survived "
                      "SIGKILL for 60 s (stuck in the kernel?)", RuntimeWarning, stacklevel=2)
    rc: int | None = proc.returncode
    sig: int | None = None
    ended = next((n for n in notes if n.startswith(("exit ", "signal "))), None)
    if ended is not None:
        kind, val = ended.split()
        rc, sig = (int(val), None) if kind == "exit" else (None, int(val))
    elif child is not None:  # the waiting parent was killed: the program did not finish
        rc, sig = None, signal.SIGKILL
    elif rc is not None and rc < 0:
        rc, sig = None, -rc
    stderr = err[-_STDERR_KEEP:].decode("utf-8", "replace")
    error = None
    if timed_out:
        error = f"timed out after {timeout_s:g} s"
    elif truncated:
        error = f"output longer than {max_output} bytes: stopped"
    elif sig is not None:
        name = _signal_name(sig)
        why = {"SIGXCPU": f" (CPU time limit, {cpu_s} s)", "SIGSEGV": " (segmentation fault)"}
        error = f"killed by {name}{why.get(name, '')}"
    elif rc != 0:
        lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        error = lines[-1].strip() if lines else f"exit status {rc}"
    return ProgramResult(
        ok=error is None,
        stdout=bytes(out[:max_output]).decode("utf-8", "replace"),
        timed_out=timed_out,
        error=error,
        returncode=rc,
        signal=sig,
        truncated=truncated,
        stderr=stderr,
        seconds=time.perf_counter() - t0,
        isolation=layers,
    )


def run_programs(
    codes: Sequence[str], *, workers: int | None = None, progress: bool = False, **limits
) -> list[ProgramResult]:
    """:func:`run_program` on every program of ``codes``, ``workers`` at a time (input order).

    Args:
        codes: the programs.
        workers: programs run at once (default: 4 per CPU core, at most 16; each mostly waits
            on its interpreter's start-up).
        progress: show a progress bar.
        **limits: keyword arguments of :func:`run_program` (``timeout_s``, ``memory_mb``...).

    Raises:
        TypeError: when ``codes`` is not a sequence of strings.
        ValueError: for ``workers`` < 1 or a bad limit (before anything runs).
    """
    if isinstance(codes, str) or not all(isinstance(c, str) for c in codes):
        raise TypeError("`codes` must be a sequence of str (one program each).")
    if workers is None:  # each waits mostly on process start-up: more than the cores
        workers = min(16, 4 * (os.cpu_count() or 1))
    _check("workers", workers, lo=1, integer=True)
    codes = list(codes)
    if not codes:
        return []
    _validate(limits)
    from concurrent.futures import ThreadPoolExecutor

    from tqdm.auto import tqdm

    with ThreadPoolExecutor(max_workers=min(int(workers), len(codes))) as pool:
        it = pool.map(lambda c: run_program(c, **limits), codes)
        return list(tqdm(it, total=len(codes), desc="programs", disable=not progress))


def _validate(limits: dict) -> None:
    """Reject unknown or bad ``run_program`` keyword arguments before any program runs."""
    import inspect

    known = set(inspect.signature(run_program).parameters) - {"code"}
    unknown = sorted(set(limits) - known)
    if unknown:
        raise TypeError(f"unknown limit(s) {unknown}; choose from {sorted(known)}.")
    if "timeout_s" in limits:
        _check("timeout_s", limits["timeout_s"], lo=1e-3)
    for name in ("memory_mb", "file_mb", "max_output", "max_processes", "cpu_s"):
        if limits.get(name) is not None:
            _check(name, limits[name], lo=0, integer=True)


@functools.cache
def isolation() -> tuple[str, ...]:
    """The layers a sandboxed program gets on this machine, beyond the limits (probed once).

    Examples:
        >>> set(isolation()) <= {"user", "net", "pid", "ipc", "readonly"}
        True
    """
    return run_program("pass").isolation
