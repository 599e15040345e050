"""The shared CLI contract: one-line errors with exit 2, Ctrl-C with exit 130."""

import os
from pathlib import Path

import pytest

from sims.runtime.cli import ArgumentParser, UsageError, run_cli, seed_list
from sims.runtime.extras import MissingExtraError
from sims.runtime.parallel import SweepInterrupted

REPO = Path(__file__).resolve().parents[2]


def test_parser_errors_are_one_line(capsys):
    p = ArgumentParser(prog="demo")
    p.add_argument("--n", type=int, help="a count")
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--n", "x"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err == "demo: error: argument --n: invalid int value: 'x' (see --help)\n"


def test_seed_list_refuses_a_repeated_seed():
    """A repeated seed is the same run twice: refused, naming the seed and the text."""
    import argparse

    assert seed_list("0,1,2") == (0, 1, 2)
    for text, dup in (("0,1,0", 0), ("3, 3", 3), ("5,2,7,2", 2)):
        with pytest.raises(argparse.ArgumentTypeError, match=f"seed {dup} is given twice"):
            seed_list(text)
    p = ArgumentParser(prog="demo")
    p.add_argument("--seeds", type=seed_list)
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--seeds", "1,1"])
    assert exc.value.code == 2


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (UsageError("MARKOV_SCALE='bogus' must be one of quick, cpu, paper"), 2,
         "demo: error: MARKOV_SCALE='bogus' must be one of quick, cpu, paper"),
        (MissingExtraError("x needs the `torch` extra"), 2,
         "demo: error: x needs the `torch` extra"),
        (SweepInterrupted("interrupted: 3 of 8 jobs finished"), 130,
         "demo: error: interrupted: 3 of 8 jobs finished"),
        (KeyboardInterrupt(), 130, "demo: error: interrupted"),
    ],
)  # fmt: skip
def test_run_cli_turns_user_errors_and_ctrl_c_into_one_line(error, code, line, capsys):
    def main(argv):
        raise error

    with pytest.raises(SystemExit) as exc:
        run_cli(main, [], prog="demo")
    assert exc.value.code == code
    assert capsys.readouterr().err == line + "\n"


def test_run_cli_lets_bugs_through():
    def main(argv):
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        run_cli(main, [], prog="demo")
    assert run_cli(lambda argv: 0, [], prog="demo") == 0


def test_parse_args_validates_the_environment(monkeypatch, capsys):
    p = ArgumentParser(prog="demo")
    p.add_argument("--n", type=int, help="a count")
    monkeypatch.setenv("SBT_WORKERS", "-3")
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["--n", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("demo: error: SBT_WORKERS='-3' must be a positive integer") and (
        err.count("\n") == 1
    )
    with pytest.raises(SystemExit) as exc:  # --help still works
        p.parse_args(["--help"])
    assert exc.value.code == 0


def test_check_env_runs_each_set_variable_once(monkeypatch):
    from sims.runtime.cli import check_env
    from sims.runtime.errors import registered_env_checks

    names = list(registered_env_checks())
    assert names == ["SBT_WORKERS", "SBT_EXECUTOR", "MARKOV_SCALE"]
    for name in names:
        monkeypatch.delenv(name, raising=False)
    check_env()
    monkeypatch.setenv("MARKOV_SCALE", "huge")
    with pytest.raises(UsageError, match="MARKOV_SCALE='huge' unknown"):
        check_env()
    monkeypatch.delenv("MARKOV_SCALE")
    monkeypatch.setenv("SBT_EXECUTOR", "dask-locale:2")
    with pytest.raises(UsageError, match="SBT_EXECUTOR='dask-locale:2' is not an executor"):
        check_env()
    monkeypatch.delenv("SBT_EXECUTOR")
    calls = []

    def bad():
        calls.append(1)
        raise ValueError("SBT_TEST_VAR='x' is not a size; set a number of bytes")

    check_env([("SBT_TEST_VAR", bad)])  # unset: not called
    monkeypatch.setenv("SBT_TEST_VAR", "x")
    with pytest.raises(UsageError, match="SBT_TEST_VAR='x' is not a size"):
        check_env([("SBT_TEST_VAR", bad)])
    assert calls == [1]


def test_check_resources_refuses_with_estimate_and_machine_memory(monkeypatch, capsys):
    import dataclasses

    import sims.runtime.cli as cli

    monkeypatch.setattr(cli, "machine_memory", lambda: (16_000_000_000, 9_000_000_000))
    est = cli.Estimate(memory=12e9, seconds=10.0, what="--n 7", fix="lower --n")
    with pytest.raises(cli.UsageError) as exc:
        cli.check_resources(est)
    assert str(exc.value) == (
        "--n 7 needs about 12 GB of memory (estimate) but this machine has 16 GB (9 GB "
        "available); lower --n."
    )
    assert cli.check_resources(dataclasses.replace(est, memory=8.9e9)) is False
    assert capsys.readouterr().err == ""
    long = dataclasses.replace(est, memory=1e6, seconds=7200.0)
    assert cli.check_resources(long, prog="demo") is True
    assert capsys.readouterr().err == (
        "demo: note: --n 7 takes about 2 h on one core (estimate); progress is shown on stderr, "
        "Ctrl-C stops it.\n"
    )
    assert cli.check_resources(dataclasses.replace(long, seconds=119.0), prog="demo") is False
    assert capsys.readouterr().err == ""


def test_machine_memory_is_plausible():
    from sims.runtime.cli import machine_memory

    total, avail = machine_memory()
    assert 2**28 < total < 2**50 and 0 <= avail <= total


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (999, "999 B"),
        (3.2e9, "3.2 GB"),
        (12e9, "12 GB"),
        (7.3e15, "7.3 PB"),
        (2e24, "2.0e+24 bytes"),
    ],
)
def test_format_bytes(n, text):
    from sims.runtime.cli import format_bytes

    assert format_bytes(n) == text


def test_display_path_never_shows_the_checkout(tmp_path, monkeypatch):
    from pathlib import Path

    from sims.runtime.cli import display_path

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)
    assert display_path(repo / "figures" / "out") == "<repo>/figures/out"
    monkeypatch.chdir(repo)
    assert display_path(repo / "figures" / "out") == "figures/out"
    assert display_path("results/theory") == "results/theory"


def test_interrupt_inside_an_import_error_is_an_interrupt(capsys):
    def main(argv):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:  # what Ctrl-C during `import jaxlib` looks like
            raise ImportError("Encountered an error while initializing the extension.") from exc

    with pytest.raises(SystemExit) as exc:
        run_cli(main, [], prog="demo")
    assert exc.value.code == 130 and capsys.readouterr().err == "demo: error: interrupted\n"


def _python(code: str):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=repo, timeout=60)  # fmt: skip


def test_ctrl_c_of_the_process_skips_interpreter_teardown():
    """After Ctrl-C, `python -m ...` ends with os._exit: no teardown where native thread pools
    (a JAX compilation still running) crashed with a segmentation fault (issue 24)."""
    res = _python(
        "import atexit, sys\n"
        "from sims.runtime.cli import run_cli\n"
        "atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
        "def main(argv):\n"
        "    print('partial output', end='')\n"
        "    raise KeyboardInterrupt('interrupted; 3 of 8 jobs saved')\n"
        "run_cli(main, None, prog='demo')\n"
    )
    assert res.returncode == 130
    assert res.stderr == "demo: error: interrupted; 3 of 8 jobs saved\n"
    assert res.stdout == "partial output"  # flushed before the exit


def test_ctrl_c_landing_in_a_gc_callback_is_not_lost():
    """JAX runs Python in a gc callback: a Ctrl-C raised there was printed and ignored."""
    res = _python(
        "import gc, os, signal, sys, time\n"
        "from sims.runtime.cli import run_cli\n"
        "fired = []\n"
        "def cb(phase, info):\n"
        "    if phase == 'start' and not fired:\n"
        "        fired.append(1)\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        for _ in range(100000): pass  # the handler runs here\n"
        "def main(argv):\n"
        "    gc.callbacks.append(cb)\n"
        "    gc.collect()\n"
        "    t = time.monotonic()\n"
        "    while time.monotonic() - t < 10: pass\n"
        "    return 0\n"
        "sys.exit(run_cli(main, None, prog='demo'))\n"
    )
    assert res.returncode == 130, res.stderr
    assert res.stderr == "demo: error: interrupted\n"


def test_closed_output_pipe_ends_quietly_with_status_141():
    """`... | head`: the reader closes the pipe; the CLI stops with 141 and no traceback."""
    import subprocess
    import sys

    code = (
        "from sims.runtime.cli import run_cli\n"
        "def main(argv):\n"
        "    for i in range(10**6):\n"
        "        print('line', i)\n"
        "    return 0\n"
        "raise SystemExit(run_cli(main, prog='demo'))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdout.readline() == b"line 0\n"
    proc.stdout.close()  # what `head -1` does after its line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == ""


# --------------------------------------------------------------------------- run locks


def _holder(target, lock_dir, *, then: str):
    """A real process that locks ``target`` and then runs ``then`` (Python)."""
    import subprocess
    import sys

    code = ("import sys, time\nfrom sims.runtime.io import acquire_run_lock\n"
            f"acquire_run_lock({str(target)!r}, prog='holder')\nprint('locked', flush=True)\n"
            + then)  # fmt: skip
    env = dict(os.environ, SBT_LOCK_DIR=str(lock_dir), PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_run_lock_is_refused_while_held_released_at_exit_and_taken_over_when_stale(
    tmp_path, monkeypatch
):
    import json
    import platform
    import signal

    from sims.runtime.io import acquire_run_lock, lock_path, release_run_locks

    monkeypatch.setenv("SBT_LOCK_DIR", str(tmp_path / "locks"))
    target = tmp_path / "out"
    proc = _holder(target, tmp_path / "locks", then="time.sleep(60)")
    lock = lock_path(target)
    owner = json.loads(lock.read_text())
    assert owner["pid"] == proc.pid and owner["host"] == platform.node()
    assert "holder" in owner["command"]
    with pytest.raises(UsageError) as exc:  # a live owner
        acquire_run_lock(target, arg="--out")
    assert str(exc.value).startswith(
        f"--out {str(target)!r} is being written by another run (PID {proc.pid} on "
        f"{platform.node()}, since "
    )
    proc.send_signal(signal.SIGKILL)  # dies without releasing: a stale lock stays behind
    proc.wait()
    assert lock.exists()
    assert acquire_run_lock(target) == lock  # taken over
    assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert acquire_run_lock(target) == lock  # the same process again: fine
    release_run_locks()
    assert not lock.exists()
    done = _holder(target, tmp_path / "locks", then="")  # ends normally: released at exit
    done.wait(timeout=30)
    assert done.returncode == 0 and not lock.exists()
    # relative targets are the same lock as their absolute form, from the current folder
    monkeypatch.chdir(tmp_path)
    assert lock_path("out") == lock_path(target) == lock_path(tmp_path / "x" / ".." / "out")


@pytest.mark.parametrize("where", ["/proc/x", "a_file", "read_only/locks"])
def test_an_unusable_lock_folder_is_one_line_exit_2_before_any_work(tmp_path, where):
    """SBT_LOCK_DIR in /proc, on a file, or under a read-only folder: one line naming it."""
    import subprocess
    import sys

    (tmp_path / "a_file").write_text("x")
    (tmp_path / "read_only").mkdir(mode=0o500)
    lock_dir = where if where.startswith("/") else str(tmp_path / where)
    env = dict(os.environ, SBT_LOCK_DIR=lock_dir, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "sims.sam_entropy", "--out", str(tmp_path / "o"),
                        "--no-plot"], env=env, capture_output=True, text=True, timeout=120)
    if where.startswith("read_only") and os.geteuid() == 0:  # root writes anywhere
        assert r.returncode == 0
        return
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"SBT_LOCK_DIR={lock_dir!r} cannot hold run locks" in r.stderr
    assert "set SBT_LOCK_DIR to a writable folder" in r.stderr
    assert not (tmp_path / "o").exists()


def test_out_with_a_tilde_after_the_equals_sign_is_the_home_folder(tmp_path):
    """``--out=~/x`` (no shell expansion): written, printed and locked as $HOME/x."""
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(REPO),
               SBT_LOCK_DIR=str(tmp_path / "locks"))
    r = subprocess.run([sys.executable, "-m", "sims.sam_entropy", "--out=~/x", "--no-plot"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (home / "x" / "sam_entropy.json").exists() and not (tmp_path / "~").exists()
    assert f"wrote {home / 'x' / 'sam_entropy.nc'}" in r.stdout
    # and the lock is the one of $HOME/x (the parser expands before locking)
    from sims.runtime.cli import ArgumentParser

    p = ArgumentParser(prog="t")
    p.add_argument("--out", type=Path)
    p.add_argument("--results", type=str)
    a = p.parse_args(["--out=~/y", "--results=~"])
    assert a.out == Path.home() / "y" and a.results == str(Path.home())


def test_a_lock_of_another_host_is_never_taken_over(tmp_path, monkeypatch):
    """Its PID means nothing here: the message names the host and the file to delete."""
    import json

    from sims.runtime.io import acquire_run_lock, lock_path

    monkeypatch.setenv("SBT_LOCK_DIR", str(tmp_path / "locks"))
    lock = lock_path(tmp_path / "out")
    lock.parent.mkdir()
    lock.write_text(json.dumps({"pid": 1, "host": "node-17", "since": "then", "command": "c"}))
    with pytest.raises(UsageError, match=f"PID 1 on node-17.*delete {lock}"):
        acquire_run_lock(tmp_path / "out")
    lock.write_text("{half-writ")  # a crash while writing it: unreadable, so stale
    assert acquire_run_lock(tmp_path / "out") == lock
