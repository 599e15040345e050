"""The sandbox against hostile programs: each item of the threat model in its own test.

Every hostile program here is run with a short timeout; after each call the test checks from the
outside (``/proc``, the file system, a socket) that nothing of the program is left and that it
read or wrote nothing it must not. The root-only layers (``isolation()``) are tested where this
machine grants them; where it does not, the test says so instead of passing silently.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from llm_validation import execution
from llm_validation.execution import ProgramResult, isolation

LAYERS = isolation()
MODES = [pytest.param(True, id="isolated"), pytest.param(False, id="limits-only")]
#: timeout for programs that end by themselves in milliseconds: never reached, even on a machine
#: loaded many times over (limits are judged by how the program ended, not by wall time)
SLACK = 60.0
#: how long a call may take before a test calls it hung (a liveness bound, not a timing test)
HUNG = 120.0


def run_program(code, **kw) -> ProgramResult:
    """``execution.run_program`` with the timeout at ``SLACK`` unless the test sets one: a
    program that ends by itself must never meet the clock, however loaded the machine."""
    kw.setdefault("timeout_s", SLACK)
    return execution.run_program(code, **kw)


def run_programs(codes, **kw) -> list[ProgramResult]:
    """``execution.run_programs`` with the timeout at ``SLACK`` unless the test sets one."""
    kw.setdefault("timeout_s", SLACK)
    return execution.run_programs(codes, **kw)


def _needs(layer: str):
    return pytest.mark.skipif(
        layer not in LAYERS,
        reason=f"this machine does not grant the {layer!r} layer (not root, or no namespaces); "
        "the module docstring states what is then not isolated",
    )


def _processes_with(marker: str) -> list[int]:
    """Host processes whose command line contains ``marker``."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            found.append(int(p))
    return found


def _group_alive(pgid: int) -> list[int]:
    """Host processes of process group ``pgid`` that have not exited (read from ``/proc``)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(p))
    return found


def _run_guarded(code: str, **kw) -> ProgramResult:
    """``run_program`` on a thread; fails (instead of hanging the suite) if it does not return."""
    box = {}
    t = threading.Thread(target=lambda: box.update(r=run_program(code, **kw)), daemon=True)
    t.start()
    t.join(HUNG)
    assert not t.is_alive(), f"run_program did not return within {HUNG:g} s: it waits forever"
    return box["r"]


# ----------------------------------------------------------------------------- benign programs


@pytest.mark.parametrize("isolate", MODES)
def test_benign_programs_print_the_right_answer(isolate):
    progs = {
        "eggs = 16 - 3 - 4\nprint(eggs * 2)": "18",
        "from fractions import Fraction\nprint(Fraction(275, 3) - 90)": "5/3",
        "import math\nprint(math.comb(10, 3))": "120",
        "total = 0\nfor i in range(1, 101):\n    total += i\nprint(total)": "5050",
    }
    res = run_programs(list(progs), workers=2, isolate=isolate)
    for r, want in zip(res, progs.values(), strict=True):
        assert isinstance(r, ProgramResult)
        assert r.ok and r.error is None and not r.timed_out and r.returncode == 0, r
        assert r.stdout.strip() == want


def test_numpy_imports_inside_the_limits():
    r = run_program("import numpy as np\nprint(int(np.arange(5).sum()))", memory_mb=1024)
    assert r.ok and r.stdout == "10\n", r


def test_errors_and_exit_status_are_reported():
    r = run_program("x = [1, 2]\nprint('before')\nprint(x[5])")
    assert not r.ok and r.stdout == "before\n" and r.returncode == 1
    assert r.error == "IndexError: list index out of range"
    r = run_program("import sys\nsys.exit(3)")
    assert (r.ok, r.returncode, r.error) == (False, 3, "exit status 3")
    r = run_program("print(1 +)")
    assert not r.ok and r.error.startswith("SyntaxError")
    r = run_program("import os\nprint('x', flush=True)\nos._exit(0)")
    assert r.ok and r.stdout == "x\n"


# ----------------------------------------------------------------------------- hostile programs


@pytest.mark.parametrize("isolate", MODES)
def test_timeout_kills_the_program_and_every_child(isolate):
    marker = f"sbt-orphan-{uuid.uuid4().hex}"
    # children that sleep in exec'd processes (visible by their argv) and a busy grandchild;
    # with a PID namespace (or an own uid), one child also leaves the process group (setsid)
    escape = isolate and bool({"pid", "user"} & set(LAYERS))
    code = f"""
import os, time
for leave in ({"True, " if escape else ""}False, False):
    if os.fork() == 0:
        if leave:
            os.setsid()
        if os.fork() == 0:
            while True:
                pass
        os.execv("/bin/sleep", ["/bin/sleep", "1000", "{marker}"])
print("started", flush=True)
while True:
    time.sleep(1)
"""
    r = _run_guarded(code, timeout_s=2.0, max_processes=8, isolate=isolate)
    assert r.timed_out and not r.ok and r.error == "timed out after 2 s", r
    assert r.stdout == "started\n"
    assert _processes_with(marker) == []  # nothing survives the call


HOSTILE = """
import os, signal, sys
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)  # inherited by the children, kept across exec
print(os.getpgrp(), flush=True)
for i in range({children}):
    if os.fork() == 0:
        if {detach}:  # let go of the output pipes: the lead's exit ends the output
            os.close(1)
            os.close(2)
        if i == 0:
            os.execv("/bin/sleep", ["/bin/sleep", "1000", "{marker}"])
        ballast = b"x" * ({ballast_mb} << 20)  # exiting takes a while: its memory is torn down
        while True:
            pass
{tail}
"""
FOREVER = "while True:\n    signal.pause()"


@pytest.mark.parametrize("isolate", MODES)
def test_a_program_ignoring_term_int_and_hup_is_killed_with_its_children(isolate):
    """SIGTERM, SIGINT and SIGHUP are ignored: only SIGKILL ends it, and the call returns."""
    marker = f"sbt-deaf-{uuid.uuid4().hex}"
    code = HOSTILE.format(children=3, marker=marker, ballast_mb=64, detach=False, tail=FOREVER)
    r = _run_guarded(code, timeout_s=2.0, max_processes=8, memory_mb=512, isolate=isolate)
    assert r.timed_out and not r.ok, r
    assert r.stdout.strip().isdigit()
    assert _processes_with(marker) == []
    if not isolate:  # the program's group is the host's: none of it may be left
        assert _group_alive(int(r.stdout)) == []


@pytest.mark.parametrize("isolate", MODES)
@pytest.mark.parametrize("ends", ["timeout", "by-itself"])
def test_the_call_returns_only_when_every_process_of_the_group_has_exited(isolate, ends):
    """Children with a large memory take long to exit after SIGKILL: the call waits for them.

    A child that has touched 300 MB spends a while tearing its memory down once killed; a call
    that waited only for the process it started would return while the child still exists.
    Checked both at the timeout and when the lead exits by itself (its background children,
    which let go of the output, are killed then).
    """
    by_itself = ends == "by-itself"
    code = HOSTILE.format(children=2, marker="unused", ballast_mb=300, detach=by_itself,
                          tail="import time\ntime.sleep(1)" if by_itself else FOREVER)
    r = _run_guarded(code, timeout_s=SLACK if by_itself else 3.0, max_processes=8,
                     memory_mb=1024, isolate=isolate)  # fmt: skip
    assert r.stdout.strip().isdigit(), r
    assert r.ok == by_itself and r.timed_out != by_itself, r
    if not isolate:
        assert _group_alive(int(r.stdout)) == []


@pytest.mark.parametrize("isolate", MODES)
def test_memory_limit(isolate):
    r = run_program("x = bytearray(2 << 30)\nprint('allocated')", memory_mb=200, isolate=isolate)
    assert not r.ok and r.error == "MemoryError" and r.stdout == ""


@pytest.mark.parametrize("isolate", MODES)
def test_file_size_limit(isolate):
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (3 << 20))\nprint('wrote')"
    r = run_program(code, file_mb=1, isolate=isolate)
    assert not r.ok and "File too large" in r.error and r.stdout == ""
    assert run_program(code.replace("3 << 20", "1 << 19"), file_mb=1, isolate=isolate).ok


@pytest.mark.parametrize("isolate", [pytest.param(True, id="isolated")])
def test_process_limit_forbids_forks_and_threads(isolate):
    r = run_program("import os\nos.fork()\nprint('forked')", isolate=isolate)
    assert not r.ok and r.error.startswith("BlockingIOError"), r.error
    r = run_program("import threading\nthreading.Thread(target=print).start()", isolate=isolate)
    assert not r.ok and "can't start new thread" in r.error, r.error
    bomb = "import os\nwhile True:\n    os.fork()"
    r = run_program(bomb, max_processes=5, isolate=isolate)  # ends at the limit, not the clock
    assert not r.ok and not r.timed_out and r.error.startswith("BlockingIOError")


@pytest.mark.parametrize("isolate", MODES)
def test_fresh_empty_working_directory_removed_afterwards(isolate):
    code = (
        "import os\nprint(os.getcwd())\nprint(os.listdir('.'))\n"
        "open('note.txt', 'w').write('x')\nos.mkdir('sub')\nos.chmod('sub', 0)\n"
        "print(os.environ['HOME'] == os.getcwd() == os.environ['TMPDIR'])"
    )
    a, b = run_programs([code, code], workers=2, isolate=isolate)
    for r in (a, b):
        cwd, listing, same = r.stdout.splitlines()
        assert r.ok and listing == "[]" and same == "True", r
        assert not os.path.exists(cwd)
    assert a.stdout.splitlines()[0] != b.stdout.splitlines()[0]


def test_environment_is_stripped(monkeypatch):
    monkeypatch.setenv("SBT_TEST_SECRET_TOKEN", "hunter2")
    r = run_program("import os\nprint(sorted(os.environ))")
    names = eval(r.stdout)  # noqa: S307 - a list of names printed by our own program
    assert "SBT_TEST_SECRET_TOKEN" not in names and "hunter2" not in r.stdout
    assert set(names) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "OPENBLAS_NUM_THREADS",
                          "OMP_NUM_THREADS", "MKL_NUM_THREADS"}  # fmt: skip


def test_stdin_is_at_end_of_file():
    r = run_program("import sys\nprint(repr(sys.stdin.read()))\ninput()", timeout_s=60)
    assert not r.timed_out  # did not wait for input
    assert r.stdout == "''\n" and r.error == "EOFError: EOF when reading a line"


def test_output_is_capped():
    r = run_program("while True:\n    print('x' * 999)", max_output=10_000, timeout_s=SLACK)
    assert r.truncated and not r.ok and not r.timed_out  # stopped at the cap, not the clock
    assert len(r.stdout) == 10_000 and set(r.stdout) == {"x", "\n"}
    assert r.error == "output longer than 10000 bytes: stopped"


@pytest.mark.parametrize("isolate", MODES)
def test_output_cap_keeps_the_first_bytes(isolate):
    """A program that prints its answer, then floods: the answer is kept (the first bytes)."""
    code = "print('ANSWER 42')\ni = 0\nwhile True:\n    print(f'line {i}')\n    i += 1"
    r = run_program(code, max_output=5_000, timeout_s=SLACK, isolate=isolate)
    stream = "ANSWER 42\n" + "".join(f"line {i}\n" for i in range(2_000))
    assert r.truncated and not r.ok and not r.timed_out, r
    assert r.stdout == stream[:5_000]  # distinct lines: exactly the start of what it printed
    assert r.stdout.startswith("ANSWER 42\nline 0\nline 1\n")


def test_stderr_keeps_its_last_bytes_and_the_error_is_the_traceback_s_last_line():
    code = ("import sys\nfor i in range(3000):\n    print(f'err {i}', file=sys.stderr)\n"
            "raise ValueError('the last word')")  # fmt: skip
    r = run_program(code, timeout_s=SLACK)
    assert r.error == "ValueError: the last word" and r.returncode == 1
    assert len(r.stderr.encode()) <= 4096 and r.stderr.endswith("ValueError: the last word\n")
    assert "err 2999\n" in r.stderr and "err 0\n" not in r.stderr  # the tail, not the head


def _tree_with_unreadable_folders(top: Path, link: Path | None = None) -> None:
    """``top/a/b/c.txt`` (and ``top/a/b/link`` to ``link``) and ``top/x.txt``; ``a``, ``a/b``
    mode 0 (no access)."""
    (top / "a" / "b").mkdir(parents=True)
    (top / "a" / "b" / "c.txt").write_text("c")
    if link is not None:
        (top / "a" / "b" / "link").symlink_to(link, target_is_directory=True)
    (top / "x.txt").write_text("x")
    (top / "a" / "b").chmod(0)
    (top / "a").chmod(0)


def test_clean_up_fallback_as_a_non_root_caller():
    """The working directory goes even when the program left mode-0 folders in it.

    Root removes those anyway, so the fallback (make each folder writable) is tried by an
    unprivileged caller: a forked child that drops to ``nobody`` where this machine allows it;
    else (not root) this process, which is unprivileged already.
    """
    base = Path(tempfile.mkdtemp(prefix="sbt-cleanup-"))
    base.chmod(0o777)
    outside = base / "outside"  # a folder of the caller's, linked from the tree: left alone

    def attempt() -> str:
        outside.mkdir()
        outside.chmod(0o755)
        plain, tree = base / "plain", base / "tree"
        for t in (plain, tree):
            t.mkdir()
            _tree_with_unreadable_folders(t, link=outside)
        shutil.rmtree(plain, ignore_errors=True)
        if not plain.exists():
            return "plain rmtree removed it: this caller is privileged"
        execution._remove_tree(str(tree))
        if os.path.lexists(tree):
            return "left behind"
        if stat.S_IMODE(outside.stat().st_mode) != 0o755 or not outside.is_dir():
            return "followed the link"
        return "ok"

    try:
        if os.geteuid() == 0:
            pid = os.fork()
            if pid == 0:  # the child: unprivileged from here on; reports through its status
                code = 3
                try:
                    os.setgroups([])
                    os.setgid(65534)
                    os.setuid(65534)
                    code = {"ok": 0, "left behind": 1, "followed the link": 4}.get(attempt(), 2)
                finally:
                    os._exit(code)
            _, st = os.waitpid(pid, 0)
            assert os.WIFEXITED(st), st
            outcome = {0: "ok", 1: "left behind", 2: "plain rmtree removed it", 3: "setuid failed",
                       4: "followed the link"}[os.WEXITSTATUS(st)]  # fmt: skip
        else:
            outcome = attempt()
        assert outcome == "ok"
    finally:
        for d, _, _ in os.walk(base):
            os.chmod(d, 0o700)
        shutil.rmtree(base, ignore_errors=True)


@_needs("user")
def test_no_read_of_private_files():
    folder = Path(tempfile.mkdtemp(prefix="sbt-private-"))
    try:
        folder.chmod(0o755)
        private, public = folder / "private.txt", folder / "public.txt"
        private.write_text("secret-7f3a")
        private.chmod(0o600)
        public.write_text("public-data")
        public.chmod(0o644)
        code = (
            f"print(open({str(public)!r}).read())\n"
            f"try:\n    print(open({str(private)!r}).read())\n"
            "except PermissionError:\n    print('denied')"
        )
        r = run_program(code)
        assert r.ok and r.stdout.split() == ["public-data", "denied"], r  # reachable, not read
        assert "secret" not in r.stdout
        r = run_program("import os\nprint(os.listdir('/root'))")
        assert not r.ok or "secret" not in r.stdout
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


@_needs("readonly")
def test_no_write_outside_its_directory():
    shared = Path(tempfile.mkdtemp(prefix="sbt-shared-"))
    shared.chmod(0o777)  # world-writable: only the read-only mount stops the write
    tag = uuid.uuid4().hex
    targets = [f"/tmp/sbt-{tag}", f"/dev/shm/sbt-{tag}", f"/var/tmp/sbt-{tag}",
               str(shared / f"sbt-{tag}")]  # fmt: skip
    code = "import os\n"
    for t in targets:
        code += f"try:\n    open({t!r}, 'w').write('x')\n    print('wrote')\n"
        code += "except OSError as e:\n    print(type(e).__name__)\n"
    try:
        r = run_program(code)
        assert r.ok and "wrote" not in r.stdout, r
        assert not any(os.path.exists(t) for t in targets)
    finally:
        for t in targets:
            Path(t).unlink(missing_ok=True)
        shared.rmdir()


@_needs("net")
def test_no_network():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "    print('connected')\nexcept OSError as e:\n    print('refused', type(e).__name__)\n"
        "try:\n    socket.getaddrinfo('example.com', 80)\n    print('resolved')\n"
        "except OSError:\n    print('no dns')"
    )
    try:
        r = run_program(code)
        assert r.ok and r.stdout.startswith("refused") and "no dns" in r.stdout, r
        control = run_program(code.split("try:\n    socket.getaddrinfo")[0], isolate=False)
        assert control.stdout.startswith("connected")  # the same program reaches it unisolated
    finally:
        server.close()


@pytest.mark.skipif(
    not ({"user", "pid"} & set(LAYERS)),
    reason="without a user or PID namespace a program can signal its caller (documented)",
)
def test_parent_survives_signals_from_the_program():
    me, group = os.getpid(), os.getpgid(0)
    code = f"""
import os, signal
for target in (os.getppid(), {me}, -{group}, -1):
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        try:
            os.kill(target, sig)
        except OSError as e:
            pass
print("still here")
"""
    r = run_program(code)
    assert os.getpid() == me  # we are alive to check
    assert r.stdout == "" or r.stdout == "still here\n"  # kill(-1) may end the program itself


@pytest.mark.parametrize("isolate", MODES)
def test_segfault_ends_only_the_program(isolate):
    r = run_program("import ctypes\nctypes.string_at(0)", isolate=isolate)
    assert not r.ok and r.signal == 11 and r.error == "killed by SIGSEGV (segmentation fault)"
    assert run_program("print(2 + 2)", isolate=isolate).stdout == "4\n"


# ----------------------------------------------------------------------------- API


def test_isolation_reports_the_layers_this_machine_grants():
    assert set(LAYERS) <= {"user", "net", "pid", "ipc", "readonly"}
    if os.geteuid() != 0:
        assert LAYERS == ()
    r = run_program("pass", isolate=False)
    assert r.isolation == ()
    assert run_program("pass").isolation == LAYERS


def test_run_programs_keeps_order():
    res = run_programs([f"print({i} * {i})" for i in range(12)], workers=4)
    assert [r.stdout.strip() for r in res] == [str(i * i) for i in range(12)]
    assert run_programs([]) == []


def test_bad_arguments():
    with pytest.raises(TypeError, match="`code` must be a str"):
        run_program(b"print(1)")
    with pytest.raises(ValueError, match="`timeout_s` must be"):
        run_program("pass", timeout_s=0)
    with pytest.raises(ValueError, match="`memory_mb` must be"):
        run_program("pass", memory_mb=1)
    with pytest.raises(TypeError, match="`codes` must be a sequence of str"):
        run_programs("print(1)")
    with pytest.raises(TypeError, match="unknown limit"):
        run_programs(["pass"], timeout=3)
    with pytest.raises(ValueError, match="`workers` must be"):
        run_programs(["pass"], workers=0)
    assert not run_program("x = '\x00'").ok
    big = run_program("#" * 200_000)
    assert not big.ok and "longer than" in big.error


def test_working_directory_mode_is_private():
    r = run_program("import os, stat\nprint(oct(stat.S_IMODE(os.stat('.').st_mode)))")
    assert r.ok and r.stdout.strip() in ("0o700", oct(stat.S_IMODE(0o700)))
